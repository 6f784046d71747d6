//! `orbit adequacy [LOOP|REF]`: which part of a loop's change its checks need. Each hunk of
//! the change outside the protected paths is reverted alone in a clean checkout of the
//! commit and the loop's checks run (verify.sh, and holdout.sh where the loop has a
//! holdout): a hunk is *needed* when a check then fails, *not needed* when every check still
//! passes. Then small mutants of the added lines run the same way: *killed* or *survived*.
//! Runs side by side up to the loop's check-jobs and stops at a budget, saying what it did
//! not try; it never touches the loop's workspace or branch.

pub mod diff;
pub mod mutants;
pub mod run;
pub mod tool;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::AdequacyArgs;
use crate::config::LoopConfig;
use crate::envelope::{self, git_line};
use crate::error::{Error, Result};
use crate::{goal, pins, state, verify};
use diff::{FileChange, FileKind};
use mutants::{Lang, Mutant};
use run::{Plan, Unit, Verdict};

/// The exit status when the checks fail on the commit itself (nothing can be measured).
pub const EXIT_CHECKS_FAIL: u8 = 3;
/// The exit status of `--gate` when the change has a hunk no check needs, or more surviving
/// mutants than the gate allows.
pub const EXIT_INADEQUATE: u8 = 4;
/// The loop directory's pin of the orbit binary the runner calls (contract: `orbit.sha256`):
/// one line, `<sha256>  <absolute path>`, written by `orbit init`.
pub const ORBIT_PIN: &str = "orbit.sha256";
/// What `--out DIR` writes: the record, its figures (one line: hunks needed, hunks tried,
/// mutants killed, mutants tried, the details' sha256), and a rejection's feedback.
pub const OUT_RECORD: &str = "adequacy.json";
pub const OUT_FIGURES: &str = "adequacy.figures";
pub const OUT_FEEDBACK: &str = "adequacy-feedback.txt";
/// At most this many mutants are tried by default (`--max-mutants`).
pub const DEFAULT_MAX_MUTANTS: usize = 200; // the default of `--max-mutants` (src/cli.rs)
/// A hunk longer than this is still reverted as one unit, and said.
pub const LONG_HUNK: usize = 1000;

/// What adequacy found, per unit, as the report and `--json` show it.
pub struct Findings {
    /// The loop directory the findings are of.
    pub loop_dir: Option<std::path::PathBuf>,
    /// The repository the commit is of.
    pub repo: std::path::PathBuf,
    pub base: String,
    pub commit: String,
    pub reference: String,
    pub budget: Duration,
    pub baseline: Duration,
    pub elapsed: Duration,
    pub files: Vec<FileChange>,
    pub units: Vec<Unit>,
    pub verdicts: Vec<Option<Verdict>>,
    /// Files left out of the hunks, with why (protected, the loop's own).
    pub left_out: Vec<(String, String)>,
    /// Things said about the change (a long hunk, a file not mutated and why).
    pub notes: Vec<String>,
    /// Mutants the cap left out.
    pub mutants_capped: usize,
}

impl Findings {
    fn count(&self, mutants: bool, hit: bool) -> (usize, usize) {
        let mut tried = 0;
        let mut hits = 0;
        for (u, v) in self.units.iter().zip(&self.verdicts) {
            if matches!(u, Unit::Mutant { .. }) != mutants {
                continue;
            }
            let Some(v) = v else { continue };
            if matches!(v, Verdict::NotApplied(_)) {
                continue;
            }
            tried += 1;
            if (v != &Verdict::Passed) == hit {
                hits += 1;
            }
        }
        (hits, tried)
    }

    /// (hunks needed, hunks tried, mutants killed, mutants tried).
    pub fn figures(&self) -> (usize, usize, usize, usize) {
        let (n, h) = self.count(false, true);
        let (k, m) = self.count(true, true);
        (n, h, k, m)
    }

    /// The gate's judgement (`--gate N`): `None` when every hunk tried is needed and at most
    /// `max_survivors` mutants survive, else the feedback that names them. A unit the
    /// budget left untried never rejects.
    pub fn gate_feedback(&self, max_survivors: u64) -> Option<String> {
        let d = self.json();
        let list = |key: &str, result: &str| -> Vec<String> {
            d[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|u| u["result"] == result)
                .map(|u| match (key, u["lines"].as_str()) {
                    ("hunks", Some(l)) => format!("{}:{l}", u["file"].as_str().unwrap_or("")),
                    ("hunks", None) => format!(
                        "{} (the whole file's change)",
                        u["file"].as_str().unwrap_or("")
                    ),
                    _ => format!(
                        "{}:{} {}: {}",
                        u["file"].as_str().unwrap_or(""),
                        u["line"],
                        u["operator"].as_str().unwrap_or(""),
                        u["text"].as_str().unwrap_or("").trim()
                    ),
                })
                .collect()
        };
        let unneeded = list("hunks", "not-needed");
        let survivors = list("mutants", "survived");
        let too_many = survivors.len() as u64 > max_survivors;
        if unneeded.is_empty() && !too_many {
            return None;
        }
        let mut out = format!(
            "The DONE claim was rejected: the loop's checks do not need all of the change ({}).\n",
            self.summary()
        );
        if !unneeded.is_empty() {
            out.push_str("Each of these hunks was reverted alone, and every check still passed:\n");
            for u in &unneeded {
                out.push_str(&format!("  - {u}\n"));
            }
            out.push_str("Remove the change, or make a check need it: a new test counts only when it fails without the change.\n");
        }
        if too_many {
            out.push_str(&format!(
                "These mutants of the lines you added survived every check ({} survived, at most {max_survivors} may):\n",
                survivors.len()
            ));
            for m in &survivors {
                out.push_str(&format!("  - {m}\n"));
            }
            out.push_str("Make a check fail on each of them (a test of the behaviour the line decides), or remove the code no check needs.\n");
        }
        Some(out)
    }

