//! The loop contract's vocabulary, owned here once: the names `docs/contract.md` makes
//! binding (statuses, stop reasons, exit codes, state keys and their types, result.env keys,
//! audit verdicts and finding classes, pin reasons, agent permission files, fault points,
//! settings with their bounds) and the contract version.
//!
//! Rust reads and writes every loop file through these types; [`bash`] renders the same
//! tables into the data prelude of every generated script, so the static bash names each
//! code and word instead of repeating it. Adding a stop reason is one line in
//! [`StopReason`] and its use; the state parsers (both), the prelude and the tests follow.

pub mod bash;
pub mod meanings;
pub mod runtime;
pub mod settings;

use std::fmt;

use serde::{Serialize, Serializer};

pub use settings::{SETTINGS, Scope, Setting, SettingKind, setting};

/// The version of the loop contract (`docs/contract.md`) this build writes.
pub const CONTRACT_VERSION: &str = "2.4.0";

/// State keys a loop written under an older major version of the contract does not have,
/// with the major version that added each: such a state parses without them, and the
/// runner then asks for `orbit recover --migrate` (contract 11).
pub const KEYS_SINCE: &[(&str, u64)] = &[("WORKSPACE", 2)];

/// The major version of a `MAJOR.MINOR.PATCH` contract version.
pub fn major(version: &str) -> Option<u64> {
    version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u64>().ok())
}

/// Whether `version` belongs to an older major version of the contract than this build's:
/// such a loop must be moved by `orbit recover --migrate` before it runs.
pub fn older_major(version: &str) -> bool {
    matches!((major(version), major(CONTRACT_VERSION)), (Some(a), Some(b)) if a < b)
}

/// Whether `version` (`MAJOR.MINOR.PATCH`) belongs to a newer major version of the contract
/// than this build's: such a loop is never run, repaired or rewritten by this build (it
/// would be downgraded). The scripts' `state_newer_major` applies the same rule.
pub fn newer_major(version: &str) -> bool {
    matches!((major(version), major(CONTRACT_VERSION)), (Some(a), Some(b)) if a > b)
}

/// A closed set of contract words: an enum with its text, the list of every member, a
/// parser and the serde form (the text).
macro_rules! vocabulary {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every member, in the contract's order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The word as the contract and the files spell it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The member spelled `text`, if any.
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

pub mod queue;

vocabulary! {
    /// The agent engine of a loop (loop.toml `engine`, `orbit init --engine`): a built-in CLI
    /// whose own output the runner reads, or `custom`, an agent of the user's own that the
    /// generic rules classify. A loop's runner holds its engine's part only
    /// (`lib/engines/<engine>.sh`), and the engine may have permission files of its own
    /// ([`engine_permission_files`]).
    #[derive(serde::Deserialize, clap::ValueEnum)]
    #[serde(rename_all = "lowercase")]
    #[value(rename_all = "lowercase")]
    pub enum Engine {
        Claude = "claude",
        Codex = "codex",
        Gemini = "gemini",
        Qwen = "qwen",
        Aider = "aider",
        Opencode = "opencode",
        Copilot = "copilot",
        Custom = "custom",
    }
}

vocabulary! {
    /// `LAST_STATUS` (contract 4.2).
    pub enum Status {
        Ready = "READY",
        Continue = "CONTINUE",
        Done = "DONE",
        Blocked = "BLOCKED",
        Paused = "PAUSED",
        Stalled = "STALLED",
        Aborted = "ABORTED",
    }
}

impl Status {
    /// The word of the footer line `NEXUS_LOOP_STATUS:`: anything but a verified DONE or an
    /// unrun READY is CONTINUE.
    pub fn footer(self) -> Status {
        match self {
            Status::Done | Status::Ready => self,
            _ => Status::Continue,
        }
    }
}

vocabulary! {
    /// `STOP_REASON` (contract 4.1).
    pub enum StopReason {
        None = "none",
        Tick = "tick",
        MaxIterations = "max_iterations",
        LoopTimeout = "loop_timeout",
        Budget = "budget",
        RateLimit = "rate_limit",
        CircuitOpen = "circuit_open",
        ToolFailure = "tool_failure",
        Stalled = "stalled",
        Oscillating = "oscillating",
        GoalDrift = "goal_drift",
        RewardHack = "reward_hack",
        PermissionHijack = "permission_hijack",
        ScriptTamper = "script_tamper",
        LoopTamper = "loop_tamper",
        GitTamper = "git_tamper",
        VacuousVerify = "vacuous_verify",
        Preflight = "preflight",
        Signal = "signal",
        StateCorrupt = "state_corrupt",
        Stopped = "stopped",
    }
}

impl StopReason {
    /// The integrity reasons: a pinned or guarded file changed (ABORTED, exit 3).
    pub const INTEGRITY: &'static [StopReason] = &[
        StopReason::GoalDrift,
        StopReason::RewardHack,
        StopReason::PermissionHijack,
        StopReason::ScriptTamper,
        StopReason::LoopTamper,
        StopReason::GitTamper,
    ];

    pub fn is_integrity(self) -> bool {
        StopReason::INTEGRITY.contains(&self)
    }

    /// The audit class that names an integrity stop.
    pub fn integrity_class(self) -> Option<FindingClass> {
        Some(match self {
            StopReason::GoalDrift => FindingClass::GoalDrift,
            StopReason::RewardHack => FindingClass::RewardHack,
            StopReason::PermissionHijack => FindingClass::PermissionHijack,
            StopReason::ScriptTamper => FindingClass::ScriptTamper,
            StopReason::LoopTamper => FindingClass::LoopTamper,
            StopReason::GitTamper => FindingClass::GitTamper,
            _ => return None,
        })
    }
}

vocabulary! {
    /// `CB_STATE`: the circuit breaker.
    pub enum CbState {
        Closed = "CLOSED",
        HalfOpen = "HALF_OPEN",
        Open = "OPEN",
    }
}

