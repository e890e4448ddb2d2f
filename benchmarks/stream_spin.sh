#!/usr/bin/env bash
# How the CPU executor's stream threads wait, measured: each plan runs on its rank
# processes with PW_STREAM_SPIN=short (spin 20 us, then block: the executor before the
# adaptive spin) and adaptive (spin 200 us where a stream's recent waits ended within it),
# the two interleaved round by round so that the machine's slower and faster spells meet
# both. Prints per plan the median over rounds of each run's median step (steps after the
# first) and adaptive / short.
#
#   benchmarks/stream_spin.sh [ROUNDS (5)]
#
# Plans: the executor issue's small GPT (4 layers, hidden 64; 24 steps a run) and large one
# (8 layers, hidden 512; 8 steps) at mp 2 x pp 2 on 4 processes: 1f1b, zb-h1, 1f1b with the
# stream and column-parallel overlap passes; and the small one with overlap-1f1b too (the
# demo's B). PW_TOOL names the pipeweave binary. About 4 minutes with 5 rounds on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
rounds=${1:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common="--seq 16 --vocab 128 --micro-batch-size 2 --seed 1 --mp 2 --pp 2"
declare -A shape=([small]="--layers 4 --hidden 64 --ffn 256 --heads 4"
  [large]="--layers 8 --hidden 512 --ffn 2048 --heads 8")
declare -A steps=([small]=24 [large]=8)
train="append-backward{optimizer=adam,lr=0.01}"
f1b="split-program,schedule{kind=1f1b,micro-batches=8},insert-p2p"
declare -A passes=(
  [1f1b]="$train,$f1b"
  [zb-h1]="$train,split-program{split-backward=true},schedule{kind=zb-h1,micro-batches=8},insert-p2p"
  [overlap]="$train,$f1b,assign-streams,overlap-column-parallel-backward,insert-events"
  [overlap-1f1b]="$train,$f1b,assign-streams,overlap-column-parallel-backward,overlap-1f1b,insert-events"
)
plans=()
for model in small large; do
  # shellcheck disable=SC2086
  "$pw" build-model gpt ${shape[$model]} $common -o "$work/$model.pbtxt" >/dev/null
  for kind in 1f1b zb-h1 overlap overlap-1f1b; do
    [[ $model == large && $kind == overlap-1f1b ]] && continue
    "$pw" opt "$work/$model.pbtxt" -p "${passes[$kind]}" --device cpu -o "$work/${model}_$kind.pb" \
      >/dev/null
    plans+=("${model}_$kind")
  done
done

# The median of a run's step times after the first, from its --report json line.
run_ms() {
  PW_STREAM_SPIN=$1 "$pw" run "$work/$2.pb" --nproc 4 --steps "$3" --report json 2>/dev/null |
    sed -n 's/.*"step_time_ms": \[\([^]]*\)\].*/\1/p' | tr ',' '\n' | tail -n +2 | sort -g |
    awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}
declare -A ms
for ((r = 1; r <= rounds; r++)); do
  for plan in "${plans[@]}"; do
    for spin in short adaptive; do
      ms[$plan,$spin]+=" $(run_ms "$spin" "$plan" "${steps[${plan%%_*}]}")"
    done
  done
  echo "round $r of $rounds done" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf '%-20s %12s %12s %9s   %s\n' plan "short ms" "adaptive ms" ratio "rounds (short | adaptive)"
for plan in "${plans[@]}"; do
  # shellcheck disable=SC2086
  s=$(median ${ms[$plan,short]}) a=$(median ${ms[$plan,adaptive]})
  awk -v p="$plan" -v s="$s" -v a="$a" -v rs="${ms[$plan,short]}" -v ra="${ms[$plan,adaptive]}" \
    'BEGIN {printf "%-20s %12.2f %12.2f %9.3f  %s |%s\n", p, s, a, a / s, rs, ra}'
done
