# ---- notify: deliver one notification to every configured channel at once, each bounded by
# ---- NOTIFY_TIMEOUT. Never fatal. Webhook URLs and ntfy topics are secrets: they come from
# ---- notify.secrets (read, never sourced), an environment variable or loop.toml, reach
# ---- curl through a config file on its stdin (never its argv) and are never logged.

# The bound of every channel (NOTIFY_TIMEOUT, checked when a notification is sent).
NOTIFY_TIMEOUT_S=10
NOTIFY_WEBHOOKS=()
NOTIFY_NTFYS=()
NOTIFY_JOBS=()
# curl's own exit status for "operation timed out" (-m): the same outcome as our bound firing.
NOTIFY_CURL_TIMED_OUT=28

# notify_channel NAME INFILE CMD...: run one channel under the notify timeout, stdin from
# INFILE (removed afterwards); log its outcome.
notify_channel() {
  local name=$1 infile=$2 out
  shift 2
  out=$(mktemp "${TMPDIR:-/tmp}/orbit-notify.XXXXXX")
  proc_run_bounded "$NOTIFY_TIMEOUT_S" 2 "$infile" "$out" "$@"
  # curl's -m and our bound are the same length: whichever fires first, it timed out.
  if ((ORBIT_TIMED_OUT)) || [[ $1 == curl && $ORBIT_RC == "$NOTIFY_CURL_TIMED_OUT" ]]; then
    orbit_log "notify: channel $name timed out after ${NOTIFY_TIMEOUT_S}s"
  elif ((ORBIT_RC != 0)); then
    orbit_log "notify: channel $name failed (exit $ORBIT_RC): $(head -c 300 -- "$out" | tr '\n' ' ')"
  fi
  rm -f -- "$out"
  if [[ $infile != /dev/null ]]; then
    rm -f -- "$infile"
  fi
  return 0
}

# notify_spawn NAME INFILE CMD...: notify_channel in the background, so that every channel
# runs at once and the whole notification takes one timeout at most.
notify_spawn() {
  notify_channel "$@" &
  NOTIFY_JOBS+=("$!")
}

