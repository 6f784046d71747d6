//! `orbit serve`: a live web dashboard of loops, for a browser on this machine.
//!
//! An overview (one row per loop, and the fleet lines of other hosts) and a page per loop
//! (its report, the running agent's output as it comes, its iterations and their logs, the
//! fan-out candidates and their diffs, stop and resume). It reads the loops as `orbit
//! status`, `orbit report` and `orbit logs` do, through their code, and writes nothing but
//! what `orbit stop` and `orbit resume` write, through theirs.
//!
//! Safe by default (docs/serve.md): it listens on 127.0.0.1 unless told otherwise; every
//! request carries a random token (in the printed URL once, then a cookie); a loop is named
//! by its number, never by a path from the URL; every file it reads is opened below the
//! loop directory without following a symlink; everything a loop holds is shown as
//! escaped, neutralised text, cut to a tail and to lines of a few KB; the pages carry a
//! strict Content-Security-Policy and load only the server's own script.

mod fleet;
mod frame;
mod headers;
mod http;
mod live;
mod overview;
mod pages;
mod queue;
mod text;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::cli::ServeArgs;
use crate::config::LoopConfig;
use crate::error::{Error, Result};
use crate::locate::{loops_under, repo_by_dot_git};

/// The most requests served at once (a live view holds one while it is open); past it a
/// request is answered 503 at once.
const MAX_BUSY: usize = 64;

/// One loop the server was given: named in URLs by its index, never by a path.
#[derive(Debug, Clone)]
pub struct Loop {
    /// Canonical: no symlink in it, so files below it are opened component by component.
    pub dir: PathBuf,
    /// How commands name it (relative to the current directory when below it).
    pub shown: String,
    /// loop.toml's name (the directory's name when loop.toml cannot be read).
    pub name: String,
}

/// What every request handler shares.
pub struct App {
    pub loops: Vec<Loop>,
    pub token: String,
    pub addr: SocketAddr,
    pub fleet: fleet::Fleet,
    pub cache: overview::Cache,
    /// What the last stop or resume button of each loop did, in words.
    pub said: Mutex<BTreeMap<usize, String>>,
    busy: AtomicUsize,
}

impl App {
    /// The name of the cookie that carries the token: one per port, as cookies are shared
    /// by every port of a host.
    pub fn cookie_name(&self) -> String {
        format!("orbit_token_{}", self.addr.port())
    }
}

/// The loops of a directory given on the command line: a loop directory itself, or every
/// loop under the `.orbit/` of the repository it is in.
fn loops_of(d: &Path) -> Result<Vec<PathBuf>> {
    if d.join("loop.toml").is_file() {
        return Ok(vec![d.to_path_buf()]);
    }
    if !d.is_dir() {
        return Err(Error::path(
            d,
            "is not a directory: name a repository or a loop directory (made by orbit init)",
        ));
    }
    let repo = repo_by_dot_git(d).ok_or_else(|| {
        Error::path(
            d,
            "is neither a loop directory (no loop.toml) nor inside a git repository: name a repository or a loop directory",
        )
    })?;
    Ok(loops_under(&repo))
}

/// How commands name a loop directory: relative to the current directory when below it.
fn shown(dir: &Path, cwd: &Path) -> String {
    dir.strip_prefix(cwd)
        .ok()
        .filter(|r| !r.as_os_str().is_empty())
        .unwrap_or(dir)
        .display()
        .to_string()
}

