//! Evidence that holds (contract section 6): what the checks ran on is what is committed.
//! Each test is a hostile agent (or hostile project code the checks run) that reached a
//! false DONE before: it proves its attack was really made, then that the runner held.

use crate::support::*;
use std::fs;
use std::path::Path;

fn state(dir: &Path, key: &str) -> String {
    read_kv(&dir.join("state.env"))
        .get(key)
        .cloned()
        .unwrap_or_else(|| panic!("{key} missing from state.env"))
}

/// The files the loop's branch holds.
fn branch_files(repo: &Repo) -> Vec<String> {
    repo.git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn verify_log(dir: &Path, n: u32) -> String {
    fs::read_to_string(dir.join(format!("iterations/{n:06}/verify.log"))).unwrap_or_default()
}

/// The part of a verify.log that one run (by its label) wrote.
fn run_section<'a>(log: &'a str, label: &str) -> &'a str {
    let head = format!("### verify run: {label}");
    let Some(at) = log.find(&head) else {
        return "";
    };
    let rest = &log[at + head.len()..];
    &rest[..rest.find("### verify run:").unwrap_or(rest.len())]
}

#[test]
fn a_check_run_that_rewrites_what_it_checks_is_not_taken_and_its_rewrite_never_committed() {
    let repo = Repo::new();
    repo.write("data.txt", "broken\n");
    // The project's test runner (protected as the check's script) runs the project's code.
    repo.write("run-tests.sh", "test -f app.sh && bash app.sh\n");
    repo.git(&["add", "data.txt", "run-tests.sh"]);
    repo.git(&["commit", "-q", "-m", "data"]);
    let marker = repo.bin.path().join("rewrites");
    // The agent's code, run by the check: it passes, and rewrites a file the project
    // tracks on its way out.
    let agent = repo.agent(
        "rewriter",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo fixed > data.txt
cat > app.sh <<'EOF'
grep -q fixed data.txt || exit 1
echo REWRITTEN > data.txt
echo run >> '{}'
EOF
echo "data.txt holds fixed" > "$ORBIT_AGENT_DIR/done.md""#,
            marker.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["bash run-tests.sh"], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    // The attack was made: the check's code ran and rewrote data.txt.
    assert!(
        fs::read_to_string(&marker)
            .unwrap_or_default()
            .lines()
            .count()
            >= 1,
        "the check's code never ran: {}",
        text(&out)
    );
    assert_code(
        &out,
        16,
        "never DONE: every check run changed what it checked",
    );
    let log = verify_log(&dir, 1);
    assert!(
        log.contains("[FAIL] project-changed-by-checks (a check changed the project it was checking: data.txt"),
        "the record names the rewrite: {log}"
    );
    assert_eq!(
        repo.ws_read("data.txt"),
        "fixed\n",
        "the workspace is put back as the checks found it"
    );
    let committed = repo.git(&["show", "orbit/test-goal:data.txt"]);
    assert_eq!(
        committed, "fixed\n",
        "the commit holds the checked tree, never the rewrite"
    );
    let feedback = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        feedback.contains("project-changed-by-checks"),
        "the agent is told: {feedback}"
    );
}

