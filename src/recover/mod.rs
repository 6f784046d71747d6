//! `orbit recover`: evidence-based, idempotent repair of a loop's state.
//!
//! Findings → plan → atomic apply. The plan is computed from the loop directory alone
//! (state.env, its sidecar, events.jsonl, progress.md, git commit trailers, cost.ledger,
//! pins.sha256, the iteration records), then either printed (`--dry-run`) or applied:
//! every file it rewrites is first copied to `backups/<UTC time>/`, every write is atomic,
//! and state.env with its sidecar is written last. A plan with nothing in it writes
//! nothing, so a second run is a no-op. docs/RECOVER.md is the user-facing description;
//! the bash `recover.sh` implements the same derivation line for line.

pub mod candidates;
pub mod evidence;
pub mod workspace;
use std::collections::BTreeMap;
pub use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::cli::RecoverArgs;
use crate::config::{self, LoopConfig};
use crate::contract::{CbState, Engine, EventName, FaultPoint, Status, StopReason};
use crate::error::{Error, Result};
use crate::state::{Sidecar, State};
use crate::{events, fsx, ledger, pins, progress};

use evidence::{Ending, ProgressTail};

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
    /// Workspace paths (relative to it) that `--restore-pinned` put back or removed: their
    /// index entries are reset to the loop branch's head afterwards (`git reset -- PATHS`),
    /// so that a rename or removal the agent staged is undone too (a protect set is what git
    /// lists, the index included).
    pub ws_reset: Vec<String>,
    /// Files removed after their copy went to the backup (a permission file that appeared,
    /// a file added to a protected set: `--restore-pinned` has no pinned copy of them).
    pub removes: Vec<PathBuf>,
    /// Files outside the repository rewritten by `--restore-pinned` (a held file of the
    /// engine's in HOME without what was added to it): path, bytes, the file's mode, kept.
    pub home_writes: Vec<(PathBuf, Vec<u8>, u32)>,
    /// Files moved: from, to. Destinations inside `backups/` are filled in at apply time.
    pub moves: Vec<(PathBuf, MoveTo)>,
    pub events_cut: Option<usize>,
    pub progress_tail: Option<ProgressTail>,
    /// progress.md's chain breaks here (a byte offset): it is sealed, cut there.
    pub progress_cut: Option<usize>,
    /// progress.md's lines (1-based) outside any entry: removed.
    pub progress_stray: Vec<usize>,
    /// The journal's chain broke here: (1-based line, why, lines set aside). The lines from
    /// it on go to the backup and the recovery event, chained on the line before, says so.
    pub journal_break: Option<(usize, String, usize)>,
    /// Notes that need no writing (evidence the user should know of).
    pub notes: Vec<String>,
    /// What the user must do before the next run can go on, when a note names something
    /// recover will not touch that stops it (a workspace in the way): "moved away", say.
    pub blocked_until: Option<&'static str>,
    /// Git steps (the workspace, the user's checkout), run before any file is written.
    pub git: Vec<workspace::GitStep>,
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
            && self.git.is_empty()
            && self.writes.is_empty()
            && self.home_writes.is_empty()
            && self.removes.is_empty()
            && self.moves.is_empty()
            && self.events_cut.is_none()
            && self.progress_tail.is_none()
            && self.progress_cut.is_none()
            && self.progress_stray.is_empty()
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
    /// loop.toml's `workspace` (empty: the default).
    pub workspace_setting: String,
    /// loop.toml's `autocommit`: whether every iteration that changes the tree commits.
    pub autocommit: bool,
    /// loop.toml's protect globs: `protect`, then `auto-protect` (as the runner pins them).
    pub protect: Vec<String>,
    /// loop.toml's engine (its own permission files are watched too).
    pub engine: Engine,
}

/// The workspace loop.toml names, as an absolute path (the runner's `workspace_path_v`):
/// relative to the repository root; unset, its contract's default (the data directory's
/// from 2.4.0, `.orbit/.workspaces/<name>` before).
pub fn workspace_of(lp: &LoopRef) -> String {
    crate::locate::workspace::from_setting(
        &lp.repo,
        &lp.workspace_setting,
        &lp.name,
        &lp.loop_contract,
    )
}

