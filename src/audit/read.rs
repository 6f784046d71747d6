//! What an audit reads of a loop directory, each file through its format module: state.env
//! with its sidecar, the tails of events.jsonl and progress.md, an iteration's result.env.
//! Nothing here decides a finding; [`super::check`] does.

use std::fs;
use std::path::Path;

use super::tail::{self, Window};
use crate::contract::EventName;
use crate::events::{self, ChainError, Event};
use crate::fsx;
use crate::progress::{self, EntryKind};
use crate::result_env::{self, ResultEnv};
use crate::state::{Sidecar, State};

/// The tail of events.jsonl the chain is verified over.
pub const EVENTS_WINDOW_BYTES: u64 = 4 << 20;
/// At most this many of the last events are verified and read.
pub const EVENTS_WINDOW_LINES: usize = 5000;
const PROGRESS_WINDOW_BYTES: u64 = 1 << 20;

/// `iterations/NNNNNN`, relative to the loop directory.
pub(super) fn iter_rel(n: u64) -> String {
    format!("iterations/{n:06}")
}

/// state.env and its sidecar as read together.
pub(super) enum StateRead {
    Ok {
        state: Box<State>,
        text: String,
        torn: Option<u64>,
    },
    Missing,
    Bad {
        evidence: String,
        message: String,
    },
}

pub(super) fn read_state(dir: &Path, running: bool) -> StateRead {
    // state.env and its sidecar are two renames apart: a live runner writing between the
    // two reads looks torn for a moment, so a mismatch is read again before it is believed.
    let mut last = StateRead::Missing;
    for attempt in 0..if running { 4 } else { 1 } {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(60));
        }
        last = read_state_once(dir);
        match &last {
            StateRead::Ok { torn: None, .. } | StateRead::Missing => return last,
            _ => {}
        }
    }
    last
}

