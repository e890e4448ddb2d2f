#!/usr/bin/env python3
"""A measured step beside the simulated one, stream by stream and op by op.

    pipeweave run PLAN.pb --nproc N --steps 20 --trace measured/ [--trace-cpu]
    pipeweave sim PLAN.pb --costs COSTS --trace sim.json
    scripts/compare_traces.py measured/ sim.json [--ops K]

Per rank: the step's length, and per stream the time its instructions ran, how often and
how long its thread waited for another stream or rank (measured: the trace's "wait"
slices; simulated: the gaps between its instructions), measured beside simulated. Then
the op types that take the most time, over all ranks: measured wall time and the stream
thread's CPU time (with run --trace-cpu; "-" without), simulated time (under the simulated
sharing of the cores) and the cost model's estimate (alone). Then the hand-offs between a
rank's streams: how long a stream that waited took to resume after the instruction of
another stream of its rank whose event it waited for ended (each trace names it:
handoff_from, handoff_us; in traces without them, the last op another stream ended during
the wait), median, mean and count per pair of streams, measured beside simulated. Last,
each rank's collectives (the op types the simulated trace marks as such): their wall time,
median, mean and count, measured beside simulated, since a collective's time holds its
wait for the last member of its group. Where the two disagree is where the cost model is
wrong.

Ranks that ran on one host (their traces name the host and where the step began on its
steady clock) are put on one time line: then each rank's step start relative to the first
rank's, how many ranks were inside a compute op at once (collectives and waits not counted),
and the pipeline transfers from the sender's send to the receiver's data (paired as
the simulated trace pairs them), measured beside simulated; and each stream's collectives
split into the members' straggle and the time from the last arrival to the end. Then each rank's jobs (a
micro-batch's forward F, backward B or W, the optimizer OPT...): the median over its
micro-batches of a job's time at work (its instructions) and its span (first start to last
end), measured beside simulated. --merge OUT.json writes that
time line as one trace to open in Perfetto or chrome://tracing: the measured ranks with
arrows for their transfers, and below them the simulated ranks.
"""

import argparse
import bisect
import collections
import json
import os
import re
import statistics
import sys

GAP_US = 1.0  # shorter idle time between instructions is not a wait (as run --trace)


def load(path):
    """A trace's events and its otherData ({} where it has none)."""
    with open(path) as f:
        doc = json.load(f)
    if isinstance(doc, dict):
        return doc["traceEvents"], doc.get("otherData", {})
    return doc, {}


def events(path):
    return load(path)[0]


# A pipeline transfer's job, as both traces name it (their slices' job args): the rank's index
# in its program, SEND or RECV, the kind of tensor (F: activation, B: gradient) and the
# micro-batch ("0SEND_F3").
JOB = re.compile(r"^(\d+)(SEND|RECV)_([A-Z]+)(\d+)")


def measured_offsets(other):
    """rank -> where its traced step began, in us after the earliest rank's, from each rank's
    otherData; None unless every trace says where on one host's steady clock (run --trace on
    one machine)."""
    began, hosts = {}, set()
    for rank, data in other.items():
        if data.get("clock") != "steady" or "step_began_us" not in data:
            return None
        began[rank] = data["step_began_us"]
        hosts.add(data.get("host"))
    if len(hosts) != 1 or not began:
        return None
    first = min(began.values())
    return {rank: t - first for rank, t in began.items()}


def transfer_slices(evs_by_rank):
    """(rank, job) -> the slice of each send or recv of the ranks' traces."""
    out = {}
    for rank, evs in evs_by_rank.items():
        for e in evs:
            job = e.get("args", {}).get("job")
            if e.get("ph") == "X" and e.get("cat") in ("send", "recv") and job:
                out[(rank, job)] = e
    return out


def by_rank(evs):
    """A trace of several ranks (the simulated one) as rank -> its events."""
    out = collections.defaultdict(list)
    for e in evs:
        out[e.get("pid", 0)].append(e)
    return out


