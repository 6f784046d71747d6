//! The sandbox's network allowlist with the real engine CLIs, under real bubblewrap: each CLI
//! completes a loop against the loopback mock of its provider's API, reached through the
//! runner's proxy (the mock's address allowed as the engine's base URL), while a second
//! loopback server, not allowed, is never reached: neither by the agent, which writes a
//! script that reaches for it (leak.sh) through the CLI's own file tool and runs it through
//! the loop's checks with the CLI's own shell tool, nor by the runner's checks, which run
//! the agent's script. A canary on that server counts every request; the refusal is in the
//! iteration's record and the report.

use crate::engines::*;
use crate::engines_more::*;
use crate::net::{CLIENT, Server};
use crate::support::*;

/// The loop's second check: it runs the agent's leak.sh when there is one, and always
/// passes (the loop's outcome is decided by `test -f done.txt`). On the untouched tree (the
/// red gate) there is none, so no check reaches for anything before the agent runs.
const LEAK_CHECK: &str = "if [ -f leak.sh ]; then bash leak.sh; fi; true";

/// The agent's leak.sh: prints the proxy it was given, asks the canary for a page through
/// the proxy (`fetch` honours `$http_proxy`) and straight, and prints the first line of
/// each answer.
fn leak_sh(evil: &str) -> String {
    format!(
        "{CLIENT}\n\
         echo \"leak env: ${{http_proxy:-unset}}\"\n\
         echo \"leak proxy: $(fetch {evil} /proxy 2>&1 | head -n 1 | tr -d '\\r')\"\n\
         echo \"leak direct: $(direct {evil} /direct 2>&1 | head -n 1 | tr -d '\\r')\"\n\
         exit 0\n"
    )
}

/// The claim the agent writes into .orbit-agent/done.md.
const CLAIM: &str = "done.txt exists: verify.sh passed\n";

/// A loop of `engine` under bubblewrap with the network allowlist (said in loop.toml, not
/// left to `auto`), with the leak check beside `test -f done.txt`.
fn canary_loop(engine: &str, bin: &std::path::Path, evil: &Server) -> EngineLoop {
    let l = engine_loop(engine, bin, &["--sandbox", "bwrap", "--verify", LEAK_CHECK]);
    let toml = std::fs::read_to_string(l.dir.join("loop.toml")).unwrap();
    assert!(
        toml.contains("sandbox = \"bwrap\"") && toml.contains("sandbox-network = \"allowlist\""),
        "{toml}"
    );
    assert!(
        !toml.contains(&evil.addr()),
        "the canary is not allowed: {toml}"
    );
    l
}

/// What a run of leak.sh printed: the proxy it was given, and the first line of each
/// answer.
#[derive(Debug, PartialEq)]
struct Met {
    env: &'static str,
    proxy: &'static str,
    direct: &'static str,
}

/// A run under the runner's fence with the proxy variables: the proxy refuses the canary,
/// and the sandbox has no network of its own (nothing listens on its own loopback).
const FENCED: Met = Met {
    env: "http://127.0.0.1:3128",
    proxy: "HTTP/1.1 403 Forbidden",
    direct: "leak.sh: connect: Connection refused",
};

/// What leak.sh printed after `leak WHAT: ` in `seen` (its output as text, or escaped in
/// a JSON body), the lines of its source left out.
fn leak_said(seen: &str, what: &str) -> Vec<String> {
    let tag = format!("leak {what}: ");
    seen.match_indices(&tag)
        .map(|(at, _)| &seen[at + tag.len()..])
        .filter(|rest| !rest.starts_with('$'))
        .map(|rest| rest.split(['\n', '\\', '"']).next().unwrap().to_string())
        .collect()
}

/// Every run of leak.sh in `seen` met `want`, and there was one at least.
fn assert_met(seen: &str, want: &Met, whose: &str) {
    for (what, answer) in [
        ("env", want.env),
        ("proxy", want.proxy),
        ("direct", want.direct),
    ] {
        let said = leak_said(seen, what);
        assert!(
            !said.is_empty() && said.iter().all(|s| s == answer),
            "{whose}'s leak.sh, {what}: {said:?}, not {answer:?}: {seen}"
        );
    }
    assert!(!seen.contains("hello-evil"), "{whose}: {seen}");
}

