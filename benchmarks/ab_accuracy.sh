#!/usr/bin/env bash
# Does the simulator rank plans as runs do? For the small GPT (4 layers, hidden 64, mp 2 x
# pp 2, 8 micro-batches) on 4 rank processes, plan A (1f1b) against each plan B of `pairs`
# below: `pipeweave ab --sim --run` prints the simulated B/A beside the measured one (A and
# B alternate round by round, so a change in the machine's speed moves both: the ratio
# holds where absolute step times swing with the VM's spells). Each pair's cost table is
# profiled from runs of A alone (profile --comm --in-run), as a user who has A running asks
# whether B would be faster: B's figure is a prediction, never a measurement of B.
#
# The VM this runs on changes speed for minutes at a time (1.4-1.6x: machine_steadiness.py),
# and the ratio of two plans with it (the overlap plan against 1f1b: 1.02 with A at 15.4 ms,
# 1.11-1.14 with A at 10.6-13.6 ms). A profile taken in one state predicts that state's ratio, so a
# pair is judged only where its profile and its runs saw one machine: the simulated A within
# 10 % of the measured A. Otherwise the pair is profiled and run again, up to PW_TRIES times
# (default 3); the row says how many it took, and a pair whose every try disagreed counts as
# not judged (and as a miss).
#
# Prints a row per pair (simulated B/A, measured B/A with its 95 % interval, whether the
# simulated ratio is inside, and whether both call the same plan faster) and exits non-zero
# unless every simulated ratio is inside its interval (issue 22: `ab --sim` B/A inside
# `ab --run`'s 95 % interval).
#
#   benchmarks/ab_accuracy.sh [ROUNDS (10)] [STEPS (12)]
#
#   PW_PAIRS   a regular expression: the pairs to run (default: all)
#   PW_TRIES   profiles and runs of a pair at most, until the two saw one machine (3)
#   PW_TOOL, PW_OUT  the pipeweave binary (build/tools/pipeweave) and the output folder
#                    (out/ab_accuracy: each pair's table, report and JSON)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/ab_accuracy}
rounds=${1:-10}
steps=${2:-12}
only=${PW_PAIRS:-.}
tries=${PW_TRIES:-3}
mkdir -p "$out"

train="append-backward{optimizer=adam,lr=0.01}"
mb=8
schedule() { echo "schedule{kind=$1,micro-batches=$mb},insert-p2p"; }
a="$train,split-program,$(schedule 1f1b)"
# NAME|PIPELINE OF B
pairs=(
  "fthenb|$train,split-program,$(schedule fthenb)"
  "eager-1f1b|$train,split-program,$(schedule eager-1f1b)"
  "zb-h1|$train,split-program{split-backward=true},$(schedule zb-h1)"
  "overlap|$a,assign-streams,overlap-column-parallel-backward,insert-events"
  "overlap-1f1b|$a,assign-streams,overlap-column-parallel-backward,overlap-1f1b,insert-events"
)

module=$out/gpt_small.pbtxt
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --mp 2 --pp 2 --seed 1 -o "$module" >/dev/null
"$pw" opt "$module" -p "$a" -o "$out/a.pb" >/dev/null
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$root/benchmarks/machine_steadiness.py" --tool "$pw" >&2

rows=()
for pair in "${pairs[@]}"; do
  name=${pair%%|*} b=${pair#*|}
  [[ $name =~ $only ]] || continue
  costs=$out/${name}_costs.pbtxt
  for ((try = 1; try <= tries; try++)); do
    "$pw" profile "$out/a.pb" -o "$costs" --comm --comm-steps 24 --in-run \
      >"$out/${name}_profile.log" 2>&1
    "$pw" ab "$module" -a "$a" -b "$b" --sim --costs "$costs" --run --nproc 4 \
      --rounds "$rounds" --steps "$steps" -o "$out/$name.txt" --json "$out/$name.json"
    judged=1
    agreement=$("$root/benchmarks/one_machine.py" --ab "$out/$name.json") || judged=0
    echo "$name, try $try: B/A $(grep '^step time ' "$out/$name.txt" | tail -1 | tr -s ' ' |
      cut -d' ' -f3-); A $agreement; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    ((judged)) && break
  done
  rows+=("$name $out/$name.json $((try > tries ? tries : try)) $judged")
done

echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$root/benchmarks/machine_steadiness.py" --tool "$pw"
printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys
print("%-13s %16s %10s %10s %17s %7s %6s %6s" % ("B (A: 1f1b)", "A ms: sim/meas", "B/A: sim",
      "measured", "95 % interval", "inside", "same", "tries"))
inside_count, rows = 0, [l.split() for l in sys.stdin if l.strip()]
for name, path, tries, judged in rows:
    report = json.load(open(path))
    sim = report["sim"]["ratio"]["step_time_ms"]
    run = report["run"]["ratio"]
    lo, hi = run["ci95"]
    a_sim, a_run = report["sim"]["a"]["step_time_ms"], report["run"]["a"]["median_step_ms"]
    judged = judged == "1"  # profile and runs saw one machine (one_machine.py)
    inside = judged and lo <= sim <= hi
    inside_count += inside
    # Both call B faster, both slower, or the interval holds 1 (no difference found).
    measured_side = "faster" if hi < 1 else "slower" if lo > 1 else "either"
    same = measured_side == "either" or (sim < 1) == (measured_side == "faster")
    print("%-13s %16s %10.3f %10.3f %17s %7s %6s %6s" % (name, "%.2f/%.2f" % (a_sim, a_run), sim,
          run["median_step_ms"], "[%.3f, %.3f]" % (lo, hi),
          ("yes" if inside else "no") if judged else "-", "yes" if same else "no", tries))
print("%d of %d simulated ratios inside the measured 95 %% interval (target: all; -: not "
      "judged, the profile and the runs saw the machine at speeds over 10 %% apart)"
      % (inside_count, len(rows)))
sys.exit(0 if inside_count == len(rows) else 1)'
