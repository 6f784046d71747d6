//! `orbit logs`: what the agent said and what verify found, iteration by iteration, and
//! with `--follow` the live output of a running loop (`.run-tmp/agent.live`, which the
//! runner writes as the agent's output comes, a header line before each agent run).
//!
//! Read-only: it never takes the runner's lock (`ops::runner_pid` probes it). Text from
//! the agent and the checks reaches the terminal through [`Sanitizer`], which neutralises
//! control characters other than newline and tab, so no output can send the terminal an
//! escape sequence.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli::LogsArgs;
use crate::error::{Error, Result};
use crate::result_env::{self, ResultEnv};

/// The live view the runner writes, relative to the loop directory.
pub const LIVE_FILE: &str = ".run-tmp/agent.live";

/// How often `--follow` looks for new output, and for the runner.
const POLL: Duration = Duration::from_millis(200);
const RUNNER_POLL: Duration = Duration::from_secs(1);

/// Text for a terminal: newline and tab pass, every other control character (C0, DEL, C1)
/// and the bidi controls become visible (`^[`, `^?`, `<U+009B>`), invalid UTF-8 becomes
/// U+FFFD.
pub fn neutralise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            '\u{0}'..='\u{1f}' => {
                out.push('^');
                out.push(char::from(c as u8 + 0x40));
            }
            '\u{7f}' => out.push_str("^?"),
            '\u{80}'..='\u{9f}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => out.push_str(&format!("<U+{:04X}>", c as u32)),
            _ => out.push(c),
        }
    }
    out
}

/// A streaming [`neutralise`] over bytes: a UTF-8 character split between two reads is
/// kept until its end arrives.
#[derive(Debug, Default)]
pub struct Sanitizer {
    pending: Vec<u8>,
}

impl Sanitizer {
    /// The printable text of `bytes` (after what an earlier call kept back).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(&neutralise(s));
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    out.push_str(&neutralise(&String::from_utf8_lossy(good)));
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &bad[n..];
                        }
                        // An incomplete character at the end: wait for the rest of it.
                        None => {
                            rest = bad;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// What is left: an incomplete character that never got its end.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        if rest.is_empty() {
            String::new()
        } else {
            "\u{FFFD}".to_string()
        }
    }
}

/// The whole of `bytes`, neutralised.
pub fn clean(bytes: &[u8]) -> String {
    let mut s = Sanitizer::default();
    let mut out = s.push(bytes);
    out.push_str(&s.finish());
    out
}

