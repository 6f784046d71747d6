//! Where loops are: the repository root, the loops under `.orbit/`, the loop a command acts
//! on, and whether a runner holds a loop's lock ([`probe`], read without taking it).
//! Every command that finds or guards a loop asks here, so none depends on another
//! command's module for it.

pub mod probe;
pub mod workspace;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The repository root containing `dir` (canonical).
pub fn repo_root(dir: &Path) -> Result<PathBuf> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .map_err(|e| Error::io("cannot run git (is it installed?)", e))?;
    if !out.status.success() {
        return Err(Error::Git(format!(
            "{} is not inside a git repository: orbit loops live in one (run `git init` first)",
            dir.display()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout)
        .trim_end_matches('\n')
        .to_string();
    fs::canonicalize(&text).map_err(|e| Error::io(format!("cannot resolve {text}"), e))
}

/// The repository containing `dir`, found by its `.git` entry without running git (an audit
/// never starts a git process that could take the index lock).
pub fn repo_by_dot_git(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

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

/// Whether a runner (or a stray process) holds the loop's lock, probed without taking it:
/// for commands that must refuse while a loop runs (`orbit recover`, `orbit init --force`).
/// Unlike a `try_lock`, this never makes a runner starting at the same instant exit 20.
pub fn lock_held(dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    matches!(
        probe::lock(&dir),
        probe::Lock::Runner { .. } | probe::Lock::StrayHolder { .. }
    )
}
