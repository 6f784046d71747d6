//! Conformance with the real engine CLIs (claude-code 2.1.197, codex 0.171.0, gemini-cli
//! 0.61.0): each CLI runs for real in a real loop, against a loopback mock of its
//! provider's API, and the loop's outcome (state, stop reason, exit code, progress.md,
//! cost.ledger) is asserted. A test whose CLI is not installed skips with a notice, and
//! fails where ORBIT_REQUIRE_ENGINES=1 (CI installs them under /opt/orbit-engines).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tempfile::TempDir;

use crate::support::*;

/// Where CI installs the engines (npm --prefix).
const ENGINES_BIN: &str = "/opt/orbit-engines/bin";

/// The engine CLI `name`, on PATH or under /opt/orbit-engines/bin; None (with a notice)
/// when missing, a panic when ORBIT_REQUIRE_ENGINES=1.
pub(crate) fn engine_bin(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain([ENGINES_BIN])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        if std::env::var("ORBIT_REQUIRE_ENGINES").as_deref() == Ok("1") {
            panic!("the {name} CLI is required (ORBIT_REQUIRE_ENGINES=1) but not installed");
        }
        eprintln!(
            "notice: the {name} CLI is not installed (npm install --global --prefix /opt/orbit-engines ...); skipping"
        );
    }
    found
}

/// One response of the mock: status, headers, body.
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

pub(crate) fn json(status: u16, body: serde_json::Value) -> Resp {
    Resp {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string(),
    }
}

pub(crate) fn sse(events: &[(Option<&str>, serde_json::Value)]) -> Resp {
    let mut body = String::new();
    for (name, data) in events {
        if let Some(n) = name {
            body.push_str(&format!("event: {n}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    Resp {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        body,
    }
}

pub(crate) type Handler = dyn Fn(&str, &serde_json::Value) -> Resp + Send + Sync;

/// A loopback HTTP server answering every POST with `handler(path, json body)`; it keeps
/// the requests it got.
pub(crate) struct Mock {
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

impl Mock {
    pub(crate) fn start(
        handler: impl Fn(&str, &serde_json::Value) -> Resp + Send + Sync + 'static,
    ) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let reqs = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let handler = handler.clone();
                let reqs = reqs.clone();
                std::thread::spawn(move || {
                    let _ = serve_one(stream, &*handler, &reqs);
                });
            }
        });
        Mock { url, requests }
    }

    pub(crate) fn bodies(&self) -> String {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|(p, b)| format!("{p} {b}\n"))
            .collect()
    }
}

fn serve_one(
    stream: TcpStream,
    handler: &Handler,
    reqs: &Mutex<Vec<(String, String)>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut len = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(len, 0);
        reader.read_exact(&mut body)?;
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    reqs.lock().unwrap().push((path.clone(), text.clone()));
    let resp = if method == "POST" {
        let value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        handler(&path, &value)
    } else {
        json(404, serde_json::json!({}))
    };
    let mut out = stream;
    let mut head = format!(
        "HTTP/1.1 {} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        resp.status,
        resp.body.len()
    );
    for (k, v) in &resp.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(resp.body.as_bytes())?;
    out.flush()
}

// ---- the providers' answers

/// One turn of a scripted model: a call of the tool `name` with `args` (JSON).
#[derive(Clone)]
pub(crate) struct Call {
    pub(crate) name: &'static str,
    pub(crate) args: serde_json::Value,
}

pub(crate) fn call(name: &'static str, args: serde_json::Value) -> Call {
    Call { name, args }
}

/// Anthropic Messages: a text answer, or (before any tool result) a Bash tool call of
/// `tool_cmd` when one is given.
fn anthropic_ok(tool_cmd: Option<&'static str>) -> impl Fn(&str, &serde_json::Value) -> Resp {
    let calls = tool_cmd.map(|cmd| {
        call(
            "Bash",
            serde_json::json!({"command":cmd,"description":"run the checks"}),
        )
    });
    anthropic_script(calls.into_iter().collect())
}

/// Anthropic Messages: the scripted tool calls in order (the n-th once the request carries
/// n tool results), then the text answer "All done.".
pub(crate) fn anthropic_script(calls: Vec<Call>) -> impl Fn(&str, &serde_json::Value) -> Resp {
    move |path, req| {
        if !path.contains("/messages") {
            return json(404, serde_json::json!({}));
        }
        let done = req["messages"].as_array().map_or(0, |ms| {
            ms.iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .count()
        });
        let msg = serde_json::json!({"id":"msg_1","type":"message","role":"assistant","model":req["model"],
            "content":[],"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":20}});
        let (block, delta, stop) = match calls.get(done) {
            Some(c) if req["tools"].is_array() => (
                serde_json::json!({"type":"tool_use","id":format!("toolu_{done}"),"name":c.name,"input":{}}),
                serde_json::json!({"type":"input_json_delta","partial_json":c.args.to_string()}),
                "tool_use",
            ),
            _ => (
                serde_json::json!({"type":"text","text":""}),
                serde_json::json!({"type":"text_delta","text":"All done."}),
                "end_turn",
            ),
        };
        sse(&[
            (
                Some("message_start"),
                serde_json::json!({"type":"message_start","message":msg}),
            ),
            (
                Some("content_block_start"),
                serde_json::json!({"type":"content_block_start","index":0,"content_block":block}),
            ),
            (
                Some("content_block_delta"),
                serde_json::json!({"type":"content_block_delta","index":0,"delta":delta}),
            ),
            (
                Some("content_block_stop"),
                serde_json::json!({"type":"content_block_stop","index":0}),
            ),
            (
                Some("message_delta"),
                serde_json::json!({"type":"message_delta","delta":{"stop_reason":stop},"usage":{"output_tokens":20}}),
            ),
            (
                Some("message_stop"),
                serde_json::json!({"type":"message_stop"}),
            ),
        ])
    }
}

