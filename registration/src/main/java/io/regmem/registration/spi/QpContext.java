package io.regmem.registration.spi;

import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpType;
import io.regmem.registration.WcStatus;
import java.net.InetAddress;
import java.util.concurrent.locks.ReentrantLock;

/**
 * What the verbs layer offers a provider for one queue pair: its queues, its completions and its
 * state. Taking requests off the queues and completing them is guarded by {@link #lock()}, the QP's
 * execution lock: a provider holds it while it does so. Posting appends under a separate post lock
 * and publishes each queue's tail with a release store, so a post never waits for an executor.
 * Completions go to the QP's CQs in the order they are made.
 */
public interface QpContext {

    /** The QP's name, for messages ({@code dev/QueuePair#n}). */
    String name();

    /** True once the QP was destroyed. */
    boolean isDestroyed();

    /** The send queue's depth ({@code maxSendWr}). */
    int maxSendWr();

    /**
     * How often a request that consumes a receive is retried when the peer has none posted
     * ({@code rnr_retry}, [0, 7]: 0 fails it at once with RNR_RETRY_EXC_ERR, 7 retries for ever).
     */
    int rnrRetry();

    /**
     * How long, in nanoseconds, a peer that found no receive posted at this QP waits before it
     * retries ({@code min_rnr_timer}, decoded).
     */
    long minRnrTimerNanos();

    /** The lock guarding this QP's queues and state. */
    ReentrantLock lock();

    /** The send CQ's context. */
    CqContext sendCq();

    /** The receive CQ's context. */
    CqContext recvCq();

    /**
     * True if nothing waits in either queue to be executed or flushed now: no send request, and no
     * receive unless the QP is in the error state. Any thread, without the lock (a progress fast path).
     */
    boolean idle();

    /** The sequence number the next posted send request gets ({@link PostedWr#seq()}; any thread). */
    long sendTail();

    /** The oldest send request not yet completed, or null (lock held). */
    PostedWr nextSend();

    /**
     * The posted send request with sequence number {@code seq}, for a provider that starts requests
     * before the older ones completed (an asynchronous transport starts each one in
     * {@link ProviderQp#sendPosted}). Valid from the {@code sendPosted} call that announced it until it
     * is completed; call it with the QP's post lock (inside {@code sendPosted}) or its execution lock
     * held.
     *
     * @throws IllegalArgumentException if {@code seq} is not a posted, uncompleted request
     */
    PostedWr sendAt(long seq);

    /** As {@link #sendAt}, for the receive queue (from {@link ProviderQp#recvPosted}). */
    PostedWr recvAt(long seq);

    /**
     * Completes the request {@link #nextSend()} returned and takes it off the queue (lock held). A
     * completion is made when the request was signaled or failed; a failure moves the QP to the
     * error state. When the send CQ is full the completion is lost and the QP moves to the error
     * state (a CQ overrun).
     *
     * @param bytes bytes transferred (0 for a failure)
     */
    void completeSend(WcStatus status, long bytes);

    /** The oldest receive request not yet consumed, or null (lock held). */
    PostedWr nextRecv();

    /**
     * Consumes the request {@link #nextRecv()} returned with a completion on the receive CQ (lock
     * held). A failed receive moves the QP to the error state.
     *
     * @param withInvalidate  true if a SEND_WITH_INV invalidated {@code invalidatedRkey} here
     */
    default void completeRecv(WcStatus status, Opcode opcode, long bytes, boolean withImm, int immData, boolean withInvalidate,
                      int invalidatedRkey) {
        completeRecv(status, opcode, bytes, withImm, immData, withInvalidate, invalidatedRkey, false);
    }

    /**
     * As {@link #completeRecv(WcStatus, Opcode, long, boolean, int, boolean, int)}, for a receive
     * consumed by a request its sender marked solicited ({@link PostedWr#solicited()}): a CQ armed for
     * solicited completions only raises its event for it.
     */
    void completeRecv(WcStatus status, Opcode opcode, long bytes, boolean withImm, int immData, boolean withInvalidate,
                      int invalidatedRkey, boolean solicited);

    /** True while the QP is ready to send (RTS; any thread). */
    boolean isReady();

    /** True once the QP is in the error state (any thread). */
    boolean isError();

    /** Moves a connected QP to RTS (the provider's connection setup). */
    void ready();

    /** Moves the QP to the error state (any thread); the provider flushes at its next progress. */
    void toError();

    /**
     * Its peer in this JVM disconnected: the provider takes what the peer left it, then the QP moves
     * to the error state ({@link ProviderQp#peerDisconnected}); any thread.
     */
    void peerDisconnected();

    /**
     * Moves the QP to the error state because its provider failed while it progressed it (a fault
     * no work completion describes), and, if it was not in the error state already, raises
     * {@code QP_FATAL} with {@code why} (the device's error handler gets it, else it is logged). Any
     * thread; the provider flushes at its next progress.
     */
    void fatal(String why);

    /**
     * In the error state: completes every queued request of both queues with
     * {@link WcStatus#WR_FLUSH_ERR}, in order, and settles the queue slots (lock held).
     */
    void flush();

    /** What the provider attached to this QP ({@link #attach}), or null. */
    Object attachment();

    /** Attaches the provider's own state, for a provider that reaches the QP through its context. */
    void attach(Object state);

    /**
     * Memory translation for providers that move bytes in software, bound to this QP: its device's
     * keys and DMA mappings, its PD. One object per QP, for its lifetime.
     */
    MemoryAccess memory();

    // ---- unreliable datagrams ---------------------------------------------------------------------

    /** The QP's type: {@link QpType#RC}, or {@link QpType#UD} on a {@code PortSpace.UDP} ID. */
    QpType qpType();

    /** The QP's number ({@code qp_num}, 24 bits, unique among the live QPs of this JVM). */
    int qpNum();

    /** A UD QP's Q_Key ({@code qkey}): a datagram whose Q_Key differs is dropped ({@link DatagramDrop#QKEY}). */
    int qkey();

    /** True if this UD QP receives none of its own multicast sends ({@code IBV_QP_CREATE_BLOCK_SELF_MCAST_LB}). */
    boolean blocksSelfMulticastLoopback();

    /** The traffic class of a UD QP's datagrams: its CM ID's {@code TOS} option (0 to 255). */
    int trafficClass();

    /** The path MTU in bytes: a UD send larger than this is never sent. */
    int pathMtu();

    /**
     * Consumes the receive {@link #nextRecv()} returned with a datagram (a UD QP; lock held): its
     * buffer holds the 40-byte GRH area and then the message, {@code bytes} counting both.
     *
     * @param srcQp  the sending QP's number
     * @param source the sender's port ({@code WorkCompletion.source()})
     */
    void completeDatagram(long bytes, boolean withImm, int immData, boolean solicited, int srcQp, AhAttributes source);

    /** A datagram addressed to this QP was dropped for {@code reason}: counted on its device (any thread). */
    void dropDatagram(DatagramDrop reason);

    /**
     * The provider lost multicast group {@code group} for this UD QP (the interface it was joined on
     * went down or away): if the QP's CM ID joined it, the join ends with a {@code MULTICAST_ERROR}
     * event of {@code status} (a negative errno) and the QP is detached; a bare attachment stays. Call
     * it holding no lock of the provider's or the QP's (it takes the device lock and may run event
     * handlers).
     */
    void multicastLost(InetAddress group, int status);
}
