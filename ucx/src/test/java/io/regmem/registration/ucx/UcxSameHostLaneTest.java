package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.CmId;
import io.regmem.registration.Opcode;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A ucx connection to another process of this host takes the same-host lane when both devices have
 * {@code sameHostLane} on (the default; this module's build turns the default off, so each side here
 * says it), and UCX when either has it off. Over the lane, between this JVM and a child JVM
 * ({@link UcxPeerMain}): ucx's exported keys work unchanged (a range the envelope rules out is refused
 * before anything is sent, a stale key by the target), bytes cross exactly (pulled WRITEs, READs,
 * SEND/RECV, atomics), a SIGKILLed child fails what was left at once, and a deregistration at the
 * target racing WRITEs and READs leaves its memory alone once it returned.
 */
@ExtendWith(NoLeaks.class)
class UcxSameHostLaneTest extends UcxPeerRig {
    private static final AtomicInteger PORTS = new AtomicInteger(31_000 + (int) (ProcessHandle.current().pid() % 1500)); // (below the ephemeral range, 32768-60999)
    private static final Map<String, String> LANE = Map.of("sameHostLane", "true");
    private static final Map<String, String> NO_LANE = Map.of("sameHostLane", "false");


    private UcxChild child(boolean lane) throws Exception {
        UcxChild c = new UcxChild("sysv,posix,cma", PORTS.incrementAndGet(), "arena",
                Map.of("OPTIONS", "sameHostLane=" + lane));
        children.add(c);
        c.expect("LISTENING");
        return c;
    }






