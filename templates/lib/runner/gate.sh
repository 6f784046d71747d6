# ---- the DONE gate (contract section 6).
# gate_done N DIR TREE: the gate of iteration N's claim, on the tree TREE its checks passed
# on. GATE_VERDICT is DONE or the rejection's reason; GATE_TREE the tree the iteration ends
# on (the confirmer's, when it changed the project).
GATE_VERDICT=
GATE_TREE=
# The tree the DONE gate's clean checkout held: the tree the claim would commit.
GATE_COMMIT_TREE=
gate_done() {
  local n=$1 dir=$2 step
  GATE_VERDICT=
  GATE_TREE=$3
  GATE_COMMIT_TREE=''
  GATE_LAST_CLEAN=0 GATE_CLEAN_WHY=
  for step in gate_passes gate_clean gate_placeholders gate_holdout_refs gate_pins gate_holdout gate_adequacy gate_judge gate_confirm; do
    "$step" "$n" "$dir"
    [[ -z $GATE_VERDICT ]] || return 0
  done
  GATE_VERDICT=$STATUS_DONE
}

# Whether the last of the PASS_K passes is the clean checkout's run (gate_passes decides), and
# when it is not, why the clean checkout's run is one more (said in its verify.log header).
GATE_LAST_CLEAN=0
GATE_CLEAN_WHY=
# gate_passes N DIR: the checks pass PASS_K times in a row (the first pass happened). The
# last of them is the clean checkout's (gate_clean) when the tree to commit is the very tree
# every earlier pass ran on; else they all run here and the clean checkout's run is one more.
gate_passes() {
  local n=$1 dir=$2 k last=$PASS_K before=''
  IFS= read -r before <"$dir/tree-before" 2>/dev/null || true
  if ! commit_tree_v "$dir" "${before:-$GATE_TREE}" "$GATE_TREE"; then
    GATE_VERDICT="the tree to commit could not be built (see runner.log)"
    return 0
  fi
  GATE_COMMIT_TREE=$REPLY
  gate_last_clean_decide
  ((GATE_LAST_CLEAN)) && last=$((PASS_K - 1))
  for ((k = 2; k <= last; k++)); do
    checks_run_verify "$dir" "pass $k of $PASS_K"
    gate_trust "after verify pass $k" || return 0
    if ((VERIFY_OK)); then
      S[VERIFY_STREAK]=$((S[VERIFY_STREAK] + 1))
      state_event verify_pass "$n" run "$k" streak "${S[VERIFY_STREAK]}"
    else
      S[VERIFY_STREAK]=0
      checks_feedback_write "$dir" "$n" "${R[ATTEMPTS]}"
      state_event verify_fail "$n" run "$k" failing "$VERIFY_FAILING" flaky true code "$CODE_VERIFY_FLAKY"
      GATE_VERDICT="VERIFY_FLAKY: verify passed, then failed on pass $k of $PASS_K"
      return 0
    fi
    if ((GATE_LAST_CLEAN)) && [[ $VERIFY_TREE != "$GATE_COMMIT_TREE" ]]; then
      # The workspace's tree moved between passes: the clean checkout's tree is not the one
      # the passes ran on, so every pass runs here and the clean checkout's run is one more.
      GATE_LAST_CLEAN=0 last=$PASS_K
      GATE_CLEAN_WHY="one more run: the workspace's tree changed between passes (pass $k ran on ${VERIFY_TREE:0:12})"
      orbit_log "iteration $n: $GATE_CLEAN_WHY"
    fi
  done
}

# gate_trust WHEN: the integrity gate (trust_integrity_gate WHEN); status 1, the verdict
# "integrity", when it does not hold.
gate_trust() {
  trust_integrity_gate "$1" && return 0
  GATE_VERDICT="integrity"
  return 1
}

