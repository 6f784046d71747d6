# ---- the workspace's setup (loop.toml `setup`): the commands that make a fresh checkout able
# ---- to run the project's checks (npm ci, a virtual environment, a generated file), run once
# ---- in each new work tree of the loop before any check runs there: the workspace, a
# ---- candidate's worktree, the clean checkout of the last check. What they create is
# ---- recorded (the untracked paths they left, per work tree) and is never part of a tree the
# ---- runner takes: never committed, never the agent's change, never a check's artifact.

# setup_paths_file_v DIR: REPLY is the runner's list of what the setup created in the work
# tree DIR (NUL-separated paths from its top; a directory ends in /).
setup_paths_file_v() {
  if [[ $1 == "$WS_MAIN" ]]; then
    REPLY=$LOOP_DIR/.setup-paths
  elif [[ $1 == "$WS_MAIN".c[0-9]* ]]; then
    REPLY=$LOOP_DIR/.setup-paths.${1##*.}
  else
    REPLY=$LOOP_DIR/.setup-paths.clean
  fi
}

# setup_specs DIR ARRAY: the pathspecs (literal, from the top) of what the setup created in
# the work tree DIR, into the array named ARRAY (none without a setup).
setup_specs() {
  local -n specs_out=$2
  local p
  specs_out=()
  ((${#SETUP_CMDS[@]})) || return 0
  setup_paths_file_v "$1"
  [[ -f $REPLY && ! -L $REPLY ]] || return 0
  while IFS= read -r -d '' p; do
    [[ -n $p ]] && specs_out+=(":(top,literal)${p%/}")
  done <"$REPLY"
}

# setup_aside_specs ARRAY: the exclude pathspecs that leave what the setup made in the work
# tree $WS out of a listing (protected sets), into the array named ARRAY.
setup_aside_specs() {
  local -n aside_out=$1
  local -a specs=()
  local p
  aside_out=()
  setup_specs "$WS" specs
  for p in "${specs[@]}"; do
    aside_out+=(":(exclude,${p#:(})")
  done
}

# setup_tree_write_v DIR INDEX: REPLY is the tree of the private index INDEX (just filled from the
# work tree DIR) without what the setup created there (a virtual environment the project does
# not ignore, say): those entries are dropped from a copy of INDEX, so INDEX keeps its stat
# cache. Status 1 when git cannot say.
setup_tree_write_v() {
  local dir=$1 idx=$2 rc=0
  local -a specs=()
  setup_specs "$dir" specs
  if ((${#specs[@]})); then
    GIT_INDEX_FILE=$idx git -C "$dir" ls-files -z -- "${specs[@]}" >"$idx.setup" 2>>"$ORBIT_LOG_FILE" || rc=1
    if ((rc == 0)) && [[ -s $idx.setup ]]; then
      cp -- "$idx" "$idx.setup" &&
        GIT_INDEX_FILE=$idx.setup git -C "$dir" rm -r -f -q --cached --ignore-unmatch -- "${specs[@]}" >/dev/null 2>>"$ORBIT_LOG_FILE" &&
        REPLY=$(GIT_INDEX_FILE=$idx.setup git -C "$dir" write-tree 2>>"$ORBIT_LOG_FILE") || rc=1
      rm -f -- "$idx.setup"
      return "$rc"
    fi
    rm -f -- "$idx.setup"
    ((rc == 0)) || return 1
  fi
  REPLY=$(GIT_INDEX_FILE=$idx git -C "$dir" write-tree 2>>"$ORBIT_LOG_FILE")
}

# setup_forget DIR: DIR is a new work tree: its setup is to be run again.
setup_forget() {
  setup_paths_file_v "$1"
  rm -f -- "$REPLY"
}

# setup_modules_checkout DIR: the submodules of the work tree DIR, checked out at the commits its
# index records, from the repository's own module objects ($GIT_COMMON_ABS/modules/NAME:
# what the user's checkout fetched), never the network: a fresh worktree has them empty. A
# module the user's checkout never initialized stays empty, and runner.log says so. What
# .gitmodules says is the tree's (the agent's) text: a name is taken only as a plain path
# under modules/, a path only where the index holds a submodule at exactly that path, and
# reached through no symlink. Each checkout is a clone the runner makes now, never one
# already there (the clean checkout's of an earlier claim, a candidate's of an earlier
# iteration): that one is a repository the checks and agents that ran there could write
# (its configuration naming a filter or a hook path, its objects, a .git file naming
# another repository), and the runner's git would obey it.
setup_modules_checkout() {
  local dir=$1 key path name src meta entry sha
  [[ -f $dir/.gitmodules && ! -L $dir/.gitmodules ]] || return 0
  while read -r key path; do
    name=${key#submodule.}
    name=${name%.path}
    [[ -n $name && -n $path && /$name/ != */../* && /$name/ != */./* && $name != /* ]] || continue
    meta='' entry=''
    IFS=$'\t' read -r -d '' meta entry < <(git -C "$dir" ls-files -s -z -- ":(top,literal)$path" 2>/dev/null || true) || true
    [[ $entry == "$path" && $meta =~ ^160000\ ([0-9a-f]{40,64})\ 0$ ]] || continue
    sha=${BASH_REMATCH[1]}
    src=$GIT_COMMON_ABS/modules/$name
    if [[ ! -f $src/HEAD || -L $src ]]; then
      orbit_log "the submodule $path is not initialized in your checkout (no $src): it stays empty in $dir; run git submodule update --init there first, or give a --setup that fetches it"
      continue
    fi
    if ! tree_path_plain "$dir" "$path"; then
      orbit_log "the submodule $path is not checked out in $dir: the path to it holds a symlink"
      continue
    fi
    rm -rf -- "${dir:?}/$path" 2>>"$ORBIT_LOG_FILE" || true
    if [[ -e $dir/$path ]]; then
      orbit_log "cannot check out the submodule $path in $dir: what is there cannot be removed (see above)"
      continue
    fi
    git -c core.hooksPath=/dev/null clone -q --no-checkout -- "$src" "$dir/$path" >>"$ORBIT_LOG_FILE" 2>&1 || {
      orbit_log "cannot check out the submodule $path in $dir from $src (see above)"
      continue
    }
    git -c core.hooksPath=/dev/null -C "$dir/$path" checkout -q -f --detach "$sha" -- >>"$ORBIT_LOG_FILE" 2>&1 ||
      orbit_log "cannot check out the submodule $path at ${sha:0:12} in $dir (is the commit in $src?)"
  done < <(git config -f "$dir/.gitmodules" --get-regexp '^submodule\..*\.path$' 2>/dev/null || true)
}
