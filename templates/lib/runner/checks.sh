# ---- verify
# What the last verify run found: it passed (VERIFY_OK), its exit status, whether its bound
# stopped it, the failing checks and their signature.
VERIFY_OK=0
VERIFY_RC=1
VERIFY_TO=0
VERIFY_FAILING=
VERIFY_SIG=
# The tree the last verify run checked.
VERIFY_TREE=
# The work tree as the last verify run left it, when that is the tree it checked (its changes
# and new files put back: evidence_checks_settle), and the iteration it ran in: nothing but the runner
# has run in the workspace since, so that tree is the one the iteration ends on (no second
# snapshot of the same files).
VERIFY_SETTLED=
VERIFY_SETTLED_ITER=0
# checks_verify_settled_clear: an iteration starts or an agent runs: the work tree is no longer known.
checks_verify_settled_clear() {
  VERIFY_SETTLED='' VERIFY_SETTLED_ITER=0
}
# The name a verify run's own failure is recorded under when a check changed the project.
readonly CHECK_CHANGED_NAME=project-changed-by-checks
# What a fan-out's survivor's own checks established, in this iteration only
# (checks_reuse_from): its tree, how many of its verify runs (all passing) are still to be
# taken for the workspace's, the record directory that holds the last one, and its holdout
# and judge verdicts there. A check never runs twice on the same tree for the same purpose.
CHECKS_REUSE_TREE=
CHECKS_REUSE_RUNS=0
CHECKS_REUSE_DIR=
CHECKS_REUSE_HOLDOUT=
CHECKS_REUSE_JUDGE=
# checks_reuse_from TREE RUNS DIR HOLDOUT JUDGE: the survivor's results.
checks_reuse_from() {
  CHECKS_REUSE_TREE=$1 CHECKS_REUSE_RUNS=$2 CHECKS_REUSE_DIR=$3
  CHECKS_REUSE_HOLDOUT=$4 CHECKS_REUSE_JUDGE=$5
}

# checks_reuse_clear: no survivor's results: every check runs.
checks_reuse_clear() {
  CHECKS_REUSE_TREE='' CHECKS_REUSE_RUNS=0 CHECKS_REUSE_DIR='' CHECKS_REUSE_HOLDOUT='' CHECKS_REUSE_JUDGE=''
}

# checks_reusable TREE: status 0 when TREE, in the workspace, is the tree the survivor's
# checks ran on.
checks_reusable() {
  [[ -n $CHECKS_REUSE_TREE && $1 == "$CHECKS_REUSE_TREE" && $WS == "$WS_MAIN" ]]
}

# checks_reuse_verify DIR LABEL OUT: status 0 when this verify run is one the survivor's
# checks already made on this tree: its output (and tally) taken instead of running them
# again, said in verify.log.
checks_reuse_verify() {
  local dir=$1 label=$2 out=$3
  checks_reusable "$VERIFY_TREE" && ((CHECKS_REUSE_RUNS > 0)) || return 1
  [[ -f $CHECKS_REUSE_DIR/verify.pass.out && -f $CHECKS_REUSE_DIR/verify.pass.tally ]] || return 1
  cp -f -- "$CHECKS_REUSE_DIR/verify.pass.out" "$out" || return 1
  cp -f -- "$CHECKS_REUSE_DIR/verify.pass.tally" "$VERIFY_TALLY_FILE" || return 1
  CHECKS_REUSE_RUNS=$((CHECKS_REUSE_RUNS - 1))
  counts_take "$dir" "$label"
  {
    orbit_iso_v -1
    printf '### verify run: %s (%s)\n' "$label" "$REPLY"
    printf '[orbit] not run again: the survivor'"'"'s checks passed on this same tree (%s) in its worktree (%s/verify.log); their last output:\n' \
      "${VERIFY_TREE:0:12}" "${CHECKS_REUSE_DIR#"$LOOP_DIR"/iterations/*/}"
    cat -- "$out"
  } >>"$dir/verify.log"
  VERIFY_RC=0 VERIFY_TO=0 VERIFY_OK=1
  LAST_VERIFY_OUT=$out
  return 0
}

# checks_failed_restore FAILING KEPT: an earlier failed run's outcome made the last run's
# again (a run since passed, to tell what that failure was): its output, a copy at KEPT, and
# its failing checks FAILING.
checks_failed_restore() {
  cp -- "$2" "$LAST_VERIFY_OUT"
  VERIFY_OK=0 VERIFY_FAILING=$1
}

