//! The queue's section of the overview: for each repository of the served loops that has an
//! `orbit queue`, its tasks with their status, attempts, spend, last verdict and a link to
//! the page of each task's current loop (the running attempt's, else the last one's) when
//! the server serves that loop, sent again by the overview's feed whenever it changes (live.rs).
//! Every value is escaped: a task file is hand-editable.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use super::App;
use crate::queue::store::Queue;
use crate::report::esc;

/// The queues of the served loops' repositories (a loop's `.orbit/` holding `queue/`).
fn queues(app: &App) -> Vec<Queue> {
    let dirs: BTreeSet<PathBuf> = app
        .loops
        .iter()
        .filter_map(|l| l.dir.parent().map(|p| p.join("queue")))
        .filter(|q| q.join("queue.json").is_file())
        .collect();
    dirs.into_iter()
        .filter_map(|dir| {
            let repo = dir.parent()?.parent()?.to_path_buf();
            Some(Queue { repo, dir })
        })
        .collect()
}

/// The link to the page of the loop at `rel` (relative to the repository), if served.
fn loop_link(app: &App, q: &Queue, rel: &str) -> String {
    let want = std::fs::canonicalize(q.repo.join(rel)).ok();
    match app.loops.iter().position(|l| Some(&l.dir) == want.as_ref()) {
        Some(i) => format!("<a href=\"/loop/{i}\">{}</a>", esc(rel)),
        None => format!(
            "{} <span class=\"why\">(not served: started after orbit serve)</span>",
            esc(rel)
        ),
    }
}

/// The section: a heading and a table per queue; empty when no served loop has one.
pub fn section(app: &App) -> String {
    let mut h = String::new();
    for q in queues(app) {
        let Ok(j) = crate::queue::status::json(&q) else {
            continue;
        };
        let s = |v: &serde_json::Value| v.as_str().unwrap_or("-").to_string();
        let _ = write!(
            h,
            "<h2>Queue {} <span class=\"count\">integration branch {}, spent ${}</span></h2>\n<table class=\"overview queue\"><thead><tr><th>task</th><th>status</th><th>attempts</th><th>spend</th><th>current loop</th><th>last verdict</th></tr></thead><tbody>",
            esc(&s(&j["queue"])),
            esc(&s(&j["integration_branch"])),
            esc(&s(&j["spent_usd"]))
        );
        for t in j["tasks"].as_array().cloned().unwrap_or_default() {
            let current = t["running_loop"].as_str().map(str::to_string).or_else(|| {
                t["branch"]
                    .as_str()
                    .and_then(|b| b.strip_prefix("orbit/"))
                    .map(|l| format!(".orbit/{l}"))
            });
            let status = t["status"]
                .as_str()
                .map_or("does not parse".to_string(), str::to_string);
            let verdict = t["error"]
                .as_str()
                .or(t["reason"].as_str())
                .or(t["last_verdict"].as_str())
                .unwrap_or("-");
            let _ = write!(
                h,
                "<tr data-task=\"{name}\" data-status=\"{status}\"><td>{name}</td><td>{status}</td><td>{att}/{max}</td><td>${cost}</td><td>{link}</td><td>{verdict}</td></tr>",
                name = esc(&s(&t["name"])),
                status = esc(&status),
                att = t["attempts"].as_u64().unwrap_or(0),
                max = t["max_attempts"].as_u64().unwrap_or(0),
                cost = esc(&s(&t["cost_usd"])),
                link = current.map_or("-".to_string(), |rel| loop_link(app, &q, &rel)),
                verdict = esc(verdict),
            );
        }
        h.push_str("</tbody></table>\n");
    }
    h
}
