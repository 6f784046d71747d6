//! `orbit verify --rerun`'s check runs: verify.sh (and holdout.sh) of the loop directory in
//! a clean checkout of the commit, under the loop's own sandbox. The code run is the code
//! handed over, which the receiver has no reason to trust: a loop whose checks run under
//! bubblewrap (`sandbox = "bwrap"` or `"auto"`) has its rerun run under bubblewrap too, with
//! the mounts the runner gives a check run; where bubblewrap cannot run, nothing runs (fail
//! closed). A loop of `sandbox = "none"` ran its checks without one, and its rerun runs as
//! they did, which the answer says.
//!
//! The sandbox's policy is written once, in bash (lib/sandbox.sh `sandbox_prepare`): the
//! rerun runs a small bash program (templates/rerun.sh) after the very parts the loop's
//! run-loop.sh holds, taken from this orbit's templates, rather than a second copy of the
//! mounts in Rust that would drift from the first. The receiver's orbit, not the loop
//! directory, supplies them, so a loop rendered before this existed reruns sandboxed too.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::config::{LoopConfig, Sandbox, SandboxNetwork};
use crate::error::{Error, Result};
use crate::render;

/// The driver run after the parts (see the module's doc).
pub const DRIVER: &str = include_str!("../templates/rerun.sh");

/// The status the driver exits with when the loop is sandboxed and bubblewrap cannot run.
const NO_SANDBOX_EXIT: i32 = 125;
const NO_SANDBOX_MARK: &str = "ORBIT_RERUN_NO_SANDBOX: ";

/// How a loop's checks are rerun: under bubblewrap or not, and with the network or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub sandboxed: bool,
    pub network: bool,
}

impl Mode {
    /// The loop's, from its loop.toml.
    pub fn of_loop(dir: &Path) -> Result<Mode> {
        let cfg = LoopConfig::load(&dir.join("loop.toml")).map_err(|e| {
            Error::Refused(format!(
                "--rerun runs the checks under the loop's sandbox, and its loop.toml cannot be read ({e}): nothing ran"
            ))
        })?;
        let sandboxed = cfg.sandbox != Sandbox::None;
        Ok(Mode {
            sandboxed,
            network: !(sandboxed && cfg.sandbox_network == SandboxNetwork::Allowlist),
        })
    }

    /// The word the answer gives (`rerun_sandbox`): `bwrap` or `none`.
    pub fn word(&self) -> &'static str {
        if self.sandboxed { "bwrap" } else { "none" }
    }

    /// The answer's line about it.
    pub fn said(&self) -> String {
        match (self.sandboxed, self.network) {
            (true, true) => "the checks ran under bubblewrap, as the loop's check runs do".into(),
            (true, false) => "the checks ran under bubblewrap without a network (the loop's allowlist proxy is the runner's)".into(),
            (false, _) => "the checks ran without a sandbox: the loop runs its checks with sandbox = \"none\", and so does the rerun (the code ran with your rights)".into(),
        }
    }
}

/// The bash program: the parts a loop's run-loop.sh holds for a check run's sandbox, then
/// the driver.
pub fn program(mode: Mode) -> String {
    let sandbox = if mode.sandboxed {
        render::LIB_SANDBOX
    } else {
        render::LIB_NO_SANDBOX
    };
    // The parts' variables and functions that other parts of the runner use, as lib.sh.
    let mut p =
        String::from("# shellcheck shell=bash disable=SC2034,SC2153,SC2317\nset -Eeuo pipefail\n");
    for part in [
        &*render::place_perl(render::LIB_COMMON),
        render::LIB_RUNNER_ENVELOPE,
        sandbox,
        DRIVER,
    ] {
        p.push_str(part);
        p.push('\n');
    }
    p
}

/// The command that runs `kind` (`check`: verify.sh, `holdout`: holdout.sh) of the loop
/// `dir` in the clean checkout `ws` of `repo`, with `scratch` its scratch directory, under
/// the loop's sandbox: stdin from /dev/null, the rest the caller's to set.
pub fn command(
    mode: Mode,
    kind: &str,
    dir: &Path,
    ws: &Path,
    repo: &Path,
    scratch: &Path,
) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(program(mode))
        .arg("orbit-rerun")
        .arg(kind)
        .arg(dir)
        .arg(ws)
        .arg(repo)
        .arg(scratch)
        .arg(if mode.network { "open" } else { "none" })
        .current_dir(ws)
        .stdin(Stdio::null());
    cmd
}

/// The refusal a run's exit says, when the loop is sandboxed and bubblewrap could not run
/// here (nothing ran).
pub fn refused(status: Option<i32>, stderr: &[u8]) -> Option<Error> {
    if status != Some(NO_SANDBOX_EXIT) {
        return None;
    }
    let err = String::from_utf8_lossy(stderr);
    let why = err.lines().find_map(|l| l.strip_prefix(NO_SANDBOX_MARK))?;
    Some(Error::Refused(format!(
        "the handed-over code runs under bubblewrap, as the loop's own check runs (sandbox = \"bwrap\" or \"auto\"), and {why}: nothing ran. Fix it, or verify without --rerun (the envelope's checks need no sandbox)"
    )))
}

/// [`command`], run to its end. Refused (nothing ran) when the loop is sandboxed and
/// bubblewrap cannot run here.
pub fn run(
    mode: Mode,
    kind: &str,
    dir: &Path,
    ws: &Path,
    repo: &Path,
    scratch: &Path,
) -> Result<Output> {
    let out = command(mode, kind, dir, ws, repo, scratch)
        .output()
        .map_err(|err| Error::io("cannot run bash", err))?;
    if let Some(e) = refused(out.status.code(), &out.stderr) {
        return Err(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_holds_the_loops_sandbox_part_or_its_stand_in() {
        let on = program(Mode {
            sandboxed: true,
            network: true,
        });
        assert!(on.contains("sandbox_prepare() {") && on.contains("sandbox_probe_v() {"));
        let off = program(Mode {
            sandboxed: false,
            network: true,
        });
        assert!(off.contains("sandbox_prepare() { :; }"));
        assert!(!off.contains("sandbox_probe_v() {"));
        assert!(on.ends_with("rerun_main \"$@\"\n\n"));
    }
}
