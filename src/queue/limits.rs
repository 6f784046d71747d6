//! The limits the queue's tasks share: an engine's rate limit (one task's loop paused by it
//! pauses the engine for every task: no attempt starts on it before the reset, and the
//! paused loop is resumed then, not counted as an attempt) and the queue's spend cap
//! (`orbit queue run --usd-cap`: no attempt starts that what is left cannot cover at the
//! engine's estimate).

use std::collections::BTreeMap;

pub use super::store::EngineSpend;
use super::store::{Queue, State};
use super::task::Task;

/// The engine a task's attempts run on, as a key the queue groups them by: the engine's
/// name (`Engine:`, else the project's default, else claude); a custom engine with its
/// command (two custom commands are two providers).
pub fn engine_key(q: &Queue, task: &Task) -> String {
    let defaults = crate::init::ProjectDefaults::load(&q.repo).ok();
    let name = task
        .engine
        .clone()
        .or_else(|| defaults.as_ref().and_then(|d| d.engine.clone()))
        .unwrap_or_else(|| "claude".into());
    if name == "custom" {
        let exec = task
            .exec
            .clone()
            .or_else(|| defaults.and_then(|d| d.exec))
            .unwrap_or_default();
        format!("custom {exec}")
    } else {
        name
    }
}

/// The engines rate-limited now, with when each lifts; pauses that lifted are dropped.
pub fn paused_now(st: &mut State, now: u64) -> BTreeMap<String, u64> {
    st.paused.retain(|_, at| *at > now);
    st.paused.clone()
}

/// Records that `engine` is rate-limited until `at` (the later of two pauses holds).
pub fn pause(st: &mut State, engine: &str, at: u64) -> bool {
    let e = st.paused.entry(engine.to_string()).or_insert(0);
    let later = at > *e;
    if later {
        *e = at;
    }
    later
}

/// Adds a finished attempt's spend to its engine's record.
pub fn spent(st: &mut State, engine: &str, microusd: u64) {
    let s = st.spend.entry(engine.to_string()).or_default();
    s.attempts += 1;
    s.microusd += microusd;
}

/// The estimate of an attempt of `task` on `engine`: the mean spend of the attempts on
/// that engine that finished, else the task's own `Usd-Cap` (what its loop may spend at
/// most), else nothing known (0).
pub fn estimate(st: &State, engine: &str, task: &Task) -> u64 {
    match st.spend.get(engine) {
        Some(s) if s.attempts > 0 => s.microusd / s.attempts,
        _ => task
            .usd_cap
            .as_deref()
            .and_then(|c| crate::goal::parse_usd("Usd-Cap", c).ok())
            .unwrap_or(0),
    }
}

/// What the queue has spent or holds for: every finished attempt's spend, and for each
/// running attempt the more of what its loop has spent and the estimate it started with.
pub fn committed(q: &Queue, st: &State) -> u64 {
    st.tasks
        .values()
        .map(|t| {
            t.cost_microusd
                + t.running.as_ref().map_or(0, |r| {
                    let now = super::attempt::stop_of(&q.repo.join(&r.loop_dir))
                        .map_or(0, |s| s.cost_microusd);
                    now.max(r.estimate_microusd)
                })
        })
        .sum()
}

/// Why an attempt of `task` on `engine` may not start under the queue's cap `cap`, or its
/// loop's cap (the less of the task's own and what the queue has left) and its estimate.
pub fn budget(
    q: &Queue,
    st: &State,
    cap: Option<u64>,
    engine: &str,
    task: &Task,
) -> Result<(Option<u64>, u64), String> {
    let est = estimate(st, engine, task);
    let Some(cap) = cap else {
        return Ok((None, est));
    };
    let left = cap.saturating_sub(committed(q, st));
    if left == 0 || est > left {
        return Err(format!(
            "the queue's budget (--usd-cap {}) has ${} left, and an attempt on {engine} is estimated at ${}",
            crate::goal::format_usd(cap),
            crate::goal::format_usd(left),
            crate::goal::format_usd(est)
        ));
    }
    let own = task
        .usd_cap
        .as_deref()
        .and_then(|c| crate::goal::parse_usd("Usd-Cap", c).ok());
    Ok((Some(own.map_or(left, |o| o.min(left))), est))
}
