//! `orbit init`: render a loop directory from a goal, or re-render an existing loop's
//! scripts from its loop.toml (`--force`). Everything is validated before anything is
//! written, and a new loop directory appears whole or not at all.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::autoprotect::{self, Found, Source};
use crate::cli::InitArgs;
use crate::config::LoopConfig;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::goal::{self, GoalText, Usd};
use crate::locate::repo_root;
use crate::render::{self, View};
use crate::shell;
use crate::state::{Sidecar, State};
use crate::{fsx, pins, progress};

/// What `orbit init` did.
#[derive(Debug)]
pub struct InitOutcome {
    pub dir: PathBuf,
    pub rerendered: bool,
}

fn read_goal(args: &InitArgs) -> Result<GoalText> {
    let bytes = match (&args.goal, &args.goal_file) {
        (Some(g), None) if g == "-" => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| Error::io("cannot read the goal from standard input", e))?;
            buf
        }
        (Some(g), None) => g.clone().into_bytes(),
        (None, Some(file)) => fsx::read(file)?,
        (None, None) => {
            return Err(Error::Usage(
                "orbit init needs a goal: orbit init \"make cargo test pass\" (or --goal-file FILE, or - for stdin)".into(),
            ));
        }
        (Some(_), Some(_)) => {
            return Err(Error::Usage(
                "give the goal once: either GOAL or --goal-file".into(),
            ));
        }
    };
    GoalText::from_bytes(bytes)
}

/// The acceptance check a repository suggests when no --verify is given.
pub fn detect_check(repo: &Path) -> Option<(String, &'static str)> {
    let has = |f: &str| repo.join(f).is_file();
    if has("Cargo.toml") {
        return Some(("cargo test".into(), "Cargo.toml"));
    }
    if has("go.mod") {
        return Some(("go test ./...".into(), "go.mod"));
    }
    if has("package.json") {
        return Some(("npm test".into(), "package.json"));
    }
    if has("pyproject.toml") || has("pytest.ini") || has("setup.py") {
        return Some(("python3 -m pytest".into(), "a Python project file"));
    }
    if has("pom.xml") {
        return Some(("mvn -B test".into(), "pom.xml"));
    }
    if let Ok(text) = fs::read_to_string(repo.join("Makefile"))
        && text.lines().any(|l| l.starts_with("test:"))
    {
        return Some(("make test".into(), "Makefile's test target"));
    }
    None
}

/// The suggested check `cmd` run where the dependency setup orbit applies puts the project's
/// Python packages: a pytest check of a project whose setup makes `.venv` (pip, poetry) runs
/// that environment's Python (the system's has neither the project nor pytest), one of a uv
/// project runs through `uv run`. Any other check is `cmd` as it is.
fn in_project_env(repo: &Path, cmd: String) -> String {
    let Some(rest) = cmd.strip_prefix("python3 -m pytest") else {
        return cmd;
    };
    let found = crate::deps::detect(repo);
    if found.iter().any(|e| e.name == "uv") {
        format!("uv run python -m pytest{rest}")
    } else if found.iter().any(|e| e.name == "pip" || e.name == "poetry") {
        format!(".venv/bin/python -m pytest{rest}")
    } else {
        cmd
    }
}

/// Whether `program` is an executable file on PATH (or, with a `/`, at that path).
pub fn program_found(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        p.is_file()
            && fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
    };
    if program.contains('/') {
        return runnable(Path::new(program));
    }
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|d| runnable(&d.join(program))))
        .unwrap_or(false)
}

