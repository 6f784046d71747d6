//! Workspaces (contract 2.0): each loop works in its own git worktree on `orbit/<name>`.
//! One scenario per way a loop run in the user's own checkout used to break ordinary use,
//! and the git facts a workspace must keep: locked against prune, recreated when deleted by
//! hand, a branch moved by hand stops the loop rather than be committed over.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::support::{
    Repo, assert_code, assert_ok, assert_records_agree, count_check, counting_agent, events_named,
    read_kv, state_value, text,
};

/// The commits of a loop branch, newest first, as "subject\tfile file ...".
fn branch_commits(repo: &Repo, branch: &str) -> Vec<String> {
    let log = repo.git(&["log", "--format=%H %s", branch]);
    log.lines()
        .map(|l| {
            let (id, subject) = l.split_once(' ').unwrap();
            let files = repo.git(&["show", "--name-only", "--format=", id]);
            let files: Vec<&str> = files.lines().collect();
            format!("{subject}\t{}", files.join(" "))
        })
        .collect()
}

#[test]
fn a_user_who_keeps_working_keeps_their_branch_and_their_edit_and_the_agent_its_work() {
    let repo = Repo::new();
    repo.write("shared.txt", "line 1\n");
    repo.git(&["add", "shared.txt"]);
    repo.git(&["commit", "-q", "-m", "shared"]);
    let agent = repo.agent(
        "editor",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "agent $ORBIT_ITERATION" >> shared.txt
if [ "$ORBIT_ITERATION" -ge 2 ]; then echo "all hold" > "$ORBIT_AGENT_DIR/done.md"; fi"#,
    );
    let dir = repo.init_loop(&agent, &["grep -q 'agent 2' shared.txt"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 1");
    // Between ticks the user edits the same file in their checkout and stays on main.
    repo.write("shared.txt", "line 1\nuser edit\n");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    // The user's checkout: the same branch, the same HEAD commit, their edit as it was.
    assert_eq!(
        repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
    assert_eq!(repo.read("shared.txt"), "line 1\nuser edit\n");
    assert_eq!(
        repo.git(&["status", "--porcelain", "--", "shared.txt"]),
        " M shared.txt\n"
    );
    // The agent's work on that file is all committed on the loop branch, the user's edit
    // in none of it.
    assert_eq!(
        repo.git(&["show", "orbit/test-goal:shared.txt"]),
        "line 1\nagent 1\nagent 2\n"
    );
    let all = repo.git(&["log", "-p", "--format=", "orbit/test-goal"]);
    assert!(!all.contains("user edit"), "{all}");
    assert_records_agree(&dir);
}

#[test]
fn two_loops_in_one_repository_run_at_once_each_on_its_own_branch() {
    let repo = Repo::new();
    // Each agent sleeps, so that the two runs overlap, and writes its own file.
    let agent = repo.agent(
        "slow",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sleep 1
echo "$ORBIT_ITERATION" >> "work-$(basename "$ORBIT_WORKSPACE").txt"
if [ "$ORBIT_ITERATION" -ge 3 ]; then echo "all hold" > "$ORBIT_AGENT_DIR/done.md"; fi"#,
    );
    let exec = agent.display().to_string();
    let mut dirs = vec![];
    for name in ["alpha", "beta"] {
        let check = format!("test \"$(wc -l < work-{name}.txt)\" -ge 3");
        let out = repo.orbit(&[
            "init",
            "goal",
            "--engine",
            "custom",
            "--exec",
            &exec,
            "--verify",
            &check,
            "--dir",
            &format!(".orbit/{name}"),
        ]);
        assert_ok(&out, name);
        dirs.push(repo.join(&format!(".orbit/{name}")));
    }
    let a = repo.spawn_loop(&dirs[0], &[], &[("RETRY_BASE_DELAY", "0")]);
    let b = repo.spawn_loop(&dirs[1], &[], &[("RETRY_BASE_DELAY", "0")]);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_code(&a, 0, "alpha DONE");
    assert_code(&b, 0, "beta DONE");
    // They did overlap: beta started before alpha ended.
    let start_b = events_named(&dirs[1], "loop_start")[0].ts.clone();
    let stop_a = events_named(&dirs[0], "loop_stop")
        .last()
        .unwrap()
        .ts
        .clone();
    assert!(
        start_b <= stop_a,
        "the runs overlapped: {start_b} <= {stop_a}"
    );
    // Each branch holds its own loop's commits, with its own agent's file only: no loop
    // directory, no other loop's work.
    for (name, other) in [("alpha", "beta"), ("beta", "alpha")] {
        let commits = branch_commits(&repo, &format!("orbit/{name}"));
        let loop_commits: Vec<&String> =
            commits.iter().filter(|c| c.starts_with("orbit(")).collect();
        assert_eq!(loop_commits.len(), 3, "{name}: {commits:?}");
        for c in loop_commits {
            assert!(
                c.starts_with(&format!("orbit({name}): iteration ")),
                "{name}: {c}"
            );
            assert!(c.ends_with(&format!("\twork-{name}.txt")), "{name}: {c}");
            assert!(!c.contains(".orbit") && !c.contains(other), "{name}: {c}");
        }
        assert_records_agree(&repo.join(&format!(".orbit/{name}")));
    }
    assert_eq!(
        repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
}

/// Loop beta's first run (its workspace made, the repository's info/exclude read) happens
/// while loop alpha's agent runs: nothing of it is alpha's git_tamper.
#[test]
fn a_second_loops_first_run_during_the_first_loops_agent_is_no_tamper_of_it() {
    let repo = Repo::new();
    let started = repo.join("alpha-started");
    let go = repo.join("beta-done");
    let alpha = repo.agent(
        "alpha-agent",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo started > '{s}'
i=0; while [ ! -f '{g}' ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
echo a >> work-alpha.txt"#,
            s = started.display(),
            g = go.display()
        ),
    );
    let beta = repo.agent(
        "beta-agent",
        "cat >/dev/null
echo b >> work-beta.txt",
    );
    let mut dirs = vec![];
    for (name, agent) in [("alpha", &alpha), ("beta", &beta)] {
        let exec = agent.display().to_string();
        let out = repo.orbit(&[
            "init",
            "goal",
            "--engine",
            "custom",
            "--exec",
            &exec,
            "--verify",
            "test -f never-there",
            "--dir",
            &format!(".orbit/{name}"),
            "--sandbox",
            "none",
        ]);
        assert_ok(&out, name);
        dirs.push(repo.join(&format!(".orbit/{name}")));
    }
    let a = repo.spawn_loop(&dirs[0], &["--once"], &[]);
    crate::support::wait_for("alpha's agent", Duration::from_secs(60), || {
        started.is_file()
    });
    let b = repo.run_loop(&dirs[1], &["--once"], &[]);
    assert_code(&b, 10, "beta's first tick");
    fs::write(&go, "go").unwrap();
    let a = a.wait_with_output().unwrap();
    assert_code(&a, 10, "alpha's tick goes on: no git_tamper");
    assert_eq!(state_value(&dirs[0], "LAST_STATUS"), "CONTINUE");
}

#[test]
fn a_second_loop_rendered_mid_run_never_counts_as_the_first_loops_work() {
    let repo = Repo::new();
    let exec_self = repo.bin.path().join("second");
    let orbit = crate::support::orbit_bin().display().to_string();
    // Mid-run, in the user's checkout, someone renders a second loop (its loop.toml holds
    // the placeholder pattern, "TODO" among it); the first loop's agent then claims DONE.
    let agent = repo.agent(
        "first",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
if [ "$ORBIT_ITERATION" = 1 ]; then
  (cd '{repo}' && '{orbit}' init "second goal" --engine custom --exec '{}' --verify false >/dev/null)
fi
if [ "$ORBIT_ITERATION" -ge 2 ]; then echo "all hold" > "$ORBIT_AGENT_DIR/done.md"; fi"#,
            exec_self.display(),
            repo = repo.path().display(),
        ),
    );
    let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "the first loop reaches DONE");
    assert!(repo.join(".orbit/second-goal/loop.toml").is_file());
    let r = read_kv(&dir.join("iterations/000002/result.env"));
    assert_eq!(r["DONE_VERDICT"], "DONE");
    assert_eq!(r["CHANGED"], "1", "only work.txt is the agent's change");
}

#[test]
fn a_runner_logged_into_the_repository_still_tells_a_stall_from_a_repeated_failure() {
    let repo = Repo::new();
    let agent = repo.agent("idle", "cat >/dev/null; exit 0");
    let dir = repo.init_loop(&agent, &["echo not yet; exit 1"], &[]);
    // The user logs the runner into a file of their checkout, which changes every
    // iteration: that is not the agent's work.
    let mut cmd = crate::support::command("bash");
    cmd.arg("-c")
        .arg(r#"bash "$1/run-loop.sh" >> loop.log 2>&1"#)
        .arg("run")
        .arg(&dir)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("RETRY_BASE_DELAY", "0");
    let out = crate::support::run_bounded(cmd, Duration::from_secs(120));
    let log = repo.read("loop.log");
    assert_eq!(out.status.code(), Some(15), "STALLED, not BLOCKED:\n{log}");
    assert_eq!(state_value(&dir, "STOP_REASON"), "stalled");
    assert!(log.contains("NEXUS_LOOP_SUMMARY: STALLED"), "{log}");
}

#[test]
fn an_agent_that_leaves_the_loop_branch_never_moves_main() {
    let repo = Repo::new();
    let main_before = repo.git(&["rev-parse", "main"]);
    let agent = repo.agent(
        "wanderer",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
if [ "$ORBIT_ITERATION" = 1 ]; then git checkout -q --ignore-other-worktrees main; fi
echo "step $ORBIT_ITERATION" >> work.txt
if [ "$ORBIT_ITERATION" -ge 2 ]; then echo "all hold" > "$ORBIT_AGENT_DIR/done.md"; fi"#,
    );
    let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    assert_eq!(
        repo.git(&["rev-parse", "main"]),
        main_before,
        "main untouched"
    );
    assert_eq!(
        repo.ws_git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "orbit/test-goal"
    );
    let commits = branch_commits(&repo, "orbit/test-goal");
    assert!(
        commits[0].starts_with("orbit(test-goal): iteration 2\twork.txt"),
        "{commits:?}"
    );
    assert_eq!(
        commits.len(),
        3,
        "iterations 1 and 2 on top of init: {commits:?}"
    );
    assert_eq!(events_named(&dir, "workspace_head_moved").len(), 1);
}

#[test]
fn the_workspace_is_a_locked_worktree_that_prune_keeps() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 5);
    let dir = repo.init_loop(&agent, &[&count_check(5)], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    let ws = fs::canonicalize(repo.ws()).unwrap();
    assert_eq!(state_value(&dir, "WORKSPACE"), ws.display().to_string());
    // A prune while the workspace is out of reach (a disk not mounted, a directory moved
    // for a moment) drops an unlocked worktree's registration; the loop's stays.
    let away = ws.with_extension("away");
    fs::rename(&ws, &away).unwrap();
    repo.git(&["worktree", "prune"]);
    fs::rename(&away, &ws).unwrap();
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    let entry = list
        .split("\n\n")
        .find(|e| e.contains(&format!("worktree {}", ws.display())))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(
        entry.contains("branch refs/heads/orbit/test-goal"),
        "{entry}"
    );
    assert!(entry.contains("locked orbit loop "), "{entry}");
    // The agent's folder is excluded, never committed, and the workspace is outside the
    // user's checkout, where no tool that walks up from it finds the user's files.
    assert_eq!(repo.ws_git(&["status", "--porcelain"]), "");
    assert!(
        !ws.starts_with(fs::canonicalize(repo.path()).unwrap()),
        "{}",
        ws.display()
    );
    assert!(
        repo.ws().join(".orbit-agent/goal.md").is_file(),
        "the folder is there"
    );
    // The loop goes on in it.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 2 after the prune");
    assert!(events_named(&dir, "workspace_recreated").is_empty());
}

#[test]
fn a_workspace_deleted_by_hand_is_recreated_from_the_branch_and_the_loop_goes_on() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 3);
    let dir = repo.init_loop(&agent, &[&count_check(3)], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 1");
    fs::remove_dir_all(repo.ws()).unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE after the workspace came back");
    assert_eq!(repo.ws_read("work.txt"), "step 1\nstep 2\nstep 3\n");
    let ev = events_named(&dir, "workspace_recreated");
    assert_eq!(ev.len(), 1, "the journal says so");
    assert!(
        fs::read_to_string(dir.join("runner.log"))
            .unwrap()
            .contains("was missing: recreated from orbit/test-goal")
    );
    assert_records_agree(&dir);
}

#[test]
fn a_loop_branch_moved_by_hand_stops_the_loop_instead_of_being_committed_over() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 4);
    let dir = repo.init_loop(&agent, &[&count_check(4)], &[]);
    for i in 1..=2 {
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 10, &format!("tick {i}"));
    }
    let before = repo.git(&["rev-parse", "orbit/test-goal"]);
    // Rewound by hand, to the commit before the loop.
    repo.ws_git(&["reset", "-q", "--hard", "HEAD~2"]);
    let moved = repo.git(&["rev-parse", "orbit/test-goal"]);
    assert_ne!(before, moved);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 2, "a branch moved by hand stops the run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("was moved by hand") && err.contains("orbit recover"),
        "{}",
        text(&out)
    );
    assert_eq!(
        repo.git(&["rev-parse", "orbit/test-goal"]),
        moved,
        "nothing committed over it"
    );
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
    assert_eq!(events_named(&dir, "branch_moved").len(), 1);
    // Commits the agent or the user add on top are not a move.
    let fresh = Repo::new();
    let agent = counting_agent(&fresh, 3);
    let dir = fresh.init_loop(&agent, &[&count_check(3)], &[]);
    let out = fresh.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    fs::write(fresh.ws().join("extra.txt"), "x\n").unwrap();
    fresh.ws_git(&["add", "extra.txt"]);
    fresh.ws_git(&["commit", "-q", "-m", "user on top"]);
    let out = fresh.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
}

