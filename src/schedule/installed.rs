//! The schedule of a loop as installed on this machine, the record `orbit schedule
//! --install` keeps of it, and what orbit would render for it now (contract section 7).
//!
//! The installed schedule of a loop is every line of the user's crontab that ends with the
//! loop's `# orbit:` marker, and its systemd user units (`orbit-<name>-<hash>.service` and
//! `.timer`) with their drop-ins, in every directory of the user's unit search path that a
//! user can write ([`unit_dirs`]). Its *view* is one line per entry, byte-sorted: `cron
//! LINE`, `unit SHA256 PATH`. The record, [`RECORD`] in the loop directory, holds the view
//! as orbit installed it, after a `dir DIR` line naming the loop directory it was made for
//! (a loop directory committed and cloned elsewhere carries a record of another place,
//! which is not its own). The runner computes the same view (`lib/runner/schedule.sh`) and
//! stops with `script_tamper` when it differs from the record: an agent that runs as the
//! user could otherwise add an `ExecStartPre=` to the unit or rewrite the crontab line,
//! keeping its marker, and have its command run by the next tick.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::config::LoopConfig;
use crate::error::{Error, Result};
use crate::fsx;
use crate::schedule::local::{Found, Target, cron_line, sh_word, systemd_units, which};
use crate::schedule::{EVEN_HOURS, EVEN_MINUTES, cron_when};

/// The record of the installed schedule, in the loop directory.
pub const RECORD: &str = "schedule.installed";

const HEADER: &str = "\
# The schedule `orbit schedule --install` installed for this loop on this machine. Every run
# of the runner compares it with what is installed (a difference is script_tamper, and the
# loop stops). Written by orbit schedule, removed by orbit schedule --remove: never edit it.
";

/// How long `crontab -l` may take before it is given up.
const CRONTAB_LIMIT: Duration = Duration::from_secs(5);

/// `crontab -l`, bounded: `None` without a crontab program, or when it cannot be read (no
/// crontab yet is an empty one).
pub fn crontab_text() -> Option<String> {
    let program = which("crontab")?;
    let mut child = Command::new(program)
        .arg("-l")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = child.stdout.take()?;
    // The output ends when crontab exits (or closes it): waited for, within the limit.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    let Ok(bytes) = rx.recv_timeout(CRONTAB_LIMIT) else {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    };
    let status = child.wait().ok();
    match status {
        Some(st) if st.success() => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Some(_) => Some(String::new()),
        None => None,
    }
}

/// The end of every crontab line of the loop in `dir`.
pub fn marker(dir: &Path) -> Result<String> {
    Ok(format!(" # orbit:{}", sh_word(&dir.display().to_string())?))
}

/// The name of the loop's systemd units (as `local::schedule_name`).
pub fn unit_name(dir: &Path, name: &str) -> String {
    let hash = fsx::sha256_hex(dir.as_os_str().as_encoded_bytes());
    format!("orbit-{name}-{}", &hash[..8])
}

fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The directories of the user's systemd unit search path a user can write, where a unit
/// or a drop-in of the loop's name would be read: `~/.config/systemd/user`, the same under
/// `$XDG_CONFIG_HOME`, their `user.control` twins (which outrank them) and
/// `$XDG_RUNTIME_DIR/systemd/user.control`. The runner looks at the same list.
pub fn unit_dirs() -> Vec<PathBuf> {
    let home = env_dir("HOME").unwrap_or_else(|| PathBuf::from("/nonexistent"));
    let config = env_dir("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"));
    let mut dirs = vec![
        home.join(".config/systemd/user"),
        config.join("systemd/user"),
        home.join(".config/systemd/user.control"),
        config.join("systemd/user.control"),
    ];
    if let Some(run) = env_dir("XDG_RUNTIME_DIR") {
        dirs.push(run.join("systemd/user.control"));
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// One unit file or drop-in of the loop, as installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFile {
    pub path: PathBuf,
    pub sha: String,
    pub text: String,
}

