//! `orbit schedule --kubernetes`: the manifests that run a loop in a cluster.
//!
//! - A PersistentVolumeClaim holds the clone of the repository: the loop directory (as
//!   committed), and the agent's home, which holds the workspace (by default under the
//!   home's data directory, `.local/share/orbit/workspaces/`). State lives there between ticks; the runner's lock lives there too, so one
//!   volume runs the loop at most once at a time.
//! - A CronJob runs one tick (`bash DIR/run-loop.sh --once`, the crontab line's runner) at
//!   each interval, never two at once (`concurrencyPolicy: Forbid`), without retries of its
//!   own (`backoffLimit: 0`: the runner retries the agent itself), bounded by
//!   `activeDeadlineSeconds` from the loop's timeouts. With `--continuous`, a Job runs the
//!   loop until it stops instead.
//! - In every pod, an init container clones the repository onto the volume the first time
//!   (and gives git an identity for the loop's commits); later pods find it there.
//! - The agent's API key comes from a Secret the user creates (never from these files), as
//!   the variable the engine reads; an optional `git-credentials` key of the same Secret
//!   lets the clone reach a private repository.
//!
//! The exit codes map as for the systemd units ([`super::tick_sh`]): a tick that leaves work
//! for the next one, or finds the loop waiting for a human, is a successful Job.

use serde::Serialize;
use serde_saphyr::Commented;
use std::collections::BTreeMap;

use super::{Shipped, every_secs, run_deadline, tick_deadline, tick_sh};
use crate::cli::ScheduleArgs;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::goal::parse_duration;

/// Where the volume is mounted in every container.
pub const VOLUME_PATH: &str = "/work";
/// The repository's clone on the volume.
pub const REPO_PATH: &str = "/work/repo";
/// The agent's (and git's) home on the volume: its settings survive from tick to tick.
pub const HOME_PATH: &str = "/work/home";
/// Where the clone step finds the optional `git-credentials` key of the Secret.
pub const CREDENTIALS_DIR: &str = "/var/run/orbit";
/// The key of the Secret that holds git credentials (`https://USER:TOKEN@HOST` lines).
pub const CREDENTIALS_KEY: &str = "git-credentials";
/// The user and group every container runs as.
pub const RUN_AS: u32 = 1000;

/// What `--kubernetes` was given.
#[derive(Debug, Clone)]
pub struct Options {
    pub every: String,
    pub image: String,
    pub namespace: Option<String>,
    pub secret: Option<String>,
    /// The URL the pod clones (https).
    pub url: String,
    pub continuous: bool,
}

// ---- the objects, as the API has them (only the fields orbit sets)

