//! `.action-sig.log`: one change signature per iteration, `iteration<TAB>signature`, where
//! the signature is the git tree id of the work tree after the iteration. The runner reads
//! the last lines for stall (the same tree `convergence-window` times) and oscillation
//! (A B A B) detection; [`stall`] applies the same rules.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sig {
    /// 1-based line in .action-sig.log.
    pub line: usize,
    pub iteration: u64,
    pub signature: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SigLog {
    pub sigs: Vec<Sig>,
    pub errors: Vec<(usize, String)>,
    pub torn_tail: Option<usize>,
}

impl SigLog {
    pub fn print(&self) -> String {
        self.sigs
            .iter()
            .map(|s| format!("{}\t{}\n", s.iteration, s.signature))
            .collect()
    }
}

/// Parses one line (without its newline). The signature may be empty (no tree recorded).
pub fn parse_line(line: &str, n: usize) -> Result<Sig, String> {
    let (it, sig) = line.split_once('\t').ok_or_else(|| {
        format!(
            "expected 'iteration<TAB>signature', found '{}'",
            line.escape_debug()
        )
    })?;
    if it.is_empty() || it.len() > 18 || !it.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("iteration '{}' is not a number", it.escape_debug()));
    }
    if sig.len() > 128 || !sig.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "signature '{}' is not a hex tree id",
            sig.escape_debug()
        ));
    }
    Ok(Sig {
        line: n,
        iteration: it.parse().unwrap_or(0),
        signature: sig.to_string(),
    })
}

/// Parses the log; `first_line` is the line number of the first line of `bytes`.
pub fn parse_from(bytes: &[u8], first_line: usize) -> SigLog {
    let text = String::from_utf8_lossy(bytes);
    let mut out = SigLog::default();
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let n = first_line + i;
        let Some(line) = raw.strip_suffix('\n') else {
            out.torn_tail = Some(n);
            break;
        };
        match parse_line(line, n) {
            Ok(s) => out.sigs.push(s),
            Err(m) => out.errors.push((n, m)),
        }
    }
    out
}

pub fn parse(bytes: &[u8]) -> SigLog {
    parse_from(bytes, 1)
}

/// What the last signatures say, by the runner's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stall {
    /// The last `window` signatures are the same tree: no progress.
    Converged { window: usize },
    /// The last four alternate A B A B.
    Oscillating,
}

/// Applies the runner's stall rules to the signatures (oldest first).
pub fn stall(sigs: &[Sig], window: usize) -> Option<Stall> {
    let tail: Vec<&str> = sigs
        .iter()
        .rev()
        .take(6)
        .rev()
        .map(|s| s.signature.as_str())
        .collect();
    let n = tail.len();
    if window >= 2 && n >= window {
        let first = tail[n - window];
        if tail[n - window..].iter().all(|s| *s == first) {
            return Some(Stall::Converged { window });
        }
    }
    if n >= 4
        && tail[n - 1] == tail[n - 3]
        && tail[n - 2] == tail[n - 4]
        && tail[n - 1] != tail[n - 2]
    {
        return Some(Stall::Oscillating);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn log(sigs: &[&str]) -> Vec<Sig> {
        let text: String = sigs
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{}\t{s}\n", i + 1))
            .collect();
        parse(text.as_bytes()).sigs
    }

    #[test]
    fn stall_rules_match_the_runner() {
        assert_eq!(
            stall(&log(&["a1", "b2", "b2", "b2"]), 3),
            Some(Stall::Converged { window: 3 })
        );
        assert_eq!(stall(&log(&["a1", "b2", "b2"]), 3), None);
        assert_eq!(
            stall(&log(&["a1", "b2", "a1", "b2"]), 3),
            Some(Stall::Oscillating)
        );
        assert_eq!(stall(&log(&["a1", "b2", "c3", "d4"]), 3), None);
    }

    #[test]
    fn bad_lines_and_torn_tail() {
        let l = parse(b"1\tabc\nx\tabc\n2\tzz\n3\tab");
        assert_eq!(l.sigs.len(), 1);
        assert_eq!(l.errors.iter().map(|e| e.0).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(l.torn_tail, Some(4));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), w in 0usize..8) {
            let l = parse(&bytes);
            let _ = stall(&l.sigs, w);
        }

        #[test]
        fn print_round_trips(rows in proptest::collection::vec((0u64..1_000_000, "[0-9a-f]{0,40}"), 0..30)) {
            let text: String = rows.iter().map(|(i, s)| format!("{i}\t{s}\n")).collect();
            let l = parse(text.as_bytes());
            prop_assert!(l.errors.is_empty());
            prop_assert_eq!(l.print(), text);
        }
    }
}
