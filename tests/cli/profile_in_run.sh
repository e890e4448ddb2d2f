#!/usr/bin/env bash
# `profile --in-run` times the ops inside a training run: on the small GPT (unplanned, and
# planned mp 2 x pp 2 on four rank threads) every compute signature is measured in the run,
# each as often as the run executes it (steps x micro-batches x its uses per micro-batch),
# and `sim` prices the plan from the table.
#   profile_in_run.sh PIPEWEAVE
set -u
pw=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$pw" build-model gpt --layers 2 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 -o "$work/gpt.pbtxt" >/dev/null || fail "build-model"
"$pw" opt "$work/gpt.pbtxt" -p 'append-backward{optimizer=adam,lr=0.01}' -o "$work/ref.pb" ||
  fail "opt"
"$pw" build-model gpt --layers 2 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --mp 2 --pp 2 -o "$work/gpt22.pbtxt" >/dev/null || fail "build-model mp2"
"$pw" opt "$work/gpt22.pbtxt" -p 'append-backward{optimizer=adam,lr=0.01},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p' \
  -o "$work/plan.pb" || fail "opt plan"

# The repeats of each entry: a signature run in the run is measured once per run of it.
repeats() { awk '/^entries/ {k=""} /^  key:/ {k=$0} /^  repeats:/ {print $2 "\t" k}' "$1"; }
for module in ref plan; do
  out=$("$pw" profile "$work/$module.pb" -o "$work/$module.pbtxt" --in-run --in-run-steps 3 \
    --micro-batches 4 --no-calibrate 2>&1) || fail "$module: profile --in-run: $out"
  echo "$out"
  total=$(sed -n 's/^profiled \([0-9]*\) op signatures.*/\1/p' <<<"$out")
  in_run=$(sed -n 's/.*; \([0-9]*\) in the run.*/\1/p' <<<"$out")
  [[ -n $total && -n $in_run ]] || fail "$module: no summary line"
  # Timed alone: only the communication ops (c_identity and the all-reduces: no kernel
  # instruction at mp 1; in a plan priced by --comm's run, not as compute).
  comm=$(grep -c 'key: "c_' "$work/$module.pbtxt")
  ((in_run >= total - comm && in_run > 10)) ||
    fail "$module: $in_run of $total signatures in the run ($comm communication)"
  # The steps the table prices: the 3 rounds' (a step each), or where the machine's speed
  # moved under them, those of the rounds it kept (rounds taken again are a step too).
  steps=$(sed -n 's/.*the table prices its ops from the \([0-9]*\) of .*/\1/p' <<<"$out")
  steps=${steps:-3}
  # Optimizer ops run once a step, micro-batch ops 4 times a step.
  [[ $(repeats "$work/$module.pbtxt" | grep -c 'key: "adam(') -gt 0 ]] || fail "$module: no adam"
  repeats "$work/$module.pbtxt" | grep 'key: "adam(' | awk -v n="$steps" '$1 % n {exit 1}' ||
    fail "$module: an optimizer op measured other than a multiple of $steps times"
  repeats "$work/$module.pbtxt" | grep -E 'key: "(matmul|gelu|layer_norm)' |
    awk -v n="$((4 * steps))" '$1 % n {exit 1}' ||
    fail "$module: a micro-batch op measured other than a multiple of $((4 * steps)) times"
  "$pw" sim "$work/$module.pb" --costs "$work/$module.pbtxt" --micro-batches 4 >/dev/null ||
    fail "$module: sim with the table"
done

# Two plans of one mesh in one profile: each schedule's in-run costs kept apart beside the
# pooled default, and sim prices a plan with its schedule's own; a table of 1f1b runs alone
# says so when it prices fthenb.
"$pw" opt "$work/gpt22.pbtxt" -p 'append-backward{optimizer=adam,lr=0.01},split-program,schedule{kind=fthenb,micro-batches=4},insert-p2p' \
  -o "$work/fthenb.pb" || fail "opt fthenb"
out=$("$pw" profile "$work/plan.pb" "$work/fthenb.pb" -o "$work/both.pbtxt" --in-run \
  --in-run-steps 3 --no-calibrate 2>&1) || fail "profile two plans: $out"