#[test]
fn a_file_the_solution_needs_that_git_ignores_is_never_done() {
    let repo = Repo::new();
    let agent = repo.agent(
        "ignorer",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo needed.txt > .gitignore
echo answer > needed.txt
echo "needed.txt is there" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &["test -f needed.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    let log = verify_log(&dir, 1);
    // The attack was made: the checks passed in the workspace, where the ignored file is.
    let in_workspace = run_section(&log, "after the agent");
    assert!(
        in_workspace.contains("[PASS] ") && in_workspace.contains("1 passed, 0 failed"),
        "the checks passed in the workspace: {log}"
    );
    assert!(
        !branch_files(&repo).contains(&"needed.txt".to_string()),
        "git ignores the file: the branch cannot hold it"
    );
    assert_code(
        &out,
        16,
        "not DONE: the branch would not hold what the checks needed",
    );
    let clean = run_section(&log, "in a clean checkout of the tree to commit");
    assert!(
        clean.contains("[FAIL] ") && clean.contains("0 passed, 1 failed"),
        "the last run, in a clean checkout, failed: {log}"
    );
    let result = read_kv(&dir.join("iterations/000001/result.env"));
    assert!(
        result
            .get("DONE_VERDICT")
            .is_some_and(|v| v.contains("clean checkout")),
        "the rejection says why: {result:?}"
    );
    assert_ne!(state(&dir, "LAST_STATUS"), "DONE");
}

#[test]
fn an_agent_commit_that_drops_a_protected_file_from_head_is_committed_back() {
    let repo = Repo::new();
    repo.write("tests/spec.txt", "the spec\n");
    repo.git(&["add", "tests/spec.txt"]);
    repo.git(&["commit", "-q", "-m", "spec"]);
    let agent = repo.agent(
        "dropper",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo done > work.txt
git rm -q --cached tests/spec.txt
git add work.txt
git commit -q -m "the agent's own commit"
echo "work.txt holds done" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(
        &agent,
        &["test -f tests/spec.txt && test -f work.txt"],
        &["--protect", "tests/spec.txt"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    // The attack was made: the agent's commit on the branch holds no spec.
    let agents = repo.git(&["log", "--format=%H %s", "orbit/test-goal"]);
    let own = agents
        .lines()
        .find(|l| l.ends_with("the agent's own commit"))
        .unwrap_or_else(|| panic!("the agent committed: {agents}"));
    let own = own.split(' ').next().unwrap();
    let at_own = repo.git(&["ls-tree", "-r", "--name-only", own]);
    assert!(!at_own.contains("tests/spec.txt"), "{at_own}");
    assert_code(&out, 0, "DONE");
    assert!(
        branch_files(&repo).contains(&"tests/spec.txt".to_string()),
        "the branch holds the tree the checks ran on, spec included"
    );
    assert_eq!(
        repo.git(&["show", "orbit/test-goal:tests/spec.txt"]),
        "the spec\n"
    );
    assert!(
        !repo.ws_sibling(".clean").exists(),
        "the clean checkout goes at DONE"
    );
}

#[test]
fn a_file_a_check_only_creates_is_its_artifact_never_committed_nor_the_confirmers_change() {
    let repo = Repo::new();
    // A careful confirmer runs the checks too: the report it makes is the checks'.
    let agent = repo.agent(
        "reporter",
        r#"cat >/dev/null
case $ORBIT_PHASE in
  confirm) echo "report $RANDOM" > test-report.xml; exit 0;;
  wrapup) exit 0;;
esac
echo done > work.txt
echo "report $RANDOM" > test-report.xml
echo "work.txt holds done" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(
        &agent,
        &["echo \"report $RANDOM\" > test-report.xml; test -f work.txt"],
        &[],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE: a check's report is nobody's change");
    let files = branch_files(&repo);
    assert!(
        files.contains(&"work.txt".to_string()) && !files.contains(&"test-report.xml".to_string()),
        "the report is never committed: {files:?}"
    );
    assert!(
        dir.join("iterations/000001/artifacts/test-report.xml")
            .is_file(),
        "the report is kept in the record"
    );
    assert!(
        !repo.ws().join("test-report.xml").exists(),
        "and is not left in the workspace"
    );
}

#[test]
fn a_commit_hook_that_changes_the_tree_has_its_change_checked_and_committed() {
    let repo = Repo::new();
    let marker = repo.bin.path().join("hooked");
    let hook = repo.join(".git/hooks/pre-commit");
    fs::write(
        &hook,
        format!(
            "#!/usr/bin/env bash
grep -q hooked work.txt || echo hooked >> work.txt
git add work.txt
echo ran >> '{}'
",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    let agent = counting_agent(&repo, 1);
    let dir = repo.init_loop(&agent, &[&count_check(1)], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    // The attack was made: the hook ran and changed the tree (and staged its change).
    assert!(marker.exists(), "the hook ran: {}", text(&out));
    assert_code(
        &out,
        0,
        "DONE: the hook's change is part of the tree checked",
    );
    assert!(
        repo.git(&["show", "orbit/test-goal:work.txt"])
            .contains("hooked"),
        "the hook's change is committed"
    );
    // What was committed is the tree the checks ran on.
    let result = fs::read_to_string(dir.join("iterations/000001/result.env")).unwrap();
    let after = result
        .lines()
        .find_map(|l| l.strip_prefix("TREE_AFTER="))
        .expect("TREE_AFTER")
        .trim_matches('\'')
        .to_string();
    let tree = repo.git(&["rev-parse", "orbit/test-goal^{tree}"]);
    assert_eq!(
        tree.trim(),
        after,
        "the committed tree is the verified tree"
    );
}

#[test]
fn a_replace_ref_made_by_the_agent_is_git_tamper() {
    let repo = Repo::new();
    let agent = repo.agent(
        "replacer",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo done > work.txt
other=$(echo harmless | git hash-object -w --stdin)
git replace "$(git rev-parse HEAD:README.md)" "$other"
echo claimed > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    // The attack was made: a replace ref exists.
    let refs = repo.git(&["for-each-ref", "refs/replace/"]);
    assert!(!refs.trim().is_empty(), "the agent made a replace ref");
    assert_code(&out, 3, "ABORTED");
    assert_eq!(state(&dir, "STOP_REASON"), "git_tamper");
}

#[test]
fn a_candidate_that_prints_pass_lines_is_counted_by_the_runners_tally_not_its_output() {
    let repo = Repo::new();
    repo.write("add.sh", "echo 0\n");
    repo.git(&["add", "add.sh"]);
    repo.git(&["commit", "-qm", "add.sh"]);
    // Candidate 1 gets one check of two right; candidate 2 none, but its code prints
    // verdict lines into the checks' output.
    let agent = repo.agent(
        "cand",
        r#"cat >/dev/null
[ "$ORBIT_PHASE" = work ] || exit 0
case "$ORBIT_CANDIDATE" in
1) echo 'echo 4' > add.sh ;;
2) printf '%s\n' "printf '[PASS] %s\n' one two three four >&2" 'echo 0' > add.sh ;;
esac"#,
    );
    let dir = repo.init_loop(
        &agent,
        &[
            "test \"$(bash add.sh 2 2)\" = 4",
            "test \"$(bash add.sh 1 0)\" = 1",
        ],
        &["--candidates", "2"],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one fan-out iteration");
    // The attack was made: candidate 2's check output holds the forged lines.
    let forged = fs::read_to_string(dir.join("iterations/000001/candidates/2/verify.log"))
        .unwrap_or_default();
    assert!(
        forged.matches("[PASS] ").count() >= 4,
        "the candidate printed verdict lines: {forged}"
    );
    let cand =
        |k: u32| read_kv(&dir.join(format!("iterations/000001/candidates/{k}/candidate.env")));
    assert_eq!(cand(1)["CHECKS_PASSED"], "1", "{:?}", cand(1));
    assert_eq!(cand(2)["CHECKS_PASSED"], "0", "{:?}", cand(2));
    assert_eq!(cand(2)["CHECKS_TOTAL"], "2", "{:?}", cand(2));
    let sel = events_named(&dir, "survivor_selected");
    let line = sel[0].value.to_string();
    assert!(line.contains("\"candidate\":1"), "{line}");
    assert_eq!(repo.ws_read("add.sh"), "echo 4\n");
}

#[test]
fn a_new_file_in_a_protected_set_hidden_by_the_users_global_excludes_is_git_tamper() {
    let repo = Repo::new();
    repo.write("tests/spec.sh", "true\n");
    repo.git(&["add", "tests/spec.sh"]);
    repo.git(&["commit", "-q", "-m", "spec"]);
    // The user's own HOME for this scenario (never the suite's shared one).
    let home = repo.bin.path().join("home");
    fs::create_dir_all(&home).unwrap();
    fs::copy(sealed_home().join(".gitconfig"), home.join(".gitconfig")).unwrap();
    let agent = repo.agent(
        "hider",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
mkdir -p "$HOME/.config/git"
echo 'tests/extra.sh' > "$HOME/.config/git/ignore"
echo 'exit 0' > tests/extra.sh
echo done > work.txt
echo claimed > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--protect", "tests/**"]);
    let home_s = home.display().to_string();
    let global = home.join(".gitconfig").display().to_string();
    let out = repo.run_loop(
        &dir,
        &[],
        &[("HOME", &home_s), ("GIT_CONFIG_GLOBAL", &global)],
    );
    // The attack was made: git ignores the new file in the protected set.
    let ignored = command("git")
        .env("HOME", &home)
        .env("GIT_CONFIG_GLOBAL", &global)
        .arg("-C")
        .arg(repo.ws())
        .args(["check-ignore", "-q", "tests/extra.sh"])
        .status()
        .unwrap();
    assert!(ignored.success(), "the global excludes file hides it");
    assert_code(&out, 3, "ABORTED");
    assert_eq!(state(&dir, "STOP_REASON"), "git_tamper");
    assert!(
        !branch_files(&repo).contains(&"tests/extra.sh".to_string()),
        "nothing of it is committed"
    );
}

#[test]
fn a_check_that_cannot_run_on_the_untouched_tree_stops_in_preflight_not_as_a_red_start() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    // A program the machine does not have: exit 127, "command not found".
    let dir = repo.init_loop(&agent, &["orbit-no-such-tool --run"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "preflight: the check cannot run");
    let said = text(&out);
    assert!(
        said.contains("cannot run on the untouched tree") && said.contains("command not found"),
        "{said}"
    );
    assert!(
        !dir.join("iterations/000001").exists(),
        "no agent ran, nothing was spent"
    );
    // A program the agent is to write (a path that does not exist yet) is a red start.
    let repo = Repo::new();
    let agent = repo.agent(
        "builder",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\nprintf '#!/bin/sh\\nexit 0\\n' > app; chmod +x app\necho built > \"$ORBIT_AGENT_DIR/done.md\"",
    );
    let dir = repo.init_loop(&agent, &["./app"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE: ./app missing at the start was the work");
}

#[test]
fn a_candidate_whose_code_writes_the_runners_tally_file_counts_nothing() {
    let repo = Repo::new();
    repo.write("add.sh", "echo 0\n");
    repo.git(&["add", "add.sh"]);
    repo.git(&["commit", "-qm", "add.sh"]);
    let marker = repo.bin.path().join("forged");
    // Without the sandbox the loop directory is the user's: candidate 2's code finds the
    // check names in verify.sh and appends a PASS for each to the tally file, by its path.
    let lp = fs::canonicalize(repo.path())
        .unwrap()
        .join(".orbit/test-goal");
    let forger = format!(
        "t='{lp}/.run-tmp/verify.tally'\n\
         grep -o '^  run_check [^ ]*' '{lp}/verify.sh' | sed 's/^  run_check /PASS /' >> \"$t\" && echo forged >> '{}'\n\
         echo 0\n",
        marker.display(),
        lp = lp.display()
    );
    let forger_file = repo.bin.path().join("forger.sh");
    fs::write(&forger_file, forger).unwrap();
    let agent = repo.agent(
        "cand",
        &format!(
            r#"cat >/dev/null
[ "$ORBIT_PHASE" = work ] || exit 0
case "$ORBIT_CANDIDATE" in
1) echo 'echo 4' > add.sh ;;
2) cp '{}' add.sh ;;
esac"#,
            forger_file.display()
        ),
    );
    let dir = repo.init_loop(
        &agent,
        &[
            "test \"$(bash add.sh 2 2)\" = 4",
            "test \"$(bash add.sh 1 0)\" = 1",
        ],
        &["--candidates", "2", "--sandbox", "none"],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one fan-out iteration");
    // The attack was made: the forged lines went into the tally file.
    assert!(
        marker.exists(),
        "the candidate's code wrote the tally: {}",
        text(&out)
    );
    let cand =
        |k: u32| read_kv(&dir.join(format!("iterations/000001/candidates/{k}/candidate.env")));
    assert_eq!(cand(2)["CHECKS_PASSED"], "0", "{:?}", cand(2));
    assert_eq!(cand(1)["CHECKS_PASSED"], "1", "{:?}", cand(1));
    let sel = events_named(&dir, "survivor_selected");
    assert!(
        sel[0].value.to_string().contains("\"candidate\":1"),
        "{sel:?}"
    );
}

#[test]
fn a_filter_the_confirmer_plants_never_runs_in_the_runner() {
    let repo = Repo::new();
    let marker = repo.bin.path().join("filtered");
    let planted = repo.bin.path().join("planted");
    // The confirmer defines a clean filter for every file in the repository's git config:
    // a runner that took the tree (git add) before its integrity check would run it.
    let agent = repo.agent(
        "confirmer",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in
confirm)
  git config filter.spy.clean "sh -c 'echo ran >> {m}; cat'"
  echo '* filter=spy' > .gitattributes
  test -n "$(git config filter.spy.clean)" && echo planted >> '{p}'
  exit 0;;
wrapup) exit 0;;
esac
echo done > work.txt
echo claimed > "$ORBIT_AGENT_DIR/done.md""#,
            m = marker.display(),
            p = planted.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--sandbox", "none"]);
    let out = repo.run_loop(&dir, &[], &[]);
    // The attack was made: the filter is in the repository's config.
    assert!(
        planted.exists(),
        "the confirmer planted its filter: {}",
        text(&out)
    );
    assert!(
        !marker.exists(),
        "the runner's git never ran the confirmer's filter: {}",
        text(&out)
    );
    assert_code(&out, 3, "ABORTED");
    assert_eq!(state(&dir, "STOP_REASON"), "git_tamper");
}

#[test]
fn a_candidate_that_rewrites_its_siblings_worktree_after_the_sibling_ended_is_tampering() {
    let repo = Repo::new();
    let loop_dir = repo.join(".orbit/test-goal");
    let end_index = loop_dir.join(".run-tmp/c1/end.index");
    let sabotaged = repo.bin.path().join("sabotaged");
    // Candidate 1 writes the answer and ends. Candidate 2 waits until the runner has taken
    // candidate 1's tree at its end (its snapshot's index appears), then rewrites candidate
    // 1's answer in its worktree, and ends itself.
    let agent = repo.agent(
        "rivals",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
if [ "$ORBIT_CANDIDATE" = 1 ]; then
  echo 42 > answer.txt
  echo done > "$ORBIT_AGENT_DIR/done.md"
  exit 0
fi
sibling="${{ORBIT_WORKSPACE%.c2}}.c1"
for _ in $(seq 1 600); do [ -f '{idx}' ] && break; sleep 0.1; done
[ -f '{idx}' ] || exit 1
echo 41 > "$sibling/answer.txt" && echo "$sibling" > '{mark}'
echo 41 > answer.txt"#,
            idx = end_index.display(),
            mark = sabotaged.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["grep -qx 42 answer.txt"], &["--candidates", "2"]);
    assert_eq!(dir, loop_dir);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    // The attack was made: candidate 1's worktree was rewritten after its end snapshot.
    assert!(
        fs::read_to_string(&sabotaged).is_ok_and(|t| t.trim_end().ends_with(".c1")),
        "the sabotage never happened: {}\n{}",
        text(&out),
        fs::read_to_string(dir.join("runner.log")).unwrap_or_default()
    );
    assert_code(
        &out,
        3,
        "ABORTED: a candidate's worktree changed after it ended",
    );
    assert_eq!(state(&dir, "STOP_REASON"), "loop_tamper");
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("candidate 1's worktree") && log.contains("changed after its runs ended"),
        "{log}"
    );
    assert!(
        !dir.join("iterations/000001/candidates/1/verify.log")
            .exists(),
        "the sabotaged candidate is never judged on the sabotaged tree"
    );
}

#[test]
fn a_judge_whose_run_rewrites_the_project_is_not_taken_and_one_that_writes_a_report_is() {
    let repo = Repo::new();
    repo.write("data.txt", "broken\n");
    repo.git(&["add", "data.txt"]);
    repo.git(&["commit", "-q", "-m", "data"]);
    let agent = repo.agent(
        "fixer",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo fixed > data.txt
echo "data.txt holds fixed" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let marker = repo.bin.path().join("judged");
    let judge = format!(
        "echo judged >> '{}'; echo REWRITTEN-BY-THE-JUDGE > data.txt; exit 0",
        marker.display()
    );
    let dir = repo.init_loop(
        &agent,
        &["grep -qx fixed data.txt"],
        &["--judge-cmd", &judge],
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    // The attack was made: the judge ran and rewrote a tracked file.
    assert!(marker.exists(), "the judge never ran: {}", text(&out));
    assert_ne!(
        out.status.code(),
        Some(0),
        "never DONE on a judge that rewrote the project"
    );
    let all = text(&out) + &fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        all.contains("the judge's run changed the project it was judging (data.txt)"),
        "{all}"
    );
    assert_eq!(
        repo.ws_read("data.txt"),
        "fixed\n",
        "put back as the judge found it"
    );
    // A judge that only writes its own report approves, and its report is not committed.
    let repo = Repo::new();
    let agent = repo.agent(
        "fixer",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo fixed > data.txt
echo "data.txt holds fixed" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(
        &agent,
        &["grep -qx fixed data.txt"],
        &["--judge-cmd", "echo approved > judge-report.txt; exit 0"],
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    assert_code(&out, 0, "DONE with a judge that writes a report");
    assert!(
        !branch_files(&repo).contains(&"judge-report.txt".to_string()),
        "the judge's report is its artifact, never committed"
    );
}

/// A one-candidate DONE with PASS_K = `pass_k`: its loop directory and where each of its
/// check runs ran (the check writes its working directory into a file outside the
/// repository), in order. The DONE's adequacy measure (adequacy = "report", the default)
/// runs the checks after the DONE in checkouts of its own (temporary directories named
/// orbit-adequacy-*): those are not the DONE's runs and are left out.
fn done_check_runs(repo: &Repo, pass_k: usize) -> (std::path::PathBuf, Vec<String>) {
    let counter = repo.bin.path().join("check-runs");
    let agent = repo.agent(
        "solver",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo 42 > solution.txt
echo "solution.txt holds 42" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let check = format!(
        "echo \"$PWD\" >> '{}'; grep -qx 42 solution.txt",
        counter.display()
    );
    let dir = repo.init_loop(&agent, &[&check], &[]);
    let out = repo.run_loop(&dir, &[], &[("PASS_K", &pass_k.to_string())]);
    assert_code(&out, 0, "DONE");
    let runs = fs::read_to_string(&counter)
        .unwrap_or_default()
        .lines()
        .filter(|p| !p.contains("/orbit-adequacy-"))
        .map(str::to_string)
        .collect();
    (dir, runs)
}

/// The red gate and PASS_K runs in all: the first PASS_K - 1 passes in the workspace, the
/// last in the clean checkout of the tree about to be committed (no run after them).
fn a_done_runs_the_checks_red_gate_plus_pass_k_times(pass_k: usize) {
    let repo = Repo::new();
    let (dir, runs) = done_check_runs(&repo, pass_k);
    let ws = repo.ws().canonicalize().unwrap().display().to_string();
    assert_eq!(runs.len(), 1 + pass_k, "red gate + PASS_K: {runs:?}");
    assert!(
        runs[..pass_k].iter().all(|p| *p == ws),
        "the red gate and the first PASS_K - 1 passes in the workspace: {runs:?}"
    );
    assert!(
        runs[pass_k].ends_with("/test-goal.clean"),
        "the last pass in the clean checkout: {runs:?}"
    );
    let log = verify_log(&dir, 1);
    let clean = run_section(
        &log,
        &format!("in a clean checkout of the tree to commit (pass {pass_k} of {pass_k})"),
    );
    assert!(clean.contains("1 passed, 0 failed"), "{log}");
    assert_eq!(state(&dir, "VERIFY_STREAK"), pass_k.to_string());
    assert_eq!(state(&dir, "LAST_STATUS"), "DONE");
    assert_eq!(repo.git(&["show", "orbit/test-goal:solution.txt"]), "42\n");
}

#[test]
fn a_done_with_pass_k_2_runs_the_checks_three_times_the_last_in_the_clean_checkout() {
    a_done_runs_the_checks_red_gate_plus_pass_k_times(2);
}

#[test]
fn a_done_with_pass_k_3_runs_the_checks_four_times_the_last_in_the_clean_checkout() {
    a_done_runs_the_checks_red_gate_plus_pass_k_times(3);
}

#[test]
fn when_the_tree_to_commit_is_not_the_one_the_passes_ran_on_the_clean_checkout_runs_once_more() {
    // A scratch file of the user's in the workspace before the loop: the checks run with it,
    // the commit leaves it out (not the agent's change). The clean checkout's tree is then
    // not the passes' tree, so it cannot stand for one of them: all PASS_K run in the
    // workspace and the clean checkout's run is one more, its record saying why.
    let repo = Repo::new();
    let counter = repo.bin.path().join("check-runs");
    let agent = repo.agent(
        "solver",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
test "$ORBIT_ITERATION" -ge 2 || exit 0
echo 42 > solution.txt
echo "solution.txt holds 42" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let check = format!(
        "echo \"$PWD\" >> '{}'; grep -qx 42 solution.txt",
        counter.display()
    );
    let dir = repo.init_loop(&agent, &[&check], &[]);
    // The first tick: the red gate, then an iteration whose checks fail (no claim).
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "run-loop --once");
    fs::write(repo.ws().join("scratch.txt"), "the user's\n").unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    let runs: Vec<String> = fs::read_to_string(&counter)
        .unwrap_or_default()
        .lines()
        .filter(|p| !p.contains("/orbit-adequacy-"))
        .map(str::to_string)
        .collect();
    assert!(
        !branch_files(&repo).contains(&"scratch.txt".to_string()),
        "the attack point: the commit leaves the scratch file out"
    );
    assert_eq!(
        runs.len(),
        5,
        "red gate + the first tick's failing run + PASS_K + one more: {runs:?}"
    );
    assert!(runs[4].ends_with("/test-goal.clean"), "{runs:?}");
    let log = verify_log(&dir, 2);
    assert!(
        log.contains("### verify run: in a clean checkout of the tree to commit (one more run: the tree to commit is not the one the checks ran on"),
        "{log}"
    );
}
