//! `orbit run` and `orbit demo`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::init::repo_root;

/// Every loop directory under `<repo>/.orbit/`, sorted.
pub fn loops_under(repo: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(repo.join(".orbit"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join("loop.toml").is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The loop a command acts on: the given directory, or the only loop under `.orbit/`.
pub fn pick_loop(dir: Option<&Path>) -> Result<PathBuf> {
    if let Some(d) = dir {
        if !d.join("run-loop.sh").is_file() {
            return Err(Error::path(
                d,
                "is not a loop directory (no run-loop.sh): run orbit init first",
            ));
        }
        return Ok(d.to_path_buf());
    }
    let cwd =
        std::env::current_dir().map_err(|e| Error::io("cannot read the current directory", e))?;
    let repo = repo_root(&cwd)?;
    let loops = loops_under(&repo);
    match loops.len() {
        0 => Err(Error::Usage(format!(
            "no loop under {}/.orbit: create one with orbit init \"GOAL\"",
            repo.display()
        ))),
        1 => Ok(loops[0].clone()),
        _ => Err(Error::Usage(format!(
            "several loops under {}/.orbit; name one: {}",
            repo.display(),
            loops
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `orbit run`: hands the process over to the loop's own run-loop.sh (exec), so signals
/// sent to this process reach the runner itself.
pub fn run(args: &RunArgs) -> Result<u8> {
    use std::os::unix::process::CommandExt;
    let dir = pick_loop(args.dir.as_deref())?;
    let mut cmd = Command::new("bash");
    cmd.arg(dir.join("run-loop.sh"));
    if args.once {
        cmd.arg("--once");
    }
    // exec only returns on failure.
    let err = cmd.exec();
    Err(Error::io("cannot start bash (is it installed?)", err))
}
