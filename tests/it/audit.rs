//! Integration tests: audit. A gallery of loops made by real runs of the generated runner
//! with fake agents, then damaged one way each; each is snapshotted (human report and JSON)
//! and its class, severity, verdict and exit code asserted. Live tests audit a running loop,
//! a killed one and one whose agent edited a protected test.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::*;

const LOOP: &str = ".orbit/test-goal";

/// `orbit ARGS` in the repository with colour off.
fn orbit_nc(repo: &Repo, args: &[&str]) -> Output {
    let mut cmd = command(orbit_bin());
    cmd.args(args)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("NO_COLOR", "1");
    run_bounded(cmd, Duration::from_secs(60))
}

/// Replaces what changes from run to run: temp paths, times, hashes, ages.
fn scrub(text: &str, repo: &Repo) -> String {
    let mut s = text.to_string();
    // The default workspaces' directory, under the suite's data directory.
    let workspaces = workspaces_of(repo.path());
    s = s.replace(
        &workspaces.display().to_string(),
        "[DATA]/orbit/workspaces/[REPO-ID]",
    );
    for (p, name) in [(repo.path(), "[REPO]"), (repo.bin.path(), "[BIN]")] {
        if let Ok(c) = fs::canonicalize(p) {
            s = s.replace(&c.display().to_string(), name);
        }
        s = s.replace(&p.display().to_string(), name);
    }
    let b: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        // 40 or 64 hex digits: a git id or a sha256.
        let hex = b[i..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
        let boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if boundary && (hex == 40 || hex == 64) {
            out.push_str("[HASH]");
            i += hex;
            continue;
        }
        // 2026-11-30T05:51:13Z
        if b.len() - i >= 20
            && b[i + 4] == '-'
            && b[i + 10] == 'T'
            && b[i + 19] == 'Z'
            && b[i].is_ascii_digit()
        {
            out.push_str("[TS]");
            i += 20;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    let mut lines = Vec::new();
    for line in out.lines() {
        let l = if let Some(at) = line.find("\"last_activity\": ") {
            let rest = &line[at + 17..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            format!("{}\"last_activity\": [EPOCH]{}", &line[..at], &rest[end..])
        } else {
            line.to_string()
        };
        lines.push(l);
    }
    lines.join("\n")
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit --json is not JSON ({e}):\n{}", text(out)))
}

/// The findings of the first loop as (class, severity) pairs, but the UNSANDBOXED note
/// every loop of these tests carries (they run without the OS sandbox, as
/// `support::init_loop` makes them): tests/it/sandbox.rs tests that note.
fn classes(v: &serde_json::Value) -> Vec<(String, String)> {
    all_classes(v)
        .into_iter()
        .filter(|(c, _)| c != "UNSANDBOXED")
        .collect()
}

fn all_classes(v: &serde_json::Value) -> Vec<(String, String)> {
    v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["class"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Audits the loop, checks what it must say, and snapshots both reports.
fn gallery(
    name: &str,
    repo: &Repo,
    verdict: &str,
    expect: &[(&str, &str)],
    code: i32,
) -> serde_json::Value {
    let human = orbit_nc(repo, &["audit", LOOP]);
    let json = orbit_nc(repo, &["audit", "--json", LOOP]);
    assert_code(&human, code, &format!("{name}: orbit audit"));
    assert_code(&json, code, &format!("{name}: orbit audit --json"));
    let v = json_of(&json);
    let found = classes(&v);
    assert_eq!(
        v["loops"][0]["verdict"],
        verdict,
        "{name}:\n{}",
        text(&human)
    );
    for (class, sev) in expect {
        assert!(
            found.iter().any(|(c, s)| c == class && s == sev),
            "{name}: expected {class} at {sev}, found {found:?}\n{}",
            text(&human)
        );
    }
    for f in v["loops"][0]["findings"].as_array().unwrap() {
        let ev = f["evidence"].as_str().unwrap();
        assert!(ev.contains(':'), "{name}: evidence '{ev}' is not file:line");
        assert!(
            !f["fix"].as_str().unwrap().is_empty(),
            "{name}: a finding without a fix"
        );
    }
    assert!(!String::from_utf8_lossy(&human.stdout).contains('\x1b'));
    let doc = format!(
        "exit: {:?}\n--- orbit audit {LOOP}\n{}--- orbit audit --json {LOOP}\n{}",
        human.status.code(),
        String::from_utf8_lossy(&human.stdout),
        String::from_utf8_lossy(&json.stdout)
    );
    let doc = scrub(&doc, repo);
    insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(format!("audit_{name}"), doc);
    });
    v
}

/// An agent that works without ever reaching the goal.
const WORKER: &str = "echo \"work $ORBIT_ITERATION\" >> work.txt";
/// An agent that reaches the goal in its first work run and claims DONE.
const FINISHER: &str = "if [ \"$ORBIT_PHASE\" = work ]; then touch ok.txt; echo 'every AC holds' > \"$ORBIT_AGENT_DIR/done.md\"; fi";

fn new_loop(body: &str, checks: &[&str], extra: &[&str]) -> (Repo, PathBuf) {
    let repo = Repo::new();
    let agent = repo.agent("fake-agent", body);
    let dir = repo.init_loop(&agent, checks, extra);
    (repo, dir)
}

/// A loop that ran one iteration, verify failing: IDLE, nothing wrong.
fn one_tick() -> (Repo, PathBuf) {
    let (repo, dir) = new_loop(WORKER, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "run-loop --once");
    (repo, dir)
}

fn edit(path: &Path, f: impl FnOnce(String) -> String) {
    let t = fs::read_to_string(path).unwrap();
    fs::write(path, f(t)).unwrap();
}

/// Rewrites state.env through `f` and re-seals its sidecar, as an editor that knows the
/// format would.
fn reseal_state(dir: &Path, f: impl FnOnce(String) -> String) {
    let text = f(fs::read_to_string(dir.join("state.env")).unwrap());
    let state = orbit::state::State::parse(text.as_bytes()).unwrap();
    fs::write(dir.join("state.env"), &text).unwrap();
    fs::write(
        dir.join("state.env.sha256"),
        orbit::state::Sidecar::for_state(&text, state.generation).print(),
    )
    .unwrap();
}

// ---- the gallery

#[test]
fn ready_loop_without_a_terminator() {
    let (repo, _dir) = new_loop(WORKER, &["test -f ok.txt"], &[]);
    gallery(
        "ready_unbounded",
        &repo,
        "READY",
        &[("UNBOUNDED_LOOP", "P2")],
        0,
    );
}

#[test]
fn idle_loop_is_clean() {
    let (repo, _dir) = one_tick();
    let v = gallery("idle_clean", &repo, "IDLE", &[], 0);
    assert!(classes(&v).is_empty(), "{v}");
    assert_eq!(v["loops"][0]["iteration"], 1);
    assert_eq!(v["loops"][0]["status"], "CONTINUE");
}

#[test]
fn done_loop() {
    let (repo, dir) = new_loop(FINISHER, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "run-loop");
    let v = gallery("done", &repo, "DONE", &[], 0);
    assert!(classes(&v).is_empty(), "{v}");
    // status says how to take the work: merge the loop branch.
    let status = orbit_nc(&repo, &["status"]);
    let t = String::from_utf8_lossy(&status.stdout);
    let ws = repo.ws().display().to_string();
    assert!(
        t.contains(&format!(
            "  orbit/test-goal  {ws}  next: git merge orbit/test-goal  "
        )),
        "{t}"
    );
}

#[test]
fn done_without_a_passing_verify_is_a_verify_gap() {
    let (repo, dir) = one_tick();
    reseal_state(&dir, |t| {
        t.replace("LAST_STATUS=CONTINUE", "LAST_STATUS=DONE")
    });
    gallery(
        "verify_gap",
        &repo,
        "DONE",
        // A DONE written into state.env by hand: the journal names another state.
        &[
            ("VERIFY_GAP", "P0"),
            ("STATE_DRIFT", "P1"),
            ("LOOP_TAMPER", "P0"),
        ],
        3,
    );
}

#[test]
fn torn_checkpoint() {
    let (repo, dir) = one_tick();
    // state.env one generation ahead of its sidecar: the write of the sidecar was cut.
    let generation = state_value(&dir, "GEN");
    edit(&dir.join("state.env"), |t| {
        t.replace(
            &format!("GEN={generation}\n"),
            &format!("GEN={}\n", generation.parse::<u64>().unwrap() + 1),
        )
    });
    gallery(
        "torn_checkpoint",
        &repo,
        "IDLE",
        &[("TORN_CHECKPOINT", "P1")],
        1,
    );
}

#[test]
fn edited_state_is_corrupt() {
    let (repo, dir) = one_tick();
    edit(&dir.join("state.env"), |t| {
        t.replace("NEXT_ITERATION=2", "NEXT_ITERATION=9")
    });
    gallery("corrupt", &repo, "CORRUPT", &[("STATE_DRIFT", "P1")], 1);
}

#[test]
fn unparseable_state_names_its_line() {
    let (repo, dir) = one_tick();
    edit(&dir.join("state.env"), |t| {
        t.replace("CB_STATE=CLOSED", "CB_STATE=$(touch x)")
    });
    let v = gallery(
        "unparseable_state",
        &repo,
        "CORRUPT",
        &[("STATE_DRIFT", "P1")],
        1,
    );
    assert_eq!(v["loops"][0]["findings"][0]["evidence"], "state.env:11");
}

#[test]
fn state_rolled_back_behind_progress_and_events() {
    let (repo, dir) = one_tick();
    reseal_state(&dir, |t| t.replace("NEXT_ITERATION=2", "NEXT_ITERATION=1"));
    // Rolled back by hand (resealed): the journal names another state, and the records are
    // ahead of it.
    let v = gallery(
        "state_drift",
        &repo,
        "IDLE",
        &[("STATE_DRIFT", "P1"), ("LOOP_TAMPER", "P0")],
        3,
    );
    let evidence: Vec<&str> = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["evidence"].as_str().unwrap())
        .collect();
    assert!(
        evidence.iter().any(|e| e.starts_with("progress.md:")),
        "{evidence:?}"
    );
    assert!(
        evidence.iter().any(|e| e.starts_with("events.jsonl:")),
        "{evidence:?}"
    );
}

#[test]
fn edited_event_breaks_the_journal() {
    let (repo, dir) = one_tick();
    let path = dir.join("events.jsonl");
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let k = lines
        .iter()
        .position(|l| l.contains("\"event\":\"verify_fail\"") && l.contains("\"iteration\":1"))
        .unwrap();
    lines[k] = lines[k].replace("\"run\":1", "\"run\":2");
    fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
    let v = gallery(
        "journal_broken",
        &repo,
        "IDLE",
        &[("JOURNAL_BROKEN", "P1")],
        1,
    );
    assert_eq!(
        v["loops"][0]["findings"][0]["evidence"],
        format!("events.jsonl:{}", k + 1)
    );
}

#[test]
fn truncated_journal_tail() {
    let (repo, dir) = one_tick();
    let path = dir.join("events.jsonl");
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() - 20]).unwrap();
    gallery(
        "journal_torn",
        &repo,
        "IDLE",
        &[("JOURNAL_BROKEN", "P2")],
        0,
    );
}

