//! More real ecosystems looped to DONE under the sandbox and its network allowlist, each
//! from `orbit init` without `--setup`: the init finds the ecosystem from its lockfile,
//! applies the setup that fetches the dependencies with the network (on the untouched tree,
//! as the user's command) and writes the ecosystem's offline switches to loop.toml
//! (`offline-env`); the checks, the agent and the clean checkout's setup then run offline.
//! A Go module whose dependency comes from a module proxy (a `file://` one here, so the
//! test needs no network), a Rust workspace of several members, a pnpm workspace and a uv
//! project, and a Maven project whose plugins and JUnit come from a `file://` repository
//! (Debian's /usr/share/maven-repo, as .ci/run installs it) standing for Maven Central.

use crate::projects::{
    assert_sandboxed, assert_set_up_in_both, cargo_path, fixture, node_available, project_repo,
    read,
};
use crate::support::*;
use std::path::{Path, PathBuf};

/// `orbit init` without --setup, under bubblewrap with the network allowlist (the
/// default), the check `check`: the loop directory and what init said.
fn init_detected(repo: &Repo, agent: &Path, check: &str, path: &str) -> (PathBuf, String) {
    let exec = agent.display().to_string();
    let mut cmd = command(orbit_bin());
    cmd.args(["init", "test goal", "--engine", "custom", "--exec", &exec])
        .args(["--verify", check, "--sandbox", "bwrap", "--adequacy", "off"])
        .current_dir(repo.path())
        .env("PATH", path);
    let out = run_bounded(cmd, std::time::Duration::from_secs(60));
    assert_ok(&out, "orbit init");
    (repo.join(".orbit/test-goal"), text(&out))
}

/// What a loop set up by the detection shows: init said the ecosystem, its setup and its
/// offline switches in one line and wrote them to loop.toml; the loop ran under bubblewrap
/// with the network allowlist, reached DONE, and set up the workspace (with the network)
/// and the clean checkout of the claim (offline).
fn assert_detected_and_done(
    repo: &Repo,
    dir: &Path,
    said: &str,
    out: &std::process::Output,
    (eco, setup, offline): (&str, &str, &str),
) {
    let line = said
        .lines()
        .find(|l| l.starts_with("orbit: dependencies: "))
        .unwrap_or_else(|| panic!("init says what it found: {said}"));
    assert!(
        line.contains(eco) && line.contains(setup) && line.contains(offline),
        "{line}"
    );
    let toml = read(&dir.join("loop.toml"));
    assert!(
        toml.contains(&format!("setup = [\"{setup}\"]")) && toml.contains(offline),
        "{toml}"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "DONE: {}\n--- the first claim's verify.log\n{}",
        text(out),
        read(&dir.join("iterations/000001/verify.log"))
    );
    assert_sandboxed(dir);
    let log = read(&dir.join("runner.log"));
    assert!(log.contains("sandbox: network allowlist"), "{log}");
    assert_set_up_in_both(repo, dir);
    assert_records_agree(dir);
}

fn tool_on(path: &str, tool: &str) -> bool {
    let mut cmd = command(tool);
    cmd.arg(if tool == "go" { "version" } else { "--version" })
        .env("PATH", path);
    cmd.output().map(|o| o.status.success()).unwrap_or(false)
}

// ---- Go: a module whose dependency is fetched from a module proxy

const GO_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed -i 's/sum += l.UnitPrice$/sum += l.UnitPrice.Times(l.Quantity)/' shop.go
# The hostile part: plant a change in the module cache the checks read (its files are
# writable by their mode here, -modcacherw): the sandbox shows HOME read-only.
f=$HOME/go/pkg/mod/example.com/money@v1.0.0/money.go
if [ -f "$f" ] && echo '// planted' >> "$f" 2>/dev/null; then echo "PLANT WRITTEN" >&2; else echo "PLANT REFUSED" >&2; fi
echo "go test passes: Total multiplies by the quantity" > "$ORBIT_AGENT_DIR/done.md""#;

