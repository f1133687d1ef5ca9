#!/usr/bin/env bash
# One publisher process multicasting 64-byte messages at a paced rate to 1 and then 3 subscriber
# processes on this host, each subscriber measuring the one-way latency of every message after the
# first quarter (MulticastFanout), interleaved round by round. TRANSPORTS (default "regmem-ucx
# aeron-udp"): regmem-ucx (ucx UD QPs over UDP multicast on the loopback), regmem-shm (shm's
# shared-memory publication rings), aeron-udp / aeron-ipc (Aeron 1.47 UDP multicast / IPC through the
# host's one media driver: a process of its own, shared mode, its thread yielding when idle). With
# STOPPED=1, each 3-subscriber run is followed by one in which subscriber 1 is stopped (SIGSTOP) from
# before the publisher starts until it ends: what a stopped subscriber costs the publisher and the
# others. Threads that spin: one per publisher or subscriber process; Aeron's driver thread besides.
# Aeron adds flow control and NAK-based recovery and buffers what a slow subscriber has not read;
# regmem recovers nothing and a subscriber without a posted receive drops (counted).
# aeron-ipc-copy: Aeron IPC whose subscriber copies each whole message out of the log before reading it
# (as a posted receive takes a datagram whole); agrona-broadcast: Agrona's BroadcastTransmitter and
# CopyBroadcastReceiver in a file of /dev/shm (the protocol of regmem's group rings, without verbs).
# SUBSCRIBERS (environment, default "1 3"): the subscriber counts to run. PIN=1: the publisher (and
# Aeron's driver) on CPU 0, the subscribers on CPU 1 (taskset; for runs with one subscriber). AERON_DRIVER_IDLE (default
# yield): the driver thread's idle strategy, yield or sleep (1 ms between its duty cycles). FANOUT_PARTS=1:
# the publisher also reports the time from a message's stamp until its post took it, each subscriber
# the time from the start of the poll that brought it to the reading of its clock (a clock reading more
# per post, and per poll).
# Usage: bench/multicast-fanout.sh [ROUNDS] [COUNT] [RATE] [TRANSPORTS] [STOPPED]   (output on stdout)
set -euo pipefail
. "$(dirname "$0")/env.sh"
rounds="${1:-3}"
count="${2:-200000}"
rate="${3:-50000}"
transports="${4:-regmem-ucx aeron-udp}"
stopped="${5:-0}"
group=239.255.91.1
jvm=(java --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow
  --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED -Xms256m -Xmx256m -Dfanout.parts="$([[ "${FANOUT_PARTS:-0}" == 1 ]] && echo true || echo false)"
  -cp "$jar" io.regmem.bench.MulticastFanout)
run() { # $1 transport, $2 subscribers, $3 1 to stop subscriber 1 while the publisher runs
  local dir
  dir=$(mktemp -d)
  local pids=()
  local driver=""
  local aeron=()
  local shm
  shm=$(mktemp -d -p /dev/shm) # (agrona-broadcast's buffer)
  local pub_cpu=() sub_cpu=()
  if [[ "${PIN:-0}" == 1 ]]; then pub_cpu=(taskset -c 0); sub_cpu=(taskset -c 1); fi
  if [[ "$1" == aeron-* ]]; then
    aeron=(-Daeron.dir="$dir/aeron")
    mkfifo "$dir/driver-in"
    "${pub_cpu[@]}" "${jvm[0]}" -Dfanout.driverIdle="${AERON_DRIVER_IDLE:-yield}" "${jvm[@]:1}" driver "$dir/aeron" < "$dir/driver-in" > "$dir/driver" 2>&1 &
    driver=$!
    exec 9> "$dir/driver-in"
    for ((w = 0; w < 100; w++)); do grep -q READY "$dir/driver" 2>/dev/null && break; sleep 0.1; done
  fi
  for ((s = 1; s <= $2; s++)); do
    "${sub_cpu[@]}" "${jvm[0]}" "${aeron[@]}" -Dfanout.dir="$shm" "${jvm[@]:1}" sub "$1" "$group" "$count" > "$dir/sub$s" 2>&1 &
    pids+=($!)
  done
  for ((s = 1; s <= $2; s++)); do
    for ((w = 0; w < 100; w++)); do grep -q READY "$dir/sub$s" 2>/dev/null && break; sleep 0.1; done
  done
  sleep 1
  if [[ "${3:-0}" == 1 ]]; then kill -STOP "${pids[0]}"; fi
  "${pub_cpu[@]}" "${jvm[0]}" "${aeron[@]}" -Dfanout.dir="$shm" "${jvm[@]:1}" pub "$1" "$group" "$count" "$rate" 2>&1 | grep -E 'SENT|Exception' || true
  if [[ "${3:-0}" == 1 ]]; then kill -CONT "${pids[0]}"; fi
  for p in "${pids[@]}"; do wait "$p" || true; done
  if [[ -n "$driver" ]]; then
    exec 9>&-
    wait "$driver" || true
  fi
  for ((s = 1; s <= $2; s++)); do
    grep -hE 'RESULT|DROPPED|Exception' "$dir/sub$s" | sed "s/^/  subscriber $s: /" || true
  done
  rm -rf "$dir" "$shm"
}
for ((i = 1; i <= rounds; i++)); do
  for n in ${SUBSCRIBERS:-1 3}; do
    for t in $transports; do
      echo "== round $i of $rounds: $t, $n subscriber process(es), $count messages of 64 B at $rate/s"
      run "$t" "$n"
      if [[ "$stopped" == 1 && "$n" == 3 ]]; then
        echo "== round $i of $rounds: $t, 3 subscriber process(es), subscriber 1 stopped while the publisher runs"
        run "$t" 3 1
      fi
    done
  done
done
