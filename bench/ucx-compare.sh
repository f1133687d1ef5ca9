#!/usr/bin/env bash
# RDMA WRITE/READ between two processes on the ucx provider (UcxPutBenchmark, the default checked
# path) beside native ucx_perftest, cell by cell and in pairs: for each transport and measure, ROUNDS
# times one JMH fork of regmem's cell, then one ucx_perftest run of each native peer on the same
# transport and size (ucp_put_lat and ucp_am_lat beside the 8 B round trip; ucp_put_bw and ucp_am_bw
# beside streamed WRITEs; ucp_get and ucp_am_bw beside streamed READs), so that each group sees the
# same minute of this machine. Each ucx_perftest run is about 2-3 s long (its iteration count is set
# per cell), so both tools average over seconds, not one of them over milliseconds.
# Needs ucx-utils (ucx_perftest). Usage: bench/ucx-compare.sh [ROUNDS]   (output on stdout; each regmem
# run's whole JMH output is kept in bench/target/ucx-compare-jmh.log, and any error it reports is shown)
set -euo pipefail
# ucx over UCX itself: a ucx device's connections to this host would otherwise take the same-host
# lane (bench/shm-compare.sh measures that).
export REGMEM_UCX_SAME_HOST_LANE=false
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
# transport, then per cell: regmem benchmark, size, then native peers as test:iterations (~2-3 s each)
run_transport() {
  local tls="$1"; shift
  local ucx_tls="${tls//+/,},self"
  for cell in "$@"; do
    set -- $cell
    local bench="$1" size="$2"; shift 2
    for ((i = 1; i <= rounds; i++)); do
      echo "== regmem UcxPutBenchmark.$bench transport=$tls size=$size (round $i of $rounds, 1 fork)"
      "$here/regmem" bench --include "UcxPutBenchmark.$bench\$" --forks 1 --size "$size" --param "transport=$tls" \
        --param mode=message 2>&1 | tee -a "$log" \
        | grep -E '^(Benchmark|UcxPutBenchmark)|Exception|Error:|Caused by|^[[:space:]]+at io\.regmem' || true
      for peer in "$@"; do
        perftest "$ucx_tls" "${peer%%:*}" "$size" "${peer##*:}"
      done
    done
  done
}
run_transport "sysv+posix+cma" "writeRoundTrip 8 ucp_put_lat:5000000 ucp_am_lat:2000000" \
  "writeStreamed 65536 ucp_put_bw:1000000 ucp_am_bw:300000" "writeStreamed 1048576 ucp_put_bw:40000 ucp_am_bw:25000" \
  "readStreamed 65536 ucp_get:1000000 ucp_am_bw:300000" "readStreamed 1048576 ucp_get:40000 ucp_am_bw:25000"
run_transport "tcp" "writeRoundTrip 8 ucp_put_lat:100000 ucp_am_lat:100000" \
  "writeStreamed 65536 ucp_put_bw:50000 ucp_am_bw:50000" "writeStreamed 1048576 ucp_put_bw:2000 ucp_am_bw:2000" \
  "readStreamed 65536 ucp_get:2000 ucp_am_bw:50000" "readStreamed 1048576 ucp_get:1500 ucp_am_bw:2000"
echo "(regmem: ns per operation, the checked path (every WRITE and READ executed and answered by the target);"
echo " ucx_perftest Final: iterations, latency us 50%ile / average / overall, bandwidth MiB/s (2^20 bytes;"
echo " ucx_perftest says MB/s) average / overall, msg/s average / overall; ucp_put_lat and ucp_am_lat are"
echo " half a round trip: each side sends and waits for the other's)"
