//! Small filesystem helpers: atomic writes, sha256, and reads of the loop's files that
//! can never block.
//!
//! Every read of a file of a loop directory (or of the workspace's `.orbit-agent/`) by
//! audit, status, report and recover goes through [`open_regular`]: anything there may
//! have been replaced by the agent or a stray process, and a FIFO read the plain way waits
//! forever for a writer. The file is opened with `O_NONBLOCK | O_NOFOLLOW` (so neither a
//! FIFO nor a symlink is followed or waited on, whatever was swapped in after a check) and
//! read only when the descriptor is a regular file.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Lowercase hex sha256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    let digest = Sha256::digest(data);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Lowercase hex sha256 of what `reader` yields, read in 64 KiB pieces: a large file (the
/// orbit binary a loop pins) is hashed without being held in memory.
pub fn sha256_hex_of(mut reader: impl Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let mut out = String::with_capacity(64);
    for b in hasher.finalize().iter() {
        out.push_str(&format!("{b:02x}"));
    }
    Ok(out)
}

/// Writes `data` to `path` atomically: a temp file in the same directory, fsync, rename,
/// fsync of the directory. A crash leaves either the old file or the new one, never a mix.
/// Never follows a symlink at `path`: the rename replaces the link itself.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic_opt(path, data, None)
}

/// [`write_atomic`] with the new file's mode set before it takes the old one's place (a
/// user's file rewritten keeps its mode: never readable by others for a moment).
pub fn write_atomic_mode(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    write_atomic_opt(path, data, Some(mode))
}

fn write_atomic_opt(path: &Path, data: &[u8], mode: Option<u32>) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| Error::path(path, "not a file path"))?
        .to_string_lossy()
        .into_owned();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        if mode.is_some() {
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        }
        let mut f = opts.open(&tmp)?;
        if let Some(m) = mode {
            f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(m))?;
        }
        f.write_all(data)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(format!("cannot write {}", path.display()), e));
    }
    Ok(())
}

/// Writes a new file inside a directory that is not visible yet (a temp directory that will
/// be renamed into place): the data is synced, but not the directory, which the caller
/// syncs once with [`sync_dir`] after the last file.
pub fn write_new(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let result = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)?;
        f.write_all(data)?;
        f.sync_data()
    })();
    result.map_err(|e| Error::io(format!("cannot write {}", path.display()), e))
}

/// Syncs a directory's entries (best effort where the platform cannot).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Like [`write_atomic`], and marks the file executable.
pub fn write_atomic_exec(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic(path, data)?;
    set_mode(path, 0o755)
}

pub fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io(format!("cannot chmod {}", path.display()), e))
}

/// Reads a file, naming it in the error. For a file the user names (a goal file may be a
/// pipe); the loop's own files are read with [`read_regular`].
pub fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| Error::io(format!("cannot read {}", path.display()), e))
}

/// What a path of the loop is when it is not a regular file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRegular {
    /// A symlink, with where it points.
    Symlink(String),
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Directory,
    Other,
}

impl NotRegular {
    fn of(t: fs::FileType, path: &Path) -> Option<NotRegular> {
        use std::os::unix::fs::FileTypeExt;
        Some(if t.is_file() {
            return None;
        } else if t.is_symlink() {
            NotRegular::Symlink(
                fs::read_link(path)
                    .map(|l| l.display().to_string())
                    .unwrap_or_default(),
            )
        } else if t.is_fifo() {
            NotRegular::Fifo
        } else if t.is_socket() {
            NotRegular::Socket
        } else if t.is_char_device() {
            NotRegular::CharDevice
        } else if t.is_block_device() {
            NotRegular::BlockDevice
        } else if t.is_dir() {
            NotRegular::Directory
        } else {
            NotRegular::Other
        })
    }
}

impl fmt::Display for NotRegular {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotRegular::Symlink(to) if to.is_empty() => f.write_str("a symlink"),
            NotRegular::Symlink(to) => write!(f, "a symlink to {}", to.escape_debug()),
            NotRegular::Fifo => f.write_str("a FIFO (named pipe)"),
            NotRegular::Socket => f.write_str("a socket"),
            NotRegular::CharDevice => f.write_str("a character device"),
            NotRegular::BlockDevice => f.write_str("a block device"),
            NotRegular::Directory => f.write_str("a directory"),
            NotRegular::Other => f.write_str("not a regular file"),
        }
    }
}

/// Why a loop file could not be read.
#[derive(Debug)]
pub enum Unreadable {
    Missing,
    /// It is there, and is no regular file: never read.
    NotRegular(NotRegular),
    Io(std::io::Error),
}

impl Unreadable {
    /// The error of a command that needs the file.
    pub fn into_error(self, path: &Path) -> Error {
        match self {
            Unreadable::Missing => Error::io(
                format!("cannot read {}", path.display()),
                std::io::ErrorKind::NotFound.into(),
            ),
            Unreadable::NotRegular(what) => Error::Refused(not_regular_message(path, &what)),
            Unreadable::Io(e) => Error::io(format!("cannot read {}", path.display()), e),
        }
    }
}

/// The refusal for a loop file that is not a regular file: what it is, and what to do.
pub fn not_regular_message(path: &Path, what: &NotRegular) -> String {
    format!(
        "{} is {what}, not a regular file: nothing of a loop may be one (loop_tamper), and it is never read; remove it, then orbit recover",
        path.display()
    )
}

/// What `path` is when it exists and is not a regular file, without opening it (and
/// without following a symlink).
pub fn not_regular(path: &Path) -> Option<NotRegular> {
    let meta = fs::symlink_metadata(path).ok()?;
    NotRegular::of(meta.file_type(), path)
}

