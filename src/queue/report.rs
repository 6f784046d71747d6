//! `orbit report --queue`: a night of the queue in markdown (or `--json`): the tasks done
//! (with their merged commits), failed (with why: the first lines of their last failure
//! section), blocked (with the task in the way), the others, the spend per task and in all,
//! and what to run next.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::store::Queue;
use crate::contract::queue::TaskStatus;
use crate::envelope::git;
use crate::error::Result;

/// How many lines of a failed task's last failure section the report quotes.
pub const WHY_LINES: usize = 3;

/// The first lines of a task's last `## Attempt` section: its heading and its reason.
pub fn last_failure(history: &str) -> Option<String> {
    let at = history
        .rfind("\n## Attempt")
        .map(|i| i + 1)
        .or_else(|| history.starts_with("## Attempt").then_some(0))?;
    let lines: Vec<&str> = history[at..]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take_while(|l| !l.starts_with("```"))
        .take(WHY_LINES)
        .collect();
    Some(lines.join("\n"))
}

/// The queue's report as JSON (docs/queue.md lists its fields).
pub fn json(q: &Queue) -> Result<Value> {
    let st = q.load_state()?;
    let status = super::status::json(q)?;
    let found = q.tasks()?;
    let mut done = Vec::new();
    let mut failed = Vec::new();
    let mut blocked = Vec::new();
    let mut other = Vec::new();
    let mut spend = Vec::new();
    let mut total = 0u64;
    for f in &found {
        let ts = st.tasks.get(&f.name).cloned().unwrap_or_default();
        total += ts.cost_microusd;
        spend.push(json!({
            "name": f.name,
            "cost_usd": crate::goal::format_usd(ts.cost_microusd),
            "cost_microusd": ts.cost_microusd,
        }));
        let t = match &f.task {
            Ok(t) => t,
            Err(e) => {
                other.push(json!({"name": f.name, "status": Value::Null,
                    "why": format!("does not parse: line {}: {}", e.line, e.reason)}));
                continue;
            }
        };
        match t.status {
            TaskStatus::Done => done.push(json!({
                "name": f.name,
                "merged_commit": t.merged.clone().or(ts.merged_commit.clone()),
                "verified_on": t.verified_on.clone().or(ts.verified_on.clone()),
                "attempt": t.attempts + 1,
            })),
            TaskStatus::Failed => failed.push(json!({
                "name": f.name,
                "attempts": t.attempts,
                "why": last_failure(&t.history).or(t.reason.clone()),
            })),
            TaskStatus::Blocked => blocked.push(json!({
                "name": f.name,
                "reason": t.reason,
            })),
            s => other.push(json!({
                "name": f.name,
                "status": s.as_str(),
                "why": ts.running.as_ref().map(|r| format!("attempt {} running in {}", r.attempt, r.loop_dir)),
            })),
        }
    }
    Ok(json!({
        "queue": st.name,
        "integration_branch": st.integration_branch,
        "done": done,
        "failed": failed,
        "blocked": blocked,
        "other": other,
        "spend": {"tasks": spend, "total_usd": crate::goal::format_usd(total), "total_microusd": total},
        "paused": status["paused"],
        "next": next_steps(q, &st, !done.is_empty(), !failed.is_empty(), !other.is_empty()),
    }))
}

/// What to run next: `orbit merge --queue` while the integration branch holds work its
/// branch does not; raising a failed task's attempts; the queue again for what is left.
fn next_steps(
    q: &Queue,
    st: &super::store::State,
    any_done: bool,
    any_failed: bool,
    any_left: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(b), Some(home)) = (&st.integration_branch, &st.name) {
        let merged_home = git(&q.repo, &["merge-base", "--is-ancestor", b, home]).is_some();
        if any_done && !merged_home {
            out.push("orbit merge --queue".to_string());
        }
    }
    if any_failed {
        out.push(
            "for a failed task: read its ## Attempt sections, raise **Max-Attempts:** and set **Status:** ready, then orbit queue run".into(),
        );
    }
    if any_left {
        out.push("orbit queue run".into());
    }
    out
}

/// The report as markdown.
pub fn markdown(j: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("-").to_string();
    let mut out = format!(
        "# orbit report: queue {} (integration branch {})\n\n",
        s(&j["queue"]),
        s(&j["integration_branch"])
    );
    let list = |k: &str| j[k].as_array().cloned().unwrap_or_default();
    let (done, failed, blocked, other) =
        (list("done"), list("failed"), list("blocked"), list("other"));
    let _ = writeln!(
        out,
        "- done: {}, failed: {}, blocked: {}, other: {}\n- spend: ${}\n",
        done.len(),
        failed.len(),
        blocked.len(),
        other.len(),
        s(&j["spend"]["total_usd"])
    );
    let _ = writeln!(out, "## Done\n");
    if done.is_empty() {
        let _ = writeln!(out, "(none)");
    }
    for t in &done {
        match t["verified_on"]
            .as_str()
            .filter(|_| t["merged_commit"].is_null())
        {
            Some(v) => writeln!(
                out,
                "- {}: met already on {v}, no merge of its own (attempt {})",
                s(&t["name"]),
                t["attempt"]
            ),
            None => writeln!(
                out,
                "- {}: merged {} (attempt {})",
                s(&t["name"]),
                s(&t["merged_commit"]),
                t["attempt"]
            ),
        }
        .ok();
    }
    let _ = writeln!(out, "\n## Failed\n");
    if failed.is_empty() {
        let _ = writeln!(out, "(none)");
    }
    for t in &failed {
        let _ = writeln!(
            out,
            "- {} ({} attempt(s)):\n\n  {}\n",
            s(&t["name"]),
            t["attempts"],
            s(&t["why"]).replace('\n', "\n  ")
        );
    }
    let _ = writeln!(out, "\n## Blocked\n");
    if blocked.is_empty() {
        let _ = writeln!(out, "(none)");
    }
    for t in &blocked {
        let _ = writeln!(out, "- {}: {}", s(&t["name"]), s(&t["reason"]));
    }
    if !other.is_empty() {
        let _ = writeln!(out, "\n## Not finished\n");
        for t in &other {
            let _ = writeln!(
                out,
                "- {}: {}{}",
                s(&t["name"]),
                t["status"].as_str().unwrap_or("cannot run"),
                t["why"]
                    .as_str()
                    .map_or(String::new(), |w| format!(" ({w})"))
            );
        }
    }
    let _ = writeln!(out, "\n## Spend\n\n| Task | USD |\n|---|---|");
    for t in j["spend"]["tasks"].as_array().cloned().unwrap_or_default() {
        let _ = writeln!(out, "| {} | {} |", s(&t["name"]), s(&t["cost_usd"]));
    }
    let _ = writeln!(out, "| **total** | {} |", s(&j["spend"]["total_usd"]));
    let _ = writeln!(out, "\n## Next\n");
    let next = j["next"].as_array().cloned().unwrap_or_default();
    if next.is_empty() {
        let _ = writeln!(out, "Nothing: every task is done and merged.");
    }
    for n in next {
        let _ = writeln!(out, "- `{}`", s(&n));
    }
    out
}

/// `orbit report --queue [--json] [--output FILE]`: the text.
pub fn text(as_json: bool) -> Result<String> {
    let q = Queue::here()?;
    let j = json(&q)?;
    Ok(if as_json {
        format!("{j}\n")
    } else {
        markdown(&j)
    })
}
