//! `orbit export otlp` on real loops: a loop run to DONE and a fan-out loop as OTLP/JSON
//! traces whose spans match their journals, read by the official `opentelemetry-proto`
//! package, sent to a loopback OTLP/HTTP receiver, followed as the journal grows, and a
//! malformed journal line skipped with a warning that names it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    Repo, assert_code, assert_ok, command, count_check, counting_agent, events_named, orbit_bin,
    otel_python, run_bounded, text, wait_for,
};

/// A loop of three iterations, as the demo's: verify fails in 1, the claim of 2 is rejected
/// (a check still fails), 3 ends DONE through the gate and the confirmation. The agent's
/// command line names a model (`--model sim-1`), which the agent ignores.
fn done_loop() -> (Repo, PathBuf) {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let exec = format!("{} --model sim-1", agent.display());
    let check = count_check(3);
    let out = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        &check,
        "--verify",
        "true",
        "--max-iterations",
        "6",
        "--sandbox",
        "none",
    ]);
    assert_ok(&out, "orbit init");
    let dir = repo.join(".orbit/test-goal");
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "the loop ends DONE");
    (repo, dir)
}

/// A fan-out loop of two candidates that ends DONE in its first iteration: candidate 1
/// does nothing, candidate 2 does the work and claims DONE.
fn fanout_loop() -> (Repo, PathBuf) {
    let repo = Repo::new();
    repo.write("add.sh", "echo 0\n");
    repo.git(&["add", "add.sh"]);
    repo.git(&["commit", "-qm", "add.sh"]);
    let agent = repo.agent(
        "cand",
        r#"cat >/dev/null
[ "$ORBIT_PHASE" = work ] || exit 0
if [ "$ORBIT_CANDIDATE" = 2 ]; then
  printf '%s\n' 'echo $(($1 + $2))' > add.sh
  echo done > "$ORBIT_AGENT_DIR/done.md"
fi
exit 0"#,
    );
    let dir = repo.init_loop(
        &agent,
        &["test \"$(bash add.sh 2 2)\" = 4"],
        &["--candidates", "2", "--max-iterations", "3"],
    );
    assert_code(
        &repo.run_loop(&dir, &[], &[]),
        0,
        "the fan-out loop ends DONE",
    );
    (repo, dir)
}

/// `orbit export otlp ARGS` in the repository: its stdout, after checking it succeeded.
fn export(repo: &Repo, args: &[&str]) -> String {
    let mut all = vec!["export", "otlp"];
    all.extend_from_slice(args);
    let out = repo.orbit(&all);
    assert_ok(&out, "orbit export otlp");
    String::from_utf8(out.stdout).unwrap()
}

