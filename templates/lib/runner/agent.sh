# ---- the live view: .run-tmp/agent.live holds the agent's output as it is written (what
# `orbit logs -f` follows), a header line before each agent run and an exit line after it.
# It starts over at each run, and before an agent run once it holds more than
# AGENT_LOG_MAX bytes; each run adds at most AGENT_LOG_MAX bytes of output. The copy is made
# by a process of the runner's own group, so killing the agent's group never loses what
# the agent had written.
LIVE_FD=
LIVE_PID=

# agent_live_reset: a new, empty agent.live (a new file: a follower holding the old one sees it).
agent_live_reset() {
  rm -f -- "$ORBIT_TMP/agent.live.tmp"
  : >"$ORBIT_TMP/agent.live.tmp"
  state_mv "$ORBIT_TMP/agent.live.tmp" "$ORBIT_TMP/agent.live"
}

# agent_live_copy CAP FILE: appends at most CAP bytes of standard input to FILE as they come,
# then a note if there was more, and reads the rest to its end (the writer never meets a
# closed pipe). head buffers what it writes to a file: unbuffered through stdbuf, else dd
# copies byte by byte (slower, as live).
agent_live_copy() {
  local cap=$1 live=$2 c
  trap - ERR
  trap '' INT TERM HUP
  set +e
  if ! command -v stdbuf >/dev/null 2>&1 || ! stdbuf -o0 head -c "$cap" >>"$live" 2>/dev/null; then
    dd bs=1 count="$cap" >>"$live" 2>/dev/null
  fi
  # One byte, whatever it is (-d '': a NUL ends the read instead of being skipped).
  if IFS= read -r -d '' -n 1 c; then
    printf '\n[orbit: the live view of this run stops at %s bytes; agent.log keeps its end]\n' "$cap" >>"$live"
    cat >/dev/null
  fi
}

# agent_live_open N PHASE ATTEMPT: the header line, then the copy on the descriptor LIVE_FD.
agent_live_open() {
  local live="$ORBIT_TMP/agent.live"
  if [[ ! -f $live || -L $live ]] || (($(wc -c <"$live") > AGENT_LOG_MAX)); then
    agent_live_reset
  fi
  printf '=== orbit: iteration %s, %s, attempt %s, started %s ===\n' "$1" "$2" "$3" "$(orbit_iso_now)" >>"$live"
  # Nothing of the runner's but the pipe: not its lock, nor its output (a caller that
  # waits for the runner's output to end must not wait for this copy too).
  exec {LIVE_FD}> >(
    exec 7<&- 8>&- 9>&- >/dev/null 2>&1
    agent_live_copy "$AGENT_LOG_MAX" "$live"
  )
  LIVE_PID=$!
}

# agent_live_close [LINE]: closes the copy's descriptor, gives it up to 5 s to write what is left
# in the pipe, then appends LINE (on a line of its own).
agent_live_close() {
  local line=${1:-} live="$ORBIT_TMP/agent.live" i
  [[ -z $LIVE_FD ]] && return 0
  exec {LIVE_FD}>&-
  LIVE_FD=
  # The copy ends within milliseconds of the pipe's close: looked at every 10 ms for the
  # first 200 ms, then every 100 ms, 5 s in all.
  for ((i = 0; i < 68; i++)); do
    kill -0 "$LIVE_PID" 2>/dev/null || break
    if ((i < 20)); then
      sleep 0.01
    else
      sleep 0.1
    fi
  done
  # Still there: something the agent left holds the pipe open. The copy is the runner's
  # own: it never outlives the run.
  if kill -0 "$LIVE_PID" 2>/dev/null; then
    orbit_log "the live view's copy did not end within 5s of the agent's exit: stopped"
    kill -KILL "$LIVE_PID" 2>/dev/null || true
  fi
  LIVE_PID=
  # (Never through a link: agent.live's, .run-tmp's or the loop directory's own.)
  if [[ -n $line && -f $live && ! -L $live && ! -L $ORBIT_TMP ]] && trust_loop_dir_whole; then
    if (($(tail -c 1 -- "$live" | tr -d '\n' | wc -c))); then
      printf '\n' >>"$live"
    fi
    printf '%s\n' "$line" >>"$live"
  fi
}

