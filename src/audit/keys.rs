//! The state.env and result.env keys the audit names, each checked against the contract's
//! tables when compiled: a misspelt key fails the build instead of reading as empty.

/// `key`, which must be one of `keys`.
const fn listed(keys: &[&str], key: &'static str) -> &'static str {
    let mut i = 0;
    while i < keys.len() {
        if same(keys[i].as_bytes(), key.as_bytes()) {
            return key;
        }
        i += 1;
    }
    panic!("not a key of the contract's table")
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Keys of state.env (contract 4.1).
pub mod state_key {
    use super::listed;
    use crate::state::KEYS;

    pub const NEXT_ITERATION: &str = listed(&KEYS, "NEXT_ITERATION");
    pub const LAST_STATUS: &str = listed(&KEYS, "LAST_STATUS");
    pub const STOP_REASON: &str = listed(&KEYS, "STOP_REASON");
    pub const COST_MICROUSD: &str = listed(&KEYS, "COST_MICROUSD");
    pub const CB_STATE: &str = listed(&KEYS, "CB_STATE");
}

/// Keys of `iterations/NNNNNN/result.env`.
pub mod result_key {
    use super::listed;
    use crate::result_env::KEYS;

    pub const AGENT_OUTCOME: &str = listed(&KEYS, "AGENT_OUTCOME");
    pub const VERIFY: &str = listed(&KEYS, "VERIFY");
    pub const VERIFY_FAILING: &str = listed(&KEYS, "VERIFY_FAILING");
    pub const VERIFY_SIG: &str = listed(&KEYS, "VERIFY_SIG");
    pub const VERDICT: &str = listed(&KEYS, "VERDICT");
    pub const SUMMARY: &str = listed(&KEYS, "SUMMARY");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_keys_are_named() {
        assert_eq!(listed(&["A", "BC"], "BC"), "BC");
        assert!(std::panic::catch_unwind(|| listed(&["A", "BC"], "B")).is_err());
        assert_eq!(state_key::CB_STATE, "CB_STATE");
        assert_eq!(result_key::VERDICT, "VERDICT");
    }
}
