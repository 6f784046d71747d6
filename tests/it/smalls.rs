//! Edges found by running orbit as a hostile agent or a new user would: a BLOCKED loop's
//! later ticks, a relative agent path, a repository path with a newline in it, the settings
//! orbit init and the runner take, and a large torn tail of the journal.

use std::fs;
use std::path::Path;

use crate::support::{Repo, assert_code, assert_ok, events_named, state_value, text};

/// How many times the agent whose run count is kept at `count` ran.
fn runs(count: &Path) -> usize {
    fs::read_to_string(count).map_or(0, |t| t.lines().count())
}

/// The files of the loop directory that a tick at rest must leave as they are: the state,
/// its sidecar, the ledger, the journal and the iterations' records.
fn at_rest_digest(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let kept = [
                "state.env",
                "state.env.sha256",
                "cost.ledger",
                "events.jsonl",
            ]
            .contains(&rel.as_str())
                || rel.starts_with("iterations/");
            kept.then(|| (rel, fs::read(e.path()).unwrap()))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_loop_blocked_on_a_tool_failure_runs_nothing_on_later_ticks_until_orbit_recover() {
    let repo = Repo::new();
    let count = repo.bin.path().join("runs");
    // The agent's CLI fails as a missing program does (exit 127), and reports a cost: a
    // tick that ran it again would spend.
    let agent = repo.agent(
        "broken",
        &format!(
            "cat >/dev/null; echo run >> '{}'; echo '{{\"total_cost_usd\": 0.25}}'; echo 'helper: command not found' >&2; exit 127",
            count.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f done.txt"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 14, "the tool failure");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "BLOCKED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "tool_failure");
    assert_eq!(runs(&count), 1);
    let before = at_rest_digest(&dir);
    // Every later tick, scheduled or by hand, runs nothing, spends nothing, and says why
    // and what moves the loop on.
    for args in [&["--once"][..], &[][..]] {
        let out = repo.run_loop(&dir, args, &[]);
        assert_code(&out, 14, "a tick of the blocked loop");
        assert_eq!(runs(&count), 1, "the agent ran again:\n{}", text(&out));
        let all = text(&out);
        assert!(
            all.contains("NEXUS_LOOP_STATUS: CONTINUE") && all.contains("tool_failure"),
            "{all}"
        );
        assert!(
            all.contains("orbit recover"),
            "the command that moves it on:\n{all}"
        );
        assert!(all.contains("exit 127"), "why it is blocked:\n{all}");
        assert_eq!(
            at_rest_digest(&dir),
            before,
            "the tick changed the loop's records"
        );
    }
    // The human fixes the agent and runs the command: the loop goes on.
    fs::write(
        &agent,
        format!(
            "#!/usr/bin/env bash\ncat >/dev/null; echo run >> '{}'; touch done.txt; echo done > \"$ORBIT_AGENT_DIR/done.md\"; [[ $ORBIT_PHASE != confirm ]] || echo CONFIRMED > \"$ORBIT_AGENT_DIR/confirm.md\"",
            count.display()
        ),
    )
    .unwrap();
    let out = repo.orbit(&["recover", dir.to_str().unwrap()]);
    assert_ok(&out, "orbit recover");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "the loop after orbit recover");
    assert!(runs(&count) > 1, "the agent ran again after orbit recover");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    assert!(!events_named(&dir, "recovery").is_empty());
}

/// One BLOCKED stop made for real: the loop of `checks` (and `extra` flags) whose agent
/// runs `body`, run with `env`, stops BLOCKED for `reason` with `code`; a later tick runs no
/// agent and stops the same way; after `move_on` (the human's act, which returns the
/// environment of the next run) the agent runs again.
fn blocked_stays_blocked(
    body: &str,
    checks: &[&str],
    extra: &[&str],
    env: &[(&str, &str)],
    (code, reason): (i32, &str),
    move_on: impl FnOnce(&Repo, &Path) -> Vec<(&'static str, &'static str)>,
) {
    let repo = Repo::new();
    let count = repo.bin.path().join("runs");
    let agent = repo.agent(
        "agent",
        &format!("cat >/dev/null; echo run >> '{}'\n{body}", count.display()),
    );
    let dir = repo.init_loop(&agent, checks, extra);
    let out = repo.run_loop(&dir, &[], env);
    assert_code(&out, code, reason);
    assert_eq!(state_value(&dir, "LAST_STATUS"), "BLOCKED", "{reason}");
    assert_eq!(state_value(&dir, "STOP_REASON"), reason);
    let ran = runs(&count);
    let ledger = fs::read(dir.join("cost.ledger")).unwrap_or_default();
    for args in [&["--once"][..], &[][..]] {
        let out = repo.run_loop(&dir, args, env);
        assert_code(&out, code, &format!("{reason}: a later tick"));
        assert_eq!(
            runs(&count),
            ran,
            "{reason}: the agent ran again:\n{}",
            text(&out)
        );
        assert_eq!(state_value(&dir, "STOP_REASON"), reason);
        assert_eq!(
            fs::read(dir.join("cost.ledger")).unwrap_or_default(),
            ledger
        );
    }
    let env = move_on(&repo, &dir);
    let out = repo.run_loop(&dir, &["--once"], &env);
    assert!(
        runs(&count) > ran,
        "{reason}: the human's act did not move the loop on:\n{}",
        text(&out)
    );
}

#[test]
fn every_blocked_stop_runs_no_agent_on_later_ticks_and_the_humans_act_moves_it_on() {
    let fails = "echo 'internal error' >&2; exit 1";
    let works = "echo x >> work.txt";
    let dir_arg = |dir: &Path| dir.to_str().unwrap().to_string();
    // The circuit: open until its cooldown or orbit recover --reset-circuit.
    blocked_stays_blocked(
        fails,
        &["test -f never-there"],
        &[],
        &[("RETRY_LIMIT", "1"), ("CB_THRESHOLD", "1")],
        (14, "circuit_open"),
        |repo, dir| {
            let out = repo.orbit(&["recover", &dir_arg(dir), "--reset-circuit"]);
            assert_ok(&out, "orbit recover --reset-circuit");
            vec![("RETRY_LIMIT", "1"), ("CB_THRESHOLD", "1")]
        },
    );
    // MAX_ITERATIONS used up (its one wrap-up run is not run again): a higher cap.
    blocked_stays_blocked(
        works,
        &["test -f never-there"],
        &["--max-iterations", "1"],
        &[],
        (16, "max_iterations"),
        |_, _| vec![("MAX_ITERATIONS", "2")],
    );
    // The loop's wall-clock limit: a longer one.
    blocked_stays_blocked(
        "sleep 2; echo x >> work.txt",
        &["test -f never-there"],
        &[],
        &[("LOOP_TIMEOUT", "1s")],
        (11, "loop_timeout"),
        |_, _| vec![("LOOP_TIMEOUT", "0")],
    );
    // The red gate: a regression check that fails on the untouched tree is re-checked on
    // each run (the check, never the agent) until the project is fixed.
    blocked_stays_blocked(
        works,
        &["test -f never-there"],
        &["--regression", "test -f base.txt"],
        &[],
        (2, "preflight"),
        |repo, dir| {
            let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
            let fixed = toml.replace("\"test -f base.txt\"", "\"test -f work.txt || true\"");
            assert_ne!(toml, fixed, "{toml}");
            fs::write(dir.join("loop.toml"), fixed).unwrap();
            let out = repo.orbit(&["init", "--force", "--dir", &dir_arg(dir)]);
            assert_ok(&out, "orbit init --force with the check fixed");
            vec![]
        },
    );
    // A verify that passes on the untouched tree: ALLOW_GREEN_START=1 (or a real check).
    blocked_stays_blocked(
        works,
        &["true"],
        &[],
        &[],
        (17, "vacuous_verify"),
        |_, _| vec![("ALLOW_GREEN_START", "1")],
    );
}

/// `orbit ARGS` run in `cwd`, bounded.
fn orbit_in(repo: &Repo, cwd: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = crate::support::command(crate::support::orbit_bin());
    cmd.args(args).current_dir(cwd).env("PATH", repo.path_env());
    crate::support::run_bounded(cmd, std::time::Duration::from_secs(120))
}

#[test]
fn a_relative_exec_is_resolved_where_orbit_init_runs_and_refused_when_it_cannot_run() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new();
    repo.write(
        "tools/agent.sh",
        "#!/usr/bin/env bash\ncat >/dev/null\n[[ $1 == --fast ]] || exit 3\ntouch done.txt\necho done > \"$ORBIT_AGENT_DIR/done.md\"\n[[ $ORBIT_PHASE != confirm ]] || echo CONFIRMED > \"$ORBIT_AGENT_DIR/confirm.md\"\n",
    );
    fs::set_permissions(
        repo.join("tools/agent.sh"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    repo.write("tools/plain.sh", "#!/bin/sh\nexit 0\n");
    repo.write("sub/keep", "");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "tools"]);
    let init = |cwd: &Path, exec: &str, dir: &str| {
        orbit_in(
            &repo,
            cwd,
            &[
                "init",
                "g",
                "--engine",
                "custom",
                "--exec",
                exec,
                "--verify",
                "test -f done.txt",
                "--dir",
                dir,
            ],
        )
    };
    // Refused, with the fix, when the path names no file, or one that cannot be run; and
    // nothing is written.
    for (exec, said) in [
        ("./tools/missing.sh --fast", "does not exist"),
        ("./tools/plain.sh", "chmod +x"),
        ("./tools", "not a file"),
    ] {
        let out = init(repo.path(), exec, ".orbit/refused");
        assert_code(&out, 2, exec);
        let all = text(&out);
        assert!(
            all.contains(said) && all.contains("--exec"),
            "{exec}:\n{all}"
        );
        assert!(
            !repo.join(".orbit/refused").exists(),
            "{exec}: a loop was written"
        );
    }
    // Given relative to the directory orbit init runs in (here a subdirectory), it is
    // written into loop.toml as the absolute path, so that every run finds it: from the
    // repository root and from anywhere else (cron starts in HOME).
    let out = init(
        &repo.join("sub"),
        "../tools/agent.sh --fast",
        "../.orbit/rel",
    );
    assert_ok(&out, "orbit init with a relative --exec");
    let dir = repo.join(".orbit/rel");
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    let abs = fs::canonicalize(repo.join("tools/agent.sh")).unwrap();
    assert!(
        toml.contains(&format!("argv = [\"{}\", \"--fast\"]", abs.display())),
        "{toml}"
    );
    let mut cmd = crate::support::command("bash");
    cmd.arg(dir.join("run-loop.sh"))
        .arg("--once")
        .current_dir("/")
        .env("PATH", repo.path_env());
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(180));
    assert!(
        matches!(out.status.code(), Some(0 | 10)),
        "a run started outside the repository:\n{}",
        text(&out)
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "a run from the repository root");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    // A relative path written into loop.toml by hand is refused by orbit init --force, as
    // the runner would refuse it, with the fix.
    fs::write(
        dir.join("loop.toml"),
        toml.replace(&abs.display().to_string(), "./tools/agent.sh"),
    )
    .unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", ".orbit/rel"]);
    assert_code(&out, 2, "a relative argv in loop.toml");
    assert!(text(&out).contains("absolute path"), "{}", text(&out));
}

