//! `orbit verify [LOOP|REF]`: the receiver's gate. A hand-off passes only when an envelope
//! (the DONE commit's note under refs/notes/orbit, or the loop directory's envelope.json)
//! parses with its digest, names exactly the commit handed over, the files that define its
//! checks hash as recorded there, and, where the loop directory is at hand, the journal
//! chains through the head the envelope records and recorded this envelope. `--rerun` runs
//! the checks again in a clean checkout of the commit, PASS_K times, under the loop's
//! sandbox (src/rerun.rs). Every answer is
//! journaled: `verify_pass` / `verify_fail` in the loop's events.jsonl, or in the
//! receiver's log (`<git dir>/orbit/verify.jsonl`) without a loop directory.

use std::path::{Path, PathBuf};

use crate::cli::VerifyArgs;
use crate::contract::{EventName, VerifyFailure};
use crate::envelope::{self, DefFile, Envelope, Unreadable};
use crate::envelope::{git, git_line};
use crate::error::{Error, Result};
use crate::signature::{self, Signature};
use crate::{events, fsx, locate, rerun, state};

/// The exit status of a hand-off that did not verify.
pub const EXIT_FAIL: u8 = 3;

/// What `orbit verify` found.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub failure: Option<VerifyFailure>,
    pub why: String,
    pub loop_name: Option<String>,
    pub loop_dir: Option<PathBuf>,
    pub reference: String,
    pub commit: String,
    pub digest: Option<String>,
    pub envelope: Option<Envelope>,
    /// The envelope's signature, as checked (`None` before the envelope was read).
    pub signature: Option<Signature>,
    /// Whether an allowed-signers file was at hand to check a signature against.
    pub allowed_signers: bool,
    /// Why the runner left the envelope unsigned where git signs with SSH (its journal's
    /// envelope_write `unsigned_why`).
    pub unsigned_why: Option<String>,
    /// How `--rerun` ran the checks (under bubblewrap or not), when it ran them.
    pub rerun: Option<rerun::Mode>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }

    /// The verdict in one word: `verified`, or the failure's code.
    pub fn verdict_word(&self) -> &'static str {
        self.failure.map_or("verified", |f| f.as_str())
    }

    /// The line the report and the dashboard show: `envelope sha256:<digest> (<verdict>)`,
    /// `envelope none (UNVERIFIED)` without one, then what its signature says, if anything.
    pub fn line(&self) -> String {
        let mut line = match &self.digest {
            Some(d) => format!("envelope sha256:{d} ({})", self.verdict_word()),
            None => format!("envelope none ({})", self.verdict_word()),
        };
        if let Some(said) = self.signature_text() {
            line.push_str(", ");
            line.push_str(&said);
        }
        line
    }

    /// What the signature says in words; `None` for an unsigned envelope nobody asked to be
    /// signed (no allowed-signers file, no signing key that failed).
    pub fn signature_text(&self) -> Option<String> {
        match self.signature.as_ref()? {
            Signature::Good(p) => Some(format!("signed by {p}")),
            Signature::Bad(why) => Some(format!("signature bad: {why}")),
            Signature::NotChecked => {
                Some("signed, not checked (no allowed-signers file: git config gpg.ssh.allowedSignersFile or --allowed-signers)".into())
            }
            Signature::Unsigned => match (&self.unsigned_why, self.allowed_signers) {
                (Some(why), _) => Some(format!("unsigned: {why}")),
                (None, true) => Some("unsigned".into()),
                (None, false) => None,
            },
        }
    }

    /// What to do next, in words.
    pub fn next(&self) -> String {
        let loop_arg = self
            .loop_dir
            .as_ref()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| "LOOP".into());
        match self.failure {
            None => format!("orbit merge {loop_arg}"),
            Some(VerifyFailure::Unverified) => format!(
                "fetch the notes (git fetch origin 'refs/notes/*:refs/notes/*'); a loop that reached DONE before envelopes has none: orbit verify --rerun --record {loop_arg} runs its checks PASS_K times in a clean checkout and records one when every run passes"
            ),
            Some(VerifyFailure::TreeMoved) => {
                "hand over the DONE commit itself, or run the loop again on the new work".into()
            }
            Some(VerifyFailure::IntegrityMismatch) => {
                "the branch was rewritten after DONE (amend, rebase, force-push) or the envelope replaced: reset the branch to the DONE commit, or run the loop again".into()
            }
            Some(VerifyFailure::ChecksChanged) => {
                "put the checks back as they were at DONE (git diff shows what changed), or run the loop again under the new checks".into()
            }
            Some(VerifyFailure::EnvelopeCorrupt) | Some(VerifyFailure::EnvelopeVersion) => {
                "do not take this hand-off: fetch the notes again from the loop's repository, or run the loop again".into()
            }
            Some(VerifyFailure::JournalBroken) => format!(
                "the loop's journal was edited: orbit audit {loop_arg} names the line"
            ),
            Some(VerifyFailure::RerunFailed) => {
                "the code no longer passes its checks: run the loop again".into()
            }
            Some(VerifyFailure::SignatureBad) => {
                "do not take this hand-off: the envelope is not what its signer signed (or the signer is not in the allowed-signers file); fetch the notes again, or run the loop again".into()
            }
            Some(VerifyFailure::SignatureMissing) => {
                "the envelope is unsigned: run the loop where git signs with SSH (gpg.format ssh, user.signingkey), or verify without --require-signature".into()
            }
        }
    }

    /// One JSON object for programs (`--json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "verdict": if self.passed() { "pass" } else { "fail" },
            "verify_failure_code": self.failure.map(|f| f.as_str()),
            "why": self.why,
            "loop": self.loop_name,
            "ref": self.reference,
            "commit": self.commit,
            "digest": self.digest,
            "signature": self.signature.as_ref().map(|s| s.word()),
            "signer": self.signature.as_ref().and_then(|s| s.signer()),
            "unsigned_why": self.unsigned_why,
            "rerun_sandbox": self.rerun.map(|m| m.word()),
            "next": self.next(),
        })
    }
}

