package io.regmem.registration.ucx;

import java.lang.foreign.Arena;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * A UCX worker of a device and its endpoints to peer workers. A device's main channel serves its
 * connections inside this JVM; connections to another process get a channel of their own per peer
 * process ({@link UcxDevice#acquireChannel}), shared by every connection made to that peer while the
 * earlier ones last, so that a peer process that dies in the middle of a shared-memory send (UCX
 * 1.13's shared-memory FIFO then stops delivering at that slot) stops only the receives of its own
 * connections, never those of the device's other peers.
 *
 * <p>A channel other than the main one is retired when one of its connections ends (no new
 * connection joins it: the peer may be gone, or be a new process at the same address) and destroyed
 * with its worker when its last QP is destroyed. Every call on its worker is made under the
 * device's worker lock.
 */
final class UcxChannel {
    /** The device's main channel has serial 0; the AM handler's argument carries the serial. */
    final int serial;
    final UcpWorker worker;
    final UcxEndpoints endpoints;
    /** This channel's worker address (what a peer's endpoint connects to). */
    final byte[] address;
    /** What the channel was made for (the peer's identity), or null for the main channel. */
    final Object key;
    /** QPs that took this channel and were not destroyed yet (under the device's channel table). */
    int users;
    /** No new connection joins it (under the device's channel table). */
    boolean retired;
    /**
     * The last progress round that progressed this worker ({@link UcxDevice#progressChannels}), so
     * that a round progresses a channel its CQ's QPs share once. Worker lock held.
     */
    long round;
    /** Arenas of destroyed QPs whose memory UCX may still use (requests left to this worker): closed after it. */
    final ConcurrentLinkedQueue<Arena> closeLater =
            new ConcurrentLinkedQueue<>();

    UcxChannel(UcxDevice device, int serial, UcpWorker worker, byte[] address, Object key) {
        this.serial = serial;
        this.worker = worker;
        this.address = address;
        this.key = key;
        this.endpoints = new UcxEndpoints(device, this);
    }

    @Override
    public String toString() {
        return serial == 0 ? "main worker" : "worker " + serial + " (" + users + " QP(s)" + (retired ? ", retired" : "")
                + (key instanceof UcxChannels.OverNetwork ? ", network transports only" : "") + ")";
    }
}
