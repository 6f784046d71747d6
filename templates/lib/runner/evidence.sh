# ---- what a check run leaves (contract section 6): the tree the checks ran on is the
# ---- evidence. A check run that changes a file of that tree (one the project tracks, or
# ---- one the agent made) changed what it was checking: its verdict is not taken, the file
# ---- is put back as it was, and the record names it. A file a check run only creates (a
# ---- test report, a coverage file) is its artifact: moved into the run's record, never in
# ---- the workspace's tree, never committed, never the agent's or the confirmer's change;
# ---- the names are remembered (.check-artifacts) so that the same file made again by an
# ---- agent or a confirmer that runs the checks itself is taken for what it is.
# What the last check run changed of the tree it ran on (paths, one line), and how many
# artifacts it left.
CHECKS_CHANGED=
CHECKS_ARTIFACTS=0
# The artifact names known (path -> 1), read from .check-artifacts once.
declare -A ARTIFACT_NAMES=()
ARTIFACTS_READ=0
# A scratch directory for a look taken while other runs go on (a fan-out's early-stop probe):
# then nothing of the loop directory is written (the private index is kept there, the
# artifacts' names are not remembered).
VERIFY_SCRATCH=
# The most artifact files a run's record keeps, and the largest one it keeps (bytes).
readonly ARTIFACTS_KEPT_MAX=50 ARTIFACT_KEPT_BYTES=1048576

# evidence_artifacts_load: ARTIFACT_NAMES from the loop directory's .check-artifacts (the runner's
# own file: the trust checks hold it like every other).
evidence_artifacts_load() {
  local p
  ((ARTIFACTS_READ)) && return 0
  ARTIFACTS_READ=1
  [[ -f $LOOP_DIR/.check-artifacts && ! -L $LOOP_DIR/.check-artifacts ]] || return 0
  while IFS= read -r p; do
    [[ -n $p ]] && ARTIFACT_NAMES[$p]=1
  done <"$LOOP_DIR/.check-artifacts"
}

