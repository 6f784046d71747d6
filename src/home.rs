//! pins.home: what the runner holds outside the repository (contract 7), the engine's
//! user-level files and the env file as the loop's first run found them. This module reads
//! the record, computes the same record of the files as they are now with the runner's own
//! perl program (`lib/home_record.sh`, so that the runner, the audit and recover agree byte
//! for byte), and says of each held path that differs what changed and, where it can be
//! told, what was added and how to take exactly that away again.
//!
//! The record keeps hashes, never a copy (the env file holds keys; claude's file the
//! user's account): what was *added* can be told, by finding the smallest set of entries
//! (an MCP server, a project's allowed tool, a file in a held directory) whose removal gives
//! the recorded hash again; what was *changed* cannot, and is never guessed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::contract::PINS_HOME;
use crate::fsx;

/// How long the perl program may take before it is given up.
const PERL_LIMIT: Duration = Duration::from_secs(60);

/// One held path: a header line of the record, `#<TAB>KIND<TAB>PATH<TAB>ARG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub kind: String,
    pub path: String,
    pub arg: String,
}

/// The values a record gives one held path: its own line (1-based in pins.home), its value,
/// and for a directory each entry's path and value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Values {
    line: usize,
    value: String,
    entries: Vec<(String, String)>,
}

/// How a change is taken away, exactly: the file rewritten without what was added (its
/// record then the recorded one, checked before it is offered), or the added files removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    Rewrite(Vec<u8>),
    Remove(Vec<PathBuf>),
}

/// A held path that differs from the record of the loop's first run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    /// The line of its record in pins.home (1-based).
    pub line: usize,
    /// What was added, when it can be told (`mcpServers.evil`, a file of a directory).
    pub added: Vec<String>,
    /// What it holds now, when what was added cannot be told (the names, never a value).
    pub holds: Vec<String>,
    /// What changed, in words, when nothing added can be told.
    pub why: String,
    pub undo: Option<Undo>,
}

impl Change {
    /// What changed, in a sentence: the path, then what was added or what it holds now.
    pub fn describe(&self) -> String {
        if !self.added.is_empty() {
            let shown: Vec<&str> = self.added.iter().take(10).map(String::as_str).collect();
            let more = self.added.len().saturating_sub(10);
            return format!(
                "{} holds what the loop's first run did not find there: added {}{}",
                self.path,
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
        }
        let holds = if self.holds.is_empty() {
            String::new()
        } else {
            let shown: Vec<&str> = self.holds.iter().take(10).map(String::as_str).collect();
            format!(
                "; what it holds now: {}{}",
                shown.join(", "),
                if self.holds.len() > 10 { ", ..." } else { "" }
            )
        };
        format!(
            "{} changed since the loop's first run held it: {}{holds}",
            self.path, self.why
        )
    }
}

/// pins.home's held paths and their recorded values.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub held: Vec<Held>,
    /// The record's text as the runner wrote it (no trailing newline).
    text: String,
}

/// A path of a record line, its `\n` and `\\` escapes undone.
fn unescape(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut it = p.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Record {
    /// The record of a loop directory; `None` when it has none (the loop never ran, or was
    /// rendered before the record existed).
    pub fn read(dir: &Path) -> Option<Record> {
        let bytes = fsx::read_loop_file(&dir.join(PINS_HOME)).ok()?;
        Some(Record::parse(&String::from_utf8_lossy(&bytes)))
    }

    pub fn parse(text: &str) -> Record {
        let text = text.strip_suffix('\n').unwrap_or(text).to_string();
        let held = text
            .lines()
            .filter_map(|l| l.strip_prefix("#\t"))
            .filter_map(|l| {
                let mut f = l.splitn(3, '\t');
                Some(Held {
                    kind: f.next()?.to_string(),
                    path: f.next()?.to_string(),
                    arg: f.next().unwrap_or("").to_string(),
                })
            })
            .collect();
        Record { held, text }
    }

    /// The spec lines the perl program reads (`KIND<TAB>PATH<TAB>ARG`).
    fn specs(&self) -> String {
        self.held
            .iter()
            .map(|h| format!("{}\t{}\t{}\n", h.kind, h.path, h.arg))
            .collect()
    }

    /// The values of each held path, in the order of the header (the perl program writes
    /// them so): a path's own line, then, for a directory, the lines under it.
    fn values(&self, text: &str) -> Vec<Values> {
        let lines: Vec<(usize, &str, &str)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.starts_with('#'))
            .filter_map(|(i, l)| l.split_once("  ").map(|(v, p)| (i + 1, v, p)))
            .collect();
        let mut out = Vec::new();
        let mut k = 0;
        for h in &self.held {
            let mut v = Values::default();
            if let Some((line, value, path)) = lines.get(k)
                && unescape(path) == h.path
            {
                v.line = *line;
                v.value = value.to_string();
                k += 1;
            }
            if h.kind == "dir" {
                let under = format!("{}/", h.path);
                while let Some((_, value, path)) = lines.get(k) {
                    let p = unescape(path);
                    if !p.starts_with(&under) {
                        break;
                    }
                    v.entries.push((p, value.to_string()));
                    k += 1;
                }
            }
            out.push(v);
        }
        out
    }

    /// The held paths that differ now from the record, each with what can be told of it.
    /// An error when the record of now cannot be computed (no perl, or no JSON::PP or
    /// Digest::SHA), saying so.
    pub fn changes(&self) -> Result<Vec<Change>, String> {
        if self.held.is_empty() {
            return Ok(Vec::new());
        }
        let now = run_perl(&home_program(), self.specs().as_bytes())?;
        let now = String::from_utf8_lossy(&now);
        let now = now.strip_suffix('\n').unwrap_or(&now);
        if now == self.text {
            return Ok(Vec::new());
        }
        let (was, is) = (self.values(&self.text), self.values(now));
        let mut out = Vec::new();
        let mut json = Vec::new();
        for ((h, w), n) in self.held.iter().zip(&was).zip(&is) {
            if w.value == n.value && w.entries == n.entries {
                continue;
            }
            let mut c = Change {
                path: h.path.clone(),
                line: w.line.max(1),
                added: Vec::new(),
                holds: Vec::new(),
                why: String::new(),
                undo: None,
            };
            match h.kind.as_str() {
                "file" => file_change(&mut c, w, n),
                "dir" => dir_change(&mut c, w, n),
                "json" | "json-projects" => {
                    json.push((out.len(), h.clone(), w.value.clone()));
                }
                _ => {
                    c.why =
                        "the record keeps only a hash of it, so what changed cannot be told".into();
                }
            }
            out.push(c);
        }
        if !json.is_empty() {
            explain_json(&mut out, &json)?;
        }
        Ok(out)
    }
}

