//! `orbit logs`: the agent's and verify's output per iteration, the live view the runner
//! writes (`.run-tmp/agent.live`) and `--follow` over it; text from the agent never reaches
//! the terminal with a control character in it.

use std::fs;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::{Repo, assert_code, assert_ok, command, orbit_bin, text, wait_for};

/// What a hostile agent prints: terminal escapes (a title, clear screen, colours), a bell,
/// a carriage return, an 8-bit CSI and a bidi override.
const HOSTILE: &str = r"printf 'title\033]0;pwned\007 clear\033[2J red\033[31m cr\rX csi\302\2332J bidi\342\200\256x\n'";

fn assert_no_control(out: &[u8]) {
    for (i, b) in out.iter().enumerate() {
        assert!(
            *b == b'\n' || *b == b'\t' || *b >= 0x20 && *b != 0x7f,
            "control byte {b:#04x} at {i} in:\n{}",
            String::from_utf8_lossy(out)
        );
    }
    let s = String::from_utf8_lossy(out);
    assert!(!s.contains('\u{9b}') && !s.contains('\u{202e}'), "{s}");
}

/// Each iteration's header comes from its result.env, then the agent's output and verify's;
/// escapes are shown, not sent; --iteration picks one and a missing one is a usage error.
#[test]
fn logs_print_each_iteration_with_its_header_and_no_control_characters() {
    let repo = Repo::new();
    let agent = repo.agent(
        "hostile",
        &format!(
            "cat >/dev/null; echo \"agent says $ORBIT_ITERATION\"; {HOSTILE}; echo x >> work.txt"
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &["--max-iterations", "2"]);
    let out = repo.run_loop(&dir, &[], &[("WRAPUP_ON_LIMIT", "0")]);
    assert_code(&out, 16, "two iterations, then the cap");

    let out = repo.orbit(&["logs"]);
    assert_ok(&out, "orbit logs");
    assert_no_control(&out.stdout);
    let s = String::from_utf8_lossy(&out.stdout);
    for want in [
        "=== iteration 1, work, attempt 1, started ",
        "Z: CONTINUE (agent ok, verify fail) ===",
        "=== iteration 2, work, attempt 1",
        "agent says 1",
        "agent says 2",
        "title^[]0;pwned^G clear^[[2J red^[[31m cr^MX csi<U+009B>2J bidi<U+202E>x",
        "--- verify (iterations/000002/verify.log) ---",
        "[FAIL] test-f-never-there",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
    // Iteration 1 comes before iteration 2, each with its own output.
    assert!(s.find("agent says 1").unwrap() < s.find("=== iteration 2").unwrap());

    let out = repo.orbit(&["logs", "--iteration", "2"]);
    assert_ok(&out, "orbit logs --iteration 2");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("agent says 2") && !s.contains("agent says 1"),
        "{s}"
    );

    let out = repo.orbit(&["logs", "--last", "1"]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("agent says 2") && !s.contains("agent says 1"),
        "{s}"
    );

    let out = repo.orbit(&["logs", "--iteration", "9"]);
    assert_code(&out, 2, "a missing iteration");
    assert!(
        text(&out).contains("no iteration 9 (iterations: 1 to 2)"),
        "{}",
        text(&out)
    );

    // The live view of the run holds both agent runs, each under its header line.
    let live = fs::read_to_string(dir.join(".run-tmp/agent.live")).unwrap();
    for want in [
        "=== orbit: iteration 1, work, attempt 1, started ",
        "=== orbit: iteration 2, work, attempt 1, started ",
        "=== orbit: the agent exited 0 after ",
        "agent says 2",
    ] {
        assert!(live.contains(want), "missing {want:?} in:\n{live}");
    }
}

/// The live view is bounded (AGENT_LOG_MAX per agent run, started over past it), while
/// agent.log keeps its own capture; an agent killed at its timeout loses nothing it wrote.
#[test]
fn the_live_view_is_bounded_and_survives_the_agents_kill() {
    let repo = Repo::new();
    let agent = repo.agent(
        "loud",
        "cat >/dev/null; echo \"start $ORBIT_ITERATION\"\n\
         if [[ $ORBIT_ITERATION == 3 ]]; then echo before-hang; sleep 300; fi\n\
         head -c 5000 /dev/zero | tr '\\0' y; echo; echo \"end $ORBIT_ITERATION\"",
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &["--max-iterations", "2"]);
    // Iterations 1 and 2 end by themselves: they run under the default limit, so that a
    // loaded machine never turns one into a timeout.
    let env = [
        ("AGENT_LOG_MAX", "2048"),
        ("WRAPUP_ON_LIMIT", "0"),
        ("RETRY_LIMIT", "1"),
    ];
    assert_code(&repo.run_loop(&dir, &[], &env), 16, "two loud iterations");
    let live = fs::read_to_string(dir.join(".run-tmp/agent.live")).unwrap();
    assert!(
        live.len() <= 2 * 2048 + 1024,
        "{} bytes:\n{live}",
        live.len()
    );
    assert!(
        live.contains(
            "[orbit: the live view of this run stops at 2048 bytes; agent.log keeps its end]"
        ),
        "{live}"
    );
    // Past the bound after iteration 1, the file started over with iteration 2.
    assert!(!live.contains("start 1"), "{live}");
    assert!(
        live.contains("=== orbit: iteration 2, work, attempt 1"),
        "{live}"
    );
    // A new run starts the file over; the agent killed at its timeout loses nothing it wrote.
    let mut env = env.to_vec();
    env.push(("MAX_ITERATIONS", "3"));
    env.push(("EXEC_TIMEOUT", "3s"));
    let out = repo.run_loop(&dir, &[], &env);
    assert!(out.status.code().is_some(), "{}", text(&out));
    let live = fs::read_to_string(dir.join(".run-tmp/agent.live")).unwrap();
    assert!(!live.contains("start 2"), "{live}");
    assert!(
        live.starts_with("=== orbit: iteration 3, work, attempt 1"),
        "{live}"
    );
    assert!(
        live.contains("before-hang\n=== orbit: the agent timed out after "),
        "{live}"
    );
    // agent.log keeps its first and last halves as before.
    let log = fs::read_to_string(dir.join("iterations/000001/agent.log")).unwrap();
    assert!(log.starts_with("start 1") && log.contains("end 1"), "{log}");
}

/// A follower child: stdout into a file, its own process group, killed when dropped.
struct Follower {
    child: Child,
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn follower(repo: &Repo, args: &[&str], out: &Path) -> Follower {
    use std::os::unix::process::CommandExt;
    let mut cmd = command(orbit_bin());
    cmd.arg("logs")
        .args(args)
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .stdin(Stdio::null())
        .stdout(fs::File::create(out).unwrap())
        .stderr(Stdio::null())
        .process_group(0);
    Follower {
        child: cmd.spawn().expect("spawn orbit logs -f"),
    }
}

/// `orbit logs -f` shows the agent's output while the agent runs, goes on across
/// iterations, and ends by itself when the runner lets the loop go; without a runner it
/// prints the history and ends.
#[test]
fn logs_follow_shows_the_agent_live_and_ends_with_the_runner() {
    let repo = Repo::new();
    let go = repo.bin.path().join("go");
    let agent = repo.agent(
        "waiter",
        &format!(
            "cat >/dev/null; echo \"live $ORBIT_ITERATION\"; {HOSTILE}\n\
             while [[ ! -e '{}' ]]; do sleep 0.05; done; echo \"done $ORBIT_ITERATION\"; echo x >> work.txt",
            go.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &["--max-iterations", "2"]);
    let scratch = tempfile::tempdir().unwrap();
    let out_path = scratch.path().join("follow.out");
    let mut f = follower(&repo, &["-f", "--wait", "60s"], &out_path);
    let mut runner = repo.spawn_loop(&dir, &[], &[("WRAPUP_ON_LIMIT", "0")]);
    let read = || fs::read(&out_path).unwrap_or_default();
    // The agent still waits for `go`: what the follower shows is live.
    wait_for(
        "the live output of iteration 1",
        Duration::from_secs(60),
        || String::from_utf8_lossy(&read()).contains("live 1"),
    );
    assert!(!String::from_utf8_lossy(&read()).contains("done 1"));
    fs::write(&go, "").unwrap();
    wait_for(
        "the follower to end with the runner",
        Duration::from_secs(120),
        || matches!(f.child.try_wait(), Ok(Some(_))),
    );
    let status = f.child.try_wait().unwrap().unwrap();
    assert!(status.success(), "{status:?}");
    let rc = runner.wait().unwrap();
    assert_eq!(rc.code(), Some(16));
    let bytes = read();
    assert_no_control(&bytes);
    let s = String::from_utf8_lossy(&bytes);
    for want in [
        "=== orbit: iteration 1, work, attempt 1",
        "live 1",
        "done 1",
        "=== orbit: iteration 2, work, attempt 1",
        "done 2",
        "^[[2J",
        "orbit: the runner has ended: BLOCKED (max_iterations), next iteration 3",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
    assert!(s.find("done 1").unwrap() < s.find("live 2").unwrap(), "{s}");

    // No runner: the history, then the end.
    let out = repo.orbit(&["logs", "-f"]);
    assert_ok(&out, "orbit logs -f without a runner");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("=== iteration 2, work") && s.contains("nothing to follow"),
        "{s}"
    );
    assert_no_control(&out.stdout);
}

/// `orbit schedule --tmux` shows the agent's output live in a second pane (`orbit logs
/// -f`) while the runner runs in the first, and both stay open at the end.
#[test]
fn tmux_shows_the_agents_output_live_beside_the_runner() {
    if !crate::support::tmux_available() {
        return;
    }
    let repo = Repo::new();
    let go = repo.bin.path().join("go");
    let agent = repo.agent(
        "waiter",
        &format!(
            "cat >/dev/null; echo \"agent-output-$ORBIT_ITERATION-$ORBIT_PHASE\"\n\
             while [[ ! -e '{}' ]]; do sleep 0.05; done; echo x >> work.txt",
            go.display()
        ),
    );
    repo.init_loop(&agent, &["test -f never-there"], &["--max-iterations", "1"]);
    // A private tmux server, gone however the test ends.
    let server = crate::support::TmuxServer::new();
    let tmux = |args: &[&str]| {
        let mut cmd = command("tmux");
        cmd.args(args)
            .env("TMUX_TMPDIR", server.tmpdir())
            .env_remove("TMUX");
        crate::support::run_bounded(cmd, Duration::from_secs(30))
    };
    let mut cmd = command(orbit_bin());
    cmd.args(["schedule", "--tmux"])
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("TMUX_TMPDIR", server.tmpdir())
        .env_remove("TMUX");
    let out = crate::support::run_bounded(cmd, Duration::from_secs(60));
    assert_ok(&out, "schedule --tmux");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let session = stdout
        .split("tmux session ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .unwrap_or_else(|| panic!("no session in {stdout}"))
        .to_string();
    let panes = || -> Vec<String> {
        let out = tmux(&[
            "list-panes",
            "-s",
            "-t",
            &format!("={session}"),
            "-F",
            "#{pane_id}",
        ]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let shown = tmux(&["capture-pane", "-p", "-J", "-t", l]);
                String::from_utf8_lossy(&shown.stdout).into_owned()
            })
            .collect()
    };
    // While the agent still runs (it waits for `go`), a pane shows what it printed.
    wait_for(
        "the agent's output in a tmux pane",
        Duration::from_secs(60),
        || panes().iter().any(|p| p.contains("agent-output-1-work")),
    );
    assert_eq!(panes().len(), 2, "the runner's pane and the agent's");
    assert!(!go.exists());
    fs::write(&go, "").unwrap();
    // The follower ends with the runner, and waits for Enter.
    wait_for("the end in both panes", Duration::from_secs(120), || {
        let p = panes();
        p.iter().any(|p| p.contains("nothing more to follow"))
            && p.iter().any(|p| p.contains("the loop has ended"))
    });
    let p = panes();
    let follow = p
        .iter()
        .find(|p| p.contains("nothing more to follow"))
        .unwrap();
    assert!(follow.contains("orbit: the runner has ended"), "{follow}");
    assert!(
        follow.contains("=== orbit: iteration 1, work, attempt 1"),
        "{follow}"
    );
}
