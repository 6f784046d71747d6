//! From the files of one loop to a verdict and findings. Read-only throughout.
//!
//! [`audit_loop`] is the audit's procedure: read the loop once ([`Loop`]), then check it in
//! the order its findings are reported — the contract's files, the lock, the checkpoint,
//! the pins, the journals, the runner's log, the verifier and the loop's bounds; then, with
//! a readable checkpoint, the spend, the last iterations' records and commits, a crash,
//! orphaned agents, drift between the checkpoint and the journals, and what the state says.

use std::fs;
use std::path::{Path, PathBuf};

use super::candidates;
use super::facts::{commit_failed, toml_line};
use super::keys::{result_key, state_key};
use super::read::{
    EventsWindow, ProgressTail, StateRead, has_attempt_files, iter_rel, mtime, read_events,
    read_progress, read_result, read_state,
};
use super::records;
use super::runner_log;
use super::tail;
use super::workspace;
use super::{Finding, LoopReport, Severity, Summary};
use crate::config::{LoopConfig, SandboxNetwork};
use crate::contract::{
    AgentOutcome, CbState, CostKind, Engine, EventName, FindingClass, LOOP_DIRS, LOOP_FILES,
    PINS_SETS, Status, StopReason, Verdict, VerifyOutcome,
};
use crate::fsx;
use crate::fsx::NotRegular;
use crate::goal::{format_usd, parse_duration};
use crate::ledger::{self, Ledger};
use crate::locate::probe::{self, Lock};
use crate::pins::{self, Pin};
use crate::result_env::ResultEnv;
use crate::sigs;
use crate::state::{self, State};

const RUNNER_LOG_WINDOW_BYTES: u64 = 256 << 10;
const SIGS_WINDOW_BYTES: u64 = 16 << 10;
/// cost.ledger is summed in full up to this size (about a million agent runs).
const LEDGER_MAX_BYTES: u64 = 32 << 20;

/// Files a loop directory must hold (contract section 3), each with the `orbit recover`
/// flag that brings it back (none: recover rebuilds it).
const REQUIRED: [(&str, &str); 11] = [
    ("goal.md", "--restore-pinned"),
    ("loop.toml", "--restore-pinned"),
    ("prompt.md", "--restore-pinned"),
    ("verify.sh", "--restore-pinned"),
    ("run-loop.sh", "--restore-pinned"),
    ("recover.sh", "--restore-pinned"),
    ("notify.sh", "--restore-pinned"),
    ("state.env", ""),
    ("state.env.sha256", ""),
    ("pins.sha256", "--repin"),
    ("progress.md", ""),
];

/// One audit under way: the loop directory, its name for fix commands, the findings so far.
struct Audit<'a> {
    dir: &'a Path,
    shown: &'a str,
    findings: Vec<Finding>,
    /// Pinned paths found changed or missing (already reported, with their fix).
    pins_violated: Vec<String>,
}

/// What the audit read of a loop, once, before checking it.
struct Loop {
    /// The directory as the lock and /proc name it.
    canonical: PathBuf,
    cfg: Option<LoopConfig>,
    /// loop.toml's text, for the line of a setting.
    toml_text: String,
    /// Whether a runner is alive on the loop.
    running: bool,
    events: Option<EventsWindow>,
    progress: Option<ProgressTail>,
    /// state.env, when it and its sidecar could be read.
    checkpoint: Option<Checkpoint>,
}

/// state.env as read, with its text for the lines of evidence.
struct Checkpoint {
    state: State,
    text: String,
    /// Its sidecar is a generation behind: a torn checkpoint.
    torn: bool,
}

impl Checkpoint {
    /// `state.env:N`, the line of `key`.
    fn evidence(&self, key: &str) -> String {
        format!("state.env:{}", state::key_line(&self.text, key))
    }

    /// The last iteration recorded: NEXT_ITERATION - 1.
    fn last_done(&self) -> u64 {
        self.state.next_iteration.saturating_sub(1)
    }
}

/// Audits one loop directory. `name` is how reports and fix commands name it.
pub fn audit_loop(dir: &Path, name: &str) -> LoopReport {
    // Fix commands name the directory as one shell word.
    let shown = crate::shell::paste_word(name);
    let mut a = Audit {
        dir,
        shown: &shown,
        findings: Vec::new(),
        pins_violated: Vec::new(),
    };
    a.check_file_types();
    a.check_required_files();
    let l = a.read_loop();
    let mut summary = summary(dir, l.cfg.as_ref());
    let ws = workspace_of(&l);
    a.check_pins(&l, &ws);
    a.check_journals(&l);
    a.check_runner_log(l.running);
    a.check_validator(l.cfg.as_ref());
    a.check_sandbox(l.cfg.as_ref());
    a.check_bounds(&l);
    a.findings
        .extend(super::installed_schedule::check(&l.canonical, a.shown));
    let Some(cp) = &l.checkpoint else {
        let verdict = if l.running {
            Verdict::Running
        } else {
            Verdict::Corrupt
        };
        return a.report(name, verdict, None, summary);
    };
    a.check_iteration_files(cp.last_done().saturating_sub(2).max(1)..=cp.state.next_iteration);
    let (spent, unknown) = a.check_spend(&l, cp);
    summary.spent_microusd = Some(spent);
    summary.unknown_cost_runs = unknown;
    let last = a.read_last_result(cp);
    summary.last_verify = last.as_ref().and_then(verify_outcome);
    let allowed = l
        .cfg
        .as_ref()
        .map(|c| c.allow_fewer_tests.clone())
        .unwrap_or_default();
    summary.test_counts = crate::counts::read(dir, cp.state.next_iteration, &allowed);
    a.check_test_counts(&summary.test_counts);
    a.check_commits(cp.last_done());
    let recovered = recovered(l.events.as_ref(), &cp.state);
    let records = records::Input {
        dir,
        shown: a.shown,
        state: &cp.state,
        state_text: &cp.text,
        torn: cp.torn,
        events: l.events.as_ref(),
    };
    if !l.running {
        a.findings.extend(records::check(&records));
    }
    let crashed = !l.running && !recovered && a.check_crash(&l, cp, &records);
    a.check_orphans(&l);
    a.findings.extend(workspace::check(&workspace::Input {
        dir: &l.canonical,
        shown: a.shown,
        state: &cp.state,
        state_text: &cp.text,
        cfg: l.cfg.as_ref(),
        running: l.running,
        crashed,
        commit_failed: commit_failed(dir, cp.last_done()),
        reported: &a.pins_violated,
        configured: &configured_workspace(&l),
    }));
    a.findings.extend(candidates::check(&candidates::Input {
        dir: &l.canonical,
        shown: a.shown,
        state: &cp.state,
        state_text: &cp.text,
        cfg: l.cfg.as_ref(),
        toml_text: &l.toml_text,
        running: l.running,
    }));
    let place = workspace::place(&cp.state, l.cfg.as_ref());
    summary.workspace = place.workspace;
    summary.branch = place.branch;
    if !l.running && !crashed {
        a.check_drift(&l, cp, recovered);
    }
    a.check_adequacy(&cp.state);
    a.check_status(&l, cp, last.as_ref());
    let verdict = verdict(l.running, crashed, &cp.state);
    a.report(name, verdict, Some(&cp.state), summary)
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

    /// The report of the audit: its verdict, the state's words and the findings.
    fn report(
        self,
        name: &str,
        verdict: Verdict,
        state: Option<&State>,
        summary: Summary,
    ) -> LoopReport {
        let mut findings = self.findings;
        // The sandbox's note is about the loop as it is set up, not about what happened:
        // it comes after every finding about the loop's runs.
        findings.sort_by_key(|f| {
            matches!(
                f.class,
                FindingClass::Unsandboxed | FindingClass::NetworkOpen
            )
        });
        LoopReport {
            dir: name.to_string(),
            verdict,
            status: state.map(|s| s.last_status),
            iteration: state.map(|s| s.next_iteration.saturating_sub(1)),
            stop_reason: state.map(|s| s.stop_reason),
            findings,
            summary,
        }
    }
}

// ---- reading the loop

