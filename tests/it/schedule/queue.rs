//! `orbit schedule --queue`: the queue ticked by cron, systemd or tmux, each tick one
//! `orbit queue run --once`, run here as each scheduler runs it.

use std::fs;
use std::time::Duration;

use crate::queue::{MAKE_OWN_FILE, queue};
use crate::support::*;

#[test]
fn the_queues_crontab_line_ticks_it_under_crons_environment_and_installs_once() {
    let q = queue(MAKE_OWN_FILE);
    let out = q.repo.orbit(&["schedule", "--queue", "--cron"]);
    assert_code(&out, 2, "a queue without a task");
    assert!(text(&out).contains("orbit queue add"), "{}", text(&out));
    q.add("one", "Write one.txt", "test -f one.txt", &[]);
    q.add("two", "Write two.txt", "test -f two.txt", &[]);
    let out = q
        .repo
        .orbit(&["schedule", "--queue", "--cron", "--every", "10m"]);
    assert_ok(&out, "schedule --queue --cron");
    let line = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    let repo = fs::canonicalize(q.repo.path()).unwrap();
    assert!(
        line.starts_with(&format!("*/10 * * * * cd '{}' && PATH=", repo.display())),
        "{line}"
    );
    assert!(line.contains(" queue run --once >>"), "{line}");
    assert!(
        line.ends_with(&format!("# orbit:'{}/.orbit/queue'", repo.display())),
        "{line}"
    );
    // The command part as cron runs it: /bin/sh, from /, in cron's environment (HOME and
    // little else; the data directory, where the attempts' workspaces go, is found from it:
    // here the suite's, named as such). Each tick runs one attempt to its stop: 10 (a task
    // left), then 0 (every task done).
    let cron_command = line.splitn(6, ' ').nth(5).unwrap().to_string();
    let tick = || {
        let mut cmd = command("env");
        cmd.args(["-i"])
            .arg(format!("HOME={}", crate::support::sealed_home().display()))
            .arg(format!(
                "XDG_DATA_HOME={}",
                crate::support::sealed_data().display()
            ))
            .args(["sh", "-c", &cron_command])
            .current_dir("/");
        run_bounded(cmd, Duration::from_secs(300))
    };
    assert_code(&tick(), 10, "the first tick (a task left)");
    assert_code(&tick(), 0, "the second tick (every task done)");
    for t in ["one", "two"] {
        assert!(q.task(t).contains("**Status:** done"), "{}", q.task(t));
    }
    let log = q.repo.read(".orbit/queue/cron.log");
    assert!(log.contains("every task is done"), "{log}");
    // --install with a stand-in crontab: twice leaves one line; --remove takes it away.
    let table = q.repo.bin.path().join("table");
    q.repo.agent(
        "crontab",
        &format!(
            "t='{}'\nif [ \"$1\" = -l ]; then [ -f \"$t\" ] || exit 1; cat \"$t\"; else cat > \"$t\"; fi",
            table.display()
        ),
    );
    fs::write(&table, "0 3 * * * /usr/bin/backup\n").unwrap();
    for _ in 0..2 {
        assert_ok(
            &q.repo.orbit(&[
                "schedule",
                "--queue",
                "--cron",
                "--every",
                "10m",
                "--install",
            ]),
            "schedule --queue --cron --install",
        );
    }
    let installed = fs::read_to_string(&table).unwrap();
    assert_eq!(installed, format!("0 3 * * * /usr/bin/backup\n{line}\n"));
    let listed = q.repo.orbit(&["schedule", "--list"]);
    assert_ok(&listed, "schedule --list");
    assert!(text(&listed).contains("/.orbit/queue"), "{}", text(&listed));
    assert!(!text(&listed).contains("is gone"), "{}", text(&listed));
    assert_ok(
        &q.repo.orbit(&["schedule", "--queue", "--remove", "--cron"]),
        "schedule --queue --remove",
    );
    assert_eq!(
        fs::read_to_string(&table).unwrap(),
        "0 3 * * * /usr/bin/backup\n"
    );
}

