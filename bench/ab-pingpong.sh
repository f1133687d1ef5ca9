#!/usr/bin/env bash
# A/B of the same-host round trip between two builds of regmem, beside Aeron IPC in the same rounds:
# per round, Aeron IPC ping-pong of 64 B (AeronPingPongBenchmark), then the verbs SEND/RECV ping-pong
# of 64 B to a child JVM (PingPongBenchmark, pair=shm-process and ucx-process, the ucx device's
# same-host connections taking the lane) with build A, then with build B, then Aeron again (the
# lower p50 of the two Aeron runs is the round's peer). SampleTime, 3 warm-up and 5 measured 1 s
# iterations, one fork. Which threads spin: two in every case (the benchmark thread and the child's
# poll loop; Aeron's two client threads).
# Environment: SIZES (bytes per message, comma-separated; default 64: more sizes also set
# REGMEM_BENCH_PINGPONG_MAX, the buffers' size at both ends), PAIRS (default shm-process,ucx-process),
# AERON=0 (leave Aeron's runs out, e.g. for sizes it is not run at).
# Usage: bench/ab-pingpong.sh A.jar B.jar [ROUNDS]   (each jar: bench/target/regmem.jar of a build)
set -euo pipefail
. "$(dirname "$0")/env.sh"
a="$1"
b="$2"
rounds="${3:-3}"
sizes="${SIZES:-64}"
pairs="${PAIRS:-shm-process,ucx-process}"
biggest=$(tr ',' '\n' <<< "$sizes" | sort -n | tail -1)
export REGMEM_BENCH_PINGPONG_MAX=$(( biggest > 4096 ? biggest : 4096 ))
run() { # $1 jar, $2 include regex, rest: more arguments
  local jar="$1" include="$2"; shift 2
  java --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -jar "$jar" bench --include "$include" \
    --forks 1 --iterations 5 --warmup 3 "$@" 2>&1 | grep -E '^[A-Za-z]+Benchmark\.[A-Za-z]+(:p0\.(50|99))? |Exception|Error:' || true
}
for ((i = 1; i <= rounds; i++)); do
  if [ "${AERON:-1}" != 0 ]; then
    echo "== round $i of $rounds: Aeron IPC"
    run "$b" 'AeronPingPongBenchmark'
  fi
  echo "== round $i of $rounds: A ($a)"
  run "$a" '\.PingPongBenchmark\.roundTrip$' --param pair="$pairs" --size "$sizes"
  echo "== round $i of $rounds: B ($b)"
  run "$b" '\.PingPongBenchmark\.roundTrip$' --param pair="$pairs" --size "$sizes"
  if [ "${AERON:-1}" != 0 ]; then
    echo "== round $i of $rounds: Aeron IPC again"
    run "$b" 'AeronPingPongBenchmark'
  fi
done
