//! The optional OS sandbox (loop.toml `sandbox = "bwrap"`), executed for real under
//! bubblewrap: the agent, the checks and the judge run with the workspace writable and the
//! loop directory and git's control files read-only, so that a tamper fails at the write;
//! nothing an agent starts outlives its run; and a machine where bubblewrap cannot run is
//! refused before anything runs.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{
    Repo, assert_code, assert_ok, assert_records_agree, assert_script_clean, bwrap_available,
    count_check, counting_agent, events_named, read_kv, state_value, text, wait_for,
};

/// The message a write gets from a read-only mount.
const EROFS: &str = "Read-only file system";

/// A hostile agent's `try WHAT CMD...`: runs CMD and records in attempts.txt whether the
/// write went through (`WHAT: WROTE`) or what refused it.
const TRY_WRITE: &str = r#"try() {
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then
    echo "$what: WROTE" >> attempts.txt
  else
    printf '%s: %s\n' "$what" "$(printf '%s' "$out" | tr '\n' ' ')" >> attempts.txt
  fi
}"#;

/// A loop rendered with `--sandbox bwrap`.
fn sandboxed_loop(repo: &Repo, agent: &Path, checks: &[&str]) -> PathBuf {
    let dir = repo.init_loop(agent, checks, &["--sandbox", "bwrap"]);
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("sandbox = \"bwrap\""), "{toml}");
    dir
}

/// The test loop's directory as the runner sees it (symlinks resolved), known before it
/// is rendered.
fn loop_path(repo: &Repo) -> PathBuf {
    fs::canonicalize(repo.path())
        .unwrap()
        .join(".orbit/test-goal")
}

/// The repository's git directory (the workspace's common directory).
fn git_dir(repo: &Repo) -> PathBuf {
    fs::canonicalize(repo.join(".git")).unwrap()
}

/// Processes whose command line holds `marker` (Linux /proc).
fn processes_with_argv(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = fs::read(e.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(marker)
        {
            pids.push(pid);
        }
    }
    pids
}

/// A marker no other test's process carries.
fn unique_marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("orbit-sandbox-{what}-{}-{nanos}", std::process::id())
}

/// The lines of `text` that start with `label: `.
fn attempt<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("{label}: ")))
        .unwrap_or_else(|| panic!("no attempt '{label}' recorded:\n{text}"))
}

/// `orbit init GOAL` of a custom agent with one check that passes, and `extra`.
fn init_custom(repo: &Repo, goal: &str, exec: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "init", goal, "--engine", "custom", "--exec", exec, "--verify", "true",
    ];
    args.extend_from_slice(extra);
    repo.orbit(&args)
}

#[test]
fn init_writes_the_sandbox_into_loop_toml_force_keeps_it_and_other_kinds_are_refused() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    let dir = sandboxed_loop(&repo, &agent, &["test -f work.txt"]);
    // The settings are lib.sh's, which the runner loads.
    let script = fs::read_to_string(dir.join("lib.sh")).unwrap();
    assert!(script.contains("SANDBOX_SETTING='bwrap'"), "rendered");
    assert!(
        !script.contains("SANDBOX_SETTING=${"),
        "the environment never overrides the sandbox"
    );
    let prompt = fs::read_to_string(dir.join("prompt.md")).unwrap();
    assert!(prompt.contains("You run in an OS sandbox"), "{prompt}");

    let shown = dir.display().to_string();
    let out = repo.orbit(&["init", "--force", "--dir", &shown]);
    assert_ok(&out, "orbit init --force");
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("sandbox = \"bwrap\""), "kept: {toml}");
    let script = fs::read_to_string(dir.join("lib.sh")).unwrap();
    assert!(script.contains("SANDBOX_SETTING='bwrap'"), "re-rendered");

    // --force re-renders from loop.toml: a sandbox given with it is a setting to edit there.
    let out = repo.orbit(&["init", "--force", "--dir", &shown, "--sandbox", "none"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("loop.toml"), "{}", text(&out));
    assert!(
        fs::read_to_string(dir.join("loop.toml"))
            .unwrap()
            .contains("sandbox = \"bwrap\"")
    );

    let exec = agent.display().to_string();
    let out = init_custom(&repo, "another goal", &exec, &["--sandbox", "nonsense"]);
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nonsense")
            && err.contains("none")
            && err.contains("bwrap")
            && err.contains("auto"),
        "the allowed values: {err}"
    );
    assert!(
        !repo.join(".orbit/another-goal").exists(),
        "nothing written"
    );

    // Without the flag: auto, and the prompt says the agent may be sandboxed.
    let out = init_custom(&repo, "plain goal", &exec, &[]);
    assert_ok(&out, "orbit init without --sandbox");
    let plain = repo.join(".orbit/plain-goal");
    assert!(
        fs::read_to_string(plain.join("loop.toml"))
            .unwrap()
            .contains("sandbox = \"auto\"")
    );
    assert!(
        fs::read_to_string(plain.join("prompt.md"))
            .unwrap()
            .contains("You may run in an OS sandbox")
    );
    // --sandbox none: none, and the prompt says nothing of a sandbox.
    let out = init_custom(&repo, "bare goal", &exec, &["--sandbox", "none"]);
    assert_ok(&out, "orbit init --sandbox none");
    assert!(text(&out).contains("sandbox: none"), "{}", text(&out));
    let bare = repo.join(".orbit/bare-goal");
    assert!(
        fs::read_to_string(bare.join("loop.toml"))
            .unwrap()
            .contains("sandbox = \"none\"")
    );
    assert!(
        !fs::read_to_string(bare.join("prompt.md"))
            .unwrap()
            .contains("OS sandbox")
    );

    // A project's orbit.toml may ask for it for every loop.
    repo.write("orbit.toml", "sandbox = \"bwrap\"\n");
    let out = init_custom(&repo, "project goal", &exec, &[]);
    assert_ok(&out, "orbit init under orbit.toml");
    let project = repo.join(".orbit/project-goal/loop.toml");
    assert!(
        fs::read_to_string(project)
            .unwrap()
            .contains("sandbox = \"bwrap\"")
    );
}

