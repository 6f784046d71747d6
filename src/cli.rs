//! The command-line types. Parsing lives here so tests can reach it; behaviour lives in
//! the modules each subcommand names.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "orbit",
    version,
    about = "Bounded, resumable, crash-safe loops for AI coding agents",
    long_about = "orbit renders a self-contained loop directory whose runner drives an AI coding \
                  agent until the harness (never the agent) decides the goal is DONE."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render a loop directory from a goal.
    Init(Box<InitArgs>),
    /// Run a loop (executes its run-loop.sh).
    Run(RunArgs),
    /// Classify loops, live or dead, with evidence (read-only).
    Audit(AuditArgs),
    /// One line per loop: verdict, iteration, last verify, spend, last activity.
    Status(StatusArgs),
    /// Repair a loop's state from the evidence.
    Recover(RecoverArgs),
    /// Schedule a loop under cron or systemd, or start it in tmux.
    Schedule(ScheduleArgs),
    /// Stop a loop: a live runner saves a resumable state and exits, and every later run
    /// (a schedule's tick too) exits 18 at once until orbit resume.
    Stop(StopArgs),
    /// Let a stopped loop run again.
    Resume(ResumeArgs),
    /// A markdown report of a loop: status, iterations, spend, remaining work.
    Report(ReportArgs),
    /// The agent's output and the verify output of recent iterations; with -f, the live
    /// output of a running loop.
    Logs(LogsArgs),
    /// Run an end-to-end loop in a temporary repository with a built-in simulated agent.
    Demo(DemoArgs),
    /// Shell completions for bash, zsh, fish, elvish or powershell.
    Completions(CompletionsArgs),
    /// The manual page (roff), generated from the command definitions.
    Man,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("how").args(["cron", "systemd", "tmux"])))]
#[command(group(clap::ArgGroup::new("what").args(["list", "remove", "install"])))]
pub struct ScheduleArgs {
    /// The loop directory (default: the only loop under .orbit/).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// A crontab line running one tick (`--once`) at each interval.
    #[arg(long)]
    pub cron: bool,

    /// A systemd user service and timer pair.
    #[arg(long)]
    pub systemd: bool,

    /// Start the loop now in a detached tmux session named orbit-<name>-<hash>.
    #[arg(long)]
    pub tmux: bool,

    /// The interval for --cron and --systemd: minutes that divide the hour (1m..30m) or
    /// hours that divide the day (1h..24h).
    #[arg(long, value_name = "DUR", default_value = "15m")]
    pub every: String,

    /// Install instead of printing: add the crontab line (replacing this loop's earlier
    /// one) or write the systemd units under ~/.config/systemd/user.
    #[arg(long)]
    pub install: bool,

    /// List every orbit schedule of this user: crontab lines, systemd units, tmux sessions.
    #[arg(long, conflicts_with_all = ["cron", "systemd", "tmux", "dir"])]
    pub list: bool,

    /// Remove this loop's schedules: of the kind given, or of every kind.
    #[arg(long)]
    pub remove: bool,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The loop directory (default: the only loop under .orbit/).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// How long to wait for the runner to save its state and exit.
    #[arg(long, value_name = "DUR", default_value = "60s")]
    pub wait: String,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The loop directory (default: the only loop under .orbit/).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The loop directory (default: the only loop under .orbit/).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// One self-contained HTML page with pictures (timeline, checks, spend) instead of
    /// markdown.
    #[arg(long)]
    pub html: bool,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The loop directory (default: the only loop under .orbit/).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Follow the running loop: print the agent's output as it is written, across attempts
    /// and iterations, until the runner lets the loop go.
    #[arg(short, long)]
    pub follow: bool,

    /// Only iteration N.
    #[arg(long, value_name = "N", conflicts_with = "follow")]
    pub iteration: Option<u64>,

