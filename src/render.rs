//! Rendering a loop directory: the template table, the view model (every decision made
//! here, in Rust), and a template environment whose `.sh` output is always shell-quoted.
//!
//! Scripts are a rendered data prelude followed by static bash parts included verbatim,
//! so Jinja never meets bash syntax and shellcheck reads the parts as they run.

use std::collections::BTreeMap;

use minijinja::value::Value;
use minijinja::{AutoEscape, Environment, State, UndefinedBehavior};
use serde::Serialize;

use crate::config::{LoopConfig, Sandbox, SandboxNetwork};
use crate::contract::Engine;
use crate::error::{Error, Result};
use crate::goal::GoalText;
use crate::shell;

/// Templates compiled into the binary, by name.
pub const TEMPLATES: &[(&str, &str)] = &[
    ("goal.md.j2", include_str!("../templates/goal.md.j2")),
    ("prompt.md.j2", include_str!("../templates/prompt.md.j2")),
    (
        "settings.sh.j2",
        include_str!("../templates/settings.sh.j2"),
    ),
    (
        "run-loop.sh.j2",
        include_str!("../templates/run-loop.sh.j2"),
    ),
    ("verify.sh.j2", include_str!("../templates/verify.sh.j2")),
    ("holdout.sh.j2", include_str!("../templates/holdout.sh.j2")),
    ("recover.sh.j2", include_str!("../templates/recover.sh.j2")),
    ("notify.sh.j2", include_str!("../templates/notify.sh.j2")),
];

/// Static bash parts, included verbatim after a script's rendered prelude.
pub const LIB_COMMON: &str = include_str!("../templates/lib/common.sh");
pub const LIB_PROC: &str = include_str!("../templates/lib/proc.sh");
pub const LIB_STATE: &str = include_str!("../templates/lib/state.sh");
pub const LIB_FEEDBACK: &str = include_str!("../templates/lib/feedback.sh");
/// The OS sandbox (bubblewrap), rendered into a sandboxed loop only; a loop without one
/// holds its stand-in, the same functions doing nothing.
pub const LIB_SANDBOX: &str = include_str!("../templates/lib/sandbox.sh");
pub const LIB_NO_SANDBOX: &str = include_str!("../templates/lib/no-sandbox.sh");
/// The sandbox's network allowlist (the runner's proxy, and the bridge inside the sandbox),
/// rendered into a sandboxed loop of sandbox-network = "allowlist" only; the others hold its
/// stand-in.
pub const LIB_SANDBOX_NET: &str = include_str!("../templates/lib/sandbox-net.sh");
pub const LIB_NO_SANDBOX_NET: &str = include_str!("../templates/lib/no-sandbox-net.sh");
/// What the engines share; then the loop's own engine's part, one of the eight, each
/// defining the same functions.
pub const LIB_ENGINE: &str = include_str!("../templates/lib/engine.sh");
pub const LIB_ENGINE_CLAUDE: &str = include_str!("../templates/lib/engines/claude.sh");
pub const LIB_ENGINE_CODEX: &str = include_str!("../templates/lib/engines/codex.sh");
pub const LIB_ENGINE_GEMINI: &str = include_str!("../templates/lib/engines/gemini.sh");
pub const LIB_ENGINE_QWEN: &str = include_str!("../templates/lib/engines/qwen.sh");
pub const LIB_ENGINE_AIDER: &str = include_str!("../templates/lib/engines/aider.sh");
pub const LIB_ENGINE_OPENCODE: &str = include_str!("../templates/lib/engines/opencode.sh");
pub const LIB_ENGINE_COPILOT: &str = include_str!("../templates/lib/engines/copilot.sh");
pub const LIB_ENGINE_CUSTOM: &str = include_str!("../templates/lib/engines/custom.sh");
/// What tokens cost by TOKEN_PRICES, for the engines whose CLI reports tokens, not a cost
/// ([`engine_tokens_part`]).
pub const LIB_ENGINE_TOKENS: &str = include_str!("../templates/lib/engine-tokens.sh");
pub const LIB_WORKSPACE: &str = include_str!("../templates/lib/workspace.sh");
pub const LIB_LOCK: &str = include_str!("../templates/lib/lock.sh");
pub const LIB_PROTECT: &str = include_str!("../templates/lib/protect.sh");
/// The runner's parts, one responsibility each, in the order run-loop.sh holds them.
pub const LIB_RUNNER_WORKSPACE: &str = include_str!("../templates/lib/runner/workspace.sh");
pub const LIB_RUNNER_LOCK: &str = include_str!("../templates/lib/runner/lock.sh");
pub const LIB_RUNNER_CONFIG: &str = include_str!("../templates/lib/runner/config.sh");
pub const LIB_RUNNER_PREFLIGHT: &str = include_str!("../templates/lib/runner/preflight.sh");
pub const LIB_RUNNER_AGENT_DIR: &str = include_str!("../templates/lib/runner/agent_dir.sh");
pub const LIB_RUNNER_SWEEP: &str = include_str!("../templates/lib/runner/sweep.sh");
pub const LIB_RUNNER_REAPER: &str = include_str!("../templates/lib/runner/reaper.sh");
pub const LIB_RUNNER_RESUME: &str = include_str!("../templates/lib/runner/resume.sh");
pub const LIB_RUNNER_NOTIFY: &str = include_str!("../templates/lib/runner/notify.sh");
pub const LIB_RUNNER_PINS: &str = include_str!("../templates/lib/runner/pins.sh");
pub const LIB_RUNNER_TRUST: &str = include_str!("../templates/lib/runner/trust.sh");
pub const LIB_RUNNER_SCHEDULE: &str = include_str!("../templates/lib/runner/schedule.sh");
pub const LIB_RUNNER_USER_REFS: &str = include_str!("../templates/lib/runner/user_refs.sh");
pub const LIB_RUNNER_TREE: &str = include_str!("../templates/lib/runner/tree.sh");
pub const LIB_HOME_RECORD: &str = include_str!("../templates/lib/home_record.sh");
pub const LIB_RUNNER_HOME: &str = include_str!("../templates/lib/runner/home.sh");
pub const LIB_RUNNER_EVIDENCE: &str = include_str!("../templates/lib/runner/evidence.sh");
pub const LIB_RUNNER_SETUP: &str = include_str!("../templates/lib/runner/setup.sh");
/// The setup's runs, rendered into a loop with setup commands only; the others hold its
/// stand-in lib/no-setup.sh.
pub const LIB_RUNNER_SETUP_RUN: &str = include_str!("../templates/lib/runner/setup_run.sh");
pub const LIB_NO_SETUP: &str = include_str!("../templates/lib/no-setup.sh");
pub const LIB_RUNNER_FIRST_RUN: &str = include_str!("../templates/lib/runner/first_run.sh");
pub const LIB_RUNNER_RECORD: &str = include_str!("../templates/lib/runner/record.sh");
pub const LIB_RUNNER_PROMPT: &str = include_str!("../templates/lib/runner/prompt.sh");
pub const LIB_RUNNER_AGENT: &str = include_str!("../templates/lib/runner/agent.sh");
pub const LIB_RUNNER_DEADLINE: &str = include_str!("../templates/lib/runner/deadline.sh");
pub const LIB_RUNNER_COUNTS: &str = include_str!("../templates/lib/runner/counts.sh");
pub const LIB_RUNNER_CHECKS: &str = include_str!("../templates/lib/runner/checks.sh");
pub const LIB_RUNNER_GATE: &str = include_str!("../templates/lib/runner/gate.sh");
/// The adequacy measure of a DONE's change, through the pinned orbit (gate and report).
pub const LIB_RUNNER_ADEQUACY: &str = include_str!("../templates/lib/runner/adequacy.sh");
/// The holdout checks' runs in the DONE gate, rendered into a loop with holdout checks only;
/// the others hold its stand-in lib/no-holdout.sh.
pub const LIB_RUNNER_HOLDOUT: &str = include_str!("../templates/lib/runner/holdout.sh");
pub const LIB_NO_HOLDOUT: &str = include_str!("../templates/lib/no-holdout.sh");
pub const LIB_RUNNER_JUDGE: &str = include_str!("../templates/lib/runner/judge.sh");
pub const LIB_RUNNER_COMMIT: &str = include_str!("../templates/lib/runner/commit.sh");
pub const LIB_RUNNER_STALL: &str = include_str!("../templates/lib/runner/stall.sh");
pub const LIB_RUNNER_ITERATION: &str = include_str!("../templates/lib/runner/iteration.sh");
pub const LIB_RUNNER_STOP: &str = include_str!("../templates/lib/runner/stop.sh");
pub const LIB_RUNNER_ENVELOPE: &str = include_str!("../templates/lib/runner/envelope.sh");
pub const LIB_RUN_LOOP: &str = include_str!("../templates/lib/run-loop.sh");
/// The fan-out, rendered into a loop of candidates > 1 only; a loop of one agent holds its
/// stand-in.
pub const LIB_FANOUT: &str = include_str!("../templates/lib/fanout.sh");
pub const LIB_FANOUT_SELECT: &str = include_str!("../templates/lib/fanout/select.sh");
pub const LIB_FANOUT_CHECKS: &str = include_str!("../templates/lib/fanout/checks.sh");
pub const LIB_NO_FANOUT: &str = include_str!("../templates/lib/no-fanout.sh");
pub const LIB_VERIFY: &str = include_str!("../templates/lib/verify.sh");
/// What a check's own output says ran: the test tools' summaries, counted and judged
/// against the base tree's (verify.sh and holdout.sh).
pub const LIB_COUNTS: &str = include_str!("../templates/lib/counts.sh");
/// run_hidden: how a holdout check runs the project's code with the holdout masked
/// (holdout.sh only, of a loop with holdout checks).
pub const LIB_HIDDEN: &str = include_str!("../templates/lib/hidden.sh");
/// recover.sh's parts, in the order it holds them; lib/recover.sh applies and has main.
pub const LIB_RECOVER_ARGS: &str = include_str!("../templates/lib/recover/args.sh");
pub const LIB_RECOVER_EVIDENCE: &str = include_str!("../templates/lib/recover/evidence.sh");
pub const LIB_RECOVER_PINS: &str = include_str!("../templates/lib/recover/pins.sh");
pub const LIB_RECOVER_WORKSPACE: &str = include_str!("../templates/lib/recover/workspace.sh");
pub const LIB_RECOVER_PLAN: &str = include_str!("../templates/lib/recover/plan.sh");
pub const LIB_RECOVER: &str = include_str!("../templates/lib/recover.sh");
pub const LIB_NOTIFY: &str = include_str!("../templates/lib/notify.sh");

