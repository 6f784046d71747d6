# ---- one iteration: gates were checked by the caller.
# The iteration the runner is at, whether one is under way (a signal records it as
# interrupted), whether this run ran one (for notify-once), the tree the last one ended
# on (the next one's start in a continuous run), and whether the next prompt asks for a
# claim (the checks passed without one).
CUR_ITER=0
IN_ITERATION=0
RAN_ITERATION=0
LAST_TREE=
CLAIM_NUDGE=0
# The iteration's record directory and its input feedback, for the attempts' hooks.
ITER_DIR=
ITER_FB=

# iteration_at N: the runner is at iteration N (none under way yet).
iteration_at() {
  CUR_ITER=$1
}

iteration_run() {
  local n=$1 dir fb t_before t_after
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  iteration_begin "$n" "$dir"
  fb=$REPLY
  iteration_tree_before "$dir"
  t_before=$REPLY
  iteration_agent "$n" "$dir" "$t_before" "$fb"
  iteration_rate_limit "$n" "$dir"
  # No git runs before the workspace and git's files are known to be as they were.
  if ! trust_integrity_gate "after agent"; then
    iteration_abort "$n" "$dir" "$t_before"
    return 0
  fi
  workspace_ws_on_branch || workspace_head_restore "after the agent"
  if [[ ${R[AGENT_OUTCOME]} == "$OUTCOME_PERMANENT" ]]; then
    R[VERIFY]=$VERIFY_SKIP R[VERDICT]=$STATUS_BLOCKED R[STOP_REASON]=$REASON_TOOL_FAILURE
    R[EXIT_CODE]=$EXIT_BLOCKED
    R[SUMMARY]="the agent could not be run: $PERMANENT_WHY"
  fi
  if [[ -z ${R[VERDICT]:-} ]]; then
    checks_run_verify "$dir" "after the agent"
    if ! trust_integrity_gate "after verify"; then
      iteration_abort "$n" "$dir" "$t_before"
      return 0
    fi
    iteration_verdict "$n" "$dir"
  fi
  evidence_artifacts_sweep "$dir"
  # The tree the iteration ends on: the one its checks verified when they were the last to
  # run in the workspace and left it as that tree (nothing swept since), else a snapshot.
  if [[ -n $VERIFY_SETTLED ]] && ((VERIFY_SETTLED_ITER == n && !ARTIFACTS_SWEPT)); then
    REPLY=$VERIFY_SETTLED
  else
    tree_snapshot
  fi
  t_after=$REPLY
  iteration_claim "$n" "$dir" "$t_before" "$t_after"
  [[ -n $REPLY ]] || return 0
  t_after=$REPLY
  iteration_close "$n" "$dir" "$t_before" "$t_after"
}

# iteration_begin N DIR: iteration N starts, its record R fresh, its directory DIR ready.
# REPLY is the feedback it is given (its copy in DIR), "" on a first iteration.
iteration_begin() {
  local n=$1 dir=$2 started fb
  RAN_ITERATION=1
  CUR_ITER=$n
  record_iter_prepare "$dir"
  IN_ITERATION=1
  printf -v started '%(%s)T' -1
  CLAIM_NUDGE=0
  if ((n > 1)) && prompt_passed_without_claim $((n - 1)); then
    CLAIM_NUDGE=1
  fi
  R=()
  # What a fan-out's survivor's checks established holds for this iteration only, and the
  # tree the last checks left is not this iteration's.
  checks_reuse_clear
  checks_verify_settled_clear
  R[ITERATION]=$n
  R[STARTED_AT]=$started
  R[PHASE]=$PHASE_WORK
  prompt_last_feedback_v "$n"
  fb=$REPLY
  if [[ -n $fb ]]; then
    cp -- "$fb" "$dir/input-feedback.json"
    cp -- "${fb%.json}.txt" "$dir/input-feedback.txt" 2>/dev/null || true
    cp -- "${fb%/*}/verify.log" "$dir/input-verify.log" 2>/dev/null || true
    fb="$dir/input-feedback.json"
  fi
  state_event iteration_start "$n" max_iterations "$MAX_ITERATIONS"
  orbit_log "iteration $n of at most $MAX_ITERATIONS: the agent starts"
  REPLY=$fb
}