#[test]
fn a_contract_one_state_asks_for_migrate_and_changes_nothing() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
    // A 1.0 checkpoint: no WORKSPACE key, sealed as the 1.0 runner sealed it.
    let text_v1: String = fs::read_to_string(dir.join("state.env"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("WORKSPACE="))
        .map(|l| {
            if l.starts_with("CONTRACT_VERSION=") {
                "CONTRACT_VERSION=1.0.0\n".to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let state = orbit::state::State::parse(text_v1.as_bytes()).expect("a 1.0 state parses");
    fs::write(dir.join("state.env"), &text_v1).unwrap();
    fs::write(
        dir.join("state.env.sha256"),
        orbit::state::Sidecar::for_state(&text_v1, state.generation).print(),
    )
    .unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 4, "a 1.0 state is not run by a 2.0 runner");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("run orbit recover --migrate"),
        "{}",
        text(&out)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("ORBIT_AGENT_DIR"));
    assert_eq!(fs::read_to_string(dir.join("state.env")).unwrap(), text_v1);
    assert!(!repo.ws().exists(), "no workspace made");
    assert!(!Path::new(&repo.join(".orbit/.workspaces")).exists());
}

#[test]
fn init_refuses_a_workspace_inside_the_loop_directory_or_around_it() {
    let repo = Repo::new();
    for (ws, why) in [
        (".orbit/x/work", "inside the loop directory"),
        (".orbit", "holds the loop directory"),
    ] {
        let out = repo.orbit(&[
            "init",
            "g",
            "--verify",
            "false",
            "--dir",
            ".orbit/x",
            "--workspace",
            ws,
        ]);
        assert_code(&out, 2, ws);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(why),
            "{}",
            text(&out)
        );
    }
    // Beside the repository is fine, and is where the runner puts it.
    let outside = tempfile::tempdir().unwrap();
    let ws = outside.path().join("ws");
    let agent = counting_agent(&repo, 1);
    let exec = agent.display().to_string();
    let out = repo.orbit(&[
        "init",
        "g",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        &count_check(1),
        "--dir",
        ".orbit/x",
        "--workspace",
        ws.to_str().unwrap(),
    ]);
    assert_ok(&out, "init");
    let out = repo.run_loop(&repo.join(".orbit/x"), &[], &[]);
    assert_code(&out, 0, "DONE in a workspace outside the repository");
    assert!(ws.join("work.txt").is_file());
}

