//! The evidence `orbit recover` rebuilds a checkpoint from, read exactly as the bash
//! `recover.sh` reads it (line patterns, not a general JSON or markdown parser), so both
//! reach the same state.env. docs/RECOVER.md describes every pattern.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::process::Command;

use crate::contract::{EventName, Status};
use crate::progress::{self, INTERRUPTED};
use crate::{fsx, result_env};

/// How an iteration ended, as its `iteration_end` event or its progress.md heading spells
/// it: a status, or a capitalised word the contract does not know. An unknown word still
/// marks the iteration as ended but decides nothing else (no retry, no DONE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Status(Status),
    Unknown(String),
}

impl Ending {
    pub fn read(word: &str) -> Ending {
        Status::parse(word).map_or_else(|| Ending::Unknown(word.to_string()), Ending::Status)
    }

    /// The status, when the word is one.
    pub fn status(&self) -> Option<Status> {
        match self {
            Ending::Status(s) => Some(*s),
            Ending::Unknown(_) => None,
        }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ending::Status(s) => s.fmt(f),
            Ending::Unknown(w) => f.write_str(w),
        }
    }
}

/// The bytes of `data` up to and including its last newline: a torn last line (the tail of
/// an append that never finished) is not evidence.
pub fn complete_lines(data: &[u8]) -> &[u8] {
    match data.iter().rposition(|b| *b == b'\n') {
        Some(i) => &data[..=i],
        None => &[],
    }
}

