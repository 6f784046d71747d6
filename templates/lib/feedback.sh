# ---- feedback: what a failing verify said, in the terms of the test tools it ran
# ---- (static, included verbatim). The runner puts the failing tests and their assertion
# ---- lines beside the failing checks, the loci and the output tail, so the next agent
# ---- starts from the test that failed and what it expected.

# feedback_tests_v FILE: REPLY holds one line per finding of the verify output FILE:
# "T<TAB>name" for a failing test, "A<TAB>test: assertion" for what it asserted and
# "L<TAB>file:line:column" for where a failing test panicked (cargo test; relative paths
# only), at most 20 of each, in order, each at most 300 bytes. Understood: cargo test
# (libtest), pytest, go test (with or without -v) and jest; colour codes are ignored;
# anything else yields nothing. Reads the file once, with awk.
feedback_tests_v() {
  # shellcheck disable=SC2016  # awk code, not shell
  REPLY=$(LC_ALL=C awk '
    function add_test(t) {
      if (t != "" && !(t in seen_t) && nt < 20) { seen_t[t] = 1; nt++; print "T\t" substr(t, 1, 300) }
    }
    function add_assert(a) {
      if (a != "" && !(a in seen_a) && na < 20) { seen_a[a] = 1; na++; print "A\t" substr(a, 1, 300) }
    }
    function add_locus(l) {
      if (l ~ /^[A-Za-z0-9_.-][A-Za-z0-9_.\/-]*:[0-9]+:[0-9]+$/ && !(l in seen_l) && nl < 20) {
        seen_l[l] = 1; nl++; print "L\t" substr(l, 1, 300)
      }
    }
    function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
    BEGIN { esc = sprintf("%c", 27) }
    {
      gsub(esc "\\[[0-9;]*[A-Za-z]", "")
      sub(/\r$/, "")
    }
    # cargo test: "test a::b ... FAILED", then per failure "---- a::b stdout ----",
    # "thread ... panicked at FILE:L:C:" and the message up to a blank or note line.
    /^test [^ ]+ \.\.\. FAILED$/ { add_test($2); next }
    /^---- [^ ]+ stdout ----$/ { ct = $2; cs = 1; next }
    cs == 1 && /panicked at [^ ]+:$/ { loc = $NF; sub(/:$/, "", loc); add_locus(loc); cs = 2; msg = ""; next }
    cs == 2 {
      if ($0 == "" || $0 ~ /^note: / || $0 ~ /^stack backtrace:/) {
        if (msg != "") add_assert(ct ": " msg " (at " loc ")")
        cs = 0
      } else {
        msg = (msg == "") ? trim($0) : msg "; " trim($0)
      }
      next
    }
    # pytest: "___ test_name ___" opens a failure, its first "E   ..." line is the
    # assertion; "FAILED path::test - ..." in the short summary names the test.
    /^___+ [^ ]+ ___+$/ { pt = $2; ps = 1; next }
    ps == 1 && /^E   / { add_assert(pt ": " trim(substr($0, 2))); ps = 0; next }
    /^FAILED [^ ]+::[^ ]+/ { add_test($2); next }
    # go test: "=== RUN Name" (with -v) or "--- FAIL: Name (...)", then "    x_test.go:N: ...".
    /^=== RUN +[^ ]+/ { gt = $3; next }
    /^--- FAIL: [^ ]+ / { gt = $3; add_test(gt); next }
    gt != "" && /^ +[^ ]+_test\.go:[0-9]+: / { add_assert(gt ": " trim($0)); next }
    # jest: "  ● Suite › name", then the matcher line and its Expected/Received lines.
    /^ +● / { jt = trim($0); sub(/^● /, "", jt); add_test(jt); js = 1; jm = ""; next }
    js == 1 && /^ +expect[.(]/ { jm = trim($0); next }
    js == 1 && /^ +(Expected|Received)/ {
      jm = (jm == "") ? trim($0) : jm "; " trim($0)
      if (trim($0) ~ /^Received/) { add_assert(jt ": " jm); js = 0 }
      next
    }
  ' "$1" 2>/dev/null | orbit_clean_text || true)
}

# feedback_failing_output FILE OUT: writes to OUT what of the verify output FILE is the
# failing checks' own: each section from a check's "==> check NAME..." header to its last
# "[FAIL] NAME" line (a section cut short, without a PASS or FAIL line, whole), and the
# "[FAIL] ..." lines outside every section (the runner's own, a verify.sh that did not
# run). What a passing check printed, and verify.sh's closing lines, are left out. When
# nothing is, OUT is FILE whole. Reads FILE twice with awk (no section is held in memory).
feedback_failing_output() {
  local file=$1 out=$2
  # shellcheck disable=SC2016  # awk code, not shell
  LC_ALL=C awk '
    function header(line,   rest) {
      if (substr(line, 1, 10) != "==> check ") return ""
      rest = substr(line, 11)
      if (!match(rest, /^[A-Za-z0-9._-]+( \[[a-z]+\])?: /)) return ""
      sub(/[ :].*$/, "", rest)
      return rest
    }
    FNR == 1 { pass++ }
    { h = header($0) }
    pass == 1 {
      if (h != "") { n++; name[n] = h; next }
      if (n > 0 && ($1 == "[PASS]" || $1 == "[FAIL]") && $2 == name[n]) {
        last[n] = FNR; failed[n] = ($1 == "[FAIL]")
      }
      next
    }
    {
      if (h != "") k++
      inside = k > 0 && (last[k] == 0 || FNR <= last[k])
      if (inside ? (failed[k] || last[k] == 0) : (substr($0, 1, 7) == "[FAIL] ")) print
    }
  ' "$file" "$file" >"$out" 2>/dev/null || : >"$out"
  if [[ ! -s $out ]]; then
    cat -- "$file" >"$out" 2>/dev/null || :
  fi
}
