package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Objects;

/**
 * A reusable work request ({@code struct ib_send_wr} / {@code ib_recv_wr}): a flyweight the caller
 * fills, posts and may refill at once, since posting copies it into the queue. Requests chain
 * through {@link #next(WorkRequest)} so that one post submits several. Allocation happens only in
 * the constructor (the SGE arrays); {@link #reset()} makes it blank again.
 */
public final class WorkRequest {
    private final long[] sgeAddress;
    private final long[] sgeLength;
    private final int[] sgeLkey;
    private int numSge;
    private long wrId;
    private Opcode opcode = Opcode.SEND;
    private boolean signaled;
    private boolean solicited;
    private long remoteAddress;
    private int rkey;
    private int immData;
    private int invalidateRkey;
    private long compareAdd;
    private long swap;
    private MemoryRegion regMr;
    private int regKey;
    private int regAccess;
    private WorkRequest next;
    private MemorySegment inlinePayload;
    private long inlineLength;
    private MemoryWindow bindMw;
    private long bindLength;
    private AddressHandle ah;
    private int remoteQpn;
    private int remoteQkey;

    /** A request with room for {@code maxSge} scatter/gather entries. */
    public WorkRequest(int maxSge) {
        if (maxSge < 1) {
            throw new RdmaException(Errno.EINVAL, "WorkRequest: maxSge " + maxSge + " must be at least 1");
        }
        sgeAddress = new long[maxSge];
        sgeLength = new long[maxSge];
        sgeLkey = new int[maxSge];
    }

    /** Clears every field (keeps the SGE arrays). */
    public WorkRequest reset() {
        numSge = 0;
        wrId = 0;
        opcode = Opcode.SEND;
        signaled = false;
        solicited = false;
        remoteAddress = 0;
        rkey = 0;
        immData = 0;
        invalidateRkey = 0;
        compareAdd = 0;
        swap = 0;
        regMr = null;
        regKey = 0;
        regAccess = 0;
        next = null;
        inlinePayload = null;
        inlineLength = 0;
        bindMw = null;
        bindLength = 0;
        ah = null;
        remoteQpn = 0;
        remoteQkey = 0;
        return this;
    }

    /** The caller's id, returned in the completion. */
    public WorkRequest wrId(long id) {
        this.wrId = id;
        return this;
    }

    /** The operation (send queue only; receives ignore it). */
    public WorkRequest opcode(Opcode op) {
        this.opcode = Objects.requireNonNull(op, "opcode");
        return this;
    }

    /**
     * Marks a SEND, SEND_WITH_IMM, SEND_WITH_INV or WRITE_WITH_IMM solicited ({@code IBV_SEND_SOLICITED}):
     * the receive it consumes raises the event of a CQ armed for solicited completions only
     * ({@link CompletionQueue#requestNotify(boolean)}). Other opcodes ignore it.
     */
    public WorkRequest solicited(boolean s) {
        this.solicited = s;
        return this;
    }

    /**
     * Sends {@code payload}'s bytes inline ({@code IBV_SEND_INLINE}): they are copied into the send
     * queue when the request is posted, so the payload may be reused or freed as soon as
     * {@code postSend} returns, and it needs no registration and no lkey (any segment this thread
     * may read, heap ones too). For SEND, SEND_WITH_IMM, SEND_WITH_INV, RDMA_WRITE and
     * RDMA_WRITE_WITH_IMM, with no SGEs, of at most the QP's {@link QpInitAttributes#maxInlineData(int)}
     * bytes; null: not inline.
     */
    public WorkRequest inline(MemorySegment payload) {
        this.inlinePayload = payload;
        this.inlineLength = payload == null ? 0 : payload.byteSize();
        return this;
    }

    /**
     * As {@link #inline(MemorySegment)}, with the first {@code length} bytes of {@code payload} (no
     * slice to make on a hot path). A length outside [0, payload size] is {@code EINVAL} at post.
     */
    public WorkRequest inline(MemorySegment payload, long length) {
        this.inlinePayload = payload;
        this.inlineLength = payload == null ? 0 : length;
        return this;
    }

    /** How many of {@link #inlinePayload()}'s bytes the request carries (0 when not inline). */
    public long inlineLength() {
        return inlineLength;
    }

    /** The inline payload, or null ({@link #inline(MemorySegment)}). */
    public MemorySegment inlinePayload() {
        return inlinePayload;
    }

    /** Whether the request is marked solicited. */
    public boolean solicited() {
        return solicited;
    }

    /** Whether a successful completion produces a CQE (QPs created with signalAll always do). */
    public WorkRequest signaled(boolean s) {
        this.signaled = s;
        return this;
    }

