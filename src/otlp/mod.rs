//! `orbit export otlp`: a loop's journal as an OpenTelemetry trace, in the OTLP/JSON
//! mapping of `ExportTraceServiceRequest`, written to standard output or a file, or POSTed
//! to an OTLP/HTTP receiver; with `--follow`, again as the journal grows, each span once.
//!
//! Read-only towards the loop: the journal through [`crate::events`], the ledger through
//! [`crate::ledger`], loop.toml through [`crate::config`]; no lock taken.

pub mod document;
pub mod http;
pub mod spans;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::ExportArgs;
use crate::config::LoopConfig;
use crate::error::{Error, Result};
use crate::events::{self, ChainError};
use crate::{fsx, ledger, locate};

use document::Identity;
use spans::{LoopFacts, Span};

/// How often `--follow` looks at the journal's size.
const POLL: Duration = Duration::from_millis(300);

/// Where the documents go.
enum Sink {
    Stdout,
    File(PathBuf),
    Endpoint(http::Endpoint),
}

impl Sink {
    fn of(args: &ExportArgs) -> Result<Sink> {
        if let Some(url) = &args.endpoint {
            let mut headers = http::env_headers(|k| std::env::var(k).ok(), &args.header)?;
            headers.extend(args.header.iter().cloned());
            return Ok(Sink::Endpoint(http::Endpoint::parse(url, &headers)?));
        }
        Ok(match &args.output {
            Some(p) => Sink::File(p.clone()),
            None => Sink::Stdout,
        })
    }

    /// Sends the whole export (without --follow): the file written atomically.
    fn send_whole(&self, doc: &str) -> Result<()> {
        match self {
            Sink::Stdout => print_line(doc),
            Sink::File(p) => fsx::write_atomic(p, format!("{doc}\n").as_bytes()),
            Sink::Endpoint(e) => e.post(doc),
        }
    }

    /// Sends one batch of --follow: a line of standard output or of the file (one
    /// document a line, as the Collector's OTLP JSON file receiver reads it), or one POST.
    fn send_batch(&self, file: &mut Option<std::fs::File>, doc: &str) -> Result<()> {
        match (self, file) {
            (Sink::File(p), Some(f)) => {
                let line = format!("{doc}\n");
                f.write_all(line.as_bytes())
                    .and_then(|_| f.sync_data())
                    .map_err(|e| Error::io(format!("cannot write {}", p.display()), e))
            }
            _ => self.send_whole(doc),
        }
    }
}

fn print_line(doc: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{doc}")
        .and_then(|_| out.flush())
        .map_err(|e| Error::io("cannot write to standard output", e))
}

/// `orbit export otlp`.
pub fn run(args: &ExportArgs) -> Result<u8> {
    let sink = Sink::of(args)?;
    let dir = locate::pick_loop(args.dir.as_deref())?;
    let facts = read_facts(&dir);
    if args.follow {
        follow(&dir, facts, &sink)
    } else {
        once(&dir, facts, &sink)
    }
}

/// The loop's name, engine and model from loop.toml (the directory's name and the
/// journal's engine when it cannot be read, with a warning).
fn read_facts(dir: &Path) -> LoopFacts {
    match LoopConfig::load(&dir.join("loop.toml")) {
        Ok(cfg) => LoopFacts {
            name: cfg.name.clone(),
            engine: cfg.engine.as_str().to_string(),
            model: spans::model_of(&cfg.argv),
            ledger: Default::default(),
        },
        Err(e) => {
            eprintln!(
                "orbit: warning: {e}; the trace names the loop by its directory and the agent by the journal"
            );
            LoopFacts {
                name: dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "loop".into()),
                engine: String::new(),
                model: None,
                ledger: Default::default(),
            }
        }
    }
}

/// The journal as read now, with what the export must say about it on stderr.
struct Read {
    journal: events::Journal,
    ledger: ledger::Ledger,
}

fn read_now(dir: &Path) -> Result<Option<Read>> {
    let path = dir.join("events.jsonl");
    let Some(bytes) = fsx::read_regular_opt(&path)? else {
        return Ok(None);
    };
    let ledger = fsx::read_regular_opt(&dir.join("cost.ledger"))?
        .map(|b| ledger::parse(&b))
        .unwrap_or_default();
    Ok(Some(Read {
        journal: events::read(&bytes),
        ledger,
    }))
}

