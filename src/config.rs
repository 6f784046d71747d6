//! `loop.toml`: every setting a loop was rendered with. Keys carry the names of the
//! `orbit init` flags; the runner's environment overrides use the same names in
//! SCREAMING_SNAKE_CASE (`max-iterations` → `MAX_ITERATIONS`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::goal::{self, parse_duration};

pub use crate::contract::CONTRACT_VERSION;
pub use crate::contract::settings::DEFAULT_PLACEHOLDER_PATTERN;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct LoopConfig {
    /// Version of the loop contract the loop was written under.
    pub contract_version: String,
    /// The loop's name (its directory name by default).
    pub name: String,
    /// claude | codex | gemini | custom.
    pub engine: Engine,
    /// The agent command as an argv; the prompt arrives on stdin.
    pub argv: Vec<String>,
    /// Acceptance checks, one shell command each; each is one `run_check` line in verify.sh.
    pub verify: Vec<String>,
    /// Repository path globs the agent must not change.
    pub protect: Vec<String>,
    pub max_iterations: u64,
    pub exec_timeout: String,
    pub loop_timeout: String,
    /// Hard cap on total spend in USD (none when absent).
    pub usd_cap: Option<f64>,
    pub usd_per_run_cap: Option<f64>,
    pub usd_per_iter_cap: Option<f64>,
    /// What one agent run is assumed to cost when the engine reports nothing.
    pub cost_estimate_usd: Option<f64>,
    pub pass_k: u32,
    /// Timeout of each verify check.
    pub check_timeout: String,
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
    pub branch_isolation: bool,
    pub squash_on_done: bool,
    pub allow_green_start: bool,
    pub wrapup_on_limit: bool,
    pub adaptive_timeout: bool,
    /// Fresh-context confirmation runs before DONE (0 = off).
    pub confirm_runs: u32,
    /// A command that approves DONE by exiting 0 (empty = no judge).
    pub judge_cmd: String,
    pub placeholder_pattern: String,
    pub agent_log_max: String,
    pub notify_every_iteration: bool,
    pub notify_desktop: bool,
    pub notify_cmd: String,
    pub notify_webhook: String,
    pub notify_ntfy: String,
    pub notify_timeout: String,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            contract_version: CONTRACT_VERSION.into(),
            name: "loop".into(),
            engine: Engine::Claude,
            argv: Engine::Claude.default_argv().unwrap_or_default(),
            verify: Vec::new(),
            protect: Vec::new(),
            max_iterations: 20,
            exec_timeout: "10m".into(),
            loop_timeout: "0".into(),
            usd_cap: None,
            usd_per_run_cap: None,
            usd_per_iter_cap: None,
            cost_estimate_usd: None,
            pass_k: 2,
            check_timeout: "10m".into(),
            retry_limit: 3,
            retry_base_delay: "5s".into(),
            cb_threshold: 3,
            cb_cooldown: "10m".into(),
            convergence_window: 3,
            kill_grace: "10s".into(),
            commit_timeout: "2m".into(),
            autocommit: true,
            branch_isolation: true,
            squash_on_done: false,
            allow_green_start: false,
            wrapup_on_limit: true,
            adaptive_timeout: false,
            confirm_runs: 1,
            judge_cmd: String::new(),
            placeholder_pattern: DEFAULT_PLACEHOLDER_PATTERN.into(),
            agent_log_max: "4194304".into(),
            notify_every_iteration: false,
            notify_desktop: false,
            notify_cmd: String::new(),
            notify_webhook: String::new(),
            notify_ntfy: String::new(),
            notify_timeout: "10s".into(),
        }
    }
}

fn usd_to_micro(key: &str, v: Option<f64>) -> Result<Option<u64>> {
    match v {
        None => Ok(None),
        Some(x) if x.is_finite() && (0.0..1e9).contains(&x) => Ok(Some((x * 1e6).round() as u64)),
        Some(x) => Err(Error::Usage(format!(
            "{key} = {x}: give an amount in USD between 0 and 999999999"
        ))),
    }
}

