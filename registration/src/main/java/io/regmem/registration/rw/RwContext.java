package io.regmem.registration.rw;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.MrPool;
import io.regmem.registration.Opcode;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.SignatureAttrs;
import io.regmem.registration.SignatureError;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.MemorySegment;

/**
 * An RDMA read/write context ({@code struct rdma_rw_ctx}): turns a scatter list plus a remote
 * (address, rkey) into a chain of work requests, posts it, and undoes exactly what it did.
 *
 * <pre>{@code
 * RwContext ctx = new RwContext();                 // reusable: init, post, destroy, init again
 * int wqes = ctx.init(qp, 1, sg, sg.count(), 0, remoteAddr, rkey, DmaDirection.TO_DEVICE);
 * ctx.post(qp, 1, wrId);                           // RDMA WRITE; the last WR is signaled with wrId
 * ... poll the send CQ for wrId ...
 * ctx.destroy(qp, 1, sg, sg.count(), DmaDirection.TO_DEVICE);
 * }</pre>
 *
 * <h2>Paths</h2>
 * {@link #init} chooses, as the kernel's {@code rdma_rw_ctx_init} does:
 * <ul>
 * <li><b>MR path</b> when the I/O needs registration ({@link RdmaRw#ioNeedsMr}): the entries are
 * mapped into fast-reg MRs borrowed from the QP's pool ({@link QueuePair#rdmaMrs()}), at most
 * {@link RdmaRw#frPageListLen} pages each; per MR a LOCAL_INV (only if its previous registration
 * was left valid), a REG_MR and the operation with one SGE over the MR (WRITE, READ, or
 * READ_WITH_INV on iWARP). An empty pool fails with EAGAIN, except that a READ which needed
 * registration only because it has more than {@code maxSglRd} entries falls back to the multi-SGE
 * path.</li>
 * <li><b>Multi-SGE path</b> for more than one entry: WRs of at most the direction's SGE limit
 * ({@link QueuePair#maxSendSge()} for WRITE, {@link QueuePair#maxReadSge()} for READ), each SGE
 * keyed with the PD's local DMA lkey, the remote address advancing by the bytes of earlier WRs.</li>
 * <li><b>One WR with one SGE</b> for a single entry.</li>
 * </ul>
 * Every entry must lie in memory DMA-mapped on the QP's device ({@link RdmaDevice#dmaMap}).
 *
 * <h2>Keys and invalidation</h2>
 * New MR keys are chosen when the chain is built ({@link #wrs}/{@link #post}), not at init: each
 * MR's key byte advances by exactly one per post, and the MR is marked as needing a LOCAL_INV
 * before its next registration unless the operation invalidated it (READ_WITH_INV). A context that
 * is initialized but never posted leaves its MRs' keys as they were.
 *
 * <h2>Lifecycle</h2>
 * FREE (new or destroyed) → {@link #init} → READY → {@link #wrs}/{@link #post} (once) → POSTED →
 * {@link #destroy} → FREE. The context records what init was given (QP, list identity, count,
 * direction, variant) and {@link #destroy} refuses anything else, so a destroy can never return
 * another context's MRs or the wrong number of them. Every refusal is an {@link RdmaException}
 * and changes nothing. Not thread-safe: one owner at a time, like the I/O it describes.
 *
 * <h2>Allocation</h2>
 * The WR and MR arrays grow to the largest transfer seen and are reused; once grown, init, wrs,
 * post and destroy allocate nothing.
 */
public final class RwContext {
    /** How the context moves its bytes. */
    public enum Variant {
        /** One WR, one SGE. */
        SINGLE,
        /** WRs of several SGEs keyed with the local DMA lkey. */
        MULTI_SGE,
        /** Fast-reg MRs: [LOCAL_INV], REG_MR, operation per MR. */
        MR,
        /** One integrity MR: [LOCAL_INV], REG_MR_INTEGRITY, operation; T10-PI on the way. */
        SIGNATURE
    }

    /** Which init made the context, so that only the matching destroy releases it. */
    private enum Kind { PLAIN, BVEC, SIGNATURE }

    private enum State { FREE, READY, POSTED }

    private State state = State.FREE;
    private final RwChain chain = new RwChain();
    private Kind kind;
    private QueuePair qp;
    private Object list; // the scatter list or bvec array init was given (identity)
    private int count;
    private Object protList; // signature contexts: the protection list (identity) and count
    private int protCount;
    private DmaDirection dir;
    /** The entries of a bvec context, built without the caller making a scatter list. */
    private final ScatterList bvecList = new ScatterList(0, false, Integer.MAX_VALUE);

