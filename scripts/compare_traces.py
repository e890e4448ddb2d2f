#!/usr/bin/env python3
"""A measured step beside the simulated one, stream by stream and op by op.

    pipeweave run PLAN.pb --nproc N --steps 20 --trace measured/
    pipeweave sim PLAN.pb --costs COSTS --trace sim.json
    scripts/compare_traces.py measured/ sim.json [--ops K]

Per rank: the step's length, and per stream the time its instructions ran, how often and
how long its thread waited for another stream or rank (measured: the trace's "wait"
slices; simulated: the gaps between its instructions), measured beside simulated. Then
the op types that take the most time, over all ranks: measured wall time and the stream
thread's CPU time, simulated time (under the simulated sharing of the cores) and the cost
model's estimate (alone). Where the two disagree is where the cost model is wrong.
"""

import argparse
import collections
import json
import os
import sys

GAP_US = 1.0  # shorter idle time between instructions is not a wait (as run --trace)


def events(path):
    with open(path) as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def thread_names(evs):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


class Stream:
    def __init__(self):
        self.busy = 0.0
        self.count = 0
        self.waits = 0
        self.wait_us = 0.0


def measured_rank(path):
    evs = events(path)
    names = thread_names(evs)
    streams = collections.defaultdict(Stream)
    ops = collections.defaultdict(lambda: [0.0, 0.0])  # op -> wall, cpu
    lo, hi = float("inf"), 0.0
    for e in evs:
        if e.get("ph") != "X":
            continue
        s = streams[names.get((e["pid"], e["tid"]), str(e["tid"]))]
        lo, hi = min(lo, e["ts"]), max(hi, e["ts"] + e["dur"])
        if e["name"] == "wait":
            s.waits += 1
            s.wait_us += e["dur"]
            continue
        s.busy += e["dur"]
        s.count += 1
        ops[e["name"]][0] += e["dur"]
        ops[e["name"]][1] += e.get("args", {}).get("cpu_us", 0.0)
    return streams, ops, (hi - lo if hi > lo else 0.0)


def simulated_ranks(path):
    evs = events(path)
    names = thread_names(evs)
    by_track = collections.defaultdict(list)
    for e in evs:
        if e.get("ph") == "X":
            by_track[(e["pid"], e["tid"])].append(e)
    ranks = collections.defaultdict(lambda: [collections.defaultdict(Stream), 0.0])
    ops = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0.0]))
    for (pid, tid), track in by_track.items():
        track.sort(key=lambda e: e["ts"])
        s = ranks[pid][0][names.get((pid, tid), str(tid))]
        end = 0.0
        for e in track:
            if e["ts"] - end > GAP_US:
                s.waits += 1
                s.wait_us += e["ts"] - end
            end = max(end, e["ts"] + e["dur"])
            s.busy += e["dur"]
            s.count += 1
            o = ops[pid][e["name"]]
            o[0] += e["dur"]
            o[1] += e.get("args", {}).get("estimate_us", 0.0)
        ranks[pid][1] = max(ranks[pid][1], end)
    return ranks, ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measured", help="the folder `pipeweave run --trace` wrote")
    parser.add_argument("simulated", help="the file `pipeweave sim --trace` wrote")
    parser.add_argument("--ops", type=int, default=12, help="op types to list (12)")
    args = parser.parse_args()
    if not os.path.isdir(args.measured):
        sys.exit(f"{args.measured}: not a folder of rankR.trace.json (pipeweave run --trace DIR)")
    try:
        sim, sim_ops = simulated_ranks(args.simulated)
    except (OSError, ValueError, KeyError) as err:
        sys.exit(f"{args.simulated}: not a trace of pipeweave sim --trace ({err})")
    ms = lambda us: us / 1e3
    all_ops = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    compared = 0
    for rank in sorted(sim):
        path = os.path.join(args.measured, f"rank{rank}.trace.json")
        if not os.path.exists(path):
            print(f"rank {rank}: no {path}; skipped")
            continue
        try:
            streams, ops, span = measured_rank(path)
        except (OSError, ValueError, KeyError) as err:
            sys.exit(f"{path}: not a trace of pipeweave run --trace ({err})")
        compared += 1
        sim_streams, sim_end = sim[rank]
        print(f"rank {rank}: step {ms(span):.2f} ms measured, {ms(sim_end):.2f} ms simulated")
        print(f"  {'stream':<12} {'measured: ran ms':>16} {'waits':>6} {'waited ms':>9}"
              f"   {'simulated: ran ms':>17} {'waits':>6} {'waited ms':>9}")
        for name in sorted(set(streams) | set(sim_streams)):
            m, s = streams.get(name, Stream()), sim_streams.get(name, Stream())
            print(f"  {name:<12} {ms(m.busy):16.2f} {m.waits:6d} {ms(m.wait_us):9.2f}"
                  f"   {ms(s.busy):17.2f} {s.waits:6d} {ms(s.wait_us):9.2f}")
        for op, (wall, cpu) in ops.items():
            all_ops[op][0] += wall
            all_ops[op][1] += cpu
        for op, (dur, estimate) in sim_ops[rank].items():
            all_ops[op][2] += dur
            all_ops[op][3] += estimate
    if not compared:
        sys.exit(f"{args.measured}: no rankR.trace.json for the simulated ranks")
    print("(a measured recv runs from when its stream posts it until its data is there; a\n"
          " simulated one from when its transfer starts, or it is posted if later: compare recv\n"
          " streams by their waits)")
    print(f"\nop types, over the {compared} ranks compared (ms): the {args.ops} longest simulated")
    print(f"  {'op':<24} {'measured wall':>13} {'measured CPU':>12} {'simulated':>10} {'estimate':>9}")
    for op, (wall, cpu, dur, estimate) in sorted(all_ops.items(), key=lambda kv: -kv[1][2])[:args.ops]:
        print(f"  {op:<24} {ms(wall):13.2f} {ms(cpu):12.2f} {ms(dur):10.2f} {ms(estimate):9.2f}")


if __name__ == "__main__":
    main()
