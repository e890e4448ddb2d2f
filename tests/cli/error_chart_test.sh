#!/usr/bin/env bash
# scripts/error_chart.py: one bar per row in its group and section, coloured by its target;
# a malformed line is refused with its line number and leaves no chart behind.
#   error_chart_test.sh WORK_DIR
set -u
work=$1
chart=$(dirname "$0")/../../scripts/error_chart.py
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

# r2 carries its error's interval (-8 to +41 %), drawn as a whisker and widening the scale.
printf 'rows\tsource a\tr1\t-4.9\t10\nrows\tsource a\tr2\t12.5\t10\t-8\t41\n'\
'rows\tsource b\tr3\t-27\t10\nratios\tsource a\tr2 / r1\t2.9\t3\n'\
'ratios\tsource b\tr3 / r1\t-3.7\t3\n' >"$work/errors.tsv"
"$chart" -o "$work/chart.svg" --title "a <title> & more" <"$work/errors.tsv" ||
  fail "error_chart.py exited $?"
python3 - "$work/chart.svg" <<'PY' || fail "$(head -c 300 "$work/chart.svg")"
import sys
import xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()  # well-formed, the title escaped
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
assert "a <title> & more" in texts, texts
bars = [r for r in root.iter(ns + "rect") if r.get("class") == "bar"]
assert len(bars) == 5, len(bars)
tips = {"".join(b.itertext()).split(":")[0]: b.get("fill") for b in bars}
good, bad = tips["r1"], tips["r2"]
assert good != bad, tips
# Within the target: r1 (-4.9 of 10) and r2 / r1 (2.9 of 3); off it: r2, r3, r3 / r1.
assert tips["r2 / r1"] == good and tips["r3"] == bad and tips["r3 / r1"] == bad, tips
assert "rows: 1 of 3 within ±10 % (whiskers: each error's interval)" in texts, texts
assert "ratios: 1 of 2 within ±3 %" in texts, texts  # no interval there: no legend
assert "source a" in texts and "source b" in texts, texts
# A bar grows from zero to its error: a negative one ends at the axis' zero.
zero = [l for l in root.iter(ns + "line") if l.get("class") == "zero"][0]
r3 = [b for b in bars if "".join(b.itertext()).startswith("r3:")][0]
assert abs(float(r3.get("x")) + float(r3.get("width")) - float(zero.get("x1"))) < 0.2
# r2's whisker spans its interval on the rows' scale (+-50 %: 41 % is the widest reach), the
# only whisker drawn.
whiskers = [p for p in root.iter(ns + "path") if p.get("class") == "interval"]
assert len(whiskers) == 1 and "".join(whiskers[0].itertext()) == "r2: -8.0 to +41.0 %", whiskers
ticks = [t for t in texts if t.endswith(" %") and t[0] in "+-"]
assert "+50 %" in ticks and "+100 %" not in ticks, ticks
d = whiskers[0].get("d")  # "M<low> <y>v6M<low> <mid>H<high>M<high> <y>v6"
x = [float(d[1:].split()[0]), float(d.split("H")[1].split("M")[0])]
zero_x, half = float(zero.get("x1")), 520 / 2
assert abs(x[0] - (zero_x - 8 / 50 * half)) < 0.2, (x, zero_x)
assert abs(x[1] - (zero_x + 41 / 50 * half)) < 0.2, (x, zero_x)
PY

# Bad input: one line, its number, non-zero exit, the earlier chart untouched.
before=$(md5sum <"$work/chart.svg")
printf 'rows\ta\tr1\t-4.9\t10\nrows\ta\tr2\tlots\t10\n' >"$work/bad.tsv"
msg=$("$chart" -o "$work/chart.svg" <"$work/bad.tsv" 2>&1) && fail "a non-number was accepted"
[[ $msg == *"line 2"*"must be numbers"* ]] || fail "message: $msg"
[[ $(md5sum <"$work/chart.svg") == "$before" ]] || fail "the chart was overwritten"
msg=$(printf 'rows\ta\tr1\n' | "$chart" -o "$work/new.svg" 2>&1) && fail "3 fields were accepted"
[[ $msg == *"line 1: 3 fields, want 5"*" or 7"* ]] || fail "message: $msg"
msg=$(printf 'rows\ta\tr1\t1\t10\t5\t-5\n' | "$chart" -o "$work/new.svg" 2>&1) &&
  fail "an interval whose low is above its high was accepted"
[[ $msg == *"line 1: the interval's low 5 is above its high -5"* ]] || fail "message: $msg"
msg=$("$chart" -o "$work/new.svg" </dev/null 2>&1) && fail "no rows were accepted"
[[ $msg == *"no rows"* ]] || fail "message: $msg"
[[ ! -e $work/new.svg ]] || fail "a chart was written from bad input"
msg=$("$chart" -o "$work/no/such/folder/c.svg" <"$work/errors.tsv" 2>&1) &&
  fail "a chart into a missing folder was accepted"
[[ $msg == "error_chart.py: cannot write $work/no/such/folder/c.svg: No such file or directory" ]] ||
  fail "message: $msg"
ls "$work"/*.tmp 2>/dev/null && fail "a temporary file was left"
echo "error_chart: ok"
