#!/usr/bin/env bash
# The distributed optimizer's communication on a slow link: the medium GPT (8 layers, hidden
# 512, 8 heads, ffn 2048, seq 128, vocab 1024, micro-batch 4: 100.5 MiB of f32 parameters)
# at dp 2 on two hosts of the multi-host test bed (scripts/netns_cluster.sh: network
# namespaces, tbf-shaped links, a Redis store), Adam, 1f1b over 4 micro-batches per replica.
#   A  distributed-optimizer,assign-streams,overlap-grad-reduce,insert-events: the
#      reduce-scatters during the backward, the parameter all-gathers after the updates
#   B  A with overlap-param-gather{at=next-step}: the all-gathers at the next step's start,
#      under its forward
# compared with `pipeweave ab --sim --run` (the ranks on the test bed's hosts), the
# simulation priced with a profile taken on that link. Sets up the test bed and takes it
# down on every exit path. Needs root (or CAP_NET_ADMIN), iproute2 and redis-server.
#
#   benchmarks/link_zero.sh [ROUNDS (4)] [STEPS (4)]
#
#   PW_LINK_RATE  the links' rate (1gbit)
#   PW_TOOL       the pipeweave binary (build/tools/pipeweave)
#   PW_OUT        the output folder (out/link_zero): plans, the profile, the A/B's table
#                 and JSON
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/link_zero}
rounds=${1:-4}
steps=${2:-4}
rate=${PW_LINK_RATE:-1gbit}
cluster=$root/scripts/netns_cluster.sh
name=lzo$(($$ % 999))

"$cluster" check || exit 1
mkdir -p "$out"
trap '"$cluster" down "$name"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
eval "$("$cluster" up 2 --rate "$rate" --name "$name" --port $((20000 + $$ % 20000)))"
prefix="$cluster exec --name $name {host}"

plan="append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p"
a="$plan,distributed-optimizer,assign-streams,overlap-grad-reduce,insert-events"
b="$plan,distributed-optimizer,assign-streams,overlap-grad-reduce,overlap-param-gather{at=next-step},insert-events"

echo "== $(uptime)"
module=$out/medium_dp2.pb
"$pw" build-model gpt --layers 8 --hidden 512 --heads 8 --ffn 2048 --seq 128 --vocab 1024 \
  --micro-batch-size 4 --dp 2 -o "$module" > /dev/null
"$pw" opt "$module" -p "$a" --device cpu -o "$out/a.pb" > /dev/null
"$pw" opt "$module" -p "$b" --device cpu -o "$out/b.pb" > /dev/null
echo "== profile on the $rate link (ops on this machine, communication between the hosts)"
"$pw" profile "$out/a.pb" "$out/b.pb" --comm --store "$PW_NETNS_STORE" --rank-prefix "$prefix" \
  -o "$out/link_costs.pbtxt" > "$out/profile.log" 2>&1 || { cat "$out/profile.log" >&2; exit 1; }
grep -E "^(all_gather|reduce_scatter|  all_gather of|  reduce_scatter of|profiled)" "$out/profile.log" || true
echo "== A vs B on $rate, $rounds rounds x $steps steps ($(uptime | sed 's/.*load/load/'))"
"$pw" ab "$module" -a "$a" -b "$b" --device cpu --costs "$out/link_costs.pbtxt" --sim --run \
  --nproc 2 --steps "$steps" --rounds "$rounds" --loss-tolerance 0 --store "$PW_NETNS_STORE" \
  --rank-prefix "$prefix" -o "$out/ab.txt" --json "$out/ab.json"
cat "$out/ab.txt"
echo "== $(uptime)"
