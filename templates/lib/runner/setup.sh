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

# setup_clean_args DIR ARRAY: `git clean -e` patterns that keep what the setup made in the work
# tree DIR, into the array named ARRAY.
setup_clean_args() {
  local -n clean_out=$2
  local p
  clean_out=()
  ((${#SETUP_CMDS[@]})) || return 0
  setup_paths_file_v "$1"
  [[ -f $REPLY && ! -L $REPLY ]] || return 0
  while IFS= read -r -d '' p; do
    [[ -n $p ]] || continue
    # As an ignore pattern: anchored, its wildcards taken literally.
    p=${p//\\/\\\\}
    p=${p//\*/\\*}
    p=${p//\?/\\?}
    p=${p//\[/\\[}
    clean_out+=(-e "/$p")
  done <"$REPLY"
}

# tree_write_v DIR INDEX: REPLY is the tree of the private index INDEX (just filled from the
# work tree DIR) without what the setup created there (a virtual environment the project does
# not ignore, say): those entries are dropped from a copy of INDEX, so INDEX keeps its stat
# cache. Status 1 when git cannot say.
tree_write_v() {
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

# setup_record DIR: what the setup left untracked in the work tree DIR (ignored or not; a
# directory as one entry) that was not there before it (ORBIT_TMP's setup.before: a workspace
# set up after its agent ran keeps the agent's new files as the agent's) becomes DIR's list,
# the agent's folder and the engine's own files aside.
setup_record() {
  local dir=$1 f p skip w
  local -a wants=('/.orbit-agent/')
  local -A before=()
  engine_workspace_excludes wants
  while IFS= read -r -d '' p; do
    [[ -n $p ]] && before[$p]=1
  done <"$ORBIT_TMP/setup.before"
  setup_paths_file_v "$dir"
  f=$REPLY
  : >"$f.tmp"
  while IFS= read -r -d '' p; do
    skip=0
    [[ -n $p && -z ${before[$p]-} ]] || continue
    for w in "${wants[@]}"; do
      w=${w#/}
      [[ $p == "$w" || $p == "${w%/}" || $p == "$w"* ]] && skip=1
    done
    ((skip)) || printf '%s\0' "$p" >>"$f.tmp"
  done < <(git -C "$dir" ls-files -z --others --directory -- 2>>"$ORBIT_LOG_FILE")
  mv -f -- "$f.tmp" "$f"
}

# setup_run DIR LOG UNTRUSTED: the setup commands in the work tree DIR, in order, each bounded
# by the checks' timeout, their output appended to LOG. With UNTRUSTED 1 (a tree an agent
# made: a candidate's start after the first iteration, the clean checkout of a claim) each
# runs as a check does, in the loop's sandbox when it has one (its caches then in the run's
# private /tmp); with 0 (the user's own tree, before any agent) as the user's command. A
# setup may not change a tracked file (`npm ci`, not `npm install`): what it made of the
# project's files would be taken for the agent's change. Status 1 with REPLY the reason.
setup_run() {
  local dir=$1 log=$2 untrusted=$3 cmd i=0 back=$PWD WS=$1
  local -a pre=() changed=() jail=()
  ((${#SETUP_CMDS[@]})) || return 0
  if ((untrusted)); then
    sandbox_prepare check
    jail=("${SANDBOX_ARGV[@]}")
    if ((${#jail[@]})); then
      pre=("$SANDBOX_ENV" XDG_CACHE_HOME=/tmp/.orbit-setup-cache npm_config_cache=/tmp/.orbit-setup-cache/npm)
    fi
  fi
  orbit_iso_v -1
  printf '### setup of %s (%s)\n' "$dir" "$REPLY" >>"$log"
  if ! git -C "$dir" ls-files -z --others --directory -- >"$ORBIT_TMP/setup.before" 2>>"$ORBIT_LOG_FILE"; then
    REPLY="git could not list the files of $dir"
    return 1
  fi
  if ! cd -- "$dir"; then
    REPLY="cannot enter $dir"
    return 1
  fi
  for cmd in "${SETUP_CMDS[@]}"; do
    i=$((i + 1))
    printf '==> setup %s: %s\n' "$i" "$cmd" >>"$log"
    ORBIT_REPO_ROOT=$dir ORBIT_SETUP=1 \
      orbit_run_bounded "$CHECK_TIMEOUT_S" "$KILL_GRACE_S" /dev/null "$log" "${pre[@]}" "${jail[@]}" "$BASH" -c "$cmd"
    if ((ORBIT_TIMED_OUT || ORBIT_RC)); then
      cd -- "$back" || true
      if ((ORBIT_TIMED_OUT)); then
        REPLY="setup command $i ($cmd) timed out after ${CHECK_TIMEOUT_S}s (check-timeout)"
      else
        REPLY="setup command $i ($cmd) failed with exit $ORBIT_RC"
      fi
      printf '[FAIL] %s\n' "$REPLY" >>"$log"
      return 1
    fi
  done
  cd -- "$back" || true
  # A submodule's own work tree is not looked into (--ignore-submodules=dirty: a submodule
  # counts as changed when its commit moved): what a setup builds there is no file the
  # project tracks, and to look git would obey that checkout's configuration, which the
  # setup (a tree's scripts, the agent's) could have written.
  git -C "$dir" diff --ignore-submodules=dirty --no-renames --name-only -z -- >"$ORBIT_TMP/setup.changed" 2>>"$ORBIT_LOG_FILE" || {
    REPLY="git could not say what the setup changed in $dir"
    return 1
  }
  mapfile -d '' -t changed <"$ORBIT_TMP/setup.changed"
  if ((${#changed[@]})); then
    orbit_cut_v "${changed[*]:0:5}" 200
    REPLY="the setup changed ${#changed[@]} file(s) the project tracks (${REPLY//[[:cntrl:]]/?}): a setup must leave them as they are (npm ci rather than npm install, a lockfile kept as it is)"
    printf '[FAIL] %s\n' "$REPLY" >>"$log"
    return 1
  fi
  setup_record "$dir"
  printf '[PASS] setup (%s command(s))\n' "$i" >>"$log"
}

# setup_workspace: the workspace's setup, once per workspace (again for one recreated): after
# the integrity gate of the start, before the red gate. On the untouched tree of the first
# run it is the user's command; on a workspace recreated from the loop branch, a check's. A
# failing setup stops the run in preflight (exit 2, nothing spent, tried again at the next
# start) with the tail of iterations/baseline/setup.log. What it changed of git's files (a
# hook it installed) is what the runner holds from then on.
setup_workspace() {
  local dir="$LOOP_DIR/iterations/baseline" untrusted=0 tail why
  ((${#SETUP_CMDS[@]})) || return 0
  setup_paths_file_v "$WS_MAIN"
  [[ -f $REPLY ]] && return 0
  mkdir -p -- "$dir"
  # Once an agent ran, the workspace's tree is the agent's: set up as a check runs.
  ((S[NEXT_ITERATION] == 1)) && [[ ! -d $LOOP_DIR/iterations/000001 ]] || untrusted=1
  orbit_log "setting up the workspace $WS_MAIN (${#SETUP_CMDS[@]} setup command(s); output in iterations/baseline/setup.log)"
  if ! setup_run "$WS_MAIN" "$dir/setup.log" "$untrusted"; then
    why=$REPLY
    orbit_event setup_fail "${S[NEXT_ITERATION]}" where workspace why "$why"
    tail=$(tail -n 5 -- "$dir/setup.log" | orbit_clean_text | tr '\n' ' ' | cut -c1-300)
    preflight_fail "the workspace's setup failed: $why. Fix the setup in loop.toml (then orbit init --force), or the project, and run again; last lines of iterations/baseline/setup.log: $tail"
  fi
  orbit_event setup_done "${S[NEXT_ITERATION]}" where workspace commands "${#SETUP_CMDS[@]}"
  # A hook the setup installed (husky's) is one the loop's commits run.
  workspace_git_facts
  trust_hold
}

# setup_forget DIR: DIR is a new work tree: its setup is to be run again.
setup_forget() {
  setup_paths_file_v "$1"
  rm -f -- "$REPLY"
}

# modules_checkout DIR: the submodules of the work tree DIR, checked out at the commits its
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
modules_checkout() {
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
    if ! path_plain "$dir" "$path"; then
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
