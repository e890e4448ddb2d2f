#!/usr/bin/env bash
# Data-parallel figures:
#   1. simulated: the GPT-3 6.7B shape (32 layers, hidden 4096, 32 heads, seq 2048, vocab
#      51200) at dp 4 x pp 4 x mp 2 on 32 H100s (8 per node, so each dp group shares a node
#      and its all-reduce runs on NVLink), bf16, Adam, 1f1b with MICRO_BATCHES micro-batches of
#      one sequence per replica: step time, the largest peak memory of a rank (and its
#      persistent part: parameters, gradient sums, optimizer state), the exposed dp
#      communication of the worst rank, for
#        plain      the dp all-reduce at the step's end, every collective on compute
#        streams    assign-streams,insert-events (collectives on their own streams)
#        overlap    assign-streams,overlap-grad-reduce,insert-events (gradient buckets
#                   all-reduced as soon as complete, the bucket size the simulator's pick)
#        zero1      distributed-optimizer,assign-streams,insert-events (when registered)
#        zero1+ov   the same with overlap-grad-reduce: each reduce-scatter issued as soon as
#                   its gradient's last micro-batch is accumulated
#        zero1+pg   zero1+ov with overlap-param-gather: the bf16 copies gathered (each rank
#                   casts its own rows; the f32 masters only when parameters are synced),
#                   at the next step's start or after the update, whichever the simulator
#                   finds faster
#      then the same at dp 16 x pp 2 x mp 1, whose dp groups span two nodes (the
#      all-reduce priced at the spec's inter-node bandwidth, 50 GB/s per H100).
#   2. measured on this machine's CPU (when distributed-optimizer is registered): the small
#      GPT at dp 2 x pp 2 with Adam, peak bytes per rank of the executor's allocator with and
#      without the pass, and whether the losses agree bit for bit; then under amp (bf16)
#      ZeRO-1 with and without overlap-param-gather, with which each rank holds only its rows
#      of the f32 master weights between syncs.
#
#   benchmarks/data_parallel_figures.sh [MICRO_BATCHES (16)]
#
#   PW_TOOL, PW_OUT  the pipeweave binary (build/tools/pipeweave) and the output folder
#                    (out/data_parallel_figures)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/data_parallel_figures}
micro_batches=${1:-16}
mkdir -p "$out"
zero1=$("$pw" opt --list-passes | grep -c "^ *distributed-optimizer" || true)

# row LABEL PLAN.json: step, peak, persistent, exposed dp of the worst rank.
row() {
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
peak = max(x["peak_bytes"] for x in r["ranks"]) / 2**30
persistent = max(x["persistent_bytes"] for x in r["ranks"]) / 2**30
print(f"  {sys.argv[1]:<9} step {r['step_time_ms']:9.2f} ms   peak {peak:6.2f} GiB "
      f"(persistent {persistent:6.2f})   exposed dp {r['exposed_comm_ms']['dp']:7.3f} ms   "
      f"dp_comm busy {r['busy_ms_by_stream']['dp_comm']:7.3f} ms   fits {r['fits']}")
PY
}

shape=(--layers 32 --hidden 4096 --heads 32 --seq 2048 --vocab 51200 --micro-batch-size 1)
base="append-backward{optimizer=adam},amp{dtype=bf16},split-program,schedule{kind=1f1b,micro-batches=$micro_batches},insert-p2p"
for mesh in "4 4 2" "16 2 1"; do
  read -r dp pp mp <<<"$mesh"
  "$pw" build-model gpt "${shape[@]}" --dp "$dp" --pp "$pp" --mp "$mp" -o "$out/gpt67_dp$dp.pb" >/dev/null
  echo "== 1. GPT 6.7B, dp $dp x pp $pp x mp $mp on h100 ($((dp * pp * mp)) ranks), bf16, 1f1b, $micro_batches micro-batches per replica"
  declare -A plans=([plain]="$base" [streams]="$base,assign-streams,insert-events"
    [overlap]="$base,assign-streams,overlap-grad-reduce,insert-events")
  labels=(plain streams overlap)
  if ((zero1)); then
    plans[zero1]="$base,distributed-optimizer,assign-streams,insert-events"
    plans[zero1+ov]="$base,distributed-optimizer,assign-streams,overlap-grad-reduce,insert-events"
    plans[zero1+pg]="$base,distributed-optimizer,assign-streams,overlap-grad-reduce,overlap-param-gather,insert-events"
    labels+=(zero1 zero1+ov zero1+pg)
  fi
  for label in "${labels[@]}"; do
    "$pw" sim "$out/gpt67_dp$dp.pb" --device h100 --pipeline "${plans[$label]}" --format json \
      >"$out/gpt67_dp${dp}_$label.json"
    row "$label" "$out/gpt67_dp${dp}_$label.json"
  done
  unset plans
done

if ((zero1)); then
  echo "== 2. small GPT (4 layers, hidden 64, Adam), dp 2 x pp 2 on 4 rank processes, 3 steps"
  "$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --seq 16 --vocab 128 --micro-batch-size 2 \
    --dp 2 --pp 2 -o "$out/small.pbtxt" >/dev/null
  small="append-backward{optimizer=adam,lr=0.01},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p"
  amp="append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p,distributed-optimizer,assign-streams"
  declare -A small_plans=([plain]="$small" [zero1]="$small,distributed-optimizer"
    [amp_zero1]="$amp,insert-events" [amp_zero1+pg]="$amp,overlap-param-gather,insert-events")
  for label in plain zero1 amp_zero1 amp_zero1+pg; do
    "$pw" run-parallel "$out/small.pbtxt" --nproc 4 --steps 3 --threads 1 \
      --pipeline "${small_plans[$label]}" --report json >"$out/small_$label.json"
  done
  python3 - "$out" <<'PY'
import json, sys
runs = {l: json.load(open(f"{sys.argv[1]}/small_{l}.json")) for l in ("plain", "zero1", "amp_zero1", "amp_zero1+pg")}
for label, r in runs.items():
    print(f"  {label:<13} peak bytes per rank {r['peak_bytes']}")
for a, b, what in (("plain", "zero1", "f32: ZeRO-1 against the plain dp plan"),
                   ("amp_zero1", "amp_zero1+pg", "bf16: f32 masters held as each rank's rows (overlap-param-gather) against whole")):
    x, y = runs[a], runs[b]
    print(f"  {what}: {b} / {a} per rank {[round(q / p, 3) for p, q in zip(x['peak_bytes'], y['peak_bytes'])]}, "
          f"losses bit-identical: {x['losses'] == y['losses']}")
PY
fi
