//! `orbit init`: snapshots of the rendered loop directory, the hostile-goal corpus rendered
//! and executed, refusals that write nothing, and `--force`.

use std::fs;
use std::path::Path;

use crate::support::{
    Repo, assert_code, assert_ok, assert_script_clean, command, hostile_goals, text,
};

/// Every file of a fresh loop directory (contract section 3, before a first run).
const FRESH_FILES: [&str; 14] = [
    "goal.md",
    "loop.toml",
    "prompt.md",
    "verify.sh",
    "holdout.sh",
    "run-loop.sh",
    "recover.sh",
    "notify.sh",
    "lib.sh",
    "notes.md",
    "state.env",
    "state.env.sha256",
    "progress.md",
    "pins.sha256",
];

/// The static bash parts, summarised in snapshots (they are tested by execution and
/// shellcheck; the snapshot shows what is rendered around them, and which parts a loop of
/// that shape holds): verbatim in a script (the runner's reaper), comments and indentation
/// stripped in lib.sh.
fn summarise_static(mut text: String) -> String {
    text = text.replace(
        &orbit::bashstrip::strip(orbit::contract::bash::prelude()),
        "[static part the contract prelude, stripped]\n",
    );
    for (name, part) in orbit::render::STATIC_PARTS {
        let placed = orbit::render::place_perl(part);
        text = text.replace(
            &*placed,
            &format!("[static part {name}, included verbatim]\n"),
        );
        text = text.replace(
            &orbit::render::library_part(part),
            &format!("[static part {name}, stripped]\n"),
        );
    }
    text
}

