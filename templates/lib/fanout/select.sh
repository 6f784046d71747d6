# ---- fan-out: the survivor. What each candidate did is read back from its trusted record,
# ---- judged by what the runner observed itself (its tally, its tree), and the survivor's
# ---- change applied to the workspace.

# fanout_record_trusted N K FILE: FILE is candidate K's record of iteration N as the runner
# wrote it (the journal's candidate_end names its sha256) and its ref still holds its commit.
fanout_record_trusted() {
  local want line
  line=$(grep -aF -- "\"event\":\"candidate_end\",\"iteration\":$1,\"candidate\":$2," "$EV_FILE" 2>/dev/null | tail -n 1 || true)
  resume_event_field_v "$line" sha256
  want=$REPLY
  [[ -n $want ]] && orbit_regular "$3" || return 1
  orbit_sha256_file_v "$3"
  [[ $REPLY == "$want" ]] || return 1
  fanout_read "$3"
  fanout_ref_v "$1" "$2"
  [[ ${C[COMMIT]} =~ ^[0-9a-f]{40,64}$ && $(config_git_q rev-parse -q --verify "$REPLY" 2>/dev/null || true) == "${C[COMMIT]}" ]]
}

# The keys of a candidate's record (candidate.env), the numeric ones checked when read.
FANOUT_KEYS=(CANDIDATE ITERATION OUTCOME EXIT ATTEMPTS SECONDS COST_MICROUSD TREE COMMIT CHANGED CHECKS_PASSED CHECKS_TOTAL PASS_K_RUNS HOLDOUT JUDGE DISQUALIFIED DONE_CLAIM CHECK_CPU)
FANOUT_NUMERIC=' CANDIDATE ITERATION EXIT ATTEMPTS SECONDS COST_MICROUSD CHANGED CHECKS_PASSED CHECKS_TOTAL PASS_K_RUNS DONE_CLAIM '
declare -A C=()

# fanout_read FILE: a candidate record into C, never sourced (as record_result_read).
fanout_read() {
  local line k v
  C=()
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line == *=* ]] || continue
    k=${line%%=*} v=${line#*=}
    [[ -n $k && " ${FANOUT_KEYS[*]} " == *" $k "* ]] || continue
    if [[ $FANOUT_NUMERIC == *" $k "* ]] && ! orbit_is_uint "$v"; then
      v=0
    fi
    C[$k]=$v
  done <"$1"
  for k in CHANGED CHECKS_PASSED CHECKS_TOTAL PASS_K_RUNS CANDIDATE; do
    orbit_is_uint "${C[$k]:-}" || C[$k]=0
  done
}

# What the runner found of each candidate after its runs, before its checks (fanout_look):
# the tree it is judged on, why it is disqualified ("" for not), whether it claimed DONE, and
# whether its checks run (neither disqualified nor stopped).
declare -A FANOUT_LOOK_TREE=() FANOUT_LOOK_BAD=() FANOUT_LOOK_CLAIM=() FANOUT_LOOK_CHECK=()

# fanout_look N K DIR BASE_TREE: the runner's own look at candidate K after its runs (its
# run's record in C): its tree, whether it changed a pinned or protected path (disqualified),
# its claim and notes taken out of its folder. Status 1 when its worktree changed after its
# runs ended (TRUST_BAD set: another candidate wrote it).
fanout_look() {
  local n=$1 k=$2 cdir=$3 base=$4 cws tree bad='' claim=0
  fanout_ws_v "$k"
  cws=$REPLY
  if ! fanout_intact "$cws"; then
    bad="its worktree $cws is not the worktree the runner made"
    tree=$base
  else
    fanout_tree_v "$k"
    tree=$REPLY
    [[ $tree =~ ^[0-9a-f]{40,64}$ ]] || orbit_die "$EXIT_BLOCKED" "cannot snapshot the candidate worktree $cws (see runner.log)"
    # Its worktree changed after its own runs ended: another candidate (or what one left
    # running) wrote it. Tampering, as a write to the loop directory during the fan-out: it
    # is never judged on that tree.
    if [[ -n ${C[END_TREE]:-} && $tree != "${C[END_TREE]}" ]]; then
      trust_broken "$cws" "$REASON_LOOP_TAMPER" "the tree candidate $k's runs left (${C[END_TREE]:0:12})" \
        "another tree (${tree:0:12}), written after candidate $k's runs ended"
      orbit_log "candidate $k's worktree $cws changed after its runs ended (another candidate wrote it?): it is not judged on that tree"
      return 1
    fi
    fanout_protected_v "$base" "$tree"
    if [[ -n $REPLY ]]; then
      bad="it changed the protected path $REPLY"
    fi
  fi
  # The claim and the notes, out of its folder (regular files only, bounded).
  if agent_dir_file_take done.md "$cdir/done.md.claim" "$cws/.orbit-agent"; then
    claim=1
  fi
  agent_dir_file_take notes.md "$cdir/notes.md" "$cws/.orbit-agent" || true
  FANOUT_LOOK_TREE[$k]=$tree FANOUT_LOOK_BAD[$k]=$bad FANOUT_LOOK_CLAIM[$k]=$claim FANOUT_LOOK_CHECK[$k]=0
  if [[ -z $bad && ${C[OUTCOME]:-} != "$OUTCOME_STOPPED" ]]; then
    FANOUT_LOOK_CHECK[$k]=1
  fi
  return 0
}

