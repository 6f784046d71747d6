//! An ecosystem's own mutation tool, read instead of orbit's operators (`--tool`). Only
//! cargo-mutants for now: `cargo mutants --in-diff FILE` run on a clean checkout of the
//! commit (its submodules checked out), under the loop's sandbox, with the base's
//! `.cargo/mutants.toml` (never the change's), its `mutants.out/outcomes.json` read back,
//! each mutant shown as orbit shows its own (file, line, what was changed, killed or
//! survived). It runs its own `cargo test` on each mutant, not the loop's checks.

use std::path::Path;

use serde_json::Value;

use super::run::{Plan, Verdict};
use crate::error::{Error, Result};

pub use crate::cli::MutationTool as Tool;

/// One mutant the tool tried: where, what it did, and the verdict as orbit words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolMutant {
    pub file: String,
    /// 1-based, as the tool gives it.
    pub line: usize,
    /// The tool's own description ("replace > with >= in is_positive").
    pub text: String,
    pub verdict: Verdict,
}

/// The mutants of cargo-mutants' `outcomes.json` (the baseline left out). Its shape: an
/// `outcomes` array whose items have `scenario` (`"Baseline"`, or `{"Mutant": {file,
/// span: {start: {line}}, name, replacement, ...}}`) and `summary` (`Success`,
/// `CaughtMutant`, `MissedMutant`, `Timeout`, `Unviable`, `Failure`).
pub fn read_cargo_mutants(bytes: &[u8]) -> Result<Vec<ToolMutant>> {
    let bad = |why: &str| Error::Usage(format!("cargo-mutants' outcomes.json {why}"));
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(&format!("is not JSON ({e})")))?;
    let outcomes = v["outcomes"]
        .as_array()
        .ok_or_else(|| bad("has no \"outcomes\" array"))?;
    let mut out = Vec::new();
    for o in outcomes {
        let Some(m) = o["scenario"].get("Mutant") else {
            continue; // the baseline
        };
        let file = m["file"]
            .as_str()
            .ok_or_else(|| bad("names a mutant without its \"file\""))?;
        let line = m["span"]["start"]["line"].as_u64().unwrap_or(0) as usize;
        let text = m["name"]
            .as_str()
            .map(str::to_string)
            .or_else(|| {
                m["replacement"]
                    .as_str()
                    .map(|r| format!("replaced by {r}"))
            })
            .unwrap_or_default();
        let verdict = match o["summary"].as_str().unwrap_or("") {
            "CaughtMutant" => Verdict::Failed {
                check: "cargo test (cargo-mutants)".into(),
                build: false,
            },
            "MissedMutant" => Verdict::Passed,
            "Timeout" => Verdict::TimedOut,
            "Unviable" => Verdict::NotApplied("unviable: the mutant does not build".into()),
            other => Verdict::NotApplied(format!("cargo-mutants said {other:?}")),
        };
        out.push(ToolMutant {
            file: file.to_string(),
            line,
            text,
            verdict,
        });
    }
    Ok(out)
}

/// The folder of the checkout cargo-mutants reads the diff (and the base's config) from and
/// writes its `mutants.out` into: inside the checkout, the one place a run under the loop's
/// sandbox writes that orbit then reads (cargo-mutants copies the tree without it).
pub const TOOL_DIR: &str = ".orbit-cargo-mutants";

/// What cargo-mutants did with a change: the mutants it tried, and what is said of the run.
#[derive(Debug, Default)]
pub struct ToolRun {
    pub mutants: Vec<ToolMutant>,
    pub notes: Vec<String>,
}

/// The last lines of the tool's output, for a message.
fn tail(log: &Path) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

