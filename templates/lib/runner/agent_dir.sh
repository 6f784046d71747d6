# ---- the agent's folder: .orbit-agent/ in the workspace, rebuilt before every agent run
# ---- from the loop directory's copies (what the agent writes there changes nothing of
# ---- the loop's), read back after it: notes.md, the claim, the cost. Only regular files
# ---- are read back, and at most a bounded size.
AGENT_NOTES_MAX=1048576
# With memory = "feedback" the folder holds no progress.md and no notes.md: only the goal,
# verify.sh (and lib.sh, which it loads), the prompt and the last failure's feedback (an agent's notes are still kept in
# the loop directory, never given back).
# The library (a third of a megabyte) is copied once: a copy the folder still holds with the
# pinned bytes is kept (renamed aside and back, never rewritten), any other is replaced.
agent_dir_fill() {
  local prompt=$1 fb=$2 d lib_kept=''
  local -a files=("$LOOP_DIR/goal.md" "$LOOP_DIR/verify.sh")
  if [[ -f $AGENT_DIR/lib.sh && ! -L $AGENT_DIR/lib.sh && -n $ORBIT_TMP ]] &&
    orbit_sha256_file_v "$AGENT_DIR/lib.sh" && [[ $REPLY == "${ORBIT_LIB_SHA256-}" ]] &&
    state_mv "$AGENT_DIR/lib.sh" "$ORBIT_TMP/agent-lib.sh" 2>/dev/null; then
    lib_kept=$ORBIT_TMP/agent-lib.sh
  else
    files+=("$LOOP_DIR/lib.sh")
  fi
  rm -rf -- "$AGENT_DIR"
  mkdir -- "$AGENT_DIR"
  if [[ -n $lib_kept ]] && ! state_mv "$lib_kept" "$AGENT_DIR/lib.sh" 2>/dev/null; then
    files+=("$LOOP_DIR/lib.sh")
  fi
  if [[ ${prompt##*/} == prompt.md ]]; then
    files+=("$prompt")
  else
    cp -- "$prompt" "$AGENT_DIR/prompt.md"
  fi
  if [[ $MEMORY_SETTING != feedback ]]; then
    files+=("$PG_FILE")
    if [[ -f $LOOP_DIR/notes.md && ! -L $LOOP_DIR/notes.md ]]; then
      files+=("$LOOP_DIR/notes.md")
    else
      : >"$AGENT_DIR/notes.md"
    fi
  fi
  # One copy for the files whose names the folder keeps (goal.md, progress.md, verify.sh,
  # prompt.md, notes.md); the feedback is renamed on the way.
  cp -- "${files[@]}" "$AGENT_DIR/"
  if [[ -n $fb && -f $fb ]]; then
    cp -- "$fb" "$AGENT_DIR/feedback.json"
    d=${fb%/*}
    if [[ -f $d/input-feedback.txt ]]; then
      cp -- "$d/input-feedback.txt" "$AGENT_DIR/feedback.txt"
    fi
    if [[ -f $d/input-verify.log ]]; then
      cp -- "$d/input-verify.log" "$AGENT_DIR/last-verify.log"
    fi
  fi
}

# agent_dir_real [DIR]: the agent's folder (AGENT_DIR, or DIR: a fan-out candidate's) is
# still a directory, not a link the agent put in its place (the runner would read and remove
# files wherever it points).
agent_dir_real() {
  local d=${1:-$AGENT_DIR}
  [[ -d $d && ! -L $d ]] || {
    orbit_log "the agent's folder $d is not a directory any more (a link?): nothing is read back from it"
    return 1
  }
}

# agent_dir_file_take NAME DEST [DIR]: moves the agent's NAME out of its folder (AGENT_DIR, or
# DIR: a fan-out candidate's) into DEST when it is a regular file (never a symlink), cut to
# AGENT_NOTES_MAX bytes; status 1 when there is none.
agent_dir_file_take() {
  local d=${3:-$AGENT_DIR}
  local src="$d/$1"
  agent_dir_real "$d" || return 1
  [[ -f $src && ! -L $src ]] || return 1
  head -c "$AGENT_NOTES_MAX" -- "$src" >"$2.tmp.$$" && mv -f -- "$2.tmp.$$" "$2"
  rm -f -- "$src"
}

# agent_dir_odd: after an agent run, what stands where its folder was when that is no
# directory (a link, a file, a FIFO) is named in the iteration's record (result.env
# AGENT_FOLDER, its progress.md entry) and in runner.log, then removed (a link as a link,
# never followed). The loop goes on: the folder is the agent's own, nothing of it is read
# back, no tree holds it (tree_add) and the next run's folder is made anew.
agent_dir_odd() {
  local kind
  [[ -L $AGENT_DIR || (-e $AGENT_DIR && ! -d $AGENT_DIR) ]] || return 0
  kind=$(orbit_file_kind "$AGENT_DIR")
  kind=${kind//[[:cntrl:]]/?}
  kind=${kind:0:200}
  orbit_log "the agent's folder $AGENT_DIR is $kind, not a directory: nothing is read back from it, it is removed and never committed"
  if [[ ${R[AGENT_FOLDER]:-} != *"$kind"* ]]; then
    R[AGENT_FOLDER]="${R[AGENT_FOLDER]:+${R[AGENT_FOLDER]}; }$kind"
  fi
  rm -f -- "$AGENT_DIR" 2>>"$ORBIT_LOG_FILE" || true
}

# agent_dir_collect COSTFILE [CANDIDATE]: after an agent run, its notes back into the loop
# directory and its cost into the iteration's record. A fan-out candidate's notes (CANDIDATE
# above 0) are taken by the runner when it judges it (fanout_look).
agent_dir_collect() {
  local cfile=$1 cand=${2:-0}
  engine_after_run
  agent_dir_odd
  if ((!cand)) && agent_dir_real && [[ -f $AGENT_DIR/notes.md && ! -L $AGENT_DIR/notes.md ]]; then
    head -c "$AGENT_NOTES_MAX" -- "$AGENT_DIR/notes.md" >"$LOOP_DIR/.notes.md.tmp.$$" &&
      state_mv "$LOOP_DIR/.notes.md.tmp.$$" "$LOOP_DIR/notes.md"
  fi
  agent_dir_file_take cost "$cfile" || true
}
