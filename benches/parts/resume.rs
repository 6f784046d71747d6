//! Part 14 of the benchmark, resume after kill -9: a loop of two iterations (a 0.5 s
//! agent, a 0.1 s check, the default sandbox and network) is killed by SIGKILL at a random
//! point of one of its phases, then restarted as a user would, many times, seeded
//! (ORBIT_BENCH_SEED) so that a run is reproducible.
//!
//! The phases: an agent run, a check run, the DONE gate, the commit. Each trial picks one,
//! and one of its occurrences in an uninterrupted run of the same loop (measured first, the
//! baseline), waits for that occurrence to start (the fake agent's or check's line on a
//! FIFO, the journal's `done_claim` or `iteration_result`: the commit runs between it and
//! `iteration_end`), then waits a random part of the time that occurrence took in the
//! baseline and kills. Two kinds of kill alternate: `kill -9` of the bash running
//! run-loop.sh alone (what the OOM killer or a user does: the agent or check it ran lives
//! on, orphaned), and the machine crash: the runner's process group and every process
//! descending from it stopped, then killed, at once (the page cache survives it here, so
//! no unwritten data is lost: what a power cut adds is not measured).
//!
//! After each kill the loop is restarted with `bash run-loop.sh` (`orbit recover` only when
//! the runner exits 4, which names it), until it stops. A resume loses nothing when:
//! - right after the kill, state.env parses; events.jsonl's chain verifies (a torn last
//!   line, cut by the kill, is allowed: the next run trims it); `orbit audit` calls the loop
//!   neither CORRUPT nor anything at P0 or P1 beyond what a kill explains (CRASHED,
//!   TORN_CHECKPOINT, WORKSPACE_DIRTY, STALE_LOCK; ORPHAN_AGENT while the orphan lives);
//! - the restart reaches DONE (exit 0) without a hand's repair beyond what the runner asks;
//! - then every record agrees: state.env parses and its sidecar seals it, the journal's
//!   chain is whole with no torn line, progress.md is whole, and each iteration has its
//!   result.env, one final progress entry and one `iteration_end`; the loop branch holds
//!   one commit per iteration (`Orbit-Iteration` 1 and 2, each once) with both iterations'
//!   work in its tree; `orbit audit` says DONE and exits 0; no process of the loop is left.
//!
//! The fake agent and check write a line to a FIFO outside the repository at each start
//! (a FIFO, since the sandbox makes every other path outside the workspace read-only, and a
//! FIFO on a read-only mount can still be written): agent and check runs beyond the
//! baseline's are the work the kill made the loop repeat; the first agent line after the
//! restart gives the time from the restart to the agent's next run.

use super::{Row, orbit, sh, verdict};
use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const AGENT_SLEEP: &str = "0.5";
const CHECK_SLEEP: &str = "0.1";
/// The longest a run of the loop may take before the trial counts it as hung.
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// What a kill explains in the audit right after it, at P0 or P1.
const EXPLAINED: [&str; 5] = [
    "CRASHED",
    "TORN_CHECKPOINT",
    "WORKSPACE_DIRTY",
    "STALE_LOCK",
    "ORPHAN_AGENT",
];

/// splitmix64: a seeded generator, so that the trials of a run can be made again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What the trial sees happen: a line of the fake agent or check, or a journal event.
#[derive(Clone, Debug, PartialEq)]
enum Item {
    Agent,
    Check,
    Event(String, serde_json::Value),
}

/// The phase a kill is aimed at: the item that starts it and the one that ends it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Agent,
    Check,
    Gate,
    Commit,
}

