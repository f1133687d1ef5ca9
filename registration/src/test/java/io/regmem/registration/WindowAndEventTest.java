package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The last two rows of kernel-semantics section 1's "Violations" table: deregistering an MR with a
 * bound memory window fails, and destroying a CM ID inside its own event handler is refused.
 */
@ExtendWith(NoLeaks.class)
class WindowAndEventTest {
    private final Loopback lb = new Loopback();

    @AfterEach
    void tearDown() {
        lb.close();
    }

    @Test
    void deregisteringAnMrWithABoundWindowFailsAndChangesNothing() {
        MemoryRegion mr = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw();
        int rkey = mw.bind(mr, lb.memB.address() + 4096, 4096, Access.REMOTE_WRITE);
        assertThat(lb.pdB.useCount()).as("MR, window and the loopback QP").isEqualTo(3);
        assertRdma(mr::close, Errno.EBUSY, "1 memory window(s) bound");
        assertThat(mr.isValid()).isTrue();

        // the window's key works remotely, inside its range only, and only with its rights
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 77);
        WorkRequest wr = new WorkRequest(1).opcode(Opcode.RDMA_WRITE).addSge(lb.memA.address(), 8, local.lkey())
                .remote(lb.memB.address() + 4096, lb.qpA.importRemoteKey(mw.exportRemoteKey()));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 4096)).isEqualTo(77);
        assertThat(mr.rkey()).as("the MR itself grants no remote access").isNotEqualTo(rkey);

        // unbinding retires the window's key at once; then the MR can go
        mw.unbind();
        assertThat(lb.devB.keys.lookup(rkey, true)).isNull();
        mr.close();
        mw.close();
    }

    /**
     * A bind of length 0 invalidates the window, as a zero-length bind of a type-1 window does in
     * verbs: its key stops working at once (a WRITE through it is REM_ACCESS_ERR and moves nothing),
     * the window is unbound (0), and the region it was bound to can be deregistered.
     */
    @Test
    void aZeroLengthBindInvalidatesTheWindow() {
        MemoryRegion mr = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw();
        int rkey = mw.bind(mr, lb.memB.address(), 4096, Access.REMOTE_WRITE);
        int imported = lb.qpA.importRemoteKey(mw.exportRemoteKey());
        assertThat(mw.bind(mr, lb.memB.address(), 0, Access.REMOTE_WRITE)).isZero();
        assertThat(mw.rkey()).isZero();
        assertThat(lb.devB.keys.lookup(rkey, true)).isNull();
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 55);
        lb.qpA.postSend(new WorkRequest(1).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(lb.memA.address(), 8, local.lkey())
                .remote(lb.memB.address(), imported));
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).as("nothing moved").isZero();
        mr.close(); // no window bound any more
        mw.close();
        assertRdma(() -> mw.bind(null, 0, 0), Errno.EBADF, "bind");
    }

    @Test
    void windowBindRules() {
        MemoryRegion noBind = lb.pdB.register(lb.memB, Access.LOCAL_WRITE);
        MemoryRegion readOnly = lb.pdB.register(lb.memA, Access.MW_BIND);
        MemoryWindow mw = lb.pdB.allocMw();
        assertRdma(() -> mw.bind(noBind, noBind.address(), 64, Access.REMOTE_READ), Errno.EINVAL, "MW_BIND");
        assertRdma(() -> mw.bind(readOnly, readOnly.address(), 64, Access.REMOTE_WRITE), Errno.EINVAL, "LOCAL_WRITE");
        assertRdma(() -> mw.bind(readOnly, readOnly.address(), 64, Access.REMOTE_READ, Access.ZERO_BASED), Errno.EINVAL,
                "ZERO_BASED is for type-2 windows");
        assertRdma(() -> mw.bind(readOnly, readOnly.address(), 64, Access.MW_BIND), Errno.EINVAL, "remote rights only");
        assertThat(mw.isBound()).isFalse();
        assertRdma(() -> mw.bind(readOnly, readOnly.address() - 1, 64, Access.REMOTE_READ), Errno.EINVAL, "not inside");
        assertRdma(() -> mw.bind(null, 0, 64, Access.REMOTE_READ), Errno.EINVAL, "needs a region");
        assertRdma(() -> mw.bind(readOnly, readOnly.address(), -1, Access.REMOTE_READ), Errno.EINVAL, "not inside");
        int first = mw.bind(readOnly, readOnly.address(), 64, Access.REMOTE_READ);
        int second = mw.bind(readOnly, readOnly.address() + 64, 64, Access.REMOTE_READ);
        assertThat(second).as("rebinding gives a new key").isNotEqualTo(first);
        assertThat(lb.devB.keys.lookup(first, true)).isNull();
        mw.close(); // unbinds
        readOnly.close();
        noBind.close();
    }

    @Test
    void destroyingAnIdInsideItsOwnHandlerIsRefusedAndReturningTrueDestroysIt() {
        List<String> seen = new ArrayList<>();
        List<RdmaException> refused = new ArrayList<>();
        CmId listener = lb.devB.createCmId();
        listener.onEvent(e -> {
            seen.add(e.type() + " " + (e.listener() == listener));
            try {
                e.id().close(); // forbidden inside its own handler
            } catch (RdmaException x) {
                refused.add(x);
            }
            return true; // the kernel way: destroy it after returning (here: reject the request)
        });
        String events = Providers.address("svc-events");
        listener.listen(events);

        ProtectionDomain pd = lb.devA.allocPd();
        CompletionQueue cq = lb.devA.createCq(8);
        CmId active = lb.devA.createCmId();
        List<CmEvent.Type> activeEvents = new ArrayList<>();
        active.onEvent(e -> {
            activeEvents.add(e.type());
            return false;
        });
        active.createQp(pd, QpInitAttributes.of(cq));
        active.connect(events);

        assertThat(seen).containsExactly("CONNECT_REQUEST true");
        assertThat(refused).hasSize(1);
        assertThat(refused.getFirst().errno()).isEqualTo(Errno.EBUSY);
        assertThat(refused.getFirst().getMessage()).contains("inside its own event handler");
        assertThat(activeEvents).containsExactly(CmEvent.Type.REJECTED);
        assertThat(active.connState()).isEqualTo(CmId.ConnState.DISCONNECTED);
        assertThat(listener.getRequest()).as("the request was destroyed").isNull();
        assertThat(lb.devB.resources().survivors(CmId.class)).as("the rejected request is gone")
                .containsExactlyInAnyOrder(lb.listener, lb.idB, listener);

        active.destroyQp();
        active.close();
        cq.close();
        pd.close();
        listener.close();
    }

    @Test
    void establishedAndDisconnectedReachBothEnds() {
        List<String> events = new ArrayList<>();
        List<CmId> requests = new ArrayList<>();
        CmId listener = lb.devB.createCmId();
        ProtectionDomain pd = lb.devA.allocPd();
        CompletionQueue cq = lb.devA.createCq(8);
        listener.onEvent(e -> {
            events.add("B " + e.type());
            if (e.type() == CmEvent.Type.CONNECT_REQUEST) {
                requests.add(e.id());
                e.id().createQp(lb.pdB, QpInitAttributes.of(lb.cqB));
                e.id().accept(); // accepting inside the request's handler is allowed
            }
            return false;
        });
        String established = Providers.address("svc-established");
        listener.listen(established);
        CmId active = lb.devA.createCmId();
        active.onEvent(e -> {
            events.add("A " + e.type());
            return false;
        });
        active.createQp(pd, QpInitAttributes.of(cq));
        active.connect(established);
        assertThat(active.connState()).isEqualTo(CmId.ConnState.CONNECTED);
        active.disconnect();
        assertThat(events).containsExactly("B CONNECT_REQUEST", "A ESTABLISHED", "B ESTABLISHED",
                "A DISCONNECTED", "B DISCONNECTED");

        CmId passive = requests.getFirst();
        passive.destroyQp();
        passive.close();
        active.destroyQp();
        active.close();
        listener.close();
        cq.close();
        pd.close();
    }

    /**
     * rdma-core's test_mr.py binds type-1 windows with {@code REMOTE_WRITE | LOCAL_WRITE} and expects
     * success, as rxe and mlx5 give: LOCAL_WRITE is accepted and grants nothing; a bind with it alone
     * grants no remote access.
     */
    @Test
    void aType1BindTakesLocalWriteAndIgnoresIt() {
        MemoryRegion mr = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.MW_BIND);
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryWindow mw = lb.pdB.allocMw();
        mw.bind(mr, lb.memB.address(), 4096, Access.REMOTE_WRITE, Access.LOCAL_WRITE);
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 91);
        WorkRequest wr = new WorkRequest(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address() + 8, lb.qpA.importRemoteKey(mw.exportRemoteKey()));
        lb.qpA.postSend(wr);
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 8)).isEqualTo(91);

        int nothing = mw.bind(mr, lb.memB.address(), 4096, Access.LOCAL_WRITE); // bound, granting no remote right
        assertThat(nothing).isNotZero();
        assertThat(mw.isBound()).isTrue();
        lb.memA.set(ValueLayout.JAVA_LONG, 0, 92);
        lb.qpA.postSend(wr.remote(lb.memB.address() + 16, lb.qpA.importRemoteKey(mw.exportRemoteKey())));
        assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
        assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 16)).as("nothing moved").isZero();
        mw.close();
        mr.close();
    }
}
