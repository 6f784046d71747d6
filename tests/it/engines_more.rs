//! Conformance of the engines added after the first three (qwen-code 0.24.4), with the
//! real CLIs against a loopback mock of an OpenAI-compatible chat-completions API (the
//! helpers are tests/it/engines.rs's). A CLI that is not installed skips with a notice, and
//! fails where ORBIT_REQUIRE_ENGINES=1 (CI installs them under /opt/orbit-engines).

use crate::engines::*;
use crate::support::*;

/// One turn of the scripted model: a call of the tool `name` with `args` (JSON).
#[derive(Clone)]
pub(crate) struct Call {
    name: &'static str,
    args: serde_json::Value,
}

pub(crate) fn call(name: &'static str, args: serde_json::Value) -> Call {
    Call { name, args }
}

/// OpenAI chat completions: the scripted tool calls in order (the n-th once the request
/// carries n tool results), then the answer "All done."; 1000 prompt and 200 completion
/// tokens a call. Streamed (SSE, the usage in a last chunk) when the request asks.
pub(crate) fn chat_answer(
    calls: Vec<Call>,
) -> impl Fn(&str, &serde_json::Value) -> Resp + Send + Sync + 'static {
    move |path, req| {
        if !path.ends_with("/chat/completions") {
            return json(404, serde_json::json!({}));
        }
        let done = req["messages"]
            .as_array()
            .map_or(0, |ms| ms.iter().filter(|m| m["role"] == "tool").count());
        let has_tools = req["tools"].as_array().is_some_and(|t| !t.is_empty());
        let (message, finish) = match calls.get(done) {
            Some(c) if has_tools => (
                serde_json::json!({"role":"assistant","content":null,"tool_calls":[{"index":0,
                    "id":format!("call_{done}"),"type":"function",
                    "function":{"name":c.name,"arguments":c.args.to_string()}}]}),
                "tool_calls",
            ),
            _ => (
                serde_json::json!({"role":"assistant","content":"All done."}),
                "stop",
            ),
        };
        let usage =
            serde_json::json!({"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200});
        let model = req["model"].clone();
        if req["stream"] != true {
            return json(
                200,
                serde_json::json!({"id":"c1","object":"chat.completion","created":1,"model":model,
                    "choices":[{"index":0,"message":message,"finish_reason":finish}],"usage":usage}),
            );
        }
        let chunks = [
            serde_json::json!({"id":"c1","object":"chat.completion.chunk","created":1,"model":model,
                "choices":[{"index":0,"delta":message,"finish_reason":null}]}),
            serde_json::json!({"id":"c1","object":"chat.completion.chunk","created":1,"model":model,
                "choices":[{"index":0,"delta":{},"finish_reason":finish}]}),
            serde_json::json!({"id":"c1","object":"chat.completion.chunk","created":1,"model":model,
                "choices":[],"usage":usage}),
        ];
        let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        body.push_str("data: [DONE]\n\n");
        Resp {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body,
        }
    }
}

/// The provider refusing the key, as OpenAI words it.
pub(crate) fn openai_refused() -> Resp {
    json(
        401,
        serde_json::json!({"error":{"message":"Incorrect API key provided: fake.",
            "type":"invalid_request_error","code":"invalid_api_key"}}),
    )
}

// ---- qwen

/// The environment that points qwen at the mock: an OpenAI-compatible provider, chosen by
/// its three variables (qwen selects no provider without all three).
fn qwen_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_API_KEY", "fake".into()),
        ("OPENAI_BASE_URL", format!("{url}/v1")),
        ("OPENAI_MODEL", "qwen3-coder-plus".into()),
    ]
}

