#!/usr/bin/env bash
# The same-host lane between two processes beside what people run there, in paired rounds so that
# every peer sees the same minutes of this machine. 'ucx' below is a ucx device as it comes (its
# same-host connections take the lane), 'ucx over UCX' the same with REGMEM_UCX_SAME_HOST_LANE=false
# (UCX's shared-memory transports). Per round:
#  (1) the verbs SEND/RECV ping-pong of 64 B to a child JVM on shm, on ucx and on ucx over UCX
#      (PingPongBenchmark), and Aeron IPC ping-pong of 64 B (AeronPingPongBenchmark), SampleTime:
#      p50/p99 of the round trip;
#  (2) the RPC transport's 64 B call to a 'regmem serve' child, on shm, ucx and ucx over UCX
#      (one call in flight, every call's latency in an HdrHistogram);
#  (3) UcxPutBenchmark on shm, ucx and ucx over UCX: the 8 B WRITE round trip, and 64 KiB and
#      1 MiB WRITEs and READs with 16 in flight (ns per request: bytes / time = bandwidth);
#  (4) Aeron IPC's ping-pong again, so that each round has two runs of it (compare with the lower p50);
#  (5) the native peers on the same sizes: ucx_perftest ucp_put_lat, ucp_am_lat, ucp_put_bw, ucp_get,
#      ucp_am_bw (sysv,posix,cma), and pvm-copy (bench/native/pvm-copy.c, built here with gcc): one
#      process_vm_readv (what the lane's target does for a large WRITE) or process_vm_writev of the
#      same size between two processes, the same buffers every time.
# Which threads spin: two in every case, one per process or end (regmem: the benchmark thread and the
# child's progress thread or poll loop; Aeron: its two client threads; ucx_perftest: one per process;
# pvm-copy: one).
# Usage: bench/shm-compare.sh [ROUNDS] [SECONDS]   (output on stdout; JMH output in bench/target/shm-compare-jmh.log)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-1}"
secs="${2:-8}"
log="$here/bench/target/shm-compare-jmh.log"
mkdir -p "$(dirname "$log")"
: > "$log"
command -v ucx_perftest >/dev/null || { echo "shm-compare: ucx_perftest is missing (apt-get install ucx-utils)" >&2; exit 2; }
command -v gcc >/dev/null || { echo "shm-compare: gcc is missing" >&2; exit 2; }
gcc -O2 -o "$here/bench/target/pvm-copy" "$here/bench/native/pvm-copy.c"
export UCX_TLS=sysv,posix,cma,self
port=19600
jmh() { # $1 include regex, rest: more regmem bench arguments
  local include="$1"; shift
  "$here/regmem" bench --include "$include" --forks 1 --iterations 5 --warmup 3 "$@" 2>&1 | tee -a "$log" \
    | grep -E '^[A-Za-z]+Benchmark\.[A-Za-z]+(:p0\.(50|99|999))? |Exception|Error:' || true
}
perftest() { # $1 test, $2 size, $3 iterations
  port=$((port + 1))
  ucx_perftest -p "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  local line
  line=$(timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t "$1" -s "$2" -n "$3" 2>&1 | grep '^Final' || true)
  wait "$server" || true
  echo "== ucx_perftest -t $1 -s $2 -n $3: $line"
}
rpc_args=(--threads 1 --requests 1 --rdma-requests 0 --storage-calls 1 --storage-depth 1 --storage-mib 1
  --rpc-concurrency 1 --rpc-payloads 64 --rpc-duration "$secs" --rpc-warmup 2 --quiet-progress)
show() { grep -E 'RPC over|Call latency|Single-call|^  p50 |PASS|FAIL|regmem demo: [a-z]' || true; }
for ((i = 1; i <= rounds; i++)); do
  echo "== round $i of $rounds: verbs SEND/RECV ping-pong to a child JVM (shm, ucx) and Aeron IPC"
  jmh 'PingPongBenchmark.roundTrip$' --param pair=shm-process,ucx-process
  echo "== round $i of $rounds: verbs SEND/RECV ping-pong to a child JVM, ucx over UCX"
  REGMEM_UCX_SAME_HOST_LANE=false jmh 'PingPongBenchmark.roundTrip$' --param pair=ucx-process
  for variant in shm ucx ucx-over-ucx; do
    provider="${variant%%-*}"
    lane=true
    [ "$variant" = ucx-over-ucx ] && lane=false
    echo "== round $i of $rounds: RPC 64 B call on $variant, server in another process"
    port=$((port + 1))
    REGMEM_UCX_SAME_HOST_LANE=$lane "$here/regmem" serve --provider "$provider" --listen "127.0.0.1:$port" \
      --rpc-concurrency 1 --rpc-payloads 64 --connections 1 > "$here/bench/target/shm-compare-serve.log" 2>&1 &
    server=$!
    sleep 3
    REGMEM_UCX_SAME_HOST_LANE=$lane "$here/regmem" demo --provider "$provider" --connect "127.0.0.1:$port" "${rpc_args[@]}" \
      2>&1 | show
    wait "$server" || echo "(the server ended with $?: $(tail -1 "$here/bench/target/shm-compare-serve.log"))"
  done
  echo "== round $i of $rounds: WRITE round trip of 8 B, WRITEs and READs with 16 in flight (shm, ucx)"
  jmh 'UcxPutBenchmark.writeRoundTrip$' --size 8 --param transport=shm,sysv+posix+cma --param mode=message
  jmh 'UcxPutBenchmark.(writeStreamed|readStreamed)$' --size 65536,1048576 --param transport=shm,sysv+posix+cma \
    --param mode=message
  echo "== round $i of $rounds: the same, ucx over UCX"
  REGMEM_UCX_SAME_HOST_LANE=false jmh 'UcxPutBenchmark.writeRoundTrip$' --size 8 --param transport=sysv+posix+cma \
    --param mode=message
  REGMEM_UCX_SAME_HOST_LANE=false jmh 'UcxPutBenchmark.(writeStreamed|readStreamed)$' --size 65536,1048576 \
    --param transport=sysv+posix+cma --param mode=message
  echo "== round $i of $rounds: Aeron IPC ping-pong again"
  jmh 'AeronPingPongBenchmark.roundTrip$'
  echo "== round $i of $rounds: native peers"
  perftest ucp_put_lat 8 3000000
  perftest ucp_am_lat 8 1000000
  for size in 65536 1048576; do
    n=$((size == 65536 ? 600000 : 40000))
    perftest ucp_put_bw "$size" "$n"
    perftest ucp_get "$size" "$n"
    perftest ucp_am_bw "$size" $((n / 2))
    "$here/bench/target/pvm-copy" "$size" $((n / 2)) read
    "$here/bench/target/pvm-copy" "$size" $((n / 2)) write
  done
done
echo "(JMH: ns per operation (avgt) or per round trip (sample; p0.50/p0.99 the percentiles); RPC: calls/s and per-call"
echo " latency in us; ucx_perftest Final: iterations, latency us 50%ile / average / overall, bandwidth MiB/s average /"
echo " overall, msg/s; ucp_put_lat and ucp_am_lat are half a round trip; pvm-copy: GB/s (10^9 B/s) and ns per copy)"
