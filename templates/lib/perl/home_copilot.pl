# The reader of copilot held files (lib/engines/copilot.sh places it after home_json.pl):
# kind `json`, of a JSON file (with comment lines or not: copilot writes its config.json
# so) only the top-level keys ARG names, comma-separated.
use strict; use warnings;
sub json_keys {
  my ($p, $keys) = @_;
  my $j = json_of($p);
  return "unparsable" unless defined $j;
  return digest(keyed($j, split(/,/, $keys)));
}
home_reader("json", \&json_keys);
