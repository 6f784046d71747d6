# ---- fan-out: the candidates' checks, up to CHECK_JOBS candidates at once. Each
# ---- candidate's checks (verify.sh PASS_K times, the holdout checks, the judge) run in a
# ---- subshell of their own in its worktree, with its own timeouts, and write nothing but
# ---- their scratch (.run-tmp/j<K>/: the records, the journal's events queued, what they
# ---- found). The runner holds the loop directory, git's files, HOME's and the schedule
# ---- around them all, as around the candidates' agent runs; then it takes each one's
# ---- records in candidate order (fanout_check_take_v), so that the records and the journal
# ---- read as if they had run one after another.
# fanout_checks_keep_pass CDIR: a candidate's last verify run, all passing, kept in its record for
# the workspace's runs on the same tree (checks_reuse_verify).
fanout_checks_keep_pass() {
  cp -f -- "$LAST_VERIFY_OUT" "$1/verify.pass.out" && cp -f -- "$VERIFY_TALLY_FILE" "$1/verify.pass.tally"
}

# fanout_checks_in WORKTREE SCRATCH CMD [ARG]...: CMD (the checks' runs: checks_run_verify, holdout_run,
# judge_run, or steps made of them) for a worktree other than the workspace (a fan-out
# candidate's, in a subshell of its own): what they call runs in WORKTREE, with SCRATCH as
# their scratch and VERIFY_SCRATCH (the private index there, nothing of the loop directory
# written), and no fault injection.
fanout_checks_in() {
  local WS=$1 ORBIT_TMP=$2 VERIFY_SCRATCH=$2 ORBIT_FAULT=''
  shift 2
  "$@"
}

