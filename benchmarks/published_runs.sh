#!/usr/bin/env bash
# Published GPU training runs reproduced: every row of benchmarks/published_runs.csv (a run
# whose throughput or iteration time was published for an A100 or H100 cluster) is built
# with `pipeweave build-model gpt`, planned with pipeweave's own passes as closely as the
# run's setup allows, simulated with `pipeweave sim --device a100|h100`, and the simulated
# step time is turned into the published metric (TFLOP/s per GPU by the source's own FLOP
# formula, seconds per iteration, tokens per second). Prints, per row, published against
# predicted with the error and the source; then, where a source compares runs of one model
# (here: more data-parallel replicas), the published ratio against the predicted one.
# Targets (issue 22): every row within 10 %, every ratio within 3 %; exits 1 when missed.
# The device specs are used as they are: nothing here is fitted to a row.
#
#   benchmarks/published_runs.sh [CSV (benchmarks/published_runs.csv)]
#
# PW_TOOL names the pipeweave binary (default build/tools/pipeweave); PW_ROWS, a regular
# expression, keeps the rows whose id matches it (e.g. PW_ROWS='^n21-' for one source);
# PW_JOBS rows are simulated at a time (default: one per core; the largest plans hold
# about 3 GB each). Work files go to out/published_runs.PID and are removed at exit;
# PW_KEEP=1 keeps the directory with every row's `sim --format json` output. PW_A100 and
# PW_H100 name device spec files priced in place of the built-in a100 and h100 (a refit's
# trial: every row of that GPU, one spec). PW_SVG names an SVG to draw the errors in, row by
# row and ratio by ratio against their targets (scripts/error_chart.py).
# About 20 minutes of CPU in all (11 minutes on 2 cores): the 1T row (512 micro-batches on
# 64 stages) and the 175B rows of 1024 and 512 micro-batches take most of it; the 36 qi24 rows
# take 40 s (PW_ROWS='^q24').
#
# Sources (the `source` column; the CSV names the table or section of each row and where
# its figures were read):
#   narayanan21    D. Narayanan et al., "Efficient Large-Scale Language Model Training on
#                  GPU Clusters Using Megatron-LM", SC21, arXiv:2104.04473, Table 1; the
#                  setup of each row (micro-batch, interleaving, recomputation, fp16) from
#                  the paper's own scripts, Megatron-LM examples/sc21/.
#   smith22        S. Smith et al., "Using DeepSpeed and Megatron to Train Megatron-Turing
#                  NLG 530B", arXiv:2201.11990, Section 2.4.
#   nemo-launcher  NVIDIA NeMo Megatron launcher README, section 7.1.2, "Training
#                  Performance Results" (github.com/NVIDIA/NeMo-Megatron-Launcher, 2022-09),
#                  with the launcher's GPT-3 5B and 175B training configs of that commit.
#   korthikanti22  V. Korthikanti et al., "Reducing Activation Recomputation in Large
#                  Transformer Models", arXiv:2205.05198 (MLSys 2023), Tables 3 and 5 and
#                  Section 6.3: 22B to 1T GPTs on 8-512 A100s, full recomputation against
#                  sequence parallelism with selective recomputation (the recomputation
#                  ratios), and the 530B model on 8 data-parallel replicas.
#   qi24           P. Qi, X. Wan, G. Huang, M. Lin, "Zero Bubble Pipeline Parallelism",
#                  ICLR 2024, arXiv:2401.10241, Table 4 (1F1B, ZB-1p and ZB-2p on 8-32
#                  A100s, pure pipeline parallelism), the setup from its Table 3 and the
#                  authors' Megatron-LM fork (examples/pretrain_zero_bubble.sh: fp16, seq 1024,
#                  one layer fewer on the first and last stages).
#
# How each row is planned (the CSV's `features` column): data parallelism through
# build-model --dp; `grad-overlap` (PyTorch DDP in the pp = 1 rows of narayanan21, NeMo's
# distributed optimizer) starts each gradient's dp reduction during the backward
# (overlap-grad-reduce; the other rows reduce after the last backward, as Megatron's "local"
# DDP did); `zero1` (smith22, nemo-launcher) plans the distributed optimizer as DeepSpeed's
# ZeRO-1 and Megatron's distributed optimizer ran it (distributed-optimizer, then
# overlap-param-gather{at=update}: reduce-scatter, a shard's update, the 16-bit copy's rows
# cast and all-gathered right after; each rank holds only its rows of the f32 master
# weights; smith22's 16-bit gradient reduction becomes a reduce-scatter of the 16-bit
# gradients, its fp16 overflow check runs on the rows); `sp` (nemo-launcher 175B) plans
# sequence-parallel, whose norm and bias gradients pipeweave computes exactly (all-gathers in
# the backward that Megatron's partial sums do without); `tp-bwd-overlap` (korthikanti22,
# Section 6.2, and nemo-launcher 175B, whose sequence-parallel layers did the same: the
# tensor-parallel communication of the backward overlapped with the weight gradients'
# computation) plans overlap-column-parallel-backward; `sg-p2p` (narayanan21
# section 4.1, Megatron's scatter_gather_tensors_in_pipeline, on by default in the
# Megatron-LM of narayanan21 and korthikanti22) plans scatter-gather-p2p: each tp rank sends
# its 1/tp slice of a value crossing stages, the receivers all-gather it over NVLink;
# `low-grad-sums` (narayanan21, korthikanti22) plans amp{grad-accumulation=low}: 16-bit
# gradient sums, added after each micro-batch's GEMM and all-reduced as they are (during
# the last micro-batch's backward with `grad-overlap`: PyTorch DDP under no_sync, as
# Megatron-LM ran narayanan21's pp = 1 rows with --DDP-impl torch).
# What pipeweave cannot express yet, and how each row is approximated:
#   - The Zero Bubble paper's optimizer post-validation (qi24's ZB rows, `post-validate`):
#     each rank steps its optimizer without waiting for the pipeline's overflow check, and a
#     rank starts the next step while others finish this one; pipeweave plans it as
#     amp{post-validate=true} (the flags' max over the pipeline at the next step's start, a
#     copy of the state each update changes, a redo after a step that overflowed). The
#     gradient clipping's global norm, which the paper validates alike, is not planned.
#     Steps are simulated back to back (sim --steps 2) where nothing holds them: on
#     pipelines without fp16's overflow all-reduce before the updates (bf16, or
#     post-validated), whose ranks start their next step when done with theirs.
#   - Gradient accumulation: pipeweave's weight-gradient GEMMs write f32 and add into the
#     gradient sums themselves, as Megatron's gradient-accumulation fusion (qi24,
#     nemo-launcher) does; Megatron-LM of 2021 (narayanan21, commit 6985e58 of its
#     examples/sc21) wrote a 16-bit weight gradient and added it into a 16-bit sum after the
#     GEMM (autograd's accumulation, or local DDP's main_grad.add_ without
#     --accumulate-allreduce-grads-in-fp32), which `low-grad-sums` plans
#     (amp{grad-accumulation=low}: an add over the gradients per micro-batch).
#   - Recomputation replays every forward op of a layer (recompute{replay=whole}), as these
#     frameworks' torch.utils.checkpoint does; pipeweave's own plans rerun only what the
#     backward reads (a row-parallel matmul whose output no backward op reads is not rerun).
#   - Loss scaling: fp16 rows use amp's dynamic scaling starting at the run's static scale
#     (Megatron checks for overflow either way); the DeepSpeed pipeline engine of smith22 is
#     planned as 1f1b.
#   - Dropout (the CSV's `dropout`, 0.1 in every run here) is built as its own ops on the
#     embeddings and the attention probabilities; the backward draws the mask again from the
#     seed (PyTorch's dropout stores a 1-byte mask instead: one byte more an element each
#     way). The attention and MLP outputs' dropout is Megatron's fused bias-dropout-add, and
#     fc1's bias and GELU its fused bias-GELU (build-model --bias-fusion on; both on by
#     default in Megatron-LM, NeMo and Megatron-DeepSpeed): one pass over memory each. Views
#     (the attention's reshapes, the tensor-parallel regions' identity, an all-reduce over one
#     rank) move nothing, as PyTorch's and Megatron's do not.
#   - Attention is built unfused (build-model --attention unfused: q.k^T, a causal softmax
#     and times v as separate ops whose scores go through memory), as every one of these
#     runs computed it (Megatron's batched GEMMs and fused scale-mask-softmax kernels; flash
#     attention came later). Megatron's fused softmax reads the scores once and writes the
#     probabilities once, as pipeweave's softmax op is priced.
#   - Collectives are priced as NCCL's own ring and tree (sim --collectives nccl), which
#     these runs used, not pipeweave's member-order ones: across nodes NCCL's ring crosses
#     on every NIC of a node at once.
#   - Tensor-parallel collectives overlap nothing unless the row says tp-bwd-overlap: the
#     rows whose dp reduction or parameter gather has its own stream (grad-overlap, zero1)
#     keep the tp collectives on the compute stream (assign-streams{mp=compute}), as the
#     Megatron-LM of narayanan21 and smith22's Megatron-DeepSpeed ran them (on mp_comm the
#     backward's all-reduces would run beside the weight gradients: narayanan21's 18.4B row
#     +9.2 % -> -0.1 %, smith22's -27 % -> -24 %).
#   - Send/recv are simulated as NCCL's (--p2p rendezvous), placed as Megatron-LM's
#     schedules issue them (insert-p2p{order=megatron}: one exchange between two steps, an
#     interleaved rank's forward and the backward after it being one step; smith22's
#     DeepSpeed engine and the zero-bubble rows in the batched order, one batch per gap
#     between compute jobs); the job after an exchange waits for all of it, sends included
#     (insert-p2p{wait=exchange}: Megatron's p2p_communication waits on every request of its
#     batch_isend_irecv, then synchronizes the device; DeepSpeed's pipeline engine sends and
#     receives in its instruction stream), except on the zero-bubble rows, whose scheduler
#     (the authors' zb_schedules.py) waits on an exchange only where a job reads what it
#     received (then on the whole batch; pipeweave's consumers wait for their own transfers).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
csv=${1:-$root/benchmarks/published_runs.csv}
only=${PW_ROWS:-}
[[ -x "$pw" ]] || { echo "published_runs.sh: no pipeweave binary at $pw (set PW_TOOL)" >&2; exit 2; }
[[ -r "$csv" ]] || { echo "published_runs.sh: cannot read $csv" >&2; exit 2; }
work=$root/out/published_runs.$$
mkdir -p "$work"
keep=${PW_KEEP:-}
[[ -n "$keep" ]] || trap 'rm -rf "$work"' EXIT

