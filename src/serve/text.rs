//! What the server reads of a loop, and how it becomes text a page can hold.
//!
//! Files are opened below the loop directory one component at a time (`openat` with
//! `O_NOFOLLOW`), so no symlink anywhere below the loop directory leads out of it, and never
//! waiting on a FIFO; only a regular file is read. Their text is cut to its tail and to lines
//! of [`LINE_MAX`] bytes, neutralised as `orbit logs` does (control characters and bidi
//! controls made visible) and HTML-escaped: an agent's output is text, whatever it holds.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::logs::Sanitizer;

/// The longest line shown: past it, the rest of the line is cut (and said so).
pub const LINE_MAX: usize = 4096;

/// How much of a log's end a page shows.
pub const TAIL_MAX: u64 = 256 * 1024;

/// Opens `rel` (names of plain components, never `..`) below the loop directory `dir` (a
/// canonical path): each directory without following a symlink, the file without following
/// one nor waiting on a FIFO; `None` unless it is a regular file.
pub fn open_in(dir: &Path, rel: &[&str]) -> Option<File> {
    let (last, dirs) = rel.split_last()?;
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    let dflags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: open(2) on a NUL-terminated path; the descriptor is owned at once.
    let fd = unsafe { libc::open(c.as_ptr(), dflags) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let mut at = unsafe { OwnedFd::from_raw_fd(fd) };
    for name in dirs {
        at = open_at(&at, name, dflags | libc::O_NOFOLLOW)?;
    }
    let fflags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let file = File::from(open_at(&at, last, fflags)?);
    file.metadata().ok().filter(|m| m.is_file())?;
    Some(file)
}

/// openat(2) of one plain component below `at`.
fn open_at(at: &OwnedFd, name: &str, flags: libc::c_int) -> Option<OwnedFd> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return None;
    }
    let c = CString::new(name).ok()?;
    use std::os::fd::AsRawFd;
    // SAFETY: openat(2) relative to a descriptor we own, on a NUL-terminated name.
    let fd = unsafe { libc::openat(at.as_raw_fd(), c.as_ptr(), flags) };
    // SAFETY: a descriptor openat just returned, owned by nothing else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Cuts lines at [`LINE_MAX`] bytes as a stream passes: a line split between reads is
/// measured as one, and what is cut is said once per line.
#[derive(Debug, Default)]
pub struct LineCut {
    /// Bytes of the current line kept so far.
    col: usize,
    /// The current line is past the limit: drop until its end.
    cutting: bool,
}

impl LineCut {
    /// A cutter that drops everything up to the first newline (a read that starts in the
    /// middle of a file).
    pub fn mid_line() -> LineCut {
        LineCut {
            col: LINE_MAX,
            cutting: true,
        }
    }

    /// What is kept of `bytes`.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len().min(LINE_MAX * 4));
        for chunk in bytes.split_inclusive(|b| *b == b'\n') {
            let ends = chunk.ends_with(b"\n");
            let body = if ends {
                &chunk[..chunk.len() - 1]
            } else {
                chunk
            };
            if !self.cutting {
                let room = LINE_MAX - self.col;
                if body.len() <= room {
                    out.extend_from_slice(body);
                    self.col += body.len();
                } else {
                    out.extend_from_slice(&body[..room]);
                    out.extend_from_slice(
                        format!(" [orbit: line cut at {LINE_MAX} bytes]").as_bytes(),
                    );
                    self.col = LINE_MAX;
                    self.cutting = true;
                }
            }
            if ends {
                out.push(b'\n');
                self.col = 0;
                self.cutting = false;
            }
        }
        out
    }
}

/// A whole piece of a log as text: lines cut, neutralised (not yet escaped).
pub fn clean(bytes: &[u8], mid_line: bool) -> String {
    let mut cut = if mid_line {
        LineCut::mid_line()
    } else {
        LineCut::default()
    };
    let mut s = Sanitizer::default();
    let mut out = s.push(&cut.push(bytes));
    out.push_str(&s.finish());
    out
}

/// The last [`TAIL_MAX`] bytes of a file below the loop directory as text, and how many
/// bytes before them were left out; `None` when it is not a regular file there.
pub fn tail(dir: &Path, rel: &[&str]) -> Option<(String, u64)> {
    let mut f = open_in(dir, rel)?;
    let len = f.metadata().ok()?.len();
    let start = len.saturating_sub(TAIL_MAX);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.take(TAIL_MAX).read_to_end(&mut buf).ok()?;
    Some((clean(&buf, start > 0), start))
}

/// A log's tail as the HTML of a `<pre>`: escaped, with a line saying what was left out.
pub fn tail_html(dir: &Path, rel: &[&str]) -> String {
    match tail(dir, rel) {
        Some((text, 0)) => format!("<pre>{}</pre>", crate::report::esc(&text)),
        Some((text, skipped)) => format!(
            "<p class=\"cut\">the first {skipped} bytes are left out: the last {TAIL_MAX} are shown</p><pre>{}</pre>",
            crate::report::esc(&text)
        ),
        None => "<p>not there (or not a regular file)</p>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_across_reads() {
        let mut c = LineCut::default();
        let a = c.push(&vec![b'a'; LINE_MAX - 1]);
        assert_eq!(a.len(), LINE_MAX - 1);
        let b = c.push(b"bcdef");
        assert!(String::from_utf8_lossy(&b).starts_with("b [orbit: line cut"));
        assert!(c.push(&vec![b'x'; 1 << 20]).is_empty());
        assert_eq!(c.push(b"x\nnext\n"), b"\nnext\n");
    }

    #[test]
    fn a_read_from_the_middle_starts_at_the_next_line() {
        assert_eq!(clean(b"tail of a line\nwhole\n", true), "\nwhole\n");
        assert_eq!(clean(b"\x1b[2Jhi\n", false), "^[[2Jhi\n");
    }

    #[test]
    fn files_are_opened_below_the_loop_only() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().canonicalize().unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/f"), "in").unwrap();
        std::fs::write(dir.join("secret"), "out").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), dir.join("sub/link")).unwrap();
        std::os::unix::fs::symlink(dir.join("sub"), dir.join("linkdir")).unwrap();
        assert!(open_in(&dir, &["sub", "f"]).is_some());
        assert!(open_in(&dir, &["sub", "link"]).is_none());
        assert!(open_in(&dir, &["linkdir", "f"]).is_none());
        assert!(open_in(&dir, &["sub", "..", "secret"]).is_none());
        assert!(open_in(&dir, &["sub"]).is_none(), "a directory is no file");
    }
}
