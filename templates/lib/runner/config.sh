# ---- run-loop: the runner. Preflight → lock → state → integrity → iterations → footer.
# ---- Everything it decides is written down: iterations/NNNNNN/, progress.md, events.jsonl,
# ---- state.env. The agent never decides DONE; the gate in done_gate does.

# The loop directory and the user's checkout it lives in (never touched), found by locate.
LOOP_DIR=
REPO_ROOT=
# The iteration's record, shared by every part: what the iteration did, as result.env has it.
declare -A R=()
# Whether this run printed its footer (a run prints exactly one: footer).
FOOTER_DONE=0

config_usage() {
  cat <<'USAGE'
usage: run-loop.sh [--once] [--help]
  --once   do at most one iteration (a cron tick); exit 10 when work remains
Settings come from loop.toml (rendered into lib.sh); an environment variable of the same name
overrides each, e.g. MAX_ITERATIONS=5 bash run-loop.sh
USAGE
}

# ---- settings: validated once, before any value reaches arithmetic.
# What config_settings_check computes: the seconds of each duration, the micro-dollars of each
# amount ("" for none), and config_verify_budget the bounds of verify.sh and holdout.sh.
EXEC_TIMEOUT_S=0
LOOP_TIMEOUT_S=0
CHECK_TIMEOUT_S=0
RETRY_BASE_DELAY_S=0
CB_COOLDOWN_S=0
KILL_GRACE_S=0
COMMIT_TIMEOUT_S=0
NOTIFY_TIMEOUT_S=10
USD_CAP_M=
USD_PER_RUN_CAP_M=
USD_PER_ITER_CAP_M=
COST_ESTIMATE_M=
VERIFY_BUDGET_S=0
# config_settings_check: every setting of the contract (ORBIT_SETTINGS, the loop's identity among
# them) by its kind and bounds, the ones loop.toml is validated by; the first bad one stops
# the run (EXIT_PREFLIGHT, nothing run, nothing written). Sets the values the runner
# computes with: NAME_S, the seconds of a duration, and NAME_M, the micro-dollars of an
# amount ("" for none).
config_settings_check() {
  local name grep_rc
  for name in "${ORBIT_SETTINGS[@]}"; do
    orbit_setting_v "$name" || orbit_die "$EXIT_PREFLIGHT" "$ORBIT_SETTING_ERR"
    case $name in
      EXEC_TIMEOUT) EXEC_TIMEOUT_S=$REPLY ;;
      LOOP_TIMEOUT) LOOP_TIMEOUT_S=$REPLY ;;
      CHECK_TIMEOUT) CHECK_TIMEOUT_S=$REPLY ;;
      RETRY_BASE_DELAY) RETRY_BASE_DELAY_S=$REPLY ;;
      CB_COOLDOWN) CB_COOLDOWN_S=$REPLY ;;
      KILL_GRACE) KILL_GRACE_S=$REPLY ;;
      COMMIT_TIMEOUT) COMMIT_TIMEOUT_S=$REPLY ;;
      NOTIFY_TIMEOUT) NOTIFY_TIMEOUT_S=$REPLY ;;
      USD_CAP) USD_CAP_M=$REPLY ;;
      USD_PER_RUN_CAP) USD_PER_RUN_CAP_M=$REPLY ;;
      USD_PER_ITER_CAP) USD_PER_ITER_CAP_M=$REPLY ;;
      COST_ESTIMATE_USD) COST_ESTIMATE_M=$REPLY ;;
      PLACEHOLDER_PATTERN)
        # grep's own judgment of the expression (status 2: not one it can use), as orbit
        # init's (config.rs, grep_takes).
        grep_rc=0
        grep -qE -- "$PLACEHOLDER_PATTERN" </dev/null 2>/dev/null || grep_rc=$?
        if ((grep_rc > 1)); then
          orbit_die "$EXIT_PREFLIGHT" "PLACEHOLDER_PATTERN='$PLACEHOLDER_PATTERN' is not an extended regular expression grep accepts: fix placeholder-pattern in loop.toml and run orbit init --force"
        fi
        ;;
    esac
    config_settings_rule "$name" || orbit_die "$EXIT_PREFLIGHT" "$REPLY"
  done
}

