# ---- engine: Codex CLI (checked against codex 0.171.0), run as `codex exec --json`: JSON
# ---- events, `turn.failed` and `error` for its failures, `turn.completed` with the turn's
# ---- usage: tokens, priced by TOKEN_PRICES (estimated).
# ---- Rendered into a loop of this engine only; every engine's part defines the same
# ---- functions (lib/engine.sh lists them and holds what they share).

# engine_codex_model_v: REPLY is the model codex runs: -m/--model or -c model=... in the
# argv, else `model` in $CODEX_HOME/config.toml (~/.codex), else "" (the `*` price).
engine_codex_model_v() {
  local i a next='' f line
  REPLY=
  for ((i = 1; i < ${#AGENT_ARGV[@]}; i++)); do
    a=${AGENT_ARGV[i]}
    if [[ $next == m ]]; then
      REPLY=$a
      return 0
    elif [[ $next == c ]]; then
      if [[ $a =~ ^model=\"?([^\"]+)\"?$ ]]; then
        REPLY=${BASH_REMATCH[1]}
        return 0
      fi
    fi
    next=
    case $a in
      -m | --model) next=m ;;
      --model=*) REPLY=${a#--model=} && return 0 ;;
      -c | --config) next=c ;;
    esac
  done
  f=${CODEX_HOME:-${HOME:-}/.codex}/config.toml
  if [[ -f $f ]]; then
    line=$(grep -aE -m 1 '^[[:space:]]*model[[:space:]]*=' -- "$f" 2>/dev/null) || true
    if [[ $line =~ =[[:space:]]*\"([^\"]+)\" ]]; then
      REPLY=${BASH_REMATCH[1]}
    fi
  fi
  return 0
}

# engine_last_message_v LOG: REPLY is the CLI's last message as it printed it ("" when
# there is none that can be read).
engine_last_message_v() {
  local log=$1
  REPLY=
  local failed=''
  if engine_last_line_v "$log" '{"type":"turn.failed"'; then
    failed=$REPLY
    engine_json_str_v "$failed" message || true
  elif engine_last_line_v "$log" '{"type":"item.completed","item":{"id":"'; then
    local line
    line=$(grep -aF '"type":"agent_message"' -- "$log" 2>/dev/null | grep -a '^{"type":"item.completed"' | tail -n 1) || true
    REPLY=
    if [[ -n $line ]]; then
      engine_json_str_v "$line" text || true
    fi
  fi
  return 0
}

# engine_login_fix_v: REPLY is what a human does about refused or missing credentials.
engine_login_fix_v() {
  REPLY="run \`codex login\` or set OPENAI_API_KEY (CODEX_API_KEY)"
}

# engine_retrying_v LOG: whether codex was retrying a 429 when the run ended (its
# reconnect `error` events naming a 429 or a rate limit). REPLY is "": it names no delay.
engine_retrying_v() {
  REPLY=
  engine_last_line_v "$1" '{"type":"error"' || return 1
  engine_json_str_v "$REPLY" message || true
  [[ $REPLY == *"429 Too Many Requests"* || ${REPLY,,} == *"rate limit"* ]] || return 1
  REPLY=
  return 0
}

# Codex CLI (`exec --json`): `turn.failed` ends a failed turn with error.message; `error`
# events carry reconnects and failures. codex may exit 0 after a failed turn.
engine_classify_own_v() {
  local log=$1 rc=$2 to=$3 msg
  if ((to)); then
    engine_timeout_v "$log"
    return 0
  fi
  if ! engine_last_line_v "$log" '{"type":"turn.failed"'; then
    if ((rc == 0)) && engine_last_line_v "$log" '{"type":"turn.completed"'; then
      REPLY=$OUTCOME_OK
      return 0
    fi
    engine_last_line_v "$log" '{"type":"error"' || return 1
  fi
  engine_json_str_v "$REPLY" message || true
  ENGINE_MESSAGE=$REPLY
  msg=${REPLY,,}
  if [[ $msg == *"401 unauthorized"* || $msg == *"403 forbidden"* || $msg == *"invalid_api_key"* ||
    $msg == *"incorrect api key"* || $msg == *"not logged in"* || $msg == *"missing environment variable"* ||
    $msg == *"token_expired"* || $msg == *"refresh token"* ]]; then
    engine_auth_fix_v
    ENGINE_FIX=$REPLY
    engine_permanent "the credentials were refused or are missing"
  elif [[ $msg == *"usage limit"* || $msg == *"429 too many requests"* || $msg == *"rate limit"* ]]; then
    engine_rate_limited
  elif [[ $msg == *"quota exceeded"* || $msg == *"insufficient_quota"* ]]; then
    ENGINE_FIX="add credits or raise the quota of the OpenAI account (platform.openai.com), then run the loop again"
    engine_permanent "the account's quota is used up"
  else
    REPLY=$OUTCOME_AGENT_ERROR
  fi
  return 0
}

# engine_cost_v LOG: RUN_COST_M and RUN_COST_KIND from codex's turn.completed usage,
# priced by TOKEN_PRICES for the model it runs (estimated). Status 1 when the output holds
# no cost.
engine_cost_v() {
  local log=$1 in=0 cached=0 out=0 model any=0 line
  while IFS= read -r line; do
    [[ $line == '{"type":"turn.completed"'* ]] || continue
    any=1
    engine_json_scalar_v "$line" input_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && in=$((in + REPLY))
    engine_json_scalar_v "$line" cached_input_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && cached=$((cached + REPLY))
    engine_json_scalar_v "$line" output_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && out=$((out + REPLY))
  done < <(grep -a '^{"type":"turn.completed"' -- "$log" 2>/dev/null || true)
  ((any)) || return 1
  engine_tokens_seen "$in" "$out"
  engine_codex_model_v
  model=$REPLY
  engine_tokens_cost_v "$model" "$in" "$cached" "$out" || return 1
  RUN_COST_M=$REPLY
  RUN_COST_KIND=$COST_ESTIMATED
  return 0
}

# engine_preflight: records codex's version (ENGINE_VERSION) and stops the run before
# anything is spent (exit 2, with the fix) when `codex login status` says it is not logged
# in and neither a key nor a provider of the user's own is set. A probe that does not
# answer in time stops the run too: a CLI that hangs on its own status would hang every run.
engine_preflight() {
  local fix why
  engine_version_probe
  engine_auth_fix_v
  fix=$REPLY
  engine_probe_v "$ENGINE_PROBE_LIMIT" login status
  if ((ENGINE_PROBE_TIMED_OUT)); then
    preflight_fail "codex: \`codex login status\` did not answer within ${ENGINE_PROBE_LIMIT}s: check the CLI in a terminal"
  fi
  if ((ENGINE_PROBE_RC != 0)) && [[ -z ${OPENAI_API_KEY:-}${CODEX_API_KEY:-} ]]; then
    # A provider of the user's own (a local model, a gateway) needs no OpenAI login.
    local cfg=${CODEX_HOME:-${HOME:-}/.codex}/config.toml
    if ! grep -qE '^[[:space:]]*model_provider[[:space:]]*=' -- "$cfg" 2>/dev/null &&
      [[ " ${AGENT_ARGV[*]} " != *" model_provider="* ]]; then
      why=${REPLY%%$'\n'*}
      preflight_fail "codex: ${why:-not logged in} (\`codex login status\`), and neither OPENAI_API_KEY nor CODEX_API_KEY is set: $fix"
    fi
  fi
}

# engine_workspace_check: codex names no file of the workspace before the run: nothing to
# check.
engine_workspace_check() { :; }

# engine_workspace_note: nothing of codex's in the workspace to say.
engine_workspace_note() { :; }

# engine_workspace_excludes ARRAY: codex keeps nothing of its own at the workspace's root.
engine_workspace_excludes() { :; }

# engine_after_run: codex leaves nothing in the agent's folder that is not the agent's.
engine_after_run() { :; }

# engine_net_hosts: REPLY_HOSTS, the HOST:PORT words codex's runs reach under the sandbox's
# network allowlist: the API with a key; with a ChatGPT login, its backend (chatgpt.com) and its token
# refresh (auth.openai.com); REPLY_URL_VARS, the variables whose URL's host is its API
# when set, and REPLY_URL_FILES, its configuration, whose model providers' base_url hosts
# are (lib/sandbox-net.sh allows them too).
# shellcheck disable=SC2034  # read by sandbox_net_allowed_v (lib/sandbox-net.sh), in a fenced loop
engine_net_hosts() {
  REPLY_HOSTS=(api.openai.com:443 auth.openai.com:443 chatgpt.com:443)
  REPLY_URL_VARS=(OPENAI_BASE_URL)
  # The file the home record holds (engine_home_held), never another.
  REPLY_URL_FILES=("${HOME:-/nonexistent}/.codex/config.toml")
}

# engine_home_paths: REPLY_RW, codex's state under HOME that stays writable in the sandbox
# (its credentials and sessions must persist), and REPLY_RO, its files there that name
# commands or standing instructions for its later runs outside the loop (read-only, where
# they exist).
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh), in a sandboxed loop
engine_home_paths() {
  REPLY_RW=(.codex/)
  REPLY_RO=(.codex/config.toml .codex/AGENTS.md)
}

# engine_home_held: REPLY_HELD, codex's user-level files under HOME that name commands,
# permissions, hooks, servers, skills or agents, as `KIND PATH [KEYS]` words (lib/runner/
# home.sh holds them from the loop's first run): ~/.codex/config.toml but for the tables
# codex writes itself (a project's trust, its notices) and the model it remembers, its
# prompts (slash commands), skills and rules (the commands it may run unasked). Not its
# bundled skills (~/.codex/skills/.system), which codex itself writes at every start.
# shellcheck disable=SC2034  # read by home_specs_v (lib/runner/home.sh)
engine_home_held() {
  REPLY_HELD=(
    'toml .codex/config.toml'
    'dir .codex/prompts'
    'dir .codex/skills .system'
    'dir .codex/rules'
  )
}

# HOME_PERL_ENGINE: the perl reader of codex's held files that are neither a file nor a
# directory (`toml`: ~/.codex/config.toml read line by line), placed after the shared
# subroutines of the record (lib/home_record.sh `HOME_PERL_SUBS`): a loop of codex holds
# no other engine's reader.
# shellcheck disable=SC2016,SC2034  # perl code, not shell; read by lib/home_record.sh
HOME_PERL_ENGINE='
@perl:home_codex.pl@
'

# engine_migrate_note: what a loop of codex written under contract 1.0 is told besides
# `orbit recover --migrate`: nothing.
engine_migrate_note() { :; }