#[derive(Serialize)]
#[serde(untagged)]
enum Doc {
    Claim(Object<ClaimSpec>),
    CronJob(Object<CronJobSpec>),
    Job(Object<JobSpec>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Meta,
    spec: S,
}

#[derive(Serialize, Clone)]
struct Meta {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    labels: BTreeMap<&'static str, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClaimSpec {
    access_modes: Vec<&'static str>,
    resources: Requests,
}

#[derive(Serialize)]
struct Requests {
    requests: BTreeMap<&'static str, &'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CronJobSpec {
    schedule: Commented<String>,
    time_zone: &'static str,
    concurrency_policy: &'static str,
    starting_deadline_seconds: u64,
    successful_jobs_history_limit: u32,
    failed_jobs_history_limit: u32,
    job_template: JobTemplate,
}

#[derive(Serialize)]
struct JobTemplate {
    metadata: Labels,
    spec: JobSpec,
}

#[derive(Serialize)]
struct Labels {
    labels: BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JobSpec {
    backoff_limit: Commented<u32>,
    active_deadline_seconds: Commented<u64>,
    template: PodTemplate,
}

#[derive(Serialize)]
struct PodTemplate {
    metadata: Labels,
    spec: PodSpec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    restart_policy: &'static str,
    termination_grace_period_seconds: u64,
    security_context: PodSecurity,
    init_containers: Vec<Container>,
    containers: Vec<Container>,
    volumes: Vec<Volume>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodSecurity {
    run_as_non_root: bool,
    run_as_user: u32,
    run_as_group: u32,
    fs_group: u32,
    fs_group_change_policy: &'static str,
    seccomp_profile: Seccomp,
}

#[derive(Serialize)]
struct Seccomp {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    name: &'static str,
    image: String,
    command: Vec<String>,
    working_dir: &'static str,
    env: Vec<EnvVar>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    env_from: Vec<EnvFrom>,
    resources: Requests,
    security_context: ContainerSecurity,
    volume_mounts: Vec<Mount>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ContainerSecurity {
    allow_privilege_escalation: bool,
    capabilities: Capabilities,
}

#[derive(Serialize)]
struct Capabilities {
    drop: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EnvVar {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_from: Option<ValueFrom>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ValueFrom {
    secret_key_ref: KeyRef,
}

#[derive(Serialize)]
struct KeyRef {
    name: String,
    key: String,
    optional: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EnvFrom {
    secret_ref: SecretRef,
}

#[derive(Serialize)]
struct SecretRef {
    name: String,
    optional: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Mount {
    name: &'static str,
    mount_path: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    read_only: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Volume {
    name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    persistent_volume_claim: Option<ClaimRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<SecretVolume>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClaimRef {
    claim_name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SecretVolume {
    secret_name: String,
    optional: bool,
    default_mode: Commented<u32>,
    items: Vec<KeyToPath>,
}

#[derive(Serialize)]
struct KeyToPath {
    key: &'static str,
    path: &'static str,
}

// ---- names

/// The longest name a CronJob may have (its Jobs add 11 characters, within 63).
const MAX_NAME: usize = 52;

/// The name of the loop's objects: `orbit-` and the loop's name in the lowercase letters,
/// digits and '-' Kubernetes accepts. When that changed or shortened the name, a short hash
/// of the name follows, so two loops never share objects.
pub fn object_name(loop_name: &str) -> String {
    let mut base = String::new();
    for c in loop_name.chars() {
        if c.is_ascii_alphanumeric() {
            base.push(c.to_ascii_lowercase());
        } else if !base.ends_with('-') {
            base.push('-');
        }
    }
    let base = base.trim_matches('-').to_string();
    if base == loop_name && "orbit-".len() + base.len() <= MAX_NAME {
        return format!("orbit-{base}");
    }
    let hash = &crate::fsx::sha256_hex(loop_name.as_bytes())[..8];
    let room = MAX_NAME - "orbit-".len() - 1 - hash.len();
    let cut = base[..base.len().min(room)].trim_end_matches('-');
    if cut.is_empty() {
        format!("orbit-{hash}")
    } else {
        format!("orbit-{cut}-{hash}")
    }
}

/// A DNS label (namespaces) or subdomain (Secrets), as Kubernetes checks it.
fn check_dns(flag: &str, value: &str, dots: bool, max: usize) -> Result<()> {
    let ok = !value.is_empty()
        && value.len() <= max
        && value.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
        && (dots || !value.contains('.'));
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "{flag} '{}': Kubernetes accepts lowercase letters, digits and '-'{} (at most {max} characters, starting and ending with a letter or digit)",
            value.escape_debug(),
            if dots { " and '.'" } else { "" }
        )))
    }
}

fn check_image(image: &str) -> Result<()> {
    if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Usage(format!(
            "--image '{}': give an image reference such as ghcr.io/you/orbit-agent:1",
            image.escape_debug()
        )));
    }
    Ok(())
}

/// The default Secret: one per engine, holding its API key (and, for private repositories,
/// `git-credentials`).
pub fn default_secret(engine: Engine) -> String {
    format!("orbit-{engine}")
}

// ---- the repository's URL

/// The URL a pod clones: https, without credentials (they belong in the Secret). An ssh
/// remote (`git@host:path`, `ssh://git@host/path`) becomes its https twin, said on stderr.
pub fn clone_url(given: Option<&str>, shipped: &Shipped) -> Result<String> {
    let (url, from_remote) = match given {
        Some(u) => (u.to_string(), false),
        None => {
            let remote = super::git_text(
                &shipped.repo,
                &["config", &format!("branch.{}.remote", shipped.branch)],
            )?
            .filter(|r| !r.is_empty() && r != ".")
            .unwrap_or_else(|| "origin".into());
            let url = super::git_text(&shipped.repo, &["remote", "get-url", &remote])?
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "the repository has no remote {remote}: give --repo-url https://HOST/OWNER/REPO.git, the address the cluster clones"
                    ))
                })?;
            (url, true)
        }
    };
    if url.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Usage(format!(
            "--repo-url '{}': give the https address of the repository",
            url.escape_debug()
        )));
    }
    let https = if url.starts_with("https://") || url.starts_with("http://") {
        url.clone()
    } else if let Some(twin) = https_twin(&url) {
        eprintln!(
            "orbit: note: the pod clones over https: {twin} for {url} (give --repo-url to choose another)"
        );
        twin
    } else {
        let whose = if from_remote {
            "the repository's remote is"
        } else {
            "--repo-url is"
        };
        return Err(Error::Usage(format!(
            "{whose} {url}, which a pod cannot clone: give --repo-url https://HOST/OWNER/REPO.git"
        )));
    };
    let authority = https.split_once("://").map(|(_, rest)| rest).unwrap_or("");
    let authority = authority.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return Err(Error::Usage(format!(
            "the URL to clone carries credentials ({}@...): give it without them (--repo-url) and put them in the Secret's {CREDENTIALS_KEY} key",
            https.split('@').next().unwrap_or("")
        )));
    }
    if authority.is_empty() {
        return Err(Error::Usage(format!(
            "'{https}' names no host: give --repo-url https://HOST/OWNER/REPO.git"
        )));
    }
    Ok(https)
}

