# ---- the plan
# The plan's working record, between recover_plan's steps: the last iteration's VERDICT and the
# record it is read from (SOURCE), whether it is retried (RETRY), whether the loop has ended
# done (ENDED), why its DONE is not trusted (WHY), the NEXT iteration, whether the loop RAN
# at all, the STATUS and REASON, the circuit breaker (CB_STATE, CB_FAILS, CB_SIG,
# CB_OPENED), the COST, and who the loop is (STARTED, ORIGIN, IB, CV, WS).
declare -A RC_PLAN=()

# recover_plan: what recover would do, from the records: the last iteration and the next one,
# the retry of a failed one and what is set aside, the pins, the leftovers, and the state to
# write (S, RC_STATE_WRITE), with every repair (RC_REPAIRS), note and move said.
recover_plan() {
  RC_PLAN=()
  recover_read_old
  recover_read_events
  recover_read_progress
  recover_distrust_unrecorded_state
  recover_plan_last
  recover_plan_retry
  recover_pins
  recover_plan_leftovers
  recover_plan_status
  recover_plan_identity
  recover_plan_state
}

# recover_plan_last: the last iteration on record (RC_LAST: the journal's, progress.md's or a
# commit trailer's, the highest), its verdict, whether it is retried (ABORTED or BLOCKED)
# or DONE (when every record of it agrees), and the next iteration.
recover_plan_last() {
  local ev_max=0 pg_max=0 git_max n verdict='' source='' retry=0 done=0 next why=''
  for n in "${!EVV[@]}"; do
    if ((n > ev_max)); then ev_max=$n; fi
  done
  for n in "${!PGV[@]}"; do
    if ((n > pg_max)); then pg_max=$n; fi
  done
  git_max=$(recover_git_max)
  RC_LAST=$ev_max
  if ((pg_max > RC_LAST)); then RC_LAST=$pg_max; fi
  if ((git_max > RC_LAST)); then RC_LAST=$git_max; fi
  if [[ -n ${EVV[$RC_LAST]:-} ]]; then
    verdict=${EVV[$RC_LAST]} source=events.jsonl
  elif [[ -n ${PGV[$RC_LAST]:-} ]]; then
    verdict=${PGV[$RC_LAST]} source=progress.md
  elif ((RC_LAST > 0)); then
    source='a commit trailer'
  fi
  if ((RC_LAST > 0)) && [[ $verdict == "$STATUS_ABORTED" || $verdict == "$STATUS_BLOCKED" ]]; then
    retry=1
  fi
  recover_set_aside_untrusted "$verdict"
  # DONE only when every record of it agrees (orbit recover's done_distrusted); otherwise
  # the iteration runs again.
  if ((RC_LAST > 0)) && [[ ${EVV[$RC_LAST]:-} == "$STATUS_DONE" ]]; then
    recover_done_distrust_v "$RC_LAST"
    why=$REPLY
    if [[ -z $why ]]; then done=1; fi
  fi
  if ((RC_LAST == 0)); then
    next=${O[NEXT_ITERATION]:-1}
  elif ((retry)) || [[ -n $why ]]; then
    next=$RC_LAST
  else
    next=$((RC_LAST + 1))
  fi
  RC_PLAN[VERDICT]=$verdict RC_PLAN[SOURCE]=$source RC_PLAN[RETRY]=$retry RC_PLAN[ENDED]=$done
  RC_PLAN[WHY]=$why RC_PLAN[NEXT]=$next
}