def simulated_transfers(evs):
    """[(sender, send job, receiver, recv job)] from the simulated trace's flow arrows: a
    send's arrow starts where it began and ends where its data arrived, inside the recv."""
    slices = transfer_slices(by_rank(evs))
    sends = {(pid, e["ts"]): job for (pid, job), e in slices.items() if e["cat"] == "send"}
    recvs = collections.defaultdict(list)
    for (pid, job), e in slices.items():
        if e["cat"] == "recv":
            recvs[pid].append((e["ts"], e["ts"] + e["dur"], job))
    starts = {e["id"]: e for e in evs if e.get("ph") == "s"}
    pairs = []
    for f in (e for e in evs if e.get("ph") == "f"):
        s = starts.get(f["id"])
        send_job = s and sends.get((s["pid"], s["ts"]))
        inside = [job for lo, hi, job in recvs[f["pid"]] if lo - 1e-6 <= f["ts"] <= hi + 1e-6]
        if send_job and inside:
            pairs.append((s["pid"], send_job, f["pid"], inside[0]))
    return pairs


JOB_KIND = re.compile(r"^\d+([A-Z_]+?)\d*$")


def job_times(evs_by_rank):
    """(rank, kind) -> [(work us, span us, whether a transfer's data reached the rank while
    it ran)] per job, from the slices' job args ("0F3": rank 0's forward of micro-batch 3);
    pipeline transfers and step-level work left out."""
    jobs = collections.defaultdict(lambda: [0.0, float("inf"), 0.0])
    arrivals = collections.defaultdict(list)  # rank -> when its recvs ended
    for rank, evs in evs_by_rank.items():
        for e in evs:
            if e.get("ph") == "X" and e.get("cat") == "recv":
                arrivals[rank].append(e["ts"] + e["dur"])
            job = e.get("args", {}).get("job") if e.get("ph") == "X" else None
            if not job or e.get("cat") in ("send", "recv", "wait"):
                continue
            j = jobs[(rank, job)]
            j[0] += e["dur"]
            j[1] = min(j[1], e["ts"])
            j[2] = max(j[2], e["ts"] + e["dur"])
    out = collections.defaultdict(list)
    for (rank, job), (work, first, last) in jobs.items():
        m = JOB_KIND.match(job)
        if m and not m.group(1).startswith(("SEND", "RECV")):
            arrived = any(first < t < last for t in arrivals[rank])
            out[(rank, m.group(1))].append((work, last - first, arrived))
    return out


def print_jobs(measured_evs, sim_evs, median):
    if not any(e.get("args", {}).get("job") for evs in measured_evs.values() for e in evs):
        print("\n(the measured traces name no jobs: written before they did; no jobs compared)")
        return
    measured, simulated = job_times(measured_evs), job_times(by_rank(sim_evs))
    print("\njobs per rank (us: the median over micro-batches of a job's time at work and of its "
          "span,\n first start to last end)")
    print(f"  {'rank':>4} {'job':<6} {'measured: work':>14} {'span':>7} {'count':>6}"
          f"   {'simulated: work':>15} {'span':>7} {'count':>6}")
    for key in sorted(set(measured) | set(simulated)):
        m, s = measured.get(key, []), simulated.get(key, [])
        print(f"  {key[0]:>4} {key[1]:<6} {median([j[0] for j in m]):>14} "
              f"{median([j[1] for j in m]):>7} {len(m):6d}   {median([j[0] for j in s]):>15} "
              f"{median([j[1] for j in s]):>7} {len(s):6d}")
    # A transfer that reaches a rank while it computes takes the receiving thread's turn on a
    # core from that work where no core is free; the jobs it fell into, against the rest.
    split = [key for key in sorted(measured) if len({j[2] for j in measured[key]}) == 2]
    if not split:
        return
    print("\njobs a transfer's data reached while they ran, against the rest (us: median span)")
    print(f"  {'rank':>4} {'job':<6} {'measured: reached':>17} {'count':>6} {'rest':>7} {'count':>6}"
          f"   {'simulated: reached':>18} {'count':>6} {'rest':>7} {'count':>6}")
    for key in split:
        row = f"  {key[0]:>4} {key[1]:<6}"
        for side, width in ((measured[key], 17), (simulated.get(key, []), 18)):
            hit = [j[1] for j in side if j[2]]
            rest = [j[1] for j in side if not j[2]]
            row += (f" {median(hit):>{width}} {len(hit):6d} {median(rest):>7} {len(rest):6d}"
                    + ("  " if width == 17 else ""))
        print(row)


