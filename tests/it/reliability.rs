//! Issue 7: the reliability suite. Every way a loop can be interrupted or fed bad data ends
//! in a clear exit code, nothing lost, a resumable state, and an `orbit audit` that says so.
//! Scenarios already proven elsewhere (fault points, SIGTERM, hung agents, tmux, two
//! runners, cron, corrupt and torn state, integrity) are listed in docs/RELIABILITY.md and
//! not repeated here. Every child runs under a timeout; every test ends with no process of
//! its loop alive.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use crate::support::*;

// ---- helpers

/// The iterations committed on HEAD, from the commit trailers, sorted.
fn committed_iterations(repo: &Repo) -> Vec<u64> {
    let trailers = repo.git(&[
        "log",
        "--format=%(trailers:key=Orbit-Iteration,valueonly)",
        "--branches=orbit/*",
    ]);
    let mut v: Vec<u64> = trailers
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.parse().unwrap())
        .collect();
    v.sort();
    v
}

fn marker(dir: &Path) -> String {
    format!("ORBIT_OWNER={}", fs::canonicalize(dir).unwrap().display())
}

/// Fails if any process of the loop is alive, after killing them (so no test leaves one).
fn assert_no_process_left(dir: &Path) {
    let left = processes_with_env(&marker(dir));
    for pid in &left {
        let _ = command("kill").args(["-KILL", &pid.to_string()]).status();
    }
    assert!(
        left.is_empty(),
        "processes of the loop still alive: {left:?}"
    );
}

/// What `orbit audit --json DIR` says: exit code, verdict, (class, severity) pairs.
struct Audit {
    code: i32,
    verdict: String,
    findings: Vec<(String, String)>,
    json: serde_json::Value,
}

impl Audit {
    fn has(&self, class: &str, severity: &str) -> bool {
        self.findings
            .iter()
            .any(|(c, s)| c == class && s == severity)
    }
    fn no_p0(&self) -> bool {
        !self.findings.iter().any(|(_, s)| s == "P0")
    }
}

fn audit(repo: &Repo, dir: &Path) -> Audit {
    let mut cmd = command(orbit_bin());
    cmd.args(["audit", "--json"])
        .arg(dir)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("NO_COLOR", "1");
    let out = run_bounded(cmd, Duration::from_secs(60));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit --json is not JSON ({e}):\n{}", text(&out)));
    let l = &json["loops"][0];
    let findings = l["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["class"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    Audit {
        code: out.status.code().unwrap_or(-1),
        verdict: l["verdict"].as_str().unwrap_or("").to_string(),
        findings,
        json,
    }
}

/// A runner started in its own process group; the group is killed when dropped.
struct Runner {
    child: Option<Child>,
}

impl Runner {
    fn start(repo: &Repo, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Runner {
        let mut cmd = command("bash");
        cmd.arg(dir.join("run-loop.sh"))
            .args(args)
            .current_dir(repo.path())
            .env("PATH", repo.path_env())
            .env("RETRY_BASE_DELAY", "0")
            .env("KILL_GRACE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Runner {
            child: Some(cmd.spawn().unwrap()),
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits (bounded) for the runner's exit.
    fn wait(mut self, limit: Duration) -> Output {
        let mut child = self.child.take().unwrap();
        let t0 = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > limit {
                let _ = command("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
                let _ = child.wait();
                panic!("the runner did not finish within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = command("kill")
                .args(["-KILL", "--", &format!("-{}", c.id())])
                .status();
            let _ = c.wait();
        }
    }
}

/// Writes state.env as given and seals it with a matching sidecar at `generation`, so
/// that only the parser can reject it.
fn write_sealed(dir: &Path, bytes: &[u8], generation: u64) {
    fs::write(dir.join("state.env"), bytes).unwrap();
    let hash = orbit::fsx::sha256_hex(bytes);
    fs::write(
        dir.join("state.env.sha256"),
        format!("{hash}  state.env\n# gen={generation}\n"),
    )
    .unwrap();
}

fn journal(dir: &Path) -> orbit::events::Journal {
    orbit::events::read(&fs::read(dir.join("events.jsonl")).unwrap_or_default())
}

/// A loop that ran one tick (iteration 1 recorded, verify failing, work remains).
fn ticked_loop(n: usize) -> (Repo, PathBuf) {
    let repo = Repo::new();
    let agent = counting_agent(&repo, n);
    let dir = repo.init_loop(&agent, &[&count_check(n)], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "first tick");
    (repo, dir)
}

// ---- crashes

/// SIGKILL of the runner while its agent runs: the agent is orphaned (it does not hold
/// the lock), the audit says CRASHED with ORPHAN_AGENT, and the next run sweeps the orphan,
/// keeps the interrupted attempt and resumes the same iteration to DONE.
#[test]
fn sigkill_while_the_agent_runs_then_the_next_run_sweeps_the_orphan_and_resumes() {
    sigkill_mid_agent(&[]);
}

/// The same without flock (really absent from PATH): the dead runner's mkdir lock is
/// taken over by the next run, which sweeps the orphan.
#[test]
fn sigkill_while_the_agent_runs_under_the_mkdir_lock_then_the_next_run_takes_it_over() {
    sigkill_mid_agent(&["flock"]);
}

fn sigkill_mid_agent(hidden: &[&str]) {
    let repo = Repo::new();
    let (_keep, path) = path_without(&repo, hidden);
    let env: &[(&str, &str)] = &[("PATH", &path)];
    let started = repo.bin.path().join("started");
    let agent = repo.agent(
        "agent",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
if [ ! -e '{s}' ]; then touch '{s}'; sleep 120; fi
echo "step $ORBIT_ITERATION" >> work.txt
if [ "$(wc -l < work.txt)" -ge 2 ]; then echo done > "$ORBIT_AGENT_DIR/done.md"; fi"#,
            s = started.display()
        ),
    );
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--loop-timeout", "8h"]);
    let runner = Runner::start(&repo, &dir, &[], env);
    wait_for("the agent", Duration::from_secs(60), || started.exists());
    assert_eq!(
        dir.join(".run-loop.lock.d").exists(),
        !hidden.is_empty(),
        "the mkdir lock is used exactly when flock is absent"
    );
    // SIGKILL the runner alone: its agent lives on in its own process group.
    command("kill")
        .args(["-KILL", &runner.pid().to_string()])
        .status()
        .unwrap();
    let out = runner.wait(Duration::from_secs(30));
    assert_eq!(out.status.code(), None, "killed by SIGKILL");
    let orphans = processes_with_env(&marker(&dir));
    assert!(!orphans.is_empty(), "the agent outlives its runner");
    let a = audit(&repo, &dir);
    assert_eq!(a.verdict, "CRASHED", "{}", a.json);
    assert!(a.has("ORPHAN_AGENT", "P0") && a.code == 3, "{}", a.json);
    // The next run starts while the orphan still runs: it takes the lock, sweeps it.
    let out = repo.run_loop(&dir, &[], env);
    assert_code(&out, 0, "the next run resumes to DONE");
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("sweeping leftover process")
    );
    assert_no_process_left(&dir);
    assert!(dir.join("iterations/000001/interrupted.1").is_dir());
    assert_eq!(committed_iterations(&repo), [1, 2]);
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("DONE", 0), "{}", a.json);
}

/// A crash, then a crash of the run that resumes it, then one more: no repair by hand,
/// no iteration lost or run twice.
#[test]
fn a_double_crash_resumes_without_repair_and_loses_nothing() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 3);
    let dir = repo.init_loop(&agent, &[&count_check(3)], &["--loop-timeout", "8h"]);
    for point in ["after_commit", "mid_state_write", "mid_progress_append"] {
        let out = repo.run_loop(&dir, &[], &[("ORBIT_FAULT", point)]);
        assert_eq!(out.status.code(), None, "{point}: SIGKILL\n{}", text(&out));
        let a = audit(&repo, &dir);
        assert_ne!(a.verdict, "CORRUPT", "{point}: {}", a.json);
        assert!(a.no_p0() && a.code <= 1, "{point}: {}", a.json);
    }
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "after three crashes");
    assert_eq!(committed_iterations(&repo), [1, 2, 3]);
    assert_eq!(
        repo.ws_read("work.txt").lines().count(),
        3,
        "no agent run repeated"
    );
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("DONE", 0), "{}", a.json);
}

