//! The keys of the bash's associative arrays. bash ends the shell at once, running no ERR
//! trap, when an associative array's subscript expands to nothing (`bad array subscript`):
//! a runner that builds a key from what it read or parsed (a line of a listing, a field of a
//! record) dies without its footer the day that input is empty. This lint reads every static
//! part under templates/lib and flags a subscript of an associative array that can be empty
//! because it comes from input nothing checked:
//!
//! - a key parsed inline, `arr[${line#> }]` (a pattern removal, substitution, substring or
//!   `${x:+...}`), with no literal character beside it: the parsed value cannot be checked
//!   before it is used;
//! - a key that is only a variable (`arr[$v]`, `arr["$v"]`, `arr[${v}]`) the function took
//!   from input (a `read`, a parsed `${x#...}` or a command substitution) with no emptiness
//!   test of it (`-n $v`, `-z $v`, `$v == ?*`, a pattern that needs a character, a `case`
//!   over it) between that assignment and the use (earlier on the same line counts).
//!
//! Literal keys, keys with a literal character (`[$status:$reason]`), arithmetic
//! (`[$((n))]`), defaults (`${v:-none}`) and variables the runner set itself (a `for` loop,
//! an arithmetic result, a positional parameter) are not findings.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The static parts, by their path under templates/.
fn parts() -> Vec<(String, String)> {
    let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    let mut out: Vec<(String, String)> = walkdir::WalkDir::new(templates.join("lib"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .map(|p| {
            let rel = p.strip_prefix(&templates).unwrap();
            (
                rel.to_string_lossy().into_owned(),
                fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The names a `declare -A` / `local -A` (or `-gA`, `-rA`) line declares.
fn assoc_declared(line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if !matches!(*w, "declare" | "local" | "typeset") {
            continue;
        }
        let mut j = i + 1;
        let mut assoc = false;
        while j < words.len() && words[j].starts_with('-') {
            assoc |= words[j].contains('A');
            j += 1;
        }
        if !assoc {
            continue;
        }
        for w in &words[j..] {
            let name: String = w.chars().take_while(|&c| is_name_char(c)).collect();
            if name.is_empty() || !w[name.len()..].is_empty() && !w[name.len()..].starts_with('=') {
                break;
            }
            out.push(name);
        }
    }
    out
}

/// The end (exclusive) of the `${...}`, `$(...)`, `[...]` or quote that opens at `i`.
fn closing(chars: &[char], i: usize) -> usize {
    let (open, close) = match chars[i] {
        '{' => ('{', '}'),
        '(' => ('(', ')'),
        '[' => ('[', ']'),
        q @ ('\'' | '"') => {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != q {
                j += if chars[j] == '\\' && q == '"' { 2 } else { 1 };
            }
            return (j + 1).min(chars.len());
        }
        _ => return i + 1,
    };
    let mut depth = 0;
    let mut j = i;
    while j < chars.len() {
        let c = chars[j];
        if c == '\\' {
            j += 2;
            continue;
        }
        if c == '\'' && open != '[' {
            j = closing(chars, j);
            continue;
        }
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return j + 1;
            }
        }
        j += 1;
    }
    chars.len()
}

/// A shell word starting at `i` (quotes and `${...}`/`$(...)` kept whole): its end.
fn word_end(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            c if c.is_whitespace() || c == ';' || c == '|' || c == '&' || c == ')' => break,
            '\\' => i += 2,
            '\'' | '"' => i = closing(chars, i),
            '$' if i + 1 < chars.len() && matches!(chars[i + 1], '{' | '(') => {
                i = closing(chars, i + 1)
            }
            _ => i += 1,
        }
    }
    i.min(chars.len())
}

/// What one `${...}` does with its variable: `Plain` (`${v}`), `Default` (`${v:-word}` with a
/// word, `${v:?}`: never empty here), or `Parsed` (a removal, substitution, substring,
/// `${v:+...}`, a length...: a value made from the variable's).
#[derive(Debug, PartialEq)]
enum Expansion {
    Plain(String),
    Default,
    Parsed(String),
}

fn expansion(inner: &str) -> Expansion {
    let name: String = inner.chars().take_while(|&c| is_name_char(c)).collect();
    let rest = &inner[name.len()..];
    if rest.is_empty() {
        return Expansion::Plain(name);
    }
    if (rest.starts_with(":-") && rest.len() > 2) || rest.starts_with(":?") {
        return Expansion::Default;
    }
    Expansion::Parsed(name)
}

/// Whether a key (the text between `[` and `]`) can never be empty, and else the variables
/// it is made of, plain or parsed inline.
#[derive(Debug, Default)]
struct Key {
    never_empty: bool,
    plain: Vec<String>,
    parsed: Vec<String>,
}

fn key_of(text: &str) -> Key {
    let chars: Vec<char> = text.chars().collect();
    let mut key = Key::default();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '"' => {
                // The quotes themselves add nothing; what is inside them counts.
                let end = closing(&chars, i);
                let inner: String = chars[i + 1..end.saturating_sub(1).max(i + 1)]
                    .iter()
                    .collect();
                let k = key_of(&inner);
                key.never_empty |= k.never_empty;
                key.plain.extend(k.plain);
                key.parsed.extend(k.parsed);
                i = end;
            }
            '\'' => {
                key.never_empty |= closing(&chars, i) > i + 2;
                i = closing(&chars, i);
            }
            '$' if i + 1 < chars.len() && chars[i + 1] == '{' => {
                let end = closing(&chars, i + 1);
                let inner: String = chars[i + 2..end - 1].iter().collect();
                match expansion(&inner) {
                    Expansion::Plain(v) => key.plain.push(v),
                    Expansion::Default => key.never_empty = true,
                    Expansion::Parsed(v) => key.parsed.push(v),
                }
                i = end;
            }
            '$' if i + 2 < chars.len() && chars[i + 1] == '(' && chars[i + 2] == '(' => {
                // Arithmetic: a number, never empty.
                key.never_empty = true;
                i = closing(&chars, i + 1);
            }
            '$' if i + 1 < chars.len() && chars[i + 1] == '(' => {
                key.parsed.push("$(...)".to_string());
                i = closing(&chars, i + 1);
            }
            '$' => {
                let name: String = chars[i + 1..]
                    .iter()
                    .take_while(|&&c| is_name_char(c))
                    .collect();
                if !name.is_empty() && !name.chars().all(|c| c.is_ascii_digit()) {
                    key.plain.push(name.clone());
                }
                i += 1 + name.len().max(1);
            }
            _ => {
                key.never_empty = true;
                i += 1;
            }
        }
    }
    key
}