# iteration_tree_before DIR: REPLY is the tree the iteration starts from (DIR/tree-before):
# an interrupted attempt's, if one ran, so that its changes are committed with the
# iteration. In a continuous run nothing but the runner ran since the last iteration's
# snapshot (the commit moves HEAD, not the work tree): that snapshot is this one's start.
iteration_tree_before() {
  local dir=$1 t
  if [[ -f $dir/interrupted.1/tree-before ]]; then
    t=$(<"$dir/interrupted.1/tree-before")
  elif [[ -n $LAST_TREE ]]; then
    t=$LAST_TREE
  else
    tree_snapshot
    t=$REPLY
  fi
  printf '%s\n' "$t" >"$dir/tree-before"
  # The commit the iteration starts on: its change is committed onto that tree.
  local h=''
  if [[ -f $dir/interrupted.1/head-before ]]; then
    h=$(<"$dir/interrupted.1/head-before")
  elif ! commit_head_file_v; then
    REPLY=$(config_git_q rev-parse -q --verify HEAD 2>/dev/null || true)
  fi
  h=${h:-$REPLY}
  if [[ $h =~ ^[0-9a-f]{40,64}$ ]]; then
    printf '%s\n' "$h" >"$dir/head-before"
  fi
  REPLY=$t
}

# iteration_agent N DIR TREE_BEFORE FEEDBACK: the iteration's agent runs (one agent's
# attempts, or N candidates and their survivor); what they did goes into R (AGENT_EXIT,
# AGENT_OUTCOME, ATTEMPTS, DURATION, AGENT_MESSAGE) and the spend into the state.
iteration_agent() {
  local n=$1 dir=$2 t_before=$3 fb=$4 outcome attempt
  if ((FANOUT_N > 1)); then
    # N candidates instead of one agent: the survivor's change is in the workspace after
    # it, and the iteration goes on as a single agent's would.
    fanout_iteration "$n" "$dir" "$t_before" "$fb"
    outcome=${FANOUT_RUN[OUTCOME]}
    attempt=${FANOUT_RUN[ATTEMPTS]}
    agent_run_is "${FANOUT_RUN[EXIT]}" "${FANOUT_RUN[TIMED_OUT]}" "${FANOUT_RUN[SECONDS]}"
    engine_cost_run_is 0 "${FANOUT_RUN[COST_KIND]}"
    engine_said_forget
    if [[ -z $TRUST_BAD && ($outcome == "$OUTCOME_RATE_LIMITED" || $outcome == "$OUTCOME_PERMANENT") ]]; then
      # What the survivor's CLI said (when its limit lifts; its refusal and the fix) was
      # read in the candidate's subshell: read again here, from its log.
      engine_classify_v "$dir/agent.log" "$AGENT_RC" 0
      if [[ $REPLY != "$outcome" ]]; then
        engine_said_forget
      fi
    fi
  else
    ITER_DIR=$dir ITER_FB=$fb
    agent_attempts 0 "$WS" "$AGENT_DIR" "$ORBIT_TMP" "$n" "$dir/prompt.md" "$dir/agent.log" "$dir/cost.usd" "$fb" iteration_attempt_prompt iteration_attempt_record
    outcome=$REPLY
    attempt=$ATTEMPT
  fi
  R[AGENT_EXIT]=$AGENT_RC
  R[AGENT_OUTCOME]=$outcome
  R[ATTEMPTS]=$attempt
  R[DURATION]=$AGENT_SECS
  engine_final_message_v "$dir/agent.log"
  R[AGENT_MESSAGE]=$REPLY
  S[COST_MICROUSD]=$LEDGER_TOTAL
}

