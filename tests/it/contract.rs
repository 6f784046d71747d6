//! The loop contract in the generated bash: the static parts name every exit code and
//! status through the prelude instead of repeating them, and every script's prelude holds
//! exactly the words and numbers of orbit's contract module.

use std::fs;
use std::path::Path;
use std::time::Duration;

use orbit::contract::{self, ExitCode, Status};
use proptest::prelude::*;

use crate::support::{
    Repo, assert_ok, bash_with_parts, command, count_check, counting_agent, run_bounded,
};

// ---- the lint: no bare exit code, no bare status word in the code of the static bash

/// Where the scanner is in a line of bash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Code; `opened_by_subst` when it is the inside of a `$(...)`, with its open parens.
    Code {
        subst: bool,
        parens: u32,
    },
    Single,
    Ansi,
    Double,
}

/// The code of bash text, line by line: comments dropped, the contents of quoted strings
/// ('...', "...", $'...', also across lines) and of here-documents removed (the quotes
/// stay, as separators). The code inside a `$(...)` counts as code, even within double
/// quotes. Enough of bash for the static parts, not a parser of all of it.
fn code_lines(text: &str) -> Vec<String> {
    let mut stack = vec![Ctx::Code {
        subst: false,
        parens: 0,
    }];
    let mut heredoc: Option<(String, bool)> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some((word, strip_tabs)) = &heredoc {
            let l = if *strip_tabs {
                line.trim_start_matches('\t')
            } else {
                line
            };
            if l == word {
                heredoc = None;
            }
            out.push(String::new());
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut code = String::new();
        let mut pending: Option<(String, bool)> = None;
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            let prev = if i == 0 { None } else { Some(chars[i - 1]) };
            match *stack.last().unwrap() {
                Ctx::Single => {
                    if c == '\'' {
                        stack.pop();
                        code.push('\'');
                    }
                }
                Ctx::Ansi => {
                    if c == '\\' {
                        i += 1;
                    } else if c == '\'' {
                        stack.pop();
                        code.push('\'');
                    }
                }
                Ctx::Double => {
                    if c == '\\' {
                        i += 1;
                    } else if c == '"' {
                        stack.pop();
                        code.push('"');
                    } else if c == '$' && next == Some('(') {
                        stack.push(Ctx::Code {
                            subst: true,
                            parens: 0,
                        });
                        code.push_str(" $(");
                        i += 1;
                    }
                }
                Ctx::Code { subst, parens } => {
                    let word_start = prev.is_none_or(|p| p.is_whitespace() || ";&|()".contains(p));
                    if c == '#' && word_start {
                        break;
                    } else if c == '\\' {
                        code.push(' ');
                        i += 1;
                    } else if c == '\'' && prev == Some('$') {
                        stack.push(Ctx::Ansi);
                        code.push('\'');
                    } else if c == '\'' {
                        stack.push(Ctx::Single);
                        code.push('\'');
                    } else if c == '"' {
                        stack.push(Ctx::Double);
                        code.push('"');
                    } else if c == '$' && next == Some('(') {
                        stack.push(Ctx::Code {
                            subst: true,
                            parens: 0,
                        });
                        code.push_str("$(");
                        i += 1;
                    } else if c == '(' {
                        *stack.last_mut().unwrap() = Ctx::Code {
                            subst,
                            parens: parens + 1,
                        };
                        code.push(c);
                    } else if c == ')' {
                        if parens > 0 {
                            *stack.last_mut().unwrap() = Ctx::Code {
                                subst,
                                parens: parens - 1,
                            };
                        } else if subst {
                            stack.pop();
                        }
                        code.push(c);
                    } else if c == '<' && next == Some('<') && chars.get(i + 2) != Some(&'<') {
                        // A here-document: its delimiter word, its body skipped below.
                        let mut j = i + 2;
                        let strip_tabs = chars.get(j) == Some(&'-');
                        if strip_tabs {
                            j += 1;
                        }
                        while chars.get(j).is_some_and(|c| *c == ' ') {
                            j += 1;
                        }
                        let quote = chars.get(j).copied().filter(|q| *q == '\'' || *q == '"');
                        if quote.is_some() {
                            j += 1;
                        }
                        let mut word = String::new();
                        while let Some(&w) = chars.get(j) {
                            if w.is_ascii_alphanumeric() || w == '_' {
                                word.push(w);
                                j += 1;
                            } else {
                                break;
                            }
                        }
                        if !word.is_empty() {
                            if quote.is_some() && chars.get(j) == quote.as_ref() {
                                j += 1;
                            }
                            pending = Some((word, strip_tabs));
                            code.push_str("<<");
                            i = j;
                            continue;
                        }
                        code.push_str("<<");
                        i += 1;
                    } else if c == '<' && next == Some('<') {
                        code.push_str("<<<");
                        i += 2;
                    } else {
                        code.push(c);
                    }
                }
            }
            i += 1;
        }
        if pending.is_some() {
            heredoc = pending;
        }
        out.push(code);
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The whole words of a line of code, with their byte offsets.
fn words(code: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in code.char_indices() {
        match (is_word(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, &code[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &code[s..]));
    }
    out
}

/// The words of the contract's other closed sets (stop reasons, circuit states, phases,
/// verify outcomes, cost kinds, engines): the lint reports them where code assigns or
/// compares them (`x=word`, `== word`, `!= word`), where the prelude's names belong (and
/// for an engine, nowhere: its part is chosen when the loop is rendered).
fn value_words() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = contract::StopReason::ALL
        .iter()
        .map(|r| r.as_str())
        .collect();
    v.extend(contract::CbState::ALL.iter().map(|c| c.as_str()));
    v.extend(contract::Phase::ALL.iter().map(|p| p.as_str()));
    v.extend(contract::VerifyOutcome::ALL.iter().map(|o| o.as_str()));
    v.extend(contract::CostKind::ALL.iter().map(|k| k.as_str()));
    v.extend(contract::AgentOutcome::ALL.iter().map(|o| o.as_str()));
    v.extend(contract::Engine::ALL.iter().map(|e| e.as_str()));
    v
}

/// The findings of the lint in one file: `file:line: what` for every bare exit-code literal
/// (`exit N` but the shell's own 126 and 127, `finish N`, `orbit_die N`, `return N` but 0
/// and 1, `EXIT_CODE]=N`), every bare status word in code, every other contract word
/// assigned or compared in code, and every `$ENGINE` in code: the engine's name is printed
/// (in quotes), never dispatched on (`case $ENGINE`, `[[ $ENGINE == ... ]]`): the loop
/// holds its engine's part only. An event's check code (`code WORD`) is named too.
fn lint(file: &str, text: &str) -> Vec<String> {
    let statuses: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
    let values = value_words();
    let raw_lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (n, code) in code_lines(text).iter().enumerate() {
        let raw = raw_lines[n].trim();
        let ws = words(code);
        for (k, &(at, w)) in ws.iter().enumerate() {
            let next_is_number = ws.get(k + 1).is_some_and(|&(nat, nw)| {
                code[at + w.len()..nat]
                    .chars()
                    .all(|c| c == ' ' || c == '\t')
                    && nw.bytes().all(|b| b.is_ascii_digit())
            });
            let prev_char = code[..at].chars().next_back();
            let command = prev_char.is_none_or(|c| !is_word(c) && c != '$' && c != '-');
            // 126 and 127 are the shell's own statuses (found but not run, not found), which
            // a wrapper passes on as a shell would: not the contract's.
            let shell_status = w == "exit"
                && ws
                    .get(k + 1)
                    .is_some_and(|&(_, nw)| nw == "126" || nw == "127");
            if command
                && ["exit", "finish", "orbit_die"].contains(&w)
                && next_is_number
                && !shell_status
            {
                found.push(format!("{file}:{}: bare exit code: {raw}", n + 1));
            }
            if command && w == "return" && next_is_number {
                let nw = ws[k + 1].1;
                if nw != "0" && nw != "1" {
                    found.push(format!("{file}:{}: bare return code: {raw}", n + 1));
                }
            }
            if w == "EXIT_CODE" && code[at + w.len()..].starts_with("]=") {
                let rest = &code[at + w.len() + 2..];
                if rest.starts_with(|c: char| c.is_ascii_digit()) {
                    found.push(format!("{file}:{}: bare exit code: {raw}", n + 1));
                }
            }
            if statuses.contains(&w) {
                found.push(format!("{file}:{}: bare status word {w}: {raw}", n + 1));
            }
            let before = code[..at].trim_end_matches(' ');
            let assigned =
                code[..at].ends_with('=') || before.ends_with("==") || before.ends_with("!=");
            if values.contains(&w) && assigned {
                found.push(format!("{file}:{}: bare contract word {w}: {raw}", n + 1));
            }
            // An event's check code (`code REGRESSION_RED`): the prelude's $CODE_* names it.
            if contract::CheckCode::parse(w).is_some()
                && k > 0
                && ws[k - 1].1 == "code"
                && code[ws[k - 1].0 + 4..at].chars().all(|c| c == ' ')
            {
                found.push(format!("{file}:{}: bare check code {w}: {raw}", n + 1));
            }
            if w == "ENGINE" && (code[..at].ends_with('$') || code[..at].ends_with("${")) {
                found.push(format!("{file}:{}: dispatch on the engine: {raw}", n + 1));
            }
        }
    }
    found
}

/// The static bash parts, by file name.
fn static_parts() -> Vec<(String, String)> {
    let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    let mut parts: Vec<(String, String)> = walkdir::WalkDir::new(templates.join("lib"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .map(|p| {
            (
                format!(
                    "templates/{}",
                    p.strip_prefix(&templates).unwrap().to_string_lossy()
                ),
                fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    parts.sort();
    assert!(parts.len() >= 7, "the static parts: {parts:?}");
    parts
}

#[test]
fn every_event_the_scripts_write_is_a_word_of_the_contract() {
    let mut seen = 0;
    for (name, text) in static_parts() {
        for (n, line) in text.lines().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix("state_event ") else {
                continue;
            };
            let event = rest.split_whitespace().next().unwrap_or("");
            seen += 1;
            assert!(
                contract::EventName::parse(event).is_some(),
                "{name}:{}: state_event {event} is not in contract::EventName",
                n + 1
            );
        }
    }
    assert!(seen > 20, "the scripts write events: {seen}");
}

#[test]
fn the_static_bash_names_every_exit_code_and_status() {
    let found: Vec<String> = static_parts()
        .iter()
        .flat_map(|(name, text)| lint(name, text))
        .collect();
    assert!(
        found.is_empty(),
        "use the prelude's $EXIT_* and $STATUS_* names:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_lint_finds_bare_codes_and_words_and_only_in_code() {
    let bad = "finish 14 BLOCKED x\n  exit 3\nR[EXIT_CODE]=10\norbit_die 2 \"no\"\nreturn 3\n\
               [[ $s == DONE ]] && x\ncase $s in PAUSED) ;; esac\nR[STOP_REASON]=budget\n\
               [[ $r != circuit_open ]]\nS[CB_STATE]=HALF_OPEN\ncase $ENGINE in\n\
               [[ ${ENGINE} == x ]]\n[[ $e != aider ]]\n\
               state_event verify_fail 0 code REGRESSION_RED\n";
    let found = lint("t.sh", bad);
    for (line, what) in [
        (1, "bare exit code"),
        (1, "bare status word BLOCKED"),
        (2, "bare exit code"),
        (3, "bare exit code"),
        (4, "bare exit code"),
        (5, "bare return code"),
        (6, "bare status word DONE"),
        (7, "bare status word PAUSED"),
        (8, "bare contract word budget"),
        (9, "bare contract word circuit_open"),
        (10, "bare contract word HALF_OPEN"),
        (11, "dispatch on the engine"),
        (12, "dispatch on the engine"),
        (13, "bare contract word aider"),
        (14, "bare check code REGRESSION_RED"),
    ] {
        assert!(
            found
                .iter()
                .any(|f| f.starts_with(&format!("t.sh:{line}: {what}"))),
            "line {line} ({what}) not reported: {found:?}"
        );
    }
    let good = "cd -- \"$d\" || exit 126\n# exit 3\necho \"exit 3\" 'finish 14 BLOCKED' $'DONE\\'s' # DONE\n\
                exit \"$EXIT_INTEGRITY\"\nreturn 0\nreturn 1\nx=${#a} # exit 3\n\
                perl -e '\n  exit 3; print \"DONE\"\n'\ncat <<'EOF'\nexit 10 when DONE\nEOF\n\
                y=\"$(printf '%s' \"exit 3\")\"\nSTATUS_DONE=1 R[DONE_CLAIM]=1 EXIT_CODE=$EXIT_DONE\n\
                z=$((1 << (n - 1)))\nexit\nPERMANENT_WHY=\"$ENGINE: x\" ENGINE_FIX=y\n";
    assert_eq!(lint("t.sh", good), Vec::<String>::new());
}

// ---- every name of the contract, in every script's prelude

/// Bash expressions and the values the contract module says they must have.
fn expected_prelude_values() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    let mut add = |expr: String, val: String| v.push((expr, val));
    add(
        "$ORBIT_CONTRACT_VERSION".into(),
        contract::CONTRACT_VERSION.into(),
    );
    for e in ExitCode::ALL {
        add(format!("${}", e.bash_name()), e.code().to_string());
    }
    let upper = |s: &str| s.to_ascii_uppercase();
    for s in Status::ALL {
        add(format!("$STATUS_{}", upper(s.as_str())), s.to_string());
    }
    for r in contract::StopReason::ALL {
        add(format!("$REASON_{}", upper(r.as_str())), r.to_string());
    }
    for c in contract::CbState::ALL {
        add(format!("$CB_{}", upper(c.as_str())), c.to_string());
    }
    for p in contract::Phase::ALL {
        add(format!("$PHASE_{}", upper(p.as_str())), p.to_string());
    }
    for o in contract::VerifyOutcome::ALL {
        add(format!("$VERIFY_{}", upper(o.as_str())), o.to_string());
    }
    for k in contract::CostKind::ALL {
        add(format!("$COST_{}", upper(k.as_str())), k.to_string());
    }
    for o in contract::AgentOutcome::ALL {
        add(format!("$OUTCOME_{}", upper(o.as_str())), o.to_string());
    }
    for e in contract::NotifyEvent::ALL {
        add(format!("$NOTIFY_EVENT_{}", e.as_str()), e.to_string());
    }
    let join = |words: Vec<String>| words.join(" ");
    add(
        "${ORBIT_STATUSES[*]}".into(),
        join(Status::ALL.iter().map(|s| s.to_string()).collect()),
    );
    add(
        "${ORBIT_STOP_REASONS[*]}".into(),
        join(
            contract::StopReason::ALL
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    );
    add(
        "${ORBIT_INTEGRITY_REASONS[*]}".into(),
        join(
            contract::StopReason::INTEGRITY
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    );
    add(
        "${ORBIT_EVENTS[*]}".into(),
        join(
            contract::EventName::ALL
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    );
    add(
        "${ORBIT_LOOP_FILES[*]}".into(),
        join(contract::LOOP_FILES.iter().map(|s| s.to_string()).collect()),
    );
    add(
        "${ORBIT_LOOP_DIRS[*]}".into(),
        join(contract::LOOP_DIRS.iter().map(|s| s.to_string()).collect()),
    );
    add("$ORBIT_PINS_SETS".into(), contract::PINS_SETS.to_string());
    add(
        "${ORBIT_FAULT_POINTS[*]}".into(),
        join(
            contract::FaultPoint::ALL
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    );
    add(
        "${ORBIT_STATE_KEYS[*]}".into(),
        join(
            contract::STATE_KEYS
                .iter()
                .map(|(k, _)| k.to_string())
                .collect(),
        ),
    );
    for (k, t) in contract::STATE_KEYS {
        add(format!("${{ORBIT_STATE_TYPE[{k}]}}"), t.bash_name().into());
    }
    add(
        "${#ORBIT_STATE_TYPE[@]}".into(),
        contract::STATE_KEYS.len().to_string(),
    );
    add(
        "$ORBIT_UINT_DIGITS".into(),
        contract::MAX_UINT_DIGITS.to_string(),
    );
    add("$ORBIT_REF_MAX".into(), contract::MAX_REF_LEN.to_string());
    add(
        "${ORBIT_RESULT_KEYS[*]}".into(),
        join(
            contract::RESULT_KEYS
                .iter()
                .map(|(k, _)| k.to_string())
                .collect(),
        ),
    );
    add(
        "${ORBIT_RESULT_NUMERIC[*]}".into(),
        join(
            contract::RESULT_KEYS
                .iter()
                .filter(|(_, n)| *n)
                .map(|(k, _)| k.to_string())
                .collect(),
        ),
    );
    add(
        "${ORBIT_INIT_PINNED[*]}".into(),
        join(
            contract::INIT_PINNED
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    );
    add(
        "${ORBIT_PERMISSION_FILES[*]}".into(),
        join(
            contract::PERMISSION_FILES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    );
    add(
        "$ORBIT_DURATION_MAX".into(),
        contract::settings::DURATION_MAX_SECS.to_string(),
    );
    add(
        "${ORBIT_SETTINGS[*]}".into(),
        join(contract::SETTINGS.iter().map(|s| s.bash_name()).collect()),
    );
    for s in contract::SETTINGS {
        let name = s.bash_name();
        add(
            format!("${{ORBIT_SETTING_KIND[{name}]}}"),
            s.kind.bash_name().into(),
        );
        let (min, max) = match s.kind {
            contract::SettingKind::Count { min, max } => (min.to_string(), max.to_string()),
            contract::SettingKind::Duration { min } => (
                min.to_string(),
                contract::settings::DURATION_MAX_SECS.to_string(),
            ),
            _ => ("none".into(), "none".into()),
        };
        add(format!("${{ORBIT_SETTING_MIN[{name}]-none}}"), min);
        add(format!("${{ORBIT_SETTING_MAX[{name}]-none}}"), max);
        let words = match s.kind {
            contract::SettingKind::Choice { words } => words.join(" "),
            _ => "none".into(),
        };
        add(format!("${{ORBIT_SETTING_WORDS[{name}]-none}}"), words);
        let identity = if s.overridable() { "none" } else { s.key };
        add(
            format!("${{ORBIT_SETTING_IDENTITY[{name}]-none}}"),
            identity.into(),
        );
    }
    v
}

/// Words each typed regex of the prelude must accept or refuse, as Rust's `ValueType` does.
fn regex_cases() -> Vec<(&'static str, String, bool)> {
    use contract::ValueType;
    let mut v = Vec::new();
    for s in Status::ALL {
        v.push(("ORBIT_RE_STATUS", s.to_string(), true));
    }
    for r in contract::StopReason::ALL {
        v.push(("ORBIT_RE_STOP_REASON", r.to_string(), true));
    }
    for c in contract::CbState::ALL {
        v.push(("ORBIT_RE_CB_STATE", c.to_string(), true));
    }
    for k in contract::CostKind::ALL {
        v.push(("ORBIT_RE_COST_KIND", k.to_string(), true));
    }
    for (re, w) in [
        ("ORBIT_RE_STATUS", "done"),
        ("ORBIT_RE_STATUS", "DONEX"),
        ("ORBIT_RE_STOP_REASON", "NONE"),
        ("ORBIT_RE_STOP_REASON", "xnone"),
        ("ORBIT_RE_CB_STATE", "HALF"),
        ("ORBIT_RE_COST_KIND", "bogus"),
    ] {
        v.push((re, w.to_string(), false));
    }
    for (re, t) in [
        ("ORBIT_RE_UINT", ValueType::Uint),
        ("ORBIT_RE_POSITIVE", ValueType::Positive),
        ("ORBIT_RE_SEMVER", ValueType::Semver),
        ("ORBIT_RE_HEX", ValueType::Hex),
    ] {
        for w in [
            "",
            "0",
            "1",
            "01",
            "999999999999999999",
            "1000000000000000000",
            "1.0.0",
            "1.0",
            "1.01.0",
            "123456.0.0",
            "1234567.0.0",
            "ff",
            "FF",
            &"a".repeat(64),
            &"a".repeat(65),
            "-1",
            "1x",
        ] {
            v.push((re, w.to_string(), t.accepts(w)));
        }
    }
    v
}

/// The prelude of one rendered script (in the lib.sh it loads, the one whose sha256 it
/// holds, stripped of its comments), evaluated by bash: every expression's value, and
/// whether each regex case matched.
fn evaluate_prelude(script: &Path) -> Vec<String> {
    let text = fs::read_to_string(script).unwrap();
    let lib_path = script.with_file_name("lib.sh");
    let lib = fs::read_to_string(&lib_path).unwrap();
    assert!(
        text.contains(&format!(
            "ORBIT_LIB_SHA256={}\n",
            crate::support::file_sha(&lib_path)
        )),
        "{} loads the lib.sh beside it",
        script.display()
    );
    let stripped = orbit::bashstrip::strip(contract::bash::prelude());
    let prelude = stripped.as_str();
    assert!(
        lib.contains(prelude),
        "{} carries the contract prelude",
        lib_path.display()
    );
    let mut body = String::from("set -Eeuo pipefail\nsource \"$1\"\nLC_ALL=C\n");
    for (expr, _) in expected_prelude_values() {
        body.push_str(&format!("printf '%s\\n' \"{expr}\"\n"));
    }
    for (re, word, _) in regex_cases() {
        body.push_str(&format!(
            "if [[ '{word}' =~ ${re} ]]; then echo yes; else echo no; fi\n"
        ));
    }
    let work = tempfile::tempdir().unwrap();
    let p = work.path().join("prelude.sh");
    fs::write(&p, prelude).unwrap();
    let mut cmd = command("bash");
    cmd.arg("-c").arg(&body).arg("harness").arg(&p);
    let out = run_bounded(cmd, Duration::from_secs(30));
    assert_ok(&out, "the prelude evaluated");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_script_carries_every_name_of_the_contract_in_its_prelude() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 1);
    let dir = repo.init_loop(&agent, &[&count_check(1)], &[]);
    let values = expected_prelude_values();
    let cases = regex_cases();
    for script in ["run-loop.sh", "recover.sh", "verify.sh", "notify.sh"] {
        let got = evaluate_prelude(&dir.join(script));
        assert_eq!(got.len(), values.len() + cases.len(), "{script}: {got:?}");
        for ((expr, want), have) in values.iter().zip(&got) {
            assert_eq!(have, want, "{script}: {expr}");
        }
        for ((re, word, want), have) in cases.iter().zip(&got[values.len()..]) {
            assert_eq!(
                have == "yes",
                *want,
                "{script}: '{word}' =~ ${re} (Rust says {want})"
            );
        }
    }
}

// ---- settings: one check, by the contract's kinds and bounds, in every script

/// Values around each setting's bounds, and whether the contract's table takes them.
fn setting_cases() -> Vec<(String, String, bool)> {
    use contract::SettingKind;
    let year = contract::settings::DURATION_MAX_SECS;
    let mut v = Vec::new();
    for s in contract::SETTINGS {
        let name = s.bash_name();
        let mut add = |value: String, ok: bool| v.push((name.clone(), value, ok));
        match s.kind {
            SettingKind::Count { min, max } => {
                add(min.to_string(), true);
                add(max.to_string(), true);
                add((max + 1).to_string(), false);
                if min > 0 {
                    add((min - 1).to_string(), false);
                }
                add(format!("0{max}"), false);
                add("x[$(touch CANARY)]".into(), false);
                add(String::new(), false);
            }
            SettingKind::Duration { min } => {
                add("0".into(), min == 0);
                add(format!("{min}s"), true);
                add(min.to_string(), true);
                add("1h30m".into(), true);
                add(" 10m ".into(), true);
                add("366d".into(), true);
                add(year.to_string(), true);
                add((year + 1).to_string(), false);
                add("367d".into(), false);
                add("400d".into(), false);
                add("99999999999999999999999d".into(), false);
                add("10x".into(), false);
                add("m".into(), false);
                add(String::new(), false);
            }
            SettingKind::Bool => {
                for (b, ok) in [
                    ("0", true),
                    ("1", true),
                    ("true", true),
                    ("false", true),
                    ("yes", false),
                    ("2", false),
                    ("", false),
                ] {
                    add(b.into(), ok);
                }
            }
            SettingKind::Usd => {
                for (u, ok) in [
                    ("", true),
                    ("5", true),
                    ("12.50", true),
                    ("0.75", true),
                    ("999999999.999999", true),
                    ("lots", false),
                    ("1234567890", false),
                    ("1.1234567", false),
                    (".", false),
                ] {
                    add(u.into(), ok);
                }
            }
            SettingKind::Text => {
                add(String::new(), true);
                add("anything $(touch CANARY) at all".into(), true);
            }
            SettingKind::List => {
                add(String::new(), true);
                add(
                    "https://a.example/x http://b.example/$(touch CANARY)".into(),
                    true,
                );
            }
            SettingKind::Choice { words } => {
                for w in words {
                    add(w.to_string(), true);
                    add(format!("{w} "), false);
                    add(w.to_ascii_uppercase(), false);
                }
                add(words.join(" "), false);
                add("x[$(touch CANARY)]".into(), false);
                add(String::new(), false);
            }
        }
    }
    v
}

#[test]
fn each_setting_is_checked_by_the_kind_and_bounds_of_the_contract_table() {
    let work = tempfile::tempdir().unwrap();
    let cases = setting_cases();
    let list: String = cases
        .iter()
        .map(|(n, v, _)| format!("{n}\t{v}\n"))
        .collect();
    fs::write(work.path().join("cases"), list).unwrap();
    let mut cmd = bash_with_parts(
        work.path(),
        &["common"],
        r#"while IFS=$'\t' read -r name value; do
  printf -v "$name" '%s' "$value"
  if orbit_setting_v "$name"; then echo "ok $REPLY"; else echo "err $ORBIT_SETTING_ERR"; fi
done <"$1""#,
    );
    cmd.arg(work.path().join("cases")).current_dir(work.path());
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_ok(&out, "the settings harness");
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got.len(), cases.len());
    for ((name, value, ok), line) in cases.iter().zip(&got) {
        assert_eq!(
            line.starts_with("ok"),
            *ok,
            "{name}={value:?}: the table says {ok}, bash says {line}"
        );
        if !ok {
            // The message names the setting, the value and what to do.
            assert!(line.contains(name.as_str()), "{line}");
            assert!(line.contains(value.as_str()), "{line}");
            assert!(line.contains("loop.toml"), "{line}");
        }
    }
    assert!(!work.path().join("CANARY").exists());
    // loop.toml's validation draws the same lines for every count and duration (the kinds
    // whose text Rust and bash read alike), wherever the value is one loop.toml can hold.
    let mut compared = 0;
    for (name, value, ok) in &cases {
        let s = contract::SETTINGS
            .iter()
            .find(|s| s.bash_name() == *name)
            .unwrap();
        if !matches!(
            s.kind,
            contract::SettingKind::Count { .. } | contract::SettingKind::Duration { .. }
        ) {
            continue;
        }
        let cfg = toml::from_str::<orbit::config::LoopConfig>(&format!("{} = {value}", s.key))
            .or_else(|_| toml::from_str(&format!("{} = {value:?}", s.key)));
        let Ok(cfg) = cfg else { continue };
        assert_eq!(
            cfg.validate().is_ok(),
            *ok,
            "loop.toml {} = {value:?}: {:?}",
            s.key,
            cfg.validate()
        );
        compared += 1;
    }
    assert!(
        compared > 100,
        "{compared} values compared with loop.toml's validation"
    );
}

/// The runner with one setting overridden from the environment.
fn run_with(repo: &Repo, dir: &Path, env: &[(&str, &str)]) -> std::process::Output {
    repo.run_loop(dir, &["--once"], env)
}

#[test]
fn the_runner_refuses_a_setting_past_its_bound_and_takes_the_bound_as_loop_toml_does() {
    use orbit::config::LoopConfig;
    let repo = Repo::new();
    let agent = counting_agent(&repo, 3);
    let dir = repo.init_loop(&agent, &[&count_check(3)], &[]);
    let before = fs::read(dir.join("state.env")).unwrap();
    let preflight = i32::from(ExitCode::Preflight.code());
    for (k, v, range) in [
        ("MAX_ITERATIONS", "1000001", "from 1 to 1000000"),
        ("PASS_K", "21", "from 1 to 20"),
        ("CONFIRM_RUNS", "6", "from 0 to 5"),
        ("EXEC_TIMEOUT", "400d", "from 1s to 366d"),
    ] {
        let out = run_with(&repo, &dir, &[(k, v)]);
        crate::support::assert_code(&out, preflight, k);
        let all = crate::support::text(&out);
        assert!(
            all.contains(&format!("{k}={v} is out of range")) && all.contains(range),
            "{k}: the message names the setting, its value and the range:\n{all}"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("NEXUS_LOOP_STATUS: CONTINUE"),
            "{all}"
        );
        assert_eq!(fs::read(dir.join("state.env")).unwrap(), before, "{k}");
        assert!(!dir.join("iterations").exists(), "{k}: nothing ran");
    }
    // Each bound itself is taken: the tick runs an iteration.
    let bounds = [
        ("MAX_ITERATIONS", "1000000"),
        ("PASS_K", "20"),
        ("CONFIRM_RUNS", "5"),
        ("EXEC_TIMEOUT", "366d"),
    ];
    let out = run_with(&repo, &dir, &bounds);
    crate::support::assert_code(&out, i32::from(ExitCode::Continue.code()), "the bounds");
    assert!(dir.join("iterations/000001/result.env").exists());
    // loop.toml's validation draws the same lines.
    let at_bounds = LoopConfig {
        max_iterations: 1_000_000,
        pass_k: 20,
        confirm_runs: 5,
        exec_timeout: "366d".into(),
        ..LoopConfig::default()
    };
    assert!(at_bounds.validate().is_ok(), "{:?}", at_bounds.validate());
    for past in [
        LoopConfig {
            max_iterations: 1_000_001,
            ..at_bounds.clone()
        },
        LoopConfig {
            pass_k: 21,
            ..at_bounds.clone()
        },
        LoopConfig {
            confirm_runs: 6,
            ..at_bounds.clone()
        },
        LoopConfig {
            exec_timeout: "400d".into(),
            ..at_bounds.clone()
        },
    ] {
        assert!(past.validate().is_err(), "{past:?}");
    }
}

#[test]
fn verify_and_notify_take_no_setting_the_runner_refuses() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 3);
    let dir = repo.init_loop(&agent, &[&count_check(3)], &[]);
    // verify.sh by hand, with a check timeout the runner refuses: it stops, naming it.
    let mut cmd = command("bash");
    cmd.arg(dir.join("verify.sh"))
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("CHECK_TIMEOUT", "400d");
    let out = run_bounded(cmd, Duration::from_secs(60));
    crate::support::assert_code(&out, i32::from(ExitCode::Preflight.code()), "verify.sh");
    assert!(
        crate::support::text(&out).contains("CHECK_TIMEOUT=400d is out of range"),
        "{}",
        crate::support::text(&out)
    );
    // notify.sh is never fatal: it logs the refused value and keeps its default.
    let mut cmd = command("bash");
    cmd.arg(dir.join("notify.sh"))
        .arg("DONE")
        .arg("a summary")
        .current_dir(repo.path())
        .env("PATH", repo.path_env())
        .env("NOTIFY_TIMEOUT", "400d")
        .env("NOTIFY_DESKTOP", "yes");
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_ok(&out, "notify.sh");
    let log = fs::read_to_string(dir.join("notify.log")).unwrap();
    assert!(
        log.contains("NOTIFY_TIMEOUT=400d is out of range") && log.contains("using 10s"),
        "{log}"
    );
    assert!(log.contains("NOTIFY_DESKTOP='yes' must be 0 or 1"), "{log}");
}

// ---- agent permission files: one list, one classification

#[test]
fn bash_classifies_a_changed_pin_as_the_rust_contract_does() {
    let paths = [
        "goal.md",
        "verify.sh",
        "run-loop.sh",
        "recover.sh",
        "loop.toml",
        "pins.sha256",
        "../../tests/a.rs",
        "../../.claude/settings.json",
        "../../.claude/settings.local.json",
        "../../.claude/settingsX.json",
        "../../.claude/settings my team.json",
        "../../.claude/settings*.json",
        "../../.claude/settings.jsonx",
        "../../.claude/setting.json",
        "../../.claude/sub/settings.json",
        "../../docs/.claude/settings.json",
        "../../.codex/config.toml",
        "../../docs/.codex/config.toml",
        "../../.codex/config.toml.bak",
        "../../.gemini/settings.json",
        "../../.gemini/settings.local.json",
        "../../x/.gemini/settings.json",
        "../.././.gemini/settings.json",
        "./.codex/config.toml",
        ".claude/settings.json",
        "a/../.claude/settings.json",
        "../../.claude/[x].json",
        "../../settings.json",
        // The engines' own files: a permission file for a loop of that engine only.
        "../../.env",
        "../../sub/.env",
        "../../.aider.conf.yml",
        "../../.qwen/settings.json",
        "../../.opencode/plugin/x.js",
        "../../.opencode/plugin/.hidden",
        "../../opencode.json",
        "../../.mcp.json",
        "../../sub/.mcp.json",
        "../../.github/hooks/ci.json",
        "../../.github/hooks/.ci.json",
        "../../.github/workflows/ci.yml",
        "../../.github/agents/helper.agent.md",
    ];
    let work = tempfile::tempdir().unwrap();
    let list: String = paths.iter().map(|p| format!("{p}\n")).collect();
    fs::write(work.path().join("paths"), list).unwrap();
    for &engine in contract::Engine::ALL {
        // The runner knows its engine's files from settings.sh, rendered from this list.
        let files: Vec<String> = contract::engine_permission_files(engine)
            .iter()
            .map(|g| format!("'{g}'"))
            .collect();
        let mut cmd = bash_with_parts(
            work.path(),
            &["common"],
            &format!(
                r#"ENGINE_PERMISSION_FILES=({})
while IFS= read -r path; do
  orbit_pin_reason_v "$path"
  echo "$REPLY"
done <"$1""#,
                files.join(" ")
            ),
        );
        cmd.arg(work.path().join("paths")).current_dir(work.path());
        let out = run_bounded(cmd, Duration::from_secs(30));
        assert_ok(&out, "the pin-reason harness");
        let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(got.len(), paths.len());
        for (p, bash) in paths.iter().zip(&got) {
            assert_eq!(
                bash,
                contract::pin_reason(p, Some(engine)).as_str(),
                "{engine}: {p}: bash and Rust disagree"
            );
        }
        // The list proves something: each reason occurs.
        for r in [
            "goal_drift",
            "reward_hack",
            "script_tamper",
            "permission_hijack",
        ] {
            assert!(got.iter().any(|g| g == r), "{r}");
        }
        // And an engine's own files are its loop's permission files, no other loop's.
        let mcp = paths.iter().position(|p| *p == "../../.mcp.json").unwrap();
        let want = if engine == contract::Engine::Copilot {
            "permission_hijack"
        } else {
            "reward_hack"
        };
        assert_eq!(got[mcp], want, "{engine}");
    }
}

// ---- cost.ledger: one rule for the runner, recover.sh, orbit recover and orbit audit

/// The most a sum in state.env can hold (18 digits): where bash holds a larger sum.
const LEDGER_SUM_CAP: u64 = 999_999_999_999_999_999;

/// Ledger-like bytes: lines near a ledger line (a field changed, missing or added), blank
/// lines, stray bytes, and a last line with or without its newline.
fn ledger_input() -> impl Strategy<Value = Vec<u8>> {
    let iteration = prop::sample::select(vec![
        "1",
        "2",
        "02",
        "0",
        "x",
        "",
        " 2",
        "123456789012345678",
        "1234567890123456789",
    ]);
    let amount = prop::sample::select(vec![
        "0",
        "500",
        "007",
        "999999999",
        "1000000000",
        "123456789012345678",
        "000000000000000001",
        "1234567890123456789",
        "-1",
        "1.5",
        "",
        "5\u{0}",
        "é",
    ]);
    let kind = prop::sample::select(vec![
        "reported",
        "estimated",
        "unknown",
        "bogus",
        "",
        "reported\r",
        "REPORTED",
        "reported\u{1f}",
    ]);
    let tail = prop::sample::select(vec!["", "\t3", "\tzz", "\t", "\t01", "\t3\t4"]);
    let line = prop_oneof![
        8 => (iteration, amount, kind, tail).prop_map(|(i, a, k, t)| format!("{i}\t{a}\t{k}{t}").into_bytes()),
        1 => Just(Vec::new()),
        1 => prop::collection::vec(any::<u8>(), 0..12),
    ];
    (prop::collection::vec(line, 0..12), any::<bool>()).prop_map(|(lines, newline)| {
        let mut out = lines.join(&b'\n');
        if newline && !out.is_empty() {
            out.push(b'\n');
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]
    /// orbit_ledger_sum_v (bash) and orbit's ledger module (Rust) agree on any ledger: the
    /// total, an iteration's total and kinds, and whether the last line is torn.
    #[test]
    fn the_bash_and_rust_ledger_sums_agree(inputs in prop::collection::vec(ledger_input(), 150)) {
        let work = tempfile::tempdir().unwrap();
        let mut all = inputs.clone();
        all.push(b"1\t250000\treported\nx\t500\tbogus\n1\t500\tbogus\n1\t99\treported\tzz\n\n2\t700\testimated\t3\n3\t12".to_vec());
        all.push(b"2\t999999999999999999\treported\n2\t999999999999999999\tunknown\n".to_vec());
        for (i, b) in all.iter().enumerate() {
            fs::write(work.path().join(format!("{i}.ledger")), b).unwrap();
        }
        let mut cmd = bash_with_parts(
            work.path(),
            &["common"],
            r#"for ((i = 0; i < $1; i++)); do
  orbit_ledger_sum_v "$2/$i.ledger" 2
  echo "$REPLY $ORBIT_LEDGER_ITER_SUM $ORBIT_LEDGER_TORN$ORBIT_LEDGER_ITER_KINDS"
done"#,
        );
        cmd.arg(all.len().to_string()).arg(work.path());
        let out = run_bounded(cmd, Duration::from_secs(120));
        prop_assert!(out.status.success(), "{}", crate::support::text(&out));
        let got: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
        prop_assert_eq!(got.len(), all.len());
        let mut counted = 0;
        for (input, line) in all.iter().zip(&got) {
            let l = orbit::ledger::parse(input);
            let mut kinds: Vec<&str> = l.entries.iter().filter(|e| e.iteration == 2).map(|e| e.kind.as_str()).collect();
            kinds.sort_unstable();
            kinds.dedup();
            let mut bash: Vec<&str> = line.split(' ').collect();
            let bash_kinds = {
                let mut k: Vec<&str> = bash.split_off(3).into_iter().filter(|k| !k.is_empty()).collect();
                k.sort_unstable();
                k
            };
            let want = format!(
                "{} {} {}",
                l.total().min(LEDGER_SUM_CAP),
                l.iteration_total(2).min(LEDGER_SUM_CAP),
                u8::from(l.torn_tail.is_some())
            );
            prop_assert_eq!(bash.join(" "), want, "on {:?}", String::from_utf8_lossy(input));
            prop_assert_eq!(bash_kinds, kinds, "kinds on {:?}", String::from_utf8_lossy(input));
            counted += l.entries.len();
        }
        prop_assert!(counted > 0, "the inputs hold whole ledger lines too");
    }
}

#[test]
fn every_reader_of_a_hostile_cost_ledger_sums_it_by_one_rule() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 5);
    let dir = repo.init_loop(&agent, &[&count_check(5)], &[]);
    let cont = i32::from(ExitCode::Continue.code());
    crate::support::assert_code(&repo.run_loop(&dir, &["--once"], &[]), cont, "tick 1");
    let ledger = dir.join("cost.ledger");
    assert_eq!(
        fs::read_to_string(&ledger).unwrap(),
        "1\t250000\treported\n"
    );
    // Lines no reader may count (a bad iteration, a bad kind, a bad candidate, a blank
    // line, a torn last line) around one it must (a fan-out line with its candidate).
    let mut f = fs::OpenOptions::new().append(true).open(&ledger).unwrap();
    std::io::Write::write_all(
        &mut f,
        b"x\t500\tbogus\n1\t500\tbogus\n1\t99\treported\tzz\n\n2\t700\testimated\t3\n3\t12",
    )
    .unwrap();
    drop(f);
    let sum = |d: &Path| orbit::ledger::parse(&fs::read(d.join("cost.ledger")).unwrap()).total();
    assert_eq!(sum(&dir), 250_700);
    let bash_recover_dry = || {
        let mut cmd = command("bash");
        cmd.arg(dir.join("recover.sh"))
            .arg("--dry-run")
            .current_dir(std::env::temp_dir())
            .env("PATH", repo.path_env());
        let out = run_bounded(cmd, Duration::from_secs(60));
        assert_ok(&out, "recover.sh --dry-run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let orbit_recover_dry = || {
        let out = repo.orbit(&["recover", "--dry-run", &dir.display().to_string()]);
        assert_ok(&out, "orbit recover --dry-run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Before the runner re-sums: both recoveries plan the same total, the ledger's.
    for plan in [bash_recover_dry(), orbit_recover_dry()] {
        assert!(
            plan.contains("COST_MICROUSD 250000 → 250700 (the sum of cost.ledger)"),
            "{plan}"
        );
    }
    // The runner's next tick: it ends the torn line, sums by the same rule, and adds its run.
    crate::support::assert_code(&repo.run_loop(&dir, &["--once"], &[]), cont, "tick 2");
    let l = orbit::ledger::parse(&fs::read(&ledger).unwrap());
    assert_eq!(l.torn_tail, None, "the torn line was ended");
    assert_eq!(l.total(), 250_000 + 700 + 250_000);
    assert_eq!(
        crate::support::state_value(&dir, "COST_MICROUSD"),
        l.total().to_string(),
        "the runner's COST_MICROUSD is the ledger's sum"
    );
    let result = crate::support::read_kv(&dir.join("iterations/000002/result.env"));
    assert_eq!(result["COST_MICROUSD"], (700 + 250_000).to_string());
    // Both recoveries find nothing to repair: the state agrees with the ledger.
    for plan in [bash_recover_dry(), orbit_recover_dry()] {
        assert!(plan.contains("nothing to repair"), "{plan}");
        assert!(!plan.contains("COST_MICROUSD"), "{plan}");
    }
    let out = repo.orbit(&["recover", &dir.display().to_string()]);
    assert_ok(&out, "orbit recover");
    assert_eq!(
        crate::support::state_value(&dir, "COST_MICROUSD"),
        l.total().to_string()
    );
    // The audit sees no drift between state and ledger; it notes the lines that are not
    // ledger lines.
    let out = repo.orbit(&["audit", "--json", &dir.display().to_string()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit --json: {e}\n{}", crate::support::text(&out)));
    let findings = v["loops"][0]["findings"].as_array().unwrap().clone();
    let drift: Vec<_> = findings
        .iter()
        .filter(|f| f["class"] == "STATE_DRIFT")
        .collect();
    assert!(
        !drift
            .iter()
            .any(|f| f["message"].as_str().unwrap().contains("sums to")),
        "no cost drift: {drift:?}"
    );
    assert!(
        drift
            .iter()
            .any(|f| f["evidence"].as_str().unwrap().starts_with("cost.ledger:")),
        "the bad lines are noted: {drift:?}"
    );
}

// ---- result.env: the contract's keys, and numbers checked before arithmetic

#[test]
fn a_record_read_back_brings_no_unchecked_number_to_arithmetic() {
    let repo = Repo::new();
    let agent = counting_agent(&repo, 5);
    let dir = repo.init_loop(&agent, &[&count_check(5)], &[]);
    // The runner dies after iteration 1's record is written, before its commit.
    let out = repo.run_loop(&dir, &["--once"], &[("ORBIT_FAULT", "before_commit")]);
    assert_eq!(out.status.code(), None, "killed at the fault point");
    let record = dir.join("iterations/000001/result.env");
    let text = fs::read_to_string(&record).unwrap();
    let hostile: String = text
        .lines()
        .map(|l| match l.split_once('=') {
            Some(("COST_MICROUSD", _)) => "COST_MICROUSD=x[$(touch CANARY)]\n".to_string(),
            Some(("CHANGED", _)) => "CHANGED=$(touch CANARY)\n".to_string(),
            _ => format!("{l}\n"),
        })
        .chain(["NOT_A_KEY=1\n".to_string()])
        .collect();
    assert_ne!(hostile, text);
    fs::write(&record, &hostile).unwrap();
    // The next run does not believe the edited record (the journal's iteration_result names
    // another sha256): iteration 1 is done again, the record kept aside, nothing of it read.
    let out = repo.run_loop(&dir, &["--once"], &[]);
    crate::support::assert_code(&out, i32::from(ExitCode::Continue.code()), "resume");
    for base in [repo.path(), dir.as_path(), &std::env::temp_dir()] {
        assert!(
            !base.join("CANARY").exists(),
            "CANARY in {}",
            base.display()
        );
    }
    let log = fs::read_to_string(dir.join("runner.log")).unwrap();
    assert!(
        log.contains("iteration 1 has a result.env that the journal does not record as the runner's: the iteration is done again"),
        "{log}"
    );
    assert_eq!(
        fs::read_to_string(dir.join("iterations/000001/interrupted.1/result.env")).unwrap(),
        hostile,
        "the edited record is kept aside, as it was"
    );
    crate::support::assert_records_agree(&dir);
}
