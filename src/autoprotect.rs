//! What a check means, pinned: the repository files that change how a check's tool runs,
//! which `orbit init` protects by default (contract section 6: "the files that change how
//! a known test tool runs ... are protected by default"). A check is a shell command; its
//! simple commands are read (quotes, `;`, `&&`, `||`, `|`, `cd DIR`, `VAR=value` and
//! wrappers such as `env`, `timeout`, `uv run` and `npx`) and each known tool names its
//! files: pytest its configuration, every `conftest.py` and the modules that would shadow
//! it, cargo every `Cargo.toml` and `build.rs`, npm `package.json`, make the Makefile, a
//! script the script itself, and so on.
//!
//! These globs are kept apart from the user's `--protect` (loop.toml `auto-protect`): they
//! may match nothing at init, so a shadow file that does not exist yet (a root
//! `pytest.ini`, a `conftest.py`) is pinned as an empty set and its creation is a
//! `reward_hack`. Reading a shell command is best effort: what it cannot see (a variable,
//! a command substitution, a script a script runs) `--protect` names.

use crate::pins;

/// What one tool of a command reads: its name for people and the globs it protects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFiles {
    /// "pytest", "cargo", "npm", "make", "the script scripts/check.sh", ...
    pub tool: String,
    pub globs: Vec<String>,
}

/// Where a command was found: a check (with its role) or the judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// "check", "reproduction", "regression", "holdout" or "judge-cmd".
    pub role: &'static str,
    pub cmd: String,
}

/// What `orbit init` protects by default for one command, after what the user protects
/// and what an earlier command protects already are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub source: Source,
    pub tool: String,
    /// The globs new to this command (none when everything it reads is protected already).
    pub globs: Vec<String>,
    /// The repository paths this command runs as a script (a judge's script, a check's).
    pub scripts: Vec<String>,
}

/// The files every Python program reads at start-up when they sit where it runs: the
/// `site` hooks and path files.
const PYTHON_START: [&str; 3] = ["sitecustomize.py", "usercustomize.py", "*.pth"];

/// pytest's configuration (pytest 9 reads every one of them, in any directory from the
/// tests up to the root) and its plugins' hook files.
const PYTEST_ANYWHERE: [&str; 8] = [
    "**/conftest.py",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/pytest.toml",
    "**/.pytest.toml",
    "**/pyproject.toml",
    "**/setup.cfg",
    "**/tox.ini",
];

/// What node's package managers and test runners read where they run (and above).
const NODE_FILES: [&str; 8] = [
    "package.json",
    "jest.config.*",
    "vitest.config.*",
    "vitest.workspace.*",
    "vite.config.*",
    ".mocharc*",
    ".npmrc",
    ".yarnrc*",
];

/// What cargo reads to build and run tests: every manifest and build script, its
/// configuration and the toolchain file, in any directory.
const CARGO_FILES: [&str; 6] = [
    "**/Cargo.toml",
    "**/build.rs",
    "**/.cargo/config.toml",
    "**/.cargo/config",
    "**/rust-toolchain",
    "**/rust-toolchain.toml",
];

/// The makefiles make reads in the directory it runs in.
const MAKE_FILES: [&str; 4] = ["GNUmakefile", "makefile", "Makefile", "*.mk"];

/// The tools (and scripts) shell command `cmd` runs, with the globs of each.
pub fn tools_of(cmd: &str) -> Vec<ToolFiles> {
    tools_at(cmd, "")
}

/// [`tools_of`] for a command run in the directory `start` ("" or "dir/").
fn tools_at(cmd: &str, start: &str) -> Vec<ToolFiles> {
    let mut out: Vec<ToolFiles> = Vec::new();
    for chain in chains(cmd) {
        // `cd DIR` moves the rest of the chain; an unknown directory leaves it at the root.
        let mut at = start.to_string();
        for words in chain {
            let words = strip_wrappers(&words);
            let Some(first) = words.first() else {
                continue;
            };
            if matches!(first.as_str(), "cd" | "pushd") {
                at = words.get(1).map(|d| dir_path(&at, d)).unwrap_or_default();
                continue;
            }
            simple(&words, &at, &mut out);
        }
    }
    let mut merged: Vec<ToolFiles> = Vec::new();
    for t in out {
        match merged.iter_mut().find(|m| m.tool == t.tool) {
            Some(m) => push_new(&mut m.globs, t.globs),
            None => merged.push(t),
        }
    }
    merged
}