/// `[0-9]{1,9}` at the start of `s`: the number and the rest.
fn take_num(s: &str) -> Option<(u64, &str)> {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    if end == 0 || end > 9 {
        return None;
    }
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// `[A-Z]+` at the start of `s`.
fn take_upper(s: &str) -> Option<(&str, &str)> {
    let end = s.bytes().take_while(u8::is_ascii_uppercase).count();
    if end == 0 {
        return None;
    }
    Some((&s[..end], &s[end..]))
}

/// `{"seq":S,"ts":"T","event":"E"` at the start of an event line: returns T, the event
/// (when E is one of the contract's) and the rest.
fn event_head(line: &str) -> Option<(&str, Option<EventName>, &str)> {
    let rest = line.strip_prefix("{\"seq\":")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = rest[digits..].strip_prefix(",\"ts\":\"")?;
    let end = rest.find('"')?;
    let (ts, rest) = (&rest[..end], &rest[end + 1..]);
    let rest = rest.strip_prefix(",\"event\":\"")?;
    let end = rest.find('"')?;
    Some((ts, EventName::parse(&rest[..end]), &rest[end + 1..]))
}

/// An `iteration_end` line as the runner writes it: the iteration and how it ended.
pub fn iteration_end(line: &str) -> Option<(u64, Ending)> {
    let (_, Some(EventName::IterationEnd), rest) = event_head(line)? else {
        return None;
    };
    let rest = rest.strip_prefix(",\"iteration\":")?;
    let (n, rest) = take_num(rest)?;
    let rest = rest.strip_prefix(",\"verdict\":\"")?;
    let (verdict, rest) = take_upper(rest)?;
    rest.starts_with('"').then(|| (n, Ending::read(verdict)))
}

/// A `loop_stop` line as the runner writes it: the status and reason the run ended with.
pub fn loop_stop(line: &str) -> Option<(String, String)> {
    let (_, Some(EventName::LoopStop), rest) = event_head(line)? else {
        return None;
    };
    let rest = rest.strip_prefix(",\"iteration\":")?;
    let (_, rest) = take_num(rest)?;
    let rest = rest.strip_prefix(",\"status\":\"")?;
    let (status, rest) = take_upper(rest)?;
    let rest = rest.strip_prefix("\",\"reason\":\"")?;
    let end = rest
        .bytes()
        .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
        .count();
    (end > 0 && rest[end..].starts_with('"')).then(|| (status.to_string(), rest[..end].to_string()))
}

/// A `loop_start` line: its time in epoch seconds.
pub fn loop_start(line: &str) -> Option<u64> {
    match event_head(line)? {
        (ts, Some(EventName::LoopStart), _) => iso_to_epoch(ts),
        _ => None,
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` to epoch seconds (years 1970 to 9999).
pub fn iso_to_epoch(ts: &str) -> Option<u64> {
    let b = ts.as_bytes();
    if b.len() != 20 {
        return None;
    }
    let shape_ok = b.iter().enumerate().all(|(i, c)| match i {
        4 | 7 => *c == b'-',
        10 => *c == b'T',
        13 | 16 => *c == b':',
        19 => *c == b'Z',
        _ => c.is_ascii_digit(),
    });
    if !shape_ok {
        return None;
    }
    let num = |a: usize, z: usize| ts[a..z].parse::<i64>().ok();
    let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mm, ss) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if y < 1970 || !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60
    {
        return None;
    }
    let days = days_from_civil(y, m, d);
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

/// Howard Hinnant's days-from-civil (the same arithmetic as recover.sh).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// What events.jsonl says: the last verdict of every iteration with an `iteration_end`
/// line, and the time of the first `loop_start`.
#[derive(Debug, Default, Clone)]
pub struct EventsEvidence {
    pub verdicts: BTreeMap<u64, Ending>,
    /// The 0-based line of each iteration's last `iteration_end`.
    pub end_lines: BTreeMap<u64, usize>,
    pub first_start: Option<u64>,
    /// The status and reason of the last `loop_stop`, unless a `recovery` came after it:
    /// how the loop stopped, when state.env cannot say.
    pub last_stop: Option<(String, String)>,
    /// Each iteration's last `iteration_result` and the `sha256` it gives its result.env
    /// (none from a runner that did not write it).
    pub results: BTreeMap<u64, Option<String>>,
    /// The last `state_write` or `recovery`: its 0-based line, its `gen`, and the sha256
    /// of the state.env it wrote (`sha256`, `state_sha256`), when it gives them.
    pub last_state_record: Option<StateRecord>,
    /// The 0-based line of the last `recovery` that sealed a broken journal: what came
    /// before it was read from a chain that broke.
    pub last_seal: Option<usize>,
}

impl EventsEvidence {
    /// Whether iteration `n`'s result.env must have an `iteration_result`: the runner
    /// writes one for every record since the first iteration it wrote one for.
    pub fn announces(&self, n: u64) -> bool {
        self.results.keys().next().is_some_and(|first| n >= *first)
    }
}

/// What the journal's last `state_write` or `recovery` says of the state.env it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateRecord {
    /// 0-based line in events.jsonl.
    pub line: usize,
    pub generation: Option<u64>,
    pub sha256: Option<String>,
}

/// The first whole-number member `,"<key>":N` (N of at most 9 digits, then `,` or `}`) in
/// an event line: what recover.sh's `,"<key>":([0-9]{1,9})[,}]` finds.
fn num_member(line: &str, key: &str) -> Option<u64> {
    let tag = format!(",\"{key}\":");
    line.match_indices(&tag).find_map(|(at, _)| {
        let (n, rest) = take_num(&line[at + tag.len()..])?;
        matches!(rest.bytes().next(), Some(b',' | b'}')).then_some(n)
    })
}

/// The first 64-hex-digit member `,"<key>":"<hex>"` in an event line: what recover.sh's
/// `,"<key>":"([0-9a-f]{64})"` finds.
fn hex_member<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let tag = format!(",\"{key}\":\"");
    line.match_indices(&tag).find_map(|(at, _)| {
        let at = at + tag.len();
        let hex = line.get(at..at + 64)?;
        (line[at + 64..].starts_with('"')
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then_some(hex)
    })
}

pub fn read_events(data: &[u8]) -> EventsEvidence {
    let text = String::from_utf8_lossy(complete_lines(data));
    let mut ev = EventsEvidence::default();
    for (i, line) in text.split_terminator('\n').enumerate() {
        if let Some((n, v)) = iteration_end(line) {
            ev.verdicts.insert(n, v);
            ev.end_lines.insert(n, i);
            continue;
        }
        if let Some(stop) = loop_stop(line) {
            ev.last_stop = Some(stop);
            continue;
        }
        match event_head(line) {
            Some((_, Some(EventName::Recovery), _)) => {
                ev.last_stop = None;
                ev.last_state_record = Some(StateRecord {
                    line: i,
                    generation: num_member(line, "gen"),
                    sha256: hex_member(line, "state_sha256").map(str::to_string),
                });
                if line.contains(",\"journal_break\":") {
                    ev.last_seal = Some(i);
                }
            }
            Some((_, Some(EventName::StateWrite), _)) => {
                ev.last_state_record = Some(StateRecord {
                    line: i,
                    generation: num_member(line, "gen"),
                    sha256: hex_member(line, "sha256").map(str::to_string),
                });
            }
            Some((_, Some(EventName::IterationResult), rest)) => {
                if let Some((n, after)) = rest.strip_prefix(",\"iteration\":").and_then(take_num)
                    && matches!(after.bytes().next(), Some(b',' | b'}'))
                {
                    ev.results
                        .insert(n, hex_member(line, "sha256").map(str::to_string));
                }
            }
            _ => {
                if ev.first_start.is_none() {
                    ev.first_start = loop_start(line);
                }
            }
        }
    }
    ev
}

/// Where the journal's hash chain first breaks, read line by line as recover.sh reads it:
/// the 0-based line, its byte offset, and why. A line must be
/// `{"seq":S,"ts":"...","event":"name","iteration":N[,...],"prev":"P","hash":"H"}` with
/// `H` the sha256 of the line without its `hash` member, `P` the line before's `H` (64
/// zeros for the first) and `S` one more than the line before's (1 for the first).
pub fn chain_break(complete: &[u8]) -> Option<(usize, usize, String)> {
    let mut prev = crate::events::GENESIS.to_string();
    let mut offset = 0usize;
    for (i, line) in complete.split(|b| *b == b'\n').enumerate() {
        if offset >= complete.len() {
            break;
        }
        let here = offset;
        offset += line.len() + 1;
        let Some((seq, body_prev, hash)) = chain_shape(line) else {
            return Some((i, here, "not an orbit event line".into()));
        };
        let mut without = line[..line.len() - 75].to_vec();
        without.push(b'}');
        if fsx::sha256_hex(&without) != hash {
            return Some((
                i,
                here,
                "the line's hash does not match its content (edited)".into(),
            ));
        }
        if body_prev != prev {
            return Some((
                i,
                here,
                "prev does not name the previous line's hash (a line was removed or reordered)"
                    .into(),
            ));
        }
        if seq != (i + 1).to_string() {
            return Some((i, here, format!("seq {seq} where {} was expected", i + 1)));
        }
        prev = hash.to_string();
    }
    None
}

/// A line's seq, prev and hash, when it has the shape of an event line (bytes, as bash
/// reads them under `LC_ALL=C`).
fn chain_shape(line: &[u8]) -> Option<(String, &str, &str)> {
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let n = digits(rest);
    if n == 0 || n > 18 {
        return None;
    }
    let seq = String::from_utf8_lossy(&rest[..n]).into_owned();
    let rest = rest[n..].strip_prefix(b",\"ts\":\"")?;
    let rest = &rest[rest.iter().position(|b| *b == b'"')? + 1..];
    let rest = rest.strip_prefix(b",\"event\":\"")?;
    let name = rest
        .iter()
        .take_while(|b| b.is_ascii_lowercase() || **b == b'_')
        .count();
    if name == 0 {
        return None;
    }
    let rest = rest[name..].strip_prefix(b"\",\"iteration\":")?;
    let it = digits(rest);
    if it == 0 || it > 18 {
        return None;
    }
    let rest = &rest[it..];
    // The end: ,"prev":"<64 hex>","hash":"<64 hex>"} (74 + 75 bytes); between the
    // iteration and it, nothing or more members (a comma first).
    if rest.len() < 149 {
        return None;
    }
    let mid = &rest[..rest.len() - 149];
    let prev = rest[rest.len() - 149..rest.len() - 75]
        .strip_prefix(b",\"prev\":\"")?
        .strip_suffix(b"\"")?;
    let hash = rest[rest.len() - 75..]
        .strip_prefix(b",\"hash\":\"")?
        .strip_suffix(b"\"}")?;
    let hex = |h: &[u8]| {
        h.len() == 64
            && h.iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    };
    if !(mid.is_empty() || mid.starts_with(b",")) || !hex(prev) || !hex(hash) {
        return None;
    }
    Some((
        seq,
        std::str::from_utf8(prev).ok()?,
        std::str::from_utf8(hash).ok()?,
    ))
}

fn is_marker(line: &str) -> bool {
    progress::marker_line(line).is_some()
}

/// What progress.md says: how every iteration entry closed by an end marker ended (the
/// last entry for a number wins; INTERRUPTED entries do not close an iteration).
pub fn read_progress(data: &[u8]) -> BTreeMap<u64, Ending> {
    let text = String::from_utf8_lossy(data);
    let mut out = BTreeMap::new();
    let mut current: Option<(u64, &str)> = None;
    for line in text.split('\n') {
        if line.starts_with("## Recovery — ") {
            current = None;
        } else if line.starts_with("## Iteration ") {
            current = progress::iteration_heading(line);
        } else if is_marker(line)
            && let Some((n, status)) = current.take()
            && status != INTERRUPTED
        {
            out.insert(n, Ending::read(status));
        }
    }
    out
}

/// The runner's rule for a torn progress.md: when the last entry heading comes after the
/// last end marker, everything from that heading on is an unclosed entry. Returns the
/// byte offset to cut at, or `Some(len)` with `needs_newline` when only a final newline
/// is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressTail {
    Clean,
    /// Cut at this byte offset (an unclosed entry).
    Torn(usize),
    /// The last line is a closed marker without its newline.
    MissingNewline,
}

pub fn progress_tail(data: &[u8]) -> ProgressTail {
    let mut last_marker: Option<usize> = None;
    let mut last_heading: Option<(usize, usize)> = None;
    let mut offset = 0usize;
    for (i, raw) in data.split(|b| *b == b'\n').enumerate() {
        if offset >= data.len() && raw.is_empty() {
            break;
        }
        let line = String::from_utf8_lossy(raw);
        if is_marker(&line) {
            last_marker = Some(i);
        }
        if line.starts_with("## Iteration ") || line.starts_with("## Recovery ") {
            last_heading = Some((i, offset));
        }
        offset += raw.len() + 1;
    }
    match last_heading {
        None => ProgressTail::Clean,
        Some((line, off)) if last_marker.is_none_or(|m| m < line) => ProgressTail::Torn(off),
        Some(_) if !data.ends_with(b"\n") => ProgressTail::MissingNewline,
        Some(_) => ProgressTail::Clean,
    }
}

/// The hash the next progress entry chains on: the last end marker's (as the runner's
/// `state_progress_open`), 64 zeros when there is none.
pub fn progress_prev(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    text.split('\n')
        .rev()
        .find_map(|l| progress::marker_line(l).map(|(_, h)| h.to_string()))
        .unwrap_or_else(|| crate::progress::GENESIS.to_string())
}

/// The next seq and prev of events.jsonl (complete lines only), as the runner's
/// `state_events_open` finds them.
pub fn events_tip(complete: &[u8]) -> (u64, String) {
    let text = String::from_utf8_lossy(complete);
    let Some(last) = text.split_terminator('\n').next_back() else {
        return (0, crate::events::GENESIS.to_string());
    };
    if let Some(rest) = last.strip_prefix("{\"seq\":") {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let tail_ok = last.len() > 75 && last.ends_with("\"}");
        if (1..=18).contains(&digits) && tail_ok && rest[digits..].starts_with(',') {
            let hash_part = &last[last.len() - 75..];
            if let Some(h) = hash_part
                .strip_prefix(",\"hash\":\"")
                .and_then(|h| h.strip_suffix("\"}"))
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                && let Ok(seq) = rest[..digits].parse::<u64>()
            {
                return (seq, h.to_string());
            }
        }
    }
    let count = text.split_terminator('\n').count() as u64;
    (count, fsx::sha256_hex(last.as_bytes()))
}

/// Iterations with a commit carrying `Orbit-Loop: <name>` and `Orbit-Iteration: N`, on any
/// branch or HEAD.
pub fn git_iterations(repo: &Path, name: &str) -> BTreeSet<u64> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "log",
            "HEAD",
            "--branches",
            "--format=%(trailers:key=Orbit-Loop,valueonly,separator=%x2C)|%(trailers:key=Orbit-Iteration,valueonly,separator=%x2C)",
        ])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output();
    let mut set = BTreeSet::new();
    let Ok(out) = out else {
        return set;
    };
    if !out.status.success() {
        return set;
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((loop_name, it)) = line.split_once('|')
            && loop_name == name
            && let Some((n, "")) = take_num(it)
        {
            set.insert(n);
        }
    }
    set
}

/// Iterations committed on `branch` with `Orbit-Loop: <name>` and `Orbit-Iteration: N`.
pub fn branch_iterations(repo: &Path, branch: &str, name: &str) -> BTreeSet<u64> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .arg("log")
        .arg(format!("refs/heads/{branch}"))
        .arg("--format=%(trailers:key=Orbit-Loop,valueonly,separator=%x2C)|%(trailers:key=Orbit-Iteration,valueonly,separator=%x2C)")
        .arg("--")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output();
    let mut set = BTreeSet::new();
    let Ok(out) = out else {
        return set;
    };
    if !out.status.success() {
        return set;
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((loop_name, it)) = line.split_once('|')
            && loop_name == name
            && let Some((n, "")) = take_num(it)
        {
            set.insert(n);
        }
    }
    set
}

/// The tree of `branch`'s head commit.
pub fn branch_tree(repo: &Path, branch: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--verify", "-q"])
        .arg(format!("refs/heads/{branch}^{{tree}}"))
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !id.is_empty()).then_some(id)
}

/// The iterations whose directory holds a result.env, in order.
pub fn recorded_iterations(dir: &Path) -> Vec<u64> {
    let Ok(rd) = std::fs::read_dir(dir.join("iterations")) else {
        return Vec::new();
    };
    let mut out: Vec<u64> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (n, rest) = take_num(&name)?;
            (rest.is_empty() && name.len() >= 6).then_some(n)
        })
        .filter(|n| has_result(dir, *n))
        .collect();
    out.sort_unstable();
    out
}

/// Whether a git branch exists.
pub fn branch_exists(repo: &Path, branch: &str) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--verify", "-q"])
        .arg(format!("refs/heads/{branch}"))
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Whether an iteration's result.env is a record (it parses as one) whose verdict is DONE.
pub fn result_says_done(dir: &Path, n: u64) -> bool {
    fsx::read_loop_file(&iteration_dir(dir, n).join("result.env"))
        .is_ok_and(|d| result_env::parse(&d).is_ok_and(|r| r.verdict() == Some(Status::Done)))
}

pub fn iteration_dir(dir: &Path, n: u64) -> std::path::PathBuf {
    dir.join("iterations").join(format!("{n:06}"))
}

/// Whether iteration `n` has a result.env (as a regular file: anything else there is a
/// `loop_tamper` recover refuses before it reads the records).
pub fn has_result(dir: &Path, n: u64) -> bool {
    std::fs::symlink_metadata(iteration_dir(dir, n).join("result.env")).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trips_with_fsx() {
        for t in [0u64, 951_782_400, 1_796_016_519, 4_102_444_800] {
            assert_eq!(iso_to_epoch(&fsx::iso_utc(t)), Some(t));
        }
        assert_eq!(iso_to_epoch("2026-11-30T05:28:39"), None);
        assert_eq!(iso_to_epoch("x026-11-30T05:28:39Z"), None);
    }

    #[test]
    fn event_lines_are_matched_as_the_runner_writes_them() {
        let line = crate::events::build_line(
            3,
            "2026-11-30T00:00:00Z",
            EventName::IterationEnd.as_str(),
            7,
            &[("verdict", "\"BLOCKED\"".into())],
            crate::events::GENESIS,
        );
        assert_eq!(
            iteration_end(line.trim_end()),
            Some((7, Ending::Status(Status::Blocked)))
        );
        let unknown = line.replace("BLOCKED", "LATER");
        assert_eq!(
            iteration_end(unknown.trim_end()),
            Some((7, Ending::Unknown("LATER".into())))
        );
        assert_eq!(
            iteration_end("{\"seq\":1,\"ts\":\"x\",\"event\":\"iteration_end\",\"iteration\":x}"),
            None
        );
        let ev = read_events(format!("{line}{}", &line[..40]).as_bytes());
        assert_eq!(ev.verdicts.len(), 1);
        let (seq, prev) = events_tip(line.as_bytes());
        assert_eq!(seq, 3);
        assert_eq!(prev, crate::events::split_hash(line.trim_end()).unwrap().1);
    }

    #[test]
    fn the_chain_breaks_where_the_journal_reader_says_it_does() {
        let mut prev = crate::events::GENESIS.to_string();
        let mut lines = Vec::new();
        for seq in 1..=5u64 {
            let line = crate::events::build_line(
                seq,
                "2026-11-30T00:00:00Z",
                EventName::StateWrite.as_str(),
                seq,
                &[
                    ("gen", seq.to_string()),
                    ("sha256", format!("\"{}\"", "a".repeat(64))),
                ],
                &prev,
            );
            prev = crate::events::split_hash(line.trim_end())
                .unwrap()
                .1
                .to_string();
            lines.push(line);
        }
        let whole = lines.concat();
        assert_eq!(chain_break(whole.as_bytes()), None);
        assert_eq!(crate::events::read(whole.as_bytes()).error, None);
        let ev = read_events(whole.as_bytes());
        let rec = ev.last_state_record.unwrap();
        assert_eq!((rec.line, rec.generation), (4, Some(5)));
        assert_eq!(rec.sha256.as_deref(), Some("a".repeat(64).as_str()));
        let offset_of = |k: usize| lines[..k].concat().len();
        // Edited, removed, garbage: the same line as the journal reader, at its offset.
        let edited = whole.replacen("\"gen\":3", "\"gen\":9", 1);
        let removed = [&lines[..2], &lines[3..]].concat().concat();
        let garbage = format!("{}garbage\n{}", lines[..2].concat(), lines[2..].concat());
        for (text, k) in [(edited, 2usize), (removed, 2), (garbage, 2)] {
            let (line, off, _) = chain_break(text.as_bytes()).unwrap();
            assert_eq!((line, off), (k, offset_of(k)), "{text}");
            assert_eq!(
                crate::events::read(text.as_bytes()).error.map(|e| e.line()),
                Some(k + 1)
            );
        }
    }

    #[test]
    fn progress_entries_close_only_with_a_marker() {
        let mut doc = crate::progress::preamble("t");
        let (e1, h1) = crate::progress::close_entry(
            crate::progress::GENESIS,
            1,
            "## Iteration 1 — CONTINUE\n    ## Iteration 9 — DONE\n",
        );
        doc.push_str(&e1);
        let (e2, h2) = crate::progress::close_entry(&h1, 2, "## Iteration 2 — INTERRUPTED\n");
        doc.push_str(&e2);
        // A word that is no status still closes its iteration; it decides nothing else.
        let (e3, _) = crate::progress::close_entry(&h2, 3, "## Iteration 3 — LATER\n");
        let mut with_unknown = doc.clone();
        with_unknown.push_str(&e3);
        assert_eq!(
            read_progress(with_unknown.as_bytes()).get(&3),
            Some(&Ending::Unknown("LATER".into()))
        );
        doc.push_str("## Iteration 3 — DONE\n- torn");
        let p = read_progress(doc.as_bytes());
        assert_eq!(
            p.into_iter().collect::<Vec<_>>(),
            vec![(1, Ending::Status(Status::Continue))]
        );
        let cut = doc.find("## Iteration 3").unwrap();
        assert_eq!(progress_tail(doc.as_bytes()), ProgressTail::Torn(cut));
        assert_eq!(progress_tail(&doc.as_bytes()[..cut]), ProgressTail::Clean);
        assert_eq!(
            progress_tail(&doc.as_bytes()[..cut - 2]),
            ProgressTail::MissingNewline
        );
    }

    #[test]
    fn done_needs_a_record_that_parses() {
        let dir = tempfile::tempdir().unwrap();
        let idir = iteration_dir(dir.path(), 4);
        std::fs::create_dir_all(&idir).unwrap();
        assert!(!result_says_done(dir.path(), 4), "no record");
        for (record, done) in [
            ("ITERATION=4\nVERDICT=DONE\n", true),
            ("ITERATION=4\nVERDICT=CONTINUE\n", false),
            ("ITERATION=4\nVERDICT=done\n", false),
            // Not a record: an unknown key, a duplicate, a line that is no KEY=VALUE.
            ("ITERATION=4\nCLAIM=yes\nVERDICT=DONE\n", false),
            ("VERDICT=CONTINUE\nVERDICT=DONE\n", false),
            ("the goal is met\nVERDICT=DONE\n", false),
        ] {
            std::fs::write(idir.join("result.env"), record).unwrap();
            assert_eq!(result_says_done(dir.path(), 4), done, "{record:?}");
        }
    }
}