/// Opens a loop file for reading, only when it is a regular file: never follows a symlink
/// at `path`, never waits on a FIFO or a device (`O_NONBLOCK`), and checks what it opened.
pub fn open_regular(path: &Path) -> std::result::Result<File, Unreadable> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unreadable::Missing),
        // A symlink (ELOOP), a socket (ENXIO), ...: say what is there.
        Err(e) => {
            return Err(match not_regular(path) {
                Some(what) => Unreadable::NotRegular(what),
                None => Unreadable::Io(e),
            });
        }
    };
    let meta = file.metadata().map_err(Unreadable::Io)?;
    match NotRegular::of(meta.file_type(), path) {
        None => Ok(file),
        Some(what) => Err(Unreadable::NotRegular(what)),
    }
}

/// Opens (creating it when missing) a loop file to append to or to lock: never through a
/// symlink, never waiting on a FIFO (`O_NONBLOCK`: with no reader, opening one fails at
/// once), and only a regular file.
pub fn open_append_regular(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match not_regular(path) {
            Some(what) => Error::Refused(not_regular_message(path, &what)),
            None => Error::io(format!("cannot open {}", path.display()), e),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
    match NotRegular::of(meta.file_type(), path) {
        None => Ok(file),
        Some(what) => Err(Error::Refused(not_regular_message(path, &what))),
    }
}

/// Reads a loop file through [`open_regular`].
pub fn read_loop_file(path: &Path) -> std::result::Result<Vec<u8>, Unreadable> {
    let mut f = open_regular(path)?;
    let mut out = Vec::new();
    f.read_to_end(&mut out).map_err(Unreadable::Io)?;
    Ok(out)
}

/// [`read_loop_file`] for a command: missing is `None`, anything else unreadable an error
/// that says what to do.
pub fn read_regular_opt(path: &Path) -> Result<Option<Vec<u8>>> {
    match read_loop_file(path) {
        Ok(b) => Ok(Some(b)),
        Err(Unreadable::Missing) => Ok(None),
        Err(e) => Err(e.into_error(path)),
    }
}

/// [`read_loop_file`] for a command that needs the file.
pub fn read_regular(path: &Path) -> Result<Vec<u8>> {
    read_loop_file(path).map_err(|e| e.into_error(path))
}

/// [`read_loop_file`] as text for a reader that treats anything unreadable as absent
/// (an audit reports what is not a regular file on its own).
pub fn read_text_or_none(path: &Path) -> Option<String> {
    read_loop_file(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Current time in epoch seconds.
pub fn now_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// UTC ISO-8601 (`2026-11-30T05:28:39Z`) for epoch seconds, without a date library.
pub fn iso_utc(epoch: u64) -> String {
    let days = (epoch / 86_400) as i64;
    let rem = epoch % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_streamed_hash_is_the_hash_of_the_bytes() {
        // Across several 64 KiB pieces and a short last one, through a reader that yields
        // a few bytes at a time.
        let data: Vec<u8> = (0..200_003u32).map(|i| (i * 31 % 251) as u8).collect();
        struct Dribble<'a>(&'a [u8]);
        impl std::io::Read for Dribble<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(7_777);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        assert_eq!(
            super::sha256_hex_of(Dribble(&data)).unwrap(),
            super::sha256_hex(&data)
        );
        assert_eq!(
            super::sha256_hex_of(&b""[..]).unwrap(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    use super::*;

    #[test]
    fn sha256_known_value() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn iso_dates() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(1_796_016_519), "2026-11-30T05:28:39Z");
        assert_eq!(iso_utc(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn loop_files_that_are_not_regular_are_never_read() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        // No writer: a plain read would wait forever.
        assert!(matches!(
            read_loop_file(&fifo),
            Err(Unreadable::NotRegular(NotRegular::Fifo))
        ));
        let file = d.path().join("file");
        fs::write(&file, "x").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        match read_loop_file(&link) {
            Err(Unreadable::NotRegular(NotRegular::Symlink(to))) => {
                assert_eq!(to, file.display().to_string())
            }
            other => panic!("{other:?}"),
        }
        let to_fifo = d.path().join("to-fifo");
        std::os::unix::fs::symlink(&fifo, &to_fifo).unwrap();
        assert!(matches!(
            read_loop_file(&to_fifo),
            Err(Unreadable::NotRegular(NotRegular::Symlink(_)))
        ));
        let sock = d.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(matches!(
            read_loop_file(&sock),
            Err(Unreadable::NotRegular(NotRegular::Socket))
        ));
        assert!(matches!(
            read_loop_file(Path::new("/dev/zero")),
            Err(Unreadable::NotRegular(NotRegular::CharDevice))
        ));
        assert!(matches!(
            read_loop_file(d.path()),
            Err(Unreadable::NotRegular(NotRegular::Directory))
        ));
        assert!(matches!(
            read_loop_file(&d.path().join("none")),
            Err(Unreadable::Missing)
        ));
        assert_eq!(read_loop_file(&file).unwrap(), b"x");
        assert_eq!(not_regular(&fifo), Some(NotRegular::Fifo));
        assert_eq!(not_regular(&file), None);
        // Appending or locking never waits on a FIFO either.
        let msg = open_append_regular(&fifo).unwrap_err().to_string();
        assert!(msg.contains("a FIFO"), "{msg}");
        assert!(open_append_regular(&link).is_err());
        let msg = read_regular(&fifo).unwrap_err().to_string();
        assert!(
            msg.contains("a FIFO") && msg.contains("orbit recover"),
            "{msg}"
        );
    }

    #[test]
    fn atomic_write_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
