#!/usr/bin/env bash
# Overlap when the link is the bottleneck: the medium GPT (8 layers, hidden 512, 8 heads,
# ffn 2048, seq 128, vocab 1024, micro-batch 4, mp 2) on two hosts of the multi-host test
# bed (scripts/netns_cluster.sh: network namespaces, tbf-shaped links, a Redis store),
# planned with 1f1b over 4 micro-batches. A is the plain plan; two overlap plans are
# compared with it, each with `pipeweave ab --sim --run` (the ranks on the test bed's
# hosts: --store, --rank-prefix):
#   rows     assign-streams,overlap-column-parallel-backward,overlap-row-split,insert-events
#            (hides the backward all-reduces; the forward ones feed the next op at once)
#   1f1b     assign-streams,overlap-column-parallel-backward,overlap-1f1b,insert-events
#            (B(i) and F(i+1) fused: each one's all-reduces run under the other's compute)
# The simulation prices ops and communication with a profile taken on that link
# (`pipeweave profile --comm --store --rank-prefix`: the measuring run's ranks on the test
# bed's hosts). Sets up the test bed and takes it down on every exit path. Needs root (or
# CAP_NET_ADMIN), iproute2 and redis-server; tbf only (netem is not available here: the
# link has a rate and a queue, no propagation delay).
#
#   benchmarks/link_overlap.sh [ROUNDS (5)] [STEPS (5)]
#
#   PW_LINK_RATE  the links' rate (1gbit)
#   PW_LINK_PLANS which overlap plans (default "rows 1f1b")
#   PW_LINK_DP    data-parallel replicas (1): 2 x DP hosts, the model built with --dp DP and
#                 each overlap plan also reducing the gradients during the backward
#                 (overlap-grad-reduce)
#   PW_TOOL       the pipeweave binary (build/tools/pipeweave)
#   PW_OUT        the output folder (out/link_overlap): plans, the profile, each A/B's
#                 table and JSON
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/link_overlap}
rounds=${1:-5}
steps=${2:-5}
rate=${PW_LINK_RATE:-1gbit}
plans=${PW_LINK_PLANS:-rows 1f1b}
dp=${PW_LINK_DP:-1}
ranks=$((2 * dp))
cluster=$root/scripts/netns_cluster.sh
name=lov$(($$ % 999))

"$cluster" check || exit 1
mkdir -p "$out"
trap '"$cluster" down "$name"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
eval "$("$cluster" up $ranks --rate "$rate" --name "$name" --port $((20000 + $$ % 20000)))"
prefix="$cluster exec --name $name {host}"

plain="append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p"
grad_reduce=""
((dp > 1)) && grad_reduce=",overlap-grad-reduce"
suffix() {
  case $1 in
    rows) echo ",assign-streams$grad_reduce,overlap-column-parallel-backward,overlap-row-split,insert-events" ;;
    1f1b) echo ",assign-streams$grad_reduce,overlap-column-parallel-backward,overlap-1f1b,insert-events" ;;
    *) echo "link_overlap: unknown plan '$1' (rows, 1f1b)" >&2; exit 2 ;;
  esac
}

echo "== $(uptime)"
module=$out/medium.pb
"$pw" build-model gpt --layers 8 --hidden 512 --heads 8 --ffn 2048 --seq 128 --vocab 1024 \
  --micro-batch-size 4 --mp 2 --dp "$dp" -o "$module" > /dev/null
# The plans to profile: every op and collective size the A/Bs run. The passes that cut
# matmuls choose with the CPU spec here; `ab` plans again with the profile below.
profiled=("$out/plain.pb")
"$pw" opt "$module" -p "$plain" --device cpu -o "$out/plain.pb" > /dev/null
for p in $plans; do
  "$pw" opt "$module" -p "$plain$(suffix "$p")" --device cpu -o "$out/$p.pb" > /dev/null
  profiled+=("$out/$p.pb")
done
echo "== profile on the $rate link (ops on this machine, communication between the hosts)"
"$pw" profile "${profiled[@]}" --comm --store "$PW_NETNS_STORE" --rank-prefix "$prefix" \
  -o "$out/link_costs.pbtxt" > "$out/profile.log" 2>&1 || { cat "$out/profile.log" >&2; exit 1; }
