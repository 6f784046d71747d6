# ---- state: the checkpoint (state.env and its sidecar), the event journal (events.jsonl)
# ---- and progress.md. state.env is parsed, never sourced; every write is atomic.

# The keys and their types are the prelude's (ORBIT_STATE_KEYS, ORBIT_STATE_TYPE).
declare -A S=()
STATE_ERR=
ORBIT_FAULT=${ORBIT_FAULT:-}

# A test hook: die by SIGKILL at a named point (ORBIT_FAULT=<point>).
state_fault() {
  if [[ $ORBIT_FAULT == "$1" ]]; then
    orbit_log "fault injection: SIGKILL at $1"
    kill -KILL $$
  fi
}

# state_check_value KEY VALUE: status 0 when VALUE is a value of KEY's type
# (ORBIT_STATE_TYPE), by the same rules as orbit's Rust parser; 1 otherwise, and for a key
# that is not a state key.
state_check_value() {
  local LC_ALL=C key=$1 v=$2
  [[ -n $key ]] || return 1
  case ${ORBIT_STATE_TYPE[$key]-} in
    semver) [[ $v =~ $ORBIT_RE_SEMVER ]] ;;
    positive) [[ $v =~ $ORBIT_RE_POSITIVE ]] ;;
    uint) [[ $v =~ $ORBIT_RE_UINT ]] ;;
    hex) [[ $v =~ $ORBIT_RE_HEX ]] ;;
    ref)
      [[ -z $v ]] ||
        [[ ${#v} -le $ORBIT_REF_MAX && $v =~ $ORBIT_RE_REF && $v != [-/.]* && $v != *..* ]]
      ;;
    status) [[ $v =~ $ORBIT_RE_STATUS ]] ;;
    stop_reason) [[ $v =~ $ORBIT_RE_STOP_REASON ]] ;;
    cb_state) [[ $v =~ $ORBIT_RE_CB_STATE ]] ;;
    path) [[ -z $v ]] || [[ $v == /* && ${#v} -le $ORBIT_PATH_MAX ]] ;;
    *) return 1 ;;
  esac
}

# state_parse FILE: fills S from FILE, or sets STATE_ERR ("line N: why") and returns 1.
state_parse() {
  local LC_ALL=C file=$1 content line key value n=0 k
  declare -A seen=()
  S=()
  STATE_ERR=
  if [[ ! -f $file ]]; then
    STATE_ERR="line 0: the file is missing"
    return 1
  fi
  # read stops at a NUL (status 0) or reads the whole file (status 1 at its end).
  if IFS= read -r -d '' content <"$file"; then
    STATE_ERR="line 0: the file contains a NUL byte"
    return 1
  fi
  if [[ -z $content ]]; then
    STATE_ERR="line 0: the file is empty"
    return 1
  fi
  if [[ $content != *$'\n' ]]; then
    STATE_ERR="line $(($(wc -l <"$file") + 1)): the last line has no newline (a torn write?)"
    return 1
  fi
  while IFS= read -r line; do
    n=$((n + 1))
    if [[ $line == *[[:cntrl:]]* ]]; then
      STATE_ERR="line $n: control character"
      return 1
    fi
    if [[ $line != *=* ]]; then
      STATE_ERR="line $n: not a KEY=VALUE line"
      return 1
    fi
    key=${line%%=*}
    value=${line#*=}
    if [[ ! " ${ORBIT_STATE_KEYS[*]} " == *" $key "* || -z $key ]]; then
      STATE_ERR="line $n: unknown key '$key'"
      return 1
    fi
    if [[ -n ${seen[$key]:-} ]]; then
      STATE_ERR="line $n: duplicate key $key"
      return 1
    fi
    if ! state_check_value "$key" "$value"; then
      STATE_ERR="line $n: $key has an invalid value"
      return 1
    fi
    seen[$key]=1
    S[$key]=$value
  done <<<"${content%$'\n'}"
  # A key that a newer contract major added may be missing from an older loop's state: it
  # parses (empty), and its version asks for orbit recover --migrate.
  for k in "${ORBIT_STATE_KEYS[@]}"; do
    if [[ -z ${seen[$k]:-} ]]; then
      if [[ -n ${ORBIT_KEY_SINCE[$k]:-} && -n ${seen[CONTRACT_VERSION]:-} ]] &&
        ((10#${S[CONTRACT_VERSION]%%.*} < ORBIT_KEY_SINCE[$k])); then
        S[$k]=''
        continue
      fi
      STATE_ERR="line 0: missing key $k"
      return 1
    fi
  done
  return 0
}

# The canonical text of S: every key, in order; state_print_v into REPLY.
state_print_v() {
  local k
  REPLY=''
  for k in "${ORBIT_STATE_KEYS[@]}"; do
    REPLY+="$k=${S[$k]}"$'\n'
  done
}
state_print() {
  local REPLY
  state_print_v
  printf '%s' "$REPLY"
}

# state_result_parse FILE: fills RP with FILE's result.env record and returns 0 only when it parses
# by the rule of orbit's result_env module: KEY=VALUE lines, keys from ORBIT_RESULT_KEYS,
# none twice, no control character, valid UTF-8 (where iconv can tell), a whole number of
# at most ORBIT_UINT_DIGITS digits (or nothing) for each ORBIT_RESULT_NUMERIC key. A last
# line without its newline keeps its value. Anything else returns 1 with RP emptied.
declare -A RP=()
state_result_parse() {
  local LC_ALL=C file=$1 content line k v
  RP=()
  [[ -f $file ]] || return 1
  # read stops at a NUL (status 0): a NUL is a control character.
  if IFS= read -r -d '' content <"$file"; then
    return 1
  fi
  if command -v iconv >/dev/null 2>&1 && ! iconv -f UTF-8 -t UTF-8 <"$file" >/dev/null 2>&1; then
    return 1
  fi
  [[ -n $content ]] || return 0
  while IFS= read -r line; do
    # C0 controls and DEL, and the C1 controls as UTF-8 encodes them (U+0080..U+009F).
    if [[ $line == *[[:cntrl:]]* || $line == *$'Â'[$''-$'']* ]]; then
      RP=()
      return 1
    fi
    k=${line%%=*}
    v=${line#*=}
    if [[ $line != *=* || " ${ORBIT_RESULT_KEYS[*]} " != *" $k "* || -z $k || -n ${RP[$k]+x} ]]; then
      RP=()
      return 1
    fi
    if [[ -n $v && " ${ORBIT_RESULT_NUMERIC[*]} " == *" $k "* && ! $v =~ ^[0-9]{1,18}$ ]]; then
      RP=()
      return 1
    fi
    RP[$k]=$v
  done <<<"${content%$'\n'}"
}

# state_put FILE TEXT: FILE made afresh holding TEXT, synced (a name planted there is removed,
# never written through); status 1 when it cannot be (FILE removed). state_mv FROM TO: mv -f.
# Both by the hasher where there is one, else by a program each.
state_put() {
  local REPLY
  orbit_hasher_args_v "$@"
  orbit_hasher_ask_v W "$REPLY" && return 0
  rm -f -- "$1"
  printf '%s' "$2" >"$1" || {
    rm -f -- "$1"
    return 1
  }
  sync -- "$1" 2>/dev/null || true
}
state_mv() {
  local REPLY
  orbit_hasher_args_v "$@"
  orbit_hasher_ask_v R "$REPLY" || mv -f -- "$1" "$2"
}

# state_write_file PATH CONTENT: atomic write (temp in the same directory, sync, rename).
state_write_file() {
  local path=$1 content=$2 tmp dir=.
  if [[ $path == */* ]]; then
    dir=${path%/*}
  fi
  tmp="$dir/.${path##*/}.tmp.$$"
  state_put "$tmp" "$content" || return 1
  state_mv "$tmp" "$path" || {
    rm -f -- "$tmp"
    return 1
  }
}

