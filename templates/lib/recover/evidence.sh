# ---- the old checkpoint and its sidecar
recover_read_old() {
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

# recover_iso_epoch TS: epoch seconds of YYYY-MM-DDTHH:MM:SSZ (years from 1970), or nothing.
recover_iso_epoch() {
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

# recover_chain_check FILE: the journal's hash chain over its first RC_EV_KEEP bytes (complete
# lines), line by line as orbit recover's chain_break reads it: a line must be
# {"seq":S,"ts":"...","event":"name","iteration":N[,...],"prev":"P","hash":"H"} with H the
# sha256 of the line without its hash member, P the line before's H (64 zeros first) and S
# one more than the line before's. At the first line that is not, the journal is sealed:
# RC_EV_KEEP ends before it (the rest is not evidence; the backup keeps it).
recover_chain_check() {
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
recover_read_events() {
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
  recover_chain_check "$file"
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
    e=$(recover_iso_epoch "$ts")
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
recover_read_progress() {
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
  recover_progress_chain "$file" "$limit"
  if [[ -n $RC_PG_BREAK_OFF ]]; then limit=$RC_PG_BREAK_OFF; fi
  while read -r n st; do
    [[ -n $n ]] || continue
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

# recover_progress_chain FILE LIMIT: progress.md's first LIMIT bytes (a final newline added)
# checked as a chain, as orbit's progress module parses it: each closed entry's end-marker
# hash must be the sha256 of the previous marker's hash, a newline and the entry's text.
# From the first that is not (a rewritten history), progress.md is sealed
# (RC_PG_BREAK_OFF: everything from its heading on goes to the backup); lines outside any
# entry (RC_PG_STRAY, 1-based) are removed.
RC_PG_BREAK_OFF=
RC_PG_STRAY=()
recover_progress_chain() {
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
recover_git_max() {
  local max=0 line name it
  while IFS= read -r line; do
    name=${line%%|*}
    it=${line#*|}
    if [[ $name == "$RC_NAME" && $it =~ ^[0-9]{1,9}$ ]]; then
      it=$((10#$it))
      if [[ ! -f $(recover_iter_dir "$it")/result.env ]] && ((it > max)); then
        max=$it
      fi
    fi
  done < <(GIT_OPTIONAL_LOCKS=0 git -C "$RC_REPO" log HEAD --branches \
    --format='%(trailers:key=Orbit-Loop,valueonly,separator=%x2C)|%(trailers:key=Orbit-Iteration,valueonly,separator=%x2C)' 2>/dev/null || true)
  printf '%s' "$max"
}

# recover_older_major VERSION: status 0 when VERSION belongs to an older major version of the
# contract than this script's (contract::older_major).
recover_older_major() {
  ((10#${1%%.*} < 10#${ORBIT_CONTRACT_VERSION%%.*}))
}

recover_iter_dir() { printf '%s/iterations/%06d' "$RC_DIR" "$1"; }
