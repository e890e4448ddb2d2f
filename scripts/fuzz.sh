#!/usr/bin/env bash
# Builds the libFuzzer target for the loader + verifier with clang (ASan+UBSan) and runs it
# for a while on the seed corpus. Usage: scripts/fuzz.sh [SECONDS]  (default 20)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-20}
build=${PW_FUZZ_BUILD_DIR:-$root/build-fuzz}
[[ -n ${PW_SKIP_DEPS:-} ]] || "$root/scripts/install-deps.sh"
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPW_BUILD_FUZZERS=ON -DPW_BUILD_TESTS=OFF -DPW_BUILD_BENCHMARKS=OFF -DPW_ENABLE_CUDA=OFF >/dev/null
cmake --build "$build" --target loader_fuzzer -j "${PW_JOBS:-$(nproc)}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root"/tests/fuzz/corpus/* "$work/" 2>/dev/null || true
"$build/tests/fuzz/loader_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work"