#[test]
fn a_go_module_is_set_up_by_the_detection_and_its_checks_build_offline_from_the_module_cache() {
    let path = std::env::var("PATH").unwrap_or_default();
    if !(present_or_skipped(tool_on(&path, "go"), "ORBIT_REQUIRE_GO", "go") && bwrap_available()) {
        return;
    }
    let repo = project_repo("go");
    let agent = repo.agent("fixer", GO_AGENT);
    let (dir, said) = init_detected(&repo, &agent, "go test ./...", &repo.path_env());
    // The module proxy is a directory (file://): the setup's `go mod download` reads it as
    // it would read proxy.golang.org. A HOME of the test's own holds the module cache.
    let home = tempfile::tempdir().unwrap();
    let proxy = format!("file://{}", fixture("go-proxy").display());
    let home_s = home.path().display().to_string();
    let out = repo.run_loop(
        &dir,
        &[],
        &[
            ("MAX_ITERATIONS", "3"),
            ("HOME", &home_s),
            ("GOPROXY", &proxy),
            ("GOSUMDB", "off"),
            ("GOFLAGS", "-modcacherw"),
        ],
    );
    assert_detected_and_done(
        &repo,
        &dir,
        &said,
        &out,
        ("go (go.sum)", "go mod download", "GOPROXY=off"),
    );
    // The dependency is in the module cache the first setup filled, which the checks read
    // (read-only) with no proxy at all.
    assert!(
        home.path()
            .join("go/pkg/mod/example.com/money@v1.0.0/money.go")
            .is_file()
    );
    let cached = read(
        &home
            .path()
            .join("go/pkg/mod/example.com/money@v1.0.0/money.go"),
    );
    assert!(!cached.contains("planted"), "{cached}");
    let agent_log = read(&dir.join("iterations/000001/agent.log"));
    assert!(
        agent_log.contains("PLANT REFUSED") && !agent_log.contains("PLANT WRITTEN"),
        "the agent tried to plant in the module cache and was refused: {agent_log}"
    );
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("--- FAIL: TestQuantityMultipliesThePrice")
            && !base.contains("module lookup disabled"),
        "the red gate ran on the fetched module, offline: {base}"
    );
    let fixed = repo.git(&["show", "orbit/test-goal:shop.go"]);
    assert!(fixed.contains("Times(l.Quantity)"), "{fixed}");
}

#[test]
fn with_no_setup_init_applies_none_and_writes_no_offline_switches() {
    // --no-setup: the detection is said as a suggestion only; loop.toml holds no setup and
    // no offline switches. With --sandbox none, the same.
    let repo = project_repo("go");
    let agent = repo.agent("fixer", GO_AGENT);
    for (extra, dir) in [
        (&["--sandbox", "bwrap", "--no-setup"][..], ".orbit/a"),
        (&["--sandbox", "none"][..], ".orbit/b"),
    ] {
        let exec = agent.display().to_string();
        let mut args = vec!["init", "goal", "--engine", "custom", "--exec", &exec];
        args.extend_from_slice(&["--verify", "go test ./..."]);
        args.extend_from_slice(&["--dir", dir]);
        args.extend_from_slice(extra);
        let out = repo.orbit(&args);
        assert_ok(&out, "orbit init");
        assert!(
            !text(&out).contains("orbit: dependencies:"),
            "{}",
            text(&out)
        );
        let toml = read(&repo.join(dir).join("loop.toml"));
        assert!(
            !toml.contains("setup =") && !toml.contains("offline-env"),
            "{toml}"
        );
    }
    // --no-setup with --setup is refused.
    let exec = agent.display().to_string();
    let both = repo.orbit(&[
        "init",
        "goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "true",
        "--dir",
        ".orbit/c",
        "--setup",
        "make",
        "--no-setup",
    ]);
    assert_code(&both, 2, "--setup and --no-setup");
}

