//! `runner.log`: the runner's human log, one `<UTC ISO-8601> message` line per entry;
//! lines without a timestamp continue the entry above (e.g. git's own stderr). The audit
//! reads only its tail.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// 0-based index in the window.
    pub index: usize,
    /// The timestamp, when the line has one.
    pub ts: Option<String>,
    pub message: String,
}

fn is_ts(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// Parses a window of runner.log. Never fails; a torn last line is kept as it is.
pub fn parse(bytes: &[u8]) -> Vec<LogLine> {
    let text = String::from_utf8_lossy(bytes);
    text.split_terminator('\n')
        .enumerate()
        .map(|(index, line)| match line.split_once(' ') {
            Some((ts, msg)) if is_ts(ts) => LogLine {
                index,
                ts: Some(ts.to_string()),
                message: msg.to_string(),
            },
            _ => LogLine {
                index,
                ts: None,
                message: line.to_string(),
            },
        })
        .collect()
}

/// The last failure of the runner's own machinery that no later stop line followed: an
/// internal error, a failed preflight, or a write that failed.
pub fn last_unresolved_failure(lines: &[LogLine]) -> Option<&LogLine> {
    let last_stop = lines
        .iter()
        .rposition(|l| l.ts.is_some() && l.message.starts_with("stop: "));
    let failure = lines.iter().rposition(|l| {
        l.ts.is_some()
            && (l.message.starts_with("internal error: ")
                || l.message.starts_with("error: preflight: ")
                || l.message.starts_with("error: cannot write ")
                || l.message.starts_with("error: cannot re-seal "))
    })?;
    match last_stop {
        Some(s) if s > failure => None,
        _ => Some(&lines[failure]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn failures_after_the_last_stop_are_found() {
        let log = b"2026-11-30T05:51:13Z working on branch orbit/goal (from main)\n\
            2026-11-30T05:51:19Z stop: PAUSED (budget), exit 12 - spent\n\
            2026-11-30T06:00:00Z error: preflight: the agent 'x' is not on PATH\n\
            fatal: not a git repository\n";
        let lines = parse(log);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[3].ts, None);
        let f = last_unresolved_failure(&lines).unwrap();
        assert_eq!(f.index, 2);
        let mut resolved = log.to_vec();
        resolved.extend_from_slice(b"2026-11-30T06:01:00Z stop: DONE (none), exit 0 - ok\n");
        assert!(last_unresolved_failure(&parse(&resolved)).is_none());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let lines = parse(&bytes);
            let _ = last_unresolved_failure(&lines);
        }
    }
}