/// `orbit audit --json DIR`'s findings as (class, severity, evidence, message), under a
/// virtual memory limit of `limit_kb` when given.
fn audit_findings(
    repo: &Repo,
    dir: &Path,
    limit_kb: Option<u64>,
) -> Vec<(String, String, String, String)> {
    let mut cmd = crate::support::command("bash");
    let limit = limit_kb.map_or(String::new(), |kb| format!("ulimit -v {kb}; "));
    cmd.arg("-c")
        .arg(format!("{limit}exec \"$0\" audit --json \"$1\""))
        .arg(crate::support::orbit_bin())
        .arg(dir)
        .current_dir(repo.path())
        .env("PATH", repo.path_env());
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(120));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("orbit audit --json: {e}\n{}", text(&out)));
    v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or("").to_string();
            (s("class"), s("severity"), s("evidence"), s("message"))
        })
        .collect()
}

#[test]
fn a_journal_tail_longer_than_the_audits_window_is_reported_and_hides_no_edited_event() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick");
    let journal = dir.join("events.jsonl");
    let clean = fs::read(&journal).unwrap();
    let broken = |f: &[(String, String, String, String)]| {
        f.iter()
            .filter(|(c, ..)| c == "JOURNAL_BROKEN")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(broken(&audit_findings(&repo, &dir, None)).is_empty());
    // An event edited in the middle of the journal (its hash no longer matches), then a
    // tail of 5 MiB with no newline appended: the audit's 4 MiB window held no whole line,
    // so it saw nothing at all.
    let text_of = String::from_utf8(clean.clone()).unwrap();
    let edited = text_of.replacen("\"once\":1", "\"once\":0", 1);
    assert_ne!(edited, text_of, "the journal has a loop_start of a tick");
    let edited_line = edited
        .lines()
        .position(|l| l.contains("\"once\":0"))
        .unwrap()
        + 1;
    let mut bytes = edited.into_bytes();
    bytes.extend(std::iter::repeat_n(b'x', 5 << 20));
    fs::write(&journal, &bytes).unwrap();
    let found = broken(&audit_findings(&repo, &dir, None));
    assert!(
        found
            .iter()
            .any(|(_, sev, ev, _)| sev == "P1" && *ev == format!("events.jsonl:{edited_line}")),
        "the edited event before the long tail: {found:?}"
    );
    let tail_line = text_of.lines().count() + 1;
    assert!(
        found.iter().any(|(_, sev, ev, msg)| sev == "P1"
            && *ev == format!("events.jsonl:{tail_line}")
            && msg.contains("5242880 bytes")),
        "the long unterminated tail: {found:?}"
    );
    // The same tail, terminated, over an intact chain: a line no event is, reported.
    let mut bytes = clean.clone();
    bytes.extend(std::iter::repeat_n(b'x', 5 << 20));
    bytes.push(b'\n');
    fs::write(&journal, &bytes).unwrap();
    let found = broken(&audit_findings(&repo, &dir, None));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].2, format!("events.jsonl:{tail_line}"), "{found:?}");
    // A tail of 1 GiB (a sparse file: no disk spent) is read in bounded memory: the audit
    // runs under a virtual memory limit far below it.
    fs::write(&journal, &clean).unwrap();
    let f = fs::OpenOptions::new().write(true).open(&journal).unwrap();
    f.set_len(clean.len() as u64 + (1 << 30)).unwrap();
    drop(f);
    let found = broken(&audit_findings(&repo, &dir, Some(512 << 10)));
    assert!(
        found
            .iter()
            .any(|(_, sev, ev, _)| sev == "P1" && *ev == format!("events.jsonl:{tail_line}")),
        "{found:?}"
    );
}

