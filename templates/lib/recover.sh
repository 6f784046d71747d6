# ---- recover: standalone state repair (the same repairs as `orbit recover`).

main() {
  orbit_settings
  : "$ORBIT_TORN_REPAIRED"
  printf 'recover.sh: standalone repair is not available in this build of orbit\n' >&2
  exit 2
}

main "$@"
exit
