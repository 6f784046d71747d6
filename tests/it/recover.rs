//! Integration tests: recover. Each test damages a real loop (run by its real runner with a
//! fake agent), repairs it with `orbit recover` and with the loop's own `recover.sh`, and
//! checks that both agree, that the runner accepts the result and resumes at the right
//! iteration, that a second recovery changes nothing, and that nothing was lost.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use orbit::state::{Sidecar, State};
use sha2::{Digest, Sha256};

use crate::support::{
    Repo, assert_code, assert_ok, assert_script_clean, command, run_bounded, state_value, text,
};

/// A fake agent: appends a line to work.txt (so every iteration changes the tree) and
/// reports a cost; `fail` in the bin directory makes it fail, `idle` makes it change
/// nothing, `edit-goal` makes it edit goal.md, `edit-protected` a protected file.
const AGENT: &str = r#"
BIN=$(dirname -- "$0")
REPO=$(<"$BIN/repo-root")
if [[ -f $BIN/fail ]]; then echo "agent failure"; exit 1; fi
echo 0.01 >"$ORBIT_COST_FILE"
if [[ -f $BIN/edit-goal ]]; then echo "agent was here" >>"$REPO/.orbit/test-goal/goal.md"; fi
if [[ -f $BIN/edit-protected ]]; then echo "weakened" >>tests/guard.txt; fi
if [[ -f $BIN/add-permission ]]; then mkdir -p .claude; echo '{"permissions":{"allow":["Bash(*)"]}}' >.claude/settings.local.json; fi
if [[ -f $BIN/swap-workspace ]]; then rm -f "$BIN/swap-workspace"; ws=$ORBIT_WORKSPACE; cd /; rm -rf "$ws"; ln -s "$REPO" "$ws"; exit 0; fi
if [[ -f $BIN/idle ]]; then exit 0; fi
if [[ -f $BIN/finish ]]; then echo "every criterion holds" >"$ORBIT_AGENT_DIR/done.md"; fi
echo "iteration $ORBIT_ITERATION attempt $ORBIT_ATTEMPT" >>work.txt
"#;

struct Loop {
    repo: Repo,
    dir: PathBuf,
}

impl Loop {
    /// A loop that has run `ticks` iterations (the check never passes).
    fn new(ticks: u32, extra: &[&str]) -> Loop {
        Loop::with_check(
            ticks,
            "tail -n 1 work.txt 2>/dev/null | tr 0-9 a-j; exit 1",
            extra,
        )
    }

    /// A loop with its own check (the default one never passes).
    fn with_check(ticks: u32, check: &str, extra: &[&str]) -> Loop {
        let repo = Repo::new();
        repo.write("tests/guard.txt", "guard\n");
        repo.git(&["add", "tests/guard.txt"]);
        repo.git(&["commit", "-q", "-m", "guard"]);
        let agent = repo.agent("agent", AGENT);
        // The agent finds the user's checkout here (its workspace is outside it).
        fs::write(
            repo.bin.path().join("repo-root"),
            repo.path().display().to_string(),
        )
        .unwrap();
        let dir = repo.init_loop(&agent, &[check], extra);
        let lp = Loop { repo, dir };
        for i in 0..ticks {
            let out = lp.tick(&[]);
            assert_code(&out, 10, &format!("tick {}", i + 1));
        }
        lp
    }

    fn tick(&self, env: &[(&str, &str)]) -> Output {
        self.repo.run_loop(&self.dir, &["--once"], env)
    }

    fn mode(&self, name: &str, on: bool) {
        let p = self.repo.bin.path().join(name);
        if on {
            fs::write(p, "").unwrap();
        } else {
            let _ = fs::remove_file(p);
        }
    }

