# ---- sandbox: the OS sandbox (loop.toml sandbox = "bwrap", or "auto": bubblewrap where the
# ---- preflight's probe says it works here, else none; contract section 7).
# ---- With it, every agent run (work, confirm, wrapup), every verify run and the judge run
# ---- under bubblewrap, at the same paths and with the same environment as without it:
# ----   the workspace writable, its .git link read-only; git's common directory read-only
# ----   (config, hooks, info, objects, refs, and the worktree's own index and HEAD: the
# ----   agent reads git, the runner commits); the loop directory an empty read-only
# ----   directory for the agent, read-only for the checks (their scratch a private tmpfs,
# ----   notify.secrets hidden); the rest of the file system read-only, HOME included,
# ----   except the engine's own state directory; /tmp (and TMPDIR) a private tmpfs; /dev
# ----   and /proc fresh, /dev/tty a null device (no typing into the user's terminal); its
# ----   own PID namespace, so that nothing it starts outlives it. The network: as the
# ----   user has it with sandbox-network = "open"; with "allowlist", only through the
# ----   runner's proxy (lib/sandbox-net.sh).
# ---- A write the loop would have caught after the run (contract section 7) fails at the
# ---- write instead. Rendered into a loop of sandbox = "bwrap" or "auto" (lib/no-sandbox.sh in
# ---- the others).

SANDBOX_BWRAP=
SANDBOX_ENV=
# 1 while agent and check runs are sandboxed: always with sandbox = "bwrap" (the preflight
# stops the run where it cannot be); with "auto", what the preflight's probe found.
SANDBOX_ACTIVE=1
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
# a loop of sandbox = "bwrap" or "auto"; lib/no-sandbox.sh stands in for it in the others).
sandbox_on() { ((SANDBOX_ACTIVE)); }

# sandbox_base_args: the namespaces and fresh mounts of every sandboxed run (and of the
# preflight's probe), into the array named by $1.
sandbox_base_args() {
  local -n into=$1
  into+=(--unshare-pid --unshare-ipc --die-with-parent --ro-bind / / --dev /dev
    --dev-bind /dev/null /dev/tty --proc /proc)
}

