//! `orbit man`: the manual pages, made from the command definitions. orbit(1) names one
//! page per subcommand (orbit-init(1), ...), and `orbit man --dir DIR` writes exactly those:
//! each with its synopsis, options, EXIT STATUS (the runner's codes from
//! [`crate::contract::ExitCode`]), EXAMPLES (the ones `--help` shows) and SEE ALSO.

use std::fs;
use std::io::Write;
use std::path::Path;

use clap::CommandFactory;

use crate::cli::{Cli, ManArgs};
use crate::contract::ExitCode;
use crate::error::{Error, Result};

/// What each of the runner's exit codes means (contract 5).
pub fn exit_meaning(code: ExitCode) -> &'static str {
    match code {
        ExitCode::Done => "DONE, verified by the harness; also a rerun of a DONE loop.",
        ExitCode::Failure => {
            "An internal error of the script itself; a rerun resumes from the last checkpoint."
        }
        ExitCode::Preflight => {
            "Preflight failed (the environment, a setting out of bounds, a usage error): nothing ran, nothing was spent."
        }
        ExitCode::Integrity => {
            "Integrity violation: a pinned file changed (goal, verify, protected paths, scripts, agent settings); ABORTED."
        }
        ExitCode::StateCorrupt => {
            "The state is corrupt: run orbit recover. Also a state written under a newer major version of the loop contract (run it with the orbit that wrote it) or under contract 1.0 (run orbit recover --migrate); nothing is changed."
        }
        ExitCode::Continue => {
            "CONTINUE: a run bound (--once) was reached and work remains; nothing needs a human."
        }
        ExitCode::LoopTimeout => "The loop's wall-clock timeout was reached.",
        ExitCode::Budget => "The budget cap was reached (PAUSED).",
        ExitCode::RateLimited => {
            "Rate limited: PAUSED until the limit lifts (RESUME_AT in state.env); the next run resumes by itself."
        }
        ExitCode::Blocked => "The circuit breaker is open or a tool failed (BLOCKED).",
        ExitCode::Stalled => "Stalled or oscillating: no progress (STALLED).",
        ExitCode::Exhausted => "MAX_ITERATIONS used up without DONE.",
        ExitCode::VacuousVerify => "Vacuous verify: verify.sh passes on the untouched tree.",
        ExitCode::Stopped => {
            "Stopped by the user (orbit stop): PAUSED; every later run exits so at once, until orbit resume."
        }
        ExitCode::Locked => "Another runner holds the loop's lock.",
    }
}

/// The row of a runner killed by a signal, after the codes of [`ExitCode`].
pub const SIGNAL_EXIT: (&str, &str) = (
    "128+n",
    "Killed by signal n, after saving a resumable state.",
);

/// The EXIT STATUS of one page (`None`: orbit(1); `Some("run")`: the runner's codes):
/// (code, meaning) rows.
pub fn exit_status(sub: Option<&str>) -> Vec<(String, String)> {
    let rows = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(c, m)| (c.to_string(), m.to_string()))
            .collect()
    };
    let runner = || -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = ExitCode::ALL
            .iter()
            .map(|c| (c.code().to_string(), exit_meaning(*c).to_string()))
            .collect();
        out.push((SIGNAL_EXIT.0.into(), SIGNAL_EXIT.1.into()));
        out
    };
    let findings = [
        ("0", "No finding above P2."),
        ("1", "A P1 finding: recover, then continue."),
        ("3", "A P0 finding: stop now."),
        ("2", "A usage error."),
    ];
    let state = [
        ("0", "Success."),
        (
            "2",
            "A usage error, a refusal (the message says why), or a file that cannot be read.",
        ),
        (
            "4",
            "The loop's state.env does not parse: run orbit recover.",
        ),
    ];
    let plain = [
        ("0", "Success."),
        (
            "2",
            "A usage error, a refusal (the message says why), or a file that cannot be read.",
        ),
    ];
    match sub {
        None => {
            let mut out = rows(&plain);
            out.push((
                "other".into(),
                "orbit run exits with the runner's codes (orbit-run(1)); orbit audit and orbit status with 0, 1, 3 or 2 (orbit-audit(1)).".into(),
            ));
            out
        }
        Some("run") => runner(),
        Some("demo") => {
            let mut out = rows(&[(
                "0",
                "The demo's loop ended DONE; any other code is the loop's (orbit-run(1)).",
            )]);
            out.push(("2".into(), "A usage error.".into()));
            out
        }
        Some("audit") | Some("status") => rows(&findings),
        Some("stop") | Some("resume") | Some("report") => rows(&state),
        Some("verify") | Some("merge") => rows(&[
            ("0", "The hand-off verified (orbit merge: and was merged)."),
            (
                "3",
                "The hand-off did not verify: the failure code says why and what to do.",
            ),
            (
                "2",
                "A usage error, a refusal (the message says why), or a file that cannot be read.",
            ),
        ]),
        Some("adequacy") => rows(&[
            ("0", "Measured: the report says what the checks need."),
            (
                "3",
                "The checks fail on the commit itself, so nothing can be measured.",
            ),
            (
                "4",
                "--gate N: a hunk of the change no check needs, or more than N mutants survived (the feedback names them).",
            ),
            (
                "2",
                "A usage error, a refusal (the message says why), or a file that cannot be read.",
            ),
        ]),
        Some("queue") | Some("queue run") => crate::contract::queue::QueueExit::ALL
            .iter()
            .map(|e| (e.code().to_string(), e.meaning().to_string()))
            .collect(),
        Some(_) => rows(&plain),
    }
}

