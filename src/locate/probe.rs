//! Liveness without interference: who holds a loop's lock, and which processes belong to
//! it. Nothing here takes a lock, writes a file or signals a process. On Linux the flock
//! holder is read from /proc/locks (matched by the inode of .run-loop.lock); the mkdir
//! fallback's owner file names a pid and its start time, checked with `ps`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Who holds the lock, as far as can be seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lock {
    /// Nobody.
    Free,
    /// A live runner (pid) holds it.
    Runner { pid: u32, how: &'static str },
    /// The flock is held by a live process that is not a runner (e.g. a leftover child
    /// that inherited the descriptor).
    StrayHolder { pid: u32, cmdline: String },
    /// The mkdir fallback's directory exists but its owner is gone.
    StaleDir { owner: String },
    /// The flock cannot be probed on this system without taking it.
    Unknown,
}

/// The processes in /proc/locks holding a lock on the inode `ino`.
pub fn flock_holders(locks: &str, ino: u64) -> Vec<u32> {
    let mut pids = Vec::new();
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters carry "->" after the id.
        if fields.len() < 6 || fields.get(1) == Some(&"->") {
            continue;
        }
        let Some(id) = fields[5].rsplit(':').next() else {
            continue;
        };
        if id.parse::<u64>().ok() == Some(ino)
            && let Ok(pid) = fields[4].parse::<u32>()
        {
            pids.push(pid);
        }
    }
    pids
}

fn cmdline(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        String::from_utf8_lossy(&raw)
            .split('\0')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The start time of a process as the runner records it (`ps -o lstart=`, spaces squeezed),
/// or None when the process does not exist.
pub fn proc_start(pid: u32) -> Option<String> {
    let out = Command::new("ps")
        .args(["-o", "lstart=", "-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let squeezed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (out.status.success() && !squeezed.is_empty()).then_some(squeezed)
}

/// The parent of a process (Linux /proc).
fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether a process has a controlling terminal (tty_nr in /proc/PID/stat is not 0).
fn has_terminal(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(4)?.parse::<i64>().ok())
        .is_some_and(|tty| tty != 0)
}

pub fn alive(pid: u32) -> bool {
    if Path::new("/proc/self").exists() {
        return Path::new(&format!("/proc/{pid}")).exists();
    }
    proc_start(pid).is_some()
}

/// Whether the process is stopped (`T`, by a signal: SIGSTOP, SIGTSTP) or stopped by a
/// tracer (`t`), as /proc/PID/stat says (false where there is no /proc).
pub fn stopped(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "PID (COMM) STATE ...": COMM may hold spaces and parentheses; the state follows the
    // last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|st| st == "T" || st == "t")
}

/// Probes the loop's lock without taking it.
pub fn lock(dir: &Path) -> Lock {
    let lockdir = dir.join(".run-loop.lock.d");
    if lockdir.is_dir() {
        let read_owner =
            || crate::fsx::read_text_or_none(&lockdir.join("owner")).unwrap_or_default();
        let mut owner = read_owner();
        if owner.trim().is_empty() {
            // The runner writes its owner line right after mkdir: give it a moment.
            std::thread::sleep(std::time::Duration::from_millis(200));
            owner = read_owner();
        }
        let owner = owner.trim_end().to_string();
        let (pid, start) = owner.split_once(' ').unwrap_or((&owner, ""));
        if let Ok(pid) = pid.parse::<u32>()
            && proc_start(pid) == Some(start.split_whitespace().collect::<Vec<_>>().join(" "))
        {
            return Lock::Runner { pid, how: "mkdir" };
        }
        if !lockdir.exists() {
            return Lock::Free;
        }
        return Lock::StaleDir { owner };
    }
    let Ok(locks) = fs::read_to_string("/proc/locks") else {
        return Lock::Unknown;
    };
    // The runner locks .run-loop.lock and the loop directory itself (a deleted lock file
    // must not let a second runner in): either held means held.
    let lock_path = dir.join(".run-loop.lock");
    if let Some(held) = flock_probe(&locks, &lock_path) {
        return held;
    }
    flock_probe(&locks, dir).unwrap_or(Lock::Free)
}

/// Who holds a flock on `lock_path`, or None when nobody does (or it does not exist).
fn flock_probe(locks: &str, lock_path: &Path) -> Option<Lock> {
    let meta = fs::metadata(lock_path).ok()?;
    let listed = flock_holders(locks, meta.ino());
    if listed.is_empty() {
        return None;
    }
    // /proc/locks names the process that took the lock, which for flock(1) is the helper
    // that has already exited; the lock lives as long as a descriptor of it is open, so
    // the holders are the processes with such a descriptor.
    let mut holders = fd_holders(lock_path);
    for pid in listed {
        if alive(pid) && !holders.contains(&pid) {
            holders.push(pid);
        }
    }
    let with_cmd: Vec<(u32, String)> = holders
        .iter()
        .map(|p| (*p, cmdline(*p).unwrap_or_default()))
        .collect();
    // The runner's subshells inherit the descriptor (and its command line): the runner is
    // the one whose parent does not hold the lock too.
    let runners: Vec<u32> = with_cmd
        .iter()
        .filter(|(_, c)| c.contains("run-loop.sh"))
        .map(|(p, _)| *p)
        .collect();
    if let Some(pid) = runners
        .iter()
        .find(|p| parent(**p).is_none_or(|pp| !runners.contains(&pp)))
        .or(runners.first())
    {
        return Some(Lock::Runner {
            pid: *pid,
            how: "flock",
        });
    }
    Some(match with_cmd.into_iter().next() {
        Some((pid, cmdline)) => Lock::StrayHolder { pid, cmdline },
        // Held, by a process this user cannot see: a runner as far as anyone can tell.
        None => Lock::Runner {
            pid: 0,
            how: "flock",
        },
    })
}

/// Processes with an open descriptor on `path` (Linux /proc; those of other users are not
/// visible and are skipped).
fn fd_holders(path: &Path) -> Vec<u32> {
    let target = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut pids = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|l| l == target))
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}

