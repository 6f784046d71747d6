//! `orbit schedule --queue`: the queue of the repository ticked on this machine, each tick
//! one `orbit queue run --once` (start what is ready, run those attempts to their stop):
//! a crontab line, a systemd user service and timer, or a tmux session that ticks at
//! `--every` until the queue needs nobody (every task done, or one that waits for a human).
//! The orbit binary is named by its absolute path (cron and systemd have no PATH of ours).

use std::fs;
use std::path::{Path, PathBuf};

use crate::cli::ScheduleArgs;
use crate::contract::queue::QueueExit;
use crate::error::{Error, Result};
use crate::fsx;
use crate::schedule::local::{
    Kinds, Said, TickService, crontab_with, crontab_write, new_tmux_session, remove_named, sh_word,
    tick_units, unit_dir, unit_safe,
};
use crate::schedule::{self};

/// The arguments of one tick.
pub const TICK: &str = "queue run --once";

/// What a queue's schedule names, resolved now.
pub struct QueueTarget {
    /// The repository root.
    pub repo: PathBuf,
    /// `.orbit/queue` (absolute): the crontab line's marker, where its logs go.
    pub dir: PathBuf,
    /// The orbit binary, absolute.
    pub orbit: PathBuf,
    pub path_env: String,
}

/// The queue of the repository around the current directory.
pub fn target() -> Result<QueueTarget> {
    let cwd =
        std::env::current_dir().map_err(|e| Error::io("cannot read the current directory", e))?;
    let root = crate::locate::repo_root(&cwd)?;
    let repo = fs::canonicalize(&root)
        .map_err(|e| Error::io(format!("cannot resolve {}", root.display()), e))?;
    let dir = repo.join(".orbit").join("queue");
    let has_task = fs::read_dir(&dir).is_ok_and(|rd| {
        rd.filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().ends_with(".md"))
    });
    if !has_task {
        return Err(Error::Usage(format!(
            "{} has no task: orbit queue add \"GOAL\" --verify CMD first, then schedule the queue",
            dir.display()
        )));
    }
    let orbit = std::env::current_exe()
        .and_then(fs::canonicalize)
        .map_err(|e| Error::io("cannot find the orbit executable", e))?;
    let path_env = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    Ok(QueueTarget {
        repo,
        dir,
        orbit,
        path_env,
    })
}

/// The name of the queue's systemd units and tmux session: a short hash of the repository.
pub fn queue_schedule_name(t: &QueueTarget) -> String {
    let hash = fsx::sha256_hex(t.repo.as_os_str().as_encoded_bytes());
    format!("orbit-queue-{}", &hash[..8])
}

/// `orbit queue run`'s exits that are not a failure for a scheduler: tasks left, another
/// run holds the queue, nothing left but a task that waits for a human (0 is success).
pub fn success_codes() -> Vec<u8> {
    [
        QueueExit::Remaining,
        QueueExit::Locked,
        QueueExit::NotAllDone,
    ]
    .iter()
    .map(|e| e.code())
    .collect()
}

/// The queue's crontab line (no trailing newline); its `# orbit:` marker names the queue's
/// directory, so an install replaces it and `--list` shows it.
pub fn cron_line(t: &QueueTarget, every: &str) -> Result<String> {
    let when = schedule::cron_when(every)?;
    Ok(format!(
        "{when} cd {} && PATH={} {} {TICK} >>{} 2>&1 # orbit:{}",
        sh_word(&t.repo.display().to_string())?,
        sh_word(&t.path_env)?,
        sh_word(&t.orbit.display().to_string())?,
        sh_word(&t.dir.join("cron.log").display().to_string())?,
        sh_word(&t.dir.display().to_string())?,
    ))
}

/// The queue's systemd user service and timer.
pub fn systemd_units(t: &QueueTarget, every: &str) -> Result<(String, String)> {
    let repo = t.repo.display().to_string();
    let orbit = t.orbit.display().to_string();
    unit_safe(&[&repo, &orbit, &t.path_env], true)?;
    tick_units(
        &TickService {
            what: &format!("orbit queue of {repo}"),
            workdir: &repo,
            path_env: &t.path_env,
            exec: &format!("{orbit} {TICK}"),
            why: [
                "Not failures: tasks left, another run holds the queue, or a task waits for a",
                "human (failed or blocked). Failures: 1 (orbit), 2 (bad input).",
            ],
            success: &success_codes(),
            log: &t.dir.join("systemd.log").display().to_string(),
        },
        every,
    )
}

