#!/usr/bin/env bash
# benchmarks/one_machine.py: whether a simulated step and a measured one saw the machine at
# one speed (within 10 % of each other), from two figures or plan A of an ab report.
#   one_machine_test.sh
set -u
tool=$(dirname "$0")/../../benchmarks/one_machine.py
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

out=$("$tool" 10.5 10.0) || fail "5 % apart: not one machine: $out"
[[ $out == "simulated 10.50 ms, measured 10.00 ms (1.050)" ]] || fail "line: $out"
out=$("$tool" 10.9 10.0) || fail "9 % apart: not one machine: $out"
"$tool" 11.2 10.0 >/dev/null; [[ $? == 1 ]] || fail "12 % slow simulated: exit not 1"
"$tool" 10.0 11.5 >/dev/null; [[ $? == 1 ]] || fail "13 % fast simulated: exit not 1"

echo '{"sim": {"a": {"step_time_ms": 10.98}}, "run": {"a": {"median_step_ms": 10.67}}}' \
  >"$dir/ab.json"
out=$("$tool" --ab "$dir/ab.json") || fail "an ab report 3 % apart: $out"
[[ $out == "simulated 10.98 ms, measured 10.67 ms (1.029)" ]] || fail "line: $out"

# Bad input: one line on stderr, exit 2.
msg=$("$tool" 2>&1); [[ $? == 2 && $msg == *usage:* ]] || fail "no arguments: $msg"
msg=$("$tool" 10 x 2>&1); [[ $? == 2 && $msg == *"could not convert"* ]] || fail "non-number: $msg"
msg=$("$tool" 10 0 2>&1); [[ $? == 2 && $msg == *"positive figure"* ]] || fail "zero: $msg"
echo '{"sim": {}}' >"$dir/bad.json"
msg=$("$tool" --ab "$dir/bad.json" 2>&1)
[[ $? == 2 && $msg == *"not an \`ab --sim --run\` report"* ]] || fail "no plan A: $msg"
msg=$("$tool" --ab "$dir/missing.json" 2>&1)
[[ $? == 2 && $(wc -l <<<"$msg") == 1 ]] || fail "missing file: $msg"
echo "one_machine: ok"
