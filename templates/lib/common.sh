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

orbit_is_uint() { [[ $1 =~ ^(0|[1-9][0-9]{0,17})$ ]]; }
orbit_is_bool() { [[ $1 == 0 || $1 == 1 || $1 == true || $1 == false ]]; }
orbit_true() { [[ $1 == 1 || $1 == true ]]; }

# orbit_duration_v NAME TEXT: REPLY is the seconds of 600, 600s, 10m, 1h30m or 2d; anything
# else stops the script with EXIT_PREFLIGHT naming the setting (no subshell, so the exit is real).
orbit_duration_v() {
  local name=$1 text=$2 total=0 num unit
  if [[ $text =~ ^[0-9]{1,9}$ ]]; then
    REPLY=$((10#$text))
    return 0
  fi
  if [[ ! $text =~ ^([0-9]{1,9}[smhd])+$ ]]; then
    orbit_die "$EXIT_PREFLIGHT" "$name='$text' is not a duration: write e.g. 90s, 10m, 2h, 1h30m (or 0 for none)"
  fi
  while [[ $text =~ ^([0-9]+)([smhd])(.*)$ ]]; do
    num=$((10#${BASH_REMATCH[1]})) unit=${BASH_REMATCH[2]} text=${BASH_REMATCH[3]}
    case $unit in
      s) total=$((total + num)) ;;
      m) total=$((total + num * 60)) ;;
      h) total=$((total + num * 3600)) ;;
      d) total=$((total + num * 86400)) ;;
    esac
  done
  REPLY=$total
}

orbit_duration() {
  local REPLY
  orbit_duration_v "$@"
  printf '%s' "$REPLY"
}

# orbit_usd_micro_v NAME TEXT: REPLY is the micro-dollars of a USD amount ("" stays "" =
# no cap); anything else stops the script with EXIT_PREFLIGHT naming the setting.
orbit_usd_micro_v() {
  local name=$1 text=$2 whole frac
  REPLY=''
  if [[ -z $text ]]; then
    return 0
  fi
  if [[ ! $text =~ ^([0-9]{0,9})(\.([0-9]{0,6}))?$ || $text == . ]]; then
    orbit_die "$EXIT_PREFLIGHT" "$name='$text' is not an amount in USD: write e.g. 5, 12.50 or 0.75"
  fi
  whole=${BASH_REMATCH[1]:-0} frac=${BASH_REMATCH[3]}
  frac="${frac}000000"
  REPLY=$((10#$whole * 1000000 + 10#${frac:0:6}))
}

orbit_usd_text() {
  local m=$1
  printf '%d.%06d' "$((m / 1000000))" "$((m % 1000000))"
}

# Messages go to stderr and, once the loop directory is known, to runner.log.
ORBIT_LOG_FILE=
orbit_log() {
  local line REPLY
  orbit_iso_v -1
  line="$REPLY $*"
  # stderr may be a terminal that is gone (a killed tmux pane): never fail on it.
  printf '%s\n' "$line" >&2 2>/dev/null || true
  if [[ -n $ORBIT_LOG_FILE ]]; then
    printf '%s\n' "$line" >>"$ORBIT_LOG_FILE" 2>/dev/null || true
  fi
}

# orbit_die CODE MESSAGE: explain, then exit with CODE.
ORBIT_DIE_HOOK=
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
    # shellcheck disable=SC2016  # perl code, not shell
    exec perl -e '
      use strict; $| = 1;
      $SIG{INT} = $SIG{TERM} = $SIG{HUP} = "IGNORE";
      eval { require Digest::SHA; 1 } or exit 3;
      binmode STDIN; print "ready\n";
      while (defined(my $h = <STDIN>)) {
        my ($m, $n) = $h =~ /^([SF]) (\d+)\n$/ or exit 4;
        my $d = "";
        while (length($d) < $n) { read(STDIN, $d, $n - length($d), length($d)) or exit 5; }
        if ($m eq "S") { print Digest::SHA::sha256_hex($d), "\n"; next; }
        my $fh;
        if (open($fh, "<:raw", $d)) {
          my $s = Digest::SHA->new(256); $s->addfile($fh); close $fh; print $s->hexdigest, "\n";
        } else { print "-\n"; }
      }' 2>/dev/null 8>&- 9>&-
  }
  # shellcheck disable=SC2153  # ORBIT_HASHER_PID is set by coproc
  ORBIT_HASH_PID=$ORBIT_HASHER_PID
  ORBIT_HASH_READY=0
}
# orbit_hasher_alive: status 0 when the hasher is there and has said it is ready.
orbit_hasher_alive() {
  local ready=''
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
# cannot be read. All requests go out before the first answer is read (one round trip).
# Status 1 (ORBIT_HASHES empty) if there is no hasher.
ORBIT_HASHES=()
orbit_hasher_files() {
  local LC_ALL=C f req='' i
  ORBIT_HASHES=()
  orbit_hasher_alive || return 1
  for f in "$@"; do
    req+="F ${#f}"$'\n'"$f"
  done
  if ! printf '%s' "$req" >&"${ORBIT_HASHER[1]}"; then
    orbit_hasher_stop
    return 1
  fi
  for ((i = 0; i < $#; i++)); do
    if ! read -r -t 30 "ORBIT_HASHES[i]" <&"${ORBIT_HASHER[0]}" ||
      [[ ! ${ORBIT_HASHES[i]} =~ ^([0-9a-f]{64}|-)$ ]]; then
      orbit_hasher_stop
      ORBIT_HASHES=()
      return 1
    fi
  done
}

# The same, into REPLY, with a single fork (none with the hasher): hot paths use these.
ORBIT_TMP=
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

