//! The workspace repairs of `orbit recover` (contract 2.0: a loop runs in its own git
//! worktree on `orbit/<name>`) and `--migrate`, which moves a contract-1.0 loop (run in the
//! user's checkout) to 2.0. Both only plan here: git steps, file writes and moves that
//! `apply` carries out, with the repairs and notes that say why.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::{self, LoopConfig};
use crate::error::{Error, Result};
use crate::state::State;
use crate::{pins, render};

use super::{LoopRef, MoveTo, Plan, read_opt, repo_relative, workspace_of};

/// A git step of a plan, run before any file is written.
#[derive(Debug, Clone)]
pub enum GitStep {
    /// `git switch BRANCH` in the user's checkout (a 1.0 loop left it on the loop branch).
    SwitchCheckout { branch: String },
    /// `git worktree add --lock` of the workspace on the loop branch; the branch is created
    /// at `create_at` when it does not exist.
    AddWorktree {
        ws: String,
        branch: String,
        create_at: Option<String>,
    },
    /// A candidate worktree: `git worktree unlock`, then `git worktree remove -f -f`.
    RemoveWorktree { ws: String },
    /// `git worktree prune` (after candidate worktrees were removed).
    PruneWorktrees,
    /// `git update-ref -d NAME COMMIT` (a candidate's ref; deleted only if it still holds it).
    DeleteRef { name: String, commit: String },
}

impl GitStep {
    pub fn describe(&self) -> String {
        match self {
            GitStep::SwitchCheckout { branch } => {
                format!(
                    "git switch {branch} (your checkout, back on the branch the loop started from)"
                )
            }
            GitStep::AddWorktree {
                ws,
                branch,
                create_at: None,
            } => format!("git worktree add --lock {ws} {branch}"),
            GitStep::AddWorktree {
                ws,
                branch,
                create_at: Some(c),
            } => format!(
                "git worktree add --lock -b {branch} {ws} {}",
                &c[..c.len().min(12)]
            ),
            GitStep::RemoveWorktree { ws } => {
                format!("git worktree unlock {ws}; git worktree remove --force --force {ws}")
            }
            GitStep::PruneWorktrees => "git worktree prune".into(),
            GitStep::DeleteRef { name, commit } => {
                format!("git update-ref -d {name} {commit}")
            }
        }
    }
}

