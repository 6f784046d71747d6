//! `orbit audit` and `orbit status`: read-only classification of loops.
//!
//! An audit reads a loop directory — live or dead — and answers "what state is it in, and
//! what do I do?": one verdict per loop and findings, each with a class, a severity, evidence
//! as `file:line`, a message and the command that fixes it (contract section 9). It never
//! writes, never takes the runner's lock and never makes git take its index lock, so it can
//! run any number of times during a live loop. It reads only the tails of the journals: see
//! `docs/AUDIT.md` for the verdict rules, the classes and the windows.

mod candidates;
mod check;
mod facts;
mod installed_schedule;
mod keys;
mod read;
mod records;
mod runner_log;
mod tail;
mod workspace;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cli::{AuditArgs, StatusArgs};
use crate::error::{Error, Result};
use crate::locate::{loops_under, repo_by_dot_git};

pub use crate::locate::lock_held;

pub use check::audit_loop;

pub use crate::contract::{FindingClass, Severity, Verdict};
use crate::contract::{Status, StopReason, VerifyOutcome};

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub class: FindingClass,
    pub severity: Severity,
    /// `file:line`, relative to the loop directory.
    pub evidence: String,
    pub message: String,
    /// The command that fixes it.
    pub fix: String,
}

/// What `orbit status` shows beside the verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub name: String,
    pub max_iterations: Option<u64>,
    /// What verify.sh said of the last recorded iteration.
    pub last_verify: Option<VerifyOutcome>,
    pub spent_microusd: Option<u64>,
    /// Agent runs whose cost nobody reported (cost.ledger kind `unknown`): the spend is
    /// then a lower bound, never shown as a plain $0.
    pub unknown_cost_runs: u64,
    pub usd_cap_microusd: Option<u64>,
    /// Epoch seconds of the last write to the loop's journals or state.
    pub last_activity: Option<u64>,
    /// The loop's workspace, absolute (state.env `WORKSPACE`); null before the first run.
    pub workspace: Option<String>,
    /// The loop branch the work is committed on, `orbit/<name>`.
    pub branch: Option<String>,
    /// How many candidates each iteration fans out to, when more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u64>,
    /// What each check's own output said ran, on the base tree and at its latest run
    /// (contract section 6); empty when no check's output has a known summary.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub test_counts: Vec<crate::counts::CheckCounts>,
}

/// The audit of one loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoopReport {
    pub dir: String,
    pub verdict: Verdict,
    /// LAST_STATUS from state.env (null when it cannot be read).
    pub status: Option<Status>,
    /// Iterations recorded: NEXT_ITERATION - 1 (null when state.env cannot be read).
    pub iteration: Option<u64>,
    pub stop_reason: Option<StopReason>,
    pub findings: Vec<Finding>,
    pub summary: Summary,
}

impl LoopReport {
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).min()
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    loops: &'a [LoopReport],
}

/// One line of `--json-lines`: a loop's report, where and when it was read, so that lines
/// from many hosts merge.
#[derive(Serialize)]
struct JsonLine<'a> {
    /// This machine's name (a pod's name in Kubernetes); null when it cannot be read.
    host: Option<&'a str>,
    /// Epoch seconds when the loop was read.
    read_at: u64,
    #[serde(flatten)]
    report: &'a LoopReport,
}

/// The machine's host name: the kernel's, else `$HOSTNAME`.
fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// One JSON object per report, one per line.
fn json_lines(reports: &[LoopReport], now: u64) -> Result<String> {
    let host = host_name();
    let mut out = String::new();
    for report in reports {
        let line = JsonLine {
            host: host.as_deref(),
            read_at: now,
            report,
        };
        out.push_str(
            &serde_json::to_string(&line)
                .map_err(|e| Error::Usage(format!("cannot encode the report: {e}")))?,
        );
        out.push('\n');
    }
    Ok(out)
}

/// The exit code for a set of reports: 0 nothing above P2, 1 a P1, 3 a P0.
pub fn exit_code(reports: &[LoopReport]) -> u8 {
    match reports.iter().filter_map(LoopReport::worst).min() {
        Some(Severity::P0) => 3,
        Some(Severity::P1) => 1,
        _ => 0,
    }
}

