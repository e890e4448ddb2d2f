#!/usr/bin/env bash
# `pipeweave ab` end to end on the small GPT (mp 2 x pp 2):
#   ab_cli_test.sh PIPEWEAVE MODULE WORK_DIR sim|run
# sim: A == B simulates to ratios of 1, the JSON has its stable keys, the table, -o, --json
#      and the stacked SVG are written.
# run: fthenb against 1f1b on 4 rank processes, 2 rounds x 2 steps: bit-identical losses
#      and parameters, a verdict, and the simulated and measured ratios side by side.
set -u
pw=$1
module=$2
work=$3
mode=$4
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(cat "$1")"; }

plan() { echo "append-backward{optimizer=adam},split-program,schedule{kind=$1,micro-batches=4},insert-p2p"; }

if [[ $mode == sim ]]; then
  rm -f "$work/same.json" "$work/same.svg" "$work/table.txt"
  "$pw" ab "$module" -a "$(plan 1f1b)" -b "$(plan 1f1b)" --sim --format json \
    -o "$work/same.json" --svg "$work/same.svg" || fail "ab --sim exited $?"
  f=$work/same.json
  for key in '"module": ' '"pipelines": {"a": ' '"sim": {"device": "cpu"' '"a": {"step_time_ms": ' \
    '"b": {"step_time_ms": ' '"bubble_rate": ' '"exposed_comm_ms": {"total": ' '"mp_forward": ' \
    '"mp_backward": ' '"pp_send": ' '"pp_recv": ' '"dp": ' '"busy_ms_by_stream": {"compute": ' \
    '"mp_comm": ' '"dp_comm": ' '"peak_bytes": [' '"max_peak_bytes": '; do
    has "$f" "$key"
  done
  has "$f" '"ratio": {"step_time_ms": 1, "bubble_rate": 1, "exposed_comm_ms": {"total": 1, '
  has "$f" '"peak_bytes": [1, 1, 1, 1], "max_peak_bytes": 1, "cpu_ms_per_step": 1}'
  # Each plan's figures per rank: four ranks, each with its exposed and busy times.
  python3 - "$f" <<'PY' || fail "per-rank figures missing or malformed in $f"
import json, sys
sim = json.load(open(sys.argv[1]))["sim"]
for side in ("a", "b"):
    ranks = sim[side]["ranks"]
    assert len(ranks) == 4, len(ranks)
    for r in ranks:
        assert r["busy_ms_by_stream"]["compute"] > 0 and "mp_forward" in r["exposed_comm_ms"]
    worst = max(r["busy_ms_by_stream"]["compute"] for r in ranks)
    assert abs(worst - sim[side]["busy_ms_by_stream"]["compute"]) < 1e-9 * max(1, worst)
assert "ranks" not in sim["ratio"]
PY
  grep -qF '"run"' "$f" && fail "a --sim report has a run object"
  [[ $(grep -c '<svg' "$work/same.svg") == 3 ]] || fail "the SVG does not nest two drawings"

  rm -f "$work/table.json"
  "$pw" ab "$module" -a "$(plan fthenb)" -b "$(plan 1f1b)" --sim --json "$work/table.json" \
    >"$work/table.txt" || fail "ab --sim (table) exited $?"
  has "$work/table.json" '"sim": {"device": "cpu", "a": {"step_time_ms": '
  for row in 'simulated on cpu' 'step time ms' 'bubble rate %' 'exposed comm ms (worst)' \
    '  mp_backward' 'busy compute ms (worst)' 'peak MiB rank 3' 'CPU ms a step (all ranks)'; do
    has "$work/table.txt" "$row"
  done
  echo "ok: ab --sim"
  exit 0
fi

rm -f "$work/run.json" "$work/run.txt"
"$pw" ab "$module" -a "$(plan fthenb)" -b "$(plan 1f1b)" --sim --run --nproc 4 --rounds 2 \
  --steps 2 --format json -o "$work/run.json" || fail "ab --sim --run exited $?"
f=$work/run.json
for key in '"run": {"nproc": 4, "rounds": 2, "steps_per_round": 2, "warmup_steps_per_round": 1' \
  '"a": {"median_step_ms": ' '"b": {"median_step_ms": ' '"step_ms": [[' '"losses": [[' \
  '"ratio": {"median_step_ms": ' '"ci95": [' '"verdict": ' '"median_step_cpu_ms": ' \
  '"step_cpu_ms": [[' '"cpu_ci95": [' \
  '"losses": {"bit_identical": true, "max_rel_diff": 0, "tolerance": 1e-06, "compared": 4}' \
  '"params": {"bit_identical": true, "max_rel_diff": 0, "tensors": ' '"sim": {"device": '; do
  has "$f" "$key"
done

"$pw" ab "$module" -a "$(plan fthenb)" -b "$(plan 1f1b)" --sim --run --nproc 4 --rounds 2 \
  --steps 2 >"$work/run.txt" || fail "ab --sim --run (table) exited $?"
for row in 'measured on 4 rank processes (cpu), 2 rounds x 2 steps per plan' \
  'dropped as warm-up: 2 timed steps per plan' 'median step ms' 'verdict: ' \
  'losses: bit-identical (4 steps compared)' 'parameters: bit-identical' 'simulated' \
  'measured'; do
  has "$work/run.txt" "$row"
done
grep -qE '^step time +[0-9.]+ +[0-9.]+   \[[0-9.]+, [0-9.]+\]$' "$work/run.txt" ||
  fail "no side-by-side step time row: $(cat "$work/run.txt")"
# Each plan's steps burn CPU in the rank processes; simulated beside measured.
grep -qE '^median CPU ms a step +[0-9.]+ +[0-9.]+ +[0-9.]+   \[[0-9.]+, [0-9.]+\]$' \
  "$work/run.txt" || fail "no measured CPU row: $(cat "$work/run.txt")"
grep -qE '^CPU a step \(all ranks\) +[0-9.]+ +[0-9.]+   \[[0-9.]+, [0-9.]+\]$' "$work/run.txt" ||
  fail "no side-by-side CPU row: $(cat "$work/run.txt")"
echo "ok: ab --run"
