# ---- run-loop: the runner. Preflight → lock → state → integrity → iterations → footer.
# ---- Everything it decides is written down: iterations/NNNNNN/, progress.md, events.jsonl,
# ---- state.env. The agent never decides DONE; the gate in done_gate does.

ONCE=0
LOOP_DIR=
# The user's checkout (where the loop directory lives; never touched) and the loop's
# workspace (its own git worktree on orbit/<name>: where the agent and the checks run and
# the commits are made), with the agent's folder in it.
REPO_ROOT=
WS=
AGENT_DIR=
LOOP_BRANCH=
RUN_COST_START=0
CUR_ITER=0
IN_ITERATION=0
# The status this run started from, and whether it ran an iteration (for notify-once).
START_STATUS=
START_REASON=
RAN_ITERATION=0
AGENT_ABS=
LOCK_MODE=
GIT_DIR_ABS=
GIT_COMMON_ABS=
COMMIT_PLUMBING=0
LAST_TREE=
declare -A R=()

usage() {
  cat <<'USAGE'
usage: run-loop.sh [--once] [--help]
  --once   do at most one iteration (a cron tick); exit 10 when work remains
Settings come from loop.toml (rendered above); an environment variable of the same name
overrides each, e.g. MAX_ITERATIONS=5 bash run-loop.sh
USAGE
}

# ---- settings: validated once, before any value reaches arithmetic.
# settings_check: every setting of the contract (ORBIT_SETTINGS) by its kind and bounds, the
# ones loop.toml is validated by; the first bad one stops the run (EXIT_PREFLIGHT, nothing
# run, nothing written). Sets the values the runner computes with: NAME_S, the seconds of a
# duration, and NAME_M, the micro-dollars of an amount ("" for none).
settings_check() {
  local name grep_rc
  for name in "${ORBIT_SETTINGS[@]}"; do
    orbit_setting_v "$name" || orbit_die "$EXIT_PREFLIGHT" "$ORBIT_SETTING_ERR"
    case $name in
      EXEC_TIMEOUT) EXEC_TIMEOUT_S=$REPLY ;;
      LOOP_TIMEOUT) LOOP_TIMEOUT_S=$REPLY ;;
      CHECK_TIMEOUT) CHECK_TIMEOUT_S=$REPLY ;;
      RETRY_BASE_DELAY) RETRY_BASE_DELAY_S=$REPLY ;;
      CB_COOLDOWN) CB_COOLDOWN_S=$REPLY ;;
      KILL_GRACE) KILL_GRACE_S=$REPLY ;;
      COMMIT_TIMEOUT) COMMIT_TIMEOUT_S=$REPLY ;;
      NOTIFY_TIMEOUT) NOTIFY_TIMEOUT_S=$REPLY ;;
      USD_CAP) USD_CAP_M=$REPLY ;;
      USD_PER_RUN_CAP) USD_PER_RUN_CAP_M=$REPLY ;;
      USD_PER_ITER_CAP) USD_PER_ITER_CAP_M=$REPLY ;;
      COST_ESTIMATE_USD) COST_ESTIMATE_M=$REPLY ;;
      PLACEHOLDER_PATTERN)
        # grep's own judgment of the expression (status 2: not one it can use).
        grep_rc=0
        grep -qE -- "$PLACEHOLDER_PATTERN" </dev/null 2>/dev/null || grep_rc=$?
        if ((grep_rc > 1)); then
          orbit_die "$EXIT_PREFLIGHT" "PLACEHOLDER_PATTERN='$PLACEHOLDER_PATTERN' is not an extended regular expression grep accepts: fix placeholder-pattern in loop.toml and run orbit init --force"
        fi
        ;;
    esac
  done
}

# verify_budget: VERIFY_BUDGET_S, verify.sh's own bound: every check's timeout plus a margin.
verify_budget() {
  local checks
  checks=$(grep -c '^  run_check ' -- "$LOOP_DIR/verify.sh" || true)
  [[ $checks =~ ^[0-9]+$ ]] || checks=0
  VERIFY_BUDGET_S=$(((checks + 1) * (CHECK_TIMEOUT_S + KILL_GRACE_S) + 30))
  # holdout.sh (a loop rendered before holdout checks has none): its checks run only in
  # the DONE gate.
  # The count is the loop's setting, not what the file holds today: a holdout.sh emptied
  # or removed is a pin failure, never a loop without hidden checks.
  checks=${HOLDOUT_SETTING:-0}
  [[ $checks =~ ^[0-9]+$ ]] || checks=0
  HOLDOUT_CHECKS=$checks
  HOLDOUT_BUDGET_S=$(((checks + 1) * (CHECK_TIMEOUT_S + KILL_GRACE_S) + 30))
}
HOLDOUT_CHECKS=0
HOLDOUT_BUDGET_S=0

# ---- where things are: the loop directory is where this script lives.
locate() {
  local src=${BASH_SOURCE[0]}
  if [[ $src == */* ]]; then
    src=${src%/*}
  else
    src=.
  fi
  LOOP_DIR=$(cd -P -- "${src:-/}" && pwd -P)
  ORBIT_LOG_FILE="$LOOP_DIR/runner.log"
  # PATH is what a scheduler gave (cron's is short): what is missing is named, with the fix.
  command -v git >/dev/null 2>&1 ||
    preflight_fail "git is not on PATH ($PATH): install it, or give the scheduler a PATH that has it (orbit schedule writes one)"
  REPO_ROOT=$(git -C "$LOOP_DIR" rev-parse --show-toplevel 2>/dev/null) ||
    preflight_fail "the loop directory $LOOP_DIR is not inside a git work tree: run orbit init inside the repository"

  REPO_ROOT=$(cd -P -- "$REPO_ROOT" && pwd -P)
  EV_FILE="$LOOP_DIR/events.jsonl"
  PG_FILE="$LOOP_DIR/progress.md"
}

settings_footer() {
  footer "$STATUS_CONTINUE" "bad setting: $1"
  notify_stop_early "$NOTIFY_EVENT_PREFLIGHT_FAILED" "bad setting: $1"
}

footer() {
  local status=$1 summary=$2 REPLY
  summary=${summary//[$'\n\r\t']/ }
  orbit_cut_v "$summary" 180
  summary=$REPLY
  printf 'NEXUS_LOOP_STATUS: %s\nNEXUS_LOOP_SUMMARY: %s\n' "$status" "$summary" 2>/dev/null || true
}

# git in the workspace (the loop's own worktree); repo_git in the user's checkout, for what
# only reads it (its HEAD at the first run, the repository's common directory).
git_q() { GIT_OPTIONAL_LOCKS=0 git -C "$WS" "$@"; }
repo_git() { GIT_OPTIONAL_LOCKS=0 git -C "$REPO_ROOT" "$@"; }

# ---- preflight: exit 2 with nothing run and nothing spent.
preflight_fail() {
  footer "$STATUS_CONTINUE" "preflight failed: $1"
  orbit_log "error: preflight: $1"
  notify_stop_early "$NOTIFY_EVENT_PREFLIGHT_FAILED" "preflight failed: $1"
  exit "$EXIT_PREFLIGHT"
}

preflight() {
  local f avail out rc
  if ((BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 4))); then
    preflight_fail "bash $BASH_VERSION is too old: orbit needs bash >= 4.4"
  fi
  # The agent and the checks make their temporary files in TMPDIR: one that cannot take
  # them fails every run in ways that look like the agent's fault.
  if [[ -n ${TMPDIR:-} ]] && [[ ! -d $TMPDIR || ! -w $TMPDIR ]]; then
    preflight_fail "TMPDIR=$TMPDIR is not a writable directory: create it, or unset TMPDIR for the loop"
  fi
  # type -P: a file on PATH, never a builtin or function of the same name (true, echo).
  AGENT_ABS=$(type -P -- "${AGENT_ARGV[0]}" 2>/dev/null || true)
  if [[ -z $AGENT_ABS || $AGENT_ABS != /* ]]; then
    preflight_fail "the agent '${AGENT_ARGV[0]}' is not on PATH ($PATH): install it, or set argv in loop.toml to its absolute path"
  fi
  [[ -x $AGENT_ABS && ! -d $AGENT_ABS ]] || preflight_fail "the agent $AGENT_ABS is not executable"
  engine_prices_check || preflight_fail "TOKEN_PRICES word '$REPLY' is not model=input/cached/output (USD per million tokens): fix token-prices in loop.toml"
  # The env file first: the keys it holds are the credentials the engine's check looks for.
  engine_env_load
  engine_preflight
  # One git call: work tree?, git directory, hooks directory, common directory, and HEAD
  # (status 1 without it).
  local -a git_facts=()
  rc=0
  out=$(repo_git rev-parse --is-inside-work-tree --git-common-dir --verify -q HEAD 2>/dev/null) || rc=$?
  mapfile -t git_facts <<<"$out"
  [[ ${git_facts[0]} == true || ${git_facts[0]} == false ]] || preflight_fail "$REPO_ROOT is not a git work tree"
  if ((rc != 0)) || [[ -z ${git_facts[2]-} ]]; then
    preflight_fail "the repository has no commit yet: make one first (git commit --allow-empty -m init)"
  fi
  GIT_COMMON_ABS=${git_facts[1]}
  [[ $GIT_COMMON_ABS == /* ]] || GIT_COMMON_ABS=$REPO_ROOT/$GIT_COMMON_ABS
  GIT_COMMON_ABS=$(cd -P -- "$GIT_COMMON_ABS" && pwd -P)
  # df's second line, fourth field: the kilobytes available.
  avail=$(df -Pk -- "$LOOP_DIR" 2>/dev/null || true)
  avail=${avail#*$'\n'}
  read -r _ _ _ avail _ <<<"$avail" || true
  if [[ $avail =~ ^[0-9]+$ ]] && ((avail < 102400)); then
    preflight_fail "only $((avail / 1024)) MB free on the loop's disk: orbit needs at least 100 MB"
  fi
  [[ -w $LOOP_DIR ]] || preflight_fail "the loop directory $LOOP_DIR is not writable"
  f=$(find "$LOOP_DIR" -type l -print -quit 2>/dev/null || true)
  [[ -z $f ]] || preflight_fail "$f is a symlink: nothing under the loop directory may be one"
  # A FIFO, socket or device where a record belongs would block or mislead every reader:
  # someone other than the runner put it there. Nothing is read or written.
  f=$(find "$LOOP_DIR" \( -type p -o -type s -o -type b -o -type c \) -print -quit 2>/dev/null || true)
  if [[ -n $f ]]; then
    footer "$STATUS_CONTINUE" "state corrupt: ${f#"$LOOP_DIR"/} is $(orbit_file_kind "$f"), not a file; remove it, then run orbit recover"
    orbit_log "error: $f is $(orbit_file_kind "$f"), where only the runner's regular files belong: remove it, then run 'orbit recover $LOOP_DIR'"
    exit "$EXIT_STATE_CORRUPT"
  fi
  for f in state.env state.env.sha256 pins.sha256 progress.md goal.md verify.sh prompt.md; do
    [[ -f $LOOP_DIR/$f ]] || preflight_fail "$f is missing from $LOOP_DIR: run orbit recover (or orbit init --force for scripts)"
  done
}

# ---- the workspace (contract 1, 3): the loop's own git worktree on orbit/<name>, outside
# ---- the loop directory. The user's checkout, its HEAD, index and other branches are never
# ---- touched: the agent works, the checks run and the commits land in the workspace only.

# workspace_path_v: REPLY is the workspace's absolute path: the state's once the loop ran,
# else loop.toml's `workspace` (relative to the repository root), else the default
# .orbit/.workspaces/<name>. Refused when it is inside the loop directory or holds it.
workspace_path_v() {
  local p=${S[WORKSPACE]:-}
  if [[ -z $p ]]; then
    p=${WORKSPACE_SETTING:-.orbit/.workspaces/$LOOP_NAME}
    [[ $p == /* ]] || p=$REPO_ROOT/$p
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

# workspace_git_facts: the workspace's git directory (its HEAD, index and in-progress
# operations), whether commits need the porcelain (a hook to run, a signature to make), and
# no rebase or merge left half-done in it.
workspace_git_facts() {
  local out f hooks
  local -a facts=()
  out=$(git_q rev-parse --absolute-git-dir --git-path hooks 2>/dev/null) ||
    preflight_fail "the workspace $WS is not a git worktree: run orbit recover to recreate it"
  mapfile -t facts <<<"$out"
  GIT_DIR_ABS=${facts[0]} hooks=${facts[1]-}
  [[ $hooks == /* ]] || hooks=$WS/$hooks
  # Commits go through the porcelain only when it has work to do there: a commit hook to
  # run or a signature to make. Otherwise plumbing does the same commit without a rescan.
  COMMIT_PLUMBING=1
  for f in pre-commit prepare-commit-msg commit-msg post-commit; do
    if [[ -x $hooks/$f ]]; then
      COMMIT_PLUMBING=0
    fi
  done
  if [[ $(git_q config --bool --get commit.gpgsign 2>/dev/null || true) == true ]]; then
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
# every worktree reads. Added once, never duplicated. aider's repository-map cache, which
# it keeps at the root of the workspace, stays out too.
workspace_exclude() {
  local ex="$GIT_COMMON_ABS/info/exclude" line want have=$'\n'
  local -a wants=('/.orbit-agent/')
  if [[ $ENGINE == aider ]]; then
    wants+=('/.aider.tags.cache.v4/')
  fi
  if [[ $WS == "$REPO_ROOT"/* ]]; then
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

# workspace_add COMMIT_OR_BRANCH: a new worktree at WS on LOOP_BRANCH, locked against
# `git worktree prune` while the loop exists.
workspace_add() {
  mkdir -p -- "${WS%/*}"
  if repo_git rev-parse --verify -q "refs/heads/$LOOP_BRANCH" >/dev/null; then
    repo_git worktree add -q --lock --reason "orbit loop $LOOP_DIR" -- "$WS" "$LOOP_BRANCH" >>"$ORBIT_LOG_FILE" 2>&1
  else
    repo_git worktree add -q --lock --reason "orbit loop $LOOP_DIR" -b "$LOOP_BRANCH" -- "$WS" "$1" >>"$ORBIT_LOG_FILE" 2>&1
  fi
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
    repo_git rev-parse --verify -q "refs/heads/$LOOP_BRANCH" >/dev/null ||
      preflight_fail "the workspace $WS and the loop branch $LOOP_BRANCH are both gone: run orbit recover"
    rmdir -- "$WS" 2>/dev/null || true
    # Its registration is locked (so that prune keeps a live loop's workspace): this one
    # registration goes (-f -f: missing and locked). Never a `git worktree prune`, which
    # could take another loop's workspace while that one is being added.
    repo_git worktree remove -f -f -- "$WS" 2>>"$ORBIT_LOG_FILE" || true
    workspace_add "$LOOP_BRANCH" ||
      preflight_fail "cannot recreate the workspace $WS from $LOOP_BRANCH (see runner.log)"
    orbit_log "the workspace $WS was missing: recreated from $LOOP_BRANCH"
    orbit_event workspace_recreated "${S[NEXT_ITERATION]}" path "$WS" branch "$LOOP_BRANCH"
  fi
  workspace_git_facts
  if ! ws_on_branch; then
    workspace_head_restore "start"
  fi
  if [[ -f $LOOP_DIR/.branch-head ]]; then
    want=$(<"$LOOP_DIR/.branch-head")
    head=$(git_q rev-parse --verify -q "refs/heads/$LOOP_BRANCH" 2>/dev/null || true)
    if [[ -n $want && $head != "$want" ]] && ! git_q merge-base --is-ancestor "$want" "$head" 2>/dev/null; then
      footer "$STATUS_CONTINUE" "the loop branch $LOOP_BRANCH was moved by hand: run orbit audit, then orbit recover"
      orbit_log "error: the loop branch $LOOP_BRANCH was moved by hand: it was at ${want:0:12}, it is at ${head:0:12}, which does not contain it. To go on from where it is now, run 'orbit recover $LOOP_DIR'; to undo the move, 'git branch -f $LOOP_BRANCH $want'"
      orbit_event branch_moved "${S[NEXT_ITERATION]}" expected "$want" actual "$head"
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
  cur=$(git_q symbolic-ref -q --short HEAD 2>/dev/null || git_q rev-parse --short HEAD 2>/dev/null || true)
  orbit_log "the workspace's HEAD is on '${cur:-?}', not the loop branch $LOOP_BRANCH ($1): pointing it back (the work tree is kept)"
  orbit_event workspace_head_moved "$CUR_ITER" when "$1" found "${cur:-?}"
  git_q symbolic-ref -m "orbit: back to the loop branch" HEAD "refs/heads/$LOOP_BRANCH" 2>>"$ORBIT_LOG_FILE" ||
    orbit_die "$EXIT_PREFLIGHT" "cannot point the workspace's HEAD back to $LOOP_BRANCH"
  LAST_COMMIT_ID=
}

# ws_on_branch: status 0 when the workspace's HEAD names the loop branch, read from the file
# git keeps it in (no process: this is asked after every agent run).
ws_on_branch() {
  local line=''
  IFS= read -r line <"$GIT_DIR_ABS/HEAD" 2>/dev/null || true
  [[ $line == "ref: refs/heads/$LOOP_BRANCH" ]]
}

# branch_head_record [COMMIT]: the loop branch's head as the loop left it (COMMIT, the one it
# just made, or git's answer), kept to tell a move by hand from the loop's own commits and
# the agent's, which only add to it. Not synced: one lost on a crash leaves an older head,
# still in the branch's history.
branch_head_record() {
  local head=${1:-}
  if [[ -z $head ]]; then
    head=$(git_q rev-parse --verify -q "refs/heads/$LOOP_BRANCH" 2>/dev/null || true)
  fi
  if [[ -n $head ]]; then
    { printf '%s\n' "$head" >"$LOOP_DIR/.branch-head.tmp" &&
      mv -f -- "$LOOP_DIR/.branch-head.tmp" "$LOOP_DIR/.branch-head"; } ||
      orbit_die "$EXIT_STATE_CORRUPT" "cannot write $LOOP_DIR/.branch-head"
  fi
}

# ---- the agent's folder: .orbit-agent/ in the workspace, rebuilt before every agent run
# ---- from the loop directory's copies (what the agent writes there changes nothing of
# ---- the loop's), read back after it: notes.md, the claim, the cost. Only regular files
# ---- are read back, and at most a bounded size.
AGENT_NOTES_MAX=1048576
# With memory = "feedback" the folder holds no progress.md and no notes.md: only the goal,
# verify.sh, the prompt and the last failure's feedback (an agent's notes are still kept in
# the loop directory, never given back).
agent_dir_fill() {
  local prompt=$1 fb=$2 d
  local -a files=("$LOOP_DIR/goal.md" "$LOOP_DIR/verify.sh")
  rm -rf -- "$AGENT_DIR"
  mkdir -- "$AGENT_DIR"
  if [[ ${prompt##*/} == prompt.md ]]; then
    files+=("$prompt")
  else
    cp -- "$prompt" "$AGENT_DIR/prompt.md"
  fi
  if [[ $MEMORY_SETTING != feedback ]]; then
    files+=("$PG_FILE")
    if [[ -f $LOOP_DIR/notes.md && ! -L $LOOP_DIR/notes.md ]]; then
      files+=("$LOOP_DIR/notes.md")
    else
      : >"$AGENT_DIR/notes.md"
    fi
  fi
  # One copy for the files whose names the folder keeps (goal.md, progress.md, verify.sh,
  # prompt.md, notes.md); the feedback is renamed on the way.
  cp -- "${files[@]}" "$AGENT_DIR/"
  if [[ -n $fb && -f $fb ]]; then
    cp -- "$fb" "$AGENT_DIR/feedback.json"
    d=${fb%/*}
    if [[ -f $d/input-feedback.txt ]]; then
      cp -- "$d/input-feedback.txt" "$AGENT_DIR/feedback.txt"
    fi
    if [[ -f $d/input-verify.log ]]; then
      cp -- "$d/input-verify.log" "$AGENT_DIR/last-verify.log"
    fi
  fi
}

# agent_dir_real: the agent's folder is still a directory, not a link the agent put in its
# place (the runner would read and remove files wherever it points).
agent_dir_real() {
  [[ -d $AGENT_DIR && ! -L $AGENT_DIR ]] || {
    orbit_log "the agent's folder $AGENT_DIR is not a directory any more (a link?): nothing is read back from it"
    return 1
  }
}

# agent_file_take NAME DEST: moves the agent's NAME out of its folder into DEST when it is a
# regular file (never a symlink), cut to AGENT_NOTES_MAX bytes; status 1 when there is none.
agent_file_take() {
  local src="$AGENT_DIR/$1"
  agent_dir_real || return 1
  [[ -f $src && ! -L $src ]] || return 1
  head -c "$AGENT_NOTES_MAX" -- "$src" >"$2.tmp.$$" && mv -f -- "$2.tmp.$$" "$2"
  rm -f -- "$src"
}

# agent_dir_collect COSTFILE: after an agent run, its notes back into the loop directory
# and its cost into the iteration's record.
agent_dir_collect() {
  local cfile=$1
  engine_after_run
  # A fan-out candidate's notes are taken by the runner when it judges it (fanout_judge).
  if ((!FANOUT_CAND)) && agent_dir_real && [[ -f $AGENT_DIR/notes.md && ! -L $AGENT_DIR/notes.md ]]; then
    head -c "$AGENT_NOTES_MAX" -- "$AGENT_DIR/notes.md" >"$LOOP_DIR/.notes.md.tmp.$$" &&
      mv -f -- "$LOOP_DIR/.notes.md.tmp.$$" "$LOOP_DIR/notes.md"
  fi
  agent_file_take cost "$cfile" || true
}

# ---- lock: flock on a descriptor held for the runner's life; a mkdir lock without flock.
lock_acquire() {
  local lockdir="$LOOP_DIR/.run-loop.lock.d" owner
  if command -v flock >/dev/null 2>&1 && [[ -z ${ORBIT_NO_FLOCK:-} ]]; then
    # The loop directory itself is locked too: an agent can delete .run-loop.lock (a new
    # file would then lock free), not the directory its runner holds open.
    exec 7<"$LOOP_DIR"
    exec 9>>"$LOOP_DIR/.run-loop.lock"
    if ! flock -n 7 || ! flock -n 9; then
      footer "$STATUS_CONTINUE" "another runner holds the lock"
      orbit_log "another runner holds $LOOP_DIR/.run-loop.lock: nothing to do"
      exit "$EXIT_LOCKED"
    fi
    LOCK_MODE='flock'
    return 0
  fi
  : >>"$LOOP_DIR/.run-loop.lock"
  if ! mkdir -- "$lockdir" 2>/dev/null; then
    owner=$(lock_owner "$lockdir")
    if lock_owner_alive "$lockdir" "$owner"; then
      footer "$STATUS_CONTINUE" "another runner holds the lock"
      orbit_log "another runner (${owner:-starting}) holds $lockdir: nothing to do"
      exit "$EXIT_LOCKED"
    fi
    # Taking over a dead owner's lock is itself serialised by a second mkdir, and only
    # the owner that was found dead is removed: two runners that both found it dead never
    # both run, and neither removes a lock that a live runner has just taken.
    if ! mkdir -- "$lockdir.takeover" 2>/dev/null; then
      if [[ -n $(find "$lockdir.takeover" -maxdepth 0 -mmin +1 2>/dev/null) ]]; then
        rmdir -- "$lockdir.takeover" 2>/dev/null || true
      fi
      footer "$STATUS_CONTINUE" "another runner holds the lock"
      orbit_log "another runner is taking over $lockdir: nothing to do"
      exit "$EXIT_LOCKED"
    fi
    if [[ "$(lock_owner "$lockdir")" != "$owner" ]] || ! rm -rf -- "$lockdir" || ! mkdir -- "$lockdir" 2>/dev/null; then
      rmdir -- "$lockdir.takeover" 2>/dev/null || true
      footer "$STATUS_CONTINUE" "another runner holds the lock"
      exit "$EXIT_LOCKED"
    fi
    orbit_log "stale lock $lockdir (owner '$owner' is gone): taken over"
    printf '%s %s\n' "$$" "$(proc_start $$)" >"$lockdir/owner"
    rmdir -- "$lockdir.takeover" 2>/dev/null || true
    LOCK_MODE='mkdir'
    return 0
  fi
  printf '%s %s\n' "$$" "$(proc_start $$)" >"$lockdir/owner.tmp.$$"
  mv -f -- "$lockdir/owner.tmp.$$" "$lockdir/owner"
  LOCK_MODE='mkdir'
}

# The owner line of a mkdir lock ("pid start-time"), empty while it is being written.
lock_owner() { cat -- "$1/owner" 2>/dev/null || true; }

# lock_owner_alive LOCKDIR OWNER: the owner runs (same pid and start time); a lock with no
# owner yet is being taken right now, unless it is older than a minute (its taker died).
lock_owner_alive() {
  local lockdir=$1 owner=$2 pid start
  if [[ -z $owner ]]; then
    [[ -d $lockdir && -z $(find "$lockdir" -maxdepth 0 -mmin +1 2>/dev/null) ]]
    return
  fi
  pid=${owner%% *}
  start=${owner#* }
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ "$(proc_start "$pid")" == "$start" ]]
}

lock_release() {
  # Nothing of this run outlives it (a process a notification or a check detached, say):
  # swept while the lock is still held, since the next run's processes carry the same mark.
  if [[ -n ${ORBIT_OWNER:-} ]]; then
    sweep_env "ORBIT_OWNER=$LOOP_DIR" wait
  fi
  if [[ $LOCK_MODE == mkdir ]]; then
    rm -rf -- "$LOOP_DIR/.run-loop.lock.d"
  fi
}

proc_start() { ps -o lstart= -p "$1" 2>/dev/null | tr -s ' ' || true; }

# ---- processes left behind: anything carrying this loop's marker in its environment.
# Linux only (/proc); elsewhere the process-group sweep is what remains.
# sweep_env MARKER [wait]: KILLs them; with "wait", returns once they are gone (at most 2 s:
# a process that took the KILL is gone within milliseconds).
sweep_env() {
  local marker=$1 f pid i
  local -a swept=()
  [[ -d /proc/self ]] || return 0
  while IFS= read -r f; do
    pid=${f#/proc/}
    pid=${pid%%/*}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    # The process may be gone by now: its command line is best effort.
    orbit_log "sweeping leftover process $pid ($({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | cut -c1-80 || true))"
    kill -KILL "$pid" 2>/dev/null || true
    swept+=("$pid")
  done < <(
    unset ORBIT_OWNER
    grep -lzxF -- "$marker" /proc/[0-9]*/environ 2>/dev/null || true
  )
  [[ ${2:-} == wait ]] || return 0
  # A process on its way out (a zombie included) no longer shows its environment.
  for pid in "${swept[@]}"; do
    for ((i = 0; i < 40; i++)); do
      grep -qzxF -- "$marker" "/proc/$pid/environ" 2>/dev/null || break
      sleep 0.05
    done
  done
}

