//! Fleet lines: the loops of other hosts, as `orbit audit --json-lines` (or `orbit status
//! --json-lines`, `--watch`ed) prints them, read from files (again as they grow) or from
//! standard input. The latest line of each (host, loop) is shown; a line that is not a
//! loop's report is counted and said, never fatal.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::audit::{Severity, spend_cell};
use crate::error::{Error, Result};
use crate::report::esc;

/// How much of a fleet file's end is read (a `--watch` stream grows without end).
const FILE_TAIL: u64 = 4 << 20;
/// The longest fleet line read.
const LINE_MAX: u64 = 1 << 20;

/// The latest line of each (host, dir), and how many lines were not reports.
#[derive(Debug, Default, Clone)]
struct Lines {
    latest: BTreeMap<(String, String), Value>,
    bad: usize,
}

impl Lines {
    fn add(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v.get("dir").is_some_and(Value::is_string) && v.get("verdict").is_some() => {
                let host = v["host"].as_str().unwrap_or("?").to_string();
                let dir = v["dir"].as_str().unwrap_or_default().to_string();
                self.latest.insert((host, dir), v);
            }
            _ => self.bad += 1,
        }
    }
}

/// A file's size and modification time: read again when they change.
type FilePrint = (u64, i64, i64);

enum Source {
    File {
        path: PathBuf,
        seen: Mutex<Option<(FilePrint, Lines)>>,
    },
    Stdin(Arc<Mutex<Lines>>),
}

/// Every fleet source given with `--fleet`.
pub struct Fleet {
    sources: Vec<Source>,
}

impl Fleet {
    /// Opens the sources: a file must be readable now; `-` starts a reader of standard input.
    pub fn open(paths: &[PathBuf]) -> Result<Fleet> {
        let mut sources = Vec::new();
        for p in paths {
            if p.as_os_str() == "-" {
                if sources.iter().any(|s| matches!(s, Source::Stdin(_))) {
                    return Err(Error::Usage(
                        "--fleet - is given twice: standard input is read once".into(),
                    ));
                }
                let lines = Arc::new(Mutex::new(Lines::default()));
                let into = Arc::clone(&lines);
                std::thread::spawn(move || read_stdin(&into));
                sources.push(Source::Stdin(lines));
            } else {
                std::fs::File::open(p).map_err(|e| {
                    Error::io(
                        format!(
                            "cannot read --fleet {} (a file of orbit audit --json-lines lines, or - for standard input)",
                            p.display()
                        ),
                        e,
                    )
                })?;
                sources.push(Source::File {
                    path: p.clone(),
                    seen: Mutex::new(None),
                });
            }
        }
        Ok(Fleet { sources })
    }

    pub fn is_some(&self) -> bool {
        !self.sources.is_empty()
    }

    /// Every source's latest lines, merged, and the number of lines that were not reports.
    fn lines(&self) -> (Vec<Value>, Vec<String>) {
        let mut all = Lines::default();
        let mut notes = Vec::new();
        for s in &self.sources {
            let (lines, name) = match s {
                Source::File { path, seen } => (read_file(path, seen), path.display().to_string()),
                Source::Stdin(lines) => (
                    lines.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                    "standard input".to_string(),
                ),
            };
            if lines.bad > 0 {
                notes.push(format!(
                    "{} line(s) of {name} are not loop reports (orbit audit --json-lines prints them)",
                    lines.bad
                ));
            }
            all.latest.extend(lines.latest);
        }
        (all.latest.into_values().collect(), notes)
    }

    /// The fleet's rows, as HTML.
    pub fn rows_html(&self) -> String {
        let (lines, notes) = self.lines();
        let mut h = String::new();
        for v in &lines {
            h.push_str(&row_html(v));
        }
        if lines.is_empty() {
            h.push_str("<tr><td colspan=\"9\">no fleet line yet</td></tr>");
        }
        for n in notes {
            let _ = write!(
                h,
                "<tr><td colspan=\"9\" class=\"cut\">{}</td></tr>",
                esc(&n)
            );
        }
        h
    }
}

/// Reads standard input's lines until it ends.
fn read_stdin(into: &Mutex<Lines>) {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut input).take(LINE_MAX).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                // A line longer than the limit: the rest of it is dropped.
                if !line.ends_with(b"\n") && line.len() as u64 >= LINE_MAX {
                    let mut rest = Vec::new();
                    let _ = input.read_until(b'\n', &mut rest);
                }
                into.lock().unwrap_or_else(|e| e.into_inner()).add(&line);
            }
        }
    }
}

