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
# Each instruction names the plan's job it does, as the simulator's trace does.
jobs = {e["args"]["job"] for e in done}
assert {f"{rank}F0", f"{rank}B3", f"{rank}OPT"} <= jobs, sorted(jobs)
# Where the step began on the host's steady clock, so that the ranks line up.
other = json.load(open(sys.argv[1]))["otherData"]
assert other["clock"] == "steady" and other["step_began_us"] > 0 and other["host"], other
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
# Each rank's forwards and backwards, 4 of each, and its optimizer, on both sides.
for job in F B; do
  grep -Eq "^ +1 +$job +[0-9.]+ +[0-9.]+ +4 +[0-9.]+ +[0-9.]+ +4$" <<<"$table" ||
    fail "no jobs row for rank 1's $job: $table"
done
grep -Eq '^ +0 +OPT +[0-9.]+ +[0-9.]+ +1 +[0-9.]+ +[0-9.]+ +1$' <<<"$table" ||
  fail "no jobs row for rank 0's optimizer: $table"
# The ranks on one clock: when each began its first op, and the transfers (4 activations
# and 4 gradients) from the send to the data on the other side, both measured and simulated.
for rank in 0 1; do
  grep -Eq "^ +$rank +[0-9]+ +[0-9]+$" <<<"$table" || fail "no first-op row for rank $rank: $table"
done
# How many of the 2 ranks computed at once, measured and simulated: shares of the step that
# add up to the whole on each side, and their means.
python3 - <<PY || fail "no ranks-at-once table adding up: $table"
import re
table = """$table"""
rows = re.findall(r"^ +([0-2]) +([0-9.]+)% +([0-9.]+)%$", table.split("ranks inside a compute op at once")[1], re.M)
assert [r[0] for r in rows] == ["0", "1", "2"], rows
for side in (1, 2):
    assert abs(sum(float(r[side]) for r in rows) - 100) < 0.5, rows
mean = re.search(r"^ +mean +([0-9.]+) +([0-9.]+)$", table, re.M)
assert mean and all(0 < float(m) <= 2 for m in mean.groups()), mean
PY
grep -Eq '^  0 -> 1 +F +[0-9.]+ +[0-9.]+ +4 +[0-9.]+ +[0-9.]+ +4$' <<<"$table" ||
  fail "no activation transfer row: $table"
grep -Eq '^  1 -> 0 +B +[0-9.]+ +[0-9.]+ +4 +[0-9.]+ +[0-9.]+ +4$' <<<"$table" ||
  fail "no gradient transfer row: $table"
"$compare" "$work/trace" "$work/sim.json" --merge "$work/merged.json" >/dev/null ||
  fail "compare_traces --merge exited $?"
python3 - "$work/merged.json" <<'PY' || fail "merged trace: $(head -c 300 "$work/merged.json")"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
assert names[0] == "rank 0 (measured)" and names[1001] == "rank 1 (simulated)", names
# Each measured transfer an arrow from the sender's send to the receiver's recv.
starts = [e for e in events if e.get("ph") == "s" and e["pid"] in (0, 1)]
assert len(starts) == 8 and all(e["name"] == "transfer" for e in starts), starts[:2]
assert min(e["ts"] for e in events if e.get("ph") == "X" and e["pid"] < 2) >= 0
PY
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
# Hand-made traces in a folder (its sim.json beside them), compared: the table in $table.
compare_hand_made() {
  table=$("$compare" "$1" "$1/sim.json") || fail "compare_traces exited $? on $1: $table"
}
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
compare_hand_made "$work/synthetic"
grep -Eq '^ +0 c_allreduce_sum +40\.0 +40\.0 +2 +20\.0 +20\.0 +2$' <<<"$table" ||
  fail "no collective row for rank 0: $table"
grep -q "not on one clock" <<<"$table" || fail "traces without a clock not said: $table"
grep -q "name no jobs" <<<"$table" || fail "traces without jobs not said: $table"
if err=$("$compare" "$work/synthetic" "$work/synthetic/sim.json" --merge "$work/m.json" 2>&1); then
  fail "merged traces without a clock: $err"
fi
grep -q "one host" <<<"$err" || fail "unclear error merging traces without a clock: $err"
# Two hand-made ranks on one clock, rank 1's step begun 100 us after rank 0's: rank 0's send
# at 10 us reaches rank 1's recv, which ends at 50 us of rank 1's step: 140 us measured; the
# simulated transfer's arrow lands 35 us after the send.
mkdir -p "$work/aligned"
python3 - "$work/aligned" <<'PY'
import json, sys
def rank(r, began, ops):
    meta = [{"ph": "M", "name": "thread_name", "pid": r, "tid": t, "args": {"name": n}}
            for t, n in ((0, "compute"), (2, "pp_send"), (3, "pp_recv"))]
    evs = [{"ph": "X", "name": n, "pid": r, "tid": t, "cat": c, "ts": ts, "dur": d,
            "args": {"job": w.split()[0], "where": w}} for n, t, c, ts, d, w in ops]
    other = {"clock": "steady", "step_began_us": began, "host": "h"}
    json.dump({"traceEvents": meta + evs, "otherData": other},
              open(f"{sys.argv[1]}/rank{r}.trace.json", "w"))
