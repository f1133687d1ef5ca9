package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_INT;
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
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The lane's acknowledgements: a WRITE's or SEND's success travels in the target's finished word, not
 * in an answer record, and completions still come in posting order with the verdicts RC gives when
 * they mix with READs, atomics and errors (which do have records); a finished word a peer moves
 * wrongly ends the connection. A large READ is answered by a grant the initiator copies out itself:
 * nothing that changes memory runs ahead of it, a deregistration at the target waits for the copy and
 * then withdraws the grant (the READ fails), and a grant or copied word that breaks the rules ends
 * the connection.
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

    private static void pattern(MemorySegment m, long at, long bytes, long seed) {
        for (long i = 0; i < bytes; i += 8) {
            m.set(JAVA_LONG, at + i, seed * 1_000_003L + i);
        }
    }

    /** Holds {@code lock} on a thread of its own until closed (a lock held by the test's thread would let its polls in). */
    private static AutoCloseable hold(ReentrantLock lock) throws InterruptedException {
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        Thread t = Thread.ofPlatform().start(() -> {
            lock.lock();
            try {
                held.countDown();
                done.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                lock.unlock();
            }
        });
        held.await();
        return () -> {
            done.countDown();
            t.join();
        };
    }

    /** Polls {@code b}'s CQ (its target serves) until it has a grant out, within 10 s. */
    private static void awaitGrant(Loopback lb, ShmQp b) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (b.target.grants.count() == 0) {
            assertThat(System.nanoTime()).as("the target grants the READ").isLessThan(deadline);
            lb.poll(lb.cqB);
        }
    }

    @Test
    void aLargeReadIsCopiedOutByItsInitiatorAndNothingThatChangesMemoryRunsAheadOfIt() throws Exception {
        try (Loopback lb = new Loopback("shm", Map.of(), 256, attrs(), attrs())) {
            MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion mrB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_ATOMIC);
            int rkey = lb.key(mrB);
            long n = 64 << 10;
            pattern(lb.memB, 0, n, 1); // what the first READ must find
            pattern(lb.memA, 0, n, 2); // what the WRITE after it puts there
            WorkRequest w = new WorkRequest(1);
            // READ, WRITE over the same range, READ, FETCH_ADD inside it: posted together, so the target sees all
            // four before the initiator copies the first READ's bytes out.
            lb.qpA.postSend(w.reset().wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(lb.memA.address() + (256 << 10), n, mrA.lkey()).remote(lb.memB.address(), rkey));
            lb.qpA.postSend(w.reset().wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), n, mrA.lkey()).remote(lb.memB.address(), rkey));
            lb.qpA.postSend(w.reset().wrId(3).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(lb.memA.address() + (512 << 10), n, mrA.lkey()).remote(lb.memB.address(), rkey));
            lb.qpA.postSend(w.reset().wrId(4).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true)
                    .addSge(lb.memA.address() + (768 << 10), 8, mrA.lkey()).remote(lb.memB.address() + 8, rkey).atomic(1, 0));
            List<Wc> got = drain(lb, 4);
            assertThat(got).extracting(Wc::status).containsOnly(WcStatus.SUCCESS);
            MemorySegment first = lb.memA.asSlice(256 << 10, n);
            for (long i = 0; i < n; i += 8) {
                assertThat(first.get(JAVA_LONG, i)).as("the first READ at %d: the bytes before the WRITE", i)
                        .isEqualTo(1_000_003L + i);
            }
            assertThat(lb.memA.asSlice(512 << 10, n).mismatch(lb.memA.asSlice(0, n))).as("the second READ: the WRITE's bytes")
                    .isEqualTo(-1);
            assertThat(lb.memA.get(JAVA_LONG, 768 << 10)).as("FETCH_ADD after the READs").isEqualTo(2 * 1_000_003L + 8);
            ShmQp b = ShmProgressFaultTest.shm(lb.devB).qps()[0];
            assertThat(b.lane().peerCopied()).as("the initiator said it copied both grants out (the second is request 2)")
                    .isEqualTo(3);
            mrA.close();
            mrB.close();
        }
    }

    @Test
    void readsBeyondTheGrantsATargetKeepsOutComeThroughTheRingInOrder() throws Exception {
        try (Loopback lb = new Loopback("shm", Map.of(), 256, attrs(), attrs())) {
            MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion mrB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_READ);
            int rkey = lb.key(mrB);
            int reads = Grants.MAX + 8;
            long n = ShmProvider.INLINE_THRESHOLD + 4096; // (above it: each READ asks for a grant)
            pattern(lb.memB, 0, n * reads, 3);
            ShmQp a = ShmProgressFaultTest.shm(lb.devA).qps()[0];
            ShmQp b = ShmProgressFaultTest.shm(lb.devB).qps()[0];
            WorkRequest w = new WorkRequest(1);
            for (int i = 0; i < reads; i++) {
                lb.qpA.postSend(w.reset().wrId(i).opcode(Opcode.RDMA_READ).signaled(true)
                        .addSge(lb.memA.address() + n * i, n, mrA.lkey()).remote(lb.memB.address() + n * i, rkey));
            }
            try (AutoCloseable held = hold(a.ctx.lock())) { // nothing is copied out: the target's grants fill up
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (b.lane().peerRequests.pending()) {
                    assertThat(System.nanoTime()).as("the target serves every READ").isLessThan(deadline);
                    lb.poll(lb.cqB);
                }
                assertThat(b.target.grants.count()).as("grants out at most").isEqualTo(Grants.MAX);
            }
            List<Wc> got = drain(lb, reads);
            assertThat(got).extracting(Wc::status).containsOnly(WcStatus.SUCCESS);
            for (int i = 0; i < reads; i++) {
                assertThat(got.get(i).wrId()).isEqualTo(i);
            }
            assertThat(lb.memA.asSlice(0, n * reads).mismatch(lb.memB.asSlice(0, n * reads))).as("every READ's bytes")
                    .isEqualTo(-1);
            mrA.close();
            mrB.close();
        }
    }

    @Test
    void aDeregistrationAtTheTargetWaitsForTheCopyThenWithdrawsTheGrantAndTheReadFails() throws Exception {
        try (Loopback lb = new Loopback("shm", Map.of("answerTimeoutMillis", "200"), 256, attrs(), attrs())) {
            MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion mrB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_READ);
            int rkey = lb.key(mrB);
            ShmQp a = ShmProgressFaultTest.shm(lb.devA).qps()[0];
            ShmQp b = ShmProgressFaultTest.shm(lb.devB).qps()[0];
            WorkRequest w = new WorkRequest(1);
            lb.qpA.postSend(w.reset().wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(lb.memA.address(), 64 << 10, mrA.lkey()).remote(lb.memB.address(), rkey));
            CompletableFuture<Long> dereg;
            try (AutoCloseable held = hold(a.ctx.lock())) { // the initiator cannot take its answers: the grant stays out
                awaitGrant(lb, b);
                long t0 = System.nanoTime();
                dereg = CompletableFuture.supplyAsync(() -> {
                    mrB.close();
                    return System.nanoTime() - t0;
                });
                Thread.sleep(50);
                assertThat(dereg).as("the deregistration waits for the copy").isNotDone();
                dereg.get(20, TimeUnit.SECONDS);
                assertThat(b.target.grants.count()).as("withdrawn").isZero();
                assertThat(b.lane().peerCopied()).isZero();
            }
            List<Wc> got = drain(lb, 1);
            assertThat(got.getFirst().status()).as("a READ whose grant was withdrawn fails").isEqualTo(WcStatus.REM_ACCESS_ERR);
            mrA.close();
        }
    }

    @Test
    void aGrantThatDoesNotFitItsReadOrACopiedWordPastTheGrantsEndsTheConnection() throws Exception {
        for (int variant = 0; variant < 2; variant++) {
            try (Loopback lb = new Loopback("shm", Map.of(), 256, attrs(), attrs());
                 LogCapture log = new LogCapture("io.regmem.registration.shm")) {
                MemoryRegion mrA = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
                MemoryRegion mrB = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_READ);
                int rkey = lb.key(mrB);
                ShmQp a = ShmProgressFaultTest.shm(lb.devA).qps()[0];
                ShmQp b = ShmProgressFaultTest.shm(lb.devB).qps()[0];
                WorkRequest w = new WorkRequest(1);
                String rule;
                if (variant == 0) {
                    // The target's side writes a grant for the READ whose entries add up to one byte more than it.
                    try (AutoCloseable held = hold(b.ctx.lock())) {
                        lb.qpA.postSend(w.reset().wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                                .addSge(lb.memA.address(), 64 << 10, mrA.lkey()).remote(lb.memB.address(), rkey));
                        Ring out = b.lane().myAnswers;
                        long at = out.claim(Wire.RGRANT, Wire.GRANT_HEADER + Wire.ENTRY);
                        out.segment().set(JAVA_LONG, at + Wire.G_SEQ, 0L);
                        out.segment().set(JAVA_INT, at + Wire.G_ENTRIES, 1);
                        out.segment().set(JAVA_LONG, at + Wire.GRANT_HEADER, lb.memB.address());
                        out.segment().set(JAVA_LONG, at + Wire.GRANT_HEADER + 8, (64 << 10) + 1);
                        out.publish();
                    }
                    rule = "entries add up to " + ((64 << 10) + 1);
                } else {
                    // The initiator's side says it copied far more grants than the target made.
                    // A READ and a WRITE the target holds behind its grant (so that it keeps looking at the word).
                    lb.qpA.postSend(w.reset().wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                            .addSge(lb.memA.address(), 64 << 10, mrA.lkey()).remote(lb.memB.address(), rkey));
                    lb.qpA.postSend(w.reset().wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                            .addSge(lb.memA.address(), 8, mrA.lkey()).remote(lb.memB.address(), rkey));
                    try (AutoCloseable held = hold(a.ctx.lock())) {
                        awaitGrant(lb, b);
                        a.lane().copied(1L << 40);
                        long deadline = System.nanoTime() + 10_000_000_000L;
                        while (lb.qpB.state() != QueuePair.State.ERROR) { // the target reads the word as it serves
                            assertThat(System.nanoTime()).as("the target ends the connection").isLessThan(deadline);
                            lb.poll(lb.cqB);
                        }
                    }
                    rule = "copied word moved to " + ((1L << 40) + 1);
                }
                List<Wc> got = drain(lb, 1);
                if (variant == 0) {
                    assertThat(got.getFirst().status()).isNotEqualTo(WcStatus.SUCCESS);
                    assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
                }
                assertThat(log.text()).contains("the connection ends").contains(rule);
                mrA.close();
                mrB.close();
            }
        }
    }
}