    /** A free context; its arrays grow on first use. */
    public RwContext() {
    }

    // ---- init ------------------------------------------------------------------------------------

    /**
     * Builds the work requests for moving {@code [offset, total)} of the first {@code sgCount}
     * entries of {@code sg} to or from the peer's {@code remoteAddr} under {@code rkey}
     * ({@code rdma_rw_ctx_init}).
     *
     * @param dir {@link DmaDirection#TO_DEVICE} for RDMA WRITE, {@link DmaDirection#FROM_DEVICE} for RDMA READ
     * @return the number of send-queue entries the context will post
     * @throws RdmaException {@link Errno#EINVAL}: another direction, a port other than 1, a count
     *                       outside [1, sg.count()], an offset outside [0, total), more than 2^32 - 1
     *                       bytes, a remote range that wraps, an MR that cannot map its entries (an
     *                       unaligned interior entry, an entry over more pages than the MR has), or a
     *                       context not yet destroyed; {@link Errno#EIO} for an entry not DMA-mapped on
     *                       the QP's device; {@link Errno#EAGAIN} when the MR path is needed and the
     *                       QP's pool is empty (no fallback applies); {@link Errno#EBADF} for a
     *                       destroyed QP. Nothing is held after a failure.
     */
    public int init(QueuePair qp, int port, ScatterList sg, int sgCount, long offset, long remoteAddr, int rkey,
                    DmaDirection dir) {
        checkFree("init");
        RwArgs.checkArgs(qp, port, sg, dir, "init");
        if (sgCount < 1 || sgCount > sg.count()) {
            throw new RdmaException(Errno.EINVAL, "RwContext.init: sgCount " + sgCount + " is not in [1, "
                    + sg.count() + "] (the list's entries)");
        }
        return build(qp, sg, sgCount, offset, remoteAddr, rkey, dir, Kind.PLAIN, sg);
    }

    /**
     * {@link #init} from vectors of (buffer, offset, length) without a scatter list
     * ({@code rdma_rw_ctx_init_bvec}); release it with {@link #destroyBvec}. Vector i is
     * {@code [offsets[i], offsets[i] + lengths[i])} of {@code buffers[i]}. The soft device has no
     * IOMMU, so the contiguous-IOVA step always declines and the paths are those of {@link #init}
     * with offset 0.
     *
     * @throws RdmaException {@link Errno#EINVAL} for no vectors, a vector outside its buffer, a heap
     *                       buffer, arrays shorter than {@code count}; otherwise as {@link #init}
     */
    public int initBvec(QueuePair qp, int port, MemorySegment[] buffers, long[] offsets, long[] lengths, int count,
                        long remoteAddr, int rkey, DmaDirection dir) {
        checkFree("initBvec");
        RwArgs.checkArgs(qp, port, buffers, dir, "initBvec");
        if (offsets == null || lengths == null || count < 1 || count > buffers.length || count > offsets.length
                || count > lengths.length) {
            throw new RdmaException(Errno.EINVAL, "RwContext.initBvec: count " + count
                    + " must be at least 1 and within the buffer, offset and length arrays");
        }
        bvecList.clear();
        for (int i = 0; i < count; i++) {
            MemorySegment b = buffers[i];
            long off = offsets[i];
            long len = lengths[i];
            if (b == null || !b.isNative() || off < 0 || len <= 0 || off > b.byteSize() - len) {
                bvecList.clear();
                throw new RdmaException(Errno.EINVAL, "RwContext.initBvec: vector " + i + " [" + off + ", +" + len
                        + ") is not inside native buffer " + b);
            }
            bvecList.add(b.address() + off, len);
        }
        try {
            return build(qp, bvecList, count, 0, remoteAddr, rkey, dir, Kind.BVEC, buffers);
        } catch (RuntimeException e) {
            bvecList.clear();
            throw e;
        }
    }