def thread_names(evs):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
            if e.get("ph") == "M" and e.get("name") == "thread_name"}


class Stream:
    def __init__(self):
        self.busy = 0.0
        self.count = 0
        self.waits = 0
        self.wait_us = 0.0


def recorded_hand_offs(slices):
    """(from, to) -> resume delays in us, from the slices' own args (handoff_from,
    handoff_us: the instruction of another stream whose event a slice's stream waited for,
    as both `run --trace` and `sim --trace` write them); None when no slice has them (a
    trace written before they were)."""
    out = collections.defaultdict(list)
    for stream, e in slices:
        a = e.get("args", {})
        if "handoff_us" in a:
            out[(a["handoff_from"], stream)].append(a["handoff_us"])
    return out if out else None


def hand_offs(tracks, waits):
    """(from, to) -> resume delays in us. `tracks`: stream -> its ops as (start, end);
    `waits`: stream -> its waits as (start, end), each ending where the stream resumed.
    The event is taken to be the last op of another stream that ended inside the wait."""
    ends = sorted((end, name) for name, ops in tracks.items() for _, end in ops)
    keys = [e for e, _ in ends]
    out = collections.defaultdict(list)
    for to, intervals in waits.items():
        for start, resumed in intervals:
            # The last op of another stream that ended inside the wait.
            k = bisect.bisect_right(keys, resumed) - 1
            while k >= 0 and ends[k][0] >= start and ends[k][1] == to:
                k -= 1
            if k >= 0 and ends[k][0] >= start:
                out[(ends[k][1], to)].append(resumed - ends[k][0])
    return out


def measured_rank(evs):
    names = thread_names(evs)
    streams = collections.defaultdict(Stream)
    ops = collections.defaultdict(lambda: [0.0, None])  # op -> wall, cpu (None: no cpu_us)
    durations = collections.defaultdict(list)  # op -> each instruction's wall
    tracks, waits = collections.defaultdict(list), collections.defaultdict(list)
    slices = []
    lo, hi = float("inf"), 0.0
    for e in evs:
        if e.get("ph") != "X":
            continue
        name = names.get((e["pid"], e["tid"]), str(e["tid"]))
        slices.append((name, e))
        s = streams[name]
        lo, hi = min(lo, e["ts"]), max(hi, e["ts"] + e["dur"])
        if e["name"] == "wait":
            s.waits += 1
            s.wait_us += e["dur"]
            waits[name].append((e["ts"], e["ts"] + e["dur"]))
            continue
        tracks[name].append((e["ts"], e["ts"] + e["dur"]))
        s.busy += e["dur"]
        s.count += 1
        ops[e["name"]][0] += e["dur"]
        durations[e["name"]].append(e["dur"])
        if "cpu_us" in e.get("args", {}):  # run --trace-cpu
            ops[e["name"]][1] = (ops[e["name"]][1] or 0.0) + e["args"]["cpu_us"]
    recorded = recorded_hand_offs(slices)
    return (streams, ops, (hi - lo if hi > lo else 0.0),
            recorded if recorded is not None else hand_offs(tracks, waits), durations)


