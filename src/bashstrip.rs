//! Bash text without what bash itself throws away: whole-line comments, blank lines and
//! the indentation of a line, taken out only where the line starts outside every quoted
//! string and heredoc, and where it does not continue the line before (a backslash at its
//! end); and a comment after code, where a blank comes before it in code. Everything else
//! is kept byte for byte, a line inside a string or a heredoc whole, so the perl and awk
//! programs of the parts' single-quoted strings are left as written.
//!
//! What lib.sh is rendered from (`render::library`): the commented source is the parts under
//! templates/lib. A `# shellcheck` directive is kept (shellcheck reads the library), without
//! the reason written after it.
//! The lexer is conservative: where it cannot tell, it keeps a line as it is; tests/it
//! (bash_strip) has bash compare `declare -f` and `declare -p` of every part and of the
//! contract prelude before and after, which must be identical.

/// Where the lexer is, innermost last.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Ctx {
    /// `$( ... )` (or a subshell opened inside one): code; the count of `(` opened in it.
    Subst(u32),
    /// `$(( ... ))`: arithmetic (no heredoc, no comment); the count of `(` opened in it.
    Arith(u32),
    /// `"..."`.
    Double,
    /// `'...'`.
    Single,
    /// `$'...'`.
    Ansi,
}

/// The lexer's state between two lines.
#[derive(Default)]
struct Lexer {
    stack: Vec<Ctx>,
    /// Heredocs opened on the current line, waiting for it to end: (delimiter, <<- ).
    pending: Vec<(String, bool)>,
    /// The heredoc whose body is being read.
    body: Option<(String, bool)>,
    /// The line ended with a backslash (in code): the next one continues it.
    continued: bool,
}

impl Lexer {
    /// Whether a line starting now starts in code, a fresh command line bash would read
    /// from its first non-blank character.
    fn at_code(&self) -> bool {
        self.stack.is_empty() && self.body.is_none() && !self.continued
    }

    /// Whether the innermost context is code (the top level or a `$( )`).
    fn in_code(&self) -> bool {
        matches!(self.stack.last(), None | Some(Ctx::Subst(_)))
    }

    /// Reads one line (without its newline) and moves the state past it and its newline;
    /// where a comment starts on it in code, the byte it starts at.
    fn line(&mut self, line: &str) -> Option<usize> {
        let mut comment = None;
        if let Some((delim, tabs)) = &self.body {
            let l = if *tabs {
                line.trim_start_matches('\t')
            } else {
                line
            };
            if l == delim {
                self.body = None;
                if !self.pending.is_empty() {
                    self.body = Some(self.pending.remove(0));
                }
            }
            return None;
        }
        self.continued = false;
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            match self.stack.last().copied() {
                Some(Ctx::Single) => {
                    if c == b'\'' {
                        self.stack.pop();
                    }
                }
                Some(Ctx::Ansi) => match c {
                    b'\\' => i += 1,
                    b'\'' => {
                        self.stack.pop();
                    }
                    _ => {}
                },
                Some(Ctx::Double) => match c {
                    b'\\' => i += 1,
                    b'"' => {
                        self.stack.pop();
                    }
                    b'$' if b.get(i + 1) == Some(&b'(') => {
                        i += self.open_paren(b, i);
                    }
                    _ => {}
                },
                Some(Ctx::Arith(n)) => match c {
                    b'(' => *self.stack.last_mut().unwrap() = Ctx::Arith(n + 1),
                    b')' if n > 0 => *self.stack.last_mut().unwrap() = Ctx::Arith(n - 1),
                    b')' => {
                        self.stack.pop();
                        if b.get(i + 1) == Some(&b')') {
                            i += 1;
                        }
                    }
                    b'$' if b.get(i + 1) == Some(&b'(') => {
                        i += self.open_paren(b, i);
                    }
                    _ => {}
                },
                None | Some(Ctx::Subst(_)) => match c {
                    b'\\' => {
                        if i + 1 == b.len() {
                            self.continued = true;
                        }
                        i += 1;
                    }
                    b'\'' => self.stack.push(Ctx::Single),
                    b'"' => self.stack.push(Ctx::Double),
                    b'$' if b.get(i + 1) == Some(&b'\'') => {
                        self.stack.push(Ctx::Ansi);
                        i += 1;
                    }
                    b'$' if b.get(i + 1) == Some(&b'(') => {
                        i += self.open_paren(b, i);
                    }
                    b'#' if word_start(b, i) => {
                        comment = Some(i);
                        break;
                    }
                    b'(' if b.get(i + 1) == Some(&b'(') && word_start(b, i) => {
                        self.stack.push(Ctx::Arith(0));
                        i += 1;
                    }
                    b'(' => {
                        if let Some(Ctx::Subst(n)) = self.stack.last_mut() {
                            *n += 1;
                        }
                    }
                    b')' => match self.stack.last_mut() {
                        Some(Ctx::Subst(0)) => {
                            self.stack.pop();
                        }
                        Some(Ctx::Subst(n)) => *n -= 1,
                        _ => {}
                    },
                    b'<' if b.get(i + 1) == Some(&b'<') && b.get(i + 2) != Some(&b'<') => {
                        i += self.heredoc(b, i + 2);
                    }
                    b'<' if b.get(i + 1) == Some(&b'<') => i += 2,
                    _ => {}
                },
            }
            i += 1;
        }
        if self.in_code() && !self.pending.is_empty() && !self.continued {
            self.body = Some(self.pending.remove(0));
        }
        comment
    }

    /// At `$(` (b[i] is `$`): opens a command substitution or, at `$((`, arithmetic; the
    /// bytes consumed beyond the `$`.
    fn open_paren(&mut self, b: &[u8], i: usize) -> usize {
        if b.get(i + 2) == Some(&b'(') {
            self.stack.push(Ctx::Arith(0));
            2
        } else {
            self.stack.push(Ctx::Subst(0));
            1
        }
    }

    /// After `<<` at `at`: the heredoc's delimiter (`-`, blanks, a word quoted or not)
    /// queued for the end of the line; the bytes consumed.
    fn heredoc(&mut self, b: &[u8], at: usize) -> usize {
        let mut j = at;
        let tabs = b.get(j) == Some(&b'-');
        if tabs {
            j += 1;
        }
        while matches!(b.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        let mut delim = Vec::new();
        while let Some(&c) = b.get(j) {
            match c {
                b'\'' | b'"' => {
                    let q = c;
                    j += 1;
                    while let Some(&d) = b.get(j) {
                        if d == q {
                            break;
                        }
                        delim.push(d);
                        j += 1;
                    }
                }
                b'\\' => {
                    j += 1;
                    if let Some(&d) = b.get(j) {
                        delim.push(d);
                    }
                }
                b' ' | b'\t' | b';' | b'|' | b'&' | b'<' | b'>' | b'(' | b')' => break,
                _ => delim.push(c),
            }
            j += 1;
        }
        self.pending
            .push((String::from_utf8_lossy(&delim).into_owned(), tabs));
        j - at + 1
    }
}