/// A git repository with one commit at `path`.
fn repo_at(path: &Path) {
    fs::create_dir_all(path).unwrap();
    let git = |args: &[&str]| {
        let out = crate::support::command("git")
            .arg("-C")
            .arg(path)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    fs::write(path.join("README"), "x\n").unwrap();
    git(&["add", "README"]);
    git(&["commit", "-qm", "init"]);
}

#[test]
fn a_repository_path_with_a_newline_is_refused_by_orbit_init_and_by_the_runner() {
    let repo = Repo::new();
    let count = repo.bin.path().join("runs");
    let agent = repo.agent(
        "worker",
        &format!(
            "cat >/dev/null; echo run >> '{}'; echo x >> work.txt",
            count.display()
        ),
    );
    let exec = agent.display().to_string();
    let base = tempfile::tempdir().unwrap();
    let odd = base.path().join("my\nrepo");
    repo_at(&odd);
    let args = [
        "init",
        "g",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "test -f never-there",
    ];
    let out = orbit_in(&repo, &odd, &args);
    assert_code(
        &out,
        2,
        "orbit init in a repository whose path holds a newline",
    );
    let all = text(&out);
    assert!(all.contains("newline") && all.contains("rename"), "{all}");
    assert!(!odd.join(".orbit").exists(), "nothing is written");
    // A loop rendered at a plain path whose repository is moved to such a path: the
    // runner's preflight refuses it, nothing run, nothing written.
    let plain = base.path().join("plain");
    repo_at(&plain);
    let out = orbit_in(&repo, &plain, &args);
    assert_ok(&out, "orbit init at a plain path");
    let moved = base.path().join("moved\nrepo");
    fs::rename(&plain, &moved).unwrap();
    let dir = moved.join(".orbit/g");
    let before = fs::read(dir.join("state.env")).unwrap();
    let mut cmd = crate::support::command("bash");
    cmd.arg(dir.join("run-loop.sh"))
        .arg("--once")
        .current_dir(&moved)
        .env("PATH", repo.path_env());
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(180));
    assert_code(
        &out,
        2,
        "the runner in a repository whose path holds a newline",
    );
    let all = text(&out);
    assert!(all.contains("newline") && all.contains("rename"), "{all}");
    assert_eq!(runs(&count), 0, "the agent ran");
    assert_eq!(fs::read(dir.join("state.env")).unwrap(), before);
}

