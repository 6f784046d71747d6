//! Checks that cannot run because of where they live or what they need, executed for real
//! (bubblewrap where the sandbox is involved): a program under `/tmp` (each sandboxed run
//! gets its own empty one), an interpreter that is missing or hidden, a host the sandbox's
//! network does not give the checks. Each stops the loop at the red gate (preflight, exit 2)
//! with the path or host and its fix, before any agent runs: never a red start, never the
//! project's fault. An honest failure of the project's own check stays a red start.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::net::{CLIENT, Server};
use crate::support::{
    Repo, assert_code, assert_ok, bwrap_available, events_named, state_value, text,
};

/// An agent that leaves a mark in the workspace when it runs, and claims DONE: a loop that
/// took a check for a red start lets it run.
fn marking_agent(repo: &Repo) -> PathBuf {
    repo.agent(
        "marker",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\ntouch \"$ORBIT_WORKSPACE/agent-ran\"\necho fixed > fixed.txt\necho done > \"$ORBIT_AGENT_DIR/done.md\"",
    )
}

/// An executable script `name` in `dir` (outside the repository), with `body`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, body).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A directory under /tmp, outside the repository (the sandbox hides it from every run).
fn tmp_outside() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("orbit-outside-")
        .tempdir_in("/tmp")
        .unwrap();
    // The runner compares paths as the kernel sees them.
    assert!(fs::canonicalize(d.path()).unwrap().starts_with("/tmp/"));
    d
}

/// `orbit init` of the test loop with these flags (the checks among them).
fn init(repo: &Repo, agent: &Path, flags: &[&str]) -> PathBuf {
    repo.init_loop(agent, &[], flags)
}

/// The loop stopped at the red gate for a check that cannot run: exit 2, preflight, no agent
/// run, the CHECK_CANNOT_RUN event; what it said.
fn assert_stopped_before_any_agent(repo: &Repo, dir: &Path, out: &std::process::Output) -> String {
    let said = text(out);
    assert_code(out, 2, "preflight: the check cannot run");
    assert_eq!(state_value(dir, "STOP_REASON"), "preflight", "{said}");
    assert!(
        !repo.ws().join("agent-ran").exists(),
        "an agent ran: {said}"
    );
    assert!(!dir.join("iterations/000001").exists(), "{said}");
    let codes: Vec<String> = events_named(dir, "verify_fail")
        .iter()
        .filter_map(|e| {
            e.value
                .get("code")
                .and_then(|v| v.as_str())
                .map(String::from)
        })
        .collect();
    assert!(codes.iter().any(|c| c == "CHECK_CANNOT_RUN"), "{codes:?}");
    said
}

