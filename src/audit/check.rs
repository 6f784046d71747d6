//! From the files of one loop to a verdict and findings. Read-only throughout.

use std::fs;
use std::path::{Path, PathBuf};

use super::keys::{result_key, state_key};
use super::runner_log;
use super::tail::{self, Window};
use super::{Finding, LoopReport, Severity, Summary};
use crate::config::LoopConfig;
use crate::contract::{
    CbState, CostKind, EventName, FindingClass, Status, StopReason, Verdict, VerifyOutcome,
};
use crate::events::{self, ChainError, Event};
use crate::goal::{format_usd, parse_duration};
use crate::ledger;
use crate::locate::probe::{self, Lock};
use crate::pins;
use crate::progress::{self, EntryKind};
use crate::result_env::{self, ResultEnv};
use crate::sigs;
use crate::state::{self, Sidecar, State};

/// The tail of events.jsonl the chain is verified over.
pub const EVENTS_WINDOW_BYTES: u64 = 4 << 20;
/// At most this many of the last events are verified and read.
pub const EVENTS_WINDOW_LINES: usize = 5000;
const PROGRESS_WINDOW_BYTES: u64 = 1 << 20;
const RUNNER_LOG_WINDOW_BYTES: u64 = 256 << 10;
const SIGS_WINDOW_BYTES: u64 = 16 << 10;
/// cost.ledger is summed in full up to this size (about a million agent runs).
const LEDGER_MAX_BYTES: u64 = 32 << 20;

/// Files a loop directory must hold (contract section 3).
const REQUIRED: [&str; 11] = [
    "goal.md",
    "loop.toml",
    "prompt.md",
    "verify.sh",
    "run-loop.sh",
    "recover.sh",
    "notify.sh",
    "state.env",
    "state.env.sha256",
    "pins.sha256",
    "progress.md",
];

/// The findings of one loop, with the loop's name for fix commands.
struct Audit<'a> {
    shown: &'a str,
    findings: Vec<Finding>,
}

impl Audit<'_> {
    fn add(
        &mut self,
        class: FindingClass,
        severity: Severity,
        evidence: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.findings.push(Finding {
            class,
            severity,
            evidence: evidence.into(),
            message: message.into(),
            fix: fix.into(),
        });
    }

    fn recover(&self, flag: &str) -> String {
        if flag.is_empty() {
            format!("orbit recover {}", self.shown)
        } else {
            format!("orbit recover {} {flag}", self.shown)
        }
    }
}

/// state.env and its sidecar as read together.
enum StateRead {
    Ok {
        state: Box<State>,
        text: String,
        torn: Option<u64>,
    },
    Missing,
    Bad {
        evidence: String,
        message: String,
    },
}

fn read_state(dir: &Path, running: bool) -> StateRead {
    // state.env and its sidecar are two renames apart: a live runner writing between the
    // two reads looks torn for a moment, so a mismatch is read again before it is believed.
    let mut last = StateRead::Missing;
    for attempt in 0..if running { 4 } else { 1 } {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(60));
        }
        last = read_state_once(dir);
        match &last {
            StateRead::Ok { torn: None, .. } | StateRead::Missing => return last,
            _ => {}
        }
    }
    last
}

fn read_state_once(dir: &Path) -> StateRead {
    let Ok(bytes) = fs::read(dir.join("state.env")) else {
        return StateRead::Missing;
    };
    let state = match State::parse(&bytes) {
        Ok(s) => s,
        Err((line, message)) => {
            return StateRead::Bad {
                evidence: format!("state.env:{line}"),
                message: format!("state.env cannot be read: {message}"),
            };
        }
    };
    let Ok(side) = fs::read(dir.join("state.env.sha256")) else {
        return StateRead::Missing;
    };
    let sidecar = match Sidecar::parse(&side) {
        Ok(s) => s,
        Err((line, message)) => {
            return StateRead::Bad {
                evidence: format!("state.env.sha256:{line}"),
                message: format!("state.env.sha256 cannot be read: {message}"),
            };
        }
    };
    let hash = crate::fsx::sha256_hex(&bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if hash == sidecar.sha256 && sidecar.generation == state.generation {
        return StateRead::Ok {
            state: Box::new(state),
            text,
            torn: None,
        };
    }
    if hash != sidecar.sha256 && sidecar.generation + 1 == state.generation {
        return StateRead::Ok {
            state: Box::new(state),
            text,
            torn: Some(sidecar.generation),
        };
    }
    StateRead::Bad {
        evidence: "state.env.sha256:1".into(),
        message: format!(
            "state.env does not match its sidecar (state gen {}, sidecar gen {}): edited or replaced; the runner refuses it (exit 4)",
            state.generation, sidecar.generation
        ),
    }
}

/// The 1-based line of a `key =` setting in loop.toml.
fn toml_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with('='))
        })
        .map_or(1, |i| i + 1)
}

fn iter_rel(n: u64) -> String {
    format!("iterations/{n:06}")
}

/// The events of a tail window, verified as a chain from the window's first line.
struct EventsWindow {
    window: Window,
    events: Vec<Event>,
    /// The first break in the chain (a torn last line aside), at its window index.
    error: Option<(usize, ChainError)>,
    torn_tail: bool,
}

