//! `orbit audit` and `orbit status`: read-only classification of loops.

use crate::cli::{AuditArgs, StatusArgs};
use crate::error::{Error, Result};

pub fn run(_args: &AuditArgs) -> Result<u8> {
    Err(Error::Usage("orbit audit is not built yet".into()))
}

pub fn status(_args: &StatusArgs) -> Result<u8> {
    Err(Error::Usage("orbit status is not built yet".into()))
}
