package io.regmem.registration;

import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * What a device's completion queues have delivered since the device opened: completions polled,
 * and failed completions by {@link WcStatus} (destroyed CQs included). Each CQ counts its own on the
 * poll path, under the lock its pollers hold anyway, in plain fields (no atomic, no shared line);
 * reading here adds the live CQs' counts to what destroyed ones left, without taking a lock the data
 * path takes. A read while pollers run is a recent value of each count.
 */
public final class DeviceCounters {
    private final RdmaDevice device;
    /** What destroyed CQs counted: completions polled, failed ones by status, and failed ones in all. */
    private final LongAdder retiredPolled = new LongAdder();
    private final AtomicLongArray retiredByStatus = new AtomicLongArray(WcStatus.values().length);
    private final LongAdder retiredFailed = new LongAdder();
    /** Datagrams dropped, by {@link DatagramDrop} (drops only: never on a delivered datagram's path). */
    private final AtomicLongArray dropped = new AtomicLongArray(DatagramDrop.values().length);

    DeviceCounters(RdmaDevice device) {
        this.device = device;
    }

    /** Completions polled from the device's CQs (every status). */
    public long completions() {
        long n = retiredPolled.sum();
        for (CompletionQueue cq : device.tracker.survivors(CompletionQueue.class)) {
            n += cq.completionsPolled();
        }
        return n;
    }

    /** Completions polled with {@code status} ({@link WcStatus#SUCCESS}: those that are not errors). */
    public long completions(WcStatus status) {
        if (status == WcStatus.SUCCESS) {
            return completions() - errors();
        }
        long n = retiredByStatus.get(status.ordinal());
        for (CompletionQueue cq : device.tracker.survivors(CompletionQueue.class)) {
            n += cq.completionsPolled(status);
        }
        return n;
    }

    /** Completions polled with a status other than {@link WcStatus#SUCCESS}. */
    public long errors() {
        long n = retiredFailed.sum();
        for (CompletionQueue cq : device.tracker.survivors(CompletionQueue.class)) {
            n += cq.failedPolled();
        }
        return n;
    }

    /** Live objects the device tracks (every type: PDs, MRs, CQs, QPs, CM IDs, ...). */
    public int objects() {
        return device.tracker.count();
    }

    /** Queue pairs in the ready-to-send state now: the device's connections. */
    public int connections() {
        int n = 0;
        for (QueuePair qp : device.tracker.survivors(QueuePair.class)) {
            if (qp.state() == QueuePair.State.RTS) {
                n++;
            }
        }
        return n;
    }

    /**
     * Unreliable datagrams addressed to this device's QPs and dropped for {@code reason} (a NIC's
     * {@code qkey_viol_cntr} for {@link DatagramDrop#QKEY}; its no-WQE counter for
     * {@link DatagramDrop#NO_RECEIVE}).
     */
    public long datagramsDropped(DatagramDrop reason) {
        return dropped.get(reason.ordinal());
    }

    /** Unreliable datagrams addressed to this device's QPs and dropped, for every reason. */
    public long datagramsDropped() {
        long n = 0;
        for (int i = 0; i < dropped.length(); i++) {
            n += dropped.get(i);
        }
        return n;
    }

    /** A datagram for one of this device's QPs was dropped (any thread). */
    void dropped(DatagramDrop reason) {
        dropped.incrementAndGet(reason.ordinal());
    }

    void dropped(DatagramDrop reason, long count) {
        dropped.addAndGet(reason.ordinal(), count);
    }

    /** A destroyed CQ's counts, kept in the device's totals. */
    void retire(CompletionQueue cq) {
        retiredPolled.add(cq.completionsPolled());
        retiredFailed.add(cq.failedPolled());
        for (WcStatus s : WcStatus.values()) {
            if (s != WcStatus.SUCCESS) {
                retiredByStatus.addAndGet(s.ordinal(), cq.completionsPolled(s));
            }
        }
    }
}