/// A sed first on PATH that, called by a subshell of the runner to indent quoted text (the
/// checks' feedback for progress.md, in a command substitution), SIGKILLs the runner above
/// that subshell once, waits until it is dead, then does its work: its write to the dead
/// runner's pipe fails (SIGPIPE). It leaves its exit status in `mark`.
fn sed_that_kills_the_runner(repo: &Repo, mark: &Path) {
    let shim = repo.bin.path().join("sed");
    fs::write(
        &shim,
        format!(
            r#"#!/usr/bin/env bash
real=$(PATH=${{PATH#*:}} command -v sed)
runner='' p=$PPID
while [[ -r /proc/$p/cmdline ]] && tr '\0' ' ' </proc/$p/cmdline | grep -q 'run-loop\.sh'; do
  runner=$p
  p=$(awk '{{print $4}}' /proc/$p/stat)
done
if [[ $1 == 's/^/    /' && -n $runner && $runner != "$PPID" && ! -e {mark} ]]; then
  : >{mark}
  kill -KILL "$runner"
  while [[ -e /proc/$runner && $(awk '{{print $3}}' /proc/$runner/stat 2>/dev/null) != Z ]]; do :; done
  "$real" "$@"
  st=$?
  echo "$st" >{mark}
  exit "$st"
fi
exec "$real" "$@"
"#,
            mark = mark.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&shim, fs::Permissions::from_mode(0o755)).unwrap();
}

/// SIGKILL of the runner while a subshell of it works leaves that subshell running, and its
/// next write to the dead runner's pipe fails. That failure is the kill's, not the run's:
/// right after, the records show the crash (the audit's CRASHED), never an "internal error"
/// in runner.log that the audit reads as a run that failed (TOOL_FAILURE, P1, "fix the
/// cause"); the rerun resumes to DONE. (Found by the resume benchmark: a kill in the commit
/// step, where progress.md's entry quotes the feedback.)
#[test]
fn sigkill_while_a_subshell_of_the_runner_works_is_a_crash_not_an_internal_error() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--loop-timeout", "8h"]);
    let mark = repo.bin.path().join("sed-killed-the-runner");
    sed_that_kills_the_runner(&repo, &mark);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_eq!(out.status.code(), None, "SIGKILL\n{}", text(&out));
    // The kill was made under the subshell, and the subshell's write then failed.
    wait_for(
        "the orphaned subshell's sed",
        Duration::from_secs(30),
        || fs::read_to_string(&mark).is_ok_and(|s| s.ends_with('\n')),
    );
    assert_eq!(fs::read_to_string(&mark).unwrap(), "141\n", "SIGPIPE");
    wait_for("the orphaned subshell", Duration::from_secs(30), || {
        processes_with_env(&marker(&dir)).is_empty()
    });
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(!log.contains("internal error"), "{log}");
    let a = audit(&repo, &dir);
    assert_eq!(a.verdict, "CRASHED", "{}", a.json);
    assert!(
        !a.findings.iter().any(|(c, _)| c == "TOOL_FAILURE"),
        "{}",
        a.json
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "the rerun");
    assert_eq!(committed_iterations(&repo), [1, 2]);
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("DONE", 0), "{}", a.json);
    assert_no_process_left(&dir);
}

/// After a SIGKILL at each fault point, the audit never calls the loop CORRUPT nor raises
/// a P0, and every finding names a fix; after the rerun it is DONE and clean.
#[test]
fn audit_after_each_fault_point_says_resumable_and_clean_after_the_rerun() {
    for point in [
        "after_lock",
        "before_agent",
        "after_agent",
        "mid_state_write",
        "after_state_before_sidecar",
        "before_commit",
        "after_commit",
        "mid_progress_append",
    ] {
        let repo = Repo::new();
        let agent = counting_agent(&repo, 2);
        let dir = repo.init_loop(&agent, &[&count_check(2)], &["--loop-timeout", "8h"]);
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 10, "tick");
        let out = repo.run_loop(&dir, &[], &[("ORBIT_FAULT", point)]);
        assert_eq!(out.status.code(), None, "{point}\n{}", text(&out));
        let a = audit(&repo, &dir);
        assert!(
            a.verdict != "CORRUPT" && a.no_p0() && a.code <= 1,
            "{point}: {}",
            a.json
        );
        for f in a.json["loops"][0]["findings"].as_array().unwrap() {
            assert!(
                !f["fix"].as_str().unwrap_or("").is_empty(),
                "{point}: a finding without a fix: {f}"
            );
        }
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 0, &format!("rerun after {point}"));
        assert_records_agree(&dir);
        let a = audit(&repo, &dir);
        assert_eq!(
            (a.verdict.as_str(), a.code),
            ("DONE", 0),
            "{point}: {}",
            a.json
        );
        assert_no_process_left(&dir);
    }
}

// ---- the footer and the recorded stop, however the run ends

/// Replaces the loop's run-loop.sh with `text` and its line of pins.sha256 to match, so that
/// the runner starts it as its own.
fn repin_runner(dir: &Path, text: &str) {
    fs::write(dir.join("run-loop.sh"), text).unwrap();
    let hash = orbit::fsx::sha256_hex(text.as_bytes());
    let pins = fs::read_to_string(dir.join("pins.sha256")).unwrap();
    let pins: String = pins
        .lines()
        .map(|l| {
            if l.ends_with("  run-loop.sh") {
                format!("{hash}  run-loop.sh\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(pins.contains(&format!("{hash}  run-loop.sh")), "{pins}");
    fs::write(dir.join("pins.sha256"), pins).unwrap();
}

/// Replaces the loop's lib.sh with `text`, and the pins that hold it (its line of
/// pins.sha256, the sha256 run-loop.sh loads it by, with run-loop.sh's own line) to match,
/// so that the runner loads it as its own.
fn repin_lib(dir: &Path, text: &str) {
    let before = fs::read(dir.join("lib.sh")).unwrap();
    let old = orbit::fsx::sha256_hex(&before);
    let hash = orbit::fsx::sha256_hex(text.as_bytes());
    fs::write(dir.join("lib.sh"), text).unwrap();
    // Where the text changed, and by how much: the runner's byte ranges of lib.sh move with it.
    let at = before
        .iter()
        .zip(text.as_bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(before.len().min(text.len()));
    let delta = text.len() as i64 - before.len() as i64;
    let moved = |n: usize| (n as i64 + delta) as usize;
    let mut runner = fs::read_to_string(dir.join("run-loop.sh")).unwrap();
    let line = format!("ORBIT_LIB_SHA256={old}\n");
    assert_eq!(
        runner.matches(&line).count(),
        1,
        "run-loop.sh loads lib.sh by its sha256"
    );
    runner = runner.replace(&line, &format!("ORBIT_LIB_SHA256={hash}\n"));
    let value = |runner: &str, key: &str| {
        let from = runner.find(&format!("\n{key}=")).unwrap() + key.len() + 2;
        runner[from..from + runner[from..].find('\n').unwrap()].to_string()
    };
    let bytes: usize = value(&runner, "ORBIT_LIB_BYTES").parse().unwrap();
    let new_bytes = if at < bytes { moved(bytes) } else { bytes };
    let ranges: Vec<String> = value(&runner, "ORBIT_LIB_RANGES")
        .trim_matches(['(', ')'])
        .split(' ')
        .map(|r| {
            let (s, l) = r.split_once(':').unwrap();
            let (s, l): (usize, usize) = (s.parse().unwrap(), l.parse().unwrap());
            if s > at {
                format!("{}:{l}", moved(s))
            } else if at < s + l {
                format!("{s}:{}", moved(l))
            } else {
                format!("{s}:{l}")
            }
        })
        .collect();
    runner = runner
        .replace(
            &format!("ORBIT_LIB_BYTES={bytes}\n"),
            &format!("ORBIT_LIB_BYTES={new_bytes}\n"),
        )
        .replace(
            &format!("ORBIT_LIB_RANGES={}\n", value(&runner, "ORBIT_LIB_RANGES")),
            &format!("ORBIT_LIB_RANGES=({})\n", ranges.join(" ")),
        )
        .replace(
            &format!(
                "ORBIT_LIB_READ_SHA256={}\n",
                value(&runner, "ORBIT_LIB_READ_SHA256")
            ),
            &format!(
                "ORBIT_LIB_READ_SHA256={}\n",
                orbit::fsx::sha256_hex(&text.as_bytes()[..new_bytes])
            ),
        );
    repin_runner(dir, &runner);
    let pins = fs::read_to_string(dir.join("pins.sha256")).unwrap();
    let pins = pins.replace(&format!("{old}  lib.sh\n"), &format!("{hash}  lib.sh\n"));
    assert!(pins.contains(&format!("{hash}  lib.sh\n")), "{pins}");
    fs::write(dir.join("pins.sha256"), pins).unwrap();
}

/// An error bash raises while it expands a word (here an empty associative-array key under
/// `set -u`) ends the shell at once and runs no ERR trap. The runner's EXIT trap still
/// prints the one footer and records the stop (exit 1, state.env left as the last
/// checkpoint), and a rerun of the real runner goes on from there. The error is put into
/// the rendered runner (its pin updated to match) just before the agent would run: no fault
/// point of the runner raises one.
#[test]
fn an_expansion_error_that_skips_the_err_trap_still_ends_with_one_footer_and_a_recorded_stop() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    let dir = repo.init_loop(&agent, &[&count_check(1)], &[]);
    // The runner's code is in lib.sh (stripped of its indentation).
    let original = fs::read_to_string(dir.join("lib.sh")).unwrap();
    let hook = "\nstate_fault before_agent\n";
    assert_eq!(original.matches(hook).count(), 1, "where the error goes");
    let broken = original.replacen(
        hook,
        &format!(
            "{hook}local -A orbit_test_keys=()\nlocal orbit_test_key=''\n: \"${{orbit_test_keys[$orbit_test_key]}}\"\n"
        ),
        1,
    );
    repin_lib(&dir, &broken);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad array subscript"),
        "the expansion error was raised\n{}",
        text(&out)
    );
    assert_code(&out, 1, "an internal failure");
    let (status, summary) = one_footer(&out);
    assert_eq!(status, "CONTINUE");
    assert!(summary.contains("internal error"), "{summary}");
    let stops = events_named(&dir, "loop_stop");
    assert_eq!(stops.len(), 1, "one loop_stop: {stops:?}");
    assert_eq!(stops[0].value["exit_code"], 1, "{:?}", stops[0].value);
    assert_eq!(stops[0].value["status"], "CONTINUE", "{:?}", stops[0].value);
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "1");
    // Nothing made worse: the real runner, back in place, resumes and finishes.
    repin_lib(&dir, &original);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "the rerun");
    assert_eq!(one_footer(&out).0, "DONE");
    assert_records_agree(&dir);
}

/// A signal that comes once the stop is recorded (here while the runner waits for its DONE
/// notification, which blocks until the signal was sent) only cuts that wait short:
/// state.env keeps DONE, the journal its one loop_stop, the exit code 0, and the next
/// `orbit run` starts no agent.
fn a_signal_in_the_notification_wait_keeps_the_recorded_stop(sig: &str) {
    let repo = Repo::new();
    let started = repo.bin.path().join("notify-started");
    let sent = repo.bin.path().join("signal-sent");
    let runs = repo.bin.path().join("runs");
    let agent = repo.agent(
        "doer",
        &format!(
            "cat >/dev/null\necho \"$ORBIT_PHASE\" >> '{}'\ncase $ORBIT_PHASE in confirm) exit 0;; esac\ntouch work.txt\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
            runs.display()
        ),
    );
    let notify = format!(
        "cmd:touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done",
        started.display(),
        sent.display()
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--notify", &notify]);
    let runner = Runner::start(&repo, &dir, &[], &[]);
    wait_for(
        "the DONE notification to start",
        Duration::from_secs(120),
        || started.exists(),
    );
    assert_eq!(
        state_value(&dir, "LAST_STATUS"),
        "DONE",
        "the stop is recorded"
    );
    let kill = command("kill")
        .args([&format!("-{sig}"), &runner.pid().to_string()])
        .status()
        .unwrap();
    assert!(kill.success(), "SIG{sig} sent");
    fs::write(&sent, "").unwrap();
    let out = runner.wait(Duration::from_secs(60));
    assert_code(&out, 0, &format!("SIG{sig} in the notification wait"));
    assert_eq!(one_footer(&out).0, "DONE");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    assert_eq!(state_value(&dir, "STOP_REASON"), "none");
    let stops = events_named(&dir, "loop_stop");
    assert_eq!(stops.len(), 1, "one loop_stop: {stops:?}");
    assert_eq!(stops[0].value["status"], "DONE");
    assert_eq!(stops[0].value["exit_code"], 0);
    let ran = fs::read_to_string(&runs).unwrap();
    let again = repo.orbit(&["run", ".orbit/test-goal"]);
    assert_code(&again, 0, "orbit run of the DONE loop");
    assert_eq!(
        fs::read_to_string(&runs).unwrap(),
        ran,
        "orbit run started the agent again on finished work"
    );
    assert_no_process_left(&dir);
}

#[test]
fn sigterm_in_the_notification_wait_keeps_the_recorded_done() {
    a_signal_in_the_notification_wait_keeps_the_recorded_stop("TERM");
}

#[test]
fn sigint_in_the_notification_wait_keeps_the_recorded_done() {
    a_signal_in_the_notification_wait_keeps_the_recorded_stop("INT");
}

// ---- processes

/// One tick with `body` as the agent; returns the repo and the loop directory after
/// asserting exit 10 and that no process of the loop is left.
fn tick_with_agent(body: &str, env: &[(&str, &str)]) -> (Repo, PathBuf, Output) {
    let repo = Repo::new();
    let agent = repo.agent("agent", body);
    let dir = repo.init_loop(&agent, &["test -f never-there"], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &["--once"], env);
    (repo, dir, out)
}

/// The pid an agent wrote into `file` (it writes it before it exits).
fn pid_in(file: &Path) -> u32 {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", file.display()))
}

/// Waits until `pid` no longer runs: a process the runner KILLed is gone within
/// milliseconds; the bound is a safety net far below the 300 s the scripted leftovers would
/// live.
fn assert_gone(pid: u32, what: &str) {
    wait_for(
        &format!("{what} {pid} to be gone"),
        Duration::from_secs(20),
        || !running(pid),
    );
}

/// Whether `pid` runs (a zombie, which runs nothing and waits for its reaper, does not).
fn running(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|st| {
            let state = st.rsplit(") ").next().unwrap_or("");
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

/// runner.log names `pid` as a process it swept.
fn assert_swept_in_log(dir: &Path, pid: u32) {
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains(&format!("sweeping leftover process {pid} (")),
        "runner.log does not name the swept process {pid}:\n{log}"
    );
}

/// A daemon in a session of its own: the agent waits until it has left the agent's
/// session (it writes its pid once it has), so that no process-group kill can reach it;
/// only a sweep by the run's mark can, and the runner says so.
#[test]
fn an_agent_that_daemonises_with_setsid_is_swept() {
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("daemon.pid");
    let (repo, dir, out) = tick_with_agent(
        &format!(
            "cat >/dev/null\n\
             setsid -f bash -c 'echo $$ > \"$1\"; exec sleep 300' daemon '{p}' </dev/null >/dev/null 2>&1\n\
             for _ in $(seq 600); do [ -s '{p}' ] && break; sleep 0.1; done\n\
             echo x >> work.txt",
            p = pid_file.display()
        ),
        &[],
    );
    assert_code(&out, 10, "tick");
    let daemon = pid_in(&pid_file);
    assert_no_process_left(&dir);
    assert_gone(daemon, "the daemon");
    assert_swept_in_log(&dir, daemon);
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("IDLE", 0), "{}", a.json);
}

/// The same daemon holding the agent's output open: swept as soon as the agent exits, so
/// the output ends then, not when the capture gives up waiting for it (5 s later, with a note).
#[test]
fn a_setsid_daemon_holding_the_agents_output_is_swept_when_the_agent_exits() {
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("daemon.pid");
    let (_repo, dir, out) = tick_with_agent(
        &format!(
            "cat >/dev/null\n\
             setsid -f bash -c 'echo $$ > \"$1\"; exec sleep 300' daemon '{p}' </dev/null\n\
             for _ in $(seq 600); do [ -s '{p}' ] && break; sleep 0.1; done\n\
             echo x >> work.txt; echo the agent ends",
            p = pid_file.display()
        ),
        &[],
    );
    assert_code(&out, 10, "tick");
    let daemon = pid_in(&pid_file);
    assert_no_process_left(&dir);
    assert_gone(daemon, "the daemon");
    assert_swept_in_log(&dir, daemon);
    let log = fs::read_to_string(dir.join("iterations/000001/agent.log")).unwrap();
    assert!(log.contains("the agent ends"), "{log}");
    assert!(
        !log.contains("still held its output"),
        "the capture waited for the daemon:\n{log}"
    );
    let runner_log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        !runner_log.contains("did not end within 5s"),
        "{runner_log}"
    );
    assert_records_agree(&dir);
}

#[test]
fn an_agent_that_escapes_its_process_group_is_swept() {
    // Job control gives the background job a process group of its own (set before `&`
    // returns).
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("job.pid");
    let (repo, dir, out) = tick_with_agent(
        &format!(
            "cat >/dev/null\nset -m\nsleep 300 </dev/null >/dev/null 2>&1 &\necho $! > '{}'\ndisown\necho x >> work.txt",
            pid_file.display()
        ),
        &[],
    );
    assert_code(&out, 10, "tick");
    let job = pid_in(&pid_file);
    assert_no_process_left(&dir);
    assert_gone(job, "the job");
    assert_swept_in_log(&dir, job);
    assert_records_agree(&dir);
    assert_eq!(audit(&repo, &dir).code, 0);
}

#[test]
fn a_background_server_left_by_the_agent_is_swept_and_does_not_hold_the_lock() {
    // The server is up (it wrote its pid) before the agent exits, still in the agent's
    // process group.
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("server.pid");
    let (repo, dir, out) = tick_with_agent(
        &format!(
            "cat >/dev/null\n\
             nohup bash -c 'echo $$ > \"$1\"; while :; do sleep 1; done' server '{p}' >/dev/null 2>&1 &\n\
             for _ in $(seq 600); do [ -s '{p}' ] && break; sleep 0.1; done\n\
             echo x >> work.txt",
            p = pid_file.display()
        ),
        &[],
    );
    assert_code(&out, 10, "tick");
    let server = pid_in(&pid_file);
    assert_no_process_left(&dir);
    assert_gone(server, "the server");
    assert_swept_in_log(&dir, server);
    // The next tick gets the lock at once.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "second tick");
    assert_no_process_left(&dir);
    assert_records_agree(&dir);
}

#[test]
fn an_agent_that_reads_stdin_to_the_end_gets_the_prompt_and_cannot_hang_on_it() {
    let repo = Repo::new();
    let got = repo.bin.path().join("got");
    let agent = repo.agent(
        "agent",
        &format!(
            "cat > '{g}'\nread -r more || true\ncat >> '{g}'\necho x >> work.txt",
            g = got.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[("EXEC_TIMEOUT", "60s")]);
    assert_code(&out, 10, "tick");
    assert_eq!(
        fs::read(&got).unwrap(),
        fs::read(dir.join("iterations/000001/prompt.md")).unwrap(),
        "the prompt arrives on stdin, then end of file"
    );
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["AGENT_OUTCOME"], "ok");
    assert_records_agree(&dir);
}

/// (agent body, extra environment, expected AGENT_OUTCOME, expected runner exit).
type ExitCase = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
    i32,
);

