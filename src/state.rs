//! `state.env`, the loop's checkpoint, and its sidecar `state.env.sha256`.
//!
//! `KEY=VALUE` lines, LF endings, no quotes, comments or blank lines, keys from a fixed
//! allow-list, each value typed. The bash parser in `templates/lib/state.sh` accepts and
//! rejects exactly what [`State::parse`] does; tests hold the two to that.

use std::fmt;
use std::path::Path;

use crate::contract::{
    CbState, STATE_KEYS, Status, StopReason, ValueType, state_key_type, with_state_keys,
};
use crate::error::{Error, Result};
use crate::fsx;

/// Every key, in the order they are written (the contract module's table).
pub const KEYS: [&str; STATE_KEYS.len()] = {
    let mut keys = [""; STATE_KEYS.len()];
    let mut i = 0;
    while i < STATE_KEYS.len() {
        keys[i] = STATE_KEYS[i].0;
        i += 1;
    }
    keys
};

/// A value of state.env as its Rust field holds it: read from text the contract's type
/// check has accepted, and written back as the same text.
trait StateValue: Sized {
    fn from_checked(text: &str) -> Option<Self>;
    fn write_to(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl StateValue for u64 {
    fn from_checked(text: &str) -> Option<Self> {
        text.parse().ok()
    }
    fn write_to(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl StateValue for String {
    fn from_checked(text: &str) -> Option<Self> {
        Some(text.to_string())
    }
    fn write_to(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

macro_rules! word_value {
    ($($t:ty),+) => {$(
        impl StateValue for $t {
            fn from_checked(text: &str) -> Option<Self> {
                <$t>::parse(text)
            }
            fn write_to(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )+};
}
word_value!(Status, StopReason, CbState);

/// The checkpoint: one field per key of the contract's table, made from it.
macro_rules! state_struct {
    ($($key:ident $field:ident: $ty:ty = $vt:ident, $init:expr;)+) => {
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct State {
            $(pub $field: $ty,)+
        }

        impl State {
            /// Every key at the value of a freshly rendered loop.
            fn initial() -> State {
                State {
                    $($field: $init,)+
                }
            }

            /// Builds the state from one type-checked value per key, in [`KEYS`] order.
            fn from_values(values: &[&str]) -> Option<State> {
                let mut it = values.iter();
                Some(State {
                    $($field: <$ty as StateValue>::from_checked(it.next()?)?,)+
                })
            }
        }

        impl fmt::Display for State {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                $(
                    f.write_str(concat!(stringify!($key), "="))?;
                    self.$field.write_to(f)?;
                    f.write_str("\n")?;
                )+
                Ok(())
            }
        }
    };
}
with_state_keys!(state_struct);

impl State {
    /// The checkpoint of a freshly rendered loop.
    pub fn ready(contract_version: &str, now: u64) -> State {
        State {
            contract_version: contract_version.to_string(),
            last_updated_at: now,
            ..State::initial()
        }
    }

    /// Parses state.env. Errors carry the 1-based line number (0 for whole-file errors).
    pub fn parse(bytes: &[u8]) -> Result<State, (usize, String)> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1;
            (line, "not valid UTF-8".to_string())
        })?;
        if text.is_empty() {
            return Err((0, "the file is empty".into()));
        }
        if !text.ends_with('\n') {
            return Err((
                text.lines().count(),
                "the last line has no newline (a torn write?)".into(),
            ));
        }
        let mut values: [Option<&str>; KEYS.len()] = [None; KEYS.len()];
        for (i, line) in text.split_terminator('\n').enumerate() {
            let n = i + 1;
            if let Some(c) = line.chars().find(|c| c.is_control()) {
                return Err((n, format!("control character {:?}", c)));
            }
            let (key, value) = line
                .split_once('=')
                .ok_or((n, "not a KEY=VALUE line".to_string()))?;
            let idx = KEYS
                .iter()
                .position(|k| *k == key)
                .ok_or_else(|| (n, format!("unknown key '{}'", key.escape_debug())))?;
            if values[idx].is_some() {
                return Err((n, format!("duplicate key {key}")));
            }
            check_value(key, value).map_err(|m| (n, m))?;
            values[idx] = Some(value);
        }
        // A key that a newer contract major added may be missing from an older loop's state:
        // it parses, and its version asks for `orbit recover --migrate`.
        let version_major = KEYS
            .iter()
            .position(|k| *k == "CONTRACT_VERSION")
            .and_then(|i| values[i])
            .and_then(crate::contract::major);
        for (i, v) in values.iter().enumerate() {
            if v.is_some() {
                continue;
            }
            let added_later = crate::contract::KEYS_SINCE
                .iter()
                .any(|(k, m)| *k == KEYS[i] && version_major.is_some_and(|v| v < *m));
            if !added_later {
                return Err((0, format!("missing key {}", KEYS[i])));
            }
        }
        let values: Vec<&str> = values.iter().map(|v| v.unwrap_or_default()).collect();
        State::from_values(&values).ok_or((0, "a value does not fit its key's type".into()))
    }

    pub fn parse_file(path: &Path) -> Result<State> {
        let bytes = fsx::read_regular(path)?;
        State::parse(&bytes).map_err(|(line, message)| Error::Parse {
            path: path.to_path_buf(),
            line,
            message,
        })
    }

    /// The canonical text: every key, in [`KEYS`] order.
    pub fn print(&self) -> String {
        self.to_string()
    }
}

fn is_uint(v: &str) -> bool {
    ValueType::Uint.accepts(v)
}

/// Type-checks one value against the contract's type for its key. The bash parser's
/// `state_check_value` applies the same rules.
pub fn check_value(key: &str, v: &str) -> Result<(), String> {
    if state_key_type(key).is_some_and(|t| t.accepts(v)) {
        Ok(())
    } else {
        Err(format!("{key} has an invalid value '{}'", v.escape_debug()))
    }
}

/// The 1-based line of `key` in a state.env text; where the text lacks it, the line the
/// runner writes it on (0 for a key that is not a state key).
pub fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| l.strip_prefix(key).is_some_and(|r| r.starts_with('=')))
        .map(|i| i + 1)
        .unwrap_or_else(|| KEYS.iter().position(|k| *k == key).map_or(0, |i| i + 1))
}

/// The sidecar: a `sha256sum`-format line for state.env and `# gen=N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sidecar {
    pub sha256: String,
    pub generation: u64,
}

impl Sidecar {
    pub fn for_state(state_text: &str, generation: u64) -> Sidecar {
        Sidecar {
            sha256: fsx::sha256_hex(state_text.as_bytes()),
            generation,
        }
    }

