//! The verified hand-off: a DONE writes envelope.json and the same bytes as the DONE
//! commit's note under refs/notes/orbit; `orbit verify` passes on that commit and refuses
//! a branch changed after DONE (amended, extended, rebased, its check script edited, its
//! note forged) with the failure's code; `orbit merge` verifies first. Real git, the real
//! generated runner.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{Repo, assert_code, command, run_bounded, text};

/// The check script the loop runs, committed in the repository: passes once work.txt is
/// there, unless BREAK_IT is set (the code "no longer passes" where it runs).
const CHECK_SH: &str = "test -f work.txt && test -z \"${BREAK_IT:-}\"\n";

/// A repository whose loop reached DONE: its loop directory.
pub(crate) fn done_loop(repo: &Repo) -> PathBuf {
    repo.write("check.sh", CHECK_SH);
    repo.write("log.txt", "");
    repo.git(&["add", "check.sh", "log.txt"]);
    repo.git(&["commit", "-qm", "the check"]);
    let agent = repo.agent(
        "worker",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo step >> work.txt
echo step >> log.txt
echo "every check holds" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &["bash check.sh"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "the loop reaches DONE");
    dir
}

fn verify(repo: &Repo, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["verify", "--json"];
    all.extend_from_slice(args);
    let out = repo.orbit(&all);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("orbit verify --json printed no JSON ({e}): {}", text(&out)));
    (out.status.code().unwrap_or(-1), v)
}

fn assert_fails(repo: &Repo, args: &[&str], code: &str) {
    let (rc, v) = verify(repo, args);
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["verify_failure_code"], code, "{v}");
}

fn done_commit(repo: &Repo) -> String {
    repo.git(&["rev-parse", "orbit/test-goal"])
        .trim()
        .to_string()
}

fn note(repo: &Repo, commit: &str) -> String {
    repo.git(&["notes", "--ref=orbit", "show", commit])
}

#[test]
fn done_writes_the_envelope_and_its_note_and_verify_passes_on_the_done_commit() {
    let repo = Repo::new();
    let dir = done_loop(&repo);
    let commit = done_commit(&repo);
    let bytes = fs::read_to_string(dir.join("envelope.json")).unwrap();
    assert_eq!(
        note(&repo, &commit),
        bytes,
        "the note holds envelope.json's bytes"
    );
    let e = orbit::envelope::parse(bytes.as_bytes()).expect("the envelope parses");
    assert_eq!(e.commit.as_deref(), Some(commit.as_str()));
    assert_eq!(e.loop_name, "test-goal");
    assert_eq!(e.pass_k, 2);
    let check = &e.checks[0];
    assert_eq!(check.command, "bash check.sh");
    assert!(check.passes.unwrap() >= 2, "{bytes}");
    let script = check
        .files
        .iter()
        .find(|f| f.path == "check.sh")
        .expect("check.sh");
    assert_eq!(script.sha256, orbit::fsx::sha256_hex(CHECK_SH.as_bytes()));
    let vsh = check.files.iter().find(|f| f.path == "verify.sh").unwrap();
    assert!(vsh.in_loop());
    assert_eq!(vsh.sha256, crate::support::file_sha(&dir.join("verify.sh")));
    let raw: serde_json::Value = serde_json::from_str(&bytes).unwrap();
    assert!(
        raw["model"].is_null(),
        "the loop does not know its model: null"
    );
    let (rc, v) = verify(&repo, &[]);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["digest"], e.digest.as_str());
    let (rc, v) = verify(&repo, &[&commit]);
    assert_eq!(rc, 0, "the DONE commit by its hash: {v}");
    // Each answer is journaled in the loop's chain.
    let journal = orbit::events::read(&fs::read(dir.join("events.jsonl")).unwrap());
    assert_eq!(journal.error, None);
    let passes: Vec<_> = journal
        .events
        .iter()
        .filter(|ev| ev.event == "verify_pass" && ev.value["by"] == "orbit verify")
        .collect();
    assert_eq!(passes.len(), 2);
    // A commit without an envelope is never a pass.
    assert_fails(&repo, &["main"], "UNVERIFIED");
    let out = repo.orbit(&["verify", "no-such-ref"]);
    assert_code(&out, 2, "a REF that does not exist is bad input");
}

