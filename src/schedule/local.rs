//! A loop's schedule on this machine as orbit renders it: its crontab line and its systemd
//! user units, the name they carry, the loop they are for (`crate::ops` installs, lists and
//! removes them; `installed` holds what was installed). The crontab, the unit rendering and
//! the removal of a named schedule are shared with the queue's schedule (`schedule::queue`).

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::config::LoopConfig;
use crate::contract::ExitCode;
use crate::error::{Error, Result};
use crate::fsx;
use crate::locate::{pick_loop, repo_root};
use crate::schedule::{self, ONCE, RUNNER};

pub(crate) fn abs_dir(dir: &Path) -> Result<PathBuf> {
    fs::canonicalize(dir).map_err(|e| Error::io(format!("cannot resolve {}", dir.display()), e))
}

/// The absolute path of a program on PATH.
pub(crate) fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Quotes a word for /bin/sh (cron and systemd run lines with a POSIX shell), refusing
/// what only bash could quote and cron's `%`.
pub(crate) fn sh_word(text: &str) -> Result<String> {
    if text.contains('%') {
        return Err(Error::Usage(format!(
            "'{}' holds a '%', which cron turns into a newline: move the loop to a path without one",
            text.escape_debug()
        )));
    }
    if text.chars().any(char::is_control) {
        return Err(Error::Usage(format!(
            "'{}' holds a control character that a crontab line or /bin/sh cannot take safely: use a plainer path",
            text.escape_debug()
        )));
    }
    // POSIX single quotes, a quote inside written as '\'' (/bin/sh has no $'...').
    Ok(format!("'{}'", text.replace('\'', "'\\''")))
}

/// The name of a loop's schedule (tmux session, systemd units): the loop's name and a
/// short hash of its directory, so that two repositories with a loop of the same name never
/// take each other's.
pub fn schedule_name(t: &Target) -> String {
    let hash = fsx::sha256_hex(t.dir.as_os_str().as_encoded_bytes());
    format!("orbit-{}-{}", t.name, &hash[..8])
}

pub use crate::schedule::{EVEN_HOURS, EVEN_MINUTES};

/// Everything a schedule needs to name, resolved now (cron and systemd have no PATH of ours).
pub struct Target {
    pub dir: PathBuf,
    pub repo: PathBuf,
    pub name: String,
    pub bash: PathBuf,
    pub path_env: String,
}

pub(crate) fn target(dir: Option<&Path>) -> Result<Target> {
    let dir = abs_dir(&pick_loop(dir)?)?;
    let cfg = LoopConfig::load(&dir.join("loop.toml"))?;
    let repo = repo_root(&dir)?;
    let bash = which("bash").ok_or_else(|| Error::Usage("bash is not on PATH".into()))?;
    let path_env = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    Ok(Target {
        dir,
        repo,
        name: cfg.name,
        bash,
        path_env,
    })
}

/// The crontab line for a loop (without a trailing newline). The `# orbit:` comment names
/// the loop directory so `--install` can replace the line later.
pub fn cron_line(dir: &Path, bash: &Path, path_env: &str, every: &str) -> Result<String> {
    let when = schedule::cron_when(every)?;
    let d = dir.display().to_string();
    Ok(format!(
        "{when} cd / && PATH={} {} {} {ONCE} >>{} 2>&1 # orbit:{}",
        sh_word(path_env)?,
        sh_word(&bash.display().to_string())?,
        sh_word(&format!("{d}/{RUNNER}"))?,
        sh_word(&format!("{d}/cron.log"))?,
        sh_word(&d)?,
    ))
}

/// Refuses a text a systemd unit line cannot hold safely (a path, PATH): control
/// characters, quotes, backslashes, `%`, and a space where `space` says so (an unquoted
/// ExecStart word).
pub(crate) fn unit_safe(texts: &[&str], space: bool) -> Result<()> {
    for text in texts {
        if text
            .chars()
            .any(|c| c.is_control() || c == '"' || c == '\\' || c == '%' || (space && c == ' '))
        {
            return Err(Error::Usage(format!(
                "'{}' cannot be written into a systemd unit safely: use a plainer path",
                text.escape_debug()
            )));
        }
    }
    Ok(())
}

