//! Holdout checks, check roles and the memory policy (contract section 10), run for real:
//! the holdout checks judge a claim the agent cannot see, the red gate holds per check
//! (reproductions fail on the base tree, regressions pass), and `memory = "feedback"` gives
//! the agent the goal and the last failure only.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{
    Repo, assert_code, assert_ok, assert_script_clean, bwrap_available, read_kv, state_value, text,
};

/// The visible check: add(2, 2) = 4.
const VISIBLE: &str = "test \"$(bash add.sh 2 2)\" = 4";
/// A marker in the holdout check's command: it must never reach the agent.
const CMD_MARKER: &str = "HOLDOUT-CMD-5e1c";
/// A marker in the holdout file: it must never reach the agent either.
const FILE_MARKER: &str = "HOLDOUT-FILE-9b27";

/// A repository whose add.sh adds nothing yet (the visible check fails on the base tree).
fn add_repo() -> Repo {
    let repo = Repo::new();
    repo.write("add.sh", "echo 0\n");
    repo.git(&["add", "add.sh"]);
    repo.git(&["commit", "-qm", "add.sh"]);
    repo
}

/// The holdout check: every case of the holdout file `cases.txt` (`A B SUM` lines; `#`
/// lines are comments) holds; its command carries [`CMD_MARKER`].
fn holdout_check() -> String {
    format!(
        "# {CMD_MARKER}\nwhile read -r a b sum; do [ \"$a\" = '#' ] && continue; test \"$(bash add.sh \"$a\" \"$b\")\" = \"$sum\" || exit 1; done < \"$ORBIT_HOLDOUT_DIR/cases.txt\""
    )
}

/// The holdout file, outside the repository.
fn cases_file(repo: &Repo) -> PathBuf {
    let p = repo.bin.path().join("cases.txt");
    fs::write(&p, format!("# {FILE_MARKER}\n3 5 8\n10 -4 6\n")).unwrap();
    p
}

/// An agent that writes `impl` into add.sh and claims DONE, after copying the folder it was
/// given (and a listing of it) into `seen/<iteration>-<phase>-<attempt>` beside it.
fn claiming_agent(repo: &Repo, name: &str, impl_line: &str) -> PathBuf {
    let seen = repo.bin.path().join("seen");
    repo.agent(
        name,
        &format!(
            r#"snap="{seen}/$ORBIT_ITERATION-$ORBIT_PHASE-$ORBIT_ATTEMPT"
mkdir -p "$snap"
cp -R "$ORBIT_AGENT_DIR/." "$snap/"
ls -A "$ORBIT_AGENT_DIR" > "$snap.listing"
[ "$ORBIT_PHASE" = work ] || exit 0
printf '%s\n' '{impl_line}' > add.sh
echo "add.sh adds" > "$ORBIT_AGENT_DIR/done.md"
"#,
            seen = seen.display()
        ),
    )
}

/// Every file under `root` (recursively; not .git), with its text.
fn all_files(root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
        .flatten()
    {
        if e.file_type().is_file() {
            let t = String::from_utf8_lossy(&fs::read(e.path()).unwrap()).into_owned();
            out.push((e.path().to_path_buf(), t));
        }
    }
    out
}

/// Panics when any file under `root` holds one of the holdout markers or the hidden cases.
fn assert_no_holdout_text(root: &Path, what: &str) {
    let files = all_files(root);
    assert!(
        !files.is_empty(),
        "{what}: no file under {}",
        root.display()
    );
    for (path, t) in files {
        for needle in [CMD_MARKER, FILE_MARKER, "3 5 8", "cases.txt", "holdout-1"] {
            assert!(
                !t.contains(needle),
                "{what}: {} holds '{needle}':\n{t}",
                path.display()
            );
        }
    }
}

fn holdout_loop(repo: &Repo, agent: &Path) -> PathBuf {
    let cases = cases_file(repo);
    let check = holdout_check();
    repo.init_loop(
        agent,
        &[VISIBLE],
        &[
            "--holdout",
            &check,
            "--holdout-file",
            &cases.display().to_string(),
        ],
    )
}