grep -q "ops timed in runs of 1f1b, fthenb plans: each schedule's costs kept apart" <<<"$out" ||
  fail "no line on the schedules kept apart: $out"
[[ $(grep -c '^in_run_schedules: ' "$work/both.pbtxt") == 2 ]] || fail "in_run_schedules not both"
for schedule in 1f1b fthenb; do
  [[ $(grep -c "^  schedule: \"$schedule\"" "$work/both.pbtxt") -gt 10 ]] ||
    fail "no entries of $schedule's own"
done
note=$("$pw" sim "$work/fthenb.pb" --costs "$work/plan.pbtxt" 2>&1 >/dev/null) || fail "sim: $note"
grep -q "plans, this plan is fthenb: on a CPU the order of a rank's jobs moves what its ops cost" \
  <<<"$note" || fail "no note on the table's other schedule: $note"
note=$("$pw" sim "$work/fthenb.pb" --costs "$work/both.pbtxt" 2>&1 >/dev/null) || fail "sim: $note"
[[ -z $note ]] || fail "a note though fthenb was profiled: $note"
# What each in-run entry's runs found beyond a cache is beside it, the cache in the table, and
# the fit over the two orders is reported: priced, or left unpriced where no cache's counts
# follow the costs (a few steps on a busy machine can measure no order effect at all).
grep -Eq "^(memory beyond a [0-9]+ KiB cache priced at [0-9.]+ ns a byte|memory beyond the caches left unpriced).*: 1f1b .* ms of compute a step, .* MiB beyond; fthenb " \
  <<<"$out" || fail "no line on the price of memory beyond a cache: $out"
capacity=$(sed -n 's/^stale_capacity: //p' "$work/both.pbtxt")
if [[ -z $capacity ]] || ((capacity < 65536)); then fail "stale_capacity '$capacity'"; fi
[[ $(grep -c '^  stale_bytes: ' "$work/both.pbtxt") -gt 30 ]] ||
  fail "the in-run entries have no stale_bytes"
# A price in the table prices the orders it did not run: the note says so.
sed -i '/^stale_price: /d' "$work/both.pbtxt"
echo "stale_price: 1e-10" >>"$work/both.pbtxt"
"$pw" opt "$work/gpt22.pbtxt" -p 'append-backward{optimizer=adam,lr=0.01},split-program{split-backward=true},schedule{kind=zb-h1,micro-batches=4},insert-p2p' \
  -o "$work/zbh1.pb" || fail "opt zb-h1"
note=$("$pw" sim "$work/zbh1.pb" --costs "$work/both.pbtxt" 2>&1 >/dev/null) ||
  fail "sim: $note"
grep -q "this plan is zb-h1: its order is priced by what its ops find beyond a $((capacity / 1024)) KiB cache (0.100 ns a byte" \
  <<<"$note" || fail "no note on the priced order: $note"
coverage=$("$pw" sim "$work/zbh1.pb" --costs "$work/both.pbtxt" --coverage 2>/dev/null) ||
  fail "sim --coverage with a priced table"
grep -q "^memory beyond a $((capacity / 1024)) KiB cache a step (the cost table's: 0.100 ns a byte" \
  <<<"$coverage" || fail "coverage not at the table's cache: $coverage"
grep -Eq "^    the price moves its compute by [-+][0-9.]+ ms a step" <<<"$coverage" ||
  fail "coverage without what the price moved: $coverage"

# Calibrated, an unplanned module: the reference runner's overhead per op is measured on it
# (its steps against the executor's), and the table carries that figure.
out=$("$pw" profile "$work/ref.pb" -o "$work/ref_calibrated.pbtxt" --repeat 1 --in-run \
  --in-run-steps 2 --micro-batches 4 2>&1) || fail "profile ref with calibration: $out"
line=$(grep "^reference runner's overhead per op on $work/ref.pb: " <<<"$out") ||
  fail "no reference calibration line: $out"
grep -Eq "its steps [0-9.]+x the executor's, the median of [35] alternated rounds" <<<"$line" ||
  fail "reference calibration line: $line"