const PHASES: [Phase; 4] = [Phase::Agent, Phase::Check, Phase::Gate, Phase::Commit];

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Agent => "agent run",
            Phase::Check => "check run",
            Phase::Gate => "DONE gate",
            Phase::Commit => "commit",
        }
    }
    fn starts(self, i: &Item) -> bool {
        match (self, i) {
            (Phase::Agent, Item::Agent) | (Phase::Check, Item::Check) => true,
            (Phase::Gate, Item::Event(e, _)) => e == "done_claim",
            (Phase::Commit, Item::Event(e, _)) => e == "iteration_result",
            _ => false,
        }
    }
    fn ends(self, i: &Item) -> bool {
        match (self, i) {
            (Phase::Agent, Item::Event(e, _)) => e == "agent_exit",
            (Phase::Check, Item::Event(e, _)) => e == "verify_pass" || e == "verify_fail",
            (Phase::Gate, Item::Event(e, v)) => e == "iteration_result" && v["verdict"] == "DONE",
            (Phase::Commit, Item::Event(e, _)) => e == "iteration_end",
            _ => false,
        }
    }
}

/// The two kinds of kill.
#[derive(Clone, Copy, PartialEq)]
enum Kill {
    /// SIGKILL to the bash running run-loop.sh alone.
    Runner,
    /// Every process of the run, at once, as a machine crash leaves it.
    Crash,
}

impl Kill {
    fn name(self) -> &'static str {
        match self {
            Kill::Runner => "kill -9 of the runner's bash",
            Kill::Crash => "machine crash (the runner's group and all below it)",
        }
    }
}

/// The stream of items of one loop, as they arrive: the FIFO's lines (read by a thread)
/// and the journal's new lines (read as the stream is polled).
struct Stream {
    fifo: mpsc::Receiver<(Instant, String)>,
    journal: PathBuf,
    offset: u64,
    partial: String,
    seen: Vec<(Instant, Item)>,
}

impl Stream {
    fn poll(&mut self) {
        while let Ok((at, line)) = self.fifo.try_recv() {
            let item = if line.starts_with("agent") {
                Item::Agent
            } else {
                Item::Check
            };
            self.seen.push((at, item));
        }
        let now = Instant::now();
        let Ok(mut f) = fs::File::open(&self.journal) else {
            return;
        };
        let mut buf = String::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_string(&mut buf).is_err() {
            return;
        }
        self.offset += buf.len() as u64;
        self.partial.push_str(&buf);
        while let Some(nl) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=nl).collect();
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                let name = v["event"].as_str().unwrap_or("").to_string();
                self.seen.push((now, Item::Event(name, v)));
            }
        }
    }
    fn count(&self, f: impl Fn(&Item) -> bool) -> usize {
        self.seen.iter().filter(|(_, i)| f(i)).count()
    }
    fn agents_since(&self, t: Instant) -> Option<Instant> {
        self.seen
            .iter()
            .find(|(at, i)| *at >= t && *i == Item::Agent)
            .map(|(at, _)| *at)
    }
}

/// One loop: its repository, loop directory, workspace home and FIFO.
struct Loop {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    dir: PathBuf,
    xdg: PathBuf,
    fifo: PathBuf,
    stream: Stream,
}

