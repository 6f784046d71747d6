//! orbit's benchmark: `cargo bench --bench orbit` prints a table of medians.
//!
//! 1. `orbit init` wall time (and again on tmpfs, where the disk's part is gone).
//! 2. Runner overhead per iteration (no-op agent, one-check verify, auto-commit on) on a
//!    small repository and on a synthetic 20,000-file one: the tick's wall time minus the
//!    agent's and verify's own, and its ratio to the floor measured in the same run (one
//!    `git status --porcelain` plus hashing the pinned files). Under contract 2.0 every loop
//!    runs in its own git worktree (the workspace): the agent, verify and the floor's
//!    `git status` run there. The first run's workspace creation is timed against one plain
//!    `git worktree add` of the same repository.
//!
//! 3. `orbit audit` on loops with 1,000, 10,000 and 100,000 iterations of history (the
//!    last with a 1 GB runner.log): wall time and peak memory.
//! 4. `orbit status` over 1,000 loops.
//! 5. Fan-out: one `--once` iteration with 1, 2 and 4 candidates of a no-op agent, on the
//!    small and the 20,000-file repositories: the tick, its overhead beyond one agent's
//!    time (the candidates run in parallel), and the reset of a reused candidate worktree
//!    (as the runner does it: `git checkout -f` + `git clean -fd`) against the floor (one
//!    `git status --porcelain` of that repository).
//! 6. The DONE gate's clean checkout at a claim that changes a few files: the runner's own
//!    code moving the kept checkout to the claim's tree and proving it clean, against one
//!    plain `git worktree add` of that tree (a full checkout; target: at most a tenth).
//!
//! 7. The OS sandbox: a `--once` tick of a loop with `sandbox = "bwrap"` against the same
//!    loop with `sandbox = "none"` in the same repository, ticks alternating; the difference
//!    divided by the number of bubblewrap starts a tick makes (counted in one untimed tick
//!    through a counting `bwrap` first on PATH: the preflight's probe, the agent, the check)
//!    is the sandbox's cost per agent or check run (both loops with the network open). A
//!    third loop, sandboxed with `sandbox-network = "allowlist"`, ticks beside them: its
//!    difference from the sandboxed one, per bubblewrap start, is what the network
//!    allowlist's proxy and bridge add to each run.
//!
//! 8. Time to a verified DONE: a 1 s agent and a 1 s check, PASS_K 2, one iteration to DONE
//!    with 1, 2 and 4 candidates: wall time and check runs.
//!
//! 9. `orbit serve` over 1,000 loops: the overview page's first render (a new server each
//!    sample) and a later one, and the server's CPU over an idle interval (its own
//!    /proc/PID/stat ticks), with no page open and with one overview page's live feed open.
//!
//! 10. `orbit verify` without `--rerun` of a DONE loop in the 20,000-file repository (the
//!     fixture of 2 and 5), from the loop directory and from the branch alone.
//!
//! 11. The queue's overhead per task beyond its loop: a queue of 4 trivial tasks (an agent
//!     that writes a file and claims DONE, the verifier `true`) run by `orbit queue run`,
//!     against the same 4 loops made by `orbit init` and run to DONE by their runner
//!     directly, one after the other, on a small repository; the difference over 4.
//!
//! 12. bash's parse of the runner's code, paired: its parts verbatim (the layout before
//!     lib.sh) against its sections of a plain claude loop's lib.sh, each sourced by a bash
//!     that exits; and `run-loop.sh --help`, the runner's whole load.
//!
//! 13. Adequacy: what `adequacy = "report"` adds to a DONE, on the demo's project and on the
//!     Node fixture (tests/fixtures/projects/node, set up by `npm ci`): the runner's time
//!     to DONE with the measure in it, and the measure alone (`orbit adequacy` of that
//!     DONE). Then orbit's own operators against cargo-mutants (`--tool cargo-mutants`) on
//!     the same diff of the Rust fixture (tests/fixtures/projects/rust, its library a git
//!     submodule): its fix alone, and the fix with a function its tests decide in part;
//!     each measured with the hunks alone, with orbit's operators and with cargo-mutants:
//!     time, mutants made, tried, killed and survived; skipped, saying why, where
//!     cargo-mutants is not installed (.ci/run builds it for the tests; `cargo install cargo-mutants`).
//!
//! 14. The setup's cache at a claim: the Node fixture (tests/fixtures/projects/node, set up by
//!     `npm ci`) looped to DONE in one claim, with the setup run again in the claim's clean
//!     checkout and with it copied from the cache (`--setup-input`): wall time to DONE each.
//!
//! 15. Resume after kill -9 (benches/parts/resume.rs): a two-iteration loop killed by
//!     SIGKILL (the runner's bash alone, or the whole run as a machine crash leaves it) at
//!     random points of an agent run, a check run, the DONE gate and the commit, seeded
//!     (ORBIT_BENCH_SEED), then restarted as a user would: resumes that lost nothing, the
//!     time from the restart to the agent's next run, and the work repeated.
//!
//! Set ORBIT_BENCH_RUNS to change the number of samples (default 15; 5 for the queue's,
//! adequacy's and the claim's; the resume's trials, 24 by default), ORBIT_BENCH_ONLY to one
//! of init, parse, runner, audit, status, fanout, clean, sandbox, done, verify, serve, queue,
//! adequacy, claim, resume to run a single part.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "parts/resume.rs"]
mod resume;

fn orbit() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_orbit"))
}