    /// The one line: "the checks need 5 of 7 changed hunks; 14 of 18 mutants killed".
    pub fn summary(&self) -> String {
        let (n, h, k, m) = self.figures();
        format!("the checks need {n} of {h} changed hunks; {k} of {m} mutants killed")
    }

    fn untried(&self, mutants: bool) -> usize {
        self.units
            .iter()
            .zip(&self.verdicts)
            .filter(|(u, v)| matches!(u, Unit::Mutant { .. }) == mutants && v.is_none())
            .count()
    }

    fn unit_json(&self, u: &Unit, v: &Option<Verdict>) -> Value {
        let (check, build, why) = match v {
            Some(Verdict::Failed { check, build }) => (Some(check.clone()), *build, None),
            Some(Verdict::TimedOut) => (Some("timeout".to_string()), false, None),
            Some(Verdict::NotApplied(w)) => (None, false, Some(w.clone())),
            _ => (None, false, None),
        };
        let result = match v {
            None => "not-tried",
            Some(Verdict::NotApplied(_)) => "not-applied",
            Some(Verdict::Passed) => match u {
                Unit::Mutant { .. } => "survived",
                _ => "not-needed",
            },
            Some(_) => match u {
                Unit::Mutant { .. } => "killed",
                _ => "needed",
            },
        };
        match u {
            Unit::Hunk { file, hunk } => json!({
                "file": self.files[*file].path, "kind": "hunk",
                "lines": hunk.new_range(), "start": hunk.new_start + 1, "len": hunk.new_len,
                "result": result, "check": check, "build_failure": build, "why": why,
            }),
            Unit::File { file } => {
                let f = &self.files[*file];
                json!({
                    "file": f.path, "old_file": f.old_path, "kind": f.kind.name(),
                    "result": result, "check": check, "build_failure": build, "why": why,
                })
            }
            Unit::Mutant { file, mutant } => json!({
                "file": self.files[*file].path, "line": mutant.line + 1,
                "operator": mutant.operator.name(), "text": mutant.text,
                "result": result, "check": check, "build_failure": build, "why": why,
            }),
        }
    }

    pub fn json(&self) -> Value {
        let (n, h, k, m) = self.figures();
        let (hunks, muts): (Vec<_>, Vec<_>) = self
            .units
            .iter()
            .zip(&self.verdicts)
            .partition(|(u, _)| !matches!(u, Unit::Mutant { .. }));
        json!({
            "ref": self.reference,
            "commit": self.commit,
            "base": self.base,
            "summary": self.summary(),
            "hunks_needed": n, "hunks_tried": h, "mutants_killed": k, "mutants_tried": m,
            "budget_s": self.budget.as_secs_f64(),
            "baseline_s": self.baseline.as_secs_f64(),
            "elapsed_s": self.elapsed.as_secs_f64(),
            "not_tried": {"hunks": self.untried(false), "mutants": self.untried(true) + self.mutants_capped},
            "hunks": hunks.iter().map(|(u, v)| self.unit_json(u, v)).collect::<Vec<_>>(),
            "mutants": muts.iter().map(|(u, v)| self.unit_json(u, v)).collect::<Vec<_>>(),
            "left_out": self.left_out.iter().map(|(f, w)| json!({"file": f, "why": w})).collect::<Vec<_>>(),
            "notes": self.notes,
        })
    }

