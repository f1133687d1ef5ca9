package io.regmem.registration.uring;

import static io.regmem.registration.testkit.PatternFiles.patternAt;
import static io.regmem.registration.testkit.PatternFiles.patternFile;
import static io.regmem.registration.uring.UringFixture.ring;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * A pool shared by several threads while its ring's owner does I/O: other threads make and free
 * dedicated chunks (registered and retired through the owner), the owner reads into buffers of
 * chunks born anywhere and checks every block. Ends with every slot given back and nothing leaked.
 */
@ExtendWith(NoLeaks.class)
class IoRegistrationStressTest {
    @TempDir
    Path dir;

    @Test
    void chunksComeAndGoOnOtherThreadsWhileTheOwnerReads() throws Exception {
        Path file = patternFile(dir.resolve("stress"), 4L << 20);
        int rounds = Integer.getInteger("regmem.uring.stress.rounds", 3000);
        try (IoRing ring = ring(64);
             BufferPool pool = BufferPool.builder().name("shared").pageAligned().chunkSize(1 << 20).largestClass(64 << 10)
                     .build()) {
            IoRegistration reg = ring.register(pool);
            IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.DIRECT);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            // handed from the other threads to the owner: buffers of dedicated chunks born there
            java.util.concurrent.ConcurrentLinkedQueue<PooledBuffer> handed = new java.util.concurrent.ConcurrentLinkedQueue<>();
            List<Thread> others = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                int seed = t;
                others.add(Thread.ofPlatform().name("churn-" + t).start(() -> {
                    SplittableRandom rnd = new SplittableRandom(seed);
                    try {
                        while (!stop.get()) {
                            PooledBuffer big = pool.allocate((1 + rnd.nextInt(3)) << 20); // a chunk of its own
                            if (rnd.nextInt(4) == 0 && handed.size() < 16) {
                                handed.add(big); // the owner reads into it, then frees it
                            } else {
                                big.close(); // retired by the owner later
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            PooledBuffer[] inFlight = new PooledBuffer[64];
            long[] at = new long[64];
            int[] done = {0};
            SplittableRandom rnd = new SplittableRandom(99);
            IoCompletionHandler check = (slot, res) -> {
                int s = (int) slot;
                assertThat(res).as("read %d", s).isEqualTo(4096);
                for (int k = 0; k < 4096; k += 1021) {
                    assertThat(inFlight[s].segment().get(ValueLayout.JAVA_BYTE, k)).isEqualTo(patternAt(at[s] + k));
                }
                inFlight[s].close();
                inFlight[s] = null;
                done[0]++;
            };
            int issued = 0;
            while (done[0] < rounds) {
                for (int s = 0; s < 64 && issued < rounds; s++) {
                    if (inFlight[s] == null) {
                        PooledBuffer b = handed.poll();
                        inFlight[s] = b != null ? b : pool.allocate(4096);
                        at[s] = (long) rnd.nextInt(1024) * 4096;
                        ring.readFixed(f, inFlight[s], 0, 4096, at[s], s);
                        issued++;
                    }
                }
                ring.await(1, check);
            }
            stop.set(true);
            for (Thread t : others) {
                t.join();
            }
            assertThat(failure.get()).isNull();
            for (PooledBuffer b; (b = handed.poll()) != null; ) {
                b.close();
            }
            ring.poll(check); // the owner retires what the others freed
            assertThat(ring.fixedBuffersInUse()).as("slots: the pool's chunks only").isEqualTo(pool.chunks().size());
            assertThat(reg.chunks()).isEqualTo(pool.chunks().size());
            f.close();
        }
    }
}
