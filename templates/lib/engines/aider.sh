# ---- engine: Aider (checked against aider-chat 0.86.2): text only. Its error lines begin
# ---- with the error's class (`litellm.AuthenticationError: ...`), each reply ends with its
# ---- `Tokens: ... Cost: $X message, $Y session.` line: those are read. The cost is
# ---- reported (for a model its price table knows).
# ---- Rendered into a loop of this engine only; every engine's part defines the same
# ---- functions (lib/engine.sh lists them and holds what they share).

# engine_aider_tail_v LOG: REPLY is what aider's output ended on: "error KIND MESSAGE" for
# an error line (`litellm.KIND: MESSAGE`, its lines wrapped by aider joined again) after
# which no reply came, "retry SECONDS" when its last words were `Retrying in N seconds...`
# after such an error, "reply TEXT" for the last paragraph of its last reply (the one its
# `Tokens:` line closes), or "" when there is none of these.
engine_aider_tail_v() {
  REPLY=$(awk '
    /^litellm\.[A-Za-z]+: / {
      kind = $1; sub(/^litellm\./, "", kind); sub(/:$/, "", kind)
      msg = $0; sub(/^litellm\.[A-Za-z]+: /, "", msg)
      on = 1; state = "error"; next
    }
    on && (/^$/ || /^The API provider / || /^Retrying in /) { on = 0 }
    on { msg = msg " " $0; next }
    /^Retrying in [0-9.]+ seconds\.\.\.$/ && state == "error" { state = "retry"; secs = $3; next }
    /^Tokens: / { state = "reply"; reply = para; para = ""; next }
    /^$/ { para = ""; next }
    { para = (para == "" ? $0 : para " " $0) }
    END {
      gsub(/[ \t]+/, " ", msg)
      if (state == "error") printf "error %s %s", kind, msg
      else if (state == "retry") printf "retry %s", secs
      else if (state == "reply") printf "reply %s", reply
    }' "$1" 2>/dev/null) || REPLY=
  [[ -n $REPLY ]]
}

# engine_last_message_v LOG: REPLY is the CLI's last message as it printed it ("" when
# there is none that can be read).
engine_last_message_v() {
  local log=$1
  REPLY=
  if engine_aider_tail_v "$log"; then
    case $REPLY in
      reply\ *) REPLY=${REPLY#reply } ;;
      error\ *) REPLY=${REPLY#error * } ;;
      *) REPLY= ;;
    esac
  fi
  return 0
}

# engine_login_fix_v: REPLY is what a human does about refused or missing credentials.
engine_login_fix_v() {
  REPLY="set the provider's key (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY, ...; OPENAI_API_BASE for an OpenAI-compatible server) or name a model and key in .aider.conf.yml"
}

# engine_retrying_v LOG: whether aider was retrying a rate limit when the run ended.
# REPLY is the retry delay in seconds when it named one.
engine_retrying_v() {
  REPLY=
  # Its last words: a rate limit, then "Retrying in 8.0 seconds...".
  engine_aider_tail_v "$1" || return 1
  [[ $REPLY == "retry "* ]] || return 1
  REPLY=${REPLY#retry }
  REPLY=${REPLY%%.*}
  [[ $REPLY =~ ^[0-9]+$ ]] || REPLY=
  # Only a rate limit counts: the error before the retry note names its class.
  grep -aqE '^litellm\.(RateLimitError|RouterRateLimitError): ' -- "$1" 2>/dev/null || return 1
  return 0
}

# Aider (text): it exits 0 after an API error too; its error line names the error's class
# (litellm's: AuthenticationError, RateLimitError, NotFoundError, ...) and the provider's
# message. Without a model or a key it says so and (never here: the preflight refuses first)
# offers a browser login.
engine_classify_own_v() {
  local log=$1 rc=$2 to=$3 kind
  if ((to)); then
    engine_timeout_v "$log"
    return 0
  fi
  if grep -aqF 'No LLM model was specified and no API keys were provided.' -- "$log" 2>/dev/null; then
    ENGINE_MESSAGE="No LLM model was specified and no API keys were provided."
    engine_auth_fix_v
    ENGINE_FIX=$REPLY
    engine_permanent "the credentials are missing"
    return 0
  fi
  engine_aider_tail_v "$log" || return 1
  case $REPLY in
    reply\ *)
      ((rc == 0)) || return 1
      ENGINE_MESSAGE=${REPLY#reply }
      REPLY=$OUTCOME_OK
      return 0
      ;;
    error\ *) ;;
    *) return 1 ;;
  esac
  REPLY=${REPLY#error }
  kind=${REPLY%% *}
  ENGINE_MESSAGE=${REPLY#* }
  case $kind in
    AuthenticationError | PermissionDeniedError)
      engine_auth_fix_v
      ENGINE_FIX=$REPLY
      engine_permanent "the credentials were refused or are missing"
      ;;
    RateLimitError | RouterRateLimitError) engine_rate_limited ;;
    NotFoundError)
      ENGINE_FIX="name a model the provider serves (--model in loop.toml's argv, AIDER_MODEL, or .aider.conf.yml), then run the loop again"
      engine_permanent "the model was not found"
      ;;
    BudgetExceededError)
      ENGINE_FIX="add credits or raise the budget of the provider's account, then run the loop again"
      engine_permanent "the account's budget is used up"
      ;;
    *) REPLY=$OUTCOME_AGENT_ERROR ;;
  esac
  return 0
}

