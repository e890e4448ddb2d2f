#!/usr/bin/env bash
# Timed tool runs for the foundation figures: a 175B-shaped GPT (96 layers, hidden 12288,
# 96 heads, ffn 49152, seq 2048, vocab 51200, mp 8, pp 16) built, then run through
# append-backward and written as .pb. Each must take under 1 s and 2 GB peak memory.
# Prints the median wall and CPU time and the peak RSS of REPEAT runs (default 5) of each
# command; on a busy machine the CPU time is the figure to trust.
#
#   benchmarks/foundation_figures.sh [REPEAT]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
repeat=${1:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# measure NAME CMD...: runs CMD $repeat times, prints median seconds and max RSS.
measure() {
  local name=$1
  shift
  local walls=() cpus=() rss=0
  for ((i = 0; i < repeat; i++)); do
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null
    read -r wall user sys mem <"$work/time"
    walls+=("$wall")
    cpus+=("$(echo "$user + $sys" | bc -l)")
    ((mem > rss)) && rss=$mem
  done
  printf '%-32s wall %6.3f s  cpu %6.3f s  peak RSS %6.1f MiB  (median of %d)\n' "$name" \
    "$(median "${walls[@]}")" "$(median "${cpus[@]}")" "$(echo "$rss / 1024" | bc -l)" "$repeat"
}

measure "build-model gpt 175B -> .pb" "$pw" build-model gpt --layers 96 --hidden 12288 \
  --heads 96 --ffn 49152 --seq 2048 --vocab 51200 --micro-batch-size 1 --mp 8 --pp 16 \
  -o "$work/gpt175b.pb"
measure "opt -p append-backward -> .pb" "$pw" opt "$work/gpt175b.pb" -p append-backward \
  -o "$work/gpt175b_train.pb"
printf '%-34s %s\n' "module sizes" "$(du -h "$work/gpt175b.pb" | cut -f1) forward, $(du -h "$work/gpt175b_train.pb" | cut -f1) with backward"
