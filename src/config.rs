//! `loop.toml`: every setting a loop was rendered with. Keys carry the names of the
//! `orbit init` flags; the runner's environment overrides use the same names in
//! SCREAMING_SNAKE_CASE (`max-iterations` → `MAX_ITERATIONS`).

use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::contract::ValueType;
use crate::contract::settings::{
    ADEQUACY_MODES, DURATION_MAX_SECS, MEMORY_POLICIES, SANDBOX_NETWORKS, SANDBOXES, SETTINGS,
    Setting, SettingKind,
};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::goal::{self, Usd, parse_duration};

pub use crate::contract::CONTRACT_VERSION;
pub use crate::contract::settings::DEFAULT_PLACEHOLDER_PATTERN;

/// Every key of loop.toml. A key left out takes its default: a setting's from the contract's
/// table ([`SETTINGS`]), the loop's identity's from [`LoopConfig::defaults`]; so
/// `LoopConfig::default()` is the loop.toml that says nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// `remote = "Self"`: the derives are the inherent `LoopConfig::serialize` and
// `LoopConfig::deserialize`, which the trait impls below wrap (deserializing over the
// defaults first).
#[serde(remote = "Self", rename_all = "kebab-case", deny_unknown_fields)]
pub struct LoopConfig {
    /// Version of the loop contract the loop was written under.
    pub contract_version: String,
    /// The loop's name (its directory name by default).
    pub name: String,
    /// claude | codex | gemini | qwen | aider | opencode | copilot | custom.
    pub engine: Engine,
    /// The agent command as an argv; the prompt arrives on stdin.
    pub argv: Vec<String>,
    /// Acceptance checks, one shell command each; each is one `run_check` line in verify.sh.
    pub verify: Vec<String>,
    /// Reproduction checks: each must fail on the base tree (the red gate per check) and
    /// pass at the end. In verify.sh with the role `reproduction`.
    pub reproduction: Vec<String>,
    /// Regression checks: each must pass on the base tree and stay green. In verify.sh with
    /// the role `regression`.
    pub regression: Vec<String>,
    /// Holdout checks: run only in the DONE gate, from holdout.sh, never shown to the agent.
    pub holdout: Vec<String>,
    /// The user's word that, under the sandbox, a holdout check may read the holdout and run
    /// the project's code without `run_hidden` (so that code can read the answers): without
    /// it, `orbit init` refuses such a check. Not written when false.
    #[serde(skip_serializing_if = "is_false")]
    pub holdout_unmasked: bool,
    /// The workspace's setup: shell commands run once in each new work tree of the loop (the
    /// workspace, a candidate's worktree, the clean checkout) before any check runs there,
    /// such as `npm ci` or making a virtual environment. What they create is never part of
    /// the agent's change. Not written when empty, so a loop rendered before it keeps its
    /// loop.toml.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    /// The names given to checks, by command (`orbit init --name NAME` before the check):
    /// a check without one is named from its command's words. Not written when empty.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub check_name: std::collections::BTreeMap<String, String>,
    /// Repository path globs the agent must not change.
    pub protect: Vec<String>,
    /// The globs `orbit init` protects by default: the files that change how the checks'
    /// tools (and the judge) run, found from the commands (`crate::autoprotect`). Unlike
    /// `protect`, a glob here may match nothing: it is pinned as an empty set, so a file
    /// the agent creates under it (a `pytest.ini`, a `conftest.py`) is a reward hack. Not
    /// written when empty, so a loop rendered before it keeps its loop.toml.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto_protect: Vec<String>,
    pub max_iterations: u64,
    pub exec_timeout: String,
    pub loop_timeout: String,
    /// Hard cap on total spend in USD (none when absent).
    pub usd_cap: Option<Usd>,
    pub usd_per_run_cap: Option<Usd>,
    pub usd_per_iter_cap: Option<Usd>,
    /// What one agent run is assumed to cost when the engine reports nothing.
    pub cost_estimate_usd: Option<Usd>,
    pub pass_k: u32,
    /// Timeout of each verify check.
    pub check_timeout: String,
    /// How many fan-out candidates' checks run at once (0: as many as there are candidates,
    /// at most the CPUs). Not written when 0, so a loop without fan-out keeps its loop.toml.
    #[serde(skip_serializing_if = "is_zero")]
    pub check_jobs: u32,
    /// Attempts per iteration for transient agent failures (at most 5).
    pub retry_limit: u32,
    pub retry_base_delay: String,
    /// Consecutive failed iterations that open the circuit breaker.
    pub cb_threshold: u32,
    pub cb_cooldown: String,
    pub convergence_window: u32,
    pub kill_grace: String,
    /// How long one auto-commit (with the repository's hooks) may take.
    pub commit_timeout: String,
    pub autocommit: bool,
    /// Whether the repository's commit hooks run, as checks in the sandbox.
    pub commit_hooks: bool,
    /// Text put before the subject of the runner's commit messages (a ticket a commit-msg
    /// hook wants).
    pub commit_message_prefix: String,
    /// Read from loops written before workspaces (contract 1.0), never written: a loop
    /// always works on `orbit/<name>` in its own worktree now, so only `true` is accepted.
    #[serde(skip_serializing)]
    pub branch_isolation: bool,
    pub squash_on_done: bool,
    pub allow_green_start: bool,
    /// The checks (by name) whose pass may run fewer tests, or skip more, than on the base
    /// tree: the drop is accepted and recorded.
    pub allow_fewer_tests: Vec<String>,
    pub wrapup_on_limit: bool,
    pub adaptive_timeout: bool,
    /// Fresh-context confirmation runs before DONE (0 = off).
    pub confirm_runs: u32,
    /// A command that approves DONE by exiting 0 (empty = no judge).
    pub judge_cmd: String,
    pub placeholder_pattern: String,
    /// A whole number of bytes, held as loop.toml's text gives it (a string, or an integer).
    #[serde(deserialize_with = "count_text")]
    pub agent_log_max: String,
    pub notify_every_iteration: bool,
    pub notify_desktop: bool,
    pub notify_cmd: String,
    /// Webhook URLs written into loop.toml by hand. `orbit init` keeps channel URLs out of
    /// loop.toml (they are secrets): it writes them to `notify.secrets`. A single string,
    /// as loops written before the list hold it, is read as a list of one.
    #[serde(deserialize_with = "string_or_list")]
    pub notify_webhook: Vec<String>,
    /// The name of an environment variable that holds webhook URLs (blank-separated).
    pub notify_webhook_env: String,
    /// ntfy topics or URLs written into loop.toml by hand (see `notify_webhook`).
    #[serde(deserialize_with = "string_or_list")]
    pub notify_ntfy: Vec<String>,
    pub notify_timeout: String,
    /// The loop's workspace, a git worktree on `orbit/<name>`: relative to the repository
    /// root, or absolute. Empty means the default: under the user's data directory
    /// (`$XDG_DATA_HOME/orbit/workspaces/<repo-id>/<name>`) from contract 2.4.0,
    /// `.orbit/.workspaces/<name>` in a loop.toml of an older contract
    /// ([`LoopConfig::workspace_setting`]).
    pub workspace: String,
    /// The OS sandbox every agent and check runs in. Part of what the loop is, like its
    /// workspace: no environment variable overrides it. A loop.toml without the key was
    /// written before the sandbox existed, when no key meant none: it keeps meaning that
    /// (`orbit init` writes the key, `auto` unless told otherwise).
    pub sandbox: Sandbox,
    /// What a sandboxed run reaches of the network: `allowlist` (no network of its own; the
    /// runner's proxy lets through the engine's API for the agent and `allow-hosts` for
    /// every run) or `open`. Like `sandbox`, part of what the loop is: a loop.toml without
    /// the key was written before the allowlist existed and ran with the network open, so
    /// it keeps meaning `open` (`orbit init` writes the key, `allowlist` unless told
    /// otherwise).
    pub sandbox_network: SandboxNetwork,
    /// The hosts (`HOST` or `HOST:PORT`, `*.example.com` for its subdomains) every
    /// sandboxed run may reach under the allowlist; a host without a port is reachable on
    /// 80 and 443. Not written when empty.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "string_or_list"
    )]
    pub allow_hosts: Vec<String>,
    /// The variables (`NAME=VALUE`) that make the project's dependency tools run offline
    /// (`CARGO_NET_OFFLINE=true`, `npm_config_offline=true`, `GOPROXY=off`, ...), given to
    /// every check, the agent's runs and a setup run on a tree the agent made: `orbit init`
    /// writes them with the setup it applied for the ecosystems it found (crate::deps), so
    /// that what the setup fetched with the network is all the checks need. Not written
    /// when empty.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "string_or_list"
    )]
    pub offline_env: Vec<String>,
    /// The files the setup reads (paths from the repository's top, no blanks): with the
    /// setup commands, the key of its cache. What the workspace's first setup made on the
    /// untouched tree is kept, and a claim's clean checkout whose inputs are the same takes a
    /// copy of it instead of running the setup again. `orbit init` writes them with the setup
    /// it applies for the lockfiles it finds (crate::deps); a setup given by hand is cached
    /// only when they are given (`--setup-input`). Not written when empty.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "string_or_list"
    )]
    pub setup_inputs: Vec<String>,
    /// What tokens cost, for the engines that report tokens rather than dollars (codex,
    /// gemini): `model=input/cached/output` in USD per million tokens; `*` for any model
    /// not listed. A run's cost is then `estimated`, and the usd-cap holds.
    pub token_prices: Vec<String>,
    /// A file of `KEY=VALUE` lines (the engine's API keys) the runner reads into the
    /// agent's environment: for cron and systemd, whose environment lacks the keys of the
    /// user's shell. Mode 0600, owned by the user, not a symlink; never sourced.
    pub env_file: String,
    /// The most time the adequacy measure of a DONE may take (`0`: twice the DONE gate's own
    /// check time, PASS_K runs of the checks on the commit).
    pub adequacy_budget: String,
    /// In `adequacy = "gate"`: the most mutants of the change that may survive its checks.
    pub adequacy_max_survivors: u64,
    /// What the agent is given back of earlier iterations: its notes and the progress
    /// narrative (`notes`), or only the goal and the last failure's feedback (`feedback`).
    pub memory: Memory,
    /// How many agent runs each iteration fans out to, each in its own worktree from the
    /// same base (1: no fan-out). Bounded by the contract's table. Not written when 1, so a
    /// loop without fan-out keeps its loop.toml as before.
    #[serde(skip_serializing_if = "is_one")]
    pub candidates: u64,
    /// Whether a fan-out stops at the first candidate that passes everything (every check
    /// PASS_K times, the holdout, the judge): the others are stopped and recorded as such.
    /// Off (the default): every candidate is waited for and judged, so the survivor is the
    /// best of all N (the smallest change among those passing), not the fastest; on trades
    /// that choice for wall-clock time and the stopped runs' remaining spend.
    #[serde(skip_serializing_if = "is_false")]
    pub fanout_early_stop: bool,
    /// Whether a DONE's change is measured (`orbit adequacy`): `off`, `report` (after the
    /// DONE is recorded, never changing it) or `gate` (the measure decides the claim). Part
    /// of what the loop is: no environment variable overrides it.
    pub adequacy: Adequacy,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The memory policy of a loop (loop.toml `memory`, `orbit init --memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Memory {
    /// The agent's folder holds progress.md and notes.md; the prompt tells it to read them
    /// and lists the earlier distinct failures.
    #[default]
    Notes,
    /// Only the goal and the localized feedback of the last failure: an agent that reads
    /// its own earlier narrative tends to repeat it (anti self-conditioning).
    Feedback,
}

impl Memory {
    /// The name loop.toml and the runner give it: its word in the contract's table.
    pub fn name(self) -> &'static str {
        MEMORY_POLICIES[self as usize]
    }
}

/// Whether and how a loop measures its DONE's change (loop.toml `adequacy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Adequacy {
    /// Not measured.
    Off,
    /// Measured once the DONE is recorded, by the runner through the orbit pinned at init;
    /// the DONE stands whatever it finds.
    #[default]
    Report,
    /// Measured in the DONE gate: a hunk no check needs, or more surviving mutants than
    /// `adequacy-max-survivors`, rejects the claim with feedback naming them.
    Gate,
}

impl Adequacy {
    /// The name loop.toml and the runner give it: its word in the contract's table.
    pub fn name(self) -> &'static str {
        ADEQUACY_MODES[self as usize]
    }
}