#[test]
fn with_no_setup_a_go_modules_checks_build_in_the_sandbox_with_a_private_build_cache() {
    // A user who built the project before has its modules in the module cache; with
    // --no-setup no offline switch is written, so nothing names a build cache: Go's default
    // (under HOME) is read-only in the sandbox, and a check that cannot write it fails for
    // that, not for the project. The sandbox gives every run a private one.
    let path = std::env::var("PATH").unwrap_or_default();
    if !(present_or_skipped(tool_on(&path, "go"), "ORBIT_REQUIRE_GO", "go") && bwrap_available()) {
        return;
    }
    let repo = project_repo("go");
    let agent = repo.agent("fixer", GO_AGENT);
    let home = tempfile::tempdir().unwrap();
    let home_s = home.path().display().to_string();
    let proxy = format!("file://{}", fixture("go-proxy").display());
    // The user's own earlier build: the module cache and Go's build cache under HOME.
    let mut build = command("go");
    build
        .args(["build", "./..."])
        .current_dir(repo.path())
        .env("HOME", &home_s)
        .env("GOPROXY", &proxy)
        .env("GOSUMDB", "off")
        .env("GOFLAGS", "-modcacherw")
        .env_remove("GOCACHE");
    assert_ok(
        &run_bounded(build, std::time::Duration::from_secs(120)),
        "go build",
    );
    assert!(home.path().join(".cache/go-build").is_dir());
    let exec = agent.display().to_string();
    let out = repo.orbit(&[
        "init",
        "goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "go test ./...",
        "--sandbox",
        "bwrap",
        "--no-setup",
        "--adequacy",
        "off",
    ]);
    assert_ok(&out, "orbit init");
    let dir = repo.join(".orbit/goal");
    let out = repo.run_loop(
        &dir,
        &[],
        &[
            ("MAX_ITERATIONS", "2"),
            ("HOME", &home_s),
            ("GOPROXY", "off"),
            ("GOSUMDB", "off"),
            ("GOCACHE", ""),
        ],
    );
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        !base.contains("read-only file system") && !base.contains("GOCACHE"),
        "the red gate's check could not write a build cache: {base}"
    );
    assert!(
        base.contains("--- FAIL: TestQuantityMultipliesThePrice"),
        "the red gate ran the project's tests: {base}"
    );
    assert_code(&out, 0, "DONE");
    assert_sandboxed(&dir);
    let fixed = repo.git(&["show", "orbit/goal:shop.go"]);
    assert!(fixed.contains("Times(l.Quantity)"), "{fixed}");
}

// ---- Rust: a workspace of several members

const RUST_WS_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed -i 's/units::millimetres(m, 0)/units::millimetres(m, mm)/; s/&(m, _mm)/\&(m, mm)/' report/src/lib.rs
echo "cargo test passes: the millimetres count" > "$ORBIT_AGENT_DIR/done.md""#;

#[test]
fn a_rust_workspace_of_several_members_is_set_up_by_the_detection_and_tested_offline() {
    if !bwrap_available() {
        return;
    }
    let repo = project_repo("rust-workspace");
    let agent = repo.agent("fixer", RUST_WS_AGENT);
    let path = cargo_path(&repo);
    let (dir, said) = init_detected(&repo, &agent, "cargo test --workspace", &path);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3"), ("PATH", &path)]);
    assert_detected_and_done(
        &repo,
        &dir,
        &said,
        &out,
        (
            "cargo (Cargo.lock)",
            "cargo fetch",
            "CARGO_NET_OFFLINE=true",
        ),
    );
    // Both members were tested, in the workspace and in the clean checkout.
    let log = read(&dir.join("iterations/000001/verify.log"));
    assert!(
        log.contains("Running unittests src/lib.rs (target/debug/deps/report-")
            && log.contains("Running unittests src/lib.rs (target/debug/deps/units-")
            && log.contains("### verify run: in a clean checkout of the tree to commit"),
        "{log}"
    );
    let all = repo.git(&["log", "--name-only", "--format=", "main..orbit/test-goal"]);
    assert_eq!(all.trim(), "report/src/lib.rs", "the loop's commits");
}

