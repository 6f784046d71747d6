//! `orbit merge --queue`: the queue's work brought home. The integration branch must hold
//! exactly the merges the queue recorded (a commit added by hand is refused); each done
//! task's merge must bring in a commit whose envelope verifies as `orbit verify` checks it,
//! and whose note under refs/notes/orbit is that envelope; every done task's verifier must
//! pass on the integration branch's head in a clean checkout. Then the head is merged into
//! the branch the queue was made from, which must be checked out (as `orbit merge`: a
//! fast-forward where it can be, refused when tracked files the merge touches are dirty).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use super::attempt::{OUTPUT_LINES, tail};
use super::land;
use super::store::Queue;
use crate::contract::VerifyFailure;
use crate::contract::queue::TaskStatus;
use crate::envelope::{self, git, git_line};
use crate::error::{Error, Result};
use crate::verify;

/// A refusal: its failure code, the task it concerns (if any) and why.
struct Refusal {
    code: VerifyFailure,
    task: Option<String>,
    why: String,
    output: String,
}

fn refuse(code: VerifyFailure, task: Option<&str>, why: String) -> Refusal {
    Refusal {
        code,
        task: task.map(str::to_string),
        why,
        output: String::new(),
    }
}

/// A done task: its name, its verifier, the integration branch's commit that merged it (or,
/// for a task met with no change of its own, the commit its verifier passed on: no merge).
struct DoneTask {
    name: String,
    verifier: String,
    merged: String,
    /// Met already: `merged` is the commit it was verified on, no merge of its own.
    met: bool,
    loop_dir: Option<std::path::PathBuf>,
}

