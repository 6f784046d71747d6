//! The test-count records (`iterations/*/counts.tsv`): what each check's own output said
//! ran, passed, failed and was skipped, on the base tree (`iterations/baseline/`) and at
//! every later verify run, as the runner wrote them (contract section 6, "a check means at
//! the end what it meant at the start"). One line per check and run, tab-separated: the
//! run's label, the check, ran, passed, failed, skipped, the unit (`tests`, or `packages`
//! for go test without -v), the verdict, and the base tree's ran and skipped (`-` when it
//! counted none).

use std::path::Path;

use serde::Serialize;

use crate::fsx;

/// What verify.sh made of a check's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CountVerdict {
    /// Nothing dropped: the check ran at least what it ran on the base tree.
    Held,
    /// The check exited 0 with no test run: it failed.
    Zero,
    /// The check exited 0 with fewer tests run, or more skipped, than on the base tree: it
    /// failed.
    Fewer,
    /// A drop that loop.toml's allow-fewer-tests accepted: the check passed.
    Allowed,
    /// The check failed by its own exit status; its counts are kept as they were.
    Failed,
}

impl CountVerdict {
    fn parse(word: &str) -> Option<CountVerdict> {
        Some(match word {
            "held" => CountVerdict::Held,
            "zero" => CountVerdict::Zero,
            "fewer" => CountVerdict::Fewer,
            "allowed" => CountVerdict::Allowed,
            "failed" => CountVerdict::Failed,
            _ => return None,
        })
    }
}

/// One line of a counts.tsv record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CountLine {
    /// The verify run: `red gate: the untouched tree`, `after the agent`, `pass 2 of 2`, ...
    pub run: String,
    pub check: String,
    pub ran: u64,
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
    pub unit: String,
    pub verdict: CountVerdict,
    /// The base tree's ran and skipped, when it counted this check.
    pub base_ran: Option<u64>,
    pub base_skipped: Option<u64>,
}

/// The lines of a counts.tsv; a line that is not one (torn, edited) is left out.
pub fn parse(bytes: &[u8]) -> Vec<CountLine> {
    let text = String::from_utf8_lossy(bytes);
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<CountLine> {
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() != 10 {
        return None;
    }
    let n = |s: &str| s.parse::<u64>().ok();
    let base = |s: &str| if s == "-" { Some(None) } else { n(s).map(Some) };
    let unit = f[6];
    if unit != "tests" && unit != "packages" {
        return None;
    }
    Some(CountLine {
        run: f[0].to_string(),
        check: f[1].to_string(),
        ran: n(f[2])?,
        passed: n(f[3])?,
        failed: n(f[4])?,
        skipped: n(f[5])?,
        unit: unit.to_string(),
        verdict: CountVerdict::parse(f[7])?,
        base_ran: base(f[8])?,
        base_skipped: base(f[9])?,
    })
}

/// One check's counts: on the base tree and at its latest counted run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckCounts {
    pub check: String,
    /// What the red gate counted (ran, skipped), when it did.
    pub base_ran: Option<u64>,
    pub base_skipped: Option<u64>,
    /// The latest run's counts, and the iteration it belongs to (0: the base tree's).
    pub latest: CountLine,
    pub iteration: u64,
    /// loop.toml's allow-fewer-tests names the check.
    pub allowed: bool,
    /// Drops allow-fewer-tests accepted, over the iterations read.
    pub accepted_drops: u64,
    /// The record of the latest run, relative to the loop directory, and its line.
    pub evidence: String,
}

impl CheckCounts {
    /// `12 tests ran, 40 ran at the start`: what dropped, in verify.sh's words.
    pub fn drop_text(&self) -> String {
        let l = &self.latest;
        match (l.base_ran, l.base_skipped) {
            (Some(b), _) if l.ran < b => format!(
                "{} {} ran, {b} ran at the start",
                l.ran,
                unit(l.ran, &l.unit)
            ),
            (_, Some(s)) if l.skipped > s => {
                format!("{} {} skipped, {s} at the start", l.skipped, l.unit)
            }
            _ => String::new(),
        }
    }

    /// The latest verdict in words, for the report's table.
    pub fn verdict_text(&self) -> String {
        match self.latest.verdict {
            CountVerdict::Held => "ok".into(),
            CountVerdict::Zero => "failed: no test ran".into(),
            CountVerdict::Fewer => format!("failed: {}", self.drop_text()),
            CountVerdict::Allowed => {
                format!("accepted: {} (allow-fewer-tests)", self.drop_text())
            }
            CountVerdict::Failed => "the check failed".into(),
        }
    }

