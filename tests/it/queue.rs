//! `orbit queue`: tasks as files, run as real loops (child `orbit run`s of real bash) from
//! the integration branch, landed only when verified, merged and green on the merged tree.
//! The fake agent knows its task and attempt from its prompt (the goal the queue wrote),
//! records every prompt it is given, and waits on files, never on time.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::support::*;

mod crash;
mod home;
mod init_flags;
mod limits;
pub(crate) mod night;

/// A repository for a queue, a record directory outside it, and the agent's path.
pub(crate) struct Q {
    pub(crate) repo: Repo,
    pub(crate) rec: tempfile::TempDir,
    pub(crate) agent: PathBuf,
}

/// The fake agent: its task (`$task`) and attempt (`$n`) from the prompt, which it keeps in
/// REC/prompt-<task>-<n>.txt; then `body` (bash) runs in the workspace. A body that is done
/// writes `done.md` with `claim_done`.
pub(crate) fn queue(body: &str) -> Q {
    let repo = Repo::new();
    let rec = tempfile::tempdir().unwrap();
    let script = format!(
        r#"prompt=$(cat)
case ${{ORBIT_PHASE:-}} in confirm|wrapup) exit 0;; esac
REC={rec}
re='This is task `([a-z0-9-]+)` of an orbit queue, attempt ([0-9]+) of'
[[ $prompt =~ $re ]] || {{ echo "no task in the prompt" >&2; exit 1; }}
task=${{BASH_REMATCH[1]}} n=${{BASH_REMATCH[2]}}
printf '%s\n' "$prompt" > "$REC/prompt-$task-$n.txt"
claim_done() {{ echo "the verifier holds" > "$ORBIT_AGENT_DIR/done.md"; }}
# wait_for FILE-TEST...: polls until the test holds, 60 s at most (then exit 1).
wait_for() {{ local i; for ((i = 0; i < 1200; i++)); do "$@" && return 0; sleep 0.05; done; exit 1; }}
{body}
"#,
        rec = rec.path().display()
    );
    let agent = repo.agent("qagent", &script);
    Q { repo, rec, agent }
}

impl Q {
    /// `orbit queue add GOAL --verify CMD` with the fake agent, small caps, no sandbox.
    pub(crate) fn add(&self, name: &str, goal: &str, verify: &str, extra: &[&str]) {
        let exec = self.agent.display().to_string();
        let mut args = vec![
            "queue",
            "add",
            goal,
            "--name",
            name,
            "--verify",
            verify,
            "--engine",
            "custom",
            "--exec",
            &exec,
            "--sandbox",
            "none",
        ];
        if !extra.contains(&"--max-iterations") {
            args.extend_from_slice(&["--max-iterations", "2"]);
        }
        args.extend_from_slice(extra);
        assert_ok(&self.repo.orbit(&args), "orbit queue add");
    }

    /// The fields every backlog section of these tests carries.
    pub(crate) fn fields(&self) -> String {
        format!(
            "**Engine:** custom\n**Exec:** {}\n**Max-Iterations:** 2\n**Sandbox:** none\n",
            self.agent.display()
        )
    }

    pub(crate) fn run_cmd(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = command(orbit_bin());
        cmd.arg("queue")
            .arg("run")
            .args(args)
            .current_dir(self.repo.path())
            .env("PATH", self.repo.path_env())
            .env("RETRY_BASE_DELAY", "0")
            .env("KILL_GRACE", "1");
        cmd
    }

