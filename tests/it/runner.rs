//! run-loop.sh, executed for real: scripted fake agents in temporary git repositories.
//! Every scenario ends by checking that state.env, progress.md and events.jsonl agree.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{
    Repo, assert_code, assert_records_agree, command, count_check, counting_agent, events_named,
    processes_with_env, read_kv, run_bounded, state_value, text, wait_for,
};

fn dir_digest(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(dir).unwrap().display().to_string(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// The processes running `bash DIR/run-loop.sh` (the loop's runner), from /proc.
fn runner_of(dir: &Path) -> Vec<u32> {
    let script = dir.join("run-loop.sh");
    let script = script.as_os_str().as_encoded_bytes();
    let mut pids = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|arg| arg == script) {
            pids.push(pid);
        }
    }
    pids
}

fn assert_no_agent_left(dir: &Path) {
    let marker = format!("ORBIT_OWNER={}", fs::canonicalize(dir).unwrap().display());
    let left = processes_with_env(&marker);
    assert!(
        left.is_empty(),
        "processes of the loop are still alive: {left:?}"
    );
}

#[test]
fn succeeds_after_three_iterations_commits_each_and_stays_done() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 3);
    let dir = repo.init_loop(&agent, &[&count_check(3)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "loop to DONE");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("NEXUS_LOOP_STATUS: DONE\nNEXUS_LOOP_SUMMARY: "),
        "{stdout}"
    );
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "4");
    assert_eq!(state_value(&dir, "ITER_BRANCH"), "orbit/test-goal");
    assert_eq!(state_value(&dir, "ORIGIN_BRANCH"), "main");
    // Three work runs reported 0.25 each; the confirmation run reported nothing.
    assert_eq!(state_value(&dir, "COST_MICROUSD"), "750000");
    let ledger = fs::read_to_string(dir.join("cost.ledger")).unwrap();
    assert_eq!(
        ledger,
        "1\t250000\treported\n2\t250000\treported\n3\t250000\treported\n3\t0\tunknown\n"
    );
    // One commit per iteration, on the loop's branch, with trailers.
    let trailers = repo.git(&[
        "log",
        "--format=%(trailers:key=Orbit-Iteration,valueonly)",
        "orbit/test-goal",
    ]);
    let iters: Vec<&str> = trailers.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(iters, ["3", "2", "1"]);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%B", "orbit/test-goal"]),
        "orbit(test-goal): iteration 3\n\nGoal: test goal\n\nOrbit-Loop: test-goal\nOrbit-Iteration: 3\n\n",
        "the message names the goal's title"
    );
    assert_eq!(
        repo.git(&["log", "--format=%s", "main"]).trim(),
        "init",
        "the starting branch is untouched"
    );
    assert!(
        repo.git(&["status", "--porcelain", "--", "work.txt"])
            .is_empty(),
        "work.txt is committed"
    );
    // The prompt of iteration 2 carries the feedback of iteration 1's failure.
    let prompt2 = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(
        prompt2.contains("# Feedback: what failed last"),
        "{prompt2}"
    );
    assert!(dir.join("iterations/000002/input-feedback.json").is_file());
    let fb: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(dir.join("iterations/000001/feedback.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(fb["iteration"], 1);
    assert!(fb["failing"].as_array().unwrap().len() == 1);
    assert_records_agree(&dir);
    // DONE is terminal: a rerun prints the footer, exits 0 and touches nothing.
    let before = dir_digest(&dir);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "rerun of a DONE loop");
    assert!(String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: DONE"));
    assert_eq!(
        dir_digest(&dir),
        before,
        "a rerun of a DONE loop changed the loop directory"
    );
}

#[test]
fn an_agent_that_always_fails_opens_the_circuit() {
    let repo = Repo::new();
    let agent = repo.agent(
        "failing",
        "cat >/dev/null; echo 'internal error' >&2; exit 1",
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &[], &[("RETRY_LIMIT", "2")]);
    assert_code(&out, 14, "circuit open");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "BLOCKED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "circuit_open");
    assert_eq!(state_value(&dir, "CB_STATE"), "OPEN");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "4");
    // Each of the three iterations tried twice.
    assert_eq!(events_named(&dir, "agent_exit").len(), 6);
    assert!(dir.join("iterations/000001/agent.attempt1.log").is_file());
    assert_records_agree(&dir);
    // While the cooldown runs, a rerun does not call the agent.
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 14, "rerun during the cooldown");
    assert_eq!(events_named(&dir, "agent_exit").len(), 6);
    // After the cooldown one probe iteration runs; it fails, and the circuit opens again.
    let out = repo.run_loop(&dir, &[], &[("CB_COOLDOWN", "0"), ("RETRY_LIMIT", "1")]);
    assert_code(&out, 14, "half-open probe fails");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "5");
    let changes: Vec<String> = events_named(&dir, "circuit_change")
        .iter()
        .map(|e| e.value["to"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(changes, ["OPEN", "HALF_OPEN", "OPEN"]);
    assert_records_agree(&dir);
}

#[test]
fn a_hanging_agent_that_ignores_term_is_killed_with_its_children() {
    let repo = Repo::new();
    let agent = repo.agent(
        "hang",
        "cat >/dev/null\ntrap '' TERM\nsleep 300 &\n( trap '' TERM; sleep 300 ) &\nwhile :; do sleep 1; done",
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(
        &dir,
        &[],
        &[
            ("EXEC_TIMEOUT", "2s"),
            ("KILL_GRACE", "1s"),
            ("RETRY_LIMIT", "1"),
            ("CB_THRESHOLD", "1"),
        ],
    );
    assert_code(&out, 14, "timeouts open the circuit");
    let result = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(result["AGENT_OUTCOME"], "timeout");
    assert_no_agent_left(&dir);
    assert_records_agree(&dir);
}

#[test]
fn an_early_done_claim_is_rejected_while_verify_fails() {
    let repo = Repo::new();
    // Claims DONE every iteration; the work is only complete at iteration 2.
    let agent = repo.agent(
        "eager",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
echo "done, trust me" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE at iteration 2");
    assert!(dir.join("iterations/000001/done.md.rejected").is_file());
    let rejected = events_named(&dir, "done_rejected");
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].iteration, 1);
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(progress.contains("## Iteration 1 — CONTINUE"), "{progress}");
    assert!(
        progress.contains("- done claim: verify failed"),
        "{progress}"
    );
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
    assert_records_agree(&dir);
}

#[test]
fn a_flaky_verify_never_makes_done() {
    let repo = Repo::new();
    let flip = repo.bin.path().join("flip");
    let agent = repo.agent(
        "claimer",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
echo "done" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    // Passes and fails in turn once work.txt exists.
    let check = format!(
        "test -f work.txt && if [ -f '{0}' ]; then rm '{0}'; exit 1; else touch '{0}'; fi",
        flip.display()
    );
    let dir = repo.init_loop(&agent, &[&check], &["--max-iterations", "3"]);
    let out = repo.run_loop(&dir, &[], &[("WRAPUP_ON_LIMIT", "0")]);
    assert_code(&out, 16, "MAX_ITERATIONS used up");
    assert_eq!(state_value(&dir, "STOP_REASON"), "max_iterations");
    let flaky = events_named(&dir, "verify_fail")
        .into_iter()
        .filter(|e| e.value["code"] == "VERIFY_FLAKY")
        .count();
    // Every claim the DONE gate saw met the flake (a claim whose verify after the agent
    // failed is rejected before the gate: the check alternates, so one of the three is).
    let before_gate = events_named(&dir, "verify_fail")
        .into_iter()
        .filter(|e| e.value["run"] == 1)
        .count();
    let gated = events_named(&dir, "done_claim").len() - before_gate;
    assert!(gated >= 2, "the gate saw {gated} claims");
    assert_eq!(flaky, gated, "each claim the gate saw met a flaky verify");
    assert!(
        events_named(&dir, "loop_stop")
            .iter()
            .all(|e| e.value["status"] != "DONE")
    );
    assert_records_agree(&dir);
}

#[test]
fn a_verify_green_from_the_start_stops_before_the_agent_runs() {
    let repo = Repo::new();
    let ran = repo.bin.path().join("agent-ran");
    let agent = repo.agent(
        "marker",
        &format!("cat >/dev/null; touch '{}'", ran.display()),
    );
    let dir = repo.init_loop(&agent, &["true"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 17, "vacuous verify");
    assert_eq!(state_value(&dir, "STOP_REASON"), "vacuous_verify");
    assert!(
        !ran.exists(),
        "the agent ran although verify proved nothing"
    );
    // ALLOW_GREEN_START=1 goes on.
    let out = repo.run_loop(&dir, &["--once"], &[("ALLOW_GREEN_START", "1")]);
    assert_code(&out, 10, "tick with ALLOW_GREEN_START=1");
    assert!(ran.exists());
    assert_records_agree(&dir);
}

#[test]
fn sigterm_mid_run_saves_a_resumable_state_and_a_rerun_resumes_the_same_iteration() {
    let repo = Repo::new();
    let started = repo.bin.path().join("started");
    let agent = repo.agent(
        "slow",
        &format!(
            "cat >/dev/null\ntouch '{}'\nsleep 300 &\nwait",
            started.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let child = repo.spawn_loop(&dir, &[], &[("KILL_GRACE", "1")]);
    wait_for("the agent to start", Duration::from_secs(60), || {
        started.exists()
    });
    command("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "exit 128+15\n{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"));
    assert_no_agent_left(&dir);
    assert_eq!(state_value(&dir, "STOP_REASON"), "signal");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "1");
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(
        progress.contains("## Iteration 1 — INTERRUPTED"),
        "{progress}"
    );
    // The rerun resumes iteration 1 with an agent that now finishes the work.
    repo.agent("slow", "cat >/dev/null; case $ORBIT_PHASE in confirm) exit 0;; esac; touch work.txt; echo ok > \"$ORBIT_AGENT_DIR/done.md\"");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "rerun after SIGTERM");
    assert!(
        dir.join("iterations/000001/interrupted.1/prompt.md")
            .is_file(),
        "the interrupted attempt is kept"
    );
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
    assert_records_agree(&dir);
}

#[test]
fn every_fault_point_resumes_without_repair_and_without_losing_or_repeating_an_iteration() {
    for point in [
        "after_lock",
        "before_agent",
        "after_agent",
        "mid_state_write",
        "after_state_before_sidecar",
        "before_commit",
        "after_commit",
        "mid_progress_append",
    ] {
        let repo = Repo::new();
        let agent = counting_agent(&repo, 2);
        let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
        let out = repo.run_loop(&dir, &[], &[("ORBIT_FAULT", point)]);
        assert_eq!(
            out.status.code(),
            None,
            "{point}: the runner should die by SIGKILL\n{}",
            text(&out)
        );
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 0, &format!("rerun after {point}"));
        assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE", "{point}");
        let trailers = repo.git(&[
            "log",
            "--format=%(trailers:key=Orbit-Iteration,valueonly)",
            "orbit/test-goal",
        ]);
        let mut iters: Vec<u64> = trailers
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.parse().unwrap())
            .collect();
        iters.sort();
        let next: u64 = state_value(&dir, "NEXT_ITERATION").parse().unwrap();
        assert_eq!(
            iters,
            (1..next).collect::<Vec<_>>(),
            "{point}: each iteration committed exactly once"
        );
        assert!(
            repo.ws_git(&["status", "--porcelain", "--", "work.txt"])
                .is_empty(),
            "{point}: the agent's work is committed"
        );
        if !["after_lock", "before_agent", "after_agent"].contains(&point) {
            // The crash came after the iteration was recorded: nothing ran again.
            assert_eq!(iters, [1, 2], "{point}");
            assert_eq!(
                fs::read_to_string(repo.ws().join("work.txt"))
                    .unwrap()
                    .lines()
                    .count(),
                2,
                "{point}: no agent run was repeated"
            );
        }
        assert_records_agree(&dir);
    }
}

#[test]
fn a_second_runner_exits_20_while_the_first_holds_the_lock() {
    let repo = Repo::new();
    let started = repo.bin.path().join("started");
    let release = repo.bin.path().join("release");
    // The first runner's agent holds on until the second runner has returned (at most ten
    // minutes, should the test die).
    let agent = repo.agent(
        "slow",
        &format!(
            "cat >/dev/null; touch '{}'; for _ in $(seq 6000); do [ -e '{}' ] && break; sleep 0.1; done; echo x >> work.txt",
            started.display(),
            release.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let first = repo.spawn_loop(&dir, &["--once"], &[]);
    wait_for(
        "the first runner's agent to start",
        Duration::from_secs(60),
        || started.exists(),
    );
    let second = repo.run_loop(&dir, &["--once"], &[]);
    fs::write(&release, "").unwrap();
    assert_code(&second, 20, "second runner");
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(10), "first runner\n{}", text(&out));
    assert!(
        dir.join(".run-loop.lock").exists(),
        "the lock file is never deleted"
    );
    assert_records_agree(&dir);
}

#[test]
fn the_mkdir_lock_works_where_flock_is_missing() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    let dir = repo.init_loop(&agent, &[&count_check(1)], &[]);
    // A stale mkdir lock left by a dead runner is taken over.
    fs::create_dir(dir.join(".run-loop.lock.d")).unwrap();
    fs::write(
        dir.join(".run-loop.lock.d/owner"),
        "999999 Thu Jan  1 00:00:00 1970\n",
    )
    .unwrap();
    let out = repo.run_loop(&dir, &[], &[("ORBIT_NO_FLOCK", "1")]);
    assert_code(&out, 0, "DONE with the mkdir lock");
    assert!(
        !dir.join(".run-loop.lock.d").exists(),
        "the mkdir lock is released"
    );
    assert_records_agree(&dir);
}

#[test]
fn a_cron_like_environment_runs_a_tick() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 5);
    let dir = repo.init_loop(&agent, &[&count_check(5)], &[]);
    let home = tempfile::tempdir().unwrap();
    let mut cmd = command("env");
    cmd.arg("-i")
        .arg("PATH=/usr/bin:/bin")
        .arg(format!("HOME={}", home.path().display()))
        .arg("bash")
        .arg(dir.join("run-loop.sh"))
        .arg("--once")
        .current_dir("/");
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert_code(&out, 10, "cron tick");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
    assert_records_agree(&dir);
}

#[test]
fn a_missing_agent_fails_preflight_with_nothing_run() {
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init",
        "g",
        "--engine",
        "custom",
        "--exec",
        "no-such-agent-xyz",
        "--verify",
        "false",
        "--dir",
        ".orbit/g",
    ]);
    crate::support::assert_ok(&out, "init");
    let dir = repo.join(".orbit/g");
    let before = fs::read(dir.join("state.env")).unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "preflight");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-agent-xyz"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"));
    assert_eq!(
        fs::read(dir.join("state.env")).unwrap(),
        before,
        "nothing was written"
    );
    assert!(!dir.join("events.jsonl").exists() && !dir.join("iterations").exists());
}

