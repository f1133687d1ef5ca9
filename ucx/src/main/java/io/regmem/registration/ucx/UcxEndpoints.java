package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;

/**
 * A channel's endpoints to peer workers, one per peer ({@link UcxEndpoint}), made whole (wired up)
 * before first use, and closed when the channel is destroyed or either device closes: a closing
 * device first has every other device of this JVM close its main channel's endpoint to it, then
 * closes its own. The table is read and changed under the device's worker lock.
 */
final class UcxEndpoints {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.ucx");
    private final UcxDevice device;
    private final UcxChannel channel;
    private final HashMap<ByteBuffer, UcxEndpoint> endpoints = new HashMap<>();

    UcxEndpoints(UcxDevice device, UcxChannel channel) {
        this.device = device;
        this.channel = channel;
    }

    /**
     * The endpoint to the worker at {@code peer}: the one this device already has, or a new one.
     *
     * @throws RdmaException {@link Errno#ENODEV} if this device is closed; {@link Errno#EINVAL} if UCX
     *                       cannot reach the peer
     */
    UcxEndpoint endpointTo(byte[] peer) {
        long flush;
        UcxEndpoint e;
        device.lockWorker();
        try {
            ByteBuffer key = ByteBuffer.wrap(peer.clone());
            e = endpoints.get(key);
            if (e != null) {
                return e;
            }
            e = new UcxEndpoint(key.array(), channel.worker.connect(peer, false).address(),
                    Arrays.equals(peer, channel.address));
            endpoints.put(key, e);
            flush = device.ucp.flush(e.handle, channel.worker.noParams.address());
        } finally {
            device.workerLock.unlock();
        }
        awaitWireup(e, flush);
        device.lockWorker();
        try {
            if (e.handle != 0) {
                List<String> tls = UcxTransports.of(device.ucp, e.handle);
                e.messagesBecause = UcxTransports.whyNotOneSided(device.ucp.major, device.ucp.minor, tls);
                List<String> lanes = UcxTransports.lanes(device.ucp.epInfo(e.handle));
                e.eagerOnly = !UcxTransports.rendezvousPays(lanes);
                String why = e.messagesBecause;
                UcxEndpoint made = e;
                LOG.log(System.Logger.Level.DEBUG, () -> "regmem ucx: endpoint on lanes " + lanes
                        + (tls == null ? "" : ", transports " + tls) + (made.eagerOnly ? ", large transfers eager" : "")
                        + (why == null ? ": WRITE and READ go as NIC-checked puts and gets"
                                : ": WRITE and READ go as messages the target checks (" + why + ")"));
            }
        } finally {
            device.workerLock.unlock();
        }
        return e;
    }

    /**
     * Waits until a new endpoint's wire-up is done (its flush completes), progressing this worker and
     * those of this JVM's other devices (the peer's worker must answer): a connection is made whole
     * before it is announced, so that the peer's own endpoint back to this worker matches this one
     * instead of crossing it with a second wire-up. UCX 1.13 asserts, killing the process, when a
     * TCP endpoint fails while a wire-up request of it is still pending.
     *
     * @throws RdmaException {@link Errno#ETIMEDOUT} if the peer does not answer within 10 s
     */
    private void awaitWireup(UcxEndpoint e, long flush) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            device.lockWorker();
            try {
                int s = channel.worker.poll(flush);
                if (s != UcpLayout.UCS_INPROGRESS) {
                    if (s != UcpLayout.UCS_OK) {
                        throw new RdmaException(Errno.EIO, "ucx: connecting to a peer worker: " + device.ucp.describe(s));
                    }
                    return;
                }
                if (System.nanoTime() > deadline) {
                    device.abandon(flush);
                    throw new RdmaException(Errno.ETIMEDOUT, "ucx: the peer worker did not answer the connection within 10 s");
                }
                channel.worker.progress();
            } finally {
                device.workerLock.unlock();
            }
            device.progressOthers(); // a peer in this JVM answers only when its worker progresses
        }
    }

    /**
     * Closes this device's endpoint to the worker at {@code peer} (a peer device of this JVM is
     * closing; it keeps progressing meanwhile). Returns the close request to poll, or 0. Worker lock held.
     */
    long startClosing(byte[] peer) {
        UcxEndpoint e = endpoints.remove(ByteBuffer.wrap(peer));
        if (e == null || e.handle == 0) {
            return 0;
        }
        long ep = e.handle;
        e.handle = 0; // from now on a send on it fails as on a reset connection
        return channel.worker.startClose(MemorySegment.ofAddress(ep), false);
    }

    /**
     * Before this device closes: every other device of this JVM closes its endpoint to this one,
     * both workers progressing until the closes are done (at most 2 s each; a close left over is
     * the other worker's to finish). Holds one worker lock at a time.
     */
    void closePeersEndpoints() {
        for (UcxDevice other : UcxAm.devices()) {
            if (other == null || other == device) {
                continue;
            }
            long req;
            try {
                other.lockWorker();
            } catch (RdmaException closedAlready) {
                continue;
            }
            try {
                req = other.endpoints.startClosing(channel.address);
            } finally {
                other.workerLock.unlock();
            }
            long deadline = System.nanoTime() + 2_000_000_000L;
            while (req != 0) {
                try {
                    other.lockWorker();
                } catch (RdmaException closedAlready) {
                    break; // its worker is gone, and the request with it
                }
                try {
                    if (other.worker.poll(req) != UcpLayout.UCS_INPROGRESS) {
                        break;
                    }
                    other.worker.progress(); // (its main worker: the only one a peer of this JVM connects to)
                    if (System.nanoTime() > deadline) {
                        other.abandon(req);
                        break;
                    }
                } finally {
                    other.workerLock.unlock();
                }
                device.progress(); // this device answers the close
            }
        }
    }

    /** Starts closing every endpoint of this channel (worker lock held): the close requests, to poll. */
    List<Long> startClosingAll() {
        List<Long> reqs = new ArrayList<>();
        for (UcxEndpoint e : endpoints.values()) {
            if (e.handle != 0) {
                long r = channel.worker.startClose(MemorySegment.ofAddress(e.handle), false);
                e.handle = 0;
                if (r != 0 && !Ucp.isError(r)) {
                    reqs.add(r);
                }
            }
        }
        endpoints.clear();
        return reqs;
    }
}
