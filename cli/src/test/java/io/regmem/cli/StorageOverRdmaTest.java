package io.regmem.cli;

import static io.regmem.registration.testkit.PatternFiles.patternAt;
import static io.regmem.registration.testkit.PatternFiles.patternFile;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.uring.IoCompletionHandler;
import io.regmem.registration.uring.IoFile;
import io.regmem.registration.uring.IoRegistration;
import io.regmem.registration.uring.IoRing;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * regmem-uring and regmem-registration over one pool, as the storage demo uses them: a block read
 * from a file into a pool buffer by io_uring (its fixed-buffer registration) is sent by RDMA WRITE
 * from the same memory (its RDMA registration). Here because this module depends on both; the
 * io_uring module depends on core only.
 */
@ExtendWith(NoLeaks.class)
class StorageOverRdmaTest {
    private static final int BLOCK = 128 << 10;

    @TempDir
    Path dir;

    private final Map<Long, Integer> results = new HashMap<>();
    private final IoCompletionHandler record = (ud, res) -> results.put(ud, res);

    private static BufferPool pool(String name, ChunkSource source) {
        return BufferPool.builder().name(name).chunkSource(source).pageAligned().chunkSize(4 << 20).largestClass(BLOCK)
                .threadCacheBytes(0).build();
    }

    /** A ring; aborts the test where io_uring is unavailable (fails under CI). */
    private static IoRing ring(int entries) {
        try {
            return IoRing.open(entries);
        } catch (RdmaException e) {
            if ((e.errno() == Errno.ENOSYS || e.errno() == Errno.EPERM) && !"true".equals(System.getenv("CI"))) {
                Assumptions.abort(e.getMessage());
            }
            throw e;
        }
    }

    @Test
    void thePoolRegisteredWithAPdAndARingSendsAFileBlockByRdmaFromTheSameMemory() throws Exception {
        Path file = patternFile(dir.resolve("both"), 1 << 20);
        try (Arena arena = Arena.ofShared();
             RdmaDevice dev = RdmaDevice.open("soft");
             IoRing ring = ring(8);
             BufferPool pool = pool("both", ChunkSource.mmap())) {
            MemorySegment remote = arena.allocate(BLOCK, 4096);
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(16);
            MemoryRegion target = pd.register(remote, Access.LOCAL_WRITE,
                    Access.REMOTE_WRITE);
            PoolRegistration rdma = pd.register(pool, Access.LOCAL_WRITE);
            IoRegistration fixed = ring.register(pool);
            CmId listener = dev.createCmId();
            listener.listen("both");
            CmId active = dev.createCmId();
            QueuePair qp = active.createQp(pd, QpInitAttributes.of(cq));
            active.connect("both");
            CmId passive = listener.getRequest();
            passive.createQp(pd, QpInitAttributes.of(cq));
            passive.accept();

            IoFile f = ring.openFile(file, IoFile.Mode.READ, IoFile.Mode.DIRECT);
            PooledBuffer block = pool.allocate(BLOCK);
            assertThat(block.chunk().attachment()).as("the RDMA registration").isSameAs(rdma.region(block));
            assertThat(fixed.bufferIndex(block.chunk())).as("the ring's").isGreaterThanOrEqualTo(0);
            ring.readFixed(f, block, 0, BLOCK, 3L * BLOCK, 1);
            ring.await(1, record);
            assertThat(results).containsEntry(1L, BLOCK);
            int rkey = qp.importRemoteKey(target.exportRemoteKey());
            WorkRequest wr = new WorkRequest(1).wrId(2)
                    .opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(block.address(), BLOCK, rdma.lkey(block)).remote(remote.address(), rkey);
            qp.postSend(wr);
            WorkCompletion[] wcs = {new WorkCompletion()};
            while (cq.poll(wcs) == 0) {
                Thread.onSpinWait();
            }
            assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            for (int k = 0; k < BLOCK; k += 509) {
                assertThat(remote.get(ValueLayout.JAVA_BYTE, k)).isEqualTo(patternAt(3L * BLOCK + k));
            }
            block.close();
            f.close();
            active.disconnect();
            active.destroyQp();
            passive.destroyQp();
            active.close();
            passive.close();
            listener.close();
            fixed.close();
            rdma.close();
            target.close();
            cq.close();
            pd.close();
        }
    }
}