/// What this machine lacks of what `cfg`'s loop needs at run time (contract 1,
/// `contract::runtime`): one sentence per missing program or perl module set. The loop may
/// run on another machine, so `orbit init` only warns; the runner's preflight stops there.
pub fn runtime_missing(cfg: &LoopConfig) -> Vec<String> {
    use crate::contract::runtime::{
        CORE_TOOLS, PERL_HOME_MODULES, PERL_JSON_MODULES, PERL_NET_MODULES, holds_json,
    };
    let mut missing = Vec::new();
    let bash = std::process::Command::new("bash")
        .args(["-c", "echo \"${BASH_VERSINFO[0]} ${BASH_VERSINFO[1]}\""])
        .stdin(std::process::Stdio::null())
        .output();
    match bash.ok().filter(|o| o.status.success()) {
        None => missing.push("bash (>= 4.4) is not on PATH".to_string()),
        Some(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            let mut v = text
                .split_whitespace()
                .map(|n| n.parse::<u32>().unwrap_or(0));
            let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
            if (major, minor) < (4, 4) {
                missing.push(format!(
                    "bash on PATH is {major}.{minor}, and the scripts need bash >= 4.4"
                ));
            }
        }
    }
    let tools: Vec<&str> = std::iter::once("git")
        .chain(CORE_TOOLS.iter().copied())
        .filter(|t| !program_found(t))
        .collect();
    if !tools.is_empty() {
        missing.push(format!("PATH does not find {}", tools.join(", ")));
    }
    if !["sha256sum", "shasum", "openssl"]
        .iter()
        .any(|t| program_found(t))
    {
        missing.push("no sha256 tool (sha256sum, shasum or openssl)".into());
    }
    let perl_lacks = |modules: &[&str]| -> Vec<String> {
        modules
            .iter()
            .filter(|m| {
                !std::process::Command::new("perl")
                    .args([format!("-M{m}").as_str(), "-e", "1"])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .map(|m| m.to_string())
            .collect()
    };
    if cfg.engine != Engine::Custom || !cfg.env_file.is_empty() {
        let mut needs = PERL_HOME_MODULES.to_vec();
        if holds_json(cfg.engine) {
            needs.extend(PERL_JSON_MODULES);
        }
        let lacks = perl_lacks(&needs);
        if !lacks.is_empty() {
            missing.push(format!(
                "holding the engine's user-level files and the env file needs perl with {}, and this machine's perl lacks {}",
                needs.join(", "),
                lacks.join(", ")
            ));
        }
    }
    if cfg.sandbox != crate::config::Sandbox::None
        && cfg.sandbox_network == crate::config::SandboxNetwork::Allowlist
    {
        let lacks = perl_lacks(PERL_NET_MODULES);
        if !lacks.is_empty() {
            missing.push(format!(
                "the sandbox's network allowlist needs perl with {}, and this machine's perl lacks {}",
                PERL_NET_MODULES.join(", "),
                lacks.join(", ")
            ));
        }
    }
    missing
}

/// The repository's path is one the runner can name in the lines of git's file lists and
/// of its own records: no newline, no other control character, UTF-8. Refused with the fix
/// otherwise (the runner's preflight refuses it too).
fn plain_repo_path(repo: &Path) -> Result<()> {
    match repo.to_str() {
        Some(p) if !p.chars().any(char::is_control) => Ok(()),
        _ => Err(Error::Usage(format!(
            "the repository's path '{}' holds a newline or another control character (or is not UTF-8), which git's file lists and the loop's records cannot name safely: rename or move the repository to a plain path, then run orbit init there",
            repo.display().to_string().escape_debug()
        ))),
    }
}

/// The agent's program as loop.toml records it. A name without a `/`, or an absolute path,
/// as it is; a relative path (which no run could find, whatever directory a schedule starts
/// it in) becomes absolute, against `base`, and must name an executable file: refused, with
/// the fix, when it names nothing runnable.
fn agent_program(program: &str, base: &Path) -> Result<String> {
    use std::os::unix::fs::PermissionsExt;
    // A name is found on PATH, and an absolute path taken as given, by the runner's
    // preflight (the machine that runs the loop may not be this one).
    if !program.contains('/') || program.starts_with('/') {
        return Ok(program.to_string());
    }
    let path = absolutize(base, Path::new(program))?;
    let shown = program.escape_debug();
    let meta = fs::metadata(&path).map_err(|_| {
        Error::Usage(format!(
            "--exec: the agent {shown} does not exist ({} from {}): give the path of the agent's program, relative to the directory orbit init runs in, or absolute",
            path.display(),
            base.display()
        ))
    })?;
    if !meta.is_file() {
        return Err(Error::Usage(format!(
            "--exec: the agent {shown} ({}) is not a file: give the path of the agent's program",
            path.display()
        )));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(Error::Usage(format!(
            "--exec: the agent {shown} ({}) is not executable: chmod +x {}, or give its interpreter first (--exec 'bash {shown}')",
            path.display(),
            crate::shell::paste_word(&path.display().to_string())
        )));
    }
    let text = path.to_str().ok_or_else(|| {
        Error::Usage(format!(
            "--exec: the agent's path {} is not UTF-8: move it to a plain path",
            path.display()
        ))
    })?;
    if !crate::config::is_plain_path(text) {
        return Err(Error::Usage(format!(
            "--exec: the agent's path {shown} holds a control character: move it to a plain path"
        )));
    }
    Ok(text.to_string())
}

/// Why the suggested check `cmd` could not run here (its program, or pytest, missing).
fn suggested_check_missing(cmd: &str) -> Option<String> {
    let program = cmd.split_whitespace().next()?;
    if !program_found(program) {
        return Some(format!("{program} is not on PATH"));
    }
    if cmd.starts_with("python3 -m pytest") {
        let has_pytest = std::process::Command::new(program)
            .args(["-c", "import pytest"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_pytest {
            return Some(format!("{program} has no pytest module"));
        }
    }
    None
}

/// The setup a fresh checkout of the repository needs before its checks can run, from what
/// it holds: (command, what it was found from). A worktree has the tracked files only: no
/// installed dependencies, no virtual environment (its submodules the runner checks out
/// itself, from the repository's own module objects).
pub fn detect_setup(repo: &Path) -> Vec<(String, &'static str)> {
    let has = |f: &str| repo.join(f).is_file();
    let mut out = Vec::new();
    if has("package-lock.json") || has("npm-shrinkwrap.json") {
        out.push(("npm ci".to_string(), "package-lock.json"));
    } else if has("pnpm-lock.yaml") {
        out.push((
            "pnpm install --frozen-lockfile".to_string(),
            "pnpm-lock.yaml",
        ));
    } else if has("yarn.lock") {
        out.push(("yarn install --frozen-lockfile".to_string(), "yarn.lock"));
    }
    if has("uv.lock") {
        out.push(("uv sync --frozen".to_string(), "uv.lock"));
    } else if has("poetry.lock") {
        out.push((
            "POETRY_VIRTUALENVS_IN_PROJECT=true poetry install --no-interaction".to_string(),
            "poetry.lock",
        ));
    } else if has("requirements.txt") {
        out.push((
            "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt".to_string(),
            "requirements.txt",
        ));
    } else if has("pyproject.toml") || has("setup.py") {
        out.push((
            "python3 -m venv .venv && .venv/bin/pip install -e .".to_string(),
            "a Python project file",
        ));
    }
    if has("pom.xml") {
        out.push((crate::deps::MAVEN_SETUP.to_string(), "pom.xml"));
    }
    if fs::read_to_string(repo.join(".gitattributes")).is_ok_and(|t| t.contains("filter=lfs")) {
        out.push(("git lfs pull".to_string(), "LFS files in .gitattributes"));
    }
    if let Some(python) = pre_commit_python(repo) {
        out.push((
            format!("{} -m pre_commit install-hooks", shell::paste_word(&python)),
            "the pre-commit framework's hook",
        ));
    }
    out
}

/// Under the sandbox, with no setup given: the setup of the dependencies the repository's
/// lockfiles and manifests name (crate::deps), which fetches them with the network on the
/// untouched tree, and the offline switches that the checks then run with, put into `cfg`
/// and said in one line.
fn apply_dependency_setup(cfg: &mut LoopConfig, repo: &Path) {
    let found = crate::deps::detect(repo);
    // The pre-commit framework's hook environments, installed with the network so that its
    // hooks, run as checks in the sandbox, find them (a cold cache would fetch every hook's
    // repository at each commit, and the allowlist refuses it).
    let hooks = pre_commit_python(repo)
        .map(|py| format!("{} -m pre_commit install-hooks", shell::paste_word(&py)));
    if let Some(cmd) = &hooks {
        eprintln!(
            "orbit: commit hooks: the setup {} installs the pre-commit framework's hook environments with the network on your untouched tree, so its hooks run offline in the sandbox",
            crate::render::code_span(cmd)
        );
    }
    if found.is_empty() {
        cfg.setup.extend(hooks);
        return;
    }
    cfg.setup = found.iter().map(|e| e.setup.clone()).collect();
    cfg.setup.extend(hooks);
    cfg.offline_env = crate::deps::offline_env(&found);
    match crate::deps::setup_inputs(repo, &found) {
        Ok(inputs) => {
            eprintln!(
                "orbit: the setup's output on your untouched tree is kept and copied into each claim's clean checkout while {} stay as they are (setup-inputs)",
                inputs.join(", ")
            );
            cfg.setup_inputs = inputs;
        }
        Err(why) => eprintln!(
            "orbit: the setup runs again in each claim's clean checkout (not cached: {why})"
        ),
    }
    let what: Vec<String> = found
        .iter()
        .map(|e| format!("{} ({})", e.name, e.found))
        .collect();
    eprintln!(
        "orbit: dependencies: {}: the setup {} fetches them with the network on your untouched tree (the workspace's first setup); the checks, the agent and every later setup then run offline ({}); --no-setup for none, --setup CMD for your own",
        what.join(", "),
        cfg.setup
            .iter()
            .map(|c| crate::render::code_span(c))
            .collect::<Vec<_>>()
            .join(" + "),
        cfg.offline_env.join(" ")
    );
    if found.iter().any(|e| e.name == "maven") {
        eprintln!(
            "orbit: maven: its setup runs the build's tests once (their failures ignored) because surefire fetches its test provider only then; a Maven older than 3.9 ignores MAVEN_ARGS, and its checks read what the setup put in the local repository under HOME (read-only in the sandbox) without asking a remote one"
        );
    }
}

/// The python the pre-commit framework's installed pre-commit hook runs (its
/// `INSTALL_PYTHON`), when the repository's hooks directory holds that hook: its hook
/// environments are installed by a setup, with the network, so that the hook runs offline
/// in the sandbox.
fn pre_commit_python(repo: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--git-path", "hooks"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let hooks = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let hook = fs::read_to_string(repo.join(hooks).join("pre-commit")).ok()?;
    if !hook.contains("File generated by pre-commit") {
        return None;
    }
    let python = hook
        .lines()
        .find_map(|l| l.strip_prefix("INSTALL_PYTHON="))?
        .trim_matches(['\'', '"']);
    Some(if python.is_empty() { "python3" } else { python }.to_string())
}

/// Lexically normalises `path` against `base` (no filesystem access).
fn absolutize(base: &Path, path: &Path) -> Result<PathBuf> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return Err(Error::path(path, "the path climbs above the root"));
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    Ok(out)
}

/// Resolves the loop directory: inside the repository, not a symlink, not inside `.git`.
/// Returns the directory and its path relative to the repository root.
fn resolve_dir(cwd: &Path, repo: &Path, dir: &Path) -> Result<(PathBuf, String)> {
    let abs = absolutize(cwd, dir)?;
    // Find the nearest existing ancestor; refuse symlinks on the way.
    let mut existing = abs.clone();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match fs::symlink_metadata(&existing) {
            Ok(meta) => {
                if meta.file_type().is_symlink() {
                    return Err(Error::path(
                        &existing,
                        "is a symlink: a loop directory (and the path to it) must be a real directory",
                    ));
                }
                if !meta.is_dir() {
                    return Err(Error::path(&existing, "exists and is not a directory"));
                }
                break;
            }
            Err(_) => {
                let name = existing
                    .file_name()
                    .ok_or_else(|| Error::path(&abs, "has no existing parent"))?
                    .to_os_string();
                rest.push(name);
                if !existing.pop() {
                    return Err(Error::path(&abs, "has no existing parent"));
                }
            }
        }
    }
    let mut real = fs::canonicalize(&existing)
        .map_err(|e| Error::io(format!("cannot resolve {}", existing.display()), e))?;
    for part in rest.iter().rev() {
        real.push(part);
    }
    let rel = real.strip_prefix(repo).map_err(|_| {
        Error::path(
            &abs,
            format!(
                "is outside the repository {}: put the loop directory inside it (default .orbit/<slug>)",
                repo.display()
            ),
        )
    })?;
    if rel.as_os_str().is_empty() {
        return Err(Error::path(
            &abs,
            "is the repository root itself: choose a subdirectory such as .orbit/<name>",
        ));
    }
    if rel
        .components()
        .next()
        .map(|c| c.as_os_str() == ".git")
        .unwrap_or(false)
    {
        return Err(Error::path(
            &abs,
            "is inside .git: choose another directory",
        ));
    }
    let rel_text = rel
        .to_str()
        .ok_or_else(|| Error::path(&abs, "is not valid UTF-8: choose a plain name"))?
        .to_string();
    if rel_text.chars().any(|c| c.is_control() || c == '\\') {
        return Err(Error::path(
            &abs,
            "contains a control character or backslash: choose a plain name",
        ));
    }
    Ok((real, rel_text))
}

/// The workspace as loop.toml records it: `--workspace` (relative to the current directory),
/// repository-relative when it is inside the repository; empty without it (the default,
/// under the user's data directory, computed where the loop runs:
/// [`crate::locate::workspace`]). Refused inside the loop directory, around it, or at the
/// repository root.
fn resolve_workspace(cwd: &Path, repo: &Path, dir: &Path, given: Option<&Path>) -> Result<String> {
    let Some(given) = given else {
        return Ok(String::new());
    };
    let abs = absolutize(cwd, given)?;
    let shown = abs.display().to_string();
    if abs.starts_with(dir) {
        return Err(Error::Usage(format!(
            "--workspace {shown} is inside the loop directory {}: the agent's workspace and the loop's control files must stay apart; choose a path outside it",
            dir.display()
        )));
    }
    if dir.starts_with(&abs) {
        return Err(Error::Usage(format!(
            "--workspace {shown} holds the loop directory {}: choose a path that does not contain it",
            dir.display()
        )));
    }
    let text = match abs.strip_prefix(repo) {
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => shown.clone(),
    };
    if !crate::config::is_plain_path(&text) {
        return Err(Error::Usage(format!(
            "--workspace {shown}: give a plain path without control characters"
        )));
    }
    Ok(text)
}

/// The workspace as init's summary names it, and why it is there: `--workspace` as loop.toml
/// records it, else the default this machine gives the loop.
fn workspace_shown(cfg: &LoopConfig, repo: &Path) -> (String, &'static str) {
    if !cfg.workspace.is_empty() {
        return (cfg.workspace.clone(), "");
    }
    match crate::locate::workspace::data_default(repo, &cfg.name) {
        Some(p) => (
            p.display().to_string(),
            "\n          (outside your checkout, under your data directory: no tool that walks up from it finds your own files)",
        ),
        None => (
            format!("$XDG_DATA_HOME/orbit/workspaces/<repository>/{}", cfg.name),
            "\n          (neither XDG_DATA_HOME nor HOME names an absolute directory here: set one before the first run)",
        ),
    }
}

fn loop_name_of(rel: &str) -> String {
    let last = rel.rsplit('/').next().unwrap_or(rel);
    goal::slugify(last, 40).unwrap_or_else(|| "loop".into())
}

/// Project defaults for `orbit init`, from an optional `orbit.toml` at the repository root.
/// Keys carry the flags' names; a flag given on the command line wins.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ProjectDefaults {
    pub engine: Option<String>,
    pub exec: Option<String>,
    pub verify: Option<Vec<String>>,
    pub setup: Option<Vec<String>>,
    pub protect: Option<Vec<String>>,
    pub max_iterations: Option<u64>,
    pub exec_timeout: Option<String>,
    pub loop_timeout: Option<String>,
    pub usd_cap: Option<toml::Value>,
    pub pass_k: Option<u32>,
    pub notify: Option<Vec<String>>,
    pub sandbox: Option<crate::config::Sandbox>,
    pub sandbox_network: Option<crate::config::SandboxNetwork>,
    pub adequacy: Option<crate::config::Adequacy>,
    pub allow_hosts: Option<Vec<String>>,
    pub judge_cmd: Option<String>,
    /// `true`: protect nothing by default (as `--no-auto-protect`).
    pub no_auto_protect: Option<bool>,
}

impl ProjectDefaults {
    pub fn load(repo: &Path) -> Result<ProjectDefaults> {
        let path = repo.join("orbit.toml");
        if !path.is_file() {
            return Ok(ProjectDefaults::default());
        }
        let text = fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        toml::from_str(&text).map_err(|e| {
            Error::path(
                &path,
                format!("not a valid orbit.toml: {}", e.message().trim()),
            )
        })
    }

    /// The keys of orbit.toml that give this `orbit init` a value: each set there and not
    /// given as a flag (said in init's output: a project file the agent could have
    /// written on a branch that was merged is one to know of).
    pub fn taken(&self, args: &InitArgs) -> Vec<&'static str> {
        let mut keys = Vec::new();
        let mut take = |key, used: bool| {
            if used {
                keys.push(key);
            }
        };
        take("engine", args.engine.is_none() && self.engine.is_some());
        take("exec", args.exec.is_none() && self.exec.is_some());
        take("verify", args.verify.is_empty() && self.verify.is_some());
        take("setup", args.setup.is_empty() && self.setup.is_some());
        take("protect", args.protect.is_empty() && self.protect.is_some());
        take(
            "max-iterations",
            args.max_iterations.is_none() && self.max_iterations.is_some(),
        );
        take(
            "exec-timeout",
            args.exec_timeout.is_none() && self.exec_timeout.is_some(),
        );
        take(
            "loop-timeout",
            args.loop_timeout.is_none() && self.loop_timeout.is_some(),
        );
        take("usd-cap", args.usd_cap.is_none() && self.usd_cap.is_some());
        take("pass-k", args.pass_k.is_none() && self.pass_k.is_some());
        take("notify", args.notify.is_empty() && self.notify.is_some());
        take("sandbox", args.sandbox.is_none() && self.sandbox.is_some());
        take(
            "sandbox-network",
            args.sandbox_network.is_none() && self.sandbox_network.is_some(),
        );
        take(
            "adequacy",
            args.adequacy.is_none() && self.adequacy.is_some(),
        );
        take(
            "allow-hosts",
            args.allow_host.is_empty() && self.allow_hosts.is_some(),
        );
        take(
            "judge-cmd",
            args.judge_cmd.is_none() && self.judge_cmd.is_some(),
        );
        take(
            "no-auto-protect",
            !args.no_auto_protect && self.no_auto_protect == Some(true),
        );
        keys
    }

    fn usd_cap(&self) -> Result<Option<Usd>> {
        self.usd_cap
            .as_ref()
            .map(|v| Usd::from_toml("orbit.toml: usd-cap", v))
            .transpose()
    }
}

