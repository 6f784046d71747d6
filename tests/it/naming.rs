//! Naming a check: `orbit init --name NAME` before a check flag gives that check its name in
//! verify.sh, the runner's tally, the records and the reports; a check without one is named
//! from its command's words (a command through an absolute path made a name no one reads).

use crate::support::*;
use std::fs;

#[test]
fn a_named_check_carries_its_name_through_the_loop() {
    let repo = Repo::new();
    let bin = repo.bin.path().display().to_string();
    let tool = repo.bin.path().join("semver-check");
    fs::write(&tool, "#!/usr/bin/env bash\ntest -f fixed.txt\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)).unwrap();
    let agent = repo.agent(
        "fixer",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
touch fixed.txt
echo done > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let abs = format!("{bin}/semver-check");
    let exec = agent.display().to_string();
    let out = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--name",
        "semver",
        "--verify",
        &abs,
        "--verify",
        "true",
        "--name",
        "smoke",
        "--regression",
        "test -d .git || test -f .git",
        // The check is a program under this test's /tmp, which the sandbox's private /tmp
        // hides: this test is about names.
        "--sandbox",
        "none",
    ]);
    assert_ok(&out, "orbit init --name");
    let dir = repo.join(".orbit/test-goal");
    let verify = fs::read_to_string(dir.join("verify.sh")).unwrap();
    assert!(verify.contains("run_check 'semver' "), "{verify}");
    assert!(verify.contains("run_check 'smoke' "), "{verify}");
    assert!(
        verify.contains("run_check 'true' 'true'"),
        "the unnamed one keeps its words: {verify}"
    );
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains("[check-name]"), "{toml}");
    let run = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "2")]);
    assert_code(&run, 0, "DONE");
    let base = fs::read_to_string(dir.join("iterations/baseline/verify.log")).unwrap();
    assert!(base.contains("[FAIL] semver (exit 1)"), "{base}");
    assert!(base.contains("[PASS] smoke"), "{base}");
    let last = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(last.contains("[PASS] semver"), "{last}");
    // A name is the loop's identity: --force renders from loop.toml and refuses the flag.
    let force = repo.orbit(&[
        "init",
        "--force",
        "--dir",
        ".orbit/test-goal",
        "--name",
        "x",
    ]);
    assert_code(&force, 2, "--force refuses --name");
}

#[test]
fn a_name_that_names_no_check_or_cannot_be_one_is_refused() {
    let repo = Repo::new();
    let agent = repo.agent("a", "cat >/dev/null");
    let exec = agent.display().to_string();
    let base = [
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        exec.as_str(),
    ];
    let refused = |extra: &[&str], says: &str| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = repo.orbit(&args);
        assert_code(&out, 2, &format!("refused: {extra:?}"));
        assert!(text(&out).contains(says), "{extra:?}: {}", text(&out));
        assert!(!repo.join(".orbit/test-goal").exists(), "nothing rendered");
    };
    refused(
        &["--verify", "true", "--name", "late"],
        "--name late names the check given right after it",
    );
    refused(
        &["--name", "a", "--name", "b", "--verify", "true"],
        "--name a names the check given right after it",
    );
    refused(
        &["--name", "has space", "--verify", "true"],
        "cannot name a check",
    );
    refused(
        &["--name", "holdout-1", "--verify", "true"],
        "cannot name a check",
    );
    refused(
        &[
            "--name", "same", "--verify", "true", "--name", "same", "--verify", "false",
        ],
        "two checks are named 'same'",
    );
    // A hand-edited loop.toml is checked the same way.
    let ok = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--name",
        "unit",
        "--verify",
        "true",
    ]);
    assert_ok(&ok, "orbit init");
    let path = repo.join(".orbit/test-goal/loop.toml");
    let toml = fs::read_to_string(&path).unwrap();
    fs::write(
        &path,
        toml.replace("true = \"unit\"", "\"not a check\" = \"unit\""),
    )
    .unwrap();
    let force = repo.orbit(&["init", "--force", "--dir", ".orbit/test-goal"]);
    assert_code(&force, 2, "a check-name for no check");
    assert!(
        text(&force).contains("'not a check' is not a check of this loop"),
        "{}",
        text(&force)
    );
}
