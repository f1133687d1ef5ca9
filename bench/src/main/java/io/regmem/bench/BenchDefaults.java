package io.regmem.bench;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The settings every regmem benchmark shares (JMH's class annotations are inherited): average
 * time in nanoseconds, 3 warm-up and 5 measured iterations of 1 s, one fork with native access and
 * a fixed 1 GiB heap. Benchmarks that run Netty beside regmem override {@link Fork} to add the flags
 * Netty's fastest configuration needs.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g",
        "--sun-misc-unsafe-memory-access=allow"})
public abstract class BenchDefaults {
}