fn read_events(dir: &Path) -> Option<EventsWindow> {
    let mut window = tail::read_tail(&dir.join("events.jsonl"), EVENTS_WINDOW_BYTES).ok()?;
    window.keep_last_lines(EVENTS_WINDOW_LINES);
    let journal = if window.whole {
        events::read(&window.bytes)
    } else {
        events::read_tail(&window.bytes)
    };
    let error = journal
        .error
        .filter(|e| !matches!(e, ChainError::TornTail { .. }))
        .map(|e| (e.line() - 1, e));
    // Without a counted line number, an intact chain numbers its lines by seq.
    if window.first_line.is_none()
        && let Some(first) = journal.events.first()
        && error.is_none()
        && first.seq as usize >= first.line
    {
        window.first_line = Some(first.seq as usize + 1 - first.line);
    }
    Some(EventsWindow {
        window,
        events: journal.events,
        error,
        torn_tail: journal.torn_tail,
    })
}

impl EventsWindow {
    fn evidence(&self, k: usize) -> String {
        self.window
            .evidence("events.jsonl", self.events[k].line - 1)
    }

    fn str_field<'e>(e: &'e Event, key: &str) -> &'e str {
        e.value.get(key).and_then(|v| v.as_str()).unwrap_or("")
    }

    fn u64_field(e: &Event, key: &str) -> Option<u64> {
        e.value.get(key).and_then(|v| v.as_u64())
    }

    fn last_pos(&self, name: EventName) -> Option<usize> {
        self.events.iter().rposition(|e| e.is(name))
    }
}

/// progress.md's tail: closed entries verified as a chain from the first marker in the
/// window.
struct ProgressTail {
    window: Window,
    entries: Vec<progress::Entry>,
    /// Window-relative 0-based line of the first broken entry.
    broken: Option<usize>,
    torn: Option<usize>,
    stray: Vec<usize>,
}

fn read_progress(dir: &Path) -> Option<ProgressTail> {
    let window = tail::read_tail(&dir.join("progress.md"), PROGRESS_WINDOW_BYTES).ok()?;
    // In a partial window the chain is anchored on the first marker seen.
    let parsed = if window.whole {
        progress::parse(&window.bytes)
    } else {
        progress::parse_tail(&window.bytes)?
    };
    Some(ProgressTail {
        broken: parsed.first_broken().map(|e| e.line - 1),
        torn: parsed.torn_tail_line.map(|l| l - 1),
        stray: parsed.stray_lines.iter().map(|l| l - 1).collect(),
        entries: parsed.entries,
        window,
    })
}

impl ProgressTail {
    /// The highest iteration with a closed entry that records an outcome (not an
    /// interruption), and its window line.
    fn last_recorded(&self) -> Option<(u64, String, usize)> {
        self.entries
            .iter()
            .rev()
            .find_map(|e| match (&e.kind, &e.marker) {
                (EntryKind::Iteration { number, status }, Some(_))
                    if *number > 0 && status != progress::INTERRUPTED =>
                {
                    Some((*number, status.clone(), e.line - 1))
                }
                _ => None,
            })
    }
}

fn read_result(dir: &Path, n: u64) -> Option<Result<ResultEnv, (usize, String)>> {
    let bytes = fs::read(dir.join(iter_rel(n)).join("result.env")).ok()?;
    Some(result_env::parse(&bytes))
}

/// Whether an iteration directory holds files of an attempt (interrupted.K/ dirs aside).
fn has_attempt_files(dir: &Path) -> bool {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .any(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        })
        .unwrap_or(false)
}

