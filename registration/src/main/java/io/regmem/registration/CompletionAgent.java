package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import org.agrona.concurrent.Agent;

/**
 * A CQ's polling as an Agrona {@link Agent}: each {@link #doWork()} polls up to a batch of
 * completions and hands each one, in order, to the handler, and returns how many it handled, so the
 * caller's {@code IdleStrategy} drives it, under an {@code AgentRunner}, inside the application's own
 * loop through an {@code AgentInvoker}, or beside other agents in a {@code CompositeAgent}. The
 * completion a handler sees is reused by the next poll: copy what it keeps. A handler that throws ends
 * that {@code doWork()} (the completions after it in the batch are lost, as a poll's are when its
 * caller throws) and reaches the runner's {@code ErrorHandler}. Polling progresses the CQ's device as
 * {@link CompletionQueue#poll} does; {@code doWork()} allocates nothing.
 */
public final class CompletionAgent implements Agent {
    /** What the agent does with each completion. */
    @FunctionalInterface
    public interface Handler {
        /** One completion, valid until the handler returns. */
        void onCompletion(WorkCompletion wc);
    }

    /** The largest batch. */
    public static final int MAX_BATCH = 4096;
    private final CompletionQueue cq;
    private final Handler handler;
    private final WorkCompletion[] batch;
    private final String roleName;

    /**
     * An agent polling {@code cq} up to {@code batch} completions at a time.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a batch outside [1, {@value #MAX_BATCH}] or a null CQ or handler
     */
    public CompletionAgent(CompletionQueue cq, int batch, Handler handler) {
        if (cq == null || handler == null || batch < 1 || batch > MAX_BATCH) {
            throw new RdmaException(Errno.EINVAL, "CompletionAgent: needs a CQ, a handler and a batch of 1 to " + MAX_BATCH
                    + " (got " + cq + ", " + handler + ", " + batch + ")");
        }
        this.cq = cq;
        this.handler = handler;
        this.batch = new WorkCompletion[batch];
        for (int i = 0; i < batch; i++) {
            this.batch[i] = new WorkCompletion();
        }
        this.roleName = "regmem-cq:" + cq;
    }

    /** Polls once and hands what came to the handler; the number of completions handled. */
    @Override
    public int doWork() {
        int n = cq.poll(batch);
        for (int i = 0; i < n; i++) {
            handler.onCompletion(batch[i]);
        }
        return n;
    }

    @Override
    public String roleName() {
        return roleName;
    }
}
