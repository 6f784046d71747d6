# ---- engine: opencode (checked against opencode 1.18.33), run as `opencode run --format
# ---- json`: JSON events, `error` with the provider's status and message, `step_finish`
# ---- with its tokens and cost (reported; a model opencode has no price for is priced by
# ---- TOKEN_PRICES).
# ---- Rendered into a loop of this engine only; every engine's part defines the same
# ---- functions (lib/engine.sh lists them and holds what they share).

# engine_opencode_failed_v LOG: REPLY is opencode's last `{"type":"error"}` event when no
# step finished after it (status 1 otherwise).
engine_opencode_failed_v() {
  local last
  last=$(awk 'index($0, "{\"type\":\"error\"") == 1 { e = NR } index($0, "{\"type\":\"step_finish\"") == 1 { f = NR } END { print (e > f) ? "error" : "" }' "$1" 2>/dev/null) || last=
  [[ $last == error ]] || return 1
  engine_last_line_v "$1" '{"type":"error"'
}

# engine_last_message_v LOG: REPLY is the CLI's last message as it printed it ("" when
# there is none that can be read).
engine_last_message_v() {
  local log=$1
  REPLY=
  if engine_opencode_failed_v "$log"; then
    engine_json_str_v "$REPLY" message || true
  elif engine_last_line_v "$log" '{"type":"text"'; then
    engine_json_str_v "${REPLY#*\"part\":}" text || true
  fi
  return 0
}

# engine_login_fix_v: REPLY is what a human does about refused or missing credentials.
engine_login_fix_v() {
  REPLY="run \`opencode auth login\`, set the provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...), or configure a provider and model in ~/.config/opencode/opencode.json"
}

# engine_retrying_v LOG: opencode retries a 429 by itself, silently: nothing says it was
# retrying when the run ended (status 1).
engine_retrying_v() {
  REPLY=
  return 1
}

# opencode (`run --format json`): an `error` event ends a failed run (exit 1) with
# error.name (APIError, ProviderAuthError, ...) and error.data: message, statusCode (the
# provider's HTTP status), isRetryable. It retries a 429 by itself, silently, for about a
# minute and a half before it prints one.
engine_classify_own_v() {
  local log=$1 rc=$2 to=$3 err name status='' msg
  if ((to)); then
    engine_timeout_v "$log"
    return 0
  fi
  if ! engine_opencode_failed_v "$log"; then
    ((rc == 0)) || return 1
    engine_last_line_v "$log" '{"type":"step_finish"' || return 1
    REPLY=$OUTCOME_OK
    return 0
  fi
  err=$REPLY
  engine_json_str_v "${err#*\"error\":}" name || true
  name=$REPLY
  engine_json_str_v "${err#*\"data\":}" message || true
  ENGINE_MESSAGE=$REPLY
  engine_json_scalar_v "${err#*\"data\":}" statusCode && status=$REPLY
  msg=${ENGINE_MESSAGE,,}
  if [[ $status == 401 || $status == 403 || $name == ProviderAuthError || $msg == *"api key"* ]]; then
    engine_auth_fix_v
    ENGINE_FIX=$REPLY
    engine_permanent "the credentials were refused or are missing"
  elif [[ $status == 429 || $msg == *"rate limit"* ]]; then
    engine_rate_limited
  elif [[ $name == ProviderModelNotFoundError || $name == ModelNotFoundError ]]; then
    ENGINE_FIX="name a model the provider serves (\"model\" in ~/.config/opencode/opencode.json, or --model provider/model in loop.toml's argv), then run the loop again"
    engine_permanent "the model was not found"
  else
    REPLY=$OUTCOME_AGENT_ERROR
  fi
  return 0
}

