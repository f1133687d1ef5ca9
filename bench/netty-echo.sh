#!/usr/bin/env bash
# A Netty echo between two processes of this host (NettyTransportEcho), on the regmem transport (shm
# by default) beside Netty's epoll and NIO transports over TCP on 127.0.0.1, interleaved round by
# round: for each message size and number in flight, each transport in turn runs a server process and
# a client process that keeps that many messages in flight for SECONDS after a warm-up (WARMUP
# seconds, environment; default 3).
# Threads that spin: the regmem event loops poll for 50 us after their last work before they sleep
# (so they spin through a ping-pong); epoll's and NIO's sleep in the kernel between messages.
# Usage: bench/netty-echo.sh [ROUNDS] [SECONDS] [TRANSPORTS] [SIZES] [INFLIGHT]   (output on stdout)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
. "$here/.ci/find-jdk.sh"
regmem_find_jdk
export PATH="$JAVA_HOME/bin:$PATH"
jar="$here/bench/target/regmem.jar"
rounds="${1:-3}"
seconds="${2:-5}"
transports="${3:-regmem-shm epoll nio}"
sizes="${4:-64 4096 65536 1048576}"
inflights="${5:-1 16}"
jvm=(java --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow
  --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED
  -Dio.netty.tryReflectionSetAccessible=true -Dio.netty.leakDetection.level=disabled
  -Xms1g -Xmx1g ${WARMUP:+-Dbench.warmupSeconds=$WARMUP} -cp "$jar" io.regmem.bench.NettyTransportEcho)
# SERVER_PREFIX / CLIENT_PREFIX (environment): a command each process runs under (ip netns exec NAME);
# HOST: the server's address (default 127.0.0.1).
host="${HOST:-127.0.0.1}"
read -r -a server_prefix <<< "${SERVER_PREFIX:-}"
read -r -a client_prefix <<< "${CLIENT_PREFIX:-}"
run() { # $1 transport, $2 size, $3 inflight
  local dir
  dir=$(mktemp -d)
  mkfifo "$dir/in"
  "${server_prefix[@]}" "${jvm[@]}" server "$1" "$host" < "$dir/in" > "$dir/server" 2>&1 &
  local pid=$!
  exec 8> "$dir/in"
  for ((w = 0; w < 200; w++)); do grep -q '^PORT' "$dir/server" 2>/dev/null && break; sleep 0.05; done
  local port
  port=$(sed -n 's/^PORT //p' "$dir/server")
  "${client_prefix[@]}" "${jvm[@]}" client "$1" "$host" "$port" "$2" "$3" "$seconds" 2>&1 | grep -E 'RESULT|Exception' || true
  exec 8>&-
  wait "$pid" || true
  rm -rf "$dir"
}
for ((i = 1; i <= rounds; i++)); do
  for s in $sizes; do
    for f in $inflights; do
      echo "== round $i of $rounds: $s B, $f in flight"
      for t in $transports; do
        run "$t" "$s" "$f"
      done
    done
  done
done