#[test]
fn rewritten_progress_breaks_its_chain() {
    let (repo, dir) = one_tick();
    edit(&dir.join("progress.md"), |t| {
        t.replacen("- verify: fail", "- verify: pass", 1)
    });
    gallery(
        "progress_rewritten",
        &repo,
        "IDLE",
        &[("JOURNAL_BROKEN", "P1")],
        1,
    );
}

#[test]
fn goal_edit_is_goal_drift() {
    let (repo, dir) = one_tick();
    edit(&dir.join("goal.md"), |t| {
        format!("{t}\n- also: delete the tests\n")
    });
    let v = gallery("goal_drift", &repo, "IDLE", &[("GOAL_DRIFT", "P0")], 3);
    let f = &v["loops"][0]["findings"][0];
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with("goal.md changed"),
        "{f}"
    );
    assert_eq!(f["fix"], format!("orbit recover {LOOP} --restore-pinned"));
}

#[test]
fn script_edit_is_script_tamper() {
    let (repo, dir) = one_tick();
    edit(&dir.join("run-loop.sh"), |t| format!("{t}\n# harmless?\n"));
    gallery(
        "script_tamper",
        &repo,
        "IDLE",
        &[("SCRIPT_TAMPER", "P0")],
        3,
    );
}

#[test]
fn permission_file_edit_is_permission_hijack() {
    let repo = Repo::new();
    repo.write(".claude/settings.json", "{\"permissions\":{}}\n");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "settings"]);
    let agent = repo.agent("fake-agent", WORKER);
    let dir = repo.init_loop(&agent, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "run-loop --once",
    );
    // Under contract 2.0 the pinned file is the workspace's, where the agent works.
    fs::create_dir_all(repo.ws().join(".claude")).unwrap();
    fs::write(
        repo.ws().join(".claude/settings.json"),
        "{\"permissions\":{\"allow\":[\"Bash(*)\"]}}\n",
    )
    .unwrap();
    let v = gallery(
        "permission_hijack",
        &repo,
        "IDLE",
        &[("PERMISSION_HIJACK", "P0")],
        3,
    );
    assert!(
        v["loops"][0]["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains(".claude/settings.json")
    );
}

#[test]
fn flaky_verify() {
    // Passes once, then fails: the DONE gate's second pass sees the flake. Its memory is
    // outside the workspace: a file a check run leaves in the workspace is its artifact,
    // taken out of the tree after the run.
    let (repo, dir) = new_loop(
        FINISHER,
        &["test -f ok.txt && ! test -f ../flip && touch ../flip"],
        &["--loop-timeout", "8h"],
    );
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "run-loop --once",
    );
    gallery("verify_flaky", &repo, "IDLE", &[("VERIFY_FLAKY", "P1")], 1);
}

#[test]
fn green_start_is_vacuous() {
    let (repo, dir) = new_loop(WORKER, &["true"], &["--loop-timeout", "8h"]);
    assert_code(&repo.run_loop(&dir, &[], &[]), 17, "run-loop");
    gallery(
        "vacuous_verify",
        &repo,
        "BLOCKED",
        &[("VACUOUS_VERIFY", "P1")],
        1,
    );
}

#[test]
fn failing_agent_opens_the_circuit() {
    let (repo, dir) = new_loop(
        "echo broken >&2; exit 1",
        &["test -f ok.txt"],
        &["--loop-timeout", "8h"],
    );
    assert_code(
        &repo.run_loop(&dir, &[], &[("CB_THRESHOLD", "1")]),
        14,
        "run-loop",
    );
    gallery(
        "circuit_open",
        &repo,
        "BLOCKED",
        &[("CIRCUIT_OPEN", "P1")],
        1,
    );
}

#[test]
fn idle_agent_converges() {
    let (repo, dir) = new_loop("true", &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    assert_code(&repo.run_loop(&dir, &[], &[]), 15, "run-loop");
    gallery(
        "convergence_stall",
        &repo,
        "STALLED",
        &[("CONVERGENCE_STALL", "P1")],
        1,
    );
}

#[test]
fn alternating_agent_oscillates() {
    let body = "if [ $((ORBIT_ITERATION % 2)) = 1 ]; then echo alpha > state.txt; else echo beta > state.txt; fi";
    let (repo, dir) = new_loop(body, &["cat state.txt; false"], &["--loop-timeout", "8h"]);
    assert_code(&repo.run_loop(&dir, &[], &[]), 15, "run-loop");
    gallery(
        "oscillation",
        &repo,
        "STALLED",
        &[("OSCILLATION_LOOP", "P1")],
        1,
    );
}

#[test]
fn spend_over_the_cap() {
    // The first run costs more than the whole cap: it is known only after the run, so the
    // loop stops over its cap and the audit reports the overspend.
    let body = format!("{WORKER}\necho 0.12 > \"$ORBIT_COST_FILE\"");
    let (repo, dir) = new_loop(&body, &["test -f ok.txt"], &["--usd-cap", "0.1"]);
    assert_code(&repo.run_loop(&dir, &[], &[]), 12, "run-loop");
    gallery(
        "burn_rate",
        &repo,
        "PAUSED",
        &[("BURN_RATE_ANOMALY", "P1")],
        1,
    );
}

#[test]
fn iterations_used_up_is_exhausted() {
    let (repo, dir) = new_loop(
        WORKER,
        &["test -f ok.txt"],
        &["--loop-timeout", "8h", "--max-iterations", "1"],
    );
    assert_code(&repo.run_loop(&dir, &[], &[]), 16, "run-loop");
    // A loop that used every iteration without DONE waits for a human: a finding, exit 1.
    let v = gallery("exhausted", &repo, "EXHAUSTED", &[("EXHAUSTED", "P1")], 1);
    assert_eq!(v["loops"][0]["stop_reason"], "max_iterations");
    let f = finding(&v, "EXHAUSTED");
    assert_eq!(
        f["evidence"],
        format!("state.env:{}", state_key_line(&dir, "STOP_REASON"))
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("1 of max-iterations 1"),
        "{f}"
    );
    let fix = f["fix"].as_str().unwrap();
    assert_eq!(
        fix,
        format!(
            "raise max-iterations in {LOOP}/loop.toml, then: orbit init --force --dir {LOOP} && orbit run {LOOP}"
        )
    );
    // The fix, followed: the loop runs its next iteration (and uses it up again).
    edit(&dir.join("loop.toml"), |t| {
        t.replace("max-iterations = 1\n", "max-iterations = 2\n")
    });
    apply_orbit_fix(&repo, &format!("orbit init --force --dir {LOOP}"));
    assert_code(&repo.run_loop(&dir, &[], &[]), 16, "run-loop after the fix");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
}

/// A run whose environment capped it lower than loop.toml: loop.toml allows more, so the
/// fix is a plain run.
#[test]
fn iterations_used_up_under_a_lower_cap_of_the_environment_is_exhausted_and_a_run_goes_on() {
    let (repo, dir) = new_loop(WORKER, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    assert_code(
        &repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]),
        16,
        "run-loop",
    );
    let out = orbit_nc(&repo, &["audit", "--json", LOOP]);
    assert_code(&out, 1, "orbit audit");
    let v = json_of(&out);
    assert_eq!(v["loops"][0]["verdict"], "EXHAUSTED");
    let f = finding(&v, "EXHAUSTED");
    assert_eq!(f["severity"], "P1");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("1 of max-iterations 20"),
        "{f}"
    );
    assert_eq!(f["fix"], format!("orbit run {LOOP}"));
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "the next tick");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
}

