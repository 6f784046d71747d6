//! Fan-out candidates (contract section 10), run for real: N agents in parallel from the
//! same base, each in its own worktree, judged by the harness; the survivor's change is the
//! iteration's, the others are kept as refs; a tampering candidate is disqualified, one that
//! touches the loop directory stops the loop; a crash mid-fan-out resumes; the budget gate
//! counts the whole fan-out.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{
    Repo, assert_code, assert_ok, assert_records_agree, assert_script_clean, command, events_named,
    read_kv, text,
};

/// The visible check: add(2, 2) = 4.
const VISIBLE: &str = "test \"$(bash add.sh 2 2)\" = 4";

/// A repository whose add.sh adds nothing yet, with a protected test beside it.
fn add_repo() -> Repo {
    let repo = Repo::new();
    repo.write("add.sh", "echo 0\n");
    repo.write("tests/add_test.sh", "test \"$(bash add.sh 1 1)\" = 2\n");
    repo.git(&["add", "add.sh", "tests"]);
    repo.git(&["commit", "-qm", "add.sh"]);
    repo
}

/// The hidden check: add.sh adds in general.
const HIDDEN: &str = "test \"$(bash add.sh 3 5)\" = 8 && test \"$(bash add.sh 10 -4)\" = 6";

/// An agent that acts by its candidate number: `case` is a bash `case` body on
/// $ORBIT_CANDIDATE. Every run leaves its environment in `seen/<iteration>-<candidate>`.
fn candidate_agent(repo: &Repo, cases: &str) -> PathBuf {
    let seen = repo.bin.path().join("seen");
    repo.agent(
        "cand",
        &format!(
            r#"mkdir -p "{seen}"
[ "$ORBIT_PHASE" = work ] || exit 0
{{ echo "ws=$PWD"; echo "candidate=$ORBIT_CANDIDATE"; echo "tmp=${{TMPDIR:-}}"; }} > "{seen}/$ORBIT_ITERATION-$ORBIT_CANDIDATE"
cp "$ORBIT_PROMPT_FILE" "{seen}/$ORBIT_ITERATION-$ORBIT_CANDIDATE.prompt"
case "$ORBIT_CANDIDATE" in
{cases}
esac
exit 0
"#,
            seen = seen.display()
        ),
    )
}

const HONEST: &str =
    "printf '%s\\n' 'echo $(($1 + $2))' > add.sh; echo done > \"$ORBIT_AGENT_DIR/done.md\"";
const OVERFIT: &str = "echo 'echo 4' > add.sh; echo done > \"$ORBIT_AGENT_DIR/done.md\"";

fn fanout_loop(repo: &Repo, agent: &Path, n: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["--candidates", n, "--protect", "tests/**"];
    args.extend_from_slice(extra);
    repo.init_loop(agent, &[VISIBLE], &args)
}

fn cand_env(dir: &Path, it: u64, k: u64) -> std::collections::BTreeMap<String, String> {
    read_kv(&dir.join(format!("iterations/{it:06}/candidates/{k}/candidate.env")))
}

#[test]
fn the_honest_candidate_survives_an_idle_and_an_overfitting_one_and_the_holdout_rejects_the_overfit()
 {
    let repo = add_repo();
    let agent = candidate_agent(&repo, &format!("1) : ;;\n2) {OVERFIT} ;;\n3) {HONEST} ;;"));
    let dir = fanout_loop(&repo, &agent, "3", &["--holdout", HIDDEN]);
    assert_script_clean(&dir.join("run-loop.sh"));
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("candidates = 3"), "{toml}");
    assert!(toml.contains("memory = \"feedback\""), "{toml}");

    let out = repo.run_loop(&dir, &[], &[]);
    assert_ok(&out, "the fan-out loop");
    assert_eq!(
        repo.ws_read("add.sh"),
        "echo $(($1 + $2))\n",
        "the survivor's change"
    );
    assert_records_agree(&dir);

    let idle = cand_env(&dir, 1, 1);
    let overfit = cand_env(&dir, 1, 2);
    let honest = cand_env(&dir, 1, 3);
    assert_eq!(idle["CHECKS_PASSED"], "0", "{idle:?}");
    assert_eq!(idle["CHANGED"], "0", "{idle:?}");
    assert_eq!(overfit["CHECKS_PASSED"], "1", "{overfit:?}");
    assert_eq!(
        overfit["HOLDOUT"], "fail",
        "the holdout rejects the overfit"
    );
    assert_eq!(honest["HOLDOUT"], "pass", "{honest:?}");
    for c in [&idle, &overfit, &honest] {
        assert_eq!(c["DISQUALIFIED"], "", "{c:?}");
    }
    let sel = events_named(&dir, "survivor_selected");
    assert_eq!(sel.len(), 1, "one selection");
    let line = sel[0].value.to_string();
    assert!(line.contains("\"candidate\":3"), "{line}");
    assert!(line.contains("holdout"), "the reason: {line}");
    assert_eq!(events_named(&dir, "candidate_end").len(), 3);
    assert_eq!(events_named(&dir, "candidate_start").len(), 3);

    // Each candidate ran in its own worktree with its own number, and the prompt says so.
    let seen = repo.bin.path().join("seen");
    let mut wss = Vec::new();
    for k in 1..=3 {
        let s = fs::read_to_string(seen.join(format!("1-{k}"))).unwrap();
        assert!(s.contains(&format!("candidate={k}")), "{s}");
        assert!(s.contains(&format!("test-goal.c{k}")), "{s}");
        wss.push(s.lines().next().unwrap().to_string());
        let p = fs::read_to_string(seen.join(format!("1-{k}.prompt"))).unwrap();
        assert!(p.contains(&format!("You are candidate {k} of 3")), "{p}");
        assert!(!p.contains("progress.md"), "memory = feedback: {p}");
    }
    wss.dedup();
    assert_eq!(wss.len(), 3, "three worktrees");

    // Every run is in the ledger with its candidate.
    let ledger = fs::read_to_string(dir.join("cost.ledger")).unwrap_or_default();
    for k in 1..=3 {
        assert!(
            ledger
                .lines()
                .any(|l| l.starts_with("1\t") && l.ends_with(&format!("\t{k}"))),
            "{ledger}"
        );
    }
    // The progress entry has the candidate table and the reason.
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(
        progress.contains("- candidate 2: ok, checks 1/1"),
        "{progress}"
    );
    assert!(progress.contains("- survivor: candidate 3 ("), "{progress}");
    // DONE prunes the candidates' worktrees; their refs stay for review.
    assert!(!repo.ws_sibling(".c1").exists());
    assert_eq!(
        repo.git(&["for-each-ref", "--format=%(refname)", "refs/orbit/"]),
        "refs/orbit/test-goal/1/1\nrefs/orbit/test-goal/1/2\nrefs/orbit/test-goal/1/3\n"
    );
    assert_eq!(events_named(&dir, "candidates_pruned").len(), 1);
    // The report says how to look at each alternative against the survivor, and the
    // audit takes the kept refs for what they are.
    let md = String::from_utf8_lossy(&repo.orbit(&["report", dir.to_str().unwrap()]).stdout)
        .into_owned();
    assert!(
        md.contains("`git diff refs/orbit/test-goal/1/3 refs/orbit/test-goal/1/2`"),
        "{md}"
    );
    assert!(md.contains("`git show refs/orbit/test-goal/1/3`"), "{md}");
    let diff = repo.git(&[
        "diff",
        "refs/orbit/test-goal/1/3",
        "refs/orbit/test-goal/1/2",
        "--",
        "add.sh",
    ]);
    assert!(diff.contains("-echo $(($1 + $2))"), "{diff}");
    let audit = repo.orbit(&["audit", "--json", dir.to_str().unwrap()]);
    assert!(
        !String::from_utf8_lossy(&audit.stdout).contains("candidate ref"),
        "{}",
        text(&audit)
    );
    // Until the user prunes them.
    let out = repo.orbit(&["recover", "--prune-candidates", dir.to_str().unwrap()]);
    assert_code(&out, 0, "the prune");
    assert_eq!(repo.git(&["for-each-ref", "refs/orbit/"]), "");
    let md = String::from_utf8_lossy(&repo.orbit(&["report", dir.to_str().unwrap()]).stdout)
        .into_owned();
    assert!(
        !md.contains("git diff refs/orbit"),
        "no command for a pruned ref: {md}"
    );
}

