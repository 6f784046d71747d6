# ---- integrity pins (contract section 7).
# The integrity finding: the file (or set) found changed, what was wanted, what was found.
PIN_BAD=
PIN_WANT=
PIN_HAVE=
# pins_finding FILE [WANT HAVE]: the integrity finding is FILE ("": none).
pins_finding() {
  PIN_BAD=$1 PIN_WANT=${2:-} PIN_HAVE=${3:-}
}
# The manifest as the runner read it once, at the start of the run (contract section 7):
# every later check compares the files with this, never with pins.sha256 on disk, which an
# agent could rewrite along with the file it pins.
PIN_TEXT=
PIN_HELD=0
# notify.sh's text as pinned, read with the manifest: the runner notifies from it, never
# from a notify.sh changed since.
NOTIFY_TEXT=
# pins_hold: reads pins.sha256 (and the protected sets, pins.sets) into memory. A manifest
# that is not a plain file, or a line not in sha256sum's format, stops the run.
PIN_SETS=()
pins_hold() {
  local f=$LOOP_DIR/pins.sha256 line
  orbit_loop_copy_at "$LOOP_DIR" "$REPO_ROOT" "${WS_MAIN:-$WS}"
  if [[ -L $f || ! -f $f ]]; then
    PIN_BAD=pins.sha256 PIN_WANT='a regular file' PIN_HAVE=$(orbit_file_kind "$f")
    return 1
  fi
  PIN_TEXT=$(<"$f")
  while IFS= read -r line; do
    if [[ -n $line && ! $line =~ ^[0-9a-f]{64}\ \ .+$ ]]; then
      PIN_BAD=pins.sha256 PIN_WANT='sha256sum lines' PIN_HAVE="a line '${line:0:60}'"
      return 1
    fi
  done <<<"$PIN_TEXT"
  # An emptied or cut manifest pins nothing: the loop's own files must each have a line.
  for line in prompt.md verify.sh run-loop.sh recover.sh notify.sh lib.sh loop.toml; do
    if ! pins_want_v "$line"; then
      PIN_BAD=pins.sha256 PIN_WANT="a pin for $line" PIN_HAVE='none'
      return 1
    fi
  done
  if ((${HOLDOUT_SETTING:-0} > 0)) && ! pins_want_v holdout.sh; then
    PIN_BAD=pins.sha256 PIN_WANT='a pin for holdout.sh' PIN_HAVE='none'
    return 1
  fi
  if [[ -f $LOOP_DIR/.baseline-commit ]] && ! pins_want_v goal.md; then
    PIN_BAD=pins.sha256 PIN_WANT='a pin for goal.md' PIN_HAVE='none'
    return 1
  fi
  # notify.sh, held as text once it matches its pin: what later notifications run.
  f=$LOOP_DIR/notify.sh
  if orbit_regular "$f" && pins_want_v notify.sh; then
    line=$(
      cat -- "$f"
      printf x
    )
    line=${line%x}
    local want=$REPLY
    orbit_sha256_str_v "$line"
    if [[ $REPLY == "$want" ]]; then
      NOTIFY_TEXT=$line
    fi
  fi
  PIN_SETS=()
  f=$LOOP_DIR/pins.sets
  if [[ -f $f && ! -L $f ]]; then
    while IFS= read -r line || [[ -n $line ]]; do
      if [[ $line =~ ^[0-9a-f]{64}\ \ .+$ ]]; then
        PIN_SETS+=("$line")
      fi
    done <"$f"
  fi
  PIN_HELD=1
}

# pins_want_v PATH: REPLY is the held pin of PATH (a loop file's name or an absolute path).
pins_want_v() {
  local rest=$'\n'$PIN_TEXT$'\n' hit
  REPLY=''
  if [[ $rest == *"  $1"$'\n'* ]]; then
    hit=${rest%%"  $1"$'\n'*}
    REPLY=${hit: -64}
  fi
  [[ -n $REPLY ]]
}

