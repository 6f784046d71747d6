//! A task file, `.orbit/queue/<task>.md`: the description (what each attempt's agent reads),
//! one `**Field:** value` line per field, then the queue's history (`## Attempt N failure`
//! sections and the like). One parser and one printer, so a file the queue writes reads
//! back the same and a file a human edits is read as the queue would write it.

use crate::contract::queue::{TASK_FIELDS, TaskStatus};
use crate::goal;

/// The default of `**Max-Attempts:**`.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// The longest task name (the loops of its attempts add `-aN`).
pub const NAME_MAX: usize = 32;

/// One task, as its file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub description: String,
    pub verifier: String,
    pub status: TaskStatus,
    pub attempts: u32,
    pub max_attempts: u32,
    pub priority: i64,
    pub after: Vec<String>,
    pub engine: Option<String>,
    pub exec: Option<String>,
    pub max_iterations: Option<u64>,
    pub exec_timeout: Option<String>,
    pub loop_timeout: Option<String>,
    pub usd_cap: Option<String>,
    pub pass_k: Option<u32>,
    pub sandbox: Option<String>,
    pub protect: Vec<String>,
    /// Every other flag of `orbit init` for each attempt's loop, as words.
    pub init: Vec<String>,
    pub reason: Option<String>,
    pub merged: Option<String>,
    /// The integration branch's commit a task done with no change of its own was verified
    /// on (its goal was met there already).
    pub verified_on: Option<String>,
    /// The queue's history, verbatim: from the first `## ` heading to the end.
    pub history: String,
}

/// Why a task's text does not parse: the line (1-based, of the text given) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

impl Task {
    /// A new task: `ready`, no attempt yet.
    pub fn new(description: &str, verifier: &str) -> Task {
        Task {
            description: description.trim().to_string(),
            verifier: verifier.to_string(),
            status: TaskStatus::Ready,
            attempts: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            priority: 0,
            after: Vec::new(),
            engine: None,
            exec: None,
            max_iterations: None,
            exec_timeout: None,
            loop_timeout: None,
            usd_cap: None,
            pass_k: None,
            sandbox: None,
            protect: Vec::new(),
            init: Vec::new(),
            reason: None,
            merged: None,
            verified_on: None,
            history: String::new(),
        }
    }

    /// The fields as `(name, value)` lines, in the order the queue writes them.
    fn field_lines(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("Verifier", self.verifier.clone()),
            ("Status", self.status.as_str().to_string()),
            ("Attempts", self.attempts.to_string()),
            ("Max-Attempts", self.max_attempts.to_string()),
            ("Priority", self.priority.to_string()),
        ];
        if !self.after.is_empty() {
            out.push(("After", self.after.join(", ")));
        }
        let opt = [
            ("Engine", self.engine.clone()),
            ("Exec", self.exec.clone()),
            ("Max-Iterations", self.max_iterations.map(|n| n.to_string())),
            ("Exec-Timeout", self.exec_timeout.clone()),
            ("Loop-Timeout", self.loop_timeout.clone()),
            ("Usd-Cap", self.usd_cap.clone()),
            ("Pass-K", self.pass_k.map(|n| n.to_string())),
            ("Sandbox", self.sandbox.clone()),
        ];
        out.extend(opt.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
        out.extend(self.protect.iter().map(|g| ("Protect", g.clone())));
        if !self.init.is_empty() {
            out.push(("Init", super::init_flags::print(&self.init)));
        }
        if let Some(r) = &self.reason {
            out.push(("Reason", r.clone()));
        }
        if let Some(m) = &self.merged {
            out.push(("Merged", m.clone()));
        }
        if let Some(v) = &self.verified_on {
            out.push(("Verified-On", v.clone()));
        }
        out
    }

    /// The file's text.
    pub fn print(&self) -> String {
        let mut out = String::new();
        out.push_str(self.description.trim_end());
        out.push_str("\n\n");
        for (k, v) in self.field_lines() {
            out.push_str(&format!("**{k}:** {v}\n"));
        }
        if !self.history.trim().is_empty() {
            out.push('\n');
            out.push_str(self.history.trim_end());
            out.push('\n');
        }
        out
    }

