//! `orbit adequacy` on the Rust fixture (tests/fixtures/projects/rust, its money library a
//! git submodule), and `--tool cargo-mutants`: the real cargo-mutants run on the change's
//! diff, its mutants.out/outcomes.json read back. Real git, a real loop run to DONE, real
//! cargo; the tool's tests are skipped with a notice where cargo-mutants is not installed
//! (ORBIT_REQUIRE_CARGO_MUTANTS=1 makes it required).

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::projects::{cargo_path, copy_tree, fixture, rust_project};
use crate::support::{
    Repo, assert_code, bwrap_available, cargo_mutants_available, command, orbit_bin, run_bounded,
    text,
};

/// The fix the fixture's loop makes: a line's quantity multiplies its unit price.
const FIX: &str = "sed -i 's/map(|line| line.unit_price)/map(|line| line.unit_price.times(line.quantity))/' src/lib.rs";

/// The Rust fixture, `prep` run on its first commit (a commit of its own when it changes
/// anything), looped to DONE by an agent that makes the fix and then runs `more` (bash) in
/// its workspace; `extra` are the init flags.
fn rust_done(prep: impl FnOnce(&Repo), more: &str, extra: &[&str]) -> (Repo, PathBuf) {
    rust_done_checked(prep, more, extra, "cargo test --offline")
}

/// [`rust_done`] with `check` the loop's one check.
fn rust_done_checked(
    prep: impl FnOnce(&Repo),
    more: &str,
    extra: &[&str],
    check: &str,
) -> (Repo, PathBuf) {
    let repo = rust_project();
    prep(&repo);
    if !repo.git(&["status", "--porcelain"]).trim().is_empty() {
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-qm", "the user's own change"]);
    }
    let body = format!(
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n{FIX}\n{more}\necho \"cargo test passes\" > \"$ORBIT_AGENT_DIR/done.md\"\n"
    );
    let agent = repo.agent("fixer", &body);
    let dir = repo.init_loop(&agent, &[check], extra);
    let path = cargo_path(&repo);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3"), ("PATH", &path)]);
    assert_code(&out, 0, "the loop reaches DONE");
    (repo, dir)
}

/// `orbit adequacy --json ARGS` in the repository, with cargo (and cargo-mutants) on PATH.
fn adequacy(repo: &Repo, args: &[&str]) -> Output {
    let mut cmd = command(orbit_bin());
    cmd.args(["adequacy", "--json", "--budget", "10m"])
        .args(args)
        .current_dir(repo.path())
        .env("PATH", cargo_path(repo));
    run_bounded(cmd, Duration::from_secs(600))
}

/// The JSON of a measure that exited 0.
fn measured(out: &Output) -> Value {
    assert_code(out, 0, "orbit adequacy measures the change");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(out)))
}

/// The mutants of a measure whose text holds `word`.
fn mutants_of<'a>(v: &'a Value, word: &str) -> Vec<&'a Value> {
    v["mutants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["text"].as_str().unwrap_or("").contains(word))
        .collect()
}

#[test]
fn the_rust_fixtures_done_is_measured_in_checkouts_that_hold_its_submodule() {
    // The crate builds its money library from the submodule vendor/money: a checkout
    // without it fails to build, and adequacy would say the checks fail on the DONE itself.
    let (repo, _dir) = rust_done(|_| {}, "", &[]);
    let v = measured(&adequacy(&repo, &[]));
    assert_eq!(
        (&v["hunks_needed"], &v["hunks_tried"]),
        (&Value::from(1), &Value::from(1)),
        "{v:#}"
    );
    if !cargo_mutants_available() {
        return;
    }
    // cargo-mutants, run for real on the same DONE: its one mutant of the fixed line (the
    // total replaced by Default::default(), which Cents does not have) is read back.
    let v = measured(&adequacy(&repo, &["--tool", "cargo-mutants"]));
    let total = mutants_of(&v, "replace total -> Cents with Default::default()");
    assert_eq!(total.len(), 1, "{v:#}");
    assert_eq!(total[0]["result"], "not-applied", "{v:#}");
    assert_eq!(total[0]["line"], 14, "{v:#}");
    assert!(
        total[0]["why"].as_str().unwrap().contains("unviable"),
        "{v:#}"
    );
}

/// What the agent adds beside the fix: a function no test decides, whose mutants survive.
const IS_LARGE: &str = "cat >> src/lib.rs <<'EOF'

/// Whether an invoice's total is large.
pub fn is_large(total: Cents) -> bool {
    total.0 > 10_000
}
EOF";

