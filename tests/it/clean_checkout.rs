//! The DONE gate's clean checkout is kept from claim to claim and moved to each claim's tree
//! (only the files that differ are written). Each test is a hostile earlier claim: its
//! checks (or a run with the sandbox off) leave something in that checkout — an ignored
//! file, a hidden index entry, a symlink, a mode, a git configuration or a hook of that
//! worktree, a `.git` of its own — so that a later claim passes there on a tree that does not
//! hold what its checks need. Each proves the plant was really made, then that the later
//! claim's last pass ran on the tree alone (the plant gone, or the checkout made afresh).

use crate::support::*;
use std::fs;
use std::path::{Path, PathBuf};

/// The check of every test: it passes on `tracked.txt` saying yes (the tree's answer), or
/// on `needed.txt` saying yes (git ignores it: the branch never holds it).
const CHECK: &str = "grep -qx yes tracked.txt || grep -qx yes needed.txt";

/// The agent: each iteration it writes the ignored `needed.txt` (so the checks pass in the
/// workspace), one line more of `work.txt`, and claims DONE; from iteration `fix_at` on it
/// also writes the tree's answer into `tracked.txt`.
fn claimer(repo: &Repo, fix_at: u32) -> PathBuf {
    repo.agent(
        "claimer",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo yes > needed.txt
echo "step $ORBIT_ITERATION" >> work.txt
if test "$ORBIT_ITERATION" -ge {fix_at}; then echo yes > tracked.txt; fi
echo "the checks pass" > "$ORBIT_AGENT_DIR/done.md""#
        ),
    )
}

/// A repository whose tree ignores `needed.txt` and holds `tracked.txt` saying no.
fn repo_with_answer() -> Repo {
    let repo = Repo::new();
    repo.write(".gitignore", "needed.txt\ncache/\n");
    repo.write("tracked.txt", "no\n");
    repo.git(&["add", ".gitignore", "tracked.txt"]);
    repo.git(&["commit", "-q", "-m", "the answer is no"]);
    repo
}

fn verify_log(dir: &Path, n: u32) -> String {
    fs::read_to_string(dir.join(format!("iterations/{n:06}/verify.log"))).unwrap_or_default()
}

/// The part of a verify.log that the clean checkout's first run wrote.
fn clean_section(log: &str) -> &str {
    let head = "### verify run: in a clean checkout of the tree to commit";
    let Some(at) = log.find(head) else {
        return "";
    };
    let rest = &log[at + head.len()..];
    &rest[..rest.find("### verify run:").unwrap_or(rest.len())]
}

/// The clean checkout's git directory (what its `.git` file names).
fn clean_gitdir(repo: &Repo) -> PathBuf {
    let line = fs::read_to_string(repo.ws_sibling(".clean").join(".git")).unwrap();
    PathBuf::from(line.trim().strip_prefix("gitdir: ").unwrap())
}

/// The first claim (a `--once` tick): it passes in the workspace and fails in the clean
/// checkout, which stays for the next claim.
fn first_claim_fails_in_the_clean_checkout(repo: &Repo, dir: &Path) {
    let out = repo.run_loop(dir, &["--once"], &[]);
    assert_code(&out, 10, "the first claim is not DONE");
    let clean = clean_section(&verify_log(dir, 1)).to_string();
    assert!(clean.contains("0 passed, 1 failed"), "{clean}");
    assert!(
        repo.ws_sibling(".clean").join(".git").exists(),
        "the clean checkout stays for the next claim"
    );
    // Made for the first time, it had nothing to remove first: no error of git's is logged.
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(!log.contains("fatal:"), "{log}");
}

/// The second claim (a `--once` tick) on a tree that still lacks the answer: not DONE, its
/// last pass failed in the clean checkout.
fn second_claim_is_not_done(repo: &Repo, dir: &Path) {
    let out = repo.run_loop(dir, &["--once"], &[]);
    let clean = clean_section(&verify_log(dir, 2)).to_string();
    assert!(
        clean.contains("0 passed, 1 failed"),
        "the plant made the clean checkout's run pass: {clean}\n{}",
        text(&out)
    );
    assert_code(&out, 10, "the second claim is not DONE");
    assert_eq!(
        repo.git(&["show", "orbit/test-goal:tracked.txt"]),
        "no\n",
        "the branch never held the answer"
    );
}

