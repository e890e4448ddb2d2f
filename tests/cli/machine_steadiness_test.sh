#!/usr/bin/env bash
# benchmarks/machine_steadiness.py: the small GPT's step timed quarter-second by
# quarter-second through the given pipeweave (Python work, with a note, without one), and
# one line for each bad argument.
#   machine_steadiness_test.sh PIPEWEAVE
set -u
tool=$(dirname "$0")/../../benchmarks/machine_steadiness.py
pw=$1
fail() { echo "FAIL: $*"; exit 1; }
ratio_ok() { python3 -c "import sys; sys.exit(not 1.0 <= float('$1') < 100)"; }

out=$("$tool" 2 --tool "$pw") || fail "probe through $pw failed: $out"
re="^machine steadiness: the small GPT's step on one thread ([0-9.]+)-([0-9.]+) ms, quarter-second by quarter-second over [0-9.]+ s: the slowest ([0-9.]+)x the fastest$"
[[ $out =~ $re ]] || fail "line: $out"
ratio_ok "${BASH_REMATCH[3]}" || fail "ratio ${BASH_REMATCH[3]}"
python3 -c "import sys; sys.exit(not 0 < ${BASH_REMATCH[1]} <= ${BASH_REMATCH[2]})" ||
  fail "fastest ${BASH_REMATCH[1]} above slowest ${BASH_REMATCH[2]}"

# No binary: Python work, and the line says what it misses.
out=$(PW_TOOL=/nonexistent "$tool" 1) || fail "Python probe failed: $out"
[[ $out == "machine steadiness: single-threaded Python work "*"(no pipeweave binary: Python work misses spells that slow the executor's step; give --tool)" ]] ||
  fail "fallback line: $out"

# Bad arguments: one line, non-zero exit.
expect() {
  local want=$1
  shift
  msg=$("$tool" "$@" 2>&1) && fail "accepted: $*"
  [[ $msg == "$want" ]] || fail "for '$*': $msg"
}
expect "machine_steadiness.py: no pipeweave binary at /nonexistent" 1 --tool /nonexistent
expect "machine_steadiness.py: --tool needs the pipeweave binary" 1 --tool
expect "machine_steadiness.py: SECONDS must be a number, got 'x'" x
expect "machine_steadiness.py: SECONDS must be between 1 and 600, got 0.5" 0.5
expect "machine_steadiness.py: unexpected argument '3' (usage: machine_steadiness.py [SECONDS] [--tool PIPEWEAVE])" 2 3
echo "machine_steadiness: ok"
