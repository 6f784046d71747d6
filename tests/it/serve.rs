//! `orbit serve`: the dashboard, on real loops run by their real runner. Headless chromium
//! (driven over its DevTools pipe, `cdp`) reads the live pages and presses the buttons; a
//! plain TCP client asks what a browser would not (no token, a path out of the loops, a
//! forged origin).

mod cdp;
mod queue;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};

use cdp::{Browser, DEADLINE};

use crate::support::{
    Repo, assert_code, chromium_available, command, orbit_bin, run_bounded, state_value, text,
    wait_for,
};

/// A running `orbit serve`, stopped however the test ends.
struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    base: String,
    port: u16,
    token: String,
    stderr: Arc<Mutex<String>>,
    stdin: Option<std::process::ChildStdin>,
}

impl Served {
    /// The URL of `path` with the token.
    fn url(&self, path: &str) -> String {
        format!("{}{path}?token={}", self.base, self.token)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = command("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Collects a child's stream into a shared string.
fn collect(r: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        let mut r = BufReader::new(r);
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            into.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
}

/// Starts `orbit serve ARGS` in `cwd` and waits for the URL it prints.
fn serve_in(cwd: &Path, repo: &Repo, args: &[&str], stdin: Stdio) -> Served {
    let mut cmd = command(orbit_bin());
    cmd.arg("serve")
        .args(args)
        .current_dir(cwd)
        .env("PATH", repo.path_env())
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("start orbit serve");
    let out = Arc::new(Mutex::new(String::new()));
    let err = Arc::new(Mutex::new(String::new()));
    collect(child.stdout.take().unwrap(), Arc::clone(&out));
    collect(child.stderr.take().unwrap(), Arc::clone(&err));
    let stdin = child.stdin.take();
    let mut served = Served {
        stdin,
        child,
        base: String::new(),
        port: 0,
        token: String::new(),
        stderr: err,
    };
    wait_for("orbit serve's URL", DEADLINE, || {
        out.lock().unwrap().contains("?token=")
    });
    let printed = out.lock().unwrap().clone();
    let url = printed
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in: {printed}"))
        .to_string();
    let (base, token) = url.split_once("/?token=").unwrap();
    served.base = base.to_string();
    served.token = token.to_string();
    served.port = base.rsplit(':').next().unwrap().parse().unwrap();
    served
}

fn serve(repo: &Repo, args: &[&str]) -> Served {
    serve_in(repo.path(), repo, args, Stdio::null())
}

/// One HTTP/1.1 request over a plain TCP connection: (status, head, body).
fn request(port: u16, raw: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    let _ = s.read_to_end(&mut bytes);
    let all = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in: {head}"));
    (code, head.to_string(), body.to_string())
}

/// `GET target` with the given extra header lines.
fn get(s: &Served, target: &str, extra: &str) -> (u16, String, String) {
    request(
        s.port,
        &format!(
            "GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{extra}Connection: close\r\n\r\n",
            s.port
        ),
    )
}

/// An agent that appends a line per work run and claims DONE once work.txt has `n` lines.
fn counting(repo: &Repo, name: &str, n: usize) -> PathBuf {
    repo.agent(
        name,
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
if [ "$(wc -l < work.txt)" -ge {n} ]; then echo "every check holds" > "$ORBIT_AGENT_DIR/done.md"; fi
echo 0.25 > "$ORBIT_COST_FILE""#
        ),
    )
}

/// `orbit init GOAL` with a custom agent and one check; returns the loop directory.
fn init(repo: &Repo, goal: &str, agent: &Path, check: &str, extra: &[&str]) -> PathBuf {
    let exec = agent.display().to_string();
    let mut args = vec![
        "init",
        goal,
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        check,
        "--sandbox",
        "none",
    ];
    args.extend_from_slice(extra);
    let out = repo.orbit(&args);
    assert_code(&out, 0, "orbit init");
    repo.join(&format!(".orbit/{}", goal.replace(' ', "-")))
}

/// A loop whose agent prints `body`'s output, then waits for the file `gate` (its own
/// bounded wait: the test creates the file when it has seen the output).
fn gated(repo: &Repo, goal: &str, body: &str, gate: &Path) -> PathBuf {
    let agent = repo.agent(
        &format!("gated-{}", goal.replace(' ', "-")),
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
{body}
for _ in $(seq 1 6000); do [ -f '{gate}' ] && break; sleep 0.05; done
echo "second line from the agent""#,
            gate = gate.display()
        ),
    );
    init(repo, goal, &agent, "false", &[])
}

#[test]
fn the_overview_lists_loops_and_follows_them_live_in_chromium() {
    if !chromium_available() {
        return;
    }
    let repo = Repo::new();
    let ready = init(&repo, "alpha ready", &counting(&repo, "a", 9), "false", &[]);
    let ticking = init(
        &repo,
        "bravo ticking",
        &counting(&repo, "b", 9),
        &crate::support::count_check(9),
        &[],
    );
    let done = init(
        &repo,
        "charlie done",
        &counting(&repo, "c", 1),
        &crate::support::count_check(1),
        &[],
    );
    assert_code(&repo.run_loop(&ticking, &["--once"], &[]), 10, "one tick");
    assert_code(&repo.run_loop(&done, &[], &[]), 0, "DONE");
    assert_eq!(state_value(&ready, "LAST_STATUS"), "READY");
    assert_eq!(state_value(&ticking, "LAST_STATUS"), "CONTINUE");
    let served = serve(&repo, &[]);
    let mut b = Browser::open(&served.url("/"));
    b.wait_until(
        "three rows",
        "document.querySelectorAll('#rows tr').length === 3",
    );
    let verdicts = b.eval(
        "Array.from(document.querySelectorAll('#rows tr')).map(r => r.dataset.verdict).join(',')",
    );
    assert_eq!(verdicts, "READY,IDLE,DONE", "each loop's verdict");
    let row = b.eval("document.querySelector('#loop-1').innerText");
    let row = row.as_str().unwrap();
    assert!(
        row.contains("CONTINUE (tick)") && row.contains("verify fail"),
        "{row}"
    );
    assert!(
        row.contains("$0.25") && row.contains("orbit/bravo-ticking"),
        "{row}"
    );
    assert!(
        row.contains("orbit run .orbit/bravo-ticking"),
        "the next command: {row}"
    );
    assert_eq!(
        b.eval("document.querySelector('#loop-1 .iteration').textContent"),
        "1/20"
    );
    // The same page, not a reload, shows the next tick.
    b.eval("window.__orbitSamePage = 'yes'");
    assert_code(
        &repo.run_loop(&ticking, &["--once"], &[]),
        10,
        "a second tick",
    );
    b.wait_until(
        "the second iteration, on the page as it was loaded",
        "document.querySelector('#loop-1 .iteration').textContent === '2/20' && window.__orbitSamePage === 'yes'",
    );
}

#[test]
fn a_loop_page_shows_the_running_agents_output_as_it_comes() {
    if !chromium_available() {
        return;
    }
    let repo = Repo::new();
    let gate = repo.bin.path().join("gate");
    let dir = gated(
        &repo,
        "live output",
        "echo 'first line from the agent'",
        &gate,
    );
    let mut runner = repo.spawn_loop(&dir, &["--once"], &[]);
    let live = dir.join(".run-tmp/agent.live");
    wait_for("the agent's first line", DEADLINE, || {
        fs::read_to_string(&live).is_ok_and(|t| t.contains("first line from the agent"))
    });
    let served = serve(&repo, &[]);
    let mut b = Browser::open(&served.url("/loop/0"));
    b.wait_until(
        "the first line",
        "document.getElementById('live').textContent.includes('first line from the agent')",
    );
    assert_eq!(
        b.eval("document.getElementById('live').textContent.includes('second line')"),
        false
    );
    b.eval("window.__orbitSamePage = 'yes'");
    fs::write(&gate, "").unwrap();
    b.wait_until(
        "the second line, on the page as it was loaded",
        "document.getElementById('live').textContent.includes('second line from the agent') && window.__orbitSamePage === 'yes'",
    );
    wait_for("the runner's end", DEADLINE, || {
        runner.try_wait().unwrap().is_some()
    });
    assert_eq!(runner.wait().unwrap().code(), Some(10), "work remains");
}

#[test]
fn the_stop_button_stops_a_running_loop_and_resume_lets_it_go_on() {
    if !chromium_available() {
        return;
    }
    let repo = Repo::new();
    let never = repo.bin.path().join("never");
    let dir = gated(&repo, "stop me", "echo 'waiting for the stop'", &never);
    let mut runner = repo.spawn_loop(&dir, &["--once"], &[]);
    wait_for("the agent's run", DEADLINE, || {
        fs::read_to_string(dir.join(".run-tmp/agent.live"))
            .is_ok_and(|t| t.contains("waiting for the stop"))
    });
    let served = serve(&repo, &[]);
    let mut b = Browser::open(&served.url("/loop/0"));
    b.wait_until(
        "the stop button",
        "document.getElementById('stop') !== null",
    );
    b.eval("document.getElementById('stop').click()");
    b.wait_until(
        "what orbit stop said",
        "document.getElementById('said') && document.getElementById('said').textContent.includes('the loop is stopped')",
    );
    wait_for("the runner's end", DEADLINE, || {
        runner.try_wait().unwrap().is_some()
    });
    assert_eq!(state_value(&dir, "LAST_STATUS"), "PAUSED");
    assert_eq!(state_value(&dir, "STOP_REASON"), "stopped");
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        18,
        "the next tick of a stopped loop",
    );
    b.wait_until(
        "the resume button",
        "document.getElementById('resume') !== null",
    );
    b.eval("document.getElementById('resume').click()");
    b.wait_until(
        "what orbit resume said",
        "document.getElementById('said') && document.getElementById('said').textContent.includes('orbit resume: the loop is CONTINUE again')",
    );
    assert_eq!(state_value(&dir, "STOP_REASON"), "none");
    fs::write(&never, "").unwrap();
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "a resumed loop ticks again",
    );
}