/// The loops to audit, each with the name commands show for it.
fn targets(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, String)>> {
    let cwd =
        std::env::current_dir().map_err(|e| Error::io("cannot read the current directory", e))?;
    if !dirs.is_empty() {
        let mut out = Vec::new();
        for d in dirs {
            if !d.join("loop.toml").is_file() && !d.join("state.env").is_file() {
                return Err(Error::path(
                    d,
                    "is not a loop directory (no loop.toml, no state.env): name a directory made by orbit init",
                ));
            }
            out.push((d.clone(), d.display().to_string()));
        }
        return Ok(out);
    }
    let base = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    // The repository is found by its .git entry, without running git: an audit never
    // starts a git process that could take the index lock.
    let repo = repo_by_dot_git(&base).ok_or_else(|| {
            Error::Git(format!(
                "{} is not inside a git repository: name a loop directory, or run orbit audit inside the repository",
                base.display()
            ))
        })?;
    let loops = loops_under(&repo);
    if loops.is_empty() {
        return Err(Error::Usage(format!(
            "no loop under {}/.orbit: create one with orbit init \"GOAL\", or name a loop directory",
            repo.display()
        )));
    }
    Ok(loops
        .into_iter()
        .map(|p| {
            let shown = p
                .strip_prefix(&base)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| p.clone());
            (p, shown.display().to_string())
        })
        .collect())
}

fn audit_all(dirs: &[PathBuf]) -> Result<Vec<LoopReport>> {
    Ok(targets(dirs)?
        .into_iter()
        .map(|(dir, shown)| audit_loop(&dir, &shown))
        .collect())
}

/// Whether to colour output: only on a terminal, never with NO_COLOR set.
fn colour() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// `orbit audit`.
pub fn run(args: &AuditArgs) -> Result<u8> {
    let reports = audit_all(&args.dirs)?;
    let now = crate::fsx::now_epoch();
    if args.json {
        let text = serde_json::to_string_pretty(&JsonReport { loops: &reports })
            .map_err(|e| Error::Usage(format!("cannot encode the report: {e}")))?;
        println!("{text}");
    } else if args.json_lines {
        print!("{}", json_lines(&reports, now)?);
    } else if args.summary {
        print!("{}", render_status(&reports, now, colour()));
    } else {
        print!("{}", render_human(&reports, colour()));
    }
    Ok(exit_code(&reports))
}

/// `orbit status`: one line per loop.
pub fn status(args: &StatusArgs) -> Result<u8> {
    let table = |reports: &[LoopReport]| -> Result<String> {
        let now = crate::fsx::now_epoch();
        if args.json_lines {
            json_lines(reports, now)
        } else {
            Ok(render_status(reports, now, colour()))
        }
    };
    if !args.watch {
        let reports = audit_all(&args.dirs)?;
        print!("{}", table(&reports)?);
        return Ok(exit_code(&reports));
    }
    // --watch: redraw in place on a terminal (a plain sequence of tables otherwise).
    let every = crate::goal::parse_duration("--interval", &args.interval)?.max(1);
    // A stream of JSON lines is never redrawn, nor separated by blank lines.
    let tty = std::io::stdout().is_terminal() && !args.json_lines;
    let mut shown = 0u64;
    loop {
        let reports = audit_all(&args.dirs)?;
        let table = table(&reports)?;
        if tty {
            print!("\x1b[H\x1b[2J");
        }
        print!("{table}");
        if !tty && !args.json_lines {
            println!();
        }
        let _ = std::io::stdout().flush();
        shown += 1;
        if args.count.is_some_and(|n| shown >= n) {
            return Ok(exit_code(&reports));
        }
        std::thread::sleep(std::time::Duration::from_secs(every));
    }
}

/// The spend as status shows it: `$1.5/$20`, `$1.5`; runs without a reported cost are
/// said (`$1.5 +2 unknown`), and a spend made only of them is `unknown`, never `$0`.
pub fn spend_cell(spent: Option<u64>, unknown: u64, cap: Option<u64>) -> String {
    let Some(x) = spent else {
        return "-".into();
    };
    let cap = cap
        .map(|c| format!("/${}", crate::goal::format_usd(c)))
        .unwrap_or_default();
    match (x, unknown) {
        (0, 0) => format!("$0{cap}"),
        (0, _) => format!("unknown{cap}"),
        (_, 0) => format!("${}{cap}", crate::goal::format_usd(x)),
        (_, n) => format!("${}{cap} +{n} unknown", crate::goal::format_usd(x)),
    }
}

