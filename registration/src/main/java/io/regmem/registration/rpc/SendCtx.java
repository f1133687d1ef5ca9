package io.regmem.registration.rpc;

/**
 * One slot of a {@link SendCtxRing} ({@code struct rpcrdma_sendctx}): the SGEs of one Send, the
 * request it sends for, and the work-request id of its current hand-out. A slot is handed out by
 * {@link SendCtxRing#getLocked()} and released when a Send completion sweeps past it (or
 * {@link SendCtxRing#ungetLocked} takes it back unposted); only then may its page mappings go and
 * its request complete.
 *
 * <p>{@link #wrId()} is the hand-out's sequence number in the ring: a completion carrying an earlier
 * one is stale and is rejected by {@link SendCtxRing#complete(long)}, never applied to the slot's
 * next user.
 */
public final class SendCtx {
    final int index;
    /** The sequence number of the slot's current hand-out (set by the consumer); 0 before the first. */
    long wrId;
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

    /**
     * The work-request id for this hand-out: its sequence number in the ring (1 for the first
     * hand-out, counting on; an unget gives the number back with the slot). Bits 62 and 63 are clear.
     */
    public long wrId() {
        return wrId;
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
        return "SendCtx[" + index + ", wrId " + wrId + ", " + numSge + " SGEs]";
    }
}
