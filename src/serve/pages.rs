//! The pages of one loop: its report (the same facts and pictures as `orbit report
//! --html`, by the same code), its live row, the running agent's output, its iterations and
//! their logs, the fan-out candidates and their diffs, and the stop and resume buttons
//! (the very functions `orbit stop` and `orbit resume` run).

use std::fmt::Write as _;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::frame::{TAIL, head};
use super::{App, text};
use crate::report::{self, esc};

/// The most of a diff a candidate's page shows.
const DIFF_MAX: u64 = 1 << 20;
/// How long git may take to print a diff before it is stopped.
const GIT_LIMIT: Duration = Duration::from_secs(20);
/// How long the stop button waits for a live runner to save its state (as `orbit stop`).
const STOP_WAIT: &str = "60s";

/// The navigation line of a loop's pages.
fn nav(app: &App, n: usize) -> String {
    format!(
        "<p class=\"nav\"><a href=\"/\">overview</a> / <a href=\"/loop/{n}\">{}</a></p>\n",
        esc(&app.loops[n].name)
    )
}

/// A loop's page.
pub fn loop_page(app: &App, n: usize) -> String {
    let l = &app.loops[n];
    let mut h = head(&format!("orbit: {}", l.name));
    h.push_str(&nav(app, n));
    let _ = writeln!(
        h,
        "<table class=\"overview\" id=\"feed\" data-src=\"/loop/{n}/events\"><thead>{}</thead><tbody id=\"rows\">{}</tbody></table>",
        super::overview::HEAD,
        super::overview::rows_html(app, &[n])
    );
    let _ = writeln!(
        h,
        "<div class=\"buttons\"><form method=\"post\" action=\"/loop/{n}/stop\"><button type=\"submit\" id=\"stop\">stop</button></form><form method=\"post\" action=\"/loop/{n}/resume\"><button type=\"submit\" id=\"resume\">resume</button></form><span class=\"hint\">as <code>orbit stop</code> and <code>orbit resume</code></span></div>"
    );
    if let Some(said) = app.said.lock().unwrap_or_else(|e| e.into_inner()).get(&n) {
        let _ = writeln!(h, "<p id=\"said\" class=\"said\">{}</p>", esc(said));
    }
    let live = match text::tail(&l.dir, &[".run-tmp", "agent.live"]) {
        Some((t, _)) => t,
        None => String::new(),
    };
    let _ = write!(
        h,
        "<h2>The agent's output, live</h2>\n<pre id=\"live\" class=\"live\" data-src=\"/loop/{n}/live\">{}</pre>\n",
        esc(&live)
    );
    match report::facts(&l.dir, &l.shown) {
        Ok(f) => {
            h.push_str("<h2>Iterations and their logs</h2>\n<ul class=\"iterations\">");
            for r in f.rows.iter().rev() {
                let _ = write!(
                    h,
                    "<li><a href=\"/loop/{n}/iteration/{i}\">iteration {i}</a>: {} {}",
                    esc(&r.verdict),
                    esc(&r.summary),
                    i = r.iteration
                );
                for c in r.candidates.iter().filter(|c| !c.review.is_empty()) {
                    let _ = write!(
                        h,
                        " <a class=\"candidate\" href=\"/loop/{n}/iteration/{i}/candidate/{k}\">candidate {k}{}</a>",
                        if c.survivor { " (survivor)" } else { "" },
                        i = r.iteration,
                        k = c.candidate
                    );
                }
                h.push_str("</li>");
            }
            if f.rows.is_empty() {
                h.push_str("<li>none yet</li>");
            }
            h.push_str("</ul>\n<div class=\"report\">\n");
            h.push_str(&report::render_html_body(&f));
            h.push_str("</div>\n");
            if let Some(a) = &f.adequacy {
                h.push_str(&adequacy_html(a));
            }
        }
        Err(e) => {
            let _ = writeln!(
                h,
                "<p class=\"cut\">the report cannot be made: {} (orbit audit {} says what it needs)</p>",
                esc(&e.to_string()),
                esc(&l.shown)
            );
        }
    }
    h.push_str(TAIL);
    h
}

