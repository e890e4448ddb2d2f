#!/usr/bin/env bash
# Configures and builds pipeweave into build/ (or $PW_BUILD_DIR). Arguments are passed to
# CMake's configure step (e.g. -DPW_SANITIZE=address), except `--target T`, which builds
# only T.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PW_BUILD_DIR:-$root/build}
jobs=${PW_JOBS:-$(nproc)}
configure=()
target=()
while (($#)); do
  if [[ $1 == --target ]]; then
    target=(--target "$2")
    shift 2
  else
    configure+=("$1")
    shift
  fi
done
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${PW_BUILD_TYPE:-RelWithDebInfo} \
  "${configure[@]}" >/dev/null
cmake --build "$build" -j "$jobs" "${target[@]}"