    /**
     * Appends an SGE.
     *
     * @throws RdmaException {@link Errno#EINVAL} when the request has no room for another
     */
    public WorkRequest addSge(long address, long length, int lkey) {
        if (numSge == sgeAddress.length) {
            throw new RdmaException(Errno.EINVAL, "WorkRequest: no room for SGE " + numSge + " (maxSge "
                    + sgeAddress.length + ")");
        }
        sgeAddress[numSge] = address;
        sgeLength[numSge] = length;
        sgeLkey[numSge] = lkey;
        numSge++;
        return this;
    }

    /**
     * Appends entries {@code [from, from + n)} of a scatter list as SGEs keyed with {@code lkey}, the
     * first shifted {@code shift} bytes into its entry. One bulk copy, no per-entry checks beyond the
     * list's: the caller knows the entries are valid (a list rejects empty and wrapping ones).
     *
     * @return the bytes the added SGEs cover
     * @throws RdmaException {@link Errno#EINVAL} when the request has no room for them, the entries are
     *                       out of the list's bounds, or the shift is not inside the first entry
     */
    public long addSges(ScatterList sg, int from, int n, long shift, int lkey) {
        if (n > sgeAddress.length - numSge) {
            throw new RdmaException(Errno.EINVAL, "WorkRequest: no room for " + n + " more SGEs (maxSge "
                    + sgeAddress.length + ", " + numSge + " used)");
        }
        if (n == 0) {
            return 0;
        }
        if (shift < 0 || shift >= sg.length(from)) {
            throw new RdmaException(Errno.EINVAL, "WorkRequest: shift " + shift + " is not inside entry " + from);
        }
        sg.copyTo(from, n, sgeAddress, sgeLength, numSge);
        sgeAddress[numSge] += shift;
        sgeLength[numSge] -= shift;
        Arrays.fill(sgeLkey, numSge, numSge + n, lkey);
        long bytes = 0;
        for (int i = numSge; i < numSge + n; i++) {
            bytes += sgeLength[i];
        }
        numSge += n;
        return bytes;
    }

    /** Removes every SGE. */
    public WorkRequest clearSges() {
        numSge = 0;
        return this;
    }

    /** The remote side of RDMA READ/WRITE. */
    public WorkRequest remote(long address, int rkey) {
        this.remoteAddress = address;
        this.rkey = rkey;
        return this;
    }

    /**
     * The destination of an unreliable-datagram send ({@code wr.ud}): the address handle, the remote
     * QP number ({@link AhAttributes#MULTICAST_QPN} for a multicast group) and the remote Q_Key. A
     * Q_Key with its top bit set means the sending QP's own ({@link QueuePair#qkey()}), as in verbs.
     * Only a UD QP's sends carry one; null clears it.
     */
    public WorkRequest ud(AddressHandle ah, int remoteQpn, int remoteQkey) {
        this.ah = ah;
        this.remoteQpn = remoteQpn;
        this.remoteQkey = remoteQkey;
        return this;
    }

    /** The datagram's address handle ({@link #ud}), or null. */
    public AddressHandle ah() {
        return ah;
    }

    /** The datagram's remote QP number ({@link #ud}). */
    public int remoteQpn() {
        return remoteQpn;
    }

    /** The datagram's remote Q_Key ({@link #ud}). */
    public int remoteQkey() {
        return remoteQkey;
    }

    /**
     * An atomic's operands ({@code wr.atomic.compare_add}, {@code wr.atomic.swap}): for
     * ATOMIC_CMP_AND_SWP the value to compare with and the one to store; for ATOMIC_FETCH_AND_ADD
     * the value to add ({@code swap} unused). The target is {@link #remote(long, int)}.
     */
    public WorkRequest atomic(long compareAdd, long swap) {
        this.compareAdd = compareAdd;
        this.swap = swap;
        return this;
    }

    /** An atomic's compare value (CMP_AND_SWP) or addend (FETCH_AND_ADD). */
    public long compareAdd() {
        return compareAdd;
    }

    /** A CMP_AND_SWP's value to store. */
    public long swap() {
        return swap;
    }

    /** The immediate of RDMA_WRITE_WITH_IMM and SEND_WITH_IMM (delivered in the peer's receive completion). */
    public WorkRequest immData(int imm) {
        this.immData = imm;
        return this;
    }

    /** The key SEND_WITH_INV invalidates at the peer, or LOCAL_INV invalidates here. */
    public WorkRequest invalidateRkey(int key) {
        this.invalidateRkey = key;
        return this;
    }

