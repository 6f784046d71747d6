//! What each of the contract's names means, next to the names: `docs/contract.md`'s tables
//! are generated from these (`orbit reference contract`), so a name without a meaning does
//! not compile (each `meaning` is an exhaustive match) and a meaning cannot drift from the
//! name it describes.

use super::queue::{QueueExit, TaskStatus};
use super::{
    AgentOutcome, CbState, CheckCode, CostKind, CostSource, EventName, FaultPoint, FindingClass,
    NotifyEvent, Phase, Severity, Status, StopReason, Verdict, VerifyFailure, VerifyOutcome,
};

impl Status {
    /// What the status says of the loop (contract 4.2).
    pub const fn meaning(self) -> &'static str {
        match self {
            Status::Ready => "Rendered, never run.",
            Status::Continue => "Work remains and the loop may go on by itself.",
            Status::Done => {
                "Verified DONE: set only by the runner, only through the DONE gate. Terminal."
            }
            Status::Blocked => {
                "A human must look: the circuit is open, a tool failed, a preflight failed, a commit was refused, a cap of iterations or of wall-clock time was reached."
            }
            Status::Paused => {
                "A budget cap (a human resumes), a rate limit (resumes by itself after `RESUME_AT`) or `orbit stop` (reason `stopped`)."
            }
            Status::Stalled => "No progress: convergence stall or oscillation.",
            Status::Aborted => "An integrity violation (one of the integrity stop reasons).",
        }
    }
}

impl StopReason {
    /// Why the loop stopped (contract 4.1).
    pub const fn meaning(self) -> &'static str {
        match self {
            StopReason::None => "The loop has not stopped.",
            StopReason::Tick => "A `--once` tick ended with work remaining.",
            StopReason::MaxIterations => "`max-iterations` used up without a verified DONE.",
            StopReason::LoopTimeout => "The loop's wall-clock cap (`loop-timeout`) was reached.",
            StopReason::Budget => "The spend cap (`usd-cap`) was reached.",
            StopReason::RateLimit => {
                "The provider rate-limited the agent; `RESUME_AT` says when to try again."
            }
            StopReason::CircuitOpen => {
                "The circuit breaker opened: the same failure repeated `cb-threshold` times."
            }
            StopReason::ToolFailure => {
                "A tool the loop needs failed: the agent cannot run, the same check failure three times while the tree changed, a commit refused, a check that cannot run."
            }
            StopReason::Stalled => "No change in the tree for `convergence-window` iterations.",
            StopReason::Oscillating => "The tree went back to an earlier state (A-B-A).",
            StopReason::GoalDrift => "goal.md changed after it was pinned.",
            StopReason::RewardHack => {
                "verify.sh, holdout.sh, a holdout file, a protected path or a protected set changed, or the change reaches for the holdout."
            }
            StopReason::PermissionHijack => {
                "An agent permission file, the engine's user-level files or the env file changed or appeared."
            }
            StopReason::ScriptTamper => {
                "A script of the loop directory, loop.toml or the installed schedule changed."
            }
            StopReason::LoopTamper => {
                "Another file of the loop directory (state, sidecar, manifest, journal, ledger, records, baselines) changed behind the runner, is not a regular file, or the loop directory itself was removed or replaced."
            }
            StopReason::GitTamper => {
                "git's configuration, hooks, excludes, attributes or replace refs changed, or a file git reads."
            }
            StopReason::VacuousVerify => "verify.sh already passes on the untouched tree.",
            StopReason::Preflight => "The environment failed a check before anything ran.",
            StopReason::Signal => "A signal stopped the runner; the state was saved, resumable.",
            StopReason::StateCorrupt => "state.env cannot be trusted: run `orbit recover`.",
            StopReason::Stopped => "`orbit stop`: every run exits 18 until `orbit resume`.",
        }
    }
}

impl CbState {
    /// The circuit breaker's state.
    pub const fn meaning(self) -> &'static str {
        match self {
            CbState::Closed => "Runs go on.",
            CbState::HalfOpen => "After the cooldown: one probe iteration decides.",
            CbState::Open => {
                "Stopped until `cb-cooldown` has passed or `orbit recover --reset-circuit`."
            }
        }
    }
}