/// The OS sandbox of a loop's agent and check runs (loop.toml `sandbox`, `orbit init
/// --sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Sandbox {
    /// None: the runner's integrity checks catch a tamper after the run.
    None,
    /// bubblewrap (Linux): the workspace writable; the loop directory, git's control files
    /// and the rest of the system read-only; a private /tmp; nothing outlives the run.
    Bwrap,
    /// bubblewrap where the runner's probe at the start of each run says it works here,
    /// else none (the runner's log says which and why): what a new loop gets.
    #[default]
    Auto,
}

impl Sandbox {
    /// What a loop.toml without the key means: none, as before the sandbox existed (see
    /// [`LoopConfig::sandbox`]).
    pub fn unset() -> Sandbox {
        Sandbox::None
    }

    /// The name loop.toml and the runner give it: its word in the contract's table.
    pub fn name(self) -> &'static str {
        SANDBOXES[self as usize]
    }
}

/// What a sandboxed loop's runs reach of the network (loop.toml `sandbox-network`, `orbit
/// init --sandbox-network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum SandboxNetwork {
    /// The network as the user has it (what a loop had before the allowlist).
    Open,
    /// No network of its own: only the engine's API (agent runs) and `allow-hosts` (every
    /// run), through a proxy the runner starts for the run; the rest refused and recorded.
    #[default]
    Allowlist,
}

