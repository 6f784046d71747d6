//! `orbit adequacy`: which part of a DONE's change the loop's own checks need. Real git, a
//! real loop run to DONE by a scripted agent, real python checks: each hunk reverted alone
//! and each mutant of the added lines is run in a clean checkout, never in the workspace.

use std::path::{Path, PathBuf};

use serde_json::Value;

use std::time::Duration;

use crate::support::{Repo, assert_code, command, orbit_bin, run_bounded, text};

/// The project before the agent: `add` is wrong, `greet` has no test.
pub(crate) fn project(repo: &Repo) {
    repo.write("calc.py", "def add(a, b):\n    return 0\n");
    repo.write("util.py", "def greet():\n    return 'hi'\n");
    repo.write(
        "test_calc.py",
        "import os, time\nfrom calc import add\nassert add(2, 3) == 5, add(2, 3)\nassert add(-1, 1) == 0\ntime.sleep(float(os.environ.get('CHECK_SLEEP', '0')))\nprint('1 passed')\n",
    );
    repo.git(&["add", "."]);
    repo.git(&["commit", "-qm", "the project"]);
}

/// A loop whose agent writes `files` (path, text) and says done; run to DONE.
pub(crate) fn done_with(repo: &Repo, files: &[(&str, &str)]) -> PathBuf {
    let mut body =
        String::from("cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n");
    for (path, content) in files {
        body.push_str(&format!("cat > {path} <<'EOF'\n{content}EOF\n"));
    }
    body.push_str("echo \"the tests pass\" > \"$ORBIT_AGENT_DIR/done.md\"\n");
    let agent = repo.agent("worker", &body);
    // The runner measures the DONE once it is recorded.
    let dir = repo.init_loop(
        &agent,
        &["python3 test_calc.py"],
        &["--protect", "test_*.py", "--adequacy", "report"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "the loop reaches DONE");
    dir
}

fn adequacy(repo: &Repo, args: &[&str]) -> Value {
    let mut all = vec!["adequacy", "--json", "--budget", "10m"];
    all.extend_from_slice(args);
    let out = repo.orbit(&all);
    assert_code(&out, 0, "orbit adequacy");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out)))
}

fn results<'a>(v: &'a Value, list: &str, file: &str) -> Vec<&'a Value> {
    v[list]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["file"] == file)
        .collect()
}

fn workspace_head(repo: &Repo, dir: &Path) -> String {
    let _ = dir;
    repo.git(&["rev-parse", "orbit/test-goal"])
        .trim()
        .to_string()
}