impl Audit<'_> {
    /// Reads what the checks share, reporting on the way what cannot be used: loop.toml,
    /// the lock, the journal, state.env and progress.md.
    fn read_loop(&mut self) -> Loop {
        let canonical = fs::canonicalize(self.dir).unwrap_or_else(|_| self.dir.to_path_buf());
        let (cfg, toml_text) = self.read_settings();
        let lock = probe::lock(&canonical);
        self.check_lock(&lock);
        let events = read_events(self.dir);
        let running = runner_alive(&lock, events.as_ref());
        let checkpoint = self.read_checkpoint(running);
        let progress = read_progress(self.dir);
        Loop {
            canonical,
            cfg,
            toml_text,
            running,
            events,
            progress,
            checkpoint,
        }
    }

    /// loop.toml, as settings and as text.
    fn read_settings(&mut self) -> (Option<LoopConfig>, String) {
        let path = self.dir.join("loop.toml");
        let text = fsx::read_text_or_none(&path).unwrap_or_default();
        let cfg = match LoopConfig::load(&path) {
            Ok(c) => Some(c),
            Err(e) if fsx::not_regular(&path).is_none() && path.exists() => {
                self.add(
                    FindingClass::ContractMissing,
                    Severity::P1,
                    "loop.toml:1",
                    format!("loop.toml cannot be used: {e}"),
                    self.recover("--restore-pinned"),
                );
                None
            }
            Err(_) => None,
        };
        (cfg, text)
    }

    /// A lock that keeps every run out while no runner holds it.
    fn check_lock(&mut self, lock: &Lock) {
        match lock {
            Lock::StaleDir { owner } => self.add(
                FindingClass::StaleLock,
                Severity::P1,
                ".run-loop.lock.d/owner:1",
                format!(
                    "the mkdir lock's owner ('{}') is no longer running; orbit recover refuses while the directory exists",
                    owner.escape_debug()
                ),
                format!("rm -r {}/.run-loop.lock.d", self.shown),
            ),
            Lock::StrayHolder { pid, cmdline } => self.add(
                FindingClass::StaleLock,
                Severity::P1,
                ".run-loop.lock:0",
                format!(
                    "process {pid} ({}) holds the runner's lock but is not a runner: no run can start",
                    cmdline.chars().take(80).collect::<String>()
                ),
                format!("kill {pid}"),
            ),
            Lock::Runner { pid, .. } if probe::stopped(*pid) => self.add(
                FindingClass::StaleLock,
                Severity::P1,
                ".run-loop.lock:0",
                format!(
                    "the runner holding the lock (pid {pid}) is stopped (SIGSTOP, or Ctrl-Z in its terminal): nothing of the loop runs, and every later tick exits 20 while it is"
                ),
                format!(
                    "kill -CONT {pid} to let it go on, or kill -KILL {pid} and then orbit recover {}",
                    self.shown
                ),
            ),
            _ => {}
        }
    }

    /// state.env with its sidecar; a torn checkpoint is used, anything else wrong is not.
    fn read_checkpoint(&mut self, running: bool) -> Option<Checkpoint> {
        match read_state(self.dir, running) {
            StateRead::Ok { state, text, torn } => {
                if let Some(side_gen) = torn {
                    self.add(
                        FindingClass::TornCheckpoint,
                        Severity::P1,
                        "state.env.sha256:2",
                        format!(
                            "the sidecar is one generation behind state.env (gen {side_gen} vs {}): a write was cut between the two; repairable, not tampering",
                            state.generation
                        ),
                        self.recover(""),
                    );
                }
                Some(Checkpoint {
                    state: *state,
                    text,
                    torn: torn.is_some(),
                })
            }
            StateRead::Missing => None,
            StateRead::Bad { evidence, message } => {
                self.add(
                    FindingClass::StateDrift,
                    Severity::P1,
                    evidence,
                    message,
                    self.recover(""),
                );
                None
            }
        }
    }

    /// The last recorded iteration's result.env, reported when it cannot be read.
    fn read_last_result(&mut self, cp: &Checkpoint) -> Option<ResultEnv> {
        let last_done = cp.last_done();
        if last_done == 0 {
            return None;
        }
        match read_result(self.dir, last_done)? {
            Ok(r) => Some(r),
            Err((line, msg)) => {
                self.add(
                    FindingClass::StateDrift,
                    Severity::P1,
                    format!("{}/result.env:{line}", iter_rel(last_done)),
                    format!("iteration {last_done}'s record cannot be read: {msg}"),
                    self.recover(""),
                );
                None
            }
        }
    }
}

/// Whether a runner is alive: it holds the lock or, where the lock cannot be probed
/// (no /proc/locks), the journal's last loop_start has no loop_stop after it and its pid
/// is alive.
fn runner_alive(lock: &Lock, events: Option<&EventsWindow>) -> bool {
    match lock {
        Lock::Runner { .. } => true,
        Lock::Unknown => events
            .and_then(EventsWindow::unstopped_pid)
            .is_some_and(|pid| probe::alive(pid as u32)),
        _ => false,
    }
}

/// The workspace the loop's pins name files in: state.env's `WORKSPACE`, else (a loop whose
/// state cannot be read) loop.toml's `workspace` from the repository root.
fn workspace_of(l: &Loop) -> String {
    if let Some(cp) = &l.checkpoint
        && !cp.state.workspace.is_empty()
    {
        return cp.state.workspace.clone();
    }
    configured_workspace(l)
}

/// loop.toml's `workspace` (or its contract's default) from the repository root: where the
/// first run makes the workspace.
fn configured_workspace(l: &Loop) -> String {
    let Some(cfg) = &l.cfg else {
        return String::new();
    };
    crate::locate::repo_by_dot_git(&l.canonical)
        .map(|r| cfg.workspace_path(&r))
        .unwrap_or_default()
}

/// What `orbit status` shows that needs no checkpoint: the name, the caps, the last
/// activity.
fn summary(dir: &Path, cfg: Option<&LoopConfig>) -> Summary {
    Summary {
        name: cfg.map(|c| c.name.clone()).unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        }),
        max_iterations: cfg.map(|c| c.max_iterations),
        candidates: cfg.map(|c| c.candidates).filter(|n| *n > 1),
        usd_cap_microusd: cfg.and_then(|c| LoopConfig::usd_micro(c.usd_cap)),
        last_activity: ["events.jsonl", "state.env", "runner.log", "progress.md"]
            .iter()
            .filter_map(|f| mtime(&dir.join(f)))
            .max(),
        ..Summary::default()
    }
}

/// What verify.sh said of an iteration, when the record says it in the contract's words.
fn verify_outcome(r: &ResultEnv) -> Option<VerifyOutcome> {
    VerifyOutcome::parse(r.get(result_key::VERIFY))
}

/// Whether a recovery after everything else, matching the checkpoint, has dealt with a
/// crash: a recorded iteration it left pending is completed by the next run.
fn recovered(events: Option<&EventsWindow>, state: &State) -> bool {
    events.and_then(|ev| ev.events.last()).is_some_and(|e| {
        e.is(EventName::Recovery)
            && EventsWindow::u64_field(e, "gen") == Some(state.generation)
            && EventsWindow::u64_field(e, "next_iteration") == Some(state.next_iteration)
    })
}

/// The verdict, in the order docs/AUDIT.md gives (CORRUPT is decided before, without a
/// checkpoint).
fn verdict(running: bool, crashed: bool, state: &State) -> Verdict {
    if running {
        return Verdict::Running;
    }
    if crashed {
        return Verdict::Crashed;
    }
    Verdict::at_rest(state.last_status, state.stop_reason)
}

// ---- the checks that need no checkpoint

