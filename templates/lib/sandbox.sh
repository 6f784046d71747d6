# ---- sandbox: the optional OS sandbox (loop.toml sandbox = "bwrap", contract section 7).
# ---- With it, every agent run (work, confirm, wrapup), every verify run and the judge run
# ---- under bubblewrap, at the same paths and with the same environment as without it:
# ----   the workspace writable, its .git link read-only; git's common directory read-only
# ----   (config, hooks, info, objects, refs, and the worktree's own index and HEAD: the
# ----   agent reads git, the runner commits); the loop directory an empty read-only
# ----   directory for the agent, read-only for the checks (their scratch a private tmpfs,
# ----   notify.secrets hidden); the rest of the file system read-only, HOME included,
# ----   except the engine's own state directory; /tmp (and TMPDIR) a private tmpfs; /dev
# ----   and /proc fresh, /dev/tty a null device (no typing into the user's terminal); its
# ----   own PID namespace, so that nothing it starts outlives it. The network stays.
# ---- A write the loop would have caught after the run (contract section 7) fails at the
# ---- write instead. Rendered into a sandboxed loop only (lib/no-sandbox.sh in the others).

SANDBOX_BWRAP=
SANDBOX_ENV=
# The command line the next run is prefixed with (empty without the sandbox).
SANDBOX_ARGV=()
# Directories the sandbox covers with a private tmpfs.
SANDBOX_TMPFS=()

# The launcher between the bounded run and bwrap. A timeout's TERM must reach the agent (in
# the run's process group) and leave it its grace period; it must not end bwrap, nor
# bwrap's parent: bwrap's end, or its parent's (--die-with-parent), KILLs the agent at once.
# So the launcher and bwrap ignore TERM (the launcher stays bwrap's parent while the
# wrapper above it dies of the TERM), and env gives the command TERM back, with the INT and
# QUIT a background job is started without. KILL still ends all of it. Every descriptor past
# stderr is closed first (the sandbox holds no door to the runner's files), but for a check
# run's tally, fd 6, which verify.sh alone writes (ORBIT_VERIFY_TALLY=6).
# shellcheck disable=SC2016  # expands in the launcher, by design
SANDBOX_LAUNCHER='trap "" TERM
for fd in /proc/self/fd/*; do
  fd=${fd##*/}
  if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)) && [[ $fd != 6 || ${ORBIT_VERIFY_TALLY-} != 6 ]]; then
    exec {fd}>&-
  fi
done
"$@" <&0 &
wait "$!"'
# What env gives back to the sandboxed command.
SANDBOX_SIGNALS=TERM,INT,QUIT

# sandbox_on: status 0: agent and check runs are sandboxed (this part is rendered only into
# a loop of sandbox = "bwrap"; lib/no-sandbox.sh stands in for it in the others).
sandbox_on() { :; }

# sandbox_base_args: the namespaces and fresh mounts of every sandboxed run (and of the
# preflight's probe), into the array named by $1.
sandbox_base_args() {
  local -n into=$1
  into+=(--unshare-pid --unshare-ipc --die-with-parent --ro-bind / / --dev /dev
    --dev-bind /dev/null /dev/tty --proc /proc)
}

