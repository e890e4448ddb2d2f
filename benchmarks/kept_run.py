#!/usr/bin/env python3
"""Which of a plan's runs stands for the machine at its quiet speed: the rule `pipeweave
profile --comm` keeps its measuring runs by (tools/in_run_rounds.h), for the measured side
of a benchmark.

    kept_run.py "S1 S2 ..."

S are the runs' figures (median step times). A shared VM's slow spells (1.4-1.6x for a
second or more) only ever slow a run, and a profile prices from the runs outside them; so
a run is taken twice, the fastest is confirmed when another run comes within 1.10x of it,
and the figure is the median of the runs within 1.10x of the fastest (of an even count,
the slower middle one: runs outside the spells still spread by a few percent, and the
fastest of them alone is biased low).

Prints "INDEX FIGURE" (INDEX counts from 0: the run whose other figures, its CPU a step,
go with it). Exit status 0 when the fastest is confirmed (or there is one run), 1 while
it is not: the caller takes another run, up to its own limit.
"""

import sys

NEAR = 1.10  # kBeyondReach in tools/in_run_rounds.h


def near_fastest(steps):
    fastest = min(steps)
    return sorted((i for i, s in enumerate(steps) if s <= NEAR * fastest),
                  key=lambda i: (steps[i], i))


def kept(steps):
    near = near_fastest(steps)
    return near[len(near) // 2]


def confirmed(steps):
    return len(steps) < 2 or len(near_fastest(steps)) >= 2


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    try:
        steps = [float(x) for x in argv[1].split()]
    except ValueError as e:
        sys.exit(f"kept_run.py: {e}")
    if not steps or any(not s > 0 for s in steps):
        sys.exit("kept_run.py: the runs need a positive figure each, one at least")
    i = kept(steps)
    print(i, argv[1].split()[i])
    return 0 if confirmed(steps) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
