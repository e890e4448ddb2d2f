#!/usr/bin/env bash
# order-comm from the command line: with `opt --device` it searches with the cost model's
# stage costs; without one it needs F, B, W and comm as options, and a missing one is named
# in one error line with no output written.
#   order_comm_cli_test.sh PIPEWEAVE EXPECT_ERROR WORK_DIR
set -u
pw=$1
expect=$2
work=$3
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$pw" build-model unet --layers 8 --hidden 16 --pp 4 -o "$work/unet.pb" ||
  fail "build-model exited $?"
plan='append-backward,split-program,schedule{kind=1f1b,micro-batches=8}'

rm -f "$work/no_costs.pb"
"$expect" "option 'F' is not given and no cost model is attached" "$work/no_costs.pb" -- \
  "$pw" opt "$work/unet.pb" -p "$plan,order-comm" -o "$work/no_costs.pb" || exit 1
"$expect" "option 'comm' is not given" "$work/no_costs.pb" -- \
  "$pw" opt "$work/unet.pb" -p "$plan,order-comm{F=1,B=1,W=1}" -o "$work/no_costs.pb" || exit 1

rm -f "$work/priced.pb"
out=$("$pw" opt "$work/unet.pb" -p "$plan,order-comm" --device h100 --stats \
  -o "$work/priced.pb" 2>&1) || fail "opt --device exited $?: $out"
[[ -s $work/priced.pb ]] || fail "no plan written"
grep -q "evaluations" <<<"$out" || fail "no order-comm statistics: $out"
check=$("$pw" check "$work/priced.pb" --micro-batches 8) || fail "check exited $?: $check"
grep -qF "ok: " <<<"$check" || fail "check says '$check'"

rm -f "$work/given.pb"
"$pw" opt "$work/unet.pb" -p "$plan,order-comm{F=1,B=1,W=1,comm=0.5}" -o "$work/given.pb" \
  >/dev/null || fail "opt with the costs as options exited $?"
[[ -s $work/given.pb ]] || fail "no plan written with the costs as options"
echo ok
