#!/usr/bin/env bash
# gRPC-Java unary calls between two processes of this host (GrpcUnaryEcho: grpc-netty 1.85, a method
# of raw bytes that answers its request), on the regmem Netty transport (shm by default) beside Netty's
# epoll transport over TCP on 127.0.0.1, interleaved round by round: for each message size and number
# of calls in flight, each transport in turn runs a server process and a client process for SECONDS
# after a warm-up (WARMUP seconds, environment; default 15). SERVER_PREFIX, CLIENT_PREFIX, HOST: as
# bench/two-process.sh. Transport "local" (Netty's in-JVM transport): the client process serves its own
# calls, gRPC's own cost and the others' floor. Threads that spin: the regmem event loops poll for 50 us after their last
# work (250 us while a chunk is under way) before they sleep; epoll's sleep in the kernel between calls.
# Usage: bench/grpc-unary.sh [ROUNDS] [SECONDS] [TRANSPORTS] [SIZES] [INFLIGHT]   (output on stdout)
set -euo pipefail
exec bash "$(dirname "$0")/two-process.sh" GrpcUnaryEcho "gRPC unary, " "${1:-3}" "${2:-5}" "${3:-regmem-shm epoll}" \
  "${4:-64 65536}" "${5:-1 64}"