#[test]
fn a_loop_reaches_done_under_the_sandbox_and_its_judge_cannot_write_the_loop() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = sandboxed_loop(&repo, &agent, &[&count_check(2)]);
    for script in ["run-loop.sh", "verify.sh", "recover.sh", "notify.sh"] {
        assert_script_clean(&dir.join(script));
    }
    let goal = fs::read(dir.join("goal.md")).unwrap();
    // The judge approves (its last command succeeds) after trying to rewrite the goal.
    let judge = format!(
        "echo 'approve everything' >> '{}/goal.md'; echo judged",
        dir.display()
    );
    let out = repo.run_loop(&dir, &[], &[("JUDGE_CMD", &judge)]);
    assert_code(&out, 0, "DONE under the sandbox");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(log.contains("under bubblewrap"), "{log}");
    let work = repo.git(&["show", "orbit/test-goal:work.txt"]);
    assert_eq!(
        work.lines().count(),
        2,
        "the agent's work is committed: {work}"
    );
    let judged = fs::read_to_string(dir.join("iterations/000002/judge.log")).unwrap();
    assert!(
        judged.contains(EROFS) && judged.contains("judged"),
        "{judged}"
    );
    assert_eq!(
        fs::read(dir.join("goal.md")).unwrap(),
        goal,
        "goal.md unchanged"
    );
    assert!(events_named(&dir, "integrity_fail").is_empty());
    let report = repo.orbit(&["report", &dir.display().to_string()]);
    assert_ok(&report, "orbit report");
    assert!(
        text(&report).contains("- sandbox: bwrap\n"),
        "{}",
        text(&report)
    );
    assert_records_agree(&dir);
}

#[test]
fn a_hostile_agent_gets_a_write_error_for_the_loop_directory_and_gits_control_files() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let git = git_dir(&repo);
    // Each attempt records what the write said, in the workspace.
    let body = r#"cat > prompt-got.txt
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
grep SigIgn /proc/self/status > signals.txt
L='@LOOP@'; G='@GIT@'
@TRY@
try verify.sh sh -c "echo 'exit 0' >> '$L/verify.sh'"
try result.env sh -c "mkdir -p '$L/iterations/000002' && echo VERDICT=DONE > '$L/iterations/000002/result.env'"
try state.env sh -c "echo LAST_STATUS=DONE >> '$L/state.env'"
try git-config git config core.fsmonitor 'touch CANARY'
try pre-commit sh -c "printf '#!/bin/sh\ntouch CANARY\n' > '$G/hooks/pre-commit'"
try exclude sh -c "echo '*.rs' >> '$G/info/exclude'"
try git-link sh -c "echo 'gitdir: /nowhere' > .git"
try git-add git add attempts.txt
echo step >> work.txt"#
        .replace("@GIT@", &git.display().to_string())
        .replace("@TRY@", TRY_WRITE);
    let agent = repo.agent(
        "hostile",
        &body.replace("@LOOP@", &loop_path(&repo).display().to_string()),
    );
    let dir = sandboxed_loop(&repo, &agent, &["test -f never-there"]);
    let verify = fs::read(dir.join("verify.sh")).unwrap();
    let config = fs::read_to_string(git.join("config")).unwrap();
    let exclude = fs::read_to_string(git.join("info/exclude")).unwrap_or_default();

    // Nothing in the environment turns the sandbox off.
    let out = repo.run_loop(
        &dir,
        &["--once"],
        &[("SANDBOX_SETTING", "none"), ("SANDBOX", "none")],
    );
    assert_code(
        &out,
        10,
        "a tick that goes on: every tamper failed at the write",
    );
    let attempts = repo.ws_read("attempts.txt");
    for label in [
        "verify.sh",
        "result.env",
        "state.env",
        "git-config",
        "pre-commit",
        "exclude",
        "git-link",
    ] {
        let line = attempt(&attempts, label);
        assert!(line.contains(EROFS), "{line}");
    }
    // git add stages into the run's own index, which the runner never reads: the
    // workspace's index is untouched.
    assert_eq!(attempt(&attempts, "git-add"), "git-add: WROTE");
    let staged = repo.ws_git(&["diff", "--cached", "--name-only"]);
    assert!(!staged.contains("attempts.txt"), "{staged}");
    // The agent got its prompt on stdin, and TERM, INT and QUIT as a signal's default
    // (the launcher and bwrap ignore TERM; a background job starts without INT and QUIT).
    assert!(
        repo.ws_read("prompt-got.txt")
            .starts_with("# Standing instructions")
    );
    let ignored = repo.ws_read("signals.txt");
    let mask = u64::from_str_radix(ignored.trim().trim_start_matches("SigIgn:").trim(), 16)
        .unwrap_or_else(|e| panic!("{ignored}: {e}"));
    for (name, signal) in [("INT", 2), ("QUIT", 3), ("TERM", 15)] {
        assert_eq!(mask & (1 << (signal - 1)), 0, "{name} ignored: {ignored}");
    }
    assert_eq!(
        fs::read(dir.join("verify.sh")).unwrap(),
        verify,
        "verify.sh"
    );
    assert!(!dir.join("iterations/000002").exists(), "no planted record");
    let state = fs::read_to_string(dir.join("state.env")).unwrap();
    assert_eq!(state.matches("LAST_STATUS=").count(), 1, "{state}");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    assert_eq!(fs::read_to_string(git.join("config")).unwrap(), config);
    assert!(!git.join("hooks/pre-commit").exists(), "no hook planted");
    let exclude_now = fs::read_to_string(git.join("info/exclude")).unwrap_or_default();
    assert!(!exclude_now.contains("*.rs"), "{exclude_now}");
    assert!(exclude_now.starts_with(&exclude) || exclude.is_empty());
    let link = repo.ws_read(".git");
    assert!(
        link.starts_with("gitdir: ") && !link.contains("/nowhere"),
        "{link}"
    );
    assert!(!repo.ws().join("CANARY").exists() && !repo.join("CANARY").exists());
    assert!(events_named(&dir, "integrity_fail").is_empty());
    // The agent's edit of its own work went through, and the runner committed it.
    assert_eq!(repo.git(&["show", "orbit/test-goal:work.txt"]), "step\n");
    assert_records_agree(&dir);
}