/// A held file: one that appeared where there was none is taken away by removing it; any
/// other change cannot be told (its hash is all there is).
fn file_change(c: &mut Change, was: &Values, now: &Values) {
    if was.value == "absent" && (is_sha(&now.value) || now.value.starts_with("link:")) {
        c.added.push("the file (there was none)".into());
        c.undo = Some(Undo::Remove(vec![PathBuf::from(&c.path)]));
        return;
    }
    c.why = match now.value.as_str() {
        "absent" => "it is gone".to_string(),
        _ => "the record keeps only its sha256, so what changed cannot be told".to_string(),
    };
}

/// A held directory: files added, none changed or gone, are taken away by removing them.
fn dir_change(c: &mut Change, was: &Values, now: &Values) {
    let added: Vec<&(String, String)> = now
        .entries
        .iter()
        .filter(|(p, _)| !was.entries.iter().any(|(q, _)| q == p))
        .collect();
    let changed: Vec<&str> = was
        .entries
        .iter()
        .filter(|e| !now.entries.contains(e))
        .map(|(p, _)| p.as_str())
        .collect();
    let root_ok = was.value == now.value || (was.entries.is_empty() && was.value == "absent");
    if changed.is_empty()
        && root_ok
        && !added.is_empty()
        && added
            .iter()
            .all(|(_, v)| is_sha(v) || v.starts_with("link:"))
    {
        c.added = added.iter().map(|(p, _)| p.clone()).collect();
        c.undo = Some(Undo::Remove(
            added.iter().map(|(p, _)| PathBuf::from(p)).collect(),
        ));
        return;
    }
    c.why = if changed.is_empty() {
        "the directory itself is not what it was".to_string()
    } else {
        format!(
            "{} changed or gone (the record keeps only hashes, so how cannot be told)",
            changed.join(", ")
        )
    };
    c.holds = now.entries.iter().map(|(p, _)| p.clone()).collect();
}

