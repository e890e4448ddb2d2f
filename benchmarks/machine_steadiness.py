#!/usr/bin/env python3
"""How steady the machine's speed is for the executor's work: the small GPT of
cost_model_accuracy.sh trained on one process and one thread for SECONDS (default 6), its
step times summarised quarter-second by quarter-second. On a shared VM the host's other
tenants slow that work by 1.3-1.5x in spells of about a second; a predicted-against-measured
benchmark whose profile and run land in different spells then sees that much error that is
the machine's, not the model's.

    machine_steadiness.py [SECONDS] [--tool PIPEWEAVE]

PIPEWEAVE defaults to $PW_TOOL, else build/tools/pipeweave beside this script. Without it,
a piece of Python work is timed instead, with a note: spells that slow the executor's step
by 1.5x (its working set beyond the core's own caches) leave that work within 5 %.

Prints one line: the fastest and slowest quarter-second's median step (or piece of work),
and the slowest over the fastest ("1.00x" is a steady machine).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SMALL_GPT = ["--layers", "4", "--hidden", "64", "--ffn", "256", "--heads", "4", "--seq", "16",
             "--vocab", "128", "--micro-batch-size", "2", "--seed", "1"]
STEP_MS = 8  # about the small GPT's step on one thread: sets the steps SECONDS hold
QUARTER = 0.25


def fail(message):
    sys.exit(f"machine_steadiness.py: {message}")


def quarter_medians(durations):
    """Medians of consecutive durations (seconds) grouped by the quarter-second they end in."""
    groups, elapsed = {}, 0.0
    for d in durations:
        elapsed += d
        groups.setdefault(int(elapsed / QUARTER), []).append(d)
    return [statistics.median(v) for v in groups.values() if len(v) >= 5]


def step_times(tool, seconds):
    work = tempfile.mkdtemp(prefix="pw-steadiness-")
    try:
        module, plan = os.path.join(work, "gpt.pbtxt"), os.path.join(work, "gpt.pb")
        for args in ([tool, "build-model", "gpt", *SMALL_GPT, "-o", module],
                     [tool, "opt", module, "-p", "append-backward{optimizer=adam,lr=0.01}", "-o",
                      plan]):
            done = subprocess.run(args, capture_output=True, text=True)
            if done.returncode != 0:
                fail(f"{' '.join(args[:2])} failed: {done.stderr.strip()}")
        steps = max(20, int(seconds * 1000 / STEP_MS))
        done = subprocess.run([tool, "run", plan, "--nproc", "1", "--threads", "1",
                               "--micro-batches", "8", "--steps", str(steps), "--report", "json"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"run failed: {done.stderr.strip()}")
        report = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
        return [ms / 1e3 for ms in report["step_time_ms"][1:]]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def python_work_times(seconds):
    def work():
        total = 0
        for i in range(20000):
            total += i * i
        return total

    times, start = [], time.perf_counter()
    while (now := time.perf_counter()) - start < seconds:
        work()
        times.append(time.perf_counter() - now)
    return times


def main(argv):
    args = argv[1:]
    tool = os.environ.get("PW_TOOL") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "build", "tools", "pipeweave")
    if "--tool" in args:
        i = args.index("--tool")
        if i + 1 == len(args):
            fail("--tool needs the pipeweave binary")
        tool = args[i + 1]
        del args[i:i + 2]
        if not os.access(tool, os.X_OK):
            fail(f"no pipeweave binary at {tool}")
    if len(args) > 1:
        fail(f"unexpected argument '{args[1]}' (usage: machine_steadiness.py [SECONDS] "
             "[--tool PIPEWEAVE])")
    try:
        seconds = float(args[0]) if args else 6.0
    except ValueError:
        fail(f"SECONDS must be a number, got '{args[0]}'")
    if not 1 <= seconds <= 600:
        fail(f"SECONDS must be between 1 and 600, got {seconds:g}")
    if os.access(tool, os.X_OK):
        what, fmt, unit, note = "the small GPT's step on one thread", "%.2f-%.2f ms", 1e3, ""
        times = step_times(tool, seconds)
    else:
        what, fmt, unit = "single-threaded Python work", "%.0f-%.0f us a piece", 1e6
        note = (" (no pipeweave binary: Python work misses spells that slow the executor's "
                "step; give --tool)")
        times = python_work_times(seconds)
    medians = quarter_medians(times)
    if not medians:
        fail("too few timings to summarise; give more SECONDS")
    fast, slow = min(medians) * unit, max(medians) * unit
    span = len(medians) * QUARTER
    print(f"machine steadiness: {what} {fmt % (fast, slow)}, quarter-second by quarter-second "
          f"over {span:g} s: the slowest {slow / fast:.2f}x the fastest{note}")


if __name__ == "__main__":
    main(sys.argv)
