#!/usr/bin/env bash
# Same-host multicast beside Aeron IPC, interleaved round by round: the 64-byte round trip of two
# threads of one JVM (MulticastPingPongBenchmark: regmem-shm once, then aeron-ipc twice, of which
# BENCHMARKS.md takes the lower p50, since Aeron's embedded driver starts differently from run to run;
# -prof gc; 1 fork, 2x2 s warm-up, 3x3 s measured; both threads spin), then the one-way latency of one
# publisher process and one subscriber process (bench/multicast-fanout.sh with SUBSCRIBERS=1, COUNT
# messages at 50,000/s), then DatagramBenchmark's one-thread costs (shm and soft, -prof gc).
# AERON_DRIVER_IDLE=sleep has the fan-out's media driver sleep 1 ms between duty cycles instead of
# yielding (bench/multicast-fanout.sh).
# Usage: bench/multicast-ipc-compare.sh [ROUNDS] [COUNT]   (output on stdout)
set -euo pipefail
. "$(dirname "$0")/env.sh"
rounds="${1:-3}"
count="${2:-300000}"
jmh() { # JMH, one fork, printing its result lines and failures only
  java -cp "$jar" org.openjdk.jmh.Main "$@" -f 1 2>&1 \
    | grep -E '^[A-Za-z]+Benchmark\.[A-Za-z]+(:p0\.(50|99|999)|:gc\.alloc\.rate\.norm)? |Exception|Error:' || true
}
echo "# $(date -u) commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
for ((r = 1; r <= rounds; r++)); do
  for t in regmem-shm aeron-ipc aeron-ipc; do
    echo "== round $r of $rounds: multicast round trip, $t"
    jmh MulticastPingPongBenchmark -p transport="$t" -prof gc -wi 2 -w 2 -i 3 -r 3
  done
done
echo "== fanout: bench/multicast-fanout.sh $rounds $count 50000 \"regmem-shm aeron-ipc\", SUBSCRIBERS=1, AERON_DRIVER_IDLE=${AERON_DRIVER_IDLE:-yield}"
SUBSCRIBERS=1 bash "$here/bench/multicast-fanout.sh" "$rounds" "$count" 50000 "regmem-shm aeron-ipc"
echo "== DatagramBenchmark.multicast and rcSendRecv, one thread, -prof gc"
jmh 'DatagramBenchmark.(multicast|rcSendRecv)' -p provider=shm,soft -p members=1 -prof gc -wi 3 -i 5
