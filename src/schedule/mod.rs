//! What every schedule of a loop shares, and the schedules that run it beyond this machine.
//!
//! A scheduled tick is one `run-loop.sh --once` of the loop directory. The crontab line and
//! the systemd units (`ops`), the Kubernetes CronJob ([`kubernetes`]) and the GitHub Actions
//! workflow ([`github`]) take from here the calendar (`--every`), the runner's invocation and
//! the exit codes that are not a failure for a scheduler, so they cannot drift apart.
//!
//! Beyond this machine, the loop directory travels by git: the cluster or the CI runner
//! clones the repository, and the loop directory must be in it as `orbit init` made it,
//! before its first run ([`Shipped`]): a loop that ran here holds this machine's paths in
//! its state.

pub mod github;
pub mod installed;
pub mod kubernetes;
pub mod local;
pub mod queue;
pub mod queue_fleet;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::LoopConfig;
use crate::contract::ExitCode;
use crate::error::{Error, Result};
use crate::goal::parse_duration;
use crate::locate::{pick_loop, repo_root};
use crate::state::State;

/// The runner of a loop directory.
pub const RUNNER: &str = "run-loop.sh";

/// The runner's flag for one tick: at most one iteration.
pub const ONCE: &str = "--once";

/// Minutes that divide the hour, and hours that divide the day: the only intervals a cron
/// or systemd calendar repeats evenly (`*/45` would run 45, then 15 minutes apart).
pub const EVEN_MINUTES: [u64; 11] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30];
pub const EVEN_HOURS: [u64; 8] = [1, 2, 3, 4, 6, 8, 12, 24];

/// `--every` as (minutes, 0) or (0, hours), an interval the calendar repeats evenly.
pub fn interval(every: &str) -> Result<(u64, u64)> {
    let secs = parse_duration("--every", every)?;
    let (m, h) = (secs / 60, secs / 3600);
    if secs % 60 == 0 && EVEN_MINUTES.contains(&m) {
        Ok((m, 0))
    } else if secs % 3600 == 0 && EVEN_HOURS.contains(&h) {
        Ok((0, h))
    } else {
        let list = |v: &[u64], unit: &str| {
            v.iter()
                .map(|n| format!("{n}{unit}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(Error::Usage(format!(
            "--every {every}: a cron or systemd calendar repeats evenly only at intervals that divide the hour or the day; give one of {} or {}",
            list(&EVEN_MINUTES, "m"),
            list(&EVEN_HOURS, "h")
        )))
    }
}

/// The five fields of a cron schedule for `--every` (crontab, CronJob, GitHub Actions).
pub fn cron_when(every: &str) -> Result<String> {
    let (m, h) = interval(every)?;
    Ok(if m == 1 {
        "* * * * *".to_string()
    } else if m > 0 {
        format!("*/{m} * * * *")
    } else if h == 24 {
        "0 0 * * *".to_string()
    } else {
        format!("0 */{h} * * *")
    })
}

/// `--every` in seconds, once it is known to be an even interval.
pub fn every_secs(every: &str) -> Result<u64> {
    let (m, h) = interval(every)?;
    Ok(m * 60 + h * 3600)
}

/// The runner's exit codes that are not a failure for a scheduler, 0 included: work
/// remains, a rate limit, another tick runs, or the loop waits for a human (who was
/// notified once, when it stopped). A failure is 1 (the script itself), 2 (preflight) or
/// 4 (a state it cannot read), and any code the contract does not name.
pub fn success_codes() -> Vec<u8> {
    ExitCode::ALL
        .iter()
        .filter(|e| e.scheduler_success())
        .map(|e| e.code())
        .collect()
}

