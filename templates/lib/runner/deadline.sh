# ---- the loop's deadline (LOOP_TIMEOUT) bounds every run inside an iteration too: no agent
# ---- or check run outlives it. DEADLINE_HIT says a run was cut short by it.
DEADLINE_HIT=0
# deadline_hit: a run was cut short (or not started) at the loop's deadline.
deadline_hit() {
  DEADLINE_HIT=1
}

# deadline_cap_v LIMIT: REPLY is LIMIT, or the seconds left before the loop's deadline when
# fewer (0 when it has passed: the run does not start).
deadline_cap_v() {
  local left now
  REPLY=$1
  if ((LOOP_TIMEOUT_S > 0 && S[STARTED_AT] > 0)); then
    printf -v now '%(%s)T' -1
    left=$((S[STARTED_AT] + LOOP_TIMEOUT_S - now))
    if ((left > LOOP_TIMEOUT_S)); then
      # A clock that went back: never more than the whole limit.
      left=$LOOP_TIMEOUT_S
    fi
    if ((left < 0)); then
      left=0
    fi
    if ((left < REPLY)); then
      REPLY=$left
      return 1
    fi
  fi
  return 0
}

# The per-run limit: EXEC_TIMEOUT, or twice the median of the last five runs when
# ADAPTIVE_TIMEOUT=1, bounded to [EXEC_TIMEOUT, 3 x EXEC_TIMEOUT].
deadline_exec_limit_v() {
  local med
  if orbit_true "$ADAPTIVE_TIMEOUT" && [[ -s $LOOP_DIR/.iter-timings.log ]]; then
    med=$(tail -n 5 -- "$LOOP_DIR/.iter-timings.log" | grep -E '^[0-9]+$' | sort -n |
      awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print 0 }')
    med=$((med * 2))
    if ((med < EXEC_TIMEOUT_S)); then
      med=$EXEC_TIMEOUT_S
    fi
    if ((med > EXEC_TIMEOUT_S * 3)); then
      med=$((EXEC_TIMEOUT_S * 3))
    fi
    REPLY=$med
  else
    REPLY=$EXEC_TIMEOUT_S
  fi
}

# deadline_classify_v LOG RC TIMED_OUT: REPLY is ok | timeout | rate_limited | permanent | agent_error;
# PERMANENT_WHY says why a permanent failure is one.
PERMANENT_WHY=
# deadline_permanent_why_is TEXT: why the last run's permanent failure is one (the engine's words, or
# a rate limit's reset too far away), or "" for none.
deadline_permanent_why_is() {
  PERMANENT_WHY=$1
}
# The furthest a rate limit's reset is believed: anything later is not a pause but a stop.
RATE_LIMIT_MAX_WAIT_S=$((7 * 86400))
deadline_classify_v() {
  local log=$1 rc=$2 to=$3 tailtext
  if ((to)); then
    REPLY=$OUTCOME_TIMEOUT
  elif ((rc == 0)); then
    REPLY=$OUTCOME_OK
  elif ((rc == 126 || rc == 127)); then
    REPLY=$OUTCOME_PERMANENT
    PERMANENT_WHY="exit $rc: not found or not permitted (check argv in loop.toml and PATH)"
  else
    REPLY=$OUTCOME_AGENT_ERROR
    tailtext=$(tail -n 40 -- "$log" 2>/dev/null || true)
    # The machine's own errors are a human's to fix, not the provider's limit: retrying
    # them, or pausing until a "reset", only burns time.
    local os_error os_re='disk quota exceeded|no space left on device|read-only file system'
    # Under the sandbox, a read-only file system is the sandbox refusing a write: the
    # agent's error, not the machine's.
    if sandbox_on; then
      os_re='disk quota exceeded|no space left on device'
    fi
    if os_error=$(grep -aoiE -m 1 "$os_re" <<<"$tailtext"); then
      REPLY=$OUTCOME_PERMANENT
      PERMANENT_WHY="exit $rc, and the machine said: ${os_error%%$'\n'*}"
      return 0
    fi
    # ...and so is a permission the machine refused, when it is what the run ended on.
    if os_error=$(tail -n 3 <<<"$tailtext" | grep -aoiE -m 1 '[^ ]*: permission denied'); then
      REPLY=$OUTCOME_PERMANENT
      PERMANENT_WHY="exit $rc, and the machine said: ${os_error%%$'\n'*}"
      return 0
    fi
    # An authentication or permission refusal by the provider (HTTP 401/403, in the
    # structured error a CLI prints) never goes away by retrying: a human must log in.
    local auth
    if auth=$(grep -aoiE -m 1 "\"(api_error_status|status|status_code|statusCode|code)\": ?\"?40[13]\b|HTTP(/[0-9.]+)? 40[13]\b|\b40[13] (Unauthorized|Forbidden)\b|authentication_error|permission_error|invalid[ _-]api[ _-]key|invalid x-api-key|not logged in|please run /login|api key not valid" <<<"$tailtext"); then
      REPLY=$OUTCOME_PERMANENT
      PERMANENT_WHY="exit $rc: the provider refused the credentials (${auth%%$'\n'*}): log the agent's CLI in or set its API key, then run the loop again"
      return 0
    fi
    # A rate limit only in the words providers use for one, or as HTTP 429 where a status
    # is meant: never any "429" in a transcript (a duration, a line number, a test's output).
    # A here-string, not a pipe: grep -q stops at the first match, and a writer it left
    # behind would fail the test under pipefail.
    if grep -qiE "rate[ _-]?limit|usage limit|too many requests|quota (exceeded|exhausted)|resource[ _]exhausted|limit reached|hit your (session |weekly |opus )?limit|\"(api_error_status|status|status_code|statusCode|code)\": ?\"?429\b|HTTP(/[0-9.]+)? 429\b|\b429 too many" <<<"$tailtext"; then
      REPLY=$OUTCOME_RATE_LIMITED
    fi
  fi
}

# When a rate limit lifts: an epoch after '|', "retry/try again in N unit", "retry-after: N".
deadline_rate_limit_resume_at() {
  local log=$1 now tailtext secs=900 n unit
  printf -v now '%(%s)T' -1
  tailtext=$(tail -n 40 -- "$log" 2>/dev/null | tr '[:upper:]' '[:lower:]' || true)
  if [[ $tailtext =~ \|([0-9]{10}) ]] && ((BASH_REMATCH[1] > now)); then
    printf '%s' "${BASH_REMATCH[1]}"
    return 0
  fi
  if [[ $tailtext =~ (retry|try again)[^0-9]{0,12}([0-9]{1,6})(\.[0-9]+)?\ ?(seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|h)([^a-z]|$) ]]; then
    n=$((10#${BASH_REMATCH[2]}))
    unit=${BASH_REMATCH[4]}
    case $unit in
      h*) secs=$((n * 3600)) ;;
      m*) secs=$((n * 60)) ;;
      *) secs=$((n + 1)) ;;
    esac
  elif [[ $tailtext =~ retry-after:\ *([0-9]{1,6}) ]]; then
    secs=$((10#${BASH_REMATCH[1]}))
  fi
  printf '%s' "$((now + secs))"
}

# deadline_retry_delay_v ATTEMPT: REPLY is the pause in seconds before the attempt after ATTEMPT:
# RETRY_BASE_DELAY_S doubled per attempt, plus up to as much again at random (jitter).
deadline_retry_delay_v() {
  REPLY=$((RETRY_BASE_DELAY_S * (1 << ($1 - 1))))
  if ((REPLY > 0)); then
    REPLY=$((REPLY + RANDOM % (REPLY + 1)))
  fi
}
