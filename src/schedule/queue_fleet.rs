//! `orbit schedule --queue --kubernetes | --github-actions`: the queue across machines.
//!
//! Nothing is shared but the remote. Each ready task's attempt runs in a clone of its own
//! (`orbit queue attempt TASK --push`: its loop branch `orbit/TASK-aN` and its envelope,
//! `refs/notes/orbit-fleet/TASK-aN`, pushed); the merge step, in another clone, lands what
//! was pushed (`orbit queue land`: `orbit verify` of each envelope, the merge, the task's
//! checks on the merged tree under its sandbox, the task files' records, the integration
//! branch pushed). The tasks are the files `.orbit/queue/<task>.md` committed on the branch
//! the queue builds on; their records then travel on the integration branch
//! `orbit/queue/<branch>`.
//!
//! - Kubernetes: an Indexed Job, one completion index per task ready when rendered
//!   (`parallelism` `--jobs`), and a CronJob that runs the merge step at each `--every`.
//!   Retries are orbit's, not Kubernetes': `backoffLimitPerIndex: 0` (with
//!   `maxFailedIndexes` every index, so one pod's failure stops no other). A pod that
//!   fails pushed nothing, and the task stays ready with its attempts unchanged; a loop
//!   that ends without a verified DONE is an attempt the merge step records. Tasks that
//!   become ready after a merge go into the next render: the merge step prints the
//!   command, it never applies (it holds no cluster credentials).
//! - GitHub Actions: a workflow on a schedule whose `list` job reads the ready tasks
//!   (`orbit queue status --json`, their `startable` member) as a JSON matrix, an `attempt`
//!   job per task (the agent's step holds no token; a later step pushes), and a `land` job
//!   that needs them. Each run lists what is ready then, so tasks a merge made ready run
//!   at the next run.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::github::{INSTALL_ORBIT_SH, INSTALL_PY_SH, INSTALL_SH, OrbitSource};
use super::kubernetes::{CREDENTIALS_DIR, CREDENTIALS_KEY, RUN_AS, clone_url, object_name};
use crate::cli::ScheduleArgs;
use crate::config::LoopConfig;
use crate::contract::Engine;
use crate::error::{Error, Result};

/// Where a pod works: its clone and its home, on an emptyDir (nothing survives the pod).
pub const WORK_PATH: &str = "/work";

/// The pod of one task's attempt: the task of its completion index, a clone of the
/// remote, the attempt, the push. $1 the tasks by index (space-separated), $2 the URL, $3
/// the branch the queue builds on.
pub const ATTEMPT_SH: &str = r#"# One task's attempt in a clone of its own: the task of this pod's completion index.
set -eu
task=
i=0
for t in $1; do
  if [ "$i" = "$JOB_COMPLETION_INDEX" ]; then task=$t; fi
  i=$((i + 1))
done
if [ -z "$task" ]; then
  echo "orbit: no task at completion index $JOB_COMPLETION_INDEX" >&2
  exit 1
fi
creds=/var/run/orbit/git-credentials
mkdir -p "$HOME"
if [ -f "$creds" ]; then git config --global credential.helper "store --file=$creds"; fi
git config --global user.name >/dev/null || git config --global user.name orbit
git config --global user.email >/dev/null || git config --global user.email orbit@localhost
git clone --quiet -- "$2" repo
cd repo
exec orbit queue attempt "$task" --onto "$3" --push
"#;

/// The merge step's pod: a clone of its own, then `orbit queue land`. $1 the URL, $2 the
/// branch the queue builds on.
pub const LAND_SH: &str = r#"# The merge step in a clone of its own: what the attempts pushed, landed and pushed back.
set -eu
creds=/var/run/orbit/git-credentials
mkdir -p "$HOME"
if [ -f "$creds" ]; then git config --global credential.helper "store --file=$creds"; fi
git config --global user.name >/dev/null || git config --global user.name orbit
git config --global user.email >/dev/null || git config --global user.email orbit@localhost
git clone --quiet -- "$1" repo
cd repo
exec orbit queue land --from origin --onto "$2"
"#;

/// The queue as another machine finds it: its branch, the integration branch's commit the
/// next attempts start from, and the tasks that may start there.
pub struct Fleet {
    pub repo: std::path::PathBuf,
    pub onto: String,
    pub base: String,
    pub ready: Vec<String>,
    /// The engines of every task of the queue.
    pub engines: BTreeSet<Engine>,
}

fn labels(name: &str, component: &str) -> Value {
    json!({
        "app.kubernetes.io/name": "orbit",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "orbit",
    })
}