#[test]
fn a_candidate_that_changes_a_protected_test_is_disqualified_and_another_survives() {
    let repo = add_repo();
    // Candidate 1 "passes" by editing the protected test and the check; 2 does honest work
    // without claiming DONE.
    let agent = candidate_agent(
        &repo,
        "1) echo 'true' > tests/add_test.sh; echo 'echo 4' > add.sh ;;\n2) printf '%s\\n' 'echo $(($1 + $2))' > add.sh ;;",
    );
    let dir = fanout_loop(&repo, &agent, "2", &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick, work remains");
    let tamper = cand_env(&dir, 1, 1);
    assert!(
        tamper["DISQUALIFIED"].contains("tests/add_test.sh"),
        "{tamper:?}"
    );
    let honest = cand_env(&dir, 1, 2);
    assert_eq!(honest["DISQUALIFIED"], "");
    assert_eq!(repo.ws_read("add.sh"), "echo $(($1 + $2))\n");
    assert_eq!(
        repo.ws_read("tests/add_test.sh"),
        "test \"$(bash add.sh 1 1)\" = 2\n",
        "the protected test is untouched in the workspace"
    );
    // The other candidate's change is kept as a ref, with its verify record.
    let kept = repo.git(&["rev-parse", "refs/orbit/test-goal/1/1"]);
    assert_eq!(kept.trim(), tamper["COMMIT"]);
    let shown = repo.git(&["show", "refs/orbit/test-goal/1/1:tests/add_test.sh"]);
    assert_eq!(shown, "true\n");
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(
        progress.contains("disqualified: it changed the protected path tests/add_test.sh"),
        "{progress}"
    );
    assert!(
        progress.contains("- survivor: candidate 2 (the only candidate not disqualified)"),
        "{progress}"
    );
    assert_records_agree(&dir);
    // The commit on the loop branch is the survivor's.
    let log = repo.ws_git(&["show", "--stat", "--format=%s", "HEAD"]);
    assert!(log.contains("add.sh") && !log.contains("tests/"), "{log}");
    let _ = text(&out);
}

/// Lines of cost.ledger for iteration `it`.
fn ledger_lines(dir: &Path, it: u64) -> Vec<String> {
    fs::read_to_string(dir.join("cost.ledger"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(&format!("{it}\t")))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_kill_at_each_fault_point_mid_fan_out_resumes_with_no_record_lost_or_doubled() {
    // (point, agent runs of iteration 1 in the ledger after the rerun): a crash before any
    // candidate is recorded redoes both; after the first record, only the second.
    for (point, runs) in [
        ("fanout_after_agents", 4),
        ("fanout_after_checks", 4),
        ("fanout_after_candidate", 3),
        ("fanout_before_apply", 2),
        ("fanout_after_apply", 2),
    ] {
        let repo = add_repo();
        let agent = candidate_agent(
            &repo,
            "1) printf '%s\\n' 'echo $(($1 + $2))' > add.sh ;;\n2) : ;;",
        );
        let dir = fanout_loop(&repo, &agent, "2", &[]);
        let out = repo.run_loop(&dir, &["--once"], &[("ORBIT_FAULT", point)]);
        assert_eq!(out.status.code(), None, "killed at {point}\n{}", text(&out));
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(
            &out,
            10,
            &format!("the rerun after {point} completes iteration 1"),
        );
        assert_records_agree(&dir);
        for k in 1..=2u64 {
            let ends = events_named(&dir, "candidate_end")
                .into_iter()
                .filter(|e| e.iteration == 1 && e.value["candidate"] == k)
                .count();
            assert_eq!(ends, 1, "{point}: candidate {k} recorded once");
        }
        assert_eq!(
            events_named(&dir, "survivor_selected").len(),
            1,
            "{point}: one selection"
        );
        assert_eq!(
            events_named(&dir, "iteration_result").len(),
            1,
            "{point}: one iteration record"
        );
        assert_eq!(
            ledger_lines(&dir, 1).len(),
            runs,
            "{point}: every run, once"
        );
        assert_eq!(repo.ws_read("add.sh"), "echo $(($1 + $2))\n", "{point}");
        let log = repo.ws_git(&["log", "--format=%s", "orbit/test-goal"]);
        assert_eq!(
            log.lines().filter(|l| l.contains("iteration 1")).count(),
            1,
            "{point}: one commit\n{log}"
        );
        assert_eq!(cand_env(&dir, 1, 1)["CHANGED"], "1", "{point}");
    }
}

#[test]
fn a_budget_that_allows_one_candidate_does_not_start_three() {
    let cost = "echo 0.5 > \"$ORBIT_COST_FILE\"";
    for (n, code) in [("1", 10), ("3", 12)] {
        let repo = add_repo();
        let agent = candidate_agent(&repo, &format!("*) {cost} ;;"));
        let dir = fanout_loop(&repo, &agent, n, &["--usd-cap", "1"]);
        let out = repo.run_loop(&dir, &["--once"], &[("COST_ESTIMATE_USD", "0.5")]);
        assert_code(
            &out,
            code,
            &format!("{n} candidate(s) at $0.50 each under a $1 cap"),
        );
        let seen = repo.bin.path().join("seen");
        let ran = fs::read_dir(&seen).map(|d| d.count()).unwrap_or(0);
        if code == 12 {
            assert_eq!(ran, 0, "no candidate started");
            assert!(ledger_lines(&dir, 1).is_empty(), "nothing spent");
            assert!(
                text(&out).contains("3 candidates would cost about $1.50"),
                "{}",
                text(&out)
            );
        } else {
            assert!(ran > 0, "the single run started");
        }
    }
}

#[test]
fn a_candidate_that_writes_into_the_loop_directory_stops_the_loop() {
    let repo = add_repo();
    let loop_dir = repo.join(".orbit/test-goal");
    let agent = candidate_agent(
        &repo,
        &format!(
            "1) printf '%s\\n' 'echo $(($1 + $2))' > add.sh ;;\n2) echo planted > '{}/notes.md' ;;",
            loop_dir.display()
        ),
    );
    let dir = fanout_loop(&repo, &agent, "2", &[]);
    assert_eq!(dir, loop_dir);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 3, "loop_tamper");
    let state = fs::read_to_string(dir.join("state.env")).unwrap();
    assert!(state.contains("loop_tamper"), "{state}");
    assert_eq!(
        repo.ws_read("add.sh"),
        "echo 0\n",
        "nothing of the fan-out is taken"
    );
    assert!(events_named(&dir, "survivor_selected").is_empty());
}

#[test]
fn orbit_demo_with_three_candidates_ends_done_with_the_candidate_that_did_it_all() {
    let root = tempfile::tempdir().unwrap();
    let demo = root.path().join("demo");
    let mut cmd = crate::support::command(crate::support::orbit_bin());
    cmd.args(["demo", "--candidates", "3", "--dir", demo.to_str().unwrap()]);
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(180));
    assert_code(&out, 0, "orbit demo --candidates 3");
    let dir = demo.join("project/.orbit/calc");
    assert_eq!(crate::support::state_value(&dir, "LAST_STATUS"), "DONE");
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(progress.contains("## Iteration 1 — DONE"), "{progress}");
    assert!(
        progress.contains("- survivor: candidate 3 (the most checks passing (2 against 1))"),
        "{progress}"
    );
    assert!(
        progress.contains("- candidate 2: ok, checks 0/2"),
        "{progress}"
    );
    assert!(text(&out).contains("candidates/"), "{}", text(&out));
    assert_records_agree(&dir);
}

#[test]
fn status_shows_the_candidates_of_a_fan_out_loop() {
    let repo = add_repo();
    let agent = candidate_agent(&repo, "*) : ;;");
    let dir = fanout_loop(&repo, &agent, "2", &[]);
    let out = repo.orbit(&["status", dir.to_str().unwrap()]);
    assert!(text(&out).contains("candidates 2"), "{}", text(&out));
}

/// The candidate worktrees git lists for the repository.
fn candidate_worktrees(repo: &Repo) -> Vec<String> {
    repo.git(&["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .filter(|p| p.contains("test-goal.c"))
        .map(str::to_string)
        .collect()
}

/// A loop stopped after one fan-out iteration: two candidates' refs and worktrees left.
fn one_fanned_out_iteration() -> (Repo, PathBuf) {
    let repo = add_repo();
    let agent = candidate_agent(
        &repo,
        "1) printf '%s\\n' 'echo $(($1 + $2))' > add.sh ;;\n2) : ;;",
    );
    let dir = fanout_loop(&repo, &agent, "2", &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick, work remains");
    (repo, dir)
}

#[test]
fn recover_prune_candidates_removes_the_refs_and_worktrees_once_and_dry_run_writes_nothing() {
    let (repo, dir) = one_fanned_out_iteration();
    let d = dir.to_str().unwrap();
    let refs = repo.git(&["for-each-ref", "--format=%(refname)", "refs/orbit/"]);
    assert_eq!(
        refs, "refs/orbit/test-goal/1/1\nrefs/orbit/test-goal/1/2\n",
        "{refs}"
    );
    assert_eq!(candidate_worktrees(&repo).len(), 2);
    // A directory named like a candidate that is no worktree of this repository stays.
    let stranger = repo.ws_sibling(".c5");
    fs::create_dir_all(&stranger).unwrap();
    fs::write(stranger.join("keep.txt"), "mine\n").unwrap();
    let events_before = fs::read_to_string(dir.join("events.jsonl")).unwrap();

    let out = repo.orbit(&["recover", "--prune-candidates", "--dry-run", d]);
    assert_code(&out, 0, "the dry run");
    let said = text(&out);
    assert!(said.contains("--prune-candidates"), "{said}");
    assert!(
        said.contains("git update-ref -d refs/orbit/test-goal/1/1"),
        "{said}"
    );
    assert!(said.contains("git worktree remove --force"), "{said}");
    assert!(said.contains("test-goal.c5 is not left alone"), "{said}");
    assert_eq!(
        repo.git(&["for-each-ref", "--format=%(refname)", "refs/orbit/"]),
        refs,
        "the dry run deletes nothing"
    );
    assert_eq!(candidate_worktrees(&repo).len(), 2);
    assert_eq!(
        fs::read_to_string(dir.join("events.jsonl")).unwrap(),
        events_before
    );

    let out = repo.orbit(&["recover", "--prune-candidates", d]);
    assert_code(&out, 0, "the prune");
    assert_eq!(repo.git(&["for-each-ref", "refs/orbit/"]), "", "refs gone");
    assert!(candidate_worktrees(&repo).is_empty(), "worktrees gone");
    assert!(!repo.ws_sibling(".c1").exists());
    assert!(!repo.ws_sibling(".c2").exists());
    assert!(stranger.join("keep.txt").exists(), "the stranger stays");
    assert!(repo.ws().join("add.sh").exists(), "the workspace stays");
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(progress.contains("## Recovery"), "{progress}");
    assert!(progress.contains("--prune-candidates"), "{progress}");
    let rec = events_named(&dir, "recovery");
    assert_eq!(rec.len(), 1);
    assert!(
        rec[0].value.to_string().contains("--prune-candidates"),
        "{}",
        rec[0].value
    );
    assert_records_agree(&dir);

    // A second run changes nothing.
    let events_after = fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let out = repo.orbit(&["recover", "--prune-candidates", d]);
    assert_code(&out, 0, "the second prune");
    assert!(text(&out).contains("nothing to repair"), "{}", text(&out));
    assert_eq!(
        fs::read_to_string(dir.join("events.jsonl")).unwrap(),
        events_after
    );
    // recover.sh has no git work of its own: it names the orbit binary.
    let out = crate::support::command("bash")
        .arg(dir.join("recover.sh"))
        .arg("--prune-candidates")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("--prune-candidates needs the orbit binary"),
        "{}",
        text(&out)
    );
    // The loop goes on: the next fan-out makes its worktrees again.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(
        matches!(out.status.code(), Some(0 | 10)),
        "the loop goes on after the prune\n{}",
        text(&out)
    );
}

/// `orbit audit --json DIR`: the first loop's findings as (class, severity, evidence, fix).
fn audit_findings(repo: &Repo, dir: &Path) -> (Option<i32>, Vec<[String; 4]>) {
    let out = repo.orbit(&["audit", "--json", dir.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit --json ({e}):\n{}", text(&out)));
    let f = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            ["class", "severity", "evidence", "fix"].map(|k| f[k].as_str().unwrap().to_string())
        })
        .collect();
    (out.status.code(), f)
}

#[test]
fn audit_notes_candidate_worktrees_beyond_the_setting_and_stops_on_a_foreign_one() {
    let (repo, dir) = one_fanned_out_iteration();
    let d = dir.to_str().unwrap();
    let prune = format!("orbit recover --prune-candidates {d}");
    let (_, f) = audit_findings(&repo, &dir);
    assert!(
        f.iter()
            .all(|x| x[0] != "STATE_DRIFT" && x[0] != "GIT_TAMPER"),
        "two candidates of two are the loop's own: {f:?}"
    );
    // A third worktree, left by a wider fan-out, is a note.
    let c3 = repo.ws_sibling(".c3");
    repo.git(&["worktree", "add", "-q", "--detach", c3.to_str().unwrap()]);
    let (_, f) = audit_findings(&repo, &dir);
    let drift: Vec<_> = f.iter().filter(|x| x[0] == "STATE_DRIFT").collect();
    assert_eq!(drift.len(), 1, "{f:?}");
    assert_eq!(drift[0][1], "P2");
    assert!(drift[0][2].starts_with("loop.toml:"), "{f:?}");
    assert_eq!(drift[0][3], prune);
    // Candidate 1's .git pointed at another repository is a stop.
    let other = Repo::new();
    let c1 = repo.ws_sibling(".c1");
    fs::write(
        c1.join(".git"),
        format!("gitdir: {}\n", other.path().join(".git").display()),
    )
    .unwrap();
    let (code, f) = audit_findings(&repo, &dir);
    let tamper: Vec<_> = f.iter().filter(|x| x[0] == "GIT_TAMPER").collect();
    assert_eq!(tamper.len(), 1, "{f:?}");
    assert_eq!(tamper[0][1], "P0");
    assert_eq!(tamper[0][2], format!("{}:1", c1.join(".git").display()));
    assert!(tamper[0][3].ends_with(&prune), "{f:?}");
    assert_eq!(code, Some(3), "a P0 exits 3");
}

#[test]
fn audit_keeps_quiet_on_the_refs_kept_after_done_and_notes_a_worktree_left_until_pruned() {
    let repo = add_repo();
    let agent = candidate_agent(&repo, &format!("*) {HONEST} ;;"));
    let dir = fanout_loop(&repo, &agent, "2", &[]);
    assert_ok(&repo.run_loop(&dir, &[], &[]), "the loop");
    assert_eq!(crate::support::state_value(&dir, "LAST_STATUS"), "DONE");
    assert!(
        !repo.git(&["for-each-ref", "refs/orbit/"]).is_empty(),
        "refs kept"
    );
    let (_, f) = audit_findings(&repo, &dir);
    assert!(
        f.iter().all(|x| x[0] != "STATE_DRIFT"),
        "kept for review: {f:?}"
    );
    // A worktree the runner did not get to remove (it stopped between DONE and the prune).
    let left = repo.ws_sibling(".c2");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        left.to_str().unwrap(),
        "HEAD",
    ]);
    let (_, f) = audit_findings(&repo, &dir);
    let drift: Vec<_> = f.iter().filter(|x| x[0] == "STATE_DRIFT").collect();
    assert_eq!(drift.len(), 1, "{f:?}");
    assert_eq!(drift[0][1], "P2");
    assert!(drift[0][2].starts_with("state.env:"), "{f:?}");
    let d = dir.to_str().unwrap();
    assert_eq!(drift[0][3], format!("orbit recover --prune-candidates {d}"));
    assert_code(
        &repo.orbit(&["recover", "--prune-candidates", d]),
        0,
        "the prune",
    );
    let (_, f) = audit_findings(&repo, &dir);
    assert!(f.iter().all(|x| x[0] != "STATE_DRIFT"), "{f:?}");
    assert_eq!(
        repo.git(&["for-each-ref", "refs/orbit/"]),
        "",
        "refs pruned"
    );
    assert!(!left.exists(), "worktree pruned");
}

