//! Shell quoting for values placed into generated bash. Every value is quoted, always:
//! POSIX single quotes when the text is plain, `$'...'` with octal escapes when it holds a
//! quote, a backslash, `$`, a backtick, a control character or an invisible/bidi character.

use crate::error::{Error, Result};

/// Characters that are invisible or reorder text on screen: they must never reach a
/// script unescaped, where they could make code look different from what runs.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' |
        '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

fn needs_ansi_c(c: char) -> bool {
    matches!(c, '\'' | '\\' | '$' | '`') || c.is_control() || is_invisible(c)
}

/// Quotes `s` as one bash word. Refuses NUL, which no bash string can hold.
pub fn quote(s: &str) -> Result<String> {
    if s.contains('\0') {
        return Err(Error::Usage(
            "a value for a generated script contains a NUL byte; remove it".into(),
        ));
    }
    if !s.chars().any(needs_ansi_c) {
        return Ok(format!("'{s}'"));
    }
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str("$'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || is_invisible(c) => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:03o}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    Ok(out)
}

/// Quotes each word and joins them with spaces: the body of a bash array literal.
pub fn quote_words<S: AsRef<str>>(words: &[S]) -> Result<String> {
    let quoted: Result<Vec<String>> = words.iter().map(|w| quote(w.as_ref())).collect();
    Ok(quoted?.join(" "))
}

/// `s` as it can be pasted into a shell in a command orbit prints: as it is when it holds
/// only safe characters, else quoted (a NUL, which no path holds, is dropped).
pub fn paste_word(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-+=:@,%".contains(c));
    if safe {
        s.to_string()
    } else {
        quote(&s.replace('\0', "")).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_single_quoted() {
        assert_eq!(quote("cargo test").unwrap(), "'cargo test'");
        assert_eq!(quote("").unwrap(), "''");
        assert_eq!(quote("-rf").unwrap(), "'-rf'");
    }

    #[test]
    fn fix_commands_name_a_directory_as_one_word() {
        assert_eq!(paste_word(".orbit/fix-parser"), ".orbit/fix-parser");
        assert_eq!(paste_word("my loops/a b"), "'my loops/a b'");
        assert_eq!(paste_word("x$(touch y)"), "$'x$(touch y)'");
        assert_eq!(paste_word(""), "''");
    }

    #[test]
    fn specials_use_ansi_c_quoting() {
        assert_eq!(quote("it's").unwrap(), r"$'it\'s'");
        assert_eq!(quote("a\nb").unwrap(), r"$'a\012b'");
        assert_eq!(quote("$(x)").unwrap(), "$'$(x)'");
        assert_eq!(quote("\u{202E}").unwrap(), r"$'\342\200\256'");
        assert!(quote("a\0b").is_err());
    }
}
