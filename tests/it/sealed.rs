//! The suite is sealed from the machine it runs on: every child gets a cleared environment
//! and the suite's own HOME and git configuration.

use std::path::PathBuf;

use crate::support::{assert_ok, command, run_bounded, sealed_home};

#[test]
fn children_see_only_the_sealed_environment() {
    let out = run_bounded(command("env"), std::time::Duration::from_secs(30));
    assert_ok(&out, "env");
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for name in &names {
        assert!(
            [
                "PATH",
                "HOME",
                "XDG_DATA_HOME",
                "LANG",
                "GIT_CONFIG_NOSYSTEM",
                "GIT_CONFIG_GLOBAL",
                "TMPDIR"
            ]
            .contains(name),
            "{name} leaked into a child of the suite:\n{text}"
        );
    }
    let home = sealed_home().display().to_string();
    assert!(text.contains(&format!("HOME={home}\n")), "{text}");
    // The loops' default workspaces go under the suite's data directory, never the user's.
    let data = crate::support::sealed_data().display().to_string();
    assert!(text.contains(&format!("XDG_DATA_HOME={data}\n")), "{text}");
}

#[test]
fn git_reads_only_the_sealed_global_configuration() {
    let mut cmd = command("git");
    cmd.args(["config", "--global", "--list", "--show-origin"]);
    let out = run_bounded(cmd, std::time::Duration::from_secs(30));
    assert_ok(&out, "git config --global --list");
    let text = String::from_utf8_lossy(&out.stdout);
    let sealed: PathBuf = sealed_home().join(".gitconfig");
    for line in text.lines() {
        assert!(
            line.starts_with(&format!("file:{}\t", sealed.display())),
            "a setting from outside the sealed configuration: {line}"
        );
    }
    assert!(text.contains("user.name=Orbit Test"), "{text}");
    // Nothing that changes how the runner commits.
    for key in ["core.hookspath", "commit.gpgsign=true", "core.fsmonitor"] {
        assert!(!text.to_ascii_lowercase().contains(key), "{key}: {text}");
    }
    let mut sys = command("git");
    sys.args(["config", "--system", "--list"]);
    let out = run_bounded(sys, std::time::Duration::from_secs(30));
    assert!(
        out.stdout.is_empty(),
        "the system git configuration is read: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn every_child_of_the_suite_is_made_sealed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut found = Vec::new();
    // Every file of the suite, in its subdirectories too (a module's own helpers).
    for entry in walkdir::WalkDir::new(&dir) {
        let entry = entry.unwrap();
        if !entry.file_type().is_file() {
            continue;
        }
        let path = entry.path();
        let name = path.strip_prefix(&dir).unwrap().display().to_string();
        let text = std::fs::read_to_string(path).unwrap();
        // `command()` itself is the one place a Command is made from nothing.
        let allowed = usize::from(name == "support.rs");
        let uses = text.matches(concat!("Command", "::new(")).count();
        if uses > allowed {
            found.push(format!("{name}: {uses}"));
        }
    }
    assert!(
        found.is_empty(),
        "make children with support::command(), not Command::new: {found:?}"
    );
}

#[test]
fn a_bounded_command_that_overruns_names_what_its_children_in_other_groups_were_doing() {
    // A runner starts its bounded runs in process groups of their own: when the command
    // overruns, the failure lists them too, not only the command's own group.
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let mut cmd = command("bash");
    cmd.args([
        "-c",
        "setsid sleep 127.5 >/dev/null 2>&1 & echo $! > \"$1\"; wait",
        "bash",
        pid_file.to_str().unwrap(),
    ]);
    let err = crate::support::try_bounded(cmd, std::time::Duration::from_secs(2))
        .expect_err("the command waits on its child for two minutes");
    let child = std::fs::read_to_string(&pid_file).unwrap();
    let _ = command("kill").arg(child.trim()).status();
    // Its row of the listing (group, pid, ...), not only the command line the message
    // starts with.
    assert!(
        err.lines().any(|l| {
            l.split_whitespace().nth(1) == Some(child.trim()) && l.ends_with("sleep 127.5")
        }),
        "{err}"
    );
}
