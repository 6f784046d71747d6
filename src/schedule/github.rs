//! `orbit schedule --github-actions`: a workflow that runs one tick of a loop on a schedule.
//!
//! Each run starts from a fresh checkout, so the loop's state travels between runs on a
//! branch of its own, `orbit-state/<name>`: one commit per run whose files are the loop
//! directory (its `.gitignore` keeps `notify.secrets` out). The work travels on the loop's
//! branch `orbit/<name>`, pushed after every run, from which the runner makes its workspace
//! again. The first run takes the loop directory as committed on the branch it runs on.
//! A run that finds the loop DONE, with no pull request yet, builds orbit (`cargo install
//! --locked` from the git repository and revision given at render time: orbit publishes no
//! prebuilt binary), verifies the hand-off with `orbit verify` and, when it verifies, opens
//! a pull request from `orbit/<name>` (once). The envelopes (git notes under
//! refs/notes/orbit and refs/notes/orbit-sig) are fetched before the tick and pushed with
//! the loop's branch, so that the DONE commit's note outlives the run and reaches the
//! receiver.
//!
//! Every script in the workflow is static text; the values (paths, names, the key's name)
//! reach it as step variables, placed by the YAML serializer. The agent's step sees the
//! API key and nothing that can push: the checkout keeps no credentials, and the token that
//! pushes is given to the later steps only.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use serde_saphyr::Commented;

use super::{Shipped, tick_deadline, tick_sh};
use crate::cli::ScheduleArgs;
use crate::error::{Error, Result};

/// GitHub runs a scheduled workflow at most this often (minutes).
pub const MIN_EVERY_MINUTES: u64 = 5;
/// The longest a job may run on a GitHub-hosted runner (minutes).
pub const MAX_JOB_MINUTES: u64 = 360;
/// The condition of the steps that verify a hand-off.
const HANDOFF_IF: &str = "steps.handoff.outputs.verify == 'true'";
/// The prefix of the branch that carries a loop's state between runs.
pub const STATE_PREFIX: &str = "orbit-state/";

#[derive(Serialize)]
struct Workflow {
    name: String,
    on: On,
    permissions: BTreeMap<&'static str, &'static str>,
    concurrency: Concurrency,
    jobs: Jobs,
}

