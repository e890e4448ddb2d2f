#!/usr/bin/env bash
# Executor and command-line speed, side by side in one run (medians):
#   - start-up: `pipeweave schedule --help` and a 32-stage, 1024-micro-batch 1f1b schedule
#     with communication as JSON;
#   - the medium GPT step (8 layers, hidden 512, 8 heads, ffn 2048, seq 128, vocab 1024,
#     micro-batch size 4, 8 micro-batches, adam) on the reference runner and on a 1-rank
#     executor, with 1 thread and with every core; with PW_LARGE_GPT=1 also the large GPT
#     (12 layers, hidden 768, 12 heads, ffn 3072, seq 256, vocab 8192);
#   - the demo-size GPT (4 layers, hidden 64) at mp=2 on 2 rank processes against 1 process;
#   - all-reduce of 8 KiB and 1 MiB between 2 processes: a plain Gloo loop against the
#     executor's communicator (benchmarks/allreduce_bench), when built, and the same sizes
#     inside training (profile --comm on GPTs at mp=2).
# With PW_BEFORE=/path/to/an/older/pipeweave every figure is also taken with that binary
# and the ratio after/before is printed.
#
#   benchmarks/executor_speed.sh [ROUNDS (3)] [STEPS (3)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PW_BUILD_DIR:-$root/build}
pw=${PW_TOOL:-$build/tools/pipeweave}
before=${PW_BEFORE:-}
rounds=${1:-3}
steps=${2:-3}
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf (b > 0 ? "%.2fx" : "-"), a / b}'; }

# Wall milliseconds of one run of CMD (output discarded).
wall_ms() {
  local t0=$EPOCHREALTIME
  "$@" >/dev/null 2>&1
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", (b - a) * 1000}'
}

# The step times (ms) of a JSON report after its first step, one per line.
later_steps() { sed -E 's/.*"step_time_ms": \[([^]]*)\].*/\1/' | tr ',' '\n' | tail -n +2; }
losses() { sed -E 's/.*"losses": \[([^]]*)\].*/\1/'; }

echo "machine: $cores cores, $(uname -m); vector kernels: see pw_ops_vector_math_test"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# --- start-up ---------------------------------------------------------------------------
startup() {
  local name=$1
  shift
  local now=() old=()
  for ((i = 0; i < 10 * rounds; i++)); do
    now+=("$(wall_ms "$pw" "$@")")
    [[ -n $before ]] && old+=("$(wall_ms "$before" "$@")")
  done
  local a
  a=$(median "${now[@]}")
  if [[ -n $before ]]; then
    local b
    b=$(median "${old[@]}")
    printf '%-44s before %8.2f ms  after %8.2f ms  after/before %s\n' "$name" "$b" "$a" \
      "$(ratio "$a" "$b")"
  else
    printf '%-44s %8.2f ms\n' "$name" "$a"
  fi
}
echo "start-up (median of $((10 * rounds)) runs, wall time)"
startup "schedule --help" schedule --help
startup "schedule 1f1b 32 stages 1024 mb --with-comms" schedule --kind 1f1b --stages 32 \
  --micro-batches 1024 --with-comms --format json
echo