# iteration_rate_limit N DIR: a rate-limited agent pauses the loop until the limit lifts (a
# rate limit burns no iteration: the attempt is kept aside and the iteration reruns), and
# does not return; a reset more than RATE_LIMIT_MAX_WAIT_S away is a permanent failure.
iteration_rate_limit() {
  local n=$1 dir=$2 resume said=''
  [[ ${R[AGENT_OUTCOME]} == "$OUTCOME_RATE_LIMITED" && -z $TRUST_BAD ]] || return 0
  resume=$ENGINE_RESUME_AT
  # No reset named: the next look in 15 minutes.
  [[ $resume =~ ^[0-9]+$ ]] || resume=$(($(orbit_now) + 900))
  if ((resume - $(orbit_now) > RATE_LIMIT_MAX_WAIT_S)); then
    # Not a pause: a reset more than a week away is a stop for a human, with the text.
    R[AGENT_OUTCOME]=$OUTCOME_PERMANENT
    if [[ -n $ENGINE_MESSAGE ]]; then
      engine_clip_v "$ENGINE_MESSAGE"
    else
      REPLY=$({ grep -aiE -m 1 'retry|try again|reset|limit' -- "$dir/agent.log" || true; } | cut -c1-120)
    fi
    deadline_permanent_why_is "rate limited until $(orbit_iso "$resume"), more than 7 days away: $REPLY"
    return 0
  fi
  S[RESUME_AT]=$resume
  record_iter_prepare "$dir"
  IN_ITERATION=0
  state_event rate_limited "$n" resume_at "${S[RESUME_AT]}"
  if [[ -n $ENGINE_MESSAGE ]]; then
    engine_clip_v "$ENGINE_MESSAGE"
    said=" ($REPLY)"
  fi
  resume_finish "$EXIT_RATE_LIMITED" "$STATUS_PAUSED" "$REASON_RATE_LIMIT" "rate limited by the agent's provider$said; resumes after $(orbit_iso "${S[RESUME_AT]}")"
}

# iteration_abort N DIR TREE_BEFORE: an integrity violation after the agent or a check run
# ends the iteration (nothing of it verified, nothing committed).
iteration_abort() {
  R[VERIFY]=$VERIFY_SKIP
  stall_abort_snapshot_v "$3"
  stall_record_abort "$1" "$2" "$3" "$REPLY"
}

# iteration_verdict N DIR: the checks' verdict after the agent, into R and the verify streak;
# a failure's feedback for the next attempt.
iteration_verdict() {
  local n=$1 dir=$2
  if ((VERIFY_OK)); then
    R[VERIFY]=$VERIFY_PASS
    S[VERIFY_STREAK]=$((S[VERIFY_STREAK] + 1))
    state_event verify_pass "$n" run 1 streak "${S[VERIFY_STREAK]}"
  else
    R[VERIFY]=$VERIFY_FAIL
    S[VERIFY_STREAK]=0
    checks_feedback_write "$dir" "$n" "${R[ATTEMPTS]}"
    R[VERIFY_FAILING]=$VERIFY_FAILING
    R[VERIFY_SIG]=$VERIFY_SIG
    state_event verify_fail "$n" run 1 failing "$VERIFY_FAILING" signature "$VERIFY_SIG"
  fi
}

# iteration_claim N DIR TREE_BEFORE TREE_AFTER: the agent's claim, taken out of its folder
# into the record before anything else runs (the confirmation run gets a fresh folder), and
# put through the DONE gate when the checks passed. REPLY is the tree the iteration ends on
# (the confirmer's, when it changed the project); "" when the gate found an integrity
# violation (the iteration is recorded as aborted).
iteration_claim() {
  local n=$1 dir=$2 t_before=$3 verdict
  REPLY=$4
  R[DONE_CLAIM]=0
  [[ -z ${R[VERDICT]:-} ]] && agent_dir_file_take done.md "$dir/done.md.claim" || return 0
  R[DONE_CLAIM]=1
  state_event done_claim "$n"
  verdict="verify failed"
  if [[ ${R[VERIFY]} == "$VERIFY_PASS" ]]; then
    gate_done "$n" "$dir" "$4"
    if [[ $GATE_VERDICT == integrity ]]; then
      stall_record_abort "$n" "$dir" "$t_before" "$GATE_TREE"
      REPLY=
      return 0
    fi
    verdict=$GATE_VERDICT
  fi
  R[DONE_VERDICT]=$verdict
  if [[ $verdict == "$STATUS_DONE" ]]; then
    R[VERDICT]=$STATUS_DONE R[STOP_REASON]=$REASON_NONE R[EXIT_CODE]=$EXIT_DONE
    R[SUMMARY]="DONE after $n iteration(s): every check passed $PASS_K times in a row and the gate held"
    mv -- "$dir/done.md.claim" "$dir/done.md"
  else
    mv -- "$dir/done.md.claim" "$dir/done.md.rejected"
    state_event done_rejected "$n" reason "$verdict"
    orbit_log "iteration $n: done.md rejected: $verdict"
  fi
  REPLY=$GATE_TREE
  [[ ${R[VERIFY]} == "$VERIFY_PASS" ]] || REPLY=$4
}