/// The tmux session's command: a tick every `every` until the queue needs nobody.
pub fn tmux_command(t: &QueueTarget, every: &str) -> Result<String> {
    let secs = schedule::every_secs(every)?;
    let again: Vec<String> = [QueueExit::Remaining, QueueExit::Locked]
        .iter()
        .map(|e| e.code().to_string())
        .collect();
    Ok(format!(
        "export PATH={}; while :; do {} {TICK}; rc=$?; case $rc in {}) sleep {secs} ;; *) break ;; esac; done; printf '\\norbit: the queue needs no more ticks (exit %s); press Enter to close this window\\n' \"$rc\"; read -r _",
        sh_word(&t.path_env)?,
        sh_word(&t.orbit.display().to_string())?,
        again.join("|"),
    ))
}

/// `orbit schedule --queue --remove [--cron|--systemd|--tmux]`.
fn remove(args: &ScheduleArgs, t: &QueueTarget) -> Result<u8> {
    let all = !(args.cron || args.systemd || args.tmux);
    let name = queue_schedule_name(t);
    let marker = format!("# orbit:{}", sh_word(&t.dir.display().to_string())?);
    remove_named(
        &name,
        |l| l.ends_with(&marker),
        Kinds {
            cron: all || args.cron,
            systemd: all || args.systemd,
            tmux: all || args.tmux,
        },
        Said {
            cron: "the queue's crontab line",
            tmux: "",
            none: &format!("the queue of {}", t.repo.display()),
        },
    )?;
    Ok(0)
}

/// `orbit schedule --queue`.
pub fn run(args: &ScheduleArgs) -> Result<u8> {
    let t = target()?;
    if args.remove {
        return remove(args, &t);
    }
    let name = queue_schedule_name(&t);
    if args.cron {
        let line = cron_line(&t, &args.every)?;
        if !args.install {
            println!("{line}");
            return Ok(0);
        }
        let marker = format!("# orbit:{}", sh_word(&t.dir.display().to_string())?);
        let (current, table) = crontab_with(&marker, &line)?;
        if table == current {
            println!(
                "orbit: the crontab already ticks the queue every {}",
                args.every
            );
            return Ok(0);
        }
        crontab_write(&table)?;
        println!("orbit: installed in the crontab: {line}");
        return Ok(0);
    }
    if args.systemd {
        let (service, timer) = systemd_units(&t, &args.every)?;
        if !args.install {
            println!("# ~/.config/systemd/user/{name}.service\n{service}");
            println!("# ~/.config/systemd/user/{name}.timer\n{timer}");
            println!(
                "# then: systemctl --user daemon-reload && systemctl --user enable --now {name}.timer"
            );
            return Ok(0);
        }
        let units = unit_dir()?;
        fs::create_dir_all(&units)
            .map_err(|e| Error::io(format!("cannot create {}", units.display()), e))?;
        fsx::write_atomic(&units.join(format!("{name}.service")), service.as_bytes())?;
        fsx::write_atomic(&units.join(format!("{name}.timer")), timer.as_bytes())?;
        println!(
            "orbit: wrote {0}/{name}.service and {0}/{name}.timer",
            units.display()
        );
        println!(
            "  enable: systemctl --user daemon-reload && systemctl --user enable --now {name}.timer"
        );
        return Ok(0);
    }
    if args.tmux {
        return start_in_tmux(&t, &name, &args.every);
    }
    Err(Error::Usage(
        "say how: --cron, --systemd or --tmux (or --remove); the queue is not scheduled on Kubernetes or GitHub Actions".into(),
    ))
}

/// A detached tmux session that ticks the queue.
fn start_in_tmux(t: &QueueTarget, name: &str, every: &str) -> Result<u8> {
    let cmd = tmux_command(t, every)?;
    new_tmux_session(name, &t.repo, &cmd)?;
    println!("orbit: the queue ticks every {every} in tmux session {name}: tmux attach -t ={name}");
    Ok(0)
}

/// Whether `dir` (a schedule's marker) is a queue's directory.
pub fn is_queue_dir(dir: &Path) -> bool {
    dir.file_name().is_some_and(|n| n == "queue")
        && dir
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == ".orbit")
        && dir.is_dir()
}