# recover_plan_retry: a retried iteration's old attempt is moved aside (retried.K/), an
# untrusted DONE set aside, and an iteration recorded but not closed noted.
recover_plan_retry() {
  local k f idir verdict=${RC_PLAN[VERDICT]} retry=${RC_PLAN[RETRY]} done=${RC_PLAN[ENDED]}
  local why=${RC_PLAN[WHY]} next=${RC_PLAN[NEXT]}
  idir=$(recover_iter_dir "$RC_LAST")
  if ((retry)) && [[ -f $idir/result.env ]]; then
    k=1
    while [[ -e $idir/retried.$k ]]; do k=$((k + 1)); done
    # Everything of the old attempt (files, interrupted.K/), so the rerun starts clean.
    while IFS= read -r f; do
      RC_MOVES_FROM+=("$f")
      RC_MOVES_TO+=("$idir/retried.$k/${f##*/}")
    done < <(find "$idir" -mindepth 1 -maxdepth 1 ! -name 'retried.*' | LC_ALL=C sort)
    RC_REPAIRS+=("iteration $RC_LAST ended $verdict: it is retried, its record kept in iterations/$(printf '%06d' "$RC_LAST")/retried.$k/")
  fi
  if [[ -n $why ]]; then
    RC_NOTES+=("iteration $RC_LAST's DONE is not trusted: $why; it runs again")
    recover_set_aside_record "$RC_LAST" "its DONE is not trusted: $why" ''
  fi
  if ((!retry && !done && RC_LAST > 0)) && [[ -n $next && -z $why && -f $(recover_iter_dir "$next")/result.env ]]; then
    if [[ -n $RC_FIRST_IR && -z ${EVR[$next]:-} ]] && ((next >= RC_FIRST_IR)); then
      RC_NOTES+=("iteration $next was recorded (iterations/$(printf '%06d' "$next")/result.env) but never announced (no iteration_result): the runner died right after writing it, and the next run does the iteration again")
    else
      RC_NOTES+=("iteration $next was recorded (iterations/$(printf '%06d' "$next")/result.env) but not closed: the next run completes it without running it again")
    fi
  fi
}

# recover_plan_leftovers: the change signatures cleared (--clear-stall), and what an interrupted
# write left (*.tmp.*) moved to the backup.
recover_plan_leftovers() {
  local f
  if ((F_STALL)) && [[ -s $RC_DIR/.action-sig.log ]]; then
    RC_SIG_CLEAR=1
    RC_REPAIRS+=("change signatures cleared (--clear-stall); the old ones are in the backup")
  fi
  while IFS= read -r f; do
    RC_MOVES_FROM+=("$f")
    RC_MOVES_TO+=("BACKUP/${f##*/}")
    RC_REPAIRS+=("${f##*/}: a leftover of an interrupted write, moved to the backup")
  done < <(find "$RC_DIR" -mindepth 1 -maxdepth 1 -type f -name '*.tmp.*' | LC_ALL=C sort)
}

# recover_plan_status: the spend, the circuit breaker (reset with --reset-circuit), and the
# status and stop reason the loop is left in.
recover_plan_status() {
  local status reason b retry=${RC_PLAN[RETRY]} done=${RC_PLAN[ENDED]} cb_state ran=0
  recover_spend_v
  RC_PLAN[COST]=$REPLY
  if ((RC_OLD_OK && !F_RESET)); then
    cb_state=${O[CB_STATE]}
    RC_PLAN[CB_FAILS]=${O[CB_FAILS]} RC_PLAN[CB_SIG]=${O[CB_SIG]} RC_PLAN[CB_OPENED]=${O[CB_OPENED_AT]}
  else
    cb_state=$CB_CLOSED
    RC_PLAN[CB_FAILS]=0 RC_PLAN[CB_SIG]='' RC_PLAN[CB_OPENED]=0
  fi
  RC_PLAN[CB_STATE]=$cb_state
  if ((F_RESET && RC_OLD_OK)) && [[ ${O[CB_STATE]} != "$CB_CLOSED" || ${O[CB_FAILS]} != 0 ]]; then
    RC_REPAIRS+=("circuit breaker reset to CLOSED (--reset-circuit)")
  fi
  if ((RC_LAST > 0)) || [[ -f $RC_DIR/.baseline-commit ]]; then
    ran=1
  fi
  RC_PLAN[RAN]=$ran
  if ((done)); then
    status=$STATUS_DONE reason=$REASON_NONE
  elif [[ -n $RC_BROKEN ]]; then
    b=''
    if [[ $RC_BROKEN == goal.md ]]; then b=-goal; fi
    RC_NOTES+=("the pin of $RC_BROKEN is still broken ($RC_BROKEN_REASON): review the change, then --repin$b or --restore-pinned")
    status=$STATUS_ABORTED reason=$RC_BROKEN_REASON
  elif recover_holds_git_tamper; then
    status=$STATUS_ABORTED reason=$REASON_GIT_TAMPER
  elif [[ $cb_state == "$CB_OPEN" ]]; then
    status=$STATUS_BLOCKED reason=$REASON_CIRCUIT_OPEN
  elif ((RC_OLD_OK)); then
    status=$STATUS_CONTINUE reason=$REASON_NONE
    case ${O[LAST_STATUS]} in
      "$STATUS_STALLED")
        if ((!F_STALL)); then status=$STATUS_STALLED reason=${O[STOP_REASON]}; fi
        ;;
      "$STATUS_PAUSED") status=$STATUS_PAUSED reason=${O[STOP_REASON]} ;;
      "$STATUS_BLOCKED")
        if ((!retry)) && [[ ${O[STOP_REASON]} != "$REASON_CIRCUIT_OPEN" && ${O[STOP_REASON]} != "$REASON_TOOL_FAILURE" ]]; then
          status=$STATUS_BLOCKED reason=${O[STOP_REASON]}
        fi
        ;;
      "$STATUS_READY")
        if ((RC_LAST == 0)); then status=$STATUS_READY; fi
        ;;
      "$STATUS_CONTINUE") reason=${O[STOP_REASON]} ;;
    esac
  elif ((ran)); then
    status=$STATUS_CONTINUE reason=$REASON_NONE
  else
    status=$STATUS_READY reason=$REASON_NONE
  fi
  RC_PLAN[STATUS]=$status RC_PLAN[REASON]=$reason
}

