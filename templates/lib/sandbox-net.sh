# ---- sandbox-net: the sandbox's network allowlist (loop.toml sandbox-network = "allowlist",
# ---- the default of a sandboxed loop; contract section 7). Every sandboxed run has no
# ---- network of its own (--unshare-net): it reaches the outside only through a proxy the
# ---- runner starts for the run, outside the sandbox, on a Unix socket in a directory of
# ---- its own under /tmp, that directory bound into the sandbox read-only; inside, a bridge on the
# ---- sandbox's loopback (127.0.0.1:NET_PORT) carries connections to that socket, and
# ---- HTTPS_PROXY, HTTP_PROXY and ALL_PROXY (upper and lower case) name the bridge, with
# ---- NO_PROXY cleared, and so does JAVA_TOOL_OPTIONS for a JVM (after the user's own). The proxy takes HTTP CONNECT HOST:PORT and plain-HTTP absolute-URI
# ---- requests, lets through the run's allowed hosts only (an agent run: the engine's API
# ---- hosts, the host of its base-URL variable, and allow-hosts; a check, holdout, judge
# ---- or setup run: allow-hosts only), and refuses the rest with 403 and a line in the
# ---- runner's scratch (when, which run, the host and port), which the iteration's record
# ---- takes (NET_REFUSED, iterations/N/net.log). Its allowlist is its argv, which nothing
# ---- in the sandbox can see or change; it ignores the timeout's TERM and ends when its
# ---- launcher does (its stdin is a pipe only the launcher holds), so it dies with the
# ---- run; a connect, a request head or a silent connection is bounded by a timeout.
# ---- Both are one perl program of core modules only (perl is part of every Linux
# ---- machine orbit runs on; the preflight says when it is missing). Rendered into a
# ---- sandboxed loop of sandbox-network = "allowlist" only (lib/no-sandbox-net.sh in the
# ---- others).

# perl, resolved by the preflight.
NET_PERL=
# The proxy's lines (refusals, and what went wrong), in the runner's scratch: the sandbox
# hides it from every run; its lines name the run (ITERATION:KIND).
NET_LOG=
# Whether this runner has started its log afresh.
NET_LOG_FRESH=0
# What the runs about to start belong to: an iteration's number, or "baseline" while the
# red gate's checks run on the untouched tree.
NET_PHASE=
# The bridge's port on the sandbox's own loopback; where the proxy's directory is seen (read-
# only), and its socket there.
NET_PORT=3128
NET_DIR_IN=/tmp/.orbit-net
NET_SOCK_IN=$NET_DIR_IN/proxy.sock
# What the launcher replaces with the proxy's directory (the first such word of its argv).
NET_SOCK_WORD=orbit-net-socket
# Where SANDBOX_LAUNCHER starts bwrap: the net launcher's own start goes before it.
# shellcheck disable=SC2016  # the launcher's words, not expanded here
NET_LAUNCH_AT='"$@" <&0 &'
# The command line the next fenced run is prefixed with (sandbox_net_fence).
NET_ARGV=()

# The proxy (mode "proxy SOCKET LOG LABEL ALLOWED...") and the bridge (mode "bridge SOCKET
# PORT COMMAND..."), one perl program; the bridge, which a run waits for, loads no module,
# the proxy only IO::Socket::IP (or ::INET) for its upstream connections.
# shellcheck disable=SC2016  # perl code, not shell
NET_PL='
@perl:net.pl@
'

# What the launcher (lib/sandbox.sh, SANDBOX_LAUNCHER) does before it starts bwrap, with the
# network fenced: its argv begins PERL PROGRAM LOG LABEL N ALLOWED(N)..., then bwrap's. It
# makes a directory of its own (mode 0700) under /tmp, starts the proxy on a socket there
# beside bwrap (the bridge waits for the socket), and binds the directory into the sandbox
# read-only in place of NET_SOCK_WORD. The proxy's stdin is a pipe the launcher alone holds
# (closed for bwrap), so the proxy ends when the launcher does; a proxy that does not start
# leaves the run without a network (its reason in the log).
# shellcheck disable=SC2016  # expands in the launcher, by design
NET_LAUNCH='perl=$1 prog=$2 log=$3 label=$4 n=$5
shift 5
hosts=("${@:1:n}")
shift "$n"
d=$(mktemp -d /tmp/orbit-net.XXXXXX) || exit 125
exec {w}> >(exec "$perl" -e "$prog" proxy "$d/proxy.sock" "$log" "$label" "${hosts[@]}" >/dev/null 2>>"$log" 6>&-)
a=("$@")
for i in "${!a[@]}"; do
  if [[ ${a[i]} == orbit-net-socket ]]; then
    a[i]=$d
    break
  fi
