# ---- first run: start time, pins and the workspace.
# Each step is done once: a crash in here and a rerun must not re-pin a goal the agent may
# have changed since. The workspace starts from the user's HEAD commit: their uncommitted
# work is neither seen by the agent nor committed (no dirty baseline is needed).
first_run_setup() {
  local branch base tip
  printf -v 'S[STARTED_AT]' '%(%s)T' -1
  if [[ -f $LOOP_DIR/.baseline-commit ]]; then
    base=$(<"$LOOP_DIR/.baseline-commit")
  else
    base=$(config_repo_git rev-parse HEAD)
  fi
  # A loop branch an earlier loop of the same name left is not this loop's: its commits
  # would be taken for a fresh start. Only one at this loop's base (made by this first run
  # before a crash) is.
  tip=$(config_repo_git rev-parse --verify -q "refs/heads/$LOOP_BRANCH" 2>/dev/null || true)
  if [[ -n $tip && $tip != "$base" ]]; then
    preflight_fail "the branch $LOOP_BRANCH exists already (an earlier loop's?) and is not at the commit this loop starts from: merge what you want of it, delete it (git branch -D $LOOP_BRANCH), then rerun; or render this loop under another name (orbit init --dir .orbit/OTHER)"
  fi
  if [[ ! -f $LOOP_DIR/.baseline-commit ]]; then
    config_repo_git symbolic-ref --short -q HEAD >"$LOOP_DIR/.origin-branch" || true
    printf '%s\n' "$base" >"$LOOP_DIR/.baseline-commit.tmp"
    mv -f -- "$LOOP_DIR/.baseline-commit.tmp" "$LOOP_DIR/.baseline-commit"
  fi
  branch=$(cat -- "$LOOP_DIR/.origin-branch" 2>/dev/null || true)
  if ! state_check_value ORIGIN_BRANCH "$branch"; then
    orbit_log "the starting branch '$branch' is not a plain ref name: not recorded"
    branch=''
  fi
  S[ORIGIN_BRANCH]=$branch
  S[ITER_BRANCH]=$LOOP_BRANCH
  S[WORKSPACE]=$WS
  workspace_exclude
  if [[ ! -e $WS/.git ]]; then
    if [[ -e $WS && -n $(ls -A -- "$WS" 2>/dev/null) ]]; then
      preflight_fail "the workspace path $WS exists and is not empty: set workspace in loop.toml to a new path, or move it away"
    fi
    rmdir -- "$WS" 2>/dev/null || true
    if ! workspace_add "$base"; then
      workspace_lfs_hint_v
      preflight_fail "cannot create the workspace $WS on $LOOP_BRANCH (see runner.log)${REPLY:-: is the branch checked out elsewhere?}"
    fi
    setup_forget "$WS"
    setup_modules_checkout "$WS"
    orbit_log "workspace $WS on branch $LOOP_BRANCH (from ${branch:-a detached HEAD} at ${base:0:12})"
    state_event workspace_created "${S[NEXT_ITERATION]}" path "$WS" branch "$LOOP_BRANCH" base "$base"
  fi
  workspace_git_facts
  workspace_ws_on_branch || workspace_head_restore "first run"
  if [[ ! -f $LOOP_DIR/.baseline-tree ]]; then
    trust_first_run_pins
    config_git_q rev-parse "HEAD^{tree}" >"$LOOP_DIR/.baseline-tree.tmp"
    mv -f -- "$LOOP_DIR/.baseline-tree.tmp" "$LOOP_DIR/.baseline-tree"
  fi
  workspace_branch_head_record
}