/// The loop's channel secrets: webhook URLs and ntfy topics, which give whoever reads them
/// the right to post to the channel. They live in `notify.secrets` (mode 0600, never
/// rendered into a script, never pinned, git-ignored), which notify.sh reads at run time.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NotifySecrets {
    pub webhooks: Vec<String>,
    pub ntfy: Vec<String>,
}

/// The file of the loop directory that holds the channel secrets.
pub const NOTIFY_SECRETS: &str = "notify.secrets";

/// The loop directory's own `.gitignore`: the secrets never reach a commit.
pub const LOOP_GITIGNORE: &str =
    "# Written by orbit: channel URLs and tokens stay out of git.\nnotify.secrets\n";

impl NotifySecrets {
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty() && self.ntfy.is_empty()
    }

    /// The file's text: `webhook=URL` and `ntfy=TOPIC` lines under a comment.
    pub fn print(&self) -> String {
        let mut out = String::from(
            "# orbit notification secrets: read by notify.sh, never sourced. Keep this file\n\
             # mode 0600 and out of git. One channel a line: webhook=URL or ntfy=TOPIC|URL.\n",
        );
        for w in &self.webhooks {
            out.push_str(&format!("webhook={w}\n"));
        }
        for t in &self.ntfy {
            out.push_str(&format!("ntfy={t}\n"));
        }
        out
    }
}

/// Applies `--notify` channels to a configuration; webhook URLs and ntfy topics go to the
/// secrets, never into loop.toml.
pub fn apply_notify(cfg: &mut LoopConfig, specs: &[String]) -> Result<NotifySecrets> {
    let mut secrets = NotifySecrets::default();
    for spec in specs {
        let bad = |why: &str| {
            Err(Error::Usage(format!(
                "--notify '{}': {why}; use desktop, cmd:COMMAND, webhook:URL, ntfy:TOPIC or every-iteration",
                spec.escape_debug()
            )))
        };
        match spec.split_once(':') {
            _ if spec == "desktop" => cfg.notify_desktop = true,
            _ if spec == "every-iteration" => cfg.notify_every_iteration = true,
            Some(("cmd", c)) if !c.trim().is_empty() => {
                if !cfg.notify_cmd.is_empty() {
                    return bad("only one command channel; combine commands with ';'");
                }
                cfg.notify_cmd = c.to_string();
            }
            Some(("webhook", u)) if crate::config::is_http_url(u) => {
                if !secrets.webhooks.iter().any(|w| w == u) {
                    secrets.webhooks.push(u.to_string());
                }
            }
            Some(("webhook", _)) => {
                return bad("the webhook needs an http:// or https:// URL without blanks");
            }
            Some(("ntfy", t)) if crate::config::is_ntfy_target(t) => {
                if !secrets.ntfy.iter().any(|x| x == t) {
                    secrets.ntfy.push(t.to_string());
                }
            }
            _ => return bad("unknown channel"),
        }
    }
    Ok(secrets)
}

/// The commands whose tools `orbit init` protects the files of: every check by role, and
/// the judge.
fn sources(cfg: &LoopConfig) -> Vec<Source> {
    let mut out = Vec::new();
    for (role, list) in [
        ("check", &cfg.verify),
        ("reproduction", &cfg.reproduction),
        ("regression", &cfg.regression),
        ("holdout", &cfg.holdout),
    ] {
        out.extend(list.iter().map(|cmd| Source {
            role,
            cmd: cmd.clone(),
        }));
    }
    if !cfg.judge_cmd.trim().is_empty() {
        out.push(Source {
            role: "judge-cmd",
            cmd: cfg.judge_cmd.clone(),
        });
    }
    out
}