/// The runner's exit codes (contract 5), each with the name the bash prelude gives it
/// (`EXIT_` + the name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitCode {
    /// DONE (verified), also for a rerun of a DONE loop.
    Done,
    /// An unexpected failure of the script itself (not a contract outcome).
    Failure,
    Preflight,
    Integrity,
    StateCorrupt,
    Continue,
    LoopTimeout,
    Budget,
    RateLimited,
    Blocked,
    Stalled,
    Exhausted,
    VacuousVerify,
    Stopped,
    Locked,
}

impl ExitCode {
    pub const ALL: &'static [ExitCode] = &[
        ExitCode::Done,
        ExitCode::Failure,
        ExitCode::Preflight,
        ExitCode::Integrity,
        ExitCode::StateCorrupt,
        ExitCode::Continue,
        ExitCode::LoopTimeout,
        ExitCode::Budget,
        ExitCode::RateLimited,
        ExitCode::Blocked,
        ExitCode::Stalled,
        ExitCode::Exhausted,
        ExitCode::VacuousVerify,
        ExitCode::Stopped,
        ExitCode::Locked,
    ];

    pub const fn code(self) -> u8 {
        match self {
            ExitCode::Done => 0,
            ExitCode::Failure => 1,
            ExitCode::Preflight => 2,
            ExitCode::Integrity => 3,
            ExitCode::StateCorrupt => 4,
            ExitCode::Continue => 10,
            ExitCode::LoopTimeout => 11,
            ExitCode::Budget => 12,
            ExitCode::RateLimited => 13,
            ExitCode::Blocked => 14,
            ExitCode::Stalled => 15,
            ExitCode::Exhausted => 16,
            ExitCode::VacuousVerify => 17,
            ExitCode::Stopped => 18,
            ExitCode::Locked => 20,
        }
    }

    /// The bash name, `EXIT_<NAME>`.
    pub const fn bash_name(self) -> &'static str {
        match self {
            ExitCode::Done => "EXIT_DONE",
            ExitCode::Failure => "EXIT_FAILURE",
            ExitCode::Preflight => "EXIT_PREFLIGHT",
            ExitCode::Integrity => "EXIT_INTEGRITY",
            ExitCode::StateCorrupt => "EXIT_STATE_CORRUPT",
            ExitCode::Continue => "EXIT_CONTINUE",
            ExitCode::LoopTimeout => "EXIT_LOOP_TIMEOUT",
            ExitCode::Budget => "EXIT_BUDGET",
            ExitCode::RateLimited => "EXIT_RATE_LIMITED",
            ExitCode::Blocked => "EXIT_BLOCKED",
            ExitCode::Stalled => "EXIT_STALLED",
            ExitCode::Exhausted => "EXIT_EXHAUSTED",
            ExitCode::VacuousVerify => "EXIT_VACUOUS_VERIFY",
            ExitCode::Stopped => "EXIT_STOPPED",
            ExitCode::Locked => "EXIT_LOCKED",
        }
    }

    pub fn from_code(code: u8) -> Option<ExitCode> {
        ExitCode::ALL.iter().copied().find(|e| e.code() == code)
    }

    /// Whether a scheduler (systemd's `SuccessExitStatus`) should count this exit as a
    /// success: the loop is DONE, has work left for the next tick, waits for a rate limit
    /// or another runner, or waits for a human (a cap, a stall, a block, an integrity stop,
    /// a stop by its user), which the runner notified once when it happened; later ticks
    /// of such a loop change nothing. A failure is what nothing recorded: a preflight
    /// failure (2), a state that cannot be read (4), an internal error (1), a signal.
    pub fn scheduler_success(self) -> bool {
        !matches!(
            self,
            ExitCode::Failure | ExitCode::Preflight | ExitCode::StateCorrupt
        )
    }
}

vocabulary! {
    /// The verdict `orbit audit` gives a loop (contract 9).
    pub enum Verdict {
        Ready = "READY",
        Running = "RUNNING",
        Idle = "IDLE",
        Done = "DONE",
        Paused = "PAUSED",
        Blocked = "BLOCKED",
        Stalled = "STALLED",
        Crashed = "CRASHED",
        Aborted = "ABORTED",
        Corrupt = "CORRUPT",
        Exhausted = "EXHAUSTED",
    }
}

impl Verdict {
    /// The one name of a loop at rest (no runner, no crash) in the state it recorded: the
    /// name audit, status, the reports and the runner's footer summary all use.
    pub fn at_rest(status: Status, reason: StopReason) -> Verdict {
        match (status, reason) {
            (Status::Ready, _) => Verdict::Ready,
            (Status::Done, _) => Verdict::Done,
            (Status::Paused, _) => Verdict::Paused,
            (Status::Stalled, _) => Verdict::Stalled,
            (Status::Aborted, _) => Verdict::Aborted,
            (Status::Blocked, StopReason::MaxIterations) => Verdict::Exhausted,
            (Status::Blocked, _) => Verdict::Blocked,
            (Status::Continue, _) => Verdict::Idle,
        }
    }
}

vocabulary! {
    /// How urgent a finding is: P0 stop now, P1 recover then continue, P2 note.
    pub enum Severity {
        P0 = "P0",
        P1 = "P1",
        P2 = "P2",
    }
}

