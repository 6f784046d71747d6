//! The queue's vocabulary (`orbit queue`, docs/queue.md): a task's statuses, the fields of a
//! task file, the queue's own files and the exit codes of `orbit queue run`. Each name's
//! meaning is in meanings.rs; docs/contract.md's queue tables are generated from here.

use std::fmt;

use serde::{Serialize, Serializer};

vocabulary! {
    /// A task's `**Status:**` (its file under `.orbit/queue/`).
    pub enum TaskStatus {
        Ready = "ready",
        Running = "running",
        Done = "done",
        Failed = "failed",
        Blocked = "blocked",
    }
}

/// The fields of a task file, one `**Field:** value` line each, in the order the queue
/// writes them, with what each holds.
pub const TASK_FIELDS: &[(&str, &str)] = &[
    (
        "Verifier",
        "The task's oracle: a shell command, exit 0 when the task is done. The loop's acceptance check, and run again on the merged tree. Required.",
    ),
    ("Status", "One of the task statuses; `ready` when added."),
    (
        "Attempts",
        "Attempts ended without the task done; 0 when added.",
    ),
    (
        "Max-Attempts",
        "Attempts allowed before the task is `failed` (default 5).",
    ),
    (
        "Priority",
        "An integer, default 0: of the ready tasks, the highest runs first (then the oldest).",
    ),
    (
        "After",
        "Tasks (by name, comma-separated) that must be done before this one starts; their verifiers run again on this task's merged tree, which must keep them green.",
    ),
    (
        "Engine",
        "The agent (`orbit init --engine`), for each attempt's loop.",
    ),
    ("Exec", "The agent command of `Engine: custom` (`--exec`)."),
    (
        "Max-Iterations",
        "Each attempt loop's cap of iterations (`--max-iterations`).",
    ),
    (
        "Exec-Timeout",
        "Each agent run's timeout (`--exec-timeout`).",
    ),
    (
        "Loop-Timeout",
        "Each attempt loop's wall-clock cap (`--loop-timeout`).",
    ),
    ("Usd-Cap", "Each attempt loop's spend cap (`--usd-cap`)."),
    ("Pass-K", "Verify passes required for DONE (`--pass-k`)."),
    ("Sandbox", "`auto`, `bwrap` or `none` (`--sandbox`)."),
    (
        "Protect",
        "A glob the agent must not change (`--protect`); one line per glob.",
    ),
    (
        "Init",
        "Every other flag of `orbit init` for each attempt's loop (`--setup`, `--regression`, `--adequacy`, `--candidates`, `--allow-host` ...), as shell words (quoted as a POSIX shell reads them, split without evaluation), given after the fields above. Checked by `orbit init`'s own parser whenever the task is read; a flag the queue decides (the goal, `--goal-file`, `--dir`, `--workspace`, `--force`, `--dry-run`) or holds as a field (`--verify`, `--engine` ... `--protect`) is refused, naming the field to use.",
    ),
    (
        "Reason",
        "Written by the queue: why the task is blocked or failed.",
    ),
    (
        "Merged",
        "Written by the queue: the integration branch's commit that made the task done.",
    ),
    (
        "Verified-On",
        "Written by the queue for a task done with no change of its own (its attempt's loop made no commit: the goal was met already): the integration branch's commit its verifier passed on. Such a task has no `**Merged:**`.",
    ),
];

/// The queue's files, relative to the repository root, with what each holds.
pub const QUEUE_FILES: &[(&str, &str)] = &[
    (
        ".orbit/queue/<task>.md",
        "A task: its description (what each attempt's agent reads), its fields, then the queue's `## Attempt N failure` sections. Human-readable and hand-editable.",
    ),
    (
        ".orbit/queue/queue.json",
        "The queue's state (written atomically): the integration branch, each task's running attempt (its loop, the pinned sha256 of its file, its engine, the estimate `--usd-cap` held for it), merged commit (or, for a task met with no change of its own, `verified_on`: the commit its verifier passed on), verdict, cost; the engines paused by a rate limit (`paused`: until when) and what each engine's finished attempts spent (`spend`).",
    ),
    (
        ".orbit/queue/queue.lock",
        "Held (flock) by the one `orbit queue run` of the queue; holds its pid. A lock of a dead process is taken over.",
    ),
    (
        ".orbit/queue/pinned/<task>.md",
        "The task file as its running attempt pinned it (what the attempt runs and is judged by).",
    ),
    (
        ".orbit/queue/changed/<task>.attempt-<N>.md",
        "A task file as it was found changed during attempt N: set aside, not taken.",
    ),
    (
        ".orbit/queue/work/",
        "The queue's private worktrees: `merge` (the integration branch's merges), `check` (the clean checkout of the merged tree the verifier runs in) and `records` (the merge step's commit of the tasks' records, `orbit queue land`); `fleet-tasks/` (the task files as committed at the integration branch, read by `orbit queue attempt` and `orbit schedule --queue --kubernetes | --github-actions`).",
    ),
    (
        ".orbit/queue/cron.log",
        "The output of the ticks of the queue's crontab line (`orbit schedule --queue --cron`), appended.",
    ),
    (
        ".orbit/queue/systemd.log",
        "The output of the ticks of the queue's systemd service (`orbit schedule --queue --systemd`), appended.",
    ),
];

