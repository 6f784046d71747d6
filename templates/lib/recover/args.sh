# ---- recover: standalone state repair, with bash alone. The same derivation as
# ---- `orbit recover` (see docs/RECOVER.md): both write the same state.env from the same
# ---- evidence. Every rewritten file is copied to backups/<UTC time>/ first; every write
# ---- is atomic; state.env and its sidecar are written last. The contract version a loop
# ---- is brought to with --migrate is the prelude's ORBIT_CONTRACT_VERSION.


RC_DIR=
RC_ARG_DIR=
RC_REPO=
RC_NAME=
RC_LOOP_CV=
RC_WS_SETTING=
WS=
F_RESET=0
F_STALL=0
F_GOAL=0
F_MIGRATE=0
F_RESTORE=0
F_DRY=0
F_HELP=0
RC_FLAGS=()
RC_REPAIRS=()
RC_NOTES=()
RC_MOVES_FROM=()
RC_MOVES_TO=()
RC_OLD_OK=0
RC_OLD_TEXT=
RC_SIDECAR_OK=0
RC_SIDECAR_GEN=
RC_EV_KEEP=
RC_EV_TORN=0
RC_PG_TAIL=clean
RC_PG_CUT=0
RC_PINS_NEW=
RC_PINS_WRITE=0
RC_GOAL_COPY=0
RC_SIG_CLEAR=0
RC_STATE_WRITE=0
RC_WS_ADD=
RC_WS_BRANCH=
RC_BH_WRITE=
RC_LAST=0
RC_FIRST_START=
RC_LAST_STOP=
RC_STAGE=
RC_RESTORE_FROM=()
RC_RESTORE_TO=()
RC_RESTORE_EXEC=()
RC_REMOVES=()
RC_OLD_TORN=0
RC_OLD_GEN=
RC_EV_BREAK_LINE=
RC_EV_BREAK_WHY=
RC_EV_DROPPED=0
RC_FIRST_IR=
RC_LAST_SEAL=
RC_STATE_REC_LINE=
RC_STATE_REC_GEN=
RC_STATE_REC_SHA=
declare -A O=()
declare -A EVV=()
declare -A EVL=()
declare -A EVR=()
declare -A PGV=()

recover_usage() {
  cat <<'USAGE'
usage: recover.sh [--reset-circuit] [--clear-stall] [--repin-goal] [--restore-pinned] [--migrate] [--dry-run] [LOOP_DIR]
  Rebuilds state.env from the evidence (events.jsonl, progress.md, git commit trailers,
  then the old state.env) and re-seals its sidecar. LOOP_DIR defaults to the directory
  this script lives in.
  --reset-circuit  close an open circuit breaker
  --clear-stall    forget the change signatures (.action-sig.log), so a stalled loop may go on
  --repin-goal     accept the current goal.md as the pinned goal
  --restore-pinned put every changed pinned file back (loop files from .pins/, workspace
                   files from the baseline commit) and remove what appeared since the first
                   run (an agent permission file); every copy goes to the backup first
  --migrate        bring CONTRACT_VERSION to this script's contract version (a 1.0 loop's
                   files are moved by orbit recover --migrate; recover.sh says so)
  --dry-run        print the plan (a diff of state.env and the repairs); write nothing
--repin needs the orbit binary: orbit recover --repin
--prune-candidates needs the orbit binary: orbit recover --prune-candidates
USAGE
}

recover_args() {
  local arg
  for arg in "$@"; do
    case $arg in
      --reset-circuit) F_RESET=1 RC_FLAGS+=("$arg") ;;
      --clear-stall) F_STALL=1 RC_FLAGS+=("$arg") ;;
      --repin-goal) F_GOAL=1 RC_FLAGS+=("$arg") ;;
      --migrate) F_MIGRATE=1 RC_FLAGS+=("$arg") ;;
      --restore-pinned) F_RESTORE=1 RC_FLAGS+=("$arg") ;;
      --dry-run) F_DRY=1 ;;
      -h | --help)
        F_HELP=1
        return 0
        ;;
      --repin | --prune-candidates)
        orbit_die "$EXIT_PREFLIGHT" "$arg needs the orbit binary: run 'orbit recover $arg' (recover.sh does the rebuild, --reset-circuit, --clear-stall, --repin-goal, --restore-pinned and --migrate)"
        ;;
      -*)
        recover_usage >&2
        orbit_die "$EXIT_PREFLIGHT" "unknown option '$arg'"
        ;;
      *)
        if [[ -n $RC_ARG_DIR ]]; then
          orbit_die "$EXIT_PREFLIGHT" "one loop directory at a time (got '$RC_ARG_DIR' and '$arg')"
        fi
        RC_ARG_DIR=$arg
        ;;
    esac
  done
}

# recover_what_v PATH: REPLY says what PATH is when it is there and is not a regular file (a
# symlink, a FIFO, a socket, a device, a directory); empty otherwise. Tests only: nothing is
# opened, so a FIFO never blocks (orbit's fsx::not_regular).
recover_what_v() {
  local p=$1
  REPLY=''
  if [[ -L $p ]]; then
    REPLY="a symlink to $(readlink -- "$p" 2>/dev/null || true)"
  elif [[ -p $p ]]; then
    REPLY='a FIFO (named pipe)'
  elif [[ -S $p ]]; then
    REPLY='a socket'
  elif [[ -c $p ]]; then
    REPLY='a character device'
  elif [[ -b $p ]]; then
    REPLY='a block device'
  elif [[ -d $p ]]; then
    REPLY='a directory'
  elif [[ -e $p && ! -f $p ]]; then
    REPLY='not a regular file'
  fi
}

