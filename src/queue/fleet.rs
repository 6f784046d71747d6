//! The queue across machines: each attempt runs in a clone of its own (a pod of a
//! Kubernetes Indexed Job, a job of a GitHub Actions matrix) and the clones exchange only
//! what git carries. `orbit queue attempt TASK` runs the task's next attempt from the
//! remote's integration branch and pushes its loop branch `orbit/TASK-aN` and its envelope
//! under `refs/notes/orbit-fleet/TASK-aN` (a ref of its own, so attempts never race on one
//! notes ref). `orbit queue land` (the merge step, a clone of its own) trusts nothing
//! because it arrived: each pushed attempt's envelope is checked as `orbit verify` checks it
//! (only the notes of that attempt's own ref, on that attempt's own commits), its branch is
//! merged and the task's checks run on the merged tree through a loop the merge step makes
//! itself from the task's file ([`super::land::merge_checked`]); then it writes the tasks'
//! statuses and failure sections as one commit on the integration branch, and pushes it with
//! `refs/notes/orbit`. The task files travel on the integration branch: the queue's files
//! are committed (`.orbit/queue/<task>.md`) on the branch the queue builds on.

use std::path::Path;
use std::process::{Command, Stdio};

use super::attempt::{self, loop_name};
use super::land::{self, Landed, git_in, git_ok, head_of};
use super::plan;
use super::store::{Found, Queue};
use super::task::Task;
use crate::cli::{QueueAttemptArgs, QueueLandArgs};
use crate::contract::Engine;
use crate::contract::queue::TaskStatus;
use crate::envelope::git_line;
use crate::error::{Error, Result};
use crate::schedule::queue_fleet::Fleet;

/// Where an attempt's envelope (its loop's `refs/notes/orbit`) is pushed: one ref per
/// attempt, `refs/notes/orbit-fleet/<task>-a<N>`.
pub const NOTES_PREFIX: &str = "refs/notes/orbit-fleet/";
/// Where an attempt's envelope signatures (`refs/notes/orbit-sig`) are pushed.
pub const SIG_NOTES_PREFIX: &str = "refs/notes/orbit-sig-fleet/";
/// Where the merge step keeps the remote's notes it fetched (never read as envelopes).
const FETCHED_NOTES: &str = "refs/notes/fleet-remote/";
/// The queue's task files in a commit's tree.
const TASKS_IN_TREE: &str = ".orbit/queue";

/// The tasks that may start now, in the order they start: each parses, is `ready` with an
/// attempt left, and every task it comes after is done.
pub fn startable(q: &Queue) -> Result<Vec<String>> {
    let found = q.tasks()?;
    let problems = plan::problems(&found);
    let status = found
        .iter()
        .filter_map(|f| f.task.as_ref().ok().map(|t| (f.name.clone(), t.status)))
        .collect();
    let mut ready: Vec<(String, i64)> = found
        .iter()
        .filter_map(|f| Some((f, f.task.as_ref().ok()?)))
        .filter(|(f, t)| {
            !problems.contains_key(&f.name)
                && t.status == TaskStatus::Ready
                && t.attempts < t.max_attempts
                && plan::deps_state(t, &status, &problems) == Ok(true)
        })
        .map(|(f, t)| (f.name.clone(), t.priority))
        .collect();
    let mut st = q.load_state()?;
    plan::order(&mut ready, &mut st);
    Ok(ready.into_iter().map(|(n, _)| n).collect())
}

/// The queue's task files as committed at `rev`, written into `into` (a queue directory of
/// its own): the queue another machine finds when it clones.
pub fn tasks_at(repo: &Path, rev: &str, into: &Path) -> Result<Queue> {
    if into.exists() {
        std::fs::remove_dir_all(into)
            .map_err(|e| Error::io(format!("cannot remove {}", into.display()), e))?;
    }
    std::fs::create_dir_all(into)
        .map_err(|e| Error::io(format!("cannot create {}", into.display()), e))?;
    let list = git_ok(
        repo,
        &[
            "ls-tree",
            "--name-only",
            rev,
            "--",
            &format!("{TASKS_IN_TREE}/"),
        ],
    )?;
    for path in list.lines().filter(|p| p.ends_with(".md")) {
        let (ok, text) = git_in(repo, &["cat-file", "blob", &format!("{rev}:{path}")])?;
        let name = Path::new(path).file_name().expect("a file of the tree");
        if ok {
            crate::fsx::write_atomic(&into.join(name), text.as_bytes())?;
        }
    }
    Ok(Queue {
        repo: repo.to_path_buf(),
        dir: into.to_path_buf(),
    })
}