    /// `orbit queue run ARGS`, bounded.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        run_bounded(self.run_cmd(args), Duration::from_secs(600))
    }

    pub(crate) fn task(&self, name: &str) -> String {
        self.repo.read(&format!(".orbit/queue/{name}.md"))
    }

    pub(crate) fn status(&self) -> serde_json::Value {
        let out = self.repo.orbit(&["queue", "status", "--json"]);
        assert_ok(&out, "orbit queue status --json");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub(crate) fn task_json(&self, name: &str) -> serde_json::Value {
        self.status()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no task {name}"))
    }

    pub(crate) fn prompt(&self, task: &str, n: u32) -> String {
        fs::read_to_string(self.rec.path().join(format!("prompt-{task}-{n}.txt")))
            .unwrap_or_else(|e| panic!("the prompt of {task} attempt {n}: {e}"))
    }

    pub(crate) fn rec(&self) -> &Path {
        self.rec.path()
    }

    /// A file of the integration branch's tree, if there.
    pub(crate) fn on_integration(&self, path: &str) -> Option<String> {
        let out = command("git")
            .arg("-C")
            .arg(self.repo.path())
            .args(["show", &format!("orbit/queue/main:{path}")])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Writes `<task>.txt` and claims DONE: every test task's plain work.
pub(crate) const MAKE_OWN_FILE: &str = r#"echo "$task" > "$task.txt"; claim_done"#;

#[test]
fn a_backlog_of_six_tasks_with_dependencies_runs_to_done() {
    let q = queue(MAKE_OWN_FILE);
    let main_before = q.repo.git(&["rev-parse", "main"]);
    let f = q.fields();
    // base <- (left, right) <- join <- top; solo alone. A dependent's verifier needs the
    // files of what it comes after: it holds only on a tree where those were merged first.
    let backlog = format!(
        "# Backlog\n\n## Base\nLay the base.\n**Verifier:** test -f base.txt\n{f}\n\
         ## Left\n**Verifier:** test -f left.txt && test -f base.txt\n**After:** base\n{f}\n\
         ## Right\n**Verifier:** test -f right.txt && test -f base.txt\n**After:** base\n**Priority:** 5\n{f}\n\
         ## Join\n**Verifier:** test -f join.txt && test -f left.txt && test -f right.txt\n**After:** left, right\n{f}\n\
         ## Top\n**Verifier:** test -f top.txt && test -f join.txt\n**After:** join\n{f}\n\
         ## Solo\n**Verifier:** test -f solo.txt\n{f}"
    );
    let backlog_path = q.rec().join("backlog.md");
    fs::write(&backlog_path, backlog).unwrap();
    let out = q
        .repo
        .orbit(&["queue", "import", backlog_path.to_str().unwrap()]);
    assert_ok(&out, "orbit queue import");
    assert!(text(&out).contains("imported 6 task(s)"), "{}", text(&out));
    let out = q.run(&[]);
    assert_code(&out, 0, "orbit queue run");
    let s = q.status();
    for t in s["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "done", "{t}\n{}", text(&out));
        assert_eq!(t["attempts"], 0, "{t}");
        let merged = t["merged_commit"].as_str().unwrap();
        // The merged commit is on the integration branch.
        q.repo
            .git(&["merge-base", "--is-ancestor", merged, "orbit/queue/main"]);
    }
    for n in ["base", "left", "right", "join", "top", "solo"] {
        assert_eq!(
            q.on_integration(&format!("{n}.txt")).as_deref(),
            Some(format!("{n}\n").as_str())
        );
    }
    // The user's branch never moved, and their checkout holds none of it.
    assert_eq!(q.repo.git(&["rev-parse", "main"]), main_before);
    assert!(!q.repo.join("base.txt").exists());
    // Right (priority 5) started before left, both after base.
    let o = String::from_utf8_lossy(&out.stdout).into_owned();
    let at = |s: &str| o.find(s).unwrap_or_else(|| panic!("no '{s}' in\n{o}"));
    assert!(at("base: done") < at("right: attempt 1"));
    assert!(at("right: attempt 1") < at("left: attempt 1"), "{o}");
    // One attempt at a time by default: left started once right was done.
    assert!(at("right: done") < at("left: attempt 1"), "{o}");
}

#[test]
fn a_task_that_needs_three_attempts_carries_its_failures_to_the_next_prompt() {
    let q = queue(
        r#"if ((n >= 3)); then echo ok > ok.txt; claim_done; else echo "try $n" > "try-$n.txt"; fi"#,
    );
    q.add(
        "thrice",
        "Make ok.txt appear",
        r#"test -f ok.txt || { echo "MISSING-OK-FILE at $(ls | tr '\n' ' ')"; exit 1; }"#,
        &["--max-iterations", "1"],
    );
    let out = q.run(&[]);
    assert_code(&out, 0, "orbit queue run");
    let file = q.task("thrice");
    assert!(file.contains("**Status:** done"), "{file}");
    assert!(file.contains("**Attempts:** 2"), "{file}");
    for n in [1, 2] {
        assert!(file.contains(&format!("## Attempt {n} failure")), "{file}");
    }
    assert!(
        file.contains("MISSING-OK-FILE at README.md try-1.txt"),
        "{file}"
    );
    assert!(
        file.contains("MISSING-OK-FILE at README.md try-2.txt"),
        "{file}"
    );
    assert!(file.contains("max_iterations"), "{file}");
    // What the agent tried, from its loop's progress.
    assert!(file.contains("- decision:"), "{file}");
    // The first prompt had no failure; the third had both, with their verify output.
    assert!(
        !q.prompt("thrice", 1).contains("## Attempt"),
        "{}",
        q.prompt("thrice", 1)
    );
    let third = q.prompt("thrice", 3);
    assert!(third.contains("## Attempt 1 failure"), "{third}");
    assert!(third.contains("## Attempt 2 failure"), "{third}");
    assert!(
        third.contains("MISSING-OK-FILE at README.md try-2.txt"),
        "{third}"
    );
    let j = q.task_json("thrice");
    assert_eq!(j["attempts"], 2);
    assert_eq!(j["last_verdict"], "done");
}

#[test]
fn a_task_that_exhausts_its_attempts_is_failed_and_blocks_its_dependent() {
    let q = queue(r#"echo "no luck $n" > "luck-$n.txt""#);
    q.add(
        "hopeless",
        "Never works",
        "test -f never.txt",
        &["--max-iterations", "1", "--max-attempts", "2"],
    );
    q.add("after-it", "Comes after", "true", &["--after", "hopeless"]);
    let out = q.run(&[]);
    assert_code(&out, 24, "orbit queue run with a failed task");
    let file = q.task("hopeless");
    assert!(file.contains("**Status:** failed"), "{file}");
    assert!(file.contains("**Attempts:** 2"), "{file}");
    assert!(file.contains("## Attempt 1 failure"), "{file}");
    assert!(
        file.contains("## Attempt 2 (final) — budget exhausted"),
        "{file}"
    );
    let dep = q.task("after-it");
    assert!(dep.contains("**Status:** blocked"), "{dep}");
    assert!(dep.contains("**Reason:** hopeless failed"), "{dep}");
    assert!(
        !q.repo.join(".orbit/after-it-a1").exists(),
        "the dependent never started"
    );
    assert!(
        text(&out).contains("not done: after-it (blocked), hopeless (failed)"),
        "{}",
        text(&out)
    );
}

#[test]
fn two_conflicting_tasks_the_second_is_retried_from_the_new_head_and_merged() {
    // one writes shared.txt; two (attempt 1) waits until one is merged, then writes its own
    // shared.txt: a conflict. Its attempt 2 starts from the new head and appends.
    let q = queue(
        r#"case $task in
one) echo one > shared.txt ;;
two) if ((n == 1)); then
       wait_for git rev-parse -q --verify orbit/queue/main:shared.txt
       echo two > shared.txt
     else
       echo two >> shared.txt
     fi ;;
esac
claim_done"#,
    );
    q.add("one", "Write one", "grep -q one shared.txt", &[]);
    q.add("two", "Write two", "grep -q two shared.txt", &[]);
    let out = q.run(&["--jobs", "2"]);
    assert_code(&out, 0, "orbit queue run --jobs 2");
    let two = q.task("two");
    assert!(two.contains("## Attempt 1 failure"), "{two}");
    assert!(two.contains("conflicts in shared.txt"), "{two}");
    assert!(two.contains("**Status:** done"), "{two}");
    assert_eq!(
        q.on_integration("shared.txt").as_deref(),
        Some("one\ntwo\n")
    );
    // Attempt 2 started from the head one's merge made.
    let one_merged = q.task_json("one")["merged_commit"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        q.repo.read(".orbit/two-a2/.baseline-commit").trim(),
        one_merged
    );
    assert!(q.prompt("two", 2).contains("conflicts in shared.txt"));
}

/// A task's merge is judged by the verifiers of the merged tasks it names (its
/// `**After:**`) as well as its own: a merge that undoes a task it comes after, its own
/// verifier green, is a failed attempt, and the integration branch keeps the earlier work.
#[test]
fn a_merge_that_breaks_a_task_it_comes_after_is_never_done() {
    let q = queue(
        r#"case $task in
base) echo base > base.txt ;;
breaker) rm -f base.txt; echo b > breaker.txt ;;
esac
claim_done"#,
    );
    q.add("base", "Write base.txt", "test -f base.txt", &[]);
    q.add(
        "breaker",
        "Write breaker.txt",
        "test -f breaker.txt",
        &["--after", "base", "--max-attempts", "1"],
    );
    let out = q.run(&[]);
    let o = text(&out);
    assert_code(&out, 24, "orbit queue run");
    assert_eq!(q.task_json("base")["status"], "done", "{o}");
    // The attack was made: breaker's own loop reached a verified DONE on a branch without
    // base.txt.
    let dir = q.repo.join(".orbit/breaker-a1");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE", "{o}");
    let listed = q.repo.git(&["ls-tree", "--name-only", "orbit/breaker-a1"]);
    assert!(
        listed.contains("breaker.txt") && !listed.contains("base.txt"),
        "{listed}"
    );
    let file = q.task("breaker");
    assert!(file.contains("**Status:** failed"), "{file}\n{o}");
    assert!(
        file.contains(
            "the verifier of base (a task this one comes after) fails on the merged tree"
        ),
        "{file}"
    );
    assert!(!file.contains("**Merged:**"), "{file}");
    assert_eq!(q.on_integration("base.txt").as_deref(), Some("base\n"));
    assert_eq!(q.on_integration("breaker.txt"), None);
}

