# ---- preflight: exit 2 with nothing run and nothing spent.
# The agent's CLI as an absolute path, and the repository's common git directory.
AGENT_ABS=
GIT_COMMON_ABS=
# The git directory of the user's checkout (its HEAD is there; a linked worktree's is not the
# common directory).
REPO_GIT_ABS=
# What the runner needs at run time (contract section 1), named when it is missing.
# preflight_missing_v PROGRAM...: REPLY is the programs of the list that PATH does not find,
# space-separated ("" when PATH finds them all).
preflight_missing_v() {
  local t
  REPLY=
  for t in "$@"; do
    type -P -- "$t" >/dev/null 2>&1 || REPLY+="${REPLY:+ }$t"
  done
}

# preflight_perl_missing_v PERL MODULE...: REPLY is the modules PERL cannot load,
# space-separated ("" for none; every one when PERL is empty: no perl).
preflight_perl_missing_v() {
  local perl=$1 m
  shift
  REPLY=
  for m in "$@"; do
    if [[ -z $perl ]] || ! "$perl" "-M$m" -e 1 </dev/null >/dev/null 2>&1; then
      REPLY+="${REPLY:+ }$m"
    fi
  done
}

# preflight_perl_needs_v WHAT MODULE...: REPLY is "" where the perl on PATH loads every module,
# else the sentence that says what is missing for WHAT and how to get it.
preflight_perl_needs_v() {
  local what=$1 perl
  shift
  perl=$(type -P perl 2>/dev/null || true)
  preflight_perl_missing_v "$perl" "$@"
  if [[ -z $perl ]]; then
    REPLY="$what needs perl 5 with its core modules ($*), and PATH has no perl: install perl (apt-get install perl, dnf install perl)"
  elif [[ -n $REPLY ]]; then
    REPLY="$what needs perl's core modules $*, and $perl cannot load $REPLY: install the full perl (apt-get install perl, dnf install perl-core)"
  fi
}

preflight_fail() {
  config_footer "$STATUS_CONTINUE" "preflight failed: $1"
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
  if [[ ${AGENT_ARGV[0]} == */* && ${AGENT_ARGV[0]} != /* ]]; then
    preflight_fail "the agent '${AGENT_ARGV[0]}' is a relative path, which depends on where a run starts: set argv in loop.toml to its absolute path, then orbit init --force"
  fi
  AGENT_ABS=$(type -P -- "${AGENT_ARGV[0]}" 2>/dev/null || true)
  if [[ -z $AGENT_ABS || $AGENT_ABS != /* ]]; then
    preflight_fail "the agent '${AGENT_ARGV[0]}' is not on PATH ($PATH): install it, or set argv in loop.toml to its absolute path"
  fi
  [[ -x $AGENT_ABS && ! -d $AGENT_ABS ]] || preflight_fail "the agent $AGENT_ABS is not executable"
  engine_prices_check || preflight_fail "TOKEN_PRICES word '$REPLY' is not model=input/cached/output (USD per million tokens): fix token-prices in loop.toml"
  # The env file first: the keys it holds are the credentials the engine's check looks for.
  engine_env_load
  engine_preflight
  # One git call: work tree?, common directory, the checkout's own git directory, and HEAD
  # (status 1 without it).
  local -a git_facts=()
  rc=0
  out=$(config_repo_git rev-parse --is-inside-work-tree --git-common-dir --absolute-git-dir --verify -q HEAD 2>/dev/null) || rc=$?
  mapfile -t git_facts <<<"$out"
  [[ ${git_facts[0]} == true || ${git_facts[0]} == false ]] || preflight_fail "$REPO_ROOT is not a git work tree"
  REPO_GIT_ABS=${git_facts[2]-}
  if ((rc != 0)) || [[ -z ${git_facts[3]-} ]]; then
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
    config_footer "$STATUS_CONTINUE" "state corrupt: ${f#"$LOOP_DIR"/} is $(orbit_file_kind "$f"), not a file; remove it, then run orbit recover"
    orbit_log "error: $f is $(orbit_file_kind "$f"), where only the runner's regular files belong: remove it, then run 'orbit recover $LOOP_DIR'"
    exit "$EXIT_STATE_CORRUPT"
  fi
  for f in state.env state.env.sha256 pins.sha256 progress.md goal.md verify.sh prompt.md; do
    [[ -f $LOOP_DIR/$f ]] || preflight_fail "$f is missing from $LOOP_DIR: run orbit recover (or orbit init --force for scripts)"
  done
}
