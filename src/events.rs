//! `events.jsonl`: the append-only, hash-chained event journal.
//!
//! One JSON object per line: `seq`, `ts`, `event`, `iteration`, event fields, `prev` and
//! `hash`. `hash` is the sha256 of the line with its `,"hash":"<64 hex>"` member removed
//! (the line then ends in `}` right after `prev`); `prev` is the previous line's `hash`,
//! 64 zeros for the first line. The runner writes the members in that order.

use crate::contract::EventName;
use crate::fsx;

pub const GENESIS: &str = progress_genesis();

const fn progress_genesis() -> &'static str {
    "0000000000000000000000000000000000000000000000000000000000000000"
}

/// One parsed event line.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// 1-based line number in events.jsonl.
    pub line: usize,
    pub seq: u64,
    pub ts: String,
    pub event: String,
    pub iteration: u64,
    pub prev: String,
    pub hash: String,
    /// The whole object, for event-specific fields.
    pub value: serde_json::Value,
}

impl Event {
    /// Whether this is an event of kind `name`.
    pub fn is(&self, name: EventName) -> bool {
        self.event == name.as_str()
    }
}

/// Why the chain is broken at a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainError {
    /// Not a JSON object with the required members.
    Malformed { line: usize, message: String },
    /// `hash` is not the sha256 of the line without it (the line was edited).
    HashMismatch { line: usize },
    /// `prev` does not name the previous line's hash (a line was removed or reordered).
    PrevMismatch { line: usize },
    /// `seq` does not follow the previous line's.
    SeqGap {
        line: usize,
        expected: u64,
        found: u64,
    },
    /// The last line has no newline: a torn append.
    TornTail { line: usize },
}

impl ChainError {
    pub fn line(&self) -> usize {
        match self {
            ChainError::Malformed { line, .. }
            | ChainError::HashMismatch { line }
            | ChainError::PrevMismatch { line }
            | ChainError::SeqGap { line, .. }
            | ChainError::TornTail { line } => *line,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ChainError::Malformed { message, .. } => format!("not an orbit event: {message}"),
            ChainError::HashMismatch { .. } => {
                "the line's hash does not match its content (edited)".into()
            }
            ChainError::PrevMismatch { .. } => {
                "prev does not name the previous line's hash (a line was removed or reordered)"
                    .into()
            }
            ChainError::SeqGap {
                expected, found, ..
            } => {
                format!("seq {found} where {expected} was expected")
            }
            ChainError::TornTail { .. } => "the last line is torn (no newline)".into(),
        }
    }
}

/// The hash a line must carry: sha256 of the line without its `hash` member.
pub fn line_hash(line_without_hash: &str) -> String {
    fsx::sha256_hex(line_without_hash.as_bytes())
}

/// Splits a full line into (the line without `hash`, the hash it carries).
pub fn split_hash(line: &str) -> Option<(String, &str)> {
    const KEY: &str = ",\"hash\":\"";
    let body = line.strip_suffix("\"}")?;
    let at = body.rfind(KEY)?;
    let hash = &body[at + KEY.len()..];
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((format!("{}}}", &body[..at]), hash))
}

/// Parses one line (without its newline).
pub fn parse_line(line: &str, n: usize) -> Result<Event, ChainError> {
    let bad = |m: &str| ChainError::Malformed {
        line: n,
        message: m.to_string(),
    };
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| bad(&format!("invalid JSON ({e})")))?;
    let obj = value.as_object().ok_or_else(|| bad("not a JSON object"))?;
    let s = |k: &str| obj.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let u = |k: &str| obj.get(k).and_then(|v| v.as_u64());
    let (Some(seq), Some(ts), Some(event), Some(iteration), Some(prev), Some(hash)) = (
        u("seq"),
        s("ts"),
        s("event"),
        u("iteration"),
        s("prev"),
        s("hash"),
    ) else {
        return Err(bad("missing seq, ts, event, iteration, prev or hash"));
    };
    Ok(Event {
        line: n,
        seq,
        ts,
        event,
        iteration,
        prev,
        hash,
        value,
    })
}

