# ---- hidden: run_hidden, the way a holdout check runs the project's code with the holdout
# ---- masked (contract section 10: the code under test never sees holdout/ nor
# ---- ORBIT_HOLDOUT_DIR). A check that does not name ORBIT_HOLDOUT_DIR runs masked as a
# ---- whole (run_check through run_hidden: it needs nothing of the holdout, and what it
# ---- starts gets nothing of it). A check that names it reads its cases from there and runs
# ---- the code through run_hidden itself, e.g.
# ----     while read -r a b sum; do test "$(run_hidden bash add.sh "$a" "$b")" = "$sum"; done <"$ORBIT_HOLDOUT_DIR/cases.txt"
# ---- The code then gets what the check hands it (arguments, a piped stdin) and nothing else
# ---- of the holdout. Code the check runs in its own process (a hidden test file that imports
# ---- the project) can read whatever the check reads: keep the answers in the checking process.

# run_hidden CMD [ARG...]: CMD without ORBIT_HOLDOUT_DIR and the check's own variables, with
# no descriptor of the check's but stdout, stderr and a stdin that is no file of the loop
# directory (a check's `while read ...; done <"$ORBIT_HOLDOUT_DIR/cases.txt"` would hand the
# code the whole, seekable file: it gets /dev/null; what a check hands over on purpose it
# pipes), and, when the runner ran the holdout under the OS sandbox (ORBIT_HIDDEN_BWRAP
# names bubblewrap), in a sandbox of its own nested in the check's: the holdout files,
# holdout.sh, loop.toml, the pins and every holdout log replaced by empty ones, the runner's
# scratch directory an empty one, and its own PID namespace (it cannot read the check's
# processes; /tmp stays the holdout run's private one: what the check writes there, the code
# can read). Inside a check that runs masked (no ORBIT_HOLDOUT_DIR: everything is already
# empty), it still gets its own PID namespace. Its status is CMD's. Exported to the checks'
# commands (bash -c), so a check's script can call it as well.
run_hidden() {
  if (($# == 0)); then
    printf 'run_hidden: no command given (run_hidden CMD [ARG...])\n' >&2
    return 1
  fi
  (
    local hidden_dir=${ORBIT_HOLDOUT_DIR-} hidden_bw=${ORBIT_HIDDEN_BWRAP-} hidden_tmp=${ORBIT_VERIFY_TMP-}
    local hidden_fd hidden_loop='' hidden_p hidden_in=''
    local -a hidden_args
    for hidden_fd in /proc/self/fd/*; do
      hidden_fd=${hidden_fd##*/}
      if [[ $hidden_fd =~ ^[0-9]+$ ]] && ((hidden_fd > 2)); then
        eval "exec $hidden_fd>&-"
      fi
    done
    if [[ -n $hidden_dir ]]; then
      hidden_loop=${hidden_dir%/*}
      hidden_p=$(cd -P -- "$hidden_loop" 2>/dev/null && pwd) || hidden_p=$hidden_loop
      hidden_in=$(readlink /proc/self/fd/0 2>/dev/null) || hidden_in=''
      if [[ $hidden_in == "$hidden_p"/* || $hidden_in == "$hidden_loop"/* ]]; then
        exec </dev/null
      fi
    fi
    # ORBIT_HIDDEN_BWRAP (bubblewrap's path, nothing secret) stays: a run_hidden nested in
    # this one still gets its own PID namespace.
    unset ORBIT_HOLDOUT_DIR ORBIT_VERIFY_TMP ORBIT_VERIFY_FOR ORBIT_VERIFY_TALLY
    if [[ -z $hidden_bw ]]; then
      # Without the sandbox the holdout is not sealed (the agent could read it): the code
      # gets no pointer to it, which is all a same-user run can give.
      exec "$@"
    fi
    hidden_args=(--unshare-pid --die-with-parent --dev-bind / / --proc /proc)
    if [[ -n $hidden_dir ]]; then
      for hidden_p in "$hidden_dir" "$hidden_loop/.pins" "$hidden_tmp"; do
        if [[ -n $hidden_p && -d $hidden_p && ! -L $hidden_p ]]; then
          hidden_args+=(--tmpfs "$hidden_p" --remount-ro "$hidden_p")
        fi
      done
      for hidden_p in "$hidden_loop/holdout.sh" "$hidden_loop/loop.toml" "$hidden_loop"/iterations/*/holdout.log "$hidden_loop"/iterations/*/candidates/*/holdout.log; do
        if [[ -f $hidden_p && ! -L $hidden_p ]]; then
          hidden_args+=(--ro-bind /dev/null "$hidden_p")
        fi
      done
    fi
    exec "$hidden_bw" "${hidden_args[@]}" -- "$@"
  )
}
export -f run_hidden