impl Verdict {
    /// What `orbit audit` says of a loop (contract 9).
    pub const fn meaning(self) -> &'static str {
        match self {
            Verdict::Ready => "Rendered, never run.",
            Verdict::Running => "A runner holds the lock now.",
            Verdict::Idle => {
                "At rest with work remaining (CONTINUE): the next run or tick goes on."
            }
            Verdict::Done => "Verified DONE.",
            Verdict::Paused => "PAUSED: a budget cap, a rate limit or `orbit stop`.",
            Verdict::Blocked => "BLOCKED: a human must look.",
            Verdict::Stalled => "STALLED: no progress.",
            Verdict::Crashed => {
                "A runner died mid-iteration: no footer, the lock free, an iteration unfinished."
            }
            Verdict::Aborted => "ABORTED on an integrity violation.",
            Verdict::Corrupt => "The state cannot be read or its sidecar does not match.",
            Verdict::Exhausted => {
                "BLOCKED with every iteration `max-iterations` allows used, without a verified DONE."
            }
        }
    }
}

impl Severity {
    /// How urgent a finding is; the audit's exit status follows the worst.
    pub const fn meaning(self) -> &'static str {
        match self {
            Severity::P0 => "Stop now (the audit exits 3).",
            Severity::P1 => "Recover, then continue (the audit exits 1).",
            Severity::P2 => "A note (the audit exits 0 when nothing is worse).",
        }
    }
}

impl FindingClass {
    /// What a finding of this class says (contract 9).
    pub const fn meaning(self) -> &'static str {
        match self {
            FindingClass::ContractMissing => "A file the contract requires is missing.",
            FindingClass::StateDrift => {
                "state.env disagrees with the evidence (journal, progress.md, records)."
            }
            FindingClass::TornCheckpoint => {
                "The sidecar is one generation behind state.env: a write was cut (repairable)."
            }
            FindingClass::VerifyGap => "verify.sh runs no check, or a check cannot fail.",
            FindingClass::VerifyFlaky => "A verify pass was followed by a fail on the same tree.",
            FindingClass::VacuousVerify => "verify.sh passed on the untouched tree.",
            FindingClass::ValidatorGap => "An acceptance criterion has no check.",
            FindingClass::CommitScopeRisk => {
                "A commit of the loop holds paths beyond what its iteration changed."
            }
            FindingClass::ToolFailure => "The loop stopped on a tool failure.",
            FindingClass::CircuitOpen => "The circuit breaker is open.",
            FindingClass::ConvergenceStall => "The loop stopped making changes.",
            FindingClass::OscillationLoop => "The tree went back to an earlier state.",
            FindingClass::BurnRateAnomaly => "The spend per iteration jumped.",
            FindingClass::GoalDrift => "goal.md changed after it was pinned.",
            FindingClass::RewardHack => {
                "A check, the holdout or a protected path changed, or the change reaches for the holdout."
            }
            FindingClass::PermissionHijack => {
                "An agent permission file, the engine's user-level files or the env file changed or appeared."
            }
            FindingClass::ScriptTamper => "A script, loop.toml or the installed schedule changed.",
            FindingClass::LoopTamper => {
                "A file of the loop directory changed behind the runner, or is not a regular file."
            }
            FindingClass::GitTamper => {
                "git's configuration, hooks, excludes or attributes changed, or the workspace is no longer the loop's worktree."
            }
            FindingClass::JournalBroken => "events.jsonl's hash chain is broken.",
            FindingClass::StaleLock => "The lock's holder is gone but the lock looks held.",
            FindingClass::OrphanAgent => "A process of the loop still runs with no runner.",
            FindingClass::UnboundedLoop => "No terminator beyond the iteration cap.",
            FindingClass::Crashed => {
                "A runner died mid-iteration: no footer, the lock free, an iteration unfinished."
            }
            FindingClass::WorkspaceMissing => "The loop's workspace is gone from disk.",
            FindingClass::WorkspaceBroken => {
                "The workspace is not a worktree of the loop's repository, or not on its branch."
            }
            FindingClass::WorkspaceDirty => {
                "The workspace holds uncommitted changes while no runner works in it."
            }
            FindingClass::BranchMoved => {
                "The loop branch `orbit/<name>` was moved or deleted by hand."
            }
            FindingClass::ContractOutdated => {
                "The loop was written under an older major contract: `orbit recover --migrate`."
            }
            FindingClass::TestCountDrop => {
                "A check passed with fewer tests run (or more skipped) than on the base tree, the drop accepted by `allow-fewer-tests`."
            }
            FindingClass::Exhausted => {
                "`max-iterations` used up without a verified DONE: raise the cap or change course."
            }
            FindingClass::LoopTimeout => {
                "The loop is BLOCKED on its wall-clock cap (`loop-timeout`): nothing runs until the cap is raised (or a lower `LOOP_TIMEOUT` of the run's environment goes away)."
            }
            FindingClass::Unsandboxed => {
                "The agent and check runs are not under the OS sandbox: a tamper is caught after the run, not refused, and nothing the agent can read is secret."
            }
            FindingClass::UnneededHunks => {
                "A DONE's change has hunks no check needs: each reverted alone, every check still passed (orbit adequacy)."
            }
            FindingClass::NetworkOpen => {
                "The runs are sandboxed with the network open (`sandbox-network = \"open\"`)."
            }
        }
    }
}

