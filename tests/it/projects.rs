//! Real projects, one per ecosystem, each looped to DONE offline with a fake agent that makes
//! a real fix: a Node project with a lockfile (`npm ci`), a Python src-layout package in a
//! virtual environment with an editable install, and a Rust crate whose path dependency is a
//! git submodule. Each project is made from the files under `tests/fixtures/projects/`, and
//! each carries the trap a fresh checkout inside the user's own checkout (where
//! `--workspace` may put the workspace; by default it is outside) falls into: the
//! user's `node_modules` one directory up, the user's venv with the user's copy of the
//! package installed, a submodule whose origin is gone.
//!
//! A submodule's checkout in a work tree of the loop holds its own git directory, the agent's
//! and the checks' to write: the last tests show that the runner's git never obeys what was
//! planted there (a filter), in the workspace, the clean checkout or after a setup.

use crate::support::*;
use std::fs;
use std::path::{Path, PathBuf};

/// A project's files as shipped, under `tests/fixtures/projects/`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/projects")
        .join(name)
}

/// Copies the directory `from` into `to`, recursively (files and directories only).
pub(crate) fn copy_tree(from: &Path, to: &Path) {
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
pub(crate) fn project_repo(name: &str) -> Repo {
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

pub(crate) fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// What a loop that reached DONE in one iteration says of its setup: it ran in the
/// workspace (iterations/baseline/setup.log, a setup_done event) and in the clean checkout
/// of the claim (the iteration's setup.log), and passed in both.
pub(crate) fn assert_set_up_in_both(repo: &Repo, dir: &Path) {
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

/// A loop that ran its agents, checks and the setups after the first under bubblewrap.
pub(crate) fn assert_sandboxed(dir: &Path) {
    let log = read(&dir.join("runner.log"));
    assert!(
        log.contains("sandbox: every agent and check runs under bubblewrap"),
        "{log}"
    );
}

// ---- Node: package.json and package-lock.json, a dependency installed by `npm ci`

/// Whether node (with its test runner) and npm are here. CI sets ORBIT_REQUIRE_NODE=1 to
/// make them mandatory (.ci/run installs npm); elsewhere the Node project is skipped with a
/// notice.
pub(crate) fn node_available() -> bool {
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
/// A workspace inside the user's checkout that has no `node_modules` of its own resolves
/// `require('greet')` from the user's, above it.
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
    if node_available() {
        node_loop(&[]);
    }
}

#[test]
fn under_the_sandbox_the_node_projects_clean_checkout_installs_and_tests_with_no_network() {
    // The clean checkout's npm ci and npm test run as checks do: under bubblewrap, no
    // network, HOME read-only (npm's cache in the run's private /tmp).
    if node_available() && bwrap_available() {
        let (_repo, dir) = node_loop(&["--sandbox", "bwrap"]);
        assert_sandboxed(&dir);
    }
}

#[test]
fn the_node_projects_clean_checkout_copies_node_modules_from_the_setup_cache() {
    // npm ci keyed by the lockfile and the manifest: the claim's clean checkout takes the
    // untouched tree's node_modules (its link to its own vendor/greet) and npm test passes
    // there.
    if node_available() {
        let (_repo, dir) = node_loop(&[
            "--setup-input",
            "package-lock.json",
            "--setup-input",
            "package.json",
        ]);
        let clean = read(&dir.join("iterations/000001/setup.log"));
        assert!(
            clean.contains("not run, its output on the untouched tree copied from .setup-cache/")
                && !clean.contains("==> setup 1:"),
            "npm ci did not run again: {clean}"
        );
    }
}

/// The Node project looped to DONE with its setup (and the init flags `extra`), and what
/// that proves; the repository and the loop directory, for more.
fn node_loop(extra: &[&str]) -> (Repo, PathBuf) {
    let repo = node_project();
    let agent = repo.agent("fixer", NODE_AGENT);
    let mut flags = vec!["--setup", NPM_SETUP];
    flags.extend_from_slice(extra);
    let dir = repo.init_loop(&agent, &["npm test"], &flags);
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
    (repo, dir)
}

#[test]
fn without_the_setup_a_workspace_in_the_checkout_finds_the_users_node_modules_and_the_default_one_does_not()
 {
    if !node_available() {
        return;
    }
    // The trap of a workspace inside the user's checkout (the default before contract 2.4,
    // and where --workspace still may put it): the same project, agent and fix, no setup.
    // The workspace has no node_modules of its own, so node resolves greet from the user's
    // checkout above it (1.4.2), and the real fix fails on the user's copy.
    let repo = node_project();
    let agent = repo.agent("fixer", NODE_AGENT);
    let inside = repo.join(".orbit/.workspaces/test-goal");
    let dir = repo.init_loop(
        &agent,
        &["npm test"],
        &["--workspace", ".orbit/.workspaces/test-goal"],
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    assert_code(&out, 16, "never DONE on the user's greet");
    assert!(
        read(&inside.join("src/welcome.js")).contains("greet(typed.trim())"),
        "the fix was made"
    );
    let log = read(&dir.join("iterations/000001/verify.log"));
    assert!(
        log.contains("not ok 1 - greets by name") && log.contains("'Hi Ada'"),
        "the checks ran the user's greet 1.4.2: {log}"
    );
    assert!(!inside.join("node_modules").exists());

    // The default workspace is outside the checkout: nothing of the user's is above it.
    // Without the setup, greet is not there at all, and the red gate says so.
    let repo = node_project();
    let agent = repo.agent("fixer", NODE_AGENT);
    let dir = repo.init_loop(&agent, &["npm test"], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    assert!(
        !repo.ws().starts_with(repo.path()),
        "{}",
        repo.ws().display()
    );
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("Cannot find module 'greet'") && !base.contains("Hi Ada"),
        "the red gate ran without the user's node_modules: {base}"
    );
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert_ne!(state_value(&dir, "LAST_STATUS"), "DONE");
    assert!(!repo.ws().join("node_modules").exists());
}

// ---- Python: a src-layout package, installed editable in a virtual environment

/// The directory of the wheels a venv's setup installs from with no index: the build
/// backend (setuptools, wheel) and pytest with its dependencies, pure-Python wheels that
/// `.ci/run` downloads into `/opt/orbit-wheels` (or `ORBIT_PYTHON_WHEELS`). CI sets
/// ORBIT_REQUIRE_PYTHON_WHEELS=1 to make them mandatory; elsewhere the Python project is
/// skipped with a notice.
fn python_wheels() -> Option<PathBuf> {
    let dir = std::env::var_os("ORBIT_PYTHON_WHEELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/orbit-wheels"));
    let names: Vec<String> = fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let has = |project: &str| {
        names
            .iter()
            .any(|n| n.starts_with(&format!("{project}-")) && n.ends_with(".whl"))
    };
    let venv = command("python3")
        .args(["-c", "import ensurepip, venv"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let ok = venv && has("setuptools") && has("wheel") && has("pytest");
    present_or_skipped(
        ok,
        "ORBIT_REQUIRE_PYTHON_WHEELS",
        "python3 with venv, and the wheels of setuptools, wheel and pytest (in /opt/orbit-wheels)",
    )
    .then_some(dir)
}

/// The fix: the mean keeps its fraction.
const PYTHON_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
cat > src/tally/__init__.py <<'PY'
"""Small statistics over a list of numbers."""


def mean(values):
    """The arithmetic mean of a non-empty list of numbers."""
    return sum(values) / len(values)
PY
echo "pytest passes: mean() divides without flooring" > "$ORBIT_AGENT_DIR/done.md""#;

#[test]
fn a_python_package_is_installed_editable_in_each_checkouts_own_venv_and_its_checks_import_that_copy()
 {
    if let Some(wheels) = python_wheels() {
        python_loop(&wheels, &[]);
    }
}

#[test]
fn under_the_sandbox_the_python_projects_clean_checkout_makes_its_venv_with_no_network() {
    // The clean checkout's venv and pip install run as checks do: under bubblewrap, no
    // network, HOME read-only (pip's cache in the run's private /tmp).
    if let Some(wheels) = python_wheels()
        && bwrap_available()
    {
        let (_repo, dir) = python_loop(&wheels, &["--sandbox", "bwrap"]);
        assert_sandboxed(&dir);
    }
}

/// The Python project looped to DONE with its setup (installing from the wheels in
/// `wheels`, and the init flags `extra`), and what that proves; the repository and the loop
/// directory, for more.
fn python_loop(wheels: &Path, extra: &[&str]) -> (Repo, PathBuf) {
    let repo = project_repo("python");
    // The venv and what the editable install writes (src/tally.egg-info) are not in this
    // project's .gitignore: the runner's own record keeps them out of the commits.
    let setup = format!(
        "python3 -m venv .venv && .venv/bin/pip install --disable-pip-version-check --no-index --find-links '{}' -e . pytest",
        wheels.display()
    );
    // The user's checkout has its own venv, with its own copy installed editable, and the
    // user runs the loop with that venv activated.
    let mut user_setup = command("bash");
    user_setup
        .args(["-c", &setup])
        .current_dir(repo.path())
        .env("PATH", repo.path_env());
    let out = run_bounded(user_setup, std::time::Duration::from_secs(300));
    assert_ok(&out, "the user's own venv");
    let user_venv = repo.join(".venv");
    let users_copy = command(user_venv.join("bin/python"))
        .args(["-c", "import tally; print(tally.__file__)"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&users_copy.stdout).trim(),
        repo.join("src/tally/__init__.py").display().to_string(),
        "the user's venv imports the user's copy"
    );
    let activated = format!("{}:{}", user_venv.join("bin").display(), repo.path_env());
    let venv_env = user_venv.display().to_string();
    let env = [
        ("MAX_ITERATIONS", "3"),
        ("PATH", activated.as_str()),
        ("VIRTUAL_ENV", venv_env.as_str()),
    ];

    let agent = repo.agent("fixer", PYTHON_AGENT);
    let mut flags = vec!["--setup", setup.as_str()];
    flags.extend_from_slice(extra);
    let dir = repo.init_loop(&agent, &[".venv/bin/python -m pytest -v"], &flags);
    let out = repo.run_loop(&dir, &[], &env);
    assert_code(&out, 0, "DONE");
    assert_set_up_in_both(&repo, &dir);
    let ws = repo.ws().display().to_string();
    let base_setup = read(&dir.join("iterations/baseline/setup.log"));
    assert!(
        base_setup.contains("Successfully installed") && base_setup.contains("tally-0.3.0"),
        "{base_setup}"
    );
    // The red start: this checkout's own copy imported, the bug failing.
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains(&format!("{ws}/.venv/bin/python"))
            && base.contains(&format!("rootdir: {ws}\n"))
            && base.contains("test_the_package_is_this_checkouts_own PASSED")
            && base.contains("test_mean_keeps_the_fraction FAILED"),
        "the red gate ran the workspace's venv on the workspace's copy: {base}"
    );
    // Every check after the fix ran its own checkout's venv on its own copy: the
    // workspace's, then the clean checkout's.
    let log = read(&dir.join("iterations/000001/verify.log"));
    let clean = log
        .split("### verify run: in a clean checkout of the tree to commit")
        .nth(1)
        .unwrap_or_else(|| panic!("a run in the clean checkout: {log}"));
    assert!(
        clean.contains(&format!("{ws}.clean/.venv/bin/python"))
            && clean.contains(&format!("rootdir: {ws}.clean\n"))
            && clean.contains("test_the_package_is_this_checkouts_own PASSED")
            && clean.contains("3 passed"),
        "{clean}"
    );
    assert!(!log.contains("FAILED"), "{log}");
    // The editable install's path file in the workspace's venv names the workspace's src.
    let lib = repo.ws().join(".venv/lib");
    let pth: Vec<String> = fs::read_dir(&lib)
        .unwrap()
        .flatten()
        .map(|python| {
            read(
                &python
                    .path()
                    .join("site-packages/__editable__.tally-0.3.0.pth"),
            )
        })
        .collect();
    assert_eq!(
        pth.iter().map(|p| p.trim()).collect::<Vec<_>>(),
        [format!("{ws}/src")],
        "the workspace's venv holds the workspace's copy"
    );
    // The fix is the loop's only change; nothing the setup made is in a commit.
    let all = repo.git(&["log", "--name-only", "--format=", "main..orbit/test-goal"]);
    assert_eq!(all.trim(), "src/tally/__init__.py", "the loop's commits");
    let files = branch_files(&repo);
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with(".venv") || f.contains("egg-info") || f.contains("__pycache__")),
        "what the setup made is never committed: {files:?}"
    );
    let fixed = repo.git(&["show", "orbit/test-goal:src/tally/__init__.py"]);
    assert!(fixed.contains("sum(values) / len(values)"), "{fixed}");
    // The user's copy is as it was.
    assert!(repo.read("src/tally/__init__.py").contains("//"));
    assert_records_agree(&dir);
    (repo, dir)
}

// ---- Rust: a crate whose path dependency is a git submodule

/// PATH for a loop that runs cargo: the toolchain that builds this suite first (its cargo
/// and rustc, not rustup's proxies, which would look for a toolchain in the sealed HOME),
/// then the fake agents and the rest.
pub(crate) fn cargo_path(repo: &Repo) -> String {
    let toolchain = Path::new(env!("CARGO")).parent().unwrap();
    format!("{}:{}", toolchain.display(), repo.path_env())
}

/// The fix: a line's quantity multiplies its unit price.
const RUST_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed -i 's/map(|line| line.unit_price)/map(|line| line.unit_price.times(line.quantity))/' src/lib.rs
echo "cargo test passes: total() multiplies by the quantity" > "$ORBIT_AGENT_DIR/done.md""#;

/// The Rust project: the crate, and its library as the submodule vendor/money, a
/// repository of its own that the user's checkout has initialized (its objects in
/// .git/modules/vendor/money). The library's origin is gone before any loop runs: what a
/// loop builds comes from .git/modules, or from nowhere.
pub(crate) fn rust_project() -> Repo {
    let lib = tempfile::Builder::new()
        .prefix("orbit-money-")
        .tempdir()
        .unwrap();
    copy_tree(&fixture("rust-money"), lib.path());
    let lgit = |args: &[&str]| {
        let out = command("git")
            .arg("-C")
            .arg(lib.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    lgit(&["init", "-q", "-b", "main"]);
    lgit(&["add", "-A"]);
    lgit(&["commit", "-q", "-m", "money: amounts in cents"]);
    let repo = Repo::new();
    copy_tree(&fixture("rust"), repo.path());
    let url = lib.path().display().to_string();
    repo.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        &url,
        "vendor/money",
    ]);
    repo.git(&["add", "-A"]);
    repo.git(&[
        "commit",
        "-q",
        "-m",
        "the invoice crate, money as a submodule",
    ]);
    assert!(repo.join(".git/modules/vendor/money/HEAD").is_file());
    drop(lib);
    assert!(!Path::new(&url).exists());

    repo
}

#[test]
fn a_rust_crate_whose_path_dependency_is_a_submodule_builds_offline_in_every_checkout_with_its_origin_gone()
 {
    rust_loop(&[]);
}

#[test]
fn under_the_sandbox_the_rust_projects_clean_checkout_builds_with_no_network() {
    // cargo under bubblewrap: no network, HOME (and so CARGO_HOME) read-only.
    if bwrap_available() {
        let (_repo, dir) = rust_loop(&["--sandbox", "bwrap"]);
        assert_sandboxed(&dir);
    }
}

/// The Rust project looped to DONE (with the init flags `extra`), and what that proves;
/// the repository and the loop directory, for more.
fn rust_loop(extra: &[&str]) -> (Repo, PathBuf) {
    let repo = rust_project();
    let agent = repo.agent("fixer", RUST_AGENT);
    let dir = repo.init_loop(&agent, &["cargo test --offline"], extra);
    let path = cargo_path(&repo);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3"), ("PATH", &path)]);
    assert_code(&out, 0, "DONE");
    let ws = repo.ws().display().to_string();
    // The red start: the workspace's own checkout of the submodule built, the bug failed.
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains(&format!("Compiling money v0.1.0 ({ws}/vendor/money)"))
            && base.contains("test tests::a_quantity_multiplies_its_unit_price ... FAILED"),
        "the red gate built the workspace's submodule: {base}"
    );
    // The last check built everything again in the clean checkout, from its own submodule.
    let log = read(&dir.join("iterations/000001/verify.log"));
    let clean = log
        .split("### verify run: in a clean checkout of the tree to commit")
        .nth(1)
        .unwrap_or_else(|| panic!("a run in the clean checkout: {log}"));
    assert!(
        clean.contains(&format!("Compiling money v0.1.0 ({ws}.clean/vendor/money)"))
            && clean.contains(&format!("Compiling invoice v0.1.0 ({ws}.clean)"))
            && clean.contains("test result: ok. 3 passed"),
        "{clean}"
    );
    let runner_log = read(&dir.join("runner.log"));
    assert!(
        !runner_log.contains("is not initialized in your checkout")
            && !runner_log.contains("cannot check out the submodule"),
        "every checkout got the submodule: {runner_log}"
    );
    // The fix is the loop's only change; the submodule stays a gitlink at its commit, and
    // cargo's target/ is in no commit.
    let all = repo.git(&["log", "--name-only", "--format=", "main..orbit/test-goal"]);
    assert_eq!(all.trim(), "src/lib.rs", "the loop's commits");
    let fixed = repo.git(&["show", "orbit/test-goal:src/lib.rs"]);
    assert!(
        fixed.contains("line.unit_price.times(line.quantity)"),
        "{fixed}"
    );
    assert_eq!(
        repo.git(&["ls-tree", "orbit/test-goal", "vendor/money"]),
        repo.git(&["ls-tree", "main", "vendor/money"]),
    );
    assert!(
        repo.git(&["ls-tree", "main", "vendor/money"])
            .starts_with("160000 commit ")
    );
    let files = branch_files(&repo);
    assert!(!files.iter().any(|f| f.starts_with("target/")), "{files:?}");
    assert!(
        repo.ws().join("target/debug").is_dir(),
        "the workspace built in its own target/"
    );
    assert_records_agree(&dir);
    (repo, dir)
}

#[test]
fn a_fix_that_needs_the_submodules_newer_commit_commits_the_bump_and_the_clean_checkout_builds_it()
{
    // The user's checkout has fetched a newer commit of the library (here made in place:
    // its origin is gone) that adds money::ZERO; the project still records the older one.
    let repo = rust_project();
    let sub = repo.join("vendor/money");
    let sgit = |args: &[&str]| {
        let out = command("git")
            .arg("-C")
            .arg(&sub)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let pinned = sgit(&["rev-parse", "HEAD"]);
    let lib = fs::read_to_string(sub.join("src/lib.rs")).unwrap();
    fs::write(
        sub.join("src/lib.rs"),
        format!("{lib}\n/// No money.\npub const ZERO: Cents = Cents(0);\n"),
    )
    .unwrap();
    sgit(&["commit", "-q", "-am", "money: ZERO"]);
    let newer = sgit(&["rev-parse", "HEAD"]);
    sgit(&["checkout", "-q", &pinned]);
    // The agent moves the submodule to that commit and uses what it adds.
    let agent = repo.agent(
        "bumper",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
git -C vendor/money checkout -q origin/main || exit 1
sed -i 's/map(|line| line.unit_price)/map(|line| line.unit_price.times(line.quantity))/' src/lib.rs
sed -i 's/assert_eq!(total(&\[\]), Cents(0))/assert_eq!(total(\&[]), money::ZERO)/' src/lib.rs
echo "cargo test passes: total() multiplies, on money with ZERO" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &["cargo test --offline"], &[]);
    let path = cargo_path(&repo);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2"), ("PATH", &path)]);
    assert_code(&out, 0, "DONE");
    // The commit holds the fix and the submodule's new commit, as a gitlink.
    let all = repo.git(&["log", "--name-only", "--format=", "main..orbit/test-goal"]);
    let mut changed: Vec<&str> = all.lines().filter(|l| !l.is_empty()).collect();
    changed.sort();
    assert_eq!(
        changed,
        ["src/lib.rs", "vendor/money"],
        "the loop's commits"
    );
    assert_eq!(
        repo.git(&["ls-tree", "orbit/test-goal", "vendor/money"]),
        format!("160000 commit {newer}\tvendor/money\n")
    );
    assert!(
        repo.git(&["show", "orbit/test-goal:src/lib.rs"])
            .contains("money::ZERO")
    );
    // The clean checkout built the newer commit (money::ZERO is only there), from
    // .git/modules.
    let log = read(&dir.join("iterations/000001/verify.log"));
    let clean = log
        .split("### verify run: in a clean checkout of the tree to commit")
        .nth(1)
        .unwrap_or_else(|| panic!("a run in the clean checkout: {log}"));
    assert!(
        clean.contains("Compiling money v0.1.0") && clean.contains("test result: ok. 3 passed"),
        "{clean}"
    );
    // The user's checkout of the submodule is where the user left it.
    assert_eq!(sgit(&["rev-parse", "HEAD"]), pinned);
    assert_records_agree(&dir);
}

// ---- a submodule's checkout is the agent's: its git directory lives in the work tree

/// A repository whose submodule vendor/lib (lib.sh: `answer` says 42) the user's checkout
/// has initialized.
fn repo_with_lib_submodule() -> Repo {
    let repo = Repo::new();
    let lib = tempfile::tempdir().unwrap();
    let lgit = |args: &[&str]| {
        let out = command("git")
            .arg("-C")
            .arg(lib.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    lgit(&["init", "-q", "-b", "main"]);
    fs::write(lib.path().join("lib.sh"), "answer() { echo 42; }\n").unwrap();
    lgit(&["add", "lib.sh"]);
    lgit(&["commit", "-q", "-m", "lib"]);
    let url = lib.path().display().to_string();
    repo.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        &url,
        "vendor/lib",
    ]);
    repo.git(&["commit", "-q", "-m", "the library as a submodule"]);
    repo
}

/// Bash that makes the submodule checkout vendor/lib of the current directory obey a filter
/// (its git directory is in the checkout, the checks' and the agent's to write): the
/// filter's command records that it ran in MARKER, and lib.sh is touched so that git reads
/// it again through the filter.
fn plant_filter(marker: &Path) -> String {
    format!(
        r#"g=vendor/lib/.git
printf '[filter "planted"]\n\tsmudge = echo ran >> {m}; cat\n\tclean = echo ran >> {m}; cat\n' >> "$g/config"
mkdir -p "$g/info" && echo '* filter=planted' > "$g/info/attributes"
touch -d '2001-01-01 00:00' vendor/lib/lib.sh"#,
        m = marker.display()
    )
}

#[test]
fn a_submodule_checkout_that_a_check_rewrote_is_cloned_afresh_at_the_next_claim_never_obeyed() {
    let repo = repo_with_lib_submodule();
    let marker = repo.bin.path().join("filter-ran");
    let once = repo.bin.path().join("planted-once");
    // The agent's program, run as the check: in the clean checkout of the first claim it
    // plants a filter in the submodule's checkout there, breaks the library and fails; the
    // next claim's clean checkout must hold the submodule as the repository has it, and
    // nothing of the planted configuration may run in the runner's git.
    let selftest = format!(
        r#"#!/usr/bin/env bash
. vendor/lib/lib.sh || exit 1
test "$(answer)" = 42 || {{ echo "the library answers $(answer)"; exit 1; }}
case $PWD in *.clean) ;; *) exit 0 ;; esac
test -e '{once}' && exit 0
: > '{once}'
{plant}
echo 'answer() {{ echo 41; }}' > vendor/lib/lib.sh
echo planted; exit 1"#,
        once = once.display(),
        plant = plant_filter(&marker)
    );
    let agent = repo.agent(
        "planter",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
cat > selftest <<'SH'
{selftest}
SH
chmod +x selftest
echo "selftest passes" > "$ORBIT_AGENT_DIR/done.md""#
        ),
    );
    let dir = repo.init_loop(&agent, &["test -x ./selftest && ./selftest"], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    let first = read(&dir.join("iterations/000001/verify.log"));
    assert!(
        first.contains("in a clean checkout of the tree to commit") && first.contains("planted"),
        "the first claim's clean checkout was planted: {first}"
    );
    assert_code(&out, 0, "DONE at the second claim");
    assert!(
        !marker.exists(),
        "the runner's git obeyed a filter a check planted: {}",
        read(&marker)
    );
    let second = read(&dir.join("iterations/000002/verify.log"));
    assert!(
        second.contains("in a clean checkout of the tree to commit")
            && !second.contains("the library answers 41"),
        "the second claim's clean checkout has the library as the repository has it: {second}"
    );
}

