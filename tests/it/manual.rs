//! `orbit man`: a page per subcommand, every page it names exists, each with its EXIT
//! STATUS and EXAMPLES, and each renders; `--help` shows the examples too.

use std::collections::BTreeSet;
use std::fs;
use std::time::Duration;

use clap::CommandFactory;

use crate::support::{Repo, assert_ok, command, run_bounded};

fn subcommands() -> Vec<String> {
    orbit::cli::Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .filter(|s| s != "help")
        .collect()
}

/// Every subcommand with a page, nested ones (`queue-add`) included.
fn paged_subcommands() -> Vec<String> {
    let mut out = Vec::new();
    for s in orbit::cli::Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        out.push(s.get_name().to_string());
        for n in s
            .get_subcommands()
            .filter(|n| !n.is_hide_set() && n.get_name() != "help")
        {
            out.push(format!("{}-{}", s.get_name(), n.get_name()));
        }
    }
    out
}

/// The `orbit...(1)` names a page mentions (roff writes the dash as `\-`).
fn named_pages(roff: &str) -> BTreeSet<String> {
    let text = roff.replace("\\-", "-");
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("(1)") {
        let head = &text[..i];
        let start = head
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .map_or(0, |p| p + 1);
        let name = &head[start..];
        if name.starts_with("orbit") {
            out.insert(format!("{name}.1"));
        }
    }
    out
}

#[test]
fn man_writes_a_page_per_subcommand_and_names_only_pages_it_writes() {
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let out = repo.orbit(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_ok(&out, "orbit man --dir");
    let written: BTreeSet<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut want: BTreeSet<String> = paged_subcommands()
        .iter()
        .map(|s| format!("orbit-{s}.1"))
        .collect();
    want.insert("orbit.1".into());
    assert_eq!(written, want);
    assert!(written.contains("orbit-logs.1") && written.contains("orbit-man.1"));

    let main = repo.orbit(&["man"]);
    assert_ok(&main, "orbit man");
    assert_eq!(main.stdout, fs::read(dir.path().join("orbit.1")).unwrap());

    let man_installed = command("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !man_installed {
        eprintln!("notice: man is not installed; checking the roff only");
    }
    for name in &written {
        let roff = fs::read_to_string(dir.path().join(name)).unwrap();
        for named in named_pages(&roff) {
            assert!(
                written.contains(&named),
                "{name} names {named}, not written"
            );
        }
        for section in [".SH \"EXIT STATUS\"", ".SH EXAMPLES", ".SH OPTIONS"] {
            if section == ".SH OPTIONS" && name == "orbit.1" {
                continue;
            }
            assert!(roff.contains(section), "{name} has no {section}:\n{roff}");
        }
        if man_installed {
            let mut cmd = command("man");
            cmd.arg("-l")
                .arg(dir.path().join(name))
                .env("MANWIDTH", "80")
                .env("MANPAGER", "cat")
                .env("PAGER", "cat");
            let out = run_bounded(cmd, Duration::from_secs(60));
            assert!(out.status.success(), "man -l {name}: {out:?}");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains("EXIT STATUS") && text.contains("EXAMPLES"),
                "{name}:\n{text}"
            );
            assert!(
                out.stderr.is_empty(),
                "man -l {name} warns: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // orbit-run(1) lists every exit code of the runner, with its meaning.
    let run = fs::read_to_string(dir.path().join("orbit-run.1")).unwrap();
    for code in orbit::contract::ExitCode::ALL {
        assert!(
            run.contains(&format!(".TP\n\\fB{}\\fR\n", code.code())),
            "orbit-run.1 lacks exit code {}",
            code.code()
        );
    }
    assert!(run.contains("128+n"));
    let audit = fs::read_to_string(dir.path().join("orbit-audit.1")).unwrap();
    for code in ["0", "1", "3", "2"] {
        assert!(audit.contains(&format!(".TP\n\\fB{code}\\fR\n")), "{audit}");
    }
}

#[test]
fn every_subcommands_help_shows_examples_of_it() {
    let repo = Repo::new();
    for sub in subcommands() {
        let out = repo.orbit(&[&sub, "--help"]);
        assert_ok(&out, &format!("orbit {sub} --help"));
        let text = String::from_utf8_lossy(&out.stdout);
        let examples = text
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("orbit {sub} --help has no examples:\n{text}"));
        assert!(
            examples.contains(&format!("  orbit {sub}")),
            "orbit {sub} --help:\n{text}"
        );
    }
}