/// What a hostile agent prints: markup that would set the canary, terminal escapes.
const HOSTILE: &str = r#"echo '<script>window.__canary="script ran";document.title="PWNED"</script>'
echo '<img src=x onerror="window.__canary=1">'
printf '\033[31mred\033[0m \033]0;retitled\007 \033[2J gone\n'"#;

#[test]
fn a_hostile_agents_output_is_text_that_runs_nothing() {
    if !chromium_available() {
        return;
    }
    let repo = Repo::new();
    let gate = repo.bin.path().join("gate");
    let body = format!(
        "{HOSTILE}\nhead -c 50000000 /dev/zero | tr '\\0' A\necho\n{HOSTILE}\nhead -c 100000 /dev/zero | tr '\\0' B\necho\necho 'after the long line'"
    );
    let dir = gated(&repo, "hostile", &body, &gate);
    // The live view and agent.log keep the whole 50 MB line.
    let env = [("AGENT_LOG_MAX", "104857600")];
    let mut runner = repo.spawn_loop(&dir, &["--once"], &env);
    let live = dir.join(".run-tmp/agent.live");
    wait_for("the agent's output after the long line", DEADLINE, || {
        let Ok(mut f) = fs::File::open(&live) else {
            return false;
        };
        let len = f.metadata().unwrap().len();
        let mut tail = String::new();
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(len.saturating_sub(400)))
            .unwrap();
        let _ = f.read_to_string(&mut tail);
        len > 50_000_000 && tail.contains("after the long line")
    });
    let served = serve(&repo, &[]);
    let (code, _, page) = get(&served, &format!("/loop/0?token={}", served.token), "");
    assert_eq!(code, 200);
    assert!(
        page.len() < 2 << 20,
        "the page is capped: {} bytes",
        page.len()
    );
    let mut b = Browser::open(&served.url("/loop/0"));
    b.wait_until(
        "the output after the long line",
        "document.getElementById('live').textContent.includes('after the long line')",
    );
    let shown = b.eval("document.getElementById('live').textContent");
    let shown = shown.as_str().unwrap();
    assert!(
        shown.contains("<script>window.__canary"),
        "markup shown as text"
    );
    assert!(
        shown.contains("^[[31mred") && shown.contains("^G"),
        "escapes neutralised"
    );
    assert!(
        shown.len() < 300_000,
        "the live view holds a tail: {}",
        shown.len()
    );
    assert!(
        shown.contains("[orbit: line cut at 4096 bytes]"),
        "a long line is cut"
    );
    assert!(
        !shown.contains(&"B".repeat(4097)),
        "no line past 4096 bytes"
    );
    fs::write(&gate, "").unwrap();
    wait_for("the runner's end", DEADLINE, || {
        runner.try_wait().unwrap().is_some()
    });
    // The iteration's log, the 50 MB line in it, as a page of its own.
    let (code, _, log_page) = get(
        &served,
        &format!("/loop/0/iteration/1?token={}", served.token),
        "",
    );
    assert_eq!(code, 200);
    assert!(log_page.len() < 2 << 20, "capped: {}", log_page.len());
    assert!(
        log_page.contains("&lt;script&gt;window.__canary"),
        "escaped"
    );
    let mut b2 = Browser::open(&served.url("/loop/0/iteration/1"));
    b2.wait_until(
        "the agent's log",
        "document.body && document.body.innerText.includes('second line from the agent')",
    );
    for page in [&mut b, &mut b2] {
        assert_eq!(
            page.eval("typeof window.__canary"),
            "undefined",
            "no script ran"
        );
        assert_eq!(page.eval("document.title.includes('PWNED')"), false);
        assert_eq!(
            page.eval("document.querySelectorAll('img, script:not([src])').length"),
            0
        );
    }
    let cut = b2.eval("document.body.innerText.includes('[orbit: line cut at 4096 bytes]')");
    assert_eq!(cut, true, "a long line is cut");
    let left_out = b2.eval("document.body.innerText.includes('bytes are left out')");
    assert_eq!(left_out, true, "the 50 MB line is before the tail shown");
}

