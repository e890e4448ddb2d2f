#!/usr/bin/env bash
# Megatron's fused bias epilogues (build-model gpt --bias-fusion on: bias_gelu,
# bias_dropout_add) against the unfused ops (bias_add, gelu, dropout, add), measured on the CPU
# executor: a GPT with dropout 0.1 and unfused attention (4 layers, hidden 512, 8 heads, seq
# 128, micro-batch 4, 4 micro-batches a step) on 1 process and at mp 2 on 2 processes, the
# two builds interleaved round by round. Both train the same losses bit for bit
# (tests/executor_mt/dropout_equivalence_test.cc); the script checks that too. Prints per
# plan the median over rounds of each run's median step (steps after the first) and
# fused / unfused.
#
#   benchmarks/bias_fusion.sh [ROUNDS (5)]
#
# PW_TOOL names the pipeweave binary. About 90 s with 5 rounds on 2 cores. Measured here
# (AMD EPYC VM, 2 cores): 1proc 556.7 -> 540.7 ms (0.971), mp2 536.0 -> 537.1 (1.002): on a
# CPU the GEMMs dominate; the fused epilogues save passes over memory that a GPU's
# bandwidth-bound kernels pay for.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
rounds=${1:-5}
[[ -x "$pw" ]] || { echo "bias_fusion.sh: no pipeweave binary at $pw (set PW_TOOL)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

shape="--layers 4 --hidden 512 --heads 8 --seq 128 --vocab 512 --micro-batch-size 4 --seed 1
  --attention unfused --dropout 0.1"
train="append-backward{optimizer=adam,lr=0.01}"
declare -A nproc=([1proc]=1 [mp2]=2)
for plan in 1proc mp2; do
  mp=${nproc[$plan]}
  for fusion in off on; do
    # shellcheck disable=SC2086
    "$pw" build-model gpt $shape --mp "$mp" --bias-fusion "$fusion" -o "$work/m.pbtxt" >/dev/null
    "$pw" opt "$work/m.pbtxt" -p "$train,split-program,schedule{kind=1f1b,micro-batches=4}" \
      -o "$work/${plan}_$fusion.pb" >/dev/null
  done
done

# The median of a run's step times after the first; its losses go to $work/RUN.losses.
run_ms() {
  local report
  report=$("$pw" run "$work/$1.pb" --nproc "${nproc[${1%%_*}]}" --steps 6 --micro-batches 4 \
    --report json 2>/dev/null)
  sed -n 's/.*"losses": \[\([^]]*\)\].*/\1/p' <<<"$report" >"$work/$1.losses"
  sed -n 's/.*"step_time_ms": \[\([^]]*\)\].*/\1/p' <<<"$report" | tr ',' '\n' | tail -n +2 |
    sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}
declare -A ms
for ((r = 1; r <= rounds; r++)); do
  for plan in 1proc mp2; do
    for fusion in off on; do ms[$plan,$fusion]+=" $(run_ms "${plan}_$fusion")"; done
    [[ -s "$work/${plan}_off.losses" ]] || { echo "bias_fusion.sh: $plan: no losses" >&2; exit 1; }
    cmp -s "$work/${plan}_off.losses" "$work/${plan}_on.losses" ||
      { echo "bias_fusion.sh: $plan: the fused build's losses differ" >&2; exit 1; }
  done
  echo "round $r of $rounds done" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf '%-8s %12s %12s %9s   %s\n' plan "unfused ms" "fused ms" ratio "rounds (unfused | fused)"
for plan in 1proc mp2; do
  # shellcheck disable=SC2086
  off=$(median ${ms[$plan,off]}) on=$(median ${ms[$plan,on]})
  awk -v p="$plan" -v a="$off" -v b="$on" -v ra="${ms[$plan,off]}" -v rb="${ms[$plan,on]}" \
    'BEGIN {printf "%-8s %12.2f %12.2f %9.3f  %s |%s\n", p, a, b, b / a, ra, rb}'
done
