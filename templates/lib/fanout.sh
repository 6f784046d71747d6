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
fanout_ws_v() { REPLY="$WS_MAIN.c$1"; }

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
    setup_forget "$cws"
  fi
  if ! fanout_intact "$cws"; then
    PIN_BAD=$cws PIN_WANT="a worktree of $GIT_COMMON_ABS" PIN_HAVE='something else'
    return 1
  fi
  local -a kept=()
  setup_clean_args "$cws" kept
  if ! git -C "$cws" checkout -q -f --detach "$commit" -- >>"$ORBIT_LOG_FILE" 2>&1 ||
    ! git -C "$cws" clean -q -f -d "${kept[@]}" >>"$ORBIT_LOG_FILE" 2>&1; then
    orbit_die "$EXIT_BLOCKED" "cannot reset the candidate worktree $cws to $commit (see runner.log)"
  fi
  if [[ $(git -C "$cws" rev-parse "HEAD^{tree}") != "$tree" ]]; then
    # The workspace held changes not committed (autocommit off): the same start for all.
    git -C "$cws" read-tree -u --reset "$tree" >>"$ORBIT_LOG_FILE" 2>&1 ||
      orbit_die "$EXIT_BLOCKED" "cannot reset the candidate worktree $cws to the tree $tree (see runner.log)"
  fi
  modules_checkout "$cws"
  # A new worktree is set up once, on the tree it starts from (a check's run: the tree may
  # be the agent's).
  setup_paths_file_v "$cws"
  if ((${#SETUP_CMDS[@]})) && [[ ! -f $REPLY ]]; then
    if ! setup_run "$cws" "$LOOP_DIR/iterations/baseline/setup.log" 1; then
      local why=$REPLY
      orbit_event setup_fail "$CUR_ITER" where "candidate-$k" why "$why"
      orbit_die "$EXIT_BLOCKED" "the setup failed in the candidate worktree $cws: $why (see iterations/baseline/setup.log)"
    fi
    orbit_event setup_done "$CUR_ITER" where "candidate-$k" commands "${#SETUP_CMDS[@]}"
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
  tree_at_v "$cws" "$idx"
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
    [[ $p == "$WS/"?* ]] || continue
    p=${p#"$WS"/}
    [[ -n $p ]] && pinned[$p]=1
  done <"$LOOP_DIR/pins.sha256"
  for p in "${PROTECT_GLOBS[@]}"; do
    specs+=(":(glob)$p")
  done
  while IFS= read -r -d '' p; do
    if [[ -n $p && -n ${pinned[$p]-} ]]; then
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
# then `E <deadline_hit> <tree>` (its worktree's tree when its runs ended; end.index, the
# snapshot's index, is there once it is taken). It writes nothing outside .run-tmp/c<K>/ (its siblings' checks of
# the loop directory would take it for tampering); the runner records everything after.
FANOUT_LINES=
FANOUT_OUT=
FANOUT_T0=0
fanout_agent() {
  local k=$1 n=$2 cdir=$3 fb=$4
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
    agent_attempts "$n" "$cdir/prompt.md" "$ORBIT_TMP/agent.log" "$ORBIT_TMP/cost.usd" "$fb" fanout_attempt_start fanout_attempt_line
  } >/dev/null 2>>"$ORBIT_LOG_FILE"
  # Its tree as its runs left it: the one it is judged on (a later change is another's).
  local end=''
  if [[ -f $LOOP_DIR/.tree-index.c$k && ! -L $LOOP_DIR/.tree-index.c$k ]]; then
    cp -p -- "$LOOP_DIR/.tree-index.c$k" "$ORBIT_TMP/end.index.tmp" 2>/dev/null || true
  fi
  if fanout_tree_v "$k" "$ORBIT_TMP/end.index.tmp" && [[ $REPLY =~ ^[0-9a-f]{40,64}$ ]]; then
    end=$REPLY
    mv -f -- "$ORBIT_TMP/end.index.tmp" "$ORBIT_TMP/end.index"
  fi
  printf '%sE %s %s\n' "$FANOUT_LINES" "$DEADLINE_HIT" "$end" 1>&"$FANOUT_OUT"
}

# fanout_attempt_start ATTEMPT: a candidate's attempt starts (its time, for a stop).
fanout_attempt_start() {
  FANOUT_T0=$SECONDS
}

# fanout_attempt_line ATTEMPT OUTCOME: a candidate's attempt, as a line for the runner
# (its tokens `-` where its engine does not count them). The reset time a rate limit names
# stays in this subshell: a fan-out paused by a limit reads it again from the survivor's log.
fanout_attempt_line() {
  FANOUT_LINES+="A $1 $AGENT_RC $AGENT_TIMED_OUT $AGENT_SECS $RUN_COST_M $RUN_COST_KIND $2 ${RUN_TOKENS_IN:--} ${RUN_TOKENS_OUT:--} ${RUN_MODEL:--}"$'\n'
}

# fanout_attempt_record N K ATTEMPT RC TIMED_OUT SECONDS MICRO_USD KIND OUTCOME TOKENS_IN
# TOKENS_OUT MODEL: candidate K's attempt (an A line's fields, checked), into the ledger, the
# journal (its tokens and model where they are known) and the timings.
fanout_attempt_record() {
  local n=$1 k=$2
  local -a tokens=()
  shift 2
  if orbit_is_uint "$8" && orbit_is_uint "$9"; then
    tokens=(tokens_in "$8" tokens_out "$9")
  fi
  if [[ ${10} =~ ^[A-Za-z0-9][][A-Za-z0-9._:/@+-]{0,99}$ ]]; then
    tokens+=(model "${10}")
  fi
  ledger_append "$n" "$5" "$6" "$k"
  orbit_event agent_exit "$n" phase "$PHASE_WORK" attempt "$1" candidate "$k" exit_code "$2" outcome "$7" seconds "$4" cost_microusd "$5" cost_kind "$6" "${tokens[@]}"
  if orbit_appendable "$LOOP_DIR/.iter-timings.log"; then
    printf '%s\n' "$4" >>"$LOOP_DIR/.iter-timings.log"
  fi
}

# fanout_take_v FD PID: REPLY is what candidate subshell PID wrote on FD, up to its E line
# (its last). A subshell that died before writing it is not waited for past its death, nor
# is anything it left behind that still holds the pipe open (swept when the run ends).
fanout_take_v() {
  local fd=$1 pid=$2 line part='' rc gone=0
  REPLY=''
  while :; do
    rc=0
    IFS= read -r -t 1 line <&"$fd" || rc=$?
    if ((rc == 0)); then
      line=$part$line part=''
      REPLY+=$line$'\n'
      [[ $line == "E "* ]] && break
    elif ((rc > 128)); then
      # Nothing for a second: a line may have come in part. A subshell found gone may have
      # written its lines just before: one more read takes them; a second quiet second ends.
      part+=$line
      if ! kill -0 "$pid" 2>/dev/null; then
        ((gone++)) && break
      fi
    else
      [[ -z $part$line ]] || REPLY+=$part$line
      break
    fi
  done
  REPLY=${REPLY%$'\n'}
}

# The stop's own pid and the child it is stopping (globals: the stop runs as a trap).
FANOUT_ME=
FANOUT_P=
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
      FANOUT_LINES+="A $ATTEMPT $((128 + 15)) 0 $((SECONDS - FANOUT_T0)) 0 $COST_UNKNOWN $OUTCOME_STOPPED - - -"$'\n'
    fi
  fi
  if [[ -n $ORBIT_WATCHDOG_PID ]]; then
    kill -KILL -- "-$ORBIT_WATCHDOG_PID" 2>/dev/null || true
  fi
  # A stop that came while a run was starting finds its pids not yet recorded: what this
  # subshell started (but the live view's copy, closed below) and what carries the run's
  # mark go too, or one of them would hold the runner's pipe from this subshell open.
  # (No local here: this runs as a trap, and the subshell exits below.)
  FANOUT_ME=$BASHPID
  for FANOUT_P in $(ps -A -o ppid= -o pid= 2>/dev/null | awk -v me="$FANOUT_ME" '$1 == me { print $2 }'); do
    [[ $FANOUT_P == "${LIVE_PID:-}" ]] && continue
    kill -KILL -- "-$FANOUT_P" 2>/dev/null || kill -KILL "$FANOUT_P" 2>/dev/null || true
  done
  if [[ -n ${runid:-} ]]; then
    sweep_env "ORBIT_RUN_ID=$runid"
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
  fanout_checks_stop_all
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

# fanout_recorded_passer_v N DIR: REPLY is the candidate of iteration N already recorded as
# passing everything, when a fan-out with fanout-early-stop resumes after a crash (it
# stopped the fan-out: the ones not recorded are recorded as stopped, not run); else 0.
fanout_recorded_passer_v() {
  local n=$1 dir=$2 k cdir
  REPLY=0
  ((FANOUT_EARLY_STOP)) || return 0
  for ((k = 1; k <= FANOUT_N; k++)); do
    cdir=$dir/candidates/$k
    if [[ -f $cdir/candidate.env ]] && fanout_record_trusted "$n" "$k" "$cdir/candidate.env" && fanout_passes_all; then
      REPLY=$k
      return 0
    fi
  done
}

fanout_iteration() {
  local n=$1 dir=$2 base=$3 fb=$4 commit k cdir j fd line outcome att secs rc cost passer=0
  local -a todo=() kept=() f=() checked=() kids_before=()
  local -A fds=() res=() pids=() ends=()
  # What the iteration sees when the fan-out stops early (TRUST_BAD: the loop stops).
  FANOUT_OUTCOME=$OUTCOME_AGENT_ERROR FANOUT_ATTEMPTS=1 AGENT_RC=0 AGENT_SECS=0 AGENT_TIMED_OUT=0
  RUN_COST_M=0 RUN_COST_KIND=$COST_UNKNOWN
  commit=$(git_q rev-parse HEAD)
  mkdir -p -- "$dir/candidates"
  fanout_recorded_passer_v "$n" "$dir"
  passer=$REPLY
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
    orbit_kids_into kids_before "$$"
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
          fanout_take_v "$fd" "${pids[$k]}"
          res[$k]=$REPLY
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
      fanout_take_v "$fd" "${pids[$k]}"
      res[$k]=$REPLY
      exec {fd}<&-
    done
    FANOUT_PIDS=()
    orbit_reaped_sweep "${kids_before[@]}" "${pids[@]}"
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
            ((${#f[@]} == 11)) || continue
            for j in 1 2 3 4 5; do orbit_is_uint "${f[$j]}" || continue 2; done
            [[ ${f[6]} =~ $ORBIT_RE_COST_KIND && ${f[7]} =~ ^[a-z_]{1,32}$ ]] || continue
            att=${f[1]} rc=${f[2]} secs=${f[4]} outcome=${f[7]} cost=$((cost + f[5]))
            RUN_COST_KIND=${f[6]}
            fanout_attempt_record "$n" "$k" "${f[@]:1}"
            ;;
          E)
            [[ ${f[1]:-0} == 1 ]] && DEADLINE_HIT=1
            [[ ${f[2]:-} =~ ^[0-9a-f]{40,64}$ ]] && ends[$k]=${f[2]}
            ;;
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
      fanout_run_read "$dir/candidates/$k"
      C[END_TREE]=${ends[$k]-}
      fanout_look "$n" "$k" "$dir/candidates/$k" "$base" || return 0
      if ((FANOUT_LOOK_CHECK[$k])); then checked+=("$k"); fi
    done
    fanout_checks_run "$n" ${checked[@]+"${checked[@]}"} || return 0
    orbit_fault fanout_after_checks
    for k in "${todo[@]}"; do
      fanout_run_read "$dir/candidates/$k"
      fanout_judge "$n" "$k" "$dir/candidates/$k" "$commit" "$base" || return 0
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
  fanout_survivor_checks "$cdir"
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

# fanout_done_prune: a DONE loop's candidate worktrees go (the survivors' changes are on the
# loop branch). Every candidate's ref stays, for review of the alternatives the loop paid
# for, until orbit recover --prune-candidates.
fanout_done_prune() {
  local k cws
  for ((k = 1; k <= FANOUT_N; k++)); do
    fanout_ws_v "$k"
    cws=$REPLY
    if [[ -e $cws/.git ]] && fanout_intact "$cws"; then
      repo_git worktree remove -f -f -- "$cws" >>"$ORBIT_LOG_FILE" 2>&1 || true
      setup_forget "$cws"
    fi
    rm -f -- "$LOOP_DIR/.tree-index.c$k"
  done
  orbit_event candidates_pruned "$CUR_ITER" reason "done" refs "kept"
}

# fanout_settings: FANOUT_N and FANOUT_EARLY_STOP (0 or 1) from the loop's identity
# (CANDIDATES_SETTING, FANOUT_EARLY_STOP_SETTING), checked by the contract table's kinds and
# bounds.
FANOUT_EARLY_STOP=0
fanout_settings() {
  orbit_setting_v CANDIDATES_SETTING || orbit_die "$EXIT_PREFLIGHT" "$ORBIT_SETTING_ERR"
  FANOUT_N=$REPLY
  orbit_setting_v FANOUT_EARLY_STOP_SETTING || orbit_die "$EXIT_PREFLIGHT" "$ORBIT_SETTING_ERR"
  FANOUT_EARLY_STOP=$REPLY
}
