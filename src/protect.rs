//! A protect set (contract 7) as orbit's audit and recover list it, the same way the
//! runner and recover.sh do (`templates/lib/protect.sh`, `protect_list`; a test holds the
//! three together): every file a protect glob matches in the workspace, tracked or not,
//! ignored or not, but for what the user's own ignore rules (the repository's
//! `info/exclude`, `core.excludesFile`) and the `.gitignore` files of the loop's base commit
//! ignore. An ignore file written in the workspace since (the agent's) decides nothing. The
//! agent's folder is never in a set, nor, while untracked, a file the runner saw a check run
//! make (`.check-artifacts`).

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `git -C dir ARGS` as the loop's readers run it: no fsmonitor, no optional lock, none of
/// the caller's repository variables.
fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(["-c", "core.fsmonitor=false"])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// What `git -C dir ARGS` prints, when it succeeds.
fn git_out<I, S>(dir: &Path, args: I) -> Option<Vec<u8>>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = git(dir).args(args).output().ok()?;
    out.status.success().then_some(out.stdout)
}

/// Line `line` of the `.gitignore` file in the directory `dir` (relative to the top, ""
/// for the top) as a pattern of an exclude file read at the top: one without a slash but at
/// its end matches at any depth under `dir`, any other under `dir` only. `None` for a
/// comment or a blank line.
pub fn rule(dir: &str, line: &str) -> Option<String> {
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    if dir.is_empty() {
        return Some(line.to_string());
    }
    let (neg, l) = match line.strip_prefix('!') {
        Some(rest) => ("!", rest),
        None => ("", line),
    };
    let mut core = l;
    while core.ends_with(' ') && !core.ends_with("\\ ") {
        core = &core[..core.len() - 1];
    }
    let core = core.strip_suffix('/').unwrap_or(core);
    if core.is_empty() {
        return None;
    }
    let d = dir
        .replace('\\', "\\\\")
        .replace('*', "\\*")
        .replace('?', "\\?")
        .replace('[', "\\[");
    Some(if l.starts_with('/') {
        format!("{neg}/{d}{l}")
    } else if core.contains('/') {
        format!("{neg}/{d}/{l}")
    } else {
        format!("{neg}/{d}/**/{l}")
    })
}

/// The `.gitignore` files of the commit `base` (regular files only, the top's first, then
/// deeper ones: a deeper file's rules win, as in git) as one exclude file's text, read
/// through the repository of the work tree `dir`.
pub fn base_rules(dir: &Path, base: &str) -> String {
    let Some(listing) = git_out(dir, ["ls-tree", "-r", "-z", "--full-tree", base]) else {
        return String::new();
    };
    let mut files: Vec<(usize, String, String)> = listing
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let entry = std::str::from_utf8(entry).ok()?;
            let (meta, path) = entry.split_once('\t')?;
            let mut m = meta.split(' ');
            let (mode, kind, oid) = (m.next()?, m.next()?, m.next()?);
            let regular = (mode == "100644" || mode == "100755") && kind == "blob";
            let named = path == ".gitignore" || path.ends_with("/.gitignore");
            (regular && named).then(|| (path.matches('/').count(), path.to_string(), oid.into()))
        })
        .collect();
    // By depth, in the listing's order within one depth (as the runner reads them).
    files.sort_by_key(|(depth, _, _)| *depth);
    let mut text = String::new();
    for (_, path, oid) in files {
        let d = path.strip_suffix("/.gitignore").unwrap_or("");
        let d = if path == ".gitignore" { "" } else { d };
        let Some(blob) = git_out(dir, ["cat-file", "blob", &oid]) else {
            continue;
        };
        for line in String::from_utf8_lossy(&blob).lines() {
            if let Some(r) = rule(d, line) {
                text.push_str(&r);
                text.push('\n');
            }
        }
    }
    text
}

