package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.LogCapture;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The lane's acknowledgements: a WRITE's or SEND's success travels in the target's finished word, not
 * in an answer record, and completions still come in posting order with the verdicts RC gives when
 * they mix with READs, atomics and errors (which do have records); a finished word a peer moves
 * wrongly ends the connection.
 */
@ExtendWith(NoLeaks.class)
class ShmRingProtocolTest {
    private static QpInitAttributes attrs() {
        return new QpInitAttributes().maxSendWr(64).maxRecvWr(64);
    }

    /** A completion's identity and verdict. */
    private record Wc(long wrId, WcStatus status) {
    }

    private static List<Wc> drain(Loopback lb, int n) {
        List<Wc> got = new ArrayList<>();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (got.size() < n) {
            assertThat(System.nanoTime()).as("%d of %d completions", got.size(), n).isLessThan(deadline);
            int k = lb.cqA.poll(lb.wcs);
            for (int i = 0; i < k; i++) {
                got.add(new Wc(lb.wcs[i].wrId(), lb.wcs[i].status()));
            }
            lb.poll(lb.cqB);
        }
        return got;
    }

    @Test
    void writesAndSendsNeedNoAnswerRecordAndCompleteInOrderAmongReadsAtomicsAndErrors() throws Exception {
        try (Loopback lb = new Loopback("shm", Map.of(), 256, attrs(), attrs())) {
            MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion mrB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_ATOMIC);
            int rkey = lb.key(mrB);
            Lane a = ShmProgressFaultTest.shm(lb.devA).qps()[0].lane();
            WorkRequest w = new WorkRequest(1);
            // 40 WRITEs alone: completed, and not one answer record came back.
            for (int i = 0; i < 40; i++) {
                lb.memA.set(JAVA_LONG, 8L * i, 1000L + i);
                lb.qpA.postSend(w.reset().wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                        .addSge(lb.memA.address() + 8L * i, 8, mrA.lkey()).remote(lb.memB.address() + 8L * i, rkey));
            }
            List<Wc> got = drain(lb, 40);
            for (int i = 0; i < 40; i++) {
                assertThat(got.get(i).wrId()).isEqualTo(i);
                assertThat(got.get(i).status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(lb.memB.get(JAVA_LONG, 8L * i)).isEqualTo(1000L + i);
            }
            assertThat(a.peerAnswers.position()).as("the target wrote no answer record for the WRITEs").isZero();
            assertThat(a.peerFinished()).as("its finished word says them").isPositive();
            // WRITE, READ, WRITE, FETCH_ADD, SEND, WRITE, then a WRITE out of range (REM_ACCESS_ERR) and one
            // after it (flushed): in order, each with its verdict.
            lb.qpB.postRecv(w.reset().wrId(900).addSge(lb.memB.address() + 8192, 64, mrB.lkey()));
            long base = 4096;
            lb.memB.set(JAVA_LONG, base + 64, 77L); // what the READ finds
            lb.memB.set(JAVA_LONG, base + 128, 5L); // what FETCH_ADD finds
            lb.qpA.postSend(w.reset().wrId(100).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), 8, mrA.lkey()).remote(lb.memB.address() + base, rkey));
            lb.qpA.postSend(w.reset().wrId(101).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(lb.memA.address() + 1024, 8, mrA.lkey()).remote(lb.memB.address() + base + 64, rkey));
            lb.qpA.postSend(w.reset().wrId(102).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address() + 8, 8, mrA.lkey()).remote(lb.memB.address() + base + 8, rkey));
            lb.qpA.postSend(w.reset().wrId(103).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true)
                    .addSge(lb.memA.address() + 1032, 8, mrA.lkey()).remote(lb.memB.address() + base + 128, rkey)
                    .atomic(3, 0));
            lb.qpA.postSend(w.reset().wrId(104).opcode(Opcode.SEND).signaled(true).addSge(lb.memA.address() + 16, 8, mrA.lkey()));
            lb.qpA.postSend(w.reset().wrId(105).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address() + 24, 8, mrA.lkey()).remote(lb.memB.address() + base + 16, rkey));
            lb.qpA.postSend(w.reset().wrId(106).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address() + 32, 8, mrA.lkey()).remote(lb.memB.address() + (2 << 20), rkey));
            lb.qpA.postSend(w.reset().wrId(107).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address() + 40, 8, mrA.lkey()).remote(lb.memB.address() + base + 24, rkey));
            got = drain(lb, 8);
            assertThat(got).extracting(Wc::wrId).containsExactly(100L, 101L, 102L, 103L, 104L, 105L, 106L, 107L);
            assertThat(got).extracting(Wc::status).containsExactly(WcStatus.SUCCESS, WcStatus.SUCCESS,
                    WcStatus.SUCCESS, WcStatus.SUCCESS, WcStatus.SUCCESS, WcStatus.SUCCESS, WcStatus.REM_ACCESS_ERR,
                    WcStatus.WR_FLUSH_ERR);
            assertThat(lb.memA.get(JAVA_LONG, 1024)).as("the READ's bytes").isEqualTo(77L);
            assertThat(lb.memA.get(JAVA_LONG, 1032)).as("what FETCH_ADD found").isEqualTo(5L);
            assertThat(lb.memB.get(JAVA_LONG, base + 128)).isEqualTo(8L);
            assertThat(lb.memB.get(JAVA_LONG, base + 16)).as("the WRITE before the error").isEqualTo(lb.memA.get(JAVA_LONG, 24));
            assertThat(lb.memB.get(JAVA_LONG, 8192)).as("the SEND's bytes").isEqualTo(lb.memA.get(JAVA_LONG, 16));
            assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
            mrA.close();
            mrB.close();
        }
    }

    @Test
    void aFinishedWordThatRunsAheadOfTheRequestsStartedEndsTheConnection() throws Exception {
        try (Loopback lb = new Loopback("shm", Map.of(), 64, attrs().rnrRetry(7), attrs());
             LogCapture log = new LogCapture("io.regmem.registration.shm")) {
            MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            WorkRequest w = new WorkRequest(1);
            // A SEND the target holds for a receive (RNR retry 7: for ever): it waits for its verdict.
            lb.qpA.postSend(w.reset().wrId(1).opcode(Opcode.SEND).signaled(true).addSge(lb.memA.address(), 8, mrA.lkey()));
            lb.poll(lb.cqA);
            lb.poll(lb.cqB);
            ShmQp b = ShmProgressFaultTest.shm(lb.devB).qps()[0];
            b.lane().finished(1L << 40); // the target's side says it finished far more than was ever sent
            List<Wc> got = drain(lb, 1);
            assertThat(got.getFirst().status()).isNotEqualTo(WcStatus.SUCCESS);
            assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
            assertThat(log.text()).contains("the connection ends").contains("finished word moved to " + ((1L << 40) + 1));
            mrA.close();
        }
    }
}