#[derive(Serialize)]
struct On {
    schedule: Vec<Cron>,
    workflow_dispatch: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Cron {
    cron: Commented<String>,
}

#[derive(Serialize)]
struct Concurrency {
    group: String,
    #[serde(rename = "cancel-in-progress")]
    cancel_in_progress: bool,
}

#[derive(Serialize)]
struct Jobs {
    tick: Job,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Job {
    runs_on: &'static str,
    timeout_minutes: Commented<u64>,
    defaults: Defaults,
    steps: Vec<Step>,
}

#[derive(Serialize)]
struct Defaults {
    run: RunDefaults,
}

#[derive(Serialize)]
struct RunDefaults {
    shell: &'static str,
}

#[derive(Serialize, Default)]
struct Step {
    name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'static str>,
    #[serde(rename = "if", skip_serializing_if = "Option::is_none")]
    condition: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uses: Option<&'static str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    with: BTreeMap<&'static str, Value>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<String>,
}

/// Fails the run early, and plainly, when the repository has no secret for the agent.
pub const KEY_CHECK_SH: &str = r#"if [ -z "$AGENT_KEY" ]; then
  echo "::error::the repository has no secret $AGENT_KEY_NAME: add it (Settings, Secrets and variables, Actions)"
  exit 1
fi
"#;

/// Installs the agent's CLI.
pub const INSTALL_SH: &str = "npm install --global \"$AGENT_PACKAGE\"\n";

/// Installs the agent's CLI written in Python (aider), from PyPI.
pub const INSTALL_PY_SH: &str =
    "python -m pip install --disable-pip-version-check \"$AGENT_PACKAGE\"\n";

/// Brings back the loop directory as the last run left it and the loop's branch.
pub const RESTORE_SH: &str = r#"# The loop directory as the last run left it (its state branch), else as committed.
state="refs/remotes/origin/$STATE_BRANCH"
if git rev-parse --quiet --verify "$state" >/dev/null; then
  rm -rf -- "$LOOP_DIR"
  mkdir -p -- "$LOOP_DIR"
  git archive "$state" | tar -x -C "$LOOP_DIR"
fi
if [ ! -f "$LOOP_DIR/run-loop.sh" ]; then
  echo "::error::$LOOP_DIR is not committed on $GITHUB_REF_NAME: commit the loop directory as orbit init made it"
  exit 1
fi
# The work so far: the loop's branch, from which the runner makes its workspace again.
if git rev-parse --quiet --verify "refs/remotes/origin/$LOOP_BRANCH" >/dev/null; then
  git branch --force "$LOOP_BRANCH" "refs/remotes/origin/$LOOP_BRANCH"
fi
# The envelopes as the remote has them (git notes): the runner adds the DONE commit's note
# to them, and the save step pushes them back with the loop's branch.
auth=$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 | tr -d '\n')
echo "::add-mask::$auth"
git -c "http.$GITHUB_SERVER_URL/.extraheader=AUTHORIZATION: basic $auth" \
  fetch --quiet origin '+refs/notes/orbit*:refs/notes/orbit*'
# The agent's folder stays out of every commit: the runner writes this line into the
# repository's excludes when it first makes the workspace, and a fresh checkout lacks it.
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p -- "$(dirname -- "$exclude")"
grep -qxF '/.orbit-agent' -- "$exclude" 2>/dev/null || echo '/.orbit-agent' >>"$exclude"
# Who the loop's commits are by.
git config user.name "github-actions[bot]"
git config user.email "41898282+github-actions[bot]@users.noreply.github.com"
"#;

/// Pushes the loop's branch, then the loop directory as one commit on the state branch.
pub const SAVE_SH: &str = r#"# The work first (the loop's branch), then the loop directory as one commit on the state
# branch, its files at the top. The token pushes through a header, never into .git/config.
auth=$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 | tr -d '\n')
echo "::add-mask::$auth"
push() {
  git -c "http.$GITHUB_SERVER_URL/.extraheader=AUTHORIZATION: basic $auth" push --quiet origin "$@"
}
# The envelopes (the notes the runner writes at DONE) go with the branch. Another loop's
# run may have pushed notes since this run fetched them: then theirs and ours are merged
# (each note is on a commit of its own loop) and pushed again.
refs=()
if git rev-parse --quiet --verify "refs/heads/$LOOP_BRANCH" >/dev/null; then
  refs+=("refs/heads/$LOOP_BRANCH:refs/heads/$LOOP_BRANCH")
fi
notes=()
for ref in refs/notes/orbit refs/notes/orbit-sig; do
  if git rev-parse --quiet --verify "$ref" >/dev/null; then
    notes+=("$ref")
    refs+=("$ref:$ref")
  fi
done
if [ "${#refs[@]}" -gt 0 ] && ! push "${refs[@]}"; then
  for ref in "${notes[@]}"; do
    theirs="refs/notes/remote-${ref#refs/notes/}"
    git -c "http.$GITHUB_SERVER_URL/.extraheader=AUTHORIZATION: basic $auth" \
      fetch --quiet origin "+$ref:$theirs" || continue
    git notes --ref="$ref" merge --quiet --strategy=cat_sort_uniq "$theirs"
  done
  push "${refs[@]}"
fi
git_dir=$(git rev-parse --absolute-git-dir)
tree=$(
  cd "$LOOP_DIR" || exit 1
  export GIT_DIR="$git_dir" GIT_WORK_TREE=. GIT_INDEX_FILE="$RUNNER_TEMP/orbit-state.index"
  rm -f -- "$GIT_INDEX_FILE"
  git add --all -- . ':(exclude).run-tmp'
  git write-tree
)
state="refs/remotes/origin/$STATE_BRANCH"
if git rev-parse --quiet --verify "$state" >/dev/null; then
  if [ "$(git rev-parse "$state^{tree}")" = "$tree" ]; then
    echo "the loop's state is unchanged"
    exit 0
  fi
  commit=$(git commit-tree -p "$state" -m "orbit: the state of $LOOP_NAME" "$tree")
else
  commit=$(git commit-tree -m "orbit: the state of $LOOP_NAME" "$tree")
fi
push "$commit:refs/heads/$STATE_BRANCH"
"#;

/// Whether this run has a hand-off to verify: the loop is DONE and no pull request from its
/// branch exists yet (step output `verify`).
pub const HANDOFF_SH: &str = r#"if grep -qx 'LAST_STATUS=DONE' "$LOOP_DIR/state.env" &&
  [ -z "$(gh pr list --head "$LOOP_BRANCH" --state all --json number --jq '.[].number')" ]; then
  echo "verify=true" >>"$GITHUB_OUTPUT"
