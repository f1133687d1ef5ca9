package io.regmem.registration.spi;

import io.regmem.registration.AhAttributes;
import io.regmem.registration.Opcode;
import java.lang.foreign.MemorySegment;

/** A posted work request as its queue keeps it: the verbs layer's copy of a {@code WorkRequest}. */
public interface PostedWr {
    /** The caller's id. */
    long wrId();

    /** What to do. */
    Opcode opcode();

    /** True if it completes with a CQE on success. */
    boolean signaled();

    /**
     * For an inline request, the send-queue slot its bytes were copied into at post time
     * ({@code IBV_SEND_INLINE}): they are its first {@code sgeLength(0)} bytes; else null. Its one
     * SGE points at them and has no lkey: {@link MemoryAccess#gatherLocal} resolves it to this slot,
     * and a provider that reads SGEs some other way must take the bytes from here.
     */
    default MemorySegment inlineData() {
        return null;
    }

    /** A BIND_MW's window, or null; its region is {@link #regMr()}, its key {@link #regKey()}, its rights {@link #regAccess()}. */
    default MwContext bindMw() {
        return null;
    }

    /** A BIND_MW's range: it starts at {@link #remoteAddress()}; this many bytes. */
    default long bindLength() {
        return 0;
    }

    /** True if the receive it consumes at the peer is solicited ({@code IBV_SEND_SOLICITED}). */
    default boolean solicited() {
        return false;
    }

    /** Scatter/gather entries. */
    int numSge();

    /** Entry {@code i}'s address. */
    long sgeAddress(int i);

    /** Entry {@code i}'s length. */
    long sgeLength(int i);

    /** Entry {@code i}'s local key. */
    int sgeLkey(int i);

    /** The sum of the entries' lengths. */
    long totalLength();

    /** RDMA: the remote address. */
    long remoteAddress();

    /** RDMA: the remote key (as imported on this QP). */
    int rkey();

    /** The immediate (WRITE_WITH_IMM, SEND_WITH_IMM). */
    int immData();

    /** The key to invalidate (LOCAL_INV, SEND_WITH_INV). */
    int invalidateRkey();

    /** An atomic's compare value (CMP_AND_SWP) or addend (FETCH_AND_ADD). */
    long compareAdd();

    /** A CMP_AND_SWP's value to store. */
    long swap();

    /** REG_MR: the MR. */
    MrContext regMr();

    /** REG_MR: the key. */
    int regKey();

    /** REG_MR: the rights. */
    int regAccess();

    /** The request's sequence number in its queue: 0 for the first request ever posted, then 1, 2, ... */
    long seq();

    /** An unreliable-datagram send's destination ({@code wr.ud.ah}'s attributes, copied at post), or null. */
    default AhAttributes udAddress() {
        return null;
    }

    /** An unreliable-datagram send's remote QP number ({@code AhAttributes.MULTICAST_QPN} for a group). */
    default int remoteQpn() {
        return 0;
    }

    /** An unreliable-datagram send's remote Q_Key as posted (top bit set: the sending QP's own). */
    default int remoteQkey() {
        return 0;
    }
}
