//! Operations: notification channels, scheduling (cron, systemd, tmux), `orbit stop`,
//! `orbit report`, project defaults, completions and the manual page.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{Repo, assert_code, assert_ok, command, run_bounded, state_value, text};

/// A local HTTP receiver on 127.0.0.1: records each request's first line and body and
/// answers 200. It serves a bounded number of requests and then stops.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<(String, String)>>>,
}

impl Receiver {
    fn start(max: usize) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(max) {
                let Ok(mut stream) = stream else { continue };
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                reader.read_line(&mut first).unwrap();
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    if h == "\r\n" || h.is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; len];
                reader.read_exact(&mut body).unwrap();
                sink.lock().unwrap().push((
                    first.trim().to_string(),
                    String::from_utf8_lossy(&body).into_owned(),
                ));
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Receiver { url, got }
    }
}

fn done_agent(repo: &Repo) -> std::path::PathBuf {
    repo.agent(
        "finisher",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho done >> work.txt\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
    )
}

#[test]
fn notifications_reach_every_channel_on_done() {
    let repo = Repo::new();
    let http = Receiver::start(2);
    let seen = repo.bin.path().join("notified");
    let desktop = repo.bin.path().join("desktop");
    repo.agent(
        "notify-send",
        &format!("printf '%s|%s\\n' \"$1\" \"$2\" >> '{}'", desktop.display()),
    );
    let agent = done_agent(&repo);
    let cmd = format!(
        "cmd:printf '%s %s\\n' \"$ORBIT_EVENT\" \"$ORBIT_LOOP_NAME\" >> '{}'",
        seen.display()
    );
    let webhook = format!("webhook:{}/hook", http.url);
    let ntfy = format!("ntfy:{}/orbit-topic", http.url);
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt"],
        &[
            "--notify", &cmd, "--notify", &webhook, "--notify", &ntfy, "--notify", "desktop",
        ],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    assert_eq!(fs::read_to_string(&seen).unwrap(), "DONE test-goal\n");
    assert!(
        fs::read_to_string(&desktop)
            .unwrap()
            .starts_with("orbit: test-goal|DONE — DONE after 1 iteration(s)")
    );
    let t0 = Instant::now();
    while http.got.lock().unwrap().len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the HTTP channels did not arrive"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = http.got.lock().unwrap().clone();
    let hook = got
        .iter()
        .find(|(l, _)| l.starts_with("POST /hook "))
        .expect("webhook request");
    let payload: serde_json::Value = serde_json::from_str(&hook.1).unwrap();
    assert_eq!(payload["event"], "DONE");
    assert_eq!(payload["loop"], "test-goal");
    assert!(
        payload["text"]
            .as_str()
            .unwrap()
            .starts_with("[orbit] test-goal: DONE — "),
        "Slack-compatible text: {payload}"
    );
    assert_eq!(
        payload["text"], payload["content"],
        "Discord-compatible content"
    );
    let topic = got
        .iter()
        .find(|(l, _)| l.starts_with("POST /orbit-topic "))
        .expect("ntfy request");
    assert!(
        topic.1.starts_with("DONE after 1 iteration(s)"),
        "{}",
        topic.1
    );
}

#[test]
fn a_failing_or_hanging_channel_never_changes_the_loops_exit_code() {
    let repo = Repo::new();
    let agent = done_agent(&repo);
    // A command that fails, and a webhook nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let hook = format!("webhook:http://{closed}/hook");
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt"],
        &["--notify", "cmd:echo broken >&2; exit 7", "--notify", &hook],
    );
    // Both channels fail at once; their timeout is not what this part is about, and it is
    // long enough for them to fail on a loaded machine.
    let out = repo.run_loop(&dir, &[], &[("NOTIFY_TIMEOUT", "20s")]);
    assert_code(&out, 0, "DONE despite failing channels");
    let log = fs::read_to_string(dir.join("notify.log")).unwrap();
    assert!(log.contains("channel command failed (exit 7)"), "{log}");
    assert!(log.contains("channel webhook"), "{log}");
    // A channel that hangs is cut at its timeout.
    let repo = Repo::new();
    let agent = done_agent(&repo);
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt"],
        &["--notify", "cmd:sleep 300"],
    );
    let out = repo.run_loop(&dir, &[], &[("NOTIFY_TIMEOUT", "1s")]);
    assert_code(&out, 0, "DONE despite a hanging channel");
    assert!(
        fs::read_to_string(dir.join("notify.log"))
            .unwrap()
            .contains("timed out")
    );
}

#[test]
fn nothing_a_notification_leaves_behind_outlives_the_run() {
    // A notify command that detaches a process of its own (its own session, so the
    // channel's group sweep misses it): it carries the loop's mark, and the runner stops it
    // before it exits, so no audit right after the run finds an orphan of the loop.
    let repo = Repo::new();
    let agent = done_agent(&repo);
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt"],
        &[
            "--notify",
            "cmd:setsid sleep 300 </dev/null >/dev/null 2>&1 & \
             until [ \"$(ps -o sid= -p $! | tr -d ' ')\" = $! ]; do sleep 0.05; done",
        ],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    let marker = format!("ORBIT_OWNER={}", fs::canonicalize(&dir).unwrap().display());
    let left = crate::support::processes_with_env(&marker);
    for pid in &left {
        let _ = command("kill").args(["-KILL", &pid.to_string()]).status();
    }
    assert!(
        left.is_empty(),
        "processes of the loop outlived the run: {left:?}"
    );
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    // The detached process was there, and it was the runner that stopped it.
    assert!(
        log.lines()
            .any(|l| l.contains("sweeping leftover process") && l.contains("sleep 300")),
        "{log}"
    );
    let out = repo.orbit(&["audit", dir.to_str().unwrap()]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("ORPHAN_AGENT"),
        "{}",
        text(&out)
    );
}

