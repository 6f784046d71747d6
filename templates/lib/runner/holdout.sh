# ---- holdout checks: holdout.sh, in the workspace, with ORBIT_HOLDOUT_DIR naming the loop
# ---- directory's holdout/; a check run like verify's (the runner's trust checked before and
# ---- after it, sandboxed when the loop is). Their output goes to iterations/N/holdout.log
# ---- only: never to verify.log, the feedback, progress.md or a prompt. The code the checks
# ---- run through run_hidden never sees the holdout (lib/hidden.sh).
HOLDOUT_OK=0
HOLDOUT_FAILING=
holdout_run() {
  local n=$1 dir=$2 out="$ORBIT_TMP/holdout.out" budget cut=0
  HOLDOUT_OK=0 HOLDOUT_FAILING=
  rm -f -- "$out"
  : >"$out"
  if [[ -n $TRUST_BAD ]] || ! trust_check runner; then
    orbit_log "the loop directory or git's control files changed before the holdout checks ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  # The tree the holdout runs on: what it writes there never reaches a later run.
  if ! tree_here_v; then
    printf '[FAIL] holdout.sh (not run: git could not take the tree to check; see runner.log)\n' >>"$dir/holdout.log"
    return 0
  fi
  local tree=$REPLY
  if checks_reusable "$tree" && [[ $CHECKS_REUSE_HOLDOUT == "$VERIFY_PASS" ]]; then
    # The survivor's holdout passed on this same tree: not run again.
    orbit_iso_v -1
    printf '### holdout run: iteration %s (%s)\n[orbit] not run again: the survivor'"'"'s holdout checks passed on this same tree (%s/holdout.log)\n' \
      "$n" "$REPLY" "${CHECKS_REUSE_DIR#"$LOOP_DIR"/iterations/*/}" >>"$dir/holdout.log"
    HOLDOUT_OK=1
    return 0
  fi
  trust_hold_loop
  deadline_cap_v "$HOLDOUT_BUDGET_S" || cut=1
  budget=$REPLY
  if ((budget <= 0)); then
    deadline_hit
    printf '[FAIL] holdout.sh (not run: the loop'"'"'s wall-clock limit, %s, is reached)\n' "$LOOP_TIMEOUT" >>"$dir/holdout.log"
    return 0
  fi
  sandbox_prepare holdout
  # run_hidden (holdout.sh) nests a sandbox of its own for the code the checks run, with
  # the holdout masked, when this run is sandboxed.
  local hidden_bw=''
  if sandbox_on; then
    hidden_bw=${SANDBOX_BWRAP-}
  fi
  ORBIT_VERIFY_FOR="$LOOP_DIR" ORBIT_REPO_ROOT="$WS" ORBIT_VERIFY_TMP="$ORBIT_TMP" \
    ORBIT_HOLDOUT_DIR="$LOOP_DIR/holdout" ORBIT_HIDDEN_BWRAP="$hidden_bw" \
    proc_run_bounded "$budget" "$KILL_GRACE_S" /dev/null "$out" "${SANDBOX_ARGV[@]}" "$BASH" "$LOOP_DIR/holdout.sh"
  local rc=$ORBIT_RC to=$ORBIT_TIMED_OUT
  if ((to && cut)); then
    deadline_hit
  fi
  if ! trust_check check; then
    orbit_log "the holdout checks changed $TRUST_BAD ($TRUST_REASON): their verdict is not taken"
    return 0
  fi
  if ! evidence_checks_settle "$dir" "$tree" 0; then
    rc=1
    printf '[FAIL] holdout.sh (the work tree could not be put back to the tree it ran on)\n' >>"$out"
  elif [[ -n $CHECKS_CHANGED ]]; then
    rc=1
    printf '[FAIL] holdout.sh (it changed the project it was checking: %s; put back as it was)\n' "$CHECKS_CHANGED" >>"$out"
  fi
  {
    orbit_iso_v -1
    printf '### holdout run: iteration %s (%s)\n' "$n" "$REPLY"
    cat -- "$out"
    if ((to)); then
      printf '[FAIL] holdout.sh (timed out after %ss)\n' "$budget"
    fi
  } >>"$dir/holdout.log"
  HOLDOUT_FAILING=$(grep -aoE '^\[FAIL\] holdout-[0-9]+' -- "$out" | cut -c8- | sort -u | tr '\n' ' ' || true)
  HOLDOUT_FAILING=${HOLDOUT_FAILING% }
  HOLDOUT_FAILING=${HOLDOUT_FAILING// /,}
  if ((rc == 0 && to == 0)); then
    HOLDOUT_OK=1
    state_event holdout_pass "$n"
  else
    state_event holdout_fail "$n" failing "${HOLDOUT_FAILING:-holdout.sh}"
  fi
  return 0
}

# holdout_feedback DIR N: a claim a holdout check rejected. The feedback says only that a
# hidden acceptance check failed: no name, no command, no output (the agent would fit its
# change to them, which is what holdout checks are there to catch).
holdout_feedback() {
  local dir=$1 n=$2 text
  text='The visible checks passed, but a hidden acceptance check failed. Its content is not shown.'
  printf '{"failing":["hidden-acceptance"],"failing_roles":["holdout"],"tests":[],"assertions":[],"loci":[],"output_tail":%s,"attempt":%s,"iteration":%s}\n' \
    "$(orbit_json_str "$text")" "${R[ATTEMPTS]}" "$n" >"$dir/feedback.json"
  {
    printf '%s\n' "$text"
    printf 'The DONE claim was rejected. Make the change correct in general, not only for the cases\n'
    printf 'the visible checks try: a solution fitted to them fails the hidden ones.\n'
  } >"$dir/feedback.txt"
}

# holdout_refs_v DIFF: the added lines of DIFF (git diff -U0, as gate_placeholders makes it)
# that name the holdout: ORBIT_HOLDOUT_DIR, the holdout folder (<loop directory's name>/holdout)
# or the name of a file in holdout/ (of 4 characters or more), each as a whole word. REPLY
# holds them, "PATH:LINE: TEXT" each ("" for none), HOLDOUT_REFS_FILE the first one's PATH.
# Returns 1 when the scan could not run.
HOLDOUT_REFS_FILE=
holdout_refs_v() {
  local diff=$1 hnames="$ORBIT_TMP/holdout-names" located="$ORBIT_TMP/added.located" f b rc=0
  REPLY='' HOLDOUT_REFS_FILE=''
  {
    printf '%s\n' ORBIT_HOLDOUT_DIR "${LOOP_DIR##*/}/holdout"
    for f in "$LOOP_DIR/holdout"/*; do
      b=${f##*/}
      if [[ -f $f && ! -L $f && ${#b} -ge 4 ]]; then
        printf '%s\n' "$b"
      fi
    done
  } >"$hnames"
  # Each added line after its file's path and its line number in the new tree.
  awk '/^diff --git / { hunk = 0; next }
    !hunk && /^\+\+\+ / { path = substr($0, 5); sub(/^b\//, "", path); next }
    /^@@/ { hunk = 1; split($3, at, ","); line = substr(at[1], 2) + 0; next }
    hunk && /^\+/ { print path ":" line ": " substr($0, 2); line++ }' "$diff" >"$located" 2>>"$ORBIT_LOG_FILE" || return 1
  REPLY=$(grep -aFw -m 20 -f "$hnames" -- "$located" 2>>"$ORBIT_LOG_FILE") || rc=$?
  ((rc <= 1)) || return 1
  if [[ -n $REPLY ]]; then
    f=${REPLY%%$'\n'*}
    HOLDOUT_REFS_FILE=${f%%:[0-9]*}
  fi
  return 0
}

# holdout_stop_msg_v FILE DIR: REPLY is the stop's summary when FILE is the one the holdout
# reference scan found naming the holdout (the lines in DIR/holdout-refs.txt); 1 otherwise.
# It names no line: the summary reaches progress.md.
holdout_stop_msg_v() {
  [[ -n $HOLDOUT_REFS_FILE && $1 == "$HOLDOUT_REFS_FILE" && -f $2/holdout-refs.txt ]] || return 1
  REPLY="reward_hack: the change names the holdout in $1 (the lines: ${2#"$LOOP_DIR"/}/holdout-refs.txt): code that looks the hidden checks' answers up is a reward hack; review the change, take it out of the workspace, then orbit recover"
}
