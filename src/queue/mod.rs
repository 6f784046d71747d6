//! `orbit queue`: a queue of goals, each run as loops until it is merged. Tasks are files
//! (`.orbit/queue/<task>.md`, [`task`]); `orbit queue run` ([`poller`]) runs each ready
//! task's attempts as real loops from the integration branch `orbit/queue/<name>`, lands a
//! DONE attempt ([`land`]: verified, merged in a private worktree, its verifier green on
//! the merged tree) and appends a failed one's section to the task; `orbit queue status`
//! ([`status`]) shows them. docs/queue.md is the user's guide.

pub mod attempt;
pub mod fleet;
pub mod init_flags;
pub mod land;
pub mod limits;
pub mod merge;
pub mod plan;
pub mod poller;
pub mod report;
pub mod start;
pub mod status;
pub mod store;
pub mod task;

use std::collections::BTreeMap;

use crate::cli::{QueueAddArgs, QueueArgs, QueueCommand, QueueImportArgs};
use crate::error::{Error, Result};
use store::Queue;
use task::Task;

/// The points of a night where the tests kill `orbit queue run` (SIGKILL) to prove a rerun
/// resumes with nothing lost, in the order an attempt meets them: the attempt chosen, its
/// loop made, its start recorded, its loop spawned; its DONE seen before landing, the merge
/// made in the private worktree, the integration branch moved; its end recorded in
/// queue.json, the task file written.
pub const KILL_POINTS: &[&str] = &[
    "start", "made", "recorded", "spawned", "landing", "merging", "merged", "ending", "ended",
];

/// The tests' hook: with `ORBIT_QUEUE_KILL_AT=<point>` (one of [`KILL_POINTS`]), `orbit
/// queue run` kills itself with SIGKILL when it reaches that point, as a `kill -9` from
/// outside would at that moment.
pub(crate) fn kill_point(point: &str) {
    debug_assert!(KILL_POINTS.contains(&point), "{point} is no kill point");
    if std::env::var_os("ORBIT_QUEUE_KILL_AT").is_some_and(|p| p == point) {
        let me = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &me])
            .status();
        loop {
            std::thread::park();
        }
    }
}

/// `orbit queue ...`.
pub fn run(args: &QueueArgs) -> Result<u8> {
    match &args.command {
        QueueCommand::Add(a) => add(a),
        QueueCommand::Import(a) => import(a),
        QueueCommand::Run(a) => poller::run(a),
        QueueCommand::Status(a) => status::run(a),
        QueueCommand::Attempt(a) => fleet::attempt(a),
        QueueCommand::Land(a) => fleet::land(a),
    }
}

/// A task from `orbit queue add`'s flags.
fn task_of(a: &QueueAddArgs) -> Result<Task> {
    let mut t = Task::new(&a.goal, &a.verify);
    t.after = a.after.clone();
    t.max_attempts = a.max_attempts.unwrap_or(task::DEFAULT_MAX_ATTEMPTS);
    t.priority = a.priority.unwrap_or(0);
    t.engine = a.engine.map(|e| e.as_str().to_string());
    t.exec = a.exec.clone();
    t.max_iterations = a.max_iterations;
    t.exec_timeout = a.exec_timeout.clone();
    t.loop_timeout = a.loop_timeout.clone();
    t.usd_cap = a.usd_cap.clone();
    t.pass_k = a.pass_k;
    t.sandbox = a.sandbox.map(|s| {
        match s {
            crate::config::Sandbox::None => "none",
            crate::config::Sandbox::Bwrap => "bwrap",
            crate::config::Sandbox::Auto => "auto",
        }
        .to_string()
    });
    t.protect = a.protect.clone();
    init_flags::check(&a.init.words)
        .map_err(|why| Error::Usage(format!("orbit queue add: {why}")))?;
    t.init = a.init.words.clone();
    // The file's own parser is the one judge of its fields.
    Task::parse(&t.print(), 1).map_err(|e| Error::Usage(format!("orbit queue add: {}", e.reason)))
}

/// A name for a new task: `wanted`, or the description's, made unique among `taken`.
fn fresh_name(wanted: &str, taken: &BTreeMap<String, ()>) -> String {
    if !taken.contains_key(wanted) {
        return wanted.to_string();
    }
    (2..)
        .map(|i| {
            let suffix = format!("-{i}");
            let keep = task::NAME_MAX - suffix.len();
            format!(
                "{}{suffix}",
                wanted[..wanted.len().min(keep)].trim_end_matches('-')
            )
        })
        .find(|n| !taken.contains_key(n))
        .expect("some suffix is free")
}