/// The variables a line assigns from input: a `read`'s names, or `v=` a parsed `${x...}`
/// or a command substitution. And the variables it assigns from anything else (which ends
/// their taint).
fn assigned(line: &str) -> (Vec<String>, Vec<String>) {
    let chars: Vec<char> = line.chars().collect();
    let (mut tainted, mut clean) = (Vec::new(), Vec::new());
    let mut i = 0;
    let mut words: Vec<String> = Vec::new();
    while i < chars.len() {
        if chars[i].is_whitespace() || matches!(chars[i], ';' | '|' | '&' | '(' | ')') {
            if !words.is_empty() && matches!(chars[i], ';' | '|' | '&' | '(' | ')') {
                read_names(&words, &mut tainted);
                words.clear();
            }
            i += 1;
            continue;
        }
        if chars[i] == '#' && (i == 0 || chars[i - 1].is_whitespace()) {
            break;
        }
        let end = word_end(&chars, i);
        let word: String = chars[i..end].iter().collect();
        let name: String = word.chars().take_while(|&c| is_name_char(c)).collect();
        if !name.is_empty() && word[name.len()..].starts_with('=') {
            let value = &word[name.len() + 1..];
            let value = value.trim_matches('"');
            let from_input = (value.contains("$(") && !value.starts_with("$(("))
                || (value.starts_with("${")
                    && matches!(
                        expansion(&value[2..value.len().saturating_sub(1).max(2)]),
                        Expansion::Parsed(_)
                    ));
            if from_input {
                tainted.push(name);
            } else {
                clean.push(name);
            }
        }
        // A loop over the runner's own words: `for v in ...`.
        if words.last().is_some_and(|w| w == "for") && word.chars().all(is_name_char) {
            clean.push(word.clone());
        }
        words.push(word);
        i = end.max(i + 1);
    }
    read_names(&words, &mut tainted);
    (tainted, clean)
}