/// Values of setting `s` that loop.toml (orbit init) and the runner must both refuse, and
/// values both must take: from its kind and, for text and lists, the rule loop.toml holds
/// it to. The loop they are tried on has one check, named `unit`.
fn setting_values(s: &orbit::contract::Setting) -> (Vec<String>, Vec<String>) {
    use orbit::contract::SettingKind;
    let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match s.kind {
        SettingKind::Count { min, max } => {
            let mut bad = vec![(max + 1).to_string(), "12x".into(), "-1".into(), "".into()];
            if min > 0 {
                bad.push((min - 1).to_string());
            }
            (bad, vec![min.to_string(), max.to_string()])
        }
        SettingKind::Duration { min } => {
            let mut bad = v(&["10y", "1x", "367d", ""]);
            if min > 0 {
                bad.push("0".into());
            }
            (bad, v(&["90s", "1h30m"]))
        }
        SettingKind::Bool => (v(&["maybe", "2"]), vec![]),
        SettingKind::Usd => (v(&["abc", "1.2345678", "-1", "1e3"]), v(&["12.50", "5"])),
        SettingKind::Choice { words } => (v(&["firejail", ""]), vec![words[0].to_string()]),
        SettingKind::Text | SettingKind::List => match s.key {
            "placeholder-pattern" => (v(&["TODO|[unclosed"]), v(&["TODO|FIXME", "a{1", ""])),
            "notify-webhook" => (v(&["ftp://x", "hook"]), v(&["https://h.example/a"])),
            "notify-ntfy" => (
                v(&["a/b", "topi?"]),
                v(&["topic_1", "https://ntfy.example/t"]),
            ),
            "notify-webhook-env" => (v(&["1X", "A-B"]), v(&["SLACK_WEBHOOK_URL", ""])),
            "env-file" => (
                v(&["keys.env", "/a/../keys.env", "/a/./keys.env"]),
                v(&["/home/u/keys.env", ""]),
            ),
            "workspace" => (v(&["a/../b", "./ws"]), v(&["ws/dir", "/abs/ws", ""])),
            "allow-fewer-tests" => (v(&["nosuch", "un?t"]), v(&["unit", ""])),
            "allow-hosts" => (
                v(&[
                    "https://h.example",
                    "h.example/p",
                    "h.example:99999",
                    "-h.example",
                    "api.exampl?.com",
                ]),
                v(&["api.example.com", "127.0.0.1:8080", "*.example.com", ""]),
            ),
            "token-prices" => (
                v(&["gpt=1/2", "gpt-5=a/b/c"]),
                v(&["gpt-5=1.25/0.125/10", "*=1/1/1"]),
            ),
            // Free text: a command. Only a NUL byte is refused, and no environment
            // variable or rendered script can carry one to the runner.
            "judge-cmd" | "notify-cmd" => (vec![], v(&["./judge.sh --strict", ""])),
            "offline-env" => (
                v(&[
                    "CARGO_NET_OFFLINE",
                    "PATH=/x",
                    "LD_PRELOAD=/x.so",
                    "ORBIT_X=1",
                    "1X=a",
                    "A=b c",
                ]),
                v(&["CARGO_NET_OFFLINE=true", "GOFLAGS=-mod=mod", ""]),
            ),
            // Paths from the repository's top; a path is taken only beside a setup, which
            // this walk's loop has none of (loop.toml refuses setup-inputs alone).
            "setup-inputs" => (v(&["/lock", "a/../b.lock", "./b.lock"]), v(&[""])),
            // Free text put before the commit's subject.
            "commit-message-prefix" => (vec![], v(&["PROJ-123 ", "fix: ", ""])),
            key => panic!("setting {key}: give this walk the values its rule refuses"),
        },
    }
}