us=$(sed -n 's/.*ref.pb: \([0-9.]*\) us .*/\1/p' <<<"$line")
overhead=$(sed -n 's/^  reference_op_overhead: //p' "$work/ref_calibrated.pbtxt")
awk -v us="$us" -v s="${overhead:-0}" 'BEGIN {exit !(s > 0 && (s * 1e6 - us) ^ 2 < 1e-4)}' ||
  fail "reference_op_overhead '$overhead' s is not the line's $us us"

# Calibrated (no --no-calibrate): the table's device carries the CPU a stream's wait costs,
# measured on this machine's busy cores (microseconds: a futex sleep and wake-up, a spin),
# and with --comm on a pipelined plan the compute a transfer takes from busy cores (tens of
# microseconds: two threads woken, their system calls, the displaced threads' losses).
out=$("$pw" profile "$work/plan.pb" -o "$work/calibrated.pbtxt" --repeat 1 --comm 2>&1) ||
  fail "profile with calibration: $out"
# Other tests running beside this one share the cores, and the probe then says so and
# measures nothing (its threads do not have their cores).
transfer_cpu=$(sed -n 's/^  transfer_cpu: //p' "$work/calibrated.pbtxt")
if grep -q "compute a pipeline transfer takes from busy cores: not measured: other work" \
  <<<"$out"; then
  [[ -z $transfer_cpu ]] || fail "transfer_cpu $transfer_cpu written though not measured"
else
  grep -q "compute a pipeline transfer takes from busy cores: [0-9.]* us (. rounds" <<<"$out" ||
    fail "no transfer CPU line: $out"
  awk -v t="$transfer_cpu" 'BEGIN {exit !(t > 1e-6 && t < 5e-3)}' ||
    fail "transfer_cpu '$transfer_cpu' s is not a measured figure"
fi
# Two measuring runs (--comm-runs), up to two more while the fastest is unconfirmed; the fit
# rests on one of them.
runs_line=$(grep "^the measuring runs of " <<<"$out") || fail "no measuring runs line: $out"
listed=$(sed -n 's/.* stepped \([0-9., ]*\) ms.*/\1/p' <<<"$runs_line" | tr -d ' ' | tr ',' '\n')
kept=$(sed -n 's/.*the fit rests on the \([0-9.]*\) ms one.*/\1/p' <<<"$runs_line")
count=$(grep -c . <<<"$listed")
((count >= 2 && count <= 4)) || fail "$count measuring runs: $runs_line"
grep -qx "$kept" <<<"$listed" || fail "the kept run '$kept' is not one of them: $runs_line"
# Four ranks on fewer cores take turns: the share of the straggle their collectives wait,
# fitted to the measuring run's step.
cores=$(sed -n 's/^  cores_per_node: //p' "$work/calibrated.pbtxt")
if ((cores < 4)); then
  grep -Eq "^ranks taking turns on shared cores: a collective on a compute stream waits [01]\.[0-9]+ of its measured straggle \(the measuring run's step: [0-9.]+ ms measured" \
    <<<"$out" || fail "no turns line on $cores cores: $out"
  share=$(sed -n 's/^  turn_straggle: //p' "$work/calibrated.pbtxt")
  awk -v s="${share:-0}" 'BEGIN {exit !(s >= 0 && s <= 1)}' || fail "turn_straggle '$share'"
fi
# What a thread spinning for an event takes of the busy cores, from the waits the
# measuring run's threads caught spinning.
grep -Eq "^a thread spinning for an event on busy cores: ([01]\.[0-9]+ of a core \([0-9]+ waits a measured step|no wait caught spinning on a shared core)" \
  <<<"$out" || fail "no spin CPU line: $out"
spin_share=$(sed -n 's/^  spin_cpu_share: //p' "$work/calibrated.pbtxt")
awk -v s="$spin_share" 'BEGIN {exit !(s > 0 && s <= 1)}' ||
  fail "spin_cpu_share '$spin_share' is not a share of a core"
grep -q "CPU per wait for another stream's event on busy cores" <<<"$out" ||
  fail "no wait CPU line: $out"
wait_cpu=$(sed -n 's/^  wait_cpu: //p' "$work/calibrated.pbtxt")
awk -v w="$wait_cpu" 'BEGIN {exit !(w > 2e-7 && w < 2e-3)}' ||
  fail "wait_cpu '$wait_cpu' s is not a measured microsecond figure"
echo "ok"