fn paint(on: bool, code: &str, text: &str) -> String {
    if on {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn verdict_colour(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Done | Verdict::Running | Verdict::Ready => "32",
        Verdict::Idle | Verdict::Paused | Verdict::Exhausted => "33",
        Verdict::Blocked
        | Verdict::Stalled
        | Verdict::Crashed
        | Verdict::Aborted
        | Verdict::Corrupt => "31",
    }
}

fn severity_colour(s: Severity) -> &'static str {
    match s {
        Severity::P0 => "1;31",
        Severity::P1 => "33",
        Severity::P2 => "36",
    }
}

/// The human report: per loop a verdict line, then its findings, worst first.
pub fn render_human(reports: &[LoopReport], colour: bool) -> String {
    let mut out = String::new();
    let (mut p0, mut p1, mut p2) = (0, 0, 0);
    for r in reports {
        let mut state = match (&r.status, &r.stop_reason) {
            (Some(s), Some(reason)) if *reason != StopReason::None => {
                format!("state {s} ({reason})")
            }
            (Some(s), _) => format!("state {s}"),
            _ => "state unreadable".to_string(),
        };
        if let Some(i) = r.iteration {
            match r.summary.max_iterations {
                Some(max) => state.push_str(&format!(", iteration {i} of {max}")),
                None => state.push_str(&format!(", iteration {i}")),
            }
        }
        out.push_str(&format!(
            "{}  {}  {state}\n",
            paint(colour, "1", &r.dir),
            paint(colour, verdict_colour(r.verdict), r.verdict.as_str())
        ));
        let mut findings: Vec<&Finding> = r.findings.iter().collect();
        findings.sort_by_key(|f| f.severity);
        for f in findings {
            match f.severity {
                Severity::P0 => p0 += 1,
                Severity::P1 => p1 += 1,
                Severity::P2 => p2 += 1,
            }
            out.push_str(&format!(
                "  {} {}  {}\n      {}\n      fix: {}\n",
                paint(colour, severity_colour(f.severity), f.severity.as_str()),
                f.class,
                f.evidence,
                f.message,
                f.fix
            ));
        }
        for c in &r.summary.test_counts {
            out.push_str(&format!("  tests  {}\n", c.text()));
        }
        if r.findings.is_empty() {
            out.push_str("  no findings\n");
        }
    }
    out.push_str(&format!(
        "{} loop(s): {p0} P0, {p1} P1, {p2} P2\n",
        reports.len()
    ));
    out
}

