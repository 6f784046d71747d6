use strict;
# No module at start: the bridge runs before the command, and the run waits for each
# millisecond it loads (warnings.pm too: the tests compile this with warnings in force,
# perl -Mwarnings -c). Linux socket numbers (the sandbox is Linux only).
sub AF_UNIX () { 1 } sub AF_INET () { 2 } sub SOCK_STREAM () { 1 } sub SOL_SOCKET () { 1 } sub SO_REUSEADDR () { 2 }
sub sun { pack("S a108", AF_UNIX, $_[0]) }
sub sin_lo { pack("S n C4 x8", AF_INET, $_[0], 127, 0, 0, 1) }
my $CONNECT_S = 15; my $HEAD_S = 30; my $IDLE_S = 600; my $LOG_MAX = 1 << 20;
my $mode = shift @ARGV // "";
my ($SOCK, $PARENT);
END { unlink $SOCK if defined $SOCK && $$ == $PARENT; }

sub write_all { my ($h, $d) = @_; my $o = 0;
  while ($o < length $d) { my $n = syswrite($h, $d, length($d) - $o, $o); return 0 unless $n; $o += $n; }
  return 1; }

# relay A B LIFELINE: bytes both ways until both ends close, a silence of IDLE_S, or the
# lifeline (the launcher) ends.
sub relay { my ($a, $b, $life) = @_;
  my %peer = (fileno($a) => $b, fileno($b) => $a);
  my %open = (fileno($a) => $a, fileno($b) => $b);
  while (%open) {
    my $rin = ""; vec($rin, $_, 1) = 1 for keys %open;
    vec($rin, fileno($life), 1) = 1 if $life;
    my $n = select(my $rout = $rin, undef, undef, $IDLE_S);
    return if $n <= 0;
    return if $life && vec($rout, fileno($life), 1);
    for my $fd (keys %open) {
      next unless vec($rout, $fd, 1);
      my $r = sysread($open{$fd}, my $buf, 65536);
      if (!$r) { shutdown($peer{$fd}, 1); delete $open{$fd}; next; }
      alarm($IDLE_S); my $ok = write_all($peer{$fd}, $buf); alarm(0);
      return unless $ok;
    }
  }
}

sub host_ok { my ($h) = @_;
  return 1 if $h =~ /^\[[0-9A-Fa-f:.]+\]\z/;
  my $n = $h; $n =~ s/^\*\.//;
  return 0 if $n eq "" || length($n) > 253;
  for my $l (split /\./, $n, -1) { return 0 unless $l =~ /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\z/; }
  return 1; }

# split_hp "HOST[:PORT]": (host, port or undef); () when it is neither.
sub split_hp { my ($s) = @_; my ($h, $p);
  if ($s =~ /^(\[[^\]]*\])(?::(\d{1,5}))?$/) { ($h, $p) = ($1, $2); }
  elsif ($s =~ /^([^:\[\]]+)(?::(\d{1,5}))?$/) { ($h, $p) = ($1, $2); }
  else { return (); }
  return () unless host_ok($h);
  return () if defined $p && ($p < 1 || $p > 65535 || $p =~ /^0/);
  return (lc $h, $p); }

sub reply { my ($c, $code, $text) = @_;
  write_all($c, "HTTP/1.1 $code\r\nContent-Type: text/plain\r\nContent-Length: " . length($text) . "\r\nConnection: close\r\n\r\n$text"); }

