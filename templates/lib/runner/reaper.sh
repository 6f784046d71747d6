# ---- reaper: the runner as the child subreaper of everything it runs. Without the sandbox
# ---- a daemon that leaves both a run's process group and its mark (env -i setsid) is
# ---- still a descendant, and Linux (3.4 and later) gives an orphan to its nearest ancestor
# ---- that asked to be a child subreaper (prctl PR_SET_CHILD_SUBREAPER, which exec keeps):
# ---- the runner sweeps what it was given when each run ends (proc_run_bounded). Its very
# ---- first step, before bash reads the rest of the script: started afresh (ORBIT_SUBREAPER
# ---- not set), it execs itself through a perl that asks for it (perl's core has no
# ---- prctl: by the syscall's number on this machine), sets ORBIT_SUBREAPER to 1 when
# ---- granted (0 when not) and execs bash on the script again, with the same arguments, pid
# ---- and open files. The perl is the first on PATH outside HOME and relative directories
# ---- (run_loop_tools_pin's rule). Where perl, /proc or the number is missing, nothing is asked: the
# ---- process group and the mark are what is swept.

# shellcheck disable=SC2016  # perl code, not shell
REAPER_PL='@perl:reaper.pl@'

# reaper_nr_v: REPLY, prctl's syscall number on this machine ("" where it is not known).
reaper_nr_v() {
  case ${HOSTTYPE:-} in
    x86_64) REPLY=157 ;;
    aarch64 | riscv64) REPLY=167 ;;
    i?86 | arm*) REPLY=172 ;;
    powerpc* | ppc*) REPLY=171 ;;
    *) REPLY='' ;;
  esac
}

# reaper_exec ARG...: the exec above (it returns when there is nothing to ask with, or
# when the runner was started so already).
reaper_exec() {
  local d perl='' home=${HOME:-}
  local -a dirs=()
  [[ -z ${ORBIT_SUBREAPER+set} && -d /proc/self && -f $0 ]] || return 0
  reaper_nr_v
  [[ -n $REPLY ]] || return 0
  home=${home%/}
  IFS=: read -r -a dirs <<<"${PATH:-}"
  for d in "${dirs[@]}"; do
    [[ $d == /* && ! (-n $home && ($d == "$home" || $d == "$home"/*)) ]] || continue
    if [[ -f $d/perl && -x $d/perl ]]; then
      perl=$d/perl
      break
    fi
  done
  [[ -n $perl ]] || return 0
  shopt -s execfail
  # shellcheck disable=SC2093  # execfail: a perl that cannot start leaves the runner as it was
  ORBIT_SUBREAPER=0 exec "$perl" -e "$REAPER_PL" "$REPLY" "$BASH" "$0" "$@"
  shopt -u execfail
}
reaper_exec "$@"