/// The perl programs the bash parts run, one file each under templates/lib/perl/ (so that
/// `perl -c` and the tests read them as perl): a part names one with the marker
/// `@perl:NAME@` inside a single-quoted bash string, and [`place_perl`] puts the program
/// there when the script is rendered. A marker is valid bash as it stands, so shellcheck
/// reads the part as a file.
pub const PERL_NET: &str = include_str!("../templates/lib/perl/net.pl");
pub const PERL_HOME_RECORD: &str = include_str!("../templates/lib/perl/home_record.pl");
pub const PERL_HOME_RECORD_ONCE: &str = include_str!("../templates/lib/perl/home_record_once.pl");
pub const PERL_HOME_JSON: &str = include_str!("../templates/lib/perl/home_json.pl");
pub const PERL_HOME_CLAUDE: &str = include_str!("../templates/lib/perl/home_claude.pl");
pub const PERL_HOME_CODEX: &str = include_str!("../templates/lib/perl/home_codex.pl");
pub const PERL_HOME_COPILOT: &str = include_str!("../templates/lib/perl/home_copilot.pl");
pub const PERL_HOME_EXPLAIN: &str = include_str!("../templates/lib/perl/home_explain.pl");
pub const PERL_HASHER: &str = include_str!("../templates/lib/perl/hasher.pl");
pub const PERL_REAPER: &str = include_str!("../templates/lib/perl/reaper.pl");

/// Every perl program by its file name under templates/lib/perl/: what it is, for the tests.
/// net.pl: the sandbox's network proxy and bridge (lib/sandbox-net.sh `NET_PL`);
/// home_record.pl: the subroutines of the record of the held files every engine shares
/// (lib/home_record.sh `HOME_PERL_SUBS`, also run by orbit audit and recover); home_json.pl:
/// the JSON projection claude's and copilot's readers share; home_claude.pl, home_codex.pl,
/// home_copilot.pl: each engine's reader of its own kinds (its part's `HOME_PERL_ENGINE`, so
/// that a loop holds its engine's reader alone; orbit audit and recover hold them all);
/// home_record_once.pl: that record computed once, spec lines on stdin (`HOME_PERL`);
/// home_explain.pl: what a changed JSON projection added, run by orbit audit and recover
/// alone ([`PERL_RUN_BY_ORBIT`]); hasher.pl: the resident hashing
/// coprocess (lib/common.sh `orbit_hasher_start`); reaper.pl: the runner's child-subreaper
/// exec (lib/runner/reaper.sh `REAPER_PL`).
pub const PERL_PROGRAMS: &[(&str, &str)] = &[
    ("net.pl", PERL_NET),
    ("home_record.pl", PERL_HOME_RECORD),
    ("home_record_once.pl", PERL_HOME_RECORD_ONCE),
    ("home_json.pl", PERL_HOME_JSON),
    ("home_claude.pl", PERL_HOME_CLAUDE),
    ("home_codex.pl", PERL_HOME_CODEX),
    ("home_copilot.pl", PERL_HOME_COPILOT),
    ("hasher.pl", PERL_HASHER),
    ("reaper.pl", PERL_REAPER),
    ("home_explain.pl", PERL_HOME_EXPLAIN),
];

/// The perl programs of [`PERL_PROGRAMS`] that orbit runs itself and no script holds.
pub const PERL_RUN_BY_ORBIT: &[&str] = &["home_explain.pl"];

/// The marker a static part holds where a perl program goes.
const PERL_MARKER: &str = "@perl:";

/// `part` as a script holds it: every `@perl:NAME@` replaced by the program NAME of
/// [`PERL_PROGRAMS`], its last newline left out and every line after the first indented as
/// the marker's line is, so that the program reads in the script as it did when it was
/// written there. Panics on a program that is not registered or that holds a single quote
/// (it cannot be placed in a single-quoted bash string): the templates compiled into orbit
/// are broken, which the tests see.
pub fn place_perl(part: &str) -> std::borrow::Cow<'_, str> {
    place_perl_from(part, PERL_PROGRAMS)
}

/// [`place_perl`] with each program as lib.sh holds it ([`strip_perl`]): without its
/// comment lines, blank lines and indentation, as lib.sh holds its bash.
pub fn place_perl_stripped(part: &str) -> std::borrow::Cow<'_, str> {
    if !part.contains(PERL_MARKER) {
        return std::borrow::Cow::Borrowed(part);
    }
    let stripped: Vec<(&str, String)> = PERL_PROGRAMS
        .iter()
        .map(|(n, t)| (*n, strip_perl(t)))
        .collect();
    let programs: Vec<(&str, &str)> = stripped.iter().map(|(n, t)| (*n, t.as_str())).collect();
    std::borrow::Cow::Owned(place_perl_from(part, &programs).into_owned())
}

/// A perl program without its whole-line comments (`# ...`; not a `#!` line), its blank
/// lines and the indentation of its lines: the programs hold no heredoc, POD or string
/// that spans lines, whose lines this would change (a unit test holds them to that).
pub fn strip_perl(program: &str) -> String {
    let mut out = String::with_capacity(program.len());
    for line in program.lines() {
        let t = line.trim_start();
        if t.is_empty() || (t.starts_with('#') && !t.starts_with("#!")) {
            continue;
        }
        out.push_str(t);
        out.push('\n');
    }
    out
}