vocabulary! {
    /// The classes of audit findings (contract 9).
    pub enum FindingClass {
        ContractMissing = "CONTRACT_MISSING",
        StateDrift = "STATE_DRIFT",
        TornCheckpoint = "TORN_CHECKPOINT",
        VerifyGap = "VERIFY_GAP",
        VerifyFlaky = "VERIFY_FLAKY",
        VacuousVerify = "VACUOUS_VERIFY",
        ValidatorGap = "VALIDATOR_GAP",
        CommitScopeRisk = "COMMIT_SCOPE_RISK",
        ToolFailure = "TOOL_FAILURE",
        CircuitOpen = "CIRCUIT_OPEN",
        ConvergenceStall = "CONVERGENCE_STALL",
        OscillationLoop = "OSCILLATION_LOOP",
        BurnRateAnomaly = "BURN_RATE_ANOMALY",
        GoalDrift = "GOAL_DRIFT",
        RewardHack = "REWARD_HACK",
        PermissionHijack = "PERMISSION_HIJACK",
        ScriptTamper = "SCRIPT_TAMPER",
        /// A file of the loop directory (state, sidecar, manifest, journal, ledger, records,
        /// baselines) changed behind the runner, or is not a regular file (a FIFO, a
        /// device, a socket, a symlink): contract 7's `loop_tamper`.
        LoopTamper = "LOOP_TAMPER",
        /// The repository's git config, hooks or excludes changed, or the workspace is no
        /// longer the loop's worktree: contract 7's `git_tamper`.
        GitTamper = "GIT_TAMPER",
        JournalBroken = "JOURNAL_BROKEN",
        StaleLock = "STALE_LOCK",
        OrphanAgent = "ORPHAN_AGENT",
        UnboundedLoop = "UNBOUNDED_LOOP",
        /// A runner died mid-iteration (no footer, the lock free, an iteration unfinished).
        Crashed = "CRASHED",
        /// The loop's workspace (contract 2.0) is gone from disk.
        WorkspaceMissing = "WORKSPACE_MISSING",
        /// The workspace is not a worktree of the loop's repository, or not on its branch.
        WorkspaceBroken = "WORKSPACE_BROKEN",
        /// The workspace holds uncommitted changes while no runner works in it.
        WorkspaceDirty = "WORKSPACE_DIRTY",
        /// The loop branch `orbit/<name>` was moved by hand (or deleted).
        BranchMoved = "BRANCH_MOVED",
        /// The loop was written under an older major contract (1.x): it must be migrated.
        ContractOutdated = "CONTRACT_OUTDATED",
        /// A check passed with fewer tests run (or more skipped) than on the base tree,
        /// the drop accepted by loop.toml's allow-fewer-tests (contract section 6).
        TestCountDrop = "TEST_COUNT_DROP",
        /// The loop used every iteration max-iterations allows without a verified DONE
        /// (the EXHAUSTED verdict): it waits for a human to raise the cap or change course.
        Exhausted = "EXHAUSTED",
        /// The loop stopped on its wall-clock limit (BLOCKED, `loop_timeout`, exit 11): the
        /// limit counts from its first iteration, so nothing runs again until a human
        /// raises `loop-timeout` (or a lower LOOP_TIMEOUT of the run's environment goes).
        LoopTimeout = "LOOP_TIMEOUT",
        /// The loop's agent and check runs are not under the OS sandbox (`sandbox = "none"`,
        /// or `auto` on a machine where bubblewrap cannot run): a tamper is caught after the
        /// run, not refused, and nothing the agent can read is secret (contract section 7).
        Unsandboxed = "UNSANDBOXED",
        /// The loop's runs are under the OS sandbox with its network open
        /// (`sandbox-network = "open"`, a loop.toml older than the allowlist included): the
        /// agent and the code its checks run may reach any host (contract section 7).
        NetworkOpen = "NETWORK_OPEN",
        /// A DONE's change has hunks no check needs: with each reverted alone, every check
        /// still passed (adequacy.json, written by `orbit adequacy`).
        UnneededHunks = "UNNEEDED_HUNKS",
    }
}

vocabulary! {
    /// The third field of a cost.ledger line: how the amount was known.
    pub enum CostKind {
        Reported = "reported",
        Estimated = "estimated",
        Unknown = "unknown",
    }
}

vocabulary! {
    /// The last field of a cost.ledger line of a reported cost, when it names one: whose
    /// report counted. For an engine that reports its cost, the agent's cost file can only
    /// raise it, never lower it. The runner writes `agent` when the agent's cost file
    /// (`$ORBIT_COST_FILE`) counted over the engine's own report, and nothing otherwise (the
    /// engine's report for an engine that reports its cost, else the cost file: the
    /// contract's three columns); `engine` is read as the engine's report.
    pub enum CostSource {
        Engine = "engine",
        Agent = "agent",
    }
}

vocabulary! {
    /// `ORBIT_PHASE` and result.env `PHASE`.
    pub enum Phase {
        Work = "work",
        Confirm = "confirm",
        Wrapup = "wrapup",
    }
}

vocabulary! {
    /// The events notify.sh is called with (contract 8): a stop with its status, every
    /// iteration when asked, and the failures that stop a run before its state is known.
    pub enum NotifyEvent {
        Done = "DONE",
        Blocked = "BLOCKED",
        Paused = "PAUSED",
        Stalled = "STALLED",
        Aborted = "ABORTED",
        Iteration = "ITERATION",
        PreflightFailed = "PREFLIGHT_FAILED",
        StateCorrupt = "STATE_CORRUPT",
    }
}

vocabulary! {
    /// result.env `AGENT_OUTCOME`: how the runner classified an agent run.
    pub enum AgentOutcome {
        Ok = "ok",
        AgentError = "agent_error",
        Timeout = "timeout",
        RateLimited = "rate_limited",
        /// Not found or not permitted (exit 126/127): retrying cannot help.
        Permanent = "permanent",
        /// A fan-out candidate's run the runner stopped: another candidate passed
        /// everything first (`fanout-early-stop`).
        Stopped = "stopped",
    }
}

vocabulary! {
    /// result.env `VERIFY`: what verify.sh said of an iteration.
    pub enum VerifyOutcome {
        Pass = "pass",
        Fail = "fail",
        Skip = "skip",
    }
}

