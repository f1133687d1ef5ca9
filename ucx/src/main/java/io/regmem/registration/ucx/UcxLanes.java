package io.regmem.registration.ucx;

import io.regmem.core.RdmaException;
import io.regmem.registration.shm.SameHostLane;
import io.regmem.registration.spi.MrContext;
import java.util.concurrent.locks.LockSupport;

/**
 * A UCX device's same-host lane ({@link SameHostLane}): a connection whose peer is on this host (in
 * another process, or in this JVM) runs over it instead of UCX when both devices have it on (the
 * {@code sameHostLane} option, default true; {@value #ENV}{@code =false} in the environment makes
 * false the default). Opened at the first connection that may use it; where it cannot start (no
 * Linux system calls for it), connections go over UCX and one line says why.
 */
final class UcxLanes {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.ucx");
    /** The environment variable that sets the option's default. */
    static final String ENV = "REGMEM_UCX_SAME_HOST_LANE";
    private final UcxDevice device;
    /** The option: connections to this host may use the lane. Set once, before any QP exists. */
    volatile boolean enabled = true;
    /** The open lane engine, or null. */
    private volatile SameHostLane open;
    /** The device's progress thread may sleep on the lanes (set before any lane opens). */
    volatile boolean sleepy;
    /** Guarded by this: the lane could not start, or the device closed. */
    private boolean unavailable;

    UcxLanes(UcxDevice device) {
        this.device = device;
    }

    /** The option's default: true unless {@value #ENV} is {@code false}. */
    static boolean defaultEnabled() {
        return !"false".equals(System.getenv(ENV));
    }

    /** The device's lane, opened now if need be; null if the option is off or the lane cannot start. */
    SameHostLane lane() {
        SameHostLane l = open;
        if (l != null || !enabled) {
            return l;
        }
        synchronized (this) {
            if (open == null && !unavailable) {
                try {
                    SameHostLane l2 = SameHostLane.open(device.attributes(), device.grace, device.answerTimeoutNanos);
                    if (sleepy) {
                        l2.sleepWhenIdle();
                    }
                    open = l2;
                } catch (RdmaException | LinkageError e) {
                    unavailable = true;
                    LOG.log(System.Logger.Level.WARNING, "regmem ucx: the same-host lane cannot start here, connections "
                            + "to this host go over UCX: " + e.getMessage());
                }
            }
            return open;
        }
    }

    /** The progress thread, idle with only lane connections: sleeps until a lane's peer wakes it, or 10 ms pass. */
    void sleepUntilWoken(long[] words) {
        SameHostLane l = open;
        if (l == null) {
            LockSupport.parkNanos(10_000_000L);
        } else {
            l.sleepUntilWoken(words);
        }
    }

    /** Progresses the lane's QPs whose lock is free or comes free (the progress thread); the work done. */
    int progress() {
        SameHostLane l = open;
        return l == null ? 0 : l.progress();
    }

    /** Waits for the lane's answers into {@code region} and verdicts on pulls from it ({@link SameHostLane#quiesce}). */
    void quiesce(MrContext region) {
        SameHostLane l = open;
        if (l != null) {
            l.quiesce(region);
        }
    }

    /** The device closes (its QPs are gone). */
    synchronized void close() {
        unavailable = true;
        SameHostLane l = open;
        open = null;
        if (l != null) {
            l.close();
        }
    }
}