#[test]
fn what_a_setup_plants_in_a_submodules_checkout_never_runs_in_the_runners_git() {
    let repo = repo_with_lib_submodule();
    let marker = repo.bin.path().join("filter-ran");
    // The setup runs a script of the tree when there is one (as npm ci runs a package's
    // scripts, pip the project's build): the agent's, in the clean checkout of its claim,
    // plants a filter in the submodule's checkout there, before the runner asks git what
    // the setup changed.
    let prepare = format!(
        "case $PWD in *.clean) ;; *) exit 0 ;; esac\n{}\n",
        plant_filter(&marker)
    );
    let agent = repo.agent(
        "planter",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
mkdir -p tools
cat > tools/prepare <<'SH'
{prepare}
SH
echo 42 > solution.txt
echo "solution.txt holds the library's answer" > "$ORBIT_AGENT_DIR/done.md""#
        ),
    );
    let check = ". vendor/lib/lib.sh && test \"$(cat solution.txt 2>/dev/null)\" = \"$(answer)\"";
    let dir = repo.init_loop(
        &agent,
        &[check],
        &[
            "--setup",
            "if [ -f tools/prepare ]; then bash tools/prepare; fi",
        ],
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    assert_code(&out, 0, "DONE");
    let clean_setup = read(&dir.join("iterations/000001/setup.log"));
    assert!(
        clean_setup.contains(".clean (") && clean_setup.contains("[PASS] setup"),
        "{clean_setup}"
    );
    assert!(
        !marker.exists(),
        "the runner's git obeyed a filter the setup planted: {}",
        read(&marker)
    );
}