vocabulary! {
    /// Where `ORBIT_FAULT=<point>` makes the runner kill itself (contract 5), and where it
    /// makes recover stop half-way (the `recover_` points).
    pub enum FaultPoint {
        AfterLock = "after_lock",
        BeforeAgent = "before_agent",
        AfterAgent = "after_agent",
        MidStateWrite = "mid_state_write",
        AfterStateBeforeSidecar = "after_state_before_sidecar",
        BeforeCommit = "before_commit",
        AfterCommit = "after_commit",
        MidProgressAppend = "mid_progress_append",
        /// A fan-out: every candidate's run ended and its cost is in the ledger.
        FanoutAfterAgents = "fanout_after_agents",
        /// A fan-out: the first candidate judged and recorded.
        FanoutAfterCandidate = "fanout_after_candidate",
        /// A fan-out: the survivor selected, the workspace not yet changed.
        FanoutBeforeApply = "fanout_before_apply",
        /// A fan-out: the survivor's change in the workspace, the iteration not recorded.
        FanoutAfterApply = "fanout_after_apply",
        RecoverBeforeCheckpoint = "recover_before_checkpoint",
    }
}

vocabulary! {
    /// The `code` of a `verify_pass` or `verify_fail` event: why a check run counted as it
    /// did where it was more than a plain pass or fail (contract 6).
    pub enum CheckCode {
        VerifyFlaky = "VERIFY_FLAKY",
        VerifyClean = "VERIFY_CLEAN",
        RegressionRed = "REGRESSION_RED",
        VacuousVerify = "VACUOUS_VERIFY",
        NetRefused = "NET_REFUSED",
        CheckCannotRun = "CHECK_CANNOT_RUN",
    }
}

vocabulary! {
    /// The events of events.jsonl the runner and recover write (contract 4.4).
    pub enum EventName {
        LoopStart = "loop_start",
        IterationStart = "iteration_start",
        AgentExit = "agent_exit",
        VerifyPass = "verify_pass",
        VerifyFail = "verify_fail",
        IntegrityPass = "integrity_pass",
        IntegrityFail = "integrity_fail",
        CircuitChange = "circuit_change",
        StateWrite = "state_write",
        DoneClaim = "done_claim",
        DoneRejected = "done_rejected",
        HoldoutPass = "holdout_pass",
        HoldoutFail = "holdout_fail",
        RateLimited = "rate_limited",
        /// Right after the runner writes `iterations/N/result.env` (before the commit and
        /// `iteration_end`): `verdict`, `reason` and `sha256`, the sha256 of the record as
        /// written, so a record changed or planted afterwards is told apart.
        IterationResult = "iteration_result",
        IterationEnd = "iteration_end",
        Recovery = "recovery",
        LoopStop = "loop_stop",
        WorkspaceCreated = "workspace_created",
        WorkspaceRecreated = "workspace_recreated",
        WorkspaceHeadMoved = "workspace_head_moved",
        BranchMoved = "branch_moved",
        /// A fan-out candidate's worktree created (`candidate`, `path`).
        CandidateWorktree = "candidate_worktree",
        /// A fan-out candidate's agent run starts (`candidate`, `of`, `path`).
        CandidateStart = "candidate_start",
        /// A fan-out candidate judged and recorded: its outcome, checks, holdout, change,
        /// why it was disqualified, its commit and the sha256 of its candidate.env.
        CandidateEnd = "candidate_end",
        /// The survivor of a fan-out (`candidate`, 0 for none) and the reason.
        SurvivorSelected = "survivor_selected",
        /// A DONE loop's candidate worktrees and refs removed.
        CandidatesPruned = "candidates_pruned",
        /// The red gate's test counts, the base tree's (`sha256` of
        /// `iterations/baseline/counts.tsv`, `absent` without one; `counts`:
        /// `check=ran/skipped ...`).
        TestCountsBase = "test_counts_base",
        /// A check exited 0 with no test run or fewer than on the base tree (`check`, `run`,
        /// `verdict` zero|fewer|allowed, `ran`, `base_ran`, `skipped`, `base_skipped`,
        /// `unit`, `allowed`: loop.toml's allow-fewer-tests accepted the drop).
        TestCountDrop = "test_count_drop",
        /// The setup commands ran in a new work tree (`where`: workspace, candidate-K or
        /// clean; `commands`).
        SetupDone = "setup_done",
        /// A setup command failed, timed out or changed a tracked file (`where`, `why`).
        SetupFail = "setup_fail",
        /// A DONE's envelope written (`commit`, `digest`, `signed`; `unsigned_why` where the
        /// user's git configuration signs with SSH but the runner could not; `by` when
        /// `orbit verify --rerun --record` wrote it).
        EnvelopeWrite = "envelope_write",
        /// `orbit adequacy` measured the loop's branch head and wrote adequacy.json
        /// (`commit`, `hunks_needed`, `hunks_tried`, `mutants_killed`, `mutants_tried`,
        /// `details_sha256`).
        AdequacyMeasured = "adequacy_measured",
    }
}

vocabulary! {
    /// The `verify_failure_code` of `orbit verify`'s `verify_fail` event, and the failure
    /// `orbit verify` and `orbit merge` print: why a hand-off did not verify.
    pub enum VerifyFailure {
        Unverified = "UNVERIFIED",
        TreeMoved = "TREE_MOVED",
        IntegrityMismatch = "INTEGRITY_MISMATCH",
        ChecksChanged = "CHECKS_CHANGED",
        EnvelopeCorrupt = "ENVELOPE_CORRUPT",
        EnvelopeVersion = "ENVELOPE_VERSION",
        JournalBroken = "JOURNAL_BROKEN",
        RerunFailed = "RERUN_FAILED",
        SignatureBad = "SIGNATURE_BAD",
        SignatureMissing = "SIGNATURE_MISSING",
    }
}

