//! `orbit recover`: evidence-based, idempotent repair of a loop's state.

use crate::cli::RecoverArgs;
use crate::error::{Error, Result};

pub fn run(_args: &RecoverArgs) -> Result<u8> {
    Err(Error::Usage("orbit recover is not built yet".into()))
}
