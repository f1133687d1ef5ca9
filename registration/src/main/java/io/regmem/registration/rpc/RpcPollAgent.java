package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import org.agrona.concurrent.Agent;

/**
 * An {@link RpcTransport}'s completion handling as an Agrona {@link Agent}: each {@link #doWork()}
 * is one {@link RpcTransport#poll()} (Send completions sweep the ring, receives go to the handler)
 * and returns the completions handled, so the caller's {@code IdleStrategy} drives it under an
 * {@code AgentRunner} or an {@code AgentInvoker}. A handler that throws ends that {@code doWork()} and
 * reaches the runner's {@code ErrorHandler}; a disconnection reaches the transport's
 * {@link RpcTransport.Handler#disconnected}. Allocates nothing.
 */
public final class RpcPollAgent implements Agent {
    private final RpcTransport transport;
    private final String roleName;

    /**
     * An agent polling {@code transport}.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a null transport
     */
    public RpcPollAgent(RpcTransport transport, String roleName) {
        if (transport == null) {
            throw new RdmaException(Errno.EINVAL, "RpcPollAgent: needs a transport");
        }
        this.transport = transport;
        this.roleName = roleName == null ? "regmem-rpc" : roleName;
    }

    @Override
    public int doWork() {
        return transport.poll();
    }

    @Override
    public String roleName() {
        return roleName;
    }
}