fn runs() -> usize {
    std::env::var("ORBIT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15)
}

fn sh(dir: &Path, script: &str) {
    let st = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A git repository with `files` small committed files.
fn repo(files: usize) -> tempfile::TempDir {
    repo_in(files, &std::env::temp_dir())
}

fn repo_in(files: usize, base: &Path) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("orbit-bench-")
        .tempdir_in(base)
        .unwrap();
    sh(
        dir.path(),
        "git init -q -b main && git config user.name bench && git config user.email bench@orbit.invalid",
    );
    for i in 0..files {
        let p = dir.path().join(format!("src/d{:03}/f{i:05}.txt", i % 200));
        if i % 100 == 0 || i < 200 {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
        }
        fs::write(&p, format!("file {i}\n")).unwrap();
    }
    fs::write(dir.path().join("README.md"), "bench\n").unwrap();
    sh(dir.path(), "git add -A && git commit -q -m init");
    dir
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(10),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Row {
    name: String,
    value: String,
    note: String,
}

/// "met" or "MISSED", for a target in a row's note.
fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

fn bench_init(rows: &mut Vec<Row>) {
    init_on(rows, &std::env::temp_dir(), "orbit init", "target < 20 ms");
    // The same in memory (tmpfs): what is orbit's own, without the disk's part.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
        init_on(rows, shm, "orbit init, on tmpfs", "");
    }
}

fn init_on(rows: &mut Vec<Row>, base: &Path, name: &str, target: &str) {
    let r = repo_in(1, base);
    let mut samples = Vec::new();
    for i in 0..runs() {
        let d = format!(".orbit/b{i}");
        samples.push(time(|| {
            run_ok(
                Command::new(orbit())
                    .args(["init", "benchmark goal", "--verify", "true", "--dir", &d])
                    .current_dir(r.path())
                    .stdout(Stdio::null()),
            );
        }));
    }
    let m = median(samples);
    rows.push(Row {
        name: name.into(),
        value: ms(m),
        note: if target.is_empty() {
            "the files in memory: orbit's own time".into()
        } else {
            format!("{target}: {}", verdict(m < Duration::from_millis(20)))
        },
    });
}

/// One key's value in a loop's state.env.
fn state_value(dir: &Path, key: &str) -> String {
    let text = fs::read_to_string(dir.join("state.env")).unwrap();
    let prefix = format!("{key}=");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {key} in {}", dir.join("state.env").display()))
        .to_string()
}

/// `orbit init` of a loop in `dir_rel` whose agent is `exec` (a no-op, auto-commit on),
/// without the OS sandbox: the runner's own cost, comparable across runs and machines (the
/// sandbox's is its own part).
fn init_loop(r: &Path, exec: &str, dir_rel: &str) {
    init_loop_in(r, exec, dir_rel, "none");
}

/// `init_loop` with `sandbox` as the loop's sandbox setting (its network open: the network
/// allowlist's cost is its own row).
fn init_loop_in(r: &Path, exec: &str, dir_rel: &str, sandbox: &str) {
    init_loop_net(r, exec, dir_rel, sandbox, "open");
}

/// `init_loop_in` with `network` as the loop's sandbox-network setting.
fn init_loop_net(r: &Path, exec: &str, dir_rel: &str, sandbox: &str, network: &str) {
    run_ok(
        Command::new(orbit())
            .args([
                "init",
                "bench",
                "--engine",
                "custom",
                "--exec",
                exec,
                "--verify",
                "true",
                "--max-iterations",
                "100000",
                "--dir",
                dir_rel,
                "--sandbox",
                sandbox,
                "--sandbox-network",
                network,
            ])
            .current_dir(r)
            .stdout(Stdio::null()),
    );
}

/// One `--once` run of the loop in `dir`, from the repository's root.
fn tick(r: &Path, dir: &Path) {
    run_ok(
        Command::new("bash")
            .arg(dir.join("run-loop.sh"))
            .arg("--once")
            .current_dir(r)
            .env("ALLOW_GREEN_START", "1")
            // The largest window there is: the no-op agent's change is never a stall.
            // (Its output is captured: a failed tick shows it.)
            .env("CONVERGENCE_WINDOW", "100"),
    )
}

/// Removes a worktree (locked or not) and its branch, untimed.
fn worktree_drop(r: &Path, ws: &str, branch: &str) {
    for args in [
        &["worktree", "remove", "-f", "-f", ws][..],
        &["branch", "-q", "-D", branch][..],
    ] {
        run_ok(
            Command::new("git")
                .args(args)
                .current_dir(r)
                .stdout(Stdio::null()),
        );
    }
}

/// A no-op agent in a directory of its own (kept alive by the returned TempDir): it reads
/// its prompt and appends a line to bench.txt in its working directory (the workspace, since
/// contract 2.0), so that every run leaves a change to commit. Its absolute path is the
/// loop's `--exec`.
fn noop_agent() -> (tempfile::TempDir, String) {
    let bin = tempfile::tempdir().unwrap();
    let agent = bin.path().join("noop-agent");
    fs::write(
        &agent,
        "#!/usr/bin/env bash\ncat >/dev/null\necho x >> bench.txt\n",
    )
    .unwrap();
    sh(bin.path(), "chmod +x noop-agent");
    let exec = agent.display().to_string();
    (bin, exec)
}

/// `targets`: whether the runner targets (< 300 ms; a tick within 6x the floor, a
/// continuous iteration within 3x, since contract 2.0's workspaces) apply to this
/// repository (they are set for the 20,000-file one). The first run's workspace creation
/// is judged on both (at most 1.2x one `git worktree add`).
fn bench_runner(rows: &mut Vec<Row>, files: usize, label: &str, targets: bool) {
    let r = repo(files);
    let (_bin, exec) = noop_agent();
    init_loop(r.path(), &exec, ".orbit/bench");
    let dir = r.path().join(".orbit/bench");
    tick(r.path(), &dir); // the first run makes the workspace and pins: not a steady cost
    let ws = PathBuf::from(state_value(&dir, "WORKSPACE"));
    assert!(ws.join(".git").exists(), "no workspace at {}", ws.display());
    let n = runs();
    let ticks: Vec<Duration> = (0..n).map(|_| time(|| tick(r.path(), &dir))).collect();
    let prompt = dir.join("iterations/000001/prompt.md");
    let agent_t: Vec<Duration> = (0..n)
        .map(|_| {
            time(|| {
                run_ok(
                    Command::new(&exec)
                        .current_dir(&ws)
                        .env("ORBIT_AGENT_DIR", ws.join(".orbit-agent"))
                        .stdin(fs::File::open(&prompt).unwrap()),
                );
            })
        })
        .collect();
    // verify.sh as the runner runs it (it then trusts the runner for the root it checks,
    // the workspace, and its scratch space), so that its time is not over-subtracted.
    let canonical = |p: &Path| fs::canonicalize(p).unwrap();
    let verify_t: Vec<Duration> = (0..n)
        .map(|_| {
            time(|| {
                run_ok(
                    Command::new("bash")
                        .arg(dir.join("verify.sh"))
                        .env("ORBIT_VERIFY_FOR", canonical(&dir))
                        .env("ORBIT_REPO_ROOT", canonical(&ws))
                        .env("ORBIT_VERIFY_TMP", canonical(&dir.join(".run-tmp")))
                        .stdout(Stdio::null()),
                )
            })
        })
        .collect();
    // The floor, as before 2.0: one `git status --porcelain` (of the workspace: the same
    // files as the repository, the tree an iteration works on) plus hashing the pins.
    let floor_t: Vec<Duration> = (0..n)
        .map(|_| {
            time(|| {
                run_ok(
                    Command::new("git")
                        .args(["status", "--porcelain"])
                        .current_dir(&ws)
                        .stdout(Stdio::null()),
                );
                run_ok(
                    Command::new("sha256sum")
                        .args(["-c", "--quiet", "pins.sha256"])
                        .current_dir(&dir)
                        .stdout(Stdio::null()),
                );
            })
        })
        .collect();
    // One tree snapshot as the runner takes it (`git add -A` of the workspace into its
    // private index, then `git write-tree`), on a copy of that index, after the agent's
    // kind of change: the unit a tick needs two of, and a continuous iteration one.
    let snap_index = dir.join(".bench-snapshot-index");
    let snap_t: Vec<Duration> = (0..n)
        .map(|i| {
            fs::copy(dir.join(".tree-index"), &snap_index).unwrap();
            fs::write(ws.join("bench.txt"), format!("snapshot {i}\n")).unwrap();
            time(|| {
                for args in [&["add", "-A", "--", "."][..], &["write-tree"][..]] {
                    run_ok(
                        Command::new("git")
                            .args(args)
                            .current_dir(&ws)
                            .env("GIT_INDEX_FILE", &snap_index)
                            .stdout(Stdio::null()),
                    );
                }
            })
        })
        .collect();
    fs::remove_file(&snap_index).unwrap();
    // A continuous run: K iterations in one process, less one --once tick, per iteration:
    // the steady cost without the runner's start (preflight, lock, state load).
    const K: u64 = 11;
    let next = || -> u64 { state_value(&dir, "NEXT_ITERATION").parse().unwrap() };
    let continuous: Vec<Duration> = (0..3)
        .map(|_| {
            let max = (next() + K - 1).to_string();
            time(|| {
                let out = Command::new("bash")
                    .arg(dir.join("run-loop.sh"))
                    .current_dir(r.path())
                    .env("ALLOW_GREEN_START", "1")
                    .env("CONVERGENCE_WINDOW", "100")
                    .env("WRAPUP_ON_LIMIT", "0")
                    .env("MAX_ITERATIONS", &max)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert_eq!(
                    out.status.code(),
                    Some(16),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            })
        })
        .collect();
    // The first run's workspace creation: a new loop's first --once run less its second
    // (paired, so that the machine's drift cancels), and one plain `git worktree add` of
    // the same repository (a new branch at HEAD, beside the loops' workspaces), in turns,
    // each first every other time. The worktrees are removed only
    // after the last sample: on this machine's disk (ext4, online discard) a checkout right
    // after a removal of as many files took from 1x to 25x its time.
    let mut made: Vec<(String, String)> = Vec::new();
    let mut first_run = |i: usize| -> (Duration, Duration) {
        let rel = format!(".orbit/w{i}");
        init_loop(r.path(), &exec, &rel);
        let d = r.path().join(&rel);
        let first = time(|| tick(r.path(), &d));
        let second = time(|| tick(r.path(), &d));
        made.push((state_value(&d, "WORKSPACE"), state_value(&d, "ITER_BRANCH")));
        (first, second)
    };
    let mut plain: Vec<(String, String)> = Vec::new();
    let mut plain_add = |i: usize| -> Duration {
        let path = r.path().join(format!(".orbit/.workspaces/plain-{i}"));
        let path = path.to_str().unwrap().to_string();
        let branch = format!("bench-plain-{i}");
        let t = time(|| {
            run_ok(
                Command::new("git")
                    .args(["worktree", "add", "-q", "-b", &branch, &path, "HEAD"])
                    .current_dir(r.path())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            )
        });
        plain.push((path, branch));
        t
    };
    let m = n.min(7);
    let (mut first_t, mut plain_t) = (Vec::new(), Vec::new());
    sh(r.path(), "sync");
    for i in 0..m {
        if i % 2 == 0 {
            first_t.push(first_run(i));
            plain_t.push(plain_add(i));
        } else {
            plain_t.push(plain_add(i));
            first_t.push(first_run(i));
        }
    }
    for (ws, branch) in made.iter().chain(&plain) {
        worktree_drop(r.path(), ws, branch);
    }
    sh(r.path(), "sync");
    let (tick_m, agent_m, verify_m, floor_m, snap_m) = (
        median(ticks),
        median(agent_t),
        median(verify_t),
        median(floor_t),
        median(snap_t),
    );
    let first_m = median(first_t.iter().map(|t| t.0).collect());
    // What the first run costs over the next tick, less the red gate's verify run (the
    // first run's only other extra): the workspace's creation and the first run's pins.
    let creation = median(
        first_t
            .iter()
            .map(|(first, second)| first.saturating_sub(*second + verify_m))
            .collect(),
    );
    let plain_m = median(plain_t);
    let steady = median(continuous).saturating_sub(tick_m) / (K as u32 - 1);
    let steady_overhead = steady.saturating_sub(agent_m + verify_m);
    let overhead = tick_m.saturating_sub(agent_m + verify_m);
    let ratio = |d: Duration| d.as_secs_f64() / floor_m.as_secs_f64();
    let wt_ratio = creation.as_secs_f64() / plain_m.as_secs_f64();
    rows.push(Row {
        name: format!("first run, {label}: git worktree add"),
        value: ms(plain_m),
        note: format!("one plain `git worktree add -b` of the repository (median of {m})"),
    });
    rows.push(Row {
        name: format!("first run, {label}: workspace"),
        value: ms(creation),
        note: format!(
            "first --once run {} less the next tick and a verify run (median of {m}); {wt_ratio:.2}x one git worktree add; at most 1.2x: {}",
            ms(first_m),
            verdict(wt_ratio <= 1.2)
        ),
    });
    rows.push(Row {
        name: format!("iteration, {label}: tick"),
        value: ms(tick_m),
        note: format!(
            "a --once tick; agent {} + verify {}",
            ms(agent_m),
            ms(verify_m)
        ),
    });
    rows.push(Row {
        name: format!("iteration, {label}: floor"),
        value: ms(floor_m),
        note: "git status --porcelain (in the workspace) + sha256 of the pins".into(),
    });
    rows.push(Row {
        name: format!("iteration, {label}: snapshot"),
        value: ms(snap_m),
        note: format!(
            "git add -A + write-tree, private index; {:.1}x the floor (a tick takes two)",
            ratio(snap_m)
        ),
    });
    let judged = |d: Duration, within: f64| {
        if targets {
            format!(
                "; < 300 ms: {}, within {within}x the floor: {}",
                verdict(d < Duration::from_millis(300)),
                verdict(ratio(d) <= within)
            )
        } else {
            String::new()
        }
    };
    rows.push(Row {
        name: format!("iteration, {label}: tick overhead"),
        value: ms(overhead),
        note: format!(
            "a --once tick; {:.1}x the floor{}",
            ratio(overhead),
            judged(overhead, 6.0)
        ),
    });
    rows.push(Row {
        name: format!("iteration, {label}: steady overhead"),
        value: ms(steady_overhead),
        note: format!(
            "per iteration of a continuous run; {:.1}x the floor{}",
            ratio(steady_overhead),
            judged(steady_overhead, 3.0)
        ),
    });
}

/// The fan-out: for 1, 2 and 4 candidates, a loop of a no-op agent (verify `true`), its
/// first tick untimed (it makes the candidate worktrees), then the median tick. Targets:
/// resetting a reused candidate worktree costs less than one floor (`git status
/// --porcelain` of the repository), and the overhead beyond one agent's time grows no
/// faster than the number of candidates.
fn bench_fanout(rows: &mut Vec<Row>, files: usize, label: &str) {
    let r = repo(files);
    let (bin, exec) = noop_agent();
    let n = runs();
    // One agent's own time, as the runner starts it (stdin from a prompt).
    let prompt = bin.path().join("prompt.md");
    fs::write(&prompt, "bench\n").unwrap();
    let agent_m = median(
        (0..n)
            .map(|_| {
                time(|| {
                    run_ok(
                        Command::new(&exec)
                            .current_dir(bin.path())
                            .stdin(fs::File::open(&prompt).unwrap()),
                    )
                })
            })
            .collect(),
    );
    let mut base_overhead = None;
    for k in [1u32, 2, 4] {
        let rel = format!(".orbit/fan{k}");
        run_ok(
            Command::new(orbit())
                .args([
                    "init",
                    &format!("bench fan-out {k}"),
                    "--engine",
                    "custom",
                    "--exec",
                    &exec,
                    "--verify",
                    "true",
                    "--max-iterations",
                    "100000",
                    "--candidates",
                    &k.to_string(),
                    "--dir",
                    &rel,
                ])
                .current_dir(r.path())
                .stdout(Stdio::null()),
        );
        let dir = r.path().join(&rel);
        tick(r.path(), &dir);
        let tick_m = median((0..n).map(|_| time(|| tick(r.path(), &dir))).collect());
        let overhead = tick_m.saturating_sub(agent_m);
        let growth = match base_overhead {
            None => {
                base_overhead = Some(overhead);
                String::from("the baseline (no fan-out)")
            }
            Some(b) => {
                let g = overhead.as_secs_f64()
                    / Duration::max(b, Duration::from_micros(1)).as_secs_f64();
                format!(
                    "{g:.2}x the overhead of one; grows no faster than {k}x: {}",
                    verdict(g <= f64::from(k))
                )
            }
        };
        rows.push(Row {
            name: format!("fan-out, {label}: {k} candidate(s), tick"),
            value: ms(tick_m),
            note: format!(
                "a --once iteration; overhead beyond one agent ({}) {}; {growth}",
                ms(agent_m),
                ms(overhead)
            ),
        });
        if k > 1 {
            // A reused candidate worktree reset to the base, as the runner does it, after
            // the kind of change an agent leaves; against the floor of that repository.
            let ws = PathBuf::from(state_value(&dir, "WORKSPACE"));
            let cws = PathBuf::from(format!("{}.c1", ws.display()));
            assert!(
                cws.join(".git").is_file(),
                "no candidate worktree at {}",
                cws.display()
            );
            let head = String::from_utf8(
                Command::new("git")
                    .args(["rev-parse", "HEAD"])
                    .current_dir(&ws)
                    .output()
                    .unwrap()
                    .stdout,
            )
            .unwrap();
            let head = head.trim().to_string();
            let reset_m = median(
                (0..n)
                    .map(|i| {
                        fs::write(cws.join("bench.txt"), format!("candidate {i}\n")).unwrap();
                        fs::write(cws.join("new-file.txt"), "new\n").unwrap();
                        time(|| {
                            for args in [
                                &["checkout", "-q", "-f", "--detach", &head][..],
                                &["clean", "-q", "-f", "-d"][..],
                            ] {
                                run_ok(
                                    Command::new("git")
                                        .args(args)
                                        .current_dir(&cws)
                                        .stdout(Stdio::null()),
                                );
                            }
                        })
                    })
                    .collect(),
            );
            let floor_m = median(
                (0..n)
                    .map(|_| {
                        time(|| {
                            run_ok(
                                Command::new("git")
                                    .args(["status", "--porcelain"])
                                    .current_dir(&ws)
                                    .stdout(Stdio::null()),
                            )
                        })
                    })
                    .collect(),
            );
            let ratio = reset_m.as_secs_f64() / floor_m.as_secs_f64();
            rows.push(Row {
                name: format!("fan-out, {label}: {k} candidates, reset"),
                value: ms(reset_m),
                note: format!(
                    "one reused candidate worktree reset to the base; {ratio:.2}x the floor ({}); less than one floor: {}",
                    ms(floor_m),
                    verdict(ratio < 1.0)
                ),
            });
        }
    }
}

/// The OS sandbox's cost per agent or check run (see the header, part 7).
fn bench_sandbox(rows: &mut Vec<Row>) {
    let name = "sandbox cost per agent or check run".to_string();
    let works = Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-all",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !works {
        rows.push(Row {
            name,
            value: "-".into(),
            note: "skipped: bubblewrap cannot start a sandbox on this machine".into(),
        });
        return;
    }
    let r = repo(1);
    let (_bin, exec) = noop_agent();
    init_loop_in(r.path(), &exec, ".orbit/plain", "none");
    init_loop_in(r.path(), &exec, ".orbit/boxed", "bwrap");
    init_loop_net(r.path(), &exec, ".orbit/fenced", "bwrap", "allowlist");
    let plain = r.path().join(".orbit/plain");
    let boxed = r.path().join(".orbit/boxed");
    let fenced = r.path().join(".orbit/fenced");
    // The first runs make the workspaces and pins: not a steady cost.
    tick(r.path(), &plain);
    tick(r.path(), &boxed);
    tick(r.path(), &fenced);
    // How many sandboxes a tick starts: one untimed tick through a counting bwrap.
    let shim = tempfile::tempdir().unwrap();
    let count = shim.path().join("count");
    let real = String::from_utf8(
        Command::new("bash")
            .args(["-c", "type -P bwrap"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    fs::write(
        shim.path().join("bwrap"),
        format!(
            "#!/bin/bash\necho >> '{}'\nexec '{}' \"$@\"\n",
            count.display(),
            real.trim()
        ),
    )
    .unwrap();
    sh(shim.path(), "chmod +x bwrap");
    let path = format!(
        "{}:{}",
        shim.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run_ok(
        Command::new("bash")
            .arg(boxed.join("run-loop.sh"))
            .arg("--once")
            .current_dir(r.path())
            .env("PATH", &path)
            .env("ALLOW_GREEN_START", "1")
            .env("CONVERGENCE_WINDOW", "100"),
    );
    let starts = fs::read_to_string(&count)
        .map(|t| t.lines().count())
        .unwrap_or(0);
    assert!(starts > 0, "the sandboxed tick started no bwrap");
    let n = runs();
    let mut p = Vec::new();
    let mut b = Vec::new();
    let mut f = Vec::new();
    for _ in 0..n {
        p.push(time(|| tick(r.path(), &plain)));
        b.push(time(|| tick(r.path(), &boxed)));
        f.push(time(|| tick(r.path(), &fenced)));
    }
    let (p, b, f) = (median(p), median(b), median(f));
    let per = b.saturating_sub(p) / starts as u32;
    // The network allowlist's proxy and bridge, per sandboxed run (the same runs as the
    // sandboxed tick's, and one probe more at its preflight).
    let net = f.saturating_sub(b) / starts as u32;
    rows.push(Row {
        name: "network allowlist cost per sandboxed run".into(),
        value: ms(net),
        note: format!(
            "< 50 ms: {}; a tick {} fenced, {} with the network open",
            verdict(net < Duration::from_millis(50)),
            ms(f),
            ms(b)
        ),
    });
    rows.push(Row {
        name,
        value: ms(per),
        note: format!(
            "< 30 ms: {}; a tick {} sandboxed, {} without ({} bubblewrap starts a tick)",
            verdict(per < Duration::from_millis(30)),
            ms(b),
            ms(p),
            starts
        ),
    });
}

/// The DONE gate's clean checkout at a claim that changes a few files: the runner's own
/// `evidence_clean_checkout_v` (templates/lib/runner/evidence.sh, sourced by bash with the
/// helpers it calls stubbed) moves the kept checkout between two trees that differ in 3
/// files, with a report the last claim's checks left in it, and proves it clean; against a
/// full checkout of the same tree (one plain `git worktree add`, its floor) and the refill
/// every file of the layout before (read-tree, clean, checkout-index of every file). Only
/// a claim pays it: the gate is the one place the runner makes it.
fn bench_clean(rows: &mut Vec<Row>, files: usize, label: &str) {
    let r = repo(files);
    let n = runs();
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let tree_a = git(r.path(), &["rev-parse", "HEAD^{tree}"]);
    for f in ["README.md", "src/d000/f00000.txt", "src/d001/f00001.txt"] {
        if r.path().join(f).exists() {
            fs::write(r.path().join(f), "changed by the claim\n").unwrap();
        }
    }
    fs::write(r.path().join("NEW.md"), "a new file\n").unwrap();
    git(r.path(), &["add", "-A"]);
    git(r.path(), &["commit", "-q", "-m", "a claim's change"]);
    let tree_b = git(r.path(), &["rev-parse", "HEAD^{tree}"]);
    let root = fs::canonicalize(r.path()).unwrap();
    let ws = root.parent().unwrap().join(format!(
        "{}.ws",
        root.file_name().unwrap().to_string_lossy()
    ));
    let ws = ws.display().to_string();
    let clean = format!("{ws}.clean");
    let loop_dir = tempfile::tempdir().unwrap();
    let part = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/lib/runner/evidence.sh");
    let driver = format!(
        r#"set -u
source '{part}'
orbit_log() {{ printf '%s\n' "$*" >>"$ORBIT_LOG_FILE"; }}
config_repo_git() {{ GIT_OPTIONAL_LOCKS=0 git -C "$REPO_ROOT" "$@"; }}
setup_modules_checkout() {{ :; }}
REPO_ROOT='{root}' WS_MAIN='{ws}' LOOP_DIR='{loop_dir}' ORBIT_LOG_FILE='{loop_dir}/runner.log'
GIT_COMMON_ABS='{root}/.git' GIT_DIR_ABS='{root}/.git' ORBIT_TMP='{loop_dir}'
for tree in "$@"; do
  echo "report of the last claim's checks" > '{clean}/report.xml' 2>/dev/null || true
  t0=$EPOCHREALTIME
  evidence_clean_checkout_v "$tree" || {{ cat "$ORBIT_LOG_FILE" >&2; exit 1; }}
  t1=$EPOCHREALTIME
  echo $(( (${{t1/./}} - ${{t0/./}}) ))
done
"#,
        part = part.display(),
        root = root.display(),
        loop_dir = loop_dir.path().display(),
    );
    let move_to = |trees: &[&str]| -> Vec<Duration> {
        let out = Command::new("bash")
            .arg("-c")
            .arg(&driver)
            .arg("bench")
            .args(trees)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| Duration::from_micros(l.trim().parse().unwrap()))
            .collect()
    };
    // The first claim makes it (a full checkout); each later one moves it.
    let first = move_to(&[&tree_a])[0];
    let trees: Vec<&str> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                tree_b.as_str()
            } else {
                tree_a.as_str()
            }
        })
        .collect();
    let move_m = median(move_to(&trees));
    let refill_m = median(
        (0..n)
            .map(|i| {
                fs::write(Path::new(&clean).join("report.xml"), format!("run {i}\n")).unwrap();
                time(|| {
                    git(Path::new(&clean), &["read-tree", "HEAD^{tree}"]);
                    git(Path::new(&clean), &["clean", "-q", "-f", "-f", "-d", "-x"]);
                    git(Path::new(&clean), &["checkout-index", "-a", "-f", "-u"]);
                })
            })
            .collect(),
    );
    let add_m = median(
        (0..n)
            .map(|i| {
                let w = format!("{clean}.add{i}");
                let d = time(|| {
                    git(r.path(), &["worktree", "add", "-q", "--detach", &w, "HEAD"]);
                });
                git(r.path(), &["worktree", "remove", "-f", "-f", &w]);
                d
            })
            .collect(),
    );
    git(r.path(), &["worktree", "remove", "-f", "-f", &clean]);
    let ratio = move_m.as_secs_f64() / add_m.as_secs_f64();
    let to_refill = move_m.as_secs_f64() / refill_m.as_secs_f64();
    // The target is set on 20,000 files; on a small repository the programs are the cost.
    let judged = if files >= 20_000 {
        format!("at most 0.1x: {}", verdict(ratio <= 0.1))
    } else {
        "no target on a small repository".to_string()
    };
    rows.push(Row {
        name: format!("clean checkout at a claim, {label}: full checkout"),
        value: ms(add_m),
        note: "the floor: one plain git worktree add of the tree".into(),
    });
    rows.push(Row {
        name: format!("clean checkout at a claim, {label}"),
        value: ms(move_m),
        note: format!(
            "the kept checkout moved to a tree 3 files away and proven clean; {ratio:.2}x a full checkout; {judged}; its first claim {} (made afresh); every file written again in the same checkout, as before, {} ({to_refill:.2}x that)",
            ms(first),
            ms(refill_m)
        ),
    });
}

/// Writes a loop's history as the runner would have: `n` iterations of events (a valid
/// hash chain), progress entries, ledger, signatures and result.env files, a sealed
/// state.env, and a runner.log of `log_bytes`.
fn synthetic_loop(repo: &Path, dir_rel: &str, n: u64, log_bytes: u64) -> PathBuf {
    use std::io::{BufWriter, Write};
    run_ok(
        Command::new(orbit())
            .args([
                "init",
                "history",
                "--engine",
                "custom",
                "--exec",
                "true",
                "--verify",
                "true",
                "--loop-timeout",
                "8h",
                "--dir",
                dir_rel,
            ])
            .current_dir(repo)
            .stdout(Stdio::null()),
    );
    let dir = repo.join(dir_rel);
    let t0 = 1_790_000_000u64;
    let mut events = BufWriter::new(fs::File::create(dir.join("events.jsonl")).unwrap());
    let mut progress_text = orbit::progress::preamble("history");
    let mut pg_prev = orbit::progress::GENESIS.to_string();
    let (e0, h0) = orbit::progress::close_entry(&pg_prev, 0, "## Iteration 0 — READY\n- at: x\n");
    progress_text.push_str(&e0);
    pg_prev = h0;
    let mut progress = BufWriter::new(fs::File::create(dir.join("progress.md")).unwrap());
    progress.write_all(progress_text.as_bytes()).unwrap();
    let mut ledger = BufWriter::new(fs::File::create(dir.join("cost.ledger")).unwrap());
    let mut sigs = BufWriter::new(fs::File::create(dir.join(".action-sig.log")).unwrap());
    let mut prev = orbit::events::GENESIS.to_string();
    let mut seq = 0u64;
    let mut emit =
        |w: &mut BufWriter<fs::File>, event: &str, it: u64, fields: &[(&str, String)]| {
            seq += 1;
            let ts = orbit::fsx::iso_utc(t0 + it * 60);
            let line = orbit::events::build_line(seq, &ts, event, it, fields, &prev);
            prev = orbit::events::split_hash(line.trim_end())
                .unwrap()
                .1
                .to_string();
            w.write_all(line.as_bytes()).unwrap();
        };
    for i in 1..=n {
        let sig = format!("{:040x}", i * 7919);
        emit(
            &mut events,
            "iteration_start",
            i,
            &[("max_iterations", "1000000".into())],
        );
        emit(
            &mut events,
            "agent_exit",
            i,
            &[
                ("phase", "\"work\"".into()),
                ("exit_code", "0".into()),
                ("outcome", "\"ok\"".into()),
            ],
        );
        emit(
            &mut events,
            "verify_fail",
            i,
            &[("run", "1".into()), ("failing", "\"true\"".into())],
        );
        emit(
            &mut events,
            "iteration_end",
            i,
            &[
                ("verdict", "\"CONTINUE\"".into()),
                ("reason", "\"none\"".into()),
            ],
        );
        emit(
            &mut events,
            "state_write",
            i,
            &[
                ("gen", (i + 2).to_string()),
                ("status", "\"CONTINUE\"".into()),
                ("reason", "\"none\"".into()),
                ("next_iteration", (i + 1).to_string()),
            ],
        );
        let entry = format!(
            "## Iteration {i} — CONTINUE\n- agent: exit 0 (ok)\n- verify: fail — failing: true\n- signature: {sig}\n- decision: CONTINUE (none)\n"
        );
        let (text, h) = orbit::progress::close_entry(&pg_prev, i, &entry);
        pg_prev = h;
        progress.write_all(text.as_bytes()).unwrap();
        writeln!(ledger, "{i}\t1000\treported").unwrap();
        writeln!(sigs, "{i}\t{sig}").unwrap();
        let idir = dir.join(format!("iterations/{i:06}"));
        fs::create_dir_all(&idir).unwrap();
        fs::write(idir.join("result.env"), format!("ITERATION={i}\nVERDICT=CONTINUE\nSTOP_REASON=none\nVERIFY=fail\nAGENT_OUTCOME=ok\nTREE_BEFORE={sig}\nTREE_AFTER={sig}\nCOST_MICROUSD=1000\nCOST_KIND=reported\n")).unwrap();
    }
    emit(
        &mut events,
        "loop_stop",
        n,
        &[
            ("status", "\"CONTINUE\"".into()),
            ("reason", "\"tick\"".into()),
            ("exit_code", "10".into()),
        ],
    );
    events.flush().unwrap();
    progress.flush().unwrap();
    ledger.flush().unwrap();
    sigs.flush().unwrap();
    let mut state = orbit::state::State::ready("1.0.0", t0 + n * 60);
    state.generation = n + 2;
    state.next_iteration = n + 1;
    state.last_status = orbit::contract::Status::Continue;
    state.stop_reason = orbit::contract::StopReason::Tick;
    state.started_at = t0;
    state.cost_microusd = n * 1000;
    let text = state.print();
    fs::write(dir.join("state.env"), &text).unwrap();
    fs::write(
        dir.join("state.env.sha256"),
        orbit::state::Sidecar::for_state(&text, state.generation).print(),
    )
    .unwrap();
    // runner.log: real lines, the last ones describing the last iterations.
    let mut log =
        BufWriter::with_capacity(1 << 20, fs::File::create(dir.join("runner.log")).unwrap());
    let line = "2026-11-30T00:00:00Z iteration 1 of at most 1000000: the agent starts\n";
    let mut written = 0u64;
    while written < log_bytes {
        log.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
    }
    log.flush().unwrap();
    dir
}

fn peak_text(kb: Option<u64>) -> String {
    kb.map(|k| format!("{:.1} MB peak", k as f64 / 1024.0))
        .unwrap_or_else(|| "peak memory n/a".into())
}

/// The peak resident memory (KiB) of one run of `cmd`: its own rusage, from wait4.
fn peak_kb(cmd: &mut Command) -> Option<u64> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `usage` is a plain C struct that wait4 fills; `pid` is our own child, which
    // std never waits for (it is reaped here).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    (r == pid).then_some(usage.ru_maxrss as u64)
}