/// The commit of the first of `refs` that names one.
fn first_commit(repo: &Path, refs: &[String]) -> Option<String> {
    refs.iter().find_map(|r| {
        git_line(
            repo,
            &["rev-parse", "--verify", "-q", &format!("{r}^{{commit}}")],
        )
        .filter(|c| !c.is_empty())
    })
}

/// Where the queue's integration branch stands on `remote` (as this clone fetched it), else
/// the branch it builds on: the commit the next attempts start from and whose task files
/// are the queue's.
fn integration_base(repo: &Path, remote: &str, onto: &str) -> Result<String> {
    first_commit(
        repo,
        &[
            format!("refs/remotes/{remote}/orbit/queue/{onto}"),
            format!("refs/remotes/{remote}/{onto}"),
            format!("refs/heads/{onto}"),
        ],
    )
    .ok_or_else(|| {
        Error::Usage(format!(
            "neither orbit/queue/{onto} nor {onto} is on {remote} (as this clone has it): name the branch the queue builds on with --onto"
        ))
    })
}

/// `--onto`, else the branch checked out.
fn onto_or_current(repo: &Path, onto: Option<&str>) -> Result<String> {
    if let Some(o) = onto {
        return Ok(o.to_string());
    }
    git_line(repo, &["symbolic-ref", "-q", "--short", "HEAD"])
        .filter(|b| !b.is_empty())
        .ok_or_else(|| {
            Error::Usage(
                "HEAD is detached: name the branch the queue builds on with --onto BRANCH".into(),
            )
        })
}

/// The task `name` as the queue at `base` has it, with the number of its next attempt.
/// Refused unless it may start now.
fn next_attempt(q: &Queue, base: &str, name: &str) -> Result<(Task, u32)> {
    let at = tasks_at(&q.repo, base, &q.work_dir().join("fleet-tasks"))?;
    let ready = startable(&at)?;
    let f: Found = at.read_task(name, &at.task_path(name));
    let task = f.task.map_err(|e| {
        Error::Usage(format!(
            "the task {name} is not on the integration branch at {}, or does not parse (line {}: {}): commit .orbit/queue/{name}.md on the branch the queue builds on",
            &base[..12],
            e.line,
            e.reason
        ))
    })?;
    if !ready.iter().any(|r| r == name) {
        return Err(Error::Refused(format!(
            "the task {name} may not start at the integration branch's {} (status {}, attempts {}/{}, after: {}): nothing run",
            &base[..12],
            task.status,
            task.attempts,
            task.max_attempts,
            if task.after.is_empty() {
                "none".to_string()
            } else {
                task.after.join(", ")
            }
        )));
    }
    let n = task.attempts + 1;
    Ok((task, n))
}

/// Refuses a repository whose own queue has run here (`orbit queue run` made its integration
/// branch): the commands across machines move that branch and the checkout, so they run in
/// a clone of their own.
fn in_a_clone_of_its_own(q: &Queue, what: &str) -> Result<()> {
    if let Some(b) = q.load_state()?.integration_branch {
        return Err(Error::Refused(format!(
            "{what} runs in a clone of its own (a pod, a CI job): this repository runs the queue itself (orbit queue run made {b}, .orbit/queue/queue.json); clone the remote and run it there"
        )));
    }
    Ok(())
}

