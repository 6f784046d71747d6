//! `orbit queue run`: the poller. It takes the queue's lock, makes the integration branch
//! at its first run, resumes attempts a dead runner left running, starts ready tasks (at
//! most `--jobs` at once, each a real loop run by a child `orbit run`), and lands or fails
//! each attempt as its loop stops. Every record is written atomically; the task file first,
//! then queue.json, so a crash between the two is seen and not done twice.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use super::attempt::{self, Stop};
use super::land::{self, Landed};
use super::limits;
use super::plan;
use super::start::{finish_pending, integration_branch, spawn};
use super::store::{Found, Lock, Queue, State};
use super::task::Task;
use crate::cli::QueueRunArgs;
use crate::contract::queue::{QueueExit, TaskStatus};
use crate::error::{Error, Result};
use crate::fsx;

/// An attempt this run watches: its child `orbit run`, or none yet (one to resume, or a
/// loop another process still runs).
struct Live {
    name: String,
    dir: PathBuf,
    child: Option<Child>,
    /// The engine it runs on (the queue's key).
    engine: String,
    /// Paused by its provider's rate limit until then (epoch seconds): not running, not
    /// holding a job, resumed at that time.
    wait: Option<u64>,
    /// Stopped by the queue while it ran, because its engine was paused by another task's
    /// rate limit: its loop is run on when the limit lifts, the attempt not over.
    held: bool,
}

/// The poller's state for one `orbit queue run`.
struct Poller {
    q: Queue,
    st: State,
    integration: String,
    live: Vec<Live>,
    shown: BTreeMap<String, String>,
    /// `--usd-cap`, in micro-dollars.
    usd_cap: Option<u64>,
}

/// `orbit queue run`.
pub fn run(args: &QueueRunArgs) -> Result<u8> {
    let q = Queue::here()?;
    std::env::set_current_dir(&q.repo)
        .map_err(|e| Error::io(format!("cannot enter {}", q.repo.display()), e))?;
    let _lock = match Lock::take(&q)? {
        Ok(l) => l,
        Err(holder) => {
            eprintln!(
                "orbit queue run: refused: {holder} holds the queue ({}): one runner per queue; wait for it to end, or see orbit queue status",
                q.dir.join("queue.lock").display()
            );
            return Ok(QueueExit::Locked.code());
        }
    };
    let jobs = args.jobs.max(1) as usize;
    let usd_cap = args
        .usd_cap
        .as_deref()
        .map(|c| crate::goal::parse_usd("--usd-cap", c))
        .transpose()?;
    let mut st = q.load_state()?;
    finish_pending(&q, &mut st)?;
    let integration = integration_branch(&q, &mut st, args.onto.as_deref())?;
    q.save_state(&st)?;
    let mut p = Poller {
        live: st
            .tasks
            .iter()
            .filter_map(|(n, t)| t.running.as_ref().map(|r| (n, r)))
            .map(|(n, r)| Live {
                name: n.clone(),
                dir: q.repo.join(&r.loop_dir),
                child: None,
                engine: r.engine.clone(),
                wait: None,
                held: false,
            })
            .collect(),
        q,
        st,
        integration,
        shown: BTreeMap::new(),
        usd_cap,
    };
    for l in &p.live {
        println!(
            "orbit queue: {}: resuming its running attempt ({})",
            l.name,
            l.dir.display()
        );
    }
    let mut round = 0;
    loop {
        p.reap()?;
        let startable = p.scan()?;
        if !(args.once && round > 0) {
            let mut free = jobs.saturating_sub(p.live.iter().filter(|l| l.wait.is_none()).count());
            for name in startable {
                if free == 0 {
                    break;
                }
                if p.start(&name)? {
                    free -= 1;
                }
            }
        }
        round += 1;
        let waiting = p.live.iter().all(|l| l.wait.is_some());
        if p.live.is_empty() || (args.once && waiting) {
            break;
        }
        std::thread::sleep(Duration::from_millis(if waiting { 500 } else { 100 }));
    }
    let waiting = !p.live.is_empty();
    p.exit_code(args.once, waiting)
}

