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
  # A hook the setup installed (husky's) is one the loop's commits run.
  workspace_git_facts
  trust_hold
}
