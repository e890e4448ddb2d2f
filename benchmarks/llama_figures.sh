#!/usr/bin/env bash
# The Llama figures:
#   1. simulated on H100s in bf16 (`pipeweave ab --sim --device h100`): Llama 3 8B (32 layers,
#      hidden 4096, 32 heads, 8 kv heads, ffn 14336, vocab 128256, seq 8192) at mp 2 x pp 4 and
#      Llama 3 70B (80 layers, hidden 8192, 64 heads, 8 kv heads, ffn 28672) at mp 8 x pp 4,
#      1f1b with MICRO_BATCHES micro-batches of one sequence, stages balanced by the cost model;
#      A the plain plan, B with the stream and overlap passes. For each: the step time, the MFU,
#      the exposed tensor-parallel communication (mp_forward + mp_backward, worst rank), the
#      largest peak memory per rank and whether every rank fits, and the linears
#      overlap-column-parallel-backward rewrote. The 8B recomputes the attention core
#      (selective: its [S, S] probabilities would not fit at seq 8192), the 70B whole layers
#      (without sequence parallelism its activations need that at mp 8).
#      MFU = model FLOPs / (step time x ranks x 989.4 TFLOP/s, the h100 spec's bf16 peak), the
#      model FLOPs per token 6 N + 12 L H S (PaLM's: N the matmul parameters, LM head included,
#      the input embedding not; attention over the whole S x S, as the fused kernel computes it).
#   2. measured on this machine's CPU: the small Llama (4 layers, hidden 64, 4 heads on 2 kv
#      heads, ffn 176, seq 16, vocab 128, micro-batch 2) beside the small GPT (the same with
#      LayerNorm, GELU ffn 256, learned positions), STEPS steps of Adam on the reference
#      runner, 8 micro-batches a step: the losses and the median step time of each.
#
#   benchmarks/llama_figures.sh [STEPS (40)] [MICRO_BATCHES (16)]
#
#   PW_TOOL, PW_OUT  the pipeweave binary (build/tools/pipeweave) and the output folder
#                    (out/llama_figures)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/llama_figures}
steps=${1:-40}
micro_batches=${2:-16}
mkdir -p "$out"

# json_number FILE PLAN KEY: the number KEY in the "a" or "b" block of an ab report's "sim".
json_number() {
  sed -n "s/.*\"sim\": {.*\"$2\": {\([^}]*\(}[^}]*\)\{0,2\}\)}.*/\1/p" "$1" |
    sed -n "s/.*\"$3\": \([0-9.e+-]*\).*/\1/p" | head -1
}