/// The paths under `/tmp` (or `TMPDIR`) the commands of a sandboxed loop's checks and judge
/// name, outside the repository and the loop's workspace, as (command, path): the sandbox
/// gives each run those directories as its own private, empty ones, so such a check cannot
/// find its program there.
pub fn paths_the_sandbox_hides(cfg: &LoopConfig, repo: &Path) -> Vec<(String, String)> {
    let mut hidden_dirs = vec!["/tmp".to_string()];
    if let Ok(t) = std::env::var("TMPDIR") {
        let t = t.trim_end_matches('/').to_string();
        if t.starts_with('/') && t.len() > 1 && !hidden_dirs.contains(&t) {
            hidden_dirs.push(t);
        }
    }
    let mut seen_dirs: Vec<String> = vec![repo.display().to_string()];
    if let Ok(c) = fs::canonicalize(repo) {
        seen_dirs.push(c.display().to_string());
    }
    let ws = Path::new(&cfg.workspace);
    seen_dirs.push(if ws.is_absolute() {
        ws.display().to_string()
    } else {
        repo.join(ws).display().to_string()
    });
    let under = |p: &str, d: &str| p == d || p.starts_with(&format!("{d}/"));
    let mut out = Vec::new();
    for src in sources(cfg) {
        let words = src
            .cmd
            .split(|c: char| c.is_whitespace() || "\'\";|&()<>`=".contains(c))
            .filter(|w| w.starts_with('/'));
        for w in words {
            if hidden_dirs.iter().any(|d| under(w, d))
                && !seen_dirs.iter().any(|d| under(w, d))
                && !out.iter().any(|(_, p): &(String, String)| p == w)
            {
                out.push((src.cmd.clone(), w.to_string()));
            }
        }
    }
    out
}

/// The repository scripts the loop's judge command runs that none of its protect globs
/// covers: the judge would run the agent's copy of each.
pub fn unprotected_judge_scripts(cfg: &LoopConfig) -> Vec<String> {
    let globs = cfg.protect_globs();
    autoprotect::tools_of(&cfg.judge_cmd)
        .into_iter()
        .filter_map(|t| t.tool.strip_prefix("the script ").map(str::to_string))
        .filter(|p| !autoprotect::covered(&autoprotect::escape(p), &globs))
        .collect()
}

/// The names `--name` gave, by command; one command named twice differently is refused.
fn check_names_given(
    given: &[(String, String)],
) -> Result<std::collections::BTreeMap<String, String>> {
    let mut out = std::collections::BTreeMap::new();
    for (cmd, name) in given {
        if let Some(other) = out.insert(cmd.clone(), name.clone())
            && other != *name
        {
            return Err(Error::Usage(format!(
                "the check `{cmd}` is named twice ({other}, {name}): a command is one check with one name"
            )));
        }
    }
    Ok(out)
}