/// One readable document: every file of the loop directory under a header line.
fn dump(dir: &Path) -> String {
    let mut out = String::new();
    for name in FRESH_FILES {
        let body = fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        out.push_str(&format!("======== {name} ========\n"));
        out.push_str(&summarise_static(body));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    let mut pins: Vec<String> = fs::read_dir(dir.join(".pins"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pins.sort();
    out.push_str(&format!("======== .pins/ ========\n{}\n", pins.join("\n")));
    out
}

fn snapshot(name: &str, dir: &Path) {
    let doc = dump(dir);
    insta::with_settings!({
        snapshot_path => "../../snapshots",
        prepend_module_to_snapshot => false,
        filters => vec![
            (r"\b[0-9a-f]{64}\b", "[SHA256]"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[UTC]"),
            (r"LAST_UPDATED_AT=\d+", "LAST_UPDATED_AT=[EPOCH]"),
            (r"orbit \d+\.\d+\.\d+", "orbit [VERSION]"),
            (r"ORBIT_VERSION='\d+\.\d+\.\d+'", "ORBIT_VERSION='[VERSION]'"),
        ],
    }, {
        insta::assert_snapshot!(name, doc);
    });
}

fn check_fresh_loop(dir: &Path) {
    for name in FRESH_FILES {
        assert!(
            dir.join(name).is_file(),
            "{name} missing from {}",
            dir.display()
        );
    }
    for script in [
        "verify.sh",
        "holdout.sh",
        "run-loop.sh",
        "recover.sh",
        "notify.sh",
        "lib.sh",
    ] {
        assert_script_clean(&dir.join(script));
    }
    let out = command("sha256sum")
        .args(["-c", "--strict", "pins.sha256"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sha256sum -c pins.sha256:\n{}",
        text(&out)
    );
    let state = orbit::state::State::parse_file(&dir.join("state.env")).unwrap();
    assert_eq!(
        (state.last_status.as_str(), state.next_iteration),
        ("READY", 1)
    );
    let sidecar =
        orbit::state::Sidecar::parse(&fs::read(dir.join("state.env.sha256")).unwrap()).unwrap();
    assert_eq!(
        sidecar,
        orbit::state::Sidecar::for_state(&state.print(), state.generation)
    );
    let progress = orbit::progress::parse(&fs::read(dir.join("progress.md")).unwrap());
    assert_eq!(progress.entries.len(), 1);
    assert!(progress.entries[0].hash_ok && progress.torn_tail_line.is_none());
}

/// The loop directory of the goal the snapshot tests use.
const SNAPSHOT_LOOP: &str = ".orbit/make-cargo-test-pass-on-the-new-parser";

/// Asserts what run-loop.sh holds of the parts chosen when a loop is rendered: its engine's
/// part and no other engine's, the fan-out and the sandbox only when the loop uses them
/// (else their stand-ins), and the same again after `orbit init --force`.
fn check_chosen_parts(repo: &Repo, dir: &Path, engine: &str, fanout: bool, sandbox: bool) {
    let runner = fs::read_to_string(dir.join("run-loop.sh")).unwrap();
    let lib = fs::read_to_string(dir.join("lib.sh")).unwrap();
    let holds = |name: &str| {
        let (_, part) = orbit::render::STATIC_PARTS
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is not a static part"));
        lib.contains(&orbit::render::library_part(part))
    };
    for e in orbit::contract::Engine::ALL {
        let name = format!("lib/engines/{e}.sh");
        assert_eq!(holds(&name), e.as_str() == engine, "{engine} loop: {name}");
    }
    assert_eq!(
        holds("lib/fanout.sh"),
        fanout,
        "{engine} loop: lib/fanout.sh"
    );
    assert_eq!(
        holds("lib/no-fanout.sh"),
        !fanout,
        "{engine} loop: lib/no-fanout.sh"
    );
    assert_eq!(
        holds("lib/sandbox.sh"),
        sandbox,
        "{engine} loop: lib/sandbox.sh"
    );
    assert_eq!(
        holds("lib/no-sandbox.sh"),
        !sandbox,
        "{engine} loop: lib/no-sandbox.sh"
    );
    check_home_readers(dir, engine);
    let shown = dir.display().to_string();
    let out = repo.orbit(&["init", "--force", "--dir", &shown]);
    assert_ok(&out, "orbit init --force");
    assert_eq!(
        fs::read_to_string(dir.join("run-loop.sh")).unwrap(),
        runner,
        "{engine} loop: --force renders the same runner"
    );
    assert_eq!(
        fs::read_to_string(dir.join("lib.sh")).unwrap(),
        lib,
        "{engine} loop: --force renders the same library"
    );
}

/// The perl readers of the held files that are neither a file nor a directory, each with
/// the engines whose held files need it: a subroutine each reader defines, and the engines.
const HOME_READERS: &[(&str, &[&str])] = &[
    ("sub claude_json ", &["claude"]),
    ("sub claude_proj ", &["claude"]),
    ("sub codex_toml ", &["codex"]),
    ("sub json_keys ", &["copilot"]),
    ("sub json_of ", &["claude", "copilot"]),
];

/// Asserts that the scripts of an `engine` loop hold its engine's readers of the held files
/// and no other engine's (a claude loop holds no TOML reader, a codex loop no JSON one).
fn check_home_readers(dir: &Path, engine: &str) {
    let mut scripts = String::new();
    for name in [
        "run-loop.sh",
        "recover.sh",
        "verify.sh",
        "holdout.sh",
        "notify.sh",
        "lib.sh",
    ] {
        scripts.push_str(&fs::read_to_string(dir.join(name)).unwrap());
    }
    for (sub, engines) in HOME_READERS {
        assert_eq!(
            scripts.contains(sub),
            engines.contains(&engine),
            "{engine} loop: the reader {sub:?} (of {engines:?})"
        );
    }
}

#[test]
fn each_engine_renders_a_complete_valid_loop() {
    for engine in orbit::contract::Engine::ALL.iter().map(|e| e.as_str()) {
        let repo = Repo::new();
        let mut args = vec![
            "init",
            "Make `cargo test` pass on the new parser",
            "--engine",
            engine,
            "--verify",
            "cargo test",
        ];
        if engine == "custom" {
            args.extend([
                "--exec",
                "/usr/local/bin/my-agent --model 'big one' --quiet",
            ]);
        }
        let out = repo.orbit(&args);
        assert_ok(&out, "orbit init");
        let dir = repo.join(SNAPSHOT_LOOP);
        check_fresh_loop(&dir);
        let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
        assert!(toml.contains(&format!("engine = \"{engine}\"")), "{toml}");
        snapshot(&format!("init_engine_{engine}"), &dir);
        // sandbox = "auto", a new loop's default: it holds the sandbox's part.
        assert!(toml.contains("sandbox = \"auto\""), "{toml}");
        check_chosen_parts(&repo, &dir, engine, false, true);
    }
}

#[test]
fn a_loop_holds_the_fanout_and_the_sandbox_only_when_it_uses_them() {
    for (name, extra, fanout, sandbox) in [
        ("init_claude_candidates", ["--candidates", "3"], true, true),
        ("init_claude_sandboxed", ["--sandbox", "bwrap"], false, true),
        (
            "init_claude_unsandboxed",
            ["--sandbox", "none"],
            false,
            false,
        ),
    ] {
        let repo = Repo::new();
        let mut args = vec![
            "init",
            "Make `cargo test` pass on the new parser",
            "--verify",
            "cargo test",
        ];
        args.extend(extra);
        let out = repo.orbit(&args);
        assert_ok(&out, "orbit init");
        let dir = repo.join(SNAPSHOT_LOOP);
        check_fresh_loop(&dir);
        snapshot(name, &dir);
        check_chosen_parts(&repo, &dir, "claude", fanout, sandbox);
    }
}

#[test]
fn every_engines_part_reads_clean_beside_the_fanout_and_the_sandbox() {
    // What is chosen at init meets in one script: each engine's part with lib/fanout.sh and
    // lib/sandbox.sh, read by shellcheck as one (the loops above hold their stand-ins).
    for engine in orbit::contract::Engine::ALL.iter().map(|e| e.as_str()) {
        let repo = Repo::new();
        let mut args = vec![
            "init",
            "Make `cargo test` pass on the new parser",
            "--engine",
            engine,
            "--verify",
            "cargo test",
            "--candidates",
            "2",
            "--sandbox",
            "bwrap",
        ];
        if engine == "custom" {
            args.extend(["--exec", "my-agent --quiet"]);
        }
        let out = repo.orbit(&args);
        assert_ok(&out, "orbit init");
        let dir = repo.join(SNAPSHOT_LOOP);
        assert_script_clean(&dir.join("run-loop.sh"));
        check_chosen_parts(&repo, &dir, engine, true, true);
    }
}

#[test]
fn several_checks_and_protect_globs() {
    let repo = Repo::new();
    repo.write("tests/parser.rs", "#[test] fn t() {}\n");
    repo.write("Cargo.lock", "# a lock file\n");
    let out = repo.orbit(&[
        "init",
        "Parse every RFC 3339 timestamp",
        "--engine",
        "codex",
        "--verify",
        "cargo test --lib",
        "--verify",
        "cargo clippy -- -D warnings",
        "--verify",
        "grep -q 'fn parse' src/lib.rs",
        "--protect",
        "tests/**",
        "--protect",
        "Cargo.lock",
        "--max-iterations",
        "12",
        "--exec-timeout",
        "15m",
        "--loop-timeout",
        "8h",
        "--usd-cap",
        "25.50",
        "--pass-k",
        "3",
        "--dir",
        ".orbit/rfc3339",
    ]);
    assert_ok(&out, "orbit init");
    let dir = repo.join(".orbit/rfc3339");
    check_fresh_loop(&dir);
    let verify = fs::read_to_string(dir.join("verify.sh")).unwrap();
    assert_eq!(
        verify.matches("\n  run_check ").count(),
        3,
        "one run_check line per check"
    );
    snapshot("init_checks_and_protect", &dir);
}

/// verify.sh on its own: [PASS]/[FAIL] lines, the closing line, non-zero on any failure.
#[test]
fn verify_sh_reports_each_check_and_fails_on_any_failure() {
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init",
        "g",
        "--engine",
        "custom",
        "--exec",
        "true",
        "--verify",
        "true",
        "--verify",
        "echo boom; exit 3",
        "--verify",
        "sleep 30",
        "--dir",
        ".orbit/v",
    ]);
    assert_ok(&out, "orbit init");
    let mut cmd = command("bash");
    cmd.arg(repo.join(".orbit/v/verify.sh"))
        // Long enough for the checks that end by themselves on a loaded machine.
        .env("CHECK_TIMEOUT", "5")
        .env("KILL_GRACE", "1");
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(30));
    assert_code(&out, 1, "verify.sh with failures");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[PASS] true\n"), "{stdout}");
    assert!(
        stdout.contains("[FAIL] echo-boom-exit-3 (exit 3)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[FAIL] sleep-30 (timed out after 5s)"),
        "{stdout}"
    );
    assert!(stdout.contains("boom"), "check output is shown: {stdout}");
    assert!(stdout.ends_with("1 passed, 2 failed\n"), "{stdout}");
}

#[test]
fn verify_sh_with_no_check_fails() {
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init", "g", "--engine", "custom", "--exec", "true", "--verify", "true", "--dir",
        ".orbit/v",
    ]);
    assert_ok(&out, "orbit init");
    // A loop.toml edited to hold no check, re-rendered.
    let toml = repo
        .read(".orbit/v/loop.toml")
        .replace("verify = [\"true\"]", "verify = []");
    repo.write(".orbit/v/loop.toml", &toml);
    assert_ok(
        &repo.orbit(&["init", "--force", "--dir", ".orbit/v"]),
        "orbit init --force",
    );
    let out = command("bash")
        .arg(repo.join(".orbit/v/verify.sh"))
        .output()
        .unwrap();
    assert_code(&out, 1, "verify.sh without checks");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("0 passed, 0 failed") && stdout.contains("no check ran"),
        "{stdout}"
    );
}