/// The loop's schedule as installed now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// The loop's crontab lines, with their 1-based line in the crontab.
    pub cron: Vec<(usize, String)>,
    /// Its unit files and drop-ins.
    pub units: Vec<UnitFile>,
}

impl View {
    /// The view's lines, byte-sorted, as the record and the runner write them.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .cron
            .iter()
            .map(|(_, l)| format!("cron {l}"))
            .chain(self.units.iter().map(unit_line))
            .collect();
        lines.sort();
        lines.dedup();
        lines
    }

    pub fn is_empty(&self) -> bool {
        self.cron.is_empty() && self.units.is_empty()
    }
}

fn unit_line(u: &UnitFile) -> String {
    format!("unit {} {}", u.sha, u.path.display())
}

fn unit_file(path: &Path) -> Option<UnitFile> {
    if !path.is_file() || path.as_os_str().as_encoded_bytes().contains(&b'\n') {
        return None;
    }
    let bytes = fs::read(path).ok()?;
    Some(UnitFile {
        path: path.to_path_buf(),
        sha: fsx::sha256_hex(&bytes),
        text: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// The unit files and drop-ins named for the loop, in every directory of [`unit_dirs`].
pub fn unit_files(unit: &str) -> Vec<UnitFile> {
    let mut out = Vec::new();
    for d in unit_dirs() {
        for ext in ["service", "timer"] {
            let file = d.join(format!("{unit}.{ext}"));
            out.extend(unit_file(&file));
            let mut drops: Vec<PathBuf> = fs::read_dir(d.join(format!("{unit}.{ext}.d")))
                .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
                .unwrap_or_default();
            drops.sort();
            out.extend(drops.iter().filter_map(|p| unit_file(p)));
        }
    }
    out
}

/// The schedule of the loop in `dir` (canonical), named `name`, as installed now.
pub fn view(dir: &Path, name: &str) -> Result<View> {
    let marker = marker(dir)?;
    let cron = crontab_text()
        .unwrap_or_default()
        .lines()
        .enumerate()
        .filter(|(_, l)| l.ends_with(&marker))
        .map(|(i, l)| (i + 1, l.to_string()))
        .collect();
    Ok(View {
        cron,
        units: unit_files(&unit_name(dir, name)),
    })
}

/// The record of the loop in `dir`: its view lines, when it is a record of `dir`.
pub fn record_read(dir: &Path) -> Result<Option<Vec<String>>> {
    let Some(bytes) = fsx::read_regular_opt(&dir.join(RECORD))? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let own = format!("dir {}", dir.display());
    if lines.next() != Some(own.as_str()) {
        return Ok(None);
    }
    let mut out: Vec<String> = lines
        .filter(|l| l.starts_with("cron ") || l.starts_with("unit "))
        .map(str::to_string)
        .collect();
    out.sort();
    Ok(Some(out))
}

/// Writes the record (or removes it when `lines` is empty).
fn record_write(dir: &Path, mut lines: Vec<String>) -> Result<()> {
    let path = dir.join(RECORD);
    if lines.is_empty() {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(format!("cannot remove {}", path.display()), e))
            }
            _ => Ok(()),
        };
    }
    lines.sort();
    lines.dedup();
    let mut text = format!("{HEADER}dir {}\n", dir.display());
    for l in lines {
        text.push_str(&l);
        text.push('\n');
    }
    fsx::write_atomic(&path, text.as_bytes())
}

/// The record without the lines of one kind (`cron ` or `unit `).
fn record_without(dir: &Path, kind: &str) -> Result<Vec<String>> {
    Ok(record_read(dir)?
        .unwrap_or_default()
        .into_iter()
        .filter(|l| !l.starts_with(kind))
        .collect())
}

