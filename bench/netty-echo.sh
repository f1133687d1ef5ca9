#!/usr/bin/env bash
# A Netty echo between two processes of this host (NettyTransportEcho), on the regmem transport (shm
# by default) beside Netty's epoll and NIO transports over TCP on 127.0.0.1, interleaved round by
# round: for each message size and number in flight, each transport in turn runs a server process and
# a client process that keeps that many messages in flight for SECONDS after a warm-up (WARMUP
# seconds, environment; default 3). SERVER_PREFIX, CLIENT_PREFIX, HOST: as bench/two-process.sh.
# Threads that spin: the regmem event loops poll for 50 us after their last work (250 us while a chunk, a piece larger
# than the peer's receive, is under way) before they sleep
# (so they spin through a ping-pong); epoll's and NIO's sleep in the kernel between messages.
# Usage: bench/netty-echo.sh [ROUNDS] [SECONDS] [TRANSPORTS] [SIZES] [INFLIGHT]   (output on stdout)
set -euo pipefail
exec bash "$(dirname "$0")/two-process.sh" NettyTransportEcho "" "${1:-3}" "${2:-5}" "${3:-regmem-shm epoll nio}" \
  "${4:-64 4096 65536 1048576}" "${5:-1 16}"
