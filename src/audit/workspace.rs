//! The loop's workspace (contract 2.0): its git worktree on `orbit/<name>`, checked against
//! the repository's list of worktrees, the loop branch against `.branch-head`, and the
//! work tree for changes nobody committed. The only part of an audit that runs git: a few
//! bounded, read-only calls (`GIT_OPTIONAL_LOCKS=0`, no fsmonitor), none while a runner
//! works in the workspace but the list of worktrees.

use std::path::{Path, PathBuf};

use super::facts::{git, toml_line};
use super::{Finding, Severity};
use crate::config::LoopConfig;
use crate::contract::{FindingClass, Status};
use crate::shell::paste_word;
use crate::state::{self, State};

/// The most changed paths a WORKSPACE_DIRTY message names.
const DIRTY_NAMED: usize = 3;

/// What the workspace checks need to know of the loop.
pub(super) struct Input<'a> {
    /// The loop directory, canonical (as the runner names it).
    pub(super) dir: &'a Path,
    /// The loop directory as one shell word, for fix commands.
    pub(super) shown: &'a str,
    pub(super) state: &'a State,
    pub(super) state_text: &'a str,
    pub(super) cfg: Option<&'a LoopConfig>,
    pub(super) running: bool,
    pub(super) crashed: bool,
    /// The last iteration's commit failed (reported already, with its own fix).
    pub(super) commit_failed: bool,
    /// Pinned paths already reported changed: not reported again as uncommitted.
    pub(super) reported: &'a [String],
    /// Where the first run makes the workspace (loop.toml's `workspace`, absolute).
    pub(super) configured: &'a str,
}

/// Where the loop's work is, as status and report show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// The workspace's absolute path (state.env `WORKSPACE`); `None` before the first run.
    pub workspace: Option<String>,
    /// The loop branch, `orbit/<name>`.
    pub branch: Option<String>,
}

/// The loop's branch: state.env's `ITER_BRANCH`, else `orbit/<name>`.
pub fn loop_branch(state: &State, cfg: Option<&LoopConfig>) -> Option<String> {
    if !state.iter_branch.is_empty() {
        return Some(state.iter_branch.clone());
    }
    cfg.map(|c| format!("orbit/{}", c.name))
}

/// Where the work of a loop is.
pub fn place(state: &State, cfg: Option<&LoopConfig>) -> Place {
    if crate::contract::older_major(&state.contract_version) {
        return Place::default();
    }
    Place {
        workspace: (!state.workspace.is_empty()).then(|| state.workspace.clone()),
        branch: loop_branch(state, cfg),
    }
}