# iteration_close N DIR TREE_BEFORE TREE_AFTER: the iteration's change, cost and decision
# into its record (result.env), then finalize.
iteration_close() {
  local n=$1 dir=$2
  R[TREE_BEFORE]=$3
  R[TREE_AFTER]=$4
  tree_changes_v "$3" "$4"
  R[CHANGED]=$CHANGES_COUNT
  record_ledger_iter_sum_v "$n"
  R[COST_MICROUSD]=$REPLY
  record_ledger_iter_kind_v
  R[COST_KIND]=$REPLY
  iteration_decide "$n"
  R[CB_FAILS]=${S[CB_FAILS]}
  R[VERIFY_STREAK]=${S[VERIFY_STREAK]}
  R[CB_SIG]=$CB_OPEN_SIG
  printf -v 'R[ENDED_AT]' '%(%s)T' -1
  resume_result_record "$dir"
  iteration_finalize "$n" 1
}

# iteration_attempt_prompt ATTEMPT: the prompt of a single agent's attempt, into the
# iteration's record and the agent's folder.
iteration_attempt_prompt() {
  prompt_build "$CUR_ITER" "$PHASE_WORK" "$1" "$ITER_DIR/prompt.md" "$ITER_FB"
}

# iteration_attempt_record ATTEMPT OUTCOME: a single agent's attempt, into the ledger and
# the journal (with its cost, and the tokens it used where its engine counts them).
iteration_attempt_record() {
  record_ledger_append "$CUR_ITER" "$RUN_COST_M" "$RUN_COST_KIND" "" "$RUN_COST_SOURCE"
  record_run_usage
  state_event agent_exit "$CUR_ITER" phase "$PHASE_WORK" attempt "$1" exit_code "$AGENT_RC" outcome "$2" seconds "$AGENT_SECS" "${RUN_USAGE[@]}"
  state_fault after_agent
}

