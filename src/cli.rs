//! The command-line types. Parsing lives here so tests can reach it; behaviour lives in
//! the modules each subcommand names.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Examples of each subcommand: the command line and what it does. `--help` shows them
/// after the options; the manual pages have them in EXAMPLES.
pub const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "init",
        &[
            (
                "orbit init \"Make cargo test pass on the new parser\" --verify 'cargo test' --protect 'tests/**'",
                "render .orbit/make-cargo-test-pass-on-the-new-parser with one acceptance check",
            ),
            (
                "orbit init --goal-file goal.txt --engine custom --exec 'my-agent --fast' --max-iterations 50",
                "a goal from a file, driving your own agent command",
            ),
            (
                "orbit init --force --dir .orbit/parser",
                "re-render the scripts after editing loop.toml, keeping the state",
            ),
            (
                "orbit init \"Fix the flaky login test\" --verify 'npm test' --workspace ../login-loop",
                "put the loop's git worktree beside the repository instead of under your data directory",
            ),
        ],
    ),
    (
        "run",
        &[
            (
                "orbit run",
                "run the only loop under .orbit/ until it stops",
            ),
            (
                "orbit run .orbit/parser --once",
                "one iteration (what a cron tick does)",
            ),
            (
                "MAX_ITERATIONS=5 orbit run",
                "override a setting for this run",
            ),
        ],
    ),
    (
        "audit",
        &[
            (
                "orbit audit",
                "classify every loop under .orbit/, with evidence",
            ),
            (
                "orbit audit .orbit/parser --json",
                "the same, for a program",
            ),
            (
                "orbit audit --json-lines /srv/loops/*/.orbit/*",
                "one JSON object per loop and line, with the host, for a dashboard",
            ),
        ],
    ),
    (
        "status",
        &[
            ("orbit status", "one line per loop"),
            (
                "orbit status --watch --interval 5s",
                "refresh the table every 5 seconds",
            ),
            (
                "orbit status --watch --interval 1m --json-lines",
                "a stream of one JSON object per loop, every minute",
            ),
        ],
    ),
    (
        "recover",
        &[
            (
                "orbit recover --dry-run",
                "print what would be repaired, write nothing",
            ),
            ("orbit recover --clear-stall", "let a STALLED loop go on"),
            (
                "orbit recover --restore-pinned",
                "put back the pinned files the agent changed",
            ),
        ],
    ),
    (
        "schedule",
        &[
            (
                "orbit schedule --cron --every 15m --install",
                "a crontab line: one tick every 15 minutes",
            ),
            (
                "orbit schedule --systemd --install",
                "a systemd user service and timer",
            ),
            (
                "orbit schedule --kubernetes --image ghcr.io/you/agent:1 --output orbit.yaml",
                "a CronJob ticking every 15 minutes in a cluster, the repository's clone on a volume",
            ),
            (
                "orbit schedule --kubernetes --continuous --image ghcr.io/you/agent:1 --namespace loops",
                "a Job running the loop until it stops",
            ),
            (
                "orbit schedule --github-actions --every 1h --output .github/workflows/orbit-parser.yml",
                "a workflow ticking hourly; the state kept on orbit-state/<name>, a pull request when DONE",
            ),
            (
                "orbit schedule --tmux",
                "start the loop now in tmux, the agent's output in a second pane",
            ),
            ("orbit schedule --list", "every orbit schedule of yours"),
            (
                "orbit schedule --remove",
                "this loop's schedules, of every kind",
            ),
        ],
    ),
    (
        "stop",
        &[
            (
                "orbit stop",
                "stop the runner (it saves its state); later runs exit 18",
            ),
            (
                "orbit stop .orbit/parser --wait 5m",
                "wait up to 5 minutes for the runner to exit",
            ),
        ],
    ),
    (
        "resume",
        &[("orbit resume", "let a stopped loop run again")],
    ),
    (
        "report",
        &[
            ("orbit report", "the report of the only loop, in markdown"),
            (
                "orbit report .orbit/parser --output report.md",
                "into a file",
            ),
            (
                "orbit report --html --output report.html",
                "one self-contained page with a timeline, a check grid and the spend",
            ),
        ],
    ),
    (
        "verify",
        &[
            (
                "orbit verify",
                "the only loop's branch against its DONE envelope, nothing run",
            ),
            (
                "orbit verify orbit/fix-login --json",
                "a branch handed over (a fresh clone: git fetch origin 'refs/notes/*:refs/notes/*' first)",
            ),
            (
                "orbit verify --rerun",
                "and run the checks again, PASS_K times, in a clean checkout",
            ),
            (
                "orbit verify --rerun --record",
                "a loop DONE before envelopes: its envelope, written only when every run passes",
            ),
            (
                "orbit verify --allowed-signers ~/.config/git/allowed_signers --require-signature",
                "and its SSH signature, checked against the allowed signers",
            ),
        ],
    ),
    (
        "adequacy",
        &[
            (
                "orbit adequacy",
                "which hunks of the only loop's change its checks need, and which mutants they kill",
            ),
            (
                "orbit adequacy fix-parser --budget 10m --json",
                "the same for one loop, with more time, as JSON",
            ),
        ],
    ),
    (
        "merge",
        &[(
            "orbit merge",
            "verify the only loop, then merge its branch into the branch it started from",
        )],
    ),
    (
        "queue",
        &[
            (
                "orbit queue add \"Add a login page\" --verify 'cargo test login' --max-iterations 10",
                "a task in .orbit/queue/add-a-login-page.md",
            ),
            (
                "orbit queue add \"Log failed logins\" --verify 'cargo test audit' --after add-a-login-page",
                "a task that waits for another to be done",
            ),
            (
                "orbit queue import backlog.md",
                "one task per ## section of a markdown backlog",
            ),
            (
                "orbit queue run --jobs 3",
                "run the tasks, three loops at once, until none is left to run",
            ),
            ("orbit queue status --json", "every task, for a program"),
        ],
    ),
    (
        "logs",
        &[
            (
                "orbit logs",
                "the agent's and verify's output of the last 3 iterations",
            ),
            ("orbit logs --iteration 7", "iteration 7 only"),
            (
                "orbit logs -f",
                "follow the running loop's agent as it writes",
            ),
        ],
    ),
    (
        "serve",
        &[
            (
                "orbit serve",
                "a live dashboard of the current repository's loops, at the printed URL",
            ),
            (
                "orbit serve ~/src/app ~/src/lib/.orbit/parser --port 8765",
                "the loops of two repositories and one loop directory, on a fixed port",
            ),
            (
                "ssh build1 orbit status --watch --interval 30s --json-lines | orbit serve --fleet -",
                "add another host's loops, read from standard input, to the overview",
            ),
        ],
    ),
    (
        "export",
        &[
            (
                "orbit export otlp --output trace.json",
                "the only loop's journal as one OTLP/JSON trace in a file",
            ),
            (
                "orbit export otlp .orbit/parser --endpoint http://localhost:4318",
                "POST it to an OpenTelemetry Collector's (or Jaeger's) OTLP/HTTP receiver at /v1/traces",
            ),
            (
                "orbit export otlp --follow --endpoint http://collector:4318 --header 'Authorization: Bearer TOKEN'",
                "send each span as the loop records it, until the loop stops",
            ),
        ],
    ),
    (
        "demo",
        &[
            (
                "orbit demo",
                "a real loop with a simulated agent, in a temporary repository",
            ),
            (
                "orbit demo --dir /tmp/orbit-demo",
                "the same, kept in /tmp/orbit-demo",
            ),
        ],
    ),
    (
        "completions",
        &[
            (
                "orbit completions bash > ~/.local/share/bash-completion/completions/orbit",
                "bash completions",
            ),
            ("orbit completions zsh > ~/.zfunc/_orbit", "zsh completions"),
        ],
    ),
    (
        "man",
        &[
            ("orbit man | man -l -", "read orbit(1)"),
            (
                "orbit man --dir ~/.local/share/man/man1",
                "install every page: man orbit-run",
            ),
        ],
    ),
];