fn mtime(path: &Path) -> Option<u64> {
    fs::metadata(path)
        .ok()?
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// `s` as it can be pasted into a shell: as it is when it holds only safe characters, else
/// quoted.
fn shell_word(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-+=:@,%".contains(c));
    if safe {
        s.to_string()
    } else {
        // A path holds no NUL, so quoting cannot fail.
        crate::shell::quote(&s.replace('\0', "")).unwrap_or_default()
    }
}

/// Audits one loop directory. `name` is how reports and fix commands name it.
pub fn audit_loop(dir: &Path, name: &str) -> LoopReport {
    // Fix commands name the directory as one shell word.
    let quoted = shell_word(name);
    let shown = quoted.as_str();
    let mut a = Audit {
        shown,
        findings: Vec::new(),
    };
    let canonical = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());

    // ---- the contract's files
    for f in REQUIRED {
        if !dir.join(f).is_file() {
            let fix = match f {
                "state.env" | "state.env.sha256" | "progress.md" => a.recover(""),
                "goal.md" | "prompt.md" | "verify.sh" | "run-loop.sh" | "recover.sh"
                | "notify.sh" | "loop.toml" => a.recover("--restore-pinned"),
                _ => a.recover("--repin"),
            };
            a.add(
                FindingClass::ContractMissing,
                Severity::P1,
                format!("{f}:0"),
                format!("{f} is missing: the runner refuses to start without it"),
                fix,
            );
        }
    }

    // ---- settings
    let toml_text = fs::read_to_string(dir.join("loop.toml")).unwrap_or_default();
    let cfg = match LoopConfig::load(&dir.join("loop.toml")) {
        Ok(c) => Some(c),
        Err(e) if dir.join("loop.toml").is_file() => {
            a.add(
                FindingClass::ContractMissing,
                Severity::P1,
                "loop.toml:1",
                format!("loop.toml cannot be used: {e}"),
                a.recover("--restore-pinned"),
            );
            None
        }
        Err(_) => None,
    };

    // ---- liveness
    let lock = probe::lock(&canonical);
    let mut runner_pid = match lock {
        Lock::Runner { pid, .. } => Some(pid),
        _ => None,
    };
    match &lock {
        Lock::StaleDir { owner } => a.add(
            FindingClass::StaleLock,
            Severity::P1,
            ".run-loop.lock.d/owner:1",
            format!(
                "the mkdir lock's owner ('{}') is no longer running; orbit recover refuses while the directory exists",
                owner.escape_debug()
            ),
            format!("rm -r {shown}/.run-loop.lock.d"),
        ),
        Lock::StrayHolder { pid, cmdline } => a.add(
            FindingClass::StaleLock,
            Severity::P1,
            ".run-loop.lock:0",
            format!(
                "process {pid} ({}) holds the runner's lock but is not a runner: no run can start",
                cmdline.chars().take(80).collect::<String>()
            ),
            format!("kill {pid}"),
        ),
        _ => {}
    }

    // ---- state
    let events = read_events(dir);
    if runner_pid.is_none() && matches!(lock, Lock::Unknown) {
        // Without /proc/locks: a loop_start with no loop_stop after it, from a live pid.
        if let Some(ev) = &events
            && let Some(s) = ev.last_pos(EventName::LoopStart)
            && !ev.events[s..].iter().any(|e| e.is(EventName::LoopStop))
            && let Some(pid) = EventsWindow::u64_field(&ev.events[s], "pid")
            && probe::alive(pid as u32)
        {
            runner_pid = Some(pid as u32);
        }
    }
    let running = runner_pid.is_some();
    let state_read = read_state(dir, running);

    let mut summary = Summary {
        name: cfg.as_ref().map(|c| c.name.clone()).unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        }),
        max_iterations: cfg.as_ref().map(|c| c.max_iterations),
        usd_cap_microusd: cfg.as_ref().and_then(|c| LoopConfig::usd_micro(c.usd_cap)),
        ..Summary::default()
    };
    summary.last_activity = ["events.jsonl", "state.env", "runner.log", "progress.md"]
        .iter()
        .filter_map(|f| mtime(&dir.join(f)))
        .max();

    let (state, state_text) = match state_read {
        StateRead::Ok { state, text, torn } => {
            if let Some(side_gen) = torn {
                a.add(
                    FindingClass::TornCheckpoint,
                    Severity::P1,
                    "state.env.sha256:2",
                    format!(
                        "the sidecar is one generation behind state.env (gen {side_gen} vs {}): a write was cut between the two; repairable, not tampering",
                        state.generation
                    ),
                    a.recover(""),
                );
            }
            (Some(*state), text)
        }
        StateRead::Missing => (None, String::new()),
        StateRead::Bad { evidence, message } => {
            a.add(
                FindingClass::StateDrift,
                Severity::P1,
                evidence,
                message,
                a.recover(""),
            );
            (None, String::new())
        }
    };

    // ---- integrity pins
    check_pins(&mut a, dir, state.as_ref(), &state_text);

    // ---- the journals
    if let Some(ev) = &events {
        check_events(&mut a, ev, running, state.as_ref());
    } else if state.as_ref().is_some_and(|s| s.started_at > 0) {
        a.add(
            FindingClass::ContractMissing,
            Severity::P1,
            "events.jsonl:0",
            "events.jsonl is missing although the loop has run: its history cannot be checked",
            a.recover(""),
        );
    }
    let progress = read_progress(dir);
    if let Some(p) = &progress {
        check_progress(&mut a, p, running);
    }

    // ---- the runner's own log
    if let Ok(w) = tail::read_tail(&dir.join("runner.log"), RUNNER_LOG_WINDOW_BYTES) {
        let lines = runner_log::parse(&w.bytes);
        if !running && let Some(l) = runner_log::last_unresolved_failure(&lines) {
            a.add(
                FindingClass::ToolFailure,
                Severity::P1,
                w.evidence("runner.log", l.index),
                format!(
                    "the last run failed: {}; fix the cause, then run the loop again",
                    failure_text(&l.message)
                ),
                format!("orbit run {shown}"),
            );
        }
    }

    // ---- the verifier
    check_validator(&mut a, dir, cfg.as_ref());

    // ---- settings that leave the loop without a terminator
    let done = matches!(&state, Some(s) if s.last_status == Status::Done);
    if let Some(c) = &cfg
        && !done
        && c.usd_cap.is_none()
        && parse_duration("loop-timeout", &c.loop_timeout).unwrap_or(0) == 0
    {
        a.add(
            FindingClass::UnboundedLoop,
            Severity::P2,
            format!("loop.toml:{}", toml_line(&toml_text, "loop-timeout")),
            format!(
                "no loop-timeout and no usd-cap: only max-iterations ({}) bounds this loop's time and spend",
                c.max_iterations
            ),
            format!(
                "set usd-cap (e.g. usd-cap = 20.0) or loop-timeout (e.g. \"8h\") in {shown}/loop.toml, then orbit init --force --dir {shown}"
            ),
        );
    }

    let Some(state) = state else {
        let verdict = if running {
            Verdict::Running
        } else {
            Verdict::Corrupt
        };
        return LoopReport {
            dir: name.to_string(),
            verdict,
            status: None,
            iteration: None,
            stop_reason: None,
            findings: a.findings,
            summary,
        };
    };
    let next = state.next_iteration;
    let last_done = next.saturating_sub(1);

    // ---- spend
    let ledger = check_spend(&mut a, dir, cfg.as_ref(), &state, &state_text, running);
    summary.spent_microusd = Some(
        ledger
            .unwrap_or(state.cost_microusd)
            .max(state.cost_microusd),
    );

    // ---- the last iterations' records
    let last_result = if last_done >= 1 {
        read_result(dir, last_done)
    } else {
        None
    };
    if let Some(Err((line, msg))) = &last_result {
        a.add(
            FindingClass::StateDrift,
            Severity::P1,
            format!("{}/result.env:{line}", iter_rel(last_done)),
            format!("iteration {last_done}'s record cannot be read: {msg}"),
            a.recover(""),
        );
    }
    let last_result = last_result.and_then(Result::ok);
    summary.last_verify = last_result
        .as_ref()
        .and_then(|r| VerifyOutcome::parse(r.get(result_key::VERIFY)));
    check_commits(&mut a, dir, last_done);

    // ---- crash evidence
    // A recovery after everything else, matching the checkpoint, has dealt with the crash:
    // a recorded iteration it left pending is completed by the next run.
    let recovered = events
        .as_ref()
        .and_then(|ev| ev.events.last())
        .is_some_and(|e| {
            e.is(EventName::Recovery)
                && EventsWindow::u64_field(e, "gen") == Some(state.generation)
                && EventsWindow::u64_field(e, "next_iteration") == Some(next)
        });
    let mut crashed: Option<(String, String)> = None;
    let pending = read_result(dir, next).and_then(Result::ok);
    if !running && !recovered {
        let next_dir = dir.join(iter_rel(next));
        let stopped_by_signal = state.stop_reason == StopReason::Signal
            && events
                .as_ref()
                .and_then(|e| e.events.last())
                .is_some_and(|e| e.is(EventName::LoopStop));
        // The journal shows the checkpoint already moved past `next`: an edited state,
        // not a crash (reported as STATE_DRIFT).
        let journal_ahead = events.as_ref().is_some_and(|ev| {
            ev.last_pos(EventName::StateWrite).is_some_and(|k| {
                EventsWindow::u64_field(&ev.events[k], "next_iteration").unwrap_or(0) > next
            })
        });
        if pending.is_some() && state.last_status != Status::Aborted && !journal_ahead {
            crashed = Some((
                format!("{}/result.env:1", iter_rel(next)),
                format!(
                    "iteration {next} was recorded (result.env) but never checkpointed: the runner died while finishing it"
                ),
            ));
        } else if pending.is_none() && has_attempt_files(&next_dir) && !stopped_by_signal {
            let first_file = ["prompt.md", "agent.log", "verify.log"]
                .into_iter()
                .find(|f| next_dir.join(f).is_file())
                .unwrap_or("prompt.md");
            crashed = Some((
                format!("{}/{first_file}:1", iter_rel(next)),
                format!(
                    "iteration {next} started ({}/) but has no result.env, and no runner is alive: it died mid-iteration",
                    iter_rel(next)
                ),
            ));
        } else if let Some(ev) = &events
            && let Some(s) = ev.last_pos(EventName::IterationStart)
        {
            let it = ev.events[s].iteration;
            let ended = ev.events[s..].iter().any(|e| {
                e.is(EventName::LoopStop) || (e.is(EventName::IterationEnd) && e.iteration == it)
            });
            if !ended {
                crashed = Some((
                    ev.evidence(s),
                    format!(
                        "iteration {it} started and neither ended nor stopped, and no runner is alive: it died mid-iteration"
                    ),
                ));
            }
        }
    }
    if let Some((evidence, message)) = &crashed {
        a.add(
            FindingClass::Crashed,
            Severity::P1,
            evidence.clone(),
            format!("{message} (a rerun also resumes it)"),
            a.recover(""),
        );
    }

    // ---- the runner gone, its agents still here
    if !running && Path::new("/proc/self").exists() {
        let pids = probe::owned_processes(&canonical);
        if !pids.is_empty() {
            let list = pids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" ");
            a.add(
                FindingClass::OrphanAgent,
                Severity::P0,
                format!("/proc/{}/environ:0", pids[0]),
                format!(
                    "{} process(es) of this loop are alive with no runner: they may still change the tree and spend",
                    pids.len()
                ),
                format!("kill {list}"),
            );
        }
    }

    // ---- state vs progress vs events
    if !running && crashed.is_none() {
        check_drift(
            &mut a,
            &state,
            &state_text,
            progress.as_ref(),
            events.as_ref(),
            recovered,
        );
    }

    // ---- what the state says
    check_status(
        &mut a,
        dir,
        &state,
        &state_text,
        last_result.as_ref(),
        cfg.as_ref(),
        running,
    );

    let verdict = if running {
        Verdict::Running
    } else if crashed.is_some() {
        Verdict::Crashed
    } else {
        match (state.last_status, state.stop_reason) {
            (Status::Ready, _) => Verdict::Ready,
            (Status::Done, _) => Verdict::Done,
            (Status::Paused, _) => Verdict::Paused,
            (Status::Stalled, _) => Verdict::Stalled,
            (Status::Aborted, _) => Verdict::Aborted,
            (Status::Blocked, StopReason::MaxIterations) => Verdict::Exhausted,
            (Status::Blocked, _) => Verdict::Blocked,
            (Status::Continue, _) => Verdict::Idle,
        }
    };
    LoopReport {
        dir: name.to_string(),
        verdict,
        status: Some(state.last_status),
        iteration: Some(last_done),
        stop_reason: Some(state.stop_reason),
        findings: a.findings,
        summary,
    }
}

