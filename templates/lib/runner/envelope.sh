# ---- the envelope (contract section "The envelope"): what a DONE verified, bound to the
# ---- commit it verified. envelope.json in the loop directory, one line of compact JSON in a
# ---- fixed key order whose last member, digest, is the sha256 of the line without it
# ---- (`,"digest":"..."` removed), as a journal line's hash; the same bytes are the git note
# ---- of the DONE commit under refs/notes/orbit, written by the runner outside the sandbox.
# The envelope's format version (its "envelope" member).
readonly ENVELOPE_FORMAT=1
readonly ENVELOPE_NOTES_REF=refs/notes/orbit
# The envelope's SSH signature (where git signs with SSH): ssh-keygen -Y sign's namespace,
# the DONE commit's notes ref that carries it (a ref of its own, so that the envelope's note
# stays byte for byte envelope.json), and how long ssh-keygen may take.
readonly ENVELOPE_SIG_NAMESPACE=orbit-envelope
readonly ENVELOPE_SIG_NOTES_REF=refs/notes/orbit-sig
readonly ENVELOPE_SIGN_TIMEOUT_S=30

# envelope_record N: iteration N reached DONE: its envelope, written once (a rerun after a
# crash finds it and only puts back a missing note), then the note on its commit. Nothing
# here stops the loop: a failure is said in runner.log and the envelope is absent.
envelope_record() {
  local n=$1 dir commit file=$LOOP_DIR/envelope.json
  printf -v dir '%s/iterations/%06d' "$LOOP_DIR" "$n"
  commit_of_iteration_v "$dir"
  commit=$REPLY
  if ! orbit_regular "$file"; then
    if ! envelope_json_v "$n" "$dir" "$commit"; then
      orbit_log "envelope: not written ($REPLY)"
      return 0
    fi
    state_write_file "$file" "$REPLY"$'\n' || {
      orbit_log "envelope: cannot write $file"
      return 0
    }
    envelope_sign "$file"
    if [[ -n $ENVELOPE_UNSIGNED_WHY ]]; then
      state_event envelope_write "$n" commit "${commit:-none}" digest "$ENVELOPE_DIGEST" signed "$ENVELOPE_SIGNED" unsigned_why "$ENVELOPE_UNSIGNED_WHY"
    else
      state_event envelope_write "$n" commit "${commit:-none}" digest "$ENVELOPE_DIGEST" signed "$ENVELOPE_SIGNED"
    fi
  fi
  if [[ -n $commit ]]; then
    envelope_note "$file" "$commit" "$ENVELOPE_NOTES_REF"
    if orbit_regular "$file.sig"; then
      envelope_note "$file.sig" "$commit" "$ENVELOPE_SIG_NOTES_REF"
    fi
  fi
  return 0
}
ENVELOPE_DIGEST=
ENVELOPE_SIGNED=false
# Why an envelope the user's git configuration would sign is not signed (empty otherwise).
ENVELOPE_UNSIGNED_WHY=

# envelope_note FILE COMMIT REF: FILE's bytes as COMMIT's note under the notes ref REF
# (refs/notes/orbit: the envelope; refs/notes/orbit-sig: its signature) in the user's
# repository, unless that note holds them already.
envelope_note() {
  local file=$1 commit=$2 ref=$3 have
  have=$(config_repo_git notes --ref="$ref" show "$commit" 2>/dev/null) || have=
  [[ $have == "$(cat -- "$file")" ]] && return 0
  if ! config_repo_git -c core.hooksPath=/dev/null notes --ref="$ref" add -f -F "$file" "$commit" >>"$ORBIT_LOG_FILE" 2>&1; then
    orbit_log "envelope: the note on $commit under $ref could not be written (git notes failed; see above): ${file##*/} holds it"
    return 0
  fi
  orbit_log "envelope: written to ${file##*/} and as the note of $commit ($ref)"
}

