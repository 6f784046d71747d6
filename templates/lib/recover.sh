# ---- recover: standalone state repair, with bash alone. The same derivation as
# ---- `orbit recover` (see docs/RECOVER.md): both write the same state.env from the same
# ---- evidence. Every rewritten file is copied to backups/<UTC time>/ first; every write
# ---- is atomic; state.env and its sidecar are written last. The contract version a loop
# ---- is brought to with --migrate is the prelude's ORBIT_CONTRACT_VERSION.


RC_DIR=
RC_ARG_DIR=
RC_REPO=
RC_NAME=
RC_LOOP_CV=
RC_WS_SETTING=
WS=
RC_HOLDER=
F_RESET=0
F_STALL=0
F_GOAL=0
F_MIGRATE=0
F_RESTORE=0
F_DRY=0
F_HELP=0
RC_FLAGS=()
RC_REPAIRS=()
RC_NOTES=()
RC_MOVES_FROM=()
RC_MOVES_TO=()
RC_OLD_OK=0
RC_OLD_TEXT=
RC_SIDECAR_OK=0
RC_SIDECAR_GEN=
RC_EV_KEEP=
RC_EV_TORN=0
RC_PG_TAIL=clean
RC_PG_CUT=0
RC_PINS_NEW=
RC_PINS_WRITE=0
RC_GOAL_COPY=0
RC_SIG_CLEAR=0
RC_STATE_WRITE=0
RC_WS_ADD=
RC_WS_BRANCH=
RC_BH_WRITE=
RC_LAST=0
RC_FIRST_START=
RC_LAST_STOP=
RC_STAGE=
RC_RESTORE_FROM=()
RC_RESTORE_TO=()
RC_RESTORE_EXEC=()
RC_REMOVES=()
RC_OLD_TORN=0
RC_OLD_GEN=
RC_EV_BREAK_LINE=
RC_EV_BREAK_WHY=
RC_EV_DROPPED=0
RC_FIRST_IR=
RC_LAST_SEAL=
RC_STATE_REC_LINE=
RC_STATE_REC_GEN=
RC_STATE_REC_SHA=
declare -A O=()
declare -A EVV=()
declare -A EVL=()
declare -A EVR=()
declare -A PGV=()

rc_usage() {
  cat <<'USAGE'
usage: recover.sh [--reset-circuit] [--clear-stall] [--repin-goal] [--restore-pinned] [--migrate] [--dry-run] [LOOP_DIR]
  Rebuilds state.env from the evidence (events.jsonl, progress.md, git commit trailers,
  then the old state.env) and re-seals its sidecar. LOOP_DIR defaults to the directory
  this script lives in.
  --reset-circuit  close an open circuit breaker
  --clear-stall    forget the change signatures (.action-sig.log), so a stalled loop may go on
  --repin-goal     accept the current goal.md as the pinned goal
  --restore-pinned put every changed pinned file back (loop files from .pins/, workspace
                   files from the baseline commit) and remove what appeared since the first
                   run (an agent permission file); every copy goes to the backup first
  --migrate        bring CONTRACT_VERSION to this script's contract version (a 1.0 loop's
                   files are moved by orbit recover --migrate; recover.sh says so)
  --dry-run        print the plan (a diff of state.env and the repairs); write nothing
--repin needs the orbit binary: orbit recover --repin
--prune-candidates needs the orbit binary: orbit recover --prune-candidates
USAGE
}

rc_args() {
  local arg
  for arg in "$@"; do
    case $arg in
      --reset-circuit) F_RESET=1 RC_FLAGS+=("$arg") ;;
      --clear-stall) F_STALL=1 RC_FLAGS+=("$arg") ;;
      --repin-goal) F_GOAL=1 RC_FLAGS+=("$arg") ;;
      --migrate) F_MIGRATE=1 RC_FLAGS+=("$arg") ;;
      --restore-pinned) F_RESTORE=1 RC_FLAGS+=("$arg") ;;
      --dry-run) F_DRY=1 ;;
      -h | --help)
        F_HELP=1
        return 0
        ;;
      --repin | --prune-candidates)
        orbit_die "$EXIT_PREFLIGHT" "$arg needs the orbit binary: run 'orbit recover $arg' (recover.sh does the rebuild, --reset-circuit, --clear-stall, --repin-goal, --restore-pinned and --migrate)"
        ;;
      -*)
        rc_usage >&2
        orbit_die "$EXIT_PREFLIGHT" "unknown option '$arg'"
        ;;
      *)
        if [[ -n $RC_ARG_DIR ]]; then
          orbit_die "$EXIT_PREFLIGHT" "one loop directory at a time (got '$RC_ARG_DIR' and '$arg')"
        fi
        RC_ARG_DIR=$arg
        ;;
    esac
  done
}

# rc_what_v PATH: REPLY says what PATH is when it is there and is not a regular file (a
# symlink, a FIFO, a socket, a device, a directory); empty otherwise. Tests only: nothing is
# opened, so a FIFO never blocks (orbit's fsx::not_regular).
rc_what_v() {
  local p=$1
  REPLY=''
  if [[ -L $p ]]; then
    REPLY="a symlink to $(readlink -- "$p" 2>/dev/null || true)"
  elif [[ -p $p ]]; then
    REPLY='a FIFO (named pipe)'
  elif [[ -S $p ]]; then
    REPLY='a socket'
  elif [[ -c $p ]]; then
    REPLY='a character device'
  elif [[ -b $p ]]; then
    REPLY='a block device'
  elif [[ -d $p ]]; then
    REPLY='a directory'
  elif [[ -e $p && ! -f $p ]]; then
    REPLY='not a regular file'
  fi
}

