# ---- lib.sh, beside this script, holds the code it shares with the loop's other scripts:
# ---- its sha256 is checked against the pin below (this script is pinned, and with it the
# ---- pin), its first ORBIT_LIB_BYTES bytes read once into memory, checked against their
# ---- own pin, and only this script's ranges of them run.
ORBIT_LIB_SHA256=@SHA256@
ORBIT_LIB_READ_SHA256=@READ_SHA256@
ORBIT_LIB_BYTES=@BYTES@
ORBIT_LIB_RANGES=(@RANGES@)
ORBIT_LIB_TEXT='' ORBIT_LIB_CODE='' ORBIT_LIB_WHY=''
ORBIT_LIB_DIR=${BASH_SOURCE[0]:-$0}
[[ $ORBIT_LIB_DIR == */* ]] && ORBIT_LIB_DIR=${ORBIT_LIB_DIR%/*} || ORBIT_LIB_DIR=.

# orbit_lib_sha256_v FILE|-: REPLY is the sha256 of FILE, or (-) of ORBIT_LIB_TEXT ("" if no
# tool here computes one): one process, fed the file on its input or the text by a pipe.
orbit_lib_sha256_v() {
  local out='' tool lp=0
  local -a cmd=()
  for tool in sha256sum 'shasum -a 256' 'openssl dgst -sha256 -r'; do
    command -v "${tool%% *}" >/dev/null 2>&1 && read -r -a cmd <<<"$tool" && break
  done
  if ((${#cmd[@]})) && [[ $1 == - ]]; then
    shopt -q lastpipe && lp=1
    shopt -s lastpipe
    printf '%s' "$ORBIT_LIB_TEXT" | "${cmd[@]}" 2>/dev/null | IFS= read -r out || out=''
    ((lp)) || shopt -u lastpipe
  elif ((${#cmd[@]})); then
    out=$("${cmd[@]}" <"$1") || out=''
  fi
  REPLY=${out%%[!0-9a-f]*}
  [[ ${#REPLY} == 64 ]] || REPLY=''
}

# orbit_lib_read: ORBIT_LIB_CODE is this script's code from lib.sh, checked as said above;
# else status 1 and ORBIT_LIB_WHY says what is wrong.
orbit_lib_read() {
  local f=$ORBIT_LIB_DIR/lib.sh REPLY LC_ALL=C r fd=''
  local -a whole=()
  ORBIT_LIB_CODE=
  [[ -f $f ]] || { ORBIT_LIB_WHY="$f is missing or is not a regular file" && return 1; }
  orbit_lib_sha256_v "$f"
  [[ -n $REPLY ]] || { ORBIT_LIB_WHY="$f cannot be read, or no sha256sum, shasum or openssl here to check it" && return 1; }
  [[ $REPLY == "$ORBIT_LIB_SHA256" ]] || { ORBIT_LIB_WHY="$f changed (sha256 $REPLY, pinned $ORBIT_LIB_SHA256)" && return 1; }
  { exec {fd}<"$f"; } 2>/dev/null || { ORBIT_LIB_WHY="$f cannot be read" && return 1; }
  # From what was opened, a regular file: read -N for a few bytes, mapfile (quicker) for many.
  if [[ ! -f /dev/fd/$fd ]]; then
    ORBIT_LIB_TEXT=
  elif ((ORBIT_LIB_BYTES < 65536)); then
    IFS= read -r -d '' -N "$ORBIT_LIB_BYTES" -u "$fd" ORBIT_LIB_TEXT 2>/dev/null || true
  else
    mapfile -n 1 -d '' -u "$fd" whole 2>/dev/null || true
    ORBIT_LIB_TEXT=${whole[0]-} whole=()
  fi
  exec {fd}<&-
  ORBIT_LIB_TEXT=${ORBIT_LIB_TEXT:0:ORBIT_LIB_BYTES}
  orbit_lib_sha256_v -
  if [[ $REPLY != "$ORBIT_LIB_READ_SHA256" ]]; then
    ORBIT_LIB_TEXT=
    ORBIT_LIB_WHY="$f changed while it was read (sha256 ${REPLY:-unknown}, pinned $ORBIT_LIB_READ_SHA256)"
    return 1
  fi
  for r in "${ORBIT_LIB_RANGES[@]}"; do
    ORBIT_LIB_CODE+=${ORBIT_LIB_TEXT:${r%:*}:${r#*:}}
  done
  ORBIT_LIB_TEXT=
}

if ! orbit_lib_read; then
@REFUSED@
fi
eval "$ORBIT_LIB_CODE"
ORBIT_LIB_CODE=