fn resolve(dir: Option<&Path>) -> Result<LoopRef> {
    let dir = match dir {
        Some(d) => {
            if fs::symlink_metadata(d.join("loop.toml")).is_err() {
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
    let protect = cfg.protect_globs();
    Ok(LoopRef {
        dir,
        repo,
        rel,
        name: cfg.name,
        loop_contract: cfg.contract_version,
        workspace_setting: cfg.workspace,
        autocommit: cfg.autocommit,
        protect,
        engine: cfg.engine,
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
            let f = fsx::open_regular(&dir.join(".run-loop.lock")).ok()?;
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
    if let Some(until) = plan.blocked_until {
        return format!("; but the next run stops on the workspace until {until} (note below)");
    }
    match &plan.result {
        Some(s) if s.last_status == Status::Done => "; the loop is DONE".into(),
        Some(s) if s.last_status == Status::Aborted => format!(
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
        (args.prune_candidates, "--prune-candidates"),
    ] {
        if on {
            f.push(name);
        }
    }
    f
}

/// A file of the loop (or a pinned file): `None` when missing; a refusal when it is not a
/// regular file (never read: a FIFO would block recover).
fn read_opt(path: &Path) -> Result<Option<Vec<u8>>> {
    fsx::read_regular_opt(path)
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
/// the path after them. A line without two spaces is kept whole in both fields, so it is
/// written back as it was.
#[derive(Debug, Clone)]
struct PinLine {
    hash: String,
    path: String,
}

impl PinLine {
    fn print(&self) -> String {
        if self.hash == self.path {
            format!("{}\n", self.hash)
        } else {
            format!("{}  {}\n", self.hash, self.path)
        }
    }
}

fn pin_lines(text: &str) -> Vec<PinLine> {
    text.split_terminator('\n')
        .map(|l| match l.split_once("  ") {
            Some((h, p)) => PinLine {
                hash: h.to_string(),
                path: p.to_string(),
            },
            None => PinLine {
                hash: l.to_string(),
                path: l.to_string(),
            },
        })
        .collect()
}

/// The sha256 of a pinned file; `None` when it is missing; a refusal when it is not a
/// regular file.
fn file_hash(path: &Path) -> Result<Option<String>> {
    Ok(read_opt(path)?.map(|d| fsx::sha256_hex(&d)))
}

/// Computes what the recovery will do. Reads only.
///
/// The steps, in the order their repairs are listed: the old checkpoint, the evidence,
/// the last completed iteration and where the next run starts, the pins (and the flags
/// that change files), leftovers, then the state the evidence decides, what changed in
/// it and why, and whether anything has to be written at all.
pub fn plan(lp: &LoopRef, args: &RecoverArgs) -> Result<Plan> {
    refuse_tampered(&lp.dir)?;
    let mut p = Planner {
        lp,
        args,
        plan: Plan::default(),
        ws: String::new(),
    };
    let mut checkpoint = p.read_checkpoint()?;
    let evidence = p.read_evidence()?;
    p.distrust_unrecorded_state(&mut checkpoint, &evidence.events);
    // The workspace by which pinned workspace files are judged and restored.
    p.ws = match &checkpoint.old {
        Some(s) if !s.workspace.is_empty() => s.workspace.clone(),
        _ => workspace_of(lp),
    };
    let last = LastIteration::find(&evidence);
    p.plan.last_completed = last.n;
    p.set_aside_untrusted_records(&evidence, &last)?;
    let course = p.schedule(&last, &evidence, checkpoint.old.as_ref())?;
    let ran = last.n > 0 || lp.dir.join(".baseline-commit").is_file();
    let migrated = if args.migrate && workspace::needs_migration(lp, checkpoint.old.as_ref()) {
        Some(workspace::migrate(
            lp,
            &mut p.plan,
            checkpoint.old.as_ref(),
            ran,
        )?)
    } else {
        if args.migrate {
            // A loop of this major (2.0, 2.1): its workspace stays; loop.toml and the
            // scripts move to this contract.
            workspace::restamp(lp, &mut p.plan)?;
        }
        None
    };
    let broken = p.pins()?;
    if args.restore_pinned && !args.repin {
        p.restore_home(checkpoint.old.as_ref())?;
    }
    p.clear_stall()?;
    p.move_strays()?;
    if args.prune_candidates {
        candidates::plan(lp, &p.ws, &mut p.plan);
    }
    let mut candidate = p.candidate(&checkpoint, &evidence, &course, broken.as_ref())?;
    match migrated.and_then(|m| m.workspace) {
        Some(ws) => candidate.workspace = ws,
        None if !crate::contract::older_major(&candidate.contract_version) => {
            workspace::check(
                lp,
                &mut p.plan,
                &candidate.workspace,
                &candidate.iter_branch,
            );
        }
        None => {}
    }
    if let Some(old) = &checkpoint.old {
        p.explain(old, &candidate, &last);
    }
    p.settle_state(&checkpoint, candidate);
    p.settle_progress_tail();
    Ok(p.plan)
}

/// Refuses a loop whose files are not what the runner writes: a FIFO, a socket, a device,
/// a directory or a symlink where a loop file (or an iteration's record) belongs is a
/// `loop_tamper`. Nothing is read or changed; the user removes what is there first.
pub fn refuse_tampered(dir: &Path) -> Result<()> {
    let mut found: Vec<String> = Vec::new();
    let mut note = |rel: String, what: fsx::NotRegular| found.push(format!("{rel} is {what}"));
    for f in crate::contract::LOOP_FILES {
        if let Some(what) = fsx::not_regular(&dir.join(f)) {
            note(f.to_string(), what);
        }
    }
    for d in crate::contract::LOOP_DIRS {
        if let Ok(m) = fs::symlink_metadata(dir.join(d))
            && !m.is_dir()
        {
            note(
                d.to_string(),
                fsx::not_regular(&dir.join(d)).unwrap_or(fsx::NotRegular::Other),
            );
        }
    }
    if fs::symlink_metadata(dir.join("iterations")).is_ok_and(|m| m.is_dir()) {
        let mut idirs: Vec<(String, PathBuf)> = fs::read_dir(dir.join("iterations"))
            .map_err(|e| Error::io(format!("cannot read {}/iterations", dir.display()), e))?
            .flatten()
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .filter(|(name, _)| name.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        idirs.sort();
        for (name, path) in idirs {
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => {
                    for f in ["result.env", "commit.txt"] {
                        if let Some(what) = fsx::not_regular(&path.join(f)) {
                            note(format!("iterations/{name}/{f}"), what);
                        }
                    }
                }
                _ => {
                    let what = fsx::not_regular(&path).unwrap_or(fsx::NotRegular::Other);
                    note(format!("iterations/{name}"), what);
                }
            }
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "{}: {}: the runner never writes such a file (loop_tamper), and recover reads none of them (a FIFO would block it). Remove {}, then run orbit recover again (nothing was changed)",
        dir.display(),
        found.join("; "),
        if found.len() == 1 { "it" } else { "them" }
    )))
}

/// The plan under construction, with what every step reads.
struct Planner<'a> {
    lp: &'a LoopRef,
    args: &'a RecoverArgs,
    plan: Plan,
    /// The loop's workspace (absolute): the state's, else loop.toml's.
    ws: String,
}

/// The old checkpoint as found.
struct Checkpoint {
    /// state.env, when it parses.
    old: Option<State>,
    /// The sidecar's generation, when the sidecar is well-formed.
    sidecar_gen: Option<u64>,
    /// Whether the sidecar is well-formed and seals the parsed state.env.
    sealed: bool,
    /// Whether the sidecar is a generation behind state.env: a torn checkpoint.
    torn: bool,
    /// The generation of a state.env that was set aside as untrusted: the new one goes above it.
    distrusted_gen: Option<u64>,
}

/// What the loop's records say about its iterations.
struct Evidence {
    events: evidence::EventsEvidence,
    /// The closed iteration entries of progress.md and how each ended.
    progress: BTreeMap<u64, Ending>,
    /// Iterations committed with the loop's trailers whose record is gone.
    commits: Vec<u64>,
    /// Where events.jsonl's chain breaks (1-based line) and why: the lines from there on
    /// are not evidence, and the journal is sealed there.
    journal_break: Option<(usize, String)>,
}

/// L, the last completed iteration, and its verdict.
struct LastIteration {
    n: u64,
    /// From events.jsonl, else progress.md; none for a commit or no iteration.
    verdict: Option<Ending>,
    /// Where the verdict (or the iteration) was found.
    source: &'static str,
}

/// Where the next run starts, and why.
struct Course {
    /// L.
    last: u64,
    next: u64,
    /// L ended ABORTED or BLOCKED: it is run again.
    retry: bool,
    /// L's DONE is proven by its event and its record.
    done: bool,
}

/// A protect set of pins.sets, with the paths its glob matches in the workspace now
/// (`None` when the workspace cannot be listed).
type SetNow = (pins::SetPin, Option<Vec<Vec<u8>>>);

/// A pin still broken after the flags: the path and the stop reason it means.
struct BrokenPin {
    path: String,
    reason: StopReason,
}

/// The circuit breaker's keys.
struct Circuit {
    state: CbState,
    fails: u64,
    sig: String,
    opened_at: u64,
}

impl LastIteration {
    /// L is the highest iteration in the events, progress.md or the commits.
    fn find(ev: &Evidence) -> LastIteration {
        let ev_max = ev.events.verdicts.keys().next_back().copied().unwrap_or(0);
        let pg_max = ev.progress.keys().next_back().copied().unwrap_or(0);
        let git_max = ev.commits.last().copied().unwrap_or(0);
        let n = ev_max.max(pg_max).max(git_max);
        let (verdict, source) = if let Some(v) = ev.events.verdicts.get(&n) {
            (Some(v.clone()), "events.jsonl")
        } else if let Some(v) = ev.progress.get(&n) {
            (Some(v.clone()), "progress.md")
        } else if n > 0 {
            (None, "a commit trailer")
        } else {
            (None, "")
        };
        LastIteration { n, verdict, source }
    }

    /// The status L ended with, when its verdict is one.
    fn status(&self) -> Option<Status> {
        self.verdict.as_ref().and_then(Ending::status)
    }
}

impl Planner<'_> {
    fn repair(&mut self, why: impl Into<String>) {
        self.plan.repairs.push(why.into());
    }

    /// Reads state.env and its sidecar; a checkpoint that does not parse, or that its
    /// sidecar does not seal, is a repair.
    fn read_checkpoint(&mut self) -> Result<Checkpoint> {
        let dir = &self.lp.dir;
        let text = read_opt(&dir.join("state.env"))?;
        let old = match &text {
            Some(b) => match State::parse(b) {
                Ok(s) if crate::contract::newer_major(&s.contract_version) => {
                    return Err(Error::Refused(format!(
                        "{}/state.env was written under loop contract {}, newer than this orbit's {}: repair it with the orbit that wrote it (nothing was changed)",
                        dir.display(),
                        s.contract_version,
                        config::CONTRACT_VERSION
                    )));
                }
                Ok(s) => Some(s),
                Err((line, why)) => {
                    self.repair(format!(
                        "state.env does not parse (line {line}: {why}): rebuilt from the evidence"
                    ));
                    None
                }
            },
            None => {
                self.repair("state.env is missing: rebuilt from the evidence");
                None
            }
        };
        let sidecar_bytes = read_opt(&dir.join("state.env.sha256"))?;
        let sidecar = sidecar_bytes
            .as_deref()
            .and_then(|b| Sidecar::parse(b).ok());
        let sealed = match (&old, &text, &sidecar) {
            (Some(s), Some(t), Some(c)) => {
                c.sha256 == fsx::sha256_hex(t) && c.generation == s.generation
            }
            _ => false,
        };
        let sidecar_gen = sidecar.map(|c| c.generation);
        let torn =
            !sealed && matches!((&old, sidecar_gen), (Some(s), Some(g)) if g + 1 == s.generation);
        if let Some(s) = &old
            && !sealed
        {
            self.repair(unsealed(sidecar_bytes.is_some(), sidecar_gen, s));
        }
        self.plan.old_text = text;
        Ok(Checkpoint {
            old,
            sidecar_gen,
            sealed,
            torn,
            distrusted_gen: None,
        })
    }

    /// A state.env that is not the one the journal's last `state_write` (or `recovery`)
    /// says was written is not the runner's: the same generation with another sha256, or a
    /// later generation the journal never recorded. It is set aside and the state rebuilt
    /// from the evidence alone. A torn checkpoint (a write cut before its sidecar and its
    /// event) is the runner's own and is kept; so is a state the journal is ahead of (a
    /// recovery cut before its checkpoint); a journal that gives no sha256 (an older runner)
    /// proves nothing either way.
    fn distrust_unrecorded_state(&mut self, cp: &mut Checkpoint, ev: &evidence::EventsEvidence) {
        let (Some(old), Some(rec)) = (&cp.old, &ev.last_state_record) else {
            return;
        };
        let (Some(sha), Some(rec_gen)) = (&rec.sha256, rec.generation) else {
            return;
        };
        let have = self
            .plan
            .old_text
            .as_deref()
            .map(fsx::sha256_hex)
            .unwrap_or_default();
        let differs = old.generation == rec_gen && have != *sha;
        let unrecorded = old.generation > rec_gen;
        if cp.torn || !(differs || unrecorded) {
            return;
        }
        let why = if differs {
            format!(
                "events.jsonl:{} says gen {rec_gen} was written with sha256 {}, the file is {}",
                rec.line + 1,
                short(sha),
                short(&have)
            )
        } else {
            format!(
                "the journal's last record of it (events.jsonl:{}) is gen {rec_gen}",
                rec.line + 1
            )
        };
        self.repair(format!(
            "state.env (gen {}) is not a state the journal records ({why}): written by something other than the runner (loop_tamper); rebuilt from the evidence",
            old.generation
        ));
        cp.distrusted_gen = Some(old.generation);
        cp.old = None;
        cp.sealed = false;
    }

    /// Reads events.jsonl, progress.md and the commit trailers; a torn tail of either file
    /// is planned to be trimmed.
    fn read_evidence(&mut self) -> Result<Evidence> {
        let lp = self.lp;
        let events = self.read_events()?;
        let journal_break = self
            .plan
            .journal_break
            .as_ref()
            .map(|(line, why, _)| (*line, why.clone()));
        let progress = self.read_progress()?;
        let commits = evidence::git_iterations(&lp.repo, &lp.name)
            .into_iter()
            .filter(|n| !evidence::has_result(&lp.dir, *n))
            .collect();
        Ok(Evidence {
            events,
            progress,
            commits,
            journal_break,
        })
    }

    fn read_events(&mut self) -> Result<evidence::EventsEvidence> {
        let bytes = read_opt(&self.lp.dir.join("events.jsonl"))?.unwrap_or_default();
        let complete = evidence::complete_lines(&bytes).len();
        if complete < bytes.len() {
            self.plan.events_cut = Some(complete);
            self.repair(format!(
                "events.jsonl ends in a torn line ({} bytes): trimmed",
                bytes.len() - complete
            ));
        }
        // A broken chain is sealed: what follows the break is not evidence (it may be an
        // edit, a removal, a forgery); it stays in the backup, and the journal goes on from
        // the last line that chains, with the recovery event saying where it broke.
        let mut keep = complete;
        if let Some((i, offset, why)) = evidence::chain_break(&bytes[..complete]) {
            let dropped = bytes[offset..complete]
                .iter()
                .filter(|b| **b == b'\n')
                .count();
            keep = offset;
            self.plan.events_cut = Some(offset);
            self.plan.journal_break = Some((i + 1, why.clone(), dropped));
            self.repair(format!(
                "events.jsonl breaks at line {} ({why}): the journal is sealed there; its {dropped} line(s) from there on are kept in the backup, not read as evidence",
                i + 1
            ));
        }
        Ok(evidence::read_events(&bytes[..keep]))
    }

    fn read_progress(&mut self) -> Result<BTreeMap<u64, Ending>> {
        let bytes = read_opt(&self.lp.dir.join("progress.md"))?.unwrap_or_default();
        match evidence::progress_tail(&bytes) {
            ProgressTail::Clean => {}
            ProgressTail::Torn(off) => {
                self.plan.progress_tail = Some(ProgressTail::Torn(off));
                self.repair(
                    "progress.md ends in an unclosed entry (a torn append): trimmed (kept in the backup)",
                );
            }
            ProgressTail::MissingNewline => {
                self.plan.progress_tail = Some(ProgressTail::MissingNewline);
            }
        }
        // What stays of it (a torn tail trimmed, a final newline added) is checked as a
        // chain: from the first entry whose end-marker hash does not chain (a rewritten
        // history), progress.md is sealed — that entry and every later one go to the
        // backup, not read as evidence; lines outside any entry (not the runner's) go.
        let mut kept = match &self.plan.progress_tail {
            Some(ProgressTail::Torn(off)) => bytes[..*off].to_vec(),
            _ => bytes.clone(),
        };
        if !kept.is_empty() && !kept.ends_with(b"\n") {
            kept.push(b'\n');
        }
        let parsed = progress::parse(&kept);
        let mut limit = kept.len();
        if let Some(e) = parsed.first_broken() {
            limit = line_offset(&kept, e.line);
            let dropped = kept[limit..].iter().filter(|b| **b == b'\n').count();
            self.plan.progress_cut = Some(limit);
            self.repair(format!(
                "progress.md breaks at line {} (an entry whose end-marker hash does not chain: a rewritten history): sealed there; its {dropped} line(s) from there on are kept in the backup, not read as evidence",
                e.line
            ));
        }
        let stray: Vec<usize> = parsed
            .stray_lines
            .iter()
            .copied()
            .filter(|l| line_offset(&kept, *l) < limit)
            .collect();
        if let Some(first) = stray.first() {
            self.repair(format!(
                "progress.md has {} line(s) outside any entry (from line {first}; not the runner's): removed (kept in the backup)",
                stray.len()
            ));
            self.plan.progress_stray = stray;
        }
        Ok(evidence::read_progress(&kept[..limit]))
    }

    /// NEXT_ITERATION: after L, or L itself when it ended ABORTED or BLOCKED (its record
    /// is then moved aside, so the runner runs it afresh).
    fn schedule(
        &mut self,
        last: &LastIteration,
        ev: &Evidence,
        old: Option<&State>,
    ) -> Result<Course> {
        let dir = &self.lp.dir;
        let n = last.n;
        let retry = n > 0 && matches!(last.status(), Some(Status::Aborted | Status::Blocked));
        let claimed =
            n > 0 && ev.events.verdicts.get(&n).and_then(Ending::status) == Some(Status::Done);
        // A DONE is believed only when every record of it agrees; otherwise the iteration
        // runs again (the last trustworthy one is the one before it).
        let distrust = if claimed {
            self.done_distrusted(n, ev, old)
        } else {
            None
        };
        let done = claimed && distrust.is_none();
        let next = if n == 0 {
            old.map(|s| s.next_iteration).unwrap_or(1)
        } else if retry || distrust.is_some() {
            n
        } else {
            n + 1
        };
        if retry && evidence::has_result(dir, n) {
            self.keep_retried_record(last)?;
        }
        if let Some(why) = &distrust {
            self.plan.notes.push(format!(
                "iteration {n}'s DONE is not trusted: {why}; it runs again"
            ));
            self.set_aside_record(n, &format!("its DONE is not trusted: {why}"), None)?;
        }
        if !retry && !done && distrust.is_none() && n > 0 && evidence::has_result(dir, next) {
            self.plan.notes.push(if ev.events.announces(next) && !ev.events.results.contains_key(&next) {
                format!(
                    "iteration {next} was recorded (iterations/{next:06}/result.env) but never announced (no iteration_result): the runner died right after writing it, and the next run does the iteration again"
                )
            } else {
                format!(
                    "iteration {next} was recorded (iterations/{next:06}/result.env) but not closed: the next run completes it without running it again"
                )
            });
        }
        Ok(Course {
            last: n,
            next,
            retry,
            done,
        })
    }

    /// Why iteration `n`'s DONE (its last `iteration_end` says DONE) is not to be believed,
    /// if it is not: the first of the cross-checks that fails. (a) The journal chains
    /// throughout, and the DONE came after the last seal of a broken journal; (c) its
    /// result.env is a record that says `VERDICT=DONE` and is the one its `iteration_result`
    /// announced (its sha256), and one was announced where the runner announces them;
    /// (d) when the loop commits, the loop branch holds the iteration's commit (its
    /// `Orbit-Iteration:` trailer), or, for an iteration that changed nothing, the branch's
    /// tree is the one the record says the iteration ended with.
    fn done_distrusted(&self, n: u64, ev: &Evidence, old: Option<&State>) -> Option<String> {
        let e = &ev.events;
        if let Some((line, why)) = &ev.journal_break {
            return Some(format!(
                "the journal's chain breaks at events.jsonl:{line} ({why})"
            ));
        }
        if let (Some(seal), Some(end)) = (e.last_seal, e.end_lines.get(&n))
            && end < &seal
        {
            return Some(format!(
                "its iteration_end came before the journal was sealed after a break (events.jsonl:{})",
                seal + 1
            ));
        }
        let record = evidence::iteration_dir(&self.lp.dir, n).join("result.env");
        let bytes = fsx::read_loop_file(&record).ok();
        let parsed = bytes
            .as_deref()
            .and_then(|b| crate::result_env::parse(b).ok());
        if parsed.as_ref().and_then(|r| r.verdict()) != Some(Status::Done) {
            return Some(format!(
                "iterations/{n:06}/result.env is missing, is no record, or does not say VERDICT=DONE"
            ));
        }
        match e.results.get(&n) {
            Some(Some(sha)) => {
                let have = bytes.as_deref().map(fsx::sha256_hex).unwrap_or_default();
                if have != *sha {
                    return Some(format!(
                        "iterations/{n:06}/result.env is not the record the runner wrote (its iteration_result says sha256 {}, the file is {})",
                        short(sha),
                        short(&have)
                    ));
                }
            }
            Some(None) => {}
            None if e.announces(n) => {
                return Some(format!(
                    "no iteration_result event announces iterations/{n:06}/result.env (the runner announces every record)"
                ));
            }
            None => {}
        }
        if self.lp.autocommit {
            let branch = old
                .map(|s| s.iter_branch.clone())
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| format!("orbit/{}", self.lp.name));
            let committed =
                evidence::branch_iterations(&self.lp.repo, &branch, &self.lp.name).contains(&n);
            let unchanged = parsed.as_ref().is_some_and(|r| {
                r.get("CHANGED") == "0"
                    && !r.get("TREE_AFTER").is_empty()
                    && evidence::branch_tree(&self.lp.repo, &branch).as_deref()
                        == Some(r.get("TREE_AFTER"))
            });
            if !committed && !unchanged {
                return Some(format!(
                    "the loop commits, but no commit on {branch} carries Orbit-Iteration: {n} (and the branch's tree is not the one the record ends with)"
                ));
            }
        }
        None
    }

    /// Result records the journal does not vouch for: one whose `iteration_result` gives
    /// another sha256 (changed after the runner wrote it), and one with no
    /// `iteration_result` where the runner announces every record (planted) — save the
    /// runner's own unfinished record of iteration L+1 (it died before announcing it; the
    /// next run does it again). Each is moved aside, never deleted. L's own record, when L
    /// is retried or claims DONE, is for [`Planner::schedule`].
    fn set_aside_untrusted_records(&mut self, ev: &Evidence, last: &LastIteration) -> Result<()> {
        let e = &ev.events;
        let l_is_scheduled = matches!(
            last.status(),
            Some(Status::Aborted | Status::Blocked | Status::Done)
        );
        for n in evidence::recorded_iterations(&self.lp.dir) {
            if n == last.n && l_is_scheduled {
                continue;
            }
            let record = evidence::iteration_dir(&self.lp.dir, n).join("result.env");
            let why = match e.results.get(&n) {
                Some(Some(sha)) => {
                    let have = file_hash(&record)?.unwrap_or_default();
                    (have != *sha).then(|| {
                        format!(
                            "it is not the record the runner wrote (its iteration_result says sha256 {}, the file is {})",
                            short(sha),
                            short(&have)
                        )
                    })
                }
                Some(None) => None,
                None if e.announces(n) && n != last.n + 1 => {
                    Some("no iteration_result event announces it (planted)".to_string())
                }
                None => None,
            };
            if let Some(why) = why {
                self.set_aside_record(n, &why, Some("result.env"))?;
            }
        }
        Ok(())
    }

    /// Plans the move of iteration `n`'s record (only `file`, or everything of the attempt)
    /// into `iterations/n/untrusted.K/`.
    fn set_aside_record(&mut self, n: u64, why: &str, file: Option<&str>) -> Result<()> {
        let idir = evidence::iteration_dir(&self.lp.dir, n);
        if !fs::symlink_metadata(&idir).is_ok_and(|m| m.is_dir()) {
            return Ok(());
        }
        let mut k = 1;
        while idir.join(format!("untrusted.{k}")).exists() {
            k += 1;
        }
        let target = idir.join(format!("untrusted.{k}"));
        let mut moved = Vec::new();
        for entry in fs::read_dir(&idir)
            .map_err(|e| Error::io(format!("cannot read {}", idir.display()), e))?
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            let wanted = match file {
                Some(f) => name == f,
                None => !name.starts_with("retried.") && !name.starts_with("untrusted."),
            };
            if wanted {
                moved.push((entry.path(), MoveTo::Path(target.join(&name))));
            }
        }
        if moved.is_empty() {
            return Ok(());
        }
        self.plan.moves.extend(moved);
        self.plan.moves.sort_by(|a, b| a.0.cmp(&b.0));
        self.repair(format!(
            "iteration {n}'s record set aside in iterations/{n:06}/untrusted.{k}/: {why}"
        ));
        Ok(())
    }

    /// Plans the move of a retried iteration's record into `retried.K/`.
    fn keep_retried_record(&mut self, last: &LastIteration) -> Result<()> {
        let n = last.n;
        let verdict = last.status().map(Status::as_str).unwrap_or_default();
        let idir = evidence::iteration_dir(&self.lp.dir, n);
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
                self.plan
                    .moves
                    .push((entry.path(), MoveTo::Path(target.join(name))));
            }
        }
        self.plan.moves.sort_by(|a, b| a.0.cmp(&b.0));
        self.repair(format!(
            "iteration {n} ended {verdict}: it is retried, its record kept in iterations/{n:06}/retried.{k}/"
        ));
        Ok(())
    }

    /// The pins: `--repin-goal`, `--repin` and `--restore-pinned` as planned writes, then
    /// the first pin still broken once they are done.
    fn pins(&mut self) -> Result<Option<BrokenPin>> {
        let pins_path = self.lp.dir.join("pins.sha256");
        let bytes = read_opt(&pins_path)?;
        let text = String::from_utf8_lossy(bytes.as_deref().unwrap_or_default()).into_owned();
        let mut pins = pin_lines(&text);
        if bytes.is_none() && self.args.repin {
            self.rebuild_pins(&mut pins)?;
        }
        let sets = self.read_sets()?;
        if self.args.repin_goal {
            self.repin_goal(&mut pins)?;
        }
        if self.args.repin {
            self.repin_all(&mut pins, &sets)?;
            self.repin_home()?;
        }
        let restored = if self.args.restore_pinned {
            self.restore_pinned(&pins)?
        } else {
            Vec::new()
        };
        let appeared = self.appeared_permission_files(&text, &mut pins)?;
        let set_broken = self.protected_sets(&sets, &mut pins)?;
        let new_text: String = pins.iter().map(PinLine::print).collect();
        if new_text != text && (self.args.repin_goal || self.args.repin) {
            self.plan
                .writes
                .push((pins_path, new_text.into_bytes(), false));
        }
        Ok(
            first_broken(&self.lp.dir, &self.ws, self.lp.engine, &pins, &restored)?
                .or_else(|| {
                    appeared.into_iter().next().map(|path| BrokenPin {
                        path,
                        reason: StopReason::PermissionHijack,
                    })
                })
                .or(set_broken),
        )
    }

    /// Notes a workspace path `--restore-pinned` puts back or removes, for the index reset
    /// (the first entry of `ws_reset` is the workspace itself).
    fn note_ws_path(&mut self, path: &str) {
        let ws = self.ws.trim_end_matches('/').to_string();
        if let Some(rel) = pins::workspace_relative(path, &ws) {
            if self.plan.ws_reset.is_empty() {
                self.plan.ws_reset.push(ws.clone());
            }
            let rel = rel.to_string();
            if !self.plan.ws_reset[1..].contains(&rel) {
                self.plan.ws_reset.push(rel);
            }
        }
    }

    /// The workspace, when it is a directory (never through a link) git can list.
    fn ws_dir(&self) -> Option<&Path> {
        let ws = Path::new(self.ws.as_str());
        (!self.ws.is_empty() && fs::symlink_metadata(ws).is_ok_and(|m| m.is_dir())).then_some(ws)
    }

    /// pins.sets, each protect set with the paths its glob matches in the workspace now
    /// (`None` when the workspace cannot be listed). With `--repin` and no pins.sets, once
    /// the loop has run, loop.toml's protect globs (their sets are pinned as they are).
    fn read_sets(&mut self) -> Result<Vec<SetNow>> {
        let path = self.lp.dir.join(crate::contract::PINS_SETS);
        let mut sets = match read_opt(&path)? {
            Some(b) => pins::parse_sets(&b),
            None if self.args.repin && self.lp.dir.join(".baseline-commit").is_file() => self
                .lp
                .protect
                .iter()
                .enumerate()
                .map(|(i, g)| pins::SetPin {
                    sha256: String::new(),
                    glob: g.clone(),
                    line: i + 1,
                })
                .collect(),
            None => Vec::new(),
        };
        let ws = self.ws_dir().map(Path::to_path_buf);
        let dir = self.lp.dir.clone();
        Ok(sets
            .drain(..)
            .map(|s| {
                let now = ws
                    .as_deref()
                    .and_then(|w| crate::protect::set_files(w, &s.glob, &dir));
                (s, now)
            })
            .collect())
    }

    /// Each protect set against what its glob matches now: a file added to it since the
    /// first run is `reward_hack` like an edit (one removed shows as its missing pin).
    /// `--repin` pins the set as it is (the added files too) and rewrites pins.sets;
    /// `--restore-pinned` removes what was added (it has no pinned copy; a copy goes to the
    /// backup). Returns the first set still changed.
    fn protected_sets(
        &mut self,
        sets: &[SetNow],
        pins: &mut Vec<PinLine>,
    ) -> Result<Option<BrokenPin>> {
        let ws = self.ws.trim_end_matches('/').to_string();
        let mut broken = None;
        let mut rewritten = Vec::new();
        let mut changed = false;
        for (set, now) in sets {
            let Some(now) = now else {
                rewritten.push((set.sha256.clone(), set.glob.clone()));
                continue;
            };
            let sha = pins::set_sha(now);
            rewritten.push((sha.clone(), set.glob.clone()));
            if sha == set.sha256 {
                continue;
            }
            changed = true;
            let listed: Vec<pins::Pin> = pins
                .iter()
                .enumerate()
                .map(|(i, p)| pins::Pin {
                    sha256: p.hash.clone(),
                    path: p.path.clone(),
                    line: i + 1,
                })
                .collect();
            let (added, _) = pins::set_changes(&set.glob, now, &listed, &ws);
            for rel in added {
                let abs = format!("{ws}/{rel}");
                if self.args.repin {
                    let hash = file_hash(Path::new(&abs))?.unwrap_or_default();
                    self.repair(format!(
                        "{abs} joined the protected set '{}' after the first run: accepted and pinned as it is (--repin)",
                        set.glob
                    ));
                    pins.push(PinLine { hash, path: abs });
                } else if self.args.restore_pinned {
                    self.repair(format!(
                        "{abs} was added to the protected set '{}' after the first run and has no pinned copy: removed (--restore-pinned; the copy is in the backup)",
                        set.glob
                    ));
                    self.note_ws_path(&abs);
                    self.plan.removes.push(PathBuf::from(abs));
                }
            }
            if !self.args.repin && !self.args.restore_pinned && broken.is_none() {
                broken = Some(BrokenPin {
                    path: format!("the protected set '{}' (pins.sets:{})", set.glob, set.line),
                    reason: StopReason::RewardHack,
                });
            }
        }
        if self.args.repin && changed {
            self.repair("pins.sets re-pinned (--repin): each protect set as it is now");
            self.plan.writes.push((
                self.lp.dir.join(crate::contract::PINS_SETS),
                pins::print_sets(&rewritten).into_bytes(),
                false,
            ));
        }
        Ok(broken)
    }

    /// `--repin` with no pins.sha256: the manifest is made again from the files as they
    /// are, as `orbit init` and the runner's first run make it (the loop files, then, once
    /// the loop has run, goal.md and the protected and agent permission files of the
    /// workspace).
    fn rebuild_pins(&mut self, pins: &mut Vec<PinLine>) -> Result<()> {
        let dir = self.lp.dir.clone();
        for name in pins::INIT_PINNED {
            if let Some(hash) = file_hash(&dir.join(name))? {
                pins.push(PinLine {
                    hash,
                    path: name.to_string(),
                });
            }
        }
        if dir.join(".baseline-commit").is_file() {
            if let Some(hash) = file_hash(&dir.join("goal.md"))? {
                pins.push(PinLine {
                    hash,
                    path: "goal.md".into(),
                });
            }
            if let Some(ws) = self.ws_dir().map(Path::to_path_buf) {
                let mut files: Vec<Vec<u8>> = Vec::new();
                for g in &self.lp.protect {
                    files.extend(crate::protect::set_files(&ws, g, &dir).unwrap_or_default());
                }
                files.extend(
                    pins::permission_files_in(&ws, Some(self.lp.engine))
                        .into_iter()
                        .map(String::into_bytes),
                );
                files.sort();
                files.dedup();
                for f in files {
                    let rel = String::from_utf8_lossy(&f).into_owned();
                    if rel.starts_with(".orbit-agent/") || rel.contains(['\n', '\\']) {
                        continue;
                    }
                    let abs = ws.join(&rel);
                    if let Some(hash) = file_hash(&abs)? {
                        pins.push(PinLine {
                            hash,
                            path: abs.display().to_string(),
                        });
                    }
                }
            }
        }
        self.repair(format!(
            "pins.sha256 is missing: made again from the files as they are (--repin): {} pin(s)",
            pins.len()
        ));
        Ok(())
    }

    /// Agent permission files in the workspace that the first run did not pin (they were
    /// not there): `--repin` pins each as it is, `--restore-pinned` removes each (it has
    /// no pinned copy to put back; a copy goes to the backup). Returns those that stay.
    fn appeared_permission_files(
        &mut self,
        pins_text: &str,
        pins: &mut Vec<PinLine>,
    ) -> Result<Vec<String>> {
        let (listed, _) = pins::parse(pins_text.as_bytes());
        let ws = self.ws.trim_end_matches('/').to_string();
        let mut stay = Vec::new();
        for rel in pins::appeared_permission_files(&self.lp.dir, &ws, Some(self.lp.engine), &listed)
        {
            let abs = format!("{ws}/{rel}");
            if self.args.repin {
                let hash = file_hash(Path::new(&abs))?.unwrap_or_default();
                self.repair(format!(
                    "{abs} appeared after the first run: accepted and pinned as it is (--repin)"
                ));
                pins.push(PinLine { hash, path: abs });
            } else if self.args.restore_pinned {
                self.repair(format!(
                    "{abs} appeared after the first run and has no pinned copy to restore: removed (--restore-pinned; the copy is in the backup)"
                ));
                self.note_ws_path(&abs);
                self.plan.removes.push(PathBuf::from(abs));
            } else {
                stay.push(abs);
            }
        }
        Ok(stay)
    }

    /// `--repin-goal`: goal.md's pin takes its current hash, `.pins/goal.md` its content.
    fn repin_goal(&mut self, pins: &mut [PinLine]) -> Result<()> {
        let goal = self.lp.dir.join("goal.md");
        let hash = file_hash(&goal)?.ok_or_else(|| {
            Error::Refused(format!(
                "{} is missing: --repin-goal accepts goal.md as it is, so it must exist (restore it with --restore-pinned)",
                goal.display()
            ))
        })?;
        let mut pinned = false;
        for pin in pins.iter_mut().filter(|pin| pin.path == "goal.md") {
            pinned = true;
            if pin.hash != hash {
                self.repair(format!(
                    "goal.md re-pinned (--repin-goal): {} → {hash}",
                    short(&pin.hash)
                ));
                pin.hash = hash.clone();
            }
        }
        if pinned {
            self.pin_copy("goal.md")
        } else {
            self.plan
                .notes
                .push("goal.md is not pinned yet: the first run pins it".into());
            Ok(())
        }
    }

    /// `--restore-pinned` of what the runner holds outside the repository (pins.home), for
    /// a loop ABORTED on `permission_hijack`: what was added to a held file since the first
    /// run is taken away exactly (a JSON file rewritten without the entries whose removal
    /// gives the recorded hash again, checked before; files added to a held directory, or a
    /// held file that was absent, removed), each old copy to the backup. A change that
    /// cannot be told (the record keeps only hashes) is refused, with what to do instead.
    fn restore_home(&mut self, old: Option<&State>) -> Result<()> {
        if !old.is_some_and(|s| {
            s.last_status == Status::Aborted && s.stop_reason == StopReason::PermissionHijack
        }) {
            return Ok(());
        }
        let Some(record) = crate::home::Record::read(&self.lp.dir) else {
            return Ok(());
        };
        let shown = crate::shell::paste_word(&self.lp.dir.display().to_string());
        let changes = record.changes().map_err(|why| {
            Error::Refused(format!(
                "--restore-pinned cannot check what the loop holds outside the repository ({}): {why}",
                crate::contract::PINS_HOME
            ))
        })?;
        for c in changes {
            match c.undo.clone() {
                Some(crate::home::Undo::Rewrite(bytes)) => {
                    // Through a link (a dotfiles manager's), its target is rewritten.
                    let path = fs::canonicalize(&c.path)
                        .map_err(|e| Error::io(format!("cannot read {}", c.path), e))?;
                    let mode = fs::metadata(&path)
                        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
                        .map_err(|e| Error::io(format!("cannot read {}", c.path), e))?;
                    self.repair(format!(
                        "{} rewritten without {} (--restore-pinned: what the loop's first run held of it is as it was; the old copy to the backup)",
                        c.path,
                        c.added.join(", ")
                    ));
                    self.plan.home_writes.push((path, bytes, mode));
                }
                Some(crate::home::Undo::Remove(paths)) => {
                    self.repair(format!(
                        "{}: removed {} (--restore-pinned: it was not there at the loop's first run; a copy to the backup)",
                        c.path,
                        c.added.join(", ")
                    ));
                    self.plan.removes.extend(paths);
                }
                None => {
                    return Err(Error::Refused(format!(
                        "--restore-pinned cannot restore {}. pins.home keeps only hashes of what is outside the repository, so there is no copy to put back: review it, undo what you did not put there, then accept it as it is with orbit recover {shown} --repin",
                        c.describe()
                    )));
                }
            }
        }
        Ok(())
    }

    /// `--repin`: every pin takes its file's current hash; pinned loop files are copied
    /// to `.pins/`.
    /// `--repin` of what the runner holds outside the repository (pins.home: the engine's
    /// user-level files and the env file): the record goes to the backup, and the next run
    /// holds them as they are then (the record is the runner's to compute).
    fn repin_home(&mut self) -> Result<()> {
        let path = self.lp.dir.join(crate::contract::PINS_HOME);
        if fs::symlink_metadata(&path).is_err() {
            return Ok(());
        }
        self.repair(format!(
            "{} set aside (--repin): the engine's user-level files and the env file are held as they are at the next run",
            crate::contract::PINS_HOME
        ));
        self.plan
            .moves
            .push((path, MoveTo::Backup(crate::contract::PINS_HOME.to_string())));
        Ok(())
    }

    fn repin_all(&mut self, pins: &mut Vec<PinLine>, sets: &[SetNow]) -> Result<()> {
        let ws = self.ws.clone();
        // A protected file gone from its set is accepted as removed: its pin goes.
        let mut kept = Vec::new();
        for pin in pins.drain(..) {
            let in_set = pins::workspace_relative(&pin.path, &ws)
                .is_some_and(|rel| sets.iter().any(|(s, _)| pins::glob_match(&s.glob, rel)));
            if in_set && file_hash(&self.lp.dir.join(&pin.path))?.is_none() {
                self.repair(format!(
                    "{} left its protected set: accepted as removed, its pin dropped (--repin)",
                    pin.path
                ));
                continue;
            }
            kept.push(pin);
        }
        *pins = kept;
        for pin in pins.iter_mut().filter(|pin| !pin.path.is_empty()) {
            let p = &pin.path;
            let hash = file_hash(&self.lp.dir.join(p))?.ok_or_else(|| {
                Error::Refused(format!(
                    "the pinned file {p} is missing: put it back (orbit recover --restore-pinned) before --repin"
                ))
            })?;
            if pin.hash != hash {
                self.repair(format!(
                    "{p} re-pinned (--repin): {} → {hash}",
                    short(&pin.hash)
                ));
                pin.hash = hash;
            }
            if !pin.path.contains('/') {
                self.pin_copy(&pin.path)?;
            }
        }
        Ok(())
    }

    /// `--restore-pinned`: plans a write of every changed pinned file from a copy that
    /// matches its pin. Returns each restored path with the hash it will have.
    fn restore_pinned(&mut self, pins: &[PinLine]) -> Result<Vec<(PathBuf, String)>> {
        let dir = &self.lp.dir;
        let baseline = read_opt(&dir.join(".baseline-commit"))?
            .map(|s| String::from_utf8_lossy(&s).trim().to_string())
            .filter(|s| !s.is_empty());
        let mut restored = Vec::new();
        for pin in pins.iter().filter(|pin| !pin.path.is_empty()) {
            let (want, p) = (&pin.hash, &pin.path);
            let path = dir.join(p);
            if file_hash(&path)?.as_deref() == Some(want.as_str()) {
                continue;
            }
            // holdout/ is the loop directory's own (its baselines in .pins/holdout/).
            let data = if p.contains('/') && !p.starts_with("holdout/") {
                self.pinned_repo_copy(pin, baseline.as_deref())?
            } else {
                pinned_loop_copy(dir, pin)?
            };
            let exec = p.ends_with(".sh") && !p.contains('/') || is_executable(&path);
            self.repair(format!(
                "{p} restored to its pinned content (--restore-pinned)"
            ));
            restored.push((path.clone(), want.clone()));
            self.note_ws_path(&path.display().to_string());
            self.plan.writes.push((path, data, exec));
        }
        Ok(restored)
    }

    /// A protected repository file's content at the baseline commit, when it matches its pin.
    fn pinned_repo_copy(&self, pin: &PinLine, baseline: Option<&str>) -> Result<Vec<u8>> {
        let p = &pin.path;
        // A 2.0 pin names the file by its absolute path in the workspace; a 1.0 pin through
        // ../ from the loop directory. Either way its baseline is the same repository path.
        let rel = match pins::workspace_relative(p, &self.ws) {
            Some(rel) => Some(rel.to_string()),
            None if p.starts_with('/') => None,
            None => repo_relative(&self.lp.rel, p),
        }
        .ok_or_else(|| {
            Error::Refused(format!(
                "cannot restore {p}: it is outside the repository and the workspace"
            ))
        })?;
        let base = baseline.ok_or_else(|| {
            Error::Refused(format!(
                "cannot restore {p}: .baseline-commit is missing. Restore it by hand with git, or accept it with --repin"
            ))
        })?;
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.lp.repo)
            .arg("show")
            .arg(format!("{base}:{rel}"))
            .output()
            .map_err(|e| Error::io("cannot run git", e))?;
        if !out.status.success() || fsx::sha256_hex(&out.stdout) != pin.hash {
            return Err(Error::Refused(format!(
                "cannot restore {p}: the baseline commit {} holds no copy matching its pin. Restore it by hand, or accept it with --repin",
                short(base)
            )));
        }
        Ok(out.stdout)
    }

    /// Plans a copy of a pinned loop file into `.pins/` when it differs.
    fn pin_copy(&mut self, name: &str) -> Result<()> {
        let dir = &self.lp.dir;
        let data = fsx::read_regular(&dir.join(name))?;
        let copy = dir.join(".pins").join(name);
        if read_opt(&copy)?.as_deref() != Some(&data[..]) {
            self.plan.writes.push((copy, data, false));
        }
        Ok(())
    }

    /// `--clear-stall`: empties `.action-sig.log` when it holds signatures.
    fn clear_stall(&mut self) -> Result<()> {
        if !self.args.clear_stall {
            return Ok(());
        }
        let sig = self.lp.dir.join(".action-sig.log");
        if read_opt(&sig)?.is_some_and(|d| !d.is_empty()) {
            self.plan.writes.push((sig, Vec::new(), false));
            self.repair(
                "change signatures cleared (--clear-stall); the old ones are in the backup",
            );
        }
        Ok(())
    }

    /// Leftover temp files of interrupted writes go to the backup.
    fn move_strays(&mut self) -> Result<()> {
        let dir = &self.lp.dir;
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
            self.repair(format!(
                "{name}: a leftover of an interrupted write, moved to the backup"
            ));
            self.plan.moves.push((p, MoveTo::Backup(name)));
        }
        Ok(())
    }

    /// COST_MICROUSD: the sum of cost.ledger, never less than the spend the old state
    /// holds (a state the journal records): a ledger that lost lines (emptied, cut) is
    /// not a refund, and the usd-cap goes on counting what was paid.
    fn kept_spend(&mut self, ledger: u64, old: Option<&State>) -> u64 {
        match old {
            Some(o) if o.cost_microusd > ledger => {
                self.plan.notes.push(format!(
                    "COST_MICROUSD kept at {}: cost.ledger sums to {ledger}, less than the spend the state holds (lines lost or removed); a spend is never lowered",
                    o.cost_microusd
                ));
                o.cost_microusd
            }
            _ => ledger,
        }
    }

    /// The state the evidence decides (its GEN still the old one).
    fn candidate(
        &mut self,
        cp: &Checkpoint,
        ev: &Evidence,
        course: &Course,
        broken: Option<&BrokenPin>,
    ) -> Result<State> {
        let old = cp.old.as_ref();
        let cost = self.kept_spend(ledger_cost(&self.lp.dir)?, old);
        let circuit = self.circuit(old);
        let (status, reason) = self.status_and_reason(
            course,
            broken,
            circuit.state,
            old,
            ev.events.last_stop.as_ref(),
        );
        let (origin_branch, iter_branch) = branches(self.lp, old);
        let contract_version = self.contract_version(old);
        let ran = course.last > 0 || self.lp.dir.join(".baseline-commit").is_file();
        // WORKSPACE: the old state's; rebuilt, loop.toml's once a 2.0 loop has run (the
        // runner sets it at the first run from the same setting).
        let workspace = match old {
            Some(s) => s.workspace.clone(),
            None if ran && !crate::contract::older_major(&contract_version) => {
                workspace_of(self.lp)
            }
            None => String::new(),
        };
        Ok(State {
            contract_version,
            generation: old.map(|s| s.generation).unwrap_or(0),
            next_iteration: course.next,
            last_status: status,
            stop_reason: reason,
            started_at: match old {
                Some(s) => s.started_at,
                None => ev.events.first_start.unwrap_or(0),
            },
            last_updated_at: old.map(|s| s.last_updated_at).unwrap_or(0),
            origin_branch,
            iter_branch,
            cost_microusd: cost,
            cb_state: circuit.state,
            cb_fails: circuit.fails,
            cb_sig: circuit.sig,
            cb_opened_at: circuit.opened_at,
            verify_streak: old.map(|s| s.verify_streak).unwrap_or(0),
            resume_at: old.map(|s| s.resume_at).unwrap_or(0),
            workspace,
        })
    }

    /// The circuit breaker: kept, or closed by `--reset-circuit` (or with no old state).
    fn circuit(&mut self, old: Option<&State>) -> Circuit {
        let reset = self.args.reset_circuit;
        if reset && old.is_some_and(|s| s.cb_state != CbState::Closed || s.cb_fails != 0) {
            self.repair("circuit breaker reset to CLOSED (--reset-circuit)");
        }
        match old {
            Some(s) if !reset => Circuit {
                state: s.cb_state,
                fails: s.cb_fails,
                sig: s.cb_sig.clone(),
                opened_at: s.cb_opened_at,
            },
            _ => Circuit {
                state: CbState::Closed,
                fails: 0,
                sig: String::new(),
                opened_at: 0,
            },
        }
    }

    /// LAST_STATUS and STOP_REASON: the first that holds of a proven DONE, a broken pin,
    /// an open circuit, what the old state says, and whether the loop ever ran.
    fn status_and_reason(
        &mut self,
        course: &Course,
        broken: Option<&BrokenPin>,
        cb_state: CbState,
        old: Option<&State>,
        last_stop: Option<&(String, String)>,
    ) -> (Status, StopReason) {
        if course.done {
            return (Status::Done, StopReason::None);
        }
        if let Some(b) = broken {
            self.plan.notes.push(format!(
                "the pin of {} is still broken ({}): review the change, then --repin{} or --restore-pinned",
                b.path,
                b.reason,
                if b.path == "goal.md" { "-goal" } else { "" }
            ));
            return (Status::Aborted, b.reason);
        }
        if self.holds_git_tamper(old, last_stop) {
            return (Status::Aborted, StopReason::GitTamper);
        }
        if cb_state == CbState::Open {
            return (Status::Blocked, StopReason::CircuitOpen);
        }
        let ran = course.last > 0 || self.lp.dir.join(".baseline-commit").is_file();
        match old {
            Some(s) => kept_status(s, course, self.args.clear_stall),
            None if !ran => (Status::Ready, StopReason::None),
            None => (Status::Continue, StopReason::None),
        }
    }

    /// A loop stopped on `git_tamper` (by its state, or by its last `loop_stop` when there is
    /// no state to ask) stays ABORTED until `--repin` accepts git's config, hooks and
    /// excludes after a review: nothing else can put them back (contract 7).
    fn holds_git_tamper(
        &mut self,
        old: Option<&State>,
        last_stop: Option<&(String, String)>,
    ) -> bool {
        let stopped = match old {
            Some(s) => s.last_status == Status::Aborted && s.stop_reason == StopReason::GitTamper,
            None => last_stop.is_some_and(|(status, reason)| {
                status == Status::Aborted.as_str() && reason == StopReason::GitTamper.as_str()
            }),
        };
        if !stopped {
            return false;
        }
        if self.args.repin {
            self.repair(
                "git_tamper accepted after review (--repin): git's config, hooks and excludes are taken as they are now",
            );
            return false;
        }
        self.plan.notes.push(format!(
            "the loop stopped on git_tamper: review `git -C {} config --list --show-origin`, .git/hooks and .git/info, undo what you did not make, then --repin",
            self.lp.repo.display()
        ));
        true
    }

    /// CONTRACT_VERSION: this orbit's with `--migrate`, else the old one, else loop.toml's.
    fn contract_version(&mut self, old: Option<&State>) -> String {
        let version = if self.args.migrate {
            config::CONTRACT_VERSION.to_string()
        } else {
            old.map(|s| s.contract_version.clone())
                .unwrap_or_else(|| self.lp.loop_contract.clone())
        };
        if self.args.migrate && old.is_some_and(|s| s.contract_version != config::CONTRACT_VERSION)
        {
            self.repair(format!(
                "CONTRACT_VERSION migrated to {} (--migrate)",
                config::CONTRACT_VERSION
            ));
        }
        version
    }

    /// Lists the keys the evidence changed in a parseable old state, and why.
    fn explain(&mut self, old: &State, candidate: &State, last: &LastIteration) {
        let why = |key: &str, from: String, to: String| format!("{key} {from} → {to}");
        if old.next_iteration != candidate.next_iteration {
            let n = last.n;
            let src = if n == 0 {
                "no iteration on record".to_string()
            } else {
                let verdict = match &last.verdict {
                    Some(v) => v.to_string(),
                    None => "(committed)".to_string(),
                };
                format!("{}: iteration {n} ended {verdict}", last.source)
            };
            let change = why(
                "NEXT_ITERATION",
                old.next_iteration.to_string(),
                candidate.next_iteration.to_string(),
            );
            self.repair(format!("{change} ({src})"));
        }
        if old.last_status != candidate.last_status || old.stop_reason != candidate.stop_reason {
            self.repair(why(
                "LAST_STATUS",
                format!("{} ({})", old.last_status, old.stop_reason),
                format!("{} ({})", candidate.last_status, candidate.stop_reason),
            ));
        }
        if old.cost_microusd != candidate.cost_microusd {
            let change = why(
                "COST_MICROUSD",
                old.cost_microusd.to_string(),
                candidate.cost_microusd.to_string(),
            );
            self.repair(format!("{change} (the sum of cost.ledger)"));
        }
    }

    /// state.env is written when it differs from the candidate or is not sealed, at a
    /// generation above every one seen; otherwise it is kept as it is.
    fn settle_state(&mut self, cp: &Checkpoint, candidate: State) {
        let same = self.plan.old_text.as_deref() == Some(candidate.print().as_bytes());
        if same && cp.sealed {
            self.plan.result = Some(candidate);
            return;
        }
        let base = cp
            .old
            .as_ref()
            .map(|s| s.generation)
            .or(cp.distrusted_gen)
            .unwrap_or(0)
            .max(cp.sidecar_gen.unwrap_or(0));
        let mut s = candidate;
        s.generation = base.saturating_add(1);
        self.plan.new_state = Some(s.clone());
        self.plan.result = Some(s);
    }

    /// A progress.md that only lacks its final newline is no repair by itself: the
    /// runner's own open adds it.
    fn settle_progress_tail(&mut self) {
        let tail = self.plan.progress_tail.take();
        if tail.is_some() && tail != Some(ProgressTail::MissingNewline) || !self.plan.is_empty() {
            self.plan.progress_tail = tail;
        }
    }
}

