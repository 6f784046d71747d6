# ---- a protect set (contract section 7): every file a protect glob matches in a work tree,
# ---- tracked or not, ignored or not, but for what the user's own ignore rules (the
# ---- repository's info/exclude, core.excludesFile) and the .gitignore files of the loop's
# ---- base commit ignore. An ignore file written in the work tree since (the agent's)
# ---- decides nothing. The agent's folder is never in a set, nor, while untracked, a file
# ---- the runner saw a check run make (its artifacts: a report, a cache). The runner and
# ---- recover.sh list a set with protect_list; orbit's audit and recover (src/pins.rs,
# ---- set_files) list it the same way, and a test holds the three together.

# The base commit's ignore rules, as one exclude file's text, for the base they were read of.
PROTECT_RULES=
PROTECT_RULES_OF=
# The user's own exclude files of a work tree (--exclude-from arguments), for that tree.
PROTECT_USER=()
PROTECT_USER_OF=

# protect_rule_v DIR LINE: REPLY is LINE of the .gitignore file in the directory DIR
# (relative to the top, "" for the top) as a pattern of an exclude file read at the top:
# one without a slash but at its end matches at any depth under DIR, any other under DIR
# only. Comments and blank lines give "".
protect_rule_v() {
  local d=$1 l=$2 neg='' core
  REPLY=''
  [[ -n $l && $l != '#'* ]] || return 0
  if [[ -z $d ]]; then
    REPLY=$l
    return 0
  fi
  if [[ $l == '!'* ]]; then
    neg='!'
    l=${l#!}
  fi
  core=$l
  while [[ $core == *' ' && $core != *'\ ' ]]; do
    core=${core% }
  done
  core=${core%/}
  [[ -n $core ]] || return 0
  # The directory's name, its wildcards taken literally.
  d=${d//\\/\\\\}
  d=${d//\*/\\*}
  d=${d//\?/\\?}
  d=${d//\[/\\[}
  if [[ $l == /* ]]; then
    REPLY="$neg/$d$l"
  elif [[ $core == */* ]]; then
    REPLY="$neg/$d/$l"
  else
    REPLY="$neg/$d/**/$l"
  fi
}

# protect_rules_v DIR BASE: REPLY is the .gitignore files of the commit BASE (regular files
# only, the top's first, then deeper ones: a deeper file's rules win, as in git) as one
# exclude file, read through the repository of the work tree DIR. Read once per base.
protect_rules_v() {
  local dir=$1 base=$2 meta path d line text='' depth max=0 i
  local -a files=() blobs=()
  if [[ $PROTECT_RULES_OF == "$base" && -n $base ]]; then
    REPLY=$PROTECT_RULES
    return 0
  fi
  REPLY=''
  [[ -n $base ]] || return 0
  while IFS= read -r -d '' meta; do
    path=${meta#*$'\t'}
    meta=${meta%%$'\t'*}
    [[ $meta == 100644\ blob\ * || $meta == 100755\ blob\ * ]] || continue
    [[ $path == .gitignore || $path == */.gitignore ]] || continue
    files+=("$path")
    blobs+=("${meta##* }")
    d=${path//[!\/]/}
    ((${#d} <= max)) || max=${#d}
  done < <(git -C "$dir" ls-tree -r -z --full-tree "$base" 2>/dev/null || true)
  for ((depth = 0; depth <= max; depth++)); do
    for i in "${!files[@]}"; do
      d=${files[i]//[!\/]/}
      ((${#d} == depth)) || continue
      d=''
      [[ ${files[i]} != */* ]] || d=${files[i]%/.gitignore}
      while IFS= read -r line || [[ -n $line ]]; do
        protect_rule_v "$d" "${line%$'\r'}"
        [[ -z $REPLY ]] || text+=$REPLY$'\n'
      done < <(git -C "$dir" cat-file blob "${blobs[i]}" 2>/dev/null || true)
    done
  done
  PROTECT_RULES=$text PROTECT_RULES_OF=$base
  REPLY=$text
}

# protect_user_excludes DIR: PROTECT_USER holds --exclude-from arguments for the user's own
# exclude files of the work tree DIR that exist: core.excludesFile (else git's default,
# $XDG_CONFIG_HOME/git/ignore), then the repository's info/exclude (which wins, as in git).
protect_user_excludes() {
  local dir=$1 f
  [[ $PROTECT_USER_OF != "$dir" || -z $dir ]] || return 0
  PROTECT_USER=() PROTECT_USER_OF=$dir
  f=$(git -C "$dir" config --path --get core.excludesFile 2>/dev/null || true)
  if [[ -z $f ]]; then
    if [[ -n ${XDG_CONFIG_HOME:-} ]]; then
      f=$XDG_CONFIG_HOME/git/ignore
    elif [[ -n ${HOME:-} ]]; then
      f=$HOME/.config/git/ignore
    fi
  fi
  [[ -z $f || $f == /* ]] || f=$dir/$f
  if [[ -n $f && -f $f ]]; then
    PROTECT_USER+=("--exclude-from=$f")
  fi
  f=$(git -C "$dir" rev-parse --git-path info/exclude 2>/dev/null || true)
  [[ -z $f || $f == /* ]] || f=$dir/$f
  if [[ -n $f && -f $f ]]; then
    PROTECT_USER+=("--exclude-from=$f")
  fi
}

# protect_list DIR BASE GLOB SCRATCH [PATHSPEC...]: the paths (relative to the top of the work
# tree DIR) protect glob GLOB matches there, NUL-terminated, unsorted (a path may come twice):
# every path of DIR's index, and every other file but what the user's own ignore rules and
# BASE's .gitignore files ignore. SCRATCH is a directory of the caller's for the rules' file.
# Each PATHSPEC ":(exclude,literal)NAME" of an artifact leaves NAME out while it is untracked;
# the agent's folder is always out. Status 1 when git fails.
protect_list() {
  local dir=$1 base=$2 g=$3 scratch=$4 rules rc=0
  shift 4
  protect_rules_v "$dir" "$base"
  rules=$scratch/.protect-rules.$$
  rm -f -- "$rules"
  printf '%s' "$REPLY" >"$rules" || return 1
  protect_user_excludes "$dir"
  GIT_OPTIONAL_LOCKS=0 git -C "$dir" -c core.fsmonitor=false ls-files -z --cached -- \
    ":(glob)$g" ':(exclude,literal).orbit-agent' 2>/dev/null || rc=1
  GIT_OPTIONAL_LOCKS=0 git -C "$dir" -c core.fsmonitor=false ls-files -z --others \
    ${PROTECT_USER[@]+"${PROTECT_USER[@]}"} "--exclude-from=$rules" -- \
    ":(glob)$g" ':(exclude,literal).orbit-agent' "$@" 2>/dev/null || rc=1
  rm -f -- "$rules"
  return "$rc"
}