done
"${a[@]}" <&0 {w}>&- &
wait "$!"
rc=$?
exec {w}>&-
rm -rf -- "$d"
exit "$rc"'

# sandbox_net_preflight: the allowlist needs perl with its core socket modules, allow-hosts that
# parse, and a bubblewrap that can take a run's network away; else the run stops
# (EXIT_PREFLIGHT) with the fix.
sandbox_net_preflight() {
  local h out rc=0
  local -a hosts=() probe=()
  read -ra hosts <<<"${ALLOW_HOSTS_SETTING:-}"
  for h in "${hosts[@]}"; do
    config_host_ok "$h" || preflight_fail "allow-hosts: '$h' is not HOST or HOST:PORT (such as api.example.com or 127.0.0.1:8080): fix loop.toml, then orbit init --force"
  done
  NET_PERL=$(type -P perl 2>/dev/null || true)
  preflight_perl_needs_v "sandbox-network = \"allowlist\" (its network proxy)" "${ORBIT_PERL_NET_MODULES[@]}"
  [[ -z $REPLY ]] ||
    preflight_fail "$REPLY; or set sandbox-network = \"open\" in loop.toml and run orbit init --force"
  sandbox_base_args probe
  out=$("$SANDBOX_BWRAP" "${probe[@]}" --unshare-net --tmpfs /tmp -- "$SANDBOX_ENV" true 2>&1 </dev/null) || rc=$?
  if ((rc != 0)); then
    out=${out//[$'\n\r\t']/ }
    orbit_cut_v "$out" 300
    preflight_fail "sandbox-network = \"allowlist\" but bubblewrap cannot give a run a network of its own here (exit $rc: ${REPLY:-no message}): set sandbox-network = \"open\" in loop.toml and run orbit init --force"
  fi
  NET_LOG="$LOOP_DIR/.run-tmp/net.log"
  orbit_log "sandbox: network allowlist: agent runs reach the engine's API and allow-hosts, the other runs allow-hosts only (${ALLOW_HOSTS_SETTING:-none}); the rest is refused"
}

# sandbox_net_url_host_v URL: REPLY is the HOST:PORT of an http(s) URL (its port, else 80 or 443);
# status 1 when URL is none.
sandbox_net_url_host_v() {
  local u=$1 scheme auth port
  REPLY=
  [[ $u =~ ^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*) ]] || return 1
  scheme=${BASH_REMATCH[1],,} auth=${BASH_REMATCH[2]}
  auth=${auth##*@}
  case $scheme in
    https) port=443 ;;
    http) port=80 ;;
    *) return 1 ;;
  esac
  if [[ $auth == \[* ]]; then
    [[ $auth =~ \]:[0-9]+$ ]] || auth+=:$port
  elif [[ $auth != *:* ]]; then
    auth+=:$port
  fi
  REPLY=$auth
  config_host_ok "$REPLY"
}

# sandbox_net_allowed_v KIND: REPLY_HOSTS, the hosts a run of KIND may reach: for the agent, the
# engine's API hosts (its part's engine_net_hosts), the host of each of its base-URL
# variables that is set, and allow-hosts; for the others, allow-hosts.
sandbox_net_allowed_v() {
  local v f
  local -a REPLY_URL_VARS=() REPLY_URL_FILES=()
  REPLY_HOSTS=()
  read -ra REPLY_HOSTS <<<"${ALLOW_HOSTS_SETTING:-}"
  [[ $1 == agent ]] || return 0
  local -a mine=("${REPLY_HOSTS[@]}")
  engine_net_hosts
  for v in "${REPLY_URL_VARS[@]}"; do
    if [[ -n ${!v:-} ]]; then
      if sandbox_net_url_host_v "${!v}"; then
        REPLY_HOSTS+=("$REPLY")
      else
        orbit_log "sandbox: $v is not an http(s) URL with a host: not allowed through the proxy"
      fi
    fi
  done
  # The base URLs of the engine's user-level configuration (a codex model provider's
  # base_url, an opencode provider's baseURL): files the home record holds, so a run starts
  # only with them as the loop's first run found them.
  for f in "${REPLY_URL_FILES[@]}"; do
    sandbox_net_config_urls "$f"
  done
  REPLY_HOSTS+=("${mine[@]}")
}

