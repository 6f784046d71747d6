# ---- git as the loop runs it. git's repository variables in the caller's environment
# ---- (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, ... as `git rev-parse --local-env-vars`
# ---- lists them) would point every git call of the runner, the agent and the checks at
# ---- another repository or index: removed (contract 5.1). And no git call of the loop runs
# ---- the file-system monitor a repository's config may name (core.fsmonitor is a command
# ---- an agent could set): off, through the environment, which outranks every config file;
# ---- nor does any read an object through a replace ref (GIT_NO_REPLACE_OBJECTS).
run_loop_git_env_set() {
  local v
  for v in GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT \
    GIT_OBJECT_DIRECTORY GIT_DIR GIT_WORK_TREE GIT_IMPLICIT_WORK_TREE GIT_GRAFT_FILE \
    GIT_INDEX_FILE GIT_NO_REPLACE_OBJECTS GIT_REPLACE_REF_BASE GIT_PREFIX GIT_SHALLOW_FILE \
    GIT_COMMON_DIR "${!GIT_CONFIG_KEY_@}" "${!GIT_CONFIG_VALUE_@}"; do
    unset "$v"
  done
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=false
  # No object the runner reads is swapped by a replace ref (refs/replace/*).
  export GIT_NO_REPLACE_OBJECTS=1
}