#[test]
fn a_run_loop_shows_the_contracts_layout_in_its_directory_and_its_workspace() {
    let repo = Repo::new();
    let agent = repo.agent(
        "finisher",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
echo "iteration $ORBIT_ITERATION: wrote work.txt" >> "$ORBIT_AGENT_DIR/notes.md"
echo 0.01 > "$ORBIT_COST_FILE"
if [ "$ORBIT_ITERATION" -ge 2 ]; then echo "AC1: work.txt has two lines" > "$ORBIT_AGENT_DIR/done.md"; fi"#,
    );
    let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    // Section 3: the loop directory, the control plane.
    for f in [
        "goal.md",
        "loop.toml",
        "prompt.md",
        "verify.sh",
        "run-loop.sh",
        "recover.sh",
        "notify.sh",
        "state.env",
        "state.env.sha256",
        "pins.sha256",
        "progress.md",
        "notes.md",
        "events.jsonl",
        "cost.ledger",
        "runner.log",
        ".action-sig.log",
        ".run-loop.lock",
        ".pins/goal.md",
        "iterations/000001/prompt.md",
        "iterations/000001/agent.log",
        "iterations/000001/verify.log",
        "iterations/000001/result.env",
        "iterations/000002/done.md",
    ] {
        assert!(dir.join(f).exists(), "{f} in the loop directory");
    }
    assert!(
        !dir.join("done.md").exists(),
        "the claim lives in the record"
    );
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000002/done.md")).unwrap(),
        "AC1: work.txt has two lines\n"
    );
    // The agent's notes came back, both iterations' worth.
    let notes = fs::read_to_string(dir.join("notes.md")).unwrap();
    assert!(
        notes.contains("iteration 1: wrote work.txt\niteration 2: wrote work.txt\n"),
        "{notes}"
    );
    // Its cost reached the ledger.
    assert!(
        fs::read_to_string(dir.join("cost.ledger"))
            .unwrap()
            .starts_with("1\t10000\treported\n")
    );
    // The workspace, WORKSPACE in state.env, `workspace` in loop.toml.
    let ws = fs::canonicalize(repo.ws()).unwrap();
    assert_eq!(state_value(&dir, "WORKSPACE"), ws.display().to_string());
    assert_eq!(
        state_value(&dir, "CONTRACT_VERSION"),
        orbit::config::CONTRACT_VERSION
    );
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    // No path: the default, computed where the loop runs (under the data directory).
    assert!(toml.contains("workspace = \"\"\n"), "{toml}");
    for f in ["goal.md", "progress.md", "notes.md", "prompt.md"] {
        assert!(
            ws.join(".orbit-agent").join(f).is_file(),
            ".orbit-agent/{f}"
        );
    }
    // Neither holds the other.
    let loop_dir = fs::canonicalize(&dir).unwrap();
    assert!(!ws.starts_with(&loop_dir) && !loop_dir.starts_with(&ws));
}