/// `orbit queue attempt TASK`: the task's next attempt as a loop of this clone, run to its
/// stop (a pause for its provider's rate limit is waited out: not an attempt's end), then
/// with `--push` its branch and envelope pushed. The verdict is the merge step's.
pub fn attempt(a: &QueueAttemptArgs) -> Result<u8> {
    let q = Queue::here()?;
    in_a_clone_of_its_own(&q, "orbit queue attempt")?;
    std::env::set_current_dir(&q.repo)
        .map_err(|e| Error::io(format!("cannot enter {}", q.repo.display()), e))?;
    let onto = onto_or_current(&q.repo, a.onto.as_deref())?;
    let integration = format!("orbit/queue/{onto}");
    let base = integration_base(&q.repo, &a.remote, &onto)?;
    let (task, n) = next_attempt(&q, &base, &a.task)?;
    let lname = loop_name(&a.task, n);
    if !a.only_push {
        git_ok(
            &q.repo,
            &["update-ref", &format!("refs/heads/{integration}"), &base],
        )?;
        let (dir, _) = attempt::make_loop(&q, &a.task, &task, n, &base, &integration)?;
        println!(
            "orbit queue: {}: attempt {n} of {} started (.orbit/{lname}, from {integration} at {})",
            a.task,
            task.max_attempts,
            &base[..12]
        );
        run_to_stop(&dir)?;
        let stop = attempt::stop_of(&dir);
        println!(
            "orbit queue: {}: attempt {n}'s loop stopped {} ({}); the merge step (orbit queue land) judges it",
            a.task,
            stop.as_ref().map_or("unknown", |s| s.status.as_str()),
            stop.as_ref()
                .map_or("state.env unreadable", |s| s.reason.as_str()),
        );
    }
    if a.push {
        push(&q.repo, &a.remote, &lname)?;
    }
    Ok(0)
}

/// Runs the loop at `dir` (a child `orbit run`, its output this process's) until it stops;
/// a loop paused by its provider's rate limit is run again once the limit lifts.
fn run_to_stop(dir: &Path) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::io("cannot find orbit itself", e))?;
    loop {
        Command::new(&exe)
            .arg("run")
            .arg(dir)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| Error::io("cannot start orbit run", e))?;
        let now = crate::fsx::now_epoch();
        match attempt::stop_of(dir).and_then(|s| s.rate_paused()) {
            Some(at) if at > now => {
                println!(
                    "orbit queue: rate limited until {}: the same attempt's loop resumes then",
                    crate::fsx::iso_utc(at)
                );
                std::thread::sleep(std::time::Duration::from_secs(at - now));
            }
            _ => return Ok(()),
        }
    }
}

/// Pushes attempt `lname`'s branch and its envelope notes (each to the attempt's own ref),
/// all or nothing; never over what is there (a second push of one attempt is refused).
fn push(repo: &Path, remote: &str, lname: &str) -> Result<()> {
    let branch = format!("refs/heads/orbit/{lname}");
    if head_of(repo, &format!("orbit/{lname}")).is_none() {
        return Err(Error::Refused(format!(
            "the attempt's loop made no branch orbit/{lname}: nothing to push (see its output above); the task stays ready for the next run"
        )));
    }
    let mut refs = vec![format!("{branch}:{branch}")];
    for (local, prefix) in [
        (crate::envelope::NOTES_REF, NOTES_PREFIX),
        (crate::signature::NOTES_REF, SIG_NOTES_PREFIX),
    ] {
        if first_commit(repo, &[local.to_string()]).is_some() {
            refs.push(format!("{local}:{prefix}{lname}"));
        }
    }
    let mut args = vec!["push", "--atomic", "--quiet", remote];
    args.extend(refs.iter().map(String::as_str));
    git_ok(repo, &args)?;
    println!("orbit queue: pushed orbit/{lname} and its envelope to {remote}");
    Ok(())
}

/// The remote's default branch, as this clone has it.
fn remote_default(repo: &Path, remote: &str) -> Option<String> {
    git_line(
        repo,
        &[
            "symbolic-ref",
            "-q",
            "--short",
            &format!("refs/remotes/{remote}/HEAD"),
        ],
    )
    .and_then(|r| r.strip_prefix(&format!("{remote}/")).map(str::to_string))
}

/// What the merge step does with one pushed attempt.
struct Judged {
    name: String,
    n: u32,
    landed: Landed,
    /// The attempt's own commit subjects: what it tried, as far as the merge step can see.
    tried: String,
}

