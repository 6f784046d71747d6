//! The change a loop made, cut into the units adequacy reverts one at a time: each hunk of
//! a text file's change (git's zero-context hunks), and, where a hunk is not the right unit,
//! the whole file's change (an added, deleted, renamed, binary or generated file, or a
//! type change). Read from git with every setting that could reshape the diff pinned on the
//! command line, so the repository's own configuration (which the agent could write) cannot.

use std::path::Path;

use crate::envelope::git;
use crate::error::{Error, Result};

/// Why a file's change is one unit rather than hunks, or why it is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A text file changed in place: its hunks are units, its added lines are mutated.
    Text,
    /// A file the change adds: reverting it removes the file.
    Added,
    /// A file the change deletes: reverting it restores the file.
    Deleted,
    /// A file the change moves (possibly with edits): reverting it moves it back.
    Renamed,
    /// A file git holds as binary: reverted whole, never mutated.
    Binary,
    /// A lockfile or a file that says it is generated: reverted whole, never mutated.
    Generated,
    /// A file whose type changed (a file became a link, or the reverse).
    TypeChange,
}

impl FileKind {
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Text => "text",
            FileKind::Added => "added",
            FileKind::Deleted => "deleted",
            FileKind::Renamed => "renamed",
            FileKind::Binary => "binary",
            FileKind::Generated => "generated",
            FileKind::TypeChange => "type-change",
        }
    }
}

/// One changed file, with the paths and contents on both sides.
#[derive(Debug, Clone)]
pub struct FileChange {
    /// The path at the commit (for a deletion, the path at the base).
    pub path: String,
    /// The path at the base when it differs (a rename).
    pub old_path: Option<String>,
    pub kind: FileKind,
    /// The file's bytes at the base (empty for an added file).
    pub old: Vec<u8>,
    /// The file's bytes at the commit (empty for a deleted file).
    pub new: Vec<u8>,
    /// Its zero-context hunks (text files only).
    pub hunks: Vec<Hunk>,
}

/// One zero-context hunk: lines `old_start..old_start+old_len` of the base (0-based) became
/// lines `new_start..new_start+new_len` of the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hunk {
    pub old_start: usize,
    pub old_len: usize,
    pub new_start: usize,
    pub new_len: usize,
}

impl Hunk {
    /// The 1-based line range at the commit, for people (`12-14`, or `12` for one line, or
    /// `after 11` for a pure deletion).
    pub fn new_range(&self) -> String {
        match self.new_len {
            0 => format!("after {}", self.new_start),
            1 => format!("{}", self.new_start + 1),
            n => format!("{}-{}", self.new_start + 1, self.new_start + n),
        }
    }
}

/// A file's bytes cut into lines, each with its terminator (the last may have none).
pub fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|b| *b == b'\n').collect()
}

/// The commit's file with one hunk alone put back as the base had it.
pub fn revert_hunk(f: &FileChange, h: &Hunk) -> Vec<u8> {
    let old = lines(&f.old);
    let new = lines(&f.new);
    let mut out = Vec::with_capacity(f.new.len());
    for l in &new[..h.new_start.min(new.len())] {
        out.extend_from_slice(l);
    }
    for l in &old[h.old_start.min(old.len())..(h.old_start + h.old_len).min(old.len())] {
        out.extend_from_slice(l);
    }
    for l in &new[(h.new_start + h.new_len).min(new.len())..] {
        out.extend_from_slice(l);
    }
    out
}

/// The options that pin git's diff whatever the repository's configuration says.
const DIFF_PINS: &[&str] = &[
    "-c",
    "core.quotepath=off",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.relative=false",
    "-c",
    "diff.renames=true",
    "-c",
    "core.autocrlf=false",
];

fn git_diff(repo: &Path, extra: &[&str]) -> Result<Vec<u8>> {
    let mut args: Vec<&str> = DIFF_PINS.to_vec();
    args.extend_from_slice(&[
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=none",
    ]);
    args.extend_from_slice(extra);
    git(repo, &args).ok_or_else(|| Error::Git(format!("git {} failed", extra.join(" "))))
}

fn blob(repo: &Path, commit: &str, path: &str) -> Result<Vec<u8>> {
    git(repo, &["cat-file", "blob", &format!("{commit}:{path}")])
        .ok_or_else(|| Error::Git(format!("cannot read {path} at {commit}")))
}

/// Lockfiles: what a package manager writes, never a person.
const LOCKFILES: &[&str] = &[
    "Cargo.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "poetry.lock",
    "uv.lock",
    "Pipfile.lock",
    "go.sum",
    "Gemfile.lock",
    "composer.lock",
];

/// Whether a file is generated: a lockfile by name, or a file whose first lines say
/// `@generated` or `DO NOT EDIT`. Such a file is still reverted (as one unit), so marking a
/// file generated hides nothing from adequacy; it only keeps its lines unmutated.
pub fn generated(path: &str, bytes: &[u8]) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    if LOCKFILES.contains(&name) {
        return true;
    }
    let head: Vec<&[u8]> = lines(bytes).into_iter().take(5).collect();
    head.iter().any(|l| {
        let l = String::from_utf8_lossy(l);
        l.contains("@generated") || l.contains("DO NOT EDIT")
    })
}