parallel=${PW_JOBS:-$(nproc)}
start=$SECONDS

# Reads the rows, checks them, and plans each: the module file, the pass pipeline, the
# one-line setup.
rows=()
declare -A F  # F[$id,column]
columns=(id source model layers hidden heads ffn seq vocab gpu gpu_mem gpus tp pp vpp dp gbs mbs
  kind recompute precision loss_scale grad_ar metric unit published ratio_base reference features
  dropout)
while IFS=, read -r id source model layers hidden heads ffn seq vocab gpu gpu_mem gpus tp pp vpp \
  dp gbs mbs kind recompute precision loss_scale grad_ar metric unit published ratio_base \
  reference _read_in _not_expressed _assumed features dropout; do
  [[ -z "$id" || "$id" == \#* || "$id" == id ]] && continue
  [[ -n "$only" && ! "$id" =~ $only ]] && continue
  for c in "${columns[@]}"; do F[$id,$c]=${!c}; done
  if ((tp * pp * dp != gpus)); then
    echo "$id: tp x pp x dp = $((tp * pp * dp)), not the $gpus GPUs of the run" >&2
    exit 2
  fi
  if ((gbs % (dp * mbs) != 0)); then
    echo "$id: global batch $gbs is not a multiple of dp x micro-batch = $((dp * mbs))" >&2
    exit 2
  fi
  if ! awk -v p="$dropout" 'BEGIN {exit !(p ~ /^[0-9.]+$/ && p >= 0 && p < 1)}'; then
    echo "$id: dropout '$dropout' is not a probability in [0, 1)" >&2
    exit 2
  fi
  case $gpu in
    A100*) F[$id,device]=${PW_A100:-a100} ;;
    H100*) F[$id,device]=${PW_H100:-h100} ;;
    *) echo "$id: no device spec for $gpu" >&2; exit 2 ;;
  esac
  amp="dtype=$precision"
  [[ -n "$loss_scale" ]] && amp+=",init-scale=$loss_scale"
  [[ ";$features;" == *";post-validate;"* ]] && amp+=",post-validate=true"
  if [[ ";$features;" == *";low-grad-sums;"* ]]; then  # reduced as they are summed
    amp+=",grad-accumulation=low"
  elif [[ "$grad_ar" == low && $dp -gt 1 ]]; then
    amp+=",grad-allreduce=low"
  fi
  passes="append-backward{optimizer=adam},amp{$amp}"
  [[ ";$features;" == *";sp;"* ]] && passes="sequence-parallel,$passes"
  [[ "$recompute" != none ]] && passes+=",recompute{policy=$recompute,replay=whole}"
  split="split-program"
  [[ "$kind" == zb-* ]] && split="split-program{split-backward=true}"
  schedule="kind=$kind"
  case $kind in  # the Zero Bubble paper's automatic schedules: activations of pp or 2 x pp
    zb-1p) schedule="kind=zb-auto,mem-limit=$((pp * vpp))" ;;
    zb-2p) schedule="kind=zb-auto,mem-limit=$((2 * pp * vpp))" ;;
  esac
  passes+=",$split,schedule{$schedule,micro-batches=$((gbs / (dp * mbs)))}"
  # Megatron's schedules (and DeepSpeed's pipeline engine) wait on every transfer of an
  # exchange before their next compute; the Zero Bubble paper's scheduler waits only where a
  # received tensor is read.
  # Megatron-LM places its exchanges step by step (an interleaved rank's forward output
  # leaves after the backward that follows it); DeepSpeed's engine and the zero-bubble
  # scheduler are planned in the batched order.
  p2p_wait=exchange p2p_order=megatron
  [[ "$kind" == zb-* ]] && p2p_wait=consumers
  [[ "$kind" == zb-* || "$source" == smith22 ]] && p2p_order=batched
  passes+=",insert-p2p{order=$p2p_order,wait=$p2p_wait}"
  [[ ";$features;" == *";sg-p2p;"* ]] && passes+=",scatter-gather-p2p"
  [[ ";$features;" == *";zero1;"* ]] && passes+=",distributed-optimizer"
  streams=""
  [[ ";$features;" == *";tp-bwd-overlap;"* ]] && streams+=",overlap-column-parallel-backward"
  if [[ ";$features;" == *";grad-overlap;"* ]]; then
    # PyTorch DDP's buckets (bucket_cap_mb, 25 by default; Megatron-LM's torchDDP sets none);
    # elsewhere the bucket size the simulator finds fastest.
    if [[ "$source" == narayanan21 ]]; then
      streams+=",overlap-grad-reduce{bucket-mb=25}"
    else
      streams+=",overlap-grad-reduce"
    fi
  fi
  [[ ";$features;" == *";zero1;"* ]] && streams+=",overlap-param-gather{at=update}"
  # assign-streams would put the tensor-parallel collectives on mp_comm too, where the
  # backward's run beside its weight gradients: only the rows that overlapped them keep it.
  tp_stream=""
  [[ ";$features;" == *";tp-bwd-overlap;"* ]] || tp_stream="{mp=compute}"
  [[ -n "$streams" ]] && passes+=",assign-streams$tp_stream$streams,insert-events"
  F[$id,passes]=$passes
  F[$id,stage_layers]=""
  if [[ ";$features;" == *";thin-ends;"* ]]; then  # one layer fewer on the first and last
    if (((layers + 2) % (pp * vpp) != 0 || pp * vpp < 2)); then
      echo "$id: thin-ends needs layers + 2 to be a multiple of the $((pp * vpp)) stages" >&2
      exit 2
    fi
    per=$(((layers + 2) / (pp * vpp)))
    counts=$((per - 1))
    for ((s = 1; s < pp * vpp - 1; s++)); do counts+=",$per"; done
    F[$id,stage_layers]="$counts,$((per - 1))"
  fi
  setup="tp$tp pp$pp"
  ((vpp > 1)) && setup+=" v$vpp"
  setup+=" dp$dp B$gbs b$mbs $kind"
  [[ "$recompute" != none ]] && setup+=" $recompute"
  [[ -n "$features" ]] && setup+=" ${features//;/+}"
  awk -v p="$dropout" 'BEGIN {exit !(p > 0)}' && setup+=" drop$dropout"
  F[$id,setup]="$setup $precision"
  rows+=("$id")
