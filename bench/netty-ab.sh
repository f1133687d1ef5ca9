#!/usr/bin/env bash
# A/B of the Netty transport between two builds of regmem, beside epoll in the same rounds: per round
# and per size and number in flight, NettyTransportEcho (bench/netty-echo.sh) on regmem-shm with build
# A, then with build B, then on epoll (with build B's jar). MAIN=GrpcUnaryEcho runs gRPC's unary calls
# (bench/grpc-unary.sh) instead. Threads that spin: as in bench/netty-echo.sh.
# Usage: bench/netty-ab.sh A.jar B.jar [ROUNDS] [SECONDS] [SIZES] [INFLIGHT]   (each jar: bench/target/regmem.jar of a build)
set -euo pipefail
here="$(dirname "$0")"
a="$1"
b="$2"
rounds="${3:-3}"
seconds="${4:-4}"
sizes="${5:-1048576}"
inflights="${6:-1 16}"
script="$here/netty-echo.sh"
if [ "${MAIN:-NettyTransportEcho}" = GrpcUnaryEcho ]; then script="$here/grpc-unary.sh"; fi
for ((i = 1; i <= rounds; i++)); do
  for s in $sizes; do
    for f in $inflights; do
      echo "== round $i of $rounds: $s B, $f in flight"
      BENCH_JAR="$a" bash "$script" 1 "$seconds" regmem-shm "$s" "$f" | grep -E 'RESULT|Exception|ERROR' | sed 's/^RESULT /A: /'
      BENCH_JAR="$b" bash "$script" 1 "$seconds" regmem-shm "$s" "$f" | grep -E 'RESULT|Exception|ERROR' | sed 's/^RESULT /B: /'
      BENCH_JAR="$b" bash "$script" 1 "$seconds" epoll "$s" "$f" | grep -E 'RESULT|Exception|ERROR'
    done
  done
done
