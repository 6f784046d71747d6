//! `pins.sha256`: the `sha256sum -c` manifest of every pinned file, paths relative to the
//! loop directory (protected repository paths reach the repository through `../`).

use crate::contract::Engine;
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

/// The paths protect glob `glob` matches in the user's repository `dir`, for `orbit init`'s
/// look at a glob (the user's own ignore files are the rules there): `git -C <dir> ls-files
/// -z --cached --others --exclude-standard -- ':(glob)<glob>'`, sorted bytewise, each once.
/// A loop's protect set is listed by `crate::protect::set_files`, never with the workspace's
/// ignore files. `None` when git cannot list them. Git runs no fsmonitor and takes no
/// optional lock.
pub fn glob_files(dir: &Path, glob: &str) -> Option<Vec<Vec<u8>>> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.fsmonitor=false",
            "ls-files",
            "-z",
            "--cached",
            "--others",
        ])
        .args(["--exclude-standard", "--"])
        .arg(format!(":(glob){glob}"))
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut files: Vec<Vec<u8>> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    // Sorted and each path once (an unmerged path is listed once per stage), as the runner's
    // `LC_ALL=C sort -zu`.
    files.sort();
    files.dedup();
    Some(files)
}

/// A protect set's sha256: of its sorted paths, each followed by a NUL (the bytes the
/// runner hashes).
pub fn set_sha(files: &[Vec<u8>]) -> String {
    let mut data = Vec::new();
    for f in files {
        data.extend_from_slice(f);
        data.push(0);
    }
    fsx::sha256_hex(&data)
}

/// One line of pins.sets: a protect glob and the sha256 of the set it matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetPin {
    pub sha256: String,
    pub glob: String,
    /// 1-based line in pins.sets.
    pub line: usize,
}

/// Parses pins.sets (`<sha256>  <glob>` lines); lines that are not are skipped.
pub fn parse_sets(bytes: &[u8]) -> Vec<SetPin> {
    String::from_utf8_lossy(bytes)
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let (h, g) = l.split_once("  ")?;
            (h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                && !g.is_empty())
            .then(|| SetPin {
                sha256: h.to_string(),
                glob: g.to_string(),
                line: i + 1,
            })
        })
        .collect()
}

/// pins.sets' text for (sha256, glob) pairs.
pub fn print_sets(sets: &[(String, String)]) -> String {
    sets.iter().map(|(h, g)| format!("{h}  {g}\n")).collect()
}

/// How a protect set differs from what pins.sha256 lists of it: the paths (relative to
/// the workspace) added (matched now, pinned nowhere) and removed (pinned, matching the
/// glob, matched no more).
pub fn set_changes(
    glob: &str,
    now: &[Vec<u8>],
    pins: &[Pin],
    ws: &str,
) -> (Vec<String>, Vec<String>) {
    let ws = ws.trim_end_matches('/');
    let all_pinned: Vec<&str> = pins
        .iter()
        .filter_map(|p| workspace_relative(&p.path, ws))
        .collect();
    let pinned: Vec<&str> = all_pinned
        .iter()
        .copied()
        .filter(|rel| glob_match(glob, rel))
        .collect();
    let now: Vec<String> = now
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let added = now
        .iter()
        .filter(|p| !all_pinned.contains(&p.as_str()))
        .cloned()
        .collect();
    let removed = pinned
        .iter()
        .filter(|p| !now.iter().any(|n| n == *p))
        .map(|p| p.to_string())
        .collect();
    (added, removed)
}