/// A local HTTP server that records each request's first line and then never answers,
/// holding the connection open: a channel that hangs.
struct Hanging {
    url: String,
    got: Arc<Mutex<Vec<String>>>,
}

impl Hanging {
    fn start() -> Hanging {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                sink.lock().unwrap().push(first.trim().to_string());
                held.push(stream);
            }
        });
        Hanging { url, got }
    }
}

/// Every file under `dir` (recursively, .pins/ included) whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if String::from_utf8_lossy(&fs::read(&p).unwrap()).contains(needle) {
                hits.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    hits.sort();
    hits
}

fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

/// notify.sh by hand, as the runner would run it; it returns when every channel is done.
fn notify_by_hand(repo: &Repo, dir: &std::path::Path, env: &[(&str, &str)]) {
    let mut cmd = command("bash");
    cmd.arg(dir.join("notify.sh"))
        .args(["DONE", "by hand"])
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("NOTIFY_TIMEOUT", "5s");
    for (k, v) in env {
        cmd.env(k, v);
    }
    assert_ok(&run_bounded(cmd, Duration::from_secs(60)), "notify.sh");
}

#[test]
fn several_webhooks_are_secrets_kept_in_one_0600_file_and_all_notified() {
    let repo = Repo::new();
    let http = Receiver::start(3);
    let agent = done_agent(&repo);
    let first = format!("webhook:{}/T01/first-SECRET-a1", http.url);
    let second = format!("webhook:{}/T02/second-SECRET-b2", http.url);
    let topic = format!("ntfy:{}/topic-SECRET-c3", http.url);
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt"],
        &["--notify", &first, "--notify", &second, "--notify", &topic],
    );
    // The secrets are in notify.secrets and nowhere else: not loop.toml, not the scripts,
    // not the pinned copies.
    let secrets = dir.join("notify.secrets");
    for needle in ["first-SECRET-a1", "second-SECRET-b2", "topic-SECRET-c3"] {
        assert_eq!(files_containing(&dir, needle), vec!["notify.secrets"]);
    }
    assert_eq!(mode_of(&secrets), 0o600);
    assert!(
        fs::read_to_string(dir.join(".gitignore"))
            .unwrap()
            .lines()
            .any(|l| l == "notify.secrets")
    );
    let ignored = repo.git(&["check-ignore", ".orbit/test-goal/notify.secrets"]);
    assert_eq!(ignored.trim(), ".orbit/test-goal/notify.secrets");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    let got: Vec<String> = http
        .got
        .lock()
        .unwrap()
        .iter()
        .map(|(l, _)| l.clone())
        .collect();
    for path in [
        "/T01/first-SECRET-a1",
        "/T02/second-SECRET-b2",
        "/topic-SECRET-c3",
    ] {
        assert!(
            got.iter().any(|l| l.starts_with(&format!("POST {path} "))),
            "{path} not notified: {got:?}"
        );
    }
    // After a run, still nowhere else: not the logs, events or records.
    for needle in ["first-SECRET-a1", "second-SECRET-b2", "topic-SECRET-c3"] {
        assert_eq!(files_containing(&dir, needle), vec!["notify.secrets"]);
    }
    // A second --notify webhook: is added, not swapped in; the same URL twice is one.
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init",
        "g",
        "--verify",
        "true",
        "--notify",
        "webhook:https://a.example/1",
        "--notify",
        "webhook:https://b.example/2",
        "--notify",
        "webhook:https://a.example/1",
    ]);
    assert_ok(&out, "init");
    assert_eq!(
        repo.read(".orbit/g/notify.secrets")
            .lines()
            .filter(|l| l.starts_with("webhook="))
            .collect::<Vec<_>>(),
        ["webhook=https://a.example/1", "webhook=https://b.example/2"]
    );
}

#[test]
fn notify_refuses_a_secrets_file_that_is_a_symlink_or_writable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new();
    let http = Receiver::start(2);
    let agent = done_agent(&repo);
    let hook = format!("webhook:{}/hook", http.url);
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--notify", &hook]);
    let secrets = dir.join("notify.secrets");
    let log = || fs::read_to_string(dir.join("notify.log")).unwrap_or_default();
    // Writable by group or others: refused whole.
    for mode in [0o620, 0o602] {
        fs::set_permissions(&secrets, fs::Permissions::from_mode(mode)).unwrap();
        notify_by_hand(&repo, &dir, &[]);
        assert!(
            log().contains("writable by group or others: not read"),
            "{}",
            log()
        );
        assert_eq!(http.got.lock().unwrap().len(), 0);
    }
    // A symlink, even to a private file: refused.
    let elsewhere = repo.bin.path().join("secrets");
    fs::rename(&secrets, &elsewhere).unwrap();
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &secrets).unwrap();
    notify_by_hand(&repo, &dir, &[]);
    assert!(
        log().contains("is a symlink or not a regular file"),
        "{}",
        log()
    );
    assert_eq!(http.got.lock().unwrap().len(), 0);
    // A private regular file with a line that is not a channel: that line is skipped (by its
    // number, never its text) and the others are used.
    fs::remove_file(&secrets).unwrap();
    let text = fs::read_to_string(&elsewhere).unwrap();
    fs::write(&secrets, format!("source /tmp/SECRET-evil\n{text}")).unwrap();
    fs::set_permissions(&secrets, fs::Permissions::from_mode(0o600)).unwrap();
    notify_by_hand(&repo, &dir, &[]);
    assert!(
        log().contains("notify.secrets line 1: not webhook=URL"),
        "{}",
        log()
    );
    assert!(!log().contains("SECRET-evil"));
    assert_eq!(http.got.lock().unwrap().len(), 1);
    // The environment variable loop.toml names is a channel too.
    fs::remove_file(&secrets).unwrap();
    notify_by_hand(
        &repo,
        &dir,
        &[
            ("NOTIFY_WEBHOOK_ENV", "ORBIT_TEST_HOOK"),
            ("ORBIT_TEST_HOOK", &format!("{}/from-env", http.url)),
        ],
    );
    let got = http.got.lock().unwrap().clone();
    assert!(got[1].0.starts_with("POST /from-env "), "{got:?}");
}