# gate_last_clean_decide: GATE_LAST_CLEAN is 1 when the last pass can be the clean
# checkout's: PASS_K is 2 or more, the tree to commit is the tree the first pass ran on (no
# uncommitted change of an earlier start left out of it), and that pass ran here (a fan-out
# survivor's ran in its own worktree). Else GATE_CLEAN_WHY says why not.
gate_last_clean_decide() {
  GATE_LAST_CLEAN=0 GATE_CLEAN_WHY=
  if ((PASS_K < 2)); then
    GATE_CLEAN_WHY="one more run: PASS_K is 1, its one pass ran before the claim was read"
  elif [[ $GATE_COMMIT_TREE != "$GATE_TREE" || $VERIFY_TREE != "$GATE_TREE" ]]; then
    GATE_CLEAN_WHY="one more run: the tree to commit is not the one the checks ran on (the iteration started on changes it does not commit)"
  elif checks_reusable "$GATE_TREE"; then
    GATE_CLEAN_WHY="one more run: the passes were the survivor's, in its own worktree"
  else
    GATE_LAST_CLEAN=1
    return 0
  fi
  orbit_log "iteration $CUR_ITER: the clean checkout's run is $GATE_CLEAN_WHY"
}

# gate_clean N DIR: a check run in a clean checkout of the tree about to be committed
# (GATE_COMMIT_TREE, gate_passes'): a solution that needs a file the branch will not hold
# (ignored, untracked, left outside the tree) fails here. It is the last of the PASS_K passes
# when gate_passes found the tree to commit is the one they all ran on, else one more.
gate_clean() {
  local n=$1 dir=$2 tree=$GATE_COMMIT_TREE cws label
  if ! evidence_clean_checkout_v "$tree"; then
    GATE_VERDICT="the clean checkout of the tree to commit could not be made (see runner.log)"
    return 0
  fi
  # A fresh checkout is set up afresh (as a check runs: the tree is the agent's), so DONE
  # never rests on what an agent left in the workspace's setup.
  cws=$REPLY
  setup_forget "$cws"
  if ! setup_run_clean_checkout "$cws" "$dir/setup.log" "$tree"; then
    local why=$REPLY
    state_event setup_fail "$n" where clean why "$why"
    S[VERIFY_STREAK]=0
    GATE_VERDICT="the setup fails in a clean checkout of the tree to commit: $why (see ${dir#"$LOOP_DIR"/}/setup.log)"
    return 0
  fi
  label="in a clean checkout of the tree to commit ($GATE_CLEAN_WHY)"
  ((GATE_LAST_CLEAN)) && label="in a clean checkout of the tree to commit (pass $PASS_K of $PASS_K)"
  gate_clean_verify "$cws" "$dir" "$label"
  gate_trust "after the clean checkout's checks" || return 0
  if [[ $VERIFY_TREE != "$tree" ]]; then
    GATE_VERDICT="the clean checkout did not hold the tree to commit (see runner.log)"
    return 0
  fi
  if ((VERIFY_OK)); then
    ((GATE_LAST_CLEAN)) && S[VERIFY_STREAK]=$((S[VERIFY_STREAK] + 1))
    state_event verify_pass "$n" run clean streak "${S[VERIFY_STREAK]}"
    return 0
  fi
  S[VERIFY_STREAK]=0
  checks_feedback_write "$dir" "$n" "${R[ATTEMPTS]}"
  state_event verify_fail "$n" run clean failing "$VERIFY_FAILING" code "$CODE_VERIFY_CLEAN"
  GATE_VERDICT="the checks fail in a clean checkout of the tree to commit (a file they need is ignored, untracked or outside the tree): $VERIFY_FAILING"
  ((GATE_LAST_CLEAN)) && gate_clean_or_flaky "$n" "$dir" "$cws"
  return 0
}