#[test]
fn requests_without_the_token_or_outside_the_loops_are_refused() {
    let repo = Repo::new();
    let dir = init(&repo, "guarded", &counting(&repo, "g", 9), "false", &[]);
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "one tick");
    let secret = repo.bin.path().join("secret.txt");
    fs::write(&secret, "TOP-SECRET-CONTENT\n").unwrap();
    // Symlinks out of the loop, where the agent could have made them.
    let log = dir.join("iterations/000001/agent.log");
    fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&secret, &log).unwrap();
    let live = dir.join(".run-tmp/agent.live");
    let _ = fs::remove_file(&live);
    std::os::unix::fs::symlink(&secret, &live).unwrap();
    let served = serve(&repo, &[]);
    let t = served.token.clone();
    let cookie = format!("orbit_token_{}", served.port);

    assert_eq!(get(&served, "/", "").0, 403, "no token");
    assert_eq!(get(&served, "/?token=0123", "").0, 403, "a wrong token");
    let wrong = format!("Cookie: {cookie}=0123\r\n");
    assert_eq!(get(&served, "/", &wrong).0, 403, "a wrong cookie");
    let (code, head, _) = get(&served, &format!("/?token={t}"), "");
    assert_eq!(code, 200, "{head}");
    assert!(
        head.contains("Content-Security-Policy: default-src 'none'"),
        "{head}"
    );
    assert!(
        head.contains("script-src 'self'") && head.contains("img-src 'self' data:"),
        "{head}"
    );
    assert!(head.contains("X-Content-Type-Options: nosniff"), "{head}");
    assert!(
        head.contains(&format!(
            "Set-Cookie: {cookie}={t}; Path=/; HttpOnly; SameSite=Strict"
        )),
        "{head}"
    );
    let right = format!("Cookie: {cookie}={t}\r\n");
    assert_eq!(
        get(&served, "/loop/0", &right).0,
        200,
        "the cookie carries the token"
    );
    let rebound = request(
        served.port,
        &format!(
            "GET /?token={t} HTTP/1.1\r\nHost: rebound.example:{}\r\nConnection: close\r\n\r\n",
            served.port
        ),
    );
    assert_eq!(rebound.0, 403, "a DNS name rebound to this machine");

    for target in [
        "/../../../../etc/passwd".to_string(),
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd".to_string(),
        "/loop/0/../../../../../etc/passwd".to_string(),
        "/loop/0/..%2f..%2fstate.env".to_string(),
        "/loop/0/iteration/1/../../state.env".to_string(),
        "/loop/0/iteration/1/%2e%2e%2f%2e%2e%2fstate.env".to_string(),
        "//etc/passwd".to_string(),
        "/etc/passwd".to_string(),
        secret.display().to_string(),
        format!("http://127.0.0.1:{}/../../etc/passwd", served.port),
        "/loop/1".to_string(),
        "/static/../loop/0".to_string(),
    ] {
        let sep = if target.contains('?') { '&' } else { '?' };
        let (code, _, body) = get(&served, &format!("{target}{sep}token={t}"), "");
        assert!(matches!(code, 403 | 404), "{target}: {code}");
        assert!(
            !body.contains("root:") && !body.contains("CONTRACT_VERSION"),
            "{target}: {body}"
        );
    }
    for page in ["/loop/0", "/loop/0/iteration/1"] {
        let (code, _, body) = get(&served, &format!("{page}?token={t}"), "");
        assert_eq!(code, 200, "{page}");
        assert!(
            !body.contains("TOP-SECRET"),
            "{page} followed a symlink out of the loop"
        );
    }

    // The buttons: POST only, from the server's own origin.
    let post = |extra: &str| {
        request(
            served.port,
            &format!("POST /loop/0/stop HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{right}{extra}Content-Length: 0\r\nConnection: close\r\n\r\n", served.port),
        )
        .0
    };
    assert_eq!(get(&served, "/loop/0/stop", &right).0, 405, "a GET");
    assert_eq!(post(""), 403, "no Origin");
    assert_eq!(
        post("Origin: http://evil.example\r\n"),
        403,
        "another origin"
    );
    let own = format!("Origin: http://127.0.0.1:{}\r\n", served.port);
    assert_eq!(post(&format!("{own}Sec-Fetch-Site: cross-site\r\n")), 403);
    assert_eq!(
        state_value(&dir, "STOP_REASON"),
        "tick",
        "nothing was stopped"
    );
    assert_eq!(post(&own), 303, "the page's own button");
    assert_eq!(state_value(&dir, "STOP_REASON"), "stopped");
}

