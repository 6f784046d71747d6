//! `orbit report`: what a loop did and why it stopped, as markdown or as one self-contained
//! HTML page with inline SVG pictures.
//!
//! Both reports are made from one set of [`Facts`], read only through the format modules
//! (state.env, result.env, cost.ledger, progress.md, loop.toml) and `orbit audit`, whose
//! verdict is the loop's one name for its state. Money is integer micro-dollars; a cost
//! nobody reported is said to be unknown, never shown as $0. Every piece of text that
//! comes from the loop (summaries, check names, agent output, notes) is escaped in the HTML.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use crate::audit::{LoopReport, audit_loop};
use crate::cli::ReportArgs;
use crate::config::LoopConfig;
use crate::contract::{
    AgentOutcome, CostKind, Severity, Status, StopReason, Verdict, VerifyOutcome,
};
use crate::error::Result;
use crate::goal;
use crate::locate::pick_loop;
use crate::result_env::{self, ResultEnv};
use crate::state::State;
use crate::{fsx, ledger, progress};

mod json;
pub use json::render_json;

/// The most iterations a report lists one by one (the latest ones).
const MAX_ROWS: u64 = 200;

/// What one iteration's record says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    pub iteration: u64,
    /// STARTED_AT, epoch seconds.
    pub started_at: Option<u64>,
    /// ENDED_AT - STARTED_AT: the iteration's wall time.
    pub wall_secs: Option<u64>,
    /// DURATION: the agent's own time.
    pub agent_secs: Option<u64>,
    pub verdict: String,
    pub attempts: Option<u64>,
    pub agent_outcome: String,
    pub agent_exit: String,
    pub verify: Option<VerifyOutcome>,
    /// VERIFY_FAILING, split on commas.
    pub failing: Vec<String>,
    pub changed: Option<u64>,
    pub cost: Cost,
    /// DONE_CLAIM=1: the agent wrote done.md.
    pub done_claim: bool,
    /// DONE_VERDICT: DONE, or why the gate rejected the claim.
    pub done_verdict: String,
    pub stop_reason: String,
    pub summary: String,
    pub commit: String,
    pub last_message: String,
    /// A fan-out iteration's candidates (contract 10), by number; empty without one.
    pub candidates: Vec<CandidateRow>,
    /// What the holdout checks said in this iteration's last holdout run; `None` when
    /// holdout.sh did not run in it (it runs only on a DONE claim).
    pub holdout: Option<HoldoutRun>,
    /// NET_REFUSED: the `HOST:PORT` the sandbox's network allowlist refused to the
    /// iteration's runs (which run asked, in its net.log); empty when none.
    pub net_refused: Vec<String>,
}

/// One holdout run, as the iteration's holdout.log (or its survivor's) records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldoutRun {
    /// Each holdout check's `[PASS]`/`[FAIL]` line: whether it passed.
    pub checks: BTreeMap<String, bool>,
    /// holdout.sh failed as a whole (not run, timed out, changed the project): a check
    /// with no line of its own did not pass.
    pub failed: bool,
}

impl HoldoutRun {
    /// The last holdout run of a holdout.log: a `### holdout run:` header, or a
    /// `[FAIL] holdout.sh (not run: ...)` line, starts a run. Read as data: only the
    /// `[PASS] holdout-N` / `[FAIL] holdout-N` / `[FAIL] holdout.sh` lines count.
    fn last_of(text: &str) -> HoldoutRun {
        let mut run = HoldoutRun::default();
        for line in text.lines() {
            if line.starts_with("### holdout run:") {
                run = HoldoutRun::default();
                continue;
            }
            let (passed, rest) = if let Some(r) = line.strip_prefix("[PASS] ") {
                (true, r)
            } else if let Some(r) = line.strip_prefix("[FAIL] ") {
                (false, r)
            } else {
                continue;
            };
            let name = rest.split(' ').next().unwrap_or_default();
            if name == "holdout.sh" {
                if rest.starts_with("holdout.sh (not run") {
                    run = HoldoutRun::default();
                }
                run.failed |= !passed;
            } else if is_holdout_name(name) {
                run.checks.insert(name.to_string(), passed);
            }
        }
        run
    }
}

/// `holdout-N`: the name holdout.sh gives its N-th check.
fn is_holdout_name(name: &str) -> bool {
    name.strip_prefix("holdout-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The holdout run of an iteration: its own holdout.log, else its surviving candidate's.
fn read_holdout(idir: &Path, candidates: &[CandidateRow]) -> Option<HoldoutRun> {
    let mut paths = vec![idir.join("holdout.log")];
    if let Some(c) = candidates.iter().find(|c| c.survivor) {
        paths.push(idir.join(format!("candidates/{}/holdout.log", c.candidate)));
    }
    paths.iter().find_map(|p| {
        let bytes = fsx::read_loop_file(p).ok()?;
        Some(HoldoutRun::last_of(&String::from_utf8_lossy(&bytes)))
    })
}

/// A row of the check grid: one check of the loop and its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub name: String,
    /// `acceptance`, `reproduction`, `regression` or `holdout`; empty for a name that only
    /// a record gave (the runner's own, such as a check that changed the project).
    pub role: &'static str,
}

impl CheckLine {
    /// The row's label: the name, with its role unless it is an acceptance check.
    pub fn label(&self) -> String {
        let name: String = if self.name.chars().count() > 32 {
            format!("{}…", self.name.chars().take(31).collect::<String>())
        } else {
            self.name.clone()
        };
        match self.role {
            "" | crate::render::ROLE_ACCEPTANCE => name,
            role => format!("{name} [{role}]"),
        }
    }
}

/// What one check did in one iteration, as the check grid shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckCell {
    Pass,
    Fail,
    /// verify was skipped in the iteration.
    Skip,
    /// A holdout check in an iteration without a holdout run (no DONE claim reached it).
    HoldoutNotRun,
    NotRecorded,
}

impl CheckCell {
    pub fn word(self) -> &'static str {
        match self {
            CheckCell::Pass => "pass",
            CheckCell::Fail => "fail",
            CheckCell::Skip => "skip",
            CheckCell::HoldoutNotRun => "holdout, not run",
            CheckCell::NotRecorded => "not recorded",
        }
    }
}

/// What a fan-out candidate's record (`iterations/N/candidates/K/candidate.env`) says.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CandidateRow {
    pub candidate: u64,
    pub outcome: String,
    pub checks_passed: Option<u64>,
    pub checks_total: Option<u64>,
    /// Why the runner disqualified it ("" when it was not).
    pub disqualified: String,
    /// The holdout checks' and the judge's verdicts (`pass`, `fail`, "" when not run).
    pub holdout: String,
    pub judge: String,
    /// How many files its change touched.
    pub changed: Option<u64>,
    /// The iteration's survivor (survivor.txt names it).
    pub survivor: bool,
    /// The command that shows its change against the survivor's (its own change where the
    /// iteration had no survivor, or it is the survivor); "" once its ref is pruned.
    pub review: String,
}

impl CandidateRow {
    /// Whether it passed every visible check (and was neither disqualified nor stopped).
    pub fn passed_visible(&self) -> bool {
        self.disqualified.is_empty()
            && self.outcome != crate::contract::AgentOutcome::Stopped.as_str()
            && matches!((self.checks_passed, self.checks_total), (Some(p), Some(t)) if t > 0 && p == t)
    }

    /// `2/3`, `-` for a count the record lacks.
    pub fn checks_text(&self) -> String {
        format!(
            "{}/{}",
            opt_num(self.checks_passed),
            opt_num(self.checks_total)
        )
    }
}

/// The most candidates read for one iteration (the runner runs at most 8).
const MAX_CANDIDATES: u64 = 64;

/// A candidate record, read as data (`KEY=VALUE` lines; unknown keys, and lines that are
/// not such, are ignored; a later duplicate is ignored too).
fn parse_candidate(k: u64, bytes: &[u8]) -> CandidateRow {
    let text = String::from_utf8_lossy(bytes);
    let mut kv: BTreeMap<&str, &str> = BTreeMap::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if matches!(
            key,
            "OUTCOME"
                | "CHECKS_PASSED"
                | "CHECKS_TOTAL"
                | "DISQUALIFIED"
                | "HOLDOUT"
                | "JUDGE"
                | "CHANGED"
        ) {
            kv.entry(key).or_insert(value);
        }
    }
    let num = |key: &str| {
        kv.get(key)
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse().ok())
    };
    CandidateRow {
        candidate: k,
        outcome: kv.get("OUTCOME").copied().unwrap_or_default().to_string(),
        checks_passed: num("CHECKS_PASSED"),
        checks_total: num("CHECKS_TOTAL"),
        disqualified: kv
            .get("DISQUALIFIED")
            .copied()
            .unwrap_or_default()
            .to_string(),
        holdout: verdict_word(kv.get("HOLDOUT").copied()),
        judge: verdict_word(kv.get("JUDGE").copied()),
        changed: num("CHANGED"),
        survivor: false,
        review: String::new(),
    }
}

/// A candidate record's holdout or judge verdict: `pass`, `fail`, or "" (not run, or a
/// word the runner does not write).
fn verdict_word(v: Option<&str>) -> String {
    match v {
        Some(w @ ("pass" | "fail")) => w.to_string(),
        _ => String::new(),
    }
}

/// The loop's candidate refs (`refs/orbit/<name>/...`) git still has, read through the
/// loop directory's repository; empty when git cannot say.
fn candidate_refs(dir: &Path, name: &str) -> Vec<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "for-each-ref",
            "--format=%(refname)",
            &format!("refs/orbit/{name}/"),
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// Each candidate's review command (`CandidateRow::review`), from the refs git still has.
fn set_reviews(name: &str, iteration: u64, candidates: &mut [CandidateRow], refs: &[String]) {
    let ref_of = |k: u64| format!("refs/orbit/{name}/{iteration}/{k}");
    let survivor = candidates
        .iter()
        .find(|c| c.survivor)
        .map(|c| ref_of(c.candidate))
        .filter(|r| refs.contains(r));
    for c in candidates.iter_mut() {
        let own = ref_of(c.candidate);
        if !refs.contains(&own) {
            continue;
        }
        let own_word = crate::shell::paste_word(&own);
        c.review = match &survivor {
            Some(s) if !c.survivor => {
                format!("git diff {} {own_word}", crate::shell::paste_word(s))
            }
            _ => format!("git show {own_word}"),
        };
    }
}

