//! The overview: one row per loop, made from `orbit audit`'s reading of it (as `orbit
//! status` shows it) and the report's next step, and the rows of the fleet lines.
//!
//! A row is read again when one of the files the runner writes changes (its size or time),
//! or when it is [`MAX_AGE`] old ([`RUNNING_AGE`] for a running loop: a runner that died
//! leaves no trace on disk but its lock; up to a fifth more by the loop's place, so that
//! rows read together are not all due together); the loops are read on every core at once.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{App, Loop, frame};
use crate::audit::{LoopReport, audit_loop, spend_cell};
use crate::report::{esc, next_step, verdict_colour};
use crate::state::State;

/// The oldest a RUNNING loop's row is shown before it is read again, files unchanged (its
/// runner may have died), and any other row's.
const RUNNING_AGE: Duration = Duration::from_secs(10);
const MAX_AGE: Duration = Duration::from_secs(300);

/// The files whose change means a loop's row must be read again.
const WATCHED: &[&str] = &[
    "state.env",
    "events.jsonl",
    "runner.log",
    "cost.ledger",
    "loop.toml",
    ".run-tmp/agent.live",
];

/// The sizes and times of a loop's watched files.
type Print = Vec<(u64, i64, i64)>;

fn fingerprint(dir: &Path) -> Print {
    WATCHED
        .iter()
        .map(|f| match std::fs::symlink_metadata(dir.join(f)) {
            Ok(m) => (m.len(), m.mtime(), m.mtime_nsec()),
            Err(_) => (0, 0, 0),
        })
        .collect()
}

/// One loop's row, as shown.
#[derive(Debug, Clone)]
pub struct Row {
    pub report: LoopReport,
    pub next: String,
    pub next_why: String,
}

struct Cached {
    print: Print,
    at: Instant,
    row: Row,
}

impl Cached {
    /// How old the row of loop `i` may be: up to a fifth more, by the loop's place (`i %
    /// 60`), so that the rows read at once at the start are not all read again at once.
    fn max_age(&self, i: usize) -> Duration {
        let base = if self.row.report.verdict == crate::contract::Verdict::Running {
            RUNNING_AGE
        } else {
            MAX_AGE
        };
        base + base * (i % 60) as u32 / 300
    }
}

/// The rows last read, by loop.
pub struct Cache {
    rows: Mutex<Vec<Option<Cached>>>,
    /// Counts the reads: a live feed that saw this generation has seen every row.
    generation: AtomicU64,
}

impl Cache {
    pub fn new(n: usize) -> Cache {
        Cache {
            rows: Mutex::new((0..n).map(|_| None).collect()),
            generation: AtomicU64::new(0),
        }
    }
}

/// Reads one loop's row.
pub fn read_row(l: &Loop) -> Row {
    let report = audit_loop(&l.dir, &l.shown);
    let (next, next_why) = match State::parse_file(&l.dir.join("state.env")) {
        Ok(state) => next_step(&report, &state, &l.shown),
        Err(e) => (
            format!("orbit audit {}", crate::shell::paste_word(&l.shown)),
            format!("state.env cannot be read: {e}"),
        ),
    };
    Row {
        report,
        next,
        next_why,
    }
}

/// The rows of the loops `which` (indices), read again where they changed.
pub fn rows(app: &App, which: &[usize]) -> Vec<Row> {
    rows_since(app, which, None).map_or_else(Vec::new, |(rows, _)| rows)
}

/// [`rows`] and the cache's generation, or `None` when no row was read again since the
/// generation `seen` (a live feed's last).
fn rows_since(app: &App, which: &[usize], seen: Option<u64>) -> Option<(Vec<Row>, u64)> {
    let prints: Vec<Print> = which
        .iter()
        .map(|&i| fingerprint(&app.loops[i].dir))
        .collect();
    let stale: Vec<usize> = {
        let cache = app.cache.rows.lock().unwrap_or_else(|e| e.into_inner());
        which
            .iter()
            .zip(&prints)
            .filter(|(i, p)| {
                cache[**i]
                    .as_ref()
                    .is_none_or(|c| c.print != **p || c.at.elapsed() > c.max_age(**i))
            })
            .map(|(i, _)| *i)
            .collect()
    };
    let fresh = read_rows(&app.loops, &stale);
    let mut cache = app.cache.rows.lock().unwrap_or_else(|e| e.into_inner());
    if !stale.is_empty() {
        app.cache.generation.fetch_add(1, Ordering::SeqCst);
    }
    let generation = app.cache.generation.load(Ordering::SeqCst);
    if seen == Some(generation) {
        return None;
    }
    for (i, row) in stale.iter().zip(fresh) {
        let k = which.iter().position(|w| w == i).unwrap_or(0);
        cache[*i] = Some(Cached {
            print: prints[k].clone(),
            at: Instant::now(),
            row,
        });
    }
    Some((
        which
            .iter()
            .filter_map(|&i| cache[i].as_ref().map(|c| c.row.clone()))
            .collect(),
        generation,
    ))
}