/// The journal as read: every event that parsed, and the first break in the chain.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    pub events: Vec<Event>,
    pub error: Option<ChainError>,
    /// Whether the file ends in a torn line (reported in `error` when nothing else is).
    pub torn_tail: bool,
    /// Every line that is not an event (each skipped), with its line number and why; the
    /// first of them is `error` too when the chain was intact before it.
    pub malformed: Vec<(usize, String)>,
}

impl Journal {
    pub fn last(&self) -> Option<&Event> {
        self.events.last()
    }

    /// The hash the next line must chain on, and the next seq.
    pub fn tip(&self) -> (String, u64) {
        match self.events.last() {
            Some(e) => (e.hash.clone(), e.seq + 1),
            None => (GENESIS.to_string(), 1),
        }
    }
}

/// Reads and verifies a journal. Never panics on arbitrary bytes; stops verifying at the
/// first break but keeps parsing later lines that are well-formed.
pub fn read(bytes: &[u8]) -> Journal {
    verify(bytes, Some((GENESIS.to_string(), 1)))
}

/// Reads and verifies the tail of a journal, `bytes` starting at a line boundary somewhere
/// in the file: its first line is taken as it is (the line before it, which its `prev` and
/// `seq` follow, is not there), every later line must follow the one before. Lines are
/// numbered from 1 at the start of `bytes`.
pub fn read_tail(bytes: &[u8]) -> Journal {
    verify(bytes, None)
}

/// Reads `bytes` as a chain whose first line follows `anchor` (`prev` and `seq`), or
/// anything when there is no anchor.
fn verify(bytes: &[u8], anchor: Option<(String, u64)>) -> Journal {
    let text = String::from_utf8_lossy(bytes);
    let mut j = Journal::default();
    let (mut prev, mut expected_seq) = anchor.unzip();
    let mut lines: Vec<&str> = text.split('\n').collect();
    let complete_last = text.ends_with('\n') || text.is_empty();
    if complete_last {
        lines.pop();
    }
    let count = lines.len();
    for (i, line) in lines.into_iter().enumerate() {
        let n = i + 1;
        if n == count && !complete_last {
            j.torn_tail = true;
            if j.error.is_none() {
                j.error = Some(ChainError::TornTail { line: n });
            }
            break;
        }
        let event = match parse_line(line, n) {
            Ok(e) => e,
            Err(e) => {
                j.malformed.push((n, e.describe()));
                if j.error.is_none() {
                    j.error = Some(e);
                }
                continue;
            }
        };
        if j.error.is_none() {
            let check = match split_hash(line) {
                Some((without, carried)) if line_hash(&without) == carried => None,
                _ => Some(ChainError::HashMismatch { line: n }),
            };
            let check = check.or_else(|| {
                prev.as_ref()
                    .is_some_and(|p| *p != event.prev)
                    .then_some(ChainError::PrevMismatch { line: n })
            });
            let check = check.or_else(|| {
                expected_seq
                    .filter(|s| *s != event.seq)
                    .map(|expected| ChainError::SeqGap {
                        line: n,
                        expected,
                        found: event.seq,
                    })
            });
            j.error = check;
        }
        prev = Some(event.hash.clone());
        expected_seq = Some(event.seq + 1);
        j.events.push(event);
    }
    j
}

/// A field's value as the runner's `state_event` writes it: a whole number (no leading zero,
/// at most 18 digits, optionally negative) or `true`/`false` as JSON as such, anything else
/// as a JSON string.
pub fn value(v: &str) -> String {
    let int = v == "0"
        || (v.len() <= 19 && {
            let d = v.strip_prefix('-').unwrap_or(v);
            !d.is_empty()
                && d.len() <= 18
                && d.bytes().all(|b| b.is_ascii_digit())
                && !d.starts_with('0')
        });
    if int || v == "true" || v == "false" {
        v.to_string()
    } else {
        json_str(v)
    }
}

/// Escapes a string as a JSON string literal (the same escaping as the bash writer).
pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings always serialize")
}

