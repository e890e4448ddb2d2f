#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for a while on its
# seed corpus (tests/fuzz/corpus/TARGET). Usage:
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (default 20 s each; targets: loader_fuzzer,
#                                            plan_checker_fuzzer, schedule_csv_fuzzer)
#   scripts/fuzz.sh --build-only [TARGET...]          builds them, runs nothing
#   scripts/fuzz.sh --no-build [SECONDS] [TARGET...]  runs what an earlier build made
# The targets build together, with PW_JOBS jobs (default: all cores), into
# PW_FUZZ_BUILD_DIR (build-fuzz/). The test suite builds them once with --build-only and
# runs each with --no-build (tests/CMakeLists.txt).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_step=1
run_step=1
case ${1:-} in
  --build-only) run_step=0 && shift ;;
  --no-build) build_step=0 && shift ;;
esac
seconds=20
if ((run_step)) && (($#)); then
  seconds=$1
  shift
fi
targets=("$@")
((${#targets[@]})) || targets=(loader_fuzzer plan_checker_fuzzer schedule_csv_fuzzer)
build=${PW_FUZZ_BUILD_DIR:-$root/build-fuzz}
if ((build_step)); then
  [[ -n ${PW_SKIP_DEPS:-} ]] || "$root/scripts/install-deps.sh"
  # Line tables only (-gline-tables-only): the sanitizers' reports keep file and line, and
  # the build takes ~10 % less compile time than with full debug information.
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
    -DPW_BUILD_FUZZERS=ON -DPW_BUILD_TESTS=OFF \
    -DPW_BUILD_BENCHMARKS=OFF -DPW_ENABLE_CUDA=OFF >/dev/null
  cmake --build "$build" -j "${PW_JOBS:-$(nproc)}" --target "${targets[@]}"
fi
((run_step)) || exit 0
for target in "${targets[@]}"; do
  binary=$build/tests/fuzz/$target
  [[ -x $binary ]] || { echo "fuzz.sh: $binary is not built (run without --no-build)" >&2; exit 1; }
  work=$(mktemp -d)
  cp "$root"/tests/fuzz/corpus/"$target"/* "$work/" 2>/dev/null || true
  echo "== $target: $seconds s"
  "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$work" || { rm -rf "$work"; exit 1; }
  rm -rf "$work"
done