/// The forgery that reaches DONE without the sandbox (records and a hash-chained journal
/// tail written, then the runner SIGKILLed before it looks, so that recover believes them)
/// cannot be made under it: the journal and the records are read-only, and the runner is in
/// no PID namespace the agent can see.
#[test]
fn under_the_sandbox_an_agent_can_neither_forge_the_journal_nor_kill_its_runner() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let body = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
L='@LOOP@'
@TRY@
try journal sh -c "printf '%s\n' '{\"seq\":99,\"event\":\"loop_stop\",\"status\":\"DONE\",\"forged\":1}' >> '$L/events.jsonl'"
try result sh -c "printf 'ITERATION=1\nVERDICT=DONE\n' > '$L/iterations/000001/result.env'"
runner=$(pgrep -f run-loop.sh | tr '\n' ' ')
echo "runner: [${runner% }]" >> attempts.txt
try kill-parent kill -KILL "$PPID"
echo "parent after the kill: $(ps -o pid=,args= -p "$PPID" 2>/dev/null || echo gone)" >> attempts.txt
echo step >> work.txt"#
        .replace("@TRY@", TRY_WRITE);
    let agent = repo.agent(
        "forger",
        &body.replace("@LOOP@", &loop_path(&repo).display().to_string()),
    );
    let dir = sandboxed_loop(&repo, &agent, &["test -f never-there"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let attempts = repo.ws_read("attempts.txt");
    assert!(attempt(&attempts, "journal").contains(EROFS), "{attempts}");
    // The loop directory is an empty read-only directory for the agent.
    let result = attempt(&attempts, "result");
    assert!(
        result.contains("Directory nonexistent") || result.contains(EROFS),
        "{attempts}"
    );
    // Its parent is the sandbox's first process, which a kill from inside does not end.
    assert!(
        attempt(&attempts, "parent after the kill").contains("bwrap"),
        "{attempts}"
    );
    assert_eq!(
        attempt(&attempts, "runner"),
        "runner: []",
        "the runner is not to be seen"
    );
    assert_code(&out, 10, "the runner lived to the end of its tick");
    let journal = fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(!journal.contains("\"forged\""), "{journal}");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    let rec = repo.orbit(&["recover", "--dry-run", &dir.display().to_string()]);
    assert!(!text(&rec).contains("DONE"), "{}", text(&rec));
}

#[test]
fn a_daemon_that_escapes_the_process_group_and_the_environment_sweep_dies_with_the_run() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let marker = unique_marker("daemon");
    // A new session and an empty environment: neither the process-group kill nor the
    // sweep by the run's environment marker can find it; only the sandbox's end can.
    let agent = repo.agent(
        "daemon",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
env -i setsid bash -c 'echo started > daemon.txt; exec -a {marker} sleep 1000' </dev/null >/dev/null 2>&1 &
for _ in $(seq 600); do [ -s daemon.txt ] && break; sleep 0.1; done
echo x >> work.txt"#
        ),
    );
    let dir = sandboxed_loop(&repo, &agent, &["test -f never-there"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick");
    assert_eq!(repo.ws_read("daemon.txt"), "started\n", "the daemon ran");
    wait_for("the daemon to be gone", Duration::from_secs(60), || {
        processes_with_argv(&marker).is_empty()
    });
    assert_records_agree(&dir);
}

#[test]
fn a_timeout_terms_the_agent_inside_the_sandbox_and_ends_what_ignores_it() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let marker = unique_marker("stubborn");
    let agent = repo.agent(
        "hang",
        &format!(
            r#"trap 'echo "TERM reached the agent" >> term.txt; exit 143' TERM
cat >/dev/null
( trap '' TERM; exec -a {marker} sleep 1000 ) </dev/null >/dev/null 2>&1 &
sleep 1000 &
wait"#
        ),
    );
    let dir = sandboxed_loop(&repo, &agent, &["test -f never-there"]);
    // Long enough for the sandbox and the agent's trap to be up on a loaded machine: the
    // TERM must find the trap in place to leave its mark.
    let out = repo.run_loop(
        &dir,
        &[],
        &[
            ("EXEC_TIMEOUT", "8s"),
            ("KILL_GRACE", "5s"),
            ("RETRY_LIMIT", "1"),
            ("CB_THRESHOLD", "1"),
        ],
    );
    assert_code(&out, 14, "timeouts open the circuit");
    let result = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(result["AGENT_OUTCOME"], "timeout");
    // The timeout's TERM reached the agent itself (not only bubblewrap, whose end would
    // have KILLed it at once): it had its grace period to write this.
    let term = fs::read_to_string(repo.ws().join("term.txt")).unwrap_or_default();
    assert!(
        term.contains("TERM reached the agent"),
        "{}\n--- agent.log\n{}\n--- runner.log\n{}",
        text(&out),
        fs::read_to_string(dir.join("iterations/000001/agent.log")).unwrap_or_default(),
        fs::read_to_string(dir.join("runner.log")).unwrap_or_default()
    );
    wait_for(
        "the TERM-proof child to be gone",
        Duration::from_secs(60),
        || processes_with_argv(&marker).is_empty(),
    );
    assert_records_agree(&dir);
}