#[test]
fn a_sandboxed_reproduction_check_under_tmp_stops_before_any_agent_with_the_path_and_the_fix() {
    if !bwrap_available() {
        return;
    }
    let outside = tmp_outside();
    // A check that exists on this machine and fails honestly when it runs: without the
    // sandbox it is a red start (below), so it is the sandbox that hides it.
    let check = script(outside.path(), "check.sh", "#!/bin/bash\nexit 1\n");
    let check_s = check.display().to_string();
    let repo = Repo::new();
    let agent = marking_agent(&repo);
    let dir = init(
        &repo,
        &agent,
        &["--reproduction", &check_s, "--sandbox", "bwrap"],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let said = assert_stopped_before_any_agent(&repo, &dir, &out);
    assert!(
        said.contains(&check_s)
            && said.contains("private")
            && said.contains("into the repository")
            && said.contains("--sandbox none"),
        "{said}"
    );
    let log = fs::read_to_string(dir.join("iterations/baseline/verify.log")).unwrap();
    assert!(log.contains("No such file or directory"), "{log}");

    // Without the sandbox the same check runs, fails, and is the red start it means to be.
    let repo = Repo::new();
    let agent = marking_agent(&repo);
    let dir = init(&repo, &agent, &["--reproduction", &check_s]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(repo.ws().join("agent-ran").exists(), "{}", text(&out));
    assert_ne!(
        state_value(&dir, "STOP_REASON"),
        "preflight",
        "{}",
        text(&out)
    );
}

#[test]
fn a_sandboxed_regression_check_under_tmp_is_named_by_its_path_not_blamed_on_the_project() {
    if !bwrap_available() {
        return;
    }
    let outside = tmp_outside();
    // It passes wherever it can run: the project is fine.
    let check = script(outside.path(), "lint.sh", "#!/bin/bash\nexit 0\n");
    let cmd = format!("bash {}", check.display());
    let repo = Repo::new();
    let agent = marking_agent(&repo);
    let dir = init(
        &repo,
        &agent,
        &[
            "--reproduction",
            "test -f fixed.txt",
            "--regression",
            &cmd,
            "--sandbox",
            "bwrap",
        ],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let said = assert_stopped_before_any_agent(&repo, &dir, &out);
    assert!(
        said.contains(&check.display().to_string())
            && said.contains("into the repository")
            && !said.contains("fix the check or the project"),
        "{said}"
    );
}

#[test]
fn a_check_whose_interpreter_is_missing_or_hidden_stops_with_the_interpreter_named() {
    // A shebang to a path that exists nowhere: exit 127 ("required file not found").
    let repo = Repo::new();
    repo.write("tools/check.py", "#!/nonexistent/python\nprint('x')\n");
    fs::set_permissions(
        repo.join("tools/check.py"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    repo.git(&["add", "tools/check.py"]);
    repo.git(&["commit", "-qm", "check"]);
    let agent = marking_agent(&repo);
    let dir = init(&repo, &agent, &["--reproduction", "./tools/check.py"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let said = assert_stopped_before_any_agent(&repo, &dir, &out);
    assert!(
        said.contains("/nonexistent/python") && said.contains("does not exist"),
        "{said}"
    );

    // `#!/usr/bin/env NAME` with no NAME on PATH: env's "No such file or directory", 127.
    let repo = Repo::new();
    repo.write(
        "check.sh",
        "#!/usr/bin/env orbit-no-such-interpreter\nexit 1\n",
    );
    fs::set_permissions(repo.join("check.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    repo.git(&["add", "check.sh"]);
    repo.git(&["commit", "-qm", "check"]);
    let agent = marking_agent(&repo);
    let dir = init(&repo, &agent, &["--reproduction", "./check.sh"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let said = assert_stopped_before_any_agent(&repo, &dir, &out);
    assert!(said.contains("orbit-no-such-interpreter"), "{said}");

    // An interpreter that exists on this machine, under /tmp (a virtual environment there):
    // the sandbox hides it.
    if !bwrap_available() {
        return;
    }
    let outside = tmp_outside();
    let interp = outside.path().join("venv-bash");
    std::os::unix::fs::symlink("/bin/bash", &interp).unwrap();
    let repo = Repo::new();
    repo.write("check.sh", &format!("#!{}\nexit 1\n", interp.display()));
    fs::set_permissions(repo.join("check.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    repo.git(&["add", "check.sh"]);
    repo.git(&["commit", "-qm", "check"]);
    let agent = marking_agent(&repo);
    let dir = init(
        &repo,
        &agent,
        &["--reproduction", "./check.sh", "--sandbox", "bwrap"],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let said = assert_stopped_before_any_agent(&repo, &dir, &out);
    assert!(
        said.contains(&interp.display().to_string())
            && said.contains("interpreter")
            && said.contains("--sandbox none"),
        "{said}"
    );
}

#[test]
fn a_check_that_connects_straight_to_a_host_the_sandbox_does_not_give_it_is_named_with_the_fix() {
    if !bwrap_available() {
        return;
    }
    let server = Server::start("needed");
    let repo = Repo::new();
    repo.write("client.sh", CLIENT);
    repo.git(&["add", "client.sh"]);
    repo.git(&["commit", "-qm", "client"]);
    let agent = marking_agent(&repo);
    // A client that ignores the proxy variables (a database driver, a raw socket): it
    // connects to the host straight, and the sandbox's own network has nothing there.
    let check = format!(
        ". ./client.sh; direct {} /needed | grep -q hello-needed",
        server.addr()
    );
    let dir = init(
        &repo,
        &agent,
        &["--reproduction", &check, "--sandbox", "bwrap"],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let said = assert_stopped_before_any_agent(&repo, &dir, &out);
    assert!(
        said.contains(&server.addr())
            && said.contains(&format!("--allow-host {}", server.addr()))
            && said.contains("sandbox-network = \"open\""),
        "{said}"
    );
    let log = fs::read_to_string(dir.join("iterations/baseline/verify.log")).unwrap();
    assert!(
        log.contains("Connection refused"),
        "the attempt was made: {log}"
    );
    // The server was there all along: only the runner's probe reached it.
    assert!(
        server.hits() == 0,
        "a request reached it: {}",
        server.hits()
    );

    // The same check through the proxy, the host allowed: it runs, and is a red start.
    let repo = Repo::new();
    repo.write("client.sh", CLIENT);
    repo.git(&["add", "client.sh"]);
    repo.git(&["commit", "-qm", "client"]);
    let agent = marking_agent(&repo);
    let check = format!(
        ". ./client.sh; fetch {} /needed | grep -q hello-none",
        server.addr()
    );
    let dir = init(
        &repo,
        &agent,
        &[
            "--reproduction",
            &check,
            "--sandbox",
            "bwrap",
            "--allow-host",
            &server.addr(),
        ],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(repo.ws().join("agent-ran").exists(), "{}", text(&out));
    assert!(server.hits() >= 1);
}

#[test]
fn an_honest_failure_of_the_projects_own_check_is_still_a_red_start_under_the_sandbox() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    repo.write(
        "test.sh",
        "#!/bin/bash\necho 'assertion failed: fixed.txt missing' >&2\nexit 1\n",
    );
    fs::set_permissions(repo.join("test.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    repo.git(&["add", "test.sh"]);
    repo.git(&["commit", "-qm", "test"]);
    let agent = marking_agent(&repo);
    let dir = init(
        &repo,
        &agent,
        &[
            "--reproduction",
            "./test.sh && test -f fixed.txt",
            "--sandbox",
            "bwrap",
        ],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(repo.ws().join("agent-ran").exists(), "{}", text(&out));
    assert_ne!(
        state_value(&dir, "STOP_REASON"),
        "preflight",
        "{}",
        text(&out)
    );
}

#[test]
fn init_warns_of_a_program_under_tmp_in_a_sandboxed_loop() {
    let outside = tmp_outside();
    let check = script(outside.path(), "check.sh", "#!/bin/bash\nexit 1\n");
    let check_s = check.display().to_string();
    let repo = Repo::new();
    let agent = marking_agent(&repo);
    let exec = agent.display().to_string();
    let base = ["init", "test goal", "--engine", "custom", "--exec", &exec];
    // A program of the repository itself, by its absolute path (the repository may live
    // under /tmp: the sandbox shows it), is no matter for a warning.
    repo.write("tools/ok.sh", "#!/bin/bash\nexit 1\n");
    let inside = fs::canonicalize(repo.path()).unwrap().join("tools/ok.sh");
    let inside_cmd = format!("bash {}", inside.display());
    let mut args: Vec<&str> = base.to_vec();
    args.extend(["--reproduction", &check_s, "--verify", &inside_cmd]);
    args.extend(["--sandbox", "bwrap", "--dry-run"]);
    let out = repo.orbit(&args);
    assert_ok(&out, "orbit init");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.contains("warning")
            && err.contains(&check_s)
            && err.contains("into the repository")
            && err.contains("--sandbox none"),
        "{err}"
    );
    assert!(!err.contains(&inside.display().to_string()), "{err}");

    // Without the sandbox the check sees /tmp as it is: no warning.
    let mut args: Vec<&str> = base.to_vec();
    args.extend(["--reproduction", &check_s, "--sandbox", "none", "--dry-run"]);
    let out = repo.orbit(&args);
    assert_ok(&out, "orbit init");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains(&check_s), "{err}");
}
