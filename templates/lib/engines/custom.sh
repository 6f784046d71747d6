# ---- engine: a custom agent (loop.toml's argv): its output has no form orbit knows, so
# ---- the generic rules hold: deadline_classify_v and deadline_rate_limit_resume_at (lib/runner/deadline.sh)
# ---- classify a run, the last `"total_cost_usd"` it prints is its cost, and nothing is
# ---- asked of it before the run (no version, no credentials it could be asked about).
# ---- Rendered into a custom loop only; every engine's part defines the same functions
# ---- (lib/engine.sh lists them and holds what they share).

# engine_last_message_v LOG: a custom agent's last message cannot be read: REPLY is "".
engine_last_message_v() {
  REPLY=
}

# engine_login_fix_v: REPLY is what a human does about refused or missing credentials.
engine_login_fix_v() {
  REPLY="log the agent's CLI in or set its API key"
}

# engine_retrying_v LOG: whether a custom agent was retrying is not known (status 1).
engine_retrying_v() {
  REPLY=
  return 1
}

# engine_classify_own_v LOG RC TIMED_OUT: a custom agent's output has no form orbit reads:
# status 1, and the generic rules classify the run.
engine_classify_own_v() {
  return 1
}

# engine_cost_v LOG: RUN_COST_M and RUN_COST_KIND by the generic rule: the last
# `"total_cost_usd": N` the agent printed (reported). Status 1 when it printed none.
engine_cost_v() {
  local v
  v=$(grep -aoE '"total_cost_usd" *: *[0-9.eE+-]+' -- "$1" || true)
  # The last one reported; its number.
  v=${v##*$'\n'}
  v=${v##*:}
  v=${v##* }
  if [[ -n $v ]] && RUN_COST_M=$(record_cost_to_micro "$v"); then
    RUN_COST_KIND=$COST_REPORTED
    return 0
  fi
  return 1
}

# engine_preflight: a custom agent has no version or credentials orbit knows how to ask
# about: nothing to check before the run.
engine_preflight() { :; }

# engine_workspace_check: a custom agent names no file of the workspace before the run:
# nothing to check.
engine_workspace_check() { :; }

# engine_workspace_note: nothing of a custom agent's in the workspace to say.
engine_workspace_note() { :; }

# engine_workspace_excludes ARRAY: a custom agent's files at the workspace's root are not
# known: none.
engine_workspace_excludes() { :; }

# engine_after_run: a custom agent leaves nothing in the agent's folder that is not the
# agent's.
engine_after_run() { :; }

# engine_net_hosts: a custom agent's API is unknown: no host (REPLY_HOSTS) but those of
# allow-hosts, no base-URL variable (REPLY_URL_VARS).
# shellcheck disable=SC2034  # read by sandbox_net_allowed_v (lib/sandbox-net.sh), in a fenced loop
engine_net_hosts() {
  REPLY_HOSTS=()
  REPLY_URL_VARS=()
}

# engine_home_paths: a custom agent's state under HOME is not known: in the sandbox all of
# HOME stays read-only for it (REPLY_RW and REPLY_RO empty).
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh), in a sandboxed loop
engine_home_paths() {
  REPLY_RW=()
  REPLY_RO=()
}

# engine_home_held: a custom agent's user-level files are not known: none are held
# (REPLY_HELD empty; the env file is, whatever the engine).
# shellcheck disable=SC2034  # read by home_specs_v (lib/runner/home.sh)
engine_home_held() {
  REPLY_HELD=()
}

# engine_migrate_note: a custom agent written for contract 1.0 wrote done.md in the loop
# directory; under 2.0 it writes it in the agent's folder of the workspace: said once, with
# the migration's message.
engine_migrate_note() {
  orbit_log "note: a custom agent written for contract 1.0 wrote \$ORBIT_LOOP_DIR/done.md; under 2.0 it writes \$ORBIT_AGENT_DIR/done.md (in the workspace)"
}
