# ---- engine: GitHub Copilot CLI (checked against copilot 1.0.102), run with
# ---- `--output-format json`: JSON events (`session.error`, `assistant.turn_retry`,
# ---- `assistant.message`, `result`); its sign-in checks fail in text before any event. It
# ---- counts premium requests of a subscription: no cost.
# ---- Rendered into a loop of this engine only; every engine's part defines the same
# ---- functions (lib/engine.sh lists them and holds what they share).

# engine_copilot_startup_error_v LOG: REPLY is the error copilot printed before any event
# (`Error: ...` on a line of its own, in text: its sign-in checks run before the session),
# with the line after it when it names the cause. Status 1 when there is none.
engine_copilot_startup_error_v() {
  REPLY=$(awk '/^Error: / { e = $0; getline n; if (n == "") getline n; if (n ~ /^  /) { sub(/^ +/, "", n); e = e " " n } } END { printf "%s", e }' "$1" 2>/dev/null) || REPLY=
  REPLY=${REPLY#Error: }
  [[ -n $REPLY ]]
}

# engine_last_message_v LOG: REPLY is the CLI's last message as it printed it ("" when
# there is none that can be read).
engine_last_message_v() {
  local log=$1
  REPLY=
  if engine_last_line_v "$log" '{"type":"session.error"'; then
    engine_json_str_v "$REPLY" message || true
  elif engine_copilot_startup_error_v "$log"; then
    :
  else
    local said
    said=$(grep -a '^{"type":"assistant.message",' -- "$log" 2>/dev/null | grep -av '"content":"",' | tail -n 1) || true
    REPLY=
    if [[ -n $said ]]; then
      engine_json_str_v "$said" content || true
    fi
  fi
  return 0
}

# engine_login_fix_v: REPLY is what a human does about refused or missing credentials.
engine_login_fix_v() {
  REPLY="set COPILOT_GITHUB_TOKEN (or GH_TOKEN, GITHUB_TOKEN) to a fine-grained token with the Copilot Requests permission, or run \`copilot\` and /login, or \`gh auth login\`; for a provider of your own set COPILOT_PROVIDER_BASE_URL and COPILOT_PROVIDER_API_KEY"
}

# engine_retrying_v LOG: whether copilot was retrying a rate limit when the run ended.
# REPLY is "": it names no delay.
engine_retrying_v() {
  REPLY=
  # Its retry events ("reason":"rate_limit"), with no session error after the last.
  engine_last_line_v "$1" '{"type":"assistant.turn_retry"' || return 1
  engine_json_str_v "$REPLY" reason || return 1
  [[ $REPLY == 'rate_limit' ]] || return 1
  ! engine_last_line_v "$1" '{"type":"session.error"' || return 1
  REPLY=
  return 0
}

# GitHub Copilot CLI (`--output-format json`): a failed session ends with `session.error`
# (errorType: authentication, rate_limit, quota, ...; statusCode; message) and `result`
# with exitCode 1. Its sign-in checks fail before any event, in text (`Error: No
# authentication information found.`, a classic token refused, a token it cannot check).
engine_classify_own_v() {
  local log=$1 rc=$2 to=$3 line kind='' status='' msg
  if ((to)); then
    engine_timeout_v "$log"
    return 0
  fi
  if ! engine_last_line_v "$log" '{"type":"session.error"'; then
    if ! engine_last_line_v "$log" '{"type":"result"' && engine_copilot_startup_error_v "$log"; then
      ENGINE_MESSAGE=$REPLY
      msg=${REPLY,,}
      if [[ $msg == "no authentication information found"* || $msg == *"tokens (ghp_) are not supported"* ||
        $msg == *"token"*"not"*"valid"* || $msg == *"not authorized"* || $msg == *"no copilot"* ]] &&
        [[ $msg != *"network"* ]]; then
        engine_auth_fix_v
        ENGINE_FIX=$REPLY
        engine_permanent "the credentials were refused or are missing"
      else
        REPLY=$OUTCOME_AGENT_ERROR
      fi
      return 0
    fi
    ((rc == 0)) || return 1
    engine_last_line_v "$log" '{"type":"result"' || return 1
    engine_json_scalar_v "$REPLY" exitCode || true
    [[ $REPLY == 0 ]] || return 1
    REPLY=$OUTCOME_OK
    return 0
  fi
  line=$REPLY
  engine_json_str_v "$line" errorType && kind=$REPLY
  engine_json_str_v "$line" message || true
  ENGINE_MESSAGE=$REPLY
  engine_json_scalar_v "$line" statusCode && status=$REPLY
  if [[ $kind == authentication || $status == 401 || $status == 403 ]]; then
    engine_auth_fix_v
    ENGINE_FIX=$REPLY
    engine_permanent "the credentials were refused or are missing"
  elif [[ $kind == 'rate_limit' || $kind == quota || $status == 429 ]]; then
    engine_rate_limited
  else
    REPLY=$OUTCOME_AGENT_ERROR
  fi
  return 0
}

# engine_cost_v LOG: copilot counts premium requests of a subscription, neither dollars
# nor tokens: no cost (status 1).
engine_cost_v() {
  return 1
}

# engine_preflight: records copilot's version (ENGINE_VERSION) and stops the run before
# anything is spent (exit 2, with the fix) when no GitHub token, login or provider of the
# user's own is found.
engine_preflight() {
  local fix
  engine_version_probe
  engine_auth_fix_v
  fix=$REPLY
  # A GitHub token (the variables copilot reads, gh's login, copilot's own /login) or
  # a provider of the user's own (BYOK).
  local chome=${COPILOT_HOME:-${HOME:-}/.copilot} gh=${GH_CONFIG_DIR:-${XDG_CONFIG_HOME:-${HOME:-}/.config}/gh}
  if [[ -z ${COPILOT_GITHUB_TOKEN:-}${GH_TOKEN:-}${GITHUB_TOKEN:-}${COPILOT_PROVIDER_BASE_URL:-} ]] &&
    ! grep -qsE '"(logged_in_users|last_logged_in_user)"' -- "$chome/config.json" &&
    ! grep -qs 'oauth_token' -- "$gh/hosts.yml"; then
    preflight_fail "copilot: no credentials (no COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN, no login in $chome or gh): $fix"
  fi
}

# engine_workspace_check: copilot names no file of the workspace before the run: nothing to
# check.
engine_workspace_check() { :; }

# engine_workspace_note: nothing of copilot's in the workspace to say.
engine_workspace_note() { :; }

# engine_workspace_excludes ARRAY: copilot keeps nothing of its own at the workspace's root.
engine_workspace_excludes() { :; }

# engine_after_run: copilot leaves nothing in the agent's folder that is not the agent's.
engine_after_run() { :; }

# engine_net_hosts: REPLY_HOSTS, the HOST:PORT words copilot's runs reach under the sandbox's
# network allowlist: the Copilot API (api.githubcopilot.com and its plan's subdomains), and GitHub's
# login and token exchange (github.com, api.github.com); and REPLY_URL_VARS, the variables whose URL's host is
# its API when set (lib/sandbox-net.sh allows them too).
# shellcheck disable=SC2034  # read by sandbox_net_allowed_v (lib/sandbox-net.sh), in a fenced loop
engine_net_hosts() {
  REPLY_HOSTS=(api.githubcopilot.com:443 '*.githubcopilot.com:443' api.github.com:443 github.com:443 copilot-proxy.githubusercontent.com:443 origin-tracker.githubusercontent.com:443)
  REPLY_URL_VARS=(COPILOT_PROVIDER_BASE_URL)
}

# engine_home_paths: REPLY_RW, copilot's state under HOME that stays writable in the sandbox
# (its credentials and sessions must persist), and REPLY_RO, its files there that name
# commands or standing instructions for its later runs outside the loop (read-only, where
# they exist).
# shellcheck disable=SC2034  # read by sandbox_prepare (lib/sandbox.sh), in a sandboxed loop
engine_home_paths() {
  # Its state and sessions, and the package its loader unpacks under ~/.cache; its
  # settings and instructions stay read-only.
  REPLY_RW=(.copilot/ .cache/copilot/)
  REPLY_RO=(.copilot/mcp-config.json .copilot/copilot-instructions.md .copilot/agents .copilot/skills)
}

# engine_home_held: REPLY_HELD, copilot's user-level files under HOME that name commands,
# permissions, hooks, servers, skills or agents, as `KIND PATH [KEYS]` words (lib/runner/
# home.sh holds them from the loop's first run): its MCP servers and language servers, its
# agents, skills and hooks, and of ~/.copilot/config.json (its own bookkeeping besides)
# only the folders it trusts and the URLs it may fetch.
# shellcheck disable=SC2034  # read by home_specs_v (lib/runner/home.sh)
engine_home_held() {
  REPLY_HELD=(
    'file .copilot/mcp-config.json'
    'file .copilot/lsp-config.json'
    'dir .copilot/agents'
    'dir .copilot/skills'
    'dir .copilot/hooks'
    'json .copilot/config.json trusted_folders,allowed_urls,denied_urls'
  )
}

# HOME_PERL_ENGINE: the perl reader of copilot's held files that are neither a file nor a
# directory (`json`: the JSON projection of ~/.copilot/config.json), placed after the
# shared subroutines of the record (lib/home_record.sh `HOME_PERL_SUBS`): a loop of copilot
# holds no other engine's reader. HOME_PERL_MODULES: the perl modules it needs besides the
# record's own (lib/runner/home.sh names them when perl cannot compute the record).
# shellcheck disable=SC2034  # read by lib/runner/home.sh
HOME_PERL_MODULES=("${ORBIT_PERL_JSON_MODULES[@]}")
# shellcheck disable=SC2016,SC2034  # perl code, not shell; read by lib/home_record.sh
HOME_PERL_ENGINE='
@perl:home_json.pl@
@perl:home_copilot.pl@
'

# engine_migrate_note: what a loop of copilot written under contract 1.0 is told besides
# `orbit recover --migrate`: nothing.
engine_migrate_note() { :; }