pins_check() {
  local line want path have out
  PIN_BAD=
  if ((!PIN_HELD)); then
    pins_hold || return 1
  fi
  if [[ -z $ORBIT_HASH_PID && $ORBIT_SHA_TOOL == sha256sum ]]; then
    # One process for every pin, fed from memory; only a mismatch is looked at line by line.
    if out=$(cd -- "$LOOP_DIR" && sha256sum -c --quiet --strict - 2>/dev/null <<<"$PIN_TEXT"); then
      : all pins hold
    else
      line=${out%%$'\n'*}
      path=${line%: FAILED*}
      PIN_BAD=$path
      pins_want_v "$path" || true
      PIN_WANT=$REPLY
      local file=$LOOP_DIR/$path
      if [[ $path == /* ]]; then
        file=$path
      fi
      if [[ -f $file ]]; then
        orbit_sha256_file_v "$file"
        PIN_HAVE=$REPLY
      else
        PIN_HAVE=missing
      fi
      [[ -n $PIN_BAD ]] || PIN_BAD=pins.sha256
      return 1
    fi
  else
    # Line by line: with the hasher, every pin in one round trip.
    local -a wants=() paths=() files=()
    local i
    while IFS= read -r line || [[ -n $line ]]; do
      if [[ -n $line ]]; then
        wants+=("${line%%  *}")
        paths+=("${line#*  }")
        # A workspace file by its absolute path (contract 2.0), a loop file by its name.
        if [[ ${line#*  } == /* ]]; then
          files+=("${line#*  }")
        else
          files+=("$LOOP_DIR/${line#*  }")
        fi
      fi
    done <<<"$PIN_TEXT"
    orbit_hasher_files "${files[@]}" || true
    for ((i = 0; i < ${#paths[@]}; i++)); do
      if [[ ! -f ${files[i]} ]]; then
        have=missing
      elif [[ ${ORBIT_HASHES[i]:--} != - ]]; then
        have=${ORBIT_HASHES[i]}
      else
        orbit_sha256_file_v "${files[i]}"
        have=$REPLY
      fi
      if [[ $have != "${wants[i]}" ]]; then
        PIN_BAD=${paths[i]} PIN_WANT=${wants[i]} PIN_HAVE=$have
        return 1
      fi
    done
  fi
  # An agent permission file that appeared after the first run is a hijack too: one that
  # the held manifest does not list, line for line.
  if [[ -f $LOOP_DIR/.baseline-commit ]]; then
    local f pinned=$'\n'$PIN_TEXT$'\n'
    pins_permission_files
    for f in "${PERMISSION_FOUND[@]}"; do
      if [[ $pinned != *[0-9a-f]"  $WS/$f"$'\n'* ]]; then
        PIN_BAD=$WS/$f PIN_WANT=absent PIN_HAVE=$(orbit_sha256_file "$WS/$f")
        return 1
      fi
    done
  fi
  pins_protected_sets_check
}

# pins_protected_set_v GLOB: REPLY is the sha256 of the set of paths the glob matches now
# (pins_set_list), sorted, NUL-terminated.
# A file added to, removed from or renamed within the set changes it (contract section 7).
pins_protected_set_v() {
  local out
  out=$({ pins_set_list "$1" || echo 'orbit: git failed'; } | LC_ALL=C sort -zu | orbit_sha256_stdin) || out=''
  REPLY=$out
  [[ $REPLY =~ ^[0-9a-f]{64}$ ]]
}

# pins_set_list GLOB: the paths GLOB matches in the workspace, NUL-terminated (protect_list:
# the index, and every other file but what the user's ignore rules and the base commit's
# .gitignore files ignore; never an ignore rule the agent wrote), what the setup made and the
# checks' known artifacts (untracked) aside. Status 1 when git fails.
pins_set_list() {
  local base=''
  local -a aside=()
  setup_aside_specs aside
  evidence_artifacts_load
  for base in "${!ARTIFACT_NAMES[@]}"; do
    aside+=(":(exclude,literal)$base")
  done
  base=''
  if [[ -f $LOOP_DIR/.baseline-commit && ! -L $LOOP_DIR/.baseline-commit ]]; then
    IFS= read -r base <"$LOOP_DIR/.baseline-commit" || true
  fi
  protect_list "$WS" "$base" "$1" "$ORBIT_TMP" ${aside[@]+"${aside[@]}"}
}

pins_protected_sets_check() {
  local line g
  for line in "${PIN_SETS[@]}"; do
    g=${line#*  }
    if ! pins_protected_set_v "$g" || [[ $REPLY != "${line%%  *}" ]]; then
      PIN_BAD="$WS/$g" PIN_WANT="the set of files pinned at the first run" PIN_HAVE="a different set"
      pins_protected_set_diff "$g"
      return 1
    fi
  done
  return 0
}

# pins_protected_set_diff GLOB: names the first path added to (or missing from) the glob's set,
# compared with the files the manifest pins (for the log, the event and the summary).
pins_protected_set_diff() {
  local f pinned=$'\n'$PIN_TEXT$'\n' now=$'\n'
  while IFS= read -r -d '' f; do
    now+="$WS/$f"$'\n'
    if [[ $pinned != *"  $WS/$f"$'\n'* ]]; then
      PIN_BAD="$WS/$f" PIN_HAVE="added to the protected set '$1'"
      return 0
    fi
  done < <(pins_set_list "$1" | LC_ALL=C sort -zu || true)
  while IFS= read -r line; do
    f=${line#*  }
    [[ $f == "$WS"/* ]] || continue
    if [[ $now != *$'\n'"$f"$'\n'* ]] && [[ ! -e $f ]]; then
      PIN_BAD=$f PIN_HAVE="removed from the protected set '$1'"
      return 0
    fi
  done <<<"$PIN_TEXT"
}

# pins_permission_files: PERMISSION_FOUND lists the agent permission files the workspace holds
# now (ORBIT_PERMISSION_FILES expanded at its root, regular files only), relative to the
# root. Names with blanks or glob characters are taken as they are.
PERMISSION_FOUND=()
pins_permission_files() {
  local g f had_nullglob=0 IFS=''
  local -a matches=()
  PERMISSION_FOUND=()
  if shopt -q nullglob; then
    had_nullglob=1
  fi
  shopt -s nullglob
  for g in "${ORBIT_PERMISSION_FILES[@]}" ${ENGINE_PERMISSION_FILES[@]+"${ENGINE_PERMISSION_FILES[@]}"}; do
    # The root quoted (taken literally), the glob not: expanded, and never split (IFS is
    # empty); no match expands to nothing.
    # shellcheck disable=SC2206
    matches=("$WS"/$g)
    for f in "${matches[@]}"; do
      if [[ -f $f ]]; then
        PERMISSION_FOUND+=("${f#"$WS"/}")
      fi
    done
  done
  if ((!had_nullglob)); then
    shopt -u nullglob
  fi
}
