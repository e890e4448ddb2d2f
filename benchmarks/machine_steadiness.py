#!/usr/bin/env python3
"""How steady the machine's speed is: a fixed piece of single-threaded work timed over and
over for SECONDS (default 6), summarised second by second. On a shared VM the host's other
tenants slow every thread by a fifth or more in spells of seconds; a predicted-against-
measured benchmark whose profile and run land in different spells then sees that much error
that is the machine's, not the model's.

    machine_steadiness.py [SECONDS]

prints one line: the fastest and slowest second's median time of the work, and the slowest
over the fastest ("1.00x" is a steady machine).
"""

import statistics
import sys
import time


def work():
    total = 0
    for i in range(20000):
        total += i * i
    return total


def main(argv):
    try:
        seconds = float(argv[1]) if len(argv) > 1 else 6.0
    except ValueError:
        sys.exit(f"machine_steadiness.py: SECONDS must be a number, got '{argv[1]}'")
    if not 1 <= seconds <= 600:
        sys.exit(f"machine_steadiness.py: SECONDS must be between 1 and 600, got {seconds:g}")
    start = time.perf_counter()
    by_second = {}
    while (now := time.perf_counter()) - start < seconds:
        work()
        by_second.setdefault(int(now - start), []).append(time.perf_counter() - now)
    medians = [statistics.median(v) * 1e6 for v in by_second.values() if len(v) >= 10]
    fast, slow = min(medians), max(medians)
    print(f"machine steadiness: single-threaded work {fast:.0f}-{slow:.0f} us a piece, second by "
          f"second over {len(medians)} s: the slowest second {slow / fast:.2f}x the fastest")


if __name__ == "__main__":
    main(sys.argv)
