package io.regmem.bench;

import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.WcStatus;
import java.lang.foreign.MemorySegment;
import org.openjdk.jmh.annotations.Benchmark;

/**
 * A whole 16 x 4 KiB RDMA WRITE through a context on the soft provider (init, post, poll the one
 * completion, destroy), beside {@link MemorySegment#copy} of the same 16 pages into one 64 KiB
 * destination: what a context and the soft device add to the copy they perform.
 */
public class RwWriteBenchmark extends RwLoopback {
    private ScatterList sixteen;

    @Override
    void prepare() {
        sixteen = pages(16);
    }

    /** Init, post, poll, destroy. */
    @Benchmark
    public long write16x4k() {
        ctx.init(qp, 1, sixteen, 16, 0, remote.address(), remote.rkey(), DmaDirection.TO_DEVICE);
        ctx.post(qp, 1, 7);
        while (cqA.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException(wcs[0].toString());
        }
        ctx.destroy(qp, 1, sixteen, 16, DmaDirection.TO_DEVICE);
        return wcs[0].byteLen();
    }

    /** The same 16 pages copied into one 64 KiB destination. */
    @Benchmark
    public MemorySegment copy16x4k() {
        for (int i = 0; i < 16; i++) {
            MemorySegment.copy(local, 2L * i * PAGE, remoteMemory, (long) i * PAGE, PAGE);
        }
        return remoteMemory;
    }
}
