//! `envelope.json`: what a DONE verified, bound to the commit it verified (the runner's
//! lib/runner/envelope.sh writes it, and the same bytes as the DONE commit's git note under
//! `refs/notes/orbit`). One line of compact JSON in a fixed key order; its last member,
//! `digest`, is the sha256 of the line with its `,"digest":"<64 hex>"` member removed, as a
//! journal line's `hash` is.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::Deserialize;

use crate::fsx;

/// The envelope's file in the loop directory.
pub const FILE: &str = "envelope.json";
/// The notes ref that carries the envelope on the DONE commit.
pub const NOTES_REF: &str = "refs/notes/orbit";
/// The envelope format this orbit reads (its `envelope` member).
pub const FORMAT: u64 = 1;
/// The contract major version an envelope must name.
pub const CONTRACT_MAJOR: &str = "2";

/// A file that defines a check, with its sha256 when the DONE was reached.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct DefFile {
    pub path: String,
    /// `loop` (the loop directory) or `tree` (the DONE commit's tree); absent: the tree.
    #[serde(rename = "in", default)]
    pub place: Option<String>,
    pub sha256: String,
}

impl DefFile {
    /// Whether the file is one of the loop directory's (else of the commit's tree).
    pub fn in_loop(&self) -> bool {
        self.place.as_deref() == Some("loop")
    }
}

/// One check as the DONE ran it.
#[derive(Debug, Clone, Deserialize)]
pub struct Check {
    pub name: String,
    pub command: String,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub passes: Option<u64>,
    #[serde(default)]
    pub tests: Option<serde_json::Value>,
    #[serde(default)]
    pub files: Vec<DefFile>,
}

/// The holdout's verdict and its definitions' sha256 (never their contents).
#[derive(Debug, Clone, Deserialize)]
pub struct Holdout {
    pub verdict: String,
    #[serde(default)]
    pub checks: Option<u64>,
    #[serde(default)]
    pub definitions: Vec<DefFile>,
}

/// What the DONE gate of `adequacy = "gate"` measured of the change (contract 6.2): an
/// envelope written before it, or by a loop of another mode, has none.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Adequacy {
    pub hunks_needed: u64,
    pub hunks_tried: u64,
    pub mutants_killed: u64,
    pub mutants_tried: u64,
    /// The sha256 of the measure's details (adequacy.json's `details_sha256`).
    pub details_sha256: String,
}

/// The envelope's members (those orbit verify reads; the rest stay in `raw`).
#[derive(Debug, Clone, Deserialize)]
pub struct Envelope {
    pub envelope: u64,
    pub contract: String,
    #[serde(rename = "loop")]
    pub loop_name: String,
    #[serde(default)]
    pub base_commit: Option<String>,
    pub commit: Option<String>,
    pub tree: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
    #[serde(default)]
    pub origin_branch: Option<String>,
    pub checks: Vec<Check>,
    #[serde(default)]
    pub protected: Vec<DefFile>,
    pub pass_k: u64,
    #[serde(default)]
    pub holdout: Option<Holdout>,
    #[serde(default)]
    pub iterations: Option<u64>,
    #[serde(default)]
    pub adequacy: Option<Adequacy>,
    pub journal_head: Option<String>,
    pub digest: String,
}

/// Why an envelope's bytes are not an envelope this orbit can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// Not one line of JSON ending in its digest, or the digest does not match.
    Corrupt(String),
    /// A format or contract major version this orbit does not know.
    Version(String),
}

impl Unreadable {
    pub fn describe(&self) -> &str {
        match self {
            Unreadable::Corrupt(s) | Unreadable::Version(s) => s,
        }
    }
}

/// The line without its digest member, and the digest it carries.
pub fn split_digest(line: &str) -> Option<(String, &str)> {
    const KEY: &str = ",\"digest\":\"";
    let body = line.strip_suffix("\"}")?;
    let at = body.rfind(KEY)?;
    let digest = &body[at + KEY.len()..];
    if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((format!("{}}}", &body[..at]), digest))
}

/// The digest an envelope line without its digest member must carry.
pub fn digest_of(line_without_digest: &str) -> String {
    fsx::sha256_hex(line_without_digest.as_bytes())
}

/// Seals a line without its digest member: the envelope's bytes (with its newline).
pub fn seal(line_without_digest: &str) -> String {
    let digest = digest_of(line_without_digest);
    format!(
        "{},\"digest\":\"{digest}\"}}\n",
        &line_without_digest[..line_without_digest.len() - 1]
    )
}

