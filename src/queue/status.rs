//! `orbit queue status [--json]`: each task's status, attempts, last verdict, cost, branch
//! and merged commit. The JSON (docs/queue.md lists its fields) is for programs.

use serde_json::{Value, json};

use super::store::Queue;
use crate::cli::QueueStatusArgs;
use crate::error::Result;

/// The queue as JSON: `queue`, `integration_branch`, `tasks` (one object per task file).
pub fn json(q: &Queue) -> Result<Value> {
    let st = q.load_state()?;
    let mut tasks = Vec::new();
    let startable = super::fleet::startable(q)?;
    for f in q.tasks()? {
        let ts = st.tasks.get(&f.name).cloned().unwrap_or_default();
        let mut o = json!({
            "name": f.name,
            "file": f.path.strip_prefix(&q.repo).unwrap_or(&f.path).display().to_string(),
            "cost_usd": crate::goal::format_usd(ts.cost_microusd),
            "cost_microusd": ts.cost_microusd,
            "branch": ts.branch,
            "running_loop": ts.running.as_ref().map(|r| r.loop_dir.clone()),
            "last_verdict": ts.last_verdict,
            "startable": startable.contains(&f.name),
        });
        match &f.task {
            Ok(t) => {
                o["status"] = json!(t.status.as_str());
                o["attempts"] = json!(t.attempts);
                o["max_attempts"] = json!(t.max_attempts);
                o["priority"] = json!(t.priority);
                o["after"] = json!(t.after);
                o["verifier"] = json!(t.verifier);
                o["reason"] = json!(t.reason);
                o["merged_commit"] = json!(t.merged.clone().or(ts.merged_commit));
                o["verified_on"] = json!(t.verified_on.clone().or(ts.verified_on));
                o["error"] = Value::Null;
            }
            Err(e) => {
                o["status"] = Value::Null;
                o["error"] = json!(format!("line {}: {}", e.line, e.reason));
            }
        }
        tasks.push(o);
    }
    let now = crate::fsx::now_epoch();
    let paused: serde_json::Map<String, Value> = st
        .paused
        .iter()
        .filter(|(_, at)| **at > now)
        .map(|(e, at)| (e.clone(), json!(at)))
        .collect();
    let spent = super::limits::committed(q, &st);
    Ok(json!({
        "queue": st.name,
        "integration_branch": st.integration_branch,
        "paused": paused,
        "spent_usd": crate::goal::format_usd(spent),
        "spent_microusd": spent,
        "tasks": tasks,
    }))
}

/// `orbit queue status`.
pub fn run(args: &QueueStatusArgs) -> Result<u8> {
    let q = Queue::here()?;
    let j = json(&q)?;
    if args.json {
        println!("{j}");
        return Ok(0);
    }
    println!(
        "queue {} (integration branch {})",
        j["queue"].as_str().unwrap_or("-"),
        j["integration_branch"]
            .as_str()
            .unwrap_or("made at the first orbit queue run")
    );
    let tasks = j["tasks"].as_array().cloned().unwrap_or_default();
    if tasks.is_empty() {
        println!("  no task: orbit queue add \"GOAL\" --verify CMD adds one");
    }
    for t in tasks {
        let s = |k: &str| t[k].as_str().unwrap_or("-").to_string();
        if let Some(err) = t["error"].as_str() {
            println!("  {:<32} does not parse: {err}", s("name"));
            continue;
        }
        let merged = match (t["merged_commit"].as_str(), t["verified_on"].as_str()) {
            (Some(c), _) => c[..c.len().min(12)].to_string(),
            (None, Some(v)) => format!("none (met at {})", &v[..v.len().min(12)]),
            (None, None) => "-".into(),
        };
        println!(
            "  {:<32} {:<8} {}/{}  ${}  branch {}  merged {}  last: {}",
            s("name"),
            s("status"),
            t["attempts"],
            t["max_attempts"],
            s("cost_usd"),
            s("branch"),
            merged,
            t["reason"]
                .as_str()
                .or(t["last_verdict"].as_str())
                .unwrap_or("-"),
        );
    }
    Ok(0)
}
