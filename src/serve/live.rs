//! The live feeds, as server-sent events: the overview's rows, its fleet lines and its
//! queue section (each sent again when it changes) and the running agent's output (`.run-tmp/agent.live`, as the runner's
//! `agent_live_open` writes it: a header line before each agent run, the output as it comes).
//!
//! A feed looks at the files a few times a second and sends only what changed; a reader
//! that goes away ends it at the next write (a comment line every [`KEEPALIVE`] finds
//! out). The agent's output is sent cut to lines of a few KB and neutralised, starting
//! from its last [`START_TAIL`] bytes.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use tiny_http::Request;

use super::App;
use super::headers::safety_headers;
use super::text::{self, LineCut};
use crate::logs::{Followed, Sanitizer};

/// How often a feed looks for a change: the rows every two seconds (a look stats each
/// loop's watched files: over a thousand loops, once a second cost a server at rest more
/// than 1% of a core), the agent's output four times a second.
const ROWS_POLL: Duration = Duration::from_millis(2000);
const LIVE_POLL: Duration = Duration::from_millis(250);
/// A comment line this often: a reader that went away is found at the write.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How much of the agent's output a new reader gets first: as much as the page shows when it
/// is served ([`text::TAIL_MAX`]), so that the view never shrinks when the feed takes over.
const START_TAIL: u64 = text::TAIL_MAX;

/// Starts an event stream on the request's connection: the status line and the headers,
/// written by hand so that every event leaves at once (no chunked buffering).
fn open_stream(rq: Request) -> io::Result<Box<dyn Write + Send>> {
    let mut w = rq.into_writer();
    let mut head = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nConnection: close\r\n",
    );
    for (k, v) in safety_headers() {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    w.flush()?;
    Ok(w)
}

/// One event: `data:` lines joined by the browser with newlines, so any text goes whole
/// (it holds no carriage return: the text is neutralised, or the server's own HTML).
fn send(w: &mut dyn Write, event: &str, data: &str) -> io::Result<()> {
    let mut out = format!("event: {event}\n");
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(&line.replace('\r', " "));
        out.push('\n');
    }
    out.push('\n');
    w.write_all(out.as_bytes())?;
    w.flush()
}

/// The overview's rows (or one loop's row), then again at each change, until the reader
/// goes away.
pub fn stream_rows(app: &App, rq: Request, only: Option<usize>) {
    let Ok(mut w) = open_stream(rq) else {
        return;
    };
    let which: Vec<usize> = match only {
        Some(n) => vec![n],
        None => (0..app.loops.len()).collect(),
    };
    let _ = (|| -> io::Result<()> {
        let (mut rows, mut fleet, mut queue) = (String::new(), String::new(), String::new());
        let mut seen = None;
        let mut quiet = Instant::now();
        loop {
            // Made again only when some row was read again since the last look, and sent
            // only when it differs.
            if let Some((now_rows, g)) = super::overview::rows_html_since(app, &which, seen) {
                seen = Some(g);
                if now_rows != rows {
                    send(&mut *w, "rows", &now_rows)?;
                    rows = now_rows;
                    quiet = Instant::now();
                }
            }
            if only.is_none() && app.fleet.is_some() {
                let now_fleet = app.fleet.rows_html();
                if now_fleet != fleet {
                    send(&mut *w, "fleet", &now_fleet)?;
                    fleet = now_fleet;
                    quiet = Instant::now();
                }
            }
            // The queue's section: its task files and queue.json read again at each look.
            if only.is_none() {
                let now_queue = super::queue::section(app);
                if now_queue != queue {
                    send(&mut *w, "queue", &now_queue)?;
                    queue = now_queue;
                    quiet = Instant::now();
                }
            }
            if quiet.elapsed() >= KEEPALIVE {
                w.write_all(b": keepalive\n\n")?;
                w.flush()?;
                quiet = Instant::now();
            }
            std::thread::sleep(ROWS_POLL);
        }
    })();
}

/// The running agent's output: a `reset` holding its tail, then what is written as it
/// comes, a `reset` again (with the new file's first text) when the runner starts a new file.
pub fn stream_live(app: &App, rq: Request, n: usize) {
    let Ok(mut w) = open_stream(rq) else {
        return;
    };
    let dir = &app.loops[n].dir;
    let path = dir.join(crate::logs::LIVE_FILE);
    let _ = (|| -> io::Result<()> {
        let mut cur: Option<Followed> = None;
        let (mut cut, mut clean) = (LineCut::default(), Sanitizer::default());
        let mut quiet = Instant::now();
        loop {
            if cur.as_ref().is_none_or(|f| f.replaced(&path))
                && let Some(file) = text::open_in(dir, &[".run-tmp", "agent.live"])
                && let Some(mut f) = Followed::from_file(file)
            {
                let first = cur.is_none();
                if first {
                    f.skip_to_tail(START_TAIL);
                }
                let mid =
                    first && std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() > START_TAIL);
                cut = if mid {
                    LineCut::mid_line()
                } else {
                    LineCut::default()
                };
                clean = Sanitizer::default();
                // The file's tail comes with the reset, so that the view is replaced in one
                // step and never shown empty between the two.
                let out = clean.push(&cut.push(&f.read_new()?));
                send(&mut *w, "reset", &out)?;
                cur = Some(f);
                quiet = Instant::now();
            }
            if let Some(f) = cur.as_mut() {
                // At most a MB a look (`read_new`'s bound): a flood is read over many looks.
                let chunk = f.read_new()?;
                if !chunk.is_empty() {
                    let out = clean.push(&cut.push(&chunk));
                    if !out.is_empty() {
                        send(&mut *w, "out", &out)?;
                        quiet = Instant::now();
                    }
                }
            }
            if quiet.elapsed() >= KEEPALIVE {
                w.write_all(b": keepalive\n\n")?;
                w.flush()?;
                quiet = Instant::now();
            }
            std::thread::sleep(LIVE_POLL);
        }
    })();
}