/// The workspace's findings.
pub(super) fn check(i: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    let s = i.state;
    if crate::contract::older_major(&s.contract_version) {
        out.push(Finding {
            class: FindingClass::ContractOutdated,
            severity: Severity::P1,
            evidence: format!(
                "state.env:{}",
                state::key_line(i.state_text, "CONTRACT_VERSION")
            ),
            message: format!(
                "the loop was written under contract {} and has no workspace; the runner refuses it (exit 4) until it is migrated to {} (a workspace from its branch, every record kept)",
                s.contract_version,
                crate::contract::CONTRACT_VERSION
            ),
            fix: format!("orbit recover {} --migrate", i.shown),
        });
        return out;
    }
    if s.workspace.is_empty() {
        // Not run yet: the first run creates it, where nothing else may be.
        if s.last_status == Status::Ready {
            out.extend(check_ready(i));
        }
        return out;
    }
    let Some(branch) = loop_branch(s, i.cfg) else {
        return out;
    };
    let Some(worktrees) = worktrees(i.dir) else {
        return out;
    };
    let ws = Path::new(&s.workspace);
    let ws_evidence = format!("state.env:{}", state::key_line(i.state_text, "WORKSPACE"));
    let ws_word = paste_word(&s.workspace);
    let repo_word = worktrees
        .first()
        .map(|w| paste_word(&w.path.display().to_string()))
        .unwrap_or_else(|| ws_word.clone());
    let add = format!(
        "git -C {repo_word} worktree add -f -f --lock --reason {} -- {ws_word} {}",
        paste_word(&format!("orbit loop {}", i.dir.display())),
        paste_word(&branch)
    );
    // A link where the workspace was (an agent's swap: the runner stops on it, git_tamper)
    // must never be taken for what it points at: the user's checkout, say.
    if ws.is_symlink() {
        let target = std::fs::read_link(ws)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        out.push(Finding {
            class: FindingClass::WorkspaceBroken,
            severity: Severity::P0,
            evidence: ws_evidence,
            message: format!(
                "the workspace {} is a symlink to {target}, not the loop's worktree (swapped by the agent?): git calls there would work in what it points at",
                s.workspace
            ),
            fix: format!("rm -- {ws_word} && orbit recover {} --repin", i.shown),
        });
        return out;
    }
    let canonical = std::fs::canonicalize(ws).ok();
    let entry = worktrees.iter().find(|w| {
        w.path == ws
            || canonical
                .as_ref()
                .is_some_and(|c| std::fs::canonicalize(&w.path).ok().as_ref() == Some(c))
    });
    let empty_dir = ws.is_dir() && std::fs::read_dir(ws).is_ok_and(|mut d| d.next().is_none());
    if !ws.exists() || empty_dir {
        let head = branch_head(i.dir, &branch);
        let (message, fix) = if head.is_some() {
            (
                format!(
                    "the workspace {} is gone (deleted by hand?): the loop cannot go on until it is back; the loop branch {branch} still holds every committed iteration (anything uncommitted in the workspace is lost)",
                    s.workspace
                ),
                add,
            )
        } else {
            (
                format!(
                    "the workspace {} and the loop branch {branch} are both gone: the runner refuses to start",
                    s.workspace
                ),
                format!("orbit recover {}", i.shown),
            )
        };
        out.push(Finding {
            class: FindingClass::WorkspaceMissing,
            severity: Severity::P1,
            evidence: ws_evidence,
            message,
            fix,
        });
        return out;
    }
    let main = worktrees.first().map(|w| w.path.as_path());
    let Some(entry) = entry.filter(|_| main.is_some_and(|m| same_repository(ws, m))) else {
        let dot_git = ws.join(".git");
        out.push(Finding {
            class: FindingClass::WorkspaceBroken,
            severity: Severity::P1,
            evidence: if dot_git.exists() {
                format!("{}:1", dot_git.display())
            } else {
                ws_evidence
            },
            message: format!(
                "{} is not a worktree of this repository (git worktree list does not name it, or its .git is not this repository's): the loop would refuse it, or work and commit in another repository; move it away and recreate the workspace from {branch}",
                s.workspace
            ),
            fix: format!(
                "mv -- {ws_word} {} && {add}",
                paste_word(&format!("{}.moved", s.workspace))
            ),
        });
        return out;
    };
    if i.running {
        // The runner keeps HEAD, the branch and the work tree; mid-run they are its own.
        return out;
    }
    let want_ref = format!("refs/heads/{branch}");
    let on_branch = entry.branch.as_deref() == Some(want_ref.as_str());
    if !on_branch {
        let found = match &entry.branch {
            Some(b) => format!(
                "on the branch {}",
                b.strip_prefix("refs/heads/").unwrap_or(b)
            ),
            None => format!(
                "on a detached HEAD ({})",
                entry.head.as_deref().map_or("?", |h| &h[..h.len().min(12)])
            ),
        };
        out.push(Finding {
            class: FindingClass::WorkspaceBroken,
            severity: Severity::P1,
            evidence: head_file(ws)
                .map(|p| format!("{}:1", p.display()))
                .unwrap_or_else(|| format!("{}:1", ws.join(".git").display())),
            message: format!(
                "the workspace is {found}, not the loop branch {branch}: the next run points its HEAD back to {branch} and takes whatever differs in the work tree for the agent's change"
            ),
            fix: format!("git -C {ws_word} switch {}", paste_word(&branch)),
        });
    }
    let head = if on_branch {
        entry.head.clone()
    } else {
        branch_head(i.dir, &branch)
    };
    let recorded = crate::fsx::read_text_or_none(&i.dir.join(".branch-head"))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    match (&head, &recorded) {
        (None, _) => out.push(Finding {
            class: FindingClass::BranchMoved,
            severity: Severity::P1,
            evidence: if recorded.is_some() {
                ".branch-head:1".into()
            } else {
                format!(
                    "state.env:{}",
                    state::key_line(i.state_text, "ITER_BRANCH")
                )
            },
            message: format!(
                "the loop branch {branch} is gone (deleted by hand): the loop's commits are only in the workspace's history now"
            ),
            fix: format!("orbit recover {}", i.shown),
        }),
        (Some(h), Some(want)) if h != want && !is_ancestor(i.dir, want, h) => {
            let undo = if on_branch {
                format!("; to undo the move: git -C {ws_word} reset --keep {want}")
            } else {
                String::new()
            };
            out.push(Finding {
                class: FindingClass::BranchMoved,
                severity: Severity::P1,
                evidence: ".branch-head:1".into(),
                message: format!(
                    "the loop branch {branch} was moved by hand: the loop left it at {}, it is at {}, which does not contain it; the runner refuses to go on (exit 2, event branch_moved). To go on from where it is now, accept it with the fix{undo}",
                    want,
                    h
                ),
                fix: format!("orbit recover {}", i.shown),
            });
        }
        _ => {}
    }
    let leaves_changes = i.crashed
        || i.commit_failed
        || s.last_status == Status::Aborted
        || i.cfg.is_some_and(|c| !c.autocommit);
    if !leaves_changes && let Some(mut paths) = changed_paths(ws) {
        paths.retain(|p| {
            let abs = ws.join(p).display().to_string();
            !i.reported.contains(&abs)
        });
        if let Some(first) = paths.first() {
            let named = paths
                .iter()
                .take(DIRTY_NAMED)
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            let more = if paths.len() > DIRTY_NAMED {
                ", ..."
            } else {
                ""
            };
            let (severity, who) = if s.last_status == Status::Done {
                (
                    Severity::P2,
                    " after DONE: nothing runs any more, and they are not on the loop branch.",
                )
            } else if wrapup_was_last(i.dir, s.next_iteration.saturating_sub(1)) {
                (
                    Severity::P2,
                    ": left by the wrap-up run (told to change nothing but notes), or by hand.",
                )
            } else {
                (Severity::P1, ": edited by hand?")
            };
            out.push(Finding {
                class: FindingClass::WorkspaceDirty,
                severity,
                evidence: format!("{}:0", ws.join(first).display()),
                message: format!(
                    "{} path(s) in the workspace changed since the loop's last commit and no runner is working ({named}{more}){who} The agent would find them in its workspace, and a commit of a file it also edits would carry them. Commit them onto {branch} (git -C {ws_word} commit), or set them aside with the fix",
                    paths.len()
                ),
                fix: format!("git -C {ws_word} stash push --include-untracked"),
            });
        }
    }
    out
}