/// The candidates of the iteration whose record directory is `idir`, by number: each
/// `candidates/K/candidate.env` that is a regular file (K a plain number; the runner's
/// `K.interrupted.J` set-asides are not candidates), the survivor marked from survivor.txt.
fn read_candidates(idir: &Path) -> Vec<CandidateRow> {
    let survivor = fsx::read_text_or_none(&idir.join("survivor.txt"))
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let mut out = Vec::new();
    for k in 1..=MAX_CANDIDATES {
        let path = idir.join(format!("candidates/{k}/candidate.env"));
        match fsx::read_loop_file(&path) {
            Ok(bytes) => {
                let mut c = parse_candidate(k, &bytes);
                c.survivor = k == survivor;
                out.push(c);
            }
            Err(fsx::Unreadable::Missing) if !idir.join(format!("candidates/{k}")).exists() => {
                break;
            }
            Err(_) => {}
        }
    }
    out
}

/// An iteration's cost as its record gives it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Cost {
    Known(u64, CostKind),
    /// Some agent run of the iteration reported no cost.
    Unknown,
    /// The record has no cost (an older runner, an aborted iteration).
    #[default]
    NotRecorded,
}

impl Cost {
    fn text(self) -> String {
        match self {
            Cost::Known(micro, kind) => format!("${} ({kind})", goal::format_usd(micro)),
            Cost::Unknown => "unknown".into(),
            Cost::NotRecorded => "-".into(),
        }
    }
}

impl Row {
    fn from_record(iteration: u64, r: &ResultEnv, commit: String, last_message: String) -> Row {
        let started_at = r.num("STARTED_AT");
        let wall_secs = match (started_at, r.num("ENDED_AT")) {
            (Some(s), Some(e)) => Some(e.saturating_sub(s)),
            _ => None,
        };
        let cost = match (CostKind::parse(r.get("COST_KIND")), r.num("COST_MICROUSD")) {
            (Some(CostKind::Unknown), _) => Cost::Unknown,
            (Some(kind), Some(micro)) => Cost::Known(micro, kind),
            _ => Cost::NotRecorded,
        };
        Row {
            iteration,
            started_at,
            wall_secs,
            agent_secs: r.num("DURATION"),
            verdict: r.get("VERDICT").to_string(),
            attempts: r.num("ATTEMPTS"),
            agent_outcome: r.get("AGENT_OUTCOME").to_string(),
            agent_exit: r.get("AGENT_EXIT").to_string(),
            verify: VerifyOutcome::parse(r.get("VERIFY")),
            failing: r
                .get("VERIFY_FAILING")
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            changed: r.num("CHANGED"),
            net_refused: r.get("NET_REFUSED").split_whitespace().map(cell).collect(),
            cost,
            done_claim: r.get("DONE_CLAIM") == "1",
            done_verdict: r.get("DONE_VERDICT").to_string(),
            stop_reason: r.get("STOP_REASON").to_string(),
            summary: r.get("SUMMARY").to_string(),
            commit,
            last_message,
            candidates: Vec::new(),
            holdout: None,
        }
    }

    /// The agent's outcome in words: `ok`, `timeout (exit 124)`, ...
    pub fn agent_text(&self) -> String {
        match AgentOutcome::parse(&self.agent_outcome) {
            None if self.agent_outcome.is_empty() => "-".into(),
            Some(AgentOutcome::Ok) => "ok".into(),
            _ if self.agent_exit.is_empty() => self.agent_outcome.clone(),
            _ => format!("{} (exit {})", self.agent_outcome, self.agent_exit),
        }
    }

    /// Verify in words: `pass`, `fail: a,b`, `skip`.
    pub fn verify_text(&self) -> String {
        match self.verify {
            Some(VerifyOutcome::Fail) => format!("fail: {}", self.failing.join(",")),
            Some(v) => v.to_string(),
            None => "-".into(),
        }
    }

    /// The DONE gate's decision on this iteration's claim, when there was one.
    pub fn claim_text(&self) -> Option<String> {
        if !self.done_claim && self.done_verdict.is_empty() {
            return None;
        }
        Some(if self.done_verdict == Status::Done.as_str() {
            "accepted: DONE".into()
        } else if self.done_verdict.is_empty() {
            "claimed; no decision recorded".into()
        } else {
            format!("rejected: {}", self.done_verdict)
        })
    }

    /// What one check did in this iteration: pass, fail, skip, or nothing known.
    pub fn check(&self, name: &str) -> Option<VerifyOutcome> {
        match self.verify? {
            VerifyOutcome::Skip => Some(VerifyOutcome::Skip),
            VerifyOutcome::Pass => Some(VerifyOutcome::Pass),
            VerifyOutcome::Fail if self.failing.iter().any(|f| f == name) => {
                Some(VerifyOutcome::Fail)
            }
            // verify failed without naming its checks: this one is not known to pass.
            VerifyOutcome::Fail if self.failing.is_empty() => Some(VerifyOutcome::Fail),
            VerifyOutcome::Fail => Some(VerifyOutcome::Pass),
        }
    }

    /// The grid's cell of a check in this iteration: a holdout check from the holdout run,
    /// any other from verify's record.
    pub fn cell(&self, check: &CheckLine) -> CheckCell {
        if check.role == crate::render::ROLE_HOLDOUT {
            return match &self.holdout {
                None => CheckCell::HoldoutNotRun,
                Some(run) => match run.checks.get(&check.name) {
                    Some(true) => CheckCell::Pass,
                    Some(false) => CheckCell::Fail,
                    None if run.failed => CheckCell::Fail,
                    None => CheckCell::NotRecorded,
                },
            };
        }
        match self.check(&check.name) {
            Some(VerifyOutcome::Pass) => CheckCell::Pass,
            Some(VerifyOutcome::Fail) => CheckCell::Fail,
            Some(VerifyOutcome::Skip) => CheckCell::Skip,
            None => CheckCell::NotRecorded,
        }
    }
}

/// One point of the spend curve: the spend after an iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpendPoint {
    pub iteration: u64,
    /// Cumulative reported and estimated micro-dollars.
    pub cumulative: u64,
    /// Some run of this iteration reported no cost.
    pub unknown: bool,
}

/// Everything both reports say.
#[derive(Debug, Clone)]
pub struct Facts {
    pub name: String,
    pub goal: String,
    /// orbit audit's verdict: the loop's state in one word.
    pub verdict: Verdict,
    pub status: Status,
    pub stop_reason: StopReason,
    pub iterations: u64,
    pub max_iterations: u64,
    pub spend: u64,
    pub unknown_runs: usize,
    pub cap: Option<u64>,
    /// The tokens the agent runs used, as their engine counted them (input, output, and how
    /// many runs said): `None` when no run's engine counts them.
    pub tokens: Option<(u64, u64, usize)>,
    /// ITER_BRANCH and ORIGIN_BRANCH.
    pub branch: Option<(String, String)>,
    /// The workspace, as commands show it (relative to the current directory when below
    /// it); `None` before the first run.
    pub workspace: Option<String>,
    /// The OS sandbox the agent and the checks run in (`None` without one).
    pub sandbox: Option<&'static str>,
    /// Where the work is and how to take it: (what, command), e.g. the merge of a DONE
    /// loop's branch, or its commits in the workspace.
    pub work: Vec<(String, String)>,
    pub rows: Vec<Row>,
    /// Iterations before the first row, not listed.
    pub earlier: u64,
    /// The check grid's rows: every check of loop.toml (acceptance, reproduction,
    /// regression, then the holdout checks, `holdout-N`), then any other name a record gave.
    pub checks: Vec<CheckLine>,
    pub spend_curve: Vec<SpendPoint>,
    /// Sum of the listed iterations' wall times and agent times, seconds.
    pub total_wall: u64,
    pub total_agent: u64,
    /// First start and last end among the listed iterations.
    pub span: Option<(u64, u64)>,
    /// The last record's summary.
    pub last_summary: String,
    /// The command to run next, and why.
    pub next: String,
    pub next_why: String,
    pub last_failure: Vec<String>,
    pub notes: Vec<String>,
    /// What each check's own output said ran, on the base tree and at its latest run.
    pub test_counts: Vec<crate::counts::CheckCounts>,
    /// loop.toml's allow-fewer-tests.
    pub allow_fewer_tests: Vec<String>,
    /// The hand-off as `orbit verify` (without `--rerun`) finds it, for a DONE loop or one
    /// with an envelope.json: `None` otherwise.
    pub envelope: Option<crate::verify::Outcome>,
    /// What `orbit adequacy` last measured of the loop's branch head (adequacy.json), when
    /// it is of that head.
    pub adequacy: Option<crate::adequacy::Record>,
}

/// An iteration's result.env through the one result.env reader; `None` when it is absent
/// or unreadable (the report then skips the row, as audit names the problem).
fn read_result(path: &Path) -> Option<ResultEnv> {
    let bytes = fsx::read_loop_file(path).ok()?;
    result_env::parse(&bytes).ok()
}

/// Table cells hold text from the agent and the repository: no pipes, no newlines.
fn cell(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '|' {
                '/'
            } else if c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect::<String>()
        .trim()
        .to_string()
}