/// Says on stderr, once per line, what the export skipped or could not vouch for.
fn warn(dir: &Path, j: &events::Journal, warned: &mut BTreeSet<usize>, torn_too: bool) {
    let path = dir.join("events.jsonl");
    for (n, why) in &j.malformed {
        if warned.insert(*n) {
            eprintln!(
                "orbit: warning: {}:{n}: {why}: line skipped, the rest exported (orbit audit says more)",
                path.display()
            );
        }
    }
    match &j.error {
        Some(ChainError::TornTail { line }) if torn_too && warned.insert(*line) => {
            eprintln!(
                "orbit: warning: {}:{line}: the last line is incomplete (being written, or torn): not exported",
                path.display()
            );
        }
        Some(
            e @ (ChainError::HashMismatch { .. }
            | ChainError::PrevMismatch { .. }
            | ChainError::SeqGap { .. }),
        ) if warned.insert(e.line()) => {
            eprintln!(
                "orbit: warning: {}:{}: {}: the journal is not intact from here; exported as it reads (run orbit audit)",
                path.display(),
                e.line(),
                e.describe()
            );
        }
        _ => {}
    }
}

/// The engine the journal's runs name, for a loop whose loop.toml did not say.
fn engine_of(facts: &LoopFacts, j: &events::Journal) -> String {
    if !facts.engine.is_empty() {
        return facts.engine.clone();
    }
    j.events
        .iter()
        .find_map(|e| e.value.get("engine").and_then(|v| v.as_str()))
        .filter(|e| !e.is_empty())
        .unwrap_or("agent")
        .to_string()
}

/// The spans of the journal as read, and the trace's identity.
fn spans_of(facts: &LoopFacts, read: Read) -> Option<(Identity, String, Vec<Span>)> {
    let first = read.journal.events.first()?;
    let id = Identity {
        name: facts.name.clone(),
        first_hash: first.hash.clone(),
    };
    let facts = LoopFacts {
        engine: engine_of(facts, &read.journal),
        ledger: read.ledger,
        ..facts.clone()
    };
    let spans = spans::build(&read.journal.events, &facts);
    Some((id, facts.engine, spans))
}

fn once(dir: &Path, facts: LoopFacts, sink: &Sink) -> Result<u8> {
    let path = dir.join("events.jsonl");
    let Some(read) = read_now(dir)? else {
        return Err(Error::path(
            &path,
            "missing: the loop has not run yet (orbit run starts it; orbit export otlp --follow waits for it)",
        ));
    };
    warn(dir, &read.journal, &mut BTreeSet::new(), true);
    let Some((id, engine, spans)) = spans_of(&facts, read) else {
        return Err(Error::path(
            &path,
            "holds no event that reads: nothing to export (orbit audit says what is wrong with it)",
        ));
    };
    sink.send_whole(&document::render(&id, &engine, &spans))?;
    Ok(0)
}

fn follow(dir: &Path, facts: LoopFacts, sink: &Sink) -> Result<u8> {
    let path = dir.join("events.jsonl");
    let mut file = match sink {
        Sink::File(p) => Some(
            std::fs::File::create(p)
                .map_err(|e| Error::io(format!("cannot write {}", p.display()), e))?,
        ),
        _ => None,
    };
    let mut exported: BTreeSet<String> = BTreeSet::new();
    let mut warned = BTreeSet::new();
    let mut seen: Option<(u64, u64)> = None;
    loop {
        let ledger_len = std::fs::metadata(dir.join("cost.ledger")).map_or(0, |m| m.len());
        let size = std::fs::metadata(&path).ok().map(|m| (m.len(), ledger_len));
        if size.is_some() && size != seen {
            seen = size;
            if let Some(read) = read_now(dir)? {
                warn(dir, &read.journal, &mut warned, false);
                let ended = read
                    .journal
                    .last()
                    .is_some_and(|e| e.is(crate::contract::EventName::LoopStop))
                    && !read.journal.torn_tail;
                if let Some((id, engine, spans)) = spans_of(&facts, read) {
                    let new: Vec<&Span> = spans
                        .iter()
                        .filter(|s| (s.closed || ended) && !exported.contains(&s.path))
                        .collect();
                    if !new.is_empty() {
                        sink.send_batch(
                            &mut file,
                            &document::render(&id, &engine, new.iter().copied()),
                        )?;
                        exported.extend(new.iter().map(|s| s.path.clone()));
                    }
                }
                if ended {
                    return Ok(0);
                }
            }
        }
        std::thread::sleep(POLL);
    }
}