    /// How many of the last iterations to print.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 3,
        conflicts_with = "iteration"
    )]
    pub last: usize,

    /// With --follow: wait up to DUR for a runner to start (0 = do not wait).
    #[arg(long, value_name = "DUR", default_value = "0", requires = "follow")]
    pub wait: String,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Loop directories (default: every loop under .orbit/ of the current repository).
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    /// Machine-readable report.
    #[arg(long)]
    pub json: bool,

    /// One line per loop (as `orbit status`).
    #[arg(long)]
    pub summary: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Loop directories (default: every loop under .orbit/ of the current repository).
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    /// Refresh the table in place until interrupted.
    #[arg(long)]
    pub watch: bool,

    /// Time between refreshes with --watch.
    #[arg(long, value_name = "DUR", default_value = "2s", requires = "watch")]
    pub interval: String,

    /// Stop after N refreshes (with --watch).
    #[arg(long, value_name = "N", requires = "watch")]
    pub count: Option<u64>,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The loop directory (default: the only loop under .orbit/).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Close an open circuit breaker.
    #[arg(long)]
    pub reset_circuit: bool,

    /// Forget the change signatures, so a stalled loop may go on.
    #[arg(long)]
    pub clear_stall: bool,

    /// Accept the current goal.md as the new pinned goal.
    #[arg(long)]
    pub repin_goal: bool,

    /// Accept every pinned file as it is now (after a human review).
    #[arg(long)]
    pub repin: bool,

    /// Put pinned files back: loop files from .pins/, protected paths from the baseline commit.
    #[arg(long)]
    pub restore_pinned: bool,

    /// Bring the loop to this orbit's contract version.
    #[arg(long)]
    pub migrate: bool,

    /// Print the plan as a diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The goal, in words. '-' reads it from standard input.
    #[arg(value_name = "GOAL", allow_hyphen_values = false)]
    pub goal: Option<String>,

    /// Read the goal from a file instead.
    #[arg(long, value_name = "FILE", conflicts_with = "goal")]
    pub goal_file: Option<PathBuf>,

    /// The loop directory (default: .orbit/<slug> at the repository root).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// The agent [default: claude]; custom takes --exec 'CMD ARGS'.
    #[arg(long, value_name = "NAME", value_enum)]
    pub engine: Option<crate::engine::Engine>,

    /// The agent command for --engine custom, split like a shell into an argv.
    #[arg(long = "exec", value_name = "CMD ARGS")]
    pub exec: Option<String>,

    /// An acceptance check (a shell command that exits 0 when it holds). Repeatable.
    #[arg(long = "verify", value_name = "CMD")]
    pub verify: Vec<String>,

    /// Repository paths (globs) the agent must not change. Repeatable.
    #[arg(long = "protect", value_name = "GLOB")]
    pub protect: Vec<String>,

    /// Cumulative cap on iterations, across runs.
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u64>,

    /// Per-agent-run timeout, e.g. 600s, 10m, 1h.
    #[arg(long, value_name = "DUR")]
    pub exec_timeout: Option<String>,

    /// Wall-clock cap for the whole loop (0 = none).
    #[arg(long, value_name = "DUR")]
    pub loop_timeout: Option<String>,

    /// Hard cap on total spend, in USD.
    #[arg(long, value_name = "X")]
    pub usd_cap: Option<String>,

    /// Consecutive verify passes required for DONE.
    #[arg(long, value_name = "K")]
    pub pass_k: Option<u32>,

    /// A notification channel: desktop, cmd:COMMAND, webhook:URL, ntfy:TOPIC (or a full
    /// ntfy URL), or every-iteration. Repeatable.
    #[arg(long = "notify", value_name = "CHANNEL")]
    pub notify: Vec<String>,

    /// Re-render the scripts of an existing loop from its loop.toml, keeping its state.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The loop directory (default: the only loop under .orbit/).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Do at most one iteration (a cron tick).
    #[arg(long)]
    pub once: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to create the demo repository (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
