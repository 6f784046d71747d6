//! `pins.sha256`: the `sha256sum -c` manifest of every pinned file, paths relative to the
//! loop directory (protected repository paths reach the repository through `../`).

use crate::fsx;

use std::path::Path;

pub use crate::contract::{
    INIT_PINNED, PERMISSION_FILES, is_permission_file, pin_reason, pin_reason_in,
    workspace_relative,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub sha256: String,
    pub path: String,
    /// 1-based line in pins.sha256.
    pub line: usize,
}

pub fn line(sha256: &str, path: &str) -> String {
    format!("{sha256}  {path}\n")
}

pub fn print(pins: &[(String, String)]) -> String {
    pins.iter().map(|(h, p)| line(h, p)).collect()
}

pub fn pin_bytes(path: &str, data: &[u8]) -> (String, String) {
    (fsx::sha256_hex(data), path.to_string())
}

/// Parses the manifest; malformed lines are returned with their line numbers.
pub fn parse(bytes: &[u8]) -> (Vec<Pin>, Vec<(usize, String)>) {
    let text = String::from_utf8_lossy(bytes);
    let mut pins = Vec::new();
    let mut bad = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let l = l.strip_prefix('\\').unwrap_or(l);
        match l.split_once("  ") {
            Some((h, p))
                if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) && !p.is_empty() =>
            {
                pins.push(Pin {
                    sha256: h.to_ascii_lowercase(),
                    path: p.to_string(),
                    line: n,
                })
            }
            _ => bad.push((
                n,
                format!("not a '<sha256>  <path>' line: {}", l.escape_debug()),
            )),
        }
    }
    (pins, bad)
}

/// Whether `path` (relative, `/`-separated) matches `pattern` as git's `:(glob)` pathspec
/// magic matches it (wildmatch with `WM_PATHNAME`): `*` and `?` never match a `/`, `**/`
/// at the start or after a `/` matches any number of directories, a trailing `/**`
/// everything inside, `[...]` a class (`!` or `^` negates, ranges allowed), `\` escapes.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    wildmatch(pattern.as_bytes(), path.as_bytes())
}

fn wildmatch(p: &[u8], t: &[u8]) -> bool {
    let (mut pi, mut ti) = (0usize, 0usize);
    while pi < p.len() {
        match p[pi] {
            b'\\' if pi + 1 < p.len() => {
                if t.get(ti) != Some(&p[pi + 1]) {
                    return false;
                }
                pi += 2;
                ti += 1;
            }
            b'?' => {
                if ti >= t.len() || t[ti] == b'/' {
                    return false;
                }
                pi += 1;
                ti += 1;
            }
            b'[' => match class(p, pi, t.get(ti).copied()) {
                Some((true, next)) => {
                    pi = next;
                    ti += 1;
                }
                Some((false, _)) => return false,
                // An unclosed class is a literal '['.
                None => {
                    if t.get(ti) != Some(&b'[') {
                        return false;
                    }
                    pi += 1;
                    ti += 1;
                }
            },
            b'*' => {
                let mut np = pi;
                while np < p.len() && p[np] == b'*' {
                    np += 1;
                }
                let double = np - pi >= 2;
                let start_ok = pi == 0 || p[pi - 1] == b'/';
                let end_ok = np == p.len() || p[np] == b'/';
                if double && start_ok && end_ok {
                    if np == p.len() {
                        return true;
                    }
                    // `**/`: zero or more leading directories.
                    let rest = &p[np + 1..];
                    return wildmatch(rest, &t[ti..])
                        || (ti..t.len()).any(|k| t[k] == b'/' && wildmatch(rest, &t[k + 1..]));
                }
                let rest = &p[np..];
                for k in ti..=t.len() {
                    if wildmatch(rest, &t[k..]) {
                        return true;
                    }
                    if k < t.len() && t[k] == b'/' {
                        break;
                    }
                }
                return false;
            }
            c => {
                if t.get(ti) != Some(&c) {
                    return false;
                }
                pi += 1;
                ti += 1;
            }
        }
    }
    ti == t.len()
}