#[test]
fn bad_input_says_what_to_do_and_another_address_is_warned_of() {
    let repo = Repo::new();
    let out = repo.orbit(&["serve"]);
    assert_code(&out, 2, "no loop");
    assert!(
        text(&out).contains("create one with orbit init"),
        "{}",
        text(&out)
    );
    let out = repo.orbit(&["serve", "/nonexistent/dir"]);
    assert_code(&out, 2, "a missing directory");
    assert!(
        text(&out).contains("/nonexistent/dir: is not a directory"),
        "{}",
        text(&out)
    );
    let out = repo.orbit(&["serve", "--bind", "localhost"]);
    assert_code(&out, 2, "a name for --bind");
    assert!(text(&out).contains("not an IP address"), "{}", text(&out));
    let out = repo.orbit(&["serve", "--fleet", "/nonexistent/fleet.jsonl"]);
    assert_code(&out, 2, "a missing fleet file");
    assert!(
        text(&out).contains("cannot read --fleet /nonexistent/fleet.jsonl"),
        "{}",
        text(&out)
    );

    init(&repo, "exposed", &counting(&repo, "e", 9), "false", &[]);
    let served = serve(&repo, &["--bind", "0.0.0.0"]);
    wait_for("the warning", DEADLINE, || {
        served
            .stderr
            .lock()
            .unwrap()
            .contains("warning: listening on 0.0.0.0")
    });
    let said = served.stderr.lock().unwrap().clone();
    assert!(said.contains("every machine that reaches it"), "{said}");
    let (code, _, body) = get(&served, &format!("/?token={}", served.token), "");
    assert_eq!(code, 200);
    assert!(body.contains("exposed"), "{body}");
}

