//! lib.sh, the code a loop's scripts share, rendered once per loop directory: what it is
//! rendered from is what the scripts ran before (real bash compares the definitions), and a
//! script evaluates the very bytes whose sha256 it checked.

use std::fs;
use std::path::Path;

use crate::support::{Repo, assert_ok, command, text};
use orbit::config::{LoopConfig, Sandbox, SandboxNetwork};
use orbit::render::{self, FILES, STATIC_PARTS, View};

/// The bash that prints every function (`declare -f`) and every variable (`declare -p`)
/// defined once `setup` ran, but bash's own (BASH*, RANDOM, LINENO, ...), which differ from
/// one run to the next, and the loader's.
const DEFINED: &str = r#"
declare -f
declare -p | grep -Ev '^declare -[-a-zA-Z]* (BASH[A-Z_]*|_|RANDOM|SRANDOM|SECONDS|EPOCHREALTIME|EPOCHSECONDS|LINENO|PIPESTATUS|FUNCNAME|GROUPS|PPID|SHLVL|SHELLOPTS|OLDPWD|PWD|COLUMNS|LINES|REPLY)='
"#;

/// What bash defines after `setup` (run with `file` as $1), by [`DEFINED`].
fn defined(work: &Path, setup: &str, file: &str) -> String {
    let out = command("bash")
        .arg("-c")
        .arg(format!("{setup}\n{DEFINED}"))
        .arg("defined")
        .arg(file)
        .current_dir(work)
        .env("ORBIT_SUBREAPER", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{setup}\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first line where `a` and `b` differ, for a readable failure.
fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n  before: {x}\n  after:  {y}", i + 1);
        }
    }
    format!(
        "one is longer ({} and {} lines)",
        a.lines().count(),
        b.lines().count()
    )
}

#[test]
fn stripping_comments_and_indentation_leaves_every_part_and_the_prelude_as_bash_reads_it() {
    let work = tempfile::tempdir().unwrap();
    let prelude = orbit::contract::bash::prelude();
    fs::write(work.path().join("prelude.sh"), prelude).unwrap();
    let mut parts: Vec<(&str, String)> = vec![("the contract prelude", prelude.to_string())];
    for (name, part) in STATIC_PARTS {
        parts.push((
            name,
            render::split_entry(&render::place_perl(part)).0.to_string(),
        ));
    }
    let mut stripped_bytes = 0;
    let mut original_bytes = 0;
    for (name, original) in parts {
        let stripped = orbit::bashstrip::strip(&original);
        assert!(stripped.len() < original.len(), "{name}: nothing stripped");
        original_bytes += original.len();
        stripped_bytes += stripped.len();
        // The same path for both, so that nothing differs but the text.
        let file = work.path().join("part.sh");
        let setup = if name == "the contract prelude" {
            "source \"$1\""
        } else {
            "source ./prelude.sh; source \"$1\""
        };
        fs::write(&file, &original).unwrap();
        let before = defined(work.path(), setup, "part.sh");
        fs::write(&file, &stripped).unwrap();
        let after = defined(work.path(), setup, "part.sh");
        assert!(
            before.contains("() \n{") || name == "the contract prelude",
            "{name}: no function seen: the test proves nothing\n{before}"
        );
        assert!(
            before == after,
            "{name}: bash reads the stripped text differently: {}",
            first_difference(&before, &after)
        );
    }
    assert!(
        stripped_bytes * 10 < original_bytes * 8,
        "{stripped_bytes} of {original_bytes}"
    );
}

/// Each loop shape whose scripts hold different parts, as a view (the second with holdout
/// checks and setup commands).
fn shapes() -> Vec<View> {
    let goal = orbit::goal::GoalText::new("goal".into()).unwrap();
    let mut out = Vec::new();
    for (engine, candidates, sandbox, net) in [
        (
            orbit::contract::Engine::Claude,
            1,
            Sandbox::Auto,
            SandboxNetwork::Allowlist,
        ),
        (
            orbit::contract::Engine::Codex,
            3,
            Sandbox::None,
            SandboxNetwork::Open,
        ),
    ] {
        let cfg = LoopConfig {
            engine,
            candidates,
            sandbox,
            sandbox_network: net,
            holdout: if candidates > 1 {
                vec!["true".into()]
            } else {
                Vec::new()
            },
            setup: if candidates > 1 {
                vec!["true".into()]
            } else {
                Vec::new()
            },
            ..LoopConfig::default()
        };
        out.push(View::new(&cfg, &goal, ".orbit/loop"));
    }
    out
}