/// The byte offset of 1-based line `line` in `data`.
fn line_offset(data: &[u8], line: usize) -> usize {
    if line <= 1 {
        return 0;
    }
    data.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(line - 2)
        .map_or(data.len(), |(i, _)| i + 1)
}

/// Why a parseable state.env is not sealed by its sidecar.
fn unsealed(sidecar_present: bool, sidecar_gen: Option<u64>, s: &State) -> String {
    match (sidecar_present, sidecar_gen) {
        (false, _) => "state.env.sha256 is missing: re-sealed".into(),
        (true, None) => "state.env.sha256 is malformed: re-sealed".into(),
        (true, Some(g)) if g + 1 == s.generation => format!(
            "torn checkpoint (sidecar at gen {g}, state.env at gen {}): re-sealed",
            s.generation
        ),
        (true, Some(g)) => format!(
            "state.env does not match its sidecar (state gen {}, sidecar gen {g}): re-sealed after checking every key against the evidence",
            s.generation
        ),
    }
}

/// A pinned loop file's copy in `.pins/`, when it matches its pin.
fn pinned_loop_copy(dir: &Path, pin: &PinLine) -> Result<Vec<u8>> {
    let p = &pin.path;
    match read_opt(&dir.join(".pins").join(p))? {
        Some(d) if fsx::sha256_hex(&d) == pin.hash => Ok(d),
        _ => Err(Error::Refused(format!(
            "cannot restore {p}: .pins/{p} is missing or does not match its pin. Restore it by hand (or `orbit init --force` for a script), or accept it with --repin"
        ))),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The first pin whose file (as it will stand after the restores) does not match it.
fn first_broken(
    dir: &Path,
    ws: &str,
    engine: Engine,
    pins: &[PinLine],
    restored: &[(PathBuf, String)],
) -> Result<Option<BrokenPin>> {
    for pin in pins.iter().filter(|pin| !pin.path.is_empty()) {
        let path = dir.join(&pin.path);
        let have = match restored.iter().find(|(q, _)| *q == path) {
            Some((_, h)) => Some(h.clone()),
            None => file_hash(&path)?,
        };
        if have.as_deref() != Some(pin.hash.as_str()) {
            return Ok(Some(BrokenPin {
                path: pin.path.clone(),
                reason: pins::pin_reason_in(&pin.path, ws, Some(engine)),
            }));
        }
    }
    Ok(None)
}

/// COST_MICROUSD: the sum of cost.ledger by the ledger's one rule (`ledger::parse`), the
/// same total the runner and the audit reach.
fn ledger_cost(dir: &Path) -> Result<u64> {
    let ledger = read_opt(&dir.join("cost.ledger"))?.unwrap_or_default();
    Ok(ledger::parse(&ledger).total())
}

/// The status a parseable old state keeps, when no proven DONE, broken pin or open
/// circuit decides it.
fn kept_status(old: &State, course: &Course, clear_stall: bool) -> (Status, StopReason) {
    match old.last_status {
        Status::Stalled if !clear_stall => (Status::Stalled, old.stop_reason),
        Status::Paused => (Status::Paused, old.stop_reason),
        Status::Blocked
            if !course.retry
                && old.stop_reason != StopReason::CircuitOpen
                && old.stop_reason != StopReason::ToolFailure =>
        {
            (Status::Blocked, old.stop_reason)
        }
        Status::Ready if course.last == 0 => (Status::Ready, StopReason::None),
        Status::Continue => (Status::Continue, old.stop_reason),
        _ => (Status::Continue, StopReason::None),
    }
}

/// ORIGIN_BRANCH and ITER_BRANCH: the old values, else what the runner's first run left
/// (`.origin-branch`, the branch `orbit/<name>`).
fn branches(lp: &LoopRef, old: Option<&State>) -> (String, String) {
    if let Some(s) = old {
        return (s.origin_branch.clone(), s.iter_branch.clone());
    }
    let b = format!("orbit/{}", lp.name);
    let iter_branch = if evidence::branch_exists(&lp.repo, &b) {
        b
    } else {
        String::new()
    };
    // The runner records the starting branch in .origin-branch at the first run.
    let origin = fsx::read_text_or_none(&lp.dir.join(".origin-branch"))
        .map(|t| t.trim_end_matches('\n').to_string())
        .filter(|t| crate::state::check_value("ORIGIN_BRANCH", t).is_ok())
        .unwrap_or_default();
    (origin, iter_branch)
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
        // Elsewhere (the engine's files in HOME): under their whole path, so that two
        // files of one name never share a backup.
        Err(_) => Path::new("other").join(path.strip_prefix("/").unwrap_or(path)),
    }
}

fn copy_into(src: &Path, dst: &Path) -> Result<()> {
    create_parent(dst)?;
    let data = fsx::read_regular(src)?;
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

/// Who made a recovery, with which flags, when, and where its backups are: what the
/// progress entry and the event record.
struct Record<'a> {
    now: u64,
    by: &'a str,
    flags: &'a [&'a str],
    /// The backup directory, relative to the loop directory.
    backup: &'a str,
    /// The sha256 of the state.env the loop has after the recovery (the one written, or
    /// the one kept): the recovery event's `state_sha256`.
    state_sha256: Option<&'a str>,
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
    create_dir(&bdir)?;
    back_up(lp, plan, &bdir)?;
    workspace::run_git(lp, &plan.git)?;
    move_files(plan, &bdir)?;
    write_files(plan)?;
    remove_files(plan)?;
    reset_workspace_index(plan)?;
    let result = plan
        .result
        .as_ref()
        .expect("a plan always carries the resulting state");
    // The state.env the loop will have: written now (its text fixed here, so that the event
    // can carry its sha256), or the one kept.
    let new_text = plan.new_state.as_ref().map(|s| {
        let mut s = s.clone();
        s.last_updated_at = now;
        (s.print(), s.generation)
    });
    let state_sha = match &new_text {
        Some((text, _)) => Some(fsx::sha256_hex(text.as_bytes())),
        None => plan.old_text.as_deref().map(fsx::sha256_hex),
    };
    let record = Record {
        now,
        by,
        flags,
        backup: &brel,
        state_sha256: state_sha.as_deref(),
    };
    append_recovery_entry(dir, plan, result, &record)?;
    append_recovery_event(dir, plan, result, &record)?;
    // A test hook, like the runner's fault points: die here, records written, checkpoint not.
    if std::env::var("ORBIT_FAULT").as_deref() == Ok(FaultPoint::RecoverBeforeCheckpoint.as_str()) {
        std::process::abort();
    }
    write_checkpoint(dir, new_text.as_ref())?;
    Ok(brel)
}