/// What `orbit verify` was asked about: the repository, the commit, and the loop directory
/// when one is named (or at hand).
pub(crate) struct Target {
    pub repo: PathBuf,
    pub reference: String,
    pub commit: String,
    pub loop_dir: Option<PathBuf>,
    /// The allowed-signers file a signature is checked against, if any.
    pub allowed_signers: Option<PathBuf>,
    /// `--require-signature`: an unsigned envelope fails.
    pub require_signature: bool,
}

/// The loop directory named `arg` (a directory, or a name under .orbit/), if it is one.
fn loop_named(repo: &Path, arg: &str) -> Option<PathBuf> {
    let p = Path::new(arg);
    if p.join("run-loop.sh").is_file() {
        return std::fs::canonicalize(p).ok();
    }
    let under = repo.join(".orbit").join(arg);
    under
        .join("run-loop.sh")
        .is_file()
        .then(|| std::fs::canonicalize(&under).ok())
        .flatten()
}

/// The loop's branch: state.env's ITER_BRANCH, else orbit/<its directory's name>.
pub(crate) fn loop_branch(dir: &Path) -> String {
    state::State::parse_file(&dir.join("state.env"))
        .ok()
        .map(|s| s.iter_branch)
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| {
            format!(
                "orbit/{}",
                dir.file_name().unwrap_or_default().to_string_lossy()
            )
        })
}

/// Resolves `[LOOP|REF]` as the other commands resolve a loop, else as a git revision.
pub(crate) fn resolve(arg: Option<&str>) -> Result<Target> {
    let cwd =
        std::env::current_dir().map_err(|e| Error::io("cannot read the current directory", e))?;
    let repo = locate::repo_root(&cwd)?;
    let loop_dir = match arg {
        None => Some(
            std::fs::canonicalize(locate::pick_loop(None)?)
                .map_err(|e| Error::io("cannot resolve the loop directory", e))?,
        ),
        Some(a) => loop_named(&repo, a),
    };
    let reference = match (&loop_dir, arg) {
        (Some(dir), _) => format!("refs/heads/{}", loop_branch(dir)),
        (None, Some(a)) => a.to_string(),
        (None, None) => unreachable!("pick_loop names a loop or fails"),
    };
    let commit = git_line(
        &repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            "--end-of-options",
            &format!("{reference}^{{commit}}"),
        ],
    )
    .filter(|c| !c.is_empty())
    .ok_or_else(|| match &loop_dir {
        Some(d) => Error::Usage(format!(
            "the loop {} has no branch {reference} (has it run?): run it first",
            d.display()
        )),
        None => Error::Usage(format!(
            "{reference} is neither a loop (a directory with run-loop.sh, or a name under .orbit/) nor a commit of this repository"
        )),
    })?;
    Ok(Target {
        allowed_signers: signature::configured_allowed_signers(&repo),
        require_signature: false,
        repo,
        reference,
        commit,
        loop_dir,
    })
}