#[test]
fn a_loop_toml_with_one_webhook_string_still_notifies_after_rerendering() {
    let repo = Repo::new();
    let http = Receiver::start(1);
    let agent = done_agent(&repo);
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("notify-webhook = []"), "{toml}");
    // The loop.toml of an orbit before the list: one string.
    let old = toml.replace(
        "notify-webhook = []",
        &format!("notify-webhook = \"{}/legacy\"", http.url),
    );
    fs::write(dir.join("loop.toml"), old).unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", ".orbit/test-goal"]);
    assert_ok(&out, "init --force");
    assert!(
        text(&out).contains("move them to .orbit/test-goal/notify.secrets"),
        "{}",
        text(&out)
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    let got = http.got.lock().unwrap().clone();
    assert!(
        got.iter().any(|(l, _)| l.starts_with("POST /legacy ")),
        "{got:?}"
    );
}

#[test]
fn a_preflight_failure_or_a_corrupt_state_notifies_once_and_keeps_its_exit_code() {
    let repo = Repo::new();
    let agent = done_agent(&repo);
    let seen = repo.bin.path().join("notified");
    let cmd = format!(
        "cmd:printf '%s|%s\\n' \"$ORBIT_EVENT\" \"$ORBIT_SUMMARY\" >> '{}'",
        seen.display()
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--notify", &cmd]);
    let seen_lines = || {
        fs::read_to_string(&seen)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    // A symlink in the loop directory: preflight fails (exit 2), once notified. (A merge in
    // progress in the user's checkout no longer stops a loop: it runs in its workspace.)
    let link = dir.join("planted");
    std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 2, "preflight");
    assert_eq!(seen_lines().len(), 1, "{:?}", seen_lines());
    assert!(
        seen_lines()[0].starts_with("PREFLIGHT_FAILED|preflight failed: ")
            && seen_lines()[0].contains("is a symlink"),
        "{:?}",
        seen_lines()
    );
    // A bad setting is a preflight failure too.
    fs::remove_file(&link).unwrap();
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "0")]);
    assert_code(&out, 2, "bad setting");
    assert!(seen_lines()[1].starts_with("PREFLIGHT_FAILED|bad setting: MAX_ITERATIONS=0"));
    // A tampered notify.sh is never run: the pinned copy notifies instead.
    let canary = repo.join("CANARY");
    let script = fs::read_to_string(dir.join("notify.sh")).unwrap();
    let tampered = script.replacen(
        "\nset -Euo pipefail\n",
        &format!("\nset -Euo pipefail\ntouch '{}'\n", canary.display()),
        1,
    );
    assert_ne!(script, tampered);
    fs::write(dir.join("notify.sh"), tampered).unwrap();
    // A corrupt state: exit 4, once notified.
    fs::write(dir.join("state.env"), "garbage\n").unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 4, "state corrupt");
    assert_eq!(seen_lines().len(), 3, "{:?}", seen_lines());
    assert!(seen_lines()[2].starts_with("STATE_CORRUPT|state corrupt: "));
    assert!(!canary.exists(), "the tampered notify.sh ran");
    // With no copy that matches its pin, nothing runs and the runner says why.
    fs::write(dir.join(".pins/notify.sh"), "touch CANARY\n").unwrap();
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 4, "state corrupt, no trusted notify.sh");
    assert_eq!(seen_lines().len(), 3);
    assert!(!canary.exists());
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("notify: not run: notify.sh does not match its pin"),
        "{log}"
    );
}

#[test]
fn a_hanging_webhook_is_waited_for_once_at_exit_never_per_event() {
    let repo = Repo::new();
    let hang = Hanging::start();
    let agent = crate::support::counting_agent(&repo, 3);
    let hook = format!("webhook:{}/hang", hang.url);
    let dir = repo.init_loop(
        &agent,
        &[&crate::support::count_check(3)],
        &["--notify", &hook, "--notify", "every-iteration"],
    );
    let out = repo.run_loop(&dir, &[], &[("NOTIFY_TIMEOUT", "3s")]);
    assert_code(&out, 0, "DONE despite a webhook that never answers");
    // Three events (two iterations that went on, then DONE), each delivered...
    let got = hang.got.lock().unwrap().clone();
    assert_eq!(got.len(), 3, "{got:?}");
    let notify_log = fs::read_to_string(dir.join("notify.log")).unwrap();
    assert_eq!(
        notify_log.matches("channel webhook 1 timed out").count(),
        3,
        "{notify_log}"
    );
    // ...while the runner waited once, at exit: never per event.
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    let waits: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("notify: waiting at most"))
        .collect();
    assert_eq!(waits.len(), 1, "{log}");
    assert!(
        waits[0].contains("waiting at most 8s for "),
        "bounded by NOTIFY_TIMEOUT: {}",
        waits[0]
    );
    assert!(!log.contains("still running after the wait"), "{log}");
}

