#!/usr/bin/env bash
# Builds, with the CUDA backend, a self-contained folder DIR for a GPU machine that has the
# CUDA toolkit but none of pipeweave's Debian libraries:
#   DIR/gpu_check.sh        the check (scripts/gpu_check.sh): run it there, `DIR/gpu_check.sh OUT`
#   DIR/gpu_reference_kernels.py  reference kernel costs through PyTorch, run by the check
#   DIR/payload.tar.gz      bin/pipeweave, lib/libpipeweave_{cuda,cpu_math,gloo}.so (the
#                           modules it opens on first use), tests/executor_cuda_test
#                           (stripped) and lib/ with the shared libraries they need from this
#                           machine, except glibc's and the CUDA toolkit's own (cudart, cuBLAS,
#                           NCCL: the GPU machine has its own, found by gpu_check.sh);
#                           lib/fallback/ holds this machine's libstdc++ and libgcc_s for a GPU
#                           machine whose own are older.
# `scripts/gpu_bundle.sh DIR --check-here` then runs the check's CPU commands from a copy of
# the bundle in a clean folder, with only the bundle's libraries (no GPU needed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/gpu_bundle.sh DIR [--check-here]}
check_here=${2:-}
build=${PW_GPU_BUILD_DIR:-$root/build}
limit_mib=64

if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "gpu_bundle: no CUDA toolkit (nvcc) on this machine: the bundle needs the CUDA backend" >&2
  exit 1
fi
PW_BUILD_DIR=$build "$root/scripts/build.sh" -DPW_ENABLE_CUDA=ON --target pipeweave >/dev/null
cmake --build "$build" -j "$(nproc)" --target pw_cuda_backend executor_cuda_test >/dev/null
if [[ ! -f $build/lib/libpipeweave_cuda.so ]]; then
  echo "gpu_bundle: the build has no CUDA backend (was the toolkit found when $build was configured?)" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib/fallback" "$stage/tests"
cp "$build/tools/pipeweave" "$stage/bin/"
modules=(libpipeweave_cuda.so libpipeweave_cpu_math.so libpipeweave_gloo.so)
for module in "${modules[@]}"; do cp "$build/lib/$module" "$stage/lib/"; done
cp "$build/tests/executor_cuda/executor_cuda_test" "$stage/tests/"
strip --strip-unneeded "$stage/bin/pipeweave" "$stage/tests/executor_cuda_test" \
  "${modules[@]/#/$stage/lib/}"

# Libraries from this machine, resolved by the loader for every file of the bundle.
is_system() {  # glibc and the dynamic loader: the GPU machine's own must be used
  case $(basename "$1") in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | \
      libresolv.so.* | libutil.so.* | linux-vdso*) return 0 ;;
  esac
  return 1
}
is_cuda() {  # the toolkit's and the driver's: the GPU machine has its own
  case $1 in
    /usr/local/cuda* | */libcuda.so* | */libnvidia-*) return 0 ;;
  esac
  case $(basename "$1") in
    libcudart.so* | libcublas.so* | libcublasLt.so* | libnccl.so*) return 0 ;;
  esac
  return 1
}
for file in "$stage/bin/pipeweave" "$stage/tests/executor_cuda_test" "${modules[@]/#/$stage/lib/}"; do
  ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  is_system "$lib" && continue
  is_cuda "$lib" && continue
  case $(basename "$lib") in
    libstdc++.so.* | libgcc_s.so.*) cp -L "$lib" "$stage/lib/fallback/" ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
find "$stage/lib" -name '*.so*' -type f -exec strip --strip-unneeded {} + 2>/dev/null || true

rm -rf "$out"
mkdir -p "$out"
cp "$root/scripts/gpu_check.sh" "$out/gpu_check.sh"
cp "$root/scripts/gpu_reference_kernels.py" "$out/gpu_reference_kernels.py"
tar -C "$stage" -czf "$out/payload.tar.gz" .
size_kib=$(du -sk "$out" | cut -f1)
echo "gpu_bundle: $out: $((size_kib / 1024)) MiB ($(du -sk "$stage" | cut -f1 | awk '{printf "%d", $1/1024}') MiB unpacked): $(cd "$stage" && find . -type f | sort | tr '\n' ' ')"
if ((size_kib > limit_mib * 1024)); then
  echo "gpu_bundle: $out is over the ${limit_mib} MiB a GPU machine takes" >&2
  exit 1
fi

if [[ $check_here == --check-here ]]; then
  # A clean folder, no build tree, only the bundle's libraries: what the GPU machine sees.
  clean=$(mktemp -d)
  trap 'rm -rf "$stage" "$clean"' EXIT
  cp -r "$out" "$clean/bundle"
  (cd "$clean" && env -i PATH=/usr/bin:/bin HOME="$clean" PW_GPU_CHECK_CPU_ONLY=1 \
    bash bundle/gpu_check.sh "$clean/out")
fi
