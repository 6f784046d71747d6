# ---- the engines: what the built-in CLIs (claude, codex, gemini, qwen, aider, opencode,
# ---- copilot) and a custom agent share. A loop's runner holds its own engine's part after
# ---- this one (lib/engines/<engine>.sh, chosen when orbit renders the loop: no other
# ---- engine's code is in it), and every engine's part defines the same functions:
# ----   engine_last_message_v LOG       the CLI's last message, as it printed it
# ----   engine_login_fix_v              what a human does about refused credentials
# ----   engine_retrying_v LOG           whether it was retrying a 429 when the run ended
# ----   engine_classify_own_v LOG RC TIMED_OUT
# ----                                   the outcome its own output says (status 1: the
# ----                                   generic rules, deadline_classify_v, decide)
# ----   engine_cost_v LOG               what the run cost, from its output, and the
# ----                                   tokens it used where the output counts them
# ----   engine_preflight                its version, its environment, its credentials
# ----   engine_workspace_check          its settings that must not lie in the workspace
# ----   engine_workspace_note           what it does not read in the workspace
# ----   engine_workspace_excludes ARRAY its own files at the workspace's root
# ----   engine_after_run                what it left in the agent's folder
# ----   engine_home_paths               its state under HOME, for the sandbox
# ----   engine_net_hosts                its API's hosts, for the sandbox's network allowlist
# ----   engine_home_held                its user-level files that name commands, held
# ----   engine_migrate_note             what a contract 1.0 loop of it is told
# ---- and helpers of its own named after it (engine_gemini_block_v, engine_aider_tail_v, ...).
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
# What the last agent run cost, in micro-dollars, and how it is known (COST_*): the
# engine's report (its part's engine_cost_v), else what record_cost_of_run found instead.
RUN_COST_M=0
RUN_COST_KIND=

# engine_cost_run_is MICRO_USD KIND: the last run's cost, as record_cost_of_run found it, or as its caller
# took it elsewhere (the fan-out's, whose candidates' costs are in the ledger already).
engine_cost_run_is() {
  RUN_COST_M=$1 RUN_COST_KIND=$2
}

# engine_said_forget: what the CLI said of the last run (its message, a limit's reset, why a
# failure is permanent) is forgotten: it was said of another run (a fan-out's candidate).
engine_said_forget() {
  ENGINE_MESSAGE='' ENGINE_RESUME_AT=''
  deadline_permanent_why_is ''
}

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
  engine_last_message_v "$1"
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
  engine_login_fix_v
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
  deadline_permanent_why_is "$ENGINE: $what: \"$REPLY\": $ENGINE_FIX"
  REPLY=$OUTCOME_PERMANENT
}

# engine_rate_limited: the run hit a rate or usage limit; ENGINE_RESUME_AT when it lifts.
engine_rate_limited() {
  engine_reset_at_v "$ENGINE_MESSAGE" || true
  ENGINE_RESUME_AT=$REPLY
  REPLY=$OUTCOME_RATE_LIMITED
}