/// Parses an envelope's bytes (one line, an optional newline), its digest checked and its
/// version known. Never panics on arbitrary bytes.
pub fn parse(bytes: &[u8]) -> Result<Envelope, Unreadable> {
    let corrupt = |m: &str| Unreadable::Corrupt(m.to_string());
    let text = std::str::from_utf8(bytes).map_err(|_| corrupt("the envelope is not UTF-8"))?;
    let line = text.strip_suffix('\n').unwrap_or(text);
    if line.is_empty() {
        return Err(corrupt("the envelope is empty"));
    }
    if line.contains('\n') {
        return Err(corrupt("the envelope is more than one line"));
    }
    let (without, carried) = split_digest(line)
        .ok_or_else(|| corrupt("the envelope does not end in its digest (truncated or edited)"))?;
    if digest_of(&without) != carried {
        return Err(corrupt(
            "the envelope's digest does not match its content (edited after it was written)",
        ));
    }
    let value: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| Unreadable::Corrupt(format!("the envelope is not JSON ({e})")))?;
    match value.get("envelope").and_then(|v| v.as_u64()) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(Unreadable::Version(format!(
                "envelope format {other}: this orbit reads format {FORMAT}; update orbit"
            )));
        }
        None => return Err(corrupt("the envelope names no format (`envelope`)")),
    }
    let contract = value.get("contract").and_then(|v| v.as_str()).unwrap_or("");
    if contract.split('.').next() != Some(CONTRACT_MAJOR) {
        return Err(Unreadable::Version(format!(
            "contract {contract:?}: this orbit reads envelopes of contract {CONTRACT_MAJOR}.x; update orbit"
        )));
    }
    serde_json::from_value(value)
        .map_err(|e| Unreadable::Corrupt(format!("the envelope lacks a member ({e})")))
}

/// Runs git in `repo` (the reads of a hand-off: its notes, commits and blobs); its stdout, or None when it fails.
pub(crate) fn git(repo: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

/// git's answer as one trimmed line.
pub(crate) fn git_line(repo: &Path, args: &[&str]) -> Option<String> {
    git(repo, args).map(|b| String::from_utf8_lossy(&b).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> String {
        seal(
            r#"{"envelope":1,"contract":"2.2.0","loop":"x","commit":"a","tree":"b","checks":[{"name":"c","command":"true","files":[]}],"pass_k":2,"journal_head":null}"#,
        )
    }

    #[test]
    fn a_sealed_envelope_parses_and_edits_truncations_and_versions_do_not() {
        let s = sample();
        let e = parse(s.as_bytes()).unwrap();
        assert_eq!(e.loop_name, "x");
        assert_eq!(e.pass_k, 2);
        let edited = s.replace("\"pass_k\":2", "\"pass_k\":1");
        assert!(matches!(
            parse(edited.as_bytes()),
            Err(Unreadable::Corrupt(m)) if m.contains("does not match")
        ));
        for cut in [1, 10, s.len() / 2, s.len() - 2] {
            assert!(matches!(
                parse(&s.as_bytes()[..cut]),
                Err(Unreadable::Corrupt(_))
            ));
        }
        let v2 = seal(
            &s.replace("\"envelope\":1", "\"envelope\":2")
                .replace(&s[s.find(",\"digest\"").unwrap()..], "}"),
        );
        assert!(matches!(parse(v2.as_bytes()), Err(Unreadable::Version(_))));
        assert!(parse(b"\xff\xfe").is_err());
        assert!(parse(b"").is_err());
    }

    #[test]
    fn an_envelope_without_adequacy_figures_reads_as_unmeasured_and_one_with_them_reads_them() {
        // An envelope written before the gate's figures, or by a loop of another mode.
        assert_eq!(parse(sample().as_bytes()).unwrap().adequacy, None);
        let with = seal(
            r#"{"envelope":1,"contract":"2.4.0","loop":"x","commit":"a","tree":"b","checks":[],"pass_k":2,"adequacy":{"hunks_needed":1,"hunks_tried":2,"mutants_killed":3,"mutants_tried":4,"details_sha256":"ab"},"journal_head":null}"#,
        );
        let a = parse(with.as_bytes()).unwrap().adequacy.unwrap();
        assert_eq!(
            (
                a.hunks_needed,
                a.hunks_tried,
                a.mutants_killed,
                a.mutants_tried
            ),
            (1, 2, 3, 4)
        );
        assert_eq!(a.details_sha256, "ab");
    }
}