#[test]
fn hostile_goals_render_safely_and_reach_the_agent_byte_for_byte() {
    let repo = Repo::new();
    let record = repo.bin.path().join("stdin-copy");
    let agent = repo.agent("recorder", &format!("cat > '{}'\nexit 0", record.display()));
    for (name, goal) in hostile_goals() {
        let goal_file = repo.bin.path().join(format!("goal-{name}.txt"));
        fs::write(&goal_file, &goal).unwrap();
        let dir_rel = format!(".orbit/hostile-{name}");
        let exec = agent.display().to_string();
        let out = repo.orbit(&[
            "init",
            "--goal-file",
            goal_file.to_str().unwrap(),
            "--dir",
            &dir_rel,
            "--engine",
            "custom",
            "--exec",
            &exec,
            "--verify",
            "test -f never-there",
            // The recorder writes the prompt it read outside the workspace.
            "--sandbox",
            "none",
        ]);
        assert_ok(&out, &format!("orbit init ({name})"));
        let dir = repo.join(&dir_rel);
        check_fresh_loop(&dir);
        let goal_md = fs::read_to_string(dir.join("goal.md")).unwrap();
        assert!(
            goal_md.contains(&goal),
            "{name}: goal.md holds the goal verbatim"
        );
        for script in ["verify.sh", "run-loop.sh", "recover.sh", "notify.sh"] {
            let body = fs::read_to_string(dir.join(script)).unwrap();
            let probe: String = goal.chars().take(40).collect();
            assert!(
                !body.contains(probe.trim()) || probe.trim().len() < 4,
                "{name}: goal text leaked into {script}"
            );
        }
        let _ = fs::remove_file(&record);
        let out = repo.run_loop(&dir, &["--once"], &[("AUTOCOMMIT", "0")]);
        assert_code(&out, 10, &format!("one tick ({name})"));
        let got = fs::read(&record)
            .unwrap_or_else(|_| panic!("{name}: the agent never ran:\n{}", text(&out)));
        let got = String::from_utf8(got).unwrap();
        assert!(
            got.contains(&goal),
            "{name}: the agent's prompt holds the goal byte for byte"
        );
        assert_no_canary(&repo, name);
    }
}