#[test]
fn curl_giving_up_at_its_own_timeout_is_reported_as_a_timeout() {
    // curl's -m and the runner's bound are the same length, so on a busy machine curl may
    // give up first (exit 28): the user reads "timed out" either way, never "failed (exit 28)".
    let repo = Repo::new();
    repo.agent(
        "curl",
        "cat >/dev/null\necho 'curl: (28) Operation timed out' >&2\nexit 28",
    );
    let agent = crate::support::counting_agent(&repo, 1);
    let dir = repo.init_loop(
        &agent,
        &[&crate::support::count_check(1)],
        &["--notify", "webhook:http://127.0.0.1:9/hook"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    let notify_log = fs::read_to_string(dir.join("notify.log")).unwrap();
    assert!(
        notify_log.contains("channel webhook 1 timed out after 10s"),
        "{notify_log}"
    );
    assert!(!notify_log.contains("failed (exit 28)"), "{notify_log}");
}

#[test]
fn notify_flags_are_checked() {
    let repo = Repo::new();
    for bad in ["pager", "webhook:ftp://x", "ntfy:", "cmd:"] {
        let out = repo.orbit(&["init", "g", "--verify", "true", "--notify", bad]);
        assert_code(&out, 2, bad);
        assert!(String::from_utf8_lossy(&out.stderr).contains("--notify"));
    }
}

fn snapshot(name: &str, body: &str, repo: &Repo) {
    let root = fs::canonicalize(repo.path()).unwrap().display().to_string();
    let root = regex_escape(&root);
    insta::with_settings!({
        snapshot_path => "../../snapshots",
        prepend_module_to_snapshot => false,
        filters => vec![
            (root.as_str(), "[REPO]"),
            (r"PATH='[^']*'", "PATH='[PATH]'"),
            (r"Environment=\x22PATH=[^\x22\n]*\x22", "Environment=\x22PATH=[PATH]\x22"),
            (r"/[^ '\x22\n]*/bash\b", "[BASH]"),
            (r"\b(orbit-[a-z0-9-]+)-[0-9a-f]{8}\b", "$1-[DIRHASH]"),
        ],
    }, {
        insta::assert_snapshot!(name, body);
    });
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '-' || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[test]
fn the_crontab_line_is_printed_installed_idempotently_and_runs_under_cron_s_environment() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.orbit(&["schedule", ".orbit/test-goal", "--cron", "--every", "10m"]);
    assert_ok(&out, "schedule --cron");
    let line = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    assert!(line.starts_with("*/10 * * * * cd / && PATH="), "{line}");
    assert!(!line.contains('%'));
    snapshot("schedule_cron_line", &line, &repo);
    // The command part, as cron runs it: /bin/sh, from /, an environment of nothing but
    // the HOME cron gives its commands (the user's: the data directory, where the default
    // workspace goes, is found from it; here the suite's, named as such).
    let cron_command = line.splitn(6, ' ').nth(5).unwrap();
    let mut cmd = command("env");
    cmd.args(["-i"])
        .arg(format!("HOME={}", crate::support::sealed_home().display()))
        .arg(format!(
            "XDG_DATA_HOME={}",
            crate::support::sealed_data().display()
        ))
        .args(["sh", "-c", cron_command])
        .current_dir("/");
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert_code(&out, 10, "the crontab command (one tick, work remains)");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2", "one tick ran");
    assert!(
        fs::read_to_string(dir.join("cron.log"))
            .unwrap()
            .contains("NEXUS_LOOP_STATUS: CONTINUE")
    );
    // --install with a stand-in crontab: a second install leaves one line, not two.
    let table = repo.bin.path().join("table");
    repo.agent(
        "crontab",
        &format!("t='{}'\nif [ \"$1\" = -l ]; then [ -f \"$t\" ] || exit 1; cat \"$t\"; else cat > \"$t\"; fi", table.display()),
    );
    fs::write(&table, "0 3 * * * /usr/bin/backup\n").unwrap();
    for _ in 0..2 {
        let out = repo.orbit(&[
            "schedule",
            ".orbit/test-goal",
            "--cron",
            "--every",
            "10m",
            "--install",
        ]);
        assert_ok(&out, "schedule --install");
    }
    let installed = fs::read_to_string(&table).unwrap();
    assert_eq!(installed.lines().count(), 2, "{installed}");
    assert!(
        installed.starts_with("0 3 * * * /usr/bin/backup\n"),
        "other lines are kept: {installed}"
    );
    // A new interval replaces the loop's line.
    assert_ok(
        &repo.orbit(&[
            "schedule",
            ".orbit/test-goal",
            "--cron",
            "--every",
            "2h",
            "--install",
        ]),
        "reschedule",
    );
    let installed = fs::read_to_string(&table).unwrap();
    assert_eq!(installed.lines().count(), 2);
    assert!(
        installed
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("0 */2 * * * "),
        "{installed}"
    );
    let out = repo.orbit(&["schedule", ".orbit/test-goal", "--cron", "--every", "90s"]);
    assert_code(&out, 2, "an interval cron cannot express");
}

/// A path with a quote is written into the crontab line in POSIX quotes (cron runs /bin/sh,
/// which has no `$'...'`), and the line runs a tick from there.
#[test]
fn a_path_with_a_quote_is_quoted_for_cron_not_refused() {
    let repo = Repo::with_prefix("orbit-it-o'q-");
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.orbit(&["schedule", ".orbit/test-goal", "--cron", "--every", "10m"]);
    assert_ok(&out, "schedule --cron in a path with a quote");
    let line = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    assert!(line.contains("o'\\''q-"), "{line}");
    let cron_command = line.splitn(6, ' ').nth(5).unwrap();
    let mut cmd = command("env");
    cmd.args(["-i"])
        .arg(format!("HOME={}", crate::support::sealed_home().display()))
        .arg(format!(
            "XDG_DATA_HOME={}",
            crate::support::sealed_data().display()
        ))
        .args(["sh", "-c", cron_command])
        .current_dir("/");
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert_code(&out, 10, "the crontab command from a path with a quote");
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "2");
}

/// tmux starts only a loop that would run: a DONE or stopped loop is refused with the reason
/// (and nothing is started).
#[test]
fn tmux_refuses_a_loop_that_would_not_run() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let _dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    assert_ok(&repo.orbit(&["stop"]), "orbit stop");
    let out = repo.orbit(&["schedule", "--tmux"]);
    assert_code(&out, 2, "tmux start of a stopped loop");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("orbit resume"),
        "{}",
        text(&out)
    );
    let done = Repo::new();
    let agent = crate::support::counting_agent(&done, 1);
    let dir = done.init_loop(
        &agent,
        &[&crate::support::count_check(1)],
        &["--pass-k", "1"],
    );
    assert_code(
        &done.run_loop(&dir, &[], &[("CONFIRM_RUNS", "0")]),
        0,
        "DONE",
    );
    let out = done.orbit(&["schedule", "--tmux"]);
    assert_code(&out, 2, "tmux start of a DONE loop");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DONE"),
        "{}",
        text(&out)
    );
}

