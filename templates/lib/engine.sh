# ---- the engines: what each built-in CLI (claude, codex, gemini, qwen, aider, opencode,
# ---- copilot) prints, read from its structured output (aider has none: its own line
# ---- formats). ENGINE picks the reader; a custom engine keeps the generic rules
# ---- (classify_v, rate_limit_resume_at, cost_of_run). Checked against claude-code 2.1.197,
# ---- codex 0.171.0, gemini-cli 0.61.0, qwen-code 0.24.4, aider-chat 0.86.2, opencode
# ---- 1.18.33 and copilot 1.0.102.
#
# Nothing here greps a number out of a transcript: each CLI's own last words are read where
# only the CLI writes them (claude's and qwen's `{"type":"result",...}` line, codex's
# `turn.failed` and `error` events, gemini's closing JSON object, opencode's `error` and
# `step_finish` events, copilot's `session.error` and `result` events), and the message they
# carry is what the summary, progress.md and the report show. aider prints text only: its
# error lines begin with the error's class (`litellm.AuthenticationError: ...`), each reply
# ends with its `Tokens: ... Cost: $X message, $Y session.` line, and those are read.

# The CLI's message (one line) and the fix of a permanent failure, set by engine_classify_v.
ENGINE_MESSAGE=
ENGINE_FIX=
# The epoch a rate limit lifts, when the CLI's output names it ("" = not named).
ENGINE_RESUME_AT=
# The installed CLI's version, recorded in the loop_start event.
ENGINE_VERSION=

# engine_unescape_v TEXT: REPLY is a JSON string body as text on one line (\n, \t as
# blanks, \" and \\ and \/ and \uXXXX decoded; control characters dropped).
engine_unescape_v() {
  local s=$1 out='' hex ch
  while [[ $s =~ ^([^\\]*)\\(.)(.*)$ ]]; do
    out+=${BASH_REMATCH[1]}
    s=${BASH_REMATCH[3]}
    case ${BASH_REMATCH[2]} in
      n | t | r | b | f) out+=' ' ;;
      u)
        if [[ $s =~ ^([0-9a-fA-F]{4})(.*)$ ]]; then
          hex=${BASH_REMATCH[1]}
          s=${BASH_REMATCH[2]}
          # shellcheck disable=SC2059  # the escape is the format, by design (4 hex digits)
          printf -v ch "\\u$hex"
          out+=$ch
        fi
        ;;
      *) out+=${BASH_REMATCH[2]} ;;
    esac
  done
  out+=$s
  REPLY=${out//[$'\001'-$'\037'$'\177']/}
}

# engine_json_str_v TEXT KEY: REPLY is the first string value of "KEY" in TEXT, decoded
# (status 1 when there is none).
engine_json_str_v() {
  local re="\"$2\" ?: ?\"(([^\"\\\\]|\\\\.)*)\""
  REPLY=
  [[ $1 =~ $re ]] || return 1
  engine_unescape_v "${BASH_REMATCH[1]}"
}

# engine_json_scalar_v TEXT KEY: REPLY is the first number, true, false or null value of
# "KEY" in TEXT (status 1 when there is none).
engine_json_scalar_v() {
  local re="\"$2\" ?: ?(-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?|true|false|null)"
  REPLY=
  [[ $1 =~ $re ]] || return 1
  REPLY=${BASH_REMATCH[1]}
}

# engine_last_line_v LOG PREFIX: REPLY is the last line of LOG that begins with PREFIX
# (status 1 when none does).
engine_last_line_v() {
  REPLY=$(awk -v p="$2" 'index($0, p) == 1 { l = $0 } END { printf "%s", l }' "$1" 2>/dev/null) || true
  [[ -n $REPLY ]]
}

# engine_gemini_block_v LOG: REPLY is gemini's closing JSON object (`--output-format
# json`): from the last line that is only `{` to the end. Status 1 when there is none.
engine_gemini_block_v() {
  REPLY=$(awk '/^\{$/ { buf = ""; on = 1 } on { buf = buf $0 "\n" } END { printf "%s", buf }' "$1" 2>/dev/null) || true
  [[ -n $REPLY ]]
}

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

# engine_opencode_failed_v LOG: REPLY is opencode's last `{"type":"error"}` event when no
# step finished after it (status 1 otherwise).
engine_opencode_failed_v() {
  local last
  last=$(awk 'index($0, "{\"type\":\"error\"") == 1 { e = NR } index($0, "{\"type\":\"step_finish\"") == 1 { f = NR } END { print (e > f) ? "error" : "" }' "$1" 2>/dev/null) || last=
  [[ $last == error ]] || return 1
  engine_last_line_v "$1" '{"type":"error"'
}