# fanout_judge N K DIR BASE_COMMIT BASE_TREE: candidate K as the runner found it
# (fanout_look) and as its checks left it (fanout_check_take_v: verify.sh PASS_K runs when
# all pass, then the holdout checks and the judge when configured): its ref, its record
# (candidate.env) and the journal's candidate_end. A candidate the runner stopped (C[OUTCOME]
# stopped) or disqualified is recorded with its change, unchecked.
fanout_judge() {
  local n=$1 k=$2 cdir=$3 commit=$4 base=$5 tree c bad passed=0 total=0 runs=0 hold='' judge='' claim cpu=''
  local text='' key
  local -a got=()
  tree=${FANOUT_LOOK_TREE[$k]:-$base} bad=${FANOUT_LOOK_BAD[$k]-} claim=${FANOUT_LOOK_CLAIM[$k]:-0}
  if ((${FANOUT_LOOK_CHECK[$k]:-0})); then
    fanout_check_take_v "$k" "$cdir" ||
      orbit_die "$EXIT_BLOCKED" "candidate $k's checks ended without saying how they went (see runner.log); run the loop again to check it again"
    read -r -a got <<<"$REPLY"
    passed=${got[0]} total=${got[1]} runs=${got[2]} hold=${got[3]/#-/} judge=${got[4]/#-/} cpu=${got[5]/#-/}
  fi
  c=$(config_git_q commit-tree "$tree" -p "$commit" -m "orbit($LOOP_NAME): iteration $n, candidate $k"$'\n\n'"Orbit-Loop: $LOOP_NAME"$'\n'"Orbit-Iteration: $n"$'\n'"Orbit-Candidate: $k" 2>>"$ORBIT_LOG_FILE") ||
    orbit_die "$EXIT_BLOCKED" "cannot keep candidate $k's change as a commit (see runner.log)"
  fanout_ref_v "$n" "$k"
  config_git_q update-ref -m "orbit: candidate $k of iteration $n" "$REPLY" "$c" 2>>"$ORBIT_LOG_FILE" ||
    orbit_die "$EXIT_BLOCKED" "cannot write the ref $REPLY (see runner.log)"
  tree_changes_v "$base" "$tree"
  C[CANDIDATE]=$k C[ITERATION]=$n C[TREE]=$tree C[COMMIT]=$c C[CHANGED]=$CHANGES_COUNT
  C[CHECKS_PASSED]=$passed C[CHECKS_TOTAL]=$total C[PASS_K_RUNS]=$runs C[HOLDOUT]=$hold C[JUDGE]=$judge
  C[DISQUALIFIED]=${bad//[$'\n\r']/ } C[DONE_CLAIM]=$claim C[CHECK_CPU]=$cpu
  for key in "${FANOUT_KEYS[@]}"; do
    text+="$key=${C[$key]:-}"$'\n'
  done
  state_write_file "$cdir/candidate.env" "$text" || orbit_die "$EXIT_STATE_CORRUPT" "cannot write $cdir/candidate.env"
  orbit_sha256_str_v "$text"
  state_event candidate_end "$n" candidate "$k" outcome "${C[OUTCOME]}" checks_passed "$passed" checks_total "$total" \
    pass_k_runs "$runs" holdout "$hold" judge "$judge" changed "${C[CHANGED]}" disqualified "${C[DISQUALIFIED]}" commit "$c" sha256 "$REPLY" \
    check_cpu "$cpu"
  if [[ -n $bad ]]; then
    orbit_log "iteration $n: candidate $k disqualified: $bad"
  fi
  return 0
}

# fanout_run_read CDIR: C holds what a candidate's runs left (run.env, written by the runner
# when they ended).
fanout_run_read() {
  local j line
  C=()
  while IFS='=' read -r j line; do
    case $j in
      OUTCOME) [[ $line =~ ^[a-z_]{1,32}$ ]] && C[OUTCOME]=$line ;;
      EXIT | ATTEMPTS | SECONDS | COST_MICROUSD) orbit_is_uint "$line" && C[$j]=$line ;;
    esac
  done <"$1/run.env"
}

