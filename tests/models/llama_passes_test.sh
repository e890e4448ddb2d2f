#!/usr/bin/env bash
# Every pass on the small Llama (mp 2 x pp 2; vpp 2 for the interleaved and V kinds), the
# command line end to end: each schedule kind after append-backward, amp, recompute and
# balance-stages, with insert-p2p or order-comm, the stream and overlap passes and
# insert-events; each plan checked (`check`) and simulated on h100 (`sim`); one trained on
# 4 rank processes under --strict-events. The overlap pass reports the linears it rewrote.
#   llama_passes_test.sh PIPEWEAVE WORK_DIR
set -u
pw=$1
work=$2
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

shape="--layers 4 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --seq 16 --vocab 128 --mp 2 --pp 2"
"$pw" build-model llama $shape -o "$work/loop.pb" >/dev/null || fail "build-model"
"$pw" build-model llama $shape --vpp 2 --layers 8 -o "$work/vpp2.pb" >/dev/null ||
  fail "build-model vpp 2"
"$pw" build-model llama $shape --vpp 2 --layers 8 --placement v -o "$work/v.pb" >/dev/null ||
  fail "build-model v"

front="append-backward{optimizer=adam},amp{dtype=bf16},recompute{policy=selective}"
streams="assign-streams,overlap-column-parallel-backward"
# module kind split p2p overlap balance: balance-stages may cut inside a layer, where
# linears on two stages no longer share one all-reduce: counted only without it.
plans=(
  "loop fthenb 0 insert-p2p overlap-row-split 1"
  "loop 1f1b 0 order-comm overlap-1f1b 0"
  "loop eager-1f1b 0 insert-p2p{order=parity} overlap-1f1b 1"
  "vpp2 interleaved-1f1b 0 insert-p2p overlap-1f1b 0"
  "loop zb-h1 1 insert-p2p overlap-row-split 1"
  "loop zb-h2 1 insert-p2p overlap-row-split 0"
  "loop zb-auto 1 insert-p2p overlap-row-split 0"
  "v zb-v 1 insert-p2p overlap-row-split 1"
  "v dualpipe-v 1 insert-p2p overlap-1f1b 0"
)
for plan in "${plans[@]}"; do
  read -r module kind split p2p overlap balance <<<"$plan"
  split_program=split-program
  ((split)) && split_program="split-program{split-backward=true}"
  balance_stages=""
  ((balance)) && balance_stages=",balance-stages"
  pipeline="$front$balance_stages,$split_program,schedule{kind=$kind,micro-batches=8},$p2p,$streams,$overlap,insert-events"
  "$pw" opt "$work/$module.pb" -p "$pipeline" --device h100 -o "$work/$kind.pb" --stats \
    >/dev/null 2>"$work/$kind.stats" || fail "$kind: opt: $(tail -1 "$work/$kind.stats")"
  linears=$(awk '/^overlap-column-parallel-backward/ {p = 1} p && /linears-rewritten/ {print $2; exit}' \
    "$work/$kind.stats")
  # Full backwards: q, k, v and gate, up of every layer, and the LM head, under the weight
  # gradients; a split backward's input gradient has none to run under.
  layers=4
  [[ $module != loop ]] && layers=8
  want=$((5 * layers + 1))
  ((split)) && want=""
  if ((balance)); then
    ((split)) || ((linears > 0)) || fail "$kind: no linears rewritten"
  else
    [[ ${linears:-} == "$want" ]] || fail "$kind: '${linears:-}' linears rewritten, want '$want'"
  fi
  "$pw" check "$work/$kind.pb" >/dev/null || fail "$kind: check"
  "$pw" sim "$work/$kind.pb" --device h100 >"$work/$kind.sim" || fail "$kind: sim"
  grep -q "every rank fits" "$work/$kind.sim" || fail "$kind: $(sed -n 3p "$work/$kind.sim")"
  echo "ok: $kind ($linears linears rewritten): $(sed -n 2p "$work/$kind.sim")"
done

# The other precisions and recomputation policies.
for front in "append-backward{optimizer=adam},amp{dtype=fp16},recompute{policy=full}" \
  "append-backward{optimizer=adam},recompute{policy=auto,schedule=1f1b,micro-batches=8}"; do
  "$pw" opt "$work/loop.pb" --device h100 -o "$work/other.pb" \
    -p "$front,split-program,schedule{kind=1f1b,micro-batches=8},insert-p2p,$streams,overlap-1f1b,insert-events" \
    >/dev/null 2>"$work/other.err" || fail "$front: $(tail -1 "$work/other.err")"
  "$pw" check "$work/other.pb" >/dev/null || fail "$front: check"
done

# One plan trained: the executor adds no event of its own.
"$pw" run "$work/1f1b.pb" --nproc 4 --steps 2 --strict-events >"$work/run.txt" 2>&1 ||
  fail "run: $(tail -1 "$work/run.txt")"
grep -q "step 2 loss" "$work/run.txt" || fail "run: $(cat "$work/run.txt")"
echo "ok: 1f1b trained: $(grep 'step 2' "$work/run.txt")"