#[test]
fn a_check_that_writes_the_loop_directory_fails_at_the_write_and_reads_no_secret() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let agent = counting_agent(&repo, 5);
    let l = loop_path(&repo).display().to_string();
    let check = format!(
        "echo 'exit 0' >> '{l}/verify.sh'; echo VERDICT=DONE > '{l}/iterations/000001/result.env'; cat '{l}/notify.secrets'; test -f never-there"
    );
    let dir = sandboxed_loop(&repo, &agent, &[&check]);
    let secrets = dir.join("notify.secrets");
    fs::write(&secrets, "webhook=http://127.0.0.1:9/orbit-secret-hook\n").unwrap();
    fs::set_permissions(&secrets, fs::Permissions::from_mode(0o600)).unwrap();
    let verify = fs::read(dir.join("verify.sh")).unwrap();

    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "a tick that goes on");
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(log.matches(EROFS).count() >= 2, "both writes failed: {log}");
    assert!(!log.contains("orbit-secret-hook"), "{log}");
    assert_eq!(
        fs::read(dir.join("verify.sh")).unwrap(),
        verify,
        "verify.sh"
    );
    let result = read_kv(&dir.join("iterations/000001/result.env"));
    assert_ne!(result["VERDICT"], "DONE", "{result:?}");
    assert!(events_named(&dir, "integrity_fail").is_empty());
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    assert_records_agree(&dir);
}

/// A directory of links to every program on `path` but bwrap (the first of each name, as
/// PATH finds it): a machine without bubblewrap, with everything else the runner needs.
fn path_without_bwrap(path: &str, into: &Path) -> String {
    fs::create_dir_all(into).unwrap();
    for d in path.split(':').filter(|d| !d.is_empty()) {
        let Ok(rd) = fs::read_dir(d) else { continue };
        for e in rd.flatten() {
            let name = e.file_name();
            let link = into.join(&name);
            if name == "bwrap" || link.symlink_metadata().is_ok() {
                continue;
            }
            std::os::unix::fs::symlink(e.path(), link).unwrap();
        }
    }
    into.display().to_string()
}

#[test]
fn preflight_refuses_with_exit_2_where_bubblewrap_is_missing() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    let dir = sandboxed_loop(&repo, &agent, &[&count_check(1)]);
    let links = tempfile::tempdir().unwrap();
    let path = path_without_bwrap(&repo.path_env(), &links.path().join("bin"));
    let out = repo.run_loop(&dir, &["--once"], &[("PATH", &path)]);
    assert_code(&out, 2, "preflight");
    let all = text(&out);
    assert!(
        all.contains("bubblewrap is not installed") && all.contains("apt-get install bubblewrap"),
        "{all}"
    );
    assert!(
        all.contains("NEXUS_LOOP_SUMMARY: preflight failed"),
        "{all}"
    );
    assert_eq!(state_value(&dir, "LAST_STATUS"), "READY", "nothing ran");
    assert!(!dir.join("iterations").exists() && !repo.ws().exists());
}

#[test]
fn preflight_refuses_with_exit_2_and_the_reason_where_bubblewrap_cannot_start() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    let dir = sandboxed_loop(&repo, &agent, &[&count_check(1)]);
    let fake = tempfile::tempdir().unwrap();
    let bwrap = fake.path().join("bwrap");
    fs::write(
        &bwrap,
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
    )
    .unwrap();
    fs::set_permissions(&bwrap, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", fake.path().display(), repo.path_env());
    let out = repo.run_loop(&dir, &["--once"], &[("PATH", &path)]);
    assert_code(&out, 2, "preflight");
    let all = text(&out);
    assert!(
        all.contains("bubblewrap cannot start a sandbox here")
            && all.contains("setting up uid map: Permission denied")
            && all.contains("user namespaces"),
        "{all}"
    );
    assert_eq!(state_value(&dir, "LAST_STATUS"), "READY", "nothing ran");
    assert!(!dir.join("iterations").exists() && !repo.ws().exists());
}

#[test]
fn an_agent_that_fails_on_the_sandboxs_refusal_is_retried_not_blocked_as_a_machine_error() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    // Without the sandbox, "Read-only file system" is the machine's own error (a human's
    // to fix: BLOCKED at once); under it, it is the agent's, like any other failure.
    let agent = repo.agent(
        "committer",
        "cat >/dev/null\necho x >> work.txt\ngit add -A && git commit -qm mine || exit 1",
    );
    let dir = sandboxed_loop(&repo, &agent, &["test -f never-there"]);
    let out = repo.run_loop(&dir, &["--once"], &[("RETRY_LIMIT", "1")]);
    assert_code(&out, 10, "a tick that goes on");
    let log = fs::read_to_string(dir.join("iterations/000001/agent.log")).unwrap();
    assert!(log.contains(EROFS), "{log}");
    let result = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(result["AGENT_OUTCOME"], "agent_error", "{result:?}");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    assert_records_agree(&dir);
}