fn place_perl_from<'a>(part: &'a str, programs: &[(&str, &str)]) -> std::borrow::Cow<'a, str> {
    if !part.contains(PERL_MARKER) {
        return std::borrow::Cow::Borrowed(part);
    }
    let mut out = String::with_capacity(part.len() + 16 * 1024);
    let mut rest = part;
    while let Some(at) = rest.find(PERL_MARKER) {
        out.push_str(&rest[..at]);
        let after = &rest[at + PERL_MARKER.len()..];
        let end = after.find('@').unwrap_or_else(|| {
            panic!("a static part holds {PERL_MARKER} without its closing @: the templates compiled into orbit are broken")
        });
        let name = &after[..end];
        let text = programs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| {
                panic!("a static part names the perl program {name}, which is not in PERL_PROGRAMS: the templates compiled into orbit are broken")
            });
        assert!(
            !text.contains('\''),
            "templates/lib/perl/{name} holds a single quote ('), and the program is placed in a single-quoted bash string: the templates compiled into orbit are broken; write the quote another way (q{{}}, \\x27, a double-quoted string)"
        );
        let body = text.strip_suffix('\n').unwrap_or_else(|| {
            panic!("templates/lib/perl/{name} does not end with a newline: the templates compiled into orbit are broken")
        });
        let line = &out[out.rfind('\n').map_or(0, |i| i + 1)..];
        let indent = line[..line.len() - line.trim_start_matches([' ', '\t']).len()].to_string();
        for (i, l) in body.split('\n').enumerate() {
            if i > 0 {
                out.push('\n');
                if !l.is_empty() {
                    out.push_str(&indent);
                }
            }
            out.push_str(l);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Every static part by its path under templates/, for the tests and the reference.
pub const STATIC_PARTS: &[(&str, &str)] = &[
    ("lib/common.sh", LIB_COMMON),
    ("lib/proc.sh", LIB_PROC),
    ("lib/state.sh", LIB_STATE),
    ("lib/feedback.sh", LIB_FEEDBACK),
    ("lib/sandbox.sh", LIB_SANDBOX),
    ("lib/no-sandbox.sh", LIB_NO_SANDBOX),
    ("lib/sandbox-net.sh", LIB_SANDBOX_NET),
    ("lib/no-sandbox-net.sh", LIB_NO_SANDBOX_NET),
    ("lib/engine.sh", LIB_ENGINE),
    ("lib/engines/claude.sh", LIB_ENGINE_CLAUDE),
    ("lib/engines/codex.sh", LIB_ENGINE_CODEX),
    ("lib/engines/gemini.sh", LIB_ENGINE_GEMINI),
    ("lib/engines/qwen.sh", LIB_ENGINE_QWEN),
    ("lib/engines/aider.sh", LIB_ENGINE_AIDER),
    ("lib/engines/opencode.sh", LIB_ENGINE_OPENCODE),
    ("lib/engines/copilot.sh", LIB_ENGINE_COPILOT),
    ("lib/engines/custom.sh", LIB_ENGINE_CUSTOM),
    ("lib/engine-tokens.sh", LIB_ENGINE_TOKENS),
    ("lib/fanout.sh", LIB_FANOUT),
    ("lib/fanout/select.sh", LIB_FANOUT_SELECT),
    ("lib/fanout/checks.sh", LIB_FANOUT_CHECKS),
    ("lib/no-fanout.sh", LIB_NO_FANOUT),
    ("lib/runner/config.sh", LIB_RUNNER_CONFIG),
    ("lib/runner/preflight.sh", LIB_RUNNER_PREFLIGHT),
    ("lib/workspace.sh", LIB_WORKSPACE),
    ("lib/runner/workspace.sh", LIB_RUNNER_WORKSPACE),
    ("lib/runner/agent_dir.sh", LIB_RUNNER_AGENT_DIR),
    ("lib/lock.sh", LIB_LOCK),
    ("lib/protect.sh", LIB_PROTECT),
    ("lib/runner/lock.sh", LIB_RUNNER_LOCK),
    ("lib/runner/sweep.sh", LIB_RUNNER_SWEEP),
    ("lib/runner/reaper.sh", LIB_RUNNER_REAPER),
    ("lib/runner/resume.sh", LIB_RUNNER_RESUME),
    ("lib/runner/notify.sh", LIB_RUNNER_NOTIFY),
    ("lib/runner/pins.sh", LIB_RUNNER_PINS),
    ("lib/runner/trust.sh", LIB_RUNNER_TRUST),
    ("lib/runner/schedule.sh", LIB_RUNNER_SCHEDULE),
    ("lib/runner/user_refs.sh", LIB_RUNNER_USER_REFS),
    ("lib/runner/tree.sh", LIB_RUNNER_TREE),
    ("lib/home_record.sh", LIB_HOME_RECORD),
    ("lib/runner/home.sh", LIB_RUNNER_HOME),
    ("lib/runner/evidence.sh", LIB_RUNNER_EVIDENCE),
    ("lib/runner/setup.sh", LIB_RUNNER_SETUP),
    ("lib/runner/setup_run.sh", LIB_RUNNER_SETUP_RUN),
    ("lib/no-setup.sh", LIB_NO_SETUP),
    ("lib/runner/first_run.sh", LIB_RUNNER_FIRST_RUN),
    ("lib/runner/record.sh", LIB_RUNNER_RECORD),
    ("lib/runner/prompt.sh", LIB_RUNNER_PROMPT),
    ("lib/runner/agent.sh", LIB_RUNNER_AGENT),
    ("lib/runner/deadline.sh", LIB_RUNNER_DEADLINE),
    ("lib/runner/counts.sh", LIB_RUNNER_COUNTS),
    ("lib/runner/checks.sh", LIB_RUNNER_CHECKS),
    ("lib/runner/gate.sh", LIB_RUNNER_GATE),
    ("lib/runner/adequacy.sh", LIB_RUNNER_ADEQUACY),
    ("lib/runner/holdout.sh", LIB_RUNNER_HOLDOUT),
    ("lib/no-holdout.sh", LIB_NO_HOLDOUT),
    ("lib/runner/judge.sh", LIB_RUNNER_JUDGE),
    ("lib/runner/commit.sh", LIB_RUNNER_COMMIT),
    ("lib/runner/stall.sh", LIB_RUNNER_STALL),
    ("lib/runner/iteration.sh", LIB_RUNNER_ITERATION),
    ("lib/runner/envelope.sh", LIB_RUNNER_ENVELOPE),
    ("lib/runner/stop.sh", LIB_RUNNER_STOP),
    ("lib/run-loop.sh", LIB_RUN_LOOP),
    ("lib/counts.sh", LIB_COUNTS),
    ("lib/hidden.sh", LIB_HIDDEN),
    ("lib/verify.sh", LIB_VERIFY),
    ("lib/recover/args.sh", LIB_RECOVER_ARGS),
    ("lib/recover/evidence.sh", LIB_RECOVER_EVIDENCE),
    ("lib/recover/pins.sh", LIB_RECOVER_PINS),
    ("lib/recover/workspace.sh", LIB_RECOVER_WORKSPACE),
    ("lib/recover/plan.sh", LIB_RECOVER_PLAN),
    ("lib/recover.sh", LIB_RECOVER),
    ("lib/notify.sh", LIB_NOTIFY),
];

/// A static file written as is.
pub const NOTES_MD: &str = include_str!("../templates/notes.md");

/// The part of the runner that holds `engine`'s code: how its CLI's output is read, what
/// its preflight checks, what it keeps in the workspace and under HOME.
pub fn engine_part(engine: Engine) -> &'static str {
    match engine {
        Engine::Claude => LIB_ENGINE_CLAUDE,
        Engine::Codex => LIB_ENGINE_CODEX,
        Engine::Gemini => LIB_ENGINE_GEMINI,
        Engine::Qwen => LIB_ENGINE_QWEN,
        Engine::Aider => LIB_ENGINE_AIDER,
        Engine::Opencode => LIB_ENGINE_OPENCODE,
        Engine::Copilot => LIB_ENGINE_COPILOT,
        Engine::Custom => LIB_ENGINE_CUSTOM,
    }
}

/// The part that prices `engine`'s tokens by TOKEN_PRICES, for an engine whose CLI reports
/// tokens, not a cost (None for the others).
pub fn engine_tokens_part(engine: Engine) -> Option<&'static str> {
    match engine {
        Engine::Codex | Engine::Gemini | Engine::Qwen | Engine::Opencode => Some(LIB_ENGINE_TOKENS),
        Engine::Claude | Engine::Aider | Engine::Copilot | Engine::Custom => None,
    }
}

