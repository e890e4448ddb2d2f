#!/usr/bin/env bash
# `pipeweave tune` on the GPT-3 6.7B shape (32 layers, hidden 4096, mp 2 x pp 4 = 8 ranks,
# h100, global batch 64): the module as built alone (--shapes off) and with the shapes
# tune builds it with (other vpp, placement and micro-batch size; --shapes on). Wall time
# and CPU time (user + system: what a busy machine does not inflate) of the whole
# command, median of REPEATS runs (3), the ratio on/off, and the best plan of the last
# run with shapes.
#   benchmarks/tune_67b.sh [PIPEWEAVE (build/tools/pipeweave)] [REPEATS]
set -euo pipefail
pw=${1:-build/tools/pipeweave}
repeats=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$pw" build-model gpt --layers 32 --hidden 4096 --heads 32 --ffn 16384 --seq 2048 \
  --vocab 51200 --micro-batch-size 1 --mp 2 --pp 4 -o "$work/gpt67b.pb" >/dev/null
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
declare -A wall cpu
for shapes in off on; do
  for ((i = 0; i < repeats; i++)); do
    /usr/bin/time -f "%e %U %S" -o "$work/time_${shapes}_$i" "$pw" tune "$work/gpt67b.pb" \
      --ranks 8 --device h100 --global-batch 64 --top 3 --shapes "$shapes" \
      >"$work/tune_$shapes.txt" 2>/dev/null
  done
  wall[$shapes]=$(for ((i = 0; i < repeats; i++)); do cut -d' ' -f1 "$work/time_${shapes}_$i"; done | median)
  cpu[$shapes]=$(for ((i = 0; i < repeats; i++)); do awk '{print $2 + $3}' "$work/time_${shapes}_$i"; done | median)
done
printf "%-8s %8s %8s\n" shapes wall_s cpu_s
for shapes in off on; do printf "%-8s %8.2f %8.2f\n" "$shapes" "${wall[$shapes]}" "${cpu[$shapes]}"; done
awk -v a="${cpu[on]}" -v b="${cpu[off]}" -v c="${wall[on]}" -v d="${wall[off]}" \
  'BEGIN { printf "on / off: wall %.2fx, cpu %.2fx\n", c / d, a / b }'
echo
cat "$work/tune_on.txt"
