//! The envelope signed where the user already signs: git configured to sign with SSH
//! (`gpg.format ssh`, `user.signingkey`) has the runner sign envelope.json with `ssh-keygen
//! -Y sign` outside the sandbox (envelope.json.sig, and the DONE commit's note under
//! refs/notes/orbit-sig), the agent's sandbox never reading the key; `orbit verify` checks
//! the signature against an allowed-signers file. Real git, real ssh-keygen, the real
//! generated runner under real bubblewrap.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::support::{Repo, assert_code, bwrap_available, command, text};

/// The check script the loop runs, committed in the repository.
const CHECK_SH: &str = "test -f work.txt\n";

/// The principal the allowed-signers file names.
const PRINCIPAL: &str = "loop-owner@example.invalid";

/// A home of the test's own (under the repository's scratch directory) with a key pair in
/// `.ssh/` made by `ssh-keygen -t ed25519 -N PASSPHRASE`: (home, private key path).
fn home_with_key(repo: &Repo, passphrase: &str) -> (PathBuf, PathBuf) {
    let home = repo.bin.path().join("home");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join("visible.txt"), "home is readable\n").unwrap();
    let key = home.join(".ssh/id_ed25519");
    let out = command("ssh-keygen")
        .args([
            "-q", "-t", "ed25519", "-N", passphrase, "-C", PRINCIPAL, "-f",
        ])
        .arg(&key)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "ssh-keygen: {}", text(&out));
    (home, key)
}

/// An allowed-signers file naming the key's public half for PRINCIPAL.
fn allowed_signers(repo: &Repo, key: &Path) -> PathBuf {
    let public = fs::read_to_string(key.with_extension("pub")).unwrap();
    let f = repo.bin.path().join("allowed_signers");
    fs::write(&f, format!("{PRINCIPAL} {public}")).unwrap();
    f
}

/// The repository's own git configuration signs with SSH and `signingkey`.
fn sign_with(repo: &Repo, signingkey: &str) {
    repo.git(&["config", "gpg.format", "ssh"]);
    repo.git(&["config", "user.signingkey", signingkey]);
}

/// Runs a loop under bubblewrap to DONE with HOME set to `home`, its agent trying to read
/// the key (and, for comparison, another file of HOME) and writing what it got into
/// attempts.txt (committed with its work). The loop directory.
fn done_loop(repo: &Repo, home: &Path, key: &Path, env: &[(&str, &str)]) -> PathBuf {
    repo.write("check.sh", CHECK_SH);
    repo.git(&["add", "check.sh"]);
    repo.git(&["commit", "-qm", "the check"]);
    let agent = repo.agent(
        "worker",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
{{ echo "key: $(cat '{key}' 2>&1 | tr '\n' ' ')"
   echo "dir: $(ls -A '{dir}' 2>&1 | tr '\n' ' ')"
   echo "home: $(cat '{home}/visible.txt' 2>&1)"
   echo "agent: $(ssh-add -L 2>&1 | tr '\n' ' ')"; }} > attempts.txt
echo step >> work.txt
echo "every check holds" > "$ORBIT_AGENT_DIR/done.md""#,
            key = key.display(),
            dir = key.parent().unwrap().display(),
            home = home.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["bash check.sh"], &["--sandbox", "bwrap"]);
    let home_s = home.display().to_string();
    let mut all = vec![("HOME", home_s.as_str())];
    all.extend_from_slice(env);
    let out = repo.run_loop(&dir, &[], &all);
    assert_code(&out, 0, "the loop reaches DONE");
    dir
}

fn done_commit(repo: &Repo) -> String {
    repo.git(&["rev-parse", "orbit/test-goal"])
        .trim()
        .to_string()
}

/// `ssh-keygen -Y verify` of `data` against `sig`, as the user checks it by hand.
fn ssh_verify(allowed: &Path, sig: &Path, data: &[u8]) -> bool {
    use std::io::Write;
    let mut child = command("ssh-keygen")
        .args(["-Y", "verify", "-f"])
        .arg(allowed)
        .args(["-I", PRINCIPAL, "-n", "orbit-envelope", "-s"])
        .arg(sig)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    child.wait().unwrap().success()
}