# recover_refuse_tampered: a FIFO, a socket, a device, a directory or a symlink where a loop file
# (or an iteration's result.env or commit.txt) belongs is a loop_tamper: refused before
# anything is read (orbit recover's refuse_tampered, the same list and words).
recover_refuse_tampered() {
  local f d found=() name
  for f in "${ORBIT_LOOP_FILES[@]}"; do
    recover_what_v "$RC_DIR/$f"
    if [[ -n $REPLY ]]; then found+=("$f is $REPLY"); fi
  done
  for d in "${ORBIT_LOOP_DIRS[@]}"; do
    if [[ -L $RC_DIR/$d || (-e $RC_DIR/$d && ! -d $RC_DIR/$d) ]]; then
      recover_what_v "$RC_DIR/$d"
      found+=("$d is ${REPLY:-not a regular file}")
    fi
  done
  if [[ -d $RC_DIR/iterations && ! -L $RC_DIR/iterations ]]; then
    while IFS= read -r -d '' d; do
      name=${d##*/}
      if [[ -L $d || ! -d $d ]]; then
        recover_what_v "$d"
        found+=("iterations/$name is ${REPLY:-not a regular file}")
        continue
      fi
      for f in result.env commit.txt; do
        recover_what_v "$d/$f"
        if [[ -n $REPLY ]]; then found+=("iterations/$name/$f is $REPLY"); fi
      done
    done < <(find "$RC_DIR/iterations" -mindepth 1 -maxdepth 1 -name '[0-9]*' ! -name '*[!0-9]*' -print0 | LC_ALL=C sort -z)
  fi
  ((${#found[@]} == 0)) && return 0
  local IFS=';'
  f=${found[*]}
  orbit_die "$EXIT_PREFLIGHT" "$RC_DIR: ${f//;/; }: the runner never writes such a file (loop_tamper), and recover reads none of them (a FIFO would block it). Remove $( ((${#found[@]} == 1)) && printf it || printf them), then run recover.sh again (nothing was changed)"
}

# recover_regular_or_die PATH: PATH is a regular file or missing; anything else stops recover.sh
# before it reads it (a pinned workspace file, checked again at its read).
recover_regular_or_die() {
  recover_what_v "$1"
  if [[ -n $REPLY ]]; then
    orbit_die "$EXIT_PREFLIGHT" "$1 is $REPLY, not a regular file: nothing of a loop may be one (loop_tamper), and it is never read; remove it, then orbit recover"
  fi
}

recover_locate() {
  local line
  if [[ -n $RC_ARG_DIR ]]; then
    RC_DIR=$(cd -P -- "$RC_ARG_DIR" 2>/dev/null && pwd -P) ||
      orbit_die "$EXIT_PREFLIGHT" "$RC_ARG_DIR is not a directory: give the loop directory"
  else
    RC_DIR=$(cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
  fi
  [[ -e $RC_DIR/loop.toml || -L $RC_DIR/loop.toml ]] ||
    orbit_die "$EXIT_PREFLIGHT" "$RC_DIR is not a loop directory (no loop.toml): give the directory orbit init created"
  recover_refuse_tampered
  RC_REPO=$(git -C "$RC_DIR" rev-parse --show-toplevel 2>/dev/null) ||
    orbit_die "$EXIT_PREFLIGHT" "$RC_DIR is not inside a git work tree"
  RC_REPO=$(cd -P -- "$RC_REPO" && pwd -P)
  RC_NAME=$LOOP_NAME
  RC_LOOP_CV=$CONTRACT_VERSION_RENDERED
  line=$(grep -m 1 -E '^name = "[A-Za-z0-9._-]+"$' -- "$RC_DIR/loop.toml" || true)
  if [[ -n $line ]]; then
    line=${line#name = \"}
    RC_NAME=${line%\"}
  fi
  line=$(grep -m 1 -E '^contract-version = "[0-9]+\.[0-9]+\.[0-9]+"$' -- "$RC_DIR/loop.toml" || true)
  if [[ -n $line ]]; then
    line=${line#contract-version = \"}
    RC_LOOP_CV=${line%\"}
  fi
  # The workspace as loop.toml gives it (a plain string: no escapes), else the rendered one.
  RC_WS_SETTING=${WORKSPACE_SETTING:-}
  line=$(grep -m 1 -E '^workspace = "[^"\\]*"$' -- "$RC_DIR/loop.toml" || true)
  if [[ -n $line ]]; then
    line=${line#workspace = \"}
    RC_WS_SETTING=${line%\"}
  fi
}

# recover_ws_path_v: REPLY is the workspace loop.toml names, as an absolute path (as the runner
# reads it before its first run): an empty setting is its contract's default.
recover_ws_path_v() {
  local s=$RC_WS_SETTING
  if [[ -z $s ]] && workspace_empty_legacy "$RC_LOOP_CV"; then
    s=.orbit/.workspaces/$RC_NAME
  fi
  workspace_setting_path_v "$s" "$RC_NAME" "$RC_REPO" || orbit_die "$EXIT_PREFLIGHT" "$REPLY"
}
