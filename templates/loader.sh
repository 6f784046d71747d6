# ---- lib.sh: the code this script shares with the loop's other scripts, beside it. It is
# ---- read once into memory, the sha256 of those bytes checked against the pin below (this
# ---- script is pinned, and with it the pin), and only then are the same bytes run: a lib.sh
# ---- changed, missing or unreadable runs nothing.
ORBIT_LIB_FOR=@FOR@
ORBIT_LIB_SHA256=@SHA256@
ORBIT_LIB_TEXT=
ORBIT_LIB_WHY=
ORBIT_LIB_DIR=${BASH_SOURCE[0]:-$0}
if [[ $ORBIT_LIB_DIR == */* ]]; then
  ORBIT_LIB_DIR=${ORBIT_LIB_DIR%/*}
else
  ORBIT_LIB_DIR=.
fi

# orbit_lib_sha256_v TEXT: REPLY is the sha256 of TEXT ("" when no tool here computes one):
# sha256sum, else shasum -a 256, else openssl (lib.sh's own hashing is not loaded yet).
orbit_lib_sha256_v() {
  local out=''
  if command -v sha256sum >/dev/null 2>&1; then
    out=$(printf '%s' "$1" | sha256sum) || out=''
  elif command -v shasum >/dev/null 2>&1; then
    out=$(printf '%s' "$1" | shasum -a 256) || out=''
  elif command -v openssl >/dev/null 2>&1; then
    out=$(printf '%s' "$1" | openssl dgst -sha256 -r) || out=''
  fi
  REPLY=${out%%[!0-9a-f]*}
  [[ ${#REPLY} == 64 ]] || REPLY=''
}

# orbit_lib_read: ORBIT_LIB_TEXT is ORBIT_LIB_DIR/lib.sh, read once, when the sha256 of the
# bytes read is ORBIT_LIB_SHA256; else status 1, ORBIT_LIB_TEXT empty and ORBIT_LIB_WHY
# saying what is wrong.
orbit_lib_read() {
  local f=$ORBIT_LIB_DIR/lib.sh REPLY
  ORBIT_LIB_TEXT=
  if [[ ! -f $f ]]; then
    ORBIT_LIB_WHY="$f is missing or is not a regular file"
    return 1
  fi
  if ! { IFS= read -r -d '' ORBIT_LIB_TEXT || true; } 2>/dev/null <"$f"; then
    ORBIT_LIB_WHY="$f cannot be read"
    return 1
  fi
  orbit_lib_sha256_v "$ORBIT_LIB_TEXT"
  if [[ -z $REPLY ]]; then
    ORBIT_LIB_TEXT=
    ORBIT_LIB_WHY="no sha256sum, shasum or openssl here to check $f with"
    return 1
  fi
  if [[ $REPLY != "$ORBIT_LIB_SHA256" ]]; then
    ORBIT_LIB_TEXT=
    ORBIT_LIB_WHY="$f changed (sha256 $REPLY, pinned $ORBIT_LIB_SHA256)"
    return 1
  fi
}

if ! orbit_lib_read; then
@REFUSED@
fi
eval "$ORBIT_LIB_TEXT"
ORBIT_LIB_TEXT=
