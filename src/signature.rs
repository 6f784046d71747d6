//! The envelope's SSH signature: where the user's git configuration signs with SSH
//! (`gpg.format ssh`, `user.signingkey`), the runner signs envelope.json with `ssh-keygen -Y
//! sign -n orbit-envelope` into `envelope.json.sig`, and attaches it to the DONE commit as
//! a note under `refs/notes/orbit-sig` (a ref of its own: the envelope's note stays byte for
//! byte envelope.json). `orbit verify` checks it with `ssh-keygen -Y find-principals` and
//! `-Y verify` against an allowed-signers file, as git checks an SSH-signed commit.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::fsx;

/// The signature's file in the loop directory.
pub const FILE: &str = "envelope.json.sig";
/// The notes ref that carries the signature on the DONE commit.
pub const NOTES_REF: &str = "refs/notes/orbit-sig";
/// The namespace the runner signs in (`ssh-keygen -Y sign -n`).
pub const NAMESPACE: &str = "orbit-envelope";

/// What the envelope's signature says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    /// No signature.
    Unsigned,
    /// Signed, but no allowed-signers file to check it against.
    NotChecked,
    /// Verified for this principal of the allowed-signers file.
    Good(String),
    /// Does not verify: why.
    Bad(String),
}

impl Signature {
    /// The word `--json` gives: unsigned, not_checked, good, bad.
    pub fn word(&self) -> &'static str {
        match self {
            Signature::Unsigned => "unsigned",
            Signature::NotChecked => "not_checked",
            Signature::Good(_) => "good",
            Signature::Bad(_) => "bad",
        }
    }

    /// The principal a good signature verified for.
    pub fn signer(&self) -> Option<&str> {
        match self {
            Signature::Good(p) => Some(p),
            _ => None,
        }
    }
}

/// The allowed-signers file git's configuration names for `repo`
/// (`gpg.ssh.allowedSignersFile`, `~` expanded, a relative path from the repository's root).
pub fn configured_allowed_signers(repo: &Path) -> Option<PathBuf> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["config", "--path", "--get", "gpg.ssh.allowedSignersFile"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then(|| repo.join(text))
}

/// Runs ssh-keygen with `stdin` as its input; (success, stdout, stderr).
fn ssh_keygen(args: &[&std::ffi::OsStr], stdin: &[u8]) -> std::io::Result<(bool, String, String)> {
    let mut child = Command::new("ssh-keygen")
        .args(args)
        .env_remove("SSH_ASKPASS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin);
    }
    let out = child.wait_with_output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

/// Checks `sig` (an armoured SSH signature) over `data` against the allowed-signers file:
/// the principals it names for the signing key, each tried with `ssh-keygen -Y verify`.
pub fn check(data: &[u8], sig: &[u8], allowed: &Path) -> Signature {
    if !allowed.is_file() {
        return Signature::Bad(format!(
            "the allowed-signers file {} cannot be read",
            allowed.display()
        ));
    }
    let tmp = std::env::temp_dir().join(format!(
        "orbit-sig-{}-{}-{}.sig",
        std::process::id(),
        fsx::now_epoch(),
        fsx::sha256_hex(sig).get(..12).unwrap_or_default()
    ));
    if let Err(e) = std::fs::write(&tmp, sig) {
        return Signature::Bad(format!("cannot write {}: {e}", tmp.display()));
    }
    let result = check_file(data, &tmp, allowed);
    let _ = std::fs::remove_file(&tmp);
    result
}

fn check_file(data: &[u8], sig: &Path, allowed: &Path) -> Signature {
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let found = ssh_keygen(
        &[
            os("-Y"),
            os("find-principals"),
            os("-s"),
            sig.as_os_str(),
            os("-f"),
            allowed.as_os_str(),
        ],
        b"",
    );
    let principals = match found {
        Err(e) => return Signature::Bad(format!("ssh-keygen cannot run ({e}): install OpenSSH")),
        Ok((false, _, err)) => {
            return Signature::Bad(format!(
                "no principal of {} holds the key that signed it ({})",
                allowed.display(),
                if err.is_empty() {
                    "ssh-keygen said nothing"
                } else {
                    &err
                }
            ));
        }
        Ok((true, out, _)) => out,
    };
    let mut last = String::new();
    for principal in principals.lines().map(str::trim).filter(|p| !p.is_empty()) {
        let p = std::ffi::OsString::from(principal);
        match ssh_keygen(
            &[
                os("-Y"),
                os("verify"),
                os("-f"),
                allowed.as_os_str(),
                os("-I"),
                &p,
                os("-n"),
                os(NAMESPACE),
                os("-s"),
                sig.as_os_str(),
            ],
            data,
        ) {
            Ok((true, _, _)) => return Signature::Good(principal.to_string()),
            Ok((false, _, err)) => last = err,
            Err(e) => last = e.to_string(),
        }
    }
    Signature::Bad(format!(
        "the signature does not verify over the envelope's bytes (changed after it was signed){}",
        if last.is_empty() {
            String::new()
        } else {
            format!(": {last}")
        }
    ))
}