// ---- Node: a pnpm workspace

/// PATH with pnpm (pinned, as .ci/run installs it into /opt/orbit-pnpm, or ORBIT_PNPM's
/// directory) after the fake agents; None when pnpm or node is missing.
fn pnpm_path(repo: &Repo) -> Option<String> {
    let dir = std::env::var("ORBIT_PNPM").unwrap_or_else(|_| "/opt/orbit-pnpm/bin".into());
    let path = format!("{}:{dir}", repo.path_env());
    let ok = node_available() && tool_on(&path, "pnpm");
    present_or_skipped(ok, "ORBIT_REQUIRE_PNPM", "pnpm (in /opt/orbit-pnpm/bin)").then_some(path)
}

const PNPM_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed -i 's/greet(typed)/greet(typed.trim())/' packages/app/index.js
echo "pnpm test passes: welcome() trims the typed name" > "$ORBIT_AGENT_DIR/done.md""#;

#[test]
fn a_pnpm_workspace_is_set_up_by_the_detection_and_its_members_link_each_other_offline() {
    let repo = project_repo("pnpm-workspace");
    let Some(path) = pnpm_path(&repo) else {
        return;
    };
    if !bwrap_available() {
        return;
    }
    let agent = repo.agent("fixer", PNPM_AGENT);
    let (dir, said) = init_detected(&repo, &agent, "pnpm test", &path);
    let out = repo.run_loop(
        &dir,
        &[],
        &[
            ("MAX_ITERATIONS", "3"),
            ("PATH", &path),
            ("npm_config_update_notifier", "false"),
        ],
    );
    assert_detected_and_done(
        &repo,
        &dir,
        &said,
        &out,
        (
            "pnpm (pnpm-lock.yaml)",
            "pnpm install --frozen-lockfile",
            "npm_config_offline=true",
        ),
    );
    // The member's dependency is the workspace's own other member, linked by pnpm.
    let linked = std::fs::canonicalize(repo.ws().join("packages/app/node_modules/@shop/greet"));
    assert_eq!(
        linked.unwrap(),
        std::fs::canonicalize(repo.ws().join("packages/greet")).unwrap()
    );
    let all = repo.git(&["log", "--name-only", "--format=", "main..orbit/test-goal"]);
    assert_eq!(all.trim(), "packages/app/index.js", "the loop's commits");
}

// ---- Python: a uv project

/// PATH with uv (pinned, as .ci/run installs it into /opt/orbit-uv, or ORBIT_UV's
/// directory) after the fake agents; None when it is missing.
fn uv_path(repo: &Repo) -> Option<String> {
    let dir = std::env::var("ORBIT_UV").unwrap_or_else(|_| "/opt/orbit-uv/bin".into());
    let path = format!("{}:{dir}", repo.path_env());
    let ok = tool_on(&path, "uv");
    present_or_skipped(ok, "ORBIT_REQUIRE_UV", "uv (in /opt/orbit-uv/bin)").then_some(path)
}

const UV_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed -i 's|sum(values) // len(values)|sum(values) / len(values)|' tally.py
echo "the tests pass: mean() divides without flooring" > "$ORBIT_AGENT_DIR/done.md""#;

#[test]
fn a_uv_project_is_set_up_by_the_detection_and_its_checks_run_in_its_venv_offline() {
    let repo = project_repo("uv");
    let Some(path) = uv_path(&repo) else {
        return;
    };
    if !bwrap_available() {
        return;
    }
    let agent = repo.agent("fixer", UV_AGENT);
    let (dir, said) = init_detected(&repo, &agent, "uv run python -m unittest -v", &path);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3"), ("PATH", &path)]);
    assert_detected_and_done(
        &repo,
        &dir,
        &said,
        &out,
        ("uv (uv.lock)", "uv sync --frozen", "UV_OFFLINE=1"),
    );
    let base = read(&dir.join("iterations/baseline/verify.log"));
    let line = |name: &str| {
        base.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("test_runs_in_the_projects_own_venv").ends_with("... ok")
            && line("test_mean_keeps_the_fraction").ends_with("... FAIL"),
        "the red gate ran in the workspace's own .venv: {base}"
    );
    let all = repo.git(&["log", "--name-only", "--format=", "main..orbit/test-goal"]);
    assert_eq!(all.trim(), "tally.py", "the loop's commits");
}