/// The spans of a document, checked for the mapping's shape: one resource, one scope,
/// one trace, 32-hex trace and 16-hex span ids, unique span ids, times as strings of
/// nanoseconds with start <= end, every parent a span of the document.
fn spans_of(doc: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(doc.trim_end()).unwrap_or_else(|e| panic!("{e}: {doc}"));
    let rs = v["resourceSpans"].as_array().expect("resourceSpans");
    assert_eq!(rs.len(), 1, "{doc}");
    let res_attrs = attrs(&rs[0]["resource"]);
    assert_eq!(res_attrs.get("service.name"), Some(&"orbit".to_string()));
    let ss = rs[0]["scopeSpans"].as_array().expect("scopeSpans");
    assert_eq!(ss.len(), 1);
    assert_eq!(ss[0]["scope"]["name"], "orbit");
    let spans = ss[0]["spans"].as_array().expect("spans").clone();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let traces: BTreeSet<&str> = spans
        .iter()
        .map(|s| s["traceId"].as_str().unwrap())
        .collect();
    assert!(traces.len() <= 1, "one trace: {traces:?}");
    let ids: BTreeSet<&str> = spans
        .iter()
        .map(|s| s["spanId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    for s in &spans {
        assert!(hex(s["traceId"].as_str().unwrap(), 32), "{s}");
        assert!(hex(s["spanId"].as_str().unwrap(), 16), "{s}");
        let t = |k: &str| -> u128 {
            s[k].as_str()
                .unwrap_or_else(|| panic!("{k}: {s}"))
                .parse()
                .unwrap()
        };
        assert!(t("startTimeUnixNano") <= t("endTimeUnixNano"), "{s}");
        assert!(
            t("startTimeUnixNano") > 1_700_000_000_000_000_000,
            "times are unix nanoseconds: {s}"
        );
        assert!(s["kind"].is_u64(), "kind is an integer: {s}");
        assert!(s["status"]["code"].is_u64(), "{s}");
    }
    spans
}

/// A span's (or resource's) attributes as text: strings as they are, the other kinds as
/// `int:N`, `double:X`, `bool:B`.
fn attrs(s: &Value) -> BTreeMap<String, String> {
    s["attributes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|kv| {
                    let v = &kv["value"];
                    let text = if let Some(x) = v.get("stringValue") {
                        x.as_str().unwrap().to_string()
                    } else if let Some(x) = v.get("intValue") {
                        format!("int:{}", x.as_str().expect("intValue is a string"))
                    } else if let Some(x) = v.get("doubleValue") {
                        format!("double:{x}")
                    } else if let Some(x) = v.get("boolValue") {
                        format!("bool:{x}")
                    } else {
                        panic!("an attribute of no known kind: {kv}")
                    };
                    (kv["key"].as_str().unwrap().to_string(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn named<'s>(spans: &'s [Value], prefix: &str) -> Vec<&'s Value> {
    spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with(prefix))
        .collect()
}

fn parent(s: &Value) -> &str {
    s["parentSpanId"].as_str().unwrap_or("")
}

fn id(s: &Value) -> &str {
    s["spanId"].as_str().unwrap()
}

fn epoch_nanos(ts: &str) -> String {
    let secs = orbit::recover::evidence::iso_to_epoch(ts).unwrap();
    (u128::from(secs) * 1_000_000_000).to_string()
}

/// The document read by the official `opentelemetry-proto` package with protobuf's JSON
/// reader, which refuses any field the message does not have: the span names, and each
/// span's parent found among the spans (protobuf's generic reader takes the hex ids as
/// base64, so they are compared as it read them, not as hex). Skipped with a notice
/// where the package is missing, required under CI.
fn assert_official_parse(doc: &str, spans: &[Value]) {
    let Some(python) = otel_python() else {
        return;
    };
    let file = tempfile::NamedTempFile::new().unwrap();
    fs::write(file.path(), doc).unwrap();
    let script = r#"
import json, sys
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
req = json_format.Parse(open(sys.argv[1]).read(), ExportTraceServiceRequest())
out = []
for rs in req.resource_spans:
    for ss in rs.scope_spans:
        ids = {s.span_id for s in ss.spans}
        for s in ss.spans:
            out.append({"name": s.name, "kind": s.kind, "status": s.status.code,
                        "parent_found": (not s.parent_span_id) or s.parent_span_id in ids,
                        "root": not s.parent_span_id,
                        "attributes": len(s.attributes)})
print(json.dumps(out))
"#;
    let mut cmd = command(&python);
    cmd.arg("-c").arg(script).arg(file.path());
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_ok(&out, "the official package reads the document");
    let read: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read.len(), spans.len(), "{}", text(&out));
    for (r, s) in read.iter().zip(spans) {
        assert_eq!(r["name"], s["name"]);
        assert_eq!(r["kind"], s["kind"]);
        assert_eq!(r["status"], s["status"]["code"]);
        assert_eq!(r["parent_found"], true, "{r}");
        assert_eq!(r["root"], parent(s).is_empty(), "{r}");
        assert_eq!(r["attributes"].as_u64().unwrap() as usize, attrs(s).len());
    }
}

#[test]
fn a_loop_run_to_done_is_one_trace_whose_spans_are_its_journal() {
    let (repo, dir) = done_loop();
    // The default loop is the repository's only one, as for every command.
    let doc = export(&repo, &[]);
    let spans = spans_of(&doc);
    let journal = orbit::events::read(&fs::read(dir.join("events.jsonl")).unwrap());
    let count = |n: &str| journal.events.iter().filter(|e| e.event == n).count();

    // The loop: the workflow span, the root, from the first event to the last.
    let root = &spans[0];
    assert_eq!(root["name"], "invoke_workflow test-goal");
    assert_eq!(parent(root), "");
    assert_eq!(root["kind"], 1);
    assert_eq!(root["status"]["code"], 1, "DONE is OK");
    let ra = attrs(root);
    assert_eq!(ra["gen_ai.operation.name"], "invoke_workflow");
    assert_eq!(ra["gen_ai.workflow.name"], "test-goal");
    assert_eq!(ra["orbit.status"], "DONE");
    assert_eq!(ra["orbit.iterations"], "int:3");
    // The runner measured the DONE's change once it was recorded (adequacy = "report"):
    // the figures are on the loop's span, as the journal says them.
    let measured = events_named(&dir, "adequacy_measured");
    assert_eq!(measured.len(), 1, "{measured:?}");
    let m = &measured[0].value;
    for k in [
        "hunks_needed",
        "hunks_tried",
        "mutants_killed",
        "mutants_tried",
    ] {
        let n = m[k].to_string();
        assert_eq!(
            ra[&format!("orbit.adequacy.{k}")],
            format!("int:{}", n.trim_matches('"')),
            "{k}"
        );
    }
    assert_eq!(
        ra["orbit.adequacy.hunks_tried"], "int:1",
        "work.txt, needed"
    );
    assert_eq!(ra["orbit.adequacy.hunks_needed"], "int:1");
    assert_eq!(ra["orbit.adequacy.mode"], "report");
    assert_eq!(
        ra["orbit.adequacy.details_sha256"],
        m["details_sha256"].as_str().unwrap()
    );
    assert_eq!(
        root["startTimeUnixNano"],
        epoch_nanos(&journal.events[0].ts).as_str()
    );
    assert_eq!(
        root["endTimeUnixNano"],
        epoch_nanos(&journal.last().unwrap().ts).as_str()
    );
    assert_eq!(named(&spans, "invoke_workflow").len(), 1);

    // Each iteration, under the loop, with its verdict.
    let iterations = named(&spans, "iteration ");
    assert_eq!(iterations.len(), count("iteration_start"));
    assert_eq!(iterations.len(), 3);
    for (k, it) in iterations.iter().enumerate() {
        assert_eq!(it["name"], format!("iteration {}", k + 1));
        assert_eq!(parent(it), id(root));
        let verdict = &attrs(it)["orbit.verdict"];
        assert_eq!(verdict, if k == 2 { "DONE" } else { "CONTINUE" });
    }

    // Each agent run: an invoke_agent span with the GenAI attributes the loop knows, its
    // cost as the journal says it, under its iteration (the confirmation's under the
    // confirmation). A custom engine names no provider.
    let agents: Vec<&Value> = spans
        .iter()
        .filter(|s| {
            attrs(s).get("gen_ai.operation.name").map(String::as_str) == Some("invoke_agent")
        })
        .collect();
    let exits = events_named(&dir, "agent_exit");
    assert_eq!(agents.len(), exits.len());
    assert_eq!(agents.len(), 4, "three work runs and the confirmation");
    for (span, e) in agents.iter().zip(&exits) {
        let a = attrs(span);
        assert_eq!(span["name"], "invoke_agent custom");
        assert_eq!(span["kind"], 3);
        assert_eq!(a["gen_ai.agent.name"], "custom");
        assert_eq!(a["gen_ai.request.model"], "sim-1");
        assert!(!a.contains_key("gen_ai.provider.name"), "{a:?}");
        // Nor does its output count tokens: none are said, rather than zero.
        assert!(!a.contains_key("gen_ai.usage.input_tokens"), "{a:?}");
        assert_eq!(a["orbit.phase"], e.value["phase"].as_str().unwrap());
        assert_eq!(a["orbit.iteration"], format!("int:{}", e.iteration));
        assert_eq!(span["endTimeUnixNano"], epoch_nanos(&e.ts).as_str());
        match e.value.get("cost_microusd").and_then(|v| v.as_u64()) {
            Some(m) => {
                let usd: f64 = a["orbit.cost_usd"]
                    .strip_prefix("double:")
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((usd - m as f64 / 1e6).abs() < 1e-9, "{a:?} against {m}");
            }
            None => assert!(!a.contains_key("orbit.cost_usd"), "{a:?}"),
        }
        let it = iterations[e.iteration as usize - 1];
        if e.value["phase"] == "work" {
            assert_eq!(parent(span), id(it));
        }
    }

    // Each check run, with its verdict; a failing one names the failing check.
    let checks = named(&spans, "verify ");
    assert_eq!(checks.len(), count("verify_pass") + count("verify_fail"));
    let fails = events_named(&dir, "verify_fail");
    let failed: Vec<&&Value> = checks
        .iter()
        .filter(|s| attrs(s)["orbit.check.passed"] == "bool:false")
        .collect();
    assert_eq!(failed.len(), fails.len());
    for (span, e) in failed.iter().zip(&fails) {
        let run = &attrs(span)["orbit.check.run"];
        assert_eq!(span["name"], format!("verify {run}"));
        if let Some(f) = e.value.get("failing").and_then(|v| v.as_str()) {
            assert_eq!(attrs(span)["orbit.check.failing"], f);
            assert_eq!(span["status"]["code"], 2);
        }
    }
    let red = named(&spans, "verify red_gate");
    assert_eq!(red.len(), 1);
    assert_eq!(
        parent(red[0]),
        id(root),
        "the red gate runs before any iteration"
    );
    assert_eq!(
        red[0]["status"]["code"], 1,
        "checks failing on the base tree are the red gate's point"
    );

    // The DONE gate of each claim: the early claim rejected, the last one DONE with the
    // gate's checks and the confirmation inside it.
    let gates = named(&spans, "done_gate");
    assert_eq!(gates.len(), count("done_claim"));
    assert_eq!(gates.len(), 2);
    assert_eq!(parent(gates[0]), id(iterations[1]));
    assert_eq!(gates[0]["status"]["code"], 2);
    assert_eq!(
        attrs(gates[0])["orbit.done.verdict"],
        events_named(&dir, "done_rejected")[0].value["reason"]
            .as_str()
            .unwrap()
    );
    assert_eq!(parent(gates[1]), id(iterations[2]));
    assert_eq!(gates[1]["status"]["code"], 1);
    assert_eq!(attrs(gates[1])["orbit.done.verdict"], "DONE");
    let in_gate: Vec<&str> = checks
        .iter()
        .filter(|s| parent(s) == id(gates[1]))
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    // PASS_K 2: the second pass is the clean checkout's, on the tree the first ran on.
    assert_eq!(in_gate, ["verify clean"]);
    let confirmation = named(&spans, "confirmation");
    assert_eq!(confirmation.len(), 1);
    assert_eq!(parent(confirmation[0]), id(gates[1]));
    assert_eq!(attrs(confirmation[0])["orbit.confirmed"], "bool:true");
    let confirm_runs: Vec<&&Value> = agents
        .iter()
        .filter(|s| attrs(s)["orbit.phase"] == "confirm")
        .collect();
    assert_eq!(confirm_runs.len(), 1);
    assert_eq!(parent(confirm_runs[0]), id(confirmation[0]));

    // Nothing else: every span is one of those.
    assert_eq!(
        spans.len(),
        1 + iterations.len() + agents.len() + checks.len() + gates.len() + confirmation.len()
    );

    // The same journal gives the same bytes: a second export, and the one --output writes.
    assert_eq!(
        export(&repo, &[]),
        doc,
        "a second export is the same, ids and all"
    );
    let file = repo.bin.path().join("trace.json");
    export(
        &repo,
        &[".orbit/test-goal", "--output", file.to_str().unwrap()],
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), doc);

    assert_official_parse(&doc, &spans);
}