/// The names a `read` among `words` (one simple command) reads into.
fn read_names(words: &[String], out: &mut Vec<String>) {
    let Some(at) = words.iter().position(|w| w == "read") else {
        return;
    };
    let mut j = at + 1;
    while j < words.len() {
        let w = &words[j];
        if w.starts_with('<') || w == "do" || w == "]]" || w == "then" {
            break;
        }
        if let Some(opt) = w.strip_prefix('-') {
            // Options that take an argument (-a reads an indexed array: not a key).
            if opt.ends_with(['d', 't', 'n', 'N', 'u', 'p', 'i', 'a']) {
                j += 1;
            }
        } else if w.chars().all(is_name_char) {
            out.push(w.clone());
        }
        j += 1;
    }
}

/// Whether `line` tests variable `v` for emptiness (or with a pattern that needs a character).
fn checks_nonempty(line: &str, v: &str) -> bool {
    for form in [format!("${v}"), format!("${{{v}}}"), format!("\"${v}\"")] {
        let mut from = 0;
        while let Some(at) = line[from..].find(&form) {
            let at = from + at;
            from = at + form.len();
            let after = &line[from..];
            if after.starts_with(|c: char| is_name_char(c)) {
                continue;
            }
            let before = line[..at].trim_end().trim_end_matches('"');
            if before.ends_with("-n") || before.ends_with("-z") {
                return true;
            }
            // A case over it: its arms name the values it may take.
            if before.ends_with("case")
                && after.trim_start_matches('"').trim_start().starts_with("in")
            {
                return true;
            }
            let after = after.trim_start();
            if let Some(pat) = after
                .strip_prefix("==")
                .or_else(|| after.strip_prefix("!="))
                .or_else(|| after.strip_prefix("=~"))
            {
                let pat = pat.trim_start();
                if !(pat.starts_with('*') || pat.starts_with("\"$") || pat.starts_with('$')) {
                    return true;
                }
            }
        }
    }
    false
}

/// The subscripts of associative arrays `assoc` in `line`: (array, key text, the line's text
/// before it).
fn subscripts(line: &str, assoc: &BTreeSet<String>) -> Vec<(String, String, String)> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '[' && i > 0 && is_name_char(chars[i - 1]) {
            let mut s = i;
            while s > 0 && is_name_char(chars[s - 1]) {
                s -= 1;
            }
            let name: String = chars[s..i].iter().collect();
            let end = closing(&chars, i);
            if assoc.contains(&name) && end > i + 1 {
                out.push((
                    name,
                    chars[i + 1..end - 1].iter().collect(),
                    chars[..s].iter().collect(),
                ));
            }
            i = end.max(i + 1);
            continue;
        }
        i += 1;
    }
    out
}

/// The findings of the rule over `parts` (path, text), with `global` the associative arrays
/// every part may use (the prelude's and the parts' top-level ones).
fn findings(parts: &[(String, String)], global: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in parts {
        let mut assoc = global.clone();
        // variable -> the line it was last taken from input on (absent: clean or checked).
        let mut tainted: BTreeMap<String, usize> = BTreeMap::new();
        for (idx, line) in text.lines().enumerate() {
            let n = idx + 1;
            let code = line.trim_start();
            if code.starts_with('#') {
                continue;
            }
            if line.ends_with("() {") && !line.starts_with(char::is_whitespace) {
                // A new function: its own locals and taints.
                assoc = global.clone();
                tainted.clear();
            }
            assoc.extend(assoc_declared(code));
            for (name, key_text, before) in subscripts(code, &assoc) {
                let key = key_of(&key_text);
                if key.never_empty {
                    continue;
                }
                if let Some(v) = key.parsed.first() {
                    out.push(format!(
                        "templates/{path}:{n}: {name}[{key_text}]: the key is parsed inline from ${v}: put it in a variable and skip an empty one before using it"
                    ));
                    continue;
                }
                // A check earlier on the same line (`[[ -n $v ]] && a[$v]=1`) counts.
                if !key.plain.is_empty()
                    && key
                        .plain
                        .iter()
                        .all(|v| tainted.contains_key(v) && !checks_nonempty(&before, v))
                {
                    let v = &key.plain[0];
                    out.push(format!(
                        "templates/{path}:{n}: {name}[{key_text}]: ${v} comes from input (line {}) and nothing checks it is not empty before this use",
                        tainted[v]
                    ));
                }
            }
            // What this line checks holds from here; what it assigns from input is tainted
            // anew (a check on the same line, after it, counts too: `v=... ; [[ -n $v ]]`).
            let (from_input, clean) = assigned(code);
            for v in clean {
                tainted.remove(&v);
            }
            for v in from_input {
                tainted.insert(v, n);
            }
            tainted.retain(|v, at| !(checks_nonempty(code, v) && *at <= n));
        }
    }
    out
}

