//! `docs/contract.md`, the loop contract: hand-written prose around tables of names that
//! are generated here from `src/contract`, between markers
//!
//! ```text
//! <!-- generated: NAME (orbit reference contract) -->
//! ...
//! <!-- end: NAME -->
//! ```
//!
//! `orbit reference contract` prints the contract as this build holds it (the prose of the
//! copy compiled in) with every table generated anew; `tests/it/reference.rs` fails when the
//! committed file differs, and [`problems`] names the table and the names that differ.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{code, md};
use crate::contract::Engine;
use crate::contract::meanings::{result_key_meaning, state_key_meaning};
use crate::contract::runtime::{CORE_TOOLS, NEEDS};
use crate::contract::{
    AgentOutcome, CONTRACT_VERSION, CbState, CheckCode, CostKind, CostSource, EventName, ExitCode,
    FaultPoint, FindingClass, INIT_PINNED, LOOP_DIRS, LOOP_FILES, NotifyEvent, PERMISSION_FILES,
    Phase, RESULT_KEYS, SETTINGS, STATE_KEYS, Severity, Status, StopReason, ValueType, Verdict,
    VerifyFailure, VerifyOutcome, engine_permission_files,
};

use crate::contract::queue::{
    QUEUE_FILES, QUEUE_REPORT_FIELDS, QueueExit, TASK_FIELDS, TaskStatus,
};

/// The contract as committed (and compiled into this build): its prose is the source.
pub const COMMITTED: &str = include_str!("../../docs/contract.md");

/// Every generated table, by its marker name, in the order the contract shows them.
pub const BLOCKS: &[&str] = &[
    "version",
    "runtime",
    "loop-files",
    "state-keys",
    "statuses",
    "stop-reasons",
    "circuit",
    "events",
    "phases",
    "exit-codes",
    "fault-points",
    "agent-outcomes",
    "check-codes",
    "verify-failures",
    "result-keys",
    "cost-ledger",
    "integrity-codes",
    "permission-files",
    "notify-events",
    "verdicts",
    "severities",
    "finding-classes",
    "settings",
    "queue-statuses",
    "queue-fields",
    "queue-files",
    "queue-exit-codes",
    "queue-report",
];

fn begin(name: &str) -> String {
    format!("<!-- generated: {name} (orbit reference contract) -->")
}

fn end(name: &str) -> String {
    format!("<!-- end: {name} -->")
}

/// A two-column table of names and meanings.
fn table<'a>(
    out: &mut String,
    head: (&str, &str),
    rows: impl IntoIterator<Item = (&'a str, &'a str)>,
) {
    let _ = writeln!(out, "| {} | {} |\n|---|---|", head.0, head.1);
    for (name, meaning) in rows {
        let _ = writeln!(out, "| {} | {} |", code(name), md(meaning));
    }
}

/// The type of a state value as the contract says it.
fn value_type_text(t: ValueType) -> &'static str {
    match t {
        ValueType::Semver => "`MAJOR.MINOR.PATCH`",
        ValueType::Positive => "integer >= 1",
        ValueType::Uint => "integer >= 0",
        ValueType::Hex => "lowercase hex (or empty)",
        ValueType::RefName => "git ref name (or empty)",
        ValueType::Status => "a status",
        ValueType::StopReason => "a stop reason",
        ValueType::CbState => "a circuit state",
        ValueType::Path => "absolute path (or empty)",
    }
}

