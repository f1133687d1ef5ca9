package io.regmem.registration;

import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.MemoryAccess;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.QpContext;
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
        qp.complete(qp.sq, qp.sendCq(), false, status, w.opcode, ok ? bytes : 0, !ok || w.signaled, false, 0, false, 0, false);
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
            qp.srqHold.complete(status, opcode, bytes, withImm, immData, withInvalidate, invalidatedRkey, solicited);
        } else {
            qp.complete(qp.rq, qp.recvCq(), true, status, opcode, bytes, true, withImm, immData, withInvalidate, invalidatedRkey,
                    solicited);
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
    public void fatal(String why) {
        qp.fatal(why);
    }

    @Override
    public void flush() {
        qp.flush();
    }

    @Override
    public MemoryAccess memory() {
        return memory;
    }
}