# How much of one CPU the last verify run used, in thousandths: its processes' CPU time (this
# shell's waited-for children, from /proc) over its wall time (EPOCHREALTIME); empty until a
# run is measured (not Linux, bash before 5). The fan-out runs every candidate's checks at
# once when theirs together fit the CPUs (fanout_check_jobs_v).
CHECKS_CPU=
# checks_cpu_is THOUSANDTHS: the last verify runs (a fan-out's candidates', in their
# subshells) used that much of one CPU at most.
checks_cpu_is() {
  CHECKS_CPU=$1
}
# checks_cpu [SINCE]: REPLY is "CPU_MS WALL_MS" now (empty where not measured); with SINCE,
# an earlier REPLY, CHECKS_CPU is the share of one CPU used between the two.
checks_cpu() {
  local s
  local -a f=()
  REPLY=
  [[ -n ${EPOCHREALTIME:-} ]] && { IFS= read -r s <"/proc/$BASHPID/stat"; } 2>/dev/null || return 0
  read -r -a f <<<"${s##*) }"
  [[ ${f[13]:-x}${f[14]:-x} =~ ^[0-9]+$ ]] || return 0
  # Clock ticks are hundredths of a second (USER_HZ), the clock microseconds.
  REPLY="$(((f[13] + f[14]) * 10)) $((${EPOCHREALTIME//[!0-9]/} / 1000))"
  [[ -n ${1:-} ]] || return 0
  s=$((${REPLY#* } - ${1#* }))
  ((s <= 0)) || CHECKS_CPU=$(((${REPLY% *} - ${1% *}) * 1000 / s))
}

# checks_not_run DIR OUT WHY: a verify run that could not start, failed for WHY, into OUT
# and DIR's verify.log.
checks_not_run() {
  printf '[FAIL] verify.sh (not run: %s)\n0 passed, 1 failed\n' "$3" >"$2"
  cat -- "$2" >>"$1/verify.log"
}

# checks_run_verify N LABEL: runs verify.sh into iterations/N/verify.log; sets VERIFY_OK.
checks_run_verify() {
  local dir=$1 label=$2 out
  out="$ORBIT_TMP/verify.out"
  VERIFY_OK=0 VERIFY_RC=1 VERIFY_TO=0 VERIFY_SETTLED='' VERIFY_SETTLED_ITER=0
  LAST_VERIFY_OUT=$out
  counts_reset
  rm -f -- "$out"
  : >"$out"
  if [[ -n $TRUST_BAD ]] || ! trust_check runner; then
    orbit_log "the loop directory or git's control files changed before the checks ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  # The tree the checks run on (git runs only once git's files are known as they were):
  # what the checks change of it is not theirs to change.
  evidence_artifacts_sweep "$dir"
  # The repository's pre-commit hook first: what a fixer changes is the tree checked.
  commit_hooks_check "$dir" "$out"
  if ! tree_here_v; then
    checks_not_run "$dir" "$out" "git could not take the tree to check; see runner.log"
    return 0
  fi
  VERIFY_TREE=$REPLY
  # The tally is this run's alone: a run that does not start leaves it empty, never the
  # last run's lines.
  VERIFY_TALLY_FILE=$ORBIT_TMP/verify.tally
  : >"$VERIFY_TALLY_FILE"
  if ((!COMMIT_HOOK_REFUSED)) && checks_reuse_verify "$dir" "$label" "$out"; then
    return 0
  fi
  trust_hold_loop
  local budget cut=0
  deadline_cap_v "$VERIFY_BUDGET_S" || cut=1
  budget=$REPLY
  if ((budget <= 0)); then
    deadline_hit
    checks_not_run "$dir" "$out" "the loop's wall-clock limit, $LOOP_TIMEOUT, is reached"
    return 0
  fi
  sandbox_prepare check
  checks_cpu
  local cpu=$REPLY
  ORBIT_VERIFY_FOR="$LOOP_DIR" ORBIT_REPO_ROOT="$WS" \
    ORBIT_VERIFY_TMP="$ORBIT_TMP" ORBIT_VERIFY_TALLY=6 ORBIT_BASE_COUNTS="$BASE_COUNTS" \
    proc_run_bounded "$budget" "$KILL_GRACE_S" /dev/null "$out" "${SANDBOX_ARGV[@]}" "$BASH" "$LOOP_DIR/verify.sh" 6>"$VERIFY_TALLY_FILE"
  [[ -z $cpu ]] || checks_cpu "$cpu"
  VERIFY_RC=$ORBIT_RC
  VERIFY_TO=$ORBIT_TIMED_OUT
  if ((VERIFY_TO && cut)); then
    deadline_hit
  fi
  if ! trust_check check; then
    orbit_log "the checks changed $TRUST_BAD ($TRUST_REASON): their verdict is not taken"
    VERIFY_RC=1
    return 0
  fi
  # The counts first: they are read from verify.sh's own closing block.
  counts_take "$dir" "$label"
  if ! evidence_checks_settle "$dir" "$VERIFY_TREE"; then
    printf '[FAIL] %s (the work tree could not be put back to the tree the checks ran on; see runner.log)\n' "$CHECK_CHANGED_NAME" >>"$out"
    printf 'FAIL %s\n' "$CHECK_CHANGED_NAME" >>"$VERIFY_TALLY_FILE"
    VERIFY_RC=1
  else
    if ((COMMIT_HOOK_REFUSED)); then
      printf 'FAIL %s\n' "$COMMIT_HOOK_CHECK" >>"$VERIFY_TALLY_FILE"
      VERIFY_RC=1
    fi
    if [[ -n $CHECKS_CHANGED ]]; then
      printf '[FAIL] %s (a check changed the project it was checking: %s; put back as it was)\n' "$CHECK_CHANGED_NAME" "$CHECKS_CHANGED" >>"$out"
      printf 'FAIL %s\n' "$CHECK_CHANGED_NAME" >>"$VERIFY_TALLY_FILE"
      VERIFY_RC=1
    fi
    if [[ $WS == "$WS_MAIN" && -z $VERIFY_SCRATCH ]]; then
      VERIFY_SETTLED=$VERIFY_TREE VERIFY_SETTLED_ITER=$CUR_ITER
    fi
  fi
  {
    orbit_iso_v -1
    printf '### verify run: %s (%s)\n' "$label" "$REPLY"
    cat -- "$out"
    if ((VERIFY_TO)); then
      printf '[FAIL] verify.sh (timed out after %ss)\n' "$budget"
    fi
  } >>"$dir/verify.log"
  VERIFY_OK=0
  if ((VERIFY_RC == 0 && VERIFY_TO == 0)); then
    VERIFY_OK=1
  fi
  LAST_VERIFY_OUT=$out
  return 0
}
LAST_VERIFY_OUT=

# The runner's own tally of the last verify run (verify.sh's fd 6): "PASS NAME" or "FAIL NAME
# WHY" per check (WHY: "exit N", "timed out ...", or "cannot-run: ..." when the check could
# not run at all), never the checks' output.
VERIFY_TALLY_FILE=
# checks_tally_counts_v: REPLY is "PASSED TOTAL" of the last verify run, from the tally. verify.sh
# writes one line per check in CHECK_NAMES order (a run cut short, a prefix of them); the
# runner may add its own FAIL line. Any other shape was not written by verify.sh alone: no
# check counts as passed (and the log says so).
checks_tally_counts_v() {
  local word name passed=0 total=${#CHECK_NAMES[@]} k=0 bad=''
  if [[ -f $VERIFY_TALLY_FILE && ! -L $VERIFY_TALLY_FILE ]]; then
    while read -r word name _; do
      if ((k < ${#CHECK_NAMES[@]})) && [[ $name == "${CHECK_NAMES[k]}" && ($word == PASS || $word == FAIL) ]]; then
        [[ $word == FAIL ]] || passed=$((passed + 1))
        k=$((k + 1))
      elif [[ $word == FAIL && ($name == "$CHECK_CHANGED_NAME" || $name == "$COMMIT_HOOK_CHECK") ]]; then
        total=$((total + 1))
      else
        bad=$name
        break
      fi
    done <"$VERIFY_TALLY_FILE"
  fi
  if [[ -n $bad ]]; then
    orbit_log "the checks' tally holds a line verify.sh did not write (${bad//[[:cntrl:]]/?}): no check of that run counts as passed"
    passed=0
  fi
  REPLY="$passed $total"
}

# checks_role_v NAME: REPLY is the role of verify.sh's check NAME: reproduction, regression or
# acceptance.
checks_role_v() {
  local c
  REPLY=acceptance
  for c in "${CHECKS_REPRODUCTION[@]}"; do
    [[ $c == "$1" ]] && REPLY=reproduction
  done
  for c in "${CHECKS_REGRESSION[@]}"; do
    [[ $c == "$1" ]] && REPLY=regression
  done
  return 0
}

# checks_feedback_write DIR N ATTEMPT: the localized feedback of the verify run in LAST_VERIFY_OUT.
# It names the roles that failed (failing_roles) and, in feedback.txt, each failing check
# with what its failure means: a regression broke, a reproduction still fails, an acceptance
# check fails. The tests, the loci and the output tail are read from the failing checks'
# own output (feedback_failing_output), never from what a passing check printed after
# them; the loci start with where the failing tests panicked, then every other file:line.
checks_feedback_write() {
  local dir=$1 n=$2 attempt=$3 failing tailtext loci name j_failing='' j_loci='' sig
  local j_roles='' roles=' ' role_lines='' own="$ORBIT_TMP/verify.failing"
  failing=$(grep -aoE '^\[FAIL\] [A-Za-z0-9._-]+' -- "$LAST_VERIFY_OUT" | cut -c8- | sort -u | tr '\n' ' ' || true)
  failing=${failing% }
  feedback_failing_output "$LAST_VERIFY_OUT" "$own"
  tailtext=$(tail -n 30 -- "$own" | orbit_clean_text | cut -c1-400)
  # The failing tests and their assertions, where the output shows a test tool's format.
  local -a tests=() asserts=() panics=()
  local j_tests='' j_asserts='' line
  feedback_tests_v "$own"
  while IFS= read -r line; do
    case $line in
      T$'\t'*) tests+=("${line#T$'\t'}") ;;
      A$'\t'*) asserts+=("${line#A$'\t'}") ;;
      L$'\t'*) panics+=("${line#L$'\t'}") ;;
    esac
  done <<<"$REPLY"
  # A panic's file:line:column first; a file:line found again where it panicked is not
  # said twice.
  loci=$( {
    printf 'P\t%s\n' "${panics[@]}"
    grep -aoE '[A-Za-z0-9_./-]+\.[A-Za-z0-9]{1,8}:[0-9]{1,7}' -- "$own" | grep -v '^/' | awk '{ print "G\t" $0 }'
  } | awk -F '\t' '
    $1 == "P" && $2 != "" { if (!($2 in seen)) { seen[$2] = 1; k = $2; sub(/:[0-9]+$/, "", k); seen[k] = 1; print $2 } next }
    $1 == "G" && !($2 in seen) { seen[$2] = 1; print $2 }
  ' | head -n 20 || true)
  for name in $failing; do
    j_failing+="${j_failing:+,}$(orbit_json_str "$name")"
    checks_role_v "$name"
    if [[ $roles != *" $REPLY "* ]]; then
      roles+="$REPLY "
      j_roles+="${j_roles:+,}\"$REPLY\""
    fi
    case $REPLY in
      regression) role_lines+="a regression check broke: $name"$'\n' ;;
      reproduction) role_lines+="a reproduction check still fails: $name"$'\n' ;;
      *) role_lines+="an acceptance check fails: $name"$'\n' ;;
    esac
  done
  while IFS= read -r name; do
    if [[ -n $name ]]; then
      j_loci+="${j_loci:+,}$(orbit_json_str "$name")"
    fi
  done <<<"$loci"
  for line in "${tests[@]}"; do
    orbit_json_v "$line"
    j_tests+="${j_tests:+,}$REPLY"
  done
  for line in "${asserts[@]}"; do
    orbit_json_v "$line"
    j_asserts+="${j_asserts:+,}$REPLY"
  done
  printf '{"failing":[%s],"failing_roles":[%s],"tests":[%s],"assertions":[%s],"loci":[%s],"output_tail":%s,"attempt":%s,"iteration":%s}\n' \
    "$j_failing" "$j_roles" "$j_tests" "$j_asserts" "$j_loci" "$(orbit_json_str "$tailtext")" "$attempt" "$n" >"$dir/feedback.json"
  {
    printf 'Failing checks: %s\n' "${failing:-verify.sh}"
    printf '%s' "$role_lines"
    counts_feedback_v
    printf '%s' "$REPLY"
    if ((${#tests[@]})); then
      printf 'Failing tests:\n'
      printf '    - %s\n' "${tests[@]}"
    fi
    if ((${#asserts[@]})); then
      printf 'What they asserted:\n'
      printf '    - %s\n' "${asserts[@]}"
    fi
    if [[ -n $loci ]]; then
      printf 'Locations: %s\n' "$(printf '%s' "$loci" | tr '\n' ' ')"
    fi
    printf 'Output (last lines):\n\n'
    printf '%s\n' "$tailtext" | sed 's/^/    /'
  } >"$dir/feedback.txt"
  sig=$( {
    printf '%s\n' "$failing"
    printf '%s\n' "$tailtext" | tr '0-9' '#'
  } | orbit_sha256_stdin)
  VERIFY_FAILING=${failing// /,}
  VERIFY_SIG=$sig
}
