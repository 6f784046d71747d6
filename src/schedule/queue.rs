//! `orbit schedule --queue`: the queue of the repository ticked on this machine, each tick
//! one `orbit queue run --once` (start what is ready, run those attempts to their stop):
//! a crontab line, a systemd user service and timer, or a tmux session that ticks at
//! `--every` until the queue needs nobody (every task done, or one that waits for a human).
//! The orbit binary is named by its absolute path (cron and systemd have no PATH of ours).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cli::ScheduleArgs;
use crate::contract::queue::QueueExit;
use crate::error::{Error, Result};
use crate::fsx;
use crate::schedule::local::{sh_word, which};
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
    let (m, h) = schedule::interval(every)?;
    let calendar = if m > 0 {
        format!("*:0/{m}")
    } else if h == 24 {
        "daily".into()
    } else {
        format!("0/{h}:00")
    };
    let repo = t.repo.display().to_string();
    let orbit = t.orbit.display().to_string();
    for text in [&repo, &orbit, &t.path_env] {
        if text
            .chars()
            .any(|c| c.is_control() || c == '"' || c == '\\' || c == '%' || c == ' ')
        {
            return Err(Error::Usage(format!(
                "'{}' cannot be written into a systemd unit safely: use a plainer path",
                text.escape_debug()
            )));
        }
    }
    let success: Vec<String> = success_codes().iter().map(u8::to_string).collect();
    let service = format!(
        "[Unit]\n\
         Description=orbit queue of {repo}: one tick\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         WorkingDirectory={repo}\n\
         Environment=\"PATH={path}\"\n\
         ExecStart={orbit} {TICK}\n\
         # Not failures: tasks left, another run holds the queue, or a task waits for a\n\
         # human (failed or blocked). Failures: 1 (orbit), 2 (bad input).\n\
         SuccessExitStatus={success}\n\
         StandardOutput=append:{log}\n\
         StandardError=append:{log}\n",
        path = t.path_env,
        success = success.join(" "),
        log = t.dir.join("systemd.log").display(),
    );
    let timer = format!(
        "[Unit]\n\
         Description=orbit queue of {repo}: a tick every {every}\n\
         \n\
         [Timer]\n\
         OnCalendar={calendar}\n\
         Persistent=true\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n"
    );
    Ok((service, timer))
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

fn crontab(args: &[&str], input: Option<&str>) -> Result<String> {
    let mut cmd = Command::new("crontab");
    cmd.args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io("cannot run crontab (is cron installed?)", e))?;
    if let Some(text) = input {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(text.as_bytes())
            .map_err(|e| Error::io("cannot write the crontab", e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io("crontab", e))?;
    if input.is_some() && !out.status.success() {
        return Err(Error::Refused(
            "crontab refused the new table; nothing was changed".into(),
        ));
    }
    // `crontab -l` fails when the user has no crontab yet: that is an empty one.
    Ok(if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::new()
    })
}

/// The crontab without the queue's line, and whether it had one.
fn crontab_without(marker: &str) -> Result<(String, Vec<String>, bool)> {
    let current = crontab(&["-l"], None)?;
    let kept: Vec<String> = current
        .lines()
        .filter(|l| !l.ends_with(marker))
        .map(str::to_string)
        .collect();
    let had = kept.len() != current.lines().count();
    Ok((current, kept, had))
}

fn unit_dir() -> Result<PathBuf> {
    let home = std::env::var_os("HOME").ok_or_else(|| Error::Usage("HOME is not set".into()))?;
    Ok(PathBuf::from(home).join(".config/systemd/user"))
}

/// `orbit schedule --queue --remove [--cron|--systemd|--tmux]`.
fn remove(args: &ScheduleArgs, t: &QueueTarget) -> Result<u8> {
    let all = !(args.cron || args.systemd || args.tmux);
    let mut removed = 0;
    let name = queue_schedule_name(t);
    if (all || args.cron) && which("crontab").is_some() {
        let marker = format!("# orbit:{}", sh_word(&t.dir.display().to_string())?);
        let (_, kept, had) = crontab_without(&marker)?;
        if had {
            let mut table = kept.join("\n");
            if !table.is_empty() {
                table.push('\n');
            }
            crontab(&["-"], Some(&table))?;
            println!("orbit: removed the queue's crontab line");
            removed += 1;
        }
    }
    if all || args.systemd {
        let units = unit_dir()?;
        let mut any = false;
        for ext in ["timer", "service"] {
            let p = units.join(format!("{name}.{ext}"));
            if p.is_file() {
                fs::remove_file(&p)
                    .map_err(|e| Error::io(format!("cannot remove {}", p.display()), e))?;
                any = true;
            }
        }
        if any {
            println!(
                "orbit: removed {0}/{name}.service and .timer; if it was enabled: systemctl --user disable --now {name}.timer && systemctl --user daemon-reload",
                units.display()
            );
            removed += 1;
        }
    }
    if (all || args.tmux) && which("tmux").is_some() {
        let st = Command::new("tmux")
            .args(["kill-session", "-t", &format!("={name}")])
            .stderr(Stdio::null())
            .status()
            .map_err(|e| Error::io("cannot run tmux", e))?;
        if st.success() {
            println!("orbit: closed the tmux session {name}");
            removed += 1;
        }
    }
    if removed == 0 {
        println!(
            "orbit: the queue of {} had no schedule to remove",
            t.repo.display()
        );
    }
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
        let (current, mut kept, _) = crontab_without(&marker)?;
        kept.push(line.clone());
        let mut table = kept.join("\n");
        table.push('\n');
        if table == current {
            println!(
                "orbit: the crontab already ticks the queue every {}",
                args.every
            );
            return Ok(0);
        }
        crontab(&["-"], Some(&table))?;
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
    let has = Command::new("tmux")
        .args(["has-session", "-t", &format!("={name}")])
        .stderr(Stdio::null())
        .status()
        .map_err(|e| Error::io("cannot run tmux (is it installed?)", e))?;
    if has.success() {
        return Err(Error::Refused(format!(
            "tmux session {name} already exists: tmux attach -t ={name} (or close it first)"
        )));
    }
    let cmd = tmux_command(t, every)?;
    let st = Command::new("tmux")
        .args(["new-session", "-d", "-s", name, "-c"])
        .arg(&t.repo)
        .arg(&cmd)
        .status()
        .map_err(|e| Error::io("cannot run tmux", e))?;
    if !st.success() {
        return Err(Error::Refused(format!(
            "tmux could not start session {name}"
        )));
    }
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
