# ---- adequacy (contract section 6.2): which part of a DONE's change the loop's checks
# ---- need, measured by the orbit binary orbit init pinned (orbit.sha256), never an orbit
# ---- found on PATH. adequacy = "gate": in the DONE gate, after the holdout, a hunk no check
# ---- needs or more surviving mutants than ADEQUACY_MAX_SURVIVORS rejects the claim;
# ---- "report": measured once the DONE is recorded, never changing it.
ADEQUACY_RC=0
ADEQUACY_WHY=
ADEQUACY_FIGURES=()

# adequacy_orbit_v: REPLY is a copy of the pinned orbit binary in the runner's scratch
# folder, hashed there: the copy is what runs, so a binary swapped after the check never
# does. Status 1 with REPLY saying why: no pin, a pin that is not one line of a sha256 and
# an absolute path, a binary missing, unreadable or not the pinned one.
adequacy_orbit_v() {
  local pin=$LOOP_DIR/orbit.sha256 line='' want path copy=$ORBIT_TMP/orbit-pinned
  if ! orbit_regular "$pin"; then
    REPLY="no pin of the orbit binary (orbit.sha256): run orbit init --force --dir $LOOP_DIR with the orbit you use"
    return 1
  fi
  IFS= read -r line <"$pin" || true
  if [[ ! $line =~ ^([0-9a-f]{64})\ \ (/.+)$ ]]; then
    REPLY="orbit.sha256 is not one line '<sha256>  <absolute path>'"
    return 1
  fi
  want=${BASH_REMATCH[1]} path=${BASH_REMATCH[2]}
  rm -f -- "$copy"
  if ! cp -- "$path" "$copy" 2>>"$ORBIT_LOG_FILE"; then
    REPLY="the orbit binary pinned at init ($path) cannot be read: put it back, or run orbit init --force --dir $LOOP_DIR with the orbit you use"
    return 1
  fi
  chmod 0700 -- "$copy"
  orbit_sha256_file_v "$copy"
  if [[ $REPLY != "$want" ]]; then
    REPLY="the orbit binary at $path is not the one pinned at init (sha256 $REPLY, pinned $want): if you upgraded orbit, run orbit init --force --dir $LOOP_DIR to pin it again"
    rm -f -- "$copy"
    return 1
  fi
  REPLY=$copy
}

# adequacy_run N DIR COMMIT BASE [ARGS...]: orbit adequacy on COMMIT's change from BASE,
# its record, figures and feedback written into DIR (--out), its output to DIR/adequacy.log.
# ADEQUACY_RC is its exit (-1: the pinned orbit could not run, ADEQUACY_WHY says why);
# ADEQUACY_FIGURES the figures (hunks needed, hunks tried, mutants killed, mutants tried,
# the details' sha256) when it measured. Journals adequacy_measured.
adequacy_run() {
  local n=$1 dir=$2 commit=$3 base=$4 mode bin bound line='' back=$PWD
  local -a budget=()
  shift 4
  mode=${1:+gate}
  ADEQUACY_RC=0 ADEQUACY_WHY='' ADEQUACY_FIGURES=()
  if ! adequacy_orbit_v; then
    ADEQUACY_RC=-1 ADEQUACY_WHY=$REPLY
    orbit_log "adequacy: not measured: $REPLY"
    return 0
  fi
  bin=$REPLY
  # orbit's own budget bounds it (the checks once, then the units); this is the backstop.
  bound=$((CHECK_TIMEOUT_S * (2 * PASS_K + 6) + 120))
  if orbit_setting_v ADEQUACY_BUDGET && ((REPLY > 0)); then
    budget=(--budget "${REPLY}s")
    bound=$((REPLY + 4 * CHECK_TIMEOUT_S + 120))
  fi
  rm -f -- "$dir/adequacy.json" "$dir/adequacy.figures" "$dir/adequacy-feedback.txt"
  # orbit finds the repository from where it starts.
  if ! cd -- "$REPO_ROOT"; then
    ADEQUACY_RC=-1 ADEQUACY_WHY="cannot enter $REPO_ROOT"
    return 0
  fi
  proc_run_bounded "$bound" "$KILL_GRACE_S" /dev/null "$dir/adequacy.log" \
    "$bin" adequacy "$LOOP_DIR" --commit "$commit" --base "$base" --out "$dir" "${budget[@]}" "$@"
  cd -- "$back" || true
  ADEQUACY_RC=$ORBIT_RC
  if ((ORBIT_TIMED_OUT)); then
    ADEQUACY_RC=-1 ADEQUACY_WHY="it ran past ${bound}s"
  fi
  if ((ADEQUACY_RC == 0 || ADEQUACY_RC == 4)) && IFS= read -r line <"$dir/adequacy.figures" 2>/dev/null &&
    [[ $line =~ ^([0-9]+)\ ([0-9]+)\ ([0-9]+)\ ([0-9]+)\ ([0-9a-f]{64})\  ]]; then
    ADEQUACY_FIGURES=("${BASH_REMATCH[@]:1:5}")
    state_event adequacy_measured "$n" commit "$commit" hunks_needed "${ADEQUACY_FIGURES[0]}" \
      hunks_tried "${ADEQUACY_FIGURES[1]}" mutants_killed "${ADEQUACY_FIGURES[2]}" \
      mutants_tried "${ADEQUACY_FIGURES[3]}" details_sha256 "${ADEQUACY_FIGURES[4]}" mode "${mode:-report}"
  elif ((ADEQUACY_RC >= 0)); then
    ADEQUACY_WHY="orbit adequacy exited $ADEQUACY_RC without its figures"
    ADEQUACY_RC=-1
  fi
}