/// The POSIX sh that runs the loop whose directory is `$1` under a scheduler that judges
/// a run by its exit code (a Kubernetes Job, a GitHub Actions step): the runner as a
/// crontab line runs it (`bash DIR/run-loop.sh --once`, or without `--once` for a
/// continuous run), then every code of [`success_codes`] becomes 0 and any other code
/// stays, so the run fails.
pub fn tick_sh(once: bool) -> String {
    let codes: Vec<String> = success_codes().iter().map(u8::to_string).collect();
    let what = if once {
        "One tick of the loop in $1: its runner, as a crontab line runs it."
    } else {
        "The loop in $1 until it stops: its runner, as a continuous run."
    };
    let flag = if once {
        format!(" {ONCE}")
    } else {
        String::new()
    };
    format!(
        "# {what}\n\
         # Not failures: work remains, a rate limit, another runner holds the loop, or it\n\
         # waits for a human (notified once when it stopped). Failures: 1, 2 (preflight),\n\
         # 4 (state corrupt), anything else.\n\
         rc=0\n\
         bash \"$1/{RUNNER}\"{flag} || rc=$?\n\
         case $rc in\n\
         \x20 {}) exit 0 ;;\n\
         esac\n\
         exit \"$rc\"\n",
        codes.join("|")
    )
}

/// Seconds one tick may take at most, from the loop's own bounds, generously: every
/// attempt of the agent at its longest (three times `exec-timeout` with the adaptive
/// timeout) and its kill grace, the backoff between attempts at its longest, a
/// confirmation and a wrap-up run, verify.sh on the untouched tree, after the work and
/// `pass-k` times for DONE, with every check at its `check-timeout`, two commits, the
/// notifications, and 15 minutes for the rest (a clone, git's snapshots, starting up).
pub fn tick_deadline(cfg: &LoopConfig) -> Result<u64> {
    let secs = |key: &str, v: &str| parse_duration(key, v);
    let exec = secs("exec-timeout", &cfg.exec_timeout)?;
    let exec = if cfg.adaptive_timeout { exec * 3 } else { exec };
    let grace = secs("kill-grace", &cfg.kill_grace)?;
    let agent_runs = u64::from(cfg.retry_limit.max(1)) + u64::from(cfg.confirm_runs) + 1;
    let base = secs("retry-base-delay", &cfg.retry_base_delay)?;
    let backoff = 2 * base * (1u64 << cfg.retry_limit.min(16));
    let checks = (cfg.verify.len() as u64).max(1);
    let verify_runs = 2 + u64::from(cfg.pass_k) + u64::from(cfg.confirm_runs);
    let check = secs("check-timeout", &cfg.check_timeout)?;
    let commit = secs("commit-timeout", &cfg.commit_timeout)?;
    let notify = secs("notify-timeout", &cfg.notify_timeout)? + 5;
    Ok(agent_runs * (exec + grace)
        + backoff
        + verify_runs * checks * check
        + 2 * commit
        + notify
        + 15 * 60)
}

/// Seconds a continuous run may take at most: its `loop-timeout` and one more tick (the
/// iteration under way when the timeout comes), or without one, every iteration of
/// `max-iterations` at its longest.
pub fn run_deadline(cfg: &LoopConfig) -> Result<u64> {
    let tick = tick_deadline(cfg)?;
    let wall = parse_duration("loop-timeout", &cfg.loop_timeout)?;
    Ok(if wall > 0 {
        wall + tick
    } else {
        cfg.max_iterations.max(1).saturating_mul(tick)
    })
}

/// The loop as another machine finds it after cloning the repository: the committed loop
/// directory on the branch it clones.
#[derive(Debug, Clone)]
pub struct Shipped {
    /// The repository root here.
    pub repo: PathBuf,
    /// The loop directory, relative to the repository root (`.orbit/<name>`).
    pub rel: String,
    /// The branch the other machine checks out.
    pub branch: String,
    /// loop.toml as committed on that branch.
    pub cfg: LoopConfig,
    /// The goal's title (the first line of the committed goal.md's `# Goal` section).
    pub goal_title: String,
}

impl Shipped {
    /// The loop's branch, where the runner commits the work.
    pub fn loop_branch(&self) -> String {
        format!("orbit/{}", self.cfg.name)
    }
}

fn git(repo: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .map_err(|e| Error::io("cannot run git (is it installed?)", e))
}

fn git_text(repo: &Path, args: &[&str]) -> Result<Option<String>> {
    let out = git(repo, args)?;
    Ok(out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .trim_end_matches('\n')
            .to_string()
    }))
}