/// The tracked files the repository's commit hooks read and run, which the runner's own
/// commits execute (outside any sandbox): the pre-commit framework's configuration, husky's
/// hook scripts, a relative `core.hooksPath` directory the project keeps in its tree.
pub fn commit_hook_globs(repo: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in [".pre-commit-config.yaml", ".pre-commit-config.yml"] {
        if repo.join(f).is_file() {
            out.push(f.to_string());
        }
    }
    if repo.join(".husky").is_dir() {
        out.push(".husky/**".to_string());
    }
    let hooks_path = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["config", "--get", "core.hooksPath"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let rel = hooks_path.trim_end_matches('/');
    if !rel.is_empty()
        && !rel.starts_with(['/', '~'])
        && !rel.split('/').any(|p| p == ".." || p == ".")
        && !rel.starts_with(".husky")
        && repo.join(rel).is_dir()
    {
        out.push(format!("{}/**", autoprotect::escape(rel)));
    }
    out
}

/// Builds the loop's configuration from the flags, over the project defaults; with it,
/// what it protects by default (for the output; empty with `--no-auto-protect`).
fn config_from_args(
    args: &InitArgs,
    cwd: &Path,
    repo: &Path,
    name: String,
) -> Result<(LoopConfig, NotifySecrets, Vec<Found>)> {
    let d = ProjectDefaults::load(repo)?;
    let engine = match (args.engine, d.engine.as_deref()) {
        (Some(e), _) => e,
        (None, Some(name)) => Engine::named(name)?,
        (None, None) => Engine::Claude,
    };
    let mut argv = engine.argv(args.exec.as_deref().or(d.exec.as_deref()))?;
    // A program given by a relative path is found where it was given: --exec's from the
    // directory orbit init runs in, orbit.toml's from the repository root (where it lives).
    let base = if args.exec.is_some() { cwd } else { repo };
    argv[0] = agent_program(&argv[0], base)?;
    let pick = |flag: &Vec<String>, def: &Option<Vec<String>>| {
        if flag.is_empty() {
            def.clone().unwrap_or_default()
        } else {
            flag.clone()
        }
    };
    let mut cfg = LoopConfig {
        name,
        engine,
        token_prices: engine.default_token_prices(),
        argv,
        verify: pick(&args.verify, &d.verify),
        reproduction: args.reproduction.clone(),
        regression: args.regression.clone(),
        holdout: args.holdout.clone(),
        setup: pick(&args.setup, &d.setup),
        setup_inputs: args.setup_input.clone(),
        check_name: check_names_given(&args.check_name)?,
        protect: pick(&args.protect, &d.protect),
        ..LoopConfig::default()
    };
    cfg.fanout_early_stop = args.fanout_early_stop;
    cfg.holdout_unmasked = args.holdout_unmasked;
    if let Some(j) = args.check_jobs {
        cfg.check_jobs = j;
    }
    if let Some(n) = args.candidates {
        cfg.candidates = n;
        if n > 1 {
            // Candidates that read each other's narrative are no longer independent.
            cfg.memory = crate::config::Memory::Feedback;
        }
    }
    if let Some(memory) = args.memory {
        cfg.memory = memory;
    }
    if let Some(n) = args.max_iterations.or(d.max_iterations) {
        cfg.max_iterations = n;
    }
    if let Some(t) = args.exec_timeout.as_ref().or(d.exec_timeout.as_ref()) {
        cfg.exec_timeout = goal::format_duration(goal::parse_duration("--exec-timeout", t)?);
    }
    if let Some(t) = args.loop_timeout.as_ref().or(d.loop_timeout.as_ref()) {
        cfg.loop_timeout = goal::format_duration(goal::parse_duration("--loop-timeout", t)?);
    }
    if let Some(x) = &args.usd_cap {
        cfg.usd_cap = Some(Usd(goal::parse_usd("--usd-cap", x)?));
    } else if let Some(cap) = d.usd_cap()? {
        cfg.usd_cap = Some(cap);
    }
    if let Some(k) = args.pass_k.or(d.pass_k) {
        cfg.pass_k = k;
    }
    if let Some(sandbox) = args.sandbox.or(d.sandbox) {
        cfg.sandbox = sandbox;
    }
    if let Some(network) = args.sandbox_network.or(d.sandbox_network) {
        cfg.sandbox_network = network;
    }
    if let Some(mode) = args.adequacy.or(d.adequacy) {
        cfg.adequacy = mode;
    }
    cfg.allow_hosts = pick(&args.allow_host, &d.allow_hosts);
    for host in &cfg.allow_hosts {
        crate::config::check_allow_host(host)?;
    }
    if let Some(judge) = args.judge_cmd.as_ref().or(d.judge_cmd.as_ref()) {
        cfg.judge_cmd = judge.clone();
    }
    if cfg.usd_cap.is_some() && !cfg.engine.reports_cost() && cfg.cost_estimate_usd.is_none() {
        eprintln!(
            "orbit: warning: --usd-cap with --engine {}: the engine reports no cost, so the cap counts only what the agent writes to $ORBIT_COST_FILE; set cost-estimate-usd in loop.toml to count every run",
            cfg.engine
        );
    }
    let secrets = apply_notify(&mut cfg, &pick(&args.notify, &d.notify))?;
    if cfg.verify.is_empty() && cfg.reproduction.is_empty() && cfg.regression.is_empty() {
        let applies_setup =
            cfg.setup.is_empty() && !args.no_setup && cfg.sandbox != crate::config::Sandbox::None;
        let suggested = detect_check(repo).map(|(cmd, why)| {
            if applies_setup {
                (in_project_env(repo, cmd), why)
            } else {
                (cmd, why)
            }
        });
        match suggested {
            Some((cmd, why)) if cmd.starts_with(".venv/") => {
                eprintln!(
                    "orbit: no --verify given; using `{cmd}` (found {why}; the Python of the virtual environment the setup makes). Add --verify 'CMD' to choose the checks."
                );
                cfg.verify.push(cmd);
            }
            Some((cmd, why)) if suggested_check_missing(&cmd).is_some() => {
                let missing = suggested_check_missing(&cmd).unwrap_or_default();
                return Err(Error::Usage(format!(
                    "no --verify given, and the check {why} suggests, `{cmd}`, cannot run here: {missing}. \
                     Install it, or give the check yourself with --verify 'CMD' (a command that exits 0 when the goal holds)."
                )));
            }
            Some((cmd, why)) => {
                eprintln!(
                    "orbit: no --verify given; using `{cmd}` (found {why}). Add --verify 'CMD' to choose the checks."
                );
                cfg.verify.push(cmd);
            }
            None => {
                return Err(Error::Usage(
                    "no acceptance check: add --verify 'CMD' (a command that exits 0 when the goal holds), e.g. --verify 'cargo test'. \
                     Without a check the loop could never be DONE.".into(),
                ));
            }
        }
    }
    if cfg.setup.is_empty() && !args.no_setup && cfg.sandbox != crate::config::Sandbox::None {
        apply_dependency_setup(&mut cfg, repo);
    }
    if cfg.setup.is_empty() {
        let found = detect_setup(repo);
        if !found.is_empty() {
            let cmds: Vec<String> = found
                .iter()
                .map(|(c, _)| format!("--setup '{c}'"))
                .collect();
            let whys: Vec<&str> = found.iter().map(|(_, w)| *w).collect();
            eprintln!(
                "orbit: the loop's workspace is a fresh checkout (tracked files only) and this project has {}: if its checks need more, add {}",
                whys.join(", "),
                cmds.join(" ")
            );
        }
    }
    // What the checks mean is pinned: the files their tools read are protected by default,
    // as globs that may match nothing yet (a new pytest.ini is a change like an edit).
    let mut found = Vec::new();
    if !(args.no_auto_protect || d.no_auto_protect == Some(true)) {
        found = autoprotect::plan(&sources(&cfg), &cfg.protect);
        // A check's program that is not there yet (`./app`) is what the agent is to write,
        // not what the check means: it is not protected (a judge's script always is).
        for f in found.iter_mut() {
            if f.source.role != "judge-cmd"
                && !f.scripts.is_empty()
                && f.scripts.iter().all(|p| !repo.join(p).exists())
            {
                f.globs.clear();
            }
        }
        let hooks: Vec<String> = commit_hook_globs(repo)
            .into_iter()
            .filter(|g| !autoprotect::covered(g, &cfg.protect))
            .collect();
        if !hooks.is_empty() {
            found.push(Found {
                source: autoprotect::Source {
                    role: "commit",
                    cmd: "git commit".into(),
                },
                tool: "the repository's commit hooks".into(),
                globs: hooks,
                scripts: Vec::new(),
            });
        }
        cfg.auto_protect = autoprotect::globs(&found);
    }
    cfg.validate()?;
    for g in &cfg.protect {
        if let Some(why) = protect_glob_problem(repo, g) {
            return Err(Error::Usage(format!(
                "--protect '{}': {why}",
                g.escape_debug()
            )));
        }
    }
    for script in unprotected_judge_scripts(&cfg) {
        eprintln!(
            "orbit: warning: the judge command runs the repository script {script}, which nothing protects: the judge runs it from the workspace, where the agent can rewrite it to approve anything. Protect it (--protect '{}'), or leave auto-protect on (drop --no-auto-protect), which protects it by default",
            autoprotect::escape(&script)
        );
    }
    Ok((cfg, secrets, found))
}

/// What `orbit init` says of what the loop protects: the user's globs, then those
/// protected by default, command by command.
fn protect_lines(cfg: &LoopConfig, found: &[Found]) -> Vec<String> {
    let mut lines = Vec::new();
    if !cfg.protect.is_empty() {
        lines.push(format!("  protect: {}", cfg.protect.join(", ")));
    }
    let shown: Vec<&Found> = found.iter().filter(|f| !f.globs.is_empty()).collect();
    if !shown.is_empty() {
        lines.push(
            "  protected by default (the files that change how the checks run; a change, or a new file, is a reward_hack; --no-auto-protect turns this off):".into(),
        );
        for f in shown {
            let what = if f.source.role == "judge-cmd" {
                "the judge (judge-cmd)".to_string()
            } else if f.source.role == "commit" {
                "the loop's commits".to_string()
            } else {
                format!("{} {}", f.source.role, render::code_span(&f.source.cmd))
            };
            lines.push(format!("    {} for {what}: {}", f.tool, f.globs.join(", ")));
        }
    }
    lines
}

/// What is wrong with protect glob `glob` in the repository at `repo`, if anything: git
/// cannot match it (braces, an unclosed `[`), or it matches no file (tracked, or untracked
/// and not ignored), with the closest path that exists (contract 7: such a glob would pin
/// nothing, and protect nothing).
pub fn protect_glob_problem(repo: &Path, glob: &str) -> Option<String> {
    if let Some(why) = pins::unmatchable_glob(glob) {
        return Some(why);
    }
    let matched = pins::glob_files(repo, glob)?;
    if !matched.is_empty() {
        return None;
    }
    let hint = pins::glob_files(repo, "**")
        .and_then(|all| pins::closest_glob(glob, &all))
        .map(|g| format!("; did you mean '{g}'?"))
        .unwrap_or_else(|| ": name paths that exist".into());
    Some(format!(
        "it matches no file in the repository (tracked, or untracked and not ignored), so it would protect nothing{hint}"
    ))
}

/// `orbit init`.
pub fn init(args: &InitArgs) -> Result<InitOutcome> {
    let cwd =
        std::env::current_dir().map_err(|e| Error::io("cannot read the current directory", e))?;
    let repo = repo_root(&cwd)?;
    plain_repo_path(&repo)?;
    if args.force {
        return rerender(args, &cwd, &repo);
    }
    let goal = read_goal(args)?;
    let dir_arg = args
        .dir
        .clone()
        .unwrap_or_else(|| repo.join(".orbit").join(goal.slug()));
    let (dir, rel) = resolve_dir(&cwd, &repo, &dir_arg)?;
    if dir.exists() {
        if dir.join("state.env").exists() || dir.join("loop.toml").exists() {
            return Err(Error::Refused(format!(
                "a loop already exists at {}: `orbit init --force --dir {}` re-renders its scripts (keeping its state), or choose another --dir",
                dir.display(),
                dir.display()
            )));
        }
        let empty = fs::read_dir(&dir)
            .map_err(|e| Error::io(format!("cannot read {}", dir.display()), e))?
            .next()
            .is_none();
        if !empty {
            return Err(Error::Refused(format!(
                "{} exists and is not empty: choose a new --dir for the loop",
                dir.display()
            )));
        }
    }
    let name = if args.dir.is_some() {
        loop_name_of(&rel)
    } else {
        goal.slug()
    };
    let (mut cfg, secrets, found) = config_from_args(args, &cwd, &repo, name)?;
    cfg.workspace = resolve_workspace(&cwd, &repo, &dir, args.workspace.as_deref())?;
    let (ws_shown, ws_why) = workspace_shown(&cfg, &repo);
    let holdout_files = read_holdout_files(&args.holdout_file, &cfg, &repo)?;
    // Whether runs will be sandboxed here: bwrap says so (the runner refuses to start where
    // it cannot run), none says not, auto asks the runner's probe.
    let sandboxed_here = match cfg.sandbox {
        crate::config::Sandbox::None => Err("sandbox = \"none\"".to_string()),
        crate::config::Sandbox::Bwrap => Ok(()),
        crate::config::Sandbox::Auto => crate::sandbox::probe().map(|_| ()),
    };
    let unmasked = holdout_unmasked_checks(&cfg, &holdout_files);
    holdout_masking_refusal(&cfg, &unmasked, sandboxed_here.is_ok())?;
    let view = View::new(&cfg, &goal, &rel);
    let files = render::render_all(&view)?;
    if args.dry_run {
        println!("orbit: dry run, nothing written: orbit init would render the loop in {rel}");
    } else {
        write_new_loop(&dir, &cfg, &secrets, &files, &holdout_files)?;
        println!("orbit: loop rendered in {rel}");
    }
    println!(
        "  work:   git worktree {ws_shown} on branch orbit/{} (created at the first run; your checkout is never touched){ws_why}",
        cfg.name
    );
    println!("  engine: {} ({})", cfg.engine, cfg.argv.join(" "));
    let taken = ProjectDefaults::load(&repo)?.taken(args);
    if !taken.is_empty() {
        println!(
            "  from orbit.toml (the project's defaults; a flag overrides each): {}",
            taken.join(", ")
        );
    }
    println!(
        "  checks: {}",
        cfg.verify.len() + cfg.reproduction.len() + cfg.regression.len()
    );
    if args.dry_run {
        for (role, cmd) in sources(&cfg).iter().map(|s| (s.role, &s.cmd)) {
            println!("    {role}: {}", render::code_span(cmd));
        }
    }
    if sandboxed_here.is_ok() {
        for (cmd, path) in paths_the_sandbox_hides(&cfg, &repo) {
            eprintln!(
                "orbit: warning: {} names {path}, under a directory the sandbox gives every run as its own private, empty one: the check will not find it there, and the loop stops at its first run. Move the program into the repository (and call it by its path there), or run without the sandbox (--sandbox none)",
                crate::render::code_span(&cmd)
            );
        }
    }
    for line in protect_lines(&cfg, &found) {
        println!("{line}");
    }
    if !cfg.setup.is_empty() {
        println!(
            "  setup: {} (once in each fresh checkout, before any check: on the untouched tree as your command, network and all; on a tree the agent made, as a check runs{})",
            cfg.setup
                .iter()
                .map(|c| crate::render::code_span(c))
                .collect::<Vec<_>>()
                .join(", "),
            if sandboxed_here.is_ok() {
                ", in the sandbox"
            } else {
                ""
            }
        );
    }
    if !cfg.holdout.is_empty() {
        println!(
            "  holdout: {} check(s), {} file(s) in {rel}/holdout/ (run only in the DONE gate; never in the prompt or the workspace)",
            cfg.holdout.len(),
            holdout_files.len()
        );
        if !unmasked.is_empty() && sandboxed_here.is_ok() {
            eprintln!(
                "orbit: warning: holdout-unmasked: {} read(s) the holdout and run(s) the project's code without run_hidden: that code can read the answers while it is judged (recorded in loop.toml: holdout-unmasked = true)",
                unmasked.join(", ")
            );
        } else if !unmasked.is_empty() {
            println!(
                "  holdout: {} does not use run_hidden: the code it runs can read the holdout; run the project's code through run_hidden CMD so it cannot look the answers up (docs/guide.md, Holdout checks)",
                unmasked.join(", ")
            );
        }
        if sandboxed_here.is_err() {
            eprintln!(
                "orbit: warning: the holdout checks are not sealed without the OS sandbox: the agent runs as you and can read {rel}/holdout/ and holdout.sh. Add --sandbox bwrap (on a machine with bubblewrap) to seal them"
            );
        }
    }
    if cfg.candidates > 1 {
        println!(
            "  candidates: {} per iteration, each in its own worktree next to the workspace ({ws_shown}.c1 ...), memory {}",
            cfg.candidates,
            cfg.memory.name()
        );
    }
    match (cfg.sandbox, &sandboxed_here) {
        (crate::config::Sandbox::Bwrap, _) => println!(
            "  sandbox: bwrap (every agent and check run; the runner refuses to start where it cannot run)"
        ),
        (crate::config::Sandbox::Auto, Ok(())) => println!(
            "  sandbox: auto: bubblewrap works here, so every agent and check run is sandboxed (the runner asks again at each start; --sandbox none to run without)"
        ),
        (crate::config::Sandbox::Auto, Err(why)) => println!(
            "  sandbox: auto: none here, {why}; a tamper is then caught after the run, not refused"
        ),
        (crate::config::Sandbox::None, _) => println!(
            "  sandbox: none (a tamper is caught after the run, not refused; --sandbox auto to use bubblewrap where it runs)"
        ),
    }
    if cfg.sandbox != crate::config::Sandbox::None {
        match cfg.sandbox_network {
            crate::config::SandboxNetwork::Allowlist if cfg.allow_hosts.is_empty() => println!(
                "  network: allowlist: agent runs reach only {}'s API hosts, the checks no host (--allow-host HOST[:PORT] adds one; --sandbox-network open for the whole network)",
                cfg.engine
            ),
            crate::config::SandboxNetwork::Allowlist => println!(
                "  network: allowlist: agent runs reach {}'s API hosts and {hosts}, the checks {hosts} (--sandbox-network open for the whole network)",
                cfg.engine,
                hosts = cfg.allow_hosts.join(", ")
            ),
            crate::config::SandboxNetwork::Open => println!(
                "  network: open (a sandboxed run reaches whatever you can; --sandbox-network allowlist to fence it)"
            ),
        }
    }
    if args.dry_run {
        println!("  loop.toml:");
        for line in cfg.to_toml().lines() {
            println!("    {line}");
        }
        return Ok(InitOutcome {
            dir,
            rerendered: false,
        });
    }
    for why in runtime_missing(&cfg) {
        eprintln!(
            "orbit: warning: the loop's scripts will not run on this machine as it is: {why}; install it before the first run here (docs/contract.md, section 1, says what the scripts need)"
        );
    }
    println!(
        "  next:   review {rel}/goal.md, then `orbit run {rel}` (or `bash {rel}/run-loop.sh`)"
    );
    Ok(InitOutcome {
        dir,
        rerendered: false,
    })
}

/// The progress.md of a new loop: the preamble and the iteration 0 entry.
pub fn initial_progress(cfg: &LoopConfig, now: u64) -> String {
    let mut doc = progress::preamble(&cfg.name);
    let entry = format!(
        "## Iteration 0 — READY\n- at: {}\n- decision: READY — rendered by orbit {} (engine {}, {} check(s), at most {} iteration(s)); review goal.md, then run run-loop.sh\n",
        fsx::iso_utc(now),
        env!("CARGO_PKG_VERSION"),
        cfg.engine,
        cfg.verify.len(),
        cfg.max_iterations
    );
    let (closed, _) = progress::close_entry(progress::GENESIS, 0, &entry);
    doc.push_str(&closed);
    doc
}

/// The folder of the loop directory that holds the holdout checks' files.
pub const HOLDOUT_DIR: &str = "holdout";

/// The holdout checks that read the holdout (they name `ORBIT_HOLDOUT_DIR`, so they run
/// unmasked) and do not run the project's code through `run_hidden`: neither their command
/// nor a holdout file it names uses it. Each as `holdout-N (`CMD`)`. A check that does not
/// read the holdout is never one: it runs masked as a whole.
fn holdout_unmasked_checks(cfg: &LoopConfig, files: &[(String, Vec<u8>)]) -> Vec<String> {
    let uses_run_hidden = |b: &[u8]| b.windows(10).any(|w| w == b"run_hidden");
    cfg.holdout
        .iter()
        .enumerate()
        .filter(|(_, cmd)| {
            crate::render::holdout_check_reads(cmd)
                && !cmd.contains("run_hidden")
                && !files
                    .iter()
                    .any(|(name, bytes)| cmd.contains(name.as_str()) && uses_run_hidden(bytes))
        })
        .map(|(i, cmd)| format!("holdout-{} ({})", i + 1, crate::render::code_span(cmd)))
        .collect()
}

/// Under the sandbox, a holdout check that reads the holdout and runs the project's code
/// unmasked (`unmasked`, from [`holdout_unmasked_checks`]) is refused, unless the loop says
/// `holdout-unmasked = true` (`--holdout-unmasked`): the code it runs could read the
/// answers while it is judged. Without the sandbox nothing is sealed anyway (said apart).
fn holdout_masking_refusal(cfg: &LoopConfig, unmasked: &[String], sandboxed: bool) -> Result<()> {
    if unmasked.is_empty() || !sandboxed || cfg.holdout_unmasked {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "{} read(s) the holdout ($ORBIT_HOLDOUT_DIR) and run(s) the project's code without run_hidden: under the sandbox that code could read the answers while it is judged. Run the project's code through run_hidden CMD [ARG...] (docs/guide.md, Holdout checks); or leave $ORBIT_HOLDOUT_DIR out of the check, which then runs masked as a whole; or, where the code cannot be masked (a hidden test file that imports the project), accept it with --holdout-unmasked (loop.toml: holdout-unmasked = true)",
        unmasked.join(", ")
    )))
}