# rc_refuse_tampered: a FIFO, a socket, a device, a directory or a symlink where a loop file
# (or an iteration's result.env or commit.txt) belongs is a loop_tamper: refused before
# anything is read (orbit recover's refuse_tampered, the same list and words).
rc_refuse_tampered() {
  local f d found=() name
  for f in "${ORBIT_LOOP_FILES[@]}"; do
    rc_what_v "$RC_DIR/$f"
    if [[ -n $REPLY ]]; then found+=("$f is $REPLY"); fi
  done
  for d in "${ORBIT_LOOP_DIRS[@]}"; do
    if [[ -L $RC_DIR/$d || (-e $RC_DIR/$d && ! -d $RC_DIR/$d) ]]; then
      rc_what_v "$RC_DIR/$d"
      found+=("$d is ${REPLY:-not a regular file}")
    fi
  done
  if [[ -d $RC_DIR/iterations && ! -L $RC_DIR/iterations ]]; then
    while IFS= read -r -d '' d; do
      name=${d##*/}
      if [[ -L $d || ! -d $d ]]; then
        rc_what_v "$d"
        found+=("iterations/$name is ${REPLY:-not a regular file}")
        continue
      fi
      for f in result.env commit.txt; do
        rc_what_v "$d/$f"
        if [[ -n $REPLY ]]; then found+=("iterations/$name/$f is $REPLY"); fi
      done
    done < <(find "$RC_DIR/iterations" -mindepth 1 -maxdepth 1 -name '[0-9]*' ! -name '*[!0-9]*' -print0 | LC_ALL=C sort -z)
  fi
  ((${#found[@]} == 0)) && return 0
  local IFS=';'
  f=${found[*]}
  orbit_die "$EXIT_PREFLIGHT" "$RC_DIR: ${f//;/; }: the runner never writes such a file (loop_tamper), and recover reads none of them (a FIFO would block it). Remove $( ((${#found[@]} == 1)) && printf it || printf them), then run recover.sh again (nothing was changed)"
}

# rc_regular_or_die PATH: PATH is a regular file or missing; anything else stops recover.sh
# before it reads it (a pinned workspace file, checked again at its read).
rc_regular_or_die() {
  rc_what_v "$1"
  if [[ -n $REPLY ]]; then
    orbit_die "$EXIT_PREFLIGHT" "$1 is $REPLY, not a regular file: nothing of a loop may be one (loop_tamper), and it is never read; remove it, then orbit recover"
  fi
}

rc_locate() {
  local line
  if [[ -n $RC_ARG_DIR ]]; then
    RC_DIR=$(cd -P -- "$RC_ARG_DIR" 2>/dev/null && pwd -P) ||
      orbit_die "$EXIT_PREFLIGHT" "$RC_ARG_DIR is not a directory: give the loop directory"
  else
    RC_DIR=$(cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
  fi
  [[ -e $RC_DIR/loop.toml || -L $RC_DIR/loop.toml ]] ||
    orbit_die "$EXIT_PREFLIGHT" "$RC_DIR is not a loop directory (no loop.toml): give the directory orbit init created"
  rc_refuse_tampered
  RC_REPO=$(git -C "$RC_DIR" rev-parse --show-toplevel 2>/dev/null) ||
    orbit_die "$EXIT_PREFLIGHT" "$RC_DIR is not inside a git work tree"
  RC_REPO=$(cd -P -- "$RC_REPO" && pwd -P)
  RC_NAME=$LOOP_NAME
  RC_LOOP_CV=$CONTRACT_VERSION_RENDERED
  line=$(grep -m 1 -E '^name = "[A-Za-z0-9._-]+"$' -- "$RC_DIR/loop.toml" || true)
  if [[ -n $line ]]; then
    line=${line#name = \"}
    RC_NAME=${line%\"}
  fi
  line=$(grep -m 1 -E '^contract-version = "[0-9]+\.[0-9]+\.[0-9]+"$' -- "$RC_DIR/loop.toml" || true)
  if [[ -n $line ]]; then
    line=${line#contract-version = \"}
    RC_LOOP_CV=${line%\"}
  fi
  # The workspace as loop.toml gives it (a plain string: no escapes), else the rendered one.
  RC_WS_SETTING=${WORKSPACE_SETTING:-}
  line=$(grep -m 1 -E '^workspace = "[^"\\]*"$' -- "$RC_DIR/loop.toml" || true)
  if [[ -n $line ]]; then
    line=${line#workspace = \"}
    RC_WS_SETTING=${line%\"}
  fi
}

# rc_ws_path_v: REPLY is the workspace loop.toml names, as an absolute path (the runner's
# workspace_path_v): relative to the repository root, the default .orbit/.workspaces/<name>.
rc_ws_path_v() {
  local p=${RC_WS_SETTING:-.orbit/.workspaces/$RC_NAME}
  [[ $p == /* ]] || p=$RC_REPO/$p
  REPLY=${p%/}
}

# ---- the lock, probed without taking it: /proc/locks (flock), or the mkdir lock's owner.
rc_lock_held() {
  local lock="$RC_DIR/.run-loop.lock" lockdir="$RC_DIR/.run-loop.lock.d" ino owner pid start
  if [[ -f $lock ]]; then
    if [[ -r /proc/locks ]]; then
      # shellcheck disable=SC2012  # ls -di is the portable way to read an inode number
      ino=$(ls -di -- "$lock" | awk '{ print $1 }')
      if awk -v ino="$ino" '{ for (i = 1; i <= NF; i++) if (split($i, p, ":") == 3 && p[3] == ino) found = 1 } END { exit !found }' /proc/locks; then
        RC_HOLDER="a runner holds $lock (flock)"
        return 0
      fi
    elif command -v flock >/dev/null 2>&1 && ! flock -n "$lock" true 2>/dev/null; then
      RC_HOLDER="a runner holds $lock (flock)"
      return 0
    fi
  fi
  if [[ -d $lockdir ]]; then
    owner=''
    rc_what_v "$lockdir/owner"
    if [[ -z $REPLY && -f $lockdir/owner ]]; then
      owner=$(cat -- "$lockdir/owner" 2>/dev/null || true)
    fi
    pid=${owner%% *}
    start=${owner#* }
    if [[ ! $pid =~ ^[0-9]+$ ]]; then
      RC_HOLDER="$lockdir exists without a readable owner (a runner may be starting): wait a moment, or remove the directory if no runner is running"
      return 0
    fi
    if kill -0 "$pid" 2>/dev/null && [[ "$(ps -o lstart= -p "$pid" 2>/dev/null | tr -s ' ' || true)" == "$start" ]]; then
      RC_HOLDER="a runner (pid $pid) holds $lockdir"
      return 0
    fi
  fi
  return 1
}

# ---- the old checkpoint and its sidecar
rc_read_old() {
  local k have
  RC_OLD_TEXT=
  if state_parse "$RC_DIR/state.env"; then
    if state_newer_major "${S[CONTRACT_VERSION]}"; then
      orbit_die "$EXIT_PREFLIGHT" "$RC_DIR/state.env was written under loop contract ${S[CONTRACT_VERSION]}, newer than this recover.sh's $ORBIT_CONTRACT_VERSION: repair it with the orbit that wrote it (nothing was changed)"
    fi
    RC_OLD_OK=1
    for k in "${ORBIT_STATE_KEYS[@]}"; do
      O[$k]=${S[$k]}
    done
    RC_OLD_TEXT=$(
      cat -- "$RC_DIR/state.env"
      printf x
    )
    RC_OLD_TEXT=${RC_OLD_TEXT%x}
  elif [[ -f $RC_DIR/state.env ]]; then
    RC_REPAIRS+=("state.env does not parse (${STATE_ERR}): rebuilt from the evidence")
  else
    RC_REPAIRS+=("state.env is missing: rebuilt from the evidence")
  fi
  if [[ -f $RC_DIR/state.env.sha256 ]]; then
    if state_sidecar_read "$RC_DIR/state.env.sha256"; then
      RC_SIDECAR_GEN=$SIDECAR_GEN
      if ((RC_OLD_OK)); then
        have=$(orbit_sha256_file "$RC_DIR/state.env")
        if [[ $have == "$SIDECAR_HASH" && $RC_SIDECAR_GEN == "${O[GEN]}" ]]; then
          RC_SIDECAR_OK=1
        elif ((RC_SIDECAR_GEN + 1 == O[GEN])); then
          RC_OLD_TORN=1
          RC_REPAIRS+=("torn checkpoint (sidecar at gen $RC_SIDECAR_GEN, state.env at gen ${O[GEN]}): re-sealed")
        else
          RC_REPAIRS+=("state.env does not match its sidecar (state gen ${O[GEN]}, sidecar gen $RC_SIDECAR_GEN): re-sealed after checking every key against the evidence")
        fi
      fi
    elif ((RC_OLD_OK)); then
      RC_REPAIRS+=("state.env.sha256 is malformed: re-sealed")
    fi
  elif ((RC_OLD_OK)); then
    RC_REPAIRS+=("state.env.sha256 is missing: re-sealed")
  fi
}

# rc_iso_epoch TS: epoch seconds of YYYY-MM-DDTHH:MM:SSZ (years from 1970), or nothing.
rc_iso_epoch() {
  local ts=$1 y m d hh mm ss era yoe mp doy doe
  [[ $ts =~ ^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z$ ]] || return 0
  y=$((10#${BASH_REMATCH[1]})) m=$((10#${BASH_REMATCH[2]})) d=$((10#${BASH_REMATCH[3]}))
  hh=$((10#${BASH_REMATCH[4]})) mm=$((10#${BASH_REMATCH[5]})) ss=$((10#${BASH_REMATCH[6]}))
  if ((y < 1970 || m < 1 || m > 12 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60)); then
    return 0
  fi
  if ((m <= 2)); then
    y=$((y - 1))
  fi
  era=$((y / 400))
  yoe=$((y - era * 400))
  if ((m > 2)); then
    mp=$((m - 3))
  else
    mp=$((m + 9))
  fi
  doy=$(((153 * mp + 2) / 5 + d - 1))
  doe=$((yoe * 365 + yoe / 4 - yoe / 100 + doy))
  printf '%s' "$(((era * 146097 + doe - 719468) * 86400 + hh * 3600 + mm * 60 + ss))"
}

# rc_chain_check FILE: the journal's hash chain over its first RC_EV_KEEP bytes (complete
# lines), line by line as orbit recover's chain_break reads it: a line must be
# {"seq":S,"ts":"...","event":"name","iteration":N[,...],"prev":"P","hash":"H"} with H the
# sha256 of the line without its hash member, P the line before's H (64 zeros first) and S
# one more than the line before's. At the first line that is not, the journal is sealed:
# RC_EV_KEEP ends before it (the rest is not evidence; the backup keeps it).
rc_chain_check() {
  local LC_ALL=C file=$1 line i=0 off=0 why='' seq p h
  local prev=0000000000000000000000000000000000000000000000000000000000000000
  local re='^\{"seq":([0-9]{1,18}),"ts":"[^"]*","event":"[a-z_]+","iteration":[0-9]{1,18}(,.*)?,"prev":"([0-9a-f]{64})","hash":"([0-9a-f]{64})"\}$'
  ((RC_EV_KEEP > 0)) || return 0
  while IFS= read -r line; do
    i=$((i + 1))
    if [[ ! $line =~ $re ]]; then
      why='not an orbit event line'
    else
      seq=${BASH_REMATCH[1]} p=${BASH_REMATCH[3]} h=${BASH_REMATCH[4]}
      orbit_sha256_str_v "${line:0:${#line}-75}}"
      if [[ $REPLY != "$h" ]]; then
        why="the line's hash does not match its content (edited)"
      elif [[ $p != "$prev" ]]; then
        why="prev does not name the previous line's hash (a line was removed or reordered)"
      elif [[ $seq != "$i" ]]; then
        why="seq $seq where $i was expected"
      fi
    fi
    if [[ -n $why ]]; then
      RC_EV_BREAK_LINE=$i RC_EV_BREAK_WHY=$why
      RC_EV_DROPPED=$(head -c "$RC_EV_KEEP" -- "$file" | tail -c +$((off + 1)) | wc -l | tr -d ' ')
      RC_EV_KEEP=$off
      RC_REPAIRS+=("events.jsonl breaks at line $i ($why): the journal is sealed there; its $RC_EV_DROPPED line(s) from there on are kept in the backup, not read as evidence")
      return 0
    fi
    prev=$h
    off=$((off + ${#line} + 1))
  done < <(head -c "$RC_EV_KEEP" -- "$file")
}

# ---- events.jsonl: a torn last line is not evidence (and is trimmed).
rc_read_events() {
  local LC_ALL=C file="$RC_DIR/events.jsonl" size last line ts e n
  RC_EV_KEEP=0
  [[ -s $file ]] || return 0
  size=$(wc -c <"$file" | tr -d ' ')
  RC_EV_KEEP=$size
  if [[ $(tail -c 1 -- "$file" | od -An -c | tr -d ' ') != '\n' ]]; then
    last=$(tail -n 1 -- "$file")
    RC_EV_KEEP=$((size - ${#last}))
    RC_EV_TORN=1
    RC_REPAIRS+=("events.jsonl ends in a torn line (${#last} bytes): trimmed")
  fi
  rc_chain_check "$file"
  while IFS= read -r line; do
    if [[ $line =~ ^([0-9]+):.*\"iteration\":([0-9]+),\"verdict\":\"([A-Z]+)\"$ ]]; then
      EVV[$((10#${BASH_REMATCH[2]}))]=${BASH_REMATCH[3]}
      EVL[$((10#${BASH_REMATCH[2]}))]=${BASH_REMATCH[1]}
    fi
  done < <(head -c "$RC_EV_KEEP" -- "$file" |
    grep -naoE '^\{"seq":[0-9]+,"ts":"[^"]*","event":"iteration_end","iteration":[0-9]{1,9},"verdict":"[A-Z]+"' || true)
  # Each iteration's last iteration_result (and the sha256 it gives its record), the last
  # state_write or recovery (its gen and the sha256 of the state.env it wrote), and the
  # last recovery that sealed a broken journal.
  while IFS= read -r line; do
    n=${line%%:*}
    line=${line#*:}
    case $line in
      *'"event":"iteration_result"'*)
        if [[ $line =~ ^\{\"seq\":[0-9]+,\"ts\":\"[^\"]*\",\"event\":\"iteration_result\",\"iteration\":([0-9]{1,9})[,}] ]]; then
          e=$((10#${BASH_REMATCH[1]}))
          EVR[$e]=-
          if [[ $line =~ ,\"sha256\":\"([0-9a-f]{64})\" ]]; then EVR[$e]=${BASH_REMATCH[1]}; fi
          if [[ -z $RC_FIRST_IR ]] || ((e < RC_FIRST_IR)); then RC_FIRST_IR=$e; fi
        fi
        ;;
      *)
        RC_STATE_REC_LINE=$n RC_STATE_REC_GEN='' RC_STATE_REC_SHA=''
        if [[ $line =~ ,\"gen\":([0-9]{1,9})[,}] ]]; then RC_STATE_REC_GEN=$((10#${BASH_REMATCH[1]})); fi
        if [[ $line == *'"event":"recovery"'* ]]; then
          if [[ $line =~ ,\"state_sha256\":\"([0-9a-f]{64})\" ]]; then RC_STATE_REC_SHA=${BASH_REMATCH[1]}; fi
          if [[ $line == *',"journal_break":'* ]]; then RC_LAST_SEAL=$n; fi
        elif [[ $line =~ ,\"sha256\":\"([0-9a-f]{64})\" ]]; then
          RC_STATE_REC_SHA=${BASH_REMATCH[1]}
        fi
        ;;
    esac
  done < <(head -c "$RC_EV_KEEP" -- "$file" |
    grep -naE '^\{"seq":[0-9]+,"ts":"[^"]*","event":"(iteration_result|state_write|recovery)"' || true)
  while IFS= read -r line; do
    ts=${line#*\"ts\":\"}
    ts=${ts%%\"*}
    e=$(rc_iso_epoch "$ts")
    if [[ -n $e ]]; then
      RC_FIRST_START=$e
      break
    fi
  done < <(head -c "$RC_EV_KEEP" -- "$file" |
    grep -aoE '^\{"seq":[0-9]+,"ts":"[^"]*","event":"loop_start"' || true)
  # How the last run stopped (its loop_stop), unless a recovery came after it.
  RC_LAST_STOP=
  while IFS= read -r line; do
    if [[ $line =~ \"status\":\"([A-Z]+)\",\"reason\":\"([a-z_]+)\"$ ]]; then
      RC_LAST_STOP="${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
    else
      RC_LAST_STOP=
    fi
  done < <(head -c "$RC_EV_KEEP" -- "$file" |
    grep -aoE '^\{"seq":[0-9]+,"ts":"[^"]*","event":"(loop_stop","iteration":[0-9]{1,9},"status":"[A-Z]+","reason":"[a-z_]+"|recovery")' || true)
}

# ---- progress.md: closed iteration entries, and the runner's torn-tail rule.
rc_read_progress() {
  local LC_ALL=C file="$RC_DIR/progress.md" n st tail_info limit
  [[ -f $file ]] || return 0
  tail_info=$(awk '
    { if ($0 ~ /^<!-- orbit:end iteration=[0-9]+ sha256=[0-9a-f]+ -->$/) {
        h = $0; sub(/^.* sha256=/, "", h); sub(/ -->$/, "", h)
        if (length(h) == 64) lm = NR
      }
      if (index($0, "## Iteration ") == 1 || index($0, "## Recovery ") == 1) { lh = NR; lho = off }
      off += length($0) + 1
    }
    END { if (lh == "") print "clean 0"; else if (lm == "" || lm < lh) print "torn " lho; else print "closed 0" }' "$file")
  RC_PG_CUT=${tail_info#* }
  case ${tail_info% *} in
    torn)
      RC_PG_TAIL=torn
      RC_REPAIRS+=("progress.md ends in an unclosed entry (a torn append): trimmed (kept in the backup)")
      ;;
    closed)
      if [[ $(tail -c 1 -- "$file" | od -An -c | tr -d ' ') != '\n' ]]; then
        RC_PG_TAIL=newline
      fi
      ;;
  esac
  limit=$(wc -c <"$file" | tr -d ' ')
  if [[ $RC_PG_TAIL == torn ]]; then limit=$RC_PG_CUT; fi
  rc_progress_chain "$file" "$limit"
  if [[ -n $RC_PG_BREAK_OFF ]]; then limit=$RC_PG_BREAK_OFF; fi
  while read -r n st; do
    PGV[$n]=$st
  done < <(head -c "$limit" -- "$file" | awk '
    index($0, "## Recovery — ") == 1 { cur = ""; next }
    index($0, "## Iteration ") == 1 {
      cur = ""
      rest = substr($0, 14)
      if (rest ~ /^[0-9]+ — [A-Z]+$/) {
        n = rest; sub(/ .*/, "", n)
        st = rest; sub(/^[0-9]+ — /, "", st)
        if (length(n) <= 9) cur = (n + 0) " " st
      }
      next
    }
    /^<!-- orbit:end iteration=[0-9]+ sha256=[0-9a-f]+ -->$/ {
      h = $0; sub(/^.* sha256=/, "", h); sub(/ -->$/, "", h)
      if (length(h) == 64) {
        if (cur != "") { split(cur, a, " "); if (a[2] != "INTERRUPTED") print a[1], a[2] }
        cur = ""
      }
    }')
}

# rc_progress_chain FILE LIMIT: progress.md's first LIMIT bytes (a final newline added)
# checked as a chain, as orbit's progress module parses it: each closed entry's end-marker
# hash must be the sha256 of the previous marker's hash, a newline and the entry's text.
# From the first that is not (a rewritten history), progress.md is sealed
# (RC_PG_BREAK_OFF: everything from its heading on goes to the backup); lines outside any
# entry (RC_PG_STRAY, 1-based) are removed.
RC_PG_BREAK_OFF=
RC_PG_STRAY=()
rc_progress_chain() {
  local LC_ALL=C file=$1 limit=$2 work kind line off hash f stray=() dropped
  work=$(mktemp -d "${TMPDIR:-/tmp}/orbit-progress.XXXXXX")
  while read -r kind line off hash f; do
    if [[ $kind == S ]]; then
      stray+=("$line $off")
      continue
    fi
    orbit_sha256_file_v "$f"
    if [[ $REPLY != "$hash" ]]; then
      RC_PG_BREAK_OFF=$off
      dropped=$(head -c "$limit" -- "$file" | tail -c +$((off + 1)) | wc -l | tr -d ' ')
      if [[ $(head -c "$limit" -- "$file" | tail -c 1 | od -An -c | tr -d ' ') != '\n' ]]; then
        dropped=$((dropped + 1))
      fi
      RC_REPAIRS+=("progress.md breaks at line $line (an entry whose end-marker hash does not chain: a rewritten history): sealed there; its $dropped line(s) from there on are kept in the backup, not read as evidence")
      break
    fi
  done < <({
    head -c "$limit" -- "$file"
    if [[ $(head -c "$limit" -- "$file" | tail -c 1 | od -An -c | tr -d ' ') != '\n' ]] && ((limit > 0)); then printf '\n'; fi
  } | awk -v work="$work" '
    function heading(s,   rest, n) {
      if (index(s, "## Recovery — ") == 1) return 1
      if (index(s, "## Iteration ") != 1) return 0
      rest = substr(s, 14)
      if (rest !~ /^[0-9]+ — [A-Z]+$/) return 0
      n = rest; sub(/ .*/, "", n)
      return length(n) <= 9
    }
    function marker(s,   h) {
      if (s !~ /^<!-- orbit:end iteration=[0-9]+ sha256=[0-9a-f]+ -->$/) return ""
      h = s; sub(/^.* sha256=/, "", h); sub(/ -->$/, "", h)
      return length(h) == 64 ? h : ""
    }
    BEGIN { prev = "0000000000000000000000000000000000000000000000000000000000000000" }
    {
      if (cur) {
        h = marker($0)
        if (h != "") {
          k++; f = work "/e" k
          printf "%s\n%s", prev, body > f
          close(f)
          print "E", start, soff, h, f
          prev = h; cur = 0
        } else if (heading($0)) {
          start = NR; soff = off; body = $0 "\n"
        } else {
          body = body $0 "\n"
        }
      } else if (heading($0)) {
        seen = 1; cur = 1; start = NR; soff = off; body = $0 "\n"
      } else if (seen && $0 !~ /^[ \t\r\f\v]*$/) {
        print "S", NR, off, "-", "-"
      }
      off += length($0) + 1
    }')
  rm -rf -- "$work"
  for f in "${stray[@]}"; do
    if [[ -z $RC_PG_BREAK_OFF ]] || ((${f#* } < RC_PG_BREAK_OFF)); then
      RC_PG_STRAY+=("${f%% *}")
    fi
  done
  if ((${#RC_PG_STRAY[@]} > 0)); then
    RC_REPAIRS+=("progress.md has ${#RC_PG_STRAY[@]} line(s) outside any entry (from line ${RC_PG_STRAY[0]}; not the runner's): removed (kept in the backup)")
  fi
}

# Iterations committed with this loop's trailers whose record (result.env) is gone.
rc_git_max() {
  local max=0 line name it
  while IFS= read -r line; do
    name=${line%%|*}
    it=${line#*|}
    if [[ $name == "$RC_NAME" && $it =~ ^[0-9]{1,9}$ ]]; then
      it=$((10#$it))
      if [[ ! -f $(rc_iter_dir "$it")/result.env ]] && ((it > max)); then
        max=$it
      fi
    fi
  done < <(GIT_OPTIONAL_LOCKS=0 git -C "$RC_REPO" log HEAD --branches \
    --format='%(trailers:key=Orbit-Loop,valueonly,separator=%x2C)|%(trailers:key=Orbit-Iteration,valueonly,separator=%x2C)' 2>/dev/null || true)
  printf '%s' "$max"
}

# rc_older_major VERSION: status 0 when VERSION belongs to an older major version of the
# contract than this script's (contract::older_major).
rc_older_major() {
  ((10#${1%%.*} < 10#${ORBIT_CONTRACT_VERSION%%.*}))
}

rc_iter_dir() { printf '%s/iterations/%06d' "$RC_DIR" "$1"; }

# ---- pins: --repin-goal, then the first broken pin as the pins will stand.
RC_BROKEN=
RC_BROKEN_REASON=
rc_pins() {
  local line h p f goal_hash='' pinned=0 have
  # The workspace by which a pinned workspace file is judged (orbit_pin_reason_v).
  WS=${O[WORKSPACE]:-}
  if [[ -z $WS ]]; then
    rc_ws_path_v
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
      rc_regular_or_die "$f"
      if [[ -f $f ]]; then
        have=$(orbit_sha256_file "$f")
      fi
      if [[ $have != "$h" ]]; then
        if ((F_RESTORE)); then
          rc_stage_restore "$h" "$p" "$f"
        elif [[ -z $RC_BROKEN ]]; then
          RC_BROKEN=$p
          orbit_pin_reason_v "$p"
          RC_BROKEN_REASON=$REPLY
        fi
      fi
    done <"$RC_DIR/pins.sha256"
  fi
  rc_appeared_permission_files
  rc_protected_sets
  if ((F_GOAL)); then
    if ((pinned)); then
      if ! printf '%s' "$RC_PINS_NEW" | cmp -s - "$RC_DIR/pins.sha256"; then
        RC_PINS_WRITE=1
      fi
      rc_regular_or_die "$RC_DIR/.pins/goal.md"
      if ! cmp -s -- "$RC_DIR/goal.md" "$RC_DIR/.pins/goal.md"; then
        RC_GOAL_COPY=1
      fi
    else
      RC_NOTES+=("goal.md is not pinned yet: the first run pins it")
    fi
  fi
}

# rc_stage_restore HASH PIN FILE: --restore-pinned of one changed pinned file: its content
# that matches the pin (a loop file from .pins/, a repository file from the baseline commit)
# is staged for the apply; none is a refusal (orbit recover's restore_pinned).
rc_stage_restore() {
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
      rc_repo_relative_v "$p" && rel=$REPLY
    fi
    [[ -n $rel ]] ||
      orbit_die "$EXIT_PREFLIGHT" "cannot restore $p: it is outside the repository and the workspace"
    if [[ -f $RC_DIR/.baseline-commit ]]; then
      rc_regular_or_die "$RC_DIR/.baseline-commit"
      base=$(tr -d '[:space:]' <"$RC_DIR/.baseline-commit")
    fi
    [[ -n $base ]] ||
      orbit_die "$EXIT_PREFLIGHT" "cannot restore $p: .baseline-commit is missing. Restore it by hand with git, or accept it with orbit recover --repin"
    if ! rc_git show "$base:$rel" >"$staged" 2>/dev/null || [[ $(orbit_sha256_file "$staged") != "$h" ]]; then
      orbit_die "$EXIT_PREFLIGHT" "cannot restore $p: the baseline commit ${base:0:12} holds no copy matching its pin. Restore it by hand, or accept it with orbit recover --repin"
    fi
  else
    rc_regular_or_die "$RC_DIR/.pins/$p"
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

# rc_repo_relative_v PIN: REPLY is a 1.0 pin path (relative to the loop directory, through
# ../) as a path relative to the repository; status 1 when it climbs out of it.
rc_repo_relative_v() {
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

# rc_appeared_permission_files: agent permission files in the workspace that pins.sha256
# does not list, once the first run has pinned (it pinned every one there was): each
# appeared since (permission_hijack). --restore-pinned removes each (no pinned copy to put
# back; a copy goes to the backup); otherwise the first is a broken pin.
rc_appeared_permission_files() {
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
      rc_regular_or_die "$f"
      RC_REMOVES+=("$f")
      RC_REPAIRS+=("$f appeared after the first run and has no pinned copy to restore: removed (--restore-pinned; the copy is in the backup)")
    elif [[ -z $RC_BROKEN ]]; then
      RC_BROKEN=$f
      RC_BROKEN_REASON=$REASON_PERMISSION_HIJACK
    fi
  done
}

# rc_protected_sets: each protect set of pins.sets against what its glob matches in the
# workspace now (git ls-files -z --cached --others --exclude-standard, sorted bytewise,
# hashed as the runner hashes it): a file added since the first run is reward_hack like an
# edit. --restore-pinned removes each added file (no pinned copy; a copy goes to the
# backup); a removed one is restored by its pin. Otherwise the first changed set is a broken
# pin (orbit recover's protected_sets).
rc_protected_sets() {
  local line h g now pinned rel n=0 list
  [[ -f $RC_DIR/$ORBIT_PINS_SETS && -n $WS && -d $WS && ! -L $WS ]] || return 0
  pinned=$'\n'$(cat -- "$RC_DIR/pins.sha256" 2>/dev/null || true)$'\n'
  list=$(mktemp "${TMPDIR:-/tmp}/orbit-set.XXXXXX")
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    [[ $line =~ ^([0-9a-f]{64})\ \ (.+)$ ]] || continue
    h=${BASH_REMATCH[1]} g=${BASH_REMATCH[2]}
    GIT_OPTIONAL_LOCKS=0 git -C "$WS" -c core.fsmonitor=false ls-files -z --cached --others \
      --exclude-standard -- ":(glob)$g" 2>/dev/null | LC_ALL=C sort -zu >"$list" || continue
    now=$(orbit_sha256_stdin <"$list")
    [[ $now != "$h" ]] || continue
    while IFS= read -r -d '' rel; do
      if [[ $pinned != *[0-9a-f]"  ${WS%/}/$rel"$'\n'* ]] && ((F_RESTORE)); then
        rc_regular_or_die "${WS%/}/$rel"
        RC_REMOVES+=("${WS%/}/$rel")
        RC_REPAIRS+=("${WS%/}/$rel was added to the protected set '$g' after the first run and has no pinned copy: removed (--restore-pinned; the copy is in the backup)")
      fi
    done <"$list"
    if ((!F_RESTORE)) && [[ -z $RC_BROKEN ]]; then
      RC_BROKEN="the protected set '$g' ($ORBIT_PINS_SETS:$n)"
      RC_BROKEN_REASON=$REASON_REWARD_HACK
    fi
  done <"$RC_DIR/$ORBIT_PINS_SETS"
  rm -f -- "$list"
}

# ---- the workspace (contract 2.0): recreated from the loop branch when it is missing; a
# ---- loop branch moved by hand is accepted where it is (.branch-head rewritten).
rc_git() { GIT_OPTIONAL_LOCKS=0 git -C "$RC_REPO" "$@"; }

rc_ws_check() {
  local ws=$1 branch=${2:-orbit/$RC_NAME} head want
  [[ -n $ws ]] || return 0
  head=$(rc_git rev-parse --verify -q "refs/heads/$branch" 2>/dev/null || true)
  if [[ ! -e $ws/.git ]]; then
    if [[ -e $ws && -n $(ls -A -- "$ws" 2>/dev/null) ]]; then
      RC_NOTES+=("the workspace $ws exists but is not a git worktree: move it away, then run recover.sh again (it is recreated from $branch)")
    elif [[ -n $head ]]; then
      RC_WS_ADD=$ws RC_WS_BRANCH=$branch
      RC_REPAIRS+=("the workspace $ws is missing: recreated from $branch")
    else
      RC_NOTES+=("the workspace $ws and the loop branch $branch are both gone: recreate the branch (git branch $branch <commit>), then run recover.sh again")
    fi
  fi
  if [[ -n $head && -f $RC_DIR/.branch-head ]]; then
    want=$(<"$RC_DIR/.branch-head")
    if [[ -n $want && $want != "$head" ]] && ! rc_git merge-base --is-ancestor "$want" "$head" 2>/dev/null; then
      RC_BH_WRITE=$head
      RC_REPAIRS+=("the loop branch $branch was moved by hand (from ${want:0:12} to ${head:0:12}): accepted where it is now (.branch-head rewritten; the old head is in the backup)")
    fi
  fi
}

# rc_migrate_check RAN: a loop of an older contract major whose files need moving (scripts
# to re-render, pins of repository files, .baseline, a workspace to create, the user's
# checkout to give back) needs the binary: recover.sh only brings the state to this
# contract once they are done.
rc_migrate_check() {
  local why=''
  if rc_older_major "$RC_LOOP_CV"; then
    why="loop.toml and the scripts are of contract $RC_LOOP_CV"
  elif [[ -f $RC_DIR/.baseline ]]; then
    why=".baseline (contract 1.0) is still there"
  elif grep -q '^[0-9a-f]*  \.\./' -- "$RC_DIR/pins.sha256" 2>/dev/null; then
    why="pins.sha256 names repository files through ../"
  elif (($1)); then
    rc_ws_path_v
    [[ -e $REPLY/.git ]] || why="the workspace $REPLY is to be created"
  fi
  if [[ -n $why ]]; then
    orbit_die "$EXIT_PREFLIGHT" "--migrate of this loop needs the orbit binary ($why): run 'orbit recover --migrate $RC_DIR' (nothing was changed)"
  fi
}

# rc_distrust_unrecorded_state: a state.env that is not one the journal's last state_write
# (or recovery) records — the same generation with another sha256, or a later generation
# it never recorded — is set aside and rebuilt from the evidence (orbit recover's
# distrust_unrecorded_state); a torn checkpoint, or a journal with no sha256, proves
# nothing.
rc_distrust_unrecorded_state() {
  local have why=''
  ((RC_OLD_OK && !RC_OLD_TORN)) || return 0
  [[ -n $RC_STATE_REC_SHA && -n $RC_STATE_REC_GEN ]] || return 0
  have=$(orbit_sha256_file "$RC_DIR/state.env")
  if ((O[GEN] == RC_STATE_REC_GEN)) && [[ $have != "$RC_STATE_REC_SHA" ]]; then
    why="events.jsonl:$RC_STATE_REC_LINE says gen $RC_STATE_REC_GEN was written with sha256 ${RC_STATE_REC_SHA:0:12}, the file is ${have:0:12}"
  elif ((O[GEN] > RC_STATE_REC_GEN)); then
    why="the journal's last record of it (events.jsonl:$RC_STATE_REC_LINE) is gen $RC_STATE_REC_GEN"
  else
    return 0
  fi
  RC_REPAIRS+=("state.env (gen ${O[GEN]}) is not a state the journal records ($why): written by something other than the runner (loop_tamper); rebuilt from the evidence")
  RC_OLD_GEN=${O[GEN]}
  RC_OLD_OK=0
  RC_SIDECAR_OK=0
  O=()
}

# rc_set_aside_untrusted VERDICT: result records the journal does not vouch for (another
# sha256 than their iteration_result gives; none announced where the runner announces every
# record, save its own unfinished record of iteration L+1) are moved aside, never deleted
# (orbit recover's set_aside_untrusted_records). L's own record, when L (ending VERDICT) is
# retried or claims DONE, is left to the schedule.
rc_set_aside_untrusted() {
  local verdict=$1 d n why have
  while IFS= read -r d; do
    n=${d##*/}
    ((${#n} <= 9)) || continue
    n=$((10#$n))
    [[ -f $d/result.env && ! -L $d/result.env ]] || continue
    if ((n == RC_LAST)) && [[ $verdict == "$STATUS_ABORTED" || $verdict == "$STATUS_BLOCKED" || $verdict == "$STATUS_DONE" ]]; then
      continue
    fi
    why=''
    if [[ -n ${EVR[$n]:-} ]]; then
      if [[ ${EVR[$n]} != - ]]; then
        have=$(orbit_sha256_file "$d/result.env")
        if [[ $have != "${EVR[$n]}" ]]; then
          why="it is not the record the runner wrote (its iteration_result says sha256 ${EVR[$n]:0:12}, the file is ${have:0:12})"
        fi
      fi
    elif [[ -n $RC_FIRST_IR ]] && ((n >= RC_FIRST_IR && n != RC_LAST + 1)); then
      why='no iteration_result event announces it (planted)'
    fi
    if [[ -n $why ]]; then
      rc_set_aside_record "$n" "$why" result.env
    fi
  done < <(find "$RC_DIR/iterations" -mindepth 1 -maxdepth 1 -type d -name '[0-9][0-9][0-9][0-9][0-9][0-9]*' ! -name '*[!0-9]*' 2>/dev/null | LC_ALL=C sort)
}

# rc_set_aside_record N WHY [FILE]: moves iteration N's FILE (or everything of the attempt)
# into iterations/N/untrusted.K/.
rc_set_aside_record() {
  local n=$1 why=$2 file=${3:-} idir k f moved=0
  idir=$(rc_iter_dir "$n")
  [[ -d $idir && ! -L $idir ]] || return 0
  k=1
  while [[ -e $idir/untrusted.$k ]]; do k=$((k + 1)); done
  while IFS= read -r f; do
    RC_MOVES_FROM+=("$f")
    RC_MOVES_TO+=("$idir/untrusted.$k/${f##*/}")
    moved=1
  done < <(if [[ -n $file ]]; then
    if [[ -e $idir/$file ]]; then printf '%s\n' "$idir/$file"; fi
  else
    find "$idir" -mindepth 1 -maxdepth 1 ! -name 'retried.*' ! -name 'untrusted.*' | LC_ALL=C sort
  fi)
  if ((moved)); then
    RC_REPAIRS+=("iteration $n's record set aside in iterations/$(printf '%06d' "$n")/untrusted.$k/: $why")
  fi
}

# rc_done_distrust_v N: REPLY says why iteration N's DONE (its last iteration_end says DONE)
# is not to be believed, or is empty (orbit recover's done_distrusted): (a) the journal
# chains throughout and the DONE came after its last seal; (c) iterations/N/result.env is
# a record saying VERDICT=DONE, the one its iteration_result announced (where the runner
# announces them); (d) when the loop commits, the loop branch holds the iteration's commit,
# or, for an iteration that changed nothing, the tree its record ends with.
rc_done_distrust_v() {
  local n=$1 rec have branch autocommit=true line tree
  REPLY=''
  if [[ -n $RC_EV_BREAK_LINE ]]; then
    REPLY="the journal's chain breaks at events.jsonl:$RC_EV_BREAK_LINE ($RC_EV_BREAK_WHY)"
    return 0
  fi
  if [[ -n $RC_LAST_SEAL && -n ${EVL[$n]:-} ]] && ((EVL[$n] < RC_LAST_SEAL)); then
    REPLY="its iteration_end came before the journal was sealed after a break (events.jsonl:$RC_LAST_SEAL)"
    return 0
  fi
  rec="$(rc_iter_dir "$n")/result.env"
  if ! result_parse "$rec" || [[ ${RP[VERDICT]:-} != "$STATUS_DONE" ]]; then
    printf -v REPLY 'iterations/%06d/result.env is missing, is no record, or does not say VERDICT=DONE' "$n"
    return 0
  fi
  if [[ -n ${EVR[$n]:-} ]]; then
    if [[ ${EVR[$n]} != - ]]; then
      have=$(orbit_sha256_file "$rec")
      if [[ $have != "${EVR[$n]}" ]]; then
        printf -v REPLY 'iterations/%06d/result.env is not the record the runner wrote (its iteration_result says sha256 %s, the file is %s)' "$n" "${EVR[$n]:0:12}" "${have:0:12}"
        return 0
      fi
    fi
  elif [[ -n $RC_FIRST_IR ]] && ((n >= RC_FIRST_IR)); then
    printf -v REPLY 'no iteration_result event announces iterations/%06d/result.env (the runner announces every record)' "$n"
    return 0
  fi
  line=$(grep -m 1 -E '^autocommit = (true|false)$' -- "$RC_DIR/loop.toml" || true)
  if [[ -n $line ]]; then autocommit=${line#autocommit = }; fi
  [[ $autocommit == true ]] || return 0
  branch=${O[ITER_BRANCH]:-orbit/$RC_NAME}
  while IFS= read -r line; do
    if [[ $line == "$RC_NAME|$n" ]]; then return 0; fi
  done < <(rc_git log "refs/heads/$branch" \
    --format='%(trailers:key=Orbit-Loop,valueonly,separator=%x2C)|%(trailers:key=Orbit-Iteration,valueonly,separator=%x2C)' -- 2>/dev/null || true)
  if [[ ${RP[CHANGED]:-} == 0 && -n ${RP[TREE_AFTER]:-} ]]; then
    tree=$(rc_git rev-parse --verify -q "refs/heads/$branch^{tree}" 2>/dev/null || true)
    if [[ $tree == "${RP[TREE_AFTER]}" ]]; then return 0; fi
  fi
  REPLY="the loop commits, but no commit on $branch carries Orbit-Iteration: $n (and the branch's tree is not the one the record ends with)"
}

# ---- the plan
rc_plan() {
  local ev_max=0 pg_max=0 git_max n verdict='' source='' retry=0 done=0 next k f idir
  local cost status reason started origin ib cv cb_state cb_fails cb_sig cb_opened ran=0 b ws
  rc_read_old
  rc_read_events
  rc_read_progress
  rc_distrust_unrecorded_state
  for n in "${!EVV[@]}"; do
    if ((n > ev_max)); then ev_max=$n; fi
  done
  for n in "${!PGV[@]}"; do
    if ((n > pg_max)); then pg_max=$n; fi
  done
  git_max=$(rc_git_max)
  RC_LAST=$ev_max
  if ((pg_max > RC_LAST)); then RC_LAST=$pg_max; fi
  if ((git_max > RC_LAST)); then RC_LAST=$git_max; fi
  if [[ -n ${EVV[$RC_LAST]:-} ]]; then
    verdict=${EVV[$RC_LAST]} source=events.jsonl
  elif [[ -n ${PGV[$RC_LAST]:-} ]]; then
    verdict=${PGV[$RC_LAST]} source=progress.md
  elif ((RC_LAST > 0)); then
    source='a commit trailer'
  fi
  if ((RC_LAST > 0)) && [[ $verdict == "$STATUS_ABORTED" || $verdict == "$STATUS_BLOCKED" ]]; then
    retry=1
  fi
  rc_set_aside_untrusted "$verdict"
  # DONE only when every record of it agrees (orbit recover's done_distrusted); otherwise
  # the iteration runs again.
  local why=''
  if ((RC_LAST > 0)) && [[ ${EVV[$RC_LAST]:-} == "$STATUS_DONE" ]]; then
    rc_done_distrust_v "$RC_LAST"
    why=$REPLY
    if [[ -z $why ]]; then done=1; fi
  fi
  if ((RC_LAST == 0)); then
    next=${O[NEXT_ITERATION]:-1}
  elif ((retry)) || [[ -n $why ]]; then
    next=$RC_LAST
  else
    next=$((RC_LAST + 1))
  fi
  idir=$(rc_iter_dir "$RC_LAST")
  if ((retry)) && [[ -f $idir/result.env ]]; then
    k=1
    while [[ -e $idir/retried.$k ]]; do k=$((k + 1)); done
    # Everything of the old attempt (files, interrupted.K/), so the rerun starts clean.
    while IFS= read -r f; do
      RC_MOVES_FROM+=("$f")
      RC_MOVES_TO+=("$idir/retried.$k/${f##*/}")
    done < <(find "$idir" -mindepth 1 -maxdepth 1 ! -name 'retried.*' | LC_ALL=C sort)
    RC_REPAIRS+=("iteration $RC_LAST ended $verdict: it is retried, its record kept in iterations/$(printf '%06d' "$RC_LAST")/retried.$k/")
  fi
  if [[ -n $why ]]; then
    RC_NOTES+=("iteration $RC_LAST's DONE is not trusted: $why; it runs again")
    rc_set_aside_record "$RC_LAST" "its DONE is not trusted: $why" ''
  fi
  if ((!retry && !done && RC_LAST > 0)) && [[ -z $why && -f $(rc_iter_dir "$next")/result.env ]]; then
    if [[ -n $RC_FIRST_IR && -z ${EVR[$next]:-} ]] && ((next >= RC_FIRST_IR)); then
      RC_NOTES+=("iteration $next was recorded (iterations/$(printf '%06d' "$next")/result.env) but never announced (no iteration_result): the runner died right after writing it, and the next run does the iteration again")
    else
      RC_NOTES+=("iteration $next was recorded (iterations/$(printf '%06d' "$next")/result.env) but not closed: the next run completes it without running it again")
    fi
  fi
  rc_pins
  if ((F_STALL)) && [[ -s $RC_DIR/.action-sig.log ]]; then
    RC_SIG_CLEAR=1
    RC_REPAIRS+=("change signatures cleared (--clear-stall); the old ones are in the backup")
  fi
  while IFS= read -r f; do
    RC_MOVES_FROM+=("$f")
    RC_MOVES_TO+=("BACKUP/${f##*/}")
    RC_REPAIRS+=("${f##*/}: a leftover of an interrupted write, moved to the backup")
  done < <(find "$RC_DIR" -mindepth 1 -maxdepth 1 -type f -name '*.tmp.*' | LC_ALL=C sort)

  # ---- the state
  orbit_ledger_sum_v "$RC_DIR/cost.ledger" ||
    orbit_die "$EXIT_FAILURE" "cannot read $RC_DIR/cost.ledger: check its permissions, then run recover.sh again"
  cost=$REPLY
  if ((RC_OLD_OK && !F_RESET)); then
    cb_state=${O[CB_STATE]} cb_fails=${O[CB_FAILS]} cb_sig=${O[CB_SIG]} cb_opened=${O[CB_OPENED_AT]}
  else
    cb_state=$CB_CLOSED cb_fails=0 cb_sig='' cb_opened=0
  fi
  if ((F_RESET && RC_OLD_OK)) && [[ ${O[CB_STATE]} != "$CB_CLOSED" || ${O[CB_FAILS]} != 0 ]]; then
    RC_REPAIRS+=("circuit breaker reset to CLOSED (--reset-circuit)")
  fi
  if ((RC_LAST > 0)) || [[ -f $RC_DIR/.baseline-commit ]]; then
    ran=1
  fi
  if ((done)); then
    status=$STATUS_DONE reason=$REASON_NONE
  elif [[ -n $RC_BROKEN ]]; then
    b=''
    if [[ $RC_BROKEN == goal.md ]]; then b=-goal; fi
    RC_NOTES+=("the pin of $RC_BROKEN is still broken ($RC_BROKEN_REASON): review the change, then --repin$b or --restore-pinned")
    status=$STATUS_ABORTED reason=$RC_BROKEN_REASON
  elif rc_holds_git_tamper; then
    status=$STATUS_ABORTED reason=$REASON_GIT_TAMPER
  elif [[ $cb_state == "$CB_OPEN" ]]; then
    status=$STATUS_BLOCKED reason=$REASON_CIRCUIT_OPEN
  elif ((RC_OLD_OK)); then
    status=$STATUS_CONTINUE reason=$REASON_NONE
    case ${O[LAST_STATUS]} in
      "$STATUS_STALLED")
        if ((!F_STALL)); then status=$STATUS_STALLED reason=${O[STOP_REASON]}; fi
        ;;
      "$STATUS_PAUSED") status=$STATUS_PAUSED reason=${O[STOP_REASON]} ;;
      "$STATUS_BLOCKED")
        if ((!retry)) && [[ ${O[STOP_REASON]} != "$REASON_CIRCUIT_OPEN" && ${O[STOP_REASON]} != "$REASON_TOOL_FAILURE" ]]; then
          status=$STATUS_BLOCKED reason=${O[STOP_REASON]}
        fi
        ;;
      "$STATUS_READY")
        if ((RC_LAST == 0)); then status=$STATUS_READY; fi
        ;;
      "$STATUS_CONTINUE") reason=${O[STOP_REASON]} ;;
    esac
  elif ((ran)); then
    status=$STATUS_CONTINUE reason=$REASON_NONE
  else
    status=$STATUS_READY reason=$REASON_NONE
  fi
  if ((RC_OLD_OK)); then
    started=${O[STARTED_AT]} origin=${O[ORIGIN_BRANCH]} ib=${O[ITER_BRANCH]}
  else
    started=${RC_FIRST_START:-0} ib=''
    # The runner records the starting branch in .origin-branch at the first run.
    origin=$(cat -- "$RC_DIR/.origin-branch" 2>/dev/null || true)
    if ! state_check_value ORIGIN_BRANCH "$origin"; then
      origin=''
    fi
    if GIT_OPTIONAL_LOCKS=0 git -C "$RC_REPO" rev-parse --verify -q "refs/heads/orbit/$RC_NAME" >/dev/null 2>&1; then
      ib="orbit/$RC_NAME"
    fi
  fi
  if ((F_MIGRATE)); then
    cv=$ORBIT_CONTRACT_VERSION
    if ((RC_OLD_OK)) && [[ ${O[CONTRACT_VERSION]} != "$cv" ]]; then
      RC_REPAIRS+=("CONTRACT_VERSION migrated to $cv (--migrate)")
    fi
  else
    cv=${O[CONTRACT_VERSION]:-$RC_LOOP_CV}
  fi
  # WORKSPACE: the old state's; rebuilt, loop.toml's once a 2.0 loop has run (the runner
  # sets it at the first run from the same setting).
  if ((RC_OLD_OK)); then
    ws=${O[WORKSPACE]}
  elif ((ran)) && ! rc_older_major "$cv"; then
    rc_ws_path_v
    ws=$REPLY
  else
    ws=''
  fi
  if ((F_MIGRATE)) && { rc_older_major "${O[CONTRACT_VERSION]:-$RC_LOOP_CV}" || rc_older_major "$RC_LOOP_CV"; }; then
    rc_migrate_check "$ran"
    ws=''
    if ((ran)); then
      rc_ws_path_v
      ws=$REPLY
    fi
  fi
  if ! rc_older_major "$cv"; then
    rc_ws_check "$ws" "$ib"
  fi
  S=()
  S[CONTRACT_VERSION]=$cv
  S[GEN]=${O[GEN]:-0}
  S[NEXT_ITERATION]=$next
  S[LAST_STATUS]=$status
  S[STOP_REASON]=$reason
  S[STARTED_AT]=$started
  S[LAST_UPDATED_AT]=${O[LAST_UPDATED_AT]:-0}
  S[ORIGIN_BRANCH]=$origin
  S[ITER_BRANCH]=$ib
  S[COST_MICROUSD]=$cost
  S[CB_STATE]=$cb_state
  S[CB_FAILS]=$cb_fails
  S[CB_SIG]=$cb_sig
  S[CB_OPENED_AT]=$cb_opened
  S[VERIFY_STREAK]=${O[VERIFY_STREAK]:-0}
  S[RESUME_AT]=${O[RESUME_AT]:-0}
  S[WORKSPACE]=$ws
  if ((RC_OLD_OK)); then
    if [[ ${O[NEXT_ITERATION]} != "$next" ]]; then
      if ((RC_LAST == 0)); then
        RC_REPAIRS+=("NEXT_ITERATION ${O[NEXT_ITERATION]} → $next (no iteration on record)")
      else
        RC_REPAIRS+=("NEXT_ITERATION ${O[NEXT_ITERATION]} → $next ($source: iteration $RC_LAST ended ${verdict:-(committed)})")
      fi
    fi
    if [[ ${O[LAST_STATUS]} != "$status" || ${O[STOP_REASON]} != "$reason" ]]; then
      RC_REPAIRS+=("LAST_STATUS ${O[LAST_STATUS]} (${O[STOP_REASON]}) → $status ($reason)")
    fi
    if [[ ${O[COST_MICROUSD]} != "$cost" ]]; then
      RC_REPAIRS+=("COST_MICROUSD ${O[COST_MICROUSD]} → $cost (the sum of cost.ledger)")
    fi
  fi
  RC_STATE_WRITE=1
  if ((RC_OLD_OK && RC_SIDECAR_OK)) && [[ "${RC_OLD_TEXT}x" == "$(
    state_print
    printf x
  )" ]]; then
    RC_STATE_WRITE=0
  fi
  if ((RC_STATE_WRITE)); then
    b=${O[GEN]:-${RC_OLD_GEN:-0}}
    if [[ -n $RC_SIDECAR_GEN ]] && ((RC_SIDECAR_GEN > b)); then
      b=$RC_SIDECAR_GEN
    fi
    S[GEN]=$((b + 1))
  fi
}

# rc_holds_git_tamper: a loop stopped on git_tamper (by its state, or by its last loop_stop
# when there is no state to ask) stays ABORTED until orbit recover --repin accepts git's
# config, hooks and excludes after a review (orbit recover's holds_git_tamper).
rc_holds_git_tamper() {
  if ((RC_OLD_OK)); then
    [[ ${O[LAST_STATUS]} == "$STATUS_ABORTED" && ${O[STOP_REASON]} == "$REASON_GIT_TAMPER" ]] || return 1
  else
    [[ $RC_LAST_STOP == "$STATUS_ABORTED $REASON_GIT_TAMPER" ]] || return 1
  fi
  RC_NOTES+=("the loop stopped on git_tamper: review 'git -C $RC_REPO config --list --show-origin', .git/hooks and .git/info, undo what you did not make, then orbit recover --repin")
  return 0
}

# Whether the plan changes anything. A progress.md whose last marker only lacks its final
# newline is no change by itself (the runner adds it); it is mended when recover writes.
rc_plan_has_changes() {
  [[ -n $RC_WS_ADD || -n $RC_BH_WRITE ]] ||
    ((RC_STATE_WRITE || RC_PINS_WRITE || RC_GOAL_COPY || RC_SIG_CLEAR || RC_EV_TORN || ${#RC_MOVES_FROM[@]} > 0)) ||
    [[ -n $RC_EV_BREAK_LINE || -n $RC_PG_BREAK_OFF ]] || ((${#RC_PG_STRAY[@]} > 0)) ||
    ((${#RC_RESTORE_TO[@]} > 0 || ${#RC_REMOVES[@]} > 0)) ||
    [[ $RC_PG_TAIL == torn ]]
}

rc_resume_hint() {
  case ${S[LAST_STATUS]} in
    "$STATUS_DONE") printf 'the loop is DONE' ;;
    "$STATUS_ABORTED") printf 'still ABORTED (%s): review the change, then --repin or --restore-pinned' "${S[STOP_REASON]}" ;;
    *) printf 'the next run resumes at iteration %s (%s)' "${S[NEXT_ITERATION]}" "${S[LAST_STATUS]}" ;;
  esac
}

rc_dry_run() {
  local r i old new
  printf 'recover.sh --dry-run %s%s: the plan (nothing is written)\n' "$RC_DIR" "${RC_FLAGS[*]:+ ${RC_FLAGS[*]}}"
  if ! rc_plan_has_changes; then
    printf 'nothing to repair: state.env agrees with the evidence; %s\n' "$(rc_resume_hint)"
    return 0
  fi
  if ((RC_STATE_WRITE)); then
    S[LAST_UPDATED_AT]=$(orbit_now)
    old=$(mktemp "${TMPDIR:-/tmp}/orbit-recover.XXXXXX")
    new=$(mktemp "${TMPDIR:-/tmp}/orbit-recover.XXXXXX")
    if [[ -f $RC_DIR/state.env ]]; then
      cat -- "$RC_DIR/state.env" >"$old"
    fi
    state_print >"$new"
    printf -- '--- state.env\n+++ state.env (recovered)\n'
    diff -u -- "$old" "$new" | tail -n +3 | grep -v '^@@' || true
    rm -f -- "$old" "$new"
  fi
  for r in "${RC_REPAIRS[@]}"; do printf 'repair: %s\n' "$r"; done
  if [[ -n $RC_WS_ADD ]]; then printf 'git: git worktree add --lock %s %s\n' "$RC_WS_ADD" "$RC_WS_BRANCH"; fi
  if [[ -n $RC_BH_WRITE ]]; then printf 'write: .branch-head (the old copy to backups/)\n'; fi
  if ((RC_PINS_WRITE)); then printf 'write: pins.sha256 (the old copy to backups/)\n'; fi
  if ((RC_GOAL_COPY)); then printf 'write: .pins/goal.md (the old copy to backups/)\n'; fi
  if ((RC_SIG_CLEAR)); then printf 'write: .action-sig.log (the old copy to backups/)\n'; fi
  for i in "${!RC_RESTORE_TO[@]}"; do
    printf 'write: %s (the old copy to backups/)\n' "${RC_RESTORE_TO[i]#"$RC_DIR"/}"
  done
  for i in "${!RC_REMOVES[@]}"; do
    printf 'remove: %s (a copy to backups/)\n' "${RC_REMOVES[i]}"
  done
  for i in "${!RC_MOVES_FROM[@]}"; do
    printf 'move: %s → %s\n' "${RC_MOVES_FROM[i]#"$RC_DIR"/}" "${RC_MOVES_TO[i]#"$RC_DIR"/}"
  done
  for r in "${RC_NOTES[@]}"; do printf 'note: %s\n' "$r"; done
  printf 'append: a ## Recovery entry to progress.md and a recovery event to events.jsonl\n'
}

# ---- apply: backups, moves, flag writes, progress, events, then the checkpoint.
rc_backup() {
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

rc_apply() {
  local now stamp bdir brel k f i dest text tmp iter r flags_text
  now=$(orbit_now)
  stamp=$(TZ=UTC0 printf '%(%Y%m%dT%H%M%SZ)T' "$now")
  bdir="$RC_DIR/backups/$stamp"
  k=2
  while [[ -e $bdir ]]; do
    bdir="$RC_DIR/backups/$stamp-$k"
    k=$((k + 1))
  done
  brel=${bdir#"$RC_DIR"/}
  mkdir -p -- "$bdir"
  if [[ -n $RC_BH_WRITE ]]; then rc_backup "$RC_DIR/.branch-head" "$bdir"; fi
  if ((RC_PINS_WRITE)); then rc_backup "$RC_DIR/pins.sha256" "$bdir"; fi
  if ((RC_GOAL_COPY)); then rc_backup "$RC_DIR/.pins/goal.md" "$bdir"; fi
  if ((RC_SIG_CLEAR)); then rc_backup "$RC_DIR/.action-sig.log" "$bdir"; fi
  for f in "${RC_RESTORE_TO[@]}" "${RC_REMOVES[@]}"; do rc_backup "$f" "$bdir"; done
  rc_backup "$RC_DIR/progress.md" "$bdir"
  rc_backup "$RC_DIR/events.jsonl" "$bdir"
  if ((RC_STATE_WRITE)); then
    rc_backup "$RC_DIR/state.env" "$bdir"
    rc_backup "$RC_DIR/state.env.sha256" "$bdir"
  fi
  if [[ -n $RC_WS_ADD ]]; then
    mkdir -p -- "${RC_WS_ADD%/*}"
    rmdir -- "$RC_WS_ADD" 2>/dev/null || true
    # A worktree deleted by hand is still registered, and locked: its entry goes (only its
    # own: a prune could take another loop's workspace being added).
    rc_git worktree remove -f -f -- "$RC_WS_ADD" 2>/dev/null || true
    git -C "$RC_REPO" worktree add -q --lock --reason "orbit loop $RC_DIR" -- "$RC_WS_ADD" "$RC_WS_BRANCH" ||
      orbit_die "$EXIT_FAILURE" "cannot recreate the workspace $RC_WS_ADD from $RC_WS_BRANCH (nothing else was changed): see git's message above"
  fi
  if [[ -n $RC_BH_WRITE ]]; then
    orbit_write_file "$RC_DIR/.branch-head" "$RC_BH_WRITE"$'\n' || orbit_die "$EXIT_FAILURE" "cannot write .branch-head"
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
    orbit_write_file "$RC_DIR/pins.sha256" "$RC_PINS_NEW" || orbit_die "$EXIT_FAILURE" "cannot write pins.sha256"
  fi
  if ((RC_GOAL_COPY)); then
    mkdir -p -- "$RC_DIR/.pins"
    cp -- "$RC_DIR/goal.md" "$RC_DIR/.pins/.goal.md.tmp.$$"
    mv -f -- "$RC_DIR/.pins/.goal.md.tmp.$$" "$RC_DIR/.pins/goal.md"
  fi
  if ((RC_SIG_CLEAR)); then
    orbit_write_file "$RC_DIR/.action-sig.log" '' || orbit_die "$EXIT_FAILURE" "cannot write .action-sig.log"
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
  PG_FILE=$tmp
  PG_PREV=0000000000000000000000000000000000000000000000000000000000000000
  f=$(grep -a -E '^<!-- orbit:end iteration=[0-9]+ sha256=[0-9a-f]{64} -->$' -- "$tmp" | tail -n 1 || true)
  if [[ $f =~ sha256=([0-9a-f]{64}) ]]; then
    PG_PREV=${BASH_REMATCH[1]}
  fi
  iter=$((S[NEXT_ITERATION] > 0 ? S[NEXT_ITERATION] - 1 : 0))
  flags_text=${RC_FLAGS[*]:-}
  text="## Recovery — $(orbit_iso "$now")"$'\n'
  text+="- by: recover.sh${flags_text:+ $flags_text}"$'\n'
  text+="- evidence: last completed iteration $RC_LAST"$'\n'
  text+="- repaired:"$'\n'
  for r in "${RC_REPAIRS[@]}"; do
    text+="  - $(printf '%s' "$r" | tr -d '\000-\037\177')"$'\n'
  done
  text+="- state: NEXT_ITERATION=${S[NEXT_ITERATION]} LAST_STATUS=${S[LAST_STATUS]} STOP_REASON=${S[STOP_REASON]} GEN=${S[GEN]}"$'\n'
  text+="- backups: $brel/"$'\n'
  progress_append "$iter" "$text"
  mv -f -- "$tmp" "$RC_DIR/progress.md"
  # events.jsonl: the torn line trimmed, the recovery event appended; one atomic rename.
  tmp="$RC_DIR/.events.jsonl.tmp.$$"
  : >"$tmp"
  if [[ -f $RC_DIR/events.jsonl ]]; then
    head -c "$RC_EV_KEEP" -- "$RC_DIR/events.jsonl" >"$tmp"
  fi
  EV_SEQ=0
  EV_PREV=0000000000000000000000000000000000000000000000000000000000000000
  events_open "$tmp"
  # The state.env the loop will have (written below, its text fixed now; or the one kept):
  # the event carries its sha256, so that audit and recover can check state.env against it.
  local state_sha=''
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
  orbit_event recovery "$iter" by recover.sh flags "${flags_text:-none}" repairs "${#RC_REPAIRS[@]}" \
    next_iteration "${S[NEXT_ITERATION]}" status "${S[LAST_STATUS]}" reason "${S[STOP_REASON]}" \
    gen "${S[GEN]}" "${extra[@]}" backup "$brel"
  mv -f -- "$tmp" "$RC_DIR/events.jsonl"
  # The checkpoint, last.
  if ((RC_STATE_WRITE)); then
    orbit_write_file "$RC_DIR/state.env" "$text" ||
      orbit_die "$EXIT_FAILURE" "cannot write state.env (disk full or read-only?): the backup is in $brel"
    orbit_write_file "$RC_DIR/state.env.sha256" "$(state_sidecar_text "$text" "${S[GEN]}")" ||
      orbit_die "$EXIT_FAILURE" "cannot write state.env.sha256: run recover.sh again once the disk has room"
  fi
  printf 'recover.sh: recovered %s\n' "$RC_DIR"
  for r in "${RC_REPAIRS[@]}"; do printf '  - %s\n' "$r"; done
  for r in "${RC_NOTES[@]}"; do printf '  note: %s\n' "$r"; done
  printf '  backups: %s\n  %s\n' "$brel" "$(rc_resume_hint)"
}

main() {
  local r
  # The runner's torn-checkpoint flag (state.sh) is not used here: recover reports a torn
  # checkpoint among its repairs.
  : "$ORBIT_TORN_REPAIRED"
  orbit_settings
  rc_args "$@"
  if ((F_HELP)); then
    rc_usage
    return 0
  fi
  rc_locate
  orbit_sha_detect
  # The staged copies of --restore-pinned are gone however recover.sh ends, and so is the
  # hashing coprocess (one process for the journal's many line hashes, where perl is).
  trap 'orbit_hasher_stop; if [[ -n $RC_STAGE ]]; then rm -rf -- "$RC_STAGE"; fi' EXIT
  orbit_hasher_start
  if rc_lock_held; then
    orbit_die "$EXIT_LOCKED" "$RC_HOLDER: recover.sh refuses to change a running loop. Stop the runner (or let it finish), then run it again."
  fi
  rc_plan
  if ((F_DRY)); then
    rc_dry_run
    return 0
  fi
  if ! rc_plan_has_changes; then
    printf 'recover.sh: nothing to repair in %s: state.env agrees with the evidence; %s\n' "$RC_DIR" "$(rc_resume_hint)"
    for r in "${RC_NOTES[@]}"; do printf '  note: %s\n' "$r"; done
    return 0
  fi
  rc_apply
}

main "$@"
exit
