#!/usr/bin/env bash
# The figures of mixed precision, vocabulary parallelism and stage balancing:
#   1. simulated (build/benchmarks/amp_figures): the GPT-3 6.7B shape, mp 2 x pp 4, 1f1b,
#      16 micro-batches on the H100: the step and bubble before and after each change
#      (f32 -> bf16 -> vocabulary-parallel -> balance-stages -> the stream passes with
#      overlap-1f1b), one layer's matmul time against the 989 TFLOP/s bf16 peak (the
#      roofline's, at the spec's assumed efficiency, and the time measured on an H100);
#   2. measured on this machine's CPU: the small GPT (4 layers, hidden 64, 4 heads, seq 16,
#      vocab 128, micro-batch 2; Adam, lr 0.003) trained STEPS steps in f32 and in bf16, by
#      the reference runner (one rank, 8 micro-batches) and as mp 2 x pp 2 on 4 rank
#      processes (1f1b, 8 micro-batches): the losses per step and the gap at the end;
#   3. fp16 with a loss scale of 1e6 (far too large for this model): the steps that
#      overflow are skipped and the scale halved, then training goes on;
#   4. the medium GPT (8 layers, hidden 512, 8 heads, ffn 2048, seq 128, vocab 1024,
#      micro-batch 4; 4 micro-batches a step) on the reference runner: the median CPU step
#      time in f32 and in bf16 (bf16 kernels widen to f32 on the CPU, so it is slower here;
#      the point of bf16 is the GPU).
#
#   benchmarks/amp_figures.sh [STEPS (40)] [MEDIUM_STEPS (4)]
#
#   PW_TOOL, PW_FIGURES  the pipeweave binary and amp_figures (build/...), PW_OUT the output
#                        folder (out/amp_figures)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
figures=${PW_FIGURES:-$root/build/benchmarks/amp_figures}
out=${PW_OUT:-$root/out/amp_figures}
steps=${1:-40}
medium_steps=${2:-4}
mkdir -p "$out"

# losses FILE: the "losses" array of a JSON report, one per line.
losses() { sed -n 's/.*"losses": \[\([^]]*\)\].*/\1/p' "$1" | tr ',' '\n' | tr -d ' '; }
# times FILE: the "step_time_ms" array, one per line.
times() { sed -n 's/.*"step_time_ms": \[\([^]]*\)\].*/\1/p' "$1" | tr ',' '\n' | tr -d ' '; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "== 1. simulated"
"$figures"
echo

echo "== 2. small GPT, $steps steps, f32 vs bf16 (losses)"
small="--layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 --micro-batch-size 2"
"$pw" build-model gpt $small -o "$out/small.pb" >/dev/null
"$pw" build-model gpt $small --mp 2 --pp 2 -o "$out/small_mp2pp2.pb" >/dev/null
train="append-backward{optimizer=adam,lr=0.003}"
plan="split-program,schedule{kind=1f1b,micro-batches=8},insert-p2p"
for dtype in f32 bf16; do
  pipeline=$train
  [[ $dtype == bf16 ]] && pipeline="$train,amp{dtype=bf16}"
  "$pw" opt "$out/small.pb" -p "$pipeline" -o "$out/small_$dtype.pb"
  "$pw" run "$out/small_$dtype.pb" --reference --steps "$steps" --micro-batches 8 --seed 1 \
    --report json >"$out/ref_$dtype.json"
  "$pw" run-parallel "$out/small_mp2pp2.pb" --nproc 4 --steps "$steps" --seed 1 --report json \
    --pipeline "$pipeline,$plan" >"$out/par_$dtype.json"
done
paste <(seq 1 "$steps") <(losses "$out/ref_f32.json") <(losses "$out/ref_bf16.json") \
  <(losses "$out/par_f32.json") <(losses "$out/par_bf16.json") |
  awk 'BEGIN {printf "%5s %12s %12s %14s %14s\n", "step", "ref f32", "ref bf16", "mp2pp2 f32", "mp2pp2 bf16"}
       {printf "%5d %12.6f %12.6f %14.6f %14.6f\n", $1, $2, $3, $4, $5; r = $3 - $2; p = $5 - $4}
       END {printf "gap after %d steps (bf16 - f32): reference %+.6f (%+.3f %%), mp 2 x pp 2 %+.6f (%+.3f %%)\n",
            NR, r, 100 * r / ($3 - r), p, 100 * p / ($5 - p)}'
echo

echo "== 3. fp16, loss scale 1e6: skipped steps"
"$pw" opt "$out/small.pb" -p "$train,amp{dtype=fp16,init-scale=1e6}" -o "$out/small_fp16.pb"
"$pw" run "$out/small_fp16.pb" --reference --steps 12 --micro-batches 8 --seed 1 \
  --track amp.loss_scale,amp.skipped_steps
echo

echo "== 4. medium GPT on the CPU (reference runner, 4 micro-batches a step): step time"
"$pw" build-model gpt --layers 8 --hidden 512 --heads 8 --ffn 2048 --seq 128 --vocab 1024 \
  --micro-batch-size 4 -o "$out/medium.pb" >/dev/null
for dtype in f32 bf16; do
  pipeline="append-backward{optimizer=adam}"
  [[ $dtype == bf16 ]] && pipeline="$pipeline,amp{dtype=bf16}"
  "$pw" opt "$out/medium.pb" -p "$pipeline" -o "$out/medium_$dtype.pb"
  "$pw" run "$out/medium_$dtype.pb" --reference --steps "$medium_steps" --micro-batches 4 \
    --report json >"$out/medium_$dtype.json"
  # The first step warms the allocator and caches: the median of the others.
  printf '%-5s median step %9.1f ms (of %d steps after the first)\n' "$dtype" \
    "$(times "$out/medium_$dtype.json" | tail -n +2 | median)" "$((medium_steps - 1))"
done
