#!/usr/bin/env python3
"""Draws predicted-against-measured errors as an SVG: one bar per row, grouped, with the
target's band, so that the rows off target stand out before anyone reads the table.

    error_chart.py -o chart.svg [--title TEXT] < errors.tsv

Each input line is tab-separated: SECTION, GROUP, LABEL, ERROR (%), TARGET (%), e.g.
    rows<TAB>narayanan21<TAB>n21-1.7b<TAB>-4.9<TAB>10
and optionally LOW and HIGH (%): the error's interval (e.g. 95 % over repeated rounds), drawn
as a whisker across the bar.
Sections (e.g. rows and ratios) and the groups in them keep the order they first appear in.
benchmarks/published_runs.sh and benchmarks/cost_model_accuracy.sh write one with PW_SVG.
"""

import argparse
import math
import os
import sys
import tempfile
from xml.sax.saxutils import escape

ROW_H = 16  # px per bar
CHAR_W = 6.3  # px a character of the 11 px labels takes, about
PLOT_W = 520  # px for the axis
MARGIN = 16
GOOD, BAD, BAND = "#2e7d32", "#c62828", "#e3f2e5"


class InputError(Exception):
    pass


def read_rows(lines):
    """[(section, group, label, error, target, interval)] from the tab-separated lines;
    interval: (low, high) or None."""
    rows = []
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (5, 7):
            raise InputError(f"line {number}: {len(fields)} fields, want 5 (section, group, "
                             "label, error %, target %) or 7 (and the error's low and high %) "
                             "separated by tabs")
        section, group, label = fields[:3]
        try:
            numbers = [float(f) for f in fields[3:]]
        except ValueError:
            raise InputError(f"line {number}: error '{fields[3]}', target '{fields[4]}' and "
                             "the interval must be numbers (percent)")
        error, target = numbers[:2]
        if not (all(map(math.isfinite, numbers)) and target > 0):
            raise InputError(f"line {number}: error and interval must be finite and target "
                             "above 0")
        interval = tuple(numbers[2:]) or None
        if interval and interval[0] > interval[1]:
            raise InputError(f"line {number}: the interval's low {interval[0]:g} is above its "
                             f"high {interval[1]:g}")
        rows.append((section, group, label, error, target, interval))
    if not rows:
        raise InputError("no rows on the input")
    return rows


