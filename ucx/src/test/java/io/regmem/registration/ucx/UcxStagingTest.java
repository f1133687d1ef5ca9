package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The bounce-buffer pool: sizes, reuse, and no buffer handed to two holders at once. */
@org.junit.jupiter.api.extension.ExtendWith(NoLeaks.class)
class UcxStagingTest {
    @Test
    void buffersComeInPowersOfTwoAndAreReusedLastInFirstOut() {
        try (Arena arena = Arena.ofShared()) {
            UcxStaging s = new UcxStaging(arena);
            MemorySegment a = s.take(1);
            assertThat(a.byteSize()).isEqualTo(4096);
            MemorySegment b = s.take(65537);
            assertThat(b.byteSize()).isEqualTo(131072);
            assertThat(s.take(131072).byteSize()).isEqualTo(131072);
            s.give(b);
            assertThat(s.freeBytes()).isEqualTo(131072);
            assertThat(s.take(100_000)).isSameAs(b); // the same size class: reused
            assertThat(s.take(100_000)).isNotSameAs(b);
            s.give(a);
            assertThat(s.take(4096)).isSameAs(a);
            assertThat(s.freeBytes()).isZero();
        }
    }

    /** Threads take and give at random; each marks the buffer it holds and checks nobody else wrote it. */
    @Test
    void noBufferIsHeldTwiceAtOnce() throws Exception {
        try (Arena arena = Arena.ofShared()) {
            UcxStaging s = new UcxStaging(arena);
            int threads = 4;
            CountDownLatch start = new CountDownLatch(1);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long mark = t + 1;
                ts.add(Thread.ofPlatform().start(() -> {
                    SplittableRandom r = new SplittableRandom(mark);
                    try {
                        start.await();
                        for (int i = 0; i < 20_000; i++) {
                            MemorySegment b = s.take(1 + r.nextInt(3 * 4096));
                            b.set(java.lang.foreign.ValueLayout.JAVA_LONG, 0, mark);
                            Thread.onSpinWait();
                            assertThat(b.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0)).isEqualTo(mark);
                            s.give(b);
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            start.countDown();
            for (Thread t : ts) {
                t.join();
            }
            assertThat(failure.get()).isNull();
            // everything came back: at most one buffer per thread and size class was ever needed
            assertThat(s.freeBytes()).isLessThanOrEqualTo((long) threads * (4096 + 8192 + 16384));
        }
    }
}