/// Parses `@@ -a,b +c,d @@` headers of a zero-context diff into hunks.
pub fn parse_hunks(diff: &[u8]) -> Vec<Hunk> {
    let num = |s: &str| -> (usize, usize) {
        let (a, b) = s.split_once(',').unwrap_or((s, "1"));
        (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
    };
    let mut out = Vec::new();
    for line in diff.split(|b| *b == b'\n') {
        let Some(rest) = line.strip_prefix(b"@@ -") else {
            continue;
        };
        let rest = String::from_utf8_lossy(rest);
        let mut parts = rest.split(' ');
        let (Some(old), Some(new)) = (parts.next(), parts.next()) else {
            continue;
        };
        let (os, ol) = num(old);
        let (ns, nl) = num(new.trim_start_matches('+'));
        // git numbers a zero-length side by the line before it: 0-based, that is the start.
        out.push(Hunk {
            old_start: if ol == 0 { os } else { os.saturating_sub(1) },
            old_len: ol,
            new_start: if nl == 0 { ns } else { ns.saturating_sub(1) },
            new_len: nl,
        });
    }
    out
}

/// Every file the change from `base` to `commit` touches, with its units.
pub fn changes(repo: &Path, base: &str, commit: &str) -> Result<Vec<FileChange>> {
    let status = git_diff(
        repo,
        &["--name-status", "-z", "--find-renames", base, commit, "--"],
    )?;
    let numstat = git_diff(
        repo,
        &["--numstat", "-z", "--no-renames", base, commit, "--"],
    )?;
    let binary = binary_paths(&numstat);
    let mut fields = status
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let mut out = Vec::new();
    while let Some(code) = fields.next() {
        if code.is_empty() {
            continue;
        }
        let first = fields.next().unwrap_or_default();
        let (old_path, path) = if code.starts_with('R') || code.starts_with('C') {
            (Some(first), fields.next().unwrap_or_default())
        } else {
            (None, first)
        };
        let letter = code.chars().next().unwrap_or('M');
        let old = match letter {
            'A' | 'C' => Vec::new(),
            _ => blob(repo, base, old_path.as_deref().unwrap_or(&path))?,
        };
        let new = match letter {
            'D' => Vec::new(),
            _ => blob(repo, commit, &path)?,
        };
        let kind = match letter {
            'A' | 'C' => FileKind::Added,
            'D' => FileKind::Deleted,
            'R' => FileKind::Renamed,
            'T' => FileKind::TypeChange,
            _ if binary.contains(&path) => FileKind::Binary,
            _ if generated(&path, &new) => FileKind::Generated,
            _ => FileKind::Text,
        };
        let hunks = if kind == FileKind::Text {
            parse_hunks(&git_diff(repo, &["-U0", base, commit, "--", &path])?)
        } else {
            Vec::new()
        };
        out.push(FileChange {
            path,
            old_path,
            kind,
            old,
            new,
            hunks,
        });
    }
    Ok(out)
}

/// The paths `--numstat -z` marks binary (`-\t-\t`).
fn binary_paths(numstat: &[u8]) -> Vec<String> {
    numstat
        .split(|b| *b == 0)
        .filter_map(|rec| rec.strip_prefix(b"-\t-\t"))
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(old: &str, new: &str, hunks: Vec<Hunk>) -> FileChange {
        FileChange {
            path: "a.py".into(),
            old_path: None,
            kind: FileKind::Text,
            old: old.as_bytes().to_vec(),
            new: new.as_bytes().to_vec(),
            hunks,
        }
    }

    #[test]
    fn zero_context_headers_become_zero_based_ranges() {
        let diff = b"diff --git a/x b/x\n@@ -3,0 +4,2 @@\n+a\n+b\n@@ -7 +9 @@\n-c\n+d\n@@ -10,2 +11,0 @@\n-e\n-f\n";
        assert_eq!(
            parse_hunks(diff),
            vec![
                Hunk {
                    old_start: 3,
                    old_len: 0,
                    new_start: 3,
                    new_len: 2
                },
                Hunk {
                    old_start: 6,
                    old_len: 1,
                    new_start: 8,
                    new_len: 1
                },
                Hunk {
                    old_start: 9,
                    old_len: 2,
                    new_start: 11,
                    new_len: 0
                },
            ]
        );
    }

    #[test]
    fn reverting_a_hunk_restores_exactly_its_lines() {
        // An insertion, a replacement and a deletion, each reverted alone.
        let old = "1\n2\n3\n4\n5\n";
        let new = "1\nX\n2\n3\nY\n5\n";
        let hunks = vec![
            Hunk {
                old_start: 1,
                old_len: 0,
                new_start: 1,
                new_len: 1,
            },
            Hunk {
                old_start: 3,
                old_len: 1,
                new_start: 4,
                new_len: 1,
            },
        ];
        let f = change(old, new, hunks.clone());
        assert_eq!(revert_hunk(&f, &hunks[0]), b"1\n2\n3\nY\n5\n");
        assert_eq!(revert_hunk(&f, &hunks[1]), b"1\nX\n2\n3\n4\n5\n");
        let del = change(
            "a\nb\nc\n",
            "a\nc\n",
            vec![Hunk {
                old_start: 1,
                old_len: 1,
                new_start: 1,
                new_len: 0,
            }],
        );
        assert_eq!(revert_hunk(&del, &del.hunks[0]), b"a\nb\nc\n");
    }

    #[test]
    fn a_last_line_without_newline_is_kept_as_it_was() {
        let f = change(
            "a\nb",
            "a\nc",
            vec![Hunk {
                old_start: 1,
                old_len: 1,
                new_start: 1,
                new_len: 1,
            }],
        );
        assert_eq!(revert_hunk(&f, &f.hunks[0]), b"a\nb");
    }

    #[test]
    fn lockfiles_and_marked_files_are_generated() {
        assert!(generated("web/package-lock.json", b"{}"));
        assert!(generated(
            "src/gen.rs",
            b"// @generated by build.rs\nfn x() {}\n"
        ));
        assert!(generated(
            "x.go",
            b"// Code generated by protoc. DO NOT EDIT.\n"
        ));
        assert!(!generated("src/lib.rs", b"fn x() {}\n"));
    }
}