# gate_clean_or_flaky N DIR CWS: the last pass failed in the clean checkout CWS after every
# earlier one passed here. The checks run again to tell a flaky check from a tree that lacks
# a file they need: once more in the clean checkout (a pass there: the same checkout gave two
# answers, VERIFY_FLAKY), then here (a failure here too: VERIFY_FLAKY, as a pass here that
# fails is; a pass here again: the tree to commit lacks a file, the clean checkout's verdict
# and feedback kept). Runs only on a failure, never on the way to DONE.
gate_clean_or_flaky() {
  local n=$1 dir=$2 cws=$3 clean_failing=$VERIFY_FAILING gate_kept_out="$ORBIT_TMP/verify.clean.out"
  cp -- "$LAST_VERIFY_OUT" "$gate_kept_out"
  gate_clean_verify "$cws" "$dir" "in the clean checkout again, after pass $PASS_K of $PASS_K failed there"
  gate_trust "after the clean checkout's checks again" || return 0
  if ((VERIFY_OK)); then
    checks_failed_restore "$clean_failing" "$gate_kept_out"
    state_event verify_fail "$n" run clean failing "$clean_failing" flaky true code "$CODE_VERIFY_FLAKY"
    GATE_VERDICT="VERIFY_FLAKY: verify passed, then failed on pass $PASS_K of $PASS_K in the clean checkout, then passed there again"
    return 0
  fi
  checks_run_verify "$dir" "pass $PASS_K of $PASS_K again here, after it failed in the clean checkout"
  gate_trust "after verify pass $PASS_K here" || return 0
  if ((VERIFY_OK)); then
    checks_failed_restore "$clean_failing" "$gate_kept_out"
    GATE_VERDICT="the checks fail in a clean checkout of the tree to commit and pass here again (a file they need is ignored, untracked or outside the tree): $clean_failing"
    return 0
  fi
  checks_feedback_write "$dir" "$n" "${R[ATTEMPTS]}"
  state_event verify_fail "$n" run "$PASS_K" failing "$VERIFY_FAILING" flaky true code "$CODE_VERIFY_FLAKY"
  GATE_VERDICT="VERIFY_FLAKY: verify passed, then failed on pass $PASS_K of $PASS_K"
}

# gate_clean_verify CWS DIR LABEL: the checks' run in the clean checkout CWS (WS names it for
# the run only: what follows is about the workspace again).
gate_clean_verify() {
  local WS=$1
  checks_run_verify "$2" "$3"
}

