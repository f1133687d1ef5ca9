package io.regmem.registration.ucx;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * Which thread last polled one of a QP's own CQs, and how many such polls ran: hints (opaque, no fence
 * on the poll path) read by its in-process peer's polls, which leave the QP to a thread of its own
 * (see {@link UcxCq#progressPeer}).
 */
final class UcxPollers {
    @SuppressWarnings("unused") // through LAST_POLLER
    private Thread lastPoller;
    @SuppressWarnings("unused") // through POLLS
    private long polls;
    private static final VarHandle LAST_POLLER;
    private static final VarHandle POLLS;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            LAST_POLLER = l.findVarHandle(UcxPollers.class, "lastPoller", Thread.class);
            POLLS = l.findVarHandle(UcxPollers.class, "polls", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** A poll of one of the QP's CQs, on {@code t}, runs it now. */
    void polledBy(Thread t) {
        if (LAST_POLLER.getOpaque(this) != t) { // a reference store has a GC barrier: only when it changes
            LAST_POLLER.setOpaque(this, t);
        }
        POLLS.setOpaque(this, (long) POLLS.getOpaque(this) + 1);
    }

    /** The thread that last polled one of the QP's own CQs, or null. */
    Thread lastPoller() {
        return (Thread) LAST_POLLER.getOpaque(this);
    }

    /** How many polls of the QP's own CQs ran it. */
    long polls() {
        return (long) POLLS.getOpaque(this);
    }
}