/// The type of a state.env value; the Rust and bash parsers both check it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// `MAJOR.MINOR.PATCH`, each part at most 6 digits.
    Semver,
    /// A whole number >= 1 (at most 18 digits, no leading zero).
    Positive,
    /// A whole number >= 0 (at most 18 digits, no leading zero).
    Uint,
    /// Lowercase hex, at most 64 digits (empty allowed).
    Hex,
    /// A git ref name or empty.
    RefName,
    /// One of [`Status`].
    Status,
    /// One of [`StopReason`].
    StopReason,
    /// One of [`CbState`].
    CbState,
    /// An absolute path (at most [`MAX_PATH_LEN`] bytes, no control character) or empty.
    Path,
}

impl ValueType {
    /// The bash prelude's name for the type (`ORBIT_STATE_TYPE[KEY]`).
    pub const fn bash_name(self) -> &'static str {
        match self {
            ValueType::Semver => "semver",
            ValueType::Positive => "positive",
            ValueType::Uint => "uint",
            ValueType::Hex => "hex",
            ValueType::RefName => "ref",
            ValueType::Status => "status",
            ValueType::StopReason => "stop_reason",
            ValueType::CbState => "cb_state",
            ValueType::Path => "path",
        }
    }
}

/// The largest integer a state value may hold: 18 digits stay inside bash's signed 64 bits.
pub const MAX_UINT_DIGITS: usize = 18;

/// The most digits of one part of a `MAJOR.MINOR.PATCH` version.
pub const MAX_SEMVER_PART_DIGITS: usize = 6;

/// The most digits of a hex state value (a sha256).
pub const MAX_HEX_DIGITS: usize = 64;

/// The longest git ref name a state value may hold.
pub const MAX_REF_LEN: usize = 200;

/// The longest path a state value may hold.
pub const MAX_PATH_LEN: usize = 4096;

/// The state.env keys, written once (contract 4.1): `KEY field: RustType = ValueType, the
/// value of a freshly rendered loop;` in the order the file lists them. `with_state_keys!(callback)` hands the list to a macro:
/// [`STATE_KEYS`] (the parsers' and the prelude's table) and `state::State` (its fields,
/// parser and printer) are both made from it, so a new key is one line here and its use.
macro_rules! with_state_keys {
    ($callback:ident) => {
        $callback! {
            CONTRACT_VERSION contract_version: String = Semver, String::new();
            GEN generation: u64 = Positive, 1;
            NEXT_ITERATION next_iteration: u64 = Positive, 1;
            LAST_STATUS last_status: Status = Status, Status::Ready;
            STOP_REASON stop_reason: StopReason = StopReason, StopReason::None;
            STARTED_AT started_at: u64 = Uint, 0;
            LAST_UPDATED_AT last_updated_at: u64 = Uint, 0;
            ORIGIN_BRANCH origin_branch: String = RefName, String::new();
            ITER_BRANCH iter_branch: String = RefName, String::new();
            COST_MICROUSD cost_microusd: u64 = Uint, 0;
            CB_STATE cb_state: CbState = CbState, CbState::Closed;
            CB_FAILS cb_fails: u64 = Uint, 0;
            CB_SIG cb_sig: String = Hex, String::new();
            CB_OPENED_AT cb_opened_at: u64 = Uint, 0;
            VERIFY_STREAK verify_streak: u64 = Uint, 0;
            RESUME_AT resume_at: u64 = Uint, 0;
            WORKSPACE workspace: String = Path, String::new();
        }
    };
}
pub(crate) use with_state_keys;

macro_rules! state_key_table {
    ($($key:ident $field:ident: $ty:ty = $vt:ident, $init:expr;)+) => {
        /// Every state.env key, in the order the file lists them, with its type.
        pub const STATE_KEYS: &[(&str, ValueType)] = &[$((stringify!($key), ValueType::$vt),)+];
    };
}
with_state_keys!(state_key_table);

fn is_uint(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= MAX_UINT_DIGITS
        && v.bytes().all(|b| b.is_ascii_digit())
        && (v == "0" || !v.starts_with('0'))
}

fn is_ref_name(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= MAX_REF_LEN
            && !v.starts_with(['-', '/', '.'])
            && !v.contains("..")
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-')))
}

impl ValueType {
    /// Whether `v` is a value of this type. The bash parser's `state_check_value` applies
    /// the same rules (a property test holds the two together).
    pub fn accepts(self, v: &str) -> bool {
        match self {
            ValueType::Semver => {
                let parts: Vec<&str> = v.split('.').collect();
                parts.len() == 3
                    && parts
                        .iter()
                        .all(|p| is_uint(p) && p.len() <= MAX_SEMVER_PART_DIGITS)
            }
            ValueType::Positive => is_uint(v) && v != "0",
            ValueType::Uint => is_uint(v),
            ValueType::Hex => {
                v.len() <= MAX_HEX_DIGITS
                    && v.bytes()
                        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            }
            ValueType::RefName => is_ref_name(v),
            ValueType::Status => Status::parse(v).is_some(),
            ValueType::StopReason => StopReason::parse(v).is_some(),
            ValueType::CbState => CbState::parse(v).is_some(),
            ValueType::Path => v.is_empty() || (v.starts_with('/') && v.len() <= MAX_PATH_LEN),
        }
    }
}

/// The type of a state key, if it is one.
pub fn state_key_type(key: &str) -> Option<ValueType> {
    STATE_KEYS.iter().find(|(k, _)| *k == key).map(|(_, t)| *t)
}

