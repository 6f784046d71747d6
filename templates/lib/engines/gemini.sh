# ---- engine: Gemini CLI (checked against gemini-cli 0.61.0), run with `--output-format
# ---- json`: one closing JSON object (response, stats, or error with its message and
# ---- code); its retry notes on stderr. Tokens, priced by TOKEN_PRICES (estimated).
# ---- Rendered into a loop of this engine only; every engine's part defines the same
# ---- functions (lib/engine.sh lists them and holds what they share).

# engine_gemini_block_v LOG: REPLY is gemini's closing JSON object (`--output-format
# json`): from the last line that is only `{` to the end. Status 1 when there is none.
engine_gemini_block_v() {
  REPLY=$(awk '/^\{$/ { buf = ""; on = 1 } on { buf = buf $0 "\n" } END { printf "%s", buf }' "$1" 2>/dev/null) || true
  [[ -n $REPLY ]]
}

# engine_last_message_v LOG: REPLY is the CLI's last message as it printed it ("" when
# there is none that can be read).
engine_last_message_v() {
  local log=$1
  REPLY=
  if engine_gemini_block_v "$log"; then
    local block=$REPLY
    engine_json_str_v "$block" message || engine_json_str_v "$block" response || true
  fi
  return 0
}

# engine_login_fix_v: REPLY is what a human does about refused or missing credentials.
engine_login_fix_v() {
  REPLY="set GEMINI_API_KEY (or GOOGLE_API_KEY with GOOGLE_GENAI_USE_VERTEXAI=true), or run \`gemini\` once in a terminal to log in"
}

# engine_retrying_v LOG: whether gemini was retrying a 429 when the run ended. REPLY is
# "": it names no delay.
engine_retrying_v() {
  REPLY=
  # Its retry notes on stderr: "Attempt N failed with status 429. Retrying ...".
  engine_last_line_v "$1" 'Attempt ' || return 1
  [[ $REPLY =~ ^Attempt\ [0-9]+\ failed\ with\ status\ 429\. ]] || return 1
  REPLY=
  return 0
}

# Gemini CLI (`--output-format json`): exit 41 = no usable credentials, 55 = the folder
# is not trusted, 52 = its configuration; an error prints {"error":{"message","code"}}.
engine_classify_own_v() {
  local log=$1 rc=$2 to=$3 block='' code='' msg
  if ((to)); then
    engine_timeout_v "$log"
    return 0
  fi
  if engine_gemini_block_v "$log"; then
    block=$REPLY
  fi
  if [[ $block == *'"error": {'* ]]; then
    engine_json_str_v "${block#*\"error\": \{}" message || true
    ENGINE_MESSAGE=$REPLY
    engine_json_scalar_v "${block#*\"error\": \{}" code || true
    code=$REPLY
    # The API's own error, as JSON inside the message: its message.
    if [[ $ENGINE_MESSAGE == '{'* ]] && engine_json_str_v "$ENGINE_MESSAGE" message; then
      ENGINE_MESSAGE=$REPLY
    fi
  fi
  if ((rc == 55)); then
    [[ -n $ENGINE_MESSAGE ]] || ENGINE_MESSAGE="Gemini CLI is not running in a trusted directory"
    ENGINE_FIX="gemini: trust the workspace: keep --skip-trust in loop.toml's argv (orbit's default), or set GEMINI_CLI_TRUST_WORKSPACE=true in the loop's environment"
    engine_permanent "the workspace is not a trusted folder"
    return 0
  fi
  if ((rc == 0)) && [[ -z $code ]]; then
    [[ $block == *'"response":'* ]] || return 1
    REPLY=$OUTCOME_OK
    return 0
  fi
  msg=${ENGINE_MESSAGE,,}
  if ((rc == 41)) || [[ $code == 41 || $code == 401 || $code == 403 ]]; then
    engine_auth_fix_v
    ENGINE_FIX=$REPLY
    engine_permanent "the credentials were refused or are missing"
  elif ((rc == 52)) || [[ $code == 52 ]]; then
    ENGINE_FIX="fix gemini's settings (~/.gemini/settings.json, .gemini/settings.json), then run the loop again"
    engine_permanent "its configuration is invalid"
  elif [[ $code == 429 || $msg == *"exhausted your capacity"* || $msg == *"resource has been exhausted"* ||
    $msg == *"daily quota"* || $msg == *"quota exceeded"* || $msg == *"rate limit"* ]]; then
    engine_rate_limited
  elif [[ -n $code ]]; then
    REPLY=$OUTCOME_AGENT_ERROR
  else
    return 1
  fi
  return 0
}

