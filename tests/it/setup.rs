//! The workspace's setup (loop.toml `setup`): what a fresh checkout needs before the
//! project's checks can run there (node_modules, a virtual environment, a generated file).
//! It runs once in each new work tree of the loop before any check, what it makes is never
//! the agent's change nor committed, and the clean checkout of the last check is set up
//! afresh, so an agent that rewrites what the setup made never reaches DONE through it.

use crate::support::*;
use std::fs;
use std::path::Path;

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

/// A project whose check needs what its setup makes: `.deps/` (not ignored, like a virtual
/// environment a project does not list in .gitignore) holds the test runner; the check
/// says NO-SETUP when it is missing. Returns the setup command, which counts its runs in
/// `counter`.
fn project_with_deps(repo: &Repo, counter: &Path) -> String {
    repo.write(
        "deps-src/runner.sh",
        "test -f solution.txt || { echo 'solution.txt is missing'; exit 1; }\ngrep -qx 42 solution.txt\n",
    );
    repo.git(&["add", "deps-src"]);
    repo.git(&[
        "commit",
        "-q",
        "-m",
        "the project's test runner, installed by its setup",
    ]);
    format!(
        "mkdir -p .deps && cp deps-src/runner.sh .deps/runner.sh && echo \"$PWD\" >> '{}'",
        counter.display()
    )
}

/// The fake agent that solves: it writes 42 into solution.txt and claims DONE.
fn solver(repo: &Repo) -> std::path::PathBuf {
    repo.agent(
        "solver",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo 42 > solution.txt
echo "solution.txt holds 42" > "$ORBIT_AGENT_DIR/done.md""#,
    )
}

const CHECK: &str = "test -f .deps/runner.sh || { echo NO-SETUP; exit 1; }; bash .deps/runner.sh";

#[test]
fn the_setup_runs_before_the_red_gate_and_what_it_makes_is_never_committed() {
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = project_with_deps(&repo, &counter);
    let agent = solver(&repo);
    let dir = repo.init_loop(&agent, &[CHECK], &["--setup", &setup]);
    let toml = read(&dir.join("loop.toml"));
    assert!(
        toml.contains("setup = ["),
        "loop.toml holds the setup: {toml}"
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE with the setup's runner");
    // The red gate ran on a set-up tree: its check failed for want of the solution, not of
    // the setup.
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("solution.txt is missing") && !base.lines().any(|l| l == "NO-SETUP"),
        "the red gate ran after the setup: {base}"
    );
    let setup_log = read(&dir.join("iterations/baseline/setup.log"));
    assert!(
        setup_log.contains("==> setup 1: ") && setup_log.contains("[PASS] setup"),
        "{setup_log}"
    );
    // Once in the workspace, once in the clean checkout of the claim (the DONE's adequacy
    // measure, adequacy = "report" by default, sets up checkouts of its own after the DONE:
    // not counted here).
    let runs = read(&counter);
    let dirs: Vec<&str> = runs
        .lines()
        .filter(|l| !l.contains("/orbit-adequacy-"))
        .collect();
    assert_eq!(dirs.len(), 2, "setup runs: {runs}");
    assert!(dirs[0].ends_with("/test-goal"), "{runs}");
    assert!(dirs[1].ends_with("/test-goal.clean"), "{runs}");
    let files = branch_files(&repo);
    assert!(files.contains(&"solution.txt".to_string()), "{files:?}");
    assert!(
        !files.iter().any(|f| f.starts_with(".deps")),
        "what the setup made is never committed: {files:?}"
    );
    assert!(
        repo.ws().join(".deps/runner.sh").is_file(),
        "the workspace keeps its setup"
    );
    let done = events_named(&dir, "setup_done");
    assert_eq!(done.len(), 1, "one setup_done for the workspace: {done:?}");
    assert_records_agree(&dir);
}

#[test]
fn without_the_setup_the_same_loop_cannot_run_its_check() {
    // What the setup is for: the same project and agent, no setup, never DONE (the check's
    // runner is not in a fresh checkout).
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    project_with_deps(&repo, &counter);
    let agent = solver(&repo);
    let dir = repo.init_loop(&agent, &[CHECK], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        read(&dir.join("iterations/000001/verify.log"))
            .lines()
            .any(|l| l == "NO-SETUP"),
        "the check had no setup"
    );
}