/// Records the crontab line `orbit schedule --cron --install` installed for the loop.
pub fn record_cron(dir: &Path, line: &str) -> Result<()> {
    let mut lines = record_without(dir, "cron ")?;
    lines.push(format!("cron {line}"));
    record_write(dir, lines)
}

/// Records the unit files `orbit schedule --systemd --install` wrote for the loop, as they
/// are on disk now.
pub fn record_units(dir: &Path, files: &[PathBuf]) -> Result<()> {
    let mut lines = record_without(dir, "unit ")?;
    for f in files {
        let u = unit_file(f).ok_or_else(|| Error::path(f, "cannot be read back"))?;
        lines.push(unit_line(&u));
    }
    record_write(dir, lines)
}

/// Forgets the crontab line (`cron`) and the units (`units`) of the loop's record; the
/// record goes with its last line.
pub fn forget(dir: &Path, cron: bool, units: bool) -> Result<()> {
    if !dir.join(RECORD).exists() {
        return Ok(());
    }
    let lines = record_read(dir)?
        .unwrap_or_default()
        .into_iter()
        .filter(|l| !(cron && l.starts_with("cron ") || units && l.starts_with("unit ")))
        .collect();
    record_write(dir, lines)
}

/// What `orbit schedule --list` says below a schedule of a loop: each way it differs from
/// the record and from what orbit renders for it now, the differing lines, and the fix.
pub fn list_notes(f: &Found) {
    const PAD: &str = "         ";
    if f.kind == "systemd" && f.dir.as_os_str().is_empty() {
        println!("{PAD}modified: its ExecStart= runs no loop directory's run-loop.sh");
        return;
    }
    if !matches!(f.kind, "cron" | "systemd") || !f.dir.join("loop.toml").is_file() {
        return;
    }
    let shown = crate::shell::paste_word(&f.dir.display().to_string());
    let diffs = match differences(&f.dir, &shown, Against::Both) {
        Ok(d) => d,
        Err(e) => {
            println!("{PAD}cannot compare it with what orbit installed: {e}");
            return;
        }
    };
    let mut said: Vec<String> = Vec::new();
    for d in diffs {
        if said.contains(&d.evidence) {
            continue;
        }
        said.push(d.evidence.clone());
        let cron = d.evidence.starts_with("crontab:");
        if cron != (f.kind == "cron") || (!cron && !d.evidence.contains(&f.name)) {
            continue;
        }
        println!("{PAD}modified: {} ({})", d.what, d.evidence);
        for l in &d.lines {
            println!("{PAD}  {l}");
        }
        println!("{PAD}fix: {}", d.fix);
    }
}

/// One way an installed schedule differs from what it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// `crontab:LINE`, or the unit file's `PATH:LINE`.
    pub evidence: String,
    /// What differs, in a sentence.
    pub what: String,
    /// The differing lines: `- ` what it should be, `+ ` what is installed.
    pub lines: Vec<String>,
    /// The command that reinstalls the schedule as orbit renders it.
    pub fix: String,
}

/// The intervals `--every` takes.
fn everies() -> impl Iterator<Item = String> {
    EVEN_MINUTES
        .iter()
        .map(|m| format!("{m}m"))
        .chain(EVEN_HOURS.iter().map(|h| format!("{h}h")))
}

/// One POSIX-quoted word (`'...'`, a quote inside as `'\''`) at the start of `s`: the word
/// and the rest.
fn sh_unword(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut rest = s;
    loop {
        let inner = rest.strip_prefix('\'')?;
        let end = inner.find('\'')?;
        out.push_str(&inner[..end]);
        rest = &inner[end + 1..];
        match rest.strip_prefix("\\'") {
            Some(r) => {
                out.push('\'');
                rest = r;
            }
            None => return Some((out, rest)),
        }
    }
}

