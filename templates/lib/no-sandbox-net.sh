# ---- no network allowlist (sandbox-network = "open", or no sandbox): a run has the network
# ---- as the user has it (contract section 7). Rendered instead of lib/sandbox-net.sh into
# ---- those loops: the same functions the runner calls, doing nothing.

# The command line of a fenced run: none, ever.
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh) after net_fence
NET_ARGV=()

# net_preflight: nothing to check before the run.
net_preflight() { :; }

# net_fence KIND ARRAY: status 1: the run is not fenced (sandbox_prepare builds its argv).
net_fence() { return 1; }

# net_result: nothing refused, nothing recorded.
net_result() { :; }

# net_red_gate_begin / net_red_gate_end: nothing to say of the red gate.
net_red_gate_begin() { :; }
net_red_gate_end() { :; }

# net_cannot_reach_v LINE: status 1: a refused connection is never the sandbox's network.
net_cannot_reach_v() { return 1; }

# net_prompt_note N: nothing for the prompt.
net_prompt_note() { :; }
