//! One attempt at a task: a loop made the way `orbit init` makes one, from the integration
//! branch's head, and, once it stops, what it did: its stop, what it spent, the last
//! verify output and what the agent tried (for the task's failure section).

use std::fs;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches};

use super::store::{Queue, Running};
use super::task::Task;
use crate::error::{Error, Result};
use crate::fsx;

/// The most lines of a check's output a failure section carries.
pub const OUTPUT_LINES: usize = 60;

/// The loop of attempt `n` at task `name`: its name (and directory under `.orbit/`).
pub fn loop_name(name: &str, n: u32) -> String {
    format!("{name}-a{n}")
}

/// What the agent of an attempt reads: the task's description, what the queue asks, and
/// every earlier failure section of the task.
pub fn goal_text(name: &str, task: &Task, n: u32) -> String {
    let mut goal = task.description.trim().to_string();
    goal.push_str(&format!(
        "\n\n---\nThis is task `{name}` of an orbit queue, attempt {n} of {}. It is done when this command exits 0 (on your branch, and again on the queue's branch once merged): `{}`.\n",
        task.max_attempts, task.verifier
    ));
    let failures = task.failures();
    if !failures.is_empty() {
        goal.push_str(
            "\nEarlier attempts failed; each section below says how and what was tried. Do not repeat what did not work.\n\n",
        );
        goal.push_str(failures);
        goal.push('\n');
    }
    goal
}

/// The `orbit init` command line of an attempt's loop.
fn init_argv(task: &Task, goal_file: &Path, dir: &str) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        "orbit".into(),
        "init".into(),
        "--goal-file".into(),
        goal_file.display().to_string(),
        "--dir".into(),
        dir.into(),
        "--verify".into(),
        task.verifier.clone(),
    ];
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            argv.push(format!("--{name}"));
            argv.push(v);
        }
    };
    flag("engine", task.engine.clone());
    flag("exec", task.exec.clone());
    flag("max-iterations", task.max_iterations.map(|n| n.to_string()));
    flag("exec-timeout", task.exec_timeout.clone());
    flag("loop-timeout", task.loop_timeout.clone());
    flag("usd-cap", task.usd_cap.clone());
    flag("pass-k", task.pass_k.map(|n| n.to_string()));
    flag("sandbox", task.sandbox.clone());
    for g in &task.protect {
        argv.push("--protect".into());
        argv.push(g.clone());
    }
    argv.extend(task.init.iter().cloned());
    argv
}

/// Makes attempt `n`'s loop from `base` (the integration branch's head), the loop's
/// starting branch recorded as `integration`. A directory a crash left before the attempt
/// was recorded (never run) is made anew.
pub fn make_loop(
    q: &Queue,
    name: &str,
    task: &Task,
    n: u32,
    base: &str,
    integration: &str,
) -> Result<(PathBuf, String)> {
    let lname = loop_name(name, n);
    let rel = format!(".orbit/{lname}");
    let dir = q.repo.join(&rel);
    if dir.exists() {
        let started = crate::state::State::parse_file(&dir.join("state.env"))
            .map(|s| s.started_at)
            .unwrap_or(0);
        if started != 0 {
            return Err(Error::Refused(format!(
                "{rel} exists and has run, but the queue has no record of it: move it away (or remove it), then orbit queue run again"
            )));
        }
        fs::remove_dir_all(&dir)
            .map_err(|e| Error::io(format!("cannot remove {}", dir.display()), e))?;
    }
    let goals = q.work_dir().join("goals");
    fs::create_dir_all(&goals)
        .map_err(|e| Error::io(format!("cannot create {}", goals.display()), e))?;
    let goal_file = goals.join(format!("{lname}.md"));
    fsx::write_atomic(&goal_file, goal_text(name, task, n).as_bytes())?;
    let argv = init_argv(task, &goal_file, &rel);
    let refused = |why: String| {
        Error::Usage(format!(
            "the task {name} makes no loop: orbit init refuses its fields ({why}); edit .orbit/queue/{name}.md"
        ))
    };
    let first_line = |e: clap::Error| e.to_string().lines().next().unwrap_or("").to_string();
    let matches = crate::cli::Cli::command()
        .try_get_matches_from(&argv)
        .map_err(|e| refused(first_line(e)))?;
    let cli = crate::cli::Cli::from_arg_matches(&matches).map_err(|e| refused(first_line(e)))?;
    let crate::cli::Command::Init(mut args) = cli.command else {
        unreachable!("the argv is an init command line");
    };
    // Where each `--name` of the task's init flags stands says which check it names.
    let m = matches
        .subcommand_matches("init")
        .expect("the argv is an init command line");
    args.check_name = crate::cli::check_names_by_place(m).map_err(refused)?;
    crate::init::init(&args)?;
    // The loop starts from the integration branch's head, not the user's checkout: the
    // runner's first run takes its base and starting branch from these two files.
    fsx::write_atomic(
        &dir.join(".origin-branch"),
        format!("{integration}\n").as_bytes(),
    )?;
    fsx::write_atomic(
        &dir.join(".baseline-commit"),
        format!("{base}\n").as_bytes(),
    )?;
    Ok((dir, format!("orbit/{lname}")))
}

/// How an attempt's loop stopped, read from its state.
#[derive(Debug, Clone)]
pub struct Stop {
    pub status: String,
    pub reason: String,
    pub cost_microusd: u64,
    pub resume_at: u64,
}

impl Stop {
    /// When a loop paused by its provider's rate limit resumes; None for any other stop.
    pub fn rate_paused(&self) -> Option<u64> {
        (self.status == crate::contract::Status::Paused.as_str()
            && self.reason == crate::contract::StopReason::RateLimit.as_str())
        .then_some(self.resume_at)
    }