/// The command tree the shell completions are made from: the visible subcommands only.
/// clap_complete walks every subcommand, hidden ones too, and clap cannot remove one, so
/// the root is assembled again from the visible ones (`orbit reference` stays out).
pub fn completion_command() -> clap::Command {
    let full = <Cli as clap::CommandFactory>::command();
    clap::Command::new("orbit")
        .version(env!("CARGO_PKG_VERSION"))
        .about(full.get_about().cloned().unwrap_or_default())
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// The examples of one subcommand.
pub fn examples(sub: &str) -> &'static [(&'static str, &'static str)] {
    EXAMPLES
        .iter()
        .find(|(name, _)| *name == sub)
        .map(|(_, ex)| *ex)
        .unwrap_or(&[])
}

/// The `--help` text after the options: the subcommand's examples.
fn examples_help(sub: &str) -> String {
    let mut out = String::from("Examples:\n");
    for (cmd, what) in examples(sub) {
        out.push_str(&format!("  {cmd}\n      {what}\n"));
    }
    out
}

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
    #[command(after_help = examples_help("init"))]
    Init(Box<InitArgs>),
    /// Run a loop (executes its run-loop.sh).
    #[command(after_help = examples_help("run"))]
    Run(RunArgs),
    /// Classify loops, live or dead, with evidence (read-only).
    #[command(after_help = examples_help("audit"))]
    Audit(AuditArgs),
    /// One line per loop: verdict, iteration, last verify, spend, last activity.
    #[command(after_help = examples_help("status"))]
    Status(StatusArgs),
    /// Repair a loop's state from the evidence.
    #[command(after_help = examples_help("recover"))]
    Recover(RecoverArgs),
    /// Schedule a loop under cron or systemd, start it in tmux, or run it beyond this
    /// machine: Kubernetes manifests or a GitHub Actions workflow.
    #[command(after_help = examples_help("schedule"))]
    Schedule(ScheduleArgs),
    /// Stop a loop: a live runner saves a resumable state and exits, and every later run
    /// (a schedule's tick too) exits 18 at once until orbit resume.
    #[command(after_help = examples_help("stop"))]
    Stop(StopArgs),
    /// Let a stopped loop run again.
    #[command(after_help = examples_help("resume"))]
    Resume(ResumeArgs),
    /// A markdown report of a loop: status, iterations, spend, remaining work.
    #[command(after_help = examples_help("report"))]
    Report(ReportArgs),
    /// Check a loop's hand-off: the DONE envelope (the commit's note under refs/notes/orbit,
    /// or the loop's envelope.json) matches the commit, its checks' files and the journal.
    /// Exit 0 on pass, 3 on a failure (its code says which), 2 on bad input.
    #[command(after_help = examples_help("verify"))]
    Verify(VerifyArgs),
    /// Which part of a loop's change its checks need: each hunk reverted alone, and small
    /// mutants of the added lines, run against the loop's own checks in clean checkouts.
    #[command(after_help = examples_help("adequacy"))]
    Adequacy(AdequacyArgs),
    /// Verify a DONE loop, then merge its branch into the branch it started from (checked
    /// out), fast-forward where it can.
    #[command(after_help = examples_help("merge"))]
    Merge(MergeArgs),
    /// The agent's output and the verify output of recent iterations; with -f, the live
    /// output of a running loop.
    #[command(after_help = examples_help("logs"))]
    Logs(LogsArgs),
    /// A loop's journal as an OpenTelemetry trace (OTLP/JSON): the loop, its iterations,
    /// agent runs, checks, DONE gate and fan-out candidates as spans, to a file or an
    /// OTLP/HTTP receiver.
    #[command(after_help = examples_help("export"))]
    Export(ExportArgs),
    /// A live web dashboard of the loops (overview, one page per loop with its report and
    /// the running agent's output, stop and resume buttons), on 127.0.0.1 behind a token.
    #[command(after_help = examples_help("serve"))]
    Serve(ServeArgs),
    /// A queue of goals: tasks as files under .orbit/queue/, each run as loops (at most
    /// --jobs at once) until it is verified, merged into the integration branch
    /// orbit/queue/<branch> and green there; failed attempts are appended to the task.
    #[command(after_help = examples_help("queue"))]
    Queue(QueueArgs),
    /// Run an end-to-end loop in a temporary repository with a built-in simulated agent.
    #[command(after_help = examples_help("demo"))]
    Demo(DemoArgs),
    /// Shell completions for bash, zsh, fish, elvish or powershell.
    #[command(after_help = examples_help("completions"))]
    Completions(CompletionsArgs),
    /// The manual pages (roff), generated from the command definitions: orbit(1) on
    /// standard output, or every page (orbit-init(1), ...) into a directory.
    #[command(after_help = examples_help("man"))]
    Man(ManArgs),
    /// A reference page of orbit's docs (docs/cli.md, docs/settings.md, docs/exit-codes.md),
    /// generated from the command definitions, the settings table and the exit codes.
    #[command(hide = true)]
    Reference(ReferenceArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("how").args(["cron", "systemd", "tmux", "kubernetes", "github_actions"])))]