def nice_limit(value):
    """The smallest of 5, 10, 20, 25, 50 x 10^k that is at least `value`."""
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def draw(rows, title):
    label_w = max(120, CHAR_W * max(len(r[2]) for r in rows) + 12)  # the longest label fits
    x0 = MARGIN + label_w + PLOT_W / 2  # the axis' zero

    out, y = [], MARGIN + 20
    out.append(f'<text x="{MARGIN}" y="{y}" class="title">{escape(title)}</text>')
    y += 12
    sections = list(dict.fromkeys(r[0] for r in rows))
    for section in sections:
        mine = [r for r in rows if r[0] == section]
        # Each section's own scale, so that a narrow target still shows.
        reach = [abs(v) for r in mine for v in (r[3], r[4]) + (r[5] or ())]
        limit = nice_limit(max(reach) * 1.08)

        def x(percent, limit=limit):
            return x0 + percent / limit * (PLOT_W / 2)

        ok = sum(abs(r[3]) <= r[4] for r in mine)
        targets = sorted({r[4] for r in mine})
        within = "/".join(f"{t:g}" for t in targets)
        y += 22
        whiskers = " (whiskers: each error's interval)" if any(r[5] for r in mine) else ""
        out.append(f'<text x="{MARGIN}" y="{y}" class="section">{escape(section)}: {ok} of '
                   f'{len(mine)} within ±{within} %{whiskers}</text>')
        y += 8
        top = y
        for group in dict.fromkeys(r[1] for r in mine):
            y += ROW_H
            out.append(f'<text x="{MARGIN}" y="{y - 4}" class="group">{escape(group)}</text>')
            for _, _, label, error, target, interval in (r for r in mine if r[1] == group):
                out.append(f'<rect x="{x(-target):.1f}" y="{y}" width="{x(target) - x(-target):.1f}"'
                           f' height="{ROW_H}" fill="{BAND}"/>')
                left, right = sorted((x(0), x(error)))
                color = GOOD if abs(error) <= target else BAD
                out.append(f'<rect class="bar" x="{left:.1f}" y="{y + 3}" '
                           f'width="{max(right - left, 1):.1f}" height="{ROW_H - 6}" '
                           f'fill="{color}"><title>{escape(label)}: {error:+.1f} % (target '
                           f'±{target:g} %)</title></rect>')
                # Where the bar, or its whisker where it has one, reaches on either side.
                ends = (x(interval[0]), x(interval[1])) if interval else (left, right)
                if interval:
                    mid, lo, hi = y + ROW_H / 2, ends[0], ends[1]
                    out.append(f'<path class="interval" d="M{lo:.1f} {mid - 3}v6M{lo:.1f} {mid}'
                               f'H{hi:.1f}M{hi:.1f} {mid - 3}v6"><title>{escape(label)}: '
                               f'{interval[0]:+.1f} to {interval[1]:+.1f} %</title></path>')
                out.append(f'<text x="{MARGIN + label_w - 6:.1f}" y="{y + ROW_H - 4}" '
                           f'class="label">{escape(label)}</text>')
                # The value past the bar and its whisker.
                side = max(right, ends[1]) + 4 if error >= 0 else min(left, ends[0]) - 4
                anchor = "start" if error >= 0 else "end"
                out.append(f'<text x="{side:.1f}" y="{y + ROW_H - 4}" text-anchor="{anchor}" '
                           f'class="value" fill="{color}">{error:+.1f}</text>')
                y += ROW_H
        # The axis: zero, the limits and the midpoints.
        for tick in (-limit, -limit / 2, 0, limit / 2, limit):
            out.append(f'<line x1="{x(tick):.1f}" y1="{top}" x2="{x(tick):.1f}" y2="{y}" '
                       f'class="{"zero" if tick == 0 else "grid"}"/>')
            out.append(f'<text x="{x(tick):.1f}" y="{y + 12}" text-anchor="middle" '
                       f'class="tick">{tick:+g} %</text>')
        y += 16
    width = MARGIN * 2 + label_w + PLOT_W + 40
    height = y + MARGIN
    style = ("text{font-family:sans-serif;font-size:11px}.title{font-size:14px;font-weight:bold}"
             ".section{font-size:12px;font-weight:bold}.group{fill:#555;font-style:italic}"
             ".label{text-anchor:end}.tick{fill:#555;font-size:10px}"
             ".grid{stroke:#ccc;stroke-width:0.5}.zero{stroke:#333;stroke-width:1}"
             ".interval{stroke:#222;stroke-width:1;fill:none}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
            f'viewBox="0 0 {width:.0f} {height}"><style>{style}</style>'
            f'<rect width="100%" height="100%" fill="white"/>' + "".join(out) + "</svg>\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", required=True, help="the SVG to write")
    parser.add_argument("--title", default="predicted against measured")
    args = parser.parse_args()
    try:
        svg = draw(read_rows(sys.stdin), args.title)
    except InputError as e:
        sys.exit(f"error_chart.py: {e}")
    # Written beside the target and renamed: a failed run leaves no half-written chart.
    folder = os.path.dirname(os.path.abspath(args.output))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".svg.tmp")
        with os.fdopen(fd, "w") as f:
            f.write(svg)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as an ordinary new file, not mkstemp's 0600
        os.replace(tmp, args.output)
    except OSError as e:
        if tmp and os.path.exists(tmp):
            os.remove(tmp)
        sys.exit(f"error_chart.py: cannot write {args.output}: {e.strerror or e}")


if __name__ == "__main__":
    main()
