//! Facts of one loop that several checks of an audit read: the line of a loop.toml key,
//! whether an iteration's commit failed, and git, asked through bounded, read-only calls.
//! Every check part reads them here, so no check part reads another's.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::read::iter_rel;
use crate::fsx;

/// How long one git call of an audit may take before it is given up (and its finding with
/// it): an audit never hangs on a slow file system or a wedged repository.
const GIT_LIMIT: Duration = Duration::from_secs(5);

/// The 1-based line of a `key =` setting in loop.toml.
pub(super) fn toml_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with('='))
        })
        .map_or(1, |i| i + 1)
}

/// Whether iteration `n`'s commit failed (its changes stay in the workspace).
pub(super) fn commit_failed(dir: &Path, n: u64) -> bool {
    n >= 1
        && fsx::read_text_or_none(&dir.join(iter_rel(n)).join("commit.txt"))
            .is_some_and(|t| t.lines().next() == Some("failed"))
}

pub(super) struct GitOut {
    pub(super) code: Option<i32>,
    pub(super) stdout: Vec<u8>,
}

/// `git -C dir ARGS`, read-only and bounded: no optional lock (git never writes the index
/// for an audit), no fsmonitor, no prompt, the environment's repository overrides removed;
/// killed after [`GIT_LIMIT`] (then `None`).
pub(super) fn git(dir: &Path, args: &[&str]) -> Option<GitOut> {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(["-c", "core.fsmonitor=false"])
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                return Some(GitOut {
                    code: st.code(),
                    stdout: reader.join().unwrap_or_default(),
                });
            }
            Ok(None) if start.elapsed() < GIT_LIMIT => {
                std::thread::sleep(Duration::from_millis(2));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_lines() {
        assert_eq!(
            toml_line("a = 1\nloop-timeout = \"0\"\n", "loop-timeout"),
            2
        );
        assert_eq!(toml_line("", "loop-timeout"), 1);
    }
}