    /// Parses a task's text (a task file, or one `##` section of a backlog without its
    /// heading: `first_line` is the number of its first line in the file, for the errors).
    pub fn parse(text: &str, first_line: usize) -> Result<Task, ParseError> {
        let mut t = Task::new("", "");
        let mut description: Vec<&str> = Vec::new();
        let mut seen_verifier = false;
        let mut history_at = None;
        let lines: Vec<&str> = text.lines().collect();
        for (i, raw) in lines.iter().enumerate() {
            let line_no = first_line + i;
            if raw.starts_with("## ") {
                history_at = Some(i);
                break;
            }
            let Some((name, value)) = field_of(raw) else {
                description.push(raw);
                continue;
            };
            let err = |reason: String| ParseError {
                line: line_no,
                reason,
            };
            set_field(&mut t, name, value.trim()).map_err(err)?;
            seen_verifier |= name == "Verifier";
        }
        if let Some(at) = history_at {
            t.history = lines[at..].join("\n");
        }
        t.description = description.join("\n").trim().to_string();
        let end = first_line + lines.len().max(1) - 1;
        if !seen_verifier || t.verifier.is_empty() {
            return Err(ParseError {
                line: end,
                reason: "no **Verifier:** line: add `**Verifier:** CMD`, the command that exits 0 when the task is done".into(),
            });
        }
        if t.description.is_empty() {
            return Err(ParseError {
                line: first_line,
                reason: "no description: write what the task is about, above its fields".into(),
            });
        }
        if t.engine.as_deref() == Some("custom") && t.exec.is_none() {
            return Err(ParseError {
                line: end,
                reason: "**Engine:** custom needs an **Exec:** line, the agent's command".into(),
            });
        }
        Ok(t)
    }

    /// The section the next attempt's goal carries: every earlier failure, verbatim.
    pub fn failures(&self) -> &str {
        self.history.trim()
    }
}

/// `**Name:** value` on one line: the name and the value.
fn field_of(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("**")?;
    let (name, value) = rest.split_once(":**")?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphabetic() || c == '-') {
        return None;
    }
    Some((name, value))
}

fn number<T: std::str::FromStr>(name: &str, value: &str, what: &str) -> Result<T, String> {
    value
        .parse::<T>()
        .map_err(|_| format!("**{name}:** '{value}' is not {what}"))
}

fn positive<T: std::str::FromStr + PartialEq + From<u8>>(
    name: &str,
    value: &str,
) -> Result<T, String> {
    let n: T = number(name, value, "a whole number of at least 1")?;
    if n == T::from(0) {
        return Err(format!("**{name}:** must be at least 1"));
    }
    Ok(n)
}