/// Runs an orbit command `runs` times; returns the median wall time and the peak resident
/// memory of one more run.
fn time_cmd(args: &[&str], cwd: &Path) -> (Duration, Option<u64>) {
    let samples: Vec<Duration> = (0..runs())
        .map(|_| {
            time(|| {
                let _ = Command::new(orbit())
                    .args(args)
                    .current_dir(cwd)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
            })
        })
        .collect();
    let mem = peak_kb(Command::new(orbit()).args(args).current_dir(cwd));
    (median(samples), mem)
}

fn bench_audit(rows: &mut Vec<Row>) {
    let r = repo(1);
    for (n, log) in [
        (1_000u64, 1u64 << 20),
        (10_000, 1 << 20),
        (100_000, 1 << 30),
    ] {
        let rel = format!(".orbit/h{n}");
        let t = Instant::now();
        let dir = synthetic_loop(r.path(), &rel, n, log);
        let made = t.elapsed();
        let (d, mem_kb) = time_cmd(&["audit", dir.to_str().unwrap()], r.path());
        let mem = peak_text(mem_kb);
        let target = if n == 100_000 {
            format!(
                "; target < 200 ms: {}, < 50 MB: {}",
                verdict(d < Duration::from_millis(200)),
                mem_kb.map_or("n/a", |k| verdict(k < 50 * 1024))
            )
        } else {
            String::new()
        };
        rows.push(Row {
            name: format!("orbit audit, {n} iterations"),
            value: ms(d),
            note: format!(
                "{mem}; runner.log {} MB; history written in {:.1} s{target}",
                log >> 20,
                made.as_secs_f64()
            ),
        });
    }
}