# sandbox_net_config_urls FILE: adds to REPLY_HOSTS the host of every base URL FILE names (a
# `base_url = "URL"` line of TOML, a `"baseURL": "URL"` member of JSON), read as text. Of a
# TOML file only the lines the home record holds count: not those of the tables it leaves
# out (a project's trust and the notices codex writes itself), whose headers it reads with
# the same rule (lib/home_record.sh, codex_toml).
sandbox_net_config_urls() {
  local line rest skip=0 toml=0
  local header='^[[:space:]]*\[\[?[[:space:]]*([^]]*)\]\]?[[:space:]]*(#.*)?$'
  local unheld='^(projects|notice)([[:space:]]*\.|[[:space:]]*$)'
  [[ -f $1 && -r $1 ]] || return 0
  [[ $1 == *.toml ]] && toml=1
  while IFS= read -r line || [[ -n $line ]]; do
    if ((toml)) && [[ $line =~ $header ]]; then
      skip=0
      [[ ${BASH_REMATCH[1]} =~ $unheld ]] && skip=1
      continue
    fi
    ((skip)) && continue
    rest=$line
    while [[ $rest =~ (base_url|baseURL)\"?[[:space:]]*[=:][[:space:]]*\"([^\"]*)\" ]]; do
      rest=${rest#*"${BASH_REMATCH[0]}"}
      if sandbox_net_url_host_v "${BASH_REMATCH[2]}"; then
        REPLY_HOSTS+=("$REPLY")
      else
        orbit_log "sandbox: a base URL in $1 is not an http(s) URL with a host: not allowed through the proxy"
      fi
    done
  done <"$1"
}

# sandbox_net_fence KIND ARRAY: the network fence of the next run, KIND agent, check or holdout:
# the bwrap options of ARRAY (named by $2) get --unshare-net and the proxy's socket, and
# NET_ARGV is the launcher with the proxy before bwrap and the bridge before the
# command. Status 0 (this part fences every sandboxed run).
sandbox_net_fence() {
  local kind=$1 label
  local -n fence_args=$2
  local -a REPLY_HOSTS=()
  if ((!NET_LOG_FRESH)) && [[ $BASHPID == "$$" ]]; then
    # A new run's refusals start a new log (a fan-out's candidates add to the same one).
    rm -f -- "$NET_LOG"
    : >"$NET_LOG"
    NET_LOG_FRESH=1
  fi
  sandbox_net_allowed_v "$kind"
  label=${NET_PHASE:-$CUR_ITER}:$kind
  fence_args+=(--unshare-net --ro-bind "$NET_SOCK_WORD" "$NET_DIR_IN")
  NET_ARGV=("$BASH" -c "${SANDBOX_LAUNCHER%%"$NET_LAUNCH_AT"*}$NET_LAUNCH" orbit-sandbox
    "$NET_PERL" "$NET_PL" "$NET_LOG" "$label" "${#REPLY_HOSTS[@]}" "${REPLY_HOSTS[@]}"
    "$SANDBOX_BWRAP" "${fence_args[@]}" --
    "$NET_PERL" -e "$NET_PL" bridge "$NET_SOCK_IN" "$NET_PORT"
    "$SANDBOX_ENV" --default-signal="$SANDBOX_SIGNALS")
  return 0
}

# sandbox_net_record_v N DIR: REPLY, the HOST:PORT words the proxy refused to the runs of N (an
# iteration's number, or "baseline"), each once, in the order first refused; their lines
# go into DIR/net.log, the record of which run asked for what.
sandbox_net_record_v() {
  local want=$1 dir=$2 ts label what hp seen=' ' lines=''
  REPLY=
  [[ -n $NET_LOG && -f $NET_LOG && ! -L $NET_LOG ]] || return 0
  while read -r ts label what hp _; do
    if [[ $what != refused || ${label%%:*} != "$want" || ! $ts =~ ^[0-9]+$ || $hp == *\** ]] || ! config_host_ok "$hp"; then
      continue
    fi
    lines+="$ts $label $what $hp"$'\n'
    [[ $seen == *" $hp "* ]] && continue
    seen+="$hp "
    REPLY+="${REPLY:+ }$hp"
  done <"$NET_LOG"
  if [[ -n $lines ]]; then
    state_write_file "$dir/net.log" "$lines" || state_records_fail "$dir/net.log"
  fi
}

# sandbox_net_result: the refusals of the iteration R records, into R[NET_REFUSED] (and its
# net.log), before its result.env is written.
sandbox_net_result() {
  local dir
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "${R[ITERATION]:-$CUR_ITER}"
  sandbox_net_record_v "${R[ITERATION]:-$CUR_ITER}" "$dir"
  R[NET_REFUSED]=$REPLY
  if [[ -n $REPLY ]]; then
    orbit_log "iteration ${R[ITERATION]:-$CUR_ITER}: the sandbox refused $REPLY (allow a host with allow-hosts in loop.toml)"
  fi
}

# sandbox_net_red_gate_begin / sandbox_net_red_gate_end: the red gate's checks run on the untouched tree,
# before any agent: a host one of them was refused is the user's checks needing the
# network, and the loop stops before the first agent run (EXIT_PREFLIGHT) with the host
# and the setting that allows it.
sandbox_net_red_gate_begin() {
  NET_PHASE=baseline
}
sandbox_net_red_gate_end() {
  local quoted='' hp refused
  NET_PHASE=
  sandbox_net_record_v baseline "$LOOP_DIR/iterations/baseline"
  refused=$REPLY
  [[ -n $refused ]] || return 0
  for hp in $refused; do
    quoted+="${quoted:+, }\"$hp\""
  done
  state_event verify_fail 0 run red_gate code "$CODE_NET_REFUSED" hosts "${refused// /,}"
  resume_finish "$EXIT_PREFLIGHT" "$STATUS_BLOCKED" "$REASON_PREFLIGHT" "the checks reached for $refused on the untouched tree, which the sandbox's network allowlist refuses (sandbox-network = \"allowlist\"; see iterations/baseline/net.log and verify.log). Allow what a check needs: allow-hosts = [$quoted] in loop.toml, then orbit init --force (orbit init --allow-host ${refused%% *} for a new loop); or set sandbox-network = \"open\""
}

# sandbox_net_cannot_reach_v LINE: status 0 when the connection a check's output says was refused or
# unreachable (LINE) is the sandbox's network, not the project: the checks ran fenced (their
# own network, only the proxy reachable), and the host is one no fenced run can reach
# straight (a network unreachable), or a loopback HOST:PORT that this machine does serve
# (the runner connects to it, and closes at once). REPLY is the host and the fix.
sandbox_net_cannot_reach_v() {
  local line=$1 hp='' h='' p='' re_tcp='/dev/tcp/([^/ ]+)/([0-9]+)' re_curl='Failed to connect to ([^ ]+) port ([0-9]+)'
  local re_py="host='([^']+)', port=([0-9]+)"
  REPLY=''
  sandbox_on || return 1
  if [[ $line =~ $re_tcp || $line =~ $re_curl || $line =~ $re_py ]]; then
    h=${BASH_REMATCH[1]} p=${BASH_REMATCH[2]}
    h=${h#[} h=${h%]}
  fi
  if [[ $h == 127.* || $h == localhost || $h == ::1 ]]; then
    # A service of this machine's loopback: there when the runner reaches it.
    (exec 3<>"/dev/tcp/$h/$p") 2>/dev/null || return 1
  elif [[ $line != *'Network is unreachable'* ]]; then
    return 1
  fi
  if [[ -n $h ]]; then
    hp=$h:$p
    [[ $h == *:* ]] && hp="[$h]:$p"
    config_host_ok "$hp" || hp=''
  fi
  if [[ -n $hp ]]; then
    REPLY="It connects to $hp straight, not through the sandbox's proxy: each sandboxed run has a network of its own (sandbox-network = \"allowlist\"), with nothing at $hp. A client that honours HTTPS_PROXY/HTTP_PROXY reaches an allowed host: allow-hosts = [\"$hp\"] in loop.toml, then orbit init --force (orbit init --allow-host $hp for a new loop); one that does not (a database driver, a raw socket) needs sandbox-network = \"open\" in loop.toml (orbit init --sandbox-network open)."
  else
    REPLY="Each sandboxed run has a network of its own (sandbox-network = \"allowlist\"), which reaches hosts only through the sandbox's proxy. A client that honours HTTPS_PROXY/HTTP_PROXY reaches a host allow-hosts names in loop.toml (orbit init --allow-host HOST:PORT); one that does not needs sandbox-network = \"open\" in loop.toml (orbit init --sandbox-network open)."
  fi
  return 0
}

# sandbox_net_prompt_note N: the prompt's word on the hosts the sandbox refused in iteration N-1
# (nothing when none).
sandbox_net_prompt_note() {
  local n=$1 prev
  ((n > 1)) || return 0
  printf -v prev '%s/iterations/%06d/result.env' "$LOOP_DIR" $((n - 1))
  [[ -f $prev && ! -L $prev ]] || return 0
  local line refused='' re='^[][A-Za-z0-9.:* -]+$'
  while IFS= read -r line; do
    [[ $line == NET_REFUSED=* ]] && refused=${line#NET_REFUSED=}
  done <"$prev"
  [[ -n $refused && $refused =~ $re ]] || return 0
  printf '\n# The network\n\n'
  printf 'In the last iteration the sandbox refused connections to: %s. Runs reach only the\n' "$refused"
  printf "engine's API and the hosts the user allows; do not try to get around it. If the work\n"
  printf 'needs one of these hosts, say so in your notes: the user allows one with\n'
  printf '%s (loop.toml allow-hosts).\n' "\`orbit init --allow-host HOST:PORT\`"
}
