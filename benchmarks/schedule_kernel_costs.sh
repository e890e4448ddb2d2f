#!/usr/bin/env bash
# Does what one op costs depend on the schedule around it? The small GPT at mp 2 x pp 2 (the
# demo's plans: 4 layers, hidden 64, 8 micro-batches by default) scheduled 1f1b and fthenb: the same
# ops, shapes and count; what differs is what the schedule keeps alive between them
# (fthenb holds every micro-batch's activations until its backward). The simulator prices
# both from one table. Measured two ways each round, the schedules alternated:
#   - as `profile --in-run` measures them: the plan's ranks as threads of one process,
#     every kernel's thread CPU time over 6 steps (what the table holds);
#   - as `run` runs them: 4 rank processes, one traced step (`run --trace --trace-cpu`),
#     every kernel instruction's thread CPU time;
#   - as `run` runs them untraced but for the instructions' clock (`run --trace` without
#     --trace-cpu, whose two system calls an instruction change what is measured): each
#     rank's jobs (a micro-batch's forward F, backward B; the optimizer OPT), the median
#     over micro-batches of a job's span.
# A ratio above 1 in both would be the schedule's; in the first alone, the profile's.
#
#   benchmarks/schedule_kernel_costs.sh [ROUNDS (6)]
#
# Prints per round the kernels' CPU per step of each schedule both ways, the median ratios
# fthenb / 1f1b, where the runs' traced steps went (span, kernels and all-reduces on the
# compute stream, wall and CPU), the jobs' spans of the plain traced runs, then per op
# type the means of the in-run profiles. PW_MP and PW_PP (2 and 2) give the mesh (PW_MP=1:
# the pipeline alone, one rank process per core), PW_MB the micro-batches (8). PW_TOOL names
# the pipeweave binary. About 2 minutes with 6 rounds on 2 cores.
#
# With neither pipeline nor tensor parallelism the schedules are two orders of one rank's
# jobs (1f1b: F0 B0 F1 B1 ...; fthenb: every F, then every B), with no transfer, wait or
# core shared between ranks: what is left is the order alone. On one core, one kernel thread:
#   PW_MP=1 PW_PP=1 OPENBLAS_NUM_THREADS=1 taskset -c 1 benchmarks/schedule_kernel_costs.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
rounds=${1:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mp=${PW_MP:-2}
pp=${PW_PP:-2}
nproc=$((mp * pp))
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --seed 1 --mp "$mp" --pp "$pp" -o "$work/gpt.pbtxt" >/dev/null
mb=${PW_MB:-8}
for kind in 1f1b fthenb; do
  "$pw" opt "$work/gpt.pbtxt" -o "$work/$kind.pb" \
    -p "append-backward{optimizer=adam,lr=0.01},split-program,schedule{kind=$kind,micro-batches=$mb},insert-p2p" \
    >/dev/null
done
for ((r = 1; r <= rounds; r++)); do
  for kind in 1f1b fthenb; do
    "$pw" profile "$work/$kind.pb" -o "$work/${kind}_$r.pbtxt" --in-run --no-calibrate \
      >/dev/null 2>&1
    "$pw" run "$work/$kind.pb" --nproc "$nproc" --steps 4 --trace "$work/${kind}_trace_$r" \
      --trace-cpu >/dev/null 2>&1
    "$pw" run "$work/$kind.pb" --nproc "$nproc" --steps 4 --trace "$work/${kind}_plain_$r" \
      >/dev/null 2>&1
  done
done

python3 - "$work" "$rounds" "$nproc" "$root/scripts" <<'EOF'
import glob, re, statistics, sys

work, rounds, nproc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
import compare_traces  # noqa: E402  (events, job_times: a trace's slices and jobs)
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

COLLECTIVES = ("c_allreduce", "c_all_gather", "c_reduce_scatter")

def traced(folder):
    """The traced step over every rank, seconds: its span (mean over ranks), and the compute
    stream's kernels and collectives, wall and thread CPU."""
    parts = dict(span=0.0, kernels=0.0, kernels_cpu=0.0, collectives=0.0, collectives_cpu=0.0)
    paths = glob.glob(f"{folder}/rank*.trace.json")
    for path in paths:
        done = [e for e in compare_traces.events(path) if e.get("ph") == "X"]
        parts["span"] += (max(e["ts"] + e["dur"] for e in done) -
                          min(e["ts"] for e in done)) * 1e-6 / len(paths)
        for e in done:
            if e.get("cat") != "compute" or e["name"] == "wait":
                continue
            kind = "collectives" if e["name"].startswith(COLLECTIVES) else "kernels"
            parts[kind] += e["dur"] * 1e-6
            parts[kind + "_cpu"] += e.get("args", {}).get("cpu_us", 0.0) * 1e-6
    return parts

tables = {k: [by_type(f"{work}/{k}_{r}.pbtxt") for r in range(1, rounds + 1)]
          for k in ("1f1b", "fthenb")}
runs = {k: [traced(f"{work}/{k}_trace_{r}") for r in range(1, rounds + 1)]
        for k in ("1f1b", "fthenb")}
ratios, run_ratios = [], []
print(f"kernels' CPU per step, {nproc} ranks (ms):")
print(f"         profile --in-run (threads)           run ({nproc} processes, traced)")
print("round   1f1b   fthenb   fthenb/1f1b          1f1b   fthenb   fthenb/1f1b")
for r in range(rounds):
    a, b = sum(tables["1f1b"][r].values()), sum(tables["fthenb"][r].values())
    c, d = runs["1f1b"][r]["kernels_cpu"], runs["fthenb"][r]["kernels_cpu"]
    ratios.append(b / a)
    run_ratios.append(d / c)
    print(f"{r + 1:5d} {a * 1e3:6.2f} {b * 1e3:8.2f} {b / a:13.3f}        "
          f"{c * 1e3:6.2f} {d * 1e3:8.2f} {d / c:13.3f}")
for name, rs in (("profile --in-run", ratios), ("run", run_ratios)):
    print(f"{name:17s} median ratio {statistics.median(rs):.3f} (min {min(rs):.3f}, "
          f"max {max(rs):.3f})")
# Where the traced steps went: with the cores full under both schedules, a longer step is
# time the ranks' threads waited for a core or for each other (the collectives' wall).
print("\nrun, the traced step (ms, medians over rounds; span: mean over ranks, the rest summed "
      f"over the {nproc} ranks)")
print(f"{'':8s} {'span':>7s} {'kernels':>8s} {'(CPU)':>7s} {'all-reduces':>12s} {'(CPU)':>7s}")
for k in ("1f1b", "fthenb"):
    med = {p: statistics.median(run[p] for run in runs[k]) * 1e3 for p in runs[k][0]}
    print(f"{k:8s} {med['span']:7.2f} {med['kernels']:8.2f} {med['kernels_cpu']:7.2f} "
          f"{med['collectives']:12.2f} {med['collectives_cpu']:7.2f}")
# The plain traced runs: each rank's jobs, the median over micro-batches of a job's span in
# each round, then the median over rounds, and fthenb / 1f1b per round's median.
def jobs(folder):
    evs = {int(re.search(r"rank(\d+)", p).group(1)): compare_traces.events(p)
           for p in glob.glob(f"{folder}/rank*.trace.json")}
    return {key: statistics.median(job[1] for job in v)
            for key, v in compare_traces.job_times(evs).items()}

plain = {k: [jobs(f"{work}/{k}_plain_{r}") for r in range(1, rounds + 1)]
         for k in ("1f1b", "fthenb")}
print("\nrun without --trace-cpu, each rank's jobs (us: a job's span, median over micro-batches, "
      "then over rounds)")
print(f"{'rank':>4s} {'job':5s} {'1f1b':>8s} {'fthenb':>8s} {'fthenb/1f1b':>12s}")
for key in sorted(plain["1f1b"][0]):
    a = statistics.median(p[key] for p in plain["1f1b"] if key in p)
    b = statistics.median(p[key] for p in plain["fthenb"] if key in p)
    print(f"{key[0]:4d} {key[1]:5s} {a:8.1f} {b:8.1f} {b / a:12.3f}")
mean = {k: {t: sum(d.get(t, 0) for d in tables[k]) / rounds for t in tables[k][0]}
        for k in tables}
print("\nprofile --in-run, by op type:")
print(f"{'op type':26s} {'1f1b ms':>9s} {'fthenb ms':>10s} {'ratio':>7s}")
for t in sorted(mean["1f1b"], key=lambda t: -mean["1f1b"][t])[:15]:
    a, b = mean["1f1b"][t], mean["fthenb"].get(t, 0)
    print(f"{t:26s} {a * 1e3:9.3f} {b * 1e3:10.3f} {b / a:7.2f}")
EOF
