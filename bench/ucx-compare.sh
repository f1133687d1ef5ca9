#!/usr/bin/env bash
# RDMA WRITE/READ between two processes on the ucx provider (UcxPutBenchmark) beside native ucx_perftest
# (ucp_put_lat, ucp_put_bw, ucp_get), cell by cell: for each transport and measure, regmem's JMH run and
# then ucx_perftest on the same transport and size, so that both see the same minute of this machine.
# Needs ucx-utils (ucx_perftest). Usage: bench/ucx-compare.sh [FORKS]   (output on stdout)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
forks="${1:-1}"
command -v ucx_perftest >/dev/null || { echo "ucx-compare: ucx_perftest is missing (apt-get install ucx-utils)" >&2; exit 2; }
port=13337
perftest() { # $1 UCX_TLS, $2 test, $3 size
  local n
  n=$([ "$3" -ge 1048576 ] && echo 2000 || echo 20000)
  port=$((port + 1))
  UCX_TLS="$1" ucx_perftest -p "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  local line
  line=$(UCX_TLS="$1" timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t "$2" -s "$3" -n "$n" 2>&1 | grep '^Final' || true)
  wait "$server" || true
  echo "== ucx_perftest UCX_TLS=$1 -t $2 -s $3 -n $n: $line"
}
for tls in "sysv+posix+cma" "tcp"; do
  ucx_tls="${tls//+/,},self"
  for cell in "writeRoundTrip 8 ucp_put_lat" "writeStreamed 65536 ucp_put_bw" "writeStreamed 1048576 ucp_put_bw" \
              "readStreamed 65536 ucp_get" "readStreamed 1048576 ucp_get"; do
    set -- $cell
    echo "== regmem UcxPutBenchmark.$1 transport=$tls size=$2 ($forks fork(s))"
    "$here/regmem" bench --include "UcxPutBenchmark.$1\$" --forks "$forks" --size "$2" --param "transport=$tls" \
      2>&1 | grep -E '^(Benchmark|UcxPutBenchmark)' || true
    perftest "$ucx_tls" "$3" "$2"
  done
done
echo "(regmem: ns per operation, both modes; ucx_perftest Final: iterations, latency us 50%ile / average / overall,"
echo " bandwidth MiB/s (2^20 bytes; ucx_perftest says MB/s) average / overall, msg/s average / overall;"
echo " ucp_put_lat is half a round trip: each side puts and waits for the other's put)"