# serve CLIENT NOTE ALLOWED: one proxied connection: its request head, the allowlist, the
# upstream, then the bytes both ways.
sub serve { my ($c, $note, $allowed) = @_;
  my $head = "";
  alarm($HEAD_S);
  while ($head !~ /\r?\n\r?\n/) {
    my $n = sysread($c, $head, 8192, length $head);
    return unless $n;
    return reply($c, "431 Request Header Fields Too Large", "orbit: request head too large\n") if length($head) > 65536;
  }
  alarm(0);
  my ($line) = $head =~ /^([^\r\n]*)/;
  my ($method, $target, $ver) = $line =~ m{^([A-Z]+) (\S+) (HTTP/1\.[01])$}
    or return reply($c, "400 Bad Request", "orbit: not an HTTP request\n");
  my ($h, $p, $path, $connect);
  if ($method eq "CONNECT") { ($h, $p) = split_hp($target); $connect = 1; }
  elsif ($target =~ m{^http://([^/?#\@]+)(.*)$}i) { ($h, $p) = split_hp($1); $p //= 80 if defined $h; $path = length($2) ? $2 : "/"; }
  else { return reply($c, "400 Bad Request", "orbit: the sandbox proxy takes CONNECT HOST:PORT and http:// requests only\n"); }
  return reply($c, "400 Bad Request", "orbit: not a host and port: $target\n") unless defined $h && defined $p && $h !~ /\*/;
  my $hp = "$h:$p";
  if (!$allowed->($h, $p)) {
    $note->("refused $hp");
    return reply($c, "403 Forbidden", "orbit: the sandbox refused $hp: it is not on this loop allowlist. The user allows a host with orbit init --allow-host $hp (loop.toml allow-hosts), or sandbox-network = \"open\".\n");
  }
  (my $peer = $h) =~ s/^\[(.*)\]$/$1/;
  my %o = (PeerHost => $peer, PeerPort => $p, Proto => "tcp", Timeout => $CONNECT_S);
  my $u = eval { require IO::Socket::IP; 1 } ? IO::Socket::IP->new(%o)
    : do { require IO::Socket::INET; IO::Socket::INET->new(%o) };
  if (!$u) { $note->("unreachable $hp"); return reply($c, "502 Bad Gateway", "orbit: cannot reach $hp\n"); }
  my ($top, $rest) = $head =~ /^(.*?\r?\n\r?\n)(.*)$/s;
  if ($connect) {
    write_all($c, "HTTP/1.1 200 Connection established\r\n\r\n") or return;
    write_all($u, $rest) or return if length $rest;
  } else {
    my @lines = split /\r?\n/, $top; shift @lines;
    my $out = "$method $path $ver\r\n";
    for my $l (@lines) { next if $l =~ /^(?:proxy-[a-z-]*|connection|keep-alive)\s*:/i; $out .= "$l\r\n"; }
    write_all($u, $out . "Connection: close\r\n\r\n" . $rest) or return;
  }
  relay($c, $u, \*STDIN);
}

if ($mode eq "proxy") {
  my ($path, $log, $label, @allow) = @ARGV;
  my @rules;
  for my $e (@allow) { my @r = split_hp($e) or die "orbit-net: not HOST or HOST:PORT: $e\n"; push @rules, [@r]; }
  my $allowed = sub { my ($h, $p) = @_;
    for my $r (@rules) { my ($rh, $rp) = @$r;
      next if defined $rp ? $p != $rp : ($p != 80 && $p != 443);
      return 1 if $rh eq $h;
      return 1 if substr($rh, 0, 2) eq "*." && length($h) > length($rh) - 1 && substr($h, -(length($rh) - 1)) eq substr($rh, 1);
    }
    return 0; };
  my $note = sub { my ($what) = @_;
    return if -s $log && -s $log > $LOG_MAX;
    open(my $fh, ">>", $log) or return; syswrite($fh, time() . " $label $what\n"); close $fh; };
  $SIG{PIPE} = "IGNORE"; $SIG{CHLD} = "IGNORE"; $SIG{TERM} = $SIG{INT} = $SIG{HUP} = "IGNORE";
  socket(my $srv, AF_UNIX, SOCK_STREAM, 0) or die "orbit-net: socket: $!\n";
  my $tmp = "$path.new";
  unlink $tmp;
  if (!(bind($srv, sun($tmp)) && chmod(0600, $tmp) && listen($srv, 64) && rename($tmp, $path))) {
    # A run over before its proxy started took the directory with it: nothing to serve.
    (my $dir = $path) =~ s{/[^/]*$}{};
    exit 0 unless -d $dir;
    die "orbit-net: cannot listen on $path: $!\n";
  }
  ($SOCK, $PARENT) = ($path, $$);
  while (1) {
    my $rin = ""; vec($rin, fileno($srv), 1) = 1; vec($rin, 0, 1) = 1;
    next if select(my $rout = $rin, undef, undef, undef) <= 0;
    if (vec($rout, 0, 1)) { my $n = sysread(STDIN, my $x, 512); exit 0 unless $n; }
    next unless vec($rout, fileno($srv), 1);
    accept(my $c, $srv) or next;
    my $pid = fork;
    if (defined $pid && $pid == 0) {
      close $srv; $SIG{ALRM} = sub { exit(0) };
      serve($c, $note, $allowed); exit(0);
    }
    close $c;
  }
}
elsif ($mode eq "bridge") {
  my ($path, $port, @cmd) = @ARGV;
  @cmd or die "orbit-net: bridge: no command\n";
  my $l;
  socket($l, AF_INET, SOCK_STREAM, 0) && setsockopt($l, SOL_SOCKET, SO_REUSEADDR, 1)
    && bind($l, sin_lo($port)) && listen($l, 64)
    or die "orbit-net: the bridge cannot listen on 127.0.0.1:$port: $!\n";
  my $pid = fork // die "orbit-net: fork: $!\n";
  if ($pid == 0) {
    # A grandchild of the command-to-be, so that the command never waits for it: it ends
    # with the sandbox.
    exit(0) if fork;
    open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");
    # The tally of a check run (fd 6) is for verify.sh alone.
    if (fileno($l) != 6 && open(my $t, "<&=", 6)) { close $t; }
    $SIG{PIPE} = "IGNORE"; $SIG{CHLD} = "IGNORE";
    while (1) {
      accept(my $c, $l) or next;
      my $k = fork;
      if (defined $k && $k == 0) {
        close $l; $SIG{ALRM} = sub { exit(0) };
        # The proxy starts beside the sandbox: its socket may still be on its way.
        my $u;
        for (1 .. 100) {
          socket($u, AF_UNIX, SOCK_STREAM, 0) or exit(0);
          last if connect($u, sun($path));
          close $u; undef $u;
          select(undef, undef, undef, 0.05);
        }
        relay($c, $u, undef) if $u;
        exit(0);
      }
      close $c;
    }
  }
  waitpid($pid, 0);
  close $l;
  my $url = "http://127.0.0.1:$port";
  $ENV{$_} = $url for qw(HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy);
  delete @ENV{qw(NO_PROXY no_proxy)};
  # Node (22.21, 24 and later) honours the variables for its own fetch only when told to.
  $ENV{NODE_USE_ENV_PROXY} = 1;
  # A JVM (Maven, Gradle, the HTTP client of a test) reads no proxy variable but its own
  # properties, from JAVA_TOOL_OPTIONS: the bridge, after the options of the user (the last
  # of a property wins); loopback straight (the default of the JDK: a server a test starts
  # is in the sandbox); the resolver of Maven (3.9 and later) told to use them.
  $ENV{JAVA_TOOL_OPTIONS} = join " ", $ENV{JAVA_TOOL_OPTIONS} // "",
    (map { "-D$_.proxyHost=127.0.0.1 -D$_.proxyPort=$port" } qw(http https)),
    "-Dhttp.nonProxyHosts=localhost|127.*|[::1]",
    map { "-Daether.$_.useSystemProperties=true" } qw(connector.http transport.apache);
  exec { $cmd[0] } @cmd or die "orbit-net: cannot run $cmd[0]: $!\n";
}
else { die "orbit-net: mode proxy or bridge\n"; }
