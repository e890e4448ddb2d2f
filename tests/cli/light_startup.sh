#!/usr/bin/env bash
# The commands that neither train nor profile load none of the heavy libraries (oneDNN,
# Highway, OpenCL, OpenMP, Gloo, hiredis, ibverbs, libnl, CUDA's, nor pipeweave's own
# modules that hold them), and neither does a bad flag or a bad file: they fail first.
# Training loads the CPU math and Gloo modules, which shows the check sees a load.
#   light_startup.sh PIPEWEAVE MODULE TRAINABLE_MODULE
set -u
pw=$1
module=$2
trainable=$3
heavy='(libdnnl|libhwy|libOpenCL|libgomp|libgloo|libhiredis|libibverbs|libnl-|libpipeweave_|cudart|cublas|nccl)'
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The libraries a command loads, one base name a line.
loaded() { LD_DEBUG=files "$@" 2>&1 >/dev/null | grep -oE 'file=[^ ]+' | sed 's/file=//' |
  xargs -r -n1 basename | sort -u; }

status=0
check_light() {
  local found
  found=$(loaded "$pw" "$@" | grep -E "$heavy" | tr '\n' ' ')
  if [[ -n $found ]]; then
    echo "FAIL: 'pipeweave $*' loaded $found"
    status=1
  else
    echo "ok: 'pipeweave $*' loads no heavy library"
  fi
}
check_light schedule --help
check_light opt --list-passes
check_light inspect "$module"
check_light schedule --kind 1f1b --stages 4 --micro-batches 8 --format json
check_light opt "$module" -p dce -o "$work/out.pb"
check_light run --no-such-flag
check_light run "$work/does_not_exist.pb" --steps 1
check_light run-parallel "$trainable" --rank 0 --world-size 2 --store "redis://host:notaport"

for lib in libpipeweave_cpu_math.so libpipeweave_gloo.so; do
  if loaded "$pw" run "$trainable" --nproc 2 --steps 1 --threads 1 | grep -qx "$lib"; then
    echo "ok: 'pipeweave run --nproc 2' loads $lib"
  else
    echo "FAIL: 'pipeweave run --nproc 2' did not load $lib (is the check blind?)"
    status=1
  fi
done
exit $status