# adequacy_feedback DIR N: the feedback of a claim the adequacy gate rejected: orbit's
# words (DIR/adequacy-feedback.txt), naming each hunk and mutant.
adequacy_feedback() {
  local dir=$1 n=$2 text
  text=$(cat -- "$dir/adequacy-feedback.txt" 2>/dev/null) || text='The DONE claim was rejected: the checks do not need all of the change.'
  printf '{"failing":["adequacy"],"failing_roles":["adequacy"],"tests":[],"assertions":[],"loci":[],"output_tail":%s,"attempt":%s,"iteration":%s}\n' \
    "$(orbit_json_str "$text")" "${R[ATTEMPTS]}" "$n" >"$dir/feedback.json"
  printf '%s\n' "$text" >"$dir/feedback.txt"
}

# adequacy_after_done N: once iteration N's DONE is recorded, its measure goes beside the
# envelope (LOOP_DIR/adequacy.json): the gate's, or (adequacy = "report") one made now of
# the DONE commit. Nothing here changes the DONE: a failure is said in runner.log.
adequacy_after_done() {
  local n=$1 dir commit='' base=''
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  case ${ADEQUACY_SETTING:-off} in
    report)
      commit_of_iteration_v "$dir"
      commit=$REPLY
      IFS= read -r base <"$LOOP_DIR/.baseline-commit" 2>/dev/null || true
      [[ -n $commit && -n $base ]] || return 0
      adequacy_run "$n" "$dir" "$commit" "$base"
      if ((ADEQUACY_RC != 0)); then
        orbit_log "adequacy: the DONE's change was not measured (${ADEQUACY_WHY:-exit $ADEQUACY_RC}; see ${dir#"$LOOP_DIR"/}/adequacy.log): orbit adequacy measures it"
        return 0
      fi
      ;;
    gate) ;;
    *) return 0 ;;
  esac
  if ! orbit_regular "$dir/adequacy.json" || ! state_write_file "$LOOP_DIR/adequacy.json" "$(<"$dir/adequacy.json")"$'\n'; then
    orbit_log "adequacy: the DONE's measure was not put in adequacy.json"
  fi
}

# adequacy_envelope_v N: REPLY is the envelope's adequacy member when the DONE gate measured
# the claim (adequacy = "gate"): its figures and the details' sha256; "" otherwise.
adequacy_envelope_v() {
  local dir line=''
  REPLY=''
  [[ ${ADEQUACY_SETTING:-off} == gate ]] || return 0
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$1"
  IFS= read -r line <"$dir/adequacy.figures" 2>/dev/null || return 0
  [[ $line =~ ^([0-9]+)\ ([0-9]+)\ ([0-9]+)\ ([0-9]+)\ ([0-9a-f]{64})\  ]] || return 0
  REPLY=",\"adequacy\":{\"hunks_needed\":${BASH_REMATCH[1]},\"hunks_tried\":${BASH_REMATCH[2]},\"mutants_killed\":${BASH_REMATCH[3]},\"mutants_tried\":${BASH_REMATCH[4]},\"details_sha256\":\"${BASH_REMATCH[5]}\"}"
}
