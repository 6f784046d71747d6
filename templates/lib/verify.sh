# ---- verify: run each check with its own timeout, print [PASS]/[FAIL] per check and the
# ---- closing line "N passed, M failed". Exit 1 if a check failed or none ran.

VERIFY_PASSED=0
VERIFY_FAILED=0

# run_check NAME CMD [ROLE [reads]]: run CMD with bash from the repository root, stdin from
# /dev/null. ROLE (acceptance, reproduction, regression, holdout) is shown, not judged here;
# in holdout.sh a check runs masked (run_hidden) unless it "reads" the holdout.
VERIFY_OUT=
run_check() {
  local name=$1 cmd=$2 role=${3:-acceptance} status
  local -a how=("$BASH" -c "$cmd")
  # A holdout check that does not read the holdout (no 4th word "reads": orbit init saw no
  # ORBIT_HOLDOUT_DIR in it) runs masked as a whole, as the code it checks (lib/hidden.sh).
  if ((${HOLDOUT_SCRIPT:-0})) && [[ ${4-} != reads ]]; then
    how=(run_hidden "${how[@]}")
  fi
  if [[ $role == acceptance ]]; then
    printf '==> check %s: %s\n' "$name" "$cmd"
  else
    printf '==> check %s [%s]: %s\n' "$name" "$role" "$cmd"
  fi
  : >"$VERIFY_OUT"
  # The check never holds the runner's tally (fd 6): what it prints is only its output.
  proc_run_bounded "$VERIFY_TIMEOUT_S" "$VERIFY_GRACE_S" /dev/null "$VERIFY_OUT" "${how[@]}" 6>&-
  cat -- "$VERIFY_OUT"
  if ((ORBIT_TIMED_OUT)); then
    status="timed out after ${VERIFY_TIMEOUT_S}s"
  else
    status="exit $ORBIT_RC"
  fi
  if ((ORBIT_TIMED_OUT == 0 && ORBIT_RC == 0)); then
    # A pass means what it meant on the base tree: its tests still run (lib/counts.sh).
    if ! counts_judge "$name" "$VERIFY_OUT" 1; then
      VERIFY_FAILED=$((VERIFY_FAILED + 1))
      printf '[FAIL] %s (%s)\n' "$name" "$COUNTS_WHY"
      ((!VERIFY_TALLY)) || printf 'FAIL %s %s\n' "$name" "$COUNTS_WHY" >&6
      return 0
    fi
    VERIFY_PASSED=$((VERIFY_PASSED + 1))
    printf '[PASS] %s\n' "$name"
    ((!VERIFY_TALLY)) || printf 'PASS %s\n' "$name" >&6
    if [[ -n $COUNTS_NOTE ]]; then
      printf '%s\n' "$COUNTS_NOTE"
    fi
  else
    counts_judge "$name" "$VERIFY_OUT" 0 || true
    VERIFY_FAILED=$((VERIFY_FAILED + 1))
    printf '[FAIL] %s (%s)\n' "$name" "$status"
    if ((VERIFY_TALLY)); then
      verify_check_cannot_run_v "$ORBIT_RC" "$ORBIT_TIMED_OUT"
      printf 'FAIL %s %s\n' "$name" "${REPLY:-$status}" >&6
    fi
  fi
}