#[test]
fn an_overfitting_agent_passes_verify_but_a_holdout_rejects_its_claim_without_a_word_of_it() {
    let repo = add_repo();
    // It writes the answer the visible check wants: add(2, 2) is 4, whatever it is asked.
    let agent = claiming_agent(&repo, "overfit", "echo 4");
    let dir = holdout_loop(&repo, &agent);
    assert_script_clean(&dir.join("holdout.sh"));
    // The holdout is in holdout.sh and holdout/, pinned; nowhere the agent reads.
    let pins = fs::read_to_string(dir.join("pins.sha256")).unwrap();
    assert!(
        pins.contains("  holdout.sh\n") && pins.contains("  holdout/cases.txt\n"),
        "{pins}"
    );
    for f in ["verify.sh", "goal.md", "prompt.md"] {
        let t = fs::read_to_string(dir.join(f)).unwrap();
        assert!(
            !t.contains(CMD_MARKER) && !t.contains("cases.txt"),
            "{f}:\n{t}"
        );
    }
    let goal = fs::read_to_string(dir.join("goal.md")).unwrap();
    assert!(goal.contains("Hidden acceptance checks"), "{goal}");

    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "the claim is rejected, the loop goes on");
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["VERIFY"], "pass", "{r:?}");
    assert!(
        r["DONE_VERDICT"].starts_with("holdout"),
        "the record says holdout: {r:?}"
    );
    let held = fs::read_to_string(dir.join("iterations/000001/holdout.log")).unwrap();
    assert!(
        held.contains("[FAIL] holdout-1") && held.contains(CMD_MARKER),
        "the holdout's output is kept in the record:\n{held}"
    );
    let fb = fs::read_to_string(dir.join("iterations/000001/feedback.json")).unwrap();
    assert!(
        fb.contains("\"failing_roles\":[\"holdout\"]") && fb.contains("hidden acceptance check"),
        "{fb}"
    );
    assert!(dir.join("iterations/000001/done.md.rejected").is_file());

    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "rejected again");
    let prompt = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(
        prompt.contains("a hidden acceptance check failed"),
        "the next prompt says a hidden check failed:\n{prompt}"
    );
    assert_ne!(state_value(&dir, "LAST_STATUS"), "DONE");
    // Not a word of the holdout in any prompt, in the folders the agent was given, or in
    // the workspace (the agent's runs, the confirmation runs).
    for n in ["000001", "000002"] {
        let p = dir.join("iterations").join(n).join("prompt.md");
        let t = fs::read_to_string(&p).unwrap();
        for needle in [CMD_MARKER, FILE_MARKER, "3 5 8", "cases.txt", "holdout-1"] {
            assert!(!t.contains(needle), "{} holds '{needle}'", p.display());
        }
    }
    assert_no_holdout_text(&repo.bin.path().join("seen"), "the agent's folder");
    assert_no_holdout_text(&repo.ws(), "the workspace");
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(!progress.contains(CMD_MARKER) && !progress.contains("3 5 8"));
}

#[test]
fn an_honest_agent_passes_the_holdout_and_reaches_done() {
    let repo = add_repo();
    let agent = claiming_agent(&repo, "honest", "echo $(($1 + $2))");
    let dir = holdout_loop(&repo, &agent);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    let held = fs::read_to_string(dir.join("iterations/000001/holdout.log")).unwrap();
    assert!(held.contains("[PASS] holdout-1"), "{held}");
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["DONE_VERDICT"], "DONE", "{r:?}");
    assert_no_holdout_text(&repo.bin.path().join("seen"), "the agent's folder");
    assert_no_holdout_text(&repo.ws(), "the workspace");
}

#[test]
fn an_agent_that_edits_the_holdout_files_is_stopped_as_a_reward_hack() {
    let repo = add_repo();
    // Without the sandbox the loop directory is reachable from the workspace.
    let agent = repo.agent(
        "tamper",
        r#"[ "$ORBIT_PHASE" = work ] || exit 0
echo 'echo 4' > add.sh
echo '2 2 4' > "@ORBIT_DIR@/test-goal/holdout/cases.txt"
echo done > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = holdout_loop(&repo, &agent);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 3, "integrity violation");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "ABORTED");
    // holdout/ holds checks' data, as verify.sh holds checks: a change to how the work is
    // judged is a reward hack, not a tamper with the loop's records.
    assert_eq!(state_value(&dir, "STOP_REASON"), "reward_hack");
    assert!(
        text(&out).contains("holdout/cases.txt"),
        "the change is named:\n{}",
        text(&out)
    );
    // Its baseline copy puts it back.
    let out = repo.orbit(&["recover", "--restore-pinned", &dir.display().to_string()]);
    assert_ok(&out, "orbit recover --restore-pinned");
    let cases = fs::read_to_string(dir.join("holdout/cases.txt")).unwrap();
    assert!(cases.contains(FILE_MARKER), "restored:\n{cases}");
}