impl Loop {
    fn new(base: &Path) -> Loop {
        let tmp = tempfile::Builder::new()
            .prefix("resume-")
            .tempdir_in(base)
            .unwrap();
        let repo = tmp.path().join("repo");
        let xdg = tmp.path().join("xdg");
        fs::create_dir_all(&repo).unwrap();
        fs::create_dir_all(&xdg).unwrap();
        sh(
            &repo,
            "git init -q -b main && git config user.name bench && git config user.email bench@orbit.invalid && echo bench > README.md && git add -A && git commit -q -m init",
        );
        let fifo = tmp.path().join("runs.fifo");
        sh(tmp.path(), "mkfifo runs.fifo");
        let agent = tmp.path().join("agent.sh");
        let f = fifo.display();
        fs::write(
            &agent,
            format!(
                "#!/bin/sh
cat >/dev/null
echo \"agent ${{ORBIT_PHASE:-work}} $ORBIT_ITERATION\" > {f}
sleep {AGENT_SLEEP}
case \"$ORBIT_PHASE\" in
  confirm) echo CONFIRMED > \"$ORBIT_AGENT_DIR/confirm.md\"; exit 0 ;;
  wrapup) exit 0 ;;
esac
echo \"step $ORBIT_ITERATION\" > \"work-$ORBIT_ITERATION.txt\"
if [ \"$ORBIT_ITERATION\" -ge 2 ]; then echo 'every check holds' > \"$ORBIT_AGENT_DIR/done.md\"; fi
"
            ),
        )
        .unwrap();
        sh(tmp.path(), "chmod +x agent.sh");
        let check = format!("echo check > {f}; sleep {CHECK_SLEEP}; test -f work-2.txt");
        let out = Command::new(orbit())
            .args(["init", "bench resume", "--engine", "custom", "--exec"])
            .arg(&agent)
            .args(["--verify", &check, "--dir", ".orbit/resume"])
            .current_dir(&repo)
            .env("XDG_DATA_HOME", &xdg)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // The adequacy measure runs after the DONE is recorded: not a resume's business,
        // and seconds per trial.
        let dir = repo.join(".orbit/resume");
        let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
        assert!(toml.contains("adequacy = \"report\""), "{toml}");
        fs::write(
            dir.join("loop.toml"),
            toml.replace("adequacy = \"report\"", "adequacy = \"off\""),
        )
        .unwrap();
        let out = Command::new(orbit())
            .args(["init", "--force", "--dir", ".orbit/resume"])
            .current_dir(&repo)
            .env("XDG_DATA_HOME", &xdg)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let (tx, rx) = mpsc::channel();
        let reader = fifo.clone();
        std::thread::spawn(move || {
            // Read and write: the FIFO never sees its last writer go, so it never ends.
            let f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&reader)
                .unwrap();
            for line in BufReader::new(f).lines() {
                let Ok(line) = line else { return };
                if line == "quit" || tx.send((Instant::now(), line)).is_err() {
                    return;
                }
            }
        });
        let stream = Stream {
            fifo: rx,
            journal: dir.join("events.jsonl"),
            offset: 0,
            partial: String::new(),
            seen: Vec::new(),
        };
        Loop {
            tmp,
            repo,
            dir,
            xdg,
            fifo,
            stream,
        }
    }

    /// Starts run-loop.sh in a process group of its own; its output goes to files.
    fn start(&self, n: usize) -> Child {
        let out = fs::File::create(self.tmp.path().join(format!("run{n}.out"))).unwrap();
        Command::new("bash")
            .arg(self.dir.join("run-loop.sh"))
            .current_dir(&self.repo)
            .env("XDG_DATA_HOME", &self.xdg)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn output(&self, n: usize) -> String {
        let text =
            fs::read_to_string(self.tmp.path().join(format!("run{n}.out"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(6)..].join("\n")
    }

    /// Waits for the run to end, polling the stream; kills it past RUN_LIMIT.
    fn wait(&mut self, child: &mut Child) -> Option<i32> {
        let t = Instant::now();
        loop {
            self.stream.poll();
            if let Some(st) = child.try_wait().unwrap() {
                self.stream.poll();
                return st.code();
            }
            if t.elapsed() > RUN_LIMIT {
                kill(child, Kill::Crash);
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn orbit(&self, args: &[&str]) -> std::process::Output {
        Command::new(orbit())
            .args(args)
            .arg(&self.dir)
            .current_dir(&self.repo)
            .env("XDG_DATA_HOME", &self.xdg)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The audit: its exit code, verdict and (class, severity, fix) of each finding.
    fn audit(&self) -> (i32, String, Vec<(String, String, String)>) {
        let out = self.orbit(&["audit", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let l = &v["loops"][0];
        let findings = l["findings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| {
                        (
                            f["class"].as_str().unwrap_or("").to_string(),
                            f["severity"].as_str().unwrap_or("").to_string(),
                            f["fix"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        (
            out.status.code().unwrap_or(-1),
            l["verdict"].as_str().unwrap_or("").to_string(),
            findings,
        )
    }

    /// Ends the FIFO's reader thread.
    fn close(self) -> tempfile::TempDir {
        if let Ok(mut f) = fs::OpenOptions::new().write(true).open(&self.fifo) {
            let _ = f.write_all(b"quit\n");
        }
        self.tmp
    }
}

/// Every process whose parent is in `set`, not yet in it.
fn children_of(set: &BTreeSet<i32>) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return found;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": the command may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let ppid: i32 = rest
            .split(' ')
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        if set.contains(&ppid) && !set.contains(&pid) {
            found.push(pid);
        }
    }
    found
}

/// Kills the run: its bash alone, or (a crash) the runner's group and every process below
/// it, each stopped first so that none starts another in between.
fn kill(child: &mut Child, how: Kill) {
    let pid = child.id() as i32;
    match how {
        Kill::Runner => unsafe {
            libc::kill(pid, libc::SIGKILL);
        },
        Kill::Crash => {
            unsafe {
                libc::kill(-pid, libc::SIGSTOP);
            }
            let mut all = BTreeSet::from([pid]);
            loop {
                let new = children_of(&all);
                if new.is_empty() {
                    break;
                }
                for p in new {
                    unsafe {
                        libc::kill(p, libc::SIGSTOP);
                    }
                    all.insert(p);
                }
            }
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            for p in all {
                unsafe {
                    libc::kill(p, libc::SIGKILL);
                }
            }
        }
    }
    let _ = child.wait();
}

/// The processes that carry the loop's run marker.
fn loop_processes(dir: &Path) -> Vec<u32> {
    let marker = format!("ORBIT_OWNER={}", fs::canonicalize(dir).unwrap().display());
    let mut pids = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(env) = fs::read(e.path().join("environ"))
            && env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

/// What a kill must leave: state.env parses, the journal chains (a torn last line aside),
/// the audit never says CORRUPT, gives every finding a fix, and says nothing at P0/P1 a
/// kill does not explain. Ok holds the P0/P1 classes it did say.
fn check_after_kill(l: &Loop) -> Result<Vec<String>, String> {
    let state = orbit::state::State::parse_file(&l.dir.join("state.env"))
        .map_err(|e| format!("state.env does not parse after the kill: {e}"))?;
    let j = orbit::events::read(&fs::read(l.dir.join("events.jsonl")).unwrap_or_default());
    if let Some(e) = &j.error
        && !matches!(e, orbit::events::ChainError::TornTail { .. })
    {
        return Err(format!("events.jsonl broken after the kill: {e:?}"));
    }
    // A kill between the journal's record of a checkpoint and its rename leaves state.env
    // one generation behind the journal's last state_write: the audit's STATE_DRIFT.
    let cut_write = j
        .events
        .iter()
        .rev()
        .find(|e| e.event == "state_write")
        .and_then(|e| e.value["gen"].as_u64())
        == Some(state.generation + 1);
    let (_, verdict, findings) = l.audit();
    if findings.iter().any(|(_, _, fix)| fix.is_empty()) {
        return Err(format!(
            "audit after the kill: a finding without a fix: {findings:?}"
        ));
    }
    let serious: Vec<String> = findings
        .iter()
        .filter(|(_, s, _)| s == "P0" || s == "P1")
        .map(|(c, _, _)| c.clone())
        .collect();
    let unexplained: Vec<_> = serious
        .iter()
        .filter(|c| !(EXPLAINED.contains(&c.as_str()) || cut_write && *c == "STATE_DRIFT"))
        .collect();
    if verdict == "CORRUPT" || !unexplained.is_empty() {
        return Err(format!(
            "audit after the kill: {verdict}, unexplained {unexplained:?}"
        ));
    }
    Ok(serious)
}

/// What the loop must hold once it is DONE again (see the module's comment).
fn check_at_done(l: &Loop) -> Result<(), String> {
    let state = orbit::state::State::parse_file(&l.dir.join("state.env"))
        .map_err(|e| format!("state.env: {e}"))?;
    let sidecar = orbit::state::Sidecar::parse(
        &fs::read(l.dir.join("state.env.sha256")).map_err(|e| format!("sidecar: {e}"))?,
    )
    .map_err(|e| format!("sidecar: {e:?}"))?;
    if sidecar != orbit::state::Sidecar::for_state(&state.print(), state.generation) {
        return Err("the sidecar does not seal state.env".into());
    }
    if state.last_status != "DONE" {
        return Err(format!("state.env says {:?}", state.last_status));
    }
    let journal = orbit::events::read(&fs::read(l.dir.join("events.jsonl")).unwrap_or_default());
    if let Some(e) = journal.error {
        return Err(format!("events.jsonl: {e:?}"));
    }
    let progress = orbit::progress::parse(&fs::read(l.dir.join("progress.md")).unwrap());
    if progress.torn_tail_line.is_some()
        || progress.first_broken().is_some()
        || !progress.stray_lines.is_empty()
    {
        return Err("progress.md is not whole".into());
    }
    for i in 1..state.next_iteration {
        let result = fs::read_to_string(l.dir.join(format!("iterations/{i:06}/result.env")))
            .map_err(|e| format!("iteration {i}: result.env: {e}"))?;
        let verdict = result
            .lines()
            .find_map(|x| x.strip_prefix("VERDICT="))
            .unwrap_or("");
        let finals: Vec<_> = progress
            .entries
            .iter()
            .filter_map(|e| match &e.kind {
                orbit::progress::EntryKind::Iteration { number, status }
                    if *number == i && status != "INTERRUPTED" =>
                {
                    Some(status.as_str())
                }
                _ => None,
            })
            .collect();
        if finals != [verdict] {
            return Err(format!(
                "iteration {i}: final progress entries {finals:?}, result.env {verdict}"
            ));
        }
        let ends = journal
            .events
            .iter()
            .filter(|e| e.event == "iteration_end" && e.iteration == i)
            .count();
        if ends != 1 {
            return Err(format!("iteration {i}: {ends} iteration_end events"));
        }
    }
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&l.repo)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut committed: Vec<String> = git(&[
        "log",
        "--format=%(trailers:key=Orbit-Iteration,valueonly)",
        "orbit/resume",
    ])
    .lines()
    .filter(|x| !x.is_empty())
    .map(str::to_string)
    .collect();
    committed.sort();
    if committed != ["1", "2"] {
        return Err(format!("commits of iterations {committed:?}, not 1 and 2"));
    }
    let tree = git(&["ls-tree", "--name-only", "orbit/resume"]);
    if !tree.lines().any(|x| x == "work-1.txt") || !tree.lines().any(|x| x == "work-2.txt") {
        return Err(format!("the branch's tree lost work: {tree}"));
    }
    let (code, verdict, findings) = l.audit();
    if (code, verdict.as_str()) != (0, "DONE") {
        return Err(format!(
            "audit at the end: {verdict}, exit {code}, {findings:?}"
        ));
    }
    let left = loop_processes(&l.dir);
    if !left.is_empty() {
        for p in &left {
            unsafe {
                libc::kill(*p as i32, libc::SIGKILL);
            }
        }
        return Err(format!("processes of the loop left: {left:?}"));
    }
    Ok(())
}

/// The uninterrupted run: the order of its items and the time each took.
struct Baseline {
    seen: Vec<(Duration, Item)>,
    agents: usize,
    checks: usize,
    wall: Duration,
}

impl Baseline {
    /// The occurrences of the phase's start, each with the time to the next end.
    fn spans(&self, p: Phase) -> Vec<Duration> {
        let mut v = Vec::new();
        for (k, (t, i)) in self.seen.iter().enumerate() {
            if p.starts(i) {
                let end = self.seen[k..]
                    .iter()
                    .find(|(_, j)| p.ends(j))
                    .map(|(e, _)| e.saturating_sub(*t))
                    .unwrap_or_default();
                v.push(end);
            }
        }
        v
    }
}

fn baseline(base: &Path) -> Baseline {
    let mut l = Loop::new(base);
    let t = Instant::now();
    let mut child = l.start(0);
    let code = l.wait(&mut child);
    let wall = t.elapsed();
    assert_eq!(code, Some(0), "the uninterrupted loop: {}", l.output(0));
    check_at_done(&l).unwrap_or_else(|e| panic!("the uninterrupted loop: {e}"));
    let s = &l.stream;
    let mut seen: Vec<(Duration, Item)> = s
        .seen
        .iter()
        .map(|(at, i)| (at.saturating_duration_since(t), i.clone()))
        .collect();
    seen.sort_by_key(|(d, _)| *d);
    Baseline {
        seen,
        agents: s.count(|i| *i == Item::Agent),
        checks: s.count(|i| *i == Item::Check),
        wall,
    }
}

/// One trial's outcome.
struct Trial {
    phase: Phase,
    how: Kill,
    landed: bool,
    lost: Option<String>,
    to_agent: Option<Duration>,
    extra_agents: i64,
    extra_checks: i64,
    recovers: usize,
    /// The audit's P0/P1 classes right after the kill.
    classes: Vec<String>,
    /// The run ended before its kill point.
    skipped: bool,
}

fn trial(base: &Path, b: &Baseline, phase: Phase, how: Kill, rng: &mut Rng) -> Trial {
    let spans = b.spans(phase);
    let occ = rng.below(spans.len());
    let delay = spans[occ].mul_f64(rng.unit());
    let mut l = Loop::new(base);
    let mut child = l.start(0);
    let mut t = Trial {
        phase,
        how,
        landed: false,
        lost: None,
        to_agent: None,
        extra_agents: 0,
        extra_checks: 0,
        recovers: 0,
        classes: Vec::new(),
        skipped: false,
    };
    // Wait for the occurrence, then the delay; a run that ends first (a delay longer than
    // this run's phase) had no kill, and is left out.
    let started = Instant::now();
    let mut trigger = None;
    loop {
        l.stream.poll();
        if trigger.is_none() {
            trigger = l
                .stream
                .seen
                .iter()
                .filter(|(_, i)| phase.starts(i))
                .nth(occ)
                .map(|(at, _)| *at);
        }
        if let Some(at) = trigger
            && Instant::now() >= at + delay
        {
            break;
        }
        if child.try_wait().unwrap().is_some() || started.elapsed() > RUN_LIMIT {
            kill(&mut child, Kill::Crash);
            eprintln!(
                "resume: the run ended before its kill point: {}",
                l.output(0)
            );
            t.skipped = true;
            let _ = l.close();
            return t;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    kill(&mut child, how);
    l.stream.poll();
    // Landed inside the phase: the occurrence's end was not recorded before the kill.
    let starts = l.stream.count(|i| phase.starts(i));
    let ends = l.stream.count(|i| phase.ends(i));
    t.landed = match phase {
        Phase::Gate => ends == 0,
        _ => ends <= occ && starts > occ,
    };
    let mut lost = match check_after_kill(&l) {
        Ok(classes) => {
            t.classes = classes;
            None
        }
        Err(e) => Some(e),
    };
    // Restart as a user would, until it stops: `orbit recover` when the runner asks.
    let mut n = 1;
    let restarted = Instant::now();
    let mut ended = false;
    while !ended {
        let mut child = l.start(n);
        let code = l.wait(&mut child);
        match code {
            Some(0) => ended = true,
            Some(4) if t.recovers < 2 => {
                t.recovers += 1;
                let out = l.orbit(&["recover"]);
                if !out.status.success() {
                    lost.get_or_insert(format!("orbit recover failed: {out:?}"));
                    ended = true;
                }
            }
            other => {
                lost.get_or_insert(format!("the restart exited {other:?}: {}", l.output(n)));
                ended = true;
            }
        }
        n += 1;
    }
    t.to_agent = l.stream.agents_since(restarted).map(|a| a - restarted);
    if let Err(e) = check_at_done(&l) {
        lost.get_or_insert(e);
    }
    t.extra_agents = l.stream.count(|i| *i == Item::Agent) as i64 - b.agents as i64;
    t.extra_checks = l.stream.count(|i| *i == Item::Check) as i64 - b.checks as i64;
    if let Some(why) = &lost {
        let kept = l.close().keep();
        eprintln!(
            "resume: LOST after a {} in the {} (kept in {}): {why}",
            how.name(),
            phase.name(),
            kept.display()
        );
    } else {
        let _ = l.close();
    }
    t.lost = lost;
    t
}

fn med_max(mut v: Vec<Duration>) -> (Duration, Duration) {
    if v.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    v.sort();
    (v[v.len() / 2], v[v.len() - 1])
}

pub(crate) fn bench_resume(rows: &mut Vec<Row>) {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    fs::create_dir_all(&base).unwrap();
    let seed: u64 = std::env::var("ORBIT_BENCH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let trials: usize = std::env::var("ORBIT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut rng = Rng(seed);
    let b = baseline(&base);
    let started = Instant::now();
    let mut done = Vec::new();
    for i in 0..trials {
        let how = if i % 2 == 0 {
            Kill::Runner
        } else {
            Kill::Crash
        };
        let phase = PHASES[(i / 2) % PHASES.len()];
        done.push(trial(&base, &b, phase, how, &mut rng));
    }
    let skipped = done.iter().filter(|t| t.skipped).count();
    done.retain(|t| !t.skipped);
    let wall = started.elapsed();
    let whole = done.iter().filter(|t| t.lost.is_none()).count();
    let landed: Vec<String> = PHASES
        .iter()
        .map(|p| {
            let of: Vec<_> = done.iter().filter(|t| t.phase == *p).collect();
            let l = of.iter().filter(|t| t.landed).count();
            format!("{} {l}/{}", p.name(), of.len())
        })
        .collect();
    let recovers: usize = done.iter().map(|t| t.recovers).sum();
    let mut said = std::collections::BTreeMap::<&str, usize>::new();
    for c in done.iter().flat_map(|t| t.classes.iter()) {
        *said.entry(c.as_str()).or_default() += 1;
    }
    let said: Vec<String> = said.iter().map(|(c, n)| format!("{c} x{n}")).collect();
    rows.push(Row {
        name: "resume after kill -9: resumes that lost nothing".into(),
        value: format!("{whole}/{}", done.len()),
        note: format!(
            "all: {}; seed {seed}, {:.0} s, {skipped} run(s) ended before their kill point (left out); kills inside the phase aimed at: {}; orbit recover asked for {recovers} time(s); the audit right after the kills said (P0/P1) {}. Lost nothing = after the kill state.env parses, the journal chains (a torn last line aside), audit not CORRUPT and every finding with a fix, no P0/P1 but CRASHED, TORN_CHECKPOINT, WORKSPACE_DIRTY, STALE_LOCK, ORPHAN_AGENT, and STATE_DRIFT where the journal's last state_write is one generation ahead of state.env (the kill cut that write); the restart reaches DONE; then records agree (sealed state, whole journal and progress.md, per iteration one result.env, final entry, iteration_end), commits of iterations 1 and 2 once each with their work, audit DONE exit 0, no process left",
            verdict(whole == done.len()),
            wall.as_secs_f64(),
            landed.join(", "),
            if said.is_empty() { "nothing".to_string() } else { said.join(", ") }
        ),
    });
    for how in [Kill::Runner, Kill::Crash] {
        let of: Vec<&Trial> = done.iter().filter(|t| t.how == how).collect();
        let waits: Vec<Duration> = of.iter().filter_map(|t| t.to_agent).collect();
        let (m, x) = med_max(waits.clone());
        rows.push(Row {
            name: format!("resume: restart to the agent's next run, {}", how.name()),
            value: format!("{:.2} s", m.as_secs_f64()),
            note: format!(
                "max {:.2} s; {} of {} restarts ran the agent (the others were killed after the last agent run); the uninterrupted loop: {:.1} s to DONE",
                x.as_secs_f64(),
                waits.len(),
                of.len(),
                b.wall.as_secs_f64()
            ),
        });
        let n = of.len().max(1) as f64;
        let agents: i64 = of.iter().map(|t| t.extra_agents).sum();
        let checks: i64 = of.iter().map(|t| t.extra_checks).sum();
        rows.push(Row {
            name: format!("resume: work repeated per kill, {}", how.name()),
            value: format!("{:.2} agent", agents as f64 / n),
            note: format!(
                "and {:.2} check runs on average beyond the uninterrupted loop's {} agent and {} check runs (max {} agent, {} check)",
                checks as f64 / n,
                b.agents,
                b.checks,
                of.iter().map(|t| t.extra_agents).max().unwrap_or(0),
                of.iter().map(|t| t.extra_checks).max().unwrap_or(0)
            ),
        });
    }
}