    pub fn text(&self) -> String {
        let short = |c: &str| c.chars().take(12).collect::<String>();
        let mut out = format!(
            "adequacy of {} at {} (base {})\n{}\n",
            self.reference,
            short(&self.commit),
            short(&self.base),
            self.summary()
        );
        for (u, v) in self.units.iter().zip(&self.verdicts) {
            let j = self.unit_json(u, v);
            let result = j["result"].as_str().unwrap_or("");
            let shown = match result {
                "not-needed" => "NOT NEEDED",
                "survived" => "SURVIVED",
                other => other,
            };
            let by = match (j["check"].as_str(), j["build_failure"].as_bool()) {
                (Some(c), Some(true)) => format!("  (check {c} failed: a build failure)"),
                (Some("timeout"), _) => "  (a check timed out)".to_string(),
                (Some(c), _) => format!("  (check {c} failed)"),
                _ => match j["why"].as_str() {
                    Some(w) => format!("  ({w})"),
                    None => String::new(),
                },
            };
            let what = match u {
                Unit::Hunk { .. } => format!(
                    "{}:{}",
                    j["file"].as_str().unwrap_or(""),
                    j["lines"].as_str().unwrap_or("")
                ),
                Unit::File { file } => format!(
                    "{} ({} file, whole)",
                    self.files[*file].path,
                    self.files[*file].kind.name()
                ),
                Unit::Mutant { mutant, file } => format!(
                    "{}:{} {}: {}",
                    self.files[*file].path,
                    mutant.line + 1,
                    mutant.operator.name(),
                    mutant.text.trim()
                ),
            };
            out.push_str(&format!("  {shown:<11} {what}{by}\n"));
        }
        let (uh, um) = (self.untried(false), self.untried(true));
        if uh + um > 0 {
            out.push_str(&format!(
                "not tried: {uh} hunks and {um} mutants: the budget ({}s) ran out; raise it with --budget\n",
                self.budget.as_secs()
            ));
        }
        if self.mutants_capped > 0 {
            out.push_str(&format!(
                "not tried: {} more mutants past --max-mutants\n",
                self.mutants_capped
            ));
        }
        for (f, why) in &self.left_out {
            out.push_str(&format!("left out: {f} ({why})\n"));
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

/// The commit the change is measured from: `--base`, else the envelope's base when it is
/// this commit's, else where the loop's branch left the branch it started from.
fn base_of(repo: &Path, dir: &Path, commit: &str, given: Option<&str>) -> Result<String> {
    let rev = |r: &str| {
        git_line(
            repo,
            &[
                "rev-parse",
                "--verify",
                "-q",
                "--end-of-options",
                &format!("{r}^{{commit}}"),
            ],
        )
        .filter(|c| !c.is_empty())
    };
    if let Some(g) = given {
        return rev(g)
            .ok_or_else(|| Error::Usage(format!("--base {g}: not a commit of this repository")));
    }
    if let Ok(bytes) = std::fs::read(dir.join(envelope::FILE))
        && let Ok(e) = envelope::parse(&bytes)
        && e.commit.as_deref() == Some(commit)
        && let Some(b) = e.base_commit.as_deref().and_then(rev)
    {
        return Ok(b);
    }
    let origin = state::State::parse_file(&dir.join("state.env"))
        .ok()
        .map(|s| s.origin_branch)
        .filter(|b| !b.is_empty());
    origin
        .and_then(|o| git_line(repo, &["merge-base", "--end-of-options", &o, commit]))
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            Error::Usage(format!(
                "cannot tell which commit {} started from: give it with --base REV",
                dir.display()
            ))
        })
}

/// Whether `path` names a test file by the conventions of the common test tools: a folder
/// `tests`, `test`, `__tests__`, `spec` or `testdata` on its way, or a file named
/// `test_*`, `*_test.*`, `*.test.*`, `*_spec.*` or `*.spec.*`. A test inside a Rust source
/// file (an item marked `#[cfg(test)]`) is told apart line by line
/// (`mutants::rust_test_lines`): its hunks are left out and its lines never mutated.
pub fn is_test_path(path: &str) -> bool {
    let mut parts = path.split('/').collect::<Vec<_>>();
    let Some(name) = parts.pop() else {
        return false;
    };
    if parts
        .iter()
        .any(|d| matches!(*d, "tests" | "test" | "__tests__" | "spec" | "testdata"))
    {
        return true;
    }
    let stem = name.split('.').next().unwrap_or(name);
    name.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || name.contains(".test.")
        || name.contains(".spec.")
}

/// The units of a change, with what is left out of them and what is said of them.
struct Units {
    units: Vec<Unit>,
    left_out: Vec<(String, String)>,
    notes: Vec<String>,
    /// Mutants past the cap.
    capped: usize,
}

/// The units of the change and what is left out of it.
fn units_of(files: &[FileChange], cfg: &LoopConfig, max_mutants: usize) -> Units {
    let globs = cfg.protect_globs();
    let mut units = Vec::new();
    let mut left_out = Vec::new();
    let mut notes = Vec::new();
    let mut all_mutants: Vec<(usize, Mutant)> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let paths = [Some(f.path.as_str()), f.old_path.as_deref()];
        if paths.iter().flatten().any(|p| p.starts_with(".orbit/")) {
            left_out.push((f.path.clone(), "the loop's own files".into()));
            continue;
        }
        // A test the change added is what a check runs, never what it needs: reverted, the
        // checks pass (they run one test fewer), which says nothing of the code.
        if paths.iter().flatten().all(|p| is_test_path(p)) {
            left_out.push((
                f.path.clone(),
                "a test file: what the checks run, not what they need".into(),
            ));
            continue;
        }
        if let Some(g) = globs
            .iter()
            .find(|g| paths.iter().flatten().any(|p| pins::glob_match(g, p)))
        {
            left_out.push((
                f.path.clone(),
                format!("protected by {g}: the checks' own files"),
            ));
            continue;
        }
        if f.kind != FileKind::Text {
            units.push(Unit::File { file: i });
            if f.kind != FileKind::Deleted {
                notes.push(format!(
                    "{}: reverted whole ({}), never mutated",
                    f.path,
                    f.kind.name()
                ));
            }
            continue;
        }
        let lang = Lang::of(&f.path);
        if lang.is_none() && f.hunks.iter().any(|h| h.new_len > 0) {
            notes.push(format!(
                "{}: not source code orbit's operators know, so its lines are not mutated",
                f.path
            ));
        }
        let new_lines = diff::lines(&f.new);
        let tests = match lang {
            Some(Lang::Rust) => mutants::rust_test_lines(&new_lines),
            _ => vec![false; new_lines.len()],
        };
        let in_tests = |n: usize| tests.get(n).copied().unwrap_or(false);
        for h in &f.hunks {
            // A hunk that only adds to a test inside a source file is a test the change
            // added, left out as a test file is.
            let added = h.new_start..h.new_start + h.new_len;
            let blank = |n: &usize| {
                new_lines
                    .get(*n)
                    .is_none_or(|l| l.iter().all(u8::is_ascii_whitespace))
            };
            if h.old_len == 0
                && added.clone().any(in_tests)
                && added.clone().filter(|n| !blank(n)).all(in_tests)
            {
                left_out.push((
                    format!("{}:{}", f.path, h.new_range()),
                    "a test inside a source file (#[cfg(test)]): what the checks run, not what they need".into(),
                ));
                continue;
            }
            units.push(Unit::Hunk { file: i, hunk: *h });
            if h.new_len > LONG_HUNK {
                notes.push(format!(
                    "{}:{}: a hunk of {} lines, reverted as one",
                    f.path,
                    h.new_range(),
                    h.new_len
                ));
            }
            let Some(lang) = lang else { continue };
            let added = new_lines
                .iter()
                .enumerate()
                .skip(h.new_start)
                .take(h.new_len);
            for (n, line) in added {
                if in_tests(n) {
                    continue;
                }
                let line = String::from_utf8_lossy(line);
                for m in mutants::of_line(&f.path, n, &line, lang) {
                    all_mutants.push((i, m));
                }
            }
        }
    }
    let (picked, capped) = mutants::spread(
        all_mutants.into_iter().map(|(_, m)| m).collect(),
        max_mutants,
    );
    for m in picked {
        let file = files
            .iter()
            .position(|f| f.path == m.path)
            .expect("a mutant is made from a file of the change");
        units.push(Unit::Mutant { file, mutant: m });
    }
    Units {
        units,
        left_out,
        notes,
        capped,
    }
}