#[test]
fn an_amended_done_commit_is_an_integrity_mismatch() {
    let repo = Repo::new();
    done_loop(&repo);
    let before = done_commit(&repo);
    repo.ws_git(&[
        "commit",
        "-q",
        "--amend",
        "-m",
        "orbit(test-goal): iteration 1\n\nOrbit-Loop: test-goal",
    ]);
    assert_ne!(done_commit(&repo), before, "the commit was rewritten");
    assert_fails(&repo, &["orbit/test-goal"], "INTEGRITY_MISMATCH");
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 3, "merge refuses");
    assert!(text(&out).contains("INTEGRITY_MISMATCH"), "{}", text(&out));
}

#[test]
fn a_commit_after_done_is_tree_moved() {
    let repo = Repo::new();
    done_loop(&repo);
    fs::write(repo.ws().join("later.txt"), "not verified\n").unwrap();
    repo.ws_git(&["add", "later.txt"]);
    repo.ws_git(&["commit", "-qm", "after DONE"]);
    assert_fails(&repo, &["orbit/test-goal"], "TREE_MOVED");
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 3, "merge refuses");
    assert!(text(&out).contains("TREE_MOVED"), "{}", text(&out));
}

#[test]
fn a_rebase_onto_another_base_is_an_integrity_mismatch() {
    let repo = Repo::new();
    done_loop(&repo);
    repo.write("other.txt", "another base\n");
    repo.git(&["add", "other.txt"]);
    repo.git(&["commit", "-qm", "main moves on"]);
    let before = done_commit(&repo);
    repo.ws_git(&["rebase", "-q", "main"]);
    assert_ne!(done_commit(&repo), before, "the branch was rebased");
    assert_fails(&repo, &["orbit/test-goal"], "INTEGRITY_MISMATCH");
    assert_fails(&repo, &[], "INTEGRITY_MISMATCH");
}

#[test]
fn an_edited_check_script_is_checks_changed() {
    let repo = Repo::new();
    done_loop(&repo);
    fs::write(repo.ws().join("check.sh"), "true\n").unwrap();
    repo.ws_git(&["commit", "-qam", "an easier check"]);
    assert_fails(&repo, &["orbit/test-goal"], "CHECKS_CHANGED");
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 3, "merge refuses");
    assert!(text(&out).contains("CHECKS_CHANGED"), "{}", text(&out));
}

/// Writes `content` as the DONE commit's note, as a forger would.
fn forge_note(repo: &Repo, commit: &str, content: &str) {
    let f = repo.bin.path().join("forged.json");
    fs::write(&f, content).unwrap();
    repo.git(&[
        "notes",
        "--ref=orbit",
        "add",
        "-f",
        "-F",
        f.to_str().unwrap(),
        commit,
    ]);
}

#[test]
fn a_forged_note_is_refused() {
    let repo = Repo::new();
    let dir = done_loop(&repo);
    let commit = done_commit(&repo);
    let real = note(&repo, &commit);
    // Without the loop directory, the note is all the receiver has.
    fs::rename(&dir, repo.bin.path().join("loop-away")).unwrap();
    let (rc, _) = verify(&repo, &[&commit]);
    assert_eq!(rc, 0, "the real note verifies on its own");
    // An edited note whose digest was not recomputed.
    let edited = real.replace("\"pass_k\":2", "\"pass_k\":1");
    assert_ne!(edited, real);
    forge_note(&repo, &commit, &edited);
    assert_fails(&repo, &[&commit], "ENVELOPE_CORRUPT");
    // A truncated one.
    forge_note(&repo, &commit, &real[..real.len() / 2]);
    assert_fails(&repo, &[&commit], "ENVELOPE_CORRUPT");
    // One resealed with its digest recomputed: the loop's journal recorded another digest.
    let line = edited.trim_end();
    let at = line.rfind(",\"digest\":").unwrap();
    let resealed = orbit::envelope::seal(&format!("{}}}", &line[..at]));
    assert!(
        orbit::envelope::parse(resealed.as_bytes()).is_ok(),
        "the forgery parses"
    );
    forge_note(&repo, &commit, &resealed);
    fs::rename(repo.bin.path().join("loop-away"), &dir).unwrap();
    fs::remove_file(dir.join("envelope.json")).unwrap();
    assert_fails(&repo, &[&commit], "INTEGRITY_MISMATCH");
}