#[test]
fn the_changes_own_cargo_mutants_config_cannot_hide_its_survivors_and_the_users_is_kept() {
    if !cargo_mutants_available() {
        return;
    }
    // The user's own config (in the base) leaves out the mutants of `total`; the agent's
    // change rewrites it to leave out those of the function it added, which no test decides.
    let (repo, _dir) = rust_done(
        |r| r.write(".cargo/mutants.toml", "exclude_re = [\"total\"]\n"),
        &format!("{IS_LARGE}\nprintf 'exclude_re = [\"is_large\"]\\n' > .cargo/mutants.toml"),
        &[],
    );
    // The attack was made: the DONE holds the agent's config.
    assert!(
        repo.git(&["show", "orbit/test-goal:.cargo/mutants.toml"])
            .contains("is_large")
    );
    let v = measured(&adequacy(&repo, &["--tool", "cargo-mutants"]));
    let large = mutants_of(&v, "is_large");
    assert!(
        !large.is_empty() && large.iter().all(|m| m["result"] == "survived"),
        "the mutants of is_large are tried and survive: {v:#}"
    );
    assert!(
        mutants_of(&v, "replace total").is_empty(),
        "the user's config, as the base holds it, still leaves out total's: {v:#}"
    );
}

#[test]
fn a_change_cargo_mutants_finds_no_mutant_in_is_measured_with_none_and_says_so() {
    if !cargo_mutants_available() {
        return;
    }
    let (repo, _dir) = rust_done(|_| {}, "", &[]);
    // A commit on the DONE that changes a comment alone: no line cargo-mutants mutates.
    let wt = tempfile::tempdir().unwrap();
    let at = wt.path().join("c");
    let at_s = at.display().to_string();
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        &at_s,
        "orbit/test-goal",
    ]);
    let lib = at.join("src/lib.rs");
    let code = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(
        &lib,
        code.replace("//! Invoice totals.", "//! Invoice totals, in cents."),
    )
    .unwrap();
    let wgit = |args: &[&str]| {
        let out = command("git")
            .arg("-C")
            .arg(&at)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    wgit(&["commit", "-qam", "a comment"]);
    let sha = wgit(&["rev-parse", "HEAD"]);
    let out = adequacy(
        &repo,
        &[
            "--tool",
            "cargo-mutants",
            "--commit",
            &sha,
            "--base",
            "orbit/test-goal",
        ],
    );
    let v = measured(&out);
    assert_eq!(v["mutants"].as_array().unwrap().len(), 0, "{v:#}");
    assert_eq!(v["mutants_tried"], 0, "{v:#}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("cargo-mutants found no mutant"), "{v:#}");
}

#[test]
fn cargo_mutants_runs_the_agents_code_under_the_loops_sandbox() {
    if !cargo_mutants_available() || !bwrap_available() {
        return;
    }
    for sandbox in ["none", "bwrap"] {
        // A test the agent adds that, run by cargo-mutants (in its own copy of the tree),
        // writes into the user's repository.
        let repo_dir = tempfile::tempdir().unwrap();
        let plant = repo_dir.path().join("planted.txt");
        let more = format!(
            "cat >> src/lib.rs <<'EOF'

#[cfg(test)]
mod planted {{
    #[test]
    fn writes_outside_its_tree() {{
        if env!(\"CARGO_MANIFEST_DIR\").contains(\"cargo-mutants-\") {{
            let _ = std::fs::write(\"{}\", \"cargo-mutants ran me\");
        }}
    }}
}}
EOF",
            plant.display()
        );
        let (repo, _dir) = rust_done(|_| {}, &more, &["--sandbox", sandbox]);
        let out = adequacy(&repo, &["--tool", "cargo-mutants"]);
        let v = measured(&out);
        assert_eq!(
            mutants_of(&v, "replace total").len(),
            1,
            "cargo-mutants ran ({sandbox}): {v:#}"
        );
        if sandbox == "none" {
            assert!(
                plant.is_file(),
                "without the sandbox the code cargo-mutants ran wrote outside its tree"
            );
        } else {
            assert!(
                !plant.exists(),
                "under the loop's sandbox the code cargo-mutants ran wrote outside its tree"
            );
        }
    }
}

#[test]
fn the_users_git_diff_settings_do_not_change_the_diff_cargo_mutants_reads() {
    if !cargo_mutants_available() {
        return;
    }
    let (repo, _dir) = rust_done(|_| {}, IS_LARGE, &[]);
    // The user's git writes a diff's new side under new/, not b/: a diff cargo-mutants
    // reads as naming no file of the crate, so no mutant at all.
    repo.git(&["config", "diff.dstPrefix", "new/"]);
    assert!(
        repo.git(&["diff", "main", "orbit/test-goal"])
            .contains("+++ new/src/lib.rs")
    );
    let v = measured(&adequacy(&repo, &["--tool", "cargo-mutants"]));
    let large = mutants_of(&v, "is_large");
    assert!(
        large.iter().any(|m| m["result"] == "survived"),
        "the mutants of is_large are tried: {v:#}"
    );
}

#[test]
fn code_the_change_marks_mutants_skip_counts_as_surviving() {
    if !cargo_mutants_available() {
        return;
    }
    // The mark needs no mutants crate under a condition that is never true, and
    // cargo-mutants then makes no mutant of the function at all.
    let marked = IS_LARGE.replace(
        "pub fn is_large",
        "#[cfg_attr(any(), mutants::skip)]\npub fn is_large",
    );
    let (repo, _dir) = rust_done(|_| {}, &marked, &[]);
    assert!(
        repo.git(&["show", "orbit/test-goal:src/lib.rs"])
            .contains("#[cfg_attr(any(), mutants::skip)]")
    );
    let v = measured(&adequacy(&repo, &["--tool", "cargo-mutants"]));
    let skipped = mutants_of(&v, "mutants::skip");
    assert_eq!(skipped.len(), 1, "{v:#}");
    assert_eq!(skipped[0]["result"], "survived", "{v:#}");
    assert_eq!(skipped[0]["line"], 58, "{v:#}");
}

#[test]
fn when_cargo_mutants_baseline_fails_the_refusal_quotes_what_it_said() {
    if !cargo_mutants_available() {
        return;
    }
    // A test that passes in the loop's checkouts and fails in cargo-mutants' copy.
    let more = "cat >> src/lib.rs <<'EOF'

#[cfg(test)]
mod only_in_a_copy {
    #[test]
    fn fails_in_cargo_mutants_copy() {
        assert!(!env!(\"CARGO_MANIFEST_DIR\").contains(\"cargo-mutants-\"));
    }
}
EOF";
    let (repo, _dir) = rust_done(|_| {}, more, &[]);
    let out = adequacy(&repo, &["--tool", "cargo-mutants"]);
    assert_code(&out, 3, "nothing measured");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("unmutated") && error.contains("fails_in_cargo_mutants_copy"),
        "{error}"
    );
}

/// `orbit adequacy ARGS` in the repository (cargo on PATH), spawned so that its pid is known:
/// (its pid, its output).
fn adequacy_spawned(repo: &Repo, args: &[&str]) -> (u32, Output) {
    let mut cmd = command(orbit_bin());
    cmd.arg("adequacy")
        .args(args)
        .current_dir(repo.path())
        .env("PATH", cargo_path(repo))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(Duration::from_secs(300))
        .unwrap_or_else(|_| panic!("orbit adequacy {args:?} ran past 300 s"))
        .unwrap();
    (pid, out)
}

/// The processes still alive (not zombies) whose command line holds `word`.
fn alive_with(word: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        if cmdline.contains(word) && !stat.contains(") Z ") {
            found.push(format!("{}: {cmdline}", e.file_name().to_string_lossy()));
        }
    }
    found
}

/// `--budget` holds for a `--tool cargo-mutants` run as a whole: the loop's check is quick
/// (a grep of the fix), and a test the agent adds hangs in cargo-mutants' own copy of the
/// tree (its baseline never ends, and its own timeout, at least 10 s after that test
/// starts, is always later than the 8 s budget), so the budget runs out while cargo-mutants
/// runs (copying, building or testing its baseline; under a heavy load, before it starts):
/// it is stopped with what it started, and each of its mutants it did not try is listed as
/// not tried, as orbit's own are; without the sandbox and under it.
#[test]
fn the_budget_stops_a_cargo_mutants_run_and_lists_the_mutants_it_did_not_try() {
    if !cargo_mutants_available() || !bwrap_available() {
        return;
    }
    for sandbox in ["none", "bwrap"] {
        let pid_file = tempfile::tempdir().unwrap();
        let pid = pid_file.path().join("hang.pid");
        let more = format!(
            "cat >> src/lib.rs <<'EOF'

#[cfg(test)]
mod hangs {{
    #[test]
    fn in_cargo_mutants_copy() {{
        if env!(\"CARGO_MANIFEST_DIR\").contains(\"cargo-mutants-\") {{
            let _ = std::fs::write(\"{}\", std::process::id().to_string());
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }}
    }}
}}
EOF",
            pid.display()
        );
        let (repo, _dir) = rust_done_checked(
            |_| {},
            &more,
            &["--sandbox", sandbox],
            "grep -q 'unit_price.times(line.quantity)' src/lib.rs",
        );
        let args = ["--budget", "8s", "--tool", "cargo-mutants"];
        let (orbit_pid, out) = adequacy_spawned(&repo, &[&args[..], &["--json"]].concat());
        let v = measured(&out);
        let listed: Vec<&Value> = v["mutants"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["result"] == "not-tried")
            .collect();
        assert!(!listed.is_empty(), "{sandbox}: {v:#}");
        assert_eq!(
            v["not_tried"]["mutants"].as_u64().unwrap(),
            listed.len() as u64,
            "each untried mutant is listed: {v:#}"
        );
        assert!(
            listed.iter().any(|m| m["file"] == "src/lib.rs"
                && m["line"] == 14
                && m["text"]
                    .as_str()
                    .unwrap()
                    .contains("replace total -> Cents with Default::default()")),
            "cargo-mutants' own mutant of the fixed line is listed, as it names it: {v:#}"
        );
        assert_eq!(v["mutants_tried"], 0, "{v:#}");
        // Nothing of the run is left: no process of its checkouts and cargo-mutants' copies.
        let word = format!("orbit-adequacy-{orbit_pid}-");
        let gone = (0..100).any(|_| {
            let left = alive_with(&word);
            if !left.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
            }
            left.is_empty()
        });
        assert!(gone, "{sandbox}: still running: {:?}", alive_with(&word));
        // Under load the stop may come before its baseline reaches the hanging test (it is
        // still building); when the test had started (without the sandbox it can say so),
        // it is gone too.
        if let Ok(p) = std::fs::read_to_string(&pid) {
            assert!(
                !std::fs::read_to_string(format!("/proc/{}/stat", p.trim()))
                    .is_ok_and(|s| !s.contains(") Z ")),
                "the hanging test cargo-mutants ran is still running"
            );
        }
        let (_, out) = adequacy_spawned(&repo, &args);
        assert_code(&out, 0, "orbit adequacy");
        assert!(
            text(&out).contains("the budget (8s) ran out; raise it with --budget"),
            "{}",
            text(&out)
        );
    }
}

/// The agent's fix in the workspace under rust/, and a function beside it no test decides.
const RUST_WS_AGENT: &str = r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed -i 's/units::millimetres(m, 0)/units::millimetres(m, mm)/; s/&(m, _mm)/\&(m, mm)/' rust/report/src/lib.rs
cat >> rust/units/src/lib.rs <<'EOF'

/// Whether a length is long.
pub fn is_long(mm: u64) -> bool {
    mm > 10_000
}
EOF
echo "cargo test passes: the millimetres count" > "$ORBIT_AGENT_DIR/done.md""#;

/// A Cargo workspace in a folder of the repository (rust/, beside other things), not at
/// its root: cargo-mutants is pointed at it, reads the change's diff as paths of that
/// workspace, and its mutants are shown by their paths in the repository.
#[test]
fn cargo_mutants_measures_a_cargo_workspace_in_a_folder_of_the_repository() {
    if !cargo_mutants_available() {
        return;
    }
    let repo = Repo::new();
    copy_tree(&fixture("rust-workspace"), &repo.join("rust"));
    repo.write(
        "README.md",
        "A repository whose Rust workspace is in rust/.\n",
    );
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "the workspace in rust/"]);
    assert!(!repo.join("Cargo.toml").exists());
    let agent = repo.agent("fixer", RUST_WS_AGENT);
    let dir = repo.init_loop(
        &agent,
        &["cd rust && cargo test --workspace --offline"],
        &[],
    );
    let path = cargo_path(&repo);
    let out = repo.run_loop(&dir, &[], &[("MAX_ITERATIONS", "3"), ("PATH", &path)]);
    assert_code(&out, 0, "the loop reaches DONE");
    let v = measured(&adequacy(&repo, &["--tool", "cargo-mutants"]));
    let total = mutants_of(&v, "replace total -> u64 with 0");
    assert_eq!(total.len(), 1, "{v:#}");
    assert_eq!(total[0]["file"], "rust/report/src/lib.rs", "{v:#}");
    assert_eq!(total[0]["line"], 5, "{v:#}");
    assert_eq!(total[0]["result"], "killed", "{v:#}");
    let long = mutants_of(&v, "is_long");
    assert!(
        !long.is_empty()
            && long
                .iter()
                .all(|m| m["file"] == "rust/units/src/lib.rs" && m["result"] == "survived"),
        "the mutants of is_long, which no test decides, survive: {v:#}"
    );
}
