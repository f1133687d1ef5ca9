package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.BufferPool;
import io.regmem.core.Chunk;
import io.regmem.core.ChunkSource;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code device.chunkSource()} on UCX: chunks UCX allocates and registers itself; regions over them
 * share that registration; a registered pool of them works end to end; giving a chunk back while a
 * region still covers it keeps the memory until the region goes.
 */
@ExtendWith(NoLeaks.class)
class UcxChunkSourceTest {
    private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    private static byte[] packedPart(byte[] envelope) {
        return Arrays.copyOfRange(envelope, 40, envelope.length); // after the envelope's 40-byte header
    }

    @Test
    void regionsOverAChunkShareUcxsRegistration() {
        UcxAvailable.require();
        try (RdmaDevice dev = RdmaDevice.open("ucx"); RdmaDevice soft = RdmaDevice.open("soft")) {
            assertThat(soft.chunkSource().name()).isEqualTo("mmap");
            ChunkSource source = dev.chunkSource();
            assertThat(source.name()).isEqualTo("ucx");
            var pd = dev.allocPd();
            Chunk chunk = source.allocate(1 << 20, 4096);
            MemorySegment memory = ALL.asSlice(chunk.address(), chunk.size());
            assertThat(memory.mismatch(MemorySegment.ofArray(new byte[1 << 20]))).as("zero-filled").isEqualTo(-1);
            MemoryRegion a = pd.register(memory.asSlice(0, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            MemoryRegion b = pd.register(memory.asSlice(65536, 8192), Access.LOCAL_WRITE, Access.REMOTE_READ);
            assertThat(packedPart(a.exportRemoteKey())).as("the chunk's one UCX registration").isEqualTo(packedPart(b.exportRemoteKey()))
                    .isNotEmpty();
            UcxChunkSource.Allocation allocation = (UcxChunkSource.Allocation) chunk.sourceToken();
            assertThat(allocation.regions).as("two regions share the chunk's registration").isEqualTo(2);
            MemoryRegion straddling = pd.register(memory.asSlice((1 << 20) - 4096, 4096), Access.LOCAL_WRITE);
            assertThat(allocation.regions).isEqualTo(3);
            straddling.close();
            assertThat(allocation.regions).isEqualTo(2);
            a.close();
            b.close();
            source.release(chunk);
            pd.close();
        }
    }

    @Test
    void aPoolOfUcxChunksIsRegisteredAtBirthAndCarriesWritesAndReads() {
        UcxAvailable.require();
        try (Loopback lb = new Loopback("ucx", Map.of(), 64, new QpInitAttributes(), new QpInitAttributes())) {
            BufferPool pool = BufferPool.builder().name("ucx-chunks").chunkSource(lb.devB.chunkSource()).build();
            PoolRegistration reg = lb.pdB.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            PooledBuffer target = pool.allocate(65536);
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            for (int i = 0; i < 65536; i += 8) {
                lb.memA.set(ValueLayout.JAVA_LONG, i, i * 0x9E37_79B9L);
            }
            int key = lb.qpA.importRemoteKey(reg.exportRemoteKey(target));
            lb.qpA.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), 65536, local.lkey()).remote(target.address(), key));
            lb.qpA.postSend(new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(lb.memA.address() + 65536, 65536, local.lkey()).remote(target.address(), key));
            WorkCompletion[] one = {new WorkCompletion()};
            long deadline = System.nanoTime() + 10_000_000_000L;
            for (int got = 0; got < 2; ) {
                if (lb.cqA.poll(one) == 1) {
                    assertThat(one[0].status()).isEqualTo(WcStatus.SUCCESS);
                    got++;
                }
                lb.cqB.poll(new WorkCompletion[] {new WorkCompletion()});
                assertThat(System.nanoTime()).isLessThan(deadline);
            }
            assertThat(target.segment().mismatch(lb.memA.asSlice(0, 65536))).isEqualTo(-1);
            assertThat(lb.memA.asSlice(65536, 65536).mismatch(lb.memA.asSlice(0, 65536))).isEqualTo(-1);
            target.close();
            reg.close();
            pool.close();
            local.close();
        }
    }

    @Test
    void aChunkGivenBackUnderALiveRegionStaysUntilTheRegionGoes() {
        UcxAvailable.require();
        try (RdmaDevice dev = RdmaDevice.open("ucx")) {
            ChunkSource source = dev.chunkSource();
            var pd = dev.allocPd();
            Chunk chunk = source.allocate(65536, 4096);
            MemorySegment memory = ALL.asSlice(chunk.address(), chunk.size());
            MemoryRegion mr = pd.register(memory, Access.LOCAL_WRITE);
            source.release(chunk);
            memory.set(ValueLayout.JAVA_LONG, 8, 42L); // still mapped: the region holds it
            assertThat(memory.get(ValueLayout.JAVA_LONG, 8)).isEqualTo(42L);
            mr.close(); // now it goes
            source.release(chunk); // a second release changes nothing
            Chunk never = source.allocate(65536, 4096); // left for the device's close to free
            assertThat(never.address()).isNotZero();
            assertThatThrownBy(() -> source.allocate(1000, 4096)).isInstanceOf(RdmaException.class)
                    .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL));
            assertThatThrownBy(() -> source.release(ChunkSource.mmap().allocate(4096, 4096)))
                    .isInstanceOf(RdmaException.class).hasMessageContaining("another source");
            pd.close();
        }
    }
}
