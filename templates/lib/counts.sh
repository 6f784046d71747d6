# ---- counts: how many tests a check's own output says ran, passed, failed and were skipped
# ---- (static, included verbatim into verify.sh and holdout.sh). A check means at the end
# ---- what it meant at the start (contract section 6): a check that passes with no test
# ---- run, or with fewer tests run (or more skipped) than on the base tree, fails, unless
# ---- loop.toml's allow-fewer-tests names it (a drop accepted, and said so). A check whose
# ---- output holds no known summary is judged by its exit status alone, as before.

# The base tree's counts (the red gate's record lines, as iterations/baseline/counts.tsv
# holds them), what this run counted (one line per check with a known summary) and why the
# last check judged failed, or the note of an accepted drop.
COUNTS_BASE=
COUNTS_SEEN=
COUNTS_WHY=
COUNTS_NOTE=

# counts_parse_v FILE: REPLY is "RAN PASSED FAILED SKIPPED UNIT" summed over every known
# summary in the check output FILE, or empty when it holds none. UNIT is "tests", or
# "packages" when the only summaries are go test's package lines (go test without -v
# prints no line per passing test). Known: cargo test (every "test result:" line, one per
# target; skipped = ignored), pytest's closing line ("3 passed, 1 skipped in 0.01s",
# "4 tests collected in ...", "no tests ran in ..."; errors count as failed, deselected as
# not run), go test (with -v: "--- PASS/FAIL/SKIP:" lines, subtests too; without: "ok"
# and "FAIL" package lines, "[no tests to run]" and "[no test files]" as none), jest
# ("Tests: ..., N total"; todo as skipped), vitest ("Tests  2 passed | 1 skipped (3)"),
# mocha ("N passing", "N failing", "N pending"), node's test runner ("# tests N", "# pass",
# "# fail", "# cancelled", "# skipped", "# todo", TAP or spec), and a plain closing line
# "N passed, M failed". Colour codes are ignored.
counts_parse_v() {
  # shellcheck disable=SC2016  # awk code, not shell
  REPLY=$(LC_ALL=C awk -v info="$(printf '\342\204\271')" '
    function num(s) { sub(/^[^0-9]*/, "", s); sub(/[^0-9].*$/, "", s); return s + 0 }
    function add(r, p, f, s) { known = 1; ran += r; pas += p; fai += f; ski += s }
    # pytest: "N word, N word ... in 0.12s" (inside "=" rules or not); every item known.
    function pytest(l,   body, items, i, n, w, r, p, f, s, ok) {
      sub(/^=+ /, "", l); sub(/ =+$/, "", l)
      if (l ~ /^no tests (ran|collected) in [0-9.]+s/) { add(0, 0, 0, 0); return }
      if (l !~ /^[0-9]+ [a-z ]+(, [0-9]+ [a-z ]+)* in [0-9.]+s( \([0-9:]+\))?$/) return
      body = l; sub(/ in [0-9.]+s( \([0-9:]+\))?$/, "", body)
      n = split(body, items, ", ")
      r = p = f = s = 0; ok = 1
      for (i = 1; i <= n; i++) {
        w = items[i]; sub(/^[0-9]+ /, "", w)
        if (w == "passed" || w == "xpassed") { p += num(items[i]); r += num(items[i]) }
        else if (w == "failed" || w == "error" || w == "errors") { f += num(items[i]); r += num(items[i]) }
        else if (w == "xfailed") { r += num(items[i]) }
        else if (w == "skipped") { s += num(items[i]) }
        else if (w !~ /^(deselected|warnings?|rerun|tests? collected)$/) { ok = 0 }
      }
      if (ok) add(r, p, f, s)
    }
    # jest "Tests: 1 failed, 1 skipped, 2 passed, 4 total"; vitest "Tests  1 failed | 2 passed (3)".
    function jest(l,   items, i, n, w, c, t, p, f, s) {
      sub(/^Tests: +/, "", l)
      n = split(l, items, ", ")
      t = -1; p = f = s = 0
      for (i = 1; i <= n; i++) {
        w = items[i]; c = num(w); sub(/^[0-9]+ /, "", w)
        if (w == "total") t = c
        else if (w == "passed") p = c
        else if (w == "failed") f = c
        else if (w == "skipped" || w == "todo") s += c
      }
      if (t >= 0) add(t - s, p, f, s)
    }
    function vitest(l,   items, i, n, w, c, p, f, s) {
      sub(/^ *Tests +/, "", l); sub(/ *\([0-9]+\)$/, "", l)
      n = split(l, items, " [|] ")
      p = f = s = 0
      for (i = 1; i <= n; i++) {
        w = items[i]; c = num(w); sub(/^[0-9]+ /, "", w)
        if (w == "passed") p = c
        else if (w == "failed") f = c
        else if (w == "skipped" || w == "todo") s += c
      }
      add(p + f, p, f, s)
    }
    BEGIN { esc = sprintf("%c", 27); known = 0; ran = pas = fai = ski = 0 }
    {
      gsub(esc "\\[[0-9;]*[A-Za-z]", "")
      sub(/\r$/, "")
    }
    /^test result: (ok|FAILED)\. [0-9]+ passed; [0-9]+ failed; [0-9]+ ignored;/ {
      split($0, c, "; ")
      add(num(c[1]) + num(c[2]), num(c[1]), num(c[2]), num(c[3])); next
    }
    / in [0-9.]+s( \([0-9:]+\))?( =+)?$/ { pytest($0); next }
    /^No tests found, exiting with code 0$/ || /^No test files found, exiting with code 0$/ { add(0, 0, 0, 0); next }
    /^Tests: +[0-9]+ [a-z]+(, [0-9]+ [a-z]+)*$/ { jest($0); next }
    /^ *Tests +[0-9]+ [a-z]+( [|] [0-9]+ [a-z]+)* \([0-9]+\)$/ { vitest($0); next }
    /^ +[0-9]+ passing \([0-9.]+[a-z]+\)$/ { m_seen = 1; add(num($0), num($0), 0, 0); next }
    m_seen && /^ +[0-9]+ failing$/ { add(num($0), 0, num($0), 0); next }
    m_seen && /^ +[0-9]+ pending$/ { add(0, 0, 0, num($0)); next }
    /^# (tests|pass|fail|cancelled|skipped|todo) [0-9]+$/ { node[$2] += $3; node_seen = 1; next }
    index($0, info " ") == 1 && $2 ~ /^(tests|pass|fail|cancelled|skipped|todo)$/ && $3 ~ /^[0-9]+$/ && NF == 3 {
      node[$2] += $3; node_seen = 1; next
    }
    /^=== RUN / { go_v = 1; next }
    /^ *--- (PASS|FAIL|SKIP): / {
      w = $0; sub(/^ *--- /, "", w); w = substr(w, 1, 4)
      if (w == "PASS") { gv_p++ } else if (w == "FAIL") { gv_f++ } else { gv_s++ }
      next
    }
    /^ok  \t[^\t]+\t/ { if ($0 ~ /\[no tests to run\]/) { gp_none = 1 } else { gp_p++ }; go_p = 1; next }
    /^FAIL\t[^\t]+\t/ { gp_f++; go_p = 1; next }
    /^\?   \t[^\t]+\t\[no test files\]/ { gp_none = 1; go_p = 1; next }
    /^[0-9]+ passed, [0-9]+ failed$/ { add(num($1) + num($3), num($1), num($3), 0); next }
    END {
      if (node_seen) {
        add(node["tests"] - node["skipped"], node["pass"], node["fail"] + node["cancelled"], node["skipped"])
      }
      unit = "tests"
      if (go_v) { add(gv_p + gv_f, gv_p + 0, gv_f + 0, gv_s + 0) }
      else if (go_p || gp_none) { if (!known) unit = "packages"; add(gp_p + gp_f, gp_p + 0, gp_f + 0, 0) }
      if (known) printf "%d %d %d %d %s\n", ran, pas, fai, ski, unit
    }
  ' "$1" 2>/dev/null || true)
}

# counts_base_load HERE: COUNTS_BASE from the runner (ORBIT_BASE_COUNTS, the counts it holds)
# when it runs this script, else from HERE/iterations/baseline/counts.tsv when this script
# is run by hand from its loop directory.
counts_base_load() {
  COUNTS_BASE=
  if [[ ${ORBIT_VERIFY_FOR-} == "$1" && -n ${ORBIT_VERIFY_TMP-} ]]; then
    COUNTS_BASE=${ORBIT_BASE_COUNTS-}
  elif [[ -f $1/iterations/baseline/counts.tsv && ! -L $1/iterations/baseline/counts.tsv ]]; then
    COUNTS_BASE=$(head -c 65536 -- "$1/iterations/baseline/counts.tsv" 2>/dev/null || true)
  fi
  return 0
}

# counts_base_v NAME: REPLY is "RAN SKIPPED UNIT" of check NAME on the base tree, or empty.
counts_base_v() {
  local line
  local -a f
  REPLY=
  while IFS= read -r line; do
    IFS=$'\t' read -r -a f <<<"$line"
    # label, check, ran, passed, failed, skipped, unit, ...
    if [[ ${f[1]-} == "$1" && ${f[2]-} =~ ^[0-9]+$ && ${f[5]-} =~ ^[0-9]+$ && -n ${f[6]-} ]]; then
      REPLY="${f[2]} ${f[5]} ${f[6]}"
    fi
  done <<<"$COUNTS_BASE"
}

# counts_allowed NAME: loop.toml's allow-fewer-tests names check NAME.
counts_allowed() {
  [[ " ${ALLOW_FEWER_TESTS-} " == *" $1 "* ]]
}

# counts_judge NAME FILE PASSED: the counts of check NAME's output FILE, judged when it
# passed (PASSED 1): status 1 with COUNTS_WHY set when it ran no test, or fewer than on the
# base tree, or skipped more (and allow-fewer-tests does not name it); COUNTS_NOTE is the
# line that says an accepted drop. Either way the counts join COUNTS_SEEN.
counts_judge() {
  local name=$1 ran passed failed skipped unit verdict=held b_ran=- b_skip=- b_unit='' what
  COUNTS_WHY='' COUNTS_NOTE=''
  counts_parse_v "$2"
  [[ -n $REPLY ]] || return 0
  read -r ran passed failed skipped unit <<<"$REPLY"
  counts_base_v "$name"
  if [[ -n $REPLY ]]; then
    read -r b_ran b_skip b_unit <<<"$REPLY"
  fi
  what=$unit
  ((ran == 1)) && what=${unit%s}
  if (($3 != 1)); then
    verdict=failed
  elif ((ran == 0)); then
    verdict=zero
    COUNTS_WHY="no test ran: its output's summary counts 0 $unit"
  elif [[ $b_unit == "$unit" ]] && ((ran < b_ran)); then
    verdict=fewer
    COUNTS_WHY="$ran $what ran, $b_ran ran at the start"
  elif [[ $b_unit == "$unit" ]] && ((skipped > b_skip)); then
    verdict=fewer
    COUNTS_WHY="$skipped $unit skipped, $b_skip at the start"
  fi
  if [[ $verdict == fewer ]] && counts_allowed "$name"; then
    verdict=allowed
    COUNTS_NOTE="[ALLOWED] $name: $COUNTS_WHY (loop.toml allow-fewer-tests accepts the drop)"
    COUNTS_WHY=
  fi
  COUNTS_SEEN+="$name"$'\t'"$ran"$'\t'"$passed"$'\t'"$failed"$'\t'"$skipped"$'\t'"$unit"$'\t'"$verdict"$'\t'"$b_ran"$'\t'"$b_skip"$'\n'
  [[ $verdict != fewer && $verdict != zero ]]
}

# counts_print: what this run counted, one "[COUNTS]<TAB>..." line per counted check, for
# the runner that ran this script: printed after every check ran, just before the closing
# line, so that no check's output can come after them (a sandboxed check's scratch space
# is its own: the runner reads them from this script's output).
counts_print() {
  local line
  while IFS= read -r line; do
    if [[ -n $line ]]; then
      printf '[COUNTS]\t%s\n' "$line"
    fi
  done <<<"$COUNTS_SEEN"
}