#[test]
fn a_superfluous_hunk_is_not_needed_and_an_unpinned_branch_keeps_its_mutants() {
    let repo = Repo::new();
    project(&repo);
    let dir = done_with(
        &repo,
        &[
            (
                "calc.py",
                "def add(a, b):\n    if a > 100:\n        return a\n    return a + b\n",
            ),
            ("util.py", "def greet():\n    return 'hello'\n"),
        ],
    );
    let head = workspace_head(&repo, &dir);
    let v = adequacy(&repo, &[]);
    // The fix's hunk is needed; the tidy-up of greet, which no check reaches, is not.
    let calc = results(&v, "hunks", "calc.py");
    assert_eq!(calc.len(), 1, "{v:#}");
    assert_eq!(calc[0]["result"], "needed", "{v:#}");
    assert_eq!(calc[0]["check"], "python3-test-calc-py", "{v:#}");
    let util = results(&v, "hunks", "util.py");
    assert_eq!(util[0]["result"], "not-needed", "{v:#}");
    assert_eq!(v["hunks_needed"], 1);
    assert_eq!(v["hunks_tried"], 2);
    // The branch for a > 100 is not pinned by any test: loosening its bound survives, and
    // so does its early return's value; flipping the comparison breaks add(2, 3).
    let m = results(&v, "mutants", "calc.py");
    let find = |op: &str, line: u64| {
        m.iter()
            .find(|x| x["operator"] == op && x["line"] == line)
            .unwrap_or_else(|| panic!("no {op} mutant of line {line}: {v:#}"))
    };
    assert_eq!(find("comparison-loosened", 2)["result"], "survived");
    assert_eq!(find("integer-off-by-one", 2)["result"], "survived");
    assert_eq!(find("return-default", 3)["result"], "survived");
    assert_eq!(find("comparison-flipped", 2)["result"], "killed");
    assert_eq!(find("return-default", 4)["result"], "killed");
    // greet's new string is masked (never mutated inside); returning None instead of it
    // survives, as its hunk does.
    let greet = results(&v, "mutants", "util.py");
    assert_eq!(greet.len(), 1, "{v:#}");
    assert_eq!(greet[0]["operator"], "return-default");
    assert_eq!(greet[0]["result"], "survived");
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .starts_with("the checks need 1 of 2 changed hunks;"),
        "{v:#}"
    );
    // The protected test file is left out, and said.
    assert!(
        v["left_out"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["file"] != "test_calc.py"),
        "the test file is not part of the change: {v:#}"
    );
    // The measure is recorded beside the envelope and journaled, and the audit notes the
    // hunk no check needs (P2); the journal still chains.
    let rec = orbit::adequacy::Record::read(&dir).expect("adequacy.json reads back");
    assert_eq!(rec.commit, head);
    assert_eq!((rec.hunks_needed, rec.hunks_tried), (1, 2));
    assert_eq!(rec.unneeded(), vec!["util.py:2".to_string()]);
    // The runner measured the DONE once it was recorded (adequacy = "report", the
    // default), then orbit adequacy measured it again.
    let measured = crate::support::events_named(&dir, "adequacy_measured");
    assert_eq!(measured.len(), 2, "{measured:?}");
    assert_eq!(measured[0].value["mode"], "report");
    assert_eq!(measured[0].value["commit"], head.as_str());
    assert!(
        measured[1].value.get("mode").is_none(),
        "orbit adequacy's own"
    );
    let out = repo.orbit(&["audit", "--json"]);
    let audit: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = audit["loops"][0]["findings"].as_array().unwrap();
    let f = findings
        .iter()
        .find(|f| f["class"] == "UNNEEDED_HUNKS")
        .unwrap_or_else(|| panic!("no UNNEEDED_HUNKS finding: {audit:#}"));
    assert_eq!(f["severity"], "P2");
    assert_eq!(f["evidence"], "adequacy.json:1");
    assert!(
        f["message"].as_str().unwrap().contains(": util.py:2"),
        "{f}"
    );
    assert!(
        findings.iter().all(|f| f["severity"] == "P2"),
        "the record is no tamper and the journal still chains: {audit:#}"
    );
    // The report shows the line and the change as its hunks, each marked needed or not
    // needed, with the survivors of its lines under it.
    let report = repo.orbit(&["report"]);
    let md = text(&report);
    assert!(
        md.contains(
            "  - a hunk the checks need: `calc.py:2-4 (check python3-test-calc-py failed)`\n    - a mutant the checks do not kill: `calc.py:"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "  - a hunk no check needs: `util.py:2`\n    - a mutant the checks do not kill: `util.py:2 return-default"
        ),
        "{md}"
    );
    assert!(
        md.contains("- adequacy: the checks need 1 of 2 changed hunks;"),
        "{md}"
    );
    assert!(
        md.contains("  - a hunk no check needs: `util.py:2`"),
        "{md}"
    );
    assert!(
        md.contains(
            "a mutant the checks do not kill: `calc.py:2 comparison-loosened: if a >= 100:`"
        ),
        "{md}"
    );
    let html = text(&repo.orbit(&["report", "--html"]));
    for marked in [
        "calc.py:2-4 (check python3-test-calc-py failed)",
        "util.py:2",
        "calc.py:2 comparison-loosened: if a &gt;= 100:",
    ] {
        assert!(html.contains(marked), "{marked}: {html}");
    }
    assert!(html.contains(">not needed<"), "{html}");
    let rj: Value = serde_json::from_slice(&repo.orbit(&["report", "--json"]).stdout).unwrap();
    assert_eq!(rj["adequacy_unneeded"], serde_json::json!(["util.py:2"]));
    // The runner's next tick takes the record as one of the loop's files, not a tamper.
    let again = repo.run_loop(&dir, &[], &[]);
    assert_code(&again, 0, "a DONE loop's next tick after adequacy");
    assert!(!text(&again).contains("tamper"), "{}", text(&again));
    // A record whose details were edited is not read.
    let edited = std::fs::read_to_string(dir.join("adequacy.json"))
        .unwrap()
        .replace("\"not-needed\"", "\"needed\"");
    std::fs::write(dir.join("adequacy.json"), edited).unwrap();
    assert!(orbit::adequacy::Record::read(&dir).is_none());
    // Nothing of the loop moved: its branch and workspace are as DONE left them.
    assert_eq!(workspace_head(&repo, &dir), head);
    assert_eq!(
        repo.git(&[
            "-C",
            &repo.ws().display().to_string(),
            "status",
            "--porcelain"
        ]),
        ""
    );
    assert_eq!(
        repo.git(&["worktree", "list", "--porcelain"])
            .matches("orbit-adequacy")
            .count(),
        0,
        "the clean checkouts are gone"
    );
}

/// A Rust test module the change adds inside a source file is what the checks run, never
/// what they need: its hunk is left out (reverted, the checks would only run one test
/// fewer) and its lines are never mutated (a test's own integer is no code of the change),
/// while the code beside it is measured as any.
#[test]
fn a_rust_test_module_inside_a_source_file_is_left_out_and_never_mutated() {
    let repo = Repo::new();
    project(&repo);
    repo.write("limit.rs", "pub fn limit() -> u32 {\n    7\n}\n");
    repo.git(&["add", "limit.rs"]);
    repo.git(&["commit", "-qm", "a limit"]);
    let new = "pub fn limit() -> u32 {\n    8\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn limit_is_eight() {\n        assert_eq!(super::limit(), 8);\n        assert!(super::limit() > 3 && true);\n    }\n} // mod tests\n";
    done_with(
        &repo,
        &[
            ("calc.py", "def add(a, b):\n    return a + b\n"),
            ("limit.rs", new),
        ],
    );
    let v = adequacy(&repo, &[]);
    // The code's hunk is measured (no check reads limit.rs: not needed), the module's (its
    // closing brace's comment keeps git's diff from sliding it onto the function's) is not.
    let hunks = results(&v, "hunks", "limit.rs");
    assert_eq!(hunks.len(), 1, "{v:#}");
    assert_eq!(hunks[0]["lines"], "2", "{v:#}");
    let left: Vec<&Value> = v["left_out"].as_array().unwrap().iter().collect();
    assert!(
        left.iter()
            .any(|l| l["file"] == "limit.rs:4-12"
                && l["why"].as_str().unwrap().contains("#[cfg(test)]")),
        "{v:#}"
    );
    // Mutants only of the code's line: none of the test's integers, comparison or &&.
    let m = results(&v, "mutants", "limit.rs");
    assert!(!m.is_empty(), "{v:#}");
    assert!(m.iter().all(|x| x["line"] == 2), "{v:#}");
}

