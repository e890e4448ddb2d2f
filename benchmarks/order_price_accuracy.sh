#!/usr/bin/env bash
# How well the simulator prices the order of a rank's jobs on this CPU for schedules its cost
# table did not run. On a CPU the order moves what the executor's ops cost (fthenb's backward
# reads each activation long after writing it: benchmarks/schedule_kernel_costs.sh), and a
# table profiled in runs of 1f1b and fthenb plans (profile A.pb B.pb --in-run) prices every
# other order by what its ops find beyond the cache the profile chose, at the price it fitted
# (cost_model/stale_price.h). Every round profiles the small GPT's 1f1b and fthenb plans
# together, then for each target plan predicts its step over its 1f1b sibling's (the same
# mesh and micro-batches) with the table as written and with its price taken out, and runs
# both (alternated): B/A predicted with the price, without it, and measured, per target the
# median over the rounds.
#
#   benchmarks/order_price_accuracy.sh [ROUNDS (3)] [STEPS (30)]
#
# Each round measures each pair PW_PAIRS times (4), alternated, STEPS steps a run: on a
# shared VM one run of each swings B/A by +-10 %.
#
# pp 1 (one rank on one core, one kernel thread: no pipeline, no communication): fthenb over
# 4 and 16 micro-batches (the table ran 8), and two orders no schedule kind makes (given as
# schedule CSVs): forwards and backwards two and four micro-batches at a time. pp 2 (two rank
# processes): zb-h1 and interleaved 1f1b (two virtual stages a rank), and fthenb (which the
# table ran: its own entries). PW_CORE picks the core of the pp 1 runs (1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
rounds=${1:-3}
steps=${2:-30}
pairs=${PW_PAIRS:-4}
core=${PW_CORE:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

shape="--layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 --micro-batch-size 2 --seed 1"
train="append-backward{optimizer=adam,lr=0.01}"
plan() {  # NAME MESH SPLIT SCHEDULE
  # shellcheck disable=SC2086
  "$pw" build-model gpt $shape $2 -o "$work/$1.pbtxt" >/dev/null
  "$pw" opt "$work/$1.pbtxt" -p "$train,split-program$3,schedule{$4},insert-p2p" \
    -o "$work/$1.pb" >/dev/null
}
# One rank's order over 8 micro-batches, K forwards then their K backwards at a time.
groups_csv() {
  python3 -c "
k = $1
order = []
for g in range(8 // k):
    order += ['0F%d' % (g * k + i) for i in range(k)] + ['0B%d' % (g * k + k - 1 - i) for i in range(k)]
print(','.join(order))" >"$work/groups$1.csv"
}
for m in 4 8 16; do
  for kind in 1f1b fthenb; do plan "pp1_${kind}_m$m" "--mp 1 --pp 1" "" "kind=$kind,micro-batches=$m"; done
done
for k in 2 4; do
  groups_csv $k
  plan "pp1_groups${k}_m8" "--mp 1 --pp 1" "" "kind=csv,file=$work/groups$k.csv,micro-batches=8"
done
for kind in 1f1b fthenb; do plan "pp2_$kind" "--mp 1 --pp 2" "" "kind=$kind,micro-batches=8"; done
plan pp2_zb-h1 "--mp 1 --pp 2" "{split-backward=true}" "kind=zb-h1,micro-batches=8"
plan pp2_interleaved "--mp 1 --pp 2 --vpp 2" "" "kind=interleaved-1f1b,micro-batches=8"

# TARGET  BASELINE  (the pp 1 ones on one core)
targets=(
  "pp1_fthenb_m4 pp1_1f1b_m4"
  "pp1_fthenb_m16 pp1_1f1b_m16"
  "pp1_groups2_m8 pp1_1f1b_m8"
  "pp1_groups4_m8 pp1_1f1b_m8"
  "pp2_fthenb pp2_1f1b"
  "pp2_zb-h1 pp2_1f1b"
  "pp2_interleaved pp2_1f1b"
)
step_times() {  # the step times of a --report json line, after the first
  python3 -c '
import json, sys
line = [l for l in sys.stdin if l.startswith("{")][-1]
print(" ".join(str(t) for t in json.loads(line)["step_time_ms"][1:]))'
}
sim_ms() {  # PLAN COSTS: the pp 1 plans run on one kernel thread, the pp 2 ones as run picks
  local threads=()
  [[ $1 == pp1_* ]] && threads=(--threads 1)
  "$pw" sim "$work/$1.pb" --costs "$2" "${threads[@]}" --steps 3 --format json 2>/dev/null |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("steady_step_time_ms", d["step_time_ms"]))'
}
run_steps() {
  if [[ $1 == pp1_* ]]; then
    OPENBLAS_NUM_THREADS=1 taskset -c "$core" "$pw" run "$work/$1.pb" --nproc 1 --threads 1 \
      --steps "$steps" --report json | step_times
  else
    "$pw" run "$work/$1.pb" --nproc 2 --steps "$steps" --report json | step_times
  fi
}
# B/A measured: PAIRS runs of each, alternated (A, B, A, B, ...), their steps pooled; the
# ratio of the medians.
measure() {
  local a=() b=()
  for ((p = 0; p < pairs; p++)); do
    read -ra more <<<"$(run_steps "$1")" && a+=("${more[@]}")
    read -ra more <<<"$(run_steps "$2")" && b+=("${more[@]}")
  done
  printf '%s\n%s\n' "${a[*]}" "${b[*]}" | python3 -c '
import statistics, sys
a, b = ([float(t) for t in line.split()] for line in sys.stdin)
print(f"{statistics.median(b) / statistics.median(a):.4f}")'
}
ratio() { python3 -c "print(f'{$1 / $2:.4f}')"; }

results=$work/results.txt
for ((r = 1; r <= rounds; r++)); do
  for mesh in pp1 pp2; do
    costs=$work/${mesh}_costs.pbtxt
    if [[ $mesh == pp1 ]]; then
      OPENBLAS_NUM_THREADS=1 taskset -c "$core" "$pw" profile "$work/pp1_1f1b_m8.pb" \
        "$work/pp1_fthenb_m8.pb" -o "$costs" --in-run --in-run-steps 30 --no-calibrate \
        --threads 1 2>"$work/profile.log" >/dev/null
    else
      "$pw" profile "$work/pp2_1f1b.pb" "$work/pp2_fthenb.pb" -o "$costs" --in-run \
        --in-run-steps 30 --comm 2>"$work/profile.log" >/dev/null
    fi
    echo "round $r, $mesh: $(grep -E '^memory beyond' "$work/profile.log" | cut -c1-110)" >&2
    grep -v '^stale_price: ' "$costs" >"$work/${mesh}_unpriced.pbtxt"
    for t in "${targets[@]}"; do
      read -r target base <<<"$t"
      [[ $target == ${mesh}_* ]] || continue
      priced=$(ratio "$(sim_ms "$target" "$costs")" "$(sim_ms "$base" "$costs")")
      unpriced=$(ratio "$(sim_ms "$target" "$work/${mesh}_unpriced.pbtxt")" \
        "$(sim_ms "$base" "$work/${mesh}_unpriced.pbtxt")")
      echo "$target $priced $unpriced $(measure "$base" "$target")" | tee -a "$results" >&2
    done
  done
done

python3 - "$results" <<'EOF'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, priced, unpriced, measured = line.split()
    rows[name].append((float(priced), float(unpriced), float(measured)))
print(f"{'target (B/A over 1f1b)':<24} {'priced':>8} {'unpriced':>9} {'measured':>9} "
      f"{'error priced':>13} {'unpriced':>9}   measured per round")
for name, rs in rows.items():
    p, u, m = (statistics.median(r[i] for r in rs) for i in range(3))
    print(f"{name:<24} {p:8.3f} {u:9.3f} {m:9.3f} {100 * (p - m) / m:+12.1f}% "
          f"{100 * (u - m) / m:+8.1f}%   " + " ".join(f"{r[2]:.3f}" for r in rs))
EOF
