//! Landing a DONE attempt: `orbit verify`'s check of its envelope, the merge of its branch
//! onto the integration branch's head in the queue's private worktree (never the user's
//! checkout), and the task's verifier on the merged tree in a clean checkout, under the
//! task loop's own sandbox (as `orbit verify --rerun` runs a loop's checks). Only when all
//! three hold does the integration branch move (compare-and-swap on its old head).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::attempt::{OUTPUT_LINES, tail};
use super::store::Queue;
use crate::envelope::git_line;
use crate::error::{Error, Result};

/// How a landing ended.
#[derive(Debug)]
pub enum Landed {
    /// Merged and green: the integration branch's new head.
    Merged(String),
    /// Met already: the attempt's loop made no change of its own and the task's verifier
    /// passes on the integration branch's head (this commit), which stays where it is.
    Met(String),
    /// Refused: why, in one line, and the output that shows it (conflict, red tree).
    Refused { why: String, output: String },
}

/// Runs git in `dir`, its output (stdout then stderr) and whether it succeeded.
pub(crate) fn git_in(dir: &Path, args: &[&str]) -> Result<(bool, String)> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("cannot run git", e))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

pub(crate) fn git_ok(dir: &Path, args: &[&str]) -> Result<String> {
    let (ok, text) = git_in(dir, args)?;
    if !ok {
        return Err(Error::Git(format!(
            "git {} failed in {}: {}",
            args.join(" "),
            dir.display(),
            text.trim()
        )));
    }
    Ok(text)
}

/// A private detached worktree of the queue at `commit` (made anew: what a crash left of
/// an earlier one is removed first).
pub(crate) fn worktree_at(q: &Queue, name: &str, commit: &str) -> Result<PathBuf> {
    let path = q.work_dir().join(name);
    if path.exists() {
        crate::checkout::remove(&q.repo, &path);
    }
    let _ = git_in(&q.repo, &["worktree", "prune"]);
    fs::create_dir_all(q.work_dir())
        .map_err(|e| Error::io(format!("cannot create {}", q.work_dir().display()), e))?;
    crate::checkout::add_detached(&q.repo, &path, commit)?;
    Ok(path)
}

/// Removes a private worktree of the queue.
pub(crate) fn drop_worktree(q: &Queue, path: &Path) {
    crate::checkout::remove(&q.repo, path);
}

/// The integration branch's head.
pub fn head_of(repo: &Path, branch: &str) -> Option<String> {
    git_line(
        repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}^{{commit}}"),
        ],
    )
    .filter(|c| !c.is_empty())
}

/// The task's checks on the merged tree at `ws`: the attempt loop's verify.sh (which runs
/// the task's verifier) under that loop's own sandbox, as `orbit verify --rerun` runs it;
/// the code run is the agents', so it never runs as the user where the loop did not.
pub(crate) fn verify_merged(q: &Queue, loop_dir: &Path, ws: &Path) -> Result<std::process::Output> {
    let mode = crate::rerun::Mode::of_loop(loop_dir)?;
    let scratch = ws.with_extension("scratch");
    std::fs::create_dir_all(&scratch)
        .map_err(|e| Error::io(format!("cannot create {}", scratch.display()), e))?;
    let dir = std::fs::canonicalize(loop_dir)
        .map_err(|e| Error::io(format!("cannot resolve {}", loop_dir.display()), e))?;
    let out = crate::rerun::run(mode, "check", &dir, ws, &q.repo, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    out
}

/// The first red check on the merged tree at `ws`: the task's own (through `loop_dir`),
/// then each of `after`'s; `None` when every one is green. A red one comes with the task it
/// belongs to (`None` for the task's own) and its run.
fn red_on(
    q: &Queue,
    loop_dir: &Path,
    after: &[(String, PathBuf)],
    ws: &Path,
) -> Result<Option<(Option<String>, std::process::Output)>> {
    let run = verify_merged(q, loop_dir, ws)?;
    if !run.status.success() {
        return Ok(Some((None, run)));
    }
    for (name, dir) in after {
        let run = verify_merged(q, dir, ws)?;
        if !run.status.success() {
            return Ok(Some((Some(name.clone()), run)));
        }
    }
    Ok(None)
}

/// Whether the loop's branch holds a commit beyond `base` (the integration branch's head
/// its attempt started from): a change of its own.
pub fn has_own_commit(q: &Queue, branch: &str, base: &str) -> bool {
    head_of(&q.repo, branch).is_some_and(|tip| {
        git_line(&q.repo, &["rev-list", "--count", &format!("{base}..{tip}")])
            .is_some_and(|n| n.trim() != "0")
    })
}

/// A loop that ended with no change of its own (its goal met before its agent did anything,
/// or a DONE with no commit): the task is met when its checks pass on the integration
/// branch's head in a clean checkout, under the loop's own sandbox, as a merged tree's
/// are run. Nothing is merged.
pub fn met_already(q: &Queue, loop_dir: &Path, integration: &str) -> Result<Landed> {
    let head = head_of(&q.repo, integration)
        .ok_or_else(|| Error::Git(format!("the integration branch {integration} is gone")))?;
    let check_wt = worktree_at(q, "check", &head)?;
    let run = verify_merged(q, loop_dir, &check_wt);
    drop_worktree(q, &check_wt);
    let run = run?;
    if run.status.success() {
        return Ok(Landed::Met(head));
    }
    let mut output = String::from_utf8_lossy(&run.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&run.stderr));
    Ok(Landed::Refused {
        why: format!(
            "the loop made no change of its own, and the verifier fails on {integration}'s head {}: exit {}",
            &head[..12],
            run.status
                .code()
                .map_or("by a signal".to_string(), |c| c.to_string())
        ),
        output: tail(&output, OUTPUT_LINES),
    })
}