fn read_state_once(dir: &Path) -> StateRead {
    let Ok(bytes) = fsx::read_loop_file(&dir.join("state.env")) else {
        return StateRead::Missing;
    };
    let state = match State::parse(&bytes) {
        Ok(s) => s,
        Err((line, message)) => {
            return StateRead::Bad {
                evidence: format!("state.env:{line}"),
                message: format!("state.env cannot be read: {message}"),
            };
        }
    };
    let Ok(side) = fsx::read_loop_file(&dir.join("state.env.sha256")) else {
        return StateRead::Missing;
    };
    let sidecar = match Sidecar::parse(&side) {
        Ok(s) => s,
        Err((line, message)) => {
            return StateRead::Bad {
                evidence: format!("state.env.sha256:{line}"),
                message: format!("state.env.sha256 cannot be read: {message}"),
            };
        }
    };
    let hash = fsx::sha256_hex(&bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if hash == sidecar.sha256 && sidecar.generation == state.generation {
        return StateRead::Ok {
            state: Box::new(state),
            text,
            torn: None,
        };
    }
    if hash != sidecar.sha256 && sidecar.generation + 1 == state.generation {
        return StateRead::Ok {
            state: Box::new(state),
            text,
            torn: Some(sidecar.generation),
        };
    }
    StateRead::Bad {
        evidence: "state.env.sha256:1".into(),
        message: format!(
            "state.env does not match its sidecar (state gen {}, sidecar gen {}): edited or replaced; the runner refuses it (exit 4)",
            state.generation, sidecar.generation
        ),
    }
}

/// The events of a tail window, verified as a chain from the window's first line.
pub(super) struct EventsWindow {
    pub(super) window: Window,
    pub(super) events: Vec<Event>,
    /// The first break in the chain (a torn last line aside), at its window index.
    pub(super) error: Option<(usize, ChainError)>,
    pub(super) torn_tail: bool,
    /// A last line longer than the window (no event is): the window holds the lines
    /// before it, so that it hides none of them.
    pub(super) long_tail: Option<tail::LastLine>,
}

pub(super) fn read_events(dir: &Path) -> Option<EventsWindow> {
    let path = dir.join("events.jsonl");
    let mut window = tail::read_tail(&path, EVENTS_WINDOW_BYTES).ok()?;
    let mut long_tail = None;
    if window.bytes.is_empty() && !window.whole {
        let last = tail::last_line(&path).ok()??;
        window = tail::read_tail_until(&path, last.start, EVENTS_WINDOW_BYTES).ok()?;
        long_tail = Some(last);
    }
    window.keep_last_lines(EVENTS_WINDOW_LINES);
    let journal = if window.whole {
        events::read(&window.bytes)
    } else {
        events::read_tail(&window.bytes)
    };
    let error = journal
        .error
        .filter(|e| !matches!(e, ChainError::TornTail { .. }))
        .map(|e| (e.line() - 1, e));
    // Without a counted line number, an intact chain numbers its lines by seq.
    if window.first_line.is_none()
        && let Some(first) = journal.events.first()
        && error.is_none()
        && first.seq as usize >= first.line
    {
        window.first_line = Some(first.seq as usize + 1 - first.line);
    }
    Some(EventsWindow {
        window,
        events: journal.events,
        error,
        torn_tail: journal.torn_tail,
        long_tail,
    })
}

impl EventsWindow {
    /// `events.jsonl:N` for the `k`th event.
    pub(super) fn evidence(&self, k: usize) -> String {
        self.window
            .evidence("events.jsonl", self.events[k].line - 1)
    }

    pub(super) fn str_field<'e>(e: &'e Event, key: &str) -> &'e str {
        e.value.get(key).and_then(|v| v.as_str()).unwrap_or("")
    }

    pub(super) fn u64_field(e: &Event, key: &str) -> Option<u64> {
        e.value.get(key).and_then(|v| v.as_u64())
    }

    pub(super) fn last_pos(&self, name: EventName) -> Option<usize> {
        self.events.iter().rposition(|e| e.is(name))
    }

    /// Whether the last event is a `name`.
    pub(super) fn ends_with(&self, name: EventName) -> bool {
        self.events.last().is_some_and(|e| e.is(name))
    }

    /// The pid of the last loop_start when no loop_stop followed it.
    pub(super) fn unstopped_pid(&self) -> Option<u64> {
        let s = self.last_pos(EventName::LoopStart)?;
        if self.events[s..].iter().any(|e| e.is(EventName::LoopStop)) {
            return None;
        }
        EventsWindow::u64_field(&self.events[s], "pid")
    }

    /// The last iteration_start that neither its iteration_end nor a loop_stop followed.
    pub(super) fn unended_iteration(&self) -> Option<usize> {
        let s = self.last_pos(EventName::IterationStart)?;
        let it = self.events[s].iteration;
        let ended = self.events[s..].iter().any(|e| {
            e.is(EventName::LoopStop) || (e.is(EventName::IterationEnd) && e.iteration == it)
        });
        (!ended).then_some(s)
    }
}

/// progress.md's tail: closed entries verified as a chain from the first marker in the
/// window.
pub(super) struct ProgressTail {
    pub(super) window: Window,
    pub(super) entries: Vec<progress::Entry>,
    /// Window-relative 0-based line of the first broken entry.
    pub(super) broken: Option<usize>,
    pub(super) torn: Option<usize>,
    pub(super) stray: Vec<usize>,
}

pub(super) fn read_progress(dir: &Path) -> Option<ProgressTail> {
    let window = tail::read_tail(&dir.join("progress.md"), PROGRESS_WINDOW_BYTES).ok()?;
    // In a partial window the chain is anchored on the first marker seen.
    let parsed = if window.whole {
        progress::parse(&window.bytes)
    } else {
        progress::parse_tail(&window.bytes)?
    };
    Some(ProgressTail {
        broken: parsed.first_broken().map(|e| e.line - 1),
        torn: parsed.torn_tail_line.map(|l| l - 1),
        stray: parsed.stray_lines.iter().map(|l| l - 1).collect(),
        entries: parsed.entries,
        window,
    })
}