/// Each class of agent exit is recorded as such, and each ends in its contract exit code.
#[test]
fn each_class_of_agent_exit_is_classified_and_recorded() {
    // (agent body, env, expected outcome, expected runner exit)
    let cases: [ExitCase; 5] = [
        ("cat >/dev/null; echo x >> work.txt; exit 0", &[], "ok", 10),
        (
            "cat >/dev/null; echo x >> work.txt; exit 3",
            &[("RETRY_LIMIT", "2")],
            "agent_error",
            10,
        ),
        (
            "cat >/dev/null; echo x >> work.txt; kill -KILL $$",
            &[("RETRY_LIMIT", "2")],
            "agent_error",
            10,
        ),
        (
            "cat >/dev/null; exec sleep 60",
            &[("EXEC_TIMEOUT", "2s"), ("RETRY_LIMIT", "1")],
            "timeout",
            10,
        ),
        ("cat >/dev/null; exit 126", &[], "permanent", 14),
    ];
    for (body, env, outcome, code) in cases {
        let (repo, dir, out) = tick_with_agent(body, env);
        assert_code(&out, code, body);
        let r = read_kv(&dir.join("iterations/000001/result.env"));
        assert_eq!(r["AGENT_OUTCOME"], outcome, "{body}");
        let exits: Vec<_> = journal(&dir)
            .events
            .into_iter()
            .filter(|e| e.event == "agent_exit")
            .collect();
        assert!(!exits.is_empty(), "{body}: agent_exit recorded");
        assert_records_agree(&dir);
        assert_no_process_left(&dir);
        let a = audit(&repo, &dir);
        assert!(a.no_p0(), "{body}: {}", a.json);
        if code == 14 {
            assert!(a.has("TOOL_FAILURE", "P1"), "{body}: {}", a.json);
        }
    }
}

/// An agent that changes hundreds of files in one iteration: the progress entry lists the
/// first twenty, the commit holds them all. (This crashed the runner: `head -n 20` in a
/// pipefail pipeline killed its writer with SIGPIPE.)
#[test]
fn an_agent_that_changes_hundreds_of_files_is_recorded_and_committed() {
    let (repo, dir, out) = tick_with_agent(
        "cat >/dev/null\nmkdir -p gen\nfor k in $(seq 400); do echo $k > gen/generated-file-number-$k.txt; done",
        &[],
    );
    assert_code(&out, 10, "tick");
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["CHANGED"], "400");
    let files = repo.git(&["show", "--name-only", "--format=", "orbit/test-goal"]);
    assert_eq!(files.lines().filter(|l| l.starts_with("gen/")).count(), 400);
    assert_records_agree(&dir);
    assert_eq!(audit(&repo, &dir).code, 0);
}

