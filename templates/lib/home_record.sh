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
# ---- `toml:<sha256>` or `unparsable`. One perl program (core modules only) computes it, so
# ---- that the runner, recover.sh and orbit audit compute the same record.
# shellcheck disable=SC2016  # perl code, not shell
HOME_PERL_SUBS='
use strict; use warnings;
our $HOME_OUT;
use Digest::SHA (); use JSON::PP (); use File::Find (); use Cwd ();
sub hx { return Digest::SHA::sha256_hex($_[0]); }
sub line {
  my ($v, $p) = @_;
  if ($p =~ /[\n\\]/) { $p =~ s/\\/\\\\/g; $p =~ s/\n/\\n/g; }
  $HOME_OUT .= "$v  $p\n";
}
sub fsha {
  my $fh;
  open($fh, "<:raw", $_[0]) or return "unreadable";
  my $s = Digest::SHA->new(256); $s->addfile($fh); close $fh;
  return $s->hexdigest;
}
sub val {
  my $p = shift;
  if (-l $p) {
    my $t = readlink($p); $t = "" unless defined $t;
    my $to = -f $p ? fsha($p) : -d _ ? "dir" : -e _ ? "other" : "absent";
    return "link:" . hx($t) . ":" . $to;
  }
  return "absent" unless -e _;
  return "dir" if -d _;
  return fsha($p) if -f _;
  return "other";
}
sub slurp {
  my $fh;
  open($fh, "<:raw", $_[0]) or return undef;
  local $/; my $d = <$fh>; close $fh;
  return defined $d ? $d : "";
}
sub blank {
  my $v = shift;
  return 1 unless defined $v;
  return !%$v if ref $v eq "HASH";
  return !@$v if ref $v eq "ARRAY";
  return !$v if JSON::PP::is_bool($v);
  return 0;
}
sub json_of {
  my $p = shift;
  return {} unless -e $p;
  return undef unless -f $p;
  for my $try (1 .. 20) {
    my $d = slurp($p);
    return undef unless defined $d;
    return {} if $d =~ /\A\s*\z/;
    my $j = eval { JSON::PP->new->utf8->decode($d) };
    return $j if ref $j eq "HASH";
    # A file with comment lines (JSONC, as copilot writes its config.json).
    (my $c = $d) =~ s{^[ \t]*//[^\n]*$}{}mg;
    $j = eval { JSON::PP->new->utf8->decode($c) };
    return $j if ref $j eq "HASH";
    select(undef, undef, undef, 0.1);
  }
  return undef;
}
sub keyed {
  my ($j, @keys) = @_;
  my %o;
  for my $k (@keys) { $o{$k} = $j->{$k} unless blank($j->{$k}); }
  return \%o;
}
sub digest { return "keys:" . hx(JSON::PP->new->utf8->canonical->encode($_[0])); }
our @CLAUDE_PROJECT_KEYS = qw(mcpServers allowedTools enabledMcpjsonServers disabledMcpjsonServers enableAllProjectMcpServers hasTrustDialogAccepted);
sub claude_projects {
  my ($j, $ws) = @_;
  my $pr = $j->{projects};
  return () unless ref $pr eq "HASH";
  return grep { ($_ eq $ws || index($ws, $_ eq "/" ? "/" : "$_/") == 0) && ref $pr->{$_} eq "HASH" } sort keys %$pr;
}
sub claude_proj {
  my ($j, $ws) = @_;
  my $o = keyed($j, "mcpServers");
  for my $k (claude_projects($j, $ws)) {
    my $s = keyed($j->{projects}{$k}, @CLAUDE_PROJECT_KEYS);
    $o->{projects}{$k} = $s if %$s;
  }
  return $o;
}
sub claude_json {
  my ($p, $ws) = @_;
  my $j = json_of($p);
  return "unparsable" unless defined $j;
  return digest(claude_proj($j, $ws));
}
sub json_keys {
  my ($p, $keys) = @_;
  my $j = json_of($p);
  return "unparsable" unless defined $j;
  return digest(keyed($j, split(/,/, $keys)));
}
sub codex_toml {
  my $p = shift;
  return "absent" unless -e $p;
  my $d = slurp($p);
  return "unreadable" unless defined $d;
  my ($skip, $out) = (0, "");
  for my $l (split(/\n/, $d)) {
    if ($l =~ /^\s*\[\[?\s*([^\]]*?)\s*\]\]?\s*(#.*)?$/) {
      $skip = ($1 =~ /^(projects|notice)(\s*\.|$)/) ? 1 : 0;
    } elsif (!$skip && $l =~ /^\s*(model|model_reasoning_effort)\s*=/) {
      next;
    }
    $out .= "$l\n" unless $skip;
  }
  return "toml:" . hx($out);
}
sub tree {
  my ($root, $skip) = @_;
  my %skip = map { $_ => 1 } grep { $_ ne "" } split(/,/, defined $skip ? $skip : "");
  if (-l $root || !-d _) { line(val($root), $root); return; }
  my $real = Cwd::realpath($root);
  if (!defined $real) { line("unreadable", $root); return; }
  my @found;
  File::Find::find({ no_chdir => 1, wanted => sub {
    return if $_ eq $real;
    my $rel = substr($_, length($real) + 1);
    if ($skip{$rel}) { $File::Find::prune = 1; return; }
    return if -d $_ && !-l $_;
    push @found, $rel;
  } }, $real);
  if (!@found) { line("absent", $root); return; }
  line("dir", $root);
  for my $rel (sort @found) { line(val("$real/$rel"), "$root/$rel"); }
}
sub home_record {
  my @specs;
  $HOME_OUT = "";
  for my $l (split(/\n/, $_[0])) {
    next if $l eq "";
    my ($kind, $path, $arg) = split(/\t/, $l, 3);
    $arg = "" unless defined $arg;
    $HOME_OUT .= "#\t$kind\t$path\t$arg\n";
    push @specs, [$kind, $path, $arg];
  }
  for my $s (@specs) {
    my ($kind, $path, $arg) = @$s;
    if ($kind eq "file") { line(val($path), $path); }
    elsif ($kind eq "dir") { tree($path, $arg); }
    elsif ($kind eq "json-projects") { line(claude_json($path, $arg), $path); }
    elsif ($kind eq "json") { line(json_keys($path, $arg), $path); }
    elsif ($kind eq "toml") { line(codex_toml($path), $path); }
    else { line("unknown-kind", $path); }
  }
  utf8::encode($HOME_OUT) if utf8::is_utf8($HOME_OUT);
  return $HOME_OUT;
}
'
# The program run once: the spec lines on stdin, the record on stdout.
# shellcheck disable=SC2016  # perl code, not shell
HOME_PERL=$HOME_PERL_SUBS'
binmode STDOUT;
my $in = do { local $/; <STDIN> };
print home_record(defined $in ? $in : "");
'

# orbit_hasher_home_v SPECS: REPLY is the record of the held paths SPECS name, computed by
# the hasher (home_record.sh's code, as home_record_v runs it once): the same bytes as that
# program's output. Status 1 when it cannot answer (no hasher, or its perl lacks a module):
# the caller runs the program.
orbit_hasher_home_v() {
  local LC_ALL=C n
  orbit_hasher_alive || return 1
  if ! printf 'H %d\n%s' "${#1}" "$1" >&"${ORBIT_HASHER[1]}" || ! read -r -t 60 n <&"${ORBIT_HASHER[0]}"; then
    orbit_hasher_stop
    return 1
  fi
  [[ $n != - ]] || return 1
  if [[ ! $n =~ ^[0-9]+$ ]]; then
    orbit_hasher_stop
    return 1
  fi
  REPLY=''
  ((n == 0)) && return 0
  if ! IFS= read -r -N "$n" -t 60 REPLY <&"${ORBIT_HASHER[0]}" || ((${#REPLY} != n)); then
    REPLY=''
    orbit_hasher_stop
    return 1
  fi
}

# home_record_v SPECS: REPLY is the record of the held paths the spec lines SPECS name
# (`KIND<TAB>PATH<TAB>ARG`), header included; status 1 when perl cannot compute it (no
# perl, or no JSON::PP or Digest::SHA). The resident perl (orbit_hasher_start) computes it
# without a program started per look; the same code is run once when it cannot.
home_record_v() {
  orbit_hasher_home_v "$1" && return 0
  REPLY=$(perl -e "$HOME_PERL" <<<"$1" 2>/dev/null) || return 1
}

# home_specs_of_v RECORD: REPLY is the spec lines of a record's header.
home_specs_of_v() {
  local line
  REPLY=''
  while IFS= read -r line; do
    [[ $line == '#'$'\t'* ]] && REPLY+=${line#'#'$'\t'}$'\n'
  done <<<"$1"
}