# config_settings_rule NAME: the rule beyond its kind that loop.toml's validation holds the setting
# NAME to (LoopConfig::validate), so that a value from the environment is refused as orbit
# init refuses it in loop.toml. Status 1 with REPLY saying what to do. A
# channel's URL may be a secret: it is named by its place, never by its text.
config_settings_rule() {
  local LC_ALL=C name=$1 value w i=0 bad='' url='^https?://[^[:space:][:cntrl:]]+$'
  local -a words
  value=${!name-}
  REPLY=''
  # The words as written, split on blanks and never globbed where the runner stands.
  read -ra words <<<"$value"
  case $name in
    NOTIFY_WEBHOOK | NOTIFY_NTFY)
      for w in "${words[@]}"; do
        i=$((i + 1))
        # notify.sh's rules (notify_url_ok, notify_topic_ok), which loop.toml's are.
        if [[ $name == NOTIFY_WEBHOOK ]]; then
          [[ $w =~ $url ]] || bad="word $i is not an http:// or https:// URL"
        else
          [[ $w =~ ^[A-Za-z0-9_-]+$ || $w =~ $url ]] || bad="word $i is neither a topic (letters, digits, '-', '_') nor an http(s) URL"
        fi
        [[ -z $bad ]] || break
      done
      ;;
    NOTIFY_WEBHOOK_ENV)
      [[ -z $value || $value =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] ||
        bad="'$value' is not the name of an environment variable, such as SLACK_WEBHOOK_URL"
      ;;
    ENV_FILE)
      [[ -z $value ]] || { [[ $value == /* ]] && config_settings_plain_path "$value"; } ||
        bad="'${value//[[:cntrl:]]/?}' is not the absolute path of a file of KEY=VALUE lines (no control character, no . or .. segment)"
      ;;
    WORKSPACE_SETTING)
      [[ -z $value ]] || config_settings_plain_path "$value" ||
        bad="'${value//[[:cntrl:]]/?}' is not a plain path (no control character, no . or .. segment)"
      ;;
    ALLOW_HOSTS_SETTING)
      for w in "${words[@]}"; do
        config_host_ok "$w" || bad="'${w//[[:cntrl:]]/?}' is not HOST or HOST:PORT (such as api.example.com or 127.0.0.1:8080)"
        [[ -z $bad ]] || break
      done
      ;;
    OFFLINE_ENV_SETTING)
      for w in "${words[@]}"; do
        # orbit's check_offline_var: NAME=VALUE, NAME not one the shell, the loader or orbit obeys.
        [[ $w =~ ^([A-Za-z_][A-Za-z0-9_]*)=[^[:cntrl:]]*$ && ! ${BASH_REMATCH[1]} =~ ^(PATH|HOME|BASH_ENV|ENV|SHELLOPTS|BASHOPTS|IFS|CDPATH|PS4|LD_.*|ORBIT_.*)$ ]] ||
          bad="'${w//[[:cntrl:]]/?}' is not NAME=VALUE of a variable that neither the shell, the loader nor orbit obeys, such as CARGO_NET_OFFLINE=true"
        [[ -z $bad ]] || break
      done
      ;;
    SETUP_INPUTS_SETTING)
      for w in "${words[@]}"; do
        [[ $w != /* ]] && config_settings_plain_path "$w" || bad="'${w//[[:cntrl:]]/?}' is not a path from the repository's top (no leading /, no . or .. segment)"
      done
      ;;
    ALLOW_FEWER_TESTS)
      for w in "${words[@]}"; do
        [[ " ${CHECK_NAMES[*]} " == *" $w "* ]] || bad="'$w' is not a check of this loop; its checks are: ${CHECK_NAMES[*]:-none}"
        [[ -z $bad ]] || break
      done
      ;;
  esac
  [[ -n $bad ]] || return 0
  REPLY="$name: $bad"
  if [[ -n ${ORBIT_SETTING_IDENTITY[$name]-} ]]; then
    REPLY+=". Set ${ORBIT_SETTING_IDENTITY[$name]} in loop.toml and run orbit init --force"
  else
    w=${name,,}
    REPLY+=". Set ${w//_/-} in loop.toml and run orbit init --force, or override it with $name=... in the environment"
  fi
  return 1
}

# config_host_ok ENTRY: status 0 when ENTRY is HOST or HOST:PORT as loop.toml's allow-hosts
# takes it (orbit's check_allow_host): a DNS name (a leading "*." for its subdomains), an
# IPv4 address or a bracketed IPv6 address, and a port from 1 to 65535.
config_host_ok() {
  local e=$1 h p='' l v6='^[[]([0-9A-Fa-f:.]+)[]](:([0-9]+))?$' name='^([^]:/[]+)(:([0-9]+))?$'
  local -a labels
  if [[ $e =~ $v6 ]]; then
    p=${BASH_REMATCH[3]}
    [[ ${BASH_REMATCH[1]} == *:* ]] || return 1
  elif [[ $e =~ $name ]]; then
    h=${BASH_REMATCH[1]} p=${BASH_REMATCH[3]}
    h=${h#\*.}
    [[ $h =~ ^[A-Za-z0-9.-]+$ ]] || return 1
    ((${#h} >= 1 && ${#h} <= 253)) || return 1
    [[ $h != *..* && $h != .* && $h != *. ]] || return 1
    IFS=. read -ra labels <<<"$h"
    for l in "${labels[@]}"; do
      [[ $l =~ ^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$ ]] || return 1
    done
  else
    return 1
  fi
  [[ -z $p ]] && return 0
  [[ $p =~ ^[1-9][0-9]{0,4}$ ]] && ((p <= 65535))
}

# config_offline_env ARRAY: the variables of loop.toml's offline-env (NAME=VALUE words,
# checked by orbit init and config_settings_rule; an identity setting, which no environment overrides), into
# the array named ARRAY, for the runs that get them: the agent's
# and a setup's on a tree the agent made (verify.sh exports them for the checks itself).
config_offline_env() {
  local -n offline_out=$1
  offline_out=()
  read -ra offline_out <<<"${OFFLINE_ENV_SETTING:-}"
}

# config_settings_plain_path PATH: no control character, no . or .. segment, at most ORBIT_PATH_MAX
# bytes (config.rs, is_plain_path).
config_settings_plain_path() {
  local LC_ALL=C p=$1
  [[ -n $p && ${#p} -le ORBIT_PATH_MAX && $p != *[[:cntrl:]]* && /$p/ != */./* && /$p/ != */../* ]]
}

# config_settings_notify_timeout: NOTIFY_TIMEOUT_S from its setting before config_settings_check ran (a
# stop that notifies before it); the default when it does not parse.
config_settings_notify_timeout() {
  if [[ $NOTIFY_TIMEOUT_S == 10 ]] && orbit_setting_v NOTIFY_TIMEOUT 2>/dev/null; then
    NOTIFY_TIMEOUT_S=$REPLY
  fi
}

# config_verify_budget: VERIFY_BUDGET_S, verify.sh's own bound: every check's timeout plus a margin.
config_verify_budget() {
  local checks
  checks=$(grep -c '^  run_check ' -- "$LOOP_DIR/verify.sh" || true)
  [[ $checks =~ ^[0-9]+$ ]] || checks=0
  VERIFY_BUDGET_S=$(((checks + 1) * (CHECK_TIMEOUT_S + KILL_GRACE_S) + 30))
  # holdout.sh (a loop rendered before holdout checks has none): its checks run only in
  # the DONE gate.
  # The count is the loop's setting, not what the file holds today: a holdout.sh emptied
  # or removed is a pin failure, never a loop without hidden checks.
  checks=${HOLDOUT_SETTING:-0}
  [[ $checks =~ ^[0-9]+$ ]] || checks=0
  HOLDOUT_CHECKS=$checks
  HOLDOUT_BUDGET_S=$(((checks + 1) * (CHECK_TIMEOUT_S + KILL_GRACE_S) + 30))
}
HOLDOUT_CHECKS=0
HOLDOUT_BUDGET_S=0

# ---- where things are: the loop directory is where this script lives.
config_locate() {
  local src=${BASH_SOURCE[0]}
  if [[ $src == */* ]]; then
    src=${src%/*}
  else
    src=.
  fi
  LOOP_DIR=$(cd -P -- "${src:-/}" && pwd -P)
  orbit_log_to "$LOOP_DIR/runner.log"
  # PATH is what a scheduler gave (cron's is short): what is missing is named, with the fix.
  command -v git >/dev/null 2>&1 ||
    preflight_fail "git is not on PATH ($PATH): install it, or give the scheduler a PATH that has it (orbit schedule writes one)"
  preflight_missing_v "${ORBIT_CORE_TOOLS[@]}"
  [[ -z $REPLY ]] ||
    preflight_fail "the runner needs these programs and PATH ($PATH) does not find them: $REPLY; install them (coreutils, findutils, grep, sed, gawk, diffutils, procps), or give the scheduler a PATH that has them"
  REPO_ROOT=$(git -C "$LOOP_DIR" rev-parse --show-toplevel 2>/dev/null) ||
    preflight_fail "the loop directory $LOOP_DIR is not inside a git work tree: run orbit init inside the repository"

  REPO_ROOT=$(cd -P -- "$REPO_ROOT" && pwd -P)
  # git's file lists, the pins and the runner's own checks are lines: a path with a newline
  # (or any control character) in it cannot be named in them without being misread.
  if [[ $LOOP_DIR$REPO_ROOT == *[[:cntrl:]]* ]]; then
    preflight_fail "the path of the repository or the loop directory holds a newline or another control character (${LOOP_DIR//[[:cntrl:]]/?}): rename or move the repository to a plain path, then run again"
  fi
  state_records_at "$LOOP_DIR"
}

config_settings_footer() {
  config_footer "$STATUS_CONTINUE" "bad setting: $1"
  notify_stop_early "$NOTIFY_EVENT_PREFLIGHT_FAILED" "bad setting: $1"
}

# config_footer STATUS SUMMARY: the run's two footer lines (contract 4), once: a second call (a
# failure on the way out after the footer) prints nothing, so a run has exactly one.
config_footer() {
  local status=$1 summary=$2 REPLY
  ((!FOOTER_DONE)) || return 0
  FOOTER_DONE=1
  summary=${summary//[$'\n\r\t']/ }
  orbit_cut_v "$summary" 180
  summary=$REPLY
  printf 'NEXUS_LOOP_STATUS: %s\nNEXUS_LOOP_SUMMARY: %s\n' "$status" "$summary" 2>/dev/null || true
}

# git in the workspace (the loop's own worktree); config_repo_git in the user's checkout, for what
# only reads it (its HEAD at the first run, the repository's common directory).
config_git_q() { GIT_OPTIONAL_LOCKS=0 git -C "$WS" "$@"; }
config_repo_git() { GIT_OPTIONAL_LOCKS=0 git -C "$REPO_ROOT" "$@"; }
