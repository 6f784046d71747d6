# ---- processes left behind: anything carrying this loop's marker in its environment.
# Linux only (/proc); elsewhere the process-group sweep is what remains.
# sweep_env MARKER [wait]: KILLs them; with "wait", returns once they are gone (at most 2 s:
# a process that took the KILL is gone within milliseconds).
sweep_env() {
  local marker=$1 f pid i REPLY
  local -a swept=()
  [[ -d /proc/self ]] || return 0
  orbit_hasher_args_v "$marker"
  orbit_hasher_ask_v E "$REPLY" || REPLY=$(
    unset ORBIT_OWNER
    grep -lzxF -- "$marker" /proc/[0-9]*/environ 2>/dev/null || true
  )
  while IFS= read -r f; do
    [[ -n $f ]] || continue
    pid=${f#/proc/}
    pid=${pid%%/*}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    # The process may be gone by now: its command line is best effort.
    orbit_log "sweeping leftover process $pid ($({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | cut -c1-80 || true))"
    kill -KILL "$pid" 2>/dev/null || true
    swept+=("$pid")
  done <<<"$REPLY"
  [[ ${2:-} == wait ]] || return 0
  # A process on its way out (a zombie included) no longer shows its environment.
  for pid in "${swept[@]}"; do
    for ((i = 0; i < 40; i++)); do
      grep -qzxF -- "$marker" "/proc/$pid/environ" 2>/dev/null || break
      sleep 0.05
    done
  done
}

# ---- the subreaper (lib/runner/reaper.sh): the agent's wrapper asks for it too, through the
# ---- same perl (agent_run), so that what an agent run left is swept when the agent exits.
# SWEEP_REAPER is that perl's argv, empty where perl or the number is missing.
SWEEP_REAPER=()
SWEEP_REAPER_SET=0
sweep_reaper_v() {
  local perl
  ((SWEEP_REAPER_SET)) && return 0
  SWEEP_REAPER_SET=1
  [[ -d /proc/self ]] || return 0
  reaper_nr_v
  [[ -n $REPLY ]] || return 0
  perl=$(hash -t perl 2>/dev/null || type -P perl 2>/dev/null) || return 0
  [[ $perl == /* ]] || return 0
  SWEEP_REAPER=("$perl" -e "$REAPER_PL" "$REPLY")
}

# sweep_reaping: the runner takes the kernel's answer to reaper_exec (proc_reaping_on) and
# drops the variable, which nothing it runs gets.
sweep_reaping() {
  [[ ${ORBIT_SUBREAPER:-} == 1 ]] && proc_reaping_on
  unset ORBIT_SUBREAPER
}