#[test]
fn an_ignored_file_an_earlier_claims_sandboxed_checks_left_in_the_clean_checkout_never_makes_a_later_claim_done()
 {
    if !bwrap_available() {
        return;
    }
    let repo = repo_with_answer();
    let agent = claimer(&repo, 99);
    // The project's checks (the agent's code) plant in the clean checkout, where their
    // sandbox lets them write: an ignored file and an ignored directory.
    let check = format!(
        "{CHECK}; r=$?; case $PWD in *.clean) echo yes > needed.txt; mkdir -p cache; echo yes > cache/hit; echo planted;; esac; exit $r"
    );
    let dir = repo.init_loop(&agent, &[&check], &["--sandbox", "bwrap"]);
    first_claim_fails_in_the_clean_checkout(&repo, &dir);
    // The attack was made: the plant is in the clean checkout after the first claim.
    let cws = repo.ws_sibling(".clean");
    assert_eq!(fs::read_to_string(cws.join("needed.txt")).unwrap(), "yes\n");
    assert!(cws.join("cache/hit").is_file());
    second_claim_is_not_done(&repo, &dir);
}

#[test]
fn a_tracked_file_hidden_by_a_skip_worktree_bit_in_the_clean_checkouts_own_index_is_written_again()
{
    let repo = repo_with_answer();
    let agent = claimer(&repo, 99);
    let dir = repo.init_loop(&agent, &[CHECK], &[]);
    first_claim_fails_in_the_clean_checkout(&repo, &dir);
    // A run with the sandbox off (or one that outlived its run) writes the answer into the
    // clean checkout and hides the change from git in that worktree's own index.
    let cws = repo.ws_sibling(".clean");
    let git = |args: &[&str]| {
        let out = command("git")
            .arg("-C")
            .arg(&cws)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["update-index", "--skip-worktree", "tracked.txt"]);
    fs::write(cws.join("tracked.txt"), "yes\n").unwrap();
    assert!(git(&["ls-files", "-t", "tracked.txt"]).starts_with("S "));
    assert_eq!(
        git(&["diff", "--name-only"]),
        "",
        "git sees nothing changed"
    );
    second_claim_is_not_done(&repo, &dir);
}