    /**
     * Makes this a REG_MR of {@code mr}'s current mapping ({@link MemoryRegion#mapSg}) with the given
     * key (its low byte becomes the MR's generation) and rights.
     */
    public WorkRequest regMr(MemoryRegion mr, int key, int accessMask) {
        this.opcode = Opcode.REG_MR;
        this.regMr = Objects.requireNonNull(mr, "mr");
        this.regKey = key;
        this.regAccess = accessMask;
        return this;
    }

    /**
     * Makes this a REG_MR_INTEGRITY of an integrity MR's current mapping ({@link MemoryRegion#mapSgPi})
     * with the given key and rights.
     */
    public WorkRequest regMrIntegrity(MemoryRegion mr, int key, int accessMask) {
        regMr(mr, key, accessMask);
        this.opcode = Opcode.REG_MR_INTEGRITY;
        return this;
    }

    /**
     * Makes this a BIND_MW ({@code IBV_WR_BIND_MW}) of type-2 window {@code mw} to
     * {@code [address, address + length)} of {@code mr} with remote {@code rights}, under
     * {@code rkey}: the window's key with a new key byte ({@link MemoryRegion#incRkey(int)} of
     * {@link MemoryWindow#rkey()}, as {@code ibv_inc_rkey}). It executes in order with the QP's other
     * requests; once it completed the window grants the rights under that key, until a LOCAL_INV of
     * it or a peer's SEND_WITH_INV invalidates it. Post on a QP of the window's PD.
     *
     * <p>{@code rights}: any of REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC; also LOCAL_WRITE, accepted
     * as rxe and mlx5 accept it and ignored (a window grants no local access), and ZERO_BASED (the
     * window is then addressed by offset from its first byte, as {@code IBV_ACCESS_ZERO_BASED}).
     */
    public WorkRequest bindMw(MemoryWindow mw, int rkey, MemoryRegion mr, long address, long length, Access... rights) {
        this.opcode = Opcode.BIND_MW;
        this.bindMw = mw;
        this.regMr = mr;
        this.regKey = rkey;
        this.regAccess = Access.mask(rights);
        this.remoteAddress = address;
        this.bindLength = length;
        return this;
    }

    /** A BIND_MW's window, or null. */
    public MemoryWindow bindMw() {
        return bindMw;
    }

    /** A BIND_MW's length. */
    public long bindLength() {
        return bindLength;
    }

    /** Chains {@code wr} after this one (null ends the chain). */
    public WorkRequest next(WorkRequest wr) {
        this.next = wr;
        return this;
    }

    /** The next request of the chain, or null. */
    public WorkRequest next() {
        return next;
    }

    /** The caller's id. */
    public long wrId() {
        return wrId;
    }

    /** The operation. */
    public Opcode opcode() {
        return opcode;
    }

    /** Whether the request asks for a completion on success. */
    public boolean signaled() {
        return signaled;
    }

    /** SGEs in use. */
    public int numSge() {
        return numSge;
    }

    /** SGEs this request can hold. */
    public int maxSge() {
        return sgeAddress.length;
    }

    /** The address of SGE {@code i}. */
    public long sgeAddress(int i) {
        return sgeAddress[checkSge(i)];
    }

    /** The length of SGE {@code i}. */
    public long sgeLength(int i) {
        return sgeLength[checkSge(i)];
    }

    /** The lkey of SGE {@code i}. */
    public int sgeLkey(int i) {
        return sgeLkey[checkSge(i)];
    }

    private int checkSge(int i) {
        if (i < 0 || i >= numSge) {
            throw new RdmaException(Errno.EINVAL, "WorkRequest: SGE " + i + " is not in [0, " + numSge + ")");
        }
        return i;
    }

    /** The remote address of RDMA READ/WRITE. */
    public long remoteAddress() {
        return remoteAddress;
    }

    /** The rkey of RDMA READ/WRITE. */
    public int rkey() {
        return rkey;
    }

    /** The immediate. */
    public int immData() {
        return immData;
    }

    /** The key to invalidate (SEND_WITH_INV, LOCAL_INV). */
    public int invalidateRkey() {
        return invalidateRkey;
    }

    /** The MR of a REG_MR. */
    public MemoryRegion regMr() {
        return regMr;
    }

    /** The key of a REG_MR. */
    public int regKey() {
        return regKey;
    }

    /** The rights of a REG_MR. */
    public int regAccess() {
        return regAccess;
    }

    /** Sum of the SGE lengths. */
    public long totalLength() {
        long t = 0;
        for (int i = 0; i < numSge; i++) {
            t += sgeLength[i];
        }
        return t;
    }
}
