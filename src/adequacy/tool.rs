//! An ecosystem's own mutation tool, read instead of orbit's operators (`--tool`). Only
//! cargo-mutants for now: `cargo mutants --in-diff FILE` run on a clean checkout of the
//! commit, its `mutants.out/outcomes.json` read back, each mutant shown as orbit shows its
//! own (file, line, what was changed, killed or survived).

use std::path::Path;

use serde_json::Value;

use super::run::Verdict;
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

/// Runs cargo-mutants on the checkout `ws` (the commit) for the diff `diff`, its output
/// under `out`: the mutants it tried. The tool runs the project's own tests with the user's
/// rights, so the caller runs it only for a loop whose checks run unsandboxed.
pub fn run_cargo_mutants(
    ws: &Path,
    diff: &Path,
    out: &Path,
    timeout_s: u64,
) -> Result<Vec<ToolMutant>> {
    let status = std::process::Command::new("cargo")
        .arg("mutants")
        .arg("--in-diff")
        .arg(diff)
        .arg("--output")
        .arg(out)
        .arg("--timeout")
        .arg(timeout_s.max(1).to_string())
        .arg("--no-shuffle")
        .current_dir(ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| Error::io("cannot run cargo mutants", e))?;
    // cargo-mutants exits 0 (all caught), 2 (some missed), 3 (a timeout); 4 says the
    // baseline failed.
    if status.code() == Some(4) {
        return Err(Error::Refused(
            "cargo mutants says the tests fail on the unmutated commit: nothing measured".into(),
        ));
    }
    let path = out.join("mutants.out").join("outcomes.json");
    let bytes = std::fs::read(&path).map_err(|e| {
        Error::io(
            format!(
                "cargo mutants wrote no {} (exit {:?}; is cargo-mutants installed? cargo install cargo-mutants; run it by hand to see why)",
                path.display(),
                status.code()
            ),
            e,
        )
    })?;
    read_cargo_mutants(&bytes)
}

/// Whether cargo-mutants answers here (`cargo mutants --version`).
pub fn cargo_mutants_installed() -> bool {
    std::process::Command::new("cargo")
        .args(["mutants", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// outcomes.json in the shape the cargo-mutants docs describe (mutants.rs, "The
    /// mutants.out directory"): not checked against a run of the tool itself.
    const OUTCOMES: &str = r#"{"outcomes":[
      {"scenario":"Baseline","summary":"Success","log_path":"log/baseline.log","phase_results":[]},
      {"scenario":{"Mutant":{"package":"p","file":"src/lib.rs","function":{"function_name":"add"},
        "span":{"start":{"line":2,"column":9},"end":{"line":2,"column":14}},"replacement":"0",
        "genre":"FnValue","name":"src/lib.rs:2:9: replace add -> i32 with 0"}},"summary":"CaughtMutant"},
      {"scenario":{"Mutant":{"file":"src/lib.rs","span":{"start":{"line":5,"column":10}},
        "name":"src/lib.rs:5:10: replace > with >= in big"}},"summary":"MissedMutant"},
      {"scenario":{"Mutant":{"file":"src/lib.rs","span":{"start":{"line":7,"column":1}},
        "replacement":"()"}},"summary":"Unviable"},
      {"scenario":{"Mutant":{"file":"src/lib.rs","span":{"start":{"line":8,"column":1}},"name":"x"}},"summary":"Timeout"}
    ],"total_mutants":4,"caught":1,"missed":1,"timeout":1,"unviable":1}"#;

    #[test]
    fn outcomes_json_reads_as_killed_survived_timed_out_and_not_applied() {
        let m = read_cargo_mutants(OUTCOMES.as_bytes()).unwrap();
        assert_eq!(m.len(), 4, "the baseline is not a mutant");
        assert_eq!((m[0].file.as_str(), m[0].line), ("src/lib.rs", 2));
        assert!(matches!(m[0].verdict, Verdict::Failed { .. }));
        assert_eq!(m[1].verdict, Verdict::Passed);
        assert_eq!(m[1].text, "src/lib.rs:5:10: replace > with >= in big");
        assert!(matches!(m[2].verdict, Verdict::NotApplied(_)));
        assert_eq!(m[2].text, "replaced by ()");
        assert_eq!(m[3].verdict, Verdict::TimedOut);
        let err = read_cargo_mutants(b"{}").unwrap_err().to_string();
        assert!(err.contains("outcomes"), "{err}");
    }
}