/// The engines' keys from the Secret (a custom engine: every key of the Secret).
fn engine_env(engines: &BTreeSet<Engine>, secret: &str) -> (Vec<Value>, Vec<Value>) {
    let mut env = vec![
        json!({"name": "HOME", "value": format!("{WORK_PATH}/home")}),
        json!({"name": "GIT_TERMINAL_PROMPT", "value": "0"}),
    ];
    let mut from = Vec::new();
    let mut keys = BTreeSet::new();
    for e in engines {
        match e.api_key_env() {
            Some(key) => {
                keys.insert(key);
                keys.extend(e.provider_env().iter().copied());
            }
            None => {
                if from.is_empty() {
                    from.push(json!({"secretRef": {"name": secret, "optional": true}}));
                }
            }
        }
    }
    for k in keys {
        env.push(json!({"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k, "optional": engines.len() > 1}}}));
    }
    (env, from)
}

/// A pod running `script` with `args`, its work on an emptyDir.
fn pod(
    image: &str,
    name: &str,
    script: &str,
    args: Vec<String>,
    env: Vec<Value>,
    from: Vec<Value>,
    secret: &str,
) -> Value {
    let mut command = vec![
        "sh".to_string(),
        "-c".into(),
        script.into(),
        format!("orbit-{name}"),
    ];
    command.extend(args);
    let mut container = json!({
        "name": name,
        "image": image,
        "command": command,
        "workingDir": WORK_PATH,
        "env": env,
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [
            {"name": "work", "mountPath": WORK_PATH},
            {"name": "git-credentials", "mountPath": CREDENTIALS_DIR, "readOnly": true},
        ],
    });
    if !from.is_empty() {
        container["envFrom"] = json!(from);
    }
    json!({
        "restartPolicy": "Never",
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": "work", "emptyDir": {}},
            {"name": "git-credentials", "secret": {
                "secretName": secret,
                "optional": true,
                "defaultMode": 0o440,
                "items": [{"key": CREDENTIALS_KEY, "path": CREDENTIALS_KEY}],
            }},
        ],
    })
}

/// The manifests: the Indexed Job of the ready tasks' attempts, and the CronJob of the
/// merge step.
pub fn render_kubernetes(
    f: &Fleet,
    image: &str,
    url: &str,
    namespace: Option<&str>,
    secret: &str,
    jobs: u32,
    every: &str,
) -> Result<String> {
    let base_name = object_name(&format!("queue-{}", f.onto));
    let job_name = format!("{}-{}", &base_name[..base_name.len().min(44)], &f.base[..8]);
    let land_name = format!("{}-land", &base_name[..base_name.len().min(47)]);
    let count = f.ready.len();
    let meta = |name: &str, component: &str| {
        let mut m = json!({
            "name": name,
            "labels": labels(&base_name, component),
            "annotations": {
                "orbit/queue": f.onto,
                "orbit/integration-branch": format!("orbit/queue/{}", f.onto),
                "orbit/repository": url,
            },
        });
        if let Some(ns) = namespace {
            m["namespace"] = json!(ns);
        }
        m
    };
    let (env, from) = engine_env(&f.engines, secret);
    let mut job_meta = meta(&job_name, "attempt");
    job_meta["annotations"]["orbit/tasks"] = json!(f.ready.join(" "));
    job_meta["annotations"]["orbit/from-commit"] = json!(f.base);
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job_meta,
        "spec": {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": (jobs.max(1) as usize).min(count),
            "backoffLimitPerIndex": 0,
            "maxFailedIndexes": count,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": labels(&base_name, "attempt")},
                "spec": pod(image, "attempt", ATTEMPT_SH, vec![f.ready.join(" "), url.into(), f.onto.clone()], env, from, secret),
            },
        },
    });
    let land_env = vec![
        json!({"name": "HOME", "value": format!("{WORK_PATH}/home")}),
        json!({"name": "GIT_TERMINAL_PROMPT", "value": "0"}),
    ];
    let cron = json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": meta(&land_name, "land"),
        "spec": {
            "schedule": super::cron_when(every)?,
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": super::every_secs(every)?,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "metadata": {"labels": labels(&base_name, "land")},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"labels": labels(&base_name, "land")},
                        "spec": pod(image, "land", LAND_SH, vec![url.into(), f.onto.clone()], land_env, Vec::new(), secret),
                    },
                },
            },
        },
    });
    let ns = namespace.map(|n| format!(" -n {n}")).unwrap_or_default();
    let header = vec![
        format!("orbit schedule --queue --kubernetes: the queue of {} across pods.", f.onto),
        format!(
            "{job_name}: an Indexed Job, one pod per ready task ({count}: {}), {} at once;",
            f.ready.join(", "),
            (jobs.max(1) as usize).min(count)
        ),
        "each pod clones the repository, runs its task's attempt (orbit queue attempt) and pushes".into(),
        "its branch orbit/<task>-a<N> and envelope (refs/notes/orbit-fleet/<task>-a<N>).".into(),
        format!("{land_name}: a CronJob every {every}, the merge step (orbit queue land) in a clone of its own:"),
        "each pushed attempt verified (orbit verify), merged, its checks run on the merged tree,".into(),
        format!("the tasks' records and orbit/queue/{} pushed.", f.onto),
        "Retries are orbit's (each task's Max-Attempts), never Kubernetes': a failed pod pushed nothing.".into(),
        format!("1. kubectl create secret generic {secret}{ns} with the agents' keys (and --from-file={CREDENTIALS_KEY}=FILE: lines https://USER:TOKEN@HOST that may push)"),
        "2. kubectl apply -f THIS-FILE; after a merge, render again: the tasks it made ready run then.".into(),
        format!("The image must hold orbit, bash, git, the agents' CLIs and the project's toolchain; it runs as user {RUN_AS}."),
    ];
    Ok(super::yaml(&header, &[job, cron]))
}

