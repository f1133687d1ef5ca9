package io.regmem.registration.ucx;

import io.regmem.core.RdmaException;
import java.lang.foreign.Arena;
import java.util.HashMap;
import java.util.List;
import org.agrona.collections.ArrayUtil;

/**
 * A device's channels to other processes: a UCX worker per peer process (its endpoints to that
 * peer's worker shared by every QP to it), made when a connection to a new peer needs one, retired
 * for new connections when one of its connections ends (the peer may be gone, or be a new process
 * at the same address), and destroyed with the last QP that uses it (its endpoints closed, its
 * worker settled and destroyed; UCX requests a dead peer never finishes released first). The main
 * channel (the device's own worker, serial 0, for connections inside this JVM) is not one of them.
 */
final class UcxChannels {
    private final UcxDevice device;
    /** The channels, retired ones included, until destroyed: replaced, never mutated, under the worker lock. */
    private volatile UcxChannel[] channels = new UcxChannel[0];
    /** The channels new connections to a peer may join, by the peer's identity (guarded by itself). */
    private final HashMap<Object, UcxChannel> table = new HashMap<>();
    /** Serial numbers of channels (worker lock). */
    private int nextSerial = 1;

    /**
     * The key of a channel to the peer {@code peer} names whose worker has no shared-memory transport
     * (from {@link UcxDevice#networkContext()}): a same-host peer the lane could not reach, which
     * UCX's shared-memory transports would not reach either.
     */
    record OverNetwork(Object peer) {
    }

    UcxChannels(UcxDevice device) {
        this.device = device;
    }

    /**
     * The channel for a connection to the peer process {@code key} names (the listener's address a
     * requester connects to, or the requester's worker address a listener is asked by): the one
     * earlier live connections to it use, or a new one with a worker of its own. The caller gives it
     * back with {@link #release} (its QP's destruction). A new channel's worker is made under the
     * worker lock (a few milliseconds, once per peer process).
     *
     * @throws RdmaException {@link Errno#ENODEV} if the device was closed; {@link Errno#ENOMEM} if UCX
     *                       cannot make a worker
     */
    UcxChannel acquire(Object key) {
        synchronized (table) {
            UcxChannel c = table.get(key);
            if (c == null) {
                c = newChannel(key);
                table.put(key, c);
            }
            c.users++;
            return c;
        }
    }

    /** A channel with a worker of its own, its AM handler installed (channel table's monitor held). */
    private UcxChannel newChannel(Object key) {
        device.lockWorker();
        try {
            UcpWorker w = new UcpWorker(key instanceof OverNetwork ? device.networkContext() : device.context());
            try {
                int serial = nextSerial++;
                byte[] a = w.address();
                UcxAm.installOn(device, device.amNumber(), w, serial);
                UcxChannel c = new UcxChannel(device, serial, w, a, key);
                channels = ArrayUtil.add(channels, c);
                return c;
            } catch (RuntimeException e) {
                w.close();
                throw e;
            }
        } finally {
            device.workerLock.unlock();
        }
    }

    /** No new connection joins {@code c} any more (one of its connections ended); the main channel stays. */
    void retire(UcxChannel c) {
        if (c == null || c.serial == 0) {
            return;
        }
        synchronized (table) {
            if (!c.retired) {
                c.retired = true;
                table.remove(c.key, c);
            }
        }
    }

    /**
     * A QP that took {@code c} is destroyed: the last one destroys the channel (its endpoints closed,
     * its worker settled and destroyed; requests a dead peer never finishes are released first).
     * The main channel stays.
     */
    void release(UcxChannel c) {
        if (c == null || c.serial == 0) {
            return;
        }
        synchronized (table) {
            if (--c.users > 0) {
                return;
            }
            c.retired = true;
            table.remove(c.key, c);
        }
        destroyChannel(c);
    }

    /** Destroys a channel nobody uses (its QPs' requests are ended or released). */
    private void destroyChannel(UcxChannel c) {
        List<Long> closing;
        if (!lockWorkerIfOpen()) {
            return; // the device's close destroyed it
        }
        try {
            if (c.worker.isClosed()) {
                return;
            }
            closing = c.endpoints.startClosingAll();
        } finally {
            device.workerLock.unlock();
        }
        // Settled with the lock taken per round: the device's other channels go on meanwhile.
        long deadline = System.nanoTime() + 200_000_000L;
        int idle = 0;
        while (idle < 16 && System.nanoTime() < deadline) {
            if (!lockWorkerIfOpen()) {
                return;
            }
            try {
                idle = c.worker.progress() ? 0 : idle + 1;
            } finally {
                device.workerLock.unlock();
            }
        }
        if (!lockWorkerIfOpen()) {
            return;
        }
        try {
            close(c, closing);
        } finally {
            device.workerLock.unlock();
        }
    }

    /** Takes the worker lock unless the device is closed (then false, and its close destroyed every channel). */
    private boolean lockWorkerIfOpen() {
        try {
            device.lockWorker();
            return true;
        } catch (RdmaException closedAlready) {
            return false;
        }
    }

    /** Releases the closes still running and destroys the channel's worker (worker lock held). */
    void close(UcxChannel c, List<Long> closing) {
        for (long r : closing) {
            if (c.worker.poll(r) == UcpLayout.UCS_INPROGRESS) {
                device.abandon(r); // a peer that never answered (gone): released, freed by the destroy
            }
        }
        c.worker.close();
        channels = ArrayUtil.remove(channels, c);
        for (Arena a; (a = c.closeLater.poll()) != null; ) {
            a.close(); // nothing of UCX's uses it any more
        }
    }

    /** The channels to other processes (for diagnostics and tests). */
    UcxChannel[] all() {
        return channels;
    }
}