/// The user's own exclude files of the work tree `dir` that exist: `core.excludesFile`
/// (else git's default, `$XDG_CONFIG_HOME/git/ignore`), then the repository's
/// `info/exclude` (which wins, as in git).
fn user_excludes(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let first_line = |b: Vec<u8>| {
        String::from_utf8_lossy(&b)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    };
    let mut f = git_out(dir, ["config", "--path", "--get", "core.excludesFile"])
        .map(first_line)
        .unwrap_or_default();
    if f.is_empty() {
        if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
            f = format!("{}/git/ignore", x.to_string_lossy());
        } else if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            f = format!("{}/.config/git/ignore", h.to_string_lossy());
        }
    }
    let info = git_out(dir, ["rev-parse", "--git-path", "info/exclude"])
        .map(first_line)
        .unwrap_or_default();
    for f in [f, info] {
        if f.is_empty() {
            continue;
        }
        let p = if f.starts_with('/') {
            PathBuf::from(f)
        } else {
            dir.join(f)
        };
        if p.is_file() {
            found.push(p);
        }
    }
    found
}

/// The paths protect glob `glob` matches in the workspace `ws` of the loop directory
/// `loop_dir`, sorted bytewise, each once: every path of the index, and every other file
/// but what the user's own ignore rules and the base commit's (`.baseline-commit`)
/// `.gitignore` files ignore; the agent's folder and the checks' known artifacts
/// (`.check-artifacts`, while untracked) aside. `None` when git cannot list them.
pub fn set_files(ws: &Path, glob: &str, loop_dir: &Path) -> Option<Vec<Vec<u8>>> {
    let read = |name: &str| crate::fsx::read_regular(&loop_dir.join(name)).unwrap_or_default();
    let base = String::from_utf8_lossy(&read(".baseline-commit"))
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let rules = if base.is_empty() {
        String::new()
    } else {
        base_rules(ws, &base)
    };
    let mut rules_file = tempfile_in_tmp()?;
    rules_file.1.write_all(rules.as_bytes()).ok()?;
    let spec = format!(":(glob){glob}");
    let agent = ":(exclude,literal).orbit-agent";
    let cached = git_out(ws, ["ls-files", "-z", "--cached", "--", &spec, agent]);
    let mut others_cmd: Vec<String> = vec!["ls-files".into(), "-z".into(), "--others".into()];
    for f in user_excludes(ws) {
        others_cmd.push(format!("--exclude-from={}", f.display()));
    }
    others_cmd.push(format!("--exclude-from={}", rules_file.0.display()));
    others_cmd.extend(["--".to_string(), spec.clone(), agent.to_string()]);
    for name in String::from_utf8_lossy(&read(".check-artifacts")).lines() {
        if !name.is_empty() {
            others_cmd.push(format!(":(exclude,literal){name}"));
        }
    }
    let others = git_out(ws, &others_cmd);
    let _ = std::fs::remove_file(&rules_file.0);
    let mut files: Vec<Vec<u8>> = cached?
        .split(|b| *b == 0)
        .chain(others?.split(|b| *b == 0))
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    // Sorted and each path once (an unmerged path is listed once per stage), as the runner's
    // `LC_ALL=C sort -zu`.
    files.sort();
    files.dedup();
    Some(files)
}

/// A new file of this process's own in the temporary directory (created, never opened
/// through a name planted there).
fn tempfile_in_tmp() -> Option<(PathBuf, std::fs::File)> {
    let tmp = std::env::temp_dir();
    for k in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = tmp.join(format!(
            ".orbit-protect-rules.{}.{nanos}.{k}",
            std::process::id()
        ));
        if let Ok(f) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            return Some((p, f));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::rule;

    #[test]
    fn a_nested_gitignore_line_becomes_a_top_level_rule_of_the_same_reach() {
        assert_eq!(rule("", "*.pyc"), Some("*.pyc".into()));
        assert_eq!(
            rule("tests", "__pycache__/"),
            Some("/tests/**/__pycache__/".into())
        );
        assert_eq!(rule("tests", "/out"), Some("/tests/out".into()));
        assert_eq!(rule("a/b", "x/y"), Some("/a/b/x/y".into()));
        assert_eq!(rule("a", "!keep.txt"), Some("!/a/**/keep.txt".into()));
        assert_eq!(rule("a*b", "c"), Some("/a\\*b/**/c".into()));
        assert_eq!(rule("a", "# note"), None);
        assert_eq!(rule("a", ""), None);
        assert_eq!(rule("a", "/"), None);
    }
}
