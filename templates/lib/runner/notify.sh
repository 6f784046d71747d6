# ---- notifications: each one is delivered in the background (notify.sh bounds every channel
# ---- by NOTIFY_TIMEOUT), so a slow channel never holds the loop; the runner waits for what is
# ---- still being delivered once, bounded, when it exits (notify_drain).
NOTIFY_PIDS=()
# Whether a signal came once the stop was recorded: the wait for notifications ends at once.
NOTIFY_CUT=0

# notify_script_v: REPLY is the notify.sh to run: the loop's own when it matches its pin in
# pins.sha256, else the baseline copy .pins/notify.sh when that one does. Status 1, with a log
# line, when neither does or there is no pin to check against: a notify.sh the agent could
# have written is never run (contract section 7). This is what makes calling the hook safe
# before the runner has checked the pins, on a preflight failure or a corrupt state.
# (NOTIFY_TEXT, read with the pins: notify.sh's text as pinned, run from memory.)
notify_script_v() {
  local line want f
  REPLY=''
  [[ -n $NOTIFY_TEXT ]] && return 0
  line=$(grep -m 1 -- '^[0-9a-f]\{64\}  notify\.sh$' "$LOOP_DIR/pins.sha256" 2>/dev/null) || line=''
  want=${line%%  *}
  REPLY=''
  if [[ -z $want ]]; then
    orbit_log "notify: not run: pins.sha256 holds no pin for notify.sh to check it against"
    return 1
  fi
  for f in "$LOOP_DIR/notify.sh" "$LOOP_DIR/.pins/notify.sh"; do
    if [[ -f $f && ! -L $f ]] && orbit_sha256_file_v "$f" && [[ $REPLY == "$want" ]]; then
      REPLY=$f
      return 0
    fi
  done
  REPLY=''
  orbit_log "notify: not run: notify.sh does not match its pin (nor does .pins/notify.sh); 'orbit recover --restore-pinned' restores it"
  return 1
}

# notify EVENT SUMMARY: starts notify.sh in the background, in its own process group, without
# the lock's descriptors, and goes on at once.
notify() {
  local script
  notify_script_v || return 0
  script=$REPLY
  set -m
  if [[ -n $NOTIFY_TEXT ]]; then
    # The runner's own copy, read and checked against its pin at the start of the run: a
    # notify.sh changed since is never run (contract section 7).
    ORBIT_NOTIFY_LOOP_DIR=$LOOP_DIR "$BASH" -c "$NOTIFY_TEXT" "$LOOP_DIR/notify.sh" "$1" "$2" </dev/null >/dev/null 2>&1 7<&- 8>&- 9>&- &
  else
    ORBIT_NOTIFY_LOOP_DIR=$LOOP_DIR "$BASH" "$script" "$1" "$2" </dev/null >/dev/null 2>&1 7<&- 8>&- 9>&- &
  fi
  NOTIFY_PIDS+=("$!")
  set +m
}

# notify_cut SIG: the trap of a signal once the stop is recorded (stop_hold_signals): the wait
# for notifications (notify_drain) ends at once and stops what is still being delivered.
notify_cut() {
  NOTIFY_CUT=1
  orbit_log "received SIG$1 after the stop was recorded: the notifications still being delivered are stopped; the stop stands"
}

# notify_drain: the one wait for notifications still being delivered: at most NOTIFY_TIMEOUT
# plus a margin (notify.sh ends by then on its own), after which what is left is stopped.
notify_drain() {
  local pid alive ticks=0 limit
  local -a left=()
  for pid in "${NOTIFY_PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      left+=("$pid")
    fi
  done
  NOTIFY_PIDS=()
  ((${#left[@]} == 0)) && return 0
  limit=$((NOTIFY_TIMEOUT_S + 5))
  orbit_log "notify: waiting at most ${limit}s for ${#left[@]} notification(s) still being delivered"
  while ((ticks < limit * 10 && !NOTIFY_CUT)); do
    alive=0
    for pid in "${left[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then
        alive=1
        break
      fi
    done
    ((!alive)) && break
    sleep 0.1
    ticks=$((ticks + 1))
  done
  for pid in "${left[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      orbit_log "notify: a notification still running after the wait is stopped"
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}

# notify_stop_early EVENT SUMMARY: on a stop before the loop could run (a preflight failure, a
# corrupt state), notifies once and waits for it, bounded, on the way out. Best effort from
# here on: whatever fails, the caller's exit code stands.
notify_stop_early() {
  trap - ERR
  set +e
  # The run's end is decided: a signal only cuts the wait short.
  stop_hold_signals
  if [[ -z $LOOP_DIR || ! -d $LOOP_DIR ]]; then
    return 0
  fi
  config_settings_notify_timeout
  notify "$1" "$2"
  notify_drain
  return 0
}