/// Builds the next line of a journal (with its newline). `fields` are `(key, json value)`
/// pairs already encoded as JSON.
pub fn build_line(
    seq: u64,
    ts: &str,
    event: &str,
    iteration: u64,
    fields: &[(&str, String)],
    prev: &str,
) -> String {
    let mut body = format!(
        "{{\"seq\":{seq},\"ts\":{},\"event\":{},\"iteration\":{iteration}",
        json_str(ts),
        json_str(event)
    );
    for (k, v) in fields {
        body.push_str(&format!(",{}:{v}", json_str(k)));
    }
    body.push_str(&format!(",\"prev\":\"{prev}\"}}"));
    let hash = line_hash(&body);
    format!("{},\"hash\":\"{hash}\"}}\n", &body[..body.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(n: u64) -> String {
        let mut out = String::new();
        let mut prev = GENESIS.to_string();
        for seq in 1..=n {
            let line = build_line(
                seq,
                "2026-11-30T00:00:00Z",
                "iteration_start",
                seq,
                &[("k", "\"v\"".into())],
                &prev,
            );
            prev = split_hash(line.trim_end()).unwrap().1.to_string();
            out.push_str(&line);
        }
        out
    }

    #[test]
    fn a_built_chain_verifies() {
        let j = read(journal(3).as_bytes());
        assert_eq!(j.events.len(), 3);
        assert_eq!(j.error, None);
        assert_eq!(j.tip().1, 4);
    }

    #[test]
    fn a_tail_verifies_from_its_first_line() {
        let text = journal(6);
        let cut = text.match_indices('\n').nth(2).unwrap().0 + 1;
        let tail = &text[cut..];
        let j = read_tail(tail.as_bytes());
        assert_eq!(j.events.len(), 3);
        assert_eq!(j.error, None);
        assert!(j.events[0].is(EventName::IterationStart));
        assert!(!j.events[0].is(EventName::IterationEnd));
        // Read as a whole journal, the same lines do not start the chain.
        assert_eq!(
            read(tail.as_bytes()).error,
            Some(ChainError::PrevMismatch { line: 1 })
        );
        // Inside the tail, edits and removals are found as in the whole file.
        let lines: Vec<&str> = tail.lines().collect();
        let removed = format!("{}\n{}\n", lines[0], lines[2]);
        assert_eq!(
            read_tail(removed.as_bytes()).error,
            Some(ChainError::PrevMismatch { line: 2 })
        );
        let edited = tail.replacen("\"v\"", "\"w\"", 2);
        assert_eq!(
            read_tail(edited.as_bytes()).error,
            Some(ChainError::HashMismatch { line: 1 })
        );
        let torn = read_tail(&tail.as_bytes()[..tail.len() - 10]);
        assert!(torn.torn_tail);
        assert_eq!(torn.error, Some(ChainError::TornTail { line: 3 }));
    }

    #[test]
    fn edits_removals_and_torn_tails_are_found() {
        let text = journal(3);
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines[1] = lines[1].replace("\"v\"", "\"w\"");
        let edited = format!("{}\n", lines.join("\n"));
        assert_eq!(
            read(edited.as_bytes()).error,
            Some(ChainError::HashMismatch { line: 2 })
        );
        let lines: Vec<&str> = text.lines().collect();
        let removed = format!("{}\n{}\n", lines[0], lines[2]);
        assert_eq!(
            read(removed.as_bytes()).error,
            Some(ChainError::PrevMismatch { line: 2 })
        );
        let torn = &text[..text.len() - 10];
        assert_eq!(
            read(torn.as_bytes()).error,
            Some(ChainError::TornTail { line: 3 })
        );
        assert!(matches!(
            read(b"garbage\n").error,
            Some(ChainError::Malformed { line: 1, .. })
        ));
    }

    #[test]
    fn every_line_that_is_not_an_event_is_listed_and_the_rest_read() {
        let mut lines: Vec<String> = journal(4).lines().map(str::to_string).collect();
        lines.insert(1, "not json".into());
        lines.insert(3, "{\"seq\":1}".into());
        let text = format!("{}\n", lines.join("\n"));
        let j = read(text.as_bytes());
        assert_eq!(j.events.len(), 4);
        let at: Vec<usize> = j.malformed.iter().map(|(n, _)| *n).collect();
        assert_eq!(at, vec![2, 4]);
        assert!(
            j.malformed[0].1.contains("invalid JSON"),
            "{:?}",
            j.malformed
        );
        assert!(
            j.malformed[1].1.contains("missing seq"),
            "{:?}",
            j.malformed
        );
        assert_eq!(read(journal(2).as_bytes()).malformed, vec![]);
    }
}
