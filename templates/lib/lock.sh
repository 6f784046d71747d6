# ---- the lock of a loop directory: flock on .run-loop.lock, held by a runner for its life,
# ---- or, where flock is missing, the directory .run-loop.lock.d with its owner's pid and
# ---- start time. The runner takes it (runner/lock.sh); recover.sh probes it, never takes it.

# lock_owner LOCKDIR: the owner line of a mkdir lock ("pid start-time"), empty while it is
# being written (and when it is not a regular file: an owner is never read through a link).
lock_owner() {
  [[ -f $1/owner && ! -L $1/owner ]] || return 0
  cat -- "$1/owner" 2>/dev/null || true
}

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
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ "$(lock_proc_start "$pid")" == "$start" ]]
}

# lock_proc_start PID: the process's start time as ps prints it ("" when it is gone).
lock_proc_start() { ps -o lstart= -p "$1" 2>/dev/null | tr -s ' ' || true; }

# lock_held_v DIR: whether a runner holds the lock of the loop directory DIR, probed without
# taking it (/proc/locks or `flock -n` for the flock, the owner's pid and start time for the
# mkdir lock); REPLY says who holds it.
lock_held_v() {
  local lockdir="$1/.run-loop.lock.d" f ino owner
  REPLY=
  # The runner locks .run-loop.lock and the loop directory itself (a deleted lock file must
  # not let a second runner in): either held means held.
  for f in "$1/.run-loop.lock" "$1"; do
    [[ -e $f ]] || continue
    if [[ -r /proc/locks ]]; then
      # shellcheck disable=SC2012  # ls -di is the portable way to read an inode number
      ino=$(ls -di -- "$f" | awk '{ print $1 }')
      if awk -v ino="$ino" '{ for (i = 1; i <= NF; i++) if (split($i, p, ":") == 3 && p[3] == ino) found = 1 } END { exit !found }' /proc/locks; then
        REPLY="a runner holds $f (flock)"
        return 0
      fi
    elif command -v flock >/dev/null 2>&1 && ! flock -n "$f" true 2>/dev/null; then
      REPLY="a runner holds $f (flock)"
      return 0
    fi
  done
  [[ -d $lockdir ]] || return 1
  owner=$(lock_owner "$lockdir")
  lock_owner_alive "$lockdir" "$owner" || return 1
  if [[ -z $owner ]]; then
    REPLY="$lockdir exists without a readable owner (a runner may be starting): wait a moment, or remove the directory if no runner is running"
  else
    REPLY="a runner (pid ${owner%% *}) holds $lockdir"
  fi
}