/// Whether the wrap-up run (when the iterations are used up) came after the last
/// iteration's record: what it changed is never committed.
fn wrapup_was_last(dir: &Path, last: u64) -> bool {
    let wrapup = super::read::mtime(&dir.join("iterations/wrapup/agent.log"));
    let record = super::read::mtime(&dir.join(super::read::iter_rel(last)).join("result.env"));
    match (wrapup, record) {
        (Some(w), Some(r)) => w >= r,
        (Some(_), None) => true,
        _ => false,
    }
}

/// A loop that never ran: its workspace path must be free (or already a worktree of this
/// repository): the first run refuses a directory that holds anything else, and would
/// work in another repository's checkout.
fn check_ready(i: &Input) -> Option<Finding> {
    let ws = Path::new(i.configured);
    if i.configured.is_empty()
        || !ws.is_dir()
        || std::fs::read_dir(ws).is_ok_and(|mut d| d.next().is_none())
    {
        return None;
    }
    let main = worktrees(i.dir)?.first()?.path.clone();
    if same_repository(ws, &main) {
        return None;
    }
    let word = paste_word(i.configured);
    Some(Finding {
        class: FindingClass::WorkspaceBroken,
        severity: Severity::P1,
        evidence: format!(
            "loop.toml:{}",
            toml_line(
                &crate::fsx::read_text_or_none(&i.dir.join("loop.toml")).unwrap_or_default(),
                "workspace"
            )
        ),
        message: format!(
            "the workspace path {} already holds files that are not a worktree of this repository: the first run refuses it (or, for another repository's checkout, would work there); move it away or set another workspace in loop.toml",
            i.configured
        ),
        fix: format!(
            "mv -- {word} {}",
            paste_word(&format!("{}.moved", i.configured))
        ),
    })
}

/// One entry of `git worktree list --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Worktree {
    path: PathBuf,
    head: Option<String>,
    /// `refs/heads/...`; `None` for a detached HEAD.
    branch: Option<String>,
}

/// The worktrees of the repository holding `dir` (the main one first).
fn worktrees(dir: &Path) -> Option<Vec<Worktree>> {
    let out = git(dir, &["worktree", "list", "--porcelain"])?;
    if out.code != Some(0) {
        return None;
    }
    Some(parse_worktrees(&String::from_utf8_lossy(&out.stdout)))
}