fn anthropic_error(status: u16, kind: &str, message: &str, headers: Vec<(String, String)>) -> Resp {
    let mut r = json(
        status,
        serde_json::json!({"type":"error","error":{"type":kind,"message":message}}),
    );
    r.headers.extend(headers);
    r
}

/// A loop in a fresh repository for `engine`, with a check that fails until done.txt
/// exists; a HOME of its own outside /tmp (codex refuses its helpers under a temporary
/// directory).
pub(crate) struct EngineLoop {
    pub(crate) repo: Repo,
    pub(crate) home: TempDir,
    pub(crate) dir: PathBuf,
    bin_dir: PathBuf,
}

/// Where the engines' HOME goes: never under /tmp. codex runs its commands under bwrap with
/// a private /tmp, and the helper it execs (`codex-linux-sandbox`, a link it makes under
/// its home) must stay visible inside: under /tmp it is hidden and every command fails.
pub(crate) fn engine_home_parent() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if !target.starts_with("/tmp") {
        return target;
    }
    let var_tmp = PathBuf::from("/var/tmp");
    assert!(
        var_tmp.is_dir(),
        "the target directory is under /tmp and /var/tmp is missing: codex's sandbox needs its home outside /tmp"
    );
    var_tmp
}

pub(crate) fn engine_loop(engine: &str, bin: &Path, extra: &[&str]) -> EngineLoop {
    let repo = Repo::new();
    let home = tempfile::Builder::new()
        .prefix("engine-home-")
        .tempdir_in(engine_home_parent())
        .unwrap();
    let mut args = vec![
        "init",
        "test goal",
        "--engine",
        engine,
        "--verify",
        "test -f done.txt",
    ];
    args.extend_from_slice(extra);
    let out = repo.orbit(&args);
    assert_ok(&out, "orbit init");
    let dir = repo.join(".orbit/test-goal");
    EngineLoop {
        repo,
        home,
        dir,
        bin_dir: bin.parent().unwrap().to_path_buf(),
    }
}

impl EngineLoop {
    pub(crate) fn run(&self, env: &[(&str, &str)]) -> std::process::Output {
        let path = format!("{}:{}", self.bin_dir.display(), self.repo.path_env());
        let home = self.home.path().display().to_string();
        let mut all: Vec<(&str, &str)> = vec![
            ("PATH", &path),
            ("HOME", &home),
            ("TZ", "UTC"),
            // A safety net for a wedged CLI, never a measure of speed: copilot's three turns
            // and its shell tool's check run took 50 s with the machine at load 5. A test that
            // needs the agent cut short sets its own (later in the environment, so it wins).
            ("EXEC_TIMEOUT", "300s"),
            ("CONFIRM_RUNS", "0"),
        ];
        all.extend_from_slice(env);
        self.repo.run_loop(&self.dir, &["--once"], &all)
    }

    pub(crate) fn progress(&self) -> String {
        std::fs::read_to_string(self.dir.join("progress.md")).unwrap()
    }

    pub(crate) fn ledger(&self) -> String {
        std::fs::read_to_string(self.dir.join("cost.ledger")).unwrap_or_default()
    }

    pub(crate) fn state(&self, key: &str) -> String {
        state_value(&self.dir, key)
    }
}

/// What a run of an engine that answered "All done." leaves: the ledger line of its cost
/// (`\tMICROUSD\tsource`), the CLI's final message in progress.md, and its version in the
/// journal's `loop_start`.
pub(crate) fn assert_recorded(l: &EngineLoop, ledger_line: Option<&str>, version: Option<&str>) {
    if let Some(line) = ledger_line {
        let ledger = l.ledger();
        assert!(ledger.contains(line), "{ledger}");
    }
    let progress = l.progress();
    assert!(progress.contains("- agent said: All done."), "{progress}");
    if let Some(v) = version {
        let events = std::fs::read_to_string(l.dir.join("events.jsonl")).unwrap();
        let want = format!("\"engine_version\":\"{v}\"");
        assert!(events.contains(&want), "{events}");
    }
}

/// The tokens the work runs of the loop's journal say the CLI counted (summed over its
/// agent_exit events), or `None` where none of them says any.
pub(crate) fn assert_tokens(l: &EngineLoop, want: Option<(u64, u64)>) {
    let mut seen: Option<(u64, u64)> = None;
    for e in crate::support::events_named(&l.dir, "agent_exit") {
        if let (Some(i), Some(o)) = (
            e.value["tokens_in"].as_u64(),
            e.value["tokens_out"].as_u64(),
        ) {
            let (si, so) = seen.unwrap_or((0, 0));
            seen = Some((si + i, so + o));
        }
    }
    assert_eq!(seen, want, "the tokens the journal holds");
}