#[test]
fn each_script_defines_from_lib_sh_exactly_what_it_held_before() {
    let work = tempfile::tempdir().unwrap();
    fs::write(
        work.path().join("prelude.sh"),
        orbit::contract::bash::prelude(),
    )
    .unwrap();
    for view in shapes() {
        let layout = render::library_layout(&view);
        fs::write(work.path().join("lib.sh"), &layout.text).unwrap();
        for f in FILES.iter().filter(|f| !f.parts.is_empty()) {
            // As the script held them: the prelude, then its parts in order (without the
            // part it still holds itself, and without its entry), its settings before them.
            let mut old = String::from("source ./prelude.sh\n");
            // And the loop's settings, which the script held itself before lib.sh did.
            if render::SETTINGS_USERS.contains(&f.name) {
                let settings = render::settings(&render::environment(), &view).unwrap();
                fs::write(work.path().join("settings.sh"), settings).unwrap();
                old = format!("source ./settings.sh\n{old}");
            }
            for (i, part) in f.parts_for(&view).into_iter().enumerate() {
                if render::SCRIPT_OWN_PARTS
                    .iter()
                    .any(|p| std::ptr::eq(*p, part))
                {
                    continue;
                }
                let file = format!("{}-{i}.sh", f.name);
                // (Its perl programs as lib.sh holds them: without their comments.)
                fs::write(
                    work.path().join(&file),
                    render::split_entry(&render::place_perl_stripped(part)).0,
                )
                .unwrap();
                old.push_str(&format!("source ./{file}\n"));
            }
            let before = defined(work.path(), &old, "");
            // The script's own loader, as it ends the script: its sections of lib.sh, its
            // own variables and functions then taken out.
            let loader = render::loader(f.name, &layout);
            fs::write(work.path().join("loader.sh"), &loader).unwrap();
            let new = "source ./loader.sh\nunset -f orbit_lib_sha256_v orbit_lib_read\nunset ORBIT_LIB_SHA256 ORBIT_LIB_READ_SHA256 ORBIT_LIB_BYTES ORBIT_LIB_RANGES ORBIT_LIB_TEXT ORBIT_LIB_CODE ORBIT_LIB_WHY ORBIT_LIB_DIR";
            let after = defined(work.path(), new, "");
            assert!(before.contains("main () \n{"), "{}: no main", f.name);
            // The functions: the same text.
            let funcs = |s: &str| s.split("\ndeclare -").next().unwrap().to_string();
            assert!(
                funcs(&before) == funcs(&after),
                "{} ({} loop): the functions differ: {}",
                f.name,
                view.engine,
                first_difference(&funcs(&before), &funcs(&after))
            );
            assert!(
                before == after,
                "{} ({} loop): the variables differ: {}",
                f.name,
                view.engine,
                first_difference(&before, &after)
            );
        }
    }
}