/// `orbit queue land --from REMOTE`: the merge step.
pub fn land(a: &QueueLandArgs) -> Result<u8> {
    let q = Queue::here()?;
    in_a_clone_of_its_own(&q, "orbit queue land")?;
    std::env::set_current_dir(&q.repo)
        .map_err(|e| Error::io(format!("cannot enter {}", q.repo.display()), e))?;
    let remote = a.from.as_str();
    git_ok(
        &q.repo,
        &[
            "fetch",
            "--quiet",
            "--prune",
            remote,
            &format!("+refs/heads/*:refs/remotes/{remote}/*"),
            &format!("+refs/notes/*:{FETCHED_NOTES}*"),
        ],
    )?;
    let onto = match &a.onto {
        Some(o) => o.clone(),
        None => {
            remote_default(&q.repo, remote).map_or_else(|| onto_or_current(&q.repo, None), Ok)?
        }
    };
    let integration = format!("orbit/queue/{onto}");
    let base = integration_base(&q.repo, remote, &onto)?;
    git_ok(
        &q.repo,
        &["update-ref", &format!("refs/heads/{integration}"), &base],
    )?;
    // The envelopes the integration branch's merges carry: the remote's refs/notes/orbit.
    for (local, fetched) in [
        (crate::envelope::NOTES_REF, "orbit"),
        (crate::signature::NOTES_REF, "orbit-sig"),
    ] {
        match first_commit(&q.repo, &[format!("{FETCHED_NOTES}{fetched}")]) {
            Some(c) => git_ok(&q.repo, &["update-ref", local, &c])?,
            None => git_ok(&q.repo, &["update-ref", "-d", local])?,
        };
    }
    // The task files as the integration branch has them.
    git_ok(&q.repo, &["checkout", "--quiet", "--detach", &base])?;
    let mut judged = Vec::new();
    for name in startable(&q)? {
        let f = q.read_task(&name, &q.task_path(&name));
        let Ok(task) = f.task else { continue };
        let n = task.attempts + 1;
        let lname = loop_name(&name, n);
        let Some(commit) = first_commit(&q.repo, &[format!("refs/remotes/{remote}/orbit/{lname}")])
        else {
            continue;
        };
        let landed = judge(&q, &integration, &name, &task, n, &commit)?;
        let (_, tried) = git_in(
            &q.repo,
            &[
                "log",
                "--format=- %s",
                "--max-count=20",
                &format!("{base}..{commit}"),
            ],
        )?;
        judged.push(Judged {
            name,
            n,
            landed,
            tried,
        });
    }
    record(&q, &judged)?;
    commit_records(&q, &integration, &judged)?;
    let mut refs = vec![format!("refs/heads/{integration}:refs/heads/{integration}")];
    for local in [crate::envelope::NOTES_REF, crate::signature::NOTES_REF] {
        if first_commit(&q.repo, &[local.to_string()]).is_some() {
            refs.push(format!("{local}:{local}"));
        }
    }
    let mut args = vec!["push", "--atomic", "--quiet", remote];
    args.extend(refs.iter().map(String::as_str));
    git_ok(&q.repo, &args)?;
    let next = startable(&q)?;
    println!(
        "orbit queue: landed {} attempt(s); pushed {integration} to {remote}",
        judged.len()
    );
    if next.is_empty() {
        println!("orbit queue: no task is ready to start");
    } else {
        println!(
            "orbit queue: ready to start: {}: the next render runs them (orbit schedule --queue --kubernetes ... | kubectl apply -f -; a GitHub Actions schedule lists them at its next run)",
            next.join(", ")
        );
    }
    Ok(0)
}

