//! The contract's tables as bash: the data prelude every generated script carries between
//! its rendered settings and its static parts. The static bash names each exit code
//! (`$EXIT_BLOCKED`), status (`$STATUS_DONE`) and stop reason (`$REASON_BUDGET`) from here
//! and validates state keys and settings against the same types and bounds as Rust.
//!
//! Every word placed here is a plain identifier or number from orbit's own tables (never
//! user text); [`prelude`] still refuses anything that is not, so the output needs no
//! quoting.

use std::fmt::Write;
use std::sync::OnceLock;

use super::settings::DURATION_MAX_SECS;
use super::{
    AgentOutcome, CONTRACT_VERSION, CbState, CheckCode, CostKind, CostSource, EventName, ExitCode,
    FaultPoint, INIT_PINNED, KEYS_SINCE, LOOP_DIRS, LOOP_FILES, MAX_HEX_DIGITS, MAX_PATH_LEN,
    MAX_REF_LEN, MAX_SEMVER_PART_DIGITS, MAX_UINT_DIGITS, NotifyEvent, PERMISSION_FILES, PINS_SETS,
    Phase, RESULT_KEYS, SETTINGS, STATE_KEYS, SettingKind, Status, StopReason, Verdict,
    VerifyOutcome,
};

/// The first line of the prelude, by which tests find it in a rendered script.
pub const HEADER: &str = "# ---- contract: the loop contract's vocabulary";

/// A word bash reads as one token without quotes.
fn plain(word: &str) -> &str {
    assert!(
        !word.is_empty()
            && word.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/' | b'*' | b':')
            }),
        "the contract word '{word}' cannot be placed in bash unquoted"
    );
    word
}

/// `NAME=(a b c)`, wrapped at about 96 columns.
fn array(out: &mut String, name: &str, words: impl IntoIterator<Item = impl AsRef<str>>) {
    let mut line = format!("{name}=(");
    let mut first = true;
    for w in words {
        let w = plain(w.as_ref()).to_string();
        let w = if w.contains('*') { format!("'{w}'") } else { w };
        if !first && line.len() + w.len() > 94 {
            out.push_str(&line);
            out.push('\n');
            line = "  ".into();
        } else if !first {
            line.push(' ');
        }
        line.push_str(&w);
        first = false;
    }
    line.push(')');
    out.push_str(&line);
    out.push('\n');
}

/// `declare -A NAME=([k]=v ...)`, one pair per line.
fn assoc<'a>(out: &mut String, name: &str, pairs: impl IntoIterator<Item = (String, &'a str)>) {
    let _ = writeln!(out, "declare -A {name}=(");
    for (k, v) in pairs {
        let _ = writeln!(out, "  [{}]={}", plain(&k), plain(v));
    }
    out.push_str(")\n");
}

/// `readonly PREFIX_WORD=word` for each word of a closed set.
fn constants(out: &mut String, prefix: &str, words: &[&str]) {
    for w in words {
        let name = format!("{prefix}{}", w.to_ascii_uppercase());
        let _ = writeln!(out, "readonly {}={}", plain(&name), plain(w));
    }
}

/// `^(a|b|c)$`: a whole-value regex over a closed set.
fn alternation(words: &[&str]) -> String {
    let words: Vec<&str> = words.iter().map(|w| plain(w)).collect();
    format!("^({})$", words.join("|"))
}