/// The related pages of one page.
fn see_also(sub: Option<&str>) -> Vec<&'static str> {
    match sub {
        None => vec![],
        Some("run") | Some("schedule") => vec![
            "orbit(1)",
            "orbit-logs(1)",
            "orbit-stop(1)",
            "orbit-audit(1)",
        ],
        Some("audit") | Some("status") => vec!["orbit(1)", "orbit-recover(1)", "orbit-report(1)"],
        Some("stop") | Some("resume") => vec!["orbit(1)", "orbit-stop(1)", "orbit-resume(1)"],
        Some("logs") | Some("report") => vec!["orbit(1)", "orbit-status(1)", "orbit-audit(1)"],
        Some("serve") => vec![
            "orbit(1)",
            "orbit-status(1)",
            "orbit-report(1)",
            "orbit-stop(1)",
        ],
        Some(_) => vec!["orbit(1)", "orbit-run(1)"],
    }
}

/// One line of roff text: backslashes escaped, a leading '.' or '\'' kept from being a
/// request, '-' written as a minus so that a copied command works.
fn roff_text(text: &str) -> String {
    let mut out = String::new();
    if text.starts_with('.') || text.starts_with('\'') {
        out.push_str("\\&");
    }
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            _ => out.push(c),
        }
    }
    out
}

/// The sections orbit adds to a page clap_mangen renders.
fn extra_sections(sub: Option<&str>) -> String {
    let mut out = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in exit_status(sub) {
        out.push_str(&format!(
            ".TP\n\\fB{}\\fR\n{}\n",
            roff_text(&code),
            roff_text(&meaning)
        ));
    }
    let examples: Vec<(&str, &str)> = match sub {
        Some(s) => crate::cli::examples(s).to_vec(),
        None => ["init", "run", "logs", "audit"]
            .iter()
            .filter_map(|s| crate::cli::examples(s).first().copied())
            .collect(),
    };
    out.push_str(".SH EXAMPLES\n");
    for (cmd, what) in examples {
        out.push_str(&format!(
            ".TP\n\\fB{}\\fR\n{}\n",
            roff_text(cmd),
            roff_text(what)
        ));
    }
    let also = see_also(sub);
    if !also.is_empty() {
        out.push_str(".SH \"SEE ALSO\"\n");
        out.push_str(&roff_text(&also.join(", ")));
        out.push('\n');
    }
    out
}

/// The command tree as the pages show it (no `help` subcommand: it has no page).
fn command() -> clap::Command {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// One page: clap_mangen's sections (without its EXTRA section, which would repeat the
/// examples), then orbit's.
fn page(cmd: &clap::Command, sub: Option<&str>) -> Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone())
        .source(format!("orbit {}", env!("CARGO_PKG_VERSION")))
        .manual("orbit manual");
    let mut out = Vec::new();
    let err = |e| Error::io("cannot render the manual page", e);
    man.render_title(&mut out).map_err(err)?;
    man.render_name_section(&mut out).map_err(err)?;
    man.render_synopsis_section(&mut out).map_err(err)?;
    man.render_description_section(&mut out).map_err(err)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out).map_err(err)?;
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out).map_err(err)?;
    }
    out.extend_from_slice(extra_sections(sub).as_bytes());
    if sub.is_none() {
        man.render_version_section(&mut out).map_err(err)?;
    }
    Ok(out)
}

/// Every page: (file name, roff), orbit.1 first.
pub fn pages() -> Result<Vec<(String, Vec<u8>)>> {
    let cmd = command();
    let mut out = vec![("orbit.1".to_string(), page(&cmd, None)?)];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        out.push((
            format!("orbit-{}.1", sub.get_name()),
            page(sub, Some(sub.get_name()))?,
        ));
        // A command with subcommands of its own (orbit queue) names a page for each.
        for nested in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = format!("{} {}", sub.get_name(), nested.get_name());
            out.push((
                format!("orbit-{}-{}.1", sub.get_name(), nested.get_name()),
                page(nested, Some(&name))?,
            ));
        }
    }
    Ok(out)
}

/// `orbit man`.
pub fn run(args: &ManArgs) -> Result<u8> {
    let pages = pages()?;
    match &args.dir {
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&pages[0].1)
                .and_then(|()| stdout.flush())
                .map_err(|e| Error::io("cannot write the manual page", e))?;
        }
        Some(dir) => write_pages(dir, &pages)?,
    }
    Ok(0)
}

fn write_pages(dir: &Path, pages: &[(String, Vec<u8>)]) -> Result<()> {
    fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    for (name, roff) in pages {
        let path = dir.join(name);
        fs::write(&path, roff)
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
    }
    println!(
        "orbit: wrote {} manual pages into {}",
        pages.len(),
        dir.display()
    );
    Ok(())
}