#[test]
fn a_hanging_check_times_out_as_a_failure_and_leaves_nothing_running() {
    let repo = Repo::new();
    let agent = repo.agent("agent", "cat >/dev/null; echo x >> work.txt");
    let dir = repo.init_loop(&agent, &["sleep 300 & sleep 300; test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[("CHECK_TIMEOUT", "2s")]);
    assert_code(&out, 10, "tick");
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["VERIFY"], "fail");
    let vlog = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(vlog.contains("timed out"), "{vlog}");
    assert_no_process_left(&dir);
    assert_records_agree(&dir);
}

#[test]
fn a_gigabyte_of_agent_output_is_capped() {
    let (repo, dir, out) = tick_with_agent(
        "cat >/dev/null\nhead -c 1073741824 /dev/zero\necho\necho x >> work.txt",
        &[("AGENT_LOG_MAX", "100000")],
    );
    assert_code(&out, 10, "tick");
    let len = fs::metadata(dir.join("iterations/000001/agent.log"))
        .unwrap()
        .len();
    assert!(len < 101_000, "agent.log is {len} bytes");
    assert_records_agree(&dir);
    assert_eq!(audit(&repo, &dir).code, 0);
}

// ---- files: state.env

/// A damaged but sealed state.env: exit 4 with the way out named, nothing written or run,
/// no code executed, and the audit says CORRUPT.
fn damaged_state(name: &str, damage: impl FnOnce(&str) -> Vec<u8>) {
    let (repo, dir) = ticked_loop(5);
    let good = fs::read_to_string(dir.join("state.env")).unwrap();
    let generation: u64 = state_value(&dir, "GEN").parse().unwrap();
    let bad = damage(&good);
    write_sealed(&dir, &bad, generation);
    let events_before = fs::read(dir.join("events.jsonl")).unwrap();
    let progress_before = fs::read(dir.join("progress.md")).unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 4, name);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("NEXUS_LOOP_STATUS: CONTINUE"),
        "{name}: footer\n{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("orbit recover"),
        "{name}: the way out is named"
    );
    assert_eq!(fs::read(dir.join("state.env")).unwrap(), bad, "{name}");
    assert_eq!(fs::read(dir.join("events.jsonl")).unwrap(), events_before);
    assert_eq!(fs::read(dir.join("progress.md")).unwrap(), progress_before);
    assert!(
        !dir.join("iterations/000002").exists(),
        "{name}: no agent ran"
    );
    assert!(!repo.join("CANARY").exists(), "{name}: no code ran");
    assert_no_process_left(&dir);
    let a = audit(&repo, &dir);
    assert_eq!(a.verdict, "CORRUPT", "{name}: {}", a.json);
    assert!(a.has("STATE_DRIFT", "P1"), "{name}: {}", a.json);
    assert!(!repo.join("CANARY").exists(), "{name}: no code ran");
}

#[test]
fn state_truncated_mid_line_is_refused() {
    damaged_state("truncated", |s| s.as_bytes()[..s.len() / 2].to_vec());
}

#[test]
fn state_emptied_is_refused() {
    damaged_state("emptied", |_| Vec::new());
}

#[test]
fn state_with_crlf_endings_is_refused() {
    damaged_state("crlf", |s| s.replace('\n', "\r\n").into_bytes());
}

#[test]
fn state_with_a_byte_order_mark_is_refused() {
    damaged_state("bom", |s| {
        let mut b = vec![0xEF, 0xBB, 0xBF];
        b.extend_from_slice(s.as_bytes());
        b
    });
}

#[test]
fn state_with_invalid_utf8_is_refused() {
    damaged_state("invalid-utf8", |s| {
        let mut b = Vec::new();
        for line in s.split_inclusive('\n') {
            if line.starts_with("ITER_BRANCH=") {
                b.extend_from_slice(b"ITER_BRANCH=ma\xff\xfein\n");
            } else {
                b.extend_from_slice(line.as_bytes());
            }
        }
        b
    });
}

#[test]
fn state_with_a_duplicate_key_is_refused() {
    damaged_state("duplicate", |s| {
        format!("{s}NEXT_ITERATION=7\n").into_bytes()
    });
}

#[test]
fn state_with_an_unknown_key_is_refused() {
    damaged_state("unknown", |s| format!("{s}PATH=/tmp/evil\n").into_bytes());
}

#[test]
fn state_with_command_substitution_values_never_runs_them() {
    damaged_state("substitution", |s| {
        s.replace("CB_STATE=CLOSED", "CB_STATE=$(touch CANARY)")
            .into_bytes()
    });
}

#[test]
fn state_with_backticks_never_runs_them() {
    damaged_state("backticks", |s| {
        s.replace("ITER_BRANCH=", "ITER_BRANCH=`touch CANARY`")
            .into_bytes()
    });
}

#[test]
fn state_with_an_arithmetic_subscript_never_runs_it() {
    damaged_state("subscript", |s| {
        let v = state_of(s, "COST_MICROUSD");
        s.replace(
            &format!("COST_MICROUSD={v}"),
            "COST_MICROUSD=a[$(touch CANARY)]",
        )
        .into_bytes()
    });
}

fn state_of(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap()
        .to_string()
}

#[test]
fn a_symlink_deep_in_an_old_iteration_record_still_fails_preflight() {
    // "Nothing under the loop directory is a symlink": the whole tree, not its top levels.
    let (repo, dir) = ticked_loop(2);
    let deep = dir.join("iterations/000001/interrupted.1");
    fs::create_dir_all(&deep).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", deep.join("agent.log")).unwrap();
    let next = state_value(&dir, "NEXT_ITERATION");
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 2, "a symlink three levels down");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interrupted.1/agent.log is a symlink"),
        "{}",
        text(&out)
    );
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), next, "nothing ran");
}

#[test]
fn state_replaced_by_a_symlink_fails_preflight_and_follows_nothing() {
    let (repo, dir) = ticked_loop(5);
    let elsewhere = repo.bin.path().join("elsewhere.env");
    fs::copy(dir.join("state.env"), &elsewhere).unwrap();
    let before = fs::read(&elsewhere).unwrap();
    fs::remove_file(dir.join("state.env")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("state.env")).unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "symlinked state.env");
    assert!(String::from_utf8_lossy(&out.stderr).contains("symlink"));
    assert_eq!(
        fs::read(&elsewhere).unwrap(),
        before,
        "the target is untouched"
    );
    assert!(!dir.join("iterations/000002").exists());
    let a = audit(&repo, &dir);
    assert_ne!(a.code, 0, "{}", a.json);
}

#[test]
fn a_deleted_sidecar_fails_preflight_and_the_audit_says_corrupt() {
    let (repo, dir) = ticked_loop(5);
    fs::remove_file(dir.join("state.env.sha256")).unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "a missing sidecar fails preflight");
    assert!(String::from_utf8_lossy(&out.stderr).contains("state.env.sha256"));
    assert!(!dir.join("iterations/000002").exists());
    let a = audit(&repo, &dir);
    assert_eq!(a.verdict, "CORRUPT", "{}", a.json);
    assert!(a.has("CONTRACT_MISSING", "P1"), "{}", a.json);
}

#[test]
fn a_stale_sidecar_two_generations_behind_is_refused() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 5);
    let dir = repo.init_loop(&agent, &[&count_check(5)], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 1");
    let old = fs::read(dir.join("state.env.sha256")).unwrap();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 2");
    fs::write(dir.join("state.env.sha256"), &old).unwrap();
    let before = fs::read(dir.join("state.env")).unwrap();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 4, "stale sidecar");
    assert_eq!(fs::read(dir.join("state.env")).unwrap(), before);
    assert!(!dir.join("iterations/000003").exists());
    let a = audit(&repo, &dir);
    assert_eq!(a.verdict, "CORRUPT", "{}", a.json);
    assert!(a.has("STATE_DRIFT", "P1"), "{}", a.json);
}

// ---- files: progress.md, events.jsonl, agent output

/// progress.md cut short inside its last entry (after the checkpoint): the audit reports
/// it, the next run trims the torn tail and goes on with a whole chain. The lost entry's
/// record (result.env, events, commit) is intact; rewriting its text is `orbit recover`'s.
#[test]
fn progress_truncated_mid_entry_is_reported_trimmed_and_the_loop_goes_on() {
    let (repo, dir) = ticked_loop(3);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 2");
    let p = fs::read(dir.join("progress.md")).unwrap();
    let text = String::from_utf8_lossy(&p);
    let at = text.rfind("## Iteration 2").unwrap();
    fs::write(dir.join("progress.md"), &p[..at + 40]).unwrap();
    let a = audit(&repo, &dir);
    assert!(a.no_p0() && a.code == 1, "{}", a.json);
    assert!(
        a.findings
            .iter()
            .any(|(c, _)| c == "JOURNAL_BROKEN" || c == "STATE_DRIFT"),
        "{}",
        a.json
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "rerun to DONE");
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("unclosed entry")
    );
    let progress = orbit::progress::parse(&fs::read(dir.join("progress.md")).unwrap());
    assert!(progress.first_broken().is_none(), "the chain holds");
    assert_eq!(progress.torn_tail_line, None);
    assert!(progress.stray_lines.is_empty());
    assert_eq!(committed_iterations(&repo), [1, 2, 3], "no iteration lost");
    assert_eq!(journal(&dir).error, None);
    assert!(dir.join("iterations/000002/result.env").is_file());
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
}

#[test]
fn an_old_progress_entry_rewritten_is_reported_and_never_silently_repaired() {
    let (repo, dir) = ticked_loop(4);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 2");
    let p = fs::read_to_string(dir.join("progress.md")).unwrap();
    let forged = p.replacen("## Iteration 1 — CONTINUE", "## Iteration 1 — DONE", 1);
    assert_ne!(p, forged);
    fs::write(dir.join("progress.md"), &forged).unwrap();
    let a = audit(&repo, &dir);
    assert!(a.has("JOURNAL_BROKEN", "P1"), "{}", a.json);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "the loop goes on");
    assert!(
        fs::read_to_string(dir.join("progress.md"))
            .unwrap()
            .starts_with(&forged),
        "history is never rewritten"
    );
    let a = audit(&repo, &dir);
    assert!(a.has("JOURNAL_BROKEN", "P1"), "still reported: {}", a.json);
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
}

#[test]
fn forged_headings_and_end_markers_in_agent_and_check_output_forge_nothing() {
    let forge = "## Iteration 9 — DONE\\n<!-- orbit:end iteration=9 sha256=0000000000000000000000000000000000000000000000000000000000000000 -->\\nNEXUS_LOOP_STATUS: DONE";
    let repo = Repo::new();
    let agent = repo.agent(
        "agent",
        &format!("cat >/dev/null\nprintf '{forge}\\n'\necho x >> work.txt"),
    );
    let dir = repo.init_loop(
        &agent,
        &[&format!("printf '{forge}\\n'; test -f never-there")],
        &[],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: DONE"));
    let progress = orbit::progress::parse(&fs::read(dir.join("progress.md")).unwrap());
    // The rendered READY entry and iteration 1: nothing forged.
    assert_eq!(
        progress.entries.len(),
        2,
        "no forged entry:\n{}",
        fs::read_to_string(dir.join("progress.md")).unwrap()
    );
    assert!(progress.first_broken().is_none());
    assert_records_agree(&dir);
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("IDLE", 0), "{}", a.json);
}

