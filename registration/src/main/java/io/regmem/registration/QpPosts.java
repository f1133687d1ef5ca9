package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Posting chains of work requests into a QP's queues ({@code ib_post_send}, {@code ib_post_recv}):
 * the whole chain or nothing, under the QP's post lock (sends under its execution lock instead where
 * the provider runs them at once: {@link io.regmem.registration.spi.ProviderQp#postsUnderExecutionLock()}).
 * The throwing calls ({@link QueuePair#postSend}, {@link QueuePair#postRecv}) and the ones that return
 * a code for back-pressure ({@link QueuePair#tryPostSend}, {@link QueuePair#tryPostRecv}) share these.
 */
final class QpPosts {
    private QpPosts() {
    }

    /**
     * Posts a send chain: the number of requests posted; with {@code orCode}, {@link QueuePair#NOT_CONNECTED}
     * or {@link QueuePair#BACK_PRESSURED} where the throwing call throws for those. Allocates nothing
     * unless it throws.
     */
    static int send(QueuePair qp, WorkRequest first, boolean orCode) {
        // (a provider whose sends run at once on this thread posts them under its execution lock: one lock, not two)
        ReentrantLock l = qp.provider.postsUnderExecutionLock() ? qp.lock : qp.postLock;
        l.lock();
        try {
            qp.checkAlive("postSend");
            QueuePair.State state = qp.state();
            if (state != QueuePair.State.RTS && state != QueuePair.State.ERROR) {
                if (orCode) {
                    return QueuePair.NOT_CONNECTED;
                }
                throw new RdmaException(Errno.EINVAL, qp + ": postSend in state " + state + " (bad WR index 0): "
                        + "connect first");
            }
            WorkQueue sq = qp.sq;
            int n = 0;
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                WrChecks.send(qp, wr, n);
                if (n == sq.room()) {
                    if (orCode) {
                        return QueuePair.BACK_PRESSURED;
                    }
                    throw new RdmaException(Errno.ENOMEM, qp + ": send queue full (maxSendWr " + qp.maxSendWr()
                            + ", " + sq.size() + " outstanding: a slot is freed when its completion is polled): "
                            + "bad WR index " + n);
                }
                n++;
            }
            long firstSeq = sq.tailSeq();
            int i = 0;
            boolean signalAll = qp.signalAll();
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                try {
                    sq.pushSlot(i).copyFrom(wr, signalAll);
                } catch (IllegalStateException | WrongThreadException e) { // an inline payload freed since its check
                    throw new RdmaException(Errno.EINVAL, qp + ": inline payload could not be read (" + e.getMessage()
                            + "): bad WR index " + i, e);
                }
                i++;
            }
            sq.commitPush(n);
            qp.provider.sendPosted(firstSeq, n);
            return n;
        } finally {
            l.unlock();
        }
    }

    /** Posts a receive chain: the number posted; with {@code orCode}, {@link QueuePair#BACK_PRESSURED} for a full queue. */
    static int recv(QueuePair qp, WorkRequest first, boolean orCode) {
        qp.postLock.lock();
        try {
            qp.checkAlive("postRecv");
            if (qp.srq != null) {
                throw new RdmaException(Errno.EINVAL, qp + ": postRecv on a QP whose receives come from " + qp.srq
                        + " (bad WR index 0): post them to the SRQ");
            }
            WorkQueue rq = qp.rq;
            int n = 0;
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                WrChecks.sges(qp, wr, n, qp.maxRecvSge(), "maxRecvSge");
                if (n == rq.room()) {
                    if (orCode) {
                        return QueuePair.BACK_PRESSURED;
                    }
                    throw new RdmaException(Errno.ENOMEM, qp + ": receive queue full (maxRecvWr " + qp.maxRecvWr()
                            + ", " + rq.size() + " outstanding: a slot is freed when its completion is polled): "
                            + "bad WR index " + n);
                }
                n++;
            }
            long firstSeq = rq.tailSeq();
            int i = 0;
            for (WorkRequest wr = first; wr != null; wr = wr.next()) {
                rq.pushSlot(i++).copyFrom(wr, true);
            }
            rq.commitPush(n);
            qp.provider.recvPosted(firstSeq, n);
            return n;
        } finally {
            qp.postLock.unlock();
        }
    }
}