# engine_copilot_startup_error_v LOG: REPLY is the error copilot printed before any event
# (`Error: ...` on a line of its own, in text: its sign-in checks run before the session),
# with the line after it when it names the cause. Status 1 when there is none.
engine_copilot_startup_error_v() {
  REPLY=$(awk '/^Error: / { e = $0; getline n; if (n == "") getline n; if (n ~ /^  /) { sub(/^ +/, "", n); e = e " " n } } END { printf "%s", e }' "$1" 2>/dev/null) || REPLY=
  REPLY=${REPLY#Error: }
  [[ -n $REPLY ]]
}

# engine_clip_v TEXT: REPLY is TEXT on one line, at most 200 characters.
engine_clip_v() {
  REPLY=${1//[$'\n\r\t']/ }
  if ((${#REPLY} > 200)); then
    REPLY="${REPLY:0:197}..."
  fi
}

# ---- the final message: what the CLI said last (its answer, or its error)

# engine_final_message_v LOG: REPLY is the CLI's last message, one line ("" when the
# engine prints none that can be read, and for a custom engine).
engine_final_message_v() {
  local log=$1
  REPLY=
  case $ENGINE in
    claude)
      if engine_last_line_v "$log" '{"type":"result"'; then
        engine_json_str_v "$REPLY" result || true
      fi
      ;;
    codex)
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
      ;;
    gemini)
      if engine_gemini_block_v "$log"; then
        local block=$REPLY
        engine_json_str_v "$block" message || engine_json_str_v "$block" response || true
      fi
      ;;
    qwen)
      if engine_last_line_v "$log" '{"type":"result"'; then
        local result=$REPLY
        engine_json_str_v "$result" result || engine_json_str_v "${result#*\"error\":\{}" message || true
      fi
      ;;
    copilot)
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
      ;;
    opencode)
      if engine_opencode_failed_v "$log"; then
        engine_json_str_v "$REPLY" message || true
      elif engine_last_line_v "$log" '{"type":"text"'; then
        engine_json_str_v "${REPLY#*\"part\":}" text || true
      fi
      ;;
    aider)
      if engine_aider_tail_v "$log"; then
        case $REPLY in
          reply\ *) REPLY=${REPLY#reply } ;;
          error\ *) REPLY=${REPLY#error * } ;;
          *) REPLY= ;;
        esac
      fi
      ;;
  esac
  engine_clip_v "$REPLY"
}

# ---- when a limit lifts

# engine_zone_ok ZONE: whether ZONE is a time zone this machine knows.
engine_zone_ok() {
  [[ $1 =~ ^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$ ]] || return 1
  [[ $1 == UTC || $1 == GMT || -f /usr/share/zoneinfo/$1 || -f /usr/lib/zoneinfo/$1 || -f /usr/share/lib/zoneinfo/$1 ]]
}

# engine_clock_v ZONE EPOCH: REPLY is "MON DAY SECONDS-OF-DAY YEAR" of EPOCH in ZONE ("" =
# the runner's own zone).
engine_clock_v() {
  local out
  if [[ -n $1 ]]; then
    TZ=$1 printf -v out '%(%b %d %H %M %S %Y)T' "$2"
  else
    printf -v out '%(%b %d %H %M %S %Y)T' "$2"
  fi
  local mon day h m s y
  read -r mon day h m s y <<<"$out"
  REPLY="$mon $((10#$day)) $((10#$h * 3600 + 10#$m * 60 + 10#$s)) $y"
}

# engine_wall_v ZONE MON DAY HOUR MINUTE NOW [YEAR]: REPLY is the first epoch at or after
# NOW (less five minutes: a reset just passed is still this one) whose wall clock in ZONE
# reads HOUR:MINUTE, on MON DAY (of YEAR) when given (MON "" = any day). Status 1 when no
# day within 400 days matches.
engine_wall_v() {
  local zone=$1 mon=$2 day=$3 want=$(($4 * 3600 + $5 * 60)) now=$6 year=${7:-} d t sod clock
  for ((d = 0; d <= 400; d++)); do
    t=$((now + d * 86400))
    engine_clock_v "$zone" "$t"
    read -r -a clock <<<"$REPLY"
    sod=${clock[2]}
    if [[ -n $mon ]] && [[ ${clock[0],,} != "${mon,,}" || ${clock[1]} != "$day" || (-n $year && ${clock[3]} != "$year") ]]; then
      continue
    fi
    t=$((t - sod + want))
    if ((t >= now - 300)); then
      REPLY=$t
      return 0
    fi
  done
  return 1
}