/// Whether b[i] starts a word (a `#` there starts a comment, `((` arithmetic).
fn word_start(b: &[u8], i: usize) -> bool {
    i == 0
        || matches!(
            b[i - 1],
            b' ' | b'\t' | b';' | b'|' | b'&' | b'(' | b')' | b'<' | b'>'
        )
}

/// `text` without its comments (but a `# shellcheck` directive, without the reason after
/// it), blank lines and the indentation of lines that start in code (module doc).
pub fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lx = Lexer::default();
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let at_code = lx.at_code();
        let kept = if at_code {
            body.trim_start_matches([' ', '\t'])
        } else {
            body
        };
        let comment = lx.line(body);
        let kept = match comment {
            Some(at) => cut_comment(kept, at - (body.len() - kept.len())),
            None => kept,
        };
        if at_code && kept.is_empty() {
            continue;
        }
        out.push_str(kept);
        out.push_str(nl);
    }
    out
}

/// `line` without the comment that starts at its byte `at` (and the blanks before it): a
/// `# shellcheck` directive stays (without a second comment after it, its reason), and so
/// does a comment after an escaped blank (`\ `), which the blanks before it end.
fn cut_comment(line: &str, at: usize) -> &str {
    let comment = &line[at..];
    // Only after a blank: the lexer is surest there (`(#` may be a regular expression's).
    if at > 0 && !line[..at].ends_with([' ', '\t']) {
        return line;
    }
    if let Some(directive) = comment.strip_prefix("# shellcheck") {
        let end = directive.find(" #").map_or(line.len(), |i| at + 12 + i);
        return line[..end].trim_end_matches([' ', '\t']);
    }
    let code = line[..at].trim_end_matches([' ', '\t']);
    if code.ends_with('\\') && code.len() < at {
        return line;
    }
    code
}

#[cfg(test)]
mod tests {
    use super::strip;

    #[test]
    fn comments_blank_lines_and_indentation_go_outside_strings_and_heredocs() {
        let text = "# a comment\n\nf() {\n  # inside\n  echo 'a\n  # kept\n  b' # it's\n  cat <<'EOF'\n  # body\n\nEOF\n    x=\"one\n  # two\"\n}\n";
        assert_eq!(
            strip(text),
            "f() {\necho 'a\n  # kept\n  b'\ncat <<'EOF'\n  # body\n\nEOF\nx=\"one\n  # two\"\n}\n"
        );
    }

    #[test]
    fn a_continued_line_and_shellcheck_directives_are_kept() {
        let text = "  # shellcheck disable=SC2016\n  echo a\\\n   b\n  $((1 << 2))\n  x\n";
        assert_eq!(
            strip(text),
            "# shellcheck disable=SC2016\necho a\\\n   b\n$((1 << 2))\nx\n"
        );
    }

    #[test]
    fn a_comment_after_code_goes_but_a_directive_keeps_its_rule() {
        let text = "a=1  # one\n# shellcheck disable=SC2016  # awk code\nb='#' c=\"# x\" # two\necho \\  # kept\nx=$(f # in\n)\n[[ $l =~ ^(#.*)?$ ]]\n";
        assert_eq!(
            strip(text),
            "a=1\n# shellcheck disable=SC2016\nb='#' c=\"# x\"\necho \\  # kept\nx=$(f\n)\n[[ $l =~ ^(#.*)?$ ]]\n"
        );
    }

    #[test]
    fn substitutions_nest_their_quotes() {
        let text = "x=\"$(printf '%s' \"a\n  # in the string\")\"\n  # out\n";
        assert_eq!(
            strip(text),
            "x=\"$(printf '%s' \"a\n  # in the string\")\"\n"
        );
        let ansi = "y=$'it\\'s\n  # in'\n  # out\n";
        assert_eq!(strip(ansi), "y=$'it\\'s\n  # in'\n");
        let hash = "n=${#a[@]} m=$# # it's a comment\n  # out\n";
        assert_eq!(strip(hash), "n=${#a[@]} m=$#\n");
    }
}