#[test]
fn a_fully_pinned_fix_has_every_hunk_needed_and_every_mutant_killed() {
    let repo = Repo::new();
    project(&repo);
    done_with(&repo, &[("calc.py", "def add(a, b):\n    return a + b\n")]);
    let v = adequacy(&repo, &[]);
    assert_eq!(v["hunks_needed"], 1, "{v:#}");
    assert_eq!(v["hunks_tried"], 1, "{v:#}");
    let tried = v["mutants_tried"].as_u64().unwrap();
    assert!(tried >= 1, "{v:#}");
    assert_eq!(v["mutants_killed"].as_u64().unwrap(), tried, "{v:#}");
    assert_eq!(v["not_tried"]["mutants"], 0);
    // Without --budget the budget is twice the loop's PASS_K times the unchanged commit's
    // own check run, as measured in this run.
    let toml = std::fs::read_to_string(repo.join(".orbit/test-goal/loop.toml")).unwrap();
    let pass_k: f64 = toml
        .lines()
        .find_map(|l| l.strip_prefix("pass-k = "))
        .expect("loop.toml's pass-k")
        .trim()
        .parse()
        .unwrap();
    let out = repo.orbit(&["adequacy", "--json"]);
    let d: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out)));
    let (budget, baseline) = (
        d["budget_s"].as_f64().unwrap(),
        d["baseline_s"].as_f64().unwrap(),
    );
    assert!(baseline > 0.0, "{d:#}");
    assert!(
        (budget - 2.0 * pass_k * baseline).abs() <= 1e-6 * budget,
        "budget {budget} s, baseline {baseline} s, PASS_K {pass_k}"
    );
    // The loop's adequacy-budget, when set, is the budget of a run by hand too.
    let loop_toml = repo.join(".orbit/test-goal/loop.toml");
    assert!(toml.contains("adequacy-budget = \"0\""), "{toml}");
    std::fs::write(
        &loop_toml,
        toml.replace("adequacy-budget = \"0\"", "adequacy-budget = \"7m\""),
    )
    .unwrap();
    let out = repo.orbit(&["adequacy", "--json"]);
    let d: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out)));
    assert_eq!(d["budget_s"].as_f64(), Some(420.0), "{d:#}");
    std::fs::write(&loop_toml, &toml).unwrap();
    let out = repo.orbit(&["adequacy", "--budget", "10m"]);
    assert_code(&out, 0, "orbit adequacy");
    assert!(
        text(&out).contains(&format!(
            "the checks need 1 of 1 changed hunks; {tried} of {tried} mutants killed"
        )),
        "{}",
        text(&out)
    );
}