# engine_reset_at_v TEXT [NOW]: REPLY is the epoch a limit lifts, read from the wordings
# the CLIs use; "" when TEXT names none. Understood:
#   resets 6:30pm (UTC) | resets 6pm (Europe/Paris) | resets Dec 4, 3:55am (Europe/Paris)
#   | resets Dec 4, 2027, 6pm (UTC)                         (claude)
#   try again at 6:30 PM | try again at Dec 4th, 2027 6:30 PM  (codex, the local zone)
#   try again in 4 days 3 hours 20 minutes | in 2 hours | in 45 seconds
#   reset after 8h44m7s | retry after 3600s                  (gemini)
#   daily quota                                              (gemini: midnight, Pacific)
#   an epoch after '|', retry-after: N                       (the generic forms)
engine_reset_at_v() {
  local text=${1,,} now=${2:-} mon='' day='' year='' h m ap zone='' re n secs=0 matched=0 nocase=0
  if [[ -z $now ]]; then
    printf -v now '%(%s)T' -1
  fi
  REPLY=
  # A time of day, with a date and a zone when given (matched without regard to case, so
  # that the zone keeps its own: zoneinfo names are case-sensitive).
  re='(resets?|reset at|try again at)[ :]+(([a-z]{3})[a-z]* ([0-9]{1,2})(st|nd|rd|th)?,? ([0-9]{4},? )?)?([0-9]{1,2})(:([0-9]{2}))? ?(am|pm)( \(([^)]{1,64})\))?'
  shopt -q nocasematch && nocase=1
  shopt -s nocasematch
  if [[ $1 =~ $re ]]; then
    mon=${BASH_REMATCH[3],,}
    day=${BASH_REMATCH[4]}
    year=${BASH_REMATCH[6]//[!0-9]/}
    h=$((10#${BASH_REMATCH[7]}))
    m=$((10#${BASH_REMATCH[9]:-0}))
    ap=${BASH_REMATCH[10],,}
    zone=${BASH_REMATCH[12]}
    ((nocase)) || shopt -u nocasematch
    if [[ -n $zone ]] && ! engine_zone_ok "$zone"; then
      zone=UTC
    fi
    if ((h <= 12 && m < 60)); then
      ((h == 12)) && h=0
      [[ $ap == pm ]] && h=$((h + 12))
      if [[ -n $day ]]; then
        day=$((10#$day))
      fi
      if engine_wall_v "$zone" "$mon" "$day" "$h" "$m" "$now" "$year"; then
        return 0
      fi
    fi
  fi
  ((nocase)) || shopt -u nocasematch
  # A duration: "in 4 days 3 hours 20 minutes", "after 8h44m7s", "in 45 seconds".
  re='(try again in|retry in|resets? in|reset after|retry after|again in|after) (([0-9]+) ?(days?|d)[ ,]*(and )?)?(([0-9]+) ?(hours?|hrs?|h)[ ,]*(and )?)?(([0-9]+) ?(minutes?|mins?|m)[ ,]*(and )?)?(([0-9]+)(\.[0-9]+)? ?(seconds?|secs?|s)([^a-z]|$))?'
  if [[ $text =~ $re ]]; then
    n=${BASH_REMATCH[3]:-0}
    secs=$((secs + 10#$n * 86400))
    n=${BASH_REMATCH[7]:-0}
    secs=$((secs + 10#$n * 3600))
    n=${BASH_REMATCH[11]:-0}
    secs=$((secs + 10#$n * 60))
    n=${BASH_REMATCH[15]:-0}
    secs=$((secs + 10#$n))
    if [[ -n ${BASH_REMATCH[2]}${BASH_REMATCH[6]}${BASH_REMATCH[10]}${BASH_REMATCH[14]} ]]; then
      matched=1
    fi
  fi
  if ((matched && secs > 0)); then
    REPLY=$((now + secs + 1))
    return 0
  fi
  if [[ $text =~ \|([0-9]{10}) ]] && ((BASH_REMATCH[1] > now)); then
    REPLY=${BASH_REMATCH[1]}
    return 0
  fi
  if [[ $text =~ retry-after:\ *([0-9]{1,6}) ]]; then
    REPLY=$((now + 10#${BASH_REMATCH[1]}))
    return 0
  fi
  # Gemini's daily quotas reset at midnight Pacific time.
  if [[ $text == *"daily quota"* ]]; then
    engine_zone_ok America/Los_Angeles && zone=America/Los_Angeles || zone=UTC
    engine_wall_v "$zone" '' '' 0 0 "$((now + 300))" && return 0
  fi
  REPLY=
  return 1
}

# ---- classification

# engine_auth_fix_v: REPLY is what a human does about refused or missing credentials.
engine_auth_fix_v() {
  case $ENGINE in
    claude) REPLY="run \`claude /login\` (or \`claude setup-token\`) or set ANTHROPIC_API_KEY" ;;
    codex) REPLY="run \`codex login\` or set OPENAI_API_KEY (CODEX_API_KEY)" ;;
    gemini) REPLY="set GEMINI_API_KEY (or GOOGLE_API_KEY with GOOGLE_GENAI_USE_VERTEXAI=true), or run \`gemini\` once in a terminal to log in" ;;
    aider) REPLY="set the provider's key (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY, ...; OPENAI_API_BASE for an OpenAI-compatible server) or name a model and key in .aider.conf.yml" ;;
    copilot) REPLY="set COPILOT_GITHUB_TOKEN (or GH_TOKEN, GITHUB_TOKEN) to a fine-grained token with the Copilot Requests permission, or run \`copilot\` and /login, or \`gh auth login\`; for a provider of your own set COPILOT_PROVIDER_BASE_URL and COPILOT_PROVIDER_API_KEY" ;;
    opencode) REPLY="run \`opencode auth login\`, set the provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...), or configure a provider and model in ~/.config/opencode/opencode.json" ;;
    qwen) REPLY="set OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL for an OpenAI-compatible provider (or configure one in ~/.qwen/settings.json, security.auth and modelProviders)" ;;
    *) REPLY="log the agent's CLI in or set its API key" ;;
  esac
  if engine_unattended; then
    REPLY+="; under cron or systemd the keys of your shell are not in the scheduler's environment: name a file holding them (KEY=VALUE lines, mode 0600) as env-file in loop.toml"
  fi
}

# engine_unattended: whether the runner runs without a terminal (cron, systemd, CI).
engine_unattended() {
  [[ -n ${INVOCATION_ID:-} ]] && return 0
  [[ ! -t 0 && ! -t 1 && ! -t 2 ]]
}

# engine_permanent WHAT: the run failed for a reason retrying cannot fix. PERMANENT_WHY is
# the CLI's message with the fix; REPLY is the permanent outcome.
engine_permanent() {
  local what=$1
  engine_clip_v "$ENGINE_MESSAGE"
  PERMANENT_WHY="$ENGINE: $what: \"$REPLY\": $ENGINE_FIX"
  REPLY=$OUTCOME_PERMANENT
}

# engine_rate_limited: the run hit a rate or usage limit; ENGINE_RESUME_AT when it lifts.
engine_rate_limited() {
  engine_reset_at_v "$ENGINE_MESSAGE" || true
  ENGINE_RESUME_AT=$REPLY
  REPLY=$OUTCOME_RATE_LIMITED
}

# engine_retrying_v LOG: whether the CLI was retrying a 429 when the run ended (claude's
# stream-json `api_retry` event with error_status 429; codex's reconnect events naming a
# 429). REPLY is the retry delay in seconds when the CLI named one.
engine_retrying_v() {
  local line
  REPLY=
  case $ENGINE in
    claude)
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
      ;;
    codex)
      engine_last_line_v "$1" '{"type":"error"' || return 1
      engine_json_str_v "$REPLY" message || true
      [[ $REPLY == *"429 Too Many Requests"* || ${REPLY,,} == *"rate limit"* ]] || return 1
      REPLY=
      ;;
    aider)
      # Its last words: a rate limit, then "Retrying in 8.0 seconds...".
      engine_aider_tail_v "$1" || return 1
      [[ $REPLY == "retry "* ]] || return 1
      REPLY=${REPLY#retry }
      REPLY=${REPLY%%.*}
      [[ $REPLY =~ ^[0-9]+$ ]] || REPLY=
      # Only a rate limit counts: the error before the retry note names its class.
      grep -aqE '^litellm\.(RateLimitError|RouterRateLimitError): ' -- "$1" 2>/dev/null || return 1
      ;;
    copilot)
      # Its retry events ("reason":"rate_limit"), with no session error after the last.
      engine_last_line_v "$1" '{"type":"assistant.turn_retry"' || return 1
      engine_json_str_v "$REPLY" reason || return 1
      [[ $REPLY == 'rate_limit' ]] || return 1
      ! engine_last_line_v "$1" '{"type":"session.error"' || return 1
      REPLY=
      ;;
    gemini)
      # Its retry notes on stderr: "Attempt N failed with status 429. Retrying ...".
      engine_last_line_v "$1" 'Attempt ' || return 1
      [[ $REPLY =~ ^Attempt\ [0-9]+\ failed\ with\ status\ 429\. ]] || return 1
      REPLY=
      ;;
    *) return 1 ;;
  esac
  return 0
}

# engine_classify_v LOG RC TIMED_OUT: REPLY is ok | timeout | rate_limited | permanent |
# agent_error, from the engine's own structured output; PERMANENT_WHY says why a permanent
# failure is one (with the fix), ENGINE_RESUME_AT when a rate limit lifts. A custom engine,
# or a built-in one that printed nothing structured, goes by the generic rules.
engine_classify_v() {
  local log=$1 rc=$2 to=$3
  ENGINE_MESSAGE='' ENGINE_FIX='' ENGINE_RESUME_AT='' PERMANENT_WHY=''
  case $ENGINE in
    claude) engine_classify_claude_v "$@" && return 0 ;;
    codex) engine_classify_codex_v "$@" && return 0 ;;
    gemini) engine_classify_gemini_v "$@" && return 0 ;;
    qwen) engine_classify_qwen_v "$@" && return 0 ;;
    aider) engine_classify_aider_v "$@" && return 0 ;;
    opencode) engine_classify_opencode_v "$@" && return 0 ;;
    copilot) engine_classify_copilot_v "$@" && return 0 ;;
  esac
  classify_v "$log" "$rc" "$to"
  if [[ $REPLY == "$OUTCOME_RATE_LIMITED" ]]; then
    ENGINE_RESUME_AT=$(rate_limit_resume_at "$log")
  fi
}

