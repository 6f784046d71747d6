//! `orbit recover`: evidence-based, idempotent repair of a loop's state.
//!
//! Findings → plan → atomic apply. The plan is computed from the loop directory alone
//! (state.env, its sidecar, events.jsonl, progress.md, git commit trailers, cost.ledger,
//! pins.sha256, the iteration records), then either printed (`--dry-run`) or applied:
//! every file it rewrites is first copied to `backups/<UTC time>/`, every write is atomic,
//! and state.env with its sidecar is written last. A plan with nothing in it writes
//! nothing, so a second run is a no-op. docs/RECOVER.md is the user-facing description;
//! the bash `recover.sh` implements the same derivation line for line.

pub mod evidence;
pub use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::cli::RecoverArgs;
use crate::config::{self, LoopConfig};
use crate::contract::{CbState, Status, StopReason};
use crate::error::{Error, Result};
use crate::state::{Sidecar, State};
use crate::{events, fsx, pins, progress};

use evidence::ProgressTail;

/// Exit code when a runner holds the lock (the runner's own code for it).
pub const EXIT_LOCKED: u8 = 20;

/// What the recovery will do, computed before anything is written.
#[derive(Debug, Default)]
pub struct Plan {
    /// state.env as found (None when missing).
    pub old_text: Option<Vec<u8>>,
    /// The state to write, when state.env (or its sidecar) needs writing.
    pub new_state: Option<State>,
    /// The state the loop will have afterwards (written or kept).
    pub result: Option<State>,
    /// What is repaired and why, one line each.
    pub repairs: Vec<String>,
    /// Files to (re)write besides the journal, progress and state: path, bytes, executable.
    pub writes: Vec<(PathBuf, Vec<u8>, bool)>,
    /// Files moved: from, to. Destinations inside `backups/` are filled in at apply time.
    pub moves: Vec<(PathBuf, MoveTo)>,
    pub events_cut: Option<usize>,
    pub progress_tail: Option<ProgressTail>,
    /// Notes that need no writing (evidence the user should know of).
    pub notes: Vec<String>,
    pub last_completed: u64,
}

#[derive(Debug, Clone)]
pub enum MoveTo {
    /// Into the backup directory, under this relative name.
    Backup(String),
    /// To this exact path (an iteration's retried record).
    Path(PathBuf),
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.new_state.is_none()
            && self.writes.is_empty()
            && self.moves.is_empty()
            && self.events_cut.is_none()
            && self.progress_tail.is_none()
    }
}

/// The loop a recovery acts on, and where it lives.
pub struct LoopRef {
    pub dir: PathBuf,
    pub repo: PathBuf,
    pub rel: String,
    pub name: String,
    /// The contract version in loop.toml (the fallback for CONTRACT_VERSION).
    pub loop_contract: String,
}

fn resolve(dir: Option<&Path>) -> Result<LoopRef> {
    let dir = match dir {
        Some(d) => {
            if !d.join("loop.toml").is_file() {
                return Err(Error::path(
                    d,
                    "is not a loop directory (no loop.toml): give the directory orbit init created",
                ));
            }
            d.to_path_buf()
        }
        None => crate::locate::pick_loop(None)?,
    };
    let dir = fs::canonicalize(&dir)
        .map_err(|e| Error::io(format!("cannot resolve {}", dir.display()), e))?;
    let repo = crate::locate::repo_root(&dir)?;
    let rel = dir
        .strip_prefix(&repo)
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|_| Error::path(&dir, "is outside its repository"))?;
    let cfg = LoopConfig::load(&dir.join("loop.toml")).map_err(|e| {
        Error::Usage(format!(
            "{e}\nloop.toml is pinned: restore it with `orbit recover --restore-pinned` after fixing it by hand, or from .pins/loop.toml"
        ))
    })?;
    Ok(LoopRef {
        dir,
        repo,
        rel,
        name: cfg.name,
        loop_contract: cfg.contract_version,
    })
}

/// Who holds the loop's lock, in words, probed without taking it (`locate::probe`). Where
/// /proc/locks cannot be read (not Linux), flock is asked for an instant.
fn lock_holder(dir: &Path) -> Option<String> {
    use crate::locate::probe::{self, Lock};
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    match probe::lock(&dir) {
        Lock::Runner { pid, how } if pid > 0 => {
            Some(format!("a runner (pid {pid}) holds the lock ({how})"))
        }
        Lock::Runner { how, .. } => Some(format!("a runner holds the lock ({how})")),
        Lock::StrayHolder { pid, cmdline } => {
            Some(format!("process {pid} ({cmdline}) holds the lock"))
        }
        Lock::Unknown => {
            let f = fs::OpenOptions::new()
                .read(true)
                .open(dir.join(".run-loop.lock"))
                .ok()?;
            match f.try_lock() {
                Ok(()) => {
                    let _ = f.unlock();
                    None
                }
                Err(_) => Some("a runner holds the lock (flock)".into()),
            }
        }
        Lock::Free | Lock::StaleDir { .. } => None,
    }
}

