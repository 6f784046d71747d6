//! The limits the queue's tasks share: one task's rate limit pauses its engine for every
//! task (no new attempt on it before the reset; the paused loop resumed, not counted as an
//! attempt), and `orbit queue run --usd-cap` starts no attempt the budget left cannot cover.

use std::fs;

use super::{MAKE_OWN_FILE, queue};
use crate::support::*;

/// Each agent call as `task epoch` lines of REC/calls.
fn calls(rec: &std::path::Path) -> Vec<(String, u64)> {
    fs::read_to_string(rec.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (t, at) = l.split_once(' ').unwrap();
            (t.to_string(), at.parse().unwrap())
        })
        .collect()
}

#[test]
fn a_rate_limit_of_one_task_pauses_its_engine_for_every_task_and_is_no_attempt() {
    // Task a's provider refuses for its rate limit, naming its reset the way providers do
    // (an epoch after '|', 5 s on), until c (on another engine) has run: c can only run
    // while a's engine is paused. Then a works.
    let q = queue(
        r#"echo "$task $(date +%s)" >> "$REC/calls"
if [[ $task == c ]]; then touch "$REC/c-ran"; fi
if [[ $task == a ]]; then
  if [[ ! -e $REC/c-ran ]]; then
    resume=$(( $(date +%s) + 5 )); echo "$resume" > "$REC/limited"
    echo "Error: rate limit reached, resets |$resume" >&2; exit 1
  fi
  date +%s > "$REC/a-ok"
fi
echo "$task" > "$task.txt"; claim_done"#,
    );
    // b runs on the same engine as a; c on another (its own custom command).
    q.add("a", "Write a.txt", "test -f a.txt", &["--priority", "10"]);
    q.add("b", "Write b.txt", "test -f b.txt", &["--priority", "5"]);
    let other = q.repo.bin.path().join("other-agent");
    fs::copy(&q.agent, &other).unwrap();
    let exec = other.display().to_string();
    let out = q.repo.orbit(&[
        "queue",
        "add",
        "Write c.txt",
        "--name",
        "c",
        "--verify",
        "test -f c.txt",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--sandbox",
        "none",
        "--max-iterations",
        "2",
    ]);
    assert_ok(&out, "orbit queue add c");
    let out = q.run(&[]);
    assert_code(&out, 0, "orbit queue run");
    let o = text(&out);
    assert!(o.contains("a: rate limited (custom "), "{o}");
    let read = |f: &str| -> u64 {
        fs::read_to_string(q.rec().join(f))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // The last reset a's provider named, and when a's call first went through.
    let (resume, a_ok) = (read("limited"), read("a-ok"));
    let calls = calls(q.rec());
    let first = |t: &str| calls.iter().find(|(n, _)| n == t).map(|(_, at)| *at);
    // The attack on the shared limit was made: a was refused (before c ran).
    assert!(first("a").unwrap() <= first("c").unwrap(), "{calls:?}");
    // b, on a's engine, never started before the last reset; c, on another engine, ran
    // while a's engine was paused (a went through only once c had run).
    assert!(first("b").unwrap() >= resume, "{calls:?}\n{o}");
    assert!(first("c").unwrap() <= a_ok, "{calls:?}\n{o}");
    assert!(o.contains("b: not started: custom "), "{o}");
    // a's paused loop was resumed, not retried as a new attempt.
    assert!(
        calls.iter().any(|(t, at)| t == "a" && *at >= resume),
        "{calls:?}"
    );
    let a = q.task("a");
    assert!(a.contains("**Status:** done"), "{a}");
    assert!(a.contains("**Attempts:** 0"), "{a}");
    assert!(!a.contains("## Attempt"), "{a}");
    assert!(q.repo.join(".orbit/a-a1").exists());
    assert!(!q.repo.join(".orbit/a-a2").exists());
    assert_eq!(
        state_value(&q.repo.join(".orbit/a-a1"), "STOP_REASON"),
        "none"
    );
}

#[test]
fn the_queues_usd_cap_starts_no_attempt_the_budget_left_cannot_cover() {
    // Every agent run reports $0.40.
    let q = queue(&format!(
        r#"echo 0.40 > "$ORBIT_COST_FILE"; {MAKE_OWN_FILE}"#
    ));
    for t in ["t1", "t2", "t3", "t4"] {
        q.add(
            t,
            &format!("Write {t}.txt"),
            &format!("test -f {t}.txt"),
            &[],
        );
    }
    let out = q.run(&["--usd-cap", "1"]);
    assert_code(&out, 24, "orbit queue run under a cap");
    let o = text(&out);
    // t1 starts with nothing known ($0 estimated), t2 at t1's $0.40 with $0.60 left; then
    // $0.20 is left, less than the engine's mean of $0.40: t3 and t4 never start.
    let s = q.status();
    let status = |t: &str| {
        s["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == t)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status("t1"), "done", "{o}");
    assert_eq!(status("t2"), "done", "{o}");
    assert_eq!(status("t3"), "ready", "{o}");
    assert_eq!(status("t4"), "ready", "{o}");
    assert!(!q.repo.join(".orbit/t3-a1").exists());
    assert!(!q.repo.join(".orbit/t4-a1").exists());
    assert!(
        o.contains("t3: not started: the queue's budget (--usd-cap 1) has $0.2 left, and an attempt on custom "),
        "{o}"
    );
    assert!(o.contains("is estimated at $0.4"), "{o}");
    // Each attempt's loop got the queue's remainder as its own cap.
    let cap_of = |l: &str| q.repo.read(&format!(".orbit/{l}/loop.toml"));
    assert!(cap_of("t2-a1").contains("0.6"), "{}", cap_of("t2-a1"));
    assert_eq!(s["tasks"][0]["cost_microusd"], 400000);
    assert_eq!(s["spent_microusd"], 800000);
    assert_eq!(s["spent_usd"], "0.8");
    // A higher cap takes the rest.
    let out = q.run(&["--usd-cap", "5"]);
    assert_code(&out, 0, "orbit queue run under a higher cap");
}

#[test]
fn once_with_every_ready_task_held_by_the_usd_cap_exits_24_not_10() {
    let q = queue(MAKE_OWN_FILE);
    // Each attempt is estimated at its own cap, $0.50: more than the queue's $0.10.
    for t in ["c1", "c2"] {
        q.add(
            t,
            &format!("Write {t}.txt"),
            &format!("test -f {t}.txt"),
            &["--usd-cap", "0.50"],
        );
    }
    let out = q.run(&["--once", "--usd-cap", "0.10"]);
    let o = text(&out);
    // The cap really held both: neither started.
    assert!(
        o.contains("c1: not started: the queue's budget (--usd-cap 0.1)"),
        "{o}"
    );
    assert!(
        o.contains("c2: not started: the queue's budget (--usd-cap 0.1)"),
        "{o}"
    );
    assert!(!q.repo.join(".orbit/c1-a1").exists());
    // Another tick could start nothing: not "tasks still to run" (10) but "nothing left
    // to run" (24), as without --once.
    assert_code(
        &out,
        24,
        "orbit queue run --once under a cap too small for any task",
    );
    assert!(o.contains("nothing left to run"), "{o}");
}

#[test]
fn a_rate_limit_of_one_task_stops_a_running_attempt_on_the_same_engine_until_the_reset() {
    // b starts and works on (its agent waits for a release that never comes); a, on the same
    // engine, waits until b runs, then meets the provider's limit until RESUME (20 s on).
    // b's agent says when it is stopped (TERM); its second call, after the reset, finishes.
    let q = queue(
        r#"echo "$task $(date +%s)" >> "$REC/calls"
case $task in
a)
  [[ -e $REC/limited ]] || { wait_for test -e "$REC/b-running"; echo $(( $(date +%s) + 20 )) > "$REC/limited"; }
  resume=$(<"$REC/limited")
  if (( $(date +%s) < resume )); then echo "Error: rate limit reached, resets |$resume" >&2; exit 1; fi ;;
b)
  if [[ ! -e $REC/b-running ]]; then
    trap 'echo "b-term $(date +%s)" >> "$REC/calls"; exit 143' TERM
    touch "$REC/b-running"
    wait_for test -e "$REC/never"
  fi ;;
esac
echo "$task" > "$task.txt"; claim_done"#,
    );
    q.add("a", "Write a.txt", "test -f a.txt", &["--priority", "10"]);
    q.add("b", "Write b.txt", "test -f b.txt", &["--priority", "5"]);
    let out = q.run(&["--jobs", "2"]);
    let o = text(&out);
    assert_code(&out, 0, "orbit queue run --jobs 2");
    let resume: u64 = fs::read_to_string(q.rec().join("limited"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let calls = calls(q.rec());
    // b's loop in its own words, for a failure below to be read.
    let b_loop = q.repo.join(".orbit/b-a1");
    let o = format!(
        "{o}\n--- b's runner.log\n{}\n--- b's progress.md\n{}",
        fs::read_to_string(b_loop.join("runner.log")).unwrap_or_default(),
        fs::read_to_string(b_loop.join("progress.md")).unwrap_or_default()
    );
    // The limit was met while b's attempt ran: b's first call came before it.
    let b_calls: Vec<u64> = calls
        .iter()
        .filter(|(t, _)| t == "b")
        .map(|(_, at)| *at)
        .collect();
    assert!(b_calls[0] < resume, "{calls:?}\n{o}");
    // b's running attempt was stopped before the reset, and no agent of b ran until then.
    let term = calls
        .iter()
        .find(|(t, _)| t == "b-term")
        .map(|(_, at)| *at)
        .unwrap_or_else(|| panic!("b's running agent was never stopped: {calls:?}\n{o}"));
    assert!(term < resume, "{calls:?}\n{o}");
    assert_eq!(b_calls.len(), 2, "{calls:?}\n{o}");
    assert!(b_calls[1] >= resume, "{calls:?}\n{o}");
    assert!(
        o.contains("b: stopped until the rate limit of custom "),
        "{o}"
    );
    // Stopped, then resumed: the same loop, no failed attempt.
    let b = q.task("b");
    assert!(b.contains("**Status:** done"), "{b}");
    assert!(b.contains("**Attempts:** 0"), "{b}");
    assert!(!b.contains("## Attempt"), "{b}");
    assert!(!q.repo.join(".orbit/b-a2").exists());
    assert!(q.task("a").contains("**Status:** done"));
}