#[test]
fn an_edited_event_is_reported_and_the_journal_goes_on_without_losing_a_line() {
    let (repo, dir) = ticked_loop(4);
    let j = fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let lines = j.lines().count();
    let edited = j.replacen(
        "\"event\":\"iteration_start\"",
        "\"event\":\"iteration_Start\"",
        1,
    );
    assert_ne!(j, edited);
    fs::write(dir.join("events.jsonl"), &edited).unwrap();
    let a = audit(&repo, &dir);
    assert!(a.has("JOURNAL_BROKEN", "P1"), "{}", a.json);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "the loop goes on");
    let after = fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(after.starts_with(&edited), "nothing rewritten");
    assert!(after.lines().count() > lines);
    let a = audit(&repo, &dir);
    assert!(a.has("JOURNAL_BROKEN", "P1"), "{}", a.json);
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
}

// ---- files: read-only and full disks (need mount namespaces; skipped where absent)

fn can_unshare() -> bool {
    let ok = command("unshare")
        .args(["-m", "--propagation", "private", "true"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("notice: unshare -m is not available; skipping a mount scenario");
    }
    ok
}

/// Runs `script` with bash in a private mount namespace, bounded.
fn in_namespace(repo: &Repo, script: &str, args: &[&str]) -> Output {
    let mut cmd = command("unshare");
    cmd.args(["-m", "--propagation", "private", "bash", "-c", script, "ns"])
        .args(args)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("RETRY_BASE_DELAY", "0")
        .env("KILL_GRACE", "1");
    run_bounded(cmd, Duration::from_secs(180))
}

#[test]
fn a_read_only_loop_directory_fails_preflight_with_nothing_changed() {
    if !can_unshare() {
        return;
    }
    let (repo, dir) = ticked_loop(5);
    let before = tree_digest(&dir);
    let out = in_namespace(
        &repo,
        r#"mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" || exit 99
bash "$1/run-loop.sh""#,
        &[dir.to_str().unwrap()],
    );
    assert_code(&out, 2, "read-only loop directory");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not writable"),
        "{}",
        text(&out)
    );
    assert_eq!(tree_digest(&dir), before, "nothing changed");
    assert_records_agree(&dir);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "writable again: the loop goes on");
}

fn tree_digest(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().to_path_buf(), fs::read(e.path()).unwrap()))
        .collect()
}

/// Appends to events.jsonl and progress.md that hit the file-size limit (`ulimit -f`, the
/// journal is the larger record and hits it first): the run stops with exit 4 and the
/// cause named instead of going on with a hole in its records, and once there is room
/// again the next run resumes with whole records.
#[test]
fn a_file_size_limit_during_a_record_append_stops_with_exit_4_and_the_rerun_resumes() {
    let (repo, dir) = ticked_loop(6);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 2");
    let psize = fs::metadata(dir.join("progress.md")).unwrap().len();
    let esize = fs::metadata(dir.join("events.jsonl")).unwrap().len();
    // A limit just above the larger record: the next iteration's appends cross it.
    let limit_kb = psize.max(esize) / 1024 + 1;
    let mut cmd = command("bash");
    cmd.arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f "$1"; exec bash "$2/run-loop.sh""#)
        .arg("limit")
        .arg(limit_kb.to_string())
        .arg(&dir)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("RETRY_BASE_DELAY", "0")
        .env("KILL_GRACE", "1");
    let out = run_bounded(cmd, Duration::from_secs(180));
    assert_code(&out, 4, "a write that cannot be made stops the run");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"),
        "{}",
        text(&out)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("disk full"));
    assert_no_process_left(&dir);
    let a = audit(&repo, &dir);
    assert!(a.no_p0(), "{}", a.json);
    assert!(
        a.has("TOOL_FAILURE", "P1"),
        "the failed write is reported: {}",
        a.json
    );
    // Room again: the loop resumes to DONE with whole records.
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "rerun with room");
    assert_records_agree(&dir);
    assert_eq!(committed_iterations(&repo), (1..=6).collect::<Vec<_>>());
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("DONE", 0), "{}", a.json);
}

/// The same limit met by a progress.md append: an agent that replaces twenty files with
/// long names each iteration makes progress.md the largest file the runner writes (each
/// entry lists the changed files; the git index stays small). The torn entry is trimmed and rewritten from result.env on the rerun.
#[test]
fn a_file_size_limit_during_a_progress_append_stops_with_exit_4_and_the_rerun_rewrites_the_entry() {
    let repo = Repo::new();
    let agent = repo.agent(
        "agent",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
pad=$(printf '%0200d' 0)
rm -f f-*
for k in $(seq 20); do echo x > "f-$ORBIT_ITERATION-$k-$pad"; done
if [ "$(wc -l < work.txt)" -ge 16 ]; then echo done > "$ORBIT_AGENT_DIR/done.md"; fi"#,
    );
    let dir = repo.init_loop(&agent, &[&count_check(16)], &["--loop-timeout", "8h"]);
    // Ticks until progress.md outgrows verify.sh, the largest file a run copies (into the
    // agent's folder: lib.sh is copied at the first run and kept), and leads events.jsonl by
    // an iteration of events, so that the limit meets the progress append first.
    let vsize = fs::metadata(dir.join("verify.sh")).unwrap().len();
    let size = |name: &str| fs::metadata(dir.join(name)).map_or(0, |m| m.len());
    let mut ticks = 0;
    while ticks < 16
        && (size("progress.md") < vsize + 2048
            || size("progress.md") < size("events.jsonl") + 4096 + 1024)
    {
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 10, "tick");
        ticks += 1;
    }
    let psize = fs::metadata(dir.join("progress.md")).unwrap().len();
    let esize = fs::metadata(dir.join("events.jsonl")).unwrap().len();
    let limit_kb = psize / 1024 + 1;
    assert!(
        esize + 4096 < limit_kb * 1024,
        "progress.md ({psize}) must lead events.jsonl ({esize}) by an iteration of events"
    );
    let mut cmd = command("bash");
    cmd.arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f "$1"; exec bash "$2/run-loop.sh""#)
        .arg("limit")
        .arg(limit_kb.to_string())
        .arg(&dir)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("RETRY_BASE_DELAY", "0")
        .env("KILL_GRACE", "1");
    let out = run_bounded(cmd, Duration::from_secs(180));
    assert_code(&out, 4, "the progress append cannot be made");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write") && err.contains("progress.md"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"));
    assert_eq!(
        state_value(&dir, "NEXT_ITERATION"),
        (ticks + 1).to_string(),
        "not checkpointed past the entry"
    );
    assert_no_process_left(&dir);
    let a = audit(&repo, &dir);
    assert!(a.no_p0() && a.has("TOOL_FAILURE", "P1"), "{}", a.json);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "rerun with room");
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("recorded but not checkpointed")
    );
    assert_records_agree(&dir);
    assert_eq!(committed_iterations(&repo), (1..=16).collect::<Vec<_>>());
    assert_eq!(
        repo.ws_read("work.txt").lines().count(),
        16,
        "no agent run repeated"
    );
}

/// A file-size limit below the git index: the runner's copy of the index fails (inside a
/// command substitution). Exit 4 naming the limit, one footer, nothing recorded; with
/// the limit lifted the loop goes on.
#[test]
fn a_file_size_limit_below_the_git_index_is_named_with_one_footer() {
    let repo = Repo::new();
    for k in 0..300 {
        repo.write(
            &format!("tracked/file-with-a-rather-long-name-{k:04}.txt"),
            "x\n",
        );
    }
    repo.git(&["add", "tracked"]);
    repo.git(&["commit", "-q", "-m", "many files"]);
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 1");
    let index = fs::metadata(repo.join(".git/index")).unwrap().len();
    assert!(index > 8 * 1024, "index {index} bytes");
    let mut cmd = command("bash");
    cmd.arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 8; exec bash "$1/run-loop.sh""#)
        .arg("limit")
        .arg(&dir)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("RETRY_BASE_DELAY", "0")
        .env("KILL_GRACE", "1");
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert_code(&out, 4, "the limit is named");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("NEXUS_LOOP_STATUS:").count(),
        1,
        "one footer:\n{stdout}"
    );
    assert!(stdout.contains("file-size limit"), "{stdout}");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
    assert_no_process_left(&dir);
    let a = audit(&repo, &dir);
    assert!(a.no_p0() && a.verdict != "CORRUPT", "{}", a.json);
    assert!(a.has("TOOL_FAILURE", "P1"), "{}", a.json);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "without the limit");
    assert_records_agree(&dir);
    assert_eq!(
        committed_iterations(&repo),
        [1, 2],
        "progress.md:\n{}\nrunner.log:\n{}",
        fs::read_to_string(dir.join("progress.md")).unwrap_or_default(),
        fs::read_to_string(dir.join("runner.log")).unwrap_or_default()
    );
}

/// The disk fills up while the agent runs (it writes into the loop directory until ENOSPC), so the
/// runner's next write fails (a log, the journal or the checkpoint; whichever comes
/// first): exit 4 with the cause named, the checkpoint whole; once the space is freed the
/// next run resumes.
#[test]
fn a_full_disk_mid_iteration_stops_with_exit_4_and_the_rerun_resumes() {
    if !can_unshare() {
        return;
    }
    let repo = Repo::new();
    let agent = repo.agent(
        "agent",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
loop=@ORBIT_DIR@/test-goal
if [ -e "$loop/fill-the-disk" ]; then
  head -c 400000000 /dev/zero > "$loop/filler" 2>/dev/null
fi
if [ "$(wc -l < work.txt)" -ge 3 ]; then echo done > "$ORBIT_AGENT_DIR/done.md"; fi
exit 0"#,
    );
    let dir = repo.init_loop(&agent, &[&count_check(3)], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 1");
    fs::write(dir.join("fill-the-disk"), "").unwrap();
    // The loop directory moves onto a 120 MB tmpfs for the run, and back afterwards.
    let out = in_namespace(
        &repo,
        r#"export GIT_DISCOVERY_ACROSS_FILESYSTEM=1; d=$1; t=$(mktemp -d); mount -t tmpfs -o size=120m tmpfs "$t" || exit 99
cp -a "$d/." "$t/" && mount --bind "$t" "$d" || exit 98
bash "$d/run-loop.sh" --once; rc=$?
rm -f "$d/filler"
umount "$d"; cp -a "$t/." "$d/"; rm -f "$d/filler"
umount "$t"; rmdir "$t"
exit $rc"#,
        &[dir.to_str().unwrap()],
    );
    assert_code(&out, 4, "a full disk is a clear stop");
    assert!(String::from_utf8_lossy(&out.stderr).contains("disk is full"));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"),
        "{}",
        text(&out)
    );
    // The checkpoint is whole: the last good one or a newer sealed one.
    let st = orbit::state::State::parse_file(&dir.join("state.env")).expect("state.env whole");
    assert!(st.next_iteration >= 2);
    assert_no_process_left(&dir);
    let a = audit(&repo, &dir);
    assert!(a.no_p0() && a.verdict != "CORRUPT", "{}", a.json);
    fs::remove_file(dir.join("fill-the-disk")).unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "rerun with room");
    assert_records_agree(&dir);
    // Iteration 2 was never recorded, so it ran again: each iteration committed once.
    let next: u64 = state_value(&dir, "NEXT_ITERATION").parse().unwrap();
    assert_eq!(committed_iterations(&repo), (1..next).collect::<Vec<_>>());
    assert!(dir.join("iterations/000002/interrupted.1").is_dir());
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("DONE", 0), "{}", a.json);
}