#[test]
fn a_budget_that_runs_out_says_what_it_did_not_try() {
    let repo = Repo::new();
    project(&repo);
    done_with(
        &repo,
        &[(
            "calc.py",
            "def add(a, b):\n    if a > 100 and b > 100:\n        return a + b + 0\n    return a + b\n",
        )],
    );
    // Each run of the check takes at least two seconds here, so a one-second budget lets
    // one worker start one unit after the unchanged commit's run, and no second.
    let slow = |json: bool| {
        let mut cmd = command(orbit_bin());
        cmd.args(["adequacy", "--budget", "1s", "--jobs", "1"])
            .args(json.then_some("--json"))
            .current_dir(repo.path())
            .env("PATH", repo.path_env())
            .env("CHECK_SLEEP", "2");
        run_bounded(cmd, Duration::from_secs(120))
    };
    let out = slow(true);
    assert_code(&out, 0, "orbit adequacy");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let not_tried = v["not_tried"]["mutants"].as_u64().unwrap();
    assert!(not_tried > 0, "{v:#}");
    let listed = v["mutants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["result"] == "not-tried")
        .count() as u64;
    assert_eq!(listed, not_tried, "each untried mutant is listed: {v:#}");
    assert_eq!(v["hunks_tried"], 1, "one unit ran, the first hunk: {v:#}");
    let out = slow(false);
    assert!(
        text(&out).contains("the budget (1s) ran out; raise it with --budget"),
        "{}",
        text(&out)
    );
}

/// Two `git worktree add` in one repository at once can fail: git reads every worktree's
/// files as it adds one, and one still being written fails it ("fatal: failed to read
/// .git/worktrees/NAME/commondir: Success", seen from a measure's second checkout beside
/// its first, under load). A git in front of the real one fails the first add of the second
/// checkout so, as git does, and notes any worktree add or remove that starts while
/// another is under way: the measure makes its checkouts one at a time and tries an add
/// that failed again, and measures all the same.
#[test]
fn a_checkout_that_git_fails_beside_another_is_tried_again_and_none_is_made_at_once() {
    let repo = Repo::new();
    project(&repo);
    done_with(
        &repo,
        &[(
            "calc.py",
            "def add(a, b):\n    if a > 100:\n        return a\n    return a + b\n",
        )],
    );
    let real = repo.real_git();
    let shim = repo.bin.path().join("git-shim");
    let marks = repo.bin.path().join("git-marks");
    std::fs::create_dir_all(&shim).unwrap();
    std::fs::create_dir_all(&marks).unwrap();
    let m = marks.display();
    std::fs::write(
        shim.join("git"),
        format!(
            "#!/bin/bash\n\
             case \" $* \" in *' worktree add '*|*' worktree remove '*) ;; *) exec {real} \"$@\" ;; esac\n\
             mkdir {m}/busy 2>/dev/null || echo \"$*\" >>{m}/overlaps\n\
             if [[ \" $* \" == *' worktree add '*-1' '* ]] && mkdir {m}/failed 2>/dev/null; then\n\
               echo 'Preparing worktree (detached HEAD 0000000)' >&2\n\
               echo 'fatal: failed to read .git/worktrees/orbit-adequacy-0-0-0/commondir: Success' >&2\n\
               rmdir {m}/busy 2>/dev/null; exit 128\n\
             fi\n\
             {real} \"$@\"; rc=$?\n\
             rmdir {m}/busy 2>/dev/null\n\
             exit $rc\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(shim.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = command(orbit_bin());
    cmd.args(["adequacy", "--json", "--budget", "10m", "--jobs", "2"])
        .current_dir(repo.path())
        .env("PATH", format!("{}:{}", shim.display(), repo.path_env()));
    let out = run_bounded(cmd, Duration::from_secs(300));
    assert!(
        marks.join("failed").is_dir(),
        "the second checkout's add failed once: {}",
        text(&out)
    );
    assert_code(
        &out,
        0,
        "orbit adequacy, its second checkout made on a second try",
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["not_tried"]["mutants"], 0, "{v:#}");
    assert_eq!(
        results(&v, "hunks", "calc.py")[0]["result"],
        "needed",
        "{v:#}"
    );
    assert!(
        !marks.join("overlaps").exists(),
        "a worktree add or remove started while another was under way: {}",
        std::fs::read_to_string(marks.join("overlaps")).unwrap_or_default()
    );
    assert_eq!(
        repo.git(&["worktree", "list", "--porcelain"])
            .matches("orbit-adequacy")
            .count(),
        0,
        "the clean checkouts are gone"
    );
}

/// `--gate N` (the runner passes adequacy-max-survivors): up to N surviving mutants pass,
/// one more rejects with feedback naming each; a hunk no check needs rejects whatever N.
#[test]
fn the_gate_allows_up_to_its_number_of_survivors_and_never_a_hunk_no_check_needs() {
    let repo = Repo::new();
    project(&repo);
    done_with(
        &repo,
        &[(
            "calc.py",
            "def add(a, b):\n    if a > 100:\n        return a\n    return a + b\n",
        )],
    );
    let v = adequacy(&repo, &[]);
    let survived = results(&v, "mutants", "calc.py")
        .iter()
        .filter(|m| m["result"] == "survived")
        .count();
    assert!(survived >= 2, "{v:#}");
    assert_eq!(v["hunks_needed"], v["hunks_tried"], "{v:#}");
    let gate = |n: usize| {
        let n = n.to_string();
        repo.orbit(&["adequacy", "--budget", "10m", "--gate", &n])
    };
    assert_code(&gate(survived), 0, "as many survivors as the gate allows");
    let out = gate(survived - 1);
    assert_code(&out, 4, "one survivor more than the gate allows");
    assert!(
        text(&out).contains(&format!(
            "({survived} survived, at most {} may)",
            survived - 1
        )) && text(&out).contains("calc.py:2 comparison-loosened: if a >= 100:"),
        "{}",
        text(&out)
    );
    // A hunk no check needs rejects whatever the number.
    let repo = Repo::new();
    project(&repo);
    done_with(
        &repo,
        &[
            ("calc.py", "def add(a, b):\n    return a + b\n"),
            ("util.py", "def greet():\n    return 'hello'\n"),
        ],
    );
    let out = repo.orbit(&["adequacy", "--budget", "10m", "--gate", "1000"]);
    assert_code(&out, 4, "a hunk no check needs");
    assert!(text(&out).contains("  - util.py:2\n"), "{}", text(&out));
}

#[test]
fn binary_renamed_deleted_generated_and_huge_changes_are_each_handled_and_said() {
    let repo = Repo::new();
    project(&repo);
    repo.write("old_name.py", "X = 1\n");
    repo.write("gone.txt", "unused\n");
    repo.write("generated.py", "# @generated by a tool\nVALUE = 2\n");
    repo.write("table.py", "TABLE = []\n");
    std::fs::write(repo.join("logo.bin"), b"\x00\x01\x02").unwrap();
    repo.git(&["add", "."]);
    repo.git(&["commit", "-qm", "more files"]);
    let mut table = String::from("TABLE = [\n");
    for i in 0..3000 {
        table.push_str(&format!("    {i},\n"));
    }
    table.push_str("]\n");
    let agent = repo.agent(
        "worker",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
printf 'def add(a, b):\n    return a + b\n' > calc.py
printf '\x00\x03\x04' > logo.bin
printf 'new\x00\x01' > added.bin
git mv old_name.py new_name.py
git rm -q gone.txt
printf '# @generated by a tool\nVALUE = 3\n' > generated.py
cat > table.py <<'TABLE'
{table}TABLE
echo "the tests pass" > "$ORBIT_AGENT_DIR/done.md""#
        ),
    );
    let dir = repo.init_loop(
        &agent,
        &["python3 test_calc.py"],
        &["--protect", "test_*.py"],
    );
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "the loop reaches DONE");
    let v = adequacy(&repo, &["--max-mutants", "4"]);
    let kind = |file: &str| {
        let h = results(&v, "hunks", file);
        assert_eq!(h.len(), 1, "{file}: {v:#}");
        (
            h[0]["kind"].as_str().unwrap().to_string(),
            h[0]["result"].as_str().unwrap().to_string(),
        )
    };
    let not_needed = |k: &str| (k.to_string(), "not-needed".to_string());
    assert_eq!(kind("logo.bin"), not_needed("binary"));
    assert_eq!(kind("added.bin"), not_needed("added"));
    assert_eq!(kind("new_name.py"), not_needed("renamed"));
    assert_eq!(kind("gone.txt"), not_needed("deleted"));
    assert_eq!(kind("generated.py"), not_needed("generated"));
    assert_eq!(kind("table.py"), not_needed("hunk"));
    assert_eq!(kind("calc.py"), ("hunk".into(), "needed".into()));
    assert_eq!(
        results(&v, "hunks", "new_name.py")[0]["old_file"],
        "old_name.py"
    );
    assert_eq!(results(&v, "hunks", "table.py")[0]["len"], 3002);
    // Mutants spread: calc.py's line first, then the table's first lines; the cap's rest
    // are counted as not tried. Neither the binary nor the generated file is mutated.
    let m = v["mutants"].as_array().unwrap();
    assert_eq!(m.len(), 4, "{v:#}");
    assert_eq!(m[0]["file"], "calc.py", "{v:#}");
    assert!(
        m.iter()
            .all(|m| m["file"] == "calc.py" || m["file"] == "table.py"),
        "{v:#}"
    );
    assert!(v["not_tried"]["mutants"].as_u64().unwrap() > 2990, "{v:#}");
    let notes = v["notes"].to_string();
    for said in [
        "logo.bin: reverted whole (binary), never mutated",
        "generated.py: reverted whole (generated), never mutated",
        "new_name.py: reverted whole (renamed), never mutated",
        "table.py:1-3002: a hunk of 3002 lines, reverted as one",
    ] {
        assert!(notes.contains(said), "{said}: {v:#}");
    }
}

#[test]
fn a_mutant_that_makes_the_code_hang_is_stopped_and_counts_as_killed() {
    let repo = Repo::new();
    project(&repo);
    done_with(
        &repo,
        &[(
            "calc.py",
            "def add(a, b):\n    i = 0\n    while i != 3:\n        i += 1\n    return a + b + i - 3\n",
        )],
    );
    let v = adequacy(&repo, &[]);
    let m = results(&v, "mutants", "calc.py");
    let hang = m
        .iter()
        .find(|x| x["operator"] == "integer-off-by-one" && x["line"] == 4)
        .unwrap_or_else(|| panic!("no mutant of i += 1: {v:#}"));
    assert_eq!(hang["text"], "        i += 2");
    assert_eq!(hang["result"], "killed", "{v:#}");
    assert_eq!(hang["check"], "timeout", "{v:#}");
}

/// What the measure runs beyond verify.sh, and how: the holdout's checks (a hunk only the
/// holdout needs is needed, by the holdout's check), a unit that breaks the build (a file
/// the change added and the code imports, reverted: needed, and said to be a build
/// failure), and the units side by side up to check-jobs (its default, 0, is the CPUs):
/// a check that, in a measure's checkout, waits for a second one to be running at once.
#[test]
fn the_holdout_a_build_failure_and_side_by_side_runs_are_each_measured_and_said() {
    let repo = Repo::new();
    project(&repo);
    let seen = repo.bin.path().join("side-by-side");
    std::fs::create_dir_all(&seen).unwrap();
    let overlap = repo.bin.path().join("overlap");
    repo.write(
        "probe.sh",
        &format!(
            "case $PWD in *orbit-adequacy-*) ;; *) exit 0 ;; esac\n\
             touch {seen}/$$\n\
             end=$((SECONDS + 2))\n\
             while [ $SECONDS -le $end ]; do\n\
             \x20 if [ \"$(ls {seen} | wc -l)\" -ge 2 ]; then echo yes >> {overlap}; break; fi\n\
             \x20 sleep 0.05\n\
             done\n\
             rm -f {seen}/$$\n",
            seen = seen.display(),
            overlap = overlap.display()
        ),
    );
    repo.git(&["add", "probe.sh"]);
    repo.git(&["commit", "-qm", "a probe of runs at once"]);
    let files = [
        (
            "calc.py",
            "from helpers import plus\ndef add(a, b):\n    return plus(a, b)\n",
        ),
        ("helpers.py", "def plus(a, b):\n    return a + b\n"),
        ("util.py", "def greet():\n    return 'hello'\n"),
    ];
    let mut body =
        String::from("cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n");
    for (path, content) in files {
        body.push_str(&format!("cat > {path} <<'EOF'\n{content}EOF\n"));
    }
    body.push_str("echo \"the tests pass\" > \"$ORBIT_AGENT_DIR/done.md\"\n");
    let agent = repo.agent("worker", &body);
    let dir = repo.init_loop(
        &agent,
        &["bash probe.sh", "python3 test_calc.py"],
        &[
            "--protect",
            "test_*.py",
            "--protect",
            "probe.sh",
            "--holdout",
            "python3 -c 'import util; assert util.greet() == \"hello\"'",
        ],
    );
    let cfg = orbit::config::LoopConfig::load(&dir.join("loop.toml")).unwrap();
    assert_eq!(cfg.check_jobs, 0, "the default check-jobs");
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "the loop reaches DONE");
    let v = adequacy(&repo, &[]);
    let calc = results(&v, "hunks", "calc.py");
    assert!(calc.iter().all(|h| h["result"] == "needed"), "{v:#}");
    // The added file the code imports, reverted whole: the checks never reach their tests.
    let helpers = results(&v, "hunks", "helpers.py");
    assert_eq!(helpers.len(), 1, "{v:#}");
    assert_eq!(helpers[0]["kind"], "added", "{v:#}");
    assert_eq!(helpers[0]["result"], "needed", "{v:#}");
    assert_eq!(helpers[0]["build_failure"], true, "{v:#}");
    // greet's change is needed by the holdout alone.
    let util = results(&v, "hunks", "util.py");
    assert_eq!(util[0]["result"], "needed", "{v:#}");
    assert_eq!(util[0]["check"], "holdout-1", "the holdout's check: {v:#}");
    let out = repo.orbit(&["adequacy", "--budget", "10m"]);
    assert!(
        text(&out).contains("helpers.py (added file, whole)")
            && text(&out).contains("a build failure)"),
        "{}",
        text(&out)
    );
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        assert!(
            overlap.is_file(),
            "two units of the measure ran at once (check-jobs 0: the CPUs)"
        );
    }
}