fn verify_json(repo: &Repo, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["verify", "--json"];
    all.extend_from_slice(args);
    let out = repo.orbit(&all);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("orbit verify --json printed no JSON ({e}): {}", text(&out)));
    (out.status.code().unwrap_or(-1), v)
}

fn envelope_writes(dir: &Path) -> Vec<serde_json::Value> {
    crate::support::events_named(dir, "envelope_write")
        .into_iter()
        .map(|e| e.value)
        .collect()
}

#[test]
fn a_signed_envelope_verifies_with_ssh_keygen_and_a_tampered_one_does_not() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let (home, key) = home_with_key(&repo, "");
    let allowed = allowed_signers(&repo, &key);
    sign_with(&repo, key.to_str().unwrap());
    let dir = done_loop(&repo, &home, &key, &[]);
    // The agent tried to read the key in its sandbox and could not; HOME it could read.
    let attempts = repo.git(&["show", "orbit/test-goal:attempts.txt"]);
    assert!(attempts.contains("home: home is readable"), "{attempts}");
    assert!(attempts.starts_with("key: "), "{attempts}");
    assert!(!attempts.contains("PRIVATE KEY"), "{attempts}");
    assert!(
        attempts.contains("\ndir: \n"),
        "the key's directory is empty: {attempts}"
    );
    // envelope.json.sig verifies with ssh-keygen as the user checks it.
    let envelope = fs::read(dir.join("envelope.json")).unwrap();
    let sig = dir.join("envelope.json.sig");
    assert!(
        ssh_verify(&allowed, &sig, &envelope),
        "the signature verifies"
    );
    let writes = envelope_writes(&dir);
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["signed"], true, "{:?}", writes);
    // The notes: the envelope's bytes unchanged under refs/notes/orbit, the signature's
    // under refs/notes/orbit-sig.
    let commit = done_commit(&repo);
    assert_eq!(
        repo.git(&["notes", "--ref=orbit", "show", &commit])
            .as_bytes(),
        envelope.as_slice()
    );
    assert_eq!(
        repo.git(&["notes", "--ref=orbit-sig", "show", &commit]),
        fs::read_to_string(&sig).unwrap()
    );
    // orbit verify checks it, with the file named or git's gpg.ssh.allowedSignersFile.
    let (rc, v) = verify_json(&repo, &["--allowed-signers", allowed.to_str().unwrap()]);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["signature"], "good", "{v}");
    assert_eq!(v["signer"], PRINCIPAL, "{v}");
    repo.git(&[
        "config",
        "gpg.ssh.allowedSignersFile",
        allowed.to_str().unwrap(),
    ]);
    let (rc, v) = verify_json(&repo, &["--require-signature"]);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["signature"], "good", "{v}");
    let md = text(&repo.orbit(&["report"]));
    assert!(
        md.contains(&format!("(verified), signed by {PRINCIPAL}")),
        "{md}"
    );
    // A tampered envelope, resealed (its digest recomputed): ssh-keygen refuses it, and so
    // does orbit verify, with the code.
    let line = String::from_utf8(envelope.clone()).unwrap();
    let line = line.trim_end();
    let at = line.rfind(",\"digest\":").unwrap();
    let forged = orbit::envelope::seal(
        &format!("{}}}", &line[..at]).replace("\"pass_k\":2", "\"pass_k\":9"),
    );
    assert!(
        orbit::envelope::parse(forged.as_bytes()).is_ok(),
        "the forgery parses"
    );
    fs::write(dir.join("envelope.json"), &forged).unwrap();
    assert!(
        !ssh_verify(&allowed, &sig, forged.as_bytes()),
        "ssh-keygen refuses the tampered envelope"
    );
    let (rc, v) = verify_json(&repo, &[]);
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["verify_failure_code"], "SIGNATURE_BAD", "{v}");
    let out = repo.orbit(&["merge"]);
    assert_code(&out, 3, "merge refuses a bad signature");
    assert!(text(&out).contains("SIGNATURE_BAD"), "{}", text(&out));
    // The same forgery as the note, for a receiver without the loop directory.
    fs::write(dir.join("envelope.json"), &envelope).unwrap();
    let f = repo.bin.path().join("forged.json");
    fs::write(&f, &forged).unwrap();
    repo.git(&[
        "notes",
        "--ref=orbit",
        "add",
        "-f",
        "-F",
        f.to_str().unwrap(),
        &commit,
    ]);
    fs::rename(&dir, repo.bin.path().join("loop-away")).unwrap();
    let (rc, v) = verify_json(&repo, &[&commit]);
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["verify_failure_code"], "SIGNATURE_BAD", "{v}");
}

