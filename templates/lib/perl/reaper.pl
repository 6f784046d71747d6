$ENV{ORBIT_SUBREAPER} = 1 if syscall(shift(@ARGV) + 0, 36, 1, 0, 0, 0) == 0; exec {$ARGV[0]} @ARGV; exit 127;
