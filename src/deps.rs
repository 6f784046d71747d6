//! What a project's dependencies need so that its checks run under the sandbox's network
//! allowlist: the ecosystems `orbit init` finds in the repository (from their lockfiles
//! and manifests), each with the setup that fetches what the checks need (run with the
//! network, on the untouched tree, as the user's command) and the ecosystem's own switches
//! that make the checks run offline afterwards (loop.toml `offline-env`).

use std::path::Path;

/// One ecosystem found in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ecosystem {
    /// Its name, as init says it: cargo, npm, pnpm, yarn, uv, poetry, pip, go.
    pub name: &'static str,
    /// The file it was found from.
    pub found: String,
    /// The setup command: fetches what the checks need, with the network.
    pub setup: String,
    /// The variables (NAME=VALUE) that make the ecosystem's tools run offline afterwards.
    pub offline: Vec<&'static str>,
}

/// The offline switches of each ecosystem: the checks (and the agent, and a setup run on a
/// tree the agent made) find what the setup fetched in the ecosystem's cache (under HOME,
/// which the sandbox shows them read-only) or in the checkout, and ask no registry.
const CARGO_OFFLINE: &[&str] = &["CARGO_NET_OFFLINE=true"];
const NPM_OFFLINE: &[&str] = &["npm_config_offline=true"];
const YARN_OFFLINE: &[&str] = &["npm_config_offline=true", "YARN_ENABLE_OFFLINE_MODE=1"];
/// uv locks its cache even to read it, so its cache is the run's private /tmp (what the
/// setup installed is in the checkout's .venv).
const UV_OFFLINE: &[&str] = &[
    "UV_OFFLINE=1",
    "UV_FROZEN=1",
    "UV_CACHE_DIR=/tmp/.orbit-uv-cache",
];
const PIP_OFFLINE: &[&str] = &["PIP_NO_INDEX=1"];
/// Go's module cache (GOMODCACHE, under HOME) is read where it is; its build cache must be
/// writable, so it is the run's private /tmp.
const GO_OFFLINE: &[&str] = &[
    "GOFLAGS=-mod=mod",
    "GOPROXY=off",
    "GOCACHE=/tmp/.orbit-go-build",
];

/// Maven's: `MAVEN_ARGS` holds arguments every `mvn` (3.9 and later) adds to its command
/// line; an older Maven ignores it, and reads what the setup put in its local repository
/// (under HOME, read-only to the checks) without asking a remote repository for an artifact
/// it holds, so the checks run without the network there too.
const MAVEN_OFFLINE: &[&str] = &["MAVEN_ARGS=--offline"];

/// Maven's setup: the build's test phase once, its test failures ignored. What the checks
/// need is more than the project's dependencies and plugins (`mvn dependency:go-offline`):
/// surefire fetches its test provider (surefire-junit4, -junit-platform) only when tests run.
pub const MAVEN_SETUP: &str = "mvn -B -Dmaven.test.failure.ignore=true test";

/// The ecosystems of the repository at `repo`, in a fixed order (one per language: a lockfile
/// is preferred to a manifest). Gradle is not among them: its offline switch is a flag of
/// each command (`gradle --offline`), not a variable.
pub fn detect(repo: &Path) -> Vec<Ecosystem> {
    let has = |f: &str| repo.join(f).is_file();
    let eco = |name, found: &str, setup: &str, offline: &[&'static str]| Ecosystem {
        name,
        found: found.to_string(),
        setup: setup.to_string(),
        offline: offline.to_vec(),
    };
    let mut out = Vec::new();
    if has("Cargo.lock") || has("Cargo.toml") {
        let found = if has("Cargo.lock") {
            "Cargo.lock"
        } else {
            "Cargo.toml"
        };
        out.push(eco("cargo", found, "cargo fetch", CARGO_OFFLINE));
    }
    if has("package-lock.json") || has("npm-shrinkwrap.json") {
        let found = if has("package-lock.json") {
            "package-lock.json"
        } else {
            "npm-shrinkwrap.json"
        };
        out.push(eco(
            "npm",
            found,
            "npm ci --no-audit --no-fund",
            NPM_OFFLINE,
        ));
    } else if has("pnpm-lock.yaml") {
        out.push(eco(
            "pnpm",
            "pnpm-lock.yaml",
            "pnpm install --frozen-lockfile",
            NPM_OFFLINE,
        ));
    } else if has("yarn.lock") {
        out.push(eco(
            "yarn",
            "yarn.lock",
            "yarn install --frozen-lockfile",
            YARN_OFFLINE,
        ));
    }
    let requirements = requirements_files(repo);
    if has("uv.lock") {
        out.push(eco("uv", "uv.lock", "uv sync --frozen", UV_OFFLINE));
    } else if has("poetry.lock") {
        out.push(eco(
            "poetry",
            "poetry.lock",
            "POETRY_VIRTUALENVS_IN_PROJECT=true poetry install --no-interaction",
            PIP_OFFLINE,
        ));
    } else if !requirements.is_empty() {
        let args: Vec<String> = requirements
            .iter()
            .map(|f| format!("-r {}", crate::shell::paste_word(f)))
            .collect();
        out.push(eco(
            "pip",
            &requirements.join(", "),
            &format!(
                "python3 -m venv .venv && .venv/bin/pip install --disable-pip-version-check {}",
                args.join(" ")
            ),
            PIP_OFFLINE,
        ));
    } else if has("pyproject.toml") || has("setup.py") {
        let found = if has("pyproject.toml") {
            "pyproject.toml"
        } else {
            "setup.py"
        };
        out.push(eco(
            "pip",
            found,
            "python3 -m venv .venv && .venv/bin/pip install --disable-pip-version-check -e .",
            PIP_OFFLINE,
        ));
    }
    if has("go.sum") || has("go.mod") {
        let found = if has("go.sum") { "go.sum" } else { "go.mod" };
        out.push(eco("go", found, "go mod download", GO_OFFLINE));
    }
    if has("pom.xml") {
        out.push(eco("maven", "pom.xml", MAVEN_SETUP, MAVEN_OFFLINE));
    }
    out
}

