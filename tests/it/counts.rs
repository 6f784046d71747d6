//! A check means at the end what it meant at the start (contract section 6): the runner
//! records how many tests each check's own output says ran on the base tree and at every
//! later pass, and a pass with no test run, or fewer (or more skipped) than on the base
//! tree, fails that check, unless loop.toml's allow-fewer-tests accepts the drop. The
//! summaries are read by verify.sh's `counts_parse_v` from what real tools printed
//! (tests/fixtures/verify-output); the attacks are real: an agent that deletes tests under
//! real pytest, and a cargo check replaying what real cargo printed.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{
    Repo, assert_code, assert_ok, bash_with_parts, events_named, pytest_python, run_bounded, text,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/verify-output")
        .join(name)
}

/// What `counts_parse_v` makes of each file: "RAN PASSED FAILED SKIPPED UNIT", or "".
fn parsed(files: &[PathBuf]) -> Vec<String> {
    let work = tempfile::tempdir().unwrap();
    let mut cmd = bash_with_parts(
        work.path(),
        &["common", "counts"],
        r#"for f in "$@"; do
  counts_parse_v "$f"
  printf '[%s]\n' "$REPLY"
done"#,
    );
    cmd.args(files);
    let out = run_bounded(cmd, Duration::from_secs(30));
    assert_ok(&out, "counts_parse_v");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim_start_matches('[').trim_end_matches(']').to_string())
        .collect()
}

#[test]
fn the_summaries_of_real_test_tools_are_counted() {
    let want = [
        ("cargo-test.txt", "3 1 2 0 tests"),
        ("cargo-test-pass.txt", "4 4 0 1 tests"),
        ("cargo-test-lib.txt", "2 2 0 1 tests"),
        ("cargo-test-none.txt", "0 0 0 0 tests"),
        ("pytest.txt", "3 1 2 0 tests"),
        ("pytest-pass.txt", "3 3 0 1 tests"),
        ("pytest-fewer.txt", "1 1 0 0 tests"),
        ("pytest-collect-only.txt", "0 0 0 0 tests"),
        ("pytest-deselected.txt", "0 0 0 0 tests"),
        ("go-test-v.txt", "3 1 2 0 tests"),
        ("go-test.txt", "1 0 1 0 packages"),
        ("jest.txt", "3 1 2 0 tests"),
        ("vitest.txt", "3 3 0 1 tests"),
        ("vitest-none.txt", "0 0 0 4 tests"),
        ("mocha.txt", "3 2 1 1 tests"),
        ("mocha-pass.txt", "3 3 0 1 tests"),
        ("mocha-none.txt", "0 0 0 0 tests"),
        ("node-test.txt", "3 3 0 1 tests"),
        ("node-test-spec.txt", "3 3 0 1 tests"),
        ("node-test-none.txt", "0 0 0 4 tests"),
    ];
    let files: Vec<PathBuf> = want.iter().map(|(f, _)| fixture(f)).collect();
    let got = parsed(&files);
    for ((file, want), got) in want.iter().zip(&got) {
        assert_eq!(got, want, "{file}");
    }
    assert_eq!(got.len(), want.len());
}

#[test]
fn documented_formats_are_counted_and_output_without_a_summary_counts_nothing() {
    let work = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        // jest with skipped and todo tests; jest and vitest told to pass without tests.
        (
            "Tests:       1 skipped, 1 todo, 2 passed, 4 total\n",
            "2 2 0 2 tests",
        ),
        ("No tests found, exiting with code 0\n", "0 0 0 0 tests"),
        (
            "No test files found, exiting with code 0\n",
            "0 0 0 0 tests",
        ),
        // vitest with a failure.
        (
            " Tests  1 failed | 2 passed | 1 skipped (4)\n",
            "3 2 1 1 tests",
        ),
        // go test without -v: the unit is the package.
        (
            "ok  \tcalc\t0.003s\nok  \tcalc/sub\t0.002s [no tests to run]\n?   \tcalc/cmd\t[no test files]\n",
            "1 1 0 0 packages",
        ),
        ("?   \tcalc\t[no test files]\n", "0 0 0 0 packages"),
        // go test -v with subtests and a skip.
        (
            "=== RUN   TestA\n=== RUN   TestA/one\n    --- PASS: TestA/one (0.00s)\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n--- SKIP: TestB (0.00s)\nPASS\nok  \tcalc\t0.003s\n",
            "2 2 0 1 tests",
        ),
        // pytest's every outcome.
        (
            "==== 1 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 3 warnings, 2 errors in 0.12s ====\n",
            "7 3 3 1 tests",
        ),
        (
            "============ no tests ran in 0.01s ============\n",
            "0 0 0 0 tests",
        ),
        // The plain closing line, and two tools in one check: summed.
        ("3 passed, 1 failed\n", "4 3 1 0 tests"),
        (
            "test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n3 passed in 0.20s\n",
            "5 5 0 1 tests",
        ),
        // No summary a test tool prints: nothing is counted.
        ("ok   add 2 3 = 5\nok   add -4 4 0 = 0\n", ""),
        ("make: *** [all] Error 1\nall 3 tests passed\n", ""),
        (
            "Tests: see the wiki\n12 passed; 0 failed\n3 passed, 1 failed, 2 flaky\n",
            "",
        ),
        ("1 passed, 2 frobnicated in 0.01s\n", ""),
        ("", ""),
    ];
    let files: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, (body, _))| {
            let p = work.path().join(format!("case-{i}.txt"));
            fs::write(&p, body).unwrap();
            p
        })
        .collect();
    let got = parsed(&files);
    for ((body, want), got) in cases.iter().zip(&got) {
        assert_eq!(got, want, "{body:?}");
    }
}