/// Adds `new` tasks (name, task) to the queue after checking them with the tasks there:
/// every `After` names a task, and no cycle.
fn add_all(q: &Queue, new: Vec<(String, Task)>) -> Result<()> {
    let found = q.tasks()?;
    let mut edges = plan::Edges::new();
    for f in &found {
        edges.insert(
            f.name.clone(),
            f.task.as_ref().map(|t| t.after.clone()).unwrap_or_default(),
        );
    }
    for (n, t) in &new {
        edges.insert(n.clone(), t.after.clone());
    }
    for (n, t) in &new {
        if let Some(missing) = t.after.iter().find(|a| !edges.contains_key(a.as_str())) {
            return Err(Error::Usage(format!(
                "{n}: --after {missing} names no task of the queue (orbit queue status lists them); add {missing} first"
            )));
        }
    }
    if let Some(c) = plan::cycle(&edges) {
        return Err(Error::Usage(format!(
            "refused: the tasks would wait for each other in a cycle: {}; drop one --after",
            c.join(" → ")
        )));
    }
    let mut st = q.load_state()?;
    for (n, t) in &new {
        q.write_task(n, t)?;
        st.task(n);
        println!(
            "orbit queue: added {n} (.orbit/queue/{n}.md){}",
            if t.after.is_empty() {
                String::new()
            } else {
                format!(", after {}", t.after.join(", "))
            }
        );
    }
    q.save_state(&st)
}

fn taken(q: &Queue) -> Result<BTreeMap<String, ()>> {
    Ok(q.tasks()?.into_iter().map(|f| (f.name, ())).collect())
}

/// `orbit queue add`.
fn add(a: &QueueAddArgs) -> Result<u8> {
    let q = Queue::here()?;
    let t = task_of(a)?;
    let name = match &a.name {
        Some(n) if !task::is_task_name(n) => {
            return Err(Error::Usage(format!(
                "--name {n}: a task name is lowercase letters, digits and '-', at most {} characters",
                task::NAME_MAX
            )));
        }
        Some(n) if taken(&q)?.contains_key(n) => {
            return Err(Error::Usage(format!(
                "--name {n}: the queue has a task of that name; choose another"
            )));
        }
        Some(n) => n.clone(),
        None => fresh_name(&task::name_of(&t.description), &taken(&q)?),
    };
    add_all(&q, vec![(name, t)])?;
    Ok(0)
}

/// The tasks of a backlog: one `## Title` section each (the title starts the description
/// and names the task), every error with its line.
pub fn parse_backlog(text: &str) -> std::result::Result<Vec<(String, Task)>, Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("## "))
        .collect();
    let mut out: Vec<(String, Task)> = Vec::new();
    let mut errors = Vec::new();
    for (k, &at) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(lines.len());
        let title = lines[at][3..].trim();
        let body = lines[at + 1..end].join("\n");
        let name = task::name_of(title);
        match Task::parse(&format!("{title}\n\n{body}"), at) {
            Ok(t) => {
                if out.iter().any(|(n, _)| *n == name) {
                    errors.push(format!(
                        "line {}: a second task named {name}: give the sections different titles",
                        at + 1
                    ));
                }
                out.push((name, t));
            }
            Err(e) => errors.push(format!(
                "line {}: {} (the section '{title}')",
                e.line.max(at + 1),
                e.reason
            )),
        }
    }
    if starts.is_empty() {
        errors.push("no task: a backlog has one `## Title` section per task".into());
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// `orbit queue import FILE.md`: every task of the backlog, or none.
fn import(a: &QueueImportArgs) -> Result<u8> {
    let q = Queue::here()?;
    let bytes = crate::fsx::read(&a.file)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::path(&a.file, "is not UTF-8 text: a backlog is markdown"))?;
    let tasks = parse_backlog(&text).map_err(|errs| {
        Error::Usage(format!(
            "{} does not parse, nothing added:\n  {}",
            a.file.display(),
            errs.join("\n  ")
        ))
    })?;
    let there = taken(&q)?;
    if let Some((n, _)) = tasks.iter().find(|(n, _)| there.contains_key(n)) {
        return Err(Error::Usage(format!(
            "{}: the queue has a task named {n} already: nothing added; retitle the section or remove .orbit/queue/{n}.md",
            a.file.display()
        )));
    }
    let count = tasks.len();
    add_all(&q, tasks)?;
    println!("orbit queue: imported {count} task(s); orbit queue run runs them");
    Ok(0)
}