#[test]
fn fleet_lines_from_a_file_and_from_standard_input_join_the_overview() {
    let other = Repo::new();
    let dir = init(&other, "far away", &counting(&other, "f", 9), "false", &[]);
    assert_code(&other.run_loop(&dir, &["--once"], &[]), 10, "one tick");
    let lines = |repo: &Repo| {
        let out = repo.orbit(&["audit", "--json-lines"]);
        String::from_utf8(out.stdout).unwrap()
    };
    let first = lines(&other);
    assert!(first.contains("\"host\""), "{first}");
    let fleet = other.bin.path().join("fleet.jsonl");
    fs::write(&fleet, format!("{first}not a report\n")).unwrap();
    // Served outside any repository: the fleet alone.
    let here = tempfile::tempdir().unwrap();
    let served = serve_in(
        here.path(),
        &other,
        &["--fleet", fleet.to_str().unwrap()],
        Stdio::null(),
    );
    let page = |s: &Served| get(s, &format!("/?token={}", s.token), "").2;
    let shown = page(&served);
    assert!(
        shown.contains(".orbit/far-away") && shown.contains(">1/20<"),
        "{shown}"
    );
    assert!(
        shown.contains("1 line(s) of"),
        "the line that is no report: {shown}"
    );
    // The file grows (a `status --watch --json-lines` stream): the latest line wins.
    assert_code(&other.run_loop(&dir, &["--once"], &[]), 10, "a second tick");
    let mut f = fs::OpenOptions::new().append(true).open(&fleet).unwrap();
    f.write_all(lines(&other).as_bytes()).unwrap();
    let now = page(&served);
    assert!(now.contains(">2/20<") && !now.contains(">1/20<"), "{now}");

    let mut piped = serve_in(here.path(), &other, &["--fleet", "-"], Stdio::piped());
    let mut stdin = piped.stdin.take().unwrap();
    assert!(page(&piped).contains("no fleet line yet"));
    stdin.write_all(lines(&other).as_bytes()).unwrap();
    stdin.flush().unwrap();
    wait_for("the line from standard input", DEADLINE, || {
        page(&piped).contains(".orbit/far-away")
    });
}