# ---- state
load_state() {
  local rc=0
  state_load "$LOOP_DIR" || rc=$?
  if ((rc == STATE_LOAD_NEWER)); then
    footer "$STATUS_CONTINUE" "$STATE_ERR"
    orbit_log "error: $STATE_ERR: run this loop with the orbit that wrote it (nothing was changed)"
    notify_stop_early "$NOTIFY_EVENT_STATE_CORRUPT" "$STATE_ERR"
    lock_release
    exit "$EXIT_STATE_CORRUPT"
  fi
  if ((rc == STATE_LOAD_OLDER)); then
    footer "$STATUS_CONTINUE" "$STATE_ERR: run orbit recover --migrate"
    orbit_log "error: $STATE_ERR: run 'orbit recover --migrate $LOOP_DIR' (or bash $LOOP_DIR/recover.sh --migrate) to move it to a workspace; nothing was changed"
    if [[ $ENGINE == custom ]]; then
      orbit_log "note: a custom agent written for contract 1.0 wrote \$ORBIT_LOOP_DIR/done.md; under 2.0 it writes \$ORBIT_AGENT_DIR/done.md (in the workspace)"
    fi
    notify_stop_early "$NOTIFY_EVENT_STATE_CORRUPT" "$STATE_ERR: run orbit recover --migrate"
    lock_release
    exit "$EXIT_STATE_CORRUPT"
  fi
  if ((rc != 0)); then
    footer "$STATUS_CONTINUE" "state corrupt: $STATE_ERR"
    orbit_log "state corrupt: $STATE_ERR"
    orbit_log "error: run 'orbit recover $LOOP_DIR' (or bash $LOOP_DIR/recover.sh) to rebuild state from the evidence"
    notify_stop_early "$NOTIFY_EVENT_STATE_CORRUPT" "state corrupt: $STATE_ERR; run orbit recover"
    lock_release
    exit "$EXIT_STATE_CORRUPT"
  fi
}

save_state() {
  STATE_PRE_WRITE=state_journal
  state_write "$LOOP_DIR"
  STATE_PRE_WRITE=
}

# state_journal TEXT: the journal's record of the state.env about to be written.
state_journal() {
  local REPLY
  orbit_sha256_str_v "$1"
  orbit_event state_write "$CUR_ITER" gen "${S[GEN]}" status "${S[LAST_STATUS]}" reason "${S[STOP_REASON]}" next_iteration "${S[NEXT_ITERATION]}" sha256 "$REPLY"
}

# ---- what the previous run left is evidence, cross-checked before any of it is believed.
# journal_last_v PATTERN [COUNT]: REPLY holds the last COUNT (default 1) lines of the journal
# matching the fixed string PATTERN, newest last.
journal_last_v() {
  REPLY=$(grep -aF -- "$1" "$EV_FILE" 2>/dev/null | tail -n "${2:-1}") || REPLY=''
}

# event_field_v LINE KEY: REPLY is KEY's string or number value in the event LINE.
event_field_v() {
  REPLY=''
  if [[ $1 =~ \"$2\":\"([^\"]*)\" || $1 =~ \"$2\":([0-9]+) ]]; then
    REPLY=${BASH_REMATCH[1]}
  fi
}

# state_cross_check: state.env is the one the journal's newest record of a state write
# names (state_write's sha256, or a recovery's state_sha256), or the one before it when a
# run died between the record and the rename (the newest is exactly one generation ahead).
# Anything else was written by someone other than the runner or orbit recover: exit 4.
# A journal with no such record (a loop of an older orbit) is not held to it.
state_cross_check() {
  local sw rec newest older='' want have gen seq_rec
  orbit_regular "$EV_FILE" || return 0
  journal_last_v '"event":"state_write"' 2
  sw=$REPLY
  newest=${sw##*$'\n'}
  if [[ $sw == *$'\n'* ]]; then
    older=${sw%$'\n'*}
  fi
  journal_last_v '"event":"recovery"' 1
  rec=$REPLY
  if [[ -n $rec ]]; then
    event_field_v "$rec" seq
    seq_rec=${REPLY:-0}
    event_field_v "$newest" seq
    if [[ -z $newest ]] || ((seq_rec > ${REPLY:-0})); then
      # A recovery after the last state write speaks for the state it wrote; one by an
      # older orbit says nothing about it.
      event_field_v "$rec" state_sha256
      [[ -n $REPLY ]] || return 0
      newest=$rec older=''
    fi
  fi
  [[ -n $newest ]] || return 0
  event_field_v "$newest" sha256
  want=$REPLY
  if [[ -z $want ]]; then
    event_field_v "$newest" state_sha256
    want=$REPLY
  fi
  [[ -n $want ]] || return 0
  orbit_sha256_file_v "$LOOP_DIR/state.env"
  have=$REPLY
  if [[ $have == "$want" ]]; then
    return 0
  fi
  event_field_v "$newest" gen
  gen=$REPLY
  if [[ $gen == "$((S[GEN] + 1))" ]]; then
    # The newest record is of a write that never happened: the one before it names this
    # state, or there is none of this generation (orbit init wrote it, or an older orbit).
    if [[ -z $older ]]; then
      return 0
    fi
    event_field_v "$older" sha256
    local osha=$REPLY
    event_field_v "$older" gen
    if [[ -z $osha || $REPLY != "${S[GEN]}" || $osha == "$have" ]]; then
      return 0
    fi
  fi
  STATE_ERR="state.env (generation ${S[GEN]}) is not the state the runner or orbit recover last wrote (the journal's record: generation ${gen:-?}, sha256 ${want:0:12}): something else wrote it"
  return 1
}

# result_trusted N FILE: FILE is iteration N's record as the runner finished writing it: the
# journal's iteration_result for N names its sha256.
result_trusted() {
  local want
  journal_last_v "\"event\":\"iteration_result\",\"iteration\":$1,"
  event_field_v "$REPLY" sha256
  want=$REPLY
  [[ -n $want ]] && orbit_regular "$2" || return 1
  orbit_sha256_file_v "$2"
  [[ $REPLY == "$want" ]]
}

# result_record DIR: writes the iteration's result.env from R and records its sha256 in
# the journal (iteration_result): the one proof, for a later run, that the runner wrote it.
result_record() {
  local dir=$1 text='' k REPLY
  for k in "${ORBIT_RESULT_KEYS[@]}"; do
    text+="$k=${R[$k]:-}"$'\n'
  done
  orbit_write_file "$dir/result.env" "$text" || orbit_die "$EXIT_STATE_CORRUPT" "cannot write $dir/result.env"
  orbit_sha256_str_v "$text"
  orbit_event iteration_result "${R[ITERATION]:-$CUR_ITER}" verdict "${R[VERDICT]:-}" reason "${R[STOP_REASON]:-}" sha256 "$REPLY"
}

# finish CODE STATUS REASON SUMMARY: record the stop, notify, print the footer, exit.
finish() {
  local code=$1 status=$2 reason=$3 summary=$4 fstatus=$STATUS_CONTINUE
  # A stop that waits for a human is named as audit, status and the report name it
  # (BLOCKED for max_iterations is EXHAUSTED), in the footer and the notification too.
  case $status in
    "$STATUS_BLOCKED" | "$STATUS_PAUSED" | "$STATUS_STALLED" | "$STATUS_ABORTED")
      summary="${ORBIT_STOP_NAME[$status:$reason]:-$status}: $summary"
      ;;
  esac
  S[LAST_STATUS]=$status
  S[STOP_REASON]=$reason
  save_state
  orbit_event loop_stop "$CUR_ITER" status "$status" reason "$reason" exit_code "$code"
  orbit_log "stop: $status ($reason), exit $code — $summary"
  # A stop is notified when it happens: a later tick that finds the loop still stopped for
  # the same reason, without running an iteration, says nothing again.
  if ((!RAN_ITERATION)) && [[ $status == "$START_STATUS" && $reason == "$START_REASON" ]]; then
    orbit_log "still $status ($reason): notified when it stopped, not again"
  else
    case $status in
      "$STATUS_DONE" | "$STATUS_BLOCKED" | "$STATUS_PAUSED" | "$STATUS_STALLED" | "$STATUS_ABORTED")
        notify "$status" "$summary"
        ;;
    esac
  fi
  # The footer says DONE for a verified DONE, READY for an unrun loop, else CONTINUE.
  case $status in
    "$STATUS_DONE" | "$STATUS_READY") fstatus=$status ;;
  esac
  notify_drain
  lock_release
  footer "$fstatus" "$summary"
  exit "$code"
}

# ---- notifications: each one is delivered in the background (notify.sh bounds every channel
# ---- by NOTIFY_TIMEOUT), so a slow channel never holds the loop; the runner waits for what is
# ---- still being delivered once, bounded, when it exits (notify_drain).
NOTIFY_PIDS=()
NOTIFY_TIMEOUT_S=10

# notify_script_v: REPLY is the notify.sh to run: the loop's own when it matches its pin in
# pins.sha256, else the baseline copy .pins/notify.sh when that one does. Status 1, with a log
# line, when neither does or there is no pin to check against: a notify.sh the agent could
# have written is never run (contract section 7). This is what makes calling the hook safe
# before the runner has checked the pins, on a preflight failure or a corrupt state.
NOTIFY_TEXT=
notify_script_v() {
  local line want f
  REPLY=''
  if [[ -n $NOTIFY_TEXT ]]; then
    return 0
  fi
  line=$(grep -m 1 -- '^[0-9a-f]\{64\}  notify\.sh$' "$LOOP_DIR/pins.sha256" 2>/dev/null) || line=''
  want=${line%%  *}
  REPLY=''
  if [[ -z $want ]]; then
    orbit_log "notify: not run: pins.sha256 holds no pin for notify.sh to check it against"
    return 1
  fi
  for f in "$LOOP_DIR/notify.sh" "$LOOP_DIR/.pins/notify.sh"; do
    if [[ -f $f && ! -L $f ]] && orbit_sha256_file_v "$f" && [[ $REPLY == "$want" ]]; then
      REPLY=$f
      return 0
    fi
  done
  REPLY=''
  orbit_log "notify: not run: notify.sh does not match its pin (nor does .pins/notify.sh); 'orbit recover --restore-pinned' restores it"
  return 1
}

# notify EVENT SUMMARY: starts notify.sh in the background, in its own process group, without
# the lock's descriptors, and goes on at once.
notify() {
  local script
  notify_script_v || return 0
  script=$REPLY
  set -m
  if [[ -n $NOTIFY_TEXT ]]; then
    # The runner's own copy, read and checked against its pin at the start of the run: a
    # notify.sh changed since is never run (contract section 7).
    ORBIT_NOTIFY_LOOP_DIR=$LOOP_DIR "$BASH" -c "$NOTIFY_TEXT" "$LOOP_DIR/notify.sh" "$1" "$2" </dev/null >/dev/null 2>&1 7<&- 8>&- 9>&- &
  else
    ORBIT_NOTIFY_LOOP_DIR=$LOOP_DIR "$BASH" "$script" "$1" "$2" </dev/null >/dev/null 2>&1 7<&- 8>&- 9>&- &
  fi
  NOTIFY_PIDS+=("$!")
  set +m
}