/// The adequacy measure of the loop's branch head (adequacy.json): its one line, then each
/// hunk of the change marked needed or not needed (with the check that failed) and each
/// mutant marked killed or survived, as `orbit adequacy` found them.
fn adequacy_html(a: &crate::adequacy::Record) -> String {
    let mut h = format!(
        "<h2>What the checks need of the change</h2>\n<p id=\"adequacy\">{}</p>\n<ul class=\"adequacy\">",
        esc(&a.summary())
    );
    let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    for u in a.details["hunks"].as_array().into_iter().flatten() {
        let what = match u["lines"].as_str() {
            Some(l) => format!("{}:{l}", s(&u["file"])),
            None => format!("{} (whole file)", s(&u["file"])),
        };
        let mark = match u["result"].as_str() {
            Some("needed") => "&#10003; needed",
            Some("not-needed") => "&#10007; NOT NEEDED",
            _ => "&#8943; not tried",
        };
        let by = u["check"]
            .as_str()
            .map(|c| format!(" (check {} failed)", esc(c)))
            .unwrap_or_default();
        let _ = write!(
            h,
            "<li class=\"{}\">{mark} <code>{}</code>{by}</li>",
            esc(&s(&u["result"])),
            esc(&what)
        );
    }
    for m in a.details["mutants"].as_array().into_iter().flatten() {
        let mark = match m["result"].as_str() {
            Some("killed") => "&#10003; killed",
            Some("survived") => "&#10007; SURVIVED",
            _ => "&#8943; not tried",
        };
        let _ = write!(
            h,
            "<li class=\"{}\">{mark} <code>{}:{} {}: {}</code></li>",
            esc(&s(&m["result"])),
            esc(&s(&m["file"])),
            m["line"],
            esc(&s(&m["operator"])),
            esc(s(&m["text"]).trim())
        );
    }
    h.push_str("</ul>\n");
    h
}

/// The name of iteration `i`'s record directory.
fn idir_name(i: u64) -> String {
    format!("{i:06}")
}

/// An iteration's page: each of its logs (agent attempts, confirmation runs, verify), the
/// tail of each, as text.
pub fn iteration_page(app: &App, n: usize, i: u64) -> Option<String> {
    let l = &app.loops[n];
    let name = idir_name(i);
    let idir = l.dir.join("iterations").join(&name);
    if !std::fs::symlink_metadata(&idir).ok()?.is_dir() {
        return None;
    }
    let mut h = head(&format!("orbit: {} iteration {i}", l.name));
    h.push_str(&nav(app, n));
    let result = text::open_in(&l.dir, &["iterations", &name, "result.env"]).and_then(|mut f| {
        let mut b = Vec::new();
        f.read_to_end(&mut b).ok()?;
        crate::result_env::parse(&b).ok()
    });
    let _ = writeln!(
        h,
        "<h1>{}</h1>",
        esc(&crate::logs::header(i, result.as_ref()))
    );
    for (what, path) in crate::logs::iteration_files(&idir) {
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if text::open_in(&l.dir, &["iterations", &name, file]).is_none() {
            continue;
        }
        let _ = writeln!(h, "<h2>{} ({})</h2>", esc(&what), esc(file));
        h.push_str(&text::tail_html(&l.dir, &["iterations", &name, file]));
    }
    h.push_str(TAIL);
    Some(h)
}

