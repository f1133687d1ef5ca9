package io.regmem.bench;

import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.WorkRequest;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Param;

/**
 * An RDMA read/write context's own cost: init + wrs + destroy (the chain built and released,
 * nothing posted) for 1, 16 and 256 page-sized entries, on the multi-SGE path (one entry takes the
 * one-SGE path) and on the MR path (forced). Run with {@code -prof gc}: 0 B/op.
 */
public class RwContextBenchmark extends RwLoopback {
    /** Entries in the list. */
    @Param({"1", "16", "256"})
    public int entries;

    private ScatterList sg;

    @Override
    void prepare() {
        sg = pages(entries);
    }

    /** Init, build the chain, destroy. */
    @Benchmark
    public WorkRequest initWrsDestroy() {
        ctx.init(qp, 1, sg, entries, 0, remote.address(), remote.rkey(), DmaDirection.TO_DEVICE);
        WorkRequest first = ctx.wrs(1);
        ctx.destroy(qp, 1, sg, entries, DmaDirection.TO_DEVICE);
        return first;
    }
}
