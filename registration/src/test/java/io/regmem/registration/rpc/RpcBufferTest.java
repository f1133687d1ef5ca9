package io.regmem.registration.rpc;

import io.regmem.registration.testkit.Providers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Request and reply pools: ownership (invariant 14), the send lock rule, limits and teardown. */
@ExtendWith(NoLeaks.class)
class RpcBufferTest {
    private final RdmaDevice device = Providers.open();
    private final ProtectionDomain pd = device.allocPd();
    private final BufferPool pool = BufferPool.builder().name("rpc-test").build();

    @AfterEach
    void nothingLeaked() {
        pd.close();
        assertThat(device.resources().survivors()).as(device.resources().report()).isEmpty();
        device.close();
        assertThat(pool.closeAndReport().clean()).isTrue();
    }

    static void assertErrno(ThrowingCallable call, Errno errno) {
        assertThatThrownBy(call).isInstanceOfSatisfying(RdmaException.class, e -> assertThat(e.errno()).isEqualTo(errno));
    }

    @Test
    void limitsAndSizes() {
        for (int bad : new int[] {3, 16385}) {
            assertErrno(() -> RpcBuffer.builder(pd, pool).maxRequests(bad).build(), Errno.EINVAL);
        }
        RpcBuffer rb = RpcBuffer.builder(pd, pool).build();
        assertThat(rb.maxRequests()).isEqualTo(128);
        assertThat(rb.requests()).isEqualTo(128);
        assertThat(rb.freeRequests()).isEqualTo(128);
        assertThat(rb.ring().size()).isEqualTo(130);
        assertThat(rb.headerSize()).as("next power of two >= 4 x (7 + 3 + 8 x 6) words").isEqualTo(256);
        assertThat(rb.destroy()).isEmpty();
    }

    @Test
    void aRequestIsFreeOrOwnedByOneRpcNeverBoth() {
        RpcBuffer rb = RpcBuffer.builder(pd, pool).maxRequests(8).build();
        Random rnd = new Random(3);
        List<Req> owned = new ArrayList<>();
        List<Rep> outReps = new ArrayList<>();
        for (int step = 0; step < 20_000; step++) {
            int op = rnd.nextInt(5);
            if (op == 0) {
                Req r = rb.get();
                assertThat(r == null).isEqualTo(owned.size() == 8);
                if (r != null) {
                    assertThat(owned).doesNotContain(r);
                    owned.add(r);
                }
            } else if (op == 1 && !owned.isEmpty()) {
                Req r = owned.remove(rnd.nextInt(owned.size()));
                Rep attached = r.reply();
                rb.put(r);
                assertErrno(() -> rb.put(r), Errno.EINVAL);
                if (attached != null) {
                    assertThat(attached.isFree()).as("put gives the reply back").isTrue();
                    assertThat(attached.owner()).isNull();
                }
            } else if (op == 2) {
                Rep rep = rb.repGet();
                if (rep != null) {
                    outReps.add(rep);
                }
            } else if (op == 3 && !outReps.isEmpty() && !owned.isEmpty()) {
                Req r = owned.get(rnd.nextInt(owned.size()));
                r.attachReply(outReps.remove(rnd.nextInt(outReps.size()))); // a reply arrives for r
            } else if (op == 4 && !outReps.isEmpty()) {
                Rep rep = outReps.remove(rnd.nextInt(outReps.size()));
                rb.repPut(rep);
                assertErrno(() -> rb.repPut(rep), Errno.EINVAL);
            }
            assertThat(rb.freeRequests() + owned.size()).isEqualTo(8);
            for (Req r : owned) {
                assertThat(r.isOwned()).isTrue();
                if (r.reply() != null) {
                    assertThat(r.reply().isFree()).as("no free rep is referenced by a req").isFalse();
                    assertThat(r.reply().owner()).isSameAs(r);
                }
            }
        }
        for (Req r : owned) {
            rb.put(r);
        }
        for (Rep rep : outReps) {
            rb.repPut(rep);
        }
        assertThat(rb.freeReplies()).isEqualTo(rb.replies());
        assertThat(rb.destroy()).isEmpty();
    }

    @Test
    void getNeverComesBackEmptyHandedWhileRequestsAreFree() throws Exception {
        RpcBuffer rb = RpcBuffer.builder(pd, pool).maxRequests(8).build();
        java.util.concurrent.atomic.AtomicInteger empty = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicIntegerArray owner = new java.util.concurrent.atomic.AtomicIntegerArray(8);
        java.util.concurrent.atomic.AtomicInteger shared = new java.util.concurrent.atomic.AtomicInteger();
        Runnable worker = () -> {
            int me = (int) Thread.currentThread().threadId();
            for (int i = 0; i < 300_000; i++) {
                Req r = rb.get(); // two threads hold at most two of eight: never null
                if (r == null) {
                    empty.incrementAndGet();
                    continue;
                }
                if (!owner.compareAndSet(r.id(), 0, me)) { // ownership mark: nobody else holds it
                    shared.incrementAndGet();
                }
                owner.set(r.id(), 0);
                rb.put(r);
            }
        };
        Thread t = Thread.ofPlatform().start(worker);
        worker.run();
        t.join();
        assertThat(empty).as("gets that found no request while six or more were free").hasValue(0);
        assertThat(shared).as("requests handed to two threads at once").hasValue(0);
        assertThat(rb.freeRequests()).isEqualTo(8);
        assertThat(rb.destroy()).isEmpty();
    }

