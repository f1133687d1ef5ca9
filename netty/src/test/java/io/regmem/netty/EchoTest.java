package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.netty.buffer.ByteBuf;
import io.netty.util.ResourceLeakDetector;
import io.regmem.core.BufferPool;
import io.regmem.core.LeakReport;
import io.regmem.registration.testkit.NoLeaks;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A real Netty server and clients on the regmem allocator, NIO and epoll: concurrent connections
 * exchange byte-checked messages of 1 B to 1 MiB while Netty's leak detector runs at PARANOID, which
 * must report nothing; at the end every pool buffer is back.
 */
@ExtendWith(NoLeaks.class)
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class EchoTest {
    private static final int CONNECTIONS = 4;
    private static final int[] SIZES = {1, 2, 7, 64, 100, 1500, 4096, 8191, 65_536, 65_537, 300_000, 1 << 20};

    private final BufferPool pool = BufferPool.builder().name("netty-echo").build();
    private final RegmemByteBufAllocator alloc = new RegmemByteBufAllocator(pool);
    private ResourceLeakDetector.Level level;
    private LeakRecorder leaks;

    @BeforeEach
    void paranoid() {
        level = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        leaks = LeakRecorder.install();
    }

    @AfterEach
    void restore() {
        leaks.uninstall();
        ResourceLeakDetector.setLevel(level);
        pool.close();
    }

    @ParameterizedTest
    @EnumSource(EchoFixture.Transport.class)
    void messagesOfOneByteToOneMebibyteComeBackExactUnderLoad(EchoFixture.Transport transport) throws Exception {
        assumeTrue(transport.available() || System.getenv("CI") != null, "epoll's native library is not available");
        List<Future<Integer>> results = new ArrayList<>();
        ExecutorService senders = Executors.newFixedThreadPool(CONNECTIONS);
        try (EchoFixture echo = new EchoFixture(transport, alloc, buf -> {
            if (alloc.pooledBuffer(buf).pool() != pool) {
                throw new AssertionError("the server read into a buffer of another pool");
            }
        })) {
            for (int c = 0; c < CONNECTIONS; c++) {
                EchoFixture.Client client = echo.connect();
                long seed = 31L * c + transport.ordinal();
                results.add(senders.submit(() -> {
                    SplittableRandom random = new SplittableRandom(seed);
                    int sent = 0;
                    for (int round = 0; round < 3; round++) {
                        for (int size : SIZES) {
                            byte[] message = new byte[size];
                            random.nextBytes(message);
                            client.exchange(message);
                            sent++;
                        }
                        for (int i = 0; i < 40; i++) { // small messages, the common case
                            byte[] message = new byte[1 + random.nextInt(2048)];
                            random.nextBytes(message);
                            client.exchange(message);
                            sent++;
                        }
                    }
                    client.close();
                    return sent;
                }));
            }
            int total = 0;
            for (Future<Integer> f : results) {
                total += f.get(4, TimeUnit.MINUTES);
            }
            assertThat(total).isEqualTo(CONNECTIONS * 3 * (SIZES.length + 40));
            assertThat(echo.failure.get()).as("what went wrong on an event loop").isNull();
        } finally {
            senders.shutdownNow();
        }
        assertThat(alloc.metric().usedDirectMemory()).as("bytes still held by ByteBufs").isZero();
        assertThat(pool.stats().liveBuffers()).isZero();
        leaks.drive(alloc);
        assertThat(leaks.reports()).as("Netty's leak detector at PARANOID").isEmpty();
        LeakReport report = pool.closeAndReport();
        assertThat(report.clean()).as(report.describe()).isTrue();
    }

    @org.junit.jupiter.api.Test
    void theLeakDetectorSeesABufferNobodyReleased() throws Exception {
        ByteBuf lost = alloc.directBuffer(64).writeLong(1);
        lost = null; // dropped without release()
        assertThat(lost).isNull();
        leaks.drive(alloc);
        assertThat(leaks.reports()).as("the check above can fail").isNotEmpty();
        assertThat(leaks.reports().getFirst()).contains("LEAK");
        LeakReport report = pool.closeAndReport();
        assertThat(report.clean()).as("the pool reports the buffer too").isFalse();
    }
}
