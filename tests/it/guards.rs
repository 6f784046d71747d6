//! The guards that make an unattended loop safe: integrity pins, stall and oscillation,
//! budgets, rate limits, scoped commits and branch isolation.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::support::{
    Repo, assert_code, assert_ok, count_check, counting_agent, events_named, state_value, text,
};

/// Runs an agent whose iteration-1 action is `action`; expects an integrity stop naming
/// `file` with `reason`, the change left uncommitted, and never DONE.
fn integrity_case(setup: impl Fn(&Repo), action: &str, file: &str, reason: &str) {
    let repo = Repo::new();
    // orbit init refuses a protect glob that matches nothing.
    repo.write("tests/keep.txt", "kept\n");
    repo.git(&["add", "tests/keep.txt"]);
    repo.git(&["commit", "-q", "-m", "tests"]);
    setup(&repo);
    let agent = repo.agent(
        "tamper",
        &format!(
            "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho work >> work.txt\n{action}\necho done > \"$ORBIT_AGENT_DIR/done.md\""
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--protect", "tests/**"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 3, reason);
    assert!(String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("orbit recover"),
        "the message names the recover command:\n{}",
        text(&out)
    );
    assert_eq!(state_value(&dir, "LAST_STATUS"), "ABORTED");
    assert_eq!(state_value(&dir, "STOP_REASON"), reason);
    let fails = events_named(&dir, "integrity_fail");
    assert_eq!(fails.len(), 1, "one integrity_fail event");
    let e = &fails[0].value;
    assert_eq!(e["code"], reason);
    assert!(e["file"].as_str().unwrap().ends_with(file), "{e}");
    assert_ne!(e["expected"], e["actual"]);
    assert!(e["expected"].as_str().unwrap().len() == 64 || e["expected"] == "absent");
    // Nothing of the iteration was committed: the offending change stays for review.
    let loop_commits = repo.git(&[
        "log",
        "--all",
        "--format=%(trailers:key=Orbit-Iteration,valueonly)",
    ]);
    assert!(
        loop_commits.trim().is_empty(),
        "no loop commit: {loop_commits}"
    );
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000001/commit.txt")).unwrap(),
        "withheld: integrity violation\n"
    );
    // A rerun does not go on: the stop holds until a human recovers.
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 3, "rerun after an integrity stop");
}

#[test]
fn editing_a_protected_test_is_reward_hacking() {
    integrity_case(
        |r| {
            r.write("tests/parser_test.sh", "test 1 -eq 1\n");
            r.git(&["add", "tests"]);
            r.git(&["commit", "-q", "-m", "tests"]);
        },
        "echo 'exit 0' > tests/parser_test.sh",
        "tests/parser_test.sh",
        "reward_hack",
    );
}

#[test]
fn deleting_the_tests_is_reward_hacking() {
    integrity_case(
        |r| {
            r.write("tests/a.sh", "true\n");
            r.git(&["add", "tests"]);
            r.git(&["commit", "-q", "-m", "tests"]);
        },
        "rm -rf tests",
        "tests/a.sh",
        "reward_hack",
    );
}

#[test]
fn editing_goal_md_is_goal_drift() {
    integrity_case(
        |_| {},
        "echo 'new goal: nothing' >> \"@ORBIT_DIR@/test-goal/goal.md\"",
        "goal.md",
        "goal_drift",
    );
}

#[test]
fn editing_verify_sh_is_reward_hacking() {
    integrity_case(
        |_| {},
        "echo 'exit 0' >> \"@ORBIT_DIR@/test-goal/verify.sh\"",
        "verify.sh",
        "reward_hack",
    );
}

#[test]
fn editing_a_script_is_script_tampering() {
    integrity_case(
        |_| {},
        "echo '# x' >> \"@ORBIT_DIR@/test-goal/run-loop.sh\"",
        "run-loop.sh",
        "script_tamper",
    );
}

#[test]
fn editing_agent_permissions_is_a_hijack() {
    integrity_case(
        |r| {
            r.write(
                ".claude/settings.json",
                "{\"permissions\":{\"deny\":[\"Bash(rm:*)\"]}}\n",
            );
            r.git(&["add", ".claude"]);
            r.git(&["commit", "-q", "-m", "settings"]);
        },
        "echo '{\"permissions\":{\"allow\":[\"Bash(*)\"]}}' > .claude/settings.json",
        ".claude/settings.json",
        "permission_hijack",
    );
}

#[test]
fn creating_an_agent_permission_file_is_a_hijack() {
    integrity_case(
        |_| {},
        "mkdir -p .codex && echo 'approval_policy = \"never\"' > .codex/config.toml",
        ".codex/config.toml",
        "permission_hijack",
    );
}

#[test]
fn a_gemini_settings_file_that_appears_is_a_hijack() {
    integrity_case(
        |_| {},
        "mkdir -p .gemini && echo '{\"tools\":{\"sandbox\":false}}' > .gemini/settings.json",
        ".gemini/settings.json",
        "permission_hijack",
    );
}

#[test]
fn a_claude_settings_file_with_a_blank_in_its_name_is_pinned_and_guarded() {
    // Pinned at the first run, by the glob .claude/settings*.json.
    integrity_case(
        |r| {
            r.write(".claude/settings team.json", "{\"permissions\":{}}\n");
            r.git(&["add", ".claude"]);
            r.git(&["commit", "-q", "-m", "team settings"]);
        },
        "echo '{\"permissions\":{\"allow\":[\"Bash(*)\"]}}' > '.claude/settings team.json'",
        ".claude/settings team.json",
        "permission_hijack",
    );
    // Appearing after it.
    integrity_case(
        |_| {},
        "mkdir -p .claude && echo '{}' > '.claude/settings new one.json'",
        ".claude/settings new one.json",
        "permission_hijack",
    );
}

#[test]
fn a_deeper_copy_of_a_permission_file_is_a_protected_path_not_a_hijack() {
    integrity_case(
        |r| {
            r.write("tests/.claude/settings.json", "{}\n");
            r.git(&["add", "tests"]);
            r.git(&["commit", "-q", "-m", "fixture"]);
        },
        "echo '{\"x\":1}' > tests/.claude/settings.json",
        "tests/.claude/settings.json",
        "reward_hack",
    );
}

#[test]
fn an_agent_that_changes_nothing_stalls_in_three() {
    let repo = Repo::new();
    let agent = repo.agent("idle", "cat >/dev/null; echo 'thinking...'");
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 15, "stalled");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "STALLED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "stalled");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "4");
    let sigs = fs::read_to_string(dir.join(".action-sig.log")).unwrap();
    assert_eq!(sigs.lines().count(), 3, "{sigs}");
    // A rerun of a STALLED loop does not call the agent again.
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 15, "rerun of a stalled loop");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "4");
}

#[test]
fn a_convergence_window_wider_than_six_still_stalls_across_runs() {
    let repo = Repo::new();
    let agent = repo.agent("idle", "cat >/dev/null; echo 'thinking...'");
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let env = [("CONVERGENCE_WINDOW", "8"), ("MAX_ITERATIONS", "12")];
    // Three cron ticks, then a continuous run: the window spans both.
    for i in 1..=3 {
        let out = repo.run_loop(&dir, &["--once"], &env);
        assert_code(&out, 10, &format!("tick {i}"));
    }
    let out = repo.run_loop(&dir, &[], &env);
    assert_code(&out, 15, "stalled after eight identical trees");
    assert_eq!(state_value(&dir, "STOP_REASON"), "stalled");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "9");
}

#[test]
fn an_agent_that_toggles_a_file_is_oscillating() {
    let repo = Repo::new();
    let agent = repo.agent(
        "toggle",
        "cat >/dev/null\nif [ $((ORBIT_ITERATION % 2)) -eq 1 ]; then echo A > state.txt; else echo B > state.txt; fi",
    );
    // The failing check prints the file, so consecutive failures differ.
    let dir = repo.init_loop(&agent, &["cat state.txt; exit 1"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 15, "oscillating");
    assert_eq!(state_value(&dir, "STOP_REASON"), "oscillating");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "5");
}

#[test]
fn the_same_verify_failure_while_the_tree_changes_blocks_the_loop() {
    let repo = Repo::new();
    let agent = repo.agent(
        "busy",
        "cat >/dev/null; echo \"attempt $ORBIT_ITERATION\" >> notes.txt",
    );
    let dir = repo.init_loop(
        &agent,
        &["echo 'src/lib.rs:10: assertion failed'; exit 1"],
        &[],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 14, "repeated failure");
    assert_eq!(state_value(&dir, "STOP_REASON"), "circuit_open");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "4");
    assert_eq!(
        state_value(&dir, "CB_SIG").len(),
        64,
        "the failure's signature is recorded"
    );
    let fb: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(dir.join("iterations/000003/feedback.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(fb["loci"], serde_json::json!(["src/lib.rs:10"]));
}

#[test]
fn a_rate_limit_pauses_without_burning_an_iteration_and_resumes_after_the_reset() {
    let repo = Repo::new();
    let flag = repo.bin.path().join("limit-flag");
    fs::write(&flag, "").unwrap();
    let calls = repo.bin.path().join("calls");
    let agent = repo.agent(
        "limited",
        &format!(
            "cat >/dev/null\necho call >> '{calls}'\nif [ -f '{flag}' ]; then rm '{flag}'; echo 'Error: rate limit exceeded (429). Please try again in 2 seconds.' >&2; exit 1; fi\necho work >> work.txt",
            calls = calls.display(),
            flag = flag.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 13, "rate limited");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "PAUSED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "rate_limit");
    assert_eq!(
        state_value(&dir, "NEXT_ITERATION"),
        "1",
        "no iteration burnt"
    );
    assert_eq!(
        state_value(&dir, "CB_FAILS"),
        "0",
        "a rate limit never counts toward the circuit"
    );
    let resume: u64 = state_value(&dir, "RESUME_AT").parse().unwrap();
    assert!(resume > 0);
    // Before RESUME_AT: exit 13 at once, the agent is not called. The runner reads the
    // clock between `before` and `after`: a rerun that ended before the reset was refused,
    // one that started after it resumed; one that straddled it did either, and the agent's
    // calls say which.
    let before = orbit::fsx::now_epoch();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let after = orbit::fsx::now_epoch();
    let refused = if after < resume {
        true
    } else if before >= resume {
        false
    } else {
        out.status.code() == Some(13)
    };
    if refused {
        assert_code(&out, 13, "rerun before the reset");
        assert_eq!(fs::read_to_string(&calls).unwrap().lines().count(), 1);
        while orbit::fsx::now_epoch() < resume {
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 10, "resumed after the reset");
    } else {
        assert_code(&out, 10, "resumed after the reset");
    }
    assert_eq!(fs::read_to_string(&calls).unwrap().lines().count(), 2);
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
    assert!(
        dir.join("iterations/000001/interrupted.1/agent.log")
            .is_file(),
        "the limited attempt is kept"
    );
}

#[test]
fn spending_stops_at_the_cap_with_a_complete_ledger() {
    let repo = Repo::new();
    let agent = repo.agent(
        "spender",
        "cat >/dev/null; echo \"$ORBIT_ITERATION\" | tr 0-9 a-j >> work.txt; echo 0.40 > \"$ORBIT_COST_FILE\"",
    );
    // The failing check prints the growing file, so no two failures are the same.
    let dir = repo.init_loop(&agent, &["cat work.txt; exit 1"], &["--usd-cap", "1"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 12, "budget");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "PAUSED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "budget");
    // 0.40 x 2 = 0.80; a third iteration would cost about 0.40 more and cross the cap of 1,
    // so it is not started.
    assert_eq!(state_value(&dir, "COST_MICROUSD"), "800000");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
    let ledger = fs::read_to_string(dir.join("cost.ledger")).unwrap();
    assert_eq!(ledger, "1\t400000\treported\n2\t400000\treported\n");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("the next iteration would cost about $0.400000"),
        "{}",
        text(&out)
    );
    // Budgets survive restarts: a rerun stays paused until the cap is raised.
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 12, "rerun under the same cap");
    let out = repo.run_loop(&dir, &["--once"], &[("USD_CAP", "5")]);
    assert_code(&out, 10, "a raised cap goes on");
}

/// A run's cost is known only after it: when one costs more than the room it started with,
/// the stop says by how much the cap was crossed, and why.
#[test]
fn an_overshoot_of_the_cap_is_named() {
    let repo = Repo::new();
    let agent = repo.agent(
        "spender",
        "cat >/dev/null; echo \"$ORBIT_ITERATION\" | tr 0-9 a-j >> work.txt\nif [ \"$ORBIT_ITERATION\" = 1 ]; then echo 0.40; else echo 0.90; fi > \"$ORBIT_COST_FILE\"",
    );
    let dir = repo.init_loop(&agent, &["cat work.txt; exit 1"], &["--usd-cap", "1"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 12, "budget");
    assert_eq!(state_value(&dir, "COST_MICROUSD"), "1300000");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(
            "($0.300000 over: the last iteration cost more than the room left when it started)"
        ),
        "{}",
        text(&out)
    );
}

#[test]
fn an_agent_that_reports_no_cost_is_recorded_as_unknown() {
    let repo = Repo::new();
    let agent = repo.agent("silent", "cat >/dev/null; echo x >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    assert_eq!(
        fs::read_to_string(dir.join("cost.ledger")).unwrap(),
        "1\t0\tunknown\n"
    );
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(
        progress.contains("- cost: unknown (the agent reported no cost)"),
        "{progress}"
    );
}

#[test]
fn commits_hold_only_the_agents_files_even_with_odd_names_and_a_crash() {
    let repo = Repo::new();
    repo.write("tracked.txt", "one\n");
    repo.git(&["add", "tracked.txt"]);
    repo.git(&["commit", "-q", "-m", "tracked"]);
    // The user's own work in progress: a dirty tracked file, a staged file, an untracked one.
    repo.write("tracked.txt", "one\nuser edit\n");
    repo.write("staged.txt", "user staged\n");
    repo.git(&["add", "staged.txt"]);
    repo.write("scratch.txt", "user scratch\n");
    let agent = repo.agent(
        "odd",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho a > 'a b'\necho b > ./-rf\necho c > $'new\\nline'\necho \"$ORBIT_ITERATION\" >> counter\necho touched >> tracked.txt\nif [ \"$ORBIT_ITERATION\" -ge 2 ]; then echo ok > \"$ORBIT_AGENT_DIR/done.md\"; fi",
    );
    let dir = repo.init_loop(
        &agent,
        &["test -f counter && test $(wc -l < counter) -ge 2"],
        &[],
    );
    let out = repo.run_loop(&dir, &[], &[("ORBIT_FAULT", "after_commit")]);
    assert_eq!(
        out.status.code(),
        None,
        "killed at after_commit\n{}",
        text(&out)
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE after the crash");
    // Each file the agent created is committed exactly once, in iteration 1.
    let log = repo.git(&["log", "--format=%H", "orbit/test-goal"]);
    let commits: Vec<&str> = log.lines().collect();
    assert_eq!(commits.len(), 4, "init, tracked, iterations 1 and 2");
    let first = repo.git(&["show", "--name-only", "--format=", "-z", commits[1]]);
    let mut files: Vec<&str> = first.split('\0').filter(|f| !f.is_empty()).collect();
    files.sort();
    // tracked.txt is the agent's edit of its own copy (the workspace starts from the commit,
    // without the user's uncommitted edit): its work, committed.
    assert_eq!(files, ["-rf", "a b", "counter", "new\nline", "tracked.txt"]);
    let second = repo.git(&["show", "--name-only", "--format=", "-z", commits[0]]);
    assert_eq!(
        second
            .split('\0')
            .filter(|f| !f.is_empty())
            .collect::<Vec<_>>(),
        ["counter", "tracked.txt"]
    );
    // The user's work is untouched: still dirty, still staged, still untracked.
    let status = repo.git(&[
        "status",
        "--porcelain",
        "--",
        "tracked.txt",
        "staged.txt",
        "scratch.txt",
    ]);
    assert!(
        status.contains(" M tracked.txt") || status.contains("MM tracked.txt"),
        "{status}"
    );
    assert!(status.contains("A  staged.txt"), "{status}");
    assert!(status.contains("?? scratch.txt"), "{status}");
    // The agent never saw the user's edit, and nothing of the user's reached a commit.
    assert_eq!(repo.ws_read("tracked.txt"), "one\ntouched\ntouched\n");
    let all = repo.git(&["log", "-p", "--format=", "orbit/test-goal"]);
    assert!(
        !all.contains("user edit") && !all.contains("user staged") && !all.contains("user scratch"),
        "{all}"
    );
    assert_eq!(repo.read("tracked.txt"), "one\nuser edit\n");
    assert_eq!(
        repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
    assert!(!dir.join("iterations/000001/baseline-touched.txt").exists());
}

/// An executable git hook `name` in the directory `dir` (relative to the work tree's root)
/// running `body` (sh).
fn install_hook(repo: &Repo, dir: &str, name: &str, body: &str) {
    let rel = format!("{dir}/{name}");
    repo.write(&rel, &format!("#!/bin/sh\n{body}\n"));
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(repo.join(&rel), fs::Permissions::from_mode(0o755)).unwrap();
}

/// A loop in a repository whose git hooks (installed before the loop's first run, as a
/// project's own are) refuse every commit: `hook` is the hook's name, `body` its sh, which
/// also records in `ran` that it ran. The agent's change, `work.txt`, passes the check.
fn refused_commit_loop(hook: &str, body: &str, claims: bool) -> (Repo, PathBuf, PathBuf) {
    let repo = Repo::new();
    let ran = repo.bin.path().join("hook-ran");
    install_hook(
        &repo,
        ".git/hooks",
        hook,
        &format!("echo {hook} >> '{}'\n{body}", ran.display()),
    );
    let claim = if claims {
        "echo ok > \"$ORBIT_AGENT_DIR/done.md\""
    } else {
        ""
    };
    let agent = repo.agent(
        "fixer",
        &format!(
            "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho fixed >> work.txt\n{claim}"
        ),
    );
    let check = if claims {
        "test -f work.txt"
    } else {
        "test -f never.txt"
    };
    let dir = repo.init_loop(&agent, &[check], &[]);
    (repo, dir, ran)
}

/// The loop stopped BLOCKED (tool_failure, exit 14) on a refused commit, said why with the
/// hook's own words and the fix, committed nothing of iteration 1 and left its change in
/// the workspace.
fn assert_blocked_by_the_hook(repo: &Repo, dir: &Path, out: &Output, ran: &Path, words: &str) {
    assert!(
        fs::read_to_string(ran).is_ok_and(|t| !t.is_empty()),
        "the hook never ran: the test proves nothing\n{}",
        text(out)
    );
    assert_code(out, 14, "a refused commit stops the loop BLOCKED");
    assert_eq!(state_value(dir, "LAST_STATUS"), "BLOCKED");
    assert_eq!(state_value(dir, "STOP_REASON"), "tool_failure");
    assert!(
        !text(out).contains("NEXUS_LOOP_STATUS: DONE"),
        "{}",
        text(out)
    );
    for f in ["runner.log", "progress.md"] {
        let t = fs::read_to_string(dir.join(f)).unwrap();
        assert!(
            t.contains(words),
            "{f} lacks the hook's words {words:?}:\n{t}"
        );
        assert!(t.contains("make the hook pass"), "{f} lacks the fix:\n{t}");
    }
    assert!(text(out).contains(words), "{}", text(out));
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000001/commit.txt")).unwrap(),
        "failed\n"
    );
    assert!(
        !dir.join("iterations/000001/done.md").exists(),
        "no accepted claim"
    );
    let trailers = repo.git(&[
        "log",
        "--format=%(trailers:key=Orbit-Iteration,valueonly)",
        "orbit/test-goal",
    ]);
    assert!(trailers.trim().is_empty(), "a commit was made: {trailers}");
    assert_eq!(
        repo.ws_read("work.txt"),
        "fixed\n",
        "the change stays in the workspace"
    );
}

#[test]
fn a_done_claim_whose_commit_a_commit_msg_hook_refuses_is_blocked_not_done() {
    // (A pre-commit hook's refusal is a failing check the agent hears: tests/it/hooks.rs.)
    let (repo, dir, ran) = refused_commit_loop(
        "commit-msg",
        "echo 'lint: work.txt has no licence header' >&2\nexit 1",
        true,
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_blocked_by_the_hook(
        &repo,
        &dir,
        &out,
        &ran,
        "lint: work.txt has no licence header",
    );
    assert!(
        dir.join("iterations/000001/done.md.rejected").is_file(),
        "the claim is kept as rejected"
    );
    // The audit names the failed commit.
    let audit = repo.orbit(&["audit", &dir.display().to_string()]);
    assert!(text(&audit).contains("commit failed"), "{}", text(&audit));
    // The report offers no merge of a branch that does not hold the work.
    let report = repo.orbit(&["report", &dir.display().to_string()]);
    assert!(!text(&report).contains("git merge"), "{}", text(&report));
    assert!(text(&report).contains("BLOCKED"), "{}", text(&report));
    // The hook is made to pass: the next run commits the verified change first.
    install_hook(&repo, ".git/hooks", "commit-msg", "exit 0");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE once the hook passes");
    let trailers = repo.git(&[
        "log",
        "--format=%(trailers:key=Orbit-Iteration,valueonly)",
        "orbit/test-goal",
    ]);
    assert!(
        trailers.lines().any(|l| l.trim() == "1"),
        "iteration 1's change is committed: {trailers}"
    );
    let tree = repo.git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"]);
    assert!(tree.lines().any(|l| l == "work.txt"), "{tree}");
}

#[test]
fn commit_hooks_off_commits_past_a_refusing_hook_and_says_so() {
    let (repo, dir, ran) = refused_commit_loop(
        "commit-msg",
        "echo 'pre-commit install wants the network' >&2\nexit 1",
        true,
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_blocked_by_the_hook(
        &repo,
        &dir,
        &out,
        &ran,
        "pre-commit install wants the network",
    );
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("or set commit-hooks = false in loop.toml"),
        "the fix names the setting"
    );
    // The user turns the hooks off in loop.toml: the next run commits the verified change
    // without them, and says so.
    let toml_path = dir.join("loop.toml");
    let toml = fs::read_to_string(&toml_path).unwrap();
    assert!(toml.contains("commit-hooks = true"), "{toml}");
    fs::write(
        &toml_path,
        toml.replace("commit-hooks = true", "commit-hooks = false"),
    )
    .unwrap();
    let rendered = repo.orbit(&["init", "--force", "--dir", &dir.display().to_string()]);
    crate::support::assert_ok(&rendered, "orbit init --force");
    let runs_before = fs::read_to_string(&ran).unwrap().lines().count();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE without the hooks");
    assert_eq!(
        fs::read_to_string(&ran).unwrap().lines().count(),
        runs_before,
        "the hook did not run again"
    );
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("commit-hooks is off: the loop's commits run none of the repository's hooks"),
        "said in runner.log"
    );
    let tree = repo.git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"]);
    assert!(tree.lines().any(|l| l == "work.txt"), "{tree}");
}

/// A repository whose pre-commit hook runs what its tracked `.pre-commit-config.yaml` lists
/// (as the pre-commit framework does), and an agent that adds an entry of its own to it: the
/// runner's commit would run the agent's command as the runner, outside any sandbox.
fn planted_hook_entry_loop(extra: &[&str]) -> (Repo, PathBuf, PathBuf) {
    let repo = Repo::new();
    let escaped = repo.bin.path().join("escaped");
    repo.write(".pre-commit-config.yaml", "entry: true\n");
    repo.git(&["add", ".pre-commit-config.yaml"]);
    repo.git(&["commit", "-q", "-m", "the project's hooks"]);
    install_hook(
        &repo,
        ".git/hooks",
        "pre-commit",
        "sed -n 's/^entry: //p' .pre-commit-config.yaml | while read -r c; do sh -c \"$c\" || exit 1; done",
    );
    let agent = repo.agent(
        "planter",
        &format!(
            "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho fixed >> work.txt\necho \"entry: echo ran-as-the-runner > '{}'\" >> .pre-commit-config.yaml\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
            escaped.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], extra);
    (repo, dir, escaped)
}

#[test]
fn a_command_the_agent_plants_in_the_hooks_configuration_never_runs_in_the_runners_commit() {
    // The attack, with the default protection and the sandbox turned off: the hooks, run
    // as checks, run it.
    let (repo, dir, escaped) = planted_hook_entry_loop(&["--no-auto-protect"]);
    repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    assert!(
        escaped.exists(),
        "the planted entry ran in the hooks' run: the attack is real"
    );
    // By default the hooks' configuration is protected: the change is a reward hack, found
    // before any commit.
    let (repo, dir, escaped) = planted_hook_entry_loop(&[]);
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("\".pre-commit-config.yaml\""), "{toml}");
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    assert_code(&out, 3, "ABORTED: reward_hack");
    assert_eq!(state_value(&dir, "STOP_REASON"), "reward_hack");
    assert!(!escaped.exists(), "the planted command never ran");
}

#[test]
fn a_commit_msg_hook_that_wants_a_ticket_stops_a_loop_that_is_not_done_blocked() {
    let (repo, dir, ran) = refused_commit_loop(
        "commit-msg",
        "grep -q 'PROJ-[0-9]' \"$1\" && exit 0\necho 'commit-msg: the message names no ticket (PROJ-123)' >&2\nexit 1",
        false,
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_blocked_by_the_hook(
        &repo,
        &dir,
        &out,
        &ran,
        "commit-msg: the message names no ticket (PROJ-123)",
    );
    assert!(
        !dir.join("iterations/000002").exists(),
        "no iteration runs after a refused commit"
    );
}

#[test]
fn a_held_index_lock_or_a_hanging_hook_does_not_wedge_the_loop() {
    let repo = Repo::new();
    let agent = repo.agent(
        "worker",
        "cat >/dev/null; echo \"$ORBIT_ITERATION\" | tr 0-9 a-j >> work.txt",
    );
    let dir = repo.init_loop(&agent, &["cat work.txt; exit 1"], &[]);
    // A hook that waits for input forever: bounded by commit-timeout, a failing check.
    install_hook(&repo, ".git/hooks", "pre-commit", "sleep 300");
    let out = repo.run_loop(&dir, &["--once"], &[("COMMIT_TIMEOUT", "2s")]);
    assert_code(&out, 10, "tick with a hanging hook");
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000001/commit.txt"))
            .unwrap()
            .len(),
        41,
        "the runner's commit runs no hook"
    );
    let fb = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        fb.contains("the pre-commit hook did not finish within 2s"),
        "{fb}"
    );
    fs::remove_file(repo.join(".git/hooks/pre-commit")).unwrap();
    // A held index.lock (the workspace's: each worktree has its own index): retried, then
    // given up on; the loop goes on.
    let lock = repo.join(".git/worktrees/test-goal/index.lock");
    fs::write(&lock, "").unwrap();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick with index.lock held");
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000002/commit.txt")).unwrap(),
        "failed\n"
    );
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("index.lock")
    );
    fs::remove_file(&lock).unwrap();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick after the lock is gone");
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000003/commit.txt"))
            .unwrap()
            .len(),
        41
    );
}

#[test]
fn squash_on_done_makes_one_summary_commit_and_a_rerun_changes_nothing() {
    let repo = Repo::new();
    let agent = repo.agent(
        "two",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho \"$ORBIT_ITERATION\" >> work.txt\nif [ \"$ORBIT_ITERATION\" -ge 2 ]; then echo ok > \"$ORBIT_AGENT_DIR/done.md\"; fi",
    );
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt && test $(wc -l < work.txt) -ge 2"],
        &[],
    );
    let out = repo.run_loop(&dir, &[], &[("SQUASH_ON_DONE", "1")]);
    assert_code(&out, 0, "DONE");
    let summary = repo.git(&[
        "log",
        "--format=%s%n%b",
        "orbit/test-goal-summary",
        "-n",
        "1",
    ]);
    assert!(
        summary.starts_with("orbit(test-goal): test goal (2 iterations)"),
        "{summary}"
    );
    assert_eq!(
        repo.git(&["rev-list", "--count", "orbit/test-goal-summary"])
            .trim(),
        "2",
        "one commit on top of the start"
    );
    assert_eq!(
        repo.git(&["rev-parse", "orbit/test-goal-summary^{tree}"]),
        repo.git(&["rev-parse", "orbit/test-goal^{tree}"])
    );
    let refs = repo.git(&["for-each-ref"]);
    let out = repo.run_loop(&dir, &[], &[("SQUASH_ON_DONE", "1")]);
    assert_code(&out, 0, "rerun");
    assert_eq!(repo.git(&["for-each-ref"]), refs);
}

#[test]
fn per_iteration_and_per_run_caps_pause_the_loop() {
    let repo = Repo::new();
    let agent = repo.agent(
        "spender",
        "cat >/dev/null; echo \"$ORBIT_ITERATION\" | tr 0-9 a-j >> work.txt; echo 0.40 > \"$ORBIT_COST_FILE\"",
    );
    let dir = repo.init_loop(&agent, &["cat work.txt; exit 1"], &[]);
    // One iteration cost 0.40, over a 0.30 per-iteration cap: paused before the next.
    let out = repo.run_loop(&dir, &[], &[("USD_PER_ITER_CAP", "0.30")]);
    assert_code(&out, 12, "per-iteration cap");
    assert_eq!(state_value(&dir, "STOP_REASON"), "budget");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
    // A per-run cap of 0.50: this run stops after its second iteration (0.80 spent in it).
    let out = repo.run_loop(&dir, &[], &[("USD_PER_RUN_CAP", "0.50")]);
    assert_code(&out, 12, "per-run cap");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "4");
    assert_eq!(state_value(&dir, "COST_MICROUSD"), "1200000");
    // The next run is a new run: it goes on.
    let out = repo.run_loop(&dir, &["--once"], &[("USD_PER_RUN_CAP", "0.50")]);
    assert_code(&out, 10, "a new run under the per-run cap");
}

/// One scenario, committed by plumbing (no hooks: the fast path) and by the porcelain (a
/// commit-msg hook present): the same trees, messages, index and status.
fn commit_scenario(with_hook: bool) -> (Repo, Vec<String>) {
    let repo = Repo::new();
    repo.write("keep.txt", "keep\n");
    repo.write("gone.txt", "gone\n");
    repo.write("tool.sh", "echo tool\n");
    repo.write("dirty.txt", "base\n");
    if with_hook {
        // Under a relative core.hooksPath, tracked in the repository as husky does (it
        // starts from the work tree's root: the workspace's): a hook that records each of
        // its runs in the repository's common git directory.
        install_hook(
            &repo,
            ".githooks",
            "commit-msg",
            "echo ran >> \"$(git rev-parse --path-format=absolute --git-common-dir)/hook-runs\"",
        );
    }
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "files"]);
    if with_hook {
        repo.git(&["config", "core.hooksPath", ".githooks"]);
    }
    // The user's own uncommitted work: never seen by the agent, never committed.
    repo.write("dirty.txt", "base\nuser edit\n");
    let agent = repo.agent(
        "editor",
        r#"cat >/dev/null
case $ORBIT_ITERATION in
  1) mkdir -p sub/dir; echo new > sub/dir/new.txt; rm gone.txt; chmod +x tool.sh
     echo spaced > 'name with space.txt'; echo agent >> dirty.txt ;;
  2) echo more >> sub/dir/new.txt; rm -r sub/dir; echo file > sub/dir 2>/dev/null || { rm -rf sub; echo file > sub; } ;;
  3) : ;;
esac"#,
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    for i in 1..=3 {
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 10, &format!("tick {i}"));
    }
    let mut facts = vec![];
    for i in 1..=3 {
        facts.push(fs::read_to_string(dir.join(format!("iterations/{i:06}/commit.txt"))).unwrap());
    }
    assert_eq!(facts[2], "none\n", "iteration 3 changed nothing");
    let head = repo.ws_git(&["rev-parse", "HEAD"]);
    assert_eq!(facts[1], head, "commit.txt names the workspace's HEAD");
    assert_eq!(
        repo.git(&["rev-parse", "orbit/test-goal"]),
        head,
        "which is the loop branch"
    );
    assert_eq!(repo.read("dirty.txt"), "base\nuser edit\n");
    // What the two ways must agree on: content, messages, index, status, reflog.
    let facts = vec![
        repo.ws_git(&["log", "--format=%T %P%n%B", "-n", "2"])
            .lines()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        repo.ws_git(&["ls-files", "-s"]),
        repo.ws_git(&["status", "--porcelain", "--untracked-files=all"]),
        repo.ws_git(&["reflog", "-n", "2", "--format=%gs"]),
        repo.ws_git(&["show", "--name-status", "--format=", "HEAD~1"]),
    ];
    (repo, facts)
}

#[test]
fn commits_by_plumbing_and_by_the_porcelain_are_the_same() {
    let (fast, plumbing) = commit_scenario(false);
    let (hooked, porcelain) = commit_scenario(true);
    // The same, but for the hook's own file, which only the hooked repository tracks.
    let strip = |facts: &[String]| -> Vec<String> {
        facts
            .iter()
            .map(|f| {
                f.lines()
                    .filter(|l| !l.contains(".githooks"))
                    .map(|l| format!("{l}\n"))
                    .collect()
            })
            .collect()
    };
    assert_eq!(strip(&plumbing)[1..], strip(&porcelain)[1..]);
    // The hook did run, once per commit: the commit went through git commit there.
    assert_eq!(hooked.read(".git/hook-runs"), "ran\nran\n");
    assert!(!fast.join(".git/hook-runs").exists());
    // And they are what the scenario says.
    assert!(
        plumbing[3].contains("commit: orbit(test-goal): iteration 2"),
        "{}",
        plumbing[3]
    );
    assert_eq!(plumbing[2], "", "the workspace holds nothing uncommitted");
    let first = &plumbing[4];
    for want in [
        "D\tgone.txt",
        "M\ttool.sh",
        "A\tsub/dir/new.txt",
        "A\tname with space.txt",
        "M\tdirty.txt",
    ] {
        assert!(first.contains(want), "{want} in\n{first}");
    }
    let all = fast.git(&["log", "-p", "--format=", "orbit/test-goal"]);
    assert!(!all.contains("user edit"), "{all}");
}

#[test]
fn a_long_goal_title_is_cut_in_the_commit_message_between_characters() {
    let repo = Repo::new();
    let agent = repo.agent(
        "writer",
        "cat >/dev/null; echo \"$ORBIT_ITERATION\" >> work.txt",
    );
    // 59 ASCII bytes, then a two-byte character across the 60-byte limit.
    let goal = format!("{}é and more", "x".repeat(59));
    let exec = agent.display().to_string();
    let out = repo.orbit(&[
        "init",
        &goal,
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "false",
        "--dir",
        ".orbit/long",
    ]);
    assert_code(&out, 0, "init");
    let dir = repo.join(".orbit/long");
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    let body = repo.git(&["log", "-1", "--format=%B", "orbit/long"]);
    assert!(
        body.contains(&format!("\n\nGoal: {}\n\n", "x".repeat(59))),
        "{body:?}"
    );
    assert!(!body.contains('\u{fffd}'), "valid UTF-8: {body:?}");
}

#[test]
fn an_agent_that_commits_by_itself_mid_run_keeps_its_commit_and_the_loop_goes_on() {
    // By plumbing, and by git commit (a commit-msg hook present).
    for with_hook in [false, true] {
        agent_commits_by_itself(with_hook);
    }
}

fn agent_commits_by_itself(with_hook: bool) {
    let repo = Repo::new();
    if with_hook {
        install_hook(&repo, ".git/hooks", "commit-msg", "exit 0");
    }
    // Iteration 2 commits its own work; the runner's next commit must build on it.
    let agent = repo.agent(
        "self-committer",
        r#"cat >/dev/null
echo "step $ORBIT_ITERATION" >> work.txt
if [ "$ORBIT_ITERATION" = 2 ]; then
  git add work.txt && git commit -q -m "agent: my own commit"
fi"#,
    );
    // A failing check whose output changes with each iteration (letters, not digits).
    let dir = repo.init_loop(&agent, &["tr 0-9 a-j < work.txt; exit 1"], &[]);
    let out = repo.run_loop(
        &dir,
        &[],
        &[("MAX_ITERATIONS", "3"), ("WRAPUP_ON_LIMIT", "0")],
    );
    assert_code(&out, 16, "three iterations");
    let log = repo.git(&["log", "--format=%s", "-n", "4", "orbit/test-goal"]);
    assert_eq!(
        log,
        "orbit(test-goal): iteration 3\nagent: my own commit\norbit(test-goal): iteration 1\ninit\n",
        "the agent's commit stays in the history, between the loop's"
    );
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000002/commit.txt")).unwrap(),
        "none\n",
        "nothing of iteration 2 was left to commit (hook: {with_hook})"
    );
    assert_eq!(
        repo.git(&["show", "orbit/test-goal:work.txt"]),
        "step 1\nstep 2\nstep 3\n"
    );
    assert!(
        repo.ws_git(&["status", "--porcelain", "--", "work.txt"])
            .is_empty()
    );
}

#[test]
fn plumbing_commits_run_gits_housekeeping_every_hundred_iterations() {
    let repo = Repo::new();
    let trace = repo.bin.path().join("git-trace.txt");
    let agent = repo.agent(
        "writer",
        "cat >/dev/null; echo \"$ORBIT_ITERATION\" > \"f$ORBIT_ITERATION.txt\"",
    );
    // A check that always fails, differently each time (the file count in letters).
    let dir = repo.init_loop(&agent, &["ls f*.txt | wc -l | tr 0-9 a-j; exit 1"], &[]);
    let trace_env = trace.display().to_string();
    let out = repo.run_loop_within(
        &dir,
        &[],
        &[
            ("MAX_ITERATIONS", "100"),
            ("WRAPUP_ON_LIMIT", "0"),
            ("GIT_TRACE", &trace_env),
        ],
        std::time::Duration::from_secs(1200),
    );
    assert_code(&out, 16, "100 iterations");
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000100/commit.txt"))
            .unwrap()
            .len(),
        41,
        "iteration 100 committed"
    );
    // What git commit runs after a commit, once in the hundred: git's own trace says so.
    let traced = fs::read_to_string(&trace).unwrap();
    let housekeeping = traced
        .lines()
        .filter(|l| l.contains("built-in: git maintenance run --auto"))
        .count();
    assert_eq!(housekeeping, 1, "one housekeeping run in 100 iterations");
    let commits = traced
        .lines()
        .filter(|l| l.contains("built-in: git commit-tree"))
        .count();
    assert_eq!(commits, 100, "every iteration committed by plumbing");
}

#[test]
fn a_repository_that_signs_its_commits_gets_signed_loop_commits() {
    let repo = Repo::new();
    // A stand-in for gpg that signs anything, as git expects gpg to answer.
    let gpg = repo.bin.path().join("fake-gpg");
    fs::write(
        &gpg,
        "#!/bin/sh\ncat >/dev/null\nprintf '\\n[GNUPG:] SIG_CREATED D 1 8 00 1700000000 FAKE\\n' >&2\nprintf -- '-----BEGIN PGP SIGNATURE-----\\n\\nfake\\n-----END PGP SIGNATURE-----\\n'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&gpg, fs::Permissions::from_mode(0o755)).unwrap();
    repo.git(&["config", "commit.gpgsign", "true"]);
    repo.git(&["config", "gpg.program", gpg.to_str().unwrap()]);
    let agent = repo.agent(
        "writer",
        "cat >/dev/null; echo \"$ORBIT_ITERATION\" >> work.txt",
    );
    let dir = repo.init_loop(&agent, &["tr 0-9 a-j < work.txt; exit 1"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    let head = repo.git(&["rev-parse", "orbit/test-goal"]);
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000001/commit.txt")).unwrap(),
        head
    );
    let raw = repo.git(&["cat-file", "commit", "orbit/test-goal"]);
    assert!(
        raw.contains("\ngpgsig -----BEGIN PGP SIGNATURE-----"),
        "the loop's commit is signed, as the repository asks:\n{raw}"
    );
}

#[test]
fn a_placeholder_pattern_grep_refuses_stops_the_run_before_anything_runs() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    let dir = repo.init_loop(&agent, &[&count_check(1)], &[]);
    // An unclosed bracket: grep exits 2 on it. Swallowed, the scan would find nothing and
    // pass every claim.
    let out = repo.run_loop(&dir, &[], &[("PLACEHOLDER_PATTERN", "TODO|[unclosed")]);
    assert_code(&out, 2, "a bad pattern is a bad setting");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("PLACEHOLDER_PATTERN"),
        "{}",
        text(&out)
    );
    assert!(!dir.join("iterations/000001").exists(), "nothing ran");
}

#[test]
fn an_os_error_is_a_tool_failure_never_a_rate_limit() {
    for message in [
        "write error: Disk quota exceeded",
        "cannot write session file: No space left on device",
    ] {
        let repo = Repo::new();
        let agent = repo.agent(
            "full",
            &format!("cat >/dev/null\necho '{message}' >&2\nexit 1"),
        );
        let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 14, message);
        assert_eq!(
            state_value(&dir, "STOP_REASON"),
            "tool_failure",
            "{message}"
        );
        assert_eq!(state_value(&dir, "RESUME_AT"), "0", "{message}: no pause");
        assert_eq!(
            events_named(&dir, "agent_exit").len(),
            1,
            "{message}: not retried"
        );
        let result = fs::read_to_string(dir.join("iterations/000001/result.env")).unwrap();
        assert!(result.contains("the machine said: "), "{result}");
    }
}

#[test]
fn a_rate_limit_that_resets_in_more_than_a_week_is_a_stop_not_a_pause() {
    let repo = Repo::new();
    let agent = repo.agent(
        "forever",
        "cat >/dev/null\necho 'Error: rate limit exceeded (429). Please try again in 999999 hours.' >&2\nexit 1",
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 14, "a stop for a human, with the text");
    assert_eq!(state_value(&dir, "STOP_REASON"), "tool_failure");
    assert_eq!(state_value(&dir, "RESUME_AT"), "0", "never a century ahead");
    let result = fs::read_to_string(dir.join("iterations/000001/result.env")).unwrap();
    assert!(
        result.contains("more than 7 days away") && result.contains("999999 hours"),
        "{result}"
    );
}

/// A PATH of links to everything on this machine's PATH but `git`.
fn path_without_git(repo: &Repo) -> String {
    path_without(repo, &["git"])
}

/// A PATH of the repository's bin and links to everything on the test's PATH but `hidden`.
fn path_without(repo: &Repo, hidden: &[&str]) -> String {
    let dir = repo
        .bin
        .path()
        .join(format!("path-without-{}", hidden.join("-")));
    fs::create_dir_all(&dir).unwrap();
    for base in std::env::var("PATH").unwrap_or_default().split(':') {
        let Ok(rd) = fs::read_dir(base) else { continue };
        for e in rd.flatten() {
            let name = e.file_name();
            if hidden.iter().any(|h| name == *h) || dir.join(&name).exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), dir.join(&name));
        }
    }
    format!("{}:{}", repo.bin.path().display(), dir.display())
}

#[test]
fn a_scheduler_environment_without_a_core_tool_is_a_preflight_error_naming_each() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null\necho step >> work.txt");
    let dir = repo.init_loop(&agent, &["exit 1"], &[]);
    // A PATH that finds neither diff nor ps (a minimal container without diffutils and
    // procps): each is named before anything runs, never a failure half-way through.
    let path = path_without(&repo, &["diff", "ps"]);
    let out = repo.run_loop(&dir, &["--once"], &[("PATH", &path)]);
    assert_code(&out, 2, "no diff, no ps");
    let t = text(&out);
    assert!(
        t.contains("PATH") && t.contains("does not find them: diff ps"),
        "{t}"
    );
    assert_eq!(t.matches("NEXUS_LOOP_STATUS:").count(), 1, "{t}");
    assert!(
        !dir.join("iterations/000001").exists(),
        "nothing ran, nothing was spent"
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "with them back");
}

#[test]
fn orbit_init_warns_of_each_program_the_loop_will_lack_on_this_machine() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null");
    let exec = agent.display().to_string();
    let path = path_without(&repo, &["diff", "perl"]);
    let mut cmd = crate::support::command(crate::support::orbit_bin());
    cmd.args([
        "init",
        "test goal",
        "--engine",
        "claude",
        "--verify",
        "exit 1",
    ])
    .current_dir(repo.path())
    .env("PATH", &path);
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(60));
    assert_ok(
        &out,
        "orbit init renders the loop all the same: it may run elsewhere",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PATH does not find diff"), "{err}");
    assert!(
        err.contains("needs perl with Cwd, Digest::SHA, File::Find, JSON::PP"),
        "{err}"
    );
    // With everything there, no such warning.
    let out = repo.orbit(&[
        "init",
        "other goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "exit 1",
    ]);
    assert_ok(&out, "orbit init");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("will not run on this machine"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_built_in_engines_loop_without_perls_modules_names_what_is_missing() {
    // A claude loop holds claude's user-level files with perl: without perl on PATH the
    // preflight says so, and which modules it needs, before anything runs.
    let repo = Repo::new();
    repo.agent("claude", "cat >/dev/null\necho '{\"type\":\"result\"}'");
    let out = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "claude",
        "--verify",
        "exit 1",
        "--sandbox",
        "none",
    ]);
    assert_ok(&out, "orbit init");
    let dir = repo.join(".orbit/test-goal");
    let path = path_without(&repo, &["perl"]);
    let out = repo.run_loop(
        &dir,
        &["--once"],
        &[("PATH", &path), ("ANTHROPIC_API_KEY", "test-key")],
    );
    assert_code(&out, 2, "no perl");
    let t = text(&out);
    assert!(
        t.contains("PATH has no perl") && t.contains("Digest::SHA") && t.contains("JSON::PP"),
        "{t}"
    );
    assert!(
        !dir.join("iterations/000001").exists(),
        "nothing ran, nothing was spent"
    );
}

/// What works without perl (contract section 1): a custom agent's loop with no env file and
/// no network allowlist runs its iteration, its hashes each a sha256sum call.
#[test]
fn a_custom_loop_without_an_env_file_or_an_allowlist_runs_without_perl() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null\necho step >> work.txt");
    let dir = repo.init_loop(&agent, &["exit 1"], &["--sandbox", "none"]);
    let path = path_without(&repo, &["perl"]);
    let out = repo.run_loop(&dir, &["--once"], &[("PATH", &path)]);
    assert_code(&out, 10, "no perl, nothing that needs it");
    assert!(
        dir.join("iterations/000001").exists(),
        "the iteration ran: {}",
        text(&out)
    );
}

#[test]
fn a_scheduler_environment_without_git_or_with_a_bad_tmpdir_is_a_preflight_error_naming_it() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null\necho step >> work.txt");
    let dir = repo.init_loop(&agent, &["exit 1"], &[]);
    // cron's PATH, say, without git: named as such, not as "not a git work tree".
    let path = path_without_git(&repo);
    let out = repo.run_loop(&dir, &["--once"], &[("PATH", &path)]);
    assert_code(&out, 2, "no git");
    let t = text(&out);
    assert!(t.contains("git is not on PATH"), "{t}");
    assert!(!t.contains("not inside a git work tree"), "{t}");
    // A TMPDIR that is not there: the agent and the checks would fail in its name.
    let missing = repo.bin.path().join("no-such-tmp");
    let out = repo.run_loop(&dir, &["--once"], &[("TMPDIR", missing.to_str().unwrap())]);
    assert_code(&out, 2, "bad TMPDIR");
    assert!(
        text(&out).contains("is not a writable directory"),
        "{}",
        text(&out)
    );
    assert!(
        !dir.join("iterations/000001").exists(),
        "nothing ran, nothing was spent"
    );
    // With both fixed the loop runs.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "fixed");
}

#[test]
fn gits_own_housekeeping_writing_info_refs_during_a_run_is_not_tampering() {
    // A repack (a `gc --auto` a commit detached, git maintenance) rewrites .git/info/refs
    // for the dumb HTTP transport, whenever it ends: nothing local reads it. The agent does
    // it here itself, and writes its work only once the file is there.
    let repo = Repo::new();
    let agent = repo.agent(
        "housekeeper",
        r#"cat >/dev/null
git update-server-info
G=$(git rev-parse --path-format=absolute --git-common-dir)
test -s "$G/info/refs" || exit 0
echo work > work.txt
echo done > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE, not git_tamper");
    assert!(
        repo.join(".git/info/refs").is_file(),
        "info/refs was written"
    );
}

/// A check that swaps the workspace's `.git` for a repository of its own whose configuration
/// names a clean and a smudge filter for every file (and leaves a new file for git to read
/// through them): the runner's look at what the checks changed runs git with the
/// workspace's own git directory, so no program of the plant's runs as the runner, and the
/// integrity gate stops the loop on the swapped `.git` (git_tamper).
#[test]
fn a_dot_git_with_a_filter_a_check_put_in_the_workspace_never_runs_it() {
    let repo = Repo::new();
    let agent = repo.agent("writer", "cat >/dev/null; echo step >> work.txt");
    let marker = repo.bin.path().join("filtered");
    let once = repo.bin.path().join("planted-once");
    let check = format!(
        "if ! test -e {o}; then touch {o}; rm -f .git; git init -q . && printf '#!/bin/sh\\ntouch {m}\\ncat\\n' > .git/spy && chmod +x .git/spy && git config filter.spy.clean \"$PWD/.git/spy\" && git config filter.spy.smudge \"$PWD/.git/spy\" && echo '* filter=spy' > .git/info/attributes && echo new > made-by-check.txt && echo planted; fi; exit 1",
        m = marker.display(),
        o = once.display()
    );
    let dir = repo.init_loop(&agent, &[&check], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(
        once.exists() && repo.ws().join(".git/spy").is_file(),
        "the attack was made: the workspace's .git is a repository of the check's\n{}",
        text(&out)
    );
    assert!(
        !marker.exists(),
        "the runner's git never ran the plant's filter\n{}",
        text(&out)
    );
    assert_code(&out, 3, "the swapped .git stops the loop");
    assert_eq!(state_value(&dir, "STOP_REASON"), "git_tamper");
}
