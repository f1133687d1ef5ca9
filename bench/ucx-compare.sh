#!/usr/bin/env bash
# RDMA WRITE/READ between two processes on the ucx provider (UcxPutBenchmark) beside native ucx_perftest
# (ucp_put_lat, ucp_put_bw, ucp_get), cell by cell and in pairs: for each transport and measure, ROUNDS
# times one JMH fork of regmem's cell, then one ucx_perftest run on the same transport and size, so that
# each pair sees the same minute of this machine. Each ucx_perftest run is about 2-3 s long (its
# iteration count is set per cell), so both tools average over seconds, not one of them over milliseconds.
# Needs ucx-utils (ucx_perftest). Usage: bench/ucx-compare.sh [ROUNDS]   (output on stdout; each regmem
# run's whole JMH output is kept in bench/target/ucx-compare-jmh.log, and any error it reports is shown)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-1}"
command -v ucx_perftest >/dev/null || { echo "ucx-compare: ucx_perftest is missing (apt-get install ucx-utils)" >&2; exit 2; }
log="$here/bench/target/ucx-compare-jmh.log"
mkdir -p "$(dirname "$log")"
: > "$log"
port=13337
perftest() { # $1 UCX_TLS, $2 test, $3 size, $4 iterations
  port=$((port + 1))
  UCX_TLS="$1" ucx_perftest -p "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  local line
  line=$(UCX_TLS="$1" timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t "$2" -s "$3" -n "$4" 2>&1 | grep '^Final' || true)
  wait "$server" || true
  echo "== ucx_perftest UCX_TLS=$1 -t $2 -s $3 -n $4: $line"
}
# transport, then per cell: regmem benchmark, size, ucx_perftest test, ucx_perftest iterations (~2-3 s)
run_transport() {
  local tls="$1"; shift
  local ucx_tls="${tls//+/,},self"
  for cell in "$@"; do
    set -- $cell
    for ((i = 1; i <= rounds; i++)); do
      echo "== regmem UcxPutBenchmark.$1 transport=$tls size=$2 (round $i of $rounds, 1 fork)"
      "$here/regmem" bench --include "UcxPutBenchmark.$1\$" --forks 1 --size "$2" --param "transport=$tls" \
        2>&1 | tee -a "$log" | grep -E '^(Benchmark|UcxPutBenchmark)|Exception|Error:|Caused by|^[[:space:]]+at io\.regmem' || true
      perftest "$ucx_tls" "$3" "$2" "$4"
    done
  done
}
run_transport "sysv+posix+cma" "writeRoundTrip 8 ucp_put_lat 5000000" "writeStreamed 65536 ucp_put_bw 1000000" \
  "writeStreamed 1048576 ucp_put_bw 40000" "readStreamed 65536 ucp_get 1000000" "readStreamed 1048576 ucp_get 40000"
run_transport "tcp" "writeRoundTrip 8 ucp_put_lat 100000" "writeStreamed 65536 ucp_put_bw 50000" \
  "writeStreamed 1048576 ucp_put_bw 2000" "readStreamed 65536 ucp_get 2000" "readStreamed 1048576 ucp_get 1500"
echo "(regmem: ns per operation, both modes; ucx_perftest Final: iterations, latency us 50%ile / average / overall,"
echo " bandwidth MiB/s (2^20 bytes; ucx_perftest says MB/s) average / overall, msg/s average / overall;"
echo " ucp_put_lat is half a round trip: each side puts and waits for the other's put)"