/// The text of the generated table `name`; `None` for a name that is no table.
pub fn block(name: &str) -> Option<String> {
    let mut out = String::new();
    match name {
        "version" => {
            let _ = writeln!(
                out,
                "This is version **{CONTRACT_VERSION}** of the contract."
            );
        }
        "runtime" => {
            out.push_str("| Needs | When | Without it |\n|---|---|---|\n");
            for n in NEEDS {
                let _ = writeln!(out, "| {} | {} | {} |", n.what, n.when, n.without);
            }
            let tools: Vec<String> = CORE_TOOLS.iter().map(|t| code(t)).collect();
            let _ = writeln!(out, "\n`CORE_TOOLS`: {}.", tools.join(", "));
        }
        "loop-files" => {
            let files: Vec<String> = LOOP_FILES.iter().map(|f| code(f)).collect();
            let dirs: Vec<String> = LOOP_DIRS.iter().map(|f| code(&format!("{f}/"))).collect();
            let pinned: Vec<String> = INIT_PINNED.iter().map(|f| code(f)).collect();
            let _ = writeln!(
                out,
                "The files a loop directory may hold at its top level, each a regular file when it exists: {}.\n",
                files.join(", ")
            );
            let _ = writeln!(
                out,
                "Its directories, each a directory (never a symlink to one): {}.\n",
                dirs.join(", ")
            );
            let _ = writeln!(out, "Pinned by `orbit init`: {}.", pinned.join(", "));
        }
        "state-keys" => {
            out.push_str("| Key | Type | Meaning |\n|---|---|---|\n");
            for (key, t) in STATE_KEYS {
                let meaning = state_key_meaning(key)?;
                let _ = writeln!(
                    out,
                    "| {} | {} | {} |",
                    code(key),
                    value_type_text(*t),
                    md(meaning)
                );
            }
        }
        "statuses" => {
            out.push_str("| Status | Footer | Meaning |\n|---|---|---|\n");
            for s in Status::ALL {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} |",
                    code(s.as_str()),
                    code(s.footer().as_str()),
                    md(s.meaning())
                );
            }
        }
        "stop-reasons" => table(
            &mut out,
            ("Reason", "Meaning"),
            StopReason::ALL.iter().map(|r| (r.as_str(), r.meaning())),
        ),
        "circuit" => table(
            &mut out,
            ("Circuit state", "Meaning"),
            CbState::ALL.iter().map(|c| (c.as_str(), c.meaning())),
        ),
        "events" => table(
            &mut out,
            ("Event", "What it records, and its fields"),
            EventName::ALL.iter().map(|e| (e.as_str(), e.meaning())),
        ),
        "phases" => table(
            &mut out,
            ("`ORBIT_PHASE`", "The run"),
            Phase::ALL.iter().map(|p| (p.as_str(), p.meaning())),
        ),
        "exit-codes" => {
            out.push_str("| Code | In the scripts | Meaning |\n|---|---|---|\n");
            for c in ExitCode::ALL {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} |",
                    c.code(),
                    code(c.bash_name()),
                    md(crate::manual::exit_meaning(*c))
                );
            }
            let (sig, sig_meaning) = crate::manual::SIGNAL_EXIT;
            let _ = writeln!(out, "| {sig} | | {} |", md(sig_meaning));
        }
        "fault-points" => table(
            &mut out,
            ("`ORBIT_FAULT`", "Where"),
            FaultPoint::ALL.iter().map(|f| (f.as_str(), f.meaning())),
        ),
        "agent-outcomes" => {
            table(
                &mut out,
                ("`AGENT_OUTCOME`", "Meaning"),
                AgentOutcome::ALL.iter().map(|a| (a.as_str(), a.meaning())),
            );
            out.push('\n');
            table(
                &mut out,
                ("`VERIFY`", "Meaning"),
                VerifyOutcome::ALL.iter().map(|v| (v.as_str(), v.meaning())),
            );
        }
        "check-codes" => table(
            &mut out,
            ("`code`", "Meaning"),
            CheckCode::ALL.iter().map(|c| (c.as_str(), c.meaning())),
        ),
        "verify-failures" => table(
            &mut out,
            ("`verify_failure_code`", "Meaning"),
            VerifyFailure::ALL.iter().map(|c| (c.as_str(), c.meaning())),
        ),
        "result-keys" => {
            out.push_str("| Key | Whole number | Meaning |\n|---|---|---|\n");
            for (key, number) in RESULT_KEYS {
                let meaning = result_key_meaning(key)?;
                let _ = writeln!(
                    out,
                    "| {} | {} | {} |",
                    code(key),
                    if *number { "yes" } else { "" },
                    md(meaning)
                );
            }
        }
        "cost-ledger" => {
            table(
                &mut out,
                ("Kind (third field)", "Meaning"),
                CostKind::ALL.iter().map(|k| (k.as_str(), k.meaning())),
            );
            out.push('\n');
            table(
                &mut out,
                ("Source (last field)", "Meaning"),
                CostSource::ALL.iter().map(|k| (k.as_str(), k.meaning())),
            );
        }
        "integrity-codes" => {
            out.push_str("| Failure code | Audit class | What changed |\n|---|---|---|\n");
            for r in StopReason::INTEGRITY {
                let class = r.integrity_class()?;
                let _ = writeln!(
                    out,
                    "| {} | {} | {} |",
                    code(r.as_str()),
                    code(class.as_str()),
                    md(r.meaning())
                );
            }
        }
        "permission-files" => {
            let every: Vec<String> = PERMISSION_FILES.iter().map(|f| code(f)).collect();
            let _ = writeln!(out, "Every loop: {}.\n", every.join(", "));
            out.push_str("| Engine | Its own permission files |\n|---|---|\n");
            for e in Engine::ALL {
                let own = engine_permission_files(*e);
                if own.is_empty() {
                    continue;
                }
                let own: Vec<String> = own.iter().map(|f| code(f)).collect();
                let _ = writeln!(out, "| {} | {} |", code(e.as_str()), own.join(", "));
            }
        }
        "notify-events" => table(
            &mut out,
            ("Event", "When"),
            NotifyEvent::ALL.iter().map(|n| (n.as_str(), n.meaning())),
        ),
        "verdicts" => table(
            &mut out,
            ("Verdict", "Meaning"),
            Verdict::ALL.iter().map(|v| (v.as_str(), v.meaning())),
        ),
        "severities" => table(
            &mut out,
            ("Severity", "Meaning"),
            Severity::ALL.iter().map(|s| (s.as_str(), s.meaning())),
        ),
        "finding-classes" => table(
            &mut out,
            ("Class", "Meaning"),
            FindingClass::ALL.iter().map(|c| (c.as_str(), c.meaning())),
        ),
        "queue-statuses" => table(
            &mut out,
            ("Status", "Meaning"),
            TaskStatus::ALL.iter().map(|s| (s.as_str(), s.meaning())),
        ),
        "queue-fields" => {
            let _ = writeln!(out, "| Field | Holds |\n|---|---|");
            for (name, meaning) in TASK_FIELDS {
                let _ = writeln!(out, "| `**{name}:**` | {} |", md(meaning));
            }
        }
        "queue-files" => table(&mut out, ("File", "Holds"), QUEUE_FILES.iter().copied()),
        "queue-report" => table(
            &mut out,
            ("Member", "Holds"),
            QUEUE_REPORT_FIELDS.iter().copied(),
        ),
        "queue-exit-codes" => {
            let _ = writeln!(out, "| Exit | Meaning |\n|---|---|");
            for e in QueueExit::ALL {
                let _ = writeln!(out, "| {} | {} |", e.code(), md(e.meaning()));
            }
        }
        "settings" => {
            out.push_str(
                "| Setting | Kind and bounds | Default | Environment |\n|---|---|---|---|\n",
            );
            for s in SETTINGS {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    code(s.key),
                    md(&s.bounds_text()),
                    super::default_text(s),
                    code(&s.env_name()),
                );
            }
        }
        _ => return None,
    }
    Some(out)
}

