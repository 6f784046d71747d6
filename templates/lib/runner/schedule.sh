# ---- the loop's installed schedule on this machine (contract section 7): the lines of the
# ---- user's crontab that end with the loop's `# orbit:` marker, and its systemd user units
# ---- (orbit-<name>-<hash>.service and .timer) with their drop-ins, in every directory of
# ---- the user's unit search path a user can write. An agent runs as the user: a line it
# ---- adds to the unit (ExecStartPre=) or a crontab line it rewrites would run as the user,
# ---- outside any sandbox, at the next tick. At the runner's first look the schedule is
# ---- compared with the record `orbit schedule --install` wrote (schedule.installed, when it
# ---- is a record of this loop directory), then held: the loop's view (SCHED_VIEW), the
# ---- whole crontab (SCHED_TAB) and the unit directories' listing (SCHED_LIST); a change to
# ---- any of them after that is script_tamper. SCHED_BAD, SCHED_WANT and SCHED_HAVE say
# ---- what changed; SCHED_FOREIGN that it was a crontab line not the loop's.
SCHED_READY=0
SCHED_HELD=0
SCHED_CRONTAB=
SCHED_MARKER=
SCHED_UNIT=
SCHED_DIRS=()
SCHED_VIEW=
SCHED_TAB=
SCHED_LIST=
SCHED_BAD=
SCHED_WANT=
SCHED_HAVE=
SCHED_FOREIGN=0

