#!/usr/bin/env bash
# Round trips of small messages beside Aeron IPC ping-pong, in rounds so that every peer sees the same
# minutes of this machine: per round, (1) the RPC transport's 64 B call (inline arguments and result,
# one call in flight, HdrHistogram per call in ns; a closed loop, so no coordinated omission to
# correct) on soft with client and server threads in one JVM, (2) the same across processes on ucx
# over shared memory (a 'regmem serve' child), (3) the verbs SEND/RECV ping-pong (PingPongBenchmark:
# soft, ucx in one JVM, ucx across processes) and (4) Aeron IPC ping-pong of 64 B
# (AeronPingPongBenchmark), both JMH SampleTime. Two busy-polling threads in every case. ucx here is
# as it comes: its connections to this host (in one JVM or across processes) take the same-host lane;
# run with REGMEM_UCX_SAME_HOST_LANE=false to measure ucx over UCX (bench/shm-compare.sh does both).
# Usage: bench/rpc-compare.sh [ROUNDS] [SECONDS]   (output on stdout; JMH output in bench/target/rpc-compare-jmh.log)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-1}"
secs="${2:-8}"
log="$here/bench/target/rpc-compare-jmh.log"
mkdir -p "$(dirname "$log")"
: > "$log"
port=19400
rpc_args=(--threads 1 --requests 1 --rdma-requests 0 --storage-calls 1 --storage-depth 1 --storage-mib 1
  --rpc-concurrency 1 --rpc-payloads 64 --rpc-duration "$secs" --rpc-warmup 2 --quiet-progress)
show() { grep -E 'RPC over|Call latency|PASS|FAIL|regmem demo: [a-z]' || true; }
jmh() { # $1 include regex, rest: more regmem bench arguments
  local include="$1"; shift
  "$here/regmem" bench --include "$include" --forks 1 --iterations 5 --warmup 3 "$@" 2>&1 | tee -a "$log" \
    | grep -E '^[A-Za-z]+Benchmark\.roundTrip(:p0\.(50|99|999))? |Exception|Error:' || true
}
for ((i = 1; i <= rounds; i++)); do
  echo "== round $i of $rounds: regmem RPC, soft, client and server threads in one JVM"
  "$here/regmem" demo "${rpc_args[@]}" --rpc-threads 2>&1 | show
  echo "== round $i of $rounds: regmem RPC, ucx, server in another process"
  port=$((port + 1))
  UCX_TLS=sysv,posix,cma,self "$here/regmem" serve --listen "127.0.0.1:$port" --rpc-concurrency 1 --rpc-payloads 64 \
    --connections 1 > "$here/bench/target/rpc-compare-serve.log" 2>&1 &
  server=$!
  sleep 3
  UCX_TLS=sysv,posix,cma,self "$here/regmem" demo --provider ucx --connect "127.0.0.1:$port" "${rpc_args[@]}" 2>&1 | show
  wait "$server" || echo "(the server ended with $?: $(tail -1 "$here/bench/target/rpc-compare-serve.log"))"
  echo "== round $i of $rounds: verbs SEND/RECV ping-pong (soft, ucx in one JVM, ucx across processes) and Aeron IPC"
  jmh 'PingPongBenchmark.roundTrip$' --param pair=soft,ucx,ucx-process
done
echo "(RPC: calls/s and per-call latency in us; JMH: roundTrip is the mean, p0.50/p0.99/p0.999 the percentiles, ns)"