fn is_sha(v: &str) -> bool {
    v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The JSON projections that differ: the perl program looks for the smallest set of
/// entries whose removal gives the recorded hash, and writes the file without them.
fn explain_json(out: &mut [Change], json: &[(usize, Held, String)]) -> Result<(), String> {
    let input: String = json
        .iter()
        .map(|(_, h, v)| format!("{}\t{}\t{}\t{}\n", h.kind, h.path, h.arg, v))
        .collect();
    let said = run_perl(&explain_program(), input.as_bytes())?;
    let said = String::from_utf8_lossy(&said);
    let mut lines = said.lines();
    for (k, _, _) in json {
        let c = &mut out[*k];
        c.why = "no set of added entries explains the change (the record keeps only a hash of what it held, so what changed cannot be told)".into();
        for line in lines.by_ref() {
            let (tag, rest) = line.split_at(line.len().min(2));
            match tag {
                "A " => c.added.push(rest.to_string()),
                "H " => c.holds.push(rest.to_string()),
                "U " => c.why = "it cannot be read as JSON now".into(),
                "W " => {
                    if let Some(bytes) = hex(rest) {
                        c.undo = Some(Undo::Rewrite(bytes));
                    }
                }
                _ => break,
            }
        }
        if c.undo.is_none() && !c.added.is_empty() {
            // Told, but the file cannot be written back exactly: said, not undone.
            c.holds = std::mem::take(&mut c.added);
        }
    }
    Ok(())
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The perl subroutines of the runner's record (templates/lib/perl/home_record.pl, which
/// lib/home_record.sh holds as `HOME_PERL_SUBS`), then every engine's reader of its own
/// kinds (a loop's scripts hold their engine's alone; a record read here may be any
/// engine's): the same files the scripts hold.
fn record_subs() -> String {
    [
        crate::render::PERL_HOME_RECORD,
        crate::render::PERL_HOME_JSON,
        crate::render::PERL_HOME_CLAUDE,
        crate::render::PERL_HOME_CODEX,
        crate::render::PERL_HOME_COPILOT,
    ]
    .concat()
}

/// The runner's record program: the spec lines on stdin, the record on stdout.
fn home_program() -> String {
    format!("{}{}", record_subs(), crate::render::PERL_HOME_RECORD_ONCE)
}

/// What a JSON projection's change is. Input lines `KIND<TAB>PATH<TAB>ARG<TAB>RECORDED`;
/// for each, `A ITEM` per entry added (the smallest set whose removal gives the recorded
/// hash, sets of up to three entries tried), `W HEX` the file's bytes without them (checked:
/// read back, its projection hashes to the recorded value), or `H ITEM` per entry it holds
/// now when none is found (`U` when it cannot be read), then `.`.
fn explain_program() -> String {
    format!("{}{}", record_subs(), crate::render::PERL_HOME_EXPLAIN)
}

/// Runs a perl program with `input` on stdin, bounded: its stdout, or why it gave none.
fn run_perl(program: &str, input: &[u8]) -> Result<Vec<u8>, String> {
    let no_perl = "perl with its core modules JSON::PP and Digest::SHA is needed to compare the held files (install perl)";
    let mut child = Command::new("perl")
        .arg("-e")
        .arg(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|_| no_perl.to_string())?;
    let mut stdin = child.stdin.take().ok_or(no_perl)?;
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let mut stdout = child.stdout.take().ok_or(no_perl)?;
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let mut stderr = child.stderr.take().ok_or(no_perl)?;
    let errs = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() < PERL_LIMIT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "perl did not compute the held files' record within {}s",
                    PERL_LIMIT.as_secs()
                ));
            }
        }
    };
    let _ = writer.join();
    let out = reader.join().unwrap_or_default();
    let err = errs.join().unwrap_or_default();
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        return Err(format!(
            "{no_perl}: {}",
            err.lines().next().unwrap_or("perl failed")
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runners_program_is_the_one_its_part_holds() {
        let subs = record_subs();
        assert!(subs.contains("sub home_record"), "{subs}");
        for kind in ["json-projects", "toml", "json"] {
            assert!(
                subs.contains(&format!("home_reader(\"{kind}\", ")),
                "{kind}: {subs}"
            );
        }
        let part = crate::render::LIB_HOME_RECORD;
        assert!(
            part.contains("HOME_PERL_SUBS='\n@perl:home_record.pl@\n'${HOME_PERL_ENGINE-}"),
            "{part}"
        );
        assert!(part.contains("@perl:home_record_once.pl@"), "{part}");
        // Each engine's part places its reader as orbit reads it.
        for (engine, readers) in [
            (
                crate::render::LIB_ENGINE_CLAUDE,
                "@perl:home_json.pl@\n@perl:home_claude.pl@",
            ),
            (crate::render::LIB_ENGINE_CODEX, "@perl:home_codex.pl@"),
            (
                crate::render::LIB_ENGINE_COPILOT,
                "@perl:home_json.pl@\n@perl:home_copilot.pl@",
            ),
        ] {
            assert!(
                engine.contains(&format!("HOME_PERL_ENGINE='\n{readers}\n'")),
                "{engine}"
            );
        }
    }

    #[test]
    fn a_record_is_split_by_held_path() {
        let text = "#\tfile\t/h/.claude/settings.json\t\n#\tdir\t/h/.claude/skills\t\n#\tjson-projects\t/h/.claude.json\t/w\nabsent  /h/.claude/settings.json\ndir  /h/.claude/skills\nabc  /h/.claude/skills/a/SKILL.md\nkeys:1  /h/.claude.json\n";
        let r = Record::parse(text);
        assert_eq!(r.held.len(), 3);
        assert_eq!(r.held[2].arg, "/w");
        let v = r.values(&r.text);
        assert_eq!(v[0].value, "absent");
        assert_eq!(v[0].line, 4);
        assert_eq!(
            v[1].entries,
            vec![("/h/.claude/skills/a/SKILL.md".into(), "abc".into())]
        );
        assert_eq!(v[2].value, "keys:1");
        assert_eq!(v[2].line, 7);
    }

    #[test]
    fn escaped_paths_are_read_back() {
        assert_eq!(unescape("a\\nb\\\\c"), "a\nb\\c");
        assert_eq!(hex("00ff41"), Some(vec![0, 255, b'A']));
        assert_eq!(hex("0"), None);
    }
}
