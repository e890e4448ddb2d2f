#!/usr/bin/env bash
# The command line opens CUDA's libraries only for --backend cuda:
#   no_cuda_at_startup.sh PIPEWEAVE
# Fails when a command that does not ask for CUDA loads cudart, cuBLAS or NCCL.
set -u
pw=$1
loaded=$(LD_DEBUG=files "$pw" schedule --kind 1f1b --stages 2 --micro-batches 2 --format json \
  2>&1 >/dev/null | grep -oE 'file=[^ ]*(cudart|cublas|nccl)[^ ]*' | sort -u)
if [[ -n $loaded ]]; then
  echo "FAIL: 'pipeweave schedule' loaded: $loaded"
  exit 1
fi
echo "ok: no CUDA library loaded"