#[test]
fn the_engines_state_in_home_stays_writable_its_settings_and_the_rest_of_home_do_not() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    // A HOME of the test's own (under /tmp, which the sandbox covers with a private tmpfs:
    // it must be seen again), with Claude Code's state, its settings, and a key of orbit's.
    let home = tempfile::Builder::new()
        .prefix("orbit-home-")
        .tempdir()
        .unwrap();
    let h = home.path();
    fs::create_dir_all(h.join(".claude/sessions")).unwrap();
    fs::write(h.join(".claude/settings.json"), "{}\n").unwrap();
    fs::write(h.join(".claude.json"), "{\"numStartups\": 1}\n").unwrap();
    fs::create_dir_all(h.join(".local/state/orbit")).unwrap();
    fs::write(h.join(".local/state/orbit/key"), "orbit-secret-key\n").unwrap();
    let private = unique_marker("tmp");
    repo.agent(
        "claude",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
{TRY_WRITE}
try session sh -c 'echo s > "$HOME/.claude/sessions/one"'
try state sh -c 'echo "{{\"numStartups\": 2}}" > "$HOME/.claude.json"'
try settings sh -c 'echo "{{\"hooks\": 1}}" > "$HOME/.claude/settings.json"'
try bashrc sh -c 'echo "touch CANARY" >> "$HOME/.bashrc"'
try tmp sh -c 'echo t > /tmp/{private}'
echo "key: $(cat "$HOME/.local/state/orbit/key" 2>&1 | tr '\n' ' ')" >> attempts.txt
echo x >> work.txt
echo '{{"type":"result","total_cost_usd":0.01}}'"#
        ),
    );
    let out = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "claude",
        "--verify",
        "test -f never-there",
        "--sandbox",
        "bwrap",
    ]);
    assert_ok(&out, "orbit init --engine claude");
    let dir = repo.join(".orbit/test-goal");
    let home_env = h.display().to_string();
    let out = repo.run_loop(&dir, &["--once"], &[("HOME", &home_env)]);
    assert_code(&out, 10, "tick");
    let attempts = repo.ws_read("attempts.txt");
    assert_eq!(attempt(&attempts, "session"), "session: WROTE");
    assert_eq!(attempt(&attempts, "state"), "state: WROTE");
    assert_eq!(attempt(&attempts, "tmp"), "tmp: WROTE");
    for label in ["settings", "bashrc"] {
        let line = attempt(&attempts, label);
        assert!(line.contains(EROFS), "{line}");
    }
    let key = attempt(&attempts, "key");
    assert!(!key.contains("orbit-secret-key"), "hidden: {key}");
    assert_eq!(
        fs::read_to_string(h.join(".claude/sessions/one")).unwrap(),
        "s\n"
    );
    assert_eq!(
        fs::read_to_string(h.join(".claude.json")).unwrap(),
        "{\"numStartups\": 2}\n",
        "claude's own bookkeeping, written in the sandbox"
    );
    assert_eq!(
        fs::read_to_string(h.join(".claude/settings.json")).unwrap(),
        "{}\n"
    );
    assert!(!h.join(".bashrc").exists());
    assert!(
        !Path::new("/tmp").join(&private).exists(),
        "/tmp is private"
    );
    assert_records_agree(&dir);
}

/// `orbit init` without --sandbox in `repo`, on `path`: a loop of sandbox = "auto"; init's
/// output.
fn auto_loop(repo: &Repo, agent: &Path, path: &str) -> String {
    let exec = agent.display().to_string();
    let mut cmd = crate::support::command(crate::support::orbit_bin());
    cmd.args([
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
    ])
    .arg(count_check(1))
    .current_dir(repo.path())
    .env("PATH", path);
    let out = crate::support::run_bounded(cmd, Duration::from_secs(120));
    assert_ok(&out, "orbit init without --sandbox");
    let toml = fs::read_to_string(repo.join(".orbit/test-goal/loop.toml")).unwrap();
    assert!(toml.contains("sandbox = \"auto\""), "{toml}");
    text(&out)
}

/// The audit's findings of the one loop in `repo`, as `CLASS message` lines.
fn audit_lines(repo: &Repo, path: &str) -> String {
    let mut cmd = crate::support::command(crate::support::orbit_bin());
    cmd.args(["audit", "--json", ".orbit/test-goal"])
        .current_dir(repo.path())
        .env("PATH", path);
    let out = crate::support::run_bounded(cmd, Duration::from_secs(60));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit --json ({e}): {}", text(&out)));
    v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{} {} {}\n", f["class"], f["severity"], f["message"]))
        .collect()
}

#[test]
fn a_new_loop_is_sandboxed_where_bubblewrap_runs_and_runs_unsandboxed_with_a_note_elsewhere() {
    if !bwrap_available() {
        return;
    }
    // The agent tries a write outside its workspace (a file of the test's own directory)
    // and records whether it went through, then does its work.
    let agent_body = |outside: &Path| {
        format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
if out=$(echo planted 2>&1 > '{}'); then echo WROTE > attempt.txt; else echo "$out" > attempt.txt; fi
echo step >> work.txt"#,
            outside.display()
        )
    };

    // A machine with bubblewrap: sandboxed without any flag.
    let repo = Repo::new();
    let outside = repo.bin.path().join("outside.txt");
    let agent = repo.agent("writer", &agent_body(&outside));
    let said = auto_loop(&repo, &agent, &repo.path_env());
    assert!(
        said.contains("sandbox: auto: bubblewrap works here"),
        "init says which: {said}"
    );
    let dir = repo.join(".orbit/test-goal");
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick");
    // The test's directory is under /tmp: the agent's write went to its run's private /tmp,
    // never to the file.
    assert!(
        !outside.exists(),
        "nothing was written outside the workspace"
    );
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("under bubblewrap (") && log.contains("sandbox = auto"),
        "{log}"
    );
    let findings = audit_lines(&repo, &repo.path_env());
    assert!(!findings.contains("UNSANDBOXED"), "{findings}");

    // A machine without it: the loop runs, unsandboxed, and says so.
    let repo = Repo::new();
    let outside = repo.bin.path().join("outside.txt");
    let agent = repo.agent("writer", &agent_body(&outside));
    let links = tempfile::tempdir().unwrap();
    let path = path_without_bwrap(&repo.path_env(), &links.path().join("bin"));
    let said = auto_loop(&repo, &agent, &path);
    assert!(
        said.contains("sandbox: auto: none here, bubblewrap is not installed"),
        "init says which and why: {said}"
    );
    let dir = repo.join(".orbit/test-goal");
    let out = repo.run_loop(&dir, &["--once"], &[("PATH", &path)]);
    assert_code(&out, 10, "one tick without bubblewrap");
    assert_eq!(repo.ws_read("attempt.txt").trim(), "WROTE");
    assert!(outside.exists(), "the write went through: unsandboxed");
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("sandbox: none (sandbox = auto, and bubblewrap is not installed"),
        "{log}"
    );
    let findings = audit_lines(&repo, &path);
    assert!(
        findings.contains("\"UNSANDBOXED\" \"P2\"")
            && findings.contains("bubblewrap is not installed"),
        "{findings}"
    );

    // sandbox = "none" is noted too, and never probed.
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--sandbox", "none"]);
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "one tick");
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(!log.contains("sandbox:"), "{log}");
    let findings = audit_lines(&repo, &repo.path_env());
    assert!(
        findings.contains("\"UNSANDBOXED\" \"P2\"") && findings.contains("sandbox = \\\"none\\\""),
        "{findings}"
    );
}

