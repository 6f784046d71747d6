# The reader of claude held files (lib/engines/claude.sh places it after home_json.pl):
# kind `json-projects`, of ~/.claude.json only its MCP servers and, for the projects at or
# above the workspace ARG, their servers, allowed tools, approvals of .mcp.json servers and
# trust (claude rewrites the rest with its own bookkeeping at every start).
use strict; use warnings;
our @CLAUDE_PROJECT_KEYS = qw(mcpServers allowedTools enabledMcpjsonServers disabledMcpjsonServers enableAllProjectMcpServers hasTrustDialogAccepted);
# The keys held of a project entry (orbit audit tells the entries added under them).
sub claude_project_keys { return @CLAUDE_PROJECT_KEYS; }
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
home_reader("json-projects", \&claude_json);