    /// One line: `cargo-test: 2 tests ran (4 on the base tree), the drop accepted by
    /// allow-fewer-tests; 2 passed, 0 failed, 1 skipped`.
    pub fn text(&self) -> String {
        let l = &self.latest;
        let base = self
            .base_ran
            .map(|b| format!(" ({b} on the base tree)"))
            .unwrap_or_default();
        let verdict = match l.verdict {
            CountVerdict::Held => String::new(),
            CountVerdict::Zero => ", no test ran: the check failed".into(),
            CountVerdict::Fewer => format!(", {}: the check failed", self.drop_text()),
            CountVerdict::Allowed => ", the drop accepted by allow-fewer-tests".into(),
            CountVerdict::Failed => ", the check failed".into(),
        };
        let mut t = format!(
            "{}: {} {} ran{base}{verdict}; {} passed, {} failed, {} skipped",
            self.check,
            l.ran,
            unit(l.ran, &l.unit),
            l.passed,
            l.failed,
            l.skipped
        );
        if self.allowed && l.verdict != CountVerdict::Allowed {
            t.push_str(" (allow-fewer-tests names it)");
        }
        t
    }
}

/// `test` for one, else the unit as given.
fn unit(n: u64, unit: &str) -> &str {
    if n == 1 {
        unit.strip_suffix('s').unwrap_or(unit)
    } else {
        unit
    }
}

/// The most iterations read back, the latest ones.
const MAX_ITERATIONS_READ: u64 = 200;

/// Each counted check of the loop in `dir`: the base tree's counts and the latest run's,
/// reading the records of iterations `last` down to `last - 199`. `allowed` are loop.toml's
/// allow-fewer-tests. Sorted by check name; empty when nothing was ever counted.
pub fn read(dir: &Path, last: u64, allowed: &[String]) -> Vec<CheckCounts> {
    let base = fsx::read_loop_file(&dir.join("iterations/baseline/counts.tsv"))
        .map(|b| parse(&b))
        .unwrap_or_default();
    let mut out: Vec<CheckCounts> = Vec::new();
    let first = last.saturating_sub(MAX_ITERATIONS_READ - 1).max(1);
    let mut records: Vec<(u64, String, Vec<CountLine>)> = (first..=last)
        .filter_map(|i| {
            let rel = format!("iterations/{i:06}/counts.tsv");
            let lines = parse(&fsx::read_loop_file(&dir.join(&rel)).ok()?);
            Some((i, rel, lines))
        })
        .collect();
    records.insert(
        0,
        (0, "iterations/baseline/counts.tsv".into(), base.clone()),
    );
    for (i, rel, lines) in &records {
        for (k, l) in lines.iter().enumerate() {
            let b = base.iter().rfind(|b| b.check == l.check);
            let at = out.iter().position(|c| c.check == l.check);
            let accepted = u64::from(l.verdict == CountVerdict::Allowed);
            let entry = CheckCounts {
                check: l.check.clone(),
                base_ran: b.map(|b| b.ran),
                base_skipped: b.map(|b| b.skipped),
                latest: l.clone(),
                iteration: *i,
                allowed: allowed.contains(&l.check),
                accepted_drops: accepted,
                evidence: format!("{rel}:{}", k + 1),
            };
            match at {
                Some(at) => {
                    let drops = out[at].accepted_drops + accepted;
                    out[at] = CheckCounts {
                        accepted_drops: drops,
                        ..entry
                    };
                }
                None => out.push(entry),
            }
        }
    }
    out.sort_by(|a, b| a.check.cmp(&b.check));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_what_is_not_a_line_is_left_out() {
        let text = "red gate: the untouched tree\tcargo-test\t4\t4\t0\t1\ttests\tfailed\t-\t-\n\
                    after the agent\tcargo-test\t2\t2\t0\t1\ttests\tallowed\t4\t1\n\
                    torn\tx\t1\n\
                    after\tx\t1\t1\t0\t0\tbogus\tok\t-\t-\n";
        let lines = parse(text.as_bytes());
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].verdict, CountVerdict::Allowed);
        assert_eq!(lines[1].base_ran, Some(4));
        assert_eq!(lines[0].base_ran, None);
        let c = CheckCounts {
            check: "cargo-test".into(),
            base_ran: Some(4),
            base_skipped: Some(1),
            latest: lines[1].clone(),
            iteration: 1,
            allowed: true,
            accepted_drops: 1,
            evidence: String::new(),
        };
        assert_eq!(c.drop_text(), "2 tests ran, 4 ran at the start");
        assert_eq!(
            c.text(),
            "cargo-test: 2 tests ran (4 on the base tree), the drop accepted by allow-fewer-tests; 2 passed, 0 failed, 1 skipped"
        );
        assert_eq!(
            c.verdict_text(),
            "accepted: 2 tests ran, 4 ran at the start (allow-fewer-tests)"
        );
    }
}
