#!/usr/bin/env bash
# The Netty echo (netty-echo.sh) and gRPC unary (grpc-unary.sh) benchmarks between two network
# namespaces joined by a veth pair, as across hosts: the server in namespace A, the client in B, the
# regmem transport over ucx devices (UCX over TCP on the veth, which stands in for a NIC here) beside
# Netty's epoll and NIO transports over the same link. Needs root (ip netns).
# Usage: bench/netty-netns.sh [ROUNDS] [SECONDS]   (output on stdout)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-2}"
seconds="${2:-4}"
nsa=regmem-nbench-a
nsb=regmem-nbench-b
addr_a=10.213.11.1
addr_b=10.213.11.2
cleanup() {
  ip netns del "$nsa" 2>/dev/null || true
  ip netns del "$nsb" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
ip netns add "$nsa"
ip netns add "$nsb"
ip link add rmn-a type veth peer name rmn-b
ip link set rmn-a netns "$nsa"
ip link set rmn-b netns "$nsb"
ip -n "$nsa" addr add "$addr_a/30" dev rmn-a
ip -n "$nsb" addr add "$addr_b/30" dev rmn-b
for ns in "$nsa" "$nsb"; do
  ip -n "$ns" link set lo up
done
ip -n "$nsa" link set rmn-a up
ip -n "$nsb" link set rmn-b up
export HOST="$addr_a" SERVER_PREFIX="ip netns exec $nsa" CLIENT_PREFIX="ip netns exec $nsb"
for ((i = 1; i <= rounds; i++)); do
  echo "=== namespaces, round $i of $rounds"
  bash "$here/bench/netty-echo.sh" 1 "$seconds" "regmem-ucx epoll nio" "64 65536 1048576" "1 16"
  bash "$here/bench/grpc-unary.sh" 1 "$seconds" "regmem-ucx epoll" "64 65536" "1 64"
done
