# ---- the workspace (contract 1, 3): the loop's own git worktree on orbit/<name>, outside
# ---- the loop directory and, by default, outside the user's checkout: under the user's
# ---- data directory, where no tool that walks up the tree (node's module resolution,
# ---- cargo's .cargo/config.toml, pyproject.toml, direnv) finds the user's own files. The
# ---- user's checkout, its HEAD, index and other branches are never touched: the agent
# ---- works, the checks run and the commits land in the workspace only.

# workspace_setting_path_v SETTING NAME REPO: REPLY is the workspace a loop's `workspace`
# setting names, as an absolute path: relative to the repository root REPO; empty, the
# default (workspace_default_v). Status 1 when the default cannot be told (REPLY says why).
workspace_setting_path_v() {
  local p=$1
  if [[ -z $p ]]; then
    workspace_default_v "$2" "$3" || return 1
    p=$REPLY
  fi
  [[ $p == /* ]] || p=$3/$p
  REPLY=${p%/}
}

# workspace_empty_legacy CONTRACT_VERSION: status 0 when an empty `workspace` in a loop.toml
# of that contract version means .orbit/.workspaces/NAME, the default before 2.4.0 (the
# workspace stays where that loop has it).
workspace_empty_legacy() {
  [[ $1 =~ ^([0-9]+)\.([0-9]+)\. ]] || return 1
  ((10#${BASH_REMATCH[1]} < 2 || (10#${BASH_REMATCH[1]} == 2 && 10#${BASH_REMATCH[2]} < 4)))
}

# workspace_default_v NAME REPO: REPLY is the default workspace of the loop NAME of the
# repository at REPO: $XDG_DATA_HOME/orbit/workspaces/<repo-id>/NAME (XDG_DATA_HOME when
# absolute, else $HOME/.local/share), repo-id the checkout's name (bytes outside
# A-Za-z0-9._- made -), '-' and 12 hex digits of the sha256 of the canonical path of the
# repository's git common directory (src/locate/workspace.rs computes the same). Status 1
# when there is no data directory or no repository (REPLY says what to do).
workspace_default_v() {
  local LC_ALL=C data=${XDG_DATA_HOME:-} common name hash
  if [[ $data != /* ]]; then
    data=${HOME:-}
    if [[ $data != /* ]]; then
      REPLY="neither XDG_DATA_HOME nor HOME names an absolute directory, and the loop's workspace defaults to \$XDG_DATA_HOME/orbit/workspaces: set HOME (or XDG_DATA_HOME), or workspace in loop.toml"
      return 1
    fi
    data=${data%/}/.local/share
  fi
  common=$(git -C "$2" rev-parse --git-common-dir 2>/dev/null) || common=
  [[ -z $common || $common == /* ]] || common=$2/$common
  if [[ -z $common ]] || ! common=$(cd -P -- "$common" 2>/dev/null && pwd -P); then
    REPLY="$2 is not a git repository: the loop's default workspace is named after its git directory"
    return 1
  fi
  name=${common##*/}
  if [[ $name == .git ]]; then
    name=${common%/*}
    name=${name##*/}
  else
    name=${name%.git}
  fi
  name=${name//[^A-Za-z0-9._-]/-}
  hash=$(orbit_sha256_str "$common")
  REPLY=${data%/}/orbit/workspaces/${name:-repo}-${hash:0:12}/$1
}