impl EventName {
    /// What the event records, and its fields where they are fixed (contract 4.4). Every
    /// event also has `seq`, `ts`, `event`, `iteration`, `prev` and `hash`.
    pub const fn meaning(self) -> &'static str {
        match self {
            EventName::LoopStart => {
                "A run of the runner starts: `pid`, `once`, `resumed_from`, `torn_repaired`, `engine`, `engine_version`."
            }
            EventName::IterationStart => "An iteration starts: `max_iterations`.",
            EventName::AgentExit => {
                "An agent run ended: `phase`, `attempt`, `exit_code`, `outcome` (work) or `timed_out` (confirm, wrap-up), `seconds`, `cost_microusd`, `cost_kind`; `tokens_in` and `tokens_out` where the engine counted them, `model` where it named one; `candidate` in a fan-out."
            }
            EventName::VerifyPass => {
                "verify.sh passed: `run`, `streak`. Written by `orbit verify` (`by`): the hand-off verified: `ref`, `commit`, `digest`, `rerun`."
            }
            EventName::VerifyFail => {
                "verify.sh failed: `run`, `failing` (check names), `signature`. Written by `orbit verify` (`by`): the hand-off refused: `ref`, `commit`, `verify_failure_code`, `why`."
            }
            EventName::IntegrityPass => "The trust check held: `when`.",
            EventName::IntegrityFail => {
                "The trust check failed: `when`, `code` (an integrity stop reason), `file`, `expected`, `actual`."
            }
            EventName::CircuitChange => "The circuit breaker changed: `from`, `to`.",
            EventName::StateWrite => {
                "state.env written: `gen`, `status`, `reason`, `next_iteration`, `sha256`."
            }
            EventName::DoneClaim => "The agent claimed DONE (done.md).",
            EventName::DoneRejected => "The DONE gate rejected the claim: `reason`.",
            EventName::HoldoutPass => "The holdout checks passed.",
            EventName::HoldoutFail => "The holdout checks failed: `failing`.",
            EventName::RateLimited => "The provider rate-limited the agent: `resume_at`.",
            EventName::IterationResult => {
                "`iterations/N/result.env` written: `verdict`, `reason`, `sha256` (of the record as written)."
            }
            EventName::IterationEnd => {
                "An iteration recorded: `verdict`, `reason`, `commit`, `changed`."
            }
            EventName::Recovery => {
                "`orbit recover` or recover.sh repaired the loop: `by`, `flags`, `repairs`, `next_iteration`, `status`, `reason`, `gen`, `backup`."
            }
            EventName::LoopStop => {
                "The run stopped: `status`, `reason`, `exit_code`. At most one per run; on a stop recorded as an internal failure, `error` says what failed and `status`/`reason` are what state.env holds."
            }
            EventName::WorkspaceCreated => "The workspace was made: `path`, `branch`, `base`.",
            EventName::WorkspaceRecreated => {
                "A missing workspace was made again: `path`, `branch`."
            }
            EventName::WorkspaceHeadMoved => {
                "The workspace's HEAD left the loop branch and was put back: `when`, `found`."
            }
            EventName::BranchMoved => "The loop branch was moved by hand: `expected`, `actual`.",
            EventName::CandidateWorktree => {
                "A fan-out candidate's worktree made: `candidate`, `path`."
            }
            EventName::CandidateStart => {
                "A fan-out candidate's run starts: `candidate`, `of`, `path`."
            }
            EventName::CandidateEnd => {
                "A fan-out candidate judged: `candidate`, `outcome`, `checks_passed`, `checks_total`, `pass_k_runs`, `holdout`, `judge`, `changed`, `disqualified`, `commit`, `sha256` (of its candidate.env), `check_cpu` (how much of one CPU its last verify run used, in thousandths, where measured: the next candidates' checks are laid out by it)."
            }
            EventName::SurvivorSelected => {
                "The fan-out's survivor: `candidate` (0 for none), `of`, `reason`."
            }
            EventName::CandidatesPruned => {
                "A DONE loop's candidate worktrees removed: `reason`, `refs`."
            }
            EventName::TestCountsBase => {
                "The red gate's test counts on the base tree: `sha256` (of `iterations/baseline/counts.tsv`, or `absent`), `counts`."
            }
            EventName::TestCountDrop => {
                "A check passed with no or fewer tests than on the base tree: `check`, `run`, `verdict` (zero, fewer, allowed), `ran`, `base_ran`, `skipped`, `base_skipped`, `unit`, `allowed`."
            }
            EventName::SetupDone => {
                "The setup commands ran in a new work tree: `where` (workspace, candidate-K, clean), `commands`."
            }
            EventName::SetupFail => {
                "A setup command failed, timed out or changed a tracked file: `where`, `why`."
            }
            EventName::EnvelopeWrite => {
                "A DONE's envelope written (envelope.json and the DONE commit's note): `commit`, `digest`, `signed` (envelope.json.sig written); `unsigned_why` where the user's git configuration signs with SSH but the runner could not (a key that needs a passphrase no ssh-agent holds); `by` `orbit verify --record` when `orbit verify --rerun --record` wrote it."
            }
            EventName::AdequacyMeasured => {
                "`orbit adequacy` measured the loop's branch head and wrote adequacy.json, or the runner measured a DONE's change through the pinned orbit (`mode` `gate`: the DONE gate's claim; `report`: once the DONE was recorded): `commit`, `hunks_needed`, `hunks_tried`, `mutants_killed`, `mutants_tried`, `details_sha256`."
            }
        }
    }
}