impl SandboxNetwork {
    /// What a loop.toml without the key means: open, as before the allowlist existed (see
    /// [`LoopConfig::sandbox_network`]).
    pub fn unset() -> SandboxNetwork {
        SandboxNetwork::Open
    }

    /// The name loop.toml and the runner give it: its word in the contract's table.
    pub fn name(self) -> &'static str {
        SANDBOX_NETWORKS[self as usize]
    }
}

/// An `allow-hosts` entry, checked: `HOST` or `HOST:PORT`, where HOST is a DNS name (a
/// leading `*.` for its subdomains), an IPv4 address or an IPv6 address in brackets, and
/// PORT is from 1 to 65535. The runner's proxy matches the same shape (lib/sandbox-net.sh,
/// `config_host_ok`).
pub fn check_allow_host(entry: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::Usage(format!(
            "allow-hosts: '{}' {why}: give HOST or HOST:PORT, such as api.example.com, api.example.com:8443, *.example.com or 127.0.0.1:8080",
            entry.escape_debug()
        )))
    };
    if entry.contains("://") || entry.contains('/') {
        return bad("is a URL, not a host (no scheme, no path)");
    }
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, "")) => (h, None),
            Some((h, p)) if p.starts_with(':') => (h, Some(&p[1..])),
            _ => return bad("is not a bracketed IPv6 address"),
        }
    } else {
        match entry.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (entry, None),
        }
    };
    if let Some(p) = port
        && !(p.len() <= 5
            && !p.starts_with('0')
            && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n)))
    {
        return bad("has no port from 1 to 65535 after its ':'");
    }
    if entry.starts_with('[') {
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return bad("is not an IPv6 address in brackets");
        }
        return Ok(());
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return bad("is not a host name");
    }
    Ok(())
}

/// A list of strings, or one string as a list of one ("" as none): how a setting that
/// became a list still reads the loop.toml written before.
fn string_or_list<'de, D>(de: D) -> std::result::Result<Vec<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(de)? {
        OneOrMany::One(s) if s.is_empty() => Vec::new(),
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

impl Serialize for LoopConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        LoopConfig::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for LoopConfig {
    /// The keys given, over [`LoopConfig::defaults`].
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> std::result::Result<Self, D::Error> {
        let given = toml::Table::deserialize(de)?;
        let mut table = LoopConfig::defaults().clone();
        if !given.contains_key("sandbox") {
            table.insert("sandbox".into(), Sandbox::unset().name().into());
        }
        if !given.contains_key("sandbox-network") {
            table.insert(
                "sandbox-network".into(),
                SandboxNetwork::unset().name().into(),
            );
        }
        table.extend(given);
        LoopConfig::deserialize(table).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig::deserialize(LoopConfig::defaults().clone())
            .expect("the defaults of the contract's table make a loop.toml")
    }
}

/// A setting's default as loop.toml holds it (none for an amount without one).
fn toml_default(setting: &Setting) -> Option<toml::Value> {
    let text = setting.default;
    Some(match setting.kind {
        SettingKind::Count { .. } => toml::Value::Integer(
            text.parse()
                .expect("a count's default in the contract's table is a number"),
        ),
        SettingKind::Bool => toml::Value::Boolean(text == "1"),
        SettingKind::Usd if text.is_empty() => return None,
        SettingKind::List => toml::Value::Array(
            text.split_whitespace()
                .map(|w| toml::Value::String(w.into()))
                .collect(),
        ),
        SettingKind::Duration { .. }
        | SettingKind::Usd
        | SettingKind::Text
        | SettingKind::Choice { .. } => toml::Value::String(text.into()),
    })
}

/// A setting's value (as loop.toml holds it) as the text bash reads: "1"/"0" for booleans,
/// a list's words separated by spaces.
fn bash_text(value: &toml::Value) -> String {
    match value {
        toml::Value::String(t) => t.clone(),
        toml::Value::Boolean(b) => if *b { "1" } else { "0" }.into(),
        toml::Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(" "),
        v => v.to_string(),
    }
}

/// A whole number as loop.toml's text: a string, or an integer (kept as its digits).
fn count_text<'de, D>(de: D) -> std::result::Result<String, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct CountText;
    impl serde::de::Visitor<'_> for CountText {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a whole number")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<String, E> {
            Ok(v.into())
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<String, E> {
            Ok(v.to_string())
        }
    }
    de.deserialize_any(CountText)
}