echo "== 1. simulated on h100, bf16, 1f1b, $micro_batches micro-batches"
# figures NAME LAYERS HIDDEN HEADS KV FFN VOCAB SEQ MP PP RECOMPUTE
figures() {
  local name=$1 layers=$2 hidden=$3 heads=$4 kv=$5 ffn=$6 vocab=$7 seq=$8 mp=$9 pp=${10}
  local recompute=${11}
  "$pw" build-model llama --layers "$layers" --hidden "$hidden" --heads "$heads" --kv-heads "$kv" \
    --ffn "$ffn" --seq "$seq" --vocab "$vocab" --rope-theta 500000 --mp "$mp" --pp "$pp" \
    -o "$out/$name.pb" >/dev/null
  local a="append-backward{optimizer=adam},amp{dtype=bf16},recompute{policy=$recompute},"
  a+="balance-stages,split-program,schedule{kind=1f1b,micro-batches=$micro_batches},insert-p2p"
  local b="$a,assign-streams,overlap-column-parallel-backward,overlap-1f1b,insert-events"
  "$pw" ab "$out/$name.pb" -a "$a" -b "$b" --sim --device h100 --format json \
    >"$out/$name.ab.json" 2>/dev/null
  local linears
  linears=$("$pw" opt "$out/$name.pb" -p "$a,assign-streams,overlap-column-parallel-backward" \
    --device h100 -o "$out/$name.overlapped.pb" --stats 2>&1 |
    awk '/^overlap-column-parallel-backward/ {p = 1} p && /linears-rewritten/ {print $2; exit}')
  echo "$name: mp $mp x pp $pp, recompute{policy=$recompute}; A: $a"
  echo "  B: A + assign-streams,overlap-column-parallel-backward,overlap-1f1b,insert-events"
  echo "  overlap-column-parallel-backward rewrote $linears linears (q, k, v and gate, up share an all-reduce)"
  for plan in a b; do
    local step mpf mpb peak fits
    step=$(json_number "$out/$name.ab.json" "$plan" step_time_ms)
    mpf=$(json_number "$out/$name.ab.json" "$plan" mp_forward)
    mpb=$(json_number "$out/$name.ab.json" "$plan" mp_backward)
    peak=$(json_number "$out/$name.ab.json" "$plan" max_peak_bytes)
    fits=$(sed -n "s/.*\"$plan\": {[^{]*{[^}]*}[^{]*{[^}]*}, \"peak_bytes\": \[[^]]*\], \"max_peak_bytes\": [0-9]*, \"fits\": \([a-z]*\).*/\1/p" "$out/$name.ab.json")
    awk -v plan="$plan" -v step="$step" -v mpf="$mpf" -v mpb="$mpb" -v peak="$peak" \
      -v fits="$fits" -v L="$layers" -v H="$hidden" -v A="$heads" -v G="$kv" -v F="$ffn" \
      -v V="$vocab" -v S="$seq" -v M="$micro_batches" -v ranks=$((mp * pp)) 'BEGIN {
        d = H / A
        n = L * (H * A * d + 2 * H * G * d + A * d * H + 3 * H * F) + H * V
        flops = (6 * n + 12 * L * H * S) * M * S
        mfu = flops / (step / 1e3 * ranks * 989.4e12)
        printf "  %s: step %8.1f ms   MFU %5.1f %%   exposed TP comm %7.1f ms (forward %6.1f, backward %6.1f)   peak %5.1f GiB per rank, fits: %s\n",
          toupper(plan), step, 100 * mfu, mpf + mpb, mpf, mpb, peak / 2^30, fits }'
  done
}
figures llama3_8b 32 4096 32 8 14336 128256 8192 2 4 selective
figures llama3_70b 80 8192 64 8 28672 128256 8192 8 4 full
echo

echo "== 2. small Llama beside the small GPT on this CPU, $steps steps (reference runner, Adam)"
small="--layers 4 --hidden 64 --heads 4 --seq 16 --vocab 128 --micro-batch-size 2 --seed 1"
"$pw" build-model llama $small --kv-heads 2 --ffn 176 -o "$out/small_llama.pb" >/dev/null
"$pw" build-model gpt $small --ffn 256 -o "$out/small_gpt.pb" >/dev/null
for model in llama gpt; do
  "$pw" opt "$out/small_$model.pb" -p 'append-backward{optimizer=adam,lr=0.01}' \
    -o "$out/small_${model}_train.pb" >/dev/null
  "$pw" run "$out/small_${model}_train.pb" --reference --steps "$steps" --micro-batches 8 \
    --seed 1 --report json >"$out/small_$model.json"
done
losses() { sed -n 's/.*"losses": \[\([^]]*\)\].*/\1/p' "$1" | tr ',' '\n' | tr -d ' '; }
times() { sed -n 's/.*"step_time_ms": \[\([^]]*\)\].*/\1/p' "$1" | tr ',' '\n' | tr -d ' '; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
paste <(seq 1 "$steps") <(losses "$out/small_llama.json") <(losses "$out/small_gpt.json") |
  awk 'BEGIN {printf "%5s %10s %10s\n", "step", "llama", "gpt"}
       NR == 1 || NR % 5 == 0 {printf "%5d %10.4f %10.4f\n", $1, $2, $3}'
printf "median step time (after the first): llama %.2f ms, gpt %.2f ms\n" \
  "$(times "$out/small_llama.json" | tail -n +2 | median)" \
  "$(times "$out/small_gpt.json" | tail -n +2 | median)"