/// A oneshot systemd user service of one tick, as orbit writes one: `what` names it,
/// `exec` is its command line, `why` the comment lines on its exits (each without `#`),
/// `success` the exits that are no failure, `log` where its output is appended.
pub(crate) struct TickService<'a> {
    pub what: &'a str,
    pub workdir: &'a str,
    pub path_env: &'a str,
    pub exec: &'a str,
    pub why: [&'a str; 2],
    pub success: &'a [u8],
    pub log: &'a str,
}

/// The service (`TickService`) and its timer (a tick every `every`), rendered.
pub(crate) fn tick_units(s: &TickService, every: &str) -> Result<(String, String)> {
    let (m, h) = schedule::interval(every)?;
    let calendar = if m > 0 {
        format!("*:0/{m}")
    } else if h == 24 {
        "daily".into()
    } else {
        format!("0/{h}:00")
    };
    let success: Vec<String> = s.success.iter().map(u8::to_string).collect();
    let service = format!(
        "[Unit]\n\
         Description={what}: one tick\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         WorkingDirectory={workdir}\n\
         Environment=\"PATH={path}\"\n\
         ExecStart={exec}\n\
         # {why0}\n\
         # {why1}\n\
         SuccessExitStatus={success}\n\
         StandardOutput=append:{log}\n\
         StandardError=append:{log}\n",
        what = s.what,
        workdir = s.workdir,
        path = s.path_env,
        exec = s.exec,
        why0 = s.why[0],
        why1 = s.why[1],
        success = success.join(" "),
        log = s.log,
    );
    let timer = format!(
        "[Unit]\n\
         Description={what}: a tick every {every}\n\
         \n\
         [Timer]\n\
         OnCalendar={calendar}\n\
         Persistent=true\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n",
        what = s.what,
    );
    Ok((service, timer))
}

/// The systemd user service and timer for a loop.
pub fn systemd_units(t: &Target, every: &str) -> Result<(String, String)> {
    let d = t.dir.display().to_string();
    unit_safe(&[&d, &t.path_env], false)?;
    // Exits that are not failures for a scheduler (0 is success to systemd already).
    let success: Vec<u8> = schedule::success_codes()
        .into_iter()
        .filter(|c| *c != ExitCode::Done.code())
        .collect();
    tick_units(
        &TickService {
            what: &format!("orbit loop {}", t.name),
            workdir: &t.repo.display().to_string(),
            path_env: &t.path_env,
            exec: &format!("{} \"{d}/{RUNNER}\" {ONCE}", t.bash.display()),
            why: [
                "Not failures: work remains, a rate limit, another tick runs, or the loop waits for",
                "a human (notified once when it stopped). Failures: 1, 2 (preflight), 4 (state).",
            ],
            success: &success,
            log: &format!("{d}/systemd.log"),
        },
        every,
    )
}

/// The user's crontab (empty when they have none yet).
pub(crate) fn crontab_read() -> Result<String> {
    let out = Command::new("crontab")
        .arg("-l")
        .output()
        .map_err(|e| Error::io("cannot run crontab (is cron installed?)", e))?;
    // `crontab -l` fails when the user has no crontab yet: that is an empty one.
    Ok(if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::new()
    })
}

/// Replaces the user's crontab with `text`.
pub(crate) fn crontab_write(text: &str) -> Result<()> {
    let mut child = Command::new("crontab")
        .arg("-")
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io("cannot run crontab", e))?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .map_err(|e| Error::io("cannot write the crontab", e))?;
    let st = child.wait().map_err(|e| Error::io("crontab", e))?;
    if !st.success() {
        return Err(Error::Refused(
            "crontab refused the new table; nothing was changed".into(),
        ));
    }
    Ok(())
}

