# ---- orbit verify --rerun's check run: verify.sh (or holdout.sh) of a loop directory, run
# ---- in a clean checkout of the commit handed over, under the loop's own sandbox. orbit
# ---- runs this after the parts it needs, taken from the same templates the loop's
# ---- run-loop.sh holds (lib/common.sh, lib/runner/envelope.sh's key hiding, lib/sandbox.sh
# ---- or lib/no-sandbox.sh as the loop's sandbox setting chooses): the mounts are built by
# ---- the runner's own sandbox_prepare, so a rerun's check sees the file system exactly as
# ---- a check run of the loop does (the checkout writable, the user's repository, HOME, the
# ---- loop directory and git's control files read-only, the holdout hidden from verify.sh,
# ---- a private /tmp, the signing key hidden), and no second copy of that policy exists.
# ---- Arguments: KIND (check: verify.sh; holdout: holdout.sh; setup: the loop's setup
# ---- command in ORBIT_RERUN_SETUP), the loop directory, the clean
# ---- checkout, the repository's root, a scratch directory, and the network (open: as the
# ---- user has it; none: a loop of sandbox-network = "allowlist", whose proxy is the
# ---- runner's: the rerun gets no network at all). Exit: the script's; 125 with a line
# ---- `ORBIT_RERUN_NO_SANDBOX: WHY` on stderr when the loop is sandboxed and bubblewrap
# ---- cannot run here (nothing ran).

# The loop's network for the rerun: open or none.
RERUN_NET=open

# config_repo_git ARG...: git in the user's repository, reading only (the runner's own, from
# lib/runner/config.sh, which the rerun does not hold).
config_repo_git() { GIT_OPTIONAL_LOCKS=0 git -C "$REPO_ROOT" "$@"; }

# sandbox_net_fence KIND ARRAY: the network of the rerun's sandboxed run (lib/sandbox.sh calls it
# last): status 1 with the network open (sandbox_prepare builds the command); with none,
# the bwrap options of ARRAY (named by $2) get a network namespace of their own, and
# NET_ARGV is the sandbox's command line with them.
sandbox_net_fence() {
  local -n rerun_fence=$2
  [[ $RERUN_NET == none ]] || return 1
  rerun_fence+=(--unshare-net)
  NET_ARGV=("$BASH" -c "$SANDBOX_LAUNCHER" orbit-sandbox "$SANDBOX_BWRAP" "${rerun_fence[@]}" -- "$SANDBOX_ENV" --default-signal="$SANDBOX_SIGNALS")
  return 0
}
NET_ARGV=()

# rerun_main KIND LOOP_DIR CHECKOUT REPO_ROOT SCRATCH NET: the run (see above).
rerun_main() {
  local kind=$1 script=verify.sh common hidden_bw=''
  LOOP_DIR=$2 WS=$3 REPO_ROOT=$4 ORBIT_TMP=$5 RERUN_NET=$6 AGENT_ABS=''
  # The sandbox names the loop's own workspace WS_MAIN (the runner's): here the checkout.
  WS_MAIN=$WS
  [[ $kind == holdout ]] && script=holdout.sh
  common=$(config_repo_git rev-parse --git-common-dir) || {
    printf 'orbit-rerun: %s is not a git repository\n' "$REPO_ROOT" >&2
    exit 2
  }
  [[ $common == /* ]] || common=$REPO_ROOT/$common
  GIT_COMMON_ABS=$(cd -P -- "$common" && pwd -P)
  if sandbox_on; then
    if ! sandbox_probe_v; then
      printf 'ORBIT_RERUN_NO_SANDBOX: %s\n' "$REPLY" >&2
      exit 125
    fi
    hidden_bw=$SANDBOX_BWRAP
  fi
  if [[ $kind == setup ]]; then
    # One setup command of the loop (ORBIT_RERUN_SETUP), sandboxed as a check, as the
    # runner's setup runs are.
    sandbox_prepare check
    cd -- "$WS"
    ORBIT_REPO_ROOT="$WS" ORBIT_SETUP=1 \
      exec "${SANDBOX_ARGV[@]}" "$BASH" -c "$ORBIT_RERUN_SETUP" </dev/null
  fi
  sandbox_prepare "$kind"
  cd -- "$WS"
  if [[ $kind == holdout ]]; then
    ORBIT_VERIFY_FOR="$LOOP_DIR" ORBIT_REPO_ROOT="$WS" ORBIT_VERIFY_TMP="$ORBIT_TMP" \
      ORBIT_HOLDOUT_DIR="$LOOP_DIR/holdout" ORBIT_HIDDEN_BWRAP="$hidden_bw" \
      exec "${SANDBOX_ARGV[@]}" "$BASH" "$LOOP_DIR/$script" </dev/null
  fi
  unset ORBIT_HOLDOUT_DIR ORBIT_HIDDEN_BWRAP
  ORBIT_VERIFY_FOR="$LOOP_DIR" ORBIT_REPO_ROOT="$WS" ORBIT_VERIFY_TMP="$ORBIT_TMP" \
    exec "${SANDBOX_ARGV[@]}" "$BASH" "$LOOP_DIR/$script" </dev/null
}

rerun_main "$@"