#[command(group(clap::ArgGroup::new("what").args(["list", "remove", "install"])))]
#[command(group(clap::ArgGroup::new("beyond").args(["kubernetes", "github_actions"]).multiple(false)))]
// Flags that need --kubernetes require this group: clap takes `requires = "kubernetes"` as
// met when another member of "how" (--cron) is given.
#[command(group(clap::ArgGroup::new("kube").args(["kubernetes"])))]
#[command(group(clap::ArgGroup::new("gha").args(["github_actions"])))]
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

    /// Kubernetes manifests: a volume with the repository's clone and a CronJob running
    /// one tick at each interval (a Job running the loop with --continuous). The loop
    /// directory must be committed, before its first run.
    #[arg(long, conflicts_with_all = ["install", "remove", "list"])]
    pub kubernetes: bool,

    /// A GitHub Actions workflow running one tick at each interval, the loop's state kept
    /// on the branch orbit-state/<name>, a pull request when it is DONE. The loop directory
    /// must be committed, before its first run.
    #[arg(long, conflicts_with_all = ["install", "remove", "list"])]
    pub github_actions: bool,

    /// With --github-actions: the https address of the git repository of orbit the runner
    /// builds (cargo install --locked) to verify a DONE loop's hand-off before its pull
    /// request; orbit publishes no prebuilt binary.
    #[arg(long, value_name = "URL", requires = "gha")]
    pub orbit_git: Option<String>,

    /// With --github-actions: the commit or tag of --orbit-git to build.
    #[arg(long, value_name = "REV", requires = "gha")]
    pub orbit_rev: Option<String>,

    /// The interval for --cron, --systemd, --kubernetes and --github-actions: minutes that
    /// divide the hour (1m..30m; GitHub Actions: 5m at least) or hours that divide the day
    /// (1h..24h).
    #[arg(long, value_name = "DUR", default_value = "15m")]
    pub every: String,

    /// With --kubernetes: a Job that runs the loop until it stops, instead of a CronJob.
    #[arg(long, requires = "kube", conflicts_with = "every")]
    pub continuous: bool,

    /// With --kubernetes: the image every container runs, holding bash, git, the agent's
    /// CLI and the project's toolchain.
    #[arg(long, value_name = "IMAGE", requires = "kube")]
    pub image: Option<String>,

    /// With --kubernetes: the namespace of the objects (default: kubectl's).
    #[arg(long, value_name = "NS", requires = "kube")]
    pub namespace: Option<String>,

    /// With --kubernetes: the Secret holding the agent's API key, under the name of the
    /// variable the engine reads, such as ANTHROPIC_API_KEY [default: orbit-<engine>].
    #[arg(long, value_name = "NAME", requires = "kube")]
    pub secret: Option<String>,

    /// With --kubernetes: the https URL the cluster clones [default: the branch's remote,
    /// an ssh address turned into its https twin].
    #[arg(long, value_name = "URL", requires = "kube")]
    pub repo_url: Option<String>,

    /// With --kubernetes or --github-actions: the branch whose committed loop directory
    /// runs [default: the current branch].
    #[arg(long, value_name = "BRANCH", requires = "beyond")]
    pub branch: Option<String>,

    /// With --kubernetes or --github-actions: write the manifests or the workflow to FILE
    /// instead of standard output.
    #[arg(long, value_name = "FILE", requires = "beyond")]
    pub output: Option<PathBuf>,

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

    /// Schedule the repository's queue instead of a loop: each tick is `orbit queue run
    /// --once` (with --cron, --systemd, or --tmux ticking at --every in a session). With
    /// --kubernetes or --github-actions, the queue across machines: one pod or job per
    /// ready task (`orbit queue attempt`), then the merge step (`orbit queue land`).
    #[arg(long, conflicts_with_all = ["dir", "list", "continuous"])]
    pub queue: bool,

    /// With --queue and --kubernetes or --github-actions: how many tasks' attempts run at
    /// once (the Indexed Job's parallelism, the matrix's max-parallel).
    #[arg(long, value_name = "N", requires = "queue", default_value_t = 4)]
    pub jobs: u32,
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
    #[arg(long, conflicts_with = "json")]
    pub html: bool,

    /// The report's facts as one JSON object (each iteration, its candidates, the selection
    /// accounting) instead of markdown.
    #[arg(long)]
    pub json: bool,

    /// The queue's report (orbit queue): the tasks done with their merged commits, failed
    /// with why, blocked, the spend per task and in all, and what to run next.
    #[arg(long, conflicts_with_all = ["dir", "html"])]
    pub queue: bool,
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
pub struct ExportArgs {
    /// The format: otlp, an ExportTraceServiceRequest in OTLP's JSON mapping.
    #[arg(value_name = "FORMAT", value_enum)]
    pub format: ExportFormat,

