//! `orbit run` and `orbit demo`.

use std::process::Command;

use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::locate::pick_loop;

/// `orbit run`: hands the process over to the loop's own run-loop.sh (exec), so signals
/// sent to this process reach the runner itself.
pub fn run(args: &RunArgs) -> Result<u8> {
    use std::os::unix::process::CommandExt;
    let dir = pick_loop(args.dir.as_deref())?;
    let mut cmd = Command::new("bash");
    cmd.arg(dir.join("run-loop.sh"));
    if args.once {
        cmd.arg("--once");
    }
    // exec only returns on failure.
    let err = cmd.exec();
    Err(Error::io("cannot start bash (is it installed?)", err))
}
