package io.regmem.registration.rpc;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A reply buffer ({@code struct rpcrdma_rep}): one receive buffer (FROM_DEVICE, mapped when first
 * posted). Owned by exactly one of: the free stack, the hardware (posted as a receive), or a request
 * (attached as its reply). Moves between them by compare-and-set, so it is never on the free stack
 * twice nor attached while free.
 */
public final class Rep {
    static final int FREE = 0;
    static final int POSTED = 1;
    static final int ATTACHED = 2;
    static final int DESTROYED = 3;
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(Rep.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final int id;
    final RegBuf buffer;
    @SuppressWarnings("unused") // through STATE
    private volatile int state = FREE;
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

    boolean move(int from, int to) {
        return STATE.compareAndSet(this, from, to);
    }

    int state() {
        return (int) STATE.getVolatile(this);
    }

    void attach(Req req) {
        STATE.setVolatile(this, ATTACHED);
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