/// The last non-empty line an agent printed, shortened: for a record without the CLI's
/// final message (`AGENT_MESSAGE`, which the runner reads from the engine's structured
/// output), or one written before it was recorded.
fn last_message(log: &Path) -> String {
    let data = fsx::read_loop_file(log).unwrap_or_default();
    let tail = &data[data.len().saturating_sub(8192)..];
    let text = String::from_utf8_lossy(tail);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    shorten(&cell(line))
}

/// A table cell's text cut to 100 characters.
fn shorten(line: &str) -> String {
    if line.chars().count() > 100 {
        format!("{}…", line.chars().take(99).collect::<String>())
    } else {
        line.to_string()
    }
}

/// The next command for a loop, and why: the fix of the audit's worst finding when it is
/// P0 or P1 (a P2 is a note, not the next step), else what the verdict and stop reason ask.
pub fn next_step(audit: &LoopReport, state: &State, shown: &str) -> (String, String) {
    let worst = audit
        .findings
        .iter()
        .filter(|f| f.severity != Severity::P2)
        .min_by_key(|f| f.severity);
    if let Some(f) = worst {
        return (
            f.fix.clone(),
            format!("{} {}: {}", f.severity, f.class, f.message),
        );
    }
    let d = crate::shell::paste_word(shown);
    let edit = |setting: &str| {
        format!(
            "raise {setting} in {d}/loop.toml, then: orbit init --force --dir {d} && orbit run {d}"
        )
    };
    let (cmd, why) = match audit.verdict {
        Verdict::Running => (
            format!("orbit status --watch {d}"),
            "a runner is working on the loop".to_string(),
        ),
        Verdict::Ready => (format!("orbit run {d}"), "the loop has not run yet".into()),
        Verdict::Idle => (format!("orbit run {d}"), "work remains".into()),
        Verdict::Done => (
            format!("orbit merge {d}"),
            match (state.origin_branch.as_str(), state.iter_branch.as_str()) {
                ("", _) | (_, "") => {
                    "verified DONE: orbit merge checks its envelope, then merges its branch"
                        .to_string()
                }
                (o, b) => format!(
                    "verified DONE: orbit merge checks its envelope, then merges {b} into {o} (git log --stat {} shows its commits)",
                    crate::shell::paste_word(&format!("{o}..{b}"))
                ),
            },
        ),
        Verdict::Exhausted => (
            edit("max-iterations"),
            "every allowed iteration was used without DONE".into(),
        ),
        Verdict::Stalled => (
            format!("orbit recover {d} --clear-stall"),
            "no progress: change the approach (goal.md, notes.md), then clear the stall".into(),
        ),
        Verdict::Crashed | Verdict::Corrupt => (
            format!("orbit recover {d}"),
            "the records need a recovery before the loop can go on".into(),
        ),
        Verdict::Aborted => (
            format!("orbit audit {d}"),
            "an integrity stop: review what changed".into(),
        ),
        Verdict::Paused | Verdict::Blocked => match state.stop_reason {
            StopReason::Stopped => (
                format!("orbit resume {d}"),
                "stopped by its user".to_string(),
            ),
            StopReason::RateLimit => (
                format!("orbit run {d}"),
                format!(
                    "rate limited: runs again after {}",
                    fsx::iso_utc(state.resume_at)
                ),
            ),
            StopReason::Budget => (edit("usd-cap"), "the spend reached its cap".into()),
            StopReason::LoopTimeout => (edit("loop-timeout"), "the loop ran out of time".into()),
            StopReason::CircuitOpen => (
                format!("orbit recover {d} --reset-circuit"),
                "the circuit breaker is open".into(),
            ),
            StopReason::ToolFailure | StopReason::Preflight => (
                format!("orbit run {d}"),
                "fix the agent command or the machine first (see runner.log)".into(),
            ),
            _ => (format!("orbit run {d}"), "the loop may go on".into()),
        },
    };
    (cmd, why)
}

/// How to see or take a loop's work: a DONE loop's branch is merged from the user's own
/// checkout, or pushed for a pull request; any other loop's commits are read in its
/// workspace. Nothing before the first run.
pub fn work_steps(
    verdict: Verdict,
    branch: Option<&str>,
    origin: &str,
    workspace: Option<&str>,
) -> Vec<(String, String)> {
    let Some(ws) = workspace else {
        return Vec::new();
    };
    match branch {
        Some(b) if verdict == Verdict::Done => {
            let b = crate::shell::paste_word(b);
            let into = if origin.is_empty() {
                "your checkout".to_string()
            } else {
                format!("your checkout of {origin}")
            };
            vec![
                (format!("merge it into {into}"), format!("git merge {b}")),
                (
                    "or open a pull request from it".to_string(),
                    format!("git push origin {b}"),
                ),
            ]
        }
        _ => vec![(
            "the loop's commits, in its workspace".to_string(),
            format!("git -C {ws} log --oneline"),
        )],
    }
}

/// When the loop's branch changes orbit.toml (the project's defaults for the next `orbit
/// init`: its sandbox, its notifications), the step to review that change before the work
/// is merged: what the agent wrote there would steer the loops rendered after it. Read
/// through the loop directory's repository, from the commit the loop started at
/// (`.baseline-commit`); `None` when the branch leaves it as it was, or git cannot say.
fn project_defaults_step(dir: &Path, branch: &str) -> Option<(String, String)> {
    let base = fsx::read_text_or_none(&dir.join(".baseline-commit"))?;
    let base = base.trim();
    if branch.is_empty() || base.len() != 40 || !base.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let branch_ref = format!("refs/heads/{branch}");
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "diff",
            "--quiet",
            "--no-ext-diff",
            "--no-textconv",
            base,
            &branch_ref,
        ])
        // From the repository's top, wherever in it the loop directory is.
        .args(["--", ":(top)orbit.toml"])
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    // 1: the paths differ; 0: they do not; anything else: git could not say.
    (status.code() == Some(1)).then(|| {
        (
            "first review what the branch changes in orbit.toml, the project's defaults for the next orbit init (its sandbox, its notifications)".to_string(),
            format!(
                "git diff {base} {} -- orbit.toml",
                crate::shell::paste_word(branch)
            ),
        )
    })
}

/// Every check of the loop with its role, in verify.sh's order (loop.toml's
/// `check_names`), then holdout.sh's, then any other name a record's failing list gave.
fn check_lines(cfg: &LoopConfig, rows: &[Row]) -> Vec<CheckLine> {
    use crate::render::{ROLE_ACCEPTANCE, ROLE_HOLDOUT, ROLE_REGRESSION, ROLE_REPRODUCTION};
    let roles = std::iter::repeat_n(ROLE_ACCEPTANCE, cfg.verify.len())
        .chain(std::iter::repeat_n(
            ROLE_REPRODUCTION,
            cfg.reproduction.len(),
        ))
        .chain(std::iter::repeat_n(ROLE_REGRESSION, cfg.regression.len()));
    let mut checks: Vec<CheckLine> = cfg
        .check_names()
        .into_iter()
        .zip(roles)
        .map(|(name, role)| CheckLine { name, role })
        .chain((1..=cfg.holdout.len()).map(|k| CheckLine {
            name: format!("holdout-{k}"),
            role: ROLE_HOLDOUT,
        }))
        .collect();
    for row in rows {
        for f in &row.failing {
            if !checks.iter().any(|c| &c.name == f) {
                checks.push(CheckLine {
                    name: f.clone(),
                    role: "",
                });
            }
        }
    }
    checks
}

/// The tokens the journal's `agent_exit` events say the runs used, summed: (input, output,
/// runs). A look at the lines that name tokens only: the audit verifies the chain.
fn journal_tokens(path: &Path) -> Option<(u64, u64, usize)> {
    use std::io::BufRead;
    let file = fsx::open_regular(path).ok()?;
    let mut sum: Option<(u64, u64, usize)> = None;
    for line in std::io::BufReader::new(file)
        .split(b'\n')
        .map_while(|l| l.ok())
    {
        let Ok(text) = std::str::from_utf8(&line) else {
            continue;
        };
        if !text.contains("\"tokens_in\":") {
            continue;
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
            continue;
        };
        if v["event"] != "agent_exit" {
            continue;
        }
        if let (Some(i), Some(o)) = (v["tokens_in"].as_u64(), v["tokens_out"].as_u64()) {
            let (si, so, n) = sum.unwrap_or((0, 0, 0));
            sum = Some((si.saturating_add(i), so.saturating_add(o), n + 1));
        }
    }
    sum
}