/// The requirements files at the top of `repo` (requirements.txt first, then the others
/// named requirements*.txt in name order).
fn requirements_files(repo: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with("requirements") && n.ends_with(".txt"))
                .collect()
        })
        .unwrap_or_default();
    names.sort_by_key(|n| (n != "requirements.txt", n.clone()));
    names
}

/// Every variable of `ecosystems`' offline switches, each name once (the first wins).
pub fn offline_env(ecosystems: &[Ecosystem]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in ecosystems.iter().flat_map(|e| e.offline.iter()) {
        let name = v.split('=').next().unwrap_or(v);
        if !out.iter().any(|o| o.split('=').next() == Some(name)) {
            out.push((*v).to_string());
        }
    }
    out
}

/// An `offline-env` entry, checked: NAME=VALUE, NAME a variable's name that is not one the
/// shell or the loader obeys (PATH, LD_*, BASH_ENV, ...), VALUE without whitespace or control
/// characters. The reason otherwise.
pub fn check_offline_var(entry: &str) -> std::result::Result<(), String> {
    let Some((name, value)) = entry.split_once('=') else {
        return Err("is not NAME=VALUE".into());
    };
    let name_ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !name_ok {
        return Err(format!(
            "'{name}' is not the name of an environment variable"
        ));
    }
    const OBEYED: [&str; 9] = [
        "PATH",
        "HOME",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "CDPATH",
        "PS4",
    ];
    if OBEYED.contains(&name) || name.starts_with("LD_") || name.starts_with("ORBIT_") {
        return Err(format!(
            "'{name}' is a variable the shell, the loader or orbit itself obeys"
        ));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("holds whitespace or a control character".into());
    }
    Ok(())
}

/// The files the setup of `found` reads, which key its cache (loop.toml `setup-inputs`), or
/// why it is not cached. The cached output is copied into another checkout, so it must
/// depend on these files alone and name no path of the tree it was made in: node_modules
/// (npm, pnpm, yarn) without lifecycle scripts of the project's own (they run its code) or
/// workspaces (their members' manifests are read too); cargo and go with their lockfile
/// (what they fetch is under HOME). A Python virtual environment names its interpreter by
/// absolute path, so uv, poetry and pip are never cached.
pub fn setup_inputs(repo: &Path, found: &[Ecosystem]) -> Result<Vec<String>, String> {
    let mut inputs: Vec<String> = Vec::new();
    let mut add = |files: &[&str]| {
        for f in files {
            if !inputs.iter().any(|i| i == f) {
                inputs.push((*f).to_string());
            }
        }
    };
    for e in found {
        match e.name {
            "npm" | "pnpm" | "yarn" => {
                node_cacheable(repo)?;
                let extra: &[&str] = match e.name {
                    "npm" => &[".npmrc"],
                    "pnpm" => &[".npmrc", "pnpm-workspace.yaml"],
                    _ => &[".npmrc", ".yarnrc", ".yarnrc.yml"],
                };
                add(&[e.found.as_str(), "package.json"]);
                add(extra);
            }
            "cargo" if e.found == "Cargo.lock" => add(&["Cargo.lock", "Cargo.toml"]),
            "go" if e.found == "go.sum" => add(&["go.sum", "go.mod"]),
            "maven" => {
                return Err(
                    "maven: its setup builds the project (target/), and what it fetched is under HOME"
                        .into(),
                );
            }
            "cargo" | "go" => {
                return Err(format!(
                    "{} without its lockfile: the setup writes one",
                    e.name
                ));
            }
            other => {
                return Err(format!(
                    "{other}: a virtual environment names its interpreter by absolute path, so it is made in each checkout"
                ));
            }
        }
    }
    Ok(inputs)
}