/// loop.toml holding the setting `s` at `value`, on a loop of one check named `unit`.
fn loop_toml_with(s: &orbit::contract::Setting, value: &str) -> String {
    use orbit::contract::SettingKind;
    let quoted = toml::Value::String(value.into()).to_string();
    let v = match s.kind {
        SettingKind::Count { .. } if value.parse::<i64>().is_ok() => value.to_string(),
        SettingKind::List if value.is_empty() => "[]".into(),
        SettingKind::List => format!("[{quoted}]"),
        SettingKind::Bool if value == "true" || value == "false" => value.to_string(),
        _ => quoted,
    };
    format!(
        "verify = [\"cargo test\"]\ncheck-name = {{ \"cargo test\" = \"unit\" }}\n{} = {v}\n",
        s.key
    )
}

#[test]
fn orbit_init_and_the_runner_refuse_the_same_value_of_every_setting() {
    use orbit::config::LoopConfig;
    let mut cases: Vec<(&orbit::contract::Setting, String, bool)> = Vec::new();
    for s in orbit::contract::SETTINGS {
        let (bad, good) = setting_values(s);
        cases.extend(bad.into_iter().map(|v| (s, v, false)));
        cases.extend(good.into_iter().map(|v| (s, v, true)));
    }
    // loop.toml: what orbit init (and --force) reads.
    for (s, value, ok) in &cases {
        let text = loop_toml_with(s, value);
        let took = toml::from_str::<LoopConfig>(&text)
            .map_err(|e| e.to_string())
            .and_then(|c| c.validate().map_err(|e| e.to_string()));
        assert_eq!(
            took.is_ok(),
            *ok,
            "loop.toml {} = {value:?}: {took:?}",
            s.key
        );
    }
    let nul: LoopConfig = toml::from_str("judge-cmd = \"a\\u0000b\"").unwrap();
    assert!(nul.validate().is_err(), "a NUL byte in free text");
    // The runner: every setting at its default but the one tried, through config_settings_check
    // (and the token prices' check of its preflight).
    let work = tempfile::tempdir().unwrap();
    // Files a pattern among the values would match, were a value split and globbed where
    // the runner stands: each rule must see the word as written.
    for f in ["unit", "topic", "api.example.com"] {
        fs::write(work.path().join(f), "").unwrap();
    }
    let list: String = cases
        .iter()
        .map(|(s, v, _)| format!("{}\t{v}\n", s.bash_name()))
        .collect();
    fs::write(work.path().join("cases"), list).unwrap();
    let defaults: String = orbit::contract::SETTINGS
        .iter()
        .map(|s| {
            format!(
                "    {}={}\n",
                s.bash_name(),
                orbit::shell::quote(s.default).unwrap()
            )
        })
        .collect();
    let body = format!(
        r#"CHECK_NAMES=(unit)
while IFS=$'\t' read -r name value; do
  if (
{defaults}    printf -v "$name" '%s' "$value"
    config_settings_check
    engine_prices_check || {{ echo "TOKEN_PRICES word '$REPLY' is bad" >&2; exit 2; }}
  ) >/dev/null 2>"$2"; then echo ok; else echo "err $(tr '\n' ' ' <"$2")"; fi
done <"$1""#
    );
    let mut cmd =
        crate::support::bash_with_parts(work.path(), &["common", "engine", "runner/config"], &body);
    cmd.arg(work.path().join("cases"))
        .arg(work.path().join("err"))
        .current_dir(work.path());
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(120));
    assert_ok(&out, "the settings harness");
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got.len(), cases.len(), "{}", text(&out));
    for ((s, value, ok), line) in cases.iter().zip(&got) {
        assert_eq!(
            line.starts_with("ok"),
            *ok,
            "{}={value:?}: loop.toml says {ok}, the runner says {line}",
            s.bash_name()
        );
        if !ok {
            assert!(line.contains(&s.bash_name()), "{line}");
        }
    }
    // The pattern orbit init --force let through, end to end: refused, with the fix.
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    let mut edited = String::new();
    for line in toml.lines() {
        if line.starts_with("placeholder-pattern") {
            edited.push_str("placeholder-pattern = \"TODO|[unclosed\"\n");
        } else {
            edited.push_str(line);
            edited.push('\n');
        }
    }
    fs::write(dir.join("loop.toml"), edited).unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", ".orbit/test-goal"]);
    assert_code(&out, 2, "orbit init --force with a pattern grep refuses");
    assert!(text(&out).contains("placeholder-pattern"), "{}", text(&out));
}

