# ---- the runner's memory of what it did not write (contract section 7). TRUST_LOOP is the
# ---- loop directory as the runner last saw it (one line per entry: type, inode, size,
# ---- modification and change times, path), TRUST_GIT git's control files and the user's
# ---- git configuration. Before and after every agent and check run, what is on disk is
# ---- compared with them: during such a run nothing of the loop directory changes but the
# ---- runner's scratch and logs; between runs, the runner's own files do, never the pinned
# ---- ones or an earlier iteration's record; git's control files never change at all.
TRUST_LOOP=
TRUST_GIT=
TRUST_HELD=0
TRUST_ITER=0
TRUST_BAD=
TRUST_REASON=
TRUST_WANT=
TRUST_HAVE=
# Set in a subshell whose looks the runner takes itself, around it (trust_defer).
TRUST_DEFERRED=0

# trust_defer: in this subshell (a fan-out candidate's checks or its probe, which run beside
# the others) trust_check and trust_hold_loop look at nothing: the runner compares what it
# holds before they start and after they have all ended.
trust_defer() {
  TRUST_DEFERRED=1
}

# trust_broken BAD REASON WANT HAVE [INTEGRITY]: a change the runner found by a look of its
# own (a fan-out candidate's worktree), named in TRUST_* as trust_check names one; with
# INTEGRITY 1, INTEGRITY_REASON is REASON too (the loop stops ABORTED).
trust_broken() {
  TRUST_BAD=$1 TRUST_REASON=$2 TRUST_WANT=$3 TRUST_HAVE=$4
  if ((${5:-0})); then
    INTEGRITY_REASON=$2
  fi
}

# trust_loop_v: REPLY is the loop directory's listing, one program and in the order the
# file system gives (compared as it is first; sorted only when it differs: trust_check).
# The files the runner writes during every run, its scratch and its logs, are left out
# while they are plain files (they may change at any look: trust_may_change), so that a run
# that touched nothing else leaves the listing as it was; anything else there (a link, a
# fifo) is listed as anywhere. The setup's cache (.setup-cache/, what a setup made: thousands
# of files) is one line: its listing is checked against .setup-cache.sum before each use.
trust_loop_v() {
  local q
  trust_list_v loop "$LOOP_DIR" && return 0
  trust_glob_quote_v "$LOOP_DIR"
  q=$REPLY
  REPLY=$(find "$LOOP_DIR" -mindepth 1 \( -name $'*\n*' -printf 'X - - - - %P\n' -prune \) -o \
    \( -path "$q/.setup-cache" -type d -printf 'd - - - - %P\n' -prune \) -o \
    \( -type f \( -path "$q/.run-tmp/*" -o -path "$q/runner.log" -o -path "$q/runner.log.1" \
    -o -path "$q/cron.log" -o -path "$q/cron.log.1" -o -path "$q/systemd.log" -o -path "$q/systemd.log.1" \
    -o -path "$q/notify.log" -o -path "$q/notify.log.1" \) \) -o \
    \( -type d -printf 'd - - - - %P\n' \) -o -printf '%y %i %s %T@ %C@ %P\n' 2>/dev/null)
}