# envelope_json_v N DIR COMMIT: REPLY is the envelope's line (without its newline) of the
# DONE iteration N (record DIR) whose commit is COMMIT ("" when it has none); ENVELOPE_DIGEST
# its digest. Status 1 with REPLY saying why when it cannot be made.
envelope_json_v() {
  local n=$1 dir=$2 commit=$3 tree='' base='' j
  base=$(cat -- "$LOOP_DIR/.baseline-commit" 2>/dev/null) || base=
  if [[ -n $commit ]]; then
    tree=$(config_repo_git rev-parse --verify -q "$commit^{tree}" 2>/dev/null) || {
      REPLY="the tree of $commit cannot be read"
      return 1
    }
  fi
  j="{\"envelope\":$ENVELOPE_FORMAT,\"contract\":\"$CONTRACT_VERSION_RENDERED\""
  orbit_json_v "$LOOP_NAME"
  j+=",\"loop\":$REPLY"
  j+=",\"goal_sha256\":\"$(orbit_sha256_file "$LOOP_DIR/goal.md")\""
  envelope_str_v "$base"
  j+=",\"base_commit\":$REPLY"
  envelope_str_v "$commit"
  j+=",\"commit\":$REPLY"
  envelope_str_v "$tree"
  j+=",\"tree\":$REPLY"
  envelope_str_v "${S[ITER_BRANCH]:-}"
  j+=",\"branch\":$REPLY"
  envelope_str_v "${S[ORIGIN_BRANCH]:-}"
  j+=",\"origin_branch\":$REPLY"
  envelope_checks_v "$dir" "$commit" || return 1
  j+=",\"checks\":$REPLY"
  envelope_protected_v "$commit"
  j+=",\"protected\":$REPLY"
  j+=",\"pass_k\":$PASS_K"
  envelope_verdicts_v
  j+=$REPLY
  envelope_run_v "$n"
  j+=$REPLY
  adequacy_envelope_v "$n"
  j+=$REPLY
  j+=",\"journal_head\":\"$EV_PREV\"}"
  orbit_sha256_str_v "$j"
  ENVELOPE_DIGEST=$REPLY
  REPLY="${j%\}},\"digest\":\"$ENVELOPE_DIGEST\"}"
}

# envelope_str_v VALUE: REPLY is VALUE as a JSON string, or null when it is empty.
envelope_str_v() {
  if [[ -z $1 ]]; then
    REPLY=null
  else
    orbit_json_v "$1"
  fi
}

# envelope_blob_sha_v COMMIT PATH: REPLY_SHA is the sha256 of PATH's content at COMMIT; status 1
# when COMMIT holds no file there.
envelope_blob_sha_v() {
  [[ -n $1 ]] || return 1
  [[ $(config_repo_git cat-file -t "$1:$2" 2>/dev/null) == blob ]] || return 1
  REPLY_SHA=$(config_repo_git cat-file blob "$1:$2" | orbit_sha256_stdin)
}