impl ProgressTail {
    /// The `NEXT_ITERATION` the last closed entry states, when it is a `## Recovery` entry
    /// (its `- state: NEXT_ITERATION=N ...` line).
    pub(super) fn last_recovery_next(&self) -> Option<u64> {
        let e = self.entries.iter().rev().find(|e| e.marker.is_some())?;
        if e.kind != EntryKind::Recovery {
            return None;
        }
        e.text.lines().find_map(|l| {
            l.strip_prefix("- state: NEXT_ITERATION=")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
    }

    /// The highest iteration with a closed entry that records an outcome (not an
    /// interruption), and its window line.
    pub(super) fn last_recorded(&self) -> Option<(u64, String, usize)> {
        self.entries
            .iter()
            .rev()
            .find_map(|e| match (&e.kind, &e.marker) {
                (EntryKind::Iteration { number, status }, Some(_))
                    if *number > 0 && status != progress::INTERRUPTED =>
                {
                    Some((*number, status.clone(), e.line - 1))
                }
                _ => None,
            })
    }
}

/// Iteration `n`'s result.env, when it exists as a regular file (what else is there is
/// reported by the audit's file checks).
pub(super) fn read_result(dir: &Path, n: u64) -> Option<Result<ResultEnv, (usize, String)>> {
    let bytes = fsx::read_loop_file(&dir.join(iter_rel(n)).join("result.env")).ok()?;
    Some(result_env::parse(&bytes))
}

/// Whether an iteration directory holds files of an attempt (interrupted.K/ dirs aside).
pub(super) fn has_attempt_files(dir: &Path) -> bool {
    fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())
        && fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
            })
            .unwrap_or(false)
}

pub(super) fn mtime(path: &Path) -> Option<u64> {
    fs::symlink_metadata(path)
        .ok()?
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(n: u64) -> Vec<String> {
        let mut prev = events::GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let line = events::build_line(
                    seq,
                    "2026-11-30T00:00:00Z",
                    "iteration_start",
                    seq,
                    &[],
                    &prev,
                );
                prev = events::split_hash(line.trim_end()).unwrap().1.to_string();
                line
            })
            .collect()
    }

    #[test]
    fn the_chain_is_verified_over_the_tail_window_only() {
        let d = tempfile::tempdir().unwrap();
        let mut lines = journal(6000);
        fs::write(d.path().join("events.jsonl"), lines.concat()).unwrap();
        let ev = read_events(d.path()).unwrap();
        assert_eq!(ev.events.len(), EVENTS_WINDOW_LINES);
        assert!(ev.error.is_none(), "{:?}", ev.error);
        assert_eq!(ev.evidence(0), "events.jsonl:1001");

        // An edit before the window is not seen; one inside it is, at its line.
        lines[9] = lines[9].replace("iteration_start", "iteration_stop");
        lines[5799] = lines[5799].replace("iteration_start", "iteration_stop");
        fs::write(d.path().join("events.jsonl"), lines.concat()).unwrap();
        let ev = read_events(d.path()).unwrap();
        let (i, err) = ev.error.clone().unwrap();
        assert_eq!(err, ChainError::HashMismatch { line: i + 1 });
        assert_eq!(ev.window.evidence("events.jsonl", i), "events.jsonl:5800");

        // A removed line inside the window breaks prev.
        let mut removed = journal(50);
        removed.remove(20);
        fs::write(d.path().join("events.jsonl"), removed.concat()).unwrap();
        let ev = read_events(d.path()).unwrap();
        let (i, err) = ev.error.clone().unwrap();
        assert!(matches!(err, ChainError::PrevMismatch { .. }), "{err:?}");
        assert_eq!(ev.window.evidence("events.jsonl", i), "events.jsonl:21");
    }
}
