package io.regmem.registration.spi;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;

/**
 * The provider's half of a reliable-connected queue pair.
 *
 * <p>The verbs layer checks and copies a posted chain into the QP's queues (all or nothing) and
 * then calls {@link #sendPosted} or {@link #recvPosted}. The provider executes the send queue in
 * order: {@link QpContext#nextSend()} is the oldest request not yet completed; it completes it with
 * {@link QpContext#completeSend}. A synchronous provider (soft) executes in {@link ProviderCq#progress()};
 * an asynchronous one may start every request at once and complete them in order as its transport
 * reports them. Completing a request with an error moves the QP to the error state; the verbs layer
 * then flushes what is left ({@link QpContext#flush()}).
 */
public interface ProviderQp {

    /**
     * Send requests {@code [firstSeq, firstSeq + count)} were appended and published (called with
     * the QP's post lock held, not its execution lock, unless {@link #postsUnderExecutionLock()};
     * must not block).
     */
    void sendPosted(long firstSeq, int count);

    /**
     * True if sends are posted under the QP's execution lock instead of its post lock, so that
     * {@link #sendPosted} runs them under the acquisition the post already made (the lock is then held
     * by the calling thread): for a provider whose sends are short and run at once on the posting
     * thread (a datagram), where a second lock per post would cost more than the post's wait for an
     * executor. False by default. Receives are always posted under the post lock.
     */
    default boolean postsUnderExecutionLock() {
        return false;
    }

    /** Receive requests {@code [firstSeq, firstSeq + count)} were appended (post lock held; must not block). */
    void recvPosted(long firstSeq, int count);

    /**
     * The QP moved to the error state on the user's request ({@code drain}, disconnect, destroy):
     * stop starting requests; return when no request of this QP touches memory any more. Called
     * with the QP's execution lock held; the verbs layer flushes the queues afterwards.
     */
    void stop();

    /**
     * The top byte no memory region's key ever has (the keys work requests name, on every provider): a
     * provider may give the handles {@link #importRemoteKey} returns this top byte, and tell them
     * from a target's own keys sent as they are.
     */
    int HANDLE_TAG_BYTE = 0x5C;

    /**
     * Imports a peer's exported remote key ({@link ProviderMr#exportRemoteKey}) for use in this QP's
     * work requests: returns the 32-bit handle a {@code WorkRequest} carries as its rkey. Imported
     * keys live as long as the QP.
     *
     * @throws io.regmem.core.RdmaException {@link io.regmem.core.Errno#EINVAL} for bytes this provider
     *                                      cannot read
     */
    int importRemoteKey(MemorySegment exported);

    /** The QP is destroyed: it is in the error state and flushed; release everything. */
    void destroy();

    /**
     * The connected peer, in this JVM, disconnected or was destroyed (any thread): a provider whose
     * peer's requests may still wait in memory the two share takes them now, as it does when a peer
     * in another process goes, and then moves the QP to the error state itself (true); false (the
     * default): the caller moves it to the error state at once.
     */
    default boolean peerDisconnected() {
        return false;
    }

    /**
     * The provider's view of this QP's transport, one line for a log or a failure message (what it
     * sent and received, what it waits for); empty if it has nothing to add. Any thread; racy reads
     * are fine; must not block or throw.
     */
    default String diagnostics() {
        return "";
    }

    /**
     * A provider-specific capability of this QP (soft: {@link io.regmem.registration.faults.QpFaults}), or null.
     */
    default <T> T unwrap(Class<T> type) {
        return type.isInstance(this) ? type.cast(this) : null;
    }

    /**
     * Memory of the QP's that the provider's requests may have read (the send queue's inline slots),
     * handed over after {@link #destroy()}: close it once nothing of the provider's reads it any more.
     * Default: at once.
     */
    default void releaseMemory(Arena memory) {
        memory.close();
    }

    /**
     * Attaches this UD QP to the multicast group {@code gid}: from now on it receives the group's
     * datagrams. The verbs layer checked the rules and limits and calls this once per group (device
     * lock held). Default: {@link io.regmem.core.Errno#EOPNOTSUPP}.
     */
    default void attachMulticast(InetAddress gid) {
        throw new RdmaException(Errno.EOPNOTSUPP, "this provider has no multicast");
    }

    /** Detaches this QP from {@code gid}, to which {@link #attachMulticast} attached it (device lock held). */
    default void detachMulticast(InetAddress gid) {
    }
}