#[test]
fn a_fan_out_loop_has_a_span_per_candidate_holding_its_agent_run() {
    let (repo, dir) = fanout_loop();
    let doc = export(&repo, &[".orbit/test-goal"]);
    let spans = spans_of(&doc);
    let candidates = named(&spans, "candidate ");
    let starts = events_named(&dir, "candidate_start");
    assert_eq!(candidates.len(), starts.len());
    assert_eq!(candidates.len(), 2);
    let iterations = named(&spans, "iteration ");
    assert_eq!(iterations.len(), 1);
    let survivor = events_named(&dir, "survivor_selected")[0].value["candidate"]
        .as_u64()
        .unwrap();
    assert_eq!(survivor, 2);
    assert_eq!(attrs(iterations[0])["orbit.survivor"], "int:2");
    let ends = events_named(&dir, "candidate_end");
    for (k, c) in candidates.iter().enumerate() {
        let n = k as u64 + 1;
        let a = attrs(c);
        assert_eq!(c["name"], format!("candidate {n}"));
        assert_eq!(parent(c), id(iterations[0]));
        assert_eq!(a["orbit.candidate"], format!("int:{n}"));
        assert_eq!(
            a["orbit.candidate.survivor"],
            format!("bool:{}", n == survivor)
        );
        let end = ends.iter().find(|e| e.value["candidate"] == n).unwrap();
        assert_eq!(
            a["orbit.candidate.checks_passed"],
            format!("int:{}", end.value["checks_passed"])
        );
        assert_eq!(c["endTimeUnixNano"], epoch_nanos(&end.ts).as_str());
        // Its agent run, inside it.
        let runs: Vec<&Value> = spans.iter().filter(|s| parent(s) == id(c)).collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(attrs(runs[0])["gen_ai.operation.name"], "invoke_agent");
        assert_eq!(attrs(runs[0])["orbit.candidate"], format!("int:{n}"));
    }
    let work_runs = events_named(&dir, "agent_exit")
        .iter()
        .filter(|e| e.value.get("candidate").is_some())
        .count();
    assert_eq!(work_runs, 2);
    // The survivor's claim goes through the gate, confirmed.
    let gates = named(&spans, "done_gate");
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0]["status"]["code"], 1);
    assert_eq!(named(&spans, "confirmation").len(), 1);
    assert_eq!(export(&repo, &[".orbit/test-goal"]), doc);
    assert_official_parse(&doc, &spans);
}

