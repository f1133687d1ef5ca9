#!/usr/bin/env bash
# RDMA WRITE between two processes on the ucx provider (UcxPutBenchmark) and native ucx_perftest
# (ucp_put_lat, ucp_put_bw, ucp_get) on the same transports and sizes, one after the other in one run.
# Needs ucx-utils (ucx_perftest). Usage: bench/ucx-compare.sh [FORKS]   (output on stdout)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
forks="${1:-1}"
command -v ucx_perftest >/dev/null || { echo "ucx-compare: ucx_perftest is missing (apt-get install ucx-utils)" >&2; exit 2; }
echo "== regmem (UcxPutBenchmark, $forks fork(s)) =="
"$here/regmem" bench --include UcxPutBenchmark --forks "$forks"
port=13337
for tls in "sysv,posix,cma,self" "tcp,self"; do
  for t in "ucp_put_lat 8" "ucp_put_bw 65536" "ucp_put_bw 1048576" "ucp_get 65536" "ucp_get 1048576"; do
    set -- $t
    n=$([ "$2" -ge 1048576 ] && echo 2000 || echo 20000)
    port=$((port + 1))
    UCX_TLS="$tls" ucx_perftest -p "$port" >/dev/null 2>&1 &
    server=$!
    sleep 1
    line=$(UCX_TLS="$tls" timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t "$1" -s "$2" -n "$n" 2>&1 | grep '^Final' || true)
    wait "$server" || true
    echo "== ucx_perftest UCX_TLS=$tls -t $1 -s $2 -n $n: $line"
  done
done
echo "(Final: iterations, latency us 50%ile / average / overall, bandwidth MiB/s (2^20 bytes: ucx_perftest says MB/s) average / overall, msg/s average / overall;"
echo " ucp_put_lat is half a round trip: each side puts and waits for the other's put)"
