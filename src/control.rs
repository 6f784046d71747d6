//! `orbit stop` and `orbit resume`: the user's hold on a loop. A stopped loop is PAUSED with
//! the stop reason `stopped`; every run of it exits 18 at once, touching nothing, until
//! `orbit resume` (contract 4.2, 5). Both change state.env only under the loop's lock, seal
//! it, and say so in the event journal, as the runner does.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::cli::{ResumeArgs, StopArgs};
use crate::contract::{EventName, Status, StopReason};
use crate::error::{Error, Result};
use crate::goal::parse_duration;
use crate::locate::pick_loop;
use crate::locate::probe::{self, Lock};
use crate::state::{Sidecar, State};
use crate::{events, fsx};

/// The loop's lock, held while this process changes its state: a runner that starts
/// meanwhile finds it taken and exits 20. Released when dropped (closing the file).
pub(crate) struct Held {
    _file: fs::File,
}

pub(crate) fn hold_lock(dir: &Path) -> Result<Held> {
    try_hold_lock(dir)?.ok_or_else(|| taken_meanwhile(dir))
}

/// The loop's lock as [`hold_lock`] takes it, waiting until `deadline` while it is taken:
/// a runner that has just exited can leave a child holding the lock's descriptor for a
/// moment (a `sleep` of its exit path), and a stop that gave up then would leave the loop
/// unheld.
fn hold_lock_by(dir: &Path, deadline: Instant) -> Result<Held> {
    loop {
        if let Some(held) = try_hold_lock(dir)? {
            return Ok(held);
        }
        if Instant::now() >= deadline {
            return Err(taken_meanwhile(dir));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn taken_meanwhile(dir: &Path) -> Error {
    Error::Refused(format!(
        "a runner holds {} (it started meanwhile): run the command again",
        dir.join(".run-loop.lock").display()
    ))
}

/// The loop's lock, or None while another process holds it.
fn try_hold_lock(dir: &Path) -> Result<Option<Held>> {
    let path = dir.join(".run-loop.lock");
    let file = fsx::open_append_regular(&path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Ok(None),
        Err(fs::TryLockError::Error(e)) => {
            return Err(Error::io(format!("cannot lock {}", path.display()), e));
        }
    }
    // The runner's fallback lock (a directory, where flock is missing) must be free too.
    if let Lock::Runner { pid, .. } = probe::lock(dir) {
        return Err(Error::Refused(format!(
            "a runner (pid {pid}) holds the loop: stop it first (orbit stop)"
        )));
    }
    Ok(Some(Held { _file: file }))
}

/// The loop's state, sealed: a state that does not match its sidecar is for `orbit recover`.
fn read_sealed(dir: &Path) -> Result<State> {
    let state = State::parse_file(&dir.join("state.env"))?;
    let text = fsx::read_regular(&dir.join("state.env"))?;
    let sidecar =
        fsx::read_regular_opt(&dir.join("state.env.sha256"))?.and_then(|b| Sidecar::parse(&b).ok());
    let sealed = sidecar
        .is_some_and(|c| c.sha256 == fsx::sha256_hex(&text) && c.generation == state.generation);
    if !sealed {
        return Err(Error::Refused(format!(
            "{}/state.env does not match its sidecar: run orbit recover {} first",
            dir.display(),
            dir.display()
        )));
    }
    Ok(state)
}

/// Writes the next generation of the state (state.env, then its sidecar, each atomic) and a
/// `state_write` event naming who wrote it and the sha256 of the state.env written.
fn write_state(dir: &Path, mut state: State, by: &str) -> Result<State> {
    state.generation += 1;
    state.last_updated_at = fsx::now_epoch();
    let text = state.print();
    fsx::write_atomic(&dir.join("state.env"), text.as_bytes())?;
    fsx::write_atomic(
        &dir.join("state.env.sha256"),
        Sidecar::for_state(&text, state.generation)
            .print()
            .as_bytes(),
    )?;
    let fields = [
        ("gen", events::value(&state.generation.to_string())),
        ("status", events::value(state.last_status.as_str())),
        ("reason", events::value(state.stop_reason.as_str())),
        (
            "next_iteration",
            events::value(&state.next_iteration.to_string()),
        ),
        // The exact state.env written: audit and recover check state.env against it.
        ("sha256", events::value(&fsx::sha256_hex(text.as_bytes()))),
        ("by", events::value(by)),
    ];
    append_event(
        dir,
        EventName::StateWrite,
        state.next_iteration.saturating_sub(1),
        &fields,
    )?;
    Ok(state)
}

/// Appends one event to the hash chain of events.jsonl; a torn last line (a crash mid
/// append) is dropped first, as the runner does at its start.
pub(crate) fn append_event(
    dir: &Path,
    name: EventName,
    iteration: u64,
    fields: &[(&str, String)],
) -> Result<()> {
    append_event_at(&dir.join("events.jsonl"), name, iteration, fields)
}

/// Appends one event to the hash chain of the journal at `path` (created when missing).
pub(crate) fn append_event_at(
    path: &Path,
    name: EventName,
    iteration: u64,
    fields: &[(&str, String)],
) -> Result<()> {
    let path = path.to_path_buf();
    let mut bytes = fsx::read_regular_opt(&path)?.unwrap_or_default();
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(keep);
        fsx::write_atomic(&path, &bytes)?;
    }
    let (prev, seq) = events::read(&bytes).tip();
    let line = events::build_line(
        seq,
        &fsx::iso_utc(fsx::now_epoch()),
        name.as_str(),
        iteration,
        fields,
        &prev,
    );
    let mut file = fsx::open_append_regular(&path)?;
    file.write_all(line.as_bytes())
        .map_err(|e| Error::io(format!("cannot append to {}", path.display()), e))
}

/// Signals a live runner to save its state and exit, and waits until it has.
fn stop_runner(dir: &Path, wait: &str, deadline: Instant) -> Result<Option<u32>> {
    let Some(pid) = crate::ops::runner_pid(dir) else {
        return Ok(None);
    };
    let st = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .map_err(|e| Error::io("cannot run kill", e))?;
    if !st.success() {
        return Err(Error::Refused(format!(
            "cannot signal the runner (pid {pid})"
        )));
    }
    while crate::ops::runner_pid(dir) == Some(pid) {
        if Instant::now() > deadline {
            return Err(Error::Refused(format!(
                "the runner (pid {pid}) still holds the lock after {wait}: try again, or kill -KILL {pid} and run orbit recover"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Some(pid))
}

/// `orbit stop`: stops a live runner (it saves a resumable state), then holds the loop:
/// PAUSED, reason `stopped`, until `orbit resume`. Works on an idle loop too.
pub fn stop(args: &StopArgs) -> Result<u8> {
    let dir = fs::canonicalize(pick_loop(args.dir.as_deref())?)
        .map_err(|e| Error::io("cannot resolve the loop directory", e))?;
    println!("orbit: {}", stop_loop(&dir, &args.wait)?);
    Ok(0)
}

/// What `orbit stop` does to the loop directory `dir` (canonical), waiting up to `wait`
/// for a live runner: returns what it did, in words (`orbit serve`'s stop button says it).
pub fn stop_loop(dir: &Path, wait: &str) -> Result<String> {
    let dir = dir.to_path_buf();
    let deadline = Instant::now() + Duration::from_secs(parse_duration("--wait", wait)?);
    let stopped = stop_runner(&dir, wait, deadline)?;
    let _lock = match stopped {
        Some(_) => hold_lock_by(&dir, deadline)?,
        None => hold_lock(&dir)?,
    };
    let state = read_sealed(&dir)?;
    let said = match stopped {
        Some(pid) => format!("stopped the runner (pid {pid}); "),
        None => String::new(),
    };
    match (state.last_status, state.stop_reason) {
        (Status::Paused, StopReason::Stopped) => {
            return Ok(format!(
                "{said}the loop is already stopped; orbit resume lets it run again"
            ));
        }
        (Status::Done | Status::Aborted | Status::Stalled, _) => {
            return Ok(format!(
                "{said}the loop is {} ({}): it does not run again by itself, so there is nothing to hold",
                state.last_status, state.stop_reason
            ));
        }
        _ => {}
    }
    let before = (state.last_status, state.stop_reason);
    let state = write_state(
        &dir,
        State {
            last_status: Status::Paused,
            stop_reason: StopReason::Stopped,
            ..state
        },
        "orbit stop",
    )?;
    Ok(format!(
        "{said}the loop is stopped (was {} ({})), next iteration {}: every run exits 18 until orbit resume {}",
        before.0,
        before.1,
        state.next_iteration,
        dir.display()
    ))
}

/// `orbit resume`: lets a stopped loop run again. It becomes READY when it never ran,
/// PAUSED for a rate limit that has not lifted yet (it resumes by itself after RESUME_AT),
/// else CONTINUE; the gates of the next run (budget, circuit, iterations) apply as ever.
pub fn resume(args: &ResumeArgs) -> Result<u8> {
    let dir = fs::canonicalize(pick_loop(args.dir.as_deref())?)
        .map_err(|e| Error::io("cannot resolve the loop directory", e))?;
    println!("orbit: {}", resume_loop(&dir)?);
    Ok(0)
}

/// What `orbit resume` does to the loop directory `dir` (canonical): returns what it did,
/// in words.
pub fn resume_loop(dir: &Path) -> Result<String> {
    let dir = dir.to_path_buf();
    let _lock = hold_lock(&dir)?;
    let state = read_sealed(&dir)?;
    if (state.last_status, state.stop_reason) != (Status::Paused, StopReason::Stopped) {
        return Err(Error::Refused(format!(
            "the loop is {} ({}), not stopped: nothing to resume (orbit audit {} says what it needs)",
            state.last_status,
            state.stop_reason,
            dir.display()
        )));
    }
    let (status, reason) = if state.resume_at > fsx::now_epoch() {
        (Status::Paused, StopReason::RateLimit)
    } else if state.started_at == 0 && state.next_iteration == 1 {
        (Status::Ready, StopReason::None)
    } else {
        (Status::Continue, StopReason::None)
    };
    let state = write_state(
        &dir,
        State {
            last_status: status,
            stop_reason: reason,
            ..state
        },
        "orbit resume",
    )?;
    Ok(format!(
        "the loop is {} again, next iteration {}: the next run (orbit run, or its schedule) goes on",
        state.last_status, state.next_iteration
    ))
}