/// What `orbit init` protects by default for these commands (each a source), leaving out
/// what `user` (the `--protect` globs) covers and what an earlier command found.
pub fn plan(sources: &[Source], user: &[String]) -> Vec<Found> {
    let mut taken: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for source in sources {
        for t in tools_of(&source.cmd) {
            let scripts = t
                .tool
                .strip_prefix(SCRIPT)
                .map(|p| vec![p.to_string()])
                .unwrap_or_default();
            let globs: Vec<String> = t
                .globs
                .into_iter()
                .filter(|g| !covered(g, user) && !taken.contains(g))
                .collect();
            taken.extend(globs.iter().cloned());
            out.push(Found {
                source: source.clone(),
                tool: t.tool,
                globs,
                scripts,
            });
        }
    }
    out
}

/// Every glob of a plan, in order, each once: loop.toml's `auto-protect`.
pub fn globs(plan: &[Found]) -> Vec<String> {
    let mut out = Vec::new();
    for f in plan {
        push_new(&mut out, f.globs.clone());
    }
    out
}

/// Whether glob `g` is protected by `globs` already: the same glob, or a literal path one
/// of them matches.
pub fn covered(g: &str, globs: &[String]) -> bool {
    globs.iter().any(|u| u == g)
        || (literal(g).is_some_and(|p| globs.iter().any(|u| pins::glob_match(u, &p))))
}

