//! The agent engines and the non-interactive invocation each one needs. The prompt always
//! arrives on standard input (and in `$ORBIT_PROMPT_FILE`); the command is an argv, never a
//! string that bash splits.

use crate::error::{Error, Result};

/// The engines are a word of the contract's vocabulary; what each one's CLI needs is here.
pub use crate::contract::Engine;

impl Engine {
    /// The engine named `name` (orbit.toml's `engine`), or a usage error that lists them.
    pub fn named(name: &str) -> Result<Engine> {
        Engine::parse(name).ok_or_else(|| {
            let names: Vec<&str> = Engine::ALL.iter().map(|e| e.as_str()).collect();
            Error::Usage(format!(
                "--engine '{}': unknown engine; choose one of {} (custom takes --exec 'CMD ARGS')",
                name.escape_debug(),
                names.join(", ")
            ))
        })
    }

    /// The headless invocation of a built-in engine, reading the prompt from stdin. Each
    /// choice was checked against the installed CLIs (claude-code 2.1.197, codex 0.171.0,
    /// gemini-cli 0.61.0):
    ///
    /// - Claude Code: `-p` (print mode) reads the prompt from stdin. `--output-format
    ///   stream-json --verbose` prints one JSON event per line as the run goes: the live view
    ///   shows progress, a retry of the API is visible as `{"subtype":"api_retry",
    ///   "error_status":429}` even when the timeout kills the run, and the last line is the
    ///   result object (`is_error`, `api_error_status`, `result`, `total_cost_usd`).
    ///   `acceptEdits` alone denies Bash in print mode, so the checks could not run:
    ///   `--allowedTools` names the file tools and `Bash(bash .orbit-agent/verify.sh*)`, the
    ///   loop's own checks, and nothing else runs unasked.
    /// - Codex CLI: `codex exec -` reads the prompt from stdin; the workspace-write sandbox
    ///   lets it edit the workspace and nothing outside it; `--json` prints its events as
    ///   JSON lines (`{"type":"error","message":...}`, `turn.failed`), so failures are
    ///   read from a structure rather than from prose.
    /// - Gemini CLI: runs headless when stdin is not a terminal; it refuses a folder it does
    ///   not trust (and drops `auto_edit` to `default`), so `--skip-trust` trusts the
    ///   workspace for this run only (nothing is written to the user's trusted folders);
    ///   `auto_edit` approves edits but leaves the shell tool out of a headless run, so
    ///   `--allowed-tools run_shell_command(bash .orbit-agent/verify.sh)` adds the loop's
    ///   checks and nothing else (another command, or one chained after it, is denied by
    ///   gemini's policy); `--output-format json` puts errors as `{"error":{"code","message"}}`.
    /// - Qwen Code (qwen-code 0.24.4, a fork of gemini-cli): runs headless when stdin is not
    ///   a terminal and reads the prompt from it. It trusts every folder unless the user
    ///   turned `security.folderTrust` on (then the fix is theirs: trust the workspace).
    ///   `--approval-mode auto-edit` (qwen spells it with a hyphen) approves edits;
    ///   `--allowed-tools run_shell_command(bash .orbit-agent/verify.sh)` adds the loop's
    ///   checks, and any other command (or one chained after it) is declined, as headless
    ///   qwen cannot ask. `--output-format stream-json` prints one JSON event per line, as
    ///   claude does: the live view shows progress, and the last line is the result object
    ///   (`is_error`, `result`, `error.message`, `usage`).
    /// - Aider (aider-chat 0.86.2): `--message-file /dev/stdin` takes the prompt from stdin
    ///   and exits after it. `--yes-always` answers its questions (create a file, add a file
    ///   to the chat, fix the failing checks), so everything that would run or fetch
    ///   something unasked is turned off: `--no-suggest-shell-commands` (else a shell command
    ///   the model suggests would run), `--no-detect-urls` and `--disable-playwright` (no
    ///   scraping, no browser install), `--no-check-update`, `--no-show-release-notes`,
    ///   `--no-analytics`, and `--no-show-model-warnings` (a model it does not know would
    ///   offer to open its documentation). Its browser login (OpenRouter) is only offered
    ///   without any key, which the preflight refuses first. `--no-auto-commits` and
    ///   `--no-dirty-commits`: the runner commits. `--no-gitignore`: aider would add
    ///   `.aider*` to .gitignore; its chat and input histories go under `.orbit-agent/`
    ///   (kept out of every commit) and its repository-map cache is excluded by the runner.
    ///   aider edits no file git ignores unless it is in its chat, and the agent's folder
    ///   is ignored: `--add-gitignore-files --file .orbit-agent/done.md` puts the claim's
    ///   file in the chat (aider creates it empty; the runner drops an empty done.md after
    ///   an aider run: a claim carries its evidence).
    ///   aider has no shell tool: `--test-cmd 'bash .orbit-agent/verify.sh' --auto-test`
    ///   runs the loop's checks after each edit and hands their failure back to the model.
    ///   `--no-pretty --no-fancy-input`: plain text, as it has no structured output.
    /// - opencode (opencode-ai 1.18.33): `opencode run` reads the prompt from stdin;
    ///   `--format json` prints its events as JSON lines (`tool_use`, `text`, `step_finish`
    ///   with tokens and cost, `error` with the provider's status and message). opencode
    ///   allows every tool by default, and `run` has no flag that narrows them: the runner
    ///   sets `OPENCODE_PERMISSION` (merged over every opencode.json), which denies every
    ///   shell command but the loop's checks and web fetches, `OPENCODE_DISABLE_AUTOUPDATE`
    ///   (it would update itself mid-loop), and `OPENCODE_DISABLE_PROJECT_CONFIG`: the
    ///   workspace is the agent's, and an opencode.json, plugin or agent it wrote there
    ///   would steer its next run (another provider, commands allowed, code loaded).
    /// - GitHub Copilot CLI (@github/copilot 1.0.102): reads the prompt from stdin when it is
    ///   not a terminal and runs it non-interactively; `--output-format json` prints its
    ///   events as JSON lines (`session.error` with `errorType` and `statusCode`,
    ///   `assistant.turn_retry` while it retries, `result` with its exit code).
    ///   `--no-auto-update`: it would download a newer CLI by itself. What no one approves
    ///   is denied in a non-interactive run: `--allow-tool write` lets it edit (in the
    ///   working directory: copilot checks paths), and `--allow-tool shell(bash)` lets it run
    ///   the checks. copilot matches a shell command by its name only, so that rule admits
    ///   any `bash SCRIPT`, a script the agent wrote too: the narrowest copilot has, not an
    ///   exact fence (`--deny-tool shell(bash -c:*)` refuses inline code; orbit's OS
    ///   sandbox bounds the rest). Any other command is denied.
    pub fn default_argv(self) -> Option<Vec<String>> {
        let words: &[&str] = match self {
            Engine::Claude => &[
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Read,Edit,Write,MultiEdit,Glob,Grep,Bash(bash .orbit-agent/verify.sh*)",
            ],
            Engine::Codex => &[
                "codex",
                "exec",
                "--sandbox",
                "workspace-write",
                "--json",
                "-",
            ],
            Engine::Gemini => &[
                "gemini",
                "--skip-trust",
                "--approval-mode",
                "auto_edit",
                "--allowed-tools",
                "run_shell_command(bash .orbit-agent/verify.sh)",
                "--output-format",
                "json",
            ],
            Engine::Qwen => &[
                "qwen",
                "--approval-mode",
                "auto-edit",
                "--allowed-tools",
                "run_shell_command(bash .orbit-agent/verify.sh)",
                "--output-format",
                "stream-json",
            ],
            Engine::Aider => &[
                "aider",
                "--message-file",
                "/dev/stdin",
                "--yes-always",
                "--no-suggest-shell-commands",
                "--no-detect-urls",
                "--disable-playwright",
                "--no-check-update",
                "--no-show-release-notes",
                "--no-analytics",
                "--no-show-model-warnings",
                "--no-auto-commits",
                "--no-dirty-commits",
                "--no-gitignore",
                "--chat-history-file",
                ".orbit-agent/aider.chat.history.md",
                "--input-history-file",
                ".orbit-agent/aider.input.history",
                "--add-gitignore-files",
                "--file",
                ".orbit-agent/done.md",
                "--test-cmd",
                "bash .orbit-agent/verify.sh",
                "--auto-test",
                "--no-pretty",
                "--no-fancy-input",
            ],
            Engine::Opencode => &["opencode", "run", "--format", "json"],
            Engine::Copilot => &[
                "copilot",
                "--output-format",
                "json",
                "--no-auto-update",
                "--allow-tool",
                "write",
                "--allow-tool",
                "shell(bash)",
                "--deny-tool",
                "shell(bash -c:*)",
            ],
            Engine::Custom => return None,
        };
        Some(words.iter().map(|w| w.to_string()).collect())
    }