/// The members of `orbit report --queue --json`'s object, with what each holds.
pub const QUEUE_REPORT_FIELDS: &[(&str, &str)] = &[
    (
        "queue",
        "The branch the queue was made from (null before its first run).",
    ),
    ("integration_branch", "`orbit/queue/<branch>`."),
    (
        "done",
        "The done tasks: `name`, `merged_commit` (the integration branch's merge), `verified_on` (for a task done with no change of its own: the commit its verifier passed on; else null), `attempt` (the attempt that landed).",
    ),
    (
        "failed",
        "The failed tasks: `name`, `attempts`, `why` (the first lines of its last `## Attempt` section: its heading and reason).",
    ),
    (
        "blocked",
        "The blocked tasks: `name`, `reason` (the task in the way).",
    ),
    (
        "other",
        "The tasks neither done, failed nor blocked: `name`, `status` (null when the file does not parse), `why` (the running attempt's loop, or the parse error).",
    ),
    (
        "spend",
        "`tasks` (each task's `name`, `cost_usd`, `cost_microusd`: every attempt's loop), `total_usd`, `total_microusd`.",
    ),
    (
        "paused",
        "The engines paused by a rate limit: the epoch second each lifts.",
    ),
    (
        "next",
        "What to run next, in order: `orbit merge --queue` while the integration branch holds work its branch does not, what to do for a failed task, `orbit queue run` while tasks are left.",
    ),
];

/// The exit codes of `orbit queue run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueExit {
    AllDone,
    Failure,
    Usage,
    Remaining,
    Locked,
    NotAllDone,
}

impl QueueExit {
    pub const ALL: &'static [QueueExit] = &[
        QueueExit::AllDone,
        QueueExit::Failure,
        QueueExit::Usage,
        QueueExit::Remaining,
        QueueExit::Locked,
        QueueExit::NotAllDone,
    ];

    pub const fn code(self) -> u8 {
        match self {
            QueueExit::AllDone => 0,
            QueueExit::Failure => 1,
            QueueExit::Usage => 2,
            QueueExit::Remaining => 10,
            QueueExit::Locked => 20,
            QueueExit::NotAllDone => 24,
        }
    }
}

/// The flags of `orbit init` a queue's task holds as a field of its own (not in its
/// `**Init:**`): (clap id, field).
pub const INIT_FIELD_FLAGS: &[(&str, &str)] = &[
    ("verify", "Verifier"),
    ("engine", "Engine"),
    ("exec", "Exec"),
    ("max_iterations", "Max-Iterations"),
    ("exec_timeout", "Exec-Timeout"),
    ("loop_timeout", "Loop-Timeout"),
    ("usd_cap", "Usd-Cap"),
    ("pass_k", "Pass-K"),
    ("sandbox", "Sandbox"),
    ("protect", "Protect"),
];

/// The flags of `orbit init` the queue decides for each attempt's loop (never in a task's
/// `**Init:**`): (clap id, flag, why they cannot be given).
pub const INIT_DECIDED: &[(&str, &str, &str)] = &[
    (
        "goal",
        "GOAL",
        "the goal is the task's description: write it above the task's fields",
    ),
    (
        "goal_file",
        "goal-file",
        "the goal is the task's description: write it above the task's fields (orbit queue add GOAL)",
    ),
    (
        "dir",
        "dir",
        "the queue makes each attempt's loop itself, in .orbit/<task>-a<N>: drop it",
    ),
    (
        "workspace",
        "workspace",
        "each attempt's loop needs a workspace of its own, from the integration branch's head; one path for all would hand the next attempt the first one's worktree: drop it",
    ),
    (
        "force",
        "force",
        "each attempt's loop is new, made from the integration branch: drop it",
    ),
    (
        "dry_run",
        "dry-run",
        "the queue makes and runs each attempt's loop: drop it (orbit init --dry-run shows one loop)",
    ),
];

/// Why init's flag `id` cannot be among a task's init flags, if it cannot.
pub fn init_flag_held(id: &str) -> Option<String> {
    if let Some((_, field)) = INIT_FIELD_FLAGS.iter().find(|(i, _)| *i == id) {
        let flag = if id == "verify" {
            "--verify".to_string()
        } else {
            format!("--{}", id.replace('_', "-"))
        };
        let more = if id == "verify" {
            "; a further check is a --regression or --reproduction"
        } else {
            ""
        };
        return Some(format!(
            "{flag} is the task's **{field}:** field (orbit queue add {flag}){more}"
        ));
    }
    INIT_DECIDED
        .iter()
        .find(|(i, _, _)| *i == id)
        .map(|(_, flag, why)| {
            if id == "goal" {
                format!("a word that is no flag: {why}")
            } else {
                format!("--{flag}: {why}")
            }
        })
}
