#!/usr/bin/env bash
# The figures of checkpoints, on the medium GPT (8 layers, hidden 512, 8 heads, ffn 2048,
# seq 128, vocab 1024, micro-batch size 4; Adam; 1f1b over 8 micro-batches a step) trained
# as mp 2 x pp 2 on 4 rank processes of this machine:
#   1. a checkpoint's size and write time per rank beside the step time, and the time a
#      resumed run takes to load it;
#   2. a run of STEPS (20) steps whose rank 2 is killed (SIGKILL) once the checkpoint of step
#      KILL_AFTER (13) is complete, resumed from it: its losses and final parameters against
#      those of the run that was never stopped;
#   3. that checkpoint resumed under mp 1 x pp 4 and under mp 4 x pp 1 (its vars re-cut) for
#      5 more steps: the losses against the uninterrupted mp 2 x pp 2 run.
#
#   benchmarks/checkpoint_figures.sh [STEPS (20)] [KILL_AFTER (13)]
#
#   PW_TOOL the pipeweave binary (build/tools/pipeweave), PW_OUT the output folder
#   (out/checkpoint_figures). About 4 minutes on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pw=${PW_TOOL:-$root/build/tools/pipeweave}
out=${PW_OUT:-$root/out/checkpoint_figures}
steps=${1:-20}
kill_after=${2:-13}
more=5
rm -rf "$out" && mkdir -p "$out"
cd "$out"

medium=(--layers 8 --hidden 512 --heads 8 --ffn 2048 --seq 128 --vocab 1024 --micro-batch-size 4)
plan() {  # plan MP PP: the planned module pMPPP.pb
  "$pw" build-model gpt "${medium[@]}" --mp "$1" --pp "$2" -o "m$1$2.pb" >/dev/null
  "$pw" opt "m$1$2.pb" -o "p$1$2.pb" \
    -p 'append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=8},insert-p2p'
}
# field FILE KEY: a JSON report's array KEY, one value per line.
field() { sed -n "s/.*\"$2\": \[\([^]]*\)\].*/\1/p" "$1" | tr ',' '\n' | tr -d ' '; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
plan 2 2
plan 1 4
plan 4 1

echo "== the run that is never stopped: $steps steps"
run=("$pw" run p22.pb --nproc 4 --report json)
(set -x; "${run[@]}" --steps "$steps" --save-params whole --checkpoint-dir ck_every \
  --checkpoint-every 1 --keep 2 >whole.json)

echo "== 1. a checkpoint per rank (every step above), against the step"
step_ms=$(field whole.json step_time_ms | tail -n +2 | median)
sed 's/.*"checkpoints": \[//; s/\]}$//; s/}, {/}\n{/g' whole.json | tail -n +2 >checkpoints.txt
for rank in 0 1 2 3; do
  bytes=$(sed -n 's/.*"bytes": \[\([^]]*\)\].*/\1/p' checkpoints.txt | head -1 |
    cut -d, -f$((rank + 1)) | tr -d ' ')
  ms=$(sed -n 's/.*"ms": \[\([^]]*\)\].*/\1/p' checkpoints.txt | cut -d, -f$((rank + 1)) | median)
  awk -v r=$rank -v b="$bytes" -v ms="$ms" -v step="$step_ms" 'BEGIN {
    printf "rank %d: %.1f MiB, written in %.0f ms (median), %.1f %% of the median step (%.0f ms)\n",
      r, b / 1048576, ms, 100 * ms / step, step }'
done
"$pw" inspect ck_every | head -12

echo "== 2. rank 2 killed after the checkpoint of step $kill_after, then resumed"
ck=ck_killed
"${run[@]}" --steps "$steps" --checkpoint-dir $ck --checkpoint-every "$kill_after" \
  --run-dir run_killed >/dev/null 2>killed.err &
launcher=$!
manifest=$ck/$(printf 'step-%08d' "$kill_after")/manifest.pbtxt
victim=""
while kill -0 $launcher 2>/dev/null && [[ ! -f $manifest || -z $victim ]]; do
  for child in $(pgrep -P $launcher); do
    tr '\0' ' ' <"/proc/$child/cmdline" | grep -q -- "--rank 2 " && victim=$child
  done
  sleep 0.05
done
kill -KILL "$victim"
wait $launcher || true
cat killed.err
(set -x; "${run[@]}" --steps "$steps" --resume $ck --checkpoint-dir $ck --save-params resumed \
  >resumed.json)
echo "checkpoint loaded in $(field resumed.json resume_ms | sort -g | tail -1) ms (slowest rank)"
paste <(field whole.json losses | tail -n +$((kill_after + 1))) <(field resumed.json losses) |
  awk -v s=$kill_after '{ printf "step %d: never stopped %s, resumed %s %s\n", s + NR, $1, $2,
    $1 == $2 ? "(same)" : "DIFFERENT" }'
for rank in 0 1 2 3; do
  cmp -s whole/rank$rank.params resumed/rank$rank.params &&
    echo "rank $rank: final parameters and optimizer state bit-identical" ||
    echo "rank $rank: final parameters DIFFER"
done

echo "== 3. the checkpoint of step $kill_after resumed under other plans, $more more steps"
resume=$ck/$(printf 'step-%08d' "$kill_after")
for layout in "1 4" "4 1"; do
  set -- $layout
  (set -x; "$pw" run "p$1$2.pb" --nproc 4 --steps $((kill_after + more)) --resume "$resume" \
    --report json >"replan$1$2.json")
  paste <(field whole.json losses | sed -n "$((kill_after + 1)),$((kill_after + more))p") \
    <(field "replan$1$2.json" losses) |
    awk -v s=$kill_after -v l="mp $1 x pp $2" '{ d = $2 - $1; if (d < 0) d = -d
      printf "%s step %d: %s, mp 2 x pp 2 %s, difference %.3g (%.2g relative)\n", l, s + NR, $2,
        $1, d, d / $1 }'
done
