# The record of the held files (lib/home_record.sh `HOME_PERL_SUBS`): what every engine
# shares, a file and a directory tree. A held kind that is neither (a JSON projection, a
# TOML read) is read by the reader of its engine (home_claude.pl, home_codex.pl,
# home_copilot.pl), which the part of that engine places after this one and which
# registers itself with home_reader KIND, SUB (SUB: PATH, ARG -> the value); a kind no
# reader is registered for is `unknown-kind`. A loop holds the reader of its engine
# alone; orbit audit and recover (src/home.rs) hold every reader.
use strict; use warnings;
our ($HOME_OUT, %HOME_READER);
use Digest::SHA (); use File::Find (); use Cwd ();
sub home_reader { $HOME_READER{$_[0]} = $_[1]; return; }
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
    elsif ($HOME_READER{$kind}) { line($HOME_READER{$kind}->($path, $arg), $path); }
    else { line("unknown-kind", $path); }
  }
  utf8::encode($HOME_OUT) if utf8::is_utf8($HOME_OUT);
  return $HOME_OUT;
}
