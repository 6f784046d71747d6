# The JSON projection of a held file (the engines whose held files are JSON: claude,
# copilot; their part places this before their reader): only the keys a reader names, empty
# values left out, the keys sorted, hashed (`keys:<sha256>`). A file mid-rewrite is read
# again (20 tries, 0.1 s apart) before it is `unparsable`. Needs home_record.pl (slurp, hx).
use strict; use warnings;
use JSON::PP ();
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
