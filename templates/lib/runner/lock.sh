# ---- the runner's lock: flock on a descriptor held for the runner's life; a mkdir lock
# ---- without flock (lib/lock.sh: what a lock is).
# flock or mkdir: how this run holds the lock.
LOCK_MODE=
lock_acquire() {
  local lockdir="$LOOP_DIR/.run-loop.lock.d" owner
  if command -v flock >/dev/null 2>&1 && [[ -z ${ORBIT_NO_FLOCK:-} ]]; then
    # The loop directory itself is locked too: an agent can delete .run-loop.lock (a new
    # file would then lock free), not the directory its runner holds open.
    exec 7<"$LOOP_DIR"
    exec 9>>"$LOOP_DIR/.run-loop.lock"
    if ! flock -n 7 || ! flock -n 9; then
      if ! lock_take_from_stopped; then
        config_footer "$STATUS_CONTINUE" "another runner holds the lock"
        orbit_log "another runner holds $LOOP_DIR/.run-loop.lock: nothing to do"
        exit "$EXIT_LOCKED"
      fi
    fi
    LOCK_MODE='flock'
    return 0
  fi
  : >>"$LOOP_DIR/.run-loop.lock"
  if ! mkdir -- "$lockdir" 2>/dev/null; then
    owner=$(lock_owner "$lockdir")
    if lock_owner_alive "$lockdir" "$owner"; then
      config_footer "$STATUS_CONTINUE" "another runner holds the lock"
      orbit_log "another runner (${owner:-starting}) holds $lockdir: nothing to do"
      exit "$EXIT_LOCKED"
    fi
    # Taking over a dead owner's lock is itself serialised by a second mkdir, and only
    # the owner that was found dead is removed: two runners that both found it dead never
    # both run, and neither removes a lock that a live runner has just taken.
    if ! mkdir -- "$lockdir.takeover" 2>/dev/null; then
      if [[ -n $(find "$lockdir.takeover" -maxdepth 0 -mmin +1 2>/dev/null) ]]; then
        rmdir -- "$lockdir.takeover" 2>/dev/null || true
      fi
      config_footer "$STATUS_CONTINUE" "another runner holds the lock"
      orbit_log "another runner is taking over $lockdir: nothing to do"
      exit "$EXIT_LOCKED"
    fi
    if [[ "$(lock_owner "$lockdir")" != "$owner" ]] || ! rm -rf -- "$lockdir" || ! mkdir -- "$lockdir" 2>/dev/null; then
      rmdir -- "$lockdir.takeover" 2>/dev/null || true
      config_footer "$STATUS_CONTINUE" "another runner holds the lock"
      exit "$EXIT_LOCKED"
    fi
    orbit_log "stale lock $lockdir (owner '$owner' is gone): taken over"
    printf '%s %s\n' "$$" "$(lock_proc_start $$)" >"$lockdir/owner"
    rmdir -- "$lockdir.takeover" 2>/dev/null || true
    LOCK_MODE='mkdir'
    return 0
  fi
  printf '%s %s\n' "$$" "$(lock_proc_start $$)" >"$lockdir/owner.tmp.$$"
  mv -f -- "$lockdir/owner.tmp.$$" "$lockdir/owner"
  LOCK_MODE='mkdir'
}


# lock_take_from_stopped: the flock taken from a runner that holds it stopped (SIGSTOP, or
# Ctrl-Z, state T in /proc) and has lived past the loop's wall-clock limit plus a grace:
# (a tenth of it, 1 s to 5 min): no runner of this loop may live that long, so it can never go on honestly. It is killed
# (its agent, in a group of its own, is swept by this run) and the lock taken, said in the
# log. Status 1, changing nothing, for any other holder or where /proc cannot tell.
lock_take_from_stopped() {
  local lockfile=$LOOP_DIR/.run-loop.lock f p pp main='' st='' age grace cmd
  local -a holders=()
  local -A held=()
  ((LOOP_TIMEOUT_S > 0)) && [[ -d /proc/self/fd ]] || return 1
  # The grace: a tenth of the limit, at least a second, at most five minutes.
  grace=$((LOOP_TIMEOUT_S / 10))
  ((grace >= 1)) || grace=1
  ((grace <= 300)) || grace=300
  # The holders: the processes with a descriptor of the lock file open (/proc/locks names
  # the flock helper that took it, long gone). Each must be a runner of this loop (the
  # runner and the subshells that inherited its descriptor): anything else, and nothing
  # is touched.
  for f in /proc/[0-9]*/fd/*; do
    [[ $f -ef $lockfile ]] || continue
    p=${f#/proc/}
    p=${p%%/*}
    [[ -z $p || $p == "$$" || $p == "$BASHPID" || -n ${held[$p]:-} ]] && continue
    cmd=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || return 1
    [[ $cmd == *"$LOOP_DIR/run-loop.sh"* ]] || return 1
    held[$p]=1
    holders+=("$p")
  done
  ((${#holders[@]})) || return 1
  for p in "${holders[@]}"; do
    pp=$(awk '$1 == "PPid:" { print $2 }' "/proc/$p/status" 2>/dev/null) || return 1
    [[ -n $pp && -n ${held[$pp]:-} ]] || main=$p
  done
  [[ -n $main && -r /proc/$main/stat ]] || return 1
  st=$(<"/proc/$main/stat")
  st=${st##*) }
  st=${st%% *}
  [[ $st == T || $st == t ]] || return 1
  age=$(ps -o etimes= -p "$main" 2>/dev/null | tr -d ' ')
  [[ $age =~ ^[0-9]+$ ]] && ((age > LOOP_TIMEOUT_S + grace)) || return 1
  kill -KILL "${holders[@]}" 2>/dev/null || true
  # The lock is free once they are gone (at most a few seconds).
  flock -w 10 7 && flock -w 10 9 || return 1
  orbit_log "the runner holding the lock (pid $main) was stopped (state $st) and had run ${age}s, past the loop's wall-clock limit ($LOOP_TIMEOUT) and a grace of ${grace}s: killed with the ${#holders[@]} process(es) of it that held the lock, the lock taken over"
}

# lock_release: the lock given back at the end of a run.
lock_release() {
  # Nothing of this run outlives it (a process a notification or a check detached, say):
  # swept while the lock is still held, since the next run's processes carry the same mark.
  if [[ -n ${ORBIT_OWNER:-} ]]; then
    sweep_env "ORBIT_OWNER=$LOOP_DIR" wait
  fi
  if [[ $LOCK_MODE == mkdir ]]; then
    rm -rf -- "$LOOP_DIR/.run-loop.lock.d"
  fi
}