/// The lines of Rust the change added that mark code `mutants::skip` (`#[mutants::skip]`,
/// or inside a `cfg_attr`, which needs no crate at all under a false condition): cargo-mutants
/// makes no mutant of what they mark, so the change could exempt its own untested code. Each
/// counts as a survivor (the gate rejects it as one), saying why; the base's own marks are
/// the user's, and left alone.
fn skips_added(files: &[FileChange]) -> Vec<(Unit, Verdict)> {
    let mut out = Vec::new();
    for (i, f) in files.iter().enumerate() {
        if f.kind != FileKind::Text || !f.path.ends_with(".rs") {
            continue;
        }
        let new = diff::lines(&f.new);
        for h in &f.hunks {
            for (n, line) in new.iter().enumerate().skip(h.new_start).take(h.new_len) {
                let line = String::from_utf8_lossy(line);
                if !line.contains("mutants::skip") || line.trim_start().starts_with("//") {
                    continue;
                }
                let mutant = Mutant {
                    path: f.path.clone(),
                    line: n,
                    operator: mutants::Operator::CargoMutants,
                    text: format!(
                        "{} (the change marks this code mutants::skip: cargo-mutants made no mutant of it)",
                        line.trim()
                    ),
                };
                out.push((Unit::Mutant { file: i, mutant }, Verdict::Passed));
            }
        }
    }
    out
}

/// The units a tool's run gives, each with its verdict (`None`: the budget left it
/// untried), and what is said of the run.
type ToolUnits = (Vec<(Unit, Option<Verdict>)>, Vec<String>);