/// A runner.log failure for a message: without its parenthetical details (a PATH, a file
/// list) and at most 160 characters.
fn failure_text(message: &str) -> String {
    let m = match message.find(" (") {
        Some(at) if at >= 20 => &message[..at],
        _ => message,
    };
    m.chars().take(160).collect()
}

fn pin_class(reason: StopReason) -> FindingClass {
    reason
        .integrity_class()
        .unwrap_or(FindingClass::ScriptTamper)
}

fn check_pins(a: &mut Audit<'_>, dir: &Path, state: Option<&State>, state_text: &str) {
    let Ok(bytes) = fs::read(dir.join("pins.sha256")) else {
        return;
    };
    let (list, bad) = pins::parse(&bytes);
    for (line, msg) in bad {
        a.add(
            FindingClass::ScriptTamper,
            Severity::P0,
            format!("pins.sha256:{line}"),
            format!("pins.sha256 has a line the runner cannot check: {msg}"),
            a.recover("--repin"),
        );
    }
    let mut violated = Vec::new();
    for pin in &list {
        let path: PathBuf = dir.join(&pin.path);
        let have = fs::read(&path).ok().map(|b| crate::fsx::sha256_hex(&b));
        if have.as_deref() == Some(pin.sha256.as_str()) {
            continue;
        }
        let reason = pins::pin_reason(&pin.path);
        violated.push(reason);
        let what = if have.is_none() {
            "is missing"
        } else {
            "changed"
        };
        let accept = if reason == StopReason::GoalDrift {
            "--repin-goal"
        } else {
            "--repin"
        };
        a.add(
            pin_class(reason),
            Severity::P0,
            format!("pins.sha256:{}", pin.line),
            format!(
                "{} {what} since it was pinned ({reason}); review the change: undo it with the fix, or accept it with {}",
                pin.path,
                a.recover(accept)
            ),
            a.recover("--restore-pinned"),
        );
    }
    // The loop stopped on a violation whose file has since been put back.
    if let Some(s) = state
        && s.last_status == Status::Aborted
        && s.stop_reason.is_integrity()
        && !violated.contains(&s.stop_reason)
    {
        a.add(
            pin_class(s.stop_reason),
            Severity::P1,
            format!(
                "state.env:{}",
                state::key_line(state_text, state_key::STOP_REASON)
            ),
            format!(
                "the loop stopped on {} and stays ABORTED, though the pins hold now",
                s.stop_reason
            ),
            a.recover("--restore-pinned"),
        );
    }
}