/// What a receiver got: the request line, the headers (names lowercased), the body.
type Received = (String, BTreeMap<String, String>, String);

/// A loopback OTLP/HTTP receiver: reads one request, answers `status`, hands back the
/// request line, its headers (names lowercased) and its body.
fn receiver(status: &'static str) -> (u16, std::thread::JoinHandle<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request = String::new();
        reader.read_line(&mut request).unwrap();
        let mut headers = BTreeMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap();
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
        let len: usize = headers["content-length"].parse().unwrap();
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        let answer = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\nreceiver says"
        );
        stream.write_all(answer.as_bytes()).unwrap();
        (
            request.trim_end().to_string(),
            headers,
            String::from_utf8(body).unwrap(),
        )
    });
    (port, handle)
}

#[test]
fn the_endpoint_receives_the_document_the_file_holds_and_a_refusal_fails_clearly() {
    let (repo, written) = exported_loop();

    let (port, got) = receiver("200 OK");
    let url = format!("http://127.0.0.1:{port}");
    let printed = export(
        &repo,
        &[
            "--endpoint",
            &url,
            "--header",
            "Authorization: Bearer s3cret",
            "--header",
            "X-Scope: loops",
        ],
    );
    assert_eq!(printed, "", "what is sent is not printed too");
    let (request, headers, body) = got.join().unwrap();
    assert_eq!(request, "POST /v1/traces HTTP/1.1");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["authorization"], "Bearer s3cret");
    assert_eq!(headers["x-scope"], "loops");
    assert_eq!(headers["host"], format!("127.0.0.1:{port}"));
    assert_eq!(
        format!("{body}\n"),
        written,
        "the receiver gets the document --output writes"
    );
    assert!(!spans_of(&body).is_empty());

    // A receiver that answers 500: the command fails, naming the status and what to do.
    let (port, got) = receiver("500 Internal Server Error");
    let out = repo.orbit(&[
        "export",
        "otlp",
        "--endpoint",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    assert_code(&out, 2, "a refused export");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "at http://127.0.0.1:{port}/v1/traces answered HTTP 500"
        )),
        "{said}"
    );
    assert!(
        said.contains("receiver says"),
        "the receiver's words: {said}"
    );
    assert!(said.contains("check the receiver's log"), "{said}");
    assert_eq!(got.join().unwrap().0, "POST /v1/traces HTTP/1.1");

    // Nobody listening, and an https host that does not resolve, are errors that say so.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap().port();
    drop(closed);
    let out = repo.orbit(&[
        "export",
        "otlp",
        "--endpoint",
        &format!("http://127.0.0.1:{dead}"),
    ]);
    assert_code(&out, 2, "no receiver");
    assert!(
        text(&out).contains("is the OTLP/HTTP receiver running"),
        "{}",
        text(&out)
    );
    let out = repo.orbit(&[
        "export",
        "otlp",
        "--endpoint",
        "https://otlp.example.invalid",
    ]);
    assert_code(&out, 2, "a host that does not resolve");
    assert!(
        text(&out).contains("cannot send the trace to https://otlp.example.invalid:443/v1/traces"),
        "{}",
        text(&out)
    );
}