/// The bash a schedule names, when it is a plausible one (a file named bash, outside
/// HOME); else the bash orbit would name now.
fn bash_for(named: &str) -> Option<PathBuf> {
    let p = PathBuf::from(named);
    let home = env_dir("HOME");
    let plausible = p.is_absolute()
        && p.file_name().is_some_and(|n| n == "bash")
        && p.is_file()
        && !home.is_some_and(|h| p.starts_with(h));
    if plausible { Some(p) } else { which("bash") }
}

fn path_now() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
}

/// What orbit renders for an installed crontab line of the loop in `dir`: the line for its
/// calendar, PATH and bash (15m, this PATH and this bash where they cannot be read), and
/// the interval.
fn rendered_cron(dir: &Path, installed: &str) -> Result<(String, String)> {
    let when: Vec<&str> = installed.splitn(6, ' ').collect();
    let fields = when[..when.len().min(5)].join(" ");
    let every = everies()
        .find(|e| cron_when(e).is_ok_and(|w| w == fields))
        .unwrap_or_else(|| "15m".into());
    let words = installed
        .split_once(" cd / && PATH=")
        .and_then(|(_, r)| sh_unword(r))
        .and_then(|(path, r)| {
            let (bash, _) = sh_unword(r.strip_prefix(' ')?)?;
            Some((path, bash))
        });
    let (path, bash) = match words {
        Some((path, bash)) => (path, bash_for(&bash)),
        None => (path_now(), which("bash")),
    };
    let bash = bash.ok_or_else(|| Error::Usage("bash is not on PATH".into()))?;
    Ok((cron_line(dir, &bash, &path, &every)?, every))
}

/// What orbit renders for the loop's units: (service, timer, interval), for the PATH and
/// bash the installed service names and the calendar of the installed timer.
fn rendered_units(dir: &Path, name: &str, view: &View) -> Result<(String, String, String)> {
    let unit = unit_name(dir, name);
    let text_of = |ext: &str| {
        view.units
            .iter()
            .find(|u| {
                u.path
                    .file_name()
                    .is_some_and(|n| *n == *format!("{unit}.{ext}"))
            })
            .map(|u| u.text.clone())
            .unwrap_or_default()
    };
    let service = text_of("service");
    let timer = text_of("timer");
    let path = service
        .lines()
        .find_map(|l| l.strip_prefix("Environment=\"PATH="))
        .and_then(|l| l.strip_suffix('"'))
        .map(str::to_string)
        .unwrap_or_else(path_now);
    let bash = service
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .and_then(|l| l.split_once(" \""))
        .and_then(|(b, _)| bash_for(b))
        .or_else(|| which("bash"))
        .ok_or_else(|| Error::Usage("bash is not on PATH".into()))?;
    let t = Target {
        dir: dir.to_path_buf(),
        repo: crate::locate::repo_root(dir)?,
        name: name.to_string(),
        bash,
        path_env: path,
    };
    let calendar = timer.lines().find(|l| l.starts_with("OnCalendar="));
    let every = everies()
        .find(|e| {
            systemd_units(&t, e)
                .is_ok_and(|(_, tm)| tm.lines().find(|l| l.starts_with("OnCalendar=")) == calendar)
        })
        .unwrap_or_else(|| "15m".into());
    let (s, tm) = systemd_units(&t, &every)?;
    Ok((s, tm, every))
}

/// The lines of `have` not in `want` (`+ `, with their 1-based line) and of `want` not in
/// `have` (`- `); the first line of `have` that differs (its count + 1 when only lines are
/// missing), or `None` when they are the same.
fn line_diff(want: &str, have: &str) -> Option<(usize, Vec<String>)> {
    if want == have {
        return None;
    }
    let w: Vec<&str> = want.lines().collect();
    let h: Vec<&str> = have.lines().collect();
    let mut out: Vec<String> = w
        .iter()
        .filter(|l| !h.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    let added: Vec<(usize, &str)> = h
        .iter()
        .enumerate()
        .filter(|(_, l)| !w.contains(l))
        .map(|(i, l)| (i + 1, *l))
        .collect();
    out.extend(added.iter().map(|(i, l)| format!("+ {i}: {l}")));
    let first = added
        .first()
        .map(|(i, _)| *i)
        .or_else(|| h.iter().zip(&w).position(|(a, b)| a != b).map(|i| i + 1))
        .unwrap_or(h.len() + 1);
    Some((first, out))
}

/// What to look at, and what the installed schedule is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Against {
    /// The record, where there is one (what orbit installed); else what orbit renders now.
    RecordElseRendered,
    /// Both the record and what orbit renders now.
    Both,
}