/// The shellcheck of the tests checks a library once per `library_key`: two loops that differ
/// only in their names and their agents' paths are one check, and a loop whose parts differ
/// (another engine) or whose settings hold a quoted `$` is a check of its own.
#[test]
fn libraries_differing_only_in_plain_settings_share_one_shellcheck() {
    let repo = Repo::new();
    let key = |name: &str, extra: &[&str]| {
        let dir_rel = format!(".orbit/{name}");
        let mut args = vec!["init", "a goal", "--dir", &dir_rel, "--verify", "true"];
        args.extend_from_slice(extra);
        assert_ok(&repo.orbit(&args), "orbit init");
        let lib = fs::read_to_string(repo.join(&dir_rel).join("lib.sh")).unwrap();
        (lib.clone(), crate::support::library_key(&lib))
    };
    let custom = |exec: &'static str| ["--engine", "custom", "--exec", exec];
    let (a, ka) = key("one", &custom("/opt/agents/run-it"));
    let (b, kb) = key("two", &custom("/usr/bin/other-agent"));
    assert_ne!(a, b, "the libraries differ");
    assert_eq!(ka, kb, "in plain settings only");
    let (_, kc) = key("three", &["--engine", "codex"]);
    assert_ne!(ka, kc, "another engine's parts");
    let (d, kd) = key("four", &custom("/usr/bin/agent $HOME"));
    let (_, ke) = key("five", &custom("/usr/bin/agent $PATH"));
    assert!(
        d.contains("'$HOME'"),
        "the agent's argument as lib.sh holds it"
    );
    assert_ne!(kd, ke, "a quoted `$` is looked at");
}

fn assert_no_canary(repo: &Repo, name: &str) {
    let found = walkdir::WalkDir::new(repo.path())
        .into_iter()
        .chain(walkdir::WalkDir::new(repo.bin.path()))
        .filter_map(|e| e.ok())
        .any(|e| e.file_name() == "CANARY");
    assert!(!found, "{name}: a CANARY file appeared");
    assert!(
        !Path::new("CANARY").exists(),
        "{name}: CANARY in the test's cwd"
    );
}

#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let repo = Repo::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.join("linked")).unwrap();
    let nul = repo.bin.path().join("nul.txt");
    fs::write(&nul, b"goal\0with nul").unwrap();
    let bad_utf8 = repo.bin.path().join("bad.txt");
    fs::write(&bad_utf8, b"goal \xff\xfe").unwrap();
    let outside_dir = outside.path().join("loop").display().to_string();
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "unknown engine",
            vec!["init", "g", "--engine", "gpt5", "--verify", "true"],
            "[possible values: claude, codex, gemini, qwen, aider, opencode, copilot, custom]",
        ),
        (
            "empty goal",
            vec!["init", "   ", "--verify", "true"],
            "empty",
        ),
        (
            "nul goal",
            vec![
                "init",
                "--goal-file",
                nul.to_str().unwrap(),
                "--verify",
                "true",
            ],
            "NUL",
        ),
        (
            "invalid utf-8",
            vec![
                "init",
                "--goal-file",
                bad_utf8.to_str().unwrap(),
                "--verify",
                "true",
            ],
            "UTF-8",
        ),
        (
            "bad duration",
            vec!["init", "g", "--verify", "true", "--exec-timeout", "10x"],
            "not a duration",
        ),
        (
            "bad money",
            vec!["init", "g", "--verify", "true", "--usd-cap", "lots"],
            "USD",
        ),
        (
            "symlink dir",
            vec!["init", "g", "--verify", "true", "--dir", "linked"],
            "symlink",
        ),
        (
            "symlink parent",
            vec!["init", "g", "--verify", "true", "--dir", "linked/loop"],
            "symlink",
        ),
        (
            "outside dir",
            vec!["init", "g", "--verify", "true", "--dir", &outside_dir],
            "outside the repository",
        ),
        (
            "custom without exec",
            vec!["init", "g", "--engine", "custom", "--verify", "true"],
            "--exec",
        ),
        ("no check", vec!["init", "g"], "--verify"),
        (
            "zero pass-k",
            vec!["init", "g", "--verify", "true", "--pass-k", "0"],
            "pass-k",
        ),
    ];
    for (what, args, says) in cases {
        let out = repo.orbit(&args);
        assert_code(&out, 2, what);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(says),
            "{what}: the error should mention '{says}':\n{stderr}"
        );
        assert!(
            !repo.join(".orbit").exists(),
            "{what}: something was written"
        );
        assert_eq!(
            fs::read_dir(outside.path()).unwrap().count(),
            0,
            "{what}: wrote outside"
        );
    }
}