impl LoopConfig {
    /// Checks every value, so a hand-edited loop.toml fails here with a clear message
    /// rather than in bash at 3 a.m.
    pub fn validate(&self) -> Result<()> {
        if self.contract_version.split('.').count() != 3
            || !self
                .contract_version
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
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
        if self.max_iterations == 0 || self.max_iterations > 1_000_000 {
            return Err(Error::Usage(format!(
                "max-iterations = {}: give a number from 1 to 1000000",
                self.max_iterations
            )));
        }
        if self.pass_k == 0 || self.pass_k > 20 {
            return Err(Error::Usage(format!(
                "pass-k = {}: give a number from 1 to 20",
                self.pass_k
            )));
        }
        if self.retry_limit == 0 || self.retry_limit > 5 {
            return Err(Error::Usage(format!(
                "retry-limit = {}: give a number from 1 to 5 (total attempts per iteration)",
                self.retry_limit
            )));
        }
        if self.cb_threshold == 0 || self.convergence_window < 2 || self.confirm_runs > 5 {
            return Err(Error::Usage(
                "cb-threshold must be >= 1, convergence-window >= 2 and confirm-runs <= 5".into(),
            ));
        }
        for (key, value) in [
            ("exec-timeout", &self.exec_timeout),
            ("loop-timeout", &self.loop_timeout),
            ("check-timeout", &self.check_timeout),
            ("retry-base-delay", &self.retry_base_delay),
            ("cb-cooldown", &self.cb_cooldown),
            ("kill-grace", &self.kill_grace),
            ("commit-timeout", &self.commit_timeout),
            ("notify-timeout", &self.notify_timeout),
        ] {
            parse_duration(key, value)?;
        }
        if parse_duration("exec-timeout", &self.exec_timeout)? == 0 {
            return Err(Error::Usage(
                "exec-timeout = 0: every agent run needs a timeout, e.g. 10m".into(),
            ));
        }
        if parse_duration("check-timeout", &self.check_timeout)? == 0 {
            return Err(Error::Usage(
                "check-timeout = 0: every check needs a timeout, e.g. 10m".into(),
            ));
        }
        if !self.agent_log_max.bytes().all(|b| b.is_ascii_digit()) || self.agent_log_max.is_empty()
        {
            return Err(Error::Usage(
                "agent-log-max: give a size in bytes, e.g. \"4194304\"".into(),
            ));
        }
        for (key, v) in [
            ("usd-cap", self.usd_cap),
            ("usd-per-run-cap", self.usd_per_run_cap),
            ("usd-per-iter-cap", self.usd_per_iter_cap),
            ("cost-estimate-usd", self.cost_estimate_usd),
        ] {
            usd_to_micro(key, v)?;
        }
        for g in &self.protect {
            goal::validate_glob(g)?;
        }
        for (i, check) in self.verify.iter().enumerate() {
            if check.trim().is_empty() || check.contains('\0') {
                return Err(Error::Usage(format!(
                    "verify[{i}] is empty or holds a NUL byte: give a shell command that exits 0 when the check holds"
                )));
            }
        }
        if self.placeholder_pattern.contains('\0') || self.judge_cmd.contains('\0') {
            return Err(Error::Usage("a setting contains a NUL byte".into()));
        }
        Ok(())
    }

    pub fn usd_micro(v: Option<f64>) -> Option<u64> {
        usd_to_micro("", v).ok().flatten()
    }

    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).expect("LoopConfig always serializes");
        format!(
            "# orbit loop settings. Edit, then run `orbit init --force --dir <this directory>`\n\
             # to re-render the scripts. Each key can be overridden at run time by an\n\
             # environment variable of the same name in SCREAMING_SNAKE_CASE.\n\n{body}"
        )
    }

    pub fn load(path: &Path) -> Result<LoopConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        let cfg: LoopConfig = toml::from_str(&text).map_err(|e| {
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
    fn toml_round_trips() {
        let cfg = LoopConfig {
            verify: vec!["cargo test".into()],
            usd_cap: Some(12.5),
            ..LoopConfig::default()
        };
        cfg.validate().unwrap();
        let back: LoopConfig = toml::from_str(&cfg.to_toml()).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<LoopConfig>("max-iteration = 3").is_err());
    }
}