/// `*/45` would run 45, then 15 minutes apart: an interval that does not divide the hour
/// or the day is refused, and every interval the refusal suggests is accepted, as cron
/// and systemd lines that repeat evenly.
#[test]
fn every_interval_is_even_or_refused_with_a_hint_that_is_true() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null");
    let _dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let mut hints = Vec::new();
    for bad in ["45m", "7m", "90m", "5h", "25h", "2d"] {
        for how in ["--cron", "--systemd"] {
            let out = repo.orbit(&["schedule", how, "--every", bad]);
            assert_code(&out, 2, &format!("{how} --every {bad}"));
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(err.contains("repeats evenly"), "{err}");
            hints.push(err);
        }
    }
    let hint = &hints[0];
    let offered: Vec<&str> = hint
        .rsplit("give one of ")
        .next()
        .unwrap()
        .trim_end()
        .split([',', ' '])
        .filter(|w| !w.is_empty() && *w != "or")
        .collect();
    assert_eq!(offered.len(), 19, "{hint}");
    for every in offered {
        let out = repo.orbit(&["schedule", "--cron", "--every", every]);
        assert_ok(&out, &format!("--every {every}, as the hint offers"));
        let line = String::from_utf8_lossy(&out.stdout).to_string();
        let (minute, hour) = {
            let mut f = line.split(' ');
            (f.next().unwrap().to_string(), f.next().unwrap().to_string())
        };
        // Each field steps by a divisor of its cycle (or is fixed), so the gaps are equal.
        for (field, cycle) in [(&minute, 60u64), (&hour, 24)] {
            if let Some(step) = field.strip_prefix("*/") {
                assert_eq!(cycle % step.parse::<u64>().unwrap(), 0, "{line}");
            }
        }
        let out = repo.orbit(&["schedule", "--systemd", "--every", every]);
        assert_ok(&out, &format!("--systemd --every {every}"));
    }
}

#[test]
fn systemd_units_are_printed_and_installed() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null");
    let _dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.orbit(&["schedule", "--systemd", "--every", "30m"]);
    assert_ok(&out, "schedule --systemd");
    let units = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        units.contains("Persistent=true") && units.contains("OnCalendar=*:0/30"),
        "{units}"
    );
    snapshot("schedule_systemd_units", &units, &repo);
    let home = tempfile::tempdir().unwrap();
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["schedule", "--systemd", "--install"])
        .current_dir(repo.path())
        .env("HOME", home.path())
        .env("PATH", repo.path_env());
    assert_ok(&run_bounded(cmd, Duration::from_secs(30)), "install");
    let unit_dir = home.path().join(".config/systemd/user");
    let mut names: Vec<String> = fs::read_dir(&unit_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    let unit = names[0].strip_suffix(".service").unwrap().to_string();
    assert_eq!(names[1], format!("{unit}.timer"));
    let service = fs::read_to_string(unit_dir.join(&names[0])).unwrap();
    assert!(
        service.contains("--once")
            && service.contains("SuccessExitStatus=3 10 11 12 13 14 15 16 17 18 20")
    );
    // A loop of the same name in another repository gets units of its own.
    let other = Repo::new();
    let agent = other.agent("worker", "cat >/dev/null");
    let _dir = other.init_loop(&agent, &["test -f never-there"], &[]);
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["schedule", "--systemd", "--install"])
        .current_dir(other.path())
        .env("HOME", home.path())
        .env("PATH", other.path_env());
    assert_ok(&run_bounded(cmd, Duration::from_secs(30)), "install");
    assert_eq!(fs::read_dir(&unit_dir).unwrap().count(), 4);
    assert_eq!(
        fs::read_to_string(unit_dir.join(&names[0])).unwrap(),
        service,
        "the first loop's units are untouched"
    );
    assert!(unit.starts_with("orbit-test-goal-"), "{unit}");
}

