#!/usr/bin/env bash
# Two ranks of one run started with different plans, step counts or world sizes: the first
# rank to compare their terms names both and every rank stops, non-zero, within seconds
# (before any rendezvous could hang). Usage: rank_mismatch_test.sh PIPEWEAVE OUT_DIR
set -euo pipefail
pw=$1 out=$2
mkdir -p "$out"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
"$pw" build-model gpt --layers 2 --hidden 32 --heads 4 --ffn 64 --seq 16 --vocab 32 --mp 2 \
  -o "$out/tiny_mp2.pb" > /dev/null
for kind in 1f1b fthenb; do
  "$pw" opt "$out/tiny_mp2.pb" -o "$out/$kind.pb" > /dev/null \
    -p "append-backward,split-program,schedule{kind=$kind,micro-batches=2},insert-p2p"
done

# run_pair TAG EXPECTED ARGS0 -- ARGS1: both ranks, each with its own flags.
run_pair() {
  local tag=$1 expected=$2
  local store=$out/$tag.store
  shift 2
  local a0=() a1=()
  while [[ $1 != -- ]]; do a0+=("$1"); shift; done
  shift
  a1=("$@")
  rm -rf "$store"
  "$pw" run-parallel "${a0[@]}" --rank 0 --world-size 2 --store "$store" --threads 1 \
    > /dev/null 2> "$out/$tag.rank0.err" &
  local p0=$!
  "$pw" run-parallel "${a1[@]}" --rank 1 --world-size 2 --store "$store" --threads 1 \
    > /dev/null 2> "$out/$tag.rank1.err" &
  local p1=$! c0=0 c1=0 start=$SECONDS
  wait $p0 || c0=$?
  wait $p1 || c1=$?
  ((SECONDS - start < 30)) || fail "$tag: the ranks took $((SECONDS - start)) s to stop"
  ((c0 != 0 && c1 != 0)) || fail "$tag: exit codes $c0 and $c1 (both must be non-zero)"
  local all
  all=$(cat "$out/$tag.rank0.err" "$out/$tag.rank1.err")
  [[ $all == *"$expected"* ]] || fail "$tag: no '$expected' in: $all"
  for f in "$out/$tag.rank0.err" "$out/$tag.rank1.err"; do
    (($(wc -l < "$f") == 1)) || fail "$tag: $f has $(wc -l < "$f") lines (want one): $(cat "$f")"
  done
  echo "$tag: exit codes $c0 $c1: $(head -c 300 "$out/$tag.rank0.err")"
}

run_pair steps "was started with steps" \
  "$out/1f1b.pb" --steps 2 -- "$out/1f1b.pb" --steps 3
run_pair plan "was started with plan" \
  "$out/1f1b.pb" --steps 2 -- "$out/fthenb.pb" --steps 2
run_pair seed "was started with data seed" \
  "$out/1f1b.pb" --seed 1 -- "$out/1f1b.pb" --seed 2