/// The shared conformance of a loop whose agent wrote leak.sh and ran the checks: DONE, the
/// mock reached through the proxy and never refused, the canary never reached, its refusal
/// in result.env, net.log (for the checks, and for the agent when its tool's commands
/// reach the proxy) and the report. `agent_saw` holds what the CLI's shell tool printed
/// (the requests it sent the mock, or its log), and `agent` what its run of leak.sh met.
fn assert_canary_held(
    l: &EngineLoop,
    out: &std::process::Output,
    mock: &Mock,
    evil: &Server,
    agent: &Met,
    agent_saw: &str,
) {
    let log =
        std::fs::read_to_string(l.dir.join("iterations/000001/agent.log")).unwrap_or_default();
    assert_code(out, 0, &format!("DONE: {log}"));
    assert_eq!(l.state("LAST_STATUS"), "DONE");
    assert!(
        text(out).contains("sandbox: network allowlist"),
        "the run was fenced: {}",
        text(out)
    );
    let bodies = mock.bodies();
    assert!(!bodies.is_empty(), "the CLI reached its mock");

    // The attack was made: leak.sh is the agent's work, committed.
    let leak = l.repo.ws_git(&["show", "HEAD:leak.sh"]);
    assert!(
        leak.contains(&format!("fetch {} /proxy", evil.addr())),
        "{leak}"
    );
    // The runner's checks ran it (after the agent, for the second pass, and in the clean
    // checkout of the commit), and met the proxy's refusal and no network of their own.
    let verify = std::fs::read_to_string(l.dir.join("iterations/000001/verify.log")).unwrap();
    assert_met(&verify, &FENCED, "the checks");
    assert!(leak_said(&verify, "proxy").len() >= 2, "{verify}");
    // The agent's own run of it, through the CLI's shell tool.
    assert_met(agent_saw, agent, "the agent");
    assert_eq!(evil.hits(), 0, "the canary was reached");

    // The record and the report. Besides the canary, only the CLI's own hosts that the
    // allowlist leaves out on purpose (telemetry, update checks, catalogues: the CLIs go on
    // without them) may be refused, and only to the agent's run; never the mock, and
    // nothing else to a check.
    let r = read_kv(&l.dir.join("iterations/000001/result.env"));
    let hosts: Vec<&str> = r["NET_REFUSED"].split(' ').collect();
    assert!(hosts.contains(&evil.addr().as_str()), "{r:?}");
    let net = std::fs::read_to_string(l.dir.join("iterations/000001/net.log")).unwrap();
    let refused = format!("refused {}", evil.addr());
    let by = |kind: &str| {
        net.lines()
            .any(|line| line.contains(&format!(" 1:{kind} ")) && line.ends_with(&refused))
    };
    assert!(by("check"), "the checks asked: {net}");
    assert_eq!(
        by("agent"),
        agent.proxy == FENCED.proxy,
        "the agent's run asked the proxy: {net}"
    );
    let mock_addr = mock.url.trim_start_matches("http://");
    assert!(!net.contains(mock_addr), "the mock is allowed: {net}");
    assert!(
        net.lines()
            .all(|line| line.ends_with(&refused) || line.contains(" 1:agent refused ")),
        "a check was refused nothing but the canary: {net}"
    );
    let dir = l.dir.display().to_string();
    let report = l.repo.orbit(&["report", &dir]);
    assert_ok(&report, "orbit report");
    let report = text(&report);
    let listed = report
        .split("## Refused by the sandbox's network\n")
        .nth(1)
        .and_then(|s| s.lines().find(|line| line.starts_with("- iteration 1: ")))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        listed
            .trim_start_matches("- iteration 1: ")
            .split(", ")
            .any(|h| h == evil.addr()),
        "{report}"
    );
}

