#!/usr/bin/env bash
# The a100 spec's prices of the Zero Bubble paper's pipeline stages stay near the paper's own
# A100 profile, which the spec's wave overhead and bandwidth curve are fitted to
# (benchmarks/zb_stage_costs.sh): every F and W within 10 %; B, which Megatron's program
# makes about 1.1-1.2x F where the paper's profile has B about F (cost_model/device_spec.cc),
# within 25 %; every stage's F + B + W within 12 %. A change to the A100's kernel model
# that breaks the fit fails here.
#   zb_stage_costs_test.sh PIPEWEAVE
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
table=$(PW_TOOL=$1 "$root/benchmarks/zb_stage_costs.sh") || { echo "FAIL: zb_stage_costs.sh exited $?"; exit 1; }
echo "$table"
# Columns: model, F pw / paper err, B pw / paper err, W pw / paper err, sum err.
awk 'NR > 1 && $1 ~ /B$/ {
  rows++
  for (i = 5; i <= 13; i += 4) {
    limit = i == 9 ? 25 : 10  # B
    if ($i > limit || $i < -limit) { print "FAIL: " $1 " stage figure off by " $i " %"; bad = 1 }
  }
  if ($14 > 12 || $14 < -12) { print "FAIL: " $1 " F+B+W off by " $14 " %"; bad = 1 }
} END { if (rows != 4) { print "FAIL: expected 4 models, read " rows; bad = 1 } exit bad }' <<<"$table"