impl VerifyFailure {
    /// Why `orbit verify` refused a hand-off, and what to do.
    pub const fn meaning(self) -> &'static str {
        match self {
            VerifyFailure::Unverified => {
                "No envelope for the commit (a loop from before envelopes, or not a DONE): never a pass; `orbit verify --rerun --record` makes one when every check passes PASS_K times."
            }
            VerifyFailure::TreeMoved => {
                "The commit is a descendant of the DONE commit: work was added after DONE; verify the DONE commit, or run the loop again."
            }
            VerifyFailure::IntegrityMismatch => {
                "The commit is not the DONE commit nor after it (amended, rebased, rewritten), the DONE commit's tree is not the recorded one, or the envelope is not the one the journal recorded."
            }
            VerifyFailure::ChecksChanged => {
                "A file that defines a check (verify.sh, a check's script, a protected test-tool configuration, the holdout's definitions) does not hash as the envelope records."
            }
            VerifyFailure::EnvelopeCorrupt => {
                "The envelope is not one line of JSON whose digest matches (truncated, edited, a forged note)."
            }
            VerifyFailure::EnvelopeVersion => {
                "The envelope's format or contract major version is one this orbit does not read: update orbit."
            }
            VerifyFailure::JournalBroken => {
                "The loop's journal (events.jsonl) does not chain, or does not hold the head the envelope records."
            }
            VerifyFailure::RerunFailed => {
                "`--rerun`: a check failed in a clean checkout of the commit within PASS_K runs."
            }
            VerifyFailure::SignatureBad => {
                "The envelope's SSH signature (envelope.json.sig, or the note under refs/notes/orbit-sig) does not verify against the allowed-signers file for any principal it names: the envelope was changed after it was signed, or signed by a key the file does not allow."
            }
            VerifyFailure::SignatureMissing => {
                "`--require-signature`: the envelope carries no signature."
            }
        }
    }
}