/// Runs cargo-mutants in the checkout `ws` of the commit on `diff` (the change's diff of its
/// Rust files), with `config` the base's `.cargo/mutants.toml` (`None`: no config at all,
/// never the one the change may have written): the mutants it tried. It runs as the loop's
/// checks run: under the loop's sandbox when it has one (through the rerun driver, as one
/// command run as a check), with the network the loop gives its checks. Its own output is
/// logged into `scratch` (outside the sandbox's reach).
pub fn run_cargo_mutants(
    plan: &Plan,
    ws: &Path,
    scratch: &Path,
    diff: &[u8],
    config: Option<&[u8]>,
) -> Result<ToolRun> {
    let dir = ws.join(TOOL_DIR);
    // A fresh folder, never one the commit holds (a link there would take the writes).
    std::fs::create_dir(&dir).map_err(|e| {
        Error::io(
            format!(
                "cannot create {} in the checkout of the commit (the commit holds {TOOL_DIR}? adequacy's tool run writes there)",
                dir.display()
            ),
            e,
        )
    })?;
    let diff_file = dir.join("change.diff");
    std::fs::write(&diff_file, diff).map_err(|e| Error::io("cannot write the diff", e))?;
    let mut words: Vec<String> = vec![
        "cargo".into(),
        "mutants".into(),
        "--in-diff".into(),
        diff_file.display().to_string(),
        "--output".into(),
        dir.display().to_string(),
        "--timeout".into(),
        plan.run_timeout.as_secs().max(1).to_string(),
        "--no-shuffle".into(),
    ];
    match config {
        Some(text) => {
            let f = dir.join("mutants.toml");
            std::fs::write(&f, text).map_err(|e| Error::io("cannot write the base's config", e))?;
            words.extend(["--config".into(), f.display().to_string()]);
        }
        None => words.push("--no-config".into()),
    }
    let line = crate::shell::quote_words(&words)?;
    let log = scratch.join("cargo-mutants.log");
    let out = std::fs::File::create(&log)
        .map_err(|e| Error::io(format!("cannot create {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| Error::io(format!("cannot open {}", log.display()), e))?;
    let here = std::fs::canonicalize(plan.loop_dir)
        .map_err(|e| Error::io(format!("cannot resolve {}", plan.loop_dir.display()), e))?;
    let status = crate::rerun::command(plan.mode, "setup", &here, ws, plan.repo, scratch)
        .env("ORBIT_RERUN_SETUP", &line)
        .env("CARGO_TERM_COLOR", "never")
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| Error::io("cannot run bash", e))?;
    let code = status.code();
    if let Some(refused) = crate::rerun::refused(code, &std::fs::read(&log).unwrap_or_default()) {
        return Err(refused);
    }
    // cargo-mutants exits 0 (every mutant caught, or none to try), 2 (some missed), 3 (some
    // timed out), 4 (the baseline failed), 1, 5, 6 or 70 (it could not run as asked).
    if code == Some(4) {
        return Err(Error::Refused(format!(
            "cargo-mutants says the tests fail on the unmutated commit (its baseline: its own cargo test, in its own copy of the tree), so it measured nothing. It said:\n{}",
            tail(&log)
        )));
    }
    let path = dir.join("mutants.out").join("outcomes.json");
    let bytes = crate::fsx::read_regular_opt(&path)?;
    match (code, bytes) {
        (Some(0 | 2 | 3), Some(bytes)) => Ok(ToolRun {
            mutants: read_cargo_mutants(&bytes)?,
            notes: Vec::new(),
        }),
        // With no mutant in the diff's lines it ends before it writes anything.
        (Some(0), None) => Ok(ToolRun {
            mutants: Vec::new(),
            notes: vec![format!(
                "cargo-mutants found no mutant in the change's Rust lines (it said: {})",
                tail(&log).lines().last().unwrap_or("nothing").trim()
            )],
        }),
        (code, _) => Err(Error::Usage(format!(
            "cargo mutants ended with {} and no results (is cargo-mutants installed where the checks run? cargo install cargo-mutants). It said:\n{}",
            code.map_or("a signal".to_string(), |c| format!("exit {c}")),
            tail(&log)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// outcomes.json as cargo-mutants 27.1.0 wrote it for the Rust fixture's crate with a
    /// function `is_large` beside the fix (its baseline and three of its mutants: one that
    /// does not build, one missed, one caught; the toolchain's path cut to `cargo`).
    const OUTCOMES: &str = include_str!("../../tests/fixtures/cargo-mutants/outcomes.json");

    #[test]
    fn outcomes_json_reads_as_killed_survived_and_not_applied() {
        let m = read_cargo_mutants(OUTCOMES.as_bytes()).unwrap();
        assert_eq!(m.len(), 3, "the baseline is not a mutant");
        assert_eq!((m[0].file.as_str(), m[0].line), ("src/lib.rs", 14));
        assert_eq!(
            m[0].text,
            "src/lib.rs:14:5: replace total -> Cents with Default::default()"
        );
        assert!(matches!(m[0].verdict, Verdict::NotApplied(_)));
        assert_eq!((m[1].line, m[1].verdict.clone()), (59, Verdict::Passed));
        assert_eq!(
            m[1].text,
            "src/lib.rs:59:5: replace is_large -> bool with true"
        );
        assert!(matches!(m[2].verdict, Verdict::Failed { .. }));
        let err = read_cargo_mutants(b"{}").unwrap_err().to_string();
        assert!(err.contains("outcomes"), "{err}");
    }

    #[test]
    fn a_timeout_reads_as_timed_out_and_a_mutant_without_a_name_by_its_replacement() {
        let text = r#"{"outcomes":[{"scenario":{"Mutant":{"file":"src/lib.rs",
          "span":{"start":{"line":8,"column":1}},"replacement":"()"}},"summary":"Timeout"}]}"#;
        let m = read_cargo_mutants(text.as_bytes()).unwrap();
        assert_eq!(m[0].verdict, Verdict::TimedOut);
        assert_eq!(m[0].text, "replaced by ()");
    }
}
