//! The rooms of the generated bash: every static part under templates/lib is one
//! responsibility of a readable size, and owns its state. A part declares its globals at
//! its top (an assignment outside any function); a function assigns only globals its own
//! part declares, or the shared channels (`REPLY`, the iteration record `R`, the state
//! `S`); a function is defined at its part's top level, never inside another function nor
//! redefined in a subshell (what differs for a run elsewhere is passed to the owner's
//! functions). A part or a function past its size, a global assigned by a part that does not
//! declare it, or a function defined where a function runs, fails here, but for the named
//! exceptions below, which may only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The most lines a static part holds.
const PART_MAX: usize = 600;
/// The most lines a function holds.
const FUNCTION_MAX: usize = 120;

/// Parts still over PART_MAX, with the size they may not pass: split them, then remove
/// their line.
const PART_EXCEPTIONS: &[(&str, usize)] = &[];

/// Functions still over FUNCTION_MAX, with the size they may not pass: cut them into named
/// steps, then remove their line.
const FUNCTION_EXCEPTIONS: &[(&str, &str, usize)] = &[];

/// Globals every part may assign: the reply of a `_v` function (REPLY, and REPLY_* where
/// it has several parts) and the shared records.
const SHARED: &[&str] = &["REPLY", "R", "S"];

fn shared(name: &str) -> bool {
    SHARED.contains(&name) || name.starts_with("REPLY_")
}

/// Globals a part assigns though another part of its script declares them: the part, the
/// global, and why it still does.
const GLOBAL_EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// The static parts, by their path under templates/.
fn parts() -> Vec<(String, String)> {
    let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    let mut out: Vec<(String, String)> = walkdir::WalkDir::new(templates.join("lib"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .map(|p| {
            let rel = p
                .strip_prefix(&templates)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// One function of a part: its name, first line (1-based) and length in lines.
#[derive(Debug)]
struct Function {
    name: String,
    line: usize,
    len: usize,
}

/// What a part holds: its functions, the globals it declares (assigned at top level) and
/// the globals its functions assign (name -> first line), locals excluded.
#[derive(Debug, Default)]
struct Part {
    functions: Vec<Function>,
    declares: BTreeSet<String>,
    assigns: BTreeMap<String, usize>,
    exports: BTreeSet<String>,
    /// Functions defined where a function runs, not at the part's top level: inside
    /// another function's body (the name, its line, the function around it) or in a
    /// subshell or block (the function around it empty).
    nested: Vec<(String, usize, String)>,
}

fn is_global_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The name an assignment word assigns (`NAME=`, `NAME+=`, `NAME[k]=`), if it is one.
fn assigned_name(word: &str) -> Option<&str> {
    let end = word.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    let (name, rest) = word.split_at(end);
    let first = name.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let rest = if rest.starts_with('[') {
        &rest[rest.find(']')? + 1..]
    } else {
        rest
    };
    (rest.starts_with('=') || rest.starts_with("+=")).then_some(name)
}

/// The code of one line: heredoc bodies and comments left out by the caller's state.
#[derive(Default)]
struct Lexer {
    heredoc: Option<(String, bool)>,
}

/// Splits bash code into simple commands, each a list of words (quotes kept, `$( )`,
/// `<( )`, `>( )` and `(( ))` bodies kept inside their word); comments dropped.
fn commands(code: &str) -> Vec<Vec<String>> {
    let mut cmds: Vec<Vec<String>> = vec![Vec::new()];
    let mut word = String::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    // Subshells open in this stretch of code: a `)` beyond them ends a case pattern.
    let mut open = 0usize;
    let flush = |word: &mut String, cmds: &mut Vec<Vec<String>>| {
        if !word.is_empty() {
            cmds.last_mut().unwrap().push(std::mem::take(word));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                word.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    word.push(n);
                }
                i += 2;
                continue;
            }
            '\'' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == '\'')
                    .map_or(chars.len(), |p| i + 1 + p);
                word.extend(&chars[i..(end + 1).min(chars.len())]);
                i = end + 1;
                continue;
            }
            '"' => {
                let end = skip_double(&chars, i + 1);
                word.extend(&chars[i..end.min(chars.len())]);
                i = end;
                continue;
            }
            '$' | '<' | '>' if chars.get(i + 1) == Some(&'(') => {
                let end = skip_parens(&chars, i + 1);
                word.extend(&chars[i..end.min(chars.len())]);
                i = end;
                continue;
            }
            '$' if chars.get(i + 1) == Some(&'{') => {
                let end = skip_braces(&chars, i + 1);
                word.extend(&chars[i..end.min(chars.len())]);
                i = end;
                continue;
            }
            '(' if word.is_empty() && chars.get(i + 1) == Some(&'(') => {
                // An arithmetic command: one word holding its body.
                flush(&mut word, &mut cmds);
                let end = skip_parens(&chars, i);
                cmds.push(vec![chars[i..end.min(chars.len())].iter().collect()]);
                cmds.push(Vec::new());
                i = end;
                continue;
            }
            '#' if word.is_empty() => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ' ' | '\t' => flush(&mut word, &mut cmds),
            ')' if open == 0 => {
                // A case pattern's end: the words before it are the pattern, not a command.
                word.clear();
                cmds.last_mut().unwrap().clear();
            }
            '\n' | ';' | '&' | '|' | '(' | ')' => {
                match c {
                    '(' => open += 1,
                    ')' => open -= 1,
                    _ => {}
                }
                flush(&mut word, &mut cmds);
                cmds.push(Vec::new());
            }
            _ => word.push(c),
        }
        i += 1;
    }
    flush(&mut word, &mut cmds);
    // Reserved words that start a command leave the command after them.
    let keywords = [
        "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!", "esac",
        "time",
    ];
    cmds.into_iter()
        .map(|mut c| {
            while c.first().is_some_and(|w| keywords.contains(&w.as_str())) {
                c.remove(0);
            }
            c
        })
        .filter(|c| !c.is_empty())
        .collect()
}

/// The index just past the closing quote of a double-quoted string opened before `i`.
fn skip_double(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            '$' if chars.get(i + 1) == Some(&'(') => i = skip_parens(chars, i + 1),
            _ => i += 1,
        }
    }
    i
}

