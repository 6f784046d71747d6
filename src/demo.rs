//! `orbit demo`: a real loop, end to end, in a new temporary repository, driven by a
//! built-in simulated agent (a bash script: no API key, no network). It shows verify
//! failing then passing, an early DONE claim rejected by the harness, and DONE.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::{DemoArgs, InitArgs};
use crate::error::{Error, Result};
use crate::fsx;

const CALC_SH: &str = include_str!("../templates/demo/calc.sh");
const TEST_CALC_SH: &str = include_str!("../templates/demo/tests/test_calc.sh");
const SIM_AGENT: &str = include_str!("../templates/demo/sim-agent");

const GOAL: &str = "Make calc.sh implement add and mul so that tests/test_calc.sh passes.\n\n\
                    Both functions take two integers and print the result.\n";

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| Error::io("cannot run git (is it installed?)", e))?;
    if !out.status.success() {
        return Err(Error::Git(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// A fresh directory for the demo: `--dir` (must not exist or be empty) or a new one under
/// the system's temporary directory.
fn demo_root(args: &DemoArgs) -> Result<PathBuf> {
    let root = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!(
            "orbit-demo-{}-{}",
            fsx::now_epoch(),
            std::process::id()
        )),
    };
    if root.exists()
        && fs::read_dir(&root)
            .map_err(|e| Error::io(format!("cannot read {}", root.display()), e))?
            .next()
            .is_some()
    {
        return Err(Error::Refused(format!(
            "{} exists and is not empty: give the demo a new --dir",
            root.display()
        )));
    }
    Ok(root)
}

/// Creates the demo project (a git repository) and the simulated agent beside it.
pub fn prepare(root: &Path) -> Result<(PathBuf, PathBuf)> {
    let repo = root.join("project");
    let bin = root.join("agent");
    for d in [repo.join("tests"), bin.clone()] {
        fs::create_dir_all(&d)
            .map_err(|e| Error::io(format!("cannot create {}", d.display()), e))?;
    }
    fsx::write_atomic(&repo.join("calc.sh"), CALC_SH.as_bytes())?;
    fsx::write_atomic(&repo.join("tests/test_calc.sh"), TEST_CALC_SH.as_bytes())?;
    let agent = bin.join("sim-agent");
    fsx::write_atomic_exec(&agent, SIM_AGENT.as_bytes())?;
    git(&repo, &["init", "-q"])?;
    git(&repo, &["config", "user.name", "orbit demo"])?;
    git(&repo, &["config", "user.email", "demo@orbit.invalid"])?;
    git(&repo, &["config", "commit.gpgsign", "false"])?;
    git(&repo, &["add", "calc.sh", "tests/test_calc.sh"])?;
    git(
        &repo,
        &[
            "commit",
            "-q",
            "-m",
            "calc.sh: a calculator that does not work yet",
        ],
    )?;
    Ok((repo, agent))
}

/// `orbit demo`.
pub fn demo(args: &DemoArgs) -> Result<u8> {
    let root = demo_root(args)?;
    let (repo, agent) = prepare(&root)?;
    println!("orbit demo: a real loop with a simulated agent (no API key, no network)");
    println!(
        "  project: {} (calc.sh fails tests/test_calc.sh)",
        repo.display()
    );
    let here =
        std::env::current_dir().map_err(|e| Error::io("cannot read the current directory", e))?;
    std::env::set_current_dir(&repo).map_err(|e| Error::io("cannot enter the demo project", e))?;
    let init = InitArgs {
        goal: Some(GOAL.to_string()),
        goal_file: None,
        dir: Some(PathBuf::from(".orbit/calc")),
        engine: Some(crate::engine::Engine::Custom),
        exec: Some(
            shlex::try_quote(&agent.display().to_string())
                .map_err(|_| Error::Usage("the demo path holds a NUL byte".into()))?
                .into_owned(),
        ),
        name: Vec::new(),
        check_name: Vec::new(),
        verify: vec![
            "bash tests/test_calc.sh add".into(),
            "bash tests/test_calc.sh mul".into(),
        ],
        reproduction: Vec::new(),
        regression: Vec::new(),
        holdout: Vec::new(),
        holdout_file: Vec::new(),
        setup: Vec::new(),
        setup_input: Vec::new(),
        no_setup: true,
        adequacy: None,
        memory: None,
        candidates: args.candidates,
        fanout_early_stop: false,
        holdout_unmasked: false,
        check_jobs: None,
        protect: vec!["tests/**".into()],
        no_auto_protect: false,
        judge_cmd: None,
        max_iterations: Some(6),
        exec_timeout: Some("60s".into()),
        loop_timeout: Some("10m".into()),
        usd_cap: Some("1".into()),
        pass_k: Some(2),
        notify: Vec::new(),
        force: false,
        dry_run: false,
        workspace: None,
        sandbox: None,
        sandbox_network: None,
        allow_host: Vec::new(),
    };
    let outcome = crate::init::init(&init);
    std::env::set_current_dir(&here)
        .map_err(|e| Error::io("cannot return to the working directory", e))?;
    let loop_dir = outcome?.dir;
    println!(
        "\norbit demo: running the loop (bash {}/run-loop.sh)\n",
        loop_dir.display()
    );
    let status = Command::new("bash")
        .arg(loop_dir.join("run-loop.sh"))
        .current_dir(&repo)
        .env("RETRY_BASE_DELAY", "1s")
        .status()
        .map_err(|e| Error::io("cannot start bash", e))?;
    let code = status.code().unwrap_or(1);
    println!();
    println!(
        "orbit demo: the loop exited {code}{}",
        if code == 0 {
            " (DONE, verified by the harness)"
        } else {
            ""
        }
    );
    println!(
        "  look at:  {}/progress.md   (one entry per iteration, the rejected claim in iteration 2)",
        loop_dir.display()
    );
    println!(
        "            {}/events.jsonl  (the hash-chained journal)",
        loop_dir.display()
    );
    println!(
        "            {}/iterations/   (prompts, agent logs, verify logs)",
        loop_dir.display()
    );
    if args.candidates.is_some_and(|n| n > 1) {
        println!(
            "            {}/iterations/000001/candidates/   (each candidate's record; progress.md names the survivor and why)",
            loop_dir.display()
        );
    }
    // The workspace as the loop records it (its state's WORKSPACE, set at its first run).
    let ws =
        crate::state::State::parse(&std::fs::read(loop_dir.join("state.env")).unwrap_or_default())
            .map(|s| s.workspace)
            .unwrap_or_default();
    if !ws.is_empty() {
        println!(
            "  the work: {ws}   (the loop's own git worktree, outside the project's checkout, which was never touched)"
        );
        println!(
            "            git -C {} log --oneline",
            crate::shell::paste_word(&ws)
        );
    }
    if code == 0 {
        hand_off(&repo, &loop_dir)?;
    }
    Ok(u8::try_from(code).unwrap_or(1))
}

/// The receiver's side of a DONE: `orbit verify` of the loop's branch against the envelope
/// the runner left (envelope.json, and the DONE commit's note), as whoever takes the branch
/// runs it; it names `orbit merge` next.
fn hand_off(repo: &Path, loop_dir: &Path) -> Result<()> {
    println!(
        "\norbit demo: the hand-off, checked as its receiver would (envelope {}/envelope.json, and the note of the DONE commit under refs/notes/orbit)",
        loop_dir.display()
    );
    let me = std::env::current_exe().map_err(|e| Error::io("cannot find orbit itself", e))?;
    // Its verdict and what to run next are its own lines; a failure is said there.
    Command::new(me)
        .arg("verify")
        .arg("orbit/calc")
        .current_dir(repo)
        .status()
        .map_err(|e| Error::io("cannot run orbit verify", e))?;
    Ok(())
}
