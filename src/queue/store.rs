//! Where the queue keeps what it knows: the task files, `queue.json` (written atomically,
//! tmp + rename), the pinned copies of running tasks' files, and the lock of the one
//! `orbit queue run`.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::task::{ParseError, Task};
use crate::error::{Error, Result};
use crate::fsx;

/// The queue of one repository: its directory and files.
#[derive(Debug, Clone)]
pub struct Queue {
    pub repo: PathBuf,
    pub dir: PathBuf,
}

/// A task file as found: its name, bytes, and the task or why it does not parse.
#[derive(Debug, Clone)]
pub struct Found {
    pub name: String,
    pub path: PathBuf,
    pub sha256: String,
    pub task: std::result::Result<Task, ParseError>,
}

/// The attempt a task is running (its loop, and the file's sha256 when it started).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Running {
    pub attempt: u32,
    pub loop_dir: String,
    pub branch: String,
    pub base: String,
    pub pinned_sha256: String,
    pub started_at: u64,
    /// The engine the attempt runs on (the queue's key for it: a custom engine with its
    /// command).
    #[serde(default)]
    pub engine: String,
    /// What the queue's spend cap held for the attempt when it started.
    #[serde(default)]
    pub estimate_microusd: u64,
}

/// What the queue records of one task beyond its file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TaskState {
    /// The order the queue first saw the task in (its age).
    pub seq: u64,
    pub running: Option<Running>,
    /// The last attempt's loop branch.
    pub branch: Option<String>,
    pub merged_commit: Option<String>,
    /// For a task done with no change of its own: the integration branch's commit its
    /// verifier passed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_on: Option<String>,
    /// The last attempt's verdict, in words (`done`, or why it failed).
    pub last_verdict: Option<String>,
    /// What every attempt's loop spent, in micro-dollars.
    pub cost_microusd: u64,
    /// The task file's text an attempt's end wrote, until it is written (a crash between
    /// the two records is finished from here by the next run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
}

/// What the finished attempts on one engine spent (the spend cap's estimate).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EngineSpend {
    pub attempts: u64,
    pub microusd: u64,
}

/// `queue.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct State {
    pub version: u32,
    /// The queue's name: the branch the integration branch was made from.
    pub name: Option<String>,
    /// `orbit/queue/<name>`.
    pub integration_branch: Option<String>,
    pub next_seq: u64,
    pub tasks: BTreeMap<String, TaskState>,
    /// The engines rate-limited: when each limit lifts (epoch seconds).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub paused: BTreeMap<String, u64>,
    /// What the finished attempts spent, by engine (the spend cap's estimate).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spend: BTreeMap<String, EngineSpend>,
}

impl Queue {
    /// The queue of the repository around the current directory.
    pub fn here() -> Result<Queue> {
        let cwd = std::env::current_dir()
            .map_err(|e| Error::io("cannot read the current directory", e))?;
        let repo = crate::locate::repo_root(&cwd)?;
        Ok(Queue {
            dir: repo.join(".orbit").join("queue"),
            repo,
        })
    }

    pub fn task_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.md"))
    }

    pub fn state_path(&self) -> PathBuf {
        self.dir.join("queue.json")
    }

    pub fn pinned_path(&self, name: &str) -> PathBuf {
        self.dir.join("pinned").join(format!("{name}.md"))
    }

    pub fn work_dir(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// Every task file, sorted by name, each parsed (or why not).
    pub fn tasks(&self) -> Result<Vec<Found>> {
        let mut out = Vec::new();
        let rd = match fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io(format!("cannot read {}", self.dir.display()), e)),
        };
        for entry in rd.filter_map(|e| e.ok()) {
            let path = entry.path();
            let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".md"))
            else {
                continue;
            };
            out.push(self.read_task(name, &path));
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// One task file, read and parsed.
    pub fn read_task(&self, name: &str, path: &Path) -> Found {
        let (sha256, task) = match fsx::read_regular(path) {
            Ok(bytes) => (
                fsx::sha256_hex(&bytes),
                match String::from_utf8(bytes) {
                    Ok(text) if super::task::is_task_name(name) => Task::parse(&text, 1),
                    Ok(_) => Err(ParseError {
                        line: 1,
                        reason: "the file's name is no task name (lowercase letters, digits and '-', at most 32): rename it".into(),
                    }),
                    Err(_) => Err(ParseError {
                        line: 1,
                        reason: "not UTF-8 text".into(),
                    }),
                },
            ),
            Err(e) => (
                String::new(),
                Err(ParseError {
                    line: 1,
                    reason: e.to_string(),
                }),
            ),
        };
        Found {
            name: name.to_string(),
            path: path.to_path_buf(),
            sha256,
            task,
        }
    }

    /// Writes a task file atomically; returns the sha256 of what was written.
    pub fn write_task(&self, name: &str, task: &Task) -> Result<String> {
        fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io(format!("cannot create {}", self.dir.display()), e))?;
        let text = task.print();
        fsx::write_atomic(&self.task_path(name), text.as_bytes())?;
        Ok(fsx::sha256_hex(text.as_bytes()))
    }

    pub fn load_state(&self) -> Result<State> {
        match fsx::read_regular_opt(&self.state_path())? {
            None => Ok(State {
                version: 1,
                ..State::default()
            }),
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                Error::Refused(format!(
                    "{} does not parse ({e}): restore it from the queue's last run, or remove it to start the queue's bookkeeping over",
                    self.state_path().display()
                ))
            }),
        }
    }

    pub fn save_state(&self, state: &State) -> Result<()> {
        fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io(format!("cannot create {}", self.dir.display()), e))?;
        let mut text = serde_json::to_string_pretty(state).expect("the state serializes");
        text.push('\n');
        fsx::write_atomic(&self.state_path(), text.as_bytes())
    }
}

impl State {
    /// The task's record, made (with the next age) when the queue first sees it.
    pub fn task(&mut self, name: &str) -> &mut TaskState {
        if !self.tasks.contains_key(name) {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.tasks.insert(
                name.to_string(),
                TaskState {
                    seq,
                    ..TaskState::default()
                },
            );
        }
        self.tasks.get_mut(name).expect("just made")
    }
}

/// The lock of the one `orbit queue run` of a queue: an flock on `queue.lock`, released
/// when the process ends however it ends (a lock of a dead process is no lock).
pub struct Lock {
    _file: File,
}

impl Lock {
    /// Takes the queue's lock, or says who holds it.
    pub fn take(q: &Queue) -> Result<std::result::Result<Lock, String>> {
        fs::create_dir_all(&q.dir)
            .map_err(|e| Error::io(format!("cannot create {}", q.dir.display()), e))?;
        let path = q.dir.join("queue.lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        if file.try_lock().is_err() {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Ok(Err(if holder.is_empty() {
                "another orbit queue run".to_string()
            } else {
                format!("orbit queue run (pid {holder})")
            }));
        }
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = writeln!(file, "{}", std::process::id());
        let _ = file.flush();
        Ok(Ok(Lock { _file: file }))
    }
}
