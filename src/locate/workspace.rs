//! Where a loop's workspace is by default: outside the user's checkout, under the user's
//! data directory, `$XDG_DATA_HOME/orbit/workspaces/<repo-id>/<name>` (XDG_DATA_HOME when
//! it is absolute, else `$HOME/.local/share`, on every system). A workspace inside the
//! checkout lets every tool that walks up the directory tree (node's module resolution,
//! cargo's `.cargo/config.toml`, Python's pyproject.toml, direnv, editorconfig) find the
//! user's own files there: a check could pass in the workspace and fail anywhere else.
//!
//! The runner computes the same path (templates/lib/workspace.sh,
//! `workspace_default_v`); a differential test holds the two together.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The default workspace of the loops of contract 2.0 to 2.3 whose loop.toml names none,
/// relative to the repository root.
pub fn legacy_default(name: &str) -> String {
    format!(".orbit/.workspaces/{name}")
}

/// The first contract version whose empty `workspace` setting means the data directory
/// (before it: [`legacy_default`]).
pub const DATA_DEFAULT_SINCE: (u64, u64) = (2, 4);

/// Whether a loop.toml of `contract_version` whose `workspace` is empty means the data
/// directory (2.4.0 and later) rather than [`legacy_default`].
pub fn empty_means_data_dir(contract_version: &str) -> bool {
    let mut parts = contract_version.split('.').map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= DATA_DEFAULT_SINCE,
        _ => true,
    }
}

/// The root of the default workspaces: `$XDG_DATA_HOME/orbit/workspaces`, or
/// `$HOME/.local/share/orbit/workspaces`; `None` when neither names an absolute directory.
pub fn workspaces_root() -> Option<PathBuf> {
    let data = match std::env::var_os("XDG_DATA_HOME").map(PathBuf::from) {
        Some(d) if d.is_absolute() => d,
        _ => {
            let home = PathBuf::from(std::env::var_os("HOME")?);
            if !home.is_absolute() {
                return None;
            }
            home.join(".local/share")
        }
    };
    Some(data.join("orbit").join("workspaces"))
}

/// The repository's git common directory, canonical (symbolic links resolved), as
/// `git rev-parse --git-common-dir` names it from `repo`.
pub fn git_common_dir(repo: &Path) -> Option<PathBuf> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--git-common-dir"])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let dir = Path::new(text.trim_end_matches('\n'));
    std::fs::canonicalize(repo.join(dir)).ok()
}

/// The repository's name in the workspaces' root: the name of its checkout (the git
/// common directory's parent when that is `.git`, else the directory without a `.git`
/// suffix), each byte outside `A-Za-z0-9._-` made a `-`, then `-` and the first 12 hex
/// digits of the sha256 of the common directory's canonical path, so that two checkouts
/// never share one.
pub fn repo_id(common: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let last = common.file_name().map(|n| n.as_bytes()).unwrap_or(b"");
    let name: &[u8] = if last == b".git" {
        common
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.as_bytes())
            .unwrap_or(b"")
    } else {
        last.strip_suffix(b".git").unwrap_or(last)
    };
    let mut id: String = name
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-' {
                b as char
            } else {
                '-'
            }
        })
        .collect();
    if id.is_empty() {
        id.push_str("repo");
    }
    let hash = crate::fsx::sha256_hex(common.as_os_str().as_bytes());
    format!("{id}-{}", &hash[..12])
}

/// The default workspace of the loop `name` of the repository at `repo` on this machine,
/// as the runner's first run makes it (`None`: no data directory, or no git repository).
pub fn data_default(repo: &Path, name: &str) -> Option<PathBuf> {
    let common = git_common_dir(repo)?;
    Some(workspaces_root()?.join(repo_id(&common)).join(name))
}

/// The workspace a loop's `workspace` setting names, as an absolute path: the setting
/// relative to the repository root `repo`; empty, the default of its contract version
/// (the data directory's from 2.4.0, [`legacy_default`] before). Empty text when the
/// data directory cannot be told (no HOME): the runner refuses to start then.
pub fn from_setting(repo: &Path, setting: &str, name: &str, contract_version: &str) -> String {
    let p = if !setting.is_empty() {
        if setting.starts_with('/') {
            PathBuf::from(setting)
        } else {
            repo.join(setting)
        }
    } else if empty_means_data_dir(contract_version) {
        match data_default(repo, name) {
            Some(p) => p,
            None => return String::new(),
        }
    } else {
        repo.join(legacy_default(name))
    };
    p.display().to_string().trim_end_matches('/').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_id_names_the_checkout_and_hashes_its_path() {
        let a = repo_id(Path::new("/home/u/src/my app/.git"));
        assert!(a.starts_with("my-app-"), "{a}");
        assert_eq!(a.len(), "my-app-".len() + 12);
        let b = repo_id(Path::new("/home/u/other/my app/.git"));
        assert_ne!(a, b, "two checkouts of one name never share a directory");
        assert!(repo_id(Path::new("/srv/proj.git")).starts_with("proj-"));
        assert!(repo_id(Path::new("/.git")).starts_with("repo-"));
        assert!(repo_id(Path::new("/x/caf\u{e9}/.git")).starts_with("caf--"));
    }

    #[test]
    fn an_empty_setting_means_the_data_directory_from_2_4() {
        assert!(!empty_means_data_dir("2.3.0"));
        assert!(!empty_means_data_dir("2.0.0"));
        assert!(!empty_means_data_dir("1.0.0"));
        assert!(empty_means_data_dir("2.4.0"));
        assert!(empty_means_data_dir("3.0.0"));
        assert!(empty_means_data_dir(crate::contract::CONTRACT_VERSION));
        assert_eq!(
            from_setting(Path::new("/r"), "", "x", "2.3.0"),
            "/r/.orbit/.workspaces/x"
        );
        assert_eq!(from_setting(Path::new("/r"), "w/", "x", "2.4.0"), "/r/w");
        assert_eq!(from_setting(Path::new("/r"), "/abs", "x", "2.4.0"), "/abs");
    }
}