    @Test
    void repliesAreMadeOnDemandUpToTheLimit() {
        RpcBuffer rb = RpcBuffer.builder(pd, pool).maxRequests(4).build();
        List<Rep> reps = new ArrayList<>();
        for (Rep r = rb.repGet(); r != null; r = rb.repGet()) {
            reps.add(r);
        }
        assertThat(reps).hasSize(4 + RpcBuffer.EXTRA_REPS);
        rb.repPut(reps.get(7));
        assertThat(rb.repGet()).isSameAs(reps.get(7));
        RpcBuffer other = RpcBuffer.builder(pd, pool).maxRequests(4).build();
        Rep foreign = other.repGet();
        assertErrno(() -> rb.repPut(foreign), Errno.EINVAL);
        assertThat(rb.freeReplies()).as("another buffer's reply is refused, nothing changes").isZero();
        other.repPut(foreign);
        assertThat(other.destroy()).isEmpty();
        reps.forEach(rb::repPut);
        assertThat(rb.freeReplies()).isEqualTo(reps.size());
        assertThat(rb.destroy()).isEmpty();
    }

    @Test
    void destroyReqNeedsTheSendLockAndChangesNothingWithoutIt() {
        RpcBuffer rb = RpcBuffer.builder(pd, pool).maxRequests(4).build();
        SendLock lock = new SendLock();
        Req req = rb.get();
        assertErrno(() -> rb.destroyReq(req, lock), Errno.EPERM);
        assertErrno(() -> rb.destroyReq(req, null), Errno.EPERM);
        assertThat(rb.requests()).isEqualTo(4);
        assertThat(req.isOwned()).isTrue();
        assertThat(req.send().isFreed()).isFalse();
        lock.lock();
        try {
            rb.destroyReq(req, lock);
            assertErrno(() -> rb.destroyReq(req, lock), Errno.EINVAL);
        } finally {
            lock.unlock();
        }
        assertThat(rb.requests()).isEqualTo(3);
        assertThat(req.send().isFreed()).isTrue();
        assertErrno(() -> rb.put(req), Errno.EINVAL);
        assertThat(rb.destroy()).isEmpty();
    }

    @Test
    void atMostMaxRequestsExistAndADestroyedRequestsNumberIsReused() {
        RpcBuffer rb = RpcBuffer.builder(pd, pool).maxRequests(4).build();
        assertErrno(rb::createReq, Errno.ENOMEM);
        assertThat(rb.requests()).as("a refused create keeps nothing").isEqualTo(4);
        SendLock lock = new SendLock();
        Req old = rb.get();
        lock.lock();
        try {
            rb.destroyReq(old, lock);
        } finally {
            lock.unlock();
        }
        Req fresh = rb.createReq();
        assertThat(fresh.id()).isEqualTo(old.id());
        assertThat(fresh.isOwned()).as("a new request is its creator's until put").isTrue();
        assertThat(rb.freeRequests()).isEqualTo(3);
        assertErrno(() -> rb.put(old), Errno.EINVAL); // the destroyed one stays refused, its number reused or not
        rb.put(fresh);
        assertThat(rb.freeRequests()).isEqualTo(4);
        assertErrno(() -> rb.put(fresh), Errno.EINVAL);
        assertThat(rb.freeRequests()).as("a double put changes nothing").isEqualTo(4);
        assertThat(rb.destroy()).isEmpty();
    }

    @Test
    void destroyReportsCheckedOutRequestsInsteadOfFreeingThem() {
        RpcBuffer rb = RpcBuffer.builder(pd, pool).maxRequests(4).build();
        Req kept = rb.get();
        assertThat(rb.setupReq(kept)).isTrue();
        assertThat(kept.header().isMapped()).isTrue();
        assertThat(kept.recv().dmaMap(pd)).as("the receive buffer is NONE: never mapped").isFalse();
        List<Req> leaked = rb.destroy();
        assertThat(leaked).containsExactly(kept);
        assertThat(kept.send().isFreed()).as("reported, not silently freed").isFalse();
        // the owner finishes with it after all
        kept.header().free();
        kept.send().free();
        kept.recv().free();
    }
}