#[test]
fn report_lists_each_iterations_candidates_read_as_data_and_escaped() {
    let (repo, dir) = one_fanned_out_iteration();
    let d = dir.to_str().unwrap();
    let out = repo.orbit(&["report", d]);
    assert_code(&out, 0, "orbit report");
    let md = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(md.contains("## Candidates"), "{md}");
    assert!(md.contains("### Iteration 1"), "{md}");
    assert!(
        md.contains("| 1 | ok | 1/1 |  |  | 1 |  | yes | `git show refs/orbit/test-goal/1/1` |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| 2 | ok | 0/1 |  |  | 0 |  |  | `git diff refs/orbit/test-goal/1/1 refs/orbit/test-goal/1/2` |"
        ),
        "{md}"
    );

    // The record is data: markup is escaped, unknown keys and shell text are ignored.
    let env = dir.join("iterations/000001/candidates/2/candidate.env");
    let pwned = repo.join("pwned");
    let mut text = fs::read_to_string(&env).unwrap();
    text = text.replace(
        "DISQUALIFIED=\n",
        "DISQUALIFIED=<script>alert(1)</script> | \"quoted\" & more\n",
    );
    text.push_str(&format!(
        "EVIL=$(touch {p})\n$(touch {p})\nCHECKS_TOTAL=99\n",
        p = pwned.display()
    ));
    fs::write(&env, text).unwrap();
    let out = repo.orbit(&["report", "--html", d]);
    assert_code(&out, 0, "orbit report --html");
    let html = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(html.contains("<h2>Candidates</h2>"), "{html}");
    assert!(!html.contains("<script>alert"), "escaped: {html}");
    assert!(
        html.contains(
            "<td>2</td><td>ok</td><td>0/1</td><td></td><td></td><td>0</td><td>&lt;script&gt;alert(1)&lt;/script&gt; | &quot;quoted&quot; &amp; more</td><td></td>"
        ),
        "{html}"
    );
    assert!(
        html.contains(
            "<td>1</td><td>ok</td><td>1/1</td><td></td><td></td><td>1</td><td></td><td>yes</td>"
        ),
        "{html}"
    );
    assert!(!html.contains("EVIL"), "unknown keys are ignored");
    let md = String::from_utf8_lossy(&repo.orbit(&["report", d]).stdout).into_owned();
    assert!(
        md.contains(
            "| 2 | ok | 0/1 |  |  | 0 | <script>alert(1)</script> / \"quoted\" & more |  |"
        ),
        "a pipe cannot break the table: {md}"
    );
    assert!(!pwned.exists(), "never run");
}