/// `doc` with every generated table made anew; an error names a marker without its end, a
/// table this build does not know, and a table the doc lacks.
pub fn fill(doc: &str) -> Result<String, String> {
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    let mut seen = Vec::new();
    while let Some(at) = rest.find("<!-- generated: ") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let name = from["<!-- generated: ".len()..]
            .split_whitespace()
            .next()
            .unwrap_or("");
        let head = begin(name);
        if !from.starts_with(&head) {
            return Err(format!("a marker of the table '{name}' is not `{head}`"));
        }
        let tail = end(name);
        let stop = from
            .find(&tail)
            .ok_or_else(|| format!("the table '{name}' has no `{tail}`"))?;
        let text = block(name).ok_or_else(|| {
            if BLOCKS.contains(&name) {
                format!(
                    "the table '{name}' names a key with no meaning: add it in src/contract/meanings.rs"
                )
            } else {
                format!("docs/contract.md has a table '{name}' that orbit does not generate")
            }
        })?;
        let _ = write!(out, "{head}\n\n{text}\n{tail}");
        seen.push(name.to_string());
        rest = &from[stop + tail.len()..];
    }
    out.push_str(rest);
    let missing: Vec<&str> = BLOCKS
        .iter()
        .copied()
        .filter(|b| !seen.iter().any(|s| s == b))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "docs/contract.md lacks the generated table(s) {}: add `{}` and `{}` where each belongs",
            missing.join(", "),
            begin(missing[0]),
            end(missing[0])
        ));
    }
    Ok(out)
}