/// The scripted turns of a CLI whose write tool is `write` (with the path and content
/// under `path_key` and `content_key`) and whose shell tool is `shell` (its command under
/// `command`): leak.sh, done.txt, the checks, the claim.
fn file_tool_script(
    l: &EngineLoop,
    evil: &Server,
    write: &'static str,
    (path_key, content_key): (&str, &str),
    shell: &'static str,
) -> Vec<Call> {
    let ws = l.repo.ws();
    let file = |rel: &str, content: &str| {
        let mut args = serde_json::Map::new();
        args.insert(path_key.into(), ws.join(rel).display().to_string().into());
        args.insert(content_key.into(), content.into());
        call(write, args.into())
    };
    vec![
        file("leak.sh", &leak_sh(&evil.addr())),
        file("done.txt", "done\n"),
        call(
            shell,
            serde_json::json!({"command":"bash .orbit-agent/verify.sh","description":"checks"}),
        ),
        file(".orbit-agent/done.md", CLAIM),
    ]
}

// ---- qwen

#[test]
fn qwen_reaches_its_mock_through_the_proxy_and_never_the_canary() {
    let Some(bin) = engine_bin("qwen") else {
        return;
    };
    let evil = Server::start("evil");
    let l = canary_loop("qwen", &bin, &evil);
    let script = file_tool_script(
        &l,
        &evil,
        "write_file",
        ("file_path", "content"),
        "run_shell_command",
    );
    let mock = Mock::start(chat_answer(script, "All done."));
    let out = run_with(&l, &qwen_env(&mock.url));
    let bodies = mock.bodies();
    assert!(bodies.contains("\"role\":\"tool\""), "{bodies}");
    assert_canary_held(&l, &out, &mock, &evil, &FENCED, &bodies);
}

// ---- copilot

#[test]
fn copilot_reaches_its_mock_through_the_proxy_and_never_the_canary() {
    let Some(bin) = engine_bin("copilot") else {
        return;
    };
    let evil = Server::start("evil");
    let l = canary_loop("copilot", &bin, &evil);
    let mut script = file_tool_script(&l, &evil, "create", ("path", "file_text"), "bash");
    // copilot's `bash` tool hands a command still running after its `initial_wait` (30 s by
    // default) to the background and answers with its shell's id, not its output: on a busy
    // machine the checks can take that long, so the call asks it to wait for the command's
    // end (bounded by the run's own timeout).
    let checks = script
        .iter_mut()
        .find(|c| c.name == "bash")
        .expect("the script runs the checks");
    checks.args["mode"] = "sync".into();
    checks.args["initial_wait"] = 600.into();
    let mock = Mock::start(chat_answer(script, "All done."));
    let out = run_with(&l, &copilot_env(&mock.url));
    let bodies = mock.bodies();
    assert!(bodies.contains("\"role\":\"tool\""), "{bodies}");
    assert_canary_held(&l, &out, &mock, &evil, &FENCED, &bodies);
}

// ---- opencode

#[test]
fn opencode_reaches_its_mock_through_the_proxy_and_never_the_canary() {
    let Some(bin) = engine_bin("opencode") else {
        return;
    };
    let evil = Server::start("evil");
    let l = canary_loop("opencode", &bin, &evil);
    let script = file_tool_script(&l, &evil, "write", ("filePath", "content"), "bash");
    let mock = Mock::start(chat_answer(script, "All done."));
    opencode_home(&l, &mock.url);
    let out = l.run(&OPENCODE_OFFLINE);
    let bodies = mock.bodies();
    assert!(bodies.contains("\"role\":\"tool\""), "{bodies}");
    assert_canary_held(&l, &out, &mock, &evil, &FENCED, &bodies);
}

// ---- claude

#[test]
fn claude_reaches_its_mock_through_the_proxy_and_never_the_canary() {
    let Some(bin) = engine_bin("claude") else {
        return;
    };
    let evil = Server::start("evil");
    let l = canary_loop("claude", &bin, &evil);
    let script = file_tool_script(&l, &evil, "Write", ("file_path", "content"), "Bash");
    let mock = Mock::start(anthropic_script(script));
    let out = l.run(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("ANTHROPIC_API_KEY", "fake"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
    ]);
    let bodies = mock.bodies();
    assert!(bodies.contains("tool_result"), "{bodies}");
    assert_canary_held(&l, &out, &mock, &evil, &FENCED, &bodies);
}