/// A loop stopped on its wall-clock limit (BLOCKED, loop_timeout, exit 11) waits for a human
/// as an exhausted one does: a finding with the state's line and the journal's `loop_stop`,
/// exit 1, and a fix that, followed, resumes it. The limit is reached by a loop that started
/// nine hours ago under an 8h limit (its STARTED_AT moved back, as a clock step would), not
/// by a sleep.
#[test]
fn a_loop_stopped_on_its_loop_timeout_is_a_finding_and_its_fix_resumes_it() {
    let (repo, dir) = one_tick();
    let now = orbit::fsx::now_epoch();
    crate::reliability::set_started_at(&dir, now - 9 * 3600);
    assert_code(&repo.run_loop(&dir, &[], &[]), 11, "the loop timeout");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "BLOCKED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "loop_timeout");
    let v = gallery(
        "loop_timeout",
        &repo,
        "BLOCKED",
        &[("LOOP_TIMEOUT", "P1")],
        1,
    );
    let f = finding(&v, "LOOP_TIMEOUT");
    assert_eq!(
        f["evidence"],
        format!("state.env:{}", state_key_line(&dir, "STOP_REASON"))
    );
    let events = fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let stop_line = events
        .lines()
        .collect::<Vec<_>>()
        .iter()
        .rposition(|e| e.contains("\"loop_stop\"") && e.contains("loop_timeout"))
        .expect("the runner journaled its stop")
        + 1;
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("events.jsonl:{stop_line}"))
            && message.contains("loop-timeout 8h")
            && message.contains("9h"),
        "{f}"
    );
    let fix = f["fix"].as_str().unwrap();
    assert_eq!(
        fix,
        format!(
            "raise loop-timeout in {LOOP}/loop.toml to 10h or more (0: none), then: orbit init --force --dir {LOOP} && orbit run {LOOP}"
        )
    );
    // Until then every run stops again, running nothing.
    assert_code(&repo.run_loop(&dir, &[], &[]), 11, "still the loop timeout");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
    // The fix, followed: the loop runs its next iteration.
    edit(&dir.join("loop.toml"), |t| {
        t.replace("loop-timeout = \"8h\"\n", "loop-timeout = \"20h\"\n")
    });
    apply_orbit_fix(&repo, &format!("orbit init --force --dir {LOOP}"));
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "the next tick after the fix",
    );
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
    let out = orbit_nc(&repo, &["audit", "--json", LOOP]);
    assert!(
        !classes(&json_of(&out))
            .iter()
            .any(|(c, _)| c == "LOOP_TIMEOUT"),
        "{}",
        text(&out)
    );
}

/// A run whose environment set a lower LOOP_TIMEOUT than loop.toml's: loop.toml allows
/// more, so the fix is a plain run.
#[test]
fn a_loop_timeout_of_the_runs_environment_is_a_finding_and_a_plain_run_goes_on() {
    let (repo, dir) = one_tick();
    let now = orbit::fsx::now_epoch();
    crate::reliability::set_started_at(&dir, now - 2 * 3600);
    assert_code(
        &repo.run_loop(&dir, &[], &[("LOOP_TIMEOUT", "1h")]),
        11,
        "the environment's loop timeout",
    );
    let out = orbit_nc(&repo, &["audit", "--json", LOOP]);
    assert_code(&out, 1, "orbit audit");
    let v = json_of(&out);
    assert_eq!(v["loops"][0]["verdict"], "BLOCKED");
    let f = finding(&v, "LOOP_TIMEOUT");
    assert_eq!(f["severity"], "P1");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("loop.toml allows more"),
        "{f}"
    );
    assert_eq!(f["fix"], format!("orbit run {LOOP}"));
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "the next tick");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
}

#[test]
fn rate_limited_loop_is_paused() {
    let (repo, dir) = new_loop(
        "echo 'HTTP 429 Too Many Requests: rate limit reached' >&2; exit 1",
        &["test -f ok.txt"],
        &["--loop-timeout", "8h"],
    );
    assert_code(&repo.run_loop(&dir, &[], &[]), 13, "run-loop");
    let v = gallery("rate_limited", &repo, "PAUSED", &[], 0);
    assert_eq!(v["loops"][0]["stop_reason"], "rate_limit");
}

#[test]
fn agent_that_cannot_run_is_a_tool_failure() {
    let (repo, dir) = new_loop("exit 126", &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    assert_code(&repo.run_loop(&dir, &[], &[]), 14, "run-loop");
    let v = gallery(
        "tool_failure_permanent",
        &repo,
        "BLOCKED",
        &[("TOOL_FAILURE", "P1")],
        1,
    );
    let f = &v["loops"][0]["findings"][0];
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .starts_with("iterations/000001/result.env:"),
        "{f}"
    );
    // The runner runs nothing until a human acts: the fix is orbit recover, not a rerun.
    assert!(
        f["fix"].as_str().unwrap().starts_with("orbit recover "),
        "{f}"
    );
}

#[test]
fn signature_log_shows_a_stall_or_an_oscillation_before_the_state_does() {
    let (repo, dir) = one_tick();
    let a = "a".repeat(40);
    let b = "b".repeat(40);
    fs::write(
        dir.join(".action-sig.log"),
        format!("1\t{a}\n2\t{b}\n3\t{b}\n4\t{b}\n"),
    )
    .unwrap();
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert_eq!(
        classes(&v),
        vec![("CONVERGENCE_STALL".to_string(), "P2".to_string())]
    );
    assert_eq!(
        v["loops"][0]["findings"][0]["evidence"],
        ".action-sig.log:4"
    );
    fs::write(
        dir.join(".action-sig.log"),
        format!("1\t{a}\n2\t{b}\n3\t{a}\n4\t{b}\n"),
    )
    .unwrap();
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert_eq!(
        classes(&v),
        vec![("OSCILLATION_LOOP".to_string(), "P2".to_string())]
    );
    fs::write(dir.join(".action-sig.log"), format!("1\t{a}\n2\t{b}\n")).unwrap();
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
}

#[test]
fn dead_mkdir_lock_is_stale() {
    let (repo, dir) = one_tick();
    fs::create_dir(dir.join(".run-loop.lock.d")).unwrap();
    fs::write(
        dir.join(".run-loop.lock.d/owner"),
        "999999999 Thu Jan 1 00:00:00 1970\n",
    )
    .unwrap();
    gallery("stale_lock", &repo, "IDLE", &[("STALE_LOCK", "P1")], 1);
}

#[test]
fn kill_after_the_agent_is_a_crash() {
    let (repo, dir) = new_loop(WORKER, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &["--once"], &[("ORBIT_FAULT", "after_agent")]);
    assert_eq!(
        out.status.code(),
        None,
        "the runner must die by SIGKILL:\n{}",
        text(&out)
    );
    let v = gallery("crashed", &repo, "CRASHED", &[("CRASHED", "P1")], 1);
    let crash = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["class"] == "CRASHED")
        .unwrap()
        .clone();
    assert_eq!(crash["fix"], format!("orbit recover {LOOP}"));
}

