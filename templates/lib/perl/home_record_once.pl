use strict; use warnings;
binmode STDOUT;
my $in = do { local $/; <STDIN> };
print home_record(defined $in ? $in : "");
