//! Probing the runner's lock without taking it.
//!
//! With `flock`, the runner holds `.run-loop.lock` open and locked for its life: on Linux
//! the lock shows up in `/proc/locks` as `... <maj>:<min>:<inode> ...`. Without flock, it
//! holds `.run-loop.lock.d/` whose `owner` file reads `<pid> <process start time>`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

/// Who holds the lock, in words, or `None`.
pub fn holder(dir: &Path) -> Option<String> {
    let lock = dir.join(".run-loop.lock");
    if let Ok(meta) = fs::metadata(&lock) {
        match proc_locks_hold(meta.ino()) {
            Some(true) => return Some(format!("a runner holds {} (flock)", lock.display())),
            Some(false) => {}
            None => {
                // No /proc/locks (not Linux): ask flock itself, for an instant.
                if let Ok(f) = fs::OpenOptions::new().read(true).open(&lock) {
                    match f.try_lock() {
                        Ok(()) => {
                            let _ = f.unlock();
                        }
                        Err(_) => {
                            return Some(format!("a runner holds {} (flock)", lock.display()));
                        }
                    }
                }
            }
        }
    }
    let lockdir = dir.join(".run-loop.lock.d");
    if lockdir.is_dir() {
        let owner = fs::read_to_string(lockdir.join("owner")).unwrap_or_default();
        let owner = owner.trim_end_matches('\n');
        let (pid, start) = owner.split_once(' ').unwrap_or((owner, ""));
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            return Some(format!(
                "{} exists without a readable owner (a runner may be starting): wait a moment, or remove the directory if no runner is running",
                lockdir.display()
            ));
        }
        if pid_alive(pid) && process_start(pid) == start {
            return Some(format!("a runner (pid {pid}) holds {}", lockdir.display()));
        }
    }
    None
}

/// Whether /proc/locks lists a lock on `inode`; `None` when /proc/locks is unreadable.
fn proc_locks_hold(inode: u64) -> Option<bool> {
    let text = fs::read_to_string("/proc/locks").ok()?;
    let want = format!(":{inode}");
    Some(text.lines().any(|l| {
        l.split_whitespace()
            .any(|field| field.matches(':').count() == 2 && field.ends_with(&want))
    }))
}

fn pid_alive(pid: &str) -> bool {
    if Path::new("/proc/self").exists() {
        return Path::new("/proc").join(pid).exists();
    }
    Command::new("kill")
        .args(["-0", pid])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `ps -o lstart=` squeezed as the runner records it.
fn process_start(pid: &str) -> String {
    let out = Command::new("ps")
        .args(["-o", "lstart=", "-p", pid])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut squeezed = String::new();
    let mut prev_space = false;
    for c in out.trim_end_matches('\n').chars() {
        if c == ' ' {
            if !prev_space {
                squeezed.push(c);
            }
            prev_space = true;
        } else {
            squeezed.push(c);
            prev_space = false;
        }
    }
    squeezed
}