    private int build(QueuePair qp, ScatterList sg, int sgCount, long offset, long remoteAddr, int rkey,
                      DmaDirection dir, Kind madeBy, Object identity) {
        RdmaDevice device = qp.device();
        RwArgs.checkRange(sg, sgCount, offset, remoteAddr);
        RwArgs.checkMapped(device, sg, sgCount); // "DMA-map": every entry reachable with the local DMA key
        // Skip whole entries covered by the offset.
        int first = 0;
        long off = offset;
        while (off >= sg.length(first)) {
            off -= sg.length(first);
            first++;
        }
        int m = sgCount - first;
        boolean iWarp = device.attributes().iWarp();
        boolean read = dir == DmaDirection.FROM_DEVICE;
        chain.op = read ? Opcode.RDMA_READ : Opcode.RDMA_WRITE;
        int result = -1;
        if (RdmaRw.ioNeedsMr(device, 1, dir, m)) {
            result = chain.initMrs(qp, sg, first, m, off, remoteAddr, rkey, read, iWarp);
            if (result < 0 && (iWarp || device.rwForceMr())) {
                throw new RdmaException(Errno.EAGAIN, "RwContext: " + qp.rdmaMrs() + " has no free MR for "
                        + (iWarp ? "an iWARP READ" : "a forced-MR transfer") + " of " + m + " entries; "
                        + "destroy finished contexts or raise maxRdmaCtxs");
            }
            // else: the maxSglRd case falls back to plain SGEs
        }
        if (result < 0) {
            result = m > 1 ? chain.initMultiSge(qp, sg, first, m, off, remoteAddr, rkey, read)
                    : chain.initSingle(qp, sg, first, off, remoteAddr, rkey);
        }
        record(qp, identity, sgCount, null, 0, dir, madeBy);
        return result;
    }

    private void record(QueuePair qp, Object identity, int sgCount, Object prot, int protN, DmaDirection dir, Kind madeBy) {
        this.qp = qp;
        this.list = identity;
        this.count = sgCount;
        this.protList = prot;
        this.protCount = protN;
        this.dir = dir;
        this.kind = madeBy;
        this.state = State.READY;
    }

    /**
     * A context whose data is protected by T10-PI on the way ({@code rdma_rw_ctx_signature_init}):
     * one integrity MR from the QP's signature pool maps the data list and, when the memory domain
     * is T10-DIF, the protection list; the chain is [LOCAL_INV], REG_MR_INTEGRITY and the operation,
     * whose remote side is the wire image (data with an 8-byte tuple after each block when the wire
     * domain is T10-DIF). After the completion, {@link #checkMrStatus()} reports the first block
     * whose tuple did not match; release with {@link #destroySignature}.
     *
     * @return 2, or 3 when the MR needs a LOCAL_INV first
     * @throws RdmaException {@link Errno#EINVAL} for more than {@link RdmaRw#frPageListLen} entries in
     *                       either list, data that is not whole blocks, a protection list that does not
     *                       match the memory domain, a QP created without integrity, or as {@link #init};
     *                       {@link Errno#EAGAIN} when every signature MR is held; {@link Errno#EIO} for
     *                       memory not DMA-mapped
     */
    public int initSignature(QueuePair qp, int port, ScatterList sg, int sgCount, ScatterList protSg, int protSgCount,
                             SignatureAttrs attrs, long remoteAddr, int rkey, DmaDirection dir) {
        checkFree("initSignature");
        RwArgs.checkArgs(qp, port, sg, dir, "initSignature");
        RdmaDevice device = qp.device();
        int pages = RdmaRw.frPageListLen(device, true);
        if (attrs == null || sgCount < 1 || sgCount > sg.count() || sgCount > pages || protSgCount < 0
                || protSgCount > pages || (protSg == null) != (protSgCount == 0)
                || (protSg != null && protSgCount > protSg.count())) {
            throw new RdmaException(Errno.EINVAL, "RwContext.initSignature: " + sgCount + " data and " + protSgCount
                    + " protection entries (at most " + pages + " each, within their lists) with " + attrs);
        }
        MrPool sig = qp.sigMrs();
        if (sig.size() == 0) {
            throw new RdmaException(Errno.EINVAL, "RwContext.initSignature: " + qp + " was created without integrity "
                    + "(QpInitAttributes.integrity(true))");
        }
        RwArgs.checkMapped(device, sg, sgCount);
        if (protSg != null) {
            RwArgs.checkMapped(device, protSg, protSgCount);
        }
        int slot = sig.get();
        if (slot < 0) {
            throw new RdmaException(Errno.EAGAIN, "RwContext.initSignature: " + sig + " has no free signature MR");
        }
        MemoryRegion mr = sig.mr(slot);
        try {
            mr.mapSgPi(sg, sgCount, protSg, protSgCount, attrs, device.attributes().pageSize());
            long wire = attrs.wireBytes(mr.length());
            if (wire > RdmaRw.U32_MAX || (Long.compareUnsigned(remoteAddr + wire, remoteAddr) < 0 && remoteAddr + wire != 0)) {
                throw new RdmaException(Errno.EINVAL, "RwContext.initSignature: " + wire + " wire bytes at 0x"
                        + Long.toHexString(remoteAddr) + " exceed 2^32 - 1 or wrap");
            }
            int w = chain.initSignature(sig, slot, wire, remoteAddr, rkey, dir == DmaDirection.FROM_DEVICE,
                    device.attributes().iWarp());
            record(qp, sg, sgCount, protSg, protSgCount, dir, Kind.SIGNATURE);
            return w;
        } catch (RuntimeException e) {
            sig.put(slot);
            throw e;
        }
    }