/// `orbit recover`.
pub fn run(args: &RecoverArgs) -> Result<u8> {
    if args.repin && args.restore_pinned {
        return Err(Error::Usage(
            "--repin accepts every pinned file as it is and --restore-pinned puts them back: choose one".into(),
        ));
    }
    let lp = resolve(args.dir.as_deref())?;
    if let Some(who) = lock_holder(&lp.dir) {
        eprintln!(
            "orbit: {who}: recover refuses to change a running loop. Stop the runner (or let it finish), then run `orbit recover` again."
        );
        return Ok(EXIT_LOCKED);
    }
    let now = fsx::now_epoch();
    let plan = plan(&lp, args)?;
    let flags = flag_list(args);
    if args.dry_run {
        print_dry_run(&lp, &plan, &flags);
        return Ok(0);
    }
    if plan.is_empty() {
        println!(
            "orbit: nothing to repair in {}: state.env agrees with the evidence{}",
            lp.rel,
            resume_hint(&plan)
        );
        for n in &plan.notes {
            println!("  note: {n}");
        }
        return Ok(0);
    }
    let backup = apply(&lp, &plan, &flags, now, "orbit recover")?;
    println!("orbit: recovered {}", lp.rel);
    for r in &plan.repairs {
        println!("  - {r}");
    }
    for n in &plan.notes {
        println!("  note: {n}");
    }
    println!("  backups: {}", backup);
    println!("  {}", resume_hint(&plan).trim_start_matches("; "));
    Ok(0)
}

fn resume_hint(plan: &Plan) -> String {
    match &plan.result {
        Some(s) if s.last_status == "DONE" => "; the loop is DONE".into(),
        Some(s) if s.last_status == "ABORTED" => format!(
            "; still ABORTED ({}): review the change, then --repin or --restore-pinned",
            s.stop_reason
        ),
        Some(s) => format!(
            "; the next run resumes at iteration {} ({})",
            s.next_iteration, s.last_status
        ),
        None => String::new(),
    }
}

pub fn flag_list(args: &RecoverArgs) -> Vec<&'static str> {
    let mut f = Vec::new();
    for (on, name) in [
        (args.reset_circuit, "--reset-circuit"),
        (args.clear_stall, "--clear-stall"),
        (args.repin_goal, "--repin-goal"),
        (args.repin, "--repin"),
        (args.restore_pinned, "--restore-pinned"),
        (args.migrate, "--migrate"),
    ] {
        if on {
            f.push(name);
        }
    }
    f
}

fn read_opt(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
    }
}

