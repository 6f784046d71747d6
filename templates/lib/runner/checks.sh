# ---- verify
# What the last verify run found: it passed (VERIFY_OK), its exit status, whether its bound
# stopped it, the failing checks and their signature.
VERIFY_OK=0
VERIFY_RC=1
VERIFY_TO=0
VERIFY_FAILING=
VERIFY_SIG=
# run_verify N LABEL: runs verify.sh into iterations/N/verify.log; sets VERIFY_OK.
run_verify() {
  local dir=$1 label=$2 out
  out="$ORBIT_TMP/verify.out"
  VERIFY_OK=0 VERIFY_RC=1 VERIFY_TO=0
  LAST_VERIFY_OUT=$out
  counts_reset
  rm -f -- "$out"
  : >"$out"
  if [[ -n $TRUST_BAD ]] || ! trust_check runner; then
    orbit_log "the loop directory or git's control files changed before the checks ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  local budget cut=0
  deadline_cap_v "$VERIFY_BUDGET_S" || cut=1
  budget=$REPLY
  if ((budget <= 0)); then
    deadline_hit
    printf '[FAIL] verify.sh (not run: the loop'"'"'s wall-clock limit, %s, is reached)\n0 passed, 1 failed\n' "$LOOP_TIMEOUT" >"$out"
    cat -- "$out" >>"$dir/verify.log"
    return 0
  fi
  sandbox_prepare check
  ORBIT_VERIFY_FOR="$LOOP_DIR" ORBIT_REPO_ROOT="$WS" \
    ORBIT_VERIFY_TMP="$ORBIT_TMP" ORBIT_BASE_COUNTS="$BASE_COUNTS" \
    orbit_run_bounded "$budget" "$KILL_GRACE_S" /dev/null "$out" "${SANDBOX_ARGV[@]}" "$BASH" "$LOOP_DIR/verify.sh"
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
  counts_take "$dir" "$label"
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

# check_role_v NAME: REPLY is the role of verify.sh's check NAME: reproduction, regression or
# acceptance.
check_role_v() {
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

# feedback_write DIR N ATTEMPT: the localized feedback of the verify run in LAST_VERIFY_OUT.
# It names the roles that failed (failing_roles) and, in feedback.txt, each failing check
# with what its failure means: a regression broke, a reproduction still fails, an acceptance
# check fails.
feedback_write() {
  local dir=$1 n=$2 attempt=$3 failing tailtext loci name j_failing='' j_loci='' sig
  local j_roles='' roles=' ' role_lines=''
  failing=$(grep -aoE '^\[FAIL\] [A-Za-z0-9._-]+' -- "$LAST_VERIFY_OUT" | cut -c8- | sort -u | tr '\n' ' ' || true)
  failing=${failing% }
  tailtext=$(tail -n 30 -- "$LAST_VERIFY_OUT" | orbit_clean_text | cut -c1-400)
  loci=$(grep -aoE '[A-Za-z0-9_./-]+\.[A-Za-z0-9]{1,8}:[0-9]{1,7}' -- "$LAST_VERIFY_OUT" | grep -v '^/' | awk '!seen[$0]++' | head -n 20 || true)
  for name in $failing; do
    j_failing+="${j_failing:+,}$(orbit_json_str "$name")"
    check_role_v "$name"
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
  # The failing tests and their assertions, where the output shows a test tool's format.
  local -a tests=() asserts=()
  local j_tests='' j_asserts='' line
  feedback_tests_v "$LAST_VERIFY_OUT"
  while IFS= read -r line; do
    case $line in
      T$'\t'*) tests+=("${line#T$'\t'}") ;;
      A$'\t'*) asserts+=("${line#A$'\t'}") ;;
    esac
  done <<<"$REPLY"
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
