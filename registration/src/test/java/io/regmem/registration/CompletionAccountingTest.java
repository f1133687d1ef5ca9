package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Invariant 20, completion accounting as in verbs: a request keeps its queue slot until its
 * completion is polled (an unsignaled one, until a later completion of its send queue is polled),
 * so a CQ at least as deep as the queues that complete on it never overruns, whatever the order of
 * posts and polls.
 */
@ExtendWith(NoLeaks.class)
class CompletionAccountingTest {

    /** Two connected QPs with these queue limits on CQs {@code cqDepth} deep (the property test uses it too). */
    static Loopback loopback(int maxSendWr, int maxRecvWr, int cqDepth, boolean signalAll) {
        QpInitAttributes a = new QpInitAttributes().maxSendWr(maxSendWr).maxRecvWr(maxRecvWr).signalAll(signalAll);
        QpInitAttributes b = new QpInitAttributes().maxSendWr(maxSendWr).maxRecvWr(maxRecvWr).signalAll(signalAll);
        return new Loopback(Map.of(), cqDepth, a, b);
    }

    /** A 64-byte WRITE, id {@code id}, into the id's slot of {@code remote}. */
    static WorkRequest write(Loopback lb, MemoryRegion local, MemoryRegion remote, long id, boolean signaled) {
        return new WorkRequest(1).wrId(id).opcode(Opcode.RDMA_WRITE).signaled(signaled)
                .addSge(local.address(), 64, local.lkey()).remote(remote.address() + 64 * (id % 64), lb.key(remote));
    }

    /** The loop that overran the CQ: post until ENOMEM, poll one completion, again. */
    @Test
    void postingUntilFullAndPollingOneAtATimeNeverOverrunsACqAsDeepAsTheQueues() {
        try (Loopback lb = loopback(4, 4, 8, true)) {
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            long id = 0;
            long polled = 0;
            for (int round = 0; round < 200; round++) {
                while (true) {
                    try {
                        lb.qpA.postSend(write(lb, local, remote, id, true));
                        id++;
                    } catch (RdmaException e) {
                        assertThat(e.errno()).isEqualTo(Errno.ENOMEM);
                        break;
                    }
                }
                assertThat(id - polled).as("posted and not yet polled").isLessThanOrEqualTo(4);
                assertThat(lb.qpA.outstandingSends()).isEqualTo(4);
                WorkCompletion[] one = {new WorkCompletion()};
                assertThat(lb.cqA.poll(one)).isEqualTo(1);
                assertThat(one[0].status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(one[0].wrId()).isEqualTo(polled);
                polled++;
                assertThat(lb.qpA.outstandingSends()).isEqualTo(3);
            }
            assertThat(lb.cqA.overrun()).isFalse();
            assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.RTS);
            assertThat(lb.cqA.poll(lb.wcs)).isEqualTo(3);
            assertThat(lb.qpA.outstandingSends()).isZero();
        }
    }

    @Test
    void anUnsignaledRequestKeepsItsSlotUntilALaterCompletionIsPolled() {
        try (Loopback lb = loopback(4, 4, 8, false)) {
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            lb.qpA.postSend(write(lb, local, remote, 1, false));
            lb.qpA.postSend(write(lb, local, remote, 2, false));
            assertThat(lb.cqA.poll(lb.wcs)).as("executed silently").isZero();
            assertThat(lb.qpA.outstandingSends()).as("but still holding their slots").isEqualTo(2);
            lb.qpA.postSend(write(lb, local, remote, 3, true));
            assertThat(lb.cqA.pending()).isZero(); // nothing executes before a poll
            assertThat(lb.qpA.outstandingSends()).isEqualTo(3);
            assertThat(lb.cqA.poll(lb.wcs)).isEqualTo(1);
            assertThat(lb.wcs[0].wrId()).isEqualTo(3);
            assertThat(lb.qpA.outstandingSends()).as("the signaled completion retires the two before it").isZero();
        }
    }

    @Test
    void aCompletionWaitingInTheCqKeepsItsSlotAndAReceiveIsFreedByItsPoll() {
        try (Loopback lb = loopback(2, 2, 4, true)) {
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion recvMr = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
            lb.qpB.postRecv(new WorkRequest(1).wrId(10).addSge(recvMr.address(), 64, recvMr.lkey()));
            lb.qpB.postRecv(new WorkRequest(1).wrId(11).addSge(recvMr.address() + 64, 64, recvMr.lkey()));
            ObjectModelTest.assertRdma(() -> lb.qpB.postRecv(new WorkRequest(1).wrId(12)), Errno.ENOMEM, "receive queue full");
            WorkRequest send = new WorkRequest(1).wrId(1).opcode(Opcode.SEND).addSge(local.address(), 32, local.lkey());
            lb.qpA.postSend(send);
            assertThat(lb.cqA.poll(lb.wcs)).isEqualTo(1); // executes the Send: B's receive is consumed
            assertThat(lb.cqB.pending()).isEqualTo(1);
            assertThat(lb.qpB.outstandingRecvs()).as("consumed, not yet polled").isEqualTo(2);
            ObjectModelTest.assertRdma(() -> lb.qpB.postRecv(new WorkRequest(1).wrId(12)), Errno.ENOMEM);
            assertThat(lb.cqB.poll(lb.wcs)).isEqualTo(1);
            assertThat(lb.qpB.outstandingRecvs()).isEqualTo(1);
            lb.qpB.postRecv(new WorkRequest(1).wrId(12).addSge(recvMr.address() + 128, 64, recvMr.lkey()));
        }
    }
}