#[test]
fn a_filter_the_agent_plants_in_the_workspaces_submodule_never_runs_in_the_runners_git() {
    let repo = repo_with_lib_submodule();
    let marker = repo.bin.path().join("filter-ran");
    // The agent plants a filter in the workspace's checkout of the submodule, then solves:
    // every snapshot the runner takes of the workspace from then on holds that checkout.
    let agent = repo.agent(
        "planter",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
{plant}
echo 42 > solution.txt
echo "solution.txt holds the library's answer" > "$ORBIT_AGENT_DIR/done.md""#,
            plant = plant_filter(&marker)
        ),
    );
    let check = ". vendor/lib/lib.sh && test \"$(cat solution.txt 2>/dev/null)\" = \"$(answer)\"";
    let dir = repo.init_loop(&agent, &[check], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    assert_code(&out, 0, "DONE");
    assert!(
        repo.ws_read("vendor/lib/.git/config").contains("planted"),
        "the filter was planted"
    );
    assert!(
        !marker.exists(),
        "the runner's git obeyed a filter the agent planted: {}",
        read(&marker)
    );
    assert_eq!(
        repo.git(&["ls-tree", "orbit/test-goal", "vendor/lib"]),
        repo.git(&["ls-tree", "main", "vendor/lib"]),
        "the submodule's commit is the project's"
    );
}

