//! The loop's records against the journal that announced them: state.env against the
//! last `state_write` (or `recovery`) and its `sha256`, each result.env against its
//! `iteration_result`. Records are evidence, and evidence is cross-checked: a record the
//! journal does not vouch for was written by something other than the runner.
//!
//! Journals of an older runner lack these fields: each check applies only where the
//! journal gives what it needs (a `sha256`, an `iteration_result`), and only over an
//! intact chain.

use std::collections::BTreeMap;
use std::path::Path;

use super::read::{EventsWindow, iter_rel};
use super::{Finding, Severity};
use crate::contract::{EventName, FindingClass};
use crate::fsx;
use crate::state::{self, State};

/// What the checks read.
pub(super) struct Input<'a> {
    pub dir: &'a Path,
    /// The loop directory as fix commands name it (one shell word).
    pub shown: &'a str,
    pub state: &'a State,
    pub state_text: &'a str,
    /// The checkpoint is torn (its sidecar a generation behind): the runner's own cut write.
    pub torn: bool,
    pub events: Option<&'a EventsWindow>,
}

/// What the journal window says of the records.
struct Announced<'a> {
    /// Each iteration's last `iteration_result`: its window index and `sha256`.
    results: BTreeMap<u64, (usize, Option<&'a str>)>,
    /// Iterations with an `iteration_end` in the window.
    ended: Vec<u64>,
}

fn announced(ev: &EventsWindow) -> Announced<'_> {
    let mut results = BTreeMap::new();
    let mut ended = Vec::new();
    for (k, e) in ev.events.iter().enumerate() {
        if e.is(EventName::IterationResult) {
            let sha = e.value.get("sha256").and_then(|v| v.as_str());
            results.insert(e.iteration, (k, sha));
        } else if e.is(EventName::IterationEnd) {
            ended.push(e.iteration);
        }
    }
    Announced { results, ended }
}

impl Announced<'_> {
    /// Whether the runner announces iteration `n`'s record: it announces every record
    /// since the first it announced.
    fn announces(&self, n: u64) -> bool {
        self.results.keys().next().is_some_and(|first| n >= *first)
    }
}

/// The journal window, when its chain is intact (a broken one is JOURNAL_BROKEN, and
/// proves nothing).
fn intact<'a>(i: &Input<'a>) -> Option<&'a EventsWindow> {
    i.events.filter(|ev| ev.error.is_none())
}

/// Whether iteration `n`'s record (`iterations/n/result.env`) is the runner's unfinished
/// one: written, never announced, and the iteration NEXT_ITERATION (the runner died
/// between the two and its next run does the iteration again).
pub(super) fn unannounced_next(i: &Input) -> bool {
    let Some(ev) = intact(i) else {
        return false;
    };
    let a = announced(ev);
    let n = i.state.next_iteration;
    a.announces(n)
        && !a.results.contains_key(&n)
        && !a.ended.contains(&n)
        && fsx::read_loop_file(&i.dir.join(iter_rel(n)).join("result.env")).is_ok()
}

/// The checks of a loop at rest (no runner is writing).
pub(super) fn check(i: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(ev) = intact(i) else {
        return out;
    };
    check_state(i, ev, &mut out);
    check_results(i, ev, &mut out);
    out
}

fn recover(i: &Input) -> String {
    format!("orbit recover {}", i.shown)
}

/// state.env is the state the journal's last `state_write` (or `recovery`) wrote.
fn check_state(i: &Input, ev: &EventsWindow, out: &mut Vec<Finding>) {
    if i.torn {
        return;
    }
    let Some(k) = ev
        .events
        .iter()
        .rposition(|e| e.is(EventName::StateWrite) || e.is(EventName::Recovery))
    else {
        return;
    };
    let e = &ev.events[k];
    let key = if e.is(EventName::Recovery) {
        "state_sha256"
    } else {
        "sha256"
    };
    let (Some(sha), Some(rec_gen)) = (
        e.value.get(key).and_then(|v| v.as_str()),
        EventsWindow::u64_field(e, "gen"),
    ) else {
        return;
    };
    let have = fsx::sha256_hex(i.state_text.as_bytes());
    let state_gen = i.state.generation;
    if state_gen == rec_gen && have != sha {
        out.push(Finding {
            class: FindingClass::LoopTamper,
            severity: Severity::P0,
            evidence: ev.evidence(k),
            message: format!(
                "state.env is not the state the runner wrote: the journal's {} of generation {rec_gen} gives sha256 {sha}, state.env (gen {state_gen}) is {have}, and its sidecar was sealed to match (loop_tamper). Recover sets it aside and rebuilds the state from the journal",
                e.event
            ),
            fix: recover(i),
        });
    } else if state_gen > rec_gen {
        out.push(Finding {
            class: FindingClass::StateDrift,
            severity: Severity::P1,
            evidence: format!("state.env:{}", state::key_line(i.state_text, "GEN")),
            message: format!(
                "state.env is at generation {state_gen}, which the journal never recorded (its last {} is generation {rec_gen}, at {}): a write cut before its journal entry, or a state written by something other than the runner; recover rebuilds it from the journal",
                e.event,
                ev.evidence(k)
            ),
            fix: recover(i),
        });
    }
}

/// Each iteration's result.env is the record its `iteration_result` announced.
fn check_results(i: &Input, ev: &EventsWindow, out: &mut Vec<Finding>) {
    let a = announced(ev);
    let Some(first) = a.results.keys().next().copied() else {
        return;
    };
    for n in recorded_from(i.dir, first) {
        let rel = format!("{}/result.env", iter_rel(n));
        let Ok(bytes) = fsx::read_loop_file(&i.dir.join(&rel)) else {
            continue;
        };
        match a.results.get(&n) {
            Some((k, Some(sha))) => {
                let have = fsx::sha256_hex(&bytes);
                if have != *sha {
                    out.push(Finding {
                        class: FindingClass::LoopTamper,
                        severity: Severity::P0,
                        evidence: format!("{rel}:1"),
                        message: format!(
                            "{rel} is not the record the runner wrote: its iteration_result ({}) gives sha256 {sha}, the file is {have} (loop_tamper). Recover sets it aside and never takes it for evidence",
                            ev.evidence(*k)
                        ),
                        fix: recover(i),
                    });
                }
            }
            Some((_, None)) => {}
            None if n == i.state.next_iteration && !a.ended.contains(&n) => {
                // The runner's own unfinished record: reported as a crash (check_crash).
            }
            None => out.push(Finding {
                class: FindingClass::LoopTamper,
                severity: Severity::P0,
                evidence: format!("{rel}:1"),
                message: format!(
                    "{rel} was announced by no iteration_result event, though the runner announces every record it writes (since iteration {first}): a planted record (loop_tamper). Recover sets it aside and never takes it for evidence"
                ),
                fix: recover(i),
            }),
        }
    }
}

/// The iterations from `first` on whose directory holds a result.env.
fn recorded_from(dir: &Path, first: u64) -> Vec<u64> {
    let Ok(rd) = std::fs::read_dir(dir.join("iterations")) else {
        return Vec::new();
    };
    let mut out: Vec<u64> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            (name.len() >= 6 && name.bytes().all(|b| b.is_ascii_digit()))
                .then(|| name.parse::<u64>().ok())
                .flatten()
        })
        .filter(|n| *n >= first)
        .collect();
    out.sort_unstable();
    out
}