/// Every key of `iterations/NNNNNN/result.env`, in the order the runner writes them, and
/// whether its value is a whole number (when present and not empty).
pub const RESULT_KEYS: &[(&str, bool)] = &[
    ("ITERATION", true),
    ("STARTED_AT", true),
    ("ENDED_AT", true),
    ("PHASE", false),
    ("AGENT_EXIT", false),
    ("AGENT_OUTCOME", false),
    ("ATTEMPTS", true),
    ("DURATION", true),
    ("VERIFY", false),
    ("VERIFY_FAILING", false),
    ("VERIFY_SIG", false),
    ("TREE_BEFORE", false),
    ("TREE_AFTER", false),
    ("CHANGED", true),
    ("COST_MICROUSD", true),
    ("COST_KIND", false),
    ("DONE_CLAIM", false),
    ("DONE_VERDICT", false),
    ("VERDICT", false),
    ("STOP_REASON", false),
    ("EXIT_CODE", true),
    ("SUMMARY", false),
    ("CB_FAILS", true),
    ("VERIFY_STREAK", true),
    ("CB_SIG", false),
    ("AGENT_MESSAGE", false),
    // The HOST:PORT words the sandbox's network allowlist refused to the iteration's runs
    // (empty when none; the runs are in the iteration's net.log).
    ("NET_REFUSED", false),
    // What stood where the agent's folder `.orbit-agent` was after the iteration's runs when
    // that was no directory ("a symlink to /etc", "a regular file", "a FIFO"; empty when it
    // was one): removed by the runner, never committed.
    ("AGENT_FOLDER", false),
];

/// Files orbit pins when it renders a loop; goal.md, the protected paths and the agent
/// permission files are added by the runner's first run (contract 7).
pub const INIT_PINNED: &[&str] = &[
    "prompt.md",
    "verify.sh",
    "run-loop.sh",
    "recover.sh",
    "notify.sh",
    "loop.toml",
    "holdout.sh",
    "lib.sh",
    "orbit.sha256",
];

/// The regular files a loop directory may hold at its top level (contract 3, and the
/// runner's own bookkeeping): each must be a regular file when it exists. One that is a
/// FIFO, a socket, a device, a directory or a symlink is a `loop_tamper`; no reader ever
/// opens it the plain way (a FIFO would block it).
pub const LOOP_FILES: &[&str] = &[
    "goal.md",
    "loop.toml",
    "prompt.md",
    "verify.sh",
    "run-loop.sh",
    "recover.sh",
    "notify.sh",
    "holdout.sh",
    "lib.sh",
    "state.env",
    "state.env.sha256",
    "pins.sha256",
    PINS_SETS,
    PINS_HOME,
    "progress.md",
    "notes.md",
    "events.jsonl",
    "cost.ledger",
    "runner.log",
    ".action-sig.log",
    ".failures.log",
    ".iter-timings.log",
    ".baseline-commit",
    ".baseline-tree",
    ".branch-head",
    ".origin-branch",
    ".run-loop.lock",
    ".tree-index",
    ".commit-index",
    "cron.log",
    "systemd.log",
    "notify.secrets",
    "schedule.installed",
    "envelope.json",
    "envelope.json.sig",
    "adequacy.json",
    ".setup-cache.sum",
    "orbit.sha256",
];

/// The directories of a loop directory that the files above live beside: each must be a
/// directory (never a symlink to one).
pub const LOOP_DIRS: &[&str] = &["iterations", ".pins", "backups", "holdout", ".setup-cache"];

/// The pinned protect sets (contract 7), beside pins.sha256: one line per protect glob,
/// `<sha256>  <glob>`, the sha256 of the NUL-terminated, byte-sorted list of the paths the
/// glob matches in the workspace (`crate::protect::set_files`, the runner's `protect_list`:
/// the index, and every other file but what the user's and the base commit's ignore rules
/// ignore), written at the first run.
pub const PINS_SETS: &str = "pins.sets";

/// What the runner holds outside the repository (contract 7), beside pins.sha256: the
/// engine's user-level files that name commands, permissions, hooks, servers, skills,
/// plugins or agents, and the env file, as the loop's first run found them. Header lines
/// `#<TAB>KIND<TAB>PATH<TAB>ARG` name what is held, `VALUE  PATH` lines record it
/// (`crate::home` reads it; the runner's `lib/home_record.sh` computes it).
pub const PINS_HOME: &str = "pins.home";

/// The scripts of the loop directory (a change to one, or to loop.toml, is `script_tamper`).
pub const SCRIPTS: &[&str] = &["run-loop.sh", "recover.sh", "notify.sh", "lib.sh"];

/// The agents' permission files as git pathspec globs relative to the repository root
/// (contract 7): a change is `permission_hijack`, and one that appears is too.
pub const PERMISSION_FILES: &[&str] = &[
    ".claude/settings*.json",
    ".codex/config.toml",
    ".gemini/settings.json",
];

/// The permission files of one engine beyond [`PERMISSION_FILES`]: the files in the
/// repository that engine's CLI reads its permissions, tools or startup commands from
/// (`dir/name`, the name a glob of `*` or none; a name alone is at the root). Pinned and
/// watched like the others for a loop of that engine only: a claude loop has no reason
/// to care about a committed opencode.json.
pub fn engine_permission_files(engine: Engine) -> &'static [&'static str] {
    match engine {
        // qwen-code (a gemini-cli fork): tools, approval mode, MCP servers.
        Engine::Qwen => &[".qwen/settings.json"],
        // aider: its options (shell commands, test command, auto commits) and the variables
        // it reads from .env (AIDER_*).
        Engine::Aider => &[".aider.conf.yml", ".aider.model.settings.yml", ".env"],
        // opencode: its plugins (code it loads) and agents. The runner has opencode read no
        // project configuration at all (OPENCODE_DISABLE_PROJECT_CONFIG): these are watched
        // besides, should a version read them anyway. Not opencode.json, which opencode
        // rewrites itself when it reads one.
        Engine::Opencode => &[".opencode/plugin/*", ".opencode/agent/*"],
        // GitHub Copilot CLI, in a folder the user trusted (the workspace is inside their
        // checkout): its hooks (shell commands run at session start and around every tool,
        // before its permission rules), its MCP servers and language servers (commands it
        // starts), and its custom agents (their own tools and servers).
        Engine::Copilot => &[
            ".github/hooks/*",
            ".mcp.json",
            ".github/lsp.json",
            ".github/agents/*",
        ],
        // The contract's list (PERMISSION_FILES) holds theirs; a custom agent's are unknown.
        Engine::Claude | Engine::Codex | Engine::Gemini | Engine::Custom => &[],
    }
}