fn set_field(t: &mut Task, name: &str, value: &str) -> Result<(), String> {
    let some = |v: &str| Some(v.to_string());
    match name {
        "Verifier" => t.verifier = value.to_string(),
        "Status" => {
            t.status = TaskStatus::parse(value).ok_or_else(|| {
                format!(
                    "**Status:** '{value}' is none of {}",
                    TaskStatus::ALL
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?
        }
        "Attempts" => t.attempts = number(name, value, "a whole number")?,
        "Max-Attempts" => t.max_attempts = positive(name, value)?,
        "Priority" => t.priority = number(name, value, "an integer")?,
        "After" => t.after = parse_after(value)?,
        "Engine" => {
            if crate::contract::Engine::parse(value).is_none() {
                return Err(format!(
                    "**Engine:** '{value}' is no engine orbit knows (orbit init --help lists them)"
                ));
            }
            t.engine = some(value)
        }
        "Exec" => t.exec = some(value),
        "Max-Iterations" => t.max_iterations = Some(positive(name, value)?),
        "Exec-Timeout" | "Loop-Timeout" => {
            goal::parse_duration(name, value).map_err(|e| e.to_string())?;
            if name == "Exec-Timeout" {
                t.exec_timeout = some(value)
            } else {
                t.loop_timeout = some(value)
            }
        }
        "Usd-Cap" => {
            goal::parse_usd(name, value).map_err(|e| e.to_string())?;
            t.usd_cap = some(value)
        }
        "Pass-K" => t.pass_k = Some(positive(name, value)?),
        "Sandbox" => {
            if !matches!(value, "auto" | "bwrap" | "none") {
                return Err(format!(
                    "**Sandbox:** '{value}' is none of auto, bwrap, none"
                ));
            }
            t.sandbox = some(value)
        }
        "Protect" => t.protect.push(value.to_string()),
        "Init" => {
            let words =
                super::init_flags::parse(value).map_err(|why| format!("**Init:** {why}"))?;
            t.init.extend(words);
            super::init_flags::check(&t.init).map_err(|why| format!("**Init:** {why}"))?
        }
        "Reason" => t.reason = Some(value.to_string()).filter(|v| !v.is_empty()),
        "Merged" => t.merged = Some(value.to_string()).filter(|v| !v.is_empty()),
        "Verified-On" => t.verified_on = Some(value.to_string()).filter(|v| !v.is_empty()),
        _ => {
            return Err(format!(
                "unknown field **{name}:**; the fields are {}",
                TASK_FIELDS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(())
}

/// `a, b`: task names, each a plain name.
fn parse_after(value: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !is_task_name(name) {
            return Err(format!(
                "**After:** '{name}' is not a task name (lowercase letters, digits and '-')"
            ));
        }
        out.push(name.to_string());
    }
    Ok(out)
}

/// Whether `name` is a task's name: what [`name_of`] makes.
pub fn is_task_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A task's name from its description's first line.
pub fn name_of(description: &str) -> String {
    let first = description
        .lines()
        .map(|l| l.trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or("task");
    goal::slugify(first, NAME_MAX).unwrap_or_else(|| "task".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_task_reads_back_the_same() {
        let mut t = Task::new("Add a login page\n\nWith a form.", "cargo test login");
        t.after = vec!["make-db".into(), "add-user".into()];
        t.protect = vec!["tests/**".into(), "Cargo.toml".into()];
        t.engine = Some("custom".into());
        t.exec = Some("agent --fast".into());
        t.max_iterations = Some(3);
        t.init = [
            "--setup",
            "printf '%s\\n' \"it's $HOME\" # kept, not a comment",
            "--allow-host",
            "*.example.com",
            "--no-auto-protect",
            "--setup",
            "",
        ]
        .map(String::from)
        .to_vec();
        t.history = "## Attempt 1 failure\n\nred\n".into();
        let back = Task::parse(&t.print(), 1).unwrap();
        assert_eq!(back.history.trim(), t.history.trim());
        t.history = back.history.clone();
        assert_eq!(back, t);
    }

    #[test]
    fn a_bad_field_is_named_with_its_line() {
        let e = Task::parse("goal\n\n**Verifier:** true\n**Attempts:** many\n", 1).unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.reason.contains("Attempts"), "{}", e.reason);
        let e = Task::parse("goal\n**Colour:** red\n**Verifier:** true\n", 10).unwrap_err();
        assert_eq!(e.line, 11);
        assert!(e.reason.contains("unknown field"), "{}", e.reason);
        let e = Task::parse("goal\n**Verifier:** true\n**Init:** --setup 'x\n", 1).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.reason.contains("unbalanced quotes"), "{}", e.reason);
        let e = Task::parse("goal\n**Verifier:** true\n**Init:** --force\n", 1).unwrap_err();
        assert!(e.reason.starts_with("**Init:** --force: "), "{}", e.reason);
        let e = Task::parse("goal only\n", 1).unwrap_err();
        assert!(e.reason.contains("Verifier"), "{}", e.reason);
    }
}