# sandbox_probe_v: status 0 when bubblewrap can run here: Linux, bwrap on PATH, user
# namespaces it may use (probed by starting one sandbox), and an env that can give a command
# TERM back; else status 1 with REPLY what is missing and its fix.
sandbox_probe_v() {
  local out rc=0
  local -a probe=()
  REPLY=
  if [[ $OSTYPE != linux* ]]; then
    REPLY="bubblewrap runs only on Linux (this is $OSTYPE)"
    return 1
  fi
  SANDBOX_BWRAP=$(type -P bwrap 2>/dev/null || true)
  if [[ -z $SANDBOX_BWRAP ]]; then
    REPLY='bubblewrap is not installed (no bwrap on PATH): install it (apt-get install bubblewrap, dnf install bubblewrap)'
    return 1
  fi
  SANDBOX_ENV=$(type -P env 2>/dev/null || true)
  if [[ -z $SANDBOX_ENV ]] || ! "$SANDBOX_ENV" --default-signal="$SANDBOX_SIGNALS" true 2>/dev/null; then
    REPLY='there is no env with --default-signal (GNU coreutils 8.31 or later) to give the agent the timeout'"'"'s TERM: upgrade coreutils'
    return 1
  fi
  sandbox_base_args probe
  out=$("$SANDBOX_BWRAP" "${probe[@]}" --tmpfs /tmp -- "$SANDBOX_ENV" --default-signal="$SANDBOX_SIGNALS" true 2>&1 </dev/null) || rc=$?
  if ((rc != 0)); then
    out=${out//[$'\n\r\t']/ }
    orbit_cut_v "$out" 300
    REPLY="bubblewrap cannot start a sandbox here (exit $rc: ${REPLY:-no message}): user namespaces are off? enable them (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 an AppArmor profile for bwrap, or kernel.apparmor_restrict_unprivileged_userns=0)"
    return 1
  fi
  return 0
}

# sandbox_preflight: with sandbox = "bwrap", bubblewrap must be able to run here (else the
# run stops with EXIT_PREFLIGHT and the fix); with "auto", the probe decides, once per run,
# and the log says which and why.
sandbox_preflight() {
  if sandbox_probe_v; then
    SANDBOX_ACTIVE=1
    orbit_log "sandbox: every agent and check runs under bubblewrap ($SANDBOX_BWRAP, sandbox = $SANDBOX_SETTING)"
    sandbox_net_preflight
    return 0
  fi
  if [[ $SANDBOX_SETTING == auto ]]; then
    SANDBOX_ACTIVE=0
    orbit_log "sandbox: none (sandbox = auto, and $REPLY): agent and check runs are not sandboxed; a tamper is caught after the run, not refused"
    return 0
  fi
  preflight_fail "sandbox = \"bwrap\" but $REPLY, or set sandbox = \"none\" in loop.toml and run orbit init --force"
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

# sandbox_hides_v PATH: status 0 when the sandbox hid PATH from a run that did not find it
# (a check's program or interpreter): PATH is there on this machine, but not as a sandboxed
# run sees the file system. REPLY says why: under one of SANDBOX_TMPFS (/tmp, TMPDIR),
# each run's own private, empty directory; else a path the sandbox hides.
sandbox_hides_v() {
  local t
  REPLY=''
  sandbox_on || return 1
  [[ -e $1 || -L $1 ]] || return 1
  for t in "${SANDBOX_TMPFS[@]}"; do
    if [[ $1 == "$t"/* ]]; then
      REPLY="it lies under $t, which the sandbox gives every run as its own private, empty directory"
      return 0
    fi
  done
  REPLY="a path the sandbox hides from the checks"
  return 0
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
# (its credentials and sessions must persist; a name ending in / is a directory, made when
# missing, so an engine never run here before can start), and REPLY_RO, its files there that name
# commands or standing instructions for its later runs outside the loop (read-only, where
# they exist), and REPLY_SCRATCH, its directories there that it writes into at start but
# that name what its later runs do: a fresh writable directory each run, what is there
# read-only in it. The engine part's engine_home_paths. Nothing for the checks.
sandbox_home_paths() {
  REPLY_RW=() REPLY_RO=() REPLY_SCRATCH=()
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

# sandbox_workspace_roots_v: REPLY_ROOTS, the directories that hold the loops' workspaces
# (the canonical paths of those that exist, none a link; one under a private tmpfs too, as
# a directory bound again, the repository's, may show it): the data directory's
# orbit/workspaces (lib/workspace.sh), the one this loop's workspace lies under when
# another environment named it, and the repository's .orbit/.workspaces (the default
# before contract 2.4). A sandboxed run gets each as an empty, read-only directory holding
# its own workspace alone: no loop's run reads or writes another's.
sandbox_workspace_roots_v() {
  local data=${XDG_DATA_HOME:-} p q
  local -a roots_wanted=()
  REPLY_ROOTS=()
  if [[ $data != /* && ${HOME:-} == /* ]]; then
    data=${HOME%/}/.local/share
  fi
  [[ $data != /* ]] || roots_wanted+=("${data%/}/orbit/workspaces")
  p=${WS_MAIN%/*}
  p=${p%/*}
  [[ $p != */orbit/workspaces ]] || roots_wanted+=("$p")
  roots_wanted+=("$REPO_ROOT/.orbit/.workspaces")
  for p in "${roots_wanted[@]}"; do
    [[ -d $p && ! -L $p ]] || continue
    p=$(cd -P -- "$p" 2>/dev/null && pwd -P) || continue
    for q in "${REPLY_ROOTS[@]}"; do
      [[ $q != "$p" ]] || continue 2
    done
    REPLY_ROOTS+=("$p")
  done
}

# The git index and object store the agent's git writes in the sandbox (SANDBOX_AGENT_ENV,
# their variables), where git's control files are read-only: a copy of the workspace's index
# and an empty object directory (the repository's objects its alternate) in a directory of
# their own, seen at /tmp/.orbit-git in the agent's private /tmp. An engine that stages what
# it writes (aider does) can; the runner never reads them (its snapshots use its own index),
# and each run gets fresh ones.
SANDBOX_AGENT_ENV=()

# sandbox_agent_index ARRAY: the mount of that copy, into the array named by $1, and
# SANDBOX_AGENT_ENV; nothing (and no variable) where the workspace's index is not one the
# runner's worktree owns.
sandbox_agent_index() {
  local -n index_args=$1
  local line='' gd dir=$ORBIT_TMP/agent-git
  SANDBOX_AGENT_ENV=()
  [[ -f $WS/.git && ! -L $WS/.git ]] || return 0
  IFS= read -r line <"$WS/.git" 2>/dev/null || true
  gd=${line#gitdir: }
  [[ $line == "gitdir: $GIT_COMMON_ABS/worktrees/"* && $gd != */../* ]] || return 0
  rm -rf -- "$dir"
  mkdir -m 700 -- "$dir" || return 0
  if [[ -f $gd/index && ! -L $gd/index ]]; then
    cp -- "$gd/index" "$dir/index" || return 0
  fi
  mkdir -- "$dir/objects" || return 0
  index_args+=(--bind "$dir" /tmp/.orbit-git)
  SANDBOX_AGENT_ENV=("GIT_INDEX_FILE=/tmp/.orbit-git/index" "GIT_OBJECT_DIRECTORY=/tmp/.orbit-git/objects"
    "GIT_ALTERNATE_OBJECT_DIRECTORIES=$GIT_COMMON_ABS/objects")
}

# sandbox_prepare KIND: SANDBOX_ARGV for the next run, KIND agent (the agent's runs), check
# (verify.sh and the judge) or holdout (holdout.sh: a check that sees the holdout files);
# empty without the sandbox. The order matters: a later
# mount covers an earlier one at and below its path.
sandbox_prepare() {
  local kind=$1 p e home=${HOME:-} secrets
  local -a a=() REPLY_RW REPLY_RO REPLY_SCRATCH REPLY_ROOTS
  SANDBOX_ARGV=() SANDBOX_AGENT_ENV=()
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
  # The key the runner signs the envelope with, and ssh-agent's socket: no run's to read.
  envelope_key_hide a
  if [[ -n $home ]]; then
    sandbox_home_paths "$kind"
    for p in "${REPLY_RW[@]}"; do
      if [[ $p == */ ]]; then
        p=${p%/}
        [[ -e $home/$p || -L $home/$p ]] || (umask 077 && mkdir -p -- "$home/$p") 2>/dev/null || true
      fi
      a+=(--bind-try "$home/$p" "$home/$p")
    done
    for p in "${REPLY_RO[@]}"; do
      a+=(--ro-bind-try "$home/$p" "$home/$p")
    done
    for p in "${REPLY_SCRATCH[@]}"; do
      [[ ! -L $home/$p ]] || continue
      [[ -d $home/$p ]] || (umask 077 && mkdir -p -- "$home/$p") 2>/dev/null || continue
      a+=(--tmpfs "$home/$p")
      for e in "$home/$p"/* "$home/$p"/.[!.]* "$home/$p"/..?*; do
        if [[ -e $e || -L $e ]]; then
          a+=(--ro-bind-try "$e" "$e")
        fi
      done
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
  # Every loop's workspace: hidden, but the run's own, bound below (the roots are made
  # read-only after that, when bwrap has made the directories it is bound on).
  sandbox_workspace_roots_v
  for p in "${REPLY_ROOTS[@]}"; do
    a+=(--tmpfs "$p")
  done
  # git's control files: read-only, whatever covered them above.
  a+=(--ro-bind "$GIT_COMMON_ABS" "$GIT_COMMON_ABS")
  if [[ $kind == agent ]]; then
    # The agent needs nothing of the loop directory: an empty, read-only directory.
    a+=(--tmpfs "$LOOP_DIR" --remount-ro "$LOOP_DIR")
    sandbox_agent_index a
  else
    # The checks read verify.sh (the holdout run holdout.sh and holdout/); their scratch
    # space is theirs alone, and the channel secrets are not theirs to read.
    # A candidate's checks have a scratch of their own under .run-tmp/: the others' (their
    # holdout output, their agents' logs) is not theirs to read either.
    a+=(--ro-bind "$LOOP_DIR" "$LOOP_DIR")
    if [[ $ORBIT_TMP == "$LOOP_DIR/.run-tmp/"* ]]; then
      a+=(--tmpfs "$LOOP_DIR/.run-tmp")
    fi
    a+=(--tmpfs "$ORBIT_TMP")
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
  for p in "${REPLY_ROOTS[@]}"; do
    a+=(--remount-ro "$p")
  done
  a+=(--chdir "$WS")
  local -a cache_env=()
  sandbox_build_cache_env "$kind" cache_env
  # With the network allowlist, the launcher starts the run's proxy, and the bridge the command.
  if sandbox_net_fence "$kind" a; then
    SANDBOX_ARGV=("${NET_ARGV[@]}" "${cache_env[@]}")
    return 0
  fi
  SANDBOX_ARGV=("$BASH" -c "$SANDBOX_LAUNCHER" orbit-sandbox "$SANDBOX_BWRAP" "${a[@]}" -- "$SANDBOX_ENV" --default-signal="$SANDBOX_SIGNALS" "${cache_env[@]}")
}

# sandbox_build_cache_env KIND ARRAY: into the array named by $2, a build cache a run of
# KIND can write: Go's (by default under the read-only HOME) in the private /tmp, unless
# GOCACHE names a writable place.
sandbox_build_cache_env() {
  local kind=$1 cache=${GOCACHE:-}
  local -n cache_out=$2
  if [[ $cache == /?* && $cache != */../* ]]; then
    sandbox_under "$cache" && return 0
    [[ $kind == holdout || ($cache != "$WS" && $cache != "$WS"/*) ]] || return 0
  fi
  cache_out+=("GOCACHE=/tmp/.orbit-go-build")
}