/// A `[...]` class at `p[at]` against `c`: whether it matches and where the pattern goes
/// on; `None` when the class is not closed.
fn class(p: &[u8], at: usize, c: Option<u8>) -> Option<(bool, usize)> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let b = *p.get(i)?;
        if b == b']' && !first {
            break;
        }
        first = false;
        let (lo, width) = if b == b'\\' {
            (*p.get(i + 1)?, 2)
        } else {
            (b, 1)
        };
        i += width;
        if p.get(i) == Some(&b'-') && p.get(i + 1).is_some_and(|x| *x != b']') {
            let hi = if p[i + 1] == b'\\' {
                *p.get(i + 2)?
            } else {
                p[i + 1]
            };
            i += if p[i + 1] == b'\\' { 3 } else { 2 };
            if c.is_some_and(|c| lo <= c && c <= hi) {
                matched = true;
            }
        } else if c == Some(lo) {
            matched = true;
        }
    }
    let ok = c.is_some_and(|c| c != b'/') && matched != negate;
    Some((ok, i + 1))
}

/// The agent permission files the workspace holds now (contract 7's list expanded at its
/// root, regular files), relative to it: what the runner's `permission_files` finds.
pub fn permission_files_in(ws: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for g in PERMISSION_FILES {
        let (dir, name) = g.rsplit_once('/').unwrap_or(("", g));
        let Ok(rd) = std::fs::read_dir(ws.join(dir)) else {
            continue;
        };
        let mut found: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| !n.starts_with('.') && glob_match(name, n))
            .filter(|n| ws.join(dir).join(n).is_file())
            .map(|n| format!("{dir}/{n}"))
            .collect();
        found.sort();
        out.extend(found);
    }
    out
}

/// The agent permission files of the workspace `ws` that `pins` (pins.sha256 as read) does
/// not list: each appeared after the first run pinned them (`permission_hijack`). Only
/// once the first run has pinned (the loop has `.baseline-commit`).
pub fn appeared_permission_files(dir: &Path, ws: &str, pins: &[Pin]) -> Vec<String> {
    if ws.is_empty()
        || !dir.join(".baseline-commit").is_file()
        || !std::fs::symlink_metadata(ws).is_ok_and(|m| m.is_dir())
    {
        return Vec::new();
    }
    let ws_root = ws.trim_end_matches('/');
    permission_files_in(Path::new(ws_root))
        .into_iter()
        .filter(|rel| {
            let abs = format!("{ws_root}/{rel}");
            !pins.iter().any(|p| p.path == abs)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_git_matches_them() {
        for (pat, path, want) in [
            ("tests/**", "tests/a.rs", true),
            ("tests/**", "tests/deep/a.rs", true),
            ("tests/**", "tests", false),
            ("tests/**", "test/a.rs", false),
            ("**/*.rs", "a.rs", true),
            ("**/*.rs", "src/x/a.rs", true),
            ("src/**/mod.rs", "src/mod.rs", true),
            ("src/**/mod.rs", "src/a/b/mod.rs", true),
            ("*.rs", "src/a.rs", false),
            ("*.rs", "a.rs", true),
            ("a?c", "abc", true),
            ("a?c", "a/c", false),
            ("[ab].txt", "b.txt", true),
            ("[!ab].txt", "b.txt", false),
            ("[!ab].txt", "c.txt", true),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("settings*.json", "settings.local.json", true),
            ("settings*.json", "settings.json", true),
            ("settings*.json", "mysettings.json", false),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("**", "any/thing", true),
            ("x[", "x[", true),
        ] {
            assert_eq!(glob_match(pat, path), want, "{pat} vs {path}");
        }
    }

    #[test]
    fn parse_round_trips() {
        let text = print(&[pin_bytes("goal.md", b"x"), pin_bytes("../../t/a b", b"y")]);
        let (pins, bad) = parse(text.as_bytes());
        assert!(bad.is_empty());
        assert_eq!(pins[1].path, "../../t/a b");
    }
}
