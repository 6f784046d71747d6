//! The loop's installed schedule on this machine (contract section 7): a crontab line or a
//! systemd unit of the loop that differs from what `orbit schedule --install` recorded (or,
//! without a record, from what orbit renders for it) runs, at the next tick, whatever was
//! written into it, as the user and outside any sandbox. Each difference is a P0
//! `SCRIPT_TAMPER`, with the unit file's `PATH:LINE` or `crontab:LINE` as evidence.

use std::path::Path;

use super::Finding;
use crate::contract::{FindingClass, Severity};
use crate::schedule::installed::{Against, differences};

/// The findings on the installed schedule of the loop in `dir` (canonical); `shown` is the
/// directory as the fix commands name it. A loop whose schedule cannot be read (a
/// loop.toml that does not parse) has none here: other checks report that.
pub fn check(dir: &Path, shown: &str) -> Vec<Finding> {
    let Ok(diffs) = differences(dir, shown, Against::RecordElseRendered) else {
        return Vec::new();
    };
    diffs
        .into_iter()
        .map(|d| {
            let lines = if d.lines.is_empty() {
                String::new()
            } else {
                format!(": {}", d.lines.join(" | "))
            };
            Finding {
                class: FindingClass::ScriptTamper,
                severity: Severity::P0,
                evidence: d.evidence,
                message: format!(
                    "{}{lines}. The next tick runs it as you, outside any sandbox; the runner stops the loop on it (script_tamper)",
                    d.what
                ),
                fix: format!(
                    "{}; then orbit recover {shown} --restore-pinned if the loop stopped on it",
                    d.fix
                ),
            }
        })
        .collect()
}
