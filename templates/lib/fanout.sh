# ---- fan-out (static, included verbatim after run-loop's functions): with CANDIDATES_SETTING
# ---- N > 1, an iteration starts N agent runs in parallel from the same base, each in its
# ---- own worktree (<workspace>.c<K>, reused and reset each iteration), judges each one
# ---- itself and applies the survivor's change to the workspace. The rest of the iteration
# ---- (verify in the workspace, the DONE gate, the commit, the record) is a single agent's.
# ---- What a candidate leaves (its worktree, its folder, its output) is evidence: the runner
# ---- computes every fact it judges by (the tree, the checks, the pins) itself. Rendered
# ---- into a loop of candidates > 1 only (lib/no-fanout.sh in the others).
FANOUT_N=1
# The candidates' pids (the subshells that run them), for on_signal.
declare -a FANOUT_PIDS=()
# Set inside a candidate's subshell: run_agent then writes nothing outside .run-tmp.
FANOUT_CAND=0

# fanout_ws_v K: REPLY is candidate K's worktree.
fanout_ws_v() { REPLY="$WS.c$1"; }

# fanout_ref_v N K: REPLY is the ref that keeps candidate K's change of iteration N.
fanout_ref_v() { REPLY="refs/orbit/$LOOP_NAME/$1/$2"; }