/// calc.py as a hostile agent leaves it: right, and, whenever it is imported, trying to
/// write into the user's repository (found through git), swallowing the refusal.
const HOSTILE_CALC: &str = r#"import os, subprocess
def _reach_out():
    try:
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                                capture_output=True, text=True).stdout.strip()
        with open(os.path.join(os.path.dirname(common), "into-repo.txt"), "a") as f:
            f.write("pwned\n")
    except OSError:
        pass
_reach_out()
def add(a, b):
    return a + b
"#;

/// Adequacy runs the agent's code many times: under the loop's sandbox, as its checks ran,
/// that code cannot write into the user's repository; a loop without the sandbox reruns
/// it as it ran (the same code then does write there, which proves the attack is made).
#[test]
fn the_code_adequacy_runs_is_held_in_the_loops_sandbox() {
    if !crate::support::present_or_skipped(
        crate::support::bwrap_available(),
        "ORBIT_REQUIRE_BWRAP",
        "bubblewrap",
    ) {
        return;
    }
    for sandbox in ["none", "bwrap"] {
        let repo = Repo::new();
        project(&repo);
        let mut body =
            String::from("cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n");
        body.push_str(&format!("cat > calc.py <<'EOF'\n{HOSTILE_CALC}EOF\n"));
        body.push_str("echo \"the tests pass\" > \"$ORBIT_AGENT_DIR/done.md\"\n");
        let agent = repo.agent("worker", &body);
        let dir = repo.init_loop(
            &agent,
            &["python3 test_calc.py"],
            &["--protect", "test_*.py", "--sandbox", sandbox],
        );
        assert_code(&repo.run_loop(&dir, &[], &[]), 0, "the loop reaches DONE");
        let planted = repo.join("into-repo.txt");
        let _ = std::fs::remove_file(&planted);
        let v = adequacy(&repo, &[]);
        assert_eq!(v["hunks_needed"], 1, "{v:#}");
        if sandbox == "none" {
            assert!(
                planted.is_file(),
                "without the sandbox the code reached the repository"
            );
        } else {
            assert!(
                !planted.exists(),
                "under the sandbox the code wrote into the repository"
            );
        }
    }
}

