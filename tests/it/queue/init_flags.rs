//! A task carries any `orbit init` flag the queue holds no field for, in its `**Init:**`
//! field (shell words): given to `orbit queue add` as init's own flags, or written by hand,
//! each attempt's loop is made with them exactly as `orbit init` would take them. A flag
//! that does not parse, or one that would contradict what the queue decides, is refused
//! with its line and reason and never run.

use std::fs;

use super::{MAKE_OWN_FILE, queue};
use crate::support::*;

/// `queue add` takes init's flags; the attempt's loop.toml holds them, and the setup ran
/// as the command given (quotes, spaces and a redirection kept, no evaluation on the way).
#[test]
fn init_flags_given_to_queue_add_reach_the_attempts_loop() {
    let q = queue(MAKE_OWN_FILE);
    // A check's own script is protected by default; --no-auto-protect leaves it out.
    q.repo.write("check.sh", "true\n");
    q.repo.git(&["add", "check.sh"]);
    q.repo.git(&["commit", "-qm", "a check script"]);
    let log = q.rec().join("setup.log");
    let setup = format!("printf '%s\\n' \"set up\" >> {}", log.display());
    q.add(
        "flags",
        "Make the flags file",
        "test -f flags.txt",
        &[
            "--check-jobs",
            "2",
            "--adequacy",
            "off",
            "--allow-host",
            "example.com",
            "--setup",
            &setup,
            "--regression",
            "bash check.sh",
            "--no-auto-protect",
        ],
    );
    let file = q.task("flags");
    assert!(
        file.contains("\n**Init:** --check-jobs 2 --adequacy off"),
        "{file}"
    );
    let out = q.run(&[]);
    assert_ok(&out, "orbit queue run");
    assert_eq!(q.task_json("flags")["status"], "done");
    let toml: toml::Table = q.repo.read(".orbit/flags-a1/loop.toml").parse().unwrap();
    assert_eq!(toml["check-jobs"].as_integer(), Some(2), "{toml}");
    assert_eq!(toml["adequacy"].as_str(), Some("off"), "{toml}");
    assert_eq!(
        toml["allow-hosts"].as_array().unwrap()[0].as_str(),
        Some("example.com"),
        "{toml}"
    );
    assert_eq!(
        toml["setup"].as_array().unwrap()[0].as_str(),
        Some(setup.as_str()),
        "{toml}"
    );
    assert_eq!(
        toml["regression"].as_array().unwrap()[0].as_str(),
        Some("bash check.sh")
    );
    assert!(!toml.contains_key("auto-protect"), "{toml}");
    assert!(
        fs::read_to_string(&log).unwrap().starts_with("set up\n"),
        "the setup ran as given"
    );
}

/// A task file written by hand with an init flag that does not parse is named with its line
/// and init's reason, and no loop is made for it; one that names a field's flag is named
/// with the field to use.
#[test]
fn a_hand_written_task_with_a_bad_init_flag_is_named_with_its_line_and_not_run() {
    let q = queue(MAKE_OWN_FILE);
    let f = q.fields();
    q.repo.write(
        ".orbit/queue/bad-flag.md",
        &format!("Bad flag.\n\n**Verifier:** true\n{f}**Init:** --check-jobs 2 --no-such-flag\n"),
    );
    q.repo.write(
        ".orbit/queue/bad-value.md",
        &format!("Bad value.\n\n**Verifier:** true\n{f}**Init:** --adequacy sometimes\n"),
    );
    q.repo.write(
        ".orbit/queue/field-flag.md",
        &format!("Field flag.\n\n**Verifier:** true\n{f}**Init:** --engine claude\n"),
    );
    q.repo.write(
        ".orbit/queue/good-init.md",
        &format!(
            "Good init.\n\n**Verifier:** test -f good-init.txt\n{f}**Init:** --memory feedback\n"
        ),
    );
    let out = q.run(&[]);
    assert_code(&out, 24, "orbit queue run with malformed tasks");
    let o = text(&out);
    assert!(
        o.contains("bad-flag.md:8: **Init:** unexpected argument '--no-such-flag'"),
        "{o}"
    );
    assert!(
        o.contains("bad-value.md:8: **Init:** invalid value 'sometimes' for '--adequacy"),
        "{o}"
    );
    assert!(
        o.contains("field-flag.md:8: **Init:** --engine is the task's **Engine:** field"),
        "{o}"
    );
    for t in ["bad-flag", "bad-value", "field-flag"] {
        assert!(!q.repo.join(&format!(".orbit/{t}-a1")).exists(), "{t} ran");
    }
    assert_eq!(q.task_json("good-init")["status"], "done");
    let toml: toml::Table = q
        .repo
        .read(".orbit/good-init-a1/loop.toml")
        .parse()
        .unwrap();
    assert_eq!(toml["memory"].as_str(), Some("feedback"), "{toml}");
}

/// Flags that would contradict what the queue decides are refused, saying what to use: on
/// `queue add` (the loop's directory, --force, --dry-run, a goal file) and in a backlog's
/// `**Init:**` (a second --verify, a field's flag).
#[test]
fn a_flag_that_contradicts_the_queue_is_refused_saying_which_field_to_use() {
    let q = queue(MAKE_OWN_FILE);
    for (flag, value, says) in [
        (
            "--dir",
            Some(".orbit/mine"),
            "--dir: the queue makes each attempt's loop",
        ),
        ("--force", None, "--force: each attempt's loop is new"),
        ("--dry-run", None, "--dry-run: "),
        (
            "--goal-file",
            Some("g.md"),
            "--goal-file: the goal is the task's description",
        ),
    ] {
        let mut args = vec!["queue", "add", "Some goal", "--verify", "true", flag];
        args.extend(value);
        let out = q.repo.orbit(&args);
        assert_code(&out, 2, flag);
        assert!(text(&out).contains(says), "{flag}: {}", text(&out));
    }
    assert!(!q.repo.join(".orbit/queue/some-goal.md").exists());
    let path = q.rec().join("backlog.md");
    fs::write(
        &path,
        "## One\n**Verifier:** true\n**Init:** --verify 'make check'\n\n## Two\n**Verifier:** true\n**Init:** --protect src/**\n",
    )
    .unwrap();
    let out = q.repo.orbit(&["queue", "import", path.to_str().unwrap()]);
    assert_code(&out, 2, "a backlog with a contradicting init flag");
    let o = text(&out);
    assert!(
        o.contains("line 3: **Init:** --verify is the task's **Verifier:** field"),
        "{o}"
    );
    assert!(
        o.contains("line 7: **Init:** --protect is the task's **Protect:** field"),
        "{o}"
    );
}