# ---- the agent
# The last agent run: its exit status, whether its timeout stopped it, its seconds, and the
# attempt it was (of agent_attempts).
AGENT_RC=0
AGENT_TIMED_OUT=0
AGENT_SECS=0
ATTEMPT=0
# agent_run_is RC TIMED_OUT SECONDS: the last agent run is one its caller ran elsewhere (the
# fan-out's survivor, in its candidate's subshell).
agent_run_is() {
  AGENT_RC=$1 AGENT_TIMED_OUT=$2 AGENT_SECS=$3
}

# agent_capture LIVE_FD: the capture of an agent run's output, a process of its own that
# agent_wrapper starts without the run's marker: the output goes to the live view (LIVE_FD)
# and its first and last ORBIT_HALF bytes to ORBIT_OUT.head and ORBIT_OUT.tail. It ignores
# the TERM of a timeout: it ends when the output does.
agent_capture() {
  trap '' TERM PIPE
  tee -- "/dev/fd/$1" | {
    head -c "$ORBIT_HALF" >"$ORBIT_OUT.head"
    tail -c "$ORBIT_HALF" >"$ORBIT_OUT.tail"
  }
}

# agent_wrapper NAME=VALUE... -- CMD...: the wrapper of an agent run, run by a bash of its
# own (ORBIT_AGENT_WRAPPER) in the run's own process group. The run's variables come as
# arguments and are exported here, so that only the wrapper and the agent carry them (not
# the runner, its watchdog, nor a trap that runs meanwhile). The agent gets a process group of
# its own; its output goes to the capture, which is not in that group. When the agent's
# main process exits, what it left is stopped at once: its group, then anything carrying
# the run's marker, so that a process holding the agent's output open neither turns the
# exit into a timeout nor keeps the output from ending; each one is named (pid and command
# line) in $ORBIT_OUT.swept, which the runner logs. Started through the subreaper's perl
# (ORBIT_SUBREAPER set: sweep_reaper_v), the wrapper is the subreaper of everything the
# agent starts, and what it adopted is stopped too (proc_adopted_sweep): a daemon that
# shed both the group and the mark. A TERM (the timeout) is passed on to the agent's group.
agent_wrapper() {
  local live cap cpid apid rc f p i g st c swept mark seen reaping=${ORBIT_SUBREAPER:-}
  local -a left=()
  unset ORBIT_SUBREAPER
  while (($#)) && [[ $1 != -- ]]; do
    export "${1?}"
    shift
  done
  shift
  cd -- "$ORBIT_WORKSPACE" || exit 126
  if [[ -n $ORBIT_FB ]]; then
    export ORBIT_FEEDBACK_FILE=$ORBIT_FB
  else
    unset ORBIT_FEEDBACK_FILE
  fi
  unset ORBIT_FB
  live=$ORBIT_LIVE_FD
  swept=$ORBIT_OUT.swept
  mark=ORBIT_RUN_ID=$ORBIT_RUN_ID
  unset ORBIT_LIVE_FD
  # shellcheck disable=SC2016  # expanded by the capture's bash, by design
  exec {cap}> >(
    unset ORBIT_RUN_ID
    exec "$BASH" -c "$(declare -f agent_capture); agent_capture \"\$1\"" orbit-capture "$live"
  )
  cpid=$!
  unset ORBIT_OUT ORBIT_HALF
  set -m
  "$@" >&"$cap" 2>&1 {live}>&- {cap}>&- &
  apid=$!
  set +m
  exec {cap}>&- {live}>&-
  # shellcheck disable=SC2064  # the agent's group, named now
  trap "kill -TERM -- -$apid 2>/dev/null" TERM
  while :; do
    rc=0
    wait "$apid" || rc=$?
    if ((rc > 128)) && kill -0 "$apid" 2>/dev/null; then continue; fi
    break
  done
  trap "" TERM
  # What is left is listed by a ps and a grep run without the marker, never taken for it.
  seen=" $$ "
  if kill -0 -- "-$apid" 2>/dev/null; then
    while read -r g st p c; do
      [[ $g == "$apid" && $st != Z* ]] || continue
      printf "%s %s\n" "$p" "${c:0:80}" >>"$swept"
      seen+="$p "
    done < <(
      unset ORBIT_RUN_ID
      exec ps -A -o pgid= -o stat= -o pid= -o args= 2>/dev/null
    )
    wait "$!" 2>/dev/null || true
    kill -KILL -- "-$apid" 2>/dev/null
  fi
  mapfile -t left < <(
    unset ORBIT_RUN_ID
    exec grep -lzxF -- "$mark" /proc/[0-9]*/environ 2>/dev/null
  )
  wait "$!" 2>/dev/null || true
  for f in "${left[@]}"; do
    p=${f#/proc/}
    p=${p%%/*}
    [[ $seen == *" $p "* ]] && continue
    c=$({ tr "\0" " " <"/proc/$p/cmdline"; } 2>/dev/null | cut -c1-80)
    kill -KILL "$p" 2>/dev/null && printf "%s %s\n" "$p" "$c" >>"$swept"
  done
  if [[ $reaping == 1 ]]; then
    proc_adopted_sweep "$BASHPID" "$cpid"
    for c in "${REPLY_SWEPT[@]}"; do
      printf "%s\n" "$c" >>"$swept"
    done
  fi
  # The capture ends as soon as it has read the output's end: looked at after 2, 4, 8, 16
  # and 32 ms, then every 50 ms, for 5 s at most.
  for i in 0.002 0.004 0.008 0.016 0.032; do
    kill -0 "$cpid" 2>/dev/null || break
    sleep "$i"
  done
  for ((i = 0; i < 100; i++)); do
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$cpid" 2>/dev/null; then
    echo "[orbit: a process outside the agent's reach still held its output 5s after it exited: the capture was stopped]"
    kill -KILL "$cpid" 2>/dev/null
  fi
  exit "$rc"
}

# The wrapper's script: the two functions above and the call, for `bash -c`.
ORBIT_AGENT_WRAPPER="$(declare -f agent_capture proc_kids_v proc_adopted_sweep agent_wrapper)"$'\nagent_wrapper "$@"'

# agent_swept_log: logs what the wrapper swept when the agent exited, as sweep_env logs
# what it sweeps (one line each, at most 100).
agent_swept_log() {
  local pid cmd i=0
  [[ -f $ORBIT_TMP/agent.swept && ! -L $ORBIT_TMP/agent.swept ]] || return 0
  while ((i++ < 100)) && read -r pid cmd; do
    if [[ $pid =~ ^[0-9]+$ ]]; then
      orbit_log "sweeping leftover process $pid (${cmd//[^[:print:]]/?})"
    fi
  done <"$ORBIT_TMP/agent.swept"
}

# agent_run N PHASE ATTEMPT PROMPT LOG COSTFILE FEEDBACK [CANDIDATE]: sets AGENT_RC,
# AGENT_TIMED_OUT, AGENT_SECS. CANDIDATE (0, the default: the loop's own agent) is the
# fan-out candidate the run is, in its subshell: the runner's looks (trust_check) and its
# timings are then the runner's to take, after every candidate ended.
# The agent runs in the workspace in its own process group, stdin from the prompt (its
# folder .orbit-agent/ filled first, its notes and cost read back after);
# its output is capped to AGENT_LOG_MAX bytes (the first and last halves are kept) and
# copied as it comes into the live view (agent_live_open).
agent_run() {
  local n=$1 phase=$2 attempt=$3 prompt=$4 log=$5 cfile=$6 fb=$7 cand=${8:-0} t0 limit half runid
  deadline_exec_limit_v
  local cut=0
  deadline_cap_v "$REPLY" || cut=1
  limit=$REPLY
  half=$((AGENT_LOG_MAX / 2))
  runid="$LOOP_NAME.$n.$attempt.$phase.$$.$RANDOM"
  checks_verify_settled_clear
  # The output is caught in scratch files (each truncated here), then becomes $log.
  local raw="$ORBIT_TMP/agent.raw" head="$ORBIT_TMP/agent.head" tail="$ORBIT_TMP/agent.tail"
  if [[ -e $cfile ]]; then
    rm -f -- "$cfile"
  fi
  agent_dir_fill "$prompt" "$fb"
  : >"$raw"
  : >"$head"
  : >"$tail"
  : >"$ORBIT_TMP/agent.swept"
  state_fault before_agent
  # Nothing but the runner wrote since the last look: anything else stops before the agent.
  # (A fan-out candidate's subshell leaves these looks to the runner, which takes them
  # before the candidates start and after the last one ended: its siblings run meanwhile.)
  if [[ -n $TRUST_BAD ]] || { ((!cand)) && ! trust_check runner; }; then
    AGENT_RC=0 AGENT_TIMED_OUT=0 AGENT_SECS=0
    orbit_log "the loop directory or git's control files changed before the agent ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  if ((limit <= 0)); then
    AGENT_RC=0 AGENT_TIMED_OUT=1 AGENT_SECS=0
    deadline_hit
    orbit_log "the loop's wall-clock limit ($LOOP_TIMEOUT) is reached: the agent is not started"
    : >"$log"
    return 0
  fi
  agent_live_open "$n" "$phase" "$attempt"
  t0=$SECONDS
  # The variables reach the agent through its wrapper alone, as its arguments: nothing of
  # the run's is exported around the bounded call (no watchdog or trap carries the run's
  # mark, no signal's trap meets bash's temporary environment of a function call), and no
  # program is looked up in PATH for it.
  local fbfile=''
  if [[ -f $AGENT_DIR/feedback.json ]]; then
    fbfile=$AGENT_DIR/feedback.json
  fi
  sandbox_prepare agent
  sweep_reaper_v
  local -a offline=()
  config_offline_env offline
  proc_run_bounded "$limit" "$KILL_GRACE_S" "$prompt" "$raw" \
    "${SWEEP_REAPER[@]}" "$BASH" -c "$ORBIT_AGENT_WRAPPER" orbit-agent \
    ORBIT_WORKSPACE="$WS" ORBIT_AGENT_DIR="$AGENT_DIR" ORBIT_ITERATION="$n" ORBIT_ATTEMPT="$attempt" \
    ORBIT_CANDIDATE="$((cand > 0 ? cand : 1))" ORBIT_PHASE="$phase" ORBIT_PROMPT_FILE="$AGENT_DIR/prompt.md" \
    ORBIT_COST_FILE="$AGENT_DIR/cost" \
    ORBIT_RUN_ID="$runid" GIT_TERMINAL_PROMPT=0 ORBIT_FB="$fbfile" \
    ORBIT_HALF="$half" ORBIT_OUT="$ORBIT_TMP/agent" ORBIT_LIVE_FD="$LIVE_FD" "${SANDBOX_AGENT_ENV[@]}" "${offline[@]}" -- \
    "${SANDBOX_ARGV[@]}" "$AGENT_ABS" "${AGENT_ARGV[@]:1}"
  AGENT_RC=$ORBIT_RC
  AGENT_TIMED_OUT=$ORBIT_TIMED_OUT
  AGENT_SECS=$((SECONDS - t0))
  if ((AGENT_TIMED_OUT && cut)); then
    deadline_hit
    orbit_log "the agent was stopped at the loop's wall-clock limit ($LOOP_TIMEOUT)"
  fi
  if ((AGENT_TIMED_OUT)); then
    agent_live_close "=== orbit: the agent timed out after ${AGENT_SECS}s ==="
  else
    agent_live_close "=== orbit: the agent exited $AGENT_RC after ${AGENT_SECS}s ==="
  fi
  agent_swept_log
  sweep_env "ORBIT_RUN_ID=$runid"
  # What the agent changed outside its workspace, looked at before the runner writes again.
  if ((!cand)) && ! trust_check agent; then
    orbit_log "the agent changed $TRUST_BAD ($TRUST_REASON): nothing of its run is taken"
    [[ -L ${log%/*} || ! -d ${log%/*} ]] && return 0
  else
    agent_dir_collect "$cfile" "$cand"
  fi
  if [[ ! -s $raw && ! -s $tail ]]; then
    # All of the output fit in the first half (the usual case).
    mv -f -- "$head" "$log"
  else
    {
      cat -- "$raw" "$head"
      if [[ -s $tail ]]; then
        printf '\n[orbit: output over %s bytes; the middle was dropped]\n' "$half"
        cat -- "$tail"
      fi
    } >"$log"
  fi
  # (A fan-out candidate's timing is written by the runner, after every candidate ended.)
  if ((!cand)) && orbit_appendable "$LOOP_DIR/.iter-timings.log"; then
    printf '%s\n' "$AGENT_SECS" >>"$LOOP_DIR/.iter-timings.log"
  fi
}

# agent_attempts CANDIDATE WORKSPACE AGENT_DIR SCRATCH N PROMPT LOG COSTFILE FB BEFORE AFTER:
# the attempts of one agent's work run (the single agent's, CANDIDATE 0, with the runner's
# WS, AGENT_DIR and ORBIT_TMP; each fan-out candidate's, in its subshell, with its worktree,
# its folder and its scratch, which what the runs call reads as theirs, and no fault
# injection): agent_run, its cost and its engine's
# classification, retrying a transient failure up to RETRY_LIMIT times after a backoff
# (slept in the background, so that a signal is taken at once). BEFORE ATTEMPT runs before
# each attempt, AFTER ATTEMPT OUTCOME after it (the caller records it). An earlier
# attempt's log is kept beside LOG as agent.attemptK.log. REPLY is the last outcome,
# ATTEMPT the number of attempts made.
agent_attempts() {
  local cand=$1 WS=$2 AGENT_DIR=$3 ORBIT_TMP=$4
  shift 4
  local n=$1 prompt=$2 log=$3 cfile=$4 fb=$5 before=$6 after=$7 attempt=0 outcome=$OUTCOME_AGENT_ERROR delay
  if ((cand)); then
    local ORBIT_FAULT=''
  fi
  while ((attempt < RETRY_LIMIT)); do
    attempt=$((attempt + 1))
    ATTEMPT=$attempt
    "$before" "$attempt"
    if [[ $attempt -gt 1 && -f $log ]]; then
      mv -f -- "$log" "${log%/*}/agent.attempt$((attempt - 1)).log"
    fi
    agent_run "$n" "$PHASE_WORK" "$attempt" "$prompt" "$log" "$cfile" "$fb" "$cand"
    # A run that left no log has an empty one (the fan-out's runner reads it), unless the
    # runner's trust is broken: then nothing is written.
    [[ -f $log || -n $TRUST_BAD ]] || : >"$log"
    record_cost_of_run "$log" "$cfile"
    engine_classify_v "$log" "$AGENT_RC" "$AGENT_TIMED_OUT"
    outcome=$REPLY
    "$after" "$attempt" "$outcome"
    if [[ -n $TRUST_BAD ]] || ((DEADLINE_HIT)); then
      break
    fi
    case $outcome in
      "$OUTCOME_OK" | "$OUTCOME_PERMANENT" | "$OUTCOME_RATE_LIMITED") break ;;
    esac
    if ((attempt < RETRY_LIMIT)); then
      deadline_retry_delay_v "$attempt"
      delay=$REPLY
      # (A fan-out candidate's stderr is the runner's log already.)
      ((cand)) || orbit_log "iteration $n: agent attempt $attempt ended '$outcome' (exit $AGENT_RC); retrying in ${delay}s"
      if ((delay > 0)); then
        sleep "$delay" &
        wait "$!" || true
      fi
    fi
  done
  REPLY=$outcome
}
