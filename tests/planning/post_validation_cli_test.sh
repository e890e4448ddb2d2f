#!/usr/bin/env bash
# amp{post-validate=true} on a zero-bubble plan of a GPU-sized GPT, simulated steps back to
# back: with the synchronous overflow check every step ends on every rank at once; post-
# validated, the ranks run on into their next step, so the steady step is shorter. Both
# trained on rank processes give the same bits (`ab --run`). And the refusals, one line
# each.
#   post_validation_cli_test.sh PIPEWEAVE EXPECT_ERROR WORK_DIR
set -u
pw=$1
expect=$2
work=$3
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
gpt() { "$pw" build-model gpt --layers 8 --hidden 1024 --heads 16 --seq 256 --vocab 128 "$@" >/dev/null; }
gpt --micro-batch-size 4 --pp 4 -o "$work/w4.pbtxt" || fail "build-model w4"
plan() {
  echo "append-backward{optimizer=adam},amp{dtype=fp16$1},split-program{split-backward=true}," \
    "schedule{kind=zb-auto,mem-limit=8,micro-batches=8},insert-p2p" | tr -d ' '
}
steady() {
  "$pw" sim "$work/w4.pbtxt" --device h100 --steps 3 --format json --pipeline "$(plan "$1")" |
    grep -o '"steady_step_time_ms": [0-9.e+-]*' | awk '{print $2}'
}
sync=$(steady "") || fail "sim of the synchronous plan"
post=$(steady ",post-validate=true") || fail "sim of the post-validated plan"
[[ -n $sync && -n $post ]] || fail "no steady_step_time_ms (sync '$sync', post '$post')"
echo "steady step: synchronous check $sync ms, post-validated $post ms"
awk -v s="$sync" -v p="$post" 'BEGIN { exit !(p < 0.98 * s) }' ||
  fail "post-validated steady step $post ms is not 2 % shorter than the synchronous $sync ms"

# On rank processes (Gloo): post-validated and synchronous training give the same losses
# and parameters, bit for bit, while the first steps overflow (fp16 from a scale of 1e6).
gpt_small() { "$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --seq 16 --vocab 128 "$@" >/dev/null; }
gpt_small --pp 2 -o "$work/s2.pbtxt" || fail "build-model s2"
small="append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1e6AMP},split-program{split-backward=true},schedule{kind=zb-h1,micro-batches=8},insert-p2p"
"$pw" ab "$work/s2.pbtxt" -a "${small/AMP/}" -b "${small/AMP/,post-validate=true}" --run --nproc 2 \
  --steps 4 --rounds 2 --loss-tolerance 0 --run-dir "$work/ab" >"$work/ab.txt" 2>&1 ||
  fail "ab exited $?: $(tail -3 "$work/ab.txt")"
grep -q "losses: bit-identical" "$work/ab.txt" || fail "losses differ: $(grep losses "$work/ab.txt")"
grep -q "parameters: bit-identical" "$work/ab.txt" ||
  fail "parameters differ: $(grep parameters "$work/ab.txt")"

# Refusals: without loss scaling there is no flag to validate; the distributed optimizer
# would shard state the copies keep whole.
"$expect" "post-validate checks loss scaling's overflow flag a step late" "$work/bf16.pbtxt" -- \
  "$pw" opt "$work/w4.pbtxt" -p "append-backward,amp{post-validate=true}" -o "$work/bf16.pbtxt" ||
  exit 1
gpt --pp 2 --dp 2 -o "$work/d2.pbtxt" || fail "build-model d2"
"$expect" "distributed-optimizer does not shard post-validated loss scaling's copies" \
  "$work/do.pbtxt" -- "$pw" opt "$work/d2.pbtxt" -o "$work/do.pbtxt" -p \
  "append-backward{optimizer=adam},amp{dtype=fp16,post-validate=true},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p,distributed-optimizer" ||
  exit 1
# The pass on its own: it needs amp's loss scaling, and the unsplit module.
"$expect" "the module has no loss scaling: run amp{dtype=fp16}" "$work/none.pbtxt" -- \
  "$pw" opt "$work/w4.pbtxt" -p "append-backward,post-validate" -o "$work/none.pbtxt" || exit 1
"$expect" "post-validate runs on the unsplit module: put it before split-program" \
  "$work/split.pbtxt" -- "$pw" opt "$work/w4.pbtxt" -o "$work/split.pbtxt" -p \
  "append-backward,amp{dtype=fp16},split-program,post-validate" || exit 1
echo "ok"
