//! `progress.md`: the runner's append-only, human-readable iteration log.
//!
//! Each entry starts with a heading at column 0 — `## Iteration N — STATUS` or
//! `## Recovery — <UTC time>` — and ends with an end marker
//! `<!-- orbit:end iteration=N sha256=H -->`, where `H` is the sha256 of the previous
//! marker's hash (64 zeros for the first entry), a newline, and the entry's text from its
//! heading up to the marker. A missing marker at the end is a torn tail; a hash that does
//! not match is a rewritten history. Text that came from the agent or the checks is
//! indented by four spaces, so it can never forge a heading or a marker.

use crate::fsx;

pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
pub const MARKER_PREFIX: &str = "<!-- orbit:end iteration=";
/// The heading word of an entry the runner writes when a signal stops an iteration
/// (`## Iteration N — INTERRUPTED`): the iteration did not end and runs again. Every other
/// iteration heading carries a [`Status`](crate::contract::Status).
pub const INTERRUPTED: &str = "INTERRUPTED";

/// The file's preamble, written once by `orbit init`.
pub fn preamble(name: &str) -> String {
    format!(
        "# Progress — {name}\n\n\
         Written by the runner only: one entry per iteration, each closed by an end marker that\n\
         carries the iteration number and a chained sha256. Indented text came from the agent or\n\
         the checks.\n\n"
    )
}

/// The hash that closes an entry.
pub fn entry_hash(prev: &str, entry_text: &str) -> String {
    let mut data = Vec::with_capacity(prev.len() + 1 + entry_text.len());
    data.extend_from_slice(prev.as_bytes());
    data.push(b'\n');
    data.extend_from_slice(entry_text.as_bytes());
    fsx::sha256_hex(&data)
}

/// The end marker line (with its newline) for an entry.
pub fn marker(iteration: u64, hash: &str) -> String {
    format!("{MARKER_PREFIX}{iteration} sha256={hash} -->\n")
}

/// Neutralises foreign text (agent or check output) for an entry: control characters
/// other than tab removed, every line indented by four spaces.
pub fn neutralise(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        out.push_str("    ");
        out.extend(line.chars().filter(|c| *c == '\t' || !c.is_control()));
        out.push('\n');
    }
    out
}

/// Kinds of entry heading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Iteration { number: u64, status: String },
    Recovery,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    /// 1-based line of the heading.
    pub line: usize,
    /// The marker's iteration and hash, when the entry is closed.
    pub marker: Option<(u64, String)>,
    /// Whether the marker's hash matches the chain.
    pub hash_ok: bool,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub entries: Vec<Entry>,
    /// The 1-based line where an unclosed entry (a torn tail) starts.
    pub torn_tail_line: Option<usize>,
    /// Lines that are neither preamble, entry text, marker nor blank between entries.
    pub stray_lines: Vec<usize>,
}

impl Progress {
    /// The hash of the last valid marker: what the next entry chains from.
    pub fn last_hash(&self) -> String {
        self.entries
            .iter()
            .rev()
            .find_map(|e| e.marker.as_ref().map(|(_, h)| h.clone()))
            .unwrap_or_else(|| GENESIS.to_string())
    }

    /// The first entry whose hash does not match the chain.
    pub fn first_broken(&self) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.marker.is_some() && !e.hash_ok)
    }

    /// The highest iteration number with a closed entry.
    pub fn last_closed_iteration(&self) -> Option<(u64, String)> {
        self.entries
            .iter()
            .rev()
            .find_map(|e| match (&e.kind, &e.marker) {
                (EntryKind::Iteration { number, status }, Some(_)) => {
                    Some((*number, status.clone()))
                }
                _ => None,
            })
    }
}

/// An iteration heading as the runner writes it: `## Iteration N — STATUS`, N of at most 9
/// digits, STATUS in capitals. The one rule for every reader (audit, recover, recover.sh).
pub fn iteration_heading(line: &str) -> Option<(u64, &str)> {
    let rest = line.strip_prefix("## Iteration ")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let status = rest[digits..].strip_prefix(" — ")?;
    let n = rest[..digits].parse().ok()?;
    (!status.is_empty() && status.bytes().all(|b| b.is_ascii_uppercase())).then_some((n, status))
}

