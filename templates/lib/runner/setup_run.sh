# ---- the setup's runs (loop.toml `setup`), rendered into a loop with setup commands only;
# ---- the others hold its stand-in lib/no-setup.sh. What the setup created is recorded per
# ---- work tree (lib/runner/setup.sh reads the record).
# setup_run_record DIR: what the setup left untracked in the work tree DIR (ignored or not; a
# directory as one entry) that was not there before it (ORBIT_TMP's setup.before: a workspace
# set up after its agent ran keeps the agent's new files as the agent's) becomes DIR's list,
# the agent's folder and the engine's own files aside.
setup_run_record() {
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
  local -a pre=() changed=() jail=() offline=()
  ((${#SETUP_CMDS[@]})) || return 0
  if ((untrusted)); then
    # On a tree the agent made, offline (loop.toml offline-env): what the first setup
    # fetched with the network is read where it is, and no registry is asked.
    config_offline_env offline
    sandbox_prepare check
    jail=("${SANDBOX_ARGV[@]}")
    if ((${#jail[@]})); then
      pre=("$SANDBOX_ENV" XDG_CACHE_HOME=/tmp/.orbit-setup-cache npm_config_cache=/tmp/.orbit-setup-cache/npm "${offline[@]}")
    elif ((${#offline[@]})); then
      pre=(env "${offline[@]}")
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
      proc_run_bounded "$CHECK_TIMEOUT_S" "$KILL_GRACE_S" /dev/null "$log" "${pre[@]}" "${jail[@]}" "$BASH" -c "$cmd"
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
  setup_run_record "$dir"
  printf '[PASS] setup (%s command(s))\n' "$i" >>"$log"
}

# setup_run_workspace: the workspace's setup, once per workspace (again for one recreated): after
# the integrity gate of the start, before the red gate. On the untouched tree of the first
# run it is the user's command; on a workspace recreated from the loop branch, a check's. A
# failing setup stops the run in preflight (exit 2, nothing spent, tried again at the next
# start) with the tail of iterations/baseline/setup.log. What it changed of git's files (a
# hook it installed) is what the runner holds from then on.
setup_run_workspace() {
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
    state_event setup_fail "${S[NEXT_ITERATION]}" where workspace why "$why"
    tail=$(tail -n 5 -- "$dir/setup.log" | orbit_clean_text | tr '\n' ' ' | cut -c1-300)
    preflight_fail "the workspace's setup failed: $why. Fix the setup in loop.toml (then orbit init --force), or the project, and run again; last lines of iterations/baseline/setup.log: $tail"
  fi
  state_event setup_done "${S[NEXT_ITERATION]}" where workspace commands "${#SETUP_CMDS[@]}"
  # What it made on the untouched tree, before any agent, is what a clean checkout copies.
  ((untrusted)) || setup_run_cache_store "$WS_MAIN"
  # A hook the setup installed (husky's) is one the loop's commits run.
  workspace_git_facts
  trust_hold
}

# ---- the setup's cache (loop.toml setup-inputs): what the workspace's first setup made on the
# ---- untouched tree, before any agent ran, kept in the loop directory's .setup-cache/ (the
# ---- agent's sandbox holds the loop directory empty, a check's read-only), so that the clean
# ---- checkout of a claim whose inputs (the setup commands, the files setup-inputs names) are
# ---- the untouched tree's takes a copy of it instead of running the setup again. Only a run
# ---- on the untouched tree is kept: a setup run on a tree the agent made runs the agent's code,
# ---- which could leave for a later claim what that claim's tree no longer shows. Each file is
# ---- copied (copy-on-write where the file system has it), never hard-linked: a check that
# ---- writes into what the setup made (node_modules) changes the clean checkout's copy alone.
# ---- The cache's listing (every entry, each file's sha256) is checked before each reuse
# ---- against the sha256 .setup-cache.sum holds (a file the runner holds like its others): a
# ---- cache that does not match is discarded and the setup runs.

# setup_run_cache_key_v DIR: REPLY is the cache key of the work tree DIR: the sha256 of the setup
# commands and of each input as DIR holds it (its path and the sha256 of its bytes, or - when
# it is not there). Status 1 when the loop names no inputs (its setup is never cached) or an
# input is not a plain file reached through no symlink.
setup_run_cache_key_v() {
  local dir=$1 cmd p sum
  local -a inputs=()
  REPLY=''
  read -ra inputs <<<"${SETUP_INPUTS_SETTING:-}"
  ((${#inputs[@]})) || return 1
  {
    printf 'orbit setup cache 1\0'
    for cmd in "${SETUP_CMDS[@]}"; do
      printf 'setup\0%s\0' "$cmd"
    done
  } >"$ORBIT_TMP/setup-cache.key" || return 1
  for p in "${inputs[@]}"; do
    [[ -n $p && $p != /* && /$p/ != */../* ]] || return 1
    sum=-
    if [[ -e $dir/$p || -L $dir/$p ]]; then
      tree_path_plain "$dir" "$p" && [[ -f $dir/$p ]] || return 1
      sum=$(orbit_sha256_file "$dir/$p") || return 1
    fi
    printf 'input\0%s\0%s\0' "$p" "$sum" >>"$ORBIT_TMP/setup-cache.key" || return 1
  done
  REPLY=$(orbit_sha256_file "$ORBIT_TMP/setup-cache.key")
  [[ -n $REPLY ]]
}

# setup_run_cache_drop: no setup cache (loop.toml setup-inputs): the loop directory's
# .setup-cache/ and its sum go (a DONE loop's, or one that does not match).
setup_run_cache_drop() {
  rm -f -- "$LOOP_DIR/.setup-cache.sum"
  [[ ! -e $LOOP_DIR/.setup-cache && ! -L $LOOP_DIR/.setup-cache ]] || rm -rf -- "$LOOP_DIR/.setup-cache"
}

# setup_run_cache_listing DIR: the listing of the directory DIR on stdout: each entry (type, mode,
# path; a link's target) and each file's sha256, in byte order. Anything but a directory, a
# file or a link makes it fail.
setup_run_cache_listing() {
  local dir=$1 entries=$ORBIT_TMP/setup-cache.entries
  LC_ALL=C find "$dir" -mindepth 1 \( -type d -o -type f \) -printf '%y %m %P\0' -o -type l -printf 'l %P\0%l\0' -o -printf '? %P\0' |
    LC_ALL=C sort -z >"$entries" || return 1
  ! grep -qz '^? ' "$entries" || return 1
  cat -- "$entries"
  [[ -n $ORBIT_SHA_TOOL ]] || orbit_sha_detect
  case $ORBIT_SHA_TOOL in
    sha256sum) LC_ALL=C find "$dir" -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum -- ;;
    shasum) LC_ALL=C find "$dir" -type f -print0 | LC_ALL=C sort -z | xargs -0 -r shasum -a 256 -- ;;
    *) LC_ALL=C find "$dir" -type f -print0 | LC_ALL=C sort -z | xargs -0 -r openssl dgst -sha256 -r ;;
  esac
}

# setup_run_cache_sum_v: REPLY is the sha256 of the cache's listing and of its list of paths;
# status 1 when it cannot be made (something there is neither a directory, a file nor a link).
setup_run_cache_sum_v() {
  local c=$LOOP_DIR/.setup-cache
  REPLY=''
  [[ -d $c/files && ! -L $c && ! -L $c/files ]] || return 1
  [[ -f $c/paths && ! -L $c/paths ]] || return 1
  setup_run_cache_listing "$c/files" >"$ORBIT_TMP/setup-cache.listing" || return 1
  REPLY=$({ cat -- "$ORBIT_TMP/setup-cache.listing" && printf 'paths\0' && cat -- "$c/paths"; } | orbit_sha256_stdin)
}

# setup_run_cache_store DIR: after the setup's run on the untouched tree DIR (the workspace
# before any agent), what it made there (its recorded paths) is copied into the cache, its
# key and listing's sha256 into .setup-cache.sum. Nothing when the loop names no inputs; a
# copy that fails leaves no cache (said in runner.log).
setup_run_cache_store() {
  local dir=$1 key p c=$LOOP_DIR/.setup-cache sum
  setup_run_cache_key_v "$dir" || return 0
  key=$REPLY
  setup_run_cache_drop
  setup_paths_file_v "$dir"
  if mkdir -p -- "$c/files" && cp -- "$REPLY" "$c/paths" && setup_run_cache_copy "$dir" "$c/files" "$c/paths" && setup_run_cache_sum_v; then
    sum=$REPLY
    # An output that names the work tree it was made in (a virtual environment's scripts
    # name their interpreter by absolute path) would run the workspace's copy from another
    # checkout: it is made in each checkout.
    if grep -rqaF -- "$dir" "$c/files" 2>/dev/null || grep -qaF -- "$dir" "$ORBIT_TMP/setup-cache.listing"; then
      orbit_log "the setup's output names the workspace's path ($dir): not kept, every clean checkout runs the setup"
      setup_run_cache_drop
      return 0
    fi
    printf '%s %s\n' "$key" "$sum" >"$ORBIT_TMP/setup-cache.sum" &&
      mv -f -- "$ORBIT_TMP/setup-cache.sum" "$LOOP_DIR/.setup-cache.sum" && {
      orbit_log "the setup's output on the untouched tree is kept in .setup-cache/ (key ${key:0:12}): a claim's clean checkout with the same setup inputs takes a copy of it"
      return 0
    }
  fi
  orbit_log "the setup's output could not be kept in .setup-cache/ (see above): every clean checkout runs the setup"
  setup_run_cache_drop
}

# setup_run_cache_copy FROM TO PATHS: each path PATHS lists (NUL-separated, as the setup's record
# has them) copied from the work tree FROM to TO, links as links, each file a copy of its own.
# Status 1 when one cannot be: a path through a symlink, or one already at TO.
setup_run_cache_copy() {
  local from=$1 to=$2 p
  while IFS= read -r -d '' p; do
    p=${p%/}
    [[ -n $p && /$p/ != */../* ]] || return 1
    tree_path_plain "$from" "$p" && tree_path_plain "$to" "$p" || return 1
    [[ ! -e $to/$p && ! -L $to/$p ]] || return 1
    [[ $p != */* ]] || mkdir -p -- "$to/${p%/*}" || return 1
    cp -a --reflink=auto -- "$from/$p" "$to/$p" 2>>"$ORBIT_LOG_FILE" || return 1
  done <"$3"
}

# setup_run_cache_take_v CWS LOG: the clean checkout CWS takes the cache's copy instead of
# running the setup, when the cache's key is CWS's and its listing is the one kept (else a
# cache that does not match is discarded). Status 1 when it did not (REPLY says why, for the
# record): the setup runs.
setup_run_cache_take_v() {
  local cws=$1 log=$2 want='' key pathsf c=$LOOP_DIR/.setup-cache
  REPLY=''
  [[ -f $LOOP_DIR/.setup-cache.sum && ! -L $LOOP_DIR/.setup-cache.sum ]] || {
    REPLY="no setup cache"
    return 1
  }
  if ! setup_run_cache_key_v "$cws"; then
    REPLY="an input of the setup is not a plain file in this tree"
    return 1
  fi
  key=$REPLY
  IFS= read -r want <"$LOOP_DIR/.setup-cache.sum" || true
  if [[ $key != "${want%% *}" ]]; then
    REPLY="the setup's inputs differ from the untouched tree's (key ${key:0:12}, cached ${want:0:12})"
    return 1
  fi
  if ! setup_run_cache_sum_v || [[ $REPLY != "${want#* }" ]]; then
    REPLY="the setup cache's listing does not match what was kept (a file of it changed): discarded"
    orbit_log "$REPLY"
    setup_run_cache_drop
    return 1
  fi
  setup_paths_file_v "$cws"
  pathsf=$REPLY
  if ! setup_run_cache_copy "$c/files" "$cws" "$c/paths" || ! cp -- "$c/paths" "$pathsf"; then
    REPLY="the setup cache could not be copied into $cws (see runner.log)"
    return 1
  fi
  orbit_iso_v -1
  printf '### setup of %s (%s)\n[PASS] setup: not run, its output on the untouched tree copied from .setup-cache/ (key %s: the same setup inputs)\n' "$cws" "$REPLY" "${key:0:12}" >>"$log"
  return 0
}

# setup_run_clean_checkout CWS LOG TREE: the setup of the clean checkout CWS, which holds TREE: the
# cache's copy when it holds, else the setup's run as a check runs (setup_run's status and
# REPLY). A cache discarded for not matching is made again first, by a setup run on the
# untouched tree (the loop's base) in CWS, which is then refilled with TREE.
setup_run_clean_checkout() {
  local cws=$1 log=$2 tree=$3 base=''
  ((${#SETUP_CMDS[@]})) || return 0
  setup_run_cache_take_v "$cws" "$log" && return 0
  [[ $REPLY == "no setup cache" ]] || printf '[orbit] the setup cache is not taken: %s\n' "$REPLY" >>"$log"
  if [[ $REPLY == *": discarded" ]]; then
    IFS= read -r base <"$LOOP_DIR/.baseline-tree" 2>/dev/null || IFS= read -r base <"$LOOP_DIR/.baseline-commit" 2>/dev/null || true
    printf '[orbit] the setup cache is made again: the setup runs on the untouched tree (%s)\n' "${base:0:12}" >>"$log"
    if [[ -n $base ]] && evidence_clean_checkout_v "$base" && setup_run "$cws" "$log" 1; then
      setup_run_cache_store "$cws"
    fi
    if ! evidence_clean_checkout_v "$tree"; then
      REPLY="the clean checkout could not be refilled with the tree to commit (see runner.log)"
      return 1
    fi
    setup_forget "$cws"
    setup_run_cache_take_v "$cws" "$log" && return 0
  fi
  # What a failed copy left goes: the clean checkout holds TREE alone again.
  evidence_clean_scrub "$cws" || true
  setup_run "$cws" "$log" 1
}

# setup_run_candidate CWS LOG: the setup of the candidate worktree CWS (a new one, or one whose
# setup record was forgotten): the cache's copy when CWS's setup inputs are the untouched
# tree's and the cache's listing is the one kept, checked as a claim's clean checkout takes
# it (a cache that does not match is discarded, and made again at the next claim), else the
# setup's run as a check runs (setup_run's status and REPLY). What a failed copy left goes
# first (CWS holds its tree alone again, as the clean checkout does).
setup_run_candidate() {
  local cws=$1 log=$2
  ((${#SETUP_CMDS[@]})) || return 0
  setup_run_cache_take_v "$cws" "$log" && return 0
  if [[ $REPLY != "no setup cache" ]]; then
    printf '[orbit] the setup cache is not taken: %s\n' "$REPLY" >>"$log"
  fi
  if [[ $REPLY == "the setup cache could not be copied"* ]]; then
    git -C "$cws" clean -q -f -f -d -x 2>>"$ORBIT_LOG_FILE" || true
  fi
  setup_run "$cws" "$log" 1
}
