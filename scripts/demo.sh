#!/usr/bin/env bash
# Sets up, builds and runs the demo on the bundled GPT example: build the model, append
# its backward pass, print the module summary, and train it with the reference evaluator.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
pw="$root/build/tools/pipeweave"
out="$root/out/demo"
mkdir -p "$out"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Build the bundled GPT (4 layers, hidden 64, 4 heads, mp=1, pp=1)"
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --mp 1 --pp 1 --seed 1 -o "$out/gpt.pbtxt"

step "Append the backward pass and the Adam optimizer"
"$pw" opt "$out/gpt.pbtxt" -p 'append-backward{optimizer=adam,lr=0.01},dce' \
  -o "$out/gpt_train.pb" --time-passes

step "Module summary"
"$pw" inspect "$out/gpt_train.pb"

step "Train for 20 steps with the reference evaluator (8 micro-batches per step)"
"$pw" run "$out/gpt_train.pb" --reference --steps 20 --micro-batches 8 --seed 1

echo
echo "Outputs are in $out"
