#!/usr/bin/env bash
# dualpipe-v on a real model from the command line: a GPT placed in a V over 4 ranks (two
# chunks each), its backward split, planned with dualpipe-v and every send/recv order; each
# plan passes the schedule checker, its full backwards B run the stages' I and W programs,
# and the simulator prices it and draws it. On an unsplit module dualpipe-v is refused.
#   dualpipev_cli_test.sh PIPEWEAVE WORK_DIR
set -u
pw=$1
work=$2
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$pw" build-model gpt --layers 8 --hidden 32 --heads 2 --seq 8 --vocab 64 --pp 4 --vpp 2 \
  --placement v -o "$work/gpt_v.pb" || fail "build-model exited $?"
"$pw" opt "$work/gpt_v.pb" -p 'append-backward' -o "$work/gpt_v_train.pb" ||
  fail "append-backward exited $?"

split='split-program{split-backward=true},schedule{kind=dualpipe-v,micro-batches=10}'
for order in naive parity batched torch; do
  plan="$work/plan_$order.pbtxt"
  rm -f "$plan"
  "$pw" opt "$work/gpt_v_train.pb" -p "$split,insert-p2p{order=$order}" -o "$plan" ||
    fail "order=$order: opt exited $?"
  out=$("$pw" check "$plan" --micro-batches 10) || fail "order=$order: check exited $?: $out"
  grep -qF "ok: " <<<"$out" || fail "order=$order: check says '$out'"
  grep -qF "4 ranks, 8 stages, 10 micro-batches" <<<"$out" ||
    fail "order=$order: check says '$out'"
  grep -qF 'schedule: "dualpipe-v"' "$plan" || fail "order=$order: no dualpipe-v plan"
  # A full backward names no program: its sub-jobs are the stage's I and W programs.
  grep -qF 'kind: BACKWARD' "$plan" || fail "order=$order: no full backward job"
  grep -qF 'program: "stage0_backward_input"' "$plan" || fail "order=$order: no I program"
  grep -qF 'program: "stage0_backward_weight"' "$plan" || fail "order=$order: no W program"
  if grep -qF 'program: "stage0_backward"' "$plan"; then
    fail "order=$order: a job names a whole backward program"
  fi
done

# The simulator lowers the plan (split B's included) and draws it.
rm -f "$work/dualpipev.svg"
"$pw" sim "$work/plan_naive.pbtxt" --format json --svg "$work/dualpipev.svg" >"$work/sim.json" ||
  fail "sim exited $?"
grep -qF '"step_time_ms"' "$work/sim.json" || fail "sim printed no step time"
grep -qF '<svg' "$work/dualpipev.svg" || fail "sim wrote no SVG"

# An unsplit module: dualpipe-v's I and W have no programs to run.
rm -f "$work/unsplit.pb"
"$pw" opt "$work/gpt_v_train.pb" -p 'split-program,schedule{kind=dualpipe-v,micro-batches=10}' \
  -o "$work/unsplit.pb" 2>"$work/stderr"
code=$?
((code >= 1 && code <= 127)) || fail "unsplit: exit $code"
[[ $(wc -l <"$work/stderr") == 1 ]] || fail "unsplit: stderr is not one line: $(cat "$work/stderr")"
grep -qF "splits backwards into I and W; run split-program{split-backward=true} first" \
  "$work/stderr" || fail "unsplit: $(cat "$work/stderr")"
[[ ! -e $work/unsplit.pb ]] || fail "unsplit: wrote an output file"

# Fewer micro-batches than stages: refused by the generator's constraint.
"$pw" opt "$work/gpt_v_train.pb" -p "${split/micro-batches=10/micro-batches=6}" \
  -o "$work/few.pb" 2>"$work/stderr"
code=$?
((code >= 1 && code <= 127)) || fail "M < 2P: exit $code"
grep -qF "dualpipe-v needs at least as many micro-batches as stages (6" "$work/stderr" ||
  fail "M < 2P: $(cat "$work/stderr")"
echo "ok"