/// How the loop's installed schedule differs from the record and from what orbit renders
/// for it now. `shown` is the loop directory as the fix commands name it.
pub fn differences(dir: &Path, shown: &str, against: Against) -> Result<Vec<Difference>> {
    let cfg = LoopConfig::load(&dir.join("loop.toml"))?;
    let view = view(dir, &cfg.name)?;
    let record = record_read(dir)?;
    if view.is_empty() && record.is_none() {
        return Ok(Vec::new());
    }
    let cron_fix = |every: &str| {
        format!(
            "review the crontab (crontab -l), then reinstall it as orbit renders it: orbit schedule {shown} --cron --every {every} --install"
        )
    };
    let mut out = Vec::new();
    let cron_every = view
        .cron
        .first()
        .and_then(|(_, l)| rendered_cron(dir, l).ok())
        .map_or_else(|| "15m".to_string(), |(_, e)| e);
    let has_units = !view.units.is_empty()
        || record
            .as_ref()
            .is_some_and(|r| r.iter().any(|l| l.starts_with("unit ")));
    let units = if has_units {
        Some(rendered_units(dir, &cfg.name, &view)?)
    } else {
        None
    };
    let unit_fix = |every: &str| {
        format!(
            "review the unit files, then reinstall them as orbit renders them: orbit schedule {shown} --systemd --every {every} --install"
        )
    };
    if let Some(rec) = &record {
        out.extend(record_cron_diff(&view, rec, &cron_fix(&cron_every)));
        if let Some((service, timer, every)) = &units {
            out.extend(record_unit_diffs(
                &view,
                rec,
                service,
                timer,
                &unit_fix(every),
            ));
        }
    }
    if record.is_none() || against == Against::Both {
        for (n, line) in &view.cron {
            let (want, every) = rendered_cron(dir, line)?;
            if let Some((_, lines)) = line_diff(&want, line) {
                out.push(Difference {
                    evidence: format!("crontab:{n}"),
                    what: "the loop's crontab line is not the one orbit renders for it".into(),
                    lines,
                    fix: cron_fix(&every),
                });
            }
        }
        if let Some((service, timer, every)) = &units {
            for u in &view.units {
                let name = u.path.display().to_string();
                let want = if name.ends_with(".service") {
                    service
                } else if name.ends_with(".timer") {
                    timer
                } else {
                    ""
                };
                if let Some((n, lines)) = line_diff(want, &u.text) {
                    out.push(Difference {
                        evidence: format!("{name}:{n}"),
                        what: unit_what(&u.path, "is not the unit orbit renders for the loop"),
                        lines,
                        fix: unit_fix_for(&u.path, &unit_fix(every)),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Whether `path` is a drop-in (a file in a `UNIT.d` directory).
fn is_drop_in(path: &Path) -> bool {
    path.parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n.to_string_lossy().ends_with(".d"))
}

/// The fix for a unit file: a drop-in is removed (orbit never writes one), a unit file
/// reinstalled.
fn unit_fix_for(path: &Path, reinstall: &str) -> String {
    if is_drop_in(path) {
        let p = crate::shell::paste_word(&path.display().to_string());
        format!(
            "review {p}, then remove it (rm {p}; systemctl --user daemon-reload): orbit never writes a drop-in"
        )
    } else {
        reinstall.to_string()
    }
}

fn unit_what(path: &Path, differs: &str) -> String {
    if is_drop_in(path) {
        format!(
            "{} is a drop-in of the loop's unit, which orbit never writes: systemd adds its lines to the unit",
            path.display()
        )
    } else {
        format!("{} {differs}", path.display())
    }
}

/// The loop's crontab lines against the record's.
fn record_cron_diff(view: &View, rec: &[String], fix: &str) -> Option<Difference> {
    let want: Vec<&str> = rec.iter().filter_map(|l| l.strip_prefix("cron ")).collect();
    let have: Vec<&str> = view.cron.iter().map(|(_, l)| l.as_str()).collect();
    if want == have {
        return None;
    }
    let mut lines: Vec<String> = want
        .iter()
        .filter(|l| !have.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    let added: Vec<&(usize, String)> = view
        .cron
        .iter()
        .filter(|(_, l)| !want.contains(&l.as_str()))
        .collect();
    lines.extend(added.iter().map(|(n, l)| format!("+ {n}: {l}")));
    let n = added.first().map_or(0, |(n, _)| *n);
    Some(Difference {
        evidence: format!("crontab:{n}"),
        what: format!(
            "the loop's crontab line is not the one orbit schedule installed (recorded in {RECORD})"
        ),
        lines,
        fix: fix.to_string(),
    })
}

/// The loop's unit files against the record's: a file changed, added (a drop-in) or gone.
fn record_unit_diffs(
    view: &View,
    rec: &[String],
    service: &str,
    timer: &str,
    fix: &str,
) -> Vec<Difference> {
    let recorded: Vec<(&str, &str)> = rec
        .iter()
        .filter_map(|l| l.strip_prefix("unit ")?.split_once(' '))
        .collect();
    let mut out = Vec::new();
    for u in &view.units {
        let name = u.path.display().to_string();
        if recorded.contains(&(u.sha.as_str(), name.as_str())) {
            continue;
        }
        let want = if name.ends_with(".service") {
            service
        } else if name.ends_with(".timer") {
            timer
        } else {
            ""
        };
        let (n, lines) = line_diff(want, &u.text).unwrap_or((1, Vec::new()));
        out.push(Difference {
            evidence: format!("{name}:{n}"),
            what: unit_what(
                &u.path,
                &format!("is not the unit orbit schedule installed (recorded in {RECORD})"),
            ),
            lines,
            fix: unit_fix_for(&u.path, fix),
        });
    }
    for (sha, path) in recorded {
        if !view.units.iter().any(|u| u.path == Path::new(path)) {
            out.push(Difference {
                evidence: format!("{path}:0"),
                what: format!(
                    "{path} is gone, though orbit schedule installed it (sha256 {sha}, recorded in {RECORD})"
                ),
                lines: Vec::new(),
                fix: fix.to_string(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_word_reads_back() {
        assert_eq!(sh_unword("'a b' rest"), Some(("a b".to_string(), " rest")));
        assert_eq!(sh_unword("'o'\\''q' x"), Some(("o'q".to_string(), " x")));
        assert_eq!(sh_unword("plain"), None);
        assert_eq!(sh_unword("'open"), None);
    }

    #[test]
    fn the_line_diff_names_what_was_added_and_where() {
        assert_eq!(line_diff("a\nb\n", "a\nb\n"), None);
        let (n, lines) = line_diff("a\nb\n", "a\nx\nb\n").unwrap();
        assert_eq!(n, 2);
        assert_eq!(lines, vec!["+ 2: x".to_string()]);
        let (n, lines) = line_diff("a\nb\n", "a\n").unwrap();
        assert_eq!(n, 2);
        assert_eq!(lines, vec!["- b".to_string()]);
    }

    #[test]
    fn every_interval_is_one_a_calendar_takes() {
        for e in everies() {
            assert!(cron_when(&e).is_ok(), "{e}");
        }
    }
}