#[test]
fn tmux_start_then_orbit_stop_leaves_a_resumable_state_and_no_orphan() {
    if !crate::support::tmux_available() {
        return;
    }
    let repo = Repo::new();
    let started = repo.bin.path().join("started");
    let agent = repo.agent(
        "slow",
        &format!("cat >/dev/null; touch '{}'; sleep 300", started.display()),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    // A private tmux server, gone however the test ends.
    let server = crate::support::TmuxServer::new();
    let orbit = |args: &[&str]| {
        let mut cmd = command(crate::support::orbit_bin());
        cmd.args(args)
            .current_dir(repo.path())
            .env("PATH", repo.path_env())
            .env("TMUX_TMPDIR", server.tmpdir())
            .env_remove("TMUX");
        run_bounded(cmd, Duration::from_secs(120))
    };
    let out = orbit(&["schedule", "--tmux"]);
    assert_ok(&out, "schedule --tmux");
    let t0 = Instant::now();
    while !started.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the loop never started in tmux:\n{}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        orbit::ops::runner_pid(&dir).is_some(),
        "a runner holds the lock"
    );
    let audit = orbit(&["audit", "--json"]);
    let v: serde_json::Value =
        serde_json::from_slice(&audit.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&audit)));
    assert_eq!(v["loops"][0]["verdict"], "RUNNING", "{}", text(&audit));
    // A second start is refused, with the reason, while the first runs.
    let again = orbit(&["schedule", "--tmux"]);
    assert_code(&again, 2, "a second tmux start of a running loop");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already runs the loop"),
        "{}",
        text(&again)
    );
    let out = orbit(&["stop", "--wait", "60s"]);
    assert_ok(&out, "orbit stop");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("next iteration 1"),
        "{}",
        text(&out)
    );
    // The runner saved a resumable state; the loop is held until orbit resume.
    assert_eq!(state_value(&dir, "LAST_STATUS"), "PAUSED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "stopped");
    assert!(orbit::ops::runner_pid(&dir).is_none());
    let marker = format!("ORBIT_OWNER={}", fs::canonicalize(&dir).unwrap().display());
    assert!(
        crate::support::processes_with_env(&marker).is_empty(),
        "no orphan agent"
    );
    let out = orbit(&["stop"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("already stopped"));
    // The session stays open with the loop's last words until the user closes it; starting
    // the resumed loop again while it is there is refused, not reported as started.
    assert_ok(&orbit(&["resume"]), "orbit resume");
    let out = orbit(&["schedule", "--tmux"]);
    assert_code(&out, 2, "a start while the last session is still open");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("already exists"), "{}", text(&out));
    let session = said
        .split_whitespace()
        .find(|w| w.starts_with("orbit-test-goal-"))
        .expect("the session's name")
        .to_string();
    let has = command("tmux")
        .args(["has-session", "-t", &format!("={session}")])
        .env("TMUX_TMPDIR", server.tmpdir())
        .env_remove("TMUX")
        .status()
        .unwrap();
    assert!(has.success(), "the ended loop's session is still open");
}

/// A runner's last child can hold the lock a moment after the runner itself has gone (a
/// `sleep` its exit path started, say): `orbit stop` waits for the lock within `--wait`,
/// where it refused with "it started meanwhile" and left the loop unheld.
#[test]
fn orbit_stop_waits_for_the_lock_a_stopped_runners_child_still_holds() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let ready = repo.bin.path().join("holding");
    // A stand-in runner (its command line names run-loop.sh, as the runner's does) holding
    // the lock as the runner does; on TERM it leaves a child with the lock's descriptor
    // that lives on for 2 s after it.
    let script = format!(
        "exec 9>>'{lock}'; flock -n 9 || exit 9; trap 'sleep 2 & exit 0' TERM; touch '{ready}'; while :; do sleep 0.05; done",
        lock = dir.join(".run-loop.lock").display(),
        ready = ready.display()
    );
    let mut runner = command("bash")
        .args([
            "-c",
            &script,
            &dir.join("run-loop.sh").display().to_string(),
        ])
        .spawn()
        .unwrap();
    crate::support::wait_for(
        "the stand-in runner to hold the lock",
        Duration::from_secs(30),
        || ready.exists(),
    );
    let pid = orbit::ops::runner_pid(&dir).expect("the stand-in holds the lock as a runner");
    assert_eq!(pid, runner.id());
    let out = repo.orbit(&["stop", "--wait", "60s"]);
    runner.wait().unwrap();
    assert_ok(&out, "orbit stop while the runner's child holds the lock");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("stopped the runner (pid {pid})")),
        "{}",
        text(&out)
    );
    assert_eq!(state_value(&dir, "LAST_STATUS"), "PAUSED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "stopped");
}

