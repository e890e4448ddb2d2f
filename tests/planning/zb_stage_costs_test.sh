#!/usr/bin/env bash
# The a100 spec's prices of the Zero Bubble paper's pipeline stages stay near the paper's own
# A100 profile, which the spec's wave overhead and bandwidth curve are fitted to
# (benchmarks/zb_stage_costs.sh): every F, B and W within 10 %, every stage's F + B + W
# within 5 %. A change to the A100's kernel model that breaks the fit fails here.
#   zb_stage_costs_test.sh PIPEWEAVE
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
table=$(PW_TOOL=$1 "$root/benchmarks/zb_stage_costs.sh") || { echo "FAIL: zb_stage_costs.sh exited $?"; exit 1; }
echo "$table"
# Columns: model, F pw / paper err, B pw / paper err, W pw / paper err, sum err.
awk 'NR > 1 && $1 ~ /B$/ {
  rows++
  for (i = 5; i <= 13; i += 4) if ($i > 10 || $i < -10) { print "FAIL: " $1 " stage figure off by " $i " %"; bad = 1 }
  if ($14 > 5 || $14 < -5) { print "FAIL: " $1 " F+B+W off by " $14 " %"; bad = 1 }
} END { if (rows != 4) { print "FAIL: expected 4 models, read " rows; bad = 1 } exit bad }' <<<"$table"