#[test]
fn the_judge_picks_between_candidates_that_pass_every_check() {
    let repo = add_repo();
    // Both pass every check and claim DONE; 1 is the smaller change, but its add.sh says it
    // is a shortcut, which the judge refuses.
    let agent = candidate_agent(
        &repo,
        &format!(
            "1) printf '%s\\n' 'echo $(($1 + $2)) # shortcut' > add.sh; echo done > \"$ORBIT_AGENT_DIR/done.md\" ;;\n\
             2) {HONEST}; echo 'add.sh adds' > NOTES.txt ;;"
        ),
    );
    let dir = fanout_loop(&repo, &agent, "2", &[]);
    let out = repo.run_loop(&dir, &[], &[("JUDGE_CMD", "! grep -q shortcut add.sh")]);
    assert_ok(&out, "the fan-out loop with a judge");
    let shortcut = cand_env(&dir, 1, 1);
    let honest = cand_env(&dir, 1, 2);
    assert_eq!(
        shortcut["CHECKS_PASSED"], shortcut["CHECKS_TOTAL"],
        "{shortcut:?}"
    );
    assert_eq!(shortcut["JUDGE"], "fail", "{shortcut:?}");
    assert_eq!(honest["JUDGE"], "pass", "{honest:?}");
    assert!(
        shortcut["CHANGED"].parse::<u64>().unwrap() < honest["CHANGED"].parse::<u64>().unwrap(),
        "without the judge the shortcut would win on the smallest change: {shortcut:?} {honest:?}"
    );
    let sel = events_named(&dir, "survivor_selected");
    let line = sel[0].value.to_string();
    assert!(line.contains("\"candidate\":2"), "{line}");
    assert!(line.contains("the judge approved it"), "{line}");
    let ends = events_named(&dir, "candidate_end");
    assert!(
        ends.iter()
            .any(|e| e.value.to_string().contains("\"judge\":\"fail\"")),
        "{ends:?}"
    );
    assert_eq!(repo.ws_read("add.sh"), "echo $(($1 + $2))\n");
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(progress.contains(", judge fail"), "{progress}");
    assert_records_agree(&dir);
}

