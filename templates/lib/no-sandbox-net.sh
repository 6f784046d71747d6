# ---- no network allowlist (sandbox-network = "open", or no sandbox): a run has the network
# ---- as the user has it (contract section 7). Rendered instead of lib/sandbox-net.sh into
# ---- those loops: the same functions the runner calls, doing nothing.

# The command line of a fenced run: none, ever.
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh) after sandbox_net_fence
NET_ARGV=()

# sandbox_net_preflight: nothing to check before the run.
sandbox_net_preflight() { :; }

# sandbox_net_fence KIND ARRAY: status 1: the run is not fenced (sandbox_prepare builds its argv).
sandbox_net_fence() { return 1; }

# sandbox_net_result: nothing refused, nothing recorded.
sandbox_net_result() { :; }

# sandbox_net_red_gate_begin / sandbox_net_red_gate_end: nothing to say of the red gate.
sandbox_net_red_gate_begin() { :; }
sandbox_net_red_gate_end() { :; }

# sandbox_net_cannot_reach_v LINE: status 1: a refused connection is never the sandbox's network.
sandbox_net_cannot_reach_v() { return 1; }

# sandbox_net_prompt_note N: nothing for the prompt.
sandbox_net_prompt_note() { :; }
