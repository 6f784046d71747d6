# ---- engine: Claude Code (checked against claude-code 2.1.197), run as `claude -p
# ---- --output-format stream-json --verbose`: one JSON event per line, the last one its
# ---- result object (is_error, api_error_status, result, total_cost_usd): the cost is
# ---- reported.
# ---- Rendered into a loop of this engine only; every engine's part defines the same
# ---- functions (lib/engine.sh lists them and holds what they share).

# engine_last_message_v LOG: REPLY is the CLI's last message as it printed it ("" when
# there is none that can be read).
engine_last_message_v() {
  local log=$1
  REPLY=
  if engine_last_line_v "$log" '{"type":"result"'; then
    engine_json_str_v "$REPLY" result || true
  fi
  return 0
}

# engine_login_fix_v: REPLY is what a human does about refused or missing credentials.
engine_login_fix_v() {
  REPLY="run \`claude /login\` (or \`claude setup-token\`) or set ANTHROPIC_API_KEY"
}

# engine_retrying_v LOG: whether claude was retrying a 429 when the run ended (its
# stream-json `api_retry` event with error_status 429, or the error rate_limit). REPLY is
# the retry delay in seconds when it named one.
engine_retrying_v() {
  local line
  REPLY=
  engine_last_line_v "$1" '{"type":"system","subtype":"api_retry"' || return 1
  line=$REPLY
  engine_json_scalar_v "$line" error_status || true
  if [[ $REPLY != 429 ]]; then
    engine_json_str_v "$line" error || true
    # claude's own word for the kind (quoted: the CLI's vocabulary, not the contract's).
    [[ $REPLY == 'rate_limit' ]] || return 1
  fi
  engine_json_scalar_v "$line" retry_delay_ms || true
  if [[ $REPLY =~ ^[0-9]+$ ]]; then
    REPLY=$(((REPLY + 999) / 1000))
  else
    REPLY=
  fi
  return 0
}

# Claude Code (`-p --output-format stream-json`): the last line is the result object:
# is_error, api_error_status, result (the message); the assistant message before it names
# the error kind (authentication_failed, rate_limit, billing_error, ...).
engine_classify_own_v() {
  local log=$1 rc=$2 to=$3 line status kind=''
  if ((to)); then
    engine_timeout_v "$log"
    return 0
  fi
  engine_last_line_v "$log" '{"type":"result"' || return 1
  line=$REPLY
  engine_json_str_v "$line" result || true
  ENGINE_MESSAGE=$REPLY
  engine_json_scalar_v "$line" is_error || true
  if [[ $REPLY != true ]]; then
    ((rc == 0)) || return 1
    REPLY=$OUTCOME_OK
    return 0
  fi
  engine_json_scalar_v "$line" api_error_status || true
  status=$REPLY
  if engine_last_line_v "$log" '{"type":"assistant"'; then
    local said=$REPLY
    engine_json_str_v "${said##*\"parent_tool_use_id\"}" error && kind=$REPLY
  fi
  if [[ $status == 401 || $status == 403 || $kind == authentication_failed || $kind == oauth_org_not_allowed ||
    $ENGINE_MESSAGE == "Not logged in"* || $ENGINE_MESSAGE == "Invalid API key"* ]]; then
    engine_auth_fix_v
    ENGINE_FIX=$REPLY
    engine_permanent "the credentials were refused or are missing"
  elif [[ $status == 429 || $kind == 'rate_limit' || $ENGINE_MESSAGE == "You've hit your"* ]]; then
    engine_rate_limited
  elif [[ $kind == billing_error || $ENGINE_MESSAGE == *"Credit balance is too low"* ]]; then
    ENGINE_FIX="add credits to the account or switch the key, then run the loop again"
    engine_permanent "the account cannot pay for the run"
  else
    REPLY=$OUTCOME_AGENT_ERROR
  fi
  return 0
}

# engine_cost_v LOG: RUN_COST_M and RUN_COST_KIND from claude's result line
# (total_cost_usd, reported). Status 1 when the output holds no cost.
engine_cost_v() {
  local log=$1 line u in=0 out=0 k
  engine_model_seen "$log"
  engine_last_line_v "$log" '{"type":"result"' || return 1
  line=$REPLY
  # Its usage object: input counts what was read from and written to the prompt cache too.
  u=${line#*\"usage\":\{}
  if [[ $u != "$line" ]]; then
    u=${u%%\}*}
    for k in input_tokens cache_creation_input_tokens cache_read_input_tokens; do
      engine_json_scalar_v "$u" "$k" && [[ $REPLY =~ ^[0-9]+$ ]] && in=$((in + REPLY))
    done
    if engine_json_scalar_v "$u" output_tokens && [[ $REPLY =~ ^[0-9]+$ ]]; then
      out=$REPLY
      engine_tokens_seen "$in" "$out"
    fi
  fi
  engine_json_scalar_v "$line" total_cost_usd || return 1
  RUN_COST_M=$(record_cost_to_micro "$REPLY") || return 1
  RUN_COST_KIND=$COST_REPORTED
  return 0
}