/// A static part of a script, as the template table lists it: one every loop holds, or a
/// choice made from the loop's settings when it is rendered, so that a loop's script holds
/// only the code it can run (its engine's, and the fan-out and the sandbox when it uses
/// them).
pub enum Part {
    /// The same in every loop.
    Always(&'static str),
    /// The loop's engine's part ([`engine_part`]).
    Engine,
    /// The pricing of its tokens, for an engine that needs it ([`engine_tokens_part`]).
    EngineTokens,
    /// lib/fanout.sh for a loop of candidates > 1, else its stand-in lib/no-fanout.sh.
    Fanout,
    /// A part of the fan-out (lib/fanout/select.sh, lib/fanout/checks.sh) for a loop of
    /// candidates > 1, else nothing.
    FanoutOnly(&'static str),
    /// lib/sandbox.sh for a sandboxed loop, else its stand-in lib/no-sandbox.sh.
    Sandbox,
    /// lib/runner/holdout.sh for a loop with holdout checks, else its stand-in
    /// lib/no-holdout.sh.
    Holdout,
    /// A part of the holdout (lib/hidden.sh) for a loop with holdout checks, else nothing.
    HoldoutOnly(&'static str),
    /// lib/runner/setup_run.sh for a loop with setup commands, else its stand-in
    /// lib/no-setup.sh.
    Setup,
    /// lib/sandbox-net.sh for a sandboxed loop of sandbox-network = "allowlist", else its
    /// stand-in lib/no-sandbox-net.sh.
    SandboxNet,
}

impl Part {
    /// The text this part is for the loop `view` describes (None: the loop holds nothing
    /// in its place).
    pub fn choose(&self, view: &View) -> Option<&'static str> {
        Some(match self {
            Part::Always(text) => text,
            Part::Engine => engine_part(view.engine),
            Part::EngineTokens => return engine_tokens_part(view.engine),
            Part::Fanout if view.candidates > 1 => LIB_FANOUT,
            Part::Fanout => LIB_NO_FANOUT,
            Part::FanoutOnly(text) if view.candidates > 1 => text,
            Part::FanoutOnly(_) => return None,
            Part::Holdout if view.holdout_checks.is_empty() => LIB_NO_HOLDOUT,
            Part::Holdout => LIB_RUNNER_HOLDOUT,
            Part::HoldoutOnly(_) if view.holdout_checks.is_empty() => return None,
            Part::HoldoutOnly(text) => text,
            Part::Setup if view.setup.is_empty() => LIB_NO_SETUP,
            Part::Setup => LIB_RUNNER_SETUP_RUN,
            Part::Sandbox => match view.sandbox {
                Sandbox::Bwrap | Sandbox::Auto => LIB_SANDBOX,
                Sandbox::None => LIB_NO_SANDBOX,
            },
            Part::SandboxNet => match (view.sandbox, view.sandbox_network) {
                (Sandbox::Bwrap | Sandbox::Auto, SandboxNetwork::Allowlist) => LIB_SANDBOX_NET,
                _ => LIB_NO_SANDBOX_NET,
            },
        })
    }
}

/// One rendered file of the loop directory.
pub struct LoopFile {
    pub name: &'static str,
    pub template: &'static str,
    pub parts: &'static [Part],
    pub executable: bool,
}

impl LoopFile {
    /// The static parts this file holds for the loop `view` describes, in order.
    pub fn parts_for(&self, view: &View) -> Vec<&'static str> {
        self.parts.iter().filter_map(|p| p.choose(view)).collect()
    }
}

/// The template table: every rendered file, its template and its static parts.
pub const FILES: &[LoopFile] = &[
    LoopFile {
        name: "goal.md",
        template: "goal.md.j2",
        parts: &[],
        executable: false,
    },
    LoopFile {
        name: "prompt.md",
        template: "prompt.md.j2",
        parts: &[],
        executable: false,
    },
    LoopFile {
        name: "verify.sh",
        template: "verify.sh.j2",
        parts: &[
            Part::Always(LIB_COMMON),
            Part::Always(LIB_PROC),
            Part::Always(LIB_COUNTS),
            Part::Always(LIB_VERIFY),
        ],
        executable: true,
    },
    LoopFile {
        name: "holdout.sh",
        template: "holdout.sh.j2",
        parts: &[
            Part::Always(LIB_COMMON),
            Part::Always(LIB_PROC),
            Part::Always(LIB_COUNTS),
            Part::HoldoutOnly(LIB_HIDDEN),
            Part::Always(LIB_VERIFY),
        ],
        executable: true,
    },
    LoopFile {
        name: "run-loop.sh",
        template: "run-loop.sh.j2",
        parts: &[
            Part::Always(LIB_RUNNER_REAPER),
            Part::Always(LIB_COMMON),
            Part::Always(LIB_PROC),
            Part::Always(LIB_STATE),
            Part::Always(LIB_FEEDBACK),
            Part::Sandbox,
            Part::SandboxNet,
            Part::Always(LIB_ENGINE),
            Part::EngineTokens,
            Part::Engine,
            Part::Fanout,
            Part::FanoutOnly(LIB_FANOUT_SELECT),
            Part::FanoutOnly(LIB_FANOUT_CHECKS),
            Part::Always(LIB_RUNNER_CONFIG),
            Part::Always(LIB_RUNNER_PREFLIGHT),
            Part::Always(LIB_WORKSPACE),
            Part::Always(LIB_RUNNER_WORKSPACE),
            Part::Always(LIB_RUNNER_AGENT_DIR),
            Part::Always(LIB_LOCK),
            Part::Always(LIB_RUNNER_LOCK),
            Part::Always(LIB_RUNNER_SWEEP),
            Part::Always(LIB_RUNNER_RESUME),
            Part::Always(LIB_RUNNER_NOTIFY),
            Part::Always(LIB_PROTECT),
            Part::Always(LIB_RUNNER_PINS),
            Part::Always(LIB_RUNNER_TRUST),
            Part::Always(LIB_RUNNER_SCHEDULE),
            Part::Always(LIB_RUNNER_USER_REFS),
            Part::Always(LIB_RUNNER_TREE),
            Part::Always(LIB_HOME_RECORD),
            Part::Always(LIB_RUNNER_HOME),
            Part::Always(LIB_RUNNER_EVIDENCE),
            Part::Always(LIB_RUNNER_SETUP),
            Part::Setup,
            Part::Always(LIB_RUNNER_FIRST_RUN),
            Part::Always(LIB_RUNNER_RECORD),
            Part::Always(LIB_RUNNER_PROMPT),
            Part::Always(LIB_RUNNER_AGENT),
            Part::Always(LIB_RUNNER_DEADLINE),
            Part::Always(LIB_RUNNER_COUNTS),
            Part::Always(LIB_RUNNER_CHECKS),
            Part::Always(LIB_RUNNER_GATE),
            Part::Always(LIB_RUNNER_ADEQUACY),
            Part::Holdout,
            Part::Always(LIB_RUNNER_JUDGE),
            Part::Always(LIB_RUNNER_COMMIT),
            Part::Always(LIB_RUNNER_STALL),
            Part::Always(LIB_RUNNER_ITERATION),
            Part::Always(LIB_RUNNER_ENVELOPE),
            Part::Always(LIB_RUNNER_STOP),
            Part::Always(LIB_RUN_LOOP),
        ],
        executable: true,
    },
    LoopFile {
        name: "recover.sh",
        template: "recover.sh.j2",
        parts: &[
            Part::Always(LIB_COMMON),
            Part::Always(LIB_STATE),
            Part::Always(LIB_LOCK),
            Part::Always(LIB_WORKSPACE),
            Part::Always(LIB_HOME_RECORD),
            Part::Always(LIB_RECOVER_ARGS),
            Part::Always(LIB_RECOVER_EVIDENCE),
            Part::Always(LIB_PROTECT),
            Part::Always(LIB_RECOVER_PINS),
            Part::Always(LIB_RECOVER_WORKSPACE),
            Part::Always(LIB_RECOVER_PLAN),
            Part::Always(LIB_RECOVER),
        ],
        executable: true,
    },
    LoopFile {
        name: "notify.sh",
        template: "notify.sh.j2",
        parts: &[
            Part::Always(LIB_COMMON),
            Part::Always(LIB_PROC),
            Part::Always(LIB_NOTIFY),
        ],
        executable: true,
    },
];

#[derive(Debug, Serialize)]
pub struct CheckView {
    pub name: String,
    pub cmd: String,
    /// The command as a markdown code span.
    pub code: String,
    /// What the check is for: `acceptance` (--verify), `reproduction` (fails on the base
    /// tree, passes at the end), `regression` (passes on the base tree and stays green) or
    /// `holdout` (run only in the DONE gate, from holdout.sh).
    pub role: &'static str,
    /// A holdout check that reads the holdout (names `ORBIT_HOLDOUT_DIR`): it runs unmasked
    /// and runs the project's code through `run_hidden` itself; every other holdout check
    /// runs masked as a whole. False for the visible checks.
    pub reads_holdout: bool,
}

/// Whether a holdout check's command reads the holdout: it names `ORBIT_HOLDOUT_DIR`, the
/// only way a check finds `holdout/`. One that does not runs masked as a whole (what it
/// starts never sees the holdout); one that does sees it, and must run the project's code
/// through `run_hidden`.
pub fn holdout_check_reads(cmd: &str) -> bool {
    cmd.contains("ORBIT_HOLDOUT_DIR")
}

/// The role of an acceptance check (`--verify`).
pub const ROLE_ACCEPTANCE: &str = "acceptance";
/// The role of a reproduction check (`--reproduction`).
pub const ROLE_REPRODUCTION: &str = "reproduction";
/// The role of a regression check (`--regression`).
pub const ROLE_REGRESSION: &str = "regression";
/// The role of a holdout check (`--holdout`).
pub const ROLE_HOLDOUT: &str = "holdout";

/// Every setting of the contract's table as the text bash reads ("" for none, "1"/"0" for
/// booleans), by its key in snake_case: what a template that places one setting reads
/// (`{{ s.check_timeout }}`).
pub type SettingsView = BTreeMap<String, String>;

/// One setting of the settings prelude (`settings.sh.j2`): the bash variable and its value.
#[derive(Debug, Serialize)]
pub struct SettingLine {
    /// The loop.toml key (`max-iterations`), by which the `note` filter finds its note.
    pub key: &'static str,
    /// The bash variable (`MAX_ITERATIONS`, `CANDIDATES_SETTING`).
    pub name: String,
    /// The value as bash reads it.
    pub value: String,
}

#[derive(Debug, Serialize)]
pub struct View {
    pub orbit_version: String,
    pub contract_version: String,
    pub name: String,
    pub engine: Engine,
    /// The engine's own permission files beyond contract 7's list.
    pub engine_permission_files: Vec<String>,
    pub argv: Vec<String>,
    /// verify.sh's checks: acceptance, then reproduction, then regression.
    pub checks: Vec<CheckView>,
    /// The names of verify.sh's checks in the order it runs them (for the runner's tally).
    pub check_names: Vec<String>,
    /// The names of the reproduction checks (for the runner's red gate).
    pub reproduction_names: Vec<String>,
    /// The names of the regression checks (for the runner's red gate).
    pub regression_names: Vec<String>,
    /// holdout.sh's checks, named `holdout-N` (the name says nothing of the check).
    pub holdout_checks: Vec<CheckView>,
    /// The workspace's setup commands, run once in each fresh checkout before any check.
    pub setup: Vec<String>,
    /// The variables that make the dependency tools run offline (loop.toml `offline-env`),
    /// which verify.sh and holdout.sh export to their checks.
    pub offline_env: Vec<String>,
    /// Every protect glob, the user's then those protected by default (for scripts).
    pub protect: Vec<String>,
    /// The user's protect globs as markdown code spans (for goal.md and prompt.md).
    pub protect_md: Vec<String>,
    /// The globs protected by default (the files that change how the checks run), as
    /// markdown code spans (for goal.md and prompt.md).
    pub auto_protect_md: Vec<String>,
    pub pass_k: u32,
    pub confirm_runs: u32,
    pub judge: bool,
    pub check_timeout: String,
    /// The loop directory relative to the repository root, for the prompt.
    pub loop_rel: String,
    pub goal_title: String,
    pub goal_text: String,
    /// The settings an environment variable of the same name overrides, in the table's
    /// order: the settings prelude's `NAME=${NAME-value}` lines.
    pub settings: Vec<SettingLine>,
    /// The loop's identity, in the table's order: the prelude's `NAME_SETTING=value` lines,
    /// each under its note.
    pub identity: Vec<SettingLine>,
    /// The OS sandbox of the agent and check runs: `none` or `bwrap` (which sandbox part the
    /// runner holds).
    pub sandbox: Sandbox,
    /// What a sandboxed run reaches of the network (whether the runner holds the proxy).
    pub sandbox_network: SandboxNetwork,
    /// How many candidates each iteration fans out to (which fan-out parts the runner holds).
    pub candidates: u64,
    pub s: SettingsView,
}

/// A markdown code span that holds `text` whatever backticks it contains.
pub fn code_span(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut longest = 0;
    let mut run = 0;
    for c in flat.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    if longest > 0 {
        format!("{fence} {flat} {fence}")
    } else {
        format!("{fence}{flat}{fence}")
    }
}

impl View {
    pub fn new(cfg: &LoopConfig, goal: &GoalText, loop_rel: &str) -> View {
        let roles: Vec<(&'static str, &String)> = cfg
            .verify
            .iter()
            .map(|c| (ROLE_ACCEPTANCE, c))
            .chain(cfg.reproduction.iter().map(|c| (ROLE_REPRODUCTION, c)))
            .chain(cfg.regression.iter().map(|c| (ROLE_REGRESSION, c)))
            .collect();
        let names = cfg.check_names();
        let checks: Vec<CheckView> = names
            .into_iter()
            .zip(&roles)
            .map(|(name, (role, cmd))| CheckView {
                name,
                cmd: (*cmd).clone(),
                code: code_span(cmd),
                role,
                reads_holdout: false,
            })
            .collect();
        let names_of = |role: &str| {
            checks
                .iter()
                .filter(|c| c.role == role)
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
        };
        let check_names = checks.iter().map(|c| c.name.clone()).collect();
        let reproduction_names = names_of(ROLE_REPRODUCTION);
        let regression_names = names_of(ROLE_REGRESSION);
        let holdout_checks = cfg
            .holdout
            .iter()
            .enumerate()
            .map(|(i, cmd)| CheckView {
                name: format!("holdout-{}", i + 1),
                cmd: cmd.clone(),
                code: code_span(cmd),
                role: ROLE_HOLDOUT,
                reads_holdout: holdout_check_reads(cmd),
            })
            .collect();
        let texts = cfg.setting_texts();
        let line = |(setting, value): &(&'static crate::contract::Setting, String)| SettingLine {
            key: setting.key,
            name: setting.bash_name(),
            value: value.clone(),
        };
        let (run, identity): (Vec<_>, Vec<_>) = texts.iter().partition(|(s, _)| s.overridable());
        let settings = run.into_iter().map(line).collect();
        let identity = identity.into_iter().map(line).collect();
        let s = texts
            .into_iter()
            .map(|(setting, value)| (setting.key.replace('-', "_"), value))
            .collect();
        View {
            orbit_version: env!("CARGO_PKG_VERSION").into(),
            contract_version: cfg.contract_version.clone(),
            name: cfg.name.clone(),
            engine: cfg.engine,
            engine_permission_files: crate::contract::engine_permission_files(cfg.engine)
                .iter()
                .map(|s| s.to_string())
                .collect(),
            argv: cfg.argv.clone(),
            checks,
            check_names,
            reproduction_names,
            regression_names,
            holdout_checks,
            setup: cfg.setup.clone(),
            offline_env: cfg.offline_env.clone(),
            protect: cfg.protect_globs(),
            protect_md: cfg.protect.iter().map(|g| code_span(g)).collect(),
            auto_protect_md: cfg
                .auto_protect
                .iter()
                .filter(|g| !cfg.protect.contains(g))
                .map(|g| code_span(g))
                .collect(),
            pass_k: cfg.pass_k,
            confirm_runs: cfg.confirm_runs,
            judge: !cfg.judge_cmd.is_empty(),
            check_timeout: cfg.check_timeout.clone(),
            loop_rel: loop_rel.to_string(),
            goal_title: goal.title(),
            goal_text: goal.as_str().to_string(),
            settings,
            identity,
            s,
            sandbox: cfg.sandbox,
            sandbox_network: cfg.sandbox_network,
            candidates: cfg.candidates,
        }
    }
}

/// The shell formatter: in `.sh` templates every value is quoted as one bash word; lists,
/// maps, none and undefined are refused. Values marked safe come only from the `words`
/// filter, which quotes each element itself.
fn format_value(
    out: &mut minijinja::Output,
    state: &mut State,
    value: &Value,
) -> std::result::Result<(), minijinja::Error> {
    if !matches!(state.auto_escape(), AutoEscape::Custom(n) if n == "shell") {
        return minijinja::escape_formatter(out, state, value);
    }
    let refuse = |what: &str| {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("refusing to place {what} into a shell script"),
        )
    };
    if value.is_safe() {
        return out
            .write_str(value.as_str().unwrap_or_default())
            .map_err(minijinja::Error::from);
    }
    let text = match value.kind() {
        minijinja::value::ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        minijinja::value::ValueKind::Number => value.to_string(),
        minijinja::value::ValueKind::Bool => {
            if value.is_true() {
                "1".into()
            } else {
                "0".into()
            }
        }
        minijinja::value::ValueKind::Undefined => return Err(refuse("an undefined value")),
        minijinja::value::ValueKind::None => return Err(refuse("none")),
        other => return Err(refuse(&format!("a {other}"))),
    };
    let quoted = shell::quote(&text).map_err(|e| refuse(&e.to_string()))?;
    out.write_str(&quoted).map_err(minijinja::Error::from)
}

/// `{{ list|words }}`: each element quoted, joined by spaces (an array literal's body).
fn words_filter(value: Value) -> std::result::Result<Value, minijinja::Error> {
    let mut items = Vec::new();
    for v in value.try_iter()? {
        let s = v.as_str().ok_or_else(|| {
            minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                "words: not a string",
            )
        })?;
        items.push(s.to_string());
    }
    let joined = shell::quote_words(&items).map_err(|e| {
        minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e.to_string())
    })?;
    Ok(Value::from_safe_string(joined))
}