/// The commits that carry a note under refs/notes/orbit, with the note's blob.
fn noted_commits(repo: &Path) -> Vec<(String, String)> {
    let Some(out) = git(repo, &["notes", "--ref=orbit", "list"]) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| {
            let (note, commit) = l.split_once(' ')?;
            Some((commit.to_string(), note.to_string()))
        })
        .collect()
}

/// The envelope of `t`, as bytes, and where it came from: the loop directory's envelope.json;
/// else the note of the nearest commit of REF's history that has one; else the note of any
/// commit whose envelope names the loop REF's commit says it belongs to (its Orbit-Loop
/// trailer), so that a rewritten branch is told from an unverified one.
fn find_envelope(t: &mut Target) -> Result<Option<Found>> {
    let from_file = |dir: &Path| -> Result<Option<Found>> {
        let path = dir.join(envelope::FILE);
        let Some(bytes) = fsx::read_regular_opt(&path)? else {
            return Ok(None);
        };
        let sig = fsx::read_regular_opt(&dir.join(signature::FILE))?;
        Ok(Some((bytes, path.display().to_string(), sig)))
    };
    if let Some(dir) = &t.loop_dir
        && let Some(found) = from_file(dir)?
    {
        return Ok(Some(found));
    }
    let notes = noted_commits(&t.repo);
    if notes.is_empty() {
        return Ok(None);
    }
    let show = |commit: &str| git(&t.repo, &["notes", "--ref=orbit", "show", commit]);
    let sig_of = |commit: &str| git(&t.repo, &["notes", "--ref=orbit-sig", "show", commit]);
    let noted: std::collections::HashMap<&str, &str> = notes
        .iter()
        .map(|(c, n)| (c.as_str(), n.as_str()))
        .collect();
    if let Some(list) = git(&t.repo, &["rev-list", "--max-count=100000", &t.commit]) {
        for c in String::from_utf8_lossy(&list).lines() {
            if noted.contains_key(c) {
                return Ok(show(c).map(|b| (b, format!("the note of {c}"), sig_of(c))));
            }
        }
    }
    let message = git(&t.repo, &["log", "-1", "--format=%B", &t.commit]).unwrap_or_default();
    let message = String::from_utf8_lossy(&message);
    let Some(name) = message
        .lines()
        .find_map(|l| l.strip_prefix("Orbit-Loop: "))
        .map(str::trim)
    else {
        return Ok(None);
    };
    if t.loop_dir.is_none() {
        t.loop_dir = loop_named(&t.repo, name);
        if let Some(dir) = &t.loop_dir
            && let Some(found) = from_file(dir)?
        {
            return Ok(Some(found));
        }
    }
    for (c, _) in &notes {
        if let Some(bytes) = show(c)
            && envelope::parse(&bytes).is_ok_and(|e| e.loop_name == name)
        {
            return Ok(Some((bytes, format!("the note of {c}"), sig_of(c))));
        }
    }
    Ok(None)
}

/// An envelope's bytes, where they came from, and its signature's bytes (if signed).
type Found = (Vec<u8>, String, Option<Vec<u8>>);

/// The envelope's signature checked against `t`'s allowed-signers file.
fn signature_of(t: &Target, bytes: &[u8], sig: Option<&[u8]>) -> Signature {
    match (sig, &t.allowed_signers) {
        (None, _) => Signature::Unsigned,
        (Some(_), None) => Signature::NotChecked,
        (Some(sig), Some(allowed)) => signature::check(bytes, sig, allowed),
    }
}

/// The `unsigned_why` of the loop journal's envelope_write of `digest`, where the runner
/// could not sign.
fn unsigned_why(dir: &Path, digest: &str) -> Option<String> {
    let bytes = fsx::read_regular_opt(&dir.join("events.jsonl")).ok()??;
    events::read(&bytes)
        .events
        .iter()
        .filter(|ev| ev.is(EventName::EnvelopeWrite))
        .filter(|ev| ev.value.get("digest").and_then(|d| d.as_str()) == Some(digest))
        .find_map(|ev| ev.value.get("unsigned_why")?.as_str().map(str::to_string))
}