def simulated_ranks(path):
    evs = events(path)
    names = thread_names(evs)
    by_track = collections.defaultdict(list)
    for e in evs:
        if e.get("ph") == "X":
            by_track[(e["pid"], e["tid"])].append(e)
    ranks = collections.defaultdict(lambda: [collections.defaultdict(Stream), 0.0])
    ops = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0.0]))
    tracks = collections.defaultdict(lambda: collections.defaultdict(list))
    waits = collections.defaultdict(lambda: collections.defaultdict(list))
    slices = collections.defaultdict(list)
    collectives = collections.defaultdict(lambda: collections.defaultdict(list))  # pid -> op -> us
    for (pid, tid), track in by_track.items():
        track.sort(key=lambda e: e["ts"])
        name = names.get((pid, tid), str(tid))
        slices[pid].extend((name, e) for e in track)
        s = ranks[pid][0][name]
        end = 0.0
        for e in track:
            tracks[pid][name].append((e["ts"], e["ts"] + e["dur"]))
            if e["ts"] - end > GAP_US:
                s.waits += 1
                s.wait_us += e["ts"] - end
                waits[pid][name].append((end, e["ts"]))
            end = max(end, e["ts"] + e["dur"])
            s.busy += e["dur"]
            s.count += 1
            o = ops[pid][e["name"]]
            o[0] += e["dur"]
            o[1] += e.get("args", {}).get("estimate_us", 0.0)
            if e.get("cat") == "collective":
                collectives[pid][e["name"]].append(e["dur"])
        ranks[pid][1] = max(ranks[pid][1], end)
    offs = {}
    for pid in tracks:
        recorded = recorded_hand_offs(slices[pid])
        offs[pid] = recorded if recorded is not None else hand_offs(tracks[pid], waits[pid])
    return ranks, ops, offs, collectives


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measured", help="the folder `pipeweave run --trace` wrote")
    parser.add_argument("simulated", help="the file `pipeweave sim --trace` wrote")
    parser.add_argument("--ops", type=int, default=12, help="op types to list (12)")
    parser.add_argument("--merge", metavar="OUT",
                        help="write the measured ranks on one time line, and the simulated "
                        "ones below them, as one Chrome trace")
    args = parser.parse_args()
    if not os.path.isdir(args.measured):
        sys.exit(f"{args.measured}: not a folder of rankR.trace.json (pipeweave run --trace DIR)")
    try:
        sim, sim_ops, sim_hand_offs, sim_collectives = simulated_ranks(args.simulated)
    except (OSError, ValueError, KeyError) as err:
        sys.exit(f"{args.simulated}: not a trace of pipeweave sim --trace ({err})")
    ms = lambda us: us / 1e3
    all_ops = collections.defaultdict(lambda: [0.0, None, 0.0, 0.0])
    all_hand_offs = collections.defaultdict(lambda: ([], []))  # (from, to) -> measured, simulated
    collective_rows = []  # (rank, op, measured us, simulated us)
    compared = 0
    measured_evs, other = {}, {}  # rank -> its trace's events, its otherData
    for rank in sorted(sim):
        path = os.path.join(args.measured, f"rank{rank}.trace.json")
        if not os.path.exists(path):
            print(f"rank {rank}: no {path}; skipped")
            continue
        try:
            measured_evs[rank], other[rank] = load(path)
            streams, ops, span, measured_hand_offs, durations = measured_rank(measured_evs[rank])
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
            if cpu is not None:
                all_ops[op][1] = (all_ops[op][1] or 0.0) + cpu
        for op, (dur, estimate) in sim_ops[rank].items():
            all_ops[op][2] += dur
            all_ops[op][3] += estimate
        for pair, delays in measured_hand_offs.items():
            all_hand_offs[pair][0].extend(delays)
        for pair, delays in sim_hand_offs.get(rank, {}).items():
            all_hand_offs[pair][1].extend(delays)
        for op, simulated in sorted(sim_collectives.get(rank, {}).items()):
            collective_rows.append((rank, op, durations.get(op, []), simulated))
    if not compared:
        sys.exit(f"{args.measured}: no rankR.trace.json for the simulated ranks")
    print("(a measured recv runs from when its stream posts it until its data is there; a\n"
          " simulated one from when its transfer starts, or it is posted if later: compare recv\n"
          " streams by their waits)")
    print(f"\nop types, over the {compared} ranks compared (ms): the {args.ops} longest simulated")
    print(f"  {'op':<24} {'measured wall':>13} {'measured CPU':>12} {'simulated':>10} {'estimate':>9}")
    for op, (wall, cpu, dur, estimate) in sorted(all_ops.items(), key=lambda kv: -kv[1][2])[:args.ops]:
        cpu_ms = f"{ms(cpu):.2f}" if cpu is not None else "-"
        print(f"  {op:<24} {ms(wall):13.2f} {cpu_ms:>12} {ms(dur):10.2f} {ms(estimate):9.2f}")
    print(f"\nhand-offs between a rank's streams, over the {compared} ranks compared (us: a waiting\n"
          " stream's resume after the end of the instruction of another stream whose event it\n"
          " waited for)")
    print(f"  {'from -> to':<26} {'measured: median':>16} {'mean':>6} {'count':>6}"
          f"   {'simulated: median':>17} {'mean':>6} {'count':>6}")
    # The mean beside the median: on shared cores the slow hand-offs (a thread that waits for
    # a core) are the tail, and they add up.
    median = lambda v: f"{statistics.median(v):.1f}" if v else "-"
    mean = lambda v: f"{statistics.mean(v):.1f}" if v else "-"
    for (src, dst), (m, s) in sorted(all_hand_offs.items(), key=lambda kv: -len(kv[1][0])):
        print(f"  {src + ' -> ' + dst:<26} {median(m):>16} {mean(m):>6} {len(m):6d}"
              f"   {median(s):>17} {mean(s):>6} {len(s):6d}")

    if collective_rows:
        print("\ncollectives per rank (us: each one's wall, its wait for the last member included)")
        print(f"  {'rank':>4} {'op':<22} {'measured: median':>16} {'mean':>6} {'count':>6}"
              f"   {'simulated: median':>17} {'mean':>6} {'count':>6}")
        for rank, op, m, s in collective_rows:
            print(f"  {rank:>4} {op:<22} {median(m):>16} {mean(m):>6} {len(m):6d}"
                  f"   {median(s):>17} {mean(s):>6} {len(s):6d}")

    sim_evs = events(args.simulated)
    print_jobs(measured_evs, sim_evs, median)

    offsets = measured_offsets(other)
    if offsets is None:
        print("\n(the measured ranks are not on one clock: traces of another host, or written "
              "before\n they said where their step began; no transfers compared)")
        if args.merge:
            sys.exit("--merge needs the ranks' traces of one `pipeweave run --trace` on one host")
        return
    print_starts(offsets, measured_evs, sim_evs)
    print_computing_at_once(offsets, measured_evs, sim_evs)
    print_transfers(offsets, measured_evs, sim_evs, median, mean)
    print_collective_split(offsets, measured_evs, sim_evs, mean)
    if args.merge:
        write_merged(args.merge, offsets, measured_evs, sim_evs)
        print(f"\nwrote {args.merge}: measured ranks (pid R) on one time line, simulated ranks "
              f"(pid {SIM_PID} + R) below")