impl Poller {
    /// Finishes the attempts whose loop stopped; (re)starts a resumed attempt's loop. A loop
    /// paused by its provider's rate limit is not finished: its engine is paused, and the
    /// loop is run again once the limit lifts.
    fn reap(&mut self) -> Result<()> {
        let now = fsx::now_epoch();
        let mut i = 0;
        while i < self.live.len() {
            if self.live[i].engine.is_empty() {
                self.live[i].engine = self.engine_of(&self.live[i].name);
            }
            let l = &mut self.live[i];
            let exited = match &mut l.child {
                Some(c) => c
                    .try_wait()
                    .map_err(|e| Error::io("cannot wait for a loop", e))?
                    .is_some(),
                None => false,
            };
            if exited {
                l.child = None;
            }
            let engine_paused = self
                .st
                .paused
                .get(&l.engine)
                .copied()
                .filter(|at| *at > now);
            let over = if l.child.is_some() || crate::locate::lock_held(&l.dir) {
                false
            } else if l.held {
                // Stopped by the queue for its engine's pause: on when it lifts.
                match engine_paused {
                    Some(at) => l.wait = Some(at),
                    None => {
                        l.held = false;
                        l.wait = None;
                        println!(
                            "orbit queue: {}: the rate limit of {} lifted: its loop runs on",
                            l.name, l.engine
                        );
                        l.child = Some(spawn(&self.q, &l.dir)?);
                    }
                }
                false
            } else {
                let stop = attempt::stop_of(&l.dir);
                match stop.as_ref().and_then(|s| s.rate_paused()) {
                    Some(at) if at > now => {
                        let (name, engine) = (l.name.clone(), l.engine.clone());
                        l.wait = Some(at);
                        self.rate_limited(&name, &engine, at)?;
                        false
                    }
                    Some(_) => {
                        l.wait = None;
                        println!(
                            "orbit queue: {}: the rate limit lifted: its loop resumes",
                            l.name
                        );
                        l.child = Some(spawn(&self.q, &l.dir)?);
                        false
                    }
                    None if exited || stop.as_ref().is_some_and(|s| s.at_rest()) => true,
                    // A loop to run on (resumed after a dead runner) waits while its engine
                    // is paused.
                    None => {
                        match engine_paused {
                            Some(at) => {
                                l.held = true;
                                l.wait = Some(at);
                            }
                            None => l.child = Some(spawn(&self.q, &l.dir)?),
                        }
                        false
                    }
                }
            };
            if over {
                let l = self.live.remove(i);
                self.finish(&l.name, &l.dir)?;
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Task `name`'s loop is paused by its provider's rate limit until `at`: so is its
    /// engine, for every task (said once per pause): no attempt starts on it, and the
    /// attempts running on it are stopped until then.
    fn rate_limited(&mut self, name: &str, engine: &str, at: u64) -> Result<()> {
        if limits::pause(&mut self.st, engine, at) {
            self.q.save_state(&self.st)?;
            println!(
                "orbit queue: {name}: rate limited ({engine}) until {}: no attempt starts on {engine} before then; this attempt's loop resumes then (not a new attempt)",
                crate::fsx::iso_utc(at)
            );
        }
        for l in self.live.iter_mut() {
            if l.engine != engine || l.name == name || l.child.is_none() || l.held {
                continue;
            }
            // The child is the loop's runner (orbit run execs it): it saves a resumable
            // state and exits (as orbit stop asks); the loop is run on when the limit
            // lifts, the same attempt.
            if let Some(c) = &l.child {
                let _ = std::process::Command::new("kill")
                    .args(["-TERM", &c.id().to_string()])
                    .status();
            }
            l.held = true;
            l.wait = Some(at);
            println!(
                "orbit queue: {}: stopped until the rate limit of {engine} lifts ({}): its loop runs on then (not a new attempt)",
                l.name,
                crate::fsx::iso_utc(at)
            );
        }
        Ok(())
    }

    /// The engine key of task `name`'s running attempt (its pinned file's, else its file's).
    fn engine_of(&self, name: &str) -> String {
        let pinned = self.q.read_task(name, &self.q.pinned_path(name));
        let f = match pinned.task {
            Ok(_) => pinned,
            Err(_) => self.q.read_task(name, &self.q.task_path(name)),
        };
        f.task
            .map(|t| limits::engine_key(&self.q, &t))
            .unwrap_or_default()
    }

    /// Reads every task, shows (once each) those that cannot run, marks tasks blocked or
    /// ready again, and returns the tasks that may start, in order.
    fn scan(&mut self) -> Result<Vec<String>> {
        let found = self.q.tasks()?;
        let problems = plan::problems(&found);
        for (n, why) in &problems {
            if self.shown.get(n) != Some(why) {
                eprintln!("orbit queue: {n}: not run: {why}");
                self.shown.insert(n.clone(), why.clone());
            }
        }
        let status: BTreeMap<String, TaskStatus> = found
            .iter()
            .filter_map(|f| f.task.as_ref().ok().map(|t| (f.name.clone(), t.status)))
            .collect();
        let mut ready = Vec::new();
        for f in &found {
            let Ok(t) = &f.task else { continue };
            if problems.contains_key(&f.name) || self.live.iter().any(|l| l.name == f.name) {
                continue;
            }
            if !matches!(
                t.status,
                TaskStatus::Ready | TaskStatus::Blocked | TaskStatus::Running
            ) {
                continue;
            }
            match plan::deps_state(t, &status, &problems) {
                Err(why) => self.set_blocked(f, t, Some(why))?,
                Ok(deps_done) => {
                    if t.status == TaskStatus::Blocked {
                        self.set_blocked(f, t, None)?;
                    }
                    if deps_done {
                        ready.push((f.name.clone(), t.priority));
                    }
                }
            }
        }
        plan::order(&mut ready, &mut self.st);
        Ok(ready.into_iter().map(|(n, _)| n).collect())
    }

    /// Marks a task blocked for `why`, or ready again with `None`.
    fn set_blocked(&mut self, f: &Found, t: &Task, why: Option<String>) -> Result<()> {
        let mut t = t.clone();
        let (status, reason) = match why {
            Some(w) => (TaskStatus::Blocked, Some(w)),
            None => (TaskStatus::Ready, None),
        };
        if t.status == status && t.reason == reason {
            return Ok(());
        }
        match &reason {
            Some(r) => println!("orbit queue: {}: blocked: {r}", f.name),
            None => println!("orbit queue: {}: ready again", f.name),
        }
        t.status = status;
        t.reason = reason;
        self.q.write_task(&f.name, &t)?;
        Ok(())
    }

    /// Says once why task `name` does not start now (`key` tells the reasons apart).
    fn held(&mut self, name: &str, why: String) {
        let key = format!("held {name}");
        if self.shown.get(&key) != Some(&why) {
            println!("orbit queue: {name}: not started: {why}");
            self.shown.insert(key, why);
        }
    }

    /// Starts the next attempt of task `name` from the integration branch's head, unless
    /// its engine is rate-limited or the queue's budget cannot cover it. Whether it started.
    fn start(&mut self, name: &str) -> Result<bool> {
        let f = self.q.read_task(name, &self.q.task_path(name));
        let Ok(mut task) = f.task else {
            return Ok(false);
        };
        let engine = limits::engine_key(&self.q, &task);
        if let Some(at) = limits::paused_now(&mut self.st, fsx::now_epoch()).get(&engine) {
            self.held(
                name,
                format!(
                    "{engine} is rate-limited until {}",
                    crate::fsx::iso_utc(*at)
                ),
            );
            return Ok(false);
        }
        let (loop_cap, estimate) =
            match limits::budget(&self.q, &self.st, self.usd_cap, &engine, &task) {
                Ok(b) => b,
                Err(why) => {
                    self.held(name, why);
                    return Ok(false);
                }
            };
        if task.attempts >= task.max_attempts {
            task.status = TaskStatus::Failed;
            task.reason = Some(format!(
                "{} attempt(s) of {} used",
                task.attempts, task.max_attempts
            ));
            println!("orbit queue: {name}: failed: its attempts are used up");
            self.q.write_task(name, &task)?;
            return Ok(false);
        }
        let n = task.attempts + 1;
        super::kill_point("start");
        let head = land::head_of(&self.q.repo, &self.integration).ok_or_else(|| {
            Error::Git(format!(
                "the integration branch {} is gone",
                self.integration
            ))
        })?;
        // Under the queue's cap, the attempt's loop may spend at most what the queue has left.
        let mut for_loop = task.clone();
        if let Some(c) = loop_cap {
            for_loop.usd_cap = Some(crate::goal::format_usd(c));
        }
        let (dir, branch) =
            match attempt::make_loop(&self.q, name, &for_loop, n, &head, &self.integration) {
                Ok(made) => made,
                Err(e) => {
                    let why = format!("orbit init refused the attempt's loop: {e}");
                    self.fail(name, task, n, &why, "", "(no loop was made)", None)?;
                    return Ok(false);
                }
            };
        super::kill_point("made");
        task.status = TaskStatus::Running;
        task.reason = None;
        let sha = self.q.write_task(name, &task)?;
        let pinned = self.q.pinned_path(name);
        fs::create_dir_all(pinned.parent().expect("under the queue"))
            .map_err(|e| Error::io("cannot create the queue's pinned/", e))?;
        fsx::write_atomic(&pinned, task.print().as_bytes())?;
        let mut rec = attempt::running(n, &dir, &self.q, branch.clone(), &head, &sha);
        rec.engine = engine.clone();
        rec.estimate_microusd = estimate;
        let ts = self.st.task(name);
        ts.running = Some(rec);
        ts.branch = Some(branch);
        self.q.save_state(&self.st)?;
        println!(
            "orbit queue: {name}: attempt {n} of {} started ({}, from {} at {})",
            task.max_attempts,
            dir.strip_prefix(&self.q.repo).unwrap_or(&dir).display(),
            self.integration,
            &head[..12]
        );
        super::kill_point("recorded");
        let child = spawn(&self.q, &dir)?;
        self.live.push(Live {
            name: name.to_string(),
            dir,
            child: Some(child),
            engine,
            wait: None,
            held: false,
        });
        super::kill_point("spawned");
        Ok(true)
    }

    /// An attempt's loop stopped: land it (DONE) or record its failure.
    fn finish(&mut self, name: &str, dir: &Path) -> Result<()> {
        let Some(rec) = self.st.tasks.get(name).and_then(|t| t.running.clone()) else {
            return Ok(());
        };
        let pinned_bytes = fsx::read_regular(&self.q.pinned_path(name))?;
        let pinned = Task::parse(&String::from_utf8_lossy(&pinned_bytes), 1).map_err(|e| {
            Error::Refused(format!(
                "the queue's pinned copy of {name} does not parse (line {}: {})",
                e.line, e.reason
            ))
        })?;
        let now = self.q.read_task(name, &self.q.task_path(name));
        let changed =
            (now.sha256 != rec.pinned_sha256).then(|| self.set_aside(name, &now, rec.attempt));
        let stop = attempt::stop_of(dir).unwrap_or(Stop {
            status: "unknown".into(),
            reason: "state.env unreadable".into(),
            cost_microusd: 0,
            resume_at: 0,
        });
        self.st.task(name).cost_microusd += stop.cost_microusd;
        let engine = if rec.engine.is_empty() {
            self.engine_of(name)
        } else {
            rec.engine.clone()
        };
        limits::spent(&mut self.st, &engine, stop.cost_microusd);
        let task = pinned;
        // A loop with no change of its own (its goal met before its agent did anything, or a
        // DONE with no commit) has nothing to merge: the task is met when its verifier
        // passes on the integration branch's head.
        if stop.done() {
            super::kill_point("landing");
        }
        let own = land::has_own_commit(&self.q, &rec.branch, &rec.base);
        let landed = if !own && (stop.done() || stop.vacuous()) {
            Some(land::met_already(&self.q, dir, &self.integration)?)
        } else if stop.done() {
            match self.after_loops(&task) {
                Ok(after) => Some(land::land(&self.q, dir, &self.integration, &after)?),
                Err(why) => Some(Landed::Refused {
                    why,
                    output: String::new(),
                }),
            }
        } else {
            None
        };
        match landed {
            Some(Landed::Refused { why, output }) => {
                let tried = attempt::what_was_tried(dir);
                return self.fail(name, task, rec.attempt, &why, &output, &tried, changed);
            }
            Some(landed) => return self.done(name, task, rec.attempt, landed, changed),
            None => {}
        }
        let why = format!(
            "the loop stopped {} ({}) without a verified DONE",
            stop.status, stop.reason
        );
        let output = attempt::last_verify_output(dir);
        let tried = attempt::what_was_tried(dir);
        self.fail(name, task, rec.attempt, &why, &output, &tried, changed)
    }

    /// The loops whose checks run on `task`'s merged tree besides its own: for each task it
    /// comes after, that task's last attempt's loop (its verify.sh runs its verifier under
    /// its sandbox). A task the queue never ran (marked done by hand) has none. Why not,
    /// when such a loop directory is gone.
    fn after_loops(&self, task: &Task) -> std::result::Result<Vec<(String, PathBuf)>, String> {
        let mut out = Vec::new();
        for d in &task.after {
            let Some(lname) = self
                .st
                .tasks
                .get(d)
                .and_then(|t| t.branch.as_deref())
                .and_then(|b| b.strip_prefix("orbit/"))
            else {
                continue;
            };
            let dir = self.q.repo.join(".orbit").join(lname);
            if !dir.join("run-loop.sh").is_file() {
                return Err(format!(
                    "the loop of {d} (a task this one comes after), .orbit/{lname}, is gone, so its verifier cannot run on the merged tree under its sandbox: keep a task's last loop until the queue is merged home"
                ));
            }
            out.push((d.clone(), dir));
        }
        Ok(out)
    }

    /// Records task `name` done by attempt `n`: merged, or met already with nothing merged.
    fn done(
        &mut self,
        name: &str,
        mut task: Task,
        n: u32,
        landed: Landed,
        changed: Option<String>,
    ) -> Result<()> {
        let (merged, met) = match landed {
            Landed::Merged(c) => (Some(c), None),
            Landed::Met(c) => (None, Some(c)),
            Landed::Refused { .. } => unreachable!("a refused landing is a failed attempt"),
        };
        task.status = TaskStatus::Done;
        task.merged = merged.clone();
        task.verified_on = met.clone();
        task.reason = None;
        if let Some(note) = &changed {
            task.history = format!("{}\n\n{note}", task.history.trim_end());
        }
        self.record(name, &task, |ts| {
            ts.merged_commit = merged.clone();
            ts.verified_on = met.clone();
            ts.last_verdict = Some(match &met {
                Some(_) => "done (met already: no merge of its own)".into(),
                None => "done".into(),
            });
        })?;
        match (&merged, &met) {
            (Some(c), _) => println!(
                "orbit queue: {name}: done: attempt {n} merged into {} at {}",
                self.integration,
                &c[..12]
            ),
            (None, Some(h)) => println!(
                "orbit queue: {name}: done with no change of its own: its verifier passes on {} at {} (attempt {n}; nothing merged)",
                self.integration,
                &h[..12]
            ),
            (None, None) => {}
        }
        Ok(())
    }

    /// Records a failed attempt `n`: its section, the count, ready again or failed.
    #[allow(clippy::too_many_arguments)]
    fn fail(
        &mut self,
        name: &str,
        mut task: Task,
        n: u32,
        why: &str,
        output: &str,
        tried: &str,
        changed: Option<String>,
    ) -> Result<()> {
        let last = attempt::record_failure(&mut task, n, why, output, tried, changed);
        self.record(name, &task, |ts| ts.last_verdict = Some(why.to_string()))?;
        if last {
            println!(
                "orbit queue: {name}: failed: attempt {n} of {} — {why}; budget exhausted",
                task.max_attempts
            );
        } else {
            println!(
                "orbit queue: {name}: attempt {n} of {} failed — {why}; ready again",
                task.max_attempts
            );
        }
        Ok(())
    }

    /// Records the end of a task's attempt in two steps: queue.json first holds the task
    /// file's new text (and no running attempt), then the file is written and the text
    /// dropped. A crash between the two is finished by the next run ([`finish_pending`](super::start::finish_pending)).
    fn record(
        &mut self,
        name: &str,
        task: &Task,
        update: impl FnOnce(&mut super::store::TaskState),
    ) -> Result<()> {
        let text = task.print();
        let ts = self.st.task(name);
        update(ts);
        ts.running = None;
        ts.pending = Some(text);
        self.q.save_state(&self.st)?;
        super::kill_point("ending");
        finish_pending(&self.q, &mut self.st)?;
        super::kill_point("ended");
        Ok(())
    }

    /// A task file changed during attempt `n`: set aside, named, not taken. The note for
    /// the task's section.
    fn set_aside(&self, name: &str, now: &Found, n: u32) -> String {
        let dir = self.q.dir.join("changed");
        let aside = dir.join(format!("{name}.attempt-{n}.md"));
        let _ = fs::create_dir_all(&dir);
        if let Ok(bytes) = fs::read(&now.path) {
            let _ = fsx::write_atomic(&aside, &bytes);
        }
        let rel = aside
            .strip_prefix(&self.q.repo)
            .unwrap_or(&aside)
            .display()
            .to_string();
        println!(
            "orbit queue: {name}: its task file changed during attempt {n} (sha256 {}): not taken for this attempt; the changed file is kept at {rel}",
            if now.sha256.is_empty() {
                "none"
            } else {
                &now.sha256[..12]
            }
        );
        format!(
            "### The task file changed during attempt {n}\n\nNot taken: the attempt ran and was judged by the file as pinned when it started. The changed file is kept at {rel}; edit a task while none of its attempts runs.\n"
        )
    }

    /// Whether the queue's `--usd-cap` keeps task `name` from starting (so no later run
    /// under the same cap starts it either).
    fn held_by_cap(&self, name: &str) -> bool {
        let Ok(task) = self.q.read_task(name, &self.q.task_path(name)).task else {
            return false;
        };
        let engine = limits::engine_key(&self.q, &task);
        limits::budget(&self.q, &self.st, self.usd_cap, &engine, &task).is_err()
    }

    /// The exit code: every task done, tasks left (`--once`, or attempts paused by a rate
    /// limit), or some not done.
    fn exit_code(&mut self, once: bool, waiting: bool) -> Result<u8> {
        let found = self.q.tasks()?;
        let all_done = found
            .iter()
            .all(|f| matches!(&f.task, Ok(t) if t.status == TaskStatus::Done));
        if all_done {
            println!("orbit queue: every task is done ({})", found.len());
            return Ok(QueueExit::AllDone.code());
        }
        // A task the queue's budget holds is not left for a later tick: none can start it.
        let startable = self.scan()?;
        if once && (waiting || startable.iter().any(|n| !self.held_by_cap(n))) {
            return Ok(QueueExit::Remaining.code());
        }
        let left: Vec<String> = found
            .iter()
            .filter_map(|f| match &f.task {
                Ok(t) if t.status == TaskStatus::Done => None,
                Ok(t) => Some(format!("{} ({})", f.name, t.status)),
                Err(_) => Some(format!("{} (does not parse)", f.name)),
            })
            .collect();
        println!(
            "orbit queue: nothing left to run; not done: {}",
            left.join(", ")
        );
        Ok(QueueExit::NotAllDone.code())
    }
}