/// The project of the gate's tests: `add` is wrong; its test is protected, and a new test
/// goes beside it (tests/test_*.py, each run by the protected run_tests.sh).
fn gate_project(repo: &Repo) {
    repo.write("calc.py", "def add(a, b):\n    return 0\n");
    repo.write(
        "tests/test_calc.py",
        "from calc import add\nassert add(2, 3) == 5, add(2, 3)\nassert add(-1, 1) == 0\n",
    );
    repo.write(
        "run_tests.sh",
        "for t in tests/test_*.py; do PYTHONPATH=. python3 \"$t\" || exit 1; done\necho ok\n",
    );
    repo.git(&["add", "."]);
    repo.git(&["commit", "-qm", "the project"]);
}

/// The fix whose early return no test pins: its mutants survive the checks.
const UNPINNED_FIX: &str = "cat > calc.py <<'EOF'\ndef add(a, b):\n    if a > 100:\n        return a\n    return a + b\nEOF\n";

/// Why the loop's adequacy record is not the one of `head`: the record's commit and tree
/// against the head's, what differs between them, and the end of runner.log.
fn record_mismatch(repo: &Repo, dir: &Path, head: &str) -> String {
    let json = std::fs::read_to_string(dir.join("adequacy.json"))
        .unwrap_or_else(|e| format!("(adequacy.json: {e})"));
    let v: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
    // git's answer or its complaint: this runs inside a failing assertion's message.
    let git = |args: &[&str]| {
        crate::support::command("git")
            .arg("-C")
            .arg(repo.path())
            .args(args)
            .output()
            .map(|o| text(&o))
            .unwrap_or_else(|e| e.to_string())
    };
    let tree = |r: &str| git(&["rev-parse", &format!("{r}^{{tree}}")]);
    let commit = v["commit"].as_str().unwrap_or("");
    let diff = git(&["diff", "--stat", commit, head]);
    let log = std::fs::read_to_string(dir.join("runner.log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(30).collect();
    format!(
        "record commit {commit} tree {}; head tree {}; diff:\n{diff}\nadequacy.json: {}\nrunner.log (last lines, newest first):\n{}",
        v["tree"],
        tree(head).trim(),
        json.chars().take(400).collect::<String>(),
        tail.join("\n")
    )
}

/// Each iteration's adequacy.log (orbit adequacy's own words), for a failing assertion: a
/// measure that did not run says why only there.
fn adequacy_logs(dir: &Path) -> String {
    let mut logs: Vec<_> = std::fs::read_dir(dir.join("iterations"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("adequacy.log"))
        .filter(|p| p.is_file())
        .collect();
    logs.sort();
    logs.iter()
        .map(|p| {
            let t = std::fs::read_to_string(p).unwrap_or_default();
            let tail: Vec<&str> = t.lines().rev().take(15).collect();
            format!(
                "--- {} (last lines, newest first)\n{}",
                p.display(),
                tail.join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The loop of `agent` on the gate's project, rendered again with `adequacy = "gate"` by
/// `orbit` (the binary the loop pins); without the sandbox unless `extra` names one or
/// `default_sandbox` leaves it to orbit init's default.
fn gate_loop(repo: &Repo, agent: &Path, orbit: &Path, extra: &[&str]) -> PathBuf {
    gate_loop_in(repo, agent, orbit, false, extra)
}

/// [`gate_loop`], with orbit init's own default sandbox when `default_sandbox`.
fn gate_loop_in(
    repo: &Repo,
    agent: &Path,
    orbit: &Path,
    default_sandbox: bool,
    extra: &[&str],
) -> PathBuf {
    let exec = agent.display().to_string();
    let mut args = vec![
        "init",
        "test goal",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "bash run_tests.sh",
        "--protect",
        "tests/test_calc.py",
        "--protect",
        "run_tests.sh",
    ];
    if !default_sandbox && !extra.contains(&"--sandbox") {
        args.extend_from_slice(&["--sandbox", "none"]);
    }
    args.extend_from_slice(extra);
    let by = |args: &[&str]| {
        let mut cmd = command(orbit);
        cmd.args(args)
            .current_dir(repo.path())
            .env("PATH", repo.path_env());
        run_bounded(cmd, Duration::from_secs(120))
    };
    assert_code(&by(&args), 0, "orbit init");
    let dir = repo.join(".orbit/test-goal");
    let toml = std::fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(
        toml.contains("adequacy = \"report\""),
        "the default: {toml}"
    );
    std::fs::write(
        dir.join("loop.toml"),
        toml.replace("adequacy = \"report\"", "adequacy = \"gate\"")
            .replace("adequacy-budget = \"0\"", "adequacy-budget = \"10m\""),
    )
    .unwrap();
    let d = dir.display().to_string();
    assert_code(
        &by(&["init", "--force", "--dir", &d]),
        0,
        "orbit init --force",
    );
    dir
}

#[test]
fn gate_mode_turns_a_surviving_mutant_into_feedback_and_the_next_iteration_fixes_it() {
    let repo = Repo::new();
    gate_project(&repo);
    let seen = repo.bin.path().join("prompts");
    std::fs::create_dir_all(&seen).unwrap();
    // Iteration 1 claims DONE with the unpinned fix; from iteration 2 on, when the prompt
    // names a survivor, it adds a test that needs the early return and claims again.
    let body = format!(
        "cat > {seen}/prompt.$ORBIT_ITERATION.$ORBIT_PHASE.md\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n{UNPINNED_FIX}\
         if grep -q 'survived every check' {seen}/prompt.$ORBIT_ITERATION.$ORBIT_PHASE.md; then\n\
         printf 'from calc import add\\nassert add(150, 1) == 150\\nassert add(100, 1) == 101\\nassert add(101, 1) == 101\\n' > tests/test_big.py\nfi\n\
         echo \"the tests pass\" > \"$ORBIT_AGENT_DIR/done.md\"\n",
        seen = seen.display()
    );
    let agent = repo.agent("worker", &body);
    let dir = gate_loop(&repo, &agent, &orbit_bin(), &["--max-iterations", "3"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(
        &out,
        0,
        &format!(
            "DONE once a check needs the early return\n{}",
            adequacy_logs(&dir)
        ),
    );
    // Iteration 1's claim was rejected by the gate, naming the survivors.
    let fb = std::fs::read_to_string(dir.join("iterations/000001/feedback.txt")).unwrap();
    assert!(
        fb.contains("calc.py:2 comparison-loosened: if a >= 100:"),
        "{fb}"
    );
    assert!(fb.contains("calc.py:3 return-default"), "{fb}");
    assert!(
        fb.contains("make a check need it") || fb.contains("Make a check fail"),
        "{fb}"
    );
    let prompt2 = std::fs::read_to_string(seen.join("prompt.2.work.md")).unwrap();
    assert!(
        prompt2.contains("calc.py:2 comparison-loosened"),
        "the feedback reached the agent: {prompt2}"
    );
    // The gate measured twice: a reject, then every mutant killed; DONE at iteration 2.
    let measured = crate::support::events_named(&dir, "adequacy_measured");
    assert_eq!(measured.len(), 2, "{measured:?}");
    let f = |i: usize, k: &str| measured[i].value[k].clone();
    assert_eq!(f(0, "mode"), "gate");
    assert_ne!(f(0, "mutants_killed"), f(0, "mutants_tried"));
    assert_eq!(f(1, "mutants_killed"), f(1, "mutants_tried"));
    assert_eq!(f(1, "hunks_needed"), f(1, "hunks_tried"));
    // The envelope carries the figures and the details' digest, and still verifies.
    let env = orbit::envelope::parse(&std::fs::read(dir.join("envelope.json")).unwrap()).unwrap();
    let a = env.adequacy.expect("the envelope's adequacy member");
    assert_eq!(a.mutants_killed, a.mutants_tried);
    assert!(a.mutants_tried >= 5, "{a:?}");
    assert_eq!(a.details_sha256, f(1, "details_sha256").as_str().unwrap());
    assert_code(&repo.orbit(&["verify"]), 0, "orbit verify");
    // The gate's record is the DONE's: the report and the audit read it.
    let head = workspace_head(&repo, &dir);
    let rec = orbit::adequacy::Record::of_head(&dir, repo.path(), &head).unwrap_or_else(|| {
        panic!(
            "the record of {head}: {}",
            record_mismatch(&repo, &dir, &head)
        )
    });
    assert_eq!(rec.details_sha256, a.details_sha256);
    let md = text(&repo.orbit(&["report"]));
    assert!(
        md.contains("- adequacy: the checks need 1 of 1 changed hunks;"),
        "{md}"
    );
    // The test file the agent added is left out of the hunks, and said.
    assert!(
        rec.details["left_out"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["file"] == "tests/test_big.py"),
        "{:#}",
        rec.details
    );
}

/// The gate under orbit init's default sandbox (auto: bubblewrap here): the claim is
/// measured, its survivors become the agent's feedback, the next iteration adds the test
/// that needs them and the loop reaches DONE; and the code the measure runs stays in the
/// loop's sandbox. The agent adds a test that, run in one of the measure's checkouts,
/// writes into the user's repository and the loop directory: the same loop without the
/// sandbox shows the attack made (both files written by the measure's runs).
#[test]
fn gate_mode_under_the_default_sandbox_measures_in_it_and_the_next_iteration_fixes_the_survivor() {
    if !crate::support::present_or_skipped(
        crate::support::bwrap_available(),
        "ORBIT_REQUIRE_BWRAP",
        "bubblewrap",
    ) {
        return;
    }
    for default_sandbox in [false, true] {
        let repo = Repo::new();
        gate_project(&repo);
        let dir_of = repo.join(".orbit/test-goal");
        let into_repo = repo.join("into-repo.txt");
        let into_loop = dir_of.join("into-loop.txt");
        let probe = format!(
            "import os\nif 'orbit-adequacy-' in os.getcwd():\n    for p in ({:?}, {:?}):\n        try:\n            with open(p, 'a') as f:\n                f.write(os.getcwd() + '\\n')\n        except OSError:\n            pass\n",
            into_repo.display().to_string(),
            into_loop.display().to_string(),
        );
        let body = format!(
            "prompt=$(cat)\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n{UNPINNED_FIX}\
             cat > tests/test_probe.py <<'EOF'\n{probe}EOF\n\
             if printf '%s' \"$prompt\" | grep -q 'survived every check'; then\n\
             printf 'from calc import add\\nassert add(150, 1) == 150\\nassert add(100, 1) == 101\\nassert add(101, 1) == 101\\n' > tests/test_big.py\nfi\n\
             echo \"the tests pass\" > \"$ORBIT_AGENT_DIR/done.md\"\n"
        );
        let agent = repo.agent("worker", &body);
        let dir = gate_loop_in(
            &repo,
            &agent,
            &orbit_bin(),
            default_sandbox,
            &["--max-iterations", "3"],
        );
        let toml = std::fs::read_to_string(dir.join("loop.toml")).unwrap();
        let sandbox = if default_sandbox { "auto" } else { "none" };
        assert!(toml.contains(&format!("sandbox = \"{sandbox}\"")), "{toml}");
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 0, "DONE once a check needs the early return");
        let fb = std::fs::read_to_string(dir.join("iterations/000001/feedback.txt"))
            .unwrap_or_else(|e| panic!("no feedback ({e}) ({sandbox}): {}", text(&out)));
        assert!(
            fb.contains("calc.py:2 comparison-loosened: if a >= 100:"),
            "{sandbox}: {fb}"
        );
        // The feedback reached the agent: its test of the early return is in the DONE.
        let done = repo.git(&["show", "orbit/test-goal:tests/test_big.py"]);
        assert!(done.contains("add(150, 1)"), "{done}");
        let measured = crate::support::events_named(&dir, "adequacy_measured");
        assert_eq!(measured.len(), 2, "{sandbox}: {measured:?}");
        let f = |i: usize, k: &str| measured[i].value[k].clone();
        assert_eq!(f(0, "mode"), "gate");
        assert_ne!(f(0, "mutants_killed"), f(0, "mutants_tried"), "{sandbox}");
        assert_eq!(f(1, "mutants_killed"), f(1, "mutants_tried"), "{sandbox}");
        let reached = |p: &Path| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .contains("orbit-adequacy-")
        };
        if default_sandbox {
            let log = std::fs::read_to_string(dir.join("runner.log")).unwrap();
            assert!(
                log.contains("sandbox: every agent and check runs under bubblewrap"),
                "the loop ran under bubblewrap: {log}"
            );
            assert!(
                !into_repo.exists() && !into_loop.exists(),
                "under the sandbox the measure's code wrote outside its checkout"
            );
        } else {
            assert!(
                reached(&into_repo) && reached(&into_loop),
                "without the sandbox the measure's code wrote into the repository and the loop directory"
            );
        }
    }
}

/// A fake orbit that says all is well and leaves a mark where it ran.
fn fake_orbit(at: &Path, mark: &Path) {
    std::fs::write(at, format!("#!/bin/sh\ntouch {}\nexit 0\n", mark.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn gate_mode_refuses_an_orbit_swapped_at_its_pinned_path_or_planted_on_path() {
    let repo = Repo::new();
    gate_project(&repo);
    // The loop pins a copy of orbit the agent can write to, as a user's ~/.cargo/bin/orbit
    // is to an agent without the sandbox.
    let own = tempfile::tempdir().unwrap();
    let pinned = own.path().join("orbit");
    std::fs::copy(orbit_bin(), &pinned).unwrap();
    let mark = own.path().join("fake-ran");
    let body = format!(
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n{UNPINNED_FIX}\
         printf '#!/bin/sh\\ntouch {mark}\\nexit 0\\n' > {pinned}\nchmod 755 {pinned}\n\
         cp {pinned} {bin}/orbit\n\
         echo \"the tests pass\" > \"$ORBIT_AGENT_DIR/done.md\"\n",
        mark = mark.display(),
        pinned = pinned.display(),
        bin = repo.bin.path().display(),
    );
    let agent = repo.agent("worker", &body);
    let dir = gate_loop(&repo, &agent, &pinned, &["--max-iterations", "1"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 16, "no DONE: the gate could not measure the claim");
    // The attack was made: the pinned path and PATH's first orbit are the fake.
    assert!(
        std::fs::read_to_string(&pinned)
            .unwrap()
            .contains("fake-ran")
    );
    assert!(repo.bin.path().join("orbit").is_file());
    assert!(!mark.exists(), "the fake orbit never ran");
    let log = std::fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("is not the one pinned at init"),
        "the claim was refused for the swapped binary: {log}"
    );
    assert!(!dir.join("envelope.json").exists());
}

#[test]
fn gate_mode_stops_an_agent_that_rewrites_the_orbit_pin() {
    let repo = Repo::new();
    gate_project(&repo);
    let own = tempfile::tempdir().unwrap();
    let fake = own.path().join("orbit");
    let mark = own.path().join("fake-ran");
    fake_orbit(&fake, &mark);
    let sha = orbit::fsx::sha256_hex(&std::fs::read(&fake).unwrap());
    let body = format!(
        "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n{UNPINNED_FIX}\
         printf '%s  %s\\n' {sha} {fake} > \"{orbit_dir}/test-goal/orbit.sha256\"\n\
         echo \"the tests pass\" > \"$ORBIT_AGENT_DIR/done.md\"\n",
        fake = fake.display(),
        orbit_dir = crate::support::ORBIT_DIR,
    );
    let agent = repo.agent("worker", &body);
    let dir = gate_loop(&repo, &agent, &orbit_bin(), &["--max-iterations", "2"]);
    let out = repo.run_loop(&dir, &[], &[]);
    // The attack was made: the pin names the fake.
    let pin = std::fs::read_to_string(dir.join("orbit.sha256")).unwrap();
    assert!(pin.contains(&sha), "{pin}");
    assert_code(
        &out,
        3,
        "an integrity stop: the pin is one of the loop's pinned files",
    );
    assert!(!mark.exists(), "the fake orbit never ran");
    assert!(!dir.join("envelope.json").exists());
}