/// The change's diff of `paths` (the files of one Cargo workspace), as cargo-mutants reads
/// a diff (a/ and b/ paths from the workspace's folder `root`, "" for the repository's
/// root), whatever the user's git configuration says of prefixes, renames or text filters.
fn workspace_diff(plan: &Plan, repo: &Path, root: &str, paths: &[&str]) -> Result<Vec<u8>> {
    let relative = if root.is_empty() {
        "--no-relative".to_string()
    } else {
        format!("--relative={root}/")
    };
    let mut args: Vec<String> = [
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--find-renames",
        &relative,
        "--submodule=short",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        plan.base,
        plan.commit,
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(paths.iter().map(|p| format!(":(literal){p}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    crate::envelope::git(repo, &args)
        .ok_or_else(|| Error::Git(format!("cannot diff {} against {}", plan.commit, plan.base)))
}

/// The mutants `tool` made of the change and what it said of each, as units of the
/// change's files (a mutant of a file outside the change is left out), with what is said
/// of the run. cargo-mutants runs once for each Cargo workspace the change's Rust files
/// are in (pointed at its folder), until `deadline`.
fn tool_units(plan: &Plan, tool: tool::Tool, repo: &Path, deadline: Instant) -> Result<ToolUnits> {
    let mut notes = Vec::new();
    // The change's Rust files, by the folder of the Cargo workspace that builds them.
    let mut roots: Vec<(String, Vec<&str>)> = Vec::new();
    for f in plan.files.iter().filter(|f| f.kind != FileKind::Deleted) {
        if !f.path.ends_with(".rs") {
            continue;
        }
        let Some(root) = tool::cargo_root(repo, plan.commit, &f.path) else {
            notes.push(format!(
                "{}: in no Cargo package (no Cargo.toml above it), so cargo-mutants makes no mutant of it",
                f.path
            ));
            continue;
        };
        match roots.iter_mut().find(|(r, _)| *r == root) {
            Some((_, paths)) => paths.push(&f.path),
            None => roots.push((root, vec![&f.path])),
        }
    }
    let mut found = tool::ToolRun::default();
    match tool {
        tool::Tool::CargoMutants if roots.is_empty() => found.notes.push(
            "the change touches no Rust source file of a Cargo package (.rs): cargo-mutants found no mutant to try"
                .into(),
        ),
        tool::Tool::CargoMutants => {
            for (k, (root, paths)) in roots.iter().enumerate() {
                let diff = workspace_diff(plan, repo, root, paths)?;
                let co = run::checkout(repo, plan.commit, 999 + k)?;
                let scratch = co.scratch();
                std::fs::create_dir_all(&scratch)
                    .map_err(|e| Error::io(format!("cannot create {}", scratch.display()), e))?;
                // The user's configuration of the tool is the base's: the change's own
                // .cargo/mutants.toml could leave out the very mutants that survive.
                let config_path = if root.is_empty() {
                    ".cargo/mutants.toml".to_string()
                } else {
                    format!("{root}/.cargo/mutants.toml")
                };
                let config = tool::blob_at(repo, plan.base, &config_path);
                notes.push(format!(
                    "cargo-mutants ran its own cargo test on each mutant (not the loop's checks), on the Cargo workspace in {}, in its own copy of the tree{}, with {}",
                    if root.is_empty() { "the repository's root".to_string() } else { format!("{root}/") },
                    if plan.mode.sandboxed {
                        ", under the loop's sandbox"
                    } else {
                        ", without a sandbox, as the loop's checks run"
                    },
                    if config.is_some() {
                        format!("the base's {config_path}")
                    } else {
                        format!("no {config_path} (the base has none; the change's is not read)")
                    }
                ));
                let run = tool::run_cargo_mutants(
                    plan,
                    &co.path,
                    &scratch,
                    &diff,
                    config.as_deref(),
                    root,
                    deadline,
                )?;
                found.mutants.extend(run.mutants);
                found.untried.extend(run.untried);
                found.notes.extend(run.notes);
            }
        }
    }
    notes.extend(found.notes);
    let unit = |file: &str, line: usize, text: String| {
        let i = plan.files.iter().position(|f| f.path == file)?;
        let mutant = Mutant {
            path: file.to_string(),
            line: line.saturating_sub(1),
            operator: mutants::Operator::CargoMutants,
            text,
        };
        Some(Unit::Mutant { file: i, mutant })
    };
    let mut units: Vec<(Unit, Option<Verdict>)> = found
        .mutants
        .into_iter()
        .filter_map(|m| Some((unit(&m.file, m.line, m.text)?, Some(m.verdict))))
        .collect();
    units.extend(
        found
            .untried
            .into_iter()
            .filter_map(|l| Some((unit(&l.file, l.line, l.text)?, None))),
    );
    units.extend(
        skips_added(plan.files)
            .into_iter()
            .map(|(u, v)| (u, Some(v))),
    );
    Ok((units, notes))
}

/// Measures `args.target`'s change (see the module's doc).
pub fn measure(args: &AdequacyArgs) -> Result<Findings> {
    let mut t = verify::resolve(args.target.as_deref())?;
    if let Some(c) = &args.commit {
        t.commit = git_line(
            &t.repo,
            &[
                "rev-parse",
                "--verify",
                "-q",
                "--end-of-options",
                &format!("{c}^{{commit}}"),
            ],
        )
        .filter(|c| !c.is_empty())
        .ok_or_else(|| Error::Usage(format!("--commit {c}: not a commit of this repository")))?;
        t.reference = c.clone();
    }
    let Some(dir) = t.loop_dir.clone() else {
        return Err(Error::Usage(
            "adequacy runs a loop's own checks: name the loop (its directory, or its name under .orbit/)".into(),
        ));
    };
    let cfg = LoopConfig::load(&dir.join("loop.toml"))?;
    let base = base_of(&t.repo, &dir, &t.commit, args.base.as_deref())?;
    let files = diff::changes(&t.repo, &base, &t.commit)?;
    let Units {
        units,
        left_out,
        notes,
        capped: mutants_capped,
    } = units_of(&files, &cfg, args.max_mutants);
    // With a tool, its mutants are read instead of orbit's.
    let (units, mutants_capped) = match args.tool {
        Some(_) => (
            units
                .into_iter()
                .filter(|u| !matches!(u, Unit::Mutant { .. }))
                .collect(),
            0,
        ),
        None => (units, mutants_capped),
    };
    let mode = crate::rerun::Mode::of_loop(&dir)?;
    let mut scripts = vec!["check"];
    if !cfg.holdout.is_empty() {
        scripts.push("holdout");
    }
    let check_timeout = goal::parse_duration("check-timeout", &cfg.check_timeout)?;
    let mut plan = Plan {
        repo: &t.repo,
        loop_dir: &dir,
        base: &base,
        commit: &t.commit,
        scripts,
        mode,
        files: &files,
        run_timeout: Duration::from_secs(check_timeout.max(1)),
        setup: cfg.setup.clone(),
    };
    let started = Instant::now();
    // The commit itself must pass: otherwise no failure below would mean anything.
    let first = run::checkout(&t.repo, &t.commit, 0)?;
    let baseline_verdict = run::run_scripts(&plan, &first.path)?;
    let baseline = started.elapsed();
    drop(first);
    if baseline_verdict != Verdict::Passed {
        return Err(Error::Refused(format!(
            "the checks do not pass on {} itself ({baseline_verdict:?}): adequacy measures nothing there; run `orbit verify --rerun` to see why",
            t.commit
        )));
    }
    // A run of a unit may take three times the unchanged one's (a mutant that loops is
    // stopped there, and counts as caught), never more than the loop's check-timeout.
    plan.run_timeout = (baseline * 3)
        .max(Duration::from_secs(10))
        .min(plan.run_timeout);
    // --budget, else the loop's adequacy-budget, else (its 0) twice the DONE gate's own
    // check time: PASS_K runs of the unchanged commit's checks.
    let budget = match &args.budget {
        Some(b) => Duration::from_secs(goal::parse_duration("--budget", b)?),
        None => match goal::parse_duration("adequacy-budget", &cfg.adequacy_budget)? {
            0 => baseline * 2 * cfg.pass_k.max(1),
            s => Duration::from_secs(s),
        },
    };
    // check-jobs 0 (its default) is as many as the CPUs, as for a fan-out's candidates.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = match (args.jobs, cfg.check_jobs) {
        (Some(j), _) => j as usize,
        (None, 0) => cpus,
        (None, j) => j as usize,
    }
    .max(1);
    let deadline = Instant::now() + budget;
    let mut units = units;
    let mut verdicts = run::run_units(&plan, &units, jobs, deadline)?;
    let mut notes = notes;
    if let Some(tool) = args.tool {
        let (found, said) = tool_units(&plan, tool, &t.repo, deadline)?;
        for (unit, verdict) in found {
            units.push(unit);
            verdicts.push(verdict);
        }
        notes.extend(said);
    }
    Ok(Findings {
        loop_dir: Some(dir.clone()),
        repo: t.repo.clone(),
        base: base.clone(),
        commit: t.commit.clone(),
        reference: t.reference.clone(),
        budget,
        baseline,
        elapsed: started.elapsed(),
        files,
        units,
        verdicts,
        left_out,
        notes,
        mutants_capped,
    })
}

/// The record a loop directory keeps of its last measure (contract: `adequacy.json`).
pub const FILE: &str = "adequacy.json";
/// The record's format.
pub const FORMAT: u64 = 1;

/// A hunk of the change as the report shows it: what the checks said of it ("a hunk the
/// checks need"), where it is with the check that failed, and the survivors of its lines.
pub type MarkedHunk = (String, String, Vec<String>);

/// What adequacy.json says, as readers (audit, report) need it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Record {
    pub adequacy: u64,
    pub commit: String,
    pub base: String,
    pub envelope_digest: Option<String>,
    /// The commit's tree (records written before it have none): a record of the DONE
    /// gate's claim, measured on a commit of its own, is of the DONE commit that holds the
    /// same tree.
    #[serde(default)]
    pub tree: Option<String>,
    pub hunks_needed: u64,
    pub hunks_tried: u64,
    pub mutants_killed: u64,
    pub mutants_tried: u64,
    pub details_sha256: String,
    pub details: Value,
}

impl Record {
    /// The record in `dir`, when there is one that parses and whose details hash as it says.
    /// The hash is of the details' bytes as the record holds them, never of the details
    /// parsed and serialized again: a float (a duration such as 12.755396019 s, written
    /// `12.755396018999999`) can read back as its neighbour and print otherwise.
    pub fn read(dir: &Path) -> Option<Record> {
        #[derive(serde::Deserialize)]
        struct Held<'a> {
            #[serde(borrow)]
            details: &'a serde_json::value::RawValue,
        }
        let bytes = crate::fsx::read_regular_opt(&dir.join(FILE)).ok()??;
        let r: Record = serde_json::from_slice(&bytes).ok()?;
        let held: Held = serde_json::from_slice(&bytes).ok()?;
        (r.adequacy == FORMAT
            && crate::fsx::sha256_hex(held.details.get().as_bytes()) == r.details_sha256)
            .then_some(r)
    }

    pub fn summary(&self) -> String {
        format!(
            "the checks need {} of {} changed hunks; {} of {} mutants killed",
            self.hunks_needed, self.hunks_tried, self.mutants_killed, self.mutants_tried
        )
    }

    /// The loop's record when it is of `head` (a commit of the repository at `repo`): its
    /// commit, or a commit of the same tree (the DONE gate measured the claim on a commit
    /// of its own, from the loop's base).
    pub fn of_head(dir: &Path, repo: &Path, head: &str) -> Option<Record> {
        let r = Record::read(dir)?;
        if r.commit == head {
            return Some(r);
        }
        let tree = git_line(
            repo,
            &["rev-parse", "--verify", "-q", &format!("{head}^{{tree}}")],
        )?;
        (r.tree.as_deref() == Some(tree.as_str())).then_some(r)
    }

    /// The hunks no check needed, as `file:lines`.
    pub fn unneeded(&self) -> Vec<String> {
        self.details["hunks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|h| h["result"] == "not-needed")
            .map(|h| match h["lines"].as_str() {
                Some(l) => format!("{}:{l}", h["file"].as_str().unwrap_or("")),
                None => format!("{} (whole)", h["file"].as_str().unwrap_or("")),
            })
            .collect()
    }

    /// The change as its hunks, each marked with what the checks said of it (`a hunk the
    /// checks need`, `a hunk no check needs`, ...) and `file:lines` with the check that
    /// failed, and under each the mutants of its lines that survived; then the survivors of
    /// no hunk.
    pub fn marked(&self) -> (Vec<MarkedHunk>, Vec<String>) {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let mut survivors: Vec<(&Value, String)> = self.details["mutants"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["result"] == "survived")
            .map(|m| {
                let text = format!(
                    "{}:{} {}: {}",
                    s(&m["file"]),
                    m["line"],
                    s(&m["operator"]),
                    s(&m["text"]).trim()
                );
                (m, text)
            })
            .collect();
        let mut hunks = Vec::new();
        for h in self.details["hunks"].as_array().into_iter().flatten() {
            let what = match h["result"].as_str() {
                Some("needed") => "a hunk the checks need",
                Some("not-needed") => "a hunk no check needs",
                Some("not-applied") => "a hunk that could not be reverted",
                _ => "a hunk not tried (the budget ran out)",
            };
            let at = match h["lines"].as_str() {
                Some(l) => format!("{}:{l}", s(&h["file"])),
                None => format!("{} (whole)", s(&h["file"])),
            };
            let by = match (h["check"].as_str(), h["build_failure"].as_bool()) {
                (Some(c), Some(true)) => format!(" (check {c} failed: a build failure)"),
                (Some(c), _) => format!(" (check {c} failed)"),
                _ => String::new(),
            };
            let (start, len) = (h["start"].as_u64(), h["len"].as_u64());
            let inside = |m: &Value| {
                m["file"] == h["file"]
                    && match (start, len, m["line"].as_u64()) {
                        (Some(a), Some(n), Some(l)) => l >= a && l < a + n,
                        _ => h["lines"].is_null(),
                    }
            };
            let (mine, rest): (Vec<_>, Vec<_>) =
                survivors.into_iter().partition(|(m, _)| inside(m));
            survivors = rest;
            hunks.push((
                what.to_string(),
                format!("{at}{by}"),
                mine.into_iter().map(|(_, t)| t).collect(),
            ));
        }
        (hunks, survivors.into_iter().map(|(_, t)| t).collect())
    }

    /// The mutants that survived, as `file:line operator: text`.
    pub fn survivors(&self) -> Vec<String> {
        self.details["mutants"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["result"] == "survived")
            .map(|m| {
                format!(
                    "{}:{} {}: {}",
                    m["file"].as_str().unwrap_or(""),
                    m["line"],
                    m["operator"].as_str().unwrap_or(""),
                    m["text"].as_str().unwrap_or("").trim()
                )
            })
            .collect()
    }
}

/// The record of a measure (adequacy.json's line, without its newline) and its figures:
/// (needed, tried, killed, tried, details' sha256).
fn record_of(dir: &Path, repo: &Path, f: &Findings) -> Result<(String, [usize; 4], String)> {
    let details = f.json();
    let details_text = serde_json::to_string(&details)
        .map_err(|e| Error::Usage(format!("cannot write the findings: {e}")))?;
    // The hash of the very bytes the record holds as `details` (a member serializes as the
    // value alone does): readers hash those bytes, never the details parsed again.
    let details_sha256 = crate::fsx::sha256_hex(details_text.as_bytes());
    let envelope_digest = std::fs::read(dir.join(envelope::FILE))
        .ok()
        .and_then(|b| envelope::parse(&b).ok())
        .filter(|e| e.commit.as_deref() == Some(f.commit.as_str()))
        .map(|e| e.digest);
    let (n, h, k, m) = f.figures();
    let tree = git_line(
        repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("{}^{{tree}}", f.commit),
        ],
    );
    let rec = json!({
        "adequacy": FORMAT,
        "commit": f.commit,
        "base": f.base,
        "tree": tree,
        "envelope_digest": envelope_digest,
        "hunks_needed": n, "hunks_tried": h, "mutants_killed": k, "mutants_tried": m,
        "details_sha256": details_sha256,
        "details": details,
    });
    Ok((rec.to_string(), [n, h, k, m], details_sha256))
}

/// Writes adequacy.json for a measure of the loop's branch head and journals
/// `adequacy_measured`, under the loop's lock; `Ok(false)` when a runner holds it.
fn record(dir: &Path, repo: &Path, f: &Findings) -> Result<bool> {
    let Ok(_held) = crate::control::hold_lock(dir) else {
        return Ok(false);
    };
    let (rec, [n, h, k, m], details_sha256) = record_of(dir, repo, f)?;
    crate::fsx::write_atomic(&dir.join(FILE), format!("{rec}\n").as_bytes())?;
    let iteration = state::State::parse_file(&dir.join("state.env"))
        .map(|s| s.next_iteration.saturating_sub(1))
        .unwrap_or(0);
    crate::control::append_event(
        dir,
        crate::contract::EventName::AdequacyMeasured,
        iteration,
        &[
            ("commit", crate::events::value(&f.commit)),
            ("hunks_needed", n.to_string()),
            ("hunks_tried", h.to_string()),
            ("mutants_killed", k.to_string()),
            ("mutants_tried", m.to_string()),
            ("details_sha256", crate::events::value(&details_sha256)),
        ],
    )?;
    Ok(true)
}

/// `orbit adequacy`: prints the findings and records them in the loop directory; exit 0
/// when they were measured.
pub fn run(args: &AdequacyArgs) -> Result<u8> {
    let f = match measure(args) {
        Err(Error::Refused(why)) => {
            if args.json {
                println!("{}", json!({"error": why}));
            } else {
                eprintln!("orbit: {why}");
            }
            return Ok(EXIT_CHECKS_FAIL);
        }
        other => other?,
    };
    let feedback = args.gate.and_then(|max| f.gate_feedback(max));
    let code = if feedback.is_some() {
        EXIT_INADEQUATE
    } else {
        0
    };
    if let Some(out) = &args.out {
        // For the runner: the record, its figures and the feedback, into its own folder.
        let dir = f.loop_dir.as_deref().expect("a measure is of a loop");
        let (rec, [n, h, k, m], sha) = record_of(dir, &f.repo, &f)?;
        crate::fsx::write_atomic(&out.join(OUT_RECORD), format!("{rec}\n").as_bytes())?;
        crate::fsx::write_atomic(
            &out.join(OUT_FIGURES),
            format!("{n} {h} {k} {m} {sha} {}\n", f.commit).as_bytes(),
        )?;
        let fb = out.join(OUT_FEEDBACK);
        match &feedback {
            Some(text) => crate::fsx::write_atomic(&fb, text.as_bytes())?,
            None => {
                let _ = std::fs::remove_file(&fb);
            }
        }
    }
    let recorded = match &f.loop_dir {
        Some(dir) if args.out.is_none() && args.commit.is_none() => record(dir, &f.repo, &f)?,
        _ => false,
    };
    if args.json {
        println!("{}", f.json());
    } else {
        print!("{}", f.text());
        if let Some(text) = &feedback {
            print!("{text}");
        }
        if !recorded && args.out.is_none() && args.commit.is_none() {
            println!(
                "not recorded: a runner holds the loop; run orbit adequacy again when it is idle"
            );
        }
    }
    Ok(code)
}

/// The pin of this orbit binary that `orbit init` writes into a loop (`orbit.sha256`): its
/// sha256 and absolute path, which the runner checks before it runs it (and runs a copy it
/// hashed, never the path itself, and never an `orbit` found on PATH).
pub fn orbit_pin() -> Result<String> {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| Error::io("cannot find this orbit's own binary", e))?;
    let hash = std::fs::File::open(&exe)
        .and_then(crate::fsx::sha256_hex_of)
        .map_err(|e| Error::io(format!("cannot read {}", exe.display()), e))?;
    let path = exe.display().to_string();
    if path.contains(['\n', '\r']) {
        return Err(Error::Usage(format!(
            "orbit's binary is at a path with a line break ({}): move it",
            path.escape_debug()
        )));
    }
    Ok(format!("{hash}  {path}\n"))
}