    /// The loop directory (default: the only loop under .orbit/).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Write the trace to FILE (atomically; with --follow, one document a line) instead
    /// of standard output.
    #[arg(long, value_name = "FILE", conflicts_with = "endpoint")]
    pub output: Option<PathBuf>,

    /// POST the trace to an OTLP/HTTP receiver, e.g. http://localhost:4318 (a URL without
    /// a path gets /v1/traces); https:// is sent through the machine's curl.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,

    /// A request header for --endpoint, 'Name: value' (e.g. 'Authorization: Bearer
    /// TOKEN'). Repeatable. OTEL_EXPORTER_OTLP_HEADERS (key=value,...) is read too.
    #[arg(long = "header", value_name = "'K: V'", requires = "endpoint")]
    pub header: Vec<String>,

    /// Keep exporting as the journal grows, each span once when it ends, until the loop's
    /// run stops (its loop_stop event) or Ctrl-C.
    #[arg(short, long)]
    pub follow: bool,
}

/// The formats `orbit export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// OpenTelemetry's OTLP, in its JSON mapping.
    Otlp,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Repositories (every loop under their .orbit/) or loop directories [default: the
    /// current repository].
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    /// The port to listen on (0: any free port; the URL printed says which).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub port: u16,

    /// The address to listen on. Another than a loopback address lets every machine that
    /// reaches it see the loops and press stop (with the token): orbit says so when it
    /// starts.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: String,

    /// Fleet lines to show beside the local loops: a file of `orbit audit --json-lines` (or
    /// `orbit status --json-lines`) lines from other hosts, read again as it grows, or `-`
    /// for standard input. Repeatable. Read-only rows: no page, no buttons.
    #[arg(long, value_name = "FILE|-")]
    pub fleet: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// A loop (its directory, or its name under .orbit/; default: the only loop), checked on
    /// its branch's head; or a git ref or commit (a branch handed over, a fresh clone's).
    #[arg(value_name = "TARGET")]
    pub target: Option<String>,

    /// One JSON object: verdict, verify_failure_code, why, loop, ref, commit, digest,
    /// signature, signer, rerun_sandbox, next.
    #[arg(long)]
    pub json: bool,

    /// Also run verify.sh (and holdout.sh) PASS_K times in a clean checkout of the commit,
    /// under the loop's sandbox (bubblewrap; refused where it cannot run, unless the loop
    /// runs with sandbox = "none"); needs the loop directory.
    #[arg(long)]
    pub rerun: bool,

    /// With --rerun, for a DONE loop from before envelopes (no envelope.json): write its
    /// envelope and note only when every check passes PASS_K times in the clean checkout.
    #[arg(long)]
    pub record: bool,

    /// The allowed-signers file (ssh-keygen's format) the envelope's signature is checked
    /// against [default: git config gpg.ssh.allowedSignersFile].
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,

    /// Fail (SIGNATURE_MISSING) when the envelope carries no signature (needs an
    /// allowed-signers file).
    #[arg(long)]
    pub require_signature: bool,
}

#[derive(Debug, Args)]
pub struct AdequacyArgs {
    /// The loop (its directory, or its name under .orbit/; default: the only loop), measured
    /// on its branch's head.
    #[arg(value_name = "LOOP")]
    pub target: Option<String>,

    /// The commit the change is measured from [default: the envelope's base, else where the
    /// loop's branch left the branch it started from].
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,

    /// One JSON object: the figures, each hunk and each mutant with its result.
    #[arg(long)]
    pub json: bool,

    /// The most time to spend, e.g. 5m [default: the loop's adequacy-budget; 0 there: twice
    /// the checks' time for PASS_K runs on the unchanged commit]; what it leaves untried is
    /// said.
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,

    /// How many checkouts run at once [default: the loop's check-jobs; 0 there: as many as the
    /// CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: Option<u64>,

    /// The most mutants to try, spread over the added lines.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub max_mutants: usize,

