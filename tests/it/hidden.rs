//! What an agent hides from git (contract 3 and 7): an ignore rule it writes decides nothing
//! of a protected set, and its folder `.orbit-agent` made anything but a directory (a link,
//! a file, a FIFO) never enters a snapshot or a commit and is named in the iteration's
//! record.

use crate::support::*;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// A repository with a protected test directory, committed.
fn with_tests(repo: &Repo) {
    repo.write(
        "tests/test_parser.py",
        "def test_parse():\n    assert False\n",
    );
    repo.git(&["add", "tests"]);
    repo.git(&["commit", "-q", "-m", "tests"]);
}

/// The paths of the loop branch's tip.
fn branch_paths(repo: &Repo) -> Vec<String> {
    repo.git(&["ls-tree", "-r", "--name-only", "orbit/test-goal"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// The `file` field of every integrity_fail event.
fn integrity_files(dir: &Path) -> Vec<String> {
    events_named(dir, "integrity_fail")
        .into_iter()
        .map(|e| e.value["file"].as_str().unwrap_or_default().to_string())
        .collect()
}

// ---- an ignore rule the agent writes (contract 7: a set is every file under its glob,
// ---- ignored or not)

#[test]
fn a_conftest_the_agent_adds_and_hides_with_a_gitignore_line_is_reward_hack() {
    let repo = Repo::new();
    with_tests(&repo);
    let out_dir = tempfile::tempdir().unwrap();
    let mark = out_dir.path().join("hidden");
    let agent = repo.agent(
        "hider",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
printf 'def pytest_collection_modifyitems(items):\n    items.clear()\n' > tests/conftest.py
echo 'tests/conftest.py' >> .gitignore
git check-ignore -q tests/conftest.py && echo hidden > '{}'
echo done > work.txt
echo claimed > "$ORBIT_AGENT_DIR/done.md""#,
            mark.display()
        ),
    );
    let dir = repo.init_loop(&agent, &["test -f work.txt"], &["--protect", "tests/**"]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    // The attack was made: git ignores the new file in the protected set.
    assert!(
        mark.exists(),
        "the agent's ignore rule hides tests/conftest.py\n{}",
        text(&out)
    );
    assert!(repo.ws().join("tests/conftest.py").is_file());
    assert_code(&out, 3, "reward_hack at the iteration's trust check");
    assert_eq!(state_value(&dir, "STOP_REASON"), "reward_hack");
    let conftest = repo.ws().join("tests/conftest.py").display().to_string();
    assert!(
        integrity_files(&dir).contains(&conftest),
        "the integrity_fail event names {conftest}: {:?}",
        integrity_files(&dir)
    );
    assert!(
        text(&out).contains("tests/conftest.py"),
        "the stop names the file\n{}",
        text(&out)
    );
    assert!(!branch_paths(&repo).contains(&"tests/conftest.py".to_string()));
    // The audit and both recovers (orbit's and recover.sh) see the same set.
    let d = dir.display().to_string();
    let audit = repo.orbit(&["audit", "--json", &d]);
    let v: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let found = v["loops"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| {
            f["class"] == "REWARD_HACK"
                && f["evidence"] == "pins.sets:1"
                && f["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("added tests/conftest.py")
        });
    assert!(found, "the audit names the hidden file: {v}");
}

#[test]
fn a_check_that_writes_pycache_and_a_report_under_a_protected_directory_trips_nothing() {
    for ignores in [true, false] {
        let repo = Repo::new();
        with_tests(&repo);
        if ignores {
            // The project ignores its caches (as most do); the report is not ignored.
            repo.write(".gitignore", "__pycache__/\n");
            repo.git(&["add", ".gitignore"]);
            repo.git(&["commit", "-q", "-m", "ignore caches"]);
        }
        repo.write(
            "check.sh",
            "mkdir -p tests/__pycache__\necho pyc > tests/__pycache__/test_parser.cpython-311.pyc\necho '<testsuite/>' > tests/report.xml\ntest -f work.txt\n",
        );
        repo.git(&["add", "check.sh"]);
        repo.git(&["commit", "-q", "-m", "check"]);
        // The agent runs the check itself too, as agents do: the same artifacts, made
        // during its run.
        let agent = repo.agent(
            "worker",
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo done > work.txt
sh check.sh
test -f tests/report.xml && test -f tests/__pycache__/test_parser.cpython-311.pyc || exit 9
echo claimed > "$ORBIT_AGENT_DIR/done.md""#,
        );
        let dir = repo.init_loop(&agent, &["sh check.sh"], &["--protect", "tests/**"]);
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 0, &format!("DONE (base ignores caches: {ignores})"));
        let paths = branch_paths(&repo);
        assert!(
            !paths
                .iter()
                .any(|p| p.contains("__pycache__") || p == "tests/report.xml"),
            "no artifact committed: {paths:?}"
        );
        let (_, classes) = audit_classes(&repo, &dir);
        assert!(
            !classes.iter().any(|c| c == "REWARD_HACK"),
            "the audit agrees: {classes:?}"
        );
    }
}

/// The audit's verdict and finding classes.
fn audit_classes(repo: &Repo, dir: &Path) -> (String, Vec<String>) {
    let d = dir.display().to_string();
    let out = repo.orbit(&["audit", "--json", &d]);
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

// ---- the agent's folder, made something else (contract 3: never committed)

/// An agent that, at iteration 1, puts `what` (bash, `$F` is the folder's path) where its
/// folder was; at iteration 2 it says whether its folder came back whole.
fn replaced_folder(what: &str, kind: &str) {
    let repo = Repo::new();
    let out_dir = tempfile::tempdir().unwrap();
    let o = out_dir.path().display().to_string();
    let agent = repo.agent(
        "replacer",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
echo "step $ORBIT_ITERATION" | tr 0-9 a-j >> work.txt
F=$ORBIT_AGENT_DIR
if [ "$ORBIT_ITERATION" = 1 ]; then
  rm -rf "$F"
  {what}
  if [ -L "$F" ] || [ -f "$F" ] || [ -p "$F" ]; then echo made > '{o}/replaced'; fi
else
  [ -d "$F" ] && [ ! -L "$F" ] && [ -f "$F/goal.md" ] && echo whole > '{o}/refilled'
fi"#
        ),
    );
    let loop_dir = repo.join(".orbit/test-goal");
    let dir = repo.init_loop(&agent, &["test -f never-there"], &[]);
    assert_eq!(dir, loop_dir);
    let etc_before: Vec<_> = ["goal.md", "prompt.md", "notes.md", "verify.sh"]
        .iter()
        .map(|f| Path::new("/etc").join(f).exists())
        .collect();
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert!(
        out_dir.path().join("replaced").exists(),
        "the attack was made ({kind})\n{}",
        text(&out)
    );
    // The loop goes on: the folder is the agent's own, and nothing of it is taken.
    assert_code(&out, 10, &format!("{kind}: the loop continues"));
    let paths = branch_paths(&repo);
    assert!(
        paths.contains(&"work.txt".to_string()),
        "iteration 1 was committed: {paths:?}"
    );
    assert!(
        !paths
            .iter()
            .any(|p| p == ".orbit-agent" || p.starts_with(".orbit-agent/")),
        "{kind}: .orbit-agent is never committed: {paths:?}"
    );
    let result = read_kv(&dir.join("iterations/000001/result.env"));
    let found = result.get("AGENT_FOLDER").cloned().unwrap_or_default();
    assert!(
        found.contains(kind),
        "{kind}: result.env AGENT_FOLDER names it: {result:?}"
    );
    let pg = fs::read_to_string(dir.join("progress.md")).unwrap();
    assert!(
        pg.contains("- agent's folder: ") && pg.contains(kind),
        "{kind}: progress.md names it\n{pg}"
    );
    // The next run refills the folder (never writing through what stood there).
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 10, &format!("{kind}: iteration 2"));
    assert!(
        out_dir.path().join("refilled").exists(),
        "{kind}: the folder came back whole\n{}",
        text(&out)
    );
    let paths = branch_paths(&repo);
    assert!(
        !paths
            .iter()
            .any(|p| p == ".orbit-agent" || p.starts_with(".orbit-agent/")),
        "{kind}: {paths:?}"
    );
    let etc_after: Vec<_> = ["goal.md", "prompt.md", "notes.md", "verify.sh"]
        .iter()
        .map(|f| Path::new("/etc").join(f).exists())
        .collect();
    assert_eq!(etc_before, etc_after, "nothing written into /etc");
    assert!(dir.join("goal.md").is_file() && dir.join("run-loop.sh").is_file());
    assert_eq!(state_value(&dir, "LAST_STATUS"), "CONTINUE");
    let ws_entry = fs::symlink_metadata(repo.ws().join(".orbit-agent")).map(|m| m.file_type());
    if let Ok(t) = ws_entry {
        assert!(!t.is_fifo() && !t.is_symlink(), "{kind}: {t:?}");
    }
}

#[test]
fn an_agent_folder_replaced_by_a_symlink_to_etc_is_never_committed_and_is_recorded() {
    replaced_folder(r#"ln -s /etc "$F""#, "symlink to /etc");
}

#[test]
fn an_agent_folder_replaced_by_a_symlink_to_the_loop_directory_is_never_committed() {
    replaced_folder(r#"ln -s "@ORBIT_DIR@/test-goal" "$F""#, "symlink to ");
}

#[test]
fn an_agent_folder_replaced_by_a_regular_file_is_never_committed_and_is_recorded() {
    replaced_folder(r#"echo "$PWD" > "$F""#, "a regular file");
}

#[test]
fn an_agent_folder_replaced_by_a_fifo_is_never_committed_and_is_recorded() {
    replaced_folder(r#"mkfifo "$F""#, "a FIFO");
}

#[test]
fn an_agent_folder_made_a_file_and_unignored_by_the_agents_gitignore_is_never_committed() {
    // A .gitignore's rule wins over info/exclude's: the snapshot itself leaves the folder out.
    replaced_folder(
        r#"printf '!/.orbit-agent\n!/.orbit-agent/\n' >> .gitignore; echo "$PWD" > "$F"; ! git check-ignore -q .orbit-agent"#,
        "a regular file",
    );
}

/// The paths of a NUL-separated listing, sorted, each once.
fn listing(bytes: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = bytes
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// What the runner's and recover.sh's `protect_list` (templates/lib/protect.sh) lists of
/// `glob` in the loop's workspace, sorted.
fn bash_set(repo: &Repo, dir: &Path, glob: &str) -> Vec<String> {
    let work = tempfile::tempdir().unwrap();
    let base = fs::read_to_string(dir.join(".baseline-commit")).unwrap();
    let mut cmd = bash_with_parts(
        work.path(),
        &["protect"],
        r#"protect_list "$1" "$2" "$3" "$4""#,
    );
    cmd.arg(repo.ws())
        .arg(base.trim())
        .arg(glob)
        .arg(work.path());
    let out = run_bounded(cmd, std::time::Duration::from_secs(30));
    assert_ok(&out, "protect_list");
    listing(&out.stdout)
}

/// What git itself lists, with the work tree's own ignore files (a reference only while
/// they are the base commit's).
fn git_set(repo: &Repo, glob: &str) -> Vec<String> {
    let out = command("git")
        .arg("-C")
        .arg(repo.ws())
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
        ])
        .arg(format!(":(glob){glob}"))
        .arg(":(exclude,literal).orbit-agent")
        .output()
        .unwrap();
    assert!(out.status.success());
    listing(&out.stdout)
}

#[test]
fn the_runner_recover_sh_and_orbit_list_a_protect_set_alike_and_as_git_reads_the_base_rules() {
    let repo = Repo::new();
    // The base commit's ignore rules at three depths: plain names, anchored paths, a
    // directory rule, a negation, a name with a glob character, a CRLF line.
    repo.write(".gitignore", "*.log\n/build/\n!keep.log\n");
    repo.write(
        "tests/.gitignore",
        "__pycache__/\n/out.txt\ndata/*.tmp\r\n!data/x.tmp\n",
    );
    repo.write("tests/deep/.gitignore", "*.bin\n# a comment\n\n!ok.bin\n");
    repo.write("tests/test_a.py", "pass\n");
    repo.write("tests/deep/test_b.py", "pass\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "tests and their ignores"]);
    let agent = repo.agent(
        "idle",
        "cat >/dev/null\necho \"step $ORBIT_ITERATION\" | tr 0-9 a-j >> work.txt",
    );
    let dir = repo.init_loop(&agent, &["test -f never-there"], &["--protect", "tests/**"]);
    assert_code(&repo.run_loop(&dir, &["--once"], &[]), 10, "one iteration");
    let ws = repo.ws();
    for f in [
        "tests/__pycache__/a.pyc",
        "tests/deep/__pycache__/b.pyc",
        "tests/out.txt",
        "tests/deep/out.txt",
        "tests/run.log",
        "tests/keep.log",
        "tests/data/y.tmp",
        "tests/data/x.tmp",
        "tests/deep/data/y.tmp",
        "tests/deep/z.bin",
        "tests/deep/ok.bin",
        "tests/deep/more/w.bin",
        "tests/new_test.py",
        "build/x.py",
    ] {
        let p = ws.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "x\n").unwrap();
    }
    let orbit_set = |glob: &str| {
        listing(
            &orbit::protect::set_files(&ws, glob, &dir)
                .unwrap()
                .into_iter()
                .flat_map(|mut p| {
                    p.push(0);
                    p
                })
                .collect::<Vec<u8>>(),
        )
    };
    let mut before = Vec::new();
    for glob in ["tests/**", "**"] {
        let want = git_set(&repo, glob);
        if before.is_empty() {
            before = want.clone();
        }
        assert!(want.contains(&"tests/deep/out.txt".to_string()), "{want:?}");
        assert!(!want.contains(&"tests/out.txt".to_string()), "{want:?}");
        assert_eq!(bash_set(&repo, &dir, glob), want, "protect_list, {glob}");
        assert_eq!(orbit_set(glob), want, "orbit's set_files, {glob}");
    }
    // The agent's own ignore rules, in a file of the base and in a new one, change nothing.
    fs::write(
        ws.join(".gitignore"),
        "*.log\n/build/\n!keep.log\ntests/new_test.py\n",
    )
    .unwrap();
    // (tests/deep/more/w.bin stays out: the base's `*.bin` of tests/deep ignores it.)
    fs::write(ws.join("tests/deep/more/.gitignore"), "*\n!w.bin\n").unwrap();
    let hidden = command("git")
        .arg("-C")
        .arg(&ws)
        .args(["check-ignore", "-q", "tests/new_test.py"])
        .status()
        .unwrap();
    assert!(
        hidden.success(),
        "the agent's rule hides the new test from git"
    );
    assert!(!git_set(&repo, "tests/**").contains(&"tests/new_test.py".to_string()));
    // The set as the base's rules see it: the new ignore file joins it, nothing leaves.
    let mut want = before;
    want.push("tests/deep/more/.gitignore".into());
    want.sort();
    assert_eq!(bash_set(&repo, &dir, "tests/**"), want, "protect_list");
    assert_eq!(orbit_set("tests/**"), want, "orbit's set_files");
}
