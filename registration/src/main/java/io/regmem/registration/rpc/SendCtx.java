package io.regmem.registration.rpc;

/**
 * One slot of a {@link SendCtxRing} ({@code struct rpcrdma_sendctx}): the SGEs of one Send, the
 * request it sends for, and its generation. A slot is handed out by {@link SendCtxRing#getLocked()}
 * and released when a Send completion sweeps past it (or {@link SendCtxRing#ungetLocked} takes it
 * back unposted); only then may its page mappings go and its request complete.
 *
 * <p>{@link #wrId()} names the slot and its current generation: a completion carrying an older
 * generation is stale and is rejected by {@link SendCtxRing#complete(long)}, never applied to the
 * slot's next user.
 */
public final class SendCtx {
    final int index;
    /** Bumped each time the slot is handed out (consumer), read by the producer after an acquire of head. */
    int generation;
    /** The request this Send belongs to (consumer sets it; the release hook reads it). */
    Object owner;
    final long[] sgeAddress;
    final long[] sgeLength;
    final int[] sgeLkey;
    int numSge;
    /** True if the Send holds a reference on its request that the slot's release drops. */
    boolean holdsRef;

    SendCtx(int index, int maxSge) {
        this.index = index;
        this.sgeAddress = new long[maxSge];
        this.sgeLength = new long[maxSge];
        this.sgeLkey = new int[maxSge];
    }

    /** The slot's position in the ring. */
    public int index() {
        return index;
    }

    /** The generation of the current hand-out. */
    public int generation() {
        return generation;
    }

    /** The work-request id for this hand-out: generation in the high 32 bits, slot index in the low. */
    public long wrId() {
        return ((long) generation << 32) | index;
    }

    /** The request this Send belongs to, or null. */
    public Object owner() {
        return owner;
    }

    /** Sets the request this Send belongs to. */
    public SendCtx owner(Object req) {
        this.owner = req;
        return this;
    }

    /** Whether the Send holds a reference on its request until the slot is released. */
    public boolean holdsRef() {
        return holdsRef;
    }

    /** SGEs in use. */
    public int numSge() {
        return numSge;
    }

    /** SGEs this slot can hold ({@code max_send_sge}). */
    public int maxSge() {
        return sgeAddress.length;
    }

    /** Appends an SGE; false if the slot is full. */
    public boolean addSge(long address, long length, int lkey) {
        if (numSge == sgeAddress.length) {
            return false;
        }
        sgeAddress[numSge] = address;
        sgeLength[numSge] = length;
        sgeLkey[numSge] = lkey;
        numSge++;
        return true;
    }

    /** SGE {@code i}'s address, length and key. */
    public long sgeAddress(int i) {
        return sgeAddress[i];
    }

    /** SGE {@code i}'s length. */
    public long sgeLength(int i) {
        return sgeLength[i];
    }

    /** SGE {@code i}'s key. */
    public int sgeLkey(int i) {
        return sgeLkey[i];
    }

    @Override
    public String toString() {
        return "SendCtx[" + index + ", gen " + generation + ", " + numSge + " SGEs]";
    }
}
