//! The repository's commit hooks as checks the agent hears: they run in the sandbox, on the
//! tree about to be committed, before the checks; a refusal is feedback, a fixer's edits are
//! the tree checked and committed, and the runner's own commit runs none of them.

use crate::support::{
    Repo, assert_code, bwrap_available, command, present_or_skipped, state_value, text,
};
use std::fs;
use std::path::{Path, PathBuf};

/// An executable hook `name` in the repository's `.git/hooks`, running `body` (sh).
fn hook(repo: &Repo, name: &str, body: &str) {
    let rel = format!(".git/hooks/{name}");
    repo.write(&rel, &format!("#!/bin/sh\n{body}\n"));
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(repo.join(&rel), fs::Permissions::from_mode(0o755)).unwrap();
}

/// A pre-commit hook that refuses a staged `.txt` file with a line longer than 20
/// characters, naming the file and the line, as a linter does.
const LONG_LINES: &str = r#"fail=0
for f in $(git diff --cached --name-only --diff-filter=AM -- '*.txt'); do
  git show ":$f" | awk -v f="$f" 'length > 20 { print f ":" NR ": line longer than 20 characters"; bad = 1 } END { exit bad }' || fail=1
done
exit $fail"#;

/// An agent that writes a line too long for the hook until the feedback it is given names
/// the hook's refusal, then a short one; it claims DONE each time.
fn long_then_short(repo: &Repo) -> PathBuf {
    repo.agent(
        "liner",
        r#"prompt=$(cat)
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
if printf '%s' "$prompt" | grep -q 'line longer than 20'; then
  echo short > work.txt
else
  echo 'a line far longer than twenty characters' > work.txt
fi
echo ok > "$ORBIT_AGENT_DIR/done.md""#,
    )
}

/// The last commit of the loop branch: its tree's `work.txt`, and the tree.
fn committed(repo: &Repo, rel: &str) -> String {
    repo.git(&["show", &format!("orbit/test-goal:{rel}")])
}

#[test]
fn a_pre_commit_hook_that_refuses_a_long_line_is_feedback_and_the_next_iteration_reaches_done() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    hook(&repo, "pre-commit", LONG_LINES);
    let agent = long_then_short(&repo);
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--sandbox", "bwrap"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE once the agent heard the hook");
    // Iteration 1: the hook refused, as a failing check the agent is told of.
    let fb = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(fb.contains("commit-hooks"), "{fb}");
    assert!(
        fb.contains("work.txt:1: line longer than 20 characters"),
        "the hook's words reach the agent: {fb}"
    );
    assert!(
        fs::read_to_string(dir.join("iterations/000002/input-feedback.txt"))
            .unwrap()
            .contains("line longer than 20"),
        "given to iteration 2"
    );
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    assert_eq!(committed(&repo, "work.txt"), "short\n");
}

/// A hook that, run as the runner outside any sandbox, writes into HOME and into the user's
/// checkout; it says that it ran either way.
fn escaping_hook(repo: &Repo) -> (PathBuf, PathBuf) {
    let home = crate::support::sealed_home().join(format!(
        "hook-canary-{}",
        repo.path().file_name().unwrap().to_string_lossy()
    ));
    let user = repo.join("hook-canary");
    hook(
        repo,
        "pre-commit",
        &format!(
            "echo 'HOOK RAN in' \"$PWD\"\necho escaped > '{}' 2>/dev/null\necho escaped > '{}' 2>/dev/null\nexit 0",
            home.display(),
            user.display()
        ),
    );
    (home, user)
}

#[test]
fn a_commit_hook_never_runs_outside_the_sandbox_where_it_could_write_home_or_the_users_checkout() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let (home, user) = escaping_hook(&repo);
    let agent = repo.agent(
        "worker",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho done > work.txt\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--sandbox", "bwrap"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    assert!(
        !home.exists(),
        "the hook wrote into HOME: it ran outside the sandbox"
    );
    assert!(
        !user.exists(),
        "the hook wrote into the user's checkout: it ran outside the sandbox"
    );
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(
        log.contains("HOOK RAN in"),
        "the hook ran (the attack was made), as a check: {log}\n{}",
        text(&out)
    );
    assert_eq!(committed(&repo, "work.txt"), "done\n");
}

