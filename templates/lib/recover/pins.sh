# ---- pins: --repin-goal, then the first broken pin as the pins will stand.
RC_BROKEN=
RC_BROKEN_REASON=
recover_pins() {
  local line h p f goal_hash='' pinned=0 have
  # The workspace by which a pinned workspace file is judged (orbit_pin_reason_v).
  WS=${O[WORKSPACE]:-}
  if [[ -z $WS ]]; then
    recover_ws_path_v
    WS=$REPLY
  fi
  RC_PINS_NEW=
  if ((F_GOAL)); then
    [[ -f $RC_DIR/goal.md ]] ||
      orbit_die "$EXIT_PREFLIGHT" "$RC_DIR/goal.md is missing: --repin-goal accepts goal.md as it is, so it must exist (orbit recover --restore-pinned puts it back)"
    goal_hash=$(orbit_sha256_file "$RC_DIR/goal.md")
  fi
  if [[ -f $RC_DIR/pins.sha256 ]]; then
    while IFS= read -r line || [[ -n $line ]]; do
      if [[ $line == *'  '* ]]; then
        h=${line%%  *}
        p=${line#*  }
        if ((F_GOAL)) && [[ $p == goal.md ]]; then
          pinned=1
          if [[ $h != "$goal_hash" ]]; then
            RC_REPAIRS+=("goal.md re-pinned (--repin-goal): ${h:0:12} → $goal_hash")
            h=$goal_hash
          fi
        fi
        RC_PINS_NEW+="$h  $p"$'\n'
      else
        h=$line p=$line
        RC_PINS_NEW+="$line"$'\n'
      fi
      if [[ -z $p ]] || { [[ -n $RC_BROKEN ]] && ((!F_RESTORE)); }; then
        continue
      fi
      have=missing
      # A 2.0 pin names a workspace file by its absolute path; loop files by name.
      f=$RC_DIR/$p
      if [[ $p == /* ]]; then f=$p; fi
      recover_regular_or_die "$f"
      if [[ -f $f ]]; then
        have=$(orbit_sha256_file "$f")
      fi
      if [[ $have != "$h" ]]; then
        if ((F_RESTORE)); then
          recover_stage_restore "$h" "$p" "$f"
        elif [[ -z $RC_BROKEN ]]; then
          RC_BROKEN=$p
          orbit_pin_reason_v "$p"
          RC_BROKEN_REASON=$REPLY
        fi
      fi
    done <"$RC_DIR/pins.sha256"
  fi
  recover_appeared_permission_files
  recover_protected_sets
  if ((F_GOAL)); then
    if ((pinned)); then
      printf '%s' "$RC_PINS_NEW" | cmp -s - "$RC_DIR/pins.sha256" || RC_PINS_WRITE=1
      recover_regular_or_die "$RC_DIR/.pins/goal.md"
      cmp -s -- "$RC_DIR/goal.md" "$RC_DIR/.pins/goal.md" || RC_GOAL_COPY=1
    else
      RC_NOTES+=("goal.md is not pinned yet: the first run pins it")
    fi
  fi
}

# recover_stage_restore HASH PIN FILE: --restore-pinned of one changed pinned file: its content
# that matches the pin (a loop file from .pins/, a repository file from the baseline commit)
# is staged for the apply; none is a refusal (orbit recover's restore_pinned).
recover_stage_restore() {
  local h=$1 p=$2 f=$3 rel='' base='' staged exec=0
  if [[ -z $RC_STAGE ]]; then
    RC_STAGE=$(mktemp -d "${TMPDIR:-/tmp}/orbit-restore.XXXXXX")
  fi
  staged="$RC_STAGE/${#RC_RESTORE_TO[@]}"
  if [[ $p == */* ]]; then
    # A 2.0 pin names the file by its absolute path in the workspace; a 1.0 pin through
    # ../ from the loop directory. Either way its baseline is the same repository path.
    if [[ $p == "${WS%/}"/?* ]]; then
      rel=${p#"${WS%/}"/}
    elif [[ $p != /* ]]; then
      recover_repo_relative_v "$p" && rel=$REPLY
    fi
    [[ -n $rel ]] ||
      orbit_die "$EXIT_PREFLIGHT" "cannot restore $p: it is outside the repository and the workspace"
    if [[ -f $RC_DIR/.baseline-commit ]]; then
      recover_regular_or_die "$RC_DIR/.baseline-commit"
      base=$(tr -d '[:space:]' <"$RC_DIR/.baseline-commit")
    fi
    [[ -n $base ]] ||
      orbit_die "$EXIT_PREFLIGHT" "cannot restore $p: .baseline-commit is missing. Restore it by hand with git, or accept it with orbit recover --repin"
    if ! recover_git show "$base:$rel" >"$staged" 2>/dev/null || [[ $(orbit_sha256_file "$staged") != "$h" ]]; then
      orbit_die "$EXIT_PREFLIGHT" "cannot restore $p: the baseline commit ${base:0:12} holds no copy matching its pin. Restore it by hand, or accept it with orbit recover --repin"
    fi
  else
    recover_regular_or_die "$RC_DIR/.pins/$p"
    if [[ ! -f $RC_DIR/.pins/$p ]] || [[ $(orbit_sha256_file "$RC_DIR/.pins/$p") != "$h" ]]; then
      orbit_die "$EXIT_PREFLIGHT" "cannot restore $p: .pins/$p is missing or does not match its pin. Restore it by hand (or orbit init --force for a script), or accept it with orbit recover --repin"
    fi
    cp -- "$RC_DIR/.pins/$p" "$staged"
  fi
  if [[ $p == *.sh && $p != */* ]] || [[ -x $f ]]; then
    exec=1
  fi
  RC_RESTORE_FROM+=("$staged")
  RC_RESTORE_TO+=("$f")
  RC_RESTORE_EXEC+=("$exec")
  RC_REPAIRS+=("$p restored to its pinned content (--restore-pinned)")
}

# recover_repo_relative_v PIN: REPLY is a 1.0 pin path (relative to the loop directory, through
# ../) as a path relative to the repository; status 1 when it climbs out of it.
recover_repo_relative_v() {
  local -a parts=() out=()
  local part
  IFS=/ read -r -a out <<<"${RC_DIR#"$RC_REPO"/}"
  IFS=/ read -r -a parts <<<"$1"
  for part in "${parts[@]}"; do
    case $part in
      .. )
        ((${#out[@]} > 0)) || return 1
        unset 'out[${#out[@]}-1]'
        ;;
      . | '') ;;
      *) out+=("$part") ;;
    esac
  done
  local IFS=/
  REPLY=${out[*]}
}

# recover_appeared_permission_files: agent permission files in the workspace that pins.sha256
# does not list, once the first run has pinned (it pinned every one there was): each
# appeared since (permission_hijack). --restore-pinned removes each (no pinned copy to put
# back; a copy goes to the backup); otherwise the first is a broken pin.
recover_appeared_permission_files() {
  local g f pinned had_nullglob=0 IFS=''
  local -a matches=() appeared=()
  [[ -f $RC_DIR/.baseline-commit && -n $WS && -d $WS && ! -L $WS ]] || return 0
  pinned=$'\n'$(cat -- "$RC_DIR/pins.sha256" 2>/dev/null || true)$'\n'
  if shopt -q nullglob; then had_nullglob=1; fi
  shopt -s nullglob
  for g in "${ORBIT_PERMISSION_FILES[@]}" ${ENGINE_PERMISSION_FILES[@]+"${ENGINE_PERMISSION_FILES[@]}"}; do
    # The root quoted (taken literally), the glob not: expanded, never split.
    # shellcheck disable=SC2206
    matches=("${WS%/}"/$g)
    for f in "${matches[@]}"; do
      if [[ -f $f && $pinned != *[0-9a-f]"  $f"$'\n'* ]]; then
        appeared+=("$f")
      fi
    done
  done
  if ((!had_nullglob)); then shopt -u nullglob; fi
  for f in "${appeared[@]}"; do
    if ((F_RESTORE)); then
      recover_regular_or_die "$f"
      RC_REMOVES+=("$f")
      RC_REPAIRS+=("$f appeared after the first run and has no pinned copy to restore: removed (--restore-pinned; the copy is in the backup)")
    elif [[ -z $RC_BROKEN ]]; then
      RC_BROKEN=$f
      RC_BROKEN_REASON=$REASON_PERMISSION_HIJACK
    fi
  done
}

# recover_protected_sets: each protect set of pins.sets against what its glob matches in the
# workspace now (protect_list, as the runner lists it: the index, and every other file but
# what the user's ignore rules and the base commit's .gitignore files ignore, the checks'
# known artifacts aside; sorted bytewise, hashed as the runner hashes it): a file added
# since the first run is reward_hack like an edit. --restore-pinned removes each added file
# (no pinned copy; a copy goes to the backup); a removed one is restored by its pin.
# Otherwise the first changed set is a broken pin (orbit recover's protected_sets).
recover_protected_sets() {
  local line h g now pinned rel n=0 list base='' scratch
  local -a aside=()
  [[ -f $RC_DIR/$ORBIT_PINS_SETS && -n $WS && -d $WS && ! -L $WS ]] || return 0
  pinned=$'\n'$(cat -- "$RC_DIR/pins.sha256" 2>/dev/null || true)$'\n'
  if [[ -f $RC_DIR/.baseline-commit && ! -L $RC_DIR/.baseline-commit ]]; then
    IFS= read -r base <"$RC_DIR/.baseline-commit" || true
  fi
  if [[ -f $RC_DIR/.check-artifacts && ! -L $RC_DIR/.check-artifacts ]]; then
    while IFS= read -r line; do
      [[ -z $line ]] || aside+=(":(exclude,literal)$line")
    done <"$RC_DIR/.check-artifacts"
  fi
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/orbit-set.XXXXXX")
  list=$scratch/list
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    [[ $line =~ ^([0-9a-f]{64})\ \ (.+)$ ]] || continue
    h=${BASH_REMATCH[1]} g=${BASH_REMATCH[2]}
    protect_list "$WS" "$base" "$g" "$scratch" ${aside[@]+"${aside[@]}"} | LC_ALL=C sort -zu >"$list" || continue
    now=$(orbit_sha256_stdin <"$list")
    [[ $now != "$h" ]] || continue
    while IFS= read -r -d '' rel; do
      if [[ $pinned != *[0-9a-f]"  ${WS%/}/$rel"$'\n'* ]] && ((F_RESTORE)); then
        recover_regular_or_die "${WS%/}/$rel"
        RC_REMOVES+=("${WS%/}/$rel")
        RC_REPAIRS+=("${WS%/}/$rel was added to the protected set '$g' after the first run and has no pinned copy: removed (--restore-pinned; the copy is in the backup)")
      fi
    done <"$list"
    if ((!F_RESTORE)) && [[ -z $RC_BROKEN ]]; then
      RC_BROKEN="the protected set '$g' ($ORBIT_PINS_SETS:$n)"
      RC_BROKEN_REASON=$REASON_REWARD_HACK
    fi
  done <"$RC_DIR/$ORBIT_PINS_SETS"
  rm -rf -- "$scratch"
}