/// A fleet file's latest lines, read again only when it changed.
fn read_file(path: &PathBuf, seen: &Mutex<Option<(FilePrint, Lines)>>) -> Lines {
    let print = std::fs::metadata(path)
        .map(|m| (m.len(), m.mtime(), m.mtime_nsec()))
        .unwrap_or((0, 0, 0));
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, lines)) = seen.as_ref()
        && *p == print
    {
        return lines.clone();
    }
    let mut lines = Lines::default();
    if let Ok(mut f) = std::fs::File::open(path) {
        let start = print.0.saturating_sub(FILE_TAIL);
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(start)).is_ok() && f.take(FILE_TAIL).read_to_end(&mut buf).is_ok()
        {
            let mut parts = buf.split(|b| *b == b'\n');
            if start > 0 {
                parts.next();
            }
            for line in parts {
                lines.add(&line[..line.len().min(LINE_MAX as usize)]);
            }
        }
    }
    *seen = Some((print, lines.clone()));
    lines
}

/// One fleet line's row: the report's fields as `orbit status` shows them.
fn row_html(v: &Value) -> String {
    let s = &v["summary"];
    let num = |x: &Value| x.as_u64();
    let text = |x: &Value| x.as_str().unwrap_or("-").to_string();
    let iteration = match (num(&v["iteration"]), num(&s["max_iterations"])) {
        (Some(i), Some(m)) => format!("{i}/{m}"),
        (Some(i), None) => i.to_string(),
        _ => "-".into(),
    };
    let status = match (v["status"].as_str(), v["stop_reason"].as_str()) {
        (Some(st), Some(r)) if r != "none" => format!("{st} ({r})"),
        (Some(st), _) => st.to_string(),
        _ => "state unreadable".into(),
    };
    let verdict = text(&v["verdict"]);
    let colour = crate::contract::Verdict::parse(&verdict)
        .map(crate::report::verdict_colour)
        .unwrap_or(crate::report::SKIP);
    let spend = spend_cell(
        num(&s["spent_microusd"]),
        num(&s["unknown_cost_runs"]).unwrap_or(0),
        num(&s["usd_cap_microusd"]),
    );
    let verify = s["last_verify"]
        .as_str()
        .map(|x| format!("verify {x}"))
        .unwrap_or_else(|| "-".into());
    // The fix of the worst P0 or P1 finding, as the report's next step would say.
    let fix = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let sev = match f["severity"].as_str()? {
                "P0" => Severity::P0,
                "P1" => Severity::P1,
                _ => return None,
            };
            Some((sev, f["fix"].as_str()?.to_string()))
        })
        .min_by_key(|(s, _)| *s)
        .map(|(_, f)| f)
        .unwrap_or_else(|| "-".into());
    let cells = [
        text(&v["host"]),
        text(&v["dir"]),
        String::new(),
        iteration,
        verify,
        spend,
        String::new(),
        text(&s["branch"]),
        fix,
    ];
    let mut h = String::from("<tr class=\"fleet-row\">");
    for (k, c) in cells.iter().enumerate() {
        match k {
            2 => {
                let _ = write!(
                    h,
                    "<td><span class=\"badge\" style=\"background:{colour}\">{}</span> <span class=\"status\">{}</span></td>",
                    esc(&verdict),
                    esc(&status)
                );
            }
            6 => h.push_str(&super::overview::activity_cell(num(&s["last_activity"]))),
            8 => {
                let _ = write!(h, "<td><code class=\"next\">{}</code></td>", esc(c));
            }
            _ => {
                let _ = write!(h, "<td>{}</td>", esc(c));
            }
        }
    }
    h.push_str("</tr>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_line_of_each_loop_wins_and_bad_lines_are_counted() {
        let mut l = Lines::default();
        l.add(br#"{"host":"a","dir":"x","verdict":"IDLE","iteration":1}"#);
        l.add(br#"{"host":"a","dir":"x","verdict":"DONE","iteration":2}"#);
        l.add(br#"{"host":"b","dir":"x","verdict":"READY"}"#);
        l.add(b"not json");
        l.add(br#"{"dir":3}"#);
        l.add(b"   ");
        assert_eq!(l.latest.len(), 2);
        assert_eq!(l.bad, 2);
        assert_eq!(l.latest[&("a".into(), "x".into())]["verdict"], "DONE");
    }

    #[test]
    fn a_fleet_row_is_escaped() {
        let v: Value = serde_json::from_str(
            r#"{"host":"<b>h</b>","dir":"<script>x</script>","verdict":"<i>","summary":{}}"#,
        )
        .unwrap();
        let h = row_html(&v);
        assert!(
            !h.contains("<script>") && !h.contains("<b>") && !h.contains("<i>"),
            "{h}"
        );
        assert!(h.contains("&lt;script&gt;"), "{h}");
    }
}
