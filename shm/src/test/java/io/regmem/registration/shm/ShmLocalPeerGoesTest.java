package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A peer in this JVM that sends and then disconnects, or destroys its QP, before anyone progressed
 * the receiving side: the receiver still takes what was sent into its posted receive, then its QP
 * moves to the error state, as when a peer in another process goes (its SENDs left in the lane are
 * taken before the error flushes the rest). Nothing progresses B here but the peer's going: the
 * device has no progress thread.
 */
@ExtendWith(NoLeaks.class)
class ShmLocalPeerGoesTest {

    private static void sendThenGo(boolean disconnect) {
        QpInitAttributes attrs = new QpInitAttributes().maxSendWr(8).maxRecvWr(8);
        try (Loopback lb = new Loopback("shm", Map.of(), 64, attrs, new QpInitAttributes().maxSendWr(8).maxRecvWr(8))) {
            MemoryRegion a = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion b = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
            lb.memA.asSlice(0, 64).fill((byte) 7);
            lb.qpB.postRecv(new WorkRequest(1).wrId(1).addSge(lb.memB.address(), 64, b.lkey()));
            lb.qpB.postRecv(new WorkRequest(1).wrId(2).addSge(lb.memB.address() + 64, 64, b.lkey()));
            lb.qpA.postSend(new WorkRequest(1).wrId(3).opcode(Opcode.SEND).signaled(true)
                    .addSge(lb.memA.address(), 64, a.lkey()));
            if (disconnect) {
                lb.idA.disconnect();
            } else {
                lb.idA.destroyQp();
            }
            assertThat(lb.poll(lb.cqB)).as("the SEND's receive and the other one's flush").isEqualTo(2);
            WorkCompletion got = lb.wcs[0];
            assertThat(got.status()).as("what the peer sent before it went").isEqualTo(WcStatus.SUCCESS);
            assertThat(got.wrId()).isEqualTo(1);
            assertThat(got.byteLen()).isEqualTo(64);
            assertThat(lb.memB.get(JAVA_BYTE, 63)).isEqualTo((byte) 7);
            assertThat(lb.wcs[1].status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
            assertThat(lb.qpB.state()).isEqualTo(QueuePair.State.ERROR);
            a.close();
            b.close();
        }
    }

    @Test
    void aPeerThatSendsAndDisconnectsIsStillReceived() {
        sendThenGo(true);
    }

    @Test
    void aPeerThatSendsAndDestroysItsQpIsStillReceived() {
        sendThenGo(false);
    }
}
