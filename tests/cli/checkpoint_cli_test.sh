#!/usr/bin/env bash
# Checkpoints over rank processes, end to end:
#   - a 4-rank run (mp 2 x pp 2) with one rank killed (SIGKILL) after a checkpoint resumes
#     from the latest complete one: its losses and final parameters equal, bit for bit,
#     those of a run that was never stopped;
#   - the same checkpoint resumes in the one-rank reference (re-cut for mp 1 x pp 1);
#   - inspect verifies it;
#   - every bad checkpoint or folder is refused with one line, before anything is written.
# Usage: checkpoint_cli_test.sh PIPEWEAVE OUT_DIR EXPECT_ERROR_SH
set -u
pw=$1 out=$2 expect=$3
rm -rf "$out" && mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
gpt=(--layers 2 --hidden 32 --heads 4 --ffn 64 --seq 8 --vocab 32 --micro-batch-size 2)
train='append-backward{optimizer=adam,lr=0.01}'
"$pw" build-model gpt "${gpt[@]}" --mp 2 --pp 2 -o "$out/gpt.pb" >/dev/null || fail build
"$pw" opt "$out/gpt.pb" -o "$out/plan.pb" \
  -p "$train,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p" >/dev/null || fail opt
"$pw" build-model gpt "${gpt[@]}" -o "$out/one.pb" >/dev/null || fail build one
"$pw" opt "$out/one.pb" -p "$train" -o "$out/one_train.pb" >/dev/null || fail opt one

# The run that is stopped: a checkpoint every 2 steps; rank 2 killed once one is complete.
ck=$out/ck
"$pw" run "$out/plan.pb" --nproc 4 --steps 1000000 --checkpoint-dir "$ck" --checkpoint-every 2 \
  --run-dir "$out/run_killed" >/dev/null 2>"$out/killed.err" &
launcher=$!
victim=""
for _ in $(seq 600); do
  if [[ -z $victim ]]; then
    for child in $(pgrep -P "$launcher"); do
      tr '\0' ' ' <"/proc/$child/cmdline" 2>/dev/null | grep -q -- "--rank 2 " && victim=$child
    done
  fi
  [[ -n $victim ]] && compgen -G "$ck/step-*/manifest.pbtxt" >/dev/null && break
  sleep 0.05
done
[[ -n $victim ]] || { kill "$launcher"; fail "no checkpoint within 30 s"; }
kill -KILL "$victim"
wait "$launcher" && fail "the killed run exited 0: $(tail -5 "$out/killed.err")"
grep -q "rank 2 " "$out/killed.err" ||
  fail "the killed run does not name rank 2: $(tail -5 "$out/killed.err")"