#[test]
fn crash_after_the_record_before_the_checkpoint() {
    let (repo, dir) = new_loop(WORKER, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    let out = repo.run_loop(&dir, &["--once"], &[("ORBIT_FAULT", "mid_progress_append")]);
    assert_eq!(out.status.code(), None, "{}", text(&out));
    gallery("crashed_pending", &repo, "CRASHED", &[("CRASHED", "P1")], 1);
}

#[test]
fn missing_agent_is_a_tool_failure() {
    let (repo, dir) = new_loop(WORKER, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    fs::remove_file(repo.bin.path().join("fake-agent")).unwrap();
    assert_code(&repo.run_loop(&dir, &[], &[]), 2, "run-loop");
    gallery("tool_failure", &repo, "READY", &[("TOOL_FAILURE", "P1")], 1);
}

/// Contract 2.0 has no dirty baseline: the loop works in its own workspace from the user's
/// HEAD commit, so the user's uncommitted edit of a file the agent also changes is never in a
/// loop commit, stays in the user's checkout as it was, and is nothing for the audit to report.
#[test]
fn the_users_uncommitted_edit_never_reaches_a_loop_commit() {
    let repo = Repo::new();
    repo.write("README.md", "edited by the user before the loop\n");
    let agent = repo.agent("fake-agent", "echo agent >> README.md");
    let dir = repo.init_loop(&agent, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "run-loop --once",
    );
    assert_eq!(
        repo.read("README.md"),
        "edited by the user before the loop\n"
    );
    assert_eq!(
        repo.git(&["status", "--porcelain", "--", "README.md"]),
        " M README.md\n"
    );
    let committed = repo.git(&["show", "orbit/test-goal:README.md"]);
    assert_eq!(committed, "test repository\nagent\n");
    let touched = repo.git(&[
        "log",
        "--format=%H",
        "main..orbit/test-goal",
        "--",
        "README.md",
    ]);
    assert_eq!(
        touched.lines().count(),
        1,
        "one loop commit changed README.md"
    );
    let v = gallery("user_edit_kept_out", &repo, "IDLE", &[], 0);
    assert!(classes(&v).is_empty(), "{v}");
}

/// A 1.0 loop's record of baseline-dirty paths it changed is still reported.
#[test]
fn a_contract_1_record_of_baseline_dirty_paths_is_a_commit_scope_risk() {
    let (repo, dir) = one_tick();
    fs::write(
        dir.join("iterations/000001/baseline-touched.txt"),
        "README.md\n",
    )
    .unwrap();
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert_eq!(
        classes(&v),
        vec![("COMMIT_SCOPE_RISK".to_string(), "P2".to_string())]
    );
    assert_eq!(
        v["loops"][0]["findings"][0]["evidence"],
        "iterations/000001/baseline-touched.txt:1"
    );
}

#[test]
fn verify_without_checks_is_a_validator_gap() {
    let (repo, dir) = one_tick();
    edit(&dir.join("loop.toml"), |t| {
        t.replace("verify = [\"test -f ok.txt\"]", "verify = []")
    });
    assert_ok(
        &repo.orbit(&["init", "--force", "--dir", LOOP]),
        "orbit init --force",
    );
    gallery(
        "validator_gap",
        &repo,
        "IDLE",
        &[("VALIDATOR_GAP", "P1")],
        1,
    );
}

#[test]
fn missing_progress_is_contract_missing() {
    let (repo, dir) = one_tick();
    fs::remove_file(dir.join("progress.md")).unwrap();
    gallery(
        "contract_missing",
        &repo,
        "IDLE",
        &[("CONTRACT_MISSING", "P1")],
        1,
    );
}

// ---- the workspace (contract 2.0)

/// Runs a finding's fix as a user would paste it, in the repository.
fn apply_fix(repo: &Repo, fix: &str) {
    let mut cmd = command("bash");
    cmd.arg("-c")
        .arg(fix)
        .current_dir(repo.path())
        .env("PATH", repo.path_env());
    assert_ok(&run_bounded(cmd, Duration::from_secs(60)), fix);
}

/// The one finding of `class` in an audit, with its fix.
fn finding(v: &serde_json::Value, class: &str) -> serde_json::Value {
    v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["class"] == class)
        .unwrap_or_else(|| panic!("no {class} in {v}"))
        .clone()
}

/// Writes a file of the test loop's workspace.
fn write_ws(repo: &Repo, rel: &str, content: &str) {
    let p = repo.ws().join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

/// `git -C <workspace> ARGS`.
fn ws_git(repo: &Repo, args: &[&str]) -> String {
    let ws = repo.ws().display().to_string();
    let mut all = vec!["-C", ws.as_str()];
    all.extend_from_slice(args);
    repo.git(&all)
}

#[test]
fn a_deleted_workspace_is_missing_and_its_fix_brings_it_back_from_the_branch() {
    let (repo, dir) = one_tick();
    fs::remove_dir_all(repo.ws()).unwrap();
    let v = gallery(
        "workspace_missing",
        &repo,
        "IDLE",
        &[("WORKSPACE_MISSING", "P1")],
        1,
    );
    let f = finding(&v, "WORKSPACE_MISSING");
    // Evidence: the state's WORKSPACE line; and no pin of a file in it is called changed.
    assert_eq!(
        f["evidence"],
        format!("state.env:{}", state_key_line(&dir, "WORKSPACE"))
    );
    assert_eq!(classes(&v).len(), 1, "{v}");
    apply_fix(&repo, f["fix"].as_str().unwrap());
    assert_eq!(repo.ws_read("work.txt"), "work 1\n");
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "run-loop after the fix",
    );
}

#[test]
fn a_workspace_that_is_another_repository_is_broken() {
    let (repo, _dir) = one_tick();
    let ws = repo.ws();
    fs::remove_dir_all(&ws).unwrap();
    fs::create_dir_all(&ws).unwrap();
    let mut init = command("git");
    init.arg("-C").arg(&ws).args(["init", "-q"]);
    assert_ok(&run_bounded(init, Duration::from_secs(30)), "git init");
    let v = gallery(
        "workspace_foreign",
        &repo,
        "IDLE",
        &[("WORKSPACE_BROKEN", "P1")],
        1,
    );
    let f = finding(&v, "WORKSPACE_BROKEN");
    assert!(f["evidence"].as_str().unwrap().ends_with("/.git:1"), "{f}");
    apply_fix(&repo, f["fix"].as_str().unwrap());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    assert!(
        repo.ws_sibling(".moved/.git").is_dir(),
        "moved, not deleted"
    );
}

#[test]
fn a_workspace_on_another_branch_is_broken_until_switched_back() {
    let (repo, _dir) = one_tick();
    ws_git(&repo, &["switch", "-q", "-c", "elsewhere"]);
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert_eq!(
        classes(&v),
        vec![("WORKSPACE_BROKEN".to_string(), "P1".to_string())]
    );
    let f = finding(&v, "WORKSPACE_BROKEN");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("on the branch elsewhere"),
        "{f}"
    );
    assert!(f["evidence"].as_str().unwrap().ends_with("/HEAD:1"), "{f}");
    assert_eq!(
        f["fix"],
        format!("git -C {} switch orbit/test-goal", state_ws(&repo))
    );
    apply_fix(&repo, f["fix"].as_str().unwrap());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    // A detached HEAD is off the branch too.
    ws_git(&repo, &["switch", "-q", "--detach"]);
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    let f = finding(&v, "WORKSPACE_BROKEN");
    assert!(
        f["message"].as_str().unwrap().contains("detached HEAD"),
        "{f}"
    );
}

/// The workspace's absolute path as state.env records it.
fn state_ws(repo: &Repo) -> String {
    state_value(&repo.join(LOOP), "WORKSPACE")
}

/// The 1-based line of a key in state.env.
fn state_key_line(dir: &Path, key: &str) -> usize {
    let text = fs::read_to_string(dir.join("state.env")).unwrap();
    orbit::state::key_line(&text, key)
}

#[test]
fn a_hand_edit_in_the_workspace_between_iterations_is_dirty() {
    let (repo, _dir) = one_tick();
    write_ws(&repo, "README.md", "edited in the workspace\n");
    write_ws(&repo, "scratch.txt", "new\n");
    let v = gallery(
        "workspace_dirty",
        &repo,
        "IDLE",
        &[("WORKSPACE_DIRTY", "P1")],
        1,
    );
    let f = finding(&v, "WORKSPACE_DIRTY");
    assert_eq!(f["evidence"], format!("{}/README.md:0", state_ws(&repo)));
    let m = f["message"].as_str().unwrap();
    assert!(
        m.starts_with("2 path(s)") && m.contains("README.md, scratch.txt"),
        "{f}"
    );
    apply_fix(&repo, f["fix"].as_str().unwrap());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    // The change is set aside, not lost.
    assert!(ws_git(&repo, &["stash", "list"]).lines().count() == 1);
}

#[test]
fn a_commit_added_by_hand_is_not_a_move_but_a_reset_is() {
    let (repo, dir) = one_tick();
    // A commit on top of the loop's: the branch only grew.
    write_ws(&repo, "hint.txt", "try the parser first\n");
    ws_git(&repo, &["add", "hint.txt"]);
    ws_git(&repo, &["commit", "-q", "-m", "a hint"]);
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    // A reset that drops the loop's commits moves the branch.
    ws_git(&repo, &["reset", "-q", "--hard", "main"]);
    let v = gallery("branch_moved", &repo, "IDLE", &[("BRANCH_MOVED", "P1")], 1);
    let f = finding(&v, "BRANCH_MOVED");
    assert_eq!(f["evidence"], ".branch-head:1");
    assert_eq!(f["fix"], format!("orbit recover {LOOP}"));
    // The runner refuses the same loop, as the audit said.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 2, "run-loop on a moved branch");
    assert_eq!(events_named(&dir, "branch_moved").len(), 1);
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    finding(&v, "BRANCH_MOVED");
}