#[test]
fn protect_globs_git_cannot_match_or_that_match_nothing_are_refused() {
    let repo = Repo::new();
    repo.write("tests/parser.rs", "#[test] fn t() {}\n");
    repo.write(".gitignore", "target/\n");
    repo.write("target/out.bin", "built\n");
    let cases: [(&str, &str, &str); 5] = [
        (
            "braces",
            "tests/{unit,int}/**",
            "instead of braces: --protect 'tests/unit/**' --protect 'tests/int/**'",
        ),
        ("an unclosed class", "tests/[ab.rs", "an unclosed '['"),
        ("empty", "", "an empty glob protects nothing"),
        (
            "a near miss",
            "test/**",
            "matches no file in the repository (tracked, or untracked and not ignored), so it would protect nothing; did you mean 'tests/**'?",
        ),
        ("ignored files only", "target/**", "matches no file"),
    ];
    for (what, glob, says) in cases {
        let out = repo.orbit(&["init", "g", "--verify", "true", "--protect", glob]);
        assert_code(&out, 2, what);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{what}: {stderr}");
        assert!(
            stderr.contains(&format!("--protect '{glob}'")),
            "{what}: {stderr}"
        );
        assert!(
            !repo.join(".orbit").exists(),
            "{what}: something was written"
        );
    }
    // An untracked file that git does not ignore counts: the loop's workspace will have it
    // once it is committed, and the runner lists untracked files too.
    repo.write("fixtures/data.json", "{}\n");
    let out = repo.orbit(&[
        "init",
        "g",
        "--verify",
        "true",
        "--protect",
        "tests/**",
        "--protect",
        "fixtures/*.json",
    ]);
    assert_ok(&out, "globs that match");
    // A loop whose glob stopped matching still re-renders, with a warning.
    fs::remove_dir_all(repo.join("fixtures")).unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", ".orbit/g"]);
    assert_ok(&out, "--force keeps the loop working");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: protect glob 'fixtures/*.json'")
            && stderr.contains("matches no file"),
        "{stderr}"
    );
}

#[test]
fn init_outside_a_git_repository_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["init", "g", "--verify", "true"])
        .current_dir(dir.path())
        .env("GIT_CEILING_DIRECTORIES", dir.path().parent().unwrap());
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(30));
    assert_code(&out, 2, "init outside a repository");
    assert!(String::from_utf8_lossy(&out.stderr).contains("git init"));
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn rerunning_init_refuses_and_force_rerenders_keeping_state() {
    let repo = Repo::new();
    let agent = repo.agent("noop", "cat >/dev/null; echo step >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let exec = agent.display().to_string();
    let again = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "true",
    ]);
    assert_code(&again, 2, "second init");
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));

    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick");
    let keep = [
        "state.env",
        "state.env.sha256",
        "progress.md",
        "events.jsonl",
        "goal.md",
        "iterations/000001/result.env",
    ];
    let before: Vec<Vec<u8>> = keep
        .iter()
        .map(|f| fs::read(dir.join(f)).unwrap())
        .collect();
    // A setting changed by hand in loop.toml reaches the scripts through --force.
    let toml = fs::read_to_string(dir.join("loop.toml"))
        .unwrap()
        .replace("max-iterations = 20", "max-iterations = 7");
    fs::write(dir.join("loop.toml"), toml).unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", ".orbit/test-goal"]);
    assert_ok(&out, "init --force");
    for (f, b) in keep.iter().zip(&before) {
        assert_eq!(
            &fs::read(dir.join(f)).unwrap(),
            b,
            "{f} changed under --force"
        );
    }
    assert!(
        fs::read_to_string(dir.join("lib.sh"))
            .unwrap()
            .contains("MAX_ITERATIONS=${MAX_ITERATIONS-'7'}")
    );
    let pins = fs::read_to_string(dir.join("pins.sha256")).unwrap();
    assert!(
        pins.contains("  goal.md\n"),
        "the first run's goal pin is kept:\n{pins}"
    );
    check_pins(&dir);
    // The loop runs on with the re-rendered scripts.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "tick after --force");
    assert_eq!(crate::support::state_value(&dir, "NEXT_ITERATION"), "3");
    // Settings flags with --force are refused: loop.toml is the source.
    let out = repo.orbit(&[
        "init",
        "--force",
        "--dir",
        ".orbit/test-goal",
        "--max-iterations",
        "3",
    ]);
    assert_code(&out, 2, "--force with a setting");
}

