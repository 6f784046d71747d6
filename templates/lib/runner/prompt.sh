# ---- the prompt
PROMPT_TEXT=
GOAL_TEXT=
PROMPT_READ=0
# prompt_part FILE TEXT: TEXT is FILE's content read earlier; a file with a NUL byte
# (which a bash string cannot hold) is copied as it is.
prompt_part() {
  if [[ $2 == $'\x01nul' ]]; then
    cat -- "$1"
  else
    printf '%s' "$2"
  fi
}
prompt_read_v() {
  REPLY=''
  if IFS= read -r -d '' REPLY <"$1"; then
    REPLY=$'\x01nul'
  fi
}
# (CLAIM_NUDGE, set by the iteration: the last iteration's checks passed but it made no
# claim; contract 6: the next prompt asks for the claim, or for what is still missing.)
# prompt_passed_without_claim N: status 0 when iteration N's record says verify passed and no
# claim was made (read with bash alone; a record that is not a regular file says no).
prompt_passed_without_claim() {
  local d line v='' c=''
  printf -v d '%s/iterations/%06d/result.env' "$LOOP_DIR" "$1"
  [[ -f $d && ! -L $d ]] || return 1
  while IFS= read -r line || [[ -n $line ]]; do
    case $line in
      VERIFY=*) v=${line#VERIFY=} ;;
      DONE_CLAIM=*) c=${line#DONE_CLAIM=} ;;
    esac
  done <"$d"
  [[ $v == "$VERIFY_PASS" && $c == 0 ]]
}
prompt_build() {
  local n=$1 phase=$2 attempt=$3 out=$4 fb=$5 remaining
  if [[ -n $USD_CAP_M ]]; then
    remaining="\$$(orbit_usd_text $((USD_CAP_M > S[COST_MICROUSD] ? USD_CAP_M - S[COST_MICROUSD] : 0))) of \$$(orbit_usd_text "$USD_CAP_M")"
  else
    remaining="no spending cap (spent so far: \$$(orbit_usd_text "${S[COST_MICROUSD]}"))"
  fi
  # prompt.md and goal.md are pinned (a change stops the loop before the next agent
  # run), so they are read once per run.
  if ((!PROMPT_READ)); then
    prompt_read_v "$LOOP_DIR/prompt.md"
    PROMPT_TEXT=$REPLY
    prompt_read_v "$LOOP_DIR/goal.md"
    GOAL_TEXT=$REPLY
    PROMPT_READ=1
  fi
  {
    prompt_part "$LOOP_DIR/prompt.md" "$PROMPT_TEXT"
    printf '\n---\n\n# The goal (goal.md)\n\n'
    prompt_part "$LOOP_DIR/goal.md" "$GOAL_TEXT"
    printf '\n---\n\n# This run\n\n'
    printf -- '- Iteration %s of at most %s; attempt %s of %s; phase: %s.\n' "$n" "$MAX_ITERATIONS" "$attempt" "$RETRY_LIMIT" "$phase"
    printf -- '- Budget: %s.\n' "$remaining"
    if [[ $MEMORY_SETTING == feedback ]]; then
      printf -- '- Your folder: .orbit-agent/ (goal.md, verify.sh%s; never committed)\n' "${fb:+, feedback.json, feedback.txt, last-verify.log}"
    else
      printf -- '- Your folder: .orbit-agent/ (goal.md, progress.md, notes.md%s; never committed)\n' "${fb:+, feedback.json, feedback.txt, last-verify.log}"
    fi
    case $phase in
      "$PHASE_CONFIRM")
        printf '\n# Your task: confirm, from a fresh context\n\n'
        printf 'The previous run claimed the goal is DONE and the checks pass. Check every acceptance\n'
        printf 'criterion against the repository as it is now. Change nothing in the repository.\n'
        printf 'Then write your verdict into .orbit-agent/confirm.md; its first line is exactly one of:\n\n'
        printf '    CONFIRMED\n'
        printf '    NOT CONFIRMED: <what is missing or wrong, in one line>\n\n'
        printf 'Anything else, no file, or a change to the repository is taken as NOT CONFIRMED.\n'
        ;;
      "$PHASE_WRAPUP")
        printf '\n# Your task: wrap up\n\n'
        printf 'The loop has used all of its iterations without reaching DONE. Do not change the\n'
        printf 'project. Write into .orbit-agent/notes.md what remains to be done, what blocked progress,\n'
        printf 'and what a human should look at first.\n'
        ;;
    esac
    if [[ -n $fb && -f $fb ]]; then
      printf '\n# Feedback: what failed last\n\n'
      if [[ -f ${fb%.json}.txt ]]; then
        cat -- "${fb%.json}.txt"
      fi
      if [[ -f ${fb%/*}/input-verify.log ]]; then
        printf '\nThe full output of that verify run is in .orbit-agent/last-verify.log.\n'
      fi
    fi
    sandbox_net_prompt_note "$n"
    if [[ $phase == "$PHASE_WORK" ]] && ((CLAIM_NUDGE)); then
      printf '\n# The checks pass\n\n'
      printf 'After the last iteration every check passed, but no DONE claim was made. If every\n'
      printf 'acceptance criterion holds, write .orbit-agent/done.md with the evidence for each.\n'
      if [[ $MEMORY_SETTING == feedback ]]; then
        printf 'If not, work on what is still missing.\n'
      else
        printf 'If not, write in .orbit-agent/notes.md what is still missing, and work on it.\n'
      fi
    fi
    # The earlier failures are memory too: memory = "feedback" gives only the last one.
    if [[ $MEMORY_SETTING != feedback && -s $LOOP_DIR/.failures.log ]]; then
      printf '\n# Earlier distinct failures (do not retry what already failed)\n\n'
      tail -n 10 -- "$LOOP_DIR/.failures.log" | cut -f2- | sed 's/^/- /'
    fi
  } >"$out"
}

# REPLY: the feedback of the latest failed verify before iteration N (a JSON file), if any.
prompt_last_feedback_v() {
  local n=$1 i d
  REPLY=''
  for ((i = n - 1; i >= 1 && i >= n - 3; i--)); do
    printf -v d '%s/iterations/%06d' "$LOOP_DIR" "$i"
    if [[ -f $d/result.env ]]; then
      if [[ -f $d/feedback.json ]]; then
        REPLY=$d/feedback.json
      fi
      return 0
    fi
  done
}
