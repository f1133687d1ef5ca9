package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The posts that return back-pressure instead of throwing for it (as Aeron's {@code offer}):
 * {@code tryPostSend} and {@code tryPostRecv} post the whole chain and return its length, or return
 * {@code BACK_PRESSURED} (a full queue) or {@code NOT_CONNECTED} (a send before the QP is connected)
 * and post nothing; everything else throws as the posts do; the back-pressured call allocates nothing.
 */
@ExtendWith(NoLeaks.class)
class TryPostTest {
    private final Loopback lb = new Loopback(Map.of(), new Loopback.QpInitAttributesSpec(8, 8, 4, true, 256));
    private final MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
    private final MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private final WorkCompletion[] one = {new WorkCompletion()};

    /** Polls {@code n} completions of A's CQ, one at a time (within 10 s), each a success. */
    private void complete(int n) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        for (int got = 0; got < n; ) {
            if (lb.cqA.poll(one) == 1) {
                assertThat(one[0].status()).isEqualTo(WcStatus.SUCCESS);
                got++;
            } else {
                assertThat(System.nanoTime()).as("completion %d of %d within 10 s", got, n).isLessThan(deadline);
            }
        }
    }

    private WorkRequest write(long id) {
        return new WorkRequest(1).wrId(id).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(lb.memA.address() + 8 * id, 8, local.lkey()).remote(lb.memB.address() + 8 * id, lb.key(remote));
    }

    @Test
    void aFullSendQueueIsBackPressureAndNothingOfTheChainIsPosted() {
        int posted = 0;
        int r;
        while ((r = lb.qpA.tryPostSend(write(posted))) > 0) {
            assertThat(r).isEqualTo(1);
            posted++;
            assertThat(posted).as("the queue fills").isLessThanOrEqualTo(lb.qpA.maxSendWr());
        }
        assertThat(r).isEqualTo(QueuePair.BACK_PRESSURED);
        assertThat(posted).isEqualTo(lb.qpA.maxSendWr());
        assertThat(lb.qpA.outstandingSends()).isEqualTo(posted);
        assertThatThrownBy(() -> lb.qpA.postSend(write(99))).isInstanceOf(RdmaException.class)
                .matches(e -> ((RdmaException) e).errno() == Errno.ENOMEM);

        complete(1); // one slot comes free
        WorkRequest two = write(20);
        two.next(write(21));
        assertThat(lb.qpA.tryPostSend(two)).as("a chain of two into one free slot").isEqualTo(QueuePair.BACK_PRESSURED);
        assertThat(lb.qpA.outstandingSends()).isEqualTo(posted - 1);
        assertThat(lb.qpA.tryPostSend(write(22))).isEqualTo(1);
        complete(posted);
        assertThat(lb.qpA.tryPostSend(two)).isEqualTo(2);
        complete(2);
        assertThat(lb.qpA.outstandingSends()).isZero();
    }

    @Test
    void aFullReceiveQueueIsBackPressure() {
        int posted = 0;
        int r;
        while ((r = lb.qpB.tryPostRecv(new WorkRequest(1).wrId(posted).addSge(lb.memB.address(), 64, remote.lkey()))) > 0) {
            posted++;
            assertThat(posted).isLessThanOrEqualTo(lb.qpB.maxRecvWr());
        }
        assertThat(r).isEqualTo(QueuePair.BACK_PRESSURED);
        assertThat(posted).isEqualTo(lb.qpB.maxRecvWr());
        assertThat(lb.qpB.outstandingRecvs()).isEqualTo(posted);
    }

    @Test
    void aSendBeforeTheConnectionIsNotConnectedAndAReceiveIsPosted() {
        CmId id = lb.devA.createCmId();
        QueuePair qp = id.createQp(lb.pdA, new QpInitAttributes().sendCq(lb.cqA).recvCq(lb.cqA).maxSendWr(4).maxRecvWr(4));
        try {
            assertThat(qp.tryPostSend(write(1))).isEqualTo(QueuePair.NOT_CONNECTED);
            assertThat(qp.outstandingSends()).isZero();
            assertThat(qp.tryPostRecv(new WorkRequest(1).wrId(1).addSge(lb.memA.address(), 64, local.lkey()))).isEqualTo(1);
            assertThat(qp.outstandingRecvs()).isEqualTo(1);
        } finally {
            id.destroyQp();
            id.close();
        }
        while (lb.cqA.poll(lb.wcs) > 0) {
            // the receive flushed by the destruction, if the CQ got it
        }
    }

    @Test
    void badRequestsStillThrowAndADestroyedQpToo() {
        WorkRequest five = new WorkRequest(5).wrId(1).opcode(Opcode.RDMA_WRITE).remote(lb.memB.address(), lb.key(remote));
        for (int i = 0; i < 5; i++) {
            five.addSge(lb.memA.address() + 64L * i, 64, local.lkey());
        }
        assertThatThrownBy(() -> lb.qpA.tryPostSend(five)).as("more SGEs than maxSendSge").isInstanceOf(RdmaException.class)
                .matches(e -> ((RdmaException) e).errno() == Errno.EINVAL);
        assertThat(lb.qpA.outstandingSends()).isZero();
        CmId id = lb.devA.createCmId();
        QueuePair qp = id.createQp(lb.pdA, new QpInitAttributes().sendCq(lb.cqA).recvCq(lb.cqA).maxSendWr(4).maxRecvWr(4));
        id.destroyQp();
        id.close();
        assertThatThrownBy(() -> qp.tryPostSend(write(1))).isInstanceOf(RdmaException.class)
                .matches(e -> ((RdmaException) e).errno() == Errno.EBADF);
        assertThatThrownBy(() -> qp.tryPostRecv(new WorkRequest(1).addSge(lb.memA.address(), 64, local.lkey())))
                .isInstanceOf(RdmaException.class).matches(e -> ((RdmaException) e).errno() == Errno.EBADF);
    }

    @Test
    void theBackPressuredCallAllocatesNothing() {
        int posted = 0;
        while (lb.qpA.tryPostSend(write(posted)) > 0) {
            posted++;
        }
        WorkRequest w = write(50);
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        for (int i = 0; i < 20_000; i++) { // (compiled before it is measured)
            lb.qpA.tryPostSend(w);
        }
        long least = Long.MAX_VALUE;
        for (int batch = 0; batch < 30 && least >= 1000; batch++) { // (until one batch is clean: see RwEdgeCasesTest)
            long before = mx.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < 1000; i++) {
                if (lb.qpA.tryPostSend(w) != QueuePair.BACK_PRESSURED) {
                    throw new AssertionError("room in a full queue");
                }
            }
            least = Math.min(least, mx.getCurrentThreadAllocatedBytes() - before);
        }
        assertThat(least).as("bytes allocated by 1000 back-pressured posts").isLessThan(1000);
        complete(posted);
    }
}