# ---- the programs the runner calls, resolved once, at the start, where PATH finds them then:
# ---- bash's command hash keeps each path for the rest of the run and its subshells, so a
# ---- program an agent plants later in a PATH directory before it is never run by this
# ---- runner (the directory is watched too: trust_git_v). A program found first in HOME or
# ---- through a relative PATH entry (which an agent can write: a `git` in ~/.local/bin,
# ---- first on Debian's and Ubuntu's PATH) before the same program further on PATH, outside
# ---- them, is refused by the preflight (TOOLS_SHADOWED names each).
TOOLS_SHADOWED=
run_loop_tools_pin() {
  local t d first outside home=${HOME:-}
  local -a dirs=()
  home=${home%/}
  IFS=: read -r -a dirs <<<"${PATH:-}"
  for t in git perl find sort diff grep awk sed cat cp mv rm mkdir rmdir ln ls date tr head \
    tail cut wc sha256sum shasum openssl ps sleep timeout env flock crontab stat touch chmod \
    mktemp tee od uniq comm xargs readlink realpath basename dirname cmp setsid systemctl \
    tmux curl bwrap id hostname uname nproc getconf; do
    first='' outside=''
    for d in "${dirs[@]}"; do
      [[ -n $d ]] || d=.
      [[ -f $d/$t && -x $d/$t ]] || continue
      [[ -n $first ]] || first=$d/$t
      if [[ $d == /* && ! (-n $home && ($d == "$home" || $d == "$home"/*)) ]]; then
        outside=$d/$t
        break
      fi
    done
    [[ -n $first ]] || continue
    if [[ -n $outside && $outside != "$first" ]]; then
      TOOLS_SHADOWED+="${TOOLS_SHADOWED:+, }$first (the runner uses $outside)"
      first=$outside
    fi
    hash -p "$first" "$t"
  done
}

# run_loop_tools_refuse: a program the runner calls that PATH finds first in HOME or a relative
# directory, before the system's (contract section 7), stops the run before anything runs.
run_loop_tools_refuse() {
  [[ -n $TOOLS_SHADOWED ]] || return 0
  preflight_fail "on PATH, a program the runner calls is found in HOME or a relative directory (which an agent can write) before the system's: $TOOLS_SHADOWED; remove it (or its directory from PATH) if you did not put it there, or put the directory after the system's"
}

# How this run was started (--once: one tick), the status it started from (for notify-once),
# the loop's branch, and its workspace (its own git worktree on orbit/<name>: where the
# agent and the checks run and the commits are made) with the agent's folder in it.
ONCE=0
START_STATUS=
START_REASON=
LOOP_BRANCH=
WS=
# The loop's own workspace (WS names another work tree while a candidate's or the clean
# checkout's checks run).
WS_MAIN=
AGENT_DIR=
# The spend when this run started (the per-run cap counts from it).
RUN_COST_START=0

main() {
  run_loop_args "$@"
  # Whatever ends the run from here, it ends with its footer (stop_on_exit: the last resort).
  trap stop_on_exit EXIT
  sweep_reaping
  run_loop_setup
  run_loop_open
  run_loop_at_rest
  run_loop_start
  run_loop_iterations
}

# run_loop_args ARG...: --once, --help, or a usage error (exit 2 with the footer).
run_loop_args() {
  local arg
  for arg in "$@"; do
    case $arg in
      --once) ONCE=1 ;;
      -h | --help)
        config_usage
        exit "$EXIT_DONE"
        ;;
      *)
        config_usage >&2
        config_footer "$STATUS_CONTINUE" "usage error: unknown argument"
        exit "$EXIT_PREFLIGHT"
        ;;
    esac
  done
}

# run_loop_setup: the runner's own environment, its settings, where things are, the preflight,
# the lock and the scratch directory (everything before the state is read).
run_loop_setup() {
  # The runner's own standard output, for the footer of an error raised while a block's
  # output is redirected (fd 8 is closed for the agent, the checks and their watchdogs).
  exec 8>&1
  trap 'stop_internal_error $LINENO "$BASH_COMMAND" $?' ERR
  run_loop_git_env_set
  run_loop_tools_pin
  # A write to a pipe nobody reads (a hasher that died) fails instead of killing the
  # runner. A handler, not an ignore: the agent and the checks get the default back.
  trap ':' PIPE
  # Started first, so that perl loads while the runner checks its settings and the tree.
  orbit_hasher_start
  orbit_settings
  # Before locate: a preflight failure checks notify.sh's pin before it notifies.
  orbit_sha_detect
  config_locate
  # A setting that does not parse still ends the run with the footer (and a notification).
  orbit_die_hook config_settings_footer
  config_settings_check
  config_verify_budget
  fanout_settings
  orbit_die_hook

  preflight
  run_loop_tools_refuse
  sandbox_preflight
  lock_acquire
  # The mark of this loop's processes, swept when a run ends or the next one starts: only
  # the lock holder's children carry it, so a run that lost the lock race (and whatever it
  # runs while finding that out) is never taken for a leftover.
  export ORBIT_OWNER="$LOOP_DIR"
  # Scratch space inside the loop directory, used under the lock and kept from run to
  # run: every file in it is rewritten before it is read.
  orbit_tmp_at "$LOOP_DIR/.run-tmp"
  if [[ -L $ORBIT_TMP || ! -d $ORBIT_TMP ]]; then
    rm -rf -- "$ORBIT_TMP"
    mkdir -- "$ORBIT_TMP"
  fi
  state_fault after_lock
  trap 'stop_on_signal INT 2' INT
  trap 'stop_on_signal TERM 15' TERM
  trap 'stop_on_signal HUP 1' HUP
  sweep_env "ORBIT_OWNER=$LOOP_DIR"
}

# run_loop_open: the state, the workspace's path, the ledger, the journal and progress.md, read
# and cross-checked (a state the journal does not name stops with exit 4).
run_loop_open() {
  resume_load_state
  START_STATUS=${S[LAST_STATUS]} START_REASON=${S[STOP_REASON]}
  LOOP_BRANCH=${S[ITER_BRANCH]:-orbit/$LOOP_NAME}
  workspace_path_v
  WS=$REPLY
  WS_MAIN=$WS
  AGENT_DIR=$WS/.orbit-agent
  engine_workspace_check
  stall_sched_logs_rotate
  record_ledger_load
  state_events_open "$EV_FILE"
  if ! resume_state_cross_check; then
    local why=$REPLY msg="state corrupt: state.env does not match the journal; run orbit recover"
    config_footer "$STATUS_CONTINUE" "$msg"
    orbit_log "state corrupt: $why"
    orbit_log "error: review the loop directory, then run 'orbit recover $LOOP_DIR' to rebuild state from the evidence"
    notify_stop_early "$NOTIFY_EVENT_STATE_CORRUPT" "$msg"
    lock_release
    exit "$EXIT_STATE_CORRUPT"
  fi
  state_progress_open "$PG_FILE"
  iteration_at "${S[NEXT_ITERATION]}"
}

# run_loop_at_rest: a loop at rest (DONE, stopped, ABORTED, STALLED, paused by a rate limit that
# has not lifted) ends the run here with its exit code, touching nothing.
run_loop_at_rest() {
  local status
  status=${S[LAST_STATUS]}
  if [[ $status == "$STATUS_DONE" ]]; then
    lock_release
    config_footer "$STATUS_DONE" "the loop is DONE (iteration $((S[NEXT_ITERATION] - 1))); nothing to do"
    exit "$EXIT_DONE"
  fi
  if [[ $status == "$STATUS_PAUSED" && ${S[STOP_REASON]} == "$REASON_STOPPED" ]]; then
    lock_release
    config_footer "$STATUS_CONTINUE" "stopped by the user (orbit stop); nothing runs until orbit resume"
    orbit_log "the loop is stopped (orbit stop): nothing runs until 'orbit resume $LOOP_DIR'"
    exit "$EXIT_STOPPED"
  fi
  if [[ $status == "$STATUS_ABORTED" ]]; then
    lock_release
    config_footer "$STATUS_CONTINUE" "ABORTED (${S[STOP_REASON]}): review the change, then orbit recover"
    orbit_die "$EXIT_INTEGRITY" "the loop stopped on an integrity violation (${S[STOP_REASON]}): review it, then run 'orbit recover --restore-pinned' or 'orbit recover --repin'"
  fi
  stop_blocked_at_rest
  if [[ $status == "$STATUS_STALLED" ]]; then
    lock_release
    config_footer "$STATUS_CONTINUE" "STALLED (${S[STOP_REASON]}): run orbit recover --clear-stall to go on"
    orbit_die "$EXIT_STALLED" "the loop is STALLED (${S[STOP_REASON]}): change the approach (goal.md, notes.md), then 'orbit recover --clear-stall'"
  fi
  if [[ $status == "$STATUS_PAUSED" && ${S[STOP_REASON]} == "$REASON_RATE_LIMIT" ]] && (($(orbit_now) < S[RESUME_AT])); then
    lock_release
    config_footer "$STATUS_CONTINUE" "rate limited; resumes after $(orbit_iso "${S[RESUME_AT]}")"
    orbit_log "rate limited until $(orbit_iso "${S[RESUME_AT]}"): not calling the agent"
    exit "$EXIT_RATE_LIMITED"
  fi
}

# run_loop_start: the run goes on: its start recorded, the first run's setup (or the workspace
# made sure of), the integrity gate, the workspace's setup commands (once), an interrupted
# iteration resumed, the red gate.
run_loop_start() {
  # A run that goes on starts the live view over (one that found nothing to do left it).
  agent_live_reset
  state_event loop_start "${S[NEXT_ITERATION]}" pid "$$" once "$ONCE" resumed_from "${S[LAST_STATUS]}" torn_repaired "$ORBIT_TORN_REPAIRED" engine "$ENGINE" engine_version "$ENGINE_VERSION"
  if ((S[STARTED_AT] == 0)); then
    first_run_setup
    S[LAST_STATUS]=$STATUS_CONTINUE
    S[STOP_REASON]=$REASON_NONE
    resume_save_state
  else
    workspace_ensure
  fi
  engine_workspace_note
  trust_integrity_gate "start" || trust_integrity_stop
  setup_run_workspace
  RUN_COST_START=${S[COST_MICROUSD]}
  local red=0
  if ((S[NEXT_ITERATION] == 1)) && [[ ! -d $LOOP_DIR/iterations/000001 ]]; then
    red=1
  else
    # The base tree's test counts, taken by the red gate of an earlier run.
    counts_load
  fi
  iteration_resume_pending
  if ((red)); then
    stop_red_gate
    trust_integrity_gate "after the red gate" || trust_integrity_stop
  fi
}

# run_loop_iterations: iterations until a stop condition (each of which exits).
run_loop_iterations() {
  local log_checked=0
  while :; do
    # runner.log is rotated past 1 MiB: looked at on each start and every 20 iterations.
    if ((ONCE || S[NEXT_ITERATION] % 20 == 0 || !log_checked)) && [[ -f $ORBIT_LOG_FILE ]] &&
      (($(wc -c <"$ORBIT_LOG_FILE") > 1048576)); then
      mv -f -- "$ORBIT_LOG_FILE" "$ORBIT_LOG_FILE.1"
    fi
    log_checked=1
    stop_gates_check
    iteration_run "${S[NEXT_ITERATION]}"
    iteration_stop_for_verdict
    stop_gates
    if ((ONCE)); then
      resume_finish "$EXIT_CONTINUE" "$STATUS_CONTINUE" "$REASON_TICK" "one tick done (iteration $((S[NEXT_ITERATION] - 1))); work remains"
    fi
  done
}

main "$@"
exit