    /// Measure this commit of the repository (its change from --base) instead of the
    /// loop's branch head: the DONE gate's claim, say.
    #[arg(long, value_name = "REV")]
    pub commit: Option<String>,

    /// Judge the measure as the DONE gate of `adequacy = "gate"` does: exit 4 when a hunk
    /// of the change no check needs, or more than N mutants survive, saying which.
    #[arg(long, value_name = "N")]
    pub gate: Option<u64>,

    /// Write the record (adequacy.json), its figures (adequacy.figures) and, with --gate, the
    /// feedback of a rejection (adequacy-feedback.txt) into DIR instead of the loop
    /// directory: for the runner, which holds the loop's lock and journals the measure.
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,

    /// Read the results of an ecosystem's own mutation tool on the diff instead of orbit's
    /// operators (cargo-mutants: its mutants of the diff, from mutants.out/outcomes.json),
    /// run under the loop's sandbox as its checks are, on each Cargo workspace the change's
    /// Rust files are in (at the root or in a folder), with the base's .cargo/mutants.toml
    /// (never the change's), stopped at the budget (its untried mutants listed).
    #[arg(long, value_name = "TOOL")]
    pub tool: Option<MutationTool>,
}

/// A mutation tool `orbit adequacy --tool` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "kebab-case")]
pub enum MutationTool {
    /// cargo-mutants (Rust).
    CargoMutants,
}

impl MutationTool {
    pub fn name(self) -> &'static str {
        match self {
            MutationTool::CargoMutants => "cargo-mutants",
        }
    }
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The loop directory, or its name under .orbit/ (default: the only loop).
    #[arg(value_name = "LOOP")]
    pub target: Option<String>,

    /// Merge the queue's integration branch (orbit/queue/<branch>) into the branch it was
    /// made from, checked out: every done task's merge and envelope verified, nothing on
    /// the branch that no task's merge brought, every done task's verifier green on its head.
    #[arg(long, conflicts_with = "target")]
    pub queue: bool,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Loop directories (default: every loop under .orbit/ of the current repository).
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    /// Machine-readable report.
    #[arg(long)]
    pub json: bool,

    /// One JSON object per loop and line (the loop's report, with `host` and `read_at`),
    /// for a dashboard that merges loops read on many hosts.
    #[arg(long, conflicts_with_all = ["json", "summary"])]
    pub json_lines: bool,

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

    /// One JSON object per loop and line instead of the table (as `orbit audit
    /// --json-lines`); with --watch, a stream of them at every refresh.
    #[arg(long)]
    pub json_lines: bool,
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

    /// Delete the fan-out's candidate refs (refs/orbit/<name>/*/*) and remove the candidate
    /// worktrees (<workspace>.c<K>).
    #[arg(long)]
    pub prune_candidates: bool,

    /// Print the plan as a diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `orbit init`'s flags. Serialized (by their flag names) only to tell which were given: the
