#!/usr/bin/env bash
# benchmarks/median_error.py: the error of the medians, its bootstrap interval, and the
# verdict that stops cost_model_accuracy.sh's rounds (settled inside or outside the target,
# not while the interval straddles a bound).
#   median_error_test.sh
set -u
tool=$(dirname "$0")/../../benchmarks/median_error.py
fail() { echo "FAIL: $*"; exit 1; }

# Steady rounds: the medians' error, an interval around it, settled inside 10 %.
out=$("$tool" "10.2 10.3 10.1" "10.0 10.1 9.9" 10) || fail "steady rounds not settled: $out"
read -r err lo hi <<<"$out"
[[ $err == 2.00 ]] || fail "error $err, want 2.00 (10.2 against 10.0)"
python3 -c "import sys; lo, hi = $lo, $hi; sys.exit(not (-1 < lo <= 2 <= hi < 5))" ||
  fail "interval [$lo, $hi] does not hold the error closely"
# The same rounds give the same interval (seeded).
[[ $("$tool" "10.2 10.3 10.1" "10.0 10.1 9.9" 10) == "$out" ]] || fail "interval not repeatable"
# Even counts: the mean of the middle two, as the benchmark's table takes it.
[[ $("$tool" "10 12" "10 10" | cut -d' ' -f1) == 10.00 ]] || fail "even count's median"

# Clearly off: settled outside (exit 0); rounds that move by a third: straddling (exit 1).
"$tool" "13.0 13.1 12.9" "10.0 10.1 9.9" 10 >/dev/null || fail "a 30 % error was not settled"
"$tool" "10 13 9 12 10" "10 9 12 13 10" 10 >/dev/null && fail "noisy rounds were settled"
# Without a target the status is 0 whatever the interval.
"$tool" "10 13 9 12 10" "10 9 12 13 10" >/dev/null || fail "no target: non-zero exit"

# Bad input: a usage line or one message, non-zero exit.
msg=$("$tool" "1 2" 2>&1) && fail "one list was accepted"
[[ $msg == *"median_error.py \"P1 P2 ...\""* ]] || fail "usage: $msg"
msg=$("$tool" "1 x" "1 2" 2>&1) && fail "a non-number was accepted"
[[ $msg == "median_error.py: could not convert string to float: 'x'" ]] || fail "message: $msg"
msg=$("$tool" "" "1 2" 2>&1) && fail "an empty list was accepted"
[[ $msg == *"a figure each"* ]] || fail "message: $msg"
echo "median_error: ok"
