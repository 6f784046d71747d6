//! `cost.ledger`: one line per agent run, `iteration<TAB>micro_usd<TAB>kind`, where kind is
//! `reported`, `estimated` or `unknown` (a fourth field, the candidate of a fan-out, is
//! allowed, and a last one, whose report counted: `engine` or `agent`, see
//! [`CostSource`]). The runner appends; `COST_MICROUSD` in state.env is the sum of the amounts.
//!
//! One rule for every reader: a line counts when it is a whole ledger line (see
//! [`parse_line`]); anything else is listed as an error and adds nothing. The runner's and
//! recover.sh's bash sum (`orbit_ledger_sum_v` in the scripts' common part) applies the same
//! rule, so state.env, audit and recover always agree on the total.

use std::fmt;

use crate::contract::{CostKind, CostSource};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line in cost.ledger.
    pub line: usize,
    pub iteration: u64,
    pub micro_usd: u64,
    pub kind: CostKind,
    /// The candidate of a fan-out run, when the line names one.
    pub candidate: Option<u64>,
    /// Whose report counted, when the line names it.
    pub source: Option<CostSource>,
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\t{}\t{}", self.iteration, self.micro_usd, self.kind)?;
        if let Some(c) = self.candidate {
            write!(f, "\t{c}")?;
        }
        if let Some(s) = self.source {
            write!(f, "\t{s}")?;
        }
        writeln!(f)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    pub entries: Vec<Entry>,
    /// Lines that are not ledger lines, with their line numbers and why.
    pub errors: Vec<(usize, String)>,
    /// The line number of a last line without its newline (a torn append); it is not
    /// counted in `entries`.
    pub torn_tail: Option<usize>,
}

impl Ledger {
    /// The sum of every amount, saturating.
    pub fn total(&self) -> u64 {
        self.entries
            .iter()
            .fold(0u64, |s, e| s.saturating_add(e.micro_usd))
    }

    /// The sum of one iteration's amounts.
    pub fn iteration_total(&self, iteration: u64) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.iteration == iteration)
            .fold(0u64, |s, e| s.saturating_add(e.micro_usd))
    }

    pub fn has_unknown(&self) -> bool {
        self.entries.iter().any(|e| e.kind == CostKind::Unknown)
    }

    /// The canonical text of the parsed entries.
    pub fn print(&self) -> String {
        self.entries.iter().map(|e| e.to_string()).collect()
    }
}

fn uint(v: &str) -> Option<u64> {
    if v.is_empty() || v.len() > 18 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// Parses one line (without its newline): `iteration<TAB>micro_usd<TAB>kind`, optionally
/// `<TAB>candidate`, then optionally `<TAB>source`; the numbers are whole, at most 18
/// digits; kind is one of [`CostKind`], source one of [`CostSource`]. This is the rule
/// every reader of the ledger applies.
pub fn parse_line(line: &str, n: usize) -> Result<Entry, String> {
    let parts: Vec<&str> = line.split('\t').collect();
    if !(3..=5).contains(&parts.len()) {
        return Err(format!(
            "expected 'iteration<TAB>micro_usd<TAB>kind', found '{}'",
            line.escape_debug()
        ));
    }
    let (it, m, kind) = (parts[0], parts[1], parts[2]);
    let iteration =
        uint(it).ok_or_else(|| format!("iteration '{}' is not a number", it.escape_debug()))?;
    let micro_usd = uint(m).ok_or_else(|| {
        format!(
            "amount '{}' is not a whole number of micro-dollars",
            m.escape_debug()
        )
    })?;
    let kind = CostKind::parse(kind).ok_or_else(|| {
        format!(
            "kind '{}' is not reported, estimated or unknown",
            kind.escape_debug()
        )
    })?;
    let mut rest = &parts[3..];
    let mut candidate = None;
    if let Some(c) = rest.first() {
        if let Some(v) = uint(c) {
            candidate = Some(v);
            rest = &rest[1..];
        } else if rest.len() == 2 {
            return Err(format!("candidate '{}' is not a number", c.escape_debug()));
        }
    }
    let source = match rest.first() {
        None => None,
        Some(s) => Some(CostSource::parse(s).ok_or_else(|| {
            format!(
                "'{}' is neither a candidate nor a cost source (engine, agent)",
                s.escape_debug()
            )
        })?),
    };
    Ok(Entry {
        line: n,
        iteration,
        micro_usd,
        kind,
        candidate,
        source,
    })
}

/// Parses cost.ledger. Never fails: bad lines are listed with their line numbers, and a
/// torn last line is reported rather than counted. `first_line` is the line number of the
/// first line of `bytes` (1 for a whole file; more for a tail window).
pub fn parse_from(bytes: &[u8], first_line: usize) -> Ledger {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Ledger::default();
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let n = first_line + i;
        let Some(line) = raw.strip_suffix('\n') else {
            out.torn_tail = Some(n);
            break;
        };
        if line.is_empty() {
            out.errors.push((n, "blank line".into()));
            continue;
        }
        match parse_line(line, n) {
            Ok(e) => out.entries.push(e),
            Err(m) => out.errors.push((n, m)),
        }
    }
    out
}

pub fn parse(bytes: &[u8]) -> Ledger {
    parse_from(bytes, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lines_sum_and_errors_carry_line_numbers() {
        let l =
            parse(b"1\t50000\treported\n1\t0\tunknown\n2\tx\treported\n2\t7\testimated\n3\t9\trep");
        assert_eq!(l.entries.len(), 3);
        assert_eq!(l.total(), 50_007);
        assert_eq!(l.iteration_total(1), 50_000);
        assert!(l.has_unknown());
        assert_eq!(l.errors.len(), 1);
        assert_eq!(l.errors[0].0, 3);
        assert_eq!(l.torn_tail, Some(5));
    }

    #[test]
    fn a_line_may_name_whose_report_counted_after_its_candidate() {
        let l = parse(b"1\t400000\treported\tengine\n2\t5\treported\t3\tagent\n3\t1\treported\tx\n4\t1\treported\t2\t3\n");
        assert_eq!(l.entries.len(), 2, "{:?}", l.errors);
        assert_eq!(l.entries[0].source, Some(CostSource::Engine));
        assert_eq!(l.entries[1].candidate, Some(3));
        assert_eq!(l.entries[1].source, Some(CostSource::Agent));
        assert_eq!(l.errors.len(), 2);
        assert_eq!(
            l.print(),
            "1\t400000\treported\tengine\n2\t5\treported\t3\tagent\n"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let l = parse(&bytes);
            for e in &l.entries {
                prop_assert!(e.line >= 1);
            }
        }

        #[test]
        fn print_round_trips(rows in proptest::collection::vec((0u64..1_000_000, 0u64..10_000_000_000, 0usize..3), 0..30)) {
            let text: String = rows.iter().map(|(i, m, k)| format!("{i}\t{m}\t{}\n", CostKind::ALL[*k])).collect();
            let l = parse(text.as_bytes());
            prop_assert!(l.errors.is_empty());
            prop_assert_eq!(l.print(), text);
        }
    }
}
