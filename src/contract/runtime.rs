//! What the generated scripts need at run time (contract 1): the programs, and for each one
//! when it is needed and what happens without it. `docs/contract.md` shows this table; the
//! runner's preflight checks [`CORE_TOOLS`] (rendered into the prelude) and the needs of the
//! features a loop uses, and `orbit init` warns of each one missing on this machine.

/// One thing the scripts need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// The program (and, for perl, its modules).
    pub what: &'static str,
    /// When it is needed.
    pub when: &'static str,
    /// What happens without it.
    pub without: &'static str,
}

/// The programs every run of the runner calls, with no fallback: the preflight names each
/// one PATH does not find and stops (exit 2) before anything runs. All are part of a
/// POSIX system with GNU coreutils, findutils, grep, sed, awk, diffutils and procps.
pub const CORE_TOOLS: &[&str] = &[
    "awk", "basename", "cat", "cp", "cut", "date", "diff", "dirname", "find", "grep", "head", "ln",
    "ls", "mkdir", "mktemp", "mv", "ps", "rm", "rmdir", "sed", "sleep", "sort", "tail", "tee",
    "tr", "wc",
];

/// perl's core modules the user-level record needs (the engine's own files and the env
/// file, held from the loop's first run): every built-in engine, and any loop with an env file.
pub const PERL_HOME_MODULES: &[&str] = &["Cwd", "Digest::SHA", "File::Find"];

/// perl's core modules the record needs besides in a loop whose engine holds JSON files
/// ([`holds_json`]: their reader reads them as JSON).
pub const PERL_JSON_MODULES: &[&str] = &["JSON::PP"];

/// Whether `engine`'s held user-level files include JSON ones its reader parses (claude's
/// ~/.claude.json, copilot's config.json; its part places templates/lib/perl/home_json.pl).
pub fn holds_json(engine: super::Engine) -> bool {
    matches!(engine, super::Engine::Claude | super::Engine::Copilot)
}

/// perl's core modules the sandbox's network proxy needs (`sandbox-network = "allowlist"`).
pub const PERL_NET_MODULES: &[&str] = &["IO::Socket::INET"];

/// Everything the scripts may need, in the order contract 1 lists it.
pub const NEEDS: &[Need] = &[
    Need {
        what: "bash >= 4.4",
        when: "always",
        without: "the preflight stops (exit 2), naming the version",
    },
    Need {
        what: "git",
        when: "always",
        without: "the preflight stops (exit 2): git is not on PATH",
    },
    Need {
        what: "the core tools (`CORE_TOOLS`)",
        when: "always",
        without: "the preflight stops (exit 2), naming each one missing",
    },
    Need {
        what: "sha256sum, or shasum, or openssl",
        when: "always (perl's Digest::SHA serves the runner's own hashing where it is)",
        without: "the scripts stop (exit 2): no sha256 tool",
    },
    Need {
        what: "perl 5 with Digest::SHA and Time::HiRes",
        when: "the runner's resident hasher, which also takes the runner's looks at the loop directory and git's files, compares them, and makes the state's atomic writes",
        without: "each hash is one sha256sum (or shasum) call, each look one find, each comparison one diff, each write an rm, a sync and an mv: slower, the same results",
    },
    Need {
        what: "perl 5 with Digest::SHA, File::Find and Cwd",
        when: "a built-in engine's loop (its user-level files are held), or an env file",
        without: "the preflight stops (exit 2), naming the missing module",
    },
    Need {
        what: "perl 5 with JSON::PP besides",
        when: "a claude or copilot loop (their held JSON files are read as JSON)",
        without: "the preflight stops (exit 2), naming the missing module",
    },
    Need {
        what: "perl 5 with IO::Socket::INET",
        when: "the sandbox's network allowlist (`sandbox-network = \"allowlist\"`)",
        without: "the preflight stops (exit 2), naming the missing module; `sandbox-network = \"open\"` is the way out",
    },
    Need {
        what: "perl 5 (its `syscall`) on Linux",
        when: "the runner as the subreaper of what it runs",
        without: "a process that leaves its process group and its parent is not swept with its run",
    },
    Need {
        what: "flock (util-linux)",
        when: "the lock",
        without: "a `mkdir` lock that records the holder's pid and start time",
    },
    Need {
        what: "timeout (coreutils)",
        when: "bounded runs of checks and commands",
        without: "a bash watchdog (TERM, then KILL after `kill-grace`)",
    },
    Need {
        what: "bwrap (bubblewrap)",
        when: "`sandbox = \"bwrap\"`, and `auto` where it works",
        without: "`bwrap`: the preflight stops (exit 2); `auto`: the loop runs unsandboxed, said at init and by the audit (UNSANDBOXED)",
    },
    Need {
        what: "env with `--default-signal` (coreutils >= 8.31)",
        when: "sandboxed runs (part of the sandbox's probe)",
        without: "as without bwrap",
    },
    Need {
        what: "curl",
        when: "webhook and ntfy notifications",
        without: "those channels are skipped, said in the log; the loop goes on",
    },
    Need {
        what: "crontab, systemctl, tmux",
        when: "`orbit schedule` on this machine (cron, systemd, tmux)",
        without: "that kind of schedule cannot be installed here; the loop itself does not need them",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_tools_are_sorted_and_distinct() {
        let mut sorted = CORE_TOOLS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, CORE_TOOLS);
    }
}