/// `git@host:owner/repo.git` or `ssh://git@host/owner/repo.git` as `https://host/owner/repo.git`.
fn https_twin(url: &str) -> Option<String> {
    let (host, path) = if let Some(rest) = url.strip_prefix("ssh://") {
        let rest = rest.split_once('@').map(|(_, r)| r).unwrap_or(rest);
        let (host, path) = rest.split_once('/')?;
        (host.split(':').next()?, path)
    } else {
        let (user_host, path) = url.split_once(':')?;
        if user_host.contains('/') || path.starts_with("//") {
            return None;
        }
        (user_host.split_once('@')?.1, path)
    };
    (!host.is_empty() && !path.is_empty())
        .then(|| format!("https://{host}/{}", path.trim_start_matches('/')))
}

// ---- the containers' scripts (static: every value arrives as a positional argument)

/// The init container: the clone on the volume, made once.
pub const CLONE_SH: &str = r#"# The repository's clone on the volume, made once: aside, then renamed into place, so a
# pod stopped mid-clone leaves no half clone. A git identity for the loop's commits.
# $1 the clone, $2 the repository's URL, $3 its branch, $4 the loop directory in it.
set -eu
creds=/var/run/orbit/git-credentials
git_auth() {
  if [ -f "$creds" ]; then
    git -c "credential.helper=store --file=$creds" "$@"
  else
    git "$@"
  fi
}
mkdir -p "$HOME"
git config --global user.name >/dev/null || git config --global user.name orbit
git config --global user.email >/dev/null || git config --global user.email orbit@localhost
if [ ! -d "$1/.git" ]; then
  rm -rf "$1.partial"
  git_auth clone --quiet --branch "$3" -- "$2" "$1.partial"
  mv "$1.partial" "$1"
fi
if [ ! -f "$1/$4/run-loop.sh" ]; then
  # Not committed when the clone was made: the branch may hold it now (the loop never ran).
  git_auth -C "$1" pull --quiet --ff-only origin "$3" || true
fi
if [ ! -f "$1/$4/run-loop.sh" ]; then
  echo "orbit: $4 is not on branch $3 of $2: commit and push the loop directory as orbit init made it; the next run finds it" >&2
  exit 1
fi
"#;

fn labels(name: &str, component: &str) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name", "orbit".to_string()),
        ("app.kubernetes.io/instance", name.to_string()),
        ("app.kubernetes.io/component", component.to_string()),
        ("app.kubernetes.io/managed-by", "orbit".to_string()),
    ])
}

fn requests(cpu: &'static str, memory: &'static str) -> Requests {
    Requests {
        requests: BTreeMap::from([("cpu", cpu), ("memory", memory)]),
    }
}

