#!/usr/bin/env bash
# The acceptance tests of calc.sh. Usage: bash tests/test_calc.sh add|mul
set -u
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=/dev/null
source ./calc.sh
failed=0
expect() {
  local line=$1 fn=$2 a=$3 b=$4 want=$5 got
  got=$("$fn" "$a" "$b")
  if [[ $got == "$want" ]]; then
    echo "ok   $fn $a $b = $want"
  else
    echo "tests/test_calc.sh:$line: $fn $a $b: expected $want, got $got"
    failed=1
  fi
}
case ${1:-} in
  add)
    expect $LINENO add 2 3 5
    expect $LINENO add -4 4 0
    ;;
  mul)
    expect $LINENO mul 6 7 42
    expect $LINENO mul 0 9 0
    ;;
  *)
    echo "usage: bash tests/test_calc.sh add|mul" >&2
    exit 2
    ;;
esac
exit "$failed"