#[test]
fn an_early_stop_fan_out_stops_the_others_once_one_passes_everything_and_records_them() {
    let repo = add_repo();
    // Candidate 2 passes only once candidate 1's agent runs (candidate_agent writes down
    // each start), so that there is a run to stop, whatever the order the machine gives
    // them; a minute at most, should the test die.
    let first_started = repo.bin.path().join("seen/1-1");
    let agent = candidate_agent(
        &repo,
        &format!(
            "1) sleep 300; {HONEST} ;;\n\
             2) for _ in $(seq 600); do [ -e '{}' ] && break; sleep 0.1; done; {HONEST} ;;\n\
             3) : ;;",
            first_started.display()
        ),
    );
    // Without a fan-out there is nothing to stop: refused, with what to do.
    let out = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        agent.to_str().unwrap(),
        "--verify",
        VISIBLE,
        "--fanout-early-stop",
    ]);
    assert_code(&out, 2, "early stop without candidates");
    assert!(
        text(&out).contains("candidates = 2 or more"),
        "{}",
        text(&out)
    );

    let dir = fanout_loop(&repo, &agent, "3", &["--fanout-early-stop"]);
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("fanout-early-stop = true"), "{toml}");
    assert_script_clean(&dir.join("run-loop.sh"));
    // Candidate 1 would sleep for 5 minutes: the run ends because it is stopped.
    let out = repo.run_loop(&dir, &[], &[]);
    assert_ok(&out, "the early-stop fan-out");
    assert_eq!(repo.ws_read("add.sh"), "echo $(($1 + $2))\n");
    let slow = cand_env(&dir, 1, 1);
    assert_eq!(slow["OUTCOME"], "stopped", "{slow:?}");
    assert_eq!(
        slow["CHECKS_TOTAL"], "0",
        "a stopped candidate is not checked: {slow:?}"
    );
    assert_eq!(cand_env(&dir, 1, 2)["OUTCOME"], "ok");
    assert_eq!(cand_env(&dir, 1, 3)["CHECKS_PASSED"], "0");
    let sel = events_named(&dir, "survivor_selected");
    let line = sel[0].value.to_string();
    assert!(line.contains("\"candidate\":2"), "{line}");
    assert!(line.contains("fanout-early-stop"), "{line}");
    // Its cut-short run is in the ledger (its cost unknown) and in the journal, once.
    let lines = ledger_lines(&dir, 1);
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.ends_with("\t1"))
            .collect::<Vec<_>>(),
        [&"1\t0\tunknown\t1".to_string()],
        "{lines:?}"
    );
    let exits: Vec<String> = events_named(&dir, "agent_exit")
        .iter()
        .map(|e| e.value.to_string())
        .filter(|v| v.contains("\"candidate\":\"1\"") || v.contains("\"candidate\":1"))
        .collect();
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert!(exits[0].contains("\"outcome\":\"stopped\""), "{exits:?}");
    let log = fs::read_to_string(dir.join("iterations/000001/candidates/1/agent.log")).unwrap();
    assert!(log.contains("[orbit: stopped by the runner"), "{log}");
    let progress = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(
        progress.contains("- candidate 1: stopped")
            && progress.contains("another candidate passed everything first"),
        "{progress}"
    );
    // Nothing of the stopped candidate is left running.
    let marker = format!("ORBIT_OWNER={}", fs::canonicalize(&dir).unwrap().display());
    assert!(crate::support::processes_with_env(&marker).is_empty());
    assert_records_agree(&dir);
}

#[test]
fn a_fan_out_stopped_by_a_rate_limit_pauses_until_the_reset_its_cli_named() {
    let repo = add_repo();
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 7200;
    // Every candidate's CLI says when its limit lifts (an epoch, as Claude Code's
    // "limit reached|<epoch>" does) and fails.
    let agent = candidate_agent(
        &repo,
        &format!("*) echo 'Claude AI usage limit reached|{reset}'; exit 1 ;;"),
    );
    let dir = fanout_loop(&repo, &agent, "2", &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 13, "paused by the rate limit");
    assert_eq!(crate::support::state_value(&dir, "LAST_STATUS"), "PAUSED");
    assert_eq!(
        crate::support::state_value(&dir, "RESUME_AT"),
        reset.to_string(),
        "the reset the CLI named, not the 15-minute default"
    );
}