fn check_events(a: &mut Audit<'_>, ev: &EventsWindow, running: bool, state: Option<&State>) {
    let scope = if ev.window.whole {
        "the journal".to_string()
    } else {
        format!("the last {} lines of the journal", ev.window.lines)
    };
    if let Some((i, err)) = &ev.error {
        a.add(
            FindingClass::JournalBroken,
            Severity::P1,
            ev.window.evidence("events.jsonl", *i),
            format!("{scope} breaks here: {}", err.describe()),
            a.recover(""),
        );
    } else if ev.torn_tail && !running {
        a.add(
            FindingClass::JournalBroken,
            Severity::P2,
            ev.window
                .evidence("events.jsonl", ev.window.lines.saturating_sub(1)),
            "events.jsonl ends in a torn line (a cut append); the runner trims it on its next start",
            a.recover(""),
        );
    }
    // The latest flaky verify, if recent (the last three iterations) and not before DONE.
    let flake = ev.events.iter().rposition(|e| {
        e.is(EventName::VerifyFail)
            && (FindingClass::parse(EventsWindow::str_field(e, "code"))
                == Some(FindingClass::VerifyFlaky)
                || e.value.get("flaky").and_then(|v| v.as_bool()) == Some(true))
    });
    if let Some(k) = flake
        && state.is_none_or(|s| {
            s.last_status != Status::Done && ev.events[k].iteration + 3 >= s.next_iteration
        })
    {
        let e = &ev.events[k];
        a.add(
            FindingClass::VerifyFlaky,
            Severity::P1,
            ev.evidence(k),
            format!(
                "in iteration {} verify passed, then failed on run {} ({}): a flaky check can never give PASS_K passes in a row",
                e.iteration,
                e.value.get("run").map(|v| v.to_string()).unwrap_or_default(),
                EventsWindow::str_field(e, "failing")
            ),
            format!("bash {}/verify.sh", a.shown),
        );
    }
    if let Some(k) = ev.events.iter().rposition(|e| {
        e.is(EventName::VerifyPass)
            && EventsWindow::str_field(e, "run") == "red_gate"
            && e.value.get("allowed").and_then(|v| v.as_bool()) == Some(true)
    }) {
        a.add(
            FindingClass::VacuousVerify,
            Severity::P2,
            ev.evidence(k),
            "verify.sh passed on the untouched tree and the loop went on (ALLOW_GREEN_START=1): its checks prove little",
            format!(
                "add a check that fails today to verify in {}/loop.toml, then orbit init --force --dir {}",
                a.shown, a.shown
            ),
        );
    }
}

fn check_progress(a: &mut Audit<'_>, p: &ProgressTail, running: bool) {
    if let Some(i) = p.broken {
        a.add(
            FindingClass::JournalBroken,
            Severity::P1,
            p.window.evidence("progress.md", i),
            "progress.md's entry hash does not chain here: its history was rewritten",
            a.recover(""),
        );
    }
    if let Some(i) = p.torn
        && !running
    {
        a.add(
            FindingClass::JournalBroken,
            Severity::P2,
            p.window.evidence("progress.md", i),
            "progress.md ends in an entry without its end marker (a cut append); the runner rewrites it on its next start",
            a.recover(""),
        );
    }
    if let Some(&i) = p.stray.first() {
        a.add(
            FindingClass::JournalBroken,
            Severity::P2,
            p.window.evidence("progress.md", i),
            format!(
                "progress.md has {} line(s) outside any entry: written by something other than the runner",
                p.stray.len()
            ),
            a.recover(""),
        );
    }
}