fn plain_env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn secret_env(name: &str, secret: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(ValueFrom {
            secret_key_ref: KeyRef {
                name: secret.into(),
                key: name.into(),
                optional,
            },
        }),
    }
}

fn hardened() -> ContainerSecurity {
    ContainerSecurity {
        allow_privilege_escalation: false,
        capabilities: Capabilities { drop: vec!["ALL"] },
    }
}

/// The pod both the CronJob's Jobs and the continuous Job run.
fn pod(shipped: &Shipped, opts: &Options, name: &str, secret: &str) -> Result<PodSpec> {
    let cfg = &shipped.cfg;
    let loop_dir = format!("{REPO_PATH}/{}", shipped.rel);
    let mut env = vec![
        plain_env("HOME", HOME_PATH),
        plain_env("GIT_TERMINAL_PROMPT", "0"),
    ];
    let mut env_from = Vec::new();
    match cfg.engine.api_key_env() {
        Some(key) => {
            env.push(secret_env(key, secret, false));
            for var in cfg.engine.provider_env() {
                env.push(secret_env(var, secret, false));
            }
        }
        // A custom agent: every key of the Secret that is a variable name reaches it.
        None => env_from.push(EnvFrom {
            secret_ref: SecretRef {
                name: secret.into(),
                optional: true,
            },
        }),
    }
    if !cfg.notify_webhook_env.is_empty() {
        env.push(secret_env(&cfg.notify_webhook_env, secret, true));
    }
    let work = Mount {
        name: "work",
        mount_path: VOLUME_PATH,
        read_only: false,
    };
    let clone = Container {
        name: "clone",
        image: opts.image.clone(),
        command: vec![
            "sh".into(),
            "-c".into(),
            CLONE_SH.into(),
            "orbit-clone".into(),
            REPO_PATH.into(),
            opts.url.clone(),
            shipped.branch.clone(),
            shipped.rel.clone(),
        ],
        working_dir: VOLUME_PATH,
        env: vec![
            plain_env("HOME", HOME_PATH),
            plain_env("GIT_TERMINAL_PROMPT", "0"),
        ],
        env_from: Vec::new(),
        resources: requests("100m", "256Mi"),
        security_context: hardened(),
        volume_mounts: vec![
            Mount {
                name: "work",
                mount_path: VOLUME_PATH,
                read_only: false,
            },
            Mount {
                name: "git-credentials",
                mount_path: CREDENTIALS_DIR,
                read_only: true,
            },
        ],
    };
    let runner = Container {
        name: if opts.continuous { "run" } else { "tick" },
        image: opts.image.clone(),
        command: vec![
            "sh".into(),
            "-c".into(),
            tick_sh(!opts.continuous),
            if opts.continuous {
                "orbit-run"
            } else {
                "orbit-tick"
            }
            .into(),
            loop_dir,
        ],
        working_dir: REPO_PATH,
        env,
        env_from,
        resources: requests("1", "2Gi"),
        security_context: hardened(),
        volume_mounts: vec![work],
    };
    let grace = parse_duration("kill-grace", &cfg.kill_grace)?;
    Ok(PodSpec {
        restart_policy: "Never",
        termination_grace_period_seconds: grace + 30,
        security_context: PodSecurity {
            run_as_non_root: true,
            run_as_user: RUN_AS,
            run_as_group: RUN_AS,
            fs_group: RUN_AS,
            fs_group_change_policy: "OnRootMismatch",
            seccomp_profile: Seccomp {
                kind: "RuntimeDefault",
            },
        },
        init_containers: vec![clone],
        containers: vec![runner],
        volumes: vec![
            Volume {
                name: "work",
                persistent_volume_claim: Some(ClaimRef {
                    claim_name: name.into(),
                }),
                secret: None,
            },
            Volume {
                name: "git-credentials",
                persistent_volume_claim: None,
                secret: Some(SecretVolume {
                    secret_name: secret.into(),
                    optional: true,
                    default_mode: Commented(0o440, "0440: the pod's group reads it".into()),
                    items: vec![KeyToPath {
                        key: CREDENTIALS_KEY,
                        path: CREDENTIALS_KEY,
                    }],
                }),
            },
        ],
    })
}

