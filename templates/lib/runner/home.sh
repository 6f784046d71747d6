# ---- outside the repository, the runner holds from the loop's first run the env file and
# ---- the engine's user-level files that name commands, permissions, hooks, servers, skills,
# ---- plugins or agents (contract section 7; the engine part's engine_home_held names them):
# ---- their record (lib/home_record.sh) is written to pins.home at the first run, read once
# ---- per run, and compared with what is on disk before and after every agent and check run
# ---- (trust_check). A change is permission_hijack.
HOME_TEXT=
HOME_LOADED=0
HOME_BAD=
HOME_WANT=
HOME_HAVE=

# home_specs_v: REPLY is the spec lines of what this loop holds: the engine's user-level
# files under HOME (none without a HOME), then the env file.
home_specs_v() {
  local s kind rest path arg home=${HOME:-}
  local -a REPLY_HELD=()
  REPLY=''
  if [[ $home == /?* ]]; then
    engine_home_held
    for s in "${REPLY_HELD[@]}"; do
      kind=${s%% *} rest=${s#* } arg=''
      path=${rest%% *}
      [[ $rest == *' '* ]] && arg=${rest#* }
      [[ $kind == json-projects ]] && arg=$WS
      REPLY+="$kind"$'\t'"${home%/}/$path"$'\t'"$arg"$'\n'
    done
  fi
  if [[ -n $ENV_FILE ]]; then
    REPLY+="file"$'\t'"$ENV_FILE"$'\t'$'\n'
  fi
}

# home_now_v SPECS: REPLY is the record of SPECS now ("" for none); a record perl cannot
# compute stops the run (preflight).
home_now_v() {
  REPLY=''
  [[ -n $1 ]] || return 0
  if ! home_record_v "$1"; then
    preflight_perl_needs_v "holding the engine's user-level files and the env file" "${ORBIT_PERL_HOME_MODULES[@]}" ${HOME_PERL_MODULES[@]+"${HOME_PERL_MODULES[@]}"}
    preflight_fail "cannot hold the engine's user-level files and the env file: ${REPLY:-perl could not compute their record}"
  fi
}

# home_load: HOME_TEXT, the record of the loop's first run (pins.home), read once per run;
# written now when there is none (the first run, or the first of a loop rendered before
# the record existed).
home_load() {
  local f=$LOOP_DIR/pins.home
  ((HOME_LOADED)) && return 0
  if [[ -e $f || -L $f ]]; then
    if ! orbit_regular "$f"; then
      HOME_TEXT="unreadable  $f"
    else
      HOME_TEXT=$(<"$f")
    fi
  else
    home_specs_v
    home_now_v "$REPLY"
    HOME_TEXT=$REPLY
    state_write_file "$f" "${HOME_TEXT:+$HOME_TEXT$'\n'}" || state_records_fail "$f"
    orbit_log "held from now on: $(grep -c '^#' <<<"$HOME_TEXT" || true) user-level path(s) of $ENGINE and the env file (pins.home)"
  fi
  HOME_LOADED=1
}

# home_check: whether the held paths are as the first run recorded them. Status 1 with
# HOME_BAD (the path), HOME_WANT and HOME_HAVE (its recorded and present values) otherwise.
home_check() {
  local line diffs entry path
  HOME_BAD=
  home_load
  home_record_home_specs_of_v "$HOME_TEXT"
  home_now_v "$REPLY"
  [[ $REPLY == "$HOME_TEXT" ]] && return 0
  diffs=$(diff <(printf '%s\n' "$HOME_TEXT") <(printf '%s\n' "$REPLY") || true)
  HOME_WANT=absent HOME_HAVE=absent
  while IFS= read -r line; do
    [[ $line == [\<\>]' '*'  '* ]] || continue
    entry=${line#??}
    path=${entry#*  }
    [[ -n $HOME_BAD ]] || HOME_BAD=$path
    [[ $path == "$HOME_BAD" ]] || continue
    if [[ $line == '<'* ]]; then
      HOME_WANT=${entry%%  *}
    else
      HOME_HAVE=${entry%%  *}
    fi
  done <<<"$diffs"
  orbit_log "permission_hijack: $HOME_BAD changed since the loop's first run held it: $HOME_WANT, now $HOME_HAVE"
  return 1
}

# home_env_unchanged: whether the env file is the one the first run held (true when no
# record holds it yet); read before a line of it is loaded.
home_env_unchanged() {
  local f=$LOOP_DIR/pins.home line want=''
  orbit_regular "$f" || return 0
  while IFS= read -r line; do
    if [[ $line == *"  $ENV_FILE" && ${line%%  *} != *' '* ]]; then
      want=${line%%  *}
    fi
  done <"$f"
  [[ -n $want ]] || return 0
  orbit_sha256_file_v "$ENV_FILE"
  HOME_WANT=$want HOME_HAVE=$REPLY
  [[ $REPLY == "$want" ]]
}

# home_stop_msg_v FILE: REPLY is the stop's message when FILE is the held path that changed
# (status 1 otherwise): no copy of a file outside the repository is kept, only its record;
# what was added can be told from it (orbit audit names it) and taken away exactly.
home_stop_msg_v() {
  [[ -n $HOME_BAD && $1 == "$HOME_BAD" ]] || return 1
  REPLY="$REASON_PERMISSION_HIJACK: $HOME_BAD changed since the loop's first run held it ($HOME_WANT, now $HOME_HAVE): it is outside the repository (the engine's user-level files, the env file), and what it names runs in the engine's next runs, the loop's and yours; 'orbit audit' names what was added where that can be told, and 'orbit recover --restore-pinned' then takes exactly that away; else review it, remove what you did not put there, and 'orbit recover --repin' holds it as it is"
}
