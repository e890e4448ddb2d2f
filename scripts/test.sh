#!/usr/bin/env bash
# Sets up, builds and runs the test suite. Usage:
#   scripts/test.sh                 # the normal build; every test but those labelled slow
#   scripts/test.sh --all           # ... and the slow ones too (fuzzing, multi-host, liveness)
#   scripts/test.sh --sanitize address|thread   # ASan+UBSan or TSan build in build-<name>/
# The slow tests (label "slow": the fuzz targets' clang build and runs, the network-
# namespace cluster, rank processes left to time out) spend about half the suite's time
# mostly waiting; without them a fresh clone builds and tests in well under 15 minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=""
all=0
while (($#)); do
  case $1 in
    --all) all=1 ;;
    --sanitize)
      sanitize=${2:?"--sanitize needs address or thread"}
      shift
      export PW_BUILD_DIR=${PW_BUILD_DIR:-$root/build-$sanitize}
      ;;
    *) echo "test.sh: unknown argument '$1' (expected --all or --sanitize address|thread)" >&2
       exit 2 ;;
  esac
  shift
done
build=${PW_BUILD_DIR:-$root/build}
# What TSan cannot see inside uninstrumented libraries (cmake/tsan.supp says which).
if [[ $sanitize == thread ]]; then
  export TSAN_OPTIONS="suppressions=$root/cmake/tsan.supp ${TSAN_OPTIONS:-}"
fi
# GCC 12's ASan records the dynamic TLS blocks of libraries opened later (libgomp, through
# the CPU math module) with bogus ranges on Debian 12's glibc, and the leak check's tracer
# then crashes reading them at exit ("Tracer caught signal 11" after a test passed). Not
# recording them, the check scans every stack and the static TLS: a block left out can only
# make a pointer held there alone look leaked, never hide a leak (the suite reports none).
if [[ $sanitize == address ]]; then
  export ASAN_OPTIONS="intercept_tls_get_addr=0 ${ASAN_OPTIONS:-}"
fi
# Under a sanitizer the fuzz tests (label fuzz) are left out: tests/CMakeLists.txt says why.
exclude=()
if ((!all)); then
  exclude=(-LE "^slow$")
elif [[ -n $sanitize ]]; then
  exclude=(-LE "^fuzz$")
fi
# One parallelism for the build, ctest and the fuzz targets' build inside the suite.
export PW_JOBS=${PW_JOBS:-$(nproc)}
"$root/scripts/build.sh" -DPW_SANITIZE="$sanitize"
cd "$build"
ctest --output-on-failure -j "$PW_JOBS" --timeout 600 "${exclude[@]}"
