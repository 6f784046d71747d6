//! The spans of a loop, made from its journal: the loop as the workflow, each iteration,
//! each agent run, each check run, the DONE gate, the confirmation and each fan-out
//! candidate. Every time comes from the journal (second resolution), every span has a
//! path that names it for good (its kind and the `seq` of the event that opened it), so a
//! journal read twice, or read again after it grew, gives the same spans.

use crate::contract::EventName;
use crate::events::Event;
use crate::ledger::Ledger;
use crate::recover::evidence::iso_to_epoch;

/// OTLP's `SpanKind`: the loop and its steps are internal, an agent run is a call out of
/// orbit's process (the agent's CLI, which calls its provider).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal = 1,
    Client = 3,
}

/// OTLP's `Status.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCode {
    Unset = 0,
    Ok = 1,
    Error = 2,
}

/// An attribute's value, in the four kinds OTLP's `AnyValue` has that orbit uses.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
}

/// A point in a span's life: a journal event worth seeing on the timeline (an integrity
/// failure, a rate limit, the circuit breaker, a test count that dropped, a setup failure).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub time: u64,
    pub name: String,
    pub attrs: Vec<(String, Value)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// What names the span for good: `loop`, or `<kind>@<seq of its first event>`.
    pub path: String,
    pub parent: Option<String>,
    pub name: String,
    pub kind: Kind,
    /// Epoch seconds.
    pub start: u64,
    pub end: u64,
    pub attrs: Vec<(String, Value)>,
    pub events: Vec<SpanEvent>,
    pub status: StatusCode,
    pub message: String,
    /// Whether the journal has the event that ends it (a span still open ends, for now,
    /// at the journal's last event).
    pub closed: bool,
}

impl Span {
    fn new(path: String, parent: Option<&str>, name: String, kind: Kind, start: u64) -> Span {
        Span {
            path,
            parent: parent.map(str::to_string),
            name,
            kind,
            start,
            end: start,
            attrs: Vec::new(),
            events: Vec::new(),
            status: StatusCode::Unset,
            message: String::new(),
            closed: false,
        }
    }

    /// Sets `key` (replacing an earlier value).
    fn set(&mut self, key: &str, value: Value) {
        match self.attrs.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.attrs.push((key.to_string(), value)),
        }
    }

    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn error(&mut self, message: &str) {
        self.status = StatusCode::Error;
        self.message = message.to_string();
    }
}

/// What the export knows of the loop besides its journal.
#[derive(Debug, Clone, Default)]
pub struct LoopFacts {
    /// loop.toml's `name` (the directory's name where loop.toml cannot be read).
    pub name: String,
    /// loop.toml's `engine`; the journal's `loop_start` says it too.
    pub engine: String,
    /// The model the agent's command line asks for (`--model M`), when it names one.
    pub model: Option<String>,
    pub ledger: Ledger,
}

/// The GenAI provider an engine's CLI calls, where the engine decides it (the others pick
/// their provider from their own settings or the key they find).
pub fn provider_of(engine: &str) -> Option<&'static str> {
    match engine {
        "claude" => Some("anthropic"),
        "codex" => Some("openai"),
        "gemini" => Some("gcp.gemini"),
        _ => None,
    }
}

/// The model an agent's argv asks for: the word after `--model`, or `--model=M`.
pub fn model_of(argv: &[String]) -> Option<String> {
    let mut words = argv.iter();
    while let Some(w) = words.next() {
        if w == "--model" {
            return words.next().filter(|m| !m.is_empty()).cloned();
        }
        if let Some(m) = w.strip_prefix("--model=").filter(|m| !m.is_empty()) {
            return Some(m.to_string());
        }
    }
    None
}

fn micro_to_usd(micro: u64) -> Value {
    Value::Double(micro as f64 / 1_000_000.0)
}

fn str_of<'e>(e: &'e Event, key: &str) -> Option<&'e str> {
    e.value.get(key).and_then(|v| v.as_str())
}

fn u64_of(e: &Event, key: &str) -> Option<u64> {
    e.value.get(key).and_then(|v| v.as_u64())
}