/// `{{ version|plain }}`: a word of `[A-Za-z0-9._-]` placed unquoted (for comments);
/// anything else is refused.
fn plain_filter(value: String) -> std::result::Result<Value, minijinja::Error> {
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("plain: '{}' is not a plain word", value.escape_debug()),
        ));
    }
    Ok(Value::from_safe_string(value))
}

/// `{{ key|note }}`: the note of the identity setting `key` in the contract's table, as
/// comment lines of the settings prelude. Only orbit's own words pass: the filter takes a
/// key and places the table's text, never a value of the loop.
fn note_filter(key: String) -> std::result::Result<Value, minijinja::Error> {
    let refuse =
        |why: &str| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, why.to_string());
    let setting = crate::contract::SETTINGS
        .iter()
        .find(|s| s.key == key)
        .ok_or_else(|| refuse("note: not a setting of the contract's table"))?;
    let crate::contract::Scope::Identity { note } = setting.scope else {
        return Err(refuse("note: only the loop's identity carries a note"));
    };
    let lines: Vec<String> = note.lines().map(|l| format!("  # {l}")).collect();
    Ok(Value::from_safe_string(lines.join("\n")))
}

/// The template environment: strict undefined, shell escaping for `.sh` templates, no
/// `safe` filter.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()
            .expect("the default syntax is valid"),
    );
    env.set_auto_escape_callback(|name| {
        if name.ends_with(".sh.j2") {
            AutoEscape::Custom("shell".into())
        } else {
            AutoEscape::None
        }
    });
    env.set_formatter(format_value);
    env.remove_filter("safe");
    env.add_filter("words", words_filter);
    env.add_filter("plain", plain_filter);
    env.add_filter("note", note_filter);
    for (name, source) in TEMPLATES {
        env.add_template(name, source)
            .unwrap_or_else(|e| panic!("template {name} compiled into orbit is broken: {e}"));
    }
    env
}

