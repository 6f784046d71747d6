# ---- the runner's workspace: found, created, kept on the loop's branch (lib/workspace.sh:
# ---- where it is).
# The workspace's git directory, and whether its commits need the porcelain (hooks to run,
# a signature to make).
GIT_DIR_ABS=
COMMIT_PLUMBING=0
# The repository's hooks directory as git resolved it at the run's start (core.hooksPath, or
# the git directory's hooks/): the checks run its pre-commit and commit-msg hooks, in the
# sandbox (commit_hooks_check); "" with commit-hooks off.
COMMIT_HOOKS_DIR=

# workspace_path_v: REPLY is the workspace's absolute path: the state's once the loop ran,
# else loop.toml's `workspace` (relative to the repository root), else the default under
# the user's data directory (lib/workspace.sh). Refused when it is inside the loop directory
# or holds it.
workspace_path_v() {
  local p=${S[WORKSPACE]:-}
  if [[ -z $p ]]; then
    workspace_setting_path_v "$WORKSPACE_SETTING" "$LOOP_NAME" "$REPO_ROOT" || preflight_fail "$REPLY"
    p=$REPLY
  fi
  # Without . and .. segments, so that the containment tests below mean what they say.
  if [[ /$p/ == */./* || /$p/ == */../* ]]; then
    preflight_fail "the workspace path $p has a . or .. segment: give it plainly in loop.toml (workspace = ...)"
  fi
  p=${p%/}
  if [[ $p == "$LOOP_DIR" || $p == "$LOOP_DIR"/* ]]; then
    preflight_fail "the workspace $p is inside the loop directory: set workspace in loop.toml to a path outside it"
  fi
  if [[ $LOOP_DIR == "$p"/* ]]; then
    preflight_fail "the loop directory is inside the workspace $p: set workspace in loop.toml to a path outside it"
  fi
  REPLY=$p
}

# workspace_not_git: the preflight stops on a workspace git takes for no worktree, naming
# the cause where its .git file tells it: a git directory that is gone, as a repository
# deleted and made again at the same path leaves its old workspace.
workspace_not_git() {
  local gd=''
  [[ -f $WS/.git && ! -L $WS/.git ]] && IFS= read -r gd <"$WS/.git"
  gd=${gd#gitdir: }
  [[ -z $gd || $gd == /* ]] || gd=$WS/$gd
  [[ -n $gd && ! -e $gd ]] &&
    preflight_fail "the workspace $WS is not a git worktree: its .git names ${gd//[[:cntrl:]]/?}, which is gone (a repository deleted and made again at this path leaves it so); move the workspace away (it may hold uncommitted work), then run the loop again (orbit recover says the same)"
  preflight_fail "the workspace $WS is not a git worktree: run orbit recover to recreate it"
}

# workspace_git_facts: the workspace's git directory (its HEAD, index and in-progress
# operations), whether commits need the porcelain (a signature to make), the hooks the
# checks run (COMMIT_HOOKS_DIR), and no rebase or merge left half-done in it.
workspace_git_facts() {
  local out f hooks rel off=0
  local -a facts=()
  out=$(config_git_q rev-parse --absolute-git-dir --git-path hooks 2>/dev/null) || workspace_not_git
  mapfile -t facts <<<"$out"
  GIT_DIR_ABS=${facts[0]} hooks=${facts[1]-}
  if [[ $hooks != /* ]]; then
    rel=$(config_git_q config --get core.hooksPath 2>/dev/null || true)
    hooks=$WS/$hooks
    # A relative core.hooksPath is the work tree's own. The hooks are your checkout's, as
    # git there runs them (an install step such as husky's made them there): never the
    # workspace's, which the agent writes; a fresh workspace may lack the directory besides.
    if [[ -n $rel && $rel != /* && $rel != '~'* && -d $REPO_ROOT/$rel ]]; then
      hooks=$REPO_ROOT/$rel
      if [[ ! -f $LOOP_DIR/.hooks-noted ]]; then
        orbit_log "core.hooksPath is $rel (relative): the checks run the hooks of your checkout ($hooks), as git does there, never the workspace's"
        : >"$LOOP_DIR/.hooks-noted"
      fi
    fi
  fi
  # The repository's hooks run as checks, in the sandbox (commit_hooks_check), never in the
  # runner's own commit: that one is made with plumbing, or with the porcelain (for a
  # signature) told to run no hook. With commit-hooks off none runs at all.
  COMMIT_PLUMBING=1 COMMIT_HOOKS_DIR=
  for f in pre-commit prepare-commit-msg commit-msg post-commit; do
    if [[ -x $hooks/$f ]]; then
      if orbit_true "$COMMIT_HOOKS"; then
        COMMIT_HOOKS_DIR=$hooks
      elif ((!off)); then
        # No hook runs, said at each start.
        orbit_log "commit-hooks is off: the loop's commits run none of the repository's hooks ($f and the others in $hooks)"
        off=1
      fi
    fi
  done
  if [[ $(config_git_q config --bool --get commit.gpgsign 2>/dev/null || true) == true ]]; then
    COMMIT_PLUMBING=0
  fi
  for f in rebase-merge rebase-apply MERGE_HEAD CHERRY_PICK_HEAD REVERT_HEAD BISECT_LOG; do
    if [[ -e $GIT_DIR_ABS/$f ]]; then
      preflight_fail "a git operation is in progress in the workspace $WS ($f): finish or abort it there first"
    fi
  done
}

# workspace_exclude: the agent's folder (and a workspace kept inside the user's checkout)
# is never part of anyone's tree: one line each in the repository's info/exclude, which
# every worktree reads (the folder's without a trailing slash: git then matches it whatever
# stands there, a directory, a link or a file; the snapshot leaves it out besides: tree_add). Added once, never duplicated. What the engine keeps at the root of
# the workspace (aider's repository-map cache) stays out too (engine_workspace_excludes).
workspace_exclude() {
  local ex="$GIT_COMMON_ABS/info/exclude" line want have=$'\n'
  local -a wants=('/.orbit-agent')
  engine_workspace_excludes wants
  # Workspaces where orbit puts them by default share one line (another loop's first run
  # then finds it there and writes nothing: a write to info/exclude while this loop's agent
  # runs would be a git_tamper of this loop's).
  if [[ $WS == "$REPO_ROOT/.orbit/.workspaces/"* ]]; then
    wants+=("/.orbit/.workspaces/")
  elif [[ $WS == "$REPO_ROOT"/* ]]; then
    wants+=("/${WS#"$REPO_ROOT"/}/")
  fi
  if [[ -f $ex ]]; then
    while IFS= read -r line || [[ -n $line ]]; do have+="$line"$'\n'; done <"$ex"
  fi
  for want in "${wants[@]}"; do
    if [[ $have != *$'\n'"$want"$'\n'* ]]; then
      mkdir -p -- "${ex%/*}"
      if [[ -s $ex && $(tail -c 1 -- "$ex") != '' ]]; then printf '\n' >>"$ex"; fi
      printf '%s\n' "$want" >>"$ex" ||
        preflight_fail "cannot write $ex (to keep the agent's folder out of every commit)"
      have+="$want"$'\n'
    fi
  done
}

# workspace_lfs_hint_v: REPLY is what to do when the last git checkout failed in git-lfs's
# smudge filter (a pointer-only clone: the LFS objects are not in this repository), else "".
workspace_lfs_hint_v() {
  REPLY=''
  if tail -n 40 -- "$ORBIT_LOG_FILE" 2>/dev/null | grep -q 'smudge filter lfs failed'; then
    REPLY=": the LFS objects are not in this repository (a pointer-only clone?). Run git lfs pull in your checkout, or set GIT_LFS_SKIP_SMUDGE=1 in the loop's environment to work with the pointer files"
  fi
}

# workspace_add COMMIT_OR_BRANCH: a new worktree at WS on LOOP_BRANCH, locked against
# `git worktree prune` while the loop exists.
workspace_add() {
  local try
  mkdir -p -- "${WS%/*}"
  # Another git of this repository (another loop making its worktree, a commit) may hold a
  # lock for a moment: a failed add that left nothing is tried again, three times in all.
  for try in 1 2 3; do
    if config_repo_git rev-parse --verify -q "refs/heads/$LOOP_BRANCH" >/dev/null; then
      config_repo_git worktree add -q --lock --reason "orbit loop $LOOP_DIR" -- "$WS" "$LOOP_BRANCH" >>"$ORBIT_LOG_FILE" 2>&1 && return 0
    else
      config_repo_git worktree add -q --lock --reason "orbit loop $LOOP_DIR" -b "$LOOP_BRANCH" -- "$WS" "$1" >>"$ORBIT_LOG_FILE" 2>&1 && return 0
    fi
    # One that failed checking the files out (an LFS object missing) leaves a worktree
    # behind: it goes, so that the next start, the cause fixed, makes it anew.
    if [[ -f $WS/.git ]]; then
      config_repo_git worktree remove -f -f -- "$WS" >>"$ORBIT_LOG_FILE" 2>&1 || true
      workspace_lfs_hint_v
      [[ -z $REPLY ]] || return 1
    fi
    [[ ! -e $WS && $try != 3 ]] || return 1
    orbit_log "git worktree add failed (try $try of 3; see above): trying again"
    sleep 1
  done
  return 1
}

# workspace_ensure: at every start after the first, the workspace is there, a worktree of
# this repository, on the loop branch. One deleted by hand is recreated from the branch (the
# loop goes on, and the journal says so); a loop branch moved by hand (its recorded head is
# no longer in its history) stops the run rather than be committed over.
workspace_ensure() {
  local head want
  # In a fresh clone (a loop carried to another machine) the repository's info/exclude
  # is new: the agent's folder is kept out of every commit there too.
  workspace_exclude
  if [[ ! -e $WS/.git ]]; then
    if [[ -e $WS && -n $(ls -A -- "$WS" 2>/dev/null) ]]; then
      preflight_fail "the workspace $WS exists but is not a git worktree: move it away, then rerun (the loop recreates it from $LOOP_BRANCH)"
    fi
    config_repo_git rev-parse --verify -q "refs/heads/$LOOP_BRANCH" >/dev/null ||
      preflight_fail "the workspace $WS and the loop branch $LOOP_BRANCH are both gone: run orbit recover"
    rmdir -- "$WS" 2>/dev/null || true
    # Its registration is locked (so that prune keeps a live loop's workspace): this one
    # registration goes (-f -f: missing and locked). Never a `git worktree prune`, which
    # could take another loop's workspace while that one is being added.
    config_repo_git worktree remove -f -f -- "$WS" 2>>"$ORBIT_LOG_FILE" || true
    if ! workspace_add "$LOOP_BRANCH"; then
      workspace_lfs_hint_v
      preflight_fail "cannot recreate the workspace $WS from $LOOP_BRANCH (see runner.log)$REPLY"
    fi
    setup_forget "$WS"
    setup_modules_checkout "$WS"
    orbit_log "the workspace $WS was missing: recreated from $LOOP_BRANCH"
    state_event workspace_recreated "${S[NEXT_ITERATION]}" path "$WS" branch "$LOOP_BRANCH"
  fi
  workspace_git_facts
  workspace_ws_on_branch || workspace_head_restore "start"
  if [[ -f $LOOP_DIR/.branch-head ]]; then
    want=$(<"$LOOP_DIR/.branch-head")
    head=$(config_git_q rev-parse --verify -q "refs/heads/$LOOP_BRANCH" 2>/dev/null || true)
    if [[ -n $want && $head != "$want" ]] && ! config_git_q merge-base --is-ancestor "$want" "$head" 2>/dev/null; then
      config_footer "$STATUS_CONTINUE" "the loop branch $LOOP_BRANCH was moved by hand: run orbit audit, then orbit recover"
      orbit_log "error: the loop branch $LOOP_BRANCH was moved by hand: it was at ${want:0:12}, it is at ${head:0:12}, which does not contain it. To go on from where it is now, run 'orbit recover $LOOP_DIR'; to undo the move, 'git branch -f $LOOP_BRANCH $want'"
      state_event branch_moved "${S[NEXT_ITERATION]}" expected "$want" actual "$head"
      notify_stop_early "$NOTIFY_EVENT_PREFLIGHT_FAILED" "the loop branch $LOOP_BRANCH was moved by hand"
      lock_release
      exit "$EXIT_PREFLIGHT"
    fi
  fi
}

# workspace_head_restore WHEN: the workspace's HEAD names the loop branch again (an agent
# that checked out another branch or detached HEAD never makes the loop commit there). The
# work tree is left as it is: whatever it holds is the agent's change, judged as such.
workspace_head_restore() {
  local cur
  cur=$(config_git_q symbolic-ref -q --short HEAD 2>/dev/null || config_git_q rev-parse --short HEAD 2>/dev/null || true)
  orbit_log "the workspace's HEAD is on '${cur:-?}', not the loop branch $LOOP_BRANCH ($1): pointing it back (the work tree is kept)"
  state_event workspace_head_moved "$CUR_ITER" when "$1" found "${cur:-?}"
  config_git_q symbolic-ref -m "orbit: back to the loop branch" HEAD "refs/heads/$LOOP_BRANCH" 2>>"$ORBIT_LOG_FILE" ||
    orbit_die "$EXIT_PREFLIGHT" "cannot point the workspace's HEAD back to $LOOP_BRANCH"
  commit_forget_last
}

# workspace_ws_on_branch: status 0 when the workspace's HEAD names the loop branch, read from the file
# git keeps it in (no process: this is asked after every agent run).
workspace_ws_on_branch() {
  local line=''
  IFS= read -r line <"$GIT_DIR_ABS/HEAD" 2>/dev/null || true
  [[ $line == "ref: refs/heads/$LOOP_BRANCH" ]]
}

# workspace_branch_head_record [COMMIT]: the loop branch's head as the loop left it (COMMIT, the one it
# just made, or git's answer), kept to tell a move by hand from the loop's own commits and
# the agent's, which only add to it. Not synced: one lost on a crash leaves an older head,
# still in the branch's history.
workspace_branch_head_record() {
  local head=${1:-}
  if [[ -z $head ]]; then
    head=$(config_git_q rev-parse --verify -q "refs/heads/$LOOP_BRANCH" 2>/dev/null || true)
  fi
  if [[ -n $head ]]; then
    { printf '%s\n' "$head" >"$LOOP_DIR/.branch-head.tmp" &&
      state_mv "$LOOP_DIR/.branch-head.tmp" "$LOOP_DIR/.branch-head"; } ||
      orbit_die "$EXIT_STATE_CORRUPT" "cannot write $LOOP_DIR/.branch-head"
  fi
}
