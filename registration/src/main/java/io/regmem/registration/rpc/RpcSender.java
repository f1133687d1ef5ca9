package io.regmem.registration.rpc;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Opcode;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.MemorySegment;

/**
 * A transport's Send path ({@code rpcrdma_prepare_send_sges} and {@code frwr_send}): a send context
 * from the ring, the header and send buffer mapped and synced, inline when they fit the QP's inline
 * room, the caller's chain in front, signaled as the ring's budget says. The caller holds the send
 * lock ({@link RpcTransport#send(Req, long, long, boolean, WorkRequest)} documents the rules).
 */
final class RpcSender {
    private final RpcTransport transport;
    private final QueuePair qp;
    private final RpcBuffer buffer;
    private final SendLock sendLock;
    private final WorkRequest send;
    /** Where a header and send buffer are staged for one inline Send; empty without inline room. */
    private final MemorySegment inlineStage;

    RpcSender(RpcTransport transport, QueuePair qp, RpcBuffer buffer, SendLock sendLock) {
        this.transport = transport;
        this.qp = qp;
        this.buffer = buffer;
        this.sendLock = sendLock;
        this.send = new WorkRequest(buffer.ring().slot(0).maxSge());
        this.inlineStage = MemorySegment.ofArray(new byte[qp.maxInlineData()]);
    }

    boolean send(Req req, long headerBytes, long sendBytes, boolean expectReply, WorkRequest before) {
        if (!sendLock.isHeldByCurrentThread()) {
            throw new RdmaException(Errno.EPERM, transport + ": Sends are prepared and posted under the send lock");
        }
        SendCtxRing ring = buffer.ring();
        SendCtx sc = ring.getLocked();
        if (sc == null) {
            return false;
        }
        try {
            sc.owner(req);
            if (!req.header.dmaMap(buffer.pd()) || (sendBytes > 0 && !req.send.dmaMap(buffer.pd()))) {
                throw new RdmaException(Errno.EIO, transport + ": cannot map " + req + "'s buffers for a Send");
            }
            req.header.syncForDevice(headerBytes);
            sc.addSge(req.header.address(), headerBytes, req.header.lkey());
            send.reset().opcode(Opcode.SEND).wrId(sc.wrId());
            if (sendBytes > 0) {
                req.send.syncForDevice(sendBytes);
                sc.addSge(req.send.address(), sendBytes, req.send.lkey());
            }
            if (headerBytes + sendBytes <= qp.maxInlineData()) {
                // The small-message path: a message that fits the QP's inline room is copied at post
                // (IBV_SEND_INLINE), so the provider resolves no key for it. A header-only one goes
                // from the header itself; header and send buffer are staged together, the bytes the
                // peer receives the same as the two SGEs'.
                if (sendBytes == 0) {
                    send.inline(req.header.segment(), headerBytes);
                } else {
                    MemorySegment.copy(req.header.segment(), 0, inlineStage, 0, headerBytes);
                    MemorySegment.copy(req.send.segment(), 0, inlineStage, headerBytes, sendBytes);
                    send.inline(inlineStage, headerBytes + sendBytes);
                }
            } else {
                send.addSge(req.header.address(), headerBytes, req.header.lkey());
                if (sendBytes > 0) {
                    send.addSge(req.send.address(), sendBytes, req.send.lkey());
                }
            }
            // A call needs no Send completion to finish: its reply proves the peer received the Send, so
            // the header and send buffers (permanently mapped) are free again; its slot is swept by a
            // later signaled Send. A Send with no reply to wait for holds its request until its own
            // completion, so it must be signaled.
            boolean holds = !expectReply;
            sc.holdsRef = holds;
            int wrs = 1;
            WorkRequest last = null;
            for (WorkRequest w = before; w != null; w = w.next()) {
                w.signaled(false);
                last = w;
                wrs++;
            }
            send.signaled(ring.signal(wrs, holds));
            req.refs.set(1);
            if (last == null) {
                qp.postSend(send);
            } else {
                last.next(send);
                try {
                    qp.postSend(before);
                } finally {
                    last.next(null); // the queue copied the chain; the caller's WRs keep no link to ours
                }
            }
            return true;
        } catch (RuntimeException e) {
            req.refs.set(0); // nothing was posted: the request is the caller's again, as before the call
            ring.ungetLocked(sc); // nothing was posted: no completion would ever release the slot
            throw e instanceof RdmaException r && r.errno() == Errno.EIO ? r
                    : new RdmaException(Errno.EIO, transport + ": Send of " + req + " failed: " + e.getMessage(), e);
        }
    }
}