# engine_cost_v LOG: RUN_COST_M and RUN_COST_KIND from opencode's step_finish events
# (reported, or their tokens priced by TOKEN_PRICES: estimated). Status 1 when the output
# holds no cost.
engine_cost_v() {
  local log=$1 in=0 cached=0 out=0 any=0 line
  # Each step_finish event: its cost (USD, by opencode's price table) and tokens. A
  # model opencode knows no price of costs 0 there: its tokens are priced by
  # TOKEN_PRICES (`*`: opencode's events do not name the model), else no cost.
  local usd=0
  while IFS= read -r line; do
    any=1
    engine_json_scalar_v "$line" cost && [[ $REPLY =~ ^[0-9.eE+-]+$ ]] && usd=$(awk -v a="$usd" -v b="$REPLY" 'BEGIN { printf "%.9f", a + b }')
    line=${line#*\"tokens\":}
    engine_json_scalar_v "$line" input && [[ $REPLY =~ ^[0-9]+$ ]] && in=$((in + REPLY))
    engine_json_scalar_v "$line" output && [[ $REPLY =~ ^[0-9]+$ ]] && out=$((out + REPLY))
    engine_json_scalar_v "$line" reasoning && [[ $REPLY =~ ^[0-9]+$ ]] && out=$((out + REPLY))
    engine_json_scalar_v "${line#*\"cache\":}" read && [[ $REPLY =~ ^[0-9]+$ ]] && cached=$((cached + REPLY))
  done < <(grep -a '^{"type":"step_finish"' -- "$log" 2>/dev/null || true)
  ((any)) || return 1
  # opencode counts cached tokens apart from its input: input here counts them too.
  engine_tokens_seen "$((in + cached))" "$out"
  if awk -v u="$usd" 'BEGIN { exit !(u > 0) }'; then
    RUN_COST_M=$(record_cost_to_micro "$usd") || return 1
    RUN_COST_KIND=$COST_REPORTED
  else
    engine_tokens_cost_v '' "$((in + cached))" "$cached" "$out" || return 1
    RUN_COST_M=$REPLY
    RUN_COST_KIND=$COST_ESTIMATED
  fi
  return 0
}

# engine_preflight: records opencode's version (ENGINE_VERSION), sets the permissions and
# switches it runs under in a loop, and stops the run before anything is spent (exit 2,
# with the fix) when no credentials are named anywhere opencode looks.
engine_preflight() {
  local fix
  engine_version_probe
  engine_auth_fix_v
  fix=$REPLY
  # opencode allows every tool unless told: its permissions, merged over every
  # opencode.json, deny every shell command but the loop's checks and web fetches; a
  # variable of the user's own is theirs. No self-update mid-loop.
  if [[ -z ${OPENCODE_PERMISSION:-} ]]; then
    export OPENCODE_PERMISSION='{"bash":{"*":"deny","bash .orbit-agent/verify.sh":"allow"},"webfetch":"deny"}'
  else
    orbit_log "opencode: OPENCODE_PERMISSION is set in the environment: its permissions are used, not orbit's"
  fi
  export OPENCODE_DISABLE_AUTOUPDATE=true
  # The workspace is the agent's: an opencode.json, a plugin or an agent it writes there
  # would steer its next run (another provider, commands allowed, code loaded). opencode
  # reads no project configuration (nor the project's AGENTS.md) under this variable;
  # the user's own lives in their home, or in a file named by OPENCODE_CONFIG outside
  # the workspace.
  export OPENCODE_DISABLE_PROJECT_CONFIG=true
  local ocfg=${XDG_CONFIG_HOME:-${HOME:-}/.config}/opencode odata=${XDG_DATA_HOME:-${HOME:-}/.local/share}/opencode
  if [[ -z ${ANTHROPIC_API_KEY:-}${OPENAI_API_KEY:-}${GEMINI_API_KEY:-}${GOOGLE_GENERATIVE_AI_API_KEY:-}${OPENROUTER_API_KEY:-}${OPENCODE_API_KEY:-}${GROQ_API_KEY:-}${DEEPSEEK_API_KEY:-}${XAI_API_KEY:-}${MISTRAL_API_KEY:-}${AWS_ACCESS_KEY_ID:-}${AWS_PROFILE:-}${OPENCODE_CONFIG:-}${OPENCODE_CONFIG_CONTENT:-}${OPENCODE_AUTH_CONTENT:-} &&
    ! -s $odata/auth.json ]] &&
    ! grep -qsE '"(provider|model)"' -- "$ocfg/opencode.json" "$ocfg/opencode.jsonc" "$ocfg/config.json" &&
    [[ " ${AGENT_ARGV[*]} " != *" --model"* && " ${AGENT_ARGV[*]} " != *" -m "* ]]; then
    preflight_fail "opencode: no credentials (no provider key, no \`opencode auth login\` in $odata, no provider or model in opencode.json): $fix"
  fi
}

# engine_workspace_check: opencode reads no project configuration in a loop (see
# engine_preflight): a configuration file the user names that lies in the workspace (known
# once the state is loaded), which the agent writes, is refused.
engine_workspace_check() {
  local v p d
  for v in OPENCODE_CONFIG OPENCODE_CONFIG_DIR; do
    [[ -n ${!v:-} ]] || continue
    # opencode resolves a relative path from its working directory: the workspace.
    p=${!v}
    [[ $p == /* ]] || p=$WS/$p
    if d=$(cd -P -- "${p%/*}/" 2>/dev/null && pwd -P); then
      p=$d/${p##*/}
    fi
    if [[ $p == "$WS" || $p == "$WS"/* ]]; then
      preflight_fail "opencode: $v (${!v}) is in the loop's workspace, which the agent can write: move it outside (e.g. to ~/.config/opencode/) and name that in the loop's env file"
    fi
  done
}

# engine_workspace_note: once the workspace is there, says of an opencode configuration in
# it that opencode does not read it, with where the user's own goes.
engine_workspace_note() {
  if [[ -e $WS/opencode.json || -e $WS/opencode.jsonc || -d $WS/.opencode ]]; then
    orbit_log "opencode: the workspace's opencode.json and .opencode/ are not read (the agent could rewrite them): put the provider and model in ~/.config/opencode/opencode.json, or in a file outside the workspace named by OPENCODE_CONFIG"
  fi
}

# engine_workspace_excludes ARRAY: opencode keeps nothing of its own at the workspace's root.
engine_workspace_excludes() { :; }

# engine_after_run: opencode leaves nothing in the agent's folder that is not the agent's.
engine_after_run() { :; }

# engine_net_hosts: REPLY_HOSTS, the HOST:PORT words opencode's runs reach under the sandbox's
# network allowlist: its providers' APIs (Anthropic with its OAuth refresh, OpenAI, OpenRouter,
# opencode's own), and its model catalogue (models.dev); REPLY_URL_VARS, the variables
# whose URL's host is its API when set, and REPLY_URL_FILES, its user-level configuration,
# whose providers' baseURL hosts are (lib/sandbox-net.sh allows them too; never the
# workspace's opencode.json, which the agent writes).
# shellcheck disable=SC2034  # read by sandbox_net_allowed_v (lib/sandbox-net.sh), in a fenced loop
engine_net_hosts() {
  REPLY_HOSTS=(api.anthropic.com:443 api.openai.com:443 console.anthropic.com:443 opencode.ai:443 models.dev:443 openrouter.ai:443)
  REPLY_URL_VARS=(ANTHROPIC_BASE_URL OPENAI_BASE_URL)
  # The files the home record holds (engine_home_held), never others.
  local c=${HOME:-/nonexistent}/.config/opencode
  REPLY_URL_FILES=("$c/opencode.json" "$c/opencode.jsonc" "$c/config.json")
}

# engine_home_paths: REPLY_RW, opencode's state under HOME that stays writable in the sandbox
# (its credentials and sessions must persist), and REPLY_SCRATCH, its settings directory:
# opencode writes its first settings there when they are missing, so the sandbox shows it a
# fresh writable directory each run, the files already there read-only in it (nothing it
# writes there reaches a later run).
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh), in a sandboxed loop
engine_home_paths() {
  # Its sessions and credentials, its caches and state.
  REPLY_RW=(.local/share/opencode/ .cache/opencode/ .local/state/opencode/)
  REPLY_RO=()
  REPLY_SCRATCH=(.config/opencode)
}

# engine_home_held: REPLY_HELD, opencode's user-level files under HOME that name commands,
# permissions, servers, plugins or agents, as `KIND PATH [KEYS]` words (lib/runner/home.sh
# holds them from the loop's first run): its global configuration files and its plugins,
# agents, commands, modes and tools (not the packages it installs there for its plugins).
# shellcheck disable=SC2034  # read by home_specs_v (lib/runner/home.sh)
engine_home_held() {
  REPLY_HELD=(
    'file .config/opencode/opencode.json'
    'file .config/opencode/opencode.jsonc'
    'file .config/opencode/config.json'
    'dir .config/opencode/plugin'
    'dir .config/opencode/plugins'
    'dir .config/opencode/agent'
    'dir .config/opencode/agents'
    'dir .config/opencode/command'
    'dir .config/opencode/commands'
    'dir .config/opencode/mode'
    'dir .config/opencode/modes'
    'dir .config/opencode/tool'
    'dir .config/opencode/tools'
  )
}

# engine_migrate_note: what a loop of opencode written under contract 1.0 is told besides
# `orbit recover --migrate`: nothing.
engine_migrate_note() { :; }
