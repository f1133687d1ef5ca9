package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * RDMA between two processes: this JVM and a child JVM ({@link UcxPeerMain}) connected over the
 * loopback by {@code host:port}, once with UCX restricted to TCP in the child and once to shared
 * memory. Bytes cross exactly both ways (WRITE, READ, SEND/RECV); keys that are wrong, forged or
 * stale are refused at the target; a child killed with SIGKILL mid-transfer fails what was left
 * within a stated bound, leaks nothing, and a new child then works. With {@code oneSided=true} and
 * the child's memory from its {@code chunkSource()}: puts and gets cross byte-exact without the
 * child's checks, and a child killed under puts fails nothing of ours.
 */
@ExtendWith(NoLeaks.class)
class UcxProcessTest extends UcxPeerRig {
    private static final AtomicInteger PORTS = new AtomicInteger(27_000 + (int) (ProcessHandle.current().pid() % 2000));
    /** How long a killed peer may take to fail everything that was sent to it (README states 5 s). */
    private static final long KILL_BOUND_NANOS = 5_000_000_000L;

    private void open() {
        open(Map.of());
    }


    /** Closes this test's device (nothing may be left on it) and opens a new one with the defaults. */
    private void reopen() {
        mr.close();
        cq.close();
        pd.close();
        assertThat(dev.resources().survivors()).as(dev.resources().report()).isEmpty();
        dev.close();
        dev = null;
        open();
    }

    private UcxChild child(String tls) throws Exception {
        UcxChild c = new UcxChild(tls, PORTS.incrementAndGet());
        children.add(c);
        c.expect("LISTENING");
        return c;
    }






    /** A new child on {@code tls} connects, and a READ of its pattern comes back byte-exact; it then ends clean. */
    private void aNewPeerWorks(String tls) throws Exception {
        UcxChild next = child(tls);
        Conn d = connect(next);
        readsThePattern(d, 0);
        close(d);
        next.expect("GONE");
        next.finish();
    }

    /** Every 509th byte of {@code s} (which the test filled with WATCH) still holds WATCH: no transfer landed in it. */
    private static void holdsOnlyWatch(MemorySegment s, String what) {
        for (long k = 0; k < s.byteSize(); k += 509) {
            assertThat(s.get(ValueLayout.JAVA_BYTE, k)).as("%s byte %d", what, k).isEqualTo(UcxPeerMain.WATCH);
        }
    }

    /** The first 256 KiB of local memory: random bytes from {@code seed}. */
    private void fillRandom(long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        for (long i = 0; i < 262144; i += 8) {
            mem.set(ValueLayout.JAVA_LONG, i, r.nextLong());
        }
    }

    /** The worker ("channel=N") the child's KEY line says serves the connection. */
    private static String childChannel(String keyLine) {
        return keyLine.substring(keyLine.lastIndexOf(' ') + 1);
    }

