//! `orbit verify --rerun --record`: the envelope of a loop that reached DONE before
//! envelopes. Its checks run PASS_K times in a clean checkout of its branch's head (the
//! `--rerun` of `orbit verify`), and only when every run passes is the envelope written:
//! envelope.json, in the format the runner writes (what the loop does not know is `null`),
//! journaled as `envelope_write` (`by` `orbit verify --record`) under the loop's lock, and
//! the same bytes as the commit's note under refs/notes/orbit.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::config::LoopConfig;
use crate::contract::EventName;
use crate::envelope::{git, git_line};
use crate::error::{Error, Result};
use crate::{envelope, events, fsx, state};

/// The hand-off to record: the repository, the reference and its commit, the loop.
pub struct Handoff<'a> {
    pub repo: &'a Path,
    pub reference: &'a str,
    pub commit: &'a str,
    pub loop_dir: Option<&'a Path>,
}

/// What `--record` needs of the loop, read before anything runs.
pub struct Plan {
    pub pass_k: u64,
    pub holdout: bool,
}

/// Refuses what `--record` cannot do: no loop directory, a loop not DONE, an envelope
/// already there. The loop's PASS_K and whether it has holdout checks.
pub fn plan(t: &Handoff) -> Result<Plan> {
    let Some(dir) = t.loop_dir else {
        return Err(Error::Usage(format!(
            "--record needs the loop directory: {} is not a loop (name the loop, or run it where the loop lives)",
            t.reference
        )));
    };
    if dir.join(envelope::FILE).exists() {
        return Err(Error::Usage(format!(
            "{} has an envelope already: nothing to record (orbit verify checks it)",
            dir.display()
        )));
    }
    let st = state::State::parse_file(&dir.join("state.env"))?;
    if st.last_status != crate::contract::Status::Done {
        return Err(Error::Usage(format!(
            "the loop {} is {}, not DONE: only a DONE loop's hand-off is recorded (orbit run it to DONE)",
            dir.display(),
            st.last_status
        )));
    }
    let cfg = LoopConfig::load(&dir.join("loop.toml"))?;
    Ok(Plan {
        pass_k: u64::from(cfg.pass_k.max(1)),
        holdout: !cfg.holdout.is_empty(),
    })
}

/// verify.sh's checks as the runner reads them: NAME, COMMAND and ROLE of each (its checks
/// function run with run_check printing instead of running, in bash).
fn check_list(dir: &Path) -> Result<Vec<(String, String, String)>> {
    let script = r#"eval "$(sed -n '/^checks() {$/,/^}$/p' "$1")"
run_check() { printf '%s\0%s\0%s\0' "$1" "$2" "${3:-acceptance}"; }
checks"#;
    let out = Command::new("bash")
        .args(["-c", script, "orbit-record"])
        .arg(dir.join("verify.sh"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| Error::io("cannot run bash", e))?;
    let fields: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .map(str::to_string)
        .collect();
    let list: Vec<_> = fields
        .chunks_exact(3)
        .map(|c| (c[0].clone(), c[1].clone(), c[2].clone()))
        .collect();
    if list.is_empty() {
        return Err(Error::Refused(
            "verify.sh's checks could not be read: nothing recorded".into(),
        ));
    }
    Ok(list)
}

/// The script a check's command runs, relative to the repository's root, as the runner
/// names it: its first word (./ taken off), or its second after an interpreter.
fn script_of(cmd: &str) -> Option<String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let mut w = *words.first()?;
    if matches!(
        w,
        "bash" | "sh" | "zsh" | "dash" | "python" | "python3" | "node" | "perl" | "ruby"
    ) {
        w = words.get(1)?;
    }
    let w = w.strip_prefix("./").unwrap_or(w);
    let bad = w.is_empty()
        || w.starts_with('/')
        || w.starts_with('-')
        || w.contains("..")
        || w.contains([';', '|', '&', '<', '>', '(', ')', '\'', '"', '$', '`']);
    (!bad).then(|| w.to_string())
}

/// The sha256 of `path` in `commit`'s tree.
fn blob_sha(repo: &Path, commit: &str, path: &str) -> Option<String> {
    let spec = format!("{commit}:{path}");
    if git_line(repo, &["cat-file", "-t", &spec]).as_deref() != Some("blob") {
        return None;
    }
    git(repo, &["cat-file", "blob", &spec]).map(|b| fsx::sha256_hex(&b))
}