#[test]
fn under_the_sandbox_a_candidate_cannot_write_into_a_siblings_worktree_or_the_loop_directory() {
    if !crate::support::bwrap_available() {
        return;
    }
    let repo = add_repo();
    // Candidate 1 tries to plant its sibling's answer and a file in the loop directory, and
    // notes in its own worktree (the one place it may write) which writes went through;
    // candidate 2 does honest work without claiming DONE, so that the refs stay.
    let agent = candidate_agent(
        &repo,
        "1) echo tried > marks.txt; \
           printf 'echo 5\\n' > ../test-goal.c2/add.sh 2>/dev/null && echo sibling >> marks.txt; \
           echo forged > \"@ORBIT_DIR@/test-goal/forged.txt\" 2>/dev/null && echo loop >> marks.txt; true ;;\n\
         2) printf '%s\\n' 'echo $(($1 + $2))' > add.sh ;;",
    );
    let dir = fanout_loop(&repo, &agent, "2", &["--sandbox", "bwrap"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick under the sandbox");
    let marks = repo.git(&["show", "refs/orbit/test-goal/1/1:marks.txt"]);
    assert_eq!(marks, "tried\n", "neither write went through");
    assert!(!dir.join("forged.txt").exists());
    let honest = cand_env(&dir, 1, 2);
    assert_eq!(honest["CHECKS_PASSED"], "1", "{honest:?}");
    assert_eq!(
        repo.git(&["show", "refs/orbit/test-goal/1/2:add.sh"]),
        "echo $(($1 + $2))\n",
        "the sibling's change is its own"
    );
    assert_eq!(repo.ws_read("add.sh"), "echo $(($1 + $2))\n");
}

#[test]
fn an_early_stop_fan_out_killed_after_its_passer_was_recorded_does_not_start_the_others_again() {
    let repo = add_repo();
    // Candidate 1 passes at once; 2 would sleep for 5 minutes (stopped in the first run);
    // a rerun that started it again would hang.
    let agent = candidate_agent(
        &repo,
        &format!("1) {HONEST} ;;\n2) sleep 300; {HONEST} ;;\n3) : ;;"),
    );
    let dir = fanout_loop(&repo, &agent, "3", &["--fanout-early-stop"]);
    // Killed right after the first candidate (the passer) is recorded.
    let out = repo.run_loop(&dir, &[], &[("ORBIT_FAULT", "fanout_after_candidate")]);
    assert_eq!(out.status.code(), None, "killed: {}", text(&out));
    assert_eq!(cand_env(&dir, 1, 1)["OUTCOME"], "ok");
    assert!(
        !dir.join("iterations/000001/candidates/2/candidate.env")
            .exists(),
        "the attack point: candidate 2 is not recorded yet"
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_ok(&out, "the rerun");
    for k in [2, 3] {
        assert_eq!(cand_env(&dir, 1, k)["OUTCOME"], "stopped", "candidate {k}");
    }
    let starts = events_named(&dir, "candidate_start");
    assert_eq!(
        starts.len(),
        3,
        "only the first run started candidates: {starts:?}"
    );
    let sel = events_named(&dir, "survivor_selected");
    assert!(sel[0].value.to_string().contains("\"candidate\":1"));
    assert_eq!(repo.ws_read("add.sh"), "echo $(($1 + $2))\n");
}

/// Where each check run ran (the counting check writes its working directory), in order.
fn check_runs(counter: &Path) -> Vec<String> {
    fs::read_to_string(counter)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_survivors_checks_are_not_run_again_in_the_workspace_on_the_same_tree() {
    let repo = add_repo();
    let counter = repo.bin.path().join("check-runs");
    let check = format!("echo \"$PWD\" >> {}; {VISIBLE}", counter.display());
    let agent = candidate_agent(&repo, &format!("1) : ;;\n2) {HONEST} ;;"));
    let dir = repo.init_loop(
        &agent,
        &[&check],
        &[
            "--candidates",
            "2",
            "--holdout",
            HIDDEN,
            "--judge-cmd",
            "true",
        ],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_ok(&out, "DONE");
    // The DONE's adequacy measure (adequacy = "report", the default) runs the checks in
    // checkouts of its own after the DONE; what is counted here is the DONE's own runs.
    let runs: Vec<String> = check_runs(&counter)
        .into_iter()
        .filter(|p| !p.contains("/orbit-adequacy-"))
        .collect();
    let ws = repo.ws().canonicalize().unwrap().display().to_string();
    let in_ws = runs.iter().filter(|p| **p == ws).count();
    let in_c1 = runs.iter().filter(|p| p.ends_with("test-goal.c1")).count();
    let in_c2 = runs.iter().filter(|p| p.ends_with("test-goal.c2")).count();
    // The red gate ran in the workspace; candidate 1 failed at once (its PASS_K repeats
    // stop), candidate 2 passed PASS_K = 2 times; the survivor's tree in the workspace was
    // not checked again; the one extra run is the clean checkout's.
    assert_eq!(in_ws, 1, "only the red gate in the workspace: {runs:?}");
    assert_eq!(in_c1, 1, "{runs:?}");
    assert_eq!(in_c2, 2, "{runs:?}");
    assert_eq!(
        runs.len(),
        5,
        "red gate + 1 + 2 + the clean checkout: {runs:?}"
    );
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert_eq!(
        log.matches("[orbit] not run again: the survivor's checks passed on this same tree")
            .count(),
        2,
        "{log}"
    );
    assert!(log.contains("[PASS]"), "{log}");
    let held = fs::read_to_string(dir.join("iterations/000001/holdout.log")).unwrap();
    assert!(held.contains("not run again"), "{held}");
    let judged = fs::read_to_string(dir.join("iterations/000001/judge.log")).unwrap();
    assert!(judged.contains("not run again"), "{judged}");
    assert_records_agree(&dir);
}

#[test]
fn a_survivor_whose_checks_failed_is_checked_in_the_workspace_as_before() {
    let repo = add_repo();
    let counter = repo.bin.path().join("check-runs");
    let check = format!("echo \"$PWD\" >> {}; {VISIBLE}", counter.display());
    let agent = candidate_agent(&repo, "*) : ;;");
    let dir = repo.init_loop(&agent, &[&check], &["--candidates", "2"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "work remains");
    let ws = repo.ws().canonicalize().unwrap().display().to_string();
    let runs = check_runs(&counter);
    assert_eq!(
        runs.iter().filter(|p| **p == ws).count(),
        2,
        "the red gate and the survivor's tree in the workspace: {runs:?}"
    );
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(!log.contains("not run again"), "{log}");
}

/// A check script in the test's bin directory, run as `bash <path>`: `body` is bash, with
/// BIN standing for the bin directory.
fn check_script(repo: &Repo, name: &str, body: &str) -> String {
    let bin = repo.bin.path().display().to_string();
    let path = repo.bin.path().join(name);
    fs::write(&path, body.replace("BIN", &bin)).unwrap();
    format!("bash {}", path.display())
}

/// The lines of a file in the test's bin directory.
fn bin_lines(repo: &Repo, name: &str) -> Vec<String> {
    fs::read_to_string(repo.bin.path().join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_candidates_checks_run_at_once_and_keep_every_record_as_before() {
    let repo = add_repo();
    // Each candidate's check waits (up to 30 s) until both candidates' checks have started:
    // run one after another, candidate 1's would never see candidate 2's, and `met` would
    // not name it.
    let check = check_script(
        &repo,
        "meet.sh",
        r#"case "$PWD" in
  *.c[0-9]*)
    k=${PWD##*.}
    mkdir -p BIN/meet
    : > "BIN/meet/arrived.$k"
    i=0
    while [ ! -e BIN/meet/arrived.c1 ] || [ ! -e BIN/meet/arrived.c2 ]; do
      i=$((i + 1)); [ "$i" -le 300 ] || break; sleep 0.1
    done
    if [ -e BIN/meet/arrived.c1 ] && [ -e BIN/meet/arrived.c2 ]; then echo "$k" >> BIN/met; fi ;;
esac
test "$(bash add.sh 2 2)" = 4
"#,
    );
    let agent = candidate_agent(&repo, &format!("*) {HONEST} ;;"));
    let dir = repo.init_loop(
        &agent,
        &[&check],
        &["--candidates", "2", "--holdout", HIDDEN],
    );
    let out = repo.run_loop(&dir, &[], &[("CHECK_JOBS", "2")]);
    assert_ok(&out, "DONE");
    let met = bin_lines(&repo, "met");
    assert!(
        met.iter().any(|k| k == "c1") && met.iter().any(|k| k == "c2"),
        "both candidates' checks ran at once: {met:?}"
    );
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(log.contains("run, 2 at once"), "{log}");
    // Every record as a candidate checked alone had it.
    for k in 1..=2u64 {
        let c = cand_env(&dir, 1, k);
        assert_eq!(c["CHECKS_PASSED"], "1", "{c:?}");
        assert_eq!(c["PASS_K_RUNS"], "2", "{c:?}");
        assert_eq!(c["HOLDOUT"], "pass", "{c:?}");
        let cdir = dir.join(format!("iterations/000001/candidates/{k}"));
        let verify = fs::read_to_string(cdir.join("verify.log")).unwrap();
        assert_eq!(
            verify.matches("### verify run: candidate").count(),
            2,
            "{verify}"
        );
        assert!(
            verify.contains(&format!("candidate {k}, pass 2 of 2")),
            "{verify}"
        );
        let held = fs::read_to_string(cdir.join("holdout.log")).unwrap();
        assert!(held.contains("### holdout run"), "{held}");
        assert!(cdir.join("verify.pass.out").is_file());
    }
    // The DONE gate took the survivor's holdout verdict on the same tree: two runs, not three.
    assert_eq!(events_named(&dir, "holdout_pass").len(), 2);
    assert_eq!(events_named(&dir, "candidate_end").len(), 2);
    assert!(
        !dir.join(".run-tmp/j1").exists() && !dir.join(".run-tmp/j2").exists(),
        "the checks' scratch is gone once taken"
    );
    assert_records_agree(&dir);
}

#[test]
fn with_check_jobs_1_the_candidates_checks_run_one_at_a_time() {
    let repo = add_repo();
    let check = check_script(
        &repo,
        "one.sh",
        r#"case "$PWD" in
  *.c[0-9]*)
    echo "${PWD##*.}" >> BIN/order
    mkdir BIN/busy 2>/dev/null || echo overlap >> BIN/overlaps
    sleep 0.3
    rmdir BIN/busy 2>/dev/null || true ;;
esac
test "$(bash add.sh 2 2)" = 4
"#,
    );
    let agent = candidate_agent(&repo, &format!("*) {HONEST} ;;"));
    let dir = repo.init_loop(
        &agent,
        &[&check],
        &["--candidates", "2", "--check-jobs", "1"],
    );
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("check-jobs = 1"), "{toml}");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_ok(&out, "DONE");
    assert!(bin_lines(&repo, "overlaps").is_empty(), "no two at once");
    assert_eq!(
        bin_lines(&repo, "order"),
        ["c1", "c1", "c2", "c2"],
        "candidate 1's PASS_K runs, then candidate 2's"
    );
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(log.contains("run, 1 at once"), "{log}");
}

/// The lines of BIN/runs, where each check run of the fan-out tests stamps its start and end
/// ("<seconds.nanoseconds> start|end <candidate>"), for a failure to show how the runs lay in
/// time.
fn runs_stamped(repo: &Repo) -> String {
    bin_lines(repo, "runs").join("\n")
}

/// The shell lines a check script starts with: its run's start stamped into BIN/runs, and
/// its end stamped there on exit, whatever ends it but a KILL.
const STAMP_RUN: &str = r#"k=${PWD##*.}
echo "$(date +%s.%N) start $k" >> BIN/runs
trap 'echo "$(date +%s.%N) end $k" >> BIN/runs' EXIT
"#;

#[test]
fn with_check_jobs_2_three_candidates_checks_run_two_at_once_and_a_freed_place_is_taken_at_once() {
    let repo = add_repo();
    // Rendezvous through files, each bounded at 30 s, in each candidate's first check run:
    // candidate 1's waits until candidate 2's has started (two at once); candidate 2's waits
    // until candidate 3's has started, which it can only do in the place candidate 1 left
    // (the runner starts the next one as soon as one ends, not once the first two have). Run
    // one at a time, or two by two, the one waiting would give up and `met` would not say it.
    let body = format!(
        r#"{STAMP_RUN}case "$PWD" in
  *.c[0-9]*)
    if mkdir BIN/first.$k 2>/dev/null; then
      : > BIN/started.$k
      case $k in c1) other=c2 ;; c2) other=c3 ;; *) other='' ;; esac
      if [ -n "$other" ]; then
        i=0
        while [ ! -e BIN/started.$other ]; do
          i=$((i + 1)); [ "$i" -le 300 ] || break; sleep 0.1
        done
        [ ! -e BIN/started.$other ] || echo "$k met $other" >> BIN/met
      fi
    fi ;;
esac
test "$(bash add.sh 2 2)" = 4
"#
    );
    let check = check_script(&repo, "meet3.sh", &body);
    let agent = candidate_agent(&repo, &format!("*) {HONEST} ;;"));
    let dir = repo.init_loop(
        &agent,
        &[&check],
        &["--candidates", "3", "--check-jobs", "2"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_ok(&out, "DONE");
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(log.contains("run, 2 at once"), "{log}");
    let runs = runs_stamped(&repo);
    assert_eq!(
        bin_lines(&repo, "met"),
        ["c1 met c2", "c2 met c3"],
        "the checks' runs in time:\n{runs}\n{log}"
    );
    // Never more than two candidates' check runs at once, each candidate's PASS_K runs all
    // there (the workspace's own runs, named test-goal or clean, come after the fan-out).
    let (mut live, mut most, mut ended) = (0i32, 0i32, std::collections::BTreeMap::new());
    for line in bin_lines(&repo, "runs") {
        let f: Vec<&str> = line.split(' ').collect();
        if !f[2].starts_with('c') || f[2] == "clean" {
            continue;
        }
        match f[1] {
            "start" => live += 1,
            _ => {
                live -= 1;
                *ended.entry(f[2].to_string()).or_insert(0) += 1;
            }
        }
        most = most.max(live);
    }
    assert_eq!(most, 2, "at most check-jobs at once:\n{runs}");
    assert_eq!(
        ended.into_iter().collect::<Vec<_>>(),
        [("c1".into(), 2), ("c2".into(), 2), ("c3".into(), 2)],
        "{runs}"
    );
    for k in 1..=3u64 {
        let c = cand_env(&dir, 1, k);
        assert_eq!(c["CHECKS_PASSED"], "1", "{c:?}");
        assert_eq!(c["PASS_K_RUNS"], "2", "{c:?}");
    }
    assert_records_agree(&dir);
}

/// runner.log's lines that say how the candidates' checks were laid out, in order.
fn laid_out(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("runner.log"))
        .unwrap()
        .lines()
        .filter(|l| l.contains("the checks of candidate(s)"))
        .map(str::to_string)
        .collect()
}

/// With the default `check-jobs` (0), checks that mostly wait run every candidate's at once,
/// whatever the CPUs: here the runner sees one CPU (`OMP_NUM_THREADS=1`, which nproc obeys),
/// so it used to check three candidates one after another. Each candidate's check run
/// sleeps a second (a check waiting on a network or a database uses about as little CPU) and
/// waits, bounded at 10 s, until every candidate's run of the same round has started: one
/// after another they never meet. The first tick lays the checks out by the red gate's run
/// (measured in the runner); the second, a process started afresh, by what the journal's
/// candidate_end events say the candidates' runs used.
#[test]
fn with_the_default_check_jobs_checks_that_wait_run_every_candidates_at_once_whatever_the_cpus() {
    let repo = add_repo();
    let body = format!(
        r#"{STAMP_RUN}case "$PWD" in
  *.c[0-9]*)
    r=$(grep -c " start $k\$" BIN/runs)
    i=0
    while [ "$(grep -c ' start c[0-9]' BIN/runs)" -lt $((3 * r)) ]; do
      i=$((i + 1)); [ "$i" -le 100 ] || break; sleep 0.1
    done
    [ "$(grep -c ' start c[0-9]' BIN/runs)" -lt $((3 * r)) ] || echo "$k $r" >> BIN/met ;;
esac
sleep 1
test "$(bash add.sh 2 2)" = 4
"#
    );
    let check = check_script(&repo, "wait.sh", &body);
    // The first iteration's candidates change nothing (their checks fail once each), the
    // second's solve it (two passing runs each).
    let agent = candidate_agent(
        &repo,
        &format!("*) if [ \"$ORBIT_ITERATION\" -ge 2 ]; then {HONEST}; fi ;;"),
    );
    let dir = repo.init_loop(
        &agent,
        &[&check],
        &["--candidates", "3", "--adequacy", "off"],
    );
    let one_cpu = [("OMP_NUM_THREADS", "1")];
    let out = repo.run_loop(&dir, &["--once"], &one_cpu);
    assert_code(&out, 10, "work remains after the first tick");
    let laid = laid_out(&dir);
    assert_eq!(laid.len(), 1, "{laid:?}");
    assert!(
        laid[0].contains("run, 3 at once (1 CPU(s), a verify run used "),
        "laid out by the red gate's run: {laid:?}"
    );
    let mut met = bin_lines(&repo, "met");
    met.sort();
    assert_eq!(
        met,
        ["c1 1", "c2 1", "c3 1"].map(String::from).to_vec(),
        "every candidate's run met the others':\n{}",
        runs_stamped(&repo)
    );
    // Each candidate's record and its candidate_end event keep what its run used.
    let ends = events_named(&dir, "candidate_end");
    assert_eq!(ends.len(), 3);
    for (k, end) in (1..=3u64).zip(&ends) {
        let used = cand_env(&dir, 1, k)["CHECK_CPU"].clone();
        assert!(
            !used.is_empty() && used.bytes().all(|b| b.is_ascii_digit()),
            "candidate {k}: CHECK_CPU={used:?}"
        );
        assert_eq!(end.value["check_cpu"].to_string(), used, "{}", end.value);
    }
    fs::remove_file(repo.bin.path().join("met")).unwrap();
    // A tick started afresh: no run of its own measured before the candidates' checks.
    let out = repo.run_loop(&dir, &["--once"], &one_cpu);
    assert_ok(&out, "DONE on the second tick");
    let laid = laid_out(&dir);
    assert_eq!(laid.len(), 2, "{laid:?}");
    assert!(
        laid[1].contains("run, 3 at once (1 CPU(s), a verify run used "),
        "laid out by the journal: {laid:?}"
    );
    met = bin_lines(&repo, "met");
    met.sort();
    assert_eq!(
        met,
        ["c1 2", "c1 3", "c2 2", "c2 3", "c3 2", "c3 3"]
            .map(String::from)
            .to_vec(),
        "both rounds of the second tick met:\n{}",
        runs_stamped(&repo)
    );
    assert_records_agree(&dir);
}

/// How the default `check-jobs` lays the candidates' checks out, for given measures: the
/// fan-out part's own function, run by bash from a fan-out loop's lib.sh, with the CPUs
/// nproc reports set by `OMP_NUM_THREADS`.
#[test]
fn the_default_check_jobs_fits_the_candidates_checks_to_the_cpus_they_use() {
    let repo = add_repo();
    let agent = candidate_agent(&repo, "*) : ;;");
    let dir = repo.init_loop(&agent, &[VISIBLE], &["--candidates", "3"]);
    let journal = repo.bin.path().join("events.jsonl");
    fs::write(
        &journal,
        concat!(
            "{\"event\":\"candidate_end\",\"iteration\":1,\"candidate\":1,\"check_cpu\":\"100\"}\n",
            "{\"event\":\"candidate_end\",\"iteration\":1,\"candidate\":2,\"check_cpu\":\"600\"}\n",
            "{\"event\":\"candidate_end\",\"iteration\":1,\"candidate\":3,\"check_cpu\":\"\"}\n",
        ),
    )
    .unwrap();
    let script = format!(
        r#"set -u
source {lib}
FANOUT_N=3
lay() {{ CHECK_JOBS=$1 CHECKS_CPU=$2 EV_FILE=$3; fanout_check_jobs_v; echo "$REPLY $FANOUT_JOBS_WHY"; }}
lay 0 '' /nonexistent
lay 0 0 /nonexistent
lay 0 500 /nonexistent
lay 0 501 /nonexistent
lay 0 1800 /nonexistent
lay 2 0 /nonexistent
lay 0 '' {journal}
"#,
        lib = dir.join("lib.sh").display(),
        journal = journal.display()
    );
    let out = command("bash")
        .arg("-c")
        .arg(&script)
        .env("OMP_NUM_THREADS", "2")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .collect::<Vec<_>>(),
        [
            // Nothing measured: as many as there are candidates, at most the CPUs.
            "2 2 CPU(s)",
            // Three runs of 0% and of 50% of a CPU fit in three quarters of two.
            "3 2 CPU(s), a verify run used 0% of one",
            "3 2 CPU(s), a verify run used 50% of one",
            // A little more does not: at most the CPUs.
            "2 2 CPU(s), a verify run used 50% of one",
            "2 2 CPU(s), a verify run used 180% of one",
            // check-jobs set: as it says, whatever was measured.
            "2 check-jobs",
            // A tick started afresh: the most the journal's candidates used.
            "2 2 CPU(s), a verify run used 60% of one",
        ],
        "{}",
        text(&out)
    );
}

#[test]
fn a_candidate_whose_check_hangs_is_bounded_by_its_own_timeout_while_the_others_finish() {
    let repo = add_repo();
    // Candidate 1's check waits until candidate 2's two runs have ended (proof that they ran
    // while it was running: its own timeout bounds the wait), then hangs until that timeout
    // ends it. Candidate 2's runs take a fraction of a second at rest: 20 s leaves them some
    // hundred times that. The count is read from the file once it exists: grep -c on a
    // missing file prints nothing, and `[ "" -lt 2 ]` is an error, not a "not yet".
    let body = format!(
        r#"{STAMP_RUN}case "$PWD" in
  *.c1)
    until [ -f BIN/order ] && [ "$(grep -c '^end c2$' BIN/order)" -ge 2 ]; do sleep 0.1; done
    echo "c2 ended first" >> BIN/proof
    sleep 300 ;;
esac
test "$(bash add.sh 2 2)" = 4 && echo "end $k" >> BIN/order
"#
    );
    let check = check_script(&repo, "hang.sh", &body);
    let agent = candidate_agent(&repo, &format!("*) {HONEST} ;;"));
    let dir = repo.init_loop(&agent, &[&check], &["--candidates", "2"]);
    let out = repo.run_loop(
        &dir,
        &[],
        &[
            ("CHECK_JOBS", "2"),
            ("CHECK_TIMEOUT", "20"),
            ("KILL_GRACE", "1"),
        ],
    );
    assert_ok(&out, "DONE with the candidate whose checks ended");
    // Should it fail, the checks' runs in time, and the runner's account of them.
    assert_eq!(
        bin_lines(&repo, "proof"),
        ["c2 ended first"],
        "candidate 2's checks ran while candidate 1's hung (the checks' runs in time:\n{})\n{}",
        runs_stamped(&repo),
        fs::read_to_string(dir.join("runner.log")).unwrap_or_default()
    );
    let hung = cand_env(&dir, 1, 1);
    assert_eq!(hung["CHECKS_PASSED"], "0", "{hung:?}");
    let verify = fs::read_to_string(dir.join("iterations/000001/candidates/1/verify.log")).unwrap();
    assert!(verify.contains("timed out after 20s"), "{verify}");
    assert_eq!(cand_env(&dir, 1, 2)["PASS_K_RUNS"], "2");
    let sel = events_named(&dir, "survivor_selected");
    assert!(
        sel[0].value.to_string().contains("\"candidate\":2"),
        "{sel:?}"
    );
    assert_records_agree(&dir);
}

