# ---- stall and oscillation from .action-sig.log (one "ITERATION<TAB>SIGNATURE" per line).
# The log's last lines (as many as the stall and oscillation checks look at), read once
# per run and then kept up to date in memory.
SIG_TAIL=()
SIG_TAIL_READ=0
stall_sig_record() {
  local n=$1 sig=$2 last='' keep=$((CONVERGENCE_WINDOW > 6 ? CONVERGENCE_WINDOW : 6))
  if ((!SIG_TAIL_READ)); then
    mapfile -t SIG_TAIL < <(tail -n "$keep" -- "$LOOP_DIR/.action-sig.log" 2>/dev/null || true)
    SIG_TAIL_READ=1
  fi
  if ((${#SIG_TAIL[@]} > 0)); then
    last=${SIG_TAIL[${#SIG_TAIL[@]} - 1]}
  fi
  [[ ${last%%$'\t'*} == "$n" ]] && return 0
  orbit_appendable "$LOOP_DIR/.action-sig.log" || return 0
  printf '%s\t%s\n' "$n" "$sig" >>"$LOOP_DIR/.action-sig.log"
  SIG_TAIL+=("$n"$'\t'"$sig")
  if ((${#SIG_TAIL[@]} > keep)); then
    SIG_TAIL=("${SIG_TAIL[@]:1}")
  fi
}

# stall_check_v (after stall_sig_record): REPLY is stalled, oscillating or nothing.
stall_check_v() {
  local -a sigs=("${SIG_TAIL[@]#*$'\t'}")
  local n=${#sigs[@]}
  REPLY=''
  if ((n >= CONVERGENCE_WINDOW)); then
    local i same=1
    for ((i = n - CONVERGENCE_WINDOW + 1; i < n; i++)); do
      [[ ${sigs[i]} == "${sigs[n - CONVERGENCE_WINDOW]}" ]] || same=0
    done
    if ((same)); then
      REPLY=$REASON_STALLED
      return 0
    fi
  fi
  if ((n >= 4)) && [[ ${sigs[n - 1]} == "${sigs[n - 3]}" && ${sigs[n - 2]} == "${sigs[n - 4]}" && ${sigs[n - 1]} != "${sigs[n - 2]}" ]]; then
    REPLY=$REASON_OSCILLATING
  fi
}

# The same verify failure three iterations in a row while the tree kept changing: this
# iteration (in R) and the two before it (from their result.env).
stall_repeat_failure_check() {
  local n=$1 i d line k v
  local -A P=()
  [[ ${R[VERIFY]:-} == "$VERIFY_FAIL" && -n ${R[VERIFY_SIG]:-} && ${R[TREE_BEFORE]:-} != "${R[TREE_AFTER]:-}" ]] || return 1
  ((n >= 3)) || return 1
  for ((i = n - 1; i >= n - 2; i--)); do
    printf -v d '%s/iterations/%06d' "$LOOP_DIR" "$i"
    [[ -f $d/result.env ]] || return 1
    P=()
    while IFS= read -r line || [[ -n $line ]]; do
      k=${line%%=*} v=${line#*=}
      [[ -n $k ]] && P[$k]=$v
    done <"$d/result.env"
    [[ ${P[VERIFY]:-} == "$VERIFY_FAIL" && ${P[VERIFY_SIG]:-} == "${R[VERIFY_SIG]}" ]] || return 1
    [[ ${P[TREE_BEFORE]:-} != "${P[TREE_AFTER]:-}" ]] || return 1
  done
  REPEAT_SIG=${R[VERIFY_SIG]}
  return 0
}
REPEAT_SIG=

# stall_record_abort N DIR TREE_BEFORE TREE_AFTER: an integrity violation ends the iteration
# ABORTED; its change is left in the work tree, uncommitted, for a human to review.
# stall_abort_snapshot_v BEFORE: REPLY is the tree the aborted iteration left, for its record; when
# git's own configuration is what changed, no git command of the runner's runs at all (a
# planted filter, hook or monitor would run inside it): the record says BEFORE.
stall_abort_snapshot_v() {
  if [[ $INTEGRITY_REASON == "$REASON_GIT_TAMPER" ]]; then
    REPLY=$1
    return 0
  fi
  tree_snapshot
}

stall_record_abort() {
  local n=$1 dir=$2
  # An iteration directory the agent swapped for a link: the record goes into a real one.
  if [[ -L $dir ]]; then
    rm -f -- "$dir"
    mkdir -p -- "$dir"
  fi
  R[TREE_BEFORE]=$3
  R[TREE_AFTER]=$4
  R[VERDICT]=$STATUS_ABORTED
  R[STOP_REASON]=$INTEGRITY_REASON
  R[EXIT_CODE]=$EXIT_INTEGRITY
  R[SUMMARY]="$INTEGRITY_REASON: $PIN_BAD changed"
  if schedule_stop_msg_v "$PIN_BAD" || home_stop_msg_v "$PIN_BAD" || user_refs_stop_msg_v "$PIN_BAD" ||
    holdout_stop_msg_v "$PIN_BAD" "$dir"; then
    R[SUMMARY]=$REPLY
  fi
  if [[ $INTEGRITY_REASON == "$REASON_GIT_TAMPER" && $PIN_BAD == "$WS" ]]; then
    R[SUMMARY]="git_tamper: remove what is there, then 'orbit recover --repin' recreates the workspace $WS from $LOOP_BRANCH (it is no longer the loop's worktree: $PIN_HAVE)"
  fi
  printf -v 'R[ENDED_AT]' '%(%s)T' -1
  record_ledger_iter_sum_v "$n"
  R[COST_MICROUSD]=$REPLY
  R[COST_KIND]=$RUN_COST_KIND
  R[CB_FAILS]=${S[CB_FAILS]}
  R[VERIFY_STREAK]=${S[VERIFY_STREAK]}
  resume_result_record "$dir"
  printf 'withheld: integrity violation\n' >"$dir/commit.txt"
  iteration_finalize "$n"
}

# stall_sched_logs_rotate: the schedulers' logs of this loop (cron.log, systemd.log: every tick
# appends to them, a DONE loop's footer too) are kept under 1 MiB, the older part in .1.
stall_sched_logs_rotate() {
  local f
  for f in "$LOOP_DIR/cron.log" "$LOOP_DIR/systemd.log"; do
    if [[ -f $f && ! -L $f ]] && (($(wc -c <"$f") > 1048576)); then
      mv -f -- "$f" "$f.1"
    fi
  done
}
