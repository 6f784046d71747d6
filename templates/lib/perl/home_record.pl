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
