#!/usr/bin/env bash
# `pipeweave sim` on the GPT-3 175B shape (96 layers, hidden 12288, mp 8, pp 16, 1f1b) at
# 16, 32, 64 and 128 micro-batches: wall time, CPU time (user + system: what a busy
# machine does not inflate) and peak resident memory of the whole command (loading the
# planned module, lowering, simulating, reporting), median of REPEATS runs (3). Targets: 64 micro-batches (about 2 million instructions) in under 5 s
# and 1 GB.
#   benchmarks/sim_175b.sh [PIPEWEAVE (build/tools/pipeweave)] [REPEATS]
set -euo pipefail
pw=${1:-build/tools/pipeweave}
repeats=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$pw" build-model gpt --layers 96 --hidden 12288 --heads 96 --ffn 49152 --seq 2048 \
  --vocab 51200 --micro-batch-size 1 --mp 8 --pp 16 -o "$work/gpt175b.pb" >/dev/null
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf "%-14s %12s %8s %8s %14s\n" micro-batches step_time_s wall_s cpu_s peak_rss_MiB
for m in 16 32 64 128; do
  "$pw" opt "$work/gpt175b.pb" -o "$work/plan$m.pb" \
    -p "append-backward,split-program,schedule{kind=1f1b,micro-batches=$m},insert-p2p"
  for ((i = 0; i < repeats; i++)); do
    /usr/bin/time -f "%e %M %U %S" -o "$work/time$i" "$pw" sim "$work/plan$m.pb" --device h100 \
      --format json >"$work/sim.json"
  done
  step=$(grep -o '"step_time_ms": [0-9.e+-]*' "$work/sim.json" | head -1 | awk '{print $2 / 1e3}')
  wall=$(for ((i = 0; i < repeats; i++)); do cut -d' ' -f1 "$work/time$i"; done | median)
  rss=$(for ((i = 0; i < repeats; i++)); do cut -d' ' -f2 "$work/time$i"; done | median)
  cpu=$(for ((i = 0; i < repeats; i++)); do awk '{print $3 + $4}' "$work/time$i"; done | median)
  printf "%-14s %12.3f %8.2f %8.2f %14.0f\n" "$m" "$step" "$wall" "$cpu" "$((rss / 1024))"
done