#[test]
fn fanout_candidates_are_shown_with_their_diffs_against_the_survivor() {
    let repo = Repo::new();
    let agent = repo.agent(
        "cand",
        r#"cat >/dev/null
[ "$ORBIT_PHASE" = work ] || exit 0
case "$ORBIT_CANDIDATE" in
1) echo one > c.txt ;;
*) printf 'two\nlines\nmore\n' > c.txt ;;
esac"#,
    );
    let dir = init(
        &repo,
        "fan out",
        &agent,
        "test -f c.txt",
        &["--candidates", "2"],
    );
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "one fan-out tick",
    );
    let survivor: u64 = fs::read_to_string(dir.join("iterations/000001/survivor.txt"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let other = 3 - survivor;
    let served = serve(&repo, &[]);
    let t = &served.token;
    let (_, _, page) = get(&served, &format!("/loop/0?token={t}"), "");
    for k in [1, 2] {
        assert!(
            page.contains(&format!("/loop/0/iteration/1/candidate/{k}\"")),
            "{page}"
        );
    }
    let (code, _, diff) = get(
        &served,
        &format!("/loop/0/iteration/1/candidate/{other}?token={t}"),
        "",
    );
    assert_eq!(code, 200);
    assert!(
        diff.contains("against the survivor") && diff.contains("diff --git a/c.txt b/c.txt"),
        "{diff}"
    );
    let (_, _, own) = get(
        &served,
        &format!("/loop/0/iteration/1/candidate/{survivor}?token={t}"),
        "",
    );
    assert!(
        own.contains("(the survivor)") && own.contains("+++ b/c.txt"),
        "{own}"
    );
    assert_eq!(
        get(
            &served,
            &format!("/loop/0/iteration/1/candidate/7?token={t}"),
            ""
        )
        .0,
        404
    );
}

#[test]
fn headless_chromium_draws_the_overview() {
    if !chromium_available() {
        return;
    }
    let repo = Repo::new();
    let dir = init(&repo, "pictured", &counting(&repo, "p", 9), "false", &[]);
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "one tick");
    let served = serve(&repo, &[]);
    let work = tempfile::tempdir().unwrap();
    let png = work.path().join("overview.png");
    let mut cmd = command("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,700",
    ])
    .arg(format!(
        "--user-data-dir={}",
        work.path().join("profile").display()
    ))
    .arg(format!("--screenshot={}", png.display()))
    .arg(served.url("/"));
    let out = run_bounded(cmd, DEADLINE);
    assert!(png.is_file(), "no screenshot:\n{}", text(&out));
    let decoder = png::Decoder::new(std::io::BufReader::new(fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1200, 700));
    let colours: std::collections::BTreeSet<&[u8]> = buf[..info.buffer_size()]
        .chunks(info.color_type.samples())
        .collect();
    assert!(
        colours.len() > 20,
        "a blank page: {} colours",
        colours.len()
    );
}

