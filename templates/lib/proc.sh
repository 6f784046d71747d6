# ---- proc: bounded execution (static, included verbatim).

# Bounded execution: a command in its own process group, stdin from a file, output to
# a file, killed (TERM, then KILL after a grace period) at its timeout. Any stray process of
# the group is swept after it exits. Sets ORBIT_RC and ORBIT_TIMED_OUT.
ORBIT_CHILD_PID=
ORBIT_WATCHDOG_PID=
ORBIT_RC=0
ORBIT_TIMED_OUT=0
# Whether this shell is the child subreaper of what it runs (the runner, started through
# its perl: lib/runner/sweep.sh): then what a bounded run left behind that the kernel gave
# it is swept when the run ends.
ORBIT_REAPING=0
proc_reaping_on() { ORBIT_REAPING=1; }

# proc_kids_v PID: REPLY_KIDS, the live children of PID (not a zombie: it runs nothing),
# from /proc (each thread's children), or ps where the kernel does not list them.
proc_kids_v() {
  local f p st
  local -a listed=() kid_words=()
  REPLY_KIDS=()
  if [[ -r /proc/$1/task/$1/children ]]; then
    for f in /proc/"$1"/task/*/children; do
      listed=()
      { read -r -a listed <"$f"; } 2>/dev/null || true
      kid_words+=("${listed[@]}")
    done
  else
    mapfile -t kid_words < <(
      unset ORBIT_RUN_ID
      exec ps -o pid= --ppid "$1" 2>/dev/null
    )
    wait "$!" 2>/dev/null || true
  fi
  for p in "${kid_words[@]}"; do
    p=${p//[[:space:]]/}
    [[ $p =~ ^[0-9]+$ ]] || continue
    st=''
    { read -r st <"/proc/$p/stat"; } 2>/dev/null || true
    st=${st##*) }
    [[ ${st:0:1} == [ZX] ]] && continue
    REPLY_KIDS+=("$p")
  done
}

# proc_adopted_sweep PARENT KEPT...: what the subreaper PARENT was given (the children it
# did not start, all but KEPT and the shell running this), with everything below each: each
# stopped as it is found (so that it starts nothing meanwhile), then KILLed and named in
# REPLY_SWEPT ("PID COMMAND" each); again until none is left (one that forked before it was
# stopped is given to PARENT in turn).
proc_adopted_sweep() {
  local parent=$1 p c round keep
  shift
  keep=" $BASHPID $* "
  local -a pending_kids=() stopped_kids=() REPLY_KIDS=()
  REPLY_SWEPT=()
  for ((round = 0; round < 20; round++)); do
    proc_kids_v "$parent"
    pending_kids=()
    for p in "${REPLY_KIDS[@]}"; do
      [[ $keep == *" $p "* ]] || pending_kids+=("$p")
    done
    ((${#pending_kids[@]})) || return 0
    stopped_kids=()
    while ((${#pending_kids[@]})); do
      p=${pending_kids[0]}
      pending_kids=("${pending_kids[@]:1}")
      kill -STOP "$p" 2>/dev/null || continue
      stopped_kids+=("$p")
      proc_kids_v "$p"
      pending_kids+=("${REPLY_KIDS[@]}")
    done
    for p in "${stopped_kids[@]}"; do
      c=$({ tr "\0" " " <"/proc/$p/cmdline"; } 2>/dev/null | cut -c1-80) || c=''
      if kill -KILL "$p" 2>/dev/null; then
        REPLY_SWEPT+=("$p $c")
      fi
    done
  done
}

# proc_kids_into ARRAY PID: the live children of PID (proc_kids_v) into the array named
# ARRAY.
# shellcheck disable=SC2034  # kids_into is a nameref: the caller's array
proc_kids_into() {
  local -n kids_into=$1
  local -a REPLY_KIDS=()
  proc_kids_v "$2"
  kids_into=("${REPLY_KIDS[@]}")
}

# proc_reaped_sweep KEPT...: as the runner's subreaper, what it was given besides KEPT
# (its children before the run) is swept, each named in the log. A bounded run sweeps so
# when it ends; a fan-out once every candidate has ended (the children before they started,
# and the candidates, kept: what a candidate's check left is the runner's meanwhile).
proc_reaped_sweep() {
  local line c
  local -a REPLY_SWEPT=()
  ((ORBIT_REAPING)) && [[ $BASHPID == "$$" ]] || return 0
  proc_adopted_sweep "$$" "$@"
  for line in "${REPLY_SWEPT[@]}"; do
    c=${line#* }
    orbit_log "sweeping leftover process ${line%% *} (${c//[^[:print:]]/?})"
  done
}

# proc_group_alive PGID: a process of the group is alive. A zombie is not: a process whose
# parent exited is reaped by PID 1, which in a container or a micro-VM may take its time
# (or never come), and it runs nothing. Without ps, any member counts.
proc_group_alive() {
  local out
  kill -0 -- "-$1" 2>/dev/null || return 1
  out=$(ps -A -o pgid= -o stat= 2>/dev/null) || return 0
  awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }' <<<"$out"
}

# proc_group_sweep PGID: KILLs what is left of a process group whose leader has exited,
# naming each live member (pid and command line) in the log first, as every sweep does.
proc_group_sweep() {
  local g s p c
  proc_group_alive "$1" || return 0
  while read -r g s p c; do
    if [[ $g == "$1" && $s != Z* ]]; then
      orbit_log "sweeping leftover process $p (${c:0:80})"
    fi
  done < <(ps -A -o pgid= -o stat= -o pid= -o args= 2>/dev/null || true)
  proc_kill_group "$1" 1
}

# proc_kill_group PID GRACE: TERM the process group, KILL it after GRACE seconds.
proc_kill_group() {
  local pid=$1 grace=$2 waited=0
  kill -TERM -- "-$pid" 2>/dev/null || return 0
  while proc_group_alive "$pid" && ((waited < grace * 10)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
}

# proc_run_bounded TIMEOUT GRACE INFILE OUTFILE CMD...
proc_run_bounded() {
  local timeout=$1 grace=$2 infile=$3 outfile=$4 watchdog wd_status=0
  # The watchdog's own protocol with this function, not a loop exit code: it exits
  # wd_fired when it fired, wd_stopped when stopped early.
  local -r wd_fired=0 wd_stopped=3
  shift 4
  ORBIT_RC=0
  ORBIT_TIMED_OUT=0
  local -a kept=()
  if ((ORBIT_REAPING)) && [[ $BASHPID == "$$" ]]; then
    proc_kids_into kept "$$"
  fi
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
    proc_kill_group "$ORBIT_CHILD_PID" "$grace"
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
  # Sweep what the runner was given as its subreaper, then what the command left running in
  # its group.
  proc_reaped_sweep "${kept[@]}"
  proc_group_sweep "$ORBIT_CHILD_PID"
  ORBIT_CHILD_PID=
  return 0
}
