/**
 * The JMH benchmarks, each run beside its peer (Netty's allocators, the JDK's arenas, JCTools and
 * Agrona queues, Aeron, native {@code ucx_perftest} and fio; see BENCHMARKS.md), and the
 * {@code regmem bench} subcommand ({@link io.regmem.bench.BenchCommand}) that runs them and prints
 * ratios.
 */
package io.regmem.bench;