/// Reads the rows of `which` on every core.
fn read_rows(loops: &[Loop], which: &[usize]) -> Vec<Row> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = which.len().div_ceil(cores).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = which
            .chunks(per)
            .map(|part| s.spawn(move || part.iter().map(|&i| read_row(&loops[i])).collect()))
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|_| Vec::<Row>::new()))
            .collect()
    })
}

/// `3/20`, `-`.
fn iteration_text(r: &LoopReport) -> String {
    match (r.iteration, r.summary.max_iterations) {
        (Some(i), Some(m)) => format!("{i}/{m}"),
        (Some(i), None) => i.to_string(),
        _ => "-".into(),
    }
}

/// The state word beside the verdict: `CONTINUE (tick)`.
fn status_text(r: &LoopReport) -> String {
    match (&r.status, &r.stop_reason) {
        (Some(s), Some(reason)) if *reason != crate::contract::StopReason::None => {
            format!("{s} ({reason})")
        }
        (Some(s), _) => s.to_string(),
        _ => "state unreadable".into(),
    }
}

/// A time: its UTC time, which the page's script turns into an age (`3m ago`) and keeps
/// current, so the row's HTML changes only when the loop does.
pub fn activity_cell(at: Option<u64>) -> String {
    match at {
        Some(t) => format!(
            "<td class=\"ago\" data-at=\"{t}\">{}</td>",
            crate::fsx::iso_utc(t)
        ),
        None => "<td>never</td>".into(),
    }
}

/// The `<tr>` of loop `index`.
pub fn row_html(index: usize, l: &Loop, row: &Row) -> String {
    let r = &row.report;
    let s = &r.summary;
    let mut h = String::new();
    let _ = write!(
        h,
        "<tr id=\"loop-{index}\" data-verdict=\"{v}\"><td><a href=\"/loop/{index}\">{name}</a><div class=\"dir\">{dir}</div></td><td><span class=\"badge\" style=\"background:{c}\">{v}</span> <span class=\"status\">{st}</span></td><td class=\"iteration\">{it}</td><td>{verify}</td><td>{spend}</td>",
        v = r.verdict,
        name = esc(&l.name),
        dir = esc(&l.shown),
        c = verdict_colour(r.verdict),
        st = esc(&status_text(r)),
        it = esc(&iteration_text(r)),
        verify = s
            .last_verify
            .map(|v| format!("verify {v}"))
            .unwrap_or_else(|| "-".into()),
        spend = esc(&spend_cell(
            s.spent_microusd,
            s.unknown_cost_runs,
            s.usd_cap_microusd
        )),
    );
    h.push_str(&activity_cell(s.last_activity));
    let _ = write!(
        h,
        "<td>{}</td><td><code class=\"next\">{}</code><div class=\"why\">{}</div></td></tr>",
        esc(s.branch.as_deref().unwrap_or("-")),
        esc(&row.next),
        esc(&row.next_why)
    );
    h
}

/// The table head both tables share.
pub const HEAD: &str = "<tr><th>loop</th><th>verdict</th><th>iteration</th><th>last check</th><th>spend</th><th>last activity</th><th>branch</th><th>next</th></tr>";

/// The rows of the loops `which`, as HTML.
pub fn rows_html(app: &App, which: &[usize]) -> String {
    html_of(app, which, &rows(app, which))
}

/// The rows of `which` as HTML and the generation they are of, unless no row was read
/// again since the generation `seen` (a live feed then sends nothing).
pub fn rows_html_since(app: &App, which: &[usize], seen: Option<u64>) -> Option<(String, u64)> {
    rows_since(app, which, seen).map(|(rows, g)| (html_of(app, which, &rows), g))
}

fn html_of(app: &App, which: &[usize], rows: &[Row]) -> String {
    rows.iter()
        .zip(which)
        .map(|(row, &i)| row_html(i, &app.loops[i], row))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The overview's page.
pub fn page(app: &App) -> String {
    let all: Vec<usize> = (0..app.loops.len()).collect();
    let mut h = frame::head("orbit serve");
    let _ = write!(
        h,
        "<h1>orbit serve <span class=\"count\">{} loop(s)</span></h1>\n<p class=\"live\" id=\"feed\" data-src=\"/events\">Live: this page updates by itself (<span id=\"updated\">as loaded</span>).</p>\n",
        app.loops.len()
    );
    if !app.loops.is_empty() {
        let _ = writeln!(
            h,
            "<table class=\"overview\"><thead>{HEAD}</thead><tbody id=\"rows\">{}</tbody></table>",
            rows_html(app, &all)
        );
    }
    // The queue's section, replaced whole by the feed's `queue` events.
    let _ = writeln!(h, "<div id=\"queue\">{}</div>", super::queue::section(app));
    if app.fleet.is_some() {
        let _ = write!(
            h,
            "<h2>Fleet</h2>\n<table class=\"overview fleet\"><thead><tr><th>host</th>{}</thead><tbody id=\"fleet\">{}</tbody></table>\n",
            &HEAD[4..],
            app.fleet.rows_html()
        );
    }
    h.push_str(frame::TAIL);
    h
}