/// Why git cannot match protect glob `glob` as written, and what to write instead: git's
/// glob pathspecs have no braces, and an unclosed `[` is no class it can read.
pub fn unmatchable_glob(glob: &str) -> Option<String> {
    if glob.trim().is_empty() {
        return Some("an empty glob protects nothing; name a path such as 'tests/**'".into());
    }
    let b = glob.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'{' => {
                return Some(format!(
                    "git's glob pathspecs have no braces: it would match only a literal '{{'. Write two --protect flags instead of braces{}",
                    brace_suggestion(glob)
                        .map(|s| format!(": {s}"))
                        .unwrap_or_default()
                ));
            }
            b'[' => {
                let mut j = i + 1;
                if matches!(b.get(j), Some(b'!' | b'^')) {
                    j += 1;
                }
                if b.get(j) == Some(&b']') {
                    j += 1;
                }
                while j < b.len() && b[j] != b']' {
                    j += 1;
                }
                if j >= b.len() {
                    return Some(
                        "an unclosed '[' starts a character class git cannot read: close it ('[ab]'), or escape it ('\\[')".into(),
                    );
                }
                i = j;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `--protect 'a' --protect 'b'` for a glob with one brace group `{a,b}`.
fn brace_suggestion(glob: &str) -> Option<String> {
    let open = glob.find('{')?;
    let close = open + glob[open..].find('}')?;
    let (head, tail) = (&glob[..open], &glob[close + 1..]);
    let flags: Vec<String> = glob[open + 1..close]
        .split(',')
        .map(|alt| format!("--protect '{head}{alt}{tail}'"))
        .collect();
    (flags.len() > 1).then(|| flags.join(" "))
}

/// A glob like `glob` that matches something among `files` (repository paths), when one
/// literal directory or file name of it is a near miss of an existing one: `test/**` for
/// a repository with `tests/`.
pub fn closest_glob(glob: &str, files: &[Vec<u8>]) -> Option<String> {
    let files: Vec<String> = files
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    let parts: Vec<&str> = glob.split('/').collect();
    let mut prefix = String::new();
    for (i, part) in parts.iter().enumerate() {
        if part.contains(['*', '?', '[', '\\']) {
            return None;
        }
        let last = i + 1 == parts.len();
        // The names one level below `prefix`: directories, and files for the last part.
        let mut names: Vec<String> = files
            .iter()
            .filter_map(|f| f.strip_prefix(prefix.as_str()))
            .filter_map(|rest| match rest.split_once('/') {
                Some((dir, _)) => Some(dir.to_string()),
                None if last => Some(rest.to_string()),
                None => None,
            })
            .collect();
        names.sort();
        names.dedup();
        if names.iter().any(|n| n == part) {
            prefix.push_str(part);
            prefix.push('/');
            continue;
        }
        let best = names
            .iter()
            .map(|n| (edit_distance(part, n), n))
            .filter(|(d, n)| *d <= (part.len().max(n.len()) / 3).max(1))
            .min()?;
        let mut fixed: Vec<&str> = parts.clone();
        fixed[i] = best.1;
        return Some(fixed.join("/"));
    }
    None
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for j in 0..b.len() {
            let cur = row[j + 1];
            row[j + 1] = if ca == b[j] {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// The agent permission files the workspace holds now (contract 7's list, and the loop's
/// engine's own, expanded at its root, regular files), relative to it: what the runner's
/// `pins_permission_files` finds.
pub fn permission_files_in(ws: &Path, engine: Option<Engine>) -> Vec<String> {
    let mut out = Vec::new();
    let extra = engine.map_or(&[][..], crate::contract::engine_permission_files);
    for g in PERMISSION_FILES.iter().chain(extra) {
        let (dir, name) = g.rsplit_once('/').unwrap_or(("", g));
        let Ok(rd) = std::fs::read_dir(ws.join(dir)) else {
            continue;
        };
        // A glob's `*` takes no dot file (as bash's does); a name written out is that name.
        let mut found: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| (name.starts_with('.') || !n.starts_with('.')) && glob_match(name, n))
            .filter(|n| ws.join(dir).join(n).is_file())
            .map(|n| {
                if dir.is_empty() {
                    n
                } else {
                    format!("{dir}/{n}")
                }
            })
            .collect();
        found.sort();
        out.extend(found);
    }
    out
}

/// The agent permission files of the workspace `ws` that `pins` (pins.sha256 as read) does
/// not list: each appeared after the first run pinned them (`permission_hijack`). Only
/// once the first run has pinned (the loop has `.baseline-commit`).
pub fn appeared_permission_files(
    dir: &Path,
    ws: &str,
    engine: Option<Engine>,
    pins: &[Pin],
) -> Vec<String> {
    if ws.is_empty()
        || !dir.join(".baseline-commit").is_file()
        || !std::fs::symlink_metadata(ws).is_ok_and(|m| m.is_dir())
    {
        return Vec::new();
    }
    let ws_root = ws.trim_end_matches('/');
    permission_files_in(Path::new(ws_root), engine)
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
    fn unmatchable_globs_say_what_to_write_instead() {
        let braces = unmatchable_glob("tests/{unit,int}/**").unwrap();
        assert!(
            braces
                .contains("instead of braces: --protect 'tests/unit/**' --protect 'tests/int/**'"),
            "{braces}"
        );
        assert!(
            unmatchable_glob("src/[ab.rs")
                .unwrap()
                .contains("unclosed '['")
        );
        assert!(unmatchable_glob("   ").unwrap().contains("empty"));
        for ok in ["tests/**", "src/[ab].rs", "a\\{b", "[]x]", "[!a]b"] {
            assert_eq!(unmatchable_glob(ok), None, "{ok}");
        }
    }

    #[test]
    fn a_near_miss_suggests_the_path_that_exists() {
        let files: Vec<Vec<u8>> = ["tests/a.rs", "src/lib.rs", "Cargo.lock", "docs/x/y.md"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        assert_eq!(closest_glob("test/**", &files).as_deref(), Some("tests/**"));
        assert_eq!(
            closest_glob("Cargo.lok", &files).as_deref(),
            Some("Cargo.lock")
        );
        assert_eq!(
            closest_glob("docs/z/**", &files).as_deref(),
            Some("docs/x/**")
        );
        assert_eq!(closest_glob("nothing/**", &files), None);
        assert_eq!(closest_glob("*.py", &files), None);
        assert_eq!(edit_distance("test", "tests"), 1);
        assert_eq!(
            set_sha(&[b"a".to_vec(), b"b c".to_vec()]),
            fsx::sha256_hex(b"a\0b c\0")
        );
    }

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