/// The sha256 of the file `path` in `commit`'s tree, or None when it holds none there.
fn blob_sha(repo: &Path, commit: &str, path: &str) -> Option<String> {
    let spec = format!("{commit}:{path}");
    if git_line(repo, &["cat-file", "-t", &spec]).as_deref() != Some("blob") {
        return None;
    }
    git(repo, &["cat-file", "blob", &spec]).map(|b| fsx::sha256_hex(&b))
}

/// The first definition file of `e` that does not hash as recorded at `commit` (and in the
/// loop directory, when it is at hand), said in words.
fn changed_definition(
    repo: &Path,
    commit: &str,
    loop_dir: Option<&Path>,
    e: &Envelope,
) -> Option<String> {
    let in_tree = |f: &DefFile| -> Option<String> {
        let now = blob_sha(repo, commit, &f.path);
        (now.as_deref() != Some(f.sha256.as_str())).then(|| match now {
            Some(_) => format!("{} changed", f.path),
            None => format!("{} is gone", f.path),
        })
    };
    let in_loop = |f: &DefFile| -> Option<String> {
        let dir = loop_dir?;
        let now = fsx::read_regular_opt(&dir.join(&f.path))
            .ok()
            .flatten()
            .map(|b| fsx::sha256_hex(&b));
        (now.as_deref() != Some(f.sha256.as_str()))
            .then(|| format!("the loop directory's {} changed", f.path))
    };
    let check_files = e.checks.iter().flat_map(|c| c.files.iter());
    let holdout = e.holdout.iter().flat_map(|h| h.definitions.iter());
    for f in check_files.chain(holdout) {
        let found = if f.in_loop()
            || e.holdout
                .as_ref()
                .is_some_and(|h| h.definitions.contains(f))
        {
            in_loop(f)
        } else {
            in_tree(f)
        };
        if found.is_some() {
            return found;
        }
    }
    e.protected.iter().find_map(in_tree)
}

/// The journal's say, where the loop directory is at hand: it chains, holds the recorded
/// head, and its envelope_write names this envelope's digest.
fn journal_failure(dir: &Path, e: &Envelope) -> Option<(VerifyFailure, String)> {
    let bytes = fsx::read_regular_opt(&dir.join("events.jsonl"))
        .ok()
        .flatten()
        .unwrap_or_default();
    let j = events::read(&bytes);
    if let Some(err) = &j.error {
        return Some((
            VerifyFailure::JournalBroken,
            format!("events.jsonl line {}: {}", err.line(), err.describe()),
        ));
    }
    if let Some(head) = &e.journal_head
        && !j.events.iter().any(|ev| &ev.hash == head)
    {
        return Some((
            VerifyFailure::JournalBroken,
            format!("events.jsonl holds no event of hash {head}, the head the envelope records"),
        ));
    }
    let written: Vec<&str> = j
        .events
        .iter()
        .filter(|ev| ev.is(EventName::EnvelopeWrite))
        .filter_map(|ev| ev.value.get("digest").and_then(|d| d.as_str()))
        .collect();
    if !written.is_empty() && !written.contains(&e.digest.as_str()) {
        return Some((
            VerifyFailure::IntegrityMismatch,
            format!(
                "the envelope (digest {}) is not the one the loop's journal recorded ({})",
                &e.digest[..12],
                written.join(", ")
            ),
        ));
    }
    None
}