# iteration_decide N: the verdict of an iteration without a verdict yet, in the contract's order.
iteration_decide() {
  local n=$1 st
  [[ -n ${R[VERDICT]:-} ]] && return 0
  # Circuit breaker: consecutive iterations whose agent failed.
  if [[ ${R[AGENT_OUTCOME]} != "$OUTCOME_OK" ]]; then
    S[CB_FAILS]=$((S[CB_FAILS] + 1))
  else
    S[CB_FAILS]=0
  fi
  # An agent that keeps failing opens the circuit before anything is judged stalled.
  if ((S[CB_FAILS] >= CB_THRESHOLD)) || [[ ${S[CB_STATE]} == "$CB_HALF_OPEN" && ${R[AGENT_OUTCOME]} != "$OUTCOME_OK" ]]; then
    R[VERDICT]=$STATUS_BLOCKED R[STOP_REASON]=$REASON_CIRCUIT_OPEN R[EXIT_CODE]=$EXIT_BLOCKED
    R[SUMMARY]="circuit open: the agent failed ${S[CB_FAILS]} iteration(s) in a row (last: ${R[AGENT_OUTCOME]}, exit ${R[AGENT_EXIT]})"
    CB_OPEN_SIG=$(orbit_sha256_str "agent:${R[AGENT_OUTCOME]}:${R[AGENT_EXIT]}")
    return 0
  fi
  stall_sig_record "$n" "${R[TREE_AFTER]}"
  stall_check_v
  st=$REPLY
  if [[ -n $st ]]; then
    R[VERDICT]=$STATUS_STALLED R[STOP_REASON]=$st R[EXIT_CODE]=$EXIT_STALLED
    if [[ $st == "$REASON_STALLED" ]]; then
      R[SUMMARY]="no progress: the tree was the same after the last $CONVERGENCE_WINDOW iterations"
    else
      R[SUMMARY]="oscillating: the tree alternates between two states"
    fi
    return 0
  fi
  if [[ ${R[VERIFY]} == "$VERIFY_FAIL" ]] && stall_repeat_failure_check "$n"; then
    R[ITERATION]=$n
    R[VERDICT]=$STATUS_BLOCKED R[STOP_REASON]=$REASON_CIRCUIT_OPEN R[EXIT_CODE]=$EXIT_BLOCKED
    R[SUMMARY]="the same verify failure three iterations in a row while the tree kept changing"
    CB_OPEN_SIG=$REPEAT_SIG
    return 0
  fi
  R[VERDICT]=$STATUS_CONTINUE R[STOP_REASON]=$REASON_NONE R[EXIT_CODE]=$EXIT_CONTINUE
  if [[ ${R[VERIFY]} == "$VERIFY_PASS" ]]; then
    R[SUMMARY]="iteration $n: verify passed; waiting for the agent's done.md"
  else
    R[SUMMARY]="iteration $n: verify failed (${R[VERIFY_FAILING]:-verify.sh})"
  fi
  if [[ -n ${R[DONE_VERDICT]:-} && ${R[DONE_VERDICT]} != "$STATUS_DONE" ]]; then
    R[SUMMARY]="iteration $n: DONE claim rejected (${R[DONE_VERDICT]})"
  fi
  return 0
}
CB_OPEN_SIG=

# iteration_finalize N: from iterations/N/result.env, idempotently: commit, progress entry, events,
# state. A rerun after a crash anywhere in here completes what is missing.
iteration_finalize() {
  local n=$1 fresh=${2:-0} dir commit
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  record_result_read "$dir/result.env"
  CUR_ITER=$n
  if [[ ! -f $dir/commit.txt ]]; then
    commit_iteration "$n" "$dir" "${R[TREE_BEFORE]}" "${R[TREE_AFTER]}" "$fresh"
  fi
  # commit.txt's own word for "no commit" (not the stop reason none).
  commit='none'
  if [[ -f $dir/commit.txt ]]; then
    IFS= read -r commit <"$dir/commit.txt" || true
  fi
  if [[ $commit =~ ^[0-9a-f]{40,64}$ ]]; then
    workspace_branch_head_record "$commit"
  fi
  if [[ $commit == failed ]]; then
    iteration_commit_refused "$n" "$dir"
  fi
  if [[ ${R[VERDICT]} != "$STATUS_ABORTED" ]]; then
    stall_sig_record "$n" "${R[TREE_AFTER]}"
  fi
  iteration_finalize_progress "$n" "$dir" "$fresh" "$commit"
  # The journal's record of the iteration, unless an earlier attempt wrote it already.
  if ((fresh)) || ! grep -q "\"event\":\"iteration_end\",\"iteration\":$n," -- "$EV_FILE" 2>/dev/null; then
    state_event iteration_end "$n" verdict "${R[VERDICT]}" reason "${R[STOP_REASON]}" commit "$commit" changed "${R[CHANGED]:-0}"
  fi
  iteration_finalize_checkpoint "$n"
  IN_ITERATION=0
  LAST_TREE=${R[TREE_AFTER]:-}
  orbit_log "iteration $n: ${R[VERDICT]} — ${R[SUMMARY]}"
  S[LAST_STATUS]=${R[VERDICT]}
  S[STOP_REASON]=${R[STOP_REASON]}
  if [[ ${R[VERDICT]} == "$STATUS_CONTINUE" ]]; then
    S[STOP_REASON]=$REASON_NONE
  fi
  resume_save_state
  if orbit_true "$NOTIFY_EVERY_ITERATION" && [[ ${R[VERDICT]} == "$STATUS_CONTINUE" ]]; then
    notify "$NOTIFY_EVENT_ITERATION" "${R[SUMMARY]}"
  fi
  return 0
}

