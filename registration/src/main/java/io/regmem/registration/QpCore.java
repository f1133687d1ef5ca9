package io.regmem.registration;

import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.MemoryAccess;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import java.net.InetAddress;
import java.util.concurrent.locks.ReentrantLock;

/** A queue pair as its provider sees it ({@link QpContext}): its queues, completions and state. */
final class QpCore extends ProviderState implements QpContext {
    private final QueuePair qp;
    private final Translation memory;

    QpCore(QueuePair qp) {
        this.qp = qp;
        this.memory = new Translation(qp);
    }

    @Override
    public String name() {
        return qp.toString();
    }

    @Override
    public boolean isDestroyed() {
        return qp.isDestroyed();
    }

    @Override
    public int maxSendWr() {
        return qp.maxSendWr();
    }

    @Override
    public int rnrRetry() {
        return qp.rnrRetry();
    }

    @Override
    public long minRnrTimerNanos() {
        return QpInitAttributes.minRnrTimerNanos(qp.minRnrTimer());
    }

    @Override
    public ReentrantLock lock() {
        return qp.lock;
    }

    @Override
    public CqContext sendCq() {
        return qp.sendCq().context;
    }

    @Override
    public CqContext recvCq() {
        return qp.recvCq().context;
    }

    @Override
    public boolean idle() {
        return qp.sq.idle() && (qp.state() != QueuePair.State.ERROR || (qp.rq.idle() && (qp.srqHold == null || qp.srqHold.settled())));
    }

    @Override
    public long sendTail() {
        return qp.sq.tailAcquire();
    }

    @Override
    public PostedWr nextSend() {
        return qp.sq.peek();
    }

    @Override
    public PostedWr sendAt(long seq) {
        return qp.sq.at(seq);
    }

    @Override
    public PostedWr recvAt(long seq) {
        return qp.rq.at(seq);
    }

    @Override
    public void completeSend(WcStatus status, long bytes) {
        Wqe w = qp.sq.peek();
        boolean ok = status == WcStatus.SUCCESS;
        complete(qp.sq, qp.sendCq(), false, status, w.opcode, ok ? bytes : 0, !ok || w.signaled, false, 0, false, 0, false, 0, null);
        if (!ok) {
            qp.toError("a send request failed");
        }
    }

    @Override
    public PostedWr nextRecv() {
        return qp.srqHold == null ? qp.rq.peek() : qp.srqHold.receive();
    }

    @Override
    public void completeRecv(WcStatus status, Opcode opcode, long bytes, boolean withImm, int immData,
                             boolean withInvalidate, int invalidatedRkey, boolean solicited) {
        if (qp.srqHold != null) {
            qp.srqHold.complete(status, opcode, bytes, withImm, immData, withInvalidate, invalidatedRkey, solicited, 0, null);
        } else {
            complete(qp.rq, qp.recvCq(), true, status, opcode, bytes, true, withImm, immData, withInvalidate, invalidatedRkey,
                    solicited, 0, null);
        }
        if (status != WcStatus.SUCCESS) {
            qp.toError("a receive failed");
        }
    }

    @Override
    public boolean isReady() {
        return qp.state() == QueuePair.State.RTS;
    }

    @Override
    public boolean isError() {
        return qp.state() == QueuePair.State.ERROR;
    }

    @Override
    public void ready() {
        qp.ready();
    }

    @Override
    public void toError() {
        qp.toError("the provider moved it to the error state (the peer or the transport failed)");
    }

    @Override
    public void peerDisconnected() {
        ProviderQp p = qp.provider;
        if (p == null || !p.peerDisconnected()) {
            toError();
        }
    }


    @Override
    public MemoryAccess memory() {
        return memory;
    }

    // ---- unreliable datagrams --------------------------------------------------------------------

    @Override
    public QpType qpType() {
        return qp.qpType();
    }

    @Override
    public int qpNum() {
        return qp.qpNum();
    }

    @Override
    public int qkey() {
        return qp.qkey();
    }

