#!/usr/bin/env bash
# A multi-host test bed on one machine: N hosts as network namespaces on a Linux bridge,
# each joined by a veth pair shaped with `tc tbf` in both directions, and a Redis store
# on the bridge's address. Ranks started in the namespaces talk over TCP as they would
# between machines, with the link (not memory copies) the bottleneck. Needs root (or
# CAP_NET_ADMIN), iproute2 and redis-server (scripts/install-deps.sh installs them).
#
#   scripts/netns_cluster.sh up N [--rate 1gbit] [--name NAME] [--subnet X] [--port P]
#                                 [--burst 256kb] [--latency 20ms] [--replace]
#       Hosts 1..N at 10.X.0.1..10.X.0.N, the store at redis://10.X.0.254:P. NAME (default
#       "pw", at most 6 letters or digits) keeps test beds apart; X defaults to one derived
#       from NAME. A second `up` of a live NAME is refused; --replace takes it down first.
#       Prints the variables `env` prints.
#   scripts/netns_cluster.sh down [NAME]          removes everything `up` made; idempotent
#   scripts/netns_cluster.sh exec [--name NAME] HOST CMD...   runs CMD on host HOST (1..N),
#       with the host name pw-NAME-hHOST (its own UTS namespace, as another machine); CMD
#       replaces the script's process, so `$!` of a backgrounded exec is CMD's pid
#   scripts/netns_cluster.sh env [NAME]           PW_NETNS_NAME, PW_NETNS_HOSTS,
#                                                 PW_NETNS_STORE, PW_NETNS_ADDR_<i>
#   scripts/netns_cluster.sh run N [up flags] -- CMD...
#       up, then CMD (with the `env` variables exported), then down on every exit path
#       (CMD's status, an error, Ctrl-C, SIGTERM): what tests use.
#   scripts/netns_cluster.sh check    exit 0 if namespaces can be made here, else a line
#                                     saying why and exit 77 (ctest's skip code)
#
# Shaping: `tbf` only. `netem` (delay, loss, reordering) is not available in the kernels
# of the machines this project runs on, so the test bed models a link's bandwidth and its
# queue (tbf's burst and latency), not its propagation delay or random loss.
set -Eeuo pipefail

state_root=${PW_NETNS_STATE:-/run/pipeweave-netns}

die() {
  echo "netns_cluster: $*" >&2
  exit 1
}

valid_name() { [[ $1 =~ ^[a-z0-9]{1,6}$ ]] || die "name '$1': use 1-6 lower-case letters or digits"; }

# The second octet: 20..219, from the name, so two test beds get different subnets.
default_subnet() { echo $((20 + $(printf '%s' "$1" | cksum | cut -d' ' -f1) % 200)); }

ns() { echo "pw-$1-$2"; }        # namespace of host $2
veth_out() { echo "pw$1h$2"; }   # root end of host $2's link
veth_in() { echo "pw$1n$2"; }    # namespace end
bridge() { echo "pw$1br"; }

# shape DEV [ns NS]: tbf on DEV's egress.
shape() {
  local dev=$1 where=(${2:+ip netns exec "$2"})
  "${where[@]}" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency "$latency"
}

check() {
  local probe="pw-probe-$$"
  command -v ip > /dev/null || { echo "netns_cluster: 'ip' (iproute2) is not installed" >&2; exit 77; }
  command -v tc > /dev/null || { echo "netns_cluster: 'tc' (iproute2) is not installed" >&2; exit 77; }
  command -v redis-server > /dev/null ||
    { echo "netns_cluster: redis-server is not installed (scripts/install-deps.sh)" >&2; exit 77; }
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "netns_cluster: cannot create network namespaces here ($err); needs root or CAP_NET_ADMIN" >&2
    exit 77
  fi
  ip netns del "$probe"
  if ! err=$(ip link add "pwprobe$$" type bridge 2>&1); then
    echo "netns_cluster: cannot create a bridge here ($err)" >&2
    exit 77
  fi
  ip link del "pwprobe$$"
}