impl CheckCode {
    /// What the check run's `code` says.
    pub const fn meaning(self) -> &'static str {
        match self {
            CheckCode::VerifyFlaky => {
                "A DONE gate's pass^k run failed after a pass on the same tree: a flaky verify, not DONE."
            }
            CheckCode::VerifyClean => {
                "The DONE gate's last verify, in a clean checkout of the commit about to be made, failed."
            }
            CheckCode::RegressionRed => {
                "A regression check fails on the base tree (the red gate): `failing`."
            }
            CheckCode::VacuousVerify => {
                "A check passes on the base tree where it must fail (the red gate): `passing`, where it names them."
            }
            CheckCode::CheckCannotRun => {
                "A check cannot run on the untouched tree (its program, its interpreter or its test tool's module is missing where it runs): the environment's, never a red start: `failing`."
            }
            CheckCode::NetRefused => {
                "The red gate's checks were refused a host by the network allowlist: `hosts`."
            }
        }
    }
}

impl AgentOutcome {
    /// How the runner classified an agent run (result.env `AGENT_OUTCOME`).
    pub const fn meaning(self) -> &'static str {
        match self {
            AgentOutcome::Ok => "The run ended normally.",
            AgentOutcome::AgentError => {
                "The agent failed (retried with backoff, counted by the circuit breaker)."
            }
            AgentOutcome::Timeout => {
                "The run passed `exec-timeout`: TERM, then KILL after `kill-grace`."
            }
            AgentOutcome::RateLimited => "The provider refused for its rate limit.",
            AgentOutcome::Permanent => {
                "Not found or not permitted (126/127): retrying cannot help."
            }
            AgentOutcome::Stopped => {
                "A fan-out candidate stopped because another passed everything first (`fanout-early-stop`)."
            }
        }
    }
}

impl VerifyOutcome {
    /// result.env `VERIFY`.
    pub const fn meaning(self) -> &'static str {
        match self {
            VerifyOutcome::Pass => "Every check passed.",
            VerifyOutcome::Fail => "A check failed, or none ran.",
            VerifyOutcome::Skip => "verify.sh did not run (the agent's run failed).",
        }
    }
}

impl Phase {
    /// `ORBIT_PHASE` and result.env `PHASE`.
    pub const fn meaning(self) -> &'static str {
        match self {
            Phase::Work => "An iteration's agent run.",
            Phase::Confirm => "The fresh-context DONE confirmation run.",
            Phase::Wrapup => "The run that writes a hand-off note when a cap stops the loop.",
        }
    }
}

impl CostKind {
    /// The third field of a cost.ledger line.
    pub const fn meaning(self) -> &'static str {
        match self {
            CostKind::Reported => "The engine (or the agent's cost file) reported the amount.",
            CostKind::Estimated => "Counted from the run's tokens at `token-prices`.",
            CostKind::Unknown => "Nothing said what the run cost.",
        }
    }
}

impl CostSource {
    /// The last field of a reported cost.ledger line, when it has one.
    pub const fn meaning(self) -> &'static str {
        match self {
            CostSource::Engine => "The engine's own report counted.",
            CostSource::Agent => {
                "The agent's cost file counted over the engine's report (it can only raise it)."
            }
        }
    }
}