fn parse_worktrees(text: &str) -> Vec<Worktree> {
    let mut list: Vec<Worktree> = Vec::new();
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            list.push(Worktree {
                path: PathBuf::from(p),
                head: None,
                branch: None,
            });
        } else if let Some(w) = list.last_mut() {
            if let Some(h) = line.strip_prefix("HEAD ") {
                w.head = Some(h.to_string());
            } else if let Some(b) = line.strip_prefix("branch ") {
                w.branch = Some(b.to_string());
            }
        }
    }
    list
}

/// Whether the directory `ws`, holding a `.git` of its own, belongs to the repository whose
/// main worktree is `main` (their common git directories are one). A call that fails or
/// times out says no only when git said so.
fn same_repository(ws: &Path, main: &Path) -> bool {
    if !ws.join(".git").exists() {
        return false;
    }
    let Some(out) = git(ws, &["rev-parse", "--git-common-dir"]) else {
        return true;
    };
    if out.code != Some(0) {
        return false;
    }
    let common = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim_end_matches('\n'));
    let common = if common.is_relative() {
        ws.join(common)
    } else {
        common
    };
    let want = if main.join(".git").is_dir() {
        main.join(".git")
    } else {
        main.to_path_buf()
    };
    match (std::fs::canonicalize(common), std::fs::canonicalize(want)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The commit `refs/heads/<branch>` names, if it exists.
fn branch_head(dir: &Path, branch: &str) -> Option<String> {
    let out = git(
        dir,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
    )?;
    let h = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.code == Some(0) && !h.is_empty()).then_some(h)
}

/// Whether `old` is in the history of `new`. A call that fails or times out says yes: no
/// finding without evidence; but a recorded head that no longer exists (collected after a
/// move) is not in anyone's history.
fn is_ancestor(dir: &Path, old: &str, new: &str) -> bool {
    match git(dir, &["merge-base", "--is-ancestor", old, new]) {
        Some(o) if o.code == Some(0) => true,
        Some(o) if o.code == Some(1) => false,
        Some(_) => commit_exists(dir, old),
        None => true,
    }
}

fn commit_exists(dir: &Path, id: &str) -> bool {
    git(dir, &["cat-file", "-e", &format!("{id}^{{commit}}")]).is_none_or(|o| o.code == Some(0))
}

/// The workspace's own HEAD file, from its `.git` file (`gitdir: ...`).
fn head_file(ws: &Path) -> Option<PathBuf> {
    // The agent works in the workspace: its .git file is read only as a regular file.
    let text = crate::fsx::read_text_or_none(&ws.join(".git"))?;
    let gitdir = text.lines().next()?.strip_prefix("gitdir: ")?.trim();
    let mut p = PathBuf::from(gitdir);
    if p.is_relative() {
        p = ws.join(p);
    }
    Some(p.join("HEAD"))
}

/// The paths `git status` shows changed or untracked in the workspace (the agent's folder
/// aside); `None` when git cannot tell in time.
fn changed_paths(ws: &Path) -> Option<Vec<String>> {
    let out = git(
        ws,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=normal",
            "--ignore-submodules=dirty",
        ],
    )?;
    if out.code != Some(0) {
        return None;
    }
    Some(parse_status(&out.stdout))
}

fn parse_status(bytes: &[u8]) -> Vec<String> {
    let mut paths = Vec::new();
    let mut it = bytes.split(|b| *b == 0);
    while let Some(entry) = it.next() {
        if entry.len() < 4 {
            continue;
        }
        let xy = &entry[..2];
        let path = String::from_utf8_lossy(&entry[3..]).into_owned();
        if matches!(xy[0], b'R' | b'C') {
            // A rename's or copy's source follows.
            it.next();
        }
        if path == ".orbit-agent" || path.starts_with(".orbit-agent/") {
            continue;
        }
        paths.push(path);
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_lists_are_read_per_entry() {
        let text = "worktree /r\nHEAD aaaa\nbranch refs/heads/main\n\nworktree /r/.orbit/.workspaces/x\nHEAD bbbb\ndetached\nlocked orbit loop /r/.orbit/x\n\n";
        let list = parse_worktrees(text);
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].branch.as_deref(), Some("refs/heads/main"));
        assert_eq!(list[1].path, PathBuf::from("/r/.orbit/.workspaces/x"));
        assert_eq!(list[1].head.as_deref(), Some("bbbb"));
        assert_eq!(list[1].branch, None);
    }

    #[test]
    fn status_entries_skip_rename_sources_and_the_agent_folder() {
        let bytes = b" M README.md\0R  new.txt\0old.txt\0?? .orbit-agent/\0?? x y\0";
        assert_eq!(parse_status(bytes), vec!["README.md", "new.txt", "x y"]);
    }
}
