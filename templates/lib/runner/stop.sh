# ---- the run's end: its one loop_stop (stop_record), the signals before the stop and once it
# ---- is recorded, and the last resort of a shell that dies without its footer (stop_on_exit).
# Whether this run journaled its loop_stop (a run journals one).
STOP_RECORDED=0

# stop_record STATUS REASON CODE [KEY VALUE]...: the run's one loop_stop in the journal; a
# second call records nothing.
stop_record() {
  ((!STOP_RECORDED)) || return 0
  STOP_RECORDED=1
  state_event loop_stop "$CUR_ITER" status "$1" reason "$2" exit_code "$3" "${@:4}"
}

# stop_hold_signals: from here on the stop being recorded is the run's: a signal only cuts the
# wait for notifications short (notify_cut); it never rewrites the stop, its journal or its
# exit code.
stop_hold_signals() {
  trap 'notify_cut INT' INT
  trap 'notify_cut TERM' TERM
  trap 'notify_cut HUP' HUP
}

# stop_record_failure CODE WHAT: the loop_stop of a run that failed unexpectedly (exit CODE):
# its state is the last checkpoint, which the journal's stop names (STATE_ON_DISK); nothing
# when there is no state or journal yet, or the loop directory is not the runner's to write.
stop_record_failure() {
  [[ -n $STATE_ON_DISK && -n $EV_FILE ]] && trust_loop_dir_whole || return 0
  stop_record "${STATE_ON_DISK%% *}" "${STATE_ON_DISK#* }" "$1" error "$2"
}

# stop_on_exit (the EXIT trap): the last resort of a run that ends without its footer. bash ends
# the shell at once, running no ERR trap, on an error it raises while expanding a word (an
# unbound variable, a bad array subscript): the footer is printed here and the stop journaled
# as an internal failure, best effort (nothing here may fail, nor write where the runner
# may not); the exit code is the shell's, or EXIT_FAILURE for a run that claimed success.
# (An orbit_die that printed no footer ends here too, with its own exit code.)
stop_on_exit() {
  local rc=$? why
  [[ $BASHPID == "$$" ]] && ((!FOOTER_DONE)) || return 0
  trap - ERR
  trap '' INT TERM HUP
  set +eu
  ((rc != 0)) || rc=$EXIT_FAILURE
  why="the runner ended (exit $rc) without its footer"
  orbit_log "internal error: $why (what it said last is above); a rerun resumes from the last checkpoint"
  stop_record_failure "$rc" "$why"
  why="internal error: $why; see runner.log, a rerun resumes from the last checkpoint"
  { config_footer "$STATUS_CONTINUE" "$why" >&8; } 2>/dev/null || config_footer "$STATUS_CONTINUE" "$why"
  exit "$rc"
}

