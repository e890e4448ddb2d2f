#!/usr/bin/env bash
# Training across the multi-host test bed (scripts/netns_cluster.sh): two hosts, each in
# its own network namespace with its own host name, linked at RATE (1gbit) through tbf, a
# Redis store on the bridge. The medium GPT (8 layers, hidden 512, mp 2, 1f1b over 4
# micro-batches) as the issue that asked for it ran it. Cases:
#   train  6 steps across the shaped link, losses equal to the same run on loopback
#   kill   rank 1 killed with SIGKILL after step 2: rank 0 names it ("rank 1 died")
#   stop   rank 1 stopped with SIGSTOP after step 2: rank 0 names it within 35 s
#   ab     `ab --run` with its ranks on the test bed's hosts (--rank-prefix, --store): a
#          small GPT's plain and overlap plans, bit-identical losses and parameters; then
#          `profile --comm` with its measuring run's ranks there (--store, --rank-prefix)
#   env    2 steps started as torchrun would (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR; the
#          store's port in PW_STORE_PORT)
# Usage: netns_cluster_test.sh PIPEWEAVE OUT_DIR [CASE...] (all cases by default). Exits 77
# (ctest: skipped) where network namespaces cannot be made. Prints detection times.
set -euo pipefail
pw=$1 out=$2
shift 2
cases=("$@")
((${#cases[@]})) || cases=(train kill stop env ab)
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=$root/scripts/netns_cluster.sh
rate=${PW_NETNS_RATE:-1gbit}

"$cluster" check || exit $?
mkdir -p "$out"
name="c$(($$ % 99999))"
started=()
cleanup() {
  local pid
  for pid in "${started[@]}"; do kill -9 "$pid" 2> /dev/null || true; done
  "$cluster" down "$name"
}
trap cleanup EXIT
eval "$("$cluster" up 2 --rate "$rate" --name "$name" --port $((20000 + $$ % 20000)))"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

plan=$out/medium_1f1b.pb
if [[ ! -s $plan ]]; then
  "$pw" build-model gpt --layers 8 --hidden 512 --heads 8 --ffn 2048 --seq 128 --vocab 1024 \
    --micro-batch-size 4 --mp 2 -o "$out/medium.pb" > /dev/null
  "$pw" opt "$out/medium.pb" -o "$plan" > /dev/null \
    -p "append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p"
fi

# start_ranks TAG STEPS [FLAGS...]: both ranks in the background, one store prefix per case
# (no warm-up step: each costs a step on the shaped link).
start_ranks() {
  local tag=$1 steps=$2 r
  shift 2
  pids=()
  for r in 0 1; do
    local addr_var=PW_NETNS_ADDR_$((r + 1))
    "$cluster" exec --name "$name" $((r + 1)) "$pw" run-parallel "$plan" --rank $r \
      --world-size 2 --store "$PW_NETNS_STORE/$tag$$" --hostname "${!addr_var}" --threads 1 \
      --steps "$steps" --warmup-steps 0 "$@" > "$out/$tag.rank$r.out" 2> "$out/$tag.rank$r.err" &
    pids+=($!)
    started+=($!)
  done
}

# wait_for_line FILE REGEX SECONDS
wait_for_line() {
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$1" 2> /dev/null; do
    ((SECONDS < deadline)) || fail "no '$2' in $1 after $3 s: $(cat "$1" "${1%.out}.err")"
    sleep 0.2
  done
}

now() { date +%s.%N; }

case_train() {
  # The reference: the same plan and steps on loopback (the launcher, two processes).
  "$pw" run-parallel "$plan" --nproc 2 --threads 1 --steps 6 --warmup-steps 0 --report json \
    > "$out/train.loopback.json"
  local t0 t1
  t0=$(now)
  start_ranks train 6 --report json
  local codes=()
  for pid in "${pids[@]}"; do
    code=0
    wait "$pid" || code=$?
    codes+=("$code")
  done
  t1=$(now)
  [[ ${codes[*]} == "0 0" ]] ||
    fail "exit codes ${codes[*]}: $(cat "$out"/train.rank*.err)"
  local want got
  want=$(grep -o '"losses": \[[^]]*\]' "$out/train.loopback.json")
  got=$(grep -o '"losses": \[[^]]*\]' "$out/train.rank0.out")
  [[ -n $want && $want == "$got" ]] || fail "losses differ: loopback $want, test bed $got"
  echo "train: 6 steps across $rate in $(echo "$t1 - $t0" | bc) s; losses equal to loopback's"
  echo "       step times (ms): $(grep -o '"step_time_ms": \[[^]]*\]' "$out/train.rank0.out")"
}

# case_fault SIGNAL EXPECTED LIMIT_S: signal rank 1 after step 2; rank 0 must stop naming it.
case_fault() {
  local tag=$1 sig=$2 expected=$3 limit=$4
  start_ranks "$tag" 30
  wait_for_line "$out/$tag.rank0.out" "^step 2 loss" 120
  local t0 code=0
  t0=$(now)
  kill "-$sig" "${pids[1]}"
  wait "${pids[0]}" || code=$?
  local seconds
  seconds=$(echo "$(now) - $t0" | bc)
  kill -9 "${pids[1]}" 2> /dev/null || true
  wait "${pids[1]}" 2> /dev/null || true
  local err
  err=$(cat "$out/$tag.rank0.err")
  [[ $code == 3 ]] || fail "$tag: rank 0 exited with $code (expected 3): $err"
  [[ $err == *"$expected"* ]] || fail "$tag: rank 0 did not say '$expected': $err"
  (($(echo "$seconds < $limit" | bc))) || fail "$tag: named after $seconds s (limit $limit s)"
  echo "$tag: SIG$sig to rank 1, rank 0 stopped after $seconds s: ${err##*: rank 0: }"
}

case_env() {
  local r pids_env=() port=${PW_NETNS_STORE##*:} addr=${PW_NETNS_STORE#redis://}
  addr=${addr%:*}
  for r in 0 1; do
    "$cluster" exec --name "$name" $((r + 1)) env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 \
      LOCAL_WORLD_SIZE=1 MASTER_ADDR="$addr" MASTER_PORT=29500 PW_STORE_PORT="$port" \
      "$pw" run-parallel "$plan" --threads 1 --steps 2 --warmup-steps 0 \
      > "$out/env.rank$r.out" 2> "$out/env.rank$r.err" &
    pids_env+=($!)
    started+=($!)
  done
  for r in 0 1; do
    wait "${pids_env[r]}" || fail "env: rank $r failed: $(cat "$out/env.rank$r.err")"
  done
  grep -q "^step 2 loss" "$out/env.rank0.out" || fail "env: no step 2: $(cat "$out/env.rank0.out")"
  echo "env: 2 steps started from torchrun's variables (the store on MASTER_ADDR)"
}

case_ab() {
  local small=$out/small_mp2.pb
  "$pw" build-model gpt --layers 2 --hidden 64 --heads 4 --ffn 256 --seq 16 --vocab 128 \
    --micro-batch-size 2 --mp 2 -o "$small" > /dev/null
  local plain="append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p"
  "$pw" ab "$small" -a "$plain" --device cpu --run --nproc 2 --steps 2 --rounds 1 \
    -b "$plain,assign-streams,overlap-column-parallel-backward,overlap-row-split,insert-events" \
    --store "$PW_NETNS_STORE" --rank-prefix "$cluster exec --name $name {host}" \
    --run-dir "$out/ab.run" -o "$out/ab.txt" 2> "$out/ab.err" || fail "ab: $(cat "$out/ab.err")"
  grep -q "losses: bit-identical" "$out/ab.txt" || fail "ab: $(cat "$out/ab.txt")"
  # Each rank ran on its own host: its "pid/R" entry in the round's store names the host.
  local addr=${PW_NETNS_STORE#redis://} key placed=0
  for key in $(redis-cli -h "${addr%:*}" -p "${addr##*:}" --scan --pattern 'ab-*/pid/*'); do
    local host
    host=$(redis-cli -h "${addr%:*}" -p "${addr##*:}" get "$key" | cut -d' ' -f1)
    [[ $host == "pw-$name-h$((${key##*/} + 1))" ]] || fail "ab: $key ran on '$host'"
    placed=$((placed + 1))
  done
  ((placed == 4)) || fail "ab: $placed rank entries in the store (want 2 ranks x 2 rounds)"
  echo "ab: plain and overlap plans trained on the test bed's hosts, losses bit-identical"
  # The communication profile taken on the link: the measuring run's ranks on the hosts
  # (two plans: two runs, each meeting under its own key prefix).
  "$pw" opt "$small" -p "$plain" -o "$out/small_plain.pb" > /dev/null
  "$pw" opt "$small" -p "$plain,assign-streams,overlap-column-parallel-backward,insert-events" \
    -o "$out/small_overlap.pb" > /dev/null
  "$pw" profile "$out/small_plain.pb" "$out/small_overlap.pb" --comm --comm-steps 2 --repeat 1 --warmup 0 --no-calibrate \
    --store "$PW_NETNS_STORE" --rank-prefix "$cluster exec --name $name {host}" \
    -o "$out/small_link.pbtxt" > "$out/profile.out" 2>&1 || fail "profile: $(cat "$out/profile.out")"
  grep -q "^all_reduce over 2 ranks" "$out/profile.out" || fail "profile: $(cat "$out/profile.out")"
  local rings=0 address
  for key in $(redis-cli -h "${addr%:*}" -p "${addr##*:}" --scan --pattern 'commbench-*/ring/*'); do
    address=$(redis-cli -h "${addr%:*}" -p "${addr##*:}" get "$key" | cut -d' ' -f1)
    [[ $address == "${PW_NETNS_ADDR_1}" || $address == "${PW_NETNS_ADDR_2}" ]] ||
      fail "profile: $key listened on '$address', not a test bed host"
    rings=$((rings + 1))
  done
  ((rings >= 4)) || fail "profile: $rings ring members in the store (want both ranks, two runs)"
  echo "profile: the all-reduces measured between the test bed's hosts"
}

for c in "${cases[@]}"; do
  case $c in
    train) case_train ;;
    kill) case_fault kill KILL "rank 1 died" 10 ;;
    stop) case_fault stop STOP "rank 1 stopped responding" 35 ;;
    env) case_env ;;
    ab) case_ab ;;
    *) fail "unknown case '$c' (train kill stop env ab)" ;;
  esac
done