/// The associative arrays the prelude and the parts declare at their top level.
fn global_assoc(parts: &[(String, String)]) -> BTreeSet<String> {
    let prelude = orbit::contract::bash::prelude();
    let mut out: BTreeSet<String> = prelude.lines().flat_map(assoc_declared).collect();
    for (_, text) in parts {
        for line in text.lines().filter(|l| !l.starts_with(char::is_whitespace)) {
            out.extend(assoc_declared(line));
        }
    }
    out
}

#[test]
fn no_associative_array_key_comes_from_unchecked_input() {
    let parts = parts();
    assert!(parts.len() > 20, "the static parts");
    let global = global_assoc(&parts);
    assert!(
        global.contains("S") && global.contains("R") && global.contains("ORBIT_STOP_NAME"),
        "the associative arrays the parts share: {global:?}"
    );
    let found = findings(&parts, &global);
    assert!(
        found.is_empty(),
        "associative-array keys that can be empty (bash ends the shell on one, with no trap):\n{}",
        found.join("\n")
    );
}

/// The comparison of two listings as trust.sh had it when an empty listing of the loop
/// directory (the directory removed) killed the runner without its footer.
const TRUST_BEFORE: &str = r#"trust_check() {
  local mode=$1 now line path ty why diffs bad='' bad_why='' pinned='' pinned_why=''
  local -A before=() was=()
    diffs=$(diff -- <(printf '%s\n' "$TRUST_LOOP") <(printf '%s\n' "$now") || true)
    while IFS= read -r line; do
      if [[ $line == '< '* ]]; then
        before[${line#< * * * * * }]=1
        was[${line#< }]=1
      fi
    done <<<"$diffs"
    while IFS= read -r line; do
      [[ $line == '> '* ]] || continue
      path=${line#> * * * * * }
      if [[ -n ${was[${line#> }]-} ]]; then
        unset 'before[$path]'
        continue
      fi
      if [[ $line == '> '[fd]' '* ]] && ! trust_may_change "$mode" "$path"; then
        if [[ -n ${before[$path]-} ]]; then why=changed; else why=created; fi
        trust_note "$path" "$why"
      fi
      unset 'before[$path]'
    done <<<"$diffs"
}
"#;

/// What the lint is for: it flags the code that killed the runner, and not the same code
/// with its keys checked, nor keys that cannot be empty.
#[test]
fn the_subscript_lint_flags_the_key_that_killed_the_runner() {
    let global = BTreeSet::from(["S".to_string(), "ORBIT_STOP_NAME".to_string()]);
    let found = findings(
        &[("lib/runner/trust.sh".to_string(), TRUST_BEFORE.to_string())],
        &global,
    );
    let text = found.join("\n");
    for want in [
        "trust.sh:7: before[${line#< * * * * * }]: the key is parsed inline from $line",
        "trust.sh:8: was[${line#< }]: the key is parsed inline from $line",
        "trust.sh:14: was[${line#> }]: the key is parsed inline from $line",
        "trust.sh:15: before[$path]: $path comes from input (line 13)",
        "trust.sh:19: before[$path]: $path comes from input (line 13)",
        "trust.sh:22: before[$path]: $path comes from input (line 13)",
    ] {
        assert!(text.contains(want), "missing: {want}\nfound:\n{text}");
    }
    assert_eq!(found.len(), 6, "{text}");
    let fine = r#"f() {
  local -A seen=() kinds=()
  local line key k
  while IFS= read -r line; do
    key=${line#< }
    [[ -n $key ]] || continue
    seen[$key]=1
  done
  while read -r k; do
    [[ $k == ?* ]] || continue
    kinds["$k"]=1
  done
  for k in a b; do seen[$k]=1; done
  S[LAST_STATUS]=x
  echo "${ORBIT_STOP_NAME[$status:$reason]:-}" "${seen[${k:-none}]-}" "${seen[lit]-}"
  seen[$1]=1
}
"#;
    let found = findings(&[("lib/x.sh".to_string(), fine.to_string())], &global);
    assert!(found.is_empty(), "{found:?}");
    // And a read key used before its check is still one.
    let late = "g() {\n  local -A a=()\n  local k\n  read -r k\n  a[$k]=1\n  [[ -n $k ]]\n}\n";
    let found = findings(&[("lib/y.sh".to_string(), late.to_string())], &global);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("a[$k]: $k comes from input (line 4)"),
        "{found:?}"
    );
}