/// Reads a loop into the facts both reports show. `shown` is how commands name the
/// directory.
pub fn facts(dir: &Path, shown: &str) -> Result<Facts> {
    let cfg = LoopConfig::load(&dir.join("loop.toml"))?;
    let state = State::parse_file(&dir.join("state.env"))?;
    let audit = audit_loop(dir, shown);
    let goal_md = fsx::read_text_or_none(&dir.join("goal.md")).unwrap_or_default();
    let title = cell(goal_md.lines().nth(2).unwrap_or(""));
    let done = state.next_iteration.saturating_sub(1);
    let ledger = ledger::parse(&fsx::read_loop_file(&dir.join("cost.ledger")).unwrap_or_default());
    let unknown_runs = ledger
        .entries
        .iter()
        .filter(|e| e.kind == CostKind::Unknown)
        .count();

    let first = done.saturating_sub(MAX_ROWS - 1).max(1);
    let mut rows = Vec::new();
    let mut cand_refs: Option<Vec<String>> = None;
    // Up to NEXT_ITERATION: an ABORTED iteration is recorded but not counted as done.
    for i in first..=state.next_iteration {
        let idir = dir.join(format!("iterations/{i:06}"));
        let Some(r) = read_result(&idir.join("result.env")) else {
            continue;
        };
        let commit = fsx::read_text_or_none(&idir.join("commit.txt")).unwrap_or_default();
        let commit = commit.trim();
        let commit = if commit.len() == 40 {
            &commit[..10]
        } else {
            commit
        };
        let message = r.get("AGENT_MESSAGE");
        let message = if message.trim().is_empty() {
            last_message(&idir.join("agent.log"))
        } else {
            shorten(&cell(message))
        };
        let mut row = Row::from_record(i, &r, cell(commit), message);
        row.candidates = read_candidates(&idir);
        if !row.candidates.is_empty() {
            let refs = cand_refs.get_or_insert_with(|| candidate_refs(dir, &cfg.name));
            set_reviews(&cfg.name, i, &mut row.candidates, refs);
        }
        row.holdout = read_holdout(&idir, &row.candidates);
        rows.push(row);
    }

    let checks = check_lines(&cfg, &rows);

    // The spend curve: the ledger summed by iteration, cumulative from the first run.
    let mut by_iter: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
    for e in &ledger.entries {
        let slot = by_iter.entry(e.iteration).or_default();
        slot.0 = slot.0.saturating_add(e.micro_usd);
        slot.1 |= e.kind == CostKind::Unknown;
    }
    let mut cumulative = 0u64;
    let mut spend_curve = Vec::new();
    for (iteration, (micro, unknown)) in by_iter {
        cumulative = cumulative.saturating_add(micro);
        if iteration >= first {
            spend_curve.push(SpendPoint {
                iteration,
                cumulative,
                unknown,
            });
        }
    }

    let total_wall = rows.iter().filter_map(|r| r.wall_secs).sum();
    let total_agent = rows.iter().filter_map(|r| r.agent_secs).sum();
    let starts: BTreeSet<u64> = rows.iter().filter_map(|r| r.started_at).collect();
    let ends = rows
        .iter()
        .filter_map(|r| Some(r.started_at? + r.wall_secs?))
        .max();
    let span = starts.first().copied().zip(ends);

    let p = progress::parse(&fsx::read_loop_file(&dir.join("progress.md")).unwrap_or_default());
    let last_failure = p
        .entries
        .iter()
        .rev()
        .find(|e| e.text.contains("- feedback:"))
        .map(|entry| {
            entry
                .text
                .lines()
                .filter(|l| l.starts_with("    "))
                .take(30)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let notes = fsx::read_text_or_none(&dir.join("notes.md"))
        .unwrap_or_default()
        .lines()
        .take(80)
        .map(str::to_string)
        .collect::<Vec<_>>();
    let notes = if notes.iter().all(|l| l.trim().is_empty()) {
        Vec::new()
    } else {
        notes
    };
    let (mut next, mut next_why) = next_step(&audit, &state, shown);
    let envelope = (audit.verdict == Verdict::Done || dir.join(crate::envelope::FILE).is_file())
        .then(|| crate::verify::loop_outcome(dir))
        .flatten();
    if let Some(o) = &envelope
        && audit.verdict == Verdict::Done
        && next.starts_with("orbit merge ")
        && let Some(code) = o.failure
    {
        next = format!("orbit verify {}", crate::shell::paste_word(shown));
        next_why = format!(
            "DONE, but the hand-off does not verify: {code}: {}; {}",
            o.why,
            o.next()
        );
    }
    let workspace = audit
        .summary
        .workspace
        .as_deref()
        .map(crate::audit::shown_path);
    let mut work = work_steps(
        audit.verdict,
        audit.summary.branch.as_deref(),
        &state.origin_branch,
        workspace.as_deref(),
    );
    if let Some(step) = project_defaults_step(dir, &state.iter_branch) {
        work.insert(0, step);
    }
    let head = (!state.iter_branch.is_empty())
        .then(|| {
            crate::envelope::git_line(
                dir,
                &[
                    "rev-parse",
                    "--verify",
                    "-q",
                    &format!("refs/heads/{}^{{commit}}", state.iter_branch),
                ],
            )
        })
        .flatten();
    let adequacy = head
        .as_deref()
        .and_then(|h| crate::adequacy::Record::of_head(dir, dir, h));
    Ok(Facts {
        name: cfg.name.clone(),
        goal: title,
        verdict: audit.verdict,
        status: state.last_status,
        stop_reason: state.stop_reason,
        iterations: done,
        max_iterations: cfg.max_iterations,
        spend: state.cost_microusd,
        unknown_runs,
        cap: LoopConfig::usd_micro(cfg.usd_cap),
        tokens: journal_tokens(&dir.join("events.jsonl")),
        branch: (!state.iter_branch.is_empty())
            .then(|| (state.iter_branch.clone(), state.origin_branch.clone())),
        workspace,
        sandbox: (cfg.sandbox != crate::config::Sandbox::None).then(|| cfg.sandbox.name()),
        work,
        last_summary: rows.last().map(|r| r.summary.clone()).unwrap_or_default(),
        rows,
        earlier: first - 1,
        checks,
        spend_curve,
        total_wall,
        total_agent,
        span,
        next,
        next_why,
        last_failure,
        notes,
        test_counts: crate::counts::read(dir, state.next_iteration, &cfg.allow_fewer_tests),
        allow_fewer_tests: cfg.allow_fewer_tests.clone(),
        envelope,
        adequacy,
    })
}

impl Facts {
    /// The iterations whose runs the sandbox's network refused a host, in order.
    fn net_refused_rows(&self) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| !r.net_refused.is_empty())
            .collect()
    }

    /// The test counts' table rows: check, base tree ran, ran, passed, failed, skipped,
    /// verdict (in words).
    pub fn count_rows(&self) -> Vec<[String; 7]> {
        self.test_counts
            .iter()
            .map(|c| {
                let l = &c.latest;
                [
                    c.check.clone(),
                    opt_num(c.base_ran),
                    l.ran.to_string(),
                    l.passed.to_string(),
                    l.failed.to_string(),
                    l.skipped.to_string(),
                    c.verdict_text(),
                ]
            })
            .collect()
    }

    /// The sentence under the test counts' heading: what they are, and the override.
    pub fn counts_text(&self) -> String {
        let mut t = String::from(
            "What each check's own output said ran, on the base tree and at its latest run: a pass with no test run, or fewer than on the base tree, fails the check.",
        );
        if !self.allow_fewer_tests.is_empty() {
            let _ = write!(
                t,
                " loop.toml's allow-fewer-tests accepts a drop of: {}.",
                self.allow_fewer_tests.join(", ")
            );
        }
        t
    }
}

/// Selection accounting: what survivor selection found across the listed fan-out
/// iterations. Whether fan-out pays (how often more than one candidate passed, how often
/// only the survivor did) and how often the visible checks were overfitted (passed, but not
/// the holdout checks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Selection {
    /// Fan-out iterations listed.
    pub iterations: u64,
    /// Candidates recorded in them.
    pub candidates: u64,
    /// Candidates that passed every visible check (neither disqualified nor stopped).
    pub passed_visible: u64,
    /// Of those, the ones whose holdout checks ran, and the ones they passed.
    pub holdout_run: u64,
    pub passed_holdout: u64,
    /// Iterations whose survivor was the only candidate passing the visible checks.
    pub only_survivor_passed: u64,
    /// Iterations where two or more candidates passed them.
    pub several_passed: u64,
    /// Iterations where one candidate passed them and was not the survivor (its holdout
    /// checks or the judge kept it out).
    pub one_passed_not_taken: u64,
    /// Iterations where no candidate passed them.
    pub none_passed: u64,
}

impl Selection {
    /// Selection accounting over ROWS (`None` when none of them fanned out). Each fan-out
    /// iteration falls in exactly one of: the survivor the only candidate passing the
    /// visible checks, two or more passing, one passing that was not taken, none passing.
    pub fn of(rows: &[Row]) -> Option<Selection> {
        let mut s = Selection::default();
        for r in rows.iter().filter(|r| !r.candidates.is_empty()) {
            s.iterations += 1;
            let mut passing = 0u64;
            let mut survivor_passed = false;
            for c in &r.candidates {
                s.candidates += 1;
                if !c.passed_visible() {
                    continue;
                }
                passing += 1;
                survivor_passed |= c.survivor;
                s.passed_visible += 1;
                if !c.holdout.is_empty() {
                    s.holdout_run += 1;
                    if c.holdout == VerifyOutcome::Pass.as_str() {
                        s.passed_holdout += 1;
                    }
                }
            }
            match passing {
                0 => s.none_passed += 1,
                1 if survivor_passed => s.only_survivor_passed += 1,
                1 => s.one_passed_not_taken += 1,
                _ => s.several_passed += 1,
            }
        }
        (s.iterations > 0).then_some(s)
    }
}

impl Facts {
    /// Selection accounting over the listed iterations (`None` without a fan-out).
    pub fn selection(&self) -> Option<Selection> {
        Selection::of(&self.rows)
    }

    /// The selection accounting in one paragraph.
    pub fn selection_text(&self) -> Option<String> {
        let s = self.selection()?;
        let mut t = format!(
            "Across {} fan-out iteration(s){}: {} candidate(s), {} of them passed every visible check",
            s.iterations,
            if self.earlier > 0 { " listed" } else { "" },
            s.candidates,
            s.passed_visible
        );
        if s.holdout_run > 0 {
            let _ = write!(
                t,
                "; of those, {} of the {} checked also passed the holdout checks",
                s.passed_holdout, s.holdout_run
            );
            if s.passed_holdout < s.holdout_run {
                let _ = write!(
                    t,
                    " ({} passed the visible checks only: overfitted to them)",
                    s.holdout_run - s.passed_holdout
                );
            }
        }
        let _ = write!(
            t,
            ". The survivor was the only candidate passing in {} iteration(s); two or more passed in {}; none in {}",
            s.only_survivor_passed, s.several_passed, s.none_passed
        );
        if s.one_passed_not_taken > 0 {
            let _ = write!(
                t,
                "; one passed and was not taken (its holdout checks or the judge kept it out) in {}",
                s.one_passed_not_taken
            );
        }
        t.push('.');
        Some(t)
    }
}

