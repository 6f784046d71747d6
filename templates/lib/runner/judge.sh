# ---- the judge and the confirmation runs' feedback: what the DONE gate asks after the
# ---- checks (gate_judge, gate_confirm) in every loop (JUDGE_CMD may be set at run time).
# judge_run N DIR: the judge hook (JUDGE_CMD) on the workspace (WS: a candidate's worktree in
# survivor selection), bounded by EXEC_TIMEOUT and the loop's deadline, in the sandbox of a
# check. JUDGE_OK=1 when it exits 0 in time; its output goes to DIR/judge.log unless the run
# changed what the runner holds (TRUST_BAD then says what, and nothing of it is taken).
JUDGE_OK=0
judge_run() {
  local n=$1 dir=$2 jlimit tree
  JUDGE_OK=0 JUDGE_CHANGED=
  rm -f -- "$ORBIT_TMP/judge.out"
  if [[ -n $TRUST_BAD ]] || ! trust_check runner; then
    orbit_log "the loop directory or git's control files changed before the judge ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  # The tree it judges: what the judge's run changes of it is not the judge's to change.
  tree_here_v || return 0
  tree=$REPLY
  if checks_reusable "$tree" && [[ $CHECKS_REUSE_JUDGE == "$VERIFY_PASS" && -f $CHECKS_REUSE_DIR/judge.log ]]; then
    # The judge approved the survivor on this same tree: not asked again.
    {
      printf '[orbit] not run again: the judge approved the survivor on this same tree (%s/judge.log); its output:\n' \
        "${CHECKS_REUSE_DIR#"$LOOP_DIR"/iterations/*/}"
      cat -- "$CHECKS_REUSE_DIR/judge.log"
    } >"$dir/judge.log"
    JUDGE_OK=1
    return 0
  fi
  trust_hold_loop
  deadline_cap_v "$EXEC_TIMEOUT_S" || true
  jlimit=$((REPLY > 0 ? REPLY : 1))
  sandbox_prepare check
  # shellcheck disable=SC2016  # the single-quoted script expands in the child, by design
  ORBIT_LOOP_DIR="$LOOP_DIR" ORBIT_WORKSPACE="$WS" ORBIT_ITERATION="$n" ORBIT_REPO_ROOT="$WS" ORBIT_JUDGE="$JUDGE_CMD" \
    proc_run_bounded "$jlimit" "$KILL_GRACE_S" /dev/null "$ORBIT_TMP/judge.out" \
    "${SANDBOX_ARGV[@]}" "$BASH" -c 'cd -- "$ORBIT_REPO_ROOT" || exit 1; eval "$ORBIT_JUDGE"'
  if ! trust_check check; then
    orbit_log "the judge changed $TRUST_BAD ($TRUST_REASON): its verdict is not taken"
    return 0
  fi
  cp -- "$ORBIT_TMP/judge.out" "$dir/judge.log"
  local rc=$ORBIT_RC timed_out=$ORBIT_TIMED_OUT
  if ! evidence_checks_settle "$dir" "$tree"; then
    JUDGE_CHANGED='(the work tree could not be put back; see runner.log)'
  elif [[ -n $CHECKS_CHANGED ]]; then
    JUDGE_CHANGED=$CHECKS_CHANGED
  fi
  if [[ -n $JUDGE_CHANGED ]]; then
    printf '[orbit] the judge changed the project it was judging: %s (put back as it was): its verdict is not taken\n' "$JUDGE_CHANGED" >>"$dir/judge.log"
    return 0
  fi
  if ((rc == 0 && !timed_out)); then
    JUDGE_OK=1
  fi
  return 0
}
# What the last judge run changed of the tree it judged ("" for nothing).
JUDGE_CHANGED=

# judge_confirm_feedback DIR N TEXT: a rejected confirmation is the next iteration's feedback (the
# checks passed: there is no verify failure to tell).
judge_confirm_feedback() {
  local dir=$1 n=$2 text=$3
  printf '{"failing":["confirmation"],"tests":[],"assertions":[],"loci":[],"output_tail":%s,"attempt":%s,"iteration":%s}\n' \
    "$(orbit_json_str "$text")" "${R[ATTEMPTS]}" "$n" >"$dir/feedback.json"
  printf 'The checks passed, but the DONE claim was not confirmed by a fresh-context run:\n    %s\n' "$text" >"$dir/feedback.txt"
}
