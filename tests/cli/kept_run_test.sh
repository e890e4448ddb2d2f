#!/usr/bin/env bash
# benchmarks/kept_run.py: the run that stands for the quiet machine (the rule profile keeps
# its measuring runs by: the median of the runs within 1.10x of the fastest, of two the
# slower) and whether the fastest is confirmed (another run within 1.10x of it).
#   kept_run_test.sh
set -u
tool=$(dirname "$0")/../../benchmarks/kept_run.py
fail() { echo "FAIL: $*"; exit 1; }

# Two quiet runs: confirmed, the slower of the two kept (index 0 here).
out=$("$tool" "10.5 10.2") || fail "two runs 3 % apart not confirmed: $out"
[[ $out == "0 10.5" ]] || fail "kept '$out', want '0 10.5' (the slower of two near ones)"
# A run in a slow spell beside a quiet one: unconfirmed (exit 1), the quiet one kept.
out=$("$tool" "16.7 11.1") && fail "runs 1.5x apart were confirmed"
[[ $out == "1 11.1" ]] || fail "kept '$out', want '1 11.1'"
# A third run confirms it; the spell's run stays out of the median.
out=$("$tool" "16.7 11.1 11.4") || fail "a second near run did not confirm: $out"
[[ $out == "2 11.4" ]] || fail "kept '$out', want '2 11.4' (of 11.1 and 11.4, the slower)"
# Three near runs: their median, whatever their order.
out=$("$tool" "10.9 10.1 10.4 17.0") || fail "three near runs not confirmed: $out"
[[ $out == "2 10.4" ]] || fail "kept '$out', want '2 10.4'"
# One run: nothing to confirm against, kept.
out=$("$tool" "9.8") || fail "one run: non-zero exit"
[[ $out == "0 9.8" ]] || fail "kept '$out', want '0 9.8'"

# Bad input: a usage line or one message, non-zero exit.
msg=$("$tool" 2>&1) && fail "no runs were accepted"
[[ $msg == *'kept_run.py "S1 S2 ..."'* ]] || fail "usage: $msg"
msg=$("$tool" "1 x" 2>&1) && fail "a non-number was accepted"
[[ $msg == "kept_run.py: could not convert string to float: 'x'" ]] || fail "message: $msg"
msg=$("$tool" "" 2>&1) && fail "an empty list was accepted"
[[ $msg == *"a positive figure each"* ]] || fail "message: $msg"
msg=$("$tool" "10 0" 2>&1) && fail "a zero figure was accepted"
[[ $msg == *"a positive figure each"* ]] || fail "message: $msg"
echo "kept_run: ok"