/// Installs the agents' CLIs the queue's tasks name.
fn install_steps(engines: &BTreeSet<Engine>) -> Vec<Value> {
    let npm: Vec<&str> = engines.iter().filter_map(|e| e.npm_package()).collect();
    let pypi: Vec<&str> = engines.iter().filter_map(|e| e.pypi_package()).collect();
    let mut steps = Vec::new();
    if !npm.is_empty() {
        steps.push(json!({"name": "Set up Node.js", "uses": "actions/setup-node@v4", "with": {"node-version": 22}}));
        for p in npm {
            steps.push(json!({"name": format!("Install {p}"), "env": {"AGENT_PACKAGE": p}, "run": INSTALL_SH}));
        }
    }
    if !pypi.is_empty() {
        steps.push(json!({"name": "Set up Python", "uses": "actions/setup-python@v5", "with": {"python-version": "3.12"}}));
        for p in pypi {
            steps.push(json!({"name": format!("Install {p}"), "env": {"AGENT_PACKAGE": p}, "run": INSTALL_PY_SH}));
        }
    }
    steps
}

/// The list job's step: the tasks that may start, as a JSON array (step output `tasks`).
pub const LIST_SH: &str = r#"# The queue as its integration branch has it (else its branch, before the first merge).
base="refs/remotes/origin/orbit/queue/$ONTO"
git rev-parse --quiet --verify "$base" >/dev/null || base="refs/remotes/origin/$ONTO"
git checkout --quiet --detach "$base"
tasks=$(orbit queue status --json | jq -c '[.tasks[] | select(.startable) | .name]')
echo "ready: $tasks"
echo "tasks=$tasks" >>"$GITHUB_OUTPUT"
"#;

/// Gives git the token through the environment (never .git/config), for the steps that push.
pub const AUTH_SH: &str = r#"auth=$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 | tr -d '\n')
echo "::add-mask::$auth"
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="http.$GITHUB_SERVER_URL/.extraheader" GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $auth"
"#;

/// Who the commits are by.
pub const IDENTITY_SH: &str = r#"git config --global user.name "github-actions[bot]"
git config --global user.email "41898282+github-actions[bot]@users.noreply.github.com"
"#;

