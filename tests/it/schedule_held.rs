//! The installed schedule of a loop is held (contract section 7): the crontab line or the
//! systemd units `orbit schedule --install` wrote are recorded in the loop directory
//! (schedule.installed), the runner compares them with the record at its start and holds
//! them through the tick, `orbit schedule --list` shows a changed one as modified and `orbit
//! audit` reports it as a P0 SCRIPT_TAMPER. An agent runs as the user: the hostile agents
//! here add an `ExecStartPre=` to the loop's unit, or rewrite its crontab line keeping the
//! marker, so that the next tick would run their program outside any sandbox.
//!
//! The crontab is a stand-in on PATH (a table file), the units live under a HOME of the
//! test's own, as in the `ops` tests: nothing here touches the real ones.

use std::fs;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use crate::support::{
    Repo, assert_code, assert_ok, bwrap_available, command, events_named, orbit_bin, run_bounded,
    state_value, text,
};

/// A loop of its own HOME (for the units) and stand-in crontab.
struct Scheduled {
    repo: Repo,
    home: tempfile::TempDir,
    table: PathBuf,
    dir: PathBuf,
    /// A program an agent plants in the schedule: run outside a loop run (ORBIT_PHASE
    /// unset, as a scheduler runs it), it writes `canary`.
    planted: PathBuf,
    canary: PathBuf,
}

impl Scheduled {
    /// A loop whose agent runs `body` (after reading its prompt and writing work.txt).
    fn new(body: &str) -> Scheduled {
        Scheduled::with(body, &[])
    }

    /// The same, rendered with the `orbit init` flags `extra`.
    fn with(body: &str, extra: &[&str]) -> Scheduled {
        let repo = Repo::new();
        let home = tempfile::tempdir().unwrap();
        let table = home.path().join("crontab.table");
        repo.agent(
            "crontab",
            &format!(
                "t='{}'\nif [ \"$1\" = -l ]; then [ -f \"$t\" ] || exit 1; cat \"$t\"; else cat > \"$t\"; fi",
                table.display()
            ),
        );
        fs::write(&table, "0 3 * * * /usr/bin/backup\n").unwrap();
        let canary = home.path().join("canary");
        let planted = repo.agent(
            "planted",
            &format!(
                "[ -n \"${{ORBIT_PHASE:-}}\" ] || echo ran >> '{}'",
                canary.display()
            ),
        );
        let script = format!(
            "cat >/dev/null; echo x >> work.txt; echo run >> '{}'\n{}",
            home.path().join("agent-runs").display(),
            body.replace("PLANTED", &planted.display().to_string())
                .replace(
                    "CRONTAB",
                    &repo.bin.path().join("crontab").display().to_string()
                )
        );
        let agent = repo.agent("worker", &script);
        let dir = repo.init_loop(&agent, &["test -f never-there"], extra);
        let dir = fs::canonicalize(dir).unwrap();
        Scheduled {
            repo,
            home,
            table,
            dir,
            planted,
            canary,
        }
    }

    fn orbit(&self, args: &[&str]) -> Output {
        let mut cmd = command(orbit_bin());
        cmd.args(args)
            .current_dir(self.repo.path())
            .env("HOME", self.home.path())
            .env("PATH", self.repo.path_env());
        run_bounded(cmd, Duration::from_secs(60))
    }

    fn tick(&self) -> Output {
        let home = self.home.path().display().to_string();
        self.repo
            .run_loop(&self.dir, &["--once"], &[("HOME", home.as_str())])
    }