/// A loop run to DONE in one iteration, and the document `--output` writes of it.
fn exported_loop() -> (Repo, String) {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    let dir = repo.init_loop(&agent, &[&count_check(1)], &[]);
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "DONE in one iteration");
    let file = repo.bin.path().join("trace.json");
    export(&repo, &["--output", file.to_str().unwrap()]);
    let written = fs::read_to_string(&file).unwrap();
    (repo, written)
}

/// `orbit export otlp ARGS` with `env` besides the repository's PATH.
fn export_with(repo: &Repo, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = command(orbit_bin());
    cmd.args(["export", "otlp"])
        .args(args)
        .current_dir(repo.path())
        .env("PATH", repo.path_env());
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_bounded(cmd, Duration::from_secs(120))
}

/// A loopback https receiver (python3's http.server with a certificate openssl made for
/// 127.0.0.1): takes one POST, answers 200, writes what it got (request line, headers,
/// body) into `got` as JSON. Returns its port, its CA file and the process.
fn https_receiver(dir: &Path, got: &Path) -> (u16, PathBuf, std::process::Child) {
    let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
    let mut mk = command("openssl");
    mk.args([
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
    ])
    .args([
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
    ])
    .arg("-keyout")
    .arg(&key)
    .arg("-out")
    .arg(&cert);
    assert_ok(
        &run_bounded(mk, Duration::from_secs(60)),
        "openssl makes a certificate",
    );
    let script = r#"
import http.server, json, ssl, sys
key, cert, got = sys.argv[1:4]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        with open(got, "w") as f:
            json.dump({"request": self.requestline,
                       "headers": {k.lower(): v for k, v in self.headers.items()},
                       "body": body}, f)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.handle_request()
"#;
    let mut child = command("python3")
        .arg("-c")
        .arg(script)
        .arg(&key)
        .arg(&cert)
        .arg(got)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no port: {line:?}"));
    (port, cert, child)
}