impl Facts {
    /// `$1.25 of a $5 cap`, with the runs of unknown cost said plainly.
    pub fn spend_text(&self) -> String {
        let cap = self
            .cap
            .map(|c| format!(" of a ${} cap", goal::format_usd(c)))
            .unwrap_or_else(|| " (no cap)".into());
        let spend = goal::format_usd(self.spend);
        if self.unknown_runs > 0 {
            format!(
                "${spend}{cap} reported; {} agent run(s) reported no cost",
                self.unknown_runs
            )
        } else {
            format!("${spend}{cap}")
        }
    }

    /// `1200 in, 340 out over 3 agent run(s)`, where some run's engine counted tokens.
    pub fn tokens_text(&self) -> Option<String> {
        self.tokens.map(|(i, o, n)| {
            format!("{i} in, {o} out over {n} agent run(s), as the engine counted them")
        })
    }

    /// `1m5s in 3 iteration(s) (agent 40s), 2026-...Z to 2026-...Z`.
    pub fn time_text(&self) -> String {
        let mut t = format!(
            "{} in {} iteration(s) (the agent {})",
            duration(self.total_wall),
            self.rows.len(),
            duration(self.total_agent)
        );
        if let Some((a, b)) = self.span {
            let _ = write!(t, ", from {} to {}", fsx::iso_utc(a), fsx::iso_utc(b));
        }
        t
    }

    /// Why the loop stopped, in one line.
    pub fn stop_text(&self) -> String {
        let mut t = format!(
            "{} (state {}, stop reason {})",
            self.verdict, self.status, self.stop_reason
        );
        if !self.last_summary.is_empty() {
            let _ = write!(t, ": {}", cell(&self.last_summary));
        }
        t
    }
}

fn duration(secs: u64) -> String {
    match secs {
        0 => "0s".into(),
        s => goal::format_duration(s),
    }
}

fn opt_duration(secs: Option<u64>) -> String {
    secs.map(duration).unwrap_or_else(|| "-".into())
}

fn opt_num(n: Option<u64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "-".into())
}

/// The markdown report of a loop.
pub fn report_text(dir: &Path) -> Result<String> {
    Ok(render_text(&facts(dir, &dir.display().to_string())?))
}

/// The markdown text of a set of facts.
pub fn render_text(f: &Facts) -> String {
    let mut out = format!("# orbit report: {}\n\n", f.name);
    let _ = writeln!(out, "- goal: {}", f.goal);
    let _ = writeln!(out, "- verdict: {}", f.verdict);
    let _ = writeln!(
        out,
        "- status: {} (stop reason: {})",
        f.status, f.stop_reason
    );
    let _ = writeln!(
        out,
        "- iterations: {} of at most {}",
        f.iterations, f.max_iterations
    );
    let _ = writeln!(out, "- time: {}", f.time_text());
    let _ = writeln!(out, "- spend: {}", f.spend_text());
    if let Some(t) = f.tokens_text() {
        let _ = writeln!(out, "- tokens: {t}");
    }
    if let Some((iter, origin)) = &f.branch {
        let from = if origin.is_empty() {
            "a detached HEAD"
        } else {
            origin
        };
        let _ = writeln!(out, "- branch: {iter} (from {from})");
    }
    if let Some(ws) = &f.workspace {
        let _ = writeln!(out, "- workspace: {ws}");
    }
    if let Some(sandbox) = f.sandbox {
        let _ = writeln!(out, "- sandbox: {sandbox}");
    }
    if let Some(e) = &f.envelope {
        let _ = writeln!(out, "- {}", e.line());
    }
    if let Some(a) = &f.adequacy {
        let _ = writeln!(out, "- adequacy: {}", a.summary());
        // The change as its hunks, each marked, the survivors of its lines under it.
        let (hunks, loose) = a.marked();
        let code = |t: &str| format!("`{}`", t.replace('`', "'"));
        for (what, at, survivors) in hunks.iter().take(40) {
            let _ = writeln!(out, "  - {what}: {}", code(at));
            for m in survivors.iter().take(20) {
                let _ = writeln!(out, "    - a mutant the checks do not kill: {}", code(m));
            }
            if survivors.len() > 20 {
                let _ = writeln!(
                    out,
                    "    - ... and {} more (orbit adequacy)",
                    survivors.len() - 20
                );
            }
        }
        if hunks.len() > 40 {
            let _ = writeln!(
                out,
                "  - ... and {} more hunks (orbit adequacy)",
                hunks.len() - 40
            );
        }
        for m in loose.iter().take(20) {
            let _ = writeln!(out, "  - a mutant the checks do not kill: {}", code(m));
        }
    }

    out.push_str("\n## Why it stopped\n\n");
    let _ = writeln!(out, "{}", f.stop_text());
    let _ = writeln!(out, "\nnext: `{}`\n({})", f.next, cell(&f.next_why));
    for (what, cmd) in &f.work {
        let _ = writeln!(out, "\n{what}: `{cmd}`");
    }

    out.push_str("\n## Iterations\n\n| # | verdict | verify | changed | commit | cost | spent so far | started (UTC) | time | agent time | attempts | agent | DONE claim | agent's last message |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    if f.earlier > 0 {
        let _ = writeln!(
            out,
            "| … | {} earlier iterations in progress.md | | | | | | | | | | | | |",
            f.earlier
        );
    }
    for r in &f.rows {
        let spent = f
            .spend_curve
            .iter()
            .rfind(|p| p.iteration <= r.iteration)
            .map(|p| format!("${}", goal::format_usd(p.cumulative)))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {spent} | {} | {} | {} | {} | {} | {} | {} |",
            r.iteration,
            cell(&r.verdict),
            cell(&r.verify_text()),
            opt_num(r.changed),
            r.commit,
            r.cost.text(),
            r.started_at.map(fsx::iso_utc).unwrap_or_else(|| "-".into()),
            opt_duration(r.wall_secs),
            opt_duration(r.agent_secs),
            opt_num(r.attempts),
            cell(&r.agent_text()),
            r.claim_text().map(|c| cell(&c)).unwrap_or_default(),
            r.last_message
        );
    }

    if let Some(t) = f.selection_text() {
        out.push_str("\n## Candidates\n\n");
        out.push_str(&cell(&t));
        out.push('\n');
        for r in f.rows.iter().filter(|r| !r.candidates.is_empty()) {
            let _ = write!(
                out,
                "\n### Iteration {}\n\n| candidate | outcome | checks passed | holdout | judge | changed files | disqualified | survivor | review |\n|---|---|---|---|---|---|---|---|---|\n",
                r.iteration
            );
            for c in &r.candidates {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    c.candidate,
                    cell(&c.outcome),
                    c.checks_text(),
                    c.holdout,
                    c.judge,
                    opt_num(c.changed),
                    cell(&c.disqualified),
                    if c.survivor { "yes" } else { "" },
                    if c.review.is_empty() {
                        String::new()
                    } else {
                        crate::render::code_span(&c.review)
                    }
                );
            }
        }
    }

    if !f.test_counts.is_empty() {
        let _ = write!(
            out,
            "\n## Test counts\n\n{}\n\n| check | base tree ran | ran | passed | failed | skipped | verdict |\n|---|---|---|---|---|---|---|\n",
            f.counts_text()
        );
        for r in f.count_rows() {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} | {} |",
                cell(&r[0]),
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                cell(&r[6])
            );
        }
    }

    let refused = f.net_refused_rows();
    if !refused.is_empty() {
        out.push_str("\n## Refused by the sandbox's network\n\n");
        for r in refused {
            let _ = writeln!(
                out,
                "- iteration {}: {}",
                r.iteration,
                r.net_refused.join(", ")
            );
        }
        out.push_str(
            "\nA host a run needs is allowed with allow-hosts in loop.toml (`orbit init --allow-host HOST:PORT`); each iteration's net.log says which run asked.\n",
        );
    }

    let claims: Vec<&Row> = f.rows.iter().filter(|r| r.claim_text().is_some()).collect();
    out.push_str("\n## DONE claims\n\n");
    if claims.is_empty() {
        out.push_str("The agent claimed DONE in no listed iteration.\n");
    }
    for r in claims {
        let _ = writeln!(
            out,
            "- iteration {}: {}",
            r.iteration,
            cell(&r.claim_text().unwrap_or_default())
        );
    }

    if !f.last_failure.is_empty() {
        out.push_str("\n## Last verify failure\n\n");
        for l in &f.last_failure {
            let _ = writeln!(out, "{l}");
        }
    }
    out.push_str("\n## Remaining work (notes.md)\n\n");
    if f.notes.is_empty() {
        out.push_str("notes.md is empty.\n");
    } else {
        for line in &f.notes {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

// ---- HTML

/// Escapes text for HTML element content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Colours: the same in the pictures, the legend and the tables.
pub const PASS: &str = "#2e9e4f";
pub const FAIL: &str = "#d64541";
pub const SKIP: &str = "#a0a0a0";
pub const TIMEOUT: &str = "#8e44ad";
pub const WARN: &str = "#e69a28";
/// A holdout check in an iteration it did not run in.
pub const HOLDOUT: &str = "#e3dcef";
const INK: &str = "#222222";
const GRID: &str = "#dddddd";

/// The colour of an iteration's bar: its verdict, with a timeout or a failing agent shown
/// as such.
fn outcome_colour(r: &Row) -> &'static str {
    match AgentOutcome::parse(&r.agent_outcome) {
        Some(AgentOutcome::Timeout) => return TIMEOUT,
        Some(AgentOutcome::AgentError | AgentOutcome::Permanent) => return FAIL,
        _ => {}
    }
    match Status::parse(&r.verdict) {
        Some(Status::Done) => PASS,
        Some(Status::Continue) => match r.verify {
            Some(VerifyOutcome::Pass) => "#7cc48f",
            Some(VerifyOutcome::Fail) => WARN,
            _ => SKIP,
        },
        Some(Status::Blocked | Status::Stalled | Status::Aborted) => FAIL,
        _ => SKIP,
    }
}

/// The colour of a verdict's badge (`orbit serve`'s overview uses it too).
pub fn verdict_colour(v: Verdict) -> &'static str {
    match v {
        Verdict::Done => PASS,
        Verdict::Running | Verdict::Idle | Verdict::Ready => "#3a7bd5",
        Verdict::Paused => WARN,
        _ => FAIL,
    }
}

