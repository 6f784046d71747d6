//! Running the loop's checks on altered trees: each worker owns a throwaway detached
//! checkout of the commit, and for each unit puts the commit back exactly (tracked files
//! reset, every untracked and ignored file removed, so nothing a run leaves can decide the
//! next), applies the unit, and runs verify.sh (and holdout.sh) with a timeout of its own.
//! The workspace and the loop's branch are never touched.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::diff::{self, FileChange, FileKind, Hunk};
use super::mutants::Mutant;
use crate::envelope::git;
use crate::error::{Error, Result};

/// One thing to take out of the change (or alter in it) and run the checks on.
#[derive(Debug, Clone)]
pub enum Unit {
    /// One hunk of a text file, reverted alone.
    Hunk { file: usize, hunk: Hunk },
    /// A whole file's change, reverted (added, deleted, renamed, binary, generated).
    File { file: usize },
    /// One mutant of an added line.
    Mutant { file: usize, mutant: Mutant },
}

/// What the checks said of one unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every check passed.
    Passed,
    /// A check failed: its name, and whether its output reads as a build failure.
    Failed { check: String, build: bool },
    /// A check ran past its time and was stopped.
    TimedOut,
    /// The unit could not be applied to the tree (and why).
    NotApplied(String),
}

/// The scripts to run, where, and for how long at most per run.
pub struct Plan<'a> {
    pub repo: &'a Path,
    pub loop_dir: &'a Path,
    pub base: &'a str,
    pub commit: &'a str,
    /// What to run: `check` (verify.sh) and, where the loop has a holdout, `holdout`.
    pub scripts: Vec<&'static str>,
    /// The loop's sandbox, as `orbit verify --rerun` runs its checks.
    pub mode: crate::rerun::Mode,
    pub files: &'a [FileChange],
    /// The longest one run of the scripts may take.
    pub run_timeout: Duration,
    /// The loop's setup commands, run in each checkout before its checks (as the runner
    /// sets up each new work tree), sandboxed as a check.
    pub setup: Vec<String>,
}

/// A measure's throwaway checkout of the commit (one per worker, and the baseline's).
pub use crate::checkout::Checkout;

/// The checkout of the commit a measure's worker `n` runs its units in.
pub fn checkout<'a>(repo: &'a Path, commit: &str, n: usize) -> Result<Checkout<'a>> {
    Checkout::new(repo, commit, "adequacy", n)
}

fn write(ws: &Path, path: &str, bytes: &[u8]) -> std::result::Result<(), String> {
    let to = ws.join(path);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {path}'s folder: {e}"))?;
    }
    // A link at the path is replaced, never written through.
    if to
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        let _ = std::fs::remove_file(&to);
    }
    std::fs::write(&to, bytes).map_err(|e| format!("cannot write {path}: {e}"))
}

/// Applies one unit to the checkout at `ws` (which holds the commit).
pub fn apply(plan: &Plan, ws: &Path, unit: &Unit) -> std::result::Result<(), String> {
    match unit {
        Unit::Hunk { file, hunk } => {
            let f = &plan.files[*file];
            write(ws, &f.path, &diff::revert_hunk(f, hunk))
        }
        Unit::Mutant { file, mutant } => {
            let f = &plan.files[*file];
            let lines = diff::lines(&f.new);
            let Some(line) = lines.get(mutant.line) else {
                return Err(format!("{} has no line {}", f.path, mutant.line + 1));
            };
            let ending = &line[line.trim_ascii_end().len()..];
            let mut out = Vec::with_capacity(f.new.len() + 16);
            for (i, l) in lines.iter().enumerate() {
                if i == mutant.line {
                    out.extend_from_slice(mutant.text.as_bytes());
                    out.extend_from_slice(ending);
                } else {
                    out.extend_from_slice(l);
                }
            }
            write(ws, &f.path, &out)
        }
        Unit::File { file } => {
            let f = &plan.files[*file];
            if f.kind == FileKind::Added {
                return git(ws, &["rm", "-q", "-f", "--", &f.path])
                    .map(|_| ())
                    .ok_or_else(|| format!("cannot remove {}", f.path));
            }
            if f.kind == FileKind::Renamed {
                git(ws, &["rm", "-q", "-f", "--", &f.path])
                    .ok_or_else(|| format!("cannot remove {}", f.path))?;
            }
            let old = f.old_path.as_deref().unwrap_or(&f.path);
            git(ws, &["checkout", "-q", plan.base, "--", old])
                .map(|_| ())
                .ok_or_else(|| format!("cannot restore {old} from the base"))
        }
    }
}

