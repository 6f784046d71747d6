//! Reading only what an audit needs: the tail of a file, found by seeking from the end, so a
//! 1 GB runner.log or a 100,000-iteration events.jsonl costs the same as a small one.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// Line numbers are counted exactly for prefixes up to this size; beyond it a window's
/// lines are numbered from the end of the file.
const COUNT_LIMIT: u64 = 64 << 20;

/// The last whole lines of a file.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// The bytes from the first whole line in the window to the end of the file.
    pub bytes: Vec<u8>,
    /// Whether the window starts at the beginning of the file.
    pub whole: bool,
    /// The 1-based line number of the window's first line, when known.
    pub first_line: Option<usize>,
    /// The number of lines in the window (a last line without newline counts).
    pub lines: usize,
}

impl Window {
    /// How evidence names line `i` (0-based) of the window: `file:N`, or `file:end-K` when
    /// the file is too large to count its lines.
    pub fn evidence(&self, file: &str, i: usize) -> String {
        match self.first_line {
            Some(first) => format!("{file}:{}", first + i),
            None => format!("{file}:end-{}", self.lines.saturating_sub(i + 1)),
        }
    }

    /// Keeps only the last `max` lines.
    pub fn keep_last_lines(&mut self, max: usize) {
        if self.lines <= max {
            return;
        }
        let drop = self.lines - max;
        let mut cut = 0usize;
        for _ in 0..drop {
            cut += self.bytes[cut..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(self.bytes.len() - cut, |p| p + 1);
        }
        self.bytes.drain(..cut);
        self.lines -= drop;
        self.first_line = self.first_line.map(|f| f + drop);
        self.whole = false;
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    crate::fsx::open_regular(path).map_err(|e| match e {
        crate::fsx::Unreadable::Io(e) => e,
        crate::fsx::Unreadable::Missing => std::io::ErrorKind::NotFound.into(),
        crate::fsx::Unreadable::NotRegular(what) => std::io::Error::other(what.to_string()),
    })
}

/// Reads at most the last `max_bytes` of `path`, starting at a line boundary. Only a
/// regular file is read (`fsx::open_regular`): a FIFO or a symlink in its place is an error.
/// A last line longer than `max_bytes` leaves the window empty (see [`last_line`]).
pub fn read_tail(path: &Path, max_bytes: u64) -> std::io::Result<Window> {
    read_tail_until(path, u64::MAX, max_bytes)
}

/// The file's last line: where it starts, how many bytes it holds (its newline included),
/// and whether it ends in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastLine {
    pub start: u64,
    pub len: u64,
    pub terminated: bool,
}

/// Finds the last line of `path` by reading backwards from the end in fixed blocks: the
/// memory it takes does not grow with the line, however long. `None` for an empty file.
pub fn last_line(path: &Path) -> std::io::Result<Option<LastLine>> {
    let mut f = open(path)?;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    let terminated = last[0] == b'\n';
    // A newline before the last byte ends the line before the last one.
    let mut end = len - 1;
    let mut buf = vec![0u8; 1 << 16];
    let mut start = 0;
    while end > 0 {
        let n = end.min(buf.len() as u64);
        let from = end - n;
        f.seek(SeekFrom::Start(from))?;
        let block = &mut buf[..n as usize];
        f.read_exact(block)?;
        if let Some(p) = block.iter().rposition(|b| *b == b'\n') {
            start = from + p as u64 + 1;
            break;
        }
        end = from;
    }
    Ok(Some(LastLine {
        start,
        len: len - start,
        terminated,
    }))
}

/// [`read_tail`] of the file's first `end` bytes (all of it when shorter): the whole lines
/// before a line too long to read.
pub fn read_tail_until(path: &Path, end: u64, max_bytes: u64) -> std::io::Result<Window> {
    let mut f = open(path)?;
    let len = f.metadata()?.len().min(end);
    let start = len.saturating_sub(max_bytes);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    (&mut f).take(len - start).read_to_end(&mut bytes)?;
    let mut skip = 0usize;
    if start > 0 {
        // Unless the byte before the window is a newline, the first line is partial.
        let mut prev = [0u8; 1];
        f.seek(SeekFrom::Start(start - 1))?;
        f.read_exact(&mut prev)?;
        if prev[0] != b'\n' {
            skip = match bytes.iter().position(|b| *b == b'\n') {
                Some(p) => p + 1,
                None => bytes.len(),
            };
        }
    }
    bytes.drain(..skip);
    let offset = start + skip as u64;
    let first_line = if offset == 0 {
        Some(1)
    } else if offset <= COUNT_LIMIT {
        f.seek(SeekFrom::Start(0))?;
        Some(count_lines(&mut f, offset)? + 1)
    } else {
        None
    };
    let lines = bytes.split(|b| *b == b'\n').count()
        - usize::from(bytes.ends_with(b"\n") || bytes.is_empty());
    Ok(Window {
        bytes,
        whole: offset == 0,
        first_line,
        lines,
    })
}

/// Newlines in the first `limit` bytes of `f`, streamed with a fixed buffer.
fn count_lines(f: &mut File, limit: u64) -> std::io::Result<usize> {
    let mut r = BufReader::with_capacity(1 << 16, f.take(limit));
    let mut n = 0usize;
    loop {
        let read = r.skip_until(b'\n')?;
        if read == 0 {
            return Ok(n);
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn windows_start_at_a_line_and_know_their_line_numbers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "one\ntwo\nthree\nfour").unwrap();
        let w = read_tail(&p, 9).unwrap();
        assert_eq!(w.bytes, b"four");
        assert_eq!(w.first_line, Some(4));
        assert_eq!(w.lines, 1);
        let w = read_tail(&p, 11).unwrap();
        assert_eq!(w.bytes, b"three\nfour");
        assert_eq!(w.evidence("f", 1), "f:4");
        let w = read_tail(&p, 100).unwrap();
        assert!(w.whole);
        assert_eq!(w.lines, 4);
    }

    #[test]
    fn a_window_keeps_its_last_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "one\ntwo\nthree\nfour").unwrap();
        let mut w = read_tail(&p, 100).unwrap();
        w.keep_last_lines(9);
        assert!(w.whole);
        w.keep_last_lines(2);
        assert_eq!(w.bytes, b"three\nfour");
        assert_eq!((w.lines, w.whole, w.first_line), (2, false, Some(3)));
        assert_eq!(w.evidence("f", 1), "f:4");
    }

    #[test]
    fn the_last_line_is_found_however_long_and_the_lines_before_it_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let long = "x".repeat(200_000);
        std::fs::write(&p, format!("one\ntwo\n{long}")).unwrap();
        let last = last_line(&p).unwrap().unwrap();
        assert_eq!(
            last,
            LastLine {
                start: 8,
                len: 200_000,
                terminated: false
            }
        );
        assert!(read_tail(&p, 1000).unwrap().bytes.is_empty());
        let w = read_tail_until(&p, last.start, 1000).unwrap();
        assert_eq!(
            (w.bytes.as_slice(), w.lines, w.whole),
            (&b"one\ntwo\n"[..], 2, true)
        );
        std::fs::write(&p, format!("{long}\n")).unwrap();
        assert_eq!(
            last_line(&p).unwrap(),
            Some(LastLine {
                start: 0,
                len: 200_001,
                terminated: true
            })
        );
        std::fs::write(&p, "").unwrap();
        assert_eq!(last_line(&p).unwrap(), None);
    }

    proptest! {
        #[test]
        fn any_window_is_a_suffix_at_a_line_start(text in "[a-c\n]{0,60}", max in 0u64..70) {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("f");
            std::fs::write(&p, &text).unwrap();
            let w = read_tail(&p, max).unwrap();
            let s = String::from_utf8(w.bytes.clone()).unwrap();
            prop_assert!(text.ends_with(&s));
            if s.is_empty() {
                // The window held only part of the last line: nothing whole to read.
                return Ok(());
            }
            let before = &text[..text.len() - s.len()];
            prop_assert!(before.is_empty() || before.ends_with('\n'));
            prop_assert_eq!(w.first_line, Some(before.matches('\n').count() + 1));
        }
    }
}
