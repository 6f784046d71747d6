//! Shared test helpers: temporary repositories, fake agents, bounded child processes.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The home directory every command of the suite runs with: its own git configuration
/// (an identity, no signing, nothing else), so that a developer's global settings (a
/// `core.hooksPath`, `commit.gpgsign`, an `init.defaultBranch`, ...) never change what a
/// test sees. It lives in cargo's per-target scratch directory.
pub fn sealed_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sealed-home");
        fs::create_dir_all(&home).unwrap();
        let config = "[user]\n\tname = Orbit Test\n\temail = orbit-test@example.invalid\n\
                      [commit]\n\tgpgsign = false\n";
        // Several test processes may start at once: write aside, then rename; and never
        // when it is there already, for a loop of another process that watches it (the
        // user's git configuration, to a runner) would take the new file for tampering.
        let path = home.join(".gitconfig");
        if fs::read_to_string(&path).ok().as_deref() != Some(config) {
            let tmp = home.join(format!(".gitconfig.{}", std::process::id()));
            fs::write(&tmp, config).unwrap();
            fs::rename(&tmp, &path).unwrap();
        }
        home
    })
}

/// The data directory (`XDG_DATA_HOME`) every command of the suite runs with: the loops'
/// default workspaces are made under it, never under the developer's ~/.local/share. One
/// per test process, in the system's temporary directory (outside any checkout, as a
/// user's data directory is); each [`Repo`] removes its own workspaces from it when it
/// goes.
pub fn sealed_data() -> &'static Path {
    static DATA: OnceLock<PathBuf> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("orbit-it-data-")
            .tempdir()
            .unwrap();
        dir.keep()
    })
}

/// Where the default workspaces of the repository at `repo` are, under [`sealed_data`] (as
/// the runner names them: src/locate/workspace.rs).
pub fn workspaces_of(repo: &Path) -> PathBuf {
    let common = fs::canonicalize(repo.join(".git")).unwrap();
    sealed_data()
        .join("orbit/workspaces")
        .join(orbit::locate::workspace::repo_id(&common))
}

/// A command sealed from the developer's machine: a cleared environment with only PATH,
/// TMPDIR, a fixed locale, the sealed HOME, data directory and git configuration (no system
/// file, the sealed global one). Every child of the suite is made here; a test adds what
/// it means to set with `.env()`.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let home = sealed_home();
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("HOME", home)
        .env("XDG_DATA_HOME", sealed_data())
        .env("LANG", "C.UTF-8")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", home.join(".gitconfig"));
    if let Some(tmp) = std::env::var_os("TMPDIR") {
        cmd.env("TMPDIR", tmp);
    }
    cmd
}

/// A private tmux server for one test (its sockets in a directory of its own, `TMUX_TMPDIR`),
/// killed however the test ends.
pub struct TmuxServer {
    pub dir: TempDir,
}

impl TmuxServer {
    pub fn new() -> TmuxServer {
        TmuxServer {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The value of `TMUX_TMPDIR` that reaches this server.
    pub fn tmpdir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = command("tmux")
            .env("TMUX_TMPDIR", self.dir.path())
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
    }
}

pub fn orbit_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_orbit"))
}

/// The placeholder a fake agent's body ([`Repo::agent`]) names the repository's `.orbit`
/// directory by (its loop directories): replaced by that directory's absolute path.
pub const ORBIT_DIR: &str = "@ORBIT_DIR@";