fn run_with(l: &EngineLoop, env: &[(&'static str, String)]) -> std::process::Output {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    l.run(&env)
}

#[test]
fn qwen_edits_runs_the_checks_through_its_shell_tool_and_its_tokens_are_priced() {
    let Some(bin) = engine_bin("qwen") else {
        return;
    };
    let l = engine_loop("qwen", &bin, &[]);
    let ws = l.repo.ws();
    let mock = Mock::start(chat_answer(vec![
        call(
            "write_file",
            serde_json::json!({"file_path":ws.join("done.txt"),"content":"done\n"}),
        ),
        call(
            "run_shell_command",
            serde_json::json!({"command":"bash .orbit-agent/verify.sh","description":"checks"}),
        ),
        call(
            "write_file",
            serde_json::json!({"file_path":ws.join(".orbit-agent/done.md"),
                "content":"done.txt exists: verify.sh passed\n"}),
        ),
    ]));
    let out = run_with(&l, &qwen_env(&mock.url));
    assert_code(&out, 0, "the agent wrote done.txt: DONE");
    assert_eq!(l.state("LAST_STATUS"), "DONE");
    // The CLI ran the loop's checks (passing now) and sent their output back.
    let bodies = mock.bodies();
    assert!(bodies.contains("\"role\":\"tool\""), "{bodies}");
    assert!(
        bodies.contains("Exit Code: 0"),
        "verify.sh ran and passed: {bodies}"
    );
    // Four calls of 1000 prompt and 200 completion tokens of qwen3-coder-plus (1/0.2/5
    // USD per million): 4 x 2000 micro-USD.
    let ledger = l.ledger();
    assert!(ledger.contains("\t8000\testimated"), "{ledger}");
    assert!(
        l.progress().contains("- agent said: All done."),
        "{}",
        l.progress()
    );
    let events = std::fs::read_to_string(l.dir.join("events.jsonl")).unwrap();
    assert!(events.contains("\"engine_version\":\"0.24.4\""), "{events}");
}

#[test]
fn qwen_declines_a_command_outside_the_loops_checks() {
    let Some(bin) = engine_bin("qwen") else {
        return;
    };
    let mock = Mock::start(chat_answer(vec![call(
        "run_shell_command",
        serde_json::json!({"command":"bash .orbit-agent/verify.sh && touch CANARY"}),
    )]));
    let l = engine_loop("qwen", &bin, &[]);
    let out = run_with(&l, &qwen_env(&mock.url));
    assert_code(&out, 10, "one tick, the check still failing");
    assert!(!l.repo.ws().join("CANARY").exists(), "the fence held");
    let bodies = mock.bodies();
    assert!(bodies.contains("permission was declined"), "{bodies}");
}

#[test]
fn qwen_refused_key_and_no_provider_block_with_the_fix() {
    let Some(bin) = engine_bin("qwen") else {
        return;
    };
    let mock = Mock::start(|_, _| openai_refused());
    let l = engine_loop("qwen", &bin, &[]);
    let out = run_with(&l, &qwen_env(&mock.url));
    assert_code(&out, 14, "BLOCKED");
    assert_eq!(l.state("LAST_STATUS"), "BLOCKED");
    assert_eq!(l.state("STOP_REASON"), "tool_failure");
    let p = l.progress();
    assert!(
        p.contains("Incorrect API key provided"),
        "the CLI's words: {p}"
    );
    assert!(
        p.contains("set OPENAI_API_KEY, OPENAI_BASE_URL"),
        "the fix: {p}"
    );
    assert!(p.contains("attempt 1 of"), "not retried: {p}");

    // A key but no provider chosen (no base URL, no model): qwen's own refusal.
    let l = engine_loop("qwen", &bin, &[]);
    let out = l.run(&[("OPENAI_API_KEY", "fake")]);
    assert_code(&out, 14, "BLOCKED");
    assert_eq!(l.state("STOP_REASON"), "tool_failure");
    let p = l.progress();
    assert!(p.contains("No auth type is selected"), "{p}");
    assert!(p.contains("OPENAI_MODEL"), "the fix: {p}");
}

#[test]
fn qwen_quota_that_names_its_reset_pauses_until_then() {
    let Some(bin) = engine_bin("qwen") else {
        return;
    };
    // A quota whose message names its reset: qwen gives up at once (its own rule:
    // "quota" with "exceeded" and "will reset") instead of retrying for minutes.
    let mock = Mock::start(|_, _| {
        json(
            429,
            serde_json::json!({"error":{"message":
                "You exceeded your current quota: the quota will reset after 3h20m.",
                "type":"insufficient_quota","code":"insufficient_quota"}}),
        )
    });
    let l = engine_loop("qwen", &bin, &[]);
    let before = now();
    let out = run_with(&l, &qwen_env(&mock.url));
    let after = now();
    assert_code(&out, 13, "PAUSED");
    assert_eq!(l.state("LAST_STATUS"), "PAUSED");
    assert_eq!(l.state("STOP_REASON"), "rate_limit");
    let resume: u64 = l.state("RESUME_AT").parse().unwrap();
    let span = 3 * 3600 + 20 * 60;
    assert!(
        resume >= before + span && resume <= after + span + 1,
        "{before} {resume} {after}: {}",
        text(&out)
    );
}

#[test]
fn qwen_without_any_credential_stops_before_any_iteration() {
    let Some(bin) = engine_bin("qwen") else {
        return;
    };
    let l = engine_loop("qwen", &bin, &[]);
    let out = l.run(&[]);
    assert_code(&out, 2, "preflight");
    let t = text(&out);
    assert!(t.contains("qwen: no credentials"), "{t}");
    assert!(t.contains("OPENAI_API_KEY"), "the fix names the key: {t}");
    assert!(!l.dir.join("iterations/000001").exists(), "nothing ran");
}
