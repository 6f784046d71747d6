# ---- the tree: a snapshot of the workspace (minus the agent's folder and what the setup
# ---- made) as a git tree id,
# ---- into REPLY: the one notion of "the agent's change" (commit, stall and oscillation
# ---- signature, placeholder scan, "the tree changed"). A private index kept in the loop
# ---- directory (seeded from the workspace's, with its mtime, so git's stat cache and
# ---- racy-entry checks carry over) means each snapshot re-reads only what changed.
tree_snapshot() {
  local idx="$LOOP_DIR/.tree-index"
  if [[ ! -f $idx && -f $GIT_DIR_ABS/index ]]; then
    cp -p -- "$GIT_DIR_ABS/index" "$idx"
  fi
  # A snapshot that fails is an error, never a silently stale tree (git says why in the log).
  # The agent's folder stays out through info/exclude (an exclude pathspec naming an ignored
  # path makes git add fail).
  if ! tree_at_v "$WS" "$idx"; then
    # Whatever context called it (a condition turns errexit off), the run stops here as on
    # any failed command: a full disk or a file-size limit named, else an internal error.
    stop_internal_error "$LINENO" "the workspace's snapshot into $idx (git says why above)" 1
  fi
}

# tree_add DIR INDEX: `git add -A` of the work tree DIR into the private index INDEX, each
# submodule INDEX holds taken as the commit its checkout is at. git add runs git status in
# every checked-out submodule it holds an entry for, and that status obeys the submodule's
# own configuration, which lives in the work tree (the agent's and the checks' to write): a
# filter named there would run as the runner. So git add passes those entries by (marked
# skip-worktree while it runs), and each is then read as git reads a submodule it adds, never
# looked into: the commit its checkout is at; as it was when not checked out (an empty
# directory); gone, or the file now there, otherwise. Status 1 when git fails.
tree_add() {
  local dir=$1 idx=$2 line p rc=0
  local -a links=() update=() gone=()
  while IFS= read -r -d '' line; do
    links+=("${line#*$'\t'}")
  done < <(GIT_INDEX_FILE=$idx git -C "$dir" ls-files -s -t -z -- 2>>"$ORBIT_LOG_FILE" | LC_ALL=C grep -z '^H 160000 ' || true)
  if ((${#links[@]})); then
    printf '%s\0' "${links[@]}" |
      GIT_INDEX_FILE=$idx GIT_OPTIONAL_LOCKS=0 git -C "$dir" update-index --skip-worktree -z --stdin 2>>"$ORBIT_LOG_FILE" || return 1
  fi
  GIT_INDEX_FILE=$idx GIT_OPTIONAL_LOCKS=0 git -C "$dir" add -A -- . >/dev/null 2>>"$ORBIT_LOG_FILE" || rc=1
  # The agent's folder never enters a tree, whatever stands there (a link, a file: a loop
  # made before its exclude line matched any type has `/.orbit-agent/`, a directory's only).
  GIT_INDEX_FILE=$idx GIT_OPTIONAL_LOCKS=0 git -C "$dir" rm -r -q -f --cached --ignore-unmatch -- \
    ':(literal).orbit-agent' >/dev/null 2>>"$ORBIT_LOG_FILE" || rc=1
  ((${#links[@]})) || return "$rc"
  printf '%s\0' "${links[@]}" |
    GIT_INDEX_FILE=$idx GIT_OPTIONAL_LOCKS=0 git -C "$dir" update-index --no-skip-worktree -z --stdin 2>>"$ORBIT_LOG_FILE" || return 1
  ((rc == 0)) || return 1
  for p in "${links[@]}"; do
    if ! tree_path_plain "$dir" "$p"; then
      gone+=("$p")
    elif [[ -e $dir/$p/.git || ! -d $dir/$p ]]; then
      update+=("$p")
    fi
  done
  if ((${#gone[@]})); then
    printf '%s\0' "${gone[@]}" |
      GIT_INDEX_FILE=$idx GIT_OPTIONAL_LOCKS=0 git -C "$dir" update-index --force-remove -z --stdin 2>>"$ORBIT_LOG_FILE" || return 1
  fi
  ((${#update[@]})) || return 0
  printf '%s\0' "${update[@]}" |
    GIT_INDEX_FILE=$idx GIT_OPTIONAL_LOCKS=0 git -C "$dir" update-index --add --remove -z --stdin 2>>"$ORBIT_LOG_FILE"
}

# tree_path_plain DIR PATH: no component of PATH (relative, /-separated) under DIR is a symlink.
tree_path_plain() {
  local at=$1 part
  local -a parts=()
  IFS=/ read -r -a parts <<<"$2"
  for part in "${parts[@]}"; do
    at+=/$part
    [[ ! -L $at ]] || return 1
  done
}

# Changed paths between two trees, NUL-separated.
tree_changes() {
  config_git_q diff --no-renames --name-only -z "$1" "$2" -- 2>/dev/null || true
}

# tree_changes_v BEFORE AFTER: CHANGES_FILE lists the changed paths (NUL-separated, computed
# once per pair of trees), CHANGES_COUNT counts them, and REPLY is the first 20 of them on
# one line, cleaned for the record.
CHANGES_KEY=
CHANGES_FILE=
CHANGES_COUNT=0
CHANGES_SHOWN=
tree_changes_v() {
  local LC_ALL=C
  local -a names=()
  if [[ $CHANGES_KEY != "$1 $2" ]]; then
    CHANGES_FILE="$ORBIT_TMP/changes.z"
    tree_changes "$1" "$2" >"$CHANGES_FILE"
    mapfile -d '' -t names <"$CHANGES_FILE"
    CHANGES_COUNT=${#names[@]}
    CHANGES_SHOWN="${names[*]:0:20}"
    # Names are bytes: only what is not printable ASCII needs the cleaning process.
    if [[ $CHANGES_SHOWN == *[![:print:]]* ]]; then
      CHANGES_SHOWN=$(printf '%s' "$CHANGES_SHOWN" | tr '\n' ' ' | orbit_clean_text)
    fi
    CHANGES_KEY="$1 $2"
  fi
  REPLY=$CHANGES_SHOWN
}

# tree_at_v DIR INDEX: REPLY is the work tree DIR (a worktree of this repository; the agent's
# folder excluded as in the workspace) as a git tree id, through the private index INDEX,
# git run with DIR's git directory as tree_gitdir_v proves it. Status 1 when git cannot say.
tree_at_v() {
  tree_gitdir_v "$1" || return 1
  local -x GIT_DIR=$REPLY GIT_WORK_TREE=$1
  tree_add "$1" "$2" || return 1
  setup_tree_write_v "$1" "$2"
}

# tree_gitdir_v DIR: REPLY is the git directory of the work tree DIR for the runner's git,
# never one a `.git` there names unproven (a check can put a repository of its own there,
# whose configuration names a program git runs: a filter, say): the workspace's, the clean
# checkout's as proven when it was made, or one whose .git file names a worktree directory
# of this repository that names it back. Status 1 else.
tree_gitdir_v() {
  local line=''
  case $1 in
    "$WS_MAIN") REPLY=$GIT_DIR_ABS ;;
    "$WS_MAIN.clean") REPLY=$CLEAN_GD ;;
    *)
      [[ ! -f $1/.git || -L $1/.git ]] || IFS= read -r line <"$1/.git" 2>/dev/null || true
      REPLY=${line#gitdir: }
      [[ $REPLY == "$GIT_COMMON_ABS/worktrees/"* && $REPLY != */../* && -d $REPLY && ! -L $REPLY ]] || return 1
      line=''
      IFS= read -r line <"$REPLY/gitdir" 2>/dev/null || true
      [[ $line -ef $1/.git ]] || return 1
      ;;
  esac
  [[ -n $REPLY ]]
}

# tree_index_of_v DIR: REPLY is the private index the runner snapshots the work tree DIR
# with: the workspace's own, a candidate's, or the clean checkout's; under VERIFY_SCRATCH
# (a look while other runs go on, which must write nothing of the loop directory) its own.
tree_index_of_v() {
  if [[ -n $VERIFY_SCRATCH ]]; then
    REPLY=$VERIFY_SCRATCH/index
  elif [[ $1 == "$WS_MAIN" ]]; then
    REPLY=$LOOP_DIR/.tree-index
  elif [[ $1 == "$WS_MAIN".c[0-9]* ]]; then
    REPLY=$LOOP_DIR/.tree-index.${1##*.}
  else
    REPLY=$LOOP_DIR/.tree-index.clean
  fi
}

# tree_here_v: REPLY is the tree of the work tree the next run happens in ($WS).
tree_here_v() {
  if [[ $WS == "$WS_MAIN" && -z $VERIFY_SCRATCH ]]; then
    tree_snapshot
    return 0
  fi
  tree_index_of_v "$WS"
  tree_at_v "$WS" "$REPLY"
}
