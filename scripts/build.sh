#!/usr/bin/env bash
# Configures and builds pipeweave into build/ (or $PW_BUILD_DIR). Extra arguments are
# passed to CMake's configure step, e.g. -DPW_SANITIZE=address.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PW_BUILD_DIR:-$root/build}
jobs=${PW_JOBS:-$(nproc)}
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${PW_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$build" -j "$jobs"
