//! The loop's settings: each key of loop.toml (named like its `orbit init` flag), its kind,
//! its default and its bounds. `LoopConfig::validate` and the bash runner's `settings_check`
//! both check a value against this one table, so a setting means the same to both.

/// The largest duration any setting takes (one year): anything longer is a typo, and every
/// value stays far from bash's integer limits.
pub const DURATION_MAX_SECS: u64 = 366 * 86_400;

/// What kind of value a setting holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    /// A whole number from `min` to `max`.
    Count { min: u64, max: u64 },
    /// A duration (`600`, `90s`, `10m`, `1h30m`, `2d`) of at least `min` seconds and at
    /// most [`DURATION_MAX_SECS`].
    Duration { min: u64 },
    /// `1`/`0` in bash, `true`/`false` in loop.toml.
    Bool,
    /// An amount in USD (none when empty), held as integer micro-dollars.
    Usd,
    /// Free text (a command, a pattern, a URL): anything but a NUL byte.
    Text,
    /// A list of words without blanks (URLs, topics): an array of strings in loop.toml (a
    /// single string is read as a list of one, as loops written before the list read it);
    /// in bash and the environment, the words separated by spaces.
    List,
}

impl SettingKind {
    /// The bash prelude's name for the kind (`ORBIT_SETTING_KIND[NAME]`).
    pub const fn bash_name(self) -> &'static str {
        match self {
            SettingKind::Count { .. } => "count",
            SettingKind::Duration { .. } => "duration",
            SettingKind::Bool => "bool",
            SettingKind::Usd => "usd",
            SettingKind::Text => "text",
            SettingKind::List => "list",
        }
    }
}

/// One setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The loop.toml key and `orbit init` flag name (`max-iterations`).
    pub key: &'static str,
    pub kind: SettingKind,
    /// The default, as loop.toml's text would give it to bash ("" for none).
    pub default: &'static str,
}

impl Setting {
    /// The environment variable (and bash variable) of the setting: `MAX_ITERATIONS`.
    pub fn env_name(&self) -> String {
        self.key.replace('-', "_").to_ascii_uppercase()
    }

    /// The bounds in words, for messages: "from 1 to 20", "at least 1s".
    pub fn bounds_text(&self) -> String {
        match self.kind {
            SettingKind::Count { min, max } => format!("a whole number from {min} to {max}"),
            SettingKind::Duration { min: 0 } => {
                "a duration such as 90s, 10m, 2h, 1h30m (or 0 for none), at most a year".into()
            }
            SettingKind::Duration { min } => format!(
                "a duration of at least {min}s, such as 90s, 10m, 2h or 1h30m, at most a year"
            ),
            SettingKind::Bool => "true or false".into(),
            SettingKind::Usd => "an amount in USD such as 5, 12.50 or 0.75".into(),
            SettingKind::Text => "text without a NUL byte".into(),
            SettingKind::List => {
                "a list of strings without blanks, such as [\"https://example.com/hook\"]".into()
            }
        }
    }
}

const fn count(key: &'static str, min: u64, max: u64, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Count { min, max },
        default,
    }
}

const fn duration(key: &'static str, min: u64, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Duration { min },
        default,
    }
}

const fn flag(key: &'static str, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Bool,
        default,
    }
}

const fn usd(key: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Usd,
        default: "",
    }
}

const fn list(key: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::List,
        default: "",
    }
}

const fn text(key: &'static str, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Text,
        default,
    }
}

/// The placeholder scan of the DONE gate: an extended regular expression matched against
/// the lines the loop added.
pub const DEFAULT_PLACEHOLDER_PATTERN: &str = r"TODO|FIXME|XXX|todo!\(|unimplemented!\(|NotImplementedError|raise NotImplemented|not yet implemented";

/// Every setting the runner reads, in the order the scripts list them.
pub const SETTINGS: &[Setting] = &[
    count("max-iterations", 1, 1_000_000, "20"),
    duration("exec-timeout", 1, "10m"),
    duration("loop-timeout", 0, "0"),
    usd("usd-cap"),
    usd("usd-per-run-cap"),
    usd("usd-per-iter-cap"),
    usd("cost-estimate-usd"),
    count("pass-k", 1, 20, "2"),
    duration("check-timeout", 1, "10m"),
    count("retry-limit", 1, 5, "3"),
    duration("retry-base-delay", 0, "5s"),
    count("cb-threshold", 1, 1000, "3"),
    duration("cb-cooldown", 0, "10m"),
    count("convergence-window", 2, 100, "3"),
    duration("kill-grace", 0, "10s"),
    duration("commit-timeout", 1, "2m"),
    flag("autocommit", "1"),
    flag("squash-on-done", "0"),
    flag("allow-green-start", "0"),
    flag("wrapup-on-limit", "1"),
    flag("adaptive-timeout", "0"),
    count("confirm-runs", 0, 5, "1"),
    text("judge-cmd", ""),
    text("placeholder-pattern", DEFAULT_PLACEHOLDER_PATTERN),
    count("agent-log-max", 1024, 1 << 40, "4194304"),
    flag("notify-every-iteration", "0"),
    flag("notify-desktop", "0"),
    text("notify-cmd", ""),
    list("notify-webhook"),
    text("notify-webhook-env", ""),
    list("notify-ntfy"),
    duration("notify-timeout", 1, "10s"),
    list("token-prices"),
    text("env-file", ""),
];

/// The setting named `key` (a loop.toml key).
///
/// # Panics
/// When `key` is not in [`SETTINGS`]: a typo in orbit's own code, caught by its tests.
pub fn setting(key: &str) -> &'static Setting {
    SETTINGS
        .iter()
        .find(|s| s.key == key)
        .unwrap_or_else(|| panic!("'{key}' is not a setting of the loop contract"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_defaults_in_bounds() {
        for (i, s) in SETTINGS.iter().enumerate() {
            assert!(
                SETTINGS[..i].iter().all(|o| o.key != s.key),
                "{} twice",
                s.key
            );
            if let SettingKind::Count { min, max } = s.kind {
                let v: u64 = s.default.parse().unwrap();
                assert!((min..=max).contains(&v), "{}", s.key);
            }
        }
        assert_eq!(setting("max-iterations").env_name(), "MAX_ITERATIONS");
    }
}