// ---- Java: a Maven project, its plugins and JUnit from a repository standing for Maven Central

const MAVEN_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed -i 's/sum += unitPrices\[i\];/sum += unitPrices[i] * quantities[i];/' src/main/java/shop/Cart.java
# The hostile part: plant a change in the local repository the checks read (under HOME,
# which the sandbox shows read-only).
f=$(find "$HOME/.m2/repository/junit/junit" -name '*.pom' | head -n 1)
if [ -n "$f" ] && echo '<!-- planted -->' >> "$f" 2>/dev/null; then echo "PLANT WRITTEN" >&2; else echo "PLANT REFUSED" >&2; fi
echo "mvn test passes: total multiplies by the quantity" > "$ORBIT_AGENT_DIR/done.md""#;

/// Whether Maven, a JDK and the Debian repository's plugins and JUnit are here. CI sets
/// ORBIT_REQUIRE_MAVEN=1 (.ci/run installs maven, junit4 and the plugins' packages).
fn maven_available(path: &str) -> bool {
    let repo = Path::new("/usr/share/maven-repo");
    let ok = tool_on(path, "mvn")
        && tool_on(path, "javac")
        && [
            "junit/junit/4.13.2",
            "org/apache/maven/plugins/maven-compiler-plugin/3.10.1",
            "org/apache/maven/plugins/maven-resources-plugin/3.3.0",
            "org/apache/maven/plugins/maven-surefire-plugin/2.22.3",
            "org/apache/maven/surefire/surefire-junit4",
        ]
        .iter()
        .all(|p| repo.join(p).is_dir());
    present_or_skipped(
        ok,
        "ORBIT_REQUIRE_MAVEN",
        "maven, a JDK and /usr/share/maven-repo's plugins and junit4",
    )
}