/// Checks one setting's value (as loop.toml holds it) against the contract's table.
fn check_setting(setting: &Setting, value: &toml::Value) -> Result<()> {
    let key = setting.key;
    let bad = || Error::Usage(format!("{key} = {value}: give {}", setting.bounds_text()));
    match (setting.kind, value) {
        (SettingKind::Count { min, max }, toml::Value::Integer(n)) => {
            let n = u64::try_from(*n).map_err(|_| bad())?;
            (min..=max).contains(&n).then_some(()).ok_or_else(bad)
        }
        (SettingKind::Count { min, max }, toml::Value::String(t)) => {
            // A whole number as bash reads it: digits, no leading zero.
            let n: u64 = ValueType::Uint
                .accepts(t)
                .then(|| t.parse().ok())
                .flatten()
                .ok_or_else(bad)?;
            (min..=max).contains(&n).then_some(()).ok_or_else(bad)
        }
        (SettingKind::Duration { min }, toml::Value::String(t)) => {
            let secs = parse_duration(key, t)?;
            (min..=DURATION_MAX_SECS)
                .contains(&secs)
                .then_some(())
                .ok_or_else(bad)
        }
        (SettingKind::Bool, toml::Value::Boolean(_)) => Ok(()),
        (SettingKind::Usd, v) => Usd::from_toml(key, v).map(|_| ()),
        (SettingKind::Text, toml::Value::String(t)) if !t.contains('\0') => Ok(()),
        (SettingKind::Choice { words }, toml::Value::String(t)) if words.contains(&t.as_str()) => {
            Ok(())
        }
        (SettingKind::List, toml::Value::Array(items)) => items
            .iter()
            .all(|v| {
                v.as_str().is_some_and(|t| {
                    !t.is_empty() && !t.chars().any(|c| c.is_whitespace() || c.is_control())
                })
            })
            .then_some(())
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// An http:// or https:// URL with no blank or control character (the channels' URLs
/// travel as blank-separated words).
pub fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|r| !r.is_empty()) && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// An ntfy topic (letters, digits, '-', '_') or an http(s) URL.
pub fn is_ntfy_target(t: &str) -> bool {
    is_http_url(t)
        || (!t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

/// A path without control characters and without `.` or `..` segments (so that "inside"
/// and "outside" mean what they say), at most [`crate::contract::MAX_PATH_LEN`] bytes.
pub fn is_plain_path(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= crate::contract::MAX_PATH_LEN
        && !p.chars().any(char::is_control)
        && p.split('/').all(|seg| seg != "." && seg != "..")
}

/// A `setup-inputs` entry, checked: a plain path from the repository's top (no leading `/`,
/// no `.` or `..` segment, no control character) without blanks (the runner reads the list
/// as words).
pub fn check_setup_input(p: &str) -> Result<()> {
    if is_plain_path(p) && !p.starts_with('/') && !p.chars().any(char::is_whitespace) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "setup-inputs: '{}' is not a path from the repository's top without blanks (no leading /, no . or .. segment), such as package-lock.json",
        p.escape_debug()
    )))
}

/// Whether `grep -E` takes `pattern` (its exit status 2 says it does not): the judge the
/// runner's DONE gate asks, so that loop.toml and the runner refuse the same patterns. A
/// grep that cannot be run here says nothing against it. Asked once per pattern and
/// process: reading 1,000 loops (`orbit status`, `orbit serve`) starts no 1,000 greps.
pub fn grep_takes(pattern: &str) -> bool {
    static JUDGED: OnceLock<std::sync::Mutex<std::collections::HashMap<String, bool>>> =
        OnceLock::new();
    let judged = JUDGED.get_or_init(Default::default);
    if let Some(seen) = judged
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(pattern)
    {
        return *seen;
    }
    let takes = grep_judges(pattern);
    judged
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pattern.to_string(), takes);
    takes
}

fn grep_judges(pattern: &str) -> bool {
    std::process::Command::new("grep")
        .args(["-qE", "--", pattern])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_or(true, |st| st.code() != Some(2))
}