#[test]
fn files_where_a_ready_loop_would_make_its_workspace_are_reported_before_the_first_run() {
    let (repo, dir) = new_loop(WORKER, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    write_ws(&repo, "notes.txt", "someone's files\n");
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert_eq!(
        classes(&v),
        vec![("WORKSPACE_BROKEN".to_string(), "P1".to_string())]
    );
    let f = finding(&v, "WORKSPACE_BROKEN");
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    let line = toml
        .lines()
        .position(|l| l.starts_with("workspace = "))
        .unwrap()
        + 1;
    assert_eq!(f["evidence"], format!("loop.toml:{line}"));
    // The runner refuses the same path, as the audit said.
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 2, "the first run");
    apply_fix(&repo, f["fix"].as_str().unwrap());
    // What remains is the refused run's failure in runner.log, until a run succeeds.
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert_eq!(
        classes(&v),
        vec![("TOOL_FAILURE".to_string(), "P1".to_string())]
    );
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "the first run after the fix",
    );
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
}

#[test]
fn a_contract_1_loop_is_outdated_until_migrated() {
    let (repo, dir) = one_tick();
    // The state a 1.0 loop has: no WORKSPACE key.
    reseal_state(&dir, |t| {
        t.replace(
            &format!("CONTRACT_VERSION={}", orbit::config::CONTRACT_VERSION),
            "CONTRACT_VERSION=1.0.0",
        )
        .lines()
        .filter(|l| !l.starts_with("WORKSPACE="))
        .map(|l| format!("{l}\n"))
        .collect()
    });
    // As a 1.0 runner left it: the journal names this state.
    crate::support::announce_state(&dir);
    let v = gallery(
        "contract_outdated",
        &repo,
        "IDLE",
        &[("CONTRACT_OUTDATED", "P1")],
        1,
    );
    let f = finding(&v, "CONTRACT_OUTDATED");
    assert_eq!(f["evidence"], "state.env:1");
    assert_eq!(f["fix"], format!("orbit recover {LOOP} --migrate"));
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        4,
        "the runner refuses a 1.0 state",
    );
}

// ---- live loops

/// Every file under `dir` with its bytes.
fn tree_bytes(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            out.insert(e.path().to_path_buf(), fs::read(e.path()).unwrap());
        }
    }
    out
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn audit_during_a_running_loop_is_running_and_touches_nothing() {
    let repo = Repo::new();
    let gate = repo.bin.path().join("release");
    let started = repo.bin.path().join("started");
    let body = format!(
        "echo x >> work.txt\ntouch '{}'\nwhile [ ! -f '{}' ]; do sleep 0.05; done",
        started.display(),
        gate.display()
    );
    let agent = repo.agent("fake-agent", &body);
    let dir = repo.init_loop(&agent, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    let mut cmd = command("bash");
    cmd.arg(dir.join("run-loop.sh"))
        .arg("--once")
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("KILL_GRACE", "1");
    // The bound covers the hundred audits below too: a safety net, not a pace.
    let runner = std::thread::spawn(move || run_bounded(cmd, Duration::from_secs(600)));
    wait_for("the agent to start", Duration::from_secs(60), || {
        started.exists()
    });

    assert!(
        orbit::audit::lock_held(&dir),
        "the runner's lock is not seen"
    );
    let index = repo.join(".git/index");
    let before = tree_bytes(&dir);
    let index_before = fs::read(&index).unwrap();
    for i in 0..100 {
        let args: &[&str] = match i % 3 {
            0 => &["audit", LOOP],
            1 => &["audit", "--json"],
            _ => &["status"],
        };
        let out = orbit_nc(&repo, args);
        assert!(!repo.join(".git/index.lock").exists());
        if i < 3 {
            let t = String::from_utf8_lossy(&out.stdout);
            assert!(
                t.contains("RUNNING"),
                "audit during a live run:\n{}",
                text(&out)
            );
            assert!(
                !t.contains("CRASHED") && !t.contains("ORPHAN"),
                "{}",
                text(&out)
            );
        }
    }
    assert_eq!(tree_bytes(&dir), before, "audit changed the loop directory");
    assert_eq!(
        fs::read(&index).unwrap(),
        index_before,
        "audit changed the git index"
    );

    fs::write(&gate, "").unwrap();
    let out = runner.join().unwrap();
    assert_code(&out, 10, "the runner after 100 audits");
    assert!(
        !orbit::audit::lock_held(&dir),
        "the lock is seen after the runner ended"
    );
    let after = orbit_nc(&repo, &["audit", "--json", LOOP]);
    assert_eq!(
        json_of(&after)["loops"][0]["verdict"],
        "IDLE",
        "{}",
        text(&after)
    );
}

#[test]
fn audit_after_sigkill_mid_iteration_is_crashed_with_orphans() {
    let repo = Repo::new();
    let started = repo.bin.path().join("started");
    let body = format!("touch '{}'\nsleep 60", started.display());
    let agent = repo.agent("fake-agent", &body);
    let dir = repo.init_loop(&agent, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    let mut child = command("bash")
        .arg(dir.join("run-loop.sh"))
        .arg("--once")
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the agent to start", Duration::from_secs(60), || {
        started.exists()
    });
    let live = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert_eq!(live["loops"][0]["verdict"], "RUNNING", "{live}");
    child.kill().unwrap();
    child.wait().unwrap();

    let canonical = fs::canonicalize(&dir).unwrap();
    let marker = format!("ORBIT_OWNER={}", canonical.display());
    let out = orbit_nc(&repo, &["audit", "--json", LOOP]);
    let orphans = processes_with_env(&marker);
    for pid in &orphans {
        let _ = command("kill").arg("-KILL").arg(pid.to_string()).status();
    }
    assert_code(&out, 3, "audit after SIGKILL with the agent still alive");
    let v = json_of(&out);
    assert_eq!(v["loops"][0]["verdict"], "CRASHED", "{v}");
    let found = classes(&v);
    assert!(
        found.contains(&("ORPHAN_AGENT".into(), "P0".into())),
        "{found:?}"
    );
    assert!(
        found.contains(&("CRASHED".into(), "P1".into())),
        "{found:?}"
    );
    let crash = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["class"] == "CRASHED")
        .unwrap()
        .clone();
    assert_eq!(crash["fix"], format!("orbit recover {LOOP}"));

    wait_for("the orphans to go", Duration::from_secs(10), || {
        processes_with_env(&marker).is_empty()
    });
    let out = orbit_nc(&repo, &["audit", "--json", LOOP]);
    assert_code(&out, 1, "audit after SIGKILL, orphans gone");
    let found = classes(&json_of(&out));
    assert!(!found.iter().any(|(c, _)| c == "ORPHAN_AGENT"), "{found:?}");
}

#[test]
fn agent_editing_a_protected_test_is_reward_hack_p0() {
    let repo = Repo::new();
    repo.write("tests/guard.rs", "#[test] fn guard() { assert!(false); }\n");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "guard"]);
    let agent = repo.agent(
        "fake-agent",
        "echo '#[test] fn guard() {}' > tests/guard.rs",
    );
    let dir = repo.init_loop(
        &agent,
        &["test -f ok.txt"],
        &["--protect", "tests/**", "--loop-timeout", "8h"],
    );
    // The first run pins tests/guard.rs; the agent's edit then trips the pin.
    assert_code(
        &repo.run_loop(&dir, &[], &[]),
        3,
        "run-loop (the runner's own gate)",
    );
    let v = gallery("reward_hack", &repo, "ABORTED", &[("REWARD_HACK", "P0")], 3);
    let f = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["class"] == "REWARD_HACK" && f["severity"] == "P0")
        .unwrap()
        .clone();
    // The pin names the protected file by its absolute path in the workspace.
    let ws = state_value(&dir, "WORKSPACE");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{ws}/tests/guard.rs changed")),
        "{f}"
    );
    assert!(
        f["evidence"].as_str().unwrap().starts_with("pins.sha256:"),
        "{f}"
    );
    // The aborted iteration's change is withheld in the workspace: that is no dirt.
    assert!(
        !classes(&v).iter().any(|(c, _)| c == "WORKSPACE_DIRTY"),
        "{v}"
    );
    assert!(!ws_git(&repo, &["status", "--porcelain"]).is_empty());
}