# notify_drain: the one wait for notifications still being delivered: at most NOTIFY_TIMEOUT
# plus a margin (notify.sh ends by then on its own), after which what is left is stopped.
notify_drain() {
  local pid alive ticks=0 limit
  local -a left=()
  for pid in "${NOTIFY_PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      left+=("$pid")
    fi
  done
  NOTIFY_PIDS=()
  if ((${#left[@]} == 0)); then
    return 0
  fi
  limit=$((NOTIFY_TIMEOUT_S + 5))
  orbit_log "notify: waiting at most ${limit}s for ${#left[@]} notification(s) still being delivered"
  while ((ticks < limit * 10)); do
    alive=0
    for pid in "${left[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then
        alive=1
        break
      fi
    done
    if ((!alive)); then
      break
    fi
    sleep 0.1
    ticks=$((ticks + 1))
  done
  for pid in "${left[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      orbit_log "notify: a notification still running after the wait is stopped"
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}

# notify_stop_early EVENT SUMMARY: on a stop before the loop could run (a preflight failure, a
# corrupt state), notifies once and waits for it, bounded, on the way out. Best effort from
# here on: whatever fails, the caller's exit code stands.
notify_stop_early() {
  trap - ERR
  set +e
  if [[ -z $LOOP_DIR || ! -d $LOOP_DIR ]]; then
    return 0
  fi
  if [[ $NOTIFY_TIMEOUT_S == 10 ]] && orbit_setting_v NOTIFY_TIMEOUT 2>/dev/null; then
    NOTIFY_TIMEOUT_S=$REPLY
  fi
  notify "$1" "$2"
  notify_drain
  return 0
}

# ---- integrity pins (contract section 7).
PIN_BAD=
PIN_WANT=
PIN_HAVE=
# The manifest as the runner read it once, at the start of the run (contract section 7):
# every later check compares the files with this, never with pins.sha256 on disk, which an
# agent could rewrite along with the file it pins.
PIN_TEXT=
PIN_HELD=0
# pins_hold: reads pins.sha256 (and the protected sets, pins.sets) into memory. A manifest
# that is not a plain file, or a line not in sha256sum's format, stops the run.
PIN_SETS=()
pins_hold() {
  local f=$LOOP_DIR/pins.sha256 line
  if [[ -L $f || ! -f $f ]]; then
    PIN_BAD=pins.sha256 PIN_WANT='a regular file' PIN_HAVE=$(orbit_file_kind "$f")
    return 1
  fi
  PIN_TEXT=$(<"$f")
  while IFS= read -r line; do
    if [[ -n $line && ! $line =~ ^[0-9a-f]{64}\ \ .+$ ]]; then
      PIN_BAD=pins.sha256 PIN_WANT='sha256sum lines' PIN_HAVE="a line '${line:0:60}'"
      return 1
    fi
  done <<<"$PIN_TEXT"
  # An emptied or cut manifest pins nothing: the loop's own files must each have a line.
  for line in prompt.md verify.sh run-loop.sh recover.sh notify.sh loop.toml; do
    if ! pin_want_v "$line"; then
      PIN_BAD=pins.sha256 PIN_WANT="a pin for $line" PIN_HAVE='none'
      return 1
    fi
  done
  if ((${HOLDOUT_SETTING:-0} > 0)) && ! pin_want_v holdout.sh; then
    PIN_BAD=pins.sha256 PIN_WANT='a pin for holdout.sh' PIN_HAVE='none'
    return 1
  fi
  if [[ -f $LOOP_DIR/.baseline-commit ]] && ! pin_want_v goal.md; then
    PIN_BAD=pins.sha256 PIN_WANT='a pin for goal.md' PIN_HAVE='none'
    return 1
  fi
  # notify.sh, held as text once it matches its pin: what later notifications run.
  f=$LOOP_DIR/notify.sh
  if orbit_regular "$f" && pin_want_v notify.sh; then
    line=$(
      cat -- "$f"
      printf x
    )
    line=${line%x}
    local want=$REPLY
    orbit_sha256_str_v "$line"
    if [[ $REPLY == "$want" ]]; then
      NOTIFY_TEXT=$line
    fi
  fi
  PIN_SETS=()
  f=$LOOP_DIR/pins.sets
  if [[ -f $f && ! -L $f ]]; then
    while IFS= read -r line || [[ -n $line ]]; do
      if [[ $line =~ ^[0-9a-f]{64}\ \ .+$ ]]; then
        PIN_SETS+=("$line")
      fi
    done <"$f"
  fi
  PIN_HELD=1
}

# pin_want_v PATH: REPLY is the held pin of PATH (a loop file's name or an absolute path).
pin_want_v() {
  local rest=$'\n'$PIN_TEXT$'\n' hit
  REPLY=''
  if [[ $rest == *"  $1"$'\n'* ]]; then
    hit=${rest%%"  $1"$'\n'*}
    REPLY=${hit: -64}
  fi
  [[ -n $REPLY ]]
}

pins_check() {
  local line want path have out
  PIN_BAD=
  if ((!PIN_HELD)); then
    pins_hold || return 1
  fi
  if [[ -z $ORBIT_HASH_PID && $ORBIT_SHA_TOOL == sha256sum ]]; then
    # One process for every pin, fed from memory; only a mismatch is looked at line by line.
    if out=$(cd -- "$LOOP_DIR" && sha256sum -c --quiet --strict - 2>/dev/null <<<"$PIN_TEXT"); then
      : all pins hold
    else
      line=${out%%$'\n'*}
      path=${line%: FAILED*}
      PIN_BAD=$path
      pin_want_v "$path" || true
      PIN_WANT=$REPLY
      local file=$LOOP_DIR/$path
      if [[ $path == /* ]]; then
        file=$path
      fi
      if [[ -f $file ]]; then
        orbit_sha256_file_v "$file"
        PIN_HAVE=$REPLY
      else
        PIN_HAVE=missing
      fi
      [[ -n $PIN_BAD ]] || PIN_BAD=pins.sha256
      return 1
    fi
  else
    # Line by line: with the hasher, every pin in one round trip.
    local -a wants=() paths=() files=()
    local i
    while IFS= read -r line || [[ -n $line ]]; do
      if [[ -n $line ]]; then
        wants+=("${line%%  *}")
        paths+=("${line#*  }")
        # A workspace file by its absolute path (contract 2.0), a loop file by its name.
        if [[ ${line#*  } == /* ]]; then
          files+=("${line#*  }")
        else
          files+=("$LOOP_DIR/${line#*  }")
        fi
      fi
    done <<<"$PIN_TEXT"
    orbit_hasher_files "${files[@]}" || true
    for ((i = 0; i < ${#paths[@]}; i++)); do
      if [[ ! -f ${files[i]} ]]; then
        have=missing
      elif [[ ${ORBIT_HASHES[i]:--} != - ]]; then
        have=${ORBIT_HASHES[i]}
      else
        orbit_sha256_file_v "${files[i]}"
        have=$REPLY
      fi
      if [[ $have != "${wants[i]}" ]]; then
        PIN_BAD=${paths[i]} PIN_WANT=${wants[i]} PIN_HAVE=$have
        return 1
      fi
    done
  fi
  # An agent permission file that appeared after the first run is a hijack too: one that
  # the held manifest does not list, line for line.
  if [[ -f $LOOP_DIR/.baseline-commit ]]; then
    local f pinned=$'\n'$PIN_TEXT$'\n'
    permission_files
    for f in "${PERMISSION_FOUND[@]}"; do
      if [[ $pinned != *[0-9a-f]"  $WS/$f"$'\n'* ]]; then
        PIN_BAD=$WS/$f PIN_WANT=absent PIN_HAVE=$(orbit_sha256_file "$WS/$f")
        return 1
      fi
    done
  fi
  protected_sets_check
}

# protected_set_v GLOB: REPLY is the sha256 of the set of paths the glob matches now (git's
# view of the workspace: tracked, and untracked but not ignored), sorted, NUL-terminated.
# A file added to, removed from or renamed within the set changes it (contract section 7).
protected_set_v() {
  local out
  out=$({ git -C "$WS" ls-files -z --cached --others --exclude-standard -- ":(glob)$1" || echo 'orbit: git failed'; } |
    LC_ALL=C sort -zu | orbit_sha256_stdin) || out=''
  REPLY=$out
  [[ $REPLY =~ ^[0-9a-f]{64}$ ]]
}

protected_sets_check() {
  local line g
  for line in "${PIN_SETS[@]}"; do
    g=${line#*  }
    if ! protected_set_v "$g" || [[ $REPLY != "${line%%  *}" ]]; then
      PIN_BAD="$WS/$g" PIN_WANT="the set of files pinned at the first run" PIN_HAVE="a different set"
      protected_set_diff "$g"
      return 1
    fi
  done
  return 0
}

# protected_set_diff GLOB: names the first path added to (or missing from) the glob's set,
# compared with the files the manifest pins (for the log, the event and the summary).
protected_set_diff() {
  local f pinned=$'\n'$PIN_TEXT$'\n' now=$'\n'
  while IFS= read -r -d '' f; do
    now+="$WS/$f"$'\n'
    if [[ $pinned != *"  $WS/$f"$'\n'* ]]; then
      PIN_BAD="$WS/$f" PIN_HAVE="added to the protected set '$1'"
      return 0
    fi
  done < <(git -C "$WS" ls-files -z --cached --others --exclude-standard -- ":(glob)$1" 2>/dev/null || true)
  while IFS= read -r line; do
    f=${line#*  }
    [[ $f == "$WS"/* ]] || continue
    if [[ $now != *$'\n'"$f"$'\n'* ]] && [[ ! -e $f ]]; then
      PIN_BAD=$f PIN_HAVE="removed from the protected set '$1'"
      return 0
    fi
  done <<<"$PIN_TEXT"
}

# permission_files: PERMISSION_FOUND lists the agent permission files the workspace holds
# now (ORBIT_PERMISSION_FILES expanded at its root, regular files only), relative to the
# root. Names with blanks or glob characters are taken as they are.
PERMISSION_FOUND=()
permission_files() {
  local g f had_nullglob=0 IFS=''
  local -a matches=()
  PERMISSION_FOUND=()
  if shopt -q nullglob; then
    had_nullglob=1
  fi
  shopt -s nullglob
  for g in "${ORBIT_PERMISSION_FILES[@]}" ${ENGINE_PERMISSION_FILES[@]+"${ENGINE_PERMISSION_FILES[@]}"}; do
    # The root quoted (taken literally), the glob not: expanded, and never split (IFS is
    # empty); no match expands to nothing.
    # shellcheck disable=SC2206
    matches=("$WS"/$g)
    for f in "${matches[@]}"; do
      if [[ -f $f ]]; then
        PERMISSION_FOUND+=("${f#"$WS"/}")
      fi
    done
  done
  if ((!had_nullglob)); then
    shopt -u nullglob
  fi
}

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

trust_loop_v() {
  REPLY=$(find "$LOOP_DIR" -mindepth 1 \( -name $'*\n*' -printf 'X - - - - %P\n' -prune \) -o \
    \( -type d -printf 'd - - - - %P\n' \) -o -printf '%y %i %s %T@ %C@ %P\n' 2>/dev/null | LC_ALL=C sort)
}

trust_git_v() {
  local p
  local -a roots=()
  REPLY=''
  for p in "$GIT_COMMON_ABS/config" "$GIT_COMMON_ABS/config.worktree" "$GIT_COMMON_ABS/hooks" \
    "$GIT_COMMON_ABS/info" "$GIT_DIR_ABS/config.worktree" "$GIT_DIR_ABS/commondir" \
    "${HOME:-/nonexistent}/.gitconfig" "${XDG_CONFIG_HOME:-${HOME:-/nonexistent}/.config}/git/config" \
    "${XDG_CONFIG_HOME:-${HOME:-/nonexistent}/.config}/git/attributes"; do
    if [[ -e $p || -L $p ]]; then
      roots+=("$p")
    else
      REPLY+="absent $p"$'\n'
    fi
  done
  # A directory by its entries, not its times; info/refs not at all: every repack (a
  # detached `gc --auto` of the user's commit, git maintenance) rewrites it for the dumb
  # HTTP transport, and nothing local reads it.
  if ((${#roots[@]})); then
    REPLY+=$(find "${roots[@]}" \( -path "$GIT_COMMON_ABS/info/refs" -prune \) -o \( -type d -printf 'd - - - - %p\n' \) -o \
      -printf '%y %i %s %T@ %C@ %p\n' 2>/dev/null | LC_ALL=C sort)
  fi
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

# trust_may_change MODE PATH: whether PATH in the loop directory may have changed since the
# last look. During an agent or check run (MODE agent|check) only the runner's scratch and
# logs; between them (MODE runner), anything the runner writes itself.
trust_may_change() {
  local n
  case $2 in
    .run-tmp | .run-tmp/* | runner.log | runner.log.1 | cron.log | cron.log.1 | systemd.log | systemd.log.1) return 0 ;;
  esac
  [[ $1 == runner ]] || return 1
  case $2 in
    goal.md | prompt.md | verify.sh | holdout.sh | run-loop.sh | recover.sh | notify.sh | loop.toml | pins.sha256 | pins.sets | \
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

# trust_check MODE: compares git's control files, then the loop directory, with what the
# runner holds; status 1 with TRUST_BAD (the path), TRUST_REASON, TRUST_WANT and TRUST_HAVE
# set on a change it did not make (a pinned loop file changed is named with its own reason:
# goal_drift, reward_hack, script_tamper; anything else is loop_tamper, git's files
# git_tamper). Holds what it found either way.
trust_check() {
  local mode=$1 now line path ty why diffs bad='' bad_why='' pinned='' pinned_why=''
  local -A before=()
  TRUST_BAD=
  if ((!TRUST_HELD)); then
    trust_hold
    return 0
  fi
  trust_git_v
  if [[ $REPLY != "$TRUST_GIT" ]]; then
    TRUST_REASON=$REASON_GIT_TAMPER
    TRUST_WANT='unchanged since the run started' TRUST_HAVE='changed'
    TRUST_BAD=$(diff <(printf '%s\n' "$TRUST_GIT") <(printf '%s\n' "$REPLY") | grep -m 1 '^[<>]' || true)
    TRUST_BAD=${TRUST_BAD#[<>] }
    if [[ $TRUST_BAD == absent\ * ]]; then
      TRUST_BAD=${TRUST_BAD#absent }
    else
      TRUST_BAD=${TRUST_BAD#* * * * * }
    fi
    TRUST_GIT=$REPLY
    return 1
  fi
  trust_loop_v
  now=$REPLY
  if [[ $now != "$TRUST_LOOP" ]]; then
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
    # Then only the lines that differ (in the order of their paths): a path on both sides
    # changed, one only before was removed, one only now was created.
    diffs=$(diff -- <(printf '%s\n' "$TRUST_LOOP") <(printf '%s\n' "$now") || true)
    while IFS= read -r line; do
      [[ $line == '< '* ]] && before[${line#< * * * * * }]=1
    done <<<"$diffs"
    while IFS= read -r line; do
      [[ $line == '> '* ]] || continue
      path=${line#> * * * * * }
      if [[ $line == '> '[fd]' '* ]] && ! trust_may_change "$mode" "$path"; then
        if [[ -n ${before[$path]-} ]]; then why=changed; else why=created; fi
        trust_note "$path" "$why"
      fi
      unset 'before[$path]'
    done <<<"$diffs"
    while IFS= read -r line; do
      [[ $line == '< '* ]] || continue
      path=${line#< * * * * * }
      if [[ -n ${before[$path]-} ]] && ! trust_may_change "$mode" "$path"; then
        trust_note "$path" removed
      fi
    done <<<"$diffs"
  fi
  TRUST_LOOP=$now
  if [[ -n $pinned ]]; then
    orbit_pin_reason_v "$pinned"
    TRUST_REASON=$REPLY TRUST_BAD=$pinned
    pin_want_v "$pinned" || REPLY=absent
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

# trust_note PATH WHY (trust_check's): the first change to a pinned loop file, else the first
# change of any other file, is the one reported.
trust_note() {
  case $1 in
    goal.md | prompt.md | verify.sh | holdout.sh | holdout/?* | run-loop.sh | recover.sh | notify.sh | loop.toml)
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

# integrity_gate WHEN: check every pin against the held manifest, then the loop directory
# and git's control files against the runner's memory. What an agent or check run changed
# was looked at as soon as it ended (run_agent, run_verify: TRUST_BAD), before the runner
# wrote anything; this looks at what changed since. On a mismatch, status 1 with
# INTEGRITY_REASON set (the caller stops ABORTED, EXIT_INTEGRITY).
integrity_gate() {
  local when=$1 reason
  if workspace_intact; then
    # git's control files first (the pin check itself runs git), then the pins, then the
    # rest of the loop directory.
    PIN_BAD=
    if { [[ -z $TRUST_BAD ]] && trust_check runner; } && pins_check; then
      orbit_event integrity_pass "$CUR_ITER" when "$when"
      return 0
    fi
    if [[ -n $TRUST_BAD ]]; then
      reason=$TRUST_REASON
      PIN_BAD=$TRUST_BAD PIN_WANT=$TRUST_WANT PIN_HAVE=$TRUST_HAVE
    else
      orbit_pin_reason_v "$PIN_BAD"
      reason=$REPLY
    fi
  else
    reason=$REASON_GIT_TAMPER
  fi
  orbit_event integrity_fail "$CUR_ITER" when "$when" code "$reason" file "$PIN_BAD" expected "$PIN_WANT" actual "$PIN_HAVE"
  orbit_log "integrity: $PIN_BAD changed ($reason): expected $PIN_WANT, found $PIN_HAVE"
  INTEGRITY_REASON=$reason
  return 1
}
INTEGRITY_REASON=

# workspace_intact: the workspace is still the worktree the run found: not a symlink, and its
# .git file names the same git directory. An agent that swaps it for a link (to the user's
# checkout, say) would have the loop's git calls, and its commits, land there. (Read with
# bash alone: this is asked before and after every agent run.)
workspace_intact() {
  local line=''
  if [[ -n $GIT_DIR_ABS && ! -L $WS && -f $WS/.git && ! -L $WS/.git ]]; then
    IFS= read -r line <"$WS/.git" 2>/dev/null || true
    if [[ $line == "gitdir: "* && ${line#gitdir: } -ef $GIT_DIR_ABS ]]; then
      return 0
    fi
  fi
  PIN_BAD=$WS PIN_WANT="the worktree of $GIT_DIR_ABS"
  if [[ -L $WS ]]; then
    PIN_HAVE="a symlink to $(readlink -- "$WS" 2>/dev/null || true)"
  else
    PIN_HAVE="no worktree of this loop (${line:-no .git file})"
  fi
  return 1
}

integrity_stop() {
  local msg
  msg="$INTEGRITY_REASON: $PIN_BAD changed; review it, then 'orbit recover --restore-pinned' to undo or 'orbit recover --repin' to accept"
  if [[ $INTEGRITY_REASON == "$REASON_GIT_TAMPER" && $PIN_BAD == "$WS" ]]; then
    msg="git_tamper: the workspace $WS is no longer the loop's worktree ($PIN_HAVE); remove what is there, then 'orbit recover --repin' recreates it from $LOOP_BRANCH"
  fi
  if [[ $INTEGRITY_REASON == "$REASON_GOAL_DRIFT" ]]; then
    msg="goal_drift: goal.md changed; review it, then 'orbit recover --repin-goal' to accept or '--restore-pinned' to undo"
  fi
  finish "$EXIT_INTEGRITY" "$STATUS_ABORTED" "$INTEGRITY_REASON" "$msg"
}

# The first run pins goal.md, every protected path and the agent permission files.
first_run_pins() {
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
        protected_files "$g"
      done
      permission_files
      for f in "${PERMISSION_FOUND[@]}"; do
        printf '%s\0' "$f"
      done
    } | sort -zu | while IFS= read -r -d '' f; do
      if [[ $f == .orbit-agent/* ]]; then
        continue
      fi
      [[ $f == *$'\n'* || $f == *\\* ]] && {
        orbit_log "warning: cannot pin '$f' (newline or backslash in its name)"
        continue
      }
      printf '%s  %s\n' "$(orbit_sha256_file "$WS/$f")" "$WS/$f"
    done
  } >"$LOOP_DIR/.pins.sha256.tmp.$$"
  mv -f -- "$LOOP_DIR/.pins.sha256.tmp.$$" "$LOOP_DIR/pins.sha256"
  pins_sets_write
  mkdir -p -- "$LOOP_DIR/.pins"
  cp -p -- "$LOOP_DIR/goal.md" "$LOOP_DIR/.pins/goal.md"
}

# pins_sets_write: pins.sets, one line per protect glob: the sha256 of the set of paths it
# matches (protected_set_v). Written at the first run (and by orbit recover --repin).
pins_sets_write() {
  local g text=''
  for g in "${PROTECT_GLOBS[@]}"; do
    protected_set_v "$g" || orbit_die "$EXIT_PREFLIGHT" "cannot list the files of the protect glob '$g' in $WS"
    text+="$REPLY  $g"$'\n'
  done
  orbit_write_file "$LOOP_DIR/pins.sets" "$text" || orbit_records_fail "$LOOP_DIR/pins.sets"
}

# Files matched by one protect glob, NUL-separated, relative to the workspace's root.
protected_files() {
  local g=$1
  git -C "$WS" ls-files -z --cached --others --exclude-standard -- ":(glob)$g" 2>/dev/null || true
}


# ---- the tree: a snapshot of the workspace (minus the agent's folder) as a git tree id,
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
  GIT_INDEX_FILE=$idx GIT_OPTIONAL_LOCKS=0 git -C "$WS" add -A -- . >/dev/null 2>>"$ORBIT_LOG_FILE"
  REPLY=$(GIT_INDEX_FILE=$idx git -C "$WS" write-tree 2>>"$ORBIT_LOG_FILE")
}

# Changed paths between two trees, NUL-separated.
tree_changes() {
  git_q diff --no-renames --name-only -z "$1" "$2" -- 2>/dev/null || true
}

# changes_v BEFORE AFTER: CHANGES_FILE lists the changed paths (NUL-separated, computed
# once per pair of trees), CHANGES_COUNT counts them, and REPLY is the first 20 of them on
# one line, cleaned for the record.
CHANGES_KEY=
CHANGES_FILE=
CHANGES_COUNT=0
CHANGES_SHOWN=
changes_v() {
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

# ---- first run: start time, pins and the workspace.
# Each step is done once: a crash in here and a rerun must not re-pin a goal the agent may
# have changed since. The workspace starts from the user's HEAD commit: their uncommitted
# work is neither seen by the agent nor committed (no dirty baseline is needed).
first_run_setup() {
  local branch base tip
  printf -v 'S[STARTED_AT]' '%(%s)T' -1
  if [[ -f $LOOP_DIR/.baseline-commit ]]; then
    base=$(<"$LOOP_DIR/.baseline-commit")
  else
    base=$(repo_git rev-parse HEAD)
  fi
  # A loop branch an earlier loop of the same name left is not this loop's: its commits
  # would be taken for a fresh start. Only one at this loop's base (made by this first run
  # before a crash) is.
  tip=$(repo_git rev-parse --verify -q "refs/heads/$LOOP_BRANCH" 2>/dev/null || true)
  if [[ -n $tip && $tip != "$base" ]]; then
    preflight_fail "the branch $LOOP_BRANCH exists already (an earlier loop's?) and is not at the commit this loop starts from: merge what you want of it, delete it (git branch -D $LOOP_BRANCH), then rerun; or render this loop under another name (orbit init --dir .orbit/OTHER)"
  fi
  if [[ ! -f $LOOP_DIR/.baseline-commit ]]; then
    repo_git symbolic-ref --short -q HEAD >"$LOOP_DIR/.origin-branch" || true
    printf '%s\n' "$base" >"$LOOP_DIR/.baseline-commit.tmp"
    mv -f -- "$LOOP_DIR/.baseline-commit.tmp" "$LOOP_DIR/.baseline-commit"
  fi
  branch=$(cat -- "$LOOP_DIR/.origin-branch" 2>/dev/null || true)
  if ! state_check_value ORIGIN_BRANCH "$branch"; then
    orbit_log "the starting branch '$branch' is not a plain ref name: not recorded"
    branch=''
  fi
  S[ORIGIN_BRANCH]=$branch
  S[ITER_BRANCH]=$LOOP_BRANCH
  S[WORKSPACE]=$WS
  workspace_exclude
  if [[ ! -e $WS/.git ]]; then
    if [[ -e $WS && -n $(ls -A -- "$WS" 2>/dev/null) ]]; then
      preflight_fail "the workspace path $WS exists and is not empty: set workspace in loop.toml to a new path, or move it away"
    fi
    rmdir -- "$WS" 2>/dev/null || true
    workspace_add "$base" ||
      preflight_fail "cannot create the workspace $WS on $LOOP_BRANCH (see runner.log): is the branch checked out elsewhere?"
    orbit_log "workspace $WS on branch $LOOP_BRANCH (from ${branch:-a detached HEAD} at ${base:0:12})"
    orbit_event workspace_created "${S[NEXT_ITERATION]}" path "$WS" branch "$LOOP_BRANCH" base "$base"
  fi
  workspace_git_facts
  if ! ws_on_branch; then
    workspace_head_restore "first run"
  fi
  if [[ ! -f $LOOP_DIR/.baseline-tree ]]; then
    first_run_pins
    git_q rev-parse "HEAD^{tree}" >"$LOOP_DIR/.baseline-tree.tmp"
    mv -f -- "$LOOP_DIR/.baseline-tree.tmp" "$LOOP_DIR/.baseline-tree"
  fi
  branch_head_record
}

# ---- iteration records

# result_read FILE: KEY=VALUE lines into R, never sourced: the contract's result.env keys
# only (ORBIT_RESULT_KEYS), and a numeric one (ORBIT_RESULT_NUMERIC) only when its value is
# a whole number or empty, so that nothing read from the file reaches arithmetic unchecked.
result_read() {
  local line k v
  R=()
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line == *=* ]] || continue
    k=${line%%=*}
    v=${line#*=}
    [[ $k =~ ^[A-Z_]{1,32}$ && " ${ORBIT_RESULT_KEYS[*]} " == *" $k "* ]] || continue
    if [[ -n $v && " ${ORBIT_RESULT_NUMERIC[*]} " == *" $k "* ]] && ! orbit_is_uint "$v"; then
      orbit_log "$1: $k is not a whole number: ignored"
      continue
    fi
    R[$k]=$v
  done <"$1"
}

# result_write FILE KEY...: the KEYs' values in R as FILE's KEY=VALUE lines, atomically.
result_write() {
  local file=$1 k text=''
  shift
  for k in "$@"; do
    text+="$k=${R[$k]:-}"$'\n'
  done
  orbit_write_file "$file" "$text" || orbit_die "$EXIT_STATE_CORRUPT" "cannot write $file"
}

# Move what an interrupted attempt left in an iteration directory aside (never deleted).
iter_prepare() {
  local dir=$1 k=1 f
  if [[ -L $dir ]]; then
    orbit_log "$dir is a symlink: removed (the record is written in a real directory)"
    rm -f -- "$dir"
  fi
  if [[ -d $dir ]] && [[ -n $(find "$dir" -maxdepth 1 -type f -print -quit) ]]; then
    while [[ -e $dir/interrupted.$k ]]; do k=$((k + 1)); done
    mkdir -p -- "$dir/interrupted.$k"
    for f in "$dir"/*; do
      if [[ -f $f ]]; then
        mv -- "$f" "$dir/interrupted.$k/"
      fi
    done
    orbit_log "iteration $(basename -- "$dir"): an interrupted attempt was kept in interrupted.$k"
  fi
  mkdir -p -- "$dir"
}

# ---- cost
cost_to_micro() {
  local v=$1
  [[ $v =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] || return 1
  awk -v x="$v" 'BEGIN { if (x < 0 || x > 1e9) exit 1; printf "%d", x * 1000000 + 0.5 }'
}

# cost_of_run LOG COSTFILE: sets RUN_COST_M and RUN_COST_KIND.
cost_of_run() {
  local log=$1 cfile=$2 v=''
  RUN_COST_M=0
  RUN_COST_KIND=$COST_UNKNOWN
  if [[ -s $cfile ]]; then
    v=$(head -c 64 -- "$cfile" | tr -d ' \n\r\t$')
  fi
  if [[ -z $v && -f $log && $ENGINE != custom ]]; then
    # A built-in engine's cost from its own structured output (engine.sh).
    if engine_cost_v "$log"; then
      return 0
    fi
    RUN_COST_M=0
    RUN_COST_KIND=$COST_UNKNOWN
  elif [[ -z $v && -f $log ]]; then
    v=$(grep -aoE '"total_cost_usd" *: *[0-9.eE+-]+' -- "$log" || true)
    # The last one reported; its number.
    v=${v##*$'\n'}
    v=${v##*:}
    v=${v##* }
  fi
  if [[ -n $v ]] && RUN_COST_M=$(cost_to_micro "$v"); then
    RUN_COST_KIND=$COST_REPORTED
    return 0
  fi
  RUN_COST_M=0
  if [[ -n $COST_ESTIMATE_M ]]; then
    RUN_COST_M=$COST_ESTIMATE_M
    RUN_COST_KIND=$COST_ESTIMATED
  fi
}

# The ledger's totals are read once per run (ledger_load) and kept up to date by
# ledger_append: the whole spend, and the spend and cost kinds of the latest iteration, by
# the one rule every reader of cost.ledger applies (orbit_ledger_sum_v).
LEDGER_TOTAL=0
LEDGER_IT=0
LEDGER_IT_SUM=0
LEDGER_IT_KINDS=' '
# ledger_load: the totals from cost.ledger, for iteration S[NEXT_ITERATION]. A torn last line
# (a write cut short) is ended with a newline first, so that the next append starts a line
# of its own; it counts only if it is a whole ledger line (only its newline was missing).
ledger_load() {
  local file="$LOOP_DIR/cost.ledger"
  LEDGER_IT=${S[NEXT_ITERATION]} LEDGER_TOTAL=0 LEDGER_IT_SUM=0 LEDGER_IT_KINDS=' '
  [[ -f $file ]] || return 0
  ledger_sum_v "$LEDGER_IT"
  if ((ORBIT_LEDGER_TORN)); then
    orbit_log "cost.ledger ends in a torn line: ended with a newline (it counts only if it is a whole ledger line)"
    printf '\n' >>"$file" || orbit_records_fail "$file"
    ledger_sum_v "$LEDGER_IT"
  fi
  LEDGER_TOTAL=$REPLY LEDGER_IT_SUM=$ORBIT_LEDGER_ITER_SUM LEDGER_IT_KINDS=$ORBIT_LEDGER_ITER_KINDS
}

# ledger_sum_v ITERATION: orbit_ledger_sum_v on this loop's cost.ledger; a ledger that
# cannot be read stops the run.
ledger_sum_v() {
  orbit_ledger_sum_v "$LOOP_DIR/cost.ledger" "$1" ||
    orbit_die "$EXIT_FAILURE" "cannot read $LOOP_DIR/cost.ledger: check its permissions, then rerun"
}

# ledger_append ITERATION MICRO_USD KIND [CANDIDATE]: one line for one agent run (a fan-out's
# with its candidate, the contract's fourth column), and the totals.
ledger_append() {
  # The cost counts in memory even when the ledger cannot take it (a link put in its place).
  if orbit_appendable "$LOOP_DIR/cost.ledger"; then
    if [[ -n ${4:-} ]]; then
      printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$LOOP_DIR/cost.ledger"
    else
      printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$LOOP_DIR/cost.ledger"
    fi || orbit_records_fail "$LOOP_DIR/cost.ledger"
  fi
  if [[ $1 != "$LEDGER_IT" ]]; then
    LEDGER_IT=$1 LEDGER_IT_SUM=0 LEDGER_IT_KINDS=' '
  fi
  if orbit_is_uint "$2"; then
    LEDGER_TOTAL=$((LEDGER_TOTAL + $2))
    LEDGER_IT_SUM=$((LEDGER_IT_SUM + $2))
  fi
  [[ $LEDGER_IT_KINDS == *" $3 "* ]] || LEDGER_IT_KINDS+="$3 "
}

# ledger_iter_sum_v N: REPLY is what iteration N's runs cost.
ledger_iter_sum_v() {
  if [[ $1 == "$LEDGER_IT" ]]; then
    REPLY=$LEDGER_IT_SUM
  else
    ledger_sum_v "$1"
    REPLY=$ORBIT_LEDGER_ITER_SUM
  fi
}

# The cost kind of the latest iteration's runs: reported, estimated, unknown, or partial
# (some runs reported or estimated, some unknown).
ledger_iter_kind_v() {
  local k=$LEDGER_IT_KINDS
  if [[ $k == *" $COST_UNKNOWN "* && ($k == *" $COST_REPORTED "* || $k == *" $COST_ESTIMATED "*) ]]; then
    REPLY=partial
  elif [[ $k == *" $COST_UNKNOWN "* ]]; then
    REPLY=$COST_UNKNOWN
  elif [[ $k == *" $COST_ESTIMATED "* ]]; then
    REPLY=$COST_ESTIMATED
  elif [[ $k == *" $COST_REPORTED "* ]]; then
    REPLY=$COST_REPORTED
  else
    REPLY=$COST_UNKNOWN
  fi
}

# ---- the prompt
PROMPT_TEXT=
GOAL_TEXT=
PROMPT_READ=0
# prompt_part FILE TEXT: TEXT is FILE's content read earlier; a file with a NUL byte
# (which a bash string cannot hold) is copied as it is.
prompt_part() {
  if [[ $2 == $'\x01nul' ]]; then
    cat -- "$1"
  else
    printf '%s' "$2"
  fi
}
prompt_read_v() {
  REPLY=''
  if IFS= read -r -d '' REPLY <"$1"; then
    REPLY=$'\x01nul'
  fi
}
# CLAIM_NUDGE: the last iteration's checks passed but it made no claim (contract 6: the
# next prompt asks for the claim, or for what is still missing).
CLAIM_NUDGE=0
# passed_without_claim N: status 0 when iteration N's record says verify passed and no
# claim was made (read with bash alone; a record that is not a regular file says no).
passed_without_claim() {
  local d line v='' c=''
  printf -v d '%s/iterations/%06d/result.env' "$LOOP_DIR" "$1"
  [[ -f $d && ! -L $d ]] || return 1
  while IFS= read -r line || [[ -n $line ]]; do
    case $line in
      VERIFY=*) v=${line#VERIFY=} ;;
      DONE_CLAIM=*) c=${line#DONE_CLAIM=} ;;
    esac
  done <"$d"
  [[ $v == "$VERIFY_PASS" && $c == 0 ]]
}
build_prompt() {
  local n=$1 phase=$2 attempt=$3 out=$4 fb=$5 remaining
  if [[ -n $USD_CAP_M ]]; then
    remaining="\$$(orbit_usd_text $((USD_CAP_M > S[COST_MICROUSD] ? USD_CAP_M - S[COST_MICROUSD] : 0))) of \$$(orbit_usd_text "$USD_CAP_M")"
  else
    remaining="no spending cap (spent so far: \$$(orbit_usd_text "${S[COST_MICROUSD]}"))"
  fi
  # prompt.md and goal.md are pinned (a change stops the loop before the next agent
  # run), so they are read once per run.
  if ((!PROMPT_READ)); then
    prompt_read_v "$LOOP_DIR/prompt.md"
    PROMPT_TEXT=$REPLY
    prompt_read_v "$LOOP_DIR/goal.md"
    GOAL_TEXT=$REPLY
    PROMPT_READ=1
  fi
  {
    prompt_part "$LOOP_DIR/prompt.md" "$PROMPT_TEXT"
    printf '\n---\n\n# The goal (goal.md)\n\n'
    prompt_part "$LOOP_DIR/goal.md" "$GOAL_TEXT"
    printf '\n---\n\n# This run\n\n'
    printf -- '- Iteration %s of at most %s; attempt %s of %s; phase: %s.\n' "$n" "$MAX_ITERATIONS" "$attempt" "$RETRY_LIMIT" "$phase"
    printf -- '- Budget: %s.\n' "$remaining"
    if [[ $MEMORY_SETTING == feedback ]]; then
      printf -- '- Your folder: .orbit-agent/ (goal.md, verify.sh%s; never committed)\n' "${fb:+, feedback.json, feedback.txt, last-verify.log}"
    else
      printf -- '- Your folder: .orbit-agent/ (goal.md, progress.md, notes.md%s; never committed)\n' "${fb:+, feedback.json, feedback.txt, last-verify.log}"
    fi
    case $phase in
      "$PHASE_CONFIRM")
        printf '\n# Your task: confirm, from a fresh context\n\n'
        printf 'The previous run claimed the goal is DONE and the checks pass. Check every acceptance\n'
        printf 'criterion against the repository as it is now. Change nothing in the repository.\n'
        printf 'Then write your verdict into .orbit-agent/confirm.md; its first line is exactly one of:\n\n'
        printf '    CONFIRMED\n'
        printf '    NOT CONFIRMED: <what is missing or wrong, in one line>\n\n'
        printf 'Anything else, no file, or a change to the repository is taken as NOT CONFIRMED.\n'
        ;;
      "$PHASE_WRAPUP")
        printf '\n# Your task: wrap up\n\n'
        printf 'The loop has used all of its iterations without reaching DONE. Do not change the\n'
        printf 'project. Write into .orbit-agent/notes.md what remains to be done, what blocked progress,\n'
        printf 'and what a human should look at first.\n'
        ;;
    esac
    if [[ -n $fb && -f $fb ]]; then
      printf '\n# Feedback: what failed last\n\n'
      if [[ -f ${fb%.json}.txt ]]; then
        cat -- "${fb%.json}.txt"
      fi
      if [[ -f ${fb%/*}/input-verify.log ]]; then
        printf '\nThe full output of that verify run is in .orbit-agent/last-verify.log.\n'
      fi
    fi
    if [[ $phase == "$PHASE_WORK" ]] && ((CLAIM_NUDGE)); then
      printf '\n# The checks pass\n\n'
      printf 'After the last iteration every check passed, but no DONE claim was made. If every\n'
      printf 'acceptance criterion holds, write .orbit-agent/done.md with the evidence for each.\n'
      if [[ $MEMORY_SETTING == feedback ]]; then
        printf 'If not, work on what is still missing.\n'
      else
        printf 'If not, write in .orbit-agent/notes.md what is still missing, and work on it.\n'
      fi
    fi
    # The earlier failures are memory too: memory = "feedback" gives only the last one.
    if [[ $MEMORY_SETTING != feedback && -s $LOOP_DIR/.failures.log ]]; then
      printf '\n# Earlier distinct failures (do not retry what already failed)\n\n'
      tail -n 10 -- "$LOOP_DIR/.failures.log" | cut -f2- | sed 's/^/- /'
    fi
  } >"$out"
}

# REPLY: the feedback of the latest failed verify before iteration N (a JSON file), if any.
last_feedback_v() {
  local n=$1 i d
  REPLY=''
  for ((i = n - 1; i >= 1 && i >= n - 3; i--)); do
    printf -v d '%s/iterations/%06d' "$LOOP_DIR" "$i"
    if [[ -f $d/result.env ]]; then
      if [[ -f $d/feedback.json ]]; then
        REPLY=$d/feedback.json
      fi
      return 0
    fi
  done
}

# ---- the live view: .run-tmp/agent.live holds the agent's output as it is written (what
# `orbit logs -f` follows), a header line before each agent run and an exit line after it.
# It starts over at each run, and before an agent run once it holds more than
# AGENT_LOG_MAX bytes; each run adds at most AGENT_LOG_MAX bytes of output. The copy is made
# by a process of the runner's own group, so killing the agent's group never loses what
# the agent had written.
LIVE_FD=
LIVE_PID=

# live_reset: a new, empty agent.live (a new file: a follower holding the old one sees it).
live_reset() {
  rm -f -- "$ORBIT_TMP/agent.live.tmp"
  : >"$ORBIT_TMP/agent.live.tmp"
  mv -f -- "$ORBIT_TMP/agent.live.tmp" "$ORBIT_TMP/agent.live"
}

# live_copy CAP FILE: appends at most CAP bytes of standard input to FILE as they come,
# then a note if there was more, and reads the rest to its end (the writer never meets a
# closed pipe). head buffers what it writes to a file: unbuffered through stdbuf, else dd
# copies byte by byte (slower, as live).
live_copy() {
  local cap=$1 live=$2 c
  trap - ERR
  trap '' INT TERM HUP
  set +e
  if ! command -v stdbuf >/dev/null 2>&1 || ! stdbuf -o0 head -c "$cap" >>"$live" 2>/dev/null; then
    dd bs=1 count="$cap" >>"$live" 2>/dev/null
  fi
  # One byte, whatever it is (-d '': a NUL ends the read instead of being skipped).
  if IFS= read -r -d '' -n 1 c; then
    printf '\n[orbit: the live view of this run stops at %s bytes; agent.log keeps its end]\n' "$cap" >>"$live"
    cat >/dev/null
  fi
}

# live_open N PHASE ATTEMPT: the header line, then the copy on the descriptor LIVE_FD.
live_open() {
  local live="$ORBIT_TMP/agent.live"
  if [[ ! -f $live || -L $live ]] || (($(wc -c <"$live") > AGENT_LOG_MAX)); then
    live_reset
  fi
  printf '=== orbit: iteration %s, %s, attempt %s, started %s ===\n' "$1" "$2" "$3" "$(orbit_iso_now)" >>"$live"
  # Nothing of the runner's but the pipe: not its lock, nor its output (a caller that
  # waits for the runner's output to end must not wait for this copy too).
  exec {LIVE_FD}> >(
    exec 7<&- 8>&- 9>&- >/dev/null 2>&1
    live_copy "$AGENT_LOG_MAX" "$live"
  )
  LIVE_PID=$!
}

# live_close [LINE]: closes the copy's descriptor, gives it up to 5 s to write what is left
# in the pipe, then appends LINE (on a line of its own).
live_close() {
  local line=${1:-} live="$ORBIT_TMP/agent.live" i
  if [[ -z $LIVE_FD ]]; then
    return 0
  fi
  exec {LIVE_FD}>&-
  LIVE_FD=
  # The copy ends within milliseconds of the pipe's close: looked at every 10 ms for the
  # first 200 ms, then every 100 ms, 5 s in all.
  for ((i = 0; i < 68; i++)); do
    kill -0 "$LIVE_PID" 2>/dev/null || break
    if ((i < 20)); then
      sleep 0.01
    else
      sleep 0.1
    fi
  done
  # Still there: something the agent left holds the pipe open. The copy is the runner's
  # own: it never outlives the run.
  if kill -0 "$LIVE_PID" 2>/dev/null; then
    orbit_log "the live view's copy did not end within 5s of the agent's exit: stopped"
    kill -KILL "$LIVE_PID" 2>/dev/null || true
  fi
  LIVE_PID=
  if [[ -n $line && -f $live && ! -L $live ]]; then
    if (($(tail -c 1 -- "$live" | tr -d '\n' | wc -c))); then
      printf '\n' >>"$live"
    fi
    printf '%s\n' "$line" >>"$live"
  fi
}

# ---- the agent
# The wrapper of an agent run (bash -c, in the run's own process group). The agent gets a
# process group of its own; its output goes to the capture, which is not in that group,
# ignores the TERM of a timeout (it ends when the output does) and does not carry the run's
# marker. When the agent's main process exits, what it left is stopped at once: its group,
# then anything carrying the run's marker, so that a process holding the agent's output
# open neither turns the exit into a timeout nor keeps the output from ending. A TERM (the
# timeout) is passed on to the agent's group.
# shellcheck disable=SC2016  # expanded by the wrapper, by design
ORBIT_AGENT_WRAPPER='cd -- "$ORBIT_WORKSPACE" || exit 126
if [[ -n $ORBIT_FB ]]; then export ORBIT_FEEDBACK_FILE=$ORBIT_FB; else unset ORBIT_FEEDBACK_FILE; fi
unset ORBIT_FB
live=$ORBIT_LIVE_FD
unset ORBIT_LIVE_FD
exec {cap}> >(unset ORBIT_RUN_ID; exec "$BASH" -c "trap \"\" TERM PIPE
  tee -- \"/dev/fd/$live\" | { head -c \"\$ORBIT_HALF\" >\"\$ORBIT_OUT.head\"; tail -c \"\$ORBIT_HALF\" >\"\$ORBIT_OUT.tail\"; }" orbit-capture)
cpid=$!
unset ORBIT_OUT ORBIT_HALF
set -m
"$@" >&"$cap" 2>&1 {live}>&- {cap}>&- &
apid=$!
set +m
exec {cap}>&- {live}>&-
trap "kill -TERM -- -\$apid 2>/dev/null" TERM
while :; do
  rc=0
  wait "$apid" || rc=$?
  if ((rc > 128)) && kill -0 "$apid" 2>/dev/null; then continue; fi
  break
done
trap "" TERM
kill -KILL -- "-$apid" 2>/dev/null
while IFS= read -r f; do
  p=${f#/proc/}
  p=${p%%/*}
  [[ $p == "$$" ]] || kill -KILL "$p" 2>/dev/null
done < <(unset ORBIT_RUN_ID; grep -lzxF -- "ORBIT_RUN_ID=$ORBIT_RUN_ID" /proc/[0-9]*/environ 2>/dev/null)
for ((i = 0; i < 100; i++)); do
  kill -0 "$cpid" 2>/dev/null || break
  sleep 0.05
done
if kill -0 "$cpid" 2>/dev/null; then
  echo "[orbit: a process outside the agent'"'"'s reach still held its output 5s after it exited: the capture was stopped]"
  kill -KILL "$cpid" 2>/dev/null
fi
exit "$rc"'

# run_agent N PHASE ATTEMPT PROMPT LOG COSTFILE FEEDBACK: sets AGENT_RC, AGENT_TIMED_OUT, AGENT_SECS.
# The agent runs in the workspace in its own process group, stdin from the prompt (its
# folder .orbit-agent/ filled first, its notes and cost read back after);
# its output is capped to AGENT_LOG_MAX bytes (the first and last halves are kept) and
# copied as it comes into the live view (live_open).
run_agent() {
  local n=$1 phase=$2 attempt=$3 prompt=$4 log=$5 cfile=$6 fb=$7 t0 limit half runid
  exec_limit_v
  local cut=0
  deadline_cap_v "$REPLY" || cut=1
  limit=$REPLY
  half=$((AGENT_LOG_MAX / 2))
  runid="$LOOP_NAME.$n.$attempt.$phase.$$.$RANDOM"
  # The output is caught in scratch files (each truncated here), then becomes $log.
  local raw="$ORBIT_TMP/agent.raw" head="$ORBIT_TMP/agent.head" tail="$ORBIT_TMP/agent.tail"
  if [[ -e $cfile ]]; then
    rm -f -- "$cfile"
  fi
  agent_dir_fill "$prompt" "$fb"
  : >"$raw"
  : >"$head"
  : >"$tail"
  orbit_fault before_agent
  # Nothing but the runner wrote since the last look: anything else stops before the agent.
  # (A fan-out candidate's subshell leaves these looks to the runner, which takes them
  # before the candidates start and after the last one ended: its siblings run meanwhile.)
  if [[ -n $TRUST_BAD ]] || { ((!FANOUT_CAND)) && ! trust_check runner; }; then
    AGENT_RC=0 AGENT_TIMED_OUT=0 AGENT_SECS=0
    orbit_log "the loop directory or git's control files changed before the agent ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  if ((limit <= 0)); then
    AGENT_RC=0 AGENT_TIMED_OUT=1 AGENT_SECS=0 DEADLINE_HIT=1
    orbit_log "the loop's wall-clock limit ($LOOP_TIMEOUT) is reached: the agent is not started"
    : >"$log"
    return 0
  fi
  live_open "$n" "$phase" "$attempt"
  t0=$SECONDS
  # The variables reach the agent through the environment of the wrapper (assignments
  # before a function call are exported to its children only).
  local fbfile=''
  if [[ -f $AGENT_DIR/feedback.json ]]; then
    fbfile=$AGENT_DIR/feedback.json
  fi
  sandbox_prepare agent
  # shellcheck disable=SC2016  # the single-quoted script expands in the child, by design
  ORBIT_WORKSPACE="$WS" ORBIT_AGENT_DIR="$AGENT_DIR" ORBIT_ITERATION="$n" ORBIT_ATTEMPT="$attempt" \
    ORBIT_CANDIDATE="${ORBIT_CANDIDATE_N:-1}" ORBIT_PHASE="$phase" ORBIT_PROMPT_FILE="$AGENT_DIR/prompt.md" \
    ORBIT_COST_FILE="$AGENT_DIR/cost" \
    ORBIT_RUN_ID="$runid" GIT_TERMINAL_PROMPT=0 ORBIT_FB="$fbfile" \
    ORBIT_HALF="$half" ORBIT_OUT="$ORBIT_TMP/agent" ORBIT_LIVE_FD="$LIVE_FD" \
    orbit_run_bounded "$limit" "$KILL_GRACE_S" "$prompt" "$raw" \
    "$BASH" -c "$ORBIT_AGENT_WRAPPER" orbit-agent "${SANDBOX_ARGV[@]}" "$AGENT_ABS" "${AGENT_ARGV[@]:1}"
  AGENT_RC=$ORBIT_RC
  AGENT_TIMED_OUT=$ORBIT_TIMED_OUT
  AGENT_SECS=$((SECONDS - t0))
  if ((AGENT_TIMED_OUT && cut)); then
    DEADLINE_HIT=1
    orbit_log "the agent was stopped at the loop's wall-clock limit ($LOOP_TIMEOUT)"
  fi
  if ((AGENT_TIMED_OUT)); then
    live_close "=== orbit: the agent timed out after ${AGENT_SECS}s ==="
  else
    live_close "=== orbit: the agent exited $AGENT_RC after ${AGENT_SECS}s ==="
  fi
  sweep_env "ORBIT_RUN_ID=$runid"
  # What the agent changed outside its workspace, looked at before the runner writes again.
  if ((!FANOUT_CAND)) && ! trust_check agent; then
    orbit_log "the agent changed $TRUST_BAD ($TRUST_REASON): nothing of its run is taken"
    [[ -L ${log%/*} || ! -d ${log%/*} ]] && return 0
  else
    agent_dir_collect "$cfile"
  fi
  if [[ ! -s $raw && ! -s $tail ]]; then
    # All of the output fit in the first half (the usual case).
    mv -f -- "$head" "$log"
  else
    {
      cat -- "$raw" "$head"
      if [[ -s $tail ]]; then
        printf '\n[orbit: output over %s bytes; the middle was dropped]\n' "$half"
        cat -- "$tail"
      fi
    } >"$log"
  fi
  # (A fan-out candidate's timing is written by the runner, after every candidate ended.)
  if ((!FANOUT_CAND)) && orbit_appendable "$LOOP_DIR/.iter-timings.log"; then
    printf '%s\n' "$AGENT_SECS" >>"$LOOP_DIR/.iter-timings.log"
  fi
}

# ---- the loop's deadline (LOOP_TIMEOUT) bounds every run inside an iteration too: no agent
# ---- or check run outlives it. DEADLINE_HIT says a run was cut short by it.
DEADLINE_HIT=0
# deadline_cap_v LIMIT: REPLY is LIMIT, or the seconds left before the loop's deadline when
# fewer (0 when it has passed: the run does not start).
deadline_cap_v() {
  local left now
  REPLY=$1
  if ((LOOP_TIMEOUT_S > 0 && S[STARTED_AT] > 0)); then
    printf -v now '%(%s)T' -1
    left=$((S[STARTED_AT] + LOOP_TIMEOUT_S - now))
    if ((left > LOOP_TIMEOUT_S)); then
      # A clock that went back: never more than the whole limit.
      left=$LOOP_TIMEOUT_S
    fi
    if ((left < 0)); then
      left=0
    fi
    if ((left < REPLY)); then
      REPLY=$left
      return 1
    fi
  fi
  return 0
}

# The per-run limit: EXEC_TIMEOUT, or twice the median of the last five runs when
# ADAPTIVE_TIMEOUT=1, bounded to [EXEC_TIMEOUT, 3 x EXEC_TIMEOUT].
exec_limit_v() {
  local med
  if orbit_true "$ADAPTIVE_TIMEOUT" && [[ -s $LOOP_DIR/.iter-timings.log ]]; then
    med=$(tail -n 5 -- "$LOOP_DIR/.iter-timings.log" | grep -E '^[0-9]+$' | sort -n |
      awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print 0 }')
    med=$((med * 2))
    if ((med < EXEC_TIMEOUT_S)); then
      med=$EXEC_TIMEOUT_S
    fi
    if ((med > EXEC_TIMEOUT_S * 3)); then
      med=$((EXEC_TIMEOUT_S * 3))
    fi
    REPLY=$med
  else
    REPLY=$EXEC_TIMEOUT_S
  fi
}

# classify_v LOG RC TIMED_OUT: REPLY is ok | timeout | rate_limited | permanent | agent_error;
# PERMANENT_WHY says why a permanent failure is one.
PERMANENT_WHY=
# The furthest a rate limit's reset is believed: anything later is not a pause but a stop.
RATE_LIMIT_MAX_WAIT_S=$((7 * 86400))
classify_v() {
  local log=$1 rc=$2 to=$3 tailtext
  if ((to)); then
    REPLY=$OUTCOME_TIMEOUT
  elif ((rc == 0)); then
    REPLY=$OUTCOME_OK
  elif ((rc == 126 || rc == 127)); then
    REPLY=$OUTCOME_PERMANENT
    PERMANENT_WHY="exit $rc: not found or not permitted (check argv in loop.toml and PATH)"
  else
    REPLY=$OUTCOME_AGENT_ERROR
    tailtext=$(tail -n 40 -- "$log" 2>/dev/null || true)
    # The machine's own errors are a human's to fix, not the provider's limit: retrying
    # them, or pausing until a "reset", only burns time.
    local os_error os_re='disk quota exceeded|no space left on device|read-only file system'
    # Under the sandbox, a read-only file system is the sandbox refusing a write: the
    # agent's error, not the machine's.
    if sandbox_on; then
      os_re='disk quota exceeded|no space left on device'
    fi
    if os_error=$(grep -aoiE -m 1 "$os_re" <<<"$tailtext"); then
      REPLY=$OUTCOME_PERMANENT
      PERMANENT_WHY="exit $rc, and the machine said: ${os_error%%$'\n'*}"
      return 0
    fi
    # ...and so is a permission the machine refused, when it is what the run ended on.
    if os_error=$(tail -n 3 <<<"$tailtext" | grep -aoiE -m 1 '[^ ]*: permission denied'); then
      REPLY=$OUTCOME_PERMANENT
      PERMANENT_WHY="exit $rc, and the machine said: ${os_error%%$'\n'*}"
      return 0
    fi
    # An authentication or permission refusal by the provider (HTTP 401/403, in the
    # structured error a CLI prints) never goes away by retrying: a human must log in.
    local auth
    if auth=$(grep -aoiE -m 1 "\"(api_error_status|status|status_code|statusCode|code)\": ?\"?40[13]\b|HTTP(/[0-9.]+)? 40[13]\b|\b40[13] (Unauthorized|Forbidden)\b|authentication_error|permission_error|invalid[ _-]api[ _-]key|invalid x-api-key|not logged in|please run /login|api key not valid" <<<"$tailtext"); then
      REPLY=$OUTCOME_PERMANENT
      PERMANENT_WHY="exit $rc: the provider refused the credentials (${auth%%$'\n'*}): log the agent's CLI in or set its API key, then run the loop again"
      return 0
    fi
    # A rate limit only in the words providers use for one, or as HTTP 429 where a status
    # is meant: never any "429" in a transcript (a duration, a line number, a test's output).
    # A here-string, not a pipe: grep -q stops at the first match, and a writer it left
    # behind would fail the test under pipefail.
    if grep -qiE "rate[ _-]?limit|usage limit|too many requests|quota (exceeded|exhausted)|resource[ _]exhausted|limit reached|hit your (session |weekly |opus )?limit|\"(api_error_status|status|status_code|statusCode|code)\": ?\"?429\b|HTTP(/[0-9.]+)? 429\b|\b429 too many" <<<"$tailtext"; then
      REPLY=$OUTCOME_RATE_LIMITED
    fi
  fi
}

# When a rate limit lifts: an epoch after '|', "retry/try again in N unit", "retry-after: N".
rate_limit_resume_at() {
  local log=$1 now tailtext secs=900 n unit
  printf -v now '%(%s)T' -1
  tailtext=$(tail -n 40 -- "$log" 2>/dev/null | tr '[:upper:]' '[:lower:]' || true)
  if [[ $tailtext =~ \|([0-9]{10}) ]] && ((BASH_REMATCH[1] > now)); then
    printf '%s' "${BASH_REMATCH[1]}"
    return 0
  fi
  if [[ $tailtext =~ (retry|try again)[^0-9]{0,12}([0-9]{1,6})(\.[0-9]+)?\ ?(seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|h)([^a-z]|$) ]]; then
    n=$((10#${BASH_REMATCH[2]}))
    unit=${BASH_REMATCH[4]}
    case $unit in
      h*) secs=$((n * 3600)) ;;
      m*) secs=$((n * 60)) ;;
      *) secs=$((n + 1)) ;;
    esac
  elif [[ $tailtext =~ retry-after:\ *([0-9]{1,6}) ]]; then
    secs=$((10#${BASH_REMATCH[1]}))
  fi
  printf '%s' "$((now + secs))"
}

# retry_delay_v ATTEMPT: REPLY is the pause in seconds before the attempt after ATTEMPT:
# RETRY_BASE_DELAY_S doubled per attempt, plus up to as much again at random (jitter).
retry_delay_v() {
  REPLY=$((RETRY_BASE_DELAY_S * (1 << ($1 - 1))))
  if ((REPLY > 0)); then
    REPLY=$((REPLY + RANDOM % (REPLY + 1)))
  fi
}

# ---- verify
# run_verify N LABEL: runs verify.sh into iterations/N/verify.log; sets VERIFY_OK.
run_verify() {
  local dir=$1 label=$2 out
  out="$ORBIT_TMP/verify.out"
  VERIFY_OK=0 VERIFY_RC=1 VERIFY_TO=0
  LAST_VERIFY_OUT=$out
  rm -f -- "$out"
  : >"$out"
  if [[ -n $TRUST_BAD ]] || ! trust_check runner; then
    orbit_log "the loop directory or git's control files changed before the checks ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  local budget cut=0
  deadline_cap_v "$VERIFY_BUDGET_S" || cut=1
  budget=$REPLY
  if ((budget <= 0)); then
    DEADLINE_HIT=1
    printf '[FAIL] verify.sh (not run: the loop'"'"'s wall-clock limit, %s, is reached)\n0 passed, 1 failed\n' "$LOOP_TIMEOUT" >"$out"
    cat -- "$out" >>"$dir/verify.log"
    return 0
  fi
  sandbox_prepare check
  ORBIT_VERIFY_FOR="$LOOP_DIR" ORBIT_REPO_ROOT="$WS" \
    ORBIT_VERIFY_TMP="$ORBIT_TMP" \
    orbit_run_bounded "$budget" "$KILL_GRACE_S" /dev/null "$out" "${SANDBOX_ARGV[@]}" "$BASH" "$LOOP_DIR/verify.sh"
  VERIFY_RC=$ORBIT_RC
  VERIFY_TO=$ORBIT_TIMED_OUT
  if ((VERIFY_TO && cut)); then
    DEADLINE_HIT=1
  fi
  if ! trust_check check; then
    orbit_log "the checks changed $TRUST_BAD ($TRUST_REASON): their verdict is not taken"
    VERIFY_RC=1
    return 0
  fi
  {
    orbit_iso_v -1
    printf '### verify run: %s (%s)\n' "$label" "$REPLY"
    cat -- "$out"
    if ((VERIFY_TO)); then
      printf '[FAIL] verify.sh (timed out after %ss)\n' "$budget"
    fi
  } >>"$dir/verify.log"
  VERIFY_OK=0
  if ((VERIFY_RC == 0 && VERIFY_TO == 0)); then
    VERIFY_OK=1
  fi
  LAST_VERIFY_OUT=$out
  return 0
}
LAST_VERIFY_OUT=

# check_role_v NAME: REPLY is the role of verify.sh's check NAME: reproduction, regression or
# acceptance.
check_role_v() {
  local c
  REPLY=acceptance
  for c in "${CHECKS_REPRODUCTION[@]}"; do
    [[ $c == "$1" ]] && REPLY=reproduction
  done
  for c in "${CHECKS_REGRESSION[@]}"; do
    [[ $c == "$1" ]] && REPLY=regression
  done
  return 0
}

# feedback_write DIR N ATTEMPT: the localized feedback of the verify run in LAST_VERIFY_OUT.
# It names the roles that failed (failing_roles) and, in feedback.txt, each failing check
# with what its failure means: a regression broke, a reproduction still fails, an acceptance
# check fails.
feedback_write() {
  local dir=$1 n=$2 attempt=$3 failing tailtext loci name j_failing='' j_loci='' sig
  local j_roles='' roles=' ' role_lines=''
  failing=$(grep -aoE '^\[FAIL\] [A-Za-z0-9._-]+' -- "$LAST_VERIFY_OUT" | cut -c8- | sort -u | tr '\n' ' ' || true)
  failing=${failing% }
  tailtext=$(tail -n 30 -- "$LAST_VERIFY_OUT" | orbit_clean_text | cut -c1-400)
  loci=$(grep -aoE '[A-Za-z0-9_./-]+\.[A-Za-z0-9]{1,8}:[0-9]{1,7}' -- "$LAST_VERIFY_OUT" | grep -v '^/' | awk '!seen[$0]++' | head -n 20 || true)
  for name in $failing; do
    j_failing+="${j_failing:+,}$(orbit_json_str "$name")"
    check_role_v "$name"
    if [[ $roles != *" $REPLY "* ]]; then
      roles+="$REPLY "
      j_roles+="${j_roles:+,}\"$REPLY\""
    fi
    case $REPLY in
      regression) role_lines+="a regression check broke: $name"$'\n' ;;
      reproduction) role_lines+="a reproduction check still fails: $name"$'\n' ;;
      *) role_lines+="an acceptance check fails: $name"$'\n' ;;
    esac
  done
  while IFS= read -r name; do
    if [[ -n $name ]]; then
      j_loci+="${j_loci:+,}$(orbit_json_str "$name")"
    fi
  done <<<"$loci"
  # The failing tests and their assertions, where the output shows a test tool's format.
  local -a tests=() asserts=()
  local j_tests='' j_asserts='' line
  feedback_tests_v "$LAST_VERIFY_OUT"
  while IFS= read -r line; do
    case $line in
      T$'\t'*) tests+=("${line#T$'\t'}") ;;
      A$'\t'*) asserts+=("${line#A$'\t'}") ;;
    esac
  done <<<"$REPLY"
  for line in "${tests[@]}"; do
    orbit_json_v "$line"
    j_tests+="${j_tests:+,}$REPLY"
  done
  for line in "${asserts[@]}"; do
    orbit_json_v "$line"
    j_asserts+="${j_asserts:+,}$REPLY"
  done
  printf '{"failing":[%s],"failing_roles":[%s],"tests":[%s],"assertions":[%s],"loci":[%s],"output_tail":%s,"attempt":%s,"iteration":%s}\n' \
    "$j_failing" "$j_roles" "$j_tests" "$j_asserts" "$j_loci" "$(orbit_json_str "$tailtext")" "$attempt" "$n" >"$dir/feedback.json"
  {
    printf 'Failing checks: %s\n' "${failing:-verify.sh}"
    printf '%s' "$role_lines"
    if ((${#tests[@]})); then
      printf 'Failing tests:\n'
      printf '    - %s\n' "${tests[@]}"
    fi
    if ((${#asserts[@]})); then
      printf 'What they asserted:\n'
      printf '    - %s\n' "${asserts[@]}"
    fi
    if [[ -n $loci ]]; then
      printf 'Locations: %s\n' "$(printf '%s' "$loci" | tr '\n' ' ')"
    fi
    printf 'Output (last lines):\n\n'
    printf '%s\n' "$tailtext" | sed 's/^/    /'
  } >"$dir/feedback.txt"
  sig=$( {
    printf '%s\n' "$failing"
    printf '%s\n' "$tailtext" | tr '0-9' '#'
  } | orbit_sha256_stdin)
  VERIFY_FAILING=${failing// /,}
  VERIFY_SIG=$sig
}

# ---- the DONE gate (contract section 6). Sets GATE_VERDICT (DONE or a rejection reason).
done_gate() {
  local n=$1 dir=$2 k added first t_before t_after base
  GATE_VERDICT=
  # 2. PASS_K consecutive passes: the first pass happened; run the rest.
  for ((k = 2; k <= PASS_K; k++)); do
    run_verify "$dir" "pass $k of $PASS_K"
    if ! integrity_gate "after verify pass $k"; then
      GATE_VERDICT="integrity"
      return 0
    fi
    if ((VERIFY_OK)); then
      S[VERIFY_STREAK]=$((S[VERIFY_STREAK] + 1))
      orbit_event verify_pass "$n" run "$k" streak "${S[VERIFY_STREAK]}"
    else
      S[VERIFY_STREAK]=0
      feedback_write "$dir" "$n" "$ATTEMPT"
      orbit_event verify_fail "$n" run "$k" failing "$VERIFY_FAILING" flaky true code VERIFY_FLAKY
      GATE_VERDICT="VERIFY_FLAKY: verify passed, then failed on pass $k of $PASS_K"
      return 0
    fi
  done
  # 3. No placeholder in the lines the loop added: the workspace now against the commit the
  # loop began from (nothing else is ever in the workspace's diff).
  # A scan that cannot run rejects the claim (it never passes by default).
  base=$(cat -- "$LOOP_DIR/.baseline-tree" 2>/dev/null || cat -- "$LOOP_DIR/.baseline-commit")
  tree_snapshot
  local now_tree=$REPLY rc=0
  git_q diff --no-color --no-ext-diff -U0 "$base" "$now_tree" -- >"$ORBIT_TMP/added.diff" 2>>"$ORBIT_LOG_FILE" || rc=$?
  if ((rc != 0)); then
    GATE_VERDICT="the placeholder scan could not run: git diff failed (exit $rc; see runner.log)"
    return 0
  fi
  awk '/^\+/ && !/^\+\+\+/' "$ORBIT_TMP/added.diff" >"$ORBIT_TMP/added.lines"
  added=$(grep -aE -m 5 -- "$PLACEHOLDER_PATTERN" "$ORBIT_TMP/added.lines" 2>>"$ORBIT_LOG_FILE") || rc=$?
  if ((rc > 1)); then
    GATE_VERDICT="the placeholder scan could not run: grep refused PLACEHOLDER_PATTERN (exit $rc; see runner.log)"
    return 0
  fi
  if [[ -n $added ]]; then
    first=${added%%$'\n'*}
    first=${first#+}
    orbit_cut_v "$first" 119
    GATE_VERDICT="placeholder in added lines: $REPLY"
    printf '%s\n' "$added" >"$dir/placeholders.txt"
    return 0
  fi
  # 4. Every pin intact, and nothing the runner holds changed.
  if ! integrity_gate "done gate"; then
    GATE_VERDICT="integrity"
    return 0
  fi
  # 4b. The holdout checks (contract section 10): hidden from the agent, run only here.
  if ((HOLDOUT_CHECKS > 0)); then
    run_holdout "$n" "$dir"
    if ! integrity_gate "after the holdout checks"; then
      GATE_VERDICT="integrity"
      return 0
    fi
    if ((!HOLDOUT_OK)); then
      # Which one failed is in the event and holdout.log: the verdict reaches progress.md,
      # which the agent reads, so it says no more than the feedback does.
      GATE_VERDICT="holdout: a hidden acceptance check failed (see holdout.log)"
      holdout_feedback "$dir" "$n"
      return 0
    fi
  fi
  # 5. The judge.
  if [[ -n $JUDGE_CMD ]]; then
    run_judge "$n" "$dir"
    if ! integrity_gate "after the judge"; then
      GATE_VERDICT="integrity"
      return 0
    fi
    if ((!JUDGE_OK)); then
      GATE_VERDICT="the judge did not approve (see judge.log)"
      return 0
    fi
  fi
  # 6. Fresh-context confirmation runs: DONE only when each writes CONFIRMED as the first
  # line of .orbit-agent/confirm.md and changes nothing. Its exit code never confirms.
  local verdict
  for ((k = 1; k <= CONFIRM_RUNS; k++)); do
    tree_snapshot
    t_before=$REPLY
    build_prompt "$n" "$PHASE_CONFIRM" "$k" "$dir/confirm.$k.prompt.md" ""
    run_agent "$n" "$PHASE_CONFIRM" "$k" "$dir/confirm.$k.prompt.md" "$dir/confirm.$k.log" "$dir/confirm.$k.cost" ""
    cost_of_run "$dir/confirm.$k.log" "$dir/confirm.$k.cost"
    ledger_append "$n" "$RUN_COST_M" "$RUN_COST_KIND"
    orbit_event agent_exit "$n" phase "$PHASE_CONFIRM" attempt "$k" exit_code "$AGENT_RC" timed_out "$AGENT_TIMED_OUT" seconds "$AGENT_SECS"
    verdict=''
    if agent_file_take confirm.md "$dir/confirm.$k.md"; then
      IFS= read -r verdict <"$dir/confirm.$k.md" || true
    fi
    # One line of text, as a record holds it: no control character, at most 200 bytes.
    verdict=${verdict%$'\r'}
    verdict=${verdict//[[:cntrl:]]/ }
    orbit_cut_v "$verdict" 200
    verdict=$REPLY
    tree_snapshot
    t_after=$REPLY
    if ! integrity_gate "after confirm"; then
      GATE_VERDICT="integrity"
      return 0
    fi
    if ((AGENT_RC != 0 || AGENT_TIMED_OUT)); then
      GATE_VERDICT="the confirmation run failed (exit $AGENT_RC)"
      confirm_feedback "$dir" "$n" "$GATE_VERDICT"
      return 0
    fi
    if [[ $t_before != "$t_after" ]]; then
      GATE_VERDICT="the confirmation run changed the project"
      TREE_AFTER=$t_after
      changes_v "$t_before" "$t_after"
      confirm_feedback "$dir" "$n" "the confirmation run changed the project ($REPLY): it was asked to change nothing"
      return 0
    fi
    case $verdict in
      CONFIRMED) ;;
      "NOT CONFIRMED:"*)
        GATE_VERDICT="not confirmed:${verdict#NOT CONFIRMED:}"
        confirm_feedback "$dir" "$n" "$GATE_VERDICT"
        return 0
        ;;
      '')
        GATE_VERDICT="no confirmation verdict (.orbit-agent/confirm.md missing or empty)"
        confirm_feedback "$dir" "$n" "$GATE_VERDICT"
        return 0
        ;;
      *)
        orbit_cut_v "$verdict" 80
        GATE_VERDICT="the confirmation verdict is neither CONFIRMED nor NOT CONFIRMED: $REPLY"
        confirm_feedback "$dir" "$n" "$GATE_VERDICT"
        return 0
        ;;
    esac
  done
  GATE_VERDICT=$STATUS_DONE
}

# ---- holdout checks: holdout.sh, in the workspace, with ORBIT_HOLDOUT_DIR naming the loop
# ---- directory's holdout/; a check run like verify's (the runner's trust checked before and
# ---- after it, sandboxed when the loop is). Their output goes to iterations/N/holdout.log
# ---- only: never to verify.log, the feedback, progress.md or a prompt.
HOLDOUT_OK=0
HOLDOUT_FAILING=
run_holdout() {
  local n=$1 dir=$2 out="$ORBIT_TMP/holdout.out" budget cut=0
  HOLDOUT_OK=0 HOLDOUT_FAILING=
  rm -f -- "$out"
  : >"$out"
  if [[ -n $TRUST_BAD ]] || ! trust_check runner; then
    orbit_log "the loop directory or git's control files changed before the holdout checks ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  deadline_cap_v "$HOLDOUT_BUDGET_S" || cut=1
  budget=$REPLY
  if ((budget <= 0)); then
    DEADLINE_HIT=1
    printf '[FAIL] holdout.sh (not run: the loop'"'"'s wall-clock limit, %s, is reached)\n' "$LOOP_TIMEOUT" >>"$dir/holdout.log"
    return 0
  fi
  sandbox_prepare holdout
  ORBIT_VERIFY_FOR="$LOOP_DIR" ORBIT_REPO_ROOT="$WS" ORBIT_VERIFY_TMP="$ORBIT_TMP" \
    ORBIT_HOLDOUT_DIR="$LOOP_DIR/holdout" \
    orbit_run_bounded "$budget" "$KILL_GRACE_S" /dev/null "$out" "${SANDBOX_ARGV[@]}" "$BASH" "$LOOP_DIR/holdout.sh"
  local rc=$ORBIT_RC to=$ORBIT_TIMED_OUT
  if ((to && cut)); then
    DEADLINE_HIT=1
  fi
  if ! trust_check check; then
    orbit_log "the holdout checks changed $TRUST_BAD ($TRUST_REASON): their verdict is not taken"
    return 0
  fi
  {
    orbit_iso_v -1
    printf '### holdout run: iteration %s (%s)\n' "$n" "$REPLY"
    cat -- "$out"
    if ((to)); then
      printf '[FAIL] holdout.sh (timed out after %ss)\n' "$budget"
    fi
  } >>"$dir/holdout.log"
  HOLDOUT_FAILING=$(grep -aoE '^\[FAIL\] holdout-[0-9]+' -- "$out" | cut -c8- | sort -u | tr '\n' ' ' || true)
  HOLDOUT_FAILING=${HOLDOUT_FAILING% }
  HOLDOUT_FAILING=${HOLDOUT_FAILING// /,}
  if ((rc == 0 && to == 0)); then
    HOLDOUT_OK=1
    orbit_event holdout_pass "$n"
  else
    orbit_event holdout_fail "$n" failing "${HOLDOUT_FAILING:-holdout.sh}"
  fi
  return 0
}

# run_judge N DIR: the judge hook (JUDGE_CMD) on the workspace (WS: a candidate's worktree in
# survivor selection), bounded by EXEC_TIMEOUT and the loop's deadline, in the sandbox of a
# check. JUDGE_OK=1 when it exits 0 in time; its output goes to DIR/judge.log unless the run
# changed what the runner holds (TRUST_BAD then says what, and nothing of it is taken).
JUDGE_OK=0
run_judge() {
  local n=$1 dir=$2 jlimit
  JUDGE_OK=0
  rm -f -- "$ORBIT_TMP/judge.out"
  if [[ -n $TRUST_BAD ]] || ! trust_check runner; then
    orbit_log "the loop directory or git's control files changed before the judge ran: $TRUST_BAD ($TRUST_REASON)"
    return 0
  fi
  deadline_cap_v "$EXEC_TIMEOUT_S" || true
  jlimit=$((REPLY > 0 ? REPLY : 1))
  sandbox_prepare check
  # shellcheck disable=SC2016  # the single-quoted script expands in the child, by design
  ORBIT_LOOP_DIR="$LOOP_DIR" ORBIT_WORKSPACE="$WS" ORBIT_ITERATION="$n" ORBIT_REPO_ROOT="$WS" ORBIT_JUDGE="$JUDGE_CMD" \
    orbit_run_bounded "$jlimit" "$KILL_GRACE_S" /dev/null "$ORBIT_TMP/judge.out" \
    "${SANDBOX_ARGV[@]}" "$BASH" -c 'cd -- "$ORBIT_REPO_ROOT" || exit 1; eval "$ORBIT_JUDGE"'
  if ! trust_check check; then
    orbit_log "the judge changed $TRUST_BAD ($TRUST_REASON): its verdict is not taken"
    return 0
  fi
  cp -- "$ORBIT_TMP/judge.out" "$dir/judge.log"
  if ((ORBIT_RC == 0 && !ORBIT_TIMED_OUT)); then
    JUDGE_OK=1
  fi
  return 0
}

# holdout_feedback DIR N: a claim a holdout check rejected. The feedback says only that a
# hidden acceptance check failed: no name, no command, no output (the agent would fit its
# change to them, which is what holdout checks are there to catch).
holdout_feedback() {
  local dir=$1 n=$2 text
  text='The visible checks passed, but a hidden acceptance check failed. Its content is not shown.'
  printf '{"failing":["hidden-acceptance"],"failing_roles":["holdout"],"tests":[],"assertions":[],"loci":[],"output_tail":%s,"attempt":%s,"iteration":%s}\n' \
    "$(orbit_json_str "$text")" "$ATTEMPT" "$n" >"$dir/feedback.json"
  {
    printf '%s\n' "$text"
    printf 'The DONE claim was rejected. Make the change correct in general, not only for the cases\n'
    printf 'the visible checks try: a solution fitted to them fails the hidden ones.\n'
  } >"$dir/feedback.txt"
}

# confirm_feedback DIR N TEXT: a rejected confirmation is the next iteration's feedback (the
# checks passed: there is no verify failure to tell).
confirm_feedback() {
  local dir=$1 n=$2 text=$3
  printf '{"failing":["confirmation"],"tests":[],"assertions":[],"loci":[],"output_tail":%s,"attempt":%s,"iteration":%s}\n' \
    "$(orbit_json_str "$text")" "$ATTEMPT" "$n" >"$dir/feedback.json"
  printf 'The checks passed, but the DONE claim was not confirmed by a fresh-context run:\n    %s\n' "$text" >"$dir/feedback.txt"
}

# ---- commits: only the paths this iteration changed, never baseline-dirty paths, never the
# ---- loop directory, never the user's staged work; trailers make a replay detectable.
# A commit attempt's outcomes besides git's own statuses: nothing to commit (HEAD holds the
# changes already), and git did not finish in time (timeout(1)'s status). Between the
# functions below only, never a loop exit code.
readonly COMMIT_NOTHING=3 COMMIT_TIMED_OUT=124
commit_iteration() {
  local n=$1 dir=$2 before=$3 after=$4 fresh=${5:-0} list msg existing='' line rc=0 tries=0 title
  if ! orbit_true "$AUTOCOMMIT"; then
    printf 'off\n' >"$dir/commit.txt"
    return 0
  fi
  # Idempotent: a crash after the commit and before the state write must not commit twice.
  # (An iteration this process just ran commits after its result.env: none can exist yet.)
  line=''
  ((fresh)) || line=$(git_q log -n 50 --format='%H %(trailers:key=Orbit-Loop,valueonly,separator=%x2C)|%(trailers:key=Orbit-Iteration,valueonly,separator=%x2C)' 2>/dev/null || true)
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
  changes_v "$before" "$after"
  list=$CHANGES_FILE
  if [[ ! -s $list ]]; then
    printf 'none\n' >"$dir/commit.txt"
    [[ $list == "$CHANGES_FILE" ]] || rm -f -- "$list"
    return 0
  fi
  orbit_fault before_commit
  # The goal's title: line 3 of goal.md (under "# Goal"), at most 60 characters.
  goal_title_v
  title=$REPLY
  msg="orbit($LOOP_NAME): iteration $n"$'\n\n'"Goal: ${title:-see goal.md}"$'\n\n'"Orbit-Loop: $LOOP_NAME"$'\n'"Orbit-Iteration: $n"
  while ((tries < 5)); do
    tries=$((tries + 1))
    rc=0
    if ((COMMIT_PLUMBING)); then
      # No hook would run and nothing signs: commit with plumbing, which never rescans the
      # whole work tree (the porcelain refreshes every index entry).
      commit_plumbing "$list" "$msg" "$before" "$after" >>"$dir/commit.log" 2>&1 || rc=$?
    else
      # Bounded: a hook that waits on a terminal must not wedge the loop.
      # shellcheck disable=SC2016  # the single-quoted script expands in the child, by design
      GIT_LITERAL_PATHSPECS=1 GIT_TERMINAL_PROMPT=0 \
        orbit_run_bounded "$COMMIT_TIMEOUT_S" "$KILL_GRACE_S" /dev/null "$dir/commit.log" \
        "$BASH" -c 'cd -- "$1" || exit 1
          git add -A --pathspec-from-file="$2" --pathspec-file-nul &&
            git commit -q --no-edit -m "$3" --only --pathspec-from-file="$2" --pathspec-file-nul' \
        orbit-commit "$WS" "$list" "$msg"
      rc=$ORBIT_RC
      if ((ORBIT_TIMED_OUT)); then
        orbit_log "commit: git did not finish within ${COMMIT_TIMEOUT_S}s (a hook waiting for input?)"
        rc=$COMMIT_TIMED_OUT
        break
      fi
    fi
    if ((rc == 0 || rc == COMMIT_NOTHING)); then
      break
    fi
    if [[ -e $GIT_DIR_ABS/index.lock ]]; then
      orbit_log "commit: .git/index.lock is held; retrying ($tries/5)"
      sleep 1
      continue
    fi
    break
  done
  # git commit failing can mean the same: the agent committed the changes itself.
  if ((rc != 0 && rc != COMMIT_NOTHING && rc != COMMIT_TIMED_OUT && !COMMIT_PLUMBING)) && head_tree &&
    listed_tree_v "$HEAD_ID" "$list" && [[ $REPLY == "$HEAD_TREE" ]]; then
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
      git_q maintenance run --auto --quiet >>"$dir/commit.log" 2>&1 ||
        git_q gc --auto --quiet >>"$dir/commit.log" 2>&1 || true
    fi
  else
    git_q rev-parse HEAD >"$dir/commit.txt"
  fi
  orbit_fault after_commit
  [[ $list == "$CHANGES_FILE" ]] || rm -f -- "$list"
}

# The goal's one-line title (line 3 of goal.md), at most 60 characters, into REPLY.
goal_title_v() {
  local -a lines=()
  mapfile -t -n 3 lines <"$LOOP_DIR/goal.md" 2>/dev/null || true
  orbit_cut_v "${lines[2]-}" 60
}

# commit_plumbing LIST MSG BEFORE AFTER: what `git commit --only <paths>` does, without
# hooks. When HEAD's tree is the iteration's starting snapshot and LIST holds every change,
# the commit's tree is the ending snapshot itself; otherwise a private index built from HEAD
# takes the listed paths from the work tree. The repository's index takes them too (so git
# status stays clean) before HEAD moves, compare-and-swap, with the porcelain's reflog
# message. Sets COMMIT_ID; returns 1 with HEAD unmoved on failure, COMMIT_NOTHING when HEAD
# holds the changes already.
COMMIT_ID=
# The last commit this run made, and its tree: while HEAD still names it, git need not be
# asked what HEAD is.
LAST_COMMIT_ID=
LAST_COMMIT_TREE=
commit_plumbing() {
  local list=$1 msg=$2 before=$3 after=$4 head base tree
  COMMIT_ID=''
  head_tree || return 1
  head=$HEAD_ID base=$HEAD_TREE
  if [[ $base == "$before" ]]; then
    tree=$after
  else
    listed_tree_v "$head" "$list" || return 1
    tree=$REPLY
  fi
  if [[ $tree == "$base" ]]; then
    echo "nothing to commit: HEAD holds these changes already"
    return "$COMMIT_NOTHING"
  fi
  COMMIT_ID=$(git_q commit-tree "$tree" -p "$head" <<<"$msg") || return 1
  (cd -- "$WS" && git update-index --add --remove --replace -z --stdin <"$list") || return 1
  git_q update-ref -m "commit: ${msg%%$'\n'*}" HEAD "$COMMIT_ID" "$head" || return 1
  LAST_COMMIT_ID=$COMMIT_ID LAST_COMMIT_TREE=$tree
}

# head_tree: HEAD_ID and HEAD_TREE, from what this run committed last while HEAD still
# names it, else from git.
HEAD_ID=
HEAD_TREE=
head_tree() {
  local out
  if [[ -n $LAST_COMMIT_ID ]] && head_file_v && [[ $REPLY == "$LAST_COMMIT_ID" ]]; then
    HEAD_ID=$LAST_COMMIT_ID HEAD_TREE=$LAST_COMMIT_TREE
    return 0
  fi
  out=$(git_q rev-parse HEAD 'HEAD^{tree}') || return 1
  HEAD_ID=${out%%$'\n'*} HEAD_TREE=${out#*$'\n'}
}

# listed_tree_v COMMIT LIST: REPLY is COMMIT's tree with the listed paths taken from the
# work tree (a private index; the repository's is not touched).
listed_tree_v() {
  local idx="$LOOP_DIR/.commit-index"
  rm -f -- "$idx"
  (
    export GIT_INDEX_FILE=$idx
    cd -- "$WS" &&
      git read-tree "$1" &&
      git update-index --add --remove --replace -z --stdin <"$2"
  ) || return 1
  REPLY=$(GIT_INDEX_FILE=$idx git_q write-tree) || return 1
  rm -f -- "$idx"
}

# head_file_v: REPLY is the commit HEAD names, read from the files git keeps it in (a loose
# branch ref, or a detached HEAD); status 1 where that takes git (packed refs, reftable).
head_file_v() {
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

# ---- stall and oscillation from .action-sig.log (one "ITERATION<TAB>SIGNATURE" per line).
# The log's last lines (as many as the stall and oscillation checks look at), read once
# per run and then kept up to date in memory.
SIG_TAIL=()
SIG_TAIL_READ=0
sig_record() {
  local n=$1 sig=$2 last='' keep=$((CONVERGENCE_WINDOW > 6 ? CONVERGENCE_WINDOW : 6))
  if ((!SIG_TAIL_READ)); then
    mapfile -t SIG_TAIL < <(tail -n "$keep" -- "$LOOP_DIR/.action-sig.log" 2>/dev/null || true)
    SIG_TAIL_READ=1
  fi
  if ((${#SIG_TAIL[@]} > 0)); then
    last=${SIG_TAIL[${#SIG_TAIL[@]} - 1]}
  fi
  if [[ ${last%%$'\t'*} == "$n" ]]; then
    return 0
  fi
  orbit_appendable "$LOOP_DIR/.action-sig.log" || return 0
  printf '%s\t%s\n' "$n" "$sig" >>"$LOOP_DIR/.action-sig.log"
  SIG_TAIL+=("$n"$'\t'"$sig")
  if ((${#SIG_TAIL[@]} > keep)); then
    SIG_TAIL=("${SIG_TAIL[@]:1}")
  fi
}

# stall_check_v (after sig_record): REPLY is stalled, oscillating or nothing.
stall_check_v() {
  local -a sigs=("${SIG_TAIL[@]#*$'\t'}")
  local n=${#sigs[@]}
  REPLY=''
  if ((n >= CONVERGENCE_WINDOW)); then
    local i same=1
    for ((i = n - CONVERGENCE_WINDOW + 1; i < n; i++)); do
      [[ ${sigs[i]} == "${sigs[n - CONVERGENCE_WINDOW]}" ]] || same=0
    done
    if ((same)); then
      REPLY=$REASON_STALLED
      return 0
    fi
  fi
  if ((n >= 4)) && [[ ${sigs[n - 1]} == "${sigs[n - 3]}" && ${sigs[n - 2]} == "${sigs[n - 4]}" && ${sigs[n - 1]} != "${sigs[n - 2]}" ]]; then
    REPLY=$REASON_OSCILLATING
  fi
}

# The same verify failure three iterations in a row while the tree kept changing: this
# iteration (in R) and the two before it (from their result.env).
repeat_failure_check() {
  local n=$1 i d line k v
  local -A P=()
  [[ ${R[VERIFY]:-} == "$VERIFY_FAIL" && -n ${R[VERIFY_SIG]:-} && ${R[TREE_BEFORE]:-} != "${R[TREE_AFTER]:-}" ]] || return 1
  ((n >= 3)) || return 1
  for ((i = n - 1; i >= n - 2; i--)); do
    printf -v d '%s/iterations/%06d' "$LOOP_DIR" "$i"
    [[ -f $d/result.env ]] || return 1
    P=()
    while IFS= read -r line || [[ -n $line ]]; do
      k=${line%%=*} v=${line#*=}
      P[$k]=$v
    done <"$d/result.env"
    [[ ${P[VERIFY]:-} == "$VERIFY_FAIL" && ${P[VERIFY_SIG]:-} == "${R[VERIFY_SIG]}" ]] || return 1
    [[ ${P[TREE_BEFORE]:-} != "${P[TREE_AFTER]:-}" ]] || return 1
  done
  REPEAT_SIG=${R[VERIFY_SIG]}
  return 0
}
REPEAT_SIG=

# record_abort N DIR TREE_BEFORE TREE_AFTER: an integrity violation ends the iteration
# ABORTED; its change is left in the work tree, uncommitted, for a human to review.
# abort_snapshot_v BEFORE: REPLY is the tree the aborted iteration left, for its record; when
# git's own configuration is what changed, no git command of the runner's runs at all (a
# planted filter, hook or monitor would run inside it): the record says BEFORE.
abort_snapshot_v() {
  if [[ $INTEGRITY_REASON == "$REASON_GIT_TAMPER" ]]; then
    REPLY=$1
    return 0
  fi
  tree_snapshot
}

record_abort() {
  local n=$1 dir=$2
  # An iteration directory the agent swapped for a link: the record goes into a real one.
  if [[ -L $dir ]]; then
    rm -f -- "$dir"
    mkdir -p -- "$dir"
  fi
  R[TREE_BEFORE]=$3
  R[TREE_AFTER]=$4
  R[VERDICT]=$STATUS_ABORTED
  R[STOP_REASON]=$INTEGRITY_REASON
  R[EXIT_CODE]=$EXIT_INTEGRITY
  R[SUMMARY]="$INTEGRITY_REASON: $PIN_BAD changed"
  if [[ $INTEGRITY_REASON == "$REASON_GIT_TAMPER" && $PIN_BAD == "$WS" ]]; then
    R[SUMMARY]="git_tamper: the workspace $WS is no longer the loop's worktree ($PIN_HAVE); remove what is there, then 'orbit recover --repin' recreates it from $LOOP_BRANCH"
  fi
  printf -v 'R[ENDED_AT]' '%(%s)T' -1
  ledger_iter_sum_v "$n"
  R[COST_MICROUSD]=$REPLY
  R[COST_KIND]=$RUN_COST_KIND
  R[CB_FAILS]=${S[CB_FAILS]}
  R[VERIFY_STREAK]=${S[VERIFY_STREAK]}
  result_record "$dir"
  printf 'withheld: integrity violation\n' >"$dir/commit.txt"
  finalize "$n"
}

# sched_logs_rotate: the schedulers' logs of this loop (cron.log, systemd.log: every tick
# appends to them, a DONE loop's footer too) are kept under 1 MiB, the older part in .1.
sched_logs_rotate() {
  local f
  for f in "$LOOP_DIR/cron.log" "$LOOP_DIR/systemd.log"; do
    if [[ -f $f && ! -L $f ]] && (($(wc -c <"$f") > 1048576)); then
      mv -f -- "$f" "$f.1"
    fi
  done
}

# ---- one iteration: gates were checked by the caller.
run_iteration() {
  RAN_ITERATION=1
  local n=$1 dir attempt outcome fb t_before t_after claim=0 cp_name started
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  CUR_ITER=$n
  iter_prepare "$dir"
  IN_ITERATION=1
  printf -v started '%(%s)T' -1
  CLAIM_NUDGE=0
  if ((n > 1)) && passed_without_claim $((n - 1)); then
    CLAIM_NUDGE=1
  fi
  R=()
  R[ITERATION]=$n
  R[STARTED_AT]=$started
  R[PHASE]=$PHASE_WORK
  last_feedback_v "$n"
  fb=$REPLY
  if [[ -n $fb ]]; then
    cp -- "$fb" "$dir/input-feedback.json"
    cp -- "${fb%.json}.txt" "$dir/input-feedback.txt" 2>/dev/null || true
    cp -- "${fb%/*}/verify.log" "$dir/input-verify.log" 2>/dev/null || true
    fb="$dir/input-feedback.json"
  fi
  orbit_event iteration_start "$n" max_iterations "$MAX_ITERATIONS"
  orbit_log "iteration $n of at most $MAX_ITERATIONS: the agent starts"
  # The tree before the iteration: an interrupted attempt's, if one ran, so that its
  # changes are committed with the iteration.
  # In a continuous run nothing but the runner ran since the last iteration's snapshot
  # (the commit moves HEAD, not the work tree): that snapshot is this one's start.
  if [[ -f $dir/interrupted.1/tree-before ]]; then
    t_before=$(<"$dir/interrupted.1/tree-before")
  elif [[ -n $LAST_TREE ]]; then
    t_before=$LAST_TREE
  else
    tree_snapshot
    t_before=$REPLY
  fi
  printf '%s\n' "$t_before" >"$dir/tree-before"
  attempt=0
  outcome=$OUTCOME_AGENT_ERROR
  if ((FANOUT_N > 1)); then
    # N candidates instead of one agent: the survivor's change is in the workspace after
    # it, and the iteration goes on as a single agent's would.
    fanout_iteration "$n" "$dir" "$t_before" "$fb"
    outcome=$FANOUT_OUTCOME
    attempt=$FANOUT_ATTEMPTS
    ATTEMPT=$attempt
    ENGINE_MESSAGE='' ENGINE_RESUME_AT='' PERMANENT_WHY=''
    if [[ -z $TRUST_BAD && ($outcome == "$OUTCOME_RATE_LIMITED" || $outcome == "$OUTCOME_PERMANENT") ]]; then
      # What the survivor's CLI said (when its limit lifts; its refusal and the fix) was
      # read in the candidate's subshell: read again here, from its log.
      engine_classify_v "$dir/agent.log" "$AGENT_RC" 0
      if [[ $REPLY != "$outcome" ]]; then
        ENGINE_MESSAGE='' ENGINE_RESUME_AT='' PERMANENT_WHY=''
      fi
    fi
  fi
  while ((FANOUT_N == 1 && attempt < RETRY_LIMIT)); do
    attempt=$((attempt + 1))
    ATTEMPT=$attempt
    build_prompt "$n" "$PHASE_WORK" "$attempt" "$dir/prompt.md" "$fb"
    if [[ $attempt -gt 1 && -f $dir/agent.log ]]; then
      mv -- "$dir/agent.log" "$dir/agent.attempt$((attempt - 1)).log"
    fi
    run_agent "$n" "$PHASE_WORK" "$attempt" "$dir/prompt.md" "$dir/agent.log" "$dir/cost.usd" "$fb"
    cost_of_run "$dir/agent.log" "$dir/cost.usd"
    ledger_append "$n" "$RUN_COST_M" "$RUN_COST_KIND"
    engine_classify_v "$dir/agent.log" "$AGENT_RC" "$AGENT_TIMED_OUT"
    outcome=$REPLY
    orbit_event agent_exit "$n" phase "$PHASE_WORK" attempt "$attempt" exit_code "$AGENT_RC" outcome "$outcome" seconds "$AGENT_SECS" cost_microusd "$RUN_COST_M" cost_kind "$RUN_COST_KIND"
    orbit_fault after_agent
    if [[ -n $TRUST_BAD ]] || ((DEADLINE_HIT)); then
      break
    fi
    case $outcome in
      "$OUTCOME_OK" | "$OUTCOME_PERMANENT" | "$OUTCOME_RATE_LIMITED") break ;;
    esac
    if ((attempt < RETRY_LIMIT)); then
      retry_delay_v "$attempt"
      local delay=$REPLY
      orbit_log "iteration $n: agent attempt $attempt ended '$outcome' (exit $AGENT_RC); retrying in ${delay}s"
      if ((delay > 0)); then
        sleep "$delay"
      fi
    fi
  done
  R[AGENT_EXIT]=$AGENT_RC
  R[AGENT_OUTCOME]=$outcome
  R[ATTEMPTS]=$attempt
  R[DURATION]=$AGENT_SECS
  engine_final_message_v "$dir/agent.log"
  R[AGENT_MESSAGE]=$REPLY
  S[COST_MICROUSD]=$LEDGER_TOTAL

  if [[ $outcome == "$OUTCOME_RATE_LIMITED" && -z $TRUST_BAD ]]; then
    local resume=$ENGINE_RESUME_AT
    # No reset named: the next look in 15 minutes.
    [[ $resume =~ ^[0-9]+$ ]] || resume=$(($(orbit_now) + 900))
    if ((resume - $(orbit_now) > RATE_LIMIT_MAX_WAIT_S)); then
      # Not a pause: a reset more than a week away is a stop for a human, with the text.
      outcome=$OUTCOME_PERMANENT
      R[AGENT_OUTCOME]=$outcome
      if [[ -n $ENGINE_MESSAGE ]]; then
        engine_clip_v "$ENGINE_MESSAGE"
      else
        REPLY=$({ grep -aiE -m 1 'retry|try again|reset|limit' -- "$dir/agent.log" || true; } | cut -c1-120)
      fi
      PERMANENT_WHY="rate limited until $(orbit_iso "$resume"), more than 7 days away: $REPLY"
    fi
  fi
  if [[ $outcome == "$OUTCOME_RATE_LIMITED" ]]; then
    # A rate limit burns no iteration: the attempt is kept aside and the iteration reruns.
    S[RESUME_AT]=$resume
    iter_prepare "$dir"
    IN_ITERATION=0
    orbit_event rate_limited "$n" resume_at "${S[RESUME_AT]}"
    local said=''
    if [[ -n $ENGINE_MESSAGE ]]; then
      engine_clip_v "$ENGINE_MESSAGE"
      said=" ($REPLY)"
    fi
    finish "$EXIT_RATE_LIMITED" "$STATUS_PAUSED" "$REASON_RATE_LIMIT" "rate limited by the agent's provider$said; resumes after $(orbit_iso "${S[RESUME_AT]}")"
  fi

  if ! ws_on_branch; then
    workspace_head_restore "after the agent"
  fi
  if ! integrity_gate "after agent"; then
    R[VERIFY]=$VERIFY_SKIP
    abort_snapshot_v "$t_before"
    record_abort "$n" "$dir" "$t_before" "$REPLY"
    return 0
  fi

  if [[ $outcome == "$OUTCOME_PERMANENT" ]]; then
    R[VERIFY]=$VERIFY_SKIP R[VERDICT]=$STATUS_BLOCKED R[STOP_REASON]=$REASON_TOOL_FAILURE
    R[EXIT_CODE]=$EXIT_BLOCKED
    R[SUMMARY]="the agent could not be run: $PERMANENT_WHY"
  fi

  if [[ -z ${R[VERDICT]:-} ]]; then
    run_verify "$dir" "after the agent"
    if ! integrity_gate "after verify"; then
      R[VERIFY]=$VERIFY_SKIP
      abort_snapshot_v "$t_before"
      record_abort "$n" "$dir" "$t_before" "$REPLY"
      return 0
    fi
    if ((VERIFY_OK)); then
      R[VERIFY]=$VERIFY_PASS
      S[VERIFY_STREAK]=$((S[VERIFY_STREAK] + 1))
      orbit_event verify_pass "$n" run 1 streak "${S[VERIFY_STREAK]}"
    else
      R[VERIFY]=$VERIFY_FAIL
      S[VERIFY_STREAK]=0
      feedback_write "$dir" "$n" "$attempt"
      R[VERIFY_FAILING]=$VERIFY_FAILING
      R[VERIFY_SIG]=$VERIFY_SIG
      orbit_event verify_fail "$n" run 1 failing "$VERIFY_FAILING" signature "$VERIFY_SIG"
    fi
  fi
  tree_snapshot
  t_after=$REPLY
  TREE_AFTER=$t_after

  # The agent's claim, taken out of its folder into the record before anything else runs
  # (the confirmation run gets a fresh folder).
  if [[ -z ${R[VERDICT]:-} ]] && agent_file_take done.md "$dir/done.md.claim"; then
    claim=1
    orbit_event done_claim "$n"
    if [[ ${R[VERIFY]} == "$VERIFY_PASS" ]]; then
      done_gate "$n" "$dir"
      if [[ $GATE_VERDICT == integrity ]]; then
        record_abort "$n" "$dir" "$t_before" "$TREE_AFTER"
        return 0
      fi
      t_after=$TREE_AFTER
    else
      GATE_VERDICT="verify failed"
    fi
    R[DONE_VERDICT]=$GATE_VERDICT
    if [[ $GATE_VERDICT == "$STATUS_DONE" ]]; then
      R[VERDICT]=$STATUS_DONE R[STOP_REASON]=$REASON_NONE R[EXIT_CODE]=$EXIT_DONE
      R[SUMMARY]="DONE after $n iteration(s): every check passed $PASS_K times in a row and the gate held"
      mv -- "$dir/done.md.claim" "$dir/done.md"
    else
      cp_name="$dir/done.md.rejected"
      mv -- "$dir/done.md.claim" "$cp_name"
      orbit_event done_rejected "$n" reason "$GATE_VERDICT"
      orbit_log "iteration $n: done.md rejected: $GATE_VERDICT"
    fi
  fi
  R[DONE_CLAIM]=$claim
  R[TREE_BEFORE]=$t_before
  R[TREE_AFTER]=$t_after
  changes_v "$t_before" "$t_after"
  R[CHANGED]=$CHANGES_COUNT
  ledger_iter_sum_v "$n"
  R[COST_MICROUSD]=$REPLY
  ledger_iter_kind_v
  R[COST_KIND]=$REPLY
  decide "$n"
  R[CB_FAILS]=${S[CB_FAILS]}
  R[VERIFY_STREAK]=${S[VERIFY_STREAK]}
  R[CB_SIG]=$CB_OPEN_SIG
  printf -v 'R[ENDED_AT]' '%(%s)T' -1
  result_record "$dir"
  finalize "$n" 1
}

# decide N: the verdict of an iteration without a verdict yet, in the contract's order.
decide() {
  local n=$1 st
  if [[ -n ${R[VERDICT]:-} ]]; then
    return 0
  fi
  # Circuit breaker: consecutive iterations whose agent failed.
  if [[ ${R[AGENT_OUTCOME]} != "$OUTCOME_OK" ]]; then
    S[CB_FAILS]=$((S[CB_FAILS] + 1))
  else
    S[CB_FAILS]=0
  fi
  # An agent that keeps failing opens the circuit before anything is judged stalled.
  if ((S[CB_FAILS] >= CB_THRESHOLD)) || [[ ${S[CB_STATE]} == "$CB_HALF_OPEN" && ${R[AGENT_OUTCOME]} != "$OUTCOME_OK" ]]; then
    R[VERDICT]=$STATUS_BLOCKED R[STOP_REASON]=$REASON_CIRCUIT_OPEN R[EXIT_CODE]=$EXIT_BLOCKED
    R[SUMMARY]="circuit open: the agent failed ${S[CB_FAILS]} iteration(s) in a row (last: ${R[AGENT_OUTCOME]}, exit ${R[AGENT_EXIT]})"
    CB_OPEN_SIG=$(orbit_sha256_str "agent:${R[AGENT_OUTCOME]}:${R[AGENT_EXIT]}")
    return 0
  fi
  sig_record "$n" "${R[TREE_AFTER]}"
  stall_check_v
  st=$REPLY
  if [[ -n $st ]]; then
    R[VERDICT]=$STATUS_STALLED R[STOP_REASON]=$st R[EXIT_CODE]=$EXIT_STALLED
    if [[ $st == "$REASON_STALLED" ]]; then
      R[SUMMARY]="no progress: the tree was the same after the last $CONVERGENCE_WINDOW iterations"
    else
      R[SUMMARY]="oscillating: the tree alternates between two states"
    fi
    return 0
  fi
  if [[ ${R[VERIFY]} == "$VERIFY_FAIL" ]] && repeat_failure_check "$n"; then
    R[ITERATION]=$n
    R[VERDICT]=$STATUS_BLOCKED R[STOP_REASON]=$REASON_CIRCUIT_OPEN R[EXIT_CODE]=$EXIT_BLOCKED
    R[SUMMARY]="the same verify failure three iterations in a row while the tree kept changing"
    CB_OPEN_SIG=$REPEAT_SIG
    return 0
  fi
  R[VERDICT]=$STATUS_CONTINUE R[STOP_REASON]=$REASON_NONE R[EXIT_CODE]=$EXIT_CONTINUE
  if [[ ${R[VERIFY]} == "$VERIFY_PASS" ]]; then
    R[SUMMARY]="iteration $n: verify passed; waiting for the agent's done.md"
  else
    R[SUMMARY]="iteration $n: verify failed (${R[VERIFY_FAILING]:-verify.sh})"
  fi
  if [[ -n ${R[DONE_VERDICT]:-} && ${R[DONE_VERDICT]} != "$STATUS_DONE" ]]; then
    R[SUMMARY]="iteration $n: DONE claim rejected (${R[DONE_VERDICT]})"
  fi
  return 0
}
CB_OPEN_SIG=

# finalize N: from iterations/N/result.env, idempotently: commit, progress entry, events,
# state. A rerun after a crash anywhere in here completes what is missing.
finalize() {
  local n=$1 fresh=${2:-0} dir text changed_list cost_line commit
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  result_read "$dir/result.env"
  CUR_ITER=$n
  if [[ ! -f $dir/commit.txt ]]; then
    commit_iteration "$n" "$dir" "${R[TREE_BEFORE]}" "${R[TREE_AFTER]}" "$fresh"
  fi
  # commit.txt's own word for "no commit" (not the stop reason none).
  commit='none'
  if [[ -f $dir/commit.txt ]]; then
    IFS= read -r commit <"$dir/commit.txt" || true
  fi
  if [[ $commit =~ ^[0-9a-f]{40,64}$ ]]; then
    branch_head_record "$commit"
  fi
  if [[ ${R[VERDICT]} != "$STATUS_ABORTED" ]]; then
    sig_record "$n" "${R[TREE_AFTER]}"
  fi
  # One final entry per attempt of the iteration: the earlier ones recover set aside
  # (retried.K/) have theirs already.
  # Only the end of progress.md is read: an iteration's entries are the newest ones, and
  # a loop with a long history must not rescan all of it each iteration.
  local retried=0 entries=0 closed=0 tail_text line
  for line in "$dir"/retried.*; do
    if [[ -d $line ]]; then retried=$((retried + 1)); fi
  done
  # An iteration this process just ran has no entry yet: nothing to look for.
  if ((!fresh)); then
    tail_text=$(tail -c 65536 -- "$PG_FILE" 2>/dev/null || true)
    while IFS= read -r line; do
      case $line in
        "## Iteration $n — INTERRUPTED") ;;
        "## Iteration $n — "*) entries=$((entries + 1)) ;;
        "<!-- orbit:end iteration=$n sha256="*) closed=1 ;;
      esac
    done <<<"$tail_text"
  fi
  if ((entries < retried + 1 || closed == 0)); then
    # awk reads to the end: `head` would leave tr to die of SIGPIPE (pipefail) as soon
    # as an iteration changes more names than fit in a pipe buffer.
    changes_v "${R[TREE_BEFORE]}" "${R[TREE_AFTER]}"
    changed_list=$REPLY
    cost_line="\$$(orbit_usd_text "${R[COST_MICROUSD]:-0}") (${R[COST_KIND]:-$COST_UNKNOWN})"
    if [[ ${R[COST_KIND]:-} == partial ]]; then
      cost_line="\$$(orbit_usd_text "${R[COST_MICROUSD]:-0}") reported, plus runs that reported no cost"
    fi
    if [[ ${R[COST_KIND]:-$COST_UNKNOWN} == "$COST_UNKNOWN" ]]; then
      cost_line="unknown (the agent reported no cost)"
    fi
    text="## Iteration $n — ${R[VERDICT]}"$'\n'
    orbit_iso_v "${R[STARTED_AT]}"
    text+="- started: $REPLY"$'\n'
    orbit_iso_v "${R[ENDED_AT]}"
    text+="- ended: $REPLY"$'\n'
    text+="- agent: exit ${R[AGENT_EXIT]:-?} (${R[AGENT_OUTCOME]:-?}), ${R[DURATION]:-0}s, attempt ${R[ATTEMPTS]:-1} of $RETRY_LIMIT"$'\n'
    fanout_progress_v "$dir"
    text+=$REPLY
    text+="- verify: ${R[VERIFY]:-skip}${R[VERIFY_FAILING]:+ — failing: ${R[VERIFY_FAILING]}}"$'\n'
    text+="- changed: ${R[CHANGED]:-0} file(s)${changed_list:+ — $changed_list}"$'\n'
    text+="- commit: $commit"$'\n'
    text+="- cost: $cost_line"$'\n'
    text+="- signature: ${R[TREE_AFTER]:-none}"$'\n'
    if [[ -n ${R[DONE_VERDICT]:-} ]]; then
      text+="- done claim: ${R[DONE_VERDICT]}"$'\n'
    fi
    if [[ -n ${R[AGENT_MESSAGE]:-} ]]; then
      text+="- agent said: ${R[AGENT_MESSAGE]}"$'\n'
    fi
    text+="- decision: ${R[VERDICT]} (${R[STOP_REASON]}) — ${R[SUMMARY]}"$'\n'
    if [[ -f $dir/feedback.txt && ${R[VERIFY]:-} == "$VERIFY_FAIL" ]]; then
      text+="- feedback:"$'\n\n'
      text+="$(progress_quote <"$dir/feedback.txt")"$'\n'
    fi
    progress_append "$n" "$text"
    if [[ ${R[VERIFY]:-} == "$VERIFY_FAIL" && -n ${R[VERIFY_SIG]:-} ]] && orbit_appendable "$LOOP_DIR/.failures.log" && ! grep -q "^${R[VERIFY_SIG]}	" -- "$LOOP_DIR/.failures.log" 2>/dev/null; then
      printf '%s\titeration %s: %s — %s\n' "${R[VERIFY_SIG]}" "$n" "${R[VERIFY_FAILING]:-verify.sh}" \
        "$(sed -n '4,$p' "$dir/feedback.txt" 2>/dev/null | grep -v '^ *$' | tail -n 1 | sed 's/^ *//' | cut -c1-160)" >>"$LOOP_DIR/.failures.log"
    fi
  fi
  # The journal's record of the iteration, unless an earlier attempt wrote it already.
  if ((fresh)) || ! grep -q "\"event\":\"iteration_end\",\"iteration\":$n," -- "$EV_FILE" 2>/dev/null; then
    orbit_event iteration_end "$n" verdict "${R[VERDICT]}" reason "${R[STOP_REASON]}" commit "$commit" changed "${R[CHANGED]:-0}"
  fi
  # The checkpoint.
  S[NEXT_ITERATION]=$((n + 1))
  if [[ ${R[CB_FAILS]:-} =~ ^[0-9]{1,9}$ ]]; then
    S[CB_FAILS]=${R[CB_FAILS]}
  fi
  if [[ ${R[VERIFY_STREAK]:-} =~ ^[0-9]{1,9}$ ]]; then
    S[VERIFY_STREAK]=${R[VERIFY_STREAK]}
  fi
  S[COST_MICROUSD]=$LEDGER_TOTAL
  S[RESUME_AT]=0
  case ${R[VERDICT]} in
    "$STATUS_CONTINUE")
      if [[ ${S[CB_STATE]} == "$CB_HALF_OPEN" ]]; then
        S[CB_STATE]=$CB_CLOSED S[CB_SIG]='' S[CB_OPENED_AT]=0
        orbit_event circuit_change "$n" from "$CB_HALF_OPEN" to "$CB_CLOSED"
      fi
      ;;
    "$STATUS_BLOCKED")
      if [[ ${R[STOP_REASON]} == "$REASON_CIRCUIT_OPEN" ]]; then
        orbit_event circuit_change "$n" from "${S[CB_STATE]}" to "$CB_OPEN"
        S[CB_STATE]=$CB_OPEN S[CB_OPENED_AT]=$(orbit_now)
        if [[ ${R[CB_SIG]:-} =~ ^[0-9a-f]{64}$ ]]; then
          S[CB_SIG]=${R[CB_SIG]}
        fi
      fi
      ;;
    "$STATUS_ABORTED")
      # The offending iteration is not counted as done: it reruns after a human review.
      S[NEXT_ITERATION]=$n
      ;;
  esac
  IN_ITERATION=0
  LAST_TREE=${R[TREE_AFTER]:-}
  orbit_log "iteration $n: ${R[VERDICT]} — ${R[SUMMARY]}"
  S[LAST_STATUS]=${R[VERDICT]}
  S[STOP_REASON]=${R[STOP_REASON]}
  if [[ ${R[VERDICT]} == "$STATUS_CONTINUE" ]]; then
    S[STOP_REASON]=$REASON_NONE
  fi
  save_state
  if orbit_true "$NOTIFY_EVERY_ITERATION" && [[ ${R[VERDICT]} == "$STATUS_CONTINUE" ]]; then
    notify "$NOTIFY_EVENT_ITERATION" "${R[SUMMARY]}"
  fi
  return 0
}

# Complete an iteration whose record exists but whose checkpoint does not (a crash after
# result.env was written): nothing is run again, nothing counted twice.
resume_pending() {
  local n=${S[NEXT_ITERATION]} dir
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  [[ -e $dir/result.env || -L $dir/result.env ]] || return 0
  if ! result_trusted "$n" "$dir/result.env"; then
    # Not the runner's finished record (a run that died while writing it, or a record
    # someone else put there): the iteration is done again, the record kept aside.
    orbit_log "iteration $n has a result.env that the journal does not record as the runner's: the iteration is done again"
    if [[ -L $dir/result.env || ! -f $dir/result.env ]]; then
      rm -f -- "$dir/result.env"
    fi
    return 0
  fi
  orbit_log "iteration $n was recorded but not checkpointed: completing it"
  finalize "$n"
  # Its snapshot is from another process: the tree may have changed since.
  LAST_TREE=
  stop_for_verdict
}

# After finalize: stop when the iteration's verdict says so.
stop_for_verdict() {
  case ${R[VERDICT]} in
    "$STATUS_CONTINUE") return 0 ;;
    "$STATUS_DONE")
      if [[ -n ${S[ITER_BRANCH]} ]] && orbit_true "$SQUASH_ON_DONE"; then
        squash_on_done
      fi
      if ((FANOUT_N > 1)); then
        fanout_done_prune
      fi
      finish "$EXIT_DONE" "$STATUS_DONE" "$REASON_NONE" "${R[SUMMARY]}"
      ;;
    "$STATUS_ABORTED")
      if [[ ${R[SUMMARY]} == *"orbit recover"* ]]; then
        finish "$EXIT_INTEGRITY" "$STATUS_ABORTED" "${R[STOP_REASON]}" "${R[SUMMARY]}"
      fi
      finish "$EXIT_INTEGRITY" "$STATUS_ABORTED" "${R[STOP_REASON]}" \
        "${R[SUMMARY]} — review it, then orbit recover --restore-pinned (undo) or --repin (accept)"
      ;;
    *) finish "${R[EXIT_CODE]}" "${R[VERDICT]}" "${R[STOP_REASON]}" "${R[SUMMARY]}" ;;
  esac
}