fi
"#;

/// Builds orbit on the runner from the git repository and revision given at render time
/// (orbit publishes no prebuilt binary).
pub const INSTALL_ORBIT_SH: &str =
    "cargo install --locked --quiet --git \"$ORBIT_GIT\" --rev \"$ORBIT_REV\" orbit\n";

/// Verifies the DONE loop's hand-off as its receiver will (its envelope, the note on the
/// DONE commit): a hand-off that does not verify (exit 3) fails the run, and no pull
/// request is opened.
pub const VERIFY_SH: &str = r#"rc=0
orbit verify "$LOOP_DIR" || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "::error::the hand-off of $LOOP_BRANCH does not verify (orbit verify, above): no pull request"
fi
exit "$rc"
"#;

/// Opens the pull request of a DONE loop, once (a closed one is not opened again).
pub const PULL_REQUEST_SH: &str = r#"if ! grep -qx 'LAST_STATUS=DONE' "$LOOP_DIR/state.env"; then
  exit 0
fi
if [ -n "$(gh pr list --head "$LOOP_BRANCH" --state all --json number --jq '.[].number')" ]; then
  echo "a pull request from $LOOP_BRANCH exists already"
  exit 0
fi
base=$(sed -n 's/^ORIGIN_BRANCH=//p' "$LOOP_DIR/state.env")
gh pr create --head "$LOOP_BRANCH" --base "${base:-$BASE_BRANCH}" \
  --title "orbit: $LOOP_NAME is DONE" --body-file "$LOOP_DIR/goal.md"
"#;

/// The tick step's script: the shared tick of the loop directory, given absolute.
pub fn tick_step_sh() -> String {
    format!(
        "# The loop directory as the runner's argument, not in the agent's environment.\n\
         set -- \"$GITHUB_WORKSPACE/$LOOP_DIR\"\n\
         unset LOOP_DIR\n\
         {}",
        tick_sh(true)
    )
}

/// `--every` as a cron schedule GitHub honours: 5 minutes at least.
fn schedule(every: &str) -> Result<String> {
    let secs = super::every_secs(every)?;
    if secs < MIN_EVERY_MINUTES * 60 {
        return Err(Error::Usage(format!(
            "--every {every}: GitHub runs a scheduled workflow at most every {MIN_EVERY_MINUTES} minutes (and often later than scheduled): give --every {MIN_EVERY_MINUTES}m or more"
        )));
    }
    super::cron_when(every)
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Where the workflow builds orbit from: a git repository (https) and a revision of it.
pub struct OrbitSource {
    pub git: String,
    pub rev: String,
}

impl OrbitSource {
    /// `--orbit-git` and `--orbit-rev`, both needed: orbit publishes no prebuilt binary, so
    /// the runner builds the one the user names.
    pub fn from_args(git: Option<&str>, rev: Option<&str>) -> Result<OrbitSource> {
        let (Some(git), Some(rev)) = (git, rev) else {
            return Err(Error::Usage(
                "--github-actions verifies a DONE loop's hand-off with orbit verify on the runner before it opens the pull request, and orbit publishes no prebuilt binary to download: name the orbit to build there with --orbit-git URL --orbit-rev REV (the https address of a git repository of orbit and a commit or tag of it; the runner runs cargo install --locked --git URL --rev REV orbit)".into(),
            ));
        };
        if !git.starts_with("https://") || git.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(Error::Usage(format!(
                "--orbit-git {git}: give the https address of a git repository of orbit (the runner has no key for ssh), such as https://example.org/you/orbit.git"
            )));
        }
        if rev.is_empty()
            || rev.starts_with('-')
            || !rev
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
        {
            return Err(Error::Usage(format!(
                "--orbit-rev {rev}: give a commit (its hash) or a tag of --orbit-git, such as v0.1.0"
            )));
        }
        Ok(OrbitSource {
            git: git.to_string(),
            rev: rev.to_string(),
        })
    }
}

