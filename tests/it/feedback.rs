//! The localized feedback: a failing verify's tests and assertions, read from the formats of
//! cargo test, pytest, go test and jest (tests/fixtures/verify-output holds what each real
//! tool printed for a small failing project), reach feedback.json and the next prompt.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::support::{Repo, assert_code, assert_ok, bash_with_parts, run_bounded};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/verify-output")
        .join(name)
        .display()
        .to_string()
}

/// What `feedback_tests_v` finds in each file: (tests, assertions, panic locations).
type Findings = (Vec<String>, Vec<String>, Vec<String>);

fn findings(files: &[String]) -> Vec<Findings> {
    let work = tempfile::tempdir().unwrap();
    let mut cmd = bash_with_parts(
        work.path(),
        &["common", "feedback"],
        r#"for f in "$@"; do
  feedback_tests_v "$f"
  printf '%s\n' "$REPLY"
  printf '%s\n' '----'
done"#,
    );
    cmd.args(files);
    let out = run_bounded(cmd, Duration::from_secs(30));
    assert_ok(&out, "feedback_tests_v");
    let text = String::from_utf8(out.stdout).expect("clean UTF-8");
    let blocks: Vec<&str> = text.split("----\n").collect();
    assert_eq!(blocks.len(), files.len() + 1, "{text}");
    blocks[..files.len()]
        .iter()
        .map(|b| {
            let mut tests = Vec::new();
            let mut asserts = Vec::new();
            let mut loci = Vec::new();
            for line in b.lines() {
                if let Some(t) = line.strip_prefix("T\t") {
                    tests.push(t.to_string());
                } else if let Some(a) = line.strip_prefix("A\t") {
                    asserts.push(a.to_string());
                } else if let Some(l) = line.strip_prefix("L\t") {
                    loci.push(l.to_string());
                } else {
                    assert!(line.is_empty(), "an unexpected line {line:?}");
                }
            }
            (tests, asserts, loci)
        })
        .collect()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn each_test_tool_s_failures_become_failing_tests_and_their_assertions() {
    let files: Vec<String> = [
        "cargo-test.txt",
        "cargo-test-warnings.txt",
        "pytest.txt",
        "go-test.txt",
        "go-test-v.txt",
        "jest.txt",
    ]
    .iter()
    .map(|f| fixture(f))
    .collect();
    let got = findings(&files);
    let go_tests = strings(&["TestAddsTwoNumbers", "TestAddsZero"]);
    let go_asserts = strings(&[
        "TestAddsTwoNumbers: calc_test.go:7: Add(2, 2) = 0, want 4",
        "TestAddsZero: calc_test.go:13: adding zero changes nothing: got -1",
    ]);
    let want = vec![
        (
            strings(&["tests::adds_two_numbers", "tests::adds_zero"]),
            strings(&[
                "tests::adds_two_numbers: assertion `left == right` failed; left: 0; right: 4 (at src/lib.rs:6:29)",
                "tests::adds_zero: adding zero changes nothing (at src/lib.rs:8:22)",
            ]),
            strings(&["src/lib.rs:6:29", "src/lib.rs:8:22"]),
        ),
        // An integration test's failures after 24 compiler warnings: where each test
        // panicked, not where the warnings point.
        (
            strings(&["adds_zero", "adds_two_numbers"]),
            strings(&[
                "adds_zero: assertion `left == right` failed: adding zero changes nothing; left: -3; right: 3 (at tests/api.rs:10:5)",
                "adds_two_numbers: assertion `left == right` failed; left: 0; right: 4 (at tests/api.rs:5:5)",
            ]),
            strings(&["tests/api.rs:10:5", "tests/api.rs:5:5"]),
        ),
        (
            strings(&[
                "test_calc.py::test_adds_two_numbers",
                "test_calc.py::test_adds_zero",
            ]),
            strings(&[
                "test_adds_two_numbers: assert 0 == 4",
                "test_adds_zero: AssertionError: adding zero changes nothing",
            ]),
            vec![],
        ),
        (go_tests.clone(), go_asserts.clone(), vec![]),
        (go_tests, go_asserts, vec![]),
        (
            strings(&["add › adds two numbers", "add › adds zero"]),
            strings(&[
                "add › adds two numbers: expect(received).toBe(expected) // Object.is equality; Expected: 4; Received: 0",
                "add › adds zero: expect(received).toEqual(expected) // deep equality; Expected: 1; Received: -1",
            ]),
            vec![],
        ),
    ];
    assert_eq!(got, want);
}

#[test]
fn output_in_no_test_format_and_hostile_output_yield_nothing_or_clean_bounded_text() {
    let work = tempfile::tempdir().unwrap();
    let plain = work.path().join("plain.txt");
    fs::write(&plain, "make: *** [all] Error 1\nsrc/a.c:3: error: x\n").unwrap();
    let hostile = work.path().join("hostile.txt");
    let mut text = String::from("test a\"b\\c\x07d ... FAILED\n");
    for i in 0..40 {
        text.push_str(&format!(
            "--- FAIL: TestMany{i} (0.00s)\n    m_test.go:{i}: {}\n",
            "x".repeat(500)
        ));
    }
    fs::write(&hostile, text).unwrap();
    let got = findings(&[plain.display().to_string(), hostile.display().to_string()]);
    assert_eq!(got[0], (vec![], vec![], vec![]));
    let (tests, asserts, loci) = &got[1];
    assert!(loci.is_empty(), "{loci:?}");
    assert_eq!(tests.len(), 20, "at most 20 tests");
    assert_eq!(asserts.len(), 20, "at most 20 assertions");
    assert_eq!(tests[0], "a\"b\\cd", "the bell is dropped, the rest kept");
    assert!(asserts.iter().all(|a| a.len() <= 300));
}

#[test]
fn the_failing_tests_reach_feedback_json_and_the_next_prompt() {
    let repo = Repo::new();
    fs::copy(fixture("cargo-test.txt"), repo.join("cargo-output.txt")).unwrap();
    repo.git(&["add", "cargo-output.txt"]);
    repo.git(&["commit", "-q", "-m", "a recorded test run"]);
    let seen = repo.bin.path().join("feedback-seen.json");
    let agent = repo.agent(
        "agent",
        &format!(
            r#"cat >/dev/null
echo "step $ORBIT_ITERATION" >> work.txt
if [ -n "${{ORBIT_FEEDBACK_FILE:-}}" ]; then cp "$ORBIT_FEEDBACK_FILE" '{}'; fi"#,
            seen.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["cat cargo-output.txt; exit 1"], &[]);
    for tick in 1..=2 {
        let out = repo.run_loop(&dir, &["--once"], &[]);
        assert_code(&out, 10, &format!("tick {tick}"));
    }
    let fb: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("iterations/000001/feedback.json")).unwrap())
            .expect("feedback.json is JSON");
    assert_eq!(
        fb["tests"],
        serde_json::json!(["tests::adds_two_numbers", "tests::adds_zero"])
    );
    assert_eq!(
        fb["assertions"][0],
        "tests::adds_two_numbers: assertion `left == right` failed; left: 0; right: 4 (at src/lib.rs:6:29)"
    );
    assert!(fb["failing"].as_array().is_some_and(|f| f.len() == 1));
    // The agent of iteration 2 was given it, and its prompt says it in words.
    let given: serde_json::Value = serde_json::from_slice(&fs::read(&seen).unwrap()).unwrap();
    assert_eq!(given["tests"], fb["tests"]);
    let prompt = fs::read_to_string(dir.join("iterations/000002/prompt.md")).unwrap();
    assert!(
        prompt.contains("Failing tests:\n    - tests::adds_two_numbers\n"),
        "{prompt}"
    );
    assert!(
        prompt.contains("What they asserted:\n    - tests::adds_two_numbers: assertion `left == right` failed; left: 0; right: 4 (at src/lib.rs:6:29)\n"),
        "{prompt}"
    );
}

