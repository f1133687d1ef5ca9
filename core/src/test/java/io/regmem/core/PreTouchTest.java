package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link BufferPoolBuilder#preTouch}: a chunk's pages are resident before its first buffer is handed
 * out (counted with {@code mincore}), and without it they are not; the content of the memory is the
 * source's (zeros), for size classes' chunks and large buffers' alike.
 */
@ExtendWith(NoLeaks.class)
class PreTouchTest {
    @Test
    void aTouchedChunkIsResidentBeforeItsFirstBufferAndAnUntouchedOneIsNot() throws Throwable {
        long chunk = 32L << 20;
        long pages = chunk / Native.PAGE_SIZE;
        for (boolean touch : new boolean[] {true, false}) {
            BufferPool pool = BufferPool.builder().name("touch-" + touch).chunkSize(chunk).preTouch(touch).build();
            PooledBuffer b = pool.allocate(64);
            Chunk c = b.chunk();
            long resident = Resident.pages(c.address(), c.size());
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
        assertThat(Resident.pages(big.chunk().address(), big.chunk().size())).isEqualTo(pages);
        big.close();
        closeClean(pool);
    }
}
