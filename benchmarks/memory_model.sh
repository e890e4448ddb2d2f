#!/usr/bin/env bash
# The simulator's memory model against the executor: each rank's predicted peak bytes
# (`pipeweave sim --format json`) beside the peak the executor's allocator tracked in a
# real run (`pipeweave run-parallel --report json`, rank processes over Gloo), for every
# schedule kind, with and without recomputation, f32 and bf16, on the medium GPT:
#   8 layers (16 with vpp 2), hidden 512, 8 heads, seq 256, vocab 1024, micro-batch 4,
#   mp 2 x pp 2 on 4 rank processes, 8 micro-batches, 2 steps.
# Prints one row per plan and rank and the largest error; exits non-zero when a rank is off
# by more than 5 %.
#
#   benchmarks/memory_model.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/memory_model}
mkdir -p "$out"
limit=5

model() {  # model VPP PLACEMENT FILE
  "$pw" build-model gpt --layers $((8 * $1)) --hidden 512 --heads 8 --seq 256 --vocab 1024 \
    --micro-batch-size 4 --mp 2 --pp 2 --vpp "$1" --placement "$2" -o "$3" >/dev/null
}
model 1 loop "$out/gpt.pb"
model 2 loop "$out/gpt_vpp2.pb"
model 2 v "$out/gpt_v.pb"

printf "%-44s %4s %12s %12s %8s\n" plan rank "predicted" "measured" "error"
worst=0
plan() {  # plan LABEL MODULE KIND SPLIT RECOMPUTE AMP
  local split="" rc="" amp=""
  [[ $4 == split ]] && split="{split-backward=true}"
  [[ $5 != none ]] && rc=",recompute{policy=$5}"
  [[ $6 == bf16 ]] && amp=",amp{dtype=bf16}"
  local pipeline="append-backward{optimizer=adam}$amp$rc,split-program$split,schedule{kind=$3,micro-batches=8},insert-p2p"
  "$pw" opt "$2" -p "$pipeline" -o "$out/plan.pb"
  local predicted measured
  predicted=$("$pw" sim "$out/plan.pb" --format json |
    python3 -c 'import json,sys; print(" ".join(str(r["peak_bytes"]) for r in json.load(sys.stdin)["ranks"]))')
  measured=$("$pw" run-parallel "$out/plan.pb" --nproc 4 --steps 2 --report json 2>/dev/null |
    sed -n 's/.*"peak_bytes": \[\([^]]*\)\].*/\1/p' | tr -d ',')
  read -r -a p <<<"$predicted"
  read -r -a m <<<"$measured"
  for r in "${!m[@]}"; do
    err=$(awk -v p="${p[$r]}" -v m="${m[$r]}" 'BEGIN {printf "%.2f", (p - m) / m * 100}')
    printf "%-44s %4d %9.2f MiB %9.2f MiB %+7.2f %%\n" "$1" "$r" \
      "$(awk -v b="${p[$r]}" 'BEGIN {print b / 1048576}')" "$(awk -v b="${m[$r]}" 'BEGIN {print b / 1048576}')" "$err"
    worst=$(awk -v a="$worst" -v e="$err" 'BEGIN {e = e < 0 ? -e : e; print (e > a ? e : a)}')
  done
}
for dtype in f32 bf16; do
  for rc in none selective full; do
    plan "fthenb $dtype $rc" "$out/gpt.pb" fthenb no $rc $dtype
    plan "1f1b $dtype $rc" "$out/gpt.pb" 1f1b no $rc $dtype
    plan "interleaved-1f1b $dtype $rc" "$out/gpt_vpp2.pb" interleaved-1f1b no $rc $dtype
    plan "zb-h1 $dtype $rc" "$out/gpt.pb" zb-h1 split $rc $dtype
    plan "zb-v $dtype $rc" "$out/gpt_v.pb" zb-v split $rc $dtype
  done
done
echo "largest error: $worst % (target: every rank within $limit %)"
awk -v w="$worst" -v l="$limit" 'BEGIN {exit !(w <= l)}'
