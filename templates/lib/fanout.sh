# ---- fan-out (static, included verbatim after run-loop's functions): with CANDIDATES_SETTING
# ---- N > 1, an iteration starts N agent runs in parallel from the same base, each in its
# ---- own worktree (<workspace>.c<K>, reused and reset each iteration), judges each one
# ---- itself and applies the survivor's change to the workspace. The rest of the iteration
# ---- (verify in the workspace, the DONE gate, the commit, the record) is a single agent's.
# ---- What a candidate leaves (its worktree, its folder, its output) is evidence: the runner
# ---- computes every fact it judges by (the tree, the checks, the pins) itself. Rendered
# ---- into a loop of candidates > 1 only (lib/no-fanout.sh in the others).
FANOUT_N=1
# The candidates' pids (the subshells that run them), for stop_on_signal.
declare -a FANOUT_PIDS=()

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
# Status 1 when the worktree is not one the runner can trust: REPLY is its path, REPLY_WANT
# and REPLY_HAVE what was expected and found.
fanout_prepare() {
  local k=$1 commit=$2 tree=$3 cws
  fanout_ws_v "$k"
  cws=$REPLY
  if [[ ! -e $cws && ! -L $cws ]]; then
    config_repo_git worktree add -q --detach --lock --reason "orbit loop $LOOP_DIR (candidate $k)" -- "$cws" "$commit" >>"$ORBIT_LOG_FILE" 2>&1 ||
      orbit_die "$EXIT_BLOCKED" "cannot create the candidate worktree $cws (see runner.log)"
    state_event candidate_worktree "$CUR_ITER" candidate "$k" path "$cws"
    setup_forget "$cws"
  fi
  if ! fanout_intact "$cws"; then
    REPLY=$cws REPLY_WANT="a worktree of $GIT_COMMON_ABS" REPLY_HAVE='something else'
    return 1
  fi
  local -a kept=()
  fanout_setup_clean_args "$cws" kept
  if ! git -C "$cws" checkout -q -f --detach "$commit" -- >>"$ORBIT_LOG_FILE" 2>&1 ||
    ! git -C "$cws" clean -q -f -d "${kept[@]}" >>"$ORBIT_LOG_FILE" 2>&1; then
    orbit_die "$EXIT_BLOCKED" "cannot reset the candidate worktree $cws to $commit (see runner.log)"
  fi
  if [[ $(git -C "$cws" rev-parse "HEAD^{tree}") != "$tree" ]]; then
    # The workspace held changes not committed (autocommit off): the same start for all.
    git -C "$cws" read-tree -u --reset "$tree" >>"$ORBIT_LOG_FILE" 2>&1 ||
      orbit_die "$EXIT_BLOCKED" "cannot reset the candidate worktree $cws to the tree $tree (see runner.log)"
  fi
  setup_modules_checkout "$cws"
  # A new worktree is set up once, on the tree it starts from: the setup cache's copy when
  # that tree's setup inputs are the untouched tree's, else a check's run (the tree may be
  # the agent's).
  setup_paths_file_v "$cws"
  if ((${#SETUP_CMDS[@]})) && [[ ! -f $REPLY ]]; then
    if ! setup_run_candidate "$cws" "$LOOP_DIR/iterations/baseline/setup.log"; then
      local why=$REPLY
      state_event setup_fail "$CUR_ITER" where "candidate-$k" why "$why"
      orbit_die "$EXIT_BLOCKED" "the setup failed in the candidate worktree $cws: $why (see iterations/baseline/setup.log)"
    fi
    state_event setup_done "$CUR_ITER" where "candidate-$k" commands "${#SETUP_CMDS[@]}"
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
  done < <(config_git_q diff --no-renames --name-only -z "$before" "$after" -- 2>/dev/null || true)
  if ((${#specs[@]})); then
    IFS= read -r -d '' REPLY < <(config_git_q diff --no-renames --name-only -z "$before" "$after" -- "${specs[@]}" 2>/dev/null || true) || true
  fi
  return 0
}

# fanout_agent K N DIR FB: the subshell of candidate K: its attempts (agent_attempts with the
# candidate's number, worktree, folder and scratch, same timeout, retries and sweep as a
# single run), one line per attempt on standard output for the runner:
#   A <attempt> <exit> <timed_out> <seconds> <micro_usd> <cost_kind> <outcome>
# then `E <deadline_hit> <tree>` (its worktree's tree when its runs ended; end.index, the
# snapshot's index, is there once it is taken). It writes nothing outside .run-tmp/c<K>/ (its
# siblings' checks of the loop directory would take it for tampering); the runner records
# everything after. Its own state, in its subshell: the lines so far, the descriptor they go
# out on, its scratch, the attempt running and when it started (for a stop, a trap).
FANOUT_LINES=
FANOUT_OUT=
FANOUT_TMP=
FANOUT_ATTEMPT=0
FANOUT_T0=0
fanout_agent() {
  local k=$1 n=$2 cdir=$3 fb=$4 cws
  trap - ERR
  fanout_ws_v "$k"
  cws=$REPLY
  FANOUT_LINES='' FANOUT_T0=$SECONDS FANOUT_ATTEMPT=0 FANOUT_TMP=$ORBIT_TMP/c$k
  exec {FANOUT_OUT}>&1
  trap 'fanout_agent_stop' INT TERM HUP
  {
    agent_attempts "$k" "$cws" "$cws/.orbit-agent" "$FANOUT_TMP" \
      "$n" "$cdir/prompt.md" "$FANOUT_TMP/agent.log" "$FANOUT_TMP/cost.usd" "$fb" fanout_attempt_start fanout_attempt_line
  } >/dev/null 2>>"$ORBIT_LOG_FILE"
  # Its tree as its runs left it: the one it is judged on (a later change is another's).
  local end=''
  if [[ -f $LOOP_DIR/.tree-index.c$k && ! -L $LOOP_DIR/.tree-index.c$k ]]; then
    cp -p -- "$LOOP_DIR/.tree-index.c$k" "$FANOUT_TMP/end.index.tmp" 2>/dev/null || true
  fi
  if fanout_tree_v "$k" "$FANOUT_TMP/end.index.tmp" && [[ $REPLY =~ ^[0-9a-f]{40,64}$ ]]; then
    end=$REPLY
    mv -f -- "$FANOUT_TMP/end.index.tmp" "$FANOUT_TMP/end.index"
  fi
  printf '%sE %s %s\n' "$FANOUT_LINES" "$DEADLINE_HIT" "$end" 1>&"$FANOUT_OUT"
}

# fanout_attempt_start ATTEMPT: a candidate's attempt starts (its number and time, for a stop).
fanout_attempt_start() {
  FANOUT_ATTEMPT=$1 FANOUT_T0=$SECONDS
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
  record_ledger_append "$n" "$5" "$6" "$k"
  state_event agent_exit "$n" phase "$PHASE_WORK" attempt "$1" candidate "$k" exit_code "$2" outcome "$7" seconds "$4" cost_microusd "$5" cost_kind "$6" "${tokens[@]}"
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
    proc_kill_group "$ORBIT_CHILD_PID" "$KILL_GRACE_S"
    if ((FANOUT_ATTEMPT > 0)); then
      cat -- "$FANOUT_TMP/agent.raw" "$FANOUT_TMP/agent.head" "$FANOUT_TMP/agent.tail" >"$FANOUT_TMP/agent.log" 2>/dev/null || true
      printf '\n[orbit: stopped by the runner after %ss]\n' $((SECONDS - FANOUT_T0)) >>"$FANOUT_TMP/agent.log"
      FANOUT_LINES+="A $FANOUT_ATTEMPT $((128 + 15)) 0 $((SECONDS - FANOUT_T0)) 0 $COST_UNKNOWN $OUTCOME_STOPPED - - -"$'\n'
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
  agent_live_close
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

# What the fan-out of an iteration reports, a record the iteration (its owner) takes as a
# single agent's run: OUTCOME (the survivor's), ATTEMPTS, EXIT, SECONDS and TIMED_OUT (its
# last run's), COST_KIND (the last run's cost kind). What it starts as is what the iteration
# sees when the fan-out stops early (TRUST_BAD: the loop stops).
declare -A FANOUT_RUN=()
# An iteration's fan-out as it goes, between its steps: the candidates that run (not kept
# from before an interruption), what each one's subshell said (a candidate with an entry is
# taken: run, or stopped before it ran), its descriptor and pid while it runs, the tree its
# runs left, and the candidate that passed everything first (fanout-early-stop; 0 for none).
declare -a FANOUT_TODO=()
declare -A FANOUT_RES=() FANOUT_FD=() FANOUT_PID=() FANOUT_END=()
FANOUT_PASSER=0

# fanout_iteration N DIR BASE_TREE FEEDBACK: the fan-out of iteration N. FANOUT_RUN holds the
# survivor's run as a single agent's would be; the survivor's prompt and log are the
# iteration's, its claim in the workspace's agent folder; TRUST_BAD when anything changed the
# loop directory or git's control files (the caller stops the loop as for a single agent).
fanout_iteration() {
  local n=$1 dir=$2 base=$3 fb=$4 commit
  FANOUT_RUN=([OUTCOME]=$OUTCOME_AGENT_ERROR [ATTEMPTS]=1 [EXIT]=0 [SECONDS]=0 [TIMED_OUT]=0 [COST_KIND]=$COST_UNKNOWN)
  FANOUT_TODO=() FANOUT_RES=() FANOUT_FD=() FANOUT_PID=() FANOUT_END=()
  commit=$(config_git_q rev-parse HEAD)
  mkdir -p -- "$dir/candidates"
  fanout_recorded_passer_v "$n" "$dir"
  FANOUT_PASSER=$REPLY
  fanout_start_all "$n" "$dir" "$commit" "$base" "$fb" || return 0
  if ((${#FANOUT_TODO[@]})); then
    fanout_run_all "$n" "$dir" "$fb" "$base" || return 0
    fanout_runs_record "$n" "$dir" || return 0
    state_fault fanout_after_agents
    fanout_judge_all "$n" "$dir" "$commit" "$base" || return 0
  fi
  fanout_survivor "$n" "$dir" "$base"
}

# fanout_start_all N DIR BASE_COMMIT BASE_TREE FEEDBACK: each candidate of iteration N not
# recorded before an interruption gets its folder (an older one set aside), its worktree at
# the base and its prompt (FANOUT_TODO); with a passer recorded, the others are taken as
# stopped before they ran. Status 1 when a worktree is not one the runner can trust
# (TRUST_BAD).
fanout_start_all() {
  local n=$1 dir=$2 commit=$3 base=$4 fb=$5 k cdir j
  for ((k = 1; k <= FANOUT_N; k++)); do
    cdir=$dir/candidates/$k
    if [[ -f $cdir/candidate.env ]] && fanout_record_trusted "$n" "$k" "$cdir/candidate.env"; then
      orbit_log "iteration $n: candidate $k was recorded before the interruption: kept"
      continue
    fi
    if [[ -e $cdir || -L $cdir ]]; then
      j=1
      while [[ -e $dir/candidates/$k.interrupted.$j ]]; do j=$((j + 1)); done
      mv -- "$cdir" "$dir/candidates/$k.interrupted.$j"
    fi
    fanout_ref_v "$n" "$k"
    config_git_q update-ref -d "$REPLY" 2>/dev/null || true
    mkdir -- "$cdir"
    if ! fanout_prepare "$k" "$commit" "$base"; then
      pins_finding "$REPLY" "$REPLY_WANT" "$REPLY_HAVE"
      trust_broken "$REPLY" "$REASON_GIT_TAMPER" "$REPLY_WANT" "$REPLY_HAVE" 1
      return 1
    fi
    prompt_build "$n" "$PHASE_WORK" 1 "$cdir/prompt.md" "$fb"
    printf '\n## Candidate\n\nYou are candidate %s of %s: other agents work on the same goal from the same start, each in its own copy, and the harness keeps the best change. Work independently; take the approach you judge best.\n' \
      "$k" "$FANOUT_N" >>"$cdir/prompt.md"
    rm -rf -- "$ORBIT_TMP/c$k"
    mkdir -- "$ORBIT_TMP/c$k"
    FANOUT_TODO+=("$k")
    if ((FANOUT_PASSER)); then
      FANOUT_RES[$k]=''
    fi
  done
}

# fanout_run_all N DIR FEEDBACK BASE_TREE: the candidates of FANOUT_TODO not yet taken run
# in parallel, each in its subshell (fanout_agent); FANOUT_RES holds what each one said once
# all have ended (with fanout-early-stop, the first to pass everything stops the others).
# Status 1 when the runner's own look before they start finds a change (TRUST_BAD).
fanout_run_all() {
  local n=$1 dir=$2 fb=$3 base=$4 k fd
  local -a kids_before=()
  for k in "${FANOUT_TODO[@]}"; do
    [[ -z ${FANOUT_RES[$k]+set} ]] || continue
    state_event candidate_start "$n" candidate "$k" of "$FANOUT_N" path "$WS.c$k"
  done
  orbit_log "iteration $n: ${#FANOUT_TODO[@]} candidate(s) start in parallel (${FANOUT_TODO[*]})"
  # What the runner holds from here: anything but the candidates' scratch that changes
  # while they run is someone else's write.
  if ! trust_check runner; then
    return 1
  fi
  FANOUT_PIDS=()
  proc_kids_into kids_before "$$"
  for k in "${FANOUT_TODO[@]}"; do
    [[ -z ${FANOUT_RES[$k]+set} ]] || continue
    exec {fd}< <(fanout_agent "$k" "$n" "$dir/candidates/$k" "$fb")
    FANOUT_FD[$k]=$fd
    FANOUT_PID[$k]=$!
    FANOUT_PIDS+=("$!")
  done
  if ((FANOUT_EARLY_STOP)) && ((FANOUT_PASSER == 0)); then
    fanout_early_stop "$n" "$base"
  fi
  for k in "${FANOUT_TODO[@]}"; do
    [[ -z ${FANOUT_RES[$k]+set} ]] || continue
    fanout_take "$k"
  done
  FANOUT_PIDS=()
  proc_reaped_sweep "${kids_before[@]}" "${FANOUT_PID[@]}"
}

# fanout_take K: what candidate K's subshell said, into FANOUT_RES (its descriptor closed).
fanout_take() {
  local k=$1 fd=${FANOUT_FD[$1]}
  fanout_take_v "$fd" "${FANOUT_PID[$k]}"
  FANOUT_RES[$k]=$REPLY
  exec {fd}<&-
}

# fanout_early_stop N BASE_TREE: each candidate looked at as soon as its runs end; the
# first that passes everything (FANOUT_PASSER) stops the others (they report what they ran,
# as stopped).
fanout_early_stop() {
  local n=$1 base=$2 k live
  while ((FANOUT_PASSER == 0)); do
    live=0
    for k in "${FANOUT_TODO[@]}"; do
      [[ -z ${FANOUT_RES[$k]+set} ]] || continue
      if kill -0 "${FANOUT_PID[$k]}" 2>/dev/null; then
        live=1
        continue
      fi
      fanout_take "$k"
      if fanout_probe "$k" "$n" "$base"; then
        FANOUT_PASSER=$k
        break
      fi
    done
    ((live)) || break
    ((FANOUT_PASSER)) || sleep 0.2
  done
  if ((FANOUT_PASSER)); then
    orbit_log "iteration $n: candidate $FANOUT_PASSER passes everything: the others still running are stopped (fanout-early-stop)"
    for k in "${FANOUT_TODO[@]}"; do
      if [[ -z ${FANOUT_RES[$k]+set} ]]; then
        kill -TERM "${FANOUT_PID[$k]}" 2>/dev/null || true
      fi
    done
  fi
}

# fanout_runs_record N DIR: once every candidate's runs ended, the runner's look at what
# they changed outside their worktrees, then every run's cost and record first (a crash from
# here on loses none of it): each candidate's logs into its folder, its attempts into the
# ledger and the journal, its run.env, the tree its runs left (FANOUT_END). Status 1 when
# the look found a change (TRUST_BAD: nothing of the fan-out is taken).
fanout_runs_record() {
  local n=$1 dir=$2 k line
  if ! trust_check agent; then
    orbit_log "a candidate changed $TRUST_BAD ($TRUST_REASON): nothing of the fan-out is taken"
  fi
  for k in "${FANOUT_TODO[@]}"; do
    for line in "$ORBIT_TMP/c$k"/agent*.log "$ORBIT_TMP/c$k"/cost.usd; do
      if [[ -f $line && ! -L $line ]]; then
        mv -f -- "$line" "$dir/candidates/$k/"
      fi
    done
    fanout_run_lines "$n" "$k" "$dir/candidates/$k"
  done
  [[ -z $TRUST_BAD ]]
}

# fanout_run_lines N K CDIR: candidate K's lines (FANOUT_RES: A per attempt, checked, then E)
# recorded: each attempt (fanout_attempt_record), a deadline it hit the loop's, the tree its
# runs left, and its run's record (CDIR/run.env).
fanout_run_lines() {
  local n=$1 k=$2 cdir=$3 outcome=$OUTCOME_AGENT_ERROR att=0 secs=0 rc=1 cost=0 j
  local -a f=()
  while IFS=' ' read -r -a f; do
    case ${f[0]:-} in
      A)
        ((${#f[@]} == 11)) || continue
        for j in 1 2 3 4 5; do orbit_is_uint "${f[$j]}" || continue 2; done
        [[ ${f[6]} =~ $ORBIT_RE_COST_KIND && ${f[7]} =~ ^[a-z_]{1,32}$ ]] || continue
        att=${f[1]} rc=${f[2]} secs=${f[4]} outcome=${f[7]} cost=$((cost + f[5]))
        FANOUT_RUN[COST_KIND]=${f[6]}
        fanout_attempt_record "$n" "$k" "${f[@]:1}"
        ;;
      E)
        if [[ ${f[1]:-0} == 1 ]]; then deadline_hit; fi
        [[ ${f[2]:-} =~ ^[0-9a-f]{40,64}$ ]] && FANOUT_END[$k]=${f[2]}
        ;;
    esac
  done <<<"${FANOUT_RES[$k]}"
  # Stopped before it ran (or before it could say what it ran): another passed first.
  if ((att == 0 && FANOUT_PASSER > 0)); then
    outcome=$OUTCOME_STOPPED rc=0
  fi
  printf 'OUTCOME=%s\nEXIT=%s\nATTEMPTS=%s\nSECONDS=%s\nCOST_MICROUSD=%s\n' "$outcome" "$rc" "$att" "$secs" "$cost" >"$cdir/run.env"
}

# fanout_judge_all N DIR BASE_COMMIT BASE_TREE: the runner's look at each candidate that ran,
# the checks of those not disqualified nor stopped, then each one judged and recorded.
# Status 1 when a look or the checks found a change (TRUST_BAD).
fanout_judge_all() {
  local n=$1 dir=$2 commit=$3 base=$4 k most=''
  local -a checked=()
  for k in "${FANOUT_TODO[@]}"; do
    fanout_run_read "$dir/candidates/$k"
    C[END_TREE]=${FANOUT_END[$k]-}
    fanout_look "$n" "$k" "$dir/candidates/$k" "$base" || return 1
    if ((FANOUT_LOOK_CHECK[$k])); then checked+=("$k"); fi
  done
  fanout_checks_run "$n" ${checked[@]+"${checked[@]}"} || return 1
  state_fault fanout_after_checks
  for k in "${FANOUT_TODO[@]}"; do
    fanout_run_read "$dir/candidates/$k"
    fanout_judge "$n" "$k" "$dir/candidates/$k" "$commit" "$base" || return 1
    state_fault fanout_after_candidate
    [[ -n ${C[CHECK_CPU]:-} ]] || continue
    [[ -n $most ]] && ((most >= C[CHECK_CPU])) || most=${C[CHECK_CPU]}
  done
  # The most any candidate's checks used: the next candidates' checks are laid out by it.
  [[ -z $most ]] || checks_cpu_is "$most"
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
  resume_journal_last_v "\"event\":\"survivor_selected\",\"iteration\":$n,"
  resume_event_field_v "$REPLY" reason
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
      config_repo_git worktree remove -f -f -- "$cws" >>"$ORBIT_LOG_FILE" 2>&1 || true
      setup_forget "$cws"
    fi
    rm -f -- "$LOOP_DIR/.tree-index.c$k"
  done
  state_event candidates_pruned "$CUR_ITER" reason "done" refs "kept"
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