#[test]
fn a_setup_that_builds_in_a_submodules_checkout_changes_no_file_the_project_tracks() {
    // A setup that builds the library stamps a file of the library's own (tracked by the
    // submodule, not by the project: the project records the submodule's commit, which does
    // not move). The project's tracked files are as they were, and the loop goes on.
    let repo = repo_with_lib_submodule();
    let agent = repo.agent(
        "solver",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo 42 > solution.txt
echo "solution.txt holds the library's answer" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let check = "grep -q '^# built' vendor/lib/lib.sh && . vendor/lib/lib.sh && test \"$(cat solution.txt 2>/dev/null)\" = \"$(answer)\"";
    let dir = repo.init_loop(
        &agent,
        &[check],
        &["--setup", "echo '# built' >> vendor/lib/lib.sh"],
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    assert_code(&out, 0, "DONE");
    for log in [
        "iterations/baseline/setup.log",
        "iterations/000001/setup.log",
    ] {
        let log = read(&dir.join(log));
        assert!(log.contains("[PASS] setup"), "{log}");
    }
    assert_eq!(
        repo.git(&["ls-tree", "orbit/test-goal", "vendor/lib"]),
        repo.git(&["ls-tree", "main", "vendor/lib"]),
        "the submodule's commit is the project's"
    );
}

// ---- cargo: the configuration of the user's checkout

/// A crate whose tests want 42 and fail when it was built with the rustflags of the user's
/// own `.cargo/config.toml` (ignored, in the user's checkout: a local setting), and that
/// configuration. cargo reads every `.cargo/config.toml` from the directory it runs in up
/// to the root.
fn cargo_config_project() -> Repo {
    let repo = Repo::new();
    repo.write(
        "Cargo.toml",
        "[package]\nname = \"answer\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[lints.rust]\nunexpected_cfgs = \"allow\"\n",
    );
    repo.write(
        "src/lib.rs",
        r#"/// The answer.
pub fn answer() -> u32 {
    41
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_answer_is_42() {
        assert_eq!(super::answer(), 42);
    }

    #[test]
    fn built_with_the_projects_own_configuration() {
        assert!(!cfg!(users_config), "built with the rustflags of the user's .cargo/config.toml");
    }
}
"#,
    );
    repo.write(".gitignore", "/target/\n/.cargo/\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "the answer crate"]);
    repo.write(
        ".cargo/config.toml",
        "[build]\nrustflags = [\"--cfg\", \"users_config\"]\n",
    );
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "the user's config is ignored"
    );
    repo
}

/// The fix: 42.
const ANSWER_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed -i 's/^    41$/    42/' src/lib.rs
echo "cargo test passes: the answer is 42" > "$ORBIT_AGENT_DIR/done.md""#;

#[test]
fn a_workspace_in_the_checkout_builds_with_the_users_cargo_config_and_the_default_one_does_not() {
    const LEAK: &str = "built with the rustflags of the user's .cargo/config.toml";
    // In the checkout: cargo finds the user's .cargo/config.toml above the workspace, and the
    // right fix fails the check for ever.
    let repo = cargo_config_project();
    let agent = repo.agent("fixer", ANSWER_AGENT);
    let dir = repo.init_loop(
        &agent,
        &["cargo test --offline"],
        &["--workspace", ".orbit/.workspaces/test-goal"],
    );
    let path = cargo_path(&repo);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1"), ("PATH", &path)]);
    assert_code(&out, 16, "never DONE with the user's rustflags");
    let log = read(&dir.join("iterations/000001/verify.log"));
    assert!(
        log.contains(LEAK) && log.contains("test tests::the_answer_is_42 ... ok"),
        "the fix passed, the user's configuration failed it: {log}"
    );

    // The default workspace is outside the checkout: the build is the project's own.
    let repo = cargo_config_project();
    let agent = repo.agent("fixer", ANSWER_AGENT);
    let dir = repo.init_loop(&agent, &["cargo test --offline"], &[]);
    let path = cargo_path(&repo);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3"), ("PATH", &path)]);
    assert_code(&out, 0, "DONE on the project's own configuration");
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("test tests::built_with_the_projects_own_configuration ... ok")
            && base.contains("test tests::the_answer_is_42 ... FAILED")
            && !base.contains(LEAK),
        "the red gate failed for the bug alone: {base}"
    );
    assert!(!read(&dir.join("iterations/000001/verify.log")).contains(LEAK));
}

// ---- A newcomer: `orbit init "goal"` and `orbit run`, no flag, on projects with lockfiles

/// The newcomer's engine, claude (orbit's default), as a stand-in on PATH: logged in, and
/// its run says it ran (on stderr, which agent.log keeps) and ends as claude's print mode
/// ends.
const NEWCOMER_CLAUDE: &str = r#"case "${1-}" in
  --version) echo "2.1.197 (Claude Code)"; exit 0 ;;
  auth) echo '{"loggedIn": true}'; exit 0 ;;
