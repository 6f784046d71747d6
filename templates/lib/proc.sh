# ---- proc: bounded execution (static, included verbatim).

# Bounded execution: a command in its own process group, stdin from a file, output to
# a file, killed (TERM, then KILL after a grace period) at its timeout. Any stray process of
# the group is swept after it exits. Sets ORBIT_RC and ORBIT_TIMED_OUT.
ORBIT_CHILD_PID=
ORBIT_WATCHDOG_PID=
ORBIT_RC=0
ORBIT_TIMED_OUT=0

# orbit_group_alive PGID: a process of the group is alive. A zombie is not: a process whose
# parent exited is reaped by PID 1, which in a container or a micro-VM may take its time
# (or never come), and it runs nothing. Without ps, any member counts.
orbit_group_alive() {
  local out
  kill -0 -- "-$1" 2>/dev/null || return 1
  out=$(ps -A -o pgid= -o stat= 2>/dev/null) || return 0
  awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }' <<<"$out"
}

# orbit_group_sweep PGID: KILLs what is left of a process group whose leader has exited,
# naming each live member (pid and command line) in the log first, as every sweep does.
orbit_group_sweep() {
  local g s p c
  orbit_group_alive "$1" || return 0
  while read -r g s p c; do
    if [[ $g == "$1" && $s != Z* ]]; then
      orbit_log "sweeping leftover process $p (${c:0:80})"
    fi
  done < <(ps -A -o pgid= -o stat= -o pid= -o args= 2>/dev/null || true)
  orbit_kill_group "$1" 1
}

# orbit_kill_group PID GRACE: TERM the process group, KILL it after GRACE seconds.
orbit_kill_group() {
  local pid=$1 grace=$2 waited=0
  kill -TERM -- "-$pid" 2>/dev/null || return 0
  while orbit_group_alive "$pid" && ((waited < grace * 10)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
}

# orbit_run_bounded TIMEOUT GRACE INFILE OUTFILE CMD...
orbit_run_bounded() {
  local timeout=$1 grace=$2 infile=$3 outfile=$4 watchdog wd_status=0
  # The watchdog's own protocol with this function, not a loop exit code: it exits
  # wd_fired when it fired, wd_stopped when stopped early.
  local -r wd_fired=0 wd_stopped=3
  shift 4
  ORBIT_RC=0
  ORBIT_TIMED_OUT=0
  set -m
  "$@" <"$infile" >>"$outfile" 2>&1 7<&- 8>&- 9>&- &
  ORBIT_CHILD_PID=$!
  # The watchdog exits wd_fired only when it fired (and then ignores TERM until the group
  # is gone); stopped early by us it exits wd_stopped. No temp file, no extra process.
  # It is the runner's, not the run's: its sleep does not carry an agent run's marker.
  (
    unset ORBIT_RUN_ID
    trap 'exit "$wd_stopped"' TERM
    sleep "$timeout" &
    wait $! || exit "$wd_stopped"
    trap '' TERM
    orbit_kill_group "$ORBIT_CHILD_PID" "$grace"
    exit "$wd_fired"
  ) </dev/null >/dev/null 2>&1 7<&- 8>&- 9>&- &
  watchdog=$!
  ORBIT_WATCHDOG_PID=$watchdog
  set +m
  while :; do
    ORBIT_RC=0
    wait "$ORBIT_CHILD_PID" 2>/dev/null || ORBIT_RC=$?
    # wait returns >128 when a trapped signal interrupts it; the child may still run.
    if ((ORBIT_RC > 128)) && kill -0 "$ORBIT_CHILD_PID" 2>/dev/null; then
      continue
    fi
    break
  done
  kill -TERM -- "-$ORBIT_WATCHDOG_PID" 2>/dev/null || kill -TERM "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || wd_status=$?
  ORBIT_WATCHDOG_PID=
  if ((wd_status == wd_fired)); then
    ORBIT_TIMED_OUT=1
  fi
  # Sweep whatever the command left running in its group.
  orbit_group_sweep "$ORBIT_CHILD_PID"
  ORBIT_CHILD_PID=
  return 0
}