fn bench_status(rows: &mut Vec<Row>) {
    let r = repo(1);
    run_ok(
        Command::new(orbit())
            .args([
                "init",
                "fleet",
                "--engine",
                "custom",
                "--exec",
                "true",
                "--verify",
                "true",
                "--dir",
                ".orbit/l0000",
            ])
            .current_dir(r.path())
            .stdout(Stdio::null()),
    );
    sh(
        r.path(),
        "for i in $(seq -w 1 999); do cp -r .orbit/l0000 .orbit/l0$i; done",
    );
    let (d, mem) = time_cmd(&["status"], r.path());
    let mem = peak_text(mem);
    rows.push(Row {
        name: "orbit status, 1,000 loops".into(),
        value: ms(d),
        note: format!(
            "{mem}; target < 2 s: {}",
            verdict(d < Duration::from_secs(2))
        ),
    });
}

/// A repository with 1,000 copies of one fresh loop.
fn thousand_loops() -> tempfile::TempDir {
    let r = repo(1);
    run_ok(
        Command::new(orbit())
            .args([
                "init",
                "fleet",
                "--engine",
                "custom",
                "--exec",
                "true",
                "--verify",
                "true",
                "--dir",
                ".orbit/l0000",
            ])
            .current_dir(r.path())
            .stdout(Stdio::null()),
    );
    sh(
        r.path(),
        "for i in $(seq -w 1 999); do cp -r .orbit/l0000 .orbit/l0$i; done",
    );
    r
}

