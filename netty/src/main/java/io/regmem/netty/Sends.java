package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.regmem.registration.Opcode;
import io.regmem.registration.WorkRequest;

/**
 * A connection's send queue: the SEND being gathered ({@link #begin}, {@link #piece}), the SENDs and
 * RDMA READs it has outstanding in the order they complete, and the buffers each SEND holds a
 * reference on until it completes. Its credits are the connection's. Event loop only.
 */
final class Sends {
    /** A READ's work-request id has this bit; its low bits are its chunk's id. */
    static final long READ = 1L << 30;
    private final Connection c;
    private final int slots;
    /** What each outstanding SEND holds a reference on (its SGEs' buffers), by send slot. */
    private final ByteBuf[][] held;
    private final int[] owners;
    /** The SEND being gathered: its buffers. */
    private final ByteBuf[] building = new ByteBuf[Connection.MAX_SGE + 1];
    private int buildingOwners;
    private int head;
    private int tail;
    /** SENDs and READs posted and not yet completed. */
    int outstanding;
    private final WorkRequest wr = new WorkRequest(Connection.MAX_SGE);

    Sends(Connection c, int slots) {
        this.c = c;
        this.slots = slots;
        this.held = new ByteBuf[slots][Connection.MAX_SGE + 1];
        this.owners = new int[slots];
    }

    /** True if a slot is free (for a SEND or an RDMA READ). */
    boolean hasSlot() {
        return outstanding < slots;
    }

    /** Starts gathering a SEND. */
    void begin() {
        wr.reset();
        buildingOwners = 0;
    }

    /** Adds {@code length} bytes at {@code address} to the SEND being gathered; it holds {@code owner}'s reference (once). */
    void piece(ByteBuf owner, long address, int length, int lkey) {
        wr.addSge(address, length, lkey);
        if (owner != null) {
            for (int k = 0; k < buildingOwners; k++) {
                if (building[k] == owner) {
                    return;
                }
            }
            building[buildingOwners++] = owner;
        }
    }

    /** Gives back the references of a SEND gathered and never posted. */
    void abandon() {
        for (int k = 0; k < buildingOwners; k++) {
            building[k].release();
            building[k] = null;
        }
        buildingOwners = 0;
    }

    /** SGEs in the SEND being gathered. */
    int pieces() {
        return wr.numSge();
    }

    /**
     * Posts the SEND gathered with {@code imm} as its immediate data; it holds its buffers until it
     * completes. If the post fails, they are given back before this throws.
     */
    void post(int imm) {
        wr.wrId(((long) c.slot << 32) | tail).opcode(Opcode.SEND_WITH_IMM).immData(imm).signaled(true);
        try {
            c.qp.postSend(wr);
        } catch (RuntimeException e) {
            abandon();
            throw e;
        }
        ByteBuf[] h = held[tail];
        for (int k = 0; k < buildingOwners; k++) {
            h[k] = building[k];
            building[k] = null;
        }
        owners[tail] = buildingOwners;
        buildingOwners = 0;
        tail = (tail + 1) % slots;
        outstanding++;
    }

    /** Posts an RDMA READ of {@code length} bytes at the peer's {@code address} ({@code rkey}) into {@code dst}: chunk {@code id}'s. */
    void postRead(int id, ByteBuf dst, long address, int rkey, int length) {
        wr.reset().wrId(((long) c.slot << 32) | READ | id).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(dst.memoryAddress(), length, c.handler.transport().allocator().lkey(dst)).remote(address, rkey);
        c.qp.postSend(wr);
        owners[tail] = 0;
        tail = (tail + 1) % slots;
        outstanding++;
    }

    /** The oldest SEND or READ completed (they complete in order): the buffers it held go back. */
    void completed() {
        ByteBuf[] h = held[head];
        for (int k = owners[head] - 1; k >= 0; k--) {
            h[k].release();
            h[k] = null;
        }
        owners[head] = 0;
        head = (head + 1) % slots;
        outstanding--;
    }

    /** Gives back every buffer still held (the QP is destroyed: nothing reads them any more). */
    void releaseAll() {
        for (int i = 0; i < slots; i++) {
            for (int k = owners[i] - 1; k >= 0; k--) {
                held[i][k].release();
                held[i][k] = null;
            }
            owners[i] = 0;
        }
        outstanding = 0;
    }
}