    /**
     * The first T10-PI mismatch the signature context's transfer found, or null if every checked
     * block was intact ({@code ib_check_mr_status} on the context's integrity MR). Call it after the
     * completion and before {@link #destroySignature}; reading clears it.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a context that is not a live signature context
     */
    public SignatureError checkMrStatus() {
        if (state == State.FREE || chain.variant != Variant.SIGNATURE) {
            throw new RdmaException(Errno.EINVAL, "RwContext.checkMrStatus: not a live signature context");
        }
        return chain.pool().mr(chain.mrSlot(0)).checkSignatureStatus();
    }

    // ---- wrs / post ------------------------------------------------------------------------------

    /**
     * Builds the chain ({@code rdma_rw_ctx_wrs} without a {@code chain_wr}): the last WR is signaled
     * and carries {@code wrId}; the earlier ones are unsignaled (in-order completion makes one CQE
     * enough) and carry it too, so a flushed one is recognizable. MR keys advance now.
     *
     * @return the first WR of the chain, for the caller's {@link QueuePair#postSend}
     * @throws RdmaException {@link Errno#EBADF} if not initialized; {@link Errno#EINVAL} if the chain was already built
     */
    public WorkRequest wrs(long wrId) {
        checkReady("wrs");
        return link(wrId, null);
    }

    /**
     * Builds the chain in front of {@code chainWr} ({@code rdma_rw_ctx_wrs} with a {@code chain_wr}):
     * none of the context's WRs is signaled; {@code chainWr} carries the completion.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a null {@code chainWr} (there would be no
     *                       completion at all) or a chain already built; {@link Errno#EBADF} if not initialized
     */
    public WorkRequest wrs(WorkRequest chainWr) {
        checkReady("wrs");
        if (chainWr == null) {
            throw new RdmaException(Errno.EINVAL, "RwContext.wrs: neither a chain WR nor a completion id; use wrs(wrId)");
        }
        return link(0, chainWr);
    }

    /**
     * Builds the chain and posts it ({@code rdma_rw_ctx_post}), the last WR signaled with {@code wrId}.
     * If posting fails, the keys are put back and the context may be posted again.
     *
     * @throws RdmaException as {@link #wrs(long)}; {@link Errno#EINVAL} for another QP or port than
     *                       init's; whatever {@link QueuePair#postSend} throws
     */
    public void post(QueuePair qp, int port, long wrId) {
        checkReady("post");
        checkQp(qp, port, "post");
        postChain(link(wrId, null));
    }

    /** {@link #post(QueuePair, int, long)} in front of {@code chainWr}, which carries the completion. */
    public void post(QueuePair qp, int port, WorkRequest chainWr) {
        checkReady("post");
        checkQp(qp, port, "post");
        if (chainWr == null) {
            throw new RdmaException(Errno.EINVAL, "RwContext.post: neither a chain WR nor a completion id");
        }
        postChain(link(0, chainWr));
    }

    private WorkRequest link(long wrId, WorkRequest chainWr) {
        WorkRequest first = chain.link(wrId, chainWr);
        state = State.POSTED;
        return first;
    }

    private void postChain(WorkRequest first) {
        try {
            qp.postSend(first);
        } catch (RuntimeException e) {
            chain.restoreKeys(); // nothing was posted: the MRs keep their keys
            state = State.READY;
            throw e;
        }
    }

    // ---- destroy ---------------------------------------------------------------------------------

    /**
     * Gives the MRs back to the QP's pool and ends the mapping ({@code rdma_rw_ctx_destroy}). The
     * arguments must be those init was given: the same QP and port, the same list (identity), the
     * same {@code sgCount} (not the number of entries left after the offset) and direction.
     *
     * @throws RdmaException {@link Errno#EBADF} for a context not initialized or already destroyed;
     *                       {@link Errno#EINVAL} for any mismatch, or a bvec context (use
     *                       {@link #destroyBvec}). Nothing changes then.
     */
    public void destroy(QueuePair qp, int port, ScatterList sg, int sgCount, DmaDirection dir) {
        checkDestroy(qp, port, sg, sgCount, null, 0, dir, Kind.PLAIN, "destroy");
        release();
    }