/// A branch name a clone can check out: git's own rules, and nothing a YAML reader or a
/// shell could take for something else (no blank, no control character).
fn check_branch(repo: &Path, branch: &str) -> Result<()> {
    let plain = !branch.is_empty()
        && !branch.starts_with('-')
        && !branch.chars().any(|c| c.is_whitespace() || c.is_control());
    let valid = plain
        && git(repo, &["check-ref-format", "--branch", branch])?
            .status
            .success();
    if !valid {
        return Err(Error::Usage(format!(
            "--branch '{}': not a branch name git accepts; name the branch to clone, such as main",
            branch.escape_debug()
        )));
    }
    Ok(())
}

/// The title of a goal.md: the first non-blank line of its `# Goal` section.
fn goal_title(goal_md: &str) -> String {
    let mut lines = goal_md.lines().skip_while(|l| l.trim() != "# Goal").skip(1);
    let line = lines.find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let clean: String = line.chars().filter(|c| !c.is_control()).collect();
    if clean.chars().count() > 120 {
        let mut cut: String = clean.chars().take(119).collect();
        cut.push('…');
        cut
    } else {
        clean
    }
}

/// The loop directory `dir` (or the only loop under `.orbit/`) as committed on `branch`
/// (default: the current branch). Refused, with what to do, when it is not committed
/// there, when its committed state has run on this machine (its workspace path is this
/// machine's), or when its workspace lies outside the repository.
pub fn shipped(dir: Option<&Path>, branch: Option<&str>) -> Result<Shipped> {
    let dir = pick_loop(dir)?;
    let dir = std::fs::canonicalize(&dir)
        .map_err(|e| Error::io(format!("cannot resolve {}", dir.display()), e))?;
    let repo = repo_root(&dir)?;
    let rel = dir
        .strip_prefix(&repo)
        .ok()
        .and_then(|p| p.to_str())
        .filter(|p| crate::config::is_plain_path(p))
        .ok_or_else(|| {
            Error::path(
                &dir,
                "is not a plain path inside its repository: move the loop under .orbit/",
            )
        })?
        .to_string();
    let branch = match branch {
        Some(b) => b.to_string(),
        None => {
            git_text(&repo, &["symbolic-ref", "--quiet", "--short", "HEAD"])?.ok_or_else(|| {
                Error::Usage(
                    "HEAD is detached: name the branch to clone with --branch BRANCH".into(),
                )
            })?
        }
    };
    check_branch(&repo, &branch)?;
    let rev = [
        format!("refs/heads/{branch}"),
        format!("refs/remotes/origin/{branch}"),
    ]
    .into_iter()
    .find(|r| {
        git(&repo, &["rev-parse", "--quiet", "--verify", &format!("{r}^{{commit}}")])
            .is_ok_and(|o| o.status.success())
    })
    .ok_or_else(|| {
        Error::Usage(format!(
            "the branch {branch} is not in this repository: fetch it, or name the branch to clone with --branch"
        ))
    })?;
    let committed = |file: &str| -> Result<Option<Vec<u8>>> {
        let out = git(&repo, &["cat-file", "blob", &format!("{rev}:{rel}/{file}")])?;
        Ok(out.status.success().then_some(out.stdout))
    };
    let not_committed = || {
        Error::Refused(format!(
            "{rel} is not committed on {branch}: the other machine gets the loop directory from git. \
             Commit it as orbit init made it, before its first run: \
             git add '{rel}' && git commit -m 'orbit loop' && git push"
        ))
    };
    let toml_bytes = committed("loop.toml")?.ok_or_else(not_committed)?;
    for file in [RUNNER, "state.env", "goal.md", "verify.sh", "pins.sha256"] {
        committed(file)?.ok_or_else(not_committed)?;
    }
    let toml_text = String::from_utf8(toml_bytes)
        .map_err(|_| Error::path(dir.join("loop.toml"), "is not valid UTF-8"))?;
    let cfg = LoopConfig::parse(&toml_text, &dir.join("loop.toml"))?;
    let state_bytes = committed("state.env")?.unwrap_or_default();
    let state = State::parse(&state_bytes).map_err(|(line, message)| Error::Parse {
        path: PathBuf::from(format!("{branch}:{rel}/state.env")),
        line,
        message,
    })?;
    if !state.workspace.is_empty() {
        return Err(Error::Refused(format!(
            "{rel} was committed on {branch} after it ran on this machine: its state.env names this machine's workspace {}. \
             A loop moves to another machine before its first run: render a new one (orbit init --dir .orbit/<new-name> ...) and commit it before running it",
            state.workspace
        )));
    }
    if cfg.workspace.starts_with('/') {
        return Err(Error::Refused(format!(
            "{rel}/loop.toml puts the workspace at {}, outside the repository: on another machine only a workspace inside the clone works. \
             Set workspace = \"\" in loop.toml (the default: under the data directory of the machine that runs it), run orbit init --force --dir '{rel}' and commit",
            cfg.workspace
        )));
    }
    let goal = committed("goal.md")?.unwrap_or_default();
    let goal_title = goal_title(&String::from_utf8_lossy(&goal));
    if let Some(status) = git_text(&repo, &["status", "--porcelain", "--", &rel])?
        && !status.is_empty()
    {
        eprintln!(
            "orbit: note: {rel} has changes that are not committed on {branch}; the other machine runs the loop as committed"
        );
    }
    Ok(Shipped {
        repo,
        rel,
        branch,
        cfg,
        goal_title,
    })
}