fn check_pins(dir: &Path) {
    let out = command("sha256sum")
        .args(["-c", "--strict", "pins.sha256"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "sha256sum -c:\n{}", text(&out));
}

#[test]
fn default_check_is_detected_from_the_repository() {
    let repo = Repo::new();
    repo.write("Cargo.toml", "[package]\nname = \"x\"\n");
    let out = repo.orbit(&["init", "Add a feature"]);
    assert_ok(&out, "init");
    assert!(String::from_utf8_lossy(&out.stderr).contains("using `cargo test`"));
    let verify = repo.read(".orbit/add-a-feature/verify.sh");
    assert!(
        verify.contains("run_check 'cargo-test' 'cargo test'"),
        "{verify}"
    );
}

#[test]
fn several_loops_live_side_by_side() {
    let repo = Repo::new();
    assert_ok(
        &repo.orbit(&["init", "First goal", "--verify", "true"]),
        "first",
    );
    assert_ok(
        &repo.orbit(&["init", "Second goal", "--verify", "true"]),
        "second",
    );
    assert!(repo.join(".orbit/first-goal/run-loop.sh").is_file());
    assert!(repo.join(".orbit/second-goal/run-loop.sh").is_file());
    let out = repo.orbit(&["run"]);
    assert_code(&out, 2, "orbit run with two loops and no DIR");
    assert!(String::from_utf8_lossy(&out.stderr).contains("several loops"));
}

/// The files of a directory tree (relative paths), for "nothing was written".
fn tree(dir: &Path) -> Vec<String> {
    let out = command("find")
        .arg(".")
        .arg("-path")
        .arg("./.git")
        .arg("-prune")
        .arg("-o")
        .arg("-print")
        .current_dir(dir)
        .output()
        .unwrap();
    let mut files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    files.sort();
    files
}

#[test]
fn init_protects_what_changes_how_the_checks_run_even_files_that_do_not_exist_yet() {
    let repo = Repo::new();
    repo.write("tests/test_calc.py", "def test_x():\n    assert True\n");
    repo.write("scripts/judge.sh", "#!/bin/sh\nexit 0\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "tests"]);
    let args = [
        "init",
        "Fix the calculator",
        "--verify",
        "python3 -m pytest -q tests",
        "--regression",
        "cargo test",
        "--judge-cmd",
        "./scripts/judge.sh",
        "--protect",
        "tests/**",
    ];
    // --dry-run: what would be rendered, and nothing written.
    let before = tree(repo.path());
    let out = repo.orbit(&[&args[..], &["--dry-run"]].concat());
    assert_ok(&out, "orbit init --dry-run");
    assert_eq!(tree(repo.path()), before, "--dry-run wrote something");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    for want in [
        "dry run, nothing written",
        "check: `python3 -m pytest -q tests`",
        "regression: `cargo test`",
        "judge-cmd: `./scripts/judge.sh`",
        "protect: tests/**",
        "protected by default",
        "pytest for check `python3 -m pytest -q tests`: **/conftest.py, **/pytest.ini",
        "pytest.py",
        "cargo for regression `cargo test`: **/Cargo.toml, **/build.rs",
        "the script scripts/judge.sh for the judge (judge-cmd): scripts/judge.sh",
        "auto-protect = [",
    ] {
        assert!(said.contains(want), "--dry-run says {want}:\n{said}");
    }
    assert!(!said.contains("next:"), "{said}");
    // The same loop for real: the globs that match nothing (no pytest.ini, no Cargo.toml
    // here) are taken, kept apart from --protect in loop.toml, and named to the agent.
    let out = repo.orbit(&args);
    assert_ok(&out, "orbit init");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "{}",
        text(&out)
    );
    let dir = repo.join(".orbit/fix-the-calculator");
    let cfg = orbit::config::LoopConfig::load(&dir.join("loop.toml")).unwrap();
    assert_eq!(cfg.protect, vec!["tests/**"]);
    for want in [
        "**/conftest.py",
        "pytest.ini",
        "**/Cargo.toml",
        "scripts/judge.sh",
    ] {
        assert!(
            cfg.auto_protect
                .iter()
                .any(|g| g == want || g.ends_with(want)),
            "{want} in {:?}",
            cfg.auto_protect
        );
    }
    let runner = fs::read_to_string(dir.join("lib.sh")).unwrap();
    assert!(
        runner.contains("PROTECT_GLOBS=('tests/**' '**/conftest.py'"),
        "the runner pins every glob as a set"
    );
    let prompt = fs::read_to_string(dir.join("prompt.md")).unwrap();
    assert!(prompt.contains("`**/conftest.py`"), "{prompt}");
    assert!(
        fs::read_to_string(dir.join("goal.md"))
            .unwrap()
            .contains("protected by default")
    );
    // The user's own --protect still refuses a glob that matches nothing.
    let out = repo.orbit(&["init", "g", "--verify", "pytest", "--protect", "pytest.ini"]);
    assert_code(&out, 2, "--protect of a file that is not there");
    assert!(String::from_utf8_lossy(&out.stderr).contains("matches no file"));
}

#[test]
fn no_auto_protect_and_orbit_toml_opt_out_and_older_loops_re_render_unchanged() {
    let repo = Repo::new();
    let out = repo.orbit(&["init", "a", "--verify", "cargo test", "--no-auto-protect"]);
    assert_ok(&out, "--no-auto-protect");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("protected by default"));
    let toml = repo.read(".orbit/a/loop.toml");
    assert!(!toml.contains("auto-protect"), "{toml}");
    repo.write("orbit.toml", "no-auto-protect = true\n");
    let out = repo.orbit(&["init", "b", "--verify", "cargo test"]);
    assert_ok(&out, "orbit.toml no-auto-protect");
    assert!(!repo.read(".orbit/b/loop.toml").contains("auto-protect"));
    fs::remove_file(repo.join("orbit.toml")).unwrap();
    // A loop rendered before auto-protect (its loop.toml has no such key) re-renders the
    // scripts it had: --force adds nothing to what it protects.
    let out = repo.orbit(&["init", "c", "--verify", "cargo test"]);
    assert_ok(&out, "init");
    let dir = repo.join(".orbit/c");
    let toml = repo.read(".orbit/c/loop.toml");
    let old: String = toml
        .lines()
        .filter(|l| !l.starts_with("auto-protect"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(old, toml);
    fs::write(dir.join("loop.toml"), &old).unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", ".orbit/c"]);
    assert_ok(&out, "--force of an older loop");
    assert_eq!(repo.read(".orbit/c/loop.toml"), old, "loop.toml untouched");
    assert!(
        repo.read(".orbit/c/lib.sh")
            .contains("\nPROTECT_GLOBS=()\n"),
        "the runner of a loop without auto-protect protects nothing more"
    );
    assert_eq!(
        repo.read(".orbit/c/prompt.md"),
        repo.read(".orbit/a/prompt.md")
            .replace("`a`", "`c`")
            .replace("orbit/a", "orbit/c"),
        "the prompt of a loop without auto-protect"
    );
    check_pins(&dir);
}

#[test]
fn force_warns_of_a_judge_script_in_loop_toml_that_nothing_protects() {
    let repo = Repo::new();
    repo.write("scripts/judge.sh", "#!/bin/sh\nexit 0\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "judge"]);
    let out = repo.orbit(&["init", "g", "--verify", "true"]);
    assert_ok(&out, "init");
    let path = repo.join(".orbit/g/loop.toml");
    let toml = fs::read_to_string(&path)
        .unwrap()
        .replace("judge-cmd = \"\"", "judge-cmd = \"bash scripts/judge.sh\"");
    fs::write(&path, toml).unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", ".orbit/g"]);
    assert_ok(&out, "--force");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: judge-cmd")
            && err.contains("scripts/judge.sh")
            && err.contains("before the loop's first run"),
        "{err}"
    );
    let toml = fs::read_to_string(&path)
        .unwrap()
        .replace("protect = []", "protect = [\"scripts/judge.sh\"]");
    fs::write(&path, toml).unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", ".orbit/g"]);
    assert_ok(&out, "--force");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("judge"),
        "{}",
        text(&out)
    );
}

/// The loop directory's scripts are short and share one library: a plain claude loop (the
/// default sandbox) holds at most 365 KB of bash in all (732 KB when each script carried its
/// own copy of the shared code; see the figure in docs/guide.md), verify.sh and holdout.sh
/// show their checks on their first screen and are at most 150 lines, and lib.sh holds
/// each part once.
#[test]
fn a_plain_loops_scripts_are_short_and_share_one_library() {
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init",
        "make it work",
        "--engine",
        "claude",
        "--verify",
        "true",
    ]);
    assert_ok(&out, "orbit init");
    let dir = repo.join(".orbit/make-it-work");
    // Every file orbit init leaves in the loop directory: the scripts, lib.sh, and the
    // rendered goal.md, prompt.md, notes.md, loop.toml and the first state (not .pins/, the
    // pinned copies of some of them).
    let mut total = 0;
    for entry in walkdir::WalkDir::new(&dir).max_depth(1) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            total += entry.metadata().unwrap().len();
        }
    }
    // orbit.sha256 names the orbit binary by its absolute path, whose length is where the
    // checkout that built it lives, not what orbit renders: counted without it, so the figure
    // is the same on every machine.
    let pin = fs::read_to_string(dir.join("orbit.sha256")).unwrap();
    let (_, binary) = pin
        .trim_end()
        .split_once("  ")
        .expect("orbit.sha256: `SHA  PATH`");
    assert!(
        binary.starts_with('/'),
        "orbit.sha256 names no path: {pin:?}"
    );
    total -= binary.len() as u64;
    // A budget the loop may not outgrow unnoticed (732 KB of scripts before the library;
    // 376 KB with the envelope's signing, 366 KB since lib.sh holds only the parts the
    // loop's settings can use; 376,083 bytes for the whole directory before lib.sh held the
    // perl programs stripped and the settings once, 362,051 after; then the commit hooks run
    // as checks, the dependencies' offline switches and the adequacy measure of a DONE
    // through the pinned orbit; 375,977 with the clean checkout's pass and the setup's cache
    // watched and ruled; 380,054 once every function is named for its part; 380,988 with a
    // crash's subshells quiet and a flaky last pass told from a file the tree lacks; 379,949
    // after 381,580 once a shellcheck directive's reason and a comment after code are
    // stripped, a dead function and two repeated messages gone; 385,178 with the clean
    // checkout kept, moved and proven clean and a sandboxed run's writable Go build cache;
    // 387,045 without the pinned binary's path, once a DONE with nothing to commit is bound
    // to the head that holds its tree; 390,341 with the trust looks, their comparison, the
    // state's writes and the sweeps answered by the resident perl, 73 of a small loop's 229
    // processes a tick fewer; 391,826 once the runner's git looks at a work tree through
    // its proven git directory, never a `.git` a check put there): the aim is 300,000.
    assert!(total <= 383 * 1024, "the loop directory: {total} bytes");
    for name in ["verify.sh", "holdout.sh"] {
        let script = fs::read_to_string(dir.join(name)).unwrap();
        assert!(
            script.lines().count() <= 150,
            "{name}: {} lines",
            script.lines().count()
        );
        let checks = script.lines().position(|l| l == "checks() {").unwrap();
        assert!(
            checks < 40,
            "{name}: its checks start at line {}",
            checks + 1
        );
    }
    // 253: the adequacy settings' prelude lines (adequacy, its budget, its survivors).
    for name in ["run-loop.sh", "recover.sh", "notify.sh"] {
        let script = fs::read_to_string(dir.join(name)).unwrap();
        assert!(
            script.lines().count() <= 250,
            "{name}: {} lines",
            script.lines().count()
        );
    }
    let lib = fs::read_to_string(dir.join("lib.sh")).unwrap();
    for (name, part) in orbit::render::STATIC_PARTS {
        let text = orbit::render::library_part(part);
        assert!(lib.matches(&text).count() <= 1, "{name} is twice in lib.sh");
    }
    assert_eq!(
        lib.matches(&orbit::bashstrip::strip(orbit::contract::bash::prelude()))
            .count(),
        1
    );
}