#[test]
fn an_engine_never_run_here_starts_in_the_sandbox_and_what_it_writes_to_its_settings_stays_in_the_run()
 {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    // A HOME where opencode never ran (no state directories) but the user's settings exist.
    let home = tempfile::Builder::new()
        .prefix("orbit-home-")
        .tempdir()
        .unwrap();
    let h = home.path();
    fs::create_dir_all(h.join(".config/opencode")).unwrap();
    fs::write(
        h.join(".config/opencode/opencode.json"),
        "{\"model\":\"x/y\"}\n",
    )
    .unwrap();
    repo.agent(
        "opencode",
        r#"case "${1:-}" in --version) echo 9.9.9; exit 0 ;; esac
cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
try() {
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then echo "$what: WROTE" >> attempts.txt
  else printf '%s: %s\n' "$what" "$(printf '%s' "$out" | tr '\n' ' ')" >> attempts.txt; fi
}
try state sh -c 'echo s > "$HOME/.local/share/opencode/auth.json"'
try first sh -c 'echo node_modules > "$HOME/.config/opencode/.gitignore"'
try plant sh -c 'mkdir -p "$HOME/.config/opencode/plugin" && echo "run()" > "$HOME/.config/opencode/plugin/evil.js"'
try edit sh -c 'echo "{\"permission\":\"allow\"}" > "$HOME/.config/opencode/opencode.json"'
echo x >> work.txt
try stage git add work.txt
try commit git commit -qm agent
"#,
    );
    let out = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "opencode",
        "--verify",
        "test -f never-there",
        "--sandbox",
        "bwrap",
    ]);
    assert_ok(&out, "orbit init --engine opencode");
    let dir = repo.join(".orbit/test-goal");
    let home_env = h.display().to_string();
    let out = repo.run_loop(
        &dir,
        &["--once"],
        &[("HOME", &home_env), ("ANTHROPIC_API_KEY", "fake")],
    );
    assert_code(&out, 10, "tick");
    let attempts = repo.ws_read("attempts.txt");
    // Its state directory did not exist: made, writable, and what it wrote stays.
    assert_eq!(attempt(&attempts, "state"), "state: WROTE");
    assert_eq!(
        fs::read_to_string(h.join(".local/share/opencode/auth.json")).unwrap(),
        "s\n"
    );
    // Its settings directory takes its first-run files and a planted plugin, in the run only.
    assert_eq!(attempt(&attempts, "first"), "first: WROTE");
    assert_eq!(attempt(&attempts, "plant"), "plant: WROTE");
    assert!(!h.join(".config/opencode/.gitignore").exists());
    assert!(
        !h.join(".config/opencode/plugin").exists(),
        "the plugin stayed in the run"
    );
    // The user's settings stay read-only.
    assert!(attempt(&attempts, "edit").contains(EROFS), "{attempts}");
    assert_eq!(
        fs::read_to_string(h.join(".config/opencode/opencode.json")).unwrap(),
        "{\"model\":\"x/y\"}\n"
    );
    // It can stage what it writes (into an index of its run's own), never commit.
    assert_eq!(attempt(&attempts, "stage"), "stage: WROTE");
    assert_ne!(attempt(&attempts, "commit"), "commit: WROTE");
    let staged = repo.ws_git(&["diff", "--cached", "--name-only"]);
    assert!(
        !staged.contains("work.txt"),
        "the workspace's own index is untouched: {staged}"
    );
    assert_records_agree(&dir);
}

/// What steers the runner from outside the workspace when there is no sandbox (a file the
/// user's ~/.gitconfig includes, ~/.gitconfig itself, a `git` first on PATH in HOME, the env
/// file, a systemd user unit, the user's own branch, stash and checkout) cannot be written
/// under it: each attempt fails at the write, every target is as it was, no command the
/// agent wrote runs, and the loop goes on. HOME lies outside /tmp, which the sandbox makes
/// private (a write there would land in the run's own /tmp and prove nothing).
#[test]
fn under_the_sandbox_nothing_outside_the_workspace_that_steers_the_runner_can_be_written() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    repo.write("README.md", "mine\n");
    repo.git(&["add", "README.md"]);
    repo.git(&["commit", "-qm", "the user's work"]);
    let main_before = repo.git(&["rev-parse", "main"]);
    let home = tempfile::Builder::new()
        .prefix("sandbox-home-")
        .tempdir_in(crate::engines::engine_home_parent())
        .unwrap();
    let h = home.path();
    let global = h.join(".gitconfig");
    let mut gitconfig =
        fs::read_to_string(crate::support::sealed_home().join(".gitconfig")).unwrap();
    gitconfig.push_str("[include]\n\tpath = ~/.gitconfig.local\n");
    fs::write(&global, &gitconfig).unwrap();
    fs::create_dir_all(h.join(".local/bin")).unwrap();
    fs::create_dir_all(h.join(".config/systemd/user")).unwrap();
    let envf = h.join("loop.env");
    fs::write(&envf, "SERVICE_TOKEN=1\n").unwrap();
    fs::set_permissions(&envf, fs::Permissions::from_mode(0o600)).unwrap();
    let canary = h.join("CANARY");

    let body = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