/// The files of a loop directory's holdout/ (name, content), for the checks that name them.
fn loop_holdout_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = fs::read_dir(dir.join(HOLDOUT_DIR)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            Some((name, fs::read(e.path()).ok()?))
        })
        .collect()
}

/// The files given with `--holdout-file`: (name in holdout/, content). Each must be a
/// regular file with a plain name, not one git tracks in the repository (the workspace, a
/// checkout of it, would show it to the agent), and the names must differ.
fn read_holdout_files(
    given: &[PathBuf],
    cfg: &LoopConfig,
    repo: &Path,
) -> Result<Vec<(String, Vec<u8>)>> {
    if !given.is_empty() && cfg.holdout.is_empty() {
        return Err(Error::Usage(
            "--holdout-file needs a check that reads it: add --holdout 'CMD' (it finds the files in $ORBIT_HOLDOUT_DIR)".into(),
        ));
    }
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for path in given {
        let bad = |why: String| Err(Error::path(path, format!("--holdout-file: {why}")));
        let meta = match fs::metadata(path) {
            Ok(m) => m,
            Err(e) => return bad(format!("cannot read it ({e})")),
        };
        if !meta.is_file() {
            return bad(
                "is not a regular file: give a file (copy a folder's files one by one)".into(),
            );
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if name.is_empty()
            || name.starts_with('.')
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return bad(
                "its name must be letters, digits, '.', '_' and '-', not starting with '.': rename the file".into(),
            );
        }
        if out.iter().any(|(n, _)| *n == name) {
            return bad(format!(
                "a second file named {name}: holdout/ keeps one file per name; rename one"
            ));
        }
        if tracked_in(repo, path) {
            return bad(
                "git tracks it in this repository, so the loop's workspace (a checkout) would show it to the agent: keep holdout files outside the repository, or untracked".into(),
            );
        }
        out.push((name, fsx::read(path)?));
    }
    Ok(out)
}

