package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Type-2 memory windows as verbs has them (ibv_alloc_mw(IBV_MW_TYPE_2), IBV_WR_BIND_MW with a key from
 * ibv_inc_rkey, IBV_WR_LOCAL_INV and IBV_WR_SEND_WITH_INV of the window's key; rdma-core's test_mr.py
 * MW tests): bound by a work request in order, invalidated by one, the peer's access failing after,
 * and bound again under the next key byte.
 */
@ExtendWith(NoLeaks.class)
class WindowTypeTwoTest {
    private Loopback lb = new Loopback();
    private final WorkRequest wr = new WorkRequest(1);

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private WorkCompletion await(CompletionQueue cq) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        WorkCompletion[] one = {new WorkCompletion()};
        while (cq.poll(one) == 0) {
            (cq == lb.cqA ? lb.cqB : lb.cqA).poll(new WorkCompletion[0]);
            assertThat(System.nanoTime()).as("a completion within 10 s").isLessThan(deadline);
        }
        return one[0];
    }

    /** B binds {@code mw} over memB[4096, 8192) for remote writes with the window's next key; the new key. */
    private int bind(MemoryWindow mw, MemoryRegion region) {
        int key = MemoryRegion.incRkey(mw.rkey());
        lb.qpB.postSend(wr.reset().wrId(70).signaled(true).bindMw(mw, key, region, lb.memB.address() + 4096, 4096,
                Access.REMOTE_WRITE, Access.REMOTE_READ));
        WorkCompletion wc = await(lb.cqB);
        assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wc.opcode()).isEqualTo(Opcode.BIND_MW);
        assertThat(mw.isBound()).isTrue();
        assertThat(mw.rkey()).isEqualTo(key);
        return key;
    }

    /** A's 64-byte WRITE of {@code fill} through {@code key} at memB + 4096 + {@code off}: its status. */
    private WcStatus write(int key, int off, byte fill, MemoryRegion local) {
        lb.memA.asSlice(0, 64).fill(fill);
        lb.qpA.postSend(wr.reset().wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(lb.memA.address(), 64, local.lkey())
                .remote(lb.memB.address() + 4096 + off, key));
        return await(lb.cqA).status();
    }

    @Test
    void aBindMwRequestBindsALocalInvInvalidatesAndThePeerIsRefusedAfter() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion region = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
        assertThat(mw.windowType()).isEqualTo(MemoryWindow.Type.TYPE_2);
        assertThat(mw.isBound()).isFalse();
        assertThat(mw.rkey()).as("a type-2 window has its key from the start").isNotZero();
        int key = bind(mw, region);
        int imported = lb.qpA.importRemoteKey(mw.exportRemoteKey());
        assertThat(write(imported, 100, (byte) 0x31, local)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096 + 163)).isEqualTo((byte) 0x31);
        assertRdma(region::close, Errno.EBUSY, "1 memory window(s) bound");

        lb.qpB.postSend(wr.reset().wrId(71).opcode(Opcode.LOCAL_INV).signaled(true).invalidateRkey(key));
        assertThat(await(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(mw.isBound()).isFalse();
        assertThat(mw.rkey()).as("the key stays: the next bind moves its byte on").isEqualTo(key);
        assertThat(write(imported, 200, (byte) 0x32, local)).as("a WRITE through an invalidated window")
                .isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096 + 200)).as("the target untouched").isZero();
        mw.close();
        region.close(); // no window bound any more
    }

    @Test
    void aPeersSendWithInvInvalidatesTheWindowAndABindUnderTheNextKeyWorksAgain() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion region = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
        int first = bind(mw, region);
        int imported = lb.qpA.importRemoteKey(mw.exportRemoteKey());
        lb.qpB.postRecv(new WorkRequest(1).wrId(9).addSge(lb.memB.address() + 65536, 4096, region.lkey()));
        lb.qpA.postSend(wr.reset().wrId(2).opcode(Opcode.SEND_WITH_INV).signaled(true).invalidateRkey(imported)
                .addSge(lb.memA.address(), 16, local.lkey()));
        assertThat(await(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        WorkCompletion recv = await(lb.cqB);
        assertThat(recv.status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(recv.withInvalidate()).as("the receive says it invalidated a key").isTrue();
        assertThat(recv.invalidatedRkey()).isEqualTo(first);
        assertThat(mw.isBound()).isFalse();

        int second = bind(mw, region);
        assertThat(second >>> 8).as("same window, same key index").isEqualTo(first >>> 8);
        assertThat(second & 0xFF).isEqualTo((first + 1) & 0xFF);
        int again = lb.qpA.importRemoteKey(mw.exportRemoteKey());
        assertThat(write(again, 0, (byte) 0x41, local)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096)).isEqualTo((byte) 0x41);
        assertThat(write(imported, 0, (byte) 0x42, local)).as("the first binding's key").isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096)).isEqualTo((byte) 0x41);
        mw.close();
    }

    /**
     * An executor that resolved a window's key for a LOCAL_INV or SEND_WITH_INV just before the
     * window was closed invalidates it afterwards: a no-op, never an exception on the data path; a
     * BIND_MW that raced the close is refused.
     */
    @Test
    void anInvalidationOrBindThatRacedTheWindowsCloseIsHarmless() {
        MemoryRegion region = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
        int key = bind(mw, region);
        mw.close();
        mw.invalidateByRequest(); // (what the executor's invalidate does once it found the view)
        assertThat(mw.bindByRequest(lb.pdB, region, lb.memB.address(), 64, Access.mask(Access.REMOTE_READ),
                MemoryRegion.incRkey(key))).isEqualTo(WcStatus.MW_BIND_ERR);
        assertThat(mw.rkey()).isZero();
        assertThat(mw.isBound()).isFalse();
        region.close(); // the closed window holds no count on it
    }

    @Test
    void misuseIsEinvalAtPostOrMwBindErrAtExecutionAndChangesNothing() {
        MemoryRegion region = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryRegion noBind = lb.pdB.register(lb.memA, Access.LOCAL_WRITE);
        MemoryWindow two = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
        MemoryWindow one = lb.pdB.allocMw();
        assertThat(one.windowType()).isEqualTo(MemoryWindow.Type.TYPE_1);
        assertRdma(() -> two.bind(region, lb.memB.address(), 64, Access.REMOTE_READ), Errno.EINVAL, "BIND_MW work request");
        assertRdma(two::unbind, Errno.EINVAL, "LOCAL_INV");
        assertRdma(two::exportRemoteKey, Errno.EINVAL, "unbound");
        assertRdma(() -> lb.pdB.allocMw(null), Errno.EINVAL);
        int key = MemoryRegion.incRkey(two.rkey());
        assertRdma(() -> lb.qpB.postSend(wr.reset().bindMw(one, key, region, lb.memB.address(), 64, Access.REMOTE_READ)),
                Errno.EINVAL, "type-1 window");
        assertRdma(() -> lb.qpB.postSend(wr.reset().bindMw(two, key, region, lb.memB.address(), 0, Access.REMOTE_READ)),
                Errno.EINVAL, "positive length");
        assertRdma(() -> lb.qpB.postSend(wr.reset().bindMw(two, key, region, lb.memB.address(), 64, Access.MW_BIND)),
                Errno.EINVAL, "remote rights only");
        assertRdma(() -> lb.qpB.postSend(wr.reset().bindMw(null, key, region, lb.memB.address(), 64, Access.REMOTE_READ)),
                Errno.EINVAL);
        assertThat(lb.qpB.outstandingSends()).isZero();
        assertThat(lb.qpB.state()).isEqualTo(QueuePair.State.RTS);
        // a region without MW_BIND: the bind fails at execution, MW_BIND_ERR, the window unbound
        lb.qpB.postSend(wr.reset().wrId(5).signaled(true).bindMw(two, key, noBind, lb.memA.address(), 64, Access.REMOTE_READ));
        assertThat(await(lb.cqB).status()).isEqualTo(WcStatus.MW_BIND_ERR);
        assertThat(two.isBound()).isFalse();
        assertThat(lb.qpB.state()).isEqualTo(QueuePair.State.ERROR);
        two.close();
        one.close();
        noBind.close();
        region.close();
    }

    @Test
    void aKeyOfAnotherWindowAndARebindOfABoundWindowAreMwBindErr() {
        MemoryRegion region = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
        MemoryWindow other = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
        bind(mw, region);
        lb.qpB.postSend(wr.reset().wrId(6).signaled(true).bindMw(mw, MemoryRegion.incRkey(mw.rkey()), region,
                lb.memB.address(), 64, Access.REMOTE_READ));
        assertThat(await(lb.cqB).status()).as("a bound type-2 window must be invalidated first").isEqualTo(WcStatus.MW_BIND_ERR);
        assertThat(mw.isBound()).isTrue();
        mw.close();
        other.close();
        lb.close();
        lb = new Loopback();
        MemoryRegion r2 = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow w2 = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
        MemoryWindow w3 = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);
        lb.qpB.postSend(wr.reset().wrId(7).signaled(true).bindMw(w2, MemoryRegion.incRkey(w3.rkey()), r2,
                lb.memB.address(), 64, Access.REMOTE_READ));
        assertThat(await(lb.cqB).status()).as("another window's key").isEqualTo(WcStatus.MW_BIND_ERR);
        assertThat(w2.isBound()).isFalse();
        w2.close();
        w3.close();
    }

    /** B binds type-2 {@code mw} over memB[4096, 8192) with {@code rights}; the BIND_MW's status. */
    private WcStatus bindWith(MemoryWindow mw, MemoryRegion region, Access... rights) {
        int key = MemoryRegion.incRkey(mw.rkey());
        lb.qpB.postSend(wr.reset().wrId(72).signaled(true).bindMw(mw, key, region, lb.memB.address() + 4096, 4096, rights));
        return await(lb.cqB).status();
    }

    private void invalidate(MemoryWindow mw) {
        lb.qpB.postSend(wr.reset().wrId(73).opcode(Opcode.LOCAL_INV).signaled(true).invalidateRkey(mw.rkey()));
        assertThat(await(lb.cqB).status()).isEqualTo(WcStatus.SUCCESS);
    }

    /**
     * As rdma-core's tests and {@code ibv_bind_mw(3)} have it (rxe, mlx5): a type-2 BIND_MW takes
     * {@code REMOTE_WRITE | LOCAL_WRITE} (LOCAL_WRITE ignored), LOCAL_WRITE alone (bound, granting no
     * remote right), and ZERO_BASED (the peer addresses the window by offset from its first byte).
     */
    @Test
    void aBindMwTakesLocalWriteAndZeroBased() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion region = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw(MemoryWindow.Type.TYPE_2);

        assertThat(bindWith(mw, region, Access.REMOTE_WRITE, Access.LOCAL_WRITE)).isEqualTo(WcStatus.SUCCESS);
        assertThat(write(lb.qpA.importRemoteKey(mw.exportRemoteKey()), 8, (byte) 0x51, local)).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096 + 8)).isEqualTo((byte) 0x51);
        invalidate(mw);

        assertThat(bindWith(mw, region, Access.REMOTE_WRITE, Access.ZERO_BASED)).isEqualTo(WcStatus.SUCCESS);
        int zeroBased = lb.qpA.importRemoteKey(mw.exportRemoteKey());
        lb.memA.asSlice(0, 64).fill((byte) 0x52);
        lb.qpA.postSend(wr.reset().wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(lb.memA.address(), 64, local.lkey())
                .remote(100, zeroBased)); // offset 100 of the window: memB + 4096 + 100
        assertThat(await(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096 + 100)).isEqualTo((byte) 0x52);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096 + 163)).isEqualTo((byte) 0x52);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096 + 164)).isZero();
        invalidate(mw);

        assertThat(bindWith(mw, region, Access.LOCAL_WRITE)).isEqualTo(WcStatus.SUCCESS);
        assertThat(mw.isBound()).isTrue();
        assertThat(write(lb.qpA.importRemoteKey(mw.exportRemoteKey()), 200, (byte) 0x53, local))
                .as("a window bound with LOCAL_WRITE alone grants no remote write").isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_BYTE, 4096 + 200)).as("nothing moved").isZero();
        mw.close();
        region.close();
    }
}