#[test]
fn a_loop_branch_left_by_an_earlier_loop_of_the_same_name_is_not_taken_over() {
    let repo = Repo::new();
    // An earlier loop's branch, with its work on it.
    repo.git(&["branch", "orbit/test-goal"]);
    repo.write("old.txt", "old work\n");
    repo.git(&["add", "old.txt"]);
    repo.git(&["commit", "-q", "-m", "new base"]);
    repo.git(&["checkout", "-q", "orbit/test-goal"]);
    repo.write("stale.txt", "stale\n");
    repo.git(&["add", "stale.txt"]);
    repo.git(&["commit", "-q", "-m", "an earlier loop's work"]);
    repo.git(&["checkout", "-q", "main"]);
    let stale = repo.git(&["rev-parse", "orbit/test-goal"]);
    let agent = counting_agent(&repo, 1);
    let dir = repo.init_loop(&agent, &[&count_check(1)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "refused, nothing run");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("exists already"),
        "{}",
        text(&out)
    );
    assert_eq!(repo.git(&["rev-parse", "orbit/test-goal"]), stale);
    assert!(!repo.ws().exists());
    assert!(!dir.join("iterations/000001").exists());
    // Once it is out of the way, the loop starts from the user's HEAD.
    repo.git(&["branch", "-D", "orbit/test-goal"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    assert!(repo.ws().join("old.txt").is_file() && !repo.ws().join("stale.txt").exists());
}

#[test]
fn git_variables_in_the_callers_environment_never_redirect_the_loop() {
    let repo = Repo::new();
    let other = Repo::new();
    let before = other.git(&["rev-parse", "HEAD"]);
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &[]);
    let git_dir = other.join(".git").display().to_string();
    let work_tree = other.path().display().to_string();
    let index = other.join(".git/index").display().to_string();
    let out = repo.run_loop(
        &dir,
        &[],
        &[
            ("GIT_DIR", &git_dir),
            ("GIT_WORK_TREE", &work_tree),
            ("GIT_INDEX_FILE", &index),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_VALUE_0", "Someone Else"),
        ],
    );
    assert_code(&out, 0, "DONE in its own repository");
    assert_eq!(repo.ws_read("work.txt"), "step 1\nstep 2\n");
    assert_eq!(
        other.git(&["rev-parse", "HEAD"]),
        before,
        "the other repository untouched"
    );
    assert_eq!(other.git(&["status", "--porcelain"]), "");
    assert!(other.git(&["branch", "--list", "orbit/*"]).is_empty());
    let authors = repo.git(&["log", "--format=%an", "orbit/test-goal"]);
    assert!(!authors.contains("Someone Else"), "{authors}");
}

#[test]
fn a_file_system_monitor_the_agent_configures_is_never_run_by_the_runner() {
    let repo = Repo::new();
    let canary = repo.bin.path().join("CANARY");
    let hook = repo.bin.path().join("fsmonitor-hook");
    fs::write(
        &hook,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", canary.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    // The agent points the repository's config at its own command, then leaves: git would
    // run it at the runner's next snapshot, outside the agent's run.
    let agent = repo.agent(
        "configurer",
        &format!(
            "cat >/dev/null\n[ \"$ORBIT_PHASE\" = work ] || exit 0\ngit config core.fsmonitor '{}'\necho \"step $ORBIT_ITERATION\" >> work.txt",
            hook.display()
        ),
    );
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--max-iterations", "2"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    // A repository config changed by the agent is git_tamper: the loop stops before any git
    // call of the runner's could run the command, and nothing of the run is committed.
    assert_code(&out, 3, "tick");
    let state = fs::read_to_string(dir.join("state.env")).unwrap();
    assert!(state.contains("STOP_REASON=git_tamper"), "{state}");
    assert!(
        !repo
            .git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"])
            .contains("work.txt"),
        "the tampering run's change was committed"
    );
    // The attempt was made: the config names the command.
    assert_eq!(
        repo.git(&["config", "core.fsmonitor"]).trim(),
        hook.display().to_string()
    );
    assert!(
        !canary.exists(),
        "the runner ran the agent's fsmonitor command"
    );
    // Git itself would have run it.
    let mut cmd = crate::support::command("git");
    cmd.args(["status", "--porcelain"]).current_dir(repo.ws());
    let _ = crate::support::run_bounded(cmd, Duration::from_secs(30));
    assert!(canary.exists(), "the command is one git runs");
}

#[test]
fn an_agent_that_swaps_its_workspace_for_a_link_to_the_users_checkout_is_stopped() {
    let repo = Repo::new();
    let main_before = repo.git(&["rev-parse", "main"]);
    let root = fs::canonicalize(repo.path()).unwrap();
    // The agent replaces its workspace by a symlink to the user's checkout and writes a file
    // there: the runner's snapshot and commit would then work in the user's repository.
    let agent = repo.agent(
        "swapper",
        &format!(
            "cat >/dev/null\n[ \"$ORBIT_PHASE\" = work ] || exit 0\nws=$ORBIT_WORKSPACE\ncd /\nrm -rf \"$ws\"\nln -s '{}' \"$ws\"\necho planted > \"$ws/planted.txt\"",
            root.display()
        ),
    );
    let dir = repo.init_loop(&agent, &[&count_check(1)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 3, "ABORTED");
    // The attack was made: the workspace is a link, and the file is in the user's checkout.
    assert!(repo.ws().is_symlink());
    assert!(repo.join("planted.txt").is_file());
    assert_eq!(state_value(&dir, "STOP_REASON"), "git_tamper");
    assert_eq!(
        repo.git(&["rev-parse", "main"]),
        main_before,
        "main untouched"
    );
    assert_eq!(
        repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000001/commit.txt")).unwrap(),
        "withheld: integrity violation\n"
    );
    assert_eq!(events_named(&dir, "integrity_fail").len(), 1);
    // The footer says what to do; the audit never takes the link for the workspace.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("remove what is there"),
        "{}",
        text(&out)
    );
    let audit = repo.orbit(&["audit", "--json", dir.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let broken = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["class"] == "WORKSPACE_BROKEN")
        .unwrap_or_else(|| panic!("{v}"))
        .clone();
    assert_eq!(broken["severity"], "P0", "{broken}");
    assert!(
        broken["message"].as_str().unwrap().contains("is a symlink"),
        "{broken}"
    );
    // Its fix, pasted, brings the loop back: the workspace recreated from the branch.
    let mut fix = crate::support::command("bash");
    fix.arg("-c")
        .arg(broken["fix"].as_str().unwrap())
        .current_dir(repo.path())
        .env(
            "PATH",
            format!(
                "{}:{}",
                crate::support::orbit_bin().parent().unwrap().display(),
                repo.path_env()
            ),
        );
    let fixed = crate::support::run_bounded(fix, Duration::from_secs(60));
    assert_eq!(fixed.status.code(), Some(0), "{}", text(&fixed));
    assert!(repo.ws().join(".git").is_file() && !repo.ws().is_symlink());
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
}

#[test]
fn an_agent_folder_replaced_by_a_link_is_never_read_back_or_written_through() {
    let repo = Repo::new();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("done.md"), "forged claim\n").unwrap();
    fs::write(outside.path().join("notes.md"), "FORGED NOTES\n").unwrap();
    fs::write(outside.path().join("cost"), "0.01\n").unwrap();
    let agent = repo.agent(
        "linker",
        &format!(
            "cat >/dev/null\n[ \"$ORBIT_PHASE\" = work ] || exit 0\necho \"step $ORBIT_ITERATION\" >> work.txt\nrm -rf .orbit-agent\nln -s '{}' .orbit-agent",
            outside.path().display()
        ),
    );
    let dir = repo.init_loop(&agent, &[&count_check(5)], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    // The link was planted (the iteration's record names it), and removed as a link after
    // the run: the folder is made anew for the next run.
    let result = crate::support::read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(
        result.get("AGENT_FOLDER").map(String::as_str),
        Some(format!("a symlink to {}", outside.path().display()).as_str()),
        "{result:?}"
    );
    assert!(!repo.ws().join(".orbit-agent").is_symlink());
    // Nothing was taken from it or removed through it.
    for f in ["done.md", "notes.md", "cost"] {
        assert!(
            outside.path().join(f).is_file(),
            "{f} removed through the link"
        );
    }
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["DONE_CLAIM"], "0", "no claim read through the link");
    assert!(
        !fs::read_to_string(dir.join("notes.md"))
            .unwrap()
            .contains("FORGED")
    );
    assert_eq!(r["COST_KIND"], "unknown", "no cost read through the link");
    // The next run rebuilds a real folder.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick 2");
    assert!(outside.path().join("done.md").is_file());
}

/// The runner and orbit name the default workspace alike (templates/lib/workspace.sh,
/// src/locate/workspace.rs), for a checkout whose name holds a space and a non-ASCII
/// letter: what orbit predicts before the first run is where the runner makes it, and
/// what `orbit status` shows after.
#[test]
fn the_runner_makes_the_default_workspace_where_orbit_names_it() {
    let repo = Repo::with_prefix("orbit it \u{e9}t\u{e9}-");
    let agent = counting_agent(&repo, 5);
    let dir = repo.init_loop(&agent, &[&count_check(5)], &[]);
    let predicted = repo.ws();
    let id = predicted.parent().unwrap().file_name().unwrap();
    assert!(
        id.to_string_lossy().starts_with("orbit-it-"),
        "{}",
        predicted.display()
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    assert_eq!(
        state_value(&dir, "WORKSPACE"),
        predicted.display().to_string()
    );
    assert!(predicted.join(".git").is_file());
    let status = repo.orbit(&["status"]);
    assert!(
        text(&status).contains(&predicted.display().to_string()),
        "{}",
        text(&status)
    );
}