/// The loader hashes the bytes it read and evaluates those same bytes: lib.sh rewritten
/// between the read and the eval (by the hash tool itself, which runs between them) changes
/// nothing of what runs. The rewritten lib.sh would write a marker; verify.sh still passes
/// with the library it checked, and the marker never appears.
#[test]
fn the_loader_runs_the_bytes_it_hashed_even_when_lib_sh_is_swapped_after_the_read() {
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init",
        "swap",
        "--engine",
        "custom",
        "--exec",
        "true",
        "--verify",
        "true",
        "--sandbox",
        "none",
    ]);
    assert_ok(&out, "orbit init");
    let dir = repo.join(".orbit/swap");
    let marker = repo.join("swapped-lib-ran");
    let hostile = format!("touch '{}'\n", marker.display());
    fs::write(repo.join("hostile-lib.sh"), &hostile).unwrap();
    // A sha256sum that answers for what it was given, then, asked for the bytes the script
    // read (through a pipe: the file itself comes on its input as the file), swaps lib.sh.
    let shim = repo.join("shim");
    fs::create_dir(&shim).unwrap();
    let real = String::from_utf8(
        command("bash")
            .args(["-c", "command -v sha256sum"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    fs::write(
        shim.join("sha256sum"),
        format!(
            "#!/bin/sh\nif [ -p /dev/stdin ]; then '{r}' \"$@\"; cp '{h}' '{l}'; else '{r}' \"$@\"; fi\n",
            r = real.trim(),
            h = repo.join("hostile-lib.sh").display(),
            l = dir.join("lib.sh").display()
        ),
    )
    .unwrap();
    command("chmod")
        .arg("+x")
        .arg(shim.join("sha256sum"))
        .status()
        .unwrap();
    let path = format!("{}:{}", shim.display(), repo.path_env());
    let out = command("bash")
        .arg(dir.join("verify.sh"))
        .current_dir(repo.path())
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(
        fs::read_to_string(dir.join("lib.sh")).unwrap(),
        hostile,
        "the swap was not made: the test proves nothing\n{}",
        text(&out)
    );
    assert!(!marker.exists(), "the swapped lib.sh ran\n{}", text(&out));
    assert_ok(&out, "verify.sh with the library it checked");
    assert!(text(&out).contains("1 passed, 0 failed"), "{}", text(&out));
    // Run again, the swapped lib.sh is refused.
    let out = command("bash")
        .arg(dir.join("verify.sh"))
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!marker.exists(), "the swapped lib.sh ran\n{}", text(&out));
    // Swapped after the file's check and before the read (by the hash tool asked for the
    // file): what was read is not what was checked, and is refused.
    fs::copy(dir.join(".pins/lib.sh"), dir.join("lib.sh")).unwrap();
    fs::write(
        shim.join("sha256sum"),
        format!(
            "#!/bin/sh\nif [ -p /dev/stdin ]; then '{r}' \"$@\"; else '{r}' \"$@\"; cp '{h}' '{l}'; fi\n",
            r = real.trim(),
            h = repo.join("hostile-lib.sh").display(),
            l = dir.join("lib.sh").display()
        ),
    )
    .unwrap();
    let out = command("bash")
        .arg(dir.join("verify.sh"))
        .current_dir(repo.path())
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(
        fs::read_to_string(dir.join("lib.sh")).unwrap(),
        hostile,
        "the swap was not made: the test proves nothing\n{}",
        text(&out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("changed while it was read"),
        "{}",
        text(&out)
    );
    assert!(!marker.exists(), "the swapped lib.sh ran\n{}", text(&out));
}

/// The loader reads the bytes a script uses with bash's own read, from one open of a regular
/// file, after the file's sha256 is checked: a lib.sh with one byte more (what a growing file
/// is when it is read) is refused; a FIFO named lib.sh is refused without a wait for a
/// writer; a NUL byte put into the bytes verify.sh reads (bash's read drops it, and would
/// read the pinned text around it) is refused as a changed file; and under a file-size limit
/// of one block the library still loads (nothing is written to read or hash it).
#[test]
fn the_loader_refuses_a_grown_lib_sh_a_fifo_or_a_nul_byte_and_loads_under_a_file_size_limit() {
    let repo = Repo::new();
    let out = repo.orbit(&[
        "init",
        "odd",
        "--engine",
        "custom",
        "--exec",
        "true",
        "--verify",
        "true",
        "--sandbox",
        "none",
    ]);
    assert_ok(&out, "orbit init");
    let dir = repo.join(".orbit/odd");
    let lib = dir.join("lib.sh");
    let pinned = fs::read(dir.join(".pins/lib.sh")).unwrap();
    let verify = |shell: Option<&str>| {
        let mut cmd = command("bash");
        match shell {
            Some(s) => cmd.args(["-c", s, "_"]).arg(dir.join("verify.sh")),
            None => cmd.arg(dir.join("verify.sh")),
        };
        cmd.current_dir(repo.path()).env("PATH", repo.path_env());
        crate::support::try_bounded(cmd, std::time::Duration::from_secs(30))
            .unwrap_or_else(|hung| panic!("hung: verify.sh\n{hung}"))
    };
    let refused = |out: &std::process::Output, why: &str| {
        assert_eq!(out.status.code(), Some(1), "{}", text(out));
        assert!(text(out).contains(why), "{why}\n{}", text(out));
        assert!(text(out).contains("0 passed, 1 failed"), "{}", text(out));
    };
    // One byte more than the pinned file, past the bytes verify.sh reads.
    let mut grown = pinned.clone();
    grown.push(b'\n');
    fs::write(&lib, &grown).unwrap();
    refused(&verify(None), "lib.sh changed (sha256 ");
    // A FIFO: refused at once, never waited on.
    fs::remove_file(&lib).unwrap();
    assert!(command("mkfifo").arg(&lib).status().unwrap().success());
    refused(&verify(None), "is missing or is not a regular file");
    fs::remove_file(&lib).unwrap();
    // A NUL byte inside the bytes verify.sh reads: what bash reads there is the pinned text,
    // and it is refused all the same.
    let reads: usize = {
        let script = fs::read_to_string(dir.join("verify.sh")).unwrap();
        let from = script.find("\nORBIT_LIB_BYTES=").unwrap() + "\nORBIT_LIB_BYTES=".len();
        script[from..from + script[from..].find('\n').unwrap()]
            .parse()
            .unwrap()
    };
    let at = pinned[..reads / 2]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    let mut nul = pinned[..at].to_vec();
    nul.push(0);
    nul.extend_from_slice(&pinned[at..]);
    fs::write(&lib, &nul).unwrap();
    refused(&verify(None), "lib.sh changed (sha256 ");
    // A file-size limit of one block: the library loads, the check passes.
    fs::write(&lib, &pinned).unwrap();
    let out = verify(Some(r#"trap '' XFSZ; ulimit -f 1; exec bash "$1""#));
    assert_ok(&out, "verify.sh under ulimit -f 1");
    assert!(text(&out).contains("1 passed, 0 failed"), "{}", text(&out));
}

/// lib.sh holds only what the loop's settings, as rendered, can use: a plain loop (no
/// holdout checks, no setup commands, claude) holds neither the holdout checks' runs nor
/// `run_hidden`, nor the setup's runs, nor the pricing of tokens, only their stand-ins; a
/// loop with holdout checks and setup commands (codex, whose CLI reports tokens) holds them.
#[test]
fn lib_sh_holds_the_holdout_the_setup_and_the_token_pricing_only_for_a_loop_that_uses_them() {
    let views = shapes();
    let (plain, full) = (render::library(&views[0]), render::library(&views[1]));
    for (text, name) in [
        (render::LIB_RUNNER_HOLDOUT, "lib/runner/holdout.sh"),
        (render::LIB_HIDDEN, "lib/hidden.sh"),
        (render::LIB_RUNNER_SETUP_RUN, "lib/runner/setup_run.sh"),
        (render::LIB_ENGINE_TOKENS, "lib/engine-tokens.sh"),
    ] {
        let part = render::library_part(text);
        assert!(!plain.contains(&part), "a plain loop holds {name}");
        assert!(full.contains(&part), "a loop that uses it lacks {name}");
    }
    for (text, name) in [
        (render::LIB_NO_HOLDOUT, "lib/no-holdout.sh"),
        (render::LIB_NO_SETUP, "lib/no-setup.sh"),
    ] {
        let part = render::library_part(text);
        assert!(
            plain.contains(&part),
            "a plain loop lacks the stand-in {name}"
        );
        assert!(
            !full.contains(&part),
            "a loop that uses it holds the stand-in {name}"
        );
    }
}
