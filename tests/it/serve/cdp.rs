//! Headless chromium driven over its DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! the browser reads commands on descriptor 3 and writes answers on 4, each message a JSON
//! object ended by NUL), so a test can read what a live page shows, wait for it to change,
//! and press its buttons, without a reload and without a sleep: every wait is a poll of the
//! page's DOM with a generous deadline.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::command;

/// The longest a page may take to show what a test waits for (a safety net for a wedged
/// run, never a measure of speed).
pub const DEADLINE: Duration = Duration::from_secs(120);

/// One headless chromium with one page.
pub struct Browser {
    child: Child,
    to: File,
    from: Receiver<Value>,
    next: u64,
    session: String,
    _profile: tempfile::TempDir,
}

/// A pipe: (read end, write end), both close-on-exec.
fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2(2) fills the two descriptors of the array it is given.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2");
    (fds[0], fds[1])
}

impl Browser {
    /// Starts chromium and opens `url` in its page.
    pub fn open(url: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (cmd_r, cmd_w) = pipe();
        let (ans_r, ans_w) = pipe();
        let mut cmd = command("chromium");
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
            "--window-size=1200,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
        // SAFETY: between fork and exec only fcntl(2) and dup2(2), which are
        // async-signal-safe. The ends are first copied above 9, so that neither is 3 or 4
        // already (a dup2 onto itself would keep close-on-exec, one onto the other would
        // lose it); their copies at 3 and 4 are then inherited.
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::fcntl(cmd_r, libc::F_DUPFD, 10);
                let w = libc::fcntl(ans_w, libc::F_DUPFD, 10);
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        // SAFETY: the parent's ends, owned here alone; the child's ends are closed below.
        let (to, from_file) = unsafe { (File::from_raw_fd(cmd_w), File::from_raw_fd(ans_r)) };
        unsafe {
            libc::close(cmd_r);
            libc::close(ans_w);
        }
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(from_file);
            let mut msg = Vec::new();
            while r.read_until(0, &mut msg).is_ok_and(|n| n > 0) {
                if msg.last() == Some(&0) {
                    msg.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&msg)
                    && tx.send(v).is_err()
                {
                    return;
                }
                msg.clear();
            }
        });
        let mut b = Browser {
            child,
            to,
            from: rx,
            next: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = b.call("Target.createTarget", json!({ "url": url }));
        let id = target["targetId"]
            .as_str()
            .expect("a target id")
            .to_string();
        let attached = b.call(
            "Target.attachToTarget",
            json!({ "targetId": id, "flatten": true }),
        );
        b.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        b
    }

    /// Sends one command (to the page's session once there is one) and returns its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            msg["sessionId"] = Value::String(self.session.clone());
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        let t0 = Instant::now();
        loop {
            let left = DEADLINE.saturating_sub(t0.elapsed());
            let v = self
                .from
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("chromium did not answer {method} within {DEADLINE:?}"));
            if v["id"].as_u64() == Some(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true }),
        );
        r["result"]["value"].clone()
    }

    /// Polls `expr` until it is true in the page; fails the test after [`DEADLINE`], saying
    /// what the page showed.
    pub fn wait_until(&mut self, what: &str, expr: &str) {
        let t0 = Instant::now();
        loop {
            if self.eval(&format!("!!({expr})")) == Value::Bool(true) {
                return;
            }
            if t0.elapsed() > DEADLINE {
                let shown = self.eval("document.body ? document.body.innerText : ''");
                panic!("timed out waiting for {what}; the page shows:\n{shown}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = command("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
