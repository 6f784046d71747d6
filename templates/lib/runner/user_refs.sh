# ---- the user's repository outside the loop's branch (contract section 7): its branches
# ---- (every loop's orbit/* branch but none else), its stash, and the branch its
# ---- checkout is on. Nothing of the loop moves them; without the sandbox an agent can (a
# ---- branch reset with update-ref, the user's uncommitted edit stashed, the checkout
# ---- switched). Each agent and check run is looked at: a move during it stops the loop
# ---- (git_tamper, contract section 7), named with how to put it back. What moves between
# ---- runs is the user's own work, taken as it is.
USERREFS=
USERREFS_HELD=0

# user_refs_v: REPLY is the user's refs as they are: `OBJECT REF` lines, sorted, then the
# checkout's `WHERE HEAD` (the branch it is on, or the commit it is detached at). One git
# call: the checkout's HEAD is read from its file where it is one git writes plainly (a
# branch or a commit id), with git otherwise (the reftable backend).
user_refs_v() {
  local head='' line out
  out=$(git -C "$REPO_ROOT" for-each-ref --format='%(objectname) %(refname)' refs/heads refs/stash 2>/dev/null) || out=''
  REPLY=''
  while IFS= read -r line; do
    [[ -n $line && $line != *' refs/heads/orbit/'* ]] && REPLY+=$line$'\n'
  done <<<"$out"
  REPLY=${REPLY%$'\n'}
  if [[ -n $REPO_GIT_ABS && ! -e $GIT_COMMON_ABS/reftable && -f $REPO_GIT_ABS/HEAD && ! -L $REPO_GIT_ABS/HEAD ]]; then
    line=''
    IFS= read -r line <"$REPO_GIT_ABS/HEAD" 2>/dev/null || true
    if [[ $line == 'ref: refs/'* && ${line#ref: } != *[[:space:]]* ]]; then
      head=${line#ref: }
    elif [[ $line =~ ^[0-9a-f]{40}([0-9a-f]{24})?$ ]]; then
      head=$line
    fi
  fi
  if [[ -z $head ]]; then
    head=$(git -C "$REPO_ROOT" symbolic-ref -q HEAD 2>/dev/null || git -C "$REPO_ROOT" rev-parse -q --verify HEAD 2>/dev/null || true)
  fi
  REPLY+=$'\n'"$head HEAD"
}

# user_refs_check MODE: after an agent or check run (MODE agent or check), status 1 when a
# ref of the user's moved during it, with USERREFS_BAD (the ref), USERREFS_WANT and
# USERREFS_HAVE, and the fix in USERREFS_FIX; at the runner's own looks (MODE runner) the refs
# are taken as they are.
USERREFS_BAD=
USERREFS_WANT=
USERREFS_HAVE=
USERREFS_FIX=
user_refs_check() {
  local mode=$1 now line ref old new
  USERREFS_BAD=
  user_refs_v
  now=$REPLY
  if ((!USERREFS_HELD)) || [[ $mode == runner || $now == "$USERREFS" ]]; then
    USERREFS=$now USERREFS_HELD=1
    return 0
  fi
  local -A refs_was=() refs_now=()
  while IFS= read -r line; do
    ref=${line#* }
    [[ -n $ref ]] && refs_was[$ref]=${line%% *}
  done <<<"$USERREFS"
  while IFS= read -r line; do
    ref=${line#* }
    [[ -n $ref ]] && refs_now[$ref]=${line%% *}
  done <<<"$now"
  USERREFS=$now
  for ref in "${!refs_was[@]}" "${!refs_now[@]}"; do
    old=${refs_was[$ref]:-} new=${refs_now[$ref]:-}
    [[ $old == "$new" ]] && continue
    USERREFS_BAD=$ref USERREFS_WANT=${old:-absent} USERREFS_HAVE=${new:-absent}
    case $ref in
      HEAD) USERREFS_FIX="git -C '$REPO_ROOT' checkout ${old#refs/heads/}" ;;
      refs/stash) USERREFS_FIX="git -C '$REPO_ROOT' stash list, then git stash pop to take back your edit" ;;
      *) USERREFS_FIX="git -C '$REPO_ROOT' update-ref $ref $old" ;;
    esac
    [[ -z $old && $ref != refs/stash && $ref != HEAD ]] && USERREFS_FIX="git -C '$REPO_ROOT' update-ref -d $ref"
    orbit_log "your repository: during the $mode's run, $ref moved (${old:-absent} -> ${new:-absent}): nothing of the loop moves it; if you did not, $USERREFS_FIX"
    return 1
  done
  return 0
}

# user_refs_stop_msg_v FILE: REPLY is the stop's message when FILE is the user's ref that
# moved (status 1 otherwise).
user_refs_stop_msg_v() {
  [[ -n $USERREFS_BAD && $1 == "$USERREFS_BAD" ]] || return 1
  REPLY="$REASON_GIT_TAMPER: $USERREFS_BAD of your repository moved while the agent or a check ran ($USERREFS_WANT -> $USERREFS_HAVE): nothing of the loop moves it; if you did not, $USERREFS_FIX; then 'orbit recover --repin'"
}

# user_refs_project_defaults_note_v SUMMARY: REPLY is a DONE's SUMMARY with a note when the loop's
# branch changes orbit.toml, the project's defaults for orbit init (status 1 when it does
# not): merged, it would set what the user's next orbit init renders (the sandbox, a
# notification command), so it is one to review, not to take with the work.
user_refs_project_defaults_note_v() {
  local base
  base=$(cat -- "$LOOP_DIR/.baseline-commit" 2>/dev/null) || return 1
  [[ $base =~ ^[0-9a-f]{40,64}$ ]] || return 1
  config_git_q diff --quiet "$base" HEAD -- orbit.toml 2>/dev/null && return 1
  orbit_log "note: the loop's branch changes orbit.toml (the project's defaults for orbit init): review it before you merge"
  REPLY="$1 (note: the branch changes orbit.toml, the project's defaults for orbit init: review it before you merge)"
}