// ---- gemini

#[test]
fn gemini_reaches_its_mock_through_the_proxy_and_never_the_canary() {
    let Some(bin) = engine_bin("gemini") else {
        return;
    };
    let evil = Server::start("evil");
    let l = canary_loop("gemini", &bin, &evil);
    let script = file_tool_script(
        &l,
        &evil,
        "write_file",
        ("file_path", "content"),
        "run_shell_command",
    );
    let mock = Mock::start(gemini_script(script));
    gemini_home(&l);
    let out = l.run(&[
        ("GEMINI_API_KEY", "fake"),
        ("GOOGLE_GEMINI_BASE_URL", &mock.url),
    ]);
    let bodies = mock.bodies();
    assert!(bodies.contains("functionResponse"), "{bodies}");
    assert_canary_held(&l, &out, &mock, &evil, &FENCED, &bodies);
}

// ---- codex

#[test]
fn codex_reaches_its_mock_through_the_proxy_and_never_the_canary() {
    let Some(bin) = engine_bin("codex") else {
        return;
    };
    let evil = Server::start("evil");
    let l = canary_loop("codex", &bin, &evil);
    // codex edits through its shell tool (its workspace-write sandbox lets a command write
    // the workspace).
    let write = |rel: &str, content: &str| {
        call(
            "exec_command",
            serde_json::json!({"cmd":format!("cat > {rel} <<'ORBIT_EOF'\n{content}ORBIT_EOF")}),
        )
    };
    let script = vec![
        write("leak.sh", &leak_sh(&evil.addr())),
        write("done.txt", "done\n"),
        call(
            "exec_command",
            serde_json::json!({"cmd":"bash .orbit-agent/verify.sh"}),
        ),
        write(".orbit-agent/done.md", CLAIM),
    ];
    let mock = Mock::start(responses_script(script));
    codex_home(&l, &mock.url);
    let out = l.run(&[("OPENAI_API_KEY", "fake")]);
    let bodies = mock.bodies();
    assert!(bodies.contains("function_call_output"), "{bodies}");
    // codex passes the proxy variables to its commands, but runs them in its own sandbox
    // (workspace-write: no network), whose seccomp filter refuses an inet socket: its
    // commands reach neither the proxy nor anything else, and the proxy has no agent
    // refusal to record. The checks, run by the runner, meet the proxy's refusal.
    let sealed = Met {
        env: FENCED.env,
        proxy: "leak.sh: socket: Operation not permitted",
        direct: "leak.sh: socket: Operation not permitted",
    };
    assert_canary_held(&l, &out, &mock, &evil, &sealed, &bodies);
}

// ---- aider

#[test]
fn aider_reaches_its_mock_through_the_proxy_and_never_the_canary() {
    let Some(bin) = engine_bin("aider") else {
        return;
    };
    let evil = Server::start("evil");
    let l = canary_loop("aider", &bin, &evil);
    aider_home(&l);
    // aider's edits are search/replace blocks in its answer (an empty search creates the
    // file); its test command, the loop's checks, runs after them.
    let block = |rel: &str, content: &str| {
        format!("{rel}\n```\n<<<<<<< SEARCH\n=======\n{content}>>>>>>> REPLACE\n```\n\n")
    };
    let answer = format!(
        "I will create the files.\n\n{}{}{}All done.",
        block("leak.sh", &leak_sh(&evil.addr())),
        block("done.txt", "done\n"),
        block(".orbit-agent/done.md", CLAIM)
    );
    let mock = Mock::start(chat_answer(vec![], answer));
    let out = run_with(&l, &aider_env(&mock.url));
    let log = std::fs::read_to_string(l.dir.join("iterations/000001/agent.log")).unwrap();
    assert!(log.contains("Applied edit to leak.sh"), "{log}");
    assert_canary_held(&l, &out, &mock, &evil, &FENCED, &log);
}