/// Lexically joins a pin path (relative to the loop directory) onto the loop's path
/// relative to the repository; `None` when it climbs out of the repository.
fn repo_relative(loop_rel: &str, pin_path: &str) -> Option<String> {
    let mut parts: Vec<String> = loop_rel.split('/').map(str::to_string).collect();
    for c in Path::new(pin_path).components() {
        match c {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// One line of pins.sha256 as the runner reads it: the hash before the first two spaces,
/// the path after them.
fn pin_lines(text: &str) -> Vec<(String, String)> {
    text.split_terminator('\n')
        .map(|l| match l.split_once("  ") {
            Some((h, p)) => (h.to_string(), p.to_string()),
            None => (l.to_string(), l.to_string()),
        })
        .collect()
}

fn file_hash(path: &Path) -> Option<String> {
    if !path.is_file() {
        return None;
    }
    fs::read(path).ok().map(|d| fsx::sha256_hex(&d))
}

/// Computes what the recovery will do. Reads only.
pub fn plan(lp: &LoopRef, args: &RecoverArgs) -> Result<Plan> {
    let dir = &lp.dir;
    let mut plan = Plan::default();

    // ---- the old checkpoint
    let old_text = read_opt(&dir.join("state.env"))?;
    let old = match &old_text {
        Some(b) => match State::parse(b) {
            Ok(s) => Some(s),
            Err((line, why)) => {
                plan.repairs.push(format!(
                    "state.env does not parse (line {line}: {why}): rebuilt from the evidence"
                ));
                None
            }
        },
        None => {
            plan.repairs
                .push("state.env is missing: rebuilt from the evidence".into());
            None
        }
    };
    plan.old_text = old_text.clone();
    let sidecar_bytes = read_opt(&dir.join("state.env.sha256"))?;
    let sidecar = sidecar_bytes.as_deref().and_then(evidence::sidecar);
    let sidecar_ok = match (&old, &old_text, &sidecar) {
        (Some(s), Some(t), Some((h, g))) => *h == fsx::sha256_hex(t) && *g == s.generation,
        _ => false,
    };
    if old.is_some() && !sidecar_ok {
        plan.repairs.push(match (&sidecar_bytes, &sidecar, &old) {
            (None, _, _) => "state.env.sha256 is missing: re-sealed".into(),
            (Some(_), None, _) => "state.env.sha256 is malformed: re-sealed".into(),
            (Some(_), Some((_, g)), Some(s)) if g + 1 == s.generation => format!(
                "torn checkpoint (sidecar at gen {g}, state.env at gen {}): re-sealed",
                s.generation
            ),
            (Some(_), Some((_, g)), Some(s)) => format!(
                "state.env does not match its sidecar (state gen {}, sidecar gen {g}): re-sealed after checking every key against the evidence",
                s.generation
            ),
            _ => "state.env.sha256 does not match: re-sealed".into(),
        });
    }

    // ---- the evidence
    let events_bytes = read_opt(&dir.join("events.jsonl"))?.unwrap_or_default();
    let complete = evidence::complete_lines(&events_bytes).len();
    if complete < events_bytes.len() {
        plan.events_cut = Some(complete);
        plan.repairs.push(format!(
            "events.jsonl ends in a torn line ({} bytes): trimmed",
            events_bytes.len() - complete
        ));
    }
    let ev = evidence::read_events(&events_bytes);
    let progress_bytes = read_opt(&dir.join("progress.md"))?.unwrap_or_default();
    let pg = evidence::read_progress(&progress_bytes);
    match evidence::progress_tail(&progress_bytes) {
        ProgressTail::Clean => {}
        ProgressTail::Torn(off) => {
            plan.progress_tail = Some(ProgressTail::Torn(off));
            plan.repairs.push(
                "progress.md ends in an unclosed entry (a torn append): trimmed (kept in the backup)"
                    .into(),
            );
        }
        ProgressTail::MissingNewline => {
            plan.progress_tail = Some(ProgressTail::MissingNewline);
        }
    }
    let git: Vec<u64> = evidence::git_iterations(&lp.repo, &lp.name)
        .into_iter()
        .filter(|n| !evidence::has_result(dir, *n))
        .collect();
    let ev_max = ev.verdicts.keys().next_back().copied().unwrap_or(0);
    let pg_max = pg.keys().next_back().copied().unwrap_or(0);
    let git_max = git.last().copied().unwrap_or(0);
    let last = ev_max.max(pg_max).max(git_max);
    let (verdict, source) = if let Some(v) = ev.verdicts.get(&last) {
        (v.clone(), "events.jsonl")
    } else if let Some(v) = pg.get(&last) {
        (v.clone(), "progress.md")
    } else if last > 0 {
        (String::new(), "a commit trailer")
    } else {
        (String::new(), "")
    };
    plan.last_completed = last;
    let retry = last > 0 && (verdict == "ABORTED" || verdict == "BLOCKED");
    let done = last > 0
        && ev.verdicts.get(&last).map(String::as_str) == Some("DONE")
        && evidence::result_says_done(dir, last);
    let next = if last == 0 {
        old.as_ref().map(|s| s.next_iteration).unwrap_or(1)
    } else if retry {
        last
    } else {
        last + 1
    };
    if retry && evidence::has_result(dir, last) {
        let idir = evidence::iteration_dir(dir, last);
        let mut k = 1;
        while idir.join(format!("retried.{k}")).exists() {
            k += 1;
        }
        let target = idir.join(format!("retried.{k}"));
        for entry in fs::read_dir(&idir)
            .map_err(|e| Error::io(format!("cannot read {}", idir.display()), e))?
            .flatten()
        {
            // Everything of the old attempt (files, interrupted.K/), so the rerun starts clean.
            let name = entry.file_name();
            if !name.to_string_lossy().starts_with("retried.") {
                plan.moves
                    .push((entry.path(), MoveTo::Path(target.join(name))));
            }
        }
        plan.moves.sort_by(|a, b| a.0.cmp(&b.0));
        plan.repairs.push(format!(
            "iteration {last} ended {verdict}: it is retried, its record kept in iterations/{last:06}/retried.{k}/"
        ));
    }
    if !retry && !done && last > 0 && evidence::has_result(dir, next) {
        plan.notes.push(format!(
            "iteration {next} was recorded (iterations/{next:06}/result.env) but not closed: the next run completes it without running it again"
        ));
    }

    // ---- flags that change files
    let pins_path = dir.join("pins.sha256");
    let pins_text =
        String::from_utf8_lossy(&read_opt(&pins_path)?.unwrap_or_default()).into_owned();
    let mut pin_set = pin_lines(&pins_text);
    let mut overrides: Vec<(PathBuf, String)> = Vec::new();
    if args.repin_goal {
        let goal = dir.join("goal.md");
        let hash = file_hash(&goal).ok_or_else(|| {
            Error::Refused(format!(
                "{} is missing: --repin-goal accepts goal.md as it is, so it must exist (restore it with --restore-pinned)",
                goal.display()
            ))
        })?;
        let mut pinned = false;
        for (h, p) in pin_set.iter_mut() {
            if p == "goal.md" {
                pinned = true;
                if *h != hash {
                    plan.repairs.push(format!(
                        "goal.md re-pinned (--repin-goal): {} → {hash}",
                        short(h)
                    ));
                    *h = hash.clone();
                }
            }
        }
        if !pinned {
            plan.notes
                .push("goal.md is not pinned yet: the first run pins it".into());
        } else {
            pin_copy(&mut plan, dir, "goal.md")?;
        }
    }
    if args.repin {
        for (h, p) in pin_set.iter_mut().filter(|(_, p)| !p.is_empty()) {
            let path = dir.join(&*p);
            let hash = file_hash(&path).ok_or_else(|| {
                Error::Refused(format!(
                    "the pinned file {p} is missing: put it back (orbit recover --restore-pinned) before --repin"
                ))
            })?;
            if *h != hash {
                plan.repairs
                    .push(format!("{p} re-pinned (--repin): {} → {hash}", short(h)));
                *h = hash;
            }
            if !p.contains('/') {
                let p = p.clone();
                pin_copy(&mut plan, dir, &p)?;
            }
        }
    }
    if args.restore_pinned {
        let baseline = fs::read_to_string(dir.join(".baseline-commit"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        for (want, p) in &pin_set {
            if p.is_empty() {
                continue;
            }
            let path = dir.join(p);
            if file_hash(&path).as_deref() == Some(want.as_str()) {
                continue;
            }
            let data = if !p.contains('/') {
                let copy = dir.join(".pins").join(p);
                match read_opt(&copy)? {
                    Some(d) if fsx::sha256_hex(&d) == *want => d,
                    _ => {
                        return Err(Error::Refused(format!(
                            "cannot restore {p}: .pins/{p} is missing or does not match its pin. Restore it by hand (or `orbit init --force` for a script), or accept it with --repin"
                        )));
                    }
                }
            } else {
                let rel = repo_relative(&lp.rel, p).ok_or_else(|| {
                    Error::Refused(format!("cannot restore {p}: it is outside the repository"))
                })?;
                let base = baseline.as_deref().ok_or_else(|| {
                    Error::Refused(format!(
                        "cannot restore {p}: .baseline-commit is missing. Restore it by hand with git, or accept it with --repin"
                    ))
                })?;
                let out = Command::new("git")
                    .arg("-C")
                    .arg(&lp.repo)
                    .arg("show")
                    .arg(format!("{base}:{rel}"))
                    .output()
                    .map_err(|e| Error::io("cannot run git", e))?;
                if !out.status.success() || fsx::sha256_hex(&out.stdout) != *want {
                    return Err(Error::Refused(format!(
                        "cannot restore {p}: the baseline commit {} holds no copy matching its pin. Restore it by hand, or accept it with --repin",
                        short(base)
                    )));
                }
                out.stdout
            };
            let exec = p.ends_with(".sh") && !p.contains('/')
                || fs::metadata(&path)
                    .map(|m| {
                        use std::os::unix::fs::PermissionsExt;
                        m.permissions().mode() & 0o111 != 0
                    })
                    .unwrap_or(false);
            plan.repairs.push(format!(
                "{p} restored to its pinned content (--restore-pinned)"
            ));
            overrides.push((path.clone(), want.clone()));
            plan.writes.push((path, data, exec));
        }
    }
    let new_pins: String = pin_set
        .iter()
        .map(|(h, p)| {
            if h == p {
                format!("{h}\n")
            } else {
                format!("{h}  {p}\n")
            }
        })
        .collect();
    if new_pins != pins_text && (args.repin_goal || args.repin) {
        plan.writes.push((pins_path, new_pins.into_bytes(), false));
    }
    // The pins as they will stand.
    let mut broken: Option<(String, StopReason)> = None;
    for (want, p) in &pin_set {
        if p.is_empty() {
            continue;
        }
        let path = dir.join(p);
        let have = overrides
            .iter()
            .find(|(q, _)| *q == path)
            .map(|(_, h)| h.clone())
            .or_else(|| file_hash(&path));
        if have.as_deref() != Some(want.as_str()) {
            broken = Some((p.clone(), pins::pin_reason(p)));
            break;
        }
    }
    if args.clear_stall {
        let sig = dir.join(".action-sig.log");
        if read_opt(&sig)?.is_some_and(|d| !d.is_empty()) {
            plan.writes.push((sig, Vec::new(), false));
            plan.repairs.push(
                "change signatures cleared (--clear-stall); the old ones are in the backup".into(),
            );
        }
    }
    // Leftover temp files of interrupted writes.
    let mut strays: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| Error::io(format!("cannot read {}", dir.display()), e))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp.") && e.path().is_file())
        .map(|e| e.path())
        .collect();
    strays.sort();
    for p in strays {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        plan.repairs.push(format!(
            "{name}: a leftover of an interrupted write, moved to the backup"
        ));
        plan.moves.push((p, MoveTo::Backup(name)));
    }

    // ---- the state
    let ledger = read_opt(&dir.join("cost.ledger"))?.unwrap_or_default();
    let cost = evidence::ledger_sum(&ledger);
    let (cb_state, cb_fails, cb_sig, cb_opened_at) = match (&old, args.reset_circuit) {
        (Some(s), false) => (s.cb_state, s.cb_fails, s.cb_sig.clone(), s.cb_opened_at),
        _ => (CbState::Closed, 0, String::new(), 0),
    };
    if args.reset_circuit
        && old
            .as_ref()
            .is_some_and(|s| s.cb_state != CbState::Closed || s.cb_fails != 0)
    {
        plan.repairs
            .push("circuit breaker reset to CLOSED (--reset-circuit)".into());
    }
    let ran = last > 0 || dir.join(".baseline-commit").is_file();
    let (status, reason): (Status, StopReason) = if done {
        (Status::Done, StopReason::None)
    } else if let Some((p, why)) = &broken {
        plan.notes.push(format!(
            "the pin of {p} is still broken ({why}): review the change, then --repin{} or --restore-pinned",
            if p == "goal.md" { "-goal" } else { "" }
        ));
        (Status::Aborted, *why)
    } else if cb_state == CbState::Open {
        (Status::Blocked, StopReason::CircuitOpen)
    } else if let Some(s) = &old {
        match s.last_status {
            Status::Stalled if !args.clear_stall => (Status::Stalled, s.stop_reason),
            Status::Paused => (Status::Paused, s.stop_reason),
            Status::Blocked
                if !retry
                    && s.stop_reason != StopReason::CircuitOpen
                    && s.stop_reason != StopReason::ToolFailure =>
            {
                (Status::Blocked, s.stop_reason)
            }
            Status::Ready if last == 0 => (Status::Ready, StopReason::None),
            Status::Continue => (Status::Continue, s.stop_reason),
            _ => (Status::Continue, StopReason::None),
        }
    } else if !ran {
        (Status::Ready, StopReason::None)
    } else {
        (Status::Continue, StopReason::None)
    };
    let started_at = match &old {
        Some(s) => s.started_at,
        None => ev.first_start.unwrap_or(0),
    };
    let (origin, iter_branch) = match &old {
        Some(s) => (s.origin_branch.clone(), s.iter_branch.clone()),
        None => {
            let b = format!("orbit/{}", lp.name);
            let ib = if evidence::branch_exists(&lp.repo, &b) {
                b
            } else {
                String::new()
            };
            // The runner records the starting branch in .origin-branch at the first run.
            let origin = fs::read_to_string(dir.join(".origin-branch"))
                .map(|t| t.trim_end_matches('\n').to_string())
                .ok()
                .filter(|t| crate::state::check_value("ORIGIN_BRANCH", t).is_ok())
                .unwrap_or_default();
            (origin, ib)
        }
    };
    let contract_version = if args.migrate {
        config::CONTRACT_VERSION.to_string()
    } else {
        old.as_ref()
            .map(|s| s.contract_version.clone())
            .unwrap_or_else(|| lp.loop_contract.clone())
    };
    if args.migrate
        && old
            .as_ref()
            .is_some_and(|s| s.contract_version != config::CONTRACT_VERSION)
    {
        plan.repairs.push(format!(
            "CONTRACT_VERSION migrated to {} (--migrate)",
            config::CONTRACT_VERSION
        ));
    }
    let candidate = State {
        contract_version,
        generation: old.as_ref().map(|s| s.generation).unwrap_or(0),
        next_iteration: next,
        last_status: status,
        stop_reason: reason,
        started_at,
        last_updated_at: old.as_ref().map(|s| s.last_updated_at).unwrap_or(0),
        origin_branch: origin,
        iter_branch,
        cost_microusd: cost,
        cb_state,
        cb_fails,
        cb_sig,
        cb_opened_at,
        verify_streak: old.as_ref().map(|s| s.verify_streak).unwrap_or(0),
        resume_at: old.as_ref().map(|s| s.resume_at).unwrap_or(0),
    };
    if let Some(s) = &old {
        let why = |key: &str, from: String, to: String| format!("{key} {from} → {to}");
        if s.next_iteration != candidate.next_iteration {
            let src = if last == 0 {
                "no iteration on record".to_string()
            } else {
                format!(
                    "{source}: iteration {last} ended {}",
                    if verdict.is_empty() {
                        "(committed)"
                    } else {
                        verdict.as_str()
                    }
                )
            };
            plan.repairs.push(format!(
                "{} ({src})",
                why(
                    "NEXT_ITERATION",
                    s.next_iteration.to_string(),
                    next.to_string()
                )
            ));
        }
        if s.last_status != candidate.last_status || s.stop_reason != candidate.stop_reason {
            plan.repairs.push(why(
                "LAST_STATUS",
                format!("{} ({})", s.last_status, s.stop_reason),
                format!("{} ({})", candidate.last_status, candidate.stop_reason),
            ));
        }
        if s.cost_microusd != candidate.cost_microusd {
            plan.repairs.push(format!(
                "{} (the sum of cost.ledger)",
                why(
                    "COST_MICROUSD",
                    s.cost_microusd.to_string(),
                    cost.to_string()
                )
            ));
        }
    }
    let state_same = old_text.as_deref() == Some(candidate.print().as_bytes()) && sidecar_ok;
    if state_same {
        plan.result = Some(candidate);
    } else {
        let base = old
            .as_ref()
            .map(|s| s.generation)
            .unwrap_or(0)
            .max(sidecar.as_ref().map(|(_, g)| *g).unwrap_or(0));
        let mut s = candidate;
        s.generation = base.saturating_add(1);
        plan.new_state = Some(s.clone());
        plan.result = Some(s);
    }
    let tail = plan.progress_tail.take();
    if tail.is_some() && tail != Some(ProgressTail::MissingNewline) || !plan.is_empty() {
        plan.progress_tail = tail;
    } else {
        // Only a missing final newline: the runner's own open adds it; nothing to record.
        plan.progress_tail = None;
    }
    Ok(plan)
}

/// Plans a copy of a pinned loop file into `.pins/` when it differs.
fn pin_copy(plan: &mut Plan, dir: &Path, name: &str) -> Result<()> {
    let data = fsx::read(&dir.join(name))?;
    let copy = dir.join(".pins").join(name);
    if read_opt(&copy)?.as_deref() != Some(&data[..]) {
        plan.writes.push((copy, data, false));
    }
    Ok(())
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// A fresh backup directory name: `backups/<YYYYMMDDTHHMMSSZ>[-N]`.
fn backup_dir(dir: &Path, now: u64) -> PathBuf {
    let stamp: String = fsx::iso_utc(now)
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    let base = dir.join("backups");
    let mut candidate = base.join(&stamp);
    let mut k = 2;
    while candidate.exists() {
        candidate = base.join(format!("{stamp}-{k}"));
        k += 1;
    }
    candidate
}

/// Where a file's backup goes: loop files under their own relative path, repository
/// files under `repo/`.
fn backup_name(lp: &LoopRef, path: &Path) -> PathBuf {
    if let Ok(rel) = path.strip_prefix(&lp.dir) {
        return rel.to_path_buf();
    }
    match path.strip_prefix(&lp.repo) {
        Ok(rel) => Path::new("repo").join(rel),
        Err(_) => Path::new("other").join(path.file_name().unwrap_or_default()),
    }
}

fn copy_into(src: &Path, dst: &Path) -> Result<()> {
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| Error::io(format!("cannot create {}", parent.display()), e))?;
    }
    let data = fsx::read(src)?;
    fsx::write_atomic(dst, &data)
}

/// The `## Recovery` entry's text (heading first, no marker).
pub fn recovery_entry(
    now: u64,
    by: &str,
    flags: &[&str],
    plan: &Plan,
    result: &State,
    backup_rel: &str,
) -> String {
    let mut t = format!("## Recovery — {}\n", fsx::iso_utc(now));
    t.push_str(&format!(
        "- by: {by}{}{}\n",
        if flags.is_empty() { "" } else { " " },
        flags.join(" ")
    ));
    t.push_str(&format!(
        "- evidence: last completed iteration {}\n",
        plan.last_completed
    ));
    t.push_str("- repaired:\n");
    for r in &plan.repairs {
        t.push_str("  - ");
        t.extend(r.chars().filter(|c| !c.is_control()));
        t.push('\n');
    }
    t.push_str(&format!(
        "- state: NEXT_ITERATION={} LAST_STATUS={} STOP_REASON={} GEN={}\n",
        result.next_iteration, result.last_status, result.stop_reason, result.generation
    ));
    t.push_str(&format!("- backups: {backup_rel}/\n"));
    t
}

/// An event field value encoded as the bash `orbit_event` does.
pub fn event_value(v: &str) -> String {
    let int = v == "0"
        || (v.len() <= 19 && {
            let d = v.strip_prefix('-').unwrap_or(v);
            !d.is_empty()
                && d.len() <= 18
                && d.bytes().all(|b| b.is_ascii_digit())
                && !d.starts_with('0')
        });
    if int || v == "true" || v == "false" {
        v.to_string()
    } else {
        events::json_str(v)
    }
}

/// Applies a plan: backups first, then file moves and writes, the progress entry and the
/// event, and state.env with its sidecar last. Returns the backup directory (relative).
pub fn apply(lp: &LoopRef, plan: &Plan, flags: &[&str], now: u64, by: &str) -> Result<String> {
    let dir = &lp.dir;
    let bdir = backup_dir(dir, now);
    let brel = bdir
        .strip_prefix(dir)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    fs::create_dir_all(&bdir)
        .map_err(|e| Error::io(format!("cannot create {}", bdir.display()), e))?;
    // 1. Backups of everything that is rewritten.
    let mut to_back: Vec<PathBuf> = plan.writes.iter().map(|(p, _, _)| p.clone()).collect();
    to_back.push(dir.join("progress.md"));
    to_back.push(dir.join("events.jsonl"));
    if plan.new_state.is_some() {
        to_back.push(dir.join("state.env"));
        to_back.push(dir.join("state.env.sha256"));
    }
    for p in &to_back {
        if p.is_file() {
            copy_into(p, &bdir.join(backup_name(lp, p)))?;
        }
    }
    // 2. Moves (nothing is deleted).
    for (from, to) in &plan.moves {
        let dest = match to {
            MoveTo::Backup(name) => bdir.join(name),
            MoveTo::Path(p) => p.clone(),
        };
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| Error::io(format!("cannot create {}", parent.display()), e))?;
        }
        fs::rename(from, &dest).map_err(|e| {
            Error::io(
                format!("cannot move {} to {}", from.display(), dest.display()),
                e,
            )
        })?;
    }
    // 3. Flag writes.
    for (path, data, exec) in &plan.writes {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| Error::io(format!("cannot create {}", parent.display()), e))?;
        }
        if *exec {
            fsx::write_atomic_exec(path, data)?;
        } else {
            fsx::write_atomic(path, data)?;
        }
    }
    let result = plan
        .result
        .clone()
        .expect("a plan always carries the resulting state");
    // 4. progress.md: trim a torn tail, append the Recovery entry.
    let pg_path = dir.join("progress.md");
    let mut pg = read_opt(&pg_path)?.unwrap_or_default();
    match plan.progress_tail {
        Some(ProgressTail::Torn(off)) => pg.truncate(off),
        Some(ProgressTail::MissingNewline) => pg.push(b'\n'),
        _ => {}
    }
    let prev = evidence::progress_prev(&pg);
    let entry = recovery_entry(now, by, flags, plan, &result, &brel);
    let (closed, _) = progress::close_entry(&prev, result.next_iteration.saturating_sub(1), &entry);
    pg.extend_from_slice(closed.as_bytes());
    fsx::write_atomic(&pg_path, &pg)?;
    // 5. events.jsonl: trim a torn line, append the recovery event.
    let ev_path = dir.join("events.jsonl");
    let mut ev = read_opt(&ev_path)?.unwrap_or_default();
    if let Some(cut) = plan.events_cut {
        ev.truncate(cut);
    }
    let (seq, prev) = evidence::events_tip(&ev);
    let flag_text = if flags.is_empty() {
        "none".to_string()
    } else {
        flags.join(" ")
    };
    let fields = [
        ("by", event_value(by)),
        ("flags", event_value(&flag_text)),
        ("repairs", event_value(&plan.repairs.len().to_string())),
        (
            "next_iteration",
            event_value(&result.next_iteration.to_string()),
        ),
        ("status", event_value(result.last_status.as_str())),
        ("reason", event_value(result.stop_reason.as_str())),
        ("gen", event_value(&result.generation.to_string())),
        ("backup", event_value(&brel)),
    ];
    let line = events::build_line(
        seq + 1,
        &fsx::iso_utc(now),
        "recovery",
        result.next_iteration.saturating_sub(1),
        &fields,
        &prev,
    );
    ev.extend_from_slice(line.as_bytes());
    fsx::write_atomic(&ev_path, &ev)?;
    // A test hook, like the runner's fault points: die here, records written, checkpoint not.
    if std::env::var("ORBIT_FAULT").as_deref() == Ok("recover_before_checkpoint") {
        std::process::abort();
    }
    // 6. The checkpoint, last.
    if let Some(s) = &plan.new_state {
        let mut s = s.clone();
        s.last_updated_at = now;
        let text = s.print();
        fsx::write_atomic(&dir.join("state.env"), text.as_bytes())?;
        fsx::write_atomic(
            &dir.join("state.env.sha256"),
            Sidecar::for_state(&text, s.generation).print().as_bytes(),
        )?;
    }
    Ok(brel)
}

