//! Operations around a loop: scheduling on this machine (cron, systemd, tmux; beyond it,
//! and what every schedule shares: `schedule`) (stopping and resuming: `control`; the
//! report of a loop's history: `report`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cli::ScheduleArgs;
use crate::contract::{Status, StopReason};
use crate::error::{Error, Result};
use crate::fsx;
use crate::schedule;
use crate::schedule::local::{
    Found, Kinds, Said, Target, cron_line, crontab_read, crontab_with, crontab_write,
    new_tmux_session, remove_named, schedule_name, sh_word, systemd_units, target, unit_dir, which,
};
use crate::state::State;

/// The pid of the runner holding a loop's lock, found without taking the lock (see
/// `locate::probe::lock`).
pub fn runner_pid(dir: &Path) -> Option<u32> {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    match crate::locate::probe::lock(&dir) {
        crate::locate::probe::Lock::Runner { pid, .. } if pid > 0 => Some(pid),
        _ => None,
    }
}

/// The loop directory of an orbit crontab line, from its `# orbit:'DIR'` marker.
fn cron_dir(line: &str) -> Option<PathBuf> {
    let quoted = line.rsplit_once(" # orbit:")?.1;
    let inner = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
    Some(PathBuf::from(inner.replace("'\\''", "'")))
}

/// Every orbit schedule of this user: crontab lines with orbit's marker, orbit's systemd
/// user units, and tmux sessions named orbit-* (of the default tmux server).
pub fn schedules() -> Result<Vec<Found>> {
    let mut out = Vec::new();
    if which("crontab").is_some() {
        for line in crontab_read()?.lines() {
            if let Some(dir) = cron_dir(line) {
                out.push(Found {
                    kind: "cron",
                    name: line.to_string(),
                    dir,
                });
            }
        }
    }
    let units = unit_dir()?;
    let mut names: Vec<String> = fs::read_dir(&units)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("orbit-") && n.ends_with(".service"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for name in names {
        let text = fs::read_to_string(units.join(&name)).unwrap_or_default();
        let dir = text
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .and_then(|l| {
                l.split_once(" \"")?
                    .1
                    .split_once("/run-loop.sh\"")
                    .map(|(d, _)| d.to_string())
            })
            .map(PathBuf::from)
            .or_else(|| {
                // A queue's unit: its tick in the repository it works in.
                let tick = text.lines().find_map(|l| l.strip_prefix("ExecStart="))?;
                tick.ends_with(schedule::queue::TICK).then_some(())?;
                text.lines()
                    .find_map(|l| l.strip_prefix("WorkingDirectory="))
                    .map(|r| Path::new(r).join(".orbit").join("queue"))
            })
            .unwrap_or_default();
        out.push(Found {
            kind: "systemd",
            name: name.trim_end_matches(".service").to_string(),
            dir,
        });
    }
    if which("tmux").is_some()
        && let Ok(o) = Command::new("tmux")
            .args(["list-sessions", "-F", "#{session_name}\t#{session_path}"])
            .stderr(Stdio::null())
            .output()
        && o.status.success()
    {
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            if let Some((name, path)) = line.split_once('\t')
                && name.starts_with("orbit-")
            {
                out.push(Found {
                    kind: "tmux",
                    name: name.to_string(),
                    dir: PathBuf::from(path),
                });
            }
        }
    }
    Ok(out)
}

/// `orbit schedule --list`.
fn list() -> Result<u8> {
    let found = schedules()?;
    if found.is_empty() {
        println!("orbit: no orbit schedule (crontab, systemd user units, tmux sessions)");
        return Ok(0);
    }
    for f in &found {
        let gone = if f.kind != "tmux"
            && !f.dir.join("run-loop.sh").is_file()
            && !schedule::queue::is_queue_dir(&f.dir)
        {
            "  (the loop directory is gone: orbit schedule --remove cannot find it; remove it by hand)"
        } else {
            ""
        };
        println!("{:<8} {}  {}{gone}", f.kind, f.dir.display(), f.name);
        schedule::installed::list_notes(f);
    }
    Ok(0)
}

/// `orbit schedule [DIR] --remove [--cron|--systemd|--tmux]`: this loop's schedules of the
/// kind given, or of every kind.
fn remove(args: &ScheduleArgs, t: &Target) -> Result<u8> {
    let all = !(args.cron || args.systemd || args.tmux);
    schedule::installed::forget(&t.dir, all || args.cron, all || args.systemd)?;
    let unit = schedule_name(t);
    let dir = t.dir.display().to_string();
    remove_named(
        &unit,
        |l| cron_dir(l).as_deref() == Some(t.dir.as_path()),
        Kinds {
            cron: all || args.cron,
            systemd: all || args.systemd,
            tmux: all || args.tmux,
        },
        Said {
            cron: &format!("the crontab line of {dir}"),
            tmux: " (a runner in it saved its state)",
            none: &dir,
        },
    )?;
    Ok(0)
}

