//! Mutants of the lines a change added: a small set of operators that need no parser, each
//! a one-line edit a check should notice when the line matters. They work on the line's code
//! only: string literals and comments are masked first, and a line that is all comment, or a
//! file that is not source code, gets none.

/// One operator, as the report and `--json` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `==` ↔ `!=`, `<` → `>=`, `>` → `<=`, `<=` → `>`, `>=` → `<`.
    ComparisonFlipped,
    /// `<` → `<=`, `>` → `>=`, `<=` → `<`, `>=` → `>`: the boundary moved by one.
    ComparisonLoosened,
    /// `if c` → `if !(c)` (`if not (c)` in Python), likewise `while` and `elif`.
    ConditionNegated,
    /// `&&` ↔ `||` (`and` ↔ `or` in Python).
    AndOrSwapped,
    /// An integer literal `n` → `n + 1`.
    IntegerOffByOne,
    /// `true` ↔ `false` (`True` ↔ `False`).
    BooleanFlipped,
    /// `return e` → `return` the language's default value.
    ReturnDefault,
    /// A mutant of cargo-mutants (`--tool cargo-mutants`): its own description says what.
    CargoMutants,
}

impl Operator {
    pub const ALL: [Operator; 7] = [
        Operator::ComparisonFlipped,
        Operator::ComparisonLoosened,
        Operator::ConditionNegated,
        Operator::AndOrSwapped,
        Operator::IntegerOffByOne,
        Operator::BooleanFlipped,
        Operator::ReturnDefault,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operator::ComparisonFlipped => "comparison-flipped",
            Operator::ComparisonLoosened => "comparison-loosened",
            Operator::ConditionNegated => "condition-negated",
            Operator::AndOrSwapped => "and-or-swapped",
            Operator::IntegerOffByOne => "integer-off-by-one",
            Operator::BooleanFlipped => "boolean-flipped",
            Operator::ReturnDefault => "return-default",
            Operator::CargoMutants => "cargo-mutants",
        }
    }
}

/// One mutant: line `line` (0-based) of `path` at the commit, replaced by `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutant {
    pub path: String,
    pub line: usize,
    pub operator: Operator,
    /// The line as mutated, without its terminator.
    pub text: String,
}

/// The source languages mutants are made for, by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    JavaScript,
    Go,
    CLike,
    Ruby,
}

impl Lang {
    pub fn of(path: &str) -> Option<Lang> {
        let ext = path.rsplit_once('.').map(|(_, e)| e)?;
        Some(match ext {
            "rs" => Lang::Rust,
            "py" => Lang::Python,
            "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts" => Lang::JavaScript,
            "go" => Lang::Go,
            "c" | "h" | "cc" | "cpp" | "hpp" | "cxx" | "java" | "kt" | "cs" | "swift" | "scala"
            | "php" => Lang::CLike,
            "rb" => Lang::Ruby,
            _ => return None,
        })
    }

    fn line_comment(self) -> &'static str {
        match self {
            Lang::Python | Lang::Ruby => "#",
            _ => "//",
        }
    }

    fn default_value(self) -> Option<&'static str> {
        match self {
            Lang::Rust => Some("Default::default()"),
            Lang::Python => Some("None"),
            Lang::JavaScript => Some("undefined"),
            Lang::Ruby => Some("nil"),
            Lang::Go | Lang::CLike => None,
        }
    }
}