/// A running `orbit serve` (killed when dropped), its port and token, and its standard
/// output (held open, never read again: a closed pipe must not be what a sample measures).
struct Server(
    std::process::Child,
    u16,
    String,
    #[allow(dead_code)] std::io::BufReader<std::process::ChildStdout>,
);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_serve(dir: &Path) -> Server {
    use std::io::BufRead;
    let mut child = Command::new(orbit())
        .args(["serve", "--port", "0"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL: {line}"))
        .to_string();
    let (base, token) = url.split_once("/?token=").unwrap();
    let port = base.rsplit(':').next().unwrap().parse().unwrap();
    Server(child, port, token.to_string(), out)
}

/// `GET path` on the server: the whole answer's bytes.
fn http_get(s: &Server, path: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", s.1)).unwrap();
    write!(
        c,
        "GET {path}?token={} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
        s.2, s.1
    )
    .unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    assert!(
        out.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&out[..out.len().min(200)])
    );
    out
}

/// The CPU time (user + system, in clock ticks) the process has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (in parentheses, which may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The share of one CPU the server used over `secs` idle seconds.
fn idle_cpu(s: &Server, secs: u64) -> f64 {
    // SAFETY: sysconf(3) only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let t0 = cpu_ticks(s.0.id());
    std::thread::sleep(Duration::from_secs(secs));
    let t1 = cpu_ticks(s.0.id());
    (t1 - t0) as f64 / hz / secs as f64 * 100.0
}

fn bench_serve(rows: &mut Vec<Row>) {
    let r = thousand_loops();
    let n = runs().min(7);
    let mut cold = Vec::new();
    let mut size = 0;
    for _ in 0..n {
        let s = start_serve(r.path());
        cold.push(time(|| size = http_get(&s, "/").len()));
    }
    let cold = median(cold);
    rows.push(Row {
        name: "orbit serve: the overview of 1,000 loops, first render".into(),
        value: ms(cold),
        note: format!(
            "{} KB page, a new server each of {n} samples; target < 1 s: {}",
            size / 1024,
            verdict(cold < Duration::from_secs(1))
        ),
    });
    let s = start_serve(r.path());
    http_get(&s, "/");
    let warm = median(
        (0..runs())
            .map(|_| time(|| drop(http_get(&s, "/"))))
            .collect(),
    );
    rows.push(Row {
        name: "orbit serve: the overview of 1,000 loops, read again".into(),
        value: ms(warm),
        note: "the rows kept while the loops' files are unchanged".into(),
    });
    let secs = 20;
    let alone = idle_cpu(&s, secs);
    rows.push(Row {
        name: "orbit serve idle, 1,000 loops, no page open".into(),
        value: format!("{alone:.2}% CPU"),
        note: format!("over {secs} s; target < 1%: {}", verdict(alone < 1.0)),
    });
    // One overview page's live feed open (an EventSource, as a browser holds it).
    let feed = {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(("127.0.0.1", s.1)).unwrap();
        write!(
            c,
            "GET /events?token={} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n\r\n",
            s.2, s.1
        )
        .unwrap();
        c
    };
    let watched = idle_cpu(&s, secs);
    drop(feed);
    rows.push(Row {
        name: "orbit serve idle, 1,000 loops, the overview's live feed open".into(),
        value: format!("{watched:.2}% CPU"),
        note: format!(
            "over {secs} s, the loops unchanged; target < 1%: {}",
            verdict(watched < 1.0)
        ),
    });
}

/// Time to a verified DONE: a scripted agent that takes 1 s and one check that takes 1 s
/// (PASS_K 2), one iteration to DONE with 1, 2 and 4 candidates, with the loop's default
/// sandbox (bubblewrap where it works) and `check-jobs`: the wall time of the loop from
/// `orbit init` to the runner's end, and without the DONE's adequacy measure (adequacy =
/// "report", the default: it runs the checks again after the DONE is recorded, and says its
/// own seconds in adequacy.json). One candidate needs at least 5 s of its steps' own time
/// (red gate, agent, PASS_K checks, the last of them in the clean checkout, the
/// confirmation run). The check runs are counted by the check itself, in the same loop run
/// again without the sandbox (untimed): a sandboxed check writes nowhere but its workspace.
/// Targets: one candidate within 1.1x of its steps, more within 1.2x of one; the check runs
/// the red gate and PASS_K per candidate, nothing more.
fn bench_done(rows: &mut Vec<Row>) {
    let bin = tempfile::tempdir().unwrap();
    let agent = bin.path().join("agent.sh");
    fs::write(
        &agent,
        "#!/bin/sh
cat >/dev/null
sleep 1
case \"$ORBIT_PHASE\" in
  confirm) echo CONFIRMED > \"$ORBIT_AGENT_DIR/confirm.md\"; exit 0 ;;
  wrapup) exit 0 ;;
esac
echo ok > ok.txt
echo done > \"$ORBIT_AGENT_DIR/done.md\"
",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    let exec = agent.display().to_string();
    let steps = Duration::from_secs(5);
    // One loop to DONE: its wall time, and the seconds its adequacy measure says it took.
    let done = |k: u32, check: &str, extra: &[&str]| -> (Duration, f64) {
        let r = repo(1);
        let rel = format!(".orbit/done{k}");
        let started = Instant::now();
        let cands = k.to_string();
        let mut args = vec![
            "init",
            "bench done",
            "--engine",
            "custom",
            "--exec",
            &exec,
            "--verify",
            check,
            "--candidates",
            &cands,
            "--dir",
            &rel,
        ];
        args.extend_from_slice(extra);
        run_ok(
            Command::new(orbit())
                .args(&args)
                .current_dir(r.path())
                .stdout(Stdio::null()),
        );
        run_ok(
            Command::new("bash")
                .arg(r.path().join(&rel).join("run-loop.sh"))
                .current_dir(r.path())
                .env("RETRY_BASE_DELAY", "0")
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let wall = started.elapsed();
        let dir = r.path().join(&rel);
        assert_eq!(
            state_value(&dir, "LAST_STATUS"),
            "DONE",
            "{}",
            dir.display()
        );
        let adequacy: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("adequacy.json")).unwrap()).unwrap();
        let measured = adequacy["details"]["elapsed_s"].as_f64().unwrap();
        (wall, measured)
    };
    let mut one = None;
    for k in [1u32, 2, 4] {
        let (wall, adequacy) = done(k, "sleep 1; test -f ok.txt", &[]);
        let counter = bin.path().join(format!("checks-{k}"));
        let counted = format!(
            "echo \"$PWD\" >> {}; sleep 1; test -f ok.txt",
            counter.display()
        );
        done(k, &counted, &["--sandbox", "none"]);
        // The DONE's adequacy measure runs the checks after the DONE in checkouts of its
        // own: not the DONE's runs.
        let checks = fs::read_to_string(&counter)
            .unwrap_or_default()
            .lines()
            .filter(|p| !p.contains("/orbit-adequacy-"))
            .count();
        assert!(
            checks > 0,
            "the check counted its runs in {}",
            counter.display()
        );
        // Red gate, PASS_K per candidate (with one candidate the last pass is the clean
        // checkout's; with more, the survivor's clean checkout is one run more today).
        let want = 1 + 2 * k as usize;
        let to_done = wall.as_secs_f64() - adequacy;
        let note = match one {
            None => {
                one = Some(to_done);
                let g = to_done / steps.as_secs_f64();
                format!(
                    "one run: {checks} check runs (at most {want}: {}); {to_done:.1} s without the {adequacy:.1} s adequacy measure after it, {g:.2}x the 5 s its steps need (target 1.1x: {})",
                    verdict(checks <= want),
                    verdict(g <= 1.1)
                )
            }
            Some(b) => {
                let g = to_done / b;
                format!(
                    "one run: {checks} check runs (at most {want}: {}); {to_done:.1} s without the {adequacy:.1} s adequacy measure after it, {g:.2}x one candidate's (target 1.2x: {})",
                    verdict(checks <= want),
                    verdict(g <= 1.2)
                )
            }
        };
        rows.push(Row {
            name: format!("time to DONE, {k} candidate(s)"),
            value: format!("{:.1} s", wall.as_secs_f64()),
            note,
        });
    }
}