# --- GPT steps ---------------------------------------------------------------------------
# gpt_step NAME BUILD-MODEL-ARGS...: the step of that GPT (8 micro-batches, adam) on the
# reference runner and a 1-rank executor at 1 thread and every core, interleaved per round.
gpt_step() {
  local name=$1
  shift
  "$pw" build-model gpt "$@" --micro-batch-size 4 -o "$work/$name.pb" >/dev/null
  "$pw" opt "$work/$name.pb" -p 'append-backward{optimizer=adam}' -o "$work/${name}_train.pb" \
    >/dev/null
  local -A times first_losses
  local configs=("reference 1 thread" "reference $cores threads" "executor 1 rank, 1 thread"
    "executor 1 rank, $cores threads")
  local before_configs=()
  [[ -n $before ]] && before_configs=("before: reference" "before: executor 1 rank")
  local r c json m same ref1
  for ((r = 0; r < rounds; r++)); do
    for c in "${configs[@]}" "${before_configs[@]}"; do
      case $c in
        "before: reference") json=$("$before" run "$work/${name}_train.pb" --reference \
          --steps "$steps" --micro-batches 8 --report json) ;;
        "before: executor 1 rank") json=$("$before" run "$work/${name}_train.pb" --nproc 1 \
          --steps "$steps" --micro-batches 8 --report json) ;;
        *) # shellcheck disable=SC2046
          json=$("$pw" run "$work/${name}_train.pb" $(args_of "$c") --steps "$steps" \
            --micro-batches 8 --report json) ;;
      esac
      times[$c]+=" $(echo "$json" | later_steps | tr '\n' ' ')"
      first_losses[$c]=$(echo "$json" | losses)
    done
  done
  echo "$name GPT step ($*), 8 micro-batches, adam (median of $((rounds * (steps - 1))) steps)"
  # shellcheck disable=SC2086
  ref1=$(median ${times["reference 1 thread"]})
  for c in "${configs[@]}" "${before_configs[@]}"; do
    # shellcheck disable=SC2086
    m=$(median ${times[$c]})
    same=$([[ ${first_losses[$c]} == "${first_losses["reference 1 thread"]}" ]] && echo same ||
      echo differ)
    printf '%-34s %9.1f ms  vs reference 1 thread %s  losses %s\n' "$c" "$m" \
      "$(ratio "$m" "$ref1")" "$same"
  done
  echo
}
args_of() {
  case $1 in
    "reference 1 thread") echo "--reference --threads 1" ;;
    "reference $cores threads") echo "--reference --threads $cores" ;;
    "executor 1 rank, 1 thread") echo "--nproc 1 --threads 1" ;;
    "executor 1 rank, $cores threads") echo "--nproc 1 --threads $cores" ;;
  esac
}
gpt_step medium --layers 8 --hidden 512 --heads 8 --ffn 2048 --seq 128 --vocab 1024
# About 40 s a step at one thread on 2 cores: only when asked.
if [[ ${PW_LARGE_GPT:-0} == 1 ]]; then
  gpt_step large --layers 12 --hidden 768 --heads 12 --ffn 3072 --seq 256 --vocab 8192
fi

# --- mp=2 on 2 processes against 1 process ----------------------------------------------
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --seed 1 -o "$work/demo.pb" >/dev/null
"$pw" build-model gpt --layers 4 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
  --micro-batch-size 2 --mp 2 --seed 1 -o "$work/demo_mp2.pb" >/dev/null
demo_ratio() {
  local tool=$1 one=() two=()
  for ((r = 0; r < rounds; r++)); do
    one+=($("$tool" run "$work/demo.pb" --nproc 1 --steps 12 --micro-batches 8 --report json |
      later_steps))
    two+=($("$tool" run "$work/demo_mp2.pb" --nproc 2 --steps 12 --micro-batches 8 \
      --report json | later_steps))
  done
  local a b
  a=$(median "${one[@]}")
  b=$(median "${two[@]}")
  printf '%-10s 1 process %7.2f ms  mp=2 on 2 processes %7.2f ms  ratio %s\n' "$2" "$a" "$b" \
    "$(ratio "$b" "$a")"
}
echo "demo-size GPT step (4 layers, hidden 64, 8 micro-batches; median of later steps)"
demo_ratio "$pw" "after"
[[ -n $before ]] && demo_ratio "$before" "before"
echo

# --- all-reduce -------------------------------------------------------------------------
# Outside training: a plain Gloo loop against the executor's communicator; inside training:
# what `profile --comm` measures per size in a real run (its ranks train the plan, a clock
# around every operation, from the last member's arrival): the demo GPT at mp=2 (8 KiB
# activations, 128 B statistics) and a 2-layer medium GPT at mp=2 (1 MiB activations).
if [[ -x $build/benchmarks/allreduce_bench ]]; then
  echo "all-reduce between 2 processes (median per operation)"
  "$build/benchmarks/allreduce_bench"
fi
"$pw" opt "$work/demo_mp2.pb" -p 'append-backward{optimizer=adam}' -o "$work/demo_mp2_train.pb" \
  >/dev/null
"$pw" build-model gpt --layers 2 --hidden 512 --heads 8 --ffn 2048 --seq 128 --vocab 1024 \
  --micro-batch-size 4 --mp 2 -o "$work/medium_mp2.pb" >/dev/null
"$pw" opt "$work/medium_mp2.pb" -p 'append-backward{optimizer=adam}' \
  -o "$work/medium_mp2_train.pb" >/dev/null
inside() {
  "$1" profile "$2" -o "$work/costs.pbtxt" --comm --no-calibrate --repeat 1 --warmup 0 2>&1 |
    grep -E '^ *all_reduce'
}
echo "inside training (profile --comm), demo GPT mp=2:"
inside "$pw" "$work/demo_mp2_train.pb"
echo "inside training (profile --comm), 2-layer medium GPT mp=2:"
inside "$pw" "$work/medium_mp2_train.pb"
if [[ -n $before ]]; then
  echo "before: inside training, demo GPT mp=2 (older builds print the fit only):"
  inside "$before" "$work/demo_mp2_train.pb"
fi
