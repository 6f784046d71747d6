# ---- engine: Qwen Code (checked against qwen-code 0.24.4, a fork of gemini-cli), run with
# ---- `--output-format stream-json`: one JSON event per line as claude's, the last one its
# ---- result object (is_error, result, error.message, usage). Tokens, priced by
# ---- TOKEN_PRICES (estimated).
# ---- Rendered into a loop of this engine only; every engine's part defines the same
# ---- functions (lib/engine.sh lists them and holds what they share).

# engine_last_message_v LOG: REPLY is the CLI's last message as it printed it ("" when
# there is none that can be read).
engine_last_message_v() {
  local log=$1
  REPLY=
  if engine_last_line_v "$log" '{"type":"result"'; then
    local result=$REPLY
    engine_json_str_v "$result" result || engine_json_str_v "${result#*\"error\":\{}" message || true
  fi
  return 0
}

# engine_login_fix_v: REPLY is what a human does about refused or missing credentials.
engine_login_fix_v() {
  REPLY="set OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL for an OpenAI-compatible provider (or configure one in ~/.qwen/settings.json, security.auth and modelProviders)"
}

# engine_retrying_v LOG: qwen retries a 429 by itself, silently: nothing says it was
# retrying when the run ended (status 1).
engine_retrying_v() {
  REPLY=
  return 1
}