fn svg_text(x: f64, y: f64, anchor: &str, size: u32, fill: &str, text: &str) -> String {
    format!(
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" font-size=\"{size}\" fill=\"{fill}\">{}</text>",
        esc(text)
    )
}

/// Duration bars, one row per iteration, coloured by outcome, with the attempts.
fn timeline_svg(f: &Facts) -> String {
    let rows = &f.rows;
    let (left, bar_w, row_h, top) = (70.0, 620.0, 22.0, 10.0);
    let width = left + bar_w + 200.0;
    let height = top + row_h * rows.len().max(1) as f64 + 10.0;
    let longest = rows
        .iter()
        .filter_map(|r| r.wall_secs)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut s = format!(
        "<svg class=\"timeline\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"iteration timeline\">"
    );
    if rows.is_empty() {
        s.push_str(&svg_text(
            left,
            top + 14.0,
            "start",
            13,
            INK,
            "no iteration recorded yet",
        ));
    }
    for (k, r) in rows.iter().enumerate() {
        let y = top + row_h * k as f64;
        let w = (r.wall_secs.unwrap_or(0) as f64 / longest * bar_w).max(3.0);
        let colour = outcome_colour(r);
        let tip = format!(
            "iteration {}: {} in {}, agent {}, {} attempt(s), verify {}",
            r.iteration,
            r.verdict,
            opt_duration(r.wall_secs),
            r.agent_text(),
            opt_num(r.attempts),
            r.verify_text()
        );
        s.push_str(&svg_text(
            left - 8.0,
            y + 15.0,
            "end",
            12,
            INK,
            &format!("#{}", r.iteration),
        ));
        let _ = write!(
            s,
            "<rect class=\"bar\" x=\"{left:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{colour}\" rx=\"2\"><title>{}</title></rect>",
            y + 3.0,
            row_h - 6.0,
            esc(&tip)
        );
        // One tick per attempt beyond the first, inside the bar's start.
        for a in 1..r.attempts.unwrap_or(1).min(10) {
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"2\" height=\"{:.1}\" fill=\"#ffffff\"/>",
                left + 4.0 * a as f64,
                y + 5.0,
                row_h - 10.0
            );
        }
        let label = format!(
            "{} {} ×{}",
            r.verdict,
            opt_duration(r.wall_secs),
            opt_num(r.attempts)
        );
        s.push_str(&svg_text(
            left + w + 6.0,
            y + 15.0,
            "start",
            11,
            INK,
            &label,
        ));
    }
    s.push_str("</svg>");
    s
}

/// The fill of a grid cell.
fn cell_colour(c: CheckCell) -> &'static str {
    match c {
        CheckCell::Pass => PASS,
        CheckCell::Fail => FAIL,
        CheckCell::Skip => SKIP,
        CheckCell::HoldoutNotRun => HOLDOUT,
        CheckCell::NotRecorded => "#ffffff",
    }
}