# engine_cost_v LOG: RUN_COST_M and RUN_COST_KIND from aider's last `Tokens:` line
# (reported). Status 1 when the output holds no cost.
engine_cost_v() {
  local log=$1
  # Its last `Tokens: ... Cost: $X message, $Y session.` line: the session is the run.
  # A model its price table does not know prints tokens only: no cost.
  engine_last_line_v "$log" 'Tokens: ' || return 1
  [[ $REPLY =~ \ Cost:\ \$[0-9.]+\ message,\ \$([0-9]*\.?[0-9]+)\ session\.$ ]] || return 1
  RUN_COST_M=$(record_cost_to_micro "${BASH_REMATCH[1]}") || return 1
  RUN_COST_KIND=$COST_REPORTED
  return 0
}

# engine_preflight: records aider's version (ENGINE_VERSION), keeps it from opening a
# browser and buffering its output, and stops the run before anything is spent (exit 2,
# with the fix) when no key or model is named anywhere aider looks.
engine_preflight() {
  local fix
  engine_version_probe
  engine_auth_fix_v
  fix=$REPLY
  # aider picks a model by the key it finds; without a key or a model it offers a
  # browser login and waits for it (--yes-always accepts): refused here first. A URL
  # an error names is offered to a browser too: BROWSER=true makes that a no-op.
  # Python buffers its output into a pipe: unbuffered, the live view follows it and a
  # run the timeout stops keeps its last words (a rate limit's retry note).
  export BROWSER=true PYTHONUNBUFFERED=1
  local conf
  for conf in "${HOME:-/nonexistent}/.aider.conf.yml" "$WS/.aider.conf.yml"; do
    grep -qsE '^[[:space:]]*model[[:space:]]*:' -- "$conf" && break
    conf=
  done
  if [[ -z ${OPENAI_API_KEY:-}${ANTHROPIC_API_KEY:-}${GEMINI_API_KEY:-}${OPENROUTER_API_KEY:-}${DEEPSEEK_API_KEY:-}${VERTEXAI_PROJECT:-}${AIDER_MODEL:-} &&
    -z $conf && ! -s ${HOME:-/nonexistent}/.env && ! -s $WS/.env &&
    " ${AGENT_ARGV[*]} " != *" --model"* && " ${AGENT_ARGV[*]} " != *" --api-key"* ]]; then
    preflight_fail "aider: no credentials (no OPENAI_API_KEY, ANTHROPIC_API_KEY, ... and no model in .aider.conf.yml; aider would wait for a browser login): $fix"
  fi
}

# engine_workspace_check: aider names no file of the workspace before the run: nothing to
# check.
engine_workspace_check() { :; }

# engine_workspace_note: nothing of aider's in the workspace to say.
engine_workspace_note() { :; }

# engine_workspace_excludes ARRAY: aider's repository-map cache, which it keeps at the
# root of the workspace, stays out of every tree: its info/exclude line, added to the array
# named by $1.
engine_workspace_excludes() {
  local -n excludes=$1
  excludes+=('/.aider.tags.cache.v4/')
}

# engine_after_run: aider edits no file git ignores unless it is in its chat, so its argv
# adds .orbit-agent/done.md with --file, which creates the file empty; an empty done.md
# after an aider run is that file, not a claim (a claim carries the evidence), and goes.
engine_after_run() {
  local f=$AGENT_DIR/done.md
  if [[ -f $f && ! -L $f && ! -s $f ]]; then
    rm -f -- "$f"
  fi
}

# engine_net_hosts: REPLY_HOSTS, the HOST:PORT words aider's runs reach under the sandbox's
# network allowlist: the providers its models name most (OpenAI, Anthropic, Gemini, DeepSeek,
# OpenRouter); its update check and model metadata (pypi.org, raw.githubusercontent.com)
# are left out: aider goes on without them; and REPLY_URL_VARS, the variables whose URL's host is
# its API when set (lib/sandbox-net.sh allows them too).
# shellcheck disable=SC2034  # read by sandbox_net_allowed_v (lib/sandbox-net.sh), in a fenced loop
engine_net_hosts() {
  REPLY_HOSTS=(api.openai.com:443 api.anthropic.com:443 generativelanguage.googleapis.com:443 api.deepseek.com:443 openrouter.ai:443)
  REPLY_URL_VARS=(OPENAI_API_BASE OPENAI_BASE_URL ANTHROPIC_BASE_URL OLLAMA_API_BASE)
}

# engine_home_paths: REPLY_RW, aider's state under HOME that stays writable in the sandbox
# (its credentials and sessions must persist), and REPLY_RO, its files there that name
# commands or standing instructions for its later runs outside the loop (read-only, where
# they exist).
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh), in a sandboxed loop
engine_home_paths() {
  # Its caches (the price table, the analytics id); its .aider.conf.yml is read-only
  # with the rest of HOME.
  REPLY_RW=(.aider/)
  REPLY_RO=()
}

# engine_home_held: REPLY_HELD, aider's user-level files under HOME that name commands or
# settings, as `KIND PATH [KEYS]` words (lib/runner/home.sh holds them from the loop's
# first run): its options (shell commands, test and lint commands), its model settings and
# metadata, and the .env it reads (AIDER_* options, keys).
# shellcheck disable=SC2034  # read by home_specs_v (lib/runner/home.sh)
engine_home_held() {
  REPLY_HELD=(
    'file .aider.conf.yml'
    'file .aider.model.settings.yml'
    'file .aider.model.metadata.json'
    'file .env'
  )
}

# engine_migrate_note: what a loop of aider written under contract 1.0 is told besides
# `orbit recover --migrate`: nothing.
engine_migrate_note() { :; }