#[test]
fn a_holdout_sh_dropped_from_the_manifest_between_ticks_stops_the_loop_instead_of_skipping_it() {
    let repo = add_repo();
    let agent = claiming_agent(&repo, "overfit", "echo 4");
    let dir = holdout_loop(&repo, &agent);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "the overfit claim is rejected by the holdout");
    // Between ticks, something the agent left behind empties holdout.sh and drops its line
    // from the manifest: a runner that counted the file's checks would skip the holdout.
    let pins = fs::read_to_string(dir.join("pins.sha256")).unwrap();
    let cut: String = pins
        .lines()
        .filter(|l| !l.ends_with("  holdout.sh"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(cut, pins, "holdout.sh had a pin:\n{pins}");
    fs::write(dir.join("pins.sha256"), cut).unwrap();
    fs::write(
        dir.join("holdout.sh"),
        "#!/usr/bin/env bash\nchecks() { return 0; }\n",
    )
    .unwrap();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(
        &out,
        3,
        "integrity violation, not a DONE without the hidden checks",
    );
    assert_ne!(state_value(&dir, "LAST_STATUS"), "DONE");
    assert!(
        text(&out).contains("holdout.sh"),
        "the missing pin is named:\n{}",
        text(&out)
    );
}

/// A repository with keep.txt (a regression check holds) and no fixed.txt (a reproduction
/// check fails).
fn roles_repo() -> Repo {
    let repo = Repo::new();
    repo.write("keep.txt", "keep\n");
    repo.git(&["add", "keep.txt"]);
    repo.git(&["commit", "-qm", "keep"]);
    repo
}

/// The name verify.sh gives the check whose command is `cmd`.
fn check_name(dir: &Path, cmd: &str) -> String {
    let verify = fs::read_to_string(dir.join("verify.sh")).unwrap();
    let quoted = format!(" '{cmd}' ");
    let line = verify
        .lines()
        .find(|l| l.starts_with("  run_check ") && l.contains(&quoted))
        .unwrap_or_else(|| panic!("no check for {cmd}:\n{verify}"));
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .trim_matches('\'')
        .to_string()
}

#[test]
fn a_reproduction_check_that_passes_on_the_base_tree_is_refused_as_vacuous() {
    let repo = roles_repo();
    let agent = repo.agent("idle", "exit 0");
    let dir = repo.init_loop(
        &agent,
        &["test -f fixed.txt"],
        &["--reproduction", "test -f keep.txt"],
    );
    let name = check_name(&dir, "test -f keep.txt");
    assert!(
        fs::read_to_string(dir.join("verify.sh"))
            .unwrap()
            .contains(&format!(
                "run_check '{name}' 'test -f keep.txt' 'reproduction'"
            )),
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 17, "vacuous reproduction");
    assert_eq!(state_value(&dir, "STOP_REASON"), "vacuous_verify");
    assert!(
        text(&out).contains(&name),
        "names the check:\n{}",
        text(&out)
    );
    assert!(!dir.join("iterations/000001").exists(), "no agent ran");
}

#[test]
fn a_regression_check_that_fails_on_the_base_tree_is_a_preflight_error() {
    let repo = roles_repo();
    let agent = repo.agent("idle", "exit 0");
    let dir = repo.init_loop(
        &agent,
        &["test -f fixed.txt"],
        &["--regression", "test -f missing.txt"],
    );
    let name = check_name(&dir, "test -f missing.txt");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "regression red before the agent");
    assert_eq!(state_value(&dir, "STOP_REASON"), "preflight");
    assert!(
        text(&out).contains(&name),
        "names the check:\n{}",
        text(&out)
    );
    assert!(!dir.join("iterations/000001").exists(), "no agent ran");
}

#[test]
fn each_check_knows_its_role_in_goal_md_verify_sh_and_the_feedback() {
    let repo = roles_repo();
    // It breaks the regression (removes keep.txt) and fixes nothing.
    let agent = repo.agent(
        "breaker",
        r#"[ "$ORBIT_PHASE" = work ] || exit 0
rm -f keep.txt
echo "$ORBIT_ITERATION" >> work.txt"#,
    );
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt"],
        &[
            "--reproduction",
            "test -f fixed.txt",
            "--regression",
            "test -f keep.txt",
        ],
    );
    let repro = check_name(&dir, "test -f fixed.txt");
    let regr = check_name(&dir, "test -f keep.txt");
    let work = check_name(&dir, "test -f work.txt");
    let goal = fs::read_to_string(dir.join("goal.md")).unwrap();
    assert!(
        goal.contains("(reproduction)") && goal.contains("(regression)"),
        "{goal}"
    );
    assert!(
        !goal.contains("Hidden acceptance"),
        "no holdout here: {goal}"
    );
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(
        toml.contains("reproduction = [\"test -f fixed.txt\"]")
            && toml.contains("regression = [\"test -f keep.txt\"]"),
        "{toml}"
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick");
    let verify_log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(
        verify_log.contains(&format!("[FAIL] {regr}"))
            && verify_log.contains(&format!("[FAIL] {repro}"))
            && verify_log.contains(&format!("[PASS] {work}")),
        "{verify_log}"
    );
    let fb = fs::read_to_string(dir.join("iterations/000001/feedback.json")).unwrap();
    assert!(
        fb.contains("\"failing_roles\":[")
            && fb.contains("\"regression\"")
            && fb.contains("\"reproduction\""),
        "{fb}"
    );
    let txt = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        txt.contains(&format!("a regression check broke: {regr}"))
            && txt.contains(&format!("a reproduction check still fails: {repro}")),
        "{txt}"
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "second tick");
    let prompt = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(
        prompt.contains(&format!("a regression check broke: {regr}")),
        "{prompt}"
    );
}