# Qwen Code (`--output-format stream-json`): the last line is the result object, as
# claude's: is_error, result (the answer), error.message (the failure, the provider's own
# words after "[API Error: STATUS"). A quota qwen knows names its reset ("Quota exhausted:
# ... will reset ..."); it retries other 429s by itself, silently, until it gives up.
engine_classify_own_v() {
  local log=$1 rc=$2 to=$3 line msg status=''
  if ((to)); then
    engine_timeout_v "$log"
    return 0
  fi
  engine_last_line_v "$log" '{"type":"result"' || return 1
  line=$REPLY
  engine_json_scalar_v "$line" is_error || true
  if [[ $REPLY != true ]]; then
    ((rc == 0)) || return 1
    engine_json_str_v "$line" result || true
    ENGINE_MESSAGE=$REPLY
    REPLY=$OUTCOME_OK
    return 0
  fi
  if [[ $line == *'"error":{'* ]]; then
    engine_json_str_v "${line#*\"error\":\{}" message || true
  else
    engine_json_str_v "$line" result || true
  fi
  ENGINE_MESSAGE=$REPLY
  msg=${REPLY,,}
  if [[ $ENGINE_MESSAGE =~ ^\[API\ Error:\ ([1-5][0-9][0-9])\  ]]; then
    status=${BASH_REMATCH[1]}
  fi
  if [[ $status == 401 || $status == 403 || $msg == "no auth type is selected"* || $msg == "missing api key"* ||
    $msg == *"environment variable not found"* || $msg == *"invalid api key"* || $msg == *"incorrect api key"* ||
    $msg == *"invalid_api_key"* || $msg == "qwen oauth free tier"* || $msg == "invalid auth method"* ]]; then
    engine_auth_fix_v
    ENGINE_FIX=$REPLY
    engine_permanent "the credentials were refused or are missing"
  elif [[ $msg == "quota exhausted:"* ]]; then
    engine_rate_limited
  elif [[ $msg == *"insufficient_quota"* || $msg == *"check your plan and billing"* ]]; then
    ENGINE_FIX="add credits or raise the quota of the provider's account, then run the loop again"
    engine_permanent "the account's quota is used up"
  elif [[ $status == 429 || $msg == *"rate limit"* ]]; then
    engine_rate_limited
  else
    REPLY=$OUTCOME_AGENT_ERROR
  fi
  return 0
}

# engine_cost_v LOG: RUN_COST_M and RUN_COST_KIND from qwen's result usage, priced by
# TOKEN_PRICES for the model its init event names (estimated). Status 1 when the output
# holds no cost.
engine_cost_v() {
  local log=$1 in=0 cached=0 out=0 model line
  engine_model_seen "$log"
  engine_last_line_v "$log" '{"type":"result"' || return 1
  line=${REPLY#*\"usage\":\{}
  [[ $line != "$REPLY" ]] || return 1
  line=${line%%\}*}
  engine_json_scalar_v "$line" input_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && in=$REPLY
  engine_json_scalar_v "$line" cache_read_input_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && cached=$REPLY
  engine_json_scalar_v "$line" output_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && out=$REPLY
  ((in + out > 0)) || return 1
  engine_tokens_seen "$in" "$out"
  model=
  if engine_last_line_v "$log" '{"type":"system","subtype":"init"'; then
    engine_json_str_v "$REPLY" model && model=$REPLY
  fi
  engine_tokens_cost_v "$model" "$in" "$cached" "$out" || return 1
  RUN_COST_M=$REPLY
  RUN_COST_KIND=$COST_ESTIMATED
  return 0
}

# engine_preflight: records qwen's version (ENGINE_VERSION) and stops the run before
# anything is spent (exit 2, with the fix) when nothing in the environment, its settings or
# the argv names a credential (qwen has no status to probe).
engine_preflight() {
  local fix
  engine_version_probe
  engine_auth_fix_v
  fix=$REPLY
  # qwen reads a key from its environment (OPENAI_*, ANTHROPIC_*, GEMINI_*, GOOGLE_*),
  # its settings (security.auth, modelProviders) or a .env file; a key in the argv counts.
  local qdir=${QWEN_HOME:-${HOME:-}/.qwen}
  if [[ -z ${OPENAI_API_KEY:-}${ANTHROPIC_API_KEY:-}${GEMINI_API_KEY:-}${GOOGLE_API_KEY:-}${GOOGLE_CLOUD_PROJECT:-}${DASHSCOPE_API_KEY:-}${QWEN_OAUTH:-} ]] &&
    ! grep -qsE '"(apiKey|envKey|selectedType)"' -- "$qdir/settings.json" &&
    [[ ! -s $qdir/.env && ! -s ${HOME:-/nonexistent}/.env && " ${AGENT_ARGV[*]} " != *" --openai-api-key"* ]]; then
    preflight_fail "qwen: no credentials (no OPENAI_API_KEY, no provider in $qdir/settings.json): $fix"
  fi
}

# engine_workspace_check: qwen names no file of the workspace before the run: nothing to
# check.
engine_workspace_check() { :; }

# engine_workspace_note: nothing of qwen's in the workspace to say.
engine_workspace_note() { :; }

# engine_workspace_excludes ARRAY: qwen keeps nothing of its own at the workspace's root.
engine_workspace_excludes() { :; }

# engine_after_run: qwen leaves nothing in the agent's folder that is not the agent's.
engine_after_run() { :; }

# engine_net_hosts: REPLY_HOSTS, the HOST:PORT words qwen's runs reach under the sandbox's
# network allowlist: Qwen OAuth's device login and token refresh (chat.qwen.ai) and its API
# (portal.qwen.ai); DashScope's OpenAI-compatible API; and REPLY_URL_VARS, the variables whose URL's host is
# its API when set (lib/sandbox-net.sh allows them too).
# shellcheck disable=SC2034  # read by sandbox_net_allowed_v (lib/sandbox-net.sh), in a fenced loop
engine_net_hosts() {
  REPLY_HOSTS=(chat.qwen.ai:443 portal.qwen.ai:443 dashscope.aliyuncs.com:443 dashscope-intl.aliyuncs.com:443)
  REPLY_URL_VARS=(OPENAI_BASE_URL)
}

# engine_home_paths: REPLY_RW, qwen's state under HOME that stays writable in the sandbox
# (its credentials and sessions must persist), and REPLY_RO, its files there that name
# commands or standing instructions for its later runs outside the loop (read-only, where
# they exist).
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh), in a sandboxed loop
engine_home_paths() {
  REPLY_RW=(.qwen/)
  REPLY_RO=(.qwen/settings.json .qwen/QWEN.md .qwen/.env)
}

# engine_home_held: REPLY_HELD, qwen's user-level files under HOME that name commands,
# permissions, hooks, servers, skills or agents, as `KIND PATH [KEYS]` words (lib/runner/
# home.sh holds them from the loop's first run): its settings (tools, MCP servers, hooks),
# the folders it trusts, the .env files it loads, its extensions, commands, skills and
# agents (not extensions/extension-enablement.json, which qwen writes at its first start:
# an extension it could enable is held, as a directory beside it).
# shellcheck disable=SC2034  # read by home_specs_v (lib/runner/home.sh)
engine_home_held() {
  REPLY_HELD=(
    'file .qwen/settings.json'
    'file .qwen/trustedFolders.json'
    'file .qwen/.env'
    'file .env'
    'dir .qwen/extensions extension-enablement.json'
    'dir .qwen/commands'
    'dir .qwen/skills'
    'dir .qwen/agents'
  )
}

# engine_migrate_note: what a loop of qwen written under contract 1.0 is told besides
# `orbit recover --migrate`: nothing.
engine_migrate_note() { :; }