/// What one look over /proc saw of a process: the `ORBIT_OWNER=` marks of its
/// environment, its working directory, whether it has a controlling terminal.
struct Seen {
    pid: u32,
    ppid: Option<u32>,
    owners: Vec<Vec<u8>>,
    cwd: Option<PathBuf>,
    tty: bool,
}

/// How long one look over /proc answers for: reading 1,000 loops (`orbit status`, `orbit
/// serve`) looks once, not twice per loop, as if every loop were read at one instant.
const LOOK_AGE: Duration = Duration::from_millis(500);

/// The processes this user may look at (other than this one), as seen at most
/// [`LOOK_AGE`] ago.
fn processes() -> Arc<Vec<Seen>> {
    static LAST: Mutex<Option<(Instant, Arc<Vec<Seen>>)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((at, seen)) = last.as_ref()
        && at.elapsed() < LOOK_AGE
    {
        return Arc::clone(seen);
    }
    let me = std::process::id();
    let mut seen = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let owners = fs::read(e.path().join("environ"))
            .map(|env| {
                env.split(|b| *b == 0)
                    .filter(|kv| kv.starts_with(b"ORBIT_OWNER="))
                    .map(<[u8]>::to_vec)
                    .collect()
            })
            .unwrap_or_default();
        seen.push(Seen {
            pid,
            ppid: parent(pid),
            owners,
            cwd: fs::read_link(e.path().join("cwd")).ok(),
            tty: has_terminal(pid),
        });
    }
    seen.sort_unstable_by_key(|p| p.pid);
    let seen = Arc::new(seen);
    *last = Some((Instant::now(), Arc::clone(&seen)));
    seen
}

/// Processes (other than this one) whose environment holds `ORBIT_OWNER=<dir>`.
pub fn owned_processes(dir: &Path) -> Vec<u32> {
    let marker = format!("ORBIT_OWNER={}", dir.display());
    processes()
        .iter()
        .filter(|p| p.owners.iter().any(|kv| kv == marker.as_bytes()))
        .map(|p| p.pid)
        .collect()
}

/// Processes (other than this one, its ancestors and its children) without a controlling
/// terminal whose working directory is one of `dirs` or below it (Linux /proc; only
/// processes this user may look at): what an agent run left behind without the loop's mark
/// (a daemon started through `env -i setsid`, which also leaves the terminal) keeps the
/// workspace it ran in, unless it moved; a shell of the user's in a terminal there is not
/// one. Each with its command line.
pub fn working_in(dirs: &[&Path]) -> Vec<(u32, String)> {
    if dirs.iter().all(|d| d.as_os_str().is_empty()) {
        return Vec::new();
    }
    let mut mine = vec![std::process::id()];
    while let Some(up) = mine.last().and_then(|p| parent(*p)) {
        if up == 0 || mine.contains(&up) {
            break;
        }
        mine.push(up);
    }
    // Nor this process's own children (a git an audit of another loop runs meanwhile).
    let me = std::process::id();
    processes()
        .iter()
        .filter(|p| !mine.contains(&p.pid) && p.ppid != Some(me) && !p.tty)
        .filter(|p| {
            p.cwd.as_ref().is_some_and(|cwd| {
                dirs.iter()
                    .any(|d| !d.as_os_str().is_empty() && cwd.starts_with(d))
            })
        })
        .map(|p| (p.pid, cmdline(p.pid).unwrap_or_default()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines_are_matched_by_inode() {
        let locks = "1: FLOCK  ADVISORY  WRITE 4242 00:2b:1234 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 99 00:2b:1234 0 EOF\n\
                     2: POSIX  ADVISORY  READ 17 08:01:777 0 EOF\n";
        assert_eq!(flock_holders(locks, 1234), vec![4242]);
        assert_eq!(flock_holders(locks, 777), vec![17]);
        assert!(flock_holders(locks, 5).is_empty());
        assert!(flock_holders("garbage\n\n1:\n", 5).is_empty());
    }

    #[test]
    fn this_process_is_alive_and_has_a_start_time() {
        assert!(alive(std::process::id()));
        assert!(proc_start(std::process::id()).is_some());
    }
}