#[test]
fn a_task_green_in_its_loop_but_red_on_the_merged_tree_is_never_done() {
    let q = queue(
        r#"case $task in
first) echo a > a.txt ;;
second) wait_for git rev-parse -q --verify orbit/queue/main:a.txt; echo b > b.txt ;;
esac
claim_done"#,
    );
    q.add("first", "Make a", "test -f a.txt", &[]);
    q.add(
        "second",
        "Make b alone",
        "test -f b.txt && test ! -f a.txt",
        &["--max-attempts", "1"],
    );
    let out = q.run(&["--jobs", "2"]);
    assert_code(&out, 24, "orbit queue run");
    // Its own loop reached a verified DONE...
    assert_eq!(
        state_value(&q.repo.join(".orbit/second-a1"), "LAST_STATUS"),
        "DONE"
    );
    // ...but the merged tree is red: failed, never done, never merged.
    let second = q.task("second");
    assert!(second.contains("**Status:** failed"), "{second}");
    assert!(
        second.contains("the verifier fails on the merged tree"),
        "{second}"
    );
    assert!(!second.contains("**Merged:**"), "{second}");
    assert_eq!(q.on_integration("b.txt"), None);
}

/// A task whose goal an earlier merge already met: its agent changes nothing and claims
/// DONE, so its loop hands off no commit. It is done with no merge of its own, once its
/// verifier passes on the integration branch's head; the branch gets no empty merge, and
/// `orbit merge --queue` still brings the night home.
fn already_met(env: &[(&str, &str)], agent_runs: bool) {
    let q = queue(
        r#"case $task in
first) echo x > x.txt ;;
again) git status --porcelain > "$REC/again-status" ;;
esac
claim_done"#,
    );
    q.add("first", "Write x.txt", "test -f x.txt", &[]);
    q.add(
        "again",
        "Make sure x.txt is there",
        "test -f x.txt",
        &["--after", "first", "--max-attempts", "2"],
    );
    let mut cmd = q.run_cmd(&[]);
    cmd.envs(env.iter().copied());
    let out = run_bounded(cmd, Duration::from_secs(600));
    let o = text(&out);
    assert_code(&out, 0, "orbit queue run");
    // The agent really changed nothing: it ran and found a clean tree, and its loop ended
    // DONE; or its loop's red gate found the goal met before any agent ran.
    let loop_dir = q.repo.join(".orbit/again-a1");
    if agent_runs {
        assert_eq!(
            fs::read_to_string(q.rec().join("again-status")).unwrap(),
            ""
        );
        assert_eq!(state_value(&loop_dir, "LAST_STATUS"), "DONE");
    } else {
        assert!(!q.rec().join("again-status").exists());
        assert_eq!(state_value(&loop_dir, "STOP_REASON"), "vacuous_verify");
    }
    assert_eq!(
        q.repo.git(&["rev-parse", "orbit/again-a1"]).trim(),
        q.repo.read(".orbit/again-a1/.baseline-commit").trim()
    );
    let first_merge = q.task_json("first")["merged_commit"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        q.repo.read(".orbit/again-a1/.baseline-commit").trim(),
        first_merge
    );
    let again = q.task("again");
    assert!(again.contains("**Status:** done"), "{again}\n{o}");
    assert!(again.contains("**Attempts:** 0"), "{again}\n{o}");
    assert!(!again.contains("## Attempt"), "{again}\n{o}");
    assert!(!again.contains("**Merged:**"), "{again}");
    assert!(
        again.contains(&format!("**Verified-On:** {first_merge}")),
        "{again}"
    );
    assert!(!q.repo.join(".orbit/again-a2").exists());
    let j = q.task_json("again");
    assert_eq!(j["merged_commit"], serde_json::Value::Null);
    assert_eq!(j["verified_on"], first_merge.as_str());
    assert!(
        o.contains(
            "again: done with no change of its own: its verifier passes on orbit/queue/main at"
        ),
        "{o}"
    );
    // The integration branch holds first's merge only: no empty merge for again.
    assert_eq!(
        q.repo.git(&["rev-parse", "orbit/queue/main"]).trim(),
        first_merge
    );
    // And the night comes home.
    let out = q.repo.orbit(&["merge", "--queue"]);
    assert_ok(&out, "orbit merge --queue");
    assert_eq!(q.repo.git(&["rev-parse", "main"]).trim(), first_merge);
}