/// The manifests (a PersistentVolumeClaim, then the CronJob, or the Job with
/// `--continuous`) with a comment on top saying what to do first.
pub fn render(shipped: &Shipped, opts: &Options) -> Result<String> {
    check_image(&opts.image)?;
    if let Some(ns) = &opts.namespace {
        check_dns("--namespace", ns, false, 63)?;
    }
    let cfg = &shipped.cfg;
    let secret = opts
        .secret
        .clone()
        .unwrap_or_else(|| default_secret(cfg.engine));
    check_dns("--secret", &secret, true, 253)?;
    let name = object_name(&cfg.name);
    let component = if opts.continuous { "run" } else { "tick" };
    let meta = Meta {
        name: name.clone(),
        namespace: opts.namespace.clone(),
        labels: labels(&name, component),
        annotations: BTreeMap::from([
            ("orbit/loop", cfg.name.clone()),
            ("orbit/loop-dir", shipped.rel.clone()),
            ("orbit/goal", shipped.goal_title.clone()),
            ("orbit/repository", opts.url.clone()),
            ("orbit/branch", shipped.branch.clone()),
        ]),
    };
    let claim = Doc::Claim(Object {
        api_version: "v1",
        kind: "PersistentVolumeClaim",
        metadata: Meta {
            labels: labels(&name, "work"),
            ..meta.clone()
        },
        spec: ClaimSpec {
            access_modes: vec!["ReadWriteOnce"],
            resources: Requests {
                requests: BTreeMap::from([("storage", "10Gi")]),
            },
        },
    });
    let pod_labels = Labels {
        labels: labels(&name, component),
    };
    let pod = pod(shipped, opts, &name, &secret)?;
    let work = if opts.continuous {
        let deadline = run_deadline(cfg)?;
        Doc::Job(Object {
            api_version: "batch/v1",
            kind: "Job",
            metadata: meta,
            spec: JobSpec {
                backoff_limit: Commented(0, "the runner retries the agent itself".into()),
                active_deadline_seconds: Commented(deadline, deadline_note(deadline, false)),
                template: PodTemplate {
                    metadata: pod_labels,
                    spec: pod,
                },
            },
        })
    } else {
        let deadline = tick_deadline(cfg)?;
        let every = every_secs(&opts.every)?;
        Doc::CronJob(Object {
            api_version: "batch/v1",
            kind: "CronJob",
            metadata: meta,
            spec: CronJobSpec {
                schedule: Commented(
                    super::cron_when(&opts.every)?,
                    format!("every {}", opts.every),
                ),
                time_zone: "Etc/UTC",
                concurrency_policy: "Forbid",
                starting_deadline_seconds: every,
                successful_jobs_history_limit: 3,
                failed_jobs_history_limit: 3,
                job_template: JobTemplate {
                    metadata: Labels {
                        labels: labels(&name, component),
                    },
                    spec: JobSpec {
                        backoff_limit: Commented(0, "the runner retries the agent itself".into()),
                        active_deadline_seconds: Commented(deadline, deadline_note(deadline, true)),
                        template: PodTemplate {
                            metadata: pod_labels,
                            spec: pod,
                        },
                    },
                },
            },
        })
    };
    Ok(super::yaml(
        &header(shipped, opts, &name, &secret),
        &[claim, work],
    ))
}

fn deadline_note(secs: u64, tick: bool) -> String {
    let what = if tick {
        "one tick at its longest, from loop.toml's timeouts"
    } else {
        "the whole loop at its longest, from loop.toml"
    };
    format!("{}: {what}", crate::goal::format_duration(secs))
}