    fn agent_runs(&self) -> usize {
        fs::read_to_string(self.home.path().join("agent-runs"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    fn service(&self) -> PathBuf {
        let units = self.home.path().join(".config/systemd/user");
        fs::read_dir(&units)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "service"))
            .expect("the loop's service unit")
    }

    /// The audit's findings of class SCRIPT_TAMPER, as (severity, evidence, fix).
    fn tamper_findings(&self) -> Vec<(String, String, String)> {
        let out = self.orbit(&["audit", "--json", ".orbit/test-goal"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("audit --json: {e}\n{}", text(&out)));
        v["loops"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["class"] == "SCRIPT_TAMPER")
            .map(|f| {
                let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
                (s("severity"), s("evidence"), s("fix"))
            })
            .collect()
    }

    fn list(&self) -> String {
        let out = self.orbit(&["schedule", "--list"]);
        assert_ok(&out, "schedule --list");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The stop of a tick: exit 3, ABORTED script_tamper, one integrity_fail event for
    /// `file` at `when`.
    fn assert_stopped(&self, out: &Output, file: &str, when: &str) {
        assert_code(out, 3, "the tick stops on the schedule's change");
        assert_eq!(state_value(&self.dir, "LAST_STATUS"), "ABORTED");
        assert_eq!(state_value(&self.dir, "STOP_REASON"), "script_tamper");
        let fails = events_named(&self.dir, "integrity_fail");
        assert_eq!(fails.len(), 1, "{fails:?}");
        let e = &fails[0].value;
        assert_eq!(e["code"], "script_tamper", "{e}");
        assert_eq!(e["file"], file, "{e}");
        assert_eq!(e["when"], when, "{e}");
    }

    /// Nothing of iteration 1's run was taken: no commit of it, its change not on the branch.
    fn assert_nothing_taken(&self) {
        let tree = self
            .repo
            .git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"]);
        assert!(
            !tree.lines().any(|l| l == "work.txt"),
            "the agent's change was committed:\n{tree}"
        );
        let trailers = self.repo.git(&[
            "log",
            "--format=%(trailers:key=Orbit-Iteration,valueonly)",
            "orbit/test-goal",
        ]);
        assert!(
            !trailers.lines().any(|l| l.trim() == "1"),
            "iteration 1 was committed: {trailers}"
        );
    }

    /// Runs `sh -c COMMAND` as a scheduler would (an empty environment, from /).
    fn run_as_scheduler(&self, command_line: &str) {
        let mut cmd = command("env");
        cmd.args(["-i", "sh", "-c", command_line]).current_dir("/");
        run_bounded(cmd, Duration::from_secs(120));
    }
}

/// The hostile agent adds an `ExecStartPre=` to the loop's service: the runner stops right
/// after its run (nothing of it taken), the list shows the unit modified with the line, the
/// audit has the P0 finding at the unit's line.
#[test]
fn an_agent_that_adds_a_command_to_the_loop_s_unit_is_stopped_right_after_its_run() {
    let s = Scheduled::new(
        "echo tried >> \"$ORBIT_WORKSPACE/tried\"; echo \"ws=$ORBIT_WORKSPACE pwd=$PWD\"\n\
         for f in \"$HOME\"/.config/systemd/user/orbit-*.service; do printf 'ExecStartPre=%s\\n' 'PLANTED' >> \"$f\"; done",
    );
    assert_ok(&s.orbit(&["schedule", "--systemd", "--install"]), "install");
    assert!(s.dir.join("schedule.installed").is_file(), "the record");
    let out = s.tick();
    // The attack was made: the unit runs the planted program before the tick, as the user.
    let service = s.service();
    let unit = fs::read_to_string(&service).unwrap();
    let pre = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStartPre="))
        .unwrap_or_else(|| panic!("no ExecStartPre= in the unit:\n{unit}"));
    assert_eq!(pre, s.planted.display().to_string());
    s.run_as_scheduler(pre);
    assert!(
        s.canary.is_file(),
        "the planted program runs at the next tick"
    );
    assert_eq!(s.agent_runs(), 1);
    s.assert_stopped(&out, &service.display().to_string(), "after agent");
    s.assert_nothing_taken();
    let list = s.list();
    assert!(
        list.contains("modified:") && list.contains(&format!("ExecStartPre={pre}")),
        "{list}"
    );
    assert!(
        list.contains("fix: review the unit files")
            && list.contains("--systemd --every 15m --install"),
        "{list}"
    );
    let findings = s.tamper_findings();
    let line = unit.lines().count();
    assert!(
        findings.iter().any(|(sev, ev, fix)| sev == "P0"
            && *ev == format!("{}:{line}", service.display())
            && fix.contains("--systemd --every 15m --install")),
        "{findings:?}"
    );
}

/// The hostile agent rewrites the loop's crontab line, keeping its `# orbit:` marker, to run
/// its program first: the runner stops right after its run; list and audit name the line.
#[test]
fn an_agent_that_rewrites_the_loop_s_crontab_line_is_stopped_right_after_its_run() {
    let s = Scheduled::new(
        "t=$(crontab -l)\nprintf '%s\\n' \"$t\" | sed \"s|cd / && |cd / \\&\\& 'PLANTED'; |\" | crontab -",
    );
    assert_ok(&s.orbit(&["schedule", "--cron", "--install"]), "install");
    let recorded = fs::read_to_string(&s.table).unwrap();
    let out = s.tick();
    let table = fs::read_to_string(&s.table).unwrap();
    assert_ne!(table, recorded, "the agent rewrote the crontab");
    let line = table.lines().nth(1).unwrap().to_string();
    let marker = format!(" # orbit:'{}'", s.dir.display());
    assert!(
        line.ends_with(&marker) && line.contains(&s.planted.display().to_string()),
        "the line keeps its marker and runs the planted program: {line}"
    );
    s.run_as_scheduler(line.splitn(6, ' ').nth(5).unwrap());
    assert!(
        s.canary.is_file(),
        "the planted program runs at the next tick"
    );
    assert_eq!(
        s.agent_runs(),
        1,
        "the stopped loop ran no agent at that tick"
    );
    s.assert_stopped(&out, "crontab", "after agent");
    s.assert_nothing_taken();
    let list = s.list();
    assert!(
        list.contains("modified:") && list.contains(&format!("+ 2: {line}")),
        "{list}"
    );
    assert!(list.contains("--cron --every 15m --install"), "{list}");
    let findings = s.tamper_findings();
    assert!(
        findings.iter().any(|(sev, ev, fix)| sev == "P0"
            && ev == "crontab:2"
            && fix.contains("--cron --every 15m --install")),
        "{findings:?}"
    );
}

/// The hostile agent leaves the loop's line alone and adds one of its own to the crontab
/// (cron runs it as the user, outside any sandbox): the runner stops right after its run and
/// names the line; the stop's fix says to review the crontab.
#[test]
fn an_agent_that_adds_a_line_of_its_own_to_the_crontab_is_stopped_right_after_its_run() {
    let s = Scheduled::new(
        "t=$(crontab -l)\nprintf '%s\\n' \"$t\" \"* * * * * 'PLANTED'\" | crontab -",
    );
    assert_ok(&s.orbit(&["schedule", "--cron", "--install"]), "install");
    let recorded = fs::read_to_string(&s.table).unwrap();
    let out = s.tick();
    let table = fs::read_to_string(&s.table).unwrap();
    let added = table
        .lines()
        .find(|l| !recorded.lines().any(|r| r == *l))
        .expect("the agent added a line")
        .to_string();
    s.run_as_scheduler(added.splitn(6, ' ').nth(5).unwrap());
    assert!(s.canary.is_file(), "cron would run the planted program");
    s.assert_stopped(&out, "crontab", "after agent");
    s.assert_nothing_taken();
    let t = text(&out);
    assert!(
        t.contains("outside the loop's own line") && t.contains(&added),
        "the stop names the line: {t}"
    );
    assert!(t.contains("crontab -l"), "the fix: {t}");
}

/// An honest scheduled loop runs and audits clean; a drop-in added to its unit between two
/// ticks stops the next one at its start, before any agent runs; removing it and recovering
/// lets the loop go on; `--remove` takes the record away.
#[test]
fn an_untouched_schedule_runs_clean_and_one_changed_between_ticks_stops_the_next_at_its_start() {
    let s = Scheduled::new("");
    for how in ["--cron", "--systemd"] {
        assert_ok(&s.orbit(&["schedule", how, "--install"]), how);
    }
    let record = fs::read_to_string(s.dir.join("schedule.installed")).unwrap();
    assert_eq!(record.lines().filter(|l| l.starts_with("cron ")).count(), 1);
    assert_eq!(record.lines().filter(|l| l.starts_with("unit ")).count(), 2);
    let out = s.tick();
    assert_code(&out, 10, "an honest tick of a scheduled loop");
    assert_eq!(s.agent_runs(), 1);
    assert!(!s.list().contains("modified"), "{}", s.list());
    assert_eq!(s.tamper_findings(), Vec::new());
    let audit = s.orbit(&["audit", ".orbit/test-goal"]);
    assert!(
        String::from_utf8_lossy(&audit.stdout).contains("0 P0, 0 P1"),
        "{}",
        text(&audit)
    );
    // A drop-in, by hand, between two ticks.
    let service = s.service();
    let drop_dir = PathBuf::from(format!("{}.d", service.display()));
    fs::create_dir_all(&drop_dir).unwrap();
    let drop_in = drop_dir.join("override.conf");
    fs::write(
        &drop_in,
        format!("[Service]\nExecStartPre={}\n", s.planted.display()),
    )
    .unwrap();
    let out = s.tick();
    s.assert_stopped(&out, &drop_in.display().to_string(), "start");
    assert_eq!(s.agent_runs(), 1, "no agent ran after the change");
    let findings = s.tamper_findings();
    assert!(
        findings.iter().any(|(sev, ev, fix)| sev == "P0"
            && *ev == format!("{}:1", drop_in.display())
            && fix.contains("remove it")),
        "{findings:?}"
    );
    assert!(s.list().contains("a drop-in of the loop's unit"));
    // The fix: the drop-in removed, the stop cleared.
    fs::remove_file(&drop_in).unwrap();
    let findings = s.tamper_findings();
    assert!(
        !findings.iter().any(|(sev, _, _)| sev == "P0"),
        "only the stop is left to clear: {findings:?}"
    );
    assert_ok(
        &s.orbit(&["recover", ".orbit/test-goal", "--restore-pinned"]),
        "recover",
    );
    assert_code(&s.tick(), 10, "the loop goes on");
    assert_eq!(s.agent_runs(), 2);
    assert_ok(&s.orbit(&["schedule", "--remove"]), "--remove");
    assert!(
        !s.dir.join("schedule.installed").exists(),
        "the record goes"
    );
}

/// A loop directory cloned elsewhere carries the record of the place it was scheduled in:
/// that is not its own, and its runner runs.
#[test]
fn a_record_of_another_loop_directory_is_not_this_loop_s() {
    let s = Scheduled::new("");
    assert_ok(&s.orbit(&["schedule", "--cron", "--install"]), "install");
    let record = fs::read_to_string(s.dir.join("schedule.installed")).unwrap();
    let elsewhere = record.replace(
        &format!("dir {}\n", s.dir.display()),
        "dir /elsewhere/.orbit/test-goal\n",
    );
    assert_ne!(elsewhere, record);
    fs::write(s.dir.join("schedule.installed"), elsewhere).unwrap();
    fs::write(&s.table, "").unwrap();
    assert_code(&s.tick(), 10, "a tick with another place's record");
    assert_eq!(s.tamper_findings(), Vec::new());
    let log = fs::read_to_string(s.dir.join("runner.log")).unwrap();
    assert!(
        log.contains(
            "records the schedule of another loop directory (/elsewhere/.orbit/test-goal)"
        ),
        "{log}"
    );
}

/// Under the sandbox the same two attacks fail at the write (HOME is read-only for the
/// agent): the unit and the crontab stay as installed, and the loop goes on.
#[test]
fn under_the_sandbox_the_agent_cannot_change_the_schedule() {
    if !bwrap_available() {
        return;
    }
    let s = Scheduled::with(
        r#"echo tried >> "$ORBIT_WORKSPACE/tried"
for f in "$HOME"/.config/systemd/user/orbit-*.service; do
  printf 'ExecStartPre=%s\n' 'PLANTED' >> "$f" && echo unit >> "$ORBIT_WORKSPACE/made"
done
t=$('CRONTAB' -l)
printf '%s\n' "$t" | sed "s|cd / && |cd / \&\& 'PLANTED'; |" | 'CRONTAB' - && echo cron >> "$ORBIT_WORKSPACE/made"
true"#,
        &["--sandbox", "bwrap"],
    );
    for how in ["--cron", "--systemd"] {
        assert_ok(&s.orbit(&["schedule", how, "--install"]), how);
    }
    let table = fs::read_to_string(&s.table).unwrap();
    let unit = fs::read_to_string(s.service()).unwrap();
    let out = s.tick();
    assert_code(&out, 10, "the sandboxed tick goes on");
    assert_eq!(
        s.repo.ws_read("tried"),
        "tried\n",
        "the agent ran its attacks"
    );
    assert!(
        !s.repo.ws().join("made").exists(),
        "a write to the schedule went through: {}",
        s.repo.ws_read("made")
    );
    assert_eq!(fs::read_to_string(&s.table).unwrap(), table);
    assert_eq!(fs::read_to_string(s.service()).unwrap(), unit);
    assert!(events_named(&s.dir, "integrity_fail").is_empty());
    assert_eq!(s.tamper_findings(), Vec::new());
}