done <"$csv"

# Builds and simulates one row; leaves $work/$id.step (step time in ms and whether every
# rank fits) or $work/$id.err.
simulate() {
  local id=$1 module=$work/$1.pbtxt dp=${F[$1,dp]}
  if ! "$pw" build-model gpt --layers "${F[$id,layers]}" --hidden "${F[$id,hidden]}" \
    --heads "${F[$id,heads]}" --ffn "${F[$id,ffn]}" --seq "${F[$id,seq]}" \
    --vocab "${F[$id,vocab]}" --micro-batch-size "${F[$id,mbs]}" --mp "${F[$id,tp]}" \
    --pp "${F[$id,pp]}" --vpp "${F[$id,vpp]}" --dp "$dp" --attention unfused \
    --dropout "${F[$id,dropout]}" --bias-fusion on \
    ${F[$id,stage_layers]:+--stage-layers "${F[$id,stage_layers]}"} \
    -o "$module" >/dev/null 2>"$work/$id.err"; then
    return
  fi
  # Steps back to back where ranks can end a step apart: pipelines without fp16's
  # overflow all-reduce before the updates, which ends every step on every rank at once (a
  # one-step run prices those as their steady state does).
  local steps=1
  if ((F[$id,pp] > 1)) && [[ ${F[$id,precision]} != fp16 || ${F[$id,passes]} == *post-validate* ]]; then
    steps=2
  fi
  if "$pw" sim "$module" --device "${F[$id,device]}" --format json --p2p rendezvous \
    --collectives nccl --steps "$steps" \
    --mem-limit "${F[$id,gpu_mem]}" --pipeline "${F[$id,passes]}" >"$work/$id.json" \
    2>"$work/$id.err"; then
    local step fits=fits
    local key=step_time_ms
    grep -q '"steady_step_time_ms"' "$work/$id.json" && key=steady_step_time_ms
    step=$(grep -o "\"$key\": [0-9.e+-]*" "$work/$id.json" | head -1 | awk '{print $2}')
    grep -q '"memory_summary": "[^"]*DOES NOT FIT' "$work/$id.json" && fits=no
    echo "$step $fits" >"$work/$id.step"
    rm -f "$work/$id.err"
  fi
  rm -f "$module"
  [[ -n "$keep" ]] || rm -f "$work/$id.json"
}