/// The comment on top: what the files are and the two commands to run. Only names orbit
/// checked (the objects', the Secret's, the namespace, the engine's) appear in it, never a
/// path or the goal.
fn header(shipped: &Shipped, opts: &Options, name: &str, secret: &str) -> Vec<String> {
    let ns = opts
        .namespace
        .as_ref()
        .map(|n| format!(" -n {n}"))
        .unwrap_or_default();
    let what = if opts.continuous {
        "a Job that runs the loop until it stops".to_string()
    } else {
        format!("a CronJob that runs one tick every {}", opts.every)
    };
    let mut lines = vec![
        format!("orbit schedule --kubernetes: {name}, {what},"),
        "with a volume holding the repository's clone (the loop's state lives there).".into(),
        "1. The agent's key, in a Secret (never in these files):".into(),
    ];
    match shipped.cfg.engine.api_key_env() {
        Some(key) => lines.push(format!(
            "   kubectl create secret generic {secret}{ns} --from-literal={key}=...{}",
            shipped
                .cfg
                .engine
                .provider_env()
                .iter()
                .map(|v| format!(" --from-literal={v}=..."))
                .collect::<String>()
        )),
        None => lines.push(format!(
            "   kubectl create secret generic {secret}{ns} --from-literal=NAME=... (each key reaches the agent as a variable)"
        )),
    }
    lines.extend([
        format!(
            "   a private repository: add --from-file={CREDENTIALS_KEY}=FILE (lines https://USER:TOKEN@HOST)"
        ),
        "2. kubectl apply -f THIS-FILE".into(),
    ]);
    let needs = match shipped.cfg.engine.package_hint() {
        Some(pkg) => format!("bash, git, {pkg} and the project's toolchain"),
        None => "bash, git, the agent command of loop.toml and the project's toolchain".into(),
    };
    lines.push(format!(
        "The image must hold {needs}; it runs as user {RUN_AS}."
    ));
    lines.push(format!(
        "Each run's output: kubectl logs -l app.kubernetes.io/instance={name}{ns} -c {}",
        if opts.continuous { "run" } else { "tick" }
    ));
    lines
}

/// `orbit schedule --kubernetes`.
pub fn run(args: &ScheduleArgs) -> Result<u8> {
    let shipped = super::shipped(args.dir.as_deref(), args.branch.as_deref())?;
    let image = args.image.clone().ok_or_else(|| {
        let needs = match shipped.cfg.engine.package_hint() {
            Some(pkg) => format!("bash, git, the agent ({pkg})"),
            None => "bash, git, the agent command of loop.toml".into(),
        };
        Error::Usage(format!(
            "--kubernetes needs --image IMAGE: an image with {needs} and the project's toolchain (the checks run in it)"
        ))
    })?;
    let opts = Options {
        every: args.every.clone(),
        image,
        namespace: args.namespace.clone(),
        secret: args.secret.clone(),
        url: clone_url(args.repo_url.as_deref(), &shipped)?,
        continuous: args.continuous,
    };
    let text = render(&shipped, &opts)?;
    super::emit(&text, args.output.as_deref())?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_what_kubernetes_accepts_and_never_shared() {
        assert_eq!(object_name("parser"), "orbit-parser");
        assert_eq!(object_name("make-tests-pass"), "orbit-make-tests-pass");
        for odd in ["Yes", "1_000", "a.b", "x".repeat(80).as_str(), "---x", "_"] {
            let n = object_name(odd);
            assert!(n.len() <= MAX_NAME, "{n}");
            check_dns("name", &n, false, MAX_NAME).unwrap();
            assert_ne!(n, object_name(&format!("{odd}2")));
        }
        assert_ne!(object_name("a.b"), object_name("a_b"));
    }

    #[test]
    fn ssh_remotes_have_an_https_twin() {
        assert_eq!(
            https_twin("git@github.com:team/project.git").as_deref(),
            Some("https://github.com/team/project.git")
        );
        assert_eq!(
            https_twin("ssh://git@git.example.org:2222/team/project.git").as_deref(),
            Some("https://git.example.org/team/project.git")
        );
        assert_eq!(https_twin("/srv/git/project.git"), None);
        assert_eq!(https_twin("../project"), None);
    }

    #[test]
    fn namespaces_and_secrets_are_checked() {
        assert!(check_dns("--namespace", "team-a", false, 63).is_ok());
        assert!(check_dns("--namespace", "Team", false, 63).is_err());
        assert!(check_dns("--namespace", "a.b", false, 63).is_err());
        assert!(check_dns("--secret", "a.b", true, 253).is_ok());
        assert!(check_dns("--secret", "-a", true, 253).is_err());
        assert!(check_image("ghcr.io/x/y:1").is_ok());
        assert!(check_image("x y").is_err());
    }
}