impl Audit<'_> {
    /// Every file of the loop directory the runner or orbit reads is a regular file (and
    /// every directory a directory): anything else — a FIFO, a socket, a device, a
    /// symlink — is a `loop_tamper`, reported here and never read (a FIFO would block).
    fn check_file_types(&mut self) {
        for f in LOOP_FILES {
            if let Some(what) = fsx::not_regular(&self.dir.join(f)) {
                self.tamper(f, &what);
            }
        }
        for d in LOOP_DIRS {
            if let Ok(m) = fs::symlink_metadata(self.dir.join(d))
                && !m.is_dir()
            {
                let what = fsx::not_regular(&self.dir.join(d)).unwrap_or(NotRegular::Other);
                self.tamper(d, &what);
            }
        }
    }

    /// A LOOP_TAMPER finding for a path of the loop directory (relative) that is not what
    /// the runner writes there; once per path.
    fn tamper(&mut self, rel: &str, what: &NotRegular) {
        let evidence = format!("{rel}:0");
        if self
            .findings
            .iter()
            .any(|f| f.class == FindingClass::LoopTamper && f.evidence == evidence)
        {
            return;
        }
        // After the removal, recover rebuilds what it can; a pinned file comes back from
        // its baseline copy.
        let flag = REQUIRED
            .iter()
            .find(|(f, _)| *f == rel)
            .map_or("", |(_, flag)| *flag);
        let rm = if *what == NotRegular::Directory {
            "rm -r --"
        } else {
            "rm --"
        };
        self.add(
            FindingClass::LoopTamper,
            Severity::P0,
            evidence,
            format!(
                "{rel} is {what}, not a regular file: the runner never writes one (loop_tamper); no orbit command reads it, and the runner refuses the loop until it is gone"
            ),
            format!(
                "{rm} {}/{} && {}",
                self.shown,
                crate::shell::paste_word(rel),
                self.recover(flag)
            ),
        );
    }

    /// The records of iterations `range` (their directory, result.env, commit.txt) are what
    /// the runner writes: a directory, regular files.
    fn check_iteration_files(&mut self, range: std::ops::RangeInclusive<u64>) {
        if fsx::not_regular(&self.dir.join("iterations"))
            .is_some_and(|w| w != NotRegular::Directory)
        {
            return;
        }
        for n in range {
            let rel = iter_rel(n);
            let path = self.dir.join(&rel);
            match fs::symlink_metadata(&path) {
                Err(_) => continue,
                Ok(m) if !m.is_dir() => {
                    let what = fsx::not_regular(&path).unwrap_or(NotRegular::Other);
                    self.tamper(&rel, &what);
                    continue;
                }
                Ok(_) => {}
            }
            for f in ["result.env", "commit.txt"] {
                if let Some(what) = fsx::not_regular(&path.join(f)) {
                    self.tamper(&format!("{rel}/{f}"), &what);
                }
            }
        }
    }

    fn check_required_files(&mut self) {
        for (f, flag) in REQUIRED {
            if fs::symlink_metadata(self.dir.join(f)).is_err() {
                self.add(
                    FindingClass::ContractMissing,
                    Severity::P1,
                    format!("{f}:0"),
                    format!("{f} is missing: the runner refuses to start without it"),
                    self.recover(flag),
                );
            }
        }
    }

    /// Every pin against its file; then a stop on a violation whose file has since been
    /// put back.
    fn check_pins(&mut self, l: &Loop, ws: &str) {
        let Ok(bytes) = fsx::read_loop_file(&self.dir.join("pins.sha256")) else {
            return;
        };
        let (list, bad) = pins::parse(&bytes);
        for (line, msg) in bad {
            self.add(
                FindingClass::ScriptTamper,
                Severity::P0,
                format!("pins.sha256:{line}"),
                format!("pins.sha256 has a line the runner cannot check: {msg}"),
                self.recover("--repin"),
            );
        }
        // A workspace that is gone is reported as such (WORKSPACE_MISSING), not as every
        // file pinned in it missing: the loop recreates it from its branch.
        let ws_gone = !ws.is_empty() && !Path::new(ws).is_dir();
        // The loop's engine, for its own permission files (none known when loop.toml is broken).
        let engine = l.cfg.as_ref().map(|c| c.engine);
        let mut violated: Vec<StopReason> = list
            .iter()
            .filter(|p| !(ws_gone && pins::workspace_relative(&p.path, ws).is_some()))
            .filter_map(|p| self.check_pin(p, ws, engine))
            .collect();
        if self.check_appeared_permission_files(&list, ws, engine) {
            violated.push(StopReason::PermissionHijack);
        }
        if self.check_protected_sets(&list, ws) {
            violated.push(StopReason::RewardHack);
        }
        if let Some(cp) = &l.checkpoint {
            self.check_integrity_stop(l, cp, &violated);
        }
    }

    /// Each protect set of pins.sets against what its glob matches in the workspace now: a
    /// file added to, removed from or renamed within a protected set is `reward_hack` like
    /// an edit (contract 7). Whether one changed.
    fn check_protected_sets(&mut self, list: &[Pin], ws: &str) -> bool {
        let Ok(bytes) = fsx::read_loop_file(&self.dir.join(PINS_SETS)) else {
            return false;
        };
        if ws.is_empty() || !fs::symlink_metadata(ws).is_ok_and(|m| m.is_dir()) {
            return false;
        }
        let mut changed = false;
        for set in pins::parse_sets(&bytes) {
            let Some(now) = crate::protect::set_files(Path::new(ws), &set.glob, self.dir) else {
                continue;
            };
            if pins::set_sha(&now) == set.sha256 {
                continue;
            }
            changed = true;
            let (added, removed) = pins::set_changes(&set.glob, &now, list, ws);
            let list_of = |what: &str, paths: &[String]| {
                (!paths.is_empty()).then(|| {
                    let shown: Vec<&str> = paths.iter().take(10).map(String::as_str).collect();
                    let more = paths.len().saturating_sub(10);
                    format!(
                        "{what} {}{}",
                        shown.join(", "),
                        if more > 0 {
                            format!(" and {more} more")
                        } else {
                            String::new()
                        }
                    )
                })
            };
            let said: Vec<String> = [list_of("added", &added), list_of("removed", &removed)]
                .into_iter()
                .flatten()
                .collect();
            let said = if said.is_empty() {
                "its list of paths is not the pinned one".to_string()
            } else {
                said.join("; ")
            };
            self.add(
                FindingClass::RewardHack,
                Severity::P0,
                format!("{PINS_SETS}:{}", set.line),
                format!(
                    "the protected set '{}' changed since the first run pinned it (reward_hack): {said}. Review it: the fix removes what was added (a copy goes to the backup) and restores what was removed; accept it with {}",
                    set.glob,
                    self.recover("--repin")
                ),
                self.recover("--restore-pinned"),
            );
        }
        changed
    }

    /// Agent permission files that no pin lists, though the first run pinned every one
    /// there was: each appeared since (`permission_hijack`); there is no copy to restore,
    /// so `--restore-pinned` removes it. Whether there is one.
    fn check_appeared_permission_files(
        &mut self,
        list: &[Pin],
        ws: &str,
        engine: Option<Engine>,
    ) -> bool {
        let appeared = pins::appeared_permission_files(self.dir, ws, engine, list);
        for rel in &appeared {
            let abs = format!("{}/{rel}", ws.trim_end_matches('/'));
            self.pins_violated.push(abs.clone());
            self.add(
                FindingClass::PermissionHijack,
                Severity::P0,
                format!("{abs}:1"),
                format!(
                    "{abs} appeared after the first run pinned the agent permission files (it was not there then; permission_hijack): it can widen what the agent may do. Review it: the fix removes it (a copy goes to the backup); accept it with {}",
                    self.recover("--repin")
                ),
                self.recover("--restore-pinned"),
            );
        }
        !appeared.is_empty()
    }

    /// One pin: the reason its file violates it, if it does.
    fn check_pin(&mut self, pin: &Pin, ws: &str, engine: Option<Engine>) -> Option<StopReason> {
        let path = self.dir.join(&pin.path);
        let read = fsx::read_loop_file(&path);
        let have = read.as_ref().ok().map(|b| fsx::sha256_hex(b));
        if have.as_deref() == Some(pin.sha256.as_str()) {
            return None;
        }
        let reason = pins::pin_reason_in(&pin.path, ws, engine);
        self.pins_violated.push(pin.path.clone());
        let what = match &read {
            Ok(_) => "changed".to_string(),
            Err(fsx::Unreadable::NotRegular(kind)) => format!("is now {kind}"),
            Err(_) => "is missing".to_string(),
        };
        if let Err(fsx::Unreadable::NotRegular(kind)) = &read {
            // Nothing restores over it: it goes first.
            let rm = if *kind == NotRegular::Directory {
                "rm -r --"
            } else {
                "rm --"
            };
            self.add(
                pin_class(reason),
                Severity::P0,
                format!("pins.sha256:{}", pin.line),
                format!(
                    "{} {what} ({reason}): it is never read; remove it, then restore the pinned file",
                    pin.path
                ),
                format!(
                    "{rm} {} && {}",
                    crate::shell::paste_word(&path.display().to_string()),
                    self.recover("--restore-pinned")
                ),
            );
            return Some(reason);
        }
        let accept = if reason == StopReason::GoalDrift {
            "--repin-goal"
        } else {
            "--repin"
        };
        self.add(
            pin_class(reason),
            Severity::P0,
            format!("pins.sha256:{}", pin.line),
            format!(
                "{} {what} since it was pinned ({reason}); review the change: undo it with the fix, or accept it with {}",
                pin.path,
                self.recover(accept)
            ),
            self.recover("--restore-pinned"),
        );
        Some(reason)
    }

    /// An integrity stop that no pin above explains: a loop or git tamper (no pin holds
    /// those files), or a pin violation whose file has since been put back.
    fn check_integrity_stop(&mut self, l: &Loop, cp: &Checkpoint, violated: &[StopReason]) {
        let s = &cp.state;
        if s.last_status != Status::Aborted
            || !s.stop_reason.is_integrity()
            || violated.contains(&s.stop_reason)
        {
            return;
        }
        // What the runner recorded when it stopped: the last integrity_fail event.
        let fail = l.events.as_ref().and_then(|ev| {
            let k = ev
                .events
                .iter()
                .rposition(|e| e.is(EventName::IntegrityFail))?;
            let e = &ev.events[k];
            (EventsWindow::str_field(e, "code") == s.stop_reason.as_str()).then(|| {
                (
                    ev.evidence(k),
                    EventsWindow::str_field(e, "file").to_string(),
                    EventsWindow::str_field(e, "expected").to_string(),
                    EventsWindow::str_field(e, "actual").to_string(),
                    EventsWindow::str_field(e, "when").to_string(),
                    e.iteration,
                )
            })
        });
        let evidence = fail
            .as_ref()
            .map(|f| f.0.clone())
            .unwrap_or_else(|| cp.evidence(state_key::STOP_REASON));
        let file = fail.as_ref().map(|f| f.1.clone()).filter(|f| !f.is_empty());
        let seen = match &fail {
            Some((_, _, want, have, _, _)) if !want.is_empty() || !have.is_empty() => {
                format!(" (expected {want}, found {have})")
            }
            _ => String::new(),
        };
        match s.stop_reason {
            StopReason::LoopTamper => {
                let what = file.unwrap_or_else(|| "a file of the loop directory".into());
                self.add(
                    FindingClass::LoopTamper,
                    Severity::P0,
                    evidence,
                    format!(
                        "the loop stopped on loop_tamper: {what} changed behind the runner{seen} (state, sidecar, manifest, journal, ledger, records and baselines are the runner's alone). Look at what changed it; recover rebuilds the state from the journal and the loop goes on"
                    ),
                    self.recover(""),
                );
            }
            StopReason::GitTamper => {
                let repo = crate::locate::repo_by_dot_git(&l.canonical)
                    .map(|r| r.display().to_string())
                    .unwrap_or_else(|| "REPO".into());
                let r = crate::shell::paste_word(&repo);
                let what = file.unwrap_or_else(|| "git's config, hooks or excludes".into());
                self.add(
                    FindingClass::GitTamper,
                    Severity::P0,
                    evidence,
                    format!(
                        "the loop stopped on git_tamper: {what} changed{seen}. Review `git -C {r} config --list --show-origin`, {r}/.git/hooks and {r}/.git/info (a hook, an alias, a filter or fsmonitor would run commands as you), undo what you did not make; then the fix accepts them as they are"
                    ),
                    self.recover("--repin"),
                );
            }
            // The DONE gate found the change naming the holdout (its location, its variable,
            // a hidden file): the lines are in the iteration's holdout-refs.txt.
            StopReason::RewardHack
                if fail
                    .as_ref()
                    .is_some_and(|f| f.4 == "holdout reference scan") =>
            {
                let n = fail.as_ref().map_or(0, |f| f.5);
                let what = file.unwrap_or_else(|| "the change".into());
                self.add(
                    FindingClass::RewardHack,
                    Severity::P0,
                    evidence,
                    format!(
                        "the loop stopped on reward_hack: the change names the holdout in {what} (the lines: iterations/{n:06}/holdout-refs.txt): code that looks the hidden checks' answers up is a reward hack. Take that change out of the workspace (git restore it), then the fix goes on from the last iteration"
                    ),
                    self.recover(""),
                );
            }
            StopReason::PermissionHijack if self.check_home(cp) => {}
            StopReason::PermissionHijack => self.add(
                FindingClass::PermissionHijack,
                Severity::P1,
                cp.evidence(state_key::STOP_REASON),
                "the loop stopped on permission_hijack and stays ABORTED, though the pins and what it holds outside the repository (pins.home) are as its first run held them now",
                self.recover(""),
            ),
            reason => self.add(
                pin_class(reason),
                Severity::P1,
                cp.evidence(state_key::STOP_REASON),
                format!("the loop stopped on {reason} and stays ABORTED, though the pins hold now"),
                self.recover("--restore-pinned"),
            ),
        }
    }

    /// A `permission_hijack` stop no pin explains: what the runner holds outside the
    /// repository (pins.home: the engine's user-level files, the env file) against what is
    /// there now, each changed path a P0 naming what was added where that can be told, with
    /// the recover that takes exactly that away, else what to review. Whether it reported
    /// something (a change, or that it cannot compare).
    fn check_home(&mut self, cp: &Checkpoint) -> bool {
        let Some(record) = crate::home::Record::read(self.dir) else {
            return false;
        };
        let changes = match record.changes() {
            Ok(c) if c.is_empty() => return false,
            Ok(c) => c,
            Err(why) => {
                self.add(
                    FindingClass::PermissionHijack,
                    Severity::P1,
                    cp.evidence(state_key::STOP_REASON),
                    format!(
                        "the loop stopped on permission_hijack; whether what it holds outside the repository (pins.home: the engine's user-level files, the env file) changed cannot be told here: {why}"
                    ),
                    format!("install perl, then orbit audit {}", self.shown),
                );
                return true;
            }
        };
        for c in changes {
            let (message, fix) = if c.undo.is_some() {
                (
                    format!(
                        "{} (permission_hijack): it is outside the repository, and what it names runs in the engine's next runs, the loop's and yours. The fix takes exactly that away (the old copy goes to the backup) and the loop goes on; if you put it there, accept it with {}",
                        c.describe(),
                        self.recover("--repin")
                    ),
                    self.recover("--restore-pinned"),
                )
            } else {
                (
                    format!(
                        "{} (permission_hijack): it is outside the repository, and what it names runs in the engine's next runs, the loop's and yours; pins.home keeps only hashes, so there is no copy to put back",
                        c.describe()
                    ),
                    format!(
                        "review {} and undo what you did not put there, then: {}",
                        crate::shell::paste_word(&c.path),
                        self.recover("--repin")
                    ),
                )
            };
            self.add(
                FindingClass::PermissionHijack,
                Severity::P0,
                format!("{}:{}", crate::contract::PINS_HOME, c.line),
                message,
                fix,
            );
        }
        true
    }

    /// events.jsonl (or its absence after a run) and progress.md.
    fn check_journals(&mut self, l: &Loop) {
        let state = l.checkpoint.as_ref().map(|c| &c.state);
        if let Some(ev) = &l.events {
            self.check_chain(ev, l.running);
            self.check_flaky_verify(ev, state);
            self.check_green_start(ev);
        } else if state.is_some_and(|s| s.started_at > 0)
            && fsx::not_regular(&self.dir.join("events.jsonl")).is_none()
        {
            self.add(
                FindingClass::ContractMissing,
                Severity::P1,
                "events.jsonl:0",
                "events.jsonl is missing although the loop has run: its history cannot be checked",
                self.recover(""),
            );
        }
        if let Some(p) = &l.progress {
            self.check_progress(p, l.running);
        }
    }

    /// The journal's hash chain, and a torn last line once no runner can finish it.
    fn check_chain(&mut self, ev: &EventsWindow, running: bool) {
        let scope = if ev.window.whole {
            "the journal".to_string()
        } else {
            format!("the last {} lines of the journal", ev.window.lines)
        };
        if let Some((i, err)) = &ev.error {
            self.add(
                FindingClass::JournalBroken,
                Severity::P1,
                ev.window.evidence("events.jsonl", *i),
                format!("{scope} breaks here: {}", err.describe()),
                self.recover(""),
            );
        }
        if let Some(last) = &ev.long_tail {
            let evidence = match ev.window.first_line {
                Some(first) => format!("events.jsonl:{}", first + ev.window.lines),
                None => "events.jsonl:end".to_string(),
            };
            self.add(
                FindingClass::JournalBroken,
                Severity::P1,
                evidence,
                format!(
                    "events.jsonl ends in {} line of {} bytes, longer than the {} MiB of the journal the audit verifies: no event the runner writes is that long, so something else wrote it (the lines before it are verified)",
                    if last.terminated { "a" } else { "an unterminated" },
                    last.len,
                    super::read::EVENTS_WINDOW_BYTES >> 20
                ),
                format!(
                    "review it, then cut it off (truncate -s {} {}/events.jsonl) and run orbit recover {}",
                    last.start, self.shown, self.shown
                ),
            );
        } else if ev.error.is_none() && ev.torn_tail && !running {
            self.add(
                FindingClass::JournalBroken,
                Severity::P2,
                ev.window
                    .evidence("events.jsonl", ev.window.lines.saturating_sub(1)),
                "events.jsonl ends in a torn line (a cut append); the runner trims it on its next start",
                self.recover(""),
            );
        }
    }

    /// The latest flaky verify, if recent (the last three iterations) and not before DONE.
    fn check_flaky_verify(&mut self, ev: &EventsWindow, state: Option<&State>) {
        let flake = ev.events.iter().rposition(|e| {
            e.is(EventName::VerifyFail)
                && (FindingClass::parse(EventsWindow::str_field(e, "code"))
                    == Some(FindingClass::VerifyFlaky)
                    || e.value.get("flaky").and_then(|v| v.as_bool()) == Some(true))
        });
        let Some(k) = flake else { return };
        if state.is_some_and(|s| {
            s.last_status == Status::Done || ev.events[k].iteration + 3 < s.next_iteration
        }) {
            return;
        }
        let e = &ev.events[k];
        self.add(
            FindingClass::VerifyFlaky,
            Severity::P1,
            ev.evidence(k),
            format!(
                "in iteration {} verify passed, then failed on run {} ({}): a flaky check can never give PASS_K passes in a row",
                e.iteration,
                e.value.get("run").map(|v| v.to_string()).unwrap_or_default(),
                EventsWindow::str_field(e, "failing")
            ),
            format!("bash {}/verify.sh", self.shown),
        );
    }

    /// A verify that passed on the untouched tree, let through by ALLOW_GREEN_START.
    fn check_green_start(&mut self, ev: &EventsWindow) {
        if let Some(k) = ev.events.iter().rposition(|e| {
            e.is(EventName::VerifyPass)
                && EventsWindow::str_field(e, "run") == "red_gate"
                && e.value.get("allowed").and_then(|v| v.as_bool()) == Some(true)
        }) {
            self.add(
                FindingClass::VacuousVerify,
                Severity::P2,
                ev.evidence(k),
                "verify.sh passed on the untouched tree and the loop went on (ALLOW_GREEN_START=1): its checks prove little",
                format!(
                    "add a check that fails today to verify in {}/loop.toml, then orbit init --force --dir {}",
                    self.shown, self.shown
                ),
            );
        }
    }

    fn check_progress(&mut self, p: &ProgressTail, running: bool) {
        if let Some(i) = p.broken {
            self.add(
                FindingClass::JournalBroken,
                Severity::P1,
                p.window.evidence("progress.md", i),
                "progress.md's entry hash does not chain here: its history was rewritten",
                self.recover(""),
            );
        }
        if let Some(i) = p.torn
            && !running
        {
            self.add(
                FindingClass::JournalBroken,
                Severity::P2,
                p.window.evidence("progress.md", i),
                "progress.md ends in an entry without its end marker (a cut append); the runner rewrites it on its next start",
                self.recover(""),
            );
        }
        if let Some(&i) = p.stray.first() {
            self.add(
                FindingClass::JournalBroken,
                Severity::P2,
                p.window.evidence("progress.md", i),
                format!(
                    "progress.md has {} line(s) outside any entry: written by something other than the runner",
                    p.stray.len()
                ),
                self.recover(""),
            );
        }
    }

    /// The runner's own log: a failure of its machinery that no later stop resolved.
    fn check_runner_log(&mut self, running: bool) {
        let Ok(w) = tail::read_tail(&self.dir.join("runner.log"), RUNNER_LOG_WINDOW_BYTES) else {
            return;
        };
        let lines = runner_log::parse(&w.bytes);
        if !running && let Some(l) = runner_log::last_unresolved_failure(&lines) {
            self.add(
                FindingClass::ToolFailure,
                Severity::P1,
                w.evidence("runner.log", l.index),
                format!(
                    "the last run failed: {}; fix the cause, then run the loop again",
                    failure_text(&l.message)
                ),
                format!("orbit run {}", self.shown),
            );
        }
    }

    /// verify.sh holds a check, as many as loop.toml lists.
    /// A check whose latest pass ran fewer tests than on the base tree, accepted by
    /// loop.toml's allow-fewer-tests: a note (P2), so that the override is seen.
    fn check_test_counts(&mut self, counts: &[crate::counts::CheckCounts]) {
        for c in counts
            .iter()
            .filter(|c| c.latest.verdict == crate::counts::CountVerdict::Allowed)
        {
            self.add(
                FindingClass::TestCountDrop,
                Severity::P2,
                c.evidence.clone(),
                format!(
                    "{} passed though {}: loop.toml's allow-fewer-tests accepted the drop ({} run(s))",
                    c.check,
                    c.drop_text(),
                    c.accepted_drops
                ),
                format!(
                    "if the drop is not meant, remove {} from allow-fewer-tests in {}/loop.toml, then orbit init --force --dir {}",
                    c.check, self.shown, self.shown
                ),
            );
        }
    }

    fn check_validator(&mut self, cfg: Option<&LoopConfig>) {
        let Some(text) = fsx::read_text_or_none(&self.dir.join("verify.sh")) else {
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
            self.add(
                FindingClass::ValidatorGap,
                Severity::P1,
                format!("verify.sh:{line}"),
                "verify.sh has no run_check line: it fails with 'no check ran', so the loop can never be DONE",
                format!(
                    "add a check to verify in {}/loop.toml, then orbit init --force --dir {}",
                    self.shown, self.shown
                ),
            );
        } else if let Some(c) = cfg
            && c.verify.len() + c.reproduction.len() + c.regression.len() != checks
        {
            self.add(
                FindingClass::ValidatorGap,
                Severity::P2,
                "verify.sh:1",
                format!(
                    "verify.sh has {checks} run_check line(s) but loop.toml lists {} check(s): they were rendered from different settings",
                    c.verify.len() + c.reproduction.len() + c.regression.len()
                ),
                format!("orbit init --force --dir {}", self.shown),
            );
        }
    }

    /// Why the loop's runs are not sandboxed, when they are not: `sandbox = "none"`, or
    /// `auto` where the runner's last probe (its log's last `sandbox:` line) found that
    /// bubblewrap cannot run. None while they are, or before an `auto` loop's first run.
    fn unsandboxed_why(&self, c: &LoopConfig) -> Option<String> {
        match c.sandbox {
            crate::config::Sandbox::None => Some("sandbox = \"none\"".to_string()),
            crate::config::Sandbox::Bwrap => None,
            crate::config::Sandbox::Auto => {
                let w =
                    tail::read_tail(&self.dir.join("runner.log"), RUNNER_LOG_WINDOW_BYTES).ok()?;
                let lines = runner_log::parse(&w.bytes);
                let last = lines
                    .iter()
                    .rev()
                    .find(|l| l.ts.is_some() && l.message.starts_with("sandbox: "))?;
                let why = last.message.strip_prefix("sandbox: none (")?;
                Some(why.split_once("):").map_or(why, |(w, _)| w).to_string())
            }
        }
    }

    /// Sandboxed runs with the network open: a note (P2), since the agent, and the project
    /// code its checks run, may then send what they can read to any host and fetch
    /// instructions from any; the allowlist keeps them to the engine's API and allow-hosts.
    /// Evidence: the `sandbox-network` line, or the `sandbox` line of a loop.toml written
    /// before the setting (whose network stays open).
    fn check_network(&mut self, c: &LoopConfig, network_line: usize, sandbox_line: usize) {
        if c.sandbox_network != SandboxNetwork::Open {
            return;
        }
        let has_key = fsx::read_text_or_none(&self.dir.join("loop.toml"))
            .is_some_and(|t| t.lines().any(|l| l.starts_with("sandbox-network")));
        let (line, why) = if has_key {
            (network_line, "sandbox-network = \"open\"")
        } else {
            (
                sandbox_line,
                "loop.toml has no sandbox-network: it was written before the allowlist, and its network stays open",
            )
        };
        self.add(
            FindingClass::NetworkOpen,
            Severity::P2,
            format!("loop.toml:{line}"),
            format!(
                "sandboxed runs have the network open ({why}): the agent and the code its checks run can reach any host, to send what they can read or fetch instructions"
            ),
            format!(
                "set sandbox-network = \"allowlist\" in {}/loop.toml (with allow-hosts = [\"HOST:PORT\", ...] for what the checks need), then orbit init --force --dir {}",
                self.shown, self.shown
            ),
        );
    }

    /// A DONE whose change has hunks no check needs, as `orbit adequacy` measured the
    /// loop's branch head (adequacy.json): a note (P2). A record of another commit (the
    /// branch moved since) or one whose details do not hash as it says is not read.
    fn check_adequacy(&mut self, state: &State) {
        if state.last_status != Status::Done {
            return;
        }
        let branch = crate::verify::loop_branch(self.dir);
        let head = crate::envelope::git_line(
            self.dir,
            &[
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{branch}^{{commit}}"),
            ],
        );
        let Some(r) = head
            .as_deref()
            .and_then(|h| crate::adequacy::Record::of_head(self.dir, self.dir, h))
        else {
            return;
        };
        if r.hunks_needed >= r.hunks_tried {
            return;
        }
        let unneeded = r.unneeded();
        let shown: Vec<&str> = unneeded.iter().take(3).map(String::as_str).collect();
        self.add(
            FindingClass::UnneededHunks,
            Severity::P2,
            format!("{}:1", crate::adequacy::FILE),
            format!(
                "{}: {} of the DONE's changed hunks no check needs (every check passes with each reverted alone): {}{}",
                r.summary(),
                r.hunks_tried - r.hunks_needed,
                shown.join(", "),
                if unneeded.len() > 3 { ", ..." } else { "" }
            ),
            format!(
                "read them (orbit adequacy {}): drop a change no one needs, or add a check that fails without it",
                self.shown
            ),
        );
    }

    /// Agent and check runs without the OS sandbox: a note (P2), since a tamper is then
    /// caught after the run instead of refused; and holdout checks without it are not
    /// sealed: nothing the agent can read is secret, and it runs as the user, who can read
    /// the loop directory's holdout/.
    fn check_sandbox(&mut self, cfg: Option<&LoopConfig>) {
        let Some(c) = cfg else { return };
        let toml_line = |key: &str| {
            fsx::read_text_or_none(&self.dir.join("loop.toml"))
                .and_then(|t| t.lines().position(|l| l.starts_with(key)))
                .map_or(1, |i| i + 1)
        };
        let Some(why) = self.unsandboxed_why(c) else {
            self.check_network(c, toml_line("sandbox-network"), toml_line("sandbox"));
            return;
        };
        let fix = format!(
            "install bubblewrap where it is missing, set sandbox = \"auto\" (or \"bwrap\") in {}/loop.toml, then orbit init --force --dir {}",
            self.shown, self.shown
        );
        self.add(
            FindingClass::Unsandboxed,
            Severity::P2,
            format!("loop.toml:{}", toml_line("sandbox")),
            format!(
                "agent and check runs are not under the OS sandbox ({why}): a write outside the workspace is caught after the run, not refused"
            ),
            fix.clone(),
        );
        if c.holdout.is_empty() {
            return;
        }
        self.add(
            FindingClass::ValidatorGap,
            Severity::P2,
            format!("loop.toml:{}", toml_line("holdout")),
            format!(
                "the {} holdout check(s) are not sealed: without the OS sandbox the agent runs as you and can read holdout.sh and holdout/",
                c.holdout.len()
            ),
            fix,
        );
    }

    /// Settings that leave an unfinished loop no terminator but its iteration cap.
    fn check_bounds(&mut self, l: &Loop) {
        let done = l
            .checkpoint
            .as_ref()
            .is_some_and(|cp| cp.state.last_status == Status::Done);
        if let Some(c) = &l.cfg
            && !done
            && c.usd_cap.is_none()
            && parse_duration("loop-timeout", &c.loop_timeout).unwrap_or(0) == 0
        {
            let shown = self.shown;
            self.add(
                FindingClass::UnboundedLoop,
                Severity::P2,
                format!("loop.toml:{}", toml_line(&l.toml_text, "loop-timeout")),
                format!(
                    "no loop-timeout and no usd-cap: only max-iterations ({}) bounds this loop's time and spend",
                    c.max_iterations
                ),
                format!(
                    "set usd-cap (e.g. usd-cap = 20.0) or loop-timeout (e.g. \"8h\") in {shown}/loop.toml, then orbit init --force --dir {shown}"
                ),
            );
        }
    }
}