# engine_classify_v LOG RC TIMED_OUT: REPLY is ok | timeout | rate_limited | permanent |
# agent_error, from the engine's own structured output; PERMANENT_WHY says why a permanent
# failure is one (with the fix), ENGINE_RESUME_AT when a rate limit lifts. A custom engine,
# or a built-in one that printed nothing structured, goes by the generic rules.
engine_classify_v() {
  local log=$1 rc=$2 to=$3
  ENGINE_MESSAGE='' ENGINE_FIX='' ENGINE_RESUME_AT=''
  deadline_permanent_why_is ''
  engine_classify_own_v "$@" && return 0
  deadline_classify_v "$log" "$rc" "$to"
  if [[ $REPLY == "$OUTCOME_RATE_LIMITED" ]]; then
    ENGINE_RESUME_AT=$(deadline_rate_limit_resume_at "$log")
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

# ---- cost: claude, aider and opencode report USD; codex, gemini and qwen report tokens,
# ---- priced by TOKEN_PRICES (each engine's engine_cost_v reads its own)

# The tokens the last agent run used, input (cached ones included) and output, as its
# engine's output counts them, priced or not: set by engine_cost_v where the output names
# them (claude, codex, gemini, qwen, opencode), "" when it does not (aider prints rounded
# per-message figures, copilot none).
RUN_TOKENS_IN=
RUN_TOKENS_OUT=
# The model the last run's session says it used (claude's and qwen's init line), "" where
# its output does not say.
RUN_MODEL=
# engine_tokens_forget: no tokens nor model known yet for the run just ended.
engine_tokens_forget() {
  RUN_TOKENS_IN='' RUN_TOKENS_OUT='' RUN_MODEL=''
}

# engine_model_seen LOG: RUN_MODEL from the `model` of the CLI's session init line
# (`{"type":"system","subtype":"init",...}`), when it is a plain model name.
engine_model_seen() {
  engine_last_line_v "$1" '{"type":"system","subtype":"init"' || return 0
  engine_json_str_v "$REPLY" model || return 0
  [[ $REPLY =~ ^[A-Za-z0-9][][A-Za-z0-9._:/@+-]{0,99}$ ]] && RUN_MODEL=$REPLY
  return 0
}

# engine_tokens_seen INPUT OUTPUT: the run used these tokens (unsigned integers, else
# nothing is taken).
engine_tokens_seen() {
  [[ $1 =~ ^[0-9]{1,15}$ && $2 =~ ^[0-9]{1,15}$ ]] || return 0
  RUN_TOKENS_IN=$1 RUN_TOKENS_OUT=$2
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

# ---- preflight: the CLI's version, its credentials, the env file

# engine_env_load: reads ENV_FILE (loop.toml `env-file`) into the environment: `KEY=VALUE`
# lines, `#` comments and blank lines; never sourced, nothing in a value is expanded (one
# pair of surrounding quotes is taken off). The file must be a regular file, not a
# symlink, owned by the user running the loop, readable by nobody else (mode 0600), and
# the file the loop's first run held (pins.home: a change is permission_hijack, exit 3). A
# key the runner itself uses, one that changes how programs start or which run (BASH_ENV,
# LD_*, PATH, PYTHON*, NODE_OPTIONS, PERL5*, ...), or one that moves the engine's
# user-level files (HOME, XDG_*, CODEX_HOME, ...) is refused. Any refusal stops the run
# (preflight).
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
  if ! home_env_unchanged; then
    config_footer "$STATUS_CONTINUE" "permission_hijack: env-file $f changed since the loop's first run"
    orbit_die "$EXIT_INTEGRITY" "permission_hijack: env-file $f changed since the loop's first run held it (sha256 $HOME_WANT, now $HOME_HAVE): nothing of it is loaded; review it, then 'orbit recover --repin' to accept it"
  fi
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
      # Which programs run, and what an interpreter loads before its script (a module, an
      # option, a startup file): the runner's tools and the engine's CLI are found and
      # started as they were when the loop was set up.
      PATH | PYTHON* | NODE_OPTIONS | NODE_PATH | NODE_REPL_EXTERNAL_MODULE | PERL5* | PERLLIB | PERLIO* | PERL_* | \
        RUBYOPT | RUBYLIB | RUBY_* | GEM_* | BUNDLE_* | JAVA_TOOL_OPTIONS | _JAVA_OPTIONS | JDK_JAVA_OPTIONS | \
        LUA_INIT* | LUA_PATH* | LUA_CPATH* | TCLLIBPATH | GCONV_PATH | [Nn][Pp][Mm]_[Cc][Oo][Nn][Ff][Ii][Gg]_[Nn][Oo][Dd][Ee]_[Oo][Pp][Tt][Ii][Oo][Nn][Ss] | \
        [Nn][Pp][Mm]_[Cc][Oo][Nn][Ff][Ii][Gg]_[Ss][Cc][Rr][Ii][Pp][Tt]_[Ss][Hh][Ee][Ll][Ll] | \
        EDITOR | VISUAL | PAGER | BROWSER)
        preflight_fail "env-file $f line $n sets $k, which changes which programs run or what they load before their own code: remove the line"
        ;;
      # Where the engine reads its user-level files from: those are held where the first
      # run found them.
      HOME | XDG_CONFIG_HOME | XDG_CONFIG_DIRS | CLAUDE_CONFIG_DIR | CODEX_HOME | GEMINI_CLI_HOME | QWEN_HOME | COPILOT_HOME | OPENCODE_CONFIG* | OPENCODE_PERMISSION)
        preflight_fail "env-file $f line $n sets $k, which moves the engine's user-level files (held from the loop's first run): remove the line"
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
    proc_run_bounded "$limit" 1 /dev/null "$f" "$AGENT_ABS" "$@"
    printf '%s %s' "$ORBIT_RC" "$ORBIT_TIMED_OUT"
  ) || res='1 0'
  # shellcheck disable=SC2034  # the probe's answer: each engine's preflight reads what it needs
  read -r ENGINE_PROBE_RC ENGINE_PROBE_TIMED_OUT <<<"$res"
  REPLY=$(head -c 4096 -- "$f" 2>/dev/null) || REPLY=
  rm -f -- "$f"
}

# engine_version_probe: ENGINE_VERSION, the first line of the CLI's `--version` (each
# built-in engine's preflight starts here). A probe that does not answer in time stops the
# run: a CLI that hangs on its own version would hang every run. A minute: a Node CLI on a
# busy machine was seen to take over 20 s to say its version.
ENGINE_PROBE_LIMIT=60
engine_version_probe() {
  engine_probe_v "$ENGINE_PROBE_LIMIT" --version
  if ((ENGINE_PROBE_TIMED_OUT)); then
    preflight_fail "\`$ENGINE --version\` did not answer within ${ENGINE_PROBE_LIMIT}s: check the CLI ($AGENT_ABS) in a terminal"
  fi
  REPLY=${REPLY%%$'\n'*}
  ENGINE_VERSION=${REPLY//[!A-Za-z0-9._ ()+-]/}
  ENGINE_VERSION=${ENGINE_VERSION:0:80}
}
