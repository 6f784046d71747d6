# ---- the workspace (contract 2.0): recreated from the loop branch when it is missing; a
# ---- loop branch moved by hand is accepted where it is (.branch-head rewritten).
recover_git() { GIT_OPTIONAL_LOCKS=0 git -C "$RC_REPO" "$@"; }

recover_ws_check() {
  local ws=$1 branch=${2:-orbit/$RC_NAME} head want
  [[ -n $ws ]] || return 0
  head=$(recover_git rev-parse --verify -q "refs/heads/$branch" 2>/dev/null || true)
  if [[ ! -e $ws/.git ]]; then
    if [[ -e $ws && -n $(ls -A -- "$ws" 2>/dev/null) ]]; then
      RC_NOTES+=("the workspace $ws exists but is not a git worktree: move it away, then run recover.sh again (it is recreated from $branch)")
    elif [[ -n $head ]]; then
      RC_WS_ADD=$ws RC_WS_BRANCH=$branch
      RC_REPAIRS+=("the workspace $ws is missing: recreated from $branch")
    else
      RC_NOTES+=("the workspace $ws and the loop branch $branch are both gone: recreate the branch (git branch $branch <commit>), then run recover.sh again")
    fi
  fi
  if [[ -n $head && -f $RC_DIR/.branch-head ]]; then
    want=$(<"$RC_DIR/.branch-head")
    if [[ -n $want && $want != "$head" ]] && ! recover_git merge-base --is-ancestor "$want" "$head" 2>/dev/null; then
      RC_BH_WRITE=$head
      RC_REPAIRS+=("the loop branch $branch was moved by hand (from ${want:0:12} to ${head:0:12}): accepted where it is now (.branch-head rewritten; the old head is in the backup)")
    fi
  fi
}

# recover_migrate_check RAN: a loop of an older contract major whose files need moving (scripts
# to re-render, pins of repository files, .baseline, a workspace to create, the user's
# checkout to give back) needs the binary: recover.sh only brings the state to this
# contract once they are done.
recover_migrate_check() {
  local why=''
  if recover_older_major "$RC_LOOP_CV"; then
    why="loop.toml and the scripts are of contract $RC_LOOP_CV"
  elif [[ -f $RC_DIR/.baseline ]]; then
    why=".baseline (contract 1.0) is still there"
  elif grep -q '^[0-9a-f]*  \.\./' -- "$RC_DIR/pins.sha256" 2>/dev/null; then
    why="pins.sha256 names repository files through ../"
  elif (($1)); then
    recover_ws_path_v
    [[ -e $REPLY/.git ]] || why="the workspace $REPLY is to be created"
  fi
  if [[ -n $why ]]; then
    orbit_die "$EXIT_PREFLIGHT" "--migrate of this loop needs the orbit binary ($why): run 'orbit recover --migrate $RC_DIR' (nothing was changed)"
  fi
}

# recover_distrust_unrecorded_state: a state.env that is not one the journal's last state_write
# (or recovery) records — the same generation with another sha256, or a later generation
# it never recorded — is set aside and rebuilt from the evidence (orbit recover's
# distrust_unrecorded_state); a torn checkpoint, or a journal with no sha256, proves
# nothing.
recover_distrust_unrecorded_state() {
  local have why=''
  ((RC_OLD_OK && !RC_OLD_TORN)) || return 0
  [[ -n $RC_STATE_REC_SHA && -n $RC_STATE_REC_GEN ]] || return 0
  have=$(orbit_sha256_file "$RC_DIR/state.env")
  if ((O[GEN] == RC_STATE_REC_GEN)) && [[ $have != "$RC_STATE_REC_SHA" ]]; then
    why="events.jsonl:$RC_STATE_REC_LINE says gen $RC_STATE_REC_GEN was written with sha256 ${RC_STATE_REC_SHA:0:12}, the file is ${have:0:12}"
  elif ((O[GEN] > RC_STATE_REC_GEN)); then
    why="the journal's last record of it (events.jsonl:$RC_STATE_REC_LINE) is gen $RC_STATE_REC_GEN"
  else
    return 0
  fi
  RC_REPAIRS+=("state.env (gen ${O[GEN]}) is not a state the journal records ($why): written by something other than the runner (loop_tamper); rebuilt from the evidence")
  RC_OLD_GEN=${O[GEN]}
  RC_OLD_OK=0
  RC_SIDECAR_OK=0
  O=()
}