# recover_plan_identity: who the loop is: when it started, its origin and iteration branches, its
# contract version (migrated with --migrate) and its workspace (checked).
recover_plan_identity() {
  local started origin ib cv ws ran=${RC_PLAN[RAN]}
  if ((RC_OLD_OK)); then
    started=${O[STARTED_AT]} origin=${O[ORIGIN_BRANCH]} ib=${O[ITER_BRANCH]}
  else
    started=${RC_FIRST_START:-0} ib=''
    # The runner records the starting branch in .origin-branch at the first run.
    origin=$(cat -- "$RC_DIR/.origin-branch" 2>/dev/null || true)
    state_check_value ORIGIN_BRANCH "$origin" || origin=''
    if GIT_OPTIONAL_LOCKS=0 git -C "$RC_REPO" rev-parse --verify -q "refs/heads/orbit/$RC_NAME" >/dev/null 2>&1; then
      ib="orbit/$RC_NAME"
    fi
  fi
  if ((F_MIGRATE)); then
    cv=$ORBIT_CONTRACT_VERSION
    if ((RC_OLD_OK)) && [[ ${O[CONTRACT_VERSION]} != "$cv" ]]; then
      RC_REPAIRS+=("CONTRACT_VERSION migrated to $cv (--migrate)")
    fi
  else
    cv=${O[CONTRACT_VERSION]:-$RC_LOOP_CV}
  fi
  # WORKSPACE: the old state's; rebuilt, loop.toml's once a 2.0 loop has run (the runner
  # sets it at the first run from the same setting).
  if ((RC_OLD_OK)); then
    ws=${O[WORKSPACE]}
  elif ((ran)) && ! recover_older_major "$cv"; then
    recover_ws_path_v
    ws=$REPLY
  else
    ws=''
  fi
  if ((F_MIGRATE)) && { recover_older_major "${O[CONTRACT_VERSION]:-$RC_LOOP_CV}" || recover_older_major "$RC_LOOP_CV"; }; then
    recover_migrate_check "$ran"
    ws=''
    if ((ran)); then
      recover_ws_path_v
      ws=$REPLY
    fi
  fi
  recover_older_major "$cv" || recover_ws_check "$ws" "$ib"
  RC_PLAN[STARTED]=$started RC_PLAN[ORIGIN]=$origin RC_PLAN[IB]=$ib RC_PLAN[CV]=$cv RC_PLAN[WS]=$ws
}

