//! Fan-out candidates (contract section 10): the candidate worktrees `<workspace>.c<K>` and
//! the refs `refs/orbit/<name>/<iteration>/<candidate>` a fan-out keeps for review. A
//! candidate worktree that is not this repository's is one the runner stops on
//! (`git_tamper`); what is left beyond the loop's `candidates`, or after DONE, is a note.
//! Read-only: git is asked through the audit's bounded calls.

use std::path::Path;

use super::facts::{git, toml_line};
use super::{Finding, Severity};
use crate::config::LoopConfig;
use crate::contract::{FindingClass, Status};
use crate::recover::candidates::{self, Candidate};
use crate::shell::paste_word;
use crate::state::{self, State};

pub(super) struct Input<'a> {
    /// The loop directory, canonical.
    pub(super) dir: &'a Path,
    /// The loop directory as one shell word, for fix commands.
    pub(super) shown: &'a str,
    pub(super) state: &'a State,
    pub(super) state_text: &'a str,
    pub(super) cfg: Option<&'a LoopConfig>,
    pub(super) toml_text: &'a str,
    pub(super) running: bool,
}

fn git_text(dir: &Path, args: &[&str]) -> Option<String> {
    let out = git(dir, args)?;
    (out.code == Some(0)).then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(super) fn check(i: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    let s = i.state;
    if crate::contract::older_major(&s.contract_version) || s.workspace.is_empty() {
        return out;
    }
    let ws = s.workspace.trim_end_matches('/');
    let n = i.cfg.map_or(1, |c| c.candidates);
    let name = i.cfg.map(|c| c.name.clone()).or_else(|| {
        s.iter_branch
            .strip_prefix("orbit/")
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    });
    let listed = git_text(i.dir, &["worktree", "list", "--porcelain"]);
    let cands = candidates::worktrees_from(ws, listed.as_deref());
    let common = git_text(
        i.dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map(|t| std::path::PathBuf::from(t.trim_end_matches('\n')));
    let prune = format!("orbit recover --prune-candidates {}", i.shown);
    // Candidates the runner made (or git still lists): what a prune removes.
    let mut ours: Vec<&Candidate> = Vec::new();
    for c in &cands {
        if !c.present {
            ours.push(c);
            continue;
        }
        let Some(common) = &common else {
            continue;
        };
        match candidates::intact(common, ws, &c.path) {
            Ok(()) => ours.push(c),
            Err(why) => {
                let dot_git = c.path.join(".git");
                let has_git = std::fs::symlink_metadata(&dot_git).is_ok();
                if !has_git && u64::from(c.k) > n {
                    // Not a candidate: nothing the runner would use.
                    continue;
                }
                let p = c.path.display().to_string();
                out.push(Finding {
                    class: FindingClass::GitTamper,
                    severity: Severity::P0,
                    evidence: if has_git {
                        format!("{}:1", dot_git.display())
                    } else {
                        format!("{p}:0")
                    },
                    message: format!(
                        "the candidate worktree {p} is not a worktree of this repository ({why}): the runner stops on it (git_tamper) before the next fan-out, and its resets would land where its .git points. Review it, then move it away; the next fan-out makes the worktree again"
                    ),
                    fix: format!(
                        "mv -- {} {} && {prune}",
                        paste_word(&p),
                        paste_word(&format!("{p}.moved"))
                    ),
                });
            }
        }
    }
    if i.running {
        return out;
    }
    let refs = match (
        &name,
        git_text(
            i.dir,
            &[
                "for-each-ref",
                "--format=%(refname) %(objectname)",
                "refs/orbit/",
            ],
        ),
    ) {
        (Some(name), Some(text)) => candidates::refs_from(&text, name),
        _ => Vec::new(),
    };
    if s.last_status == Status::Done {
        // The refs stay after DONE, for review, until --prune-candidates: only worktrees
        // left behind are drift.
        if !ours.is_empty() {
            out.push(Finding {
                class: FindingClass::StateDrift,
                severity: Severity::P2,
                evidence: format!(
                    "state.env:{}",
                    state::key_line(i.state_text, "LAST_STATUS")
                ),
                message: format!(
                    "the loop is DONE but its fan-out left {} candidate worktree(s): the runner removes them at DONE, so it stopped before it could; the survivors' changes are on the loop branch, and the {} candidate ref(s) (refs/orbit/{}/) are kept for review",
                    ours.len(),
                    refs.len(),
                    name.as_deref().unwrap_or("?")
                ),
                fix: prune,
            });
        }
        return out;
    }
    let extra: Vec<String> = ours
        .iter()
        .filter(|c| u64::from(c.k) > n)
        .map(|c| c.path.display().to_string())
        .collect();
    if let Some(first) = extra.first() {
        out.push(Finding {
            class: FindingClass::StateDrift,
            severity: Severity::P2,
            evidence: format!(
                "loop.toml:{}",
                toml_line(i.toml_text, "candidates")
            ),
            message: format!(
                "{} candidate worktree(s) beyond the loop's candidates = {n} ({first}{}): left by an earlier, wider fan-out; no run uses them any more",
                extra.len(),
                if extra.len() > 1 { ", ..." } else { "" }
            ),
            fix: prune,
        });
    }
    out
}
