#!/usr/bin/env bash
# The GPU check, run from a bundle made by scripts/gpu_bundle.sh on a machine with a GPU and
# the CUDA toolkit:  bash BUNDLE/gpu_check.sh OUT_DIR  (under 8 minutes).
#   1. the CUDA backend's tests (tests/executor_cuda);
#   2. the small GPT and the small Llama trained on CUDA beside the CPU reference, f32 and bf16
#      (losses side by side); then the GPT stopped after a checkpoint and resumed, f32, bf16
#      and fp16: bit-identical or not;
#   3. `profile --backend cuda` of the op signatures of one GPT-3 6.7B-shaped layer (mp 1, bf16)
#      into OUT_DIR/h100.pbtxt (h200.pbtxt, a100.pbtxt: named after the GPU);
#   4. that layer simulated with those costs and with the built-in spec alone, beside its
#      measured CUDA step;
#   5. while time is left, its mp 2 shards (bf16, f32) and the layers of other published shapes
#      profiled into the same table;
#   6. where python3 has PyTorch, reference kernel costs (gpu_reference_kernels.py: cuBLAS
#      GEMMs, element-wise bandwidth, cuDNN attention, layer norm) into
#      OUT_DIR/DEVICE_reference_kernels.csv, the format of cost_model/data/'s.
# Everything it prints is also in OUT_DIR/gpu_check.log. PW_GPU_CHECK_CPU_ONLY=1 runs only
# the commands that need no GPU (gpu_bundle.sh --check-here proves the bundle with it).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: gpu_check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
budget=${PW_GPU_CHECK_SECONDS:-330}  # no new section starts after this
cpu_only=${PW_GPU_CHECK_CPU_ONLY:-0}
device=h100  # the built-in spec of the GPU, from its name below
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exec > >(tee "$out/gpu_check.log") 2>&1

section() { echo; echo "==== $1 ($(date +%T), ${SECONDS}s)"; }
timed() {  # timed SECONDS CMD...: runs CMD, killed after SECONDS
  local limit=$1
  shift
  timeout -k 5 "$limit" "$@"
  local rc=$?
  ((rc == 124 || rc == 137)) && echo "(stopped after ${limit}s)"
  return $rc
}
time_left() { ((SECONDS < budget)); }

tar -C "$work" -xzf "$here/payload.tar.gz" || { echo "cannot unpack $here/payload.tar.gz"; exit 1; }
pw=$work/bin/pipeweave
libs=$work/lib
# This machine's libstdc++ must know every symbol version the bundle's was built with.
newest=$(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$work/lib/fallback/libstdc++.so.6" | sort -uV | tail -1)
system_cxx=$(PATH=$PATH:/sbin:/usr/sbin ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
if [[ -z $system_cxx ]] || ! grep -aq "$newest" "$system_cxx"; then
  libs=$libs:$work/lib/fallback
  echo "libstdc++: this machine's lacks $newest, using the bundle's"
fi
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

section "machine"
uname -sr
grep -m1 PRETTY_NAME /etc/os-release 2>/dev/null
nproc
if ((cpu_only)); then
  echo "PW_GPU_CHECK_CPU_ONLY=1: the commands that need no GPU"
else
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  case $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) in
    *H200*) device=h200 ;;
    *A100*) device=a100 ;;
  esac
  # cudart, cuBLAS and NCCL from this machine: the toolkit's folders, then Python's wheels.
  for name in $(ldd "$work/lib/libpipeweave_cuda.so" | awk '/not found/ {print $1}'); do
    found=""
    for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
      /usr/lib/x86_64-linux-gnu; do
      [[ -e $dir/$name ]] && { found=$dir; break; }
    done
    [[ -z $found ]] && found=$(find /opt /usr/local /usr/lib -xdev -name "$name" 2>/dev/null |
      head -1 | xargs -r dirname)
    if [[ -n $found ]]; then
      export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$found
      echo "$name: $found"
    else
      echo "$name: NOT FOUND on this machine"
    fi
  done
  ldd "$work/lib/libpipeweave_cuda.so" | grep 'not found' && echo "the CUDA backend cannot load"
fi

