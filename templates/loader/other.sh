  printf '%s: not run: %s; orbit recover --restore-pinned puts the pinned copy back\n' "${0##*/}" "$ORBIT_LIB_WHY" >&2
  exit 1
