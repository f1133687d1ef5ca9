package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.BitSet;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * ATOMIC_CMP_AND_SWP and ATOMIC_FETCH_AND_ADD as verbs has them (rdma-core's tests/test_atomic.py):
 * the value found comes back into the one 8-byte SGE, the target changes only as the operation says,
 * REMOTE_ATOMIC is required, a misaligned address is an invalid request, the post refuses anything but
 * one 8-byte SGE, and atomics from two connections on one address are atomic against each other.
 */
@ExtendWith(NoLeaks.class)
class AtomicsTest {
    private final Loopback lb = new Loopback();
    private final WorkRequest wr = new WorkRequest(2);

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private WorkCompletion post(Opcode op, long localAt, MemoryRegion local, long remoteAt, int rkey, long compareAdd,
            long swap) {
        wr.reset().wrId(op.ordinal()).opcode(op).signaled(true).atomic(compareAdd, swap)
                .addSge(lb.memA.address() + localAt, 8, local.lkey()).remote(remoteAt, rkey);
        lb.qpA.postSend(wr);
        return lb.one(lb.cqA);
    }

    @Test
    void compareAndSwapSwapsOnlyOnAMatchAndReturnsWhatItFound() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
        lb.memB.set(ValueLayout.JAVA_LONG, 64, 41L);
        WorkCompletion wc = post(Opcode.ATOMIC_CMP_AND_SWP, 0, local, lb.memB.address() + 64, lb.key(remote), 41L, 99L);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wc.opcode()).isEqualTo(Opcode.ATOMIC_CMP_AND_SWP);
        assertThat(wc.byteLen()).isEqualTo(8);
        assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 0)).as("the value found").isEqualTo(41L);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 64)).as("swapped").isEqualTo(99L);

        wc = post(Opcode.ATOMIC_CMP_AND_SWP, 8, local, lb.memB.address() + 64, lb.key(remote), 41L, 7L);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 8)).as("the value found, not the one compared").isEqualTo(99L);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 64)).as("no match: unchanged").isEqualTo(99L);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 56)).as("its neighbours untouched").isZero();
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 72)).isZero();
    }

    @Test
    void fetchAndAddAddsAndReturnsTheValueBefore() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
        lb.memB.set(ValueLayout.JAVA_LONG, 4096, Long.MAX_VALUE);
        WorkCompletion wc = post(Opcode.ATOMIC_FETCH_AND_ADD, 16, local, lb.memB.address() + 4096, lb.key(remote), 1L, 0);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wc.opcode()).isEqualTo(Opcode.ATOMIC_FETCH_AND_ADD);
        assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 16)).isEqualTo(Long.MAX_VALUE);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 4096)).as("wraps as 64-bit arithmetic does").isEqualTo(Long.MIN_VALUE);
        wc = post(Opcode.ATOMIC_FETCH_AND_ADD, 16, local, lb.memB.address() + 4096, lb.key(remote), -5L, 0);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 16)).isEqualTo(Long.MIN_VALUE);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 4096)).isEqualTo(Long.MIN_VALUE - 5);
    }

    @Test
    void withoutRemoteAtomicTheTargetIsUntouchedAndTheQpFails() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        lb.memB.set(ValueLayout.JAVA_LONG, 0, 5L);
        lb.memA.set(ValueLayout.JAVA_LONG, 0, -1L);
        WorkCompletion wc = post(Opcode.ATOMIC_FETCH_AND_ADD, 0, local, lb.memB.address(), lb.key(remote), 1L, 0);
        assertThat(wc.status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(5L);
        assertThat(lb.memA.get(ValueLayout.JAVA_LONG, 0)).as("nothing written back").isEqualTo(-1L);
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
    }

    @Test
    void aMisalignedAddressIsAnInvalidRequest() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
        WorkCompletion wc = post(Opcode.ATOMIC_CMP_AND_SWP, 0, local, lb.memB.address() + 4, lb.key(remote), 0, 1);
        assertThat(wc.status()).isEqualTo(WcStatus.REM_INV_REQ_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isZero();
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 8)).isZero();
    }

    @Test
    void aLocalSgeWithoutLocalWriteIsALocalProtectionError() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.REMOTE_READ);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
        WorkCompletion wc = post(Opcode.ATOMIC_FETCH_AND_ADD, 0, local, lb.memB.address(), lb.key(remote), 1, 0);
        assertThat(wc.status()).isEqualTo(WcStatus.LOC_PROT_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).as("a local error: the target never saw it").isZero();
    }

    @Test
    void thePostRefusesAnythingButOneSgeOfEightBytes() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
        WorkRequest[] bad = {
            new WorkRequest(2).opcode(Opcode.ATOMIC_FETCH_AND_ADD).addSge(lb.memA.address(), 4, local.lkey())
                    .remote(lb.memB.address(), lb.key(remote)),
            new WorkRequest(2).opcode(Opcode.ATOMIC_CMP_AND_SWP).addSge(lb.memA.address(), 8, local.lkey())
                    .addSge(lb.memA.address() + 8, 8, local.lkey()).remote(lb.memB.address(), lb.key(remote)),
            new WorkRequest(2).opcode(Opcode.ATOMIC_CMP_AND_SWP).remote(lb.memB.address(), lb.key(remote)),
        };
        for (WorkRequest w : bad) {
            assertThatThrownBy(() -> lb.qpA.postSend(w)).isInstanceOfSatisfying(RdmaException.class, e -> {
                assertThat(e.errno()).isEqualTo(Errno.EINVAL);
                assertThat(e.getMessage()).contains("needs exactly one SGE of 8 bytes", "bad WR index 0");
            });
        }
        assertThat(lb.qpA.outstandingSends()).isZero();
    }

    /**
     * Two connections, each on a thread of its own, add 1 to one address, 500 times each: the
     * target ends at 1000 and the values found are 0..999, each once.
     */
    @Test
    void atomicsFromTwoConnectionsOnOneAddressAreAtomicAgainstEachOther() throws Exception {
        try (Loopback other = new Loopback()) {
            MemorySegment target = lb.memB.asSlice(8192, 64);
            MemoryRegion r1 = lb.pdB.register(target, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
            MemoryRegion r2 = other.pdB.register(target, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
            MemoryRegion l1 = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion l2 = other.pdA.register(other.memA, Access.LOCAL_WRITE);
            int each = 500;
            BitSet seen = new BitSet();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread t1 = Thread.ofPlatform().start(() -> adds(lb, l1, target.address(), lb.key(r1), each, seen, failure));
            Thread t2 = Thread.ofPlatform().start(() -> adds(other, l2, target.address(), other.key(r2), each, seen, failure));
            t1.join(60_000);
            t2.join(60_000);
            assertThat(failure.get()).isNull();
            assertThat(target.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(2L * each);
            synchronized (seen) {
                assertThat(seen.cardinality()).as("every value found once").isEqualTo(2 * each);
                assertThat(seen.nextClearBit(0)).isEqualTo(2 * each);
            }
            r2.close();
            l2.close();
        }
    }

    private static void adds(Loopback l, MemoryRegion local, long address, int rkey, int n, BitSet seen,
            AtomicReference<Throwable> failure) {
        try {
            WorkRequest w = new WorkRequest(1);
            WorkCompletion[] wcs = {new WorkCompletion()};
            for (int i = 0; i < n; i++) {
                w.reset().wrId(i).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true).atomic(1, 0)
                        .addSge(l.memA.address(), 8, local.lkey()).remote(address, rkey);
                l.qpA.postSend(w);
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (l.cqA.poll(wcs) == 0) {
                    if (System.nanoTime() > deadline) {
                        throw new AssertionError("no completion within 10 s");
                    }
                }
                assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
                long found = l.memA.get(ValueLayout.JAVA_LONG, 0);
                synchronized (seen) {
                    assertThat(seen.get((int) found)).as("value %d found twice", found).isFalse();
                    seen.set((int) found);
                }
            }
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
        }
    }

    /**
     * The region that is to receive the values found is deregistered while 32 FETCH_AND_ADDs are in
     * flight: each atomic either completes SUCCESS with its value placed, or fails having changed
     * nothing at the target. So the counter goes up by exactly the successes (docs/guarantees.md: a
     * work request that fails moves no byte). On soft the atomics not yet executed fail LOC_PROT_ERR;
     * on ucx the deregistration waits for the answers of those its target already executed.
     */
    @Test
    void deregisteringTheResultMemoryUnderAtomicsInFlightNeverLeavesAFailedOneExecuted() {
        for (int round = 0; round < 3; round++) {
            try (Loopback l = new Loopback()) {
                MemoryRegion remote = l.pdB.register(l.memB, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
                l.memB.set(ValueLayout.JAVA_LONG, 0, 1000L);
                MemoryRegion results = l.pdA.register(l.memA.asSlice(8192, 32 * 8), Access.LOCAL_WRITE);
                WorkRequest w = new WorkRequest(1);
                for (int i = 0; i < 32; i++) {
                    l.qpA.postSend(w.reset().wrId(i).opcode(Opcode.ATOMIC_FETCH_AND_ADD).signaled(true).atomic(1L, 0)
                            .addSge(l.memA.address() + 8192 + 8L * i, 8, results.lkey()).remote(l.memB.address(), l.key(remote)));
                }
                results.close(); // while they are in flight
                int successes = 0;
                BitSet found = new BitSet();
                WorkCompletion[] one = {new WorkCompletion()};
                long deadline = System.nanoTime() + 30_000_000_000L;
                for (int got = 0; got < 32; ) {
                    if (l.cqA.poll(one) == 0) {
                        l.cqB.poll(new WorkCompletion[0]);
                        assertThat(System.nanoTime()).as("32 completions within 30 s (%d)", got).isLessThan(deadline);
                        continue;
                    }
                    got++;
                    WcStatus st = one[0].status();
                    if (st == WcStatus.SUCCESS) {
                        successes++;
                        long value = l.memA.get(ValueLayout.JAVA_LONG, 8192 + 8L * one[0].wrId());
                        assertThat(value).as("the value found by atomic %d", one[0].wrId()).isBetween(1000L, 1031L);
                        assertThat(found.get((int) (value - 1000))).as("found twice: %d", value).isFalse();
                        found.set((int) (value - 1000));
                    } else {
                        assertThat(st).as("atomic %d", one[0].wrId()).isIn(WcStatus.LOC_PROT_ERR, WcStatus.WR_FLUSH_ERR);
                    }
                }
                assertThat(l.memB.get(ValueLayout.JAVA_LONG, 0)).as("round %d: the counter went up by the successes only", round)
                        .isEqualTo(1000L + successes);
                remote.close();
            }
        }
    }
}