#[test]
fn rerun_fails_when_the_code_no_longer_passes() {
    let repo = Repo::new();
    done_loop(&repo);
    let out = repo.orbit(&["verify", "--rerun"]);
    assert_code(&out, 0, "the checks pass again in a clean checkout");
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["verify", "--rerun", "--json"])
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("BREAK_IT", "1");
    let out = run_bounded(cmd, std::time::Duration::from_secs(120));
    assert_code(&out, 3, "the checks fail where they run now");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verify_failure_code"], "RERUN_FAILED", "{v}");
}

fn git_in(dir: &Path, args: &[&str]) -> Output {
    let out = command("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
    out
}

#[test]
fn a_fresh_clone_with_the_notes_verifies_without_the_loop_directory() {
    let repo = Repo::new();
    done_loop(&repo);
    let commit = done_commit(&repo);
    let clone = tempfile::tempdir().unwrap();
    let dst = clone.path().join("c");
    git_in(
        clone.path(),
        &["clone", "-q", repo.path().to_str().unwrap(), "c"],
    );
    git_in(
        &dst,
        &["fetch", "-q", "origin", "refs/notes/*:refs/notes/*"],
    );
    assert!(
        !dst.join(".orbit/test-goal").exists(),
        "the loop directory stayed behind"
    );
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["verify", "--json", "origin/orbit/test-goal"])
        .current_dir(&dst);
    let out = run_bounded(cmd, std::time::Duration::from_secs(60));
    assert_code(&out, 0, "the clone verifies");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["commit"], commit.as_str());
    // Its answer is in the receiver's log.
    let log = fs::read(dst.join(".git/orbit/verify.jsonl")).unwrap();
    let j = orbit::events::read(&log);
    assert_eq!(j.error, None);
    assert_eq!(j.events.len(), 1);
    assert_eq!(j.events[0].event, "verify_pass");
}

#[test]
fn merge_needs_the_starting_branch_and_clean_touched_files_then_merges() {
    let repo = Repo::new();
    done_loop(&repo);
    let commit = done_commit(&repo);
    repo.git(&["switch", "-q", "-c", "elsewhere"]);
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 2, "not on the starting branch");
    assert!(text(&out).contains("git switch main"), "{}", text(&out));
    repo.git(&["switch", "-q", "main"]);
    // A tracked file the merge touches, changed and uncommitted.
    repo.write("log.txt", "mine\n");
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 2, "uncommitted changes the merge would touch");
    assert!(text(&out).contains("log.txt"), "{}", text(&out));
    repo.git(&["checkout", "--", "log.txt"]);
    // Untracked files (the loop directory, a scratch file) are no obstacle.
    repo.write("scratch.txt", "mine\n");
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 0, "the verified branch merges");
    assert_eq!(
        repo.git(&["rev-parse", "main"]).trim(),
        commit,
        "fast-forward"
    );
}

/// The verify events `orbit verify` wrote (verify_pass, verify_fail by orbit verify) in the
/// loop's journal.
fn verify_events(dir: &Path) -> usize {
    let journal = orbit::events::read(&fs::read(dir.join("events.jsonl")).unwrap());
    journal
        .events
        .iter()
        .filter(|ev| ev.event == "verify_pass" || ev.event == "verify_fail")
        .filter(|ev| ev.value["by"] == "orbit verify")
        .count()
}

