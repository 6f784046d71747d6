//! The loop's settings: each key of loop.toml (named like its `orbit init` flag) that has a
//! kind, a default and bounds, the loop's identity among them (its workspace, sandbox,
//! memory and fan-out). `LoopConfig::validate` and the bash runner's `config_settings_check` both
//! check a value against this one table, so a setting means the same to both; loop.toml's
//! defaults, the scripts' settings prelude and the templates' `s.check_timeout` are drawn
//! from it.

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
    /// One word of a closed set (`notes` or `feedback`).
    Choice { words: &'static [&'static str] },
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
            SettingKind::Choice { .. } => "choice",
        }
    }
}

/// Whether the environment overrides a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A setting of the run: the environment variable of its name overrides it at run time
    /// (`MAX_ITERATIONS=5 bash run-loop.sh`).
    Run,
    /// The loop's identity, fixed when the loop is rendered: no environment variable
    /// overrides it, and its bash variable says so (`CANDIDATES_SETTING`). `note` says what
    /// it is, above its line in the settings prelude (lines of at most 88 characters).
    Identity { note: &'static str },
}

/// One setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The loop.toml key and `orbit init` flag name (`max-iterations`).
    pub key: &'static str,
    pub kind: SettingKind,
    /// The default, as loop.toml's text would give it to bash ("" for none).
    pub default: &'static str,
    pub scope: Scope,
}

impl Setting {
    /// The environment variable of the setting's name: `MAX_ITERATIONS`.
    pub fn env_name(&self) -> String {
        self.key.replace('-', "_").to_ascii_uppercase()
    }

    /// The bash variable the scripts read the setting from: the environment variable's name
    /// for a setting of the run, with `_SETTING` after it for the loop's identity (which the
    /// environment must not reach: `WORKSPACE_SETTING`, as CI systems set `WORKSPACE`).
    pub fn bash_name(&self) -> String {
        match self.scope {
            Scope::Run => self.env_name(),
            Scope::Identity { .. } => format!("{}_SETTING", self.env_name()),
        }
    }

    /// Whether an environment variable overrides the setting at run time.
    pub fn overridable(&self) -> bool {
        self.scope == Scope::Run
    }

    /// The same setting as part of the loop's identity, with its note.
    const fn identity(self, note: &'static str) -> Setting {
        Setting {
            scope: Scope::Identity { note },
            ..self
        }
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
            SettingKind::Choice { words } => format!("one of \"{}\"", words.join("\", \"")),
        }
    }
}

const fn count(key: &'static str, min: u64, max: u64, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Count { min, max },
        default,
        scope: Scope::Run,
    }
}

const fn duration(key: &'static str, min: u64, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Duration { min },
        default,
        scope: Scope::Run,
    }
}

const fn flag(key: &'static str, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Bool,
        default,
        scope: Scope::Run,
    }
}

const fn usd(key: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Usd,
        default: "",
        scope: Scope::Run,
    }
}

const fn list(key: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::List,
        default: "",
        scope: Scope::Run,
    }
}

const fn text(key: &'static str, default: &'static str) -> Setting {
    Setting {
        key,
        kind: SettingKind::Text,
        default,
        scope: Scope::Run,
    }
}

const fn choice(
    key: &'static str,
    words: &'static [&'static str],
    default: &'static str,
) -> Setting {
    Setting {
        key,
        kind: SettingKind::Choice { words },
        default,
        scope: Scope::Run,
    }
}

/// The words of `memory`: what the agent is given back of earlier iterations.
pub const MEMORY_POLICIES: &[&str] = &["notes", "feedback"];

/// The words of `sandbox`: the OS sandbox of the agent and check runs.
pub const SANDBOXES: &[&str] = &["none", "bwrap", "auto"];

/// The words of `sandbox-network`: what a sandboxed run may reach of the network.
pub const SANDBOX_NETWORKS: &[&str] = &["open", "allowlist"];

/// The words of `adequacy`: whether a DONE's change is measured (`orbit adequacy`) and
/// whether the measure decides the DONE.
pub const ADEQUACY_MODES: &[&str] = &["off", "report", "gate"];

/// The placeholder scan of the DONE gate: an extended regular expression matched against
/// the lines the loop added.
pub const DEFAULT_PLACEHOLDER_PATTERN: &str = r"TODO|FIXME|XXX|todo!\(|unimplemented!\(|NotImplementedError|raise NotImplemented|not yet implemented";