fn check_validator(a: &mut Audit<'_>, dir: &Path, cfg: Option<&LoopConfig>) {
    let Ok(text) = fs::read_to_string(dir.join("verify.sh")) else {
        return;
    };
    let checks = text
        .lines()
        .filter(|l| l.starts_with("  run_check "))
        .count();
    if checks == 0 {
        let line = text
            .lines()
            .position(|l| l.starts_with("checks()"))
            .map_or(1, |i| i + 1);
        a.add(
            FindingClass::ValidatorGap,
            Severity::P1,
            format!("verify.sh:{line}"),
            "verify.sh has no run_check line: it fails with 'no check ran', so the loop can never be DONE",
            format!(
                "add a check to verify in {}/loop.toml, then orbit init --force --dir {}",
                a.shown, a.shown
            ),
        );
    } else if let Some(c) = cfg
        && c.verify.len() != checks
    {
        a.add(
            FindingClass::ValidatorGap,
            Severity::P2,
            "verify.sh:1",
            format!(
                "verify.sh has {checks} run_check line(s) but loop.toml lists {} check(s): they were rendered from different settings",
                c.verify.len()
            ),
            format!("orbit init --force --dir {}", a.shown),
        );
    }
}

/// Sums cost.ledger and checks the caps. Returns the ledger total when it was read in full.
fn check_spend(
    a: &mut Audit<'_>,
    dir: &Path,
    cfg: Option<&LoopConfig>,
    state: &State,
    state_text: &str,
    running: bool,
) -> Option<u64> {
    let path = dir.join("cost.ledger");
    let size = fs::metadata(&path).map(|m| m.len()).ok();
    let ledger = match size {
        Some(s) if s <= LEDGER_MAX_BYTES => fs::read(&path).ok().map(|b| ledger::parse(&b)),
        _ => None,
    };
    if let Some(l) = &ledger
        && let Some(&(line, ref msg)) = l.errors.first()
    {
        a.add(
            FindingClass::StateDrift,
            Severity::P2,
            format!("cost.ledger:{line}"),
            format!(
                "cost.ledger has {} line(s) that are not ledger lines: {msg}",
                l.errors.len()
            ),
            a.recover(""),
        );
    }
    let total = ledger.as_ref().map(ledger::Ledger::total);
    let spent = total.unwrap_or(0).max(state.cost_microusd);
    if let (Some(t), false) = (total, running)
        && t != state.cost_microusd
    {
        a.add(
            FindingClass::StateDrift,
            Severity::P2,
            format!("state.env:{}", state::key_line(state_text, state_key::COST_MICROUSD)),
            format!(
                "state.env records ${} spent but cost.ledger sums to ${}; the runner re-sums it after the next iteration",
                format_usd(state.cost_microusd),
                format_usd(t)
            ),
            a.recover(""),
        );
    }
    let Some(c) = cfg else { return total };
    let ledger_ev = |l: &Option<ledger::Ledger>| {
        l.as_ref()
            .and_then(|l| l.entries.last())
            .map(|e| format!("cost.ledger:{}", e.line))
            .unwrap_or_else(|| {
                format!(
                    "state.env:{}",
                    state::key_line(state_text, state_key::COST_MICROUSD)
                )
            })
    };
    if let Some(cap) = LoopConfig::usd_micro(c.usd_cap) {
        let raise = format!(
            "raise usd-cap in {}/loop.toml, then orbit init --force --dir {} && orbit run {}",
            a.shown, a.shown, a.shown
        );
        if spent >= cap {
            a.add(
                FindingClass::BurnRateAnomaly,
                Severity::P1,
                ledger_ev(&ledger),
                format!(
                    "spent ${} of the ${} usd-cap: {}",
                    format_usd(spent),
                    format_usd(cap),
                    if state.stop_reason == StopReason::Budget {
                        "the loop is paused on its budget"
                    } else {
                        "the loop pauses at its next gate"
                    }
                ),
                raise,
            );
        } else if spent.saturating_mul(10) >= cap.saturating_mul(8) {
            a.add(
                FindingClass::BurnRateAnomaly,
                Severity::P2,
                ledger_ev(&ledger),
                format!(
                    "spent ${} of the ${} usd-cap (80% or more)",
                    format_usd(spent),
                    format_usd(cap)
                ),
                raise,
            );
        }
        if let Some(l) = &ledger
            && let Some(e) = l.entries.iter().rev().find(|e| e.kind == CostKind::Unknown)
            && c.cost_estimate_usd.is_none()
        {
            a.add(
                FindingClass::BurnRateAnomaly,
                Severity::P2,
                format!("cost.ledger:{}", e.line),
                "the agent reports no cost and no cost-estimate-usd is set: the usd-cap cannot hold",
                format!(
                    "set cost-estimate-usd in {}/loop.toml, then orbit init --force --dir {}",
                    a.shown, a.shown
                ),
            );
        }
    }
    if let (Some(per_iter), Some(l)) = (LoopConfig::usd_micro(c.usd_per_iter_cap), &ledger)
        && let Some(last) = l.entries.last()
    {
        let cost = l.iteration_total(last.iteration);
        if cost >= per_iter {
            a.add(
                FindingClass::BurnRateAnomaly,
                Severity::P1,
                format!("cost.ledger:{}", last.line),
                format!(
                    "iteration {} cost ${}, at or over the ${} usd-per-iter-cap",
                    last.iteration,
                    format_usd(cost),
                    format_usd(per_iter)
                ),
                format!(
                    "raise usd-per-iter-cap in {}/loop.toml, then orbit init --force --dir {}",
                    a.shown, a.shown
                ),
            );
        }
    }
    total
}

fn check_commits(a: &mut Audit<'_>, dir: &Path, last_done: u64) {
    for n in (last_done.saturating_sub(2)..=last_done).filter(|n| *n >= 1) {
        let rel = iter_rel(n);
        let d = dir.join(&rel);
        if let Ok(t) = fs::read_to_string(d.join("commit.txt"))
            && t.lines().next() == Some("failed")
        {
            a.add(
                FindingClass::CommitScopeRisk,
                Severity::P1,
                format!("{rel}/commit.txt:1"),
                format!(
                    "iteration {n}'s commit failed: its changes stay uncommitted in the work tree (see {rel}/commit.log)"
                ),
                format!("cat {}/{rel}/commit.log", a.shown),
            );
        }
        if let Ok(t) = fs::read_to_string(d.join("baseline-touched.txt"))
            && !t.trim().is_empty()
        {
            a.add(
                FindingClass::CommitScopeRisk,
                Severity::P2,
                format!("{rel}/baseline-touched.txt:1"),
                format!(
                    "iteration {n} changed {} path(s) that were dirty before the loop began; they were left out of its commit",
                    t.lines().count()
                ),
                format!("cat {}/{rel}/baseline-touched.txt", a.shown),
            );
        }
    }
}