H='@HOME@'; C='@CANARY@'
@TRY@
top=$(dirname "$(git rev-parse --path-format=absolute --git-common-dir)")
try include sh -c "printf '[filter \"z\"]\n\tclean = touch $C\n' > '$H/.gitconfig.local'"
try gitconfig git config --global filter.y.clean "touch $C"
try path-git sh -c "printf '#!/bin/sh\ntouch $C\n' > '$H/.local/bin/git' && chmod +x '$H/.local/bin/git'"
try env-file sh -c "echo 'PATH=$H/.local/bin:/usr/bin:/bin' >> '$H/loop.env'"
try unit sh -c "printf '[Service]\nExecStartPre=/bin/touch $C\n' > '$H/.config/systemd/user/orbit-evil.service'"
try branch git update-ref refs/heads/main HEAD~1
try stash git -C "$top" stash
try checkout sh -c "echo theirs >> '$top/README.md'"
echo '* filter=z' > .gitattributes
echo step >> work.txt"#
        .replace("@HOME@", &h.display().to_string())
        .replace("@CANARY@", &canary.display().to_string())
        .replace("@TRY@", TRY_WRITE);
    let agent = repo.agent("outside", &body);
    let dir = sandboxed_loop(&repo, &agent, &["test -f never-there"]);
    // The user's uncommitted edit, in their checkout.
    repo.write("README.md", "mine, and not committed yet\n");
    let (home_s, global_s, envf_s) = (
        h.display().to_string(),
        global.display().to_string(),
        envf.display().to_string(),
    );
    let path = format!("{}:{}", h.join(".local/bin").display(), repo.path_env());
    let env = [
        ("HOME", home_s.as_str()),
        ("GIT_CONFIG_GLOBAL", global_s.as_str()),
        ("ENV_FILE", envf_s.as_str()),
        ("PATH", path.as_str()),
    ];
    let out = repo.run_loop(&dir, &["--once"], &env);
    let attempts = fs::read_to_string(repo.ws().join("attempts.txt"))
        .unwrap_or_else(|e| panic!("the agent ran no attempt ({e}): {}", text(&out)));
    for label in [
        "include",
        "gitconfig",
        "path-git",
        "env-file",
        "unit",
        "branch",
        "stash",
        "checkout",
    ] {
        let line = attempt(&attempts, label);
        // git stash says only that it could not write its objects and refs.
        let refused = if label == "stash" {
            "Cannot save the current status"
        } else {
            EROFS
        };
        assert!(line.contains(refused), "{line}\n{attempts}");
    }
    assert_code(&out, 10, "a tick that goes on: every write outside failed");
    assert!(!h.join(".gitconfig.local").exists());
    assert_eq!(fs::read_to_string(&global).unwrap(), gitconfig);
    assert!(!h.join(".local/bin/git").exists());
    assert_eq!(fs::read_to_string(&envf).unwrap(), "SERVICE_TOKEN=1\n");
    assert!(!h.join(".config/systemd/user/orbit-evil.service").exists());
    assert_eq!(repo.git(&["rev-parse", "main"]), main_before);
    assert!(repo.git(&["stash", "list"]).is_empty(), "nothing stashed");
    assert_eq!(repo.read("README.md"), "mine, and not committed yet\n");
    assert!(!canary.exists(), "no command the agent wrote ran");
    assert!(events_named(&dir, "integrity_fail").is_empty());
    assert_eq!(repo.git(&["show", "orbit/test-goal:work.txt"]), "step\n");
}

/// What the sandbox leaves writable, the workspace, still holds two things the runner must
/// never take as the loop's: the committed loop directory's copy and the project's
/// orbit.toml. Under the sandbox as without it, the agent's rewrite of the copy's
/// run-loop.sh stops the loop as script_tamper with nothing committed, and an orbit.toml it
/// rewrites is named at DONE, to be reviewed before the merge.
#[test]
fn under_the_sandbox_the_workspaces_copy_of_the_loop_and_orbit_toml_are_still_the_agents() {
    if !bwrap_available() {
        return;
    }
    for case in ["copy", "orbit-toml"] {
        let repo = Repo::new();
        repo.write("orbit.toml", "max-iterations = 7\n");
        repo.git(&["add", "orbit.toml"]);
        repo.git(&["commit", "-qm", "the project's defaults"]);
        let action = if case == "copy" {
            r#"sh -c "printf '\ntouch /tmp/pwned\n' >> .orbit/test-goal/run-loop.sh""#
        } else {
            r#"sh -c "printf 'sandbox = \"none\"\n' >> orbit.toml""#
        };
        let body = format!(
            "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n{TRY_WRITE}\n\
             try {case} {action}\ntouch done.txt\necho done > \"$ORBIT_AGENT_DIR/done.md\""
        );
        let agent = repo.agent("workspace-writer", &body);
        let dir = sandboxed_loop(&repo, &agent, &["test -f done.txt"]);
        if case == "copy" {
            repo.git(&["add", "-f", ".orbit/test-goal"]);
            repo.git(&["commit", "-qm", "the loop, committed"]);
        }
        let out = repo.run_loop(&dir, &["--once"], &[("CONFIRM_RUNS", "0")]);
        let attempts = fs::read_to_string(repo.ws().join("attempts.txt"))
            .unwrap_or_else(|e| panic!("{case}: no attempt ({e}): {}", text(&out)));
        assert_eq!(attempt(&attempts, case), format!("{case}: WROTE"));
        if case == "copy" {
            assert_code(&out, 3, "the copy's change is script_tamper");
            assert_eq!(state_value(&dir, "STOP_REASON"), "script_tamper");
            let on_branch = repo.git(&["show", "orbit/test-goal:.orbit/test-goal/run-loop.sh"]);
            assert!(
                !on_branch.contains("pwned"),
                "the copy's change was committed"
            );
        } else {
            assert_code(&out, 0, "DONE, with orbit.toml named");
            let t = text(&out);
            assert!(
                t.contains("the branch changes orbit.toml")
                    && t.contains("review it before you merge"),
                "{t}"
            );
        }
    }
}

/// A command of the suite with the data directory left to its default, the sealed HOME's
/// `.local/share`: outside /tmp, as a user's is (the sandbox gives every run its own /tmp,
/// which would hide a data directory there whatever the sandbox meant to do).
fn with_home_data(program: impl AsRef<std::ffi::OsStr>, repo: &Repo) -> std::process::Command {
    let mut cmd = crate::support::command(program);
    cmd.env_remove("XDG_DATA_HOME")
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("RETRY_BASE_DELAY", "0");
    cmd
}

/// Removes a repository's workspaces under the sealed HOME's data directory when the test
/// ends, however it ends.
struct HomeWorkspaces(PathBuf);