#[test]
fn the_queues_systemd_units_pass_systemd_analyze_and_tick_it() {
    let q = queue(MAKE_OWN_FILE);
    q.add("one", "Write one.txt", "test -f one.txt", &[]);
    let home = tempfile::tempdir().unwrap();
    let mut cmd = command(orbit_bin());
    cmd.args([
        "schedule",
        "--queue",
        "--systemd",
        "--every",
        "30m",
        "--install",
    ])
    .current_dir(q.repo.path())
    .env("HOME", home.path())
    .env("PATH", q.repo.path_env());
    assert_ok(&run_bounded(cmd, Duration::from_secs(30)), "install");
    let unit_dir = home.path().join(".config/systemd/user");
    let mut names: Vec<String> = fs::read_dir(&unit_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("orbit-queue-"), "{names:?}");
    let service = fs::read_to_string(unit_dir.join(&names[0])).unwrap();
    let timer = fs::read_to_string(unit_dir.join(&names[1])).unwrap();
    assert!(service.contains("SuccessExitStatus=10 20 24"), "{service}");
    assert!(timer.contains("OnCalendar=*:0/30"), "{timer}");
    let field = |key: &str| {
        service
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {service}"))
            .to_string()
    };
    let exec = field("ExecStart=");
    assert!(exec.ends_with(" queue run --once"), "{exec}");
    let workdir = field("WorkingDirectory=");
    // systemd's own checker reads the units as systemd would.
    if let Some(analyze) = crate::schedule::on_path("systemd-analyze") {
        let out = command(analyze)
            .args(["verify", "--man=no"])
            .arg(unit_dir.join(&names[0]))
            .arg(unit_dir.join(&names[1]))
            .env("HOME", home.path())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "systemd-analyze verify: {said}");
        assert!(
            !said.contains(&names[0]) && !said.contains(&names[1]),
            "systemd-analyze verify: {said}"
        );
    }
    // The service's command, as systemd runs it: in its working directory, with its PATH.
    let path = field("Environment=\"PATH=")
        .trim_end_matches('"')
        .to_string();
    let argv: Vec<String> = exec.split(' ').map(str::to_string).collect();
    // The unit's environment as a user's systemd gives it: HOME (and the data directory
    // found from it: here the suite's, named as such).
    let mut cmd = command("env");
    cmd.arg("-i")
        .arg(format!("PATH={path}"))
        .arg(format!("HOME={}", crate::support::sealed_home().display()))
        .arg(format!(
            "XDG_DATA_HOME={}",
            crate::support::sealed_data().display()
        ))
        .args(&argv)
        .current_dir(&workdir);
    assert_code(
        &run_bounded(cmd, Duration::from_secs(300)),
        0,
        "the service's tick",
    );
    assert!(q.task("one").contains("**Status:** done"));
}

#[test]
fn the_queues_tmux_session_ticks_it_until_every_task_is_done() {
    if !tmux_available() {
        return;
    }
    let q = queue(MAKE_OWN_FILE);
    q.add("one", "Write one.txt", "test -f one.txt", &[]);
    let server = TmuxServer::new();
    let orbit = |args: &[&str]| {
        let mut cmd = command(orbit_bin());
        cmd.args(args)
            .current_dir(q.repo.path())
            .env("PATH", q.repo.path_env())
            .env("TMUX_TMPDIR", server.tmpdir());
        run_bounded(cmd, Duration::from_secs(60))
    };
    let out = orbit(&["schedule", "--queue", "--tmux", "--every", "1m"]);
    assert_ok(&out, "schedule --queue --tmux");
    assert!(
        text(&out).contains("tmux session orbit-queue-"),
        "{}",
        text(&out)
    );
    wait_for(
        "the task done by the session's tick",
        Duration::from_secs(300),
        || q.task("one").contains("**Status:** done"),
    );
    let again = orbit(&["schedule", "--queue", "--tmux"]);
    assert_code(&again, 2, "a second session");
    assert_ok(
        &orbit(&["schedule", "--queue", "--remove", "--tmux"]),
        "remove",
    );
    let out = orbit(&["schedule", "--queue", "--remove", "--tmux"]);
    assert!(text(&out).contains("had no schedule"), "{}", text(&out));
}
