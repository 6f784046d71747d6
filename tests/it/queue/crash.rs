//! A `kill -9` of `orbit queue run` at each step of a night: the poller kills itself with
//! SIGKILL where the tests' hook (`ORBIT_QUEUE_KILL_AT`) names, its loops left as a kill of
//! it alone leaves them, and a rerun resumes with nothing lost: no task lost, the agent run
//! once, the attempt and its spend counted once, one merge on the integration branch.

use std::fs;
use std::time::Duration;

use super::queue;
use crate::support::*;

/// One night killed at `point`, then run again to its end.
fn killed_at(point: &str) {
    // The agent counts its runs and reports $0.10 each.
    let q = queue(
        r#"echo "$task" >> "$REC/runs"
echo 0.10 > "$ORBIT_COST_FILE"
echo "$task" > "$task.txt"; claim_done"#,
    );
    q.add("t", "Write t.txt", "test -f t.txt", &[]);
    let main = q.repo.git(&["rev-parse", "main"]);
    let mut cmd = q.run_cmd(&[]);
    cmd.env("ORBIT_QUEUE_KILL_AT", point);
    let out = run_bounded(cmd, Duration::from_secs(300));
    // It died at the point, by SIGKILL.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{point}: {}", text(&out));
    // A loop the dead runner spawned runs on alone; the rerun waits for it.
    let out = q.run(&[]);
    assert_code(&out, 0, &format!("the rerun after a kill at {point}"));
    let o = text(&out);
    let file = q.task("t");
    assert!(file.contains("**Status:** done"), "{point}: {file}\n{o}");
    assert!(file.contains("**Attempts:** 0"), "{point}: {file}\n{o}");
    assert!(!file.contains("## Attempt"), "{point}: {file}\n{o}");
    // The agent ran once: no attempt made twice, none lost.
    assert_eq!(
        fs::read_to_string(q.rec().join("runs")).unwrap_or_default(),
        "t\n",
        "{point}\n{o}"
    );
    assert!(q.repo.join(".orbit/t-a1").exists(), "{point}");
    assert!(!q.repo.join(".orbit/t-a2").exists(), "{point}\n{o}");
    // Its spend and its attempt counted once.
    let j = q.task_json("t");
    assert_eq!(j["cost_microusd"], 100000, "{point}: {j}");
    let state: serde_json::Value =
        serde_json::from_str(&q.repo.read(".orbit/queue/queue.json")).unwrap();
    let spend = state["spend"].as_object().unwrap();
    assert_eq!(spend.len(), 1, "{point}: {state}");
    for (_, s) in spend {
        assert_eq!(s["attempts"], 1, "{point}: {state}");
        assert_eq!(s["microusd"], 100000, "{point}: {state}");
    }
    assert!(state["tasks"]["t"]["running"].is_null(), "{point}: {state}");
    assert!(
        state["tasks"]["t"].get("pending").is_none(),
        "{point}: {state}"
    );
    // One merge on the integration branch, the task's, and the user's branch unmoved.
    let merged = j["merged_commit"].as_str().unwrap().to_string();
    let chain = q.repo.git(&[
        "rev-list",
        "--first-parent",
        "orbit/queue/main",
        "--not",
        "main",
    ]);
    assert_eq!(chain.trim(), merged, "{point}\n{o}");
    assert_eq!(q.repo.git(&["rev-parse", "main"]), main, "{point}");
    assert_eq!(q.on_integration("t.txt").as_deref(), Some("t\n"), "{point}");
    // The integration branch is what the queue recorded: merge --queue takes it.
    let out = q.repo.orbit(&["merge", "--queue"]);
    assert_ok(
        &out,
        &format!("orbit merge --queue after a kill at {point}"),
    );
}

#[test]
fn a_kill_9_of_queue_run_at_each_step_of_a_night_loses_nothing() {
    for point in orbit::queue::KILL_POINTS {
        killed_at(point);
    }
}
