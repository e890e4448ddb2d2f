#!/usr/bin/env bash
# The first training step against the later ones, with and without the warm-up step
# (`--warmup-steps`), side by side in one run (medians over rounds, each a fresh process):
#   - the medium GPT (8 layers, hidden 512, 8 heads, ffn 2048, seq 128, vocab 1024,
#     micro-batch size 4, adam), 4 micro-batches a step, on the reference runner;
#   - the same model at mp 2 x pp 2 (1f1b, 4 micro-batches) on 4 rank processes.
# Prints per case: the first step, the median of the later ones, their ratio (goal: within
# 1.2x with the warm-up) and what the warm-up took. PW_HUGE_PAGES=0 runs without
# transparent huge pages, to see what they change.
#
#   benchmarks/first_step.sh [ROUNDS (3)] [STEPS (4)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PW_BUILD_DIR:-$root/build}
pw=${PW_TOOL:-$build/tools/pipeweave}
rounds=${1:-3}
steps=${2:-4}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
step_times() { sed -E 's/.*"step_time_ms": \[([^]]*)\].*/\1/' | tr ',' '\n'; }
warmup_ms() { sed -E 's/.*"warmup_ms": ([0-9.]+).*/\1/'; }

model=(--layers 8 --hidden 512 --heads 8 --ffn 2048 --seq 128 --vocab 1024 --micro-batch-size 4)
"$pw" build-model gpt "${model[@]}" --mp 1 --pp 1 -o "$work/gpt.pb" > /dev/null
"$pw" opt "$work/gpt.pb" -p 'append-backward{optimizer=adam}' -o "$work/gpt_train.pb" > /dev/null
"$pw" build-model gpt "${model[@]}" --mp 2 --pp 2 -o "$work/gpt22.pb" > /dev/null
"$pw" opt "$work/gpt22.pb" -o "$work/gpt22_1f1b.pb" > /dev/null \
  -p 'append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p'

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
  "huge pages ${PW_HUGE_PAGES:-on}; $rounds rounds of $steps steps"
printf '%-34s %8s %10s %10s %7s %10s\n' case warm-up "first ms" "later ms" ratio "warm-up ms"
# case NAME WARMUP CMD...: one line of the table.
case_row() {
  local name=$1 warmup=$2
  shift 2
  local firsts=() laters=() ratios=() warmups=() json times later
  for ((r = 0; r < rounds; r++)); do
    json=$("$@" --steps "$steps" --warmup-steps "$warmup" --report json)
    mapfile -t times < <(step_times <<< "$json")
    later=$(median "${times[@]:1}")
    firsts+=("${times[0]}")
    laters+=("$later")
    ratios+=("$(awk -v a="${times[0]}" -v b="$later" 'BEGIN {printf "%.3f", a / b}')")
    warmups+=("$(warmup_ms <<< "$json")")
  done
  printf '%-34s %8s %10.1f %10.1f %6.2fx %10.1f\n' "$name" "$warmup" "$(median "${firsts[@]}")" \
    "$(median "${laters[@]}")" "$(median "${ratios[@]}")" "$(median "${warmups[@]}")"
}
for warmup in 0 1; do
  case_row "reference, 2 threads" "$warmup" \
    "$pw" run "$work/gpt_train.pb" --reference --micro-batches 4 --threads 2
  case_row "mp2 x pp2 1f1b, 4 processes" "$warmup" "$pw" run "$work/gpt22_1f1b.pb" --nproc 4
done