/// One row per check of the loop, one cell per iteration: pass, fail, skip (grey), a
/// holdout check not run in the iteration (pale), or nothing known (blank).
fn checks_svg(f: &Facts) -> String {
    let (cell_w, cell_h, top) = (22.0, 20.0, 24.0);
    // Room for the longest label (a name of 32 characters and its role), about 7px each.
    let longest = f
        .checks
        .iter()
        .map(|c| c.label().chars().count())
        .max()
        .unwrap_or(0);
    let left = (longest as f64 * 7.0 + 16.0).max(220.0);
    let cols = f.rows.len().max(1) as f64;
    let width = left + cell_w * cols + 10.0;
    let height = top + cell_h * f.checks.len().max(1) as f64 + 6.0;
    let mut s = format!(
        "<svg class=\"checks\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"checks by iteration\">"
    );
    for (c, r) in f.rows.iter().enumerate() {
        let x = left + cell_w * c as f64 + cell_w / 2.0;
        if f.rows.len() <= 40 || r.iteration % 5 == 0 {
            s.push_str(&svg_text(
                x,
                16.0,
                "middle",
                10,
                INK,
                &r.iteration.to_string(),
            ));
        }
    }
    for (k, check) in f.checks.iter().enumerate() {
        let y = top + cell_h * k as f64;
        s.push_str(&svg_text(
            left - 8.0,
            y + 14.0,
            "end",
            12,
            INK,
            &check.label(),
        ));
        for (c, r) in f.rows.iter().enumerate() {
            let x = left + cell_w * c as f64;
            let state = r.cell(check);
            let fill = cell_colour(state);
            let _ = write!(
                s,
                "<rect class=\"cell\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\" stroke=\"{GRID}\"><title>{}</title></rect>",
                x + 1.0,
                y + 1.0,
                cell_w - 2.0,
                cell_h - 2.0,
                esc(&format!(
                    "{}, iteration {}: {}",
                    check.name,
                    r.iteration,
                    state.word()
                ))
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// What the spend picture says instead of a curve when there is none to draw: no agent
/// run recorded a cost line, or every run's cost is unknown (the engine reports none).
fn no_spend_text(f: &Facts) -> Option<String> {
    let pts = &f.spend_curve;
    if pts.is_empty() {
        return Some("no agent run recorded a cost line".into());
    }
    let nothing_known = pts.iter().all(|p| p.unknown && p.cumulative == 0);
    nothing_known.then(|| {
        format!(
            "no cost reported: none of the {} agent run(s) gave a cost",
            f.unknown_runs
        )
    })
}

/// Cumulative spend by iteration, against the cap when there is one; without a cost to
/// draw, the words that say why (and the cap), never an axis of nothing.
fn spend_svg(f: &Facts) -> String {
    if let Some(why) = no_spend_text(f) {
        let cap = f
            .cap
            .map(|c| format!("cap ${}", goal::format_usd(c)))
            .unwrap_or_else(|| "no cap".into());
        return format!(
            "<svg class=\"spend\" width=\"830\" height=\"48\" viewBox=\"0 0 830 48\" role=\"img\" aria-label=\"spend against the cap\">{}{}</svg>",
            svg_text(10.0, 20.0, "start", 13, INK, &why),
            svg_text(10.0, 40.0, "start", 12, INK, &cap)
        );
    }
    let (left, top, plot_w, plot_h) = (80.0, 16.0, 600.0, 200.0);
    let width = left + plot_w + 150.0;
    let height = top + plot_h + 40.0;
    let pts = &f.spend_curve;
    let last = pts.last().map(|p| p.cumulative).unwrap_or(0);
    let highest = f.cap.unwrap_or(0).max(last).max(1);
    let ymax = highest as f64 * 1.1;
    let first_i = pts.first().map(|p| p.iteration).unwrap_or(1);
    let last_i = pts.last().map(|p| p.iteration).unwrap_or(1);
    let span = (last_i - first_i).max(1) as f64;
    let x_of = |i: u64| left + (i - first_i) as f64 / span * plot_w;
    let y_of = |m: u64| top + plot_h - m as f64 / ymax * plot_h;
    let mut s = format!(
        "<svg class=\"spend\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"spend against the cap\">"
    );
    let _ = write!(
        s,
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{b:.1}\" stroke=\"{INK}\"/><line x1=\"{left}\" y1=\"{b:.1}\" x2=\"{r:.1}\" y2=\"{b:.1}\" stroke=\"{INK}\"/>",
        b = top + plot_h,
        r = left + plot_w
    );
    s.push_str(&svg_text(
        left - 6.0,
        top + plot_h + 4.0,
        "end",
        11,
        INK,
        "$0",
    ));
    // The top of the scale, when there is an amount to scale to (a spend of $0 reported,
    // without a cap, has none: the axis is then only $0).
    if f.cap.unwrap_or(0).max(last) > 0 {
        s.push_str(&svg_text(
            left - 6.0,
            y_of(highest) + 4.0,
            "end",
            11,
            INK,
            &format!("${}", goal::format_usd(highest)),
        ));
    }
    if let Some(cap) = f.cap {
        let y = y_of(cap);
        let _ = write!(
            s,
            "<line class=\"cap\" x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{FAIL}\" stroke-dasharray=\"6 4\" stroke-width=\"2\"/>",
            left + plot_w
        );
        s.push_str(&svg_text(
            left + plot_w + 6.0,
            y + 4.0,
            "start",
            12,
            FAIL,
            &format!("cap ${}", goal::format_usd(cap)),
        ));
    } else {
        s.push_str(&svg_text(
            left + plot_w + 6.0,
            top + 12.0,
            "start",
            12,
            INK,
            "no cap",
        ));
    }
    let line: Vec<String> = pts
        .iter()
        .map(|p| format!("{:.1},{:.1}", x_of(p.iteration), y_of(p.cumulative)))
        .collect();
    let _ = write!(
        s,
        "<polyline class=\"curve\" points=\"{}\" fill=\"none\" stroke=\"#3a7bd5\" stroke-width=\"3\"/>",
        line.join(" ")
    );
    for p in pts {
        let (x, y) = (x_of(p.iteration), y_of(p.cumulative));
        let tip = format!(
            "after iteration {}: ${}{}",
            p.iteration,
            goal::format_usd(p.cumulative),
            if p.unknown {
                " reported, plus a run of unknown cost"
            } else {
                ""
            }
        );
        let fill = if p.unknown { "#ffffff" } else { "#3a7bd5" };
        let _ = write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{fill}\" stroke=\"#3a7bd5\" stroke-width=\"2\"><title>{}</title></circle>",
            esc(&tip)
        );
        if p.unknown {
            s.push_str(&svg_text(x, y - 9.0, "middle", 12, INK, "?"));
        }
        if pts.len() <= 30 || p.iteration % 10 == 0 {
            s.push_str(&svg_text(
                x,
                top + plot_h + 16.0,
                "middle",
                10,
                INK,
                &p.iteration.to_string(),
            ));
        }
    }
    s.push_str(&svg_text(
        left + plot_w / 2.0,
        top + plot_h + 34.0,
        "middle",
        11,
        INK,
        "iteration",
    ));
    s.push_str("</svg>");
    s
}

/// Files changed per iteration, as columns.
fn changed_svg(f: &Facts) -> String {
    let (left, top, col_w, plot_h) = (40.0, 16.0, 22.0, 100.0);
    let width = left + col_w * f.rows.len().max(1) as f64 + 20.0;
    let height = top + plot_h + 24.0;
    let most = f
        .rows
        .iter()
        .filter_map(|r| r.changed)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut s = format!(
        "<svg class=\"changed\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"changed files per iteration\">"
    );
    s.push_str(&svg_text(
        left - 6.0,
        top + 8.0,
        "end",
        10,
        INK,
        &format!("{most}"),
    ));
    s.push_str(&svg_text(left - 6.0, top + plot_h, "end", 10, INK, "0"));
    for (c, r) in f.rows.iter().enumerate() {
        let x = left + col_w * c as f64;
        let n = r.changed.unwrap_or(0);
        let h = n as f64 / most * plot_h;
        let _ = write!(
            s,
            "<rect class=\"col\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#5d6d7e\"><title>{}</title></rect>",
            x + 3.0,
            top + plot_h - h,
            col_w - 6.0,
            esc(&format!(
                "iteration {}: {} file(s) changed",
                r.iteration,
                opt_num(r.changed)
            ))
        );
        if f.rows.len() <= 40 || r.iteration % 5 == 0 {
            s.push_str(&svg_text(
                x + col_w / 2.0,
                top + plot_h + 14.0,
                "middle",
                10,
                INK,
                &r.iteration.to_string(),
            ));
        }
    }
    s.push_str("</svg>");
    s
}

fn legend(items: &[(&str, &str)]) -> String {
    let mut s = String::from("<p class=\"legend\">");
    for (colour, word) in items {
        let _ = write!(
            s,
            "<span><i style=\"background:{colour}\"></i>{}</span>",
            esc(word)
        );
    }
    s.push_str("</p>");
    s
}

/// The report page's style sheet (`orbit serve` sends it from its own path).
pub const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;margin:24px;max-width:1100px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}\
.badge{display:inline-block;color:#fff;border-radius:4px;padding:2px 10px;font-weight:600}\
dl{display:grid;grid-template-columns:max-content auto;gap:4px 16px;margin:12px 0}dt{color:#666}dd{margin:0}\
.stop{border-left:5px solid;padding:8px 14px;background:#f7f7f7}\
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}code.next{background:#222;color:#fff;padding:3px 8px;border-radius:3px}code.work{background:#eee;padding:2px 6px;border-radius:3px}\
pre{background:#f7f7f7;padding:8px;overflow-x:auto}\
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f0f0f0}\
.legend span{margin-right:14px;font-size:12px}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}\
svg text{font-family:system-ui,sans-serif}";

/// The HTML report of a loop: one file, no network resource.
pub fn report_html(dir: &Path, shown: &str) -> Result<String> {
    Ok(render_html(&facts(dir, shown)?))
}

/// The HTML page of a set of facts.
pub fn render_html(f: &Facts) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>orbit report: {}</title><style>{STYLE}</style></head><body>\n{}</body></html>\n",
        esc(&f.name),
        render_html_body(f)
    )
}

/// The report's content: what goes inside the page's body (`orbit serve` puts it in its
/// loop page).
pub fn render_html_body(f: &Facts) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<h1>orbit report: {} <span class=\"badge verdict\" style=\"background:{}\">{}</span></h1>\n<p class=\"goal\">{}</p>\n",
        esc(&f.name),
        verdict_colour(f.verdict),
        f.verdict,
        esc(&f.goal)
    );
    h.push_str("<dl>");
    let mut item = |k: &str, v: String| {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&v));
    };
    item("verdict", f.verdict.to_string());
    item(
        "status",
        format!("{} (stop reason: {})", f.status, f.stop_reason),
    );
    item(
        "iterations",
        format!("{} of at most {}", f.iterations, f.max_iterations),
    );
    item("time", f.time_text());
    item("spend", f.spend_text());
    if let Some(t) = f.tokens_text() {
        item("tokens", t);
    }
    if let Some((iter, origin)) = &f.branch {
        item(
            "branch",
            format!(
                "{iter} (from {})",
                if origin.is_empty() {
                    "a detached HEAD"
                } else {
                    origin
                }
            ),
        );
    }
    if let Some(ws) = &f.workspace {
        item("workspace", ws.clone());
    }
    if let Some(sandbox) = f.sandbox {
        item("sandbox", sandbox.to_string());
    }
    if let Some(e) = &f.envelope {
        item("hand-off", e.line());
    }
    if let Some(a) = &f.adequacy {
        item("adequacy", a.summary());
        let (hunks, loose) = a.marked();
        for (what, at, survivors) in hunks.iter().take(40) {
            let mark = if what == "a hunk the checks need" {
                "needed"
            } else if what == "a hunk no check needs" {
                "not needed"
            } else {
                "not tried"
            };
            item(mark, at.clone());
            for m in survivors.iter().take(20) {
                item("survived", m.clone());
            }
        }
        for m in loose.iter().take(20) {
            item("survived", m.clone());
        }
    }
    h.push_str("</dl>\n");

    let work: String = f
        .work
        .iter()
        .map(|(what, cmd)| {
            format!(
                "<p>{}: <code class=\"work\">{}</code></p>",
                esc(what),
                esc(cmd)
            )
        })
        .collect();
    let _ = write!(
        h,
        "<h2>Why it stopped</h2>\n<div class=\"stop\" style=\"border-color:{}\"><p>{}</p><p>next: <code class=\"next\">{}</code></p><p>{}</p>{work}</div>\n",
        verdict_colour(f.verdict),
        esc(&f.stop_text()),
        esc(&f.next),
        esc(&f.next_why)
    );

    h.push_str("<h2>Timeline</h2>\n");
    h.push_str(&legend(&[
        (PASS, "DONE"),
        ("#7cc48f", "verify passed"),
        (WARN, "verify failed"),
        (FAIL, "blocked, stalled, aborted or the agent failed"),
        (TIMEOUT, "the agent timed out"),
        (SKIP, "other"),
    ]));
    h.push_str(&timeline_svg(f));
    h.push_str("\n<h2>Checks</h2>\n");
    let mut kinds = vec![(PASS, "pass"), (FAIL, "fail"), (SKIP, "skipped")];
    if f.checks
        .iter()
        .any(|c| c.role == crate::render::ROLE_HOLDOUT)
    {
        kinds.push((HOLDOUT, "holdout, not run"));
    }
    h.push_str(&legend(&kinds));
    h.push_str(&checks_svg(f));
    if !f.test_counts.is_empty() {
        let _ = write!(
            h,
            "\n<h2>Test counts</h2>\n<p>{}</p>\n<table class=\"counts\"><tr><th>check</th><th>base tree ran</th><th>ran</th><th>passed</th><th>failed</th><th>skipped</th><th>verdict</th></tr>\n",
            esc(&f.counts_text())
        );
        for (r, c) in f.count_rows().iter().zip(&f.test_counts) {
            let colour = match c.latest.verdict {
                crate::counts::CountVerdict::Held => PASS,
                crate::counts::CountVerdict::Allowed => WARN,
                _ => FAIL,
            };
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td style=\"color:{colour}\">{}</td></tr>",
                esc(&r[0]),
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                esc(&r[6])
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("\n<h2>Spend</h2>\n");
    let _ = write!(h, "<p>{}</p>", esc(&f.spend_text()));
    h.push_str(&spend_svg(f));
    let refused = f.net_refused_rows();
    if !refused.is_empty() {
        h.push_str("\n<h2>Refused by the sandbox's network</h2>\n<ul>");
        for r in refused {
            let _ = write!(
                h,
                "<li>iteration {}: {}</li>",
                r.iteration,
                esc(&r.net_refused.join(", "))
            );
        }
        h.push_str("</ul>\n");
    }
    h.push_str("\n<h2>DONE gate</h2>\n");
    let claims: Vec<&Row> = f.rows.iter().filter(|r| r.claim_text().is_some()).collect();
    if claims.is_empty() {
        h.push_str("<p>The agent claimed DONE in no listed iteration.</p>\n");
    } else {
        h.push_str("<table class=\"claims\"><tr><th>iteration</th><th>decision</th></tr>");
        for r in claims {
            let text = r.claim_text().unwrap_or_default();
            let colour = if r.done_verdict == Status::Done.as_str() {
                PASS
            } else {
                FAIL
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td style=\"color:{colour}\">{}</td></tr>",
                r.iteration,
                esc(&text)
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("<h2>Changed files</h2>\n");
    h.push_str(&changed_svg(f));

    h.push_str("\n<h2>Iterations</h2>\n");
    if f.earlier > 0 {
        let _ = write!(
            h,
            "<p>{} earlier iteration(s) are in progress.md.</p>",
            f.earlier
        );
    }
    h.push_str("<table class=\"iterations\"><tr><th>#</th><th>started (UTC)</th><th>time</th><th>agent time</th><th>verdict</th><th>attempts</th><th>agent</th><th>verify</th><th>changed</th><th>cost</th><th>DONE claim</th><th>commit</th><th>summary</th><th>agent's last message</th></tr>\n");
    for r in &f.rows {
        let cells = [
            r.iteration.to_string(),
            r.started_at.map(fsx::iso_utc).unwrap_or_else(|| "-".into()),
            opt_duration(r.wall_secs),
            opt_duration(r.agent_secs),
            r.verdict.clone(),
            opt_num(r.attempts),
            r.agent_text(),
            r.verify_text(),
            opt_num(r.changed),
            r.cost.text(),
            r.claim_text().unwrap_or_default(),
            r.commit.clone(),
            r.summary.clone(),
            r.last_message.clone(),
        ];
        h.push_str("<tr>");
        for c in cells {
            let _ = write!(h, "<td>{}</td>", esc(&c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    if let Some(t) = f.selection_text() {
        h.push_str("<h2>Candidates</h2>\n");
        let _ = writeln!(h, "<p class=\"selection\">{}</p>", esc(&t));
        for r in f.rows.iter().filter(|r| !r.candidates.is_empty()) {
            let _ = write!(
                h,
                "<h3>Iteration {}</h3>\n<table class=\"candidates\"><tr><th>candidate</th><th>outcome</th><th>checks passed</th><th>holdout</th><th>judge</th><th>changed files</th><th>disqualified</th><th>survivor</th><th>review</th></tr>\n",
                r.iteration
            );
            for c in &r.candidates {
                let cells = [
                    c.candidate.to_string(),
                    c.outcome.clone(),
                    c.checks_text(),
                    c.holdout.clone(),
                    c.judge.clone(),
                    opt_num(c.changed),
                    c.disqualified.clone(),
                    if c.survivor {
                        "yes".into()
                    } else {
                        String::new()
                    },
                ];
                h.push_str("<tr>");
                for v in cells {
                    let _ = write!(h, "<td>{}</td>", esc(&v));
                }
                let _ = write!(h, "<td><code>{}</code></td>", esc(&c.review));
                h.push_str("</tr>\n");
            }
            h.push_str("</table>\n");
        }
    }
    if !f.last_failure.is_empty() {
        let _ = write!(
            h,
            "<h2>Last verify failure</h2>\n<pre>{}</pre>\n",
            esc(&f.last_failure.join("\n"))
        );
    }
    h.push_str("<h2>Remaining work (notes.md)</h2>\n");
    if f.notes.is_empty() {
        h.push_str("<p>notes.md is empty.</p>\n");
    } else {
        let _ = writeln!(h, "<pre>{}</pre>", esc(&f.notes.join("\n")));
    }
    h
}

/// How commands name the loop: as given, or relative to the current directory.
fn shown_dir(given: Option<&Path>, dir: &Path) -> String {
    if let Some(d) = given {
        return d.display().to_string();
    }
    let cwd = std::env::current_dir().ok();
    let base = cwd
        .as_deref()
        .map(|c| fs::canonicalize(c).unwrap_or_else(|_| c.to_path_buf()));
    let rel: PathBuf = base
        .and_then(|b| dir.strip_prefix(&b).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| dir.to_path_buf());
    rel.display().to_string()
}

/// `orbit report`.
pub fn report(args: &ReportArgs) -> Result<u8> {
    let text = if args.queue {
        crate::queue::report::text(args.json)?
    } else {
        loop_report(args)?
    };
    match &args.output {
        Some(path) => {
            fsx::write_atomic(path, text.as_bytes())?;
            println!("orbit: report written to {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(0)
}

/// The report of one loop, as `args` asks for it.
fn loop_report(args: &ReportArgs) -> Result<String> {
    let dir = pick_loop(args.dir.as_deref())?;
    let shown = shown_dir(args.dir.as_deref(), &dir);
    let f = facts(&dir, &shown)?;
    Ok(if args.html {
        render_html(&f)
    } else if args.json {
        render_json(&f)
    } else {
        render_text(&f)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fan_out_iteration_falls_in_exactly_one_selection_bucket() {
        let cand = |passed: u64, survivor: bool, holdout: &str| CandidateRow {
            candidate: 1,
            outcome: "ok".into(),
            checks_passed: Some(passed),
            checks_total: Some(2),
            survivor,
            holdout: holdout.into(),
            ..CandidateRow::default()
        };
        let row = |candidates: Vec<CandidateRow>| Row {
            candidates,
            ..Row::default()
        };
        let rows = vec![
            row(vec![]),
            // Only the survivor passed.
            row(vec![cand(2, true, "pass"), cand(1, false, "")]),
            // Two passed; the one without the holdout's pass is not the survivor.
            row(vec![cand(2, false, "fail"), cand(2, true, "pass")]),
            // One passed the visible checks, its holdout checks kept it out.
            row(vec![cand(2, false, "fail"), cand(0, false, "")]),
            // None passed.
            row(vec![cand(1, false, ""), cand(0, false, "")]),
        ];
        let s = Selection::of(&rows).unwrap();
        assert_eq!(s.iterations, 4);
        assert_eq!(s.candidates, 8);
        assert_eq!(s.passed_visible, 4);
        assert_eq!((s.holdout_run, s.passed_holdout), (4, 2));
        assert_eq!(s.only_survivor_passed, 1);
        assert_eq!(s.several_passed, 1);
        assert_eq!(s.one_passed_not_taken, 1);
        assert_eq!(s.none_passed, 1);
        assert_eq!(
            s.only_survivor_passed + s.several_passed + s.one_passed_not_taken + s.none_passed,
            s.iterations
        );
        assert_eq!(Selection::of(&rows[..1]), None);
    }

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<script>alert(\"x\")</script> & 'y'"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    fn record(text: &str) -> Row {
        let r = result_env::parse(text.as_bytes()).unwrap();
        Row::from_record(
            r.num("ITERATION").unwrap_or(1),
            &r,
            String::new(),
            String::new(),
        )
    }

    #[test]
    fn the_last_holdout_run_of_a_log_decides_each_holdout_check() {
        let log = "### holdout run: iteration 2 (x)\n==> check holdout-1 [holdout]: cmd\n[FAIL] holdout-1 (exit 1)\n==> check holdout-2 [holdout]: cmd\n[PASS] holdout-2\n1 passed, 1 failed\n\
                   ### holdout run: iteration 2 (y)\n[PASS] holdout-1\n[FAIL] holdout-10 (exit 1)\n[PASS] holdout-x\n";
        let run = HoldoutRun::last_of(log);
        assert_eq!(
            run.checks,
            BTreeMap::from([("holdout-1".into(), true), ("holdout-10".into(), false)])
        );
        assert!(!run.failed);
        let check = |name: &str| CheckLine {
            name: name.into(),
            role: crate::render::ROLE_HOLDOUT,
        };
        let mut row = Row {
            holdout: Some(run),
            ..Row::default()
        };
        assert_eq!(row.cell(&check("holdout-1")), CheckCell::Pass);
        assert_eq!(row.cell(&check("holdout-10")), CheckCell::Fail);
        assert_eq!(row.cell(&check("holdout-2")), CheckCell::NotRecorded);
        // A run that timed out: a check without its own line did not pass.
        let timed_out = HoldoutRun::last_of(
            "### holdout run: iteration 3 (z)\n[PASS] holdout-1\n[FAIL] holdout.sh (timed out after 9s)\n",
        );
        assert!(timed_out.failed);
        row.holdout = Some(timed_out);
        assert_eq!(row.cell(&check("holdout-1")), CheckCell::Pass);
        assert_eq!(row.cell(&check("holdout-2")), CheckCell::Fail);
        // A run that could not start is a run of its own, after the last one.
        let not_run = HoldoutRun::last_of(
            "### holdout run: iteration 3 (z)\n[PASS] holdout-1\n[FAIL] holdout.sh (not run: the loop's wall-clock limit, 1h, is reached)\n",
        );
        assert!(not_run.failed && not_run.checks.is_empty());
        row.holdout = None;
        assert_eq!(row.cell(&check("holdout-1")), CheckCell::HoldoutNotRun);
        assert_eq!(
            CheckLine {
                name: "unit".into(),
                role: crate::render::ROLE_ACCEPTANCE
            }
            .label(),
            "unit"
        );
        assert_eq!(check("holdout-1").label(), "holdout-1 [holdout]");
    }

    #[test]
    fn a_timeout_an_unknown_cost_and_a_rejected_claim_are_said_plainly() {
        let r = record(
            "ITERATION=4\nSTARTED_AT=100\nENDED_AT=190\nAGENT_EXIT=124\nAGENT_OUTCOME=timeout\nATTEMPTS=3\nDURATION=80\nVERIFY=fail\nVERIFY_FAILING=unit,lint\nCOST_MICROUSD=0\nCOST_KIND=unknown\nDONE_CLAIM=1\nDONE_VERDICT=verify failed\nVERDICT=CONTINUE\n",
        );
        assert_eq!(r.agent_text(), "timeout (exit 124)");
        assert_eq!(r.wall_secs, Some(90));
        assert_eq!(r.cost, Cost::Unknown);
        assert_eq!(r.cost.text(), "unknown");
        assert_eq!(r.claim_text().unwrap(), "rejected: verify failed");
        assert_eq!(r.verify_text(), "fail: unit,lint");
        assert_eq!(r.check("unit"), Some(VerifyOutcome::Fail));
        assert_eq!(r.check("docs"), Some(VerifyOutcome::Pass));
        assert_eq!(outcome_colour(&r), TIMEOUT);
        let skipped = record("VERIFY=skip\nVERDICT=ABORTED\n");
        assert_eq!(skipped.check("unit"), Some(VerifyOutcome::Skip));
        assert_eq!(skipped.cost, Cost::NotRecorded);
        assert_eq!(skipped.claim_text(), None);
        let done =
            record("COST_MICROUSD=250000\nCOST_KIND=reported\nDONE_CLAIM=1\nDONE_VERDICT=DONE\n");
        assert_eq!(done.cost.text(), "$0.25 (reported)");
        assert_eq!(done.claim_text().unwrap(), "accepted: DONE");
    }
}