// ---- environment

/// A PATH directory of symlinks to every tool in /usr/bin and /bin but `hidden`.
fn path_without(repo: &Repo, hidden: &[&str]) -> (tempfile::TempDir, String) {
    let d = tempfile::Builder::new()
        .prefix("orbit-path-")
        .tempdir()
        .unwrap();
    for src in ["/usr/local/bin", "/usr/bin", "/bin"] {
        let Ok(rd) = fs::read_dir(src) else { continue };
        for e in rd.flatten() {
            let name = e.file_name();
            let n = name.to_string_lossy();
            if hidden.contains(&n.as_ref()) || d.path().join(&name).exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), d.path().join(&name));
        }
    }
    let path = format!("{}:{}", repo.bin.path().display(), d.path().display());
    (d, path)
}

fn gnu_tools_hidden(hidden: &[&str], sha_tool: &str) {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--loop-timeout", "8h"]);
    let (_keep, path) = path_without(&repo, hidden);
    for h in hidden {
        let out = command("bash")
            .args(["-c", &format!("command -v {h}")])
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{h} is hidden");
    }
    let mut cmd = command("bash");
    cmd.arg(dir.join("run-loop.sh"))
        .current_dir(repo.path())
        .env("PATH", &path)
        .env("RETRY_BASE_DELAY", "0")
        .env("KILL_GRACE", "1")
        .env("EXEC_TIMEOUT", "20s");
    let out = run_bounded(cmd, Duration::from_secs(180));
    assert_code(&out, 0, "DONE without the GNU tools");
    assert!(
        !dir.join(".run-loop.lock.d").exists(),
        "mkdir lock released"
    );
    // The fallback hash tool wrote the same seals the Rust side checks.
    assert_records_agree(&dir);
    let out = command("bash")
        .args(["-c", &format!("command -v {sha_tool}")])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{sha_tool} is the fallback left");
    // A hung agent is still bounded without timeout(1).
    let repo2 = Repo::new();
    let agent = repo2.agent("agent", "cat >/dev/null; trap '' TERM; sleep 300");
    let dir2 = repo2.init_loop(&agent, &["test -f never-there"], &[]);
    let (_keep2, path2) = path_without(&repo2, hidden);
    let mut cmd = command("bash");
    cmd.arg(dir2.join("run-loop.sh"))
        .arg("--once")
        .current_dir(repo2.path())
        .env("PATH", &path2)
        .env("RETRY_BASE_DELAY", "0")
        .env("RETRY_LIMIT", "1")
        .env("KILL_GRACE", "1")
        .env("EXEC_TIMEOUT", "2s");
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert_code(&out, 10, "hung agent bounded");
    let r = read_kv(&dir2.join("iterations/000001/result.env"));
    assert_eq!(r["AGENT_OUTCOME"], "timeout");
    assert_no_process_left(&dir2);
    assert_records_agree(&dir2);
}

#[test]
fn without_flock_timeout_and_sha256sum_the_fallbacks_do_the_same_job() {
    gnu_tools_hidden(&["flock", "timeout", "sha256sum", "perl"], "shasum");
}

#[test]
fn without_shasum_either_openssl_seals_the_state() {
    gnu_tools_hidden(
        &["flock", "timeout", "sha256sum", "shasum", "perl"],
        "openssl",
    );
}

/// Rewrites STARTED_AT (and reseals), as a clock step would look to the runner.
pub(crate) fn set_started_at(dir: &Path, started: u64) {
    let text = fs::read_to_string(dir.join("state.env")).unwrap();
    let old = state_of(&text, "STARTED_AT");
    let new = text.replace(
        &format!("STARTED_AT={old}"),
        &format!("STARTED_AT={started}"),
    );
    let generation: u64 = state_of(&new, "GEN").parse().unwrap();
    write_sealed(dir, new.as_bytes(), generation);
    journal_state_write(dir, &new, generation);
}

/// The journal's record of a state write, as the runner makes it (with the state's sha256):
/// a state edited by a test stands for one the runner wrote under another clock.
fn journal_state_write(dir: &Path, state: &str, generation: u64) {
    use std::io::Write;
    let path = dir.join("events.jsonl");
    let bytes = fs::read(&path).unwrap_or_default();
    let (prev, seq) = orbit::events::read(&bytes).tip();
    let fields = [
        ("gen", orbit::events::value(&generation.to_string())),
        (
            "sha256",
            orbit::events::value(&orbit::fsx::sha256_hex(state.as_bytes())),
        ),
    ];
    let line = orbit::events::build_line(
        seq,
        "2026-01-01T00:00:00Z",
        "state_write",
        0,
        &fields,
        &prev,
    );
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn the_clock_stepping_back_an_hour_does_not_stop_or_corrupt_the_loop() {
    let (repo, dir) = ticked_loop(3);
    // The loop started "an hour from now": the clock went back after the start.
    set_started_at(&dir, now() + 3600);
    let out = repo.run_loop(&dir, &["--once"], &[("LOOP_TIMEOUT", "30m")]);
    assert_code(&out, 10, "no timeout from a negative elapsed time");
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert!(a.no_p0() && a.code <= 1, "{}", a.json);
}

#[test]
fn the_clock_jumping_past_the_loop_timeout_stops_with_exit_11() {
    let (repo, dir) = ticked_loop(3);
    set_started_at(&dir, now() - 9 * 3600);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 11, "loop timeout");
    assert_eq!(state_value(&dir, "STOP_REASON"), "loop_timeout");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "BLOCKED");
    assert!(!dir.join("iterations/000002").exists(), "no agent ran");
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!(a.verdict, "BLOCKED", "{}", a.json);
    // Raising the limit resumes.
    let out = repo.run_loop(&dir, &["--once"], &[("LOOP_TIMEOUT", "20h")]);
    assert_code(&out, 10, "a higher limit resumes");
    assert_records_agree(&dir);
}

// ---- concurrency

