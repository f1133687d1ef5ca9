#!/usr/bin/env bash
# Storage I/O at queue depth 32 on one 1 GiB file, job by job: regmem's IoRing (fixed buffers and
# not) and FileChannel (one thread, and 32 virtual threads) via UringBenchmark, then fio on the
# same file, block size and depth (io_uring with and without --fixedbufs, psync), so each pair is
# measured minutes apart at most. Buffered jobs read a file already in the page cache (fio:
# --invalidate=0 after a pre-read). Needs fio (apt-get install fio) and python3 (to read fio's JSON).
# Usage: bench/storage-compare.sh [FORKS] [JOB...]   (output on stdout)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
forks="${1:-1}"
shift || true
jobs=("$@")
[ ${#jobs[@]} -eq 0 ] && jobs=(randread-4k-direct randread-4k-buffered seqread-128k-direct randwrite-4k-direct)
command -v fio >/dev/null || { echo "storage-compare: fio is missing (apt-get install fio)" >&2; exit 2; }
file="${TMPDIR:-/tmp}/regmem-storage-compare.dat"
trap 'rm -f "$file"' EXIT
fio --name=make --filename="$file" --rw=write --bs=1M --size=1G --direct=1 --output=/dev/null
export REGMEM_BENCH_FILE="$file"
for job in "${jobs[@]}"; do
  echo "== $job: regmem (UringBenchmark, $forks fork(s)) =="
  "$here/regmem" bench --include UringBenchmark --param "job=$job" --forks "$forks" --warmup 2 --iterations 5 \
    | sed -n '/^### Storage/,/^JDK/p'
  IFS=- read -r rw bs mode <<<"$job"
  [ "$rw" = seqread ] && rw=read   # fio's name for sequential reads
  direct=$([ "$mode" = direct ] && echo 1 || echo 0)
  [ "$direct" = 0 ] && cat "$file" >/dev/null   # into the page cache
  echo "== $job: fio, 10 s, iodepth 32 (psync: 1), numjobs 1 (cpu ns per I/O = (usr+sys) x runtime / I/Os) =="
  for engine in "io_uring --fixedbufs" "io_uring" "psync"; do
    set -- $engine
    depth=32; [ "$1" = psync ] && depth=1
    json=$(fio --name=j --filename="$file" --rw="$rw" --bs="$bs" --iodepth="$depth" --direct="$direct" --invalidate=0 \
      --ioengine="$1" ${2:-} --runtime=10 --time_based --numjobs=1 --output-format=json)
    echo "$json" | python3 -c '
import json, sys
job, engine = sys.argv[1], sys.argv[2]
j = json.load(sys.stdin)["jobs"][0]
side = j["write"] if j["write"]["total_ios"] > 0 else j["read"]
ios = side["total_ios"]
cpu_ns = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * j["job_runtime"] * 1e6
print("| %s | fio %s | %.0f | %.0f | - |" % (job, engine, side["iops"], cpu_ns / ios))
' "$job" "$engine"
  done
done
