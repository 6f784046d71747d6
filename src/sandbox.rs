//! The OS sandbox's probe, as `orbit init` asks it for a loop of `sandbox = "auto"`: the
//! same question the runner's preflight asks at the start of every run (lib/sandbox.sh,
//! `sandbox_probe_v`), so that init can say which the loop will get here, and why.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Where bubblewrap runs here: its path; else what is missing, with the fix.
pub fn probe() -> Result<PathBuf, String> {
    if !cfg!(target_os = "linux") {
        return Err(format!(
            "bubblewrap runs only on Linux (this is {})",
            std::env::consts::OS
        ));
    }
    let on_path = |program: &str| {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
    };
    let Some(bwrap) = on_path("bwrap") else {
        return Err(
            "bubblewrap is not installed (no bwrap on PATH): install it (apt-get install bubblewrap, dnf install bubblewrap)"
                .into(),
        );
    };
    let quiet = |c: &mut Command| {
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
    };
    let env_ok = on_path("env").is_some_and(|env| {
        quiet(Command::new(env).args(["--default-signal=TERM,INT,QUIT", "true"]))
            .is_ok_and(|o| o.status.success())
    });
    if !env_ok {
        return Err("there is no env with --default-signal (GNU coreutils 8.31 or later) to give the agent the timeout's TERM: upgrade coreutils".into());
    }
    // The namespaces and mounts of every sandboxed run (lib/sandbox.sh, sandbox_base_args).
    let out = quiet(Command::new(&bwrap).args([
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--dev-bind",
        "/dev/null",
        "/dev/tty",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--",
        "true",
    ]));
    match out {
        Ok(o) if o.status.success() => Ok(bwrap),
        Ok(o) => {
            let msg = String::from_utf8_lossy(&o.stderr);
            let msg: String = msg.split_whitespace().collect::<Vec<_>>().join(" ");
            Err(format!(
                "bubblewrap cannot start a sandbox here ({}: {}): user namespaces are off? enable them (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 an AppArmor profile for bwrap, or kernel.apparmor_restrict_unprivileged_userns=0)",
                o.status,
                msg.chars().take(300).collect::<String>()
            ))
        }
        Err(e) => Err(format!(
            "bubblewrap ({}) could not be started: {e}",
            bwrap.display()
        )),
    }
}