# sandbox_preflight: bubblewrap must be able to run here: Linux, bwrap on PATH, user
# namespaces it may use (probed by starting one sandbox), and an env that can give a
# command TERM back. Any of them missing stops the run with EXIT_PREFLIGHT and the fix.
sandbox_preflight() {
  local out rc=0 off='or set sandbox = "none" in loop.toml and run orbit init --force'
  if [[ $OSTYPE != linux* ]]; then
    preflight_fail "sandbox = \"bwrap\" needs Linux (bubblewrap runs only there; this is $OSTYPE): $off"
  fi
  SANDBOX_BWRAP=$(type -P bwrap 2>/dev/null || true)
  if [[ -z $SANDBOX_BWRAP ]]; then
    preflight_fail "sandbox = \"bwrap\" but bubblewrap is not installed (no bwrap on PATH): install it (apt-get install bubblewrap, dnf install bubblewrap), $off"
  fi
  SANDBOX_ENV=$(type -P env 2>/dev/null || true)
  if [[ -z $SANDBOX_ENV ]] || ! "$SANDBOX_ENV" --default-signal="$SANDBOX_SIGNALS" true 2>/dev/null; then
    preflight_fail "sandbox = \"bwrap\" needs an env with --default-signal (GNU coreutils 8.31 or later) to give the agent the timeout's TERM: upgrade coreutils, $off"
  fi
  local -a probe=()
  sandbox_base_args probe
  out=$("$SANDBOX_BWRAP" "${probe[@]}" --tmpfs /tmp -- "$SANDBOX_ENV" --default-signal="$SANDBOX_SIGNALS" true 2>&1 </dev/null) || rc=$?
  if ((rc != 0)); then
    out=${out//[$'\n\r\t']/ }
    orbit_cut_v "$out" 300
    preflight_fail "sandbox = \"bwrap\" but bubblewrap cannot start a sandbox here (exit $rc: ${REPLY:-no message}): user namespaces are off? enable them (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 an AppArmor profile for bwrap, or kernel.apparmor_restrict_unprivileged_userns=0), $off"
  fi
  orbit_log "sandbox: every agent and check runs under bubblewrap ($SANDBOX_BWRAP)"
}

# sandbox_under PATH: status 0 when PATH is one of SANDBOX_TMPFS or below one (hidden by
# the private tmpfs, so it must be bound again to be seen).
sandbox_under() {
  local t
  for t in "${SANDBOX_TMPFS[@]}"; do
    [[ $1 == "$t" || $1 == "$t"/* ]] && return 0
  done
  return 1
}

# sandbox_tmpdir_ok DIR: DIR may become a private tmpfs: an absolute directory that holds
# none of the places a run needs (a TMPDIR that did would hide them).
sandbox_tmpdir_ok() {
  local d=$1 p
  [[ $d == /?* && -d $d && ! -L $d ]] || return 1
  for p in "$WS" "$LOOP_DIR" "$REPO_ROOT" "$GIT_COMMON_ABS" "${HOME:-/}" "$AGENT_ABS"; do
    [[ $p == "$d" || $p == "$d"/* ]] && return 1
  done
  return 0
}

# sandbox_home_paths KIND: REPLY_RW, the engine's state under HOME that stays writable
# (its credentials and sessions must persist), and REPLY_RO, its files there that name
# commands or standing instructions for its later runs outside the loop (read-only, where
# they exist): the engine part's engine_home_paths. Nothing for the checks.
sandbox_home_paths() {
  REPLY_RW=() REPLY_RO=()
  [[ $1 == agent ]] || return 0
  engine_home_paths
}

# sandbox_hide_holdout ARRAY: the mounts that hide the holdout checks from a check run, into
# the array named by $1: an empty read-only directory over holdout/ and .pins/, the null
# device over holdout.sh, loop.toml and every iteration's holdout.log.
sandbox_hide_holdout() {
  local -n hide_args=$1
  local p
  for p in "$LOOP_DIR/holdout" "$LOOP_DIR/.pins"; do
    if [[ -d $p && ! -L $p ]]; then
      hide_args+=(--tmpfs "$p" --remount-ro "$p")
    fi
  done
  for p in "$LOOP_DIR/holdout.sh" "$LOOP_DIR/loop.toml" "$LOOP_DIR"/iterations/*/holdout.log "$LOOP_DIR"/iterations/*/candidates/*/holdout.log; do
    if [[ -f $p && ! -L $p ]]; then
      hide_args+=(--ro-bind /dev/null "$p")
    fi
  done
}

# sandbox_prepare KIND: SANDBOX_ARGV for the next run, KIND agent (the agent's runs), check
# (verify.sh and the judge) or holdout (holdout.sh: a check that sees the holdout files);
# empty without the sandbox. The order matters: a later
# mount covers an earlier one at and below its path.
sandbox_prepare() {
  local kind=$1 p home=${HOME:-} secrets
  local -a a=() REPLY_RW REPLY_RO
  SANDBOX_ARGV=()
  sandbox_on || return 0
  sandbox_base_args a
  SANDBOX_TMPFS=(/tmp)
  if [[ -n ${TMPDIR:-} && $TMPDIR != /tmp ]] && ! sandbox_under "$TMPDIR" && sandbox_tmpdir_ok "$TMPDIR"; then
    SANDBOX_TMPFS+=("${TMPDIR%/}")
  fi
  for p in "${SANDBOX_TMPFS[@]}"; do
    a+=(--tmpfs "$p")
  done
  [[ $home == /?* && -d $home ]] || home=
  # What a private tmpfs hid and a run reads: seen again, read-only.
  for p in "$home" "$REPO_ROOT" "$GIT_COMMON_ABS" "$AGENT_ABS"; do
    if [[ -n $p ]] && sandbox_under "$p"; then
      a+=(--ro-bind "$p" "$p")
    fi
  done
  if [[ -n $home ]]; then
    sandbox_home_paths "$kind"
    for p in "${REPLY_RW[@]}"; do
      a+=(--bind-try "$home/$p" "$home/$p")
    done
    for p in "${REPLY_RO[@]}"; do
      a+=(--ro-bind-try "$home/$p" "$home/$p")
    done
    # orbit's own keys and state outside the loop (none may be seen, whatever the run).
    for p in "$home/.local/state/orbit" "${XDG_STATE_HOME:-$home/.local/state}/orbit" "${XDG_CONFIG_HOME:-$home/.config}/orbit"; do
      if [[ -d $p && ! -L $p ]]; then
        a+=(--tmpfs "$p" --remount-ro "$p")
      elif [[ -f $p && ! -L $p ]]; then
        a+=(--ro-bind /dev/null "$p")
      fi
    done
  fi
  # git's control files: read-only, whatever covered them above.
  a+=(--ro-bind "$GIT_COMMON_ABS" "$GIT_COMMON_ABS")
  if [[ $kind == agent ]]; then
    # The agent needs nothing of the loop directory: an empty, read-only directory.
    a+=(--tmpfs "$LOOP_DIR" --remount-ro "$LOOP_DIR")
  else
    # The checks read verify.sh (the holdout run holdout.sh and holdout/); their scratch
    # space is theirs alone, and the channel secrets are not theirs to read.
    a+=(--ro-bind "$LOOP_DIR" "$LOOP_DIR" --tmpfs "$ORBIT_TMP")
    secrets=$LOOP_DIR/notify.secrets
    if [[ -f $secrets && ! -L $secrets ]]; then
      a+=(--ro-bind /dev/null "$secrets")
    fi
    if [[ $kind != holdout ]]; then
      # verify.sh and the judge run the agent's code: what would tell it the holdout
      # checks (holdout.sh, holdout/, loop.toml, their baselines, their records) is not
      # there for it to copy into the workspace.
      sandbox_hide_holdout a
    fi
  fi
  if [[ $kind == holdout ]]; then
    # The holdout run reads the workspace only: nothing it writes can reach a later run
    # (its scratch space is the private /tmp).
    a+=(--ro-bind "$WS" "$WS")
  else
    a+=(--bind "$WS" "$WS")
  fi
  # The workspace's link to its git directory: the runner's git follows it.
  if [[ -f $WS/.git && ! -L $WS/.git ]]; then
    a+=(--ro-bind "$WS/.git" "$WS/.git")
  fi
  a+=(--chdir "$WS")
  SANDBOX_ARGV=("$BASH" -c "$SANDBOX_LAUNCHER" orbit-sandbox "$SANDBOX_BWRAP" "${a[@]}" -- "$SANDBOX_ENV" --default-signal="$SANDBOX_SIGNALS")
}