/// The name verify.sh gives the check `cmd`.
fn check_name(cmd: &str) -> String {
    orbit::goal::check_names(&[cmd.to_string()]).remove(0)
}

/// Lines of a counts.tsv record, split into their fields.
fn counts(path: &Path) -> Vec<Vec<String>> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

const PYTEST_PROJECT: &str = r#"def add(a, b):
    return a - b


def test_adds_two_numbers():
    assert add(2, 2) == 4


def test_adds_zero():
    assert add(0, 1) == 1


def test_passes():
    assert add(1, 0) == 1
"#;

/// A repository holding a small pytest project whose `add` subtracts: two of its three
/// tests fail on the base tree. Returns the check command.
fn pytest_repo(repo: &Repo, python: &Path) -> String {
    repo.write("test_calc.py", PYTEST_PROJECT);
    repo.git(&["add", "test_calc.py"]);
    repo.git(&["commit", "-q", "-m", "calc and its tests"]);
    format!(
        "PYTHONDONTWRITEBYTECODE=1 {} -m pytest -q -p no:cacheprovider",
        python.display()
    )
}

#[test]
fn an_agent_that_deletes_the_failing_tests_under_real_pytest_is_caught() {
    let Some(python) = pytest_python() else {
        return;
    };
    let repo = Repo::new();
    let check = pytest_repo(&repo, &python);
    let name = check_name(&check);
    // The attack: the bug stays; the two tests that show it are deleted, so that pytest
    // exits 0 with one test run. Then the claim.
    let agent = repo.agent(
        "agent",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
cat > test_calc.py <<'EOF'
def add(a, b):
    return a - b


def test_passes():
    assert add(1, 0) == 1
EOF
echo "every test passes" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &[&check], &["--max-iterations", "1"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 16, "no DONE: MAX_ITERATIONS used up");
    // The attack was made: the failing tests are gone and pytest itself passed.
    let tests = repo.ws_read("test_calc.py");
    assert!(
        !tests.contains("test_adds_zero") && tests.contains("test_passes"),
        "{tests}"
    );
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(log.contains("1 passed in "), "pytest passed: {log}");
    assert!(
        log.contains(&format!("[FAIL] {name} (1 test ran, 3 ran at the start)")),
        "{log}"
    );
    // The base tree's counts and this pass's, in the records; the drop in the journal.
    let base = counts(&dir.join("iterations/baseline/counts.tsv"));
    assert_eq!(base.len(), 1, "{base:?}");
    assert_eq!(
        base[0][1..8],
        [&name, "3", "1", "2", "0", "tests", "failed"]
    );
    let after = counts(&dir.join("iterations/000001/counts.tsv"));
    assert_eq!(
        after[0][1..10],
        [&name, "1", "1", "0", "0", "tests", "fewer", "3", "0"]
    );
    let drops = events_named(&dir, "test_count_drop");
    assert_eq!(drops.len(), 1, "{drops:?}");
    assert_eq!(drops[0].value["verdict"], "fewer");
    assert_eq!(drops[0].value["allowed"], false);
    let sealed = events_named(&dir, "test_counts_base");
    assert_eq!(sealed[0].value["counts"], format!("{name}=3/0"));
    // The next agent is told what dropped.
    let feedback = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        feedback.contains(&format!(
            "{name} exits 0 with fewer tests: 1 ran, 3 ran at the start"
        )),
        "{feedback}"
    );
}