#[test]
fn a_corrupt_state_stops_with_exit_4_and_a_torn_checkpoint_is_repaired() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 9);
    let dir = repo.init_loop(&agent, &[&count_check(9)], &[]);
    let good = fs::read_to_string(dir.join("state.env")).unwrap();
    let canary = repo.join("CANARY");
    fs::write(
        dir.join("state.env"),
        good.replace("NEXT_ITERATION=1", "NEXT_ITERATION=x[$(touch CANARY)]"),
    )
    .unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 4, "hostile state value");
    assert!(String::from_utf8_lossy(&out.stderr).contains("orbit recover"));
    assert!(!canary.exists());
    // A torn checkpoint: state.env one generation ahead of its sidecar.
    let ahead = good
        .replace("GEN=1", "GEN=2")
        .replace("LAST_STATUS=READY", "LAST_STATUS=CONTINUE");
    fs::write(dir.join("state.env"), ahead).unwrap();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "torn checkpoint repaired silently");
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("torn checkpoint")
    );
    assert_records_agree(&dir);
}

#[test]
fn orbit_run_executes_the_loop() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 5);
    let _dir = repo.init_loop(&agent, &[&count_check(5)], &[]);
    let out = repo.orbit(&["run", "--once"]);
    assert_code(&out, 10, "orbit run --once");
    let out = repo.orbit(&["run", ".orbit/test-goal", "--once"]);
    assert_code(&out, 10, "orbit run DIR --once");
}