/// The index just past the `)` matching the `(` at `i`.
fn skip_parens(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '\'' => {
                i += chars[i + 1..]
                    .iter()
                    .position(|&x| x == '\'')
                    .map_or(chars.len(), |p| p + 1);
            }
            '"' => {
                i = skip_double(chars, i + 1);
                continue;
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index just past the `}` matching the `{` at `i`.
fn skip_braces(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// What simple commands do to names: assign them in the shell that runs them (not in a
/// child's environment), declare them local, export them to children.
#[derive(Default)]
struct Effects {
    assigns: Vec<String>,
    locals: Vec<String>,
    exports: Vec<String>,
}

/// What one simple command does to names (Effects).
fn assignments(words: &[String], fx: &mut Effects) {
    let Effects {
        assigns: out,
        locals,
        exports,
    } = fx;
    let first = words[0].as_str();
    if let Some(body) = first.strip_prefix("((") {
        // Arithmetic: NAME = ..., NAME += ..., NAME++ and the like.
        let b: Vec<char> = body.chars().collect();
        let mut j = 0;
        while j < b.len() {
            if b[j].is_ascii_alphabetic() || b[j] == '_' {
                let start = j;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == '_') {
                    j += 1;
                }
                let name: String = b[start..j].iter().collect();
                let after: String = b[j..].iter().collect::<String>();
                let after = after.trim_start();
                let op = ["++", "--", "+=", "-=", "*=", "/=", "%="]
                    .iter()
                    .any(|o| after.starts_with(o))
                    || (after.starts_with('=') && !after.starts_with("=="));
                let pre = start >= 2
                    && (b[start - 2..start] == ['+', '+'] || b[start - 2..start] == ['-', '-']);
                if op || pre {
                    out.push(name);
                }
            } else {
                j += 1;
            }
        }
        return;
    }
    let leading: Vec<&str> = words.iter().map_while(|w| assigned_name(w)).collect();
    if leading.len() == words.len() {
        // Only assignments: they are the shell's own.
        out.extend(leading.iter().map(|s| s.to_string()));
        return;
    }
    // Assignments before a command are that command's environment.
    let rest = &words[leading.len()..];
    let cmd = rest[0].as_str();
    let args = &rest[1..];
    match cmd {
        "local" | "declare" | "typeset" | "readonly" | "export" => {
            let export =
                cmd == "export" || args.iter().any(|a| a.starts_with('-') && a.contains('x'));
            let global = export || args.iter().any(|a| a.starts_with('-') && a.contains('g'));
            for a in args.iter().filter(|a| !a.starts_with('-')) {
                let name = assigned_name(a).unwrap_or(a).to_string();
                if export {
                    exports.push(name.clone());
                }
                if global || cmd == "readonly" {
                    out.push(name);
                } else {
                    locals.push(name);
                }
            }
        }
        "printf" => {
            if let Some(p) = args.iter().position(|a| a == "-v")
                && let Some(n) = args.get(p + 1)
            {
                out.push(n.clone());
            }
        }
        "read" | "mapfile" | "readarray" => {
            // The options that take a value; -a names the array read sets.
            let with_value: &[&str] = if cmd == "read" {
                &["-d", "-i", "-n", "-N", "-p", "-t", "-u"]
            } else {
                &["-d", "-n", "-O", "-s", "-u", "-C", "-c"]
            };
            let mut k = 0;
            while k < args.len() {
                let a = args[k].as_str();
                if a == "-a" {
                    out.extend(args.get(k + 1).cloned());
                    k += 2;
                } else if with_value.contains(&a) {
                    k += 2;
                } else if a.starts_with('-') || a.starts_with('<') || a.starts_with('>') {
                    k += 1;
                } else {
                    out.push(a.to_string());
                    k += 1;
                }
            }
        }
        "for" => {
            if let Some(n) = args.first() {
                out.push(n.clone());
            }
        }
        _ => {}
    }
    // Descriptors named by a redirection: exec {NAME}>file.
    for w in rest {
        if let Some(inner) = w.strip_prefix('{')
            && let Some(end) = inner.find('}')
        {
            let after = &inner[end + 1..];
            if after.starts_with('>') || after.starts_with('<') {
                out.push(inner[..end].to_string());
            }
        }
    }
}

/// Reads a part: its functions (a `name() {` line at the left margin to the next `}` line
/// there, or one line), its top-level declarations and its functions' assignments.
fn read_part(text: &str) -> Part {
    let mut part = Part::default();
    let mut lexer = Lexer::default();
    let mut current: Option<(String, usize, Vec<String>)> = None;
    let mut pending = String::new();
    let mut pending_line = 0;
    let lines: Vec<&str> = text.lines().collect();
    for (idx, raw) in lines.iter().enumerate() {
        let n = idx + 1;
        if let Some((delim, dash)) = &lexer.heredoc {
            let l = if *dash {
                raw.trim_start_matches('\t')
            } else {
                raw
            };
            if l == delim {
                lexer.heredoc = None;
            }
            continue;
        }
        if let Some(at) = raw.find("<<") {
            let rest = raw[at + 2..].trim_start_matches('-');
            let dash = raw[at + 2..].starts_with('-');
            let rest = rest.trim_start();
            if !rest.starts_with('<') {
                let delim: String = rest
                    .trim_start_matches(['\'', '"'])
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !delim.is_empty() {
                    lexer.heredoc = Some((delim, dash));
                }
            }
        }
        // A function defined anywhere but at the left margin of the top level: in another
        // function's body, or in a subshell or block (a redefinition for what runs there).
        let inner = raw
            .trim_start()
            .strip_prefix("function ")
            .and_then(|r| {
                // (awk's `function name(args)` in a quoted program is not one.)
                let name = r.split([' ', '(', '{']).next().unwrap_or("");
                let rest = r[name.len()..].trim_start();
                (rest.is_empty() || rest.starts_with("()") || rest.starts_with('{')).then_some(name)
            })
            .or_else(|| {
                let t = raw.trim_start();
                t.find("()").and_then(|at| {
                    let rest = t[at + 2..].trim_start();
                    (rest.starts_with('{') || rest.starts_with('(')).then_some(&t[..at])
                })
            })
            .filter(|name| {
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            });
        if let Some(name) = inner
            && (current.is_some() || raw.starts_with([' ', '\t']))
        {
            let outer = current.as_ref().map_or(String::new(), |c| c.0.clone());
            part.nested.push((name.to_string(), n, outer));
        }
        // A function's start and end, at the left margin.
        let header = raw
            .split_once("() {")
            .filter(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
            .map(|(name, rest)| (name.to_string(), rest.trim_end().ends_with('}')));
        if current.is_none()
            && let Some((name, one_line)) = header
        {
            if one_line {
                part.functions.push(Function {
                    name,
                    line: n,
                    len: 1,
                });
                let body = raw.split_once("() {").unwrap().1;
                let body = body.trim_end().strip_suffix('}').unwrap_or(body);
                let mut fx = Effects::default();
                for c in commands(body) {
                    assignments(&c, &mut fx);
                }
                part.exports.extend(fx.exports);
                for name in fx.assigns.into_iter().filter(|x| !fx.locals.contains(x)) {
                    part.assigns.entry(name).or_insert(n);
                }
            } else {
                current = Some((name, n, Vec::new()));
            }
            continue;
        }
        if let Some((name, start, locals)) = current.as_mut() {
            if *raw == "}" {
                part.functions.push(Function {
                    name: std::mem::take(name),
                    line: *start,
                    len: n - *start + 1,
                });
                current = None;
                continue;
            }
            if pending.is_empty() {
                pending_line = n;
            }
            pending.push_str(raw);
            pending.push('\n');
            if raw.ends_with('\\') || unbalanced(&pending) {
                continue;
            }
            let mut fx = Effects {
                locals: std::mem::take(locals),
                ..Effects::default()
            };
            for c in commands(&pending) {
                assignments(&c, &mut fx);
            }
            *locals = fx.locals;
            part.exports.extend(fx.exports);
            for v in fx.assigns.into_iter().filter(|x| !locals.contains(x)) {
                part.assigns.entry(v).or_insert(pending_line);
            }
            pending.clear();
        } else {
            // Top level: what the part declares.
            if pending.is_empty() {
                pending_line = n;
            }
            pending.push_str(raw);
            pending.push('\n');
            if raw.ends_with('\\') || unbalanced(&pending) {
                continue;
            }
            let mut fx = Effects::default();
            for c in commands(&pending) {
                assignments(&c, &mut fx);
            }
            part.exports.extend(fx.exports);
            part.declares
                .extend(fx.assigns.into_iter().chain(fx.locals));
            pending.clear();
        }
    }
    part
}

/// Whether a stretch of code has a quote, `$(`, `(` or `((` left open (a command continued
/// on the next line).
fn unbalanced(code: &str) -> bool {
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    let mut depth = 0i32;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '#' if i == 0 || chars[i - 1].is_whitespace() => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\'' => match chars[i + 1..].iter().position(|&x| x == '\'') {
                Some(p) => i += p + 1,
                None => return true,
            },
            '"' => {
                let end = skip_double(&chars, i + 1);
                if end >= chars.len() && chars.last() != Some(&'"') {
                    return true;
                }
                i = end;
                continue;
            }
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    depth > 0
}

/// The room a part belongs to: `recover` for recover.sh's parts, `fanout` for the fan-out's,
/// `engine` for what the engines share and each engine's part, else the part itself.
fn room(part: &str) -> &str {
    if part == "lib/recover.sh" || part.starts_with("lib/recover/") {
        "recover"
    } else if part == "lib/fanout.sh" || part.starts_with("lib/fanout/") {
        "fanout"
    } else if part == "lib/engine.sh" || part.starts_with("lib/engines/") {
        "engine"
    } else {
        part
    }
}

/// Every finding of the rules for parts put together into scripts (each a list of part
/// names, in order), as `file:line: what`, and the exceptions no longer needed.
fn findings(parts: &[(String, String)], scripts: &[Vec<String>]) -> Vec<String> {
    let mut found = Vec::new();
    let read: BTreeMap<&str, Part> = parts
        .iter()
        .map(|(n, t)| (n.as_str(), read_part(t)))
        .collect();
    for (name, text) in parts {
        let lines = text.lines().count();
        let allowed = PART_EXCEPTIONS
            .iter()
            .find(|(p, _)| p == name)
            .map_or(PART_MAX, |(_, n)| *n);
        if lines > allowed {
            found.push(format!(
                "templates/{name}: {lines} lines, over {allowed}: split it by responsibility"
            ));
        }
        for f in &read[name.as_str()].functions {
            let allowed = FUNCTION_EXCEPTIONS
                .iter()
                .find(|(p, n, _)| p == name && *n == f.name)
                .map_or(FUNCTION_MAX, |(_, _, n)| *n);
            if f.len > allowed {
                found.push(format!(
                    "templates/{name}:{}: {}() is {} lines, over {allowed}: cut it into named steps",
                    f.line, f.name, f.len
                ));
            }
        }
    }
    // A function is defined once, at its part's top level: never redefined for what runs
    // inside a function or a subshell (say what differs through an argument, a record or a
    // setting of the owner's).
    for (name, _) in parts {
        for (f, line, outer) in &read[name.as_str()].nested {
            found.push(if outer.is_empty() {
                format!(
                    "templates/{name}:{line}: defines {f}() in a subshell or block: define functions at the top level, and pass what differs"
                )
            } else {
                format!(
                    "templates/{name}:{line}: defines {f}() inside {outer}(): define functions at the top level, and pass what differs"
                )
            });
        }
    }
    // Globals, script by script: who declares each one, then who assigns it.
    let mut seen = BTreeSet::new();
    for script in scripts {
        let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
        let mut exported: BTreeMap<&str, &str> = BTreeMap::new();
        for name in script {
            for g in &read[name.as_str()].declares {
                owner.entry(g.as_str()).or_insert(name);
            }
        }
        for name in script {
            let part = &read[name.as_str()];
            for g in &part.exports {
                match exported.get(g.as_str()) {
                    Some(o) if o != name => {
                        let f = format!(
                            "templates/{name}: exports {g} to its children, which templates/{o} exports too: set what children get in one place"
                        );
                        if seen.insert(f.clone()) {
                            found.push(f);
                        }
                    }
                    _ => {
                        exported.insert(g, name);
                    }
                }
            }
            for (g, line) in &part.assigns {
                if !is_global_name(g) || shared(g) || part.exports.contains(g) {
                    continue;
                }
                if GLOBAL_EXCEPTIONS
                    .iter()
                    .any(|(p, v, _)| room(p) == room(name) && v == g)
                {
                    continue;
                }
                let f = match owner.get(g.as_str()) {
                    Some(o) if room(o) == room(name) => continue,
                    Some(o) => format!(
                        "templates/{name}:{line}: assigns {g}, which templates/{o} declares: let the owner set it, or pass it through REPLY or the records"
                    ),
                    None => format!(
                        "templates/{name}:{line}: assigns {g}, which no part of its script declares: declare it at the top of this part"
                    ),
                };
                if seen.insert(f.clone()) {
                    found.push(f);
                }
            }
        }
    }
    for (p, n) in PART_EXCEPTIONS {
        if let Some((_, text)) = parts.iter().find(|(name, _)| name == p)
            && text.lines().count() <= PART_MAX
        {
            found.push(format!(
                "the exception for {p} ({n} lines) is no longer needed: remove it"
            ));
        }
    }
    for (p, f, n) in FUNCTION_EXCEPTIONS {
        let len = read
            .get(p)
            .and_then(|part| part.functions.iter().find(|x| x.name == *f))
            .map(|x| x.len);
        if len.is_none_or(|len| len <= FUNCTION_MAX) {
            found.push(format!(
                "the exception for {p} {f}() ({n} lines) is no longer needed: remove it"
            ));
        }
    }
    for (p, g, _) in GLOBAL_EXCEPTIONS {
        let used = read
            .iter()
            .any(|(name, part)| room(name) == room(p) && part.assigns.contains_key(*g));
        if !used {
            found.push(format!(
                "the exception for {p} assigning {g} is no longer needed: remove it"
            ));
        }
    }
    found
}

/// The scripts the binary renders, each as the names of its static parts in order: every
/// shape a loop can take (each engine's part, with and without the fan-out, the sandbox and
/// its network allowlist).
fn scripts() -> Vec<Vec<String>> {
    use orbit::render::Part;
    let name = |text: &str| -> String {
        let (name, _) = orbit::render::STATIC_PARTS
            .iter()
            .find(|(_, t)| *t == text)
            .unwrap_or_else(|| panic!("a part that is not in STATIC_PARTS"));
        name.to_string()
    };
    let mut out = Vec::new();
    for f in orbit::render::FILES.iter().filter(|f| !f.parts.is_empty()) {
        for engine in orbit::contract::Engine::ALL {
            for fans_out in [false, true] {
                for (sandboxed, fenced) in [(false, false), (true, false), (true, true)] {
                    let script = f
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Always(t) => Some(*t),
                            Part::Engine => Some(orbit::render::engine_part(*engine)),
                            Part::EngineTokens => orbit::render::engine_tokens_part(*engine),
                            Part::Fanout if fans_out => Some(orbit::render::LIB_FANOUT),
                            Part::Fanout => Some(orbit::render::LIB_NO_FANOUT),
                            Part::FanoutOnly(t) => fans_out.then_some(*t),
                            Part::Sandbox if sandboxed => Some(orbit::render::LIB_SANDBOX),
                            Part::Sandbox => Some(orbit::render::LIB_NO_SANDBOX),
                            Part::SandboxNet if fenced => Some(orbit::render::LIB_SANDBOX_NET),
                            Part::SandboxNet => Some(orbit::render::LIB_NO_SANDBOX_NET),
                            // The fan-out's shapes with holdout checks and setup commands too.
                            Part::Holdout if fans_out => Some(orbit::render::LIB_RUNNER_HOLDOUT),
                            Part::Holdout => Some(orbit::render::LIB_NO_HOLDOUT),
                            Part::HoldoutOnly(t) => fans_out.then_some(*t),
                            Part::Setup if fans_out => Some(orbit::render::LIB_RUNNER_SETUP_RUN),
                            Part::Setup => Some(orbit::render::LIB_NO_SETUP),
                        })
                        .map(name)
                        .collect();
                    out.push(script);
                }
            }
        }
    }
    out
}

/// The prefix every function of a part starts with (its name is the prefix, or the prefix
/// and `_` begin it): the part's file name (lib/runner/commit.sh: `commit`, lib/sandbox-net.sh:
/// `sandbox_net`); a folder's parts the folder's (lib/recover/plan.sh: `recover`,
/// lib/fanout/select.sh: `fanout`), but the runner's, named by their file; every engine's part
/// `engine` (each answers the same calls); a stand-in lib/no-X.sh X's (it defines X's calls).
fn function_prefix(part: &str) -> String {
    let path = part.strip_prefix("lib/").unwrap_or(part);
    let path = path.strip_suffix(".sh").unwrap_or(path);
    let path = path.strip_prefix("runner/").unwrap_or(path);
    let stem = match path.split_once('/') {
        Some(("engines", _)) => "engine",
        Some((folder, _)) => folder,
        None => path.strip_prefix("no-").unwrap_or(path),
    };
    stem.replace('-', "_")
}

/// Parts whose functions carry another prefix than their own, with it: the helpers every
/// script shares are orbit's. May only shrink.
const PREFIX_EXCEPTIONS: &[(&str, &str)] = &[("lib/common.sh", "orbit")];

/// Functions named for what calls them, not for their part: a script's entry, and the
/// checks' helpers a user's check commands call by name (docs/contract.md). May only shrink.
const NAME_EXCEPTIONS: &[&str] = &["main", "run_check", "run_hidden"];

/// Every function whose name does not start with its part's prefix, as `file:line: what`,
/// and the exceptions no longer needed.
fn prefix_findings(parts: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    let mut used_names = BTreeSet::new();
    for (name, text) in parts {
        let prefix = PREFIX_EXCEPTIONS
            .iter()
            .find(|(p, _)| p == name)
            .map_or_else(|| function_prefix(name), |(_, x)| x.to_string());
        let mut own = false;
        for f in &read_part(text).functions {
            if NAME_EXCEPTIONS.contains(&f.name.as_str()) {
                used_names.insert(f.name.clone());
                continue;
            }
            if f.name == prefix || f.name.starts_with(&format!("{prefix}_")) {
                own |= PREFIX_EXCEPTIONS.iter().any(|(p, _)| p == name);
                continue;
            }
            found.push(format!(
                "templates/{name}:{}: {}() does not start with its part's prefix {prefix}_: rename it",
                f.line, f.name
            ));
        }
        if !own && PREFIX_EXCEPTIONS.iter().any(|(p, _)| p == name) {
            found.push(format!(
                "the prefix exception for {name} is no longer needed: remove it"
            ));
        }
    }
    for n in NAME_EXCEPTIONS {
        if !used_names.contains(*n) {
            found.push(format!(
                "the name exception {n} is no longer needed: remove it"
            ));
        }
    }
    found
}

#[test]
fn every_function_starts_with_its_parts_prefix() {
    let found = prefix_findings(&parts());
    assert!(
        found.is_empty(),
        "the names of the bash's functions:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_prefix_rule_finds_what_it_is_for() {
    assert_eq!(function_prefix("lib/runner/commit.sh"), "commit");
    assert_eq!(function_prefix("lib/sandbox-net.sh"), "sandbox_net");
    assert_eq!(function_prefix("lib/no-sandbox-net.sh"), "sandbox_net");
    assert_eq!(function_prefix("lib/recover/plan.sh"), "recover");
    assert_eq!(function_prefix("lib/engines/codex.sh"), "engine");
    let parts = vec![
        (
            "lib/runner/commit.sh".to_string(),
            "commit() {\n  :\n}\ncommit_tree() {\n  :\n}\ntree_of_v() {\n  :\n}\ncommitted() {\n  :\n}\n"
                .to_string(),
        ),
        (
            "lib/common.sh".to_string(),
            "orbit_now() {\n  :\n}\nmain() {\n  :\n}\n".to_string(),
        ),
    ];
    let found = prefix_findings(&parts).join("\n");
    assert!(
        found.contains("templates/lib/runner/commit.sh:7: tree_of_v() does not start with its part's prefix commit_"),
        "{found}"
    );
    assert!(found.contains("committed() does not start"), "{found}");
    assert!(
        !found.contains("commit_tree") && !found.contains("orbit_now"),
        "{found}"
    );
    assert!(
        found.contains("the name exception run_hidden is no longer needed"),
        "{found}"
    );
    assert!(!found.contains("exception main"), "{found}");
}

#[test]
fn every_part_and_function_is_of_reading_size_and_owns_its_globals() {
    let parts = parts();
    assert!(
        parts.len() > 20,
        "the static parts: {:?}",
        parts.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    let found = findings(&parts, &scripts());
    assert!(
        found.is_empty(),
        "the rooms of the bash:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_rooms_lint_finds_what_it_is_for() {
    let long_fn = format!("big() {{\n{}}}\n", "  :\n".repeat(FUNCTION_MAX));
    let a = "# ---- a\nA_COUNT=0\nA_NAME=\na_set() {\n  A_COUNT=1\n  local B_X=2\n  B_X=3\n}\n";
    let b = "# ---- b\nB_FLAG=0\nb_run() {\n  A_COUNT=2\n  GIT_DIR=x git status\n  IFS= read -r B_FLAG C_NEW\n  printf -v A_NAME '%s' x\n  ((B_FLAG++))\n}\n";
    let e = "# ---- e\nouter() {\n  function inner { :; }\n  (\n    state_event() {\n      :\n    }\n    inner\n  )\n  awk '\n    function num(s) { return s }\n  '\n}\n(\n  sub() { :; }\n)\n";
    let parts = vec![
        ("lib/a.sh".to_string(), a.to_string()),
        ("lib/e.sh".to_string(), e.to_string()),
        ("lib/b.sh".to_string(), b.to_string()),
        ("lib/c.sh".to_string(), long_fn),
        ("lib/d.sh".to_string(), ":\n".repeat(PART_MAX + 1)),
    ];
    let script: Vec<String> = parts.iter().map(|(n, _)| n.clone()).collect();
    let found = findings(&parts, &[script]).join("\n");
    assert!(
        found.contains("lib/b.sh:4: assigns A_COUNT, which templates/lib/a.sh declares"),
        "{found}"
    );
    assert!(
        found.contains("lib/b.sh:6: assigns C_NEW, which no part of its script declares"),
        "{found}"
    );
    assert!(
        found.contains("lib/b.sh:7: assigns A_NAME, which templates/lib/a.sh declares"),
        "{found}"
    );
    assert!(found.contains("big() is 122 lines"), "{found}");
    // A function defined inside another one, or redefined in a subshell.
    assert!(
        found.contains("lib/e.sh:3: defines inner() inside outer()"),
        "{found}"
    );
    assert!(
        found.contains("lib/e.sh:5: defines state_event() inside outer()"),
        "{found}"
    );
    assert!(
        found.contains("lib/e.sh:15: defines sub() in a subshell or block"),
        "{found}"
    );
    assert!(
        !found.contains("defines outer()") && !found.contains("num()"),
        "{found}"
    );
    assert!(
        found.contains(&format!("templates/lib/d.sh: {} lines", PART_MAX + 1)),
        "{found}"
    );
    // A local, a command's environment and the part's own globals are not findings.
    assert!(
        !found.contains("B_X") && !found.contains("GIT_DIR") && !found.contains("B_FLAG"),
        "{found}"
    );
}