/// Renders one file of the table: the template, then (for scripts) the parts the script
/// holds itself ([`SCRIPT_OWN_PARTS`]), the loader of its sections of lib.sh (`lib`) and the
/// script's entry (its last part's `main "$@"`).
pub fn render_file(
    env: &Environment<'_>,
    file: &LoopFile,
    view: &View,
    lib: &Library,
) -> Result<String> {
    let tmpl = env
        .get_template(file.template)
        .unwrap_or_else(|e| panic!("template {} missing: {e}", file.template));
    let mut out = tmpl
        .render(Value::from(minijinja::value::Serde(view)))
        .map_err(|e| Error::Usage(format!("cannot render {}: {e}", file.name)))?;
    let parts = file.parts_for(view);
    let Some(last) = parts.last() else {
        return Ok(out);
    };
    for part in parts.iter().filter(|p| is_own_part(p)) {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&place_perl(part));
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&loader(file.name, lib));
    out.push('\n');
    out.push_str(split_entry(last).1);
    Ok(out)
}

/// Renders every file of the table: lib.sh first, whose sha256 each script holds.
pub fn render_all(view: &View) -> Result<Vec<(&'static str, String, bool)>> {
    let env = environment();
    let lib = library_layout_with(view, &settings(&env, view)?);
    let mut out: Vec<(&'static str, String, bool)> = FILES
        .iter()
        .map(|f| Ok((f.name, render_file(&env, f, view, &lib)?, f.executable)))
        .collect::<Result<_>>()?;
    out.push((LIB_FILE, lib.text, false));
    Ok(out)
}

/// The loop directory's library: the code its scripts share, rendered once.
pub const LIB_FILE: &str = "lib.sh";

/// The parts a script holds itself, before it loads lib.sh: the runner's reaper, whose
/// exec must come before anything else is read (lib/runner/reaper.sh).
pub const SCRIPT_OWN_PARTS: &[&str] = &[LIB_RUNNER_REAPER];

fn is_own_part(part: &str) -> bool {
    SCRIPT_OWN_PARTS.iter().any(|p| std::ptr::eq(*p, part))
}

/// The lines that end a script's last part and run it: a script's entry, which the script
/// holds itself (lib.sh only defines).
const ENTRIES: &[&str] = &[
    "\nmain \"$@\" 2>/dev/null || true\nexit\n",
    "\nmain \"$@\"\nexit\n",
];

/// `part` split into what it defines and its entry (see [`ENTRIES`]; "" when it has none).
/// The runner's reaper part ends with its own call, which stays with it (it is a part the
/// script holds itself).
pub fn split_entry(part: &str) -> (&str, &str) {
    for entry in ENTRIES {
        if let Some(defs) = part.strip_suffix(entry) {
            return (&part[..defs.len() + 1], &entry[1..]);
        }
    }
    (part, "")
}

/// The name of a registered part by its text.
fn part_name(part: &str) -> &'static str {
    STATIC_PARTS
        .iter()
        .find(|(_, t)| std::ptr::eq(*t, part))
        .map(|(n, _)| *n)
        .expect("every part of FILES is in STATIC_PARTS")
}

/// `part` as lib.sh holds it: its perl programs placed, its entry left out, then its
/// comments, blank lines and indentation taken out ([`crate::bashstrip::strip`]).
pub fn library_part(part: &str) -> String {
    crate::bashstrip::strip(split_entry(&place_perl_stripped(part)).0)
}

/// The parts lib.sh holds for the loop `view` describes, each once, in an order every
/// script's own order agrees with, each with the scripts that load it.
pub fn library_parts(view: &View) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut union: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    // The runner first: its order is the longest; the others' parts go in after the part
    // before them in their own order.
    let mut scripts: Vec<&LoopFile> = FILES.iter().filter(|f| !f.parts.is_empty()).collect();
    scripts.sort_by_key(|f| f.name != "run-loop.sh");
    for f in scripts {
        let mut at = 0;
        for part in f.parts_for(view) {
            if is_own_part(part) {
                continue;
            }
            match union.iter().position(|(p, _)| std::ptr::eq(*p, part)) {
                Some(i) => {
                    union[i].1.push(f.name);
                    at = i + 1;
                }
                None => {
                    union.insert(at, (part, vec![f.name]));
                    at += 1;
                }
            }
        }
    }
    for (_, users) in &mut union {
        users.sort_by_key(|u| FILES.iter().position(|f| f.name == *u));
    }
    // Grouped by the scripts that use them, in LIBRARY_GROUPS' order (each group keeps the
    // order above, the runner's): each script's sections then lie in few ranges, and the
    // checks' near the start, so that a script reads, slices and parses little beyond its own.
    union.sort_by_key(|(part, users)| {
        LIBRARY_GROUPS
            .iter()
            .position(|g| g.contains(&users.as_slice()))
            .unwrap_or_else(|| {
                panic!(
                    "{} is used by {users:?}, a set of scripts LIBRARY_GROUPS does not place",
                    part_name(part)
                )
            })
    });
    union
}

/// The order of lib.sh's sections by the scripts that use them (as FILES lists them): the
/// shared helpers, the checks' parts (verify.sh's and holdout.sh's, run most often), the
/// notifier's, the runner's in its own order (with those it shares with the recovery: some
/// define at load what an earlier part of the runner gave them, as the engine's reader of
/// held files), the recovery's own.
const LIBRARY_GROUPS: &[&[&[&str]]] = &[
    &[&[
        "verify.sh",
        "holdout.sh",
        "run-loop.sh",
        "recover.sh",
        "notify.sh",
    ]],
    &[&["verify.sh", "holdout.sh", "run-loop.sh", "notify.sh"]],
    &[&["verify.sh", "holdout.sh"]],
    &[&["holdout.sh"]],
    &[&["notify.sh"]],
    &[&["run-loop.sh"], &["run-loop.sh", "recover.sh"]],
    &[&["recover.sh"]],
];

/// lib.sh as rendered, and where each of its sections lies in its bytes.
pub struct Library {
    pub text: String,
    /// Each section (the prelude, then each part): the scripts that load it, its first byte
    /// and its length.
    sections: Vec<(Vec<&'static str>, usize, usize)>,
}

impl Library {
    /// How many bytes of lib.sh the script `name` reads: up to the end of its last section
    /// (what follows is other scripts' only).
    pub fn bytes(&self, name: &str) -> usize {
        self.sections
            .iter()
            .filter(|(users, _, _)| users.contains(&name))
            .map(|(_, start, len)| start + len)
            .max()
            .unwrap_or(0)
    }

    /// The sha256 of lib.sh: every script's pin of the file.
    pub fn sha256(&self) -> String {
        crate::fsx::sha256_hex(self.text.as_bytes())
    }

    /// The sha256 of the bytes the script `name` reads ([`Library::bytes`]): its pin of what
    /// it evaluates.
    pub fn read_sha256(&self, name: &str) -> String {
        crate::fsx::sha256_hex(&self.text.as_bytes()[..self.bytes(name)])
    }