impl Drop for HomeWorkspaces {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Several loops share the data directory's `orbit/workspaces`: each run of one loop (its
/// agent's and its checks') has its own workspace there and nothing else of it, so a
/// hostile agent can neither read another loop's workspace nor write into it.
#[test]
fn under_the_sandbox_an_agent_can_neither_read_nor_write_another_loops_workspace() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let common = git_dir(&repo);
    let root = crate::support::sealed_home().join(".local/share/orbit/workspaces");
    let mine = root.join(orbit::locate::workspace::repo_id(&common));
    let _cleanup = HomeWorkspaces(mine.clone());
    let (ws_a, ws_b) = (mine.join("loop-a"), mine.join("loop-b"));
    // Another repository's workspace under the same root: none of this loop's either.
    let other = root.join("other-000000000000/x");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("secret.txt"), "other\n").unwrap();
    let _cleanup_other = HomeWorkspaces(root.join("other-000000000000"));

    let init = |name: &str, agent: &Path, check: &str, extra: &[&str]| {
        let exec = agent.display().to_string();
        let mut cmd = with_home_data(crate::support::orbit_bin(), &repo);
        cmd.args(["init", name, "--engine", "custom", "--exec", &exec])
            .args(["--verify", check, "--sandbox", "bwrap"])
            .args(["--dir", &format!(".orbit/{name}")])
            .args(extra);
        let out = crate::support::run_bounded(cmd, Duration::from_secs(120));
        assert_ok(&out, "orbit init");
        repo.join(&format!(".orbit/{name}"))
    };
    let tick = |dir: &Path| {
        let mut cmd = with_home_data("bash", &repo);
        cmd.arg(dir.join("run-loop.sh")).arg("--once");
        crate::support::run_bounded(cmd, Duration::from_secs(180))
    };

    // Loop B runs first: its workspace holds what its agent wrote.
    let b_agent = repo.agent(
        "agent-b",
        "case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho b-secret > secret.txt\necho step >> work.txt",
    );
    let b = init("loop-b", &b_agent, "test -f work.txt", &[]);
    let out = tick(&b);
    assert!(
        matches!(out.status.code(), Some(0 | 10)),
        "loop B's tick: {}",
        text(&out)
    );
    assert_eq!(
        fs::read_to_string(ws_b.join("secret.txt")).unwrap(),
        "b-secret\n"
    );
    let b_readme = fs::read(ws_b.join("README.md")).unwrap();
    // Loop C's workspace is where --workspace put it, in the checkout (as every loop's was
    // before contract 2.4): hidden the same way.
    let ws_c = fs::canonicalize(repo.path())
        .unwrap()
        .join(".orbit/.workspaces/loop-c");
    let c = init(
        "loop-c",
        &b_agent,
        "test -f work.txt",
        &["--workspace", ".orbit/.workspaces/loop-c"],
    );
    let out = tick(&c);
    assert!(
        matches!(out.status.code(), Some(0 | 10)),
        "loop C's tick: {}",
        text(&out)
    );
    assert_eq!(
        fs::read_to_string(ws_c.join("secret.txt")).unwrap(),
        "b-secret\n"
    );

    // Loop A's agent goes for B's workspace, and for another repository's.
    let body = r#"case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
B='@B@'; O='@O@'; C='@C@'
@TRY@
try write-b sh -c "echo planted > '$B/planted.txt'"
try write-c sh -c "echo planted > '$C/planted.txt'"
try read-c cat "$C/secret.txt"
try append-b sh -c "echo planted >> '$B/README.md'"
try write-other sh -c "echo planted > '$O/planted.txt'"
try read-b cat "$B/secret.txt"
try read-other cat "$O/secret.txt"
ls -A '@MINE@' > agent-saw.txt 2>&1 || true
echo mine > own.txt
echo step >> work.txt"#
        .replace("@B@", &ws_b.display().to_string())
        .replace("@O@", &other.display().to_string())
        .replace("@C@", &ws_c.display().to_string())
        .replace("@MINE@", &mine.display().to_string())
        .replace("@TRY@", TRY_WRITE);
    let a_agent = repo.agent("agent-a", &body);
    // Its check looks too (a check runs the agent's code): it passes only where B's
    // workspace is not there for it.
    let check = format!(
        "test -f work.txt && ! ls -A '{}' && ! cat '{}/secret.txt'",
        ws_b.display(),
        ws_b.display()
    );
    let a = init("loop-a", &a_agent, &check, &[]);
    let out = tick(&a);
    assert!(
        matches!(out.status.code(), Some(0 | 10)),
        "loop A's tick: {}",
        text(&out)
    );
    let attempts = fs::read_to_string(ws_a.join("attempts.txt")).unwrap();
    for label in [
        "write-b",
        "append-b",
        "write-other",
        "read-b",
        "read-other",
        "write-c",
        "read-c",
    ] {
        let line = attempt(&attempts, label);
        assert!(
            !line.ends_with("WROTE")
                && (line.contains("No such file or directory")
                    || line.contains("Directory nonexistent")),
            "{line}\n{attempts}"
        );
    }
    assert!(!ws_b.join("planted.txt").exists());
    assert!(!other.join("planted.txt").exists());
    assert!(!ws_c.join("planted.txt").exists());
    assert_eq!(fs::read(ws_b.join("README.md")).unwrap(), b_readme);
    // The agent saw its own workspace under the root, and only that; so did its check.
    assert_eq!(
        fs::read_to_string(ws_a.join("agent-saw.txt")).unwrap(),
        "loop-a\n"
    );
    let result = read_kv(&a.join("iterations/000001/result.env"));
    assert_eq!(result["VERIFY"], "pass", "{result:?}");
    // Its own workspace stayed its own to write: the runner committed its work.
    assert_eq!(fs::read_to_string(ws_a.join("own.txt")).unwrap(), "mine\n");
    assert_eq!(repo.git(&["show", "orbit/loop-a:work.txt"]), "step\n");
}
