# ---- apply: backups, moves, flag writes, progress, events, then the checkpoint.
# recover_backup FILE BACKUP_DIR: a copy of FILE (when it is one) under BACKUP_DIR, by its path.
recover_backup() {
  local src=$1 bdir=$2 rel
  [[ -f $src ]] || return 0
  # Loop files under their own path; repository files (the workspace's) under repo/.
  if [[ $src == "$RC_DIR"/* ]]; then
    rel=${src#"$RC_DIR"/}
  elif [[ $src == "$RC_REPO"/* ]]; then
    rel=repo/${src#"$RC_REPO"/}
  else
    rel=other/${src##*/}
  fi
  mkdir -p -- "$(dirname -- "$bdir/$rel")"
  cp -p -- "$src" "$bdir/$rel.tmp.$$"
  mv -f -- "$bdir/$rel.tmp.$$" "$bdir/$rel"
}

# recover_apply: the plan applied: every file it changes backed up first (backups/<stamp>/), the
# files moved, restored and written, progress.md's Recovery entry, the journal's recovery
# event, then the checkpoint; what was done said on standard output.
recover_apply() {
  local now bdir brel iter r flags_text
  now=$(orbit_now)
  recover_backups_v "$now"
  bdir=$REPLY
  brel=${bdir#"$RC_DIR"/}
  recover_apply_files "$bdir"
  iter=$((S[NEXT_ITERATION] > 0 ? S[NEXT_ITERATION] - 1 : 0))
  flags_text=${RC_FLAGS[*]:-}
  recover_apply_progress "$now" "$brel" "$iter" "$flags_text"
  recover_apply_journal "$now" "$brel" "$iter" "$flags_text"
  printf 'recover.sh: recovered %s\n' "$RC_DIR"
  for r in "${RC_REPAIRS[@]}"; do printf '  - %s\n' "$r"; done
  for r in "${RC_NOTES[@]}"; do printf '  note: %s\n' "$r"; done
  printf '  backups: %s\n  %s\n' "$brel" "$(recover_resume_hint)"
}

# recover_backups_v NOW: REPLY is a new backup directory (backups/<stamp>[-K]/) holding a copy of
# every file the plan changes.
recover_backups_v() {
  local stamp bdir k f
  stamp=$(TZ=UTC0 printf '%(%Y%m%dT%H%M%SZ)T' "$1")
  bdir="$RC_DIR/backups/$stamp"
  k=2
  while [[ -e $bdir ]]; do
    bdir="$RC_DIR/backups/$stamp-$k"
    k=$((k + 1))
  done
  mkdir -p -- "$bdir"
  if [[ -n $RC_BH_WRITE ]]; then recover_backup "$RC_DIR/.branch-head" "$bdir"; fi
  if ((RC_PINS_WRITE)); then recover_backup "$RC_DIR/pins.sha256" "$bdir"; fi
  if ((RC_GOAL_COPY)); then recover_backup "$RC_DIR/.pins/goal.md" "$bdir"; fi
  if ((RC_SIG_CLEAR)); then recover_backup "$RC_DIR/.action-sig.log" "$bdir"; fi
  for f in "${RC_RESTORE_TO[@]}" "${RC_REMOVES[@]}"; do recover_backup "$f" "$bdir"; done
  recover_backup "$RC_DIR/progress.md" "$bdir"
  recover_backup "$RC_DIR/events.jsonl" "$bdir"
  if ((RC_STATE_WRITE)); then
    recover_backup "$RC_DIR/state.env" "$bdir"
    recover_backup "$RC_DIR/state.env.sha256" "$bdir"
  fi
  REPLY=$bdir
}

# recover_apply_files BACKUP_DIR: the workspace recreated, .branch-head, the moves (BACKUP/ ones
# into BACKUP_DIR), pins.sha256, the goal's pinned copy, the change signatures, the
# restored and removed files (--restore-pinned) and their index entries.
recover_apply_files() {
  local bdir=$1 i f dest
  if [[ -n $RC_WS_ADD ]]; then
    mkdir -p -- "${RC_WS_ADD%/*}"
    rmdir -- "$RC_WS_ADD" 2>/dev/null || true
    # A worktree deleted by hand is still registered, and locked: its entry goes (only its
    # own: a prune could take another loop's workspace being added).
    recover_git worktree remove -f -f -- "$RC_WS_ADD" 2>/dev/null || true
    git -C "$RC_REPO" worktree add -q --lock --reason "orbit loop $RC_DIR" -- "$RC_WS_ADD" "$RC_WS_BRANCH" ||
      orbit_die "$EXIT_FAILURE" "cannot recreate the workspace $RC_WS_ADD from $RC_WS_BRANCH (nothing else was changed): see git's message above"
  fi
  if [[ -n $RC_BH_WRITE ]]; then
    state_write_file "$RC_DIR/.branch-head" "$RC_BH_WRITE"$'\n' || orbit_die "$EXIT_FAILURE" "cannot write .branch-head"
  fi
  for i in "${!RC_MOVES_FROM[@]}"; do
    dest=${RC_MOVES_TO[i]}
    if [[ $dest == BACKUP/* ]]; then
      dest="$bdir/${dest#BACKUP/}"
    fi
    mkdir -p -- "$(dirname -- "$dest")"
    mv -- "${RC_MOVES_FROM[i]}" "$dest" || orbit_die "$EXIT_FAILURE" "cannot move ${RC_MOVES_FROM[i]} to $dest"
  done
  if ((RC_PINS_WRITE)); then
    state_write_file "$RC_DIR/pins.sha256" "$RC_PINS_NEW" || orbit_die "$EXIT_FAILURE" "cannot write pins.sha256"
  fi
  if ((RC_GOAL_COPY)); then
    mkdir -p -- "$RC_DIR/.pins"
    cp -- "$RC_DIR/goal.md" "$RC_DIR/.pins/.goal.md.tmp.$$"
    mv -f -- "$RC_DIR/.pins/.goal.md.tmp.$$" "$RC_DIR/.pins/goal.md"
  fi
  if ((RC_SIG_CLEAR)); then
    state_write_file "$RC_DIR/.action-sig.log" '' || orbit_die "$EXIT_FAILURE" "cannot write .action-sig.log"
  fi
  # --restore-pinned: each staged copy into place (temp beside it, then a rename), then the
  # removals (their copies are in the backup).
  for i in "${!RC_RESTORE_TO[@]}"; do
    dest=${RC_RESTORE_TO[i]}
    mkdir -p -- "${dest%/*}"
    cp -- "${RC_RESTORE_FROM[i]}" "$dest.tmp.$$" || orbit_die "$EXIT_FAILURE" "cannot write $dest"
    if ((RC_RESTORE_EXEC[i])); then chmod 755 -- "$dest.tmp.$$"; else chmod 644 -- "$dest.tmp.$$"; fi
    mv -f -- "$dest.tmp.$$" "$dest" || orbit_die "$EXIT_FAILURE" "cannot write $dest"
  done
  for f in "${RC_REMOVES[@]}"; do
    rm -f -- "$f" || orbit_die "$EXIT_FAILURE" "cannot remove $f"
  done
  # Their index entries back to the head: a rename or removal the agent staged is undone.
  local -a ws_paths=()
  for f in "${RC_RESTORE_TO[@]}" "${RC_REMOVES[@]}"; do
    if [[ -n $WS && $f == "${WS%/}"/?* ]]; then ws_paths+=("${f#"${WS%/}"/}"); fi
  done
  if ((${#ws_paths[@]} > 0)); then
    GIT_LITERAL_PATHSPECS=1 git -C "$WS" -c core.fsmonitor=false reset -q -- "${ws_paths[@]}" ||
      orbit_die "$EXIT_FAILURE" "git reset in $WS failed (the files are restored; their index entries are not)"
  fi
}

# recover_apply_progress NOW BACKUP ITER FLAGS: progress.md with its torn tail trimmed, a broken
# chain sealed, stray lines dropped, and the Recovery entry appended (one atomic rename).
recover_apply_progress() {
  local now=$1 brel=$2 iter=$3 flags_text=$4 tmp f prev r text
  # progress.md: the torn tail trimmed, the Recovery entry appended; one atomic rename.
  tmp="$RC_DIR/.progress.md.tmp.$$"
  : >"$tmp"
  if [[ -f $RC_DIR/progress.md ]]; then
    if [[ $RC_PG_TAIL == torn ]]; then
      head -c "$RC_PG_CUT" -- "$RC_DIR/progress.md" >"$tmp"
    else
      cat -- "$RC_DIR/progress.md" >"$tmp"
    fi
    if [[ $RC_PG_TAIL == newline ]]; then
      printf '\n' >>"$tmp"
    fi
    # A chain broken by a rewritten entry: sealed there; lines outside any entry: gone.
    if [[ -n $RC_PG_BREAK_OFF ]]; then
      head -c "$RC_PG_BREAK_OFF" -- "$tmp" >"$tmp.cut"
      mv -f -- "$tmp.cut" "$tmp"
    fi
    if ((${#RC_PG_STRAY[@]} > 0)); then
      awk -v drop=" ${RC_PG_STRAY[*]} " 'index(drop, " " NR " ") == 0' "$tmp" >"$tmp.cut"
      mv -f -- "$tmp.cut" "$tmp"
    fi
  fi
  prev=0000000000000000000000000000000000000000000000000000000000000000
  f=$(grep -a -E '^<!-- orbit:end iteration=[0-9]+ sha256=[0-9a-f]{64} -->$' -- "$tmp" | tail -n 1 || true)
  if [[ $f =~ sha256=([0-9a-f]{64}) ]]; then
    prev=${BASH_REMATCH[1]}
  fi
  state_progress_chain_at "$tmp" "$prev"
  text="## Recovery — $(orbit_iso "$now")"$'\n'
  text+="- by: recover.sh${flags_text:+ $flags_text}"$'\n'
  text+="- evidence: last completed iteration $RC_LAST"$'\n'
  text+="- repaired:"$'\n'
  for r in "${RC_REPAIRS[@]}"; do
    text+="  - $(printf '%s' "$r" | tr -d '\000-\037\177')"$'\n'
  done
  text+="- state: NEXT_ITERATION=${S[NEXT_ITERATION]} LAST_STATUS=${S[LAST_STATUS]} STOP_REASON=${S[STOP_REASON]} GEN=${S[GEN]}"$'\n'
  text+="- backups: $brel/"$'\n'
  state_progress_append "$iter" "$text"
  mv -f -- "$tmp" "$RC_DIR/progress.md"
}

# recover_apply_journal NOW BACKUP ITER FLAGS: events.jsonl with its torn line trimmed and the
# recovery event appended (one atomic rename), then the checkpoint, last.
recover_apply_journal() {
  local now=$1 brel=$2 iter=$3 flags_text=$4 tmp text state_sha=''
  # events.jsonl: the torn line trimmed, the recovery event appended; one atomic rename.
  tmp="$RC_DIR/.events.jsonl.tmp.$$"
  : >"$tmp"
  if [[ -f $RC_DIR/events.jsonl ]]; then
    head -c "$RC_EV_KEEP" -- "$RC_DIR/events.jsonl" >"$tmp"
  fi
  state_events_restart "$tmp"
  # The state.env the loop will have (written below, its text fixed now; or the one kept):
  # the event carries its sha256, so that audit and recover can check state.env against it.
  local -a extra=()
  if ((RC_STATE_WRITE)); then
    S[LAST_UPDATED_AT]=$now
    text=$(
      state_print
      printf x
    )
    text=${text%x}
    state_sha=$(orbit_sha256_str "$text")
  elif [[ -f $RC_DIR/state.env ]]; then
    state_sha=$(orbit_sha256_file "$RC_DIR/state.env")
  fi
  if [[ -n $state_sha ]]; then extra+=(state_sha256 "$state_sha"); fi
  if [[ -n $RC_EV_BREAK_LINE ]]; then
    extra+=(journal_break "$RC_EV_BREAK_LINE" journal_break_why "$RC_EV_BREAK_WHY" journal_dropped "$RC_EV_DROPPED")
  fi
  state_event recovery "$iter" by recover.sh flags "${flags_text:-none}" repairs "${#RC_REPAIRS[@]}" \
    next_iteration "${S[NEXT_ITERATION]}" status "${S[LAST_STATUS]}" reason "${S[STOP_REASON]}" \
    gen "${S[GEN]}" "${extra[@]}" backup "$brel"
  mv -f -- "$tmp" "$RC_DIR/events.jsonl"
  # The checkpoint, last.
  if ((RC_STATE_WRITE)); then
    state_write_file "$RC_DIR/state.env" "$text" ||
      orbit_die "$EXIT_FAILURE" "cannot write state.env (disk full or read-only?): the backup is in $brel"
    state_write_file "$RC_DIR/state.env.sha256" "$(state_sidecar_text "$text" "${S[GEN]}")" ||
      orbit_die "$EXIT_FAILURE" "cannot write state.env.sha256: run recover.sh again once the disk has room"
  fi
}

main() {
  local r
  # The runner's torn-checkpoint flag (state.sh) is not used here: recover reports a torn
  # checkpoint among its repairs.
  : "$ORBIT_TORN_REPAIRED"
  orbit_settings
  recover_args "$@"
  if ((F_HELP)); then
    recover_usage
    return 0
  fi
  recover_locate
  orbit_sha_detect
  # The staged copies of --restore-pinned are gone however recover.sh ends, and so is the
  # hashing coprocess (one process for the journal's many line hashes, where perl is).
  trap 'orbit_hasher_stop; if [[ -n $RC_STAGE ]]; then rm -rf -- "$RC_STAGE"; fi' EXIT
  orbit_hasher_start
  if lock_held_v "$RC_DIR"; then
    orbit_die "$EXIT_LOCKED" "$REPLY: recover.sh refuses to change a running loop. Stop the runner (or let it finish), then run it again."
  fi
  recover_plan
  if ((F_DRY)); then
    recover_dry_run
    return 0
  fi
  if ! recover_plan_has_changes; then
    printf 'recover.sh: nothing to repair in %s: state.env agrees with the evidence; %s\n' "$RC_DIR" "$(recover_resume_hint)"
    for r in "${RC_NOTES[@]}"; do printf '  note: %s\n' "$r"; done
    return 0
  fi
  recover_apply
}

main "$@"
exit
