# The reader of codex held files (lib/engines/codex.sh places it): kind `toml`,
# ~/.codex/config.toml but for the tables codex writes itself (the trust of a project, its
# notices) and the model it remembers (model, model_reasoning_effort outside those tables),
# hashed line by line as it stands (`toml:<sha256>`): not parsed, so a file TOML refuses is
# held as well; `other` when it is not a regular file.
use strict; use warnings;
sub codex_toml {
  my $p = shift;
  return "absent" unless -e $p;
  # Not a regular file (a directory, a FIFO that would hold the read): nothing codex reads.
  return "other" unless -f _;
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
home_reader("toml", \&codex_toml);
