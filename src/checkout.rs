//! Throwaway detached checkouts of a commit (`git worktree add --detach`), for the checks
//! orbit runs outside the loop: the adequacy measure's, `orbit verify --rerun`'s, the
//! queue's. git reads every worktree's files as it adds one, and fails on one another add
//! is still writing ("fatal: failed to read .git/worktrees/NAME/commondir"): within this
//! process the adds and removes run one at a time, and an add that another process (a
//! loop's runner, the user's git) raced is tried again. A failure says what git said.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fsx;

/// This process's `git worktree add` and `remove`, one at a time.
static WORKTREES: Mutex<()> = Mutex::new(());
/// How many times an add is tried.
const ADD_TRIES: u64 = 3;

/// `git worktree` ARGS in `repo`, no other of this process's at the same time.
fn worktree_op(repo: &Path, args: &[&str]) -> std::result::Result<(), String> {
    let _one = WORKTREES.lock().unwrap_or_else(|e| e.into_inner());
    let mut all = vec!["worktree"];
    all.extend_from_slice(args);
    git_or_why(repo, &all)
}

/// A detached checkout of `commit` at `path` (which must not exist), tried up to three
/// times; what a failed try left at `path` is removed before the next.
pub fn add_detached(repo: &Path, path: &Path, commit: &str) -> Result<()> {
    let p = path.display().to_string();
    let mut tries = 0;
    while let Err(why) = worktree_op(repo, &["add", "--detach", "--force", &p, commit]) {
        tries += 1;
        if tries >= ADD_TRIES {
            return Err(Error::Git(format!(
                "cannot make a clean checkout of {commit} in {p} ({tries} tries): {why}"
            )));
        }
        let _ = std::fs::remove_dir_all(path);
        std::thread::sleep(Duration::from_millis(250 * tries));
    }
    Ok(())
}

/// Removes the checkout at `path` (its worktree entry and its files).
pub fn remove(repo: &Path, path: &Path) {
    let _ = worktree_op(repo, &["remove", "--force", &path.display().to_string()]);
    let _ = std::fs::remove_dir_all(path);
}

/// A throwaway detached checkout of a commit under the temporary directory, removed (with
/// its `.scratch` sibling, where a run keeps what it writes) when dropped.
pub struct Checkout<'a> {
    repo: &'a Path,
    pub path: PathBuf,
}

impl<'a> Checkout<'a> {
    /// The checkout of `commit` named `orbit-KIND-PID-TIME-N`, with the commit's
    /// submodules from the repository's own module objects.
    pub fn new(repo: &'a Path, commit: &str, kind: &str, n: usize) -> Result<Checkout<'a>> {
        let path = std::env::temp_dir().join(format!(
            "orbit-{kind}-{}-{}-{n}",
            std::process::id(),
            fsx::now_epoch()
        ));
        add_detached(repo, &path, commit)?;
        let co = Checkout { repo, path };
        crate::submodules::checkout(repo, &co.path);
        Ok(co)
    }

    /// The `.scratch` sibling of the checkout (removed with it).
    pub fn scratch(&self) -> PathBuf {
        self.path.with_extension("scratch")
    }

    /// Puts the commit back exactly: tracked files reset, untracked and ignored removed, the
    /// submodules checked out again at the commits it records.
    pub fn reset(&self, commit: &str) -> Result<()> {
        git_or_why(&self.path, &["checkout", "-q", "-f", "--detach", commit])
            .and_then(|_| git_or_why(&self.path, &["clean", "-q", "-ffdx"]))
            .map_err(|why| {
                Error::Git(format!(
                    "cannot reset the checkout {} to {commit}: {why}",
                    self.path.display()
                ))
            })?;
        crate::submodules::checkout(self.repo, &self.path);
        Ok(())
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        remove(self.repo, &self.path);
        let _ = std::fs::remove_dir_all(self.scratch());
    }
}

/// Runs git in `dir`; on a failure, what git said (its last lines of stderr, or its status).
pub fn git_or_why(dir: &Path, args: &[&str]) -> std::result::Result<(), String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let said = said[said.len().saturating_sub(3)..].join(" / ");
    Err(format!(
        "git {} failed ({}){}",
        args.first().unwrap_or(&""),
        out.status,
        if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkout_that_cannot_be_made_says_what_git_said() {
        let dir = std::env::temp_dir().join(format!("orbit-checkout-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = Checkout::new(&dir, "HEAD", "test", 0)
            .err()
            .expect("no checkout outside a repository")
            .to_string();
        assert!(e.contains("cannot make a clean checkout of HEAD"), "{e}");
        assert!(e.contains("(3 tries)"), "{e}");
        assert!(
            e.contains("git worktree failed") && e.contains("fatal:"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