    /// The npm package that installs a built-in engine's CLI (on a CI runner, in an image);
    /// None for aider, a Python package (`pypi_package`).
    pub fn npm_package(self) -> Option<&'static str> {
        match self {
            Engine::Aider => None,
            Engine::Claude => Some("@anthropic-ai/claude-code"),
            Engine::Codex => Some("@openai/codex"),
            Engine::Gemini => Some("@google/gemini-cli"),
            Engine::Qwen => Some("@qwen-code/qwen-code"),
            Engine::Opencode => Some("opencode-ai"),
            Engine::Copilot => Some("@github/copilot"),
            Engine::Custom => None,
        }
    }

    /// The PyPI package that installs a built-in engine's CLI written in Python (aider).
    pub fn pypi_package(self) -> Option<&'static str> {
        match self {
            Engine::Aider => Some("aider-chat"),
            _ => None,
        }
    }

    /// How a built-in engine's CLI installs: its package and the registry, for the
    /// messages that name it.
    pub fn package_hint(self) -> Option<String> {
        if let Some(p) = self.npm_package() {
            Some(format!("{p} (npm)"))
        } else {
            self.pypi_package().map(|p| format!("{p} (PyPI)"))
        }
    }

    /// The environment variable a built-in engine's CLI reads its API key from (qwen: its
    /// OpenAI-compatible provider's key; it also wants OPENAI_BASE_URL and OPENAI_MODEL, or
    /// a provider in its settings).
    pub fn api_key_env(self) -> Option<&'static str> {
        match self {
            Engine::Claude => Some("ANTHROPIC_API_KEY"),
            Engine::Codex => Some("OPENAI_API_KEY"),
            Engine::Gemini => Some("GEMINI_API_KEY"),
            Engine::Qwen => Some("OPENAI_API_KEY"),
            // aider picks its model by the key it finds (ANTHROPIC_API_KEY: sonnet, ...);
            // OPENAI_API_KEY is the one orbit names where it must name one.
            Engine::Aider => Some("OPENAI_API_KEY"),
            // opencode reads each provider's own key (or `opencode auth login`).
            Engine::Opencode => Some("ANTHROPIC_API_KEY"),
            // A fine-grained token with the Copilot Requests permission.
            Engine::Copilot => Some("COPILOT_GITHUB_TOKEN"),
            Engine::Custom => None,
        }
    }

    /// The variables besides its key a built-in engine's CLI needs to reach its provider
    /// (qwen selects an OpenAI-compatible provider only with all three), which the
    /// schedules pass on like the key (a repository secret, a key of the Secret).
    pub fn provider_env(self) -> &'static [&'static str] {
        match self {
            Engine::Qwen => &["OPENAI_BASE_URL", "OPENAI_MODEL"],
            _ => &[],
        }
    }

    /// The token prices `orbit init` writes into loop.toml for an engine that reports
    /// tokens, not dollars: `model=input/cached/output`, USD per million tokens, as the
    /// providers list them (OpenAI and Google price pages, 2025-08; qwen: Alibaba Cloud
    /// Model Studio's international prices of the smallest context tier, 2025-09; check and
    /// override in loop.toml `token-prices`). `*` prices any other model (the CLI's current default
    /// model is often newer than this table).
    pub fn default_token_prices(self) -> Vec<String> {
        let prices: &[&str] = match self {
            Engine::Codex => &[
                "gpt-5=1.25/0.125/10",
                "gpt-5-codex=1.25/0.125/10",
                "gpt-5-mini=0.25/0.025/2",
                "*=1.25/0.125/10",
            ],
            Engine::Gemini => &[
                "gemini-2.5-pro=1.25/0.31/10",
                "gemini-2.5-flash=0.30/0.075/2.50",
                "gemini-2.5-flash-lite=0.10/0.025/0.40",
                "*=1.25/0.31/10",
            ],
            Engine::Qwen => &[
                "qwen3-coder-plus=1/0.2/5",
                "qwen3-coder-flash=0.30/0.06/1.50",
                "*=1/0.2/5",
            ],
            Engine::Claude
            | Engine::Aider
            | Engine::Opencode
            | Engine::Copilot
            | Engine::Custom => &[],
        };
        prices.iter().map(|p| p.to_string()).collect()
    }

    /// Whether the engine's output says what a run cost (claude, aider and opencode in
    /// dollars, aider and opencode for the models their price tables know (opencode prices
    /// other models' tokens by `token-prices` when there are some); codex, gemini and qwen
    /// in tokens, priced by `token-prices`). copilot counts premium requests of a
    /// subscription, neither dollars nor tokens: no cost. A custom agent reports a cost only
    /// if it writes `$ORBIT_COST_FILE`.
    pub fn reports_cost(self) -> bool {
        !matches!(self, Engine::Custom | Engine::Copilot)
    }

    /// Resolves the argv for this engine from an optional `--exec` command line.
    pub fn argv(self, exec: Option<&str>) -> Result<Vec<String>> {
        match (self, exec) {
            (Engine::Custom, None) => Err(Error::Usage(
                "--engine custom needs the agent command: add --exec 'CMD ARGS' (the prompt arrives on stdin)".into(),
            )),
            (_, Some(cmd)) => split_command(cmd),
            (engine, None) => Ok(engine.default_argv().unwrap_or_default()),
        }
    }
}

