#!/usr/bin/env bash
# UDP multicast between two network namespaces joined by a veth pair (as across hosts: the kernel's
# IP stack at both ends, one link): one publisher process in namespace A multicasting 64-byte messages
# at a paced rate to 1 and then 3 subscriber processes in namespace B, each subscriber measuring the
# one-way latency of every message after the first quarter (MulticastFanout), interleaved round by
# round: regmem-ucx (ucx devices' UD QPs, datagramBind on each namespace's veth address) beside
# aeron-udp (Aeron 1.47 UDP multicast with a media driver in each namespace: shared mode, its thread
# yielding when idle; channel interface the namespace's veth address). Threads that spin: one per
# publisher or subscriber process; Aeron's two driver threads besides. Aeron adds flow control and
# NAK-based recovery; regmem recovers nothing and a subscriber without a posted receive drops (counted).
# Needs root (ip netns). Usage: bench/multicast-netns.sh [ROUNDS] [COUNT] [RATE]   (output on stdout)
set -euo pipefail
. "$(dirname "$0")/env.sh"
rounds="${1:-3}"
count="${2:-100000}"
rate="${3:-50000}"
group=239.255.92.1
nsa=regmem-bench-a
nsb=regmem-bench-b
addr_a=10.213.9.1
addr_b=10.213.9.2
cleanup() {
  ip netns del "$nsa" 2>/dev/null || true
  ip netns del "$nsb" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
ip netns add "$nsa"
ip netns add "$nsb"
ip link add rmb-a type veth peer name rmb-b
ip link set rmb-a netns "$nsa"
ip link set rmb-b netns "$nsb"
ip -n "$nsa" addr add "$addr_a/30" dev rmb-a
ip -n "$nsb" addr add "$addr_b/30" dev rmb-b
for ns in "$nsa" "$nsb"; do
  ip -n "$ns" link set lo up
done
ip -n "$nsa" link set rmb-a up
ip -n "$nsb" link set rmb-b up
java_in() { # $1 namespace, $2 interface address, then JVM options, --, MulticastFanout's arguments
  local ns="$1" addr="$2"
  shift 2
  local props=()
  while [[ "$1" != "--" ]]; do props+=("$1"); shift; done
  shift
  ip netns exec "$ns" java --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
    --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED -Xms256m -Xmx256m -Dfanout.interface="$addr" "${props[@]}" \
    -cp "$jar" io.regmem.bench.MulticastFanout "$@"
}
run() { # $1 transport, $2 subscribers
  local dir
  dir=$(mktemp -d)
  local pids=()
  local drivers=()
  local da=() db=()
  if [[ "$1" == aeron-udp ]]; then
    da=(-Daeron.dir="$dir/aeron-a")
    db=(-Daeron.dir="$dir/aeron-b")
    mkfifo "$dir/driver-in"
    java_in "$nsa" "$addr_a" -- driver "$dir/aeron-a" < "$dir/driver-in" > "$dir/driver-a" 2>&1 &
    drivers+=($!)
    java_in "$nsb" "$addr_b" -- driver "$dir/aeron-b" < "$dir/driver-in" > "$dir/driver-b" 2>&1 &
    drivers+=($!)
    exec 9> "$dir/driver-in"
    for d in driver-a driver-b; do
      for ((w = 0; w < 100; w++)); do grep -q READY "$dir/$d" 2>/dev/null && break; sleep 0.1; done
    done
  fi
  for ((s = 1; s <= $2; s++)); do
    (java_in "$nsb" "$addr_b" "${db[@]}" -- sub "$1" "$group" "$count" > "$dir/sub$s" 2>&1) &
    pids+=($!)
  done
  for ((s = 1; s <= $2; s++)); do
    for ((w = 0; w < 100; w++)); do grep -q READY "$dir/sub$s" 2>/dev/null && break; sleep 0.1; done
  done
  sleep 1
  java_in "$nsa" "$addr_a" "${da[@]}" -- pub "$1" "$group" "$count" "$rate" 2>&1 | grep -E 'SENT|Exception' || true
  for p in "${pids[@]}"; do wait "$p" || true; done
  if [[ ${#drivers[@]} -gt 0 ]]; then
    exec 9>&-
    for d in "${drivers[@]}"; do wait "$d" || true; done
  fi
  for ((s = 1; s <= $2; s++)); do
    grep -hE 'RESULT|DROPPED|Exception' "$dir/sub$s" | sed "s/^/  subscriber $s: /" || true
  done
  rm -rf "$dir"
}
for ((i = 1; i <= rounds; i++)); do
  for n in 1 3; do
    for t in regmem-ucx aeron-udp; do
      echo "== round $i of $rounds: $t, publisher in $nsa, $n subscriber process(es) in $nsb across the veth, $count messages of 64 B at $rate/s"
      run "$t" "$n"
    done
  done
done