#[test]
fn a_fixers_edit_is_the_tree_checked_and_committed() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    // As end-of-file-fixer: adds the missing final newline and fails, naming the file.
    hook(
        &repo,
        "pre-commit",
        r#"fail=0
for f in $(git diff --cached --name-only --diff-filter=AM); do
  if [ -s "$f" ] && [ -n "$(tail -c 1 "$f")" ]; then echo >> "$f"; echo "Fixing $f"; fail=1; fi
done
exit $fail"#,
    );
    let agent = repo.agent(
        "nonl",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\nprintf done > work.txt\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
    );
    // The check passes only on the fixed file: it ran on the fixer's tree.
    let dir = repo.init_loop(
        &agent,
        &["test \"$(od -An -c work.txt | tr -d ' ')\" = 'done\\n'"],
        &["--sandbox", "bwrap"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE in one iteration, the fix taken");
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(
        log.contains("Fixing work.txt")
            || fs::read_to_string(dir.join("runner.log"))
                .unwrap()
                .contains("the pre-commit hook changed the tree to commit"),
        "the fixer ran: {log}"
    );
    assert_eq!(committed(&repo, "work.txt"), "done\n");
    let result = fs::read_to_string(dir.join("iterations/000001/result.env")).unwrap();
    let after = result
        .lines()
        .find_map(|l| l.strip_prefix("TREE_AFTER="))
        .expect("TREE_AFTER")
        .trim_matches('\'')
        .to_string();
    let tree = repo.git(&["rev-parse", "orbit/test-goal^{tree}"]);
    assert_eq!(
        tree.trim(),
        after,
        "the committed tree is the verified tree"
    );
    assert!(!repo.ws_git(&["status", "--porcelain"]).contains("work.txt"));
}

#[test]
fn a_commit_msg_hook_that_refuses_the_runners_message_stops_blocked_until_the_prefix_pleases_it() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    hook(
        &repo,
        "commit-msg",
        "head -n 1 \"$1\" | grep -q '^PROJ-[0-9]' && exit 0\necho 'commit-msg: the subject names no ticket (PROJ-123)' >&2\nexit 1",
    );
    let agent = repo.agent(
        "worker",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho done > work.txt\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--sandbox", "bwrap"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 14, "BLOCKED: the message is the user's to settle");
    assert_eq!(state_value(&dir, "STOP_REASON"), "tool_failure");
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("commit-msg: the subject names no ticket (PROJ-123)"),
        "the hook's words: {log}"
    );
    assert!(log.contains("commit-message-prefix"), "the setting: {log}");
    // The user gives the message its ticket: the next run commits the change and is DONE.
    let toml_path = dir.join("loop.toml");
    let toml = fs::read_to_string(&toml_path).unwrap();
    assert!(toml.contains("commit-message-prefix = \"\""), "{toml}");
    fs::write(
        &toml_path,
        toml.replace(
            "commit-message-prefix = \"\"",
            "commit-message-prefix = \"PROJ-123 \"",
        ),
    )
    .unwrap();
    let rendered = repo.orbit(&["init", "--force", "--dir", &dir.display().to_string()]);
    crate::support::assert_ok(&rendered, "orbit init --force");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE with the prefix");
    let subject = repo.git(&["log", "-1", "--format=%s", "orbit/test-goal"]);
    assert!(
        subject.starts_with("PROJ-123 orbit(test-goal)"),
        "{subject}"
    );
}