#[test]
fn lock_held_by_a_stray_process_is_stale() {
    let (repo, dir) = one_tick();
    if command("flock").arg("--version").output().is_err() {
        eprintln!("notice: flock is not installed; skipping the stray-holder test");
        return;
    }
    let held = repo.bin.path().join("held");
    let mut holder = command("bash")
        .arg("-c")
        .arg("exec 9>>\"$1\"; flock 9; touch \"$2\"; exec sleep 60")
        .arg("stray-holder")
        .arg(dir.join(".run-loop.lock"))
        .arg(&held)
        .spawn()
        .unwrap();
    wait_for("the stray holder", Duration::from_secs(60), || {
        held.exists()
    });
    let out = orbit_nc(&repo, &["audit", "--json", LOOP]);
    let run = repo.run_loop(&dir, &["--once"], &[]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_code(&run, 20, "a runner while a stray process holds the lock");
    assert_code(&out, 1, "audit with a stray lock holder");
    let v = json_of(&out);
    assert_eq!(v["loops"][0]["verdict"], "IDLE", "{v}");
    let f = &v["loops"][0]["findings"][0];
    assert_eq!(f["class"], "STALE_LOCK", "{v}");
    assert_eq!(f["fix"], format!("kill {}", holder.id()), "{v}");
}

// ---- status, discovery, scale

#[test]
fn status_prints_one_line_per_loop() {
    let (repo, _dir) = one_tick();
    let agent = repo.bin.path().join("fake-agent");
    let exec = agent.display().to_string();
    let out = orbit_nc(
        &repo,
        &[
            "init",
            "second goal",
            "--engine",
            "custom",
            "--exec",
            &exec,
            "--verify",
            "false",
            "--usd-cap",
            "5",
        ],
    );
    assert_ok(&out, "orbit init (second loop)");
    let status = orbit_nc(&repo, &["status"]);
    if status.status.code() != Some(0) {
        let a = orbit_nc(&repo, &["audit"]);
        panic!("AUDIT {}", String::from_utf8_lossy(&a.stdout));
    }
    assert_code(&status, 0, "orbit status");
    let summary = orbit_nc(&repo, &["audit", "--summary"]);
    // The same lines, but for the last activity's age: a second may pass between the two.
    let ages_out = |o: &std::process::Output| -> String {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| {
                let words: Vec<&str> = l.split(' ').collect();
                (0..words.len())
                    .map(|i| match words.get(i + 1) {
                        Some(&"ago") => "<age>",
                        _ => words[i],
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(ages_out(&status), ages_out(&summary));
    let t = String::from_utf8_lossy(&status.stdout).into_owned();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 2, "{t}");
    assert!(
        lines[0].starts_with(".orbit/second-goal") && lines[0].contains("READY"),
        "{t}"
    );
    assert!(
        lines[0].contains("0/20") && lines[0].contains("$0/$5"),
        "{t}"
    );
    assert!(
        lines[1].starts_with(".orbit/test-goal") && lines[1].contains("IDLE"),
        "{t}"
    );
    assert!(
        lines[1].contains("1/20") && lines[1].contains("verify fail"),
        "{t}"
    );
    assert!(lines[1].ends_with(" ago"), "{t}");
    // Where the work is: the loop branch, the workspace, the command to see the commits;
    // nothing yet for a loop that has not run.
    let ws = repo.ws().display().to_string();
    assert!(
        lines[1].contains(&format!(
            "  orbit/test-goal  {ws}  next: git -C {ws} log --oneline  "
        )),
        "{t}"
    );
    assert!(
        !lines[0].contains("next:") && !lines[0].contains("/workspaces/"),
        "{t}"
    );
    let json = json_of(&orbit_nc(&repo, &["audit", "--json"]));
    assert_eq!(json["loops"].as_array().unwrap().len(), 2);
}

#[test]
fn usage_errors_exit_2() {
    let repo = Repo::new();
    let out = orbit_nc(&repo, &["audit"]);
    assert_code(&out, 2, "audit with no loop");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("orbit init"),
        "{}",
        text(&out)
    );
    let out = orbit_nc(&repo, &["audit", "no-such-dir"]);
    assert_code(&out, 2, "audit of a non-loop");
}

#[test]
fn huge_histories_are_read_from_their_tails() {
    let (repo, dir) = one_tick();
    // A 1 GB runner.log (sparse, then real lines) and an events.jsonl whose 300 MB prefix
    // stands for 100,000 iterations of history: only their tails may be read.
    let log = dir.join("runner.log");
    let tail = fs::read(&log).unwrap();
    let f = fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let mut f = fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, b"\n").unwrap();
    std::io::Write::write_all(&mut f, &tail).unwrap();
    drop(f);
    let ev = dir.join("events.jsonl");
    let events = fs::read(&ev).unwrap();
    let f = fs::File::create(&ev).unwrap();
    f.set_len(300 << 20).unwrap();
    drop(f);
    let mut f = fs::OpenOptions::new().append(true).open(&ev).unwrap();
    std::io::Write::write_all(&mut f, b"\n").unwrap();
    std::io::Write::write_all(&mut f, &events).unwrap();
    drop(f);
    // The signature log and ledger of 100,000 iterations.
    let mut sigs = String::new();
    let mut ledger = String::new();
    for i in 1..=100_000u64 {
        sigs.push_str(&format!("{i}\t{:040x}\n", i));
        ledger.push_str(&format!("{i}\t0\tunknown\n"));
    }
    fs::write(dir.join(".action-sig.log"), sigs).unwrap();
    fs::write(dir.join("cost.ledger"), ledger).unwrap();

    // What the audit reads is counted, not timed: bash's read count in /proc/$$/io takes in
    // its children's once it has reaped them, so the difference across the audit is what
    // the audit read (a full read of either file is hundreds of megabytes).
    let mut cmd = command("bash");
    cmd.arg("-c")
        .arg(
            r#"rchar() { local l; while read -r l; do [[ $l == rchar:* ]] && REPLY=${l#rchar: }; done </proc/$$/io; }
rchar; before=$REPLY
"$@"
rc=$?
rchar; echo "audit-read-bytes=$((REPLY - before))" >&2
exit "$rc""#,
        )
        .arg("audit")
        .arg(orbit_bin())
        .args(["audit", "--json", LOOP])
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("NO_COLOR", "1");
    let out = run_bounded(cmd, Duration::from_secs(120));
    let read: u64 = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("audit-read-bytes="))
        .unwrap_or_else(|| panic!("no read count: {}", text(&out)))
        .parse()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["loops"][0]["verdict"], "IDLE", "{}", text(&out));
    // The events' prefix is not an event chain; a whole-file read would report it.
    assert!(
        !classes(&v).iter().any(|(c, _)| c == "JOURNAL_BROKEN"),
        "{}",
        text(&out)
    );
    // Their tails, the 100,000-line files beside them (some 6 MB) and the rest of the loop
    // directory: far below a whole runner.log (1 GB) or events.jsonl (300 MB).
    assert!(
        read < 64 << 20,
        "the audit read {read} bytes: a history was read in full"
    );
}

// ---- every parser and the audit itself, on arbitrary bytes

mod arbitrary {
    use proptest::prelude::*;
    use std::fs;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = orbit::state::State::parse(&bytes);
            let _ = orbit::state::Sidecar::parse(&bytes);
            let _ = orbit::progress::parse(&bytes);
            let _ = orbit::events::read(&bytes);
            let _ = orbit::pins::parse(&bytes);
            let _ = orbit::ledger::parse(&bytes);
            let _ = orbit::sigs::parse(&bytes);
            let _ = orbit::result_env::parse(&bytes);
        }

        /// A loop directory whose every live file holds arbitrary bytes: the audit gives a
        /// verdict and never panics.
        #[test]
        fn audit_never_panics_on_damaged_loops(
            files in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 12),
            next in 1u64..4,
        ) {
            let d = tempfile::tempdir().unwrap();
            let dir = d.path().join("loop");
            fs::create_dir_all(dir.join(format!("iterations/{next:06}"))).unwrap();
            fs::create_dir_all(dir.join(format!("iterations/{:06}", next.saturating_sub(1)))).unwrap();
            let names = [
                "state.env", "state.env.sha256", "pins.sha256", "progress.md", "events.jsonl",
                "cost.ledger", ".action-sig.log", "runner.log", "loop.toml", "verify.sh",
            ];
            for (name, bytes) in names.iter().zip(&files) {
                fs::write(dir.join(name), bytes).unwrap();
            }
            fs::write(dir.join(format!("iterations/{next:06}/result.env")), &files[10]).unwrap();
            fs::write(dir.join(format!("iterations/{:06}/result.env", next.saturating_sub(1))), &files[11]).unwrap();
            // A parseable state with a sealed sidecar, so the deeper checks run too.
            if files[0].first().is_some_and(|b| b % 2 == 0) {
                let mut st = orbit::state::State::ready("1.0.0", 5);
                st.next_iteration = next;
                use orbit::contract::Status;
                st.last_status = [Status::Continue, Status::Done, Status::Aborted, Status::Blocked][files[0].len() % 4];
                let text = st.print();
                fs::write(dir.join("state.env"), &text).unwrap();
                fs::write(dir.join("state.env.sha256"), orbit::state::Sidecar::for_state(&text, 1).print()).unwrap();
            }
            let r = orbit::audit::audit_loop(&dir, "loop");
            // A state that cannot be read is CORRUPT (or RUNNING), never one of the verdicts
            // that a readable state gives.
            if r.status.is_none() {
                prop_assert!(matches!(r.verdict, orbit::contract::Verdict::Corrupt | orbit::contract::Verdict::Running));
            }
            for f in &r.findings {
                prop_assert!(f.evidence.contains(':'));
            }
        }
    }
}