#[test]
fn a_symlink_or_a_mode_planted_over_a_tracked_file_of_the_clean_checkout_is_written_again() {
    let repo = repo_with_answer();
    let agent = claimer(&repo, 99);
    let check = format!("{CHECK} || test -x tracked.txt");
    let dir = repo.init_loop(&agent, &[&check], &[]);
    first_claim_fails_in_the_clean_checkout(&repo, &dir);
    let cws = repo.ws_sibling(".clean");
    let outside = repo.bin.path().join("answer");
    fs::write(&outside, "yes\n").unwrap();
    fs::remove_file(cws.join("tracked.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, cws.join("tracked.txt")).unwrap();
    assert_eq!(
        fs::read_to_string(cws.join("tracked.txt")).unwrap(),
        "yes\n"
    );
    second_claim_is_not_done(&repo, &dir);
    assert!(
        !fs::symlink_metadata(cws.join("tracked.txt"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the symlink went"
    );
    // Then a mode: the tracked file made executable passes the check.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(cws.join("tracked.txt"), fs::Permissions::from_mode(0o755)).unwrap();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let clean = clean_section(&verify_log(&dir, 3)).to_string();
    assert!(
        clean.contains("0 passed, 1 failed"),
        "{clean}\n{}",
        text(&out)
    );
    assert_code(&out, 10, "the third claim is not DONE");
}

#[test]
fn a_git_configuration_and_a_hook_planted_in_the_clean_checkouts_git_directory_throw_it_away() {
    let repo = repo_with_answer();
    // The user's repository reads a worktree's own configuration (sparse-checkout users).
    repo.git(&["config", "extensions.worktreeConfig", "true"]);
    let agent = claimer(&repo, 99);
    let dir = repo.init_loop(&agent, &[CHECK], &[]);
    first_claim_fails_in_the_clean_checkout(&repo, &dir);
    let cws = repo.ws_sibling(".clean");
    let gd = clean_gitdir(&repo);
    // That worktree's configuration makes tracked.txt sparse (git never writes it again),
    // its hooks directory holds a hook; the answer is written into the checkout.
    fs::write(
        gd.join("config.worktree"),
        "[core]\n\tsparseCheckout = true\n",
    )
    .unwrap();
    fs::create_dir_all(gd.join("info")).unwrap();
    fs::write(gd.join("info/sparse-checkout"), "/*\n!/tracked.txt\n").unwrap();
    fs::create_dir_all(gd.join("hooks")).unwrap();
    fs::write(gd.join("hooks/post-checkout"), "#!/bin/sh\nexit 0\n").unwrap();
    fs::write(cws.join("tracked.txt"), "yes\n").unwrap();
    let out = command("git")
        .arg("-C")
        .arg(&cws)
        .args(["config", "core.sparseCheckout"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "true",
        "git reads the worktree's configuration"
    );
    second_claim_is_not_done(&repo, &dir);
    let now = clean_gitdir(&repo);
    for planted in [
        "config.worktree",
        "info/sparse-checkout",
        "hooks/post-checkout",
    ] {
        assert!(
            !now.join(planted).exists(),
            "{planted} is gone with the checkout that held it"
        );
    }
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("made afresh"),
        "the runner says the checkout was made afresh: {log}"
    );
}

/// A check with CHECK's verdict that, in the clean checkout's first run only (`once` marks
/// it made), replaces the checkout's .git with a repository of its own, `plant` (shell, run
/// in the checkout) then sets that repository up, and `planted` is said.
fn check_planting_a_repository(once: &Path, plant: &str) -> String {
    format!(
        "{CHECK}; r=$?; case $PWD in *.clean) if ! test -e {o}; then touch {o}; rm -f .git; git init -q . && {plant} && echo planted; fi;; esac; exit $r",
        o = once.display()
    )
}

#[test]
fn a_dot_git_a_check_put_in_the_clean_checkout_is_never_obeyed_and_the_checkout_is_made_afresh() {
    let repo = repo_with_answer();
    // From the second iteration the agent writes the answer: that claim is DONE.
    let agent = claimer(&repo, 2);
    let marker = repo.bin.path().join("obeyed");
    let once = repo.bin.path().join("planted-once");
    // With the sandbox off, the first claim's checks in the clean checkout replace its .git
    // with a repository of their own whose configuration names a program git runs (an
    // fsmonitor that marks it ran, outside every checkout).
    let check = check_planting_a_repository(
        &once,
        &format!(
            "printf '#!/bin/sh\\ntouch {m}\\n' > .git/spy && chmod +x .git/spy && git config core.fsmonitor \"$PWD/.git/spy\"",
            m = marker.display()
        ),
    );
    let dir = repo.init_loop(&agent, &[&check], &[]);
    first_claim_fails_in_the_clean_checkout(&repo, &dir);
    let cws = repo.ws_sibling(".clean");
    assert!(
        cws.join(".git").is_dir(),
        "the attack was made: the clean checkout's .git is a repository of the checks'"
    );
    assert!(
        !marker.exists(),
        "the runner's git never ran the plant's program"
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(
        !marker.exists(),
        "the runner's git never ran the plant's program"
    );
    assert_code(&out, 0, "the second claim holds the answer: DONE");
    assert_eq!(repo.git(&["show", "orbit/test-goal:tracked.txt"]), "yes\n");
}

/// A check in the clean checkout that swaps its `.git` for a repository of its own whose
/// configuration names a clean filter for every file (and leaves a new file for git to read
/// through it): the runner's look at what the checks changed runs git with the checkout's
/// proven git directory, never the one found there, so no program of the plant's runs as the
/// runner, and that look works: nothing of git's fails in runner.log. (With the sandbox off:
/// under it the checks cannot replace .git, which is bound read-only.)
#[test]
fn a_dot_git_with_a_clean_filter_a_check_put_in_the_clean_checkout_never_runs_it() {
    let repo = repo_with_answer();
    let agent = claimer(&repo, 2);
    let marker = repo.bin.path().join("filtered");
    let once = repo.bin.path().join("planted-once");
    let check = check_planting_a_repository(
        &once,
        &format!(
            "printf '#!/bin/sh\\ntouch {m}\\ncat\\n' > .git/spy && chmod +x .git/spy && git config filter.spy.clean \"$PWD/.git/spy\" && echo '* filter=spy' > .git/info/attributes && echo new > made-by-check.txt",
            m = marker.display()
        ),
    );
    let dir = repo.init_loop(&agent, &[&check], &[]);
    first_claim_fails_in_the_clean_checkout(&repo, &dir);
    let cws = repo.ws_sibling(".clean");
    assert!(
        cws.join(".git/spy").is_file() && verify_log(&dir, 1).contains("planted"),
        "the attack was made: the clean checkout's .git is a repository of the checks' with a filter"
    );
    assert!(
        !marker.exists(),
        "the runner's git never ran the plant's filter"
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(
        !marker.exists(),
        "the runner's git never ran the plant's filter"
    );
    assert_code(&out, 0, "the second claim holds the answer: DONE");
}

#[test]
fn a_clean_checkout_deleted_by_hand_is_made_again_and_git_keeps_no_stale_worktree() {
    let repo = repo_with_answer();
    let agent = claimer(&repo, 2);
    let dir = repo.init_loop(&agent, &[CHECK], &[]);
    first_claim_fails_in_the_clean_checkout(&repo, &dir);
    let cws = repo.ws_sibling(".clean");
    fs::remove_dir_all(&cws).unwrap();
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(
        listed.contains(&format!("worktree {}", cws.display())),
        "git still lists the deleted checkout (locked): {listed}"
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 0, "DONE: the checkout is made again");
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(
        !listed.contains(&format!("worktree {}", cws.display())),
        "the DONE loop's clean checkout is gone, from git's list too: {listed}"
    );
    repo.git(&["worktree", "prune"]);
    let names: Vec<_> = fs::read_dir(repo.join(".git/worktrees"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["test-goal".to_string()],
        "only the workspace is left"
    );
}

#[test]
fn the_clean_checkout_is_moved_to_the_next_claims_tree_writing_only_the_files_that_differ() {
    use std::os::unix::fs::MetadataExt;
    let repo = repo_with_answer();
    repo.write("other.txt", "untouched\n");
    repo.git(&["add", "other.txt"]);
    repo.git(&["commit", "-q", "-m", "another file"]);
    let agent = claimer(&repo, 99);
    let dir = repo.init_loop(&agent, &[CHECK], &[]);
    first_claim_fails_in_the_clean_checkout(&repo, &dir);
    let cws = repo.ws_sibling(".clean");
    // A file written again gets a new inode change time (nanoseconds) and, mostly, a new
    // inode; one left alone keeps both.
    let stamp = |p: &str| {
        let m = fs::metadata(cws.join(p)).unwrap();
        (m.ino(), m.ctime(), m.ctime_nsec())
    };
    let (other, work) = (stamp("other.txt"), stamp("work.txt"));
    second_claim_is_not_done(&repo, &dir);
    assert_eq!(
        stamp("other.txt"),
        other,
        "a file both claims' trees hold alike is not written again"
    );
    assert_ne!(
        stamp("work.txt"),
        work,
        "the file the claim changed is written"
    );
    assert_eq!(
        fs::read_to_string(cws.join("work.txt")).unwrap(),
        "step 1\nstep 2\n"
    );
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(!log.contains("made afresh"), "{log}");
}

/// Another loop of the repository adding a worktree at the same moment can make git fail
/// the clean checkout's add ("fatal: failed to read .git/worktrees/NAME/commondir: Success",
/// seen in a queue of two tasks). A git in front of the real one fails the first add of the
/// clean checkout so: the add is tried again, and the claim is DONE in its own iteration
/// instead of rejected (which would cost an agent run).
#[test]
fn a_clean_checkout_add_that_git_fails_beside_another_is_tried_again() {
    let repo = repo_with_answer();
    let agent = claimer(&repo, 1);
    let dir = repo.init_loop(&agent, &[CHECK], &[]);
    let real = repo.real_git();
    let shim = repo.bin.path().join("git-shim");
    let marks = repo.bin.path().join("git-marks");
    fs::create_dir_all(&shim).unwrap();
    fs::create_dir_all(&marks).unwrap();
    let m = marks.display();
    fs::write(
        shim.join("git"),
        format!(
            "#!/bin/bash\n\
             if [[ \" $* \" == *' worktree add '*'(clean checkout)'* ]] && mkdir {m}/failed 2>/dev/null; then\n\
               echo 'fatal: failed to read .git/worktrees/other-a1.clean/commondir: Success' >&2\n\
               exit 128\n\
             fi\n\
             exec {real} \"$@\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(shim.join("git"), fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", shim.display(), repo.path_env());
    let out = repo.run_loop(&dir, &[], &[("PATH", &path), ("MAX_ITERATIONS", "3")]);
    assert!(
        marks.join("failed").is_dir(),
        "the clean checkout's first add failed: {}",
        text(&out)
    );
    assert_code(&out, 0, "DONE, the clean checkout made on a second try");
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("git worktree add of the clean checkout failed (try 1 of 3")
            && log.contains("DONE after 1 iteration(s)"),
        "{log}"
    );
}
