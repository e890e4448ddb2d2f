#!/usr/bin/env bash
# Start-up of the commands that neither train nor profile (`schedule --help`,
# `opt --list-passes`, `inspect` on the demo GPT): medians of whole-process runs
# (benchmarks/startup_time.cc), and which heavy libraries each one loaded (none should).
#
#   benchmarks/startup.sh [RUNS (21)]
# PW_BEFORE=/path/to/an/older/pipeweave times it alternately beside this build;
# PW_STARTUP_MAX_MS=10 fails when a median is over 10 ms.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PW_BUILD_DIR:-$root/build}
pw=${PW_TOOL:-$build/tools/pipeweave}
runs=${1:-21}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --mp 1 --pp 1 --seed 1 -o "$work/gpt.pbtxt" >/dev/null
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
args=("$pw" "$work/gpt.pbtxt" --runs "$runs")
[[ -n ${PW_BEFORE:-} ]] && args+=(--before "$PW_BEFORE")
[[ -n ${PW_STARTUP_MAX_MS:-} ]] && args+=(--max-ms "$PW_STARTUP_MAX_MS")
"$build/benchmarks/startup_time" "${args[@]}"
echo "the libraries each command loads:"
for command in "schedule --help" "opt --list-passes" "inspect $work/gpt.pbtxt"; do
  # shellcheck disable=SC2086
  libs=$(LD_DEBUG=files "$pw" $command 2>&1 >/dev/null | grep -oE 'file=[^ ]+' |
    sed 's/file=//' | xargs -r -n1 basename | sort -u | tr '\n' ' ')
  printf '  %-24s %s\n' "${command%% /*}" "$libs"
done