    @Override
    public boolean blocksSelfMulticastLoopback() {
        return qp.blocksSelfMulticastLoopback();
    }

    @Override
    public int trafficClass() {
        return qp.cmId().typeOfService;
    }

    @Override
    public int pathMtu() {
        return qp.device.attributes().activeMtu();
    }

    @Override
    public void completeDatagram(long bytes, boolean withImm, int immData, boolean solicited, int srcQp, AhAttributes source) {
        if (qp.srqHold != null) {
            qp.srqHold.complete(WcStatus.SUCCESS, Opcode.RECV, bytes, withImm, immData, false, 0, solicited, srcQp, source);
        } else {
            complete(qp.rq, qp.recvCq(), true, WcStatus.SUCCESS, Opcode.RECV, bytes, true, withImm, immData, false, 0, solicited,
                    srcQp, source);
        }
    }

    @Override
    public void dropDatagram(DatagramDrop reason) {
        qp.device.counters.dropped(reason);
        RegistrationEvents.DatagramDropped event = new RegistrationEvents.DatagramDropped();
        if (event.shouldCommit()) {
            event.qp = qp.toString();
            event.reason = reason.name();
            event.commit();
        }
    }

    @Override
    public void multicastLost(InetAddress group, int status) {
        CmId id = qp.cmId();
        if (id != null) {
            id.joins.lost(group, status);
        }
    }

    // ---- completing and flushing (lock held) -------------------------------------------------------

    /** Completes the head of {@code q} (lock held): records the completion before the head moves on. */
    void complete(WorkQueue q, CompletionQueue cq, boolean recv, WcStatus status, Opcode op, long bytes,
                  boolean generate, boolean withImm, int imm, boolean withInv, int invRkey, boolean solicited, int srcQp,
                  AhAttributes source) {
        Wqe w = q.peek();
        long seq = q.headSeq();
        if (!generate) {
            q.pop(); // an unsignaled success: its slot is retired with the next polled completion
            return;
        }
        q.produced(seq);
        q.pop();
        if (!cq.push(qp, recv, seq, w.wrId, status, op, bytes, withImm, imm, withInv, invRkey, solicited, srcQp, source)) {
            lostCompletion(cq);
            cq.retire(q, seq);
        }
    }

    /** A completion of this QP found {@code cq} full and was lost: the QP can no longer be trusted (lock held). */
    void lostCompletion(CompletionQueue cq) {
        fatal("a completion was lost because " + cq + " overran");
    }

    /** Moves to the error state for {@code why}, raising QP_FATAL if it was not there already (any thread). */
    @Override
    public void fatal(String why) {
        boolean was = qp.state() == QueuePair.State.ERROR;
        qp.toError(why);
        if (!was) {
            qp.device.raiseAsync(AsyncEvent.Type.QP_FATAL, qp, qp + " moved to the error state: " + why);
        }
    }

    /** In the error state: every queued request completes with WR_FLUSH_ERR; then the slots settle (lock held). */
    @Override
    public void flush() {
        Wqe w;
        int sends = 0;
        int receives = 0;
        while ((w = qp.sq.peek()) != null) {
            complete(qp.sq, qp.sendCq(), false, WcStatus.WR_FLUSH_ERR, w.opcode, 0, true, false, 0, false, 0, false, 0, null);
            sends++;
        }
        while (qp.rq.peek() != null) {
            complete(qp.rq, qp.recvCq(), true, WcStatus.WR_FLUSH_ERR, Opcode.RECV, 0, true, false, 0, false, 0, false, 0, null);
            receives++;
        }
        if (qp.srqHold != null) {
            receives += qp.srqHold.flush();
        }
        if (sends + receives > 0) {
            RegistrationEvents.QpFlush event = new RegistrationEvents.QpFlush();
            if (event.shouldCommit()) {
                event.qp = qp.toString();
                event.sends = sends;
                event.receives = receives;
                event.commit();
            }
        }
        qp.sendCq().settle(qp.sq);
        qp.recvCq().settle(qp.rq);
    }
}