#[test]
fn the_report_shows_the_envelopes_digest_and_verdict_and_says_orbit_merge_next() {
    let repo = Repo::new();
    let dir = done_loop(&repo);
    let bytes = fs::read_to_string(dir.join("envelope.json")).unwrap();
    let e = orbit::envelope::parse(bytes.as_bytes()).unwrap();
    let line = format!("envelope sha256:{} (verified)", e.digest);
    let md = text(&repo.orbit(&["report"]));
    assert!(md.contains(&format!("- {line}\n")), "{md}");
    assert!(md.contains("next: `orbit merge .orbit/test-goal`"), "{md}");
    let html = text(&repo.orbit(&["report", "--html"]));
    assert!(html.contains(&line), "{html}");
    assert!(
        html.contains("<code class=\"next\">orbit merge .orbit/test-goal</code>"),
        "{html}"
    );
    let out = repo.orbit(&["report", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["envelope_digest"], e.digest.as_str(), "{v}");
    assert_eq!(v["envelope_verdict"], "verified", "{v}");
    assert_eq!(v["next"], "orbit merge .orbit/test-goal", "{v}");
    // The report computes the verdict as orbit verify does, but journals nothing.
    assert_eq!(
        verify_events(&dir),
        0,
        "the report journaled a verify event"
    );
    // A commit after DONE: the report says the code, and orbit verify is next.
    fs::write(repo.ws().join("later.txt"), "not verified\n").unwrap();
    repo.ws_git(&["add", "later.txt"]);
    repo.ws_git(&["commit", "-qm", "after DONE"]);
    let md = text(&repo.orbit(&["report"]));
    assert!(
        md.contains(&format!("- envelope sha256:{} (TREE_MOVED)", e.digest)),
        "{md}"
    );
    assert!(!md.contains("next: `orbit merge"), "{md}");
    let out = repo.orbit(&["report", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["envelope_verdict"], "TREE_MOVED", "{v}");
    assert_eq!(
        verify_events(&dir),
        0,
        "the report journaled a verify event"
    );
    // Without any envelope (a loop from before envelopes): UNVERIFIED, no digest.
    fs::remove_file(dir.join("envelope.json")).unwrap();
    repo.git(&["update-ref", "-d", "refs/notes/orbit"]);
    let md = text(&repo.orbit(&["report"]));
    assert!(md.contains("- envelope none (UNVERIFIED)"), "{md}");
    let out = repo.orbit(&["report", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["envelope_verdict"], "UNVERIFIED", "{v}");
    assert!(v["envelope_digest"].is_null(), "{v}");
    // The count above sees what orbit verify journals.
    assert_code(&repo.orbit(&["verify"]), 3, "UNVERIFIED");
    assert_eq!(verify_events(&dir), 1, "orbit verify journals its answer");
}

/// Strips a DONE loop's envelope as a loop from before envelopes has none: no
/// envelope.json, no note, no envelope_write in its journal.
fn strip_envelope(repo: &Repo, dir: &Path) {
    fs::remove_file(dir.join("envelope.json")).unwrap();
    repo.git(&["update-ref", "-d", "refs/notes/orbit"]);
    crate::support::rewrite_events(dir, |lines| {
        lines.retain(|l| !l.contains("\"event\":\"envelope_write\""));
    });
}

#[test]
fn rerun_record_gives_a_loop_from_before_envelopes_its_envelope_and_merge_then_takes_it() {
    let repo = Repo::new();
    let dir = done_loop(&repo);
    let commit = done_commit(&repo);
    strip_envelope(&repo, &dir);
    let out = repo.orbit(&["verify"]);
    assert_code(&out, 3, "no envelope");
    assert!(text(&out).contains("UNVERIFIED"), "{}", text(&out));
    assert!(
        text(&out).contains("orbit verify --rerun --record"),
        "the UNVERIFIED answer names the command: {}",
        text(&out)
    );
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 3, "merge refuses until then");
    assert!(text(&out).contains("UNVERIFIED"), "{}", text(&out));
    let out = repo.orbit(&["verify", "--record"]);
    assert_code(&out, 2, "--record needs --rerun");
    let out = repo.orbit(&["verify", "--rerun", "--record"]);
    assert_code(&out, 0, "every check passes PASS_K times: recorded");
    let bytes = fs::read_to_string(dir.join("envelope.json")).unwrap();
    assert_eq!(
        note(&repo, &commit),
        bytes,
        "the note holds envelope.json's bytes"
    );
    let e = orbit::envelope::parse(bytes.as_bytes()).expect("the envelope parses");
    assert_eq!(e.commit.as_deref(), Some(commit.as_str()));
    assert_eq!(e.pass_k, 2);
    let check = &e.checks[0];
    assert_eq!(check.command, "bash check.sh");
    assert_eq!(check.passes, Some(2));
    let script = check.files.iter().find(|f| f.path == "check.sh").unwrap();
    assert_eq!(script.sha256, orbit::fsx::sha256_hex(CHECK_SH.as_bytes()));
    let raw: serde_json::Value = serde_json::from_str(&bytes).unwrap();
    assert!(raw["judge"].is_null() && raw["confirm"].is_null(), "{raw}");
    let writes = crate::support::events_named(&dir, "envelope_write");
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].value["digest"], e.digest.as_str());
    assert_eq!(writes[0].value["by"], "orbit verify --record");
    let (rc, v) = verify(&repo, &[]);
    assert_eq!(rc, 0, "{v}");
    let out = repo.orbit(&["verify", "--rerun", "--record"]);
    assert_code(&out, 2, "an envelope is there already: nothing to record");
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 0, "the recorded hand-off merges");
    assert_eq!(repo.git(&["rev-parse", "main"]).trim(), commit);
}