    /**
     * Connections to another process run on a worker of their own, one per peer process at each end
     * (a peer that dies inside a shared-memory send then stops only its own connections' receives):
     * two at once share it, at both ends; it goes with the last of them; and connecting again and
     * again leaves no worker, mapping or descriptor behind in either process.
     */
    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void connectionsToAProcessShareAWorkerOfTheirOwnThatGoesWithTheLastOfThem(String tls) throws Exception {
        open();
        UcxChild child = child(tls);
        Conn c1 = connect(child);
        String child1 = childChannel(lastKeyLine);
        Conn c2 = connect(child);
        String child2 = childChannel(lastKeyLine);
        UcxQp q1 = c1.qp().unwrap(UcxQp.class);
        UcxQp q2 = c2.qp().unwrap(UcxQp.class);
        assertThat(q1.channel).isNotSameAs(q1.device.main).isSameAs(q2.channel);
        assertThat(q1.device.channels()).containsExactly(q1.channel);
        assertThat(child1).isNotEqualTo("channel=0").isEqualTo(child2);
        readsThePattern(c2, 4096);
        readsThePattern(c1, 0);
        UcxDevice device = q1.device;
        close(c1);
        child.expect("GONE");
        assertThat(device.channels()).as("a channel lives while one of its QPs does").hasSize(1);
        readsThePattern(c2, 8192); // (the connection left runs on)
        close(c2);
        child.expect("GONE");
        assertThat(device.channels()).as("the last QP of a channel takes its worker with it").isEmpty();

        long[] mine = null;
        long[] theirs = null;
        for (int round = 0; round < 60; round++) {
            if (round == 10) { // after the first rounds settled whatever UCX and the JVM keep
                mine = UcxChild.holdings(ProcessHandle.current().pid());
                theirs = UcxChild.holdings(child.process.pid());
            }
            Conn c = connect(child);
            assertThat(childChannel(lastKeyLine)).isNotEqualTo("channel=0");
            c.qp().postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(mem.address(), 4096, mr.lkey()).remote(c.remote() + round, c.key()));
            assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(mem.get(ValueLayout.JAVA_BYTE, 4095)).isEqualTo(UcxPeerMain.pattern(round + 4095));
            close(c);
            child.expect("GONE");
            assertThat(device.channels()).isEmpty();
        }
        long[] mineAfter = UcxChild.holdings(ProcessHandle.current().pid());
        long[] theirsAfter = UcxChild.holdings(child.process.pid());
        assertThat(mineAfter[0] - mine[0]).as("this process's mappings added by 50 connections (%d before)", mine[0])
                .isLessThan(40);
        assertThat(mineAfter[1] - mine[1]).as("this process's descriptors added (%d before)", mine[1]).isLessThan(10);
        assertThat(theirsAfter[0] - theirs[0]).as("the child's mappings added (%d before)", theirs[0]).isLessThan(40);
        assertThat(theirsAfter[1] - theirs[1]).as("the child's descriptors added (%d before)", theirs[1]).isLessThan(10);
        child.finish();
    }

    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void writeReadAndSendCrossByteExact(String tls) throws Exception {
        open();
        UcxChild child = child(tls);
        Conn c = connect(child);
        readsThePattern(c, 1000);
        UcxEndpoint ep = c.qp().unwrap(UcxQp.class).endpointObject();
        assertThat(ep.eagerOnly).as("large transfers eager on TCP alone, by rendezvous over shared memory")
                .isEqualTo(tls.equals("tcp"));
        // WRITE 256 KiB of random bytes in four pieces, READ them back into other memory
        fillRandom(7);
        c.qp().postSend(new WorkRequest(4).wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 65536, mr.lkey()).addSge(mem.address() + 65536, 65536, mr.lkey())
                .addSge(mem.address() + 131072, 65536, mr.lkey()).addSge(mem.address() + 196608, 65536, mr.lkey())
                .remote(c.remote() + 4096, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        c.qp().postSend(new WorkRequest(1).wrId(3).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mem.address() + (1 << 20), 262144, mr.lkey()).remote(c.remote() + 4096, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(mem.asSlice(1 << 20, 262144).mismatch(mem.asSlice(0, 262144))).isEqualTo(-1);
        // SEND: the child echoes it; the echo lands in a posted receive
        c.qp().postRecv(new WorkRequest(1).wrId(9).addSge(mem.address() + (2 << 20), 8192, mr.lkey()));
        c.qp().postSend(new WorkRequest(1).wrId(4).opcode(Opcode.SEND).signaled(true)
                .addSge(mem.address() + 333, 5000, mr.lkey()));
        record Seen(WcStatus status, Opcode opcode, long bytes) {
        }
        List<Seen> got = new ArrayList<>();
        while (got.size() < 2) {
            WorkCompletion wc = await();
            got.add(new Seen(wc.status(), wc.opcode(), wc.byteLen()));
        }
        assertThat(got).extracting(Seen::status).containsOnly(WcStatus.SUCCESS);
        assertThat(got).contains(new Seen(WcStatus.SUCCESS, Opcode.RECV, 5000));
        assertThat(mem.asSlice(2 << 20, 5000).mismatch(mem.asSlice(333, 5000))).isEqualTo(-1);
        close(c);
        child.expect("GONE"); // the child saw the disconnect
        child.finish();
    }

    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void wrongForgedAndStaleKeysAreRefusedByTheOtherProcess(String tls) throws Exception {
        open();
        UcxChild child = child(tls);
        Conn c = connect(child);
        // a forged envelope never reaches UCX
        byte[] forged = new byte[64];
        assertThatThrownBy(() -> c.qp().importRemoteKey(MemorySegment.ofArray(forged)))
                .isInstanceOf(RdmaException.class).matches(e -> ((RdmaException) e).errno() == Errno.EINVAL);
        // past the region: refused before it is sent, nothing moves
        c.qp().postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 4096, mr.lkey()).remote(c.remote() + (1 << 20) - 100, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        close(c);
        child.expect("GONE");

        // stale: the child deregisters; a WRITE through the old key is refused there
        Conn d = connect(child);
        child.command("DEREG");
        child.expect("DEREGISTERED");
        d.qp().postSend(new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 4096, mr.lkey()).remote(d.remote(), d.key()));
        assertThat(await().status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        close(d);
        child.expect("GONE");
        child.finish();
    }

    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void aPeerKilledMidTransferFailsWhatWasLeftAndANewPeerWorks(String tls) throws Exception {
        open();
        UcxChild child = child(tls);
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
                failed += one[0].status() == WcStatus.SUCCESS ? 0 : 1;
                assertThat(one[0].status()).isIn(WcStatus.SUCCESS, WcStatus.WR_FLUSH_ERR, WcStatus.RETRY_EXC_ERR);
                done++;
            }
            assertThat(System.nanoTime() - start).as("every request completes within the bound (%d done)", done)
                    .isLessThan(KILL_BOUND_NANOS);
        }
        System.out.printf("UcxProcessTest: %s: %d of %d requests failed, all completed %d ms after the kill%n", tls, failed,
                posted, (System.nanoTime() - start) / 1_000_000);
        assertThat(failed).as("the killed peer cannot have acknowledged everything").isPositive();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (c.id().connState() != CmId.ConnState.DISCONNECTED) {
            assertThat(System.nanoTime()).as("DISCONNECTED reported").isLessThan(deadline);
            Thread.sleep(1);
        }
        assertThat(c.qp().state()).isEqualTo(QueuePair.State.ERROR);
        close(c);

        if (tls.contains("posix")) {
            // The peer may have died inside a send into this device's shared-memory FIFO, which then
            // delivers nothing more (docs/providers.md, "A peer process killed inside a shared-memory
            // send"): the new peer is served by a new device, as the docs advise.
            reopen();
        }
        UcxChild next = child(tls);
        Conn d = connect(next);
        d.qp().postSend(new WorkRequest(1).wrId(7).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mem.address(), 4096, mr.lkey()).remote(d.remote(), d.key()));
        long readAt = System.nanoTime();
        WcStatus read = await().status();
        assertThat(read).as("the READ from the new peer (completed after %d ms; the peer said:%n%s)",
                (System.nanoTime() - readAt) / 1_000_000, next.output()).isEqualTo(WcStatus.SUCCESS);
        assertThat(mem.get(ValueLayout.JAVA_BYTE, 100)).isEqualTo(UcxPeerMain.pattern(100));
        close(d);
        next.expect("GONE");
        next.finish();
    }

    /**
     * Atomics into another process: 256 FETCH_AND_ADDs of 1 on one address of the child's region,
     * up to 32 in flight, find every value from the initial one on exactly once; then a CMP_AND_SWP
     * that matches swaps and one that does not leaves the value, and a READ sees the result.
     */
    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void atomicsIntoAnotherProcessAreExactAndFindEveryValueOnce(String tls) throws Exception {
        open();
        UcxChild child = child(tls);
        Conn c = connect(child);
        long initial = 0;
        for (int i = 7; i >= 0; i--) {
            initial = (initial << 8) | (UcxPeerMain.pattern(512 + i) & 0xFF); // little-endian, as the child's long at 512
        }
        int n = 256;
        java.util.BitSet seen = new java.util.BitSet();
        WorkRequest wr = new WorkRequest(1);
        int posted = 0;
        int done = 0;
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (done < n) {
            assertThat(System.nanoTime()).as("the atomics end within 60 s (%d of %d)", done, n).isLessThan(deadline);
            if (posted < n && posted - done < 32) {
                wr.reset().wrId(posted).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true).atomic(1, 0)
                        .addSge(mem.address() + 8L * posted, 8, mr.lkey()).remote(c.remote() + 512, c.key());
                c.qp().postSend(wr);
                posted++;
            }
            if (cq.poll(one) == 1) {
                assertThat(one[0].status()).as("atomic %d", one[0].wrId()).isEqualTo(WcStatus.SUCCESS);
                long found = mem.get(ValueLayout.JAVA_LONG, 8 * one[0].wrId()) - initial;
                assertThat(found).as("atomic %d found the initial value + %d", one[0].wrId(), found).isBetween(0L, n - 1L);
                assertThat(seen.get((int) found)).as("the value initial + %d found twice", found).isFalse();
                seen.set((int) found);
                done++;
            }
        }
        long now = initial + n;
        c.qp().postSend(wr.reset().wrId(1000).opcode(Opcode.ATOMIC_CMP_AND_SWP).signaled(true).atomic(now, 42)
                .addSge(mem.address(), 8, mr.lkey()).remote(c.remote() + 512, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(mem.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(now);
        c.qp().postSend(wr.reset().wrId(1001).opcode(Opcode.ATOMIC_CMP_AND_SWP).signaled(true).atomic(now, 43)
                .addSge(mem.address(), 8, mr.lkey()).remote(c.remote() + 512, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(mem.get(ValueLayout.JAVA_LONG, 0)).as("no match: the value found").isEqualTo(42L);
        c.qp().postSend(wr.reset().wrId(1002).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mem.address() + 4096, 16, mr.lkey()).remote(c.remote() + 504, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(mem.get(ValueLayout.JAVA_LONG, 4096 + 8)).isEqualTo(42L);
        assertThat(mem.get(ValueLayout.JAVA_BYTE, 4096)).as("its neighbour untouched").isEqualTo(UcxPeerMain.pattern(504));
        close(c);
        child.expect("GONE");
        child.finish();
    }

    /**
     * A peer process that stops (SIGSTOP: its sockets stay open, it answers nothing): a request to
     * it completes RETRY_EXC_ERR once the answer timeout (1 s here) is over, as a NIC's retries run
     * out, and a deregistration meanwhile does not wait for the answer (its memory is no longer in
     * use once UCX sent the bytes). The peer, continued, sees the disconnect and ends clean.
     */
    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void aStoppedPeerIsATimeoutAndADeregistrationDoesNotWaitForIt(String tls) throws Exception {
        open(java.util.Map.of("answerTimeoutMillis", "1000"));
        UcxChild child = child(tls);
        Conn c = connect(child);
        readsThePattern(c, 0);
        MemoryRegion source = pd.register(mem.asSlice(1 << 20, 65536), Access.LOCAL_WRITE);
        signal("STOP", child);
        try {
            c.qp().postSend(new WorkRequest(1).wrId(5).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(mem.address() + (1 << 20), 65536, source.lkey()).remote(c.remote(), c.key()));
            Thread.sleep(50);
            source.close(); // returns without the answer
            assertThat(cq.poll(one)).as("the WRITE still waits for its answer after the deregistration returned (%s)",
                    one[0]).isZero();
            assertThat(c.qp().diagnostics()).as("what the QP can tell of its transport")
                    .startsWith("ucx: peer QP ").contains("endpoint open", "the oldest (#", "its answer not in",
                            "device: messages dropped 0, callbacks failed 0");
            long start = System.nanoTime();
            WorkCompletion wc = await();
            assertThat(wc.wrId()).isEqualTo(5);
            assertThat(wc.status()).isEqualTo(WcStatus.RETRY_EXC_ERR);
            assertThat(System.nanoTime() - start).isLessThan(KILL_BOUND_NANOS);
            assertThat(c.qp().state()).isEqualTo(QueuePair.State.ERROR);
        } finally {
            signal("CONT", child);
        }
        close(c);
        child.expect("GONE");
        child.finish();
    }

    /**
     * {@code oneSided=true}, over shared memory: the peer gives the memory behind a key back to UCX
     * before the key's first use, so UCX cannot unpack it. The post does not throw, the request goes
     * as a message the peer refuses (REM_ACCESS_ERR), the QP flushes what follows, and no poll throws.
     */
    @Test
    void oneSidedToMemoryThePeerGaveBackIsACompletionNeverAnException() throws Exception {
        UcxAvailable.requireOneSided();
        open(java.util.Map.of("oneSided", "true"));
        UcxChild child = new UcxChild("sysv,posix,cma", PORTS.incrementAndGet(), "chunk", java.util.Map.of());
        children.add(child);
        child.expect("LISTENING");
        Conn c = connect(child); // the key is imported; UCX unpacks it at its first use
        child.command("FREECHUNK");
        child.expect("FREED");
        for (int i = 0; i < 3; i++) {
            c.qp().postSend(new WorkRequest(1).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(mem.address(), 4096, mr.lkey()).remote(c.remote(), c.key()));
        }
        for (int i = 0; i < 3; i++) {
            WorkCompletion wc = await();
            assertThat(wc.wrId()).isEqualTo(i);
            assertThat(wc.status()).isEqualTo(i == 0 ? WcStatus.REM_ACCESS_ERR : WcStatus.WR_FLUSH_ERR);
        }
        assertThat(c.qp().outstandingSends()).isZero();
        assertThat(cq.poll(one)).isZero();
        close(c);
        child.expect("GONE");
        child.finish();
    }

    /**
     * Rendezvous WRITEs (128 KiB, into the first half of the child's region) and READs (128 KiB, of
     * its second half) stream while the child deregisters the region and then fills it with
     * {@link UcxPeerMain#WATCH}: every request completes; those that succeeded moved exact bytes (a
     * READ never sees the WATCH bytes written after the deregistration returned); the first failure
     * is REM_ACCESS_ERR and everything behind it WR_FLUSH_ERR; and once everything completed, nothing
     * wrote the deregistered memory (CHECK). Then a rendezvous WRITE through the stale key, on a new
     * connection, is refused and moves no byte either.
     */
    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void aDeregistrationAtTheTargetRacingRendezvousWritesAndReadsLeavesItsMemoryAlone(String tls) throws Exception {
        open();
        UcxChild child = child(tls);
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
                WorkRequest wr = new WorkRequest(1).wrId(i).opcode(read ? Opcode.RDMA_READ : Opcode.RDMA_WRITE).signaled(true)
                        .remote(remote, c.key());
                wr.addSge(read ? mem.address() + (1 << 20) + (i % 8) * (long) chunk : mem.address(), chunk, mr.lkey());
                c.qp().postSend(wr);
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
            if (posted > 100_000) {
                throw new AssertionError("the deregistration never took effect");
            }
        }
        child.expect("DEREGISTERED");
        child.expect("GONE"); // (a refused request breaks the connection at both ends)
        System.out.printf("UcxProcessTest: %s: %d requests succeeded before the deregistration refused them%n", tls,
                completed - 1 - (posted - completed));
        Thread.sleep(200); // (anything late would land now)
        child.command("CHECK");
        child.expect("INTACT");
        close(c);

        Conn d = connect(child); // the key is stale now: a rendezvous WRITE through it is refused
        int stale = d.qp().importRemoteKey(MemorySegment.ofArray(c.exported()));
        d.qp().postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), chunk, mr.lkey()).remote(c.remote(), stale));
        assertThat(await().status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        child.expect("GONE");
        Thread.sleep(100);
        child.command("CHECK");
        child.expect("INTACT");
        close(d);
        child.finish();
    }

    /**
     * This side deregisters the source of its rendezvous WRITEs and the sink of its rendezvous READs
     * while they stream, then writes a marker into both: once everything completed, the sink still
     * holds only the marker (no READ's bytes landed after the deregistration returned), every request
     * either succeeded or failed LOC_PROT_ERR (the first) or WR_FLUSH_ERR (behind it).
     */
    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void aLocalDeregistrationRacingRendezvousWritesAndReadsLeavesItsMemoryAlone(String tls) throws Exception {
        open();
        UcxChild child = child(tls);
        Conn c = connect(child);
        int chunk = 131072;
        MemorySegment src = mem.asSlice(0, chunk);
        MemorySegment sink = mem.asSlice(1 << 20, 8L * chunk);
        MemoryRegion srcMr = pd.register(src, Access.LOCAL_WRITE);
        MemoryRegion sinkMr = pd.register(sink, Access.LOCAL_WRITE);
        src.fill((byte) 0x22);
        int posted = 0;
        int completed = 0;
        boolean failed = false;
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (posted < 64 || completed < posted) {
            assertThat(System.nanoTime()).as("the stream ends within 60 s").isLessThan(deadline);
            if (posted < 64 && posted - completed < 8) {
                int i = posted++;
                boolean read = (i & 1) == 1;
                WorkRequest wr = new WorkRequest(1).wrId(i).opcode(read ? Opcode.RDMA_READ : Opcode.RDMA_WRITE).signaled(true)
                        .remote(c.remote() + (read ? 524288 : 0), c.key());
                wr.addSge(read ? sink.address() + (i % 8) * (long) chunk : src.address(), chunk,
                        read ? sinkMr.lkey() : srcMr.lkey());
                try {
                    c.qp().postSend(wr);
                } catch (RdmaException e) { // (the QP is in the error state already: as verbs, the post is flushed)
                    posted--;
                    break;
                }
                if (i == 20) {
                    srcMr.close();
                    sinkMr.close();
                    sink.fill(UcxPeerMain.WATCH);
                    src.fill(UcxPeerMain.WATCH);
                }
            }
            if (cq.poll(one) == 1) {
                WorkCompletion wc = one[0];
                assertThat(wc.wrId()).isEqualTo(completed++);
                if (!failed && wc.status() != WcStatus.SUCCESS) {
                    failed = true;
                    assertThat(wc.status()).as("the first failure").isEqualTo(WcStatus.LOC_PROT_ERR);
                } else if (failed) {
                    assertThat(wc.status()).isEqualTo(WcStatus.WR_FLUSH_ERR);
                }
            }
        }
        while (completed < posted) {
            assertThat(System.nanoTime()).isLessThan(deadline);
            if (cq.poll(one) == 1) {
                completed++;
            }
        }
        assertThat(failed).as("requests after the deregistration failed").isTrue();
        Thread.sleep(200);
        for (long k = 0; k < sink.byteSize(); k++) {
            assertThat(sink.get(ValueLayout.JAVA_BYTE, k)).as("sink byte %d", k).isEqualTo(UcxPeerMain.WATCH);
        }
        close(c);
        child.expect("GONE");
        child.finish();
    }

    /**
     * The peer answers a 1 MiB READ by rendezvous and is killed before this side pulls the answer
     * (this side does not progress until the peer is gone): UCX's pull then finds no process behind
     * the answer. This process lives on, the READ fails within the bound, its sink holds no byte of
     * the answer, and a new peer works.
     */
    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void aPeerKilledBeforeItsRendezvousAnswerIsPulledFailsTheReadAndThisProcessLives(String tls) throws Exception {
        open();
        UcxChild child = child(tls);
        Conn c = connect(child);
        readsThePattern(c, 0);
        MemorySegment sink = mem.asSlice(1 << 20, 1 << 20);
        sink.fill(UcxPeerMain.WATCH);
        c.qp().postSend(new WorkRequest(1).wrId(9).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(sink.address(), sink.byteSize(), mr.lkey()).remote(c.remote(), c.key()));
        Thread.sleep(300); // (the peer answers meanwhile; nothing here progresses)
        child.process.destroyForcibly();
        assertThat(child.process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        long start = System.nanoTime();
        WorkCompletion wc = await();
        assertThat(wc.wrId()).isEqualTo(9);
        assertThat(wc.status()).isIn(WcStatus.RETRY_EXC_ERR, WcStatus.WR_FLUSH_ERR, WcStatus.REM_OP_ERR);
        assertThat(System.nanoTime() - start).isLessThan(KILL_BOUND_NANOS);
        holdsOnlyWatch(sink, "sink");
        close(c);

        aNewPeerWorks(tls);
    }

    /** A writer child connected to a listener of this side's, warmed up (its small WRITE completed). */
    private record Writer(UcxChild child, CmId listener, CmId id, QueuePair qp, MemoryRegion mr, MemorySegment target) {
    }

    /**
     * Starts a writer child ({@link UcxPeerMain}'s writer mode) against a listener of this side's and
     * hands it the key of {@code target} (1 MiB filled with WATCH; the 4 KiB behind it take its warm-up).
     */
    private Writer writer(String tls) throws Exception {
        MemorySegment target = mem.asSlice(1 << 20, 1 << 20);
        target.fill(UcxPeerMain.WATCH);
        MemoryRegion targetMr = pd.register(mem.asSlice(1 << 20, (1 << 20) + 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int port = PORTS.incrementAndGet();
        CmId listener = dev.createCmId();
        listener.listen("127.0.0.1:" + port);
        UcxChild writer = new UcxChild(tls, port, "writer", java.util.Map.of());
        children.add(writer);
        CmId id = null;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (id == null) {
            assertThat(System.nanoTime()).as("the writer connects within 10 s").isLessThan(deadline);
            id = listener.getRequest();
            Thread.sleep(1);
        }
        QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(16).maxRecvWr(1));
        id.accept();
        writer.expect("CONNECTED");
        writer.command("WRITE " + HexFormat.of().formatHex(targetMr.exportRemoteKey()) + " " + target.address() + " "
                + target.byteSize() + " 4");
        while (writer.lines.isEmpty()) { // (its small WRITE completes while this side progresses)
            cq.poll(one);
            assertThat(System.nanoTime()).as("the writer warms up within 10 s").isLessThan(deadline + 10_000_000_000L);
        }
        assertThat(writer.expect("WARM")).isEqualTo("WARM SUCCESS");
        return new Writer(writer, listener, id, qp, targetMr, target);
    }

    /**
     * Once the writer posted (this side not progressing): the connection fails within the bound, no
     * byte of the writer's lands, and this side then tears down and still works with a new peer.
     */
    private void failsAloneAndThisSideLives(Writer w, String tls) throws Exception {
        long start = System.nanoTime();
        while (w.qp().state() != QueuePair.State.ERROR) {
            cq.poll(one);
            assertThat(System.nanoTime() - start).as("the connection fails within the bound (the writer said:%n%s)",
                    w.child().output()).isLessThan(KILL_BOUND_NANOS);
            Thread.sleep(1);
        }
        holdsOnlyWatch(w.target(), "target");
        w.child().process.destroyForcibly();
        w.id().disconnect();
        while (cq.poll(one) > 0) {
            // flushed
        }
        w.id().destroyQp();
        w.id().close();
        w.listener().close();
        w.mr().close();

        aNewPeerWorks(tls);
    }

    /**
     * The other way round: a peer posts 1 MiB rendezvous WRITEs into this side's memory and is killed
     * before this side (which does not progress meanwhile) pulls them: no byte of them lands, the
     * connection fails within the bound, and this process goes on.
     */
    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void aWriterKilledBeforeItsRendezvousWritesArePulledMovesNoByteAndThisProcessLives(String tls) throws Exception {
        open();
        Writer w = writer(tls);
        w.child().command("GO"); // from here on this side does not progress until the writer is gone
        assertThat(w.child().expect("POSTED")).as("nothing completed: this side pulled nothing").isEqualTo("POSTED");
        w.child().process.destroyForcibly();
        assertThat(w.child().process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        failsAloneAndThisSideLives(w, tls);
    }

    /**
     * A deregistration of the memory a READ's answer is to land in waits for that answer, but not for
     * ever: with no answer timeout and a stopped peer it gives up after 10 s and returns; the answer
     * that comes once the peer runs again is refused, so nothing touches the memory after the close
     * returned, and the READ completes with an error.
     */
    @Test
    void aDeregistrationWaitingForAStoppedPeersAnswerGivesUpAndTheLateAnswerIsRefused() throws Exception {
        open(java.util.Map.of("answerTimeoutMillis", "0"));
        UcxChild child = child("tcp");
        Conn c = connect(child);
        MemorySegment sink = mem.asSlice(2 << 20, 65536);
        sink.fill((byte) 0x5A);
        MemoryRegion sinkMr = pd.register(sink, Access.LOCAL_WRITE);
        signal("STOP", child);
        try {
            c.qp().postSend(new WorkRequest(1).wrId(6).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(sink.address(), 65536, sinkMr.lkey()).remote(c.remote(), c.key()));
            Thread.sleep(50);
            sinkMr.close(); // waits for the answer, then gives up (the peer is stopped)
            assertThat(sinkMr.isDestroyed()).isTrue();
        } finally {
            signal("CONT", child);
        }
        WorkCompletion wc = await(); // the answer comes now, and is refused
        assertThat(wc.wrId()).isEqualTo(6);
        assertThat(wc.status()).isEqualTo(WcStatus.LOC_PROT_ERR);
        for (int i = 0; i < 65536; i++) {
            assertThat(sink.get(ValueLayout.JAVA_BYTE, i)).as("byte %d after the deregistration returned", i).isEqualTo((byte) 0x5A);
        }
        close(c);
        child.expect("GONE");
        child.finish();
    }

    private static void signal(String name, UcxChild child) throws Exception {
        Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(child.process.pid())).inheritIO().start();
        assertThat(kill.waitFor(10, TimeUnit.SECONDS)).isTrue();
        assertThat(kill.exitValue()).isZero();
        if (name.equals("STOP")) { // the signal is delivered asynchronously: wait until every thread stopped
            java.nio.file.Path stat = java.nio.file.Path.of("/proc", Long.toString(child.process.pid()), "stat");
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!java.nio.file.Files.readString(stat).replaceFirst("^.*\\) ", "").startsWith("T")) {
                assertThat(System.nanoTime()).as("the child stopped").isLessThan(deadline);
                Thread.sleep(1);
            }
        }
    }

    @Test
    void oneSidedPutsAndGetsReachTheOtherProcessAndAKilledOneFailsNothingOfOurs() throws Exception {
        UcxAvailable.requireOneSided();
        open(java.util.Map.of("oneSided", "true"));
        UcxChild child = new UcxChild("sysv,posix,cma", PORTS.incrementAndGet(), "chunk", java.util.Map.of());
        children.add(child);
        child.expect("LISTENING");
        Conn c = connect(child);
        readsThePattern(c, 300);
        fillRandom(3);
        c.qp().postSend(new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 262144, mr.lkey()).remote(c.remote() + 8192, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        c.qp().postSend(new WorkRequest(1).wrId(3).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mem.address() + (1 << 20), 262144, mr.lkey()).remote(c.remote() + 8192, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(mem.asSlice(1 << 20, 262144).mismatch(mem.asSlice(0, 262144))).isEqualTo(-1);
        // the target checks nothing in this mode: a put into its deregistered (but still allocated) region lands
        child.command("DEREG");
        child.expect("DEREGISTERED");
        c.qp().postSend(new WorkRequest(1).wrId(4).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 4096, mr.lkey()).remote(c.remote(), c.key()));
        assertThat(await().status()).as("one-sided: no target check").isEqualTo(WcStatus.SUCCESS);
        // killed under 100 puts: each completes (into memory nobody reads any more) or fails; no crash here
        for (int i = 0; i < 100; i++) {
            c.qp().postSend(new WorkRequest(1).wrId(100 + i).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(mem.address() + (i % 16) * 65536L, 65536, mr.lkey()).remote(c.remote() + (i % 15) * 65536L, c.key()));
        }
        child.process.destroyForcibly();
        long start = System.nanoTime();
        for (int done = 0; done < 100; ) {
            if (cq.poll(one) == 1) {
                assertThat(one[0].wrId()).isEqualTo(100 + done);
                assertThat(one[0].status()).isIn(WcStatus.SUCCESS, WcStatus.WR_FLUSH_ERR, WcStatus.RETRY_EXC_ERR);
                done++;
            }
            assertThat(System.nanoTime() - start).isLessThan(KILL_BOUND_NANOS);
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (c.id().connState() != CmId.ConnState.DISCONNECTED) {
            assertThat(System.nanoTime()).as("DISCONNECTED reported").isLessThan(deadline);
            Thread.sleep(1);
        }
        close(c);
    }
}
