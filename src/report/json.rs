//! `orbit report --json`: the report's facts as one JSON object, for scripts and
//! dashboards. The names are the contract's (statuses, stop reasons, verdicts, cost kinds);
//! money is integer micro-dollars; a cost nobody reported is `null` with `cost_kind`
//! `unknown`, never 0.

use serde::Serialize;

use super::{CandidateRow, Cost, Facts, Row, Selection};

/// The report, as `orbit report --json` prints it.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    pub name: &'a str,
    pub goal: &'a str,
    pub verdict: &'static str,
    pub status: &'static str,
    pub stop_reason: &'static str,
    pub iterations: u64,
    pub max_iterations: u64,
    pub spend_microusd: u64,
    /// Agent runs that reported no cost (the spend leaves them out).
    pub unknown_cost_runs: usize,
    /// The tokens the agent runs used, as their engines counted them (absent when no
    /// run's engine counts them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
    pub usd_cap_microusd: Option<u64>,
    pub branch: Option<&'a str>,
    pub origin_branch: Option<&'a str>,
    pub workspace: Option<&'a str>,
    pub sandbox: Option<&'static str>,
    /// The envelope's digest (`null` without one) and the hand-off's verdict as `orbit
    /// verify` finds it without `--rerun`: `verified`, or its failure code (`null` when the
    /// loop is not DONE and has no envelope).
    pub envelope_digest: Option<&'a str>,
    pub envelope_verdict: Option<&'static str>,
    /// Why, in words (`null` with the verdict).
    pub envelope_why: Option<&'a str>,
    /// `orbit adequacy`'s last measure of the branch head (`null` without one): its one
    /// line, the hunks no check needs and the mutants that survived.
    pub adequacy: Option<String>,
    pub adequacy_unneeded: Vec<String>,
    pub adequacy_survivors: Vec<String>,
    pub next: &'a str,
    pub next_why: &'a str,
    /// Where the work is and how to take it, in order: each step's `what` and `command`
    /// (a review of what the branch changes in orbit.toml comes before the merge).
    pub work: Vec<JsonStep<'a>>,
    /// Iterations before the first one listed (the report lists the latest ones).
    pub earlier_iterations: u64,
    pub rows: Vec<JsonRow<'a>>,
    /// What survivor selection found, over the listed fan-out iterations (`null` without a
    /// fan-out).
    pub selection: Option<Selection>,
}

/// One step of taking the work.
#[derive(Debug, Serialize)]
pub struct JsonStep<'a> {
    pub what: &'a str,
    pub command: &'a str,
}

/// One iteration of the report.
#[derive(Debug, Serialize)]
pub struct JsonRow<'a> {
    pub iteration: u64,
    pub started_at: Option<u64>,
    pub wall_secs: Option<u64>,
    pub agent_secs: Option<u64>,
    pub verdict: &'a str,
    pub attempts: Option<u64>,
    pub agent_outcome: &'a str,
    pub agent_exit: &'a str,
    pub verify: Option<&'static str>,
    pub failing: &'a [String],
    pub changed_files: Option<u64>,
    /// `null` when the iteration's cost is unknown or not recorded.
    pub cost_microusd: Option<u64>,
    /// `reported`, `estimated`, `unknown`, or `null` when not recorded.
    pub cost_kind: Option<&'static str>,
    pub done_claim: bool,
    pub done_verdict: &'a str,
    pub stop_reason: &'a str,
    pub summary: &'a str,
    pub commit: &'a str,
    pub candidates: &'a [CandidateRow],
    /// The `HOST:PORT` the sandbox's network allowlist refused to the iteration's runs.
    pub net_refused: &'a [String],
}

impl<'a> JsonRow<'a> {
    fn of(r: &'a Row) -> Self {
        let (cost_microusd, cost_kind) = match r.cost {
            Cost::Known(m, k) => (Some(m), Some(k.as_str())),
            Cost::Unknown => (None, Some(crate::contract::CostKind::Unknown.as_str())),
            Cost::NotRecorded => (None, None),
        };
        JsonRow {
            iteration: r.iteration,
            started_at: r.started_at,
            wall_secs: r.wall_secs,
            agent_secs: r.agent_secs,
            verdict: &r.verdict,
            attempts: r.attempts,
            agent_outcome: &r.agent_outcome,
            agent_exit: &r.agent_exit,
            verify: r.verify.map(|v| v.as_str()),
            failing: &r.failing,
            changed_files: r.changed,
            cost_microusd,
            cost_kind,
            done_claim: r.done_claim,
            done_verdict: &r.done_verdict,
            stop_reason: &r.stop_reason,
            summary: &r.summary,
            commit: &r.commit,
            candidates: &r.candidates,
            net_refused: &r.net_refused,
        }
    }
}

/// The report's facts as pretty-printed JSON (a newline at the end).
pub fn render_json(f: &Facts) -> String {
    let report = JsonReport {
        name: &f.name,
        goal: &f.goal,
        verdict: f.verdict.as_str(),
        status: f.status.as_str(),
        stop_reason: f.stop_reason.as_str(),
        iterations: f.iterations,
        max_iterations: f.max_iterations,
        spend_microusd: f.spend,
        tokens_in: f.tokens.map(|t| t.0),
        tokens_out: f.tokens.map(|t| t.1),
        unknown_cost_runs: f.unknown_runs,
        usd_cap_microusd: f.cap,
        branch: f.branch.as_ref().map(|b| b.0.as_str()),
        origin_branch: f.branch.as_ref().map(|b| b.1.as_str()),
        workspace: f.workspace.as_deref(),
        sandbox: f.sandbox,
        envelope_digest: f.envelope.as_ref().and_then(|e| e.digest.as_deref()),
        envelope_verdict: f.envelope.as_ref().map(|e| e.verdict_word()),
        envelope_why: f.envelope.as_ref().map(|e| e.why.as_str()),
        adequacy: f.adequacy.as_ref().map(|a| a.summary()),
        adequacy_unneeded: f
            .adequacy
            .as_ref()
            .map(|a| a.unneeded())
            .unwrap_or_default(),
        adequacy_survivors: f
            .adequacy
            .as_ref()
            .map(|a| a.survivors())
            .unwrap_or_default(),
        next: &f.next,
        next_why: &f.next_why,
        work: f
            .work
            .iter()
            .map(|(what, command)| JsonStep { what, command })
            .collect(),
        earlier_iterations: f.earlier,
        rows: f.rows.iter().map(JsonRow::of).collect(),
        selection: f.selection(),
    };
    let mut text =
        serde_json::to_string_pretty(&report).expect("the report's facts serialise as JSON");
    text.push('\n');
    text
}