/// The loop's red gate finds the verifier green on the untouched tree (`vacuous_verify`):
/// the goal is met before the agent runs.
#[test]
fn a_task_already_met_on_the_integration_branch_is_done_without_a_merge_of_its_own() {
    already_met(&[], false);
}

/// With a green start allowed, the agent changes nothing and claims DONE: the loop ends DONE
/// with no commit of its own.
#[test]
fn a_done_loop_without_a_commit_of_its_own_is_done_without_a_merge() {
    already_met(&[("ALLOW_GREEN_START", "1")], true);
}

/// A loop's own green is not the queue's: a task whose verifier passes where its loop ran
/// (so the red gate finds it met before the agent) but fails on the integration branch's
/// head in the queue's clean checkout is a failed attempt, never done.
#[test]
fn a_task_met_only_in_its_own_workspace_is_not_done() {
    let q = queue("claim_done");
    // Green only in a directory whose path names the attempt's loop (its workspace).
    q.add(
        "mirage",
        "Nothing to do, it seems",
        r#"case $PWD in *mirage-a*) exit 0 ;; *) echo "RED AT $PWD"; exit 1 ;; esac"#,
        &["--max-attempts", "1"],
    );
    let out = q.run(&[]);
    let o = text(&out);
    assert_code(&out, 24, "orbit queue run");
    // The attack was made: the loop's red gate found the check green on the untouched tree.
    assert_eq!(
        state_value(&q.repo.join(".orbit/mirage-a1"), "STOP_REASON"),
        "vacuous_verify"
    );
    let file = q.task("mirage");
    assert!(file.contains("**Status:** failed"), "{file}\n{o}");
    assert!(!file.contains("**Verified-On:**"), "{file}");
    assert!(
        file.contains(
            "the loop made no change of its own, and the verifier fails on orbit/queue/main's head"
        ),
        "{file}"
    );
    assert!(file.contains("RED AT "), "{file}");
}