#[cfg(test)]
mod tests {
    use super::{FILE, Findings, Record, is_test_path, record_of};
    use std::time::Duration;

    /// A measure of the given durations. Some print as floats that serde_json (without its
    /// `float_roundtrip` feature) reads back one unit off: 12.755396019 s is written
    /// `12.755396018999999`, read as a neighbouring f64 and printed `12.755396019`. About 4
    /// in 100 durations between 1 s and 10 s are so, and a measure under load lasts that
    /// long: a gate's measure of 1.331002672 s, written `1.3310026719999999`, was not read.
    fn findings(baseline: Duration, elapsed: Duration) -> Findings {
        Findings {
            loop_dir: None,
            repo: std::path::PathBuf::from("/nonexistent"),
            base: "b".repeat(40),
            commit: "c".repeat(40),
            reference: "HEAD".into(),
            budget: Duration::from_secs(600),
            baseline,
            elapsed,
            files: Vec::new(),
            units: Vec::new(),
            verdicts: Vec::new(),
            left_out: Vec::new(),
            notes: Vec::new(),
            mutants_capped: 0,
        }
    }

    #[test]
    fn a_record_is_read_back_whatever_durations_its_details_hold() {
        let dir = tempfile::tempdir().unwrap();
        for (baseline, elapsed) in [
            (Duration::new(12, 755_396_019), Duration::new(3, 0)),
            (Duration::from_millis(271), Duration::new(1, 331_002_672)),
            (Duration::from_millis(115), Duration::new(12, 755_396_019)),
            (Duration::from_millis(115), Duration::from_millis(780)),
        ] {
            let f = findings(baseline, elapsed);
            let (line, _, sha) = record_of(dir.path(), dir.path(), &f).unwrap();
            std::fs::write(dir.path().join(FILE), format!("{line}\n")).unwrap();
            let r = Record::read(dir.path()).unwrap_or_else(|| {
                panic!(
                    "the record orbit wrote is not read back ({baseline:?}, {elapsed:?}): {line}"
                )
            });
            assert_eq!(r.details_sha256, sha);
            assert!(Record::of_head(dir.path(), dir.path(), &f.commit).is_some());
        }
    }