SIM_PID = 1000  # the simulated ranks' processes in a merged trace


def collectives_by_stream(evs, names, ops):
    """(stream, op) -> a rank's collectives of that op type on that stream, in order."""
    out = collections.defaultdict(list)
    for e in sorted((e for e in evs if e.get("ph") == "X" and e.get("name") in ops),
                    key=lambda e: e["ts"]):
        out[(names.get((e["pid"], e["tid"]), str(e["tid"])), e["name"])].append(e)
    return out


def print_collective_split(offsets, measured_evs, sim_evs, mean):
    """Each collective split in two, by stream: its members' straggle (the last one's arrival
    after their mean arrival, as profile --comm counts it) and its time from the last arrival
    to the end (the transfer and the waking of the members that waited), measured; beside it
    the simulated time from the last arrival to the end, which holds the straggle the
    simulator prices (its slices begin when the last member is there). A simulated group is
    the ranks whose collective ends at one instant; the measured members are the same ranks'
    same collectives in their program order."""
    sim_by_rank = by_rank(sim_evs)
    ops = {e["name"] for e in sim_evs if e.get("ph") == "X" and e.get("cat") == "collective"}
    sim_names, measured_names = thread_names(sim_evs), {}
    for evs in measured_evs.values():
        measured_names.update(thread_names(evs))
    sim_lists = {r: collectives_by_stream(evs, sim_names, ops) for r, evs in sim_by_rank.items()}
    measured_lists = {r: collectives_by_stream(evs, measured_names, ops)
                      for r, evs in measured_evs.items()}
    groups = collections.defaultdict(list)  # (stream, op, end) -> [(rank, index)]
    for rank, lists in sim_lists.items():
        for key, evs in lists.items():
            for k, e in enumerate(evs):
                groups[key + (round(e["ts"] + e["dur"], 3),)].append((rank, k))
    # stream -> measured straggles, measured last -> end, simulated last -> end
    rows = collections.defaultdict(lambda: ([], [], []))
    for (stream, op, _), members in groups.items():
        if len(members) < 2:
            continue
        row = rows[stream]
        sim = [sim_lists[r][(stream, op)][k] for r, k in members]
        row[2].append(statistics.mean(e["ts"] + e["dur"] for e in sim) - max(e["ts"] for e in sim))
        measured = []
        for r, k in members:
            evs = measured_lists.get(r, {}).get((stream, op), [])
            if k < len(evs):
                measured.append((offsets[r] + evs[k]["ts"], evs[k]["dur"]))
        if len(measured) == len(members):
            last = max(t for t, _ in measured)
            row[0].append(last - statistics.mean(t for t, _ in measured))
            row[1].append(statistics.mean(t + d for t, d in measured) - last)
    if not rows:
        return
    print("\ncollectives split, by stream (us, means: the straggle, the last member's arrival after\n"
          " the members' mean; from the last arrival to the end, simulated with its priced straggle)")
    print(f"  {'stream':<12} {'measured: straggle':>18} {'last -> end':>11} {'count':>6}"
          f"   {'simulated: last -> end':>22} {'count':>6}")
    for stream, (straggles, ends, sim_ends) in sorted(rows.items()):
        print(f"  {stream:<12} {mean(straggles):>18} {mean(ends):>11} {len(ends):6d}"
              f"   {mean(sim_ends):>22} {len(sim_ends):6d}")


