#!/usr/bin/env bash
# A READ to a peer whose progress thread sleeps, beside the OS's own wake-up between two processes, in
# interleaved rounds. Per round: bench/native/futex-pingpong.c (built here with gcc; the child sleeps
# in FUTEX_WAIT, the parent wakes it after a 25 ms pause and spins for the answer: 100 round trips),
# then SleepingPeerBenchmark (an 8 B READ to a child JVM whose shm progress thread sleeps on its lanes'
# futex words after 50 us without work, waiter=thread; or whose device has no progress thread and whose
# thread waits on a completion channel with its CQ armed, as an event loop does, waiter=channel; each
# READ after a 25 ms pause; 100 single shots after 5 warm-up ones and 20,000 back-to-back READs).
# Which threads spin: the requester while it waits (regmem: the benchmark thread; C: the parent); the
# peer sleeps.
# Usage: bench/sleeping-peer.sh [ROUNDS]   (p50/p90/p99/mean in us per line)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-3}"
mkdir -p "$here/bench/target"
gcc -O2 -o "$here/bench/target/futex-pingpong" "$here/bench/native/futex-pingpong.c"
json="$here/bench/target/sleeping-peer.json"
for ((i = 1; i <= rounds; i++)); do
  echo "== round $i of $rounds"
  "$here/bench/target/futex-pingpong" 100 25000
  "$here/regmem" bench --include 'SleepingPeerBenchmark' --param waiter=thread,channel --forks 1 --iterations 100 --warmup 5 \
    --json "$json" >/dev/null 2>&1
  python3 - "$json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    v = sorted(x for fork in r["primaryMetric"]["rawData"] for x in fork)
    n = len(v)
    print("SleepingPeerBenchmark provider=%s waiter=%s: %d READs, each after a 25000 us pause: p50 %.1f us, p90 %.1f, p99 %.1f, mean %.1f, max %.1f"
          % (r["params"]["provider"], r["params"].get("waiter", "thread"), n, v[n // 2], v[n * 9 // 10], v[n * 99 // 100], sum(v) / n, v[-1]))
PY
done
