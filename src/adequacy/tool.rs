//! An ecosystem's own mutation tool, read instead of orbit's operators (`--tool`). Only
//! cargo-mutants for now: `cargo mutants --in-diff FILE` run on a clean checkout of the
//! commit (its submodules checked out), under the loop's sandbox, with the base's
//! `.cargo/mutants.toml` (never the change's), its `mutants.out/outcomes.json` read back,
//! each mutant shown as orbit shows its own (file, line, what was changed, killed or
//! survived). It runs its own `cargo test` on each mutant, not the loop's checks.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

/// One mutant cargo-mutants lists for the diff (`--list --json`): where, and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// Its name, as outcomes.json names it ("src/lib.rs:14:5: replace total -> Cents with
    /// Default::default()").
    pub text: String,
}

/// The mutants of cargo-mutants' `--list --json` (an array of `{file, name, span: {start:
/// {line}}}`).
pub fn read_cargo_mutants_list(bytes: &[u8]) -> Result<Vec<Listed>> {
    let bad = |why: &str| Error::Usage(format!("cargo-mutants' --list --json {why}"));
    // With no mutant in the diff's lines it prints nothing at all.
    if bytes.trim_ascii().is_empty() {
        return Ok(Vec::new());
    }
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(&format!("is not JSON ({e})")))?;
    let all = v.as_array().ok_or_else(|| bad("is not an array"))?;
    all.iter()
        .map(|m| {
            Ok(Listed {
                file: m["file"]
                    .as_str()
                    .ok_or_else(|| bad("names a mutant without its \"file\""))?
                    .to_string(),
                line: m["span"]["start"]["line"].as_u64().unwrap_or(0) as usize,
                text: m["name"].as_str().unwrap_or_default().to_string(),
            })
        })
        .collect()
}

/// What cargo-mutants did with a change: the mutants it tried, those the budget left
/// untried, and what is said of the run.
#[derive(Debug, Default)]
pub struct ToolRun {
    pub mutants: Vec<ToolMutant>,
    /// Listed by cargo-mutants, not tried: the budget ran out first.
    pub untried: Vec<Listed>,
    pub notes: Vec<String>,
}

/// The last lines of the tool's output, for a message.
fn tail(log: &Path) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

/// A file of the commit `rev`, when it holds one there (a regular file, never a link).
pub fn blob_at(repo: &Path, rev: &str, path: &str) -> Option<Vec<u8>> {
    let entry = crate::envelope::git(repo, &["ls-tree", "-z", rev, "--", path])?;
    let entry = String::from_utf8_lossy(&entry);
    let (meta, at) = entry.trim_end_matches('\0').split_once('\t')?;
    let meta: Vec<&str> = meta.split(' ').collect();
    match meta.as_slice() {
        ["100644" | "100755", "blob", sha] if at == path => {
            crate::envelope::git(repo, &["cat-file", "blob", sha])
        }
        _ => None,
    }
}

/// The folder (relative to the repository's root, "" for the root) of the Cargo workspace
/// that builds the Rust file `path` at `commit`, as cargo finds it: the nearest folder above
/// the file with a Cargo.toml is its package, and the nearest at or above the package whose
/// Cargo.toml has a `[workspace]` table is the workspace (else the package alone). `None`
/// when no Cargo.toml is above it.
pub fn cargo_root(repo: &Path, commit: &str, path: &str) -> Option<String> {
    let mut dirs = Vec::new();
    let mut at = path;
    while let Some((parent, _)) = at.rsplit_once('/') {
        dirs.push(parent.to_string());
        at = parent;
    }
    dirs.push(String::new());
    let manifest = |d: &str| {
        let p = if d.is_empty() {
            "Cargo.toml".to_string()
        } else {
            format!("{d}/Cargo.toml")
        };
        blob_at(repo, commit, &p)
    };
    let package = dirs.iter().position(|d| manifest(d).is_some())?;
    let workspace = dirs[package..].iter().find(|d| {
        manifest(d).is_some_and(|m| {
            String::from_utf8_lossy(&m)
                .lines()
                .any(|l| l.trim() == "[workspace]")
        })
    });
    Some(workspace.unwrap_or(&dirs[package]).clone())
}