// ---- files that are not what the runner writes

/// `orbit ARGS` under a watchdog: a command that blocks (on a FIFO, say) fails the test
/// after 20 s instead of hanging the suite.
fn orbit_watched(repo: &Repo, args: &[&str]) -> Output {
    let mut cmd = command(orbit_bin());
    cmd.args(args)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("NO_COLOR", "1");
    run_bounded(cmd, Duration::from_secs(20))
}

fn mkfifo(path: &Path) {
    let st = command("mkfifo").arg(path).status().unwrap();
    assert!(st.success(), "mkfifo {}", path.display());
}

#[test]
fn a_loop_file_swapped_for_a_fifo_or_a_link_is_loop_tamper_and_nothing_waits_on_it() {
    let (repo, dir) = one_tick();
    let aside = repo.bin.path().join("aside");
    for rel in [
        "state.env",
        "events.jsonl",
        "progress.md",
        "iterations/000001/result.env",
        "pins.sha256",
    ] {
        for kind in ["fifo", "symlink"] {
            let path = dir.join(rel);
            fs::rename(&path, &aside).unwrap();
            let what = if kind == "fifo" {
                mkfifo(&path);
                "a FIFO"
            } else {
                std::os::unix::fs::symlink(&aside, &path).unwrap();
                "a symlink"
            };
            let case = format!("{rel} as {what}");

            let out = orbit_watched(&repo, &["audit", "--json", LOOP]);
            assert_code(&out, 3, &case);
            let v = json_of(&out);
            let f = finding(&v, "LOOP_TAMPER");
            assert_eq!(f["severity"], "P0", "{case}: {f}");
            assert_eq!(f["evidence"], format!("{rel}:0"), "{case}: {f}");
            assert!(f["message"].as_str().unwrap().contains(what), "{case}: {f}");
            // What comes back after the removal: the rebuilt records, or (for the manifest)
            // the pins of the files as they are.
            let flag = if rel == "pins.sha256" { " --repin" } else { "" };
            assert_eq!(
                f["fix"],
                format!("rm -- {LOOP}/{rel} && orbit recover {LOOP}{flag}"),
                "{case}"
            );
            let out = orbit_watched(&repo, &["audit", LOOP]);
            assert_code(&out, 3, &case);
            assert!(String::from_utf8_lossy(&out.stdout).contains("LOOP_TAMPER"));

            let out = orbit_watched(&repo, &["status", LOOP]);
            assert_code(&out, 3, &format!("{case}: status"));
            assert!(
                String::from_utf8_lossy(&out.stdout).contains(&format!("next: orbit audit {LOOP}")),
                "{case}: {}",
                text(&out)
            );

            // The report either is made without the file or says why it cannot be.
            let out = orbit_watched(&repo, &["report", LOOP]);
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() || (said.contains(rel) && said.contains(what)),
                "{case}: report\n{}",
                text(&out)
            );
            if out.status.success() {
                assert!(
                    String::from_utf8_lossy(&out.stdout).contains("LOOP_TAMPER"),
                    "{case}: the report names the finding\n{}",
                    text(&out)
                );
            }

            let before = fs::read_dir(&dir).unwrap().count();
            let out = orbit_watched(&repo, &["recover", "--dry-run", LOOP]);
            assert_code(&out, 2, &format!("{case}: recover --dry-run"));
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                said.contains(&format!("{rel} is {what}")) && said.contains("loop_tamper"),
                "{case}: {said}"
            );
            let out = orbit_watched(&repo, &["recover", LOOP]);
            assert_code(&out, 2, &format!("{case}: recover"));

            let mut cmd = command("bash");
            cmd.arg(dir.join("recover.sh"))
                .arg("--dry-run")
                .current_dir(repo.path())
                .env("PATH", repo.path_env());
            let out = run_bounded(cmd, Duration::from_secs(20));
            assert_code(&out, 2, &format!("{case}: recover.sh --dry-run"));
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                said.contains(&format!("{rel} is {what}")) && said.contains("loop_tamper"),
                "{case}: {said}"
            );
            assert_eq!(
                fs::read_dir(&dir).unwrap().count(),
                before,
                "{case}: nothing written"
            );

            fs::remove_file(&path).unwrap();
            fs::rename(&aside, &path).unwrap();
        }
    }
    // Put back, the loop is whole again.
    let out = orbit_watched(&repo, &["audit", "--json", LOOP]);
    assert_code(&out, 0, "the restored loop");
    // The pasted fix of a FIFO state.env brings the loop back: removed, rebuilt.
    let next = state_value(&dir, "NEXT_ITERATION");
    fs::remove_file(dir.join("state.env")).unwrap();
    mkfifo(&dir.join("state.env"));
    let f = finding(
        &json_of(&orbit_watched(&repo, &["audit", "--json", LOOP])),
        "LOOP_TAMPER",
    );
    apply_orbit_fix(&repo, f["fix"].as_str().unwrap());
    let out = orbit_watched(&repo, &["audit", "--json", LOOP]);
    assert_code(&out, 0, "after the fix");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), next);
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "the loop goes on",
    );
}

/// Runs a finding's fix as a user would paste it, with orbit on PATH.
fn apply_orbit_fix(repo: &Repo, fix: &str) {
    let mut cmd = command("bash");
    cmd.arg("-c").arg(fix).current_dir(repo.path()).env(
        "PATH",
        format!(
            "{}:{}",
            orbit_bin().parent().unwrap().display(),
            repo.path_env()
        ),
    );
    assert_ok(&run_bounded(cmd, Duration::from_secs(60)), fix);
}

// ---- integrity stops with no pin to show: loop and git tampering

#[test]
fn a_git_tamper_stop_is_git_tamper_and_its_fix_says_what_to_review() {
    let root = |repo: &Repo| fs::canonicalize(repo.path()).unwrap();
    let repo = Repo::new();
    let agent = repo.agent(
        "swapper",
        &format!(
            "cat >/dev/null\n[ \"$ORBIT_PHASE\" = work ] || exit 0\nmark=$(dirname -- \"$0\")/swapped\nif [ -e \"$mark\" ]; then echo work >> work.txt; exit 0; fi\ntouch \"$mark\"\nws=$ORBIT_WORKSPACE\ncd /\nrm -rf \"$ws\"\nln -s '{}' \"$ws\"",
            root(&repo).display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f ok.txt"], &["--loop-timeout", "8h"]);
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 3, "swapped");
    fs::remove_file(repo.ws()).unwrap();
    // The workspace comes back; the stop stays (only --repin moves a git_tamper on).
    assert_ok(&orbit_nc(&repo, &["recover", LOOP]), "recover");
    assert_eq!(state_value(&dir, "STOP_REASON"), "git_tamper");
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(
        !classes(&v).iter().any(|(c, _)| c == "SCRIPT_TAMPER"),
        "{v}"
    );
    let f = finding(&v, "GIT_TAMPER");
    assert_eq!(f["severity"], "P0");
    let msg = f["message"].as_str().unwrap();
    let r = root(&repo).display().to_string();
    for want in [
        format!("git -C {r} config --list --show-origin"),
        format!("{r}/.git/hooks"),
        format!("{r}/.git/info"),
    ] {
        assert!(msg.contains(&want), "{want} not in {msg}");
    }
    assert!(
        f["evidence"].as_str().unwrap().starts_with("events.jsonl:"),
        "{f}"
    );
    assert_eq!(f["fix"], format!("orbit recover {LOOP} --repin"));
    apply_orbit_fix(&repo, f["fix"].as_str().unwrap());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "the loop goes on",
    );
}

#[test]
fn a_loop_tamper_stop_names_the_file_and_recover_moves_on() {
    let (repo, dir) = one_tick();
    // A runner that found cost.ledger changed behind it stopped like this.
    let generation: u64 = state_value(&dir, "GEN").parse().unwrap();
    reseal_state(&dir, |t| {
        t.replace("LAST_STATUS=CONTINUE", "LAST_STATUS=ABORTED")
            .replace("STOP_REASON=tick", "STOP_REASON=loop_tamper")
            .replace(
                &format!("GEN={generation}\n"),
                &format!("GEN={}\n", generation + 1),
            )
    });
    append_event(
        &dir,
        "integrity_fail",
        1,
        &[
            ("when", "after agent"),
            ("code", "loop_tamper"),
            ("file", "cost.ledger"),
            ("expected", "aaaa"),
            ("actual", "bbbb"),
        ],
    );
    let generation = (generation + 1).to_string();
    append_event(
        &dir,
        "state_write",
        1,
        &[
            ("gen", &generation),
            ("status", "ABORTED"),
            ("reason", "loop_tamper"),
            ("next_iteration", "2"),
        ],
    );
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert_eq!(v["loops"][0]["verdict"], "ABORTED");
    let f = finding(&v, "LOOP_TAMPER");
    assert_eq!(f["severity"], "P0");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("cost.ledger changed behind the runner (expected aaaa, found bbbb)"),
        "{f}"
    );
    assert!(f["evidence"].as_str().unwrap().starts_with("events.jsonl:"));
    assert_eq!(f["fix"], format!("orbit recover {LOOP}"));
    assert!(
        !classes(&v).iter().any(|(c, _)| c == "SCRIPT_TAMPER"),
        "{v}"
    );
    apply_orbit_fix(&repo, f["fix"].as_str().unwrap());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
}