/// A portable environment variable name.
pub fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl LoopConfig {
    /// The loop.toml of a loop that says nothing of itself: every setting at its default in
    /// the contract's table; a claude loop named `loop`, without checks or protect globs.
    pub fn defaults() -> &'static toml::Table {
        static DEFAULTS: OnceLock<toml::Table> = OnceLock::new();
        DEFAULTS.get_or_init(|| {
            let engine = Engine::Claude;
            let mut t = toml::Table::new();
            t.insert("contract-version".into(), CONTRACT_VERSION.into());
            t.insert("name".into(), "loop".into());
            t.insert("engine".into(), engine.as_str().into());
            t.insert(
                "argv".into(),
                engine.default_argv().unwrap_or_default().into(),
            );
            for key in [
                "verify",
                "reproduction",
                "regression",
                "holdout",
                "setup",
                "protect",
                "auto-protect",
            ] {
                t.insert(key.into(), toml::Value::Array(Vec::new()));
            }
            t.insert("check-name".into(), toml::Value::Table(toml::Table::new()));
            t.insert("branch-isolation".into(), true.into());
            for s in SETTINGS {
                if let Some(v) = toml_default(s) {
                    t.insert(s.key.into(), v);
                }
            }
            t
        })
    }

    /// Every setting of the contract's table with its value as the text bash reads ("" for
    /// none, "1"/"0" for booleans, a list's words separated by spaces), in the table's order.
    pub fn setting_texts(&self) -> Vec<(&'static Setting, String)> {
        let value = toml::Value::try_from(self).expect("LoopConfig always serializes");
        let table = value.as_table().expect("LoopConfig serializes to a table");
        SETTINGS
            .iter()
            .map(|s| {
                // A key left out of loop.toml (an amount of none, a value at its default
                // that is not written) is the table's default.
                let text = if s.key == "workspace" {
                    self.workspace_setting()
                } else {
                    table
                        .get(s.key)
                        .map_or_else(|| s.default.to_string(), bash_text)
                };
                (s, text)
            })
            .collect()
    }

    /// The `workspace` setting as it reads at this loop's contract version: loop.toml's,
    /// and for an empty one in a loop.toml older than 2.4.0 the default it had then,
    /// `.orbit/.workspaces/<name>` (empty from 2.4.0: the data directory's default, which
    /// the runner computes where it runs).
    pub fn workspace_setting(&self) -> String {
        if self.workspace.is_empty()
            && !crate::locate::workspace::empty_means_data_dir(&self.contract_version)
        {
            crate::locate::workspace::legacy_default(&self.name)
        } else {
            self.workspace.clone()
        }
    }

    /// The workspace this loop.toml names, as an absolute path from the repository root
    /// `repo` (the default computed on this machine when it names none).
    pub fn workspace_path(&self, repo: &Path) -> String {
        crate::locate::workspace::from_setting(
            repo,
            &self.workspace,
            &self.name,
            &self.contract_version,
        )
    }

    /// Checks every value, so a hand-edited loop.toml fails here with a clear message
    /// rather than in bash at 3 a.m.
    pub fn validate(&self) -> Result<()> {
        if !ValueType::Semver.accepts(&self.contract_version) {
            return Err(Error::Usage(format!(
                "contract-version = '{}': expected a version such as {CONTRACT_VERSION}",
                self.contract_version.escape_debug()
            )));
        }
        if self.name.is_empty()
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            || self.name.starts_with(['-', '.'])
        {
            return Err(Error::Usage(format!(
                "name = '{}': use letters, digits, '-', '_' and '.', not starting with '-' or '.'",
                self.name.escape_debug()
            )));
        }
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(Error::Usage(
                "argv is empty: give the agent command, e.g. argv = [\"claude\", \"-p\"]".into(),
            ));
        }
        if self.argv[0].contains('/') && !self.argv[0].starts_with('/') {
            // The runner finds a name on PATH and takes a path as it is: a relative one
            // would depend on the directory each run starts in (cron's is HOME).
            return Err(Error::Usage(format!(
                "argv[0] = '{}' is a relative path, which no run can rely on: give the agent's absolute path (orbit init --exec resolves a relative one)",
                self.argv[0].escape_debug()
            )));
        }
        let value = toml::Value::try_from(self).expect("LoopConfig always serializes");
        let table = value.as_table().expect("LoopConfig serializes to a table");
        for setting in SETTINGS {
            if let Some(value) = table.get(setting.key) {
                check_setting(setting, value)?;
            }
        }
        for g in self.protect.iter().chain(&self.auto_protect) {
            goal::validate_glob(g)?;
        }
        if !grep_takes(&self.placeholder_pattern) {
            return Err(Error::Usage(format!(
                "placeholder-pattern = '{}' is not an extended regular expression grep accepts (grep -E says so, as the runner's DONE gate would): fix the pattern",
                self.placeholder_pattern.escape_debug()
            )));
        }
        for host in &self.allow_hosts {
            check_allow_host(host)?;
        }
        for var in &self.offline_env {
            crate::deps::check_offline_var(var).map_err(|why| {
                Error::Usage(format!(
                    "offline-env: '{}' {why}: give NAME=VALUE, such as CARGO_NET_OFFLINE=true",
                    var.escape_debug()
                ))
            })?;
        }
        for p in &self.setup_inputs {
            check_setup_input(p)?;
        }
        if !self.setup_inputs.is_empty() && self.setup.is_empty() {
            return Err(Error::Usage(
                "setup-inputs without setup: they key the setup's cache; give the setup too (--setup CMD) or drop them".into(),
            ));
        }
        for url in &self.notify_webhook {
            if !is_http_url(url) {
                return Err(Error::Usage(format!(
                    "notify-webhook: '{}' is not an http:// or https:// URL",
                    url.escape_debug()
                )));
            }
        }
        for topic in &self.notify_ntfy {
            if !is_ntfy_target(topic) {
                return Err(Error::Usage(format!(
                    "notify-ntfy: '{}' is neither a topic (letters, digits, '-', '_') nor an http(s) URL",
                    topic.escape_debug()
                )));
            }
        }
        if !self.notify_webhook_env.is_empty() && !is_env_name(&self.notify_webhook_env) {
            return Err(Error::Usage(format!(
                "notify-webhook-env = '{}': give the name of an environment variable, such as SLACK_WEBHOOK_URL",
                self.notify_webhook_env.escape_debug()
            )));
        }
        if !self.branch_isolation {
            return Err(Error::Usage(
                "branch-isolation = false: a loop always works on its own branch orbit/<name>, in its own worktree (the workspace); remove branch-isolation from loop.toml".into(),
            ));
        }
        if !self.workspace.is_empty() && !is_plain_path(&self.workspace) {
            return Err(Error::Usage(format!(
                "workspace = '{}': give a plain path (no control character, no . or .. segment), relative to the repository root or absolute",
                self.workspace.escape_debug()
            )));
        }
        for price in &self.token_prices {
            if !crate::engine::is_token_price(price) {
                return Err(Error::Usage(format!(
                    "token-prices: '{}' is not model=input/cached/output (USD per million tokens, e.g. gpt-5=1.25/0.125/10, or *=... for any model)",
                    price.escape_debug()
                )));
            }
        }
        let env_file_ok = self.env_file.is_empty()
            || (self.env_file.starts_with('/') && is_plain_path(&self.env_file));
        if !env_file_ok {
            return Err(Error::Usage(format!(
                "env-file = '{}': give the absolute path of a file of KEY=VALUE lines (mode 0600)",
                self.env_file.escape_debug()
            )));
        }
        if self.fanout_early_stop && self.candidates < 2 {
            return Err(Error::Usage(
                "fanout-early-stop = true stops a fan-out, and this loop has none: give candidates = 2 or more (orbit init --candidates N), or leave fanout-early-stop out".into(),
            ));
        }
        let commands: Vec<&String> = self
            .verify
            .iter()
            .chain(&self.reproduction)
            .chain(&self.regression)
            .collect();
        let mut taken: Vec<&String> = Vec::new();
        for (cmd, name) in &self.check_name {
            if !commands.contains(&cmd) {
                return Err(Error::Usage(format!(
                    "check-name: '{}' is not a check of this loop (verify, reproduction or regression): name a check by its command as given",
                    cmd.escape_debug()
                )));
            }
            let reserved = name == "project-changed-by-checks"
                || name == "commit-hooks"
                || name
                    .strip_prefix("holdout-")
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
            if !goal::is_check_name(name) || reserved {
                return Err(Error::Usage(format!(
                    "check-name: '{}' cannot name a check: use letters, digits, '.', '_' and '-' (at most 40, not starting with '-' or '.'; holdout-N, project-changed-by-checks and commit-hooks are the runner's)",
                    name.escape_debug()
                )));
            }
            if taken.contains(&name) {
                return Err(Error::Usage(format!(
                    "check-name: two checks are named '{}': give each its own name",
                    name.escape_debug()
                )));
            }
            taken.push(name);
        }
        let names = self.check_names();
        for name in &self.allow_fewer_tests {
            if !names.contains(name) {
                return Err(Error::Usage(format!(
                    "allow-fewer-tests: '{}' is not a check of this loop; its checks are: {}",
                    name.escape_debug(),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
        }
        for (key, list) in [
            ("verify", &self.verify),
            ("reproduction", &self.reproduction),
            ("regression", &self.regression),
            ("holdout", &self.holdout),
        ] {
            for (i, check) in list.iter().enumerate() {
                if check.trim().is_empty() || check.contains('\0') {
                    return Err(Error::Usage(format!(
                        "{key}[{i}] is empty or holds a NUL byte: give a shell command that exits 0 when the check holds"
                    )));
                }
            }
        }
        for (i, cmd) in self.setup.iter().enumerate() {
            if cmd.trim().is_empty() || cmd.contains('\0') {
                return Err(Error::Usage(format!(
                    "setup[{i}] is empty or holds a NUL byte: give a shell command that prepares a fresh checkout, e.g. npm ci"
                )));
            }
        }
        Ok(())
    }

    /// Every protect glob of the loop, each once: the user's (`protect`), then those
    /// protected by default (`auto-protect`). The runner pins each as a set.
    pub fn protect_globs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for g in self.protect.iter().chain(&self.auto_protect) {
            if !out.contains(g) {
                out.push(g.clone());
            }
        }
        out
    }

    /// The names of verify.sh's checks (acceptance, then reproduction, then regression), as
    /// its `run_check` lines give them.
    pub fn check_names(&self) -> Vec<String> {
        let cmds: Vec<String> = self
            .verify
            .iter()
            .chain(&self.reproduction)
            .chain(&self.regression)
            .cloned()
            .collect();
        goal::check_names_with(&cmds, &self.check_name)
    }

    /// An optional amount in micro-dollars.
    pub fn usd_micro(v: Option<Usd>) -> Option<u64> {
        v.map(Usd::micro)
    }

    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).expect("LoopConfig always serializes");
        format!(
            "# orbit loop settings. Edit, then run `orbit init --force --dir <this directory>`\n\
             # to re-render the scripts. Each setting can be overridden at run time by an\n\
             # environment variable of the same name in SCREAMING_SNAKE_CASE, but not the\n\
             # loop's identity (name, engine, argv, checks, protect, workspace, sandbox, memory).\n\n{body}"
        )
    }

    pub fn load(path: &Path) -> Result<LoopConfig> {
        // loop.toml is a file of the loop directory: read only when it is a regular file.
        let text = String::from_utf8(crate::fsx::read_regular(path)?)
            .map_err(|_| Error::path(path, "not a valid loop.toml: it is not UTF-8 text"))?;
        LoopConfig::parse(&text, path)
    }

    /// Parses and checks the text of a loop.toml; `path` names it in errors (a file, or
    /// what it was read from, such as a commit).
    pub fn parse(text: &str, path: &Path) -> Result<LoopConfig> {
        let cfg: LoopConfig = toml::from_str(text).map_err(|e| {
            Error::path(
                path,
                format!("not a valid loop.toml: {}", e.message().trim()),
            )
        })?;
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_written_before_workspaces_reads_and_branch_isolation_off_is_refused() {
        let mut table = match toml::Value::try_from(LoopConfig::default()) {
            Ok(toml::Value::Table(t)) => t,
            other => panic!("{other:?}"),
        };
        assert!(!table.contains_key("branch-isolation"), "never written");
        table.insert("branch-isolation".into(), toml::Value::Boolean(true));
        let old: LoopConfig = toml::from_str(&toml::to_string(&table).unwrap()).unwrap();
        old.validate().unwrap();
        table.insert("branch-isolation".into(), toml::Value::Boolean(false));
        let off: LoopConfig = toml::from_str(&toml::to_string(&table).unwrap()).unwrap();
        let err = off.validate().unwrap_err().to_string();
        assert!(err.contains("orbit/<name>"), "{err}");
    }

    #[test]
    fn toml_round_trips() {
        let cfg = LoopConfig {
            verify: vec!["cargo test".into()],
            usd_cap: Some(Usd(12_500_000)),
            ..LoopConfig::default()
        };
        cfg.validate().unwrap();
        let back: LoopConfig = toml::from_str(&cfg.to_toml()).unwrap();
        assert_eq!(back, cfg);
    }

    /// The loop.toml keys that are not settings of the contract's table: what the loop is
    /// (its name, its agent, its checks and what they protect) rather than a value with bounds.
    const IDENTITY_KEYS: [&str; 12] = [
        "contract-version",
        "name",
        "engine",
        "argv",
        "verify",
        "reproduction",
        "regression",
        "holdout",
        "setup",
        "check-name",
        "protect",
        "auto-protect",
    ];

    #[test]
    fn every_setting_is_a_key_of_loop_toml_and_every_key_a_setting_or_identity() {
        let table = match toml::Value::try_from(LoopConfig {
            usd_cap: Some(Usd(1)),
            usd_per_run_cap: Some(Usd(1)),
            usd_per_iter_cap: Some(Usd(1)),
            cost_estimate_usd: Some(Usd(1)),
            candidates: 2,
            fanout_early_stop: true,
            holdout_unmasked: true,
            check_jobs: 2,
            allow_hosts: vec!["api.example.com".into()],
            offline_env: vec!["CARGO_NET_OFFLINE=true".into()],
            setup_inputs: vec!["package-lock.json".into()],
            auto_protect: vec!["**/conftest.py".into()],
            setup: vec!["npm ci".into()],
            check_name: [("cargo test".to_string(), "unit".to_string())].into(),
            verify: vec!["cargo test".into()],
            ..LoopConfig::default()
        }) {
            Ok(toml::Value::Table(t)) => t,
            other => panic!("{other:?}"),
        };
        for key in table.keys() {
            assert!(
                IDENTITY_KEYS.contains(&key.as_str()) || SETTINGS.iter().any(|s| s.key == key),
                "loop.toml key {key} is not in the contract's settings table"
            );
        }
        for s in SETTINGS {
            assert!(
                table.contains_key(s.key),
                "setting {} is not in loop.toml",
                s.key
            );
        }
    }

    #[test]
    fn allow_hosts_take_a_host_and_an_optional_port_and_refuse_the_rest() {
        for ok in [
            "api.example.com",
            "api.example.com:8443",
            "*.example.com",
            "127.0.0.1:8080",
            "localhost",
            "[::1]:8080",
            "[2001:db8::1]",
        ] {
            check_allow_host(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "",
            "https://api.example.com",
            "api.example.com/v1",
            "api.example.com:0",
            "api.example.com:65536",
            "api.example.com:08",
            "api.example.com:",
            "-bad.example.com",
            "bad_host.example.com",
            "a..b",
            "*.",
            "ex ample.com",
            "[::1",
            "[nothost]:80",
            "host;rm -rf /",
        ] {
            let err = check_allow_host(bad).unwrap_err().to_string();
            assert!(err.contains("HOST:PORT"), "{bad}: {err}");
        }
        let cfg = LoopConfig {
            allow_hosts: vec!["https://x.example.com".into()],
            ..LoopConfig::default()
        };
        assert!(cfg.validate().unwrap_err().to_string().contains("is a URL"));
        let text: LoopConfig =
            toml::from_str("sandbox-network = \"allowlist\"\nallow-hosts = \"a.example.com\"")
                .unwrap();
        assert_eq!(text.allow_hosts, vec!["a.example.com".to_string()]);
        assert!(toml::from_str::<LoopConfig>("sandbox-network = \"closed\"").is_err());
    }

    #[test]
    fn defaults_are_the_contract_tables_defaults() {
        for (s, text) in LoopConfig::default().setting_texts() {
            assert_eq!(text, s.default, "default of {}", s.key);
        }
        // A loop.toml that says nothing is the default loop, but for the sandbox and its
        // network: a loop.toml without those keys is older than them, and ran without a
        // sandbox, or with the network open.
        assert_eq!(
            toml::from_str::<LoopConfig>("").unwrap(),
            LoopConfig {
                sandbox: Sandbox::None,
                sandbox_network: SandboxNetwork::Open,
                ..LoopConfig::default()
            }
        );
        assert_eq!(LoopConfig::default().sandbox, Sandbox::Auto);
        assert_eq!(
            LoopConfig::default().sandbox_network,
            SandboxNetwork::Allowlist
        );
        LoopConfig::default().validate().unwrap();
    }

    #[test]
    fn bounds_come_from_the_table() {
        let ok = |f: &dyn Fn(&mut LoopConfig)| {
            let mut c = LoopConfig::default();
            f(&mut c);
            c.validate()
        };
        assert!(ok(&|c| c.max_iterations = 1_000_000).is_ok());
        assert!(ok(&|c| c.max_iterations = 1_000_001).is_err());
        assert!(ok(&|c| c.pass_k = 20).is_ok());
        assert!(ok(&|c| c.pass_k = 21).is_err());
        assert!(ok(&|c| c.confirm_runs = 5).is_ok());
        assert!(ok(&|c| c.confirm_runs = 6).is_err());
        assert!(ok(&|c| c.exec_timeout = "366d".into()).is_ok());
        assert!(ok(&|c| c.exec_timeout = "367d".into()).is_err());
        assert!(ok(&|c| c.exec_timeout = "0".into()).is_err());
        assert!(ok(&|c| c.convergence_window = 1).is_err());
        assert!(ok(&|c| c.agent_log_max = "12x".into()).is_err());
        let err = ok(&|c| c.pass_k = 0).unwrap_err().to_string();
        assert!(
            err.contains("pass-k = 0") && err.contains("from 1 to 20"),
            "{err}"
        );
    }

    #[test]
    fn amounts_are_read_from_strings_integers_and_floats_without_loss() {
        let cfg: LoopConfig = toml::from_str(
            "usd-cap = 12.5\nusd-per-run-cap = \"0.000001\"\nusd-per-iter-cap = 3\n",
        )
        .unwrap();
        assert_eq!(cfg.usd_cap, Some(Usd(12_500_000)));
        assert_eq!(cfg.usd_per_run_cap, Some(Usd(1)));
        assert_eq!(cfg.usd_per_iter_cap, Some(Usd(3_000_000)));
        assert!(cfg.to_toml().contains("usd-cap = \"12.5\""));
        assert!(toml::from_str::<LoopConfig>("usd-cap = 0.1234567").is_err());
        assert!(toml::from_str::<LoopConfig>("usd-cap = -1").is_err());
    }

    #[test]
    fn a_single_webhook_string_of_an_older_loop_toml_reads_as_a_list() {
        let old: LoopConfig =
            toml::from_str("notify-webhook = \"https://h.example/a\"\nnotify-ntfy = \"\"\n")
                .unwrap();
        assert_eq!(old.notify_webhook, vec!["https://h.example/a".to_string()]);
        assert!(old.notify_ntfy.is_empty());
        old.validate().unwrap();
        let new: LoopConfig = toml::from_str(
            "notify-webhook = [\"https://h.example/a\", \"http://h.example/b\"]\nnotify-ntfy = [\"topic_1\"]\n",
        )
        .unwrap();
        assert_eq!(new.notify_webhook.len(), 2);
        new.validate().unwrap();
        let back: LoopConfig = toml::from_str(&new.to_toml()).unwrap();
        assert_eq!(back, new);
        for bad in [
            "notify-webhook = [\"ftp://x\"]",
            "notify-webhook = [\"https://a b\"]",
            "notify-ntfy = [\"a/b\"]",
            "notify-webhook-env = \"1X\"",
            "notify-webhook-env = \"A-B\"",
        ] {
            let cfg: LoopConfig = toml::from_str(bad).unwrap();
            assert!(cfg.validate().is_err(), "{bad}");
        }
        let env: LoopConfig = toml::from_str("notify-webhook-env = \"SLACK_WEBHOOK_URL\"").unwrap();
        env.validate().unwrap();
    }

    #[test]
    fn the_sandbox_reads_from_loop_toml_defaults_to_none_and_refuses_other_names() {
        let old: LoopConfig = toml::from_str("max-iterations = 3").unwrap();
        assert_eq!(old.sandbox, Sandbox::None, "a loop.toml without the key");
        let on = LoopConfig {
            sandbox: Sandbox::Bwrap,
            ..LoopConfig::default()
        };
        let text = on.to_toml();
        assert!(text.contains("sandbox = \"bwrap\""), "{text}");
        assert_eq!(toml::from_str::<LoopConfig>(&text).unwrap(), on);
        let err = toml::from_str::<LoopConfig>("sandbox = \"firejail\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("none") && err.contains("bwrap") && err.contains("auto"),
            "{err}"
        );
        let auto: LoopConfig = toml::from_str("sandbox = \"auto\"").unwrap();
        assert_eq!(auto.sandbox, Sandbox::Auto);
    }

    #[test]
    fn check_roles_and_memory_read_from_loop_toml_and_an_older_one_without_them_still_reads() {
        let old: LoopConfig = toml::from_str("verify = [\"make test\"]").unwrap();
        assert!(old.reproduction.is_empty() && old.regression.is_empty() && old.holdout.is_empty());
        assert_eq!(old.memory, Memory::Notes, "a loop.toml without the key");
        old.validate().unwrap();
        let new = LoopConfig {
            reproduction: vec!["./repro.sh".into()],
            regression: vec!["make smoke".into()],
            holdout: vec!["./hidden.sh".into()],
            memory: Memory::Feedback,
            ..LoopConfig::default()
        };
        let text = new.to_toml();
        assert!(text.contains("memory = \"feedback\""), "{text}");
        assert_eq!(toml::from_str::<LoopConfig>(&text).unwrap(), new);
        let err = toml::from_str::<LoopConfig>("memory = \"diary\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("notes") && err.contains("feedback"), "{err}");
        let blank = LoopConfig {
            holdout: vec!["  ".into()],
            ..LoopConfig::default()
        };
        let err = blank.validate().unwrap_err().to_string();
        assert!(err.contains("holdout[0]"), "{err}");
    }

    #[test]
    fn candidates_are_bounded_and_left_out_of_loop_toml_when_one() {
        let old: LoopConfig = toml::from_str("verify = [\"make test\"]").unwrap();
        assert_eq!(old.candidates, 1);
        assert!(!old.to_toml().contains("candidates"), "{}", old.to_toml());
        let three = LoopConfig {
            candidates: 3,
            ..LoopConfig::default()
        };
        let text = three.to_toml();
        assert!(text.contains("candidates = 3"), "{text}");
        assert_eq!(toml::from_str::<LoopConfig>(&text).unwrap(), three);
        for bad in [0, 9] {
            let cfg = LoopConfig {
                candidates: bad,
                ..LoopConfig::default()
            };
            let err = cfg.validate().unwrap_err().to_string();
            assert!(
                err.contains(&format!("candidates = {bad}")) && err.contains("from 1 to 8"),
                "{err}"
            );
        }
        let alone: LoopConfig = toml::from_str("fanout-early-stop = true").unwrap();
        let err = alone.validate().unwrap_err().to_string();
        assert!(err.contains("candidates = 2 or more"), "{err}");
        let early: LoopConfig = toml::from_str("candidates = 3\nfanout-early-stop = true").unwrap();
        early.validate().unwrap();
        assert!(early.to_toml().contains("fanout-early-stop = true"));
        assert!(
            !LoopConfig::default()
                .to_toml()
                .contains("fanout-early-stop")
        );
    }

    #[test]
    fn memory_and_sandbox_are_named_by_the_words_of_the_contracts_table() {
        use clap::ValueEnum;
        fn words<E: ValueEnum + Serialize>(name: fn(&E) -> &'static str) -> Vec<&'static str> {
            E::value_variants()
                .iter()
                .map(|v| {
                    let word = name(v);
                    // loop.toml (serde) and `orbit init --memory` (clap) spell it so too.
                    assert_eq!(toml::Value::try_from(v).unwrap().as_str(), Some(word));
                    assert_eq!(v.to_possible_value().unwrap().get_name(), word);
                    word
                })
                .collect()
        }
        assert_eq!(words::<Memory>(|m| m.name()), MEMORY_POLICIES);
        assert_eq!(words::<Sandbox>(|s| s.name()), SANDBOXES);
        assert_eq!(words::<Adequacy>(|a| a.name()), ADEQUACY_MODES);
        assert_eq!(
            Adequacy::default().name(),
            crate::contract::setting("adequacy").default
        );
        assert_eq!(words::<SandboxNetwork>(|s| s.name()), SANDBOX_NETWORKS);
        assert_eq!(
            SandboxNetwork::default().name(),
            crate::contract::setting("sandbox-network").default
        );
        assert_eq!(
            Memory::default().name(),
            crate::contract::setting("memory").default
        );
        assert_eq!(
            Sandbox::default().name(),
            crate::contract::setting("sandbox").default
        );
    }

    #[test]
    fn auto_protect_is_left_out_when_empty_and_read_back_when_given() {
        let old: LoopConfig = toml::from_str("protect = [\"tests/**\"]").unwrap();
        assert!(old.auto_protect.is_empty(), "a loop.toml without the key");
        assert!(!old.to_toml().contains("auto-protect"), "{}", old.to_toml());
        let new = LoopConfig {
            protect: vec!["tests/**".into(), "pytest.ini".into()],
            auto_protect: vec!["**/conftest.py".into(), "pytest.ini".into()],
            ..LoopConfig::default()
        };
        assert_eq!(toml::from_str::<LoopConfig>(&new.to_toml()).unwrap(), new);
        assert_eq!(
            new.protect_globs(),
            vec!["tests/**", "pytest.ini", "**/conftest.py"],
            "each glob once, the user's first"
        );
        let bad: LoopConfig = toml::from_str("auto-protect = [\"../x\"]").unwrap();
        assert!(bad.validate().is_err());
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<LoopConfig>("max-iteration = 3").is_err());
    }
}
