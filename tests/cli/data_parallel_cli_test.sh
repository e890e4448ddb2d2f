#!/usr/bin/env bash
# Data parallelism from the command line over Gloo processes: `build-model --dp 2` (x mp 2
# x pp 2: 8 rank processes) trains the losses of the one-rank reference on the same global
# batch (--global-batch on both) within 1e-5 relative, and a second run of the same plan
# trains the same losses and parameter bytes (the dp all-reduce sums in member order).
#   data_parallel_cli_test.sh PIPEWEAVE WORK_DIR
set -u
pw=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
shape=(--layers 4 --hidden 64 --heads 4 --seq 16 --vocab 128 --micro-batch-size 2)
"$pw" build-model gpt "${shape[@]}" -o "$work/ref.pbtxt" >/dev/null || fail "build-model dp 1"
"$pw" build-model gpt "${shape[@]}" --dp 2 --mp 2 --pp 2 -o "$work/dp2.pbtxt" >/dev/null ||
  fail "build-model --dp 2"
"$pw" inspect "$work/dp2.pbtxt" | grep -qF "mesh dp=2 pp=2 mp=2 vpp=1 (world size 8)" ||
  fail "inspect: $("$pw" inspect "$work/dp2.pbtxt" | head -1)"
# 16 samples a step: 4 micro-batches of 2 on each of the 2 replicas, 8 on the reference.
train='append-backward{optimizer=sgd,lr=0.1}'
"$pw" opt "$work/ref.pbtxt" -p "$train" -o "$work/ref.pb" >/dev/null || fail "opt ref"
"$pw" opt "$work/dp2.pbtxt" -p "$train,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p" \
  -o "$work/plan.pb" >/dev/null || fail "opt plan"
for run in a b; do
  "$pw" run-parallel "$work/plan.pb" --nproc 8 --steps 3 --threads 1 --global-batch 16 \
    --compare-reference "$work/ref.pb" --report json --save-params "$work/params_$run" \
    --run-dir "$work/run_$run" >"$work/$run.json" 2>"$work/$run.err" ||
    fail "run-parallel ($run) exited $?: $(tail -3 "$work/$run.err")"
done
python3 - "$work/a.json" "$work/b.json" <<'PY' || fail "losses: $(cat "$work/a.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert len(a["losses"]) == 3, a
worst = max(abs(x - r) / abs(r) for x, r in zip(a["losses"], a["reference_losses"]))
print(f"dp 2 x mp 2 x pp 2 over Gloo against dp 1: largest relative loss difference {worst:.3g}")
assert worst <= 1e-5, (a["losses"], a["reference_losses"])
assert a["losses"][-1] < a["losses"][0], a["losses"]
assert a["losses"] == b["losses"], (a["losses"], b["losses"])
PY
# Every rank's parameter file, byte for byte, in both runs.
files=$(cd "$work/params_a" && ls)
[[ $(echo "$files" | wc -w) -ge 8 ]] || fail "saved parameters: $files"
for f in $files; do
  cmp -s "$work/params_a/$f" "$work/params_b/$f" || fail "$f differs between two runs"
done
# distributed-optimizer (ZeRO-1) with Adam over the same 8 processes: the losses of the plan
# without it bit for bit, and each rank holds half of the sharded parameters' moments.
adam='append-backward{optimizer=adam,lr=0.01}'
plan_adam="$adam,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p"
"$pw" opt "$work/dp2.pbtxt" -p "$plan_adam" -o "$work/adam.pb" >/dev/null || fail "opt adam"
"$pw" opt "$work/dp2.pbtxt" -p "$plan_adam,distributed-optimizer,assign-streams,insert-events" \
  -o "$work/zero1.pb" --stats >"$work/zero1_stats.txt" 2>&1 || fail "opt distributed-optimizer"
grep -q "updates-sharded" "$work/zero1_stats.txt" || fail "no update sharded: $(cat "$work/zero1_stats.txt")"
# The same with its reduce-scatters in the backward and its parameter all-gathers at the
# next step's start (gradient buckets of 10 KiB for the all-reduces left).
"$pw" opt "$work/dp2.pbtxt" -p "$plan_adam,distributed-optimizer,assign-streams,overlap-grad-reduce{bucket-mb=0.01},overlap-param-gather,insert-events" \
  -o "$work/zero1pg.pb" --stats >"$work/zero1pg_stats.txt" 2>&1 || fail "opt overlap-param-gather"
