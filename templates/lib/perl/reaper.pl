# The runner, started afresh, asks to be the child subreaper of what it runs (lib/runner/
# reaper.sh): ARGV is the number of the prctl syscall on this machine, then bash, the script
# and its arguments. prctl(PR_SET_CHILD_SUBREAPER = 36, 1) granted sets ORBIT_SUBREAPER to 1,
# then the command is exec-ed with the same pid and open files; one that cannot start ends
# this with 127 and nothing printed (the runner says nothing more than bash would).
use strict; use warnings; no warnings "exec";
$ENV{ORBIT_SUBREAPER} = 1 if syscall(shift(@ARGV) + 0, 36, 1, 0, 0, 0) == 0;
exec { $ARGV[0] } @ARGV;
exit 127;
