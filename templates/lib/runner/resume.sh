# ---- state
# The status and reason state.env holds as this run last read or wrote it ("STATUS REASON"):
# the stop a run that fails unexpectedly journals, its state being that checkpoint.
STATE_ON_DISK=

resume_load_state() {
  local rc=0
  state_load "$LOOP_DIR" || rc=$?
  if ((rc == STATE_LOAD_NEWER)); then
    config_footer "$STATUS_CONTINUE" "$STATE_ERR"
    orbit_log "error: $STATE_ERR: run this loop with the orbit that wrote it (nothing was changed)"
    notify_stop_early "$NOTIFY_EVENT_STATE_CORRUPT" "$STATE_ERR"
    lock_release
    exit "$EXIT_STATE_CORRUPT"
  fi
  if ((rc == STATE_LOAD_OLDER)); then
    config_footer "$STATUS_CONTINUE" "$STATE_ERR: run orbit recover --migrate"
    orbit_log "error: $STATE_ERR: run 'orbit recover --migrate $LOOP_DIR' (or bash $LOOP_DIR/recover.sh --migrate) to move it to a workspace; nothing was changed"
    engine_migrate_note
    notify_stop_early "$NOTIFY_EVENT_STATE_CORRUPT" "$STATE_ERR: run orbit recover --migrate"
    lock_release
    exit "$EXIT_STATE_CORRUPT"
  fi
  if ((rc != 0)); then
    config_footer "$STATUS_CONTINUE" "state corrupt: $STATE_ERR"
    orbit_log "state corrupt: $STATE_ERR"
    orbit_log "error: run 'orbit recover $LOOP_DIR' (or bash $LOOP_DIR/recover.sh) to rebuild state from the evidence"
    notify_stop_early "$NOTIFY_EVENT_STATE_CORRUPT" "state corrupt: $STATE_ERR; run orbit recover"
    lock_release
    exit "$EXIT_STATE_CORRUPT"
  fi
  STATE_ON_DISK="${S[LAST_STATUS]} ${S[STOP_REASON]}"
}

resume_save_state() {
  state_write "$LOOP_DIR" resume_state_journal
  STATE_ON_DISK="${S[LAST_STATUS]} ${S[STOP_REASON]}"
}

# resume_state_journal TEXT: the journal's record of the state.env about to be written.
resume_state_journal() {
  local REPLY
  orbit_sha256_str_v "$1"
  state_event state_write "$CUR_ITER" gen "${S[GEN]}" status "${S[LAST_STATUS]}" reason "${S[STOP_REASON]}" next_iteration "${S[NEXT_ITERATION]}" sha256 "$REPLY"
}

# ---- what the previous run left is evidence, cross-checked before any of it is believed.
# resume_journal_last_v PATTERN [COUNT]: REPLY holds the last COUNT (default 1) lines of the journal
# matching the fixed string PATTERN, newest last.
resume_journal_last_v() {
  REPLY=$(grep -aF -- "$1" "$EV_FILE" 2>/dev/null | tail -n "${2:-1}") || REPLY=''
}