/// Words in a failing check's output that say it never got to its tests.
const BUILD_SIGNS: &[&str] = &[
    "error[E",
    "error: could not compile",
    "SyntaxError",
    "IndentationError",
    "ERROR collecting",
    "ModuleNotFoundError",
    "ImportError",
    "cannot find symbol",
    "compilation failed",
    "undefined: ",
    "error TS",
];

/// Runs the plan's scripts once in `ws`: the first check that failed, or passed.
pub fn run_scripts(plan: &Plan, ws: &Path) -> Result<Verdict> {
    for (i, cmd) in plan.setup.iter().enumerate() {
        let (timed_out, ok, _) = run_one(plan, ws, "setup", Some(cmd))?;
        if timed_out || !ok {
            // What the unit changed broke the setup (an install, a build): the checks need it.
            return Ok(Verdict::Failed {
                check: format!("setup {}", i + 1),
                build: true,
            });
        }
    }
    for script in &plan.scripts {
        let (timed_out, ok, out) = run_one(plan, ws, script, None)?;
        if timed_out {
            return Ok(Verdict::TimedOut);
        }
        if !ok {
            let text = String::from_utf8_lossy(&out);
            let check = text
                .lines()
                .find_map(|l| l.strip_prefix("[FAIL] "))
                .map(|s| s.split_whitespace().next().unwrap_or(s).to_string())
                .unwrap_or_else(|| {
                    format!(
                        "{}.sh (it ended before naming a check)",
                        if *script == "holdout" {
                            "holdout"
                        } else {
                            "verify"
                        }
                    )
                });
            let timed = text.lines().any(|l| {
                l.starts_with("[FAIL] ") && (l.contains("timed out") || l.contains("timeout"))
            });
            if timed {
                return Ok(Verdict::TimedOut);
            }
            let build = BUILD_SIGNS.iter().any(|s| text.contains(s));
            return Ok(Verdict::Failed { check, build });
        }
    }
    Ok(Verdict::Passed)
}

/// One script's run: (stopped at the timeout, exited 0, its output).
fn run_one(
    plan: &Plan,
    ws: &Path,
    script: &str,
    setup: Option<&str>,
) -> Result<(bool, bool, Vec<u8>)> {
    let per_check = plan.run_timeout.as_secs().max(1);
    // verify.sh runs its checks where its runner says (ORBIT_VERIFY_FOR naming this loop
    // directory, with a scratch folder), else in the workspace its state names: here the
    // runner is this command, and the place the clean checkout.
    let scratch = ws.with_extension("scratch");
    std::fs::create_dir_all(&scratch)
        .map_err(|e| Error::io(format!("cannot create {}", scratch.display()), e))?;
    let here = std::fs::canonicalize(plan.loop_dir)
        .map_err(|e| Error::io(format!("cannot resolve {}", plan.loop_dir.display()), e))?;
    // The code run is the agent's: under the loop's own sandbox, as `orbit verify --rerun`
    // runs it (the checkout writable; the user's repository, HOME and the loop directory
    // read-only; the holdout hidden from verify.sh).
    let mut cmd = crate::rerun::command(plan.mode, script, &here, ws, plan.repo, &scratch);
    if let Some(s) = setup {
        cmd.env("ORBIT_RERUN_SETUP", s);
    }
    let mut child = cmd
        .env("CHECK_TIMEOUT", format!("{per_check}s"))
        .env("KILL_GRACE", "2s")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("cannot run bash", e))?;
    let pid = child.id() as i32;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(());
        status
    });
    // verify.sh stops a check at its own timeout; this is the backstop for the script.
    let backstop = plan.run_timeout * 2 + Duration::from_secs(10);
    let timed_out = rx.recv_timeout(backstop).is_err();
    if timed_out {
        // SAFETY: kill(2) on the process group this run leads; no memory is touched.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let status = waiter.join().expect("waiter").ok();
    // Whatever the script left running in its group goes with it.
    // SAFETY: as above.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if let Some(refused) = crate::rerun::refused(status.as_ref().and_then(|s| s.code()), &err) {
        return Err(refused);
    }
    let ok = !timed_out && status.is_some_and(|s| s.success());
    Ok((timed_out, ok, out))
}

