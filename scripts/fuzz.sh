#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for a while on its
# seed corpus (tests/fuzz/corpus/TARGET). Usage:
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (default 20 s each; targets: loader_fuzzer,
#                                            plan_checker_fuzzer, schedule_csv_fuzzer)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-20}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(loader_fuzzer plan_checker_fuzzer schedule_csv_fuzzer)
build=${PW_FUZZ_BUILD_DIR:-$root/build-fuzz}
[[ -n ${PW_SKIP_DEPS:-} ]] || "$root/scripts/install-deps.sh"
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPW_BUILD_FUZZERS=ON -DPW_BUILD_TESTS=OFF -DPW_BUILD_BENCHMARKS=OFF -DPW_ENABLE_CUDA=OFF >/dev/null
for target in "${targets[@]}"; do
  cmake --build "$build" --target "$target" -j "${PW_JOBS:-$(nproc)}"
done
for target in "${targets[@]}"; do
  work=$(mktemp -d)
  cp "$root"/tests/fuzz/corpus/"$target"/* "$work/" 2>/dev/null || true
  echo "== $target: $seconds s"
  "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$work" || { rm -rf "$work"; exit 1; }
  rm -rf "$work"
done