# gate_placeholders N DIR: no placeholder in the lines the loop added: the workspace now
# against the commit the loop began from (nothing else is ever in the workspace's diff). A
# scan that cannot run rejects the claim (it never passes by default). Every added line is
# read as text, as it is: no attribute (-diff, binary), NUL byte, textconv or external diff
# turns a file into "Binary files differ", and no replace ref swaps the blob read; an added
# line is one of a hunk (after its @@), so one that reads `+++ ...` is not taken for a
# file's header.
gate_placeholders() {
  local dir=$2 added first base now_tree rc=0
  base=$(cat -- "$LOOP_DIR/.baseline-tree" 2>/dev/null || cat -- "$LOOP_DIR/.baseline-commit")
  tree_snapshot
  now_tree=$REPLY
  GIT_NO_REPLACE_OBJECTS=1 config_git_q diff --no-color --no-ext-diff --no-textconv --text --no-relative \
    --src-prefix=a/ --dst-prefix=b/ -U0 "$base" "$now_tree" -- >"$ORBIT_TMP/added.diff" 2>>"$ORBIT_LOG_FILE" || rc=$?
  if ((rc != 0)); then
    GATE_VERDICT="the placeholder scan could not run: git diff failed (exit $rc; see runner.log)"
    return 0
  fi
  awk '/^diff --git / { hunk = 0; next } /^@@/ { hunk = 1; next } hunk && /^\+/' "$ORBIT_TMP/added.diff" >"$ORBIT_TMP/added.lines"
  added=$(grep -aE -m 5 -- "$PLACEHOLDER_PATTERN" "$ORBIT_TMP/added.lines" 2>>"$ORBIT_LOG_FILE") || rc=$?
  if ((rc > 1)); then
    GATE_VERDICT="the placeholder scan could not run: grep refused PLACEHOLDER_PATTERN (exit $rc; see runner.log)"
    return 0
  fi
  if [[ -n $added ]]; then
    first=${added%%$'\n'*}
    first=${first#+}
    orbit_cut_v "$first" 119
    GATE_VERDICT="placeholder in added lines: $REPLY"
    printf '%s\n' "$added" >"$dir/placeholders.txt"
    return 0
  fi
}

# gate_holdout_refs N DIR: no added line of the loop's change (gate_placeholders' diff,
# ORBIT_TMP/added.diff) names the holdout: its variable, its folder, a hidden file. Code
# that looks the answers up is a reward hack, as a changed check is: the loop stops
# ABORTED (reward_hack) and DIR/holdout-refs.txt keeps the lines. A scan that cannot run
# rejects the claim.
gate_holdout_refs() {
  local n=$1 dir=$2
  ((HOLDOUT_CHECKS > 0)) || return 0
  if ! holdout_refs_v "$ORBIT_TMP/added.diff"; then
    GATE_VERDICT="the holdout reference scan could not run (see runner.log)"
    return 0
  fi
  [[ -n $REPLY ]] || return 0
  printf '%s\n' "$REPLY" >"$dir/holdout-refs.txt"
  trust_integrity_reward_hack "holdout reference scan" "$HOLDOUT_REFS_FILE" \
    "no line of the change naming the holdout" "a line naming it (iteration $n's holdout-refs.txt)"
  GATE_VERDICT="integrity"
}

# gate_pins: every pin intact, and nothing the runner holds changed.
gate_pins() {
  gate_trust "done gate" || return 0
}

# gate_holdout N DIR: the holdout checks (contract section 10), hidden from the agent, run
# only here.
gate_holdout() {
  if ((HOLDOUT_CHECKS > 0)); then
    holdout_run "$1" "$2"
    gate_trust "after the holdout checks" || return 0
    if ((!HOLDOUT_OK)); then
      # Which one failed is in the event and holdout.log: the verdict reaches progress.md,
      # which the agent reads, so it says no more than the feedback does.
      GATE_VERDICT="holdout: a hidden acceptance check failed (see holdout.log)"
      holdout_feedback "$2" "$1"
      return 0
    fi
  fi
}

# gate_adequacy N DIR: with adequacy = "gate", the claim measured: the tree to commit
# (gate_clean's) as a commit of its own on the loop's base, each hunk reverted and each
# mutant run in clean checkouts under the loop's sandbox. A hunk no check needs, or more
# surviving mutants than ADEQUACY_MAX_SURVIVORS, rejects the claim with feedback naming
# them; a measure that cannot run rejects it too (fail closed).
gate_adequacy() {
  local n=$1 dir=$2 base='' commit=''
  [[ ${ADEQUACY_SETTING:-off} == gate ]] || return 0
  IFS= read -r base <"$LOOP_DIR/.baseline-commit" 2>/dev/null || true
  if [[ -n $base && -n $GATE_COMMIT_TREE ]]; then
    commit=$(config_git_q commit-tree "$GATE_COMMIT_TREE" -p "$base" -m "orbit adequacy: iteration $n's claim" 2>>"$ORBIT_LOG_FILE") || commit=
  fi
  if [[ -z $commit ]]; then
    GATE_VERDICT="adequacy: the claim's commit could not be made (see runner.log)"
    return 0
  fi
  adequacy_run "$n" "$dir" "$commit" "$base" --gate "$ADEQUACY_MAX_SURVIVORS"
  gate_trust "after the adequacy measure" || return 0
  case $ADEQUACY_RC in
    0) ;;
    4)
      GATE_VERDICT="adequacy: the checks need ${ADEQUACY_FIGURES[0]} of ${ADEQUACY_FIGURES[1]} changed hunks; ${ADEQUACY_FIGURES[2]} of ${ADEQUACY_FIGURES[3]} mutants killed"
      adequacy_feedback "$dir" "$n"
      ;;
    -1) GATE_VERDICT="adequacy: not measured: $ADEQUACY_WHY" ;;
    *) GATE_VERDICT="adequacy: orbit adequacy failed (exit $ADEQUACY_RC; see ${dir#"$LOOP_DIR"/}/adequacy.log)" ;;
  esac
}

