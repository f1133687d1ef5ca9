#!/usr/bin/env bash
# Storage I/O at queue depth 32 on one 1 GiB file: regmem's IoRing (fixed buffers and not),
# FileChannel (one thread, and 32 virtual threads) via UringBenchmark, then fio on the same file,
# block size and depth (io_uring with and without --fixedbufs, psync), one after the other.
# Needs fio (apt-get install fio) and python3 (to read fio's JSON). Usage: bench/storage-compare.sh [FORKS]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
forks="${1:-1}"
command -v fio >/dev/null || { echo "storage-compare: fio is missing (apt-get install fio)" >&2; exit 2; }
file="${TMPDIR:-/tmp}/regmem-storage-compare.dat"
trap 'rm -f "$file"' EXIT
fio --name=make --filename="$file" --rw=write --bs=1M --size=1G --direct=1 --output=/dev/null
export REGMEM_BENCH_FILE="$file"
echo "== regmem (UringBenchmark, $forks fork(s), file $file) =="
"$here/regmem" bench --include UringBenchmark --forks "$forks" --warmup 2 --iterations 5
echo "== fio 3.x, 10 s per job, iodepth 32, numjobs 1 (iops; cpu ns per I/O = (usr+sys) x runtime / I/Os) =="
for job in randread-4k-direct randread-4k-buffered seqread-128k-direct randwrite-4k-direct; do
  IFS=- read -r rw bs mode <<<"$job"
  [ "$rw" = seqread ] && rw=read   # fio's name for sequential reads
  direct=$([ "$mode" = direct ] && echo 1 || echo 0)
  for engine in "io_uring --fixedbufs" "io_uring" "psync"; do
    set -- $engine
    depth=32; [ "$1" = psync ] && depth=1
    json=$(fio --name=j --filename="$file" --rw="$rw" --bs="$bs" --iodepth="$depth" --direct="$direct" \
      --ioengine="$1" ${2:-} --runtime=10 --time_based --numjobs=1 --output-format=json)
    echo "$json" | python3 -c '
import json, sys
job, engine = sys.argv[1], sys.argv[2]
j = json.load(sys.stdin)["jobs"][0]
side = j["write"] if j["write"]["total_ios"] > 0 else j["read"]
ios = side["total_ios"]
cpu_ns = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * j["job_runtime"] * 1e6
print("fio %-22s %-22s iops %12.0f  MB/s %8.0f  cpu ns/io %8.0f" % (job, engine, side["iops"], side["bw_bytes"] / 1e6, cpu_ns / ios))
' "$job" "$engine"
  done
done