/// The checks of the envelope against `t` without running anything.
pub(crate) fn check(t: &mut Target) -> Result<Outcome> {
    let mut out = Outcome {
        failure: None,
        why: String::new(),
        loop_name: None,
        loop_dir: None,
        reference: t.reference.clone(),
        commit: t.commit.clone(),
        digest: None,
        envelope: None,
        signature: None,
        allowed_signers: t.allowed_signers.is_some(),
        unsigned_why: None,
        rerun: None,
    };
    let found = find_envelope(t)?;
    out.loop_dir = t.loop_dir.clone();
    let fail = |mut o: Outcome, code: VerifyFailure, why: String| {
        o.failure = Some(code);
        o.why = why;
        Ok(o)
    };
    let Some((bytes, source, sig)) = found else {
        return fail(
            out,
            VerifyFailure::Unverified,
            format!(
                "no envelope for {} ({}): no note under {} on it or its history, and no envelope.json",
                t.reference,
                &t.commit[..12.min(t.commit.len())],
                envelope::NOTES_REF
            ),
        );
    };
    let e = match envelope::parse(&bytes) {
        Ok(e) => e,
        Err(Unreadable::Corrupt(m)) => {
            return fail(
                out,
                VerifyFailure::EnvelopeCorrupt,
                format!("{source}: {m}"),
            );
        }
        Err(Unreadable::Version(m)) => {
            return fail(
                out,
                VerifyFailure::EnvelopeVersion,
                format!("{source}: {m}"),
            );
        }
    };
    out.loop_name = Some(e.loop_name.clone());
    out.digest = Some(e.digest.clone());
    out.envelope = Some(e.clone());
    if out.loop_dir.is_none() {
        t.loop_dir = loop_named(&t.repo, &e.loop_name);
        out.loop_dir = t.loop_dir.clone();
    }
    let signed = signature_of(t, &bytes, sig.as_deref());
    out.signature = Some(signed.clone());
    if signed == Signature::Unsigned {
        out.unsigned_why = t
            .loop_dir
            .as_deref()
            .and_then(|d| unsigned_why(d, &e.digest));
    }
    match signed {
        Signature::Bad(why) => {
            return fail(out, VerifyFailure::SignatureBad, format!("{source}: {why}"));
        }
        Signature::Unsigned if t.require_signature => {
            return fail(
                out,
                VerifyFailure::SignatureMissing,
                format!(
                    "{source} carries no signature ({} in the loop directory, or a note under {} on its commit), and --require-signature asks for one",
                    signature::FILE,
                    signature::NOTES_REF
                ),
            );
        }
        _ => {}
    }
    let Some(done) = e.commit.clone() else {
        return fail(
            out,
            VerifyFailure::Unverified,
            "the envelope records a DONE without a commit (autocommit off): nothing binds it to a commit".into(),
        );
    };
    if let Some(dir) = t.loop_dir.clone()
        && let Some((code, why)) = journal_failure(&dir, &e)
    {
        return fail(out, code, why);
    }
    if let Some(what) = changed_definition(&t.repo, &t.commit, t.loop_dir.as_deref(), &e) {
        return fail(
            out,
            VerifyFailure::ChecksChanged,
            format!("a file that defines the checks does not hash as at DONE: {what}"),
        );
    }
    let done_tree = git_line(
        &t.repo,
        &["rev-parse", "--verify", "-q", &format!("{done}^{{tree}}")],
    );
    if done_tree.is_none() {
        return fail(
            out,
            VerifyFailure::IntegrityMismatch,
            format!(
                "the DONE commit {done} is not in this repository (the branch was rewritten, or fetch it)"
            ),
        );
    }
    if done_tree != e.tree {
        return fail(
            out,
            VerifyFailure::IntegrityMismatch,
            format!("the DONE commit {done}'s tree is not the tree the envelope records"),
        );
    }
    if t.commit == done {
        out.why = format!(
            "{} is the DONE commit of loop {} (envelope {}, from {source})",
            &done[..12],
            e.loop_name,
            &e.digest[..12]
        );
        return Ok(out);
    }
    let descendant = git(&t.repo, &["merge-base", "--is-ancestor", &done, &t.commit]).is_some();
    if descendant {
        return fail(
            out,
            VerifyFailure::TreeMoved,
            format!(
                "{} is {} commit(s) after the DONE commit {}: what came after was never verified",
                t.reference,
                git_line(
                    &t.repo,
                    &["rev-list", "--count", &format!("{done}..{}", t.commit)]
                )
                .unwrap_or_else(|| "some".into()),
                &done[..12]
            ),
        );
    }
    fail(
        out,
        VerifyFailure::IntegrityMismatch,
        format!(
            "{} ({}) is not the DONE commit {} nor after it: rewritten (amend, rebase) after DONE",
            t.reference,
            &t.commit[..12],
            &done[..12]
        ),
    )
}

/// A loop directory's hand-off as `orbit verify` checks it without `--rerun`, journaling
/// nothing (the report and the dashboard show it). `None` when the loop has no branch yet
/// or is not in a git repository.
pub fn loop_outcome(dir: &Path) -> Option<Outcome> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let repo = locate::repo_root(&dir).ok()?;
    let reference = format!("refs/heads/{}", loop_branch(&dir));
    let commit = git_line(
        &repo,
        &[
            "rev-parse",
            "--verify",
            "-q",
            "--end-of-options",
            &format!("{reference}^{{commit}}"),
        ],
    )
    .filter(|c| !c.is_empty())?;
    let mut t = Target {
        allowed_signers: signature::configured_allowed_signers(&repo),
        require_signature: false,
        repo,
        reference,
        commit,
        loop_dir: Some(dir),
    };
    check(&mut t).ok()
}

