//! `iterations/NNNNNN/result.env`: the record of one iteration, `KEY=VALUE` lines written
//! atomically by the runner (never sourced). Keys come from a fixed list; a record from an
//! older runner may lack some, so missing keys read as empty.

use std::collections::BTreeMap;

use crate::contract::{RESULT_KEYS, Status};

/// Every key the runner writes, in its order (the contract module's table).
pub const KEYS: [&str; RESULT_KEYS.len()] = {
    let mut keys = [""; RESULT_KEYS.len()];
    let mut i = 0;
    while i < RESULT_KEYS.len() {
        keys[i] = RESULT_KEYS[i].0;
        i += 1;
    }
    keys
};

/// The key of the iteration's verdict: the status the iteration ended with.
pub const VERDICT: &str = "VERDICT";

/// Whether a key's value must be a whole number when present and not empty.
fn numeric(key: &str) -> bool {
    RESULT_KEYS.iter().any(|(k, n)| *k == key && *n)
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultEnv {
    values: BTreeMap<String, (usize, String)>,
    /// The line number of a last line without its newline; its value is kept.
    pub torn_tail: Option<usize>,
}

impl ResultEnv {
    /// A value, empty when absent.
    pub fn get(&self, key: &str) -> &str {
        self.values.get(key).map(|(_, v)| v.as_str()).unwrap_or("")
    }

    /// The 1-based line a key is on (0 when absent).
    pub fn line_of(&self, key: &str) -> usize {
        self.values.get(key).map(|(n, _)| *n).unwrap_or(0)
    }

    pub fn num(&self, key: &str) -> Option<u64> {
        self.get(key).parse().ok()
    }

    pub fn has(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// The status the iteration ended with (`VERDICT`), when it is one.
    pub fn verdict(&self) -> Option<Status> {
        Status::parse(self.get(VERDICT))
    }

    /// The canonical text: the present keys, in [`KEYS`] order.
    pub fn print(&self) -> String {
        KEYS.iter()
            .filter_map(|k| self.values.get(*k).map(|(_, v)| format!("{k}={v}\n")))
            .collect()
    }

    pub fn set(&mut self, key: &str, value: &str) {
        let n = self.values.len() + 1;
        self.values.insert(key.to_string(), (n, value.to_string()));
    }
}

/// Parses a result.env; an error names its 1-based line.
pub fn parse(bytes: &[u8]) -> Result<ResultEnv, (usize, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = ResultEnv::default();
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        let line = match raw.strip_suffix('\n') {
            Some(l) => l,
            None => {
                out.torn_tail = Some(n);
                raw
            }
        };
        if line.contains('\u{FFFD}') {
            return Err((n, "not valid UTF-8".into()));
        }
        if let Some(c) = line.chars().find(|c| c.is_control()) {
            return Err((n, format!("control character {c:?}")));
        }
        let (k, v) = line
            .split_once('=')
            .ok_or((n, "not a KEY=VALUE line".to_string()))?;
        if !KEYS.contains(&k) {
            return Err((n, format!("unknown key '{}'", k.escape_debug())));
        }
        if out.values.contains_key(k) {
            return Err((n, format!("duplicate key {k}")));
        }
        if numeric(k) && !v.is_empty() && (v.len() > 18 || !v.bytes().all(|b| b.is_ascii_digit())) {
            // AGENT_EXIT may be any exit status; the rest are counts and times.
            return Err((
                n,
                format!("{k} has an invalid value '{}'", v.escape_debug()),
            ));
        }
        out.values.insert(k.to_string(), (n, v.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_a_runner_record() {
        let r = parse(b"ITERATION=3\nVERIFY=pass\nVERDICT=CONTINUE\nSUMMARY=a = b\n").unwrap();
        assert_eq!(r.num("ITERATION"), Some(3));
        assert_eq!(r.get("SUMMARY"), "a = b");
        assert_eq!(r.get("CB_SIG"), "");
        assert_eq!(r.line_of("VERDICT"), 3);
        assert!(KEYS.contains(&VERDICT));
        assert_eq!(r.verdict(), Some(Status::Continue));
        assert_eq!(parse(b"VERDICT=done\n").unwrap().verdict(), None);
        assert_eq!(parse(b"ITERATION=3\n").unwrap().verdict(), None);
        assert_eq!(parse(b"ITERATION=3\nNOPE=1\n").unwrap_err().0, 2);
        assert_eq!(parse(b"ITERATION=x\n").unwrap_err().0, 1);
        assert_eq!(parse(b"VERIFY=pass\nVERIFY=fail\n").unwrap_err().0, 2);
        let torn = parse(b"ITERATION=3\nVERDI").unwrap_err();
        assert_eq!(torn.0, 2);
        assert_eq!(
            parse(b"ITERATION=3\nVERDICT=DO").unwrap().torn_tail,
            Some(2)
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn print_round_trips(vals in proptest::collection::vec("[a-z0-9 .,:-]{0,20}", KEYS.len())) {
            let mut r = ResultEnv::default();
            for (k, v) in KEYS.iter().zip(&vals) {
                let v = if numeric(k) { format!("{}", v.len()) } else { v.clone() };
                r.set(k, &v);
            }
            let text = r.print();
            let back = parse(text.as_bytes()).unwrap();
            prop_assert_eq!(back.print(), text);
        }
    }
}
