#!/usr/bin/env bash
# One run of everything BENCHMARKS.md says about the Netty transport on one host, interleaved round by
# round: regmem's verbs ping-pong between two processes (PingPongBenchmark shm-process) beside the
# transport's own echo round trip in one JVM (NettyTransportBenchmark, -prof gc), then the Netty echo
# between two processes (netty-echo.sh: regmem on shm with its defaults and with inlineThreshold=65536,
# epoll, NIO) and gRPC unary calls (grpc-unary.sh: gRPC alone on Netty's in-JVM transport, regmem on
# shm with its defaults and inlineThreshold=65536, epoll). Usage: bench/netty-transport-compare.sh [ROUNDS] [SECONDS]   (output on stdout)
set -euo pipefail
. "$(dirname "$0")/env.sh"
rounds="${1:-3}"
seconds="${2:-4}"
for ((i = 1; i <= rounds; i++)); do
  echo "=== round $i of $rounds: verbs ping-pong and the transport's own round trip (JMH, -prof gc)"
  java -cp "$jar" org.openjdk.jmh.Main '^io.regmem.bench.(PingPongBenchmark|NettyTransportBenchmark)\.' -p pair=shm-process \
    -prof gc -f 1 -wi 3 -i 3 -w 2 -r 2 2>&1 | grep -E '^(Benchmark|PingPongBenchmark|NettyTransportBenchmark)' \
    | grep -E 'Benchmark +\(|roundTrip +|gc.alloc.rate.norm|p0.50|p0.99 ' || true
  echo "=== round $i of $rounds: Netty echo between two processes"
  bash "$here/bench/netty-echo.sh" 1 "$seconds" "regmem-shm regmem-shm:inlineThreshold=65536 epoll nio"
  echo "=== round $i of $rounds: gRPC unary between two processes"
  bash "$here/bench/grpc-unary.sh" 1 "$seconds" "local regmem-shm regmem-shm:inlineThreshold=65536 epoll"
done
