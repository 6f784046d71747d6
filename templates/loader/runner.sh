  # Stopped as for any script changed; what records a stop is in lib.sh: stderr and
  # runner.log say why, and each run stops so until it is restored.
  ORBIT_LIB_SUMMARY="@STOP@: @REASON@: lib.sh is not the library orbit rendered; nothing of it was run: review it, then 'orbit recover --restore-pinned' puts the pinned copy back"
  TZ=UTC0 printf -v ORBIT_LIB_WHY '%(%Y-%m-%dT%H:%M:%SZ)T stop: %s (%s), exit %s — %s; nothing of it was run' -1 @STATUS@ @REASON@ @EXIT@ "$ORBIT_LIB_WHY"
  printf '%s\n' "$ORBIT_LIB_WHY" >&2 2>/dev/null || true
  if [[ -f $ORBIT_LIB_DIR/runner.log && ! -L $ORBIT_LIB_DIR/runner.log && ! -L $ORBIT_LIB_DIR ]]; then
    printf '%s\n' "$ORBIT_LIB_WHY" >>"$ORBIT_LIB_DIR/runner.log" 2>/dev/null || true
  fi
  printf 'NEXUS_LOOP_STATUS: @FOOTER@\nNEXUS_LOOP_SUMMARY: %s\n' "${ORBIT_LIB_SUMMARY:0:180}" 2>/dev/null || true
  exit @EXIT@