/// `--endpoint https://...` goes through the machine's curl: a loopback https receiver gets
/// the document `--output` writes, with the headers; a certificate curl cannot check fails
/// with the fix.
#[test]
fn an_https_endpoint_receives_the_document_through_curl() {
    let (repo, written) = exported_loop();
    let tmp = tempfile::tempdir().unwrap();
    let got = tmp.path().join("got.json");
    let (port, ca, mut server) = https_receiver(tmp.path(), &got);
    let url = format!("https://127.0.0.1:{port}");
    let ca_s = ca.display().to_string();
    let out = export_with(
        &repo,
        &[
            "--endpoint",
            &url,
            "--header",
            "Authorization: Bearer s3cret",
        ],
        &[("CURL_CA_BUNDLE", &ca_s)],
    );
    assert_ok(&out, "the https export");
    let _ = server.wait();
    let got: Value = serde_json::from_str(&fs::read_to_string(&got).unwrap()).unwrap();
    assert_eq!(got["request"], "POST /v1/traces HTTP/1.1");
    assert_eq!(got["headers"]["authorization"], "Bearer s3cret");
    assert_eq!(got["headers"]["content-type"], "application/json");
    assert_eq!(format!("{}\n", got["body"].as_str().unwrap()), written);

    // Without the receiver's CA, curl refuses its certificate: said, with the fix.
    let (port, _ca, mut server) = https_receiver(tmp.path(), &tmp.path().join("never.json"));
    let out = export_with(
        &repo,
        &["--endpoint", &format!("https://127.0.0.1:{port}")],
        &[],
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_code(&out, 2, "an unchecked certificate");
    assert!(
        text(&out).contains("certificate") && text(&out).contains("CURL_CA_BUNDLE"),
        "{}",
        text(&out)
    );
    assert!(!tmp.path().join("never.json").exists(), "nothing was sent");
}

/// What orbit hands curl: `-q` first (no ~/.curlrc), its settings in a file only the user
/// can read, which holds the headers (an API key is never on a command line another process
/// can read) and is gone afterwards; https only, no redirect followed.
#[test]
fn curl_is_given_the_headers_in_a_private_file_never_on_its_command_line() {
    let (repo, written) = exported_loop();
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("seen");
    fs::create_dir(&seen).unwrap();
    let stand_in = format!(
        "#!/bin/bash\nprintf '%s\\n' \"$@\" > '{s}/argv'\nconf=$3\nstat -c %a \"$conf\" > '{s}/mode'\ncp \"$conf\" '{s}/conf'\necho \"$conf\" > '{s}/path'\ncat > '{s}/body'\nprintf '\\n200'\n",
        s = seen.display()
    );
    let curl = bin.path().join("curl");
    fs::write(&curl, stand_in).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&curl, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.path().display(), repo.path_env());
    let out = export_with(
        &repo,
        &[
            "--endpoint",
            "https://otlp.example.com",
            "--header",
            "X-Api-Key: s3cret\"q",
        ],
        // A header from OpenTelemetry's variable too: it stays off orbit's command line.
        &[
            ("PATH", &path),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-team=env%20key"),
        ],
    );
    assert_ok(&out, "the export through the stand-in");
    let argv = fs::read_to_string(seen.join("argv")).unwrap();
    assert!(argv.starts_with("-q\n--config\n"), "{argv}");
    assert!(
        !argv.contains("s3cret"),
        "the key is on curl's command line: {argv}"
    );
    assert_eq!(fs::read_to_string(seen.join("mode")).unwrap().trim(), "600");
    let conf = fs::read_to_string(seen.join("conf")).unwrap();
    assert!(
        conf.contains("header = \"X-Api-Key: s3cret\\\"q\"\n"),
        "{conf}"
    );
    assert!(conf.contains("header = \"x-team: env key\"\n"), "{conf}");
    assert!(!argv.contains("env key"), "{argv}");
    assert!(
        conf.contains("url = \"https://otlp.example.com:443/v1/traces\"\n"),
        "{conf}"
    );
    assert!(conf.contains("proto = \"=https\"\n"), "{conf}");
    assert!(
        !conf.contains("location"),
        "no redirect is followed: {conf}"
    );
    let used = fs::read_to_string(seen.join("path")).unwrap();
    assert!(
        !Path::new(used.trim()).exists(),
        "the settings file is removed"
    );
    assert_eq!(
        format!("{}\n", fs::read_to_string(seen.join("body")).unwrap()),
        written
    );
}

