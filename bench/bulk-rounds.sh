#!/usr/bin/env bash
# Bulk transfers on the shm lane beside the kernel's own copy, in interleaved rounds (one JMH fork a
# round, so that every fork is reported): UcxPutBenchmark on shm (two JVMs; 64 KiB and 1 MiB WRITEs,
# which the target pulls with process_vm_readv, and READs, which the initiator copies out of the
# target's granted range with process_vm_readv; 16 in flight; ns per request, B/op from -prof gc),
# then pvm-copy (bench/native/pvm-copy.c, built here with gcc): one process_vm_readv or
# process_vm_writev of the same size between two processes, the same buffers every time.
# Which threads spin: regmem, the benchmark thread and the child's poll loop; pvm-copy, one thread.
# Usage: bench/bulk-rounds.sh [ROUNDS]   (output on stdout; JMH output in bench/target/bulk-rounds-jmh.log)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-5}"
log="$here/bench/target/bulk-rounds-jmh.log"
mkdir -p "$(dirname "$log")"
: > "$log"
command -v gcc >/dev/null || { echo "bulk-rounds: gcc is missing" >&2; exit 2; }
gcc -O2 -o "$here/bench/target/pvm-copy" "$here/bench/native/pvm-copy.c"
for ((i = 1; i <= rounds; i++)); do
  echo "== round $i of $rounds"
  "$here/regmem" bench --include 'UcxPutBenchmark.(writeStreamed|readStreamed)$' --size 65536,1048576 \
    --param transport=shm --param mode=message --forks 1 --iterations 5 --warmup 3 2>&1 | tee -a "$log" \
    | grep -E '^UcxPutBenchmark\.[A-Za-z]+ |gc.alloc.rate.norm|Exception|Error:' || true
  for size in 65536 1048576; do
    n=$((size == 65536 ? 300000 : 20000))
    "$here/bench/target/pvm-copy" "$size" "$n" read
    "$here/bench/target/pvm-copy" "$size" "$n" write
  done
done
echo "(JMH: ns per request, 16 in flight; pvm-copy: GB/s (10^9 B/s) and ns per copy)"