/// `git -C REPO ARGS`: its trimmed output when it succeeds.
pub(super) fn git(repo: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

fn git_run(repo: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .map_err(|e| Error::io("cannot run git", e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Refused(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The head commit of a branch.
fn branch_head(repo: &Path, branch: &str) -> Option<String> {
    git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
    )
}

/// Carries out the plan's git steps, in order.
pub fn run_git(lp: &LoopRef, steps: &[GitStep]) -> Result<()> {
    for step in steps {
        match step {
            GitStep::SwitchCheckout { branch } => {
                git_run(&lp.repo, &["switch", "-q", branch])?;
            }
            GitStep::AddWorktree {
                ws,
                branch,
                create_at,
            } => {
                if let Some(parent) = Path::new(ws).parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| Error::io(format!("cannot create {}", parent.display()), e))?;
                }
                // An empty directory left where the workspace was is taken over.
                let _ = std::fs::remove_dir(ws);
                // A worktree deleted by hand is still registered, and locked: its entry goes
                // (only its own: a prune could take another loop's workspace being added).
                let _ = git(&lp.repo, &["worktree", "remove", "-f", "-f", "--", ws]);
                let reason = format!("orbit loop {}", lp.dir.display());
                let mut args = vec!["worktree", "add", "-q", "--lock", "--reason", &reason];
                match create_at {
                    Some(c) => args.extend(["-b", branch, "--", ws, c]),
                    None => args.extend(["--", ws, branch]),
                }
                git_run(&lp.repo, &args)?;
            }
            GitStep::RemoveWorktree { ws } => {
                // Unlocked first (the runner adds candidates with --lock); a directory that
                // is already gone leaves only git's entry, which remove (or the prune) takes.
                let _ = git(&lp.repo, &["worktree", "unlock", "--", ws]);
                let gone = std::fs::symlink_metadata(ws).is_err();
                let removed = git(&lp.repo, &["worktree", "remove", "-f", "-f", "--", ws]);
                if removed.is_none() && !gone {
                    git_run(&lp.repo, &["worktree", "remove", "-f", "-f", "--", ws])?;
                }
            }
            GitStep::PruneWorktrees => {
                git_run(&lp.repo, &["worktree", "prune"])?;
            }
            GitStep::DeleteRef { name, commit } => {
                git_run(&lp.repo, &["update-ref", "-d", name, commit])?;
            }
        }
    }
    Ok(())
}

/// The repository's `info/exclude` with the agent's folder and (when it is inside the
/// repository) the workspace added, as the runner's `workspace_exclude` adds them; `None`
/// when both are there.
fn exclude_write(lp: &LoopRef, ws: &str) -> Result<Option<(PathBuf, Vec<u8>)>> {
    let Some(common) = git(&lp.repo, &["rev-parse", "--git-common-dir"]) else {
        return Ok(None);
    };
    let common = if common.starts_with('/') {
        PathBuf::from(common)
    } else {
        lp.repo.join(common)
    };
    let path = common.join("info").join("exclude");
    let mut text = String::from_utf8_lossy(&read_opt(&path)?.unwrap_or_default()).into_owned();
    let mut wants = vec!["/.orbit-agent".to_string()];
    if let Ok(rel) = Path::new(ws).strip_prefix(&lp.repo) {
        wants.push(format!("/{}/", rel.display()));
    }
    let before = text.clone();
    for w in wants {
        if !text.lines().any(|l| l == w) {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&w);
            text.push('\n');
        }
    }
    Ok((text != before).then(|| (path, text.into_bytes())))
}

/// What the workspace check (and `--migrate`) decided.
pub struct Outcome {
    /// WORKSPACE for the new state, when it changes (set by a migration).
    pub workspace: Option<String>,
}

/// A 2.0 loop's workspace: one left where the loop's workspace belongs by another
/// repository (or by this path's repository before it was deleted and made again) is named,
/// never removed; when the loop ran, its workspace is recreated when it is missing, and a
/// loop branch moved by hand is accepted where it is (`.branch-head` rewritten). `ws` is
/// the state's workspace, empty before the first run (then the one the first run would
/// make is looked at).
pub fn check(lp: &LoopRef, plan: &mut Plan, ws: &str, iter_branch: &str) {
    let branch = if iter_branch.is_empty() {
        format!("orbit/{}", lp.name)
    } else {
        iter_branch.to_string()
    };
    let ran = !ws.is_empty();
    let ws = if ran {
        ws.to_string()
    } else {
        workspace_of(lp)
    };
    let wsp = Path::new(&ws);
    if let Some(names) = foreign_worktree(&lp.repo, wsp) {
        let then = if ran {
            format!("run orbit recover again (it is recreated from {branch})")
        } else {
            "run the loop (its first run makes it)".to_string()
        };
        plan.notes.push(format!(
            "the workspace {ws} is not a worktree of this repository (its .git {names}; left by a repository deleted or moved from here?): move it away, then {then}"
        ));
        plan.blocked_until = Some("it is moved away");
        return;
    }
    if !ran {
        return;
    }
    let ws = ws.as_str();
    let head = branch_head(&lp.repo, &branch);
    if !wsp.join(".git").exists() {
        let empty = std::fs::read_dir(wsp).map_or(true, |mut d| d.next().is_none());
        match &head {
            _ if !empty => {
                plan.notes.push(format!(
                    "the workspace {ws} exists but is not a git worktree: move it away, then run orbit recover again (it is recreated from {branch})"
                ));
                plan.blocked_until = Some("it is moved away");
            }
            Some(_) => {
                plan.repairs.push(format!(
                    "the workspace {ws} is missing: recreated from {branch}"
                ));
                plan.git.push(GitStep::AddWorktree {
                    ws: ws.to_string(),
                    branch: branch.clone(),
                    create_at: None,
                });
            }
            None => {
                plan.notes.push(format!(
                    "the workspace {ws} and the loop branch {branch} are both gone: recreate the branch (git branch {branch} <commit>), then run orbit recover again"
                ));
                plan.blocked_until = Some("the loop branch is recreated");
            }
        }
    }
    let recorded = lp.dir.join(".branch-head");
    if let (Some(head), Some(want)) = (&head, crate::fsx::read_text_or_none(&recorded)) {
        let want = want.trim();
        if !want.is_empty()
            && want != head
            && git(&lp.repo, &["merge-base", "--is-ancestor", want, head]).is_none()
        {
            plan.repairs.push(format!(
                "the loop branch {branch} was moved by hand (from {} to {}): accepted where it is now (.branch-head rewritten; the old head is in the backup)",
                &want[..want.len().min(12)],
                &head[..head.len().min(12)]
            ));
            plan.writes
                .push((recorded, format!("{head}\n").into_bytes(), false));
        }
    }
}

/// What is wrong with a `.git` at the workspace `ws` that is not a worktree of the
/// repository `repo` (a regular file naming a directory under its common git directory's
/// `worktrees/`); `None` when there is no `.git` there, or it is one. The file is read, never
/// obeyed: no git runs in a directory the agent wrote.
fn foreign_worktree(repo: &Path, ws: &Path) -> Option<String> {
    let dotgit = ws.join(".git");
    let meta = std::fs::symlink_metadata(&dotgit).ok()?;
    if !meta.is_file() {
        return Some("is not a file: a repository of its own, or a link".into());
    }
    let common = crate::locate::workspace::git_common_dir(repo)?;
    let text = std::fs::read_to_string(&dotgit).unwrap_or_default();
    let Some(gd) = text.lines().next().and_then(|l| l.strip_prefix("gitdir: ")) else {
        return Some("names no git directory".into());
    };
    // A relative one (git's worktree.useRelativePaths) is from the workspace.
    match std::fs::canonicalize(ws.join(gd)) {
        Ok(real) if real.starts_with(common.join("worktrees")) && real.is_dir() => None,
        Ok(_) => Some(format!("names {gd}, another repository's")),
        Err(_) => Some(format!("names {gd}, which is gone")),
    }
}

/// Whether the loop belongs to an older major version of the contract: its state's, or
/// (without a readable state) its loop.toml's.
pub fn needs_migration(lp: &LoopRef, old: Option<&State>) -> bool {
    let v = old.map_or(lp.loop_contract.as_str(), |s| s.contract_version.as_str());
    crate::contract::older_major(v) || crate::contract::older_major(&lp.loop_contract)
}

/// `--migrate`'s first step, for every loop of an older contract: loop.toml at this
/// contract (an empty `workspace` of an older contract written as the default it had then,
/// `.orbit/.workspaces/<name>`), the scripts re-rendered as
/// `orbit init --force` does (with their pins and baseline copies), the pins of repository
/// files moved to the workspace (same hashes: a 1.0 loop's), and `.baseline` to the
/// backup. Each file is written only when it changes, and the plan says which. The
/// workspace's path, as loop.toml names it.
pub fn restamp(lp: &LoopRef, plan: &mut Plan) -> Result<String> {
    let dir = &lp.dir;
    // loop.toml.
    let mut cfg = LoopConfig::load(&dir.join("loop.toml"))?;
    // The workspace stays where it is: an empty setting of an older contract meant
    // .orbit/.workspaces/<name>, and says so now (at this contract, empty means the data
    // directory's default).
    cfg.workspace = cfg.workspace_setting();
    cfg.contract_version = config::CONTRACT_VERSION.to_string();
    let toml = cfg.to_toml();
    let ws = workspace_of(&LoopRef {
        dir: lp.dir.clone(),
        repo: lp.repo.clone(),
        rel: lp.rel.clone(),
        name: lp.name.clone(),
        loop_contract: cfg.contract_version.clone(),
        workspace_setting: cfg.workspace.clone(),
        autocommit: cfg.autocommit,
        protect: cfg.protect_globs(),
        engine: cfg.engine,
    });
    let mut changed_files = Vec::new();
    let mut write_if = |plan: &mut Plan, path: PathBuf, data: Vec<u8>, exec: bool| -> Result<()> {
        if read_opt(&path)?.as_deref() != Some(&data[..]) {
            changed_files.push(
                path.strip_prefix(dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            );
            plan.writes.push((path, data, exec));
        }
        Ok(())
    };
    write_if(
        plan,
        dir.join("loop.toml"),
        toml.clone().into_bytes(),
        false,
    )?;
    write_if(
        plan,
        dir.join(".pins").join("loop.toml"),
        toml.clone().into_bytes(),
        false,
    )?;
    // The scripts, as `orbit init --force` renders them.
    let mut new_pins: Vec<(String, String)> = Vec::new();
    for (name, text, exec) in render::rerender_loop(&cfg, dir, &lp.rel)? {
        write_if(plan, dir.join(name), text.clone().into_bytes(), exec)?;
        write_if(
            plan,
            dir.join(".pins").join(name),
            text.clone().into_bytes(),
            false,
        )?;
        new_pins.push(pins::pin_bytes(name, text.as_bytes()));
    }
    new_pins.push(pins::pin_bytes("loop.toml", toml.as_bytes()));
    // The orbit that migrates is the one the runner calls from now on to measure a DONE's
    // change (orbit.sha256, as `orbit init --force` pins it): a loop of an older contract
    // has none, or one of an orbit that may be gone, and its adequacy gate could not run.
    let orbit_pin = dir.join(crate::adequacy::ORBIT_PIN);
    if cfg.adequacy == config::Adequacy::Off {
        if orbit_pin.symlink_metadata().is_ok() {
            plan.moves
                .push((orbit_pin, MoveTo::Backup(crate::adequacy::ORBIT_PIN.into())));
            plan.repairs
                .push("orbit.sha256 moved to the backup: adequacy = \"off\" calls no orbit".into());
        }
    } else {
        let pin = crate::adequacy::orbit_pin()?;
        write_if(plan, orbit_pin, pin.clone().into_bytes(), false)?;
        write_if(
            plan,
            dir.join(".pins").join(crate::adequacy::ORBIT_PIN),
            pin.clone().into_bytes(),
            false,
        )?;
        new_pins.push(pins::pin_bytes(crate::adequacy::ORBIT_PIN, pin.as_bytes()));
    }
    new_pins.sort_by_key(|(_, p)| pins::INIT_PINNED.iter().position(|x| x == p));
    // The first run's pins: loop files kept, repository files named in the workspace.
    let old_pins = read_opt(&dir.join("pins.sha256"))?.unwrap_or_default();
    let (old_pins, _) = pins::parse(&old_pins);
    let mut moved = 0;
    for p in old_pins {
        if pins::INIT_PINNED.contains(&p.path.as_str()) {
            continue;
        }
        let path = if p.path.contains('/') && !p.path.starts_with('/') {
            match repo_relative(&lp.rel, &p.path) {
                Some(rel) => {
                    moved += 1;
                    format!("{ws}/{rel}")
                }
                None => p.path,
            }
        } else {
            p.path
        };
        new_pins.push((p.sha256, path));
    }
    write_if(
        plan,
        dir.join("pins.sha256"),
        pins::print(&new_pins).into_bytes(),
        false,
    )?;
    if !changed_files.is_empty() {
        plan.repairs.push(format!(
            "re-rendered for contract {} (--migrate): {}",
            config::CONTRACT_VERSION,
            changed_files.join(", ")
        ));
    }
    if moved > 0 {
        plan.repairs.push(format!(
            "{moved} pin(s) of repository files now name them in the workspace {ws} (same hashes)"
        ));
    }
    if dir.join(".baseline").is_file() {
        plan.moves
            .push((dir.join(".baseline"), MoveTo::Backup(".baseline".into())));
        plan.repairs.push(
            ".baseline (contract 1.0's list of files dirty at the first run) moved to the backup: the workspace starts from a commit"
                .into(),
        );
    }
    Ok(ws)
}

/// `--migrate` of a loop of an older contract major: [`restamp`], then the workspace
/// created from the loop branch (or the baseline commit), and the user's checkout put back
/// on its origin branch when the loop had left it on the loop branch and nothing changed
/// since.
pub fn migrate(lp: &LoopRef, plan: &mut Plan, old: Option<&State>, ran: bool) -> Result<Outcome> {
    let ws = restamp(lp, plan)?;
    if !ran {
        // Never run: the first run creates the workspace.
        return Ok(Outcome {
            workspace: Some(String::new()),
        });
    }
    let dir = &lp.dir;
    // The workspace, on the loop branch (or a new one at the baseline commit).
    let branch = old
        .map(|s| s.iter_branch.clone())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| format!("orbit/{}", lp.name));
    let head = branch_head(&lp.repo, &branch);
    if !Path::new(&ws).join(".git").exists() {
        let create_at = match &head {
            Some(_) => None,
            None => {
                let base = crate::fsx::read_text_or_none(&dir.join(".baseline-commit"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default();
                if base.is_empty() {
                    return Err(Error::Refused(format!(
                        "cannot migrate {}: neither the loop branch {branch} nor .baseline-commit is there to start the workspace from (nothing was changed)",
                        lp.rel
                    )));
                }
                Some(base)
            }
        };
        // The loop branch cannot be checked out twice: a 1.0 loop left the user's checkout
        // on it. Switched back only when nothing changed since.
        let user = git(&lp.repo, &["symbolic-ref", "-q", "--short", "HEAD"]).unwrap_or_default();
        if head.is_some() && user == branch {
            let origin = old.map(|s| s.origin_branch.clone()).unwrap_or_default();
            let clean = git(&lp.repo, &["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| s.is_empty());
            if !clean || origin.is_empty() || branch_head(&lp.repo, &origin).is_none() {
                let back = if origin.is_empty() {
                    "the branch you work on".to_string()
                } else {
                    origin
                };
                return Err(Error::Refused(format!(
                    "cannot migrate {}: your checkout is on the loop branch {branch}{}, and the workspace needs that branch. Commit or stash your changes, `git switch {back}`, then run orbit recover --migrate again (nothing was changed)",
                    lp.rel,
                    if clean {
                        ""
                    } else {
                        " with uncommitted changes"
                    }
                )));
            }
            plan.git.push(GitStep::SwitchCheckout {
                branch: origin.clone(),
            });
            plan.repairs.push(format!(
                "your checkout was on the loop branch {branch}, as the 1.0 loop left it: switched back to {origin}"
            ));
        } else if !user.is_empty() && user != branch {
            plan.notes.push(format!(
                "your checkout is on {user}: left as it is (the loop now works in {ws})"
            ));
        }
        plan.repairs.push(format!(
            "the workspace {ws} created on {branch} (contract 2.0: the loop works there, your checkout is left alone)"
        ));
        plan.git.push(GitStep::AddWorktree {
            ws: ws.clone(),
            branch: branch.clone(),
            create_at: create_at.clone(),
        });
        let new_head = head.clone().or(create_at);
        if let Some(h) = new_head {
            plan.writes.push((
                dir.join(".branch-head"),
                format!("{h}\n").into_bytes(),
                false,
            ));
        }
    }
    if let Some((path, data)) = exclude_write(lp, &ws)? {
        plan.writes.push((path, data, false));
    }
    Ok(Outcome {
        workspace: Some(ws),
    })
}

#[cfg(test)]
mod tests {
    use super::foreign_worktree;
    use std::path::Path;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    fn repo(dir: &Path) {
        git(dir, &["init", "-q"]);
        git(
            dir,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "i",
            ],
        );
    }

    #[test]
    fn a_workspace_is_this_repositorys_worktree_or_named_for_what_its_git_is() {
        let t = tempfile::tempdir().unwrap();
        let (mine, other) = (t.path().join("mine"), t.path().join("other"));
        for r in [&mine, &other] {
            std::fs::create_dir(r).unwrap();
            repo(r);
        }
        let ws = t.path().join("ws");
        git(
            &mine,
            &["worktree", "add", "-q", "--detach", ws.to_str().unwrap()],
        );
        assert_eq!(foreign_worktree(&mine, &ws), None, "its own worktree");
        assert_eq!(
            foreign_worktree(&mine, &t.path().join("none")),
            None,
            "no .git there: not this check's"
        );
        // Another repository's worktree where this loop's belongs.
        let theirs = t.path().join("theirs");
        git(
            &other,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                theirs.to_str().unwrap(),
            ],
        );
        let said = foreign_worktree(&mine, &theirs).unwrap();
        assert!(said.ends_with(", another repository's"), "{said}");
        // A .git naming a git directory that is gone.
        std::fs::write(ws.join(".git"), "gitdir: /nonexistent/.git/worktrees/ws\n").unwrap();
        let said = foreign_worktree(&mine, &ws).unwrap();
        assert!(said.ends_with(", which is gone"), "{said}");
        // A .git that names nothing, a directory, a link to this repository's own.
        std::fs::write(ws.join(".git"), "not a gitdir line\n").unwrap();
        assert_eq!(
            foreign_worktree(&mine, &ws).as_deref(),
            Some("names no git directory")
        );
        std::fs::remove_file(ws.join(".git")).unwrap();
        std::os::unix::fs::symlink(mine.join(".git"), ws.join(".git")).unwrap();
        assert!(
            foreign_worktree(&mine, &ws)
                .unwrap()
                .starts_with("is not a file")
        );
        std::fs::remove_file(ws.join(".git")).unwrap();
        std::fs::create_dir(ws.join(".git")).unwrap();
        assert!(
            foreign_worktree(&mine, &ws)
                .unwrap()
                .starts_with("is not a file")
        );
    }
}