/// Whether `path` (relative to the root) is matched by `glob` as [`engine_permission_files`]
/// writes them: the directory exactly, the name exactly or `*` for any name not starting
/// with a dot.
fn permission_glob_match(glob: &str, path: &str) -> bool {
    let (gdir, gname) = glob.rsplit_once('/').unwrap_or(("", glob));
    let (pdir, pname) = path.rsplit_once('/').unwrap_or(("", path));
    gdir == pdir
        && (gname == pname || (gname == "*" && !pname.starts_with('.') && !pname.is_empty()))
}

/// Whether a repository-relative path (or a pin path reaching the repository through
/// `../`) is an agent permission file of a loop of `engine`: contract 7's list, and that
/// engine's own (the runner's `orbit_permission_file`, which knows only its loop's engine).
/// `None`: a loop whose engine cannot be read (its loop.toml broken): contract 7's list.
pub fn is_permission_file(path: &str, engine: Option<Engine>) -> bool {
    let mut p = path;
    while let Some(rest) = p.strip_prefix("../") {
        p = rest;
    }
    p = p.trim_start_matches("./");
    if engine
        .map_or(&[][..], engine_permission_files)
        .iter()
        .any(|g| permission_glob_match(g, p))
    {
        return true;
    }
    let (dir, name) = match p.rsplit_once('/') {
        Some((d, n)) => (d, n),
        None => return false,
    };
    // Only at the repository root, as the pathspecs above say.
    let dir_ok = |want: &str| dir == want;
    (dir_ok(".claude") && name.starts_with("settings") && name.ends_with(".json"))
        || (dir_ok(".codex") && name == "config.toml")
        || (dir_ok(".gemini") && name == "settings.json")
}

/// A pin path's file relative to the workspace root: contract 2.0 pins name workspace files
/// by their absolute path under the loop's `WORKSPACE`; `None` for a loop file or a path
/// outside the workspace.
pub fn workspace_relative<'a>(path: &'a str, workspace: &str) -> Option<&'a str> {
    if workspace.is_empty() {
        return None;
    }
    path.strip_prefix(workspace.trim_end_matches('/'))?
        .strip_prefix('/')
        .filter(|rest| !rest.is_empty())
}

/// [`pin_reason`] for a loop whose workspace is `workspace` (its state's `WORKSPACE`): a
/// pinned workspace file is an agent permission file by its place in the workspace.
pub fn pin_reason_in(path: &str, workspace: &str, engine: Option<Engine>) -> StopReason {
    match workspace_relative(path, workspace) {
        Some(rel) if is_permission_file(rel, engine) => StopReason::PermissionHijack,
        Some(_) => StopReason::RewardHack,
        None => pin_reason(path, engine),
    }
}