#[test]
fn orbit_demo_ends_done_with_a_rejected_early_claim() {
    let root = tempfile::tempdir().unwrap();
    let demo = root.path().join("demo");
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["demo", "--dir", demo.to_str().unwrap()]);
    let out = run_bounded(cmd, Duration::from_secs(180));
    assert_code(&out, 0, "orbit demo");
    let dir = demo.join("project/.orbit/calc");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(
        progress.contains("## Iteration 1 — CONTINUE")
            && progress.contains("## Iteration 3 — DONE"),
        "{progress}"
    );
    assert!(
        progress.contains("- done claim: verify failed"),
        "the early claim is rejected:\n{progress}"
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&dir.display().to_string()),
        "the demo says where the loop is"
    );
    // The hand-off, checked as its receiver would: the envelope the runner left verifies
    // on the loop's branch, and the next step is the merge.
    assert!(dir.join("envelope.json").is_file(), "{said}");
    assert!(said.contains("orbit verify: PASS"), "{said}");
    assert!(said.contains("next: orbit merge"), "{said}");
    assert_records_agree(&dir);
}

/// An agent that claims DONE at iteration 1 after doing the work.
fn finishing_agent(repo: &Repo, extra: &str) -> PathBuf {
    repo.agent(
        "finisher",
        &format!(
            "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho done >> work.txt\n{extra}\necho ok > \"$ORBIT_AGENT_DIR/done.md\""
        ),
    )
}