    /// The loop's workspace: where the agent works. The state's once the loop ran; before,
    /// the one loop.toml names: in the checkout for a loop of an older contract (the
    /// fixture's), else the default, under the data directory.
    fn ws(&self) -> PathBuf {
        let state = fs::read_to_string(self.file("state.env")).unwrap_or_default();
        if let Some(ws) = state
            .lines()
            .find_map(|l| l.strip_prefix("WORKSPACE="))
            .filter(|w| !w.is_empty())
        {
            return PathBuf::from(ws);
        }
        let toml = fs::read_to_string(self.file("loop.toml")).unwrap_or_default();
        if toml.contains("workspace = \".orbit/.workspaces/test-goal\"") {
            return self.repo.join(".orbit/.workspaces/test-goal");
        }
        self.repo.ws()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn state_text(&self) -> String {
        fs::read_to_string(self.file("state.env")).unwrap()
    }

    /// The audit's verdict and finding classes for this loop.
    fn audit(&self) -> (String, Vec<String>) {
        let d = self.dir.display().to_string();
        let out = self.repo.orbit(&["audit", "--json", &d]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("audit --json: {e}\n{}", text(&out)));
        let l = &v["loops"][0];
        let classes = l["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["class"].as_str().unwrap().to_string())
            .collect();
        (l["verdict"].as_str().unwrap().to_string(), classes)
    }

    fn orbit_recover(&self, flags: &[&str]) -> Output {
        let mut args = vec!["recover"];
        args.extend_from_slice(flags);
        let d = self.dir.display().to_string();
        args.push(&d);
        self.repo.orbit(&args)
    }

    fn bash_recover(&self, flags: &[&str]) -> Output {
        let mut cmd = command("bash");
        cmd.arg(self.file("recover.sh"))
            .args(flags)
            .current_dir(std::env::temp_dir())
            .env("PATH", self.repo.path_env());
        run_bounded(cmd, Duration::from_secs(60))
    }

    /// A full copy of the repository (and so of the loop), for a second repair.
    fn copy(&self) -> Loop {
        let repo = Repo {
            dir: tempfile::Builder::new()
                .prefix("orbit-it-")
                .tempdir()
                .unwrap(),
            bin: tempfile::Builder::new()
                .prefix("orbit-bin-")
                .tempdir()
                .unwrap(),
        };
        let st = command("cp")
            .arg("-a")
            .arg(format!("{}/.", self.repo.path().display()))
            .arg(repo.path())
            .status()
            .unwrap();
        assert!(st.success());
        let st = command("cp")
            .arg("-a")
            .arg(format!("{}/.", self.repo.bin.path().display()))
            .arg(repo.bin.path())
            .status()
            .unwrap();
        assert!(st.success());
        // The default workspaces, under the data directory, as the copy's own (as a workspace
        // in the checkout was copied with it).
        let from = crate::support::workspaces_of(self.repo.path());
        if from.exists() {
            let to = crate::support::workspaces_of(repo.path());
            fs::create_dir_all(&to).unwrap();
            let st = command("cp")
                .arg("-a")
                .arg(format!("{}/.", from.display()))
                .arg(&to)
                .status()
                .unwrap();
            assert!(st.success());
        }
        let rel = self
            .dir
            .strip_prefix(self.repo.path())
            .unwrap()
            .to_path_buf();
        let dir = repo.path().join(rel);
        Loop { repo, dir }
    }

    /// The state is one the runner accepts: it parses, and the sidecar seals it.
    fn assert_sealed(&self) -> State {
        let text = self.state_text();
        let state = State::parse(text.as_bytes())
            .unwrap_or_else(|e| panic!("state.env does not parse after recovery: {e:?}\n{text}"));
        let sidecar = Sidecar::parse(&fs::read(self.file("state.env.sha256")).unwrap()).unwrap();
        assert_eq!(sidecar, Sidecar::for_state(&text, state.generation));
        // The same check `sha256sum -c` makes.
        let out = command("sha256sum")
            .arg("-c")
            .arg("--status")
            .arg("state.env.sha256")
            .current_dir(&self.dir)
            .output();
        if let Ok(out) = out {
            assert!(out.status.success(), "sha256sum -c fails on the sidecar");
        }
        state
    }

    /// The journal and progress chains verify.
    fn assert_chains(&self) {
        let j = orbit::events::read(&fs::read(self.file("events.jsonl")).unwrap());
        assert_eq!(j.error, None, "events.jsonl chain broken");
        let p = orbit::progress::parse(&fs::read(self.file("progress.md")).unwrap());
        assert!(p.first_broken().is_none(), "progress.md chain broken");
        assert_eq!(p.torn_tail_line, None);
    }

    /// sha256 over every path, mode and content under the loop directory.
    fn tree_hash(&self) -> String {
        let mut h = Sha256::new();
        let mut entries: Vec<PathBuf> = walkdir::WalkDir::new(&self.dir)
            .into_iter()
            .map(|e| e.unwrap().path().to_path_buf())
            .collect();
        entries.sort();
        for p in entries {
            use std::os::unix::fs::PermissionsExt;
            let meta = fs::symlink_metadata(&p).unwrap();
            h.update(
                p.strip_prefix(&self.dir)
                    .unwrap()
                    .to_string_lossy()
                    .as_bytes(),
            );
            h.update(meta.permissions().mode().to_le_bytes());
            if meta.is_file() {
                h.update(fs::read(&p).unwrap());
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn no_canary(&self) {
        for base in [self.repo.path(), self.dir.as_path(), &std::env::temp_dir()] {
            assert!(
                !base.join("CANARY").exists(),
                "CANARY in {}",
                base.display()
            );
        }
    }

    fn result_iteration(&self, n: u64) -> String {
        fs::read_to_string(self.dir.join(format!("iterations/{n:06}/result.env")))
            .unwrap_or_default()
    }
}

fn without_updated(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("LAST_UPDATED_AT="))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The two loops' states, as `without_updated`, with each repository's path (the workspace
/// lives in it) written `<REPO>`: a twin is a copy in another directory, so its rebuilt
/// WORKSPACE names its own repository, and a kept one the repository it was copied from.
fn twin_states(a: &Loop, b: &Loop) -> (String, String) {
    let norm = |t: String| {
        let mut t = without_updated(&t);
        for r in [a.repo.path(), b.repo.path()] {
            t = t.replace(
                &format!("={}/", crate::support::workspaces_of(r).display()),
                "=<WORKSPACES>/",
            );
            t = t.replace(&format!("={}/", r.display()), "=<REPO>/");
        }
        t
    };
    (norm(a.state_text()), norm(b.state_text()))
}

fn replace_in(path: &Path, from: &str, to: &str) {
    let t = fs::read_to_string(path).unwrap();
    assert!(t.contains(from), "{from:?} not in {}", path.display());
    fs::write(path, t.replacen(from, to, 1)).unwrap();
}

/// Recovers `lp` with orbit and a copy with recover.sh; both must agree and be sealed,
/// a second run of each must change nothing, and the state is returned.
fn recover_both(lp: &Loop, flags: &[&str]) -> State {
    let twin = lp.copy();
    let out = lp.orbit_recover(flags);
    assert_ok(&out, "orbit recover");
    let out_sh = twin.bash_recover(flags);
    assert_ok(&out_sh, "recover.sh");
    let rust = lp.assert_sealed();
    twin.assert_sealed();
    // What changed and why is on record, in progress.md and in the journal.
    for (l, by, o) in [(lp, "orbit recover", &out), (&twin, "recover.sh", &out_sh)] {
        if String::from_utf8_lossy(&o.stdout).contains("nothing to repair") {
            continue;
        }
        let pg = fs::read_to_string(l.file("progress.md")).unwrap();
        let entry = &pg[pg.rfind("## Recovery — ").expect("a Recovery entry")..];
        assert!(entry.contains(&format!("- by: {by}")), "{entry}");
        assert!(entry.contains("<!-- orbit:end iteration="), "{entry}");
        let ev = fs::read_to_string(l.file("events.jsonl")).unwrap();
        let last = ev.lines().last().unwrap();
        assert!(last.contains("\"event\":\"recovery\""), "{last}");
        assert!(last.contains(&format!("\"by\":\"{by}\"")), "{last}");
    }
    let (a, b) = twin_states(lp, &twin);
    assert_eq!(
        a,
        b,
        "orbit recover and recover.sh disagree\n{}\n{}",
        text(&out),
        text(&out_sh)
    );
    lp.assert_chains();
    twin.assert_chains();
    // The audit afterwards is clean of what recover repairs (and of what each flag clears).
    let mut repaired = vec![
        "TORN_CHECKPOINT",
        "STATE_DRIFT",
        "CRASHED",
        "CONTRACT_MISSING",
        "JOURNAL_BROKEN",
        "LOOP_TAMPER",
    ];
    for (flag, class) in [
        ("--reset-circuit", "CIRCUIT_OPEN"),
        ("--clear-stall", "CONVERGENCE_STALL"),
        ("--clear-stall", "OSCILLATION_LOOP"),
        ("--repin-goal", "GOAL_DRIFT"),
        ("--repin", "REWARD_HACK"),
        ("--repin", "SCRIPT_TAMPER"),
        ("--restore-pinned", "REWARD_HACK"),
        ("--restore-pinned", "SCRIPT_TAMPER"),
    ] {
        if flags.contains(&flag) {
            repaired.push(class);
        }
    }
    for l in [lp, &twin] {
        let (verdict, classes) = l.audit();
        assert!(
            !["CORRUPT", "CRASHED"].contains(&verdict.as_str()),
            "audit after recovery: {verdict} {classes:?}"
        );
        for c in &repaired {
            assert!(
                !classes.iter().any(|k| k == c),
                "audit after recovery still reports {c}: {classes:?}\n{}",
                text(&l.repo.orbit(&["audit", &l.dir.display().to_string()]))
            );
        }
    }
    // A second recovery is a no-op, for both.
    for (l, bash) in [(lp, false), (&twin, true)] {
        let before = l.tree_hash();
        let again = if bash {
            l.bash_recover(flags)
        } else {
            l.orbit_recover(flags)
        };
        assert_ok(&again, "second recovery");
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("nothing to repair"),
            "second recovery was not a no-op\n{}",
            text(&again)
        );
        assert_eq!(before, l.tree_hash(), "the second recovery changed files");
    }
    lp.no_canary();
    twin.no_canary();
    rust
}

/// Copies a directory's contents over another's (`cp -a SRC/. DST`), `DST` emptied first.
fn copy_tree(src: &Path, dst: &Path) {
    for e in fs::read_dir(dst).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            fs::remove_dir_all(&p).unwrap();
        } else {
            fs::remove_file(&p).unwrap();
        }
    }
    let st = command("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(dst)
        .status()
        .unwrap();
    assert!(st.success());
}

/// For repairs of the workspace (named by absolute paths, so a copy of the repository
/// elsewhere would repair the original's): recovers `lp` with orbit, checks it with `check`,
/// puts the repository back as it was, recovers it with recover.sh and checks it again.
/// Both must write the same state.env, and a second run of either changes nothing.
fn recover_in_turn(lp: &Loop, flags: &[&str], check: impl Fn(&Loop, &str)) -> State {
    let before = tempfile::tempdir().unwrap();
    copy_tree(lp.repo.path(), before.path());
    // The default workspaces too, outside the repository.
    let workspaces = crate::support::workspaces_of(lp.repo.path());
    let before_ws = tempfile::tempdir().unwrap();
    if workspaces.exists() {
        copy_tree(&workspaces, before_ws.path());
    }
    let mut states = Vec::new();
    for tool in ["orbit recover", "recover.sh"] {
        let out = if tool == "recover.sh" {
            lp.bash_recover(flags)
        } else {
            lp.orbit_recover(flags)
        };
        assert_ok(&out, tool);
        lp.assert_sealed();
        lp.assert_chains();
        check(lp, tool);
        states.push((without_updated(&lp.state_text()), text(&out)));
        let again = if tool == "recover.sh" {
            lp.bash_recover(flags)
        } else {
            lp.orbit_recover(flags)
        };
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("nothing to repair"),
            "a second {tool} was not a no-op\n{}",
            text(&again)
        );
        if tool == "orbit recover" {
            copy_tree(before.path(), lp.repo.path());
            if workspaces.exists() {
                copy_tree(before_ws.path(), &workspaces);
            }
        }
    }
    assert_eq!(
        states[0].0, states[1].0,
        "orbit recover and recover.sh disagree\n{}\n{}",
        states[0].1, states[1].1
    );
    lp.no_canary();
    lp.assert_sealed()
}

/// A damage to state.env alone: recover, then the runner resumes at iteration 3.
fn state_damage(refusal: i32, damage: impl Fn(&Path)) {
    let lp = Loop::new(2, &[]);
    damage(&lp.file("state.env"));
    let out = lp.tick(&[]);
    assert_code(&out, refusal, "the runner refuses a damaged state");
    let s = recover_both(&lp, &[]);
    assert_eq!(s.next_iteration, 3);
    assert_eq!(s.last_status, "CONTINUE");
    assert_eq!(s.cost_microusd, 20_000);
    assert_eq!(s.iter_branch, "orbit/test-goal");
    assert!(s.started_at > 0);
    let out = lp.tick(&[]);
    assert_code(&out, 10, "the runner resumes after recovery");
    assert!(lp.result_iteration(3).contains("ITERATION=3\n"));
    assert_eq!(lp.assert_sealed().next_iteration, 4);
    lp.no_canary();
}

#[test]
fn recover_truncated_state() {
    state_damage(4, |p| {
        let t = fs::read(p).unwrap();
        fs::write(p, &t[..t.len() / 2]).unwrap();
    });
}

#[test]
fn recover_hostile_values_never_run() {
    state_damage(4, |p| {
        let t = fs::read_to_string(p).unwrap();
        let t = t
            .lines()
            .map(|l| {
                if l.starts_with("NEXT_ITERATION=") {
                    "NEXT_ITERATION=x[$(touch CANARY)]".to_string()
                } else if l.starts_with("CB_FAILS=") {
                    "CB_FAILS=$(touch CANARY)".to_string()
                } else {
                    l.to_string()
                }
            })
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        fs::write(p, t).unwrap();
    });
}

#[test]
fn recover_duplicate_keys() {
    state_damage(4, |p| {
        let t = fs::read_to_string(p).unwrap();
        fs::write(p, format!("{t}NEXT_ITERATION=99\n")).unwrap();
    });
}

#[test]
fn recover_crlf() {
    state_damage(4, |p| {
        let t = fs::read_to_string(p).unwrap();
        fs::write(p, t.replace('\n', "\r\n")).unwrap();
    });
}

#[test]
fn recover_deleted_state() {
    // The runner's preflight names the missing file (exit 2).
    state_damage(2, |p| fs::remove_file(p).unwrap());
}

#[test]
fn recover_deleted_sidecar() {
    let lp = Loop::new(2, &[]);
    let before = lp.state_text();
    fs::remove_file(lp.file("state.env.sha256")).unwrap();
    assert_code(
        &lp.tick(&[]),
        2,
        "the runner's preflight refuses a missing sidecar",
    );
    let s = recover_both(&lp, &[]);
    // Every key kept but GEN and the time: the state was intact.
    let old = State::parse(before.as_bytes()).unwrap();
    assert_eq!(s.generation, old.generation + 1);
    assert_eq!(
        State {
            generation: old.generation,
            last_updated_at: old.last_updated_at,
            ..s.clone()
        },
        old
    );
    let backups: Vec<_> = fs::read_dir(lp.file("backups")).unwrap().collect();
    assert_eq!(backups.len(), 1);
    assert_code(&lp.tick(&[]), 10, "resume");
    assert!(lp.result_iteration(3).contains("ITERATION=3\n"));
}

#[test]
fn recover_torn_checkpoint_and_hand_edit() {
    let lp = Loop::new(2, &[]);
    let out = lp.tick(&[("ORBIT_FAULT", "after_state_before_sidecar")]);
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
    }
    // A hand edit on top: the sidecar no longer matches at all.
    replace_in(
        &lp.file("state.env"),
        "NEXT_ITERATION=4",
        "NEXT_ITERATION=9",
    );
    let s = recover_both(&lp, &[]);
    assert_eq!(s.next_iteration, 4, "the evidence wins over a hand edit");
    assert_code(&lp.tick(&[]), 10, "resume");
    assert!(lp.result_iteration(4).contains("ITERATION=4\n"));
    assert_eq!(lp.assert_sealed().next_iteration, 5);
}

#[test]
fn recover_torn_journal_and_progress_tails() {
    let lp = Loop::new(2, &[]);
    let ev = lp.file("events.jsonl");
    let mut t = fs::read(&ev).unwrap();
    t.extend_from_slice(b"{\"seq\":99,\"ts\":\"2026-");
    fs::write(&ev, t).unwrap();
    let pg = lp.file("progress.md");
    let mut t = fs::read(&pg).unwrap();
    t.extend_from_slice("## Iteration 3 — DONE\n- torn".as_bytes());
    fs::write(&pg, t).unwrap();
    let s = recover_both(&lp, &[]);
    assert_eq!(s.next_iteration, 3);
    assert_eq!(s.last_status, "CONTINUE", "a torn entry is never DONE");
    let backups = lp.file("backups");
    let b = fs::read_dir(&backups)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(
        fs::read_to_string(b.join("progress.md"))
            .unwrap()
            .ends_with("- torn")
    );
    assert_code(&lp.tick(&[]), 10, "resume");
}

#[test]
fn recover_never_infers_done_from_text() {
    let lp = Loop::new(2, &[]);
    // A claim in free text and a forged heading without an iteration_end event.
    fs::write(
        lp.file("notes.md"),
        "LAST_STATUS=DONE\nthe goal is not completed\n",
    )
    .unwrap();
    let pg = lp.file("progress.md");
    let mut t = fs::read_to_string(&pg).unwrap();
    let prev = orbit::progress::parse(t.as_bytes()).last_hash();
    let (entry, _) = orbit::progress::close_entry(
        &prev,
        2,
        "## Iteration 2 — DONE\n- decision: the goal is not completed\n",
    );
    t.push_str(&entry);
    fs::write(&pg, t).unwrap();
    replace_in(
        &lp.file("state.env"),
        "LAST_STATUS=CONTINUE",
        "LAST_STATUS=DONE",
    );
    let s = recover_both(&lp, &[]);
    assert_eq!(s.last_status, "CONTINUE");
    assert_eq!(s.next_iteration, 3);
}

#[test]
fn recover_open_circuit_retries_the_blocked_iteration() {
    let lp = Loop::new(2, &[]);
    lp.mode("fail", true);
    let out = lp.tick(&[("CB_THRESHOLD", "1"), ("RETRY_LIMIT", "1")]);
    assert_code(&out, 14, "circuit opens");
    let before = lp.assert_sealed();
    assert_eq!(
        (before.last_status.as_str(), before.cb_state.as_str()),
        ("BLOCKED", "OPEN")
    );
    assert_eq!(before.next_iteration, 4);
    lp.mode("fail", false);
    // Without --reset-circuit the circuit stays open: the loop stays BLOCKED, but the
    // blocked iteration is scheduled again.
    let twin = lp.copy();
    let s = recover_both(&twin, &[]);
    assert_eq!(
        (
            s.last_status.as_str(),
            s.cb_state.as_str(),
            s.next_iteration
        ),
        ("BLOCKED", "OPEN", 3)
    );
    let s = recover_both(&lp, &["--reset-circuit"]);
    assert_eq!(
        (s.last_status.as_str(), s.cb_state.as_str(), s.cb_fails),
        ("CONTINUE", "CLOSED", 0)
    );
    assert_eq!(
        s.next_iteration, 3,
        "a BLOCKED iteration is retried, not skipped"
    );
    let kept = lp.file("iterations/000003/retried.1/result.env");
    assert!(
        fs::read_to_string(kept)
            .unwrap()
            .contains("VERDICT=BLOCKED")
    );
    assert_code(&lp.tick(&[]), 10, "resume");
    assert!(lp.result_iteration(3).contains("VERDICT=CONTINUE"));
    assert_eq!(lp.assert_sealed().next_iteration, 4);
}

#[test]
fn recover_stall_needs_clear_stall() {
    let lp = Loop::new(2, &[]);
    lp.mode("idle", true);
    assert_code(&lp.tick(&[]), 10, "iteration 3, no change");
    assert_code(&lp.tick(&[]), 15, "iteration 4 stalls");
    assert_eq!(lp.assert_sealed().last_status, "STALLED");
    lp.mode("idle", false);
    // Without the flag nothing changes: STALLED is the truth.
    let out = lp.orbit_recover(&[]);
    assert_ok(&out, "recover");
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to repair"));
    let s = recover_both(&lp, &["--clear-stall"]);
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("CONTINUE", 5));
    assert_eq!(fs::read(lp.file(".action-sig.log")).unwrap(), b"");
    let b = fs::read_dir(lp.file("backups"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        fs::read_to_string(b.join(".action-sig.log"))
            .unwrap()
            .lines()
            .count(),
        4
    );
    assert_code(&lp.tick(&[]), 10, "resume");
    assert!(lp.result_iteration(5).contains("ITERATION=5\n"));
}

#[test]
fn recover_goal_edit_then_repin_goal() {
    let lp = Loop::new(2, &[]);
    let goal = lp.file("goal.md");
    fs::write(
        &goal,
        format!(
            "{}\nA clarified criterion.\n",
            fs::read_to_string(&goal).unwrap()
        ),
    )
    .unwrap();
    assert_code(&lp.tick(&[]), 3, "goal drift stops the runner");
    // Without the flag the pin stays broken: the truth is ABORTED.
    let twin = lp.copy();
    let s = recover_both(&twin, &[]);
    assert_eq!(
        (s.last_status.as_str(), s.stop_reason.as_str()),
        ("ABORTED", "goal_drift")
    );
    let s = recover_both(&lp, &["--repin-goal"]);
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("CONTINUE", 3));
    assert_eq!(
        fs::read(&goal).unwrap(),
        fs::read(lp.file(".pins/goal.md")).unwrap()
    );
    assert_code(&lp.tick(&[]), 10, "resume after the re-pin");
    assert!(lp.result_iteration(3).contains("ITERATION=3\n"));
}

#[test]
fn recover_goal_drift_mid_iteration_retries_it() {
    let lp = Loop::new(2, &[]);
    lp.mode("edit-goal", true);
    assert_code(&lp.tick(&[]), 3, "the agent edited goal.md");
    lp.mode("edit-goal", false);
    let s = recover_both(&lp, &["--repin-goal"]);
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("CONTINUE", 3));
    assert!(lp.file("iterations/000003/retried.1/result.env").is_file());
    assert_code(&lp.tick(&[]), 10, "the aborted iteration reruns");
    assert!(lp.result_iteration(3).contains("VERDICT=CONTINUE"));
}