# iteration_commit_refused N DIR: iteration N's commit failed. A DONE is not DONE without its commit,
# and a loop whose commits are refused must not go on committing nothing: either stops the
# loop BLOCKED (tool_failure) with what refused it and the fix, its record rewritten (its
# claim rejected). An index held by another git is transient: only a DONE stops on it. An
# iteration that stops the loop anyway keeps its own verdict. Idempotent (a rerun after a
# crash finds the record rewritten already).
iteration_commit_refused() {
  local n=$1 dir=$2 was=${R[VERDICT]} why fix
  [[ ${R[SUMMARY]:-} != "$COMMIT_REFUSED_SAID"* ]] || return 0
  [[ $was == "$STATUS_DONE" || $was == "$STATUS_CONTINUE" ]] || return 0
  commit_refusal_v "$dir"
  why=$REPLY
  if ((COMMIT_LOCKED)) && [[ $was != "$STATUS_DONE" ]]; then
    return 0
  fi
  commit_refused_fix_v "$dir"
  fix=$REPLY
  R[VERDICT]=$STATUS_BLOCKED R[STOP_REASON]=$REASON_TOOL_FAILURE R[EXIT_CODE]=$EXIT_BLOCKED
  if [[ $was == "$STATUS_DONE" ]]; then
    R[DONE_VERDICT]="the commit failed: $why"
    mv -f -- "$dir/done.md" "$dir/done.md.rejected" 2>/dev/null || true
    state_event done_rejected "$n" reason "${R[DONE_VERDICT]}"
    R[SUMMARY]="$COMMIT_REFUSED_SAID $n failed, so it is not DONE: $why — the verified change stays uncommitted in the workspace; $fix"
  else
    R[SUMMARY]="$COMMIT_REFUSED_SAID $n failed: $why — its change stays uncommitted in the workspace and no later one would be committed; $fix"
  fi
  orbit_log "${R[SUMMARY]} (git's output: $dir/commit.log)"
  resume_result_record "$dir"
}