/// An end marker as the runner writes it: `<!-- orbit:end iteration=N sha256=H -->`, N
/// digits, H 64 lowercase hex digits. Returns N and H.
pub fn marker_line(line: &str) -> Option<(u64, &str)> {
    let rest = line.strip_prefix(MARKER_PREFIX)?.strip_suffix(" -->")?;
    let (num, hash) = rest.split_once(" sha256=")?;
    if num.is_empty()
        || !num.bytes().all(|b| b.is_ascii_digit())
        || hash.len() != 64
        || !hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    Some((num.parse().ok()?, hash))
}

fn parse_heading(line: &str) -> Option<EntryKind> {
    if let Some((number, status)) = iteration_heading(line) {
        return Some(EntryKind::Iteration {
            number,
            status: status.to_string(),
        });
    }
    if line.starts_with("## Recovery — ") {
        return Some(EntryKind::Recovery);
    }
    None
}

fn parse_marker(line: &str) -> Option<(u64, String)> {
    marker_line(line).map(|(n, h)| (n, h.to_string()))
}

/// Parses progress.md. Never fails: whatever cannot be read as an entry is reported as a
/// torn tail or a stray line, with its line number. Invalid UTF-8 is read lossily.
pub fn parse(bytes: &[u8]) -> Progress {
    parse_chained(bytes, GENESIS)
}

/// Parses the tail of progress.md, `bytes` starting at a line boundary somewhere in the
/// file. The chain is anchored on the first end marker in the tail: the lines up to it are
/// skipped and the entries after it must chain on its hash. Line numbers count from 1 at
/// the start of `bytes`. `None` when the tail holds no end marker.
pub fn parse_tail(bytes: &[u8]) -> Option<Progress> {
    let text = String::from_utf8_lossy(bytes);
    let (skip, hash) = text
        .split_inclusive('\n')
        .enumerate()
        .find_map(|(i, line)| {
            parse_marker(line.trim_end_matches('\n')).map(|(_, hash)| (i + 1, hash))
        })?;
    let rest: String = text.split_inclusive('\n').skip(skip).collect();
    let mut out = parse_chained(rest.as_bytes(), &hash);
    for e in &mut out.entries {
        e.line += skip;
    }
    out.torn_tail_line = out.torn_tail_line.map(|l| l + skip);
    for l in &mut out.stray_lines {
        *l += skip;
    }
    Some(out)
}

/// Parses entries that chain on `prev`.
fn parse_chained(bytes: &[u8], prev: &str) -> Progress {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Progress::default();
    let mut prev = prev.to_string();
    let mut current: Option<(EntryKind, usize, String)> = None;
    let mut seen_entry = false;
    let mut pos = 0usize;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        pos += raw.len();
        let complete = raw.ends_with('\n');
        let line = raw.trim_end_matches('\n');
        if let Some((kind, start, body)) = current.as_mut() {
            if complete {
                if let Some((iter, hash)) = parse_marker(line) {
                    let expect = entry_hash(&prev, body);
                    let hash_ok = expect == hash;
                    out.entries.push(Entry {
                        kind: kind.clone(),
                        line: *start,
                        marker: Some((iter, hash.clone())),
                        hash_ok,
                        text: std::mem::take(body),
                    });
                    prev = hash;
                    current = None;
                    continue;
                }
                if let Some(next) = parse_heading(line) {
                    // A new heading before the marker: the previous entry was torn.
                    out.entries.push(Entry {
                        kind: kind.clone(),
                        line: *start,
                        marker: None,
                        hash_ok: false,
                        text: std::mem::take(body),
                    });
                    current = Some((next, n, raw.to_string()));
                    continue;
                }
            }
            body.push_str(raw);
            continue;
        }
        if complete && let Some(kind) = parse_heading(line) {
            seen_entry = true;
            current = Some((kind, n, raw.to_string()));
            continue;
        }
        if seen_entry && !complete {
            // A last line without its newline after the entries: a torn write (a heading
            // cut short), not a stray line. The runner trims it.
            out.torn_tail_line = Some(n);
            continue;
        }
        if seen_entry && !line.trim().is_empty() {
            out.stray_lines.push(n);
        }
    }
    let _ = pos;
    if let Some((kind, start, body)) = current {
        out.torn_tail_line = Some(start);
        out.entries.push(Entry {
            kind,
            line: start,
            marker: None,
            hash_ok: false,
            text: body,
        });
    }
    out
}