#[test]
fn rerun_record_writes_nothing_when_the_code_no_longer_passes() {
    let repo = Repo::new();
    let dir = done_loop(&repo);
    strip_envelope(&repo, &dir);
    let before = fs::read(dir.join("events.jsonl")).unwrap();
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["verify", "--rerun", "--record"])
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("BREAK_IT", "1");
    let out = run_bounded(cmd, std::time::Duration::from_secs(120));
    assert_code(&out, 3, "the checks fail where they run now");
    assert!(text(&out).contains("RERUN_FAILED"), "{}", text(&out));
    assert!(text(&out).contains("nothing recorded"), "{}", text(&out));
    assert!(!dir.join("envelope.json").exists(), "no envelope written");
    assert!(
        repo.git(&["notes", "--ref=orbit", "list"])
            .trim()
            .is_empty(),
        "no note written"
    );
    let after = fs::read(dir.join("events.jsonl")).unwrap();
    assert!(
        after.starts_with(&before),
        "the journal only grew (the verify_fail)"
    );
    assert!(crate::support::events_named(&dir, "envelope_write").is_empty());
    assert_code(&repo.orbit(&["merge"]), 3, "merge still refuses");
}

#[test]
fn a_done_whose_iteration_commits_nothing_is_bound_to_the_head_that_holds_its_tree() {
    // The first claim is rejected (the check passes, then fails once: a flake), so the
    // iteration's change is committed as CONTINUE; the second claim changes nothing, so its
    // iteration has nothing to commit (commit.txt `none`): HEAD already holds the verified
    // tree. The envelope, its note and the report-mode measure bind to that HEAD.
    let repo = Repo::new();
    let seen = repo.bin.path().join("seen");
    let flaked = repo.bin.path().join("flaked");
    let agent = repo.agent(
        "worker",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
[ -f work.txt ] || printf 'x = 1\n' > work.txt
echo "every check holds" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let check = format!(
        "test -f work.txt && {{ test -f '{f}' || {{ test -f '{s}' && touch '{f}' && exit 1; touch '{s}'; }}; }}",
        f = flaked.display(),
        s = seen.display()
    );
    let dir = repo.init_loop(&agent, &[&check], &["--adequacy", "report"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE at the second claim");
    assert!(flaked.is_file(), "the first claim met the flake");
    let rejected = crate::support::events_named(&dir, "done_rejected");
    assert_eq!(rejected.len(), 1, "{}", text(&out));
    assert_eq!(rejected[0].iteration, 1);
    let first = fs::read_to_string(dir.join("iterations/000001/commit.txt")).unwrap();
    assert!(
        first.trim().len() >= 40,
        "iteration 1 committed its change: {first}"
    );
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000002/commit.txt")).unwrap(),
        "none\n",
        "the DONE iteration had nothing to commit"
    );
    let head = done_commit(&repo);
    assert_eq!(
        head,
        first.trim(),
        "the branch's head is iteration 1's commit"
    );
    let bytes = fs::read_to_string(dir.join("envelope.json")).unwrap();
    let e = orbit::envelope::parse(bytes.as_bytes()).expect("the envelope parses");
    assert_eq!(e.commit.as_deref(), Some(head.as_str()), "{bytes}");
    assert_eq!(note(&repo, &head), bytes, "the note is on the head");
    let (rc, v) = verify(&repo, &[]);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["verdict"], "pass");
    let measured = crate::support::events_named(&dir, "adequacy_measured");
    assert_eq!(measured.len(), 1, "{measured:?}");
    assert_eq!(measured[0].value["mode"], "report");
    assert_eq!(measured[0].value["commit"], head.as_str());
}