# fanout_intact CWS: the candidate worktree's .git is a file naming a worktree directory of
# this repository that is not the workspace's own (a candidate that points its .git at the
# workspace's would have the runner's reset land there). Status 1 otherwise.
fanout_intact() {
  local cws=$1 line='' gd
  [[ -d $cws && ! -L $cws && -f $cws/.git && ! -L $cws/.git ]] || return 1
  IFS= read -r line <"$cws/.git" 2>/dev/null || true
  [[ $line == "gitdir: "* ]] || return 1
  gd=${line#gitdir: }
  [[ $gd == "$GIT_COMMON_ABS/worktrees/"* && -d $gd && ! $gd -ef $GIT_DIR_ABS ]] || return 1
  line=''
  IFS= read -r line <"$gd/gitdir" 2>/dev/null || true
  [[ $line -ef $cws/.git ]]
}

# fanout_prepare K BASE_COMMIT BASE_TREE: candidate K's worktree exists and holds exactly
# BASE_TREE (created detached at BASE_COMMIT the first time; later a forced checkout and a
# clean, which touch only what changed, and ignored files such as build caches stay).
# Status 1 with PIN_BAD set when the worktree is not one the runner can trust.
fanout_prepare() {
  local k=$1 commit=$2 tree=$3 cws
  fanout_ws_v "$k"
  cws=$REPLY
  if [[ ! -e $cws && ! -L $cws ]]; then
    repo_git worktree add -q --detach --lock --reason "orbit loop $LOOP_DIR (candidate $k)" -- "$cws" "$commit" >>"$ORBIT_LOG_FILE" 2>&1 ||
      orbit_die "$EXIT_BLOCKED" "cannot create the candidate worktree $cws (see runner.log)"
    orbit_event candidate_worktree "$CUR_ITER" candidate "$k" path "$cws"
  fi
  if ! fanout_intact "$cws"; then
    PIN_BAD=$cws PIN_WANT="a worktree of $GIT_COMMON_ABS" PIN_HAVE='something else'
    return 1
  fi
  if ! git -C "$cws" checkout -q -f --detach "$commit" -- >>"$ORBIT_LOG_FILE" 2>&1 ||
    ! git -C "$cws" clean -q -f -d >>"$ORBIT_LOG_FILE" 2>&1; then
    orbit_die "$EXIT_BLOCKED" "cannot reset the candidate worktree $cws to $commit (see runner.log)"
  fi
  if [[ $(git -C "$cws" rev-parse "HEAD^{tree}") != "$tree" ]]; then
    # The workspace held changes not committed (autocommit off): the same start for all.
    git -C "$cws" read-tree -u --reset "$tree" >>"$ORBIT_LOG_FILE" 2>&1 ||
      orbit_die "$EXIT_BLOCKED" "cannot reset the candidate worktree $cws to the tree $tree (see runner.log)"
  fi
}

# fanout_tree_v K [INDEX]: REPLY is candidate K's work tree (minus the agent's folder) as a
# tree id, through a private index per candidate (seeded from the worktree's own, so each
# snapshot re-reads only what changed): the loop directory's .tree-index.c<K>, or INDEX.
fanout_tree_v() {
  local k=$1 cws idx=${2:-$LOOP_DIR/.tree-index.c$1} gd
  fanout_ws_v "$k"
  cws=$REPLY
  gd=$(git -C "$cws" rev-parse --absolute-git-dir 2>/dev/null || true)
  if [[ ! -f $idx && -n $gd && -f $gd/index ]]; then
    cp -p -- "$gd/index" "$idx"
  fi
  GIT_INDEX_FILE=$idx GIT_OPTIONAL_LOCKS=0 git -C "$cws" add -A -- . >/dev/null 2>>"$ORBIT_LOG_FILE"
  REPLY=$(GIT_INDEX_FILE=$idx git -C "$cws" write-tree 2>>"$ORBIT_LOG_FILE")
}

# fanout_protected_v BEFORE AFTER: REPLY is the first changed path between the two trees that
# is pinned (pins.sha256) or matched by a protect glob ("" when none).
fanout_protected_v() {
  local before=$1 after=$2 line p
  local -A pinned=()
  local -a specs=()
  REPLY=''
  while IFS= read -r line; do
    p=${line#*  }
    if [[ $p == "$WS/"* ]]; then
      pinned[${p#"$WS"/}]=1
    fi
  done <"$LOOP_DIR/pins.sha256"
  for p in "${PROTECT_GLOBS[@]}"; do
    specs+=(":(glob)$p")
  done
  while IFS= read -r -d '' p; do
    if [[ -n ${pinned[$p]-} ]]; then
      REPLY=$p
      return 0
    fi
  done < <(git_q diff --no-renames --name-only -z "$before" "$after" -- 2>/dev/null || true)
  if ((${#specs[@]})); then
    IFS= read -r -d '' REPLY < <(git_q diff --no-renames --name-only -z "$before" "$after" -- "${specs[@]}" 2>/dev/null || true) || true
  fi
  return 0
}

# fanout_agent K N DIR FB: the subshell of candidate K: its attempts (run_agent with the
# candidate's worktree, folder and scratch, same timeout, retries and sweep as a single
# run), one line per attempt on standard output for the runner:
#   A <attempt> <exit> <timed_out> <seconds> <micro_usd> <cost_kind> <outcome>
# then `E <deadline_hit>`. It writes nothing outside .run-tmp/c<K>/ (its siblings' checks of
# the loop directory would take it for tampering); the runner records everything after.
FANOUT_LINES=
FANOUT_OUT=
FANOUT_T0=0
fanout_agent() {
  local k=$1 n=$2 cdir=$3 fb=$4 attempt=0 outcome delay
  trap - ERR
  FANOUT_LINES='' FANOUT_T0=$SECONDS ATTEMPT=0
  exec {FANOUT_OUT}>&1
  trap 'fanout_agent_stop' INT TERM HUP
  FANOUT_CAND=$k
  ORBIT_FAULT=
  fanout_ws_v "$k"
  WS=$REPLY
  AGENT_DIR=$WS/.orbit-agent
  ORBIT_TMP="$ORBIT_TMP/c$k"
  ORBIT_CANDIDATE_N=$k
  {
    while ((attempt < RETRY_LIMIT)); do
      attempt=$((attempt + 1))
      ATTEMPT=$attempt FANOUT_T0=$SECONDS
      if [[ $attempt -gt 1 && -f $ORBIT_TMP/agent.log ]]; then
        mv -f -- "$ORBIT_TMP/agent.log" "$ORBIT_TMP/agent.attempt$((attempt - 1)).log"
      fi
      run_agent "$n" "$PHASE_WORK" "$attempt" "$cdir/prompt.md" "$ORBIT_TMP/agent.log" "$ORBIT_TMP/cost.usd" "$fb"
      [[ -f $ORBIT_TMP/agent.log ]] || : >"$ORBIT_TMP/agent.log"
      cost_of_run "$ORBIT_TMP/agent.log" "$ORBIT_TMP/cost.usd"
      # The engine's own classification (its structured output); the reset time it names
      # stays in this subshell: a fan-out paused by a limit looks again after the default.
      engine_classify_v "$ORBIT_TMP/agent.log" "$AGENT_RC" "$AGENT_TIMED_OUT"
      outcome=$REPLY
      FANOUT_LINES+="A $attempt $AGENT_RC $AGENT_TIMED_OUT $AGENT_SECS $RUN_COST_M $RUN_COST_KIND $outcome"$'\n'
      if [[ -n $TRUST_BAD ]] || ((DEADLINE_HIT)); then
        break
      fi
      case $outcome in
        "$OUTCOME_OK" | "$OUTCOME_PERMANENT" | "$OUTCOME_RATE_LIMITED") break ;;
      esac
      if ((attempt < RETRY_LIMIT)); then
        retry_delay_v "$attempt"
        delay=$REPLY
        if ((delay > 0)); then
          # In the background, so that a stop is taken at once, not after the delay.
          sleep "$delay" &
          wait "$!" || true
        fi
      fi
    done
  } >/dev/null 2>>"$ORBIT_LOG_FILE"
  printf '%sE %s\n' "$FANOUT_LINES" "$DEADLINE_HIT" 1>&"$FANOUT_OUT"
}

# fanout_agent_stop: a candidate's subshell signalled (the runner stops, or another candidate
# passed everything first): its agent's group is stopped; the attempt it cut short is
# reported as stopped, with the output caught so far as its log and its cost unknown (a CLI
# reports its cost when it ends), then the subshell exits.
fanout_agent_stop() {
  trap '' INT TERM HUP
  if [[ -n $ORBIT_CHILD_PID ]]; then
    orbit_kill_group "$ORBIT_CHILD_PID" "$KILL_GRACE_S"
    if ((ATTEMPT > 0)); then
      cat -- "$ORBIT_TMP/agent.raw" "$ORBIT_TMP/agent.head" "$ORBIT_TMP/agent.tail" >"$ORBIT_TMP/agent.log" 2>/dev/null || true
      printf '\n[orbit: stopped by the runner after %ss]\n' $((SECONDS - FANOUT_T0)) >>"$ORBIT_TMP/agent.log"
      FANOUT_LINES+="A $ATTEMPT $((128 + 15)) 0 $((SECONDS - FANOUT_T0)) 0 $COST_UNKNOWN $OUTCOME_STOPPED"$'\n'
    fi
  fi
  if [[ -n $ORBIT_WATCHDOG_PID ]]; then
    kill -KILL -- "-$ORBIT_WATCHDOG_PID" 2>/dev/null || true
  fi
  live_close
  if [[ -n $FANOUT_OUT ]]; then
    { printf '%sE %s\n' "$FANOUT_LINES" "$DEADLINE_HIT" 1>&"$FANOUT_OUT"; } 2>/dev/null || true
  fi
  exit $((128 + 15))
}

# fanout_stop_all: on a signal, every candidate's subshell is told to stop and waited for.
fanout_stop_all() {
  local pid i
  ((${#FANOUT_PIDS[@]})) || return 0
  for pid in "${FANOUT_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for ((i = 0; i < (KILL_GRACE_S + 3) * 10; i++)); do
    for pid in "${FANOUT_PIDS[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then
        sleep 0.1
        continue 2
      fi
    done
    break
  done
  FANOUT_PIDS=()
}

# fanout_record_trusted N K FILE: FILE is candidate K's record of iteration N as the runner
# wrote it (the journal's candidate_end names its sha256) and its ref still holds its commit.
fanout_record_trusted() {
  local want line
  line=$(grep -aF -- "\"event\":\"candidate_end\",\"iteration\":$1,\"candidate\":$2," "$EV_FILE" 2>/dev/null | tail -n 1 || true)
  event_field_v "$line" sha256
  want=$REPLY
  [[ -n $want ]] && orbit_regular "$3" || return 1
  orbit_sha256_file_v "$3"
  [[ $REPLY == "$want" ]] || return 1
  fanout_read "$3"
  fanout_ref_v "$1" "$2"
  [[ ${C[COMMIT]} =~ ^[0-9a-f]{40,64}$ && $(git_q rev-parse -q --verify "$REPLY" 2>/dev/null || true) == "${C[COMMIT]}" ]]
}

# The keys of a candidate's record (candidate.env), the numeric ones checked when read.
FANOUT_KEYS=(CANDIDATE ITERATION OUTCOME EXIT ATTEMPTS SECONDS COST_MICROUSD TREE COMMIT CHANGED CHECKS_PASSED CHECKS_TOTAL PASS_K_RUNS HOLDOUT JUDGE DISQUALIFIED DONE_CLAIM)
FANOUT_NUMERIC=' CANDIDATE ITERATION EXIT ATTEMPTS SECONDS COST_MICROUSD CHANGED CHECKS_PASSED CHECKS_TOTAL PASS_K_RUNS DONE_CLAIM '
declare -A C=()

# fanout_read FILE: a candidate record into C, never sourced (as result_read).
fanout_read() {
  local line k v
  C=()
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line == *=* ]] || continue
    k=${line%%=*} v=${line#*=}
    [[ " ${FANOUT_KEYS[*]} " == *" $k "* ]] || continue
    if [[ $FANOUT_NUMERIC == *" $k "* ]] && ! orbit_is_uint "$v"; then
      v=0
    fi
    C[$k]=$v
  done <"$1"
  for k in CHANGED CHECKS_PASSED CHECKS_TOTAL PASS_K_RUNS CANDIDATE; do
    orbit_is_uint "${C[$k]:-}" || C[$k]=0
  done
}

# fanout_judge N K DIR BASE_COMMIT BASE_TREE: the runner's own look at candidate K after
# its run: its tree, whether it changed a pinned or protected path (disqualified), its
# checks (verify.sh in its worktree, PASS_K runs when all pass, then the holdout checks and
# the judge when configured), its ref, its record (candidate.env) and the journal's
# candidate_end. A candidate the runner stopped (C[OUTCOME] stopped) is recorded with its
# change, unchecked. Status 1 when a check run changed the loop directory or git's files
# (TRUST_BAD set).
fanout_judge() {
  local n=$1 k=$2 cdir=$3 commit=$4 base=$5 cws tree c bad='' passed=0 total=0 runs=0 hold='' judge='' claim=0
  local text='' key ws_main=$WS agent_main=$AGENT_DIR
  fanout_ws_v "$k"
  cws=$REPLY
  if ! fanout_intact "$cws"; then
    bad="its worktree $cws is not the worktree the runner made"
    tree=$base
  else
    fanout_tree_v "$k"
    tree=$REPLY
    [[ $tree =~ ^[0-9a-f]{40,64}$ ]] || orbit_die "$EXIT_BLOCKED" "cannot snapshot the candidate worktree $cws (see runner.log)"
    fanout_protected_v "$base" "$tree"
    if [[ -n $REPLY ]]; then
      bad="it changed the protected path $REPLY"
    fi
  fi
  # The claim and the notes, out of its folder (regular files only, bounded).
  AGENT_DIR=$cws/.orbit-agent
  if agent_file_take done.md "$cdir/done.md.claim"; then
    claim=1
  fi
  agent_file_take notes.md "$cdir/notes.md" || true
  AGENT_DIR=$agent_main
  if [[ -z $bad && ${C[OUTCOME]:-} != "$OUTCOME_STOPPED" ]]; then
    WS=$cws
    run_verify "$cdir" "candidate $k"
    if [[ -z $TRUST_BAD ]]; then
      passed=$(grep -acE '^\[PASS\] ' -- "$LAST_VERIFY_OUT" || true)
      total=$((passed + $(grep -acE '^\[FAIL\] ' -- "$LAST_VERIFY_OUT" || true)))
      if ((VERIFY_OK)); then
        runs=1
        while ((runs < PASS_K)) && [[ -z $TRUST_BAD ]]; do
          run_verify "$cdir" "candidate $k, pass $((runs + 1)) of $PASS_K"
          ((VERIFY_OK)) || break
          runs=$((runs + 1))
        done
        if ((HOLDOUT_CHECKS > 0)) && [[ -z $TRUST_BAD ]]; then
          run_holdout "$n" "$cdir"
          hold=$VERIFY_FAIL
          if ((HOLDOUT_OK)); then hold=$VERIFY_PASS; fi
        fi
        # The judge weighs only a candidate that passed everything else.
        if [[ -n $JUDGE_CMD && -z $TRUST_BAD && $hold != "$VERIFY_FAIL" ]] && ((runs >= PASS_K)); then
          run_judge "$n" "$cdir"
          judge=$VERIFY_FAIL
          if ((JUDGE_OK)); then judge=$VERIFY_PASS; fi
        fi
      else
        feedback_write "$cdir" "$n" 1
      fi
    fi
    WS=$ws_main
    [[ -z $TRUST_BAD ]] || return 1
  fi
  c=$(git_q commit-tree "$tree" -p "$commit" -m "orbit($LOOP_NAME): iteration $n, candidate $k"$'\n\n'"Orbit-Loop: $LOOP_NAME"$'\n'"Orbit-Iteration: $n"$'\n'"Orbit-Candidate: $k" 2>>"$ORBIT_LOG_FILE") ||
    orbit_die "$EXIT_BLOCKED" "cannot keep candidate $k's change as a commit (see runner.log)"
  fanout_ref_v "$n" "$k"
  git_q update-ref -m "orbit: candidate $k of iteration $n" "$REPLY" "$c" 2>>"$ORBIT_LOG_FILE" ||
    orbit_die "$EXIT_BLOCKED" "cannot write the ref $REPLY (see runner.log)"
  changes_v "$base" "$tree"
  C[CANDIDATE]=$k C[ITERATION]=$n C[TREE]=$tree C[COMMIT]=$c C[CHANGED]=$CHANGES_COUNT
  C[CHECKS_PASSED]=$passed C[CHECKS_TOTAL]=$total C[PASS_K_RUNS]=$runs C[HOLDOUT]=$hold C[JUDGE]=$judge
  C[DISQUALIFIED]=${bad//[$'\n\r']/ } C[DONE_CLAIM]=$claim
  for key in "${FANOUT_KEYS[@]}"; do
    text+="$key=${C[$key]:-}"$'\n'
  done
  orbit_write_file "$cdir/candidate.env" "$text" || orbit_die "$EXIT_STATE_CORRUPT" "cannot write $cdir/candidate.env"
  orbit_sha256_str_v "$text"
  orbit_event candidate_end "$n" candidate "$k" outcome "${C[OUTCOME]}" checks_passed "$passed" checks_total "$total" \
    pass_k_runs "$runs" holdout "$hold" judge "$judge" changed "${C[CHANGED]}" disqualified "${C[DISQUALIFIED]}" commit "$c" sha256 "$REPLY"
  if [[ -n $bad ]]; then
    orbit_log "iteration $n: candidate $k disqualified: $bad"
  fi
  return 0
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
    finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "spent \$$(orbit_usd_text "${S[COST_MICROUSD]}") of the \$$(orbit_usd_text "$USD_CAP_M") cap; the next iteration's $FANOUT_N candidates would cost about \$$(orbit_usd_text $((est * FANOUT_N))) (\$$(orbit_usd_text "$est") a run) and cross it: raise USD_CAP, or lower candidates, to go on"
  fi
}

# fanout_probe K N BASE_TREE: status 0 when candidate K, whose runs have ended, passes
# everything survivor selection weighs (no pinned or protected path changed, every check
# PASS_K times, the holdout, the judge): with fanout-early-stop, whether the others are
# stopped. Only that: a look in a subshell that writes nothing but its own scratch
# (.run-tmp/probe.K) while the other candidates still run: no record, no event. Every
# candidate is judged for the record (fanout_judge) once all runs have ended, so what the
# probe saw is never evidence.
fanout_probe() {
  (
    trap - ERR
    orbit_event() { :; }
    # The loop directory is compared, for the record, once every run has ended.
    trust_check() {
      TRUST_BAD=
      return 0
    }
    fanout_probe_look "$@"
  ) >/dev/null 2>>"$ORBIT_LOG_FILE"
}
# fanout_probe_look K N BASE_TREE: fanout_probe's look (in its subshell).
fanout_probe_look() {
  local k=$1 n=$2 base=$3 r cws ORBIT_FAULT='' ORBIT_TMP=$ORBIT_TMP/probe.$1
  rm -rf -- "$ORBIT_TMP"
  mkdir -- "$ORBIT_TMP"
  fanout_ws_v "$k"
  cws=$REPLY
  fanout_intact "$cws" || return 1
  fanout_tree_v "$k" "$ORBIT_TMP/index"
  [[ $REPLY =~ ^[0-9a-f]{40,64}$ ]] || return 1
  fanout_protected_v "$base" "$REPLY"
  [[ -z $REPLY ]] || return 1
  # The checks run in the candidate's worktree.
  local WS=$cws
  for ((r = 1; r <= PASS_K; r++)); do
    run_verify "$ORBIT_TMP" "probe"
    ((VERIFY_OK)) || return 1
  done
  if ((HOLDOUT_CHECKS > 0)); then
    run_holdout "$n" "$ORBIT_TMP"
    ((HOLDOUT_OK)) || return 1
  fi
  if [[ -n $JUDGE_CMD ]]; then
    run_judge "$n" "$ORBIT_TMP"
    ((JUDGE_OK)) || return 1
  fi
  return 0
}

# fanout_iteration N DIR BASE_TREE FEEDBACK: the fan-out of iteration N. Sets FANOUT_OUTCOME
# to the survivor's outcome, FANOUT_ATTEMPTS, AGENT_RC and AGENT_SECS as a single run would, the
# survivor's prompt and log as the iteration's, its claim in the workspace's agent folder;
# TRUST_BAD when anything changed the loop directory or git's control files (the caller
# stops the loop as for a single agent).
FANOUT_ATTEMPTS=1
FANOUT_OUTCOME=
fanout_iteration() {
  local n=$1 dir=$2 base=$3 fb=$4 commit k cdir j fd line outcome att secs rc cost passer=0
  local -a todo=() kept=() f=()
  local -A fds=() res=() pids=()
  # What the iteration sees when the fan-out stops early (TRUST_BAD: the loop stops).
  FANOUT_OUTCOME=$OUTCOME_AGENT_ERROR FANOUT_ATTEMPTS=1 AGENT_RC=0 AGENT_SECS=0 AGENT_TIMED_OUT=0
  RUN_COST_M=0 RUN_COST_KIND=$COST_UNKNOWN
  commit=$(git_q rev-parse HEAD)
  mkdir -p -- "$dir/candidates"
  # Resumed after a crash: a candidate already recorded as passing everything stopped the
  # fan-out (fanout-early-stop); the ones not recorded are recorded as stopped, not run.
  if ((FANOUT_EARLY_STOP)); then
    for ((k = 1; k <= FANOUT_N; k++)); do
      cdir=$dir/candidates/$k
      if [[ -f $cdir/candidate.env ]] && fanout_record_trusted "$n" "$k" "$cdir/candidate.env" && fanout_passes_all; then
        passer=$k
        break
      fi
    done
  fi
  for ((k = 1; k <= FANOUT_N; k++)); do
    cdir=$dir/candidates/$k
    if [[ -f $cdir/candidate.env ]] && fanout_record_trusted "$n" "$k" "$cdir/candidate.env"; then
      kept+=("$k")
      orbit_log "iteration $n: candidate $k was recorded before the interruption: kept"
      continue
    fi
    if [[ -e $cdir || -L $cdir ]]; then
      j=1
      while [[ -e $dir/candidates/$k.interrupted.$j ]]; do j=$((j + 1)); done
      mv -- "$cdir" "$dir/candidates/$k.interrupted.$j"
    fi
    fanout_ref_v "$n" "$k"
    git_q update-ref -d "$REPLY" 2>/dev/null || true
    mkdir -- "$cdir"
    if ! fanout_prepare "$k" "$commit" "$base"; then
      INTEGRITY_REASON=$REASON_GIT_TAMPER TRUST_BAD=$PIN_BAD TRUST_REASON=$REASON_GIT_TAMPER
      TRUST_WANT=$PIN_WANT TRUST_HAVE=$PIN_HAVE
      return 0
    fi
    build_prompt "$n" "$PHASE_WORK" 1 "$cdir/prompt.md" "$fb"
    printf '\n## Candidate\n\nYou are candidate %s of %s: other agents work on the same goal from the same start, each in its own copy, and the harness keeps the best change. Work independently; take the approach you judge best.\n' \
      "$k" "$FANOUT_N" >>"$cdir/prompt.md"
    rm -rf -- "$ORBIT_TMP/c$k"
    mkdir -- "$ORBIT_TMP/c$k"
    todo+=("$k")
    if ((passer)); then
      res[$k]=''
    fi
  done
  if ((${#todo[@]})); then
    for k in "${todo[@]}"; do
      [[ -z ${res[$k]+set} ]] || continue
      orbit_event candidate_start "$n" candidate "$k" of "$FANOUT_N" path "$WS.c$k"
    done
    orbit_log "iteration $n: ${#todo[@]} candidate(s) start in parallel (${todo[*]})"
    # What the runner holds from here: anything but the candidates' scratch that changes
    # while they run is someone else's write.
    if ! trust_check runner; then
      return 0
    fi
    FANOUT_PIDS=()
    for k in "${todo[@]}"; do
      [[ -z ${res[$k]+set} ]] || continue
      exec {fd}< <(fanout_agent "$k" "$n" "$dir/candidates/$k" "$fb")
      fds[$k]=$fd
      pids[$k]=$!
      FANOUT_PIDS+=("$!")
    done
    if ((FANOUT_EARLY_STOP)) && ((passer == 0)); then
      # Each candidate looked at as soon as its runs end; the first that passes everything
      # stops the others (they report what they ran, as stopped).
      while ((passer == 0)); do
        j=0
        for k in "${todo[@]}"; do
          [[ -z ${res[$k]+set} ]] || continue
          if kill -0 "${pids[$k]}" 2>/dev/null; then
            j=1
            continue
          fi
          fd=${fds[$k]}
          res[$k]=$(cat <&"$fd" || true)
          exec {fd}<&-
          if fanout_probe "$k" "$n" "$base"; then
            passer=$k
            break
          fi
        done
        ((j)) || break
        ((passer)) || sleep 0.2
      done
      if ((passer)); then
        orbit_log "iteration $n: candidate $passer passes everything: the others still running are stopped (fanout-early-stop)"
        for k in "${todo[@]}"; do
          if [[ -z ${res[$k]+set} ]]; then
            kill -TERM "${pids[$k]}" 2>/dev/null || true
          fi
        done
      fi
    fi
    for k in "${todo[@]}"; do
      [[ -z ${res[$k]+set} ]] || continue
      fd=${fds[$k]}
      res[$k]=$(cat <&"$fd" || true)
      exec {fd}<&-
    done
    FANOUT_PIDS=()
    # What any candidate changed outside its worktree, before the runner writes again.
    if ! trust_check agent; then
      orbit_log "a candidate changed $TRUST_BAD ($TRUST_REASON): nothing of the fan-out is taken"
    fi
    # Every run's cost, first: a crash from here on loses none of it.
    for k in "${todo[@]}"; do
      cdir=$dir/candidates/$k
      for line in "$ORBIT_TMP/c$k"/agent*.log "$ORBIT_TMP/c$k"/cost.usd; do
        if [[ -f $line && ! -L $line ]]; then
          mv -f -- "$line" "$cdir/"
        fi
      done
      outcome=$OUTCOME_AGENT_ERROR
      att=0 secs=0 rc=1 cost=0
      while IFS=' ' read -r -a f; do
        case ${f[0]:-} in
          A)
            ((${#f[@]} == 8)) || continue
            for j in 1 2 3 4 5; do orbit_is_uint "${f[$j]}" || continue 2; done
            [[ ${f[6]} =~ $ORBIT_RE_COST_KIND && ${f[7]} =~ ^[a-z_]{1,32}$ ]] || continue
            att=${f[1]} rc=${f[2]} secs=${f[4]} outcome=${f[7]} cost=$((cost + f[5]))
            ledger_append "$n" "${f[5]}" "${f[6]}" "$k"
            RUN_COST_KIND=${f[6]}
            orbit_event agent_exit "$n" phase "$PHASE_WORK" attempt "$att" candidate "$k" exit_code "$rc" outcome "$outcome" seconds "$secs" cost_microusd "${f[5]}" cost_kind "${f[6]}"
            if orbit_appendable "$LOOP_DIR/.iter-timings.log"; then
              printf '%s\n' "$secs" >>"$LOOP_DIR/.iter-timings.log"
            fi
            ;;
          E) [[ ${f[1]:-0} == 1 ]] && DEADLINE_HIT=1 ;;
        esac
      done <<<"${res[$k]}"
      # Stopped before it ran (or before it could say what it ran): another passed first.
      if ((att == 0 && passer > 0)); then
        outcome=$OUTCOME_STOPPED rc=0
      fi
      printf 'OUTCOME=%s\nEXIT=%s\nATTEMPTS=%s\nSECONDS=%s\nCOST_MICROUSD=%s\n' "$outcome" "$rc" "$att" "$secs" "$cost" >"$cdir/run.env"
    done
    [[ -z $TRUST_BAD ]] || return 0
    orbit_fault fanout_after_agents
    for k in "${todo[@]}"; do
      cdir=$dir/candidates/$k
      C=()
      while IFS='=' read -r j line; do
        case $j in
          OUTCOME) [[ $line =~ ^[a-z_]{1,32}$ ]] && C[OUTCOME]=$line ;;
          EXIT | ATTEMPTS | SECONDS | COST_MICROUSD) orbit_is_uint "$line" && C[$j]=$line ;;
        esac
      done <"$cdir/run.env"
      fanout_judge "$n" "$k" "$cdir" "$commit" "$base" || return 0
      orbit_fault fanout_after_candidate
    done
  fi
  fanout_select "$n"
  if ((passer > 0 && SURVIVOR == passer)); then
    SURVIVOR_WHY='the first to pass everything; the others were stopped (fanout-early-stop)'
  fi
  printf '%s\n' "$SURVIVOR" >"$dir/survivor.txt"
  if ! grep -qF -- "\"event\":\"survivor_selected\",\"iteration\":$n," "$EV_FILE" 2>/dev/null; then
    orbit_event survivor_selected "$n" candidate "$SURVIVOR" of "$FANOUT_N" reason "$SURVIVOR_WHY"
  fi
  orbit_log "iteration $n: survivor: candidate $SURVIVOR ($SURVIVOR_WHY)"
  orbit_fault fanout_before_apply
  rm -rf -- "$AGENT_DIR"
  mkdir -- "$AGENT_DIR"
  if ((SURVIVOR == 0)); then
    # Nothing is applied: the workspace stays at the base, the iteration an agent error.
    fanout_apply "$base" || orbit_die "$EXIT_BLOCKED" "cannot put the workspace back to the base tree $base (see runner.log)"
    FANOUT_ATTEMPTS=1 AGENT_RC=1 AGENT_SECS=0
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
  FANOUT_ATTEMPTS=${C[ATTEMPTS]:-1} AGENT_RC=${C[EXIT]:-0} AGENT_SECS=${C[SECONDS]:-0}
  orbit_is_uint "$FANOUT_ATTEMPTS" || FANOUT_ATTEMPTS=1
  FANOUT_OUTCOME=${C[OUTCOME]:-$OUTCOME_AGENT_ERROR}
  orbit_fault fanout_after_apply
}

# fanout_progress_v DIR: REPLY holds progress.md's lines for a fan-out iteration's
# candidates ("" without a fan-out): each one's outcome, checks, holdout, change and why it
# was disqualified, and the survivor with the reason from the journal.
fanout_progress_v() {
  local dir=$1 k text='' surv=0 why='' n
  REPLY=''
  [[ -d $dir/candidates ]] || return 0
  IFS= read -r surv <"$dir/survivor.txt" 2>/dev/null || true
  orbit_is_uint "$surv" || surv=0
  n=$((10#${dir##*/}))
  journal_last_v "\"event\":\"survivor_selected\",\"iteration\":$n,"
  event_field_v "$REPLY" reason
  why=$REPLY
  for ((k = 1; k <= FANOUT_N; k++)); do
    [[ -f $dir/candidates/$k/candidate.env ]] || continue
    fanout_read "$dir/candidates/$k/candidate.env"
    text+="- candidate $k: ${C[OUTCOME]:-?}, checks ${C[CHECKS_PASSED]}/${C[CHECKS_TOTAL]:-0}, PASS_K runs ${C[PASS_K_RUNS]}, holdout ${C[HOLDOUT]:-not run}, changed ${C[CHANGED]} file(s)"
    if [[ -n ${C[JUDGE]:-} ]]; then
      text+=", judge ${C[JUDGE]}"
    fi
    if [[ -n ${C[DISQUALIFIED]} ]]; then
      text+=" — disqualified: ${C[DISQUALIFIED]}"
    elif [[ ${C[OUTCOME]:-} == "$OUTCOME_STOPPED" ]]; then
      text+=" — stopped: another candidate passed everything first; kept as refs/orbit/$LOOP_NAME/$n/$k"
    elif ((k == surv)); then
      text+=" — survivor"
    else
      text+=" — kept as refs/orbit/$LOOP_NAME/$n/$k"
    fi
    text+=$'\n'
  done
  if ((surv > 0)); then
    text+="- survivor: candidate $surv (${why:-see events.jsonl})"$'\n'
  else
    text+="- survivor: none (${why:-every candidate was disqualified})"$'\n'
  fi
  REPLY=$text
}

# fanout_done_prune: a DONE loop's candidate worktrees and refs go (the survivors' changes
# are on the loop branch; the others were kept for review while the loop ran).
fanout_done_prune() {
  local k cws ref
  for ((k = 1; k <= FANOUT_N; k++)); do
    fanout_ws_v "$k"
    cws=$REPLY
    if [[ -e $cws/.git ]] && fanout_intact "$cws"; then
      repo_git worktree remove -f -f -- "$cws" >>"$ORBIT_LOG_FILE" 2>&1 || true
    fi
    rm -f -- "$LOOP_DIR/.tree-index.c$k"
  done
  while IFS= read -r ref; do
    if [[ -n $ref ]]; then
      git_q update-ref -d "$ref" 2>/dev/null || true
    fi
  done < <(git_q for-each-ref --format='%(refname)' "refs/orbit/$LOOP_NAME/" 2>/dev/null || true)
  orbit_event candidates_pruned "$CUR_ITER" reason "done"
}

# fanout_settings: FANOUT_N (1..8) and FANOUT_EARLY_STOP (0 or 1) from the loop's identity
# (CANDIDATES_SETTING, FANOUT_EARLY_STOP_SETTING; a loop rendered before the latter waits
# for every candidate).
FANOUT_EARLY_STOP=0
fanout_settings() {
  FANOUT_N=${CANDIDATES_SETTING:-1}
  if [[ ! $FANOUT_N =~ ^[1-8]$ ]]; then
    orbit_die "$EXIT_PREFLIGHT" "candidates = '$FANOUT_N' in the rendered settings: give 1 to 8 in loop.toml, then run orbit init --force"
  fi
  FANOUT_EARLY_STOP=${FANOUT_EARLY_STOP_SETTING:-0}
  if [[ ! $FANOUT_EARLY_STOP =~ ^[01]$ ]]; then
    orbit_die "$EXIT_PREFLIGHT" "fanout-early-stop = '$FANOUT_EARLY_STOP' in the rendered settings: give true or false in loop.toml, then run orbit init --force"
  fi
}