# fanout_passes_all: the record in C passes everything survivor selection weighs: not
# disqualified nor stopped, every check passing PASS_K times, the holdout and the judge (when
# configured) not failed.
fanout_passes_all() {
  [[ -z ${C[DISQUALIFIED]:-} && ${C[OUTCOME]:-} != "$OUTCOME_STOPPED" ]] &&
    ((C[CHECKS_TOTAL] > 0 && C[CHECKS_PASSED] == C[CHECKS_TOTAL] && C[PASS_K_RUNS] >= PASS_K)) &&
    [[ ${C[HOLDOUT]:-} != "$VERIFY_FAIL" && ${C[JUDGE]:-} != "$VERIFY_FAIL" ]]
}

# fanout_select N: SURVIVOR (0: none qualified) and SURVIVOR_WHY from the candidates'
# records, in the contract's order: qualified (neither disqualified nor stopped), the most
# checks passing, then PASS_K passes, then the holdout, then the judge, then the smallest
# change, then the lowest number.
SURVIVOR=0
SURVIVOR_WHY=
fanout_select() {
  local n=$1 k dir best='' second='' key why h j
  local -a keys=() b=() s=()
  printf -v dir '%s/iterations/%06d/candidates' "$LOOP_DIR" "$n"
  SURVIVOR=0 SURVIVOR_WHY='every candidate was disqualified'
  for ((k = 1; k <= FANOUT_N; k++)); do
    [[ -f $dir/$k/candidate.env ]] || continue
    fanout_read "$dir/$k/candidate.env"
    [[ -z ${C[DISQUALIFIED]} && ${C[OUTCOME]:-} != "$OUTCOME_STOPPED" ]] || continue
    h=0 j=0
    [[ ${C[HOLDOUT]} == "$VERIFY_FAIL" ]] || h=1
    [[ ${C[JUDGE]:-} == "$VERIFY_FAIL" ]] || j=1
    # One sortable key per candidate: higher is better in every field.
    printf -v key '%04d %04d %d %d %09d %02d %d' "${C[CHECKS_PASSED]}" "${C[PASS_K_RUNS]}" "$h" "$j" \
      $((999999999 - C[CHANGED])) $((99 - k)) "$k"
    keys+=("$key")
  done
  ((${#keys[@]})) || return 0
  mapfile -t keys < <(printf '%s\n' "${keys[@]}" | LC_ALL=C sort -r)
  best=${keys[0]}
  SURVIVOR=${best##* }
  read -r -a b <<<"$best"
  if ((${#keys[@]} == 1)); then
    SURVIVOR_WHY='the only candidate not disqualified'
  else
    second=${keys[1]}
    read -r -a s <<<"$second"
    if [[ ${b[0]} != "${s[0]}" ]]; then
      why="the most checks passing ($((10#${b[0]})) against $((10#${s[0]})))"
    elif [[ ${b[1]} != "${s[1]}" ]]; then
      why="the most PASS_K passes ($((10#${b[1]})) against $((10#${s[1]})))"
    elif [[ ${b[2]} != "${s[2]}" ]]; then
      why='the holdout checks passed'
    elif [[ ${b[3]} != "${s[3]}" ]]; then
      why='the judge approved it'
    elif [[ ${b[4]} != "${s[4]}" ]]; then
      why="the smallest change ($((999999999 - 10#${b[4]})) file(s) against $((999999999 - 10#${s[4]})))"
    else
      why='a tie: the lowest candidate number'
    fi
    SURVIVOR_WHY=$why
  fi
}

# fanout_apply TREE: the workspace's work tree becomes TREE (the survivor's), through the
# snapshot's private index: only the paths that differ are written. Status 1 when the
# workspace does not hold exactly TREE afterwards.
fanout_apply() {
  local want=$1 now
  tree_snapshot
  now=$REPLY
  if [[ $now != "$want" ]]; then
    GIT_INDEX_FILE=$LOOP_DIR/.tree-index git -C "$WS" read-tree -m -u "$now" "$want" >>"$ORBIT_LOG_FILE" 2>&1 || return 1
  fi
  tree_snapshot
  [[ $REPLY == "$want" ]]
}

# fanout_budget N: an iteration whose N runs would take the spend past USD_CAP at the
# estimated cost of a run does not start (budget, PAUSED). The estimate of one run is the
# mean reported cost of the loop's earlier runs, else COST_ESTIMATE_USD; with neither, none
# (the spend gate after each iteration still holds).
fanout_budget() {
  local est
  [[ -n $USD_CAP_M ]] || return 0
  est=$(awk -F '\t' '$3 == "reported" && $2 ~ /^[0-9]+$/ { s += $2; c++ } END { if (c) printf "%d", s / c; else print "" }' \
    "$LOOP_DIR/cost.ledger" 2>/dev/null || true)
  [[ $est =~ ^[0-9]+$ ]] || est=${COST_ESTIMATE_M:-0}
  ((est > 0)) || return 0
  if ((S[COST_MICROUSD] + est * FANOUT_N > USD_CAP_M)); then
    resume_finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "spent \$$(orbit_usd_text "${S[COST_MICROUSD]}") of the \$$(orbit_usd_text "$USD_CAP_M") cap; the next iteration's $FANOUT_N candidates would cost about \$$(orbit_usd_text $((est * FANOUT_N))) (\$$(orbit_usd_text "$est") a run) and cross it: raise USD_CAP, or lower candidates, to go on"
  fi
}

# fanout_survivor_checks CDIR: the survivor's checks (its record in C) ran on the tree now
# in the workspace: what passed there PASS_K times is not run again there.
fanout_survivor_checks() {
  if ((C[CHECKS_TOTAL] > 0 && C[CHECKS_PASSED] == C[CHECKS_TOTAL] && C[PASS_K_RUNS] >= PASS_K)); then
    checks_reuse_from "${C[TREE]}" "$PASS_K" "$1" "${C[HOLDOUT]-}" "${C[JUDGE]-}"
  fi
}

# fanout_probe K N BASE_TREE: status 0 when candidate K, whose runs have ended, passes
# everything survivor selection weighs (no pinned or protected path changed, every check
# PASS_K times, the holdout, the judge): with fanout-early-stop, whether the others are
# stopped. Only that: a look in a subshell that writes nothing but its own scratch
# (.run-tmp/probe.K) while the other candidates still run: no record, no event (its events
# go nowhere: state_event_sink). Every candidate is judged for the record (fanout_judge) once
# all runs have ended, so what the probe saw is never evidence; the loop directory is
# compared, for the record, once every run has ended too (trust_defer).
fanout_probe() {
  (
    trap - ERR
    state_event_sink /dev/null
    trust_defer
    fanout_probe_look "$@"
  ) >/dev/null 2>>"$ORBIT_LOG_FILE"
}
# fanout_probe_look K N BASE_TREE: fanout_probe's look (in its subshell).
fanout_probe_look() {
  local k=$1 n=$2 base=$3 cws sc=$ORBIT_TMP/probe.$1
  rm -rf -- "$sc"
  mkdir -- "$sc"
  fanout_ws_v "$k"
  cws=$REPLY
  fanout_intact "$cws" || return 1
  fanout_tree_v "$k" "$sc/index"
  [[ $REPLY =~ ^[0-9a-f]{40,64}$ ]] || return 1
  fanout_protected_v "$base" "$REPLY"
  [[ -z $REPLY ]] || return 1
  # The checks run in the candidate's worktree.
  fanout_checks_in "$cws" "$sc" fanout_probe_checks "$n" "$sc"
}

# fanout_probe_checks N SCRATCH: the probe's checks (in the candidate's worktree:
# fanout_checks_in): status 0 when verify.sh passes PASS_K times, the holdout and the judge too.
fanout_probe_checks() {
  local n=$1 sc=$2 r
  for ((r = 1; r <= PASS_K; r++)); do
    checks_run_verify "$sc" "probe"
    ((VERIFY_OK)) || return 1
  done
  if ((HOLDOUT_CHECKS > 0)); then
    holdout_run "$n" "$sc"
    ((HOLDOUT_OK)) || return 1
  fi
  if [[ -n $JUDGE_CMD ]]; then
    judge_run "$n" "$sc"
    ((JUDGE_OK)) || return 1
  fi
  return 0
}

# fanout_survivor N DIR BASE_TREE: the survivor selected and journalled, its change applied
# to the workspace (none: the workspace stays at the base), its prompt, log, claim and notes
# the iteration's, its run FANOUT_RUN.
fanout_survivor() {
  local n=$1 dir=$2 base=$3 cdir
  fanout_select "$n"
  if ((FANOUT_PASSER > 0 && SURVIVOR == FANOUT_PASSER)); then
    SURVIVOR_WHY='the first to pass everything; the others were stopped (fanout-early-stop)'
  fi
  printf '%s\n' "$SURVIVOR" >"$dir/survivor.txt"
  if ! grep -qF -- "\"event\":\"survivor_selected\",\"iteration\":$n," "$EV_FILE" 2>/dev/null; then
    state_event survivor_selected "$n" candidate "$SURVIVOR" of "$FANOUT_N" reason "$SURVIVOR_WHY"
  fi
  orbit_log "iteration $n: survivor: candidate $SURVIVOR ($SURVIVOR_WHY)"
  state_fault fanout_before_apply
  rm -rf -- "$AGENT_DIR"
  mkdir -- "$AGENT_DIR"
  if ((SURVIVOR == 0)); then
    # Nothing is applied: the workspace stays at the base, the iteration an agent error.
    fanout_apply "$base" || orbit_die "$EXIT_BLOCKED" "cannot put the workspace back to the base tree $base (see runner.log)"
    FANOUT_RUN[ATTEMPTS]=1 FANOUT_RUN[EXIT]=1 FANOUT_RUN[SECONDS]=0
    cp -f -- "$dir/candidates/1/prompt.md" "$dir/prompt.md" 2>/dev/null || true
    printf 'orbit: every candidate of iteration %s was disqualified (see candidates/*/candidate.env)\n' "$n" >"$dir/agent.log"
    return 0
  fi
  cdir=$dir/candidates/$SURVIVOR
  fanout_read "$cdir/candidate.env"
  if ! fanout_apply "${C[TREE]}"; then
    orbit_die "$EXIT_BLOCKED" "cannot apply candidate $SURVIVOR's change (${C[TREE]}) to the workspace (see runner.log)"
  fi
  cp -f -- "$cdir/prompt.md" "$dir/prompt.md"
  cp -f -- "$cdir/agent.log" "$dir/agent.log" 2>/dev/null || : >"$dir/agent.log"
  if [[ -f $cdir/done.md.claim ]]; then
    cp -f -- "$cdir/done.md.claim" "$AGENT_DIR/done.md"
  fi
  if [[ -f $cdir/notes.md ]]; then
    cp -f -- "$cdir/notes.md" "$LOOP_DIR/notes.md"
  fi
  fanout_survivor_checks "$cdir"
  FANOUT_RUN[ATTEMPTS]=${C[ATTEMPTS]:-1} FANOUT_RUN[EXIT]=${C[EXIT]:-0} FANOUT_RUN[SECONDS]=${C[SECONDS]:-0}
  orbit_is_uint "${FANOUT_RUN[ATTEMPTS]}" || FANOUT_RUN[ATTEMPTS]=1
  FANOUT_RUN[OUTCOME]=${C[OUTCOME]:-$OUTCOME_AGENT_ERROR}
  state_fault fanout_after_apply
}