fn render() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{HEADER} (exit codes, statuses, stop reasons, state keys\n\
         # ---- and their types, settings and their bounds), rendered from orbit's contract module."
    );
    // One directive for the whole block: a directive covers the command that follows it,
    // and the block is one command.
    out.push_str(
        "# shellcheck disable=SC2034  # a table: each script uses the names it needs\n{\n",
    );
    let _ = writeln!(out, "readonly ORBIT_CONTRACT_VERSION={CONTRACT_VERSION}");
    out.push_str("# What the runner needs at run time (contract section 1): its preflight names each one missing.\n");
    array(&mut out, "ORBIT_CORE_TOOLS", super::runtime::CORE_TOOLS);
    array(
        &mut out,
        "ORBIT_PERL_HOME_MODULES",
        super::runtime::PERL_HOME_MODULES,
    );
    array(
        &mut out,
        "ORBIT_PERL_JSON_MODULES",
        super::runtime::PERL_JSON_MODULES,
    );
    array(
        &mut out,
        "ORBIT_PERL_NET_MODULES",
        super::runtime::PERL_NET_MODULES,
    );

    out.push_str("# Exit codes (contract section 5).\n");
    for e in ExitCode::ALL {
        let _ = writeln!(out, "readonly {}={}", e.bash_name(), e.code());
    }

    out.push_str("# Statuses, stop reasons, circuit states.\n");
    let statuses: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
    let reasons: Vec<&str> = StopReason::ALL.iter().map(|s| s.as_str()).collect();
    let cb: Vec<&str> = CbState::ALL.iter().map(|s| s.as_str()).collect();
    constants(&mut out, "STATUS_", &statuses);
    constants(&mut out, "REASON_", &reasons);
    constants(&mut out, "CB_", &cb);
    let integrity: Vec<&str> = StopReason::INTEGRITY.iter().map(|s| s.as_str()).collect();
    array(&mut out, "ORBIT_STATUSES", &statuses);
    array(&mut out, "ORBIT_STOP_REASONS", &reasons);
    array(&mut out, "ORBIT_INTEGRITY_REASONS", &integrity);
    // A stop's one name, where it is not its status word (BLOCKED:max_iterations is
    // EXHAUSTED): the runner names it so in its footer summary, as audit and status do.
    let renamed: Vec<(String, &str)> = Status::ALL
        .iter()
        .filter(|s| !matches!(s, Status::Continue))
        .flat_map(|s| StopReason::ALL.iter().map(move |r| (*s, *r)))
        .filter_map(|(s, r)| {
            let v = Verdict::at_rest(s, r).as_str();
            (v != s.as_str()).then(|| (format!("{s}:{r}"), v))
        })
        .collect();
    assoc(&mut out, "ORBIT_STOP_NAME", renamed);
    let _ = writeln!(out, "readonly ORBIT_RE_STATUS='{}'", alternation(&statuses));
    let _ = writeln!(
        out,
        "readonly ORBIT_RE_STOP_REASON='{}'",
        alternation(&reasons)
    );
    let _ = writeln!(out, "readonly ORBIT_RE_CB_STATE='{}'", alternation(&cb));

    out.push_str("# Phases, verify outcomes, cost kinds, agent outcomes, notify events, events, fault points.\n");
    let phases: Vec<&str> = Phase::ALL.iter().map(|s| s.as_str()).collect();
    let verify: Vec<&str> = VerifyOutcome::ALL.iter().map(|s| s.as_str()).collect();
    let kinds: Vec<&str> = CostKind::ALL.iter().map(|s| s.as_str()).collect();
    constants(&mut out, "PHASE_", &phases);
    constants(&mut out, "VERIFY_", &verify);
    constants(&mut out, "COST_", &kinds);
    let outcomes: Vec<&str> = AgentOutcome::ALL.iter().map(|s| s.as_str()).collect();
    constants(&mut out, "OUTCOME_", &outcomes);
    let codes: Vec<&str> = CheckCode::ALL.iter().map(|s| s.as_str()).collect();
    constants(&mut out, "CODE_", &codes);
    let notify: Vec<&str> = NotifyEvent::ALL.iter().map(|s| s.as_str()).collect();
    constants(&mut out, "NOTIFY_EVENT_", &notify);
    let _ = writeln!(out, "readonly ORBIT_RE_COST_KIND='{}'", alternation(&kinds));
    let sources: Vec<&str> = CostSource::ALL.iter().map(|s| s.as_str()).collect();
    constants(&mut out, "COST_SOURCE_", &sources);
    let _ = writeln!(
        out,
        "readonly ORBIT_RE_COST_SOURCE='{}'",
        alternation(&sources)
    );
    array(
        &mut out,
        "ORBIT_EVENTS",
        EventName::ALL.iter().map(|e| e.as_str()),
    );
    array(
        &mut out,
        "ORBIT_FAULT_POINTS",
        FaultPoint::ALL.iter().map(|e| e.as_str()),
    );
    out.push_str("# The loop directory's files and directories (contract section 3).\n");
    array(&mut out, "ORBIT_LOOP_FILES", LOOP_FILES.iter().copied());
    array(&mut out, "ORBIT_LOOP_DIRS", LOOP_DIRS.iter().copied());
    let _ = writeln!(out, "readonly ORBIT_PINS_SETS={}", plain(PINS_SETS));

    out.push_str("# state.env: every key in order, and its type (contract section 4.1).\n");
    array(
        &mut out,
        "ORBIT_STATE_KEYS",
        STATE_KEYS.iter().map(|(k, _)| *k),
    );
    assoc(
        &mut out,
        "ORBIT_STATE_TYPE",
        STATE_KEYS
            .iter()
            .map(|(k, t)| (k.to_string(), t.bash_name())),
    );
    let _ = writeln!(out, "readonly ORBIT_UINT_DIGITS={MAX_UINT_DIGITS}");
    // The typed values as whole-value regexes (state_check_value, with LC_ALL=C): a whole
    // number has no leading zero; a ref name is also at most ORBIT_REF_MAX bytes, starts
    // with none of '-', '/', '.', and holds no '..'.
    let uint_rest = MAX_UINT_DIGITS - 1;
    let part_rest = MAX_SEMVER_PART_DIGITS - 1;
    let _ = writeln!(
        out,
        "readonly ORBIT_RE_UINT='^(0|[1-9][0-9]{{0,{uint_rest}}})$'"
    );
    let _ = writeln!(
        out,
        "readonly ORBIT_RE_POSITIVE='^[1-9][0-9]{{0,{uint_rest}}}$'"
    );
    let part = format!("(0|[1-9][0-9]{{0,{part_rest}}})");
    let _ = writeln!(out, "readonly ORBIT_RE_SEMVER='^{part}\\.{part}\\.{part}$'");
    let _ = writeln!(
        out,
        "readonly ORBIT_RE_HEX='^[0-9a-f]{{0,{MAX_HEX_DIGITS}}}$'"
    );
    out.push_str("readonly ORBIT_RE_REF='^[A-Za-z0-9._/-]+$'\n");
    let _ = writeln!(out, "readonly ORBIT_REF_MAX={MAX_REF_LEN}");
    let _ = writeln!(out, "readonly ORBIT_PATH_MAX={MAX_PATH_LEN}");
    out.push_str("# Keys an older contract major did not have: KEY -> the major that added it.\n");
    out.push_str("declare -A ORBIT_KEY_SINCE=(\n");
    for (k, m) in KEYS_SINCE {
        let _ = writeln!(out, "  [{}]={m}", plain(k));
    }
    out.push_str(")\n");

    out.push_str("# result.env: every key in order; the numeric ones.\n");
    array(
        &mut out,
        "ORBIT_RESULT_KEYS",
        RESULT_KEYS.iter().map(|(k, _)| *k),
    );
    array(
        &mut out,
        "ORBIT_RESULT_NUMERIC",
        RESULT_KEYS.iter().filter(|(_, n)| *n).map(|(k, _)| *k),
    );

    out.push_str("# Pins (contract section 7).\n");
    array(&mut out, "ORBIT_INIT_PINNED", INIT_PINNED.iter());
    array(&mut out, "ORBIT_PERMISSION_FILES", PERMISSION_FILES.iter());

    out.push_str(
        "# Settings: kind and bounds, as loop.toml's validation has them; the loop's identity\n",
    );
    out.push_str("# by its loop.toml key (no environment variable overrides it).\n");
    let _ = writeln!(out, "readonly ORBIT_DURATION_MAX={DURATION_MAX_SECS}");
    array(
        &mut out,
        "ORBIT_SETTINGS",
        SETTINGS.iter().map(|s| s.bash_name()),
    );
    assoc(
        &mut out,
        "ORBIT_SETTING_KIND",
        SETTINGS.iter().map(|s| (s.bash_name(), s.kind.bash_name())),
    );
    let mins: Vec<(String, String)> = SETTINGS
        .iter()
        .filter_map(|s| match s.kind {
            SettingKind::Count { min, .. } | SettingKind::Duration { min } => {
                Some((s.bash_name(), min.to_string()))
            }
            _ => None,
        })
        .collect();
    assoc(
        &mut out,
        "ORBIT_SETTING_MIN",
        mins.iter().map(|(k, v)| (k.clone(), v.as_str())),
    );
    let maxs: Vec<(String, String)> = SETTINGS
        .iter()
        .filter_map(|s| match s.kind {
            SettingKind::Count { max, .. } => Some((s.bash_name(), max.to_string())),
            SettingKind::Duration { .. } => Some((s.bash_name(), DURATION_MAX_SECS.to_string())),
            _ => None,
        })
        .collect();
    assoc(
        &mut out,
        "ORBIT_SETTING_MAX",
        maxs.iter().map(|(k, v)| (k.clone(), v.as_str())),
    );
    // A choice's words, blank-separated (each a plain word, so the quotes hold them all).
    let _ = writeln!(out, "declare -A ORBIT_SETTING_WORDS=(");
    for s in SETTINGS {
        if let SettingKind::Choice { words } = s.kind {
            let words: Vec<&str> = words.iter().map(|w| plain(w)).collect();
            let _ = writeln!(out, "  [{}]='{}'", plain(&s.bash_name()), words.join(" "));
        }
    }
    out.push_str(")\n");
    assoc(
        &mut out,
        "ORBIT_SETTING_IDENTITY",
        SETTINGS
            .iter()
            .filter(|s| !s.overridable())
            .map(|s| (s.bash_name(), s.key)),
    );
    out.push_str("}\n");
    out
}

/// The prelude, rendered once per process.
pub fn prelude() -> &'static str {
    static PRELUDE: OnceLock<String> = OnceLock::new();
    PRELUDE.get_or_init(render)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prelude_names_every_word_of_the_contract() {
        let p = prelude();
        assert!(p.starts_with(HEADER));
        for e in ExitCode::ALL {
            assert!(
                p.contains(&format!("readonly {}={}\n", e.bash_name(), e.code())),
                "{e:?}"
            );
        }
        for s in Status::ALL {
            assert!(p.contains(&format!("readonly STATUS_{s}={s}\n")));
        }
        for r in StopReason::ALL {
            let up = r.as_str().to_ascii_uppercase();
            assert!(p.contains(&format!("readonly REASON_{up}={r}\n")));
        }
        for (k, t) in STATE_KEYS {
            assert!(p.contains(&format!("  [{k}]={}\n", t.bash_name())));
        }
        for s in SETTINGS {
            assert!(p.contains(&format!("  [{}]={}\n", s.bash_name(), s.kind.bash_name())));
        }
    }
}