fn js(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn js_opt(s: &str) -> String {
    if s.is_empty() { "null".into() } else { js(s) }
}

/// The envelope's line without its digest member, in the runner's member order.
fn line(t: &Handoff, dir: &Path, plan: &Plan, protected: &[String]) -> Result<String> {
    let cfg = LoopConfig::load(&dir.join("loop.toml"))?;
    let st = state::State::parse_file(&dir.join("state.env"))?;
    let read = |name: &str| fsx::read_regular_opt(&dir.join(name)).ok().flatten();
    let sha_file = |name: &str| read(name).map(|b| fsx::sha256_hex(&b)).unwrap_or_default();
    let base = read(".baseline-commit")
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let tree = git_line(t.repo, &["rev-parse", &format!("{}^{{tree}}", t.commit)])
        .ok_or_else(|| Error::Git(format!("the tree of {} cannot be read", t.commit)))?;
    let vsha = sha_file("verify.sh");
    let checks: Vec<String> = check_list(dir)?
        .into_iter()
        .map(|(name, cmd, role)| {
            let mut files = format!(r#"[{{"path":"verify.sh","in":"loop","sha256":"{vsha}"}}"#);
            if let Some(p) = script_of(&cmd)
                && let Some(sha) = blob_sha(t.repo, t.commit, &p)
            {
                files.push_str(&format!(
                    r#",{{"path":{},"in":"tree","sha256":"{sha}"}}"#,
                    js(&p)
                ));
            }
            format!(
                r#"{{"name":{},"command":{},"role":{},"passes":{},"tests":null,"files":{files}]}}"#,
                js(&name),
                js(&cmd),
                js(&role),
                plan.pass_k
            )
        })
        .collect();
    let protected: Vec<String> = protected
        .iter()
        .filter_map(|p| {
            let sha = blob_sha(t.repo, t.commit, p)?;
            Some(format!(r#"{{"path":{},"sha256":"{sha}"}}"#, js(p)))
        })
        .collect();
    let holdout = if plan.holdout {
        let mut defs = vec![format!(
            r#"{{"path":"holdout.sh","sha256":"{}"}}"#,
            sha_file("holdout.sh")
        )];
        let mut found = Vec::new();
        collect_files(&dir.join("holdout"), &mut found);
        found.sort();
        for f in found {
            let rel = f.strip_prefix(dir).unwrap_or(&f).display().to_string();
            let sha = fsx::read_regular(&f)
                .map(|b| fsx::sha256_hex(&b))
                .unwrap_or_default();
            defs.push(format!(r#"{{"path":{},"sha256":"{sha}"}}"#, js(&rel)));
        }
        format!(
            r#"{{"verdict":"pass","checks":{},"definitions":[{}]}}"#,
            cfg.holdout.len(),
            defs.join(",")
        )
    } else {
        "null".into()
    };
    let journal = events::read(&read("events.jsonl").unwrap_or_default());
    let head = journal
        .events
        .last()
        .map(|e| e.hash.clone())
        .unwrap_or_default();
    Ok(format!(
        concat!(
            r#"{{"envelope":{},"contract":{},"loop":{},"goal_sha256":"{}","base_commit":{},"commit":{},"tree":{},"#,
            r#""branch":{},"origin_branch":{},"checks":[{}],"protected":[{}],"pass_k":{},"holdout":{},"#,
            r#""judge":null,"confirm":null,"sandbox":null,"network":null,"engine":{},"model":null,"#,
            r#""iterations":{},"cost_reported_microusd":{},"journal_head":{}}}"#
        ),
        envelope::FORMAT,
        js(&cfg.contract_version),
        js(&cfg.name),
        sha_file("goal.md"),
        js_opt(&base),
        js(t.commit),
        js(&tree),
        js_opt(&st.iter_branch),
        js_opt(&st.origin_branch),
        checks.join(","),
        protected.join(","),
        plan.pass_k,
        holdout,
        js(cfg.engine.as_str()),
        st.next_iteration.saturating_sub(1),
        st.cost_microusd,
        js_opt(&head),
    ))
}

/// Every regular file under `dir`, recursively.
fn collect_files(dir: &Path, into: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            collect_files(&e.path(), into);
        } else if ft.is_file() {
            into.push(e.path());
        }
    }
}

/// The paths the loop's protect globs match in the clean checkout `ws`.
pub fn protected_in(ws: &Path, dir: &Path) -> Vec<String> {
    let Ok(cfg) = LoopConfig::load(&dir.join("loop.toml")) else {
        return Vec::new();
    };
    let mut all: Vec<String> = cfg
        .protect
        .iter()
        .filter_map(|g| crate::protect::set_files(ws, g, dir))
        .flatten()
        .map(|p| String::from_utf8_lossy(&p).into_owned())
        .collect();
    all.sort();
    all.dedup();
    all
}

/// Writes the envelope of `t` (whose checks just passed PASS_K times): envelope.json,
/// its envelope_write under the loop's lock, then the note. The digest.
pub fn write(t: &Handoff, plan: &Plan, protected: &[String]) -> Result<String> {
    let dir = t.loop_dir.expect("plan checked the loop directory");
    let _held = crate::control::hold_lock(dir)?;
    let bytes = envelope::seal(&line(t, dir, plan, protected)?);
    let e = envelope::parse(bytes.as_bytes()).map_err(|u| {
        Error::Refused(format!(
            "the envelope made is not one orbit reads ({}): nothing recorded",
            u.describe()
        ))
    })?;
    let path = dir.join(envelope::FILE);
    fsx::write_atomic(&path, bytes.as_bytes())?;
    let iteration = e.iterations.unwrap_or(0);
    crate::control::append_event(
        dir,
        EventName::EnvelopeWrite,
        iteration,
        &[
            ("commit", events::value(t.commit)),
            ("digest", events::value(&e.digest)),
            ("signed", "false".to_string()),
            ("by", events::value("orbit verify --record")),
        ],
    )?;
    let p = path.display().to_string();
    if git(
        t.repo,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "notes",
            "--ref=orbit",
            "add",
            "-f",
            "-F",
            &p,
            t.commit,
        ],
    )
    .is_none()
    {
        eprintln!(
            "orbit verify: the note on {} could not be written: envelope.json holds the envelope",
            t.commit
        );
    }
    Ok(e.digest)
}
