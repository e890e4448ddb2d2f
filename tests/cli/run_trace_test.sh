#!/usr/bin/env bash
# `pipeweave run-parallel --trace DIR`: one Chrome trace per rank of the step before the last as
# measured, with the tracks (streams) and instructions sim --trace shows.
#   run_trace_test.sh PIPEWEAVE WORK_DIR
set -u
pw=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
"$pw" build-model gpt --layers 2 --hidden 32 --heads 2 --seq 8 --vocab 64 --pp 2 \
  -o "$work/gpt.pbtxt" >/dev/null || fail "build-model"
"$pw" run-parallel "$work/gpt.pbtxt" --nproc 2 --steps 2 --threads 1 --run-dir "$work/run" \
  --pipeline "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p" \
  --trace "$work/trace" --trace-cpu >/dev/null || fail "run-parallel exited $?"
for rank in 0 1; do
  f="$work/trace/rank$rank.trace.json"
  [[ -s $f ]] || fail "no $f"
  python3 - "$f" "$rank" <<'PY' || fail "$f: $(python3 -c 'import sys; print(open(sys.argv[1]).read()[:200])' "$f")"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
rank = int(sys.argv[2])
done = [e for e in events if e.get("ph") == "X" and e.get("cat") != "wait"]
names = {e["name"] for e in done}
assert {"matmul", "send" if rank == 0 else "recv"} <= names, names
assert all(e["pid"] == rank and e["dur"] >= 0 and e["ts"] >= 0 for e in done)
# Each instruction carries its stream thread's CPU time; a matmul spends some.
assert all(e["args"]["cpu_us"] >= 0 for e in done), done[0]
assert any(e["name"] == "matmul" and e["args"]["cpu_us"] > 0 for e in done)
threads = {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
assert "compute" in threads, threads
# A pipeline stream that waited for the compute stream's event names that hand-off.
offs = [e["args"] for e in done if "handoff_us" in e["args"]]
assert offs and all(a["handoff_us"] >= 0 and a["handoff_from"] in threads for a in offs), offs[:3]
PY
done

# The measured step beside the simulated one (scripts/compare_traces.py): every rank, its
# streams with time on both sides, and the op types.
"$pw" sim "$work/gpt.pbtxt" --threads 1 --micro-batches 4 --trace "$work/sim.json" \
  --pipeline "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p" \
  >/dev/null || fail "sim exited $?"
python3 - "$work/sim.json" <<'PY' || fail "no hand-offs in the simulated trace"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
offs = [e["args"] for e in events if e.get("ph") == "X" and "handoff_us" in e.get("args", {})]
assert offs and all(a["handoff_us"] >= 0 for a in offs), offs[:3]
PY
compare=$(dirname "$0")/../../scripts/compare_traces.py
table=$("$compare" "$work/trace" "$work/sim.json") || fail "compare_traces exited $?: $table"
for rank in 0 1; do
  grep -q "^rank $rank: step [0-9.]* ms measured, [0-9.]* ms simulated" <<<"$table" ||
    fail "no rank $rank line: $table"
done
awk '$1 == "compute" && $2 > 0 && $5 > 0 {found = 1} END {exit !found}' <<<"$table" ||
  fail "no compute stream timed on both sides: $table"
grep -Eq '^  matmul +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' <<<"$table" || fail "no matmul row: $table"
# The pipeline's sends wait for the compute stream on both sides: a hand-off row with a
# median and a count measured and simulated.
grep -Eq '^  compute -> pp_send +[0-9.]+ +[0-9.]+ +[1-9][0-9]* +[0-9.]+ +[0-9.]+ +[1-9][0-9]*$' \
  <<<"$table" ||
  fail "no compute -> pp_send hand-off row: $table"
# Without --trace-cpu no instruction reads the thread's CPU clock (a system call each):
# no cpu_us, and the table says so.
"$pw" run-parallel "$work/gpt.pbtxt" --nproc 2 --steps 2 --threads 1 --run-dir "$work/run2" \
  --pipeline "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p" \
  --trace "$work/trace_plain" >/dev/null || fail "run-parallel without --trace-cpu exited $?"
python3 - "$work/trace_plain/rank0.trace.json" <<'PY' || fail "cpu_us without --trace-cpu"
import json, sys
done = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
assert done and not any("cpu_us" in e.get("args", {}) for e in done)
PY
table=$("$compare" "$work/trace_plain" "$work/sim.json") || fail "compare_traces exited $?: $table"
grep -Eq '^  matmul +[0-9.]+ +- +[0-9.]+ +[0-9.]+$' <<<"$table" || fail "no matmul row without CPU: $table"
# A rank's collectives, measured beside simulated (two hand-made traces: one all-reduce of
# 30 and one of 50 us measured, two of 20 us simulated).
mkdir -p "$work/synthetic"
python3 - "$work/synthetic" <<'PY'
import json, sys
meta = [{"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "compute"}}]
def op(name, ts, dur, cat):
    return {"ph": "X", "name": name, "pid": 0, "tid": 0, "cat": cat, "ts": ts, "dur": dur}
measured = meta + [op("matmul", 0, 10, "compute"), op("c_allreduce_sum", 10, 30, "compute"),
                   op("c_allreduce_sum", 40, 50, "compute")]
simulated = meta + [op("matmul", 0, 10, "compute"), op("c_allreduce_sum", 10, 20, "collective"),
                    op("c_allreduce_sum", 30, 20, "collective")]
json.dump({"traceEvents": measured}, open(sys.argv[1] + "/rank0.trace.json", "w"))
json.dump({"traceEvents": simulated}, open(sys.argv[1] + "/sim.json", "w"))
PY
table=$("$compare" "$work/synthetic" "$work/synthetic/sim.json") ||
  fail "compare_traces exited $? on the hand-made traces: $table"
grep -Eq '^ +0 c_allreduce_sum +40\.0 +40\.0 +2 +20\.0 +20\.0 +2$' <<<"$table" ||
  fail "no collective row for rank 0: $table"
mkdir -p "$work/empty"
if err=$("$compare" "$work/empty" "$work/sim.json" 2>&1); then fail "an empty folder compared: $err"; fi
grep -q "no rankR.trace.json" <<<"$err" || fail "unclear error for an empty folder: $err"
echo "traces written and well formed, and compared with the simulated step"