#[test]
fn recover_restore_pinned_puts_files_back() {
    let lp = Loop::new(2, &["--protect", "tests/*.txt"]);
    lp.mode("edit-protected", true);
    assert_code(&lp.tick(&[]), 3, "a protected file changed");
    lp.mode("edit-protected", false);
    let v = fs::read_to_string(lp.file("verify.sh")).unwrap();
    fs::write(lp.file("verify.sh"), format!("{v}\nexit 0\n")).unwrap();
    // orbit recover and recover.sh put the same files back and agree on the state.
    let s = recover_in_turn(&lp, &["--restore-pinned"], |l, tool| {
        assert_eq!(
            fs::read_to_string(l.ws().join("tests/guard.txt")).unwrap(),
            "guard\n",
            "{tool}"
        );
        assert_eq!(
            fs::read(l.file("verify.sh")).unwrap(),
            fs::read(l.file(".pins/verify.sh")).unwrap(),
            "{tool}"
        );
    });
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("CONTINUE", 3));
    assert_code(&lp.tick(&[]), 10, "resume");
    assert!(lp.result_iteration(3).contains("VERDICT=CONTINUE"));
}

#[test]
fn a_permission_file_that_appeared_is_removed_by_restore_pinned() {
    let lp = Loop::new(1, &[]);
    lp.mode("add-permission", true);
    assert_code(&lp.tick(&[]), 3, "a permission file appeared");
    lp.mode("add-permission", false);
    assert_eq!(state_value(&lp.dir, "STOP_REASON"), "permission_hijack");
    let planted = lp.ws().join(".claude/settings.local.json");
    assert!(planted.is_file());
    // Without the flag nothing moves on: it is still there, and still a hijack.
    let s = recover_in_turn(&lp, &[], |l, tool| {
        assert!(
            l.ws().join(".claude/settings.local.json").is_file(),
            "{tool}"
        );
    });
    assert_eq!(
        (s.last_status.as_str(), s.stop_reason.as_str()),
        ("ABORTED", "permission_hijack")
    );
    // --restore-pinned has no copy to put back: it removes the file, keeping it in the
    // backup, and says so.
    let out = lp.orbit_recover(&["--dry-run", "--restore-pinned"]);
    assert_ok(&out, "dry run");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("remove: {}", planted.display())),
        "{}",
        text(&out)
    );
    assert!(planted.is_file(), "a dry run removes nothing");
    let s = recover_in_turn(&lp, &["--restore-pinned"], |l, tool| {
        let planted = l.ws().join(".claude/settings.local.json");
        assert!(!planted.exists(), "{tool}: {} removed", planted.display());
        let pg = fs::read_to_string(l.file("progress.md")).unwrap();
        assert!(
            pg.contains("appeared after the first run and has no pinned copy to restore: removed"),
            "{tool}: {pg}"
        );
        let backups: Vec<PathBuf> = walkdir::WalkDir::new(l.file("backups"))
            .into_iter()
            .flatten()
            .filter(|e| e.file_name() == "settings.local.json")
            .map(|e| e.path().to_path_buf())
            .collect();
        assert_eq!(
            backups.len(),
            1,
            "{tool}: one copy in the backup: {backups:?}"
        );
        assert!(fs::read_to_string(&backups[0]).unwrap().contains("Bash(*)"));
    });
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("CONTINUE", 2));
    assert_code(&lp.tick(&[]), 10, "resume");
}

#[test]
fn a_git_tamper_stop_holds_until_repin_accepts_it() {
    let lp = Loop::new(1, &[]);
    lp.mode("swap-workspace", true);
    assert_code(&lp.tick(&[]), 3, "the workspace swapped for a link");
    assert_eq!(state_value(&lp.dir, "STOP_REASON"), "git_tamper");
    fs::remove_file(lp.ws()).unwrap();
    // A plain recovery (either tool) recreates the workspace but keeps the stop: only a
    // review and --repin move a git_tamper on.
    let s = recover_in_turn(&lp, &[], |l, tool| {
        assert!(
            l.ws().join(".git").is_file(),
            "{tool}: the workspace is back"
        );
    });
    assert_eq!(
        (s.last_status.as_str(), s.stop_reason.as_str()),
        ("ABORTED", "git_tamper")
    );
    let (_, classes) = lp.audit();
    assert!(classes.iter().any(|c| c == "GIT_TAMPER"), "{classes:?}");
    assert!(!classes.iter().any(|c| c == "SCRIPT_TAMPER"), "{classes:?}");
    let out = lp.orbit_recover(&["--repin"]);
    assert_ok(&out, "--repin");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("git_tamper accepted after review"),
        "{}",
        text(&out)
    );
    let s = lp.assert_sealed();
    assert_eq!(
        (s.last_status.as_str(), s.stop_reason.as_str()),
        ("CONTINUE", "none")
    );
    let (_, classes) = lp.audit();
    assert!(!classes.iter().any(|c| c == "GIT_TAMPER"), "{classes:?}");
    assert_code(&lp.tick(&[]), 10, "resume");
    // With the state gone, the journal's last stop says it: still held.
    let lp = Loop::new(1, &[]);
    lp.mode("swap-workspace", true);
    assert_code(&lp.tick(&[]), 3, "swapped again");
    fs::remove_file(lp.ws()).unwrap();
    fs::remove_file(lp.file("state.env")).unwrap();
    let s = recover_in_turn(&lp, &[], |_, _| {});
    assert_eq!(
        (s.last_status.as_str(), s.stop_reason.as_str()),
        ("ABORTED", "git_tamper")
    );
}

/// Writes pins.sets as the runner's first run writes it: for each glob, the sha256 of
/// `git -C <workspace> ls-files -z --cached --others --exclude-standard -- ':(glob)<glob>' |
/// LC_ALL=C sort -z`.
fn pin_sets(lp: &Loop, globs: &[&str]) {
    let mut text = String::new();
    for g in globs {
        let mut cmd = command("bash");
        cmd.arg("-c")
            .arg("git -C \"$1\" ls-files -z --cached --others --exclude-standard -- \":(glob)$2\" | LC_ALL=C sort -z | sha256sum")
            .arg("pin-sets")
            .arg(lp.ws())
            .arg(g);
        let out = run_bounded(cmd, Duration::from_secs(30));
        assert_ok(&out, "hash a set");
        let sha = String::from_utf8_lossy(&out.stdout)[..64].to_string();
        text.push_str(&format!("{sha}  {g}\n"));
    }
    fs::write(lp.file("pins.sets"), text).unwrap();
}