/// Journals the outcome: the loop's events.jsonl under its lock when the loop directory is
/// at hand and no runner holds it, else the receiver's log in git's directory.
fn record(t: &Target, o: &Outcome, rerun: bool) -> Result<String> {
    let mut fields: Vec<(&str, String)> = vec![
        ("by", events::value("orbit verify")),
        ("ref", events::value(&o.reference)),
        ("commit", events::value(&o.commit)),
    ];
    let name = match o.failure {
        None => {
            fields.push(("digest", events::value(o.digest.as_deref().unwrap_or(""))));
            fields.push(("rerun", events::value(if rerun { "true" } else { "false" })));
            EventName::VerifyPass
        }
        Some(code) => {
            fields.push(("verify_failure_code", events::value(code.as_str())));
            fields.push(("why", events::value(&o.why)));
            EventName::VerifyFail
        }
    };
    let iteration = o.envelope.as_ref().and_then(|e| e.iterations).unwrap_or(0);
    if let Some(dir) = &t.loop_dir
        && dir.join("events.jsonl").is_file()
        && let Ok(_held) = crate::control::hold_lock(dir)
    {
        crate::control::append_event(dir, name, iteration, &fields)?;
        return Ok(dir.join("events.jsonl").display().to_string());
    }
    let git_dir = git_line(&t.repo, &["rev-parse", "--git-common-dir"])
        .map(|d| t.repo.join(d))
        .ok_or_else(|| Error::Git("cannot find the repository's git directory".into()))?;
    let dir = git_dir.join("orbit");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    crate::control::append_event_at(&dir.join("verify.jsonl"), name, iteration, &fields)?;
    Ok(dir.join("verify.jsonl").display().to_string())
}

/// `--rerun`: verify.sh (and holdout.sh, where it has checks) in a clean checkout of the
/// commit, PASS_K times each, under the loop's sandbox (src/rerun.rs); the first failure,
/// in words. `after` reads the checkout when every run passed (`--record`: the files the
/// protect globs match). `mode` is set to how the checks ran before any runs.
fn rerun(
    t: &Target,
    pass_k: u64,
    holdout: bool,
    mode: &mut Option<rerun::Mode>,
    after: &mut dyn FnMut(&Path),
) -> Result<Option<String>> {
    let Some(dir) = &t.loop_dir else {
        return Err(Error::Usage(
            "--rerun needs the loop directory (its verify.sh): run it where the loop lives".into(),
        ));
    };
    let how = rerun::Mode::of_loop(dir)?;
    *mode = Some(how);
    // The commit's submodules come with it, from the repository's own module objects, as
    // the loop's checkouts hold them.
    let co = crate::checkout::Checkout::new(&t.repo, &t.commit, "verify", 0)?;
    let scratch = co.scratch();
    let result = std::fs::create_dir(&scratch)
        .map_err(|e| Error::io(format!("cannot create {}", scratch.display()), e))
        .and_then(|()| rerun_in(how, &t.repo, &co.path, &scratch, dir, pass_k, holdout));
    if let Ok(None) = result {
        after(&co.path);
    }
    result
}

fn rerun_in(
    how: rerun::Mode,
    repo: &Path,
    ws: &Path,
    scratch: &Path,
    dir: &Path,
    pass_k: u64,
    holdout: bool,
) -> Result<Option<String>> {
    let mut scripts = vec![("verify.sh", "check")];
    if holdout {
        scripts.push(("holdout.sh", "holdout"));
    }
    for (script, kind) in scripts {
        for k in 1..=pass_k.max(1) {
            let out = rerun::run(how, kind, dir, ws, repo, scratch)?;
            if !out.status.success() {
                let text = String::from_utf8_lossy(&out.stdout);
                let failing: Vec<&str> = text
                    .lines()
                    .filter(|l| l.starts_with("[FAIL]"))
                    .take(3)
                    .collect();
                let failing = if failing.is_empty() {
                    let err = String::from_utf8_lossy(&out.stderr);
                    let last = err.lines().last().unwrap_or("").to_string();
                    format!("{} ({last})", out.status)
                } else {
                    failing.join("; ")
                };
                return Ok(Some(format!(
                    "{script} failed on run {k} of {} in a clean checkout: {failing}",
                    pass_k,
                )));
            }
        }
    }
    Ok(None)
}