/// The line with every string literal's and comment's bytes replaced by a placeholder
/// (`\u{1}`), the same length in chars, so that positions in it are positions in the line.
pub fn mask(line: &str, lang: Lang) -> String {
    let chars: Vec<char> = line.chars().collect();
    let comment: Vec<char> = lang.line_comment().chars().collect();
    let quotes: &[char] = match lang {
        // A Rust `'` starts a lifetime as often as a char literal.
        Lang::Rust => &['"'],
        _ => &['"', '\'', '`'],
    };
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            out.push('\u{1}');
            if c == '\\' && i + 1 < chars.len() {
                out.push('\u{1}');
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if chars[i..].starts_with(&comment) || chars[i..].starts_with(&['/', '*']) {
            out.extend(std::iter::repeat_n('\u{1}', chars.len() - i));
            break;
        }
        if quotes.contains(&c) {
            quote = Some(c);
            out.push('\u{1}');
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Replaces chars `at..at+len` of `line` with `with`.
fn splice(line: &str, at: usize, len: usize, with: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out: String = chars[..at].iter().collect();
    out.push_str(with);
    out.extend(&chars[at + len..]);
    out
}

/// Every occurrence of `token` in the masked line as a whole token: not inside a longer
/// operator (for symbols) or a longer word (for words).
fn occurrences(masked: &[char], token: &str) -> Vec<usize> {
    let t: Vec<char> = token.chars().collect();
    let wordy = t.iter().all(|c| is_word(*c));
    let op = |c: char| "=<>!&|+-*/%^:".contains(c);
    let mut out = Vec::new();
    let mut i = 0;
    while i + t.len() <= masked.len() {
        if masked[i..].starts_with(&t) {
            let before = i.checked_sub(1).map(|j| masked[j]);
            let after = masked.get(i + t.len()).copied();
            let ok = if wordy {
                !before.is_some_and(is_word) && !after.is_some_and(is_word)
            } else {
                !before.is_some_and(op) && !after.is_some_and(op)
            };
            if ok {
                out.push(i);
                i += t.len();
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Which lines of a Rust file belong to an item marked `#[cfg(test)]` (a test module or
/// function inside a source file): the attribute's line through the item's closing brace
/// (or its `;`), save a last line with code after the item's end. Their code is what the
/// checks run, never what they need: a mutant there (a test's own integer) says nothing of
/// the code, and a hunk of them alone, reverted, only runs one test fewer. Braces in strings and line comments are not counted; a block
/// comment or raw string that spans lines can mislead it, which at worst mutates a line.
pub fn rust_test_lines(lines: &[&[u8]]) -> Vec<bool> {
    let mut marked = vec![false; lines.len()];
    // Inside a test item: its brace depth, and whether its body has opened.
    let mut inside: Option<(usize, bool)> = None;
    for (n, raw) in lines.iter().enumerate() {
        let line = String::from_utf8_lossy(raw);
        let masked = mask(line.trim_end_matches(['\n', '\r']), Lang::Rust);
        if inside.is_none() {
            let t = masked.trim_start();
            let Some(rest) = t.strip_prefix("#[cfg(test)]") else {
                continue;
            };
            inside = Some((0, false));
            if rest.trim().is_empty() {
                marked[n] = true;
                continue;
            }
        }
        marked[n] = true;
        let Some((mut depth, mut opened)) = inside else {
            continue;
        };
        let mut done = false;
        let mut after = "";
        for (at, c) in masked.char_indices() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    done = opened && depth == 0;
                }
                ';' if !opened && depth == 0 => done = true,
                _ => {}
            }
            if done {
                after = &masked[at + c.len_utf8()..];
                break;
            }
        }
        // Code after the item's end on its last line is code: the line is measured (else a
        // change could hide a function behind `#[cfg(test)] use x;` on one line).
        if after.chars().any(|c| !c.is_whitespace() && c != '\u{1}') {
            marked[n] = false;
        }
        inside = (!done).then_some((depth, opened));
    }
    marked
}

/// The mutants of one added line of a file in `lang`.
pub fn of_line(path: &str, line_no: usize, line: &str, lang: Lang) -> Vec<Mutant> {
    let body = line.trim_end_matches(['\n', '\r']);
    let masked_s = mask(body, lang);
    if masked_s.trim().chars().all(|c| c == '\u{1}') {
        return Vec::new();
    }
    let masked: Vec<char> = masked_s.chars().collect();
    let mut out = Vec::new();
    let mut push = |operator, text: String| {
        if text != body {
            out.push(Mutant {
                path: path.to_string(),
                line: line_no,
                operator,
                text,
            });
        }
    };
    // Comparisons: spaced `<`/`>` only, so generics (`Vec<u8>`) and arrows are left alone.
    let spaced = |at: usize, len: usize| {
        masked.get(at.wrapping_sub(1)) == Some(&' ') && masked.get(at + len) == Some(&' ')
    };
    for (from, flipped, loosened) in [
        ("===", Some("!=="), None),
        ("!==", Some("==="), None),
        ("==", Some("!="), None),
        ("!=", Some("=="), None),
        ("<=", Some(">"), Some("<")),
        (">=", Some("<"), Some(">")),
        ("<", Some(">="), Some("<=")),
        (">", Some("<="), Some(">=")),
    ] {
        let n = from.chars().count();
        for at in occurrences(&masked, from) {
            if from.starts_with(['<', '>']) && !spaced(at, n) {
                continue;
            }
            if lang != Lang::JavaScript && from.len() == 3 {
                continue;
            }
            if let Some(f) = flipped {
                push(Operator::ComparisonFlipped, splice(body, at, n, f));
            }
            if let Some(l) = loosened {
                push(Operator::ComparisonLoosened, splice(body, at, n, l));
            }
        }
    }
    let swaps: &[(&str, &str)] = if lang == Lang::Python {
        &[("and", "or"), ("or", "and")]
    } else {
        &[("&&", "||"), ("||", "&&")]
    };
    for (from, to) in swaps {
        for at in occurrences(&masked, from) {
            push(
                Operator::AndOrSwapped,
                splice(body, at, from.chars().count(), to),
            );
        }
    }
    for (from, to) in [
        ("true", "false"),
        ("false", "true"),
        ("True", "False"),
        ("False", "True"),
    ] {
        for at in occurrences(&masked, from) {
            push(Operator::BooleanFlipped, splice(body, at, from.len(), to));
        }
    }
    for (at, len, n) in integers(&masked) {
        push(
            Operator::IntegerOffByOne,
            splice(body, at, len, &(n + 1).to_string()),
        );
    }
    if let Some(text) = negate(body, &masked, lang) {
        push(Operator::ConditionNegated, text);
    }
    if let Some(text) = return_default(body, &masked, lang) {
        push(Operator::ReturnDefault, text);
    }
    out
}

/// Decimal integer literals of the masked line: (char position, length, value). A number
/// that is part of a word (`x1`), a float (`1.5`) or a wider literal (`0x1f`) is skipped.
fn integers(masked: &[char]) -> Vec<(usize, usize, u64)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < masked.len() {
        if masked[i].is_ascii_digit()
            && !(i > 0 && (is_word(masked[i - 1]) || masked[i - 1] == '.'))
        {
            let start = i;
            while i < masked.len() && masked[i].is_ascii_digit() {
                i += 1;
            }
            let next = masked.get(i).copied();
            let wider = next.is_some_and(|c| is_word(c) || c == '.');
            if !wider {
                let text: String = masked[start..i].iter().collect();
                if let Ok(n) = text.parse::<u64>()
                    && n < u64::MAX
                {
                    out.push((start, i - start, n));
                }
            }
            continue;
        }
        i += 1;
    }
    out
}

/// `if c {` → `if !(c) {`; `if (c) {` → `if (!(c)) {`; Python `if c:` → `if not (c):`.
fn negate(body: &str, masked: &[char], lang: Lang) -> Option<String> {
    let indent = masked.iter().take_while(|c| c.is_whitespace()).count();
    let code: String = masked[indent..].iter().collect();
    let keyword = ["else if ", "elif ", "if ", "while "]
        .into_iter()
        .find(|k| code.starts_with(k))?;
    let start = indent + keyword.chars().count();
    let trimmed_end = masked.len()
        - masked
            .iter()
            .rev()
            .take_while(|c| c.is_whitespace())
            .count();
    let chars: Vec<char> = body.chars().collect();
    if lang == Lang::Python {
        if masked.get(trimmed_end.checked_sub(1)?) != Some(&':') {
            return None;
        }
        let cond: String = chars[start..trimmed_end - 1].iter().collect();
        return Some(splice(
            body,
            start,
            trimmed_end - 1 - start,
            &format!("not ({})", cond.trim_end()),
        ));
    }
    if masked.get(start) == Some(&'(') {
        // The condition is the parenthesised group that opens after the keyword.
        let mut depth = 0usize;
        for (i, c) in masked.iter().enumerate().skip(start) {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        let cond: String = chars[start + 1..i].iter().collect();
                        return Some(splice(
                            body,
                            start + 1,
                            i - start - 1,
                            &format!("!({cond})"),
                        ));
                    }
                }
                _ => {}
            }
        }
        return None;
    }
    // Rust and Go: the condition runs to the `{` that ends the line.
    if masked.get(trimmed_end.checked_sub(1)?) != Some(&'{') {
        return None;
    }
    let cond: String = chars[start..trimmed_end - 1].iter().collect();
    let cond = cond.trim_end();
    if cond.is_empty() || cond.starts_with("let ") {
        return None;
    }
    Some(splice(
        body,
        start,
        cond.chars().count(),
        &format!("!({cond})"),
    ))
}

/// `return e` → `return <default>`, where the language has one default for every type.
fn return_default(body: &str, masked: &[char], lang: Lang) -> Option<String> {
    let default = lang.default_value()?;
    let indent = masked.iter().take_while(|c| c.is_whitespace()).count();
    let code: String = masked[indent..].iter().collect();
    let rest = code.strip_prefix("return ")?;
    let semi = rest.trim_end().ends_with(';');
    let expr = rest.trim_end().trim_end_matches(';').trim();
    if expr.is_empty() || expr == default || expr.contains('{') {
        return None;
    }
    let prefix: String = body.chars().take(indent).collect();
    Some(format!(
        "{prefix}return {default}{}",
        if semi { ";" } else { "" }
    ))
}

/// At most `cap` of `all`, spread over the lines: each line's first mutant, then each line's
/// second, and so on, so that a budget that stops early has still touched every line.
pub fn spread(all: Vec<Mutant>, cap: usize) -> (Vec<Mutant>, usize) {
    let mut by_line: Vec<Vec<Mutant>> = Vec::new();
    for m in all {
        match by_line
            .last_mut()
            .filter(|v| v[0].path == m.path && v[0].line == m.line)
        {
            Some(v) => v.push(m),
            None => by_line.push(vec![m]),
        }
    }
    let total: usize = by_line.iter().map(Vec::len).sum();
    let mut out = Vec::new();
    let mut round = 0;
    while out.len() < cap && out.len() < total {
        for v in &by_line {
            if let Some(m) = v.get(round)
                && out.len() < cap
            {
                out.push(m.clone());
            }
        }
        round += 1;
    }
    let left = total - out.len();
    (out, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str, lang: Lang) -> Vec<(&'static str, String)> {
        of_line("f", 0, line, lang)
            .into_iter()
            .map(|m| (m.operator.name(), m.text))
            .collect()
    }

    #[test]
    fn a_rust_test_module_and_test_function_are_told_apart_from_the_code() {
        let src = "pub fn big(n: u32) -> bool {\n    n > 10\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() {\n        let s = \"}\"; // }\n        assert!(big(11));\n    }\n}\n\npub fn small(n: u32) -> bool {\n    n < 3\n}\n#[cfg(test)] use std::fmt;\nfn after() {}\n#[cfg(test)]\nfn helper() -> u32 { 7 }\nfn last() {}\n";
        let lines: Vec<&[u8]> = src.as_bytes().split_inclusive(|b| *b == b'\n').collect();
        let marked = rust_test_lines(&lines);
        let got: Vec<usize> = (0..lines.len()).filter(|i| marked[*i]).collect();
        // Lines 4..=12: the attribute through the module's closing brace (a brace in a
        // string and a comment not counted); 17: an attributed use; 19..=20: a function.
        assert_eq!(
            got,
            vec![4, 5, 6, 7, 8, 9, 10, 11, 12, 17, 19, 20],
            "{marked:?}"
        );
        // Code after a test item's end on the same line is measured: a change cannot hide
        // a function behind the attribute.
        let sneaky = "#[cfg(test)] use std::fmt; pub fn add(a: u32) -> u32 { if a > 3 { 0 } else { a } }\n#[cfg(test)]\nmod t {\n} pub fn more(a: u32) -> bool { a > 3 }\n#[cfg(test)] mod u { } // the end\n";
        let lines: Vec<&[u8]> = sneaky.as_bytes().split_inclusive(|b| *b == b'\n').collect();
        assert_eq!(
            rust_test_lines(&lines),
            vec![false, true, true, false, true]
        );
    }

    #[test]
    fn comparisons_are_flipped_and_loosened_but_generics_and_strings_are_not() {
        let got = texts("    if n < limit && v != Vec<u8>::new() {", Lang::Rust);
        assert!(
            got.contains(&(
                "comparison-flipped",
                "    if n >= limit && v != Vec<u8>::new() {".into()
            )),
            "{got:?}"
        );
        assert!(got.contains(&(
            "comparison-loosened",
            "    if n <= limit && v != Vec<u8>::new() {".into()
        )));
        assert!(got.contains(&(
            "comparison-flipped",
            "    if n < limit && v == Vec<u8>::new() {".into()
        )));
        assert!(got.contains(&(
            "and-or-swapped",
            "    if n < limit || v != Vec<u8>::new() {".into()
        )));
        assert!(got.contains(&(
            "condition-negated",
            "    if !(n < limit && v != Vec<u8>::new()) {".into()
        )));
        assert!(
            !got.iter()
                .any(|(_, t)| t.contains("Vec>") || t.contains("Vec<=")),
            "{got:?}"
        );
        assert!(texts(r#"let s = "a < b == c";"#, Lang::Rust).is_empty());
        assert!(texts("    // if a == b { return 1 }", Lang::Rust).is_empty());
    }

    #[test]
    fn python_negates_with_not_and_swaps_words() {
        let got = texts("    elif a and b:\n", Lang::Python);
        assert!(
            got.contains(&("condition-negated", "    elif not (a and b):".into())),
            "{got:?}"
        );
        assert!(got.contains(&("and-or-swapped", "    elif a or b:".into())));
        let ret = texts("    return total + 1  # the sum\n", Lang::Python);
        assert!(
            ret.contains(&(
                "integer-off-by-one",
                "    return total + 2  # the sum".into()
            )),
            "{ret:?}"
        );
        assert!(
            ret.contains(&("return-default", "    return None".into())),
            "{ret:?}"
        );
    }

    #[test]
    fn integers_and_booleans_change_alone() {
        let got = texts("x = foo(10, 2.5, 0x1f, v2, True)", Lang::Python);
        assert_eq!(
            got,
            vec![
                (
                    "boolean-flipped",
                    "x = foo(10, 2.5, 0x1f, v2, False)".to_string()
                ),
                (
                    "integer-off-by-one",
                    "x = foo(11, 2.5, 0x1f, v2, True)".to_string()
                ),
            ]
        );
    }

    #[test]
    fn c_like_conditions_negate_inside_their_parentheses() {
        let got = texts("  if (a === b) { go(); }", Lang::JavaScript);
        assert!(
            got.contains(&("comparison-flipped", "  if (a !== b) { go(); }".into())),
            "{got:?}"
        );
        assert!(
            got.contains(&("condition-negated", "  if (!(a === b)) { go(); }".into())),
            "{got:?}"
        );
        let rs = texts("    return x * 2;", Lang::Rust);
        assert!(
            rs.contains(&("return-default", "    return Default::default();".into())),
            "{rs:?}"
        );
        assert!(
            texts("if let Some(x) = y {", Lang::Rust)
                .iter()
                .all(|(o, _)| *o != "condition-negated")
        );
    }

    #[test]
    fn spreading_touches_every_line_before_a_second_mutant_of_any() {
        let mut all = of_line("f", 0, "a = 1 + 2 + 3", Lang::Python);
        all.extend(of_line("f", 1, "b = True", Lang::Python));
        let (picked, left) = spread(all, 2);
        assert_eq!(
            picked.iter().map(|m| m.line).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(left, 2);
    }

    #[test]
    fn only_source_files_have_a_language() {
        assert_eq!(Lang::of("src/a.rs"), Some(Lang::Rust));
        assert_eq!(Lang::of("web/x.tsx"), Some(Lang::JavaScript));
        assert_eq!(Lang::of("README.md"), None);
        assert_eq!(Lang::of("Makefile"), None);
    }
}
