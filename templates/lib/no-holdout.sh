# ---- no holdout checks (loop.toml holdout = []): rendered instead of lib/runner/holdout.sh
# ---- into a loop without them, what the runner reads of the holdout. Its steps are reached
# ---- only where HOLDOUT_CHECKS > 0, which the rendered HOLDOUT_SETTING (the loop's
# ---- identity, pinned) never gives such a loop; asked for all the same, each fails closed.
HOLDOUT_OK=0
HOLDOUT_FAILING=
HOLDOUT_REFS_FILE=

# holdout_run N DIR: a loop rendered without holdout checks cannot run them: HOLDOUT_OK
# stays 0 (the claim is rejected), and runner.log says how to add them.
holdout_run() {
  HOLDOUT_OK=0 HOLDOUT_FAILING=holdout.sh
  orbit_log "the holdout checks were asked for, but this loop was rendered without any: add them to holdout in loop.toml and re-render with orbit init --force"
}

# holdout_feedback DIR N: nothing to say (holdout_run never passes here).
holdout_feedback() { :; }

# holdout_refs_v DIFF: status 1, the scan cannot run without the holdout's names.
holdout_refs_v() {
  REPLY='' HOLDOUT_REFS_FILE=''
  orbit_log "the holdout reference scan was asked for, but this loop was rendered without holdout checks: re-render with orbit init --force"
  return 1
}

# holdout_stop_msg_v FILE DIR: status 1, no holdout reference scan found anything.
holdout_stop_msg_v() { return 1; }