grep -q "param-gathers-deferred" "$work/zero1pg_stats.txt" ||
  fail "no gather deferred: $(cat "$work/zero1pg_stats.txt")"
for plan in adam zero1 zero1pg; do
  "$pw" run-parallel "$work/$plan.pb" --nproc 8 --steps 3 --threads 1 --global-batch 16 \
    --report json --run-dir "$work/run_$plan" --save-params "$work/params_$plan" \
    >"$work/$plan.json" 2>"$work/$plan.err" ||
    fail "run-parallel ($plan) exited $?: $(tail -3 "$work/$plan.err")"
done
python3 - "$work/adam.json" "$work/zero1.json" "$work/zero1pg.json" <<'PY' || fail "distributed-optimizer: $(cat "$work/zero1.json")"
import json, sys
a, b, c = (json.load(open(p)) for p in sys.argv[1:4])
assert a["losses"] == b["losses"], (a["losses"], b["losses"])
assert a["losses"] == c["losses"], (a["losses"], c["losses"])
print("distributed-optimizer over Gloo: losses bit-identical (also with overlap-param-gather);"
      " peak bytes per rank", b["peak_bytes"], "against", a["peak_bytes"])
assert all(y < x for x, y in zip(a["peak_bytes"], b["peak_bytes"])), (a["peak_bytes"], b["peak_bytes"])
PY
# The deferred all-gathers are synced before the parameters are saved: every file equal.
for f in $(cd "$work/params_zero1" && ls); do
  cmp -s "$work/params_zero1/$f" "$work/params_zero1pg/$f" ||
    fail "$f differs with overlap-param-gather"
done
# Under amp, overlap-param-gather holds only each rank's rows of the f32 masters between
# syncs: the losses and every saved parameter of the plan that holds them whole, and a lower
# peak on every rank.
plan_amp="$adam,amp{dtype=bf16},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p,distributed-optimizer,assign-streams"
"$pw" opt "$work/dp2.pbtxt" -p "$plan_amp,insert-events" -o "$work/amp_zero1.pb" >/dev/null ||
  fail "opt amp distributed-optimizer"
"$pw" opt "$work/dp2.pbtxt" -p "$plan_amp,overlap-param-gather,insert-events" \
  -o "$work/amp_zero1pg.pb" >/dev/null || fail "opt amp overlap-param-gather"
for plan in amp_zero1 amp_zero1pg; do
  "$pw" run-parallel "$work/$plan.pb" --nproc 8 --steps 3 --threads 1 --global-batch 16 \
    --report json --run-dir "$work/run_$plan" --save-params "$work/params_$plan" \
    >"$work/$plan.json" 2>"$work/$plan.err" ||
    fail "run-parallel ($plan) exited $?: $(tail -3 "$work/$plan.err")"
done
python3 - "$work/amp_zero1.json" "$work/amp_zero1pg.json" <<'PY' || fail "amp masters held as rows"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["losses"] == b["losses"], (a["losses"], b["losses"])
assert all(y < x for x, y in zip(a["peak_bytes"], b["peak_bytes"])), (a["peak_bytes"], b["peak_bytes"])
print("amp: f32 masters held as rows over Gloo: losses bit-identical; peak bytes per rank",
      b["peak_bytes"], "against", a["peak_bytes"])
PY
for f in $(cd "$work/params_amp_zero1" && ls); do
  cmp -s "$work/params_amp_zero1/$f" "$work/params_amp_zero1pg/$f" ||
    fail "$f differs with the f32 masters held as rows"
done
# The reference at --global-batch 16 is the run at --micro-batches 8.
"$pw" run "$work/ref.pb" --reference --steps 1 --global-batch 16 --report json >"$work/g.json" ||
  fail "run --reference --global-batch"
"$pw" run "$work/ref.pb" --reference --steps 1 --micro-batches 8 --report json >"$work/m.json" ||
  fail "run --reference --micro-batches"
python3 -c 'import json,sys; a,b=(json.load(open(p))["losses"] for p in sys.argv[1:]); assert a==b,(a,b)' \
  "$work/g.json" "$work/m.json" || fail "--global-batch 16 is not 8 micro-batches of 2"