#[test]
fn a_file_added_to_a_protected_set_is_reward_hack_until_restored_or_repinned() {
    let lp = Loop::new(1, &["--protect", "tests/*.txt"]);
    pin_sets(&lp, &["tests/*.txt"]);
    let (_, classes) = lp.audit();
    assert!(
        !classes.iter().any(|c| c == "REWARD_HACK"),
        "the set as pinned holds: {classes:?}"
    );
    // Added to the set, and a member renamed: each is a change like an edit.
    fs::write(lp.ws().join("tests/weak.txt"), "always passes\n").unwrap();
    lp.repo
        .ws_git(&["mv", "tests/guard.txt", "tests/moved.txt"]);
    let d = lp.dir.display().to_string();
    let out = lp.repo.orbit(&["audit", "--json", &d]);
    assert_code(&out, 3, "a changed set");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["evidence"] == "pins.sets:1")
        .unwrap_or_else(|| panic!("{v}"))
        .clone();
    assert_eq!(
        (f["class"].as_str(), f["severity"].as_str()),
        (Some("REWARD_HACK"), Some("P0"))
    );
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("the protected set 'tests/*.txt' changed")
            && msg.contains("added tests/moved.txt, tests/weak.txt; removed tests/guard.txt"),
        "{msg}"
    );
    assert_eq!(f["fix"], format!("orbit recover {d} --restore-pinned"));
    // Without a flag the loop stays stopped, with either tool.
    let s = recover_in_turn(&lp, &[], |_, _| {});
    assert_eq!(
        (s.last_status.as_str(), s.stop_reason.as_str()),
        ("ABORTED", "reward_hack")
    );
    // --restore-pinned removes what was added (a copy in the backup) and restores what
    // was removed; the set holds again.
    let s = recover_in_turn(&lp, &["--restore-pinned"], |l, tool| {
        assert!(!l.ws().join("tests/weak.txt").exists(), "{tool}");
        assert!(!l.ws().join("tests/moved.txt").exists(), "{tool}");
        assert_eq!(
            fs::read_to_string(l.ws().join("tests/guard.txt")).unwrap(),
            "guard\n",
            "{tool}"
        );
        let (_, classes) = l.audit();
        assert!(
            !classes.iter().any(|c| c == "REWARD_HACK"),
            "{tool}: {classes:?}"
        );
    });
    assert_eq!(s.last_status, "CONTINUE");
    // --repin accepts a changed set after review: pinned as it is, pins.sets rewritten.
    fs::write(lp.ws().join("tests/more.txt"), "reviewed\n").unwrap();
    let before = fs::read_to_string(lp.file("pins.sets")).unwrap();
    assert_ok(&lp.orbit_recover(&["--repin"]), "--repin");
    assert_ne!(fs::read_to_string(lp.file("pins.sets")).unwrap(), before);
    assert!(
        fs::read_to_string(lp.file("pins.sha256"))
            .unwrap()
            .contains(&format!("  {}/tests/more.txt\n", lp.ws().display()))
    );
    let (_, classes) = lp.audit();
    assert!(!classes.iter().any(|c| c == "REWARD_HACK"), "{classes:?}");
    assert_eq!(lp.assert_sealed().last_status, "CONTINUE");
    // A manifest removed (say, after it was found to be a FIFO) is made again by --repin.
    let pins_before = fs::read_to_string(lp.file("pins.sha256")).unwrap();
    fs::remove_file(lp.file("pins.sha256")).unwrap();
    assert_ok(
        &lp.orbit_recover(&["--repin"]),
        "--repin without pins.sha256",
    );
    assert_eq!(
        fs::read_to_string(lp.file("pins.sha256")).unwrap(),
        pins_before
    );
    let (_, classes) = lp.audit();
    assert!(
        !classes
            .iter()
            .any(|c| c == "CONTRACT_MISSING" || c == "REWARD_HACK"),
        "{classes:?}"
    );
}

#[test]
fn recover_repin_accepts_every_pin() {
    let lp = Loop::new(1, &["--protect", "tests/*.txt"]);
    fs::write(lp.ws().join("tests/guard.txt"), "guard, reviewed\n").unwrap();
    fs::write(
        lp.file("notify.sh"),
        format!(
            "{}\n# reviewed\n",
            fs::read_to_string(lp.file("notify.sh")).unwrap()
        ),
    )
    .unwrap();
    assert_code(&lp.tick(&[]), 3, "pins broken");
    let out = lp.orbit_recover(&["--repin"]);
    assert_ok(&out, "repin");
    assert_eq!(
        fs::read(lp.file("notify.sh")).unwrap(),
        fs::read(lp.file(".pins/notify.sh")).unwrap()
    );
    assert_eq!(lp.assert_sealed().last_status, "CONTINUE");
    assert_code(&lp.tick(&[]), 10, "resume");
}

#[test]
fn recover_migrate_sets_the_contract_version() {
    let lp = Loop::new(1, &[]);
    replace_in(
        &lp.file("state.env"),
        &format!("CONTRACT_VERSION={}", orbit::config::CONTRACT_VERSION),
        "CONTRACT_VERSION=0.9.0",
    );
    // As a runner of that version would have left it: the journal names the state it wrote.
    let sha = crate::support::file_sha(&lp.file("state.env"));
    crate::support::append_event(&lp.dir, "state_write", 0, &[("sha256", &sha)]);
    let twin = lp.copy();
    let s = recover_both(&twin, &[]);
    assert_eq!(s.contract_version, "0.9.0", "kept without --migrate");
    let s = recover_both(&lp, &["--migrate"]);
    assert_eq!(s.contract_version, orbit::config::CONTRACT_VERSION);
}

#[test]
fn a_state_of_a_newer_contract_is_never_repaired_or_downgraded() {
    let lp = Loop::new(1, &[]);
    replace_in(
        &lp.file("state.env"),
        &format!("CONTRACT_VERSION={}", orbit::config::CONTRACT_VERSION),
        "CONTRACT_VERSION=9.0.0",
    );
    // Sealed, as a newer runner would have left it.
    let state = lp.state_text();
    let generation = orbit::state::State::parse(state.as_bytes())
        .unwrap()
        .generation;
    fs::write(
        lp.file("state.env.sha256"),
        orbit::state::Sidecar::for_state(&state, generation).print(),
    )
    .unwrap();
    let before = fs::read(lp.file("state.env")).unwrap();
    for flags in [&[][..], &["--migrate"][..], &["--dry-run"][..]] {
        for (by, out) in [
            ("orbit recover", lp.orbit_recover(flags)),
            ("recover.sh", lp.bash_recover(flags)),
        ] {
            assert_code(&out, 2, &format!("{by} {flags:?} on a 9.0.0 state"));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("9.0.0") && err.contains("newer"),
                "{by}: {err}"
            );
            assert_eq!(
                fs::read(lp.file("state.env")).unwrap(),
                before,
                "{by} wrote"
            );
        }
    }
    // The runner refuses it too, as state it cannot read (exit 4), and changes nothing.
    let out = lp.tick(&[]);
    assert_code(&out, 4, "a runner given a newer contract's state");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("newer"),
        "{}",
        text(&out)
    );
    assert_eq!(fs::read(lp.file("state.env")).unwrap(), before);
}

#[test]
fn recover_keeps_a_stopped_loop_stopped() {
    let lp = Loop::new(1, &[]);
    let d = lp.dir.display().to_string();
    assert_ok(&lp.repo.orbit(&["stop", &d]), "orbit stop");
    // The checkpoint is lost: the journal's last state_write (by orbit stop) still holds it.
    fs::remove_file(lp.file("state.env.sha256")).unwrap();
    let s = recover_both(&lp, &[]);
    assert_eq!(
        (s.last_status.as_str(), s.stop_reason.as_str()),
        ("PAUSED", "stopped")
    );
    assert_code(&lp.tick(&[]), 18, "still stopped after the repair");
}