#[test]
fn an_agent_that_rewrites_what_the_setup_made_is_not_done_the_clean_checkout_is_set_up_afresh() {
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = project_with_deps(&repo, &counter);
    // The agent neuters the test runner the setup installed (it is in the workspace, the
    // agent's to write) and solves nothing.
    let agent = repo.agent(
        "neuterer",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
printf 'exit 0\n' > .deps/runner.sh
echo "the tests pass" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &[CHECK], &["--setup", &setup]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    let log = read(&dir.join("iterations/000001/verify.log"));
    // The attack was made: in the workspace, the neutered runner passed.
    assert!(
        log.contains("### verify run: after the agent") && log.contains("[PASS] "),
        "the neutered runner passed in the workspace: {log}"
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "never DONE on a neutered setup: {}",
        text(&out)
    );
    assert!(
        log.contains("in a clean checkout of the tree to commit")
            && log.contains("solution.txt is missing"),
        "the clean checkout ran the setup's own runner: {log}"
    );
    let events = read(&dir.join("events.jsonl"));
    assert!(events.contains("VERIFY_CLEAN"), "{events}");
    assert!(
        !branch_files(&repo).iter().any(|f| f.starts_with(".deps")),
        "the rewrite of the setup's file is not the agent's change to commit"
    );
}

#[test]
fn a_failing_setup_stops_in_preflight_with_its_output_and_nothing_runs() {
    let repo = Repo::new();
    let ran = repo.bin.path().join("agent-ran");
    let agent = repo.agent(
        "never",
        &format!("cat >/dev/null\ntouch '{}'", ran.display()),
    );
    let dir = repo.init_loop(
        &agent,
        &["test -f solution.txt"],
        &[
            "--setup",
            "echo fetching; echo 'npm ERR! network unreachable' >&2; exit 3",
        ],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "a failing setup stops in preflight");
    let all = text(&out) + &read(&dir.join("runner.log"));
    assert!(
        all.contains("the workspace's setup failed: setup command 1") && all.contains("exit 3"),
        "{all}"
    );
    assert!(
        all.contains("npm ERR! network unreachable"),
        "the log's tail is shown: {all}"
    );
    assert!(!ran.exists(), "no agent ran");
    assert!(
        !dir.join("iterations/baseline/verify.log").exists(),
        "no check ran on a tree the setup did not finish"
    );
    assert_eq!(
        state_value(&dir, "NEXT_ITERATION"),
        "1",
        "no iteration began"
    );
    // Tried again at the next start: the setup is not taken as done.
    let again = repo.run_loop(&dir, &[], &[]);
    assert_code(&again, 2, "still failing");
    assert_eq!(
        read(&dir.join("iterations/baseline/setup.log"))
            .matches("==> setup 1:")
            .count(),
        2
    );
}

#[test]
fn a_setup_that_changes_a_tracked_file_is_refused() {
    let repo = Repo::new();
    repo.write("package-lock.json", "{}\n");
    repo.git(&["add", "package-lock.json"]);
    repo.git(&["commit", "-q", "-m", "lock"]);
    let agent = repo.agent("never", "cat >/dev/null");
    let dir = repo.init_loop(
        &agent,
        &["test -f solution.txt"],
        &["--setup", "echo '{\"rewritten\":1}' > package-lock.json"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "refused in preflight");
    let all = text(&out) + &read(&dir.join("runner.log"));
    assert!(
        all.contains("the setup changed 1 file(s) the project tracks (package-lock.json)"),
        "{all}"
    );
}

#[test]
fn each_candidate_worktree_is_set_up_once_and_keeps_its_setup_between_iterations() {
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = project_with_deps(&repo, &counter);
    // Each candidate gets it right only in the second iteration.
    let agent = repo.agent(
        "slow",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
test -f .deps/runner.sh || { echo "no setup in $PWD" >&2; exit 1; }
if [ "$ORBIT_ITERATION" -ge 2 ]; then echo 42 > solution.txt; else echo 41 > solution.txt; fi
echo "done" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &[CHECK], &["--setup", &setup, "--candidates", "2"]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE in the second iteration");
    let runs = read(&counter);
    let count = |suffix: &str| runs.lines().filter(|l| l.ends_with(suffix)).count();
    assert_eq!(count("/test-goal"), 1, "{runs}");
    assert_eq!(count("/test-goal.c1"), 1, "once per candidate: {runs}");
    assert_eq!(count("/test-goal.c2"), 1, "once per candidate: {runs}");
    let wheres: Vec<String> = events_named(&dir, "setup_done")
        .iter()
        .map(|e| e.value["where"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        wheres.iter().any(|w| w.contains("candidate-1"))
            && wheres.iter().any(|w| w.contains("candidate-2")),
        "{wheres:?}"
    );
    assert!(
        !branch_files(&repo).iter().any(|f| f.starts_with(".deps")),
        "never committed from a candidate either"
    );
}

#[test]
fn under_the_sandbox_the_clean_checkouts_setup_runs_as_a_check_and_the_first_one_as_the_user() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    project_with_deps(&repo, &counter);
    // The setup says where it could write: outside the work tree only as the user.
    let setup = format!(
        "mkdir -p .deps && cp deps-src/runner.sh .deps/runner.sh && echo \"cache=${{XDG_CACHE_HOME:-none}}\" && {{ echo \"$PWD\" >> '{c}' 2>/dev/null || echo 'sandboxed: cannot write {c}'; }}",
        c = counter.display()
    );
    let agent = solver(&repo);
    let dir = repo.init_loop(&agent, &[CHECK], &["--setup", &setup, "--sandbox", "bwrap"]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE under the sandbox");
    let runs = read(&counter);
    assert_eq!(
        runs.lines().count(),
        1,
        "only the first setup, on the user's own tree, wrote outside its work tree: {runs}"
    );
    assert!(runs.trim_end().ends_with("/test-goal"), "{runs}");
    let clean_log = read(&dir.join("iterations/000001/setup.log"));
    assert!(
        clean_log.contains("sandboxed: cannot write")
            && clean_log.contains("cache=/tmp/.orbit-setup-cache"),
        "the clean checkout's setup ran in the sandbox, its caches in its private /tmp: {clean_log}"
    );
}

#[test]
fn under_the_sandbox_init_applies_the_setup_of_the_dependencies_and_writes_their_offline_switches()
{
    let repo = Repo::new();
    repo.write(
        "Cargo.toml",
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\n",
    );
    repo.write("package-lock.json", "{\"lockfileVersion\":3}\n");
    repo.write("requirements.txt", "pytest\n");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "three ecosystems"]);
    let agent = repo.agent("a", "cat >/dev/null");
    let exec = agent.display().to_string();
    let out = repo.orbit(&[
        "init", "goal", "--engine", "custom", "--exec", &exec, "--verify", "true",
    ]);
    assert_ok(&out, "orbit init");
    let said = text(&out);
    let line: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("orbit: dependencies: "))
        .collect();
    assert_eq!(line.len(), 1, "one line: {said}");
    assert!(
        line[0].contains("cargo (Cargo.toml), npm (package-lock.json), pip (requirements.txt)")
            && line[0].contains("CARGO_NET_OFFLINE=true npm_config_offline=true PIP_NO_INDEX=1"),
        "{said}"
    );
    let toml = read(&repo.join(".orbit/goal/loop.toml"));
    assert!(
        toml.contains("\"cargo fetch\"")
            && toml.contains("\"npm ci --no-audit --no-fund\"")
            && toml.contains("pip install --disable-pip-version-check -r requirements.txt")
            && toml.contains(
                "offline-env = [\"CARGO_NET_OFFLINE=true\", \"npm_config_offline=true\", \"PIP_NO_INDEX=1\"]"
            ),
        "{toml}"
    );
    // verify.sh exports them to its checks (it is pinned: the agent cannot drop them).
    let verify = read(&repo.join(".orbit/goal/verify.sh"));
    assert!(
        verify.contains(
            "OFFLINE_ENV=('CARGO_NET_OFFLINE=true' 'npm_config_offline=true' 'PIP_NO_INDEX=1')"
        ),
        "{verify}"
    );
    // A variable the shell obeys is refused in loop.toml.
    let bad = toml.replace("PIP_NO_INDEX=1", "BASH_ENV=/tmp/x");
    std::fs::write(repo.join(".orbit/goal/loop.toml"), bad).unwrap();
    let force = repo.orbit(&["init", "--force", "--dir", ".orbit/goal"]);
    assert_code(&force, 2, "offline-env refuses BASH_ENV");
    assert!(
        text(&force).contains("offline-env: 'BASH_ENV=/tmp/x'"),
        "{}",
        text(&force)
    );
}

#[test]
fn init_suggests_the_setup_a_lockfile_asks_for_and_records_the_one_given() {
    let repo = Repo::new();
    repo.write(
        "package.json",
        "{\"scripts\":{\"test\":\"node test.js\"}}\n",
    );
    repo.write("package-lock.json", "{\"lockfileVersion\":3}\n");
    repo.write("requirements.txt", "pytest\n");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "node and python"]);
    let agent = repo.agent("a", "cat >/dev/null");
    let exec = agent.display().to_string();
    // With --no-setup (or --sandbox none), init only suggests.
    let out = repo.orbit(&[
        "init",
        "goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "true",
        "--no-setup",
    ]);
    assert_ok(&out, "orbit init");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("this project has package-lock.json, requirements.txt")
            && err.contains("--setup 'npm ci'")
            && err.contains(
                "--setup 'python3 -m venv .venv && .venv/bin/pip install -r requirements.txt'"
            ),
        "{err}"
    );
    let given = repo.orbit(&[
        "init",
        "goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "true",
        "--dir",
        ".orbit/other",
        "--setup",
        "npm ci",
    ]);
    assert_ok(&given, "orbit init --setup");
    let said = text(&given);
    assert!(
        !said.contains("if its checks need more"),
        "no suggestion once given: {said}"
    );
    assert!(
        said.contains("setup: `npm ci` (once in each fresh checkout"),
        "{said}"
    );
    let toml = read(&repo.join(".orbit/other/loop.toml"));
    assert!(toml.contains("setup = [\"npm ci\"]"), "{toml}");
    // A setup is the loop's identity: --force renders from loop.toml and refuses the flag.
    let force = repo.orbit(&[
        "init",
        "--force",
        "--dir",
        ".orbit/other",
        "--setup",
        "make",
    ]);
    assert_code(&force, 2, "--force refuses --setup");
    assert!(
        text(&force).contains("not with --setup"),
        "{}",
        text(&force)
    );
}