/// Writes a rendered schedule to `path` (atomically), or prints it.
pub fn emit(text: &str, output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) => {
            crate::fsx::write_atomic(path, text.as_bytes())?;
            println!("orbit: wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// Serializes `docs` as YAML documents (one `---` between two), with the lines of `header`
/// as a comment on top. Every value is placed by the serializer, which quotes whatever a
/// YAML 1.1 or 1.2 reader could take for something other than the string it is (`yes`,
/// `0x1`, `~`, `: `, `#`, ...).
pub fn yaml<T: serde::Serialize>(header: &[String], docs: &[T]) -> String {
    let mut out = String::new();
    for line in header {
        debug_assert!(!line.contains('\n'));
        out.push_str(if line.is_empty() { "#" } else { "# " });
        out.push_str(line);
        out.push('\n');
    }
    let body = serde_saphyr::to_string_multiple(docs)
        .expect("the schedule's documents are maps of strings, numbers and lists");
    out.push_str(&body);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_fields_follow_the_interval() {
        assert_eq!(cron_when("1m").unwrap(), "* * * * *");
        assert_eq!(cron_when("15m").unwrap(), "*/15 * * * *");
        assert_eq!(cron_when("2h").unwrap(), "0 */2 * * *");
        assert_eq!(cron_when("24h").unwrap(), "0 0 * * *");
        assert!(cron_when("45m").is_err());
        assert_eq!(every_secs("2h").unwrap(), 7200);
    }

    #[test]
    fn the_success_codes_are_the_contract_s() {
        let codes = success_codes();
        for e in ExitCode::ALL {
            assert_eq!(codes.contains(&e.code()), e.scheduler_success(), "{e:?}");
        }
        assert!(codes.contains(&0) && codes.contains(&10) && !codes.contains(&2));
    }

    #[test]
    fn a_tick_lasts_no_longer_than_its_bounds_allow() {
        let cfg = LoopConfig::default();
        let tick = tick_deadline(&cfg).unwrap();
        // At least every agent attempt at its timeout, and the checks.
        assert!(tick > 3 * 600 + 4 * 600, "{tick}");
        let adaptive = LoopConfig {
            adaptive_timeout: true,
            ..LoopConfig::default()
        };
        assert!(tick_deadline(&adaptive).unwrap() > tick);
        assert_eq!(run_deadline(&cfg).unwrap(), 20 * tick);
        let walled = LoopConfig {
            loop_timeout: "2h".into(),
            ..LoopConfig::default()
        };
        assert_eq!(run_deadline(&walled).unwrap(), 7200 + tick);
    }

    #[test]
    fn the_goal_title_is_the_first_line_of_its_section() {
        let md = "# Goal\n\nFix: it # now\n\n## Objective\n\nx\n";
        assert_eq!(goal_title(md), "Fix: it # now");
        assert_eq!(goal_title("nothing"), "");
        assert_eq!(
            goal_title(&format!("# Goal\n{}\n", "é".repeat(200)))
                .chars()
                .count(),
            120
        );
    }
}