/// Every setting the scripts read, in the order their settings prelude lists them: the
/// settings of the run, then the loop's identity.
///
/// # A new setting is three edits
///
/// 1. **A row here**: its key (the loop.toml key, and the `orbit init` flag if it ever gets
///    one), its kind with its bounds, its default, and `.identity(note)` when no environment
///    variable may override it. From the row follow: loop.toml's default
///    (`LoopConfig::default`) and validation, the bash prelude's kind and bounds
///    (`ORBIT_SETTINGS`, `ORBIT_SETTING_KIND`/`_MIN`/`_MAX`/`_WORDS`, checked by the runner's
///    `config_settings_check`), its line in the settings prelude (`NAME=${NAME-default}`, or
///    `NAME_SETTING=value` under its note) and the templates' `{{ s.key_in_snake_case }}`.
/// 2. **A field of `LoopConfig`** (`src/config.rs`) named like the key, of the type its
///    kind reads as: a count `u64` or `u32`, a duration or text `String`, a bool `bool`, an
///    amount `Option<Usd>`, a list `Vec<String>`, a choice an enum whose words are the
///    row's. Its default and its bounds are the row's; the field is not written twice.
/// 3. **Its use**: the static bash part that reads `$NAME` (`$NAME_SETTING`), or the Rust
///    that reads the field.
///
/// A flag of `orbit init` for it is one edit more (`InitArgs` and `config_from_args`);
/// `orbit init --force` refuses the new flag with nothing to change. A row without its
/// field, or a field without its row, fails every test that builds a `LoopConfig`.
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
    count("check-jobs", 0, 64, "0"),
    count("retry-limit", 1, 5, "3"),
    duration("retry-base-delay", 0, "5s"),
    count("cb-threshold", 1, 1000, "3"),
    duration("cb-cooldown", 0, "10m"),
    count("convergence-window", 2, 100, "3"),
    duration("kill-grace", 0, "10s"),
    duration("commit-timeout", 1, "2m"),
    flag("autocommit", "1"),
    flag("commit-hooks", "1"),
    text("commit-message-prefix", ""),
    flag("squash-on-done", "0"),
    flag("allow-green-start", "0"),
    list("allow-fewer-tests"),
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
    duration("adequacy-budget", 0, "0"),
    count("adequacy-max-survivors", 0, 1_000_000, "0"),
    // The loop's identity.
    text("workspace", "").identity(
        "The workspace is the loop's identity, never overridden from the environment (CI\n\
         systems set WORKSPACE for their own use).",
    ),
    choice("sandbox", SANDBOXES, "auto").identity(
        "The OS sandbox of the agent and check runs (none | bwrap | auto: bubblewrap where it\n\
         runs here), never overridden from the environment either: whatever starts the\n\
         runner must not be able to turn it off.",
    ),
    choice("sandbox-network", SANDBOX_NETWORKS, "allowlist").identity(
        "What a sandboxed run reaches of the network (allowlist: only the engine's API and\n\
         allow-hosts, through the runner's proxy; open: everything), never overridden from\n\
         the environment: whatever starts the runner must not be able to open it.",
    ),
    list("allow-hosts").identity(
        "The hosts (HOST or HOST:PORT) every sandboxed run may reach under the allowlist.",
    ),
    list("offline-env").identity("The checks' offline variables."),
    list("setup-inputs").identity("The files the setup reads: with its commands, its cache's key."),
    choice("memory", MEMORY_POLICIES, "notes").identity(
        "What the agent is given back of earlier iterations: notes (its notes.md and\n\
         progress.md) or feedback (only the goal and the last failure's feedback).",
    ),
    count("candidates", 1, 8, "1").identity(
        "How many candidates each iteration fans out to (1: no fan-out), the loop's identity.",
    ),
    flag("fanout-early-stop", "0").identity(
        "1: the fan-out stops at the first candidate that passes everything; 0: it waits for all.",
    ),
    choice("adequacy", ADEQUACY_MODES, "report").identity(
        "orbit adequacy of a DONE: off, report (after it) or gate (in the DONE gate); fixed here.",
    ),
    flag("holdout-unmasked", "0").identity(
        "1: under the sandbox, a holdout check may read the holdout and run the project's code\n\
         without run_hidden (that code can read the answers); 0: orbit init refuses such a check.",
    ),
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
            if let SettingKind::Choice { words } = s.kind {
                assert!(words.contains(&s.default), "{}", s.key);
            }
            if let Scope::Identity { note } = s.scope {
                // Comment lines of the prelude: orbit's words, each on its own line.
                for line in note.lines() {
                    assert!(line.len() <= 88, "{}: '{line}' is too long", s.key);
                    assert!(!line.chars().any(char::is_control), "{}", s.key);
                }
            }
        }
        assert_eq!(setting("candidates").bash_name(), "CANDIDATES_SETTING");
        assert_eq!(setting("max-iterations").env_name(), "MAX_ITERATIONS");
    }
}