# state_sidecar_v TEXT GEN: REPLY is the sidecar for state.env holding TEXT.
state_sidecar_v() {
  orbit_sha256_str_v "$1"
  REPLY="$REPLY  state.env"$'\n'"# gen=$2"$'\n'
}
state_sidecar_text() {
  local REPLY
  state_sidecar_v "$1" "$2"
  printf '%s' "$REPLY"
}

# state_write DIR [RECORD]: GEN+1, LAST_UPDATED_AT=now, then state.env and its sidecar,
# each atomic. RECORD TEXT, when named, runs first with the text about to be written.
state_write() {
  local dir=$1 record=${2:-} text half tmp side sidecar
  S[GEN]=$((S[GEN] + 1))
  orbit_now_v
  S[LAST_UPDATED_AT]=$REPLY
  state_print_v
  text=$REPLY
  # The journal's record of this write comes first (the runner's: with the text's sha256),
  # so that a state.env no record names was written by someone else.
  if [[ -n $record ]]; then
    "$record" "$text"
  fi
  if [[ $ORBIT_FAULT == mid_state_write ]]; then
    tmp="$dir/.state.env.tmp.$$"
    half=$((${#text} / 2))
    printf '%s' "${text:0:half}" >"$tmp"
    state_fault mid_state_write
  fi
  # Both files are written and synced before either replaces its original: state.env
  # first, then its sidecar.
  state_sidecar_v "$text" "${S[GEN]}"
  sidecar=$REPLY
  tmp="$dir/.state.env.tmp.$$"
  side="$dir/.state.env.sha256.tmp.$$"
  state_put "$tmp" "$text" || state_records_fail "$dir/state.env"
  if ! state_put "$side" "$sidecar"; then
    rm -f -- "$tmp"
    state_records_fail "$dir/state.env.sha256"
  fi
  if ! state_mv "$tmp" "$dir/state.env"; then
    rm -f -- "$tmp" "$side"
    state_records_fail "$dir/state.env"
  fi
  state_fault after_state_before_sidecar
  if ! state_mv "$side" "$dir/state.env.sha256"; then
    rm -f -- "$side"
    state_records_fail "$dir/state.env.sha256"
  fi
}

# state_load DIR: parse state.env and check the sidecar. A sidecar one generation behind is
# a torn checkpoint and is re-sealed; any other mismatch returns 1 with STATE_ERR set. A
# state of a newer contract major returns STATE_LOAD_NEWER before anything is written.
STATE_LOAD_NEWER=3
# ...and a state of an older major STATE_LOAD_OLDER, also before anything is written: it
# is moved by orbit recover --migrate, never run as it is.
STATE_LOAD_OLDER=5
state_load() {
  local dir=$1 want_hash want_gen have_hash REPLY
  if ! state_parse "$dir/state.env"; then
    STATE_ERR="state.env $STATE_ERR"
    return 1
  fi
  if state_newer_major "${S[CONTRACT_VERSION]}"; then
    STATE_ERR="state.env was written under loop contract ${S[CONTRACT_VERSION]}, newer than this script's $ORBIT_CONTRACT_VERSION"
    return "$STATE_LOAD_NEWER"
  fi
  if ((10#${S[CONTRACT_VERSION]%%.*} < 10#${ORBIT_CONTRACT_VERSION%%.*})); then
    STATE_ERR="state.env was written under loop contract ${S[CONTRACT_VERSION]}, older than this script's $ORBIT_CONTRACT_VERSION"
    return "$STATE_LOAD_OLDER"
  fi
  if [[ ! -f $dir/state.env.sha256 ]]; then
    STATE_ERR="state.env.sha256 is missing"
    return 1
  fi
  if ! state_sidecar_read "$dir/state.env.sha256"; then
    STATE_ERR="state.env.sha256 is malformed"
    return 1
  fi
  want_hash=$SIDECAR_HASH want_gen=$SIDECAR_GEN
  orbit_sha256_file_v "$dir/state.env"
  have_hash=$REPLY
  if [[ $have_hash == "$want_hash" && $want_gen == "${S[GEN]}" ]]; then
    return 0
  fi
  if [[ $have_hash != "$want_hash" && $((want_gen + 1)) == "${S[GEN]}" ]]; then
    orbit_log "torn checkpoint (sidecar at gen $want_gen, state.env at gen ${S[GEN]}): re-sealed"
    state_print_v
    state_sidecar_v "$REPLY" "${S[GEN]}"
    state_write_file "$dir/state.env.sha256" "$REPLY" ||
      orbit_die "$EXIT_STATE_CORRUPT" "cannot re-seal $dir/state.env.sha256"
    ORBIT_TORN_REPAIRED=1
    return 0
  fi
  STATE_ERR="state.env does not match state.env.sha256 (state gen ${S[GEN]}, sidecar gen $want_gen)"
  return 1
}

# state_sidecar_read FILE: SIDECAR_HASH and SIDECAR_GEN from a sidecar (`<sha256>  state.env`,
# then `# gen=N`; trailing newlines do not count); status 1 when it is not one.
SIDECAR_HASH=
SIDECAR_GEN=
state_sidecar_read() {
  local text
  SIDECAR_HASH='' SIDECAR_GEN=''
  text=$(<"$1") || return 1
  [[ $text =~ ^([0-9a-f]{64})\ \ state\.env$'\n'\#\ gen=(0|[1-9][0-9]{0,17})$ ]] || return 1
  SIDECAR_HASH=${BASH_REMATCH[1]} SIDECAR_GEN=${BASH_REMATCH[2]}
}

# state_newer_major VERSION: status 0 when VERSION (a checked MAJOR.MINOR.PATCH) belongs to
# a newer major version of the loop contract than this script's: a script never reads,
# repairs or rewrites such a loop (it would silently downgrade it).
state_newer_major() {
  ((10#${1%%.*} > 10#${ORBIT_CONTRACT_VERSION%%.*}))
}
ORBIT_TORN_REPAIRED=0

# state_records_fail FILE: a write to a record failed (disk full, file too large). Going
# on would leave a hole in the record, so stop here. Every write is atomic or an append: a
# state.env not replaced is the last checkpoint, a sidecar one generation behind is a torn
# checkpoint the next start re-seals, and a torn tail of events.jsonl or progress.md is
# trimmed and the iteration completed from its result.env on the next start.
state_records_fail() {
  local rec_why="disk full?" rec_fix="free space"
  # Under a file-size limit (ulimit -f) the limit may be the cause: it is named too.
  if [[ $(ulimit -f) != unlimited ]]; then
    rec_why="disk full, or over the file-size limit (ulimit -f $(ulimit -f))?" rec_fix="free space or raise the limit"
  fi
  if declare -F config_footer >/dev/null && { : >&8; } 2>/dev/null; then
    config_footer "$STATUS_CONTINUE" "cannot write $(basename -- "$1") ($rec_why): $rec_fix, then rerun; it resumes from the last checkpoint" >&8
  fi
  orbit_die "$EXIT_STATE_CORRUPT" "cannot write $1 ($rec_why): the last checkpoint is intact; $rec_fix, then rerun"
}

# ---- events.jsonl: one JSON object per line, hash-chained. `hash` is the sha256 of the line
# ---- without its `,"hash":"..."` member; `prev` is the previous line's hash.
EV_SEQ=0
EV_PREV=0000000000000000000000000000000000000000000000000000000000000000
EV_FILE=
# state_records_at DIR: the journal and progress.md are DIR's (before either is opened: what
# runs before may name them).
state_records_at() {
  EV_FILE=$1/events.jsonl
  PG_FILE=$1/progress.md
}

# state_events_restart FILE: the journal is FILE (recover's rebuilt copy), its chain from the
# start when it is empty, else from its end (state_events_open).
state_events_restart() {
  EV_SEQ=0
  EV_PREV=0000000000000000000000000000000000000000000000000000000000000000
  state_events_open "$1"
}

# state_events_open FILE: find the chain's end; a torn last line (no newline) is trimmed.
state_events_open() {
  # Byte lengths, not characters: the torn line may hold multibyte UTF-8.
  local LC_ALL=C file=$1 last size keep
  EV_FILE=$file
  [[ -s $file ]] || return 0
  # The last line with its newline, if it has one.
  last=$(
    tail -n 1 -- "$file"
    printf x
  )
  last=${last%x}
  if [[ $last != *$'\n' ]]; then
    size=$(wc -c <"$file")
    keep=$((size - ${#last}))
    orbit_log "events.jsonl ends in a torn line (${#last} bytes): trimmed"
    head -c "$keep" -- "$file" >"$file.tmp.$$" && mv -f -- "$file.tmp.$$" "$file"
    [[ -s $file ]] || return 0
    last=$(tail -n 1 -- "$file")
  fi
  last=${last%$'\n'}
  if [[ $last =~ ^\{\"seq\":([0-9]{1,18}),.*,\"hash\":\"([0-9a-f]{64})\"\}$ ]]; then
    EV_SEQ=${BASH_REMATCH[1]}
    EV_PREV=${BASH_REMATCH[2]}
  else
    EV_SEQ=$(wc -l <"$file")
    EV_PREV=$(orbit_sha256_str "$last")
    orbit_log "warning: the last line of events.jsonl is not an orbit event; chaining on from it"
  fi
}

# Where state_event writes instead of the journal ("" for the journal): a subshell that must
# not write it (a fan-out candidate's checks or probe, which run beside the others) has its
# events queued there, each as its count of fields then the fields, NUL-terminated, for the
# runner to journal (fanout_check_take_v); /dev/null drops them.
EV_SINK=

# state_event_sink FILE: this shell's events go to FILE from now on (EV_SINK).
state_event_sink() {
  EV_SINK=$1
}

# state_event NAME ITERATION [KEY VALUE]...: values that look like integers or booleans are
# written as JSON numbers/booleans, everything else as strings.
state_event() {
  local name=$1 iter=$2 fields='' k v line ts
  if [[ -n $EV_SINK ]]; then
    printf '%s\0' "$#" "$@" >>"$EV_SINK"
    return 0
  fi
  shift 2
  while (($# >= 2)); do
    k=$1 v=$2
    shift 2
    if [[ $v =~ ^(0|-?[1-9][0-9]{0,17})$ || $v == true || $v == false ]]; then
      fields+=",\"$k\":$v"
    else
      orbit_json_v "$v"
      fields+=",\"$k\":$REPLY"
    fi
  done
  orbit_appendable "$EV_FILE" || return 0
  EV_SEQ=$((EV_SEQ + 1))
  orbit_iso_v -1
  ts=$REPLY
  line="{\"seq\":$EV_SEQ,\"ts\":\"$ts\",\"event\":\"$name\",\"iteration\":$iter$fields,\"prev\":\"$EV_PREV\"}"
  orbit_sha256_str_v "$line"
  printf '%s\n' "${line%\}},\"hash\":\"$REPLY\"}" >>"$EV_FILE" ||
    state_records_fail "$EV_FILE"
  EV_PREV=$REPLY
}

# ---- progress.md: entries closed by chained end markers (see orbit's progress module).
PG_PREV=0000000000000000000000000000000000000000000000000000000000000000
PG_FILE=

# state_progress_chain_at FILE PREV: progress.md is FILE (recover's rebuilt copy), its chain
# going on from the end marker's hash PREV.
state_progress_chain_at() {
  PG_FILE=$1 PG_PREV=$2
}

# state_progress_open FILE: find the chain's end; a torn tail (an entry without its end marker)
# is trimmed, since the runner rewrites that entry in full from the iteration's record.
# Only the file's last PG_WINDOW bytes are read, unless the last heading or marker is not
# in them.
PG_WINDOW=262144
state_progress_open() {
  local LC_ALL=C file=$1 window=$PG_WINDOW out heading_line heading_off marker_line marker_hash
  local bytes ends_nl last size=''
  PG_FILE=$file
  [[ -s $file ]] || return 0
  while :; do
    # Per window: the last heading (line, byte offset), the last end marker (line, hash),
    # the window's bytes, whether the file ends in a newline, and its last line.
    # shellcheck disable=SC2016  # awk code, not shell
    out=$(
      {
        if ((window > 0)); then tail -c "$window" -- "$file"; else cat -- "$file"; fi
        printf x
      } | LC_ALL=C awk -v window="$window" '
        function marker(s) {
          if (s !~ /^<!-- orbit:end iteration=[0-9]+ sha256=[0-9a-f]+ -->$/) return ""
          sub(/^.* sha256=/, "", s); sub(/ -->$/, "", s)
          return length(s) == 64 ? s : ""
        }
        # The first line of a window that starts inside the file may be cut: it counts
        # only if the window turns out to hold the whole file.
        NR == 1 { h1 = ($0 ~ /^## (Iteration|Recovery) /); m1 = marker($0) }
        NR > 1 {
          if ($0 ~ /^## (Iteration|Recovery) /) { hl = NR; ho = off }
          m = marker($0); if (m != "") { ml = NR; mh = m }
        }
        { off += length($0) + 1; prev = last; last = $0 }
        END {
          bytes = off - 2
          if (window == 0 || bytes < window) {
            if (hl == "" && h1) { hl = 1; ho = 0 }
            if (ml == "" && m1 != "") { ml = 1; mh = m1 }
          }
          nl = (last == "x") ? 1 : 0
          tail = nl ? prev : substr(last, 1, length(last) - 1)
          if (!nl) { m = marker(tail); if (m != "") { ml = NR; mh = m } }
          printf "%s\037%s\037%s\037%s\037%d\037%d\037%s", hl, ho, ml, mh, bytes, nl, tail
        }'
    )
    IFS=$'\037' read -r heading_line heading_off marker_line marker_hash bytes ends_nl last <<<"$out" || true
    # A window that held the whole file, or both a heading and a marker, is enough.
    if ((window == 0 || bytes < window)) || [[ -n $heading_line && -n $marker_line ]]; then
      break
    fi
    window=0
  done
  if ((window > 0 && bytes >= window)); then
    size=$(wc -c <"$file")
    heading_off=$((${heading_off:-0} + size - bytes))
  else
    size=$bytes
  fi
  if [[ -n $heading_line ]]; then
    if [[ -z $marker_line ]] || ((marker_line < heading_line)); then
      orbit_log "progress.md ends in an unclosed entry at byte $heading_off: trimmed"
      head -c "$heading_off" -- "$file" >"$file.tmp.$$" && mv -f -- "$file.tmp.$$" "$file"
    elif ((!ends_nl)); then
      # The last line has no newline: a closing marker only missing it is completed; any
      # other line is what a torn append left (a heading cut short) and is trimmed.
      if [[ $last =~ ^\<\!--\ orbit:end\ iteration=[0-9]+\ sha256=[0-9a-f]{64}\ --\>$ ]]; then
        printf '\n' >>"$file"
      else
        orbit_log "progress.md ends in a torn line (${#last} bytes): trimmed"
        head -c "$((size - ${#last}))" -- "$file" >"$file.tmp.$$" && mv -f -- "$file.tmp.$$" "$file"
      fi
    fi
  fi
  if [[ -n $marker_hash ]]; then
    PG_PREV=$marker_hash
  fi
}

# state_progress_append ITERATION TEXT: TEXT starts with its heading and ends with a newline.
state_progress_append() {
  local iter=$1 text=$2 hash
  orbit_appendable "$PG_FILE" || return 0
  orbit_sha256_str_v "$PG_PREV"$'\n'"$text"
  hash=$REPLY
  if [[ $ORBIT_FAULT == mid_progress_append ]]; then
    printf '%s' "${text:0:$((${#text} / 2))}" >>"$PG_FILE"
    state_fault mid_progress_append
  fi
  printf '%s<!-- orbit:end iteration=%s sha256=%s -->\n\n' "$text" "$iter" "$hash" >>"$PG_FILE" ||
    state_records_fail "$PG_FILE"
  PG_PREV=$hash
}

# Foreign text for an entry: cleaned, every line indented by four spaces.
state_progress_quote() {
  orbit_clean_text | sed 's/^/    /'
}
