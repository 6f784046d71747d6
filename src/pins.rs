//! `pins.sha256`: the `sha256sum -c` manifest of every pinned file, paths relative to the
//! loop directory (protected repository paths reach the repository through `../`).

use crate::fsx;

pub use crate::contract::{
    INIT_PINNED, is_permission_file, pin_reason, pin_reason_in, workspace_relative,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub sha256: String,
    pub path: String,
    /// 1-based line in pins.sha256.
    pub line: usize,
}

pub fn line(sha256: &str, path: &str) -> String {
    format!("{sha256}  {path}\n")
}

pub fn print(pins: &[(String, String)]) -> String {
    pins.iter().map(|(h, p)| line(h, p)).collect()
}

pub fn pin_bytes(path: &str, data: &[u8]) -> (String, String) {
    (fsx::sha256_hex(data), path.to_string())
}

/// Parses the manifest; malformed lines are returned with their line numbers.
pub fn parse(bytes: &[u8]) -> (Vec<Pin>, Vec<(usize, String)>) {
    let text = String::from_utf8_lossy(bytes);
    let mut pins = Vec::new();
    let mut bad = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let l = l.strip_prefix('\\').unwrap_or(l);
        match l.split_once("  ") {
            Some((h, p))
                if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) && !p.is_empty() =>
            {
                pins.push(Pin {
                    sha256: h.to_ascii_lowercase(),
                    path: p.to_string(),
                    line: n,
                })
            }
            _ => bad.push((
                n,
                format!("not a '<sha256>  <path>' line: {}", l.escape_debug()),
            )),
        }
    }
    (pins, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips() {
        let text = print(&[pin_bytes("goal.md", b"x"), pin_bytes("../../t/a b", b"y")]);
        let (pins, bad) = parse(text.as_bytes());
        assert!(bad.is_empty());
        assert_eq!(pins[1].path, "../../t/a b");
    }
}
