#!/usr/bin/env bash
# `pipeweave sim --format json` on small GPTs, compared byte for byte with outputs kept in
# sim_golden/: the simulator's lowering and replay may be restructured (and mp/dp replicas
# folded), but their predictions must not move. CPU cases hold the memory to --mem-limit
# (the machine's own memory differs from machine to machine).
#   sim_golden_test.sh PIPEWEAVE WORK_DIR
set -u
pw=$1
work=$2
golden=$(cd "$(dirname "$0")" && pwd)/sim_golden
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
gpt() { "$pw" build-model gpt --layers "$1" --hidden 64 --heads 4 --seq 16 --vocab 128 "${@:2}" >/dev/null; }

gpt 4 --mp 2 --pp 2 -o "$work/s22.pbtxt" || fail "build-model s22"
gpt 8 --mp 2 --pp 4 --vpp 2 -o "$work/s24v.pbtxt" || fail "build-model s24v"
gpt 4 --mp 4 --pp 2 -o "$work/s42.pbtxt" || fail "build-model s42"
sed 's/^  dp: 1$/  dp: 2/' "$work/s22.pbtxt" >"$work/s22d.pbtxt"

plan() { echo "append-backward,split-program$1,schedule{kind=$2,micro-batches=$3},insert-p2p$4"; }
check() {
  local name=$1
  shift
  "$pw" sim "$@" --format json >"$work/$name.json" || fail "$name: sim exited $?"
  cmp -s "$golden/$name.json" "$work/$name.json" ||
    fail "$name: differs from sim_golden/$name.json: $(diff <(tr ',' '\n' <"$golden/$name.json") \
      <(tr ',' '\n' <"$work/$name.json") | head -6)"
}
check s22_h100 "$work/s22.pbtxt" --device h100 --pipeline "$(plan "" 1f1b 4 "")"
check s22_cpu "$work/s22.pbtxt" --device cpu --mem-limit 16 --pipeline "$(plan "" 1f1b 4 "")"
check s22_ov "$work/s22.pbtxt" --device h100 --pipeline \
  "$(plan "" 1f1b 4 ",assign-streams,overlap-column-parallel-backward,insert-events")"
check s24v "$work/s24v.pbtxt" --device h100 --p2p rendezvous --pipeline \
  "$(plan "" interleaved-1f1b 8 ",assign-streams")"
check s42 "$work/s42.pbtxt" --device a100 --pipeline \
  "$(plan "{split-backward=true}" zb-h1 6 ",assign-streams,insert-events")"
check s22d "$work/s22d.pbtxt" --device h100 --pipeline "$(plan "" 1f1b 4 ",assign-streams")"
check s22d_cpu "$work/s22d.pbtxt" --device cpu --mem-limit 16 --pipeline "$(plan "" 1f1b 4 ",assign-streams")"
# Steps back to back: the zero-bubble plan's later stages start their next step early
# (the small GPTs above are launch-bound on a GPU: there every step takes what the first
# does). Steady step 47.06 ms against 50.20 for one step.
"$pw" build-model gpt --layers 8 --hidden 1024 --heads 16 --seq 256 --vocab 128 \
  --micro-batch-size 4 --pp 4 -o "$work/w4.pbtxt" >/dev/null || fail "build-model w4"
check w4_zb_steps "$work/w4.pbtxt" --device h100 --steps 3 --pipeline \
  "$(plan "{split-backward=true}" zb-auto,mem-limit=8 8 "")"
echo "all sim outputs match sim_golden/"
