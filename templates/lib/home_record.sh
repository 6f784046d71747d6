# ---- the record of the files held outside the repository (contract section 7): the
# ---- engine's user-level files that name commands, permissions, hooks, servers, skills,
# ---- plugins or agents, and the env file. Shared by the runner (lib/runner/home.sh holds
# ---- and checks them) and orbit audit and recover (src/home.rs runs these subroutines, and
# ---- tells from them what was added and takes it away). The record, pins.home in
# ---- the loop directory, is written at the loop's first run: a header line per held path
# ---- (`#<TAB>KIND<TAB>PATH<TAB>ARG`), then `VALUE  PATH` lines. KIND is `file` (the file,
# ---- through a symlink), `dir` (the directory and every entry under it but directories, each
# ---- its own line: a directory that holds nothing but directories names nothing, as absent;
# ---- ARG names entries of it, comma-separated, that the engine writes itself and are not held),
# ---- `json` (of a JSON file only the top-level keys ARG names, comma-separated),
# ---- `json-projects` (of ~/.claude.json only its MCP servers and, for the projects at or above
# ---- the workspace ARG, their servers, allowed tools, .mcp.json approvals and trust) or
# ---- `toml` (~/.codex/config.toml but for the tables codex writes itself, a project's
# ---- trust and its notices, and the model it remembers). VALUE is a file's sha256,
# ---- `absent`, `dir`, `other`, `unreadable`, `link:<sha256 of its target>:<what it
# ---- reaches>`, `keys:<sha256>` (a JSON projection: keys sorted, empty values left out, so
# ---- that a file the engine creates or rewrites with its own bookkeeping holds the same),
# ---- `toml:<sha256>` or `unparsable` (`unknown-kind` for a kind no reader here reads).
# ---- One perl program (core modules only) computes it, so that the runner and orbit
# ---- audit and recover compute the same record: the shared subroutines here, then the
# ---- reader of the engine's own kinds, which its part holds (HOME_PERL_ENGINE: claude's
# ---- json-projects, codex's toml, copilot's json; none for an engine that holds files and
# ---- directories only, and none in recover.sh, which holds no engine's part and computes
# ---- no record).
# shellcheck disable=SC2016  # perl code, not shell
HOME_PERL_SUBS='
@perl:home_record.pl@
'${HOME_PERL_ENGINE-}
# The program run once: the spec lines on stdin, the record on stdout.
# shellcheck disable=SC2016  # perl code, not shell
HOME_PERL=$HOME_PERL_SUBS'
@perl:home_record_once.pl@
'

# home_record_hasher_home_v SPECS: REPLY is the record of the held paths SPECS name, computed by
# the hasher (home_record.sh's code, as home_record_v runs it once): the same bytes as that
# program's output. Status 1 when it cannot answer (no hasher, or its perl lacks a module):
# the caller runs the program.
home_record_hasher_home_v() {
  orbit_hasher_ask_v H "$1"
}

# home_record_v SPECS: REPLY is the record of the held paths the spec lines SPECS name
# (`KIND<TAB>PATH<TAB>ARG`), header included; status 1 when perl cannot compute it (no
# perl, or no JSON::PP or Digest::SHA). The resident perl (orbit_hasher_start) computes it
# without a program started per look; the same code is run once when it cannot.
home_record_v() {
  home_record_hasher_home_v "$1" && return 0
  REPLY=$(perl -e "$HOME_PERL" <<<"$1" 2>/dev/null) || return 1
}

# home_record_home_specs_of_v RECORD: REPLY is the spec lines of a record's header.
home_record_home_specs_of_v() {
  local line
  REPLY=''
  while IFS= read -r line; do
    [[ $line == '#'$'\t'* ]] && REPLY+=${line#'#'$'\t'}$'\n'
  done <<<"$1"
}