/// The workflow.
pub fn render_github(f: &Fleet, orbit: &OrbitSource, jobs: u32, every: &str) -> Result<String> {
    let secs = super::every_secs(every)?;
    if secs < super::github::MIN_EVERY_MINUTES * 60 {
        return Err(Error::Usage(format!(
            "--every {every}: GitHub runs a scheduled workflow at most every {} minutes: give --every {}m or more",
            super::github::MIN_EVERY_MINUTES,
            super::github::MIN_EVERY_MINUTES
        )));
    }
    let checkout = json!({"name": "Check out the repository, every branch", "uses": "actions/checkout@v4", "with": {"fetch-depth": 0, "persist-credentials": false}});
    let build = json!({"name": "Build orbit", "env": {"ORBIT_GIT": orbit.git, "ORBIT_REV": orbit.rev}, "run": INSTALL_ORBIT_SH});
    let identity = json!({"name": "Who the commits are by", "run": IDENTITY_SH});
    let mut attempt_env = serde_json::Map::new();
    attempt_env.insert("TASK".into(), json!("${{ matrix.task }}"));
    attempt_env.insert("ONTO".into(), json!(f.onto));
    for e in &f.engines {
        for k in e
            .api_key_env()
            .into_iter()
            .chain(e.provider_env().iter().copied())
        {
            attempt_env.insert(k.into(), json!(format!("${{{{ secrets.{k} }}}}")));
        }
    }
    let mut attempt_steps = vec![checkout.clone()];
    attempt_steps.extend(install_steps(&f.engines));
    attempt_steps.extend([
        build.clone(),
        identity.clone(),
        json!({"name": "The task's attempt (no token here)", "env": attempt_env,
               "run": "orbit queue attempt \"$TASK\" --onto \"$ONTO\"\n"}),
        json!({"name": "Push the attempt's branch and envelope",
               "env": {"TASK": "${{ matrix.task }}", "ONTO": f.onto, "GITHUB_TOKEN": "${{ github.token }}"},
               "run": format!("{AUTH_SH}orbit queue attempt \"$TASK\" --onto \"$ONTO\" --push --only-push\n")}),
    ]);
    let workflow = json!({
        "name": format!("orbit queue {}", f.onto),
        "on": {"schedule": [{"cron": super::cron_when(every)?}], "workflow_dispatch": {}},
        "permissions": {"contents": "write"},
        "concurrency": {"group": format!("orbit-queue-{}", f.onto), "cancel-in-progress": false},
        "jobs": {
            "list": {
                "runs-on": "ubuntu-latest",
                "outputs": {"tasks": "${{ steps.list.outputs.tasks }}"},
                "defaults": {"run": {"shell": "bash"}},
                "steps": [checkout, build, {"name": "The tasks that may start", "id": "list", "env": {"ONTO": f.onto}, "run": LIST_SH}],
            },
            "attempt": {
                "needs": "list",
                "if": "needs.list.outputs.tasks != '[]'",
                "runs-on": "ubuntu-latest",
                "timeout-minutes": super::github::MAX_JOB_MINUTES,
                "strategy": {"fail-fast": false, "max-parallel": jobs.max(1), "matrix": {"task": "${{ fromJSON(needs.list.outputs.tasks) }}"}},
                "defaults": {"run": {"shell": "bash"}},
                "steps": attempt_steps,
            },
            "land": {
                "needs": ["list", "attempt"],
                "if": "always() && needs.list.result == 'success'",
                "runs-on": "ubuntu-latest",
                "defaults": {"run": {"shell": "bash"}},
                "steps": [
                    checkout, build, identity,
                    {"name": "The merge step", "env": {"ONTO": f.onto, "GITHUB_TOKEN": "${{ github.token }}"},
                     "run": format!("{AUTH_SH}orbit queue land --from origin --onto \"$ONTO\"\n")},
                ],
            },
        },
    });
    let header = vec![
        format!("orbit schedule --queue --github-actions: the queue of {} across jobs.", f.onto),
        format!("Commit this file as .github/workflows/orbit-queue.yml on the default branch, with the tasks (.orbit/queue/*.md) on {}.", f.onto),
        "list: the ready tasks as a JSON matrix (orbit queue status --json); attempt: one job per task".into(),
        "(orbit queue attempt; its agent's step holds no token, the next step pushes orbit/<task>-a<N>".into(),
        "and refs/notes/orbit-fleet/<task>-a<N>); land: the merge step (orbit queue land) once they end.".into(),
        "The repository needs the agents' secrets; orbit is built from ORBIT_GIT at ORBIT_REV below.".into(),
    ];
    Ok(super::yaml(&header, &[workflow]))
}

/// `orbit schedule --queue --kubernetes | --github-actions`.
pub fn run(args: &ScheduleArgs, f: &Fleet) -> Result<u8> {
    if f.ready.is_empty() {
        return Err(Error::Refused(format!(
            "no task of the queue may start at {} (orbit/queue/{} as fetched, else {}): each is done, failed, blocked or waits for another; orbit queue status says which",
            &f.base[..12],
            f.onto,
            f.onto
        )));
    }
    let text = if args.kubernetes {
        let image = args.image.clone().ok_or_else(|| {
            Error::Usage("--kubernetes needs --image IMAGE: an image with orbit, bash, git, the agents' CLIs and the project's toolchain".into())
        })?;
        let shipped = super::Shipped {
            repo: f.repo.clone(),
            rel: ".orbit/queue".into(),
            branch: f.onto.clone(),
            cfg: LoopConfig::default(),
            goal_title: String::new(),
        };
        let url = clone_url(args.repo_url.as_deref(), &shipped)?;
        let secret = args.secret.clone().unwrap_or_else(|| "orbit-queue".into());
        render_kubernetes(
            f,
            &image,
            &url,
            args.namespace.as_deref(),
            &secret,
            args.jobs,
            &args.every,
        )?
    } else {
        let orbit = OrbitSource::from_args(args.orbit_git.as_deref(), args.orbit_rev.as_deref())?;
        render_github(f, &orbit, args.jobs, &args.every)?
    };
    super::emit(&text, args.output.as_deref())?;
    Ok(0)
}