/// A failing `cargo test` check whose build printed more warnings than loci holds, then a
/// passing check that prints last: the failing tests' panic locations lead the loci (the
/// warnings' locations after them), and the output tail is the failing check's own.
#[test]
fn a_cargo_failure_s_panic_locations_lead_the_loci_and_its_own_output_is_the_tail() {
    let repo = Repo::new();
    fs::copy(
        fixture("cargo-test-warnings.txt"),
        repo.join("cargo-output.txt"),
    )
    .unwrap();
    repo.git(&["add", "cargo-output.txt"]);
    repo.git(&["commit", "-q", "-m", "a recorded test run"]);
    let agent = repo.agent("agent", "cat >/dev/null; echo step >> work.txt");
    let dir = repo.init_loop(
        &agent,
        &[
            "cat cargo-output.txt; exit 101",
            "seq 1 40 | sed 's/^/a passing line /'",
        ],
        &[],
    );
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "one tick");
    let fb: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("iterations/000001/feedback.json")).unwrap())
            .expect("feedback.json is JSON");
    assert_eq!(
        fb["failing"],
        serde_json::json!(["cat-cargo-output-txt-exit-101"])
    );
    assert_eq!(
        fb["tests"],
        serde_json::json!(["adds_zero", "adds_two_numbers"])
    );
    let loci: Vec<&str> = fb["loci"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(
        loci[..2],
        ["tests/api.rs:10:5", "tests/api.rs:5:5"],
        "{loci:?}"
    );
    // The panic lines' file:line is not said twice; the warnings follow, up to 20 in all.
    assert!(
        !loci.contains(&"tests/api.rs:10") && !loci.contains(&"tests/api.rs:5"),
        "{loci:?}"
    );
    assert_eq!(loci[2], "src/lib.rs:8", "{loci:?}");
    assert_eq!(loci.len(), 20, "{loci:?}");
    let tail = fb["output_tail"].as_str().unwrap();
    assert!(
        tail.contains("thread 'adds_two_numbers' (16219) panicked at tests/api.rs:5:5:")
            && tail.contains("error: test failed, to rerun pass `--test api`")
            && tail.contains("[FAIL] cat-cargo-output-txt-exit-101 (exit 101)"),
        "the failing check's own last lines: {tail}"
    );
    assert!(
        !tail.contains("a passing line") && !tail.contains("[PASS]") && !tail.contains("passed, "),
        "nothing of the passing check nor the closing line: {tail}"
    );
    let txt = fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        txt.contains("Locations: tests/api.rs:10:5 tests/api.rs:5:5 src/lib.rs:8 "),
        "{txt}"
    );
    assert!(!txt.contains("a passing line"), "{txt}");
}

