# ---- verify: run each check with its own timeout, print [PASS]/[FAIL] per check and the
# ---- closing line "N passed, M failed". Exit 1 if a check failed or none ran.

VERIFY_PASSED=0
VERIFY_FAILED=0

# run_check NAME CMD: run CMD with bash from the repository root, stdin from /dev/null.
run_check() {
  local name=$1 cmd=$2 out status
  out=$(mktemp "${TMPDIR:-/tmp}/orbit-check.XXXXXX")
  printf '==> check %s: %s\n' "$name" "$cmd"
  orbit_run_bounded "$VERIFY_TIMEOUT_S" "$VERIFY_GRACE_S" /dev/null "$out" "$BASH" -c "$cmd"
  cat -- "$out"
  rm -f -- "$out"
  if ((ORBIT_TIMED_OUT)); then
    status="timed out after ${VERIFY_TIMEOUT_S}s"
  else
    status="exit $ORBIT_RC"
  fi
  if ((ORBIT_TIMED_OUT == 0 && ORBIT_RC == 0)); then
    VERIFY_PASSED=$((VERIFY_PASSED + 1))
    printf '[PASS] %s\n' "$name"
  else
    VERIFY_FAILED=$((VERIFY_FAILED + 1))
    printf '[FAIL] %s (%s)\n' "$name" "$status"
  fi
}

main() {
  local here root
  orbit_duration_v CHECK_TIMEOUT "$CHECK_TIMEOUT"
  VERIFY_TIMEOUT_S=$REPLY
  orbit_duration_v KILL_GRACE "$KILL_GRACE"
  VERIFY_GRACE_S=$REPLY
  if ((VERIFY_TIMEOUT_S == 0)); then
    orbit_die 2 "CHECK_TIMEOUT=0: every check needs a timeout, e.g. 10m"
  fi
  here=$(cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
  root=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null) ||
    orbit_die 2 "verify.sh must live inside a git work tree ($here is not in one)"
  cd -- "$root" || orbit_die 2 "cannot enter $root"
  checks
  printf '%d passed, %d failed\n' "$VERIFY_PASSED" "$VERIFY_FAILED"
  if ((VERIFY_PASSED + VERIFY_FAILED == 0)); then
    printf 'no check ran: add one to loop.toml (verify = [...]) and run orbit init --force\n'
    return 1
  fi
  ((VERIFY_FAILED == 0))
}

main "$@"
exit