# recover_set_aside_untrusted VERDICT: result records the journal does not vouch for (another
# sha256 than their iteration_result gives; none announced where the runner announces every
# record, save its own unfinished record of iteration L+1) are moved aside, never deleted
# (orbit recover's set_aside_untrusted_records). L's own record, when L (ending VERDICT) is
# retried or claims DONE, is left to the schedule.
recover_set_aside_untrusted() {
  local verdict=$1 d n why have
  while IFS= read -r d; do
    n=${d##*/}
    ((${#n} <= 9)) || continue
    n=$((10#$n))
    [[ -f $d/result.env && ! -L $d/result.env ]] || continue
    if ((n == RC_LAST)) && [[ $verdict == "$STATUS_ABORTED" || $verdict == "$STATUS_BLOCKED" || $verdict == "$STATUS_DONE" ]]; then
      continue
    fi
    why=''
    if [[ -n ${EVR[$n]:-} ]]; then
      if [[ ${EVR[$n]} != - ]]; then
        have=$(orbit_sha256_file "$d/result.env")
        if [[ $have != "${EVR[$n]}" ]]; then
          why="it is not the record the runner wrote (its iteration_result says sha256 ${EVR[$n]:0:12}, the file is ${have:0:12})"
        fi
      fi
    elif [[ -n $RC_FIRST_IR ]] && ((n >= RC_FIRST_IR && n != RC_LAST + 1)); then
      why='no iteration_result event announces it (planted)'
    fi
    if [[ -n $why ]]; then
      recover_set_aside_record "$n" "$why" result.env
    fi
  done < <(find "$RC_DIR/iterations" -mindepth 1 -maxdepth 1 -type d -name '[0-9][0-9][0-9][0-9][0-9][0-9]*' ! -name '*[!0-9]*' 2>/dev/null | LC_ALL=C sort)
}

# recover_set_aside_record N WHY [FILE]: moves iteration N's FILE (or everything of the attempt)
# into iterations/N/untrusted.K/.
recover_set_aside_record() {
  local n=$1 why=$2 file=${3:-} idir k f moved=0
  idir=$(recover_iter_dir "$n")
  [[ -d $idir && ! -L $idir ]] || return 0
  k=1
  while [[ -e $idir/untrusted.$k ]]; do k=$((k + 1)); done
  while IFS= read -r f; do
    RC_MOVES_FROM+=("$f")
    RC_MOVES_TO+=("$idir/untrusted.$k/${f##*/}")
    moved=1
  done < <(if [[ -n $file ]]; then
    if [[ -e $idir/$file ]]; then printf '%s\n' "$idir/$file"; fi
  else
    find "$idir" -mindepth 1 -maxdepth 1 ! -name 'retried.*' ! -name 'untrusted.*' | LC_ALL=C sort
  fi)
  if ((moved)); then
    RC_REPAIRS+=("iteration $n's record set aside in iterations/$(printf '%06d' "$n")/untrusted.$k/: $why")
  fi
}

# recover_done_distrust_v N: REPLY says why iteration N's DONE (its last iteration_end says DONE)
# is not to be believed, or is empty (orbit recover's done_distrusted): (a) the journal
# chains throughout and the DONE came after its last seal; (c) iterations/N/result.env is
# a record saying VERDICT=DONE, the one its iteration_result announced (where the runner
# announces them); (d) when the loop commits, the loop branch holds the iteration's commit,
# or, for an iteration that changed nothing, the tree its record ends with.
recover_done_distrust_v() {
  local n=$1 rec have branch autocommit=true line tree
  REPLY=''
  if [[ -n $RC_EV_BREAK_LINE ]]; then
    REPLY="the journal's chain breaks at events.jsonl:$RC_EV_BREAK_LINE ($RC_EV_BREAK_WHY)"
    return 0
  fi
  if [[ -n $RC_LAST_SEAL && -n ${EVL[$n]:-} ]] && ((EVL[$n] < RC_LAST_SEAL)); then
    REPLY="its iteration_end came before the journal was sealed after a break (events.jsonl:$RC_LAST_SEAL)"
    return 0
  fi
  rec="$(recover_iter_dir "$n")/result.env"
  if ! state_result_parse "$rec" || [[ ${RP[VERDICT]:-} != "$STATUS_DONE" ]]; then
    printf -v REPLY 'iterations/%06d/result.env is missing, is no record, or does not say VERDICT=DONE' "$n"
    return 0
  fi
  if [[ -n ${EVR[$n]:-} ]]; then
    if [[ ${EVR[$n]} != - ]]; then
      have=$(orbit_sha256_file "$rec")
      if [[ $have != "${EVR[$n]}" ]]; then
        printf -v REPLY 'iterations/%06d/result.env is not the record the runner wrote (its iteration_result says sha256 %s, the file is %s)' "$n" "${EVR[$n]:0:12}" "${have:0:12}"
        return 0
      fi
    fi
  elif [[ -n $RC_FIRST_IR ]] && ((n >= RC_FIRST_IR)); then
    printf -v REPLY 'no iteration_result event announces iterations/%06d/result.env (the runner announces every record)' "$n"
    return 0
  fi
  line=$(grep -m 1 -E '^autocommit = (true|false)$' -- "$RC_DIR/loop.toml" || true)
  if [[ -n $line ]]; then autocommit=${line#autocommit = }; fi
  [[ $autocommit == true ]] || return 0
  branch=${O[ITER_BRANCH]:-orbit/$RC_NAME}
  while IFS= read -r line; do
    if [[ $line == "$RC_NAME|$n" ]]; then return 0; fi
  done < <(recover_git log "refs/heads/$branch" \
    --format='%(trailers:key=Orbit-Loop,valueonly,separator=%x2C)|%(trailers:key=Orbit-Iteration,valueonly,separator=%x2C)' -- 2>/dev/null || true)
  if [[ ${RP[CHANGED]:-} == 0 && -n ${RP[TREE_AFTER]:-} ]]; then
    tree=$(recover_git rev-parse --verify -q "refs/heads/$branch^{tree}" 2>/dev/null || true)
    if [[ $tree == "${RP[TREE_AFTER]}" ]]; then return 0; fi
  fi
  REPLY="the loop commits, but no commit on $branch carries Orbit-Iteration: $n (and the branch's tree is not the one the record ends with)"
}