impl NotifyEvent {
    /// What notify.sh is called for (contract 8).
    pub const fn meaning(self) -> &'static str {
        match self {
            NotifyEvent::Done => "The loop is DONE.",
            NotifyEvent::Blocked => "The loop stopped BLOCKED.",
            NotifyEvent::Paused => "The loop stopped PAUSED.",
            NotifyEvent::Stalled => "The loop stopped STALLED.",
            NotifyEvent::Aborted => "The loop stopped ABORTED.",
            NotifyEvent::Iteration => "An iteration ended (with `notify-every-iteration`).",
            NotifyEvent::PreflightFailed => "A preflight failed: nothing ran.",
            NotifyEvent::StateCorrupt => "state.env cannot be trusted.",
        }
    }
}

impl FaultPoint {
    /// Where `ORBIT_FAULT=<point>` kills the runner (or stops recover half-way).
    pub const fn meaning(self) -> &'static str {
        match self {
            FaultPoint::AfterLock => "Right after the lock is taken.",
            FaultPoint::BeforeAgent => "Before the agent runs.",
            FaultPoint::AfterAgent => "After the agent ran, before the checks.",
            FaultPoint::MidStateWrite => "Half-way through writing state.env.",
            FaultPoint::AfterStateBeforeSidecar => "After state.env, before its sidecar.",
            FaultPoint::BeforeCommit => "Before the iteration's commit.",
            FaultPoint::AfterCommit => "After the commit, before the iteration is recorded.",
            FaultPoint::MidProgressAppend => "Half-way through a progress.md entry.",
            FaultPoint::FanoutAfterAgents => {
                "A fan-out: every candidate's run ended and is in the ledger."
            }
            FaultPoint::FanoutAfterCandidate => {
                "A fan-out: the first candidate judged and recorded."
            }
            FaultPoint::FanoutBeforeApply => {
                "A fan-out: the survivor chosen, the workspace not yet changed."
            }
            FaultPoint::FanoutAfterApply => {
                "A fan-out: the survivor's change in the workspace, the iteration not recorded."
            }
            FaultPoint::RecoverBeforeCheckpoint => {
                "recover: the repairs planned, the state not yet written."
            }
        }
    }
}

/// What a state.env key holds (contract 4.1); `None` for a name that is not a key.
pub fn state_key_meaning(key: &str) -> Option<&'static str> {
    Some(match key {
        "CONTRACT_VERSION" => "The version of this contract the loop was written under.",
        "GEN" => "Incremented on every write; the sidecar records it.",
        "NEXT_ITERATION" => "The iteration the next run starts (cumulative across runs).",
        "LAST_STATUS" => "The loop's status (the table of statuses).",
        "STOP_REASON" => "Why it stopped (the table of stop reasons).",
        "STARTED_AT" => "The first run's start.",
        "LAST_UPDATED_AT" => "The last write.",
        "ORIGIN_BRANCH" => "The branch the loop started from.",
        "ITER_BRANCH" => "The loop's branch, `orbit/<name>`.",
        "COST_MICROUSD" => "The sum of cost.ledger, in millionths of a dollar.",
        "CB_STATE" => "The circuit breaker.",
        "CB_FAILS" => "The circuit breaker's count of failures in a row.",
        "CB_SIG" => "The signature of the failure the breaker counts.",
        "CB_OPENED_AT" => "When the breaker opened.",
        "VERIFY_STREAK" => "Consecutive verify passes.",
        "RESUME_AT" => "The earliest next attempt after a rate limit (0 = none).",
        "WORKSPACE" => "The loop's worktree (contract 2.0).",
        _ => return None,
    })
}

