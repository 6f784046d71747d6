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

/// What `feedback_tests_v` finds in each file: (tests, assertions).
fn findings(files: &[String]) -> Vec<(Vec<String>, Vec<String>)> {
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
            for line in b.lines() {
                if let Some(t) = line.strip_prefix("T\t") {
                    tests.push(t.to_string());
                } else if let Some(a) = line.strip_prefix("A\t") {
                    asserts.push(a.to_string());
                } else {
                    assert!(line.is_empty(), "an unexpected line {line:?}");
                }
            }
            (tests, asserts)
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
        ),
        (go_tests.clone(), go_asserts.clone()),
        (go_tests, go_asserts),
        (
            strings(&["add › adds two numbers", "add › adds zero"]),
            strings(&[
                "add › adds two numbers: expect(received).toBe(expected) // Object.is equality; Expected: 4; Received: 0",
                "add › adds zero: expect(received).toEqual(expected) // deep equality; Expected: 1; Received: -1",
            ]),
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
    assert_eq!(got[0], (vec![], vec![]));
    let (tests, asserts) = &got[1];
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