grep -E "^(all_reduce|  all_reduce of|profiled)" "$out/profile.log"
# The overlap plans again, their cuts chosen with the link's prices (as `ab` plans them).
for p in $plans; do
  "$pw" opt "$module" -p "$plain$(suffix "$p")" --device cpu --costs "$out/link_costs.pbtxt" \
    -o "$out/$p.pb" > /dev/null
done

# trace PLAN_FILE TAG: a 5-step run of the plan on the hosts with --trace (the fourth step:
# the second, traced before, still met first-touch page faults of 20 ms in an op) and
# --trace-cpu (each op's thread CPU time beside its wall time: an op slowed by the threads it
# shares the cores with; two clock reads an instruction cost nothing against this model's
# millisecond ops); prints, from rank 0's traced step, each stream's time in compute ops, in
# collectives (the wire, and the peer's lateness) and in waits for another stream (the compute
# stream's waits by the program they hold up): where the wire costs compute.
trace() {
  local plan=$1 tag=$2 r pids=()
  mkdir -p "$out/trace_$tag"
  for ((r = 0; r < ranks; ++r)); do
    local addr_var=PW_NETNS_ADDR_$((r + 1))
    "$cluster" exec --name "$name" $((r + 1)) "$pw" run-parallel "$plan" --rank $r --world-size $ranks \
      --store "$PW_NETNS_STORE/trace-$tag" --hostname "${!addr_var}" --threads 1 --steps 5 \
      --warmup-steps 0 --trace "$out/trace_$tag" --trace-cpu > "$out/trace_$tag.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < ranks; ++r)); do wait "${pids[r]}" || { echo "trace $tag: rank $r failed" >&2; exit 1; }; done
  python3 - "$out/trace_$tag/rank0.trace.json" "$tag" << 'PY'
import collections, json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
spans = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])
busy, comm, wait, held = (collections.Counter() for _ in range(4))
collectives = ("c_allreduce", "c_all_gather", "c_reduce_scatter")
for i, e in enumerate(spans):
    kind = wait if e["name"] == "wait" else comm if e["name"].startswith(collectives) else busy
    kind[e["tid"]] += e["dur"] / 1e3
    if e["name"] == "wait" and names.get(e["tid"]) == "compute":
        after = next((n for n in spans[i + 1:] if n["tid"] == e["tid"]), None)
        where = after["args"].get("where", "") if after else ""
        held["backward" if "backward" in where else "forward" if "forward" in where else "other"] += e["dur"] / 1e3
step = (max(e["ts"] + e["dur"] for e in spans) - spans[0]["ts"]) / 1e3
print(f"{sys.argv[2]}: step {step:.0f} ms (rank 0, last step)")
for tid in sorted(busy.keys() | comm.keys() | wait.keys()):
    print(f"  {names.get(tid, tid):12s} compute {busy[tid]:7.1f} ms  collectives {comm[tid]:7.1f} ms"
          f"  waiting {wait[tid]:7.1f} ms")
print("  compute waits by program: " + ", ".join(f"{k} {v:.1f} ms" for k, v in sorted(held.items())))
PY
}
echo "== per-stream traces on the $rate link ($(uptime | sed 's/.*load/load/'))"
trace "$out/plain.pb" plain
for p in $plans; do trace "$out/$p.pb" "$p"; done

for p in $plans; do
  echo "== plain vs $p on $rate, $rounds rounds x $steps steps ($(uptime | sed 's/.*load/load/'))"
  "$pw" ab "$module" -a "$plain" -b "$plain$(suffix "$p")" --device cpu \
    --costs "$out/link_costs.pbtxt" --sim --run --nproc $ranks --steps "$steps" --rounds "$rounds" \
    --store "$PW_NETNS_STORE" --rank-prefix "$prefix" -o "$out/ab_$p.txt" --json "$out/ab_$p.json"
  cat "$out/ab_$p.txt"
done
echo "== $(uptime)"
