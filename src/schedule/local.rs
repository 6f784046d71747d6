//! A loop's schedule on this machine as orbit renders it: its crontab line and its systemd
//! user units, the name they carry, the loop they are for (`crate::ops` installs, lists and
//! removes them; `installed` holds what was installed).

use std::fs;
use std::path::{Path, PathBuf};

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

/// The systemd user service and timer for a loop.
pub fn systemd_units(t: &Target, every: &str) -> Result<(String, String)> {
    let (m, h) = schedule::interval(every)?;
    let calendar = if m > 0 {
        format!("*:0/{m}")
    } else if h == 24 {
        "daily".into()
    } else {
        format!("0/{h}:00")
    };
    let d = t.dir.display().to_string();
    for text in [&d, &t.path_env] {
        if text
            .chars()
            .any(|c| c.is_control() || c == '"' || c == '\\' || c == '%')
        {
            return Err(Error::Usage(format!(
                "'{}' cannot be written into a systemd unit safely: use a plainer path",
                text.escape_debug()
            )));
        }
    }
    // Exits that are not failures for a scheduler (0 is success to systemd already).
    let success: Vec<String> = schedule::success_codes()
        .into_iter()
        .filter(|c| *c != ExitCode::Done.code())
        .map(|c| c.to_string())
        .collect();
    let service = format!(
        "[Unit]\n\
         Description=orbit loop {name}: one tick\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         WorkingDirectory={repo}\n\
         Environment=\"PATH={path}\"\n\
         ExecStart={bash} \"{d}/{RUNNER}\" {ONCE}\n\
         # Not failures: work remains, a rate limit, another tick runs, or the loop waits for\n\
         # a human (notified once when it stopped). Failures: 1, 2 (preflight), 4 (state).\n\
         SuccessExitStatus={success}\n\
         StandardOutput=append:{d}/systemd.log\n\
         StandardError=append:{d}/systemd.log\n",
        name = t.name,
        repo = t.repo.display(),
        path = t.path_env,
        bash = t.bash.display(),
        success = success.join(" "),
    );
    let timer = format!(
        "[Unit]\n\
         Description=orbit loop {name}: a tick every {every}\n\
         \n\
         [Timer]\n\
         OnCalendar={calendar}\n\
         Persistent=true\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n",
        name = t.name,
    );
    Ok((service, timer))
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