# resume_event_field_v LINE KEY: REPLY is KEY's string or number value in the event LINE.
resume_event_field_v() {
  REPLY=''
  if [[ $1 =~ \"$2\":\"([^\"]*)\" || $1 =~ \"$2\":([0-9]+) ]]; then
    REPLY=${BASH_REMATCH[1]}
  fi
}

# resume_state_cross_check: state.env is the one the journal's newest record of a state write
# names (state_write's sha256, or a recovery's state_sha256), or the one before it when a
# run died between the record and the rename (the newest is exactly one generation ahead).
# Anything else was written by someone other than the runner or orbit recover: exit 4.
# A journal with no such record (a loop of an older orbit) is not held to it.
resume_state_cross_check() {
  local sw rec newest older='' want have gen seq_rec
  orbit_regular "$EV_FILE" || return 0
  resume_journal_last_v '"event":"state_write"' 2
  sw=$REPLY
  newest=${sw##*$'\n'}
  if [[ $sw == *$'\n'* ]]; then
    older=${sw%$'\n'*}
  fi
  resume_journal_last_v '"event":"recovery"' 1
  rec=$REPLY
  if [[ -n $rec ]]; then
    resume_event_field_v "$rec" seq
    seq_rec=${REPLY:-0}
    resume_event_field_v "$newest" seq
    if [[ -z $newest ]] || ((seq_rec > ${REPLY:-0})); then
      # A recovery after the last state write speaks for the state it wrote; one by an
      # older orbit says nothing about it.
      resume_event_field_v "$rec" state_sha256
      [[ -n $REPLY ]] || return 0
      newest=$rec older=''
    fi
  fi
  [[ -n $newest ]] || return 0
  resume_event_field_v "$newest" sha256
  want=$REPLY
  if [[ -z $want ]]; then
    resume_event_field_v "$newest" state_sha256
    want=$REPLY
  fi
  [[ -n $want ]] || return 0
  orbit_sha256_file_v "$LOOP_DIR/state.env"
  have=$REPLY
  [[ $have == "$want" ]] && return 0
  resume_event_field_v "$newest" gen
  gen=$REPLY
  if [[ $gen == "$((S[GEN] + 1))" ]]; then
    # The newest record is of a write that never happened: the one before it names this
    # state, or there is none of this generation (orbit init wrote it, or an older orbit).
    [[ -z $older ]] && return 0
    resume_event_field_v "$older" sha256
    local osha=$REPLY
    resume_event_field_v "$older" gen
    if [[ -z $osha || $REPLY != "${S[GEN]}" || $osha == "$have" ]]; then
      return 0
    fi
  fi
  REPLY="state.env (generation ${S[GEN]}) is not the state the runner or orbit recover last wrote (the journal's record: generation ${gen:-?}, sha256 ${want:0:12}): something else wrote it"
  return 1
}

# resume_result_trusted N FILE: FILE is iteration N's record as the runner finished writing it: the
# journal's iteration_result for N names its sha256.
resume_result_trusted() {
  local want
  resume_journal_last_v "\"event\":\"iteration_result\",\"iteration\":$1,"
  resume_event_field_v "$REPLY" sha256
  want=$REPLY
  [[ -n $want ]] && orbit_regular "$2" || return 1
  orbit_sha256_file_v "$2"
  [[ $REPLY == "$want" ]]
}

# resume_result_record DIR: writes the iteration's result.env from R and records its sha256 in
# the journal (iteration_result): the one proof, for a later run, that the runner wrote it.
resume_result_record() {
  local dir=$1 text='' k REPLY
  # What the sandbox refused to the iteration's runs (lib/sandbox-net.sh).
  sandbox_net_result
  for k in "${ORBIT_RESULT_KEYS[@]}"; do
    text+="$k=${R[$k]:-}"$'\n'
  done
  state_write_file "$dir/result.env" "$text" || orbit_die "$EXIT_STATE_CORRUPT" "cannot write $dir/result.env"
  orbit_sha256_str_v "$text"
  state_event iteration_result "${R[ITERATION]:-$CUR_ITER}" verdict "${R[VERDICT]:-}" reason "${R[STOP_REASON]:-}" sha256 "$REPLY"
}

# resume_finish CODE STATUS REASON SUMMARY: record the stop, notify, print the footer, exit. From
# its start the stop is this one: a signal only cuts the notification wait short.
resume_finish() {
  local code=$1 status=$2 reason=$3 summary=$4 fstatus=$STATUS_CONTINUE
  # A stop that waits for a human is named as audit, status and the report name it
  # (BLOCKED for max_iterations is EXHAUSTED), in the footer and the notification too.
  case $status in
    "$STATUS_BLOCKED" | "$STATUS_PAUSED" | "$STATUS_STALLED" | "$STATUS_ABORTED")
      summary="${ORBIT_STOP_NAME[$status:$reason]:-$status}: $summary"
      ;;
  esac
  stop_hold_signals
  S[LAST_STATUS]=$status
  S[STOP_REASON]=$reason
  resume_save_state
  stop_record "$status" "$reason" "$code"
  orbit_log "stop: $status ($reason), exit $code — $summary"
  # A stop is notified when it happens: a later tick that finds the loop still stopped for
  # the same reason, without running an iteration, says nothing again.
  if ((!RAN_ITERATION)) && [[ $status == "$START_STATUS" && $reason == "$START_REASON" ]]; then
    orbit_log "still $status ($reason): notified when it stopped, not again"
  else
    case $status in
      "$STATUS_DONE" | "$STATUS_BLOCKED" | "$STATUS_PAUSED" | "$STATUS_STALLED" | "$STATUS_ABORTED")
        notify "$status" "$summary"
        ;;
    esac
  fi
  # The footer says DONE for a verified DONE, READY for an unrun loop, else CONTINUE.
  case $status in
    "$STATUS_DONE" | "$STATUS_READY") fstatus=$status ;;
  esac
  notify_drain
  lock_release
  config_footer "$fstatus" "$summary"
  exit "$code"
}
