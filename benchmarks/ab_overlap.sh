#!/usr/bin/env bash
# The A/B of the column-parallel backward overlap, with `pipeweave ab`:
#   1. the GPT-3 6.7B shape (32 layers, hidden 4096, 32 heads, ffn 16384, seq 2048, vocab
#      51200, micro-batch 1, mp 2 x pp 4), 16 micro-batches, simulated on an H100, for each
#      schedule kind in PW_AB_KINDS;
#   2. the small GPT (4 layers, hidden 64, mp 2 x pp 2), 8 micro-batches under 1f1b,
#      simulated on the CPU with this machine's profile and trained on 4 rank processes
#      in interleaved rounds.
# A is the plain plan (append-backward{optimizer=adam},split-program,schedule,insert-p2p);
# B is A followed by PW_AB_B_SUFFIX. Prints every table; the reports (table and JSON) and
# the stacked SVG timelines stay in PW_OUT.
#
#   benchmarks/ab_overlap.sh [ROUNDS (5)] [STEPS (10)]
#
#   PW_AB_B_SUFFIX  what B adds (default ",assign-streams,overlap-column-parallel-backward,
#                   insert-events"); e.g. PW_AB_B_SUFFIX= compares a plan with itself
#   PW_AB_KINDS     schedule kinds of part 1 (default "1f1b zb-h1 interleaved-1f1b"; zb-h1
#                   splits the backward, interleaved-1f1b places two chunks per rank)
#   PW_TOOL, PW_OUT the pipeweave binary (build/tools/pipeweave) and the output folder
#                   (out/ab_overlap)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/ab_overlap}
rounds=${1:-5}
steps=${2:-10}
suffix=${PW_AB_B_SUFFIX-,assign-streams,overlap-column-parallel-backward,insert-events}
kinds=${PW_AB_KINDS:-1f1b zb-h1 interleaved-1f1b}
mkdir -p "$out"

# plan KIND MICRO_BATCHES: the plain pipeline A of a schedule kind.
plan() {
  local split=split-program
  [[ $1 == zb-* ]] && split='split-program{split-backward=true}'
  echo "append-backward{optimizer=adam},$split,schedule{kind=$1,micro-batches=$2},insert-p2p"
}

# ab NAME MODULE A ARGS...: the A/B as a table (printed) and as JSON, both kept.
ab() {
  local name=$1 module=$2 a=$3
  shift 3
  "$pw" ab "$module" -a "$a" -b "$a$suffix" "$@" -o "$out/$name.txt" --json "$out/$name.json"
  cat "$out/$name.txt"
  echo
}

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
for kind in $kinds; do
  vpp=1
  [[ $kind == interleaved-* ]] && vpp=2
  module=$out/gpt_6.7b_vpp$vpp.pb
  model "$module" gpt $gpt67 --vpp $vpp
  echo "== GPT-3 6.7B shape, mp 2 x pp 4, $kind, 16 micro-batches, simulated on h100"
  ab "gpt_6.7b_$kind" "$module" "$(plan "$kind" 16)" --sim --device h100 \
    --svg "$out/gpt_6.7b_$kind.svg"
done

small=$out/gpt_small.pb
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --mp 2 --pp 2 -o "$small" >/dev/null
# The simulation prices ops and communication with this machine's measurements (pipeweave
# profile --comm of plan B, which has every op and collective of A): the CPU spec alone
# does not know what an all-reduce costs between 4 processes on these cores.
"$pw" opt "$small" -p "$(plan 1f1b 8)$suffix" -o "$out/gpt_small_b.pb"
"$pw" profile "$out/gpt_small_b.pb" --comm -o "$out/gpt_small_costs.pbtxt" >/dev/null
echo "== small GPT, mp 2 x pp 2, 1f1b, 8 micro-batches: simulated on cpu (profiled), measured on 4 rank processes"
ab gpt_small "$small" "$(plan 1f1b 8)" --sim --device cpu --costs "$out/gpt_small_costs.pbtxt" \
  --run --nproc 4 --rounds "$rounds" --steps "$steps" --svg "$out/gpt_small.svg"
