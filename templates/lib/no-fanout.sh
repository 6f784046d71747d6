# ---- no fan-out (loop.toml candidates = 1): each iteration runs one agent in the
# ---- workspace. Rendered instead of lib/fanout.sh into a loop without candidates: what
# ---- the runner reads of the fan-out, for one agent. The fan-out's own steps
# ---- (fanout_iteration, fanout_budget, fanout_done_prune, and what they read) are
# ---- reached only where FANOUT_N > 1, and are not here.
FANOUT_N=1
# The fan-out's report of an iteration: none without a fan-out (fanout_iteration is never
# called).
declare -A FANOUT_RUN=()

# fanout_settings: one agent: nothing to read from the settings.
fanout_settings() { :; }

# fanout_stop_all: on a signal, no candidates to stop.
fanout_stop_all() { :; }

# fanout_progress_v DIR: REPLY is "": no candidates for progress.md to list.
fanout_progress_v() { REPLY=''; }
