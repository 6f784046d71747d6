  # A check that cannot run fails: never a pass.
  printf '%s: not run: %s\n' "${0##*/}" "$ORBIT_LIB_WHY" >&2
  printf '[FAIL] lib.sh (not run: %s; orbit recover --restore-pinned puts the pinned copy back)\n0 passed, 1 failed\n' "$ORBIT_LIB_WHY"
  exit 1