# engine_cost_v LOG: RUN_COST_M and RUN_COST_KIND from gemini's stats.models.*.tokens,
# each model priced by TOKEN_PRICES (estimated). Status 1 when the output holds no cost.
engine_cost_v() {
  local log=$1 v in=0 cached=0 out=0 model total=0 any=0 priced=1 ins=0 outs=0
  engine_gemini_block_v "$log" || return 1
  # Per model (6 spaces in, under "models"), its "tokens" object (8 spaces in).
  while read -r model v in cached out; do
    [[ $in =~ ^[0-9]+$ && $cached =~ ^[0-9]+$ && $out =~ ^[0-9]+$ ]] || continue
    any=1 ins=$((ins + in)) outs=$((outs + out))
    if ((priced)) && engine_tokens_cost_v "$model" "$in" "$cached" "$out"; then
      total=$((total + REPLY))
    else
      priced=0
    fi
  done < <(awk '
    /^    "models": \{/ { inm = 1; next }
    inm && /^    \}/ { inm = 0 }
    inm && /^      "[^"]+": \{$/ { m = $1; gsub(/[":]/, "", m); next }
    inm && /^        "tokens": \{$/ { tk = 1; p = 0; c = 0; o = 0; next }
    tk && /^          "prompt": / { v = $2; sub(/,/, "", v); p = v }
    tk && /^          "cached": / { v = $2; sub(/,/, "", v); c = v }
    tk && /^          "(candidates|thoughts)": / { v = $2; sub(/,/, "", v); o += v }
    tk && /^        \}/ { tk = 0; print m, "tokens", p, c, o }
  ' <<<"$REPLY")
  ((any)) || return 1
  engine_tokens_seen "$ins" "$outs"
  ((priced)) || return 1
  RUN_COST_M=$total
  RUN_COST_KIND=$COST_ESTIMATED
  return 0
}

# engine_preflight: records gemini's version (ENGINE_VERSION) and stops the run before
# anything is spent (exit 2, with the fix) when nothing in the environment or its settings
# names a credential (gemini has no status to probe).
engine_preflight() {
  local fix
  engine_version_probe
  engine_auth_fix_v
  fix=$REPLY
  local settings=${GEMINI_CLI_HOME:-${HOME:-}}/.gemini
  if [[ -z ${GEMINI_API_KEY:-}${GOOGLE_API_KEY:-}${GOOGLE_GEMINI_BASE_URL:-}${GOOGLE_CLOUD_PROJECT:-} &&
    ${GOOGLE_GENAI_USE_VERTEXAI:-} != true && ${GOOGLE_GENAI_USE_GCA:-} != true && ${CLOUD_SHELL:-} != true &&
    ${GEMINI_CLI_USE_COMPUTE_ADC:-} != true ]] &&
    ! grep -qs '"selectedType"' -- "$settings/settings.json" &&
    [[ ! -s $settings/oauth_creds.json && ! -s $settings/.env && ! -s ${HOME:-/nonexistent}/.env ]]; then
    preflight_fail "gemini: no credentials (no GEMINI_API_KEY, no login in $settings): $fix"
  fi
}

# engine_workspace_check: gemini names no file of the workspace before the run: nothing to
# check.
engine_workspace_check() { :; }

# engine_workspace_note: nothing of gemini's in the workspace to say.
engine_workspace_note() { :; }

# engine_workspace_excludes ARRAY: gemini keeps nothing of its own at the workspace's root.
engine_workspace_excludes() { :; }

# engine_after_run: gemini leaves nothing in the agent's folder that is not the agent's.
engine_after_run() { :; }

# engine_net_hosts: REPLY_HOSTS, the HOST:PORT words gemini's runs reach under the sandbox's
# network allowlist: the Gemini API with a key; with a Google login, Code Assist (cloudcode-pa) and
# its token refresh and user info (oauth2, accounts, www.googleapis.com); Vertex AI's global
# endpoint (a regional one is an allow-hosts entry); and REPLY_URL_VARS, the variables whose URL's host is
# its API when set (lib/sandbox-net.sh allows them too).
# shellcheck disable=SC2034  # read by sandbox_net_allowed_v (lib/sandbox-net.sh), in a fenced loop
engine_net_hosts() {
  REPLY_HOSTS=(generativelanguage.googleapis.com:443 cloudcode-pa.googleapis.com:443 oauth2.googleapis.com:443 accounts.google.com:443 www.googleapis.com:443 aiplatform.googleapis.com:443)
  REPLY_URL_VARS=(GOOGLE_GEMINI_BASE_URL GOOGLE_VERTEX_BASE_URL)
}

# engine_home_paths: REPLY_RW, gemini's state under HOME that stays writable in the sandbox
# (its credentials and sessions must persist), and REPLY_RO, its files there that name
# commands or standing instructions for its later runs outside the loop (read-only, where
# they exist).
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh), in a sandboxed loop
engine_home_paths() {
  REPLY_RW=(.gemini/)
  REPLY_RO=(.gemini/settings.json .gemini/GEMINI.md)
}

# engine_home_held: REPLY_HELD, gemini's user-level files under HOME that name commands,
# permissions, hooks, servers, skills or agents, as `KIND PATH [KEYS]` words (lib/runner/
# home.sh holds them from the loop's first run): its settings (tools, MCP servers, hooks),
# the folders it trusts, the .env files it loads, its extensions, commands, skills, agents
# and policies.
# shellcheck disable=SC2034  # read by home_specs_v (lib/runner/home.sh)
engine_home_held() {
  REPLY_HELD=(
    'file .gemini/settings.json'
    'file .gemini/trustedFolders.json'
    'file .gemini/.env'
    'file .env'
    'dir .gemini/extensions'
    'dir .gemini/commands'
    'dir .gemini/skills'
    'dir .gemini/agents'
    'dir .gemini/policies'
  )
}

# engine_migrate_note: what a loop of gemini written under contract 1.0 is told besides
# `orbit recover --migrate`: nothing.
engine_migrate_note() { :; }