/// `3m`, `2h`, `5d`: the age of `then` at `now`.
pub fn age(now: u64, then: u64) -> String {
    let s = now.saturating_sub(then);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// A path as commands show it: relative to the current directory when it is below it,
/// else as it is; one shell word.
pub fn shown_path(path: &str) -> String {
    let rel = std::env::current_dir()
        .ok()
        .and_then(|c| std::fs::canonicalize(c).ok())
        .and_then(|c| {
            Path::new(path)
                .strip_prefix(&c)
                .ok()
                .map(|r| r.display().to_string())
        })
        .filter(|r| !r.is_empty());
    crate::shell::paste_word(rel.as_deref().unwrap_or(path))
}

/// What to run to see or take the loop's work: for a DONE loop the merge of its branch
/// into the user's checkout, else its commits in the workspace; `orbit audit` when a P0 or
/// P1 finding comes first; nothing before the first run (there is no work yet).
pub fn work_step(r: &LoopReport) -> String {
    let d = crate::shell::paste_word(&r.dir);
    if r.worst().is_some_and(|s| s != Severity::P2) {
        return format!("orbit audit {d}");
    }
    match (&r.summary.workspace, &r.summary.branch) {
        (_, Some(b)) if r.verdict == Verdict::Done => {
            format!("git merge {}", crate::shell::paste_word(b))
        }
        (Some(ws), _) => format!("git -C {} log --oneline", shown_path(ws)),
        _ => String::new(),
    }
}

/// One line per loop: dir, verdict, iteration/max, last verify, spend, the loop branch, its
/// workspace, the command to see or take the work, last activity.
pub fn render_status(reports: &[LoopReport], now: u64, colour: bool) -> String {
    let rows: Vec<[String; 9]> = reports
        .iter()
        .map(|r| {
            let s = &r.summary;
            let iter = match (r.iteration, s.max_iterations) {
                (Some(i), Some(m)) => format!("{i}/{m}"),
                (Some(i), None) => i.to_string(),
                _ => "-".into(),
            };
            let iter = match s.candidates {
                Some(n) => format!("{iter} candidates {n}"),
                None => iter,
            };
            let spend = spend_cell(s.spent_microusd, s.unknown_cost_runs, s.usd_cap_microusd);
            let verify = s
                .last_verify
                .map(|v| format!("verify {v}"))
                .unwrap_or_else(|| "verify -".into());
            let active = s
                .last_activity
                .map(|t| format!("{} ago", age(now, t)))
                .unwrap_or_else(|| "never".into());
            let branch = s.branch.clone().filter(|_| s.workspace.is_some());
            [
                r.dir.clone(),
                r.verdict.to_string(),
                iter,
                verify,
                spend,
                branch.unwrap_or_else(|| "-".into()),
                s.workspace
                    .as_deref()
                    .map(shown_path)
                    .unwrap_or_else(|| "-".into()),
                match work_step(r) {
                    step if step.is_empty() => "-".into(),
                    step => format!("next: {step}"),
                },
                active,
            ]
        })
        .collect();
    let mut widths = [0usize; 9];
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (row, r) in rows.iter().zip(reports) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
            let cell = if i == 1 {
                paint(colour, verdict_colour(r.verdict), cell)
            } else {
                cell.clone()
            };
            if i + 1 == row.len() {
                line.push_str(&cell);
            } else {
                line.push_str(&format!("{cell}{pad}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(findings: &[Severity]) -> LoopReport {
        LoopReport {
            dir: ".orbit/x".into(),
            verdict: Verdict::Idle,
            status: Some(Status::Continue),
            iteration: Some(3),
            stop_reason: Some(StopReason::Tick),
            findings: findings
                .iter()
                .map(|s| Finding {
                    class: FindingClass::UnboundedLoop,
                    severity: *s,
                    evidence: "loop.toml:9".into(),
                    message: "m".into(),
                    fix: "f".into(),
                })
                .collect(),
            summary: Summary::default(),
        }
    }

    #[test]
    fn unknown_spend_is_never_shown_as_zero() {
        assert_eq!(spend_cell(Some(0), 3, None), "unknown");
        assert_eq!(spend_cell(Some(0), 3, Some(5_000_000)), "unknown/$5");
        assert_eq!(spend_cell(Some(0), 0, None), "$0");
        assert_eq!(spend_cell(Some(1_500_000), 2, None), "$1.5 +2 unknown");
        assert_eq!(spend_cell(Some(1_500_000), 0, Some(20_000_000)), "$1.5/$20");
        assert_eq!(spend_cell(None, 0, None), "-");
    }

    #[test]
    fn exit_codes_follow_the_worst_finding() {
        assert_eq!(exit_code(&[report(&[])]), 0);
        assert_eq!(exit_code(&[report(&[Severity::P2])]), 0);
        assert_eq!(exit_code(&[report(&[Severity::P2, Severity::P1])]), 1);
        assert_eq!(
            exit_code(&[report(&[Severity::P1]), report(&[Severity::P0])]),
            3
        );
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(age(100, 100), "0s");
        assert_eq!(age(200, 100), "1m");
        assert_eq!(age(100_000, 0), "1d");
        assert_eq!(age(0, 100), "0s");
    }

    #[test]
    fn colour_only_when_asked() {
        let r = [report(&[Severity::P1])];
        assert!(!render_human(&r, false).contains('\x1b'));
        assert!(render_human(&r, true).contains("\x1b[33mP1"));
    }
}