#[test]
fn the_agent_gets_the_contract_environment_in_its_workspace() {
    let repo = Repo::new();
    let seen = repo.bin.path().join("seen");
    let agent = repo.agent(
        "env",
        &format!(
            "cat >/dev/null\n{{ echo \"RUN in $(pwd)\"; for v in ORBIT_LOOP_DIR ORBIT_WORKSPACE ORBIT_AGENT_DIR ORBIT_ITERATION ORBIT_ATTEMPT ORBIT_CANDIDATE ORBIT_PHASE ORBIT_PROMPT_FILE ORBIT_FEEDBACK_FILE ORBIT_COST_FILE; do echo \"$v=${{!v-<unset>}}\"; done; ls .orbit-agent | tr '\\n' ' '; echo; }} >> '{}'\necho $ORBIT_ITERATION >> work.txt",
            seen.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["echo 'src/x.rs:3: nope'; exit 1"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 1");
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 2");
    let seen = fs::read_to_string(&seen).unwrap();
    let ws = fs::canonicalize(repo.ws()).unwrap().display().to_string();
    let agent_dir = format!("{ws}/.orbit-agent");
    let runs: Vec<&str> = seen
        .split(&format!("RUN in {ws}\n"))
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(runs.len(), 2, "the agent runs in the workspace: {seen}");
    assert!(
        runs[0].contains("ORBIT_LOOP_DIR=<unset>\n"),
        "the loop directory is not the agent's business: {seen}"
    );
    assert!(
        runs[0].contains(&format!(
            "ORBIT_WORKSPACE={ws}\nORBIT_AGENT_DIR={agent_dir}\n"
        )),
        "{seen}"
    );
    assert!(
        runs[0]
            .contains("ORBIT_ITERATION=1\nORBIT_ATTEMPT=1\nORBIT_CANDIDATE=1\nORBIT_PHASE=work\n"),
        "{seen}"
    );
    assert!(
        runs[0].contains(&format!("ORBIT_PROMPT_FILE={agent_dir}/prompt.md\n")),
        "{seen}"
    );
    assert!(
        runs[0].contains("ORBIT_FEEDBACK_FILE=<unset>\n"),
        "absent on the first iteration: {seen}"
    );
    assert!(
        runs[0].contains(&format!("ORBIT_COST_FILE={agent_dir}/cost\n")),
        "{seen}"
    );
    assert!(
        runs[0].contains("goal.md lib.sh notes.md progress.md prompt.md verify.sh \n"),
        "what the agent's folder holds on a first iteration: {seen}"
    );
    assert!(
        runs[1].contains(&format!("ORBIT_FEEDBACK_FILE={agent_dir}/feedback.json\n")),
        "{seen}"
    );
    assert!(
        runs[1].contains(
            "feedback.json feedback.txt goal.md last-verify.log lib.sh notes.md progress.md prompt.md verify.sh \n"
        ),
        "the last failure's feedback and full verify log: {seen}"
    );
    // The record keeps what the agent was given.
    let prompt = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(prompt.contains(".orbit-agent/last-verify.log"), "{prompt}");
    assert!(
        !prompt.contains(".orbit/test-goal"),
        "the prompt names no loop directory: {prompt}"
    );
    // The agent's folder never reaches a commit or the user's checkout.
    let tree = repo.git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"]);
    assert!(!tree.contains(".orbit-agent"), "{tree}");
    assert!(!repo.path().join(".orbit-agent").exists());
    let fb: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(dir.join("iterations/000002/input-feedback.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        fb["failing"],
        serde_json::json!(["echo-src-x-rs-3-nope-exit-1"])
    );
    assert_eq!(fb["loci"], serde_json::json!(["src/x.rs:3"]));
    assert!(
        fb["output_tail"]
            .as_str()
            .unwrap()
            .contains("src/x.rs:3: nope")
    );
    assert_eq!(
        (fb["attempt"].as_u64(), fb["iteration"].as_u64()),
        (Some(1), Some(1))
    );
    let prompt = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(prompt.contains("Locations: src/x.rs:3"), "{prompt}");
    assert!(prompt.contains("# Earlier distinct failures"), "{prompt}");
}

#[test]
fn placeholders_in_added_lines_reject_a_done_claim() {
    let repo = Repo::new();
    let agent = finishing_agent(&repo, "echo 'fn parse() { todo!() }' > lib.rs");
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--max-iterations", "1"]);
    let out = repo.run_loop(&dir, &[], &[("WRAPUP_ON_LIMIT", "0")]);
    assert_code(&out, 16, "no DONE with a placeholder");
    let rejected = events_named(&dir, "done_rejected");
    assert!(
        rejected[0].value["reason"]
            .as_str()
            .unwrap()
            .contains("placeholder"),
        "{:?}",
        rejected[0].value
    );
    assert!(
        fs::read_to_string(dir.join("iterations/000001/placeholders.txt"))
            .unwrap()
            .contains("todo!()")
    );
}

#[test]
fn the_judge_decides_when_configured() {
    for (judge, code) in [("false", 16), ("test -f work.txt", 0)] {
        let repo = Repo::new();
        let agent = finishing_agent(&repo, "");
        let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--max-iterations", "1"]);
        let out = repo.run_loop(&dir, &[], &[("JUDGE_CMD", judge), ("WRAPUP_ON_LIMIT", "0")]);
        assert_code(&out, code, judge);
    }
}

#[test]
fn a_confirmer_that_says_no_is_heard_and_its_reason_becomes_the_feedback() {
    let repo = Repo::new();
    // Each work run claims DONE; the first confirmation says no, with a reason, and exits 0
    // as real agent CLIs do; the second confirms.
    let agent = repo.agent(
        "claimer",
        r#"cat >/dev/null
if [ "$ORBIT_PHASE" = confirm ]; then
  if [ "$ORBIT_ITERATION" = 1 ]; then
    echo "NOT CONFIRMED: mul still returns 0" > "$ORBIT_AGENT_DIR/confirm.md"
  fi
  exit 0
fi
echo "step $ORBIT_ITERATION" >> work.txt
echo "all done" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE at the second claim");
    let first = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(first["VERDICT"], "CONTINUE");
    assert_eq!(first["DONE_VERDICT"], "not confirmed: mul still returns 0");
    assert!(dir.join("iterations/000001/done.md.rejected").is_file());
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000001/confirm.1.md")).unwrap(),
        "NOT CONFIRMED: mul still returns 0\n",
        "the verdict is kept in the record"
    );
    // The next work run is told why.
    let fb: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(dir.join("iterations/000002/input-feedback.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(fb["failing"], serde_json::json!(["confirmation"]));
    let prompt = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(prompt.contains("mul still returns 0"), "{prompt}");
    let second = read_kv(&dir.join("iterations/000002/result.env"));
    assert_eq!(second["DONE_VERDICT"], "DONE");
    // The confirmation prompt asks for exactly that file.
    let asked = fs::read_to_string(dir.join("iterations/000001/confirm.1.prompt.md")).unwrap();
    assert!(
        asked.contains(".orbit-agent/confirm.md") && asked.contains("NOT CONFIRMED: <"),
        "{asked}"
    );
}

#[test]
fn checks_that_pass_without_a_claim_ask_the_agent_to_claim_or_say_what_is_missing() {
    let repo = Repo::new();
    // The work is done in iteration 1, but the agent only claims when its prompt asks.
    let agent = repo.agent(
        "shy",
        r#"prompt=$(cat)
[ "$ORBIT_PHASE" = work ] || exit 0
echo "step $ORBIT_ITERATION" >> work.txt
case $prompt in
  *"every check passed, but no DONE claim was made"*) echo "AC1: work.txt exists" > "$ORBIT_AGENT_DIR/done.md" ;;
esac"#,
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE once asked");
    assert_eq!(
        state_value(&dir, "NEXT_ITERATION"),
        "3",
        "DONE at iteration 2"
    );
    let first = fs::read_to_string(dir.join("iterations/000001/prompt.md")).unwrap();
    assert!(!first.contains("# The checks pass"), "{first}");
    let second = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(second.contains("# The checks pass"), "{second}");
    assert_eq!(
        read_kv(&dir.join("iterations/000001/result.env"))["VERDICT"],
        "CONTINUE"
    );
}

#[test]
fn only_a_written_confirmed_confirms() {
    // What a confirmer may do besides writing CONFIRMED: say no on its output only, write
    // nothing, write something else. Each exits 0 and changes nothing; none confirms.
    for (body, want) in [
        (
            "rm -f \"$ORBIT_AGENT_DIR/confirm.md\"; echo 'NOT CONFIRMED: tests are missing'",
            "no confirmation verdict (.orbit-agent/confirm.md missing or empty)",
        ),
        (
            "echo 'Confirmed, looks good' > \"$ORBIT_AGENT_DIR/confirm.md\"",
            "the confirmation verdict is neither CONFIRMED nor NOT CONFIRMED: Confirmed, looks good",
        ),
        (
            "printf '\\nCONFIRMED\\n' > \"$ORBIT_AGENT_DIR/confirm.md\"",
            "no confirmation verdict (.orbit-agent/confirm.md missing or empty)",
        ),
        (
            // A link to a file that says CONFIRMED: followed, it would confirm.
            "echo CONFIRMED > \"$ORBIT_WORKSPACE/../said-yes\"; ln -sf \"$ORBIT_WORKSPACE/../said-yes\" \"$ORBIT_AGENT_DIR/confirm.md\"",
            "no confirmation verdict (.orbit-agent/confirm.md missing or empty)",
        ),
    ] {
        let repo = Repo::new();
        let agent = repo.agent(
            "doubter",
            &format!(
                "cat >/dev/null\nif [ \"$ORBIT_PHASE\" = confirm ]; then {body}; exit 0; fi\n[ \"$ORBIT_PHASE\" = wrapup ] && exit 0\necho done >> work.txt\necho ok > \"$ORBIT_AGENT_DIR/done.md\""
            ),
        );
        let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--max-iterations", "1"]);
        let out = repo.run_loop(&dir, &[], &[("WRAPUP_ON_LIMIT", "0")]);
        assert_code(&out, 16, body);
        let result = read_kv(&dir.join("iterations/000001/result.env"));
        assert_eq!(result["DONE_CLAIM"], "1", "{body}: the claim was made");
        assert_eq!(result["DONE_VERDICT"], want, "{body}");
        assert_ne!(state_value(&dir, "LAST_STATUS"), "DONE", "{body}");
        if body.contains("said-yes") {
            // The attempt was made: the linked file says CONFIRMED.
            assert_eq!(
                fs::read_to_string(repo.ws_sibling("/../said-yes")).unwrap(),
                "CONFIRMED\n"
            );
        }
    }
}

#[test]
fn a_confirmation_run_that_changes_the_project_is_not_done() {
    let repo = Repo::new();
    let agent = repo.agent(
        "second-thoughts",
        "cat >/dev/null\nif [ \"$ORBIT_PHASE\" = confirm ]; then echo fix >> work.txt; exit 0; fi\necho done >> work.txt\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--max-iterations", "1"]);
    let out = repo.run_loop(&dir, &[], &[("WRAPUP_ON_LIMIT", "0")]);
    assert_code(&out, 16, "the confirmation changed something");
    let result = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(
        result["DONE_VERDICT"],
        "the confirmation run changed the project"
    );
    // The confirmation's change is part of the iteration and committed with it.
    assert_eq!(repo.ws_read("work.txt"), "done\nfix\n");
    assert!(
        repo.ws_git(&["status", "--porcelain", "--", "work.txt"])
            .is_empty()
    );
    assert_eq!(
        repo.git(&["show", "orbit/test-goal:work.txt"]),
        "done\nfix\n"
    );
}

#[test]
fn the_wrapup_run_writes_the_remaining_work_when_iterations_run_out() {
    let repo = Repo::new();
    let agent = repo.agent(
        "wrapper",
        "cat >/dev/null\nif [ \"$ORBIT_PHASE\" = wrapup ]; then echo 'REMAINING: the parser' >> \"$ORBIT_AGENT_DIR/notes.md\"; exit 0; fi\necho $ORBIT_ITERATION | tr 0-9 a-j >> work.txt",
    );
    let dir = repo.init_loop(
        &agent,
        &["cat work.txt; exit 1"],
        &["--max-iterations", "2"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 16, "MAX_ITERATIONS");
    assert!(
        fs::read_to_string(dir.join("notes.md"))
            .unwrap()
            .contains("REMAINING: the parser")
    );
    let wrapups: Vec<_> = events_named(&dir, "agent_exit")
        .into_iter()
        .filter(|e| e.value["phase"] == "wrapup")
        .collect();
    assert_eq!(wrapups.len(), 1);
    // A rerun does not wrap up again.
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 16, "rerun");
    assert_eq!(
        events_named(&dir, "agent_exit")
            .iter()
            .filter(|e| e.value["phase"] == "wrapup")
            .count(),
        1
    );
    assert_records_agree(&dir);
}

#[test]
fn a_permanent_tool_failure_blocks_without_retrying() {
    let repo = Repo::new();
    let agent = repo.agent("broken", "cat >/dev/null; exit 127");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 14, "tool failure");
    assert_eq!(state_value(&dir, "STOP_REASON"), "tool_failure");
    assert_eq!(events_named(&dir, "agent_exit").len(), 1, "not retried");
}

#[test]
fn a_flood_of_output_is_capped_and_keeps_its_tail() {
    let repo = Repo::new();
    let agent = repo.agent(
        "flood",
        "cat >/dev/null\nhead -c 20000000 /dev/zero | tr '\\0' 'x'\necho\necho '{\"total_cost_usd\": 0.5}'\necho x >> work.txt",
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[("AGENT_LOG_MAX", "100000")]);
    assert_code(&out, 10, "tick");
    let log = fs::read(dir.join("iterations/000001/agent.log")).unwrap();
    assert!(log.len() < 101_000, "agent.log is {} bytes", log.len());
    let text = String::from_utf8_lossy(&log);
    assert!(text.contains("the middle was dropped"));
    assert_eq!(
        state_value(&dir, "COST_MICROUSD"),
        "500000",
        "the cost in the tail is still read"
    );
}

#[test]
fn killing_the_tmux_session_stops_the_loop_with_no_orphan() {
    if !crate::support::tmux_available() {
        return;
    }
    let repo = Repo::new();
    let started = repo.bin.path().join("started");
    let agent = repo.agent(
        "slow",
        &format!("cat >/dev/null; touch '{}'; sleep 300", started.display()),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let socket = format!("orbit-test-{}", std::process::id());
    // The private tmux server goes away however the test ends.
    struct Server(String);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = command("tmux")
                .args(["-L", &self.0, "kill-server"])
                .status();
        }
    }
    let _server = Server(socket.clone());
    let session = "orbit-loop";
    let cmd = format!(
        "PATH='{}' KILL_GRACE=1 bash '{}'",
        repo.path_env(),
        dir.join("run-loop.sh").display()
    );
    let st = command("tmux")
        .args(["-L", &socket, "new-session", "-d", "-s", session, &cmd])
        .status()
        .unwrap();
    assert!(st.success());
    wait_for(
        "the agent to start under tmux",
        Duration::from_secs(60),
        || started.exists(),
    );
    let st = command("tmux")
        .args(["-L", &socket, "kill-session", "-t", &format!("={session}")])
        .status()
        .unwrap();
    assert!(st.success());
    // The runner saves its state, sweeps and releases its lock, then exits: its end is
    // what is waited for, not a pause after the state appears.
    wait_for(
        "the runner to exit after SIGHUP",
        Duration::from_secs(60),
        || runner_of(&dir).is_empty(),
    );
    assert_eq!(state_value(&dir, "STOP_REASON"), "signal");
    assert_no_agent_left(&dir);
    assert!(
        fs::read_to_string(dir.join("progress.md"))
            .unwrap()
            .contains("## Iteration 1 — INTERRUPTED")
    );
    assert_records_agree(&dir);
}

#[test]
fn the_adaptive_timeout_follows_the_median_of_recent_runs() {
    let repo = Repo::new();
    // Iteration 1's run would end by itself after 5 s, iteration 2's after a minute. A run
    // is never stopped before its limit (the watchdog sleeps all of it), so a stop after at
    // least 6 s holds however loaded the machine; the other bounds are seconds apart.
    let agent = repo.agent(
        "steady",
        "cat >/dev/null; echo $ORBIT_ITERATION | tr 0-9 a-j >> work.txt\n\
         if [ \"$ORBIT_ITERATION\" = 1 ]; then sleep 5; else sleep 60; fi",
    );
    let dir = repo.init_loop(&agent, &["cat work.txt; exit 1"], &[]);
    let env = [
        ("EXEC_TIMEOUT", "2s"),
        ("RETRY_LIMIT", "1"),
        ("CB_THRESHOLD", "5"),
    ];
    // (outcome, seconds) of iteration n's run, as the runner recorded it.
    let run = |n: u64| -> (String, u64) {
        let outcome =
            read_kv(&dir.join(format!("iterations/{n:06}/result.env")))["AGENT_OUTCOME"].clone();
        let exits = events_named(&dir, "agent_exit");
        let e = exits.iter().find(|e| e.iteration == n).expect("agent_exit");
        (outcome, e.value["seconds"].as_u64().unwrap())
    };
    // Recent runs took 3 s: twice the median is 6 s, within [2 s, 6 s]. Without
    // ADAPTIVE_TIMEOUT they change nothing: the 2 s limit stops the 5 s run.
    let timings = "3\n3\n3\n3\n3\n";
    fs::write(dir.join(".iter-timings.log"), timings).unwrap();
    let out = repo.run_loop(&dir, &["--once"], &env);
    assert_code(&out, 10, "tick without the adaptive timeout");
    assert_eq!(run(1).0, "timeout", "{:?}", run(1));
    // With it, the limit is 6 s: the run is stopped then, not after 2 s.
    fs::write(dir.join(".iter-timings.log"), timings).unwrap();
    let mut adaptive = env.to_vec();
    adaptive.push(("ADAPTIVE_TIMEOUT", "1"));
    let out = repo.run_loop(&dir, &["--once"], &adaptive);
    assert_code(&out, 10, "tick with the adaptive timeout");
    let (outcome, secs) = run(2);
    assert_eq!(outcome, "timeout");
    assert!(
        secs >= 6,
        "the adaptive limit is 6 s: stopped after {secs} s"
    );
}

#[test]
fn a_bad_setting_override_stops_with_exit_2_a_footer_and_nothing_written() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 3);
    let dir = repo.init_loop(&agent, &[&count_check(3)], &[]);
    let before = fs::read(dir.join("state.env")).unwrap();
    for (k, v, says) in [
        ("MAX_ITERATIONS", "x[$(touch CANARY)]", "not a whole number"),
        ("EXEC_TIMEOUT", "10x", "not a duration"),
        ("USD_CAP", "lots", "not an amount in USD"),
        ("AUTOCOMMIT", "maybe", "must be 0 or 1"),
    ] {
        let out = repo.run_loop(&dir, &[], &[(k, v)]);
        assert_code(&out, 2, k);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("NEXUS_LOOP_STATUS: CONTINUE") && stdout.contains(says),
            "{k}: {stdout}"
        );
        assert_eq!(
            fs::read(dir.join("state.env")).unwrap(),
            before,
            "{k}: nothing written"
        );
        assert!(
            !dir.join("iterations").exists() && !repo.join("CANARY").exists(),
            "{k}"
        );
    }
}