# recover_plan_state: the state the plan leaves (S), each change from the old one a repair, and
# whether it is written (RC_STATE_WRITE: not when it is the old one, whole), its GEN one past
# the highest seen.
recover_plan_state() {
  local b next=${RC_PLAN[NEXT]} status=${RC_PLAN[STATUS]} reason=${RC_PLAN[REASON]} cost=${RC_PLAN[COST]}
  S=()
  S[CONTRACT_VERSION]=${RC_PLAN[CV]}
  S[GEN]=${O[GEN]:-0}
  S[NEXT_ITERATION]=$next
  S[LAST_STATUS]=$status
  S[STOP_REASON]=$reason
  S[STARTED_AT]=${RC_PLAN[STARTED]}
  S[LAST_UPDATED_AT]=${O[LAST_UPDATED_AT]:-0}
  S[ORIGIN_BRANCH]=${RC_PLAN[ORIGIN]}
  S[ITER_BRANCH]=${RC_PLAN[IB]}
  S[COST_MICROUSD]=$cost
  S[CB_STATE]=${RC_PLAN[CB_STATE]}
  S[CB_FAILS]=${RC_PLAN[CB_FAILS]}
  S[CB_SIG]=${RC_PLAN[CB_SIG]}
  S[CB_OPENED_AT]=${RC_PLAN[CB_OPENED]}
  S[VERIFY_STREAK]=${O[VERIFY_STREAK]:-0}
  S[RESUME_AT]=${O[RESUME_AT]:-0}
  S[WORKSPACE]=${RC_PLAN[WS]}
  if ((RC_OLD_OK)); then
    if [[ ${O[NEXT_ITERATION]} != "$next" ]]; then
      if ((RC_LAST == 0)); then
        RC_REPAIRS+=("NEXT_ITERATION ${O[NEXT_ITERATION]} → $next (no iteration on record)")
      else
        RC_REPAIRS+=("NEXT_ITERATION ${O[NEXT_ITERATION]} → $next (${RC_PLAN[SOURCE]}: iteration $RC_LAST ended ${RC_PLAN[VERDICT]:-(committed)})")
      fi
    fi
    if [[ ${O[LAST_STATUS]} != "$status" || ${O[STOP_REASON]} != "$reason" ]]; then
      RC_REPAIRS+=("LAST_STATUS ${O[LAST_STATUS]} (${O[STOP_REASON]}) → $status ($reason)")
    fi
    if [[ ${O[COST_MICROUSD]} != "$cost" ]]; then
      RC_REPAIRS+=("COST_MICROUSD ${O[COST_MICROUSD]} → $cost (the sum of cost.ledger)")
    fi
  fi
  RC_STATE_WRITE=1
  if ((RC_OLD_OK && RC_SIDECAR_OK)) && [[ "${RC_OLD_TEXT}x" == "$(
    state_print
    printf x
  )" ]]; then
    RC_STATE_WRITE=0
  fi
  if ((RC_STATE_WRITE)); then
    b=${O[GEN]:-${RC_OLD_GEN:-0}}
    if [[ -n $RC_SIDECAR_GEN ]] && ((RC_SIDECAR_GEN > b)); then
      b=$RC_SIDECAR_GEN
    fi
    S[GEN]=$((b + 1))
  fi
}

# recover_holds_git_tamper: a loop stopped on git_tamper (by its state, or by its last loop_stop
# when there is no state to ask) stays ABORTED until orbit recover --repin accepts git's
# config, hooks and excludes after a review (orbit recover's holds_git_tamper).
recover_holds_git_tamper() {
  if ((RC_OLD_OK)); then
    [[ ${O[LAST_STATUS]} == "$STATUS_ABORTED" && ${O[STOP_REASON]} == "$REASON_GIT_TAMPER" ]] || return 1
  else
    [[ $RC_LAST_STOP == "$STATUS_ABORTED $REASON_GIT_TAMPER" ]] || return 1
  fi
  RC_NOTES+=("the loop stopped on git_tamper: review 'git -C $RC_REPO config --list --show-origin', .git/hooks and .git/info, undo what you did not make, then orbit recover --repin")
  return 0
}

# Whether the plan changes anything. A progress.md whose last marker only lacks its final
# newline is no change by itself (the runner adds it); it is mended when recover writes.
recover_plan_has_changes() {
  [[ -n $RC_WS_ADD || -n $RC_BH_WRITE ]] ||
    ((RC_STATE_WRITE || RC_PINS_WRITE || RC_GOAL_COPY || RC_SIG_CLEAR || RC_EV_TORN || ${#RC_MOVES_FROM[@]} > 0)) ||
    [[ -n $RC_EV_BREAK_LINE || -n $RC_PG_BREAK_OFF ]] || ((${#RC_PG_STRAY[@]} > 0)) ||
    ((${#RC_RESTORE_TO[@]} > 0 || ${#RC_REMOVES[@]} > 0)) ||
    [[ $RC_PG_TAIL == torn ]]
}

recover_resume_hint() {
  case ${S[LAST_STATUS]} in
    "$STATUS_DONE") printf 'the loop is DONE' ;;
    "$STATUS_ABORTED") printf 'still ABORTED (%s): review the change, then --repin or --restore-pinned' "${S[STOP_REASON]}" ;;
    *) printf 'the next run resumes at iteration %s (%s)' "${S[NEXT_ITERATION]}" "${S[LAST_STATUS]}" ;;
  esac
}

recover_dry_run() {
  local r i old new
  printf 'recover.sh --dry-run %s%s: the plan (nothing is written)\n' "$RC_DIR" "${RC_FLAGS[*]:+ ${RC_FLAGS[*]}}"
  if ! recover_plan_has_changes; then
    printf 'nothing to repair: state.env agrees with the evidence; %s\n' "$(recover_resume_hint)"
    return 0
  fi
  if ((RC_STATE_WRITE)); then
    S[LAST_UPDATED_AT]=$(orbit_now)
    old=$(mktemp "${TMPDIR:-/tmp}/orbit-recover.XXXXXX")
    new=$(mktemp "${TMPDIR:-/tmp}/orbit-recover.XXXXXX")
    if [[ -f $RC_DIR/state.env ]]; then
      cat -- "$RC_DIR/state.env" >"$old"
    fi
    state_print >"$new"
    printf -- '--- state.env\n+++ state.env (recovered)\n'
    diff -u -- "$old" "$new" | tail -n +3 | grep -v '^@@' || true
    rm -f -- "$old" "$new"
  fi
  for r in "${RC_REPAIRS[@]}"; do printf 'repair: %s\n' "$r"; done
  if [[ -n $RC_WS_ADD ]]; then printf 'git: git worktree add --lock %s %s\n' "$RC_WS_ADD" "$RC_WS_BRANCH"; fi
  if [[ -n $RC_BH_WRITE ]]; then printf 'write: .branch-head (the old copy to backups/)\n'; fi
  if ((RC_PINS_WRITE)); then printf 'write: pins.sha256 (the old copy to backups/)\n'; fi
  if ((RC_GOAL_COPY)); then printf 'write: .pins/goal.md (the old copy to backups/)\n'; fi
  if ((RC_SIG_CLEAR)); then printf 'write: .action-sig.log (the old copy to backups/)\n'; fi
  for i in "${!RC_RESTORE_TO[@]}"; do
    printf 'write: %s (the old copy to backups/)\n' "${RC_RESTORE_TO[i]#"$RC_DIR"/}"
  done
  for i in "${!RC_REMOVES[@]}"; do
    printf 'remove: %s (a copy to backups/)\n' "${RC_REMOVES[i]}"
  done
  for i in "${!RC_MOVES_FROM[@]}"; do
    printf 'move: %s → %s\n' "${RC_MOVES_FROM[i]#"$RC_DIR"/}" "${RC_MOVES_TO[i]#"$RC_DIR"/}"
  done
  for r in "${RC_NOTES[@]}"; do printf 'note: %s\n' "$r"; done
  printf 'append: a ## Recovery entry to progress.md and a recovery event to events.jsonl\n'
}

# recover_spend_v: COST_MICROUSD, the sum of cost.ledger, never lowered: a ledger that lost lines
# (emptied, cut) is not a refund, and the old state, one the journal records, holds what was
# paid (said in the notes).
recover_spend_v() {
  local sum
  orbit_ledger_sum_v "$RC_DIR/cost.ledger" ||
    orbit_die "$EXIT_FAILURE" "cannot read $RC_DIR/cost.ledger: check its permissions, then run recover.sh again"
  sum=$REPLY
  if ((RC_OLD_OK)) && orbit_is_uint "${O[COST_MICROUSD]-}" && ((O[COST_MICROUSD] > sum)); then
    RC_NOTES+=("COST_MICROUSD kept at ${O[COST_MICROUSD]}: cost.ledger sums to $sum, less than the spend the state holds (lines lost or removed); a spend is never lowered")
    REPLY=${O[COST_MICROUSD]}
  fi
}