# On DONE with branch isolation: one squashed commit on orbit/<name>-summary.
squash_on_done() {
  local summary_branch="${S[ITER_BRANCH]}-summary" base title msg tree c
  git_q rev-parse --verify -q "refs/heads/$summary_branch" >/dev/null && return 0
  base=$(cat -- "$LOOP_DIR/.baseline-commit")
  goal_title_v
  title=$REPLY
  msg="orbit($LOOP_NAME): ${title:-goal reached} ($((S[NEXT_ITERATION] - 1)) iterations)"$'\n\nOrbit-Loop: '"$LOOP_NAME"
  {
    tree=$(git_q rev-parse "HEAD^{tree}") &&
      c=$(git_q commit-tree "$tree" -p "$base" -m "$msg") &&
      git_q branch "$summary_branch" "$c"
  } >>"$ORBIT_LOG_FILE" 2>&1 || orbit_log "squash onto $summary_branch failed"
}

# ---- signals: kill the agent's group, keep a resumable state, exit 128+n.
on_signal() {
  local sig=$1 num=$2 text
  trap '' INT TERM HUP
  # Best effort from here on: the state must be saved even if the terminal is gone.
  trap - ERR
  set +e
  orbit_log "received SIG$sig: stopping the agent and saving a resumable state"
  fanout_stop_all
  if [[ -n $ORBIT_CHILD_PID ]]; then
    orbit_kill_group "$ORBIT_CHILD_PID" "$KILL_GRACE_S"
  fi
  if [[ -n $ORBIT_WATCHDOG_PID ]]; then
    kill -KILL -- "-$ORBIT_WATCHDOG_PID" 2>/dev/null || true
  fi
  live_close "=== orbit: SIG$sig; the agent was stopped ==="
  # Notifications still being delivered carry the loop's mark: the sweep stops them too.
  sweep_env "ORBIT_OWNER=$LOOP_DIR"
  if ((IN_ITERATION)) && [[ -n $PG_FILE ]]; then
    text="## Iteration $CUR_ITER — INTERRUPTED"$'\n'"- at: $(orbit_iso_now)"$'\n'"- decision: SIG$sig; the iteration reruns on the next start"$'\n'
    progress_append "$CUR_ITER" "$text"
  fi
  if ((${#S[@]} > 0)); then
    S[LAST_STATUS]=$STATUS_CONTINUE
    S[STOP_REASON]=$REASON_SIGNAL
    save_state
    orbit_event loop_stop "$CUR_ITER" status "$STATUS_CONTINUE" reason "$REASON_SIGNAL" exit_code "$((128 + num))" signal "$sig"
  fi
  lock_release
  footer "$STATUS_CONTINUE" "interrupted by SIG$sig; a rerun resumes at iteration ${S[NEXT_ITERATION]:-1}"
  exit "$((128 + num))"
}

# ---- the gates. stop_gates hold after every iteration (budget, loop timeout, MAX_ITERATIONS,
# ---- in the contract's order); gates add the circuit and the pins before an agent runs.
stop_gates() {
  local n=${S[NEXT_ITERATION]} now elapsed run_spent
  printf -v now '%(%s)T' -1
  if [[ -n $USD_CAP_M ]] && ((S[COST_MICROUSD] >= USD_CAP_M)); then
    local over=''
    if ((S[COST_MICROUSD] > USD_CAP_M)); then
      # A run cannot be stopped mid-way for money: its reported cost is known only after it.
      over=" (\$$(orbit_usd_text $((S[COST_MICROUSD] - USD_CAP_M))) over: the last iteration cost more than the room left when it started)"
    fi
    finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "spent \$$(orbit_usd_text "${S[COST_MICROUSD]}") of the \$$(orbit_usd_text "$USD_CAP_M") cap$over; raise USD_CAP to go on"
  fi
  run_spent=$((S[COST_MICROUSD] - RUN_COST_START))
  if [[ -n $USD_PER_RUN_CAP_M ]] && ((run_spent >= USD_PER_RUN_CAP_M)); then
    finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "this run spent \$$(orbit_usd_text "$run_spent"), the per-run cap; rerun to go on"
  fi
  if [[ -n $USD_PER_ITER_CAP_M ]] && ((n > 1)) && ledger_iter_sum_v $((n - 1)) && ((REPLY >= USD_PER_ITER_CAP_M)); then
    finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "iteration $((n - 1)) cost at least the per-iteration cap; raise USD_PER_ITER_CAP to go on"
  fi
  if ((LOOP_TIMEOUT_S > 0 && S[STARTED_AT] > 0)); then
    elapsed=$((now - S[STARTED_AT]))
    if ((elapsed < 0)); then
      elapsed=0
    fi
    if ((elapsed >= LOOP_TIMEOUT_S)); then
      finish "$EXIT_LOOP_TIMEOUT" "$STATUS_BLOCKED" "$REASON_LOOP_TIMEOUT" "the loop's wall-clock limit ($LOOP_TIMEOUT) is reached"
    fi
  fi
  if ((n > MAX_ITERATIONS)); then
    if orbit_true "$WRAPUP_ON_LIMIT" && [[ ${S[STOP_REASON]} != "$REASON_MAX_ITERATIONS" ]]; then
      wrapup "$((n - 1))"
    fi
    finish "$EXIT_EXHAUSTED" "$STATUS_BLOCKED" "$REASON_MAX_ITERATIONS" "MAX_ITERATIONS ($MAX_ITERATIONS) used up without DONE; see notes.md, raise MAX_ITERATIONS to go on"
  fi
}

gates() {
  local n=${S[NEXT_ITERATION]} now est
  printf -v now '%(%s)T' -1
  stop_gates
  # An iteration is not started when what it is expected to cost would cross the cap: the
  # estimate is the last iteration's cost, or COST_ESTIMATE_USD when that is more.
  if [[ -n $USD_CAP_M ]]; then
    est=${COST_ESTIMATE_M:-0}
    if ((n > 1)) && ledger_iter_sum_v $((n - 1)) && ((REPLY > est)); then
      est=$REPLY
    fi
    if ((est > 0 && S[COST_MICROUSD] + est > USD_CAP_M)); then
      finish "$EXIT_BUDGET" "$STATUS_PAUSED" "$REASON_BUDGET" "spent \$$(orbit_usd_text "${S[COST_MICROUSD]}") of the \$$(orbit_usd_text "$USD_CAP_M") cap; the next iteration would cost about \$$(orbit_usd_text "$est") (the last one's cost) and cross it: raise USD_CAP to go on"
    fi
  fi
  if ((FANOUT_N > 1)); then
    fanout_budget
  fi
  if [[ ${S[CB_STATE]} == "$CB_OPEN" ]]; then
    if ((now - S[CB_OPENED_AT] >= CB_COOLDOWN_S)); then
      orbit_event circuit_change "$n" from "$CB_OPEN" to "$CB_HALF_OPEN"
      S[CB_STATE]=$CB_HALF_OPEN
      orbit_log "circuit half-open after its cooldown: one probe iteration"
    else
      finish "$EXIT_BLOCKED" "$STATUS_BLOCKED" "$REASON_CIRCUIT_OPEN" "circuit open since $(orbit_iso "${S[CB_OPENED_AT]}"); it half-opens after $CB_COOLDOWN, or run orbit recover --reset-circuit"
    fi
  fi
  if ! integrity_gate "before agent"; then
    integrity_stop
  fi
}

# One wrap-up run when MAX_ITERATIONS is used up: the agent writes what remains to notes.md.
wrapup() {
  local n=$1 dir
  dir="$LOOP_DIR/iterations/wrapup"
  mkdir -p -- "$dir"
  build_prompt "$n" "$PHASE_WRAPUP" 1 "$dir/prompt.md" ""
  run_agent "$n" "$PHASE_WRAPUP" 1 "$dir/prompt.md" "$dir/agent.log" "$dir/cost.usd" ""
  if ! integrity_gate "after wrap-up"; then
    integrity_stop
  fi
  cost_of_run "$dir/agent.log" "$dir/cost.usd"
  ledger_append "$n" "$RUN_COST_M" "$RUN_COST_KIND"
  S[COST_MICROUSD]=$LEDGER_TOTAL
  orbit_event agent_exit "$n" phase "$PHASE_WRAPUP" attempt 1 exit_code "$AGENT_RC" seconds "$AGENT_SECS"
}

# check_passed NAME: status 0 when the last verify run printed [PASS] NAME.
check_passed() {
  grep -qaxF -- "[PASS] $1" "$LAST_VERIFY_OUT" 2>/dev/null
}

# The red gate: a verify that passes on the untouched tree proves nothing. Per check: a
# reproduction check that passes already reproduces nothing (vacuous_verify, exit 17); a
# regression check that fails before the agent started is the environment's or the
# project's, not the agent's to fix (preflight, exit 2).
red_gate() {
  local dir="$LOOP_DIR/iterations/baseline" c bad=''
  mkdir -p -- "$dir"
  run_verify "$dir" "red gate: the untouched tree"
  if [[ -n $TRUST_BAD ]]; then
    return 0
  fi
  for c in "${CHECKS_REGRESSION[@]}"; do
    check_passed "$c" || bad+="${bad:+, }$c"
  done
  if [[ -n $bad ]]; then
    orbit_event verify_fail 0 run red_gate code REGRESSION_RED failing "${bad//, /,}"
    finish "$EXIT_PREFLIGHT" "$STATUS_BLOCKED" "$REASON_PREFLIGHT" "regression check(s) fail on the untouched tree, before the agent did anything: $bad. A regression check must pass before the change: fix the check or the project (see iterations/baseline/verify.log), then run again"
  fi
  for c in "${CHECKS_REPRODUCTION[@]}"; do
    if check_passed "$c"; then
      bad+="${bad:+, }$c"
    fi
  done
  if [[ -n $bad ]]; then
    orbit_event verify_pass 0 run red_gate code VACUOUS_VERIFY passing "${bad//, /,}"
    finish "$EXIT_VACUOUS_VERIFY" "$STATUS_BLOCKED" "$REASON_VACUOUS_VERIFY" "reproduction check(s) already pass on the untouched tree: $bad. A reproduction must fail before the change, or it reproduces nothing: fix the check (see iterations/baseline/verify.log)"
  fi
  if ((VERIFY_OK)); then
    if orbit_true "$ALLOW_GREEN_START"; then
      orbit_log "verify already passes on the untouched tree (ALLOW_GREEN_START=1): going on"
      orbit_event verify_pass 0 run red_gate allowed true
      return 0
    fi
    orbit_event verify_pass 0 run red_gate code VACUOUS_VERIFY
    finish "$EXIT_VACUOUS_VERIFY" "$STATUS_BLOCKED" "$REASON_VACUOUS_VERIFY" "verify.sh already passes before the agent did anything: it proves nothing. Add a check that fails now, or set ALLOW_GREEN_START=1"
  fi
  orbit_event verify_fail 0 run red_gate
}

# An unexpected failure: say where, keep the footer contract, exit 1. State on disk is
# whatever the last atomic write left; a rerun resumes from it.
orbit_internal_error() {
  local avail
  trap - ERR
  # In a subshell (a command substitution) the error is logged and the subshell exits:
  # its parent fails in turn and prints the one footer of the run.
  if [[ $BASHPID != "$$" ]]; then
    orbit_log "internal error: run-loop.sh line $1: '$2' failed (status $3)"
    exit "$EXIT_FAILURE"
  fi
  # A write that failed because the loop's disk is full, or under a file-size limit, is
  # named as such.
  avail=$(df -Pk -- "${LOOP_DIR:-.}" 2>/dev/null | awk 'NR==2 {print $4}' || true)
  if [[ $avail =~ ^[0-9]+$ ]] && ((avail < 1024)); then
    orbit_log "error: cannot write: the loop's disk is full (${avail} KB free; run-loop.sh line $1: '$2' failed): free space, then rerun; the last checkpoint is intact"
    footer "$STATUS_CONTINUE" "disk full: free space on the loop's disk, then rerun; it resumes from the last checkpoint" >&8
    exit "$EXIT_STATE_CORRUPT"
  fi
  if [[ $(ulimit -f) != unlimited ]]; then
    orbit_log "error: cannot write under a file-size limit (ulimit -f $(ulimit -f))? run-loop.sh line $1: '$2' failed (status $3): raise the limit, then rerun; the last checkpoint is intact"
    footer "$STATUS_CONTINUE" "failed under a file-size limit (ulimit -f $(ulimit -f)): raise it, then rerun; it resumes from the last checkpoint" >&8
    exit "$EXIT_STATE_CORRUPT"
  fi
  orbit_log "internal error: run-loop.sh line $1: '$2' failed (status $3)"
  footer >&8 "$STATUS_CONTINUE" "internal error at run-loop.sh line $1; a rerun resumes from the last checkpoint"
  exit "$EXIT_FAILURE"
}

# ---- git as the loop runs it. git's repository variables in the caller's environment
# ---- (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, ... as `git rev-parse --local-env-vars`
# ---- lists them) would point every git call of the runner, the agent and the checks at
# ---- another repository or index: removed (contract 5.1). And no git call of the loop runs
# ---- the file-system monitor a repository's config may name (core.fsmonitor is a command
# ---- an agent could set): off, through the environment, which outranks every config file.
git_env_set() {
  local v
  for v in GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT \
    GIT_OBJECT_DIRECTORY GIT_DIR GIT_WORK_TREE GIT_IMPLICIT_WORK_TREE GIT_GRAFT_FILE \
    GIT_INDEX_FILE GIT_NO_REPLACE_OBJECTS GIT_REPLACE_REF_BASE GIT_PREFIX GIT_SHALLOW_FILE \
    GIT_COMMON_DIR "${!GIT_CONFIG_KEY_@}" "${!GIT_CONFIG_VALUE_@}"; do
    unset "$v"
  done
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=false
}

main() {
  local arg status log_checked=0
  for arg in "$@"; do
    case $arg in
      --once) ONCE=1 ;;
      -h | --help)
        usage
        return 0
        ;;
      *)
        usage >&2
        footer "$STATUS_CONTINUE" "usage error: unknown argument"
        exit "$EXIT_PREFLIGHT"
        ;;
    esac
  done
  # The runner's own standard output, for the footer of an error raised while a block's
  # output is redirected (fd 8 is closed for the agent, the checks and their watchdogs).
  exec 8>&1
  trap 'orbit_internal_error $LINENO "$BASH_COMMAND" $?' ERR
  git_env_set
  # A write to a pipe nobody reads (a hasher that died) fails instead of killing the
  # runner. A handler, not an ignore: the agent and the checks get the default back.
  trap ':' PIPE
  # Started first, so that perl loads while the runner checks its settings and the tree.
  orbit_hasher_start
  orbit_settings
  # Before locate: a preflight failure checks notify.sh's pin before it notifies.
  orbit_sha_detect
  locate
  # A setting that does not parse still ends the run with the footer (and a notification).
  ORBIT_DIE_HOOK=settings_footer
  settings_check
  verify_budget
  fanout_settings
  ORBIT_DIE_HOOK=

  preflight
  sandbox_preflight
  lock_acquire
  # The mark of this loop's processes, swept when a run ends or the next one starts: only
  # the lock holder's children carry it, so a run that lost the lock race (and whatever it
  # runs while finding that out) is never taken for a leftover.
  export ORBIT_OWNER="$LOOP_DIR"
  # Scratch space inside the loop directory, used under the lock and kept from run to
  # run: every file in it is rewritten before it is read.
  ORBIT_TMP="$LOOP_DIR/.run-tmp"
  if [[ -L $ORBIT_TMP || ! -d $ORBIT_TMP ]]; then
    rm -rf -- "$ORBIT_TMP"
    mkdir -- "$ORBIT_TMP"
  fi
  orbit_fault after_lock
  trap 'on_signal INT 2' INT
  trap 'on_signal TERM 15' TERM
  trap 'on_signal HUP 1' HUP
  sweep_env "ORBIT_OWNER=$LOOP_DIR"
  load_state
  START_STATUS=${S[LAST_STATUS]} START_REASON=${S[STOP_REASON]}
  LOOP_BRANCH=${S[ITER_BRANCH]:-orbit/$LOOP_NAME}
  workspace_path_v
  WS=$REPLY
  AGENT_DIR=$WS/.orbit-agent
  engine_workspace_check
  sched_logs_rotate
  ledger_load
  events_open "$EV_FILE"
  if ! state_cross_check; then
    footer "$STATUS_CONTINUE" "state corrupt: state.env does not match the journal; run orbit recover"
    orbit_log "state corrupt: $STATE_ERR"
    orbit_log "error: review the loop directory, then run 'orbit recover $LOOP_DIR' to rebuild state from the evidence"
    notify_stop_early "$NOTIFY_EVENT_STATE_CORRUPT" "state corrupt: state.env does not match the journal; run orbit recover"
    lock_release
    exit "$EXIT_STATE_CORRUPT"
  fi
  progress_open "$PG_FILE"
  CUR_ITER=${S[NEXT_ITERATION]}
  status=${S[LAST_STATUS]}
  if [[ $status == "$STATUS_DONE" ]]; then
    lock_release
    footer "$STATUS_DONE" "the loop is DONE (iteration $((S[NEXT_ITERATION] - 1))); nothing to do"
    exit "$EXIT_DONE"
  fi
  if [[ $status == "$STATUS_PAUSED" && ${S[STOP_REASON]} == "$REASON_STOPPED" ]]; then
    lock_release
    footer "$STATUS_CONTINUE" "stopped by the user (orbit stop); nothing runs until orbit resume"
    orbit_log "the loop is stopped (orbit stop): nothing runs until 'orbit resume $LOOP_DIR'"
    exit "$EXIT_STOPPED"
  fi
  if [[ $status == "$STATUS_ABORTED" ]]; then
    lock_release
    footer "$STATUS_CONTINUE" "ABORTED (${S[STOP_REASON]}): review the change, then orbit recover"
    orbit_die "$EXIT_INTEGRITY" "the loop stopped on an integrity violation (${S[STOP_REASON]}): review it, then run 'orbit recover --restore-pinned' or 'orbit recover --repin'"
  fi
  if [[ $status == "$STATUS_STALLED" ]]; then
    lock_release
    footer "$STATUS_CONTINUE" "STALLED (${S[STOP_REASON]}): run orbit recover --clear-stall to go on"
    orbit_die "$EXIT_STALLED" "the loop is STALLED (${S[STOP_REASON]}): change the approach (goal.md, notes.md), then 'orbit recover --clear-stall'"
  fi
  if [[ $status == "$STATUS_PAUSED" && ${S[STOP_REASON]} == "$REASON_RATE_LIMIT" ]] && (($(orbit_now) < S[RESUME_AT])); then
    lock_release
    footer "$STATUS_CONTINUE" "rate limited; resumes after $(orbit_iso "${S[RESUME_AT]}")"
    orbit_log "rate limited until $(orbit_iso "${S[RESUME_AT]}"): not calling the agent"
    exit "$EXIT_RATE_LIMITED"
  fi
  # A run that goes on starts the live view over (one that found nothing to do left it).
  live_reset
  orbit_event loop_start "${S[NEXT_ITERATION]}" pid "$$" once "$ONCE" resumed_from "$status" torn_repaired "$ORBIT_TORN_REPAIRED" engine "$ENGINE" engine_version "$ENGINE_VERSION"
  if ((S[STARTED_AT] == 0)); then
    first_run_setup
    S[LAST_STATUS]=$STATUS_CONTINUE
    S[STOP_REASON]=$REASON_NONE
    save_state
  else
    workspace_ensure
  fi
  engine_workspace_note
  if ! integrity_gate "start"; then
    integrity_stop
  fi
  RUN_COST_START=${S[COST_MICROUSD]}
  resume_pending
  if ((S[NEXT_ITERATION] == 1)) && [[ ! -d $LOOP_DIR/iterations/000001 ]]; then
    red_gate
    if ! integrity_gate "after the red gate"; then
      integrity_stop
    fi
  fi
  while :; do
    # runner.log is rotated past 1 MiB: looked at on each start and every 20 iterations.
    if ((ONCE || S[NEXT_ITERATION] % 20 == 0 || !log_checked)) && [[ -f $ORBIT_LOG_FILE ]] &&
      (($(wc -c <"$ORBIT_LOG_FILE") > 1048576)); then
      mv -f -- "$ORBIT_LOG_FILE" "$ORBIT_LOG_FILE.1"
    fi
    log_checked=1
    gates
    run_iteration "${S[NEXT_ITERATION]}"
    stop_for_verdict
    stop_gates
    if ((ONCE)); then
      finish "$EXIT_CONTINUE" "$STATUS_CONTINUE" "$REASON_TICK" "one tick done (iteration $((S[NEXT_ITERATION] - 1))); work remains"
    fi
  done
}

main "$@"
exit