/// The pre-commit framework, from PyPI (`.ci/run` installs it into /opt/orbit-pre-commit):
/// `ORBIT_PRE_COMMIT` names another; ORBIT_REQUIRE_PRE_COMMIT=1 makes it required.
fn pre_commit() -> Option<PathBuf> {
    let p = std::env::var_os("ORBIT_PRE_COMMIT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/orbit-pre-commit/bin/pre-commit"));
    let ok = command(&p)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    present_or_skipped(
        ok,
        "ORBIT_REQUIRE_PRE_COMMIT",
        "pre-commit (in /opt/orbit-pre-commit)",
    )
    .then_some(p)
}

/// A repository with the pre-commit framework installed, its configuration one local hook
/// (no network) that refuses long lines in `.txt` files.
fn framework_repo(pc: &Path) -> Repo {
    let repo = Repo::new();
    repo.write(
        ".pre-commit-config.yaml",
        r#"repos:
- repo: local
  hooks:
  - id: no-long-lines
    name: no long lines
    language: system
    files: '\.txt$'
    entry: >-
      awk 'length > 20 { print FILENAME ":" FNR ": line longer than 20 characters"; bad = 1 } END { exit bad }'
"#,
    );
    repo.git(&["add", ".pre-commit-config.yaml"]);
    repo.git(&["commit", "-q", "-m", "the project's hooks"]);
    let out = command(pc)
        .arg("install")
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "pre-commit install: {out:?}");
    repo
}

/// The setup `orbit init` suggests for the pre-commit framework's installed hook (asked on
/// a loop of its own, which is then removed; with --no-setup, as init applies it otherwise).
fn suggested_setup(repo: &Repo, agent: &Path) -> String {
    let exec = agent.display().to_string();
    let out = repo.orbit(&[
        "init",
        "probe goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "true",
        "--dir",
        ".orbit/probe",
        "--no-setup",
    ]);
    crate::support::assert_ok(&out, "orbit init");
    fs::remove_dir_all(repo.join(".orbit/probe")).unwrap();
    let said = text(&out);
    let cmd = said
        .split("--setup '")
        .skip(1)
        .filter_map(|rest| rest.split('\'').next())
        .find(|c| c.ends_with(" -m pre_commit install-hooks"))
        .unwrap_or_else(|| panic!("no pre-commit setup suggested: {said}"));
    assert!(said.contains("the pre-commit framework's hook"), "{said}");
    cmd.to_string()
}

#[test]
fn under_the_sandbox_init_with_no_setup_applies_the_frameworks_hook_install_and_the_loop_reaches_done()
 {
    // A newcomer gives no --setup: init applies the hook environments' install itself (as
    // it applies a lockfile's), said in one line, so the hooks run offline in the sandbox.
    if !bwrap_available() {
        return;
    }
    let Some(pc) = pre_commit() else { return };
    let repo = framework_repo(&pc);
    let agent = long_then_short(&repo);
    let exec = agent.display().to_string();
    let said = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "test -f work.txt",
        "--sandbox",
        "bwrap",
        "--adequacy",
        "off",
    ]);
    crate::support::assert_ok(&said, "orbit init");
    assert!(
        text(&said).contains("orbit: commit hooks: the setup"),
        "{}",
        text(&said)
    );
    let dir = repo.join(".orbit/test-goal");
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(toml.contains(" -m pre_commit install-hooks\"]"), "{toml}");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE once the agent heard the framework's hook");
    let fb = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        fb.contains("work.txt:1: line longer than 20 characters"),
        "the framework's hook's words reach the agent: {fb}"
    );
    assert_eq!(committed(&repo, "work.txt"), "short\n");
}

#[test]
fn the_pre_commit_frameworks_refusal_is_feedback_under_the_sandbox_and_the_loop_reaches_done() {
    if !bwrap_available() {
        return;
    }
    let Some(pc) = pre_commit() else { return };
    let repo = framework_repo(&pc);
    let agent = long_then_short(&repo);
    // The setup orbit init suggests installs the hook environments with the network.
    let setup = suggested_setup(&repo, &agent);
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt"],
        &["--sandbox", "bwrap", "--setup", &setup],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE once the agent heard the framework's hook");
    let fb = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(fb.contains("commit-hooks"), "{fb}");
    assert!(
        fb.contains("work.txt:1: line longer than 20 characters"),
        "the framework's hook's words reach the agent: {fb}"
    );
    assert_eq!(committed(&repo, "work.txt"), "short\n");
}