    @Test
    void aProcessOfThisHostIsReachedOverTheLaneAndBytesCrossExactly() throws Exception {
        open(LANE);
        UcxChild child = child(true);
        Conn c = connect(child);
        assertThat(c.qp().diagnostics()).startsWith("ucx over the same-host lane: shm: lane to process "
                + child.process.pid());
        readsThePattern(c, 1000);
        // WRITE 256 KiB of random bytes in four entries (pulled by the child), READ them back
        SplittableRandom random = new SplittableRandom(7);
        for (int i = 0; i < 262144; i += 8) {
            mem.set(ValueLayout.JAVA_LONG_UNALIGNED, i, random.nextLong());
        }
        c.qp().postSend(new WorkRequest(4).wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 65536, mr.lkey()).addSge(mem.address() + 65536, 65536, mr.lkey())
                .addSge(mem.address() + 131072, 65536, mr.lkey()).addSge(mem.address() + 196608, 65536, mr.lkey())
                .remote(c.remote() + 4096, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        c.qp().postSend(new WorkRequest(1).wrId(3).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mem.address() + (1 << 20), 262144, mr.lkey()).remote(c.remote() + 4096, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(mem.asSlice(1 << 20, 262144).mismatch(mem.asSlice(0, 262144))).isEqualTo(-1);
        // atomics: 64 FETCH_AND_ADDs of 1 find 64 consecutive values
        mem.set(ValueLayout.JAVA_LONG, 3 << 20, 0);
        for (int i = 0; i < 64; i++) {
            c.qp().postSend(new WorkRequest(1).wrId(100 + i).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true)
                    .addSge(mem.address() + (3 << 20) + 8L * i, 8, mr.lkey()).remote(c.remote() + 8192, c.key()).atomic(1, 0));
        }
        long first = -1;
        for (int i = 0; i < 64; i++) {
            assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        }
        for (int i = 0; i < 64; i++) {
            long v = mem.get(ValueLayout.JAVA_LONG, (3 << 20) + 8L * i);
            if (i == 0) {
                first = v;
            }
            assertThat(v).as("the value the %dth add found", i).isEqualTo(first + i);
        }
        // SEND: the child echoes it into a posted receive
        c.qp().postRecv(new WorkRequest(1).wrId(9).addSge(mem.address() + (2 << 20), 8192, mr.lkey()));
        c.qp().postSend(new WorkRequest(1).wrId(4).opcode(Opcode.SEND).signaled(true).addSge(mem.address() + 333, 5000, mr.lkey()));
        List<Opcode> got = new ArrayList<>();
        while (got.size() < 2) {
            WorkCompletion wc = await();
            assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
            got.add(wc.opcode());
        }
        assertThat(got).containsExactlyInAnyOrder(Opcode.SEND, Opcode.RECV);
        assertThat(mem.asSlice(2 << 20, 5000).mismatch(mem.asSlice(333, 5000))).isEqualTo(-1);
        // past the region the envelope names: refused before anything is sent
        c.qp().postSend(new WorkRequest(1).wrId(5).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 4096, mr.lkey()).remote(c.remote() + (1 << 20) - 100, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        close(c);
        child.expect("GONE");

        // a stale key: the child deregisters, its check refuses the WRITE
        Conn d = connect(child);
        child.command("DEREG");
        child.expect("DEREGISTERED");
        d.qp().postSend(new WorkRequest(1).wrId(6).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 65536, mr.lkey()).remote(d.remote(), d.key()));
        WorkCompletion wcx = await();
        assertThat(wcx.status()).as("%s (%s)", wcx, d.qp().diagnostics()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        close(d);
        child.expect("GONE");
        child.finish();
    }

    /**
     * 150 connections over the lane, one after the other, each with a READ: none keeps a UCX worker
     * (the one the requester made for its HELLO goes when the lane is chosen), and together they leave
     * no mapping or descriptor behind in either process.
     */
    @Test
    void connectingAgainAndAgainLeavesNothingBehindInEitherProcess() throws Exception {
        open(LANE);
        UcxChild child = child(true);
        long[] mine = null;
        long[] theirs = null;
        UcxDevice device = null;
        for (int round = 0; round < 150; round++) {
            if (round == 20) { // after the first rounds settled whatever UCX and the JVM keep
                mine = UcxChild.holdings(ProcessHandle.current().pid());
                theirs = UcxChild.holdings(child.process.pid());
            }
            Conn c = connect(child);
            device = c.qp().unwrap(UcxQp.class).device;
            assertThat(c.qp().diagnostics()).startsWith("ucx over the same-host lane");
            assertThat(device.channels()).as("no UCX worker for a connection over the lane").isEmpty();
            c.qp().postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(mem.address(), 4096, mr.lkey()).remote(c.remote() + round, c.key()));
            assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(mem.get(ValueLayout.JAVA_BYTE, 4095)).isEqualTo(UcxPeerMain.pattern(round + 4095));
            close(c);
            child.expect("GONE");
        }
        long[] mineAfter = UcxChild.holdings(ProcessHandle.current().pid());
        long[] theirsAfter = UcxChild.holdings(child.process.pid());
        assertThat(mineAfter[0] - mine[0]).as("this process's mappings added by 130 connections (%d before)", mine[0])
                .isLessThan(40);
        assertThat(mineAfter[1] - mine[1]).as("this process's descriptors added (%d before)", mine[1]).isLessThan(10);
        assertThat(theirsAfter[0] - theirs[0]).as("the child's mappings added (%d before)", theirs[0]).isLessThan(40);
        assertThat(theirsAfter[1] - theirs[1]).as("the child's descriptors added (%d before)", theirs[1]).isLessThan(10);
        child.finish();
    }

    /** "here": this side has the lane off, "there": the child has; either way the connection runs over UCX. */
    @ParameterizedTest(name = "lane off {0}")
    @ValueSource(strings = {"here", "there"})
    void eitherSideWithTheLaneOffConnectsOverUcx(String off) throws Exception {
        open(off.equals("here") ? NO_LANE : LANE);
        UcxChild child = child(!off.equals("there"));
        Conn c = connect(child);
        assertThat(c.qp().diagnostics()).startsWith("ucx: peer QP");
        readsThePattern(c, 77);
        close(c);
        child.expect("GONE");
        child.finish();
    }

    @Test
    void aPeerKilledMidTransferFailsWhatWasLeftAndANewPeerWorks() throws Exception {
        open(LANE);
        UcxChild child = child(true);
        Conn c = connect(child);
        int posted = 100;
        for (int i = 0; i < posted; i++) {
            c.qp().postSend(new WorkRequest(1).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(mem.address() + (i % 32) * 65536L, 65536, mr.lkey()).remote(c.remote() + (i % 16) * 65536L, c.key()));
        }
        child.process.destroyForcibly(); // SIGKILL
        long start = System.nanoTime();
        int done = 0;
        int failed = 0;
        while (done < posted) {
            if (cq.poll(one) == 1) {
                assertThat(one[0].wrId()).isEqualTo(done);
                assertThat(one[0].status()).isIn(WcStatus.SUCCESS, WcStatus.WR_FLUSH_ERR, WcStatus.RETRY_EXC_ERR);
                failed += one[0].status() == WcStatus.SUCCESS ? 0 : 1;
                done++;
            }
            assertThat(System.nanoTime() - start).as("every request completes within 5 s (%d done)", done)
                    .isLessThan(5_000_000_000L);
        }
        System.out.printf("UcxSameHostLaneTest: %d of %d requests failed, all completed %d ms after the kill%n", failed, posted,
                (System.nanoTime() - start) / 1_000_000);
        assertThat(failed).as("the killed peer cannot have answered everything").isPositive();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (c.id().connState() != CmId.ConnState.DISCONNECTED) {
            assertThat(System.nanoTime()).as("DISCONNECTED reported").isLessThan(deadline);
            Thread.sleep(1);
        }
        assertThat(c.qp().state()).isEqualTo(QueuePair.State.ERROR);
        close(c);
        UcxChild next = child(true);
        Conn d = connect(next);
        readsThePattern(d, 0);
        close(d);
        next.expect("GONE");
        next.finish();
    }

    /**
     * The child deregisters its region while this side streams 128 KiB WRITEs and READs through its
     * key, then fills it with a marker: nothing lands after the deregistration returned; the first
     * refused request fails REM_ACCESS_ERR and the rest are flushed.
     */
    @Test
    void aDeregistrationAtTheTargetRacingWritesAndReadsLeavesItsMemoryAlone() throws Exception {
        open(LANE);
        UcxChild child = child(true);
        Conn c = connect(child);
        int chunk = 131072;
        mem.asSlice(0, chunk).fill((byte) 0x11);
        int posted = 0;
        int completed = 0;
        WcStatus firstFailure = null;
        boolean deregistered = false;
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (completed < posted || firstFailure == null) {
            assertThat(System.nanoTime()).as("the stream ends within 60 s (%d of %d done)", completed, posted).isLessThan(deadline);
            if (firstFailure == null && posted - completed < 8) {
                int i = posted++;
                boolean read = (i & 1) == 1;
                long remote = c.remote() + (read ? 524288 : 0) + (i / 2 % 4) * (long) chunk;
                c.qp().postSend(new WorkRequest(1).wrId(i).opcode(read ? Opcode.RDMA_READ : Opcode.RDMA_WRITE).signaled(true)
                        .remote(remote, c.key())
                        .addSge(read ? mem.address() + (1 << 20) + (i % 8) * (long) chunk : mem.address(), chunk, mr.lkey()));
            }
            if (posted == 40 && !deregistered) {
                child.command("DEREGWATCH");
                deregistered = true;
            }
            if (cq.poll(one) == 1) {
                WorkCompletion wc = one[0];
                assertThat(wc.wrId()).as("completions in order").isEqualTo(completed);
                int i = completed++;
                if (firstFailure == null && wc.status() != WcStatus.SUCCESS) {
                    firstFailure = wc.status();
                    assertThat(wc.status()).as("the first failure (request %d)", i).isEqualTo(WcStatus.REM_ACCESS_ERR);
                } else if (firstFailure != null) {
                    assertThat(wc.status()).as("request %d, behind the failure", i).isEqualTo(WcStatus.WR_FLUSH_ERR);
                } else if ((i & 1) == 1) {
                    long at = (1 << 20) + (i % 8) * (long) chunk;
                    long from = 524288 + (i / 2 % 4) * (long) chunk;
                    for (int k = 0; k < chunk; k += 61) {
                        assertThat(mem.get(ValueLayout.JAVA_BYTE, at + k)).as("READ %d, byte %d", i, k)
                                .isEqualTo(UcxPeerMain.pattern(from + k));
                    }
                }
            }
            assertThat(posted).as("the deregistration took effect").isLessThan(100_000);
        }
        child.expect("DEREGISTERED");
        child.expect("GONE");
        Thread.sleep(200); // (anything late would land now)
        child.command("CHECK");
        child.expect("INTACT");
        close(c);
        child.finish();
    }
}