/// The path a glob without wildcards names (its escapes undone), or None.
fn literal(g: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = g.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '*' | '?' | '[' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// A path as a glob that matches only it.
pub fn escape(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn push_new(into: &mut Vec<String>, items: Vec<String>) {
    for g in items {
        if !into.contains(&g) {
            into.push(g);
        }
    }
}

/// The tool name of a script: "the script PATH".
const SCRIPT: &str = "the script ";

/// The directories from `at` up to the repository root ("sub/dir/", "sub/", "").
fn up_from(at: &str) -> Vec<String> {
    let mut dirs = vec![at.to_string()];
    let mut d = at.trim_end_matches('/').to_string();
    while let Some(i) = d.rfind('/') {
        d.truncate(i);
        dirs.push(format!("{d}/"));
    }
    if !at.is_empty() {
        dirs.push(String::new());
    }
    dirs
}

/// `names` in the directory `at` (and, with `up`, every directory above it).
fn anchored(at: &str, names: &[&str], up: bool) -> Vec<String> {
    let dirs = if up {
        up_from(at)
    } else {
        vec![at.to_string()]
    };
    dirs.iter()
        .flat_map(|d| names.iter().map(move |n| format!("{}{n}", escape(d))))
        .collect()
}

/// The files that shadow Python module `module` (its top-level package) where Python runs
/// with `at` first on its path, and the start-up hooks there.
fn python_shadow(at: &str, module: &str) -> Vec<String> {
    let top = module.split('.').next().unwrap_or(module);
    let mut globs = vec![
        format!("{}{}.py", escape(at), escape(top)),
        format!("{}{}/**", escape(at), escape(top)),
    ];
    globs.extend(anchored(at, &PYTHON_START, false));
    globs
}

fn tool(name: &str, globs: Vec<String>) -> ToolFiles {
    ToolFiles {
        tool: name.to_string(),
        globs,
    }
}

fn pytest_files(at: &str) -> Vec<String> {
    let mut globs: Vec<String> = PYTEST_ANYWHERE.iter().map(|s| s.to_string()).collect();
    for m in ["pytest", "_pytest"] {
        push_new(&mut globs, python_shadow(at, m));
    }
    globs
}

fn node_files(at: &str) -> Vec<String> {
    anchored(at, &NODE_FILES, true)
}

/// A script `path` (as written, relative to `at`) that a command runs.
fn script(at: &str, path: &str, out: &mut Vec<ToolFiles>) {
    if path.ends_with('/') {
        return;
    }
    if let Some(p) = repo_path(at, path)
        && !p.is_empty()
    {
        out.push(tool(&format!("{SCRIPT}{p}"), vec![escape(&p)]));
    }
}

/// One simple command (wrappers stripped) run in the directory `at`.
fn simple(words: &[String], at: &str, out: &mut Vec<ToolFiles>) {
    let Some(first) = words.first() else {
        return;
    };
    let name = first.rsplit('/').next().unwrap_or(first);
    let rest = &words[1..];
    match name {
        "pytest" | "py.test" => out.push(tool("pytest", pytest_files(at))),
        n if is_python(n) => python(rest, at, out),
        "cargo" => {
            let sub = rest.iter().find(|w| !w.starts_with(['-', '+']));
            if sub.is_some_and(|s| {
                matches!(
                    s.as_str(),
                    "test"
                        | "t"
                        | "nextest"
                        | "clippy"
                        | "check"
                        | "c"
                        | "build"
                        | "b"
                        | "run"
                        | "r"
                        | "bench"
                        | "miri"
                )
            }) {
                out.push(tool(
                    "cargo",
                    CARGO_FILES.iter().map(|s| s.to_string()).collect(),
                ));
            }
        }
        "go" => {
            if rest
                .first()
                .is_some_and(|s| matches!(s.as_str(), "test" | "vet" | "build" | "run"))
            {
                let mut globs = vec!["**/go.mod".to_string()];
                globs.extend(anchored(at, &["go.work"], true));
                out.push(tool("go", globs));
            }
        }
        "npm" | "yarn" | "pnpm" | "bun" => out.push(tool(name, node_files(at))),
        "jest" | "vitest" | "mocha" | "ava" => out.push(tool(name, node_files(at))),
        "npx" | "bunx" => {
            out.push(tool(name, node_files(at)));
            let inner: Vec<String> = rest
                .iter()
                .skip_while(|w| w.starts_with('-'))
                .cloned()
                .collect();
            simple(&inner, at, out);
        }
        "node" => {
            if rest.iter().any(|w| w == "--test") {
                out.push(tool("node --test", node_files(at)));
            } else if let Some(s) = first_operand(rest, &["-r", "--require", "--import"]) {
                script(at, s, out);
            }
        }
        "make" | "gmake" => make(rest, at, out),
        "bash" | "sh" | "dash" | "zsh" | "ksh" => {
            let inline = rest.iter().position(|w| {
                w == "-c" || (w.starts_with('-') && !w.starts_with("--") && w.contains('c'))
            });
            match inline {
                // `bash -c 'CMD'`: the command it is given.
                Some(i) => {
                    if let Some(inner) = rest.get(i + 1) {
                        out.extend(tools_at(inner, at));
                    }
                }
                None => {
                    if let Some(s) = first_operand(rest, &["-o", "-O"]) {
                        script(at, s, out);
                    }
                }
            }
        }
        "perl" | "ruby" => {
            let inline = rest
                .iter()
                .any(|w| w.starts_with("-e") || w.starts_with("-E"));
            if !inline && let Some(s) = first_operand(rest, &["-I", "-r", "-M", "-m"]) {
                script(at, s, out);
            }
        }
        "uv" | "poetry" | "pipenv" | "pdm" | "hatch" | "rye" => {
            if let Some(i) = rest.iter().position(|w| w == "run") {
                let inner = skip_options(
                    &rest[i + 1..],
                    &[
                        "--with",
                        "--python",
                        "-p",
                        "--extra",
                        "--group",
                        "--env-file",
                        "--directory",
                        "--project",
                        "--package",
                        "-e",
                    ],
                );
                simple(inner, at, out);
            }
        }
        _ => {
            // A program named by a path (./check.sh, scripts/test) is the repository's.
            if first.contains('/') {
                script(at, first, out);
            }
        }
    }
}

/// Python's options until `-m MODULE`, `-c`, or a script.
fn python(rest: &[String], at: &str, out: &mut Vec<ToolFiles>) {
    let mut i = 0;
    while i < rest.len() {
        let w = rest[i].as_str();
        match w {
            "-m" => {
                let Some(module) = rest.get(i + 1) else {
                    return;
                };
                python_module(module, at, out);
                return;
            }
            "-c" => return,
            "-W" | "-X" | "-Q" => i += 2,
            _ if w.starts_with("-m") && w.len() > 2 => {
                python_module(&w[2..], at, out);
                return;
            }
            _ if w.starts_with('-') => i += 1,
            _ => {
                script(at, w, out);
                return;
            }
        }
    }
}

/// `python -m MODULE`: a test tool's module is shadowed by a file of its name where Python
/// runs (the directory is first on its path). Any other module is the project's own (or
/// one orbit does not know): nothing is protected for it.
fn python_module(module: &str, at: &str, out: &mut Vec<ToolFiles>) {
    match module {
        "pytest" | "py.test" => out.push(tool("pytest", pytest_files(at))),
        "unittest" | "doctest" | "nose2" => out.push(tool(module, python_shadow(at, module))),
        _ => {}
    }
}

/// make: `-C DIR` moves it, `-f FILE` names its makefile.
fn make(rest: &[String], at: &str, out: &mut Vec<ToolFiles>) {
    let mut dir = at.to_string();
    let mut files: Vec<String> = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let w = rest[i].as_str();
        let next = rest.get(i + 1).map(String::as_str);
        match w {
            "-C" | "--directory" => {
                dir = next.map(|d| dir_path(&dir, d)).unwrap_or_default();
                i += 2;
                continue;
            }
            "-f" | "--file" | "--makefile" => {
                if let Some(f) = next {
                    files.push(f.to_string());
                }
                i += 2;
                continue;
            }
            _ => {}
        }
        if let Some(d) = w.strip_prefix("--directory=") {
            dir = dir_path(&dir, d);
        } else if let Some(d) = w.strip_prefix("-C").filter(|d| !d.is_empty()) {
            dir = dir_path(&dir, d);
        } else if let Some(f) = w
            .strip_prefix("--file=")
            .or_else(|| w.strip_prefix("--makefile="))
            .or_else(|| w.strip_prefix("-f").filter(|f| !f.is_empty()))
        {
            files.push(f.to_string());
        }
        i += 1;
    }
    let mut globs = anchored(&dir, &MAKE_FILES, false);
    for f in files {
        if let Some(p) = repo_path(&dir, &f) {
            push_new(&mut globs, vec![escape(&p)]);
        }
    }
    out.push(tool("make", globs));
}

fn is_python(name: &str) -> bool {
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit() || c == '.');
    ["python", "pypy"]
        .iter()
        .any(|p| name.strip_prefix(p).is_some_and(digits))
}