/// A line diff (longest common subsequence), in unified style without hunk headers.
pub fn line_diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().take(400).collect();
    let b: Vec<&str> = new.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = String::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push_str(&format!(" {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] > lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i].escape_debug()));
            i += 1;
        }
    }
    out
}

fn print_dry_run(lp: &LoopRef, plan: &Plan, flags: &[&str]) {
    println!(
        "orbit recover --dry-run {}{}: the plan (nothing is written)",
        lp.rel,
        if flags.is_empty() {
            String::new()
        } else {
            format!(" {}", flags.join(" "))
        }
    );
    if plan.is_empty() {
        println!(
            "nothing to repair: state.env agrees with the evidence{}",
            resume_hint(plan)
        );
        return;
    }
    if let Some(s) = &plan.new_state {
        let old = plan.old_text_lossy().unwrap_or_default();
        let mut s = s.clone();
        s.last_updated_at = fsx::now_epoch();
        println!("--- state.env");
        println!("+++ state.env (recovered)");
        print!("{}", line_diff(&old, &s.print()));
    }
    for r in &plan.repairs {
        println!("repair: {r}");
    }
    for (p, _, _) in &plan.writes {
        println!(
            "write: {} (the old copy to backups/)",
            p.strip_prefix(&lp.dir).unwrap_or(p).display()
        );
    }
    for (from, to) in &plan.moves {
        let to = match to {
            MoveTo::Backup(n) => format!("backups/<time>/{n}"),
            MoveTo::Path(p) => p.strip_prefix(&lp.dir).unwrap_or(p).display().to_string(),
        };
        println!(
            "move: {} → {to}",
            from.strip_prefix(&lp.dir).unwrap_or(from).display()
        );
    }
    for n in &plan.notes {
        println!("note: {n}");
    }
    println!("append: a ## Recovery entry to progress.md and a recovery event to events.jsonl");
}

