#!/usr/bin/env bash
# A rank of `pipeweave run --nproc 4` that stops (SIGSTOP) or is killed (SIGKILL) mid-run:
# the run must end within 60 s with one error naming that rank. Usage:
#   rank_fault_test.sh PIPEWEAVE MODULE RUN_DIR stop|kill RANK
# Prints the time to detection.
set -u
pw=$1 module=$2 run_dir=$3 fault=$4 rank=$5
rm -rf "$run_dir"
stderr_file=$(mktemp)
trap 'rm -f "$stderr_file"' EXIT
"$pw" run "$module" --nproc 4 --steps 1000000 --run-dir "$run_dir" >/dev/null 2>"$stderr_file" &
launcher=$!
# The rank process: a child of the launcher with "--rank RANK" among its arguments.
victim=""
for _ in $(seq 300); do
  for child in $(pgrep -P "$launcher"); do
    tr '\0' ' ' <"/proc/$child/cmdline" 2>/dev/null | grep -q -- "--rank $rank " && victim=$child
  done
  [[ -n $victim ]] && break
  sleep 0.1
done
[[ -n $victim ]] || { echo "FAIL: rank $rank never started"; kill "$launcher"; exit 1; }
sleep 3  # let the ranks connect and train a few steps
[[ $fault == stop ]] && kill -STOP "$victim" || kill -KILL "$victim"
faulted=$(date +%s%N)
for _ in $(seq 900); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$launcher" 2>/dev/null; then
  echo "FAIL: the run did not end within 90 s of the fault"
  kill -KILL "$victim" "$launcher" 2>/dev/null
  exit 1
fi
wait "$launcher"
code=$?
ms=$((($(date +%s%N) - faulted) / 1000000))
echo "fault $fault on rank $rank: run ended after $((ms / 1000)).$(printf %03d $((ms % 1000))) s with exit $code"
cat "$stderr_file"
((code >= 1 && code <= 127)) || { echo "FAIL: exit $code"; exit 1; }
grep -q "rank $rank " "$stderr_file" || { echo "FAIL: the error does not name rank $rank"; exit 1; }
((ms < 60000)) || { echo "FAIL: took $ms ms (want < 60 s)"; exit 1; }
echo "ok"