# PW_JOBS rows at a time (default: one per core); the largest plans hold about 3 GB each.
for id in "${rows[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  simulate "$id" &
done
wait

declare -A pub pred
ids=()
chart=""  # scripts/error_chart.py's lines: section, group, label, error, target
failed=0
printf "%-14s %-12s %-52s %18s %10s %7s %5s %s\n" row model setup published predicted "err %" \
  mem source
for id in "${rows[@]}"; do
  published=${F[$id,published]}
  if [[ ! -f "$work/$id.step" ]]; then
    printf "%-14s %-12s %-52s %18s %10s %7s %5s %s\n" "$id" "${F[$id,model]}" \
      "${F[$id,setup]}" "$published ${F[$id,unit]}" failed - - "${F[$id,source]}"
    sed 's/^/    /' "$work/$id.err"
    failed=$((failed + 1))
    continue
  fi
  read -r step_ms fits <"$work/$id.step"
  predicted=$(awk -v m="${F[$id,metric]}" -v t="$step_ms" -v B="${F[$id,gbs]}" \
    -v s="${F[$id,seq]}" -v l="${F[$id,layers]}" -v h="${F[$id,hidden]}" \
    -v V="${F[$id,vocab]}" -v n="${F[$id,gpus]}" 'BEGIN {
      T = t / 1e3
      if (m == "tflops_megatron") {
        F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
        printf "%.6g", F / (T * n) / 1e12
      } else if (m == "iter_time") printf "%.6g", T
      else if (m == "tokens_per_s") printf "%.6g", B * s / T
      else if (m == "samples_per_gpu_s") printf "%.6g", B / T / n
      else exit 1
    }') || { echo "$id: unknown metric '${F[$id,metric]}'" >&2; exit 2; }
  err=$(awk -v p="$predicted" -v q="$published" 'BEGIN {printf "%+.1f", (p - q) / q * 100}')
  printf "%-14s %-12s %-52s %18s %10.4g %7s %5s %s\n" "$id" "${F[$id,model]}" "${F[$id,setup]}" \
    "$published ${F[$id,unit]}" "$predicted" "$err" "$fits" "${F[$id,source]}"
  chart+="published figures"$'\t'"${F[$id,source]}"$'\t'"$id"$'\t'"$err"$'\t10\n'
  pub[$id]=$published
  pred[$id]=$predicted
  ids+=("$id")