/// `orbit stop` on an idle loop holds it: every run (a cron tick) exits 18 at once and
/// changes nothing, the audit says PAUSED with a sound journal, and `orbit resume` lets it
/// go on from where it was.
#[test]
fn a_stopped_loop_runs_nothing_until_it_is_resumed() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    // Stopped before its first run, resumed as it was: READY.
    assert_ok(&repo.orbit(&["stop"]), "orbit stop of a READY loop");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "PAUSED");
    assert_ok(&repo.orbit(&["resume"]), "orbit resume");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "READY");
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "tick 1");
    let out = repo.orbit(&["stop"]);
    assert_ok(&out, "orbit stop");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("exits 18"),
        "{}",
        text(&out)
    );
    assert_eq!(state_value(&dir, "STOP_REASON"), "stopped");
    let files = [
        "state.env",
        "state.env.sha256",
        "events.jsonl",
        "progress.md",
    ];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|f| fs::read(dir.join(f)).unwrap())
        .collect();
    for _ in 0..2 {
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 18, "a tick of a stopped loop");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"),
            "{}",
            text(&out)
        );
    }
    let after: Vec<Vec<u8>> = files
        .iter()
        .map(|f| fs::read(dir.join(f)).unwrap())
        .collect();
    assert_eq!(before, after, "a stopped loop's runs change nothing");
    let audit = repo.orbit(&["audit", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let l = &v["loops"][0];
    assert_eq!(l["verdict"], "PAUSED", "{}", text(&audit));
    assert_eq!(l["stop_reason"], "stopped");
    for f in l["findings"].as_array().unwrap() {
        assert_eq!(f["severity"], "P2", "only notes while stopped: {f}");
    }
    // Only a stopped loop is resumed.
    assert_ok(&repo.orbit(&["resume"]), "orbit resume");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    let again = repo.orbit(&["resume"]);
    assert_code(&again, 2, "orbit resume of a loop that is not stopped");
    assert!(String::from_utf8_lossy(&again.stderr).contains("not stopped"));
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "tick 2 after resume",
    );
    assert_eq!(state_value(&dir, "NEXT_ITERATION"), "3");
    let audit = repo.orbit(&["audit", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    for f in v["loops"][0]["findings"].as_array().unwrap() {
        assert_eq!(f["severity"], "P2", "{f}");
    }
}

#[test]
fn the_report_tells_status_iterations_spend_and_remaining_work() {
    let repo = Repo::new();
    let agent = repo.agent(
        "worker",
        "cat >/dev/null\necho \"$ORBIT_ITERATION\" | tr 0-9 a-j >> work.txt\necho 0.10 > \"$ORBIT_COST_FILE\"\necho \"- next: handle | pipes\" >> \"$ORBIT_AGENT_DIR/notes.md\"\necho 'I changed work.txt'",
    );
    let dir = repo.init_loop(
        &agent,
        &["cat work.txt; exit 1"],
        &["--max-iterations", "2"],
    );
    let out = repo.run_loop(&dir, &[], &[("WRAPUP_ON_LIMIT", "0")]);
    assert_code(&out, 16, "loop");
    let out = repo.orbit(&["report", ".orbit/test-goal"]);
    assert_ok(&out, "report");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("- status: BLOCKED (stop reason: max_iterations)"),
        "{report}"
    );
    assert!(report.contains("- iterations: 2 of at most 2"), "{report}");
    // audit's verdict names the state, and the next step follows from it.
    assert!(report.contains("- verdict: EXHAUSTED\n"), "{report}");
    assert!(
        report.contains("next: `raise max-iterations in .orbit/test-goal/loop.toml, then: orbit init --force --dir .orbit/test-goal && orbit run .orbit/test-goal`"),
        "{report}"
    );
    assert!(report.contains("- spend: $0.2"), "{report}");
    assert!(
        report.contains("| 2 | CONTINUE | fail: cat-work-txt-exit-1 | 1 |"),
        "{report}"
    );
    assert!(report.contains("I changed work.txt"), "{report}");
    // Not DONE: the work is read in the workspace.
    assert!(
        report.contains(&format!(
            "the loop's commits, in its workspace: `git -C {} log --oneline`",
            repo.ws().display()
        )),
        "{report}"
    );
    assert!(report.contains("    - next: handle | pipes"), "{report}");
    let file = repo.bin.path().join("report.md");
    assert_ok(
        &repo.orbit(&["report", "--output", file.to_str().unwrap()]),
        "report --output",
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), report);
}

#[test]
fn orbit_toml_supplies_defaults_and_flags_override_them() {
    let repo = Repo::new();
    repo.write("tests/t.sh", "true\n");
    repo.write(
        "orbit.toml",
        "engine = \"codex\"\nverify = [\"make check\"]\nprotect = [\"tests/**\"]\nmax-iterations = 9\nusd-cap = 3\nnotify = [\"desktop\"]\n",
    );
    assert_ok(&repo.orbit(&["init", "first"]), "init with defaults");
    let toml = repo.read(".orbit/first/loop.toml");
    for want in [
        "engine = \"codex\"",
        "verify = [\"make check\"]",
        "protect = [\"tests/**\"]",
        "max-iterations = 9",
        "usd-cap = \"3\"",
        "notify-desktop = true",
    ] {
        assert!(toml.contains(want), "{want} missing:\n{toml}");
    }
    assert_ok(
        &repo.orbit(&[
            "init",
            "second",
            "--engine",
            "gemini",
            "--verify",
            "true",
            "--max-iterations",
            "4",
        ]),
        "init with flags",
    );
    let toml = repo.read(".orbit/second/loop.toml");
    for want in [
        "engine = \"gemini\"",
        "verify = [\"true\"]",
        "max-iterations = 4",
        "protect = [\"tests/**\"]",
    ] {
        assert!(toml.contains(want), "{want} missing:\n{toml}");
    }
    repo.write("orbit.toml", "engin = \"codex\"\n");
    let out = repo.orbit(&["init", "third", "--verify", "true"]);
    assert_code(&out, 2, "a typo in orbit.toml");
    assert!(String::from_utf8_lossy(&out.stderr).contains("orbit.toml"));
}

#[test]
fn completions_and_the_manual_page_come_from_the_command_definitions() {
    let repo = Repo::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = repo.orbit(&["completions", shell]);
        assert_ok(&out, shell);
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("orbit")
                && script.contains("schedule")
                && script.contains("max-iterations"),
            "{shell}"
        );
    }
    let out = repo.orbit(&["completions", "bash"]);
    let path = repo.bin.path().join("orbit.bash");
    fs::write(&path, &out.stdout).unwrap();
    let st = command("bash").arg("-n").arg(&path).status().unwrap();
    assert!(st.success(), "the bash completion parses");
    let out = repo.orbit(&["man"]);
    assert_ok(&out, "man");
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH orbit"),
        "{}",
        &page[..page.len().min(200)]
    );
    assert!(page.contains("init") && page.contains("audit"));
}

