package io.regmem.registration.rpc;

import io.regmem.registration.MemoryRegion;
import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A preallocated RPC request ({@code struct rpcrdma_req}): its header, send and receive buffers,
 * the reply attached to it, and whether it is on the free list or owned by one RPC. Whether it is
 * free is its bit in the buffer's free list ({@link FreeLists}), which moves atomically, so a request
 * is never put back twice nor handed to two RPCs.
 */
public final class Req {
    static final int FREE = 0;
    static final int OWNED = 1;
    static final int DESTROYED = 2;

    final RpcBuffer buffer;
    final int id;
    final RegBuf header;
    final RegBuf send;
    final RegBuf recv;
    /** The free list that knows whether this request is free (null until it joins one). */
    FreeLists lists;
    private volatile boolean destroyed;
    /**
     * Bumped each time an RPC takes the request: names this use in work-request ids. Plain: the
     * free list's hand-over orders it for the next owner.
     */
    int generation;
    /** The reply attached by the reply handler ({@code rl_reply}), or null. */
    Rep reply;
    /**
     * The reference that must drop before the RPC completes (the kernel's kref on a request): the
     * reply for a call, the Send's completion for a message with no reply.
     */
    final AtomicInteger refs = new AtomicInteger();
    /** The request's own MR cache ({@code rl_free_mrs}): MRs it registered chunks with before. */
    final ArrayDeque<MemoryRegion> mrs = new ArrayDeque<>(4);

    Req(RpcBuffer buffer, int id, RegBuf header, RegBuf send, RegBuf recv) {
        this.buffer = buffer;
        this.id = id;
        this.header = header;
        this.send = send;
        this.recv = recv;
    }

    /** A new use begins; called only by the thread whose compare-and-set just took it off the free list. */
    void take() {
        generation++;
    }

    /** Marks the request destroyed (off the free list for good). */
    void destroy() {
        destroyed = true;
    }

    /** {@link #FREE} (its bit is set), {@link #OWNED} or {@link #DESTROYED}. */
    int state() {
        return destroyed ? DESTROYED : lists != null && lists.isFree(this) ? FREE : OWNED;
    }

    /** The request's number in its buffer. */
    public int id() {
        return id;
    }

    /** The current use's generation. */
    public int generation() {
        return generation;
    }

    /** True while an RPC owns it (taken by {@link RpcBuffer#get()}, not yet put back). */
    public boolean isOwned() {
        return state() == OWNED;
    }

    /** The RPC header buffer (TO_DEVICE, mapped eagerly per connection by {@link RpcBuffer#setupReq}). */
    public RegBuf header() {
        return header;
    }

    /** The send buffer (TO_DEVICE, mapped lazily at the first Send). */
    public RegBuf send() {
        return send;
    }

    /** The receive buffer (NONE: CPU memory, never mapped). */
    public RegBuf recv() {
        return recv;
    }

    /** The reply attached to this request, or null. */
    public Rep reply() {
        return reply;
    }

    /** Attaches a reply ({@code rl_reply}), giving back any reply attached before. */
    public void attachReply(Rep rep) {
        if (reply != null && reply != rep) {
            buffer.repPut(reply);
        }
        reply = rep;
        if (rep != null) {
            rep.attach(this);
        }
    }

    @Override
    public String toString() {
        return "Req[" + id + ", gen " + generation + ", " + switch (state()) {
            case FREE -> "free";
            case OWNED -> "owned";
            default -> "destroyed";
        } + "]";
    }
}