/// `--force` guard refuses every one that sets what loop.toml holds.
#[derive(Debug, Args, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
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

    /// A name for the check given right after it, e.g. --name unit --verify 'cargo test'
    /// (the name verify.sh, the records and the reports give it) [default: from the
    /// command's words]. Repeatable, one per check.
    #[arg(long = "name", value_name = "NAME")]
    pub name: Vec<String>,

    /// The names `--name` gave, by command: filled from where each stands on the command
    /// line (see [`check_names_by_place`]).
    #[arg(skip)]
    #[serde(skip)]
    pub check_name: Vec<(String, String)>,

    /// An acceptance check (a shell command that exits 0 when it holds). Repeatable.
    #[arg(long = "verify", value_name = "CMD")]
    pub verify: Vec<String>,

    /// A reproduction check: must fail on the base tree (a reproduction that already
    /// passes proves nothing) and pass at the end. Repeatable.
    #[arg(long = "reproduction", value_name = "CMD")]
    pub reproduction: Vec<String>,

    /// A regression check: must pass on the base tree and stay green. Repeatable.
    #[arg(long = "regression", value_name = "CMD")]
    pub regression: Vec<String>,

    /// A holdout check: run only when the agent claims DONE, never shown to the agent (not
    /// in its prompt, its folder, verify.sh or the workspace). Repeatable.
    #[arg(long = "holdout", value_name = "CMD")]
    pub holdout: Vec<String>,

    /// Under the sandbox, accept a holdout check that reads the holdout ($ORBIT_HOLDOUT_DIR)
    /// and runs the project's code without run_hidden, so that code can read the answers
    /// (a hidden test file that imports the project, say): recorded in loop.toml
    /// (holdout-unmasked = true). Without it, orbit init refuses such a check.
    #[arg(long)]
    pub holdout_unmasked: bool,

    /// A file the holdout checks read, copied into the loop directory's holdout/ (pinned;
    /// $ORBIT_HOLDOUT_DIR names it when they run). Repeatable.
    #[arg(long = "holdout-file", value_name = "FILE")]
    pub holdout_file: Vec<PathBuf>,

    /// The workspace's setup: a command run once in each fresh checkout of the loop (its
    /// workspace, each candidate's worktree, the clean checkout of the last check) before any
    /// check runs there, e.g. 'npm ci' or 'python3 -m venv .venv && .venv/bin/pip install
    /// -e .'. What it creates is never committed. Repeatable.
    #[arg(long = "setup", value_name = "CMD")]
    pub setup: Vec<String>,

    /// A file the setup reads (a path from the repository's top, such as package-lock.json):
    /// with the setup commands, the key of the setup's cache (loop.toml setup-inputs). What
    /// the workspace's first setup made on the untouched tree is then copied into a claim's
    /// clean checkout whose inputs are the same instead of running the setup there again.
    /// Only for a setup whose output depends on these files alone and names no path of the
    /// checkout it was made in (node_modules does; a Python virtual environment does not).
    /// Repeatable.
    #[arg(long = "setup-input", value_name = "FILE", requires = "setup")]
    pub setup_input: Vec<String>,

    /// Apply no setup: without it (and without --setup), under the sandbox, orbit init
    /// applies the setup of the dependencies it finds (Cargo.lock, package-lock.json,
    /// pnpm-lock.yaml, yarn.lock, uv.lock, poetry.lock, requirements*.txt, pyproject.toml,
    /// go.sum, pom.xml), which fetches them with the network once, and makes the checks run
    /// offline (loop.toml offline-env).
    #[arg(long, conflicts_with = "setup")]
    pub no_setup: bool,

    /// Whether a DONE's change is measured (loop.toml adequacy) [default: report]. off: not
    /// measured; report: measured once the DONE is recorded, the DONE stands whatever it
    /// finds; gate: measured in the DONE gate, a hunk no check needs (or more surviving
    /// mutants than adequacy-max-survivors) turns the claim into feedback.
    #[arg(long, value_name = "MODE", value_enum)]
    pub adequacy: Option<crate::config::Adequacy>,

    /// What the agent is given back of earlier iterations [default: notes]. notes: its
    /// notes.md and progress.md; feedback: only the goal and the last failure's feedback.
    #[arg(long, value_name = "POLICY", value_enum)]
    pub memory: Option<crate::config::Memory>,

    /// Fan out: each iteration starts N agent runs in parallel from the same base, each in
    /// its own worktree, and keeps the harness's pick of them [default: 1, at most 8]. With
    /// N > 1 the memory policy defaults to feedback (the candidates stay independent).
    #[arg(long, value_name = "N")]
    pub candidates: Option<u64>,

    /// With --candidates: stop the fan-out at the first candidate that passes everything
    /// (every check PASS_K times, the holdout, the judge) instead of waiting for all of them.
    #[arg(long)]
    pub fanout_early_stop: bool,

    /// With --candidates: how many candidates' checks run at once, each in its own worktree
    /// with its own timeout [default: 0: all at once when the CPU time a verify run used,
    /// times the candidates, fits three quarters of the CPUs (checks that wait), else as
    /// many as there are candidates, at most the CPUs]. 1 runs them one after another: for
    /// checks that cannot share the machine (a fixed port, a database).
    #[arg(long, value_name = "N")]
    pub check_jobs: Option<u32>,

    /// Repository paths (globs) the agent must not change. Repeatable. Each must match a
    /// file.
    #[arg(long = "protect", value_name = "GLOB")]
    pub protect: Vec<String>,

    /// Do not protect by default the files that change how the checks' tools run (pytest's
    /// configuration and every conftest.py, package.json, Cargo.toml, the Makefile, a
    /// check's own script, the judge's; loop.toml auto-protect lists them).
    #[arg(long)]
    pub no_auto_protect: bool,

    /// A command that must approve a DONE claim by exiting 0, run in the workspace after
    /// the checks; a repository script it names is protected by default.
    #[arg(long, value_name = "CMD")]
    pub judge_cmd: Option<String>,

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

    /// Print the loop that would be rendered (its checks, what it protects, its loop.toml)
    /// and write nothing.
    #[arg(long, conflicts_with = "force")]
    pub dry_run: bool,

    /// Where the loop's git worktree (its workspace) goes [default:
    /// $XDG_DATA_HOME/orbit/workspaces/<repo-id>/<name>, ~/.local/share without
    /// XDG_DATA_HOME: outside your checkout, so no tool that walks up from it finds your own
    /// files]; outside the loop directory. Created at the first run.
    #[arg(long, value_name = "PATH")]
    pub workspace: Option<PathBuf>,

    /// Run every agent and check in an OS sandbox [default: auto]. bwrap: bubblewrap
    /// (Linux), with the workspace writable and the loop directory, git's control files
    /// and the rest of the system read-only; auto: bubblewrap where the runner's probe says
    /// it runs here, else none; none: no sandbox.
    #[arg(long, value_name = "KIND", value_enum)]
    pub sandbox: Option<crate::config::Sandbox>,

    /// What a sandboxed run reaches of the network [default: allowlist]. allowlist: no
    /// network of its own; a proxy the runner starts for the run lets through the engine's
    /// API (agent runs) and the --allow-host hosts (every run), and refuses and records the
    /// rest; open: the network as you have it.
    #[arg(long, value_name = "MODE", value_enum)]
    pub sandbox_network: Option<crate::config::SandboxNetwork>,

    /// A host every sandboxed run may reach under the allowlist: HOST (ports 80 and 443),
    /// HOST:PORT, *.example.com for its subdomains, [IPv6]:PORT. Repeatable.
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    pub allow_host: Vec<String>,
}

#[derive(Debug, Args)]
pub struct QueueArgs {
    #[command(subcommand)]
    pub command: QueueCommand,
}