#[test]
fn a_permission_file_that_appeared_is_permission_hijack_and_its_fix_removes_it() {
    let (repo, dir) = new_loop(
        "mark=$(dirname -- \"$0\")/planted\nif [ \"$ORBIT_ITERATION\" = 2 ] && [ ! -e \"$mark\" ]; then touch \"$mark\"; mkdir -p .claude && echo '{\"permissions\":{\"allow\":[\"Bash(*)\"]}}' > .claude/settings.local.json; fi\necho \"work $ORBIT_ITERATION\" >> work.txt",
        &["test -f ok.txt"],
        &["--loop-timeout", "8h"],
    );
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "tick 1");
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 3, "tick 2");
    let planted = fs::canonicalize(repo.ws())
        .unwrap()
        .join(".claude/settings.local.json");
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    let f = finding(&v, "PERMISSION_HIJACK");
    assert_eq!(f["severity"], "P0");
    assert_eq!(f["evidence"], format!("{}:1", planted.display()));
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("appeared after the first run"),
        "{f}"
    );
    assert_eq!(f["fix"], format!("orbit recover {LOOP} --restore-pinned"));
    apply_orbit_fix(&repo, f["fix"].as_str().unwrap());
    assert!(!planted.exists());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    // The aborted iteration's change stays in the workspace for review (WORKSPACE_DIRTY);
    // the hijack is gone.
    assert!(
        !classes(&v).iter().any(|(c, _)| c == "PERMISSION_HIJACK"),
        "{v}"
    );
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "the loop goes on",
    );
}

// ---- records against the journal that announced them

#[test]
fn a_state_the_journal_did_not_record_is_loop_tamper_and_recover_rebuilds_it() {
    let (repo, dir) = one_tick();
    announce_records(&dir);
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "an announced journal is clean: {v}");
    // Sealed to match, same generation: only the journal's sha256 tells.
    reseal_state(&dir, |t| t.replace("VERIFY_STREAK=0", "VERIFY_STREAK=1"));
    let out = orbit_nc(&repo, &["audit", "--json", LOOP]);
    assert_code(&out, 3, "a state the runner did not write");
    let v = json_of(&out);
    let f = finding(&v, "LOOP_TAMPER");
    assert_eq!(f["severity"], "P0");
    assert!(
        f["evidence"].as_str().unwrap().starts_with("events.jsonl:"),
        "{f}"
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("state.env is not the state the runner wrote")
    );
    apply_orbit_fix(&repo, f["fix"].as_str().unwrap());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    assert_eq!(state_value(&dir, "VERIFY_STREAK"), "0", "rebuilt, not kept");
    // The recovery records the sha256 of the state it wrote.
    let rec = events_named(&dir, "recovery").pop().unwrap();
    assert_eq!(
        rec.value["state_sha256"],
        file_sha(&dir.join("state.env")),
        "{:?}",
        rec.value
    );
    // A generation the journal never recorded is drift, which recover repairs too.
    reseal_state(&dir, |t| {
        let g: u64 = t
            .lines()
            .find_map(|l| l.strip_prefix("GEN="))
            .unwrap()
            .parse()
            .unwrap();
        t.replace(&format!("GEN={g}\n"), &format!("GEN={}\n", g + 1))
    });
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    let f = finding(&v, "STATE_DRIFT");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("which the journal never recorded"),
        "{f}"
    );
    apply_orbit_fix(&repo, f["fix"].as_str().unwrap());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
    // orbit stop and resume record what they write the same way.
    assert_ok(&orbit_nc(&repo, &["stop", LOOP]), "stop");
    let w = events_named(&dir, "state_write").pop().unwrap();
    assert_eq!(w.value["sha256"], file_sha(&dir.join("state.env")));
    assert_ok(&orbit_nc(&repo, &["resume", LOOP]), "resume");
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(classes(&v).is_empty(), "{v}");
}

#[test]
fn a_record_changed_or_planted_behind_the_journal_is_loop_tamper_and_recover_sets_it_aside() {
    let (repo, dir) = one_tick();
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "tick 2");
    announce_records(&dir);
    let record = dir.join("iterations/000001/result.env");
    // Changed after the runner announced it.
    edit(&record, |t| t.replace("VERIFY=fail", "VERIFY=pass"));
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    let f = finding(&v, "LOOP_TAMPER");
    assert_eq!(f["evidence"], "iterations/000001/result.env:1");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("is not the record the runner wrote")
    );
    // Planted where the runner announces every record.
    fs::create_dir_all(dir.join("iterations/000007")).unwrap();
    fs::write(
        dir.join("iterations/000007/result.env"),
        "ITERATION=7\nVERIFY=pass\nVERDICT=DONE\n",
    )
    .unwrap();
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    let planted: Vec<&serde_json::Value> = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["class"] == "LOOP_TAMPER" && f["severity"] == "P0")
        .collect();
    assert_eq!(planted.len(), 2, "{v}");
    assert!(
        planted
            .iter()
            .any(|f| f["evidence"] == "iterations/000007/result.env:1"
                && f["message"].as_str().unwrap().contains("planted")),
        "{v}"
    );
    apply_orbit_fix(&repo, f["fix"].as_str().unwrap());
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    assert!(!classes(&v).iter().any(|(c, _)| c == "LOOP_TAMPER"), "{v}");
    assert!(
        dir.join("iterations/000001/untrusted.1/result.env")
            .is_file()
    );
    assert!(
        dir.join("iterations/000007/untrusted.1/result.env")
            .is_file()
    );
    assert!(!record.exists() && !dir.join("iterations/000007/result.env").exists());
}

#[test]
fn the_runners_own_unannounced_record_is_a_crash_it_redoes_not_tampering() {
    let (repo, dir) = one_tick();
    announce_records(&dir);
    // The runner wrote iteration 2's record and died before its iteration_result.
    fs::create_dir_all(dir.join("iterations/000002")).unwrap();
    fs::copy(
        dir.join("iterations/000001/result.env"),
        dir.join("iterations/000002/result.env"),
    )
    .unwrap();
    let out = orbit_nc(&repo, &["audit", "--json", LOOP]);
    assert_code(&out, 1, "P1, not P0");
    let v = json_of(&out);
    assert!(!classes(&v).iter().any(|(c, _)| c == "LOOP_TAMPER"), "{v}");
    let f = finding(&v, "CRASHED");
    assert_eq!(f["severity"], "P1");
    assert_eq!(f["evidence"], "iterations/000002/result.env:1");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("never announced (no iteration_result): the runner died right after writing it; the record is not evidence, and the next run does the iteration again"),
        "{f}"
    );
    assert_eq!(f["fix"], format!("orbit run {LOOP}"));
    assert_eq!(v["loops"][0]["verdict"], "CRASHED");
}

#[test]
fn a_circuit_opened_by_the_same_failure_says_so_not_zero_failed_iterations() {
    let (repo, dir) = new_loop(
        WORKER,
        &["echo 'assertion failed: parser rejects the input'; exit 1"],
        &["--loop-timeout", "8h"],
    );
    assert_code(&repo.run_loop(&dir, &[], &[]), 14, "BLOCKED");
    // The agent never failed: the rule that opened the circuit is the repeated failure.
    assert_eq!(state_value(&dir, "CB_FAILS"), "0");
    assert_eq!(state_value(&dir, "STOP_REASON"), "circuit_open");
    let v = json_of(&orbit_nc(&repo, &["audit", "--json", LOOP]));
    let f = finding(&v, "CIRCUIT_OPEN");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("the same verify failure (")
            && msg.contains(
                "three iterations in a row (iterations 1-3) while the tree kept changing"
            ),
        "{msg}"
    );
    assert!(!msg.contains("after 0 failed"), "{msg}");
    assert_eq!(
        f["evidence"].as_str().unwrap().split(':').next(),
        Some("iterations/000003/result.env")
    );
    assert_eq!(f["fix"], format!("orbit recover {LOOP} --reset-circuit"));
    // The report's next step says the same.
    let out = orbit_nc(&repo, &["report", LOOP]);
    assert_ok(&out, "report");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("the same verify failure"),
        "{}",
        text(&out)
    );
}