/// Whether git tracks `path` in the repository `repo`.
fn tracked_in(repo: &Path, path: &Path) -> bool {
    let Ok(real) = fs::canonicalize(path) else {
        return false;
    };
    let Ok(rel) = real.strip_prefix(repo) else {
        return false;
    };
    std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["ls-files", "--error-unmatch", "--"])
        .arg(rel)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn write_new_loop(
    dir: &Path,
    cfg: &LoopConfig,
    secrets: &NotifySecrets,
    files: &[(&'static str, String, bool)],
    holdout_files: &[(String, Vec<u8>)],
) -> Result<()> {
    let parent = dir
        .parent()
        .ok_or_else(|| Error::path(dir, "has no parent directory"))?;
    fs::create_dir_all(parent)
        .map_err(|e| Error::io(format!("cannot create {}", parent.display()), e))?;
    let base = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{base}.orbit-init.{}", std::process::id()));
    let result = populate(&tmp, cfg, secrets, files, holdout_files).and_then(|_| {
        if dir.exists() {
            fs::remove_dir(dir)
                .map_err(|e| Error::io(format!("cannot replace {}", dir.display()), e))?;
        }
        fs::rename(&tmp, dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        fsx::sync_dir(parent);
        Ok(())
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

fn populate(
    tmp: &Path,
    cfg: &LoopConfig,
    secrets: &NotifySecrets,
    files: &[(&'static str, String, bool)],
    holdout_files: &[(String, Vec<u8>)],
) -> Result<()> {
    fs::create_dir(tmp).map_err(|e| Error::io(format!("cannot create {}", tmp.display()), e))?;
    let now = fsx::now_epoch();
    let mut pinned: Vec<(String, String)> = Vec::new();
    let toml = cfg.to_toml();
    let mut all: Vec<(&str, &str, bool)> =
        files.iter().map(|(n, t, x)| (*n, t.as_str(), *x)).collect();
    all.push(("loop.toml", &toml, false));
    // The orbit the runner calls to measure a DONE's change, pinned (contract 6.2).
    let orbit_pin = match cfg.adequacy {
        crate::config::Adequacy::Off => None,
        _ => Some(crate::adequacy::orbit_pin()?),
    };
    if let Some(pin) = &orbit_pin {
        all.push((crate::adequacy::ORBIT_PIN, pin, false));
    }
    let pins_dir = tmp.join(".pins");
    fs::create_dir(&pins_dir).map_err(|e| Error::io("cannot create .pins", e))?;
    // The directory is not visible until it is renamed into place: each file is written
    // once (data synced) and each directory synced once at the end.
    for (name, text, exec) in &all {
        fsx::write_new(
            &tmp.join(name),
            text.as_bytes(),
            if *exec { 0o755 } else { 0o644 },
        )?;
        if pins::INIT_PINNED.contains(name) {
            pinned.push(pins::pin_bytes(name, text.as_bytes()));
            fsx::write_new(&pins_dir.join(name), text.as_bytes(), 0o644)?;
        }
    }
    pinned.sort_by_key(|(_, p)| pins::INIT_PINNED.iter().position(|x| x == p));
    // The holdout checks' files: pinned at init like the scripts (a change is a reward
    // hack), with their baseline copies for `orbit recover --restore-pinned`.
    if !holdout_files.is_empty() {
        let held = tmp.join(HOLDOUT_DIR);
        let held_pins = pins_dir.join(HOLDOUT_DIR);
        for d in [&held, &held_pins] {
            fs::create_dir(d)
                .map_err(|e| Error::io(format!("cannot create {}", d.display()), e))?;
        }
        for (name, bytes) in holdout_files {
            fsx::write_new(&held.join(name), bytes, 0o644)?;
            fsx::write_new(&held_pins.join(name), bytes, 0o644)?;
            pinned.push(pins::pin_bytes(&format!("{HOLDOUT_DIR}/{name}"), bytes));
        }
        fsx::sync_dir(&held);
        fsx::sync_dir(&held_pins);
    }
    fsx::write_new(
        &tmp.join("pins.sha256"),
        pins::print(&pinned).as_bytes(),
        0o644,
    )?;
    fsx::write_new(&tmp.join("notes.md"), render::NOTES_MD.as_bytes(), 0o644)?;
    fsx::write_new(&tmp.join(".gitignore"), LOOP_GITIGNORE.as_bytes(), 0o644)?;
    if !secrets.is_empty() {
        // Created 0600 (the umask can only narrow it), and set again in case it did not.
        let path = tmp.join(NOTIFY_SECRETS);
        fsx::write_new(&path, secrets.print().as_bytes(), 0o600)?;
        fsx::set_mode(&path, 0o600)?;
    }
    fsx::write_new(
        &tmp.join("progress.md"),
        initial_progress(cfg, now).as_bytes(),
        0o644,
    )?;
    let state = State::ready(&cfg.contract_version, now);
    let text = state.print();
    fsx::write_new(&tmp.join("state.env"), text.as_bytes(), 0o644)?;
    fsx::write_new(
        &tmp.join("state.env.sha256"),
        Sidecar::for_state(&text, state.generation)
            .print()
            .as_bytes(),
        0o644,
    )?;
    fsx::sync_dir(&pins_dir);
    fsx::sync_dir(tmp);
    Ok(())
}

/// The flags of `orbit init` that find the loop (`--force` says what to do with it): every
/// other flag sets something loop.toml holds.
const LOCATING_FLAGS: [&str; 4] = ["goal", "goal-file", "dir", "force"];

/// The flags given (`--max-iterations`, `--verify`, ...) that set something loop.toml holds:
/// what `orbit init --force`, which renders from loop.toml, refuses. Read from the flags
/// themselves, so a setting that gets a flag is refused with no list to extend: a settings
/// row of the contract's table, the loop's checks, its engine and agent command, its
/// channels.
fn setting_flags_given(args: &InitArgs) -> Vec<String> {
    let value = serde_json::to_value(args).expect("the flags serialize");
    let flags = value.as_object().expect("the flags serialize to a map");
    flags
        .iter()
        .filter(|(name, _)| !LOCATING_FLAGS.contains(&name.as_str()))
        .filter(|(_, v)| match v {
            serde_json::Value::Null | serde_json::Value::Bool(false) => false,
            serde_json::Value::Array(items) => !items.is_empty(),
            _ => true,
        })
        .map(|(name, _)| format!("--{name}"))
        .collect()
}

/// `orbit init --force`: re-render the scripts and prompt from loop.toml; state.env,
/// progress.md, events.jsonl, goal.md and the iteration history stay untouched.
fn rerender(args: &InitArgs, cwd: &Path, repo: &Path) -> Result<InitOutcome> {
    let given = setting_flags_given(args);
    if !given.is_empty() {
        return Err(Error::Usage(format!(
            "--force re-renders the scripts from the loop's loop.toml: change settings there, not with {}, then run `orbit init --force --dir DIR`",
            given.join(", ")
        )));
    }
    let dir_arg = match (&args.dir, &args.goal, &args.goal_file) {
        (Some(d), _, _) => d.clone(),
        (None, None, None) => {
            return Err(Error::Usage(
                "orbit init --force needs the loop: --dir DIR".into(),
            ));
        }
        _ => repo.join(".orbit").join(read_goal(args)?.slug()),
    };
    let (dir, rel) = resolve_dir(cwd, repo, &dir_arg)?;
    let cfg_path = dir.join("loop.toml");
    if !cfg_path.is_file() {
        return Err(Error::path(
            &dir,
            "holds no loop.toml: it is not an orbit loop (run orbit init GOAL to make one)",
        ));
    }
    for entry in walkdir::WalkDir::new(&dir).follow_links(false) {
        let entry = entry.map_err(|e| Error::path(&dir, format!("cannot walk: {e}")))?;
        if entry.path_is_symlink() {
            return Err(Error::path(
                entry.path(),
                "is a symlink: nothing under a loop directory may be one",
            ));
        }
    }
    if crate::locate::lock_held(&dir) {
        return Err(Error::Refused(format!(
            "a runner holds {}/.run-loop.lock: stop it first (the scripts must not change under a running loop)",
            dir.display()
        )));
    }
    let cfg = LoopConfig::load(&cfg_path)?;
    let sandboxed = match cfg.sandbox {
        crate::config::Sandbox::None => false,
        crate::config::Sandbox::Bwrap => true,
        crate::config::Sandbox::Auto => crate::sandbox::probe().is_ok(),
    };
    let unmasked = holdout_unmasked_checks(&cfg, &loop_holdout_files(&dir));
    holdout_masking_refusal(&cfg, &unmasked, sandboxed)?;
    // A loop that already runs keeps working: a protect glob that stopped matching (or that
    // an older orbit let through) is said, not refused; its pins are its first run's.
    for g in &cfg.protect {
        if let Some(why) = protect_glob_problem(repo, g) {
            eprintln!(
                "orbit: warning: protect glob '{}' in {rel}/loop.toml: {why}. The loop keeps it (its pinned files and pins.sets are its first run's); fix it in loop.toml to protect what you mean",
                g.escape_debug()
            );
        }
    }
    for script in unprotected_judge_scripts(&cfg) {
        let ran = dir.join(".baseline-commit").is_file();
        eprintln!(
            "orbit: warning: judge-cmd in {rel}/loop.toml runs the repository script {script}, which nothing protects: the judge runs it from the workspace, where the agent can rewrite it to approve anything. Add '{}' to protect in loop.toml, then `orbit init --force --dir {rel}`{}",
            autoprotect::escape(&script),
            if ran {
                "; this loop has run, and its protected paths are those of its first run: render a new loop for the protection to hold"
            } else {
                " (before the loop's first run, which pins it)"
            }
        );
    }
    let files = render::rerender_loop(&cfg, &dir, &rel)?;
    let mut new_pins: Vec<(String, String)> = Vec::new();
    fs::create_dir_all(dir.join(".pins")).map_err(|e| Error::io("cannot create .pins", e))?;
    for (name, text, exec) in &files {
        let path = dir.join(name);
        if *exec {
            fsx::write_atomic_exec(&path, text.as_bytes())?;
        } else {
            fsx::write_atomic(&path, text.as_bytes())?;
        }
        fsx::write_atomic(&dir.join(".pins").join(name), text.as_bytes())?;
        new_pins.push(pins::pin_bytes(name, text.as_bytes()));
    }
    let toml_bytes = fsx::read(&cfg_path)?;
    fsx::write_atomic(&dir.join(".pins").join("loop.toml"), &toml_bytes)?;
    new_pins.push(pins::pin_bytes("loop.toml", &toml_bytes));
    // The orbit that re-renders is the one the runner calls from now on (contract 6.2).
    let pin_path = dir.join(crate::adequacy::ORBIT_PIN);
    if cfg.adequacy == crate::config::Adequacy::Off {
        let _ = fs::remove_file(&pin_path);
    } else {
        let pin = crate::adequacy::orbit_pin()?;
        fsx::write_atomic(&pin_path, pin.as_bytes())?;
        fsx::write_atomic(
            &dir.join(".pins").join(crate::adequacy::ORBIT_PIN),
            pin.as_bytes(),
        )?;
        new_pins.push(pins::pin_bytes(crate::adequacy::ORBIT_PIN, pin.as_bytes()));
    }
    // Keep the pins the first run added (goal.md, protected paths, permission files).
    let old = fs::read(dir.join("pins.sha256")).unwrap_or_default();
    let (old_pins, _) = pins::parse(&old);
    new_pins.sort_by_key(|(_, p)| pins::INIT_PINNED.iter().position(|x| x == p));
    for p in old_pins {
        if !pins::INIT_PINNED.contains(&p.path.as_str()) {
            new_pins.push((p.sha256, p.path));
        }
    }
    fsx::write_atomic(&dir.join("pins.sha256"), pins::print(&new_pins).as_bytes())?;
    if !dir.join(".gitignore").exists() {
        fsx::write_atomic(&dir.join(".gitignore"), LOOP_GITIGNORE.as_bytes())?;
    }
    if !cfg.notify_webhook.is_empty() || !cfg.notify_ntfy.is_empty() {
        eprintln!(
            "orbit: loop.toml holds channel URLs or topics (notify-webhook, notify-ntfy), which are secrets: \
             move them to {rel}/{NOTIFY_SECRETS} (mode 0600, lines webhook=URL or ntfy=TOPIC) and re-render"
        );
    }
    println!(
        "orbit: re-rendered the scripts of {rel} from loop.toml (state and history untouched)"
    );
    Ok(InitOutcome {
        dir,
        rerendered: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::{CommandFactory, Parser};

    #[test]
    fn a_suggested_pytest_check_runs_where_the_applied_setup_installs_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let put = |f: &str| fs::write(dir.path().join(f), "").unwrap();
        let check = |cmd: &str| in_project_env(dir.path(), cmd.to_string());
        put("pyproject.toml");
        assert_eq!(check("python3 -m pytest"), ".venv/bin/python -m pytest");
        assert_eq!(check("cargo test"), "cargo test");
        put("poetry.lock");
        assert_eq!(check("python3 -m pytest"), ".venv/bin/python -m pytest");
        put("uv.lock");
        assert_eq!(check("python3 -m pytest"), "uv run python -m pytest");
        let bare = tempfile::tempdir().unwrap();
        fs::write(bare.path().join("pytest.ini"), "").unwrap();
        assert_eq!(
            in_project_env(bare.path(), "python3 -m pytest".into()),
            "python3 -m pytest",
            "no setup makes an environment: the system's python3"
        );
    }

    fn parsed(extra: &[&str]) -> InitArgs {
        let argv = ["orbit", "init", "--force", "--dir", ".orbit/x", "goal"];
        match Cli::try_parse_from(argv.iter().chain(extra))
            .unwrap()
            .command
        {
            Command::Init(args) => *args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn force_refuses_every_flag_that_sets_what_loop_toml_holds() {
        assert!(
            setting_flags_given(&parsed(&[])).is_empty(),
            "the loop alone"
        );
        let cmd = Cli::command();
        let init = cmd.find_subcommand("init").unwrap();
        let mut refused = Vec::new();
        for arg in init.get_arguments() {
            let Some(long) = arg.get_long() else {
                assert!(LOCATING_FLAGS.contains(&arg.get_id().as_str()), "{arg:?}");
                continue;
            };
            // --dry-run cannot be given with --force at all (clap refuses the pair).
            if LOCATING_FLAGS.contains(&long) || long == "help" || long == "dry-run" {
                continue;
            }
            let flag = format!("--{long}");
            let value = arg
                .get_possible_values()
                .first()
                .map_or_else(|| "1".to_string(), |v| v.get_name().to_string());
            // A flag that needs another (--setup-input names what keys a --setup) is given
            // with it, and both are refused.
            let with: &[&str] = if long == "setup-input" {
                &["--setup", "make"]
            } else {
                &[]
            };
            let mut args = with.to_vec();
            args.push(&flag);
            if arg.get_action().takes_values() {
                args.push(&value);
            }
            let given = setting_flags_given(&parsed(&args));
            let mut expected = vec![flag.clone()];
            expected.extend(with.first().map(|w| w.to_string()));
            expected.sort();
            let mut given_sorted = given.clone();
            given_sorted.sort();
            assert_eq!(given_sorted, expected, "{flag} with --force");
            refused.push(long);
        }
        // Every setting of the contract's table that `orbit init` takes a flag for is among them.
        for s in crate::contract::SETTINGS {
            if init.get_arguments().any(|a| a.get_long() == Some(s.key)) {
                assert!(refused.contains(&s.key), "{}", s.key);
            }
        }
        assert!(refused.contains(&"candidates") && refused.contains(&"verify"));
    }

    #[test]
    fn the_help_of_candidates_gives_the_tables_bound() {
        let crate::contract::SettingKind::Count { max, .. } =
            crate::contract::setting("candidates").kind
        else {
            panic!("candidates is a count");
        };
        let cmd = Cli::command();
        let arg = cmd
            .find_subcommand("init")
            .and_then(|init| {
                init.get_arguments()
                    .find(|a| a.get_long() == Some("candidates"))
            })
            .unwrap();
        let help = arg.get_help().unwrap().to_string();
        assert!(help.contains(&format!("at most {max}]")), "{help}");
    }
}