#[test]
fn status_watch_redraws_the_fleet_table() {
    let repo = Repo::new();
    assert_ok(
        &repo.orbit(&["init", "alpha", "--verify", "true"]),
        "init alpha",
    );
    assert_ok(
        &repo.orbit(&["init", "beta", "--verify", "true"]),
        "init beta",
    );
    let out = repo.orbit(&["status", "--watch", "--interval", "1s", "--count", "2"]);
    assert_ok(&out, "status --watch");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        shown.matches(".orbit/alpha").count(),
        2,
        "two refreshes:\n{shown}"
    );
    assert_eq!(shown.matches(".orbit/beta").count(), 2, "{shown}");
    assert!(shown.contains("READY"), "{shown}");
    assert!(!shown.contains('\u{1b}'), "no escape codes off a terminal");
}

/// `--list` shows every orbit schedule of the user (other lines and units are not orbit's),
/// and `--remove` takes away this loop's, of one kind or of every kind, and no other's.
#[test]
fn schedules_are_listed_and_removed_per_loop() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let dir = fs::canonicalize(dir).unwrap();
    let other = Repo::new();
    let agent = other.agent("worker", "cat >/dev/null");
    let other_dir =
        fs::canonicalize(other.init_loop(&agent, &["test -f never-there"], &[])).unwrap();
    // A stand-in crontab shared by both repositories, and one HOME for the units.
    let table = repo.bin.path().join("table");
    let crontab = format!(
        "t='{}'\nif [ \"$1\" = -l ]; then [ -f \"$t\" ] || exit 1; cat \"$t\"; else cat > \"$t\"; fi",
        table.display()
    );
    repo.agent("crontab", &crontab);
    other.agent("crontab", &crontab);
    fs::write(&table, "0 3 * * * /usr/bin/backup\n").unwrap();
    let home = tempfile::tempdir().unwrap();
    let tmux_tmp = tempfile::tempdir().unwrap();
    let orbit = |r: &Repo, args: &[&str]| {
        let mut cmd = command(crate::support::orbit_bin());
        cmd.args(args)
            .current_dir(r.path())
            .env("HOME", home.path())
            .env("TMUX_TMPDIR", tmux_tmp.path())
            .env("PATH", r.path_env());
        run_bounded(cmd, Duration::from_secs(60))
    };
    for r in [&repo, &other] {
        for how in ["--cron", "--systemd"] {
            assert_ok(&orbit(r, &["schedule", how, "--install"]), how);
        }
    }
    let out = orbit(&repo, &["schedule", "--list"]);
    assert_ok(&out, "--list");
    let list = String::from_utf8_lossy(&out.stdout).to_string();
    for d in [&dir, &other_dir] {
        for kind in ["cron", "systemd"] {
            assert_eq!(
                list.lines()
                    .filter(|l| l.starts_with(kind) && l.contains(&d.display().to_string()))
                    .count(),
                1,
                "{kind} of {}:\n{list}",
                d.display()
            );
        }
    }
    assert!(!list.contains("backup"), "only orbit's lines: {list}");
    // Remove the first loop's crontab line only, then the rest of its schedules.
    assert_ok(
        &orbit(&repo, &["schedule", "--remove", "--cron"]),
        "--remove --cron",
    );
    let t = fs::read_to_string(&table).unwrap();
    assert!(t.contains("/usr/bin/backup") && t.contains(&other_dir.display().to_string()));
    assert!(!t.contains(&dir.display().to_string()), "{t}");
    assert_ok(&orbit(&repo, &["schedule", "--remove"]), "--remove");
    let list = String::from_utf8_lossy(&orbit(&repo, &["schedule", "--list"]).stdout).to_string();
    assert!(!list.contains(&dir.display().to_string()), "{list}");
    assert_eq!(list.lines().count(), 2, "the other loop's two: {list}");
    let out = orbit(&repo, &["schedule", "--remove"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no schedule to remove"),
        "{}",
        text(&out)
    );
}

/// A loop that stopped for a human is notified once: later ticks that find it stopped for
/// the same reason change nothing and notify nothing. cron.log stays bounded.
#[test]
fn a_stop_is_notified_once_and_the_cron_log_is_bounded() {
    let repo = Repo::new();
    let seen = repo.bin.path().join("notified");
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let cmd = format!(
        "cmd:printf '%s\\n' \"$ORBIT_EVENT\" >> '{}'",
        seen.display()
    );
    let dir = repo.init_loop(
        &agent,
        &["test -f never-there"],
        &["--max-iterations", "1", "--notify", &cmd],
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 16, "tick 1 uses the iteration up");
    // One name for the state: the footer's summary says what status and audit say.
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("NEXUS_LOOP_SUMMARY: EXHAUSTED: MAX_ITERATIONS (1) used up"),
        "{}",
        text(&out)
    );
    let status = repo.orbit(&["status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("EXHAUSTED"),
        "{}",
        text(&status)
    );
    let work = repo.ws_read("work.txt");
    let state = fs::read(dir.join("state.env")).unwrap();
    for tick in 2..=4 {
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 16, &format!("tick {tick}: iterations used up"));
    }
    assert_eq!(
        fs::read_to_string(&seen).unwrap(),
        "BLOCKED\n",
        "notified once"
    );
    assert_eq!(
        repo.ws_read("work.txt"),
        work,
        "no agent ran again (no second wrap-up)"
    );
    let after = orbit::state::State::parse(&fs::read(dir.join("state.env")).unwrap()).unwrap();
    let before = orbit::state::State::parse(&state).unwrap();
    assert_eq!(
        (after.last_status, after.stop_reason, after.next_iteration),
        (
            before.last_status,
            before.stop_reason,
            before.next_iteration
        )
    );
    // A cron.log past 1 MiB is rotated by the next tick.
    fs::write(dir.join("cron.log"), vec![b'x'; 1_100_000]).unwrap();
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 16, "tick");
    assert_eq!(
        fs::metadata(dir.join("cron.log.1")).unwrap().len(),
        1_100_000
    );
    assert!(!dir.join("cron.log").exists());
}
