#!/usr/bin/env bash
# Installs every Debian package pipeweave needs. Idempotent: apt-get runs only when
# something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git lld
  protobuf-compiler libprotobuf-dev
  libboost-graph-dev
  libgoogle-glog-dev libgflags-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev libhiredis-dev libdnnl-dev libopenblas-dev libhwy-dev
  clang-14 libclang-rt-14-dev llvm-14-tools clang-format
  redis-server iproute2 time bc python3
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