fn check_drift(
    a: &mut Audit<'_>,
    state: &State,
    state_text: &str,
    progress: Option<&ProgressTail>,
    events: Option<&EventsWindow>,
    recovered: bool,
) {
    let next = state.next_iteration;
    let ev_line = format!(
        "state.env:{}",
        state::key_line(state_text, state_key::NEXT_ITERATION)
    );
    if let Some(p) = progress
        && let Some((n, status, i)) = p.last_recorded()
    {
        let aborted_here = state.last_status == Status::Aborted && n == next;
        // Recovery sets a BLOCKED or ABORTED iteration aside to be retried: its entry stays.
        let retried_here = recovered && n == next;
        if n >= next && !aborted_here && !retried_here {
            a.add(
                FindingClass::StateDrift,
                Severity::P1,
                p.window.evidence("progress.md", i),
                format!(
                    "progress.md records iteration {n} ({status}) but state.env says the next iteration is {next}: the checkpoint is older than the history"
                ),
                a.recover(""),
            );
        } else if n + 1 < next {
            a.add(
                FindingClass::StateDrift,
                Severity::P1,
                ev_line.clone(),
                format!(
                    "state.env says the next iteration is {next} but progress.md's last entry is iteration {n}"
                ),
                a.recover(""),
            );
        }
    } else if next > 1 && progress.is_some_and(|p| p.window.whole) {
        a.add(
            FindingClass::StateDrift,
            Severity::P1,
            ev_line.clone(),
            format!(
                "state.env says the next iteration is {next} but progress.md records no iteration"
            ),
            a.recover(""),
        );
    }
    if let Some(ev) = events
        && let Some(k) = ev.last_pos(EventName::StateWrite)
    {
        let e = &ev.events[k];
        let ev_gen = EventsWindow::u64_field(e, "gen").unwrap_or(0);
        // A status that is not a contract word cannot match the state's.
        let status = EventsWindow::str_field(e, "status");
        let same_status = Status::parse(status) == Some(state.last_status);
        let ev_next = EventsWindow::u64_field(e, "next_iteration").unwrap_or(0);
        if ev_gen > state.generation {
            a.add(
                FindingClass::StateDrift,
                Severity::P1,
                ev.evidence(k),
                format!(
                    "events.jsonl records state generation {ev_gen} but state.env is at {}: state.env was rolled back or replaced",
                    state.generation
                ),
                a.recover(""),
            );
        } else if ev_gen == state.generation && (!same_status || ev_next != next) {
            a.add(
                FindingClass::StateDrift,
                Severity::P1,
                ev.evidence(k),
                format!(
                    "events.jsonl says generation {ev_gen} was {status} with next iteration {ev_next}, but state.env says {} with {next}: state.env was edited",
                    state.last_status
                ),
                a.recover(""),
            );
        }
    }
}

