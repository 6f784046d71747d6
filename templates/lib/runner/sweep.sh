# ---- processes left behind: anything carrying this loop's marker in its environment.
# Linux only (/proc); elsewhere the process-group sweep is what remains.
# sweep_env MARKER [wait]: KILLs them; with "wait", returns once they are gone (at most 2 s:
# a process that took the KILL is gone within milliseconds).
sweep_env() {
  local marker=$1 f pid i
  local -a swept=()
  [[ -d /proc/self ]] || return 0
  while IFS= read -r f; do
    pid=${f#/proc/}
    pid=${pid%%/*}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    # The process may be gone by now: its command line is best effort.
    orbit_log "sweeping leftover process $pid ($({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | cut -c1-80 || true))"
    kill -KILL "$pid" 2>/dev/null || true
    swept+=("$pid")
  done < <(
    unset ORBIT_OWNER
    grep -lzxF -- "$marker" /proc/[0-9]*/environ 2>/dev/null || true
  )
  [[ ${2:-} == wait ]] || return 0
  # A process on its way out (a zombie included) no longer shows its environment.
  for pid in "${swept[@]}"; do
    for ((i = 0; i < 40; i++)); do
      grep -qzxF -- "$marker" "/proc/$pid/environ" 2>/dev/null || break
      sleep 0.05
    done
  done
}

# ---- the subreaper: without the sandbox, a daemon that leaves both the run's process group
# and its mark (env -i setsid) is still a descendant, and Linux (3.4 and later) gives an
# orphan to its nearest ancestor that asked to be a child subreaper (prctl
# PR_SET_CHILD_SUBREAPER, which exec keeps). The runner asks for itself at its start (a
# daemon a check left is then its own, swept when the check's run ends: orbit_run_bounded),
# and each agent wrapper for itself (swept when the agent exits). perl asks (its core has
# no prctl: by the syscall's number on this machine), sets ORBIT_SUBREAPER to 1 when granted,
# and execs what follows. SWEEP_REAPER is its argv, empty where perl, /proc or the number is
# missing (the group and the mark are then what is swept).
# shellcheck disable=SC2016  # perl code, not shell
SWEEP_REAPER_PL='$ENV{ORBIT_SUBREAPER} = 1 if syscall(shift(@ARGV) + 0, 36, 1, 0, 0, 0) == 0; exec {$ARGV[0]} @ARGV; exit 127;'
SWEEP_REAPER=()
SWEEP_REAPER_SET=0
sweep_reaper_v() {
  local nr perl
  ((SWEEP_REAPER_SET)) && return 0
  SWEEP_REAPER_SET=1
  [[ -d /proc/self ]] || return 0
  case ${HOSTTYPE:-} in
    x86_64) nr=157 ;;
    aarch64 | riscv64) nr=167 ;;
    i?86 | arm*) nr=172 ;;
    powerpc* | ppc*) nr=171 ;;
    *) return 0 ;;
  esac
  perl=$(hash -t perl 2>/dev/null || type -P perl 2>/dev/null) || return 0
  [[ $perl == /* ]] || return 0
  SWEEP_REAPER=("$perl" -e "$SWEEP_REAPER_PL" "$nr")
}

# sweep_become_reaper ARG...: the runner's first step: started afresh (ORBIT_SUBREAPER not
# set), it execs itself through the subreaper's perl, with the same arguments, the same pid
# and the same open files; started so, it takes the answer (orbit_reaping_on) and drops the
# variable, which nothing it runs gets.
sweep_become_reaper() {
  if [[ -n ${ORBIT_SUBREAPER+set} ]]; then
    [[ $ORBIT_SUBREAPER == 1 ]] && orbit_reaping_on
    unset ORBIT_SUBREAPER
    return 0
  fi
  tools_pin
  sweep_reaper_v
  ((${#SWEEP_REAPER[@]})) || return 0
  shopt -s execfail
  # shellcheck disable=SC2093  # execfail: a perl that cannot start leaves the runner as it was
  ORBIT_SUBREAPER=0 exec "${SWEEP_REAPER[@]}" "$BASH" "$0" "$@"
  shopt -u execfail
}
