//! `orbit schedule --queue --kubernetes | --github-actions`: the queue across machines.
//! The rendered pods' commands run here for real, each in a directory of its own standing
//! for its pod (its clone, its HOME), against a local bare remote: the only thing they share.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use super::{
    URL, at, bare_remote, kubernetes_validate, run_step_script, strings, workflow_validate,
    yaml_docs,
};
use crate::queue::{MAKE_OWN_FILE, Q, queue};
use crate::support::*;

/// Runs git in `dir`; its trimmed output (panics on failure).
fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = command("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert_ok(&out, &format!("git {}", args.join(" ")));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A queue of `tasks` (each writes its own file; its verifier checks that file), the task
/// files committed on main, and `orbit` on the PATH the pods get.
fn fleet_queue(body: &str, tasks: &[&str]) -> Q {
    let q = queue(body);
    for t in tasks {
        q.add(
            t,
            &format!("Write {t}.txt"),
            &format!("test -f {t}.txt"),
            &[],
        );
    }
    q.repo.git(&["add", ".orbit/queue/"]);
    q.repo
        .git(&["reset", "-q", "--", ".orbit/queue/queue.json"]);
    q.repo.git(&["commit", "-q", "-m", "the queue"]);
    std::os::unix::fs::symlink(orbit_bin(), q.repo.bin.path().join("orbit")).unwrap();
    q
}

/// A pod: `argv` (the container's command, `/work` its own directory `vol`) run with the
/// container's HOME under `vol`, no global git configuration but its own, and `extra`.
fn pod(q: &Q, vol: &Path, argv: &[String], extra: &[(&str, &str)]) -> Output {
    fs::create_dir_all(vol).unwrap();
    let mut cmd = command(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(vol)
        .env("HOME", vol.join("home"))
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_CONFIG_GLOBAL")
        .env("PATH", q.repo.path_env())
        .env("RETRY_BASE_DELAY", "0")
        .env("KILL_GRACE", "1");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    run_bounded(cmd, Duration::from_secs(600))
}

/// The container command of `doc`'s pod at `path`, its clone URL made the local remote.
fn command_of(doc: &Value, path: &str, remote: &Path) -> Vec<String> {
    strings(&at(doc, path)["command"])
        .into_iter()
        .map(|a| {
            if a == URL {
                remote.display().to_string()
            } else {
                a
            }
        })
        .collect()
}

/// The file `path` on branch `branch` of the bare `remote`.
fn on_remote(remote: &Path, branch: &str, path: &str) -> Option<String> {
    let out = command("git")
        .arg("-C")
        .arg(remote)
        .args(["show", &format!("{branch}:{path}")])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Three pods, each in a clone of its own, run one task's attempt and push; a fourth,
/// hostile, pushes a branch that does the work with another task's genuine envelope as its
/// note. The merge step, in a fourth clone, lands the three (each verified, merged, its
/// checks green on the merged tree) and refuses the forgery as a failed attempt with its
/// failure code in the task's section; the remote's integration branch holds the three
/// merges, each with its envelope, and the tasks' records.
#[test]
fn pods_in_separate_clones_push_attempts_and_the_merge_step_lands_only_verified_ones() {
    // The agent of `sneaky` also rewrites another task's file in its branch.
    let q = fleet_queue(
        &format!(
            "if [[ $task == sneaky ]]; then printf '**Status:** done\\n' >> .orbit/queue/one.md; fi\n{MAKE_OWN_FILE}"
        ),
        &["one", "two", "three", "forged", "bare", "sneaky"],
    );
    let docs = yaml_docs(
        &String::from_utf8(
            q.repo
                .orbit(&[
                    "schedule",
                    "--queue",
                    "--kubernetes",
                    "--image",
                    "img",
                    "--repo-url",
                    URL,
                    "--jobs",
                    "3",
                ])
                .stdout,
        )
        .unwrap(),
    );
    assert_eq!(docs.len(), 2, "{docs:?}");
    let job = &docs[0];
    assert_eq!(job["kind"], "Job");
    assert_eq!(at(job, "spec.completionMode"), "Indexed");
    assert_eq!(at(job, "spec.completions"), 6);
    assert_eq!(at(job, "spec.parallelism"), 3);
    assert_eq!(at(job, "spec.backoffLimitPerIndex"), 0);
    assert_eq!(docs[1]["kind"], "CronJob");

    let work = tempfile::tempdir().unwrap();
    let remote = bare_remote(&q.repo, work.path());
    let attempt = command_of(job, "spec.template.spec.containers.0", &remote);
    let tasks: Vec<&str> = attempt[4].split(' ').collect();
    assert_eq!(tasks.len(), 6, "{attempt:?}");
    // The pods of the three honest tasks and of sneaky, one clone each.
    for (i, t) in tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| !["forged", "bare"].contains(*t))
    {
        let vol = work.path().join(format!("pod-{t}"));
        let out = pod(
            &q,
            &vol,
            &attempt,
            &[("JOB_COMPLETION_INDEX", &i.to_string())],
        );
        assert_code(&out, 0, &format!("the pod of {t}"));
        assert!(
            text(&out).contains(&format!("pushed orbit/{t}-a1")),
            "{}",
            text(&out)
        );
        assert!(vol.join("repo/.git").is_dir(), "its own clone");
    }
    for t in ["one", "two", "three"] {
        git_in(
            &remote,
            &["rev-parse", "--verify", &format!("refs/heads/orbit/{t}-a1")],
        );
        git_in(
            &remote,
            &[
                "rev-parse",
                "--verify",
                &format!("refs/notes/orbit-fleet/{t}-a1"),
            ],
        );
    }
    // The hostile pod: the work done, and task one's genuine envelope as its note.
    let evil = work.path().join("pod-forged");
    git_in(
        work.path(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            evil.to_str().unwrap(),
        ],
    );
    git_in(
        &evil,
        &["checkout", "-q", "-b", "orbit/forged-a1", "origin/main"],
    );
    fs::write(evil.join("forged.txt"), "forged\n").unwrap();
    git_in(&evil, &["add", "forged.txt"]);
    git_in(&evil, &["commit", "-q", "-m", "forged work"]);
    git_in(
        &evil,
        &[
            "fetch",
            "-q",
            "origin",
            "refs/notes/orbit-fleet/one-a1:refs/notes/theirs",
        ],
    );
    let one_done = git_in(&remote, &["rev-parse", "orbit/one-a1"]);
    let genuine = git_in(
        &evil,
        &["notes", "--ref=refs/notes/theirs", "show", &one_done],
    );
    assert!(genuine.contains("\"digest\""), "{genuine}");
    git_in(
        &evil,
        &["notes", "--ref=orbit", "add", "-m", &genuine, "HEAD"],
    );
    git_in(
        &evil,
        &[
            "push",
            "-q",
            "origin",
            "orbit/forged-a1",
            "refs/notes/orbit:refs/notes/orbit-fleet/forged-a1",
        ],
    );

    // The sneaky attempt's branch really carries the rewrite of another task's file.
    let sneaky = git_in(&remote, &["show", "orbit/sneaky-a1:.orbit/queue/one.md"]);
    assert!(sneaky.ends_with("**Status:** done"), "{sneaky}");
    // A pod that pushes its work without an envelope.
    let bare = work.path().join("pod-bare");
    git_in(
        work.path(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    git_in(
        &bare,
        &["checkout", "-q", "-b", "orbit/bare-a1", "origin/main"],
    );
    fs::write(bare.join("bare.txt"), "bare\n").unwrap();
    git_in(&bare, &["add", "bare.txt"]);
    git_in(&bare, &["commit", "-q", "-m", "bare work"]);
    git_in(&bare, &["push", "-q", "origin", "orbit/bare-a1"]);

    // The merge step, in a clone of its own.
    let land = command_of(
        &docs[1],
        "spec.jobTemplate.spec.template.spec.containers.0",
        &remote,
    );
    let out = pod(&q, &work.path().join("pod-land"), &land, &[]);
    assert_code(&out, 0, "the merge step");
    let said = text(&out);
    for t in ["one", "two", "three"] {
        assert!(
            said.contains(&format!("{t}: done: attempt 1 merged")),
            "{said}"
        );
    }
    for t in ["forged", "bare", "sneaky"] {
        assert!(
            said.contains(&format!("{t}: attempt 1 of 5 failed")),
            "{said}"
        );
    }

    let integration = "orbit/queue/main";
    let merges = git_in(
        &remote,
        &[
            "log",
            "--first-parent",
            "--merges",
            "--format=%s",
            integration,
        ],
    );
    for t in ["one", "two", "three"] {
        assert!(
            merges.contains(&format!("Merge orbit/{t}-a1 into {integration}")),
            "{merges}"
        );
        assert_eq!(
            on_remote(&remote, integration, &format!("{t}.txt")).as_deref(),
            Some(format!("{t}\n").as_str())
        );
        let task = on_remote(&remote, integration, &format!(".orbit/queue/{t}.md")).unwrap();
        assert!(task.contains("**Status:** done"), "{task}");
        // Its envelope is on the remote, on the merged branch's DONE commit, and verifies
        // in a fresh clone.
        let done = git_in(&remote, &["rev-parse", &format!("orbit/{t}-a1")]);
        git_in(&remote, &["notes", "--ref=orbit", "show", &done]);
    }
    for t in ["forged", "bare", "sneaky"] {
        assert!(!merges.contains(t), "{merges}");
        assert_eq!(on_remote(&remote, integration, &format!("{t}.txt")), None);
    }
    let bare = on_remote(&remote, integration, ".orbit/queue/bare.md").unwrap();
    assert!(
        bare.contains("## Attempt 1 failure") && bare.contains("UNVERIFIED"),
        "{bare}"
    );
    let sneaky = on_remote(&remote, integration, ".orbit/queue/sneaky.md").unwrap();
    assert!(sneaky.contains("## Attempt 1 failure"), "{sneaky}");
    assert!(
        sneaky.contains("changes the queue's own files (.orbit/queue/one.md)"),
        "{sneaky}"
    );
    let one = on_remote(&remote, integration, ".orbit/queue/one.md").unwrap();
    assert_eq!(one.matches("**Status:**").count(), 1, "{one}");
    let forged = on_remote(&remote, integration, ".orbit/queue/forged.md").unwrap();
    assert!(forged.contains("**Status:** ready"), "{forged}");
    assert!(forged.contains("**Attempts:** 1"), "{forged}");
    assert!(forged.contains("## Attempt 1 failure"), "{forged}");
    assert!(forged.contains("INTEGRITY_MISMATCH"), "{forged}");
    assert!(forged.contains("forged work"), "what it tried: {forged}");

    let check = work.path().join("receiver");
    git_in(
        work.path(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            check.to_str().unwrap(),
        ],
    );
    git_in(
        &check,
        &["fetch", "-q", "origin", "refs/notes/orbit:refs/notes/orbit"],
    );
    for t in ["one", "two", "three"] {
        let mut cmd = command(orbit_bin());
        cmd.args(["verify", &format!("origin/orbit/{t}-a1")])
            .current_dir(&check);
        assert_ok(
            &run_bounded(cmd, Duration::from_secs(60)),
            "orbit verify in a fresh clone",
        );
    }

    // The merge step again: nothing new was pushed, nothing moves.
    let head = git_in(&remote, &["rev-parse", integration]);
    let out = pod(&q, &work.path().join("pod-land-2"), &land, &[]);
    assert_code(&out, 0, "the merge step again");
    assert_eq!(git_in(&remote, &["rev-parse", integration]), head);
    assert!(
        text(&out).contains("ready to start: bare, forged, sneaky"),
        "{}",
        text(&out)
    );

    // The workflow's list step, run for real in a checkout of the remote: the matrix is
    // the tasks the merge step left ready.
    let wf = yaml_docs(
        &String::from_utf8(
            q.repo
                .orbit(&[
                    "schedule",
                    "--queue",
                    "--github-actions",
                    "--orbit-git",
                    super::ORBIT_GIT,
                    "--orbit-rev",
                    super::ORBIT_REV,
                ])
                .stdout,
        )
        .unwrap(),
    );
    let list = at(&wf[0], "jobs.list.steps.2");
    assert_eq!(list["id"], "list");
    let runner = work.path().join("runner");
    git_in(
        work.path(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            runner.to_str().unwrap(),
        ],
    );
    let output = work.path().join("github-output");
    let out = run_step_script(
        list["run"].as_str().unwrap(),
        &runner,
        &[
            ("ONTO", "main"),
            ("GITHUB_OUTPUT", output.to_str().unwrap()),
        ],
    );
    assert_ok(&out, "the list step");
    assert_eq!(
        fs::read_to_string(&output).unwrap(),
        "tasks=[\"bare\",\"forged\",\"sneaky\"]\n"
    );
}

/// The merge step judges a task's merge by the verifiers of the tasks it comes after as
/// well as its own: a pushed attempt whose branch undoes such a task's work, its own
/// verifier green, is a failed attempt, and the remote's integration branch keeps the work.
#[test]
fn the_merge_step_runs_the_verifiers_of_the_tasks_an_attempt_comes_after() {
    let q = queue(
        r#"case $task in
base) echo base > base.txt ;;
breaker) rm -f base.txt; echo b > breaker.txt ;;
esac
claim_done"#,
    );
    // base carries init flags of its own: its pod's attempt loop is made with them.
    q.add(
        "base",
        "Write base.txt",
        "test -f base.txt",
        &["--check-jobs", "1", "--memory", "feedback"],
    );
    q.add(
        "breaker",
        "Write breaker.txt",
        "test -f breaker.txt",
        &["--after", "base"],
    );
    q.repo.git(&["add", ".orbit/queue/"]);
    q.repo
        .git(&["reset", "-q", "--", ".orbit/queue/queue.json"]);
    q.repo.git(&["commit", "-q", "-m", "the queue"]);
    std::os::unix::fs::symlink(orbit_bin(), q.repo.bin.path().join("orbit")).unwrap();
    let docs = yaml_docs(
        &String::from_utf8(
            q.repo
                .orbit(&[
                    "schedule",
                    "--queue",
                    "--kubernetes",
                    "--image",
                    "img",
                    "--repo-url",
                    URL,
                ])
                .stdout,
        )
        .unwrap(),
    );
    let work = tempfile::tempdir().unwrap();
    let remote = bare_remote(&q.repo, work.path());
    let mut attempt = command_of(&docs[0], "spec.template.spec.containers.0", &remote);
    assert_eq!(attempt[4], "base", "only base may start: {attempt:?}");
    let land = command_of(
        &docs[1],
        "spec.jobTemplate.spec.template.spec.containers.0",
        &remote,
    );
    let index = [("JOB_COMPLETION_INDEX", "0")];
    assert_ok(
        &pod(&q, &work.path().join("pod-base"), &attempt, &index),
        "the pod of base",
    );
    let found = command("find")
        .arg(work.path().join("pod-base"))
        .args(["-path", "*/.orbit/base-a1/loop.toml"])
        .output()
        .unwrap();
    let found = String::from_utf8_lossy(&found.stdout);
    let toml: toml::Table = fs::read_to_string(found.trim()).unwrap().parse().unwrap();
    assert_eq!(toml["check-jobs"].as_integer(), Some(1), "{toml}");
    assert_eq!(toml["memory"].as_str(), Some("feedback"), "{toml}");
    assert_ok(
        &pod(&q, &work.path().join("pod-land"), &land, &[]),
        "the merge step",
    );
    // The next render's pod: breaker, from the integration branch with base merged.
    attempt[4] = "breaker".into();
    let out = pod(&q, &work.path().join("pod-breaker"), &attempt, &index);
    assert_code(&out, 0, "the pod of breaker");
    // The attack was made: breaker's pushed branch lacks base.txt and holds its own file.
    let listed = git_in(&remote, &["ls-tree", "--name-only", "orbit/breaker-a1"]);
    assert!(
        listed.contains("breaker.txt") && !listed.contains("base.txt"),
        "{listed}"
    );
    let out = pod(&q, &work.path().join("pod-land-2"), &land, &[]);
    assert_code(&out, 0, "the merge step again");
    let integration = "orbit/queue/main";
    let breaker = on_remote(&remote, integration, ".orbit/queue/breaker.md").unwrap();
    assert!(
        breaker.contains("## Attempt 1 failure"),
        "{breaker}\n{}",
        text(&out)
    );
    assert!(
        breaker.contains(
            "the verifier of base (a task this one comes after) fails on the merged tree"
        ),
        "{breaker}"
    );
    assert!(!breaker.contains("**Merged:**"), "{breaker}");
    assert_eq!(
        on_remote(&remote, integration, "base.txt").as_deref(),
        Some("base\n")
    );
    assert_eq!(on_remote(&remote, integration, "breaker.txt"), None);
}

/// The workflow's jobs, run for real, each in a checkout of its own against a local bare
/// remote: the attempt job's agent step (which holds no token) runs the attempt and pushes
/// nothing; its next step pushes the attempt's branch and envelope without running it
/// again (`--only-push`); the land job merges it onto the remote's integration branch.
#[test]
fn the_workflows_attempt_and_land_jobs_run_for_real() {
    let q = fleet_queue(
        &format!("echo run >> \"$REC/runs-$task\"\n{MAKE_OWN_FILE}"),
        &["one"],
    );
    let wf = yaml_docs(
        &String::from_utf8(
            q.repo
                .orbit(&[
                    "schedule",
                    "--queue",
                    "--github-actions",
                    "--orbit-git",
                    super::ORBIT_GIT,
                    "--orbit-rev",
                    super::ORBIT_REV,
                ])
                .stdout,
        )
        .unwrap(),
    );
    let step = |job: &str, name: &str| -> String {
        wf[0]["jobs"][job]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .unwrap_or_else(|| panic!("no step '{name}' in job {job}"))["run"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let work = tempfile::tempdir().unwrap();
    let remote = bare_remote(&q.repo, work.path());
    // A job: a checkout of the remote (every branch, as actions/checkout with fetch-depth
    // 0) and a HOME of its own; its steps run in order with the step's environment.
    let job = |name: &str| -> (PathBuf, Vec<(String, String)>) {
        let dir = work.path().join(name);
        let home = work.path().join(format!("{name}-home"));
        fs::create_dir_all(&home).unwrap();
        git_in(
            work.path(),
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        let env = vec![
            ("HOME".to_string(), home.display().to_string()),
            (
                "GIT_CONFIG_GLOBAL".to_string(),
                home.join(".gitconfig").display().to_string(),
            ),
            ("PATH".to_string(), q.repo.path_env()),
            (
                "GITHUB_SERVER_URL".to_string(),
                "https://github.com".to_string(),
            ),
            ("GITHUB_TOKEN".to_string(), "not-a-token".to_string()),
            ("RETRY_BASE_DELAY".to_string(), "0".to_string()),
            ("KILL_GRACE".to_string(), "1".to_string()),
            ("TASK".to_string(), "one".to_string()),
            ("ONTO".to_string(), "main".to_string()),
        ];
        (dir, env)
    };
    let run = |dir: &Path, env: &[(String, String)], script: &str, what: &str| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let out = run_step_script(script, dir, &env);
        assert_ok(&out, what);
        text(&out)
    };
    let (dir, env) = job("attempt");
    run(
        &dir,
        &env,
        &step("attempt", "Who the commits are by"),
        "identity",
    );
    let said = run(
        &dir,
        &env,
        &step("attempt", "The task's attempt"),
        "the attempt step",
    );
    assert!(said.contains("one: attempt 1 of 5 started"), "{said}");
    // The agent's step pushed nothing.
    let pushed = || {
        command("git")
            .arg("-C")
            .arg(&remote)
            .args(["rev-parse", "--verify", "-q", "refs/heads/orbit/one-a1"])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(!pushed(), "the step without a token pushed");
    let said = run(
        &dir,
        &env,
        &step("attempt", "Push the attempt's branch"),
        "the push step",
    );
    assert!(said.contains("pushed orbit/one-a1"), "{said}");
    assert!(pushed());
    git_in(
        &remote,
        &["rev-parse", "--verify", "refs/notes/orbit-fleet/one-a1"],
    );
    // The push step ran no attempt of its own.
    assert_eq!(
        fs::read_to_string(q.rec().join("runs-one")).unwrap(),
        "run\n"
    );
    let (dir, env) = job("land");
    run(
        &dir,
        &env,
        &step("land", "Who the commits are by"),
        "identity",
    );
    let said = run(&dir, &env, &step("land", "The merge step"), "the land job");
    assert!(said.contains("one: done: attempt 1 merged"), "{said}");
    let integration = "orbit/queue/main";
    assert_eq!(
        on_remote(&remote, integration, "one.txt").as_deref(),
        Some("one\n")
    );
    let task = on_remote(&remote, integration, ".orbit/queue/one.md").unwrap();
    assert!(task.contains("**Status:** done"), "{task}");
    let done = git_in(&remote, &["rev-parse", "orbit/one-a1"]);
    git_in(&remote, &["notes", "--ref=orbit", "show", &done]);
}

/// The scripts inside the renders pass shellcheck.
#[test]
fn the_queue_renders_scripts_pass_shellcheck() {
    if !shellcheck_available() {
        return;
    }
    use orbit::schedule::queue_fleet as f;
    let dir = tempfile::tempdir().unwrap();
    for (name, shell, body) in [
        ("attempt.sh", "sh", f::ATTEMPT_SH.to_string()),
        ("land.sh", "sh", f::LAND_SH.to_string()),
        ("list.sh", "bash", f::LIST_SH.to_string()),
        (
            "auth.sh",
            "bash",
            format!("{}orbit queue land\n", f::AUTH_SH),
        ),
        ("identity.sh", "bash", f::IDENTITY_SH.to_string()),
    ] {
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

/// The renders pass the official validators, as the single loop's do.
#[test]
fn the_queue_renders_pass_the_official_validators() {
    let q = fleet_queue(MAKE_OWN_FILE, &["one", "two"]);
    let out_dir = tempfile::tempdir().unwrap();
    let manifests = out_dir.path().join("queue.yaml");
    assert_ok(
        &q.repo.orbit(&[
            "schedule",
            "--queue",
            "--kubernetes",
            "--image",
            "img",
            "--repo-url",
            URL,
            "--namespace",
            "team",
            "--output",
            manifests.to_str().unwrap(),
        ]),
        "render the manifests",
    );
    let wf_dir = out_dir.path().join("wf");
    fs::create_dir_all(wf_dir.join(".github/workflows")).unwrap();
    let wf: PathBuf = wf_dir.join(".github/workflows/orbit-queue.yml");
    assert_ok(
        &q.repo.orbit(&[
            "schedule",
            "--queue",
            "--github-actions",
            "--orbit-git",
            super::ORBIT_GIT,
            "--orbit-rev",
            super::ORBIT_REV,
            "--output",
            wf.to_str().unwrap(),
        ]),
        "render the workflow",
    );
    let docs = yaml_docs(&fs::read_to_string(&wf).unwrap());
    let jobs = &docs[0]["jobs"];
    assert_eq!(at(jobs, "attempt.needs"), "list");
    assert_eq!(
        jobs["land"]["needs"],
        serde_json::json!(["list", "attempt"])
    );
    super::assert_yaml11_agrees(&wf, &docs);
    super::assert_yaml11_agrees(
        &manifests,
        &yaml_docs(&fs::read_to_string(&manifests).unwrap()),
    );
    kubernetes_validate(&[manifests], out_dir.path());
    workflow_validate(&wf_dir);
}

/// What cannot run across machines is refused, saying what to do: tasks not committed, no
/// image, no task that may start, an attempt at a task that may not start (nothing run).
#[test]
fn the_queue_across_machines_refuses_what_it_cannot_run() {
    let q = queue(MAKE_OWN_FILE);
    q.add("one", "Write one.txt", "test -f one.txt", &[]);
    let render = |q: &Q| {
        q.repo.orbit(&[
            "schedule",
            "--queue",
            "--kubernetes",
            "--image",
            "img",
            "--repo-url",
            URL,
        ])
    };
    let out = render(&q);
    assert_code(&out, 2, "tasks not committed");
    assert!(
        text(&out).contains("git add .orbit/queue/*.md"),
        "{}",
        text(&out)
    );
    q.repo.git(&["add", ".orbit/queue/one.md"]);
    q.repo.git(&["commit", "-q", "-m", "the queue"]);
    let out = q
        .repo
        .orbit(&["schedule", "--queue", "--kubernetes", "--repo-url", URL]);
    assert_code(&out, 2, "no image");
    assert!(text(&out).contains("--image"), "{}", text(&out));
    // The task done, as the integration branch's records would say.
    let file = q
        .task("one")
        .replace("**Status:** ready", "**Status:** done");
    q.repo.write(".orbit/queue/one.md", &file);
    q.repo.git(&["commit", "-q", "-am", "one is done"]);
    let out = render(&q);
    assert_code(&out, 2, "no task that may start");
    assert!(text(&out).contains("orbit queue status"), "{}", text(&out));
    std::os::unix::fs::symlink(orbit_bin(), q.repo.bin.path().join("orbit")).unwrap();
    let out = q.repo.orbit(&["queue", "attempt", "one", "--onto", "main"]);
    assert_code(&out, 2, "an attempt at a done task");
    assert!(text(&out).contains("may not start"), "{}", text(&out));
    assert!(!q.repo.join(".orbit/one-a1").exists(), "nothing was made");
    // Where the queue runs itself, the merge step and the attempts move nothing of it.
    let out = q.run(&[]);
    assert_code(&out, 0, "orbit queue run here");
    let before = q.repo.git(&["rev-parse", "orbit/queue/main"]);
    for args in [
        &["queue", "land", "--onto", "main"][..],
        &["queue", "attempt", "one", "--onto", "main"][..],
    ] {
        let out = q.repo.orbit(args);
        assert_code(&out, 2, &args.join(" "));
        assert!(text(&out).contains("a clone of its own"), "{}", text(&out));
    }
    assert_eq!(q.repo.git(&["rev-parse", "orbit/queue/main"]), before);
}