// ---- the checks of a readable checkpoint

impl Audit<'_> {
    /// Sums cost.ledger and checks it against state.env and the caps. Returns what was
    /// spent: the ledger's total (when read in full) or state.env's, whichever is more.
    /// The spend (micro-dollars) and how many agent runs reported no cost.
    fn check_spend(&mut self, l: &Loop, cp: &Checkpoint) -> (u64, u64) {
        let ledger = read_ledger(self.dir);
        let unknown = ledger.as_ref().map_or(0, |led| {
            led.entries
                .iter()
                .filter(|e| e.kind == CostKind::Unknown)
                .count() as u64
        });
        let total = ledger.as_ref().map(Ledger::total);
        let spent = total.unwrap_or(0).max(cp.state.cost_microusd);
        if let Some(led) = &ledger {
            self.check_ledger(led, cp, l.running);
        }
        if let Some(c) = &l.cfg {
            // Where the spend shows: the last ledger line, else state.env.
            let evidence = ledger
                .as_ref()
                .and_then(|l| l.entries.last())
                .map(|e| format!("cost.ledger:{}", e.line))
                .unwrap_or_else(|| cp.evidence(state_key::COST_MICROUSD));
            if let Some(cap) = LoopConfig::usd_micro(c.usd_cap) {
                self.check_usd_cap(cap, spent, evidence, cp.state.stop_reason);
                self.check_unknown_cost(c, ledger.as_ref());
            }
            if let (Some(per_iter), Some(led)) =
                (LoopConfig::usd_micro(c.usd_per_iter_cap), &ledger)
            {
                self.check_iteration_cost(per_iter, led);
            }
        }
        (spent, unknown)
    }

    /// Lines that are not ledger lines, and a total state.env does not record.
    fn check_ledger(&mut self, led: &Ledger, cp: &Checkpoint, running: bool) {
        if let Some(&(line, ref msg)) = led.errors.first() {
            self.add(
                FindingClass::StateDrift,
                Severity::P2,
                format!("cost.ledger:{line}"),
                format!(
                    "cost.ledger has {} line(s) that are not ledger lines: {msg}",
                    led.errors.len()
                ),
                self.recover(""),
            );
        }
        let (t, recorded) = (led.total(), cp.state.cost_microusd);
        if t < recorded {
            // Lines lost or removed: the runner and recover count the held spend.
            self.add(
                FindingClass::StateDrift,
                Severity::P2,
                cp.evidence(state_key::COST_MICROUSD),
                format!(
                    "cost.ledger sums to ${}, less than the ${} state.env holds (ledger lines lost or removed): the runner and orbit recover count the held spend, never the lower sum",
                    format_usd(t),
                    format_usd(recorded)
                ),
                format!(
                    "nothing to do for the cap; to make them agree, put back cost.ledger from a backup ({}/backups/) if one holds the lost lines",
                    self.shown
                ),
            );
        } else if !running && t != recorded {
            self.add(
                FindingClass::StateDrift,
                Severity::P2,
                cp.evidence(state_key::COST_MICROUSD),
                format!(
                    "state.env records ${} spent but cost.ledger sums to ${}; the runner re-sums it after the next iteration",
                    format_usd(recorded),
                    format_usd(t)
                ),
                self.recover(""),
            );
        }
    }

    /// The spend at the usd-cap, or near it.
    fn check_usd_cap(&mut self, cap: u64, spent: u64, evidence: String, reason: StopReason) {
        let raise = format!(
            "raise usd-cap in {}/loop.toml, then orbit init --force --dir {} && orbit run {}",
            self.shown, self.shown, self.shown
        );
        if spent >= cap {
            self.add(
                FindingClass::BurnRateAnomaly,
                Severity::P1,
                evidence,
                format!(
                    "spent ${} of the ${} usd-cap: {}",
                    format_usd(spent),
                    format_usd(cap),
                    if reason == StopReason::Budget {
                        "the loop is paused on its budget"
                    } else {
                        "the loop pauses at its next gate"
                    }
                ),
                raise,
            );
        } else if spent.saturating_mul(10) >= cap.saturating_mul(8) {
            self.add(
                FindingClass::BurnRateAnomaly,
                Severity::P2,
                evidence,
                format!(
                    "spent ${} of the ${} usd-cap (80% or more)",
                    format_usd(spent),
                    format_usd(cap)
                ),
                raise,
            );
        }
    }

    /// Runs of unknown cost with no estimate to count them by: the usd-cap cannot hold. For a
    /// built-in engine whose CLI reports no cost (copilot), said before any run too.
    fn check_unknown_cost(&mut self, c: &LoopConfig, ledger: Option<&Ledger>) {
        let no_runs = ledger.is_none_or(|l| l.entries.is_empty());
        if no_runs
            && c.cost_estimate_usd.is_none()
            && c.engine != crate::engine::Engine::Custom
            && !c.engine.reports_cost()
        {
            self.add(
                FindingClass::BurnRateAnomaly,
                Severity::P2,
                "loop.toml:1".to_string(),
                format!(
                    "{} reports no cost and no cost-estimate-usd is set: the usd-cap counts nothing",
                    c.engine
                ),
                format!(
                    "set cost-estimate-usd in {}/loop.toml, then orbit init --force --dir {}",
                    self.shown, self.shown
                ),
            );
            return;
        }
        if let Some(l) = ledger
            && let Some(e) = l.entries.iter().rev().find(|e| e.kind == CostKind::Unknown)
            && c.cost_estimate_usd.is_none()
        {
            self.add(
                FindingClass::BurnRateAnomaly,
                Severity::P2,
                format!("cost.ledger:{}", e.line),
                "the agent reports no cost and no cost-estimate-usd is set: the usd-cap cannot hold",
                format!(
                    "set cost-estimate-usd in {}/loop.toml, then orbit init --force --dir {}",
                    self.shown, self.shown
                ),
            );
        }
    }

    /// The last iteration's cost at or over the usd-per-iter-cap.
    fn check_iteration_cost(&mut self, per_iter: u64, ledger: &Ledger) {
        let Some(last) = ledger.entries.last() else {
            return;
        };
        let cost = ledger.iteration_total(last.iteration);
        if cost >= per_iter {
            self.add(
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
                    self.shown, self.shown
                ),
            );
        }
    }

    /// The last three iterations' commits: one that failed, paths left out of one.
    fn check_commits(&mut self, last_done: u64) {
        for n in (last_done.saturating_sub(2)..=last_done).filter(|n| *n >= 1) {
            let rel = iter_rel(n);
            let d = self.dir.join(&rel);
            if let Some(t) = fsx::read_text_or_none(&d.join("commit.txt"))
                && t.lines().next() == Some("failed")
            {
                self.add(
                    FindingClass::CommitScopeRisk,
                    Severity::P1,
                    format!("{rel}/commit.txt:1"),
                    format!(
                        "iteration {n}'s commit failed: its changes stay uncommitted in the work tree (see {rel}/commit.log)"
                    ),
                    format!("cat {}/{rel}/commit.log", self.shown),
                );
            }
            if let Some(t) = fsx::read_text_or_none(&d.join("baseline-touched.txt"))
                && !t.trim().is_empty()
            {
                self.add(
                    FindingClass::CommitScopeRisk,
                    Severity::P2,
                    format!("{rel}/baseline-touched.txt:1"),
                    format!(
                        "iteration {n} changed {} path(s) that were dirty before the loop began; they were left out of its commit",
                        t.lines().count()
                    ),
                    format!("cat {}/{rel}/baseline-touched.txt", self.shown),
                );
            }
        }
    }

    /// A runner that died mid-iteration (no runner is alive and no recovery followed).
    /// Returns whether it did.
    fn check_crash(&mut self, l: &Loop, cp: &Checkpoint, records: &records::Input) -> bool {
        let Some((evidence, message)) = find_crash(self.dir, l.events.as_ref(), cp) else {
            return false;
        };
        if records::unannounced_next(records) {
            // Written, then the runner died before its iteration_result: a record the
            // journal does not vouch for, which the next run does again (never takes).
            let n = cp.state.next_iteration;
            self.add(
                FindingClass::Crashed,
                Severity::P1,
                format!("{}/result.env:1", iter_rel(n)),
                format!(
                    "iteration {n} was recorded (result.env) but never announced (no iteration_result): the runner died right after writing it; the record is not evidence, and the next run does the iteration again"
                ),
                format!("orbit run {}", self.shown),
            );
            return true;
        }
        self.add(
            FindingClass::Crashed,
            Severity::P1,
            evidence,
            format!("{message} (a rerun also resumes it)"),
            self.recover(""),
        );
        true
    }

    /// The runner gone, its agents still here.
    fn check_orphans(&mut self, l: &Loop) {
        if l.running || !Path::new("/proc/self").exists() {
            return;
        }
        let pids = probe::owned_processes(&l.canonical);
        if pids.is_empty() {
            self.check_unmarked_leftovers(l);
            return;
        }
        let list = pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        self.add(
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

    /// Processes without the loop's mark or a terminal that work in its workspace (or a
    /// candidate's worktree) while no runner runs: an agent run's daemon that shed the mark
    /// (`env -i setsid`) would be one. Not proven the loop's, so reported (P1), not
    /// killed: the user looks at them first.
    fn check_unmarked_leftovers(&mut self, l: &Loop) {
        let ws = workspace_of(l);
        let ws = Path::new(&ws);
        let ws = fs::canonicalize(ws).unwrap_or_else(|_| ws.to_path_buf());
        // Candidate worktrees sit beside the workspace: <workspace>.c1, .c2 ...
        let cands: Vec<PathBuf> = (1..=8)
            .map(|k| {
                let mut p = ws.clone().into_os_string();
                p.push(format!(".c{k}"));
                PathBuf::from(p)
            })
            .filter(|p| p.is_dir())
            .collect();
        let mut dirs: Vec<&Path> = Vec::new();
        if ws.is_dir() {
            dirs.push(&ws);
        }
        dirs.extend(cands.iter().map(PathBuf::as_path));
        let found = probe::working_in(&dirs);
        if found.is_empty() {
            return;
        }
        let list = found
            .iter()
            .map(|(p, _)| p.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let first = found
            .iter()
            .map(|(p, c)| {
                let c: String = c.chars().take(80).collect();
                format!("{p} ({})", crate::render::code_span(&c))
            })
            .take(3)
            .collect::<Vec<_>>()
            .join(", ");
        self.add(
            FindingClass::OrphanAgent,
            Severity::P1,
            format!("/proc/{}/cwd:0", found[0].0),
            format!(
                "{} process(es) work in this loop's workspace with no runner, no terminal and without the loop's mark: {first}. An agent run may have left them (a daemon that shed its environment); they can change the tree between ticks",
                found.len()
            ),
            format!("look at them (ps -o pid,lstart,args -p {list}), then kill {list} if they are not yours"),
        );
    }

    /// The checkpoint against progress.md and the journal's last state_write.
    fn check_drift(&mut self, l: &Loop, cp: &Checkpoint, recovered: bool) {
        self.check_drift_from_progress(l.progress.as_ref(), cp, recovered);
        if let Some(ev) = &l.events {
            self.check_drift_from_events(ev, &cp.state);
        }
    }

    fn check_drift_from_progress(
        &mut self,
        progress: Option<&ProgressTail>,
        cp: &Checkpoint,
        recovered: bool,
    ) {
        let state = &cp.state;
        let next = state.next_iteration;
        // A recovery that set the checkpoint, last in progress.md, accounts for it (after a
        // sealed history, say, whose later entries are in its backup).
        let stated = progress.is_some_and(|p| p.last_recovery_next() == Some(next));
        if let Some(p) = progress
            && let Some((n, status, i)) = p.last_recorded()
        {
            let aborted_here = state.last_status == Status::Aborted && n == next;
            // Recovery sets a BLOCKED or ABORTED iteration aside to be retried: its entry
            // stays.
            let retried_here = recovered && n == next;
            if n >= next && !aborted_here && !retried_here {
                self.add(
                    FindingClass::StateDrift,
                    Severity::P1,
                    p.window.evidence("progress.md", i),
                    format!(
                        "progress.md records iteration {n} ({status}) but state.env says the next iteration is {next}: the checkpoint is older than the history"
                    ),
                    self.recover(""),
                );
            } else if n + 1 < next && !stated {
                self.add(
                    FindingClass::StateDrift,
                    Severity::P1,
                    cp.evidence(state_key::NEXT_ITERATION),
                    format!(
                        "state.env says the next iteration is {next} but progress.md's last entry is iteration {n}"
                    ),
                    self.recover(""),
                );
            }
        } else if next > 1 && !stated && progress.is_some_and(|p| p.window.whole) {
            self.add(
                FindingClass::StateDrift,
                Severity::P1,
                cp.evidence(state_key::NEXT_ITERATION),
                format!(
                    "state.env says the next iteration is {next} but progress.md records no iteration"
                ),
                self.recover(""),
            );
        }
    }

    fn check_drift_from_events(&mut self, ev: &EventsWindow, state: &State) {
        let Some(k) = ev.last_pos(EventName::StateWrite) else {
            return;
        };
        let e = &ev.events[k];
        let next = state.next_iteration;
        let ev_gen = EventsWindow::u64_field(e, "gen").unwrap_or(0);
        // A status that is not a contract word cannot match the state's.
        let status = EventsWindow::str_field(e, "status");
        let same_status = Status::parse(status) == Some(state.last_status);
        let ev_next = EventsWindow::u64_field(e, "next_iteration").unwrap_or(0);
        if ev_gen > state.generation {
            self.add(
                FindingClass::StateDrift,
                Severity::P1,
                ev.evidence(k),
                format!(
                    "events.jsonl records state generation {ev_gen} but state.env is at {}: state.env was rolled back or replaced",
                    state.generation
                ),
                self.recover(""),
            );
        } else if ev_gen == state.generation && (!same_status || ev_next != next) {
            self.add(
                FindingClass::StateDrift,
                Severity::P1,
                ev.evidence(k),
                format!(
                    "events.jsonl says generation {ev_gen} was {status} with next iteration {ev_next}, but state.env says {} with {next}: state.env was edited",
                    state.last_status
                ),
                self.recover(""),
            );
        }
    }

    /// What the state says: an open circuit, the reason it stopped, a stall the
    /// signatures foretell, and a DONE or a claim of it against the last record.
    fn check_status(&mut self, l: &Loop, cp: &Checkpoint, last: Option<&ResultEnv>) {
        self.check_circuit(cp, last);
        self.check_stop_reason(cp, last);
        self.check_exhausted(l, cp);
        self.check_loop_timeout(l, cp);
        self.check_signatures(l, &cp.state);
        self.check_done(l.running, cp, last);
    }

    /// An open circuit, with the rule that opened it: failed agent runs (`CB_FAILS` of
    /// them), or the same verify failure three iterations in a row while the tree kept
    /// changing (the last record's `VERIFY_SIG` is the circuit's `CB_SIG`; no agent run
    /// failed, so `CB_FAILS` is 0 and says nothing).
    fn check_circuit(&mut self, cp: &Checkpoint, last: Option<&ResultEnv>) {
        let s = &cp.state;
        if s.cb_state != CbState::Open {
            return;
        }
        let n = cp.last_done();
        let repeated = last.filter(|r| {
            verify_outcome(r) == Some(VerifyOutcome::Fail)
                && !s.cb_sig.is_empty()
                && r.get(result_key::VERIFY_SIG) == s.cb_sig
        });
        let (evidence, why) = match repeated {
            Some(r) => (
                format!(
                    "{}/result.env:{}",
                    iter_rel(n),
                    r.line_of(result_key::VERIFY_SIG).max(1)
                ),
                format!(
                    "the same verify failure ({}) three iterations in a row (iterations {}-{n}) while the tree kept changing: the agent is not getting closer; look at the failure before going on",
                    match r.get(result_key::VERIFY_FAILING) {
                        "" => "verify.sh",
                        f => f,
                    },
                    n.saturating_sub(2).max(1)
                ),
            ),
            None if s.cb_fails > 0 => (
                cp.evidence(state_key::CB_STATE),
                format!("after {} failed iteration(s)", s.cb_fails),
            ),
            None => (
                cp.evidence(state_key::CB_STATE),
                format!(
                    "(iteration {n}'s record: {})",
                    last.map_or("none", |r| r.get(result_key::SUMMARY))
                ),
            ),
        };
        let why = if repeated.is_some() {
            format!("the circuit breaker is open on {why}")
        } else {
            format!("the circuit breaker is open {why}")
        };
        self.add(
            FindingClass::CircuitOpen,
            Severity::P1,
            evidence,
            format!("{why}; the runner refuses agent runs until its cooldown ends"),
            self.recover("--reset-circuit"),
        );
    }

    fn check_stop_reason(&mut self, cp: &Checkpoint, last: Option<&ResultEnv>) {
        let shown = self.shown;
        let reason = cp.state.stop_reason;
        let reason_line = cp.evidence(state_key::STOP_REASON);
        match reason {
            StopReason::Stalled => self.add(
                FindingClass::ConvergenceStall,
                Severity::P1,
                reason_line,
                "no progress: the tree was the same after the last iterations (see .action-sig.log); change the approach in goal.md or notes.md first",
                self.recover("--clear-stall"),
            ),
            StopReason::Oscillating => self.add(
                FindingClass::OscillationLoop,
                Severity::P1,
                reason_line,
                "the tree alternates between two states (see .action-sig.log); change the approach in goal.md or notes.md first",
                self.recover("--clear-stall"),
            ),
            StopReason::ToolFailure | StopReason::Preflight => self.add(
                FindingClass::ToolFailure,
                Severity::P1,
                last.filter(|r| {
                    AgentOutcome::parse(r.get(result_key::AGENT_OUTCOME))
                        == Some(AgentOutcome::Permanent)
                })
                    .map(|r| {
                        format!(
                            "{}/result.env:{}",
                            iter_rel(cp.last_done()),
                            r.line_of(result_key::AGENT_OUTCOME)
                        )
                    })
                    .unwrap_or(reason_line),
                last.and_then(|r| {
                    (AgentOutcome::parse(r.get(result_key::AGENT_OUTCOME))
                        == Some(AgentOutcome::Permanent))
                    .then(|| one_line(r.get(result_key::SUMMARY), 400))
                })
                .filter(|s| !s.is_empty())
                .map(|s| format!("the loop stopped on {reason}: {s}"))
                .unwrap_or_else(|| {
                    format!(
                        "the loop stopped on {reason}: the agent could not be run (check argv in loop.toml and PATH)"
                    )
                }),
                // An agent that could not be run holds the loop until a human acts: the
                // runner runs nothing until orbit recover (a refused commit, or a
                // preflight, is tried again by the next run).
                if reason == StopReason::ToolFailure
                    && last.is_some_and(|r| {
                        AgentOutcome::parse(r.get(result_key::AGENT_OUTCOME))
                            == Some(AgentOutcome::Permanent)
                    })
                {
                    self.recover("")
                } else {
                    format!("orbit run {shown}")
                },
            ),
            StopReason::VacuousVerify => self.add(
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
    }

    /// Every iteration used without a verified DONE (the EXHAUSTED verdict): nothing runs
    /// again until a human raises the cap, so it is a finding, not a note. When loop.toml
    /// allows more iterations than were run, a lower MAX_ITERATIONS in the run's
    /// environment stopped it, and a plain run goes on.
    fn check_exhausted(&mut self, l: &Loop, cp: &Checkpoint) {
        let s = &cp.state;
        if l.running
            || (s.last_status, s.stop_reason) != (Status::Blocked, StopReason::MaxIterations)
        {
            return;
        }
        let shown = self.shown;
        let ran = cp.last_done();
        let (message, fix) = match l.cfg.as_ref().map(|c| c.max_iterations) {
            Some(max) if ran < max => (
                format!(
                    "the loop stopped after {ran} of max-iterations {max} without a verified DONE: a lower MAX_ITERATIONS in its run's environment capped it; loop.toml allows more"
                ),
                format!("orbit run {shown}"),
            ),
            max => (
                format!(
                    "every allowed iteration was used without a verified DONE ({}): nothing runs again until the cap is raised; notes.md says what remains",
                    match max {
                        Some(m) => format!("{ran} of max-iterations {m}"),
                        None => format!("{ran} iteration(s) run"),
                    }
                ),
                format!(
                    "raise max-iterations in {shown}/loop.toml, then: orbit init --force --dir {shown} && orbit run {shown}"
                ),
            ),
        };
        self.add(
            FindingClass::Exhausted,
            Severity::P1,
            cp.evidence(state_key::STOP_REASON),
            message,
            fix,
        );
    }

    /// The loop's wall-clock limit reached (BLOCKED, `loop_timeout`): it counts from the
    /// first iteration (STARTED_AT), so every later run stops again at once until a human
    /// raises it, as for EXHAUSTED. When loop.toml's limit is none or longer than the loop
    /// has run, a lower LOOP_TIMEOUT in the run's environment stopped it, and a plain run
    /// goes on.
    fn check_loop_timeout(&mut self, l: &Loop, cp: &Checkpoint) {
        let s = &cp.state;
        if l.running || (s.last_status, s.stop_reason) != (Status::Blocked, StopReason::LoopTimeout)
        {
            return;
        }
        let shown = self.shown;
        let now = fsx::now_epoch();
        let ran = now.saturating_sub(s.started_at);
        let stop = l
            .events
            .as_ref()
            .and_then(|ev| {
                let k = ev.events.iter().rposition(|e| {
                    e.is(EventName::LoopStop)
                        && EventsWindow::str_field(e, "reason") == StopReason::LoopTimeout.as_str()
                })?;
                Some(format!(" (its loop_stop: {})", ev.evidence(k)))
            })
            .unwrap_or_default();
        let configured = l.cfg.as_ref().map(|c| {
            (
                c.loop_timeout.clone(),
                parse_duration("loop-timeout", &c.loop_timeout).unwrap_or(0),
            )
        });
        let (message, fix) = match configured {
            Some((text, limit)) if limit == 0 || limit > ran => (
                format!(
                    "the loop stopped on a wall-clock limit{stop} after {} since its first iteration, though loop.toml allows more (loop-timeout {text}): a lower LOOP_TIMEOUT in its run's environment stopped it",
                    super::age(now, s.started_at)
                ),
                format!("orbit run {shown}"),
            ),
            configured => (
                format!(
                    "the loop's wall-clock limit{} is reached{stop}: it has run {} since its first iteration (STARTED_AT), and the limit counts from there, so every run stops again at once, running nothing, until it is raised",
                    configured
                        .map(|(text, _)| format!(" (loop-timeout {text})"))
                        .unwrap_or_default(),
                    super::age(now, s.started_at)
                ),
                format!(
                    "raise loop-timeout in {shown}/loop.toml to {} or more (0: none), then: orbit init --force --dir {shown} && orbit run {shown}",
                    rounded_up(ran + 1)
                ),
            ),
        };
        self.add(
            FindingClass::LoopTimeout,
            Severity::P1,
            cp.evidence(state_key::STOP_REASON),
            message,
            fix,
        );
    }

    /// The signature log, where the state does not already say it.
    fn check_signatures(&mut self, l: &Loop, state: &State) {
        if !(l.running || state.last_status == Status::Continue)
            || matches!(
                state.stop_reason,
                StopReason::Stalled | StopReason::Oscillating
            )
        {
            return;
        }
        let Ok(w) = tail::read_tail(&self.dir.join(".action-sig.log"), SIGS_WINDOW_BYTES) else {
            return;
        };
        let log = sigs::parse_from(&w.bytes, w.first_line.unwrap_or(1));
        if log.sigs.is_empty() {
            return;
        }
        let window = l.cfg.as_ref().map_or(3, |c| c.convergence_window as usize);
        let evidence = w.evidence(".action-sig.log", w.lines.saturating_sub(1));
        match sigs::stall(&log.sigs, window) {
            Some(sigs::Stall::Converged { window }) => self.add(
                FindingClass::ConvergenceStall,
                Severity::P2,
                evidence,
                format!(
                    "the last {window} iterations left the same tree: the next decision stops the loop as stalled"
                ),
                self.recover("--clear-stall"),
            ),
            Some(sigs::Stall::Oscillating) => self.add(
                FindingClass::OscillationLoop,
                Severity::P2,
                evidence,
                "the last four iterations alternate between two trees (A B A B)",
                self.recover("--clear-stall"),
            ),
            None => {}
        }
    }

    /// DONE needs a passing verify on record; a claim in done.md against a failing one
    /// will be rejected.
    fn check_done(&mut self, running: bool, cp: &Checkpoint, last: Option<&ResultEnv>) {
        let last_done = cp.last_done();
        let record = |r: &ResultEnv| {
            format!(
                "{}/result.env:{}",
                iter_rel(last_done),
                r.line_of(result_key::VERIFY).max(1)
            )
        };
        if cp.state.last_status == Status::Done {
            let ok = last.is_some_and(|r| {
                Status::parse(r.get(result_key::VERDICT)) == Some(Status::Done)
                    && verify_outcome(r) == Some(VerifyOutcome::Pass)
            });
            if !ok {
                self.add(
                    FindingClass::VerifyGap,
                    Severity::P0,
                    last.map(record)
                        .unwrap_or_else(|| cp.evidence(state_key::LAST_STATUS)),
                    format!(
                        "state.env says DONE but iteration {last_done}'s record shows no verified DONE (verify {}, verdict {}): only the gate may set DONE",
                        last.map_or("missing", |r| r.get(result_key::VERIFY)),
                        last.map_or("missing", |r| r.get(result_key::VERDICT))
                    ),
                    self.recover(""),
                );
            }
        } else if !running && self.dir.join("done.md").is_file() {
            let failing = last.filter(|r| verify_outcome(r) == Some(VerifyOutcome::Fail));
            if let Some(r) = failing {
                self.add(
                    FindingClass::VerifyGap,
                    Severity::P2,
                    record(r),
                    format!(
                        "done.md claims completion but iteration {last_done}'s verify failed ({}): the gate will reject the claim",
                        r.get(result_key::VERIFY_FAILING)
                    ),
                    format!("bash {}/verify.sh", self.shown),
                );
            }
        }
    }
}

/// cost.ledger, when it is small enough to sum in full.
fn read_ledger(dir: &Path) -> Option<Ledger> {
    let path = dir.join("cost.ledger");
    let mut f = fsx::open_regular(&path).ok()?;
    let size = f.metadata().map(|m| m.len()).ok()?;
    if size > LEDGER_MAX_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut f, &mut bytes).ok()?;
    Some(ledger::parse(&bytes))
}

/// The journal's newest state_write is of a write that never happened: the runner recorded
/// generation G+1 and was stopped before it replaced state.env, which is still generation G
/// with the bytes the record before it names. The runner resumes from such a state (its
/// `resume_state_cross_check` holds the same rule); anything else ahead of state.env is an
/// edit.
fn interrupted_state_write(ev: &EventsWindow, cp: &Checkpoint) -> bool {
    let mut writes = ev
        .events
        .iter()
        .rev()
        .filter(|e| e.is(EventName::StateWrite));
    let (Some(newest), Some(older)) = (writes.next(), writes.next()) else {
        return false;
    };
    let generation = cp.state.generation;
    EventsWindow::u64_field(newest, "gen") == Some(generation + 1)
        && EventsWindow::u64_field(older, "gen") == Some(generation)
        && EventsWindow::str_field(older, "sha256") == crate::fsx::sha256_hex(cp.text.as_bytes())
}

/// Evidence that the runner died in iteration NEXT_ITERATION, and what it shows: the
/// iteration's record without a checkpoint, its files without a record, or its start in
/// the journal without an end.
fn find_crash(
    dir: &Path,
    events: Option<&EventsWindow>,
    cp: &Checkpoint,
) -> Option<(String, String)> {
    let state = &cp.state;
    let next = state.next_iteration;
    let rel = iter_rel(next);
    if read_result(dir, next).and_then(Result::ok).is_some() {
        // The journal shows the checkpoint already moved past `next`: an edited state,
        // not a crash (reported as STATE_DRIFT), unless that record is of a write the
        // runner died making.
        let journal_ahead = events.is_some_and(|ev| {
            ev.last_pos(EventName::StateWrite).is_some_and(|k| {
                EventsWindow::u64_field(&ev.events[k], "next_iteration").unwrap_or(0) > next
            })
        });
        let cut_short = events.is_some_and(|ev| interrupted_state_write(ev, cp));
        if cut_short {
            return Some((
                format!("{rel}/result.env:1"),
                format!(
                    "iteration {next} was recorded (result.env) and the runner died writing its checkpoint: the journal records state generation {}, but state.env is still generation {}, exactly as the runner last wrote it",
                    state.generation + 1,
                    state.generation
                ),
            ));
        }
        if state.last_status != Status::Aborted && !journal_ahead {
            return Some((
                format!("{rel}/result.env:1"),
                format!(
                    "iteration {next} was recorded (result.env) but never checkpointed: the runner died while finishing it"
                ),
            ));
        }
    } else {
        let next_dir = dir.join(&rel);
        let stopped_by_signal = state.stop_reason == StopReason::Signal
            && events.is_some_and(|ev| ev.ends_with(EventName::LoopStop));
        if has_attempt_files(&next_dir) && !stopped_by_signal {
            let first_file = ["prompt.md", "agent.log", "verify.log"]
                .into_iter()
                .find(|f| next_dir.join(f).is_file())
                .unwrap_or("prompt.md");
            return Some((
                format!("{rel}/{first_file}:1"),
                format!(
                    "iteration {next} started ({rel}/) but has no result.env, and no runner is alive: it died mid-iteration"
                ),
            ));
        }
    }
    let ev = events?;
    let s = ev.unended_iteration()?;
    Some((
        ev.evidence(s),
        format!(
            "iteration {} started and neither ended nor stopped, and no runner is alive: it died mid-iteration",
            ev.events[s].iteration
        ),
    ))
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

/// A duration rounded up to the unit `age` shows it in: `10h` for 9h0m1s, `2m` for 61s.
fn rounded_up(secs: u64) -> String {
    let unit = match secs {
        0..=59 => 1,
        60..=3599 => 60,
        3600..=86_399 => 3600,
        _ => 86_400,
    };
    crate::goal::format_duration(secs.div_ceil(unit).max(1) * unit)
}

fn pin_class(reason: StopReason) -> FindingClass {
    reason
        .integrity_class()
        .unwrap_or(FindingClass::ScriptTamper)
}

/// `text` (a record's, so the agent's or a CLI's words) on one line for a finding: control
/// characters become spaces, and it is cut at `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max - 3).collect();
        format!("{cut}...")
    } else {
        flat.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_flattens_and_cuts_a_records_text() {
        assert_eq!(one_line("a\nb\x1b[31mc\t", 100), "a b [31mc");
        assert_eq!(one_line("abcdefghij", 6), "abc...");
        assert_eq!(one_line("  ", 6), "");
    }
}