/// What a change to a pinned path means: the `STOP_REASON` (contract 7). Paths are as in
/// pins.sha256: loop files by name, repository files through `../` (contract 1.0) or by
/// their absolute path in the workspace (2.0: see [`pin_reason_in`]).
pub fn pin_reason(path: &str, engine: Option<Engine>) -> StopReason {
    let in_loop = !path.contains('/');
    if in_loop {
        match path {
            "goal.md" => StopReason::GoalDrift,
            "verify.sh" | "holdout.sh" => StopReason::RewardHack,
            _ => StopReason::ScriptTamper,
        }
    } else if is_permission_file(path, engine) {
        StopReason::PermissionHijack
    } else {
        StopReason::RewardHack
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engines_own_permission_files_are_told_apart_at_the_root_only() {
        for (engine, p) in [
            (Engine::Aider, ".aider.conf.yml"),
            (Engine::Aider, ".env"),
            (Engine::Opencode, ".opencode/plugin/x.js"),
            (Engine::Opencode, "./.opencode/agent/a.md"),
            (Engine::Qwen, ".qwen/settings.json"),
            (Engine::Aider, "../.aider.conf.yml"),
            (Engine::Copilot, ".github/hooks/ci.json"),
            (Engine::Copilot, ".mcp.json"),
            (Engine::Copilot, ".github/lsp.json"),
            (Engine::Copilot, ".github/agents/helper.agent.md"),
            (Engine::Claude, ".claude/settings.json"),
            (Engine::Copilot, ".gemini/settings.json"),
        ] {
            assert!(is_permission_file(p, Some(engine)), "{engine}: {p}");
        }
        for (engine, p) in [
            (Engine::Opencode, "opencode.json"),
            (Engine::Opencode, ".opencode/plugin/.hidden"),
            (Engine::Opencode, ".opencode/plugin/"),
            (Engine::Aider, "sub/.env"),
            (Engine::Aider, "env"),
            (Engine::Copilot, ".github/workflows/ci.yml"),
            (Engine::Copilot, "sub/.mcp.json"),
            // Another engine's files are that loop's work, as the runner judges them.
            (Engine::Claude, ".env"),
            (Engine::Claude, ".mcp.json"),
            (Engine::Aider, ".github/hooks/ci.json"),
        ] {
            assert!(!is_permission_file(p, Some(engine)), "{engine}: {p}");
        }
        assert!(engine_permission_files(Engine::Claude).is_empty());
        assert!(engine_permission_files(Engine::Aider).contains(&".aider.conf.yml"));
    }

    #[test]
    fn workspace_pins_are_judged_by_their_place_in_the_workspace() {
        let ws = "/r/.orbit/.workspaces/x";
        assert_eq!(
            pin_reason_in(
                "/r/.orbit/.workspaces/x/.claude/settings.json",
                ws,
                Some(Engine::Claude)
            ),
            StopReason::PermissionHijack
        );
        assert_eq!(
            pin_reason_in(
                "/r/.orbit/.workspaces/x/docs/.claude/settings.json",
                ws,
                Some(Engine::Claude)
            ),
            StopReason::RewardHack
        );
        assert_eq!(
            pin_reason_in(
                "/r/.orbit/.workspaces/x/tests/a.rs",
                ws,
                Some(Engine::Claude)
            ),
            StopReason::RewardHack
        );
        assert_eq!(
            pin_reason_in("goal.md", ws, Some(Engine::Claude)),
            StopReason::GoalDrift
        );
        assert_eq!(
            pin_reason_in("run-loop.sh", ws, Some(Engine::Claude)),
            StopReason::ScriptTamper
        );
        assert_eq!(workspace_relative("/r/.orbit/.workspaces/xy/a", ws), None);
        assert_eq!(
            workspace_relative("/r/.orbit/.workspaces/x/a", ws),
            Some("a")
        );
    }

    #[test]
    fn words_round_trip() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(*s));
        }
        for r in StopReason::ALL {
            assert_eq!(StopReason::parse(r.as_str()), Some(*r));
        }
        for c in FindingClass::ALL {
            assert_eq!(FindingClass::parse(c.as_str()), Some(*c));
        }
        assert_eq!(Status::parse("done"), None);
        // Each integrity stop has its own audit class; the tamper classes are words of
        // the contract's vocabulary.
        for r in StopReason::INTEGRITY {
            let class = r
                .integrity_class()
                .expect("an integrity reason has a class");
            assert_eq!(class.as_str(), r.as_str().to_ascii_uppercase());
        }
        assert_eq!(
            FindingClass::parse("LOOP_TAMPER"),
            Some(FindingClass::LoopTamper)
        );
        assert_eq!(
            FindingClass::parse("GIT_TAMPER"),
            Some(FindingClass::GitTamper)
        );
        assert_eq!(
            EventName::parse("iteration_result"),
            Some(EventName::IterationResult)
        );
        assert_eq!(Status::Paused.footer(), Status::Continue);
    }

    #[test]
    fn every_file_orbit_pins_or_keeps_secret_is_a_loop_file() {
        for f in INIT_PINNED
            .iter()
            .chain([&crate::init::NOTIFY_SECRETS, &PINS_SETS, &PINS_HOME])
        {
            assert!(LOOP_FILES.contains(f), "{f}");
        }
        let mut all: Vec<&str> = LOOP_FILES.iter().chain(LOOP_DIRS).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), LOOP_FILES.len() + LOOP_DIRS.len());
    }

    #[test]
    fn only_a_higher_major_is_newer() {
        assert!(newer_major("9.0.0"));
        assert!(newer_major("3.0.0"));
        assert!(!newer_major("2.0.0"));
        assert!(older_major("1.0.0"));
        assert!(!older_major("2.1.0"));
        assert!(!newer_major(CONTRACT_VERSION));
        assert!(!newer_major("1.7.3"));
        assert!(older_major("1.7.3"));
        assert!(!newer_major("0.9.0"));
    }

    #[test]
    fn exit_codes_are_distinct_and_named_for_bash() {
        let mut codes: Vec<u8> = ExitCode::ALL.iter().map(|e| e.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ExitCode::ALL.len());
        for e in ExitCode::ALL {
            assert_eq!(ExitCode::from_code(e.code()), Some(*e));
            assert!(e.bash_name().starts_with("EXIT_"));
        }
    }

    #[test]
    fn pin_reasons_follow_the_contract() {
        assert_eq!(
            pin_reason("goal.md", Some(Engine::Claude)),
            StopReason::GoalDrift
        );
        assert_eq!(
            pin_reason("verify.sh", Some(Engine::Claude)),
            StopReason::RewardHack
        );
        assert_eq!(
            pin_reason("holdout.sh", Some(Engine::Claude)),
            StopReason::RewardHack
        );
        assert_eq!(
            pin_reason("holdout/cases.txt", Some(Engine::Claude)),
            StopReason::RewardHack
        );
        assert_eq!(
            pin_reason("run-loop.sh", Some(Engine::Claude)),
            StopReason::ScriptTamper
        );
        assert_eq!(
            pin_reason("loop.toml", Some(Engine::Claude)),
            StopReason::ScriptTamper
        );
        assert_eq!(
            pin_reason("../../tests/a.rs", Some(Engine::Claude)),
            StopReason::RewardHack
        );
        for p in [
            "../../.claude/settings.local.json",
            "../../.claude/settings.json",
            "../../.codex/config.toml",
            "../../.gemini/settings.json",
        ] {
            assert_eq!(
                pin_reason(p, Some(Engine::Claude)),
                StopReason::PermissionHijack,
                "{p}"
            );
        }
        // Deeper copies are not the agents' permission files.
        assert_eq!(
            pin_reason("../../docs/.codex/config.toml", Some(Engine::Claude)),
            StopReason::RewardHack
        );
    }

    #[test]
    fn value_types() {
        assert!(ValueType::Semver.accepts("1.0.0"));
        assert!(!ValueType::Semver.accepts("1.0"));
        assert!(!ValueType::Positive.accepts("0"));
        assert!(ValueType::Uint.accepts("0"));
        assert!(!ValueType::Uint.accepts("01"));
        assert!(!ValueType::Uint.accepts("1234567890123456789"));
        assert!(ValueType::RefName.accepts(""));
        assert!(!ValueType::RefName.accepts("a..b"));
        assert!(ValueType::StopReason.accepts("loop_tamper"));
    }
}