/// The hand-off of attempt `n` of task `name` (the pushed commit `commit`), judged: its
/// envelope from that attempt's own notes ref only, checked as `orbit verify` checks it and
/// named for that attempt's loop; its branch leaves the queue's files alone; merged, and
/// the task's checks green on the merged tree, through a loop made here from the task file,
/// and so are those of each task it comes after (each through a loop made here from that
/// task's file).
fn judge(
    q: &Queue,
    integration: &str,
    name: &str,
    task: &Task,
    n: u32,
    commit: &str,
) -> Result<Landed> {
    let lname = loop_name(name, n);
    let refused = |why: String| {
        Ok(Landed::Refused {
            why,
            output: String::new(),
        })
    };
    git_ok(
        &q.repo,
        &["update-ref", &format!("refs/heads/orbit/{lname}"), commit],
    )?;
    adopt_notes(q, integration, &lname, commit)?;
    let mut t = crate::verify::Target {
        allowed_signers: crate::signature::configured_allowed_signers(&q.repo),
        require_signature: false,
        repo: q.repo.clone(),
        reference: format!("refs/heads/orbit/{lname}"),
        commit: commit.to_string(),
        loop_dir: None,
    };
    let outcome = crate::verify::check(&mut t)?;
    if let Some(code) = outcome.failure {
        return refused(format!(
            "orbit verify refused the hand-off: {code} — {}",
            outcome.why
        ));
    }
    if outcome.loop_name.as_deref() != Some(lname.as_str()) {
        return refused(format!(
            "orbit verify refused the hand-off: {} — the envelope is loop {}'s, not this attempt's ({lname})",
            crate::contract::VerifyFailure::IntegrityMismatch,
            outcome.loop_name.as_deref().unwrap_or("?")
        ));
    }
    let touched = git_ok(
        &q.repo,
        &[
            "diff",
            "--name-only",
            &format!("{integration}...{commit}"),
            "--",
            TASKS_IN_TREE,
        ],
    )?;
    if !touched.trim().is_empty() {
        return refused(format!(
            "the branch changes the queue's own files ({}): a task's attempt never writes the queue",
            touched.split_whitespace().collect::<Vec<_>>().join(", ")
        ));
    }
    let head = head_of(&q.repo, integration)
        .ok_or_else(|| Error::Git(format!("the integration branch {integration} is gone")))?;
    let (dir, _) = attempt::make_loop(q, name, task, n, &head, integration)?;
    let mut after = Vec::new();
    for d in &task.after {
        let Ok(dt) = q.read_task(d, &q.task_path(d)).task else {
            return refused(format!(
                "the task {d} it comes after does not parse here, so its verifier cannot run on the merged tree"
            ));
        };
        // The landed attempt of a done task: one after its failed ones.
        let (ddir, _) = attempt::make_loop(q, d, &dt, dt.attempts + 1, &head, integration)?;
        after.push((d.clone(), ddir));
    }
    land::merge_checked(
        q,
        &dir,
        integration,
        commit,
        &format!("orbit/{lname}"),
        outcome.digest.as_deref(),
        &after,
    )
}

/// The envelope notes of attempt `lname` become this clone's `refs/notes/orbit*` on the
/// attempt's own commits (those of `commit` not on the integration branch), and only
/// there: whatever any other ref (the remote's shared one included) says of those commits
/// is dropped first.
fn adopt_notes(q: &Queue, integration: &str, lname: &str, commit: &str) -> Result<()> {
    let own = git_ok(&q.repo, &["rev-list", &format!("{integration}..{commit}")])?;
    for (local, prefix) in [
        (crate::envelope::NOTES_REF, NOTES_PREFIX),
        (crate::signature::NOTES_REF, SIG_NOTES_PREFIX),
    ] {
        let pushed = format!("{FETCHED_NOTES}{}{lname}", &prefix["refs/notes/".len()..]);
        for c in own.lines() {
            git_in(
                &q.repo,
                &[
                    "notes",
                    &format!("--ref={local}"),
                    "remove",
                    "--ignore-missing",
                    c,
                ],
            )?;
            let (has, blob) = git_in(&q.repo, &["notes", &format!("--ref={pushed}"), "list", c])?;
            if has && !blob.trim().is_empty() {
                git_ok(
                    &q.repo,
                    &[
                        "notes",
                        &format!("--ref={local}"),
                        "add",
                        "-f",
                        "-C",
                        blob.trim(),
                        c,
                    ],
                )?;
            }
        }
    }
    Ok(())
}

/// Writes each judged task's file: done with its merged commit, or its failed attempt's
/// section (ready again, or failed at its last attempt).
fn record(q: &Queue, judged: &[Judged]) -> Result<()> {
    for j in judged {
        let f = q.read_task(&j.name, &q.task_path(&j.name));
        let Ok(mut task) = f.task else { continue };
        match &j.landed {
            Landed::Merged(c) => {
                task.status = TaskStatus::Done;
                task.merged = Some(c.clone());
                task.reason = None;
                println!(
                    "orbit queue: {}: done: attempt {} merged at {}",
                    j.name,
                    j.n,
                    &c[..12]
                );
            }
            Landed::Met(c) => {
                task.status = TaskStatus::Done;
                task.verified_on = Some(c.clone());
                task.reason = None;
                println!(
                    "orbit queue: {}: done: attempt {} met already on {}",
                    j.name,
                    j.n,
                    &c[..12]
                );
            }
            Landed::Refused { why, output } => {
                let tried = format!(
                    "The attempt ran on another machine; its commits:\n{}",
                    if j.tried.trim().is_empty() {
                        "(none)"
                    } else {
                        j.tried.trim_end()
                    }
                );
                let output = if output.is_empty() {
                    "(the attempt's own verify output stayed on its machine)"
                } else {
                    output
                };
                let last = attempt::record_failure(&mut task, j.n, why, output, &tried, None);
                println!(
                    "orbit queue: {}: attempt {} of {} failed — {why}{}",
                    j.name,
                    j.n,
                    task.max_attempts,
                    if last {
                        "; budget exhausted"
                    } else {
                        "; ready again"
                    }
                );
            }
        }
        q.write_task(&j.name, &task)?;
    }
    Ok(())
}

