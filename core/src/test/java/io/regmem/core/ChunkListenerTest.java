package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(NoLeaks.class)
class ChunkListenerTest {

    /** Records events and can be told to refuse. */
    static final class Recorder implements ChunkListener {
        final List<String> events = new ArrayList<>();
        boolean refuse;

        @Override
        public void chunkAdded(Chunk chunk) {
            if (refuse) {
                throw new RdmaException(Errno.ENOMEM, "refused");
            }
            assertThat(chunk.segment()).isNotNull();
            assertThat(chunk.segment().address()).isEqualTo(chunk.address());
            events.add("+" + chunk.size());
        }

        @Override
        public void chunkRemoved(Chunk chunk) {
            events.add("-" + chunk.size());
        }
    }

    @Test
    void listenersHearOfPresentFutureAndDedicatedChunks() {
        BufferPool pool = BufferPool.builder().chunkSize(1 << 20).build();
        PooledBuffer first = pool.allocate(64);
        Recorder r = new Recorder();
        pool.addChunkListener(r);
        assertThat(r.events).containsExactly("+1048576");
        PooledBuffer big = pool.allocate(2L << 20);
        assertThat(r.events).containsExactly("+1048576", "+2097152");
        big.close();
        assertThat(r.events).containsExactly("+1048576", "+2097152", "-2097152");
        first.close();
        closeClean(pool);
        assertThat(r.events).containsExactly("+1048576", "+2097152", "-2097152", "-1048576");
    }

    @Test
    void aRefusingListenerFailsTheAllocationAndNothingIsKept() {
        BufferPool pool = BufferPool.builder().chunkSize(1 << 20).build();
        Recorder ok = new Recorder();
        Recorder refusing = new Recorder();
        pool.addChunkListener(ok);
        pool.addChunkListener(refusing);
        refusing.refuse = true;
        assertThatThrownBy(() -> pool.allocate(64)).isInstanceOf(RdmaException.class).hasMessageContaining("refused");
        assertThatThrownBy(() -> pool.allocate(3L << 20)).isInstanceOf(RdmaException.class).hasMessageContaining("refused");
        assertThat(ok.events).as("told, then untold").containsExactly("+1048576", "-1048576", "+3145728", "-3145728");
        assertThat(pool.stats().reservedBytes()).isZero();
        assertThat(pool.chunks()).isEmpty();
        refusing.refuse = false;
        pool.allocate(64).close();
        assertThat(pool.chunks()).hasSize(1);
        closeClean(pool);
    }

    @Test
    void aListenerThatRefusesAnExistingChunkIsNotAdded() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer a = pool.allocate(64);
        Recorder refusing = new Recorder();
        refusing.refuse = true;
        assertThatThrownBy(() -> pool.addChunkListener(refusing)).isInstanceOf(RdmaException.class);
        refusing.refuse = false;
        pool.allocate(2L << 20).close();
        assertThat(refusing.events).as("never added").isEmpty();
        a.close();
        closeClean(pool);
        assertThatThrownBy(() -> pool.addChunkListener(new Recorder())).isInstanceOf(RdmaException.class)
                .hasMessageContaining("closed");
    }

    /** Counts what goes back to mmap. */
    static final class CountingSource implements ChunkSource {
        final java.util.concurrent.atomic.AtomicInteger released = new java.util.concurrent.atomic.AtomicInteger();

        @Override
        public Chunk allocate(long size, long alignment) {
            Chunk c = ChunkSource.mmap().allocate(size, alignment);
            return new Chunk(this, c.address(), c.size(), c);
        }

        @Override
        public void release(Chunk chunk) {
            released.incrementAndGet();
            ChunkSource.mmap().release((Chunk) chunk.sourceToken());
        }

        @Override
        public long pageSize() {
            return ChunkSource.mmap().pageSize();
        }

        @Override
        public String name() {
            return "counting";
        }
    }

    @Test
    void aListenerHoldingTheReleaseKeepsTheMemoryUntilItLetsGo() {
        CountingSource source = new CountingSource();
        BufferPool pool = BufferPool.builder().chunkSource(source).chunkSize(1 << 20).build();
        List<Runnable> holds = new ArrayList<>();
        pool.addChunkListener(new ChunkListener() {
            @Override
            public void chunkAdded(Chunk chunk) {
                assertThat(chunk.holdRelease()).as("no release under way at birth").isNull();
            }

            @Override
            public void chunkRemoved(Chunk chunk) {
                holds.add(chunk.holdRelease());
            }
        });
        PooledBuffer big = pool.allocate(2L << 20);
        Chunk chunk = big.chunk();
        big.close();
        assertThat(holds).hasSize(1).doesNotContainNull();
        assertThat(source.released.get()).as("held: not back yet").isZero();
        assertThat(chunk.releasePending()).isTrue();
        assertThat(pool.stats().reservedBytes()).as("the budget still counts it").isEqualTo(2L << 20);
        holds.get(0).run();
        assertThat(source.released.get()).isEqualTo(1);
        assertThat(chunk.releasePending()).isFalse();
        holds.get(0).run(); // again: nothing
        assertThat(source.released.get()).isEqualTo(1);
        assertThat(pool.stats().reservedBytes()).isZero();
        pool.allocate(64).close();
        closeClean(pool);
        assertThat(source.released.get()).isEqualTo(1);
        holds.get(1).run();
        assertThat(source.released.get()).isEqualTo(2);
    }
}