    pub fn print(&self) -> String {
        format!("{}  state.env\n# gen={}\n", self.sha256, self.generation)
    }

    /// Parses the sidecar as the runner's `state_load` matches it: `<sha256>  state.env`
    /// with the hash in lowercase hex, then `# gen=N`; trailing newlines are ignored (bash
    /// reads the file with `$(<file)`), anything else is malformed.
    pub fn parse(bytes: &[u8]) -> Result<Sidecar, (usize, String)> {
        let text = std::str::from_utf8(bytes).map_err(|_| (1, "not valid UTF-8".to_string()))?;
        let mut lines = text.trim_end_matches('\n').split('\n');
        let first = lines
            .next()
            .filter(|l| !l.is_empty())
            .ok_or((1, "the file is empty".to_string()))?;
        let (hash, name) = first
            .split_once("  ")
            .ok_or((1, "expected '<sha256>  state.env'".to_string()))?;
        let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if name != "state.env" || hash.len() != 64 || !hash.bytes().all(lower_hex) {
            return Err((1, "expected '<sha256>  state.env'".into()));
        }
        let second = lines
            .next()
            .ok_or((2, "missing '# gen=N' line".to_string()))?;
        let generation = second
            .strip_prefix("# gen=")
            .filter(|g| is_uint(g))
            .and_then(|g| g.parse().ok())
            .ok_or((2, "expected '# gen=N'".to_string()))?;
        if lines.next().is_some() {
            return Err((3, "unexpected line after '# gen=N'".into()));
        }
        Ok(Sidecar {
            sha256: hash.to_string(),
            generation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_state_round_trips() {
        let s = State::ready("2.0.0", 1_796_016_519);
        let text = s.print();
        assert_eq!(State::parse(text.as_bytes()).unwrap(), s);
        assert!(
            text.starts_with(
                "CONTRACT_VERSION=2.0.0\nGEN=1\nNEXT_ITERATION=1\nLAST_STATUS=READY\n"
            )
        );
        assert!(text.ends_with("\nWORKSPACE=\n"), "{text}");
    }

    #[test]
    fn hostile_and_malformed_input_is_rejected_with_a_line() {
        let good = State::ready("2.0.0", 5).print();
        let cases = [
            (
                good.replace("NEXT_ITERATION=1", "NEXT_ITERATION=x[$(touch CANARY)]"),
                3,
            ),
            (good.replace("GEN=1\n", "GEN=1\nGEN=2\n"), 3),
            (good.replace('\n', "\r\n"), 1),
            (format!("{good}EXTRA=1\n"), 18),
            (good.replace("WORKSPACE=", "WORKSPACE=relative/path"), 17),
            (good.replace("LAST_STATUS=READY", "LAST_STATUS=done"), 4),
            (good.replace("COST_MICROUSD=0", "COST_MICROUSD=0999"), 10),
        ];
        for (text, line) in cases {
            let err = State::parse(text.as_bytes()).unwrap_err();
            assert_eq!(err.0, line, "{text:?} -> {err:?}");
        }
        assert!(State::parse(&good.as_bytes()[..good.len() - 1]).is_err());
        assert!(State::parse(b"").is_err());
        let missing: String = good
            .lines()
            .filter(|l| !l.starts_with("RESUME_AT"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(State::parse(missing.as_bytes()).unwrap_err().0, 0);
        // A key a later contract added may be missing only from an older loop's state.
        let no_workspace: String = good
            .lines()
            .filter(|l| !l.starts_with("WORKSPACE="))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(State::parse(no_workspace.as_bytes()).unwrap_err().0, 0);
        let v1 = no_workspace.replace("CONTRACT_VERSION=2.0.0", "CONTRACT_VERSION=1.0.0");
        assert_eq!(State::parse(v1.as_bytes()).unwrap().workspace, "");
    }

    #[test]
    fn keys_are_found_on_their_lines() {
        let s = State::ready("1.0.0", 5).print();
        assert_eq!(key_line(&s, "NEXT_ITERATION"), 3);
        assert_eq!(key_line(&s, "COST_MICROUSD"), 10);
        assert_eq!(key_line("GEN=2\nCB_STATE=OPEN\n", "CB_STATE"), 2);
        assert_eq!(key_line("", "CB_STATE"), 11);
        assert_eq!(key_line(&s, "NOPE"), 0);
    }

    #[test]
    fn sidecar_round_trips() {
        let s = Sidecar::for_state("x", 7);
        assert_eq!(Sidecar::parse(s.print().as_bytes()).unwrap(), s);
        assert!(Sidecar::parse(b"abc  state.env\n# gen=1\n").is_err());
        let h = "a".repeat(64);
        // The runner's rule: trailing newlines do not matter, case and leading zeros do.
        for (text, ok) in [
            (format!("{h}  state.env\n# gen=4"), true),
            (format!("{h}  state.env\n# gen=4\n\n\n"), true),
            (format!("{h}  state.env\n# gen=04\n"), false),
            (format!("{}  state.env\n# gen=4\n", h.to_uppercase()), false),
            (format!("{h}  state.env\n\n# gen=4\n"), false),
            (format!("{h}  state.env\n# gen=4\nextra\n"), false),
            ("\n\n".to_string(), false),
        ] {
            let got = Sidecar::parse(text.as_bytes());
            assert_eq!(got.is_ok(), ok, "{text:?} -> {got:?}");
        }
        assert_eq!(
            Sidecar::parse(format!("{h}  state.env\n# gen=4\n").as_bytes()).unwrap(),
            Sidecar {
                sha256: h,
                generation: 4
            }
        );
    }
}
