//! `orbit report --queue`: a night of the queue, in markdown and JSON.

use super::{Q, queue};
use crate::support::*;

/// A night: `ok` done, `bad` failed (its one attempt never writes its file), `dep` blocked
/// behind it; every agent run reports $0.25.
pub(crate) fn a_night() -> Q {
    let q = queue(
        r#"echo 0.25 > "$ORBIT_COST_FILE"
if [[ $task == ok ]]; then echo ok > ok.txt; claim_done; else echo "no luck" > "luck-$n.txt"; fi"#,
    );
    q.add("ok", "Write ok.txt", "test -f ok.txt", &[]);
    q.add(
        "bad",
        "Write bad.txt",
        "test -f bad.txt",
        &["--max-attempts", "1", "--max-iterations", "1"],
    );
    q.add("dep", "After bad", "true", &["--after", "bad"]);
    assert_code(&q.run(&[]), 24, "orbit queue run");
    q
}

#[test]
fn report_queue_shows_done_failed_blocked_spend_and_the_next_step() {
    let q = a_night();
    let merged = q.task_json("ok")["merged_commit"]
        .as_str()
        .unwrap()
        .to_string();
    let out = q.repo.orbit(&["report", "--queue"]);
    assert_ok(&out, "orbit report --queue");
    let md = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        md.contains("# orbit report: queue main (integration branch orbit/queue/main)"),
        "{md}"
    );
    assert!(md.contains("- done: 1, failed: 1, blocked: 1"), "{md}");
    assert!(
        md.contains(&format!("- ok: merged {merged} (attempt 1)")),
        "{md}"
    );
    assert!(md.contains("- bad (1 attempt(s)):"), "{md}");
    assert!(
        md.contains("## Attempt 1 (final) — budget exhausted"),
        "{md}"
    );
    assert!(
        md.contains("the loop stopped BLOCKED (max_iterations)"),
        "{md}"
    );
    assert!(md.contains("- dep: bad failed"), "{md}");
    assert!(md.contains("| ok | 0.25 |"), "{md}");
    assert!(md.contains("| bad | 0.25 |"), "{md}");
    assert!(md.contains("| **total** | 0.5 |"), "{md}");
    assert!(md.contains("- `orbit merge --queue`"), "{md}");
    let out = q.repo.orbit(&["report", "--queue", "--json"]);
    assert_ok(&out, "orbit report --queue --json");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Its members are the contract's, no more, no fewer.
    let mut keys: Vec<&str> = j.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    let mut named: Vec<&str> = orbit::contract::queue::QUEUE_REPORT_FIELDS
        .iter()
        .map(|(k, _)| *k)
        .collect();
    keys.sort();
    named.sort();
    assert_eq!(keys, named);
    assert_eq!(j["done"][0]["name"], "ok");
    assert_eq!(j["done"][0]["merged_commit"], merged.as_str());
    assert_eq!(j["failed"][0]["name"], "bad");
    assert!(
        j["failed"][0]["why"]
            .as_str()
            .unwrap()
            .starts_with("## Attempt 1 (final)"),
        "{j}"
    );
    assert_eq!(j["blocked"][0]["reason"], "bad failed");
    assert_eq!(j["spend"]["total_microusd"], 500000);
    assert_eq!(j["next"][0], "orbit merge --queue");
    // Once merged home, the report no longer asks for it.
    assert_ok(&q.repo.orbit(&["merge", "--queue"]), "orbit merge --queue");
    let out = q.repo.orbit(&["report", "--queue", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !j["next"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "orbit merge --queue"),
        "{j}"
    );
}
