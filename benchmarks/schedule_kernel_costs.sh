#!/usr/bin/env bash
# What one op costs depends on the schedule around it, measured: the small GPT at mp 2 x
# pp 2 (the demo's plans: 4 layers, hidden 64, 8 micro-batches) scheduled 1f1b and fthenb,
# each profiled inside its own run (`profile --in-run`, its ranks as threads, every kernel's
# thread CPU time), the two alternated round by round. The same ops, shapes and count;
# what differs is what the schedule keeps alive between them (fthenb holds every
# micro-batch's activations until its backward). The simulator prices both from one
# table, so their ratio here is what it cannot see.
#
#   benchmarks/schedule_kernel_costs.sh [ROUNDS (6)]
#
# Prints per round the kernels' CPU per step of each schedule, then per op type the mean
# over rounds and the ratio fthenb / 1f1b. PW_TOOL names the pipeweave binary. About a
# minute with 6 rounds on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
rounds=${1:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --seed 1 --mp 2 --pp 2 -o "$work/gpt.pbtxt" >/dev/null
for kind in 1f1b fthenb; do
  "$pw" opt "$work/gpt.pbtxt" -o "$work/$kind.pb" \
    -p "append-backward{optimizer=adam,lr=0.01},split-program,schedule{kind=$kind,micro-batches=8},insert-p2p" \
    >/dev/null
done
for ((r = 1; r <= rounds; r++)); do
  for kind in 1f1b fthenb; do
    "$pw" profile "$work/$kind.pb" -o "$work/${kind}_$r.pbtxt" --in-run --no-calibrate \
      >/dev/null 2>&1
  done
done

python3 - "$work" "$rounds" <<'EOF'
import re, statistics, sys

work, rounds = sys.argv[1], int(sys.argv[2])
STEPS = 6  # profile --in-run's timed steps

def by_type(path):
    """Per op type: the kernels' CPU seconds per step (each entry's mean times its runs)."""
    text = open(path).read()
    out = {}
    for m in re.finditer(r"entries \{(.*?)\n\}", text, re.S):
        entry = m.group(1)
        cpu = re.search(r"\n  cpu: ([0-9.e+-]+)", entry)
        repeats = re.search(r"repeats: (\d+)", entry)
        kind = re.search(r'op_type: "(\w+)"', entry).group(1)
        if cpu and repeats:
            out[kind] = out.get(kind, 0) + float(cpu.group(1)) * int(repeats.group(1)) / STEPS
    return out

tables = {k: [by_type(f"{work}/{k}_{r}.pbtxt") for r in range(1, rounds + 1)]
          for k in ("1f1b", "fthenb")}
ratios = []
print("round   1f1b ms   fthenb ms   fthenb/1f1b   (kernels' CPU per step, 4 ranks)")
for r in range(rounds):
    a, b = sum(tables["1f1b"][r].values()), sum(tables["fthenb"][r].values())
    ratios.append(b / a)
    print(f"{r + 1:5d} {a * 1e3:9.2f} {b * 1e3:11.2f} {b / a:13.3f}")
print(f"median ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, "
      f"max {max(ratios):.3f})")
mean = {k: {t: sum(d.get(t, 0) for d in tables[k]) / rounds for t in tables[k][0]}
        for k in tables}
print(f"\n{'op type':26s} {'1f1b ms':>9s} {'fthenb ms':>10s} {'ratio':>7s}")
for t in sorted(mean["1f1b"], key=lambda t: -mean["1f1b"][t])[:15]:
    a, b = mean["1f1b"][t], mean["fthenb"].get(t, 0)
    print(f"{t:26s} {a * 1e3:9.3f} {b * 1e3:10.3f} {b / a:7.2f}")
EOF