/// A loop whose agent writes a note and fails the check, recording the folder it was given.
fn memory_loop(repo: &Repo, memory: &str) -> PathBuf {
    let seen = repo.bin.path().join("seen");
    let agent = repo.agent(
        "noter",
        &format!(
            r#"ls -A "$ORBIT_AGENT_DIR" > "{seen}.$ORBIT_ITERATION"
echo "NOTE-MARKER from iteration $ORBIT_ITERATION" >> "$ORBIT_AGENT_DIR/notes.md"
echo "$ORBIT_ITERATION" >> work.txt"#,
            seen = seen.display()
        ),
    );
    repo.init_loop(&agent, &["test -f never.txt"], &["--memory", memory])
}

#[test]
fn memory_feedback_gives_the_agent_no_notes_and_no_narrative_while_notes_does() {
    let repo = Repo::new();
    let dir = memory_loop(&repo, "feedback");
    assert!(
        fs::read_to_string(dir.join("loop.toml"))
            .unwrap()
            .contains("memory = \"feedback\"")
    );
    for _ in 0..2 {
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 10, "a tick");
    }
    let prompt = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    for needle in [
        "notes.md",
        "progress.md",
        "NOTE-MARKER",
        "Earlier distinct failures",
        "## Iteration",
    ] {
        assert!(
            !prompt.contains(needle),
            "prompt holds '{needle}':\n{prompt}"
        );
    }
    assert!(
        prompt.contains("# Feedback: what failed last") && prompt.contains("test-f-never-txt"),
        "the last failure is given:\n{prompt}"
    );
    let listing = fs::read_to_string(repo.bin.path().join("seen.2")).unwrap();
    let names: Vec<&str> = listing.lines().collect();
    assert!(
        !names.contains(&"notes.md") && !names.contains(&"progress.md"),
        "{listing}"
    );
    assert!(
        names.contains(&"goal.md") && names.contains(&"feedback.json"),
        "{listing}"
    );
    // The runner still keeps what the agent wrote.
    let notes = fs::read_to_string(dir.join("notes.md")).unwrap();
    assert!(notes.contains("NOTE-MARKER from iteration 2"), "{notes}");

    let repo = Repo::new();
    let dir = memory_loop(&repo, "notes");
    for _ in 0..2 {
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 10, "a tick");
    }
    let prompt = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(
        prompt.contains(".orbit-agent/notes.md") && prompt.contains(".orbit-agent/progress.md"),
        "{prompt}"
    );
    let listing = fs::read_to_string(repo.bin.path().join("seen.2")).unwrap();
    assert!(
        listing.lines().any(|l| l == "notes.md") && listing.lines().any(|l| l == "progress.md"),
        "{listing}"
    );
}

#[test]
fn init_refuses_holdout_files_without_a_holdout_check_and_files_git_tracks() {
    let repo = add_repo();
    let agent = repo.agent("idle", "exit 0");
    let exec = agent.display().to_string();
    let cases = cases_file(&repo);
    let base = [
        "init", "g", "--engine", "custom", "--exec", &exec, "--verify", VISIBLE,
    ];
    let mut args = base.to_vec();
    let cases_s = cases.display().to_string();
    args.extend(["--holdout-file", &cases_s]);
    let out = repo.orbit(&args);
    assert_code(&out, 2, "a file no check reads");
    assert!(text(&out).contains("--holdout"), "{}", text(&out));

    let mut args = base.to_vec();
    args.extend(["--holdout", "true", "--holdout-file", "add.sh"]);
    let out = repo.orbit(&args);
    assert_code(&out, 2, "a tracked file");
    assert!(text(&out).contains("git tracks it"), "{}", text(&out));
    assert!(!repo.join(".orbit/g").exists(), "nothing rendered");

    // A holdout loop without files: holdout.sh runs by hand from the loop directory, in
    // the workspace git names, with ORBIT_HOLDOUT_DIR beside it. (Without the sandbox: under
    // it, a check that reads the holdout without run_hidden is refused.)
    let mut args = base.to_vec();
    args.extend([
        "--holdout",
        "test -n \"$ORBIT_HOLDOUT_DIR\"",
        "--sandbox",
        "none",
    ]);
    let out = repo.orbit(&args);
    assert_ok(&out, "orbit init --holdout");
    let held = repo.join(".orbit/g/holdout.sh");
    let out = crate::support::run_bounded(
        {
            let mut c = crate::support::command("bash");
            c.arg(&held).current_dir(repo.path());
            c
        },
        std::time::Duration::from_secs(60),
    );
    assert_ok(&out, "holdout.sh by hand");
    assert!(text(&out).contains("[PASS] holdout-1"), "{}", text(&out));
}

