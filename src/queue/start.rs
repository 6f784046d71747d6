//! What `orbit queue run` does around its attempts: the integration branch made at the
//! first run, the task files an interrupted run left recorded but unwritten, and the child
//! `orbit run` of each attempt's loop.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::land;
use super::store::{Queue, State};
use crate::error::{Error, Result};
use crate::fsx;

/// The integration branch: made at the first run from the branch checked out (or
/// `--onto`), never moving the user's branch; later runs keep it.
pub fn integration_branch(q: &Queue, st: &mut State, onto: Option<&str>) -> Result<String> {
    if let (Some(b), Some(name)) = (&st.integration_branch, &st.name) {
        if let Some(o) = onto.filter(|o| *o != name) {
            return Err(Error::Usage(format!(
                "the queue was made onto {name} (its branch {b}), not {o}: run without --onto"
            )));
        }
        if land::head_of(&q.repo, b).is_none() {
            return Err(Error::Refused(format!(
                "the queue's integration branch {b} is gone: recreate it (git branch {b} {name}) or remove .orbit/queue/queue.json to start over"
            )));
        }
        return Ok(b.clone());
    }
    let name = match onto {
        Some(o) => o.to_string(),
        None => crate::envelope::git_line(&q.repo, &["symbolic-ref", "-q", "--short", "HEAD"])
            .filter(|b| !b.is_empty())
            .ok_or_else(|| {
                Error::Usage(
                    "HEAD is detached: check out the branch the queue builds on, or name it with --onto BRANCH".into(),
                )
            })?,
    };
    let base = land::head_of(&q.repo, &name)
        .ok_or_else(|| Error::Usage(format!("--onto {name}: no such branch")))?;
    let branch = format!("orbit/queue/{name}");
    if land::head_of(&q.repo, &branch).is_none() {
        let ok = Command::new("git")
            .arg("-C")
            .arg(&q.repo)
            .args(["branch", &branch, &base])
            .stdin(Stdio::null())
            .status()
            .map_err(|e| Error::io("cannot run git", e))?;
        if !ok.success() {
            return Err(Error::Git(format!(
                "cannot make the integration branch {branch}"
            )));
        }
    }
    println!(
        "orbit queue: integration branch {branch}, from {name} at {}",
        &base[..12]
    );
    st.name = Some(name);
    st.integration_branch = Some(branch.clone());
    Ok(branch)
}

/// Writes the task files queue.json holds for them (an attempt's end recorded, its file
/// not yet written), then drops them from queue.json.
pub fn finish_pending(q: &Queue, st: &mut State) -> Result<()> {
    let pending: Vec<(String, String)> = st
        .tasks
        .iter()
        .filter_map(|(n, t)| t.pending.clone().map(|p| (n.clone(), p)))
        .collect();
    if pending.is_empty() {
        return Ok(());
    }
    for (name, text) in &pending {
        fsx::write_atomic(&q.task_path(name), text.as_bytes())?;
        st.task(name).pending = None;
    }
    q.save_state(st)
}

/// A child `orbit run DIR` (a real loop), its output into the queue's log of that loop.
pub fn spawn(q: &Queue, dir: &Path) -> Result<Child> {
    let logs = q.work_dir().join("logs");
    fs::create_dir_all(&logs).map_err(|e| Error::io("cannot create the queue's logs/", e))?;
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("loop");
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("{name}.log")))
        .map_err(|e| Error::io("cannot open a loop's log", e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("cannot find orbit itself", e))?;
    Command::new(exe)
        .arg("run")
        .arg(dir)
        .current_dir(&q.repo)
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| Error::io("cannot open a loop's log", e))?,
        )
        .stderr(log)
        .spawn()
        .map_err(|e| Error::io("cannot start orbit run", e))
}