#[test]
fn a_runner_that_loses_the_lock_never_marks_its_processes_as_the_loops() {
    let repo = Repo::new();
    let started = repo.bin.path().join("started");
    let release = repo.bin.path().join("release");
    let seen = repo.bin.path().join("df-env");
    let agent = repo.agent(
        "agent",
        &format!(
            "cat >/dev/null; env > '{started}'; for _ in $(seq 600); do [ -e '{release}' ] && break; sleep 0.1; done",
            started = started.display(),
            release = release.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let holder = Runner::start(&repo, &dir, &["--once"], &[]);
    wait_for("the holder's agent", Duration::from_secs(60), || {
        started.exists()
    });
    // The second runner's preflight runs df before it meets the lock: a df that writes
    // down the environment it was given.
    let real_df = String::from_utf8(
        command("bash")
            .args(["-c", "command -v df"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    repo.agent(
        "df",
        &format!("env > '{}'\nexec {} \"$@\"", seen.display(), real_df.trim()),
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 20, "the lock is held");
    fs::write(&release, "").unwrap();
    let held = holder.wait(Duration::from_secs(120));
    assert_code(&held, 10, "the holder's tick");
    let marker = format!("ORBIT_OWNER={}", fs::canonicalize(&dir).unwrap().display());
    let loser_env = fs::read_to_string(&seen).expect("the loser ran df");
    assert!(
        !loser_env.lines().any(|l| l == marker),
        "the loser's df carried {marker}"
    );
    let agent_env = fs::read_to_string(&started).unwrap();
    assert!(
        agent_env.lines().any(|l| l == marker),
        "the holder's agent carries the mark"
    );
}

/// Ten runners at once, with the tools in `hidden` really absent from PATH.
fn ten_runners(hidden: &[&str]) {
    let repo = Repo::new();
    let (_keep, path) = path_without(&repo, hidden);
    let env: &[(&str, &str)] = &[("PATH", &path)];
    let release = repo.bin.path().join("release");
    // The agent holds on until the test releases it: every runner tries the lock while
    // the one that got it is mid-iteration.
    let agent = repo.agent(
        "agent",
        &format!(
            "cat >/dev/null; for _ in $(seq 3000); do [ -e '{}' ] && break; sleep 0.1; done; echo x >> work.txt",
            release.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &["--loop-timeout", "8h"]);
    let mut runners: Vec<Runner> = (0..10)
        .map(|_| Runner::start(&repo, &dir, &["--once"], env))
        .collect();
    // The agent is released once nine runners have ended (the bound is a safety net: it
    // holds on for five minutes at most).
    wait_for("nine runners to end", Duration::from_secs(240), || {
        runners
            .iter_mut()
            .map(|r| r.child.as_mut().unwrap().try_wait().unwrap().is_some())
            .filter(|done| *done)
            .count()
            >= 9
    });
    fs::write(&release, "").unwrap();
    let codes: Vec<Option<i32>> = runners
        .into_iter()
        .map(|r| r.wait(Duration::from_secs(120)).status.code())
        .collect();
    let ran = codes.iter().filter(|c| **c == Some(10)).count();
    let busy = codes.iter().filter(|c| **c == Some(20)).count();
    assert_eq!((ran, busy), (1, 9), "exit codes: {codes:?}");
    assert_eq!(repo.ws_read("work.txt").lines().count(), 1, "one agent run");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
    let starts = journal(&dir)
        .events
        .iter()
        .filter(|e| e.event == "loop_start")
        .count();
    assert_eq!(starts, 1, "one loop_start");
    assert_records_agree(&dir);
    assert!(!dir.join(".run-loop.lock.d").exists());
    assert_no_process_left(&dir);
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("IDLE", 0), "{}", a.json);
}

#[test]
fn ten_runners_started_at_once_one_runs_nine_exit_20() {
    ten_runners(&[]);
}

#[test]
fn ten_runners_at_once_with_the_mkdir_lock_one_runs_nine_exit_20() {
    // flock really absent from PATH, not just the ORBIT_NO_FLOCK hook.
    ten_runners(&["flock"]);
}

/// A mkdir lock whose owner file is not written yet belongs to a runner taking it right
/// now: a second runner exits 20. Left by a runner that died before writing it (older
/// than a minute), it is taken over. flock is really absent from PATH.
#[test]
fn a_mkdir_lock_without_an_owner_is_live_while_young_and_taken_over_when_old() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 5);
    let dir = repo.init_loop(&agent, &[&count_check(5)], &["--loop-timeout", "8h"]);
    let (_keep, path) = path_without(&repo, &["flock"]);
    let env: &[(&str, &str)] = &[("PATH", &path)];
    let lockdir = dir.join(".run-loop.lock.d");
    fs::create_dir(&lockdir).unwrap();
    let out = repo.run_loop(&dir, &["--once"], env);
    assert_code(&out, 20, "a lock being taken right now");
    assert!(!dir.join("iterations/000001").exists());
    assert_eq!(state_value(&dir, "LAST_STATUS"), "READY");
    let st = command("touch")
        .args(["-d", "5 minutes ago"])
        .arg(&lockdir)
        .status()
        .unwrap();
    assert!(st.success());
    let out = repo.run_loop(&dir, &["--once"], env);
    assert_code(
        &out,
        10,
        "an ownerless lock left by a dead runner is taken over",
    );
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("taken over")
    );
    assert!(!lockdir.exists(), "released");
    assert!(!dir.join(".run-loop.lock.d.takeover").exists());
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("IDLE", 0), "{}", a.json);
}

#[test]
fn a_user_commit_on_the_loop_branch_between_ticks_is_kept_and_not_swallowed() {
    let (repo, dir) = ticked_loop(3);
    // The user works in the loop's workspace between ticks: a commit on orbit/test-goal and
    // an uncommitted scratch file.
    fs::write(repo.ws().join("user.txt"), "mine\n").unwrap();
    repo.ws_git(&["add", "user.txt"]);
    repo.ws_git(&["commit", "-q", "-m", "user work"]);
    let user_commit = repo.ws_git(&["rev-parse", "HEAD"]).trim().to_string();
    fs::write(repo.ws().join("scratch.txt"), "uncommitted user change\n").unwrap();
    // ...and in their own checkout, on their own branch.
    repo.write("mine.txt", "checkout work\n");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    repo.ws_git(&["merge-base", "--is-ancestor", &user_commit, "HEAD"]);
    assert_eq!(committed_iterations(&repo), [1, 2, 3]);
    let last = repo.ws_git(&["show", "--name-only", "--format=", "HEAD~0"]);
    assert!(!last.contains("scratch.txt"), "{last}");
    let files = repo.ws_git(&[
        "log",
        "--name-only",
        "--format=",
        &format!("{user_commit}..HEAD"),
    ]);
    assert!(
        !files.contains("user.txt")
            && !files.contains("scratch.txt")
            && !files.contains("mine.txt"),
        "{files}"
    );
    assert_eq!(repo.ws_read("scratch.txt"), "uncommitted user change\n");
    assert_eq!(repo.read("mine.txt"), "checkout work\n");
    assert_eq!(
        repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("DONE", 0), "{}", a.json);
}

// ---- hostile goals and names

#[test]
fn every_hostile_goal_runs_a_full_loop_to_done() {
    for (name, goal) in hostile_goals() {
        let repo = Repo::new();
        let agent = counting_agent(&repo, 2);
        let exec = agent.display().to_string();
        let check = count_check(2);
        let goal_file = repo.bin.path().join("goal.txt");
        fs::write(&goal_file, &goal).unwrap();
        let out = repo.orbit(&[
            "init",
            "--goal-file",
            goal_file.to_str().unwrap(),
            "--engine",
            "custom",
            "--exec",
            &exec,
            "--verify",
            &check,
            "--dir",
            ".orbit/hostile",
            "--loop-timeout",
            "8h",
        ]);
        assert_ok(&out, name);
        let dir = repo.join(".orbit/hostile");
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 0, name);
        assert!(!repo.join("CANARY").exists(), "{name}: canary");
        assert!(!dir.join("CANARY").exists(), "{name}: canary");
        assert!(
            !repo.ws_of("hostile").join("CANARY").exists(),
            "{name}: canary"
        );
        let prompt = fs::read_to_string(dir.join("iterations/000001/prompt.md")).unwrap();
        let goal_md = fs::read_to_string(dir.join("goal.md")).unwrap();
        assert!(
            prompt.contains(goal_md.lines().next().unwrap_or("")),
            "{name}"
        );
        assert_eq!(committed_iterations(&repo), [1, 2], "{name}");
        assert_records_agree(&dir);
        let a = audit(&repo, &dir);
        assert_eq!(
            (a.verdict.as_str(), a.code),
            ("DONE", 0),
            "{name}: {}",
            a.json
        );
        assert!(!repo.join("CANARY").exists(), "{name}: canary after audit");
    }
}

#[test]
fn a_repository_path_with_spaces_and_quotes_runs_to_done() {
    let repo = Repo::with_prefix("orbit-it-a b 'q' \"d\" $(x) ");
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    assert_eq!(committed_iterations(&repo), [1, 2]);
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!((a.verdict.as_str(), a.code), ("DONE", 0), "{}", a.json);
    // And from cron: another directory, a bare environment.
    let out = {
        let mut cmd = command("env");
        cmd.arg("-i")
            .arg("PATH=/usr/bin:/bin")
            .arg("HOME=/nonexistent")
            .arg("bash")
            .arg(dir.join("run-loop.sh"))
            .current_dir("/");
        run_bounded(cmd, Duration::from_secs(60))
    };
    assert_code(&out, 0, "DONE stays DONE from cron");
}

// ---- property tests: the two state.env parsers agree; progress.md truncation

/// Runs the bash `state_parse` (the contract prelude, then templates/lib/common.sh and
/// state.sh, as a rendered script has them) on each input, in one bash process; returns
/// ok/err per input.
fn bash_parse_all(inputs: &[Vec<u8>]) -> Vec<bool> {
    let work = tempfile::tempdir().unwrap();
    for (i, b) in inputs.iter().enumerate() {
        fs::write(work.path().join(format!("{i}.env")), b).unwrap();
    }
    let mut cmd = bash_with_parts(
        work.path(),
        &["common", "state"],
        r#"orbit_log() { :; }
for ((i = 0; i < $1; i++)); do
  if state_parse "$2/$i.env"; then echo ok; else echo err; fi
done"#,
    );
    cmd.arg(inputs.len().to_string()).arg(work.path());
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert_ok(&out, "bash state_parse harness");
    let v: Vec<bool> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l == "ok")
        .collect();
    assert_eq!(v.len(), inputs.len(), "{}", text(&out));
    v
}

fn valid_state_text() -> String {
    let mut s = orbit::state::State::ready("1.0.0", 1_700_000_000);
    s.generation = 3;
    s.print()
}

/// Inputs near the valid file: a line changed, dropped, duplicated, or bytes spliced in.
fn state_input() -> impl Strategy<Value = Vec<u8>> {
    let pieces = prop::sample::select(vec![
        "",
        "0",
        "1",
        "01",
        "-1",
        "x",
        "=",
        " ",
        "\t",
        "\r",
        "\u{0}",
        "\u{feff}",
        "é",
        "\u{85}",
        "$(id)",
        "`id`",
        "a[$(id)]",
        "..",
        "/",
        "main",
        "DONE",
        "OPEN",
        "CLOSED",
        "none",
        "loop_tamper",
        "stopped",
        "HALF_OPEN",
        "1.0.0",
        "1.0",
        "999999999999999999",
        "9999999999999999999",
        "ff",
        "FF",
        "\n",
        "GEN",
        "GEN=",
        "NEXT_ITERATION=2",
        "#",
        "\u{202e}",
    ]);
    let base = valid_state_text();
    let nlines = base.lines().count();
    (
        0..nlines,
        0usize..6,
        prop::collection::vec(pieces, 0..4),
        prop::collection::vec(any::<u8>(), 0..3),
    )
        .prop_map(move |(line, op, pieces, raw)| {
            let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
            let extra: String = pieces.concat();
            match op {
                0 => {
                    let (k, _) = lines[line].split_once('=').unwrap();
                    lines[line] = format!("{k}={extra}");
                }
                1 => lines[line].push_str(&extra),
                2 => {
                    lines.remove(line);
                }
                3 => {
                    let l = lines[line].clone();
                    lines.insert(line, l);
                }
                4 => lines.insert(line, extra.clone()),
                _ => {}
            }
            let mut bytes = (lines.join("\n") + "\n").into_bytes();
            if op == 5 && !raw.is_empty() {
                let at = (line * 7) % bytes.len();
                bytes.splice(at..at, raw);
            }
            bytes
        })
}

#[test]
fn the_rust_and_bash_state_parsers_agree_on_accept_and_reject() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 1,
        ..ProptestConfig::default()
    });
    let strat = prop::collection::vec(state_input(), 400);
    runner
        .run(&strat, |inputs| {
            let mut all = inputs.clone();
            all.push(valid_state_text().into_bytes());
            all.push(b"".to_vec());
            all.push(valid_state_text().replace('\n', "\r\n").into_bytes());
            let bash = bash_parse_all(&all);
            let accepted = bash.iter().filter(|ok| **ok).count();
            prop_assert!(
                accepted > 1 && accepted < all.len() - 1,
                "the inputs exercise both sides: {} of {} accepted",
                accepted,
                all.len()
            );
            for (input, bash_ok) in all.iter().zip(bash) {
                let rust_ok = orbit::state::State::parse(input).is_ok();
                prop_assert_eq!(
                    rust_ok,
                    bash_ok,
                    "disagree on {:?}",
                    String::from_utf8_lossy(input)
                );
            }
            Ok(())
        })
        .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn progress_truncated_at_any_byte_is_a_valid_prefix_plus_a_torn_tail(
        entries in prop::collection::vec("[ -~]{0,40}(\n[ -~é—]{0,30}){0,3}", 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut text = orbit::progress::preamble("p");
        let mut prev = "0".repeat(64);
        for (i, body) in entries.iter().enumerate() {
            let entry = format!("## Iteration {} — CONTINUE\n{}\n", i + 1, orbit::progress::neutralise(body));
            let (closed, hash) = orbit::progress::close_entry(&prev, (i + 1) as u64, &entry);
            text.push_str(&closed);
            prev = hash;
        }
        let full = orbit::progress::parse(text.as_bytes());
        prop_assert!(full.first_broken().is_none());
        prop_assert_eq!(full.entries.len(), entries.len());
        let bytes = text.as_bytes();
        let at = cut.index(bytes.len() + 1);
        let p = orbit::progress::parse(&bytes[..at]);
        // Every closed entry is one of the originals, in order, and chains.
        prop_assert!(p.first_broken().is_none() || p.torn_tail_line.is_some());
        let closed: Vec<_> = p.entries.iter().filter(|e| e.marker.is_some()).collect();
        prop_assert!(closed.len() <= entries.len());
        for (e, f) in closed.iter().zip(full.entries.iter()) {
            prop_assert!(e.hash_ok);
            prop_assert_eq!(&e.marker, &f.marker);
            prop_assert_eq!(&e.text, &f.text);
        }
        // What is not closed is at most one torn tail, at the end.
        let open = p.entries.iter().filter(|e| e.marker.is_none()).count();
        prop_assert!(open <= 1);
        if open == 1 {
            prop_assert!(p.entries.last().unwrap().marker.is_none());
            prop_assert!(p.torn_tail_line.is_some());
        }
        prop_assert!(p.stray_lines.is_empty(), "stray lines {:?}", p.stray_lines);
    }
}