# verify_check_cannot_run_v RC TIMED_OUT: REPLY is "cannot-run: WHY" when the failed check's output
# (VERIFY_OUT) says it could not run at all, else "": a program not found (exit 127: on PATH,
# or by an absolute path outside the workspace, such as one under /tmp, which the sandbox
# gives each run empty), a script's interpreter missing (126/127, env's "No such file"), a
# python script outside the workspace missing, its test runner's module missing, Maven that
# cannot fetch an artifact (offline, or its local repository read-only); or, with
# WHY "net: ...", a connection refused or unreachable that the runner judges (the sandbox's
# network, lib/sandbox-net.sh). A path in the workspace that is not there is the agent's to
# make: a red start.
verify_check_cannot_run_v() {
  local line='' l p
  REPLY=''
  (($2 == 0)) || return 0
  if (($1 == 127)); then
    # bash's "X: command not found", sh's (dash, as npm runs scripts) "sh: 1: X: not found",
    # bash's "./x: cannot execute: required file not found" (its #! interpreter missing),
    # env's "/usr/bin/env: 'X': No such file or directory" (#!/usr/bin/env X; its quotes
    # the locale's).
    line=$(grep -a -m 1 -E -- ": command not found|^sh: [0-9]+: .+: not found$|: cannot execute: required file not found$|^(/usr)?(/bin/)?env: .+: No such file or directory$" "$VERIFY_OUT" 2>/dev/null) || line=''
  elif (($1 == 126)); then
    # A program there that cannot be executed (its mode, its interpreter).
    line=$(grep -a -m 1 -E -- ': Permission denied$|: cannot execute|: bad interpreter: ' "$VERIFY_OUT" 2>/dev/null) || line=''
  fi
  if [[ -z $line ]] && (($1 == 127 || $1 == 2)); then
    # A program (127) or python's script (2) named by an absolute path outside the
    # workspace, not there as the check sees the file system.
    while IFS= read -r l; do
      if [[ $l == *": No such file or directory" ]]; then
        p=${l%: No such file or directory}
        p=${p##*: }
      else
        p=${l#*"can't open file '"}
        p=${p%%"'"*}
      fi
      if [[ $p == /* && $p != "$PWD" && $p != "$PWD"/* && ! -e $p ]]; then
        line=$l
        break
      fi
    done < <(if (($1 == 127)); then
      grep -a -E -- ': No such file or directory$' "$VERIFY_OUT"
    else
      grep -a -E -- "can't open file '/[^']+': \[Errno 2\]" "$VERIFY_OUT"
    fi 2>/dev/null | head -n 20 || true)
  fi
  if [[ -z $line ]]; then
    line=$(grep -a -m 1 -E -- "No module named '?(pytest|unittest|nose2|tox)'?($|[^.[:alnum:]_])" "$VERIFY_OUT" 2>/dev/null) || line=''
  fi
  if [[ -z $line ]]; then
    # Maven, which cannot fetch what the check needs: offline, or its local repository
    # read-only (under HOME, which the sandbox shows so); its message from the repository on.
    line=$(grep -a -m 1 -E -- 'Cannot access [^ ]+ \([^)]*\) in offline mode|Could not transfer [^ ]+ [^ ]+ from/to [^ ]+ \([^)]*\): .*(No such file or directory|Read-only file system)' "$VERIFY_OUT" 2>/dev/null) || line=''
    line=${line/#*Cannot access /Cannot access }
    line=${line/#*Could not transfer /Could not transfer }
  fi
  if [[ -z $line ]]; then
    # A connection refused or a network unreachable: the runner knows whether the sandbox's
    # network made it so (and probes a loopback host the check names), never the check.
    # A line that names the host first (bash's /dev/tcp, curl, python's urllib3).
    line=$(grep -a -m 1 -E -- "/dev/tcp/[^ ]+: (Connection refused|Network is unreachable)|Failed to connect to |host='.*(Connection refused|Network is unreachable)" "$VERIFY_OUT" 2>/dev/null) ||
      line=$(grep -a -m 1 -E -- 'Connection refused|Network is unreachable' "$VERIFY_OUT" 2>/dev/null) || line=''
    [[ -n $line ]] || return 0
    line=${line//[[:cntrl:]]/ }
    REPLY="cannot-run: net: ${line:0:160}"
    return 0
  fi
  line=${line//[[:cntrl:]]/ }
  REPLY="cannot-run: ${line:0:160}"
}

# Whether the runner gave a tally (fd 6, ORBIT_VERIFY_TALLY=6): one line per check, PASS or
# FAIL and its name, on a channel the checks' own output never reaches.
VERIFY_TALLY=0
# The bounds of every check: its timeout, and the grace before a KILL.
VERIFY_TIMEOUT_S=0
VERIFY_GRACE_S=0
main() {
  local here root
  # The runner's bounds (it refuses the same values before it runs verify.sh): every check
  # needs a timeout.
  orbit_setting_v CHECK_TIMEOUT || orbit_die "$EXIT_PREFLIGHT" "$ORBIT_SETTING_ERR"
  VERIFY_TIMEOUT_S=$REPLY
  orbit_setting_v KILL_GRACE || orbit_die "$EXIT_PREFLIGHT" "$ORBIT_SETTING_ERR"
  VERIFY_GRACE_S=$REPLY
  here=${BASH_SOURCE[0]}
  if [[ $here == */* ]]; then
    here=${here%/*}
  else
    here=.
  fi
  here=$(cd -P -- "${here:-/}" && pwd -P)
  # Run by this loop's runner: it says where the workspace and its scratch space are.
  # Run by hand from the loop directory: the workspace its state names, once the loop ran.
  # Run by the agent (its copy in .orbit-agent/) or before the first run: git says where
  # the work tree is.
  local line=''
  if [[ ${ORBIT_VERIFY_FOR-} == "$here" && -n ${ORBIT_REPO_ROOT-} && -d ${ORBIT_VERIFY_TMP-} ]]; then
    root=$ORBIT_REPO_ROOT
    VERIFY_OUT="$ORBIT_VERIFY_TMP/check.out"
    if [[ ${ORBIT_VERIFY_TALLY-} == 6 ]] && { : >&6; } 2>/dev/null; then
      VERIFY_TALLY=1
    fi
  else
    if [[ -f $here/state.env ]]; then
      line=$(grep -m 1 '^WORKSPACE=/' -- "$here/state.env" 2>/dev/null || true)
    fi
    if [[ -n $line && -d ${line#WORKSPACE=} ]]; then
      root=${line#WORKSPACE=}
    else
      root=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null) ||
        orbit_die "$EXIT_PREFLIGHT" "verify.sh must live inside a git work tree ($here is not in one)"
    fi
    VERIFY_OUT=$(mktemp "${TMPDIR:-/tmp}/orbit-check.XXXXXX")
    trap 'rm -f -- "$VERIFY_OUT"' EXIT
  fi
  # holdout.sh: its checks find their files in the loop directory's holdout/ (the runner
  # names it; by hand, the one beside this script).
  if ((${HOLDOUT_SCRIPT:-0})); then
    export ORBIT_HOLDOUT_DIR="${ORBIT_HOLDOUT_DIR:-$here/holdout}"
  fi
  counts_base_load "$here"
  cd -- "$root" || orbit_die "$EXIT_PREFLIGHT" "cannot enter $root"
  # The dependency tools' offline switches (loop.toml offline-env), for every check.
  if ((${#OFFLINE_ENV[@]})); then
    export "${OFFLINE_ENV[@]}"
  fi
  checks
  # What the checks' summaries counted, for the runner's record (not holdout.sh's: its
  # checks leave no trace a later run could read).
  if [[ ${ORBIT_VERIFY_FOR-} == "$here" && -d ${ORBIT_VERIFY_TMP-} ]] && ((!${HOLDOUT_SCRIPT:-0})); then
    counts_print
  fi
  printf '%d passed, %d failed\n' "$VERIFY_PASSED" "$VERIFY_FAILED"
  if ((VERIFY_PASSED + VERIFY_FAILED == 0)); then
    printf 'no check ran: add one to loop.toml (verify = [...], holdout = [...]) and run orbit init --force\n'
    return 1
  fi
  ((VERIFY_FAILED == 0))
}

main "$@"
exit