#[test]
fn recover_dry_run_writes_nothing() {
    let lp = Loop::new(2, &[]);
    replace_in(
        &lp.file("state.env"),
        "NEXT_ITERATION=3",
        "NEXT_ITERATION=x",
    );
    fs::write(lp.file(".action-sig.log"), "1\tabc\n").unwrap();
    let before = lp.tree_hash();
    let out = lp.orbit_recover(&[
        "--dry-run",
        "--clear-stall",
        "--reset-circuit",
        "--repin-goal",
    ]);
    assert_ok(&out, "dry run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("-NEXT_ITERATION=x\n"), "{stdout}");
    assert!(stdout.contains("+NEXT_ITERATION=3\n"), "{stdout}");
    assert_eq!(
        before,
        lp.tree_hash(),
        "orbit recover --dry-run wrote something"
    );
    let out = lp.bash_recover(&[
        "--dry-run",
        "--clear-stall",
        "--reset-circuit",
        "--repin-goal",
    ]);
    assert_ok(&out, "recover.sh dry run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("+NEXT_ITERATION=3"), "{stdout}");
    assert_eq!(
        before,
        lp.tree_hash(),
        "recover.sh --dry-run wrote something"
    );
}

#[test]
fn recover_refuses_while_a_runner_holds_the_lock() {
    if command("flock").arg("--version").output().is_err() {
        eprintln!("notice: flock is not installed; skipping the lock probe test");
        return;
    }
    let lp = Loop::new(1, &[]);
    replace_in(
        &lp.file("state.env"),
        "NEXT_ITERATION=2",
        "NEXT_ITERATION=x",
    );
    // Held as the runner holds it: flock on a descriptor of a long-lived process.
    let mut holder = command("bash")
        .args(["-c", "exec 9>>\"$1\"; flock 9; exec sleep 60", "holder"])
        .arg(lp.file(".run-loop.lock"))
        .spawn()
        .unwrap();
    // Wait until the lock is visibly held.
    let lock_ino = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(lp.file(".run-loop.lock")).unwrap().ino()
    };
    crate::support::wait_for(
        "the holder to take the lock",
        Duration::from_secs(60),
        || {
            fs::read_to_string("/proc/locks")
                .unwrap_or_default()
                .contains(&format!(":{lock_ino} "))
        },
    );
    let before = lp.tree_hash();
    let out = lp.orbit_recover(&[]);
    let out_sh = lp.bash_recover(&[]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_code(&out, 20, "orbit recover under a held lock");
    assert_code(&out_sh, 20, "recover.sh under a held lock");
    assert_eq!(
        before,
        lp.tree_hash(),
        "nothing may change under a running loop"
    );
    // Once the runner is gone, recovery proceeds.
    let s = recover_both(&lp, &[]);
    assert_eq!(s.next_iteration, 2);
}

#[test]
fn recover_script_is_clean_bash() {
    let lp = Loop::new(0, &[]);
    assert_script_clean(&lp.file("recover.sh"));
    // A never-run loop needs nothing.
    let out = lp.bash_recover(&[]);
    assert_ok(&out, "recover.sh on a fresh loop");
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to repair"));
    let out = lp.orbit_recover(&[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to repair"));
    // A fresh loop whose state is lost is READY again.
    fs::remove_file(lp.file("state.env")).unwrap();
    let s = recover_both(&lp, &[]);
    assert_eq!(
        (s.last_status.as_str(), s.next_iteration, s.started_at),
        ("READY", 1, 0)
    );
}

#[test]
fn recover_keeps_a_recorded_but_unclosed_iteration() {
    // A crash after the commit, before the iteration was closed: result.env and the commit
    // exist, the progress entry and the iteration_end event do not. The state is lost too.
    let lp = Loop::new(2, &[]);
    let out = lp.tick(&[("ORBIT_FAULT", "after_commit")]);
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
    }
    assert!(lp.result_iteration(3).contains("ITERATION=3\n"));
    fs::remove_file(lp.file("state.env")).unwrap();
    let s = recover_both(&lp, &[]);
    assert_eq!(
        s.next_iteration, 3,
        "the recorded iteration is completed, not skipped"
    );
    assert_code(&lp.tick(&[]), 10, "resume");
    let commits = lp.repo.git(&["log", "--format=%s", "--branches"]);
    assert_eq!(
        commits
            .lines()
            .filter(|l| l.ends_with("iteration 3"))
            .count(),
        1,
        "iteration 3 committed once:\n{commits}"
    );
    let pg = fs::read_to_string(lp.file("progress.md")).unwrap();
    assert!(pg.contains("## Iteration 3 — CONTINUE"), "{pg}");
    assert!(lp.result_iteration(4).contains("ITERATION=4\n"));
    assert_eq!(lp.assert_sealed().next_iteration, 5);
}

#[test]
fn recover_after_a_crash_mid_state_write_and_mid_progress_append() {
    let lp = Loop::new(2, &[]);
    let out = lp.tick(&[("ORBIT_FAULT", "mid_state_write")]);
    assert!(out.status.code().is_none(), "{}", text(&out));
    let strays: Vec<String> = fs::read_dir(&lp.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(
        !strays.is_empty(),
        "the fault leaves a half-written temp file"
    );
    let s = recover_both(&lp, &[]);
    assert_eq!(
        s.next_iteration, 4,
        "iteration 3 was closed before the state write"
    );
    let b = fs::read_dir(lp.file("backups"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    for n in &strays {
        assert!(!lp.file(n).exists());
        assert!(b.join(n).is_file(), "{n} kept in the backup");
    }
    let out = lp.tick(&[("ORBIT_FAULT", "mid_progress_append")]);
    assert!(out.status.code().is_none(), "{}", text(&out));
    let s = recover_both(&lp, &[]);
    assert_eq!(
        s.next_iteration, 4,
        "iteration 4 is recorded but not closed"
    );
    assert_code(&lp.tick(&[]), 10, "resume");
    let pg = fs::read_to_string(lp.file("progress.md")).unwrap();
    assert_eq!(pg.matches("## Iteration 4 — CONTINUE").count(), 1, "{pg}");
    lp.assert_chains();
}

#[test]
fn recover_gen_rises_above_every_generation_seen() {
    let lp = Loop::new(1, &[]);
    let old = lp.assert_sealed();
    let sc = lp.file("state.env.sha256");
    let t = fs::read_to_string(&sc).unwrap();
    fs::write(
        &sc,
        t.replace(&format!("# gen={}", old.generation), "# gen=99"),
    )
    .unwrap();
    let s = recover_both(&lp, &[]);
    assert_eq!(s.generation, 100);
    assert_eq!(s.next_iteration, 2);
}

#[test]
fn recover_a_missing_final_newline_alone_is_no_change() {
    let lp = Loop::new(1, &[]);
    let pg = lp.file("progress.md");
    let t = fs::read_to_string(&pg).unwrap();
    fs::write(&pg, t.trim_end_matches('\n')).unwrap();
    let before = lp.tree_hash();
    for out in [lp.orbit_recover(&[]), lp.bash_recover(&[])] {
        assert_ok(&out, "recover");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("nothing to repair"),
            "{}",
            text(&out)
        );
    }
    assert_eq!(before, lp.tree_hash());
    assert_code(&lp.tick(&[]), 10, "the runner mends the newline itself");
}

#[test]
fn recover_output_snapshot() {
    let lp = Loop::new(2, &[]);
    replace_in(
        &lp.file("state.env"),
        "NEXT_ITERATION=3",
        "NEXT_ITERATION=x[$(touch CANARY)]",
    );
    // The plan's time then differs from the last write's, as it would under load.
    std::thread::sleep(Duration::from_millis(1100));
    let dry = lp.orbit_recover(&["--dry-run"]);
    assert_ok(&dry, "dry run");
    let out = lp.orbit_recover(&[]);
    assert_ok(&out, "recover");
    let pg = fs::read_to_string(lp.file("progress.md")).unwrap();
    let entry = &pg[pg.rfind("## Recovery — ").unwrap()..];
    let ev = fs::read_to_string(lp.file("events.jsonl")).unwrap();
    let doc = format!(
        "==== orbit recover --dry-run\n{}==== orbit recover\n{}==== progress.md (the Recovery entry)\n{entry}==== events.jsonl (the last line)\n{}\n==== state.env\n{}",
        String::from_utf8_lossy(&dry.stdout),
        String::from_utf8_lossy(&out.stdout),
        ev.lines().last().unwrap(),
        lp.state_text()
    );
    lp.no_canary();
    insta::with_settings!({
        snapshot_path => "../../snapshots",
        prepend_module_to_snapshot => false,
        filters => vec![
            // The plan's new time equals the old one only when both fall in one second.
            (
                r"(?m)^-LAST_UPDATED_AT=\d+\n\+LAST_UPDATED_AT=\d+$",
                " LAST_UPDATED_AT=[EPOCH]",
            ),
            (r"=/\S*/\.orbit/\.workspaces/", "=[REPO]/.orbit/.workspaces/"),
            (
                r"=/\S*/orbit/workspaces/[^/\s]+/",
                "=[DATA]/orbit/workspaces/[REPO-ID]/",
            ),
            (r"\b[0-9a-f]{64}\b", "[SHA256]"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[UTC]"),
            (r"\d{8}T\d{6}Z(-\d+)?", "[STAMP]"),
            (r"\b1\d{9}\b", "[EPOCH]"),
        ],
    }, {
        insta::assert_snapshot!("recover_hostile_state", doc);
    });
}

#[test]
fn recover_keeps_done_only_on_structured_evidence() {
    let lp = Loop::with_check(0, "test -f work.txt", &[]);
    lp.mode("finish", true);
    assert_code(&lp.tick(&[("CONFIRM_RUNS", "0")]), 0, "DONE");
    assert_eq!(lp.assert_sealed().last_status, "DONE");
    // The checkpoint is lost: the iteration_end event and result.env both say DONE.
    fs::remove_file(lp.file("state.env")).unwrap();
    let twin = lp.copy();
    let s = recover_both(&lp, &[]);
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("DONE", 2));
    let out = lp.tick(&[]);
    assert_code(&out, 0, "a DONE loop stays DONE");
    assert!(String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: DONE"));
    // Without the iteration's record, the event alone is not enough.
    let forged = twin.copy();
    fs::remove_file(twin.file("iterations/000001/result.env")).unwrap();
    let s = recover_both(&twin, &[]);
    assert_eq!(s.last_status, "CONTINUE");
    // A record that is not one (a line no runner writes, a count that is not a number)
    // proves nothing either, to orbit recover and recover.sh alike.
    // (The audit goes on reporting the unreadable record, which recover keeps as it is.)
    for bad in [
        "NOT_A_KEY=1\n",
        "CHANGED=x[$(touch CANARY)]\n",
        "VERDICT=DONE\n",
    ] {
        let lp = forged.copy();
        let rec = lp.file("iterations/000001/result.env");
        let mut t = fs::read_to_string(&rec).unwrap();
        t.push_str(bad);
        fs::write(&rec, t).unwrap();
        let twin = lp.copy();
        assert_ok(&lp.orbit_recover(&[]), "orbit recover");
        assert_ok(&twin.bash_recover(&[]), "recover.sh");
        let s = lp.assert_sealed();
        twin.assert_sealed();
        assert_eq!(s.last_status, "CONTINUE", "a record with {bad:?}");
        let (a, b) = twin_states(&lp, &twin);
        assert_eq!(
            a, b,
            "orbit recover and recover.sh disagree on a record with {bad:?}"
        );
        assert!(!lp.file("CANARY").exists() && !lp.repo.path().join("CANARY").exists());
    }
}

/// Forges a DONE for iteration `n` as someone who knows the formats would: a result.env
/// that says DONE, and an `iteration_end` appended to the journal with its chain recomputed.
fn forge_done(lp: &Loop, n: u64) {
    let idir = lp.file(&format!("iterations/{n:06}"));
    fs::create_dir_all(&idir).unwrap();
    fs::write(
        idir.join("result.env"),
        format!(
            "ITERATION={n}\nPHASE=work\nAGENT_EXIT=0\nAGENT_OUTCOME=ok\nVERIFY=pass\nCHANGED=0\nDONE_CLAIM=1\nDONE_VERDICT=DONE\nVERDICT=DONE\nSTOP_REASON=none\nEXIT_CODE=0\nSUMMARY=all done\n"
        ),
    )
    .unwrap();
    crate::support::append_event(
        &lp.dir,
        "iteration_end",
        n,
        &[
            ("verdict", "DONE"),
            ("reason", "none"),
            ("commit", "none"),
            ("changed", "0"),
        ],
    );
}

#[test]
fn a_forged_done_is_not_believed_and_recover_says_which_check_failed() {
    // Before the cross-checks, this was enough: recover concluded DONE.
    let lp = Loop::new(2, &[]);
    forge_done(&lp, 3);
    assert_eq!(
        orbit::events::read(&fs::read(lp.file("events.jsonl")).unwrap()).error,
        None,
        "the forged journal chains"
    );
    let out = lp.orbit_recover(&["--dry-run"]);
    let said = String::from_utf8_lossy(&out.stdout);
    // The runner announces every record it writes (iteration_result): the forged one is
    // not announced, and that is the first cross-check it fails.
    assert!(
        said.contains("iteration 3's DONE is not trusted: no iteration_result event announces iterations/000003/result.env"),
        "{said}"
    );
    let s = recover_both(&lp, &[]);
    assert_eq!(
        (s.last_status.as_str(), s.next_iteration),
        ("CONTINUE", 3),
        "iteration 3 runs again, from a clean record"
    );
    assert!(
        lp.file("iterations/000003/untrusted.1/result.env")
            .is_file()
    );
    assert!(!lp.file("iterations/000003/result.env").exists());
    // The runner does iteration 3 for real (it never takes the forged record).
    assert_code(&lp.tick(&[]), 10, "iteration 3 runs");
    assert!(lp.result_iteration(3).contains("VERDICT=CONTINUE"));

    // A forger who also announces the record with its own sha256 meets the last check: the
    // loop commits every iteration, and no commit on the loop branch says iteration 3.
    let lp = Loop::new(2, &[]);
    forge_done(&lp, 3);
    let sha = crate::support::file_sha(&lp.file("iterations/000003/result.env"));
    crate::support::append_event(
        &lp.dir,
        "iteration_result",
        3,
        &[("verdict", "DONE"), ("reason", "none"), ("sha256", &sha)],
    );
    let said = String::from_utf8_lossy(&lp.orbit_recover(&["--dry-run"]).stdout).to_string();
    assert!(
        said.contains(
            "the loop commits, but no commit on orbit/test-goal carries Orbit-Iteration: 3"
        ),
        "{said}"
    );
    let s = recover_both(&lp, &[]);
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("CONTINUE", 3));

    // With a journal that announces its records, a DONE record needs its iteration_result,
    // and one whose sha256 is its own: a commit carrying the trailer is not enough.
    for with_result in [false, true] {
        let lp = Loop::new(2, &[]);
        crate::support::announce_records(&lp.dir);
        forge_done(&lp, 3);
        if with_result {
            crate::support::append_event(
                &lp.dir,
                "iteration_result",
                3,
                &[
                    ("verdict", "DONE"),
                    ("reason", "none"),
                    ("sha256", &"0".repeat(64)),
                ],
            );
        }
        lp.repo.ws_git(&[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "orbit(test-goal): iteration 3\n\nOrbit-Loop: test-goal\nOrbit-Iteration: 3",
        ]);
        let out = lp.orbit_recover(&["--dry-run"]);
        let said = String::from_utf8_lossy(&out.stdout);
        let want = if with_result {
            "iterations/000003/result.env is not the record the runner wrote"
        } else {
            "no iteration_result event announces iterations/000003/result.env"
        };
        assert!(said.contains(want), "{said}");
        let s = recover_both(&lp, &[]);
        assert_eq!((s.last_status.as_str(), s.next_iteration), ("CONTINUE", 3));
    }

    // A DONE the runner made, with every record agreeing, is still DONE.
    let lp = Loop::with_check(0, "test -f work.txt", &[]);
    lp.mode("finish", true);
    assert_code(&lp.tick(&[("CONFIRM_RUNS", "0")]), 0, "DONE");
    crate::support::announce_records(&lp.dir);
    fs::remove_file(lp.file("state.env")).unwrap();
    let s = recover_both(&lp, &[]);
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("DONE", 2));
}

#[test]
fn a_broken_journal_is_sealed_so_the_advised_recover_repairs_it() {
    type Damage = fn(&Loop);
    let damages: [(&str, Damage); 5] = [
        ("an edited event", |lp| {
            replace_in(&lp.file("events.jsonl"), "\"run\":1", "\"run\":2")
        }),
        ("a removed event", |lp| {
            let p = lp.file("events.jsonl");
            let t = fs::read_to_string(&p).unwrap();
            let mut lines: Vec<&str> = t.lines().collect();
            lines.remove(3);
            fs::write(&p, format!("{}\n", lines.join("\n"))).unwrap();
        }),
        ("a line that is no event", |lp| {
            let p = lp.file("events.jsonl");
            let t = fs::read_to_string(&p).unwrap();
            fs::write(&p, format!("{t}not an event\n")).unwrap();
        }),
        ("a rewritten progress entry", |lp| {
            replace_in(&lp.file("progress.md"), "- verify: fail", "- verify: pass")
        }),
        ("lines outside any progress entry", |lp| {
            let p = lp.file("progress.md");
            let t = fs::read_to_string(&p).unwrap();
            fs::write(&p, format!("{t}I was here\n")).unwrap();
        }),
    ];
    for (what, damage) in damages {
        let lp = Loop::new(2, &[]);
        damage(&lp);
        let (_, classes) = lp.audit();
        assert!(
            classes.iter().any(|c| c == "JOURNAL_BROKEN"),
            "{what}: {classes:?}"
        );
        let before = fs::read(lp.file("events.jsonl")).unwrap();
        // orbit recover and recover.sh seal it alike; the audit afterwards is clean of it
        // (recover_both checks), and the runner goes on.
        let s = recover_both(&lp, &[]);
        assert_eq!(s.next_iteration, 3, "{what}");
        let out = lp.tick(&[]);
        assert_code(&out, 10, &format!("{what}: the loop goes on"));
        // Nothing is lost: the old file is in the backup.
        let backed: Vec<Vec<u8>> = walkdir::WalkDir::new(lp.file("backups"))
            .into_iter()
            .flatten()
            .filter(|e| e.file_name() == "events.jsonl")
            .map(|e| fs::read(e.path()).unwrap())
            .collect();
        assert!(
            backed.contains(&before),
            "{what}: the old journal is in the backup"
        );
    }
    // The recovery that sealed the journal says where it broke.
    let lp = Loop::new(2, &[]);
    replace_in(&lp.file("events.jsonl"), "\"run\":1", "\"run\":2");
    assert_ok(&lp.orbit_recover(&[]), "recover");
    let ev = crate::support::events_named(&lp.dir, "recovery")
        .pop()
        .unwrap();
    assert!(
        ev.value["journal_break"].as_u64().unwrap() > 1,
        "{:?}",
        ev.value
    );
    assert!(ev.value["journal_dropped"].as_u64().unwrap() >= 1);
    assert!(
        ev.value["journal_break_why"]
            .as_str()
            .unwrap()
            .contains("does not match its content")
    );
}

#[test]
fn recover_reads_the_mkdir_lock() {
    let lp = Loop::new(1, &[]);
    replace_in(
        &lp.file("state.env"),
        "NEXT_ITERATION=2",
        "NEXT_ITERATION=x",
    );
    let lockdir = lp.file(".run-loop.lock.d");
    fs::create_dir(&lockdir).unwrap();
    let mut live = command("sleep").arg("60").spawn().unwrap();
    let start = command("bash")
        .args(["-c", "ps -o lstart= -p \"$1\" | tr -s ' '", "x"])
        .arg(live.id().to_string())
        .output()
        .unwrap();
    let start = String::from_utf8_lossy(&start.stdout)
        .trim_end()
        .to_string();
    fs::write(lockdir.join("owner"), format!("{} {start}\n", live.id())).unwrap();
    let before = lp.tree_hash();
    let out = lp.orbit_recover(&[]);
    let out_sh = lp.bash_recover(&[]);
    let _ = live.kill();
    let _ = live.wait();
    assert_code(&out, 20, "orbit recover under a live mkdir lock");
    assert_code(&out_sh, 20, "recover.sh under a live mkdir lock");
    assert_eq!(before, lp.tree_hash());
    // The owner is gone: a stale lock does not stop the repair.
    let s = recover_both(&lp, &[]);
    assert_eq!(s.next_iteration, 2);
}

#[test]
fn recover_agrees_with_recover_sh_on_every_truncation() {
    let lp = Loop::new(2, &[]);
    let full = fs::read(lp.file("state.env")).unwrap();
    for cut in (0..full.len()).step_by(23) {
        let case = lp.copy();
        fs::write(case.file("state.env"), &full[..cut]).unwrap();
        let twin = case.copy();
        assert_ok(&case.orbit_recover(&[]), "orbit recover");
        assert_ok(&twin.bash_recover(&[]), "recover.sh");
        let (a, b) = twin_states(&case, &twin);
        assert_eq!(a, b, "disagreement after a cut at byte {cut}");
        assert_eq!(case.assert_sealed().next_iteration, 3);
    }
}

/// A recovery that dies after writing its records but before the checkpoint: the loop is
/// still refused (nothing half-applied is taken for good), a second recovery completes the
/// repair, and the runner resumes.
#[test]
fn recover_survives_a_crash_of_its_own() {
    let lp = Loop::new(2, &[]);
    let state = lp.state_text();
    fs::write(lp.file("state.env"), &state[..state.len() / 2]).unwrap();
    let d = lp.dir.display().to_string();
    let mut cmd = command(crate::support::orbit_bin());
    cmd.args(["recover", &d])
        .current_dir(lp.repo.path())
        .env("PATH", lp.repo.path_env())
        .env("ORBIT_FAULT", "recover_before_checkpoint");
    let out = run_bounded(cmd, std::time::Duration::from_secs(60));
    assert_eq!(out.status.code(), None, "the recovery died\n{}", text(&out));
    assert_code(&lp.tick(&[]), 4, "the checkpoint is still the damaged one");
    let s = recover_both(&lp, &[]);
    assert_eq!(s.next_iteration, 3);
    let out = lp.tick(&[]);
    assert_code(&out, 10, "the runner resumes after the second recovery");
    let (verdict, classes) = lp.audit();
    assert!(
        verdict != "CORRUPT" && !classes.iter().any(|c| c == "STATE_DRIFT"),
        "{verdict} {classes:?}"
    );
}

/// A loop that the release before contract 2.2 rendered and never ran (the fixture
/// tests/fixtures/loop-v2.1/, see its README), unpacked into a fresh repository.
fn loop_v2_1() -> Loop {
    let repo = Repo::new();
    repo.write("tests/guard.txt", "guard\n");
    repo.git(&["add", "tests/guard.txt"]);
    repo.git(&["commit", "-q", "-m", "guard"]);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    fs::create_dir_all(repo.path().join(".orbit")).unwrap();
    let st = command("tar")
        .arg("-xJf")
        .arg(fixtures.join("loop-v2.1/loop-v2.1.tar.xz"))
        .arg("-C")
        .arg(repo.path().join(".orbit"))
        .status()
        .unwrap();
    assert!(st.success());
    fs::copy(
        fixtures.join("loop-v1/fake-agent"),
        repo.bin.path().join("fake-agent"),
    )
    .unwrap();
    let dir = repo.path().join(".orbit/test-goal");
    let lp = Loop { repo, dir };
    // As that release left it: its own scripts, its version in the state and loop.toml.
    assert!(lp.state_text().starts_with("CONTRACT_VERSION=2.0.0\n"));
    assert!(
        fs::read_to_string(lp.file("run-loop.sh"))
            .unwrap()
            .contains("readonly ORBIT_CONTRACT_VERSION=2.0.0\n")
    );
    lp
}

/// The audit's findings of `lp` above P2 (what would make it exit non-zero).
fn serious_findings(lp: &Loop) -> Vec<String> {
    let d = lp.dir.display().to_string();
    let out = lp.repo.orbit(&["audit", "--json", &d]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit --json: {e}\n{}", text(&out)));
    v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "P2")
        .map(|f| f.to_string())
        .collect()
}

#[test]
fn a_loop_rendered_under_contract_2_1_runs_to_done_with_its_own_scripts() {
    let lp = loop_v2_1();
    let d = lp.dir.display().to_string();
    let out = lp.repo.orbit(&["run", &d]);
    assert_code(&out, 0, "orbit run of the 2.1 loop");
    let s = lp.assert_sealed();
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("DONE", 4));
    // It kept its version and its scripts: nothing moved it behind the user's back.
    assert_eq!(s.contract_version, "2.0.0");
    assert!(
        fs::read_to_string(lp.file("run-loop.sh"))
            .unwrap()
            .contains("readonly ORBIT_CONTRACT_VERSION=2.0.0\n")
    );
    let (verdict, _) = lp.audit();
    assert_eq!(verdict, "DONE");
    assert_eq!(serious_findings(&lp), Vec::<String>::new());
    lp.assert_chains();
}

#[test]
fn recover_migrate_moves_a_2_1_loop_to_this_contract_between_ticks() {
    let lp = loop_v2_1();
    assert_code(
        &lp.tick(&[]),
        10,
        "a tick of the 2.1 loop with its own scripts",
    );
    let progress = fs::read(lp.file("progress.md")).unwrap();
    let events = fs::read(lp.file("events.jsonl")).unwrap();

    let out = lp.orbit_recover(&["--migrate", "--repin"]);
    assert_ok(&out, "orbit recover --migrate");
    let said = text(&out);
    let v = orbit::config::CONTRACT_VERSION;
    assert!(
        said.contains(&format!("re-rendered for contract {v} (--migrate)"))
            && said.contains("run-loop.sh")
            && said.contains(&format!("CONTRACT_VERSION migrated to {v}")),
        "{said}"
    );
    let s = lp.assert_sealed();
    assert_eq!(s.contract_version, v);
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("CONTINUE", 2));
    // The new layout: the shared code in lib.sh, pinned, and the pin in run-loop.sh.
    let lib = fs::read(lp.file("lib.sh")).unwrap();
    assert!(
        String::from_utf8_lossy(&lib).contains(&format!("readonly ORBIT_CONTRACT_VERSION={v}\n"))
    );
    let sha = crate::support::file_sha(&lp.file("lib.sh"));
    assert!(
        fs::read_to_string(lp.file("run-loop.sh"))
            .unwrap()
            .contains(&format!("ORBIT_LIB_SHA256={sha}\n"))
    );
    assert!(
        fs::read_to_string(lp.file("pins.sha256"))
            .unwrap()
            .contains(&format!("{sha}  lib.sh\n"))
    );
    assert_eq!(fs::read(lp.file(".pins/lib.sh")).unwrap(), lib);
    assert!(
        fs::read_to_string(lp.file("loop.toml"))
            .unwrap()
            .contains(&format!("contract-version = \"{v}\""))
    );
    // The records are kept: the recovery only appends.
    assert!(
        fs::read(lp.file("progress.md"))
            .unwrap()
            .starts_with(&progress)
    );
    assert!(
        fs::read(lp.file("events.jsonl"))
            .unwrap()
            .starts_with(&events)
    );
    assert_eq!(serious_findings(&lp), Vec::<String>::new());

    // A second --migrate changes nothing.
    let before = lp.tree_hash();
    let again = lp.orbit_recover(&["--migrate"]);
    assert_ok(&again, "second --migrate");
    assert!(
        text(&again).contains("nothing to repair"),
        "{}",
        text(&again)
    );
    assert_eq!(before, lp.tree_hash());

    // The migrated loop runs on to DONE with this contract's scripts.
    let out = lp.repo.run_loop(&lp.dir, &[], &[]);
    assert_code(&out, 0, "the migrated loop runs to DONE");
    let s = lp.assert_sealed();
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("DONE", 4));
    assert_eq!(s.contract_version, v);
    assert_eq!(
        fs::read_to_string(lp.ws().join("work.txt"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    // Its workspace stayed where the loop made it, in the checkout (the default of its
    // contract): --migrate does not move it, and loop.toml still names it.
    assert_eq!(
        fs::canonicalize(lp.ws()).unwrap(),
        fs::canonicalize(lp.repo.join(".orbit/.workspaces/test-goal")).unwrap()
    );
    assert!(
        fs::read_to_string(lp.file("loop.toml"))
            .unwrap()
            .contains("workspace = \".orbit/.workspaces/test-goal\"\n")
    );
    assert!(
        !lp.repo.ws().exists(),
        "nothing made under the data directory"
    );
    let (verdict, _) = lp.audit();
    assert_eq!(verdict, "DONE");
    lp.assert_chains();
}

/// A loop of an older contract measures its DONE after `--migrate`: the migrated loop's
/// adequacy is `report` (the default, its loop.toml had none), or `gate` where the user
/// set it in loop.toml (reviewed with `--repin`, as the migration asks of an edited
/// loop.toml); with a pin of an orbit binary that is gone. `--migrate` pins the orbit that
/// migrates it (orbit.sha256, pinned in pins.sha256 and .pins/ as orbit init pins it), so
/// the runner calls that orbit and the DONE is measured. With `adequacy = "off"` the loop
/// calls no orbit: the stale pin goes to the backup.
#[test]
fn recover_migrate_pins_this_orbit_so_a_2_1_loops_done_is_measured_in_report_and_gate_mode() {
    for mode in ["report", "gate", "off"] {
        let lp = loop_v2_1();
        let toml = fs::read_to_string(lp.file("loop.toml")).unwrap();
        assert!(!toml.contains("adequacy"), "that release had no adequacy");
        if mode != "report" {
            fs::write(
                lp.file("loop.toml"),
                format!("{toml}adequacy = \"{mode}\"\nadequacy-budget = \"10m\"\n"),
            )
            .unwrap();
        }
        let stale = format!("{}  /nonexistent/orbit\n", "0".repeat(64));
        fs::write(lp.file("orbit.sha256"), &stale).unwrap();
        assert_ok(&lp.orbit_recover(&["--migrate"]), "orbit recover --migrate");
        if mode != "report" {
            // The edited loop.toml, reviewed: accepted as it is.
            let out = lp.orbit_recover(&["--repin"]);
            assert_ok(&out, "orbit recover --repin");
        }
        assert!(
            fs::read_to_string(lp.file("loop.toml"))
                .unwrap()
                .contains(&format!("adequacy = \"{mode}\"")),
            "{mode}"
        );
        if mode == "off" {
            assert!(!lp.file("orbit.sha256").exists());
            assert!(
                !fs::read_to_string(lp.file("pins.sha256"))
                    .unwrap()
                    .contains("orbit.sha256")
            );
            let backups = lp.file("backups");
            let kept = fs::read_dir(&backups).unwrap().flatten().any(|b| {
                fs::read_to_string(b.path().join("orbit.sha256")).ok() == Some(stale.clone())
            });
            assert!(kept, "the stale pin is in the backup");
            assert_code(&lp.repo.run_loop(&lp.dir, &[], &[]), 0, "DONE");
            assert!(crate::support::events_named(&lp.dir, "adequacy_measured").is_empty());
            continue;
        }
        // The pin names this orbit, by its sha256 and absolute path, and is itself pinned.
        let exe = fs::canonicalize(crate::support::orbit_bin()).unwrap();
        let want = format!("{}  {}\n", crate::support::file_sha(&exe), exe.display());
        assert_eq!(fs::read_to_string(lp.file("orbit.sha256")).unwrap(), want);
        assert_eq!(
            fs::read_to_string(lp.file(".pins/orbit.sha256")).unwrap(),
            want
        );
        let sha = orbit::fsx::sha256_hex(want.as_bytes());
        assert!(
            fs::read_to_string(lp.file("pins.sha256"))
                .unwrap()
                .contains(&format!("{sha}  orbit.sha256\n"))
        );
        assert_eq!(serious_findings(&lp), Vec::<String>::new(), "{mode}");
        // The migrated loop's DONE is measured by that orbit.
        let out = lp.repo.run_loop(&lp.dir, &[], &[]);
        assert_code(&out, 0, "the migrated loop runs to DONE");
        let measured = crate::support::events_named(&lp.dir, "adequacy_measured");
        assert_eq!(measured.len(), 1, "{mode}: {measured:?}");
        assert_eq!(measured[0].value["mode"], mode);
        let log = fs::read_to_string(lp.file("runner.log")).unwrap();
        assert!(!log.contains("not measured"), "{log}");
        let head = lp.repo.git(&["rev-parse", "orbit/test-goal"]);
        let rec = orbit::adequacy::Record::of_head(&lp.dir, lp.repo.path(), head.trim())
            .expect("adequacy.json holds the DONE's measure");
        assert_eq!(rec.hunks_needed, 1, "{:#}", rec.details);
        if mode == "gate" {
            let env = orbit::envelope::parse(&fs::read(lp.file("envelope.json")).unwrap()).unwrap();
            assert!(
                env.adequacy.is_some(),
                "the envelope holds the gate's figures"
            );
        }
    }
}

/// `orbit verify --json` of the loop `lp`: its exit code and answer.
fn verify_json(lp: &Loop, extra: &[&str]) -> (i32, serde_json::Value) {
    let d = lp.dir.display().to_string();
    let mut args = vec!["verify", "--json"];
    args.extend_from_slice(extra);
    args.push(&d);
    let out = lp.repo.orbit(&args);
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("orbit verify --json: {e}\n{}", text(&out)));
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn a_2_1_loop_done_without_an_envelope_is_unverified_until_migrated_and_recorded_then_merges() {
    let lp = loop_v2_1();
    let d = lp.dir.display().to_string();
    assert_code(&lp.repo.orbit(&["run", &d]), 0, "the 2.1 loop reaches DONE");
    assert!(
        !lp.file("envelope.json").exists(),
        "that release wrote no envelope"
    );
    let (rc, v) = verify_json(&lp, &[]);
    assert_eq!(rc, 3, "{v}");
    assert_eq!(v["verify_failure_code"], "UNVERIFIED", "{v}");
    assert!(
        v["next"]
            .as_str()
            .unwrap()
            .contains("orbit verify --rerun --record"),
        "the answer says how to get one: {v}"
    );
    let out = lp.repo.orbit(&["merge", &d]);
    assert_code(&out, 3, "merge refuses an unverified hand-off");
    assert!(text(&out).contains("UNVERIFIED"), "{}", text(&out));
    // Moved to this contract: still no envelope (a DONE loop does not run again).
    assert_ok(&lp.orbit_recover(&["--migrate"]), "orbit recover --migrate");
    assert_eq!(lp.assert_sealed().last_status, "DONE");
    let (rc, v) = verify_json(&lp, &[]);
    assert_eq!(
        (rc, v["verify_failure_code"].as_str()),
        (3, Some("UNVERIFIED")),
        "{v}"
    );
    assert_code(&lp.repo.orbit(&["merge", &d]), 3, "merge still refuses");
    // Its checks rerun PASS_K times in a clean checkout of the branch: recorded.
    let (rc, v) = verify_json(&lp, &["--rerun", "--record"]);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["rerun_sandbox"], "none", "a loop of --sandbox none: {v}");
    assert!(lp.file("envelope.json").is_file());
    let (rc, v) = verify_json(&lp, &[]);
    assert_eq!(rc, 0, "the recorded envelope verifies: {v}");
    let branch_head = lp.repo.git(&["rev-parse", "orbit/test-goal"]);
    let out = lp.repo.orbit(&["merge", &d]);
    assert_code(&out, 0, "merge takes the verified hand-off");
    assert_eq!(lp.repo.git(&["rev-parse", "main"]), branch_head);
}

#[test]
fn a_2_1_loop_migrated_between_ticks_reaches_done_with_an_envelope_and_merges() {
    let lp = loop_v2_1();
    let d = lp.dir.display().to_string();
    assert_code(&lp.tick(&[]), 10, "a tick with its own scripts");
    let (rc, v) = verify_json(&lp, &[]);
    assert_eq!(
        (rc, v["verify_failure_code"].as_str()),
        (3, Some("UNVERIFIED")),
        "{v}"
    );
    assert_code(
        &lp.repo.orbit(&["merge", &d]),
        3,
        "not DONE, no envelope: refused",
    );
    assert_ok(&lp.orbit_recover(&["--migrate"]), "orbit recover --migrate");
    let out = lp.repo.run_loop(&lp.dir, &[], &[]);
    assert_code(&out, 0, "the migrated loop runs to DONE");
    assert!(
        lp.file("envelope.json").is_file(),
        "this contract's DONE writes it"
    );
    let (rc, v) = verify_json(&lp, &[]);
    assert_eq!(rc, 0, "{v}");
    let branch_head = lp.repo.git(&["rev-parse", "orbit/test-goal"]);
    assert_code(&lp.repo.orbit(&["merge", &d]), 0, "merged");
    assert_eq!(lp.repo.git(&["rev-parse", "main"]), branch_head);
}

/// A loop that orbit 1.0 rendered and ran two iterations in the user's checkout (the
/// fixture tests/fixtures/loop-v1/, see its README), unpacked into a fresh repository.
fn loop_v1() -> Loop {
    let repo = Repo {
        dir: tempfile::Builder::new()
            .prefix("orbit-it-")
            .tempdir()
            .unwrap(),
        bin: tempfile::Builder::new()
            .prefix("orbit-bin-")
            .tempdir()
            .unwrap(),
    };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/loop-v1");
    let st = command("tar")
        .arg("-xzf")
        .arg(fixtures.join("loop-v1.tar.gz"))
        .args(["--strip-components=1", "-C"])
        .arg(repo.path())
        .status()
        .unwrap();
    assert!(st.success());
    fs::copy(
        fixtures.join("fake-agent"),
        repo.bin.path().join("fake-agent"),
    )
    .unwrap();
    let dir = repo.path().join(".orbit/test-goal");
    Loop { repo, dir }
}

#[test]
fn recover_migrate_moves_a_1_0_loop_to_a_workspace() {
    let lp = loop_v1();
    let d = lp.dir.display().to_string();
    // As orbit 1.0 left it: on the loop branch, in the user's checkout, under contract 1.0.
    assert_eq!(
        lp.repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "orbit/test-goal"
    );
    assert!(lp.state_text().starts_with("CONTRACT_VERSION=1.0.0\n"));
    let kept = |name: &str| fs::read(lp.file(name)).unwrap();
    let (progress, events, ledger) = (
        kept("progress.md"),
        kept("events.jsonl"),
        kept("cost.ledger"),
    );
    let records = [
        "iterations/000001/result.env",
        "iterations/000002/result.env",
    ]
    .map(|r| (r, kept(r)));
    // The 2.0 runner (re-rendered by orbit init --force) refuses the 1.0 state, changing nothing.
    assert_ok(
        &lp.repo.orbit(&["init", "--force", "--dir", &d]),
        "init --force",
    );
    let state_before = lp.state_text();
    let out = lp.tick(&[]);
    assert_code(&out, 4, "a 2.0 runner given a 1.0 state");
    assert!(text(&out).contains("--migrate"), "{}", text(&out));
    assert_eq!(lp.state_text(), state_before);

    let out = lp.orbit_recover(&["--migrate", "--repin"]);
    assert_ok(&out, "orbit recover --migrate");
    let s = lp.assert_sealed();
    let ws = lp.ws();
    assert_eq!(s.contract_version, orbit::config::CONTRACT_VERSION);
    assert_eq!(Path::new(&s.workspace), ws.as_path());
    assert_eq!((s.next_iteration, s.last_status.as_str()), (3, "CONTINUE"));
    assert_eq!(s.cost_microusd, 500_000);
    // The user's checkout is back on the branch the loop started from; the loop branch is
    // the workspace's.
    assert_eq!(
        lp.repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
    assert_eq!(
        lp.repo
            .git(&[
                "-C",
                &ws.display().to_string(),
                "symbolic-ref",
                "--short",
                "HEAD"
            ])
            .trim(),
        "orbit/test-goal"
    );
    assert!(!lp.repo.path().join("work.txt").exists());
    assert_eq!(
        fs::read_to_string(ws.join("work.txt"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    // The pins of repository files name them in the workspace, with the same hashes.
    let pins = fs::read_to_string(lp.file("pins.sha256")).unwrap();
    assert!(
        pins.contains(&format!("  {}/tests/guard.txt\n", ws.display())),
        "{pins}"
    );
    assert!(!pins.contains("../"), "{pins}");
    assert!(
        fs::read_to_string(lp.file("loop.toml"))
            .unwrap()
            .contains(&format!(
                "contract-version = \"{}\"",
                orbit::config::CONTRACT_VERSION
            ))
    );
    // .baseline went to the backup; every record is kept (the recovery only appends).
    assert!(!lp.file(".baseline").exists());
    let b = fs::read_dir(lp.file("backups"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(b.join(".baseline").is_file());
    assert!(kept("progress.md").starts_with(&progress));
    assert!(kept("events.jsonl").starts_with(&events));
    assert_eq!(kept("cost.ledger"), ledger);
    for (r, data) in &records {
        assert_eq!(&kept(r), data, "{r} kept");
    }
    lp.assert_chains();

    // A second --migrate changes nothing.
    let before = lp.tree_hash();
    let again = lp.orbit_recover(&["--migrate"]);
    assert_ok(&again, "second --migrate");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("nothing to repair"),
        "{}",
        text(&again)
    );
    assert_eq!(before, lp.tree_hash());

    // The migrated loop runs to DONE in its workspace.
    let out = lp.repo.run_loop(&lp.dir, &[], &[("CONFIRM_RUNS", "0")]);
    assert_code(&out, 0, "the migrated loop runs to DONE");
    let s = lp.assert_sealed();
    assert_eq!((s.last_status.as_str(), s.next_iteration), ("DONE", 4));
    assert!(lp.file("iterations/000003/done.md").is_file());
    assert_eq!(
        fs::read_to_string(ws.join("work.txt"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    assert_eq!(
        lp.repo.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main",
        "the run never touches the user's checkout"
    );
    assert!(kept("progress.md").starts_with(&progress));
    assert!(kept("events.jsonl").starts_with(&events));
    lp.assert_chains();
}

/// A workspace deleted by hand and a loop branch moved by hand: both recovers recreate the
/// workspace from the branch and accept the branch where it is now, and the loop resumes.
#[test]
fn recover_recreates_the_workspace_and_accepts_a_moved_branch() {
    for bash in [false, true] {
        let lp = Loop::new(1, &[]);
        let ws = lp.ws();
        assert!(ws.join(".git").exists());
        // Moved by hand to where the loop started (its iteration is no longer on it).
        let main = lp.repo.git(&["rev-parse", "main"]).trim().to_string();
        lp.repo
            .git(&["update-ref", "refs/heads/orbit/test-goal", &main]);
        assert_code(&lp.tick(&[]), 2, "the runner stops on a moved branch");
        fs::remove_dir_all(&ws).unwrap();
        let out = if bash {
            lp.bash_recover(&[])
        } else {
            lp.orbit_recover(&[])
        };
        assert_ok(&out, "recover");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains("is missing: recreated from orbit/test-goal"),
            "{said}"
        );
        assert!(said.contains("was moved by hand"), "{said}");
        assert!(ws.join(".git").exists(), "the workspace is back");
        assert_eq!(
            fs::read_to_string(lp.file(".branch-head")).unwrap().trim(),
            main
        );
        let again = if bash {
            lp.bash_recover(&[])
        } else {
            lp.orbit_recover(&[])
        };
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("nothing to repair"),
            "{}",
            text(&again)
        );
        assert_code(
            &lp.tick(&[]),
            10,
            "the loop resumes from the branch as it is",
        );
        assert!(lp.result_iteration(2).contains("ITERATION=2\n"));
    }
}

/// The repository deleted and made again at the same path (a fresh clone, say): the default
/// workspace of its loop of the same name is still there, its `.git` naming the gone
/// repository. The runner refuses it and sends the user to `orbit recover`, which must say
/// what to do (move it away), never promise that the next run resumes, and never remove it (it
/// may hold the only copy of work). Moved away, the loop starts afresh.
#[test]
fn recover_names_a_workspace_left_by_a_repository_made_again_at_the_same_path() {
    let repo = Repo::new();
    let agent = repo.agent("idle", "cat >/dev/null\necho x >> work.txt");
    let dir = repo.init_loop(&agent, &["test -f never.txt"], &[]);
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "one tick");
    let ws = repo.ws();
    assert!(ws.join(".git").is_file(), "the loop made its workspace");
    fs::write(ws.join("only-copy.txt"), "uncommitted work\n").unwrap();
    // The repository goes, and a new one is made where it was.
    for entry in fs::read_dir(repo.path()).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            fs::remove_dir_all(&p).unwrap();
        } else {
            fs::remove_file(&p).unwrap();
        }
    }
    repo.git(&["init", "-q", "-b", "main"]);
    repo.git(&["config", "user.name", "Orbit Test"]);
    repo.git(&["config", "user.email", "orbit-test@example.invalid"]);
    repo.write("README.md", "test repository, again\n");
    repo.git(&["add", "README.md"]);
    repo.git(&["commit", "-q", "-m", "init"]);
    let dir = repo.init_loop(&agent, &["test -f never.txt"], &[]);
    assert!(
        ws.join(".git").is_file(),
        "the old workspace is still there"
    );
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(
        &out,
        2,
        "the runner refuses a workspace of another repository",
    );
    assert!(
        text(&out).contains("orbit recover")
            && text(&out).contains(", which is gone (a repository deleted and made again"),
        "the runner names the cause: {}",
        text(&out)
    );
    let out = repo.orbit(&["recover", ".orbit/test-goal"]);
    assert_ok(&out, "recover");
    let said = text(&out);
    assert!(
        said.contains(&format!(
            "the workspace {} is not a worktree of this repository (its .git names ",
            ws.display()
        )) && said.contains(", which is gone; ")
            && said.contains("move it away, then run the loop (its first run makes it)"),
        "{said}"
    );
    // The headline never promises a resume that the workspace stops.
    assert!(
        !said.contains("the next run resumes")
            && said.contains("the next run stops on the workspace until it is moved away"),
        "{said}"
    );
    assert_eq!(
        fs::read_to_string(ws.join("only-copy.txt")).unwrap(),
        "uncommitted work\n",
        "recover never removes it"
    );
    let away = PathBuf::from(format!("{}.old", ws.display()));
    fs::rename(&ws, &away).unwrap();
    assert_code(
        &repo.run_loop(&dir, &["--once"], &[]),
        10,
        "moved away, the loop makes its workspace afresh",
    );
    assert!(ws.join(".git").is_file());
    let again = repo.orbit(&["recover", ".orbit/test-goal"]);
    assert!(!text(&again).contains("not a worktree"), "{}", text(&again));
    fs::remove_dir_all(&away).unwrap();
}
