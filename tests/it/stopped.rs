//! A runner stopped while it holds the lock (SIGSTOP, or Ctrl-Z in its terminal): the audit
//! says so with the fix, and a later tick takes over once the stopped runner has lived past
//! the loop's wall-clock limit and a grace, since no runner of the loop can honestly live
//! that long.

use crate::support::*;
use std::fs;
use std::time::Duration;

#[test]
fn a_stopped_runner_is_reported_and_a_tick_past_the_loops_limit_takes_over() {
    let repo = Repo::new();
    let started = repo.join("agent-started");
    let agent = repo.agent(
        "sleeper",
        &format!(
            "cat >/dev/null\necho started > '{}'\nexec sleep 600",
            started.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    // The runner that gets stopped has time to start its agent however slow the machine
    // is; the ticks after it judge it by their own, short limit.
    let mut child = repo.spawn_loop(&dir, &["--once"], &[("LOOP_TIMEOUT", "1h")]);
    let env = [("LOOP_TIMEOUT", "3s")];
    wait_for("the agent to start", Duration::from_secs(60), || {
        started.is_file()
    });
    assert!(
        !marked_processes(&dir).is_empty(),
        "the agent carries the loop's mark"
    );
    let pid = child.id();
    // The runner is stopped as its agent (which may be the one to do it) would stop it.
    let st = command("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_for("the runner to be stopped", Duration::from_secs(30), || {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('T'))
                    == Some(true)
            })
            .unwrap_or(false)
    });

    let audit = repo.orbit(&["audit", ".orbit/test-goal"]);
    let t = text(&audit);
    assert!(
        t.contains("STALE_LOCK") && t.contains(&format!("(pid {pid}) is stopped")),
        "the audit sees the stopped runner: {t}"
    );
    assert!(t.contains(&format!("kill -CONT {pid}")), "the fix: {t}");

    // A tick while the stopped runner is within the loop's limit and grace: locked out.
    // Once past them, a tick takes over: the stopped runner is killed, the loop goes on
    // (here to its wall-clock limit: BLOCKED, exit 11).
    let mut last = None;
    wait_for("a tick to take over", Duration::from_secs(120), || {
        let out = repo.run_loop(&dir, &["--once"], &env);
        let code = out.status.code();
        assert!(
            code == Some(20) || code == Some(11),
            "a tick either waits or takes over: {}",
            text(&out)
        );
        last = Some(out);
        code == Some(11)
    });
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains(&format!("(pid {pid}) was stopped")) && log.contains("the lock taken over"),
        "{log}"
    );
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the stopped runner was killed: {status:?}"
    );
    assert_eq!(state_value(&dir, "STOP_REASON"), "loop_timeout");
    // Its agent went with the run that took over (it carried the loop's mark).
    let marked = marked_processes(&dir);
    assert!(marked.is_empty(), "left running: {marked:?}");
    let audit = repo.orbit(&["audit", ".orbit/test-goal"]);
    assert!(!text(&audit).contains("is stopped"), "{}", text(&audit));
    drop(last);
}

/// The processes carrying the loop's mark (ORBIT_OWNER, which the runner exports to all
/// it starts).
fn marked_processes(dir: &std::path::Path) -> Vec<String> {
    let mark = format!("ORBIT_OWNER={}", fs::canonicalize(dir).unwrap().display());
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            fs::read(e.path().join("environ"))
                .map(|env| env.split(|b| *b == 0).any(|v| v == mark.as_bytes()))
                .unwrap_or(false)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}