#[test]
fn verify_run_by_its_runner_takes_the_root_and_scratch_space_from_it() {
    let repo = Repo::new();
    let calls = repo.bin.path().join("mktemp-calls");
    // A mktemp that writes down each call, then does the real work.
    let real = String::from_utf8(
        command("bash")
            .args(["-c", "command -v mktemp"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    repo.agent(
        "mktemp",
        &format!(
            "echo \"$*\" >> '{}'\nexec {} \"$@\"",
            calls.display(),
            real.trim()
        ),
    );
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f work.txt", "true"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[("ALLOW_GREEN_START", "1")]);
    assert_code(&out, 10, "tick");
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(log.contains("[PASS] test-f-work-txt"), "{log}");
    assert!(
        !calls.exists(),
        "the runner's verify runs made no temp file"
    );
    // By hand, verify.sh finds the repository itself and removes its one temp file.
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = command("bash");
    cmd.arg(dir.join("verify.sh"))
        .current_dir("/")
        .env("PATH", repo.path_env())
        .env("TMPDIR", tmp.path());
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_code(&out, 0, "verify.sh by hand");
    assert!(text(&out).contains("2 passed, 0 failed"), "{}", text(&out));
    let made = fs::read_to_string(&calls).unwrap();
    assert_eq!(made.lines().count(), 1, "one temp file for the run: {made}");
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "and it is gone after the run"
    );
}

#[test]
fn an_agent_named_like_a_shell_builtin_is_found_on_path() {
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        "true",
        "--verify",
        "test -f never-there",
    ]);
    crate::support::assert_ok(&out, "orbit init --exec true");
    let dir = repo.join(".orbit/test-goal");
    let out = repo.run_loop(&dir, &["--once"], &[]);
    // `true` is a bash builtin and /usr/bin/true: the runner runs the file.
    assert_code(&out, 10, "one tick of an agent that changes nothing");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
}

/// `run-loop.sh --help` prints its usage and exits 0: it never starts the loop (no agent
/// run, not a byte of the loop directory changed).
#[test]
fn run_loop_help_prints_the_usage_and_runs_nothing() {
    let repo = Repo::new();
    let ran = repo.bin.path().join("ran");
    let agent = repo.agent("a", &format!("cat >/dev/null\ntouch '{}'", ran.display()));
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let before = dir_digest(&dir);
    let out = repo.run_loop(&dir, &["--help"], &[]);
    assert_code(&out, 0, "run-loop.sh --help");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("usage: run-loop.sh"),
        "{}",
        text(&out)
    );
    assert!(!ran.exists(), "--help ran the agent\n{}", text(&out));
    assert!(
        dir_digest(&dir) == before,
        "--help changed the loop directory"
    );
}