/// The tasks' files, as [`record`] wrote them, as one commit on the integration branch.
fn commit_records(q: &Queue, integration: &str, judged: &[Judged]) -> Result<()> {
    if judged.is_empty() {
        return Ok(());
    }
    let head = head_of(&q.repo, integration)
        .ok_or_else(|| Error::Git(format!("the integration branch {integration} is gone")))?;
    let wt = land::worktree_at(q, "records", &head)?;
    let done = judged
        .iter()
        .filter(|j| matches!(j.landed, Landed::Merged(_)))
        .count();
    let result = (|| -> Result<()> {
        for j in judged {
            let rel = format!("{TASKS_IN_TREE}/{}.md", j.name);
            let bytes = crate::fsx::read(&q.task_path(&j.name))?;
            crate::fsx::write_atomic(&wt.join(&rel), &bytes)?;
            git_ok(&wt, &["add", "--", &rel])?;
        }
        let msg = format!(
            "orbit queue: the tasks' records ({done} done, {} failed attempt(s))",
            judged.len() - done
        );
        git_ok(&wt, &["commit", "--quiet", "--no-verify", "-m", &msg])?;
        let new = git_ok(&wt, &["rev-parse", "HEAD"])?.trim().to_string();
        git_ok(
            &q.repo,
            &[
                "update-ref",
                "-m",
                "orbit queue: records",
                &format!("refs/heads/{integration}"),
                &new,
                &head,
            ],
        )?;
        Ok(())
    })();
    land::drop_worktree(q, &wt);
    result
}

/// The queue as committed: the remote's integration branch (as last fetched), else the
/// branch it builds on. Refused when no task file is committed there.
fn fleet(branch: Option<&str>) -> Result<Fleet> {
    let cwd =
        std::env::current_dir().map_err(|e| Error::io("cannot read the current directory", e))?;
    let repo = crate::locate::repo_root(&cwd)?;
    let onto = match branch {
        Some(b) => b.to_string(),
        None => crate::envelope::git_line(&repo, &["symbolic-ref", "-q", "--short", "HEAD"])
            .filter(|b| !b.is_empty())
            .ok_or_else(|| {
                Error::Usage("HEAD is detached: name the queue's branch with --branch".into())
            })?,
    };
    let base = [
        format!("refs/remotes/origin/orbit/queue/{onto}"),
        format!("refs/heads/{onto}"),
    ]
    .iter()
    .find_map(|r| {
        crate::envelope::git_line(
            &repo,
            &["rev-parse", "--verify", "-q", &format!("{r}^{{commit}}")],
        )
        .filter(|c| !c.is_empty())
    })
    .ok_or_else(|| Error::Usage(format!("--branch {onto}: no such branch")))?;
    let at = repo.join(".orbit/queue/work/fleet-tasks");
    let q = tasks_at(&repo, &base, &at)?;
    let found = q.tasks()?;
    if found.is_empty() {
        return Err(Error::Refused(format!(
            "no task of the queue is committed on {onto} at {}: the other machines get the tasks from git: git add .orbit/queue/*.md && git commit -m 'the queue' && git push",
            &base[..12]
        )));
    }
    let engines = found
        .iter()
        .filter_map(|f| f.task.as_ref().ok())
        .map(|t| {
            t.engine
                .as_deref()
                .and_then(Engine::parse)
                .unwrap_or(Engine::Claude)
        })
        .collect();
    let ready = startable(&q)?;
    Ok(Fleet {
        repo,
        onto,
        base,
        ready,
        engines,
    })
}

/// `orbit schedule --queue --kubernetes | --github-actions`: the queue as committed,
/// rendered for the cluster or the workflow.
pub fn schedule(args: &crate::cli::ScheduleArgs) -> Result<u8> {
    let f = fleet(args.branch.as_deref())?;
    crate::schedule::queue_fleet::run(args, &f)
}
