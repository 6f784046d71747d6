//! `orbit adequacy` on the Rust fixture (tests/fixtures/projects/rust, its money library a
//! git submodule), and `--tool cargo-mutants`: the real cargo-mutants run on the change's
//! diff, its mutants.out/outcomes.json read back. Real git, a real loop run to DONE, real
//! cargo; the tool's tests are skipped with a notice where cargo-mutants is not installed
//! (ORBIT_REQUIRE_CARGO_MUTANTS=1 makes it required).

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::projects::{cargo_path, rust_project};
use crate::support::{
    Repo, assert_code, cargo_mutants_available, command, orbit_bin, run_bounded, text,
};

/// The fix the fixture's loop makes: a line's quantity multiplies its unit price.
const FIX: &str = "sed -i 's/map(|line| line.unit_price)/map(|line| line.unit_price.times(line.quantity))/' src/lib.rs";

/// The Rust fixture, `prep` run on its first commit (a commit of its own when it changes
/// anything), looped to DONE by an agent that makes the fix and then runs `more` (bash) in
/// its workspace; `extra` are the init flags.
fn rust_done(prep: impl FnOnce(&Repo), more: &str, extra: &[&str]) -> (Repo, PathBuf) {
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
    let dir = repo.init_loop(&agent, &["cargo test --offline"], extra);
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