done

echo
echo "Ratios where a source compares runs of one model (figure of the row / figure of the base row):"
printf "%-14s %-14s %-12s %10s %10s %8s\n" row base model published predicted "dev %"
ratios=0
ratios_ok=0
for id in "${ids[@]}"; do
  base=${F[$id,ratio_base]}
  [[ -z "$base" ]] && continue
  if [[ -z "${pub[$base]-}" ]]; then
    echo "$id: base row $base was not simulated (PW_ROWS?)"
    continue
  fi
  read -r pr qr dev ok < <(awk -v a="${pub[$id]}" -v b="${pub[$base]}" -v c="${pred[$id]}" \
    -v d="${pred[$base]}" 'BEGIN {
      pr = a / b; qr = c / d; dev = (qr / pr - 1) * 100
      printf "%.4f %.4f %+.1f %d\n", pr, qr, dev, (dev <= 3 && dev >= -3)
    }')
  printf "%-14s %-14s %-12s %10s %10s %8s\n" "$id" "$base" "${F[$id,model]}" "$pr" "$qr" "$dev"
  chart+="ratios of runs of one model"$'\t'"${F[$id,source]}"$'\t'"$id / $base"$'\t'"$dev"$'\t3\n'
  ratios=$((ratios + 1))
  ratios_ok=$((ratios_ok + ok))
