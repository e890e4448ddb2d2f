#!/usr/bin/env python3
"""The error of a predicted median against a measured one, with its 95 % interval over the
rounds that gave them, so that a machine whose speed moves from round to round shows how
far one figure can be trusted.

    median_error.py "P1 P2 ..." "M1 M2 ..." [TARGET]

prints "ERROR LO HI" (percent): (median(P) - median(M)) / median(M), and the 2.5th and
97.5th percentiles of that error over 2000 bootstrap resamples, P and M resampled apart (a
round's prediction comes from a profile taken seconds before its run, on a machine whose
speed may have moved between them, so the two are not paired). With TARGET, the exit
status says whether the verdict is settled: 0 when the interval lies wholly inside
[-TARGET, TARGET] or wholly outside it, 1 while it straddles either bound.
The resampling is seeded: the same rounds give the same interval.
"""

import random
import statistics
import sys

RESAMPLES = 2000


def error(predicted, measured):
    m = statistics.median(measured)
    return (statistics.median(predicted) - m) / m * 100


def interval(predicted, measured, resamples=RESAMPLES):
    rng = random.Random(1)
    errors = sorted(
        error(rng.choices(predicted, k=len(predicted)), rng.choices(measured, k=len(measured)))
        for _ in range(resamples))
    return errors[int(0.025 * resamples)], errors[int(0.975 * resamples) - 1]


def settled(lo, hi, target):
    return hi < -target or lo > target or (lo >= -target and hi <= target)


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__.split("\n\n")[1])
    try:
        predicted = [float(x) for x in argv[1].split()]
        measured = [float(x) for x in argv[2].split()]
        target = float(argv[3]) if len(argv) == 4 else None
    except ValueError as e:
        sys.exit(f"median_error.py: {e}")
    if not predicted or not measured:
        sys.exit("median_error.py: predicted and measured need a figure each at least")
    lo, hi = interval(predicted, measured)
    print(f"{error(predicted, measured):.2f} {lo:.2f} {hi:.2f}")
    return 0 if target is None or settled(lo, hi, target) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