# envelope_check_list: verify.sh's checks, NAME, COMMAND and ROLE each followed by a NUL: the
# run_check lines of its checks function (pinned with verify.sh, checked before every run),
# each line's words as bash quotes them (orbit renders every word quoted: the assignment
# runs nothing), never the function itself.
envelope_check_list() {
  local line
  local -a words
  while IFS= read -r line; do
    [[ $line =~ ^[[:space:]]+run_check[[:space:]] ]] || continue
    words=()
    eval "words=(${line#*run_check })" 2>>"$ORBIT_LOG_FILE" || continue
    ((${#words[@]} >= 2)) || continue
    printf '%s\0%s\0%s\0' "${words[0]}" "${words[1]}" "${words[2]:-acceptance}"
  done < <(sed -n '/^checks() {$/,/^}$/p' "$LOOP_DIR/verify.sh" 2>>"$ORBIT_LOG_FILE")
}

# envelope_checks_v DIR COMMIT: REPLY is the checks' JSON array: each check's name, command,
# role, how many of the DONE iteration's verify runs it passed, its test counts where a
# test tool's were read (the last run's), and the files that define it with their sha256:
# verify.sh (in the loop directory) and the script its command runs, when COMMIT's tree
# holds it (envelope_script_v).
envelope_checks_v() {
  local dir=$1 commit=$2 name cmd role passes vsha arr='' item tests line
  local -a f
  orbit_sha256_file_v "$LOOP_DIR/verify.sh"
  vsha=$REPLY
  while IFS= read -r -d '' name && IFS= read -r -d '' cmd && IFS= read -r -d '' role; do
    passes=$(grep -cxF -- "[PASS] $name" "$dir/verify.log" 2>/dev/null) || passes=0
    tests=null
    line=$(grep -F -- "$name"$'\t' "$dir/counts.tsv" 2>/dev/null | awk -F '\t' -v c="$name" '$2 == c' | tail -n 1) || line=
    if [[ -n $line ]]; then
      IFS=$'\t' read -r -a f <<<"$line"
      tests="{\"ran\":${f[2]},\"skipped\":${f[5]},\"unit\":\"${f[6]}\"}"
    fi
    orbit_json_v "$name"
    item="{\"name\":$REPLY"
    orbit_json_v "$cmd"
    item+=",\"command\":$REPLY,\"role\":\"$role\",\"passes\":$passes,\"tests\":$tests"
    item+=",\"files\":[{\"path\":\"verify.sh\",\"in\":\"loop\",\"sha256\":\"$vsha\"}"
    if envelope_script_v "$cmd" && envelope_blob_sha_v "$commit" "$REPLY"; then
      orbit_json_v "$REPLY"
      item+=",{\"path\":$REPLY,\"in\":\"tree\",\"sha256\":\"$REPLY_SHA\"}"
    fi
    arr+="${arr:+,}$item]}"
  done < <(envelope_check_list)
  [[ -n $arr ]] || {
    REPLY="verify.sh's checks could not be read"
    return 1
  }
  REPLY="[$arr]"
}
REPLY_SHA=

# envelope_script_v CMD: REPLY is the script a check's command runs, relative to the
# repository's root: its first word (./ taken off), or its second after an interpreter
# (bash, sh, python, node...). Status 1 when neither is a relative path inside the tree.
envelope_script_v() {
  local -a w
  read -r -a w <<<"$1"
  REPLY=${w[0]:-}
  case $REPLY in
    bash | sh | zsh | dash | python | python3 | node | perl | ruby) REPLY=${w[1]:-} ;;
  esac
  REPLY=${REPLY#./}
  [[ -n $REPLY && $REPLY != /* && $REPLY != -* && $REPLY != *..* && $REPLY != *[\;\|\&\<\>\(\)\'\"\$\`]* ]]
}

# envelope_protected_v COMMIT: REPLY is the JSON array of the files the loop protects
# (loop.toml protect: the test tools' configuration), each with its sha256 at COMMIT.
envelope_protected_v() {
  local commit=$1 g f arr=''
  for g in "${PROTECT_GLOBS[@]}"; do
    while IFS= read -r -d '' f; do
      envelope_blob_sha_v "$commit" "$f" || continue
      orbit_json_v "$f"
      arr+="${arr:+,}{\"path\":$REPLY,\"sha256\":\"$REPLY_SHA\"}"
    done < <(trust_protected_files "$g")
  done
  REPLY="[$arr]"
}

# envelope_verdicts_v: REPLY is the holdout's, the judge's and the confirmation's members: a
# DONE passed each step the loop has (the gate's order), null for a step it does not have.
# The holdout's definitions are named by their sha256 only, never their contents.
envelope_verdicts_v() {
  local h=null defs='' f
  if ((HOLDOUT_CHECKS > 0)); then
    orbit_sha256_file_v "$LOOP_DIR/holdout.sh"
    defs="{\"path\":\"holdout.sh\",\"sha256\":\"$REPLY\"}"
    while IFS= read -r -d '' f; do
      orbit_json_v "${f#"$LOOP_DIR"/}"
      defs+=",{\"path\":$REPLY,\"sha256\":\"$(orbit_sha256_file "$f")\"}"
    done < <(find "$LOOP_DIR/holdout" -type f -print0 2>/dev/null | sort -z)
    h="{\"verdict\":\"pass\",\"checks\":$HOLDOUT_CHECKS,\"definitions\":[$defs]}"
  fi
  REPLY=",\"holdout\":$h"
  if [[ -n $JUDGE_CMD ]]; then
    REPLY+=",\"judge\":{\"verdict\":\"approved\",\"command_sha256\":\"$(orbit_sha256_str "$JUDGE_CMD")\"}"
  else
    REPLY+=",\"judge\":null"
  fi
  if ((CONFIRM_RUNS > 0)); then
    REPLY+=",\"confirm\":{\"verdict\":\"CONFIRMED\",\"runs\":$CONFIRM_RUNS}"
  else
    REPLY+=",\"confirm\":null"
  fi
}

# envelope_run_v N: REPLY is the run's members: the sandbox as the runs had it and its
# network mode, the engine (its model is not a setting the loop knows: null), the
# iterations and the cost the agents reported.
envelope_run_v() {
  local sandbox=bwrap net="\"$SANDBOX_NETWORK_SETTING\""
  sandbox_on || sandbox=off net=null
  REPLY=",\"sandbox\":\"$sandbox\",\"network\":$net,\"engine\":\"$ENGINE\",\"model\":null"
  REPLY+=",\"iterations\":$1,\"cost_reported_microusd\":${LEDGER_TOTAL:-0}"
}

# envelope_signing_key_v: where the user's git configuration signs with SSH (gpg.format ssh
# and user.signingkey, as git reads them for the repository), REPLY is the key: a key file's
# path (~ expanded, a relative one from the repository's root) with REPLY_LITERAL 0, or a
# literal public key (`key::ssh-...`, its private half in ssh-agent) with REPLY_LITERAL 1.
# Status 1 when git does not sign with SSH.
envelope_signing_key_v() {
  local fmt='' key=''
  fmt=$(config_repo_git config --get gpg.format 2>/dev/null) || fmt=
  [[ $fmt == ssh ]] || return 1
  key=$(config_repo_git config --path --get user.signingkey 2>/dev/null) || key=
  [[ -n $key ]] || return 1
  REPLY_LITERAL=1
  case $key in
    key::*) REPLY=${key#key::} ;;
    ssh-* | ecdsa-* | sk-*) REPLY=$key ;;
    /*) REPLY=$key REPLY_LITERAL=0 ;;
    *) REPLY=$REPO_ROOT/$key REPLY_LITERAL=0 ;;
  esac
}
REPLY_LITERAL=0

# envelope_key_hide ARRAY: where the loop signs its envelope, the mounts that keep the key
# from a sandboxed run (the agent's, the checks'), into the array named by $1: an empty
# read-only directory over the key file's directory where that is a directory of keys (its
# name .ssh, or below HOME, and holding nothing a run needs: not HOME, the repository, the
# loop, the agent), else the null device over the key file itself; and the null device over
# ssh-agent's socket (SSH_AUTH_SOCK), which would sign for whoever asks.
envelope_key_hide() {
  local -n hide_key=$1
  local key dir p home=${HOME:-/} cover=1
  envelope_signing_key_v || return 0
  if ((REPLY_LITERAL == 0)) && key=$(realpath -e -- "$REPLY" 2>/dev/null) && [[ -f $key ]]; then
    dir=${key%/*}
    [[ $dir == */.ssh || $dir == "${home%/}"/?* ]] || cover=0
    for p in "$home" "$REPO_ROOT" "$GIT_COMMON_ABS" "$AGENT_ABS" "$WS" "$LOOP_DIR"; do
      [[ $p == "$dir" || $p == "$dir"/* ]] && cover=0
    done
    if ((cover)); then
      hide_key+=(--tmpfs "$dir" --remount-ro "$dir")
    else
      hide_key+=(--ro-bind /dev/null "$key")
    fi
  fi
  if [[ -n ${SSH_AUTH_SOCK:-} && -S $SSH_AUTH_SOCK ]]; then
    hide_key+=(--ro-bind /dev/null "$SSH_AUTH_SOCK")
  fi
}

# envelope_sign FILE: where the user's git configuration signs with SSH, FILE signed by the
# runner (outside the sandbox) with ssh-keygen -Y sign into FILE.sig (ENVELOPE_SIGNED true).
# Never a prompt nor a stop: no terminal (setsid), stdin the null device, no askpass
# program, bounded; a key that needs a passphrase no ssh-agent holds leaves the envelope
# unsigned, ENVELOPE_UNSIGNED_WHY and runner.log saying why.
envelope_sign() {
  local file=$1 key work out sig='' why
  local -a detach=()
  ENVELOPE_SIGNED=false ENVELOPE_UNSIGNED_WHY=
  envelope_signing_key_v || return 0
  key=$REPLY
  work=$ORBIT_TMP/envelope-sign
  rm -rf -- "$work"
  mkdir -m 700 -- "$work" || return 0
  if ((REPLY_LITERAL)); then
    printf '%s\n' "$key" >"$work/key.pub"
    key=$work/key.pub
  fi
  cp -- "$file" "$work/envelope.json" || return 0
  out=$work/ssh-keygen.out
  # Its own session, without the user's terminal, where setsid is there (util-linux).
  if command -v setsid >/dev/null 2>&1; then
    detach=(setsid -w)
  fi
  proc_run_bounded "$ENVELOPE_SIGN_TIMEOUT_S" 1 /dev/null "$out" \
    env -u SSH_ASKPASS -u DISPLAY -u WAYLAND_DISPLAY SSH_ASKPASS_REQUIRE=never \
    "${detach[@]}" ssh-keygen -Y sign -f "$key" -n "$ENVELOPE_SIG_NAMESPACE" "$work/envelope.json"
  if ((ORBIT_RC == 0 && ORBIT_TIMED_OUT == 0)) && orbit_regular "$work/envelope.json.sig"; then
    sig=$(cat -- "$work/envelope.json.sig")
  fi
  if [[ $sig == "-----BEGIN SSH SIGNATURE-----"* ]] && state_write_file "$file.sig" "$sig"$'\n'; then
    ENVELOPE_SIGNED=true
    orbit_log "envelope: signed with ${REPLY:0:60} ($ENVELOPE_SIG_NAMESPACE): ${file##*/}.sig"
  else
    why=$(tr '\n' ' ' <"$out" 2>/dev/null | cut -c1-300)
    if ((ORBIT_TIMED_OUT)); then
      ENVELOPE_UNSIGNED_WHY="ssh-keygen did not sign within ${ENVELOPE_SIGN_TIMEOUT_S}s"
    elif [[ $why == *passphrase* ]]; then
      ENVELOPE_UNSIGNED_WHY="the signing key needs a passphrase and no ssh-agent holds it"
    else
      ENVELOPE_UNSIGNED_WHY="ssh-keygen could not sign: ${why:-exit $ORBIT_RC}"
    fi
    orbit_log "envelope: not signed ($ENVELOPE_UNSIGNED_WHY; ssh-keygen said: ${why:-nothing}): the envelope is an integrity record only"
  fi
  rm -rf -- "$work"
}