done

count=${#ids[@]}
rows_ok=0
for id in "${ids[@]}"; do
  rows_ok=$((rows_ok + $(awk -v p="${pred[$id]}" -v q="${pub[$id]}" \
    'BEGIN {e = (p - q) / q * 100; print (e <= 10 && e >= -10)}')))
done
echo
echo "Sources:"
declare -A cited
for id in "${rows[@]}"; do
  key="${F[$id,source]}: ${F[$id,reference]}"
  [[ -n "${cited[$key]-}" ]] && continue
  cited[$key]=1
  echo "  $key"
done
echo
if ((failed > 0)); then
  echo "rows within 10 %: $rows_ok of $count ($failed more failed to simulate)"
else
  echo "rows within 10 %: $rows_ok of $count"
fi
echo "ratios within 3 %: $ratios_ok of $ratios"
echo "time: $((SECONDS - start)) s"
[[ -z "$keep" ]] || echo "sim outputs kept in $work"
if [[ -n "${PW_SVG:-}" && -n "$chart" ]]; then
  printf '%s' "$chart" | "$root/scripts/error_chart.py" -o "$PW_SVG" \
    --title "Published GPU runs: predicted against published (error %)" && echo "chart: $PW_SVG"
fi
if ((rows_ok < count || failed > 0 || ratios_ok < ratios)); then
  echo "targets missed (issue 22: every row within 10 %, every ratio within 3 %)"
  exit 1
fi
echo "targets met"