/// The model the journal's work runs say the CLI's session used: the one it asked the API
/// for (named in a request body the mock received).
pub(crate) fn assert_model_as_requested(l: &EngineLoop, bodies: &str) {
    let exits = crate::support::events_named(&l.dir, "agent_exit");
    let model = exits
        .iter()
        .find_map(|e| e.value["model"].as_str())
        .unwrap_or_else(|| {
            let log = std::fs::read_to_string(l.dir.join("iterations/000001/agent.log"))
                .unwrap_or_default();
            let init: Vec<&str> = log.lines().filter(|x| x.contains("\"init\"")).collect();
            panic!("no model in the journal: {exits:?}\nthe CLI's init line: {init:?}")
        });
    // claude names its context window after the model (`claude-opus-4-8[1m]`).
    let asked = model.split('[').next().unwrap_or(model);
    assert!(
        bodies.contains(&format!("\"model\":\"{asked}\"")),
        "{model} was not asked of the API: {bodies}"
    );
}

/// A claude stand-in's result line, printed as claude prints it: `input` input tokens, a
/// prompt cache read and written besides, `out` output tokens, and its cost.
pub(crate) fn claude_usage_line(input: &str, out: &str) -> String {
    format!(
        r#"printf '%s\n' "{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"All done.\",\"total_cost_usd\":0.02,\"usage\":{{\"input_tokens\":{input},\"cache_creation_input_tokens\":30,\"cache_read_input_tokens\":850,\"output_tokens\":{out}}}}}""#
    )
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

// ---- claude

#[test]
fn claude_runs_the_checks_through_its_bash_tool_and_reports_its_cost() {
    let Some(bin) = engine_bin("claude") else {
        return;
    };
    let mock = Mock::start(anthropic_ok(Some("bash .orbit-agent/verify.sh")));
    let l = engine_loop("claude", &bin, &[]);
    let out = l.run(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("ANTHROPIC_API_KEY", "fake"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
    ]);
    assert_code(&out, 10, "one tick, the check still failing");
    // The CLI ran the loop's checks and sent their output back as the tool's result.
    let bodies = mock.bodies();
    assert!(bodies.contains("tool_result"), "{bodies}");
    assert!(
        bodies.contains("[FAIL] "),
        "verify.sh's output reached the model: {bodies}"
    );
    // The mock's usage at claude's own prices: 0.003 USD over two calls, reported.
    assert_recorded(&l, Some("\t3000\treported"), Some("2.1.197 (Claude Code)"));
    // Its result line counts the mock's usage of both calls: 2 x 100 in, 2 x 20 out.
    assert_tokens(&l, Some((200, 40)));
    assert_model_as_requested(&l, &bodies);
}

#[test]
fn claude_denies_a_command_outside_the_loops_checks() {
    let Some(bin) = engine_bin("claude") else {
        return;
    };
    let mock = Mock::start(anthropic_ok(Some(
        "bash .orbit-agent/verify.sh && touch CANARY",
    )));
    let l = engine_loop("claude", &bin, &[]);
    let out = l.run(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("ANTHROPIC_API_KEY", "fake"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
    ]);
    assert_code(&out, 10, "one tick");
    assert!(!l.repo.ws().join("CANARY").exists(), "the fence held");
    // The CLI answered the call with a refusal instead of running it.
    let bodies = mock.bodies();
    assert!(bodies.contains("tool_result"), "{bodies}");
}

#[test]
fn claude_refused_credentials_block_at_once_with_the_fix() {
    let Some(bin) = engine_bin("claude") else {
        return;
    };
    let mock = Mock::start(|_, _| {
        anthropic_error(401, "authentication_error", "invalid x-api-key", vec![])
    });
    let l = engine_loop("claude", &bin, &[]);
    let out = l.run(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("ANTHROPIC_API_KEY", "fake"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
    ]);
    assert_code(&out, 14, "BLOCKED");
    assert_eq!(l.state("LAST_STATUS"), "BLOCKED");
    assert_eq!(l.state("STOP_REASON"), "tool_failure");
    let p = l.progress();
    assert!(p.contains("Invalid API key"), "the CLI's own message: {p}");
    assert!(p.contains("claude /login"), "the fix: {p}");
    assert!(p.contains("attempt 1 of"), "not retried: {p}");
}

#[test]
fn claude_without_credentials_stops_before_any_iteration() {
    let Some(bin) = engine_bin("claude") else {
        return;
    };
    let l = engine_loop("claude", &bin, &[]);
    let out = l.run(&[]);
    assert_code(&out, 2, "preflight");
    let t = text(&out);
    assert!(t.contains("not logged in"), "{t}");
    assert!(t.contains("ANTHROPIC_API_KEY"), "{t}");
    assert!(
        t.contains("env-file"),
        "no terminal: the scheduler's environment: {t}"
    );
    assert!(!l.dir.join("iterations/000001").exists(), "nothing ran");
}

#[test]
fn claude_subscription_limit_pauses_until_the_reset_it_names() {
    let Some(bin) = engine_bin("claude") else {
        return;
    };
    // A reset three hours ahead, on a minute (claude prints hours and minutes).
    let reset = (now() / 60 + 180) * 60;
    let mock = Mock::start(move |_, _| {
        anthropic_error(
            429,
            "rate_limit_error",
            "rate limited",
            vec![
                (
                    "anthropic-ratelimit-unified-status".into(),
                    "rejected".into(),
                ),
                (
                    "anthropic-ratelimit-unified-reset".into(),
                    reset.to_string(),
                ),
                (
                    "anthropic-ratelimit-unified-representative-claim".into(),
                    "five_hour".into(),
                ),
            ],
        )
    });
    let l = engine_loop("claude", &bin, &[]);
    let out = l.run(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("CLAUDE_CODE_OAUTH_TOKEN", "fake"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
    ]);
    assert_code(&out, 13, "PAUSED by a rate limit");
    assert_eq!(l.state("LAST_STATUS"), "PAUSED");
    assert_eq!(l.state("STOP_REASON"), "rate_limit");
    assert_eq!(l.state("RESUME_AT"), reset.to_string());
    assert!(
        text(&out).contains("You've hit your session limit"),
        "{}",
        text(&out)
    );
}

#[test]
fn claude_stopped_by_the_timeout_while_retrying_a_429_is_rate_limited() {
    let Some(bin) = engine_bin("claude") else {
        return;
    };
    let mock = Mock::start(|_, _| {
        anthropic_error(
            429,
            "rate_limit_error",
            "This request would exceed your rate limit.",
            vec![("retry-after".into(), "20".into())],
        )
    });
    let l = engine_loop("claude", &bin, &[]);
    let t0 = now();
    let out = l.run(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("ANTHROPIC_API_KEY", "fake"),
        // Long enough for the CLI to start and meet the 429 on a loaded machine, well short
        // of its giving up (ten retries, 20 s apart).
        ("EXEC_TIMEOUT", "30s"),
    ]);
    assert_code(&out, 13, "a rate limit, not a timeout");
    assert_eq!(l.state("STOP_REASON"), "rate_limit");
    let resume: u64 = l.state("RESUME_AT").parse().unwrap();
    // The retry delay claude announced (20 s, raised to the one-minute floor), not the
    // 15-minute default.
    assert!(
        resume >= t0 + 60 && resume <= now() + 65,
        "{resume} vs {t0}"
    );
}