/// What `feedback_failing_output` keeps of a verify output: the failing checks' sections,
/// the `[FAIL]` lines outside them, and the whole output when there is neither.
fn failing_output(verify_out: &str) -> String {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("verify.out");
    fs::write(&file, verify_out).unwrap();
    let mut cmd = bash_with_parts(
        work.path(),
        &["common", "feedback"],
        r#"feedback_failing_output "$1" "$1.failing"; cat -- "$1.failing""#,
    );
    cmd.arg(&file);
    let out = run_bounded(cmd, Duration::from_secs(30));
    assert_ok(&out, "feedback_failing_output");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_failing_output_is_the_failing_checks_own_sections() {
    let run = "==> check unit: cargo test\n\
               compiling\n\
               [PASS] unit (printed by the check itself)\n\
               test a ... FAILED\n\
               [FAIL] unit (exit 101)\n\
               ==> check lint [regression]: make lint\n\
               all clean\n\
               [PASS] lint\n\
               [COUNTS] lint\tcargo\t3\t3\t0\t0\n\
               1 passed, 1 failed\n\
               [FAIL] project-changed-by-checks (a check changed the project it was checking: x)\n";
    assert_eq!(
        failing_output(run),
        "==> check unit: cargo test\ncompiling\n[PASS] unit (printed by the check itself)\ntest a ... FAILED\n[FAIL] unit (exit 101)\n\
         [FAIL] project-changed-by-checks (a check changed the project it was checking: x)\n"
    );
    // A check cut short (verify.sh timed out in it) has no PASS or FAIL line: it is kept
    // whole, the passing one before it is not.
    let cut = "==> check lint: make lint\nok\n[PASS] lint\n==> check slow: sleep 99\nstarted\n";
    assert_eq!(failing_output(cut), "==> check slow: sleep 99\nstarted\n");
    // verify.sh that ran no check: the whole output.
    let none = "verify.sh: cannot enter /x\n";
    assert_eq!(failing_output(none), none);
}