esac
cat >/dev/null
echo "NEWCOMER AGENT RAN in $PWD" >&2
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"result":"looked","total_cost_usd":0}'"#;

/// `orbit init "Fix the failing test"` and `orbit run` with no flag, PATH `path` and the
/// environment `env`: what init said, and the loop directory once its first iteration ran.
fn newcomer(repo: &Repo, path: &str, env: &[(&str, &str)]) -> (String, PathBuf) {
    repo.agent("claude", NEWCOMER_CLAUDE);
    let mut init = command(orbit_bin());
    init.args(["init", "Fix the failing test"])
        .current_dir(repo.path())
        .env("PATH", path);
    let said = run_bounded(init, std::time::Duration::from_secs(60));
    assert_ok(&said, "orbit init with no flag");
    let dir = repo.join(".orbit/fix-the-failing-test");
    let mut run = command(orbit_bin());
    run.args(["run"])
        .current_dir(repo.path())
        .env("PATH", path)
        .env("MAX_ITERATIONS", "1")
        .env("RETRY_BASE_DELAY", "0")
        .env("KILL_GRACE", "1");
    for (k, v) in env {
        run.env(k, v);
    }
    let out = run_bounded(run, std::time::Duration::from_secs(300));
    let agent_log = read(&dir.join("iterations/000001/agent.log"));
    assert!(
        agent_log.contains("NEWCOMER AGENT RAN"),
        "the first agent run was reached: {}\n--- runner.log\n{}\n--- baseline verify.log\n{}",
        text(&out),
        read(&dir.join("runner.log")),
        read(&dir.join("iterations/baseline/verify.log"))
    );
    assert_sandboxed(&dir);
    let said = text(&said);
    assert!(said.contains("orbit: dependencies: "), "{said}");
    (said, dir)
}

