#!/usr/bin/env bash
# Datagrams over UDP multicast on the loopback, beside Aeron and the JDK in the same rounds: per round,
# the 64-byte multicast round trip (MulticastPingPongBenchmark: a ping to one group, its pong from
# another) on each transport in turn (regmem-ucx: two ucx devices' UD QPs, two threads spin; aeron-udp:
# Aeron 1.47 UDP multicast with an embedded media driver in shared mode, its thread and both client
# threads yielding when idle, so that three threads share two cores; jdk-udp: two bare
# DatagramChannels, two threads spin), then DatagramBenchmark's one-thread send+receive costs with
# -prof gc (soft and ucx; the JDK's own loopback UDP datagram beside them). SampleTime / AverageTime,
# 3 warm-up and 5 measured 1 s iterations, one fork each.
# Usage: bench/multicast-compare.sh [ROUNDS]   (output on stdout)
set -euo pipefail
. "$(dirname "$0")/env.sh"
rounds="${1:-3}"
jmh() {
  java -cp "$jar" org.openjdk.jmh.Main "$@" -f 1 -wi 3 -i 5 2>&1 \
    | grep -E '^[A-Za-z]+Benchmark\.[A-Za-z]+(:p0\.(50|99|999)|:gc\.alloc\.rate\.norm)? |Exception|Error:' || true
}
for ((i = 1; i <= rounds; i++)); do
  for t in regmem-ucx aeron-udp jdk-udp; do
    echo "== round $i of $rounds: multicast round trip, $t"
    jmh 'MulticastPingPongBenchmark' -p transport="$t"
  done
done
echo "== DatagramBenchmark (one thread: send and receive of 64 B; -prof gc)"
jmh 'DatagramBenchmark' -prof gc -p members=1,3
