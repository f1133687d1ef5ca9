package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Chunks registered at birth by their source: keys without lookups, deregistered before the memory goes. */
@ExtendWith(NoLeaks.class)
class RegisteredChunkSourceTest {
    private final Loopback lb = new Loopback();

    @AfterEach
    void tearDown() {
        assertThat(BufferPool.openPools()).isEmpty();
        lb.close();
    }

    @Test
    void buffersOfARegisteredSourceAreReachableByTheirChunksKeys() {
        RegisteredChunkSource source = new RegisteredChunkSource(lb.pdB, ChunkSource.mmap(), Access.LOCAL_WRITE,
                Access.REMOTE_WRITE);
        BufferPool pool = BufferPool.builder().chunkSource(source).build();
        PooledBuffer target = pool.allocate(128);
        PooledBuffer big = pool.allocate(3L << 20);
        MemoryRegion region = RegisteredChunkSource.region(target.chunk());
        assertThat(region.address()).isEqualTo(target.chunk().address());
        assertThat(RegisteredChunkSource.region(big.chunk())).isNotSameAs(region);

        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 99);
        WorkRequest wr = new WorkRequest(1).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 8, local.lkey())
                .remote(target.address(), lb.key(region));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(target.segment().get(ValueLayout.JAVA_LONG, 0)).isEqualTo(99);

        int bigKey = RegisteredChunkSource.region(big.chunk()).rkey();
        big.close();
        assertThat(lb.devB.keys.lookup(bigKey, true)).as("deregistered before unmapped").isNull();
        target.close();
        pool.close();
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.devB.resources().survivors(MemoryRegion.class)).isEmpty();
    }

    @Test
    void badRightsAndForeignChunksAreRefused() {
        assertRdma(() -> new RegisteredChunkSource(lb.pdB, ChunkSource.mmap(), Access.REMOTE_WRITE), Errno.EINVAL,
                "need LOCAL_WRITE");
        try (BufferPool plain = BufferPool.builder().build()) {
            PooledBuffer b = plain.allocate(64);
            assertRdma(() -> RegisteredChunkSource.region(b.chunk()), Errno.EINVAL, "not made by a RegisteredChunkSource");
            b.close();
        }
    }
}
