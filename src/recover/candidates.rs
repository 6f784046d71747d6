//! Fan-out candidates (contract section 10) as recover and audit see them: the refs that
//! keep each candidate's change (`refs/orbit/<name>/<iteration>/<candidate>`) and the
//! candidate worktrees `<workspace>.c<K>`. `orbit recover --prune-candidates` removes both.

use std::fs;
use std::path::{Path, PathBuf};

use super::workspace::{GitStep, git};
use super::{LoopRef, Plan};

/// The loop's candidate refs with their commits, sorted.
pub fn refs(repo: &Path, name: &str) -> Vec<(String, String)> {
    let prefix = format!("refs/orbit/{name}/");
    git(
        repo,
        &["for-each-ref", "--format=%(refname) %(objectname)", &prefix],
    )
    .map(|out| refs_from(&out, name))
    .unwrap_or_default()
}

/// The candidate refs of the loop `name` in `git for-each-ref --format='%(refname)
/// %(objectname)'` output, sorted.
pub fn refs_from(text: &str, name: &str) -> Vec<(String, String)> {
    let prefix = format!("refs/orbit/{name}/");
    let mut v: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(r, _)| r.starts_with(&prefix))
        .map(|(r, c)| (r.to_string(), c.to_string()))
        .collect();
    v.sort();
    v
}

/// The candidate number K of `path` when it is `<ws>.c<K>` (K a decimal without a leading 0).
pub fn candidate_number(ws: &str, path: &str) -> Option<u32> {
    let k = path.strip_prefix(ws)?.strip_prefix(".c")?;
    if k.is_empty() || k.starts_with('0') || k.len() > 3 || !k.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    k.parse().ok()
}

/// A candidate worktree: its number, its path, whether it is there (anything at the path)
/// and whether git has it registered.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub k: u32,
    pub path: PathBuf,
    pub present: bool,
    pub registered: bool,
}

/// The candidate worktrees of the workspace `ws` (an absolute path): what is beside it named
/// `<ws>.c<K>`, and what git lists as a worktree under such a name. Sorted by K.
pub fn worktrees(repo: &Path, ws: &str) -> Vec<Candidate> {
    let listed = git(repo, &["worktree", "list", "--porcelain"]);
    worktrees_from(ws, listed.as_deref())
}

/// As [`worktrees`], with git's list (`git worktree list --porcelain`) given.
pub fn worktrees_from(ws: &str, listed: Option<&str>) -> Vec<Candidate> {
    let mut found: std::collections::BTreeMap<u32, Candidate> = Default::default();
    let wsp = Path::new(ws);
    if let (Some(parent), Some(_)) = (wsp.parent(), wsp.file_name())
        && let Ok(rd) = fs::read_dir(parent)
    {
        for e in rd.flatten() {
            let p = e.path();
            let s = p.to_string_lossy().into_owned();
            if let Some(k) = candidate_number(ws, &s) {
                found.insert(
                    k,
                    Candidate {
                        k,
                        path: p,
                        present: true,
                        registered: false,
                    },
                );
            }
        }
    }
    if let Some(out) = listed {
        for l in out.lines() {
            let Some(p) = l.strip_prefix("worktree ") else {
                continue;
            };
            if let Some(k) = candidate_number(ws, p) {
                found
                    .entry(k)
                    .or_insert_with(|| Candidate {
                        k,
                        path: PathBuf::from(p),
                        present: fs::symlink_metadata(p).is_ok(),
                        registered: true,
                    })
                    .registered = true;
            }
        }
    }
    found.into_values().collect()
}

