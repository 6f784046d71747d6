//! `pins.sha256`: the `sha256sum -c` manifest of every pinned file, paths relative to the
//! loop directory (protected repository paths reach the repository through `../`).

use crate::fsx;

/// Files pinned by `orbit init`; goal.md, protected paths and agent permission files are
/// added by the runner's first run.
pub const INIT_PINNED: [&str; 6] = [
    "prompt.md",
    "verify.sh",
    "run-loop.sh",
    "recover.sh",
    "notify.sh",
    "loop.toml",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub sha256: String,
    pub path: String,
    /// 1-based line in pins.sha256.
    pub line: usize,
}

/// What a change to a pinned path means (contract section 7): the `STOP_REASON`.
pub fn violation_reason(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let in_loop = !path.contains('/');
    if in_loop && name == "goal.md" {
        "goal_drift"
    } else if in_loop && name == "verify.sh" {
        "reward_hack"
    } else if in_loop {
        "script_tamper"
    } else if is_permission_file(path) {
        "permission_hijack"
    } else {
        "reward_hack"
    }
}

/// Agent permission files (pinned when they exist at the first run).
pub fn is_permission_file(path: &str) -> bool {
    let trimmed = path.trim_start_matches("../");
    let name = trimmed.rsplit('/').next().unwrap_or(trimmed);
    (trimmed.ends_with(&format!(".claude/{name}"))
        && name.starts_with("settings")
        && name.ends_with(".json"))
        || trimmed.ends_with(".codex/config.toml")
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
    fn reasons_follow_the_contract() {
        assert_eq!(violation_reason("goal.md"), "goal_drift");
        assert_eq!(violation_reason("verify.sh"), "reward_hack");
        assert_eq!(violation_reason("run-loop.sh"), "script_tamper");
        assert_eq!(violation_reason("loop.toml"), "script_tamper");
        assert_eq!(violation_reason("../../tests/a.rs"), "reward_hack");
        assert_eq!(
            violation_reason("../../.claude/settings.local.json"),
            "permission_hijack"
        );
        assert_eq!(
            violation_reason("../../.codex/config.toml"),
            "permission_hijack"
        );
    }

    #[test]
    fn parse_round_trips() {
        let text = print(&[pin_bytes("goal.md", b"x"), pin_bytes("../../t/a b", b"y")]);
        let (pins, bad) = parse(text.as_bytes());
        assert!(bad.is_empty());
        assert_eq!(pins[1].path, "../../t/a b");
    }
}