/// Spend recorded by the runner is never lowered by a ledger that lost lines: an agent
/// that empties cost.ledger is stopped (loop_tamper), and the recover the audit advises
/// keeps the spend the state held, so the cap still counts the runs that were paid for.
#[test]
fn an_emptied_ledger_does_not_reset_the_spend_through_orbit_recover() {
    let repo = Repo::new();
    let count = repo.bin.path().join("runs");
    let ledger = repo.path().join(".orbit/test-goal/cost.ledger");
    let agent = repo.agent(
        "spender",
        &format!(
            "cat >/dev/null; [ \"$ORBIT_PHASE\" = work ] || exit 0\necho run >> {count}\necho \"$ORBIT_ITERATION\" | tr 0-9 a-j >> work.txt\necho 0.40 > \"$ORBIT_COST_FILE\"\nif [ \"$ORBIT_ITERATION\" = 2 ] && [ ! -e {count}.emptied ]; then : > {ledger}; test ! -s {ledger} && echo emptied >> {count}.emptied; fi",
            count = count.display(),
            ledger = ledger.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["cat work.txt; exit 1"], &["--usd-cap", "1"]);
    let out = repo.run_loop(&dir, &[], &[]);
    // The attack was made: the ledger was emptied during the second run, and caught.
    assert!(
        repo.bin.path().join("runs.emptied").is_file(),
        "{}",
        text(&out)
    );
    assert_code(&out, 3, "loop_tamper");
    assert_eq!(state_value(&dir, "STOP_REASON"), "loop_tamper");
    let held: u64 = state_value(&dir, "COST_MICROUSD").parse().unwrap();
    assert!(
        held >= 400_000,
        "the state holds the first run's spend: {held}"
    );
    let ledger_sum: u64 = fs::read_to_string(&ledger)
        .unwrap()
        .lines()
        .filter_map(|l| l.split('\t').nth(1)?.parse::<u64>().ok())
        .sum();
    assert!(
        ledger_sum < held,
        "the ledger lost lines: {ledger_sum} < {held}"
    );

    // recover.sh plans the same (its dry run, before the repair).
    let sh = crate::support::command("bash")
        .arg(dir.join("recover.sh"))
        .arg("--dry-run")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        sh.status.success()
            && text(&sh).contains("COST_MICROUSD kept at 400000")
            && !text(&sh).contains("COST_MICROUSD 400000 →"),
        "recover.sh changes no spend either:\n{}",
        text(&sh)
    );

    let rec = repo.orbit(&["recover", &dir.display().to_string()]);
    assert_ok(&rec, "orbit recover");
    let kept: u64 = state_value(&dir, "COST_MICROUSD").parse().unwrap();
    assert_eq!(
        kept,
        held,
        "recover keeps the held spend:\n{}\nledger:\n{}\nlog:\n{}",
        text(&rec),
        fs::read_to_string(&ledger).unwrap_or_default(),
        fs::read_to_string(dir.join("runner.log")).unwrap_or_default()
    );
    assert!(text(&rec).contains("never lowered"), "{}", text(&rec));
    let audit = repo.orbit(&["audit", "--json", &dir.display().to_string()]);
    assert!(
        String::from_utf8_lossy(&audit.stdout).contains("less than the $0.4 state.env holds"),
        "the audit says the ledger lost lines:\n{}",
        text(&audit)
    );

    // The next run counts the held spend against the cap: at most one more run fits in $1.
    let before = runs(&count);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 12, "the cap is reached");
    let after = runs(&count);
    let spent: u64 = state_value(&dir, "COST_MICROUSD").parse().unwrap();
    assert!(
        spent >= held + 400_000 * (after - before) as u64,
        "every run counted: {spent}"
    );
    assert!(
        (after as u64) * 400_000 <= 1_000_000 + 400_000,
        "no more runs than the cap pays for (one may cross it): {after} runs\n{}",
        text(&out)
    );
}

#[test]
fn a_limit_reached_before_the_red_gate_ended_stops_as_loop_timeout() {
    // The workspace's setup outlasts the loop's whole limit: the red gate's checks cannot
    // start, so nothing is known of the untouched tree; no stale tally may stand in for it.
    let repo = Repo::new();
    let count = repo.bin.path().join("runs");
    let agent = repo.agent(
        "agent",
        &format!("cat >/dev/null; echo run >> '{}'", count.display()),
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &["--setup", "sleep 2"]);
    let out = repo.run_loop(&dir, &[], &[("LOOP_TIMEOUT", "1s")]);
    assert_code(&out, 11, "loop_timeout before the red gate");
    assert_eq!(state_value(&dir, "STOP_REASON"), "loop_timeout");
    assert_eq!(runs(&count), 0, "an agent ran:\n{}", text(&out));
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(!log.contains("internal error"), "{log}");
    let verify = fs::read_to_string(dir.join("iterations/baseline/verify.log")).unwrap();
    assert!(verify.contains("wall-clock limit"), "{verify}");
}