#[test]
fn a_newcomers_init_and_run_on_a_rust_workspace_with_a_lockfile_reach_the_first_agent_run() {
    if !bwrap_available() {
        return;
    }
    let repo = project_repo("rust-workspace");
    let path = cargo_path(&repo);
    let (said, dir) = newcomer(&repo, &path, &[]);
    assert!(said.contains("using `cargo test`"), "{said}");
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("test result: FAILED"),
        "a real red start: {base}"
    );
}

#[test]
fn a_newcomers_init_and_run_on_a_node_project_with_a_lockfile_reach_the_first_agent_run() {
    if !(node_available() && bwrap_available()) {
        return;
    }
    let repo = node_project();
    let path = repo.path_env();
    let (said, dir) = newcomer(&repo, &path, &[("npm_config_update_notifier", "false")]);
    assert!(said.contains("using `npm test`"), "{said}");
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("# fail 1") && !base.contains("Cannot find module"),
        "a real red start, on the setup's node_modules: {base}"
    );
}

#[test]
fn a_newcomers_init_and_run_on_a_python_project_with_pinned_requirements_reach_the_first_agent_run()
{
    let Some(wheels) = python_wheels() else {
        return;
    };
    if !bwrap_available() {
        return;
    }
    let repo = project_repo("python");
    // Pinned requirements (the project's tests' own runner among them), and the project
    // itself, editable; the newcomer's pip finds its packages where their pip.conf says
    // (here its environment: the wheels directory, no index).
    repo.write("requirements.txt", "pytest==9.0.3\n-e .\n");
    repo.git(&["add", "requirements.txt"]);
    repo.git(&["commit", "-q", "-m", "pinned requirements"]);
    let wheels = wheels.display().to_string();
    let path = repo.path_env();
    let env = [("PIP_FIND_LINKS", wheels.as_str()), ("PIP_NO_INDEX", "1")];
    let (said, dir) = newcomer(&repo, &path, &env);
    assert!(
        said.contains("using `.venv/bin/python -m pytest`"),
        "{said}"
    );
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("1 failed") && base.contains("test_mean_keeps_the_fraction"),
        "a real red start, in the setup's virtual environment: {base}"
    );
}