def computing_at_once(evs_by_rank, offsets, collective_ops):
    """k -> the share of the step during which k ranks were inside a compute op on their
    compute stream (collectives and waits not counted), the ranks on one time line."""
    edges, lo, hi = [], float("inf"), float("-inf")
    for rank, evs in evs_by_rank.items():
        names = thread_names(evs)
        for e in evs:
            if e.get("ph") != "X":
                continue
            start = e["ts"] + offsets.get(rank, 0.0)
            lo, hi = min(lo, start), max(hi, start + e["dur"])
            if (names.get((e["pid"], e["tid"])) == "compute" and e["name"] != "wait" and
                    e["name"] not in collective_ops and e.get("cat") != "collective"):
                edges += [(start, 1), (start + e["dur"], -1)]
    shares = collections.Counter()
    if hi <= lo:
        return shares
    inside, last = 0, lo
    for t, step in sorted(edges):
        shares[inside] += t - last
        inside, last = inside + step, t
    shares[inside] += hi - last
    return {k: v / (hi - lo) for k, v in shares.items()}


def print_computing_at_once(offsets, measured_evs, sim_evs):
    """How many ranks computed at once, measured beside simulated: on shared cores the ranks
    that wait (collectives, receives) leave their cores to the others, and a simulation whose
    ranks fall into step (all computing, then all waiting) idles cores that runs use."""
    collective_ops = {e["name"] for e in sim_evs if e.get("ph") == "X" and
                      e.get("cat") == "collective"}
    measured = computing_at_once(measured_evs, offsets, collective_ops)
    simulated = computing_at_once(by_rank(sim_evs), {}, collective_ops)
    if not measured or not simulated:
        return
    ranks = len(measured_evs)
    print("\nranks inside a compute op at once (% of the step; collectives and waits not counted)")
    print(f"  {'ranks':>5} {'measured':>9} {'simulated':>9}")
    for k in range(ranks + 1):
        print(f"  {k:>5} {100 * measured.get(k, 0):8.1f}% {100 * simulated.get(k, 0):8.1f}%")
    mean = lambda shares: sum(k * v for k, v in shares.items())
    print(f"  {'mean':>5} {mean(measured):9.2f} {mean(simulated):9.2f}")


