//! `orbit verify --rerun` runs the code it is handed: its checks run in a clean checkout
//! of the commit under the loop's own sandbox (bubblewrap, the policy of lib/sandbox.sh
//! for a check run), so that hostile code cannot write into the user's repository, HOME
//! or the loop directory, nor read the holdout; a loop of `sandbox = "none"` reruns as it
//! ran, said so; a sandboxed loop where bubblewrap cannot run is refused (fail closed).
//! Real git, the real generated scripts, real bubblewrap.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{Repo, assert_code, bwrap_available, command, run_bounded, text};

/// The check the loop runs, committed in the repository. As the loop runs it, it passes
/// once work.txt is there. Under ATTACK=1 (the receiver's rerun) it is hostile: it finds
/// the user's repository through git, and writes into it, into HOME and into the loop
/// directory, and reads the holdout's secret. It passes only when every write was refused
/// by a read-only file system, the holdout was not there to read and, given NET_PORT, the
/// port on the host's loopback could not be reached: a pass proves the
/// attack ran and failed; a failure names what went through. Under ATTACK=prove it fails
/// with exit 9 where it would pass: the answer shows the attack ran.
const HOSTILE_CHECK: &str = r#"test -f work.txt || exit 1
[ -n "${ATTACK:-}" ] || exit 0
common=$(git rev-parse --path-format=absolute --git-common-dir) || exit 7
user=${common%/.git}
loop=$user/.orbit/test-goal
bad=0
for target in "$user/into-repo.txt" "$HOME/into-home.txt" "$loop/into-loop.txt"; do
  if echo pwned 2>/tmp/err >"$target"; then
    echo "WROTE $target"
    bad=1
  elif ! grep -q 'Read-only file system' /tmp/err; then
    echo "REFUSED OTHERWISE $target: $(cat /tmp/err)"
    bad=1
  fi
done
if secret=$(cat "$loop/holdout/secret.txt" 2>/dev/null) && [ -n "$secret" ]; then
  echo "READ THE HOLDOUT: $secret"
  bad=1
fi
if [ -n "${NET_PORT:-}" ] && (echo hi >"/dev/tcp/127.0.0.1/$NET_PORT") 2>/dev/null; then
  echo "REACHED 127.0.0.1:$NET_PORT"
  bad=1
fi
[ "$bad" = 0 ] && [ "$ATTACK" = prove ] && exit 9
exit "$bad"
"#;

/// A repository whose loop (rendered with `sandbox`, a holdout check reading
/// holdout/secret.txt) reached DONE with the hostile check: the repository and the loop
/// directory.
fn hostile_done_loop(sandbox: &str) -> (Repo, PathBuf) {
    hostile_done_loop_with(sandbox, &[])
}

/// The same, with `extra` arguments to orbit init.
fn hostile_done_loop_with(sandbox: &str, extra: &[&str]) -> (Repo, PathBuf) {
    let repo = Repo::new();
    repo.write("check.sh", HOSTILE_CHECK);
    repo.git(&["add", "check.sh"]);
    repo.git(&["commit", "-qm", "the check"]);
    let secret = repo.bin.path().join("secret.txt");
    fs::write(&secret, "s3cret-holdout-case\n").unwrap();
    let agent = repo.agent(
        "worker",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo step >> work.txt
echo "every check holds" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let secret_s = secret.display().to_string();
    let mut args = vec![
        "--sandbox",
        sandbox,
        "--holdout",
        "grep -q s3cret \"$ORBIT_HOLDOUT_DIR/secret.txt\" && run_hidden bash check.sh",
        "--holdout-file",
        &secret_s,
    ];
    args.extend_from_slice(extra);
    let dir = repo.init_loop(&agent, &["bash check.sh"], &args);
    assert!(dir.join("holdout/secret.txt").is_file(), "the holdout file");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "the loop reaches DONE");
    (repo, dir)
}

/// A HOME of the test's own (the user's git configuration in it), for `orbit verify`.
fn own_home(repo: &Repo) -> PathBuf {
    let home = repo.bin.path().join("home");
    fs::create_dir_all(&home).unwrap();
    fs::copy(
        crate::support::sealed_home().join(".gitconfig"),
        home.join(".gitconfig"),
    )
    .unwrap();
    home
}

/// `orbit verify ARGS` under ATTACK=1, with HOME `home` and PATH `path`.
fn attacked_verify(repo: &Repo, home: &Path, path: &str, args: &[&str]) -> std::process::Output {
    attacked_verify_as(repo, home, path, args, "1")
}

