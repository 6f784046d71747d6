//! orbit's benchmark: `cargo bench --bench orbit` prints a table of medians.
//!
//! 1. `orbit init` wall time.
//! 2. Runner overhead per iteration (no-op agent, one-check verify, auto-commit on) on a
//!    small repository and on a synthetic 20,000-file one: the tick's wall time minus the
//!    agent's and verify's own, and its ratio to the floor measured in the same run (one
//!    `git status --porcelain` plus hashing the pinned files).
//!
//! Set ORBIT_BENCH_RUNS to change the number of samples (default 15).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let dir = tempfile::Builder::new()
        .prefix("orbit-bench-")
        .tempdir()
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

fn bench_init(rows: &mut Vec<Row>) {
    let r = repo(1);
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
    rows.push(Row {
        name: "orbit init".into(),
        value: ms(median(samples)),
        note: "target < 20 ms".into(),
    });
}

fn bench_runner(rows: &mut Vec<Row>, files: usize, label: &str) {
    let r = repo(files);
    let bin = tempfile::tempdir().unwrap();
    let agent = bin.path().join("noop-agent");
    fs::write(
        &agent,
        "#!/usr/bin/env bash\ncat >/dev/null\necho x >> bench.txt\n",
    )
    .unwrap();
    sh(bin.path(), "chmod +x noop-agent");
    let exec = agent.display().to_string();
    run_ok(
        Command::new(orbit())
            .args([
                "init",
                "bench",
                "--engine",
                "custom",
                "--exec",
                &exec,
                "--verify",
                "true",
                "--max-iterations",
                "100000",
                "--dir",
                ".orbit/bench",
            ])
            .current_dir(r.path())
            .stdout(Stdio::null()),
    );
    let dir = r.path().join(".orbit/bench");
    let tick = |r: &Path| {
        run_ok(
            Command::new("bash")
                .arg(dir.join("run-loop.sh"))
                .arg("--once")
                .current_dir(r)
                .env("ALLOW_GREEN_START", "1")
                .env("CONVERGENCE_WINDOW", "1000000")
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
    };
    tick(r.path()); // the first run pins and branches: not an iteration's steady cost
    let n = runs();
    let ticks: Vec<Duration> = (0..n).map(|_| time(|| tick(r.path()))).collect();
    let prompt = dir.join("iterations/000001/prompt.md");
    let agent_t: Vec<Duration> = (0..n)
        .map(|_| {
            time(|| {
                run_ok(
                    Command::new(&agent)
                        .current_dir(r.path())
                        .stdin(fs::File::open(&prompt).unwrap()),
                );
            })
        })
        .collect();
    let verify_t: Vec<Duration> = (0..n)
        .map(|_| {
            time(|| {
                run_ok(
                    Command::new("bash")
                        .arg(dir.join("verify.sh"))
                        .stdout(Stdio::null()),
                )
            })
        })
        .collect();
    let floor_t: Vec<Duration> = (0..n)
        .map(|_| {
            time(|| {
                run_ok(
                    Command::new("git")
                        .args(["status", "--porcelain"])
                        .current_dir(r.path())
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
    let (tick_m, agent_m, verify_m, floor_m) = (
        median(ticks),
        median(agent_t),
        median(verify_t),
        median(floor_t),
    );
    let overhead = tick_m.saturating_sub(agent_m + verify_m);
    rows.push(Row {
        name: format!("iteration, {label}: tick"),
        value: ms(tick_m),
        note: format!("agent {} + verify {}", ms(agent_m), ms(verify_m)),
    });
    rows.push(Row {
        name: format!("iteration, {label}: floor"),
        value: ms(floor_m),
        note: "git status --porcelain + sha256 of the pins".into(),
    });
    rows.push(Row {
        name: format!("iteration, {label}: overhead"),
        value: ms(overhead),
        note: format!(
            "{:.1}x the floor; target within 2x and < 300 ms",
            overhead.as_secs_f64() / floor_m.as_secs_f64()
        ),
    });
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let mut rows = Vec::new();
    bench_init(&mut rows);
    bench_runner(&mut rows, 1, "small repo");
    bench_runner(&mut rows, 20_000, "20,000 files");
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
