//! `orbit merge [LOOP]`: the hand-off at the one edge orbit owns. The loop's branch is
//! verified as `orbit verify` does (any failure refuses, with its code), then merged into
//! the branch the loop started from, which must be the one checked out: fast-forward where
//! it can, else a merge commit; refused when the user's tracked files have changes the
//! merge would touch (untracked files, such as the loop directory, are no obstacle).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::cli::MergeArgs;
use crate::envelope::{git, git_line};
use crate::error::{Error, Result};
use crate::verify;

/// The paths with uncommitted changes to tracked files (staged or not).
fn dirty_tracked(repo: &Path) -> Vec<String> {
    let out = git(
        repo,
        &["status", "--porcelain=v1", "-z", "--untracked-files=no"],
    )
    .unwrap_or_default();
    String::from_utf8_lossy(&out)
        .split('\0')
        .filter(|l| l.len() > 3)
        .map(|l| l[3..].to_string())
        .collect()
}

/// The dirty tracked files a merge of `commit` into HEAD would touch.
pub(crate) fn blocking_changes(repo: &Path, commit: &str) -> Vec<String> {
    let changed = git(repo, &["diff", "--name-only", "-z", "HEAD", commit]).unwrap_or_default();
    let touched: Vec<String> = String::from_utf8_lossy(&changed)
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    dirty_tracked(repo)
        .into_iter()
        .filter(|p| touched.contains(p))
        .collect()
}

/// `orbit merge`.
pub fn run(args: &MergeArgs) -> Result<u8> {
    let mut t =
        verify::resolve(Some(args.target.as_deref().unwrap_or("")).filter(|a| !a.is_empty()))?;
    let Some(dir) = t.loop_dir.clone() else {
        return Err(Error::Usage(format!(
            "{} is not a loop: orbit merge takes a loop (its directory or its name under .orbit/)",
            t.reference
        )));
    };
    let o = verify::check(&mut t)?;
    if let Some(code) = o.failure {
        println!("orbit merge: refused: {code} — {}", o.why);
        println!("  next: {}", o.next());
        return Ok(verify::EXIT_FAIL);
    }
    let e = o
        .envelope
        .as_ref()
        .expect("a passed check has its envelope");
    let origin = e
        .origin_branch
        .clone()
        .or_else(|| {
            crate::state::State::parse_file(&dir.join("state.env"))
                .ok()
                .map(|s| s.origin_branch)
        })
        .filter(|b| !b.is_empty())
        .ok_or_else(|| {
            Error::Usage("the loop records no branch it started from: merge it by hand".into())
        })?;
    let head = git_line(&t.repo, &["symbolic-ref", "-q", "--short", "HEAD"]).unwrap_or_default();
    if head != origin {
        return Err(Error::Refused(format!(
            "the loop started from {origin}, but {} is checked out: git switch {origin}, then orbit merge again",
            if head.is_empty() {
                "a detached HEAD".to_string()
            } else {
                head
            }
        )));
    }
    let blocking = blocking_changes(&t.repo, &t.commit);
    if !blocking.is_empty() {
        return Err(Error::Refused(format!(
            "uncommitted changes to files the merge would touch: {}; commit or stash them, then orbit merge again",
            blocking.join(", ")
        )));
    }
    let status = Command::new("git")
        .arg("-C")
        .arg(&t.repo)
        .args(["merge", "--no-edit", "-m"])
        .arg(format!(
            "Merge {} (orbit: verified, envelope {})",
            t.reference.trim_start_matches("refs/heads/"),
            &e.digest[..12]
        ))
        .arg(&t.commit)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| Error::io("cannot run git merge", e))?;
    if !status.success() {
        return Err(Error::Git(format!(
            "git merge of {} into {origin} failed (see its output above): resolve it, or git merge --abort",
            t.reference
        )));
    }
    println!(
        "orbit merge: {} ({}) verified and merged into {origin}",
        t.reference.trim_start_matches("refs/heads/"),
        &t.commit[..12]
    );
    Ok(0)
}