    /**
     * {@link #destroy} for a context made by {@link #initSignature}
     * ({@code rdma_rw_ctx_destroy_signature}): both lists and counts must be init's.
     */
    public void destroySignature(QueuePair qp, int port, ScatterList sg, int sgCount, ScatterList protSg,
                                 int protSgCount, DmaDirection dir) {
        checkDestroy(qp, port, sg, sgCount, protSg, protSgCount, dir, Kind.SIGNATURE, "destroySignature");
        release();
    }

    /** {@link #destroy} for a context made by {@link #initBvec} ({@code rdma_rw_ctx_destroy_bvec}). */
    public void destroyBvec(QueuePair qp, int port, MemorySegment[] buffers, int count, DmaDirection dir) {
        checkDestroy(qp, port, buffers, count, null, 0, dir, Kind.BVEC, "destroyBvec");
        bvecList.clear();
        release();
    }

    private void checkDestroy(QueuePair qp, int port, Object list, int n, Object prot, int protN, DmaDirection d,
                              Kind as, String who) {
        if (state == State.FREE) {
            throw new RdmaException(Errno.EBADF, "RwContext." + who + ": not initialized (or destroyed already)");
        }
        if (kind != as) {
            throw new RdmaException(Errno.EINVAL, "RwContext." + who + ": this context was made by "
                    + switch (kind) {
                        case PLAIN -> "init; use destroy";
                        case BVEC -> "initBvec; use destroyBvec";
                        case SIGNATURE -> "initSignature; use destroySignature";
                    });
        }
        checkQp(qp, port, who);
        if (list != this.list || n != count || d != dir || prot != protList || protN != protCount) {
            throw new RdmaException(Errno.EINVAL, "RwContext." + who + ": (list " + identity(list) + ", count " + n + ", "
                    + d + ") is not what init was given (list " + identity(this.list) + ", count " + count + ", " + dir + ")");
        }
    }

    private static String identity(Object o) {
        return o == null ? "null" : o.getClass().getSimpleName() + "@" + Integer.toHexString(System.identityHashCode(o));
    }

    private void release() {
        chain.release();
        qp = null;
        list = null;
        protList = null;
        state = State.FREE;
    }

    // ---- checks and storage ----------------------------------------------------------------------

    private void checkFree(String who) {
        if (state != State.FREE) {
            throw new RdmaException(Errno.EINVAL, "RwContext." + who + ": the context is in use (" + state
                    + "); destroy it first");
        }
    }

    private void checkReady(String who) {
        if (state == State.FREE) {
            throw new RdmaException(Errno.EBADF, "RwContext." + who + ": not initialized (or destroyed)");
        }
        if (state == State.POSTED) {
            throw new RdmaException(Errno.EINVAL, "RwContext." + who + ": the chain was built already; a context is "
                    + "posted once per init");
        }
    }

    private void checkQp(QueuePair qp, int port, String who) {
        if (qp != this.qp || port != 1) {
            throw new RdmaException(Errno.EINVAL, "RwContext." + who + ": " + qp + " port " + port
                    + " is not the QP and port init was given (" + this.qp + " port 1)");
        }
    }

    // ---- inspection: what the context holds (diagnostics, and what the worked examples check) ----

    /** The path init chose, or null when free. */
    public Variant variant() {
        return state == State.FREE ? null : chain.variant;
    }

    /** True between init and destroy. */
    public boolean isInitialized() {
        return state != State.FREE;
    }

    /** True once the chain was built (wrs or post). */
    public boolean isPosted() {
        return state == State.POSTED;
    }

    /** The number of WRs of the chain (init's return value). */
    public int wrCount() {
        return state == State.FREE ? 0 : chain.nrWrs;
    }

    /**
     * WR {@code i} of the chain: the context's own request, to read (a changed one is still checked
     * by the QP when posted, but no longer matches the MRs the context holds).
     */
    public WorkRequest wr(int i) {
        if (state == State.FREE || i < 0 || i >= chain.nrWrs) {
            throw new RdmaException(Errno.EINVAL, "RwContext: WR " + i + " is not in [0, " + wrCount() + ")");
        }
        return chain.wrAt(i);
    }

    /** MRs the context holds. */
    public int mrCount() {
        return state == State.FREE ? 0 : chain.nrMrs;
    }

    /** The pool slot of held MR {@code i}. */
    public int mrSlot(int i) {
        if (i < 0 || i >= mrCount()) {
            throw new RdmaException(Errno.EINVAL, "RwContext: MR " + i + " is not in [0, " + mrCount() + ")");
        }
        return chain.mrSlot(i);
    }

    @Override
    public String toString() {
        return "RwContext[" + state + (state == State.FREE ? "" : ", " + chain.variant + ", " + chain.nrWrs + " WRs, "
                + chain.nrMrs + " MRs, " + dir) + "]";
    }
}