/// The line that runs cargo-mutants on the workspace `crate_dir` with the diff and the
/// config in `dir`, and `more` words after.
fn cargo_mutants_line(
    crate_dir: &Path,
    dir: &Path,
    config: bool,
    timeout: Duration,
    more: &[&str],
) -> Result<String> {
    let mut words: Vec<String> = vec![
        "cargo".into(),
        "mutants".into(),
        "--dir".into(),
        crate_dir.display().to_string(),
        "--in-diff".into(),
        dir.join("change.diff").display().to_string(),
        "--output".into(),
        dir.display().to_string(),
        "--timeout".into(),
        timeout.as_secs().max(1).to_string(),
        "--no-shuffle".into(),
    ];
    if config {
        words.extend([
            "--config".into(),
            dir.join("mutants.toml").display().to_string(),
        ]);
    } else {
        words.push("--no-config".into());
    }
    words.extend(more.iter().map(|w| w.to_string()));
    crate::shell::quote_words(&words)
}

/// Runs `line` as the loop's checks run (under its sandbox when it has one), its output
/// into `log`, until it ends or `deadline`: then its process group is asked to stop
/// (SIGTERM: cargo-mutants stops what it started and keeps the outcomes it has), and
/// killed after a grace. Its exit code (`None`: a signal) and whether the deadline stopped
/// it.
fn run_until(
    plan: &Plan,
    ws: &Path,
    scratch: &Path,
    line: &str,
    log: &Path,
    deadline: Option<Instant>,
) -> Result<(Option<i32>, bool)> {
    let out = std::fs::File::create(log)
        .map_err(|e| Error::io(format!("cannot create {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| Error::io(format!("cannot open {}", log.display()), e))?;
    let here = std::fs::canonicalize(plan.loop_dir)
        .map_err(|e| Error::io(format!("cannot resolve {}", plan.loop_dir.display()), e))?;
    let mut child = crate::rerun::command(plan.mode, "setup", &here, ws, plan.repo, scratch)
        .env("ORBIT_RERUN_SETUP", line)
        .env("CARGO_TERM_COLOR", "never")
        .stdout(out)
        .stderr(err)
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("cannot run bash", e))?;
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(());
        status
    });
    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let stopped = match left {
        None => {
            let _ = rx.recv();
            false
        }
        Some(left) => rx.recv_timeout(left).is_err(),
    };
    if stopped {
        // SAFETY: kill(2) on the process group this run leads; no memory is touched.
        unsafe {
            libc::kill(-pid, libc::SIGTERM);
        }
        if rx.recv_timeout(Duration::from_secs(10)).is_err() {
            // SAFETY: as above.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let status = waiter.join().expect("waiter").ok();
    // Whatever it left in its group goes with it.
    // SAFETY: as above.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let code = status.and_then(|s| s.code());
    if let Some(refused) = crate::rerun::refused(code, &std::fs::read(log).unwrap_or_default()) {
        return Err(refused);
    }
    Ok((code, stopped))
}

/// Runs cargo-mutants in the checkout `ws` of the commit on `diff` (the change's diff of the
/// Rust files of the Cargo workspace in the folder `root` of the repository, "" for its
/// root, with paths of that workspace), with `config` the base's `.cargo/mutants.toml` of
/// that workspace (`None`: no config at all, never the one the change may have written),
/// until `deadline`: the mutants it tried, as paths of the repository, and those it listed
/// and did not try before the deadline stopped it. It runs as the loop's checks run: under
/// the loop's sandbox when it has one (through the rerun driver, as one command run as a
/// check), with the network the loop gives its checks. Its own output is logged into
/// `scratch` (outside the sandbox's reach).
#[allow(clippy::too_many_arguments)]
pub fn run_cargo_mutants(
    plan: &Plan,
    ws: &Path,
    scratch: &Path,
    diff: &[u8],
    config: Option<&[u8]>,
    root: &str,
    deadline: Instant,
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
    std::fs::write(dir.join("change.diff"), diff)
        .map_err(|e| Error::io("cannot write the diff", e))?;
    if let Some(text) = config {
        std::fs::write(dir.join("mutants.toml"), text)
            .map_err(|e| Error::io("cannot write the base's config", e))?;
    }
    let crate_dir = if root.is_empty() {
        ws.to_path_buf()
    } else {
        ws.join(root)
    };
    let in_repo = |file: &str| {
        if root.is_empty() {
            file.to_string()
        } else {
            format!("{root}/{file}")
        }
    };
    let timeout = plan.run_timeout;
    // What it would try: listed first (it only reads the source), so that what a stop
    // leaves untried can be named.
    let list_file = dir.join("list.json");
    let list_line = format!(
        "{} >{}",
        cargo_mutants_line(
            &crate_dir,
            &dir,
            config.is_some(),
            timeout,
            &["--list", "--json"]
        )?,
        crate::shell::quote(&list_file.display().to_string())?
    );
    let list_log = scratch.join("cargo-mutants-list.log");
    let (code, _) = run_until(plan, ws, scratch, &list_line, &list_log, None)?;
    let listed = match (code, crate::fsx::read_regular_opt(&list_file)?) {
        (Some(0), Some(bytes)) => read_cargo_mutants_list(&bytes)?,
        (code, _) => {
            return Err(Error::Usage(format!(
                "cargo mutants --list ended with {} (is cargo-mutants installed where the checks run? cargo install cargo-mutants). It said:\n{}",
                code.map_or("a signal".to_string(), |c| format!("exit {c}")),
                tail(&list_log)
            )));
        }
    };
    let mut listed: Vec<Listed> = listed
        .into_iter()
        .map(|l| Listed {
            file: in_repo(&l.file),
            ..l
        })
        .collect();
    if listed.is_empty() {
        return Ok(ToolRun {
            notes: vec![format!(
                "cargo-mutants found no mutant in the change's Rust lines{}",
                if root.is_empty() {
                    String::new()
                } else {
                    format!(" of the Cargo workspace in {root}/")
                }
            )],
            ..ToolRun::default()
        });
    }
    if Instant::now() >= deadline {
        return Ok(ToolRun {
            notes: vec![format!(
                "the budget ran out before cargo-mutants ran: its {} mutants were not tried",
                listed.len()
            )],
            untried: listed,
            ..ToolRun::default()
        });
    }
    let line = cargo_mutants_line(&crate_dir, &dir, config.is_some(), timeout, &[])?;
    let log = scratch.join("cargo-mutants.log");
    let (code, stopped) = run_until(plan, ws, scratch, &line, &log, Some(deadline))?;
    let path = dir.join("mutants.out").join("outcomes.json");
    let outcomes = crate::fsx::read_regular_opt(&path)?;
    let read = |bytes: &[u8]| -> Result<Vec<ToolMutant>> {
        Ok(read_cargo_mutants(bytes)?
            .into_iter()
            .map(|m| ToolMutant {
                file: in_repo(&m.file),
                ..m
            })
            .collect())
    };
    if stopped {
        // What it finished before the stop counts; the rest is listed as not tried. An
        // outcomes.json cut short by the stop is read as nothing tried.
        let mutants = outcomes
            .as_deref()
            .and_then(|b| read(b).ok())
            .unwrap_or_default();
        listed.retain(|l| !mutants.iter().any(|m| m.text == l.text));
        return Ok(ToolRun {
            notes: vec![format!(
                "the budget ran out while cargo-mutants ran: it was stopped after {} of its {} mutants",
                mutants.len(),
                mutants.len() + listed.len()
            )],
            mutants,
            untried: listed,
        });
    }
    // cargo-mutants exits 0 (every mutant caught, or none to try), 2 (some missed), 3 (some
    // timed out), 4 (the baseline failed), 1, 5, 6 or 70 (it could not run as asked).
    if code == Some(4) {
        return Err(Error::Refused(format!(
            "cargo-mutants says the tests fail on the unmutated commit (its baseline: its own cargo test, in its own copy of the tree), so it measured nothing. It said:\n{}",
            tail(&log)
        )));
    }
    match (code, outcomes) {
        (Some(0 | 2 | 3), Some(bytes)) => Ok(ToolRun {
            mutants: read(&bytes)?,
            ..ToolRun::default()
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
    fn the_list_reads_each_mutant_and_nothing_as_none() {
        let text = r#"[{"file":"report/src/lib.rs","name":"report/src/lib.rs:5:5: replace total -> u64 with 0",
          "span":{"start":{"line":5,"column":5},"end":{"line":5,"column":66}}}]"#;
        let l = read_cargo_mutants_list(text.as_bytes()).unwrap();
        assert_eq!(
            l,
            vec![Listed {
                file: "report/src/lib.rs".into(),
                line: 5,
                text: "report/src/lib.rs:5:5: replace total -> u64 with 0".into(),
            }]
        );
        assert_eq!(read_cargo_mutants_list(b"\n").unwrap(), Vec::new());
        let err = read_cargo_mutants_list(b"{}").unwrap_err().to_string();
        assert!(err.contains("not an array"), "{err}");
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