#[test]
fn an_agent_that_weakens_the_frameworks_configuration_is_caught_and_the_hook_still_judges() {
    if !bwrap_available() {
        return;
    }
    let Some(pc) = pre_commit() else { return };
    let repo = framework_repo(&pc);
    // The agent writes a long line and empties the hook's configuration.
    let agent = repo.agent(
        "weakener",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho 'a line far longer than twenty characters' > work.txt\nprintf 'repos: []\\n' > .pre-commit-config.yaml\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
    );
    let setup = format!("{} install-hooks", pc.display());
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt"],
        &["--sandbox", "bwrap", "--setup", &setup],
    );
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    assert_ne!(out.status.code(), Some(0), "never DONE: {}", text(&out));
    assert_eq!(state_value(&dir, "STOP_REASON"), "reward_hack");
    let tree = repo.git(&["show", "orbit/test-goal:.pre-commit-config.yaml"]);
    assert!(
        tree.contains("no-long-lines"),
        "the weakened configuration is not committed: {tree}"
    );
}

#[test]
fn an_agent_that_rewrites_the_workspaces_copy_of_a_tracked_hooks_directory_is_still_judged_by_the_users()
 {
    let repo = Repo::new();
    // A hooks directory the project keeps in its tree, named by a relative core.hooksPath.
    repo.write("githooks/pre-commit", &format!("#!/bin/sh\n{LONG_LINES}\n"));
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        repo.join("githooks/pre-commit"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    repo.git(&["add", "githooks"]);
    repo.git(&["commit", "-q", "-m", "the project's hooks"]);
    repo.git(&["config", "core.hooksPath", "githooks"]);
    // The agent writes a long line and makes the workspace's hook pass everything; the
    // default protection is off, so nothing but where the hook is taken from stands.
    let agent = repo.agent(
        "rewriter",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho 'a line far longer than twenty characters' > work.txt\nprintf '#!/bin/sh\\necho AGENTS HOOK\\nexit 0\\n' > githooks/pre-commit\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--no-auto-protect"]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    assert!(
        repo.ws_read("githooks/pre-commit").contains("AGENTS HOOK"),
        "the agent rewrote the workspace's hook: the attack was made"
    );
    assert_ne!(out.status.code(), Some(0), "never DONE: {}", text(&out));
    let fb = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        fb.contains("work.txt:1: line longer than 20 characters"),
        "the user's hook judged: {fb}"
    );
    assert!(!fb.contains("AGENTS HOOK"), "{fb}");
}

#[test]
fn an_agent_that_commits_its_change_itself_is_still_judged_by_the_pre_commit_hook() {
    let repo = Repo::new();
    hook(&repo, "pre-commit", LONG_LINES);
    // Without the sandbox the agent can commit (with --no-verify): HEAD then holds its
    // change, and a hook that judges what is staged against HEAD would see nothing.
    let agent = repo.agent(
        "committer",
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\necho 'a line far longer than twenty characters' > work.txt\ngit add work.txt && git commit -q --no-verify -m mine\necho ok > \"$ORBIT_AGENT_DIR/done.md\"",
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "1")]);
    let log = repo.git(&["log", "--format=%s", "orbit/test-goal"]);
    assert!(
        log.lines().any(|l| l == "mine"),
        "the agent committed: the attack was made: {log}"
    );
    assert_ne!(out.status.code(), Some(0), "never DONE: {}", text(&out));
    let fb = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        fb.contains("work.txt:1: line longer than 20 characters"),
        "the hook judged the iteration's change: {fb}"
    );
}
