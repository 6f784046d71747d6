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
      footer "$STATUS_CONTINUE" "another runner holds the lock"
      orbit_log "another runner holds $LOOP_DIR/.run-loop.lock: nothing to do"
      exit "$EXIT_LOCKED"
    fi
    LOCK_MODE='flock'
    return 0
  fi
  : >>"$LOOP_DIR/.run-loop.lock"
  if ! mkdir -- "$lockdir" 2>/dev/null; then
    owner=$(lock_owner "$lockdir")
    if lock_owner_alive "$lockdir" "$owner"; then
      footer "$STATUS_CONTINUE" "another runner holds the lock"
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
      footer "$STATUS_CONTINUE" "another runner holds the lock"
      orbit_log "another runner is taking over $lockdir: nothing to do"
      exit "$EXIT_LOCKED"
    fi
    if [[ "$(lock_owner "$lockdir")" != "$owner" ]] || ! rm -rf -- "$lockdir" || ! mkdir -- "$lockdir" 2>/dev/null; then
      rmdir -- "$lockdir.takeover" 2>/dev/null || true
      footer "$STATUS_CONTINUE" "another runner holds the lock"
      exit "$EXIT_LOCKED"
    fi
    orbit_log "stale lock $lockdir (owner '$owner' is gone): taken over"
    printf '%s %s\n' "$$" "$(proc_start $$)" >"$lockdir/owner"
    rmdir -- "$lockdir.takeover" 2>/dev/null || true
    LOCK_MODE='mkdir'
    return 0
  fi
  printf '%s %s\n' "$$" "$(proc_start $$)" >"$lockdir/owner.tmp.$$"
  mv -f -- "$lockdir/owner.tmp.$$" "$lockdir/owner"
  LOCK_MODE='mkdir'
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