# Llama takes --dp as well.
"$pw" build-model llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --seq 16 \
  --vocab 128 --dp 4 --mp 2 -o "$work/llama.pbtxt" >/dev/null || fail "build-model llama --dp 4"
"$pw" inspect "$work/llama.pbtxt" | grep -qF "mesh dp=4 pp=1 mp=2" || fail "llama mesh"
# tune --splits on: every other dp x pp x mp of the 8 ranks searched on the op-level
# simulator; the best plan's printed build-model arguments and pipeline reproduce its time.
"$pw" tune "$work/dp2.pbtxt" --ranks 8 --device h100 --global-batch 16 --splits on \
  --shapes off --top 3 >"$work/tune.txt" 2>"$work/tune.err" || fail "tune --splits: $(cat "$work/tune.err")"
grep -qF "tune: 7 other dp x pp x mp splits of 8 ranks searched" "$work/tune.err" ||
  fail "tune --splits: $(cat "$work/tune.err")"
best=$(grep -m1 "^1 " "$work/tune.txt")
[[ $best =~ ^1\ +([0-9.]+)\ .*\ (dp\ [0-9]+\ x\ pp\ [0-9]+\ x\ mp\ [0-9]+):\ (.*)$ ]] ||
  fail "the best plan is on no split: $(cat "$work/tune.txt")"
predicted=${BASH_REMATCH[1]}
pipeline=${BASH_REMATCH[3]}
args=$(grep -m1 -o "module: pipeweave build-model .* -o MODULE.pb" "$work/tune.txt" |
  sed 's/^module: pipeweave build-model //; s/ -o MODULE.pb$//')
# shellcheck disable=SC2086
"$pw" build-model $args -o "$work/split.pbtxt" >/dev/null || fail "build-model $args"
"$pw" opt "$work/split.pbtxt" -p "$pipeline" --device h100 -o "$work/split_plan.pb" >/dev/null ||
  fail "opt -p $pipeline"
simulated=$("$pw" sim "$work/split_plan.pb" --device h100 --format json |
  grep -o '"step_time_ms": [^,]*' | head -1 | sed 's/.*: //')
awk -v a="$simulated" -v b="$predicted" 'BEGIN { exit !(a - b < 0.0005 && b - a < 0.0005) }' ||
  fail "the split's plan simulates at $simulated ms, tune printed $predicted ms"
# Bad inputs: one line, a non-zero exit, no output file, nothing started.
expect_error() { "$(dirname "$0")/expect_error.sh" "$@" >/dev/null || fail "$("$(dirname "$0")/expect_error.sh" "$@")"; }
expect_error "flag --global-batch 10 is not a multiple of dp 2 x micro-batch size 2 (4)" - -- \
  "$pw" run-parallel "$work/plan.pb" --nproc 8 --global-batch 10
expect_error "flag --global-batch 32 is 8 micro-batches per replica (dp 2 x micro-batch size 2), but the plan schedules 4" - -- \
  "$pw" run-parallel "$work/plan.pb" --nproc 8 --global-batch 32
expect_error "give --global-batch or --micro-batches, not both" - -- \
  "$pw" run-parallel "$work/plan.pb" --nproc 8 --global-batch 16 --micro-batches 4
expect_error "flag --global-batch 15 is not a multiple of dp 1 x micro-batch size 2" - -- \
  "$pw" run "$work/ref.pb" --reference --steps 1 --global-batch 15
expect_error "--nproc 4 does not match the module's mesh (dp=2 pp=2 mp=2: 8 ranks)" - -- \
  "$pw" run-parallel "$work/plan.pb" --nproc 4
expect_error "flag --dp: expected an integer in [1, 65536]" "$work/bad.pbtxt" -- \
  "$pw" build-model gpt "${shape[@]}" --dp 0 -o "$work/bad.pbtxt"
expect_error "flag --dp applies to gpt and llama, not unet" "$work/bad.pbtxt" -- \
  "$pw" build-model unet --layers 2 --hidden 32 --dp 2 -o "$work/bad.pbtxt"
expect_error "flag --splits on searches one module's dp x pp x mp splits at one global batch" - -- \
  "$pw" tune "$work/dp2.pbtxt" --ranks 8 --splits on
echo ok