/// `orbit verify` without `--rerun` of a DONE loop's branch in the 20,000-file repository:
/// the envelope parsed, the journal read, the check definition files hashed from the
/// commit's tree, the answer journaled. Nothing runs; the target is well under a second.
fn bench_verify(rows: &mut Vec<Row>) {
    let r = repo(20_000);
    let bin = tempfile::tempdir().unwrap();
    let agent = bin.path().join("done-agent");
    fs::write(
        &agent,
        "#!/usr/bin/env bash\ncat >/dev/null\ncase ${ORBIT_PHASE-} in\n  confirm) echo CONFIRMED > \"$ORBIT_AGENT_DIR/confirm.md\"; exit 0 ;;\n  wrapup) exit 0 ;;\nesac\necho x >> bench.txt\necho 'every check holds' > \"$ORBIT_AGENT_DIR/done.md\"\n",
    )
    .unwrap();
    sh(bin.path(), "chmod +x done-agent");
    let exec = agent.display().to_string();
    init_loop(r.path(), &exec, ".orbit/bench");
    let dir = r.path().join(".orbit/bench");
    let out = Command::new("bash")
        .arg(dir.join("run-loop.sh"))
        .current_dir(r.path())
        .env("ALLOW_GREEN_START", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        state_value(&dir, "LAST_STATUS"),
        "DONE",
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let verify = |target: &str| {
        let out = Command::new(orbit())
            .args(["verify", "--json", target])
            .current_dir(r.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "orbit verify {target}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    };
    for (target, what) in [
        (".orbit/bench", "the loop directory at hand"),
        ("orbit/bench", "its branch, the envelope from its note"),
    ] {
        let m = median((0..runs()).map(|_| time(|| verify(target))).collect());
        rows.push(Row {
            name: format!("orbit verify, 20,000 files ({what})"),
            value: ms(m),
            note: format!(
                "no --rerun: envelope, journal, check files hashed from the tree; well under 1 s: {}",
                verdict(m < Duration::from_millis(250))
            ),
        });
    }
}

/// The trivial task's agent: it writes a file of its own (named by its loop) and claims
/// DONE; it agrees when asked to confirm.
fn trivial_agent(bin: &Path) -> String {
    let agent = bin.join("trivial.sh");
    fs::write(
        &agent,
        "#!/bin/sh
cat >/dev/null
case \"$ORBIT_PHASE\" in
  confirm) echo CONFIRMED > \"$ORBIT_AGENT_DIR/confirm.md\"; exit 0 ;;
  wrapup) exit 0 ;;
esac
echo ok > \"$(basename \"$ORBIT_WORKSPACE\").txt\"
echo done > \"$ORBIT_AGENT_DIR/done.md\"
",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    agent.display().to_string()
}

const QUEUE_TASKS: usize = 4;

/// 4 loops made by `orbit init` and run to DONE by their runner, one after the other.
fn direct_loops(exec: &str) -> Duration {
    let r = repo(1);
    time(|| {
        for i in 0..QUEUE_TASKS {
            let rel = format!(".orbit/t{i}-a1");
            run_ok(
                Command::new(orbit())
                    .args([
                        "init",
                        "trivial",
                        "--engine",
                        "custom",
                        "--exec",
                        exec,
                        "--verify",
                        "true",
                        "--dir",
                        &rel,
                        "--sandbox",
                        "none",
                    ])
                    .current_dir(r.path())
                    .stdout(Stdio::null()),
            );
            run_ok(
                Command::new("bash")
                    .arg(r.path().join(&rel).join("run-loop.sh"))
                    .current_dir(r.path())
                    .env("RETRY_BASE_DELAY", "0")
                    .env("ALLOW_GREEN_START", "1")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            );
            assert_eq!(state_value(&r.path().join(&rel), "LAST_STATUS"), "DONE");
        }
    })
}

/// The same 4 tasks as a queue (added untimed), run by `orbit queue run` to done.
fn queued_loops(exec: &str) -> Duration {
    let r = repo(1);
    for i in 0..QUEUE_TASKS {
        run_ok(
            Command::new(orbit())
                .args([
                    "queue",
                    "add",
                    "trivial",
                    "--name",
                    &format!("t{i}"),
                    "--verify",
                    "true",
                    "--engine",
                    "custom",
                    "--exec",
                    exec,
                    "--sandbox",
                    "none",
                ])
                .current_dir(r.path())
                .stdout(Stdio::null()),
        );
    }
    let wall = time(|| {
        run_ok(
            Command::new(orbit())
                .args(["queue", "run"])
                .current_dir(r.path())
                .env("RETRY_BASE_DELAY", "0")
                .env("ALLOW_GREEN_START", "1")
                .stdout(Stdio::null()),
        )
    });
    let status = Command::new(orbit())
        .args(["queue", "status", "--json"])
        .current_dir(r.path())
        .output()
        .unwrap();
    let done = String::from_utf8_lossy(&status.stdout)
        .matches("\"status\":\"done\"")
        .count();
    assert_eq!(
        done,
        QUEUE_TASKS,
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    wall
}

/// The queue's overhead per task beyond its loop (target: well under a second).
fn bench_queue(rows: &mut Vec<Row>) {
    let bin = tempfile::tempdir().unwrap();
    let exec = trivial_agent(bin.path());
    let n = std::env::var("ORBIT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let (mut direct, mut queued) = (Vec::new(), Vec::new());
    for _ in 0..n {
        direct.push(direct_loops(&exec));
        queued.push(queued_loops(&exec));
    }
    let (d, q) = (median(direct), median(queued));
    let per = q.saturating_sub(d) / QUEUE_TASKS as u32;
    rows.push(Row {
        name: format!("{QUEUE_TASKS} trivial loops run directly (init + run to DONE)"),
        value: ms(d),
        note: format!("median of {n} (the queue's part: ORBIT_BENCH_RUNS, default 5)"),
    });
    rows.push(Row {
        name: format!("the same {QUEUE_TASKS} as a queue (orbit queue run)"),
        value: ms(q),
        note: format!("median of {n}"),
    });
    rows.push(Row {
        name: "queue overhead per task beyond its loop".into(),
        value: ms(per),
        note: format!("< 1 s: {}", verdict(per < Duration::from_secs(1))),
    });
}

/// bash's parse of the runner's code, the layout before against this one, paired (A B A B,
/// so that the machine's drift cancels): the runner's parts as run-loop.sh held them before
/// lib.sh (each verbatim, comments and indentation in, the contract prelude before them)
/// against the runner's sections of a plain claude loop's lib.sh (the same definitions,
/// stripped), each sourced by a `bash` that then exits; and the whole load of today's
/// runner, `bash run-loop.sh --help` (lib.sh read, its sha256s checked, its sections
/// evaluated), beside them.
fn bench_parse(rows: &mut Vec<Row>) {
    let r = repo(1);
    run_ok(
        Command::new(orbit())
            .args([
                "init",
                "benchmark goal",
                "--engine",
                "claude",
                "--verify",
                "true",
            ])
            .current_dir(r.path())
            .stdout(Stdio::null()),
    );
    let dir = r.path().join(".orbit/benchmark-goal");
    let lib = fs::read(dir.join("lib.sh")).unwrap();
    let runner = fs::read_to_string(dir.join("run-loop.sh")).unwrap();
    let ranges = runner
        .lines()
        .find_map(|l| l.strip_prefix("ORBIT_LIB_RANGES=("))
        .and_then(|l| l.strip_suffix(')'))
        .expect("run-loop.sh holds ORBIT_LIB_RANGES");
    let mut now = Vec::new();
    let mut before = orbit::contract::bash::prelude().to_string();
    for range in ranges.split_whitespace() {
        let (start, len) = range.split_once(':').unwrap();
        let (start, len): (usize, usize) = (start.parse().unwrap(), len.parse().unwrap());
        let bytes = &lib[start..start + len];
        now.extend_from_slice(bytes);
        // Each section's line names its part: the part as it was, verbatim.
        for line in String::from_utf8_lossy(bytes).lines() {
            let Some(name) = line.strip_prefix("# ---- ") else {
                continue;
            };
            if let Some((_, text)) = orbit::render::STATIC_PARTS.iter().find(|(n, _)| *n == name) {
                before.push_str(orbit::render::split_entry(&orbit::render::place_perl(text)).0);
            }
        }
    }
    let work = tempfile::tempdir().unwrap();
    fs::write(work.path().join("before.sh"), &before).unwrap();
    fs::write(work.path().join("now.sh"), &now).unwrap();
    let source = |file: &str| {
        let st = Command::new("bash")
            .args([
                "--norc",
                "--noprofile",
                "-c",
                &format!("source ./{file}; exit 0"),
            ])
            .current_dir(work.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "sourcing {file}");
    };
    let help = || {
        run_ok(
            Command::new("bash")
                .args(["run-loop.sh", "--help"])
                .current_dir(&dir)
                .stdout(Stdio::null()),
        )
    };
    let n = runs().max(5);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        a.push(time(|| source("before.sh")));
        b.push(time(|| source("now.sh")));
        c.push(time(help));
    }
    let mut ratios: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| y.as_secs_f64() / x.as_secs_f64())
        .collect();
    ratios.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let ratio = ratios[ratios.len() / 2];
    let (before_m, now_m) = (median(a), median(b));
    rows.push(Row {
        name: "bash parse, the runner's code: before lib.sh".into(),
        value: ms(before_m),
        note: format!(
            "its parts verbatim with the prelude, {} bytes, sourced",
            before.len()
        ),
    });
    rows.push(Row {
        name: "bash parse, the runner's code: lib.sh".into(),
        value: ms(now_m),
        note: format!(
            "its sections of lib.sh, {} bytes, sourced; {ratio:.2}x the layout before (median of paired ratios): a drop {}",
            now.len(),
            verdict(ratio < 1.0)
        ),
    });
    rows.push(Row {
        name: "bash parse, run-loop.sh --help (the whole load)".into(),
        value: ms(median(c)),
        note: "lib.sh read, both sha256s checked, the runner's sections evaluated, usage printed"
            .into(),
    });
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let only = std::env::var("ORBIT_BENCH_ONLY").unwrap_or_default();
    let part = |p: &str| only.is_empty() || only == p;
    let mut rows = Vec::new();
    if part("init") {
        bench_init(&mut rows);
    }
    if part("parse") {
        bench_parse(&mut rows);
    }
    if part("runner") {
        bench_runner(&mut rows, 1, "small repo", false);
        bench_runner(&mut rows, 20_000, "20,000 files", true);
    }
    if part("fanout") {
        bench_fanout(&mut rows, 1, "small repo");
        bench_fanout(&mut rows, 20_000, "20,000 files");
    }
    if part("clean") {
        bench_clean(&mut rows, 1, "small repo");
        bench_clean(&mut rows, 20_000, "20,000 files");
    }
    if part("sandbox") {
        bench_sandbox(&mut rows);
    }
    if part("done") {
        bench_done(&mut rows);
    }
    if part("verify") {
        bench_verify(&mut rows);
    }
    if part("audit") {
        bench_audit(&mut rows);
    }
    if part("status") {
        bench_status(&mut rows);
    }
    if part("serve") {
        bench_serve(&mut rows);
    }
    if part("queue") {
        bench_queue(&mut rows);
    }
    if part("adequacy") {
        bench_adequacy(&mut rows);
    }
    if part("claim") {
        bench_claim(&mut rows);
    }
    if part("resume") {
        resume::bench_resume(&mut rows);
    }
    let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(10);
    println!(
        "\n{:w$}  {:>10}  note (medians of {} runs)",
        "benchmark",
        "median",
        runs()
    );
    for r in rows {
        println!("{:w$}  {:>10}  {}", r.name, r.value, r.note);
    }
}

/// `orbit adequacy --json` of the only loop under `repo`: its wall time and JSON.
fn adequacy_json(repo: &Path, extra: &[&str]) -> (Duration, serde_json::Value) {
    let started = Instant::now();
    let out = Command::new(orbit())
        .args(["adequacy", "--json"])
        .args(extra)
        .current_dir(repo)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let wall = started.elapsed();
    assert!(
        out.status.success(),
        "orbit adequacy {extra:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, serde_json::from_slice(&out.stdout).unwrap())
}

/// A loop of `agent` with `checks` (and `setup`) in `repo`, run to DONE with the default
/// `adequacy = "report"`: the wall time to the runner's exit (the measure included).
fn done_with_report(repo: &Path, agent: &str, checks: &[&str], setup: &[&str]) -> Duration {
    let mut args = vec![
        "init",
        "bench adequacy",
        "--engine",
        "custom",
        "--exec",
        agent,
        "--sandbox",
        "none",
    ];
    for c in checks {
        args.extend_from_slice(&["--verify", c]);
    }
    for s in setup {
        args.extend_from_slice(&["--setup", s]);
    }
    run_ok(
        Command::new(orbit())
            .args(&args)
            .current_dir(repo)
            .stdout(Stdio::null()),
    );
    let dir = repo.join(".orbit/bench-adequacy");
    let started = Instant::now();
    run_ok(
        Command::new("bash")
            .arg(dir.join("run-loop.sh"))
            .current_dir(repo)
            .env("RETRY_BASE_DELAY", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let wall = started.elapsed();
    assert_eq!(
        state_value(&dir, "LAST_STATUS"),
        "DONE",
        "{}",
        dir.display()
    );
    wall
}

/// A claim's cost with and without the setup's cache, on the Node fixture: the loop to DONE
/// in one claim (the adequacy measure after it in both), its setup `npm ci` run again in the claim's clean checkout,
/// then copied there from the cache (`--setup-input package-lock.json package.json`).
fn bench_claim(rows: &mut Vec<Row>) {
    let node_ok = ["node", "npm"].iter().all(|t| {
        Command::new(t)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !node_ok {
        rows.push(Row {
            name: "a claim's setup, the Node fixture".into(),
            value: "skipped".into(),
            note: "node and npm are not installed here".into(),
        });
        return;
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/projects");
    let n = runs().min(5);
    let mut walls: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..n {
        for (i, cached) in [false, true].into_iter().enumerate() {
            let r = repo(0);
            sh(
                r.path(),
                &format!(
                    "cp -R {}/. . && git add -A && git commit -q -m node",
                    fixtures.join("node").display()
                ),
            );
            let bin = tempfile::tempdir().unwrap();
            let agent = fixing_agent(
                bin.path(),
                "cat > src/welcome.js <<'EOF'\n'use strict';\n\nconst { greet } = require('greet');\n\nexports.welcome = (typed) => greet(typed.trim());\nEOF",
            );
            let mut args = vec![
                "init",
                "bench claim",
                "--engine",
                "custom",
                "--exec",
                &agent,
                "--sandbox",
                "none",
                "--verify",
                "npm test",
                "--setup",
                "npm ci --offline --no-audit --no-fund --no-update-notifier",
            ];
            if cached {
                args.extend_from_slice(&[
                    "--setup-input",
                    "package-lock.json",
                    "--setup-input",
                    "package.json",
                ]);
            }
            run_ok(
                Command::new(orbit())
                    .args(&args)
                    .current_dir(r.path())
                    .stdout(Stdio::null()),
            );
            let dir = r.path().join(".orbit/bench-claim");
            let started = Instant::now();
            run_ok(
                Command::new("bash")
                    .arg(dir.join("run-loop.sh"))
                    .current_dir(r.path())
                    .env("RETRY_BASE_DELAY", "0")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            );
            walls[i].push(started.elapsed());
            assert_eq!(
                state_value(&dir, "LAST_STATUS"),
                "DONE",
                "{}",
                dir.display()
            );
            let log = fs::read_to_string(dir.join("iterations/000001/setup.log")).unwrap();
            assert_eq!(
                log.contains("copied from .setup-cache/"),
                cached,
                "the claim's setup: {log}"
            );
        }
    }
    let (plain, cache) = (median(walls[0].clone()), median(walls[1].clone()));
    rows.push(Row {
        name: "a claim, the Node fixture, npm ci in the clean checkout".into(),
        value: ms(plain),
        note: "wall time to DONE in one claim (its adequacy measure included), the setup run again in the claim's clean checkout".into(),
    });
    rows.push(Row {
        name: "a claim, the Node fixture, the setup's cache".into(),
        value: ms(cache),
        note: format!(
            "the same with --setup-input package-lock.json package.json: node_modules copied from .setup-cache/, {} less",
            ms(plain.saturating_sub(cache))
        ),
    });
}

/// An agent script in `bin` that runs `body` as its fix and claims DONE.
fn fixing_agent(bin: &Path, body: &str) -> String {
    let agent = bin.join("agent.sh");
    fs::write(
        &agent,
        format!(
            "#!/bin/sh\ncat >/dev/null\ncase \"$ORBIT_PHASE\" in\n  confirm) echo CONFIRMED > \"$ORBIT_AGENT_DIR/confirm.md\"; exit 0 ;;\n  wrapup) exit 0 ;;\nesac\n{body}\necho done > \"$ORBIT_AGENT_DIR/done.md\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    agent.display().to_string()
}

/// One row of what adequacy adds to a DONE: the runner's time to DONE with the report
/// measure in it, and the measure alone (`orbit adequacy` of the same DONE, the median).
fn adequacy_rows(rows: &mut Vec<Row>, label: &str, repo: &Path, to_done: Duration) {
    let n = runs().min(5);
    let mut walls = Vec::new();
    let mut last = serde_json::Value::Null;
    for _ in 0..n {
        let (w, v) = adequacy_json(repo, &["--budget", "10m"]);
        walls.push(w);
        last = v;
    }
    let m = median(walls);
    rows.push(Row {
        name: format!("adequacy of a DONE, {label}"),
        value: format!("{:.1} s", m.as_secs_f64()),
        note: format!(
            "{:.0}% of the {:.1} s to DONE that holds it (adequacy = \"report\"); {}",
            100.0 * m.as_secs_f64() / to_done.as_secs_f64().max(1e-9),
            to_done.as_secs_f64(),
            last["summary"].as_str().unwrap_or("")
        ),
    });
}

/// The time adequacy adds to a DONE, on the demo's project and on the Node fixture
/// (tests/fixtures/projects/node, set up by `npm ci`); then orbit's own operators against
/// cargo-mutants on the Rust fixture, when cargo-mutants is installed.
fn bench_adequacy(rows: &mut Vec<Row>) {
    // The demo: `orbit demo` runs its loop to DONE (the report measure in it).
    let d = tempfile::tempdir().unwrap();
    let demo = d.path().join("demo");
    let started = Instant::now();
    run_ok(
        Command::new(orbit())
            .args(["demo", "--dir"])
            .arg(&demo)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let to_done = started.elapsed();
    adequacy_rows(rows, "the demo", &demo.join("project"), to_done);

    // The Node fixture, as tests/it/projects.rs loops it.
    let node_ok = ["node", "npm"].iter().all(|t| {
        Command::new(t)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if node_ok {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/projects");
        let r = repo(0);
        sh(
            r.path(),
            &format!(
                "cp -R {}/. . && git add -A && git commit -q -m node && mkdir -p node_modules/greet && cp -R {}/. node_modules/greet/",
                fixtures.join("node").display(),
                fixtures.join("node-stale-greet").display()
            ),
        );
        let bin = tempfile::tempdir().unwrap();
        let agent = fixing_agent(
            bin.path(),
            "cat > src/welcome.js <<'EOF'\n'use strict';\n\nconst { greet } = require('greet');\n\nexports.welcome = (typed) => greet(typed.trim());\nEOF",
        );
        let to_done = done_with_report(
            r.path(),
            &agent,
            &["npm test"],
            &["npm ci --offline --no-audit --no-fund --no-update-notifier"],
        );
        adequacy_rows(rows, "the Node fixture", r.path(), to_done);
    } else {
        rows.push(Row {
            name: "adequacy of a DONE, the Node fixture".into(),
            value: "skipped".into(),
            note: "node and npm are not installed here".into(),
        });
    }
    bench_cargo_mutants(rows);
}

/// The Rust fixture's fix, as tests/it/projects.rs's agent makes it: a line's quantity
/// multiplies its unit price.
const RUST_FIX: &str = "sed -i 's/map(|line| line.unit_price)/map(|line| line.unit_price.times(line.quantity))/' src/lib.rs";

/// A function the fix adds in the second change, its tests deciding it only in part.
const RUST_IS_LARGE: &str = "cat >> src/lib.rs <<'EOF'

/// Whether an invoice's total is large: over 100.00, or of more than 10 lines.
pub fn is_large(lines: &[Line]) -> bool {
    total(lines).0 > 10_000 || lines.len() > 10
}

#[cfg(test)]
mod large {
    use super::*;

    #[test]
    fn a_total_over_a_hundred_is_large() {
        let big = Line { quantity: 2, unit_price: Cents(6_000) };
        assert!(is_large(&[big]));
        assert!(!is_large(&[Line { quantity: 1, unit_price: Cents(100) }]));
    }
}
EOF";

/// The Rust fixture (tests/fixtures/projects/rust, its money library a git submodule made
/// from tests/fixtures/projects/rust-money whose origin is then gone), in a new repository.
fn rust_fixture() -> tempfile::TempDir {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/projects");
    let r = repo(0);
    let lib = tempfile::tempdir().unwrap();
    sh(
        lib.path(),
        &format!(
            "cp -R {}/. . && git init -q -b main && git add -A && git -c user.name=bench -c user.email=bench@orbit.invalid commit -q -m money",
            fixtures.join("rust-money").display()
        ),
    );
    sh(
        r.path(),
        &format!(
            "cp -R {}/. . && git -c protocol.file.allow=always submodule add -q {} vendor/money && git add -A && git commit -q -m invoice",
            fixtures.join("rust").display(),
            lib.path().display()
        ),
    );
    r
}

/// orbit's own operators against cargo-mutants on the Rust fixture, looped to DONE as
/// tests/it/projects.rs loops it (the fix alone), and again with a change that adds a
/// function its tests decide in part: for each change, `orbit adequacy` with the hunks
/// alone (`--max-mutants 0`), with orbit's operators, and with cargo-mutants on the same
/// diff (`--tool cargo-mutants`): wall time (the median), mutants made, tried (built),
/// killed and survived. Skipped, saying why, where cargo-mutants is not installed (.ci/run
/// builds it for the suite, at /opt/orbit-cargo-mutants).
fn bench_cargo_mutants(rows: &mut Vec<Row>) {
    let here = Command::new("cargo")
        .args(["mutants", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !here {
        rows.push(Row {
            name: "adequacy: orbit's operators vs cargo-mutants".into(),
            value: "skipped".into(),
            note: "cargo-mutants is not installed here (cargo install cargo-mutants)".into(),
        });
        return;
    }
    let n = runs().min(3);
    for (change, more) in [("the fix", ""), ("the fix and is_large", RUST_IS_LARGE)] {
        let r = rust_fixture();
        let bin = tempfile::tempdir().unwrap();
        let agent = fixing_agent(bin.path(), &format!("{RUST_FIX}\n{more}"));
        done_with_report(r.path(), &agent, &["cargo test --offline"], &[]);
        for (label, extra) in [
            ("hunks alone", vec!["--max-mutants", "0"]),
            ("orbit's operators", vec![]),
            ("cargo-mutants", vec!["--tool", "cargo-mutants"]),
        ] {
            let mut walls = Vec::new();
            let mut v = serde_json::Value::Null;
            for _ in 0..n {
                let mut args = vec!["--budget", "30m"];
                args.extend_from_slice(&extra);
                let (wall, out) = adequacy_json(r.path(), &args);
                walls.push(wall);
                v = out;
            }
            let muts = v["mutants"].as_array().cloned().unwrap_or_default();
            let count = |r: &str| muts.iter().filter(|m| m["result"] == r).count();
            rows.push(Row {
                name: format!("adequacy, Rust fixture ({change}), {label}"),
                value: format!("{:.1} s", median(walls).as_secs_f64()),
                note: format!(
                    "{} mutants made, {} tried, {} killed, {} survived, {} not built; hunks: {} of {} needed",
                    muts.len(),
                    v["mutants_tried"],
                    count("killed"),
                    count("survived"),
                    count("not-applied"),
                    v["hunks_needed"],
                    v["hunks_tried"]
                ),
            });
        }
    }
}
