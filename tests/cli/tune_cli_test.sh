#!/usr/bin/env bash
# `pipeweave tune` end to end on the small GPT (mp 2 x pp 2, h100): the table and the JSON
# have their keys, the best plan is no slower than plain 1f1b, and its printed pipeline
# run through `opt` then `sim --steps 2` predicts exactly the (steady) step time tune printed.
#   tune_cli_test.sh PIPEWEAVE WORK_DIR
set -u
pw=$1
work=$2
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(cat "$1")"; }

"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --seq 16 --vocab 128 --mp 2 --pp 2 \
  -o "$work/gpt.pbtxt" >/dev/null || fail "build-model"
"$pw" tune "$work/gpt.pbtxt" --ranks 4 --device h100 --global-batch 8 --top 3 --shapes off \
  >"$work/table.txt" 2>"$work/progress.txt" || fail "tune (table) exited $?"
has "$work/table.txt" "4 ranks (mp 2 x pp 2 x dp 1, vpp 1), 8 micro-batches, device h100"
has "$work/table.txt" "plain 1f1b: "
has "$work/table.txt" "speedup"
has "$work/progress.txt" "priced by the action-level simulator"
"$pw" tune "$work/gpt.pbtxt" --ranks 4 --device h100 --micro-batches 8 --format json \
  >"$work/tune.json" 2>/dev/null || fail "tune (json) exited $?"
for key in '"ranks": 4' '"micro_batches": 8' '"baseline": {"module": ' '"plans": [' \
  '"speedup": ' '"peak_bytes": ' '"searched": {"schedules": ' '"vpp": 1'; do
  has "$work/tune.json" "$key"
done
# The baseline comes first in the JSON, then the plans: the second pipeline and step time
# are the best plan's.
nth() { grep -o "\"$1\": $2" "$work/tune.json" | sed -n "$3p" | sed "s/\"$1\": //; s/\"//g"; }
baseline=$(nth step_time_ms '[^,]*' 1)
predicted=$(nth step_time_ms '[^,]*' 2)
pipeline=$(nth pipeline '"[^"]*"' 2)
[[ -n $pipeline && -n $predicted && -n $baseline ]] || fail "no plan in $(cat "$work/tune.json")"
awk -v a="$predicted" -v b="$baseline" 'BEGIN { exit !(a <= b) }' ||
  fail "best plan $predicted ms is slower than plain 1f1b $baseline ms"
"$pw" opt "$work/gpt.pbtxt" -p "$pipeline" --device h100 -o "$work/best.pb" ||
  fail "opt rejects the printed pipeline: $pipeline"
# tune prices the steady step of two steps back to back (sim --steps 2).
"$pw" sim "$work/best.pb" --device h100 --steps 2 --format json >"$work/sim.json" ||
  fail "sim exited $?"
simulated=$(grep -o '"steady_step_time_ms": [^,]*' "$work/sim.json" | head -1 | sed 's/.*: //')
[[ $simulated == "$predicted" ]] ||
  fail "opt + sim of '$pipeline' predicts $simulated ms, tune printed $predicted ms"
# Two stagings of the same model (vpp 1 and 2) compared at one global batch: the
# interleaved kinds plan only on the second, and every plan names its module.
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --seq 16 --vocab 128 --mp 2 --pp 2 \
  --vpp 2 -o "$work/gpt_vpp2.pbtxt" >/dev/null || fail "build-model vpp 2"
"$pw" tune "$work/gpt.pbtxt" "$work/gpt_vpp2.pbtxt" --ranks 4 --device h100 --global-batch 8 \
  --top 20 >"$work/both.txt" 2>/dev/null || fail "tune of two modules exited $?"
has "$work/both.txt" "module: pipeline"
has "$work/both.txt" "plain 1f1b on $work/gpt.pbtxt"
has "$work/both.txt" "$work/gpt_vpp2.pbtxt: append-backward,split-program,schedule{kind=interleaved-1f1b"
# One module that records how build-model made it, with --global-batch: tune builds it
# again with the other vpp, placements and micro-batch sizes, and a plan on such a shape
# names it and the build-model arguments, which build the module the plan reproduces on.
"$pw" tune "$work/gpt.pbtxt" --ranks 4 --device h100 --global-batch 8 --top 40 \
  >"$work/shapes.txt" 2>"$work/shapes_progress.txt" || fail "tune with shapes exited $?"
has "$work/shapes.txt" "shapes by the action-level simulator"
has "$work/shapes.txt" "searched 9 shapes"  # (vpp 1, 2, 2 v) x (micro-batch size 1, 2, 4)
has "$work/shapes_progress.txt" "other shapes ranked by the action-level simulator"
shape_plan=$(grep -B1 -m1 "module: pipeweave build-model" "$work/shapes.txt" | head -1)
args=$(grep -m1 -o "module: pipeweave build-model .* -o MODULE.pb" "$work/shapes.txt" |
  sed 's/module: pipeweave build-model //; s/ -o MODULE.pb//')
[[ -n $shape_plan && -n $args ]] || fail "no plan on a rebuilt shape: $(cat "$work/shapes.txt")"
shape_ms=$(awk '{ print $2 }' <<<"$shape_plan")
shape_pipeline=${shape_plan##*: }
# shellcheck disable=SC2086  # the arguments as printed, one word each
"$pw" build-model $args -o "$work/shape.pbtxt" >/dev/null || fail "build-model $args"
"$pw" opt "$work/shape.pbtxt" -p "$shape_pipeline" --device h100 -o "$work/shape_best.pb" ||
  fail "opt rejects '$shape_pipeline' on build-model $args"
"$pw" sim "$work/shape_best.pb" --device h100 --steps 2 --format json \
  >"$work/shape_sim.json" || fail "sim of the shape's plan exited $?"
shape_sim=$(grep -o '"steady_step_time_ms": [^,]*' "$work/shape_sim.json" | head -1 |
  sed 's/.*: //')
awk -v a="$shape_sim" -v b="$shape_ms" 'BEGIN { d = a - b; exit !(d < 0.0006 && d > -0.0006) }' ||
  fail "build-model $args + '$shape_pipeline' simulates $shape_sim ms, tune printed $shape_ms"
"$pw" tune "$work/gpt.pbtxt" --ranks 4 --device h100 --global-batch 8 --format json \
  >"$work/shapes.json" 2>/dev/null || fail "tune with shapes (json) exited $?"
has "$work/shapes.json" '"shapes": [{"shape": "'
has "$work/shapes.json" '"best_kind": '
"$(dirname "$0")/expect_error.sh" "--shapes takes on or off, got 'yes'" - -- "$pw" tune \
  "$work/gpt.pbtxt" --ranks 4 --device h100 --global-batch 8 --shapes yes ||
  fail "a bad --shapes is not refused"
# The first module is the reference: plain 1f1b must run on it (one stage per rank).
"$(dirname "$0")/expect_error.sh" "put first a module it runs on" - -- "$pw" tune \
  "$work/gpt_vpp2.pbtxt" "$work/gpt.pbtxt" --ranks 4 --device h100 --global-batch 8 ||
  fail "a vpp 2 module first is not refused"
echo "tune's best plan ($predicted ms, plain 1f1b $baseline ms) reproduces through opt + sim"