#[test]
fn under_the_sandbox_a_candidates_checks_cannot_read_the_others_scratch() {
    if !crate::support::bwrap_available() {
        return;
    }
    // The check lists the runner's scratch: without the sandbox it shows the other
    // candidate's (its agent's logs, its checks' holdout output); under it, nothing of it.
    let listing = "case \"$PWD\" in *.c1) ls -a \"$ORBIT_VERIFY_FOR/.run-tmp\" | sed 's/^/seen: /' ;; esac; test \"$(bash add.sh 2 2)\" = 4";
    for sandbox in ["none", "bwrap"] {
        let repo = add_repo();
        let agent = candidate_agent(&repo, &format!("*) {HONEST} ;;"));
        let dir = repo.init_loop(
            &agent,
            &[listing],
            &[
                "--candidates",
                "2",
                "--holdout",
                HIDDEN,
                "--sandbox",
                sandbox,
            ],
        );
        let out = repo.run_loop(&dir, &["--once"], &[("CHECK_JOBS", "2")]);
        assert_ok(&out, &format!("DONE in one tick, sandbox {sandbox}"));
        let verify =
            fs::read_to_string(dir.join("iterations/000001/candidates/1/verify.log")).unwrap();
        let seen: Vec<&str> = verify
            .lines()
            .filter_map(|l| l.strip_prefix("seen: "))
            .filter(|l| *l != "." && *l != "..")
            .collect();
        let sibling = seen.iter().any(|l| *l == "c2" || *l == "j2");
        if sandbox == "none" {
            assert!(
                sibling,
                "the attack: without the sandbox it sees the sibling's: {seen:?}"
            );
        } else {
            assert!(!sibling, "under the sandbox: {seen:?}\n{verify}");
        }
    }
}