impl Plan {
    fn old_text_lossy(&self) -> Option<String> {
        self.old_text
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_values_are_encoded_as_bash_does() {
        assert_eq!(event_value("12"), "12");
        assert_eq!(event_value("0"), "0");
        assert_eq!(event_value("012"), "\"012\"");
        assert_eq!(event_value("true"), "true");
        assert_eq!(event_value("--repin"), "\"--repin\"");
    }

    #[test]
    fn pin_paths_resolve_inside_the_repository() {
        assert_eq!(
            repo_relative(".orbit/x", "../../tests/a.rs").as_deref(),
            Some("tests/a.rs")
        );
        assert_eq!(repo_relative(".orbit/x", "../../../etc/passwd"), None);
    }

    #[test]
    fn the_diff_shows_changed_lines() {
        assert_eq!(line_diff("A=1\nB=2\n", "A=1\nB=3\n"), " A=1\n-B=2\n+B=3\n");
    }

    #[test]
    fn bash_knows_this_contract_version_from_the_prelude_alone() {
        let want = format!("ORBIT_CONTRACT_VERSION={}\n", config::CONTRACT_VERSION);
        assert!(crate::contract::bash::prelude().contains(&format!("readonly {want}")));
        assert!(!crate::render::LIB_RECOVER.contains("ORBIT_CONTRACT_VERSION=1"));
    }
}