/// A temporary git repository with one commit, and a separate bin directory for fake
/// agents (outside the repository, so they never show up as untracked files).
pub struct Repo {
    pub dir: TempDir,
    pub bin: TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        Repo::with_prefix("orbit-it-")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(p, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// The workspace of the test loop `init_loop` makes: its git worktree, where the agent
    /// works and the checks run (by default under the data directory, outside the
    /// repository).
    pub fn ws(&self) -> PathBuf {
        self.ws_of("test-goal")
    }

    /// A work tree beside the test loop's workspace: `.clean` (the clean checkout), `.c1`
    /// (a candidate's) ...
    pub fn ws_sibling(&self, suffix: &str) -> PathBuf {
        PathBuf::from(format!("{}{suffix}", self.ws().display()))
    }

    /// The default workspace of this repository's loop `name`.
    pub fn ws_of(&self, name: &str) -> PathBuf {
        workspaces_of(self.path()).join(name)
    }

    /// A file of the test loop's workspace.
    pub fn ws_read(&self, rel: &str) -> String {
        let p = self.ws().join(rel);
        fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
    }

    /// Runs git in the test loop's workspace; panics on failure.
    pub fn ws_git(&self, args: &[&str]) -> String {
        let out = command("git")
            .arg("-C")
            .arg(self.ws())
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?} in the workspace failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs git in the repository; panics on failure.
    pub fn git(&self, args: &[&str]) -> String {
        let out = command("git")
            .arg("-C")
            .arg(self.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes an executable fake agent `name` into the bin directory. `body` is bash; it
    /// runs with the ORBIT_* environment of contract section 5.1. Asked to confirm a DONE
    /// claim (`ORBIT_PHASE=confirm`), a fake agent agrees: it writes `CONFIRMED` into
    /// `.orbit-agent/confirm.md` before its body runs (a body may write another verdict).
    /// A body names the repository's `.orbit` directory (where the loop directories are) as
    /// [`ORBIT_DIR`], which is replaced by its absolute path: the workspace is elsewhere
    /// (under the data directory), so no path relative to it reaches the loops.
    pub fn agent(&self, name: &str, body: &str) -> PathBuf {
        assert!(
            !body.contains("$ORBIT_WORKSPACE/../.."),
            "fake agent {name}: the workspace is not under .orbit; name the loops' directory as {ORBIT_DIR}"
        );
        let loops = fs::canonicalize(self.path()).unwrap().join(".orbit");
        let body = body.replace(ORBIT_DIR, &loops.display().to_string());
        let body = body.as_str();
        let p = self.bin.path().join(name);
        fs::write(
            &p,
            format!("#!/usr/bin/env bash\nset -u\n{CONFIRMS}\n{body}\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// PATH with the fake-agent directory first.
    pub fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `orbit ARGS` in the repository, bounded.
    pub fn orbit(&self, args: &[&str]) -> Output {
        let mut cmd = command(orbit_bin());
        cmd.args(args)
            .current_dir(self.path())
            .env("PATH", self.path_env());
        run_bounded(cmd, Duration::from_secs(120))
    }

    /// `orbit init` with a custom fake agent and the given checks; returns the loop dir.
    /// The loop runs without the OS sandbox unless `extra` names one: most tests prove what
    /// the runner catches after a run, which the sandbox (a new loop's default where
    /// bubblewrap runs) would refuse at the write instead; tests/it/sandbox.rs tests that.
    pub fn init_loop(&self, agent: &Path, checks: &[&str], extra: &[&str]) -> PathBuf {
        let exec = agent.display().to_string();
        let mut args: Vec<&str> = vec!["init", "test goal", "--engine", "custom", "--exec", &exec];
        for c in checks {
            args.push("--verify");
            args.push(c);
        }
        if !extra.contains(&"--sandbox") {
            args.extend_from_slice(&["--sandbox", "none"]);
        }
        // The DONE's adequacy measure (`report` by default) runs the checks again in
        // checkouts of its own; a test of something else leaves it off, a test of the
        // measure asks for it.
        if !extra.contains(&"--adequacy") {
            args.extend_from_slice(&["--adequacy", "off"]);
        }
        args.extend_from_slice(extra);
        let out = self.orbit(&args);
        assert_ok(&out, "orbit init");
        self.join(".orbit/test-goal")
    }

    /// The git the loop finds on the repository's PATH: what a stand-in git in front of it
    /// runs for the calls it does not fake.
    pub fn real_git(&self) -> String {
        let out = command("bash")
            .args(["-c", "command -v git"])
            .env("PATH", self.path_env())
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// `bash run-loop.sh ARGS` started in the background (output piped), for tests that
    /// signal or race a running loop.
    pub fn spawn_loop(
        &self,
        loop_dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> std::process::Child {
        let mut cmd = command("bash");
        cmd.arg(loop_dir.join("run-loop.sh"))
            .args(args)
            .current_dir(self.path())
            .env("PATH", self.path_env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("spawn run-loop.sh")
    }

    /// `bash run-loop.sh ARGS` with extra environment, bounded. The bound is a safety net
    /// for a wedged run, never a measure of speed: a loop that makes a virtual environment
    /// in its setup and again in its clean checkout took over 180 s on a 2-core machine
    /// running other builds beside it (load 20).
    pub fn run_loop(&self, loop_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.run_loop_within(loop_dir, args, env, Duration::from_secs(600))
    }

    /// `run_loop` for a loop of many iterations: the bound is a safety net for a wedged
    /// run, never a measure of speed (a busy machine may take many times longer).
    pub fn run_loop_within(
        &self,
        loop_dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        limit: Duration,
    ) -> Output {
        let mut cmd = command("bash");
        cmd.arg(loop_dir.join("run-loop.sh"))
            .args(args)
            .current_dir(self.path())
            .env("PATH", self.path_env())
            .env("RETRY_BASE_DELAY", "0")
            .env("KILL_GRACE", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        run_bounded(cmd, limit)
    }
}

/// Runs a command with stdin closed in its own process group, killing the whole group
/// after `limit` (then the test fails, naming the command).
pub fn run_bounded(cmd: Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    try_bounded(cmd, limit)
        .unwrap_or_else(|hung| panic!("command {what} did not finish within {limit:?}\n{hung}"))
}

/// [`run_bounded`], but a command still running after `limit` is killed with its group and
/// gives `Err`: what its group was doing then (each process, its state and its command
/// line) and what it had printed. What it printed is read until it exits and then for 10 s
/// at most: a grandchild that escaped the group may hold the pipes open.
pub fn try_bounded(mut cmd: Command, limit: Duration) -> Result<Output, String> {
    use std::os::unix::process::CommandExt;
    use std::sync::mpsc;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("spawn");
    let pid = child.id();
    let read_all = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            let _ = tx.send(b);
        });
        rx
    };
    let out_rx = read_all(Box::new(child.stdout.take().unwrap()));
    let err_rx = read_all(Box::new(child.stderr.take().unwrap()));
    // The command's exit, as an event: waited for in a thread of its own.
    let (exit_tx, exit_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });
    let status = match exit_rx.recv_timeout(limit) {
        Ok(st) => st.expect("wait"),
        Err(_) => {
            let group = group_processes(pid);
            let _ = command("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            let _ = exit_rx.recv_timeout(Duration::from_secs(10));
            let (out, err) = (join_bounded(&out_rx), join_bounded(&err_rx));
            return Err(format!(
                "its process group and their children then:\n{group}--- stdout\n{}\n--- stderr\n{}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            ));
        }
    };
    Ok(Output {
        status,
        stdout: join_bounded(&out_rx),
        stderr: join_bounded(&err_rx),
    })
}

/// The processes of group `pgid` and every descendant of one (a bounded run the runner
/// starts has a group of its own): group, pid, parent, state, what the kernel has it wait
/// on, age and command line, as ps shows them.
fn group_processes(pgid: u32) -> String {
    let out = command("ps")
        .args(["-eo", "pgid=,pid=,ppid=,stat=,wchan:24=,etime=,args="])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let rows: Vec<(Vec<&str>, &str)> = out
        .lines()
        .map(|l| (l.split_whitespace().take(3).collect::<Vec<&str>>(), l))
        .filter(|(f, _)| f.len() == 3)
        .collect();
    let target = pgid.to_string();
    let mut pids: std::collections::BTreeSet<&str> = rows
        .iter()
        .filter(|(f, _)| f[0] == target)
        .map(|(f, _)| f[1])
        .collect();
    loop {
        let more: Vec<&str> = rows
            .iter()
            .filter(|(f, _)| pids.contains(f[2]) && !pids.contains(f[1]))
            .map(|(f, _)| f[1])
            .collect();
        if more.is_empty() {
            break;
        }
        pids.extend(more);
    }
    rows.iter()
        .filter(|(f, _)| pids.contains(f[1]))
        .map(|(_, l)| format!("{l}\n"))
        .collect()
}

/// A reader thread's bytes once the pipe closes, or after 10 s a note that a leftover
/// process holds it open.
fn join_bounded(rx: &std::sync::mpsc::Receiver<Vec<u8>>) -> Vec<u8> {
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| b"<output still held open by a leftover process>".to_vec())
}

pub fn text(out: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn assert_ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what} failed:\n{}", text(out));
}

pub fn assert_code(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: unexpected exit code\n{}",
        text(out)
    );
}

/// Writes the contract prelude (what every generated script carries before its static
/// parts) into `dir`, for harnesses that source the static parts by themselves; returns
/// its path.
pub fn write_prelude(dir: &Path) -> PathBuf {
    let p = dir.join("prelude.sh");
    fs::write(&p, orbit::contract::bash::prelude()).unwrap();
    p
}

/// `bash -c` over the contract prelude and the named static parts of templates/lib (as a
/// rendered script has them, in that order), then `body`; the caller adds the positional
/// arguments ($1, ...). The prelude is written into `work`, and so is a part that runs a
/// perl program (templates/lib/perl/), with the program placed as a rendered script holds
/// it (under `work`/.placed-parts/); the others are sourced where they are.
pub fn bash_with_parts(work: &Path, parts: &[&str], body: &str) -> Command {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/lib");
    let mut script = format!(
        "set -Eeuo pipefail\nsource '{}'\n",
        write_prelude(work).display()
    );
    for part in parts {
        let rel = format!("lib/{part}.sh");
        let (_, text) = orbit::render::STATIC_PARTS
            .iter()
            .find(|(n, _)| *n == rel)
            .unwrap_or_else(|| panic!("{rel} is not a static part"));
        let placed = orbit::render::place_perl(text);
        let path = if placed == *text {
            lib.join(format!("{part}.sh"))
        } else {
            let dir = work.join(".placed-parts");
            fs::create_dir_all(&dir).unwrap();
            let p = dir.join(format!("{}.sh", part.replace('/', "-")));
            fs::write(&p, &*placed).unwrap();
            p
        };
        script.push_str(&format!("source '{}'\n", path.display()));
    }
    script.push_str(body);
    let mut cmd = command("bash");
    cmd.arg("-c").arg(script).arg("harness");
    cmd
}

/// Reads a state.env value.
pub fn state_value(loop_dir: &Path, key: &str) -> String {
    let text = fs::read_to_string(loop_dir.join("state.env")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
        .unwrap_or_else(|| panic!("{key} missing from state.env:\n{text}"))
}

/// Whether shellcheck can run. CI sets ORBIT_REQUIRE_SHELLCHECK=1 to make it mandatory;
/// elsewhere a missing shellcheck is reported and the check skipped.
/// `ok`, or, when a tool is missing: a panic where `require` (an environment variable) is
/// "1" (CI), else a notice that the assertions needing it are skipped.
pub fn present_or_skipped(ok: bool, require: &str, what: &str) -> bool {
    if !ok {
        if std::env::var(require).as_deref() == Ok("1") {
            panic!("{what} is required ({require}=1) but not installed");
        }
        eprintln!("notice: {what} is not installed; skipping the assertions that need it");
    }
    ok
}

/// Whether cargo-mutants is on the PATH this suite was started with (`cargo install
/// cargo-mutants`): the tests of `orbit adequacy --tool cargo-mutants` run the real tool.
/// .ci/run builds it and requires it (ORBIT_REQUIRE_CARGO_MUTANTS=1); elsewhere its tests
/// are skipped with a notice when it is absent.
pub fn cargo_mutants_available() -> bool {
    let ok = command("cargo-mutants")
        .args(["mutants", "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    present_or_skipped(ok, "ORBIT_REQUIRE_CARGO_MUTANTS", "cargo-mutants")
}

/// Whether perl with Digest::SHA is here (the runner's hashing coprocess).
pub fn hasher_available() -> bool {
    let ok = command("perl")
        .args(["-MDigest::SHA", "-e", "1"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    present_or_skipped(ok, "ORBIT_REQUIRE_PERL", "perl with Digest::SHA")
}

pub fn shellcheck_available() -> bool {
    let ok = command("shellcheck")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    present_or_skipped(ok, "ORBIT_REQUIRE_SHELLCHECK", "shellcheck")
}

/// The headless browser the HTML report is opened in (Debian's `chromium`). CI sets
/// ORBIT_REQUIRE_CHROMIUM=1 to make it mandatory; elsewhere a missing chromium is reported
/// and the check skipped.
pub fn chromium_available() -> bool {
    let ok = command("chromium")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    present_or_skipped(ok, "ORBIT_REQUIRE_CHROMIUM", "chromium")
}

/// Whether bubblewrap can start a sandbox here (installed, and user namespaces it may
/// use). CI sets ORBIT_REQUIRE_BWRAP=1 to make it mandatory; elsewhere the sandbox tests
/// that need a real one are skipped with a notice.
pub fn bwrap_available() -> bool {
    let ok = command("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--unshare-pid", "--die-with-parent", "true"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    present_or_skipped(
        ok,
        "ORBIT_REQUIRE_BWRAP",
        "bubblewrap (bwrap) able to start a sandbox",
    )
}

/// The python of a virtual environment that holds pytest: `ORBIT_PYTEST_PYTHON`, else the
/// one `.ci/run` installs (`/opt/orbit-pytest`). CI sets ORBIT_REQUIRE_PYTEST=1 to make it
/// mandatory; elsewhere the tests that run real pytest are skipped with a notice.
pub fn pytest_python() -> Option<PathBuf> {
    let python = std::env::var_os("ORBIT_PYTEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/orbit-pytest/bin/python"));
    let ok = command(&python)
        .args(["-m", "pytest", "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    present_or_skipped(ok, "ORBIT_REQUIRE_PYTEST", "pytest (in /opt/orbit-pytest)")
        .then_some(python)
}

/// The python of a virtual environment that holds the official `opentelemetry-proto`
/// package (its `ExportTraceServiceRequest` and protobuf's JSON reader):
/// `ORBIT_OTEL_PYTHON`, else the one `.ci/run` installs (`/opt/orbit-otel`). CI sets
/// ORBIT_REQUIRE_OTEL=1 to make it mandatory; elsewhere the assertions that need it are
/// skipped with a notice.
pub fn otel_python() -> Option<PathBuf> {
    let python = std::env::var_os("ORBIT_OTEL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/orbit-otel/bin/python"));
    let ok = command(&python)
        .args([
            "-c",
            "import opentelemetry.proto.collector.trace.v1.trace_service_pb2, google.protobuf.json_format",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    present_or_skipped(
        ok,
        "ORBIT_REQUIRE_OTEL",
        "opentelemetry-proto (in /opt/orbit-otel)",
    )
    .then_some(python)
}

/// Runs `bash -n` and shellcheck (all severities) on a script, and on the lib.sh it loads
/// (its code is evaluated, which shellcheck cannot follow); panics with the findings.
pub fn assert_script_clean(path: &Path) {
    // A library is checked once per text (many loops share one; shellcheck takes a while).
    static CHECKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let lib = path.with_file_name("lib.sh");
    if path != lib
        && lib.is_file()
        && fs::read_to_string(path)
            .unwrap()
            .contains("ORBIT_LIB_SHA256=")
    {
        assert_script_clean(&lib);
    }
    if path == lib {
        let key = library_key(&fs::read_to_string(path).unwrap());
        let mut checked = CHECKED.lock().unwrap();
        if checked.contains(&key) {
            return;
        }
        checked.push(key);
    }
    let out = command("bash").arg("-n").arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "bash -n {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    if shellcheck_available() {
        let out = command("shellcheck")
            .args(["-s", "bash", "-S", "style"])
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "shellcheck {}:\n{}",
            path.display(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// The key a library is shellchecked once under: its sha256 with each plain single-quoted
/// value of the loop's settings (the body of `orbit_settings`) read as `'x'`. shellcheck
/// never looks into a single-quoted word of letters, digits, spaces and `._/:@%+=,-` (no
/// `$`, backquote, backslash or quote for a finding to be about), so libraries that differ
/// only in such values (a loop's name, its agent's path) have the same findings, and one
/// check answers for them all: loops that differ in their parts are checked each.
pub fn library_key(text: &str) -> String {
    let plain = |v: &str| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || " ._/:@%+=,-".contains(c))
    };
    let Some(start) = text.find("\norbit_settings() {\n") else {
        return orbit::fsx::sha256_hex(text.as_bytes());
    };
    let end = text[start + 1..]
        .find("\n}\n")
        .map_or(text.len(), |e| start + 1 + e);
    let mut key = String::with_capacity(text.len());
    key.push_str(&text[..start]);
    for line in text[start..end].split_inclusive('\n') {
        // Quotes alternate (the odd pieces of a line split at its quotes are quoted words)
        // on a line without a backslash or `$'`, whose quotes may be escaped: such a line
        // is kept as it is.
        if line.contains('\\') || line.contains("$'") {
            key.push_str(line);
            continue;
        }
        for (i, piece) in line.split('\'').enumerate() {
            if i > 0 {
                key.push('\'');
            }
            key.push_str(if i % 2 == 1 && plain(piece) {
                "x"
            } else {
                piece
            });
        }
    }
    key.push_str(&text[end..]);
    orbit::fsx::sha256_hex(key.as_bytes())
}

/// Processes whose environment carries `marker` (Linux /proc); used to prove that no
/// agent process outlives its loop.
pub fn processes_with_env(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(env) = fs::read(e.path().join("environ"))
            && env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

impl Repo {
    /// Like [`Repo::new`], with the repository directory named by `prefix` (spaces,
    /// quotes and `$` are welcome).
    pub fn with_prefix(prefix: &str) -> Repo {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
        let bin = tempfile::Builder::new()
            .prefix("orbit-bin-")
            .tempdir()
            .unwrap();
        let repo = Repo { dir, bin };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Orbit Test"]);
        repo.git(&["config", "user.email", "orbit-test@example.invalid"]);
        repo.git(&["config", "commit.gpgsign", "false"]);
        repo.write("README.md", "test repository\n");
        repo.git(&["add", "README.md"]);
        repo.git(&["commit", "-q", "-m", "init"]);
        repo
    }
}

impl Drop for Repo {
    /// The repository's default workspaces go with it.
    fn drop(&mut self) {
        if let Ok(common) = fs::canonicalize(self.join(".git"))
            && common.is_dir()
        {
            let _ = fs::remove_dir_all(
                sealed_data()
                    .join("orbit/workspaces")
                    .join(orbit::locate::workspace::repo_id(&common)),
            );
        }
    }
}

/// The first lines of every fake agent: in the confirmation phase, the verdict CONFIRMED.
const CONFIRMS: &str = r#"if [ "${ORBIT_PHASE:-}" = confirm ] && [ -n "${ORBIT_AGENT_DIR:-}" ]; then
  echo CONFIRMED > "$ORBIT_AGENT_DIR/confirm.md"
fi"#;

// ---- loops and their records, shared by the runner, guard and reliability suites

/// An agent that appends one line per iteration and claims DONE once `work.txt` holds `n`
/// lines. Confirmation and wrap-up runs change nothing.
pub fn counting_agent(repo: &Repo, n: usize) -> PathBuf {
    repo.agent(
        "counter",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
if [ "$(wc -l < work.txt)" -ge {n} ]; then echo "every check holds" > "$ORBIT_AGENT_DIR/done.md"; fi
echo '{{"type":"result","total_cost_usd":0.25}}'"#
        ),
    )
}

/// Passes once work.txt holds `n` lines; its output differs each iteration (letters, since
/// the runner's failure signature ignores digits), so a loop that makes progress is never
/// taken for one repeating the same failure.
pub fn count_check(n: usize) -> String {
    format!("test -f work.txt && tr 0-9 a-j < work.txt && test \"$(wc -l < work.txt)\" -ge {n}")
}

pub fn read_kv(path: &Path) -> BTreeMap<String, String> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// state.env is sealed, the journal chains, progress.md is whole, and every recorded
/// iteration has one final progress entry, one iteration_end event and a result.env that
/// agree.
pub fn assert_records_agree(dir: &Path) {
    let state = orbit::state::State::parse_file(&dir.join("state.env")).expect("state.env parses");
    let sidecar =
        orbit::state::Sidecar::parse(&fs::read(dir.join("state.env.sha256")).unwrap()).unwrap();
    assert_eq!(
        sidecar,
        orbit::state::Sidecar::for_state(&state.print(), state.generation),
        "sidecar seals state.env"
    );
    let journal = orbit::events::read(&fs::read(dir.join("events.jsonl")).unwrap_or_default());
    assert_eq!(journal.error, None, "events.jsonl chain");
    let progress = orbit::progress::parse(&fs::read(dir.join("progress.md")).unwrap());
    assert_eq!(progress.torn_tail_line, None, "progress.md torn tail");
    assert!(progress.first_broken().is_none(), "progress.md chain");
    assert!(progress.stray_lines.is_empty(), "progress.md stray lines");
    let last = if state.last_status == "ABORTED" {
        state.next_iteration
    } else {
        state.next_iteration - 1
    };
    for i in 1..=last {
        let result = read_kv(&dir.join(format!("iterations/{i:06}/result.env")));
        let finals: Vec<_> = progress
            .entries
            .iter()
            .filter(|e| matches!(&e.kind, orbit::progress::EntryKind::Iteration { number, status } if *number == i && status != "INTERRUPTED"))
            .collect();
        assert_eq!(finals.len(), 1, "iteration {i}: one final progress entry");
        assert!(
            matches!(&finals[0].kind, orbit::progress::EntryKind::Iteration { status, .. } if *status == result["VERDICT"]),
            "iteration {i}: progress and result.env agree"
        );
        let ends = journal
            .events
            .iter()
            .filter(|e| e.event == "iteration_end" && e.iteration == i)
            .count();
        assert_eq!(ends, 1, "iteration {i}: one iteration_end event");
    }
}

pub fn events_named(dir: &Path, name: &str) -> Vec<orbit::events::Event> {
    orbit::events::read(&fs::read(dir.join("events.jsonl")).unwrap())
        .events
        .into_iter()
        .filter(|e| e.event == name)
        .collect()
}

/// Goals that try to break out of quoting. Each is rendered and then executed by the real
/// runner with an agent that records its stdin: no CANARY may ever appear, and the agent
/// must receive the goal byte for byte.
pub fn hostile_goals() -> Vec<(&'static str, String)> {
    vec![
        (
            "quotes",
            "it's a \"quoted\" 'goal' with \\ backslashes".to_string(),
        ),
        (
            "command-substitution",
            "fix $(touch CANARY) now".to_string(),
        ),
        ("backticks", "fix `touch CANARY` now".to_string()),
        (
            "newline-command",
            "fix it\n; touch CANARY\n&& touch CANARY".to_string(),
        ),
        (
            "heredoc-eof",
            "line one\nEOF\ntouch CANARY\nEOF\n".to_string(),
        ),
        ("percent", "100% done %s %n %d %%".to_string()),
        ("leading-dash", "-rf --help --dir /".to_string()),
        (
            "bidi",
            "approve \u{202E}gnp.exe\u{202C} and ${HOME} $((1+1))".to_string(),
        ),
        (
            "jinja",
            "{{ name }} {% if x %}{# c #} ${#x} ${x:-y}".to_string(),
        ),
        ("large", "make the parser pass. ".repeat(200 * 1024 / 22)),
    ]
}

/// Polls `done` until it holds; fails the test after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Whether tmux can run; CI must have it (`.ci/run` installs it), elsewhere the tmux tests
/// are skipped with a notice.
pub fn tmux_available() -> bool {
    let ok = command("tmux")
        .arg("-V")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        assert!(std::env::var("CI").is_err(), "tmux is required in CI");
        eprintln!("notice: tmux is not installed; skipping");
    }
    ok
}

// ---- the journal as a forger who knows its format writes it

/// Re-chains journal lines as the runner chains them: every line gets the next `seq`, the
/// previous line's hash as `prev`, and its own `hash`. Lines are whole event lines (from
/// the journal, or made with `orbit::events::build_line`); their old seq, prev and hash are
/// replaced.
pub fn rechain(lines: &[String]) -> String {
    let mut prev = orbit::events::GENESIS.to_string();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let (body, _) = orbit::events::split_hash(line.trim_end())
            .unwrap_or_else(|| panic!("not an event line: {line}"));
        let rest = body
            .strip_prefix("{\"seq\":")
            .map(|r| r.trim_start_matches(|c: char| c.is_ascii_digit()))
            .unwrap_or_else(|| panic!("no seq: {body}"));
        let at = rest.rfind(",\"prev\":\"").expect("a prev member");
        let body = format!("{{\"seq\":{}{},\"prev\":\"{prev}\"}}", i + 1, &rest[..at]);
        let hash = orbit::events::line_hash(&body);
        out.push_str(&format!(
            "{},\"hash\":\"{hash}\"}}\n",
            &body[..body.len() - 1]
        ));
        prev = hash;
    }
    out
}

/// Rewrites a loop's events.jsonl through `edit` (insert, change or drop lines), then
/// re-chains it so that the chain verifies.
pub fn rewrite_events(dir: &Path, edit: impl FnOnce(&mut Vec<String>)) {
    let path = dir.join("events.jsonl");
    let mut lines: Vec<String> = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    edit(&mut lines);
    fs::write(&path, rechain(&lines)).unwrap();
    assert_eq!(
        orbit::events::read(&fs::read(&path).unwrap()).error,
        None,
        "the rewritten journal chains"
    );
}

/// An event line (its seq and prev fixed by [`rechain`]); `fields` are raw values, encoded
/// as the runner encodes them.
pub fn event_line(event: &str, iteration: u64, fields: &[(&str, &str)]) -> String {
    let encoded: Vec<(&str, String)> = fields
        .iter()
        .map(|(k, v)| (*k, orbit::events::value(v)))
        .collect();
    orbit::events::build_line(
        1,
        &orbit::fsx::iso_utc(orbit::fsx::now_epoch()),
        event,
        iteration,
        &encoded,
        orbit::events::GENESIS,
    )
    .trim_end()
    .to_string()
}

/// Appends one chained event to a loop's journal.
pub fn append_event(dir: &Path, event: &str, iteration: u64, fields: &[(&str, &str)]) {
    rewrite_events(dir, |lines| {
        lines.push(event_line(event, iteration, fields))
    });
}

/// An event line with one more member (`,"key":value` before its `prev`); re-chain after.
pub fn add_member(line: &str, key: &str, value: &str) -> String {
    let at = line.rfind(",\"prev\":\"").expect("a prev member");
    format!(
        "{},{}:{}{}",
        &line[..at],
        orbit::events::json_str(key),
        orbit::events::value(value),
        &line[at..]
    )
}

/// sha256 of a file, hex.
pub fn file_sha(path: &Path) -> String {
    orbit::fsx::sha256_hex(&fs::read(path).unwrap())
}

/// Appends the `iteration_result` the runner would have written for iteration `n`'s
/// result.env as it is now (the newest one counts): a record a test edits stands for one the
/// runner wrote.
pub fn announce_result(dir: &Path, n: u64) {
    let record = dir.join(format!("iterations/{n:06}/result.env"));
    let kv = read_kv(&record);
    let sha = file_sha(&record);
    append_event(
        dir,
        "iteration_result",
        n,
        &[
            ("verdict", &kv["VERDICT"]),
            ("reason", &kv["STOP_REASON"]),
            ("sha256", &sha),
        ],
    );
}

/// Appends the `state_write` the runner would have written for state.env as it is now: a
/// state a test edits stands for one the runner wrote.
pub fn announce_state(dir: &Path) {
    let text = fs::read_to_string(dir.join("state.env")).unwrap();
    let state = orbit::state::State::parse(text.as_bytes()).unwrap();
    let sha = orbit::fsx::sha256_hex(text.as_bytes());
    append_event(
        dir,
        "state_write",
        state.next_iteration.saturating_sub(1),
        &[
            ("gen", &state.generation.to_string()),
            ("status", state.last_status.as_str()),
            ("reason", state.stop_reason.as_str()),
            ("next_iteration", &state.next_iteration.to_string()),
            ("sha256", &sha),
        ],
    );
}

/// Makes a loop's journal the one a runner that announces its records writes: its last
/// `state_write` gives the sha256 of state.env as it is, and every iteration's result.env
/// is announced by an `iteration_result` (verdict, reason, sha256) before its
/// `iteration_end`.
pub fn announce_records(dir: &Path) {
    let state_sha = file_sha(&dir.join("state.env"));
    rewrite_events(dir, |lines| {
        let mut out = Vec::new();
        for line in lines.iter() {
            let e = orbit::events::parse_line(line, 0).unwrap();
            if e.event == "iteration_end" {
                let record = dir.join(format!("iterations/{:06}/result.env", e.iteration));
                if record.is_file() {
                    let kv = read_kv(&record);
                    out.push(event_line(
                        "iteration_result",
                        e.iteration,
                        &[
                            ("verdict", &kv["VERDICT"]),
                            ("reason", &kv["STOP_REASON"]),
                            ("sha256", &file_sha(&record)),
                        ],
                    ));
                }
            }
            out.push(line.clone());
        }
        let last = out
            .iter()
            .rposition(|l| l.contains("\"event\":\"state_write\""))
            .expect("a state_write");
        out[last] = add_member(&out[last], "sha256", &state_sha);
        *lines = out;
    });
}

/// The one footer a run printed (its status and summary); fails unless there is exactly one
/// status line and one summary line.
pub fn one_footer(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let status: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("NEXUS_LOOP_STATUS: "))
        .collect();
    let summary: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("NEXUS_LOOP_SUMMARY: "))
        .collect();
    assert!(
        status.len() == 1 && summary.len() == 1,
        "expected exactly one footer, found {} status and {} summary line(s)\n{}",
        status.len(),
        summary.len(),
        text(out)
    );
    (status[0].to_string(), summary[0].to_string())
}