/// The repository's common git directory, absolute.
pub fn git_common_dir(repo: &Path) -> Option<PathBuf> {
    let out = git(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    Some(PathBuf::from(out))
}

/// Whether the candidate worktree `cws` is one this repository made (the runner's
/// `fanout_intact`): a real directory whose `.git` is a regular file naming a directory
/// under `<common>/worktrees/` other than the workspace's own, whose `gitdir` names back
/// this `.git`. `Err` says what is wrong.
pub fn intact(common: &Path, ws: &str, cws: &Path) -> Result<(), String> {
    let meta = fs::symlink_metadata(cws).map_err(|_| "it is missing".to_string())?;
    if !meta.is_dir() {
        return Err("it is not a directory".into());
    }
    let dotgit = cws.join(".git");
    match fs::symlink_metadata(&dotgit) {
        Ok(m) if m.is_file() => {}
        _ => return Err("its .git is not a regular file".into()),
    }
    let text = fs::read_to_string(&dotgit).map_err(|_| "its .git cannot be read".to_string())?;
    let line = text.lines().next().unwrap_or("");
    let gd = line
        .strip_prefix("gitdir: ")
        .ok_or_else(|| "its .git names no gitdir".to_string())?;
    let gd = Path::new(gd);
    let worktrees = common.join("worktrees");
    if !gd.starts_with(&worktrees) || !gd.is_dir() {
        return Err(format!(
            "its .git points at {}, not into {}",
            gd.display(),
            worktrees.display()
        ));
    }
    let ws_gd = fs::read_to_string(Path::new(ws).join(".git"))
        .ok()
        .and_then(|t| t.lines().next().map(str::to_string))
        .and_then(|l| l.strip_prefix("gitdir: ").map(PathBuf::from));
    if let Some(w) = ws_gd
        && same_file(&w, gd)
    {
        return Err(format!(
            "its .git points at the workspace's own git directory {}",
            gd.display()
        ));
    }
    let back = fs::read_to_string(gd.join("gitdir")).unwrap_or_default();
    if !same_file(Path::new(back.trim_end_matches('\n')), &dotgit) {
        return Err(format!(
            "its git directory {} names another worktree",
            gd.display()
        ));
    }
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// `--prune-candidates`: every candidate ref is deleted (its commit named, to restore it by
/// hand), every candidate worktree that is this repository's is unlocked and removed, then
/// git forgets the removed worktrees. A path that is not a worktree of this repository is
/// left alone, with a note.
pub fn plan(lp: &LoopRef, ws: &str, plan: &mut Plan) {
    let common = git_common_dir(&lp.repo);
    // `git worktree prune` is repository-wide (it forgets every unlocked worktree whose
    // directory is gone, the user's too): run only when a candidate's directory is gone,
    // the one case `git worktree remove` may leave an entry behind.
    let mut gone = false;
    for c in worktrees(&lp.repo, ws) {
        let p = c.path.to_string_lossy().into_owned();
        if c.present {
            let ok = common
                .as_deref()
                .map(|g| intact(g, ws, &c.path))
                .unwrap_or_else(|| Err("the repository's git directory is unknown".into()));
            if let Err(why) = ok {
                plan.notes.push(format!(
                    "{p} is not left alone: it is not a candidate worktree of this repository ({why}); review it and remove it by hand"
                ));
                continue;
            }
        }
        plan.repairs.push(format!(
            "candidate worktree {p} removed (--prune-candidates){}",
            if c.present {
                ""
            } else {
                ": its directory was already gone"
            }
        ));
        plan.git.push(GitStep::RemoveWorktree { ws: p });
        gone |= !c.present;
    }
    if gone {
        plan.git.push(GitStep::PruneWorktrees);
    }
    for (r, c) in refs(&lp.repo, &lp.name) {
        plan.repairs.push(format!(
            "candidate ref {r} deleted (--prune-candidates; it held {c}: `git update-ref {r} {c}` brings it back)"
        ));
        plan.git.push(GitStep::DeleteRef { name: r, commit: c });
    }
    // The runner's private indexes of the candidates' snapshots go with them.
    if let Ok(rd) = fs::read_dir(&lp.dir) {
        let mut idx: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix(".tree-index.c"))
                    .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
                    && p.is_file()
            })
            .collect();
        idx.sort();
        if !idx.is_empty() && !plan.git.is_empty() {
            plan.removes.extend(idx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::candidate_number;

    #[test]
    fn candidate_numbers_are_plain_decimals_after_dot_c() {
        assert_eq!(candidate_number("/r/ws", "/r/ws.c1"), Some(1));
        assert_eq!(candidate_number("/r/ws", "/r/ws.c12"), Some(12));
        assert_eq!(candidate_number("/r/ws", "/r/ws.c0"), None);
        assert_eq!(candidate_number("/r/ws", "/r/ws.c01"), None);
        assert_eq!(candidate_number("/r/ws", "/r/ws.cx"), None);
        assert_eq!(candidate_number("/r/ws", "/r/ws2.c1"), None);
        assert_eq!(candidate_number("/r/ws", "/r/ws.c"), None);
    }
}