/// A candidate's page: its change against the survivor's (its own change when it is the
/// survivor, or the iteration had none), from the candidate refs git keeps, and its logs.
pub fn candidate_page(app: &App, n: usize, i: u64, k: u64) -> Option<String> {
    let l = &app.loops[n];
    let f = report::facts(&l.dir, &l.shown).ok()?;
    let row = f.rows.iter().find(|r| r.iteration == i)?;
    let c = row.candidates.iter().find(|c| c.candidate == k)?;
    let ref_of = |k: u64| format!("refs/orbit/{}/{i}/{k}", f.name);
    let survivor = row
        .candidates
        .iter()
        .find(|c| c.survivor && !c.review.is_empty())
        .map(|c| c.candidate);
    let mut h = head(&format!("orbit: {} iteration {i} candidate {k}", l.name));
    h.push_str(&nav(app, n));
    let _ = writeln!(
        h,
        "<h1>Iteration {i}, candidate {k}{}</h1><p>outcome {}, checks passed {}{}</p>",
        if c.survivor { " (the survivor)" } else { "" },
        esc(&c.outcome),
        esc(&c.checks_text()),
        if c.disqualified.is_empty() {
            String::new()
        } else {
            format!(", disqualified: {}", esc(&c.disqualified))
        }
    );
    if c.review.is_empty() {
        h.push_str("<p>its ref is gone (orbit recover --prune-candidates removed it)</p>");
    } else {
        let own = ref_of(k);
        let (what, args): (String, Vec<String>) = match survivor {
            Some(s) if s != k => (
                format!("its change against the survivor's (candidate {s})"),
                vec!["diff".into(), ref_of(s), own],
            ),
            _ => ("its change".into(), vec!["show".into(), own]),
        };
        let _ = write!(
            h,
            "<h2>{}</h2><p><code>{}</code></p>",
            esc(&what),
            esc(&c.review)
        );
        h.push_str(&git_text(&l.dir, &args));
    }
    let cand = k.to_string();
    for log in ["agent.log", "verify.log"] {
        let rel = ["iterations", &idir_name(i), "candidates", &cand, log];
        if text::open_in(&l.dir, &rel).is_some() {
            let _ = writeln!(h, "<h2>{log}</h2>");
            h.push_str(&text::tail_html(&l.dir, &rel));
        }
    }
    h.push_str(TAIL);
    Some(h)
}

/// What git prints for `args` (a diff or a show of the loop's refs) in the loop directory's
/// repository, as the HTML of a `<pre>`: no external diff, no textconv, no optional lock,
/// at most [`DIFF_MAX`] bytes, stopped after [`GIT_LIMIT`].
fn git_text(dir: &std::path::Path, args: &[String]) -> String {
    let child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["--no-optional-locks", "-c", "core.quotePath=true"])
        .arg(&args[0])
        .args([
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--stat",
            "-p",
        ])
        .args(&args[1..])
        .arg("--")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_PAGER", "cat")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return "<p>git cannot run here</p>".into();
    };
    let pid = child.id() as libc::pid_t;
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let dog = std::thread::spawn(move || {
        if watch.recv_timeout(GIT_LIMIT).is_err() {
            // SAFETY: kill(2) of our own child, not yet reaped (the wait below follows
            // this thread's end).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut out = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = stdout.take(DIFF_MAX).read_to_end(&mut out);
    }
    let _ = done.send(());
    let _ = dog.join();
    let _ = child.kill();
    let _ = child.wait();
    let mut h = format!(
        "<pre class=\"diff\">{}</pre>",
        esc(&text::clean(&out, false))
    );
    if out.len() as u64 >= DIFF_MAX {
        let _ = write!(
            h,
            "<p class=\"cut\">cut at {DIFF_MAX} bytes: the rest is in git</p>"
        );
    }
    h
}

/// A stop or resume button: what `orbit stop` or `orbit resume` does, said on the loop's
/// page.
pub fn press(app: &App, n: usize, stop: bool) {
    let dir = &app.loops[n].dir;
    let done = if stop {
        crate::control::stop_loop(dir, STOP_WAIT)
    } else {
        crate::control::resume_loop(dir)
    };
    let said = match done {
        Ok(words) => format!(
            "{}: {words}",
            if stop { "orbit stop" } else { "orbit resume" }
        ),
        Err(e) => format!(
            "{} refused: {e}",
            if stop { "orbit stop" } else { "orbit resume" }
        ),
    };
    app.said
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(n, said);
}