/// The workflow file for the loop.
pub fn render(shipped: &Shipped, every: &str, orbit: &OrbitSource) -> Result<String> {
    let cfg = &shipped.cfg;
    let cron = schedule(every)?;
    let loop_branch = shipped.loop_branch();
    let state_branch = format!("{STATE_PREFIX}{}", cfg.name);
    let minutes = tick_deadline(cfg)?.div_ceil(60) + 10;
    let (minutes, note) = if minutes > MAX_JOB_MINUTES {
        eprintln!(
            "orbit: note: one tick of {} may take {minutes} minutes by its timeouts; a GitHub-hosted job stops at {MAX_JOB_MINUTES} (the runner saves its state when stopped)",
            cfg.name
        );
        (
            MAX_JOB_MINUTES,
            "GitHub's limit; a tick may take longer by loop.toml",
        )
    } else {
        (
            minutes,
            "one tick at its longest, from loop.toml's timeouts",
        )
    };
    let loop_env = [
        ("LOOP_DIR", shipped.rel.as_str()),
        ("LOOP_BRANCH", loop_branch.as_str()),
        ("STATE_BRANCH", state_branch.as_str()),
    ];
    let mut steps = vec![Step {
        name: "Check out the repository, every branch",
        uses: Some("actions/checkout@v4"),
        with: BTreeMap::from([
            ("fetch-depth", Value::from(0)),
            ("persist-credentials", Value::from(false)),
        ]),
        ..Step::default()
    }];
    let mut tick_env = env(&[("LOOP_DIR", &shipped.rel)]);
    if let Some(key) = cfg.engine.api_key_env() {
        let secret = format!("${{{{ secrets.{key} }}}}");
        steps.push(Step {
            name: "Check the agent's key",
            env: env(&[("AGENT_KEY", &secret), ("AGENT_KEY_NAME", key)]),
            run: Some(KEY_CHECK_SH.into()),
            ..Step::default()
        });
        if let Some(package) = cfg.engine.npm_package() {
            steps.push(Step {
                name: "Set up Node.js",
                uses: Some("actions/setup-node@v4"),
                with: BTreeMap::from([("node-version", Value::from(22))]),
                ..Step::default()
            });
            steps.push(Step {
                name: "Install the agent",
                env: env(&[("AGENT_PACKAGE", package)]),
                run: Some(INSTALL_SH.into()),
                ..Step::default()
            });
        } else if let Some(package) = cfg.engine.pypi_package() {
            steps.push(Step {
                name: "Set up Python",
                uses: Some("actions/setup-python@v5"),
                with: BTreeMap::from([("python-version", Value::from("3.12"))]),
                ..Step::default()
            });
            steps.push(Step {
                name: "Install the agent",
                env: env(&[("AGENT_PACKAGE", package)]),
                run: Some(INSTALL_PY_SH.into()),
                ..Step::default()
            });
        }
        tick_env.insert(key.into(), secret);
        for var in cfg.engine.provider_env() {
            tick_env.insert((*var).into(), format!("${{{{ secrets.{var} }}}}"));
        }
    }
    if !cfg.notify_webhook_env.is_empty() {
        tick_env.insert(
            cfg.notify_webhook_env.clone(),
            format!("${{{{ secrets.{} }}}}", cfg.notify_webhook_env),
        );
    }
    let mut restore_env = env(&loop_env);
    restore_env.insert("GITHUB_TOKEN".into(), "${{ github.token }}".into());
    steps.push(Step {
        name: "Bring back the loop's state",
        id: Some("restore"),
        env: restore_env,
        run: Some(RESTORE_SH.into()),
        ..Step::default()
    });
    steps.push(Step {
        name: "One tick of the loop",
        id: Some("tick"),
        env: tick_env,
        run: Some(tick_step_sh()),
        ..Step::default()
    });
    let mut handoff_env = env(&loop_env);
    handoff_env.insert("GH_TOKEN".into(), "${{ github.token }}".into());
    steps.push(Step {
        name: "Is there a hand-off to verify",
        id: Some("handoff"),
        env: handoff_env,
        run: Some(HANDOFF_SH.into()),
        ..Step::default()
    });
    steps.push(Step {
        name: "Build orbit",
        condition: Some(HANDOFF_IF),
        env: env(&[("ORBIT_GIT", &orbit.git), ("ORBIT_REV", &orbit.rev)]),
        run: Some(INSTALL_ORBIT_SH.into()),
        ..Step::default()
    });
    steps.push(Step {
        name: "Verify the hand-off",
        id: Some("verify"),
        condition: Some(HANDOFF_IF),
        env: env(&loop_env),
        run: Some(VERIFY_SH.into()),
        ..Step::default()
    });
    let mut save_env = env(&loop_env);
    save_env.insert("LOOP_NAME".into(), cfg.name.clone());
    save_env.insert("GITHUB_TOKEN".into(), "${{ github.token }}".into());
    steps.push(Step {
        name: "Keep the loop's state",
        condition: Some("always() && steps.restore.outcome == 'success'"),
        env: save_env,
        run: Some(SAVE_SH.into()),
        ..Step::default()
    });
    let mut pr_env = env(&loop_env);
    pr_env.insert("LOOP_NAME".into(), cfg.name.clone());
    pr_env.insert("GH_TOKEN".into(), "${{ github.token }}".into());
    pr_env.insert(
        "BASE_BRANCH".into(),
        "${{ github.event.repository.default_branch }}".into(),
    );
    steps.push(Step {
        name: "Open a pull request when the loop is DONE and verified",
        condition: Some("steps.verify.outcome == 'success'"),
        env: pr_env,
        run: Some(PULL_REQUEST_SH.into()),
        ..Step::default()
    });
    let workflow = Workflow {
        name: format!("orbit {}", cfg.name),
        on: On {
            schedule: vec![Cron {
                cron: Commented(cron, format!("every {every}, in UTC")),
            }],
            workflow_dispatch: BTreeMap::new(),
        },
        permissions: BTreeMap::from([("contents", "write"), ("pull-requests", "write")]),
        concurrency: Concurrency {
            group: format!("orbit-{}", cfg.name),
            cancel_in_progress: false,
        },
        jobs: Jobs {
            tick: Job {
                runs_on: "ubuntu-latest",
                timeout_minutes: Commented(minutes, note.into()),
                defaults: Defaults {
                    run: RunDefaults { shell: "bash" },
                },
                steps,
            },
        },
    };
    Ok(super::yaml(&header(shipped), &[workflow]))
}

