//! The OTLP/JSON document: an `ExportTraceServiceRequest` in the protobuf JSON mapping
//! (resourceSpans → scopeSpans → spans; trace and span ids as lowercase hex, times as
//! strings of unix nanoseconds, 64-bit integers as strings, the span kind and the status
//! code as integers). Ids are derived from the loop's identity and each span's path, so the
//! same journal gives the same document byte for byte.

use serde_json::{Value as Json, json};

use super::spans::{Span, Value};
use crate::fsx;

/// What tells one loop's trace from every other: its name and the hash of its journal's
/// first event (a loop of the same name in another repository, or made again, differs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub first_hash: String,
}

impl Identity {
    fn digest(&self, what: &str) -> String {
        fsx::sha256_hex(format!("orbit\0{what}\0{}\0{}", self.name, self.first_hash).as_bytes())
    }

    /// 16 bytes, as 32 hex digits.
    pub fn trace_id(&self) -> String {
        self.digest("trace")[..32].to_string()
    }

    /// 8 bytes, as 16 hex digits.
    pub fn span_id(&self, path: &str) -> String {
        self.digest(&format!("span\0{path}"))[..16].to_string()
    }
}

fn any_value(v: &Value) -> Json {
    match v {
        Value::Str(s) => json!({ "stringValue": s }),
        // int64 is a string in the JSON mapping.
        Value::Int(i) => json!({ "intValue": i.to_string() }),
        Value::Double(d) => json!({ "doubleValue": d }),
        Value::Bool(b) => json!({ "boolValue": b }),
    }
}

fn attributes(attrs: &[(String, Value)]) -> Json {
    Json::Array(
        attrs
            .iter()
            .map(|(k, v)| json!({ "key": k, "value": any_value(v) }))
            .collect(),
    )
}

fn nanos(epoch: u64) -> String {
    (u128::from(epoch) * 1_000_000_000).to_string()
}

fn span_json(id: &Identity, trace_id: &str, s: &Span) -> Json {
    let mut out = json!({
        "traceId": trace_id,
        "spanId": id.span_id(&s.path),
        "name": s.name,
        "kind": s.kind as i64,
        "startTimeUnixNano": nanos(s.start),
        "endTimeUnixNano": nanos(s.end),
        "attributes": attributes(&s.attrs),
        "status": { "code": s.status as i64 },
    });
    if let Some(p) = &s.parent {
        out["parentSpanId"] = json!(id.span_id(p));
    }
    if !s.message.is_empty() {
        out["status"]["message"] = json!(s.message);
    }
    if !s.events.is_empty() {
        out["events"] = Json::Array(
            s.events
                .iter()
                .map(|e| {
                    json!({
                        "timeUnixNano": nanos(e.time),
                        "name": e.name,
                        "attributes": attributes(&e.attrs),
                    })
                })
                .collect(),
        );
    }
    out
}

/// The document holding `spans`, in one line of JSON (no newline).
pub fn render<'s>(
    id: &Identity,
    engine: &str,
    spans: impl IntoIterator<Item = &'s Span>,
) -> String {
    let trace_id = id.trace_id();
    let spans: Vec<Json> = spans
        .into_iter()
        .map(|s| span_json(id, &trace_id, s))
        .collect();
    let resource = attributes(&[
        ("service.name".into(), Value::Str("orbit".into())),
        (
            "service.version".into(),
            Value::Str(env!("CARGO_PKG_VERSION").into()),
        ),
        ("orbit.loop.name".into(), Value::Str(id.name.clone())),
        ("orbit.engine".into(), Value::Str(engine.to_string())),
    ]);
    let doc = json!({
        "resourceSpans": [{
            "resource": { "attributes": resource },
            "scopeSpans": [{
                "scope": { "name": "orbit", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans,
            }],
        }],
    });
    serde_json::to_string(&doc).expect("a JSON value always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_of_the_right_length_and_differ_by_loop_and_path() {
        let a = Identity {
            name: "calc".into(),
            first_hash: "ab".repeat(32),
        };
        let b = Identity {
            name: "calc".into(),
            first_hash: "cd".repeat(32),
        };
        assert_eq!(a.trace_id().len(), 32);
        assert_eq!(a.span_id("loop").len(), 16);
        assert!(a.trace_id().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.trace_id(), b.trace_id());
        assert_ne!(a.span_id("loop"), a.span_id("iteration@8"));
        assert_eq!(a.span_id("loop"), a.clone().span_id("loop"));
    }

    #[test]
    fn values_take_the_json_mapping_of_any_value() {
        assert_eq!(any_value(&Value::Int(7)), json!({"intValue": "7"}));
        assert_eq!(any_value(&Value::Double(0.5)), json!({"doubleValue": 0.5}));
        assert_eq!(any_value(&Value::Bool(true)), json!({"boolValue": true}));
        assert_eq!(nanos(2), "2000000000");
    }
}