#[test]
fn a_maven_project_is_set_up_by_the_detection_and_its_checks_run_with_no_repository_at_all() {
    let path = std::env::var("PATH").unwrap_or_default();
    if !(maven_available(&path) && bwrap_available()) {
        return;
    }
    let repo = project_repo("maven");
    let agent = repo.agent("fixer", MAVEN_AGENT);
    let (dir, said) = init_detected(&repo, &agent, "mvn -B test", &repo.path_env());
    // The remote repository is a directory the setup reads as Maven Central (file://),
    // through a link under a directory of its own outside HOME: the sandbox's private /tmp
    // (or TMPDIR) hides it, so a check can reach no repository but the local one the setup
    // filled. Maven takes its HOME from user.home, not $HOME: MAVEN_OPTS names the test's.
    let home = tempfile::tempdir().unwrap();
    let central = tempfile::tempdir().unwrap();
    let link = central.path().join("central");
    std::os::unix::fs::symlink("/usr/share/maven-repo", &link).unwrap();
    std::fs::create_dir_all(home.path().join(".m2")).unwrap();
    std::fs::write(
        home.path().join(".m2/settings.xml"),
        format!(
            "<settings><mirrors><mirror><id>central-stand-in</id><mirrorOf>*</mirrorOf><url>file://{}</url></mirror></mirrors></settings>\n",
            link.display()
        ),
    )
    .unwrap();
    let home_s = home.path().display().to_string();
    let opts = format!("-Duser.home={home_s}");
    let out = repo.run_loop_within(
        &dir,
        &[],
        &[
            ("MAX_ITERATIONS", "3"),
            ("HOME", &home_s),
            ("MAVEN_OPTS", &opts),
        ],
        std::time::Duration::from_secs(400),
    );
    assert_detected_and_done(
        &repo,
        &dir,
        &said,
        &out,
        (
            "maven (pom.xml)",
            "mvn -B -Dmaven.test.failure.ignore=true test",
            "MAVEN_ARGS=--offline",
        ),
    );
    // The first setup fetched from the stand-in; no check run (nor the clean checkout's
    // setup, offline in the sandbox) asked a repository for anything.
    let setup = read(&dir.join("iterations/baseline/setup.log"));
    assert!(
        setup.contains("Downloaded from central-stand-in: file://"),
        "{setup}"
    );
    for log in [
        "iterations/baseline/verify.log",
        "iterations/000001/verify.log",
        "iterations/000001/setup.log",
    ] {
        let text = read(&dir.join(log));
        assert!(
            !text.contains("Downloading from") && !text.contains("Downloaded from"),
            "{log} asked a repository: {text}"
        );
    }
    let base = read(&dir.join("iterations/baseline/verify.log"));
    assert!(
        base.contains("CartTest.quantityMultipliesThePrice")
            && base.contains("Tests run: 2, Failures: 1"),
        "the red gate ran the project's tests on the fetched plugins: {base}"
    );
    let agent_log = read(&dir.join("iterations/000001/agent.log"));
    assert!(
        agent_log.contains("PLANT REFUSED") && !agent_log.contains("PLANT WRITTEN"),
        "the agent tried to plant in the local repository and was refused: {agent_log}"
    );
    let all = repo.git(&["log", "--name-only", "--format=", "main..orbit/test-goal"]);
    assert_eq!(
        all.trim(),
        "src/main/java/shop/Cart.java",
        "the loop's commits (target/ never)"
    );
}

// ---- Java: a repository the network allowlist refuses

/// The host of the repository the Maven checks below ask for: a name that resolves nowhere
/// (`.test` is reserved), so only the sandbox's proxy can answer for it, by refusing it.
const MAVEN_REFUSED: &str = "repo.orbit.test:8081";

/// A HOME of the test's own whose settings.xml sends every repository to a mirror at
/// MAVEN_REFUSED, and whose local repository is empty: a check's first plugin is fetched
/// from there. Its path, and JAVA_TOOL_OPTIONS naming it as the JVM's user.home (Maven
/// reads settings.xml and the local repository from user.home, not from $HOME): a value of
/// the user's own, which the sandbox must keep.
fn maven_mirror_home() -> (tempfile::TempDir, String, String) {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".m2/repository")).unwrap();
    std::fs::write(
        home.path().join(".m2/settings.xml"),
        format!(
            "<settings><mirrors><mirror><id>corp-mirror</id><mirrorOf>*</mirrorOf><url>http://{MAVEN_REFUSED}/maven2</url></mirror></mirrors></settings>\n"
        ),
    )
    .unwrap();
    let home_s = home.path().display().to_string();
    let opts = format!("-Duser.home={home_s}");
    (home, home_s, opts)
}

/// Whether Maven and a JDK are here (the checks below fetch nothing that exists).
fn maven_tools(path: &str) -> bool {
    present_or_skipped(
        tool_on(path, "mvn") && tool_on(path, "javac"),
        "ORBIT_REQUIRE_MAVEN",
        "maven and a JDK",
    )
}

