//! The submodules of a fresh checkout, from the repository's own module objects: what the
//! loop's checkouts hold, for the checks that build from one (the adequacy measure's
//! checkouts, `orbit verify --rerun`'s).

use std::path::{Path, PathBuf};

use crate::envelope::git;

/// The submodules of the checkout `ws`, checked out at the commits its index records from
/// the repository's own module objects (`GIT_COMMON_DIR/modules/NAME`: what the user's
/// checkout fetched), never the network, as the runner's `setup_modules_checkout` does for each
/// work tree it makes: a fresh worktree has them empty, and a project that builds from one
/// (a Rust path dependency) fails there. What `.gitmodules` says is the change's (the
/// agent's) text: a name is taken only as a plain path under modules/, a path only where
/// the index holds a submodule at exactly that path and reached through no symlink; each
/// checkout is a fresh clone (one left by an earlier unit is a repository the checks could
/// write). A module the user never initialized stays empty, and the checks say so.
pub fn checkout(repo: &Path, ws: &Path) {
    let gm = ws.join(".gitmodules");
    if !gm.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return;
    }
    let Some(common) = git(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .map(|b| PathBuf::from(String::from_utf8_lossy(&b).trim())) else {
        return;
    };
    let gm_s = gm.display().to_string();
    let Some(list) = git(
        ws,
        &[
            "config",
            "-f",
            &gm_s,
            "--get-regexp",
            r"^submodule\..*\.path$",
        ],
    ) else {
        return;
    };
    for line in String::from_utf8_lossy(&list).lines() {
        let Some((key, path)) = line.split_once(' ') else {
            continue;
        };
        let name = key
            .strip_prefix("submodule.")
            .and_then(|k| k.strip_suffix(".path"))
            .unwrap_or("");
        let plain = |p: &str| {
            !p.is_empty()
                && !p.starts_with('/')
                && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
        };
        if !plain(name) || !plain(path) {
            continue;
        }
        let Some(entry) = git(
            ws,
            &[
                "ls-files",
                "-s",
                "-z",
                "--",
                &format!(":(top,literal){path}"),
            ],
        ) else {
            continue;
        };
        let entry = String::from_utf8_lossy(&entry);
        let Some((meta, at)) = entry.trim_end_matches('\0').split_once('\t') else {
            continue;
        };
        let meta: Vec<&str> = meta.split(' ').collect();
        let sha = match meta.as_slice() {
            ["160000", sha, "0"] if at == path && sha.bytes().all(|b| b.is_ascii_hexdigit()) => {
                *sha
            }
            _ => continue,
        };
        let src = common.join("modules").join(name);
        if src
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
            || !src.join("HEAD").is_file()
        {
            continue;
        }
        // No symlink on the way to the path: a link would send the clone elsewhere.
        let mut at = ws.to_path_buf();
        let mut linked = false;
        for c in path.split('/') {
            at.push(c);
            if at
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                linked = true;
                break;
            }
        }
        if linked {
            continue;
        }
        let _ = std::fs::remove_dir_all(&at);
        let (src_s, at_s) = (src.display().to_string(), at.display().to_string());
        let cloned = git(
            ws,
            &[
                "-c",
                "core.hooksPath=/dev/null",
                "clone",
                "-q",
                "--no-checkout",
                "--",
                &src_s,
                &at_s,
            ],
        )
        .is_some();
        if cloned {
            let _ = git(
                &at,
                &[
                    "-c",
                    "core.hooksPath=/dev/null",
                    "checkout",
                    "-q",
                    "-f",
                    "--detach",
                    sha,
                    "--",
                ],
            );
        }
    }
}