/// Lands the DONE loop at `loop_dir` onto `integration`, judged on the merged tree by the
/// task's verifier (the check the loop's verify.sh runs) and by the verifiers of the merged
/// tasks it comes after (`after`: each task's name and its loop, see [`merge_checked`]).
pub fn land(
    q: &Queue,
    loop_dir: &Path,
    integration: &str,
    after: &[(String, PathBuf)],
) -> Result<Landed> {
    let Some(outcome) = crate::verify::loop_outcome(loop_dir) else {
        return Ok(Landed::Refused {
            why: "orbit verify found no hand-off to check (the loop has no branch)".into(),
            output: String::new(),
        });
    };
    if let Some(code) = outcome.failure {
        return Ok(Landed::Refused {
            why: format!(
                "orbit verify refused the hand-off: {code} — {}",
                outcome.why
            ),
            output: String::new(),
        });
    }
    merge_checked(
        q,
        loop_dir,
        integration,
        &outcome.commit,
        outcome.reference.trim_start_matches("refs/heads/"),
        outcome.digest.as_deref(),
        after,
    )
}

/// The merge of a verified hand-off's `commit` (of the branch `label`, with the envelope
/// `digest`) onto `integration`'s head in the queue's private worktree, and the task's checks
/// on the merged tree through the loop at `loop_dir` (its verify.sh under its sandbox), then
/// the checks of each merged task it comes after (`after`: the task's name and a loop of its
/// own, whose verify.sh runs that task's verifier under that loop's sandbox), so a merge
/// that undoes earlier work is refused. The integration branch moves (compare-and-swap on
/// its old head) only when the merge is clean and every check is green.
pub fn merge_checked(
    q: &Queue,
    loop_dir: &Path,
    integration: &str,
    commit: &str,
    label: &str,
    digest: Option<&str>,
    after: &[(String, PathBuf)],
) -> Result<Landed> {
    let head = head_of(&q.repo, integration)
        .ok_or_else(|| Error::Git(format!("the integration branch {integration} is gone")))?;
    let merge_wt = worktree_at(q, "merge", &head)?;
    let msg = format!(
        "Merge {label} into {integration} (orbit queue: verified, envelope {})",
        digest.map_or("none", |d| &d[..12])
    );
    let (ok, text) = git_in(
        &merge_wt,
        &["merge", "--no-ff", "--no-edit", "-m", &msg, commit],
    )?;
    if !ok {
        let (_, conflicts) = git_in(&merge_wt, &["diff", "--name-only", "--diff-filter=U"])?;
        let (_, diff) = git_in(&merge_wt, &["diff"])?;
        let _ = git_in(&merge_wt, &["merge", "--abort"]);
        drop_worktree(q, &merge_wt);
        return Ok(Landed::Refused {
            why: format!(
                "the branch does not merge into {integration} at {}: conflicts in {}",
                &head[..12],
                conflicts.split_whitespace().collect::<Vec<_>>().join(", ")
            ),
            output: tail(&format!("{text}\n{diff}"), OUTPUT_LINES),
        });
    }
    let merged = git_ok(&merge_wt, &["rev-parse", "HEAD"])?
        .trim()
        .to_string();
    drop_worktree(q, &merge_wt);
    super::kill_point("merging");
    let check_wt = worktree_at(q, "check", &merged)?;
    let red = red_on(q, loop_dir, after, &check_wt);
    drop_worktree(q, &check_wt);
    if let Some((whose, run)) = red? {
        let mut output = String::from_utf8_lossy(&run.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&run.stderr));
        return Ok(Landed::Refused {
            why: format!(
                "{} fails on the merged tree ({} on {integration}): exit {}",
                whose.map_or("the verifier".to_string(), |t| format!(
                    "the verifier of {t} (a task this one comes after)"
                )),
                &merged[..12],
                run.status
                    .code()
                    .map_or("by a signal".to_string(), |c| c.to_string())
            ),
            output: tail(&output, OUTPUT_LINES),
        });
    }
    git_ok(
        &q.repo,
        &[
            "update-ref",
            "-m",
            "orbit queue: merged",
            &format!("refs/heads/{integration}"),
            &merged,
            &head,
        ],
    )?;
    super::kill_point("merged");
    Ok(Landed::Merged(merged))
}