#[test]
fn the_adequacy_mode_is_chosen_at_init_or_by_orbit_toml_and_written_to_loop_toml() {
    for mode in ["off", "report", "gate"] {
        let repo = Repo::new();
        let out = repo.orbit(&[
            "init",
            "goal",
            "--verify",
            "true",
            "--sandbox",
            "none",
            "--adequacy",
            mode,
        ]);
        assert_ok(&out, "orbit init --adequacy");
        let toml = fs::read_to_string(repo.join(".orbit/goal/loop.toml")).unwrap();
        assert!(toml.contains(&format!("adequacy = \"{mode}\"")), "{toml}");
    }
    // orbit.toml's default, said at init; a flag wins over it.
    let repo = Repo::new();
    repo.write("orbit.toml", "adequacy = \"off\"\n");
    let out = repo.orbit(&["init", "goal", "--verify", "true", "--sandbox", "none"]);
    assert_ok(&out, "orbit init with orbit.toml");
    assert!(text(&out).contains("adequacy"), "{}", text(&out));
    let toml = fs::read_to_string(repo.join(".orbit/goal/loop.toml")).unwrap();
    assert!(toml.contains("adequacy = \"off\""), "{toml}");
    let out = repo.orbit(&[
        "init",
        "other",
        "--verify",
        "true",
        "--sandbox",
        "none",
        "--adequacy",
        "gate",
    ]);
    assert_ok(&out, "orbit init --adequacy over orbit.toml");
    let toml = fs::read_to_string(repo.join(".orbit/other/loop.toml")).unwrap();
    assert!(toml.contains("adequacy = \"gate\""), "{toml}");
    // A word that is no mode is refused.
    assert_code(
        &repo.orbit(&["init", "third", "--verify", "true", "--adequacy", "always"]),
        2,
        "an unknown mode",
    );
}