/// `orbit schedule`.
pub fn schedule(args: &ScheduleArgs) -> Result<u8> {
    if args.list {
        return list();
    }
    if args.kubernetes {
        return schedule::kubernetes::run(args);
    }
    if args.github_actions {
        return schedule::github::run(args);
    }
    if args.queue {
        return schedule::queue::run(args);
    }
    let t = target(args.dir.as_deref())?;
    if args.remove {
        return remove(args, &t);
    }
    if !(args.cron || args.systemd || args.tmux) {
        return Err(Error::Usage(
            "say how: --cron, --systemd, --tmux, --kubernetes or --github-actions (or --list, or --remove)".into(),
        ));
    }
    if args.cron {
        let line = cron_line(&t.dir, &t.bash, &t.path_env, &args.every)?;
        if !args.install {
            println!("{line}");
            return Ok(0);
        }
        let marker = format!("# orbit:{}", sh_word(&t.dir.display().to_string())?);
        let (current, table) = crontab_with(&marker, &line)?;
        if table == current {
            schedule::installed::record_cron(&t.dir, &line)?;
            println!(
                "orbit: the crontab already runs {} every {}",
                t.name, args.every
            );
            return Ok(0);
        }
        crontab_write(&table)?;
        schedule::installed::record_cron(&t.dir, &line)?;
        println!("orbit: installed in the crontab: {line}");
        return Ok(0);
    }
    if args.systemd {
        let (service, timer) = systemd_units(&t, &args.every)?;
        let unit = schedule_name(&t);
        if !args.install {
            println!("# ~/.config/systemd/user/{unit}.service\n{service}");
            println!("# ~/.config/systemd/user/{unit}.timer\n{timer}");
            println!(
                "# then: systemctl --user daemon-reload && systemctl --user enable --now {unit}.timer"
            );
            return Ok(0);
        }
        let home =
            std::env::var_os("HOME").ok_or_else(|| Error::Usage("HOME is not set".into()))?;
        let units = PathBuf::from(home).join(".config/systemd/user");
        fs::create_dir_all(&units)
            .map_err(|e| Error::io(format!("cannot create {}", units.display()), e))?;
        fsx::write_atomic(&units.join(format!("{unit}.service")), service.as_bytes())?;
        fsx::write_atomic(&units.join(format!("{unit}.timer")), timer.as_bytes())?;
        let written = ["service", "timer"].map(|e| units.join(format!("{unit}.{e}")));
        schedule::installed::record_units(&t.dir, &written)?;
        println!(
            "orbit: wrote {0}/{unit}.service and {0}/{unit}.timer",
            units.display()
        );
        println!(
            "  enable: systemctl --user daemon-reload && systemctl --user enable --now {unit}.timer"
        );
        return Ok(0);
    }
    start_in_tmux(&t)
}

/// Whether the loop would do anything if started now: a DONE, ABORTED, STALLED or stopped
/// loop, or one a runner holds, is refused with the reason and what to do.
fn startable(t: &Target) -> Result<()> {
    let state = State::parse_file(&t.dir.join("state.env")).map_err(|e| {
        Error::Refused(format!(
            "{e}: run orbit recover {} before starting the loop",
            t.dir.display()
        ))
    })?;
    let why = match (state.last_status, state.stop_reason) {
        (Status::Done, _) => Some("the loop is DONE: there is nothing to run".to_string()),
        (Status::Paused, StopReason::Stopped) => Some(format!(
            "the loop is stopped: orbit resume {} first",
            t.dir.display()
        )),
        (Status::Aborted | Status::Stalled, reason) => Some(format!(
            "the loop is {} ({reason}): orbit audit {} says what it needs",
            state.last_status,
            t.dir.display()
        )),
        _ => None,
    };
    if let Some(why) = why {
        return Err(Error::Refused(why));
    }
    if let Some(pid) = runner_pid(&t.dir) {
        return Err(Error::Refused(format!(
            "a runner (pid {pid}) already runs the loop: orbit stop {} first, or let it finish",
            t.dir.display()
        )));
    }
    Ok(())
}

/// `orbit schedule --tmux`: the loop now, in a tmux session of its own that stays open when
/// the loop ends, until the user closes it.
fn start_in_tmux(t: &Target) -> Result<u8> {
    startable(t)?;
    let session = schedule_name(t);
    let cmd = format!(
        "PATH={} {} {}; printf '\\norbit: the loop has ended; press Enter to close this window\\n'; read -r _",
        sh_word(&t.path_env)?,
        sh_word(&t.bash.display().to_string())?,
        sh_word(&format!("{}/run-loop.sh", t.dir.display()))?
    );
    new_tmux_session(&session, &t.repo, &cmd)?;
    // A second pane follows the agent's output live (`orbit logs -f`), waiting for the
    // runner to take the lock; it too stays open at the end until Enter.
    let exe =
        std::env::current_exe().map_err(|e| Error::io("cannot find the orbit executable", e))?;
    let follow = format!(
        "PATH={} {} logs --follow --wait 60s {}; printf '\\norbit: nothing more to follow; press Enter to close this pane\\n'; read -r _",
        sh_word(&t.path_env)?,
        sh_word(&exe.display().to_string())?,
        sh_word(&t.dir.display().to_string())?
    );
    let split = Command::new("tmux")
        .args(["split-window", "-v", "-t", &format!("={session}:"), "-c"])
        .arg(&t.repo)
        .arg(&follow)
        .status()
        .map_err(|e| Error::io("cannot run tmux", e))?;
    if !split.success() {
        eprintln!(
            "orbit: tmux could not open the pane of the agent's output; the loop runs anyway"
        );
    }
    println!(
        "orbit: started {} in tmux session {session}: tmux attach -t ={session} \
         (the runner above, the agent's output below)",
        t.name
    );
    Ok(0)
}
