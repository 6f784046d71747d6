# ---- notify: deliver one notification to every configured channel. Never fatal.

# notify_channel NAME CMD...: run one channel under the notify timeout; log its outcome.
notify_channel() {
  local name=$1 out
  shift
  out=$(mktemp "${TMPDIR:-/tmp}/orbit-notify.XXXXXX")
  orbit_run_bounded "$NOTIFY_TIMEOUT_S" 2 /dev/null "$out" "$@"
  if ((ORBIT_TIMED_OUT)); then
    orbit_log "notify: channel $name timed out after ${NOTIFY_TIMEOUT_S}s"
  elif ((ORBIT_RC != 0)); then
    orbit_log "notify: channel $name failed (exit $ORBIT_RC): $(head -c 300 -- "$out" | tr '\n' ' ')"
  fi
  rm -f -- "$out"
  return 0
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
  local event=${1:-} summary=${2:-} here payload url desktop
  if [[ -z $event ]]; then
    printf 'usage: notify.sh EVENT SUMMARY\n' >&2
    return 0
  fi
  orbit_settings
  here=$(cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
  summary=$(printf '%s' "$summary" | orbit_clean_text | tr '\n' ' ' | head -c 300)
  ORBIT_LOG_FILE="$here/notify.log"
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
      notify_channel desktop notify-send "orbit: $LOOP_NAME" "$event — $summary"
    elif command -v osascript >/dev/null 2>&1; then
      notify_channel desktop osascript -e 'on run argv' -e 'display notification (item 2 of argv) with title (item 1 of argv)' -e 'end run' "orbit: $LOOP_NAME" "$event — $summary"
    else
      orbit_log "notify: desktop channel set but neither notify-send nor osascript is installed" 2>/dev/null
    fi
  fi
  if [[ -n $NOTIFY_WEBHOOK || -n $NOTIFY_NTFY ]] && ! command -v curl >/dev/null 2>&1; then
    orbit_log "notify: webhook/ntfy channel set but curl is not installed" 2>/dev/null
  else
    if [[ -n $NOTIFY_WEBHOOK ]]; then
      payload=$(notify_payload "$event" "$summary")
      notify_channel webhook curl -fsS -m "$NOTIFY_TIMEOUT_S" -H 'Content-Type: application/json' \
        --data-binary "$payload" -- "$NOTIFY_WEBHOOK"
    fi
    if [[ -n $NOTIFY_NTFY ]]; then
      url=$NOTIFY_NTFY
      [[ $url == http://* || $url == https://* ]] || url="https://ntfy.sh/$url"
      notify_channel ntfy curl -fsS -m "$NOTIFY_TIMEOUT_S" -H "Title: orbit: $LOOP_NAME $event" \
        --data-binary "$summary" -- "$url"
    fi
  fi
  if [[ -n $NOTIFY_CMD ]]; then
    ORBIT_EVENT=$event ORBIT_SUMMARY=$summary ORBIT_LOOP_NAME=$LOOP_NAME \
      notify_channel command "$BASH" -c "$NOTIFY_CMD"
  fi
  return 0
}

main "$@" 2>/dev/null || true
exit