#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Add a task: .orbit/queue/<name>.md, ready.
    Add(Box<QueueAddArgs>),
    /// Add every task of a markdown backlog (one `## Title` section per task, with the
    /// same `**Field:** value` lines), or none when one does not parse.
    Import(QueueImportArgs),
    /// Run the queue's tasks until none is left to run (exit 0 when every task is done,
    /// 24 when some is not, 20 when another run holds the queue).
    Run(QueueRunArgs),
    /// Each task's status, attempts, last verdict, cost, branch and merged commit.
    Status(QueueStatusArgs),
    /// Across machines (a pod or a CI job of `orbit schedule --queue --kubernetes` or
    /// `--github-actions`): run the next attempt of TASK in this clone, from the remote's
    /// integration branch, then (--push) push its branch orbit/TASK-aN and its envelope
    /// (refs/notes/orbit-fleet/TASK-aN). Judged by `orbit queue land`, never here.
    Attempt(QueueAttemptArgs),
    /// Across machines, the merge step, in a clone of its own: fetch the attempts pushed to
    /// REMOTE, land each (orbit verify of its envelope, the merge into the integration
    /// branch, the task's checks on the merged tree under its sandbox), record each task's
    /// status or failure section, and push the integration branch with the envelopes.
    Land(QueueLandArgs),
}

#[derive(Debug, Args)]
pub struct QueueAttemptArgs {
    /// The task (its file .orbit/queue/TASK.md on the remote's integration branch, else on
    /// --onto).
    #[arg(value_name = "TASK")]
    pub task: String,

    /// The branch the queue builds on: its integration branch is orbit/queue/BRANCH
    /// [default: the branch checked out].
    #[arg(long, value_name = "BRANCH")]
    pub onto: Option<String>,

    /// The remote the clone was made from, and where --push pushes.
    #[arg(long, value_name = "REMOTE", default_value = "origin")]
    pub remote: String,

    /// Push the attempt's branch and envelope to --remote once its loop stops.
    #[arg(long)]
    pub push: bool,

    /// Only push the attempt this clone ran (the agent's step ran without push access).
    #[arg(long, requires = "push")]
    pub only_push: bool,
}

#[derive(Debug, Args)]
pub struct QueueLandArgs {
    /// The remote the attempts were pushed to; the integration branch is pushed back there.
    #[arg(long = "from", value_name = "REMOTE", default_value = "origin")]
    pub from: String,

    /// The branch the queue builds on: its integration branch is orbit/queue/BRANCH
    /// [default: the remote's default branch].
    #[arg(long, value_name = "BRANCH")]
    pub onto: Option<String>,
}

#[derive(Debug, Args)]
pub struct QueueAddArgs {
    /// The task's goal, in words: what each attempt's agent reads.
    #[arg(value_name = "GOAL")]
    pub goal: String,

    /// The task's verifier: a shell command that exits 0 when the task is done (the loop's
    /// acceptance check, and run again on the merged tree).
    #[arg(long, value_name = "CMD")]
    pub verify: String,

    /// The task's name [default: from the goal's words].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// A task that must be done (merged) before this one starts. Repeatable.
    #[arg(long = "after", value_name = "TASK")]
    pub after: Vec<String>,

    /// Attempts before the task is failed [default: 5].
    #[arg(long, value_name = "M")]
    pub max_attempts: Option<u32>,

    /// Of the ready tasks, the highest priority starts first, then the oldest [default: 0].
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    pub priority: Option<i64>,

    /// The agent of each attempt's loop (see orbit init --engine).
    #[arg(long, value_name = "NAME", value_enum)]
    pub engine: Option<crate::engine::Engine>,

    /// The agent command for --engine custom.
    #[arg(long = "exec", value_name = "CMD ARGS")]
    pub exec: Option<String>,

    /// Each attempt loop's cap of iterations.
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u64>,

    /// Each agent run's timeout, e.g. 10m.
    #[arg(long, value_name = "DUR")]
    pub exec_timeout: Option<String>,

    /// Each attempt loop's wall-clock cap.
    #[arg(long, value_name = "DUR")]
    pub loop_timeout: Option<String>,

    /// Each attempt loop's spend cap, in USD.
    #[arg(long, value_name = "X")]
    pub usd_cap: Option<String>,

    /// Consecutive verify passes required for DONE.
    #[arg(long, value_name = "K")]
    pub pass_k: Option<u32>,

    /// The OS sandbox of each attempt's loop (see orbit init --sandbox).
    #[arg(long, value_name = "KIND", value_enum)]
    pub sandbox: Option<crate::config::Sandbox>,

    /// A path (glob) the agent must not change. Repeatable.
    #[arg(long = "protect", value_name = "GLOB")]
    pub protect: Vec<String>,

    /// Every other flag of `orbit init` (--setup, --regression, --adequacy, --candidates,
    /// --allow-host ...): kept in the task's **Init:** field, given to each attempt's loop.
    #[command(flatten)]
    pub init: InitFlags,
}

#[derive(Debug, Args)]
pub struct QueueImportArgs {
    /// The backlog: a markdown file, one `## Title` section per task.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct QueueRunArgs {
    /// How many attempts run at once, each its own loop.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub jobs: u32,

    /// Start what is ready now (up to --jobs), run those attempts to their stop, then exit
    /// (10 when tasks are left to run).
    #[arg(long)]
    pub once: bool,

    /// The branch the integration branch is made from at the queue's first run [default:
    /// the branch checked out]. That branch itself is never moved.
    #[arg(long, value_name = "BRANCH")]
    pub onto: Option<String>,

    /// The queue's spend cap over all its attempts: no attempt starts that what is left
    /// cannot cover at its engine's estimate (the mean spend of the engine's earlier
    /// attempts, else the task's Usd-Cap), and each attempt's loop may spend at most what
    /// is left.
    #[arg(long, value_name = "USD")]
    pub usd_cap: Option<String>,
}