#[test]
fn init_without_verify_suggests_no_check_whose_program_is_missing() {
    let repo = Repo::new();
    repo.write("go.mod", "module example.com/x\n\ngo 1.22\n");
    repo.git(&["add", "go.mod"]);
    repo.git(&["commit", "-q", "-m", "go"]);
    // A PATH with git and bash only: no `go`.
    let bin = tempfile::tempdir().unwrap();
    for tool in ["git", "bash"] {
        let real = String::from_utf8(
            command("bash")
                .args(["-c", &format!("type -P {tool}")])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        std::os::unix::fs::symlink(real.trim(), bin.path().join(tool)).unwrap();
    }
    let agent = repo.agent("a", "cat >/dev/null");
    let mut cmd = command(orbit_bin());
    cmd.args(["init", "goal", "--engine", "custom", "--exec"])
        .arg(&agent)
        .current_dir(repo.path())
        .env("PATH", bin.path());
    let out = run_bounded(cmd, std::time::Duration::from_secs(60));
    assert_code(&out, 2, "no check to suggest");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`go test ./...`, cannot run here: go is not on PATH")
            && err.contains("--verify 'CMD'"),
        "{err}"
    );
    assert!(!repo.join(".orbit/goal").exists(), "nothing rendered");
}

#[test]
fn a_submodule_is_checked_out_in_every_fresh_checkout_from_the_repositorys_own_objects() {
    let repo = Repo::new();
    // A library repository, added as a submodule; the user's checkout has it initialized.
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
    lgit(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "-m",
        "lib",
    ]);
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
    // Its origin is gone: what the loop checks out comes from .git/modules, or nowhere.
    drop(lib);
    assert!(!Path::new(&url).exists());
    let agent = solver(&repo);
    let check = "test -f vendor/lib/lib.sh || { echo NO-SUBMODULE; exit 1; }; . vendor/lib/lib.sh && test \"$(cat solution.txt 2>/dev/null)\" = \"$(answer)\"";
    let dir = repo.init_loop(&agent, &[check], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        !base.lines().any(|l| l == "NO-SUBMODULE"),
        "the workspace has the submodule before the red gate: {base}"
    );
    assert_code(&out, 0, "DONE: the clean checkout has the submodule too");
    let log = read(&dir.join("iterations/000001/verify.log"));
    assert!(
        log.contains("in a clean checkout of the tree to commit")
            && !log.lines().any(|l| l == "NO-SUBMODULE"),
        "{log}"
    );
    let files = branch_files(&repo);
    assert!(files.contains(&"solution.txt".to_string()), "{files:?}");
    assert!(
        !files.iter().any(|f| f.starts_with("vendor/lib/")),
        "the submodule stays a submodule (a gitlink), never its files: {files:?}"
    );
    let gitlink = repo.git(&["ls-tree", "orbit/test-goal", "vendor/lib"]);
    assert!(gitlink.starts_with("160000 commit "), "{gitlink}");
}