/// Runs every unit on up to `jobs` checkouts at once until `deadline`: each unit's verdict,
/// `None` for the units the budget left untried.
pub fn run_units(
    plan: &Plan,
    units: &[Unit],
    jobs: usize,
    deadline: Instant,
) -> Result<Vec<Option<Verdict>>> {
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<Verdict>>> = Mutex::new(vec![None; units.len()]);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let jobs = jobs.clamp(1, units.len().max(1));
    std::thread::scope(|s| {
        for n in 0..jobs {
            let (next, results, failure) = (&next, &results, &failure);
            s.spawn(move || {
                let co = match checkout(plan.repo, plan.commit, n) {
                    Ok(c) => c,
                    Err(e) => {
                        *failure.lock().unwrap() = Some(e);
                        return;
                    }
                };
                loop {
                    if Instant::now() >= deadline || failure.lock().unwrap().is_some() {
                        return;
                    }
                    let i = {
                        let mut g = next.lock().unwrap();
                        let i = *g;
                        *g += 1;
                        i
                    };
                    let Some(unit) = units.get(i) else { return };
                    let verdict =
                        co.reset(plan.commit)
                            .and_then(|_| match apply(plan, &co.path, unit) {
                                Err(why) => Ok(Verdict::NotApplied(why)),
                                Ok(()) => run_scripts(plan, &co.path),
                            });
                    match verdict {
                        Ok(v) => results.lock().unwrap()[i] = Some(v),
                        Err(e) => {
                            *failure.lock().unwrap() = Some(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap() {
        return Err(e);
    }
    Ok(results.into_inner().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adequacy::mutants::Operator;
    use std::path::PathBuf;

    #[test]
    fn a_mutant_whose_line_is_not_there_is_not_applied_and_says_why() {
        let dir = tempfile_dir();
        let files = vec![FileChange {
            path: "a.py".into(),
            old_path: None,
            kind: FileKind::Text,
            old: b"x = 1\n".to_vec(),
            new: b"x = 2\n".to_vec(),
            hunks: Vec::new(),
        }];
        let plan = Plan {
            repo: &dir,
            loop_dir: &dir,
            base: "HEAD",
            commit: "HEAD",
            scripts: vec!["check"],
            mode: crate::rerun::Mode {
                sandboxed: false,
                network: true,
            },
            files: &files,
            run_timeout: Duration::from_secs(1),
            setup: Vec::new(),
        };
        let unit = Unit::Mutant {
            file: 0,
            mutant: Mutant {
                path: "a.py".into(),
                line: 7,
                operator: Operator::IntegerOffByOne,
                text: "x = 3".into(),
            },
        };
        assert_eq!(apply(&plan, &dir, &unit), Err("a.py has no line 8".into()));
        // A mutant of a line that is there replaces that line alone, keeping its ending.
        let ok = Unit::Mutant {
            file: 0,
            mutant: Mutant {
                line: 0,
                ..match &unit {
                    Unit::Mutant { mutant, .. } => mutant.clone(),
                    _ => unreachable!(),
                }
            },
        };
        apply(&plan, &dir, &ok).unwrap();
        assert_eq!(std::fs::read(dir.join("a.py")).unwrap(), b"x = 3\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "orbit-adequacy-unit-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