/// The user's systemd unit directory.
pub(crate) fn unit_dir() -> Result<PathBuf> {
    let home = std::env::var_os("HOME").ok_or_else(|| Error::Usage("HOME is not set".into()))?;
    Ok(PathBuf::from(home).join(".config/systemd/user"))
}

/// The kinds of a schedule to remove.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kinds {
    pub cron: bool,
    pub systemd: bool,
    pub tmux: bool,
}

/// What [`remove_named`] says: the crontab line removed, what follows the tmux session's
/// closing, and that there was nothing to remove.
pub(crate) struct Said<'a> {
    pub cron: &'a str,
    pub tmux: &'a str,
    pub none: &'a str,
}

/// The crontab as it is, and as it would be with `line` in place of the lines ending with
/// `marker` (a schedule's `# orbit:` marker).
pub(crate) fn crontab_with(marker: &str, line: &str) -> Result<(String, String)> {
    let current = crontab_read()?;
    let mut kept: Vec<&str> = current.lines().filter(|l| !l.ends_with(marker)).collect();
    kept.push(line);
    let mut table = kept.join("\n");
    table.push('\n');
    Ok((current, table))
}

/// Removes a named schedule of the kinds asked, saying what it removed: the crontab lines
/// `ours` matches (where crontab is installed), the user units `name.timer` and
/// `name.service`, the tmux session `name` (where tmux is installed).
pub(crate) fn remove_named(
    name: &str,
    ours: impl Fn(&str) -> bool,
    k: Kinds,
    said: Said,
) -> Result<()> {
    let mut r = Removed::default();
    if k.cron && which("crontab").is_some() {
        let current = crontab_read()?;
        let kept: Vec<&str> = current.lines().filter(|l| !ours(l)).collect();
        if kept.len() != current.lines().count() {
            let mut table = kept.join("\n");
            if !table.is_empty() {
                table.push('\n');
            }
            crontab_write(&table)?;
            r.cron = true;
        }
    }
    if k.systemd {
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
        r.units = any.then_some(units);
    }
    if k.tmux && which("tmux").is_some() {
        let st = Command::new("tmux")
            .args(["kill-session", "-t", &format!("={name}")])
            .stderr(Stdio::null())
            .status()
            .map_err(|e| Error::io("cannot run tmux", e))?;
        r.tmux = st.success();
    }
    if r.cron {
        println!("orbit: removed {}", said.cron);
    }
    if let Some(units) = &r.units {
        println!(
            "orbit: removed {0}/{name}.service and .timer; if it was enabled: systemctl --user disable --now {name}.timer && systemctl --user daemon-reload",
            units.display()
        );
    }
    if r.tmux {
        println!("orbit: closed the tmux session {name}{}", said.tmux);
    }
    if !(r.cron || r.units.is_some() || r.tmux) {
        println!("orbit: {} had no schedule to remove", said.none);
    }
    Ok(())
}

/// Starts `cmd` in a new detached tmux session `name` in `cwd`, refused when a session of
/// that name exists (exact session targets, `=name`, so orbit-a never matches orbit-ab).
pub(crate) fn new_tmux_session(name: &str, cwd: &Path, cmd: &str) -> Result<()> {
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
    let st = Command::new("tmux")
        .args(["new-session", "-d", "-s", name, "-c"])
        .arg(cwd)
        .arg(cmd)
        .status()
        .map_err(|e| Error::io("cannot run tmux", e))?;
    if !st.success() {
        return Err(Error::Refused(format!(
            "tmux could not start session {name}"
        )));
    }
    Ok(())
}

/// What [`remove_named`] removed: the crontab lines, the units (from this directory), the
/// tmux session.
#[derive(Debug, Default)]
struct Removed {
    cron: bool,
    units: Option<PathBuf>,
    tmux: bool,
}

/// One orbit schedule found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// cron, systemd or tmux.
    pub kind: &'static str,
    /// The crontab line, the unit's name or the session's name.
    pub name: String,
    /// The loop directory it runs (the repository for a tmux session).
    pub dir: PathBuf,
}