/// `orbit verify --rerun --json` under ATTACK=1 with NET_PORT `port`: its answer.
fn net_attacked_verify(repo: &Repo, port: u16) -> serde_json::Value {
    let home = own_home(repo);
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["verify", "--rerun", "--json"])
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("HOME", &home)
        .env("GIT_CONFIG_GLOBAL", home.join(".gitconfig"))
        .env("ATTACK", "1")
        .env("NET_PORT", port.to_string());
    let out = run_bounded(cmd, Duration::from_secs(180));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out)))
}

/// The same under ATTACK=`attack`.
fn attacked_verify_as(
    repo: &Repo,
    home: &Path,
    path: &str,
    args: &[&str],
    attack: &str,
) -> std::process::Output {
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["verify"])
        .args(args)
        .current_dir(repo.path())
        .env("PATH", path)
        .env("HOME", home)
        .env("GIT_CONFIG_GLOBAL", home.join(".gitconfig"))
        .env("ATTACK", attack);
    run_bounded(cmd, Duration::from_secs(180))
}

/// What the hostile check would have written, where it is there.
fn written(repo: &Repo, home: &Path, dir: &Path) -> Vec<PathBuf> {
    [
        repo.join("into-repo.txt"),
        home.join("into-home.txt"),
        dir.join("into-loop.txt"),
    ]
    .into_iter()
    .filter(|p| p.exists())
    .collect()
}

#[test]
fn rerun_runs_hostile_checks_in_the_sandbox_their_writes_refused_and_the_holdout_unseen() {
    if !bwrap_available() {
        return;
    }
    let (repo, dir) = hostile_done_loop("bwrap");
    let home = own_home(&repo);
    // The attack runs: every write refused by a read-only file system, the holdout unseen
    // (exit 9 says so, from the check itself).
    let out = attacked_verify_as(&repo, &home, &repo.path_env(), &["--rerun"], "prove");
    assert!(
        text(&out).contains("[FAIL] bash-check-sh (exit 9)"),
        "the hostile check ran to its end in the rerun: {}",
        text(&out)
    );
    let out = attacked_verify(&repo, &home, &repo.path_env(), &["--rerun", "--json"]);
    let leaked = written(&repo, &home, &dir);
    assert!(
        leaked.is_empty(),
        "the rerun's check wrote outside its checkout: {leaked:?}\n{}",
        text(&out)
    );
    assert_code(
        &out,
        0,
        "every write refused by a read-only file system, the holdout not there: the check passes",
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "pass", "{v}");
    assert_eq!(v["rerun_sandbox"], "bwrap", "{v}");
    // The same under --rerun --record's run (a loop from before envelopes).
    fs::remove_file(dir.join("envelope.json")).unwrap();
    repo.git(&["update-ref", "-d", "refs/notes/orbit"]);
    crate::support::rewrite_events(&dir, |lines| {
        lines.retain(|l| !l.contains("\"event\":\"envelope_write\""));
    });
    let out = attacked_verify(&repo, &home, &repo.path_env(), &["--rerun", "--record"]);
    let leaked = written(&repo, &home, &dir);
    assert!(leaked.is_empty(), "--record's rerun wrote: {leaked:?}");
    assert_code(&out, 0, "recorded after a sandboxed rerun");
    assert!(dir.join("envelope.json").is_file());
}

