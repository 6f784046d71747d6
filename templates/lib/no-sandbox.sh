# ---- no sandbox (loop.toml sandbox = "none"): the agent and check runs start as they are,
# ---- and a write the loop forbids is caught after the run (contract section 7). Rendered
# ---- instead of lib/sandbox.sh into a loop without one: the same functions the runner
# ---- calls, doing nothing.

# The command line the next run is prefixed with: none, ever.
SANDBOX_ARGV=()

# sandbox_on: status 1: no run is sandboxed.
sandbox_on() { return 1; }

# sandbox_preflight: nothing to check before the run.
sandbox_preflight() { :; }

# sandbox_hides_v PATH: status 1: no run is sandboxed, nothing is hidden from it.
sandbox_hides_v() { return 1; }

# sandbox_prepare KIND: the next run starts as it is (SANDBOX_ARGV stays empty).
sandbox_prepare() { :; }
