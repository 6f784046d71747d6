//! The init flags a task carries beyond its own fields: `orbit queue add` takes every flag
//! of `orbit init` the queue neither decides nor holds as a field, and the task keeps them
//! in its `**Init:**` field as shell words (quoted and split by shlex, never evaluated).
//! Init's own parser judges them, when they are added and whenever a task file is read;
//! each attempt's loop is made with them after the task's fields.

use clap::parser::ValueSource;
use clap::{Args, Command, CommandFactory};

use crate::cli::{Cli, InitArgs};
use crate::contract::queue::init_flag_held as held;

/// Why a task cannot carry these init words, if it cannot: what init's parser refuses, a
/// flag the queue decides or holds as a field, a `--name` that names no check after it, a
/// line break (a field is one line).
pub fn check(words: &[String]) -> Result<(), String> {
    if let Some(w) = words.iter().find(|w| w.contains(['\n', '\r', '\0'])) {
        return Err(format!(
            "'{}' holds a line break: a task's field is one line; join the commands with ' && ' or ';'",
            w.escape_debug()
        ));
    }
    let argv = ["orbit", "init"]
        .into_iter()
        .map(String::from)
        .chain(words.iter().cloned());
    let all = Cli::command().try_get_matches_from(argv).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or("").trim();
        first.strip_prefix("error: ").unwrap_or(first).to_string()
    })?;
    let m = all
        .subcommand_matches("init")
        .expect("the argv is an init command line");
    for a in InitArgs::augment_args(Command::new("init")).get_arguments() {
        let id = a.get_id().as_str();
        if m.value_source(id) == Some(ValueSource::CommandLine)
            && let Some(why) = held(id)
        {
            return Err(why);
        }
    }
    crate::cli::check_names_by_place(m)?;
    Ok(())
}

/// The words as the field's value: shell words, each quoted only when it must be.
pub fn print(words: &[String]) -> String {
    shlex::try_join(words.iter().map(String::as_str))
        .unwrap_or_else(|_| unreachable!("a task's init words hold no NUL: check refuses it"))
}

/// The field's value as words, split like a shell would (no expansion, nothing run).
pub fn parse(value: &str) -> Result<Vec<String>, String> {
    let words = shlex::split(value).ok_or_else(|| {
        "unbalanced quotes: quote the words as a shell would (a word with spaces in '...')"
            .to_string()
    })?;
    check(&words)?;
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    /// Every flag of `orbit init` is, for `orbit queue add`, a field's flag of its own, one
    /// it carries into `**Init:**`, or one it refuses; and the words it makes of them read
    /// back through init's parser as given.
    #[test]
    fn queue_add_takes_every_init_flag_the_queue_does_not_hold() {
        let cli = Cli::command();
        cli.clone().debug_assert();
        let add = cli
            .find_subcommand("queue")
            .and_then(|q| q.find_subcommand("add"))
            .expect("orbit queue add")
            .clone();
        for a in InitArgs::augment_args(Command::new("init")).get_arguments() {
            let Some(long) = a.get_long() else { continue };
            let on_add = add.get_arguments().find(|b| b.get_long() == Some(long));
            assert!(on_add.is_some(), "orbit queue add lacks --{long}");
        }
        let argv = [
            "orbit",
            "queue",
            "add",
            "goal",
            "--verify",
            "true",
            "--candidates",
            "3",
            "--fanout-early-stop",
            "--holdout",
            "make hidden",
            "--setup",
            "a b",
            "--setup-input",
            "Cargo.lock",
            "--engine",
            "custom",
            "--exec",
            "x",
        ];
        let m = cli.clone().try_get_matches_from(argv).unwrap();
        let crate::cli::Command::Queue(q) = Cli::from_arg_matches(&m).unwrap().command else {
            panic!("not queue");
        };
        let crate::cli::QueueCommand::Add(a) = q.command else {
            panic!("not add");
        };
        let want = [
            "--candidates",
            "3",
            "--fanout-early-stop",
            "--holdout",
            "make hidden",
            "--setup",
            "a b",
            "--setup-input",
            "Cargo.lock",
        ];
        assert_eq!(a.init.words, want);
        assert_eq!(parse(&print(&a.init.words)).unwrap(), want);
        for (flag, refused) in [
            ("--dir", "x"),
            ("--goal-file", "g.md"),
            ("--force", ""),
            ("--workspace", "/tmp/ws"),
        ] {
            let mut argv = vec!["orbit", "queue", "add", "g", "--verify", "true", flag];
            argv.extend([refused].into_iter().filter(|r| !r.is_empty()));
            let m = cli.clone().try_get_matches_from(argv).unwrap();
            let e = Cli::from_arg_matches(&m).unwrap_err().to_string();
            assert!(e.contains(&format!("{flag}: ")), "{e}");
        }
    }
}
