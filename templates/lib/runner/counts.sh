# ---- test counts (contract section 6: a check means at the end what it meant at the
# ---- start). verify.sh counts what each check's own output says ran (lib/counts.sh) and
# ---- fails a pass that ran no test, or fewer than on the base tree; the runner holds the
# ---- base tree's counts (taken at the red gate, kept in iterations/baseline/counts.tsv and
# ---- sealed by the journal's test_counts_base event), gives them to every verify run,
# ---- keeps each run's counts in its record (iterations/N/counts.tsv) and journals each
# ---- drop.
# Lines of a record: run label, check, ran, passed, failed, skipped, unit, verdict, and
# the base tree's ran and skipped ("-" when it counted none).
BASE_COUNTS=
LAST_COUNTS=
COUNTS_RE=$'^[A-Za-z0-9._-]+\t[0-9]+\t[0-9]+\t[0-9]+\t[0-9]+\t(tests|packages)\t(held|zero|fewer|allowed|failed)\t([0-9]+|-)\t([0-9]+|-)$'

# counts_reset: a verify run starts: nothing counted yet (one that does not run counts
# nothing).
counts_reset() {
  LAST_COUNTS=
}

# counts_take DIR LABEL: the counts verify.sh printed, read from the end of its output in
# LAST_VERIFY_OUT (the "[COUNTS]" lines just before its closing line, after every check's
# output: a line a check printed is never taken; each line checked), under LABEL, into
# LAST_COUNTS and appended to DIR/counts.tsv; a pass that ran none or fewer, and a drop
# loop.toml accepts, journalled as test_count_drop.
counts_take() {
  local dir=$1 label=$2 line text=''
  local -a f
  LAST_COUNTS=
  # shellcheck disable=SC2016  # awk code, not shell
  while IFS= read -r line; do
    [[ $line =~ $COUNTS_RE ]] || continue
    text+="$label"$'\t'"$line"$'\n'
    IFS=$'\t' read -r -a f <<<"$line"
    case ${f[6]} in
      zero | fewer | allowed)
        state_event test_count_drop "$CUR_ITER" check "${f[0]}" run "$label" verdict "${f[6]}" \
          ran "${f[1]}" base_ran "${f[7]}" skipped "${f[4]}" base_skipped "${f[8]}" unit "${f[5]}" \
          allowed "$([[ ${f[6]} == allowed ]] && echo true || echo false)"
        ;;
    esac
  done < <(LC_ALL=C awk '
    { l[NR % 1024] = $0 }
    END {
      if (NR == 0 || l[NR % 1024] !~ /^[0-9]+ passed, [0-9]+ failed$/) exit
      i = NR - 1
      while (i > 0 && i > NR - 1024 && substr(l[i % 1024], 1, 9) == "[COUNTS]\t") i--
      for (j = i + 1; j < NR; j++) print substr(l[j % 1024], 10)
    }' "$LAST_VERIFY_OUT" 2>/dev/null)
  LAST_COUNTS=$text
  if [[ -n $text ]] && orbit_appendable "$dir/counts.tsv"; then
    printf '%s' "$text" >>"$dir/counts.tsv" || state_records_fail "$dir/counts.tsv"
  fi
}

# counts_base_take: the red gate's counts are the base tree's: held from now on, and sealed
# by a test_counts_base event (the record's sha256 and the counts themselves). Without a
# check whose output has a known summary there is neither record nor event (unless an
# earlier red gate of this loop, cut short, recorded some: then the event says none).
counts_base_take() {
  local file="$LOOP_DIR/iterations/baseline/counts.tsv" sum=absent line text=''
  local -a f
  BASE_COUNTS=$LAST_COUNTS
  if [[ -z $BASE_COUNTS ]] && ! grep -qaF '"event":"test_counts_base"' -- "$EV_FILE" 2>/dev/null; then
    return 0
  fi
  if orbit_regular "$file"; then
    orbit_sha256_file_v "$file"
    sum=$REPLY
  fi
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    IFS=$'\t' read -r -a f <<<"$line"
    text+="${text:+ }${f[1]}=${f[2]}/${f[5]}"
  done <<<"$BASE_COUNTS"
  state_event test_counts_base 0 sha256 "$sum" counts "$text"
}

# counts_load: the base tree's counts of a loop whose red gate ran in an earlier run: the
# record, when it is what the journal's test_counts_base sealed. A record changed, removed
# or added since is a loop_tamper: the loop stops (ABORTED) rather than judge by it.
counts_load() {
  local file="$LOOP_DIR/iterations/baseline/counts.tsv" line want have=absent
  BASE_COUNTS=
  line=$(grep -aF '"event":"test_counts_base"' -- "$EV_FILE" 2>/dev/null | tail -n 1 || true)
  resume_event_field_v "$line" sha256
  want=${REPLY:-absent}
  if [[ -e $file || -L $file ]]; then
    have=unreadable
    if orbit_regular "$file"; then
      orbit_sha256_file_v "$file"
      have=$REPLY
    fi
  fi
  if [[ $have != "$want" ]]; then
    state_event integrity_fail "$CUR_ITER" when start code "$REASON_LOOP_TAMPER" file "$file" expected "$want" actual "$have"
    resume_finish "$EXIT_INTEGRITY" "$STATUS_ABORTED" "$REASON_LOOP_TAMPER" "loop_tamper: $file is not the base tree's test counts the runner recorded (expected $want, found $have); restore it (the journal's test_counts_base event holds its counts), then run again"
  fi
  if [[ $have != absent ]]; then
    BASE_COUNTS=$(head -c 65536 -- "$file")
  fi
}

# counts_feedback_v: REPLY is one line per check of the last verify run that passed with no
# test run or fewer than on the base tree, saying what dropped (for feedback.txt).
counts_feedback_v() {
  local line
  local -a f
  REPLY=
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    IFS=$'\t' read -r -a f <<<"$line"
    # label, check, ran, passed, failed, skipped, unit, verdict, base ran, base skipped
    case ${f[7]} in
      zero) REPLY+="${f[1]} exits 0 but ran no test: a check that tests nothing proves nothing"$'\n' ;;
      fewer)
        if ((f[2] < f[8])); then
          REPLY+="${f[1]} exits 0 with fewer ${f[6]}: ${f[2]} ran, ${f[8]} ran at the start (a check must mean at the end what it meant at the start)"$'\n'
        else
          REPLY+="${f[1]} exits 0 with more ${f[6]} skipped: ${f[5]} skipped, ${f[9]} at the start"$'\n'
        fi
        ;;
    esac
  done <<<"$LAST_COUNTS"
}
