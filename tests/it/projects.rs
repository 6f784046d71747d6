//! Real projects, one per ecosystem, each looped to DONE offline with a fake agent that makes
//! a real fix: a Node project with a lockfile (`npm ci`). Each project is made from the
//! files under `tests/fixtures/projects/`, and carries the trap a fresh checkout inside the
//! user's own checkout falls into: the user's `node_modules` one directory up.

use crate::support::*;
use std::fs;
use std::path::{Path, PathBuf};

/// A project's files as shipped, under `tests/fixtures/projects/`.
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/projects")
        .join(name)
}

/// Copies the directory `from` into `to`, recursively (files and directories only).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A repository holding the fixture project `name`, committed on main.
fn project_repo(name: &str) -> Repo {
    let repo = Repo::new();
    copy_tree(&fixture(name), repo.path());
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", &format!("the {name} project")]);
    repo
}

/// The files the loop's branch holds.
fn branch_files(repo: &Repo) -> Vec<String> {
    repo.git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// What a loop that reached DONE in one iteration says of its setup: it ran in the
/// workspace (iterations/baseline/setup.log, a setup_done event) and in the clean checkout
/// of the claim (the iteration's setup.log), and passed in both.
fn assert_set_up_in_both(repo: &Repo, dir: &Path) {
    let ws = repo.ws().display().to_string();
    let base = read(&dir.join("iterations/baseline/setup.log"));
    assert!(
        base.contains(&format!("### setup of {ws} (")) && base.contains("[PASS] setup"),
        "the workspace was set up: {base}"
    );
    let clean = read(&dir.join("iterations/000001/setup.log"));
    assert!(
        clean.contains(&format!("### setup of {ws}.clean (")) && clean.contains("[PASS] setup"),
        "the clean checkout was set up: {clean}"
    );
    let done = events_named(dir, "setup_done");
    assert!(
        done.iter()
            .any(|e| e.value["where"].as_str() == Some("workspace")),
        "a setup_done for the workspace: {done:?}"
    );
    assert!(events_named(dir, "setup_fail").is_empty());
}

// ---- Node: package.json and package-lock.json, a dependency installed by `npm ci`

/// Whether node (with its test runner) and npm are here. CI sets ORBIT_REQUIRE_NODE=1 to
/// make them mandatory (.ci/run installs npm); elsewhere the Node project is skipped with a
/// notice.
fn node_available() -> bool {
    let ok = ["node", "npm"].iter().all(|tool| {
        command(tool)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    });
    present_or_skipped(ok, "ORBIT_REQUIRE_NODE", "node and npm")
}

/// The Node project (its dependency `greet` 2.0.0 is a `file:` package in the repository,
/// so `npm ci` installs it with no registry), with the trap: the user's own checkout has a
/// `node_modules` (ignored) holding greet 1.4.2, whose greeting the tests do not accept.
/// The workspace is inside the user's checkout, so a `require('greet')` there that finds no
/// `node_modules` of its own walks up to the user's.
fn node_project() -> Repo {
    let repo = project_repo("node");
    copy_tree(
        &fixture("node-stale-greet"),
        &repo.join("node_modules/greet"),
    );
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "the user's node_modules is ignored"
    );
    repo
}

/// The fix: the typed name without the spaces around it.
const NODE_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
cat > src/welcome.js <<'EOF'
'use strict';

const { greet } = require('greet');

// The greeting for a name as the user typed it, without the spaces around it.
exports.welcome = (typed) => greet(typed.trim());
EOF
echo "npm test passes: welcome() trims the typed name" > "$ORBIT_AGENT_DIR/done.md""#;

const NPM_SETUP: &str = "npm ci --offline --no-audit --no-fund --no-update-notifier";

#[test]
fn a_node_project_with_a_lockfile_is_set_up_by_npm_ci_offline_and_its_checks_use_its_own_modules() {
    if !node_available() {
        return;
    }
    let repo = node_project();
    let agent = repo.agent("fixer", NODE_AGENT);
    let dir = repo.init_loop(&agent, &["npm test"], &["--setup", NPM_SETUP]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE");
    assert_set_up_in_both(&repo, &dir);
    // The red start was for the bug, with greet 2.0.0: the first test passed, the spaces
    // failed, and the user's 1.4.2 ("Hi Ada") answered nothing.
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("ok 1 - greets by name")
            && base.contains("not ok 2 - ignores the spaces around the typed name")
            && !base.contains("Hi Ada"),
        "the red gate ran on the workspace's own greet: {base}"
    );
    let log = read(&dir.join("iterations/000001/verify.log"));
    assert!(
        log.contains("### verify run: in a clean checkout of the tree to commit")
            && log.contains("# pass 2")
            && !log.contains("Hi Ada"),
        "{log}"
    );
    // Each checkout's greet is its own, a link npm made to its own vendor/greet.
    assert_eq!(
        fs::canonicalize(repo.ws().join("node_modules/greet")).unwrap(),
        fs::canonicalize(repo.ws().join("vendor/greet")).unwrap()
    );
    // The fix is on the branch; node_modules, in the workspace and in the clean checkout
    // of the claim, is in no commit.
    let welcome = repo.git(&["show", "orbit/test-goal:src/welcome.js"]);
    assert!(welcome.contains("greet(typed.trim())"), "{welcome}");
    let files = branch_files(&repo);
    assert!(
        !files.iter().any(|f| f.contains("node_modules")),
        "what npm ci made is never committed: {files:?}"
    );
    let all = repo.git(&["log", "--name-only", "--format=", "main..orbit/test-goal"]);
    assert_eq!(all.trim(), "src/welcome.js", "the loop's commits");
    // The user's node_modules is as it was.
    assert!(read(&repo.join("node_modules/greet/package.json")).contains("\"1.4.2\""));
    assert_records_agree(&dir);
}

#[test]
fn without_the_setup_the_node_projects_checks_find_the_users_stale_node_modules() {
    if !node_available() {
        return;
    }
    // The trap the setup guards against: the same project, agent and fix, no setup. The
    // workspace has no node_modules of its own, so node resolves greet from the user's
    // checkout above it (1.4.2), and the real fix fails.
    let repo = node_project();
    let agent = repo.agent("fixer", NODE_AGENT);
    let dir = repo.init_loop(&agent, &["npm test"], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    assert_code(&out, 16, "never DONE on the user's greet");
    assert!(
        repo.ws_read("src/welcome.js")
            .contains("greet(typed.trim())"),
        "the fix was made"
    );
    let log = read(&dir.join("iterations/000001/verify.log"));
    assert!(
        log.contains("not ok 1 - greets by name") && log.contains("'Hi Ada'"),
        "the checks ran the user's greet 1.4.2: {log}"
    );
    assert!(!repo.ws().join("node_modules").exists());
}