/// Builds a closed entry from its text (heading first, ending in a newline), chained on
/// `prev`. Returns the text to append and the new chain hash.
pub fn close_entry(prev: &str, iteration: u64, entry_text: &str) -> (String, String) {
    let hash = entry_hash(prev, entry_text);
    let mut out = String::with_capacity(entry_text.len() + 100);
    out.push_str(entry_text);
    out.push_str(&marker(iteration, &hash));
    out.push('\n');
    (out, hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> String {
        let mut doc = preamble("demo");
        let (e0, h0) = close_entry(GENESIS, 0, "## Iteration 0 — READY\n- at: x\n");
        doc.push_str(&e0);
        let (e1, _) = close_entry(
            &h0,
            1,
            "## Iteration 1 — CONTINUE\n- agent: exit 0\n    ## Iteration 9 — DONE\n",
        );
        doc.push_str(&e1);
        doc
    }

    #[test]
    fn entries_chain_and_forged_headings_stay_text() {
        let p = parse(sample().as_bytes());
        assert_eq!(p.entries.len(), 2);
        assert!(p.entries.iter().all(|e| e.hash_ok));
        assert_eq!(p.last_closed_iteration(), Some((1, "CONTINUE".into())));
        assert_eq!(p.torn_tail_line, None);
    }

    #[test]
    fn torn_tail_and_rewrite_are_told_apart() {
        let doc = sample();
        let cut = doc.rfind("<!--").unwrap();
        let torn = parse(&doc.as_bytes()[..cut]);
        assert_eq!(torn.entries.len(), 2);
        assert!(torn.torn_tail_line.is_some());
        assert!(torn.first_broken().is_none());
        let rewritten = parse(doc.replace("exit 0", "exit 1").as_bytes());
        assert!(rewritten.torn_tail_line.is_none());
        assert_eq!(rewritten.first_broken().unwrap().line, 11);
    }

    #[test]
    fn a_tail_chains_from_its_first_marker() {
        let doc = sample();
        // From inside the first entry: its marker anchors the chain, entry 1 follows it.
        let cut = doc.find("- at: x").unwrap();
        let p = parse_tail(&doc.as_bytes()[cut..]).unwrap();
        assert_eq!(p.entries.len(), 1);
        assert_eq!(p.entries[0].line, 4);
        assert!(p.first_broken().is_none());
        assert_eq!(p.last_closed_iteration(), Some((1, "CONTINUE".into())));
        // A rewrite after the anchor is found at its line; a tail without a marker has no
        // anchor.
        let rewritten = doc[cut..].replace("exit 0", "exit 1");
        let p = parse_tail(rewritten.as_bytes()).unwrap();
        assert_eq!(p.first_broken().unwrap().line, 4);
        let torn = &doc[cut..doc.rfind("<!--").unwrap()];
        assert_eq!(parse_tail(torn.as_bytes()).unwrap().torn_tail_line, Some(4));
        assert!(parse_tail(b"## Iteration 3 \xe2\x80\x94 DONE\n- at: x\n").is_none());
    }

    #[test]
    fn headings_and_markers_are_read_by_the_runner_s_rule_only() {
        let h = "a".repeat(64);
        assert_eq!(
            marker_line(&format!("{MARKER_PREFIX}12 sha256={h} -->")),
            Some((12, h.as_str()))
        );
        for bad in [
            format!("{MARKER_PREFIX}+12 sha256={h} -->"),
            format!("{MARKER_PREFIX}12 sha256={} -->", "A".repeat(64)),
            format!("{MARKER_PREFIX} sha256={h} -->"),
            format!("{MARKER_PREFIX}12 sha256={h}0 -->"),
        ] {
            assert_eq!(marker_line(&bad), None, "{bad}");
        }
        assert_eq!(
            iteration_heading("## Iteration 7 — DONE"),
            Some((7, "DONE"))
        );
        for bad in [
            "## Iteration +7 — DONE",
            "## Iteration 7 — done",
            "## Iteration 7 — ",
            "## Iteration 1234567890 — DONE",
        ] {
            assert_eq!(iteration_heading(bad), None, "{bad}");
        }
    }

    #[test]
    fn neutralise_indents_and_strips_controls() {
        assert_eq!(
            neutralise("## x\n<!-- orbit:end iteration=1 -->\x1b[1m"),
            "    ## x\n    <!-- orbit:end iteration=1 -->[1m\n"
        );
    }
}