// ---- gemini

/// A HOME where gemini uses an API key (its gateway auth cannot be validated headless).
pub(crate) fn gemini_home(l: &EngineLoop) {
    let g = l.home.path().join(".gemini");
    std::fs::create_dir_all(&g).unwrap();
    std::fs::write(
        g.join("settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
    )
    .unwrap();
}

fn gemini_answer(tool_cmd: Option<&'static str>) -> impl Fn(&str, &serde_json::Value) -> Resp {
    let calls = tool_cmd.map(|cmd| {
        call(
            "run_shell_command",
            serde_json::json!({"command":cmd,"description":"checks"}),
        )
    });
    gemini_script(calls.into_iter().collect())
}

/// Gemini generateContent: the scripted function calls in order (the n-th once the request
/// carries n function responses), then the text answer "All done.".
pub(crate) fn gemini_script(calls: Vec<Call>) -> impl Fn(&str, &serde_json::Value) -> Resp {
    move |path, req| {
        if !path.contains("enerateContent") {
            return json(404, serde_json::json!({}));
        }
        let done = req["contents"].as_array().map_or(0, |cs| {
            cs.iter()
                .filter_map(|c| c["parts"].as_array())
                .flatten()
                .filter(|p| p.get("functionResponse").is_some())
                .count()
        });
        // gemini's own helpers (its model router, its next-speaker check) ask for JSON of
        // a schema and retry with growing pauses until they get it.
        let gc = &req["generationConfig"];
        let schema = [&gc["responseJsonSchema"], &gc["responseSchema"]]
            .iter()
            .map(|s| s.to_string())
            .collect::<String>();
        let parts = if schema.contains("complexity_score") {
            serde_json::json!([{"text":
                r#"{"complexity_reasoning":"a single command","complexity_score":10}"#}])
        } else if schema.contains("next_speaker") {
            serde_json::json!([{"text":r#"{"reasoning":"the task is done","next_speaker":"user"}"#}])
        } else {
            match calls.get(done) {
                Some(c) if path.contains("stream") => {
                    serde_json::json!([{"functionCall":{"name":c.name,"args":c.args}}])
                }
                _ => serde_json::json!([{"text":"All done."}]),
            }
        };
        let resp = serde_json::json!({"candidates":[{"content":{"role":"model","parts":parts},
            "finishReason":"STOP","index":0}],
            "usageMetadata":{"promptTokenCount":1000,"candidatesTokenCount":200,"totalTokenCount":1200},
            "modelVersion":"gemini-2.5-pro"});
        if path.contains("alt=sse") {
            sse(&[(None, resp)])
        } else {
            json(200, resp)
        }
    }
}

#[test]
fn gemini_runs_the_checks_through_its_shell_tool_and_its_tokens_are_priced() {
    let Some(bin) = engine_bin("gemini") else {
        return;
    };
    let mock = Mock::start(gemini_answer(Some("bash .orbit-agent/verify.sh")));
    let l = engine_loop("gemini", &bin, &[]);
    gemini_home(&l);
    let out = l.run(&[
        ("GEMINI_API_KEY", "fake"),
        ("GOOGLE_GEMINI_BASE_URL", &mock.url),
    ]);
    assert_code(&out, 10, "one tick, the check still failing");
    // The CLI ran the loop's checks and sent their output back as the tool's result.
    let bodies = mock.bodies();
    assert!(bodies.contains("functionResponse"), "{bodies}");
    assert!(
        bodies.contains("[FAIL] "),
        "verify.sh's output reached the model: {bodies}"
    );
    // Three calls (the router's, the tool call, the answer) of 1000 input and 200 output
    // tokens of gemini-2.5-pro at 1.25 and 10 USD a million: 3750 + 6000 micro-USD.
    assert_recorded(&l, Some("\t9750\testimated"), Some("0.61.0"));
    assert_tokens(&l, Some((3000, 600)));
}

#[test]
fn gemini_denies_a_command_outside_the_loops_checks() {
    let Some(bin) = engine_bin("gemini") else {
        return;
    };
    let mock = Mock::start(gemini_answer(Some(
        "bash .orbit-agent/verify.sh && touch CANARY",
    )));
    let l = engine_loop("gemini", &bin, &[]);
    gemini_home(&l);
    let out = l.run(&[
        ("GEMINI_API_KEY", "fake"),
        ("GOOGLE_GEMINI_BASE_URL", &mock.url),
    ]);
    assert_code(&out, 10, "one tick");
    assert!(!l.repo.ws().join("CANARY").exists(), "the fence held");
    // The CLI answered the call with a refusal instead of running it.
    let bodies = mock.bodies();
    assert!(bodies.contains("functionResponse"), "{bodies}");
    assert!(!bodies.contains("[FAIL] "), "nothing of it ran: {bodies}");
}

#[test]
fn gemini_in_an_untrusted_folder_blocks_with_the_trust_fix() {
    let Some(bin) = engine_bin("gemini") else {
        return;
    };
    let mock = Mock::start(gemini_answer(None));
    // A loop.toml argv from before --skip-trust.
    let l = engine_loop(
        "gemini",
        &bin,
        &[
            "--exec",
            "gemini --approval-mode auto_edit --output-format json",
        ],
    );
    gemini_home(&l);
    let out = l.run(&[
        ("GEMINI_API_KEY", "fake"),
        ("GOOGLE_GEMINI_BASE_URL", &mock.url),
    ]);
    assert_code(&out, 14, "BLOCKED");
    assert_eq!(l.state("STOP_REASON"), "tool_failure");
    let p = l.progress();
    assert!(p.contains("not running in a trusted directory"), "{p}");
    assert!(p.contains("--skip-trust"), "the fix: {p}");
}

#[test]
fn gemini_refused_key_blocks_and_a_daily_quota_pauses_until_midnight_pacific() {
    let Some(bin) = engine_bin("gemini") else {
        return;
    };
    let mock = Mock::start(|_, _| {
        json(
            401,
            serde_json::json!({"error":{"code":401,
            "message":"API key not valid. Please pass a valid API key.","status":"UNAUTHENTICATED"}}),
        )
    });
    let l = engine_loop("gemini", &bin, &[]);
    gemini_home(&l);
    let out = l.run(&[
        ("GEMINI_API_KEY", "fake"),
        ("GOOGLE_GEMINI_BASE_URL", &mock.url),
    ]);
    assert_code(&out, 14, "BLOCKED");
    assert_eq!(l.state("STOP_REASON"), "tool_failure");
    let p = l.progress();
    assert!(p.contains("API key not valid"), "{p}");
    assert!(p.contains("GEMINI_API_KEY"), "{p}");

    let quota = Mock::start(|_, _| {
        json(
            429,
            serde_json::json!({"error":{"code":429,
            "message":"You exceeded your current quota, please check your plan and billing details.",
            "status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure",
            "violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}),
        )
    });
    let l = engine_loop("gemini", &bin, &[]);
    gemini_home(&l);
    let out = l.run(&[
        ("GEMINI_API_KEY", "fake"),
        ("GOOGLE_GEMINI_BASE_URL", &quota.url),
    ]);
    assert_code(&out, 13, "PAUSED");
    assert_eq!(l.state("STOP_REASON"), "rate_limit");
    let resume: u64 = l.state("RESUME_AT").parse().unwrap();
    // Midnight in Los Angeles is 07:00 or 08:00 UTC, within the next day.
    let hour = (resume % 86400) / 3600;
    assert!(
        resume.is_multiple_of(3600) && (hour == 7 || hour == 8),
        "{resume}"
    );
    assert!(resume > now() && resume <= now() + 86400 + 300, "{resume}");
    assert!(text(&out).contains("daily quota"), "{}", text(&out));
}

// ---- codex

pub(crate) fn codex_home(l: &EngineLoop, url: &str) {
    let c = l.home.path().join(".codex");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(
        c.join("config.toml"),
        format!(
            "model_provider = \"mock\"\nmodel = \"gpt-5\"\n[model_providers.mock]\nname = \"mock\"\n\
             base_url = \"{url}/v1\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n"
        ),
    )
    .unwrap();
}

fn openai_answer(tool_cmd: Option<&'static str>) -> impl Fn(&str, &serde_json::Value) -> Resp {
    let calls = tool_cmd.map(|cmd| call("exec_command", serde_json::json!({"cmd":cmd})));
    responses_script(calls.into_iter().collect())
}

/// OpenAI Responses: the scripted function calls in order (the n-th once the request
/// carries n function call outputs), then the text answer "All done.".
pub(crate) fn responses_script(calls: Vec<Call>) -> impl Fn(&str, &serde_json::Value) -> Resp {
    move |path, req| {
        if !path.contains("/responses") {
            return json(404, serde_json::json!({}));
        }
        let done = req["input"].as_array().map_or(0, |is| {
            is.iter()
                .filter(|i| i["type"] == "function_call_output")
                .count()
        });
        let item = match calls.get(done) {
            Some(c) => serde_json::json!({"type":"function_call","id":format!("fc_{done}"),
                "call_id":format!("call_{done}"),"name":c.name,"arguments":c.args.to_string()}),
            _ => serde_json::json!({"type":"message","id":"msg_1","role":"assistant",
                "content":[{"type":"output_text","text":"All done."}]}),
        };
        sse(&[
            (
                Some("response.created"),
                serde_json::json!({"type":"response.created","response":{"id":"r1"}}),
            ),
            (
                Some("response.output_item.done"),
                serde_json::json!({"type":"response.output_item.done","output_index":0,"item":item}),
            ),
            (
                Some("response.completed"),
                serde_json::json!({"type":"response.completed","response":{"id":"r1",
                "usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":0},"output_tokens":200,
                "output_tokens_details":{"reasoning_tokens":0},"total_tokens":1200}}}),
            ),
        ])
    }
}

#[test]
fn codex_runs_the_checks_and_its_tokens_are_priced() {
    let Some(bin) = engine_bin("codex") else {
        return;
    };
    let mock = Mock::start(openai_answer(Some("bash .orbit-agent/verify.sh")));
    let l = engine_loop("codex", &bin, &[]);
    codex_home(&l, &mock.url);
    let out = l.run(&[("OPENAI_API_KEY", "fake")]);
    assert_code(&out, 10, "one tick");
    let bodies = mock.bodies();
    assert!(bodies.contains("function_call_output"), "{bodies}");
    assert!(
        bodies.contains("[FAIL] "),
        "verify.sh's output reached the model: {bodies}"
    );
    // Two calls of 1000 input and 200 output tokens of gpt-5: 2 x 3250 micro-USD.
    assert_recorded(&l, Some("\t6500\testimated"), None);
    assert_tokens(&l, Some((2000, 400)));
}

#[test]
fn codex_refused_key_blocks_and_a_429_pauses() {
    let Some(bin) = engine_bin("codex") else {
        return;
    };
    let mock = Mock::start(|_, _| {
        json(
            401,
            serde_json::json!({"error":{"message":"Incorrect API key provided: fake.",
            "type":"invalid_request_error","code":"invalid_api_key"}}),
        )
    });
    let l = engine_loop("codex", &bin, &[]);
    codex_home(&l, &mock.url);
    let out = l.run(&[("OPENAI_API_KEY", "fake")]);
    assert_code(&out, 14, "BLOCKED");
    assert_eq!(l.state("STOP_REASON"), "tool_failure");
    let p = l.progress();
    assert!(p.contains("401 Unauthorized"), "{p}");
    assert!(p.contains("codex login"), "{p}");

    let limited = Mock::start(|_, _| {
        let mut r = json(
            429,
            serde_json::json!({"error":{"message":"Rate limit reached. Please try again in 20s.",
            "type":"requests","code":"rate_limit_exceeded"}}),
        );
        r.headers.push(("retry-after".into(), "20".into()));
        r
    });
    let l = engine_loop("codex", &bin, &[]);
    codex_home(&l, &limited.url);
    let out = l.run(&[("OPENAI_API_KEY", "fake")]);
    assert_code(&out, 13, "PAUSED");
    assert_eq!(l.state("STOP_REASON"), "rate_limit");
}

#[test]
fn codex_logged_out_without_a_key_stops_before_any_iteration() {
    let Some(bin) = engine_bin("codex") else {
        return;
    };
    let l = engine_loop("codex", &bin, &[]);
    let out = l.run(&[]);
    assert_code(&out, 2, "preflight");
    let t = text(&out);
    assert!(t.contains("codex login"), "{t}");
    assert!(!l.dir.join("iterations/000001").exists(), "nothing ran");
}

// ---- the wordings, the env file and the probes, with stand-ins for the CLIs
//
// The real CLIs print a subscription limit's reset only against the provider's own
// servers (claude with a subscription's headers, codex with a ChatGPT login, gemini's
// capacity errors): these stand-ins print those outputs as the CLIs do, in the CLIs'
// own formats, so that every wording's reset time is checked.

/// A stand-in for the engine CLI `name`: answers `--version` and its status probe as a
/// logged-in CLI does, and runs `body` (bash) for an agent run. The returned directory
/// must outlive the loop.
pub(crate) fn stand_in(engine: &str, body: &str) -> (TempDir, EngineLoop) {
    stand_in_with(engine, body, &[])
}

/// `stand_in` with `extra` flags for `orbit init`.
pub(crate) fn stand_in_with(engine: &str, body: &str, extra: &[&str]) -> (TempDir, EngineLoop) {
    let bin = tempfile::tempdir().unwrap();
    let path = bin.path().join(engine);
    let script = format!(
        "#!/usr/bin/env bash\ncase \"${{1:-}}\" in\n  --version) echo '9.9.9 (stand-in)'; exit 0 ;;\n  auth | login) echo '{{\"loggedIn\": true}}'; exit 0 ;;\nesac\ncat >/dev/null\n{body}\n"
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let l = engine_loop(engine, &path, extra);
    (bin, l)
}

/// `date` for the expectations: its output for ARGS, trimmed.
pub(crate) fn date(args: &[&str]) -> String {
    let out = command("date")
        .args(args)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(out.status.success(), "date {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The first epoch at or after `now` less five minutes whose UTC clock reads `secs`
/// seconds past midnight (the runner's rule: a reset just passed is still this one).
pub(crate) fn next_utc_clock(now: u64, secs: u64) -> u64 {
    let t = now / 86400 * 86400 + secs;
    if t + 300 < now { t + 86400 } else { t }
}

/// Runs a stand-in that fails with `body`'s output and returns RESUME_AT, with the time
/// just before and just after the run.
pub(crate) fn paused_until(
    engine: &str,
    body: &str,
    env: &[(&str, &str)],
) -> (u64, u64, u64, String) {
    let (_bin, l) = stand_in(engine, body);
    let before = now();
    let out = l.run(env);
    let after = now();
    assert_code(&out, 13, &format!("{engine}: PAUSED by a limit"));
    assert_eq!(l.state("STOP_REASON"), "rate_limit");
    let resume: u64 = l.state("RESUME_AT").parse().unwrap();
    (before, resume, after, text(&out))
}

#[test]
fn claude_limit_wordings_pause_until_the_time_of_day_or_the_date_they_name() {
    // "resets 6:30pm (UTC)": today's or tomorrow's 18:30 UTC.
    let (before, resume, _, out) = paused_until(
        "claude",
        r#"cat <<'JSON'
{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"result":"You've hit your limit · resets 6:30pm (UTC)"}
JSON
exit 1"#,
        &[],
    );
    assert_eq!(resume, next_utc_clock(before, 18 * 3600 + 30 * 60), "{out}");

    // "resets Dec 4, 6pm (UTC)" (a weekly limit names its date): three days ahead.
    let day = now() + 3 * 86400;
    let when = date(&["-u", "-d", &format!("@{day}"), "+%b %-d"]);
    let want: u64 = date(&[
        "-u",
        "-d",
        &format!("{} 18:00", date(&["-u", "-d", &format!("@{day}"), "+%F"])),
        "+%s",
    ])
    .parse()
    .unwrap();
    let (_, resume, _, out) = paused_until(
        "claude",
        &format!(
            r#"cat <<'JSON'
{{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"result":"You've hit your weekly limit · resets {when}, 6pm (UTC)"}}
JSON
exit 1"#
        ),
        &[],
    );
    assert_eq!(resume, want, "{when}: {out}");
}

#[test]
fn codex_and_gemini_limit_wordings_pause_for_the_duration_they_name() {
    // codex: "try again in 4 days 3 hours 20 minutes".
    let (before, resume, after, out) = paused_until(
        "codex",
        r#"echo '{"type":"thread.started","thread_id":"t"}'
echo '{"type":"turn.failed","error":{"message":"You'"'"'ve hit your usage limit. Upgrade to Pro, or try again in 4 days 3 hours 20 minutes."}}'
exit 1"#,
        &[("OPENAI_API_KEY", "fake")],
    );
    let span = 4 * 86400 + 3 * 3600 + 20 * 60;
    assert!(
        resume >= before + span && resume <= after + span + 1,
        "{before} {resume} {after}: {out}"
    );

    // codex: "try again at 6:30 PM", in the runner's zone (UTC here).
    let (before, resume, _, out) = paused_until(
        "codex",
        r#"echo '{"type":"turn.failed","error":{"message":"You'"'"'ve hit your usage limit. Try again at 6:30 PM."}}'
exit 1"#,
        &[("OPENAI_API_KEY", "fake")],
    );
    assert_eq!(resume, next_utc_clock(before, 18 * 3600 + 30 * 60), "{out}");

    // gemini: "reset after 8h44m7s", in its closing error JSON on stderr.
    let (before, resume, after, out) = paused_until(
        "gemini",
        r#"cat >&2 <<'JSON'
{
  "error": {
    "type": "Error",
    "message": "You have exhausted your capacity on this model. Your quota will reset after 8h44m7s.",
    "code": 429
  }
}
JSON
exit 1"#,
        &[("GEMINI_API_KEY", "fake")],
    );
    let span = 8 * 3600 + 44 * 60 + 7;
    assert!(
        resume >= before + span && resume <= after + span + 1,
        "{before} {resume} {after}: {out}"
    );
}

#[test]
fn gemini_without_any_credential_stops_before_any_iteration() {
    let (_bin, l) = stand_in("gemini", "echo never; exit 0");
    let out = l.run(&[]);
    assert_code(&out, 2, "preflight");
    let t = text(&out);
    assert!(t.contains("gemini: no credentials"), "{t}");
    assert!(t.contains("GEMINI_API_KEY"), "the fix names the key: {t}");
    assert!(!l.dir.join("iterations/000001").exists(), "nothing ran");
}

#[test]
fn a_status_probe_that_hangs_stops_the_run_instead_of_every_tick() {
    let bin = tempfile::tempdir().unwrap();
    let path = bin.path().join("claude");
    std::fs::write(
        &path,
        "#!/usr/bin/env bash\ncase \"${1:-}\" in\n  --version) echo 9.9.9; exit 0 ;;\n  auth) sleep 600; exit 0 ;;\nesac\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let l = engine_loop("claude", &path, &[]);
    let started = std::time::Instant::now();
    let out = l.run(&[]);
    assert_code(&out, 2, "preflight");
    let t = text(&out);
    assert!(t.contains("did not answer within"), "{t}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(90),
        "the probe was stopped"
    );
    assert!(!l.dir.join("iterations/000001").exists(), "nothing ran");
}

#[test]
fn the_env_file_reaches_the_agent_and_is_refused_unless_private_and_plain() {
    use std::os::unix::fs::PermissionsExt;
    let seen = tempfile::tempdir().unwrap();
    let seen_file = seen.path().join("env");
    // The stand-in writes what it saw outside the workspace: no sandbox.
    let (_bin, l) = stand_in_with(
        "claude",
        &format!(
            r#"printf '%s\n' "${{MY_SECRET-unset}}" > '{}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.01}}'"#,
            seen_file.display()
        ),
        &["--sandbox", "none"],
    );
    let keys = seen.path().join("keys.env");
    let keys_s = keys.display().to_string();

    // Readable by others: refused, with the chmod to run.
    std::fs::write(&keys, "# the loop's keys\nMY_SECRET=\"abc def\"\n").unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = l.run(&[("ENV_FILE", &keys_s)]);
    assert_code(&out, 2, "a world-readable env file");
    assert!(text(&out).contains("chmod 600"), "{}", text(&out));
    assert!(!seen_file.exists(), "the agent did not run");

    // A symlink to a private file: refused.
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = seen.path().join("link.env");
    std::os::unix::fs::symlink(&keys, &link).unwrap();
    let out = l.run(&[("ENV_FILE", &link.display().to_string())]);
    assert_code(&out, 2, "a linked env file");
    assert!(text(&out).contains("symlink"), "{}", text(&out));

    // A line that changes how programs start: refused, naming it.
    let bad = seen.path().join("bad.env");
    std::fs::write(&bad, "LD_PRELOAD=/tmp/x.so\n").unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = l.run(&[("ENV_FILE", &bad.display().to_string())]);
    assert_code(&out, 2, "LD_PRELOAD in an env file");
    assert!(text(&out).contains("LD_PRELOAD"), "{}", text(&out));
    assert!(!seen_file.exists(), "the agent did not run");

    // Private and plain: read, never sourced, and the agent gets the value.
    let out = l.run(&[("ENV_FILE", &keys_s)]);
    assert_code(&out, 10, "the agent ran; the check still fails");
    assert_eq!(
        std::fs::read_to_string(&seen_file).unwrap(),
        "abc def\n",
        "{}",
        text(&out)
    );
}

#[test]
fn audit_names_the_clis_refusal_and_its_fix_not_a_guess_about_argv() {
    let (_bin, l) = stand_in(
        "claude",
        r#"cat <<'JSON'
{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Invalid API key · Fix external API key"}
JSON
exit 1"#,
    );
    let out = l.run(&[("ANTHROPIC_API_KEY", "wrong")]);
    assert_code(&out, 14, "BLOCKED");
    assert_eq!(l.state("STOP_REASON"), "tool_failure");
    let audit = l.repo.orbit(&["audit", &l.dir.display().to_string()]);
    let t = text(&audit);
    assert_code(&audit, 1, "a P1 finding");
    assert!(t.contains("TOOL_FAILURE"), "{t}");
    assert!(t.contains("Invalid API key"), "the CLI's own words: {t}");
    assert!(t.contains("ANTHROPIC_API_KEY"), "the fix: {t}");
    assert!(
        !t.contains("check argv in loop.toml"),
        "not the guess of a CLI that did not run: {t}"
    );
}

#[test]
fn usd_cap_with_an_engine_that_reports_no_cost_is_warned_at_init() {
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init",
        "capped goal",
        "--engine",
        "custom",
        "--exec",
        "my-agent",
        "--verify",
        "true",
        "--usd-cap",
        "5",
    ]);
    assert_ok(&out, "orbit init");
    let t = text(&out);
    assert!(
        t.contains("reports no cost") && t.contains("cost-estimate-usd"),
        "the cap would count nothing: {t}"
    );
    // claude reports its cost: no warning.
    let out = repo.orbit(&[
        "init",
        "other goal",
        "--engine",
        "claude",
        "--verify",
        "true",
        "--usd-cap",
        "5",
    ]);
    assert_ok(&out, "orbit init");
    assert!(!text(&out).contains("reports no cost"), "{}", text(&out));
}