#[test]
fn the_report_accounts_for_the_selection_in_markdown_html_and_json() {
    let repo = add_repo();
    let agent = candidate_agent(&repo, &format!("1) : ;;\n2) {OVERFIT} ;;\n3) {HONEST} ;;"));
    let dir = fanout_loop(&repo, &agent, "3", &["--holdout", HIDDEN]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_ok(&out, "the fan-out loop");
    let d = dir.to_str().unwrap();

    // The idle candidate passes nothing; the overfit and the honest one pass the visible
    // check; only the honest one the holdout.
    let out = repo.orbit(&["report", "--json", d]);
    assert_code(&out, 0, "orbit report --json");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sel = &json["selection"];
    assert_eq!(sel["iterations"], 1, "{json:#}");
    assert_eq!(sel["candidates"], 3, "{sel}");
    assert_eq!(sel["passed_visible"], 2, "{sel}");
    assert_eq!(sel["holdout_run"], 2, "{sel}");
    assert_eq!(sel["passed_holdout"], 1, "{sel}");
    assert_eq!(sel["several_passed"], 1, "{sel}");
    assert_eq!(sel["only_survivor_passed"], 0, "{sel}");
    assert_eq!(sel["none_passed"], 0, "{sel}");
    assert_eq!(json["status"], "DONE", "{json:#}");
    assert_eq!(json["name"], "test-goal");
    let row = &json["rows"][0];
    assert_eq!(row["iteration"], 1, "{row}");
    let cands = row["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 3, "{row}");
    assert_eq!(cands[2]["survivor"], true, "{row}");
    assert_eq!(cands[1]["holdout"], "fail", "{row}");
    assert!(
        cands[1]["review"]
            .as_str()
            .unwrap()
            .contains("git diff refs/orbit/test-goal/1/3 refs/orbit/test-goal/1/2"),
        "{row}"
    );

    let md = String::from_utf8_lossy(&repo.orbit(&["report", d]).stdout).into_owned();
    assert!(
        md.contains("Across 1 fan-out iteration(s): 3 candidate(s), 2 of them passed every visible check; of those, 1 of the 2 checked also passed the holdout checks (1 passed the visible checks only: overfitted to them). The survivor was the only candidate passing in 0 iteration(s); two or more passed in 1; none in 0."),
        "{md}"
    );
    let html = String::from_utf8_lossy(&repo.orbit(&["report", "--html", d]).stdout).into_owned();
    assert!(
        html.contains("<p class=\"selection\">Across 1 fan-out iteration(s)"),
        "{html}"
    );
    let both = repo.orbit(&["report", "--json", "--html", d]);
    assert_code(&both, 2, "--json and --html together");
}