/// A sandboxed loop of an honest agent, the visible check, the check `leak` (code that
/// tries to read the holdout) and a holdout check with its file, with `extra` flags.
fn sandboxed_holdout_loop(leak: &str, extra: &[&str]) -> (Repo, PathBuf) {
    let repo = add_repo();
    let agent = claiming_agent(&repo, "honest", "echo $(($1 + $2))");
    let cases = cases_file(&repo).display().to_string();
    let check = hidden_holdout_check();
    let mut args = vec![
        "--holdout",
        &check,
        "--holdout-file",
        &cases,
        "--sandbox",
        "bwrap",
    ];
    args.extend_from_slice(extra);
    let dir = repo.init_loop(&agent, &[VISIBLE, leak], &args);
    (repo, dir)
}

#[test]
fn under_the_sandbox_a_visible_check_cannot_read_the_holdout() {
    if !bwrap_available() {
        return;
    }
    // A visible check that tries to copy the holdout into the workspace (what code the
    // agent wrote could do while verify.sh runs it).
    let leak = "L=$(git rev-parse --path-format=absolute --git-common-dir)/../.orbit/test-goal; cat \"$L\"/holdout/* \"$L/holdout.sh\" \"$L/loop.toml\" \"$L\"/.pins/holdout/* > leak.txt 2>/dev/null; true";
    let (repo, dir) = sandboxed_holdout_loop(leak, &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    // What the check wrote is its artifact, kept in the record of its run.
    let artifacts = dir.join("iterations/000001/artifacts");
    assert!(artifacts.join("leak.txt").is_file(), "the check ran");
    assert_no_holdout_text(&artifacts, "what the check wrote");
    assert_no_holdout_text(&repo.ws(), "the workspace");
    assert_code(&out, 0, "DONE under the sandbox");
    let held = fs::read_to_string(dir.join("iterations/000001/holdout.log")).unwrap();
    assert!(held.contains("[PASS] holdout-1"), "{held}");
}

#[test]
fn a_holdout_without_the_sandbox_is_said_to_be_unsealed_at_init_and_by_the_audit() {
    let repo = add_repo();
    let agent = repo.agent("idle", "exit 0");
    let exec = agent.display().to_string();
    let check = holdout_check();
    let unsealed = repo.orbit(&[
        "init",
        "g",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        VISIBLE,
        "--holdout",
        &check,
        "--sandbox",
        "none",
    ]);
    assert_ok(&unsealed, "orbit init --holdout");
    assert!(
        text(&unsealed).contains("does not use run_hidden"),
        "{}",
        text(&unsealed)
    );
    assert!(
        text(&unsealed).contains("the holdout checks are not sealed without the OS sandbox"),
        "{}",
        text(&unsealed)
    );
    let audit = repo.orbit(&["audit", "--json", ".orbit/g"]);
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).expect("audit --json");
    let findings = v["loops"][0]["findings"].as_array().unwrap().clone();
    assert!(
        findings.iter().any(|f| f["class"] == "VALIDATOR_GAP"
            && f["severity"] == "P2"
            && f["message"].as_str().unwrap().contains("not sealed")),
        "{findings:?}"
    );
    if !bwrap_available() {
        return;
    }
    let sealed = repo.orbit(&[
        "init",
        "h",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        VISIBLE,
        "--holdout",
        &hidden_holdout_check(),
        "--sandbox",
        "bwrap",
    ]);
    assert_ok(&sealed, "orbit init --holdout --sandbox bwrap");
    assert!(!text(&sealed).contains("not sealed"), "{}", text(&sealed));
    let audit = repo.orbit(&["audit", "--json", ".orbit/h"]);
    assert!(
        !String::from_utf8_lossy(&audit.stdout).contains("not sealed"),
        "{}",
        text(&audit)
    );
}