# schedule_setup: once per run, the crontab program (resolved now), the loop's marker (its
# directory in POSIX quotes, as orbit writes it), its units' name and the unit directories
# (as orbit looks at them: src/schedule/installed.rs).
schedule_setup() {
  local rest=$LOOP_DIR q='' d k h x seen
  ((SCHED_READY)) && return 0
  SCHED_READY=1
  SCHED_CRONTAB=$(type -P crontab 2>/dev/null || true)
  while [[ $rest == *"'"* ]]; do
    q+=${rest%%"'"*}"'\\''"
    rest=${rest#*"'"}
  done
  SCHED_MARKER=" # orbit:'$q$rest'"
  orbit_sha256_str_v "$LOOP_DIR"
  SCHED_UNIT=orbit-$LOOP_NAME-${REPLY:0:8}
  h=${HOME:-/nonexistent}
  x=${XDG_CONFIG_HOME:-$h/.config}
  while [[ $h == ?*/ ]]; do h=${h%/}; done
  while [[ $x == ?*/ ]]; do x=${x%/}; done
  for d in "$h/.config/systemd/user" "$x/systemd/user" "$h/.config/systemd/user.control" \
    "$x/systemd/user.control" ${XDG_RUNTIME_DIR:+"$XDG_RUNTIME_DIR/systemd/user.control"}; do
    seen=0
    for k in "${SCHED_DIRS[@]}"; do
      [[ $k == "$d" ]] && seen=1
    done
    ((seen)) || SCHED_DIRS+=("$d")
  done
}

# schedule_tab_v: REPLY is the user's crontab ('' without a crontab program or a crontab).
schedule_tab_v() {
  REPLY=''
  [[ -n $SCHED_CRONTAB ]] || return 0
  REPLY=$("$SCHED_CRONTAB" -l </dev/null 2>/dev/null) || REPLY=''
}

# schedule_view_v TAB: REPLY is the loop's schedule as installed, one line per entry,
# byte-sorted: `cron LINE` for each line of TAB with the loop's marker, `unit SHA256 PATH`
# for each unit file and drop-in of the loop's name.
schedule_view_v() {
  local tab=$1 line d ext f
  local -a sched_entries=()
  while IFS= read -r line; do
    [[ $line == *"$SCHED_MARKER" ]] && sched_entries+=("cron $line")
  done <<<"$tab"
  for d in "${SCHED_DIRS[@]}"; do
    for ext in service timer; do
      f=$d/$SCHED_UNIT.$ext
      if [[ -f $f ]]; then
        orbit_sha256_file_v "$f"
        sched_entries+=("unit $REPLY $f")
      fi
      [[ -d $f.d ]] || continue
      while IFS= read -r -d '' f; do
        [[ -f $f && $f != *$'\n'* ]] || continue
        orbit_sha256_file_v "$f"
        sched_entries+=("unit $REPLY $f")
      done < <(find "$d/$SCHED_UNIT.$ext.d" -mindepth 1 -maxdepth 1 -print0 2>/dev/null | LC_ALL=C sort -z)
    done
  done
  REPLY=''
  ((${#sched_entries[@]})) || return 0
  REPLY=$(printf '%s\n' "${sched_entries[@]}" | LC_ALL=C sort -u)
}

# schedule_list_v: REPLY is the unit directories as they are: each entry's type, size and
# modification time (a directory by its entries alone), or `absent DIR`.
schedule_list_v() {
  local d
  local -a roots=()
  REPLY=''
  for d in "${SCHED_DIRS[@]}"; do
    if [[ -e $d || -L $d ]]; then
      roots+=("$d")
    else
      REPLY+="absent $d"$'\n'
    fi
  done
  if ((${#roots[@]})); then
    REPLY+=$(find "${roots[@]}" \( -type d -printf 'd - - %p\n' \) -o -printf '%y %s %T@ %p\n' 2>/dev/null | LC_ALL=C sort)
  fi
}

# schedule_record_v: REPLY is the record's entries, byte-sorted; status 1 without a record
# of this loop directory (none, or one made for the directory this loop was cloned from).
schedule_record_v() {
  local f=$LOOP_DIR/schedule.installed line first=1
  local -a sched_entries=()
  REPLY=''
  orbit_regular "$f" || return 1
  while IFS= read -r line; do
    [[ $line == '#'* ]] && continue
    if ((first)); then
      first=0
      [[ $line == "dir $LOOP_DIR" ]] && continue
      orbit_log "note: $f records the schedule of another loop directory (${line#dir }): not this one's"
      return 1
    fi
    [[ $line == 'cron '* || $line == 'unit '* ]] && sched_entries+=("$line")
  done <"$f"
  ((!first)) || return 1
  ((${#sched_entries[@]})) || return 0
  REPLY=$(printf '%s\n' "${sched_entries[@]}" | LC_ALL=C sort -u)
}

# schedule_differ WANT HAVE WHAT: SCHED_BAD, SCHED_WANT and SCHED_HAVE for the first entry
# of HAVE that is not in WANT (a line changed or added), else the first of WANT that is
# gone. WHAT says what WANT is.
schedule_differ() {
  local want=$1 have=$2 what=$3 diffs added gone path
  diffs=$(diff -- <(printf '%s\n' "$want") <(printf '%s\n' "$have") || true)
  added=$(grep -m 1 '^> ' <<<"$diffs" || true)
  gone=$(grep -m 1 '^< ' <<<"$diffs" || true)
  added=${added#> } gone=${gone#< }
  if [[ -n $added ]]; then
    if [[ $added == 'cron '* ]]; then
      SCHED_BAD=crontab SCHED_HAVE=${added#cron }
      SCHED_WANT="the line $what"
      [[ $gone == 'cron '* ]] && SCHED_WANT="${gone#cron } ($what)"
      return 0
    fi
    path=${added#unit * }
    SCHED_BAD=$path SCHED_HAVE="sha256 ${added:5:64}" SCHED_WANT="absent ($what)"
    if [[ $'\n'$want == *$'\n'"unit "*" $path"* ]]; then
      SCHED_WANT="the unit $what"
    fi
    return 0
  fi
  if [[ $gone == 'cron '* ]]; then
    SCHED_BAD=crontab SCHED_WANT="${gone#cron } ($what)" SCHED_HAVE=absent
  else
    SCHED_BAD=${gone#unit * } SCHED_WANT="sha256 ${gone:5:64} ($what)" SCHED_HAVE=absent
  fi
}

# schedule_check: the installed schedule against the record at the first look, then
# against what the runner holds; status 1 with SCHED_BAD, SCHED_WANT and SCHED_HAVE set on
# a change. Holds what it found either way.
schedule_check() {
  local tab view list line
  SCHED_BAD='' SCHED_WANT='' SCHED_HAVE='' SCHED_FOREIGN=0
  schedule_setup
  schedule_tab_v
  tab=$REPLY
  schedule_view_v "$tab"
  view=$REPLY
  schedule_list_v
  list=$REPLY
  if ((!SCHED_HELD)); then
    SCHED_HELD=1 SCHED_VIEW=$view SCHED_TAB=$tab SCHED_LIST=$list
    if schedule_record_v && [[ $REPLY != "$view" ]]; then
      schedule_differ "$REPLY" "$view" "orbit schedule installed, recorded in schedule.installed"
      return 1
    fi
    return 0
  fi
  if [[ $view != "$SCHED_VIEW" ]]; then
    schedule_differ "$SCHED_VIEW" "$view" "installed when the run started"
  elif [[ $tab != "$SCHED_TAB" ]]; then
    # Not the loop's line: a line added (or changed, or removed) elsewhere in the crontab
    # while an agent or a check ran, which cron would run as the user.
    SCHED_BAD=crontab SCHED_FOREIGN=1
    line=$(diff -- <(printf '%s\n' "$SCHED_TAB") <(printf '%s\n' "$tab") | grep -m 1 '^[<>] ' || true)
    if [[ $line == '> '* ]]; then
      SCHED_WANT='no such line (the crontab as the run found it)' SCHED_HAVE="the line ${line#> }"
    else
      SCHED_WANT="the line ${line#< } (the crontab as the run found it)" SCHED_HAVE=absent
    fi
  elif [[ $list != "$SCHED_LIST" ]]; then
    SCHED_BAD=$(diff -- <(printf '%s\n' "$SCHED_LIST") <(printf '%s\n' "$list") | grep -m 1 '^[<>]' || true)
    SCHED_BAD=${SCHED_BAD#[<>] }
    if [[ $SCHED_BAD == absent\ * ]]; then
      SCHED_BAD=${SCHED_BAD#absent }
    else
      SCHED_BAD=${SCHED_BAD#* * * }
    fi
    SCHED_WANT='as the run found it' SCHED_HAVE='changed'
  fi
  SCHED_VIEW=$view SCHED_TAB=$tab SCHED_LIST=$list
  [[ -z $SCHED_BAD ]]
}

# schedule_stop_msg_v FILE: REPLY is the stop's message when FILE is the schedule's change
# (status 1 otherwise).
schedule_stop_msg_v() {
  [[ -n $SCHED_BAD && $1 == "$SCHED_BAD" ]] || return 1
  if ((SCHED_FOREIGN)); then
    REPLY="$REASON_SCRIPT_TAMPER: the crontab changed while the agent or a check ran, outside the loop's own line ($SCHED_HAVE; was $SCHED_WANT): cron runs such a line as you, outside any sandbox; review it (crontab -l), remove what you did not write, then 'orbit recover --restore-pinned'"
    return 0
  fi
  REPLY="$REASON_SCRIPT_TAMPER: the loop's installed schedule changed ($SCHED_BAD); review it, reinstall it (orbit schedule $LOOP_DIR --cron or --systemd --install) or remove it (orbit schedule $LOOP_DIR --remove), then 'orbit recover --restore-pinned'"
}