# iteration_finalize_progress N DIR FRESH COMMIT: iteration N's entry in progress.md (one final entry
# per attempt of the iteration: the earlier ones recover set aside, retried.K/, have theirs
# already), and its failure's line in .failures.log. Only the end of progress.md is read: an
# iteration's entries are the newest ones, and a loop with a long history must not rescan
# all of it each iteration.
iteration_finalize_progress() {
  local n=$1 dir=$2 fresh=$3 commit=$4 retried=0 entries=0 closed=0 tail_text line text changed_list cost_line
  for line in "$dir"/retried.*; do
    if [[ -d $line ]]; then retried=$((retried + 1)); fi
  done
  # An iteration this process just ran has no entry yet: nothing to look for.
  if ((!fresh)); then
    tail_text=$(tail -c 65536 -- "$PG_FILE" 2>/dev/null || true)
    while IFS= read -r line; do
      case $line in
        "## Iteration $n — INTERRUPTED") ;;
        "## Iteration $n — "*) entries=$((entries + 1)) ;;
        "<!-- orbit:end iteration=$n sha256="*) closed=1 ;;
      esac
    done <<<"$tail_text"
  fi
  if ((entries < retried + 1 || closed == 0)); then
    # awk reads to the end: `head` would leave tr to die of SIGPIPE (pipefail) as soon
    # as an iteration changes more names than fit in a pipe buffer.
    tree_changes_v "${R[TREE_BEFORE]}" "${R[TREE_AFTER]}"
    changed_list=$REPLY
    cost_line="\$$(orbit_usd_text "${R[COST_MICROUSD]:-0}") (${R[COST_KIND]:-$COST_UNKNOWN})"
    if [[ ${R[COST_KIND]:-} == partial ]]; then
      cost_line="\$$(orbit_usd_text "${R[COST_MICROUSD]:-0}") reported, plus runs that reported no cost"
    fi
    if [[ ${R[COST_KIND]:-$COST_UNKNOWN} == "$COST_UNKNOWN" ]]; then
      cost_line="unknown (the agent reported no cost)"
    fi
    text="## Iteration $n — ${R[VERDICT]}"$'\n'
    orbit_iso_v "${R[STARTED_AT]}"
    text+="- started: $REPLY"$'\n'
    orbit_iso_v "${R[ENDED_AT]}"
    text+="- ended: $REPLY"$'\n'
    text+="- agent: exit ${R[AGENT_EXIT]:-?} (${R[AGENT_OUTCOME]:-?}), ${R[DURATION]:-0}s, attempt ${R[ATTEMPTS]:-1} of $RETRY_LIMIT"$'\n'
    fanout_progress_v "$dir"
    text+=$REPLY
    text+="- verify: ${R[VERIFY]:-skip}${R[VERIFY_FAILING]:+ — failing: ${R[VERIFY_FAILING]}}"$'\n'
    text+="- changed: ${R[CHANGED]:-0} file(s)${changed_list:+ — $changed_list}"$'\n'
    text+="- commit: $commit"$'\n'
    text+="- cost: $cost_line"$'\n'
    text+="- signature: ${R[TREE_AFTER]:-none}"$'\n'
    if [[ -n ${R[DONE_VERDICT]:-} ]]; then
      text+="- done claim: ${R[DONE_VERDICT]}"$'\n'
    fi
    if [[ -n ${R[AGENT_MESSAGE]:-} ]]; then
      text+="- agent said: ${R[AGENT_MESSAGE]}"$'\n'
    fi
    if [[ -n ${R[AGENT_FOLDER]:-} ]]; then
      text+="- agent's folder: ${R[AGENT_FOLDER]} in place of .orbit-agent/ (removed; never committed)"$'\n'
    fi
    text+="- decision: ${R[VERDICT]} (${R[STOP_REASON]}) — ${R[SUMMARY]}"$'\n'
    if [[ -f $dir/feedback.txt && ${R[VERIFY]:-} == "$VERIFY_FAIL" ]]; then
      text+="- feedback:"$'\n\n'
      text+="$(state_progress_quote <"$dir/feedback.txt")"$'\n'
    fi
    state_progress_append "$n" "$text"
    if [[ ${R[VERIFY]:-} == "$VERIFY_FAIL" && -n ${R[VERIFY_SIG]:-} ]] && orbit_appendable "$LOOP_DIR/.failures.log" && ! grep -q "^${R[VERIFY_SIG]}	" -- "$LOOP_DIR/.failures.log" 2>/dev/null; then
      printf '%s\titeration %s: %s — %s\n' "${R[VERIFY_SIG]}" "$n" "${R[VERIFY_FAILING]:-verify.sh}" \
        "$(sed -n '4,$p' "$dir/feedback.txt" 2>/dev/null | grep -v '^ *$' | tail -n 1 | sed 's/^ *//' | cut -c1-160)" >>"$LOOP_DIR/.failures.log"
    fi
  fi
}

# iteration_finalize_checkpoint N: the state after iteration N (its record R): the next iteration,
# the circuit, the streak and the spend.
iteration_finalize_checkpoint() {
  local n=$1
  S[NEXT_ITERATION]=$((n + 1))
  if [[ ${R[CB_FAILS]:-} =~ ^[0-9]{1,9}$ ]]; then
    S[CB_FAILS]=${R[CB_FAILS]}
  fi
  if [[ ${R[VERIFY_STREAK]:-} =~ ^[0-9]{1,9}$ ]]; then
    S[VERIFY_STREAK]=${R[VERIFY_STREAK]}
  fi
  S[COST_MICROUSD]=$LEDGER_TOTAL
  S[RESUME_AT]=0
  case ${R[VERDICT]} in
    "$STATUS_CONTINUE")
      if [[ ${S[CB_STATE]} == "$CB_HALF_OPEN" ]]; then
        S[CB_STATE]=$CB_CLOSED S[CB_SIG]='' S[CB_OPENED_AT]=0
        state_event circuit_change "$n" from "$CB_HALF_OPEN" to "$CB_CLOSED"
      fi
      ;;
    "$STATUS_BLOCKED")
      if [[ ${R[STOP_REASON]} == "$REASON_CIRCUIT_OPEN" ]]; then
        state_event circuit_change "$n" from "${S[CB_STATE]}" to "$CB_OPEN"
        S[CB_STATE]=$CB_OPEN S[CB_OPENED_AT]=$(orbit_now)
        if [[ ${R[CB_SIG]:-} =~ ^[0-9a-f]{64}$ ]]; then
          S[CB_SIG]=${R[CB_SIG]}
        fi
      fi
      ;;
    "$STATUS_ABORTED")
      # The offending iteration is not counted as done: it reruns after a human review.
      S[NEXT_ITERATION]=$n
      ;;
  esac
}