/// Whether `word` is a token price: `model=input/cached/output`, each a decimal number of
/// USD per million tokens (at most 6 digits each side of the point), the model of
/// `[A-Za-z0-9._*:-]` (`*` alone: any model). The runner checks the same form.
pub fn is_token_price(word: &str) -> bool {
    let Some((model, nums)) = word.split_once('=') else {
        return false;
    };
    let num = |n: &str| {
        let (a, b) = n.split_once('.').unwrap_or((n, "0"));
        (1..=6).contains(&a.len())
            && (1..=6).contains(&b.len())
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_digit())
    };
    let parts: Vec<&str> = nums.split('/').collect();
    (1..=64).contains(&model.len())
        && model
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'*' | b':' | b'-'))
        && parts.len() == 3
        && parts.iter().all(|p| num(p))
}

/// Splits a command line like a POSIX shell would (quotes, backslashes), without running
/// anything. Refuses an empty command, unbalanced quotes and NUL.
pub fn split_command(cmd: &str) -> Result<Vec<String>> {
    if cmd.contains('\0') {
        return Err(Error::Usage(
            "--exec: the command contains a NUL byte".into(),
        ));
    }
    let words = shlex::split(cmd).ok_or_else(|| {
        Error::Usage(format!(
            "--exec '{}': unbalanced quotes; quote the command as a shell would",
            cmd.escape_debug()
        ))
    })?;
    if words.is_empty() || words[0].is_empty() {
        return Err(Error::Usage(
            "--exec: the command is empty; give the agent program and its arguments".into(),
        ));
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_resolve() {
        assert_eq!(Engine::named("codex").unwrap(), Engine::Codex);
        assert!(Engine::named("gpt").is_err());
        for e in Engine::ALL {
            assert_eq!(Engine::named(e.as_str()).unwrap(), *e);
        }
        assert!(Engine::Custom.argv(None).is_err());
        assert_eq!(
            Engine::Custom.argv(Some("my-agent --flag 'a b'")).unwrap(),
            ["my-agent", "--flag", "a b"]
        );
        assert_eq!(Engine::Claude.argv(None).unwrap()[0], "claude");
        assert!(split_command("a 'b").is_err());
        assert!(split_command("   ").is_err());
    }

    #[test]
    fn default_argvs_run_headless_and_keep_the_fence() {
        let claude = Engine::Claude.default_argv().unwrap();
        let tools = claude
            .iter()
            .position(|w| w == "--allowedTools")
            .map(|i| &claude[i + 1])
            .expect("claude names its allowed tools");
        assert!(
            tools.contains("Bash(bash .orbit-agent/verify.sh*)"),
            "{tools}"
        );
        assert!(
            !tools.split(',').any(|t| t == "Bash"),
            "no unbounded Bash: {tools}"
        );
        assert!(
            claude
                .windows(2)
                .any(|w| w == ["--output-format", "stream-json"])
        );
        assert!(claude.contains(&"--verbose".to_string()));
        assert!(!claude.iter().any(|w| w.contains("dangerously")));
        let codex = Engine::Codex.default_argv().unwrap();
        assert!(
            codex
                .windows(2)
                .any(|w| w == ["--sandbox", "workspace-write"])
        );
        assert_eq!(codex.last().map(String::as_str), Some("-"));
        let gemini = Engine::Gemini.default_argv().unwrap();
        assert!(gemini.contains(&"--skip-trust".to_string()));
        assert!(gemini.windows(2).any(|w| w
            == [
                "--allowed-tools",
                "run_shell_command(bash .orbit-agent/verify.sh)"
            ]));
        assert!(!gemini.iter().any(|w| w == "--yolo" || w == "yolo"));
        let qwen = Engine::Qwen.default_argv().unwrap();
        assert!(
            qwen.windows(2)
                .any(|w| w == ["--approval-mode", "auto-edit"])
        );
        assert!(qwen.windows(2).any(|w| w
            == [
                "--allowed-tools",
                "run_shell_command(bash .orbit-agent/verify.sh)"
            ]));
        assert!(
            qwen.windows(2)
                .any(|w| w == ["--output-format", "stream-json"])
        );
        assert!(
            !qwen
                .iter()
                .any(|w| w == "--yolo" || w == "yolo" || w == "-y")
        );
        let aider = Engine::Aider.default_argv().unwrap();
        assert!(
            aider
                .windows(2)
                .any(|w| w == ["--message-file", "/dev/stdin"])
        );
        for off in [
            "--no-suggest-shell-commands",
            "--no-auto-commits",
            "--no-gitignore",
            "--no-check-update",
            "--no-analytics",
            "--no-detect-urls",
        ] {
            assert!(aider.iter().any(|w| w == off), "{off}");
        }
        assert!(
            aider
                .windows(2)
                .any(|w| w == ["--test-cmd", "bash .orbit-agent/verify.sh"])
        );
        assert_eq!(Engine::Aider.npm_package(), None);
        assert_eq!(Engine::Aider.pypi_package(), Some("aider-chat"));
        assert_eq!(
            Engine::Opencode.default_argv().unwrap(),
            ["opencode", "run", "--format", "json"]
        );
        let copilot = Engine::Copilot.default_argv().unwrap();
        assert!(
            copilot
                .windows(2)
                .any(|w| w == ["--allow-tool", "shell(bash)"])
        );
        assert!(
            copilot
                .windows(2)
                .any(|w| w == ["--deny-tool", "shell(bash -c:*)"])
        );
        assert!(copilot.iter().any(|w| w == "--no-auto-update"));
        assert!(
            !copilot
                .iter()
                .any(|w| w.starts_with("--allow-all") || w == "--yolo")
        );
        assert!(!Engine::Copilot.reports_cost());
    }
}
