//! orbit: bounded, resumable, crash-safe loops for AI coding agents.
//!
//! `orbit init` renders a self-contained loop directory (see `docs/contract.md`); its
//! `run-loop.sh` drives the agent, and the harness, never the agent, decides DONE.

pub mod adequacy;
pub mod audit;
pub mod autoprotect;
pub mod bashstrip;
pub mod checkout;
pub mod cli;
pub mod config;
pub mod contract;
pub mod control;
pub mod counts;
pub mod demo;
pub mod deps;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod events;
pub mod fsx;
pub mod goal;
pub mod home;
pub mod init;
pub mod ledger;
pub mod locate;
pub mod logs;
pub mod manual;
pub mod merge;
pub mod ops;
pub mod otlp;
pub mod pins;
pub mod progress;
pub mod protect;
pub mod queue;
pub mod record;
pub mod recover;
pub mod reference;
pub mod render;
pub mod report;
pub mod rerun;
pub mod result_env;
pub mod run;
pub mod sandbox;
pub mod schedule;
pub mod serve;
pub mod shell;
pub mod signature;
pub mod sigs;
pub mod state;
pub mod submodules;
pub mod verify;

use std::process::ExitCode;

pub use error::{Error, Result};

/// Runs one parsed command line and returns the process exit code.
pub fn run(cli: cli::Cli) -> Result<u8> {
    match cli.command {
        cli::Command::Init(args) => init::init(&args).map(|_| 0),
        cli::Command::Run(args) => run::run(&args),
        cli::Command::Audit(args) => audit::run(&args),
        cli::Command::Status(args) => audit::status(&args),
        cli::Command::Recover(args) => recover::run(&args),
        cli::Command::Queue(args) => queue::run(&args),
        cli::Command::Demo(args) => demo::demo(&args),
        cli::Command::Schedule(args) if args.queue && (args.kubernetes || args.github_actions) => {
            queue::fleet::schedule(&args)
        }
        cli::Command::Schedule(args) => ops::schedule(&args),
        cli::Command::Stop(args) => control::stop(&args),
        cli::Command::Resume(args) => control::resume(&args),
        cli::Command::Report(args) => report::report(&args),
        cli::Command::Logs(args) => logs::run(&args),
        cli::Command::Verify(args) => verify::run(&args),
        cli::Command::Adequacy(args) => adequacy::run(&args),
        cli::Command::Merge(args) if args.queue => queue::merge::run(),
        cli::Command::Merge(args) => merge::run(&args),
        cli::Command::Serve(args) => serve::run(&args),
        cli::Command::Export(args) => match args.format {
            cli::ExportFormat::Otlp => otlp::run(&args),
        },
        cli::Command::Completions(args) => {
            let mut cmd = cli::completion_command();
            clap_complete::generate(args.shell, &mut cmd, "orbit", &mut std::io::stdout());
            Ok(0)
        }
        cli::Command::Man(args) => manual::run(&args),
        cli::Command::Reference(args) => reference::run(&args),
    }
}

/// The binary's entry point: parse, run, report, map to an exit code.
pub fn main_entry() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let parsed = cli::Cli::command()
        .try_get_matches()
        .and_then(|m| cli::Cli::from_arg_matches(&m).map(|c| (c, m)));
    let cli = match parsed {
        Ok((mut cli, matches)) => {
            // Where each `--name` stands says which check it names.
            if let (cli::Command::Init(args), Some(("init", m))) =
                (&mut cli.command, matches.subcommand())
            {
                match cli::check_names_by_place(m) {
                    Ok(names) => args.check_name = names,
                    Err(why) => {
                        eprintln!("orbit: {why}");
                        return ExitCode::from(2);
                    }
                }
            }
            cli
        }
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("orbit: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