#[test]
fn what_the_agents_code_writes_during_the_holdout_run_never_reaches_a_later_run() {
    let repo = add_repo();
    let marker = repo.bin.path().join("leaked");
    // The agent's add.sh adds, and, run by the holdout with ORBIT_HOLDOUT_DIR set (without
    // the sandbox nothing hides it), copies the answers into the workspace for the next run.
    // (The variable's name is put together, as the DONE gate stops a change that names it.)
    let body = format!(
        "v=ORBIT_HOLD; v=${{v}}OUT_DIR; [ -n \"${{!v:-}}\" ] && cat \"${{!v}}\"/* > answers.txt && echo leaked >> {}; echo $(($1 + $2))",
        marker.display()
    );
    let agent = claiming_agent(&repo, "leaker", &body);
    let cases = cases_file(&repo);
    let check = holdout_check();
    let dir = repo.init_loop(
        &agent,
        &[VISIBLE],
        &[
            "--holdout",
            &check,
            "--holdout-file",
            &cases.display().to_string(),
            "--sandbox",
            "none",
        ],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    // The attack was made: the agent's code wrote the answers during the holdout run.
    assert!(
        marker.exists(),
        "the code ran under the holdout: {}",
        text(&out)
    );
    assert_code(&out, 0, "DONE: add.sh adds");
    assert!(
        !repo.ws().join("answers.txt").exists(),
        "what the holdout run wrote is gone before any later run"
    );
    let files = repo.git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"]);
    assert!(!files.contains("answers.txt"), "{files}");
    let artifacts = dir.join("iterations/000001/artifacts");
    assert!(
        !artifacts.join("answers.txt").exists(),
        "nor is it kept where the checks can read it"
    );
}

#[test]
fn under_the_sandbox_a_candidates_check_cannot_read_a_siblings_holdout_log() {
    if !bwrap_available() {
        return;
    }
    // A visible check that copies every candidate's holdout log it can read (what the code
    // of a later candidate could do while its checks run).
    let leak = "L=$(git rev-parse --path-format=absolute --git-common-dir)/../.orbit/test-goal; cat \"$L\"/iterations/*/candidates/*/holdout.log > leak.txt 2>/dev/null; echo \"$PWD\" >> leak.txt; true";
    let (repo, dir) = sandboxed_holdout_loop(leak, &["--candidates", "2"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(
        dir.join("iterations/000001/candidates/1/holdout.log")
            .is_file(),
        "candidate 1's holdout ran before candidate 2's checks: {}",
        text(&out)
    );
    let artifacts = dir.join("iterations/000001/candidates/2/artifacts");
    assert!(
        artifacts.join("leak.txt").is_file(),
        "candidate 2's check ran"
    );
    assert_no_holdout_text(&artifacts, "what candidate 2's check could read");
}

#[test]
fn a_loop_of_reproduction_and_regression_checks_alone_has_no_validator_gap() {
    let repo = add_repo();
    let agent = repo.agent("idle", "exit 0");
    let exec = agent.display().to_string();
    let out = repo.orbit(&[
        "init",
        "g",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--reproduction",
        VISIBLE,
        "--regression",
        "test -f add.sh",
    ]);
    assert_ok(&out, "orbit init with role checks only");
    let audit = repo.orbit(&["audit", "--json", ".orbit/g"]);
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).expect("audit --json");
    let findings = v["loops"][0]["findings"].as_array().unwrap().clone();
    assert!(
        !findings.iter().any(|f| f["class"] == "VALIDATOR_GAP"),
        "both checks are in verify.sh: {findings:?}"
    );
}

/// An agent whose add.sh looks the holdout's answers up wherever the code it runs under
/// could find them: the variable that names the holdout (its name put together, so that no
/// line of the change names it), any folder beside the workspace that looks like a holdout,
/// any process's environment that names one, and its own stdin (rewound: a check that reads
/// its cases in a `while read` loop hands it the whole file). It answers what it found, else
/// 2 + 2, and says on stderr each place it tried and what it found (holdout.log keeps it).
fn answer_finding_agent(repo: &Repo) -> PathBuf {
    repo.agent(
        "finder",
        r#"[ "$ORBIT_PHASE" = work ] || exit 0
cat > add.sh <<'ADD'
A=$1 B=$2
look() {
  printf '%s\n' "$1" | while read -r a b s; do
    if [ "$a" = "$A" ] && [ "$b" = "$B" ]; then echo "$s"; break; fi
  done
}
answer() {
  local s
  s=$(look "$2")
  if [ -n "$s" ]; then echo "add.sh found the answers in $1" >&2; echo "$s"; exit 0; fi
}
v=ORBIT_HOLD
v=${v}OUT_DIR
echo "add.sh tried \$$v: '${!v:-}'" >&2
for f in "${!v:-/nonexistent}"/* ../../*/h?ldout/*; do
  echo "add.sh tried $f" >&2
  [ -f "$f" ] && answer "$f" "$(cat "$f" 2>/dev/null)"
done
for e in /proc/[0-9]*/environ; do
  d=$(tr '\0' '\n' < "$e" 2>/dev/null | sed -n "s/^$v=//p")
  if [ -n "$d" ]; then
    echo "add.sh tried $e: $d" >&2
    for f in "$d"/*; do [ -f "$f" ] && answer "$e" "$(cat "$f" 2>/dev/null)"; done
  fi
done
echo "add.sh tried its stdin" >&2
answer stdin "$(perl -e 'seek(STDIN, 0, 0) or exit 0; print <STDIN>' 2>/dev/null)"
echo "add.sh found no answers" >&2
echo 4
ADD
echo "add.sh adds" > "$ORBIT_AGENT_DIR/done.md"
"#,
    )
}

/// The holdout check through run_hidden: the cases are read by the check, the code gets
/// its two arguments.
fn hidden_holdout_check() -> String {
    format!(
        "# {CMD_MARKER}\nwhile read -r a b sum; do [ \"$a\" = '#' ] && continue; test \"$(run_hidden bash add.sh \"$a\" \"$b\")\" = \"$sum\" || exit 1; done < \"$ORBIT_HOLDOUT_DIR/cases.txt\""
    )
}

/// A holdout check that runs the project's code directly, its answers in its own command
/// (it reads no holdout file; the loop has one all the same: `cases.txt`).
const DIRECT_HOLDOUT: &str = "test \"$(bash add.sh 3 5)\" = 8 && test \"$(bash add.sh 10 -4)\" = 6";

fn holdout_loop_with(repo: &Repo, agent: &Path, check: &str, sandbox: &str) -> PathBuf {
    holdout_loop_flags(repo, agent, &[check], sandbox, &[])
}

/// A loop of the visible check, the holdout checks `checks`, the holdout file `cases.txt`,
/// the sandbox `sandbox`, one iteration, and the flags `extra`.
fn holdout_loop_flags(
    repo: &Repo,
    agent: &Path,
    checks: &[&str],
    sandbox: &str,
    extra: &[&str],
) -> PathBuf {
    let cases = cases_file(repo).display().to_string();
    let mut args: Vec<&str> = Vec::new();
    for c in checks {
        args.extend_from_slice(&["--holdout", c]);
    }
    args.extend_from_slice(&[
        "--holdout-file",
        &cases,
        "--sandbox",
        sandbox,
        "--max-iterations",
        "1",
    ]);
    args.extend_from_slice(extra);
    repo.init_loop(agent, &[VISIBLE], &args)
}

/// The holdout log of iteration 1.
fn holdout_log(dir: &Path) -> String {
    fs::read_to_string(dir.join("iterations/000001/holdout.log")).unwrap_or_default()
}

#[test]
fn under_the_sandbox_a_holdout_check_that_runs_the_code_directly_hides_the_answers_from_it() {
    if !bwrap_available() {
        return;
    }
    // The check runs add.sh as is (no run_hidden); the loop directory holds the cases. The
    // agent's add.sh looks them up everywhere it could, and answers only what it finds.
    let repo = add_repo();
    let agent = answer_finding_agent(&repo);
    let dir = holdout_loop_flags(&repo, &agent, &[DIRECT_HOLDOUT], "bwrap", &[]);
    assert!(
        fs::read_to_string(dir.join("holdout/cases.txt"))
            .unwrap()
            .contains("3 5 8"),
        "the answers are in the loop directory"
    );
    let out = repo.run_loop(&dir, &[], &[]);
    let held = holdout_log(&dir);
    // The attack was made, every way: the variable, the folder beside the workspace, the
    // processes' environments, its stdin; it found nothing.
    for tried in [
        "add.sh tried $ORBIT_HOLDOUT_DIR: ''",
        "add.sh tried ../../*/h?ldout/*",
        "add.sh tried its stdin",
        "add.sh found no answers",
    ] {
        assert!(held.contains(tried), "'{tried}' not in:\n{held}");
    }
    assert!(!held.contains("found the answers"), "{held}");
    assert!(held.contains("[FAIL] holdout-1"), "{held}");
    assert_ne!(state_value(&dir, "LAST_STATUS"), "DONE", "{}", text(&out));
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert!(r["DONE_VERDICT"].starts_with("holdout"), "{r:?}");
}

#[test]
fn under_the_sandbox_init_refuses_a_holdout_check_that_reads_the_holdout_but_runs_the_code_unmasked()
 {
    if !bwrap_available() {
        return;
    }
    // A check that reads the cases and runs add.sh as is: under the sandbox it is refused,
    // with what to do; nothing is written.
    let repo = add_repo();
    let agent = answer_finding_agent(&repo);
    let exec = agent.display().to_string();
    let cases = cases_file(&repo).display().to_string();
    let check = holdout_check();
    let init = |extra: &[&str]| {
        let mut args = vec![
            "init",
            "test goal",
            "--engine",
            "custom",
            "--exec",
            &exec,
            "--verify",
            VISIBLE,
            "--holdout",
            &check,
            "--holdout-file",
            &cases,
            "--sandbox",
            "bwrap",
            "--max-iterations",
            "1",
        ];
        args.extend_from_slice(extra);
        repo.orbit(&args)
    };
    let refused = init(&[]);
    assert_code(&refused, 2, "orbit init refuses the unmasked holdout check");
    let said = text(&refused);
    assert!(
        said.contains("holdout-1")
            && said.contains("run_hidden")
            && said.contains("--holdout-unmasked"),
        "{said}"
    );
    assert!(!repo.join(".orbit/test-goal").exists(), "nothing written");

    // Told so, init takes it, says it, and records it; the code then reads the answers,
    // as it was told it could (the same attack reaches DONE: the opt-out is real).
    let taken = init(&["--holdout-unmasked"]);
    assert_ok(&taken, "orbit init --holdout-unmasked");
    assert!(
        text(&taken).contains("holdout-unmasked") && text(&taken).contains("can read"),
        "{}",
        text(&taken)
    );
    let dir = repo.join(".orbit/test-goal");
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("holdout-unmasked = true"), "{toml}");
    let out = repo.run_loop(&dir, &[], &[]);
    assert!(
        holdout_log(&dir).contains("add.sh found the answers in"),
        "{}",
        holdout_log(&dir)
    );
    assert_code(&out, 0, "DONE on looked-up answers, as the opt-out said");
}

#[test]
fn under_the_sandbox_the_code_a_holdout_runs_through_run_hidden_cannot_look_the_answers_up() {
    if !bwrap_available() {
        return;
    }
    // The check reads the cases in a `while read` loop and runs the code through
    // run_hidden: the code finds nothing, not even through its stdin (the cases file, which
    // the loop reads from), and the holdout rejects the claim.
    let repo = add_repo();
    let agent = answer_finding_agent(&repo);
    let dir = holdout_loop_with(&repo, &agent, &hidden_holdout_check(), "bwrap");
    assert_script_clean(&dir.join("holdout.sh"));
    let out = repo.run_loop(&dir, &[], &[]);
    let held = holdout_log(&dir);
    assert!(
        held.contains("add.sh tried its stdin") && held.contains("add.sh found no answers"),
        "{held}"
    );
    assert!(!held.contains("found the answers"), "{held}");
    assert!(held.contains("[FAIL] holdout-1"), "{held}");
    assert_ne!(state_value(&dir, "LAST_STATUS"), "DONE", "{}", text(&out));
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert!(r["DONE_VERDICT"].starts_with("holdout"), "{r:?}");
}

#[test]
fn an_honest_agent_passes_a_holdout_that_runs_its_code_through_run_hidden_with_or_without_the_sandbox()
 {
    let mut sandboxes = vec!["none"];
    if bwrap_available() {
        sandboxes.push("bwrap");
    }
    for sandbox in sandboxes {
        let repo = add_repo();
        let agent = claiming_agent(&repo, "honest", "echo $(($1 + $2))");
        // Both kinds: one that reads the cases and hands the code its arguments through
        // run_hidden, one that runs the code directly (masked as a whole).
        let hidden = hidden_holdout_check();
        let dir = holdout_loop_flags(&repo, &agent, &[&hidden, DIRECT_HOLDOUT], sandbox, &[]);
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 0, &format!("DONE with sandbox = {sandbox}"));
        let held = holdout_log(&dir);
        assert!(
            held.contains("[PASS] holdout-1") && held.contains("[PASS] holdout-2"),
            "{sandbox}: {held}"
        );
    }
}

#[test]
fn a_change_that_names_the_holdout_is_stopped_as_a_reward_hack() {
    // Each change adds, and names the holdout in one line: its variable, a hidden file's
    // name, the holdout folder's path. Nothing of the holdout runs: the DONE gate stops the
    // loop as a reward hack and records the lines.
    for (what, line) in [
        ("the variable", "echo $(($1 + $2)) # not ORBIT_HOLDOUT_DIR"),
        ("a hidden file", "echo $(($1 + $2)) # cases.txt is not read"),
        (
            "the folder",
            "echo $(($1 + $2)) # ../../test-goal/holdout/ is not read",
        ),
    ] {
        let repo = add_repo();
        let agent = claiming_agent(&repo, "namer", line);
        let dir = holdout_loop_with(&repo, &agent, &hidden_holdout_check(), "none");
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 3, &format!("{what}: ABORTED"));
        assert_eq!(state_value(&dir, "LAST_STATUS"), "ABORTED", "{what}");
        assert_eq!(state_value(&dir, "STOP_REASON"), "reward_hack", "{what}");
        let refs = fs::read_to_string(dir.join("iterations/000001/holdout-refs.txt"))
            .unwrap_or_else(|e| panic!("{what}: no holdout-refs.txt ({e}): {}", text(&out)));
        assert!(
            refs.contains("add.sh") && refs.contains(line),
            "{what}: {refs}"
        );
        assert!(
            !dir.join("iterations/000001/holdout.log").exists(),
            "{what}: the holdout did not run"
        );
        let r = read_kv(&dir.join("iterations/000001/result.env"));
        assert!(
            r["SUMMARY"].contains("names the holdout") && r["SUMMARY"].contains("holdout-refs.txt"),
            "{what}: {r:?}"
        );
        let fails = crate::support::events_named(&dir, "integrity_fail");
        assert!(
            fails.iter().any(|e| e.value["code"] == "reward_hack"
                && e.value["file"].as_str().unwrap_or("").ends_with("add.sh")),
            "{what}: {fails:?}"
        );
        // The audit says what stopped it and where the lines are, not "the pins hold".
        let audit = repo.orbit(&["audit", "--json", &dir.display().to_string()]);
        assert_code(&audit, 3, &format!("{what}: audit"));
        let v: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
        let f = &v["loops"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["class"] == "REWARD_HACK")
            .cloned()
            .unwrap_or_else(|| panic!("{what}: {v}"));
        let message = f["message"].as_str().unwrap();
        assert_eq!(f["severity"], "P0", "{what}: {f}");
        assert!(
            message.contains("names the holdout")
                && message.contains("add.sh")
                && message.contains("iterations/000001/holdout-refs.txt")
                && !message.contains("pins hold"),
            "{what}: {message}"
        );
    }
}