if ((!cpu_only)); then
  section "1. CUDA backend tests"
  timed 120 "$work/tests/executor_cuda_test" --gtest_color=no >"$out/executor_cuda_test.log" 2>&1
  echo "exit $?"
  grep -E '^\[ +(FAILED|SKIPPED|PASSED) +\]|tests? ran|^\[  FAILED' "$out/executor_cuda_test.log" | sort -u
  grep -B2 -A12 'Failure$' "$out/executor_cuda_test.log" | head -120
fi

section "2. the small GPT and the small Llama on CUDA beside the CPU reference"
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --seed 1 -o "$work/gpt.pbtxt"
"$pw" build-model llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 --ffn 176 --seq 16 \
  --vocab 128 --micro-batch-size 2 --seed 1 -o "$work/llama.pbtxt"
# Megatron's layer as the published runs build it: unfused attention, dropout, fused bias
# epilogues (bias_gelu, bias_dropout_add) and views.
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --seed 1 --attention unfused --dropout 0.1 --bias-fusion on \
  -o "$work/gpt_megatron.pbtxt"
for model in gpt llama gpt_megatron; do
  "$pw" opt "$work/$model.pbtxt" -p 'append-backward{optimizer=adam,lr=0.01}' \
    -o "$work/${model}_f32.pb"
  "$pw" opt "$work/$model.pbtxt" -p 'append-backward{optimizer=adam,lr=0.01},amp{dtype=bf16}' \
    -o "$work/${model}_bf16.pb"
  for dtype in f32 bf16; do
    echo "-- $model $dtype: 10 steps of 4 micro-batches"
    if ((cpu_only)); then
      timed 120 "$pw" run "$work/${model}_$dtype.pb" --reference --steps 3 --micro-batches 4
    else
      timed 120 "$pw" run-parallel "$work/${model}_$dtype.pb" --nproc 1 --backend cuda \
        --steps 10 --micro-batches 4 --compare-reference "$work/${model}_$dtype.pb"
    fi
    echo "exit $?"
  done
done

section "2b. checkpoints on CUDA: 3 steps, then resumed to 6, against 6 never stopped"
"$pw" opt "$work/gpt.pbtxt" -p 'append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1e6}' \
  -o "$work/gpt_fp16.pb"
losses() { sed -n 's/.*"losses": \[\([^]]*\)\].*/\1/p' "$1" | tr -d ' '; }
backend=cuda
((cpu_only)) && backend=cpu
for dtype in f32 bf16 fp16; do
  ck=("$pw" run-parallel "$work/gpt_$dtype.pb" --nproc 1 --backend $backend --micro-batches 4
    --report json)
  timed 60 "${ck[@]}" --steps 6 --save-params "$work/whole_$dtype" >"$work/whole_$dtype.json" &&
    timed 60 "${ck[@]}" --steps 3 --checkpoint-dir "$work/ck_$dtype" >/dev/null &&
    timed 60 "${ck[@]}" --steps 6 --resume "$work/ck_$dtype" --save-params "$work/res_$dtype" \
      >"$work/res_$dtype.json"
  echo "exit $? ($dtype)"
  want=$(losses "$work/whole_$dtype.json" | cut -d, -f4-)
  got=$(losses "$work/res_$dtype.json")
  echo "$dtype: never stopped $want; resumed $got"
  [[ -n $got && $got == "$want" ]] && cmp -s "$work/whole_$dtype/rank0.params" "$work/res_$dtype/rank0.params" &&
    echo "$dtype: losses 4-6 and final parameters bit-identical" || echo "$dtype: DIFFERENT"
done

section "3. profile --backend cuda: one GPT-3 6.7B-shaped layer (mp 1, bf16)"
layer() {  # layer NAME HIDDEN HEADS FFN MP DTYPE
  local amp=""
  [[ $6 == bf16 ]] && amp=",amp{dtype=bf16}"
  "$pw" build-model gpt --layers 1 --hidden "$2" --heads "$3" --ffn "$4" --seq 2048 --vocab 51200 \
    --micro-batch-size 1 --mp "$5" -o "$work/$1_fwd.pb" &&
    "$pw" opt "$work/$1_fwd.pb" -p "append-backward{optimizer=adam}$amp" -o "$work/$1.pb"
}
costs=$work/costs.pbtxt
profile() {  # profile NAME: its signatures merged into the table
  if ((cpu_only)); then
    timed 60 "$pw" profile "$work/$1.pb" -o "$costs" --merge --backend cuda
  else
    timed 90 "$pw" profile "$work/$1.pb" -o "$costs" --merge --backend cuda --repeat 10
  fi
  local rc=$?
  [[ -s $costs ]] && cp "$costs" "$out/$device.pbtxt"
  echo "exit $rc (${SECONDS}s)"
}
time_left && layer gpt67_mp1_bf16 4096 32 16384 1 bf16 && profile gpt67_mp1_bf16

