//! `orbit run` and `orbit demo`.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::fsx;
use crate::locate::pick_loop;

/// `orbit run`: hands the process over to the loop's own run-loop.sh (exec), so signals
/// sent to this process reach the runner itself.
pub fn run(args: &RunArgs) -> Result<u8> {
    use std::os::unix::process::CommandExt;
    let dir = pick_loop(args.dir.as_deref())?;
    runner_as_pinned(&dir)?;
    let mut cmd = Command::new("bash");
    cmd.arg(dir.join("run-loop.sh"));
    if args.once {
        cmd.arg("--once");
    }
    // exec only returns on failure.
    let err = cmd.exec();
    Err(Error::io("cannot start bash (is it installed?)", err))
}

/// run-loop.sh as pins.sha256 pins it (orbit init pins it, every run checks it): a runner
/// rewritten since (a loop directory committed to the repository, and a branch merged
/// where the agent changed its copy, say) is refused before bash reads a line of it, for a
/// DONE loop too. A loop without a pin of it is run as it is.
fn runner_as_pinned(dir: &Path) -> Result<()> {
    let pins_path = dir.join("pins.sha256");
    let bytes = match fs::read(&pins_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("cannot read {}", pins_path.display()), e)),
    };
    let (pins, _) = crate::pins::parse(&bytes);
    let Some(pin) = pins.iter().find(|p| p.path == "run-loop.sh") else {
        return Ok(());
    };
    let script = dir.join("run-loop.sh");
    let have = match fs::read(&script) {
        Ok(data) => fsx::sha256_hex(&data),
        Err(e) => return Err(Error::io(format!("cannot read {}", script.display()), e)),
    };
    if have == pin.sha256 {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "script_tamper: {} is not the runner orbit rendered (sha256 {have}, pinned {}): nothing of it was run; review it (git log -p -- {0}), then 'orbit recover --restore-pinned {}' puts the pinned copy back",
        script.display(),
        pin.sha256,
        dir.display()
    )))
}