# notify_curl_config_v URL: REPLY is a new file (mode 0600, from mktemp) that gives curl the
# URL as `url = "..."`, so that the secret never shows in the process list.
notify_curl_config_v() {
  local url=$1
  url=${url//\\/\\\\}
  url=${url//\"/\\\"}
  REPLY=$(mktemp "${TMPDIR:-/tmp}/orbit-notify-url.XXXXXX")
  printf 'url = "%s"\n' "$url" >"$REPLY"
}

# notify_url_ok TEXT: status 0 for an http(s) URL without a blank or control character.
notify_url_ok() {
  local LC_ALL=C
  [[ $1 =~ ^https?://[^[:space:][:cntrl:]]+$ ]]
}

# notify_topic_ok TEXT: status 0 for an ntfy topic or an http(s) URL.
notify_topic_ok() {
  local LC_ALL=C
  [[ $1 =~ ^[A-Za-z0-9_-]+$ ]] || notify_url_ok "$1"
}

# notify_add KIND VALUE WHERE: adds a webhook or an ntfy target when it is well formed; a
# malformed one is logged by WHERE it came from, never by its text (it may be a secret).
notify_add() {
  local kind=$1 value=$2 where=$3
  case $kind in
    webhook)
      if notify_url_ok "$value"; then
        NOTIFY_WEBHOOKS+=("$value")
      else
        orbit_log "notify: $where: not an http:// or https:// URL; skipped"
      fi
      ;;
    ntfy)
      if notify_topic_ok "$value"; then
        NOTIFY_NTFYS+=("$value")
      else
        orbit_log "notify: $where: not an ntfy topic or URL; skipped"
      fi
      ;;
  esac
}

# notify_secrets_read FILE: adds the channels of FILE (notify.secrets). The file is read,
# never sourced, and refused whole when it is a symlink, not a regular file, not the user's,
# larger than 64 KiB or writable by group or others (someone else could redirect the
# notifications). Each line is blank, a # comment, or webhook=URL or ntfy=TOPIC; any other
# line is logged by its number (never its text) and skipped.
notify_secrets_read() {
  local LC_ALL=C file=$1 line key value n=0 mode
  [[ -e $file || -L $file ]] || return 0
  if [[ -L $file || ! -f $file ]]; then
    orbit_log "notify: ${file##*/} is a symlink or not a regular file: not read (its channels stay off)"
    return 0
  fi
  if [[ ! -O $file ]]; then
    orbit_log "notify: ${file##*/} belongs to another user: not read (its channels stay off)"
    return 0
  fi
  mode=$(ls -ld -- "$file" 2>/dev/null) || mode=''
  if [[ ${mode:5:1} != - || ${mode:8:1} != - ]]; then
    orbit_log "notify: ${file##*/} is writable by group or others: not read (its channels stay off); chmod 600 ${file##*/}"
    return 0
  fi
  if [[ ${mode:4:1} != - || ${mode:7:1} != - ]]; then
    orbit_log "notify: warning: ${file##*/} is readable by group or others: chmod 600 ${file##*/}"
  fi
  if (($(wc -c <"$file") > 65536)); then
    orbit_log "notify: ${file##*/} is larger than 64 KiB: not read (its channels stay off)"
    return 0
  fi
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    line=${line%$'\r'}
    if [[ -z ${line//[[:space:]]/} || $line == '#'* ]]; then
      continue
    fi
    key=${line%%=*}
    value=${line#*=}
    key=${key//[[:space:]]/}
    value=${value#"${value%%[![:space:]]*}"}
    value=${value%"${value##*[![:space:]]}"}
    if [[ $line != *=* || ($key != webhook && $key != ntfy) ]]; then
      orbit_log "notify: ${file##*/} line $n: not webhook=URL or ntfy=TOPIC; skipped"
      continue
    fi
    notify_add "$key" "$value" "${file##*/} line $n"
  done <"$file"
}

# notify_add_words KIND TEXT LABEL: one channel of KIND per blank-separated word of TEXT,
# each named "LABEL word N" in what is logged (never the word itself).
notify_add_words() {
  local kind=$1 label=$3 word i=0
  local -a words=()
  read -r -a words <<<"$2" || true
  for word in "${words[@]}"; do
    i=$((i + 1))
    notify_add "$kind" "$word" "$label word $i"
  done
}

# notify_channels_load DIR: every webhook and ntfy target, from loop.toml's settings (the
# words of NOTIFY_WEBHOOK and NOTIFY_NTFY), the variable NOTIFY_WEBHOOK_ENV names, and
# DIR/notify.secrets.
notify_channels_load() {
  local dir=$1 name
  notify_add_words webhook "${NOTIFY_WEBHOOK:-}" NOTIFY_WEBHOOK
  notify_add_words ntfy "${NOTIFY_NTFY:-}" NOTIFY_NTFY
  name=${NOTIFY_WEBHOOK_ENV:-}
  if [[ -n $name ]]; then
    if [[ ! $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
      orbit_log "notify: NOTIFY_WEBHOOK_ENV='$name' is not a variable name; skipped"
    elif [[ -z ${!name:-} ]]; then
      orbit_log "notify: \$$name (notify-webhook-env) is not set in this environment: its webhook stays off"
    else
      notify_add_words webhook "${!name}" "\$$name"
    fi
  fi
  notify_secrets_read "$dir/notify.secrets"
}

notify_payload() {
  local event=$1 summary=$2 text
  text="[orbit] $LOOP_NAME: $event — $summary"
  printf '{"loop":%s,"event":%s,"summary":%s,"text":%s,"content":%s,"ts":"%s"}' \
    "$(orbit_json_str "$LOOP_NAME")" "$(orbit_json_str "$event")" \
    "$(orbit_json_str "$summary")" "$(orbit_json_str "$text")" \
    "$(orbit_json_str "$text")" "$(orbit_iso_now)"
}

main() {
  local event=${1:-} summary=${2:-} here payload url desktop i job
  if [[ -z $event ]]; then
    printf 'usage: notify.sh EVENT SUMMARY\n' >&2
    return 0
  fi
  orbit_settings
  # The runner may run the baseline copy (.pins/notify.sh) when the loop's own does not
  # match its pin: it names the loop directory, whose notify.log and notify.secrets count.
  if [[ -n ${ORBIT_NOTIFY_LOOP_DIR:-} && -d $ORBIT_NOTIFY_LOOP_DIR ]]; then
    here=$ORBIT_NOTIFY_LOOP_DIR
  else
    here=$(cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
  fi
  summary=$(printf '%s' "$summary" | orbit_clean_text | tr '\n' ' ' | head -c 300)
  orbit_log_to "$here/notify.log"
  orbit_log "notify: $event — $summary" 2>/dev/null
  # Never fatal: a value the runner would refuse is logged and replaced by the default.
  NOTIFY_TIMEOUT_S=10
  if orbit_setting_v NOTIFY_TIMEOUT; then
    NOTIFY_TIMEOUT_S=$REPLY
  else
    orbit_log "notify: $ORBIT_SETTING_ERR; using ${NOTIFY_TIMEOUT_S}s" 2>/dev/null
  fi
  desktop=0
  if orbit_setting_v NOTIFY_DESKTOP; then
    desktop=$REPLY
  else
    orbit_log "notify: $ORBIT_SETTING_ERR; the desktop channel stays off" 2>/dev/null
  fi
  if ((desktop)); then
    if command -v notify-send >/dev/null 2>&1; then
      notify_spawn desktop /dev/null notify-send "orbit: $LOOP_NAME" "$event — $summary"
    elif command -v osascript >/dev/null 2>&1; then
      notify_spawn desktop /dev/null osascript -e 'on run argv' -e 'display notification (item 2 of argv) with title (item 1 of argv)' -e 'end run' "orbit: $LOOP_NAME" "$event — $summary"
    else
      orbit_log "notify: desktop channel set but neither notify-send nor osascript is installed" 2>/dev/null
    fi
  fi
  notify_channels_load "$here" 2>/dev/null
  if ((${#NOTIFY_WEBHOOKS[@]} + ${#NOTIFY_NTFYS[@]} > 0)) && ! command -v curl >/dev/null 2>&1; then
    orbit_log "notify: webhook/ntfy channel set but curl is not installed" 2>/dev/null
  else
    payload=$(notify_payload "$event" "$summary")
    for ((i = 0; i < ${#NOTIFY_WEBHOOKS[@]}; i++)); do
      notify_curl_config_v "${NOTIFY_WEBHOOKS[i]}"
      notify_spawn "webhook $((i + 1))" "$REPLY" curl -fsS -m "$NOTIFY_TIMEOUT_S" -K - \
        -H 'Content-Type: application/json' --data-binary "$payload"
    done
    for ((i = 0; i < ${#NOTIFY_NTFYS[@]}; i++)); do
      url=${NOTIFY_NTFYS[i]}
      [[ $url == http://* || $url == https://* ]] || url="https://ntfy.sh/$url"
      notify_curl_config_v "$url"
      notify_spawn "ntfy $((i + 1))" "$REPLY" curl -fsS -m "$NOTIFY_TIMEOUT_S" -K - \
        -H "Title: orbit: $LOOP_NAME $event" --data-binary "$summary"
    done
  fi
  if [[ -n $NOTIFY_CMD ]]; then
    ORBIT_EVENT=$event ORBIT_SUMMARY=$summary ORBIT_LOOP_NAME=$LOOP_NAME \
      notify_spawn command /dev/null "$BASH" -c "$NOTIFY_CMD"
  fi
  # Each channel is bounded by its own timeout, so this wait is too.
  for job in "${NOTIFY_JOBS[@]}"; do
    wait "$job" 2>/dev/null || true
  done
  return 0
}

main "$@" 2>/dev/null || true
exit