    pub fn done(&self) -> bool {
        self.status == crate::contract::Status::Done.as_str()
    }

    /// Whether the loop's red gate found its checks passing on the untouched tree: the
    /// goal was met before the agent did anything.
    pub fn vacuous(&self) -> bool {
        self.reason == crate::contract::StopReason::VacuousVerify.as_str()
    }

    /// Whether the loop is at rest (stopped), so the attempt is over.
    pub fn at_rest(&self) -> bool {
        !matches!(self.status.as_str(), "READY" | "CONTINUE")
    }
}

/// The loop's stop as its state.env says.
pub fn stop_of(dir: &Path) -> Option<Stop> {
    let s = crate::state::State::parse_file(&dir.join("state.env")).ok()?;
    Some(Stop {
        status: s.last_status.as_str().to_string(),
        reason: s.stop_reason.as_str().to_string(),
        cost_microusd: s.cost_microusd,
        resume_at: s.resume_at,
    })
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    let mut out = String::new();
    if from > 0 {
        out.push_str(&format!("[… {from} earlier line(s) left out]\n"));
    }
    out.push_str(&lines[from..].join("\n"));
    out
}

/// The last verify output of the loop's last iteration that ran its checks.
pub fn last_verify_output(dir: &Path) -> String {
    for (_, it) in crate::logs::iterations(dir).into_iter().rev() {
        if let Ok(bytes) = fs::read(it.join("verify.log")) {
            return tail(&String::from_utf8_lossy(&bytes), OUTPUT_LINES);
        }
    }
    "(no verify output recorded)".into()
}

/// What the agent tried: the last entries of the loop's progress.md.
pub fn what_was_tried(dir: &Path) -> String {
    let Ok(bytes) = fs::read(dir.join("progress.md")) else {
        return "(no progress recorded)".into();
    };
    let p = crate::progress::parse(&bytes);
    let last: Vec<String> = p
        .entries
        .iter()
        .rev()
        .filter(|e| !e.text.starts_with("## Iteration 0 "))
        .take(3)
        .map(|e| e.text.trim().to_string())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if last.is_empty() {
        return "(no progress recorded)".into();
    }
    // The heading and the lines that say what the agent did and what came of it.
    let keep = ["- agent:", "- verify:", "- changed:", "- decision:"];
    let text: Vec<String> = last
        .join("\n")
        .lines()
        .filter_map(|l| {
            if let Some(h) = l.strip_prefix("## ") {
                Some(format!("- {h}"))
            } else if keep.iter().any(|k| l.starts_with(k)) {
                Some(format!("  {l}"))
            } else {
                None
            }
        })
        .collect();
    tail(&text.join("\n"), 40)
}

/// A task's failure section for attempt `n`: the final one when the budget is spent.
pub fn failure_section(n: u32, last: bool, why: &str, output: &str, tried: &str) -> String {
    let heading = if last {
        format!("## Attempt {n} (final) — budget exhausted")
    } else {
        format!("## Attempt {n} failure")
    };
    format!(
        "{heading}\n\n{why}\n\n```text\n{}\n```\n\n### What was tried\n\n{}\n",
        output.replace("```", "'''").trim_end(),
        tried.trim()
    )
}

/// Records failed attempt `n` in `task`: its section (and `note`, if any) appended, the
/// count, and the task ready again or, at its last attempt, failed. Whether it was the last.
pub fn record_failure(
    task: &mut Task,
    n: u32,
    why: &str,
    output: &str,
    tried: &str,
    note: Option<String>,
) -> bool {
    let last = n >= task.max_attempts;
    let mut section = failure_section(n, last, why, output, tried);
    if let Some(note) = note {
        section.push('\n');
        section.push_str(&note);
    }
    task.history = if task.history.trim().is_empty() {
        section
    } else {
        format!("{}\n\n{section}", task.history.trim_end())
    };
    task.attempts = n;
    task.status = if last {
        crate::contract::queue::TaskStatus::Failed
    } else {
        crate::contract::queue::TaskStatus::Ready
    };
    task.reason = last.then(|| why.to_string());
    last
}

/// The running record of a new attempt.
pub fn running(n: u32, dir: &Path, q: &Queue, branch: String, base: &str, sha: &str) -> Running {
    Running {
        attempt: n,
        loop_dir: dir
            .strip_prefix(&q.repo)
            .unwrap_or(dir)
            .display()
            .to_string(),
        branch,
        base: base.to_string(),
        pinned_sha256: sha.to_string(),
        started_at: fsx::now_epoch(),
        engine: String::new(),
        estimate_microusd: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure section carries the last verify output bounded: its last lines, and a line
    /// that says how many were left out.
    #[test]
    fn the_last_verify_output_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        for (n, lines) in [("000001", 5), ("000002", 200)] {
            let it = dir.path().join("iterations").join(n);
            fs::create_dir_all(&it).unwrap();
            let log: String = (1..=lines).map(|i| format!("{n} line {i}\n")).collect();
            fs::write(it.join("verify.log"), log).unwrap();
        }
        let out = last_verify_output(dir.path());
        assert_eq!(out.lines().count(), OUTPUT_LINES + 1, "{out}");
        assert!(
            out.starts_with("[… 140 earlier line(s) left out]\n"),
            "{out}"
        );
        assert!(out.ends_with("000002 line 200"), "{out}");
        assert!(!out.contains("000002 line 140\n"), "{out}");
        let section = failure_section(2, false, "why", &out, "tried");
        assert!(section.len() < 2000, "{section}");
    }
}