/// A Maven project looped under the sandbox with no setup, its checks `checks`, the user's
/// HOME and JAVA_TOOL_OPTIONS those of [`maven_mirror_home`], run once: the loop directory,
/// the repository, what the run said with the red gate's verify.log, and its exit code.
fn maven_red_gate(checks: &[&str]) -> Option<(PathBuf, Repo, String, Option<i32>)> {
    let path = std::env::var("PATH").unwrap_or_default();
    if !(maven_tools(&path) && bwrap_available()) {
        return None;
    }
    let repo = project_repo("maven");
    let agent = repo.agent(
        "never",
        "cat >/dev/null; touch \"$ORBIT_WORKSPACE/agent-ran\"",
    );
    let dir = repo.init_loop(&agent, checks, &["--sandbox", "bwrap", "--no-setup"]);
    let (_home, home_s, opts) = maven_mirror_home();
    let out = repo.run_loop_within(
        &dir,
        &["--once"],
        &[("HOME", &home_s), ("JAVA_TOOL_OPTIONS", &opts)],
        std::time::Duration::from_secs(300),
    );
    let verify = read(&dir.join("iterations/baseline/verify.log"));
    let all = format!("{}\n--- verify.log\n{verify}", text(&out));
    assert!(!repo.ws().join("agent-ran").exists(), "no agent ran: {all}");
    Some((dir, repo, all, out.status.code()))
}

#[test]
fn a_maven_check_that_fetches_from_a_host_the_allowlist_refuses_stops_at_the_red_gate_naming_it() {
    // The check's local repository is one it can write (the run's private /tmp), so Maven
    // asks the mirror for its first plugin: through the sandbox's proxy, which refuses it.
    let Some((dir, _repo, all, code)) = maven_red_gate(&["mvn -B -Dmaven.repo.local=/tmp/m2 test"])
    else {
        return;
    };
    assert_eq!(code, Some(2), "the red gate, before any agent: {all}");
    assert!(
        all.contains(&format!("reached for {MAVEN_REFUSED}"))
            && all.contains(&format!("--allow-host {MAVEN_REFUSED}"))
            && all.contains("allow-hosts"),
        "{all}"
    );
    // The JVM asked the proxy, which refused it and recorded it; Maven read the user's
    // settings.xml (its mirror is the host refused): the user's JAVA_TOOL_OPTIONS was kept.
    let net = read(&dir.join("iterations/baseline/net.log"));
    assert!(
        net.contains(&format!("baseline:check refused {MAVEN_REFUSED}")),
        "{net}\n{all}"
    );
    assert!(
        all.contains(&format!(
            "Downloading from corp-mirror: http://{MAVEN_REFUSED}/"
        )),
        "{all}"
    );
}

/// What the red gate says of a Maven check that cannot fetch its first plugin from the
/// mirror at all (offline, or its local repository read-only under the sandbox): the check
/// cannot run, whatever the agent did; the repository it needed, its host, and the fix: a
/// setup that fetches what the check needs (with the network, on the user's tree).
fn assert_maven_cannot_fetch(all: &str, code: Option<i32>, why: &str) {
    assert_eq!(code, Some(2), "the red gate, before any agent: {all}");
    assert!(
        all.contains("the check mvn-b")
            && all.contains("cannot run on the untouched tree")
            && all.contains(why)
            && all.contains(&format!("corp-mirror (http://{MAVEN_REFUSED}/maven2)"))
            && all.contains("mvn -B -Dmaven.test.failure.ignore=true verify")
            && all.contains("setup = [")
            && all.contains(&format!("--allow-host {MAVEN_REFUSED}")),
        "{all}"
    );
}

#[test]
fn a_maven_check_run_offline_without_what_it_needs_stops_at_the_red_gate_naming_the_repository() {
    // MAVEN_ARGS=--offline (offline-env) is what a Maven 3.9 check runs with; -o is the
    // same mode on any Maven.
    let Some((_dir, _repo, all, code)) = maven_red_gate(&["mvn -B -o test"]) else {
        return;
    };
    assert_maven_cannot_fetch(&all, code, "Maven runs offline");
    assert!(
        all.contains("Check it by hand with bash"),
        "offline by hand too: {all}"
    );
}