/// Whether git-lfs is installed: required in CI (`.ci/run` installs it), else the LFS tests
/// say they are skipped.
fn git_lfs_available() -> bool {
    let ok = command("git")
        .args(["lfs", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "git-lfs is required in CI but not installed"
        );
        eprintln!("notice: git-lfs is not installed; skipping the LFS assertions");
    }
    ok
}

/// A repository whose data.bin is an LFS object (the repository's own LFS filter config).
fn lfs_repo() -> Repo {
    let repo = Repo::new();
    repo.git(&["lfs", "install", "--local"]);
    repo.git(&["lfs", "track", "*.bin"]);
    repo.write("data.bin", "THE-REAL-CONTENT\n");
    repo.git(&["add", ".gitattributes", "data.bin"]);
    repo.git(&["commit", "-q", "-m", "an LFS file"]);
    assert!(
        repo.git(&["cat-file", "-p", "HEAD:data.bin"])
            .starts_with("version https://git-lfs"),
        "committed as a pointer"
    );
    repo
}

fn lfs_agent(repo: &Repo) -> std::path::PathBuf {
    repo.agent(
        "solver",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
cp data.bin copy.txt
echo done > "$ORBIT_AGENT_DIR/done.md""#,
    )
}

#[test]
fn lfs_objects_the_repository_has_are_in_every_fresh_checkout() {
    if !git_lfs_available() {
        return;
    }
    let repo = lfs_repo();
    let agent = lfs_agent(&repo);
    let dir = repo.init_loop(&agent, &["grep -qx THE-REAL-CONTENT copy.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    assert_code(
        &out,
        0,
        "DONE on the real content, in the clean checkout too",
    );
    assert_eq!(repo.ws_read("data.bin"), "THE-REAL-CONTENT\n");
}

#[test]
fn a_pointer_only_clone_stops_with_the_fix_and_goes_on_with_it() {
    if !git_lfs_available() {
        return;
    }
    let repo = lfs_repo();
    // A pointer-only clone: the objects are not here, and there is no remote to fetch from.
    fs::remove_dir_all(repo.join(".git/lfs/objects")).unwrap();
    let agent = lfs_agent(&repo);
    let dir = repo.init_loop(&agent, &["grep -q git-lfs copy.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "stops in preflight");
    let said = text(&out);
    assert!(
        said.contains("the LFS objects are not in this repository")
            && said.contains("GIT_LFS_SKIP_SMUDGE=1"),
        "{said}"
    );
    assert!(
        !repo.ws().exists(),
        "the half-made workspace is gone, so the next start makes it anew"
    );
    // With the fix said, the loop goes on: the workspace holds the pointers.
    let again = repo.run_loop(
        &dir,
        &[],
        &[("MAX_ITERATIONS", "2"), ("GIT_LFS_SKIP_SMUDGE", "1")],
    );
    assert_code(&again, 0, "DONE on the pointer files");
    assert!(
        repo.ws_read("data.bin")
            .starts_with("version https://git-lfs")
    );
}

#[test]
fn a_regression_check_red_on_the_base_tree_names_what_differs_from_the_users_checkout() {
    if !command("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("notice: node is not installed; skipping");
        return;
    }
    let repo = Repo::new();
    repo.write(".gitignore", "node_modules/\n");
    repo.git(&["add", ".gitignore"]);
    repo.git(&["commit", "-q", "-m", "ignore node_modules"]);
    // The user's own installed dependency, broken: a workspace inside the checkout (where
    // --workspace still puts it) has none, so Node walks up the directory tree and finds
    // this one.
    repo.write(
        "node_modules/dep/index.js",
        "throw new Error('the dep of your checkout');\n",
    );
    let agent = repo.agent("never", "cat >/dev/null");
    let dir = repo.init_loop(
        &agent,
        &["true"],
        &[
            "--regression",
            "node -e 'require(\"dep\")'",
            "--workspace",
            ".orbit/.workspaces/test-goal",
        ],
    );
    let out = repo.run_loop(&dir, &[], &[("ALLOW_GREEN_START", "1")]);
    assert_code(&out, 2, "the regression check is red before any agent");
    let said = text(&out) + &read(&dir.join("runner.log"));
    let user_dep = repo.path().join("node_modules/dep/index.js");
    assert!(
        said.contains(
            "Your checkout has 1 ignored path(s) this fresh checkout lacks: node_modules/"
        ),
        "{said}"
    );
    assert!(
        said.contains("The checks' output names files of your checkout, not of the workspace: ")
            && said.contains(&user_dep.display().to_string()),
        "{said}"
    );
}

#[test]
fn a_relative_hooks_path_only_the_users_checkout_has_runs_for_the_loops_commits() {
    let repo = Repo::new();
    let marker = repo.bin.path().join("hook-ran");
    // As husky leaves it: core.hooksPath relative, its directory made by an install step
    // (ignored), so a fresh worktree lacks it.
    repo.write(".gitignore", ".hooks-gen/\n");
    repo.git(&["add", ".gitignore"]);
    repo.git(&["commit", "-q", "-m", "ignore the generated hooks"]);
    repo.write(
        ".hooks-gen/pre-commit",
        &format!(
            "#!/usr/bin/env bash\necho \"pre-commit in $PWD\" >> '{}'\n",
            marker.display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        repo.join(".hooks-gen/pre-commit"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    repo.git(&["config", "core.hooksPath", ".hooks-gen"]);
    let agent = repo.agent(
        "solver",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo ok > solution.txt
echo done > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &["test -f solution.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    assert_code(&out, 0, "DONE");
    let ran = read(&marker);
    assert!(
        ran.contains(&format!("pre-commit in {}", repo.ws().display())),
        "the project's hook ran for the loop's commit, in the workspace: {ran:?}"
    );
    assert!(
        read(&dir.join("runner.log")).contains("core.hooksPath is .hooks-gen (relative)"),
        "and the log says where the hooks came from"
    );
}

#[test]
fn a_check_whose_script_runner_or_program_is_missing_stops_in_preflight() {
    // As npm runs a package script: through sh (dash), which says "sh: 1: X: not found" and
    // exits 127 when node_modules/.bin is not there.
    let repo = Repo::new();
    let ran = repo.bin.path().join("agent-ran");
    let agent = repo.agent(
        "never",
        &format!("cat >/dev/null\ntouch '{}'", ran.display()),
    );
    let dir = repo.init_loop(&agent, &["sh -c 'ts-scripts-orbit-missing test'"], &[]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "a script runner not installed: preflight");
    let said = text(&out);
    assert!(
        said.contains("cannot run on the untouched tree")
            && said.contains("ts-scripts-orbit-missing: not found"),
        "{said}"
    );
    assert!(said.contains("--setup"), "the fix names the setup: {said}");
    assert!(!ran.exists(), "no agent ran");
    // A tracked script that cannot be executed: exit 126.
    let repo = Repo::new();
    repo.write("run-tests.sh", "#!/bin/sh\nexit 0\n");
    repo.git(&["add", "run-tests.sh"]);
    repo.git(&["commit", "-q", "-m", "a test script without its x bit"]);
    let agent = repo.agent("never", "cat >/dev/null");
    let dir = repo.init_loop(&agent, &["./run-tests.sh"], &["--no-auto-protect"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "a script that cannot be executed: preflight");
    assert!(text(&out).contains("Permission denied"), "{}", text(&out));
}

// ---- the setup's cache (loop.toml setup-inputs): the workspace's first setup, on the
// ---- untouched tree, kept in the loop directory's .setup-cache/ and copied into each
// ---- claim's clean checkout whose inputs are the same.

/// The setup of `project_with_deps` keyed by deps.lock (committed): it copies the lock too.
fn cached_setup(repo: &Repo, counter: &Path) -> String {
    repo.write("deps.lock", "v1\n");
    repo.git(&["add", "deps.lock"]);
    repo.git(&["commit", "-q", "-m", "the dependencies' lockfile"]);
    let setup = project_with_deps(repo, counter);
    setup.replacen("&& echo", "&& cp deps.lock .deps/lock && echo", 1)
}

/// The setup's runs the counter holds, without the DONE's adequacy measure's (its own
/// checkouts, after the DONE).
fn setup_runs(counter: &Path) -> Vec<String> {
    read(counter)
        .lines()
        .filter(|l| !l.contains("/orbit-adequacy-"))
        .map(str::to_string)
        .collect()
}

/// An agent that claims twice: its first claim holds a placeholder (rejected after the clean
/// checkout's checks passed), its second does not. With `lock`, it rewrites deps.lock.
fn two_claims(repo: &Repo, lock: Option<&str>) -> std::path::PathBuf {
    let bump = lock
        .map(|l| format!("echo '{l}' > deps.lock\n"))
        .unwrap_or_default();
    repo.agent(
        "twice",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo 42 > solution.txt
{bump}if [ "$ORBIT_ITERATION" = 1 ]; then echo 'TODO finish' > notes.txt; else rm -f notes.txt; fi
echo "solution.txt holds 42" > "$ORBIT_AGENT_DIR/done.md""#
        ),
    )
}

const COPIED: &str = "not run, its output on the untouched tree copied from .setup-cache/";

#[test]
fn each_claims_clean_checkout_takes_the_untouched_trees_setup_from_the_cache() {
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = cached_setup(&repo, &counter);
    let agent = two_claims(&repo, None);
    let dir = repo.init_loop(
        &agent,
        &[CHECK],
        &["--setup", &setup, "--setup-input", "deps.lock"],
    );
    assert!(read(&dir.join("loop.toml")).contains("setup-inputs = [\"deps.lock\"]"));
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE at the second claim");
    let rejected = events_named(&dir, "done_rejected");
    assert_eq!(
        rejected.len(),
        1,
        "the first claim was rejected: {rejected:?}"
    );
    // Two claims, two clean checkouts, and the setup ran once: in the workspace, before
    // any agent.
    let runs = setup_runs(&counter);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].ends_with("/test-goal"), "{runs:?}");
    for n in [1, 2] {
        let log = read(&dir.join(format!("iterations/{n:06}/setup.log")));
        assert!(log.contains(COPIED), "claim {n}: {log}");
        let verify = read(&dir.join(format!("iterations/{n:06}/verify.log")));
        let clean = verify
            .split("### verify run: in a clean checkout of the tree to commit")
            .nth(1)
            .unwrap_or_else(|| panic!("claim {n}: a clean checkout's run: {verify}"));
        assert!(
            clean.contains("1 passed, 0 failed") && !clean.lines().any(|l| l == "NO-SETUP"),
            "claim {n}: the checks ran on the copied setup: {verify}"
        );
    }
    assert!(
        !dir.join(".setup-cache").exists() && !dir.join(".setup-cache.sum").exists(),
        "the cache goes at DONE"
    );
    assert_records_agree(&dir);
}

#[test]
fn a_changed_setup_input_runs_the_setup_in_the_clean_checkout() {
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = cached_setup(&repo, &counter);
    let agent = two_claims(&repo, Some("v2"));
    let dir = repo.init_loop(
        &agent,
        &[CHECK],
        &["--setup", &setup, "--setup-input", "deps.lock"],
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE");
    let runs = setup_runs(&counter);
    assert_eq!(
        runs.len(),
        3,
        "the workspace's, then each claim's: {runs:?}"
    );
    assert!(
        runs[1..].iter().all(|r| r.ends_with("/test-goal.clean")),
        "{runs:?}"
    );
    for n in [1, 2] {
        let log = read(&dir.join(format!("iterations/{n:06}/setup.log")));
        assert!(
            !log.contains(COPIED)
                && log.contains("the setup's inputs differ from the untouched tree's"),
            "claim {n}: {log}"
        );
    }
    // The branch holds the agent's lockfile, and the checks that passed ran on its setup.
    assert_eq!(repo.git(&["show", "orbit/test-goal:deps.lock"]), "v2\n");
}

#[test]
fn a_setup_cache_changed_between_runs_is_refused_and_made_again_from_the_untouched_tree() {
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = cached_setup(&repo, &counter);
    let agent = repo.agent(
        "late",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
test "$ORBIT_ITERATION" -ge 2 || exit 0
echo 42 > solution.txt
echo "solution.txt holds 42" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(
        &agent,
        &[CHECK],
        &["--setup", &setup, "--setup-input", "deps.lock"],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "the first tick: no claim");
    // The attack: the cached test runner neutered (it passes anything) between runs.
    let cached = dir.join(".setup-cache/files/.deps/runner.sh");
    assert!(cached.is_file(), "the cache was made");
    let marker = repo.bin.path().join("neutered-ran");
    fs::write(
        &cached,
        format!("echo ran >> '{}'; exit 0\n", marker.display()),
    )
    .unwrap();
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE on the real runner");
    assert!(!marker.exists(), "the neutered runner never ran");
    let log = read(&dir.join("iterations/000002/setup.log"));
    assert!(
        log.contains("the setup cache's listing does not match what was kept (a file of it changed): discarded"),
        "{log}"
    );
    assert!(log.contains(COPIED), "made again, then taken: {log}");
    let runs = setup_runs(&counter);
    assert_eq!(
        runs.len(),
        2,
        "the workspace's, then one on the untouched tree in the clean checkout: {runs:?}"
    );
    assert!(runs[1].ends_with("/test-goal.clean"), "{runs:?}");
    let runner_log = read(&dir.join("runner.log"));
    assert!(runner_log.contains("discarded"), "{runner_log}");
}

#[test]
fn under_the_sandbox_neither_the_agent_nor_a_check_can_write_the_setup_cache() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = cached_setup(&repo, &counter);
    let setup = setup.replace(
        &format!("echo \"$PWD\" >> '{}'", counter.display()),
        &format!(
            "{{ echo \"$PWD\" >> '{c}' 2>/dev/null || true; }}",
            c = counter.display()
        ),
    );
    // The loop directory init makes; its cache's copy of the test runner, the target.
    let target = repo
        .join(".orbit/test-goal")
        .join(".setup-cache/files/.deps/runner.sh");
    let agent = repo.agent(
        "writer",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
if printf 'exit 0\n' > '{t}' 2>/dev/null; then echo WROTE > attack.txt; else echo REFUSED > attack.txt; fi
echo 42 > solution.txt
echo "solution.txt holds 42" > "$ORBIT_AGENT_DIR/done.md""#,
            t = target.display()
        ),
    );
    let check = format!(
        "if printf 'exit 0\\n' > '{t}'; then echo CHECK-WROTE; exit 1; fi; {CHECK}",
        t = target.display()
    );
    let dir = repo.init_loop(
        &agent,
        &[&check],
        &[
            "--setup",
            &setup,
            "--setup-input",
            "deps.lock",
            "--sandbox",
            "bwrap",
        ],
    );
    assert_eq!(
        dir.join(".setup-cache"),
        target.parent().unwrap().parent().unwrap().parent().unwrap()
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE");
    assert_eq!(
        repo.git(&["show", "orbit/test-goal:attack.txt"]),
        "REFUSED\n",
        "the agent tried and could not write the cache"
    );
    let verify = read(&dir.join("iterations/000001/verify.log"));
    assert!(
        verify.contains("Read-only file system") && !verify.lines().any(|l| l == "CHECK-WROTE"),
        "the check tried and could not write the cache: {verify}"
    );
    let log = read(&dir.join("iterations/000001/setup.log"));
    assert!(log.contains(COPIED), "the cache held, checked: {log}");
}

#[test]
fn each_new_candidate_worktree_takes_the_untouched_trees_setup_from_the_cache() {
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = cached_setup(&repo, &counter);
    // Each candidate needs the setup's test runner in its own worktree, and gets it right
    // only in the second iteration (the first iteration's claims fail the checks).
    let agent = repo.agent(
        "slow",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
test -f .deps/runner.sh || { echo "no setup in $PWD" >&2; exit 1; }
if [ "$ORBIT_ITERATION" -ge 2 ]; then echo 42 > solution.txt; else echo 41 > solution.txt; fi
echo "solution.txt holds the answer" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(
        &agent,
        &[CHECK],
        &[
            "--setup",
            &setup,
            "--setup-input",
            "deps.lock",
            "--candidates",
            "2",
        ],
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE in the second iteration");
    // The setup ran once, in the workspace on the untouched tree: each candidate's new
    // worktree and the claim's clean checkout took the cache's copy.
    let runs = setup_runs(&counter);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].ends_with("/test-goal"), "{runs:?}");
    let base = read(&dir.join("iterations/baseline/setup.log"));
    for k in [1, 2] {
        let copied = format!("### setup of {}.c{k} (", repo.ws().display());
        let at = base
            .find(&copied)
            .unwrap_or_else(|| panic!("candidate {k} was set up: {base}"));
        assert!(
            base[at..]
                .lines()
                .nth(1)
                .is_some_and(|l| l.contains(COPIED)),
            "candidate {k} took the cache's copy: {base}"
        );
    }
    let wheres: Vec<String> = events_named(&dir, "setup_done")
        .iter()
        .map(|e| e.value["where"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        wheres.iter().any(|w| w == "candidate-1") && wheres.iter().any(|w| w == "candidate-2"),
        "{wheres:?}"
    );
    assert!(
        !branch_files(&repo).iter().any(|f| f.starts_with(".deps")),
        "what the cache gave a candidate is never committed"
    );
    assert_records_agree(&dir);
}

#[test]
fn a_candidate_does_not_take_a_setup_cache_changed_between_runs() {
    let repo = Repo::new();
    let counter = repo.bin.path().join("setup-runs");
    let setup = cached_setup(&repo, &counter);
    let agent = repo.agent(
        "late",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
test "$ORBIT_ITERATION" -ge 2 || exit 0
echo 42 > solution.txt
echo "solution.txt holds 42" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(
        &agent,
        &[CHECK],
        &[
            "--setup",
            &setup,
            "--setup-input",
            "deps.lock",
            "--candidates",
            "2",
        ],
    );
    // A first tick sets the workspace up (and keeps its cache), then stops.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "the first tick: no claim");
    // Its candidates' worktrees go, so the next tick makes new ones.
    for k in [1, 2] {
        let cws = format!("{}.c{k}", repo.ws().display());
        repo.git(&["worktree", "remove", "-f", "-f", &cws]);
        fs::remove_file(dir.join(format!(".setup-paths.c{k}"))).ok();
    }
    // The attack: the cached test runner neutered (it passes anything) between runs.
    let cached = dir.join(".setup-cache/files/.deps/runner.sh");
    assert!(cached.is_file(), "the cache was made");
    let marker = repo.bin.path().join("neutered-ran");
    fs::write(
        &cached,
        format!("echo ran >> '{}'; exit 0\n", marker.display()),
    )
    .unwrap();
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3")]);
    assert_code(&out, 0, "DONE on the real runner");
    assert!(!marker.exists(), "the neutered runner never ran");
    let base = read(&dir.join("iterations/baseline/setup.log"));
    assert!(
        base.contains("the setup cache's listing does not match what was kept (a file of it changed): discarded"),
        "{base}"
    );
    let runs = setup_runs(&counter);
    assert!(
        runs.iter()
            .any(|r| r.ends_with("/test-goal.c1") || r.ends_with("/test-goal.c2")),
        "a candidate ran the setup instead: {runs:?}"
    );
}