/// `--rerun --record`: a loop without an envelope (from before envelopes) gets one when its
/// checks pass PASS_K times in a clean checkout; then the outcome is the check's again.
/// Otherwise the rerun's failure, and nothing written.
fn record_envelope(t: &mut Target, o: Outcome) -> Result<Outcome> {
    if o.failure != Some(VerifyFailure::Unverified) || o.envelope.is_some() {
        return Err(Error::Usage(format!(
            "{} has an envelope already ({}): nothing to record; orbit verify checks it",
            t.reference,
            o.failure.map_or("it verifies", |f| f.as_str())
        )));
    }
    let h = crate::record::Handoff {
        repo: &t.repo,
        reference: &t.reference,
        commit: &t.commit,
        loop_dir: t.loop_dir.as_deref(),
    };
    let plan = crate::record::plan(&h)?;
    let dir = t.loop_dir.clone().expect("plan checked the loop directory");
    let mut protected = Vec::new();
    let mut mode = None;
    if let Some(why) = rerun(t, plan.pass_k, plan.holdout, &mut mode, &mut |ws| {
        protected = crate::record::protected_in(ws, &dir);
    })? {
        return Ok(Outcome {
            failure: Some(VerifyFailure::RerunFailed),
            why: format!("{why}: nothing recorded (no envelope, no note)"),
            rerun: mode,
            ..o
        });
    }
    let h = crate::record::Handoff {
        repo: &t.repo,
        reference: &t.reference,
        commit: &t.commit,
        loop_dir: t.loop_dir.as_deref(),
    };
    crate::record::write(&h, &plan, &protected)?;
    let mut o = check(t)?;
    o.rerun = mode;
    Ok(o)
}

/// `orbit verify`.
pub fn run(args: &VerifyArgs) -> Result<u8> {
    let mut t = resolve(args.target.as_deref())?;
    if let Some(f) = &args.allowed_signers {
        if !f.is_file() {
            return Err(Error::Usage(format!(
                "--allowed-signers {}: no such file (ssh-keygen's allowed-signers format: one `PRINCIPAL KEY` a line)",
                f.display()
            )));
        }
        t.allowed_signers = Some(f.clone());
    }
    if args.require_signature && t.allowed_signers.is_none() {
        return Err(Error::Usage(
            "--require-signature needs an allowed-signers file to check the signature against: --allowed-signers FILE, or git config gpg.ssh.allowedSignersFile FILE".into(),
        ));
    }
    t.require_signature = args.require_signature;
    if args.record && !args.rerun {
        return Err(Error::Usage(
            "--record writes the envelope only from a rerun: orbit verify --rerun --record".into(),
        ));
    }
    let mut o = check(&mut t)?;
    if args.record {
        o = record_envelope(&mut t, o)?;
    } else if args.rerun && o.passed() {
        let e = o.envelope.clone().expect("a passed check has its envelope");
        let mut mode = None;
        let failed = rerun(&t, e.pass_k, e.holdout.is_some(), &mut mode, &mut |_| {})?;
        o.rerun = mode;
        if let Some(why) = failed {
            o.failure = Some(VerifyFailure::RerunFailed);
            o.why = why;
        }
    }
    let log = record(&t, &o, args.rerun)?;
    if args.json {
        let mut v = o.json();
        v["journal"] = serde_json::Value::String(log);
        println!("{v}");
    } else if o.passed() {
        println!("orbit verify: PASS — {}", o.why);
        if let Some(said) = o.signature_text() {
            println!("  signature: {said}");
        }
        if let Some(mode) = o.rerun {
            println!("  rerun: {}", mode.said());
        }
        println!("  next: {}", o.next());
    } else {
        let code = o.failure.map(|f| f.as_str()).unwrap_or_default();
        println!("orbit verify: FAIL {code} — {}", o.why);
        if let Some(mode) = o.rerun {
            println!("  rerun: {}", mode.said());
        }
        println!("  next: {}", o.next());
    }
    Ok(if o.passed() { 0 } else { EXIT_FAIL })
}