#[test]
fn a_done_loops_page_shows_its_envelopes_digest_and_verdict() {
    let repo = Repo::new();
    let dir = crate::envelope::done_loop(&repo);
    let bytes = fs::read_to_string(dir.join("envelope.json")).unwrap();
    let e = orbit::envelope::parse(bytes.as_bytes()).unwrap();
    let served = serve(&repo, &[]);
    let (code, _, page) = get(&served, &format!("/loop/0?token={}", served.token), "");
    assert_eq!(code, 200, "{page}");
    assert!(
        page.contains(&format!("envelope sha256:{} (verified)", e.digest)),
        "{page}"
    );
    assert!(page.contains("orbit merge"), "{page}");
}

#[test]
fn a_done_loops_page_marks_each_hunk_and_mutant_of_its_adequacy_measure() {
    let repo = Repo::new();
    crate::adequacy::project(&repo);
    // The fix is needed; the tidy-up of greet no check reaches. The runner measures the
    // DONE once it is recorded (adequacy = "report", the default).
    let dir = crate::adequacy::done_with(
        &repo,
        &[
            ("calc.py", "def add(a, b):\n    return a + b\n"),
            ("util.py", "def greet():\n    return 'hello'\n"),
        ],
    );
    assert!(dir.join("adequacy.json").is_file(), "the runner's measure");
    let served = serve(&repo, &[]);
    let (code, _, page) = get(&served, &format!("/loop/0?token={}", served.token), "");
    assert_eq!(code, 200, "{page}");
    assert!(
        page.contains("What the checks need of the change"),
        "{page}"
    );
    assert!(
        page.contains("<p id=\"adequacy\">the checks need 1 of 2 changed hunks;"),
        "{page}"
    );
    assert!(
        page.contains("&#10007; NOT NEEDED <code>util.py:2</code>"),
        "{page}"
    );
    assert!(
        page.contains("&#10003; needed <code>calc.py:2</code> (check python3-test-calc-py failed)"),
        "{page}"
    );
}
