#!/usr/bin/env bash
# The A/B of the 1F1B backward-forward overlap, with `pipeweave ab`:
#   A = plan + assign-streams,overlap-column-parallel-backward,insert-events
#   B = plan + assign-streams,overlap-column-parallel-backward,overlap-1f1b,insert-events
# and B against the plain plan (no overlap pass at all), on
#   1. the GPT-3 6.7B shape (32 layers, hidden 4096, mp 2 x pp 4), 16 micro-batches, h100:
#      1f1b and interleaved-1f1b (vpp 2), f32, and in bf16 (amp{dtype=bf16}) when the
#      build has the amp pass; and zb-h1 with overlap-row-split in B instead;
#   2. the GPT-3 175B shape (96 layers, hidden 12288, mp 8 x pp 16), 64 micro-batches, h100
#      (each simulation takes about 20 s here), and the passes' time on it;
#   3. the small GPT (mp 2 x pp 2), 8 micro-batches: simulated with this machine's profile
#      and trained on 4 rank processes in interleaved rounds.
# Prints every table; reports (table, JSON) and the stacked SVG timelines stay in PW_OUT.
#
#   benchmarks/ab_overlap_1f1b.sh [ROUNDS (5)] [STEPS (10)]
#
#   PW_SKIP_175B=1  leaves out part 2; PW_TOOL, PW_OUT as in ab_overlap.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/ab_overlap_1f1b}
rounds=${1:-5}
steps=${2:-10}
mkdir -p "$out"
cpb=",assign-streams,overlap-column-parallel-backward"
a_suffix="$cpb,insert-events"
b_suffix="$cpb,overlap-1f1b,insert-events"

# plan KIND MICRO_BATCHES [EXTRA]: the plain plan of a schedule kind (EXTRA after
# append-backward, e.g. amp).
plan() {
  echo "append-backward{optimizer=adam}${3:-},split-program,schedule{kind=$1,micro-batches=$2},insert-p2p"
}

# ab NAME MODULE A B ARGS...: the A/B as a table (printed) and as JSON, both kept.
ab() {
  local name=$1 module=$2 a=$3 b=$4
  shift 4
  "$pw" ab "$module" -a "$a" -b "$b" "$@" -o "$out/$name.txt" --json "$out/$name.json"
  cat "$out/$name.txt"
  echo
}

amp=""
passes=$("$pw" opt --list-passes 2>/dev/null || true)
grep -q '^ *amp' <<<"$passes" && amp=",amp{dtype=bf16}"

# model MODULE ARGS...: `build-model ARGS -o MODULE`, kept across runs only while it is what
# this binary builds from these arguments: a module older than the binary, or built from
# other arguments (recorded beside it in MODULE.args), is built again.
model() {
  local module=$1 tool
  shift
  tool=$(command -v "$pw") || tool=$pw
  if [[ -e $tool && $module -nt $tool && $(cat "$module.args" 2>/dev/null) == "$*" ]]; then
    return
  fi
  "$pw" build-model "$@" -o "$module" >/dev/null
  echo "$*" >"$module.args"
}

gpt67="--layers 32 --hidden 4096 --heads 32 --ffn 16384 --seq 2048 --vocab 51200"
gpt67="$gpt67 --micro-batch-size 1 --mp 2 --pp 4"
for precision in f32 ${amp:+bf16}; do
  extra=""
  [[ $precision == bf16 ]] && extra=$amp
  for kind in 1f1b interleaved-1f1b; do
    vpp=1
    [[ $kind == interleaved-* ]] && vpp=2
    module=$out/gpt_6.7b_vpp$vpp.pb
    model "$module" gpt $gpt67 --vpp $vpp
    p=$(plan "$kind" 16 "$extra")
    echo "== GPT-3 6.7B shape, mp 2 x pp 4, $kind, 16 micro-batches, $precision, h100: A/B"
    ab "gpt_6.7b_${kind}_$precision" "$module" "$p$a_suffix" "$p$b_suffix" --sim --device h100 \
      --svg "$out/gpt_6.7b_${kind}_$precision.svg"
    echo "== the same, plain plan against B"
    ab "gpt_6.7b_${kind}_${precision}_plain" "$module" "$p" "$p$b_suffix" --sim --device h100
  done
done

# Zero-bubble plans have no backward beside a forward to pair: overlap-row-split cuts their
# forwards' and input gradients' all-reduces into row blocks instead.
for precision in f32 ${amp:+bf16}; do
  extra=""
  [[ $precision == bf16 ]] && extra=$amp
  module=$out/gpt_6.7b_vpp1.pb
  p="append-backward{optimizer=adam}$extra,split-program{split-backward=true},schedule{kind=zb-h1,micro-batches=16},insert-p2p"
  echo "== GPT-3 6.7B shape, mp 2 x pp 4, zb-h1, 16 micro-batches, $precision, h100: overlap-row-split A/B"
  ab "gpt_6.7b_zb-h1_${precision}_row_split" "$module" "$p$a_suffix" \
    "$p$cpb,overlap-row-split,insert-events" --sim --device h100
done

if [[ -z ${PW_SKIP_175B:-} ]]; then
  module=$out/gpt_175b.pb
  model "$module" gpt --layers 96 --hidden 12288 --heads 96 --ffn 49152 --seq 2048 \
    --vocab 51200 --micro-batch-size 1 --mp 8 --pp 16
  p=$(plan 1f1b 64)
  echo "== GPT-3 175B shape, mp 8 x pp 16, 1f1b, 64 micro-batches, f32, h100: A/B"
  ab gpt_175b "$module" "$p$a_suffix" "$p$b_suffix" --sim --device h100
  echo "== pass times on it"
  "$pw" opt "$module" -p "$p$b_suffix" --device h100 -o "$out/gpt_175b_b.pb" --time-passes 2>&1 |
    grep -E 'wall ms|assign-streams|overlap|insert-events|total'
fi

small=$out/gpt_small.pb
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --mp 2 --pp 2 -o "$small" >/dev/null
p=$(plan 1f1b 8)
"$pw" opt "$small" -p "$p$b_suffix" --device cpu -o "$out/gpt_small_b.pb"
"$pw" profile "$out/gpt_small_b.pb" --comm -o "$out/gpt_small_costs.pbtxt" >/dev/null
echo "== small GPT, mp 2 x pp 2, 1f1b, 8 micro-batches: simulated on cpu (profiled), measured on 4 rank processes"
ab gpt_small "$small" "$p$a_suffix" "$p$b_suffix" --sim --device cpu \
  --costs "$out/gpt_small_costs.pbtxt" --run --nproc 4 --rounds "$rounds" --steps "$steps" \
  --svg "$out/gpt_small.svg"
