//! The goal and the validated values `orbit init` is given: goal text, slug, durations,
//! money, check names and protect globs.

use crate::error::{Error, Result};

/// The longest goal accepted. A goal is a contract, not a corpus; 1 MiB is far beyond any
/// real one and keeps prompts bounded.
pub const MAX_GOAL_BYTES: usize = 1 << 20;

/// Goal text: valid UTF-8, no NUL, not blank, at most [`MAX_GOAL_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalText(String);

impl GoalText {
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        if bytes.contains(&0) {
            let at = bytes.iter().position(|b| *b == 0).unwrap_or(0);
            return Err(Error::Goal(format!(
                "it contains a NUL byte (at byte {at}); write the goal as plain text"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            Error::Goal(format!(
                "it is not valid UTF-8 (first bad byte at {}); save the goal as UTF-8 text",
                e.utf8_error().valid_up_to()
            ))
        })?;
        Self::new(text)
    }

    pub fn new(text: String) -> Result<Self> {
        if text.contains('\0') {
            return Err(Error::Goal(
                "it contains a NUL byte; write the goal as plain text".into(),
            ));
        }
        if text.trim().is_empty() {
            return Err(Error::Goal(
                "it is empty; say what the loop must achieve, e.g. orbit init \"make cargo test pass\"".into(),
            ));
        }
        if text.len() > MAX_GOAL_BYTES {
            return Err(Error::Goal(format!(
                "it is {} bytes, over the limit of {MAX_GOAL_BYTES}; put long material in a file \
                 the agent can read and reference it from the goal",
                text.len()
            )));
        }
        Ok(GoalText(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first non-blank line, trimmed, shortened to 120 characters: the goal's title.
    pub fn title(&self) -> String {
        let line = self
            .0
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("goal");
        let cleaned: String = line.chars().filter(|c| !c.is_control()).collect();
        truncate_chars(&cleaned, 120)
    }

    /// A directory-safe name from the goal: lowercase ASCII words joined by '-', at most
    /// 40 characters; "loop" when the goal has no ASCII word.
    pub fn slug(&self) -> String {
        slugify(&self.0, 40).unwrap_or_else(|| "loop".to_string())
    }
}

fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Lowercase ASCII alphanumeric words joined by '-', cut at a word boundary within `max`.
pub fn slugify(text: &str, max: usize) -> Option<String> {
    let mut out = String::new();
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_ascii_lowercase();
        let extra = if out.is_empty() { 0 } else { 1 };
        if out.len() + extra + word.len() > max {
            if out.is_empty() {
                out.push_str(&word[..max]);
            }
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word);
    }
    if out.is_empty() { None } else { Some(out) }
}

/// A duration in whole seconds, parsed from `600`, `600s`, `10m`, `1h`, `1h30m` or `2d`.
pub fn parse_duration(flag: &str, text: &str) -> Result<u64> {
    let bad = || {
        Error::Usage(format!(
            "{flag}: '{}' is not a duration; write a whole number with a unit, e.g. 90s, 10m, 2h, 1h30m (or 0 for none)",
            text.escape_debug()
        ))
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map_err(|_| bad())
            .and_then(|v| check_max(flag, v));
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        if num.is_empty() {
            return Err(bad());
        }
        let n: u64 = num.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        num.clear();
    }
    if !num.is_empty() {
        return Err(bad());
    }
    check_max(flag, total)
}

fn check_max(flag: &str, secs: u64) -> Result<u64> {
    if secs > crate::contract::settings::DURATION_MAX_SECS {
        return Err(Error::Usage(format!(
            "{flag}: {secs}s is longer than a year; give a shorter duration"
        )));
    }
    Ok(secs)
}

/// Formats seconds the way [`parse_duration`] reads them back: `10m`, `1h30m`, `45s`, `0`.
pub fn format_duration(secs: u64) -> String {
    if secs == 0 {
        return "0".into();
    }
    let mut out = String::new();
    let mut rest = secs;
    for (unit, name) in [(86_400, 'd'), (3600, 'h'), (60, 'm'), (1, 's')] {
        if rest >= unit {
            out.push_str(&format!("{}{name}", rest / unit));
            rest %= unit;
        }
    }
    out
}

/// A USD amount given as text, stored in micro-dollars so bash compares integers.
pub fn parse_usd(flag: &str, text: &str) -> Result<u64> {
    let bad = || {
        Error::Usage(format!(
            "{flag}: '{}' is not an amount in USD; write e.g. 5, 12.50 or 0.75",
            text.escape_debug()
        ))
    };
    let t = text.trim().trim_start_matches('$');
    let (whole, frac) = match t.split_once('.') {
        Some((w, f)) => (w, f),
        None => (t, ""),
    };
    if whole.is_empty() && frac.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 6
        || whole.len() > 9
    {
        return Err(bad());
    }
    let w: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let f: u64 = format!("{frac:0<6}").parse().map_err(|_| bad())?;
    Ok(w * 1_000_000 + f)
}

/// Formats micro-dollars as a USD amount: `5`, `12.5`, `0.000001`.
pub fn format_usd(micro: u64) -> String {
    let whole = micro / 1_000_000;
    let frac = micro % 1_000_000;
    if frac == 0 {
        whole.to_string()
    } else {
        let f = format!("{frac:06}");
        format!("{whole}.{}", f.trim_end_matches('0'))
    }
}

/// An amount in USD, held as whole micro-dollars from the text the user wrote to the
/// script that compares it: never a float. In loop.toml it is written as a string
/// (`usd-cap = "12.5"`); a number (`usd-cap = 12.5`, as older loops have it) is read through
/// its shortest decimal text, which is exactly what was written for any amount of at most
/// six decimals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Usd(pub u64);

impl Usd {
    pub fn micro(self) -> u64 {
        self.0
    }

    /// Reads an amount from a TOML value (string, integer or float), for loop.toml and
    /// orbit.toml alike.
    pub fn from_toml(key: &str, v: &toml::Value) -> Result<Usd> {
        let text = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) if *i >= 0 => i.to_string(),
            toml::Value::Float(f) if f.is_finite() && *f >= 0.0 => f.to_string(),
            other => {
                return Err(Error::Usage(format!(
                    "{key} = {other}: give an amount in USD such as 5 or \"12.50\""
                )));
            }
        };
        parse_usd(key, &text).map(Usd)
    }
}

impl std::fmt::Display for Usd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_usd(self.0))
    }
}

