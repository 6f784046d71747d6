# ---- the workspace (contract 1, 3): the loop's own git worktree on orbit/<name>, outside
# ---- the loop directory. The user's checkout, its HEAD, index and other branches are never
# ---- touched: the agent works, the checks run and the commits land in the workspace only.

# workspace_setting_path_v SETTING NAME REPO: REPLY is the workspace a loop's `workspace`
# setting names, as an absolute path: relative to the repository root REPO; empty, the
# default .orbit/.workspaces/NAME.
workspace_setting_path_v() {
  local p=${1:-.orbit/.workspaces/$2}
  [[ $p == /* ]] || p=$3/$p
  REPLY=${p%/}
}