fn create_dir(path: &Path) -> Result<()> {
    fs::create_dir_all(path).map_err(|e| Error::io(format!("cannot create {}", path.display()), e))
}

fn create_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(parent) => create_dir(parent),
        None => Ok(()),
    }
}

/// Copies everything the plan rewrites into the backup directory.
fn back_up(lp: &LoopRef, plan: &Plan, bdir: &Path) -> Result<()> {
    let dir = &lp.dir;
    let mut to_back: Vec<PathBuf> = plan.writes.iter().map(|(p, _, _)| p.clone()).collect();
    to_back.extend(plan.removes.iter().cloned());
    to_back.extend(plan.home_writes.iter().map(|(p, _, _)| p.clone()));
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
    Ok(())
}

/// The plan's moves (nothing is deleted).
fn move_files(plan: &Plan, bdir: &Path) -> Result<()> {
    for (from, to) in &plan.moves {
        let dest = match to {
            MoveTo::Backup(name) => bdir.join(name),
            MoveTo::Path(p) => p.clone(),
        };
        create_parent(&dest)?;
        fs::rename(from, &dest).map_err(|e| {
            Error::io(
                format!("cannot move {} to {}", from.display(), dest.display()),
                e,
            )
        })?;
    }
    Ok(())
}

/// The index entries of the workspace paths `--restore-pinned` put back or removed, reset
/// to the head (a staged rename or removal of a protected file undone).
fn reset_workspace_index(plan: &Plan) -> Result<()> {
    let Some((ws, paths)) = plan.ws_reset.split_first() else {
        return Ok(());
    };
    let out = Command::new("git")
        .arg("-C")
        .arg(ws)
        .args(["-c", "core.fsmonitor=false", "reset", "-q", "--"])
        .args(paths)
        .env("GIT_LITERAL_PATHSPECS", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::io("cannot run git", e))?;
    if !out.status.success() {
        return Err(Error::Git(format!(
            "git reset in {ws} failed (the files are restored; their index entries are not): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The plan's removals (each was copied to the backup first).
fn remove_files(plan: &Plan) -> Result<()> {
    for path in &plan.removes {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("cannot remove {}", path.display()), e)),
        }
    }
    Ok(())
}

/// The flags' writes.
fn write_files(plan: &Plan) -> Result<()> {
    for (path, data, exec) in &plan.writes {
        create_parent(path)?;
        if *exec {
            fsx::write_atomic_exec(path, data)?;
        } else {
            fsx::write_atomic(path, data)?;
        }
    }
    for (path, data, mode) in &plan.home_writes {
        fsx::write_atomic_mode(path, data, *mode)?;
    }
    Ok(())
}

/// progress.md: trims a torn tail and appends the closed `## Recovery` entry.
fn append_recovery_entry(dir: &Path, plan: &Plan, result: &State, rec: &Record) -> Result<()> {
    let path = dir.join("progress.md");
    let mut pg = read_opt(&path)?.unwrap_or_default();
    match plan.progress_tail {
        Some(ProgressTail::Torn(off)) => pg.truncate(off),
        Some(ProgressTail::MissingNewline) => pg.push(b'\n'),
        _ => {}
    }
    if let Some(cut) = plan.progress_cut {
        pg.truncate(cut);
    }
    if !plan.progress_stray.is_empty() {
        pg = pg
            .split_inclusive(|b| *b == b'\n')
            .enumerate()
            .filter(|(i, _)| !plan.progress_stray.contains(&(i + 1)))
            .flat_map(|(_, l)| l.iter().copied())
            .collect();
    }
    let prev = evidence::progress_prev(&pg);
    let entry = recovery_entry(rec.now, rec.by, rec.flags, plan, result, rec.backup);
    let (closed, _) = progress::close_entry(&prev, result.next_iteration.saturating_sub(1), &entry);
    pg.extend_from_slice(closed.as_bytes());
    fsx::write_atomic(&path, &pg)
}

/// events.jsonl: trims a torn line and appends the chained `recovery` event.
fn append_recovery_event(dir: &Path, plan: &Plan, result: &State, rec: &Record) -> Result<()> {
    let path = dir.join("events.jsonl");
    let mut ev = read_opt(&path)?.unwrap_or_default();
    if let Some(cut) = plan.events_cut {
        ev.truncate(cut);
    }
    let (seq, prev) = evidence::events_tip(&ev);
    let flag_text = if rec.flags.is_empty() {
        "none".to_string()
    } else {
        rec.flags.join(" ")
    };
    let fields = [
        ("by", events::value(rec.by)),
        ("flags", events::value(&flag_text)),
        ("repairs", events::value(&plan.repairs.len().to_string())),
        (
            "next_iteration",
            events::value(&result.next_iteration.to_string()),
        ),
        ("status", events::value(result.last_status.as_str())),
        ("reason", events::value(result.stop_reason.as_str())),
        ("gen", events::value(&result.generation.to_string())),
    ];
    let mut fields = fields.to_vec();
    if let Some(sha) = rec.state_sha256 {
        fields.push(("state_sha256", events::value(sha)));
    }
    if let Some((line, why, dropped)) = &plan.journal_break {
        fields.push(("journal_break", events::value(&line.to_string())));
        fields.push(("journal_break_why", events::value(why)));
        fields.push(("journal_dropped", events::value(&dropped.to_string())));
    }
    fields.push(("backup", events::value(rec.backup)));
    let line = events::build_line(
        seq + 1,
        &fsx::iso_utc(rec.now),
        EventName::Recovery.as_str(),
        result.next_iteration.saturating_sub(1),
        &fields,
        &prev,
    );
    ev.extend_from_slice(line.as_bytes());
    fsx::write_atomic(&path, &ev)
}

/// The checkpoint, last: state.env and its sidecar, when the plan writes them.
fn write_checkpoint(dir: &Path, new: Option<&(String, u64)>) -> Result<()> {
    let Some((text, generation)) = new else {
        return Ok(());
    };
    fsx::write_atomic(&dir.join("state.env"), text.as_bytes())?;
    fsx::write_atomic(
        &dir.join("state.env.sha256"),
        Sidecar::for_state(text, *generation).print().as_bytes(),
    )
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
    for g in &plan.git {
        println!("git: {}", g.describe());
    }
    for (p, _, _) in &plan.home_writes {
        println!("write: {} (the old copy to backups/)", p.display());
    }
    for (p, _, _) in &plan.writes {
        println!(
            "write: {} (the old copy to backups/)",
            p.strip_prefix(&lp.dir).unwrap_or(p).display()
        );
    }
    for p in &plan.removes {
        println!("remove: {} (a copy to backups/)", p.display());
    }
    if let Some((ws, paths)) = plan.ws_reset.split_first() {
        println!("git: git -C {ws} reset -q -- {}", paths.join(" "));
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
    fn event_values_are_encoded_as_bash_does_via_the_events_module() {
        assert_eq!(events::value("12"), "12");
        assert_eq!(events::value("0"), "0");
        assert_eq!(events::value("012"), "\"012\"");
        assert_eq!(events::value("true"), "true");
        assert_eq!(events::value("--repin"), "\"--repin\"");
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
    fn the_cost_is_the_ledger_rule_total() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            ledger_cost(dir.path()).unwrap(),
            0,
            "no ledger costs nothing"
        );
        let ledger = concat!(
            "1\t10\treported\n",
            "2\tx\tunknown\n",
            "x\t500\tbogus\n",
            "1\t500\tbogus\n",
            "2\t700\testimated\t3\n",
            "3\t5\treported",
        );
        fs::write(dir.path().join("cost.ledger"), ledger).unwrap();
        // Only whole ledger lines count: a bad kind or iteration adds nothing, a fan-out
        // candidate's line counts, and a torn last line is not yet an entry.
        assert_eq!(ledger_cost(dir.path()).unwrap(), 710);
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