impl serde::Serialize for Usd {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&format_usd(self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Usd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Usd, D::Error> {
        let v = toml::Value::deserialize(d)?;
        Usd::from_toml("amount", &v).map_err(serde::de::Error::custom)
    }
}

/// Unique check names derived from the check commands: `cargo-test`, `cargo-test-2`, ...
pub fn check_names(commands: &[String]) -> Vec<String> {
    check_names_with(commands, &std::collections::BTreeMap::new())
}

/// Unique check names: the name `given` holds for a command (loop.toml `check-name`, `orbit
/// init --name`), else one derived from the command; a derived name never takes a given one.
pub fn check_names_with(
    commands: &[String],
    given: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(commands.len());
    for (i, cmd) in commands.iter().enumerate() {
        if let Some(name) = given.get(cmd) {
            names.push(name.clone());
            continue;
        }
        let base = slugify(cmd, 32).unwrap_or_else(|| format!("check-{}", i + 1));
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) || given.values().any(|g| *g == name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

/// Whether `name` may name a check: letters, digits, '.', '_' and '-', not starting with '-'
/// or '.', at most 40 bytes (verify.sh's `[PASS] NAME` lines and the runner's tally read it
/// as one word).
pub fn is_check_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 40
        && !name.starts_with(['-', '.'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Checks one protect glob: a repository-relative path pattern.
pub fn validate_glob(glob: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::Usage(format!(
            "--protect '{}': {why}",
            glob.escape_debug()
        )))
    };
    if glob.is_empty() {
        return bad("an empty glob protects nothing; name a path such as 'tests/**'");
    }
    if glob.starts_with('/') {
        return bad("write it relative to the repository root, e.g. 'tests/**'");
    }
    if glob.chars().any(|c| c.is_control()) {
        return bad("it contains a control character");
    }
    if glob.split('/').any(|part| part == "..") {
        return bad("'..' would reach outside the repository");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_format() {
        assert_eq!(parse_duration("--x", "600").unwrap(), 600);
        assert_eq!(parse_duration("--x", "10m").unwrap(), 600);
        assert_eq!(parse_duration("--x", "1h30m").unwrap(), 5400);
        assert_eq!(parse_duration("--x", "0").unwrap(), 0);
        for bad in [
            "",
            "m",
            "10x",
            "-5m",
            "1.5h",
            "10m5",
            "99999999999999999999",
        ] {
            assert!(parse_duration("--x", bad).is_err(), "{bad} accepted");
        }
        for secs in [0, 1, 59, 60, 600, 5400, 90_061] {
            assert_eq!(parse_duration("--x", &format_duration(secs)).unwrap(), secs);
        }
    }

    #[test]
    fn usd_parses_to_micro_dollars() {
        assert_eq!(parse_usd("--usd-cap", "5").unwrap(), 5_000_000);
        assert_eq!(parse_usd("--usd-cap", "12.50").unwrap(), 12_500_000);
        assert_eq!(parse_usd("--usd-cap", ".75").unwrap(), 750_000);
        assert_eq!(format_usd(12_500_000), "12.5");
        for bad in ["", ".", "abc", "1.2345678", "-1", "1e3"] {
            assert!(parse_usd("--usd-cap", bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn slugs_and_names() {
        let g = GoalText::new("Make `cargo test` pass on the NEW parser!".into()).unwrap();
        assert_eq!(g.slug(), "make-cargo-test-pass-on-the-new-parser");
        assert_eq!(GoalText::new("日本語".into()).unwrap().slug(), "loop");
        let names = check_names(&["cargo test".into(), "cargo test".into(), "!!".into()]);
        assert_eq!(names, ["cargo-test", "cargo-test-2", "check-3"]);
    }

    #[test]
    fn goal_rejects_nul_invalid_utf8_and_blank() {
        assert!(GoalText::from_bytes(b"a\0b".to_vec()).is_err());
        assert!(GoalText::from_bytes(vec![0x66, 0xff, 0x66]).is_err());
        assert!(GoalText::from_bytes(b"  \n\t".to_vec()).is_err());
        assert!(GoalText::from_bytes(b"ok".to_vec()).is_ok());
    }
}