# ---- signals: kill the agent's group, keep a resumable state, exit 128+n.
stop_on_signal() {
  local sig=$1 num=$2 text
  trap '' INT TERM HUP
  # Best effort from here on: the state must be saved even if the terminal is gone.
  trap - ERR
  set +e
  orbit_log "received SIG$sig: stopping the agent and saving a resumable state"
  fanout_stop_all
  if [[ -n $ORBIT_CHILD_PID ]]; then
    proc_kill_group "$ORBIT_CHILD_PID" "$KILL_GRACE_S"
  fi
  if [[ -n $ORBIT_WATCHDOG_PID ]]; then
    kill -KILL -- "-$ORBIT_WATCHDOG_PID" 2>/dev/null || true
  fi
  agent_live_close "=== orbit: SIG$sig; the agent was stopped ==="
  # Notifications still being delivered carry the loop's mark: the sweep stops them too.
  sweep_env "ORBIT_OWNER=$LOOP_DIR"
  if ((IN_ITERATION)) && [[ -n $PG_FILE ]]; then
    text="## Iteration $CUR_ITER — INTERRUPTED"$'\n'"- at: $(orbit_iso_now)"$'\n'"- decision: SIG$sig; the iteration reruns on the next start"$'\n'
    state_progress_append "$CUR_ITER" "$text"
  fi
  if ((${#S[@]} > 0)); then
    S[LAST_STATUS]=$STATUS_CONTINUE
    S[STOP_REASON]=$REASON_SIGNAL
    resume_save_state
    stop_record "$STATUS_CONTINUE" "$REASON_SIGNAL" "$((128 + num))" signal "$sig"
  fi
  lock_release
  config_footer "$STATUS_CONTINUE" "interrupted by SIG$sig; a rerun resumes at iteration ${S[NEXT_ITERATION]:-1}"
  exit "$((128 + num))"
}

# ---- the gates. stop_gates hold after every iteration (budget, loop timeout, MAX_ITERATIONS,
# ---- in the contract's order); stop_gates_check add the circuit and the pins before an agent runs.
stop_gates() {
  local n=${S[NEXT_ITERATION]} now elapsed run_spent
  printf -v now '%(%s)T' -1
  if [[ -n $USD_CAP_M ]] && ((S[COST_MICROUSD] >= USD_CAP_M)); then
    local over=''
    if ((S[COST_MICROUSD] > USD_CAP_M)); then
      # A run cannot be stopped mid-way for money: its reported cost is known only after it.
      over=" (\$$(orbit_usd_text $((S[COST_MICROUSD] - USD_CAP_M))) over: the last iteration cost more than the room left when it started)"
    fi
    resume_finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "spent \$$(orbit_usd_text "${S[COST_MICROUSD]}") of the \$$(orbit_usd_text "$USD_CAP_M") cap$over; raise USD_CAP to go on"
  fi
  run_spent=$((S[COST_MICROUSD] - RUN_COST_START))
  if [[ -n $USD_PER_RUN_CAP_M ]] && ((run_spent >= USD_PER_RUN_CAP_M)); then
    resume_finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "this run spent \$$(orbit_usd_text "$run_spent"), the per-run cap; rerun to go on"
  fi
  if [[ -n $USD_PER_ITER_CAP_M ]] && ((n > 1)) && record_ledger_iter_sum_v $((n - 1)) && ((REPLY >= USD_PER_ITER_CAP_M)); then
    resume_finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "iteration $((n - 1)) cost at least the per-iteration cap; raise USD_PER_ITER_CAP to go on"
  fi
  if ((LOOP_TIMEOUT_S > 0 && S[STARTED_AT] > 0)); then
    elapsed=$((now - S[STARTED_AT]))
    if ((elapsed < 0)); then
      elapsed=0
    fi
    if ((elapsed >= LOOP_TIMEOUT_S)); then
      resume_finish "$EXIT_LOOP_TIMEOUT" "$STATUS_BLOCKED" "$REASON_LOOP_TIMEOUT" "the loop's wall-clock limit ($LOOP_TIMEOUT) is reached"
    fi
  fi
  if ((n > MAX_ITERATIONS)); then
    if orbit_true "$WRAPUP_ON_LIMIT" && [[ ${S[STOP_REASON]} != "$REASON_MAX_ITERATIONS" ]]; then
      stop_wrapup "$((n - 1))"
    fi
    resume_finish "$EXIT_EXHAUSTED" "$STATUS_BLOCKED" "$REASON_MAX_ITERATIONS" "MAX_ITERATIONS ($MAX_ITERATIONS) used up without DONE; see notes.md, raise MAX_ITERATIONS to go on"
  fi
}

stop_gates_check() {
  local n=${S[NEXT_ITERATION]} now est
  printf -v now '%(%s)T' -1
  stop_gates
  # An iteration is not started when what it is expected to cost would cross the cap: the
  # estimate is the last iteration's cost, or COST_ESTIMATE_USD when that is more.
  if [[ -n $USD_CAP_M ]]; then
    est=${COST_ESTIMATE_M:-0}
    if ((n > 1)) && record_ledger_iter_sum_v $((n - 1)) && ((REPLY > est)); then
      est=$REPLY
    fi
    if ((est > 0 && S[COST_MICROUSD] + est > USD_CAP_M)); then
      resume_finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "spent \$$(orbit_usd_text "${S[COST_MICROUSD]}") of the \$$(orbit_usd_text "$USD_CAP_M") cap; the next iteration would cost about \$$(orbit_usd_text "$est") (the last one's cost) and cross it: raise USD_CAP to go on"
    fi
  fi
  if ((FANOUT_N > 1)); then
    fanout_budget
  fi
  if [[ ${S[CB_STATE]} == "$CB_OPEN" ]]; then
    if ((now - S[CB_OPENED_AT] >= CB_COOLDOWN_S)); then
      state_event circuit_change "$n" from "$CB_OPEN" to "$CB_HALF_OPEN"
      S[CB_STATE]=$CB_HALF_OPEN
      orbit_log "circuit half-open after its cooldown: one probe iteration"
    else
      resume_finish "$EXIT_BLOCKED" "$STATUS_BLOCKED" "$REASON_CIRCUIT_OPEN" "circuit open since $(orbit_iso "${S[CB_OPENED_AT]}"); it half-opens after $CB_COOLDOWN, or run orbit recover --reset-circuit"
    fi
  fi
  trust_integrity_gate "before agent" || trust_integrity_stop
}

# stop_blocked_at_rest: a loop BLOCKED because its agent could not be run (tool_failure: the CLI
# missing, not permitted, its credentials refused) waits for a human, as a stopped or
# ABORTED loop does: a later run ends here with exit 14, running and spending nothing, and
# says why and what moves it on (fix the cause, then orbit recover). A refused commit is
# the one exception: the next run tries that commit again first (commit_retry_failed).
stop_blocked_at_rest() {
  local n=$((S[NEXT_ITERATION] - 1)) dir line='' why='the agent could not be run'
  [[ ${S[LAST_STATUS]} == "$STATUS_BLOCKED" && ${S[STOP_REASON]} == "$REASON_TOOL_FAILURE" ]] || return 0
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  if [[ -f $dir/commit.txt ]] && IFS= read -r line <"$dir/commit.txt" && [[ $line == failed ]]; then
    return 0
  fi
  if ((n >= 1)) && resume_result_trusted "$n" "$dir/result.env"; then
    record_result_read "$dir/result.env"
    why=${R[SUMMARY]:-$why}
  fi
  why=${why//[[:cntrl:]]/ }
  lock_release
  config_footer "$STATUS_CONTINUE" "BLOCKED (tool_failure): fix the cause, then orbit recover; $why"
  orbit_log "the loop is BLOCKED (tool_failure) since iteration $n: $why"
  orbit_die "$EXIT_BLOCKED" "nothing runs until a human fixes the cause (argv in loop.toml, PATH, the CLI's login or key), then runs 'orbit recover $LOOP_DIR' (or bash $LOOP_DIR/recover.sh)"
}

# One wrap-up run when MAX_ITERATIONS is used up: the agent writes what remains to notes.md.
stop_wrapup() {
  local n=$1 dir
  dir="$LOOP_DIR/iterations/wrapup"
  mkdir -p -- "$dir"
  prompt_build "$n" "$PHASE_WRAPUP" 1 "$dir/prompt.md" ""
  agent_run "$n" "$PHASE_WRAPUP" 1 "$dir/prompt.md" "$dir/agent.log" "$dir/cost.usd" ""
  trust_integrity_gate "after wrap-up" || trust_integrity_stop
  record_cost_of_run "$dir/agent.log" "$dir/cost.usd"
  record_ledger_append "$n" "$RUN_COST_M" "$RUN_COST_KIND" "" "$RUN_COST_SOURCE"
  S[COST_MICROUSD]=$LEDGER_TOTAL
  record_run_usage
  state_event agent_exit "$n" phase "$PHASE_WRAPUP" attempt 1 exit_code "$AGENT_RC" seconds "$AGENT_SECS" "${RUN_USAGE[@]}"
}

# stop_check_passed NAME: status 0 when the last verify run's tally says NAME passed.
stop_check_passed() {
  checks_tally_counts_v
  [[ ${REPLY%% *} != 0 ]] && grep -qxF -- "PASS $1" "$VERIFY_TALLY_FILE" 2>/dev/null
}

# The red gate: a verify that passes on the untouched tree proves nothing. Per check: a
# reproduction check that passes already reproduces nothing (vacuous_verify, exit 17); a
# regression check that fails before the agent started is the environment's or the
# project's, not the agent's to fix (preflight, exit 2).
stop_red_gate() {
  local dir="$LOOP_DIR/iterations/baseline" c bad=''
  mkdir -p -- "$dir"
  # A red gate run again (the run before it ended before iteration 1) counts afresh.
  rm -f -- "$dir/counts.tsv"
  sandbox_net_red_gate_begin
  checks_run_verify "$dir" "red gate: the untouched tree"
  [[ -n $TRUST_BAD ]] && return 0
  # The loop's wall-clock limit reached before the checks could end (a long setup): nothing
  # is known of the untouched tree.
  if ((DEADLINE_HIT)); then
    resume_finish "$EXIT_LOOP_TIMEOUT" "$STATUS_BLOCKED" "$REASON_LOOP_TIMEOUT" "the loop's wall-clock limit ($LOOP_TIMEOUT) is reached before the red gate's checks ended on the untouched tree (see iterations/baseline/verify.log)"
  fi
  # A host the checks were refused on the untouched tree: the loop stops before any agent.
  sandbox_net_red_gate_end
  stop_red_gate_can_run
  counts_base_take
  for c in "${CHECKS_REGRESSION[@]}"; do
    stop_check_passed "$c" || bad+="${bad:+, }$c"
  done
  if [[ -n $bad ]]; then
    state_event verify_fail 0 run red_gate code "$CODE_REGRESSION_RED" failing "${bad//, /,}"
    stop_red_gate_differences_v
    resume_finish "$EXIT_PREFLIGHT" "$STATUS_BLOCKED" "$REASON_PREFLIGHT" "regression check(s) fail on the untouched tree, before the agent did anything: $bad. A regression check must pass before the change: fix the check or the project (see iterations/baseline/verify.log), then run again.$REPLY"
  fi
  for c in "${CHECKS_REPRODUCTION[@]}"; do
    if stop_check_passed "$c"; then
      bad+="${bad:+, }$c"
    fi
  done
  if [[ -n $bad ]]; then
    state_event verify_pass 0 run red_gate code "$CODE_VACUOUS_VERIFY" passing "${bad//, /,}"
    resume_finish "$EXIT_VACUOUS_VERIFY" "$STATUS_BLOCKED" "$REASON_VACUOUS_VERIFY" "reproduction check(s) already pass on the untouched tree: $bad. A reproduction must fail before the change, or it reproduces nothing: fix the check (see iterations/baseline/verify.log)"
  fi
  if ((VERIFY_OK)); then
    if orbit_true "$ALLOW_GREEN_START"; then
      orbit_log "verify already passes on the untouched tree (ALLOW_GREEN_START=1): going on"
      state_event verify_pass 0 run red_gate allowed true
      return 0
    fi
    state_event verify_pass 0 run red_gate code "$CODE_VACUOUS_VERIFY"
    resume_finish "$EXIT_VACUOUS_VERIFY" "$STATUS_BLOCKED" "$REASON_VACUOUS_VERIFY" "verify.sh already passes before the agent did anything: it proves nothing. Add a check that fails now, or set ALLOW_GREEN_START=1"
  fi
  state_event verify_fail 0 run red_gate
}

# stop_red_gate_differences_v: REPLY is what sets the workspace apart from the user's checkout, for
# a check that fails on the untouched tree ("" when nothing is seen): files the user's
# checkout has that git ignores and the fresh checkout lacks (node_modules, a virtual
# environment, a generated file), and files of the user's checkout the checks' output names
# (an editable install, a package resolved up the tree).
stop_red_gate_differences_v() {
  local p absent='' outside='' n=0 m=0 ws_rel='' loop_rel=''
  [[ $WS == "$REPO_ROOT"/* ]] && ws_rel=${WS#"$REPO_ROOT"/}
  [[ $LOOP_DIR == "$REPO_ROOT"/* ]] && loop_rel=${LOOP_DIR#"$REPO_ROOT"/}
  while IFS= read -r -d '' p; do
    case /$p in
      /.orbit/* | /.orbit-agent/*) continue ;;
    esac
    [[ -n $ws_rel && ( $p == "$ws_rel"* || $ws_rel/ == "$p"* ) ]] && continue
    [[ -n $loop_rel && ( $p == "$loop_rel"* || $loop_rel/ == "$p"* ) ]] && continue
    [[ -e $WS/$p || -L $WS/$p ]] && continue
    ((n < 5)) && absent+="${absent:+, }$p"
    n=$((n + 1))
  done < <(config_repo_git ls-files -z --others --ignored --exclude-standard --directory 2>/dev/null || true)
  while IFS= read -r p; do
    [[ $p == "$WS"/* || $p == "$LOOP_DIR"/* || $p == "$REPO_ROOT/.orbit/"* ]] && continue
    ((m < 3)) && outside+="${outside:+, }$p"
    m=$((m + 1))
  done < <(awk -v root="$REPO_ROOT/" '{
    s = $0
    while ((i = index(s, root)) > 0) {
      s = substr(s, i)
      if (!match(s, /^[^[:space:]:"),]+/)) break
      p = substr(s, 1, RLENGTH)
      if (!(p in seen)) { seen[p] = 1; print p }
      s = substr(s, RLENGTH + 1)
    }
  }' "$LOOP_DIR/iterations/baseline/verify.log" 2>/dev/null | head -n 20 || true)
  REPLY=''
  ((n <= 5)) || absent+=', ...'
  if ((n)); then
    REPLY+=" Your checkout has $n ignored path(s) this fresh checkout lacks: ${absent//[[:cntrl:]]/?}: if the checks need them, make them with a --setup (e.g. npm ci, a virtual environment)."
  fi
  if ((m)); then
    REPLY+=" The checks' output names files of your checkout, not of the workspace: ${outside//[[:cntrl:]]/?} (an editable install, or a package found up the directory tree?): install the project into the workspace with a --setup."
  fi
}

# stop_cannot_run_fix_v LINE: REPLY is what to do about a check that could not run, from the line
# of its output that said so (LINE): the program or #! interpreter it names by a path that
# the sandbox hides (one under its private /tmp) or that does not exist on this machine;
# else, what it needs installed. REPLY_HAND is 1 when running verify.sh by hand shows it
# (nothing the sandbox hides).
stop_cannot_run_fix_v() {
  local line=$1 p='' what='The program' first=''
  REPLY_HAND=1
  # Maven, which could not fetch an artifact from a repository (verify.sh): what a check
  # needs is the setup's to fetch, on the user's tree with the network.
  if [[ $line =~ ^(Cannot access|Could not transfer .* from/to)\ ([^ ]+\ \(([^\)]*)\)) ]]; then
    p=${BASH_REMATCH[3]#*://} what='Maven cannot write its local repository (read-only to the checks)' REPLY_HAND=0
    p=${p%%/*} p=${p##*@}
    [[ $line != C*offline* ]] || what='Maven runs offline (-o, or MAVEN_ARGS=--offline of offline-env)' REPLY_HAND=1
    if [[ -n $p && $p != *:* ]]; then
      p+=:80
      [[ ${BASH_REMATCH[3]} != https:* ]] || p=${p%80}443
    fi
    REPLY="$what: it cannot fetch what the check needs from ${BASH_REMATCH[2]}, which its local repository lacks. Fetch that in the setup, which runs on your tree with the network: one that runs the check's goals once (mvn -B -Dmaven.test.failure.ignore=true verify, say) in setup = [...] in loop.toml, then orbit init --force.${p:+ Or the checks fetch it, online, into a local repository they can write (-Dmaven.repo.local=/tmp/m2), with allow-hosts = [\"$p\"] in loop.toml (orbit init --allow-host $p).}"
    return 0
  fi
  case $line in
    *': cannot execute: required file not found')
      # A script whose #! interpreter is missing: its first line names it.
      p=${line%: cannot execute: required file not found}
      p=${p##*: }
      [[ $p == /* ]] || p=$WS/$p
      if [[ -f $p && ! -L $p ]]; then
        IFS= read -r first <"$p" 2>/dev/null || true
      fi
      p=''
      if [[ $first == '#!'* ]]; then
        first=${first#'#!'}
        first=${first#"${first%%[![:space:]]*}"}
        p=${first%%[[:space:]]*}
        what="The #! interpreter"
      fi
      ;;
    *': bad interpreter: '*)
      p=${line%%: bad interpreter: *}
      p=${p##*: }
      what="The #! interpreter"
      ;;
    env:\ *': No such file or directory' | */env:\ *': No such file or directory')
      # env's quotes are the locale's (ASCII, or typographic ones): what is not a name goes.
      p=${line#*env: }
      p=${p%: No such file or directory}
      p=${p#"${p%%[/A-Za-z0-9._+-]*}"}
      p=${p%"${p##*[/A-Za-z0-9._+-]}"}
      what="The #!/usr/bin/env interpreter"
      ;;
    *': No such file or directory') p=${line%: No such file or directory} p=${p##*: } ;;
    *"can't open file '/"*) p=${line#*"can't open file '"} p=${p%%"'"*} ;;
  esac
  p=${p//[[:cntrl:]]/?}
  if [[ $p == /* ]] && sandbox_hides_v "$p"; then
    REPLY_HAND=0
    REPLY="$what $p is on this machine, but the sandbox does not show it to the checks (${REPLY:-a path it hides}). Move the program into the repository (commit it, and call it by its path there), or run the loop without the sandbox: sandbox = \"none\" in loop.toml, then orbit init --force (orbit init --sandbox none for a new loop)."
  elif [[ $p == /* && ! -e $p && ! -L $p ]]; then
    REPLY="$what $p does not exist on this machine: fix the check (or install it there)."
  elif [[ $what != 'The program' && -n $p && $p != /* ]]; then
    REPLY="$what $p is not on this machine's PATH: install it (or fix the #! line)."
  else
    REPLY="Install what it needs (or run it through the project's environment, or make it with a --setup)."
  fi
}

# stop_red_gate_can_run: a check that could not run at all on the untouched tree (its program or
# interpreter not found, or hidden by the sandbox; its test runner's module missing; Maven
# unable to fetch what it needs; a host the sandbox's network does not give it) is the
# environment's, not a red start: the loop stops in preflight, naming the check, what it
# said and the fix, before any agent runs.
stop_red_gate_can_run() {
  local word name why cause fix hand=1
  checks_tally_counts_v
  [[ ${REPLY#* } != 0 ]] || return 0
  while read -r word name why; do
    [[ $word == FAIL && $why == cannot-run:* ]] || continue
    why=${why#cannot-run: }
    if [[ $why == net:* ]]; then
      # A refused or unreachable connection: the sandbox's network only when the runner
      # finds it so; else an honest failure.
      why=${why#net: }
      sandbox_net_cannot_reach_v "$why" || continue
      fix=$REPLY
      hand=0
    else
      stop_cannot_run_fix_v "$why"
      fix=$REPLY
      hand=$REPLY_HAND
    fi
    state_event verify_fail 0 run red_gate code "$CODE_CHECK_CANNOT_RUN" failing "$name"
    orbit_cut_v "$why" 160
    cause=$REPLY
    REPLY=''
    if ((hand)); then
      stop_red_gate_differences_v
      fix+=" Check it by hand with bash $LOOP_DIR/verify.sh, then run again"
    else
      fix+=" Then run again"
    fi
    resume_finish "$EXIT_PREFLIGHT" "$STATUS_BLOCKED" "$REASON_PREFLIGHT" "the check $name cannot run on the untouched tree ($cause): it would fail whatever the agent did. $fix (see iterations/baseline/verify.log).$REPLY"
  done <"$VERIFY_TALLY_FILE"
}

# stop_runner_gone: status 0 when the runner's own shell ($$) has died (no such process,
# or a zombie), as seen from a subshell that outlived it.
stop_runner_gone() {
  local st='' rc=0
  st=$(ps -o stat= -p "$$" 2>/dev/null) || rc=$?
  st=${st//[[:space:]]/}
  [[ $st == Z* ]] || { ((rc == 1)) && [[ -z $st ]]; }
}

# An unexpected failure: say where, keep the footer contract, exit 1. State on disk is
# whatever the last atomic write left; a rerun resumes from it.
stop_internal_error() {
  local avail
  trap - ERR
  # In a subshell (a command substitution) the error is logged and the subshell exits:
  # its parent fails in turn and prints the one footer of the run.
  if [[ $BASHPID != "$$" ]]; then
    # A SIGKILL of the runner leaves the subshells it had running; what then fails in one
    # (a write to the dead runner's pipe: SIGPIPE) is the kill's doing, not an internal
    # error: the subshell exits without a word, and the records show the crash it was.
    if stop_runner_gone; then
      exit "$EXIT_FAILURE"
    fi
    orbit_log "internal error: run-loop.sh line $1: '$2' failed (status $3)"
    exit "$EXIT_FAILURE"
  fi
  # A write that failed because the loop's disk is full, or under a file-size limit, is
  # named as such.
  avail=$(df -Pk -- "${LOOP_DIR:-.}" 2>/dev/null | awk 'NR==2 {print $4}' || true)
  if [[ $avail =~ ^[0-9]+$ ]] && ((avail < 1024)); then
    orbit_log "error: cannot write: the loop's disk is full (${avail} KB free; run-loop.sh line $1: '$2' failed): free space, then rerun; the last checkpoint is intact"
    config_footer "$STATUS_CONTINUE" "disk full: free space on the loop's disk, then rerun; it resumes from the last checkpoint" >&8
    exit "$EXIT_STATE_CORRUPT"
  fi
  if [[ $(ulimit -f) != unlimited ]]; then
    orbit_log "error: cannot write under a file-size limit (ulimit -f $(ulimit -f))? run-loop.sh line $1: '$2' failed (status $3): raise the limit, then rerun; the last checkpoint is intact"
    config_footer "$STATUS_CONTINUE" "failed under a file-size limit (ulimit -f $(ulimit -f)): raise it, then rerun; it resumes from the last checkpoint" >&8
    exit "$EXIT_STATE_CORRUPT"
  fi
  orbit_log "internal error: run-loop.sh line $1: '$2' failed (status $3)"
  stop_record_failure "$EXIT_FAILURE" "run-loop.sh line $1 failed (status $3)"
  config_footer >&8 "$STATUS_CONTINUE" "internal error at run-loop.sh line $1; a rerun resumes from the last checkpoint"
  exit "$EXIT_FAILURE"
}
