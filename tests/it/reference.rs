//! The generated reference pages of docs/ (`orbit reference PAGE`): each committed page is
//! what the binary generates now, the generator leaves out no command, flag, setting or
//! exit code, and every link of the docs reaches a file and a heading that exist.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use orbit::cli::ReferencePage;
use orbit::reference;

use crate::support::{assert_ok, command, orbit_bin, run_bounded};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What `orbit ARGS` prints on standard output.
fn orbit_stdout(args: &[&str]) -> String {
    let mut cmd = command(orbit_bin());
    cmd.args(args).current_dir(root());
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_ok(&out, &format!("orbit {}", args.join(" ")));
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn generated(page: ReferencePage) -> String {
    orbit_stdout(&["reference", &reference::name(page)])
}

#[test]
fn every_committed_reference_is_what_the_binary_generates() {
    let mut stale = Vec::new();
    for &page in reference::PAGES {
        let path = reference::path(page);
        let want = generated(page);
        let have = fs::read_to_string(root().join(&path)).unwrap_or_default();
        if have != want {
            let line = have
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| have.lines().count().min(want.lines().count()))
                + 1;
            stale.push(format!(
                "{path} differs from what `orbit reference {}` generates (first at line {line}); \
                 regenerate it at the repository root with:\n    {}",
                reference::name(page),
                reference::regenerate_command(page)
            ));
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

/// The section `## orbit SUB` of the CLI page.
fn section<'a>(page: &'a str, name: &str) -> &'a str {
    let head = format!("\n## {name}\n");
    let start = page
        .find(&head)
        .unwrap_or_else(|| panic!("docs/cli.md has no section for `{name}`"));
    let rest = &page[start + head.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The subcommands `orbit --help` lists (without `help`).
fn listed_subcommands() -> Vec<String> {
    let help = orbit_stdout(&["--help"]);
    let list = help
        .split("Commands:\n")
        .nth(1)
        .expect("orbit --help lists its commands");
    list.lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags and the arguments one `--help` shows: `--goal-file`, `[GOAL]`.
fn help_entries(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_args = false;
    for line in help.lines() {
        if !line.starts_with(' ') {
            in_args = line == "Arguments:";
            continue;
        }
        // An entry's label, before the two spaces that start its help on the same line;
        // a line of help text alone starts with neither a dash nor a bracket.
        let item = line.trim_start();
        let label = item.split("  ").next().unwrap_or("");
        if item.starts_with('-') {
            if let Some(flag) = label.split([' ', ',']).find(|w| w.starts_with("--")) {
                out.push(flag.to_string());
            }
        } else if in_args && (item.starts_with('[') || item.starts_with('<')) {
            out.push(label.to_string());
        }
    }
    out
}

#[test]
fn the_cli_reference_shows_every_subcommand_flag_and_argument_of_the_help() {
    let page = generated(ReferencePage::Cli);
    let subs = listed_subcommands();
    assert!(
        subs.contains(&"init".to_string()) && subs.len() >= 10,
        "{subs:?}"
    );
    for sub in subs.iter().map(String::as_str).chain([""]) {
        let name = format!("orbit {sub}").trim_end().to_string();
        let text = section(&page, &name);
        let help = if sub.is_empty() {
            orbit_stdout(&["--help"])
        } else {
            orbit_stdout(&[sub, "--help"])
        };
        let entries = help_entries(&help);
        assert!(
            entries.iter().any(|e| e == "--help"),
            "no --help read in `{name} --help`:\n{help}"
        );
        for entry in entries {
            // An entry is the label of one item: `- `--every <DUR>`: ...`, `- `-f, --follow`: ...`.
            let shown = text.lines().any(|l| {
                l.strip_prefix("- `").is_some_and(|label| {
                    let label = label.split('`').next().unwrap_or("");
                    label.split([' ', ',']).any(|w| w == entry)
                })
            });
            assert!(
                shown,
                "`{name} --help` shows {entry}, which docs/cli.md's section does not:\n{text}"
            );
        }
        // What a value may be, where the help lists it.
        if let Some(values) = help.split("[possible values: ").nth(1) {
            for v in values.split(']').next().unwrap().split(", ") {
                assert!(text.contains(&format!("`{v}`")), "{name}: value {v}");
            }
        }
    }
    assert!(
        !page.contains("## orbit reference"),
        "the hidden subcommand is not documented"
    );
    // Nor offered by the shell completions (clap_complete alone would offer it).
    for shell in ["bash", "zsh", "fish"] {
        let script = orbit_stdout(&["completions", shell]);
        assert!(script.contains("max-iterations"), "{shell}");
        assert!(
            !script.contains("reference"),
            "{shell} completes the hidden subcommand"
        );
    }
}

#[test]
fn the_settings_and_exit_code_references_leave_nothing_out() {
    let settings = generated(ReferencePage::Settings);
    for s in orbit::contract::SETTINGS {
        let row = settings
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", s.key)))
            .unwrap_or_else(|| panic!("docs/settings.md has no row for {}", s.key));
        assert!(row.contains(&format!("`{}`", s.env_name())), "{row}");
        assert!(!row.ends_with("| — |"), "{} has no meaning: {row}", s.key);
    }
    let init = settings
        .lines()
        .find(|l| l.starts_with("| `max-iterations` |"))
        .unwrap();
    assert!(
        init.contains("`--max-iterations <N>`") && init.contains("`20`"),
        "{init}"
    );

    let codes = generated(ReferencePage::ExitCodes);
    for c in orbit::contract::ExitCode::ALL {
        assert!(
            codes.contains(&format!("| {} | `{}` |", c.code(), c.bash_name())),
            "docs/exit-codes.md has no row for {}",
            c.code()
        );
    }
    for sub in listed_subcommands().iter().filter(|s| *s != "run") {
        assert!(
            codes.lines().any(|l| l.starts_with("### ")
                && l.split(", ").any(|n| n.ends_with(&format!("orbit {sub}")))),
            "docs/exit-codes.md does not name orbit {sub}"
        );
    }
}

// ---- Links

/// The anchors of a markdown file: its headings as GitHub names them (a repeated heading
/// gets `-1`, `-2`), and explicit `<a id="...">` anchors.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(heading) = line.strip_prefix('#') {
            let heading = heading.trim_start_matches('#');
            if heading.starts_with(' ') {
                let base = reference::anchor(&heading.replace('`', ""));
                let mut name = base.clone();
                let mut k = 0;
                while out.contains(&name) {
                    k += 1;
                    name = format!("{base}-{k}");
                }
                out.insert(name);
            }
        }
        for part in line.split("<a id=\"").skip(1) {
            out.insert(part.split('"').next().unwrap().to_string());
        }
    }
    out
}

/// The link targets of a markdown file, outside code: `](target)`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans hold no links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        for part in prose.split("](").skip(1) {
            if let Some(end) = part.find(')') {
                out.push(part[..end].to_string());
            }
        }
    }
    out
}

fn docs_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    for entry in fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn every_link_of_the_docs_reaches_a_file_and_a_heading_that_exist() {
    let mut broken = Vec::new();
    let files = docs_files();
    assert!(files.len() >= 10, "{files:?}");
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let rel = file.strip_prefix(root()).unwrap().display().to_string();
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{rel}: {link}: no file {}", target.display()));
                continue;
            }
            if !anchor.is_empty() {
                let names = anchors(&fs::read_to_string(&target).unwrap_or_default());
                if !names.contains(anchor) {
                    broken.push(format!("{rel}: {link}: no heading #{anchor}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() <= 250, "README.md has {} lines", lines.len());
    let head = lines[..60.min(lines.len())].join("\n");
    for step in ["orbit demo", "orbit init", "orbit run"] {
        assert!(
            head.contains(step),
            "`{step}` is not in README.md's first 60 lines"
        );
    }
    assert!(readme.contains("cargo test") && readme.contains(".ci/run"));
}