/// Every loop to show, each once, in the order given (and sorted within a repository).
pub fn find_loops(dirs: &[PathBuf]) -> Result<Vec<Loop>> {
    let cwd =
        std::env::current_dir().map_err(|e| Error::io("cannot read the current directory", e))?;
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let mut found = Vec::new();
    if dirs.is_empty() {
        let repo = repo_by_dot_git(&cwd).ok_or_else(|| {
            Error::Git(format!(
                "{} is not inside a git repository: name repositories or loop directories (orbit serve DIR...), or run it inside a repository",
                cwd.display()
            ))
        })?;
        found.extend(loops_under(&repo));
    } else {
        for d in dirs {
            found.extend(loops_of(d)?);
        }
    }
    let mut out: Vec<Loop> = Vec::new();
    for dir in found {
        let dir = std::fs::canonicalize(&dir)
            .map_err(|e| Error::io(format!("cannot resolve {}", dir.display()), e))?;
        if out.iter().any(|l| l.dir == dir) {
            continue;
        }
        let name = LoopConfig::load(&dir.join("loop.toml"))
            .map(|c| c.name)
            .unwrap_or_else(|_| {
                dir.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        out.push(Loop {
            shown: shown(&dir, &cwd),
            dir,
            name,
        });
    }
    Ok(out)
}

/// A random token: 128 bits from the kernel, in hex.
fn new_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::io("cannot read /dev/urandom for the token", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The address `--bind` names.
fn bind_addr(text: &str) -> Result<IpAddr> {
    text.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| {
            Error::Usage(format!(
                "--bind {text}: not an IP address; give one, such as 127.0.0.1 (the default), ::1 or 0.0.0.0"
            ))
        })
}

/// What listening on a non-loopback address exposes, said when the server starts.
fn exposure_warning(ip: IpAddr) -> Option<String> {
    (!ip.is_loopback()).then(|| {
        format!(
            "orbit: warning: listening on {ip}, not on a loopback address: every machine that reaches it can load the pages, and anyone holding the token (it is in the URL, sent in clear over plain http) can read these loops' goals, agent output, logs and diffs and stop or resume them. Keep the default (127.0.0.1) and reach it through an ssh tunnel unless you mean that."
        )
    })
}

/// The URL printed: the address a browser on this machine opens.
fn url(addr: SocketAddr, token: &str) -> String {
    let ip = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
        ip if ip.is_unspecified() => "[::1]".to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{ip}:{}/?token={token}", addr.port())
}

/// `orbit serve`.
pub fn run(args: &ServeArgs) -> Result<u8> {
    let ip = bind_addr(&args.bind)?;
    let loops = if args.dirs.is_empty() && !args.fleet.is_empty() {
        // Fleet lines alone need no repository; the current one's loops join when there is one.
        find_loops(&[]).unwrap_or_default()
    } else {
        find_loops(&args.dirs)?
    };
    let fleet = fleet::Fleet::open(&args.fleet)?;
    if loops.is_empty() && args.fleet.is_empty() {
        return Err(Error::Usage(
            "no loop to show: create one with orbit init \"GOAL\", name repositories or loop directories (orbit serve DIR...), or read other hosts' loops with --fleet FILE".into(),
        ));
    }
    let listener = TcpListener::bind((ip, args.port)).map_err(|e| {
        Error::io(
            format!(
                "cannot listen on {}:{} (another program may hold the port: choose another with --port, or 0 for any free one)",
                args.bind, args.port
            ),
            e,
        )
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("cannot read the address listened on", e))?;
    let server = tiny_http::Server::from_listener(listener, None)
        .map_err(|e| Error::Usage(format!("cannot start the HTTP server: {e}")))?;
    if let Some(warning) = exposure_warning(ip) {
        eprintln!("{warning}");
    }
    let app = Arc::new(App {
        cache: overview::Cache::new(loops.len()),
        loops,
        token: new_token()?,
        addr,
        fleet,
        said: Mutex::new(BTreeMap::new()),
        busy: AtomicUsize::new(0),
    });
    // Said once; a reader of standard output that went away must not stop the server.
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "orbit: serving {} loop(s){} at {}\norbit: open that URL (it holds the token); Ctrl-C stops the server",
        app.loops.len(),
        if args.fleet.is_empty() {
            String::new()
        } else {
            format!(" and the fleet lines of {}", fleet_names(&args.fleet))
        },
        url(addr, &app.token)
    );
    let _ = out.flush();
    for rq in server.incoming_requests() {
        if app.busy.fetch_add(1, Ordering::SeqCst) >= MAX_BUSY {
            app.busy.fetch_sub(1, Ordering::SeqCst);
            let _ = rq.respond(http::busy());
            continue;
        }
        let app = Arc::clone(&app);
        std::thread::spawn(move || {
            http::handle(&app, rq);
            app.busy.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok(0)
}

fn fleet_names(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| {
            if f.as_os_str() == "-" {
                "standard input".to_string()
            } else {
                f.display().to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_takes_an_ip_address_and_warns_beyond_loopback() {
        assert!(bind_addr("localhost").is_err());
        assert_eq!(
            bind_addr("[::1]").unwrap(),
            "::1".parse::<IpAddr>().unwrap()
        );
        assert!(exposure_warning("127.0.0.1".parse().unwrap()).is_none());
        assert!(exposure_warning("::1".parse().unwrap()).is_none());
        let w = exposure_warning("0.0.0.0".parse().unwrap()).unwrap();
        assert!(w.contains("every machine that reaches it"), "{w}");
    }

    #[test]
    fn the_url_names_an_address_a_local_browser_opens() {
        let a: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(url(a, "t"), "http://127.0.0.1:8080/?token=t");
        let a: SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(url(a, "t"), "http://[::1]:9/?token=t");
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