down() {
  local name=${1:-pw}
  valid_name "$name"
  local dir=$state_root/$name
  if [[ -f $dir/redis.pid ]]; then
    local pid
    pid=$(cat "$dir/redis.pid")
    if [[ -n $pid ]] && kill -0 "$pid" 2> /dev/null; then
      kill "$pid" 2> /dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2> /dev/null || true
    fi
  fi
  # Processes left in a namespace would keep it (and its sockets) alive.
  local n
  for n in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^pw-$name-[0-9]+$" || true); do
    local pids
    pids=$(ip netns pids "$n" 2> /dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2> /dev/null || true
    ip netns del "$n" 2> /dev/null || true
  done
  for dev in $(ip -o link show 2> /dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
    grep -E "^pw${name}(h[0-9]+|br)$" || true); do
    ip link del "$dev" 2> /dev/null || true
  done
  rm -rf "$dir"
}

up() {
  local hosts=${1:-}
  [[ $hosts =~ ^[0-9]+$ ]] && ((hosts >= 1 && hosts <= 250)) ||
    die "up: expected a host count in 1..250, got '${hosts}'"
  shift
  name=pw rate=1gbit burst=256kb latency=20ms subnet="" port=6379 replace=0
  while (($#)); do
    case $1 in
      --name) name=${2:?--name needs a value}; shift 2 ;;
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      --burst) burst=${2:?--burst needs a value}; shift 2 ;;
      --latency) latency=${2:?--latency needs a value}; shift 2 ;;
      --subnet) subnet=${2:?--subnet needs a value}; shift 2 ;;
      --port) port=${2:?--port needs a value}; shift 2 ;;
      --replace) replace=1; shift ;;
      *) die "up: unknown flag '$1' (--name --rate --burst --latency --subnet --port --replace)" ;;
    esac
  done
  valid_name "$name"
  [[ -n $subnet ]] || subnet=$(default_subnet "$name")
  [[ $subnet =~ ^[0-9]+$ ]] && ((subnet >= 1 && subnet <= 254)) || die "--subnet must be 1..254"
  local dir=$state_root/$name
  if [[ -d $dir ]] || ip link show "$(bridge "$name")" > /dev/null 2>&1; then
    ((replace)) || die "test bed '$name' is already up: 'down $name' first, or pass --replace"
    down "$name"
  fi
  check
  # From here on a failure takes down what was made.
  trap 'down "$name"; exit 1' ERR INT TERM
  mkdir -p "$dir"
  local br
  br=$(bridge "$name")
  ip link add "$br" type bridge
  ip addr add "10.$subnet.0.254/24" dev "$br"
  ip link set "$br" up
  for ((h = 1; h <= hosts; ++h)); do
    local n out in
    n=$(ns "$name" $h) out=$(veth_out "$name" $h) in=$(veth_in "$name" $h)
    ip netns add "$n"
    ip link add "$out" type veth peer name "$in"
    ip link set "$in" netns "$n"
    ip link set "$out" master "$br" up
    ip netns exec "$n" ip link set lo up
    ip netns exec "$n" ip addr add "10.$subnet.0.$h/24" dev "$in"
    ip netns exec "$n" ip link set "$in" up
    shape "$out"       # towards the host
    shape "$in" "$n"   # from the host
  done
  redis-server --bind "10.$subnet.0.254" --port "$port" --protected-mode no --save "" --appendonly no \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" > /dev/null
  for _ in $(seq 50); do
    redis-cli -h "10.$subnet.0.254" -p "$port" ping > /dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli -h "10.$subnet.0.254" -p "$port" ping > /dev/null 2>&1 ||
    die "redis-server did not start on 10.$subnet.0.254:$port ($(tail -1 "$dir/redis.log" 2> /dev/null))"
  printf 'hosts=%s\nsubnet=%s\nport=%s\nrate=%s\n' "$hosts" "$subnet" "$port" "$rate" > "$dir/config"
  trap - ERR INT TERM
  env_of "$name"
}

env_of() {
  local name=${1:-pw}
  valid_name "$name"
  local dir=$state_root/$name
  [[ -f $dir/config ]] || die "test bed '$name' is not up ('up N --name $name')"
  local hosts subnet port rate
  source "$dir/config"
  echo "PW_NETNS_NAME=$name"
  echo "PW_NETNS_HOSTS=$hosts"
  echo "PW_NETNS_RATE=$rate"
  echo "PW_NETNS_STORE=redis://10.$subnet.0.254:$port"
  for ((h = 1; h <= hosts; ++h)); do echo "PW_NETNS_ADDR_$h=10.$subnet.0.$h"; done
}

exec_on() {
  local name=pw
  if [[ ${1:-} == --name ]]; then name=${2:?--name needs a value}; shift 2; fi
  valid_name "$name"
  local host=${1:-}
  [[ $host =~ ^[0-9]+$ ]] || die "exec: expected a host number, got '$host'"
  shift
  (($#)) || die "exec: no command"
  ip netns list | awk '{print $1}' | grep -qx "$(ns "$name" "$host")" ||
    die "exec: test bed '$name' has no host $host"
  # Each host also has a host name of its own (a UTS namespace), as separate machines do:
  # ranks then tell a peer on "another machine" from one on theirs.
  exec ip netns exec "$(ns "$name" "$host")" unshare --uts \
    sh -c 'hostname "$0" && exec "$@"' "pw-$name-h$host" "$@"
}

run() {
  local up_args=()
  while (($#)) && [[ $1 != -- ]]; do up_args+=("$1"); shift; done
  [[ ${1:-} == -- ]] || die "run: expected 'run N [up flags] -- CMD...'"
  shift
  (($#)) || die "run: no command"
  run_name=pw # global: the EXIT trap runs outside this function
  local i
  for ((i = 0; i < ${#up_args[@]}; ++i)); do
    [[ ${up_args[i]} == --name ]] && run_name=${up_args[i + 1]:-pw}
  done
  valid_name "$run_name"
  trap 'down "$run_name"' EXIT
  run_child=""
  trap '[[ -n $run_child ]] && kill -TERM "$run_child" 2> /dev/null; exit 130' INT
  trap '[[ -n $run_child ]] && kill -TERM "$run_child" 2> /dev/null; exit 143' TERM
  local vars line
  vars=$(up "${up_args[@]}")
  while IFS= read -r line; do export "${line?}"; done <<< "$vars"
  # In the background, so that a signal to this script is handled at once.
  local status=0
  "$@" &
  run_child=$!
  wait "$run_child" || status=$?
  return $status
}

cmd=${1:-}
shift || true
case $cmd in
  up) up "$@" ;;
  down) down "$@" ;;
  exec) exec_on "$@" ;;
  env) env_of "$@" ;;
  run) run "$@" ;;
  check) check ;;
  *) sed -n '2,/^set -Eeuo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