# gate_judge N DIR: the judge approves, when the loop has one.
gate_judge() {
  if [[ -n $JUDGE_CMD ]]; then
    judge_run "$1" "$2"
    gate_trust "after the judge" || return 0
    if [[ -n $JUDGE_CHANGED ]]; then
      GATE_VERDICT="the judge's run changed the project it was judging ($JUDGE_CHANGED): put back, its verdict not taken"
      return 0
    fi
    if ((!JUDGE_OK)); then
      GATE_VERDICT="the judge did not approve (see judge.log)"
      return 0
    fi
  fi
}

# gate_confirm N DIR: fresh-context confirmation runs: DONE only when each writes CONFIRMED as
# the first line of .orbit-agent/confirm.md and changes nothing. Its exit code never confirms.
gate_confirm() {
  local n=$1 dir=$2 k verdict t_before t_after
  for ((k = 1; k <= CONFIRM_RUNS; k++)); do
    tree_snapshot
    t_before=$REPLY
    prompt_build "$n" "$PHASE_CONFIRM" "$k" "$dir/confirm.$k.prompt.md" ""
    agent_run "$n" "$PHASE_CONFIRM" "$k" "$dir/confirm.$k.prompt.md" "$dir/confirm.$k.log" "$dir/confirm.$k.cost" ""
    record_cost_of_run "$dir/confirm.$k.log" "$dir/confirm.$k.cost"
    record_ledger_append "$n" "$RUN_COST_M" "$RUN_COST_KIND" "" "$RUN_COST_SOURCE"
    record_run_usage
    state_event agent_exit "$n" phase "$PHASE_CONFIRM" attempt "$k" exit_code "$AGENT_RC" timed_out "$AGENT_TIMED_OUT" seconds "$AGENT_SECS" "${RUN_USAGE[@]}"
    verdict=''
    if agent_dir_file_take confirm.md "$dir/confirm.$k.md"; then
      IFS= read -r verdict <"$dir/confirm.$k.md" || true
    fi
    # One line of text, as a record holds it: no control character, at most 200 bytes.
    verdict=${verdict%$'\r'}
    verdict=${verdict//[[:cntrl:]]/ }
    orbit_cut_v "$verdict" 200
    verdict=$REPLY
    # git runs only once the workspace and git's files are known to be as they were.
    gate_trust "after confirm" || return 0
    evidence_artifacts_sweep "$dir"
    tree_snapshot
    t_after=$REPLY
    if ((AGENT_RC != 0 || AGENT_TIMED_OUT)); then
      GATE_VERDICT="the confirmation run failed (exit $AGENT_RC)"
      judge_confirm_feedback "$dir" "$n" "$GATE_VERDICT"
      return 0
    fi
    if [[ $t_before != "$t_after" ]]; then
      GATE_VERDICT="the confirmation run changed the project"
      GATE_TREE=$t_after
      tree_changes_v "$t_before" "$t_after"
      judge_confirm_feedback "$dir" "$n" "the confirmation run changed the project ($REPLY): it was asked to change nothing"
      return 0
    fi
    case $verdict in
      CONFIRMED) ;;
      "NOT CONFIRMED:"*)
        GATE_VERDICT="not confirmed:${verdict#NOT CONFIRMED:}"
        judge_confirm_feedback "$dir" "$n" "$GATE_VERDICT"
        return 0
        ;;
      '')
        GATE_VERDICT="no confirmation verdict (.orbit-agent/confirm.md missing or empty)"
        judge_confirm_feedback "$dir" "$n" "$GATE_VERDICT"
        return 0
        ;;
      *)
        orbit_cut_v "$verdict" 80
        GATE_VERDICT="the confirmation verdict is neither CONFIRMED nor NOT CONFIRMED: $REPLY"
        judge_confirm_feedback "$dir" "$n" "$GATE_VERDICT"
        return 0
        ;;
    esac
  done
}