/// What an `iterations/NNNNNN/result.env` key holds; `None` for a name that is not one.
pub fn result_key_meaning(key: &str) -> Option<&'static str> {
    Some(match key {
        "ITERATION" => "The iteration.",
        "STARTED_AT" => "When it started (epoch seconds).",
        "ENDED_AT" => "When it ended.",
        "PHASE" => "The phase of its agent run.",
        "AGENT_EXIT" => "The agent's exit code.",
        "AGENT_OUTCOME" => "How the runner classified the agent run.",
        "ATTEMPTS" => "Agent attempts within the iteration.",
        "DURATION" => "Seconds from start to end.",
        "VERIFY" => "What verify.sh said.",
        "VERIFY_FAILING" => "The failing checks' names.",
        "VERIFY_SIG" => "The signature of the failure.",
        "TREE_BEFORE" => "The tree at the iteration's start.",
        "TREE_AFTER" => "The tree at its end.",
        "CHANGED" => "How many paths changed.",
        "COST_MICROUSD" => "What its agent runs cost.",
        "COST_KIND" => "How the cost was known.",
        "DONE_CLAIM" => "Whether the agent claimed DONE.",
        "DONE_VERDICT" => "What the DONE gate said of the claim.",
        "VERDICT" => "The iteration's status.",
        "STOP_REASON" => "The stop it ended with, if any.",
        "EXIT_CODE" => "The runner's exit code when the iteration stopped the loop.",
        "SUMMARY" => "One line a person reads.",
        "CB_FAILS" => "The breaker's count after the iteration.",
        "VERIFY_STREAK" => "The verify streak after the iteration.",
        "CB_SIG" => "The breaker's failure signature after the iteration.",
        "AGENT_MESSAGE" => "What the engine said of a failed run (a rate limit's message).",
        "AGENT_FOLDER" => {
            "What stood in place of the agent's folder `.orbit-agent/` after the iteration's agent runs when it was not a directory (`a symlink to /etc`, `a regular file`, `a FIFO`): removed by the runner, never committed; empty otherwise."
        }
        "NET_REFUSED" => {
            "The `HOST:PORT` words the sandbox's network allowlist refused to the iteration's runs (their log: the iteration's net.log)."
        }
        _ => return None,
    })
}

impl TaskStatus {
    /// What the status says of the task.
    pub const fn meaning(self) -> &'static str {
        match self {
            TaskStatus::Ready => {
                "Waiting for its turn: every task it comes after done, then by priority and age."
            }
            TaskStatus::Running => {
                "An attempt's loop is running (or was, when the queue's runner died: the next `orbit queue run` resumes that loop)."
            }
            TaskStatus::Done => {
                "Its loop reached a verified DONE, `orbit verify` passed, its branch merged into the integration branch and its verifier passed on the merged tree (`**Merged:**` names that commit); or its loop made no change of its own (the goal was met on the integration branch already) and its verifier passed on the integration branch's head (`**Verified-On:**` names it, no merge is made). Terminal."
            }
            TaskStatus::Failed => {
                "Its attempts are used up (`## Attempt N (final) — budget exhausted`). Raise `**Max-Attempts:**` and set `**Status:** ready` to try again."
            }
            TaskStatus::Blocked => {
                "A task it comes after failed, is blocked or does not parse (`**Reason:**` says which); ready again when that is mended."
            }
        }
    }
}

impl QueueExit {
    /// What the exit of `orbit queue run` says.
    pub const fn meaning(self) -> &'static str {
        match self {
            QueueExit::AllDone => "Every task of the queue is done.",
            QueueExit::Failure => "An unexpected failure of orbit itself.",
            QueueExit::Usage => {
                "Bad input: a refused command line, a cycle, an `--after` naming no task; nothing ran."
            }
            QueueExit::Remaining => {
                "`--once`: the round ended with tasks still to run (or an attempt paused by its engine's rate limit, resumed by a later run)."
            }
            QueueExit::Locked => {
                "Another `orbit queue run` holds the queue's lock (its pid is named)."
            }
            QueueExit::NotAllDone => {
                "Nothing is left to run and some task is not done: failed, blocked, a file that does not parse, or not started because `--usd-cap` has too little left."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{RESULT_KEYS, STATE_KEYS};

    #[test]
    fn every_state_and_result_key_has_a_meaning() {
        for (k, _) in STATE_KEYS {
            assert!(state_key_meaning(k).is_some(), "state key {k}");
        }
        for (k, _) in RESULT_KEYS {
            assert!(result_key_meaning(k).is_some(), "result.env key {k}");
        }
        assert_eq!(state_key_meaning("NOPE"), None);
        assert_eq!(result_key_meaning("NOPE"), None);
    }
}
