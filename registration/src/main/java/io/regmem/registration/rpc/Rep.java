package io.regmem.registration.rpc;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A reply buffer ({@code struct rpcrdma_rep}): one receive buffer (FROM_DEVICE, mapped when first
 * posted). Owned by exactly one of: the free list (its bit in {@link FreeLists} is set), the
 * hardware (posted as a receive), or a request (attached as its reply). Free is the bit alone, so
 * freeing is one atomic step and a reply is never free twice; while free, its use (posted or
 * attached) is whatever it was last, and {@link #state()} reports it free.
 */
public final class Rep {
    static final int FREE = 0;
    static final int POSTED = 1;
    static final int ATTACHED = 2;
    static final int DESTROYED = 3;
    private static final VarHandle USE;

    static {
        try {
            USE = MethodHandles.lookup().findVarHandle(Rep.class, "use", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final int id;
    final RegBuf buffer;
    /** POSTED, ATTACHED or DESTROYED (a new reply starts taken, to be posted). */
    @SuppressWarnings("unused") // through USE
    private volatile int use = POSTED;
    /** The free lists it belongs to (set when it is made). */
    FreeLists lists;
    /** The request it is attached to, or null. */
    volatile Req owner;
    /** Bytes the last receive wrote. */
    long byteLen;
    /**
     * Bumped each time the rep is posted as a receive: names that posting in its work-request id. It
     * counts in 31 bits (the id's top bit is the receive tag), wrapping from 2^31 - 1 to 0.
     */
    int generation;

    Rep(int id, RegBuf buffer) {
        this.id = id;
        this.buffer = buffer;
    }

    /** The next posting's generation. */
    void nextPosting() {
        generation = (generation + 1) & Integer.MAX_VALUE;
    }

    /** Moves a taken reply's use from {@code from} to {@code to} by compare-and-set (not free/taken: that is the bit). */
    boolean move(int from, int to) {
        return USE.compareAndSet(this, from, to);
    }

    /** FREE while its bit is set, else its use: POSTED, ATTACHED or DESTROYED. */
    int state() {
        int u = (int) USE.getVolatile(this);
        return u != DESTROYED && lists != null && lists.isFree(this) ? FREE : u;
    }

    /** Taken off the free list by the popper: to be posted. */
    void taken() {
        USE.setRelease(this, POSTED); // the popper's compare-and-set on the bit follows: a full fence
    }

    boolean isDestroyed() {
        return (int) USE.getVolatile(this) == DESTROYED;
    }

    /** Destroyed with its buffer (teardown, after the drain). */
    void destroy() {
        USE.setVolatile(this, DESTROYED);
    }

    void attach(Req req) {
        USE.setVolatile(this, ATTACHED);
        owner = req;
    }

    /** The rep's number. */
    public int id() {
        return id;
    }

    /** The receive buffer. */
    public RegBuf buffer() {
        return buffer;
    }

    /** The request it is attached to, or null. */
    public Req owner() {
        return owner;
    }

    /** True while on the free stack. */
    public boolean isFree() {
        return state() == FREE;
    }

    /** True while posted as a receive. */
    public boolean isPosted() {
        return state() == POSTED;
    }

    /** Bytes the last receive into it wrote. */
    public long byteLen() {
        return byteLen;
    }

    @Override
    public String toString() {
        return "Rep[" + id + ", " + switch (state()) {
            case FREE -> "free";
            case POSTED -> "posted";
            case ATTACHED -> "attached to " + owner;
            default -> "destroyed";
        } + "]";
    }
}