#[derive(Debug, Args)]
pub struct QueueStatusArgs {
    /// One JSON object (docs/queue.md lists its fields).
    #[arg(long)]
    pub json: bool,
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
pub struct ManArgs {
    /// Write orbit.1 and one page per subcommand (orbit-init.1, ...) into DIR.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to create the demo repository (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Fan out to N simulated candidates per iteration (see `orbit init --candidates`).
    #[arg(long, value_name = "N")]
    pub candidates: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ReferenceArgs {
    /// The page to print on standard output.
    #[arg(value_name = "PAGE", value_enum)]
    pub page: ReferencePage,
}

/// The generated reference pages of docs/.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReferencePage {
    /// docs/cli.md: every subcommand and flag, with its help text.
    Cli,
    /// docs/settings.md: every setting of loop.toml, its kind, bounds and default.
    Settings,
    /// docs/exit-codes.md: the runner's exit codes and every subcommand's.
    ExitCodes,
    /// docs/contract.md: the loop contract, its tables of names generated.
    Contract,
}

/// The check each `--name` of `orbit init` names: the check flag (`--verify`,
/// `--reproduction`, `--regression`) right after it on the command line, as (command, name).
pub fn check_names_by_place(m: &clap::ArgMatches) -> Result<Vec<(String, String)>, String> {
    let placed = |id: &str| -> Vec<(usize, String)> {
        match (m.indices_of(id), m.get_many::<String>(id)) {
            (Some(at), Some(values)) => at.zip(values.cloned()).collect(),
            _ => Vec::new(),
        }
    };
    let mut checks: Vec<(usize, String)> = ["verify", "reproduction", "regression"]
        .into_iter()
        .flat_map(placed)
        .collect();
    checks.sort();
    let names = placed("name");
    let mut out = Vec::new();
    for (k, (at, name)) in names.iter().enumerate() {
        let next_name = names.get(k + 1).map_or(usize::MAX, |(i, _)| *i);
        match checks.iter().find(|(i, _)| i > at) {
            Some((i, cmd)) if *i < next_name => out.push((cmd.clone(), name.clone())),
            _ => {
                return Err(format!(
                    "--name {name} names the check given right after it: write it just before its --verify, --reproduction or --regression"
                ));
            }
        }
    }
    Ok(out)
}

/// `orbit queue add`'s flags that are init's: every flag of `orbit init` the queue neither
/// decides nor holds as a field, as init's words in the order given.
#[derive(Debug, Clone, Default)]
pub struct InitFlags {
    pub words: Vec<String>,
}

const HEADING: &str = "Init flags of each attempt's loop (as orbit init takes them)";

/// Init's arguments `orbit queue add` carries as they are.
fn carried() -> Vec<clap::Arg> {
    InitArgs::augment_args(clap::Command::new("init"))
        .get_arguments()
        .filter(|a| {
            let id = a.get_id().as_str();
            // `--name` names a check in init, the task in `queue add`: in the field only.
            !a.is_positional()
                && id != "name"
                && crate::contract::queue::init_flag_held(id).is_none()
        })
        .cloned()
        .collect()
}

impl Args for InitFlags {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        // After `queue add`'s own flags, in init's order.
        for (k, a) in carried().into_iter().enumerate() {
            cmd = cmd.arg(a.help_heading(HEADING).display_order(1000 + k));
        }
        for (id, flag, _) in crate::contract::queue::INIT_DECIDED
            .iter()
            .filter(|(id, _, _)| *id != "goal")
        {
            let takes = !matches!(*id, "force" | "dry_run");
            cmd = cmd.arg(
                // Hidden, under its long name (no id of `queue add`'s own): it only refuses.
                clap::Arg::new(*flag)
                    .long(*flag)
                    .hide(true)
                    .action(if takes {
                        clap::ArgAction::Append
                    } else {
                        clap::ArgAction::SetTrue
                    }),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for InitFlags {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        for (id, flag, _) in crate::contract::queue::INIT_DECIDED
            .iter()
            .filter(|(id, _, _)| *id != "goal")
        {
            if m.value_source(flag) == Some(clap::parser::ValueSource::CommandLine) {
                return Err(clap::Error::raw(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "{}\n",
                        crate::contract::queue::init_flag_held(id).unwrap_or_default()
                    ),
                ));
            }
        }
        let mut placed: Vec<(usize, Vec<String>)> = Vec::new();
        for a in carried() {
            let id = a.get_id().as_str();
            if m.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
                continue;
            }
            let flag = format!("--{}", a.get_long().unwrap_or(id));
            let at: Vec<usize> = m.indices_of(id).map(Iterator::collect).unwrap_or_default();
            if !a.get_action().takes_values() {
                placed.push((at.first().copied().unwrap_or(usize::MAX), vec![flag]));
                continue;
            }
            let values = m.get_raw(id).into_iter().flatten();
            for (k, v) in values.enumerate() {
                let v = v.to_str().ok_or_else(|| {
                    clap::Error::raw(
                        clap::error::ErrorKind::InvalidUtf8,
                        format!("{flag}: the value is not UTF-8\n"),
                    )
                })?;
                let i = at.get(k).copied().unwrap_or(usize::MAX);
                placed.push((i, vec![flag.clone(), v.to_string()]));
            }
        }
        placed.sort_by_key(|(i, _)| *i);
        Ok(InitFlags {
            words: placed.into_iter().flat_map(|(_, w)| w).collect(),
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
