package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A UCP worker ({@code ucp_worker_h}): the progress engine endpoints, requests and active messages
 * belong to. Created in {@code UCS_THREAD_MODE_SERIALIZED}: its callers serialize every call on it
 * (the owner of this object holds one lock around them).
 */
final class UcpWorker implements AutoCloseable {
    final Ucp ucp;
    final MemorySegment handle;
    /** {@link #handle}'s address, for the downcalls that take pointers as {@code long}. */
    final long address;
    /** A zeroed {@code ucp_request_param_t} (no callback: requests are polled for their status). */
    final MemorySegment noParams;
    private final Arena arena = Arena.ofShared();
    /** Set by {@link #close}: every call on a closed worker is refused or does nothing (never a destroyed handle). */
    private volatile boolean closed;

    UcpWorker(UcpContext context) {
        this.ucp = context.ucp;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment params = a.allocate(UcpLayout.WORKER_PARAMS_SIZE, 8);
            params.set(JAVA_LONG, UcpLayout.WORKER_PARAMS_FIELD_MASK, UcpLayout.WORKER_PARAM_FIELD_THREAD_MODE);
            params.set(JAVA_INT, UcpLayout.WORKER_PARAMS_THREAD_MODE, UcpLayout.THREAD_MODE_SERIALIZED);
            MemorySegment workerOut = a.allocate(ADDRESS);
            ucp.check(ucp.workerCreate(context.handle, params, workerOut), Errno.ENOMEM, "ucx: ucp_worker_create");
            handle = workerOut.get(ADDRESS, 0);
            address = handle.address();
        }
        noParams = arena.allocate(UcpLayout.REQUEST_PARAM_SIZE, 8);
    }

    /** This worker's address, for a peer's endpoint ({@code ucp_worker_get_address}), copied onto the heap. */
    byte[] address() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment addressOut = a.allocate(ADDRESS);
            MemorySegment lengthOut = a.allocate(JAVA_LONG);
            ucp.check(ucp.workerGetAddress(handle, addressOut, lengthOut), Errno.EIO, "ucx: ucp_worker_get_address");
            MemorySegment address = addressOut.get(ADDRESS, 0);
            try {
                return address.reinterpret(lengthOut.get(JAVA_LONG, 0)).toArray(JAVA_BYTE);
            } finally {
                ucp.workerReleaseAddress(handle, address);
            }
        }
    }

    /** Makes progress: true if something happened (false, doing nothing, once closed). */
    boolean progress() {
        return !closed && ucp.workerProgress(address) != 0;
    }

    /** True once {@link #close} ran. */
    boolean isClosed() {
        return closed;
    }

    /**
     * Releases data this worker's AM callback kept ({@code ucp_am_data_release}); nothing once the
     * worker is closed (its destruction released everything).
     */
    void releaseData(long data) {
        if (!closed && data != 0) {
            ucp.amDataRelease(address, data);
        }
    }

    /**
     * Starts receiving a rendezvous message's data that this worker's AM callback announced
     * ({@code ucp_am_recv_data_nbx}); a closed worker's answer is an error status.
     */
    long receiveData(long descriptor, long buffer, long length, long params) {
        return closed ? UcpLayout.UCS_ERR_CANCELED : ucp.amRecvData(address, descriptor, buffer, length, params);
    }

    /** Cancels a request of this worker ({@code ucp_request_cancel}); nothing once closed. */
    void cancel(long request) {
        if (!closed) {
            ucp.requestCancel(address, request);
        }
    }

    /**
     * An endpoint to the worker at {@code peerAddress} ({@code ucp_ep_create}). With
     * {@code peerErrors}, UCX's peer error handling: a peer that goes away fails the endpoint's
     * requests instead of hanging them; UCX 1.13 offers it over TCP only (not over shared memory).
     *
     * @throws RdmaException {@link Errno#EINVAL} if UCX cannot read the address or reach the peer
     */
    MemorySegment connect(byte[] peerAddress, boolean peerErrors) {
        if (closed) {
            throw new RdmaException(Errno.ENODEV, "ucx: the worker was destroyed");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment address = a.allocate(peerAddress.length, 8);
            MemorySegment.copy(peerAddress, 0, address, JAVA_BYTE, 0, peerAddress.length);
            MemorySegment params = a.allocate(UcpLayout.EP_PARAMS_SIZE, 8);
            params.set(JAVA_LONG, UcpLayout.EP_PARAMS_FIELD_MASK, UcpLayout.EP_PARAM_FIELD_REMOTE_ADDRESS
                    | UcpLayout.EP_PARAM_FIELD_ERR_HANDLING_MODE | UcpLayout.EP_PARAM_FIELD_ERR_HANDLER);
            params.set(ADDRESS, UcpLayout.EP_PARAMS_ERR_HANDLER, ucp.ignoreErrors); // (its arg stays NULL)
            params.set(ADDRESS, UcpLayout.EP_PARAMS_ADDRESS, address);
            params.set(JAVA_INT, UcpLayout.EP_PARAMS_ERR_MODE,
                    peerErrors ? UcpLayout.ERR_HANDLING_MODE_PEER : UcpLayout.ERR_HANDLING_MODE_NONE);
            MemorySegment epOut = a.allocate(ADDRESS);
            ucp.check(ucp.epCreate(handle, params, epOut), Errno.EINVAL, "ucx: ucp_ep_create");
            return epOut.get(ADDRESS, 0);
        }
    }

    /**
     * Starts closing an endpoint: returns the request to {@link #poll} (an in-process peer's worker
     * must progress too for it to finish). {@code force} (only for endpoints with peer error handling,
     * as UCX requires) fails the outstanding requests at once; otherwise the close flushes them.
     */
    long startClose(MemorySegment ep, boolean force) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment param = a.allocate(UcpLayout.REQUEST_PARAM_SIZE, 8);
            param.set(JAVA_INT, UcpLayout.REQUEST_PARAM_OP_ATTR_MASK, UcpLayout.OP_ATTR_FIELD_FLAGS);
            param.set(JAVA_INT, UcpLayout.REQUEST_PARAM_FLAGS, force ? UcpLayout.EP_CLOSE_FLAG_FORCE : 0);
            return ucp.epClose(ep.address(), param.address());
        }
    }

    /** Unpacks a peer's packed remote key for an endpoint ({@code ucp_ep_rkey_unpack}). */
    MemorySegment unpack(MemorySegment ep, byte[] packed) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buffer = a.allocate(Math.max(1, packed.length), 8);
            MemorySegment.copy(packed, 0, buffer, JAVA_BYTE, 0, packed.length);
            MemorySegment rkeyOut = a.allocate(ADDRESS);
            ucp.check(ucp.epRkeyUnpack(ep, buffer, rkeyOut), Errno.EINVAL, "ucx: ucp_ep_rkey_unpack");
            return rkeyOut.get(ADDRESS, 0);
        }
    }

    /**
     * The status of a request a non-blocking call returned: {@code UCS_OK} for one that completed at
     * once (null), its error for an error pointer, {@code UCS_INPROGRESS} while it runs, else its
     * final status (and the request is freed).
     */
    int poll(long request) {
        if (request == 0) {
            return UcpLayout.UCS_OK;
        }
        if (Ucp.isError(request)) {
            return Ucp.status(request);
        }
        int status = ucp.requestStatus(request);
        if (status != UcpLayout.UCS_INPROGRESS) {
            ucp.requestFree(request);
        }
        return status;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            ucp.workerDestroy(handle);
            arena.close();
        }
    }
}
