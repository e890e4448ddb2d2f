#!/usr/bin/env bash
# Exposed tensor-parallel communication, plain plan against the plan with every overlap
# pass, with and without sequence parallelism, simulated on the H100 spec in bf16 (1f1b):
#   A = plan + assign-streams,insert-events
#   B = plan + assign-streams,[overlap-collective-matmul,]overlap-column-parallel-backward,
#       defer-weight-grads,overlap-1f1b,insert-events   (overlap-collective-matmul with SP only)
# on the GPT-3 6.7B shape (mp 2 x pp 4, 16 micro-batches), the 13B shape (mp 4 x pp 4, 16)
# and 175B (mp 8 x pp 16, 64; selective recomputation, so that every plan fits an H100). Also
# the SP plan with overlap-collective-matmul alone, and with every pass but
# defer-weight-grads. A peak marked "(does not fit)" exceeds the device's memory.
# "exposed TP %" is the worst rank's exposed mp_forward + mp_backward + sp_forward +
# sp_backward over its own busy mp_comm + mp_fwd_comm time (ab's per-rank figures; each
# rank's share, so kinds and streams of different ranks are not added together).
#
#   benchmarks/collective_matmul_figures.sh        PW_SKIP_175B=1 leaves 175B out
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/collective_matmul}
mkdir -p "$out"

plan() {  # plan MICRO_BATCHES [PREFIX] [RECOMPUTE]
  echo "${2:-}append-backward{optimizer=adam},amp{dtype=bf16}${3:+,$3},split-program,schedule{kind=1f1b,micro-batches=$1},insert-p2p"
}

# row NAME A B: one A/B, summarised as a table row.
row() {
  local name=$1 module=$2 a=$3 b=$4
  "$pw" ab "$module" -a "$a" -b "$b" --sim --device h100 --json "$out/$name.json" >"$out/$name.txt"
  python3 - "$name" "$out/$name.json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
sim = json.load(open(path))["sim"]
def share(r):
    e = r["exposed_comm_ms"]; b = r["busy_ms_by_stream"]
    exposed = e["mp_forward"] + e["mp_backward"] + e["sp_forward"] + e["sp_backward"]
    busy = b["mp_comm"] + b.get("mp_fwd_comm", 0)
    return exposed, 100 * exposed / busy if busy else 0
def tp(plan):  # the rank whose exposed share is largest
    return max((share(r) for r in plan["ranks"]), key=lambda x: x[1])
ea, pa = tp(sim["a"]); eb, pb = tp(sim["b"])
fits = lambda p: "" if p.get("fits", True) else " (does not fit)"
print(f"| {name} | {ea:.1f} ms ({pa:.1f} %) | {eb:.1f} ms ({pb:.1f} %) | "
      f"{sim['a']['step_time_ms']:.1f} | {sim['b']['step_time_ms']:.1f} | "
      f"{sim['b']['step_time_ms'] / sim['a']['step_time_ms']:.3f} | "
      f"{sim['a']['max_peak_bytes'] / 2**30:.2f}{fits(sim['a'])} | "
      f"{sim['b']['max_peak_bytes'] / 2**30:.2f}{fits(sim['b'])} |")
PY
}

# NAME:BUILD-MODEL FLAGS:MICRO-BATCHES[:RECOMPUTE]. 175B recomputes selectively, as
# Megatron-LM ran it (Korthikanti et al. 2022): without, overlap-1f1b's earlier forwards hold
# 91 GiB a rank, more than an H100 has.
shapes=("gpt_6.7b:--layers 32 --hidden 4096 --heads 32 --ffn 16384 --mp 2 --pp 4:16"
  "gpt_13b:--layers 40 --hidden 5120 --heads 40 --ffn 20480 --mp 4 --pp 4:16")
[[ -z ${PW_SKIP_175B:-} ]] &&
  shapes+=("gpt_175b:--layers 96 --hidden 12288 --heads 96 --ffn 49152 --mp 8 --pp 16:64:recompute{policy=selective}")
echo "| plan | exposed TP A | exposed TP B | step A ms | step B ms | B/A | peak A GiB | peak B GiB |"
echo "|---|---|---|---|---|---|---|---|"
for shape in "${shapes[@]}"; do
  IFS=: read -r name args mb recompute <<<"$shape"
  module=$out/$name.pb
  "$pw" build-model gpt $args --seq 2048 --vocab 51200 --micro-batch-size 1 -o "$module" >/dev/null
  tail="overlap-column-parallel-backward,defer-weight-grads,overlap-1f1b,insert-events"
  p=$(plan "$mb" "" "$recompute")
  row "$name" "$module" "$p,assign-streams,insert-events" "$p,assign-streams,$tail"
  p=$(plan "$mb" "sequence-parallel," "$recompute")
  row "${name}_sp" "$module" "$p,assign-streams,insert-events" \
    "$p,assign-streams,overlap-collective-matmul,$tail"
  row "${name}_sp_cm_alone" "$module" "$p,assign-streams,insert-events" \
    "$p,assign-streams,overlap-collective-matmul,insert-events"
  row "${name}_sp_no_defer" "$module" "$p,assign-streams,insert-events" \
    "$p,assign-streams,overlap-collective-matmul,${tail/defer-weight-grads,/}"
done