#[test]
fn a_kill_9_of_queue_run_loses_nothing_and_the_rerun_resumes_the_running_loop() {
    use std::os::unix::process::CommandExt;
    let q = queue(
        r#"echo "$n" >> "$REC/starts"
wait_for test -f "$REC/release"
echo x > x.txt; claim_done"#,
    );
    q.add("long", "A long task", "test -f x.txt", &[]);
    let mut cmd = q.run_cmd(&[]);
    cmd.process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let starts = q.rec().join("starts");
    wait_for("the agent's start", Duration::from_secs(120), || {
        starts.exists()
    });
    // A second runner of the same queue is refused while the first holds it.
    let second = q.run(&[]);
    assert_code(&second, 20, "a second orbit queue run");
    assert!(
        text(&second).contains(&format!("pid {}", child.id())),
        "{}",
        text(&second)
    );
    // The whole group (the queue, its orbit run, the runner, the agent) dies at once.
    let _ = command("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.wait();
    assert!(q.task("long").contains("**Status:** running"));
    assert_eq!(q.task_json("long")["running_loop"], ".orbit/long-a1");
    fs::write(q.rec().join("release"), "").unwrap();
    let out = q.run(&[]);
    assert_code(&out, 0, "the rerun");
    assert!(
        text(&out).contains("long: resuming its running attempt"),
        "{}",
        text(&out)
    );
    let file = q.task("long");
    assert!(file.contains("**Status:** done"), "{file}");
    assert!(file.contains("**Attempts:** 0"), "{file}");
    // The same loop ran on: its agent started twice, attempt 1 both times; no attempt 2.
    assert_eq!(fs::read_to_string(&starts).unwrap(), "1\n1\n");
    assert!(!q.repo.join(".orbit/long-a2").exists());
}

#[test]
fn jobs_3_runs_three_attempts_at_once() {
    // Each agent marks its start and goes on only when all three have started: with fewer
    // than three at once, none is done (the wait gives up and the attempt fails).
    let q = queue(
        r#"touch "$REC/start-$task"
wait_for test -f "$REC/start-j1" -a -f "$REC/start-j2" -a -f "$REC/start-j3"
echo "$task" > "$task.txt"; claim_done"#,
    );
    for n in ["j1", "j2", "j3"] {
        q.add(
            n,
            &format!("Job {n}"),
            &format!("test -f {n}.txt"),
            &["--max-attempts", "1"],
        );
    }
    let out = q.run(&["--jobs", "3"]);
    assert_code(&out, 0, "orbit queue run --jobs 3");
    for n in ["j1", "j2", "j3"] {
        assert_eq!(q.task_json(n)["status"], "done");
    }
}

/// `--jobs 2` runs at most two attempts at once: with two agents held at their start, the
/// third task's attempt is not even made until one of them is released. The queue builds on
/// the branch `--onto` names (its integration branch `orbit/queue/<branch>` made from it),
/// and neither that branch nor the one checked out moves.
#[test]
fn jobs_2_runs_at_most_two_attempts_at_once_onto_the_branch_named() {
    let q = queue(
        r#"touch "$REC/start-$task"
wait_for test -f "$REC/release-$task"
echo "$task" > "$task.txt"; claim_done"#,
    );
    for n in ["c1", "c2", "c3"] {
        q.add(
            n,
            &format!("Job {n}"),
            &format!("test -f {n}.txt && test -f dev.txt"),
            &["--max-attempts", "1"],
        );
    }
    q.repo.git(&["checkout", "-q", "-b", "dev"]);
    q.repo.write("dev.txt", "dev\n");
    q.repo.git(&["add", "dev.txt"]);
    q.repo.git(&["commit", "-q", "-m", "dev"]);
    q.repo.git(&["checkout", "-q", "main"]);
    let (main, dev) = (
        q.repo.git(&["rev-parse", "main"]).trim().to_string(),
        q.repo.git(&["rev-parse", "dev"]).trim().to_string(),
    );
    let log = q.rec().join("run.log");
    let mut cmd = q.run_cmd(&["--jobs", "2", "--onto", "dev"]);
    cmd.stdout(fs::File::create(&log).unwrap())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let started = |t: &str| q.rec().join(format!("start-{t}")).exists();
    wait_for("two agents' start", Duration::from_secs(300), || {
        started("c1") && started("c2")
    });
    // Two run, held: the third's attempt is not made while they hold their jobs (the
    // order of the queue's own lines below says it for certain).
    assert!(!started("c3"));
    assert!(
        !q.repo.join(".orbit/c3-a1").exists(),
        "a third attempt was made"
    );
    assert_eq!(q.task_json("c3")["status"], "ready");
    fs::write(q.rec().join("release-c1"), "").unwrap();
    wait_for("the third agent's start", Duration::from_secs(300), || {
        started("c3")
    });
    fs::write(q.rec().join("release-c2"), "").unwrap();
    fs::write(q.rec().join("release-c3"), "").unwrap();
    let status = child.wait().unwrap();
    let o = fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{status}: {o}");
    for n in ["c1", "c2", "c3"] {
        assert_eq!(q.task_json(n)["status"], "done", "{o}");
        let merged = q.task_json(n)["merged_commit"]
            .as_str()
            .unwrap()
            .to_string();
        q.repo
            .git(&["merge-base", "--is-ancestor", &merged, "orbit/queue/dev"]);
    }
    assert!(
        o.contains("integration branch orbit/queue/dev, from dev"),
        "{o}"
    );
    // The third attempt started only once the first released one ended.
    let at = |s: &str| o.find(s).unwrap_or_else(|| panic!("no '{s}' in\n{o}"));
    assert!(at("c1: done") < at("c3: attempt 1 of 1 started"), "{o}");
    q.repo
        .git(&["merge-base", "--is-ancestor", &dev, "orbit/queue/dev"]);
    assert_eq!(q.repo.git(&["rev-parse", "main"]).trim(), main);
    assert_eq!(q.repo.git(&["rev-parse", "dev"]).trim(), dev);
    assert_eq!(
        q.repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );
    // No queue was made onto the branch checked out.
    assert_eq!(
        q.repo.git(&["branch", "--list", "orbit/queue/main"]).trim(),
        ""
    );
}

/// A DONE is landed only when its hand-off verifies as `orbit verify` checks it: a loop
/// branch moved past the commit its envelope names (while the queue's runner was down) is a
/// failed attempt with the refusal in its section, and what it brought is never merged.
#[test]
fn a_done_whose_hand_off_does_not_verify_is_a_failed_attempt() {
    let q = queue(MAKE_OWN_FILE);
    q.add("t", "Write t.txt", "test -f t.txt", &[]);
    let mut cmd = q.run_cmd(&[]);
    cmd.env("ORBIT_QUEUE_KILL_AT", "landing");
    let out = run_bounded(cmd, Duration::from_secs(300));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
    // A commit slipped onto the DONE loop's branch after its envelope was made.
    let tip = q.repo.git(&["rev-parse", "orbit/t-a1"]).trim().to_string();
    let sneaky = q
        .repo
        .git(&[
            "commit-tree",
            &format!("{tip}^{{tree}}"),
            "-p",
            &tip,
            "-m",
            "sneaky",
        ])
        .trim()
        .to_string();
    q.repo
        .git(&["update-ref", "refs/heads/orbit/t-a1", &sneaky, &tip]);
    let out = q.run(&[]);
    let o = text(&out);
    assert_code(&out, 0, "the rerun");
    let file = q.task("t");
    assert!(file.contains("## Attempt 1 failure"), "{file}\n{o}");
    assert!(
        file.contains("orbit verify refused the hand-off: TREE_MOVED"),
        "{file}"
    );
    assert!(file.contains("**Status:** done"), "{file}");
    assert!(file.contains("**Attempts:** 1"), "{file}");
    let merged = q.task_json("t")["merged_commit"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        q.repo.git(&["rev-parse", &format!("{merged}^2")]).trim(),
        q.repo.git(&["rev-parse", "orbit/t-a2"]).trim(),
        "the second attempt's hand-off is the one merged"
    );
    let bad = command("git")
        .arg("-C")
        .arg(q.repo.path())
        .args(["merge-base", "--is-ancestor", &sneaky, "orbit/queue/main"])
        .status()
        .unwrap();
    assert!(!bad.success(), "the commit that did not verify was merged");
}

/// The queue's files are outside every workspace: a sandboxed agent that tries to rewrite
/// its own task file (by its absolute path) cannot, and the task is judged as written.
#[test]
fn a_sandboxed_agent_cannot_write_the_queues_files() {
    if !present_or_skipped(bwrap_available(), "ORBIT_REQUIRE_BWRAP", "bubblewrap") {
        return;
    }
    let q = queue(&format!(
        r#"f="{ORBIT_DIR}/queue/$task.md"
if [ -e "$f" ]; then seen=seen; else seen=hidden; fi
if printf '**Max-Attempts:** 99\n' 2>/dev/null >> "$f"; then r=WROTE; else r=REFUSED; fi
echo "$r $seen $f" > result.txt
claim_done"#
    ));
    let exec = q.agent.display().to_string();
    let out = q.repo.orbit(&[
        "queue",
        "add",
        "Report the write",
        "--name",
        "reach",
        "--verify",
        "test -f result.txt",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--sandbox",
        "bwrap",
        "--max-iterations",
        "2",
    ]);
    assert_ok(&out, "orbit queue add");
    let before = q.task("reach");
    let out = q.run(&[]);
    assert_code(&out, 0, "orbit queue run");
    let result = q.on_integration("result.txt").unwrap();
    // The attack was aimed at the task file itself.
    let target = fs::canonicalize(q.repo.join(".orbit/queue/reach.md")).unwrap();
    assert!(
        result.trim_end().ends_with(&target.display().to_string()),
        "{result} vs {}",
        target.display()
    );
    assert!(result.starts_with("REFUSED "), "{result}");
    let after = q.task("reach");
    assert!(!after.contains("**Max-Attempts:** 99"), "{after}");
    assert!(after.contains("**Max-Attempts:** 5"), "{after}");
    assert_eq!(
        after
            .replace("**Status:** done", "**Status:** ready")
            .lines()
            .take(6)
            .collect::<Vec<_>>(),
        before.lines().take(6).collect::<Vec<_>>()
    );
}

#[test]
fn a_hand_edited_task_is_taken_and_a_malformed_one_is_named_and_not_run() {
    let q = queue(MAKE_OWN_FILE);
    q.add("edited", "Make the edited file", "test -f nothing.txt", &[]);
    // A human mends the verifier by hand; another writes a task file from scratch, and one
    // with a field that does not parse.
    let path = q.repo.join(".orbit/queue/edited.md");
    let text_now = fs::read_to_string(&path).unwrap();
    fs::write(
        &path,
        text_now.replace("test -f nothing.txt", "test -f edited.txt"),
    )
    .unwrap();
    q.repo.write(
        ".orbit/queue/by-hand.md",
        &format!(
            "Written by hand.\n\n**Verifier:** test -f by-hand.txt\n{}",
            q.fields()
        ),
    );
    q.repo.write(
        ".orbit/queue/broken.md",
        "Broken.\n\n**Verifier:** true\n**Attempts:** lots\n",
    );
    let out = q.run(&[]);
    assert_code(&out, 24, "orbit queue run with a malformed task");
    assert!(
        text(&out).contains("broken: not run:")
            && text(&out).contains("broken.md:4: **Attempts:** 'lots' is not a whole number"),
        "{}",
        text(&out)
    );
    assert!(!q.repo.join(".orbit/broken-a1").exists());
    assert_eq!(q.task_json("edited")["status"], "done");
    assert_eq!(q.task_json("by-hand")["status"], "done");
    assert!(
        q.task_json("broken")["error"]
            .as_str()
            .unwrap()
            .contains("line 4")
    );
}

/// A backlog with a section that does not parse is refused whole: the line (of the file
/// given) and the reason named, no task added, not even the sections that parse.
#[test]
fn a_backlog_with_a_section_that_does_not_parse_adds_nothing_and_names_its_line() {
    let q = queue(MAKE_OWN_FILE);
    let f = q.fields();
    let path = q.rec().join("bad.md");
    fs::write(
        &path,
        format!("# Backlog\n\n## Good\n**Verifier:** true\n{f}\n## Bad\n**Verifier:** true\n**Priority:** high\n"),
    )
    .unwrap();
    let out = q.repo.orbit(&["queue", "import", path.to_str().unwrap()]);
    assert_code(&out, 2, "a backlog that does not parse");
    let o = text(&out);
    assert!(o.contains("does not parse, nothing added"), "{o}");
    assert!(
        o.contains("line 12: **Priority:** 'high' is not an integer (the section 'Bad')"),
        "{o}"
    );
    assert!(!q.repo.join(".orbit/queue/good.md").exists());
    assert!(!q.repo.join(".orbit/queue/bad.md").exists());
}

#[test]
fn a_cycle_or_an_after_naming_no_task_is_refused() {
    let q = queue(MAKE_OWN_FILE);
    let f = q.fields();
    let cycle_path = q.rec().join("cycle.md");
    fs::write(
        &cycle_path,
        format!("## Alpha\n**Verifier:** true\n**After:** beta\n{f}\n## Beta\n**Verifier:** true\n**After:** alpha\n{f}"),
    )
    .unwrap();
    let out = q
        .repo
        .orbit(&["queue", "import", cycle_path.to_str().unwrap()]);
    assert_code(&out, 2, "a backlog with a cycle");
    assert!(
        text(&out).contains("cycle: alpha → beta → alpha"),
        "{}",
        text(&out)
    );
    assert!(!q.repo.join(".orbit/queue/alpha.md").exists());
    let exec = q.agent.display().to_string();
    let out = q.repo.orbit(&[
        "queue", "add", "x", "--verify", "true", "--engine", "custom", "--exec", &exec, "--after",
        "ghost",
    ]);
    assert_code(&out, 2, "--after naming no task");
    assert!(
        text(&out).contains("--after ghost names no task"),
        "{}",
        text(&out)
    );
    // A cycle made by hand is named at run time and not run.
    q.repo.write(
        ".orbit/queue/p.md",
        &format!("P\n\n**Verifier:** true\n**After:** r\n{f}"),
    );
    q.repo.write(
        ".orbit/queue/r.md",
        &format!("R\n\n**Verifier:** true\n**After:** p\n{f}"),
    );
    let out = q.run(&[]);
    assert_code(&out, 24, "a queue with a cycle");
    assert!(
        text(&out).contains("in a dependency cycle: p → r → p"),
        "{}",
        text(&out)
    );
    assert!(!q.repo.join(".orbit/p-a1").exists());
}

#[test]
fn a_task_file_changed_during_its_attempt_is_named_and_not_taken() {
    // The agent (no sandbox here) rewrites its own task file: a hostile edit of the
    // definition it is judged by.
    let q = queue(
        r#"root=$(cd "$(git rev-parse --git-common-dir)/.." && pwd)
f="$root/.orbit/queue/$task.md"
sed -i 's/^Make it\./EVIL: Make it./; s/^\*\*Max-Attempts:\*\* .*/**Max-Attempts:** 99/' "$f"
grep -q EVIL "$f" && touch "$REC/edited"
echo y > y.txt; claim_done"#,
    );
    q.add("guarded", "Make it.", "test -f y.txt", &[]);
    let out = q.run(&[]);
    assert_code(&out, 0, "orbit queue run");
    assert!(
        q.rec().join("edited").exists(),
        "the agent did edit its task file"
    );
    assert!(
        text(&out).contains("guarded: its task file changed during attempt 1"),
        "{}",
        text(&out)
    );
    let file = q.task("guarded");
    assert!(!file.contains("EVIL"), "{file}");
    assert!(file.contains("**Max-Attempts:** 5"), "{file}");
    assert!(
        file.contains("### The task file changed during attempt 1"),
        "{file}"
    );
    let aside = q.repo.read(".orbit/queue/changed/guarded.attempt-1.md");
    assert!(aside.contains("EVIL"), "{aside}");
}

/// A queue with one sandboxed task, `probe`, whose committed check (`bash probe.sh`) is
/// hostile: it finds the user's repository through git and writes into it, and says so
/// when the write is refused; it fails (exit 7, after its attempt) where PROBE_FAIL is
/// set, so that a test can show the probe really ran where it says it did.
pub(crate) fn probe_queue() -> Q {
    let q = queue(
        r#"cat > probe.sh <<'PROBE'
common=$(git rev-parse --path-format=absolute --git-common-dir)
if echo pwned 2>/tmp/probe.err > "${common%/.git}/into-repo.txt"; then
  echo "PROBE WROTE into the repository"
else
  echo "PROBE REFUSED: $(cat /tmp/probe.err)"
fi
[ -z "${PROBE_FAIL:-}" ] || exit 7
exit 0
PROBE
claim_done"#,
    );
    let exec = q.agent.display().to_string();
    let out = q.repo.orbit(&[
        "queue",
        "add",
        "Write the probe",
        "--name",
        "probe",
        "--verify",
        "bash probe.sh",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--sandbox",
        "bwrap",
        "--max-iterations",
        "2",
    ]);
    assert_ok(&out, "orbit queue add");
    q
}

/// The verifier run on the merged tree runs the task's code, which an agent wrote: under
/// the task's loop's sandbox, as the loop's own checks ran, it cannot write into the user's
/// repository. (Run as the user, it could: this probe wrote there before.)
#[test]
fn the_verifier_on_the_merged_tree_runs_under_the_loops_sandbox() {
    if !present_or_skipped(bwrap_available(), "ORBIT_REQUIRE_BWRAP", "bubblewrap") {
        return;
    }
    let q = probe_queue();
    let out = q.run(&[]);
    assert_code(&out, 0, "orbit queue run");
    let probe = q.task("probe");
    assert!(probe.contains("**Status:** done"), "{probe}");
    assert!(q.on_integration("probe.sh").is_some());
    assert!(
        !q.repo.join("into-repo.txt").exists(),
        "the verifier on the merged tree wrote into the user's repository"
    );
}