/// The lines of git's answer.
fn lines(repo: &Path, args: &[&str]) -> Vec<String> {
    git(repo, args)
        .map(|b| {
            String::from_utf8_lossy(&b)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The done tasks of the queue (a done task that records no merge is refused).
fn done_tasks(q: &Queue) -> Result<std::result::Result<Vec<DoneTask>, Refusal>> {
    let st = q.load_state()?;
    let mut out = Vec::new();
    for f in q.tasks()? {
        let Ok(t) = &f.task else { continue };
        if t.status != TaskStatus::Done {
            continue;
        }
        let ts = st.tasks.get(&f.name).cloned().unwrap_or_default();
        let met = t.merged.is_none() && ts.merged_commit.is_none();
        let recorded = t.merged.clone().or(ts.merged_commit.clone());
        let Some(merged) = recorded
            .or(t.verified_on.clone())
            .or(ts.verified_on.clone())
        else {
            return Ok(Err(refuse(
                VerifyFailure::Unverified,
                Some(&f.name),
                "the task is done but records no merge (**Merged:**) and no commit it was met on (**Verified-On:**): the queue did not land it"
                    .into(),
            )));
        };
        let loop_dir = ts
            .branch
            .as_deref()
            .and_then(|b| b.strip_prefix("orbit/"))
            .map(|l| q.repo.join(".orbit").join(l))
            .filter(|d| d.join("run-loop.sh").is_file());
        out.push(DoneTask {
            name: f.name.clone(),
            verifier: t.verifier.clone(),
            merged,
            met,
            loop_dir,
        });
    }
    Ok(Ok(out))
}

/// The integration branch's commits since `home` (first parents, newest first) must each
/// be a done task's recorded merge, and every done task's merge must be on the branch.
fn check_history(
    q: &Queue,
    head: &str,
    home: &str,
    done: &[DoneTask],
) -> std::result::Result<(), Refusal> {
    let by_merge: BTreeMap<&str, &str> = done
        .iter()
        .filter(|d| !d.met)
        .map(|d| (d.merged.as_str(), d.name.as_str()))
        .collect();
    let chain = lines(
        &q.repo,
        &["rev-list", "--first-parent", head, "--not", home],
    );
    for (i, c) in chain.iter().enumerate() {
        if by_merge.contains_key(c.as_str()) {
            continue;
        }
        let subject = git_line(&q.repo, &["log", "-1", "--format=%s", c]).unwrap_or_default();
        let after = chain[i + 1..]
            .iter()
            .find_map(|m| by_merge.get(m.as_str()).copied());
        let task = after.or_else(|| {
            chain[..i]
                .iter()
                .rev()
                .find_map(|m| by_merge.get(m.as_str()).copied())
        });
        return Err(refuse(
            VerifyFailure::TreeMoved,
            task,
            format!(
                "the integration branch holds {} (\"{subject}\"), which is no task's recorded merge ({}): what it brought was never verified; remove it from the branch (git branch -f), or land it as a task",
                &c[..12],
                match after {
                    Some(t) => format!("it comes after task {t}'s merge"),
                    None => "it comes before every task's merge".into(),
                }
            ),
        ));
    }
    for d in done {
        if git(&q.repo, &["merge-base", "--is-ancestor", &d.merged, head]).is_none() {
            return Err(refuse(
                VerifyFailure::IntegrityMismatch,
                Some(&d.name),
                format!(
                    "its recorded {} {} is not on the integration branch (the branch was rewritten)",
                    if d.met {
                        "commit it was met on"
                    } else {
                        "merge"
                    },
                    &d.merged[..12.min(d.merged.len())]
                ),
            ));
        }
    }
    Ok(())
}

/// The envelope of the commit task `d`'s merge brought in, checked as `orbit verify` checks
/// it; and the note of its DONE commit must be that envelope.
fn check_envelope(q: &Queue, d: &DoneTask) -> Result<std::result::Result<(), Refusal>> {
    if d.met {
        // No merge of its own: nothing it brought to check; its verifier runs on the head.
        return Ok(Ok(()));
    }
    let brought = git_line(
        &q.repo,
        &["rev-parse", "--verify", "-q", &format!("{}^2", d.merged)],
    )
    .filter(|c| !c.is_empty());
    let Some(brought) = brought else {
        return Ok(Err(refuse(
            VerifyFailure::Unverified,
            Some(&d.name),
            format!(
                "its recorded merge {} is no merge: it brings in no loop's commit",
                &d.merged[..12.min(d.merged.len())]
            ),
        )));
    };
    let mut t = verify::Target {
        allowed_signers: crate::signature::configured_allowed_signers(&q.repo),
        require_signature: false,
        repo: q.repo.clone(),
        reference: brought.clone(),
        commit: brought.clone(),
        loop_dir: d.loop_dir.clone(),
    };
    let o = verify::check(&mut t)?;
    if let Some(code) = o.failure {
        return Ok(Err(refuse(code, Some(&d.name), o.why)));
    }
    let e = o.envelope.expect("a passed check has its envelope");
    let done = e.commit.clone().unwrap_or_default();
    let Some(note) = git(&q.repo, &["notes", "--ref=orbit", "show", &done]) else {
        return Ok(Err(refuse(
            VerifyFailure::Unverified,
            Some(&d.name),
            format!(
                "its DONE commit {} carries no note under {}: the envelope that lets anyone verify the hand-off without the loop directory is gone",
                &done[..12.min(done.len())],
                envelope::NOTES_REF
            ),
        )));
    };
    match envelope::parse(&note) {
        Err(envelope::Unreadable::Corrupt(m)) | Err(envelope::Unreadable::Version(m)) => {
            Ok(Err(refuse(
                VerifyFailure::EnvelopeCorrupt,
                Some(&d.name),
                format!(
                    "the note of its DONE commit {}: {m}",
                    &done[..12.min(done.len())]
                ),
            )))
        }
        Ok(n) if n.digest != e.digest => Ok(Err(refuse(
            VerifyFailure::IntegrityMismatch,
            Some(&d.name),
            format!(
                "the note of its DONE commit {} is envelope {}, not the loop's envelope {}",
                &done[..12.min(done.len())],
                &n.digest[..12],
                &e.digest[..12]
            ),
        ))),
        Ok(_) => Ok(Ok(())),
    }
}

/// Every done task's verifier on `head` in a clean checkout: the task loop's verify.sh,
/// which runs it, under that loop's own sandbox (the code is the agents'). A task whose
/// loop directory is gone is refused: its checks cannot run as its loop ran them.
fn check_verifiers(
    q: &Queue,
    head: &str,
    done: &[DoneTask],
) -> Result<std::result::Result<(), Refusal>> {
    if done.is_empty() {
        return Ok(Ok(()));
    }
    let wt = land::worktree_at(q, "check", head)?;
    for d in done {
        let Some(dir) = &d.loop_dir else {
            land::drop_worktree(q, &wt);
            return Ok(Err(refuse(
                VerifyFailure::RerunFailed,
                Some(&d.name),
                format!(
                    "its loop directory is gone, so its verifier ({}) cannot run under the loop's sandbox as its checks did: keep the task's last .orbit/<task>-aN until the queue is merged home",
                    d.verifier
                ),
            )));
        };
        let run = land::verify_merged(q, dir, &wt);
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                land::drop_worktree(q, &wt);
                return Err(e);
            }
        };
        if !run.status.success() {
            land::drop_worktree(q, &wt);
            let mut output = String::from_utf8_lossy(&run.stdout).into_owned();
            output.push_str(&String::from_utf8_lossy(&run.stderr));
            let mut r = refuse(
                VerifyFailure::RerunFailed,
                Some(&d.name),
                format!(
                    "its verifier ({}) fails on the integration branch's head {}: exit {}",
                    d.verifier,
                    &head[..12],
                    run.status
                        .code()
                        .map_or("by a signal".to_string(), |c| c.to_string())
                ),
            );
            r.output = tail(&output, OUTPUT_LINES);
            return Ok(Err(r));
        }
    }
    land::drop_worktree(q, &wt);
    Ok(Ok(()))
}

/// `orbit merge --queue`.
pub fn run() -> Result<u8> {
    let q = Queue::here()?;
    let st = q.load_state()?;
    let (Some(integration), Some(home)) = (st.integration_branch.clone(), st.name.clone()) else {
        return Err(Error::Usage(
            "the queue has not run yet (no integration branch): orbit queue run first".into(),
        ));
    };
    let head = land::head_of(&q.repo, &integration).ok_or_else(|| {
        Error::Refused(format!(
            "the queue's integration branch {integration} is gone: nothing to merge"
        ))
    })?;
    let checked_out =
        git_line(&q.repo, &["symbolic-ref", "-q", "--short", "HEAD"]).unwrap_or_default();
    if checked_out != home {
        return Err(Error::Refused(format!(
            "the queue was made from {home}, but {} is checked out: git switch {home}, then orbit merge --queue again",
            if checked_out.is_empty() {
                "a detached HEAD".to_string()
            } else {
                checked_out
            }
        )));
    }
    let verdict = (|| -> Result<std::result::Result<usize, Refusal>> {
        let done = match done_tasks(&q)? {
            Ok(d) => d,
            Err(r) => return Ok(Err(r)),
        };
        if let Err(r) = check_history(&q, &head, &home, &done) {
            return Ok(Err(r));
        }
        for d in &done {
            if let Err(r) = check_envelope(&q, d)? {
                return Ok(Err(r));
            }
        }
        if let Err(r) = check_verifiers(&q, &head, &done)? {
            return Ok(Err(r));
        }
        Ok(Ok(done.len()))
    })()?;
    let count = match verdict {
        Ok(n) => n,
        Err(r) => {
            println!(
                "orbit merge --queue: refused: {}{} — {}",
                r.code,
                r.task
                    .as_deref()
                    .map_or(String::new(), |t| format!(" (task {t})")),
                r.why
            );
            if !r.output.trim().is_empty() {
                println!("{}", r.output.trim_end());
            }
            println!("  nothing was merged into {home}");
            return Ok(verify::EXIT_FAIL);
        }
    };
    if git(&q.repo, &["merge-base", "--is-ancestor", &head, "HEAD"]).is_some() {
        println!(
            "orbit merge --queue: {home} already holds {integration} ({}): nothing to merge",
            &head[..12]
        );
        return Ok(0);
    }
    let blocking = crate::merge::blocking_changes(&q.repo, &head);
    if !blocking.is_empty() {
        return Err(Error::Refused(format!(
            "uncommitted changes to files the merge would touch: {}; commit or stash them, then orbit merge --queue again",
            blocking.join(", ")
        )));
    }
    let status = Command::new("git")
        .arg("-C")
        .arg(&q.repo)
        .args(["merge", "--no-edit", "-m"])
        .arg(format!(
            "Merge {integration} (orbit merge --queue: {count} task(s) verified)"
        ))
        .arg(&head)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| Error::io("cannot run git merge", e))?;
    if !status.success() {
        return Err(Error::Git(format!(
            "git merge of {integration} into {home} failed (see its output above): resolve it, or git merge --abort"
        )));
    }
    println!(
        "orbit merge --queue: {integration} ({}, {count} done task(s)) verified and merged into {home}",
        &head[..12]
    );
    Ok(0)
}
