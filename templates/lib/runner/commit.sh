# ---- commits: exactly the tree the checks ran on (never "HEAD plus the changed paths"),
# ---- never the loop directory, never the agent's folder; trailers make a replay detectable.
# A commit attempt's outcomes besides git's own statuses: nothing to commit (HEAD holds the
# changes already), and git did not finish in time (timeout(1)'s status). Between the
# functions below only, never a loop exit code.
readonly COMMIT_NOTHING=3 COMMIT_TIMED_OUT=124
commit_iteration() {
  local n=$1 dir=$2 before=$3 after=$4 fresh=${5:-0} list msg existing='' line rc=0 tries=0 title tree
  if ! orbit_true "$AUTOCOMMIT"; then
    printf 'off\n' >"$dir/commit.txt"
    return 0
  fi
  # Idempotent: a crash after the commit and before the state write must not commit twice.
  # (An iteration this process just ran commits after its result.env: none can exist yet.)
  line=''
  ((fresh)) || line=$(config_git_q log -n 50 --format='%H %(trailers:key=Orbit-Loop,valueonly,separator=%x2C)|%(trailers:key=Orbit-Iteration,valueonly,separator=%x2C)' 2>/dev/null || true)
  while IFS= read -r line; do
    if [[ ${line#* } == "$LOOP_NAME|$n" ]]; then
      existing=${line%% *}
      break
    fi
  done <<<"$line"
  # A commit of an earlier attempt that recover set aside (retried.K/) is not this one.
  if [[ -n $existing ]] && grep -qxF -- "$existing" "$dir"/retried.*/commit.txt 2>/dev/null; then
    existing=''
  fi
  if [[ -n $existing ]]; then
    orbit_log "iteration $n is already committed ($existing): not committing again"
    printf '%s\n' "$existing" >"$dir/commit.txt"
    return 0
  fi
  tree_changes_v "$before" "$after"
  list=$CHANGES_FILE
  if ! commit_tree_v "$dir" "$before" "$after"; then
    orbit_log "commit of iteration $n: git could not build the tree to commit (see runner.log)"
    printf 'failed\n' >"$dir/commit.txt"
    return 0
  fi
  tree=$REPLY
  # No change, and HEAD holds the tree to commit: nothing to commit. (HEAD moved by the
  # agent away from that tree is committed back to it.)
  if [[ ! -s $list ]] && commit_head_tree && [[ $HEAD_TREE == "$tree" ]]; then
    printf 'none\n' >"$dir/commit.txt"
    [[ $list == "$CHANGES_FILE" ]] || rm -f -- "$list"
    return 0
  fi
  state_fault before_commit
  # The goal's title: line 3 of goal.md (under "# Goal"), at most 60 characters.
  commit_goal_title_v
  title=$REPLY
  msg="${COMMIT_MESSAGE_PREFIX}orbit($LOOP_NAME): iteration $n"$'\n\n'"Goal: ${title:-see goal.md}"$'\n\n'"Orbit-Loop: $LOOP_NAME"$'\n'"Orbit-Iteration: $n"
  if ! commit_msg_check "$dir" "$msg" "$tree"; then
    orbit_log "commit of iteration $n refused by the commit-msg hook (see $dir/commit.log); the changes stay in the work tree"
    printf 'failed\n' >"$dir/commit.txt"
    return 0
  fi
  while ((tries < 5)); do
    tries=$((tries + 1))
    rc=0
    if ((COMMIT_PLUMBING)); then
      # No hook would run and nothing signs: commit with plumbing, which never rescans the
      # whole work tree (the porcelain refreshes every index entry).
      commit_plumbing "$list" "$msg" "$before" "$tree" >>"$dir/commit.log" 2>&1 || rc=$?
    else
      # For a signature only (no hook runs here: they ran as checks, in the sandbox).
      # Bounded: a signing program that waits on a terminal must not wedge the loop.
      # shellcheck disable=SC2016  # the single-quoted script expands in the child, by design
      GIT_LITERAL_PATHSPECS=1 GIT_TERMINAL_PROMPT=0 \
        proc_run_bounded "$COMMIT_TIMEOUT_S" "$KILL_GRACE_S" /dev/null "$dir/commit.log" \
        "$BASH" -c 'cd -- "$1" || exit 1
          git read-tree "$2" && git -c core.hooksPath=/dev/null commit -q --no-verify --no-edit -m "$3"' \
        orbit-commit "$WS" "$tree" "$msg"
      rc=$ORBIT_RC
      ((rc != 0)) || commit_is_tree "$tree" "$dir/commit.log" || rc=$?
      if ((ORBIT_TIMED_OUT)); then
        orbit_log "commit: git did not finish within ${COMMIT_TIMEOUT_S}s (a hook waiting for input?)"
        printf 'orbit: git commit did not finish within %ss (a hook waiting for input?)\n' "$COMMIT_TIMEOUT_S" >>"$dir/commit.log"
        rc=$COMMIT_TIMED_OUT
        break
      fi
    fi
    if ((rc == 0 || rc == COMMIT_NOTHING)); then
      break
    fi
    if [[ -e $GIT_DIR_ABS/index.lock ]]; then
      orbit_log "commit: .git/index.lock is held; retrying ($tries/5)"
      printf 'orbit: %s is held (try %s of 5)\n' "$COMMIT_LOCK_WORDS" "$tries" >>"$dir/commit.log"
      sleep 1
      continue
    fi
    break
  done
  # git commit failing can mean the same: the agent committed the changes itself.
  if ((rc != 0 && rc != COMMIT_NOTHING && rc != COMMIT_TIMED_OUT && !COMMIT_PLUMBING)) && commit_head_tree &&
    [[ $HEAD_TREE == "$tree" ]]; then
    rc=$COMMIT_NOTHING
  fi
  if ((rc == COMMIT_NOTHING)); then
    orbit_log "iteration $n: nothing to commit, HEAD holds its changes already (committed by the agent?)"
    printf 'none\n' >"$dir/commit.txt"
    [[ $list == "$CHANGES_FILE" ]] || rm -f -- "$list"
    return 0
  fi
  if ((rc != 0)); then
    orbit_log "commit of iteration $n failed (see $dir/commit.log); the changes stay in the work tree"
    printf 'failed\n' >"$dir/commit.txt"
    return 0
  fi
  if ((COMMIT_PLUMBING)); then
    printf '%s\n' "$COMMIT_ID" >"$dir/commit.txt"
    # git commit runs git's automatic housekeeping (packing loose objects when there are
    # many): so does this, every 100 iterations (gc --auto where maintenance is too old).
    if ((n % 100 == 0)); then
      config_git_q maintenance run --auto --quiet >>"$dir/commit.log" 2>&1 ||
        config_git_q gc --auto --quiet >>"$dir/commit.log" 2>&1 || true
    fi
  else
    config_git_q rev-parse HEAD >"$dir/commit.txt"
  fi
  state_fault after_commit
  [[ $list == "$CHANGES_FILE" ]] || rm -f -- "$list"
}

# commit_refusal_v DIR: what refused the iteration's failed commit, from its commit.log
# (the hook's own first lines, or the runner's word that git did not finish), into REPLY;
# COMMIT_LOCKED is 1 when git's index was held by another git (transient: nothing refused
# the change itself).
COMMIT_LOCKED=0
readonly COMMIT_LOCK_WORDS='.git/index.lock'
commit_refusal_v() {
  local log=$1/commit.log line said='' k=0
  COMMIT_LOCKED=0
  if [[ -f $log ]] && grep -qF -- "$COMMIT_LOCK_WORDS" "$log" 2>/dev/null &&
    ! grep -q -- 'did not finish within' "$log" 2>/dev/null; then
    COMMIT_LOCKED=1
  fi
  if [[ -f $log ]]; then
    while IFS= read -r line && ((k < 3)); do
      line=${line%$'\r'}
      line=${line//[[:cntrl:]]/ }
      [[ $line == *[![:space:]]* ]] || continue
      said+="${said:+ / }$line"
      k=$((k + 1))
    done < <(head -c 4096 -- "$log")
  fi
  orbit_cut_v "${said:-git commit failed and said nothing}" 160
}

# How a refused commit's summary begins (a rewritten record is known by it).
readonly COMMIT_REFUSED_SAID='the commit of iteration'

# commit_refused_fix_v DIR: REPLY is what a human does about iteration DIR's refused commit.
commit_refused_fix_v() {
  if ((COMMIT_LOCKED)); then
    REPLY="finish or end the other git that holds .git/index.lock, then run the loop again (the change is committed first)"
  elif grep -qF -- "orbit: $COMMIT_MSG_REFUSED_WORDS refused" "$1/commit.log" 2>/dev/null; then
    REPLY="the message is the runner's: give it what the hook wants with commit-message-prefix (say commit-message-prefix = \"PROJ-123 \"), or make the hook pass, or set commit-hooks = false in loop.toml to commit without the hooks (then orbit init --force), then run the loop again (the change is committed first)"
  else
    REPLY="make the hook pass (see commit.log), or set commit-hooks = false in loop.toml to commit without the hooks (then orbit init --force), then run the loop again (the change is committed first)"
  fi
}

# commit_retry_failed: a run that starts after its last iteration's refused commit stopped
# the loop tries that commit again first (the hook may pass now): committed, the loop goes
# on; refused again, it stops BLOCKED again with what refused it. The failed attempt's
# record is kept (commit.failed.txt, commit.failed.log).
commit_retry_failed() {
  local n=$((S[NEXT_ITERATION] - 1)) dir line='' why fix
  ((n >= 1)) && [[ ${S[LAST_STATUS]} == "$STATUS_BLOCKED" && ${S[STOP_REASON]} == "$REASON_TOOL_FAILURE" ]] || return 0
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  [[ -f $dir/commit.txt ]] && IFS= read -r line <"$dir/commit.txt" && [[ $line == failed ]] || return 0
  resume_result_trusted "$n" "$dir/result.env" || return 0
  record_result_read "$dir/result.env"
  iteration_at "$n"
  mv -f -- "$dir/commit.txt" "$dir/commit.failed.txt"
  mv -f -- "$dir/commit.log" "$dir/commit.failed.log" 2>/dev/null || true
  orbit_log "iteration $n's commit was refused when the loop stopped: committing it again"
  commit_iteration "$n" "$dir" "${R[TREE_BEFORE]}" "${R[TREE_AFTER]}" 0
  line=failed
  IFS= read -r line <"$dir/commit.txt" || true
  iteration_at "${S[NEXT_ITERATION]}"
  # What the runner wrote into the iteration's record is its own.
  trust_hold
  if [[ $line =~ ^[0-9a-f]{40,64}$ ]]; then
    workspace_branch_head_record "$line"
    orbit_log "iteration $n is committed now ($line): the loop goes on"
    return 0
  fi
  commit_refusal_v "$dir"
  why=$REPLY
  if ((COMMIT_LOCKED)); then
    orbit_log "iteration $n's commit failed again ($why): the loop goes on, the change stays uncommitted"
    return 0
  fi
  commit_refused_fix_v "$dir"
  fix=$REPLY
  resume_finish "$EXIT_BLOCKED" "$STATUS_BLOCKED" "$REASON_TOOL_FAILURE" "$COMMIT_REFUSED_SAID $n failed again: $why — its change stays uncommitted in the workspace; $fix"
}

# The goal's one-line title (line 3 of goal.md), at most 60 characters, into REPLY.
commit_goal_title_v() {
  local -a lines=()
  mapfile -t -n 3 lines <"$LOOP_DIR/goal.md" 2>/dev/null || true
  orbit_cut_v "${lines[2]-}" 60
}

# commit_plumbing LIST MSG BEFORE TREE: a commit of TREE (commit_tree_v's: whatever HEAD
# holds, an agent that committed or dropped a file from HEAD while leaving it on disk
# changes nothing of it), without hooks. The repository's index takes
# the listed paths too (so git status stays clean) before HEAD moves, compare-and-swap, with
# the porcelain's reflog message. Sets COMMIT_ID; returns 1 with HEAD unmoved on failure, COMMIT_NOTHING when HEAD
# holds the changes already.
COMMIT_ID=
# The last commit this run made, and its tree: while HEAD still names it, git need not be
# asked what HEAD is.
LAST_COMMIT_ID=
LAST_COMMIT_TREE=
# commit_forget_last: HEAD may no longer be the last commit (it was moved and put back).
commit_forget_last() {
  LAST_COMMIT_ID=
}
commit_plumbing() {
  local list=$1 msg=$2 before=$3 after=$4 head base tree
  COMMIT_ID=''
  commit_head_tree || return 1
  head=$HEAD_ID base=$HEAD_TREE tree=$after
  if [[ $tree == "$base" ]]; then
    echo "nothing to commit: HEAD holds these changes already"
    return "$COMMIT_NOTHING"
  fi
  COMMIT_ID=$(config_git_q commit-tree "$tree" -p "$head" <<<"$msg") || return 1
  if [[ $base == "$before" ]]; then
    (cd -- "$WS" && git update-index --add --remove --replace -z --stdin <"$list") || return 1
  else
    # HEAD moved during the iteration (the agent committed): the index becomes the tree.
    config_git_q read-tree "$tree" || return 1
  fi
  config_git_q update-ref -m "commit: ${msg%%$'\n'*}" HEAD "$COMMIT_ID" "$head" || return 1
  LAST_COMMIT_ID=$COMMIT_ID LAST_COMMIT_TREE=$tree
}

# commit_is_tree TREE LOG: the commit just made holds TREE, the tree the checks ran on; else
# (a hook changed what was committed) HEAD goes back to its parent, the log says what the
# hook changed, and the status is 1: the commit failed.
commit_is_tree() {
  local tree=$1 log=$2 out
  out=$(config_git_q rev-parse HEAD 'HEAD^{tree}' 2>/dev/null) || return 1
  [[ ${out#*$'\n'} == "$tree" ]] && return 0
  tree_changes_v "$tree" "${out#*$'\n'}"
  {
    printf 'orbit: a commit hook changed what was committed (%s): the checks ran on another tree, so the commit is undone\n' "$REPLY"
  } >>"$log"
  config_git_q update-ref -m "orbit: undo a commit whose tree is not the checked one" HEAD "${out%%$'\n'*}^" "${out%%$'\n'*}" >>"$log" 2>&1 || true
  config_git_q read-tree "${out%%$'\n'*}^" >>"$log" 2>&1 || true
  return 1
}

# commit_head_tree: HEAD_ID and HEAD_TREE, from what this run committed last while HEAD still
# names it, else from git.
HEAD_ID=
HEAD_TREE=
commit_head_tree() {
  local out
  if [[ -n $LAST_COMMIT_ID ]] && commit_head_file_v && [[ $REPLY == "$LAST_COMMIT_ID" ]]; then
    HEAD_ID=$LAST_COMMIT_ID HEAD_TREE=$LAST_COMMIT_TREE
    return 0
  fi
  out=$(config_git_q rev-parse HEAD 'HEAD^{tree}') || return 1
  HEAD_ID=${out%%$'\n'*} HEAD_TREE=${out#*$'\n'}
}

# commit_of_iteration_v DIR: REPLY is the commit holding iteration DIR's tree: its own, or
# where it had nothing to commit (none), HEAD when HEAD holds the tree it would commit.
commit_of_iteration_v() {
  local c=''
  IFS= read -r c <"$1/commit.txt" 2>/dev/null || true
  [[ $c == 'none' ]] && commit_head_tree && commit_tree_v "$1" "${R[TREE_BEFORE]}" "${R[TREE_AFTER]}" &&
    [[ $HEAD_TREE == "$REPLY" ]] && c=$HEAD_ID
  REPLY=
  [[ $c =~ ^[0-9a-f]{40,64}$ ]] && REPLY=$c
  return 0
}

# commit_tree_v DIR BEFORE AFTER: REPLY is the tree iteration DIR commits: the tree of the
# commit it started on (DIR/head-before, else HEAD) with the iteration's change (BEFORE to
# AFTER) applied; AFTER itself when the iteration started on a clean tree. A path that was
# dirty when it started and that the iteration did not change (a user's scratch file) is not
# its change; whatever the agent did to HEAD changes nothing of it.
commit_tree_v() {
  local dir=$1 before=$2 after=$3 head='' base idx="$LOOP_DIR/.commit-index"
  if [[ -f $dir/head-before ]]; then
    IFS= read -r head <"$dir/head-before" || true
  fi
  base=$(config_git_q rev-parse -q --verify "${head:-HEAD}^{tree}" 2>/dev/null) || base=''
  if [[ -z $base || $base == "$before" ]]; then
    REPLY=$after
    return 0
  fi
  rm -f -- "$idx"
  GIT_INDEX_FILE=$idx config_git_q read-tree "$base" 2>>"$ORBIT_LOG_FILE" || return 1
  # diff-tree -z: ":oldmode newmode oldsha newsha status" NUL path NUL, as index-info lines
  # (mode 0 removes the path).
  commit_index_info "$before" "$after" | GIT_INDEX_FILE=$idx config_git_q update-index -z --index-info 2>>"$ORBIT_LOG_FILE" || return 1
  REPLY=$(GIT_INDEX_FILE=$idx config_git_q write-tree 2>>"$ORBIT_LOG_FILE") || return 1
  rm -f -- "$idx"
}

# commit_index_info BEFORE AFTER: the change from BEFORE to AFTER as update-index
# --index-info lines (NUL-terminated).
commit_index_info() {
  local meta path nm ns st
  while IFS= read -r -d '' meta && IFS= read -r -d '' path; do
    read -r _ nm _ ns st <<<"${meta#:}"
    if [[ $st == D ]]; then
      printf '0 %s\t%s\0' "$ns" "$path"
    else
      printf '%s %s\t%s\0' "$nm" "$ns" "$path"
    fi
  done < <(config_git_q diff-tree -r --no-renames -z "$1" "$2" 2>>"$ORBIT_LOG_FILE")
}

# commit_head_file_v: REPLY is the commit HEAD names, read from the files git keeps it in (a loose
# branch ref, or a detached HEAD); status 1 where that takes git (packed refs, reftable).
commit_head_file_v() {
  local line ref
  REPLY=''
  IFS= read -r line <"$GIT_DIR_ABS/HEAD" 2>/dev/null || return 1
  if [[ $line == "ref: refs/heads/"* ]]; then
    ref=${line#ref: }
    IFS= read -r REPLY <"$GIT_COMMON_ABS/$ref" 2>/dev/null || return 1
  else
    REPLY=$line
  fi
  [[ $REPLY =~ ^[0-9a-f]{40,64}$ ]]
}

# ---- the repository's commit hooks, as checks: its pre-commit hook runs in the sandbox, on
# ---- the tree about to be committed, before verify.sh (its refusal a failing check the
# ---- agent hears; a fixer's edits part of the tree the checks then run on), and its
# ---- commit-msg hook judges the runner's message there too. The hooks are the ones git
# ---- resolved at the run's start (COMMIT_HOOKS_DIR), never the agent's; the runner's own
# ---- commit runs none.
# The name a refusal of the pre-commit hook is recorded under, among the checks.
readonly COMMIT_HOOK_CHECK=commit-hooks
# How many times a fixer's edits are taken before the hook must pass on the tree as it is.
readonly COMMIT_HOOK_ROUNDS=3
# The base and tree the pre-commit hook last judged, its status there (0: it passed) and its output;
# whether the current verify run's hook refused (checks.sh records the failing check).
COMMIT_HOOK_TREE=
COMMIT_HOOK_RC=0
COMMIT_HOOK_REFUSED=0
# commit_hook_run HOOK BASE TREE OUT [MSG]: runs the repository's hook HOOK (a path) in the
# sandbox, in the workspace, under a private git directory of its own (HEAD the commit BASE,
# the index TREE, the repository's objects to read and a private directory for the ones it
# writes): it sees TREE staged on BASE, as in a commit, and leaves nothing of git's behind.
# MSG, a file, is the message a commit-msg hook judges (its copy's path is the argument).
# Bounded by commit-timeout; its output is appended to OUT; ORBIT_RC is its status.
commit_hook_run() {
  local hook=$1 base=$2 tree=$3 out=$4 msg=${5:-/dev/null}
  sandbox_prepare check
  # shellcheck disable=SC2016  # the single-quoted script expands in the child, by design
  GIT_TERMINAL_PROMPT=0 GIT_EDITOR=: \
    proc_run_bounded "$COMMIT_TIMEOUT_S" "$KILL_GRACE_S" "$msg" "$out" "${SANDBOX_ARGV[@]}" "$BASH" -c '
      hook=$1 common=$2 base=$3 tree=$4 kind=$5
      cd -- "$6" || exit 1
      t=$(mktemp -d "${TMPDIR:-/tmp}/orbit-hook.XXXXXX") || exit 1
      trap '\''rm -rf -- "$t"'\'' EXIT
      mkdir -p -- "$t/git/objects" && printf "%s\n" "$common" >"$t/git/commondir" &&
        printf "%s\n" "$base" >"$t/git/HEAD" || exit 1
      export GIT_DIR=$t/git GIT_WORK_TREE=$PWD GIT_OBJECT_DIRECTORY=$t/git/objects
      export GIT_ALTERNATE_OBJECT_DIRECTORIES=$common/objects GIT_INDEX_FILE=$t/git/index
      git read-tree "$tree" || exit 1
      git update-index -q --refresh >/dev/null 2>&1
      if [[ $kind == commit-msg ]]; then
        cat >"$t/COMMIT_EDITMSG" && "$hook" "$t/COMMIT_EDITMSG" </dev/null
      else
        "$hook" </dev/null
      fi' orbit-hook "$hook" "$GIT_COMMON_ABS" "$base" "$tree" "${hook##*/}" "$WS"
}

# commit_hook_base_v DIR: REPLY is the commit the iteration's change is committed onto
# (DIR/head-before, else HEAD), "" when there is none.
commit_hook_base_v() {
  REPLY=''
  if [[ -f $1/head-before ]]; then
    IFS= read -r REPLY <"$1/head-before" || true
  fi
  [[ $REPLY =~ ^[0-9a-f]{40,64}$ ]] || REPLY=$(config_git_q rev-parse -q --verify HEAD 2>/dev/null || true)
}

# commit_hooks_check DIR OUT: before a verify run in the workspace, the repository's
# pre-commit hook judges the work tree as it would be committed onto the iteration's base
# (nothing to commit, as on the untouched tree: nothing to judge). What a fixer changes is
# taken, and the hook runs again on the tree it made (at most COMMIT_HOOK_ROUNDS times): the
# checks then run on that tree, the one committed. Its output is written into OUT as a
# check's section (COMMIT_HOOK_CHECK); on a refusal COMMIT_HOOK_REFUSED is 1.
commit_hooks_check() {
  local dir=$1 out=$2 hook=$COMMIT_HOOKS_DIR/pre-commit base tree fixed k=0 log="$ORBIT_TMP/commit-hook.out"
  COMMIT_HOOK_REFUSED=0
  [[ -n $COMMIT_HOOKS_DIR && -x $hook && $WS == "$WS_MAIN" && -z $VERIFY_SCRATCH ]] || return 0
  commit_hook_base_v "$dir"
  base=$REPLY
  [[ -n $base ]] && tree_here_v || return 0
  tree=$REPLY
  [[ $tree != "$(config_git_q rev-parse -q --verify "$base^{tree}" 2>/dev/null)" ]] || return 0
  if [[ "$base $tree" != "$COMMIT_HOOK_TREE" ]]; then
    : >"$log"
    while ((k < COMMIT_HOOK_ROUNDS)); do
      k=$((k + 1))
      printf '[orbit] %s, on the tree to commit (%s, round %s)\n' "$hook" "${tree:0:12}" "$k" >>"$log"
      commit_hook_run "$hook" "$base" "$tree" "$log"
      COMMIT_HOOK_RC=$ORBIT_RC
      ((ORBIT_TIMED_OUT)) && COMMIT_HOOK_RC=$COMMIT_TIMED_OUT
      tree_here_v || return 0
      [[ $REPLY != "$tree" ]] || break
      fixed=$REPLY
      tree_changes_v "$tree" "$fixed"
      orbit_log "the pre-commit hook changed the tree to commit ($REPLY): taken, as a fixer's edits are"
      printf '[orbit] the hook changed the tree to commit (%s): taken\n' "$REPLY" >>"$log"
      tree=$fixed
      # Passed, or cut at its bound: not run again.
      ((COMMIT_HOOK_RC != 0 && COMMIT_HOOK_RC != COMMIT_TIMED_OUT)) || break
    done
    COMMIT_HOOK_TREE="$base $tree"
  fi
  ((COMMIT_HOOK_RC == 0)) || COMMIT_HOOK_REFUSED=1
  {
    printf '==> check %s: the repository'"'"'s pre-commit hook\n' "$COMMIT_HOOK_CHECK"
    cat -- "$log" 2>/dev/null
    if ((COMMIT_HOOK_RC == 0)); then
      printf '[PASS] %s\n' "$COMMIT_HOOK_CHECK"
    elif ((COMMIT_HOOK_RC == COMMIT_TIMED_OUT)); then
      printf '[FAIL] %s (the pre-commit hook did not finish within %ss)\n' "$COMMIT_HOOK_CHECK" "$COMMIT_TIMEOUT_S"
    else
      printf '[FAIL] %s (the pre-commit hook refused the commit: exit %s)\n' "$COMMIT_HOOK_CHECK" "$COMMIT_HOOK_RC"
    fi
  } >>"$out"
}

# commit_msg_check DIR MSG TREE: the repository's commit-msg hook judges the runner's
# message MSG for TREE, in the sandbox; status 1 when it refuses (its words, and what
# shapes the message, in DIR/commit.log).
commit_msg_check() {
  local dir=$1 msg=$2 tree=$3 hook=$COMMIT_HOOKS_DIR/commit-msg file="$ORBIT_TMP/commit-msg"
  [[ -n $COMMIT_HOOKS_DIR && -x $hook ]] || return 0
  commit_hook_base_v "$dir"
  [[ -n $REPLY ]] || return 0
  printf '%s\n' "$msg" >"$file"
  commit_hook_run "$hook" "$REPLY" "$tree" "$dir/commit.log" "$file"
  ((ORBIT_RC != 0 || ORBIT_TIMED_OUT)) || return 0
  printf 'orbit: %s refused the runner'"'"'s message (exit %s%s)\n' "$COMMIT_MSG_REFUSED_WORDS" "$ORBIT_RC" \
    "$( ((ORBIT_TIMED_OUT)) && printf ', did not finish within %ss' "$COMMIT_TIMEOUT_S")" >>"$dir/commit.log"
  return 1
}
# How commit.log says the commit-msg hook refused (commit_refused_fix_v knows it by them).
readonly COMMIT_MSG_REFUSED_WORDS='the commit-msg hook'