# The latest complete checkpoint (its manifest written), as --resume picks it: a later one
# may have been under way when the rank died.
latest=$(ls -d "$ck"/step-*/manifest.pbtxt | grep -v partial | sort | tail -1)
latest=${latest%/manifest.pbtxt}
step=$((10#${latest##*step-}))
total=$((step + 3))
echo "killed rank 2 with step $step the latest complete checkpoint; resuming to step $total"

# Never stopped, and resumed: the same losses (17 digits) and parameter files.
"$pw" run "$out/plan.pb" --nproc 4 --steps $total --report json --save-params "$out/p_whole" \
  >"$out/whole.json" || fail "uninterrupted run"
"$pw" run "$out/plan.pb" --nproc 4 --steps $total --report json --save-params "$out/p_resumed" \
  --resume "$ck" --checkpoint-dir "$ck" >"$out/resumed.json" || fail "resumed run"
losses() { sed 's/.*"losses": \[\([^]]*\)\].*/\1/' "$1" | tr -d ' ' | tr ',' '\n'; }
want=$(losses "$out/whole.json" | tail -3)
got=$(losses "$out/resumed.json")
[[ $got == "$want" ]] || fail "resumed losses $(echo $got) differ from $(echo $want)"
grep -q "\"first_step\": $((step + 1))," "$out/resumed.json" || fail "first_step"
for r in 0 1 2 3; do
  cmp -s "$out/p_whole/rank$r.params" "$out/p_resumed/rank$r.params" ||
    fail "rank $r's final parameters differ"
done
[[ -f $ck/step-$(printf %08d $total)/manifest.pbtxt ]] || fail "no final checkpoint"
echo "resumed run: losses and parameters bit-identical"

# The reference (mp 1 x pp 1) resumes the 4-rank checkpoint, re-cut.
"$pw" run "$out/one_train.pb" --reference --steps $((step + 1)) --micro-batches 4 \
  --resume "$latest" --report json >"$out/reference.json" || fail "reference resume"
echo "reference from the 4-rank checkpoint: $(losses "$out/reference.json"), 4 ranks: $(echo "$want" | head -1)"

"$pw" inspect "$ck" >"$out/inspect.txt" || fail inspect
grep -q "every size and checksum verified" "$out/inspect.txt" || fail "inspect output"

# Refusals: one line, non-zero, the checkpoint folder unchanged.
fingerprint() { (cd "$1" && find . -type f | sort | xargs sha256sum); }
before=$(fingerprint "$ck")
refuse() {  # refuse TEXT ARGS...
  local text=$1
  shift
  "$expect" "$text" - -- "$pw" "$@" >/dev/null || { "$expect" "$text" - -- "$pw" "$@"; fail "$*"; }
}
bad=$out/bad
cp -r "$latest" "$bad"
run4=(run "$out/plan.pb" --nproc 4 --steps 100 --run-dir "$out/run_bad")
"$pw" build-model gpt "${gpt[@]}" --layers 4 --mp 2 --pp 2 -o "$out/other.pb" >/dev/null
"$pw" opt "$out/other.pb" -o "$out/other_plan.pb" \
  -p "$train,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p" >/dev/null
refuse "is a checkpoint of another module (it has no var 'layer2" \
  run "$out/other_plan.pb" --nproc 4 --steps 100 --resume "$latest"
refuse "was trained on 4 micro-batches per step, this run trains on 2" \
  run "$out/one_train.pb" --reference --steps 100 --micro-batches 2 --resume "$latest"
refuse "already holds step-$(printf %08d $total), after step 0" "${run4[@]}" --checkpoint-dir "$ck"
mkdir -p "$out/empty"
refuse "no complete checkpoint" "${run4[@]}" --resume "$out/empty"
refuse "leaves nothing to train" run "$out/plan.pb" --nproc 4 --steps $step --resume "$latest"
truncate -s -7 "$bad/rank00003.tensors"
refuse "rank00003.tensors: truncated" "${run4[@]}" --resume "$bad"
refuse "rank00003.tensors: truncated" inspect "$bad"
cp "$latest/rank00003.tensors" "$bad/"
printf '\x5a' | dd of="$bad/rank00001.tensors" bs=1 seek=200 conv=notrunc status=none
refuse "rank00001.tensors: checksum mismatch" "${run4[@]}" --resume "$bad"
cp "$latest/rank00001.tensors" "$bad/"
rm "$bad/rank00002.tensors"
refuse "rank00002.tensors: rank 2's file is missing" "${run4[@]}" --resume "$bad"
cp "$latest/rank00002.tensors" "$bad/"
# A shard that does not tile its var: rank 1's piece of a column-parallel weight made
# larger than half of it.
awk 'done != 1 && /name: "layer0.qkv.weight"/ { hit++ } hit == 2 && /^ *shape: / && ++seen == 2 {
       sub(/[0-9]+/, "40"); done = 1 } { print }' "$latest/manifest.pbtxt" >"$bad/manifest.pbtxt"
refuse "cannot re-shard 'layer0.qkv.weight'" "${run4[@]}" --resume "$bad"
[[ $(fingerprint "$ck") == "$before" ]] || fail "a refused run changed $ck"
echo "ok"