fn check_status(
    a: &mut Audit<'_>,
    dir: &Path,
    state: &State,
    text: &str,
    last: Option<&ResultEnv>,
    cfg: Option<&LoopConfig>,
    running: bool,
) {
    let shown = a.shown.to_string();
    let reason_line = format!(
        "state.env:{}",
        state::key_line(text, state_key::STOP_REASON)
    );
    let last_done = state.next_iteration.saturating_sub(1);
    if state.cb_state == CbState::Open {
        a.add(
            FindingClass::CircuitOpen,
            Severity::P1,
            format!("state.env:{}", state::key_line(text, state_key::CB_STATE)),
            format!(
                "the circuit breaker is open after {} failed iteration(s); the runner refuses agent runs until its cooldown ends",
                state.cb_fails
            ),
            a.recover("--reset-circuit"),
        );
    }
    match state.stop_reason {
        StopReason::Stalled => a.add(
            FindingClass::ConvergenceStall,
            Severity::P1,
            reason_line.clone(),
            "no progress: the tree was the same after the last iterations (see .action-sig.log); change the approach in goal.md or notes.md first",
            a.recover("--clear-stall"),
        ),
        StopReason::Oscillating => a.add(
            FindingClass::OscillationLoop,
            Severity::P1,
            reason_line.clone(),
            "the tree alternates between two states (see .action-sig.log); change the approach in goal.md or notes.md first",
            a.recover("--clear-stall"),
        ),
        StopReason::ToolFailure | StopReason::Preflight => a.add(
            FindingClass::ToolFailure,
            Severity::P1,
            last.filter(|r| r.get(result_key::AGENT_OUTCOME) == "permanent")
                .map(|r| format!("{}/result.env:{}", iter_rel(last_done), r.line_of(result_key::AGENT_OUTCOME)))
                .unwrap_or(reason_line.clone()),
            format!(
                "the loop stopped on {}: the agent could not be run (check argv in loop.toml and PATH)",
                state.stop_reason
            ),
            format!("orbit run {shown}"),
        ),
        StopReason::VacuousVerify => a.add(
            FindingClass::VacuousVerify,
            Severity::P1,
            "iterations/baseline/verify.log:1",
            "verify.sh passed on the untouched tree before the agent did anything: its checks prove nothing",
            format!(
                "add a check that fails today to verify in {shown}/loop.toml, then orbit init --force --dir {shown}"
            ),
        ),
        _ => {}
    }
    // The signature log, where the state does not already say it.
    if (running || state.last_status == Status::Continue)
        && !matches!(
            state.stop_reason,
            StopReason::Stalled | StopReason::Oscillating
        )
        && let Ok(w) = tail::read_tail(&dir.join(".action-sig.log"), SIGS_WINDOW_BYTES)
    {
        let log = sigs::parse_from(&w.bytes, w.first_line.unwrap_or(1));
        let window = cfg.map_or(3, |c| c.convergence_window as usize);
        if !log.sigs.is_empty() {
            let evidence = w.evidence(".action-sig.log", w.lines.saturating_sub(1));
            match sigs::stall(&log.sigs, window) {
                Some(sigs::Stall::Converged { window }) => a.add(
                    FindingClass::ConvergenceStall,
                    Severity::P2,
                    evidence,
                    format!("the last {window} iterations left the same tree: the next decision stops the loop as stalled"),
                    a.recover("--clear-stall"),
                ),
                Some(sigs::Stall::Oscillating) => a.add(
                    FindingClass::OscillationLoop,
                    Severity::P2,
                    evidence,
                    "the last four iterations alternate between two trees (A B A B)",
                    a.recover("--clear-stall"),
                ),
                None => {}
            }
        }
    }
    // DONE needs a passing verify on record.
    if state.last_status == Status::Done {
        let ok = last.is_some_and(|r| {
            Status::parse(r.get(result_key::VERDICT)) == Some(Status::Done)
                && VerifyOutcome::parse(r.get(result_key::VERIFY)) == Some(VerifyOutcome::Pass)
        });
        if !ok {
            let evidence = last
                .map(|r| {
                    format!(
                        "{}/result.env:{}",
                        iter_rel(last_done),
                        r.line_of(result_key::VERIFY).max(1)
                    )
                })
                .unwrap_or_else(|| {
                    format!(
                        "state.env:{}",
                        state::key_line(text, state_key::LAST_STATUS)
                    )
                });
            a.add(
                FindingClass::VerifyGap,
                Severity::P0,
                evidence,
                format!(
                    "state.env says DONE but iteration {last_done}'s record shows no verified DONE (verify {}, verdict {}): only the gate may set DONE",
                    last.map_or("missing", |r| r.get(result_key::VERIFY)),
                    last.map_or("missing", |r| r.get(result_key::VERDICT))
                ),
                a.recover(""),
            );
        }
    } else if !running && dir.join("done.md").is_file() {
        let failing = last.filter(|r| {
            VerifyOutcome::parse(r.get(result_key::VERIFY)) == Some(VerifyOutcome::Fail)
        });
        if let Some(r) = failing {
            a.add(
                FindingClass::VerifyGap,
                Severity::P2,
                format!("{}/result.env:{}", iter_rel(last_done), r.line_of(result_key::VERIFY)),
                format!(
                    "done.md claims completion but iteration {last_done}'s verify failed ({}): the gate will reject the claim",
                    r.get(result_key::VERIFY_FAILING)
                ),
                format!("bash {shown}/verify.sh"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(n: u64) -> Vec<String> {
        let mut prev = events::GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let line = events::build_line(
                    seq,
                    "2026-11-30T00:00:00Z",
                    "iteration_start",
                    seq,
                    &[],
                    &prev,
                );
                prev = events::split_hash(line.trim_end()).unwrap().1.to_string();
                line
            })
            .collect()
    }

    #[test]
    fn the_chain_is_verified_over_the_tail_window_only() {
        let d = tempfile::tempdir().unwrap();
        let mut lines = journal(6000);
        fs::write(d.path().join("events.jsonl"), lines.concat()).unwrap();
        let ev = read_events(d.path()).unwrap();
        assert_eq!(ev.events.len(), EVENTS_WINDOW_LINES);
        assert!(ev.error.is_none(), "{:?}", ev.error);
        assert_eq!(ev.evidence(0), "events.jsonl:1001");

        // An edit before the window is not seen; one inside it is, at its line.
        lines[9] = lines[9].replace("iteration_start", "iteration_stop");
        lines[5799] = lines[5799].replace("iteration_start", "iteration_stop");
        fs::write(d.path().join("events.jsonl"), lines.concat()).unwrap();
        let ev = read_events(d.path()).unwrap();
        let (i, err) = ev.error.clone().unwrap();
        assert_eq!(err, ChainError::HashMismatch { line: i + 1 });
        assert_eq!(ev.window.evidence("events.jsonl", i), "events.jsonl:5800");

        // A removed line inside the window breaks prev.
        let mut removed = journal(50);
        removed.remove(20);
        fs::write(d.path().join("events.jsonl"), removed.concat()).unwrap();
        let ev = read_events(d.path()).unwrap();
        let (i, err) = ev.error.clone().unwrap();
        assert!(matches!(err, ChainError::PrevMismatch { .. }), "{err:?}");
        assert_eq!(ev.window.evidence("events.jsonl", i), "events.jsonl:21");
    }

    #[test]
    fn fix_commands_name_the_directory_as_one_word() {
        assert_eq!(shell_word(".orbit/fix-parser"), ".orbit/fix-parser");
        assert_eq!(shell_word("my loops/a b"), "'my loops/a b'");
        assert_eq!(shell_word("x$(touch y)"), "$'x$(touch y)'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn toml_lines() {
        assert_eq!(
            toml_line("a = 1\nloop-timeout = \"0\"\n", "loop-timeout"),
            2
        );
        assert_eq!(toml_line("", "loop-timeout"), 1);
    }
}