# engine_timeout_v LOG: a run the timeout stopped: a rate limit when the CLI was retrying a
# 429 (it retries for minutes by itself), else a timeout.
engine_timeout_v() {
  local now
  if engine_retrying_v "$1"; then
    ENGINE_MESSAGE="still retrying a rate limit (HTTP 429) when the timeout stopped it"
    printf -v now '%(%s)T' -1
    ENGINE_RESUME_AT=$((now + ${REPLY:-900}))
    if ((${REPLY:-900} < 60)); then
      ENGINE_RESUME_AT=$((now + 60))
    fi
    REPLY=$OUTCOME_RATE_LIMITED
  else
    REPLY=$OUTCOME_TIMEOUT
  fi
}

# Claude Code (`-p --output-format stream-json`): the last line is the result object:
# is_error, api_error_status, result (the message); the assistant message before it names
# the error kind (authentication_failed, rate_limit, billing_error, ...).
engine_classify_claude_v() {
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

# Codex CLI (`exec --json`): `turn.failed` ends a failed turn with error.message; `error`
# events carry reconnects and failures. codex may exit 0 after a failed turn.
engine_classify_codex_v() {
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

# Gemini CLI (`--output-format json`): exit 41 = no usable credentials, 55 = the folder
# is not trusted, 52 = its configuration; an error prints {"error":{"message","code"}}.
engine_classify_gemini_v() {
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

# Qwen Code (`--output-format stream-json`): the last line is the result object, as
# claude's: is_error, result (the answer), error.message (the failure, the provider's own
# words after "[API Error: STATUS"). A quota qwen knows names its reset ("Quota exhausted:
# ... will reset ..."); it retries other 429s by itself, silently, until it gives up.
engine_classify_qwen_v() {
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

# Aider (text): it exits 0 after an API error too; its error line names the error's class
# (litellm's: AuthenticationError, RateLimitError, NotFoundError, ...) and the provider's
# message. Without a model or a key it says so and (never here: the preflight refuses first)
# offers a browser login.
engine_classify_aider_v() {
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

# opencode (`run --format json`): an `error` event ends a failed run (exit 1) with
# error.name (APIError, ProviderAuthError, ...) and error.data: message, statusCode (the
# provider's HTTP status), isRetryable. It retries a 429 by itself, silently, for about a
# minute and a half before it prints one.
engine_classify_opencode_v() {
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

# GitHub Copilot CLI (`--output-format json`): a failed session ends with `session.error`
# (errorType: authentication, rate_limit, quota, ...; statusCode; message) and `result`
# with exitCode 1. Its sign-in checks fail before any event, in text (`Error: No
# authentication information found.`, a classic token refused, a token it cannot check).
engine_classify_copilot_v() {
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

# engine_after_run: what a built-in CLI left in the agent's folder that is not the agent's:
# aider edits no file git ignores unless it is in its chat, so its argv adds
# .orbit-agent/done.md with --file, which creates the file empty; an empty done.md after
# an aider run is that file, not a claim (a claim carries the evidence), and goes.
engine_after_run() {
  local f=$AGENT_DIR/done.md
  if [[ $ENGINE == aider && -f $f && ! -L $f && ! -s $f ]]; then
    rm -f -- "$f"
  fi
}

# ---- cost: claude reports USD; codex, gemini and qwen report tokens, priced by TOKEN_PRICES

# engine_price_v MODEL: REPLY is "INPUT CACHED OUTPUT", USD per million tokens, for MODEL
# from TOKEN_PRICES (`model=input/cached/output` words): the model itself, else the
# longest entry its name begins with, else `*`. Status 1 when none applies.
engine_price_v() {
  local model=$1 w key best='' bestlen=-1 star=''
  for w in $TOKEN_PRICES; do
    key=${w%%=*}
    if [[ $key == "*" ]]; then
      star=${w#*=}
    elif [[ $model == "$key" ]]; then
      best=${w#*=}
      bestlen=100000
    elif [[ $model == "$key"* ]] && ((${#key} > bestlen)); then
      best=${w#*=}
      bestlen=${#key}
    fi
  done
  [[ -n $best ]] || best=$star
  [[ -n $best ]] || return 1
  REPLY=${best//\// }
}

# engine_prices_check: every TOKEN_PRICES word is `model=input/cached/output` (status 1
# and REPLY the first bad word otherwise).
engine_prices_check() {
  local w num='[0-9]{1,6}(\.[0-9]{1,6})?'
  for w in $TOKEN_PRICES; do
    if [[ ! $w =~ ^[A-Za-z0-9._*:-]{1,64}=$num/$num/$num$ ]]; then
      REPLY=$w
      return 1
    fi
  done
  return 0
}

# engine_tokens_cost_v MODEL INPUT CACHED OUTPUT: REPLY is what the tokens cost, in
# micro-USD (input counts the cached tokens too, as both CLIs report it). Status 1 when no
# price applies.
engine_tokens_cost_v() {
  engine_price_v "$1" || return 1
  local -a price
  read -r -a price <<<"$REPLY"
  REPLY=$(awk -v i="$2" -v c="$3" -v o="$4" -v pi="${price[0]}" -v pc="${price[1]}" -v po="${price[2]}" \
    'BEGIN { if (c > i) c = i; printf "%d", (i - c) * pi + c * pc + o * po + 0.5 }')
}

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

# engine_cost_v LOG: sets RUN_COST_M and RUN_COST_KIND from a built-in engine's output:
# claude's result line (total_cost_usd, reported); codex's turn.completed usage,
# gemini's stats.models.*.tokens and qwen's result usage (its model named by its init
# event), priced by TOKEN_PRICES (estimated). Status 1 when the
# output holds no cost.
engine_cost_v() {
  local log=$1 v in=0 cached=0 out=0 model total=0 any=0 line
  case $ENGINE in
    claude)
      engine_last_line_v "$log" '{"type":"result"' || return 1
      engine_json_scalar_v "$REPLY" total_cost_usd || return 1
      RUN_COST_M=$(cost_to_micro "$REPLY") || return 1
      RUN_COST_KIND=$COST_REPORTED
      ;;
    codex)
      while IFS= read -r line; do
        [[ $line == '{"type":"turn.completed"'* ]] || continue
        any=1
        engine_json_scalar_v "$line" input_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && in=$((in + REPLY))
        engine_json_scalar_v "$line" cached_input_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && cached=$((cached + REPLY))
        engine_json_scalar_v "$line" output_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && out=$((out + REPLY))
      done < <(grep -a '^{"type":"turn.completed"' -- "$log" 2>/dev/null || true)
      ((any)) || return 1
      engine_codex_model_v
      model=$REPLY
      engine_tokens_cost_v "$model" "$in" "$cached" "$out" || return 1
      RUN_COST_M=$REPLY
      RUN_COST_KIND=$COST_ESTIMATED
      ;;
    gemini)
      engine_gemini_block_v "$log" || return 1
      # Per model (6 spaces in, under "models"), its "tokens" object (8 spaces in).
      while read -r model v in cached out; do
        [[ $in =~ ^[0-9]+$ && $cached =~ ^[0-9]+$ && $out =~ ^[0-9]+$ ]] || continue
        any=1
        engine_tokens_cost_v "$model" "$in" "$cached" "$out" || return 1
        total=$((total + REPLY))
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
      RUN_COST_M=$total
      RUN_COST_KIND=$COST_ESTIMATED
      ;;
    qwen)
      engine_last_line_v "$log" '{"type":"result"' || return 1
      line=${REPLY#*\"usage\":\{}
      [[ $line != "$REPLY" ]] || return 1
      line=${line%%\}*}
      engine_json_scalar_v "$line" input_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && in=$REPLY
      engine_json_scalar_v "$line" cache_read_input_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && cached=$REPLY
      engine_json_scalar_v "$line" output_tokens && [[ $REPLY =~ ^[0-9]+$ ]] && out=$REPLY
      ((in + out > 0)) || return 1
      model=
      if engine_last_line_v "$log" '{"type":"system","subtype":"init"'; then
        engine_json_str_v "$REPLY" model && model=$REPLY
      fi
      engine_tokens_cost_v "$model" "$in" "$cached" "$out" || return 1
      RUN_COST_M=$REPLY
      RUN_COST_KIND=$COST_ESTIMATED
      ;;
    opencode)
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
      if awk -v u="$usd" 'BEGIN { exit !(u > 0) }'; then
        RUN_COST_M=$(cost_to_micro "$usd") || return 1
        RUN_COST_KIND=$COST_REPORTED
      else
        # opencode counts cached tokens apart from its input: input here counts them too.
        engine_tokens_cost_v '' "$((in + cached))" "$cached" "$out" || return 1
        RUN_COST_M=$REPLY
        RUN_COST_KIND=$COST_ESTIMATED
      fi
      ;;
    aider)
      # Its last `Tokens: ... Cost: $X message, $Y session.` line: the session is the run.
      # A model its price table does not know prints tokens only: no cost.
      engine_last_line_v "$log" 'Tokens: ' || return 1
      [[ $REPLY =~ \ Cost:\ \$[0-9.]+\ message,\ \$([0-9]*\.?[0-9]+)\ session\.$ ]] || return 1
      RUN_COST_M=$(cost_to_micro "${BASH_REMATCH[1]}") || return 1
      RUN_COST_KIND=$COST_REPORTED
      ;;
    *) return 1 ;;
  esac
  return 0
}

# ---- preflight: the CLI's version, its credentials, the env file

# engine_env_load: reads ENV_FILE (loop.toml `env-file`) into the environment: `KEY=VALUE`
# lines, `#` comments and blank lines; never sourced, nothing in a value is expanded (one
# pair of surrounding quotes is taken off). The file must be a regular file, not a
# symlink, owned by the user running the loop, readable by nobody else (mode 0600). A key
# the runner itself uses, or one that changes how programs start (BASH_ENV, LD_*, ...), is
# refused. Any refusal stops the run (preflight).
engine_env_load() {
  local f=$ENV_FILE line k v n=0 mode
  [[ -n $f ]] || return 0
  [[ $f == /* ]] || preflight_fail "env-file '$f' is not an absolute path: give the full path in loop.toml"
  [[ ! -L $f ]] || preflight_fail "env-file $f is a symlink: name the file itself (a link could be pointed elsewhere)"
  [[ -f $f ]] || preflight_fail "env-file $f is not a regular file: create it (KEY=VALUE lines, chmod 600)"
  [[ -O $f ]] || preflight_fail "env-file $f is not owned by $(id -un 2>/dev/null || echo you): it holds secrets; chown it, or name one of your own"
  mode=$(LC_ALL=C ls -ld -- "$f" 2>/dev/null) || mode=''
  mode=${mode%% *}
  [[ $mode =~ ^-rw?-{7}[.+@]?$ ]] || preflight_fail "env-file $f has mode ${mode:-unknown}: it holds secrets; run chmod 600 $f"
  [[ -r $f ]] || preflight_fail "env-file $f cannot be read: run chmod 600 $f"
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    line=${line%$'\r'}
    [[ $line =~ ^[[:space:]]*(#.*)?$ ]] && continue
    if [[ ! $line =~ ^([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]]; then
      preflight_fail "env-file $f line $n is not KEY=VALUE (no 'export', no spaces around '='): fix the line"
    fi
    k=${BASH_REMATCH[1]}
    v=${BASH_REMATCH[2]}
    case $k in
      BASH_ENV | ENV | SHELLOPTS | BASHOPTS | IFS | PS4 | CDPATH | GLOBIGNORE | BASH_* | LD_* | DYLD_* | ORBIT_* | GIT_* | TZ)
        preflight_fail "env-file $f line $n sets $k, which changes how the runner and its programs start: remove the line"
        ;;
    esac
    # A variable of the runner's own (set, not exported) is never overwritten from a file.
    if [[ -n ${!k+x} && $(declare -p "$k" 2>/dev/null) != "declare -"*x* ]]; then
      preflight_fail "env-file $f line $n sets $k, a name the runner uses: remove the line"
    fi
    if [[ $v =~ ^\"(.*)\"$ || $v =~ ^\'(.*)\'$ ]]; then
      v=${BASH_REMATCH[1]}
    fi
    export "$k=$v"
  done <"$f"
  orbit_log "env-file $f: $n line(s) read"
}

# engine_probe_v LIMIT ARGS...: runs the agent's CLI with ARGS (stdin empty, in TMPDIR, at
# most LIMIT seconds: a probe that hangs is stopped, and says so). REPLY is its output
# (the first 4 KB), ENGINE_PROBE_RC its exit code, ENGINE_PROBE_TIMED_OUT 1 when stopped.
ENGINE_PROBE_RC=0
ENGINE_PROBE_TIMED_OUT=0
engine_probe_v() {
  local limit=$1 f res
  shift
  ENGINE_PROBE_RC=0 ENGINE_PROBE_TIMED_OUT=0 REPLY=
  f=$(mktemp "${TMPDIR:-/tmp}/orbit-probe.XXXXXX") || return 1
  res=$(
    cd -- "${TMPDIR:-/tmp}" || exit "$EXIT_PREFLIGHT"
    orbit_run_bounded "$limit" 1 /dev/null "$f" "$AGENT_ABS" "$@"
    printf '%s %s' "$ORBIT_RC" "$ORBIT_TIMED_OUT"
  ) || res='1 0'
  read -r ENGINE_PROBE_RC ENGINE_PROBE_TIMED_OUT <<<"$res"
  REPLY=$(head -c 4096 -- "$f" 2>/dev/null) || REPLY=
  rm -f -- "$f"
}

# engine_workspace_check: opencode reads no project configuration in a loop (see
# engine_preflight): a configuration file the user names that lies in the workspace (known
# once the state is loaded), which the agent writes, is refused.
engine_workspace_check() {
  local v p d
  [[ $ENGINE == opencode ]] || return 0
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
  [[ $ENGINE == opencode ]] || return 0
  if [[ -e $WS/opencode.json || -e $WS/opencode.jsonc || -d $WS/.opencode ]]; then
    orbit_log "opencode: the workspace's opencode.json and .opencode/ are not read (the agent could rewrite them): put the provider and model in ~/.config/opencode/opencode.json, or in a file outside the workspace named by OPENCODE_CONFIG"
  fi
}

# engine_preflight: for a built-in engine, records the CLI's version (ENGINE_VERSION) and
# stops the run before anything is spent (exit 2, with the fix) when the CLI says it has
# no credentials (`claude auth status`, `codex login status`) or, for gemini and qwen (no
# probe), when nothing in the environment or its settings names one. A probe that does not answer
# in time stops the run too: a CLI that hangs on its own status would hang every run.
ENGINE_PROBE_LIMIT=20
engine_preflight() {
  local fix why
  [[ $ENGINE != custom ]] || return 0
  engine_probe_v "$ENGINE_PROBE_LIMIT" --version
  if ((ENGINE_PROBE_TIMED_OUT)); then
    preflight_fail "\`$ENGINE --version\` did not answer within ${ENGINE_PROBE_LIMIT}s: check the CLI ($AGENT_ABS) in a terminal"
  fi
  REPLY=${REPLY%%$'\n'*}
  ENGINE_VERSION=${REPLY//[!A-Za-z0-9._ ()+-]/}
  ENGINE_VERSION=${ENGINE_VERSION:0:80}
  engine_auth_fix_v
  fix=$REPLY
  case $ENGINE in
    claude)
      engine_probe_v "$ENGINE_PROBE_LIMIT" auth status
      if ((ENGINE_PROBE_TIMED_OUT)); then
        preflight_fail "claude: \`claude auth status\` did not answer within ${ENGINE_PROBE_LIMIT}s: check the CLI in a terminal"
      fi
      if ((ENGINE_PROBE_RC != 0)) && [[ $REPLY =~ \"loggedIn\":\ ?false ]]; then
        preflight_fail "claude: not logged in (\`claude auth status\`): $fix"
      fi
      ;;
    codex)
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
      ;;
    gemini)
      local settings=${GEMINI_CLI_HOME:-${HOME:-}}/.gemini
      if [[ -z ${GEMINI_API_KEY:-}${GOOGLE_API_KEY:-}${GOOGLE_GEMINI_BASE_URL:-}${GOOGLE_CLOUD_PROJECT:-} &&
        ${GOOGLE_GENAI_USE_VERTEXAI:-} != true && ${GOOGLE_GENAI_USE_GCA:-} != true && ${CLOUD_SHELL:-} != true &&
        ${GEMINI_CLI_USE_COMPUTE_ADC:-} != true ]] &&
        ! grep -qs '"selectedType"' -- "$settings/settings.json" &&
        [[ ! -s $settings/oauth_creds.json && ! -s $settings/.env && ! -s ${HOME:-/nonexistent}/.env ]]; then
        preflight_fail "gemini: no credentials (no GEMINI_API_KEY, no login in $settings): $fix"
      fi
      ;;
    copilot)
      # A GitHub token (the variables copilot reads, gh's login, copilot's own /login) or
      # a provider of the user's own (BYOK).
      local chome=${COPILOT_HOME:-${HOME:-}/.copilot} gh=${GH_CONFIG_DIR:-${XDG_CONFIG_HOME:-${HOME:-}/.config}/gh}
      if [[ -z ${COPILOT_GITHUB_TOKEN:-}${GH_TOKEN:-}${GITHUB_TOKEN:-}${COPILOT_PROVIDER_BASE_URL:-} ]] &&
        ! grep -qsE '"(logged_in_users|last_logged_in_user)"' -- "$chome/config.json" &&
        ! grep -qs 'oauth_token' -- "$gh/hosts.yml"; then
        preflight_fail "copilot: no credentials (no COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN, no login in $chome or gh): $fix"
      fi
      ;;
    opencode)
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
      ;;
    aider)
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
      ;;
    qwen)
      # qwen reads a key from its environment (OPENAI_*, ANTHROPIC_*, GEMINI_*, GOOGLE_*),
      # its settings (security.auth, modelProviders) or a .env file; a key in the argv counts.
      local qdir=${QWEN_HOME:-${HOME:-}/.qwen}
      if [[ -z ${OPENAI_API_KEY:-}${ANTHROPIC_API_KEY:-}${GEMINI_API_KEY:-}${GOOGLE_API_KEY:-}${GOOGLE_CLOUD_PROJECT:-}${DASHSCOPE_API_KEY:-}${QWEN_OAUTH:-} ]] &&
        ! grep -qsE '"(apiKey|envKey|selectedType)"' -- "$qdir/settings.json" &&
        [[ ! -s $qdir/.env && ! -s ${HOME:-/nonexistent}/.env && " ${AGENT_ARGV[*]} " != *" --openai-api-key"* ]]; then
        preflight_fail "qwen: no credentials (no OPENAI_API_KEY, no provider in $qdir/settings.json): $fix"
      fi
      ;;
  esac
}