/// The first word that is not an option (nor the value of one of `with_value`).
fn first_operand<'a>(rest: &'a [String], with_value: &[&str]) -> Option<&'a str> {
    skip_options(rest, with_value).first().map(String::as_str)
}

fn skip_options<'a>(rest: &'a [String], with_value: &[&str]) -> &'a [String] {
    let mut i = 0;
    while i < rest.len() {
        let w = rest[i].as_str();
        if w == "--" {
            return &rest[i + 1..];
        }
        if !w.starts_with('-') || w == "-" {
            break;
        }
        i += if with_value.contains(&w) { 2 } else { 1 };
    }
    &rest[i.min(rest.len())..]
}

/// The words after the wrappers that run the command they are given: `VAR=value`
/// assignments, `env`, `timeout`, `nice`, `nohup`, `time`, `exec`, `command`, `stdbuf`,
/// `xvfb-run`, `!`.
fn strip_wrappers(words: &[String]) -> Vec<String> {
    let mut i = 0;
    loop {
        let Some(w) = words.get(i).map(String::as_str) else {
            return Vec::new();
        };
        let assignment = w.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit())
        });
        if assignment || w == "!" {
            i += 1;
            continue;
        }
        let name = w.rsplit('/').next().unwrap_or(w);
        let (options_with_value, operands): (&[&str], usize) = match name {
            "env" => (
                &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
                0,
            ),
            "timeout" => (&["-s", "--signal", "-k", "--kill-after"], 1),
            "nice" => (&["-n", "--adjustment"], 0),
            "stdbuf" => (&["-i", "-o", "-e"], 0),
            "xvfb-run" => (&["-a", "-n", "-s", "-f", "-e", "-p", "-l", "-w"], 0),
            "nohup" | "time" | "exec" | "command" => (&[], 0),
            _ => return words[i..].to_vec(),
        };
        let after = skip_options(&words[i + 1..], options_with_value);
        let skipped = words.len() - after.len() + operands;
        i = skipped.min(words.len());
    }
}