rank(0, 1000.0, [("matmul", 0, "compute", 0, 10, "op"),
                 ("send", 2, "send", 10, 5, "0SEND_F0 of 'x' to pipeline rank 1")])
rank(1, 1100.0, [("recv", 3, "recv", 0, 50, "1RECV_F0 of 'x' from pipeline rank 0"),
                 ("matmul", 0, "compute", 60, 10, "op")])
meta = [{"ph": "M", "name": "thread_name", "pid": r, "tid": t, "args": {"name": n}}
        for r in (0, 1) for t, n in ((0, "compute"), (2, "pp_send"), (3, "pp_recv"))]
sim = meta + [
    {"ph": "X", "name": "matmul", "pid": 0, "tid": 0, "cat": "compute", "ts": 0, "dur": 10},
    {"ph": "X", "name": "SEND x", "pid": 0, "tid": 2, "cat": "send", "ts": 10, "dur": 35,
     "args": {"job": "0SEND_F0"}},
    {"ph": "X", "name": "RECV x", "pid": 1, "tid": 3, "cat": "recv", "ts": 10, "dur": 35,
     "args": {"job": "1RECV_F0"}},
    {"ph": "X", "name": "matmul", "pid": 1, "tid": 0, "cat": "compute", "ts": 45, "dur": 10},
    {"ph": "s", "name": "SEND x", "pid": 0, "tid": 2, "cat": "flow", "id": 1, "ts": 10},
    {"ph": "f", "name": "SEND x", "pid": 1, "tid": 3, "cat": "flow", "id": 1, "ts": 45, "bp": "e"}]
json.dump({"traceEvents": sim}, open(sys.argv[1] + "/sim.json", "w"))
PY
compare_hand_made "$work/aligned"
grep -Eq '^ +1 +160 +45$' <<<"$table" || fail "rank 1's first op not at 160 / 45 us: $table"
grep -Eq '^  0 -> 1 +F +140\.0 +140\.0 +1 +35\.0 +35\.0 +1$' <<<"$table" ||
  fail "no 140 / 35 us transfer row: $table"
# A collective split in two: rank 0's mp_comm thread arrives at 10 us, rank 1's at 30 (its
# step began 20 us later, the op at 10 of its own), both end at 60: 10 us of straggle (30 after
# the mean of 20), 30 us from the last arrival to the end; simulated, 25 us from the last
# arrival (its slices begin there).
mkdir -p "$work/split"
python3 - "$work/split" <<'PY'
import json, sys
meta = lambda r: [{"ph": "M", "name": "thread_name", "pid": r, "tid": 1, "args": {"name": "mp_comm"}}]
def allreduce(r, ts, dur, cat):
    return {"ph": "X", "name": "c_allreduce_sum", "pid": r, "tid": 1, "cat": cat, "ts": ts,
            "dur": dur, "args": {"job": f"{r}F0", "where": "op 3"}}
for r, began, ts, dur in ((0, 500.0, 10, 50), (1, 520.0, 10, 30)):
    json.dump({"traceEvents": meta(r) + [allreduce(r, ts, dur, "compute")],
               "otherData": {"clock": "steady", "step_began_us": began, "host": "h"}},
              open(f"{sys.argv[1]}/rank{r}.trace.json", "w"))
sim = meta(0) + meta(1) + [allreduce(r, 40, 25, "collective") for r in (0, 1)]
json.dump({"traceEvents": sim}, open(sys.argv[1] + "/sim.json", "w"))
PY
compare_hand_made "$work/split"
grep -Eq '^  mp_comm +10\.0 +30\.0 +1 +25\.0 +1$' <<<"$table" ||
  fail "no 10 / 30 / 25 us collective split row: $table"
# Jobs a transfer's data reached while they ran, against the rest: rank 0's forward of
# micro-batch 0 (100 us) has a recv end inside it, that of micro-batch 1 (60 us) none.
mkdir -p "$work/arrivals"
python3 - "$work/arrivals" <<'PY'
import json, sys
meta = [{"ph": "M", "name": "thread_name", "pid": 0, "tid": t, "args": {"name": n}}
        for t, n in ((0, "compute"), (3, "pp_recv"))]
def op(ts, dur, job, cat="compute", tid=0):
    return {"ph": "X", "name": "matmul" if cat == "compute" else "recv", "pid": 0, "tid": tid,
            "cat": cat, "ts": ts, "dur": dur, "args": {"job": job, "where": "op"}}
evs = meta + [op(0, 40, "0F0"), op(60, 40, "0F0"), op(0, 50, "0RECV_B0", "recv", 3),
              op(200, 60, "0F1")]
json.dump({"traceEvents": evs}, open(sys.argv[1] + "/rank0.trace.json", "w"))
json.dump({"traceEvents": evs}, open(sys.argv[1] + "/sim.json", "w"))
PY
compare_hand_made "$work/arrivals"
grep -Eq '^ +0 F +100\.0 +1 +60\.0 +1 +100\.0 +1 +60\.0 +1$' <<<"$table" ||
  fail "no row of jobs a transfer reached: $table"
mkdir -p "$work/empty"
if err=$("$compare" "$work/empty" "$work/sim.json" 2>&1); then fail "an empty folder compared: $err"; fi
grep -q "no rankR.trace.json" <<<"$err" || fail "unclear error for an empty folder: $err"
echo "traces written and well formed, and compared with the simulated step"
