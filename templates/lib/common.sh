# ---- common: portable helpers shared by the loop's scripts (static, included verbatim).

# Epoch seconds and UTC ISO-8601, from bash itself (no `date -d`, no GNU date).
orbit_now() { printf '%(%s)T' -1; }
orbit_iso() { TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T' "$1"; }
orbit_iso_now() { orbit_iso -1; }
# Into REPLY, without a fork.
orbit_now_v() { printf -v REPLY '%(%s)T' -1; }
orbit_iso_v() { TZ=UTC0 printf -v REPLY '%(%Y-%m-%dT%H:%M:%SZ)T' "$1"; }

# orbit_cut_v TEXT N: REPLY is TEXT cut to at most N bytes, never inside a UTF-8 sequence.
orbit_cut_v() {
  local LC_ALL=C
  REPLY=${1:0:$2}
  if [[ ${1:$2:1} == [$'\x80'-$'\xbf'] ]]; then
    while [[ -n $REPLY && ${REPLY: -1} == [$'\x80'-$'\xbf'] ]]; do
      REPLY=${REPLY:0:${#REPLY}-1}
    done
    REPLY=${REPLY:0:${#REPLY}-1}
  fi
}

# orbit_is_uint TEXT: status 0 when TEXT is a whole number as the loop's files write one
# (no leading zero, at most ORBIT_UINT_DIGITS digits: inside bash's arithmetic).
orbit_is_uint() {
  local LC_ALL=C
  [[ $1 =~ $ORBIT_RE_UINT ]]
}
# orbit_true VALUE: status 0 for a setting's true (1 or true).
orbit_true() { [[ $1 == 1 || $1 == true ]]; }

# orbit_duration_v TEXT: REPLY is the seconds of a duration as orbit's Rust parser reads it
# (600, 600s, 10m, 1h30m, 2d; blanks around it ignored); status 1 when TEXT is not one. A
# duration past ORBIT_DURATION_MAX comes back as ORBIT_DURATION_MAX + 1, so that no sum
# leaves bash's arithmetic however many digits it has.
orbit_duration_v() {
  local LC_ALL=C text=$1 total=0 num unit over=$((ORBIT_DURATION_MAX + 1))
  REPLY=''
  text=${text#"${text%%[![:space:]]*}"}
  text=${text%"${text##*[![:space:]]}"}
  if [[ $text =~ ^[0-9]+$ ]]; then
    text+=s
  fi
  [[ $text =~ ^([0-9]+[smhd])+$ ]] || return 1
  while [[ $text =~ ^([0-9]+)([smhd])(.*)$ ]]; do
    num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]} text=${BASH_REMATCH[3]}
    num=${num#"${num%%[!0]*}"}
    if ((${#num} > 12)); then
      total=$over
      break
    fi
    case $unit in
      s) total=$((total + 10#${num:-0})) ;;
      m) total=$((total + 10#${num:-0} * 60)) ;;
      h) total=$((total + 10#${num:-0} * 3600)) ;;
      d) total=$((total + 10#${num:-0} * 86400)) ;;
    esac
    if ((total > ORBIT_DURATION_MAX)); then
      total=$over
      break
    fi
  done
  REPLY=$total
}

# orbit_usd_micro_v TEXT: REPLY is the micro-dollars of a USD amount (5, 12.50, 0.75; at most
# 9 digits before the point and 6 after), "" for "" (no cap); status 1 when TEXT is not one.
orbit_usd_micro_v() {
  local LC_ALL=C text=$1 whole frac
  REPLY=''
  [[ -z $text ]] && return 0
  if [[ ! $text =~ ^([0-9]{0,9})(\.([0-9]{0,6}))?$ || $text == . ]]; then
    return 1
  fi
  whole=${BASH_REMATCH[1]:-0} frac=${BASH_REMATCH[3]}
  frac="${frac}000000"
  REPLY=$((10#$whole * 1000000 + 10#${frac:0:6}))
}

# orbit_setting_v NAME: checks the setting NAME (its value is $NAME) by its kind and bounds
# in the prelude (ORBIT_SETTING_KIND, ORBIT_SETTING_MIN, ORBIT_SETTING_MAX,
# ORBIT_SETTING_WORDS: the table loop.toml is validated by). REPLY is the value in the unit
# the scripts compute with: a count as it is, a duration in seconds, a bool as 1 or 0, an
# amount in micro-dollars ("" for none), text and a choice's word as they are. Status 1,
# with ORBIT_SETTING_ERR saying what is wrong and what to do, for a value the loop does not
# take.
ORBIT_SETTING_ERR=
orbit_setting_v() {
  local LC_ALL=C name=$1 kind value min max key word
  local -a words=()
  kind=${ORBIT_SETTING_KIND[$name]-}
  value=${!name-}
  min=${ORBIT_SETTING_MIN[$name]-0} max=${ORBIT_SETTING_MAX[$name]-0}
  REPLY='' ORBIT_SETTING_ERR=''
  case $kind in
    count)
      if ! orbit_is_uint "$value"; then
        ORBIT_SETTING_ERR="$name='$value' is not a whole number: give one from $min to $max"
      elif ((value < min || value > max)); then
        ORBIT_SETTING_ERR="$name=$value is out of range: give a whole number from $min to $max"
      else
        REPLY=$value
      fi
      ;;
    duration)
      if ! orbit_duration_v "$value"; then
        ORBIT_SETTING_ERR="$name='$value' is not a duration: write e.g. 90s, 10m, 2h, 1h30m (or 0 for none)"
      elif ((REPLY < min || REPLY > max)); then
        REPLY=''
        if ((min == 0)); then
          ORBIT_SETTING_ERR="$name=$value is out of range: give a duration of at most $((max / 86400))d (a year), or 0 for none"
        else
          ORBIT_SETTING_ERR="$name=$value is out of range: give a duration from ${min}s to $((max / 86400))d (a year)"
        fi
      fi
      ;;
    bool)
      case $value in
        1 | true) REPLY=1 ;;
        0 | false) REPLY=0 ;;
        *) ORBIT_SETTING_ERR="$name='$value' must be 0 or 1 (or true or false)" ;;
      esac
      ;;
    usd)
      orbit_usd_micro_v "$value" ||
        ORBIT_SETTING_ERR="$name='$value' is not an amount in USD: write e.g. 5, 12.50 or 0.75 (or nothing for none)"
      ;;
    # A list is its words separated by blanks; each channel checks its own words.
    text | list) REPLY=$value ;;
    choice)
      read -r -a words <<<"${ORBIT_SETTING_WORDS[$name]-}"
      for word in "${words[@]}"; do
        if [[ $value == "$word" ]]; then
          REPLY=$value
        fi
      done
      if [[ -z $REPLY ]]; then
        ORBIT_SETTING_ERR="$name='$value' is not one of: ${words[*]}"
      fi
      ;;
    *) ORBIT_SETTING_ERR="$name is not a setting of the loop contract" ;;
  esac
  [[ -z $ORBIT_SETTING_ERR ]] && return 0
  key=${ORBIT_SETTING_IDENTITY[$name]-}
  if [[ -n $key ]]; then
    # The loop's identity: loop.toml alone sets it.
    ORBIT_SETTING_ERR+=". Set $key in loop.toml and run orbit init --force"
    return 1
  fi
  key=${name,,}
  ORBIT_SETTING_ERR+=". Set ${key//_/-} in loop.toml and run orbit init --force, or override it with $name=... in the environment"
  return 1
}

# orbit_permission_file PATH: status 0 when PATH (relative to the workspace's root, a pin
# path under the workspace WS, or a contract-1.0 pin path that reaches the repository
# through ../) is an agent permission file: past its leading ../ and ./
# segments, a match of one of ORBIT_PERMISSION_FILES at the repository root, the directory
# exactly and the name by the glob. A deeper copy (docs/.claude/settings.json) is not one.
# The rule of orbit's contract::is_permission_file.
orbit_permission_file() {
  local p=$1 g
  # A pin of contract 2.0 names a workspace file by its absolute path.
  if [[ -n ${WS:-} && $p == "$WS"/* ]]; then
    p=${p#"$WS"/}
  elif [[ $p == /* ]]; then
    return 1
  fi
  while [[ $p == ../* ]]; do p=${p#../}; done
  while [[ $p == ./* ]]; do p=${p#./}; done
  for g in "${ORBIT_PERMISSION_FILES[@]}" ${ENGINE_PERMISSION_FILES[@]+"${ENGINE_PERMISSION_FILES[@]}"}; do
    # A name alone is at the root; a glob's * takes no dot file, as bash's does.
    if [[ $g != */* ]]; then
      [[ $p == "$g" ]] && return 0
      continue
    fi
    [[ $p == */* ]] || continue
    [[ ${p##*/} == .* && ${g##*/} == \** ]] && continue
    # shellcheck disable=SC2053  # the glob's name part is a pattern, by design
    if [[ ${p%/*} == "${g%/*}" && ${p##*/} == ${g##*/} ]]; then
      return 0
    fi
  done
  return 1
}

# orbit_pin_reason_v PATH: REPLY is the stop reason of a change to the pinned PATH (as
# pins.sha256 names it: loop files by name, repository files through ../): goal.md is
# goal_drift, verify.sh, holdout.sh, holdout/ and protected paths reward_hack, agent permission files
# permission_hijack, the scripts and loop.toml script_tamper. orbit's contract::pin_reason.
orbit_pin_reason_v() {
  local p=$1
  if [[ $p != */* ]]; then
    case $p in
      goal.md) REPLY=$REASON_GOAL_DRIFT ;;
      verify.sh | holdout.sh) REPLY=$REASON_REWARD_HACK ;;
      *) REPLY=$REASON_SCRIPT_TAMPER ;;
    esac
  elif orbit_permission_file "$p"; then
    REPLY=$REASON_PERMISSION_HIJACK
  elif [[ -n $ORBIT_LOOP_COPY && $p == "$ORBIT_LOOP_COPY"/* ]]; then
    # The loop directory's copy in the workspace (the runner's trust_loop_copy_files).
    REPLY=$REASON_SCRIPT_TAMPER
  else
    REPLY=$REASON_REWARD_HACK
  fi
}
# The loop directory's copy in the workspace, when the loop directory is in the repository
# (set by orbit_loop_copy_at once both are known; "" for none).
ORBIT_LOOP_COPY=
# orbit_loop_copy_at LOOP_DIR REPO_ROOT WORKSPACE: ORBIT_LOOP_COPY for them.
orbit_loop_copy_at() {
  ORBIT_LOOP_COPY=
  [[ $1 == "$2"/* && -n $3 ]] && ORBIT_LOOP_COPY=$3/${1#"$2"/}
  return 0
}

orbit_usd_text() {
  local m=$1
  printf '%d.%06d' "$((m / 1000000))" "$((m % 1000000))"
}

# ---- cost.ledger: one rule for every reader, that of orbit's ledger module (parse_line).
# orbit_ledger_sum_v FILE [ITERATION]: REPLY is the sum of FILE's amounts, counting whole
# ledger lines only: 3 to 5 TAB-separated fields, the iteration and the amount whole numbers
# of at most ORBIT_UINT_DIGITS digits, the kind a cost kind (ORBIT_RE_COST_KIND), then
# optionally the candidate (a whole number) and optionally the source (ORBIT_RE_COST_SOURCE). Blank lines and anything else add
# nothing, and so does a last line without its newline (a torn append): ORBIT_LEDGER_TORN
# is 1 then. With ITERATION, ORBIT_LEDGER_ITER_SUM is that iteration's sum and
# ORBIT_LEDGER_ITER_KINDS the kinds of its lines (" reported unknown "). A sum past 18
# digits is held at 999999999999999999, the most state.env can hold. No file sums to 0;
# status 1 when the file cannot be read.
ORBIT_LEDGER_ITER_SUM=0
ORBIT_LEDGER_ITER_KINDS=' '
ORBIT_LEDGER_TORN=0
orbit_ledger_sum_v() {
  local file=$1 it=${2-} out k IFS=' '
  local -a f=()
  REPLY=0 ORBIT_LEDGER_ITER_SUM=0 ORBIT_LEDGER_ITER_KINDS=' ' ORBIT_LEDGER_TORN=0
  [[ -e $file ]] || return 0
  # awk (mawk included) keeps no record's terminator: a unit separator after the file's last
  # byte marks its last record, which is a whole line only when the separator stands alone.
  # A record holding one is no ledger line anyway. Amounts are summed in two halves of nine
  # digits each, which stay exact in awk's doubles.
  # shellcheck disable=SC2016  # awk code, not shell
  out=$({ cat -- "$file" && printf '\037'; } | LC_ALL=C awk -F '\t' \
    -v it="$it" -v digits="$ORBIT_UINT_DIGITS" -v kinds="$ORBIT_RE_COST_KIND" -v sources="$ORBIT_RE_COST_SOURCE" '
    function whole(x) { return x ~ /^[0-9]+$/ && length(x) <= digits }
    function norm(x) { sub(/^0+/, "", x); return x == "" ? "0" : x }
    function hi(x) { return length(x) > 9 ? substr(x, 1, length(x) - 9) + 0 : 0 }
    function lo(x) { return length(x) > 9 ? substr(x, length(x) - 8) + 0 : x + 0 }
    BEGIN { if (it != "") it = norm(it) }
    { last = $0 }
    index($0, "\037") { next }
    (NF == 3 || (NF == 4 && (whole($4) || $4 ~ sources)) || (NF == 5 && whole($4) && $5 ~ sources)) &&
      whole($1) && whole($2) && $3 ~ kinds {
      a = norm($2); h += hi(a); l += lo(a)
      if (it != "" && norm($1) == it) { ih += hi(a); il += lo(a); seen[$3] = 1 }
    }
    END {
      printf "%.0f %.0f %.0f %.0f %d", h, l, ih, il, (last != "\037")
      for (k in seen) printf " %s", k
    }') || return 1
  read -r -a f <<<"$out" || true
  ((${#f[@]} >= 5)) || return 1
  for k in "${f[@]:0:5}"; do
    [[ $k =~ ^[0-9]{1,16}$ ]] || return 1
  done
  orbit_ledger_join_v "${f[2]}" "${f[3]}"
  # shellcheck disable=SC2034  # an output: not every script reads it
  ORBIT_LEDGER_ITER_SUM=$REPLY
  # shellcheck disable=SC2034  # an output: not every script reads it
  ORBIT_LEDGER_TORN=${f[4]}
  for k in "${f[@]:5}"; do
    ORBIT_LEDGER_ITER_KINDS+="$k "
  done
  orbit_ledger_join_v "${f[0]}" "${f[1]}"
}

# orbit_ledger_join_v HI LO: REPLY is HI * 10^9 + LO, the sums of the amounts' upper and
# lower nine digits, held at 999999999999999999 past it.
orbit_ledger_join_v() {
  local hi=$1 lo=$2
  hi=$((hi + lo / 1000000000)) lo=$((lo % 1000000000))
  if ((hi > 999999999)); then
    REPLY=999999999999999999
  else
    REPLY=$((hi * 1000000000 + lo))
  fi
}

# orbit_file_kind PATH: what PATH is, in words (for a message about a file that should
# be a regular one).
orbit_file_kind() {
  if [[ -L $1 ]]; then
    printf 'a symlink to %s' "$(readlink -- "$1" 2>/dev/null || true)"
  elif [[ -p $1 ]]; then
    printf 'a FIFO'
  elif [[ -S $1 ]]; then
    printf 'a socket'
  elif [[ -b $1 || -c $1 ]]; then
    printf 'a device'
  elif [[ -d $1 ]]; then
    printf 'a directory'
  elif [[ -f $1 ]]; then
    printf 'a regular file'
  else
    printf 'missing'
  fi
}

# orbit_regular PATH: PATH is a regular file and not a symlink (safe to read: no FIFO that
# blocks, no device, no link to somewhere else).
orbit_regular() { [[ -f $1 && ! -L $1 ]]; }

# orbit_appendable PATH: PATH may be appended to: a regular file, or nothing yet (never a
# link, a FIFO or a device someone put in its place). Logged when it may not.
orbit_appendable() {
  if [[ ! -L $1 && (-f $1 || ! -e $1) ]]; then
    return 0
  fi
  ORBIT_LOG_FILE=${ORBIT_LOG_FILE:-} orbit_log "not written: $1 is $(orbit_file_kind "$1") (the runner never writes through one)"
  return 1
}

# Messages go to stderr and, once the loop directory is known, to runner.log.
ORBIT_LOG_FILE=
# orbit_log_to FILE: messages go to FILE from now on, as well as to stderr.
orbit_log_to() {
  ORBIT_LOG_FILE=$1
}

orbit_log() {
  local line REPLY
  orbit_iso_v -1
  line="$REPLY $*"
  # stderr may be a terminal that is gone (a killed tmux pane): never fail on it.
  printf '%s\n' "$line" >&2 2>/dev/null || true
  # Never through a link (the file's or its directory's) or into a FIFO an agent put in its
  # place.
  if [[ -n $ORBIT_LOG_FILE && ! -L $ORBIT_LOG_FILE && ! -L ${ORBIT_LOG_FILE%/*} && (-f $ORBIT_LOG_FILE || ! -e $ORBIT_LOG_FILE) ]]; then
    printf '%s\n' "$line" >>"$ORBIT_LOG_FILE" 2>/dev/null || true
  fi
}

# orbit_die CODE MESSAGE: explain, then exit with CODE.
ORBIT_DIE_HOOK=
# orbit_die_hook [FUNCTION]: orbit_die calls FUNCTION MESSAGE before it exits (none: nothing).
orbit_die_hook() {
  ORBIT_DIE_HOOK=${1:-}
}
orbit_die() {
  local code=$1
  shift
  orbit_log "error: $*"
  # A script may ask for a last word on stdout (the runner's footer).
  if [[ -n $ORBIT_DIE_HOOK ]]; then
    "$ORBIT_DIE_HOOK" "$*"
  fi
  exit "$code"
}

# ---- sha256: sha256sum, or shasum -a 256, or openssl.
ORBIT_SHA_TOOL=
orbit_sha_detect() {
  if [[ -n ${ORBIT_FORCE_SHA_TOOL:-} ]]; then
    ORBIT_SHA_TOOL=$ORBIT_FORCE_SHA_TOOL
  elif command -v sha256sum >/dev/null 2>&1; then
    ORBIT_SHA_TOOL=sha256sum
  elif command -v shasum >/dev/null 2>&1; then
    ORBIT_SHA_TOOL=shasum
  elif command -v openssl >/dev/null 2>&1; then
    ORBIT_SHA_TOOL=openssl
  else
    orbit_die "$EXIT_PREFLIGHT" "no sha256 tool found (sha256sum, shasum or openssl): install coreutils"
  fi
}

# Hex sha256 of standard input.
orbit_sha256_stdin() {
  local out
  [[ -n $ORBIT_SHA_TOOL ]] || orbit_sha_detect
  case $ORBIT_SHA_TOOL in
    sha256sum) out=$(sha256sum) ;;
    shasum) out=$(shasum -a 256) ;;
    *) out=$(openssl dgst -sha256 -r) ;;
  esac
  printf '%s' "${out%% *}"
}

orbit_sha256_file() { orbit_sha256_stdin <"$1"; }
orbit_sha256_str() { printf '%s' "$1" | orbit_sha256_stdin; }

# ---- a hashing coprocess: where perl has Digest::SHA (any system with git from a package
# ---- manager), one process answers all of a run's hashes over a pipe instead of a fork per
# ---- hash. Request: "S <bytes>\n<data>" (hash the data) or "F <bytes>\n<path>" (hash the
# ---- file); answer: 64 hex digits, or "-". Any trouble and the tools above take over.
ORBIT_HASH_PID=
ORBIT_HASH_READY=0
# shellcheck disable=SC2016  # perl code, not shell
ORBIT_HASHER_PL='
@perl:hasher.pl@'
# orbit_hasher_start: starts it; its first answer ("ready") is awaited at the first hash,
# so that perl starts while the caller goes on.
orbit_hasher_start() {
  if [[ -n ${ORBIT_FORCE_SHA_TOOL:-} || -n ${ORBIT_NO_HASHER:-} ]] || ! command -v perl >/dev/null 2>&1; then
    return 0
  fi
  # No loop markers in its environment (the sweeps must never take it for the agent's), not
  # the runner's lock or stdout (fds 9, 8), and deaf to the terminal's signals: it ends when
  # the runner closes the pipe.
  coproc ORBIT_HASHER {
    unset ORBIT_OWNER ORBIT_RUN_ID
    exec perl -e "$ORBIT_HASHER_PL" "${HOME_PERL_SUBS-}" 2>/dev/null 7<&- 8>&- 9>&-
  }
  # shellcheck disable=SC2153  # ORBIT_HASHER_PID is set by coproc
  ORBIT_HASH_PID=$ORBIT_HASHER_PID
  ORBIT_HASH_READY=0
}
# orbit_hasher_alive: status 0 when the hasher is there and has said it is ready. A subshell
# has none (bash closes a coprocess's pipes in it): it hashes without, and leaves it be.
orbit_hasher_alive() {
  local ready=''
  [[ $BASHPID == "$$" ]] || return 1
  if [[ -z $ORBIT_HASH_PID ]] || ! kill -0 "$ORBIT_HASH_PID" 2>/dev/null; then
    ORBIT_HASH_PID=''
    return 1
  fi
  if ((!ORBIT_HASH_READY)); then
    if ! read -r -t 10 ready <&"${ORBIT_HASHER[0]}" || [[ $ready != ready ]]; then
      orbit_hasher_stop
      return 1
    fi
    ORBIT_HASH_READY=1
  fi
}
orbit_hasher_stop() {
  if [[ -n $ORBIT_HASH_PID ]]; then
    kill "$ORBIT_HASH_PID" 2>/dev/null || true
    ORBIT_HASH_PID=''
  fi
}
# orbit_hasher_v S|F DATA: REPLY is the hash; status 1 (and no hasher from then on) if the
# coprocess cannot answer. The liveness check keeps a write from meeting a closed pipe.
orbit_hasher_v() {
  local LC_ALL=C
  orbit_hasher_alive || return 1
  if printf '%s %d\n%s' "$1" "${#2}" "$2" >&"${ORBIT_HASHER[1]}" &&
    read -r -t 30 REPLY <&"${ORBIT_HASHER[0]}" && [[ $REPLY =~ ^[0-9a-f]{64}$ ]]; then
    return 0
  fi
  # "-": the file could not be read; the tool says why. Anything else: the hasher is gone.
  [[ $REPLY == - ]] || orbit_hasher_stop
  return 1
}

# orbit_hasher_files FILE...: ORBIT_HASHES holds each file's hash, or "-" for a file that
# cannot be read. Requests go out in batches of ORBIT_HASH_BATCH, each batch's answers read
# before the next goes out (a round trip per batch): the answers of a batch (65 bytes each)
# fit in a pipe, so the hasher never waits to write while the runner waits to write too (a
# write has no timeout: both would wait for ever). Status 1 (ORBIT_HASHES empty) if there is
# no hasher.
ORBIT_HASHES=()
ORBIT_HASH_BATCH=256
orbit_hasher_files() {
  local LC_ALL=C f req='' i=0 from=0
  local -a files=("$@")
  ORBIT_HASHES=()
  orbit_hasher_alive || return 1
  while ((from < ${#files[@]})); do
    req=''
    for f in "${files[@]:from:ORBIT_HASH_BATCH}"; do
      req+="F ${#f}"$'\n'"$f"
    done
    if ! printf '%s' "$req" >&"${ORBIT_HASHER[1]}"; then
      orbit_hasher_stop
      ORBIT_HASHES=()
      return 1
    fi
    for ((i = from; i < from + ORBIT_HASH_BATCH && i < ${#files[@]}; i++)); do
      if ! read -r -t 30 "ORBIT_HASHES[i]" <&"${ORBIT_HASHER[0]}" ||
        [[ ! ${ORBIT_HASHES[i]} =~ ^([0-9a-f]{64}|-)$ ]]; then
        orbit_hasher_stop
        ORBIT_HASHES=()
        return 1
      fi
    done
    from=$i
  done
}

# orbit_hasher_ask_v H|L DATA: REPLY is the hasher's answer of that kind ("<bytes>\n<answer>");
# status 1 when it has none ("-") or cannot answer (and no hasher from then on). The answer
# follows its length in the same write, and is read with no time bound: bash reads a pipe
# byte by byte under -t (30 ms for a 30 KB listing, against 1 ms).
orbit_hasher_ask_v() {
  local LC_ALL=C n
  orbit_hasher_alive || return 1
  if printf '%s %d\n%s' "$1" "${#2}" "$2" >&"${ORBIT_HASHER[1]}" && read -r -t 60 n <&"${ORBIT_HASHER[0]}"; then
    [[ $n == - ]] && return 1
    REPLY=''
    [[ $n =~ ^[0-9]+$ ]] && { ((n == 0)) || IFS= read -r -N "$n" REPLY <&"${ORBIT_HASHER[0]}"; } && ((${#REPLY} == n)) && return 0
  fi
  REPLY=''
  orbit_hasher_stop
  return 1
}

# orbit_hasher_args_v ARG...: REPLY is the arguments as a request of the hasher's carries them
# (each as "<bytes> <argument>").
orbit_hasher_args_v() {
  local LC_ALL=C a
  REPLY=''
  for a in "$@"; do
    REPLY+="${#a} $a"
  done
}

# The script's scratch directory (set by orbit_tmp_at; "" for none).
ORBIT_TMP=
# orbit_tmp_at DIR: the scratch directory is DIR from now on.
orbit_tmp_at() {
  ORBIT_TMP=$1
}

# The same, into REPLY, with a single fork (none with the hasher): hot paths use these.
orbit_sha256_file_v() {
  local out
  if orbit_hasher_v F "$1"; then
    return 0
  fi
  [[ -n $ORBIT_SHA_TOOL ]] || orbit_sha_detect
  case $ORBIT_SHA_TOOL in
    sha256sum) out=$(sha256sum -- "$1") ;;
    shasum) out=$(shasum -a 256 -- "$1") ;;
    *) out=$(openssl dgst -sha256 -r -- "$1") ;;
  esac
  REPLY=${out%% *}
  # A name with a backslash or newline makes the tool prefix its line with '\'.
  REPLY=${REPLY#\\}
}
orbit_sha256_str_v() {
  if orbit_hasher_v S "$1"; then
    return 0
  fi
  if [[ -z $ORBIT_TMP ]]; then
    REPLY=$(orbit_sha256_str "$1")
    return 0
  fi
  printf '%s' "$1" >"$ORBIT_TMP/sha.in"
  orbit_sha256_file_v "$ORBIT_TMP/sha.in"
}

# ---- JSON: a string value, quoted and escaped. Invalid UTF-8 must not reach it: callers
# pass text through orbit_clean_text first when it came from outside.
# orbit_json_v STR: REPLY is STR as a JSON string literal (no fork).
orbit_json_v() {
  local s=$1 out='' c i
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  if [[ $s == *[[:cntrl:]]* ]]; then
    for ((i = 0; i < ${#s}; i++)); do
      c=${s:i:1}
      if [[ $c == [[:cntrl:]] ]]; then
        printf -v c '\\u%04x' "'$c"
      fi
      out+=$c
    done
    s=$out
  fi
  REPLY="\"$s\""
}

orbit_json_str() {
  local REPLY
  orbit_json_v "$1"
  printf '%s' "$REPLY"
}

# Text from outside (agent or check output) made safe to embed: valid UTF-8 only (invalid
# bytes dropped), no control characters but tab and newline.
orbit_clean_text() {
  if command -v iconv >/dev/null 2>&1; then
    iconv -c -f UTF-8 -t UTF-8 2>/dev/null | LC_ALL=C tr -d '\000-\010\013-\037\177' || true
  else
    LC_ALL=C tr -cd '\11\12\40-\176' || true
  fi
}

