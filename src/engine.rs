//! The agent engines and the non-interactive invocation each one needs. The prompt always
//! arrives on standard input (and in `$ORBIT_PROMPT_FILE`); the command is an argv, never a
//! string that bash splits.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum Engine {
    Claude,
    Codex,
    Gemini,
    Custom,
}

impl Engine {
    pub const NAMES: [&'static str; 4] = ["claude", "codex", "gemini", "custom"];

    pub fn parse(name: &str) -> Result<Engine> {
        match name {
            "claude" => Ok(Engine::Claude),
            "codex" => Ok(Engine::Codex),
            "gemini" => Ok(Engine::Gemini),
            "custom" => Ok(Engine::Custom),
            other => Err(Error::Usage(format!(
                "--engine '{}': unknown engine; choose one of {} (custom takes --exec 'CMD ARGS')",
                other.escape_debug(),
                Engine::NAMES.join(", ")
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Engine::Claude => "claude",
            Engine::Codex => "codex",
            Engine::Gemini => "gemini",
            Engine::Custom => "custom",
        }
    }

    /// The headless invocation of a built-in engine, reading the prompt from stdin.
    ///
    /// - Claude Code: `-p` (print mode) reads the prompt from stdin when no prompt argument
    ///   is given; `--output-format json` yields a final result object carrying
    ///   `total_cost_usd`, which the runner records in cost.ledger.
    /// - Codex CLI: `codex exec -` reads the prompt from stdin; the workspace-write sandbox
    ///   lets it edit the repository and nothing outside it.
    /// - Gemini CLI: runs headless when stdin is not a terminal; `auto_edit` approves edits.
    pub fn default_argv(self) -> Option<Vec<String>> {
        let words: &[&str] = match self {
            Engine::Claude => &[
                "claude",
                "-p",
                "--output-format",
                "json",
                "--permission-mode",
                "acceptEdits",
            ],
            Engine::Codex => &["codex", "exec", "--sandbox", "workspace-write", "-"],
            Engine::Gemini => &[
                "gemini",
                "--approval-mode",
                "auto_edit",
                "--output-format",
                "json",
            ],
            Engine::Custom => return None,
        };
        Some(words.iter().map(|w| w.to_string()).collect())
    }

    /// The npm package that installs a built-in engine's CLI (on a CI runner, in an image).
    pub fn npm_package(self) -> Option<&'static str> {
        match self {
            Engine::Claude => Some("@anthropic-ai/claude-code"),
            Engine::Codex => Some("@openai/codex"),
            Engine::Gemini => Some("@google/gemini-cli"),
            Engine::Custom => None,
        }
    }

    /// The environment variable a built-in engine's CLI reads its API key from.
    pub fn api_key_env(self) -> Option<&'static str> {
        match self {
            Engine::Claude => Some("ANTHROPIC_API_KEY"),
            Engine::Codex => Some("OPENAI_API_KEY"),
            Engine::Gemini => Some("GEMINI_API_KEY"),
            Engine::Custom => None,
        }
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
        assert_eq!(Engine::parse("codex").unwrap(), Engine::Codex);
        assert!(Engine::parse("gpt").is_err());
        assert!(Engine::Custom.argv(None).is_err());
        assert_eq!(
            Engine::Custom.argv(Some("my-agent --flag 'a b'")).unwrap(),
            ["my-agent", "--flag", "a b"]
        );
        assert_eq!(Engine::Claude.argv(None).unwrap()[0], "claude");
        assert!(split_command("a 'b").is_err());
        assert!(split_command("   ").is_err());
    }
}