/// An agent that counts lines into work.txt (DONE at `done_at`) and, each work run, finds
/// the runner's hashing coprocess: a child of its grandparent (the runner) running perl
/// with Digest::SHA. `then` runs with their pids in `$hashers`.
fn hasher_agent(repo: &Repo, done_at: usize, then: &str) -> PathBuf {
    repo.agent(
        "hasher-agent",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
runner=$(ps -o ppid= -p "$PPID" | tr -d ' ')
hashers=''
for p in $(ps -o pid= --ppid "$runner"); do
  if grep -qa 'Digest::SHA' "/proc/$p/cmdline" 2>/dev/null; then hashers="$hashers $p"; fi
done
{then}
if [ "$(wc -l < work.txt)" -ge {done_at} ]; then echo "all hold" > "$ORBIT_AGENT_DIR/done.md"; fi"#
        ),
    )
}

#[test]
fn a_hashing_coprocess_killed_mid_run_leaves_the_records_to_the_hash_tool() {
    if !hasher_available() {
        return;
    }
    let repo = Repo::new();
    let killed = repo.bin.path().join("killed.txt");
    // Iteration 2's agent kills the hasher.
    let agent = hasher_agent(
        &repo,
        3,
        &format!(
            r#"if [ "$ORBIT_ITERATION" = 2 ]; then
  for p in $hashers; do kill -KILL "$p" && echo "$p" >> '{}'; done
fi"#,
            killed.display()
        ),
    );
    let dir = repo.init_loop(&agent, &[&count_check(3)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE with the hasher gone after iteration 2");
    let victims = fs::read_to_string(&killed).expect("the agent found the hasher");
    assert_eq!(victims.lines().count(), 1, "one hasher per run: {victims}");
    assert_records_agree(&dir);
    let a = audit(&repo, &dir);
    assert_eq!(a.code, 0, "the audit finds nothing above P2: {}", a.json);
}

/// The hashing coprocess asked for thousands of files at once (a loop pinning many files):
/// more requests than a pipe holds, and more answers. The runner must read answers while
/// it still has requests to write, or both sides wait on a full pipe for ever (no timeout
/// covers a write): each answer arrives, and each is the file's own hash.
#[test]
fn the_hashing_coprocess_answers_more_files_than_a_pipe_holds() {
    if !hasher_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let deep = work
        .path()
        .join("a-directory-with-a-long-name-as-projects-have-them/and-another-level-below-it");
    fs::create_dir_all(&deep).unwrap();
    let n = 3000;
    for i in 0..n {
        fs::write(deep.join(format!("test_file_{i:05}.py")), format!("{i}\n")).unwrap();
    }
    let body = r#"
orbit_hasher_start
files=("$1"/test_file_*.py)
orbit_hasher_files "${files[@]}" || { echo "the hasher did not answer"; exit 1; }
echo "answers ${#ORBIT_HASHES[@]} of ${#files[@]}"
for ((i = 0; i < ${#files[@]}; i += 997)); do
  [[ ${ORBIT_HASHES[i]} == "$(sha256sum <"${files[i]}" | cut -d' ' -f1)" ]] || { echo "wrong hash for ${files[i]}"; exit 1; }
done
orbit_hasher_stop
"#;
    let mut cmd = bash_with_parts(work.path(), &["common"], body);
    cmd.arg(&deep);
    let out = run_bounded(cmd, Duration::from_secs(120));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&format!("answers {n} of {n}")), "{said}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// The runner's state_progress_open on a progress.md cut at any byte, reading the whole
    /// file or only a small window of its end: what remains is a prefix of the original
    /// that the Rust parser finds whole, with every closed entry kept, and the runner
    /// chains on from the last one.
    #[test]
    fn the_runner_trims_a_cut_progress_file_to_its_last_closed_entry(
        entries in prop::collection::vec("[ -~]{0,60}(\n[ -~é—]{0,40}){0,4}", 1..6),
        cut in any::<prop::sample::Index>(),
        window in prop_oneof![Just(262_144usize), 1usize..300],
        preamble in any::<bool>(),
    ) {
        // Without its preamble the file starts with a heading: line 1 counts too.
        let mut full = if preamble { orbit::progress::preamble("p") } else { String::new() };
        let mut prev = "0".repeat(64);
        for (i, body) in entries.iter().enumerate() {
            let entry = format!("## Iteration {} — CONTINUE\n{}\n", i + 1, orbit::progress::neutralise(body));
            let (closed, hash) = orbit::progress::close_entry(&prev, (i + 1) as u64, &entry);
            full.push_str(&closed);
            prev = hash;
        }
        let bytes = full.as_bytes();
        let cut_bytes = &bytes[..cut.index(bytes.len() + 1)];
        let work = tempfile::tempdir().unwrap();
        let file = work.path().join("progress.md");
        fs::write(&file, cut_bytes).unwrap();
        let mut cmd = bash_with_parts(
            work.path(),
            &["common", "state"],
            r#"orbit_log() { :; }
PG_WINDOW=$2
state_progress_open "$1"
printf '%s' "$PG_PREV""#,
        );
        cmd.arg(&file).arg(window.to_string());
        let out = run_bounded(cmd, Duration::from_secs(60));
        prop_assert!(out.status.success(), "{}", text(&out));
        let after = fs::read(&file).unwrap();
        prop_assert!(bytes.starts_with(&after), "a prefix of the original");
        let p = orbit::progress::parse(&after);
        prop_assert_eq!(p.torn_tail_line, None);
        prop_assert!(p.first_broken().is_none());
        prop_assert!(p.stray_lines.is_empty());
        let closed = |p: &orbit::progress::Progress| p.entries.iter().filter(|e| e.marker.is_some()).count();
        // A cut right after an end marker's last byte leaves an entry the parser calls
        // torn and the runner completes (it adds the newline): one more closed entry.
        let last_line = cut_bytes.rsplit(|b| *b == b'\n').next().unwrap_or_default();
        let completed = last_line.starts_with(b"<!-- orbit:end ") && last_line.ends_with(b" -->");
        prop_assert_eq!(
            closed(&p),
            closed(&orbit::progress::parse(cut_bytes)) + usize::from(completed),
            "no closed entry lost, a marker cut before its newline completed"
        );
        prop_assert_eq!(String::from_utf8_lossy(&out.stdout).into_owned(), p.last_hash());
    }
}

#[test]
fn orbit_no_hasher_runs_the_loop_on_the_hash_tools_alone() {
    if !hasher_available() {
        return;
    }
    // Each work run writes down how many hashers the runner has.
    let counted = |env: &[(&str, &str)]| -> String {
        let repo = Repo::new();
        let seen = repo.bin.path().join("hashers.txt");
        let then = format!("set -- $hashers; echo \"$#\" >> '{}'", seen.display());
        let agent = hasher_agent(&repo, 2, &then);
        let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
        let out = repo.run_loop(&dir, &[], env);
        assert_code(&out, 0, "DONE");
        assert_records_agree(&dir);
        fs::read_to_string(&seen).unwrap()
    };
    assert_eq!(
        counted(&[("ORBIT_NO_HASHER", "1")]),
        "0\n0\n",
        "no hasher ran"
    );
    assert_eq!(counted(&[]), "1\n1\n", "one hasher without the variable");
}

/// A SIGKILL after the journal recorded a state write and before state.env was replaced
/// leaves state.env at the generation before the journal's last record, exactly as the
/// runner wrote it one step earlier. That is a crash: the audit says so, and never that
/// state.env was rolled back or replaced.
#[test]
fn a_kill_between_the_journals_state_record_and_the_rename_reads_as_a_crash_not_a_rollback() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--loop-timeout", "8h"]);
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "tick");
    let out = repo.run_loop(&dir, &[], &[("ORBIT_FAULT", "mid_state_write")]);
    assert_eq!(out.status.code(), None, "SIGKILL\n{}", text(&out));
    // The fault was where it is said to be: the journal's last state record is one
    // generation ahead of state.env.
    let gen_of = |t: &str| -> u64 {
        t.lines()
            .find_map(|l| l.strip_prefix("GEN="))
            .unwrap()
            .trim_matches('"')
            .parse()
            .unwrap()
    };
    let state_gen = gen_of(&fs::read_to_string(dir.join("state.env")).unwrap());
    let writes = crate::support::events_named(&dir, "state_write");
    let last = writes.last().unwrap().value["gen"].as_u64().unwrap();
    assert_eq!(last, state_gen + 1, "the journal is one write ahead");
    let mut cmd = command(orbit_bin());
    cmd.args(["audit", "--json"])
        .arg(&dir)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("NO_COLOR", "1");
    let out = run_bounded(cmd, Duration::from_secs(60));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = json["loops"][0]["findings"].as_array().unwrap();
    let said: Vec<String> = findings
        .iter()
        .map(|f| format!("{} {}: {}", f["class"], f["severity"], f["message"]))
        .collect();
    assert!(
        !said.iter().any(|s| s.contains("rolled back or replaced")),
        "a crash is not a rollback: {said:#?}"
    );
    assert!(
        said.iter().any(|s| s.contains("CRASHED")
            && s.contains("died writing its checkpoint")
            && s.contains(&format!("generation {state_gen}"))),
        "the finding says the write was cut short: {said:#?}"
    );
    assert!(
        !said
            .iter()
            .any(|s| s.contains("STATE_DRIFT") && s.contains("P1")),
        "nothing of the crash is read as an edit: {said:#?}"
    );
    // And the runner goes on from it by itself.
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "the rerun");
    assert_records_agree(&dir);
}
