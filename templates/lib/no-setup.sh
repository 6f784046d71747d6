# ---- no setup commands (loop.toml setup = []): rendered instead of lib/runner/setup_run.sh
# ---- into a loop without them. SETUP_CMDS is the loop's identity, rendered into the pinned
# ---- run-loop.sh: it is empty here, and a setup asked for all the same fails closed.

# setup_run DIR LOG UNTRUSTED: nothing to run; status 1 with REPLY the fix should this loop's
# SETUP_CMDS hold a command it was not rendered with.
setup_run() {
  ((${#SETUP_CMDS[@]})) || return 0
  REPLY="this loop was rendered without setup commands: set setup in loop.toml and re-render with orbit init --force"
  return 1
}

# setup_run_clean_checkout CWS LOG TREE: nothing to set up (as setup_run).
setup_run_clean_checkout() {
  setup_run
}

# setup_run_candidate CWS LOG: as setup_run.
setup_run_candidate() { setup_run; }

# setup_run_cache_drop: no setup, no cache.
setup_run_cache_drop() { :; }

# setup_run_workspace: nothing to set up (preflight fails as setup_run says otherwise).
setup_run_workspace() {
  setup_run || preflight_fail "$REPLY"
}