# engine_preflight: records claude's version (ENGINE_VERSION) and stops the run before
# anything is spent (exit 2, with the fix) when `claude auth status` says it is not logged
# in. A probe that does not answer in time stops the run too: a CLI that hangs on its own
# status would hang every run.
engine_preflight() {
  local fix
  engine_version_probe
  engine_auth_fix_v
  fix=$REPLY
  engine_probe_v "$ENGINE_PROBE_LIMIT" auth status
  if ((ENGINE_PROBE_TIMED_OUT)); then
    preflight_fail "claude: \`claude auth status\` did not answer within ${ENGINE_PROBE_LIMIT}s: check the CLI in a terminal"
  fi
  if ((ENGINE_PROBE_RC != 0)) && [[ $REPLY =~ \"loggedIn\":\ ?false ]]; then
    preflight_fail "claude: not logged in (\`claude auth status\`): $fix"
  fi
}

# engine_workspace_check: claude names no file of the workspace before the run: nothing to
# check.
engine_workspace_check() { :; }

# engine_workspace_note: nothing of claude's in the workspace to say.
engine_workspace_note() { :; }

# engine_workspace_excludes ARRAY: claude keeps nothing of its own at the workspace's root.
engine_workspace_excludes() { :; }

# engine_after_run: claude leaves nothing in the agent's folder that is not the agent's.
engine_after_run() { :; }

# engine_net_hosts: REPLY_HOSTS, the HOST:PORT words claude's runs reach under the sandbox's
# network allowlist: the Messages API; its OAuth login and token refresh (console.anthropic.com,
# platform.claude.com, claude.ai); and REPLY_URL_VARS, the variables whose URL's host is
# its API when set (lib/sandbox-net.sh allows them too).
# shellcheck disable=SC2034  # read by sandbox_net_allowed_v (lib/sandbox-net.sh), in a fenced loop
engine_net_hosts() {
  REPLY_HOSTS=(api.anthropic.com:443 console.anthropic.com:443 platform.claude.com:443 claude.ai:443)
  REPLY_URL_VARS=(ANTHROPIC_BASE_URL)
}

# engine_home_paths: REPLY_RW, claude's state under HOME that stays writable in the sandbox
# (its credentials and sessions must persist), and REPLY_RO, its files there that name
# commands or standing instructions for its later runs outside the loop (read-only, where
# they exist).
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh), in a sandboxed loop
engine_home_paths() {
  # Its state, sessions and credentials; ~/.claude.json is rewritten in place where
  # a read-only HOME refuses its atomic rename; the version locks.
  REPLY_RW=(.claude/ .claude.json .local/state/claude/)
  REPLY_RO=(.claude/settings.json .claude/settings.local.json .claude/CLAUDE.md
    .claude/commands .claude/agents .claude/hooks)
}

# engine_home_held: REPLY_HELD, claude's user-level files under HOME that name commands,
# permissions, hooks, servers, skills, plugins or agents, as `KIND PATH [KEYS]` words
# (lib/runner/home.sh holds them from the loop's first run): its settings, its skills,
# agents, commands, hooks and plugins, and of ~/.claude.json (which claude rewrites with
# its own bookkeeping on every start) only the MCP servers, and of the workspace's project
# entries there its servers, allowed tools, approvals of .mcp.json servers and its trust.
# shellcheck disable=SC2034  # read by home_specs_v (lib/runner/home.sh)
engine_home_held() {
  REPLY_HELD=(
    'file .claude/settings.json'
    'file .claude/settings.local.json'
    'dir .claude/skills'
    'dir .claude/agents'
    'dir .claude/commands'
    'dir .claude/hooks'
    'dir .claude/plugins'
    'json-projects .claude.json'
  )
}

# HOME_PERL_ENGINE: the perl reader of claude's held files that are neither a file nor a
# directory (`json-projects`: the JSON projection of ~/.claude.json), placed after the
# shared subroutines of the record (lib/home_record.sh `HOME_PERL_SUBS`): a loop of claude
# holds no other engine's reader. HOME_PERL_MODULES: the perl modules it needs besides the
# record's own (lib/runner/home.sh names them when perl cannot compute the record).
# shellcheck disable=SC2034  # read by lib/runner/home.sh
HOME_PERL_MODULES=("${ORBIT_PERL_JSON_MODULES[@]}")
# shellcheck disable=SC2016,SC2034  # perl code, not shell; read by lib/home_record.sh
HOME_PERL_ENGINE='
@perl:home_json.pl@
@perl:home_claude.pl@
'

# engine_migrate_note: what a loop of claude written under contract 1.0 is told besides
# `orbit recover --migrate`: nothing.
engine_migrate_note() { :; }
