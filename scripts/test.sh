#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. Usage:
#   scripts/test.sh                 # the normal build
#   scripts/test.sh --sanitize address|thread   # ASan+UBSan or TSan build in build-<name>/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=""
if [[ ${1:-} == --sanitize ]]; then
  sanitize=${2:?"--sanitize needs address or thread"}
  export PW_BUILD_DIR=${PW_BUILD_DIR:-$root/build-$sanitize}
fi
build=${PW_BUILD_DIR:-$root/build}
# What TSan cannot see inside uninstrumented libraries (cmake/tsan.supp says which).
if [[ $sanitize == thread ]]; then
  export TSAN_OPTIONS="suppressions=$root/cmake/tsan.supp ${TSAN_OPTIONS:-}"
fi
# Under a sanitizer the fuzz tests (label fuzz) are left out: tests/CMakeLists.txt says why.
exclude=()
[[ -n $sanitize ]] && exclude=(-LE "^fuzz$")
# One parallelism for the build, ctest and the fuzz targets' build inside the suite.
export PW_JOBS=${PW_JOBS:-$(nproc)}
"$root/scripts/build.sh" -DPW_SANITIZE="$sanitize"
cd "$build"
ctest --output-on-failure -j "$PW_JOBS" --timeout 600 "${exclude[@]}"
