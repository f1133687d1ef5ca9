package io.regmem.registration.spi;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * The provider's half of a connection-manager ID: connection setup by an address the provider
 * understands (soft: a name within the JVM; UCX: {@code host:port}). The verbs layer checks the
 * ID's state before each call and changes it after the call returns; the provider reports what
 * happens at the other end through {@link CmContext}.
 */
public interface ProviderCm {

    /**
     * Binds the ID to the local {@code address} ({@code rdma_bind_addr}) before {@link #listen}: a
     * provider whose addresses are sockets binds one here (port 0: one the system picks), so that a
     * taken address fails now; {@link #listen} is then called with what this returns. By default the
     * address is taken as it is, and {@link #listen} reserves it.
     *
     * @return the address bound (with the port the system picked)
     * @throws RdmaException {@link Errno#EADDRINUSE} if the address is taken; {@link Errno#EINVAL} for
     *                       one the provider does not understand
     */
    default String bind(String address) {
        return address;
    }

    /**
     * Resolves a destination for {@code rdma_resolve_addr}: returns the address {@link #connect} will
     * be given (the provider's own form). Default: the address as it is.
     *
     * @throws RdmaException {@link Errno#EINVAL} for an address the provider cannot read (the call
     *                       fails); any other errno (for example {@link Errno#EHOSTUNREACH}) is
     *                       reported as an {@code ADDR_ERROR} event with that status
     */
    default String resolve(String address) {
        return address;
    }

    /**
     * Checks the route to a resolved destination for {@code rdma_resolve_route}. Default: every
     * resolved destination is routable.
     *
     * @throws RdmaException reported as a {@code ROUTE_ERROR} event with its errno as the status
     */
    default void route(String resolved) {
    }

    /**
     * Listens under {@code address} (after {@link #bind}, the address it returned).
     *
     * @throws RdmaException {@link Errno#EBUSY} if the address is taken
     */
    void listen(String address);

    /**
     * Asks the listener at {@code address} for a connection; the QP is attached. The listener's
     * provider makes a request ID ({@link CmContext#newRequest}) that carries {@code privateData}.
     *
     * @param privateData checked against its limit by the verbs layer; empty for none, never null
     * @throws RdmaException {@link Errno#ECONNREFUSED} if nobody listens there
     */
    void connect(String address, byte[] privateData);

    /**
     * Accepts this request: connects the two QPs, moves them to RTS ({@link QpContext#ready()}) and
     * reports {@link CmContext#established} for both ends, the active end first (with
     * {@code privateData}).
     *
     * @param privateData checked by the verbs layer; empty for none, never null
     * @throws RdmaException {@link Errno#EINVAL} if the requester no longer waits
     */
    void accept(byte[] privateData);

    /**
     * Rejects this request: the requester is told ({@link CmContext#rejected}, with {@code privateData}).
     *
     * @param privateData checked by the verbs layer; empty for none, never null
     */
    void reject(byte[] privateData);

    /** Disconnects: both QPs move to the error state; the other end is told ({@link CmContext#disconnected()}). */
    void disconnect();

    /**
     * The ID is destroyed: stop listening; a request that was never accepted is refused (its
     * requester is told {@link CmContext#rejected}).
     */
    void destroy();

    /**
     * This ID's end of its provider's in-JVM rendezvous ({@link LocalRendezvous#end}), for a provider
     * that connects IDs of one JVM that way; null (the default) for one that does not. A provider
     * that wraps another returns the wrapped one's.
     */
    default LocalRendezvous.End localEnd() {
        return null;
    }
}