/// The directory `dir` (relative to the directory `at`) names inside the repository, as
/// `at` is written: "" for the root, else with a trailing '/'. A directory it cannot tell
/// (absolute, above the root, a variable) is taken for the root.
fn dir_path(at: &str, dir: &str) -> String {
    match repo_path(at, dir) {
        Some(p) if !p.is_empty() => format!("{p}/"),
        _ => String::new(),
    }
}

/// The path `path` (relative to the directory `at`) names inside the repository, without
/// `.` or `..` segments ("" for the root); None for an absolute path, one that climbs
/// above the root, or one a shell would expand.
fn repo_path(at: &str, path: &str) -> Option<String> {
    if path.is_empty()
        || path.starts_with(['/', '~', '-'])
        || path.contains(['$', '`', '*', '?'])
        || path.chars().any(char::is_control)
    {
        return None;
    }
    let mut parts: Vec<&str> = at.split('/').filter(|s| !s.is_empty()).collect();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// A command's simple commands, chain by chain: split at unquoted `;`, `&`, `|`, newlines
/// and parentheses into simple commands, each split into words as a shell would (quotes
/// removed); a `;` or newline ends a chain (a `cd` moves only the commands after it in its
/// chain). A piece shlex cannot split is split at blanks.
fn chains(cmd: &str) -> Vec<Vec<Vec<String>>> {
    let mut chains: Vec<Vec<Vec<String>>> = vec![Vec::new()];
    let mut piece = String::new();
    let mut quote: Option<char> = None;
    let mut chars = cmd.chars().peekable();
    let flush = |piece: &mut String, chains: &mut Vec<Vec<Vec<String>>>, end_chain: bool| {
        let words = shlex::split(piece)
            .unwrap_or_else(|| piece.split_whitespace().map(str::to_string).collect());
        if !words.is_empty() {
            chains.last_mut().expect("one chain at least").push(words);
        }
        piece.clear();
        if end_chain {
            chains.push(Vec::new());
        }
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                piece.push(c);
            }
            (Some('"'), '\\') => {
                piece.push(c);
                if let Some(n) = chars.next() {
                    piece.push(n);
                }
            }
            (Some(_), c) => piece.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                piece.push(c);
            }
            (None, '\\') => {
                piece.push(c);
                if let Some(n) = chars.next() {
                    piece.push(n);
                }
            }
            (None, ';' | '\n') => flush(&mut piece, &mut chains, true),
            (None, '&' | '|' | '(' | ')') => flush(&mut piece, &mut chains, false),
            (None, c) => piece.push(c),
        }
    }
    flush(&mut piece, &mut chains, false);
    chains.retain(|c| !c.is_empty());
    chains
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(cmd: &str) -> Vec<String> {
        tools_of(cmd).into_iter().map(|t| t.tool).collect()
    }

    fn globs_of(cmd: &str) -> Vec<String> {
        tools_of(cmd).into_iter().flat_map(|t| t.globs).collect()
    }

    #[test]
    fn the_known_tools_are_found_behind_wrappers_and_assignments() {
        for (cmd, want) in [
            ("pytest -q", vec!["pytest"]),
            ("py.test", vec!["pytest"]),
            ("'/opt/venv/bin/pytest' -q tests", vec!["pytest"]),
            ("python -m pytest", vec!["pytest"]),
            ("python3.11 -X dev -m pytest -x", vec!["pytest"]),
            (
                "PYTHONPATH=src python3 -m unittest discover",
                vec!["unittest"],
            ),
            ("uv run --with pytest-cov pytest", vec!["pytest"]),
            ("poetry run python -m nose2", vec!["nose2"]),
            ("python -m mypkg.tests", vec![]),
            ("cargo test --workspace", vec!["cargo"]),
            ("cargo +nightly nextest run", vec!["cargo"]),
            ("timeout 60 cargo clippy -- -D warnings", vec!["cargo"]),
            ("go test ./...", vec!["go"]),
            ("npm test", vec!["npm"]),
            ("npm run test:unit", vec!["npm"]),
            ("yarn test", vec!["yarn"]),
            ("pnpm -r test", vec!["pnpm"]),
            ("npx --yes jest --ci", vec!["npx", "jest"]),
            ("env CI=1 vitest run", vec!["vitest"]),
            ("node --test", vec!["node --test"]),
            ("make test", vec!["make"]),
            ("nice -n 5 make -C sub check", vec!["make"]),
            ("bash scripts/check.sh", vec!["the script scripts/check.sh"]),
            ("sh -e ./t.sh arg", vec!["the script t.sh"]),
            (
                "./scripts/judge.sh --strict",
                vec!["the script scripts/judge.sh"],
            ),
            ("python3 tools/check.py", vec!["the script tools/check.py"]),
            ("cargo fmt --check && cargo test", vec!["cargo"]),
            ("test -f done.txt", vec![]),
            ("grep -q 'fn parse; pytest' src/lib.rs", vec![]),
            ("bash -c 'cd t && pytest'", vec!["pytest"]),
            ("cargo fmt --check", vec![]),
            ("/usr/bin/true", vec![]),
            ("bash /abs/outside.sh", vec![]),
            ("bash $SCRIPT", vec![]),
        ] {
            assert_eq!(tools(cmd), want, "{cmd}");
        }
    }

    #[test]
    fn pytest_protects_its_configuration_anywhere_and_its_shadows_where_it_runs() {
        let g = globs_of("cd tests && python -m pytest");
        for want in [
            "**/conftest.py",
            "**/pytest.ini",
            "**/pyproject.toml",
            "**/setup.cfg",
            "**/tox.ini",
            "tests/pytest.py",
            "tests/pytest/**",
            "tests/sitecustomize.py",
            "tests/*.pth",
        ] {
            assert!(g.iter().any(|x| x == want), "{want} in {g:?}");
        }
        let root = globs_of("pytest");
        for want in ["pytest.py", "sitecustomize.py", "usercustomize.py", "*.pth"] {
            assert!(root.iter().any(|x| x == want), "{want} in {root:?}");
        }
        assert!(globs_of("python3 -m unittest").contains(&"unittest.py".to_string()));
    }

    #[test]
    fn node_and_make_read_where_they_run_and_cd_moves_the_rest_of_its_chain() {
        let g = globs_of("cd web && npm test; make");
        for want in [
            "web/package.json",
            "package.json",
            "web/jest.config.*",
            ".npmrc",
            "Makefile",
            "*.mk",
        ] {
            assert!(g.iter().any(|x| x == want), "{want} in {g:?}");
        }
        assert!(!g.contains(&"web/Makefile".to_string()), "{g:?}");
        let m = globs_of("make -C sub -f ../rules.mk test");
        assert!(m.contains(&"sub/Makefile".to_string()), "{m:?}");
        assert!(m.contains(&"rules.mk".to_string()), "{m:?}");
        assert_eq!(
            globs_of("bash './odd [name].sh'"),
            vec!["odd \\[name\\].sh"]
        );
        assert_eq!(repo_path("a/b/", "../../c"), Some("c".into()));
        assert_eq!(repo_path("", "../x"), None);
    }

    #[test]
    fn a_plan_leaves_out_what_the_user_protects_and_what_was_found_before() {
        let src = |role, cmd: &str| Source {
            role,
            cmd: cmd.to_string(),
        };
        let plan = plan(
            &[
                src("check", "bash tests/run.sh"),
                src("check", "pytest"),
                src("check", "python -m pytest -k x"),
                src("judge-cmd", "./scripts/judge.sh"),
            ],
            &["tests/**".to_string(), "**/pytest.ini".to_string()],
        );
        assert_eq!(plan.len(), 4);
        assert!(
            plan[0].globs.is_empty(),
            "tests/** covers it: {:?}",
            plan[0]
        );
        assert_eq!(plan[0].scripts, vec!["tests/run.sh"]);
        assert!(!plan[1].globs.contains(&"**/pytest.ini".to_string()));
        assert!(plan[1].globs.contains(&"**/conftest.py".to_string()));
        assert!(plan[2].globs.is_empty(), "found before: {:?}", plan[2]);
        assert_eq!(plan[3].globs, vec!["scripts/judge.sh"]);
        let all = globs(&plan);
        assert_eq!(
            all.iter().filter(|g| *g == "**/conftest.py").count(),
            1,
            "{all:?}"
        );
        assert!(covered("tests/x\\[1\\].sh", &["tests/**".to_string()]));
        assert!(!covered("**/conftest.py", &["tests/**".to_string()]));
    }
}
