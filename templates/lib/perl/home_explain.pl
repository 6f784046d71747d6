# What a JSON projection of the held files changed (orbit audit and recover, src/home.rs;
# run after home_record.pl and every engine reader, never placed in a script). Input lines
# `KIND<TAB>PATH<TAB>ARG<TAB>RECORDED`; for each, `A ITEM` per entry added (the smallest
# set whose removal gives the recorded hash, sets of up to three entries tried), `W HEX` the
# bytes of the file without them (checked: read back, its projection hashes to the
# recorded value), or `H ITEM` per entry it holds now when none is found (`U` when it
# cannot be read), then `.`.
use strict; use warnings;
use JSON::PP (); use Storable ();
my $ENC = JSON::PP->new->canonical->allow_nonref->allow_bignum;
sub qk { my $k = shift; return $k =~ /\A[A-Za-z0-9_-]+\z/ ? $k : JSON::PP->new->ascii->allow_nonref->encode("$k"); }
# The held parts of a document: [display, [path of keys]] of each held key present.
sub roots {
  my ($kind, $j, $arg) = @_;
  my @r;
  if ($kind eq "json-projects") {
    push @r, ["mcpServers", ["mcpServers"]];
    for my $p (claude_projects($j, $arg)) {
      push @r, ["projects." . qk($p) . "." . $_, ["projects", $p, $_]] for claude_project_keys();
    }
  } else {
    push @r, [qk($_), [$_]] for grep { $_ ne "" } split(/,/, $arg);
  }
  return @r;
}
sub at {
  my ($j, $path) = @_;
  my $c = $j;
  for my $k (@$path) { return undef unless ref $c eq "HASH" && exists $c->{$k}; $c = $c->{$k}; }
  return $c;
}
# The entries one could have added: a key of a held object, an element of a held list, a
# held key with a plain value.
sub items {
  my ($kind, $j, $arg) = @_;
  my @it;
  for my $r (roots($kind, $j, $arg)) {
    my ($d, $path) = @$r;
    my $v = at($j, $path);
    next if blank($v);
    if (ref $v eq "HASH") { push @it, ["$d." . qk($_), $path, "k", $_] for sort keys %$v; }
    elsif (ref $v eq "ARRAY") {
      my %seen;
      for my $e (@$v) { my $s = $ENC->encode($e); next if $seen{$s}++; push @it, ["$d: $s", $path, "v", $s]; }
    } else { push @it, [$d, $path, "", ""]; }
  }
  return @it;
}
sub drop {
  my ($j, $it) = @_;
  my ($d, $path, $op, $a) = @$it;
  my @p = @$path; my $last = pop @p;
  my $c = at($j, \@p);
  return unless ref $c eq "HASH";
  if ($op eq "k") { delete $c->{$last}{$a} if ref $c->{$last} eq "HASH"; }
  elsif ($op eq "v") { $c->{$last} = [grep { $ENC->encode($_) ne $a } @{$c->{$last}}] if ref $c->{$last} eq "ARRAY"; }
  else { delete $c->{$last}; }
}
sub proj { my ($kind, $j, $arg) = @_; return $kind eq "json-projects" ? claude_proj($j, $arg) : keyed($j, split(/,/, $arg)); }
# Only what the projection reads, so that a large file is not copied for every try.
sub held_part {
  my ($kind, $j, $arg) = @_;
  my %o;
  for my $r (roots($kind, $j, $arg)) {
    my ($d, $path) = @$r;
    my $v = at($j, $path);
    next unless defined $v;
    my $c = \%o; my @p = @$path; my $last = pop @p;
    $c = ($c->{$_} //= {}) for @p;
    $c->{$last} = $v;
  }
  return \%o;
}
sub found {
  my ($kind, $j, $arg, $want) = @_;
  my @it = items($kind, $j, $arg);
  my $n = @it; my $tries = 0;
  my $part = held_part($kind, $j, $arg);
  for my $size (1 .. ($n < 3 ? $n : 3)) {
    my @idx = (0 .. $size - 1);
    while (1) {
      return () if ++$tries > 5000;
      my $c = Storable::dclone($part);
      drop($c, $it[$_]) for @idx;
      return map { $it[$_] } @idx if digest(proj($kind, $c, $arg)) eq $want;
      my $i = $size - 1;
      $i-- while $i >= 0 && $idx[$i] == $n - $size + $i;
      last if $i < 0;
      $idx[$i]++;
      $idx[$_] = $idx[$_ - 1] + 1 for $i + 1 .. $size - 1;
    }
  }
  return ();
}
sub rewrite {
  my ($kind, $path, $arg, $want, @drop) = @_;
  my $d = slurp($path);
  return undef unless defined $d;
  my $j = eval { JSON::PP->new->utf8->allow_bignum->decode($d) };
  if (ref $j ne "HASH") { (my $c = $d) =~ s{^[ \t]*//[^\n]*$}{}mg; $j = eval { JSON::PP->new->utf8->allow_bignum->decode($c) }; }
  return undef unless ref $j eq "HASH";
  drop($j, $_) for @drop;
  my $out = JSON::PP->new->utf8->canonical->pretty->allow_bignum->encode($j);
  my $back = eval { JSON::PP->new->utf8->decode($out) };
  return undef unless ref $back eq "HASH" && digest(proj($kind, $back, $arg)) eq $want;
  return $out;
}
binmode STDOUT;
while (my $l = <STDIN>) {
  chomp $l;
  my ($kind, $path, $arg, $want) = split(/\t/, $l, 4);
  my $j = json_of($path);
  if (!defined $j) { print "U \n.\n"; next; }
  my @f = found($kind, $j, $arg, $want);
  if (@f) {
    print "A $_->[0]\n" for @f;
    my $out = rewrite($kind, $path, $arg, $want, @f);
    print "W ", unpack("H*", $out), "\n" if defined $out;
  } else {
    print "H $_->[0]\n" for items($kind, $j, $arg);
  }
  print ".\n";
}
