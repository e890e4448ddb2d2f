#!/usr/bin/env python3
"""Whether a prediction and a run saw the machine at one speed: the simulated step of a plan
priced from a profile against the step a run of it measured. A shared VM's spells (1.4-1.6x,
for seconds to minutes) can take the profile's runs and not the measured ones, or the other
way round; the table then prices another machine than the runs ran on.

    one_machine.py SIMULATED_MS MEASURED_MS
    one_machine.py --ab REPORT.json     plan A of a `pipeweave ab --sim --run --json` report

Prints "simulated S ms, measured M ms (S/M)". Exit status 0 when they are within 10 % of
each other, 1 when further apart (the caller profiles and runs again, or does not judge),
2 with one line on stderr for input it cannot read.
"""

import json
import sys

WITHIN = 0.10


def fail(message):
    print(f"one_machine.py: {message}", file=sys.stderr)
    return 2


def main(args):
    if len(args) != 2:
        return fail("usage: one_machine.py SIMULATED_MS MEASURED_MS | --ab REPORT.json")
    try:
        if args[0] == "--ab":
            with open(args[1]) as f:
                report = json.load(f)
            simulated = float(report["sim"]["a"]["step_time_ms"])
            measured = float(report["run"]["a"]["median_step_ms"])
        else:
            simulated, measured = float(args[0]), float(args[1])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return fail(f"{args[-1]}: not an `ab --sim --run` report with plan A's steps ({e!r})"
                    if args[0] == "--ab" else e)
    if not (simulated > 0 and measured > 0):
        return fail("the steps need a positive figure each")
    ratio = simulated / measured
    print("simulated %.2f ms, measured %.2f ms (%.3f)" % (simulated, measured, ratio))
    return 0 if abs(ratio - 1) <= WITHIN else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
