# ---- the user's repository outside the loop's branch (contract section 7): its branches and
# ---- tags (every loop's orbit/* branch but none else), its stash, and the branch its
# ---- checkout is on. Nothing of the loop moves them; without the sandbox an agent can (a
# ---- branch reset with update-ref, the user's uncommitted edit stashed, the checkout
# ---- switched). Each agent and check run is looked at: what moved during it is named in
# ---- the log ("your repository: ..."), in the stop's message and by the audit (GIT_TAMPER,
# ---- P1), with how to put it back. What moves between runs is the user's own work, taken
# ---- as it is (the user keeps working while the loop runs). USERREFS_NOTES holds what
# ---- moved, for the stop.
USERREFS=
USERREFS_HELD=0
USERREFS_NOTES=

# userrefs_v: REPLY is the user's refs as they are: `OBJECT REF` lines, sorted, then the
# checkout's `WHERE HEAD` (the branch it is on, or the commit it is detached at).
userrefs_v() {
  local head
  REPLY=$(git -C "$REPO_ROOT" for-each-ref --format='%(objectname) %(refname)' refs/heads refs/tags refs/stash 2>/dev/null |
    grep -v ' refs/heads/orbit/' || true)
  head=$(git -C "$REPO_ROOT" symbolic-ref -q HEAD 2>/dev/null || git -C "$REPO_ROOT" rev-parse -q --verify HEAD 2>/dev/null || true)
  REPLY+=$'\n'"$head HEAD"
}

# userrefs_check MODE: after an agent or check run (MODE agent or check), what of the user's
# refs moved during it is named (the log, USERREFS_NOTES); at the runner's own looks
# (MODE runner) the refs are taken as they are. Never stops the run.
userrefs_check() {
  local mode=$1 now line ref old new what fix
  userrefs_v
  now=$REPLY
  if ((!USERREFS_HELD)) || [[ $mode == runner || $now == "$USERREFS" ]]; then
    USERREFS=$now USERREFS_HELD=1
    return 0
  fi
  local -A before=() after=()
  while IFS= read -r line; do
    [[ -n $line ]] && before[${line#* }]=${line%% *}
  done <<<"$USERREFS"
  while IFS= read -r line; do
    [[ -n $line ]] && after[${line#* }]=${line%% *}
  done <<<"$now"
  for ref in "${!before[@]}" "${!after[@]}"; do
    old=${before[$ref]:-} new=${after[$ref]:-}
    [[ $old == "$new" || -z ${before[$ref]+x}${after[$ref]+x} ]] && continue
    unset 'before[$ref]' 'after[$ref]'
    case $ref in
      HEAD)
        what="your checkout ($REPO_ROOT) moved from ${old:-nothing} to ${new:-nothing}"
        fix="git -C '$REPO_ROOT' checkout ${old#refs/heads/}"
        ;;
      refs/stash)
        what="a stash was made or dropped (refs/stash ${old:0:12} -> ${new:0:12})"
        fix="git -C '$REPO_ROOT' stash list, then git stash pop to take back your edit"
        ;;
      *)
        if [[ -z $old ]]; then
          what="$ref was created at ${new:0:12}"
          fix="git -C '$REPO_ROOT' update-ref -d $ref"
        elif [[ -z $new ]]; then
          what="$ref was deleted (it was at ${old:0:12})"
          fix="git -C '$REPO_ROOT' update-ref $ref $old"
        else
          what="$ref moved from ${old:0:12} to ${new:0:12}"
          fix="git -C '$REPO_ROOT' update-ref $ref $old"
        fi
        ;;
    esac
    orbit_log "your repository: during the $mode's run, $what: if you did not, $fix"
    USERREFS_NOTES+="${USERREFS_NOTES:+; }$what"
  done
  USERREFS=$now
}

# userrefs_summary_v SUMMARY: REPLY is the stop's SUMMARY with what of the user's repository
# moved during this run's agent and check runs (status 1 when nothing did).
userrefs_summary_v() {
  [[ -n $USERREFS_NOTES ]] || return 1
  REPLY="$1 (your repository changed while the agent or a check ran: $USERREFS_NOTES; runner.log says how to put it back)"
}

# project_defaults_note_v SUMMARY: REPLY is a DONE's SUMMARY with a note when the loop's
# branch changes orbit.toml, the project's defaults for orbit init (status 1 when it does
# not): merged, it would set what the user's next orbit init renders (the sandbox, a
# notification command), so it is one to review, not to take with the work.
project_defaults_note_v() {
  local base
  base=$(cat -- "$LOOP_DIR/.baseline-commit" 2>/dev/null) || return 1
  [[ $base =~ ^[0-9a-f]{40,64}$ ]] || return 1
  git_q diff --quiet "$base" HEAD -- orbit.toml 2>/dev/null && return 1
  orbit_log "note: the loop's branch changes orbit.toml (the project's defaults for orbit init): review it before you merge"
  REPLY="$1 (note: the branch changes orbit.toml, the project's defaults for orbit init: review it before you merge)"
}
