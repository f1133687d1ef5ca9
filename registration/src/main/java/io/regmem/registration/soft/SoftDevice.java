package io.regmem.registration.soft;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.ProgressFaults;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.ProviderCq;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderMr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteOrder;
import java.util.concurrent.locks.LockSupport;
import org.agrona.collections.ArrayUtil;

/** A soft device: its limits, its queue pairs and, if asked for, its progress thread. */
final class SoftDevice implements ProviderDevice {
    private final DeviceAttributes attributes;
    /** The live QPs, for the progress thread: replaced, never mutated, under {@code this}. */
    private volatile SoftQueuePair[] qps = new SoftQueuePair[0];
    private final Thread progress;
    private volatile boolean closed;
    private final boolean udOversizeError;

    SoftDevice(DeviceAttributes attributes, boolean progressThread, boolean udOversizeError) {
        this.attributes = attributes;
        this.udOversizeError = udOversizeError;
        this.progress = progressThread ? Thread.ofPlatform().daemon().name("regmem-soft-progress").start(this::progressLoop)
                : null;
    }

    /** The progress thread's loop: execute whatever is queued, then nap briefly (20 microseconds). */
    private void progressLoop() {
        while (!closed) {
            try {
                for (SoftQueuePair qp : qps) {
                    try {
                        qp.progress();
                    } catch (RuntimeException | Error e) { // (this QP's fault only: the others are served on)
                        fault(qp, e);
                    }
                }
                LockSupport.parkNanos(20_000);
            } catch (RuntimeException | Error e) {
                ProgressFaults.survived("regmem soft: the progress thread", e);
            }
        }
    }

    @Override
    public int progressRound() {
        int work = 0;
        for (SoftQueuePair qp : qps) {
            try {
                work += qp.progressIfFree();
            } catch (RuntimeException | Error e) {
                work += fault(qp, e);
            }
        }
        return work;
    }

    /** A failure of {@code qp}'s progress: the QP errs with QP_FATAL (said once in the log); never throws. */
    private static int fault(SoftQueuePair qp, Throwable e) {
        try {
            if (!qp.ctx.isError()) {
                System.getLogger(SoftDevice.class.getName()).log(System.Logger.Level.WARNING,
                        "regmem soft: " + qp.ctx.name() + ": its progress failed; the QP moves to the error state", e);
            }
            qp.ctx.fatal("its progress failed: " + e);
        } catch (RuntimeException | Error again) {
            // nothing more can be done for this QP here
        }
        return 1;
    }

    @Override
    public DeviceAttributes attributes() {
        return attributes;
    }

    @Override
    public boolean datagrams() {
        return true;
    }

    @Override
    public InetSocketAddress datagramEndpoint() {
        return SoftFabric.ENDPOINT;
    }

    /** True if a UD send over the path MTU completes with LOC_LEN_ERR instead of a silent success. */
    boolean udOversizeError() {
        return udOversizeError;
    }

    @Override
    public ProviderMr registerMemory(MrContext mr) {
        return SoftMr.INSTANCE;
    }

    @Override
    public ProviderQp createQp(QpContext ctx) {
        SoftQueuePair qp = new SoftQueuePair(this, ctx);
        synchronized (this) {
            qps = ArrayUtil.add(qps, qp);
        }
        return qp;
    }

    void removeQp(SoftQueuePair qp) {
        synchronized (this) {
            qps = ArrayUtil.remove(qps, qp);
        }
    }

    @Override
    public ProviderCq createCq(CqContext ctx) {
        SoftCq cq = new SoftCq(progress != null);
        ctx.attach(cq);
        return cq;
    }

    @Override
    public ProviderCm createCmId(CmContext ctx) {
        return new SoftCm(ctx);
    }

    @Override
    public void quiesce() {
        SoftWire.GRACE.synchronize();
    }

    @Override
    public void close() {
        closed = true;
        if (progress != null) {
            progress.interrupt();
            try {
                progress.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The soft registration handle: the key is the verbs layer's; deregistration waits a grace period. */
    private enum SoftMr implements ProviderMr {
        INSTANCE;

        @Override
        public void deregister() {
            SoftWire.GRACE.synchronize();
        }
    }

    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** Reads a soft exported key (4 bytes, big-endian). */
    static int importKey(MemorySegment exported, String who) {
        if (exported.byteSize() != 4) {
            throw new RdmaException(Errno.EINVAL, who + ": a soft remote key is 4 bytes, got " + exported.byteSize());
        }
        return exported.get(BE_INT, 0);
    }
}