    #[test]
    fn a_record_whose_details_were_edited_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = findings(Duration::from_millis(115), Duration::new(3, 0));
        let (line, _, _) = record_of(dir.path(), dir.path(), &f).unwrap();
        let edited = line.replace(
            "\"hunks_needed\":0,\"hunks_tried\":0,\"left_out\"",
            "\"hunks_needed\":1,\"hunks_tried\":0,\"left_out\"",
        );
        assert_ne!(edited, line, "{line}");
        std::fs::write(dir.path().join(FILE), format!("{edited}\n")).unwrap();
        assert!(Record::read(dir.path()).is_none());
        std::fs::write(dir.path().join(FILE), format!("{line}\n")).unwrap();
        assert!(Record::read(dir.path()).is_some());
    }

    #[test]
    fn test_files_are_told_by_the_test_tools_conventions() {
        for t in [
            "tests/test_big.py",
            "test_calc.py",
            "pkg/calc_test.go",
            "src/__tests__/a.js",
            "src/welcome.test.js",
            "spec/models/user_spec.rb",
            "web/app.spec.ts",
        ] {
            assert!(is_test_path(t), "{t}");
        }
        for c in [
            "calc.py",
            "src/lib.rs",
            "src/testing.rs",
            "contest.py",
            "latest/x.js",
        ] {
            assert!(!is_test_path(c), "{c}");
        }
    }
}