def first_ops(evs_by_rank, offsets):
    """rank -> when its first op (a compute instruction) began, after the earliest rank's."""
    first = {}
    for rank, evs in evs_by_rank.items():
        starts = [e["ts"] for e in evs if e.get("ph") == "X" and e.get("cat") == "compute"]
        if starts:
            first[rank] = min(starts) + offsets.get(rank, 0.0)
    base = min(first.values()) if first else 0.0
    return {rank: t - base for rank, t in first.items()}


def print_starts(offsets, measured_evs, sim_evs):
    measured, simulated = first_ops(measured_evs, offsets), first_ops(by_rank(sim_evs), {})
    print("\neach rank's first op, after the first rank's (us; measured on the host's clock)")
    print(f"  {'rank':>4} {'measured':>9} {'simulated':>9}")
    for rank in sorted(measured):
        shown = f"{simulated[rank]:9.0f}" if rank in simulated else f"{'-':>9}"
        print(f"  {rank:>4} {measured[rank]:9.0f} {shown}")


def print_transfers(offsets, measured_evs, sim_evs, median, mean):
    """Each pipeline transfer from its send's start on the sender to the end of its recv on
    the receiver (the data there), by sender, receiver and kind, measured beside simulated."""
    sim_slices = transfer_slices(by_rank(sim_evs))
    measured = transfer_slices(measured_evs)
    rows = collections.defaultdict(lambda: ([], []))
    for src, send_job, dst, recv_job in simulated_transfers(sim_evs):
        kind = JOB.match(send_job).group(3)
        row = rows[(src, dst, kind)]
        s, r = sim_slices[(src, send_job)], sim_slices[(dst, recv_job)]
        row[1].append(r["ts"] + r["dur"] - s["ts"])
        ms, mr = measured.get((src, send_job)), measured.get((dst, recv_job))
        if ms and mr:
            row[0].append(offsets[dst] + mr["ts"] + mr["dur"] - (offsets[src] + ms["ts"]))
    if not rows:
        return
    print("\npipeline transfers (us: from the sender's send starting to the receiver having the "
          "data;\n F activations, B gradients)")
    print(f"  {'from -> to':<12} {'kind':>4} {'measured: median':>16} {'mean':>6} {'count':>6}"
          f"   {'simulated: median':>17} {'mean':>6} {'count':>6}")
    for (src, dst, kind), (m, s) in sorted(rows.items()):
        print(f"  {f'{src} -> {dst}':<12} {kind:>4} {median(m):>16} {mean(m):>6} {len(m):6d}"
              f"   {median(s):>17} {mean(s):>6} {len(s):6d}")


def write_merged(out, offsets, measured_evs, sim_evs):
    merged = []
    for rank, evs in sorted(measured_evs.items()):
        for e in evs:
            e = dict(e, pid=rank)
            if "ts" in e:
                e["ts"] = e["ts"] + offsets[rank]
            merged.append(e)
    # Each measured transfer an arrow from its send's start to its recv's end.
    slices = transfer_slices(measured_evs)
    ids = 0
    for src, send_job, dst, recv_job in simulated_transfers(sim_evs):
        s, r = slices.get((src, send_job)), slices.get((dst, recv_job))
        if s and r:
            ids += 1
            merged.append({"ph": "s", "name": "transfer", "cat": "flow", "id": ids, "pid": src,
                           "tid": s["tid"], "ts": s["ts"] + offsets[src]})
            merged.append({"ph": "f", "name": "transfer", "cat": "flow", "id": ids, "pid": dst,
                           "tid": r["tid"], "ts": r["ts"] + r["dur"] + offsets[dst], "bp": "e"})
    for e in sim_evs:
        e = dict(e, pid=SIM_PID + e.get("pid", 0))
        if e.get("ph") == "M" and e.get("name") == "process_name":
            e["args"] = {"name": f"rank {e['pid'] - SIM_PID} (simulated)"}
        if e.get("ph") in ("s", "f"):
            e["id"] = e["id"] + ids
        merged.append(e)
    with open(out, "w") as f:
        json.dump({"traceEvents": merged, "displayTimeUnit": "ms"}, f)


if __name__ == "__main__":
    main()
