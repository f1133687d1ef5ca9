package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The FFM bindings against the installed UCX, below the provider: two contexts and workers in this
 * JVM (as two devices would be), Java memory registered with {@code ucp_mem_map}, the packed key
 * unpacked at the other end, puts and gets byte-exact (remote completion by an endpoint flush),
 * memory UCX allocates, and teardown in order.
 *
 * <p>Not tested here, on purpose: {@code ucp_ep_rkey_unpack} of bytes that are not a packed key
 * crashes the process (UCX trusts them); the provider never passes it bytes that fail its own
 * envelope check.
 */
@ExtendWith(NoLeaks.class)
class UcpBindingTest {

    /** Progresses both workers until the request is done; its final status. */
    private static int await(UcpWorker mine, UcpWorker peer, long request) {
        int status;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while ((status = mine.poll(request)) == UcpLayout.UCS_INPROGRESS) {
            mine.progress();
            peer.progress();
            assertThat(System.nanoTime()).as("request done within 10 s").isLessThan(deadline);
        }
        return status;
    }

    @Test
    void theLibraryIsAtLeastTheApiItWasWrittenFor() {
        Ucp ucp = UcxAvailable.require();
        assertThat(ucp.major * 1000 + ucp.minor).isGreaterThanOrEqualTo(Ucp.MIN_MAJOR * 1000 + Ucp.MIN_MINOR);
        assertThat(ucp.describe(UcpLayout.UCS_ERR_INVALID_PARAM)).contains("Invalid parameter").contains("(-5)");
        assertThat(Ucp.isError(-5)).isTrue();
        assertThat(Ucp.isError(-100)).isTrue();
        assertThat(Ucp.isError(-101)).as("a pointer near the top").isFalse();
        assertThat(Ucp.isError(0x7f00_0000_1000L)).isFalse();
        assertThat(Ucp.isError(0)).as("UCS_OK").isFalse();
    }

    @Test
    void putAndGetBetweenTwoWorkersAreByteExact() {
        Ucp ucp = UcxAvailable.require();
        int size = 256 * 1024 + 13;
        try (Arena arena = Arena.ofShared();
             UcpContext ctxA = new UcpContext(ucp, "regmem-test-a");
             UcpContext ctxB = new UcpContext(ucp, "regmem-test-b");
             UcpWorker a = new UcpWorker(ctxA);
             UcpWorker b = new UcpWorker(ctxB)) {
            MemorySegment src = arena.allocate(size, 4096);
            MemorySegment dst = arena.allocate(size, 4096);
            MemorySegment back = arena.allocate(size, 4096);
            SplittableRandom rnd = new SplittableRandom(14);
            for (long i = 0; i < size; i++) {
                src.set(ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt());
            }
            MemorySegment memhB = ctxB.map(dst.address(), size, UcpLayout.MEM_MAP_PROT_LOCAL_READ | UcpLayout.MEM_MAP_PROT_LOCAL_WRITE | UcpLayout.MEM_MAP_PROT_REMOTE_WRITE);
            byte[] packed = ctxB.packRemoteKey(memhB);
            assertThat(packed).isNotEmpty();
            MemorySegment ab = a.connect(b.address(), true);
            MemorySegment ba = b.connect(a.address(), true);
            MemorySegment rkey = a.unpack(ab, packed);
            try {
                assertThat(await(a, b, ucp.put(ab.address(), src.address(), size, dst.address(), rkey.address(), a.noParams.address()))).isEqualTo(UcpLayout.UCS_OK);
                assertThat(await(a, b, ucp.flush(ab.address(), a.noParams.address()))).as("remote completion").isEqualTo(UcpLayout.UCS_OK);
                assertThat(dst.mismatch(src)).as("first differing byte after the put").isEqualTo(-1);

                assertThat(await(a, b, ucp.get(ab.address(), back.address(), size - 7, dst.address() + 7, rkey.address(), a.noParams.address())))
                        .isEqualTo(UcpLayout.UCS_OK);
                assertThat(back.asSlice(0, size - 7).mismatch(src.asSlice(7))).as("the get at an offset").isEqualTo(-1);
            } finally {
                ucp.rkeyDestroy(rkey);
                closeBoth(a, b, ab, ba);
                ctxB.unmap(memhB);
            }
        }
    }

    @Test
    void memoryUcxAllocatesIsWhereItSaysAndCarriesPuts() {
        Ucp ucp = UcxAvailable.require();
        try (Arena arena = Arena.ofConfined();
             UcpContext ctxA = new UcpContext(ucp, "regmem-test-a");
             UcpContext ctxB = new UcpContext(ucp, "regmem-test-b");
             UcpWorker a = new UcpWorker(ctxA);
             UcpWorker b = new UcpWorker(ctxB)) {
            MemorySegment memh = ctxB.allocate(1 << 20);
            long[] range = ctxB.mappedRange(memh);
            assertThat(range[0]).isNotZero();
            assertThat(range[1]).isGreaterThanOrEqualTo(1 << 20);
            MemorySegment target = MemorySegment.ofAddress(range[0]).reinterpret(1 << 20);
            MemorySegment src = arena.allocate(4096);
            src.fill((byte) 0x5A);
            MemorySegment ab = a.connect(b.address(), true);
            MemorySegment ba = b.connect(a.address(), true);
            MemorySegment rkey = a.unpack(ab, ctxB.packRemoteKey(memh));
            try {
                assertThat(await(a, b, ucp.put(ab.address(), src.address(), 4096, range[0] + 8192, rkey.address(), a.noParams.address()))).isEqualTo(UcpLayout.UCS_OK);
                assertThat(await(a, b, ucp.flush(ab.address(), a.noParams.address()))).isEqualTo(UcpLayout.UCS_OK);
                assertThat(target.asSlice(8192, 4096).mismatch(src)).isEqualTo(-1);
            } finally {
                ucp.rkeyDestroy(rkey);
                closeBoth(a, b, ab, ba);
                ctxB.unmap(memh);
            }
        }
    }

    /** Closes both endpoints, progressing both workers so that each close completes. */
    private static void closeBoth(UcpWorker a, UcpWorker b, MemorySegment ab, MemorySegment ba) {
        long ra = a.startClose(ab, true);
        long rb = b.startClose(ba, true);
        assertThat(await(a, b, ra)).as("closing A's endpoint").isIn(UcpLayout.UCS_OK, UcpLayout.UCS_ERR_CANCELED,
                UcpLayout.UCS_ERR_CONNECTION_RESET);
        assertThat(await(b, a, rb)).as("closing B's endpoint").isIn(UcpLayout.UCS_OK, UcpLayout.UCS_ERR_CANCELED,
                UcpLayout.UCS_ERR_CONNECTION_RESET);
    }
}