/// The contract as this build holds it, every table generated anew.
pub fn page() -> String {
    fill(COMMITTED).unwrap_or_else(|e| panic!("docs/contract.md compiled into orbit: {e}"))
}

/// The first column's names of a table's rows (a code span each), in a block's text.
fn row_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with("| "))
        .filter_map(|l| l[2..].split(" |").next())
        .map(|n| n.trim().to_string())
        .collect()
}

/// What differs between `doc` and the contract this build generates: per table, the names
/// the doc lacks and those it has that orbit does not define, or that the text differs.
pub fn problems(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    for name in BLOCKS {
        let want = block(name).expect("every listed table is generated");
        let (head, tail) = (begin(name), end(name));
        let have = doc
            .find(&head)
            .and_then(|a| doc[a..].find(&tail).map(|b| &doc[a + head.len()..a + b]));
        let Some(have) = have else {
            out.push(format!("the table '{name}' is missing"));
            continue;
        };
        if have.trim() == want.trim() {
            continue;
        }
        let (h, w) = (row_names(have), row_names(&want));
        let lacks: Vec<&String> = w.difference(&h).collect();
        let extra: Vec<&String> = h.difference(&w).collect();
        let mut said = format!("the table '{name}' differs from what orbit generates");
        if !lacks.is_empty() {
            let _ = write!(said, "; it lacks {lacks:?}");
        }
        if !extra.is_empty() {
            let _ = write!(said, "; it has {extra:?}, which orbit does not define");
        }
        out.push(said);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_is_generated_and_the_committed_contract_is_current() {
        for b in BLOCKS {
            assert!(block(b).is_some(), "{b}");
        }
        assert_eq!(block("no-such-table"), None);
        assert_eq!(problems(COMMITTED), Vec::<String>::new());
    }

    #[test]
    fn a_name_removed_from_or_added_to_a_table_is_named() {
        // Removing the DONE status's row.
        let row = COMMITTED
            .lines()
            .find(|l| l.starts_with("| `DONE` | `DONE` |"))
            .expect("the statuses table has DONE");
        let doc = COMMITTED.replacen(&format!("{row}\n"), "", 1);
        let p = problems(&doc);
        assert!(
            p.iter()
                .any(|s| s.contains("'statuses'") && s.contains("lacks [\"`DONE`\"]")),
            "{p:?}"
        );
        // A stop reason the code does not have.
        let row = COMMITTED
            .lines()
            .find(|l| l.starts_with("| `budget` |"))
            .expect("the stop reasons table has budget");
        let doc = COMMITTED.replacen(
            &format!("{row}\n"),
            &format!("{row}\n| `coffee_break` | Not a reason. |\n"),
            1,
        );
        let p = problems(&doc);
        assert!(
            p.iter()
                .any(|s| s.contains("'stop-reasons'") && s.contains("coffee_break")),
            "{p:?}"
        );
        // A table removed whole.
        let doc = COMMITTED.replace(&begin("events"), "<!-- gone -->");
        assert!(fill(&doc).unwrap_err().contains("events"));
    }

    #[test]
    fn every_name_of_the_contract_module_is_in_the_contract() {
        let text = page();
        let names = StopReason::ALL
            .iter()
            .map(|r| r.as_str())
            .chain(Status::ALL.iter().map(|s| s.as_str()))
            .chain(EventName::ALL.iter().map(|e| e.as_str()))
            .chain(FindingClass::ALL.iter().map(|c| c.as_str()))
            .chain(Verdict::ALL.iter().map(|v| v.as_str()))
            .chain(FaultPoint::ALL.iter().map(|f| f.as_str()))
            .chain(CheckCode::ALL.iter().map(|c| c.as_str()))
            .chain(VerifyFailure::ALL.iter().map(|c| c.as_str()))
            .chain(STATE_KEYS.iter().map(|(k, _)| *k))
            .chain(RESULT_KEYS.iter().map(|(k, _)| *k))
            .chain(LOOP_FILES.iter().copied())
            .chain(SETTINGS.iter().map(|s| s.key))
            .chain(ExitCode::ALL.iter().map(|e| e.bash_name()))
            .chain(TaskStatus::ALL.iter().map(|s| s.as_str()));
        for n in names {
            assert!(
                text.contains(&format!("`{n}`")),
                "{n} is not in docs/contract.md"
            );
        }
    }
}