#[test]
fn a_malformed_journal_line_is_skipped_with_a_warning_naming_it_and_the_rest_exported() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "DONE");
    let whole = export(&repo, &[]);
    let path = dir.join("events.jsonl");
    let lines: Vec<String> = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    // A line that is not JSON where line 6 was, the journal's lines kept after it.
    let mut broken = lines.clone();
    broken.insert(5, "{not an event".into());
    fs::write(&path, format!("{}\n", broken.join("\n"))).unwrap();
    let out = repo.orbit(&["export", "otlp"]);
    assert_ok(&out, "the export goes on");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("events.jsonl:6: not an orbit event: invalid JSON")
            && said.contains("line skipped"),
        "{said}"
    );
    assert_eq!(said.matches("warning").count(), 1, "one warning: {said}");
    let doc = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        doc, whole,
        "every event is exported, nothing lost but the bad line"
    );
}

#[test]
fn follow_exports_each_span_once_as_the_journal_grows_and_stops_at_loop_stop() {
    let (repo, dir) = done_loop();
    let whole = spans_of(&export(&repo, &[]));
    let path = dir.join("events.jsonl");
    let full = fs::read_to_string(&path).unwrap();
    // The journal as it was when iteration 1 ended.
    let cut = full
        .lines()
        .position(|l| l.contains("\"event\":\"iteration_end\""))
        .unwrap();
    let head: String = full
        .lines()
        .take(cut + 1)
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&path, &head).unwrap();

    let out_file = repo.bin.path().join("follow.jsonl");
    let mut cmd = command(orbit_bin());
    cmd.args([
        "export",
        "otlp",
        "--follow",
        "--output",
        out_file.to_str().unwrap(),
    ])
    .current_dir(repo.path())
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let lines = |p: &Path| {
        fs::read_to_string(p)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    wait_for("the first batch", Duration::from_secs(60), || {
        lines(&out_file) >= 1
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "it waits while the loop has not stopped"
    );
    // The rest of the journal arrives (as a rename, whole lines only).
    let tmp = dir.join(".events.grow");
    fs::write(&tmp, &full).unwrap();
    fs::rename(&tmp, &path).unwrap();
    wait_for(
        "the follower to stop at loop_stop",
        Duration::from_secs(60),
        || child.try_wait().unwrap().is_some(),
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");

    let batches: Vec<Vec<Value>> = fs::read_to_string(&out_file)
        .unwrap()
        .lines()
        .map(spans_of)
        .collect();
    assert_eq!(batches.len(), 2, "one batch a growth");
    // The first batch: iteration 1 and what it holds, ended; not the loop, still running.
    let first: BTreeSet<&str> = batches[0]
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        first.contains("iteration 1") && first.contains("verify red_gate"),
        "{first:?}"
    );
    assert!(
        !first.contains("invoke_workflow test-goal") && !first.contains("iteration 2"),
        "{first:?}"
    );
    // Each span once, as the export of the whole journal has it.
    let mut seen = BTreeMap::new();
    for s in batches.iter().flatten() {
        assert!(
            seen.insert(id(s).to_string(), s.clone()).is_none(),
            "exported twice: {s}"
        );
    }
    assert_eq!(seen.len(), whole.len());
    for s in &whole {
        assert_eq!(
            seen.get(id(s)),
            Some(s),
            "the followed span is the exported one"
        );
    }
}

/// The tokens claude's result line counts and the model its init line names are the agent
/// span's usage and response model.
#[test]
fn an_engines_token_counts_are_its_agent_spans_usage() {
    let body = format!(
        "echo '{{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s\",\"model\":\"claude-sonnet-4-5\"}}'\n{}",
        crate::engines::claude_usage_line("120", "64")
    );
    let (_bin, l) = crate::engines::stand_in("claude", &body);
    assert_code(&l.run(&[]), 10, "one tick, the check still failing");
    // The journal holds what claude's output counted: input with the cache's tokens.
    let exits = events_named(&l.dir, "agent_exit");
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert_eq!(exits[0].value["tokens_in"], 1000, "{:?}", exits[0].value);
    assert_eq!(exits[0].value["tokens_out"], 64);
    assert_eq!(exits[0].value["model"], "claude-sonnet-4-5");
    let doc = export(&l.repo, &[&l.dir.display().to_string()]);
    let spans = spans_of(&doc);
    let agents = named(&spans, "invoke_agent");
    assert_eq!(agents.len(), 1);
    let a = attrs(agents[0]);
    assert_eq!(a["gen_ai.provider.name"], "anthropic");
    assert_eq!(a["gen_ai.usage.input_tokens"], "int:1000", "{a:?}");
    assert_eq!(a["gen_ai.usage.output_tokens"], "int:64");
    assert_eq!(a["gen_ai.response.model"], "claude-sonnet-4-5");
    assert_eq!(a["orbit.cost_usd"], "double:0.02");
    assert_official_parse(&doc, &spans);
}

#[test]
fn each_candidates_token_counts_are_its_agent_spans_usage() {
    // Candidate k reads k*100 input tokens and writes k*10 with the model sim-k (its init
    // line); candidate 2 does the work.
    let body = format!(
        "[ \"$ORBIT_PHASE\" = work ] || exit 0\nif [ \"$ORBIT_CANDIDATE\" = 2 ]; then touch done.txt; echo done > \"$ORBIT_AGENT_DIR/done.md\"; fi\n\
         printf '%s\\n' \"{{\\\"type\\\":\\\"system\\\",\\\"subtype\\\":\\\"init\\\",\\\"model\\\":\\\"sim-$ORBIT_CANDIDATE\\\"}}\"\n{}",
        crate::engines::claude_usage_line(
            "$((ORBIT_CANDIDATE * 100))",
            "$((ORBIT_CANDIDATE * 10))"
        )
    );
    let (_bin, l) = crate::engines::stand_in_with("claude", &body, &["--candidates", "2"]);
    assert_code(&l.run(&[]), 0, "candidate 2's work ends the loop DONE");
    let doc = export(&l.repo, &[&l.dir.display().to_string()]);
    let spans = spans_of(&doc);
    let candidates = named(&spans, "candidate ");
    assert_eq!(candidates.len(), 2);
    for (k, c) in candidates.iter().enumerate() {
        let n = k as u64 + 1;
        let runs: Vec<&Value> = spans.iter().filter(|s| parent(s) == id(c)).collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        let a = attrs(runs[0]);
        assert_eq!(a["orbit.candidate"], format!("int:{n}"));
        assert_eq!(
            a["gen_ai.usage.input_tokens"],
            format!("int:{}", n * 100 + 880),
            "{a:?}"
        );
        assert_eq!(a["gen_ai.usage.output_tokens"], format!("int:{}", n * 10));
        assert_eq!(a["gen_ai.response.model"], format!("sim-{n}"), "{a:?}");
    }
    assert_official_parse(&doc, &spans);
}