/// Whether the project's package.json lets its node_modules be copied from one checkout to
/// another: no lifecycle script of its own that `npm ci` runs, no workspaces.
fn node_cacheable(repo: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(repo.join("package.json"))
        .map_err(|_| "no package.json to key the cache".to_string())?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|_| "package.json does not parse".to_string())?;
    if json.get("workspaces").is_some() || repo.join("pnpm-workspace.yaml").exists() {
        return Err("package.json has workspaces: their manifests are read too".into());
    }
    if let Some(scripts) = json.get("scripts").and_then(|s| s.as_object()) {
        for hook in [
            "preinstall",
            "install",
            "postinstall",
            "prepublish",
            "preprepare",
            "prepare",
            "postprepare",
        ] {
            if scripts.contains_key(hook) {
                return Err(format!(
                    "package.json's {hook} script runs the project's code in the setup"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_is_keyed_by_the_lockfile_and_manifest_or_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let put = |f: &str, t: &str| std::fs::write(dir.path().join(f), t).unwrap();
        put("package-lock.json", "{}");
        put("package.json", r#"{"scripts":{"test":"node t.js"}}"#);
        let found = detect(dir.path());
        assert_eq!(
            setup_inputs(dir.path(), &found).unwrap(),
            ["package-lock.json", "package.json", ".npmrc"]
        );
        put(
            "package.json",
            r#"{"scripts":{"postinstall":"node build.js"}}"#,
        );
        let why = setup_inputs(dir.path(), &detect(dir.path())).unwrap_err();
        assert!(why.contains("postinstall"), "{why}");
        put("package.json", "{}");
        put("uv.lock", "");
        let why = setup_inputs(dir.path(), &detect(dir.path())).unwrap_err();
        assert!(why.contains("absolute path"), "{why}");
    }

    fn names(dir: &Path) -> Vec<(&'static str, String, String)> {
        detect(dir)
            .into_iter()
            .map(|e| (e.name, e.found, e.setup))
            .collect()
    }

    #[test]
    fn each_ecosystem_is_found_from_its_lockfile_with_its_setup_and_offline_switches() {
        let dir = tempfile::tempdir().unwrap();
        let touch = |f: &str| std::fs::write(dir.path().join(f), "").unwrap();
        assert!(detect(dir.path()).is_empty());
        touch("Cargo.toml");
        touch("package.json");
        touch("pnpm-lock.yaml");
        touch("pyproject.toml");
        touch("uv.lock");
        touch("go.mod");
        touch("go.sum");
        touch("pom.xml");
        let found = detect(dir.path());
        assert_eq!(
            names(dir.path()),
            [
                ("cargo", "Cargo.toml".into(), "cargo fetch".into()),
                (
                    "pnpm",
                    "pnpm-lock.yaml".into(),
                    "pnpm install --frozen-lockfile".into()
                ),
                ("uv", "uv.lock".into(), "uv sync --frozen".into()),
                ("go", "go.sum".into(), "go mod download".into()),
                ("maven", "pom.xml".into(), MAVEN_SETUP.into()),
            ]
        );
        assert_eq!(
            offline_env(&found),
            [
                "CARGO_NET_OFFLINE=true",
                "npm_config_offline=true",
                "UV_OFFLINE=1",
                "UV_FROZEN=1",
                "UV_CACHE_DIR=/tmp/.orbit-uv-cache",
                "GOFLAGS=-mod=mod",
                "GOPROXY=off",
                "GOCACHE=/tmp/.orbit-go-build",
                "MAVEN_ARGS=--offline",
            ]
        );
        touch("package-lock.json");
        touch("requirements-dev.txt");
        touch("requirements.txt");
        std::fs::remove_file(dir.path().join("uv.lock")).unwrap();
        let found = names(dir.path());
        assert_eq!(found[1].2, "npm ci --no-audit --no-fund");
        assert_eq!(
            found[2].2,
            "python3 -m venv .venv && .venv/bin/pip install --disable-pip-version-check -r requirements.txt -r requirements-dev.txt"
        );
    }

    #[test]
    fn an_offline_variable_is_name_equals_value_and_never_one_the_shell_obeys() {
        assert!(check_offline_var("CARGO_NET_OFFLINE=true").is_ok());
        assert!(check_offline_var("GOFLAGS=-mod=mod").is_ok());
        for bad in [
            "CARGO_NET_OFFLINE",
            "1X=1",
            "PATH=/tmp",
            "LD_PRELOAD=/x.so",
            "BASH_ENV=/x",
            "ORBIT_PHASE=x",
            "A=b c",
            "A=b\nc",
        ] {
            assert!(check_offline_var(bad).is_err(), "{bad}");
        }
    }
}