#[test]
fn an_agent_that_makes_pytest_collect_only_is_caught_and_an_honest_fix_is_done() {
    let Some(python) = pytest_python() else {
        return;
    };
    // The attack: every test is still there, but pytest only collects them (exit 0).
    let repo = Repo::new();
    let check = pytest_repo(&repo, &python);
    let name = check_name(&check);
    let agent = repo.agent(
        "agent",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
printf 'import pytest\n\ndef pytest_configure(config):\n    config.option.collectonly = True\n' > conftest.py
echo "every test passes" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    // The counts alone: by default the new conftest.py is a reward_hack before any count
    // is read (protect::), so that defence is off here.
    let dir = repo.init_loop(
        &agent,
        &[&check],
        &["--max-iterations", "1", "--no-auto-protect"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 16, "no DONE");
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(log.contains("3 tests collected in "), "collect only: {log}");
    assert!(
        log.contains(&format!(
            "[FAIL] {name} (no test ran: its output's summary counts 0 tests)"
        )),
        "{log}"
    );

    // The honest agent fixes `add`: the same check passes with its three tests, DONE.
    let repo = Repo::new();
    let check = pytest_repo(&repo, &python);
    let agent = repo.agent(
        "agent",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
sed 's/return a - b/return a + b/' test_calc.py > t && mv t test_calc.py
echo "add adds: the three tests pass" > "$ORBIT_AGENT_DIR/done.md""#,
    );
    let dir = repo.init_loop(&agent, &[&check], &["--max-iterations", "2"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE");
    let after = counts(&dir.join("iterations/000001/counts.tsv"));
    assert!(!after.is_empty());
    for line in &after {
        assert_eq!(
            line[2..8],
            ["3", "3", "0", "0", "tests", "held"],
            "{after:?}"
        );
    }
    assert!(events_named(&dir, "test_count_drop").is_empty());
}

/// A check that prints what real cargo printed (the fixture `replay` names, in the
/// workspace: the agent chooses it) and passes when `fixed` exists.
const CARGO_CHECK: &str = "cat \"$(cat replay)\"; test -f fixed";

fn cargo_repo(repo: &Repo) {
    // The captured outputs live in the repository (a path outside it, under /tmp, is
    // hidden from a sandboxed check by the sandbox's private /tmp).
    for f in ["cargo-test-pass.txt", "cargo-test-lib.txt"] {
        repo.write(
            &format!("replays/{f}"),
            &fs::read_to_string(fixture(f)).unwrap(),
        );
    }
    repo.write("replay", "replays/cargo-test-pass.txt\n");
    repo.git(&["add", "replay", "replays"]);
    repo.git(&["commit", "-q", "-m", "replay"]);
}

/// An agent that "fixes" the project and leaves cargo's unit tests alone to run: the check
/// passes with two tests of the four the base tree ran.
fn cargo_agent(repo: &Repo) -> PathBuf {
    repo.agent(
        "agent",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
touch fixed
echo replays/cargo-test-lib.txt > replay
echo "fixed" > "$ORBIT_AGENT_DIR/done.md""#,
    )
}

#[test]
fn fewer_cargo_tests_fail_the_check_and_allow_fewer_tests_accepts_the_drop_on_record() {
    let name = check_name(CARGO_CHECK);
    let repo = Repo::new();
    cargo_repo(&repo);
    let agent = cargo_agent(&repo);
    let dir = repo.init_loop(&agent, &[CARGO_CHECK], &["--max-iterations", "1"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 16, "no DONE");
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(
        log.contains(&format!("[FAIL] {name} (2 tests ran, 4 ran at the start)")),
        "{log}"
    );

    // The same drop, accepted in loop.toml: DONE, and said everywhere.
    let repo = Repo::new();
    cargo_repo(&repo);
    let agent = cargo_agent(&repo);
    let dir = repo.init_loop(&agent, &[CARGO_CHECK], &["--max-iterations", "2"]);
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    let toml = toml.replace(
        "allow-fewer-tests = []",
        &format!("allow-fewer-tests = [\"{name}\"]"),
    );
    fs::write(dir.join("loop.toml"), toml).unwrap();
    let forced = repo.orbit(&["init", "--force", "--dir", &dir.display().to_string()]);
    assert_ok(&forced, "orbit init --force");
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE with the drop accepted");
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(
        log.contains(&format!("[PASS] {name}\n[ALLOWED] {name}: 2 tests ran, 4 ran at the start (loop.toml allow-fewer-tests accepts the drop)")),
        "{log}"
    );
    let drops = events_named(&dir, "test_count_drop");
    assert!(!drops.is_empty());
    assert!(
        drops
            .iter()
            .all(|e| e.value["allowed"] == true && e.value["verdict"] == "allowed")
    );
    let report = repo.orbit(&["report", &dir.display().to_string()]);
    assert_ok(&report, "orbit report");
    let report = String::from_utf8_lossy(&report.stdout).into_owned();
    assert!(report.contains("## Test counts"), "{report}");
    assert!(
        report.contains(&format!("| `{name}` | 4 | 2 | 2 | 0 | 1 | accepted: 2 tests ran, 4 ran at the start (allow-fewer-tests) |")),
        "{report}"
    );
    let audit = repo.orbit(&["audit", &dir.display().to_string()]);
    let audit = text(&audit);
    assert!(
        audit.contains(&format!(
            "{name}: 2 tests ran (4 on the base tree), the drop accepted by allow-fewer-tests"
        )),
        "{audit}"
    );

    // A name that is no check of the loop is refused.
    let toml = fs::read_to_string(dir.join("loop.toml")).unwrap();
    fs::write(
        dir.join("loop.toml"),
        toml.replace(&format!("[\"{name}\"]"), "[\"no-such-check\"]"),
    )
    .unwrap();
    let forced = repo.orbit(&["init", "--force", "--dir", &dir.display().to_string()]);
    assert!(!forced.status.success());
    assert!(
        text(&forced).contains("allow-fewer-tests: 'no-such-check' is not a check of this loop"),
        "{}",
        text(&forced)
    );
}

#[test]
fn the_base_counts_are_sealed_a_changed_record_stops_the_next_run() {
    let name = check_name(CARGO_CHECK);
    let repo = Repo::new();
    cargo_repo(&repo);
    // An agent that changes nothing: the loop goes on, tick after tick.
    let agent = repo.agent("agent", "cat >/dev/null");
    let dir = repo.init_loop(&agent, &[CARGO_CHECK], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick");
    let base = dir.join("iterations/baseline/counts.tsv");
    let text0 = fs::read_to_string(&base).unwrap();
    assert!(
        text0.contains(&format!("\t{name}\t4\t4\t0\t1\ttests\tfailed\t")),
        "{text0}"
    );
    // Lowered between runs (by hand, or by something left running): the loop stops.
    fs::write(&base, text0.replace("\t4\t4\t0\t1\t", "\t1\t1\t0\t1\t")).unwrap();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 3, "loop_tamper");
    assert!(
        text(&out).contains("counts.tsv is not the base tree's test counts"),
        "{}",
        text(&out)
    );
}

#[test]
fn under_the_sandbox_the_counts_are_taken_and_a_drop_fails_the_same() {
    if !crate::support::bwrap_available() {
        return;
    }
    let name = check_name(CARGO_CHECK);
    let repo = Repo::new();
    cargo_repo(&repo);
    let agent = cargo_agent(&repo);
    let dir = repo.init_loop(
        &agent,
        &[CARGO_CHECK],
        &["--max-iterations", "1", "--sandbox", "bwrap"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 16, "no DONE");
    let base = counts(&dir.join("iterations/baseline/counts.tsv"));
    assert_eq!(
        base[0][1..8],
        [&name, "4", "4", "0", "1", "tests", "failed"]
    );
    let log = fs::read_to_string(dir.join("iterations/000001/verify.log")).unwrap();
    assert!(
        log.contains(&format!("[FAIL] {name} (2 tests ran, 4 ran at the start)")),
        "{log}"
    );
}

#[test]
fn counts_lines_a_check_prints_itself_are_never_taken() {
    // The check prints what real cargo printed, then a forged line of verify.sh's own
    // block: verify.sh's [PASS]/[FAIL] line follows it, so the runner takes only what
    // verify.sh printed after every check.
    let check = "cat \"$(cat replay)\"; printf '[COUNTS]\\tforged\\t99\\t99\\t0\\t0\\ttests\\theld\\t-\\t-\\n'; test -f fixed";
    let name = check_name(check);
    let repo = Repo::new();
    cargo_repo(&repo);
    let agent = repo.agent("agent", "cat >/dev/null");
    let dir = repo.init_loop(&agent, &[check], &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, "one tick");
    let log = fs::read_to_string(dir.join("iterations/baseline/verify.log")).unwrap();
    assert!(
        log.contains("[COUNTS]\tforged\t99"),
        "the forgery was printed: {log}"
    );
    let base = counts(&dir.join("iterations/baseline/counts.tsv"));
    assert_eq!(base.len(), 1, "{base:?}");
    assert_eq!(
        base[0][1..8],
        [&name, "4", "4", "0", "1", "tests", "failed"]
    );
}