#[test]
fn a_maven_check_whose_local_repository_is_read_only_stops_at_the_red_gate_naming_the_repository() {
    // The local repository under HOME, which the sandbox shows read-only: Maven cannot
    // write what it would fetch, and fails before it asks the mirror.
    let Some((_dir, _repo, all, code)) = maven_red_gate(&["mvn -B test"]) else {
        return;
    };
    assert_maven_cannot_fetch(&all, code, "read-only");
    assert!(
        !all.contains("Check it by hand with bash"),
        "by hand, outside the sandbox, it would fetch: {all}"
    );
}

/// A Java program that starts an HTTP server of its own on the loopback and fetches a page
/// from it (by 127.0.0.1 and by localhost), then one from MAVEN_REFUSED, each with the JDK's
/// own client (HttpURLConnection, which reads the proxy properties), printing what came
/// back.
const JAVA_PROBE: &str = r#"import com.sun.net.httpserver.HttpServer;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.URL;

public class Probe {
    public static void main(String[] args) throws Exception {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        s.createContext("/", x -> {
            byte[] b = "hello-own".getBytes();
            x.sendResponseHeaders(200, b.length);
            x.getResponseBody().write(b);
            x.close();
        });
        s.start();
        int port = s.getAddress().getPort();
        System.out.println("own by address: " + get("http://127.0.0.1:" + port + "/"));
        System.out.println("own by name: " + get("http://localhost:" + port + "/"));
        System.out.println("remote: " + get("http://" + args[0] + "/maven2/"));
        s.stop(0);
    }

    static String get(String u) {
        try {
            HttpURLConnection c = (HttpURLConnection) new URL(u).openConnection();
            c.setConnectTimeout(10000);
            c.setReadTimeout(10000);
            int code = c.getResponseCode();
            InputStream in = code < 400 ? c.getInputStream() : c.getErrorStream();
            return code + " " + (in == null ? "" : new String(in.readAllBytes()).trim());
        } catch (Exception e) {
            return e.toString();
        }
    }
}
"#;

#[test]
fn a_jvm_under_the_sandbox_asks_the_proxy_for_a_host_and_reaches_its_own_loopback_straight() {
    let path = std::env::var("PATH").unwrap_or_default();
    if !(maven_tools(&path) && bwrap_available()) {
        return;
    }
    let repo = Repo::new();
    repo.write("Probe.java", JAVA_PROBE);
    repo.git(&["add", "Probe.java"]);
    repo.git(&["commit", "-q", "-m", "probe"]);
    let agent = repo.agent(
        "never",
        "cat >/dev/null; touch \"$ORBIT_WORKSPACE/agent-ran\"",
    );
    let check = format!("java Probe.java {MAVEN_REFUSED}");
    let dir = repo.init_loop(&agent, &[&check], &["--sandbox", "bwrap"]);
    // The user's own options: one of them would send every .test host straight, around
    // the proxy (as NO_PROXY would, which the sandbox clears); the proxy's properties come
    // after it, so the last word is theirs.
    let out = repo.run_loop(
        &dir,
        &["--once"],
        &[("JAVA_TOOL_OPTIONS", "-Dhttp.nonProxyHosts=*.test")],
    );
    let verify = read(&dir.join("iterations/baseline/verify.log"));
    let all = format!("{}\n--- verify.log\n{verify}", text(&out));
    assert_eq!(out.status.code(), Some(2), "the red gate: {all}");
    assert!(
        all.contains(&format!("reached for {MAVEN_REFUSED}"))
            && all.contains(&format!("--allow-host {MAVEN_REFUSED}")),
        "{all}"
    );
    assert!(!repo.ws().join("agent-ran").exists(), "no agent ran: {all}");
    assert!(
        verify.contains(&format!(
            "remote: 403 orbit: the sandbox refused {MAVEN_REFUSED}"
        )) && verify.contains("own by address: 200 hello-own")
            && verify.contains("own by name: 200 hello-own"),
        "the host through the proxy, the program's own server straight: {verify}"
    );
    let net = read(&dir.join("iterations/baseline/net.log"));
    assert!(
        net.contains(&format!("baseline:check refused {MAVEN_REFUSED}")),
        "{net}"
    );
}