/// The numbered iteration directories of a loop (`iterations/NNNNNN`), in order.
pub fn iterations(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = fs::read_dir(dir.join("iterations"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = (name.len() == 6 && name.bytes().all(|b| b.is_ascii_digit()))
                .then(|| name.parse::<u64>().ok())??;
            e.file_type().ok()?.is_dir().then_some((n, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// The header line of one iteration, from its result.env (through the one reader).
pub fn header(n: u64, result: Option<&ResultEnv>) -> String {
    let Some(r) = result else {
        return format!("=== iteration {n}: no result yet (running, or interrupted) ===");
    };
    let phase = if r.get("PHASE").is_empty() {
        "work"
    } else {
        r.get("PHASE")
    };
    let started = r
        .num("STARTED_AT")
        .map(crate::fsx::iso_utc)
        .unwrap_or_else(|| "?".to_string());
    let mut outcome = if r.get(result_env::VERDICT).is_empty() {
        "no verdict".to_string()
    } else {
        r.get(result_env::VERDICT).to_string()
    };
    let mut detail = Vec::new();
    if !r.get("AGENT_OUTCOME").is_empty() {
        detail.push(format!("agent {}", r.get("AGENT_OUTCOME")));
    }
    if !r.get("VERIFY").is_empty() {
        detail.push(format!("verify {}", r.get("VERIFY")));
    }
    if !detail.is_empty() {
        outcome = format!("{outcome} ({})", detail.join(", "));
    }
    format!(
        "=== iteration {n}, {phase}, attempt {}, started {started}: {outcome} ===",
        if r.get("ATTEMPTS").is_empty() {
            "?"
        } else {
            r.get("ATTEMPTS")
        },
    )
}

/// The logs of one iteration directory, in the order they were written: earlier attempts,
/// the agent's last attempt, confirmation runs, verify.
pub fn iteration_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut attempts: Vec<(u64, PathBuf)> = Vec::new();
    let mut confirms: Vec<(u64, PathBuf)> = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let num = |prefix: &str, suffix: &str| {
            name.strip_prefix(prefix)?
                .strip_suffix(suffix)?
                .parse::<u64>()
                .ok()
        };
        if let Some(k) = num("agent.attempt", ".log") {
            attempts.push((k, e.path()));
        } else if let Some(k) = num("confirm.", ".log") {
            confirms.push((k, e.path()));
        }
    }
    attempts.sort();
    confirms.sort();
    let mut out: Vec<(String, PathBuf)> = attempts
        .into_iter()
        .map(|(k, p)| (format!("agent, attempt {k}"), p))
        .collect();
    out.push(("agent".to_string(), dir.join("agent.log")));
    out.extend(
        confirms
            .into_iter()
            .map(|(k, p)| (format!("confirmation run {k}"), p)),
    );
    out.push(("verify".to_string(), dir.join("verify.log")));
    out
}

/// Writes one iteration (or the wrapup run): its header, then each log under a sub-header.
fn print_iteration(out: &mut impl Write, title: &str, dir: &Path) -> io::Result<()> {
    writeln!(out, "{}", neutralise(title))?;
    let shown = |p: &Path| {
        let rel = p.components().rev().take(3).collect::<Vec<_>>();
        rel.iter().rev().collect::<PathBuf>()
    };
    for (what, path) in iteration_files(dir) {
        // Never through a symlink: the loop directory holds none, and the agent may write.
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        writeln!(
            out,
            "--- {what} ({}) ---",
            neutralise(&shown(&path).display().to_string())
        )?;
        let text = clean(&fs::read(&path).unwrap_or_default());
        out.write_all(text.as_bytes())?;
        if !text.is_empty() && !text.ends_with('\n') {
            writeln!(out)?;
        }
    }
    Ok(())
}

/// Writes the chosen iterations of a loop: `only` one, else the last `last`.
pub fn print_history(
    out: &mut impl Write,
    dir: &Path,
    only: Option<u64>,
    last: usize,
) -> Result<()> {
    let all = iterations(dir);
    let chosen: Vec<&(u64, PathBuf)> = match only {
        Some(n) => {
            let found: Vec<_> = all.iter().filter(|(i, _)| *i == n).collect();
            if found.is_empty() {
                return Err(Error::Usage(format!(
                    "{} has no iteration {n} (iterations: {})",
                    dir.display(),
                    match (all.first(), all.last()) {
                        (Some(a), Some(b)) => format!("{} to {}", a.0, b.0),
                        _ => "none yet".to_string(),
                    }
                )));
            }
            found
        }
        None => all.iter().skip(all.len().saturating_sub(last)).collect(),
    };
    let io_err = |e| Error::io("cannot write the logs", e);
    if chosen.is_empty() {
        writeln!(out, "orbit: {} has run no iteration yet", dir.display()).map_err(io_err)?;
    }
    for (n, path) in &chosen {
        let result = fs::read(path.join("result.env"))
            .ok()
            .and_then(|b| result_env::parse(&b).ok());
        print_iteration(out, &header(*n, result.as_ref()), path).map_err(io_err)?;
    }
    let wrapup = dir.join("iterations/wrapup");
    if only.is_none() && wrapup.join("agent.log").is_file() {
        print_iteration(
            out,
            "=== wrapup (the run after the last iteration) ===",
            &wrapup,
        )
        .map_err(io_err)?;
    }
    Ok(())
}

/// The file being followed: kept open, so a replaced agent.live (a new run) is told apart
/// by its inode even when the old one is gone (`orbit serve`'s live view follows it too).
pub struct Followed {
    file: File,
    ino: u64,
    dev: u64,
    offset: u64,
}

impl Followed {
    /// The regular file at `path` (never through a symlink), read from its start.
    pub fn open(path: &Path) -> Option<Followed> {
        // Refuse a symlink: open the path only when it is a regular file.
        if !fs::symlink_metadata(path).ok()?.is_file() {
            return None;
        }
        Followed::from_file(File::open(path).ok()?)
    }

    /// A file already opened (by a reader that opened it its own safe way), when it is a
    /// regular file.
    pub fn from_file(file: File) -> Option<Followed> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        Some(Followed {
            file,
            ino: meta.ino(),
            dev: meta.dev(),
            offset: 0,
        })
    }

    /// Starts reading at most `max` bytes before the file's end (the tail of a long run).
    pub fn skip_to_tail(&mut self, max: u64) {
        let len = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        self.offset = len.saturating_sub(max);
    }

    /// Whether `path` is no longer this file, or the file was cut shorter than was read.
    pub fn replaced(&self, path: &Path) -> bool {
        match fs::symlink_metadata(path) {
            Ok(m) => m.ino() != self.ino || m.dev() != self.dev || m.len() < self.offset,
            Err(_) => false,
        }
    }

    /// Everything written since the last read.
    pub fn read_new(&mut self) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.file.seek(SeekFrom::Start(self.offset))?;
        (&self.file).take(1 << 20).read_to_end(&mut buf)?;
        self.offset += buf.len() as u64;
        Ok(buf)
    }
}

/// Follows agent.live while a runner holds the loop: prints the output as it is written,
/// across agent runs and iterations (a new file starts from its beginning), until the
/// runner lets the lock go.
pub fn follow(out: &mut impl Write, dir: &Path, wait: Duration) -> Result<u8> {
    let io_err = |e| Error::io("cannot write the logs", e);
    let live = dir.join(LIVE_FILE);
    if crate::ops::runner_pid(dir).is_none() {
        if wait.is_zero() {
            print_history(out, dir, None, 3)?;
            writeln!(
                out,
                "orbit: no runner holds {}: nothing to follow",
                dir.display()
            )
            .map_err(io_err)?;
            return Ok(0);
        }
        writeln!(out, "orbit: waiting for a runner of {}", dir.display()).map_err(io_err)?;
        out.flush().map_err(io_err)?;
        let t0 = Instant::now();
        while crate::ops::runner_pid(dir).is_none() {
            if t0.elapsed() >= wait {
                writeln!(
                    out,
                    "orbit: no runner started within {}s: nothing to follow",
                    wait.as_secs()
                )
                .map_err(io_err)?;
                return Ok(0);
            }
            std::thread::sleep(POLL);
        }
    }
    let mut sanitizer = Sanitizer::default();
    let mut cur: Option<Followed> = None;
    let mut last_probe = Instant::now();
    let mut runner_gone = false;
    loop {
        if cur.as_ref().is_none_or(|f| f.replaced(&live))
            && let Some(f) = Followed::open(&live)
        {
            if cur.is_some() {
                out.write_all(sanitizer.finish().as_bytes())
                    .map_err(io_err)?;
            }
            cur = Some(f);
        }
        if let Some(f) = cur.as_mut() {
            loop {
                let chunk = f
                    .read_new()
                    .map_err(|e| Error::io(format!("cannot read {}", live.display()), e))?;
                if chunk.is_empty() {
                    break;
                }
                out.write_all(sanitizer.push(&chunk).as_bytes())
                    .map_err(io_err)?;
            }
            out.flush().map_err(io_err)?;
        }
        if runner_gone {
            break;
        }
        if last_probe.elapsed() >= RUNNER_POLL {
            last_probe = Instant::now();
            // One more pass after the runner is gone: what it wrote last is read too.
            runner_gone = crate::ops::runner_pid(dir).is_none();
            if runner_gone {
                continue;
            }
        }
        std::thread::sleep(POLL);
    }
    out.write_all(sanitizer.finish().as_bytes())
        .map_err(io_err)?;
    let end = match crate::state::State::parse_file(&dir.join("state.env")) {
        Ok(s) => format!(
            "orbit: the runner has ended: {} ({}), next iteration {}",
            s.last_status.as_str(),
            s.stop_reason.as_str(),
            s.next_iteration
        ),
        Err(_) => "orbit: the runner has ended".to_string(),
    };
    writeln!(out, "{end}").map_err(io_err)?;
    Ok(0)
}

/// `orbit logs`.
pub fn run(args: &LogsArgs) -> Result<u8> {
    let dir = crate::locate::pick_loop(args.dir.as_deref())?;
    let dir = fs::canonicalize(&dir).unwrap_or(dir);
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let done = if args.follow {
        let wait = crate::goal::parse_duration("--wait", &args.wait)?;
        follow(&mut out, &dir, Duration::from_secs(wait))
    } else {
        print_history(&mut out, &dir, args.iteration, args.last.max(1))
            .map(|()| 0)
            .and_then(|c| {
                out.flush()
                    .map_err(|e| Error::io("cannot write the logs", e))?;
                Ok(c)
            })
    };
    match done {
        // A reader that went away (`orbit logs | head`) is not an error.
        Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::BrokenPipe => Ok(0),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(
            neutralise("a\x1b[31mred\x07\r\n\tb\x7f"),
            "a^[[31mred^G^M\n\tb^?"
        );
        assert_eq!(neutralise("x\u{9b}2Jy\u{202e}z"), "x<U+009B>2Jy<U+202E>z");
    }

    #[test]
    fn a_character_split_between_reads_is_kept_whole() {
        let mut s = Sanitizer::default();
        let bytes = "é\x1b".as_bytes();
        assert_eq!(s.push(&bytes[..1]), "");
        assert_eq!(s.push(&bytes[1..]), "é^[");
        assert_eq!(s.push(b"\xff"), "\u{FFFD}");
        assert_eq!(s.push(b"\xe2\x82"), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }

    #[test]
    fn the_header_says_what_result_env_says() {
        let r = result_env::parse(
            b"ITERATION=3\nSTARTED_AT=0\nPHASE=work\nAGENT_OUTCOME=ok\nATTEMPTS=2\nVERIFY=fail\nVERDICT=CONTINUE\n",
        )
        .unwrap();
        assert_eq!(
            header(3, Some(&r)),
            "=== iteration 3, work, attempt 2, started 1970-01-01T00:00:00Z: CONTINUE (agent ok, verify fail) ==="
        );
        assert!(header(4, None).contains("no result yet"));
    }
}