section "4. the mp 1 bf16 layer: simulated against measured"
step_ms() {  # the median step time after the first, from --report json
  sed -n 's/.*"step_time_ms": \[\([^]]*\)\].*/\1/p' | tr ',' '\n' | tail -n +2 | sort -g |
    awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'
}
sim_ms() { sed -n 's/.*"step_time_ms": \([0-9.e+-]*\).*/\1/p'; }
if time_left && [[ -s $work/gpt67_mp1_bf16.pb ]]; then
  builtin=$("$pw" sim "$work/gpt67_mp1_bf16.pb" --device "$device" --format json | sim_ms)
  echo "simulated, built-in $device spec:     ${builtin:-?} ms"
  if [[ -s $costs ]]; then
    "$pw" sim "$work/gpt67_mp1_bf16.pb" --device "$device" --costs "$costs" --coverage | head -12
    with_costs=$("$pw" sim "$work/gpt67_mp1_bf16.pb" --device "$device" --costs "$costs" --format json | sim_ms)
    echo "simulated, measured op costs:      ${with_costs:-?} ms"
  fi
  if ((!cpu_only)); then
    measured=$(timed 120 "$pw" run-parallel "$work/gpt67_mp1_bf16.pb" --nproc 1 --backend cuda \
      --steps 8 --report json | tee "$work/run.json" | step_ms)
    echo "measured on CUDA (median of 7 steps): ${measured:-?} ms"
    [[ -z $measured ]] && tail -5 "$work/run.json"
    # The first timed step against the later ones (the goal: within 1.2x), after one warm-up
    # step whose time is the cold first step's plus copying the parameters out and back.
    first=$(sed -n 's/.*"step_time_ms": \[\([0-9.]*\).*/\1/p' "$work/run.json")
    warmup=$(sed -n 's/.*"warmup_ms": \([0-9.]*\).*/\1/p' "$work/run.json")
    [[ -n $first && -n $measured ]] && awk -v f="$first" -v m="$measured" -v w="${warmup:-?}" \
      'BEGIN {printf "first timed step %.1f ms = %.2fx the later median; warm-up step %s ms\n", f, f / m, w}'
  fi
fi

section "5. the mp 2 shards of that layer, then more published shapes, while time is left"
for shape in "gpt67_mp2_bf16 4096 32 16384 2" "gpt67_mp2_f32 4096 32 16384 2 f32" "gpt13_mp4 5120 40 20480 4" "gpt175_mp8 12288 96 49152 8" "gpt2b_mp1 2560 32 10240 1" \
  "gpt20_mp8 6144 48 24576 8" "gpt39_mp8 8192 64 32768 8"; do
  time_left || break
  set -- $shape
  echo "-- $1: hidden $2, heads $3, ffn $4, mp $5, ${6:-bf16}"
  layer "$1" "$2" "$3" "$4" "$5" "${6:-bf16}" && profile "$1"
done

section "6. reference kernels through PyTorch"
if ((cpu_only)); then
  echo "(needs a GPU)"
elif python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  left=$((budget + 60 - SECONDS))
  ((left < 30)) && left=30
  timed $((left + 30)) python3 "$here/gpu_reference_kernels.py" "$left" \
    >"$out/${device}_reference_kernels.csv" 2>"$work/reference.err"
  echo "exit $? ($(grep -c '^[a-z]' "$out/${device}_reference_kernels.csv") rows, ${SECONDS}s)"
  tail -3 "$work/reference.err"
else
  echo "python3 has no PyTorch with CUDA here: skipped"
fi

section "done in ${SECONDS}s"
[[ -s $costs ]] && grep -c 'key:' "$costs" | sed 's/^/cost table entries: /'
ls -la "$out"