# fanout_setup_clean_args DIR ARRAY: `git clean -e` patterns that keep what the setup made in the work
# tree DIR, into the array named ARRAY.
fanout_setup_clean_args() {
  local -n clean_out=$2
  local p
  clean_out=()
  ((${#SETUP_CMDS[@]})) || return 0
  setup_paths_file_v "$1"
  [[ -f $REPLY && ! -L $REPLY ]] || return 0
  while IFS= read -r -d '' p; do
    [[ -n $p ]] || continue
    # As an ignore pattern: anchored, its wildcards taken literally.
    p=${p//\\/\\\\}
    p=${p//\*/\\*}
    p=${p//\?/\\?}
    p=${p//\[/\\[}
    clean_out+=(-e "/$p")
  done <"$REPLY"
}


# The candidates' check subshells running (their pids), for a stop to end them.
FANOUT_CHECK_PIDS=()

# fanout_check_jobs_v: REPLY is how many candidates' checks run at once, FANOUT_JOBS_WHY
# why: CHECK_JOBS when it is 1 or more; else every candidate's at once when their checks,
# by what one run of them used (fanout_check_cpu_v), need together at most three quarters of
# the CPUs (checks that wait on a disk, a network or a sleep); else as many as there are
# candidates, at most the CPUs.
FANOUT_JOBS_WHY=
fanout_check_jobs_v() {
  local cpus
  if ((CHECK_JOBS > 0)); then
    REPLY=$CHECK_JOBS FANOUT_JOBS_WHY=check-jobs
    return 0
  fi
  cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || true)
  orbit_is_uint "$cpus" && ((cpus > 0)) || cpus=1
  FANOUT_JOBS_WHY="$cpus CPU(s)"
  fanout_check_cpu_v
  if [[ -n $REPLY ]]; then
    FANOUT_JOBS_WHY+=", a verify run used $((REPLY / 10))% of one"
    if ((FANOUT_N * REPLY <= 750 * cpus)); then
      REPLY=$FANOUT_N
      return 0
    fi
  fi
  REPLY=$((FANOUT_N < cpus ? FANOUT_N : cpus))
}

# fanout_check_cpu_v: REPLY is how much of one CPU a verify run used (thousandths): as this
# run last measured one (CHECKS_CPU), else the most the journal's last candidate_end events
# say (a tick started afresh), else empty.
fanout_check_cpu_v() {
  local line most=''
  REPLY=${CHECKS_CPU:-}
  [[ -z $REPLY && -f $EV_FILE ]] || return 0
  while IFS= read -r line; do
    resume_event_field_v "$line" check_cpu
    [[ -n $REPLY ]] || continue
    [[ -n $most ]] && ((most >= REPLY)) || most=$REPLY
  done < <(grep -aF -- '"event":"candidate_end"' "$EV_FILE" 2>/dev/null | tail -n "$FANOUT_N")
  REPLY=$most
}

# fanout_checks_run N K...: the checks of candidates K... of iteration N, up to
# fanout_check_jobs_v at once. Status 1 when anything but their scratch and the runner's logs
# changed in the loop directory, git's files, HOME's held files or the schedule while they
# ran (TRUST_BAD says what: a check's write, handled as after any check run).
fanout_checks_run() {
  local n=$1 k jobs live pid
  shift
  (($#)) || return 0
  fanout_check_jobs_v
  jobs=$REPLY
  orbit_log "iteration $n: the checks of candidate(s) $* run, $jobs at once ($FANOUT_JOBS_WHY)"
  if ! trust_check runner; then
    return 1
  fi
  FANOUT_CHECK_PIDS=()
  for k in "$@"; do
    while :; do
      live=0
      for pid in "${FANOUT_CHECK_PIDS[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then live=$((live + 1)); fi
      done
      ((live >= jobs)) || break
      # One of them ends (or any other child of the runner): count again.
      wait -n 2>/dev/null || true
    done
    rm -rf -- "$ORBIT_TMP/j$k"
    mkdir -p -- "$ORBIT_TMP/j$k/rec"
    fanout_check_one "$n" "$k" </dev/null >/dev/null 2>>"$ORBIT_LOG_FILE" &
    FANOUT_CHECK_PIDS+=("$!")
  done
  for pid in "${FANOUT_CHECK_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  FANOUT_CHECK_PIDS=()
  # What changed while they ran that is not theirs to change (as after a single check run).
  if ! trust_check check; then
    orbit_log "the candidates' checks changed what the runner holds (named where the loop stops): their verdicts are not taken"
    return 1
  fi
  return 0
}

# fanout_check_one N K: candidate K's checks, in a subshell: in its worktree, with its own
# scratch (.run-tmp/j<K>/) and private index, its records into rec/ there, the events its
# runs would journal queued in events.q (a count, then the fields, each NUL-terminated), the
# artifacts' names it learnt in artifacts.names, and last `result`: passed, total, PASS_K
# runs, holdout, judge (- for none), deadline hit. Nothing else of the loop directory is
# written (the runner compares it, for all of them, once they have ended).
fanout_check_one() {
  local n=$1 k=$2 cws sc=$ORBIT_TMP/j$2
  trap - ERR
  trap 'fanout_check_stop' INT TERM HUP
  fanout_ws_v "$k"
  cws=$REPLY
  # The candidate's own index, stat data and all: a fresh one would hash every file again.
  if [[ -f $LOOP_DIR/.tree-index.c$k && ! -L $LOOP_DIR/.tree-index.c$k ]]; then
    cp -p -- "$LOOP_DIR/.tree-index.c$k" "$sc/index" 2>/dev/null || true
  fi
  # Its events are queued for the runner, its looks at what the runner holds are the
  # runner's (around all of them), and a stop ends this subshell alone.
  state_event_sink "$sc/events.q"
  trust_defer
  FANOUT_CHECK_K=$k
  orbit_die_hook fanout_check_died
  fanout_checks_in "$cws" "$sc" fanout_check_steps "$n" "$k" "$sc"
}

# fanout_check_steps N K SCRATCH: candidate K's checks (in its worktree: fanout_checks_in): verify.sh
# PASS_K times while it passes, the holdout checks and the judge, their records into
# SCRATCH/rec, the artifacts' names learnt and the result (fanout_check_one's).
fanout_check_steps() {
  local n=$1 k=$2 sc=$3 rec=$3/rec passed=0 total=0 runs=0 hold=- judge=- p
  checks_run_verify "$rec" "candidate $k"
  checks_tally_counts_v
  passed=${REPLY% *} total=${REPLY#* }
  if ((VERIFY_OK)); then
    runs=1
    while ((runs < PASS_K)); do
      checks_run_verify "$rec" "candidate $k, pass $((runs + 1)) of $PASS_K"
      ((VERIFY_OK)) || break
      runs=$((runs + 1))
    done
    if ((runs >= PASS_K)); then
      fanout_checks_keep_pass "$rec" || true
    fi
    if ((HOLDOUT_CHECKS > 0)); then
      holdout_run "$n" "$rec"
      hold=$VERIFY_FAIL
      if ((HOLDOUT_OK)); then hold=$VERIFY_PASS; fi
    fi
    # The judge weighs only a candidate that passed everything else.
    if [[ -n $JUDGE_CMD && $hold != "$VERIFY_FAIL" ]] && ((runs >= PASS_K)); then
      judge_run "$n" "$rec"
      judge=$VERIFY_FAIL
      if ((JUDGE_OK)); then judge=$VERIFY_PASS; fi
    fi
  else
    checks_feedback_write "$rec" "$n" 1
  fi
  for p in "${!ARTIFACT_NAMES[@]}"; do
    printf '%s\n' "$p"
  done >"$sc/artifacts.names"
  printf '%s %s %s %s %s %s %s\n' "$passed" "$total" "$runs" "$hold" "$judge" "$DEADLINE_HIT" "${CHECKS_CPU:--}" >"$sc/result.tmp" &&
    mv -f -- "$sc/result.tmp" "$sc/result"
}

# The candidate whose checks this subshell runs (for fanout_check_died).
FANOUT_CHECK_K=0
# fanout_check_died MESSAGE: orbit_die's last word in a candidate's check subshell: the
# candidate's checks stopped, this subshell alone exits (the runner finds no result).
fanout_check_died() {
  orbit_log "candidate $FANOUT_CHECK_K's checks stopped: $1"
  exit "$EXIT_BLOCKED"
}

# fanout_check_stop: a candidate's check subshell signalled (the runner stops): the run it
# is in is stopped, group and all, and the subshell exits without a result.
fanout_check_stop() {
  trap '' INT TERM HUP
  if [[ -n ${ORBIT_CHILD_PID:-} ]]; then
    proc_kill_group "$ORBIT_CHILD_PID" "$KILL_GRACE_S"
  fi
  if [[ -n ${ORBIT_WATCHDOG_PID:-} ]]; then
    kill -KILL -- "-$ORBIT_WATCHDOG_PID" 2>/dev/null || true
  fi
  exit $((128 + 15))
}

# fanout_checks_stop_all: on a signal, every candidate's check subshell is told to stop and
# waited for.
fanout_checks_stop_all() {
  local pid
  ((${#FANOUT_CHECK_PIDS[@]})) || return 0
  for pid in "${FANOUT_CHECK_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${FANOUT_CHECK_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  FANOUT_CHECK_PIDS=()
}

# fanout_check_take_v K CDIR: candidate K's checks as its subshell left them: their records
# moved into CDIR, their events journalled in the order they happened, the artifacts' names
# remembered, a deadline they hit the loop's. REPLY is "PASSED TOTAL RUNS HOLDOUT JUDGE CPU"
# (HOLDOUT and JUDGE - for none; CPU the share of one CPU its last verify run used, in
# thousandths, - unmeasured). Status 1 when the subshell left no result (it died: see
# runner.log).
fanout_check_take_v() {
  local cdir=$2 sc=$ORBIT_TMP/j$1 p count i
  local -a res=() f=() names=()
  REPLY=''
  [[ -f $sc/result && ! -L $sc/result ]] || return 1
  read -r -a res <"$sc/result" || true
  ((${#res[@]} == 7)) || return 1
  for i in 0 1 2 5; do
    orbit_is_uint "${res[i]}" || return 1
  done
  orbit_is_uint "${res[6]}" || res[6]=-
  for p in "$sc/rec"/* "$sc/rec"/.[!.]*; do
    [[ -e $p || -L $p ]] || continue
    rm -rf -- "${cdir:?}/${p##*/}"
    mv -f -- "$p" "$cdir/"
  done
  if [[ -f $sc/events.q ]]; then
    while IFS= read -r -d '' count; do
      orbit_is_uint "$count" || break
      f=()
      for ((i = 0; i < count; i++)); do
        IFS= read -r -d '' p || break 2
        f+=("$p")
      done
      if ((${#f[@]} >= 2)); then state_event "${f[@]}"; fi
    done <"$sc/events.q"
  fi
  if [[ -f $sc/artifacts.names ]]; then
    mapfile -t names <"$sc/artifacts.names"
    ((${#names[@]} == 0)) || evidence_artifacts_remember "${names[@]}"
  fi
  if ((res[5])); then
    deadline_hit
  fi
  REPLY="${res[0]} ${res[1]} ${res[2]} ${res[3]} ${res[4]} ${res[6]}"
  rm -rf -- "$sc"
}