#[test]
fn rerun_of_a_sandboxed_loop_where_bubblewrap_cannot_run_is_refused_and_runs_nothing() {
    if !bwrap_available() {
        return;
    }
    let (repo, dir) = hostile_done_loop("bwrap");
    let home = own_home(&repo);
    // A bwrap first on PATH that cannot start a sandbox (as where user namespaces are off).
    let fake = repo.bin.path().join("nobwrap");
    fs::create_dir_all(&fake).unwrap();
    let bwrap = fake.join("bwrap");
    fs::write(
        &bwrap,
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&bwrap, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", fake.display(), repo.path_env());
    let out = attacked_verify(&repo, &home, &path, &["--rerun"]);
    assert_code(
        &out,
        2,
        "fail closed: no unsandboxed rerun of a sandboxed loop",
    );
    let said = text(&out);
    assert!(
        said.contains("bubblewrap") && said.contains("without --rerun"),
        "{said}"
    );
    assert!(written(&repo, &home, &dir).is_empty(), "nothing ran");
    // Without --rerun nothing runs, and the hand-off still verifies.
    let out = attacked_verify(&repo, &home, &path, &[]);
    assert_code(&out, 0, "verify without --rerun needs no sandbox");
}

#[test]
fn rerun_of_a_loop_without_a_sandbox_runs_as_the_loop_ran_and_says_so() {
    let (repo, dir) = hostile_done_loop("none");
    let home = own_home(&repo);
    let out = attacked_verify(&repo, &home, &repo.path_env(), &["--rerun", "--json"]);
    // The loop's own checks ran unsandboxed: so does the rerun, as the user chose.
    assert!(
        repo.join("into-repo.txt").is_file(),
        "the unsandboxed rerun's write went through, as in the loop's own runs"
    );
    assert_code(&out, 3, "the hostile check fails the rerun");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verify_failure_code"], "RERUN_FAILED", "{v}");
    assert_eq!(v["rerun_sandbox"], "none", "{v}");
    let out = attacked_verify(&repo, &home, &repo.path_env(), &["--rerun"]);
    assert!(
        text(&out).contains("sandbox = \"none\""),
        "the text says the rerun ran without a sandbox: {}",
        text(&out)
    );
    let _ = dir;
}

#[test]
fn the_rerun_program_is_clean_bash_with_and_without_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    for sandboxed in [true, false] {
        for network in [true, false] {
            let p = dir.path().join(format!("rerun-{sandboxed}-{network}.sh"));
            let mode = orbit::rerun::Mode { sandboxed, network };
            fs::write(
                &p,
                format!("#!/usr/bin/env bash\n{}", orbit::rerun::program(mode)),
            )
            .unwrap();
            crate::support::assert_script_clean(&p);
        }
    }
}

#[test]
fn rerun_runs_in_the_clean_checkout_not_in_the_loops_workspace() {
    let (repo, _dir) = hostile_done_loop("none");
    // The loop's workspace no longer holds what the commit holds: a check run there fails.
    fs::remove_file(repo.ws().join("work.txt")).unwrap();
    let out = repo.orbit(&["verify", "--rerun"]);
    assert_code(
        &out,
        0,
        "the checks ran on the commit's tree, in a clean checkout",
    );
}

#[test]
fn rerun_of_an_allowlist_loop_has_no_network_and_of_an_open_one_the_users() {
    if !bwrap_available() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The network open: the hostile check reaches the host's loopback (the attack is real).
    let (repo, _dir) = hostile_done_loop_with("bwrap", &["--sandbox-network", "open"]);
    let v = net_attacked_verify(&repo, port);
    assert_eq!(v["verify_failure_code"], "RERUN_FAILED", "{v}");
    assert_eq!(v["rerun_sandbox"], "bwrap", "{v}");
    // The allowlist: the runner's proxy is not there, and the rerun has no network at all.
    let (repo, _dir) = hostile_done_loop_with("bwrap", &["--sandbox-network", "allowlist"]);
    let v = net_attacked_verify(&repo, port);
    assert_eq!(v["verdict"], "pass", "the port was not reached: {v}");
    drop(listener);
}

/// A repository whose check reads a file of its submodule (lib/, a repository of its own
/// that the user's checkout initialized, its objects in .git/modules/lib; its origin gone),
/// looped to DONE: the repository and the loop directory.
fn submodule_done_loop() -> (Repo, PathBuf) {
    let lib = tempfile::Builder::new()
        .prefix("orbit-sublib-")
        .tempdir()
        .unwrap();
    let lgit = |args: &[&str]| {
        let out = command("git")
            .arg("-C")
            .arg(lib.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
    };
    lgit(&["init", "-q", "-b", "main"]);
    fs::write(lib.path().join("VERSION"), "1.0\n").unwrap();
    lgit(&["add", "-A"]);
    lgit(&["commit", "-q", "-m", "the library"]);
    let repo = Repo::new();
    let url = lib.path().display().to_string();
    repo.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        &url,
        "lib",
    ]);
    repo.git(&["commit", "-qm", "the library as a submodule"]);
    drop(lib);
    let agent = repo.agent(
        "worker",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo step > work.txt
echo "the check holds" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(
        &agent,
        &["test -f work.txt && grep -q 1.0 lib/VERSION"],
        &[],
    );
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "the loop reaches DONE");
    (repo, dir)
}

#[test]
fn rerun_checks_out_the_commits_submodules_as_the_loop_did() {
    let (repo, _dir) = submodule_done_loop();
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["verify", "--rerun"])
        .current_dir(repo.path())
        .env("PATH", repo.path_env());
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert_code(
        &out,
        0,
        "orbit verify --rerun of a DONE whose check reads its submodule",
    );
}