#[test]
fn an_unsigned_envelope_is_said_and_fails_only_with_require_signature() {
    let repo = Repo::new();
    crate::envelope::done_loop(&repo);
    let (_, key) = home_with_key(&repo, "");
    let allowed = allowed_signers(&repo, &key);
    let a = allowed.to_str().unwrap();
    let (rc, v) = verify_json(&repo, &["--allowed-signers", a]);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["signature"], "unsigned", "{v}");
    let out = repo.orbit(&["verify", "--allowed-signers", a]);
    assert!(text(&out).contains("unsigned"), "{}", text(&out));
    let (rc, v) = verify_json(&repo, &["--allowed-signers", a, "--require-signature"]);
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["verify_failure_code"], "SIGNATURE_MISSING", "{v}");
    let out = repo.orbit(&["verify", "--require-signature"]);
    assert_code(&out, 2, "--require-signature needs an allowed-signers file");
}

#[test]
fn a_key_that_needs_a_passphrase_leaves_the_envelope_unsigned_and_the_loop_done() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let (home, key) = home_with_key(&repo, "a passphrase nobody types");
    sign_with(&repo, key.to_str().unwrap());
    let dir = done_loop(&repo, &home, &key, &[]);
    assert!(dir.join("envelope.json").is_file());
    assert!(!dir.join("envelope.json.sig").exists());
    let writes = envelope_writes(&dir);
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["signed"], false, "{:?}", writes);
    assert!(
        writes[0]["unsigned_why"]
            .as_str()
            .is_some_and(|w| w.contains("passphrase")),
        "{:?}",
        writes
    );
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(log.contains("envelope: not signed"), "{log}");
    let md = text(&repo.orbit(&["report"]));
    assert!(md.contains("(verified), unsigned: "), "{md}");
    assert!(md.contains("passphrase"), "{md}");
}

#[test]
fn a_literal_public_key_signs_through_the_ssh_agent() {
    if !bwrap_available() {
        return;
    }
    let repo = Repo::new();
    let (home, key) = home_with_key(&repo, "a passphrase the agent was given");
    let allowed = allowed_signers(&repo, &key);
    // The socket where the sandbox would show it (under HOME), not in its private /tmp.
    let sock = home.join("agent.sock");
    let mut agent = command("ssh-agent")
        .args(["-D", "-a"])
        .arg(&sock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    crate::support::wait_for(
        "ssh-agent's socket",
        std::time::Duration::from_secs(30),
        || sock.exists(),
    );
    let add = command("ssh-add")
        .arg(&key)
        .env("SSH_AUTH_SOCK", &sock)
        .env(
            "SSH_ASKPASS",
            repo.agent("askpass", "echo 'a passphrase the agent was given'"),
        )
        .env("SSH_ASKPASS_REQUIRE", "force")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(add.status.success(), "ssh-add: {}", text(&add));
    let public = fs::read_to_string(key.with_extension("pub")).unwrap();
    let public: Vec<&str> = public.split_whitespace().take(2).collect();
    sign_with(&repo, &format!("key::{}", public.join(" ")));
    let dir = done_loop(
        &repo,
        &home,
        &key,
        &[("SSH_AUTH_SOCK", sock.to_str().unwrap())],
    );
    let _ = agent.kill();
    let _ = agent.wait();
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(log.contains("envelope: signed with"), "{log}");
    // The agent asked ssh-agent for its keys through the socket, and got none.
    let attempts = repo.git(&["show", "orbit/test-goal:attempts.txt"]);
    assert!(attempts.contains("\nagent: "), "{attempts}");
    assert!(!attempts.contains("agent: ssh-ed25519"), "{attempts}");
    let envelope = fs::read(dir.join("envelope.json")).unwrap();
    assert!(ssh_verify(
        &allowed,
        &dir.join("envelope.json.sig"),
        &envelope
    ));
    assert_eq!(envelope_writes(&dir)[0]["signed"], true);
}
