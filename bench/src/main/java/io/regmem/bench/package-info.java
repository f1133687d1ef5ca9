/**
 * The {@code regmem} command line ({@link io.regmem.bench.RegmemCommand}: {@code demo}, {@code serve},
 * {@code bench}), its demos, and the JMH benchmarks, each run beside its peer (Netty's allocators, the
 * JDK's arenas, JCTools and Agrona queues, Aeron, native {@code ucx_perftest} and fio): see
 * BENCHMARKS.md.
 */
package io.regmem.bench;
