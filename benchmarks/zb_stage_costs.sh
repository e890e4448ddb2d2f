#!/usr/bin/env bash
# The Zero Bubble paper's own A100 profile against pipeweave's prices: per pipeline stage,
# the forward (F), the input gradient (B) and the weight gradient (W) of the four GPTs of
# its Table 4, as the paper's Table 9 profiled them on its A100s
# (tests/planning/data/zero_bubble_table5.csv) and as `opt --device a100` prices the stages
# of the same model built as benchmarks/published_runs.sh builds qi24's rows (fp16,
# unfused attention, dropout 0.1, Megatron's fused bias epilogues, one layer fewer on the
# first and last stages). F too cheap
# against W makes zero-bubble schedules gain too much over 1F1B; their sum sets a row's
# level. The a100 spec's GEMM wave overhead and bandwidth curve are fitted to these 12
# figures (cost_model/device_spec.cc). Prints one row per model and exits 0 (a figure, not a
# target).
#
#   benchmarks/zb_stage_costs.sh        (~1 s)
# PW_TOOL: the pipeweave binary; PW_DEVICE: a device spec file priced in place of a100 (to
# try a refit: the built-in specs' fields are in proto/cost_model.proto).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
table=$root/tests/planning/data/zero_bubble_table5.csv
[[ -x "$pw" ]] || { echo "zb_stage_costs.sh: no pipeweave binary at $pw (set PW_TOOL)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# model: layers hidden heads micro-batch pp (qi24's rows of benchmarks/published_runs.csv)
declare -A shape=([1.5B]="22 2304 24 6 8" [6.2B]="30 4096 32 3 8" [14.6B]="46 5120 40 1 16"
                  [28.3B]="62 6144 48 1 32")
printf '%-6s %-22s %-22s %-22s %s\n' model "F ms pw / paper (%)" "B ms pw / paper (%)" \
  "W ms pw / paper (%)" "F+B+W (%)"
for model in 1.5B 6.2B 14.6B 28.3B; do
  read -r layers hidden heads mbs pp <<<"${shape[$model]}"
  # The paper's profile at its smallest micro-batch count (the three agree within 1-2 %).
  read -r m tf tb tw < <(awk -F, -v m="$model" '$1 == m {print $3, $4, $5, $6; exit}' "$table")
  per=$(((layers + 2) / pp))
  counts=$((per - 1))
  for ((s = 1; s < pp - 1; s++)); do counts+=",$per"; done
  counts+=",$((per - 1))"
  "$pw" build-model gpt --layers "$layers" --hidden "$hidden" --heads "$heads" \
    --ffn $((4 * hidden)) --seq 1024 --vocab 32000 --micro-batch-size "$mbs" --pp "$pp" \
    --attention unfused --dropout 0.1 --bias-fusion on --stage-layers "$counts" \
    -o "$work/m.pbtxt" >/dev/null
  "$pw" opt "$work/m.pbtxt" --device "${PW_DEVICE:-a100}" --stats -o "$work/p.pb" -p \
    "append-backward{optimizer=adam},amp{dtype=fp16},split-program{split-backward=true},schedule{kind=zb-auto,mem-limit=$((2 * pp)),micro-batches=$m}" \
    2>"$work/stats.txt" >/dev/null
  stat() { awk -v k="priced-$1-us" '$1 == k {print $2 / 1000}' "$work/stats.txt"; }
  awk -v model="$model" -v f="$(stat F)" -v b="$(stat B)" -v w="$(stat W)" \
    -v tf="$tf" -v tb="$tb" -v tw="$tw" 'BEGIN {
      printf "%-6s %6.2f / %6.2f %+6.1f   %6.2f / %6.2f %+6.1f   %6.2f / %6.2f %+6.1f   %+6.1f\n",
        model, f, tf, 100 * (f / tf - 1), b, tb, 100 * (b / tb - 1), w, tw, 100 * (w / tw - 1),
        100 * ((f + b + w) / (tf + tb + tw) - 1)
    }'
done
echo "(pw: the stage costs zb-auto plans with, the mean over stages of each kind's programs;"
echo " paper: Qi et al. 2024, Table 9, profiled on A100s)"
