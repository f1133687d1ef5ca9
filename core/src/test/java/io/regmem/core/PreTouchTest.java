package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link BufferPoolBuilder#preTouch}: a chunk's pages are resident before its first buffer is handed
 * out (counted with {@code mincore}), and without it they are not; the content of the memory is the
 * source's (zeros), for size classes' chunks and large buffers' alike.
 */
@ExtendWith(NoLeaks.class)
class PreTouchTest {
    private static final MethodHandle MINCORE = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("mincore").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS));

    /** Pages of [address, address + length) resident now. */
    private static long residentPages(long address, long length) throws Throwable {
        long pages = length / Native.PAGE_SIZE;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment vec = arena.allocate(pages);
            int rc = (int) MINCORE.invokeExact(address, length, vec);
            assertThat(rc).as("mincore").isZero();
            long n = 0;
            for (long i = 0; i < pages; i++) {
                n += vec.get(ValueLayout.JAVA_BYTE, i) & 1;
            }
            return n;
        }
    }

    @Test
    void aTouchedChunkIsResidentBeforeItsFirstBufferAndAnUntouchedOneIsNot() throws Throwable {
        long chunk = 32L << 20;
        long pages = chunk / Native.PAGE_SIZE;
        for (boolean touch : new boolean[] {true, false}) {
            BufferPool pool = BufferPool.builder().name("touch-" + touch).chunkSize(chunk).preTouch(touch).build();
            PooledBuffer b = pool.allocate(64);
            Chunk c = b.chunk();
            long resident = residentPages(c.address(), c.size());
            if (touch) {
                assertThat(resident).as("every page of the touched chunk").isEqualTo(pages);
            } else {
                assertThat(resident).as("an untouched chunk: only what was used").isLessThan(pages / 2);
            }
            assertThat(c.segment().asSlice(0, 1 << 20).mismatch(MemorySegment.ofArray(new byte[1 << 20])))
                    .as("the memory is still zeros").isEqualTo(-1);
            b.close();
            closeClean(pool);
        }
    }

    @Test
    void aLargeBuffersChunkIsTouchedToo() throws Throwable {
        BufferPool pool = BufferPool.builder().name("touch-large").preTouch(true).build();
        PooledBuffer big = pool.allocate(8L << 20); // above the largest class: a chunk of its own
        long pages = big.chunk().size() / Native.PAGE_SIZE;
        assertThat(residentPages(big.chunk().address(), big.chunk().size())).isEqualTo(pages);
        big.close();
        closeClean(pool);
    }
}