/// The comment on top: where the file goes and what the repository needs. Only the loop's
/// name (letters, digits, '-', '_', '.') and orbit's own words appear in it.
fn header(shipped: &Shipped) -> Vec<String> {
    let name = &shipped.cfg.name;
    let mut lines = vec![
        format!("orbit schedule --github-actions: the loop {name}, one tick per run."),
        format!("Commit this file as .github/workflows/orbit-{name}.yml on the default branch,"),
        "with the loop directory as orbit init made it (the first run takes it from there).".into(),
    ];
    if let Some(key) = shipped.cfg.engine.api_key_env() {
        // The key, and what else the CLI needs to reach its provider (qwen: its address and
        // model), in one sentence.
        let vars = shipped.cfg.engine.provider_env();
        let needs = match vars {
            [] => format!("the secret {key}"),
            _ => format!("the secrets {key}, {}", vars.join(" and ")),
        };
        lines.push(format!(
            "The repository needs {needs} (Settings, Secrets and variables, Actions)."
        ));
    } else {
        lines
            .push("A custom agent: add the steps that install it and the secrets it reads.".into());
    }
    lines.extend([
        format!(
            "State: the branch {STATE_PREFIX}{name}; the work: orbit/{name}, a pull request when DONE"
        ),
        "and verified (Settings, Actions, General: allow GitHub Actions to create pull requests).".into(),
        "At DONE the runner builds orbit (cargo install --locked from ORBIT_GIT at ORBIT_REV below)".into(),
        "and runs orbit verify; the envelopes (refs/notes/orbit*) are pushed with the branch.".into(),
    ]);
    lines
}

/// `orbit schedule --github-actions`.
pub fn run(args: &ScheduleArgs) -> Result<u8> {
    let shipped = super::shipped(args.dir.as_deref(), args.branch.as_deref())?;
    let orbit = OrbitSource::from_args(args.orbit_git.as_deref(), args.orbit_rev.as_deref())?;
    let text = render(&shipped, &args.every, &orbit)?;
    super::emit(&text, args.output.as_deref())?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_schedules_five_minutes_at_least() {
        assert!(schedule("1m").is_err());
        assert!(schedule("4m").is_err());
        assert_eq!(schedule("5m").unwrap(), "*/5 * * * *");
        assert_eq!(schedule("1h").unwrap(), "0 */1 * * *");
        let err = schedule("2m").unwrap_err().to_string();
        assert!(err.contains("--every 5m"), "{err}");
    }
}