    /// The byte ranges of lib.sh the script `name` evaluates, in order, as `START:LENGTH`
    /// words (adjacent sections as one range): its prelude and its parts, nothing else.
    pub fn ranges(&self, name: &str) -> String {
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for (users, start, len) in &self.sections {
            if !users.contains(&name) {
                continue;
            }
            match ranges.last_mut() {
                Some((s, l)) if *s + *l == *start => *l += len,
                _ => ranges.push((*start, *len)),
            }
        }
        ranges
            .iter()
            .map(|(s, l)| format!("{s}:{l}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// lib.sh: its header, the contract's prelude, then every part of [`library_parts`] under a
/// line naming it, each part once. A script evaluates only its own sections (byte ranges it
/// holds, [`Library::ranges`]), so each defines what it held before and parses no more.
pub fn library(view: &View) -> String {
    library_layout(view).text
}

/// The scripts that run the loop's settings (`orbit_settings`, rendered from
/// settings.sh.j2): lib.sh holds them once, in a section of their own.
pub const SETTINGS_USERS: &[&str] = &["run-loop.sh", "recover.sh", "notify.sh"];

/// The loop's settings as lib.sh holds them: settings.sh.j2 rendered for `view`.
pub fn settings(env: &Environment<'_>, view: &View) -> Result<String> {
    env.get_template("settings.sh.j2")
        .unwrap_or_else(|e| panic!("template settings.sh.j2 missing: {e}"))
        .render(Value::from(minijinja::value::Serde(view)))
        .map_err(|e| Error::Usage(format!("cannot render the loop's settings: {e}")))
}

/// [`library`] with where each section lies.
pub fn library_layout(view: &View) -> Library {
    let text = settings(&environment(), view)
        .unwrap_or_else(|e| panic!("the settings of a view orbit made do not render: {e}"));
    library_layout_with(view, &text)
}

/// [`library_layout`] with the loop's settings already rendered (`settings`).
pub fn library_layout_with(view: &View, settings: &str) -> Library {
    let scripts: Vec<&'static str> = FILES
        .iter()
        .filter(|f| !f.parts.is_empty())
        .map(|f| f.name)
        .collect();
    let mut out = format!(
        "# lib.sh — the code this loop's scripts share (verify.sh, holdout.sh, run-loop.sh,\n\
         # recover.sh, notify.sh), rendered once by orbit {v}; generated, never edited. Each script\n\
         # reads it once, checks its sha256 against the pin the script holds and only then runs\n\
         # its own sections of those bytes (the byte ranges it holds): a change stops the loop\n\
         # (script_tamper), and verify.sh and holdout.sh fail.\n\
         # Comments, blank lines and indentation are taken out; the commented source is orbit's\n\
         # templates/lib (at orbit {v}), each part named below by its path there, and\n\
         # `orbit reference contract` the contract's tables.\n\
         # shellcheck shell=bash disable=SC2034,SC2153,SC2317\n",
        v = view.orbit_version
    );
    // Each section is its line naming it and its text: adjacent sections a script uses are
    // one range of it.
    let mut sections = Vec::new();
    let prelude = format!(
        "# ---- the contract prelude\n{}",
        crate::bashstrip::strip(crate::contract::bash::prelude())
    );
    sections.push((scripts.clone(), out.len(), prelude.len()));
    out.push_str(&prelude);
    // The settings once, for the scripts that run them, after the checks' sections (which
    // verify.sh and holdout.sh read first and alone).
    let mut settings = Some(format!(
        "# ---- the loop's settings (loop.toml)\n{}",
        crate::bashstrip::strip(settings)
    ));
    if let Some(text) = settings.as_mut()
        && !text.ends_with('\n')
    {
        text.push('\n');
    }
    for (part, users) in library_parts(view) {
        if !users
            .iter()
            .any(|u| *u == "verify.sh" || *u == "holdout.sh")
            && let Some(text) = settings.take()
        {
            sections.push((SETTINGS_USERS.to_vec(), out.len(), text.len()));
            out.push_str(&text);
        }
        let mut text = format!("# ---- {}\n{}", part_name(part), library_part(part));
        if !text.ends_with('\n') {
            text.push('\n');
        }
        sections.push((users, out.len(), text.len()));
        out.push_str(&text);
    }
    // Each section ends with exactly one newline: a script's bytes and its ranges, joined,
    // are whole lines of bash.
    for (_, start, len) in &sections {
        let end = &out[..start + len];
        assert!(end.ends_with('\n') && !end.ends_with("\n\n"));
    }
    Library {
        text: out,
        sections,
    }
}

/// The loader a script holds (see templates/loader.sh): lib.sh's sha256 checked, then the
/// bytes of `lib` the script uses ([`Library::bytes`]) read once (bash's read), their
/// sha256 checked, and the script's sections of those bytes ([`Library::ranges`])
/// evaluated; what the script does when they are not the library orbit rendered.
pub fn loader(script: &str, lib: &Library) -> String {
    let refused = match script {
        "run-loop.sh" => LOADER_REFUSED_RUNNER
            .replace(
                "@EXIT@",
                &crate::contract::ExitCode::Integrity.code().to_string(),
            )
            .replace(
                "@STOP@",
                crate::contract::Verdict::at_rest(
                    crate::contract::Status::Aborted,
                    crate::contract::StopReason::ScriptTamper,
                )
                .as_str(),
            )
            .replace("@STATUS@", crate::contract::Status::Aborted.as_str())
            .replace(
                "@REASON@",
                crate::contract::StopReason::ScriptTamper.as_str(),
            )
            .replace("@FOOTER@", crate::contract::Status::Continue.as_str()),
        "verify.sh" | "holdout.sh" => LOADER_REFUSED_CHECKS.to_string(),
        _ => LOADER_REFUSED_OTHER.to_string(),
    };
    LOADER
        .replace("@SHA256@", &lib.sha256())
        .replace("@READ_SHA256@", &lib.read_sha256(script))
        .replace("@BYTES@", &lib.bytes(script).to_string())
        .replace("@RANGES@", &lib.ranges(script))
        .replace("@REFUSED@\n", &refused)
}

/// The loader every script ends with (templates/loader.sh), and what each does on a
/// library that is not the one orbit rendered (templates/loader/*.sh).
const LOADER: &str = include_str!("../templates/loader.sh");
const LOADER_REFUSED_RUNNER: &str = include_str!("../templates/loader/runner.sh");
const LOADER_REFUSED_CHECKS: &str = include_str!("../templates/loader/checks.sh");
const LOADER_REFUSED_OTHER: &str = include_str!("../templates/loader/other.sh");

/// The files of an existing loop rendered again from its settings and its goal.md (which
/// is the user's and is not among them): what `orbit init --force` and
/// `orbit recover --migrate` write. `rel` is the loop directory relative to the repository.
pub fn rerender_loop(
    cfg: &LoopConfig,
    dir: &std::path::Path,
    rel: &str,
) -> Result<Vec<(&'static str, String, bool)>> {
    let goal_text = std::fs::read_to_string(dir.join("goal.md")).unwrap_or_else(|_| "goal".into());
    let goal = GoalText::new(goal_text)
        .unwrap_or_else(|_| GoalText::new("goal".into()).expect("literal goal"));
    let view = View::new(cfg, &goal, rel);
    Ok(render_all(&view)?
        .into_iter()
        .filter(|(name, _, _)| *name != "goal.md")
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_is_registered_and_used() {
        let env = environment();
        for (name, _) in TEMPLATES {
            assert!(env.get_template(name).is_ok());
            let used = FILES.iter().any(|f| f.template == *name) || *name == "settings.sh.j2";
            // settings.sh.j2 is lib.sh's (library_layout), never a script's own.
            assert!(used, "{name} is registered but no file renders it");
        }
    }

    /// A view of every shape of loop whose scripts hold different parts: each engine, with
    /// and without the fan-out (the fan-out's with holdout checks and setup commands), with
    /// and without the sandbox.
    fn every_shape() -> Vec<View> {
        let goal = GoalText::new("goal".into()).unwrap();
        let mut views = Vec::new();
        for engine in Engine::ALL {
            for candidates in [1, 3] {
                for sandbox in [Sandbox::None, Sandbox::Bwrap, Sandbox::Auto] {
                    for sandbox_network in [SandboxNetwork::Allowlist, SandboxNetwork::Open] {
                        let cfg = LoopConfig {
                            engine: *engine,
                            candidates,
                            sandbox,
                            sandbox_network,
                            holdout: if candidates > 1 {
                                vec!["true".into()]
                            } else {
                                Vec::new()
                            },
                            setup: if candidates > 1 {
                                vec!["true".into()]
                            } else {
                                Vec::new()
                            },
                            ..LoopConfig::default()
                        };
                        views.push(View::new(&cfg, &goal, ".orbit/loop"));
                    }
                }
            }
        }
        views
    }

    #[test]
    fn every_static_part_is_registered_and_used_by_some_loop() {
        let lib = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
        let shapes = every_shape();
        let used: Vec<&str> = FILES
            .iter()
            .flat_map(|f| shapes.iter().flat_map(|v| f.parts_for(v)))
            .collect();
        let mut files = 0;
        for entry in walkdir::WalkDir::new(lib.join("lib")) {
            let entry = entry.unwrap();
            if entry.path().extension().is_none_or(|x| x != "sh") {
                continue;
            }
            files += 1;
            let rel = entry.path().strip_prefix(&lib).unwrap().to_string_lossy();
            let registered = STATIC_PARTS.iter().find(|(name, _)| *name == rel);
            let (_, text) = registered.unwrap_or_else(|| panic!("{rel} is not in STATIC_PARTS"));
            assert!(
                used.contains(text),
                "{rel} is registered but no loop's script includes it"
            );
        }
        assert_eq!(files, STATIC_PARTS.len(), "a registered part has no file");
    }

    #[test]
    fn every_perl_program_is_registered_and_placed_by_some_part() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/lib/perl");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let mut registered: Vec<String> =
            PERL_PROGRAMS.iter().map(|(n, _)| n.to_string()).collect();
        registered.sort();
        assert_eq!(files, registered, "templates/lib/perl/ and PERL_PROGRAMS");
        for (name, text) in PERL_PROGRAMS {
            let marker = format!("{PERL_MARKER}{name}@");
            let holders: Vec<&str> = STATIC_PARTS
                .iter()
                .filter(|(_, part)| part.contains(&marker))
                .map(|(n, _)| *n)
                .collect();
            if PERL_RUN_BY_ORBIT.contains(name) {
                assert!(
                    holders.is_empty(),
                    "{name} is run by orbit, yet placed by {holders:?}"
                );
                continue;
            }
            assert!(!holders.is_empty(), "{name} is placed by no part");
            for holder in holders {
                let (_, part) = STATIC_PARTS.iter().find(|(n, _)| *n == holder).unwrap();
                let placed = place_perl(part);
                assert!(!placed.contains(PERL_MARKER), "{holder}");
                // Every line of the program is in the part as placed.
                for line in text.lines() {
                    assert!(placed.contains(line), "{name} in {holder}: {line}");
                }
            }
        }
    }

    #[test]
    fn a_perl_program_stripped_keeps_its_code_lines_in_order() {
        assert_eq!(
            strip_perl(
                "#!/usr/bin/perl\nuse strict;\n\n  # why\n  my $x = 1; # kept\n\tprint $x;\n"
            ),
            "#!/usr/bin/perl\nuse strict;\nmy $x = 1; # kept\nprint $x;\n"
        );
        // What stripping relies on: no program holds a heredoc or POD.
        for (name, text) in PERL_PROGRAMS {
            assert!(
                !text.contains("<<'") && !text.contains("<<\"") && !text.contains("<<EOF"),
                "{name}"
            );
            assert!(!text.lines().any(|l| l.starts_with('=')), "{name}");
        }
    }

    #[test]
    fn a_part_without_perl_is_placed_as_it_is() {
        assert!(matches!(
            place_perl(LIB_STATE),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_program_is_placed_with_its_markers_indentation_and_without_its_last_newline() {
        let programs = [("p.pl", "use strict;\n\nprint 1;\n")];
        assert_eq!(
            place_perl_from("A='\n@perl:p.pl@\n'\n", &programs),
            "A='\nuse strict;\n\nprint 1;\n'\n"
        );
        assert_eq!(
            place_perl_from("  exec perl -e '\n    @perl:p.pl@' x\n", &programs),
            "  exec perl -e '\n    use strict;\n\n    print 1;' x\n"
        );
    }

    #[test]
    #[should_panic(expected = "templates/lib/perl/q.pl holds a single quote")]
    fn a_program_with_a_single_quote_is_refused() {
        let programs = [("q.pl", "print 'x';\n")];
        let _ = place_perl_from("A='@perl:q.pl@'\n", &programs);
    }

    #[test]
    #[should_panic(expected = "names the perl program nope.pl, which is not in PERL_PROGRAMS")]
    fn a_program_that_is_not_registered_is_refused() {
        let _ = place_perl("A='@perl:nope.pl@'\n");
    }

    #[test]
    fn a_loop_holds_its_engines_part_and_the_fanout_and_sandbox_only_when_it_uses_them() {
        let name = |text: &str| {
            STATIC_PARTS
                .iter()
                .find(|(_, t)| *t == text)
                .map(|(n, _)| *n)
                .unwrap()
        };
        let runner = FILES.iter().find(|f| f.name == "run-loop.sh").unwrap();
        for view in every_shape() {
            let parts: Vec<&str> = runner.parts_for(&view).into_iter().map(name).collect();
            let engines: Vec<&&str> = parts
                .iter()
                .filter(|p| p.starts_with("lib/engines/"))
                .collect();
            let own = format!("lib/engines/{}.sh", view.engine);
            assert_eq!(engines, [&own.as_str()], "{parts:?}");
            let fans_out = view.candidates > 1;
            assert_eq!(parts.contains(&"lib/fanout.sh"), fans_out, "{parts:?}");
            assert_eq!(parts.contains(&"lib/no-fanout.sh"), !fans_out, "{parts:?}");
            let sandboxed = view.sandbox != Sandbox::None;
            assert_eq!(parts.contains(&"lib/sandbox.sh"), sandboxed, "{parts:?}");
            assert_eq!(
                parts.contains(&"lib/no-sandbox.sh"),
                !sandboxed,
                "{parts:?}"
            );
            let fenced = sandboxed && view.sandbox_network == SandboxNetwork::Allowlist;
            assert_eq!(parts.contains(&"lib/sandbox-net.sh"), fenced, "{parts:?}");
            assert_eq!(
                parts.contains(&"lib/no-sandbox-net.sh"),
                !fenced,
                "{parts:?}"
            );
            // The other scripts hold none of these.
            for f in FILES.iter().filter(|f| f.name != "run-loop.sh") {
                for p in f.parts_for(&view).into_iter().map(name) {
                    assert!(
                        !p.starts_with("lib/engines/")
                            && !p.contains("fanout")
                            && !p.contains("sandbox"),
                        "{}: {p}",
                        f.name
                    );
                }
            }
        }
    }

    /// The functions a bash part defines (`name() {` at the start of a line).
    fn functions(text: &str) -> std::collections::BTreeSet<&str> {
        text.lines()
            .filter_map(|l| l.split_once("() {").map(|(name, _)| name))
            .filter(|n| {
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit())
            })
            .collect()
    }

    #[test]
    fn every_engine_part_defines_the_same_functions_and_helpers_of_its_own() {
        let interface: std::collections::BTreeSet<&str> = functions(engine_part(Engine::Custom))
            .into_iter()
            .filter(|f| !f.starts_with("engine_custom_"))
            .collect();
        assert!(interface.len() >= 10, "{interface:?}");
        let shared = functions(LIB_ENGINE);
        for engine in Engine::ALL {
            let defined = functions(engine_part(*engine));
            // An engine's own helpers carry its name after the part's prefix.
            let own = format!("engine_{engine}_");
            let public: std::collections::BTreeSet<&str> = defined
                .iter()
                .copied()
                .filter(|f| f.starts_with("engine_") && !f.starts_with(&own))
                .collect();
            assert_eq!(public, interface, "lib/engines/{engine}.sh");
            for f in &defined {
                assert!(
                    f.starts_with("engine_"),
                    "lib/engines/{engine}.sh: {f} is neither an engine_ function nor one of its own ({own})"
                );
                assert!(
                    !shared.contains(f),
                    "{f} is in lib/engine.sh and lib/engines/{engine}.sh"
                );
            }
        }
    }

    #[test]
    fn a_stand_in_defines_only_what_its_part_defines() {
        for (part, stand_in) in [
            (LIB_FANOUT, LIB_NO_FANOUT),
            (LIB_SANDBOX, LIB_NO_SANDBOX),
            (LIB_SANDBOX_NET, LIB_NO_SANDBOX_NET),
        ] {
            let all = functions(part);
            let some = functions(stand_in);
            assert!(!some.is_empty());
            assert!(some.is_subset(&all), "{some:?} not in {all:?}");
        }
    }

    #[test]
    fn undefined_values_fail_instead_of_rendering_empty() {
        let mut env = environment();
        env.add_template("t.sh.j2", "X={{ nope }}").unwrap();
        let err = env
            .get_template("t.sh.j2")
            .unwrap()
            .render(minijinja::context! {})
            .unwrap_err();
        assert!(err.to_string().contains("undefined"), "{err}");
    }

    #[test]
    fn shell_templates_quote_and_refuse_lists() {
        let mut env = environment();
        env.add_template("a.sh.j2", "X={{ v }}").unwrap();
        env.add_template("b.sh.j2", "X={{ l }}").unwrap();
        let out = env
            .get_template("a.sh.j2")
            .unwrap()
            .render(minijinja::context! { v => "$(touch x)" })
            .unwrap();
        assert_eq!(out, "X=$'$(touch x)'");
        assert!(
            env.get_template("b.sh.j2")
                .unwrap()
                .render(minijinja::context! { l => vec!["a"] })
                .is_err()
        );
    }

    #[test]
    fn notes_are_the_tables_words_for_the_loops_identity_only() {
        let mut env = environment();
        env.add_template("n.sh.j2", "{{ k|note }}").unwrap();
        let note = |k: &str| {
            env.get_template("n.sh.j2")
                .unwrap()
                .render(minijinja::context! { k => k })
        };
        assert_eq!(
            note("candidates").unwrap(),
            "  # How many candidates each iteration fans out to (1: no fan-out), the loop's identity."
        );
        assert!(
            note("max-iterations").is_err(),
            "a setting of the run has none"
        );
        assert!(note("$(touch x)").is_err());
    }

    #[test]
    fn code_spans_hold_backticks() {
        assert_eq!(code_span("cargo test"), "`cargo test`");
        assert_eq!(code_span("echo `x`"), "`` echo `x` ``");
    }
}