# evidence_artifacts_remember PATH...: the names join .check-artifacts (at most 200 are kept).
evidence_artifacts_remember() {
  local p new=0
  evidence_artifacts_load
  for p in "$@"; do
    [[ $p != *$'\n'* && -z ${ARTIFACT_NAMES[$p]-} ]] || continue
    ((${#ARTIFACT_NAMES[@]} < 200)) || break
    ARTIFACT_NAMES[$p]=1
    new=1
  done
  ((new)) && [[ -z $VERIFY_SCRATCH ]] || return 0
  printf '%s\n' "${!ARTIFACT_NAMES[@]}" | LC_ALL=C sort >"$LOOP_DIR/.check-artifacts.tmp"
  mv -f -- "$LOOP_DIR/.check-artifacts.tmp" "$LOOP_DIR/.check-artifacts"
}

# evidence_artifacts_sweep DIR: the known artifacts present in the work tree $WS that its HEAD does
# not hold are removed before the tree is taken (an agent or a confirmer that ran the
# checks made them again); their names go to DIR/artifacts.swept. ARTIFACTS_SWEPT: whether
# it removed any.
ARTIFACTS_SWEPT=0
evidence_artifacts_sweep() {
  local dir=$1 p
  local -a here=() tracked=()
  local -A in_head=()
  ARTIFACTS_SWEPT=0
  evidence_artifacts_load
  ((${#ARTIFACT_NAMES[@]})) || return 0
  for p in "${!ARTIFACT_NAMES[@]}"; do
    [[ -e $WS/$p || -L $WS/$p ]] && here+=("$p")
  done
  ((${#here[@]})) || return 0
  mapfile -d '' -t tracked < <(git -C "$WS" ls-tree -r -z --name-only HEAD -- "${here[@]}" 2>/dev/null || true)
  for p in "${tracked[@]}"; do
    in_head[$p]=1
  done
  for p in "${here[@]}"; do
    [[ -z ${in_head[$p]-} ]] || continue
    ARTIFACTS_SWEPT=1
    rm -f -- "$WS/$p" && printf '%s\n' "$p" >>"$dir/artifacts.swept"
  done
}

# evidence_checks_settle DIR TREE [KEEP]: after a check run in $WS, which began on TREE: CHECKS_CHANGED
# names what it changed of TREE (put back as it was), its new files are moved into
# DIR/artifacts/ (the first ARTIFACTS_KEPT_MAX of at most ARTIFACT_KEPT_BYTES each; the rest
# removed) and remembered; with KEEP 0 (a holdout run: nothing of it may reach a later run)
# they are removed and not remembered. Status 1 when the work tree could not be put back to TREE (the
# verdict must not be taken).
evidence_checks_settle() {
  local dir=$1 tree=$2 keep=${3:-1} now st p stored=0 size parent
  local -a changed=() created=()
  CHECKS_CHANGED='' CHECKS_ARTIFACTS=0
  tree_here_v || return 1
  now=$REPLY
  [[ $now == "$tree" ]] && return 0
  # git as the snapshot ran it: never through a .git the checks put there.
  tree_gitdir_v "$WS" || return 1
  local gd=$REPLY
  while IFS= read -r -d '' st && IFS= read -r -d '' p; do
    case $st in
      A) created+=("$p") ;;
      *) changed+=("$p") ;;
    esac
  done < <(GIT_DIR=$gd GIT_WORK_TREE=$WS config_git_q diff --no-renames --name-status -z "$tree" "$now" -- 2>>"$ORBIT_LOG_FILE")
  if ((${#changed[@]})); then
    orbit_cut_v "${changed[*]:0:10}" 300
    CHECKS_CHANGED=${REPLY//[[:cntrl:]]/?}
    orbit_log "a check run changed the tree it was checking (${#changed[@]} file(s): $CHECKS_CHANGED): put back as it was"
    printf '%s\0' "${changed[@]}" >"$ORBIT_TMP/restore.z"
    rm -f -- "$ORBIT_TMP/restore.idx"
    if GIT_DIR=$gd GIT_WORK_TREE=$WS GIT_INDEX_FILE=$ORBIT_TMP/restore.idx git -C "$WS" read-tree "$tree" 2>>"$ORBIT_LOG_FILE"; then
      GIT_DIR=$gd GIT_WORK_TREE=$WS GIT_INDEX_FILE=$ORBIT_TMP/restore.idx git -C "$WS" checkout-index -f -z --stdin <"$ORBIT_TMP/restore.z" 2>>"$ORBIT_LOG_FILE" || true
    fi
    # What the tree did not hold at a changed path (a file the checks made where the
    # agent's was removed) goes too.
    for p in "${changed[@]}"; do
      GIT_DIR=$gd GIT_WORK_TREE=$WS GIT_INDEX_FILE=$ORBIT_TMP/restore.idx git -C "$WS" ls-files --error-unmatch -- "$p" >/dev/null 2>&1 || rm -rf -- "${WS:?}/$p"
    done
    rm -f -- "$ORBIT_TMP/restore.idx" "$ORBIT_TMP/restore.z"
  fi
  for p in "${created[@]}"; do
    CHECKS_ARTIFACTS=$((CHECKS_ARTIFACTS + 1))
    size=$(stat -c %s -- "$WS/$p" 2>/dev/null || echo -1)
    if ((keep)) && [[ -f $WS/$p && ! -L $WS/$p ]] && ((stored < ARTIFACTS_KEPT_MAX && size >= 0 && size <= ARTIFACT_KEPT_BYTES)); then
      parent=$dir/artifacts
      [[ $p != */* ]] || parent+=/${p%/*}
      if mkdir -p -- "$parent" 2>/dev/null && mv -f -- "$WS/$p" "$dir/artifacts/$p" 2>/dev/null; then
        stored=$((stored + 1))
        continue
      fi
    fi
    rm -f -- "$WS/$p"
  done
  if ((${#created[@]} && keep)); then
    evidence_artifacts_remember "${created[@]}"
    orbit_log "a check run left ${#created[@]} file(s) of its own ($stored kept in ${dir#"$LOOP_DIR"/}/artifacts/): never part of the tree"
  fi
  tree_here_v || return 1
  if [[ $REPLY != "$tree" ]]; then
    orbit_log "the work tree $WS could not be put back to the tree the checks ran on ($tree, now $REPLY)"
    return 1
  fi
}

# ---- the clean checkout: the last check run before DONE happens in a work tree that holds
# ---- the tree about to be committed and nothing else (nothing ignored, nothing untracked),
# ---- so a solution that needs a file the branch will not hold is never DONE. It is the
# ---- runner's worktree beside the workspace (<workspace>.clean), kept from claim to claim
# ---- and moved to each claim's tree (only the files that differ are written), then proven
# ---- clean before every use: an earlier claim's checks ran there and could leave a file, a
# ---- symlink, a mode, an index entry git skips, a configuration or a hook of that worktree,
# ---- a .git of their own. What cannot be proven clean is thrown away and made afresh.
# The clean checkout's git directory, as evidence_clean_checkout_v last proved it.
CLEAN_GD=

# evidence_clean_git CWS GITDIR ARGS...: git in the clean checkout CWS through its git directory
# GITDIR and the runner's own index of it (.tree-index.clean in the loop directory), never
# through what CWS holds (its .git), that worktree's own index or a setting that lets git
# skip a file: no fsmonitor, no sparse checkout, no untracked cache, every stat field
# compared, no hook.
evidence_clean_git() {
  local cws=$1 gd=$2
  shift 2
  GIT_DIR=$gd GIT_WORK_TREE=$cws GIT_INDEX_FILE=$LOOP_DIR/.tree-index.clean GIT_OPTIONAL_LOCKS=0 \
    git -c core.fsmonitor=false -c core.sparseCheckout=false -c core.untrackedCache=false \
    -c core.splitIndex=false -c index.sparse=false -c core.checkStat=default -c core.trustctime=true \
    -c core.hooksPath=/dev/null -C "$cws" "$@"
}

# evidence_clean_gitdir_v CWS: REPLY is the git directory of the clean checkout CWS when it is
# the one the runner made and holds nothing git would read that the runner did not put
# there: CWS a directory whose .git file names exactly a directory of
# $GIT_COMMON_ABS/worktrees/ whose gitdir names CWS back, that directory holding only HEAD
# (a detached commit), commondir (the common directory), gitdir, locked, index, logs/HEAD
# and an empty refs/ (no configuration, no hooks, no info/, no other ref). Status 1 else.
evidence_clean_gitdir_v() {
  local cws=$1 gd line='' e
  [[ -d $cws && ! -L $cws && -f $cws/.git && ! -L $cws/.git ]] || return 1
  IFS= read -r line <"$cws/.git" 2>/dev/null || true
  gd=${line#gitdir: }
  [[ $line == "gitdir: $GIT_COMMON_ABS/worktrees/"* && $gd != */../* && $gd != */./* && ${gd#"$GIT_COMMON_ABS/worktrees/"} != */* ]] || return 1
  [[ -d $gd && ! -L $gd && ! $gd -ef $GIT_DIR_ABS && -f $gd/gitdir && ! -L $gd/gitdir ]] || return 1
  line=''
  IFS= read -r line <"$gd/gitdir" 2>/dev/null || true
  [[ $line == "$cws/.git" ]] || return 1
  line=''
  IFS= read -r line <"$gd/commondir" 2>/dev/null || true
  [[ -f $gd/commondir && ! -L $gd/commondir && $line == ../.. ]] || return 1
  line=''
  IFS= read -r line <"$gd/HEAD" 2>/dev/null || true
  [[ -f $gd/HEAD && ! -L $gd/HEAD && $line =~ ^[0-9a-f]{40,64}$ ]] || return 1
  for e in "$gd"/* "$gd"/.[!.]* "$gd"/..?*; do
    [[ -e $e || -L $e ]] || continue
    case ${e##*/} in
      HEAD | commondir | gitdir | locked | index) [[ -f $e && ! -L $e ]] || return 1 ;;
      logs) [[ -d $e && ! -L $e ]] && evidence_clean_only "$e" HEAD || return 1 ;;
      refs) [[ -d $e && ! -L $e ]] && evidence_clean_only "$e" || return 1 ;;
      *) return 1 ;;
    esac
  done
  REPLY=$gd
}

# evidence_clean_only DIR [NAME]: DIR holds nothing but the regular file NAME (or nothing).
evidence_clean_only() {
  local e
  for e in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    [[ -e $e || -L $e ]] || continue
    [[ -n ${2-} && ${e##*/} == "$2" && -f $e && ! -L $e ]] || return 1
  done
}

# evidence_clean_move CWS GITDIR TREE: the clean checkout moved to TREE: the entries of the
# runner's index of it that differ from TREE set as TREE has them and those files written
# (a fresh checkout, with no index yet: every file), everything git does not track there
# (ignored or not, what TREE no longer holds) removed, and a tracked file whose stat data
# does not match the index (changed since, a symlink, a mode) written again; then proven:
# nothing untracked, no tracked file that differs from the index (content, mode, type, a
# path through a symlink), the index TREE. Status 1 when it is not so.
evidence_clean_move() {
  local cws=$1 gd=$2 tree=$3 now='' stray='' z=$ORBIT_TMP/clean.paths
  local -a paths=()
  if [[ ! -f $LOOP_DIR/.tree-index.clean ]]; then
    evidence_clean_git "$cws" "$gd" read-tree "$tree" 2>>"$ORBIT_LOG_FILE" &&
      evidence_clean_git "$cws" "$gd" checkout-index -a -f -u 2>>"$ORBIT_LOG_FILE" || return 1
  else
    now=$(evidence_clean_git "$cws" "$gd" write-tree 2>>"$ORBIT_LOG_FILE") || return 1
  fi
  if [[ -n $now && $now != "$tree" ]]; then
    evidence_clean_git "$cws" "$gd" diff-tree -r -z --no-renames --name-only "$now" "$tree" >"$z" 2>>"$ORBIT_LOG_FILE" || return 1
    mapfile -d '' -t paths <"$z"
    if ((${#paths[@]} > 2000)); then
      # Most of the tree differs: one pass over the whole index.
      evidence_clean_git "$cws" "$gd" read-tree -u --reset "$tree" 2>>"$ORBIT_LOG_FILE" || return 1
    else
      evidence_clean_git "$cws" "$gd" update-index -z --force-remove --stdin <"$z" 2>>"$ORBIT_LOG_FILE" &&
        GIT_LITERAL_PATHSPECS=1 evidence_clean_git "$cws" "$gd" ls-tree -r -z --full-tree "$tree" -- "${paths[@]}" >"$z" 2>>"$ORBIT_LOG_FILE" &&
        evidence_clean_git "$cws" "$gd" update-index -z --index-info <"$z" 2>>"$ORBIT_LOG_FILE" &&
        GIT_LITERAL_PATHSPECS=1 evidence_clean_git "$cws" "$gd" ls-tree -r -z --full-tree --name-only "$tree" -- "${paths[@]}" >"$z" 2>>"$ORBIT_LOG_FILE" &&
        evidence_clean_git "$cws" "$gd" checkout-index -f -u -z --stdin <"$z" 2>>"$ORBIT_LOG_FILE" || return 1
    fi
  fi
  evidence_clean_git "$cws" "$gd" clean -q -f -f -d -x 2>>"$ORBIT_LOG_FILE" || return 1
  evidence_clean_git "$cws" "$gd" diff-files --name-only -z --ignore-submodules >"$z" 2>>"$ORBIT_LOG_FILE" || return 1
  if [[ -s $z ]]; then
    evidence_clean_git "$cws" "$gd" checkout-index -f -u -z --stdin <"$z" 2>>"$ORBIT_LOG_FILE" &&
      evidence_clean_git "$cws" "$gd" clean -q -f -f -d -x 2>>"$ORBIT_LOG_FILE" || return 1
  fi
  stray=$(evidence_clean_git "$cws" "$gd" ls-files -o --directory -z 2>>"$ORBIT_LOG_FILE" | head -c 300 | tr '\0' ' ') || return 1
  if [[ -n $stray ]]; then
    orbit_log "the clean checkout $cws still holds what git does not track after git clean: ${stray//[[:cntrl:]]/?}"
    return 1
  fi
  if ! evidence_clean_git "$cws" "$gd" diff-files --quiet --ignore-submodules 2>>"$ORBIT_LOG_FILE"; then
    orbit_log "the clean checkout $cws holds a tracked file that differs from the tree $tree"
    return 1
  fi
  stray=$(evidence_clean_git "$cws" "$gd" write-tree 2>>"$ORBIT_LOG_FILE") || return 1
  [[ $stray == "$tree" ]]
}

# evidence_clean_fresh CWS: the clean checkout made afresh: whatever is at CWS removed (and
# git's record of it, a locked registration left by a checkout deleted by hand too), then
# `git worktree add` of an empty one; the runner's index of it forgotten.
evidence_clean_fresh() {
  local cws=$1
  # Nothing there yet, at a loop's first claim, is no error of the log's.
  config_repo_git worktree remove -f -f -- "$cws" >/dev/null 2>&1 || true
  if [[ -e $cws || -L $cws ]]; then
    [[ -L $cws ]] || chmod -R u+rwx -- "$cws" 2>/dev/null || true
    rm -rf -- "$cws" 2>>"$ORBIT_LOG_FILE" || true
    config_repo_git worktree remove -f -f -- "$cws" >>"$ORBIT_LOG_FILE" 2>&1 || true
  fi
  if [[ -e $cws || -L $cws ]]; then
    orbit_log "cannot remove the clean checkout $cws (see above)"
    return 1
  fi
  rm -f -- "$LOOP_DIR/.tree-index.clean"
  # Another loop of this repository adding a worktree at the same moment can make git fail
  # ("failed to read .git/worktrees/X/commondir"): tried again, three times in all.
  local try
  for try in 1 2 3; do
    config_repo_git worktree add -q --detach --no-checkout --lock --reason "orbit loop $LOOP_DIR (clean checkout)" -- "$cws" HEAD >>"$ORBIT_LOG_FILE" 2>&1 && return 0
    config_repo_git worktree remove -f -f -- "$cws" >/dev/null 2>&1 || true
    [[ ! -e $cws && $try != 3 ]] || return 1
    orbit_log "git worktree add of the clean checkout failed (try $try of 3; see above): trying again"
    sleep 1
  done
}

# evidence_clean_checkout_v TREE: REPLY is the clean checkout (<workspace>.clean) holding exactly
# TREE, moved there from the tree it held when it is proven the runner's and clean, else made
# afresh (and proven); its own index then a copy of the runner's (for the checks' git).
# Status 1 when git cannot make it (said in runner.log).
evidence_clean_checkout_v() {
  local tree=$1 cws=$WS_MAIN.clean gd=''
  CLEAN_GD=
  if [[ -f $LOOP_DIR/.tree-index.clean && ! -L $LOOP_DIR/.tree-index.clean ]] && evidence_clean_gitdir_v "$cws"; then
    gd=$REPLY
    evidence_clean_move "$cws" "$gd" "$tree" || gd=''
  fi
  if [[ -z $gd ]]; then
    [[ ! -e $cws && ! -L $cws ]] || orbit_log "the clean checkout $cws is not proven the runner's and clean: made afresh"
    evidence_clean_fresh "$cws" && evidence_clean_gitdir_v "$cws" || return 1
    gd=$REPLY
    evidence_clean_move "$cws" "$gd" "$tree" || return 1
  fi
  CLEAN_GD=$gd
  rm -f -- "$gd/index"
  cp -p -- "$LOOP_DIR/.tree-index.clean" "$gd/index" || return 1
  setup_modules_checkout "$cws"
  REPLY=$cws
}

# evidence_clean_scrub CWS: everything git does not track in the clean checkout CWS removed
# (what a failed copy of the setup cache left).
evidence_clean_scrub() {
  [[ -n $CLEAN_GD ]] || return 1
  evidence_clean_git "$1" "$CLEAN_GD" clean -q -f -f -d -x 2>>"$ORBIT_LOG_FILE"
}

# evidence_clean_checkout_remove: a DONE loop's clean checkout goes (it holds nothing the branch does
# not), when it is the worktree the runner made.
evidence_clean_checkout_remove() {
  local cws=$WS_MAIN.clean line=''
  [[ -f $cws/.git && ! -L $cws/.git && ! -L $cws ]] || return 0
  IFS= read -r line <"$cws/.git" 2>/dev/null || true
  [[ $line == "gitdir: $GIT_COMMON_ABS/worktrees/"* ]] || return 0
  config_repo_git worktree remove -f -f -- "$cws" >>"$ORBIT_LOG_FILE" 2>&1 || true
  rm -f -- "$LOOP_DIR/.tree-index.clean"
  setup_forget "$cws"
}
