#!/usr/bin/env bash
# The commands that neither train nor profile load none of the heavy libraries (oneDNN,
# Highway, OpenCL, OpenMP, Gloo, hiredis, ibverbs, libnl, CUDA's, nor pipeweave's own
# modules that hold them), and neither does a bad flag or a bad file: they fail first.
# A 2-rank pipeline run loads the CPU math and Gloo modules and trains, which shows the
# check sees a load.
#   light_startup.sh PIPEWEAVE MODULE
set -u
pw=$1
module=$2
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
"$pw" build-model gpt --layers 2 --hidden 32 --heads 2 --seq 8 --vocab 64 --pp 2 \
  -o "$work/gpt.pbtxt" >/dev/null || { echo "FAIL: build-model"; exit 1; }
check_light run-parallel "$work/gpt.pbtxt" --rank 0 --world-size 2 --store "redis://host:notaport"

train=(run-parallel "$work/gpt.pbtxt" --nproc 2 --steps 1 --threads 1 --run-dir "$work/run"
  --pipeline "append-backward,split-program,schedule{kind=1f1b,micro-batches=2},insert-p2p")
"$pw" "${train[@]}" >/dev/null 2>&1 || { echo "FAIL: 'pipeweave ${train[*]}' failed"; status=1; }
rm -rf "$work/run"
trained=$(loaded "$pw" "${train[@]}")
for lib in libpipeweave_cpu_math.so libpipeweave_gloo.so; do
  if grep -qx "$lib" <<<"$trained"; then
    echo "ok: a 2-rank run loads $lib"
  else
    echo "FAIL: a 2-rank run did not load $lib (is the check blind?)"
    status=1
  fi
done
exit $status