/// A field as text, whatever JSON kind the runner wrote it as (`run` is `1` or `clean`).
fn text_of(e: &Event, key: &str) -> Option<String> {
    match e.value.get(key)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Whether a loop status leaves the loop needing a human (the span's status is an error).
fn status_is_error(status: &str) -> bool {
    matches!(status, "ABORTED" | "BLOCKED" | "STALLED")
}

/// The open spans of the run being read, by their index in the output.
#[derive(Default)]
struct Open {
    iteration: Option<(u64, usize)>,
    gate: Option<usize>,
    confirmation: Option<usize>,
    /// (candidate number, index) of the open iteration's candidates.
    candidates: Vec<(u64, usize)>,
}

struct Builder<'f> {
    facts: &'f LoopFacts,
    spans: Vec<Span>,
    open: Open,
    /// The time of the last event read: where the next step began.
    prev_ts: u64,
    iterations: u64,
}

const ROOT: &str = "loop";

impl<'f> Builder<'f> {
    fn path(&self, kind: &str, e: &Event) -> String {
        format!("{kind}@{}", e.seq)
    }

    fn push(&mut self, span: Span) -> usize {
        self.spans.push(span);
        self.spans.len() - 1
    }

    /// A hand-off verified by `orbit verify` (its events carry `by`): a span of its own under
    /// the loop, never a check run of an iteration.
    fn handoff_verify(&mut self, e: &Event, ts: u64, passed: bool) {
        let mut s = Span::new(
            self.path("handoff", e),
            Some(ROOT),
            "verify_handoff".into(),
            Kind::Internal,
            ts,
        );
        s.closed = true;
        for (key, attr) in [
            ("by", "orbit.handoff.by"),
            ("ref", "orbit.handoff.ref"),
            ("commit", "orbit.handoff.commit"),
            ("digest", "orbit.handoff.digest"),
        ] {
            if let Some(v) = str_of(e, key).filter(|v| !v.is_empty()) {
                s.set(attr, Value::Str(v.to_string()));
            }
        }
        if passed {
            s.status = StatusCode::Ok;
        } else {
            let code = str_of(e, "verify_failure_code").unwrap_or("verify failed");
            s.set("orbit.handoff.failure_code", Value::Str(code.to_string()));
            s.error(code);
        }
        self.push(s);
    }

    /// The innermost open span a check run belongs to: the gate, the iteration, the loop.
    fn check_parent(&self, e: &Event) -> usize {
        if let Some(g) = self.open.gate {
            return g;
        }
        match self.open.iteration {
            Some((n, i)) if n == e.iteration => i,
            _ => 0,
        }
    }

    /// The innermost open span for a timeline point.
    fn event_parent(&self) -> usize {
        self.open.iteration.map_or(0, |(_, i)| i)
    }

    fn close(&mut self, i: usize, ts: u64) {
        let s = &mut self.spans[i];
        if !s.closed {
            s.end = ts.max(s.start);
            s.closed = true;
        }
    }

    fn close_confirmation(&mut self, ts: u64, confirmed: bool, why: &str) {
        if let Some(c) = self.open.confirmation.take() {
            self.close(c, ts);
            let s = &mut self.spans[c];
            s.set("orbit.confirmed", Value::Bool(confirmed));
            if confirmed {
                s.status = StatusCode::Ok;
            } else {
                s.error(why);
            }
        }
    }

    fn close_gate(&mut self, ts: u64, verdict: &str) {
        let done = verdict == "DONE";
        self.close_confirmation(ts, done, verdict);
        if let Some(g) = self.open.gate.take() {
            self.close(g, ts);
            let s = &mut self.spans[g];
            s.set("orbit.done.verdict", Value::Str(verdict.to_string()));
            if done {
                s.status = StatusCode::Ok;
            } else {
                s.error(verdict);
            }
        }
    }

    fn close_candidates(&mut self, ts: u64) {
        for (_, c) in std::mem::take(&mut self.open.candidates) {
            self.close(c, ts);
        }
    }

    /// Closes the open iteration (and what is open inside it) at `ts`.
    fn close_iteration(&mut self, ts: u64, interrupted: bool) {
        if self.open.gate.is_some() || self.open.confirmation.is_some() {
            // The gate's own verdict never came.
            let verdict = if interrupted {
                "interrupted"
            } else {
                "no verdict"
            };
            self.close_gate(ts, verdict);
        }
        self.close_candidates(ts);
        if let Some((_, i)) = self.open.iteration.take() {
            self.close(i, ts);
            if interrupted {
                let s = &mut self.spans[i];
                s.set("orbit.interrupted", Value::Bool(true));
            }
        }
    }

    fn root(&mut self) -> &mut Span {
        &mut self.spans[0]
    }

    fn read(&mut self, e: &Event, ts: u64) {
        let Some(name) = crate::contract::EventName::parse(&e.event) else {
            return;
        };
        match name {
            EventName::LoopStart => {
                // A run that ended without its loop_stop (killed): what it left open ends
                // at its last event.
                if self.open.iteration.is_some() {
                    self.close_iteration(self.prev_ts, true);
                }
                let runs = match self.root().attr("orbit.runs") {
                    Some(Value::Int(n)) => *n + 1,
                    _ => 1,
                };
                self.root().set("orbit.runs", Value::Int(runs));
            }
            EventName::IterationStart => {
                if self.open.iteration.is_some() {
                    self.close_iteration(self.prev_ts, true);
                }
                let mut s = Span::new(
                    self.path("iteration", e),
                    Some(ROOT),
                    format!("iteration {}", e.iteration),
                    Kind::Internal,
                    ts,
                );
                s.set("orbit.iteration", Value::Int(e.iteration as i64));
                let micro = self.facts.ledger.iteration_total(e.iteration);
                if self
                    .facts
                    .ledger
                    .entries
                    .iter()
                    .any(|l| l.iteration == e.iteration)
                {
                    s.set("orbit.cost_usd", micro_to_usd(micro));
                }
                let i = self.push(s);
                self.open.iteration = Some((e.iteration, i));
                self.iterations += 1;
            }
            EventName::AgentExit => self.agent_run(e, ts),
            EventName::VerifyPass | EventName::VerifyFail if str_of(e, "by").is_some() => {
                self.handoff_verify(e, ts, name == EventName::VerifyPass)
            }
            EventName::VerifyPass | EventName::VerifyFail => {
                let passed = name == EventName::VerifyPass;
                let run = text_of(e, "run").unwrap_or_default();
                let parent = self.check_parent(e);
                let start = self.prev_ts.max(self.spans[parent].start);
                let mut s = Span::new(
                    self.path("verify", e),
                    Some(&self.spans[parent].path.clone()),
                    format!("verify {run}"),
                    Kind::Internal,
                    start,
                );
                s.end = ts.max(start);
                s.closed = true;
                s.set("orbit.check.run", Value::Str(run));
                s.set("orbit.check.passed", Value::Bool(passed));
                for (key, attr) in [
                    ("failing", "orbit.check.failing"),
                    ("passing", "orbit.check.passing"),
                    ("code", "orbit.check.code"),
                ] {
                    if let Some(v) = str_of(e, key).filter(|v| !v.is_empty()) {
                        s.set(attr, Value::Str(v.to_string()));
                    }
                }
                if let Some(streak) = u64_of(e, "streak") {
                    s.set("orbit.verify.streak", Value::Int(streak as i64));
                }
                // The red gate wants the checks to fail on the base tree: its run is an
                // error only where the runner gave it a finding's code.
                let red_gate = e.iteration == 0 && str_of(e, "run") == Some("red_gate");
                let code = str_of(e, "code").filter(|c| !c.is_empty());
                if red_gate {
                    match code {
                        Some(c) => s.error(c),
                        None => s.status = StatusCode::Ok,
                    }
                } else if passed {
                    s.status = StatusCode::Ok;
                } else {
                    let why = str_of(e, "failing").or(code).unwrap_or("verify failed");
                    s.error(why);
                }
                self.push(s);
            }
            EventName::HoldoutPass | EventName::HoldoutFail => {
                let passed = name == EventName::HoldoutPass;
                let parent = self.check_parent(e);
                let start = self.prev_ts.max(self.spans[parent].start);
                let mut s = Span::new(
                    self.path("holdout", e),
                    Some(&self.spans[parent].path.clone()),
                    "holdout".into(),
                    Kind::Internal,
                    start,
                );
                s.end = ts.max(start);
                s.closed = true;
                s.set("orbit.check.run", Value::Str("holdout".into()));
                s.set("orbit.check.passed", Value::Bool(passed));
                if passed {
                    s.status = StatusCode::Ok;
                } else {
                    let failing = str_of(e, "failing").unwrap_or("holdout.sh").to_string();
                    s.set("orbit.check.failing", Value::Str(failing.clone()));
                    s.error(&failing);
                }
                self.push(s);
            }
            EventName::DoneClaim => {
                let Some((n, i)) = self.open.iteration else {
                    return;
                };
                if n != e.iteration || self.open.gate.is_some() {
                    return;
                }
                let mut s = Span::new(
                    self.path("done_gate", e),
                    Some(&self.spans[i].path.clone()),
                    "done_gate".into(),
                    Kind::Internal,
                    ts,
                );
                s.set("orbit.iteration", Value::Int(n as i64));
                self.open.gate = Some(self.push(s));
            }
            EventName::DoneRejected => {
                let reason = str_of(e, "reason").unwrap_or("rejected").to_string();
                self.close_gate(ts, &reason);
            }
            EventName::IterationResult
                if self.open.gate.is_some() || self.open.confirmation.is_some() =>
            {
                let verdict = str_of(e, "verdict").unwrap_or_default().to_string();
                self.close_gate(ts, &verdict);
            }
            EventName::CandidateStart => {
                let Some((_, i)) = self.open.iteration else {
                    return;
                };
                let k = u64_of(e, "candidate").unwrap_or(0);
                let mut s = Span::new(
                    self.path("candidate", e),
                    Some(&self.spans[i].path.clone()),
                    format!("candidate {k}"),
                    Kind::Internal,
                    ts,
                );
                s.set("orbit.candidate", Value::Int(k as i64));
                if let Some(of) = u64_of(e, "of") {
                    s.set("orbit.candidates", Value::Int(of as i64));
                }
                let c = self.push(s);
                self.open.candidates.push((k, c));
            }
            EventName::CandidateEnd => {
                let k = u64_of(e, "candidate").unwrap_or(0);
                let Some(&(_, c)) = self.open.candidates.iter().find(|(n, _)| *n == k) else {
                    return;
                };
                let s = &mut self.spans[c];
                // Ended here; exported once the survivor is chosen (that is said of it too).
                s.end = ts.max(s.start);
                for (key, attr) in [
                    ("outcome", "orbit.candidate.outcome"),
                    ("disqualified", "orbit.candidate.disqualified"),
                    ("holdout", "orbit.candidate.holdout"),
                    ("judge", "orbit.candidate.judge"),
                    ("commit", "orbit.candidate.commit"),
                ] {
                    if let Some(v) = str_of(e, key).filter(|v| !v.is_empty()) {
                        s.set(attr, Value::Str(v.to_string()));
                    }
                }
                for (key, attr) in [
                    ("checks_passed", "orbit.candidate.checks_passed"),
                    ("checks_total", "orbit.candidate.checks_total"),
                    ("changed", "orbit.candidate.changed"),
                ] {
                    if let Some(v) = u64_of(e, key) {
                        s.set(attr, Value::Int(v as i64));
                    }
                }
                if let Some(why) = str_of(e, "disqualified").filter(|v| !v.is_empty()) {
                    s.error(&format!("disqualified: {why}"));
                }
                s.set("orbit.candidate.survivor", Value::Bool(false));
            }
            EventName::SurvivorSelected => {
                let k = u64_of(e, "candidate").unwrap_or(0);
                let reason = str_of(e, "reason").unwrap_or_default().to_string();
                if let Some((_, i)) = self.open.iteration {
                    let s = &mut self.spans[i];
                    s.set("orbit.survivor", Value::Int(k as i64));
                    if !reason.is_empty() {
                        s.set("orbit.survivor.reason", Value::Str(reason));
                    }
                }
                for (n, c) in std::mem::take(&mut self.open.candidates) {
                    let end = self.spans[c].end;
                    self.close(c, end);
                    if n == k {
                        let s = &mut self.spans[c];
                        s.set("orbit.candidate.survivor", Value::Bool(true));
                        if s.status == StatusCode::Unset {
                            s.status = StatusCode::Ok;
                        }
                    }
                }
            }
            EventName::IterationEnd => {
                let Some((n, i)) = self.open.iteration else {
                    return;
                };
                if n != e.iteration {
                    return;
                }
                let verdict = str_of(e, "verdict").unwrap_or_default().to_string();
                let reason = str_of(e, "reason").unwrap_or_default().to_string();
                self.close_iteration(ts, false);
                let s = &mut self.spans[i];
                s.set("orbit.verdict", Value::Str(verdict.clone()));
                s.set("orbit.stop_reason", Value::Str(reason.clone()));
                if let Some(c) = str_of(e, "commit").filter(|c| !c.is_empty() && *c != "none") {
                    s.set("orbit.commit", Value::Str(c.to_string()));
                }
                if let Some(changed) = u64_of(e, "changed") {
                    s.set("orbit.changed", Value::Int(changed as i64));
                }
                if verdict == "DONE" {
                    s.status = StatusCode::Ok;
                } else if status_is_error(&verdict) {
                    s.error(&reason);
                }
            }
            EventName::LoopStop => {
                self.close_iteration(ts, true);
                let status = str_of(e, "status").unwrap_or_default().to_string();
                let reason = str_of(e, "reason").unwrap_or_default().to_string();
                let root = self.root();
                root.set("orbit.status", Value::Str(status.clone()));
                root.set("orbit.stop_reason", Value::Str(reason.clone()));
                if let Some(code) = u64_of(e, "exit_code") {
                    root.set("orbit.exit_code", Value::Int(code as i64));
                }
                root.status = if status == "DONE" {
                    StatusCode::Ok
                } else if status_is_error(&status) {
                    StatusCode::Error
                } else {
                    StatusCode::Unset
                };
                root.message = if root.status == StatusCode::Error {
                    reason
                } else {
                    String::new()
                };
            }
            EventName::IntegrityFail
            | EventName::RateLimited
            | EventName::CircuitChange
            | EventName::TestCountDrop
            | EventName::SetupFail
            | EventName::Recovery => {
                let mut attrs = Vec::new();
                if let Some(obj) = e.value.as_object() {
                    for (k, v) in obj {
                        if matches!(
                            k.as_str(),
                            "seq" | "ts" | "event" | "iteration" | "prev" | "hash"
                        ) {
                            continue;
                        }
                        let value = match v {
                            serde_json::Value::String(s) => Value::Str(s.clone()),
                            serde_json::Value::Bool(b) => Value::Bool(*b),
                            serde_json::Value::Number(n) => match n.as_i64() {
                                Some(i) => Value::Int(i),
                                None => Value::Str(n.to_string()),
                            },
                            other => Value::Str(other.to_string()),
                        };
                        attrs.push((format!("orbit.{k}"), value));
                    }
                }
                let p = self.event_parent();
                self.spans[p].events.push(SpanEvent {
                    time: ts,
                    name: e.event.clone(),
                    attrs,
                });
            }
            EventName::AdequacyMeasured => {
                // The loop's last measure of its change: its figures on the loop's span.
                let root = self.root();
                for k in [
                    "hunks_needed",
                    "hunks_tried",
                    "mutants_killed",
                    "mutants_tried",
                ] {
                    if let Some(n) = text_of(e, k).and_then(|t| t.parse::<i64>().ok()) {
                        root.set(&format!("orbit.adequacy.{k}"), Value::Int(n));
                    }
                }
                for k in ["details_sha256", "commit"] {
                    if let Some(v) = str_of(e, k) {
                        root.set(&format!("orbit.adequacy.{k}"), Value::Str(v.to_string()));
                    }
                }
                // `gate`, `report` (the runner's), or `command` (orbit adequacy's own).
                let mode = str_of(e, "mode").unwrap_or("command").to_string();
                root.set("orbit.adequacy.mode", Value::Str(mode));
            }
            _ => {}
        }
    }

    fn agent_run(&mut self, e: &Event, ts: u64) {
        // A run outside an open iteration (the wrap-up run after the last one) is the
        // loop's own.
        let n = e.iteration;
        let it = match self.open.iteration {
            Some((open, i)) if open == n => i,
            _ => 0,
        };
        let phase = str_of(e, "phase").unwrap_or("work").to_string();
        let candidate = u64_of(e, "candidate");
        let parent = if let Some(k) = candidate {
            match self.open.candidates.iter().find(|(c, _)| *c == k) {
                Some(&(_, c)) => c,
                None => it,
            }
        } else if phase == "confirm" {
            match self.open.confirmation {
                Some(c) => c,
                None => {
                    let outer = self.open.gate.unwrap_or(it);
                    let start = self.prev_ts.max(self.spans[outer].start);
                    let mut s = Span::new(
                        self.path("confirmation", e),
                        Some(&self.spans[outer].path.clone()),
                        "confirmation".into(),
                        Kind::Internal,
                        start,
                    );
                    s.set("orbit.iteration", Value::Int(n as i64));
                    let c = self.push(s);
                    self.open.confirmation = Some(c);
                    c
                }
            }
        } else {
            it
        };
        let seconds = u64_of(e, "seconds");
        let floor = self.spans[parent].start;
        let start = match seconds {
            Some(secs) => ts.saturating_sub(secs).max(floor),
            None => self.prev_ts.max(floor),
        };
        let engine = &self.facts.engine;
        let mut s = Span::new(
            self.path("agent", e),
            Some(&self.spans[parent].path.clone()),
            format!("invoke_agent {engine}"),
            Kind::Client,
            start,
        );
        s.end = ts.max(start);
        s.closed = true;
        s.set("gen_ai.operation.name", Value::Str("invoke_agent".into()));
        s.set("gen_ai.agent.name", Value::Str(engine.clone()));
        if let Some(p) = provider_of(engine) {
            s.set("gen_ai.provider.name", Value::Str(p.into()));
        }
        if let Some(m) = &self.facts.model {
            s.set("gen_ai.request.model", Value::Str(m.clone()));
        }
        s.set("orbit.iteration", Value::Int(n as i64));
        s.set("orbit.phase", Value::Str(phase));
        if let Some(a) = u64_of(e, "attempt") {
            s.set("orbit.attempt", Value::Int(a as i64));
        }
        if let Some(k) = candidate {
            s.set("orbit.candidate", Value::Int(k as i64));
        }
        let exit = e.value.get("exit_code").and_then(|v| v.as_i64());
        if let Some(code) = exit {
            s.set("orbit.agent.exit_code", Value::Int(code));
        }
        if let Some(secs) = seconds {
            s.set("orbit.agent.seconds", Value::Int(secs as i64));
        }
        let outcome = str_of(e, "outcome").map(str::to_string);
        if let Some(o) = &outcome {
            s.set("orbit.agent.outcome", Value::Str(o.clone()));
        }
        if u64_of(e, "timed_out") == Some(1) {
            s.set("orbit.agent.timed_out", Value::Bool(true));
        }
        if let Some(micro) = u64_of(e, "cost_microusd") {
            s.set("orbit.cost_usd", micro_to_usd(micro));
        }
        if let Some(kind) = str_of(e, "cost_kind") {
            s.set("orbit.cost_kind", Value::Str(kind.to_string()));
        }
        // The tokens the engine's own output counted (cached input included), where it
        // counts them.
        if let (Some(i), Some(o)) = (u64_of(e, "tokens_in"), u64_of(e, "tokens_out")) {
            s.set("gen_ai.usage.input_tokens", Value::Int(i as i64));
            s.set("gen_ai.usage.output_tokens", Value::Int(o as i64));
        }
        // The model the engine's session said it used.
        if let Some(m) = str_of(e, "model") {
            s.set("gen_ai.response.model", Value::Str(m.to_string()));
        }
        let failed = match &outcome {
            Some(o) => o != "ok",
            None => exit.is_some_and(|c| c != 0) || u64_of(e, "timed_out") == Some(1),
        };
        if failed {
            let why = outcome.unwrap_or_else(|| {
                if u64_of(e, "timed_out") == Some(1) {
                    "timeout".into()
                } else {
                    "agent_error".into()
                }
            });
            s.set("error.type", Value::Str(why.clone()));
            s.error(&why);
        }
        self.push(s);
    }
}

/// The spans of a journal's events, the workflow span first. The loop's span ends at the
/// last event; it and the spans still open are `closed` only when the journal says so.
pub fn build(events: &[Event], facts: &LoopFacts) -> Vec<Span> {
    let times: Vec<Option<u64>> = events.iter().map(|e| iso_to_epoch(&e.ts)).collect();
    let first = times.iter().flatten().copied().next().unwrap_or(0);
    let mut root = Span::new(
        ROOT.into(),
        None,
        format!("invoke_workflow {}", facts.name),
        Kind::Internal,
        first,
    );
    root.set(
        "gen_ai.operation.name",
        Value::Str("invoke_workflow".into()),
    );
    root.set("gen_ai.workflow.name", Value::Str(facts.name.clone()));
    root.set("orbit.loop.name", Value::Str(facts.name.clone()));
    root.set("orbit.engine", Value::Str(facts.engine.clone()));
    if !facts.ledger.entries.is_empty() {
        root.set("orbit.cost_usd", micro_to_usd(facts.ledger.total()));
    }
    let mut b = Builder {
        facts,
        spans: vec![root],
        open: Open::default(),
        prev_ts: first,
        iterations: 0,
    };
    for (e, t) in events.iter().zip(&times) {
        // An event whose time does not read takes the last one's: never before it.
        let ts = t.unwrap_or(b.prev_ts).max(b.prev_ts);
        b.read(e, ts);
        b.prev_ts = ts;
    }
    let last = b.prev_ts;
    let ended = events.last().is_some_and(|e| e.is(EventName::LoopStop));
    let iterations = b.iterations as i64;
    let mut spans = b.spans;
    for s in spans.iter_mut().filter(|s| !s.closed) {
        s.end = last.max(s.start);
    }
    let root = &mut spans[0];
    root.set("orbit.iterations", Value::Int(iterations));
    root.end = last.max(root.start);
    root.closed = ended;
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    type Line<'a> = (&'a str, u64, &'a [(&'a str, &'a str)]);

    fn events(lines: &[Line]) -> Vec<Event> {
        let mut prev = crate::events::GENESIS.to_string();
        let mut text = String::new();
        for (seq, (name, it, fields)) in lines.iter().enumerate() {
            let f: Vec<(&str, String)> = fields
                .iter()
                .map(|(k, v)| (*k, crate::events::value(v)))
                .collect();
            let ts = crate::fsx::iso_utc(1_800_000_000 + seq as u64 * 10);
            let line = crate::events::build_line(seq as u64 + 1, &ts, name, *it, &f, &prev);
            prev = crate::events::split_hash(line.trim_end())
                .unwrap()
                .1
                .to_string();
            text.push_str(&line);
        }
        crate::events::read(text.as_bytes()).events
    }

    fn facts() -> LoopFacts {
        LoopFacts {
            name: "calc".into(),
            engine: "claude".into(),
            model: Some("opus".into()),
            ledger: crate::ledger::parse(b"1\t20000\treported\n"),
        }
    }

    #[test]
    fn a_handoff_verified_after_done_is_its_own_span_not_a_check_run() {
        let ev = events(&[
            ("loop_start", 1, &[("engine", "claude")]),
            ("iteration_start", 1, &[]),
            ("verify_pass", 1, &[("run", "1"), ("streak", "1")]),
            (
                "loop_stop",
                1,
                &[("status", "DONE"), ("reason", "none"), ("exit_code", "0")],
            ),
            (
                "verify_fail",
                1,
                &[
                    ("by", "orbit verify"),
                    ("ref", "orbit/calc"),
                    ("commit", "abc"),
                    ("verify_failure_code", "TREE_MOVED"),
                    ("why", "a commit after DONE"),
                ],
            ),
        ]);
        let spans = build(&ev, &facts());
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "invoke_workflow calc",
                "iteration 1",
                "verify 1",
                "verify_handoff"
            ]
        );
        let h = spans.iter().find(|s| s.name == "verify_handoff").unwrap();
        assert_eq!(h.parent.as_deref(), Some("loop"));
        assert_eq!(
            h.attr("orbit.handoff.failure_code"),
            Some(&Value::Str("TREE_MOVED".into()))
        );
        assert!(h.attr("orbit.check.run").is_none());
    }

    #[test]
    fn an_iteration_holds_its_agent_run_its_checks_and_its_gate() {
        let ev = events(&[
            ("loop_start", 1, &[("engine", "claude")]),
            ("iteration_start", 1, &[]),
            (
                "agent_exit",
                1,
                &[
                    ("phase", "work"),
                    ("attempt", "1"),
                    ("exit_code", "0"),
                    ("outcome", "ok"),
                    ("seconds", "5"),
                    ("cost_microusd", "20000"),
                    ("tokens_in", "1200"),
                    ("tokens_out", "340"),
                    ("model", "claude-opus-4-5"),
                ],
            ),
            ("verify_pass", 1, &[("run", "1"), ("streak", "1")]),
            ("done_claim", 1, &[]),
            ("verify_pass", 1, &[("run", "2"), ("streak", "2")]),
            (
                "agent_exit",
                1,
                &[
                    ("phase", "confirm"),
                    ("attempt", "1"),
                    ("exit_code", "0"),
                    ("seconds", "1"),
                ],
            ),
            ("iteration_result", 1, &[("verdict", "DONE")]),
            (
                "iteration_end",
                1,
                &[
                    ("verdict", "DONE"),
                    ("reason", "none"),
                    ("commit", "abc"),
                    ("changed", "1"),
                ],
            ),
            (
                "loop_stop",
                1,
                &[("status", "DONE"), ("reason", "none"), ("exit_code", "0")],
            ),
        ]);
        let spans = build(&ev, &facts());
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "invoke_workflow calc",
                "iteration 1",
                "invoke_agent claude",
                "verify 1",
                "done_gate",
                "verify 2",
                "confirmation",
                "invoke_agent claude"
            ]
        );
        assert!(spans.iter().all(|s| s.closed));
        let by = |n: &str| spans.iter().find(|s| s.name == n).unwrap();
        assert_eq!(by("iteration 1").parent.as_deref(), Some("loop"));
        assert_eq!(
            by("verify 2").parent.as_deref(),
            Some(by("done_gate").path.as_str())
        );
        assert_eq!(
            spans[7].parent.as_deref(),
            Some(by("confirmation").path.as_str())
        );
        assert_eq!(
            by("confirmation").attr("orbit.confirmed"),
            Some(&Value::Bool(true))
        );
        let work = &spans[2];
        assert_eq!(work.end - work.start, 5);
        assert_eq!(
            work.attr("gen_ai.provider.name"),
            Some(&Value::Str("anthropic".into()))
        );
        assert_eq!(
            work.attr("gen_ai.request.model"),
            Some(&Value::Str("opus".into()))
        );
        assert_eq!(work.attr("orbit.cost_usd"), Some(&Value::Double(0.02)));
        assert_eq!(
            work.attr("gen_ai.usage.input_tokens"),
            Some(&Value::Int(1200))
        );
        assert_eq!(
            work.attr("gen_ai.usage.output_tokens"),
            Some(&Value::Int(340))
        );
        assert_eq!(
            work.attr("gen_ai.response.model"),
            Some(&Value::Str("claude-opus-4-5".into()))
        );
        // The confirmation's run counted no tokens: it says none, not zero.
        assert_eq!(spans[7].attr("gen_ai.usage.input_tokens"), None);
        assert_eq!(spans[0].status, StatusCode::Ok);
        assert_eq!(by("done_gate").status, StatusCode::Ok);
    }

    #[test]
    fn an_unfinished_iteration_is_open_until_the_journal_ends_it() {
        let ev = events(&[
            ("loop_start", 1, &[]),
            ("iteration_start", 1, &[]),
            (
                "agent_exit",
                1,
                &[
                    ("phase", "work"),
                    ("outcome", "timeout"),
                    ("exit_code", "124"),
                ],
            ),
        ]);
        let spans = build(&ev, &facts());
        assert!(!spans[0].closed && !spans[1].closed);
        assert!(spans[2].closed);
        assert_eq!(spans[2].status, StatusCode::Error);
        assert_eq!(
            spans[2].attr("error.type"),
            Some(&Value::Str("timeout".into()))
        );
        assert_eq!(spans[1].end, spans[2].end);
    }

    #[test]
    fn a_wrap_up_run_after_the_last_iteration_is_the_loops_own() {
        let ev = events(&[
            ("loop_start", 1, &[]),
            ("iteration_start", 1, &[]),
            ("iteration_end", 1, &[("verdict", "CONTINUE")]),
            (
                "agent_exit",
                1,
                &[("phase", "wrapup"), ("attempt", "1"), ("exit_code", "0")],
            ),
            (
                "loop_stop",
                1,
                &[("status", "CONTINUE"), ("reason", "max_iterations")],
            ),
        ]);
        let spans = build(&ev, &facts());
        let wrapup = spans
            .iter()
            .find(|s| s.name.starts_with("invoke_agent"))
            .unwrap();
        assert_eq!(wrapup.parent.as_deref(), Some("loop"));
        assert_eq!(
            wrapup.attr("orbit.phase"),
            Some(&Value::Str("wrapup".into()))
        );
        assert_eq!(spans[0].status, StatusCode::Unset);
    }

    #[test]
    fn an_iteration_a_kill_cut_short_ends_where_its_journal_stops_and_says_so() {
        let ev = events(&[
            ("loop_start", 1, &[]),
            ("iteration_start", 1, &[]),
            ("done_claim", 1, &[]),
            // SIGKILL: no iteration_end, no loop_stop; the next run does iteration 1 again.
            ("loop_start", 1, &[]),
            ("iteration_start", 1, &[]),
            ("iteration_end", 1, &[("verdict", "CONTINUE")]),
            (
                "loop_stop",
                1,
                &[("status", "CONTINUE"), ("reason", "tick")],
            ),
        ]);
        let spans = build(&ev, &facts());
        let its: Vec<&Span> = spans.iter().filter(|s| s.name == "iteration 1").collect();
        assert_eq!(its.len(), 2);
        assert_ne!(its[0].path, its[1].path);
        assert_eq!(its[0].attr("orbit.interrupted"), Some(&Value::Bool(true)));
        let gate = spans.iter().find(|s| s.name == "done_gate").unwrap();
        // Both end at the killed run's last event, not when the next run started.
        assert_eq!((its[0].end, gate.end), (gate.start, gate.start));
        assert!(its[1].start > its[0].end);
        assert_eq!(its[1].attr("orbit.interrupted"), None);
        assert_eq!(gate.status, StatusCode::Error);
        assert_eq!(gate.message, "interrupted");
        assert_eq!(spans[0].attr("orbit.runs"), Some(&Value::Int(2)));
        assert!(spans.iter().all(|s| s.closed));
    }

    #[test]
    fn the_model_is_read_from_the_agents_command_line() {
        let argv = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            model_of(&argv(&["claude", "-p", "--model", "opus"])),
            Some("opus".into())
        );
        assert_eq!(
            model_of(&argv(&["x", "--model=gpt-5"])),
            Some("gpt-5".into())
        );
        assert_eq!(model_of(&argv(&["x", "--model"])), None);
        assert_eq!(model_of(&argv(&["x", "-p"])), None);
    }
}