# Complete an iteration whose record exists but whose checkpoint does not (a crash after
# result.env was written): nothing is run again, nothing counted twice.
iteration_resume_pending() {
  local n=${S[NEXT_ITERATION]} dir
  commit_retry_failed
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  [[ -e $dir/result.env || -L $dir/result.env ]] || return 0
  if ! resume_result_trusted "$n" "$dir/result.env"; then
    # Not the runner's finished record (a run that died while writing it, or a record
    # someone else put there): the iteration is done again, the record kept aside.
    orbit_log "iteration $n has a result.env that the journal does not record as the runner's: the iteration is done again"
    if [[ -L $dir/result.env || ! -f $dir/result.env ]]; then
      rm -f -- "$dir/result.env"
    fi
    return 0
  fi
  orbit_log "iteration $n was recorded but not checkpointed: completing it"
  iteration_finalize "$n"
  # Its snapshot is from another process: the tree may have changed since.
  LAST_TREE=
  iteration_stop_for_verdict
}

# After finalize: stop when the iteration's verdict says so.
iteration_stop_for_verdict() {
  case ${R[VERDICT]} in
    "$STATUS_CONTINUE") return 0 ;;
    "$STATUS_DONE")
      if [[ -n ${S[ITER_BRANCH]} ]] && orbit_true "$SQUASH_ON_DONE"; then
        iteration_squash_on_done
      fi
      if ((FANOUT_N > 1)); then
        fanout_done_prune
      fi
      evidence_clean_checkout_remove
      setup_run_cache_drop
      envelope_record "$CUR_ITER"
      adequacy_after_done "$CUR_ITER"
      if user_refs_project_defaults_note_v "${R[SUMMARY]}"; then
        R[SUMMARY]=$REPLY
      fi
      resume_finish "$EXIT_DONE" "$STATUS_DONE" "$REASON_NONE" "${R[SUMMARY]}"
      ;;
    "$STATUS_ABORTED")
      if [[ ${R[SUMMARY]} == *"orbit recover"* ]]; then
        resume_finish "$EXIT_INTEGRITY" "$STATUS_ABORTED" "${R[STOP_REASON]}" "${R[SUMMARY]}"
      fi
      resume_finish "$EXIT_INTEGRITY" "$STATUS_ABORTED" "${R[STOP_REASON]}" \
        "${R[SUMMARY]} — review it, then orbit recover --restore-pinned (undo) or --repin (accept)"
      ;;
    *) resume_finish "${R[EXIT_CODE]}" "${R[VERDICT]}" "${R[STOP_REASON]}" "${R[SUMMARY]}" ;;
  esac
}

# On DONE with branch isolation: one squashed commit on orbit/<name>-summary.
iteration_squash_on_done() {
  local summary_branch="${S[ITER_BRANCH]}-summary" base title msg tree c
  config_git_q rev-parse --verify -q "refs/heads/$summary_branch" >/dev/null && return 0
  base=$(cat -- "$LOOP_DIR/.baseline-commit")
  commit_goal_title_v
  title=$REPLY
  msg="orbit($LOOP_NAME): ${title:-goal reached} ($((S[NEXT_ITERATION] - 1)) iterations)"$'\n\nOrbit-Loop: '"$LOOP_NAME"
  {
    tree=$(config_git_q rev-parse "HEAD^{tree}") &&
      c=$(config_git_q commit-tree "$tree" -p "$base" -m "$msg") &&
      config_git_q branch "$summary_branch" "$c"
  } >>"$ORBIT_LOG_FILE" 2>&1 || orbit_log "squash onto $summary_branch failed"
}
