#!/usr/bin/env bash
# What bench/netty-echo.sh and bench/grpc-unary.sh share: a server process and a client process of the
# bench main class MAIN (NettyTransportEcho, GrpcUnaryEcho) for each round, size, number in flight and
# transport, interleaved, each client running SECONDS after its warm-up (WARMUP seconds, environment;
# the class's default otherwise). SERVER_PREFIX / CLIENT_PREFIX (environment): a command each process
# runs under (ip netns exec NAME); HOST: the server's address (default 127.0.0.1); BENCH_JVM_OPTS: more
# JVM options for both processes (for example -Dbench.busyPollNanos=9223372036854775807); SERVER_JVM /
# CLIENT_JVM: more for one of them (for example -Dbench.pinLoop=0, which pins that side's event loop
# thread to CPU 0). A client's standard error is kept apart from its RESULT lines and its ERROR and
# exception lines printed after them; UCX's log goes to standard error (UCX_LOG_FILE=stderr unless set).
# Usage: bench/two-process.sh MAIN LABEL ROUNDS SECONDS TRANSPORTS SIZES INFLIGHT   (output on stdout)
set -euo pipefail
. "$(dirname "$0")/env.sh"
main="$1"
label="$2"
rounds="$3"
seconds="$4"
transports="$5"
sizes="$6"
inflights="$7"
jvm=(java --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow
  --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED
  -Dio.netty.tryReflectionSetAccessible=true -Dio.netty.leakDetection.level=disabled
  -Xms1g -Xmx1g ${WARMUP:+-Dbench.warmupSeconds=$WARMUP} ${BENCH_JVM_OPTS:-} -cp "$jar")
host="${HOST:-127.0.0.1}"
export UCX_LOG_FILE="${UCX_LOG_FILE:-stderr}" # (UCX logs to stdout by default: its lines would land inside RESULT lines)
read -r -a server_prefix <<< "${SERVER_PREFIX:-}"
read -r -a client_prefix <<< "${CLIENT_PREFIX:-}"
run() { # $1 transport, $2 size, $3 inflight
  local dir
  dir=$(mktemp -d)
  mkfifo "$dir/in"
  "${server_prefix[@]}" "${jvm[@]}" ${SERVER_JVM:-} "io.regmem.bench.$main" server "$1" "$host" < "$dir/in" > "$dir/server" 2>&1 &
  local pid=$!
  exec 8> "$dir/in"
  for ((w = 0; w < 200; w++)); do grep -q '^PORT' "$dir/server" 2>/dev/null && break; sleep 0.05; done
  local port
  port=$(sed -n 's/^PORT //p' "$dir/server")
  "${client_prefix[@]}" "${jvm[@]}" ${CLIENT_JVM:-} "io.regmem.bench.$main" client "$1" "$host" "$port" "$2" "$3" "$seconds" \
    2> "$dir/client-stderr" | grep -E 'RESULT|Exception' || true
  grep -E 'ERROR|Exception' "$dir/client-stderr" | sed 's/^/  (client stderr) /' || true
  exec 8>&-
  wait "$pid" || true
  rm -rf "$dir"
}
for ((i = 1; i <= rounds; i++)); do
  for s in $sizes; do
    for f in $inflights; do
      echo "== round $i of $rounds: $label$s B, $f in flight"
      for t in $transports; do
        run "$t" "$s" "$f"
      done
    done
  done
done