# trust_list_v MODE ARG...: REPLY is a listing (MODE loop or git: trust_loop_v's or
# trust_git_v's) by the hasher, else by its program run once: the same lines either way.
# Status 1 without perl.
trust_list_v() {
  local LC_ALL=C req n
  orbit_hasher_args_v "$@"
  req=$REPLY
  orbit_hasher_ask_v L "$req" && return 0
  REPLY=$(perl -e "$ORBIT_HASHER_PL" 2>/dev/null <<<"L ${#req}"$'\n'"$req")
  REPLY=${REPLY#ready$'\n'}
  n=${REPLY%%$'\n'*}
  REPLY=${REPLY#"$n"}
  REPLY=${REPLY#$'\n'}
  [[ $n =~ ^[0-9]+$ ]] && ((${#REPLY} == n))
}

# trust_glob_quote_v PATH: REPLY is PATH as a find -path pattern that matches it alone.
trust_glob_quote_v() {
  REPLY=${1//\\/\\\\}
  REPLY=${REPLY//\*/\\*}
  REPLY=${REPLY//\?/\\?}
  REPLY=${REPLY//\[/\\[}
}

# The files git's configuration reads or names outside the repository's own, resolved once
# per run: every file `git config --list --show-origin --includes` shows an entry of (from the
# user's checkout and from the workspace, whose branch an includeIf "onbranch:" may match),
# every file an include.path or includeIf.*.path names (read or not yet there: an agent could
# create it), the files GIT_CONFIG_GLOBAL and GIT_CONFIG_SYSTEM name, and the excludes and
# attributes files it names (core.excludesFile, core.attributesFile). Each is watched with
# git's control files (trust_git_v).
# The directories of the runner's PATH that lie in HOME, the repository or the workspace
# (TRUST_PATH_DIRS, one per line): a program the agent puts there (a `git` in ~/.local/bin)
# would run as the runner, outside any sandbox, at its next call. Their entries are watched
# too; a change is script_tamper.
TRUST_GIT_NAMED=
TRUST_PATH_DIRS=
TRUST_GIT_NAMED_READ=0
trust_git_named() {
  local p d origin kv key val base
  local -A seen=()
  local -a path_dirs=()
  ((TRUST_GIT_NAMED_READ)) && return 0
  TRUST_GIT_NAMED_READ=1
  IFS=: read -r -a path_dirs <<<"${PATH:-}"
  for d in "${path_dirs[@]}"; do
    d=${d%/}
    [[ $d == /?* && $d != *$'\n'* && -z ${seen[$d]:-} ]] || continue
    for p in "${HOME:-}" "$REPO_ROOT" "$WS"; do
      if [[ $p == /?* && ($d == "${p%/}" || $d == "${p%/}"/*) ]]; then
        seen[$d]=1
        TRUST_PATH_DIRS+="$d"$'\n'
        break
      fi
    done
  done
  trust_git_name_add "${GIT_CONFIG_GLOBAL:-}"
  trust_git_name_add "${GIT_CONFIG_SYSTEM:-}"
  for d in "$REPO_ROOT" "$WS"; do
    [[ -n $d && -d $d ]] || continue
    # Every value of core.excludesFile and core.attributesFile any file sets (git uses the
    # last; watching the others too costs nothing), read from the same listing: a path as
    # git's --path reads it (~/ is HOME, a relative one is relative to where git runs).
    while IFS= read -r -d '' origin && IFS= read -r -d '' kv; do
      [[ $origin == file:/* ]] || continue
      origin=${origin#file:}
      trust_git_name_add "$origin"
      key=${kv%%$'\n'*} val=${kv#*$'\n'}
      [[ $kv == *$'\n'* ]] || continue
      if [[ $key == core.excludesfile || $key == core.attributesfile ]]; then
        base=$d
      elif [[ $key == include.path || ($key == includeif.* && $key == *.path) ]]; then
        base=${origin%/*}
      else
        continue
      fi
      if [[ ${val:0:1} == "~" && ${val:1:1} == / ]]; then
        val=${HOME:-/nonexistent}/${val:2}
      elif [[ $val != /* ]]; then
        val=$base/$val
      fi
      trust_git_name_add "$val"
    done < <(git -C "$d" config --list --show-origin --includes -z 2>/dev/null)
  done
}

# trust_git_name_add PATH: PATH watched with git's control files, once (trust_git_named's
# `seen` tells which are).
trust_git_name_add() {
  [[ $1 == /* && $1 != *$'\n'* && -z ${seen[$1]:-} ]] || return 0
  seen[$1]=1
  TRUST_GIT_NAMED+="$1"$'\n'
}

trust_git_v() {
  local p
  local -a roots=() named=() pdirs=() prune=()
  REPLY=''
  trust_git_named
  mapfile -t named <<<"${TRUST_GIT_NAMED%$'\n'}"
  mapfile -t pdirs <<<"${TRUST_PATH_DIRS%$'\n'}"
  # info/refs not at all: every repack (a detached `gc --auto` of the user's commit, git
  # maintenance) rewrites it for the dumb HTTP transport, and nothing local reads it.
  trust_glob_quote_v "$GIT_COMMON_ABS/info/refs"
  prune=(-path "$REPLY")
  REPLY=''
  for p in ${pdirs[@]+"${pdirs[@]}"}; do
    [[ -n $p ]] || continue
    if [[ -d $p ]]; then
      roots+=("$p")
      # A PATH directory by its entries alone (not what lies below them).
      trust_glob_quote_v "$p"
      prune+=(-o -path "$REPLY/*/*")
      REPLY=''
    else
      REPLY+="absent $p"$'\n'
    fi
  done
  for p in "$GIT_COMMON_ABS/config" "$GIT_COMMON_ABS/config.worktree" "$GIT_COMMON_ABS/hooks" \
    "$GIT_COMMON_ABS/info" "$GIT_COMMON_ABS/refs/replace" "$GIT_DIR_ABS/config.worktree" "$GIT_DIR_ABS/commondir" \
    "${HOME:-/nonexistent}/.gitconfig" "${XDG_CONFIG_HOME:-${HOME:-/nonexistent}/.config}/git/config" \
    "${XDG_CONFIG_HOME:-${HOME:-/nonexistent}/.config}/git/attributes" \
    "${XDG_CONFIG_HOME:-${HOME:-/nonexistent}/.config}/git/ignore" ${named[@]+"${named[@]}"}; do
    [[ -n $p ]] || continue
    if [[ -e $p || -L $p ]]; then
      roots+=("$p")
    else
      REPLY+="absent $p"$'\n'
    fi
  done
  # One look at all of them, in the order the file system gives: a directory by its
  # entries, not its times. By perl (trust_list_v) where there is one, else by find.
  ((${#roots[@]})) || return 0
  local absent=$REPLY
  if trust_list_v git "$GIT_COMMON_ABS/info/refs" ${pdirs[@]+"${pdirs[@]/#/P}"} "${roots[@]/#/R}"; then
    REPLY=$absent$REPLY
  else
    REPLY=$absent
    REPLY+=$(find "${roots[@]}" \( "${prune[@]}" \) -prune -o \( -type d -printf 'd - - - - %p\n' \) -o \
      -printf '%y %i %s %T@ %C@ %p\n' 2>/dev/null)
  fi
}

# trust_same LISTING LISTING: whether two listings hold the same lines, in any order (one
# sort of each, asked only when they differ as they are).
trust_same() {
  [[ $1 == "$2" ]] && return 0
  [[ $(LC_ALL=C sort <<<"$1") == "$(LC_ALL=C sort <<<"$2")" ]]
}

# trust_hold: what the runner holds from now on (after its own writes).
trust_hold() {
  trust_loop_v
  TRUST_LOOP=$REPLY
  trust_git_v
  TRUST_GIT=$REPLY
  TRUST_ITER=$CUR_ITER
  TRUST_HELD=1
}

# trust_hold_loop: the loop directory as the runner left it just now (its own writes since
# the last look, between two runs, were looked at by a trust_check runner first).
trust_hold_loop() {
  ((TRUST_DEFERRED)) && return 0
  trust_loop_v
  TRUST_LOOP=$REPLY
}

# trust_may_change MODE PATH: whether PATH in the loop directory may have changed since the
# last look. During an agent or check run (MODE agent|check) only the runner's scratch and
# logs; between them (MODE runner), anything the runner writes itself.
trust_may_change() {
  local n
  case $2 in
    .run-tmp | .run-tmp/* | runner.log | runner.log.1 | cron.log | cron.log.1 | systemd.log | systemd.log.1 | notify.log | notify.log.1) return 0 ;;
  esac
  [[ $1 == runner ]] || return 1
  case $2 in
    goal.md | prompt.md | verify.sh | holdout.sh | run-loop.sh | recover.sh | notify.sh | lib.sh | loop.toml | pins.sha256 | pins.sets | pins.home | \
      .pins | .pins/* | holdout | holdout/* | .baseline-commit | .baseline-tree | .origin-branch) return 1 ;;
    iterations/[0-9][0-9][0-9][0-9][0-9][0-9] | iterations/[0-9][0-9][0-9][0-9][0-9][0-9]/*)
      n=${2#iterations/}
      n=${n%%/*}
      ((10#$n >= TRUST_ITER))
      return
      ;;
  esac
  return 0
}

# trust_check MODE: (MODE agent, check, runner or gate) compares git's control files, then
# the loop directory, with what the runner holds; status 1 with TRUST_BAD (the path),
# TRUST_REASON, TRUST_WANT and TRUST_HAVE set on a change it did not make (a pinned loop file changed is named with its own reason:
# goal_drift, reward_hack, script_tamper; anything else is loop_tamper, git's files
# git_tamper). Holds what it found either way.
trust_check() {
  local mode=$1 now bad='' bad_why='' pinned='' pinned_why=''
  # An integrity gate's look (MODE gate) is a runner's look that does not take the user's
  # refs: they are taken by the look just before each run, and compared just after it.
  local refs=$mode
  [[ $mode == gate ]] && mode=runner
  TRUST_BAD=
  ((TRUST_DEFERRED)) && return 0
  if ! schedule_check; then
    TRUST_REASON=$REASON_SCRIPT_TAMPER TRUST_BAD=${SCHED_BAD:-the installed schedule} TRUST_WANT=$SCHED_WANT TRUST_HAVE=$SCHED_HAVE
    return 1
  fi
  if ! home_check; then
    TRUST_REASON=$REASON_PERMISSION_HIJACK TRUST_BAD=${HOME_BAD:-the held files in HOME} TRUST_WANT=$HOME_WANT TRUST_HAVE=$HOME_HAVE
    return 1
  fi
  if [[ $refs != gate ]] && ! user_refs_check "$mode"; then
    TRUST_REASON=$REASON_GIT_TAMPER TRUST_BAD=$USERREFS_BAD TRUST_WANT=$USERREFS_WANT TRUST_HAVE=$USERREFS_HAVE
    return 1
  fi
  if ((!TRUST_HELD)); then
    trust_hold
    return 0
  fi
  trust_git_v
  if ! trust_same "$REPLY" "$TRUST_GIT"; then
    TRUST_REASON=$REASON_GIT_TAMPER
    TRUST_WANT='unchanged since the run started' TRUST_HAVE='changed'
    TRUST_BAD=$(diff <(LC_ALL=C sort <<<"$TRUST_GIT") <(LC_ALL=C sort <<<"$REPLY") | grep -m 1 '^[<>] .' || true)
    TRUST_BAD=${TRUST_BAD#[<>] }
    if [[ $TRUST_BAD == absent\ * ]]; then
      TRUST_BAD=${TRUST_BAD#absent }
    else
      TRUST_BAD=${TRUST_BAD#* * * * * }
    fi
    if [[ -n $TRUST_PATH_DIRS && $'\n'$TRUST_PATH_DIRS == *$'\n'"${TRUST_BAD%/*}"$'\n'* || $'\n'$TRUST_PATH_DIRS == *$'\n'"$TRUST_BAD"$'\n'* ]]; then
      TRUST_REASON=$REASON_SCRIPT_TAMPER
      TRUST_WANT='unchanged since the run started (a directory of the runner'"'"'s PATH, whose programs it runs)'
    fi
    # A change is never taken for none: it is named, whatever the listing's shape.
    [[ -n $TRUST_BAD ]] || TRUST_BAD="git's control files ($GIT_COMMON_ABS)"
    TRUST_GIT=$REPLY
    return 1
  fi
  TRUST_GIT=$REPLY
  trust_loop_v
  now=$REPLY
  # The loop directory itself removed, emptied or replaced (by a link, say): its listing is
  # empty. The run stops here, before anything is written into it or through a link.
  if [[ -z $now ]] || ! trust_loop_dir_whole; then
    trust_loop_lost "$mode"
    return 1
  fi
  if [[ $now != "$TRUST_LOOP" ]]; then
    trust_loop_changes "$mode" "$now"
  fi
  TRUST_LOOP=$now
  if [[ -n $pinned ]]; then
    orbit_pin_reason_v "$pinned"
    TRUST_REASON=$REPLY TRUST_BAD=$pinned
    pins_want_v "$pinned" || REPLY=absent
    TRUST_WANT=$REPLY TRUST_HAVE=missing
    if orbit_regular "$LOOP_DIR/$pinned"; then
      orbit_sha256_file_v "$LOOP_DIR/$pinned"
      TRUST_HAVE=$REPLY
    elif [[ -e $LOOP_DIR/$pinned || -L $LOOP_DIR/$pinned ]]; then
      TRUST_HAVE=$pinned_why
    fi
    return 1
  fi
  if [[ -n $bad ]]; then
    TRUST_REASON=$REASON_LOOP_TAMPER TRUST_BAD=$LOOP_DIR/$bad TRUST_WANT='as the runner left it' TRUST_HAVE=$bad_why
    return 1
  fi
  TRUST_ITER=$CUR_ITER
  return 0
}

# trust_loop_changes MODE NOW (trust_check's): what differs between the listing the runner
# holds and NOW, each change not MODE's to make named through trust_note (into trust_check's
# pinned and bad).
trust_loop_changes() {
  local mode=$1 now=$2 line key path ty why diffs
  local -A before=() was=()
  # Anything but a file or a directory, wherever it is, changed or not.
  if [[ $'\n'$now == *$'\n'[!fd]' '* ]]; then
    while IFS= read -r line; do
      ty=${line%% *}
      path=${line#* * * * * }
      why=$(orbit_file_kind "$LOOP_DIR/$path")
      [[ $ty == X ]] && why='a name with a newline'
      trust_note "$path" "$why"
    done < <(grep -av '^[fd] ' <<<"$now" || true)
  fi
  # Then only the lines that differ: a path on both sides changed, one only before was
  # removed, one only now was created. The listings are in the file system's order: a
  # line on both sides as it was (an entry the file system now gives in another place) is
  # no change.
  orbit_hasher_args_v "$TRUST_LOOP" "$now"
  if orbit_hasher_ask_v D "$REPLY"; then
    diffs=$REPLY
  else
    diffs=$(diff -- <(printf '%s\n' "$TRUST_LOOP") <(printf '%s\n' "$now") || true)
  fi
  # (A key is never empty: bash ends the shell at once on an empty subscript.)
  while IFS= read -r line; do
    [[ $line == '< '* ]] || continue
    key=${line#< } path=${line#< * * * * * }
    [[ -n $key && -n $path ]] || continue
    before[$path]=1
    was[$key]=1
  done <<<"$diffs"
  while IFS= read -r line; do
    [[ $line == '> '* ]] || continue
    key=${line#> } path=${line#> * * * * * }
    [[ -n $key && -n $path ]] || continue
    if [[ -n ${was[$key]-} ]]; then
      unset 'before[$path]'
      continue
    fi
    if [[ $line == '> '[fd]' '* ]] && ! trust_may_change "$mode" "$path"; then
      if [[ -n ${before[$path]-} ]]; then why=changed; else why=created; fi
      trust_note "$path" "$why"
    fi
    unset 'before[$path]'
  done <<<"$diffs"
  while IFS= read -r line; do
    [[ $line == '< '* ]] || continue
    path=${line#< * * * * * }
    [[ -n $path ]] || continue
    if [[ -n ${before[$path]-} ]] && ! trust_may_change "$mode" "$path"; then
      trust_note "$path" removed
    fi
  done <<<"$diffs"
}

# trust_loop_dir_whole: the loop directory is still a directory of its own (not gone, not a link):
# the runner may write into it.
trust_loop_dir_whole() {
  [[ -d $LOOP_DIR && ! -L $LOOP_DIR ]]
}

# trust_loop_lost MODE (trust_check's): the loop directory was removed, emptied or replaced
# since the runner last looked (loop_tamper, contract 7). An emptied directory is still the
# runner's: the stop is recorded there as any other (ABORTED, exit 3). One that is gone or a
# link records nothing (nothing is recreated, nothing written through a link, runner.log
# included): the one footer says what happened and the run exits 3. In a subshell, the
# caller stops (TRUST_BAD).
trust_loop_lost() {
  local what target
  if [[ -L $LOOP_DIR ]]; then
    target=$(readlink -- "$LOOP_DIR" 2>/dev/null) || target='?'
    what="replaced by a symlink to ${target//[[:cntrl:]]/?}"
  elif [[ ! -e $LOOP_DIR ]]; then
    what=removed
  elif [[ ! -d $LOOP_DIR ]]; then
    what="replaced by $(orbit_file_kind "$LOOP_DIR")"
  elif [[ ! -r $LOOP_DIR || ! -x $LOOP_DIR ]]; then
    what='made unreadable'
  else
    what=emptied
  fi
  TRUST_REASON=$REASON_LOOP_TAMPER TRUST_BAD=$LOOP_DIR TRUST_WANT='the loop directory as the runner left it' TRUST_HAVE=$what
  [[ $BASHPID == "$$" ]] || return 0
  if [[ $what == emptied && -w $LOOP_DIR ]]; then
    pins_finding "$LOOP_DIR" "$TRUST_WANT" "$what"
    state_event integrity_fail "$CUR_ITER" when "after a run ($1)" code "$REASON_LOOP_TAMPER" file "$LOOP_DIR" expected "$TRUST_WANT" actual "$what"
    orbit_log "integrity: the loop directory $LOOP_DIR was $what (loop_tamper)"
    resume_finish "$EXIT_INTEGRITY" "$STATUS_ABORTED" "$REASON_LOOP_TAMPER" "the loop directory was $what during the run; review what is left, restore it from a copy (or orbit init the loop again), then orbit recover" >&8
  fi
  orbit_log_to ''
  orbit_log "integrity: the loop directory $LOOP_DIR was $what during the run (loop_tamper): nothing can be recorded in it; the run stops (exit $EXIT_INTEGRITY)"
  sweep_env "ORBIT_OWNER=$LOOP_DIR" wait
  config_footer "$STATUS_CONTINUE" "ABORTED (loop_tamper): the loop directory was $what; nothing could be recorded in it: restore it from a copy or orbit init the loop again" >&8
  exit "$EXIT_INTEGRITY"
}

# trust_note PATH WHY (trust_check's): the first change to a pinned loop file, else the first
# change of any other file, is the one reported.
trust_note() {
  case $1 in
    goal.md | prompt.md | verify.sh | holdout.sh | holdout/?* | run-loop.sh | recover.sh | notify.sh | lib.sh | loop.toml)
      if [[ -z $pinned ]]; then
        pinned=$1 pinned_why=$2
      fi
      ;;
    *)
      if [[ -z $bad ]]; then
        bad=$1 bad_why=$2
      fi
      ;;
  esac
}

# trust_integrity_gate WHEN: check every pin against the held manifest, then the loop directory
# and git's control files against the runner's memory. What an agent or check run changed
# was looked at as soon as it ended (agent_run, checks_run_verify: TRUST_BAD), before the runner
# wrote anything; this looks at what changed since. On a mismatch, status 1 with
# INTEGRITY_REASON set (the caller stops ABORTED, EXIT_INTEGRITY).
trust_integrity_gate() {
  local when=$1 reason
  if trust_workspace_intact; then
    # git's control files first (the pin check itself runs git), then the pins, then the
    # rest of the loop directory.
    pins_finding ''
    if { [[ -z $TRUST_BAD ]] && trust_check gate; } && pins_check; then
      state_event integrity_pass "$CUR_ITER" when "$when"
      return 0
    fi
    if [[ -n $TRUST_BAD ]]; then
      reason=$TRUST_REASON
      pins_finding "$TRUST_BAD" "$TRUST_WANT" "$TRUST_HAVE"
    else
      orbit_pin_reason_v "$PIN_BAD"
      reason=$REPLY
    fi
  else
    reason=$REASON_GIT_TAMPER
  fi
  state_event integrity_fail "$CUR_ITER" when "$when" code "$reason" file "$PIN_BAD" expected "$PIN_WANT" actual "$PIN_HAVE"
  orbit_log "integrity: $PIN_BAD changed ($reason): expected $PIN_WANT, found $PIN_HAVE"
  INTEGRITY_REASON=$reason
  return 1
}
INTEGRITY_REASON=

# trust_integrity_reward_hack WHEN FILE WANT HAVE: a reward hack the DONE gate found in the change
# itself rather than in a pin (a line that names the holdout), recorded as trust_integrity_gate
# records a broken pin, INTEGRITY_REASON reward_hack (the caller stops ABORTED,
# EXIT_INTEGRITY).
trust_integrity_reward_hack() {
  pins_finding "$2" "$3" "$4"
  state_event integrity_fail "$CUR_ITER" when "$1" code "$REASON_REWARD_HACK" file "$2" expected "$3" actual "$4"
  orbit_log "integrity: $2 ($REASON_REWARD_HACK): expected $3, found $4"
  INTEGRITY_REASON=$REASON_REWARD_HACK
}

# trust_workspace_intact: the workspace is still the worktree the run found: not a symlink, and its
# .git file names the same git directory. An agent that swaps it for a link (to the user's
# checkout, say) would have the loop's git calls, and its commits, land there. (Read with
# bash alone: this is asked before and after every agent run.)
trust_workspace_intact() {
  local line=''
  if [[ -n $GIT_DIR_ABS && ! -L $WS && -f $WS/.git && ! -L $WS/.git ]]; then
    IFS= read -r line <"$WS/.git" 2>/dev/null || true
    if [[ $line == "gitdir: "* && ${line#gitdir: } -ef $GIT_DIR_ABS ]]; then
      return 0
    fi
  fi
  if [[ -L $WS ]]; then
    pins_finding "$WS" "the worktree of $GIT_DIR_ABS" "a symlink to $(readlink -- "$WS" 2>/dev/null || true)"
  else
    pins_finding "$WS" "the worktree of $GIT_DIR_ABS" "no worktree of this loop (${line:-no .git file})"
  fi
  return 1
}

trust_integrity_stop() {
  local msg
  msg="$INTEGRITY_REASON: $PIN_BAD changed; review it, then 'orbit recover --restore-pinned' to undo or 'orbit recover --repin' to accept"
  if [[ $INTEGRITY_REASON == "$REASON_GIT_TAMPER" && $PIN_BAD == "$WS" ]]; then
    msg="git_tamper: remove what is there, then 'orbit recover --repin' recreates the workspace $WS from $LOOP_BRANCH (it is no longer the loop's worktree: $PIN_HAVE)"
  fi
  if [[ $INTEGRITY_REASON == "$REASON_GOAL_DRIFT" ]]; then
    msg="goal_drift: goal.md changed; review it, then 'orbit recover --repin-goal' to accept or '--restore-pinned' to undo"
  fi
  if schedule_stop_msg_v "$PIN_BAD" || home_stop_msg_v "$PIN_BAD" || user_refs_stop_msg_v "$PIN_BAD"; then
    msg=$REPLY
  fi
  resume_finish "$EXIT_INTEGRITY" "$STATUS_ABORTED" "$INTEGRITY_REASON" "$msg"
}

# The first run pins goal.md, every protected path and the agent permission files.
trust_first_run_pins() {
  local pins_text g f
  pins_text=$(cat -- "$LOOP_DIR/pins.sha256")
  pins_text=$(printf '%s\n' "$pins_text" | grep -v '  goal\.md$' || true)
  {
    if [[ -n $pins_text ]]; then
      printf '%s\n' "$pins_text"
    fi
    printf '%s  goal.md\n' "$(orbit_sha256_file "$LOOP_DIR/goal.md")"
    {
      for g in "${PROTECT_GLOBS[@]}"; do
        trust_protected_files "$g"
      done
      pins_permission_files
      for f in "${PERMISSION_FOUND[@]}"; do
        printf '%s\0' "$f"
      done
      trust_loop_copy_files
    } | sort -zu | while IFS= read -r -d '' f; do
      [[ $f == .orbit-agent/* ]] && continue
      [[ $f == *$'\n'* || $f == *\\* ]] && {
        orbit_log "warning: cannot pin '$f' (newline or backslash in its name)"
        continue
      }
      printf '%s  %s\n' "$(orbit_sha256_file "$WS/$f")" "$WS/$f"
    done
  } >"$LOOP_DIR/.pins.sha256.tmp.$$"
  mv -f -- "$LOOP_DIR/.pins.sha256.tmp.$$" "$LOOP_DIR/pins.sha256"
  trust_pins_sets_write
  mkdir -p -- "$LOOP_DIR/.pins"
  cp -p -- "$LOOP_DIR/goal.md" "$LOOP_DIR/.pins/goal.md"
}

# trust_loop_copy_files: the files of the loop directory's copy in the workspace, NUL-separated,
# relative to the workspace's root: a loop directory committed to the repository (as the
# Kubernetes and GitHub Actions schedules need it) is in every checkout of the branch, and
# its copy in the workspace is one the agent can write. The runner never reads or runs it;
# pinned, a change to it stops the loop (script_tamper) before it could be committed and,
# merged, become the loop's own run-loop.sh.
trust_loop_copy_files() {
  local rel
  [[ $LOOP_DIR == "$REPO_ROOT"/* ]] || return 0
  rel=${LOOP_DIR#"$REPO_ROOT"/}
  git -C "$WS" ls-files -z --cached -- ":(literal)$rel/" 2>/dev/null || true
}

# trust_pins_sets_write: pins.sets, one line per protect glob: the sha256 of the set of paths it
# matches (pins_protected_set_v). Written at the first run (and by orbit recover --repin).
trust_pins_sets_write() {
  local g text=''
  for g in "${PROTECT_GLOBS[@]}"; do
    pins_protected_set_v "$g" || orbit_die "$EXIT_PREFLIGHT" "cannot list the files of the protect glob '$g' in $WS"
    text+="$REPLY  $g"$'\n'
  done
  state_write_file "$LOOP_DIR/pins.sets" "$text" || state_records_fail "$LOOP_DIR/pins.sets"
}

# Files matched by one protect glob, NUL-separated, relative to the workspace's root.
trust_protected_files() {
  pins_set_list "$1" || true
}

