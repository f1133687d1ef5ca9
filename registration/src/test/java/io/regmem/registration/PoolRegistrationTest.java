package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** A registered BufferPool: each chunk registered once at birth, keys without lookups, deregistered before unmapping. */
@ExtendWith(NoLeaks.class)
class PoolRegistrationTest {
    private final Loopback lb = new Loopback();

    @AfterEach
    void tearDown() {
        assertThat(BufferPool.openPools()).isEmpty();
        lb.close();
    }

    @Test
    void everyChunkIsRegisteredOnceAndBuffersKnowTheirKeys() {
        BufferPool pool = BufferPool.builder().chunkSize(1 << 20).largestClass(64 << 10).build();
        PooledBuffer early = pool.allocate(4096); // a chunk exists before registration
        PoolRegistration reg = lb.pdB.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        assertThat(reg.chunkCount()).isEqualTo(1);
        List<PooledBuffer> held = new ArrayList<>(List.of(early));
        for (int i = 0; i < 100; i++) {
            held.add(pool.allocate(64 + 997L * i % 60_000)); // grows the pool by several chunks
        }
        PooledBuffer large = pool.allocate(3L << 20);
        held.add(large);
        assertThat(reg.chunkCount()).isEqualTo(pool.chunks().size() + 1).isGreaterThan(2);
        for (PooledBuffer b : held) {
            MemoryRegion mr = reg.region(b);
            assertThat(mr.address()).isLessThanOrEqualTo(b.address());
            assertThat(mr.address() + mr.length()).isGreaterThanOrEqualTo(b.address() + b.capacity());
            assertThat(reg.lkey(b)).isEqualTo(mr.lkey());
            assertThat(lb.devB.keys.lookup(reg.rkey(b), true)).isSameAs(mr);
        }
        // one region per chunk: buffers of one chunk share it
        assertThat(reg.region(held.get(1))).isSameAs(reg.region(held.get(2)));

        int largeKey = reg.rkey(large);
        held.remove(large);
        large.close();
        assertThat(lb.devB.keys.lookup(largeKey, true)).as("deregistered before unmapping").isNull();
        assertThat(reg.chunkCount()).isEqualTo(pool.chunks().size());

        held.forEach(PooledBuffer::close);
        reg.close();
        assertThat(lb.devB.resources().survivors(MemoryRegion.class)).isEmpty();
        assertThat(lb.pdB.useCount()).as("just the loopback QP").isEqualTo(1);
        pool.close();
    }

    @Test
    void aPeerWritesIntoAPooledBufferByItsRkeyUntilThePoolCloses() {
        BufferPool pool = BufferPool.builder().build();
        PoolRegistration reg = lb.pdB.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        PooledBuffer target = pool.allocate(256);
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 0xABCDEFL);
        WorkRequest wr = new WorkRequest(1).opcode(Opcode.RDMA_WRITE)
                .addSge(lb.memA.address(), 8, local.lkey()).remote(target.address(), lb.qpA.importRemoteKey(reg.exportRemoteKey(target)));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(target.segment().get(ValueLayout.JAVA_LONG, 0)).isEqualTo(0xABCDEFL);

        // closing the pool deregisters its chunks first: the rkey stops working, nothing crashes
        assertThat(pool.closeAndReport().buffers()).isEqualTo(1);
        assertThat(reg.chunkCount()).isZero();
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        reg.close();
        assertThat(lb.devB.resources().survivors(MemoryRegion.class)).isEmpty();
        assertThat(lb.pdB.useCount()).as("just the loopback QP").isEqualTo(1);
    }

    @Test
    void aPoolRegistersWithOnePdAtATimeAndBadRightsChangeNothing() {
        BufferPool pool = BufferPool.builder().build();
        PooledBuffer b = pool.allocate(64);
        PoolRegistration reg = lb.pdB.register(pool, Access.LOCAL_WRITE);
        ProtectionDomain other = lb.devB.allocPd();
        assertRdma(() -> other.register(pool, Access.LOCAL_WRITE), Errno.EBUSY, "already registered");
        assertThat(other.useCount()).isZero();
        assertThat(reg.region(b).pd()).isSameAs(lb.pdB);
        assertRdma(() -> other.register(pool, Access.REMOTE_WRITE), Errno.EINVAL, "need LOCAL_WRITE");
        try (BufferPool foreign = BufferPool.builder().build()) {
            PooledBuffer f = foreign.allocate(64);
            assertRdma(() -> reg.region(f), Errno.EINVAL, "is not in registered pool");
            f.close();
        }
        reg.close();
        reg.close(); // idempotent
        assertRdma(() -> reg.lkey(b), Errno.EINVAL);
        // after close the pool may register elsewhere
        PoolRegistration again = other.register(pool, Access.LOCAL_WRITE);
        assertThat(again.region(b).pd()).isSameAs(other);
        again.close();
        b.close();
        pool.close();
        other.close();
    }

    @Test
    void aPoolWithoutChunksIsRefusedASecondRegistrationTooAndNothingChanges() {
        BufferPool pool = BufferPool.builder().chunkSize(1 << 20).build();
        assertThat(pool.chunks()).isEmpty();
        PoolRegistration reg = lb.pdB.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        ProtectionDomain other = lb.devB.allocPd();
        assertRdma(() -> other.register(pool, Access.LOCAL_WRITE), Errno.EBUSY, "already registered with a protection domain");
        assertRdma(() -> lb.pdB.register(pool, Access.LOCAL_WRITE), Errno.EBUSY, "one at a time");
        assertThat(other.useCount()).isZero();
        assertThat(lb.devB.resources().survivors(MemoryRegion.class)).isEmpty();
        // the pool works, and its chunks are the first registration's
        PooledBuffer b = pool.allocate(4096);
        PooledBuffer large = pool.allocate(2L << 20);
        assertThat(reg.region(b).pd()).isSameAs(lb.pdB);
        assertThat(reg.region(large).pd()).isSameAs(lb.pdB);
        assertThat(reg.chunkCount()).isEqualTo(2);
        assertThat(lb.devB.resources().survivors(MemoryRegion.class)).hasSize(2);
        large.close();
        reg.close();
        assertThat(lb.devB.resources().survivors(MemoryRegion.class)).isEmpty();
        PoolRegistration again = other.register(pool, Access.LOCAL_WRITE);
        assertThat(again.region(b).pd()).isSameAs(other);
        again.close();
        b.close();
        pool.close();
        other.close();
    }
}
