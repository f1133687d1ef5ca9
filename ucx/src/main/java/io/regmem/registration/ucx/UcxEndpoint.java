package io.regmem.registration.ucx;

/**
 * A channel's one UCX endpoint to a peer worker ({@link UcxChannel}), shared by every QP of the
 * channel connected to a QP of that worker (messages name their QPs in the header). One endpoint
 * per peer, kept until its channel is destroyed or either device closes, bounds what UCX keeps per
 * connection: a shared-memory endpoint maps the peer's segments, and UCX 1.13 leaves those mapped
 * after the endpoint closes (until its worker is destroyed), so an endpoint per QP on a long-lived
 * worker made every reconnection cost mappings until the process ran out of them.
 *
 * <p>Read and changed under the owning device's worker lock only: a closed endpoint's handle is 0,
 * and a request sent on it fails as on a reset connection (never a send on a destroyed endpoint).
 */
final class UcxEndpoint {
    /** The peer worker's address. */
    final byte[] peer;
    /** The {@code ucp_ep_h}, or 0 once closed. */
    long handle;
    /** The endpoint leads to its own worker (UCX's loopback transport: sends run the AM callback inline). */
    final boolean toSelf;
    /**
     * Null if the endpoint runs on transports whose NIC enforces remote keys (its WRITEs and READs go
     * as puts and gets), else why they go as messages the target checks ({@link UcxTransports}). Set
     * once its wire-up is done.
     */
    volatile String messagesBecause = "its transports are not known yet";
    /** Large transfers go eagerly all the same (a TCP-only endpoint: {@link UcxTransports#rendezvousPays}). */
    volatile boolean eagerOnly;

    UcxEndpoint(byte[] peer, long handle, boolean toSelf) {
        this.peer = peer;
        this.handle = handle;
        this.toSelf = toSelf;
    }
}
