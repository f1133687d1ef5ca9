package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.spi.ProgressFaults;
import io.regmem.registration.testkit.LogCapture;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A progress thread never ends by an exception: a QP destroyed (its lane unmapped) while the thread
 * looks at it is skipped, and a failure in one QP's progress errs that QP alone while the thread goes
 * on serving the others.
 */
@ExtendWith(NoLeaks.class)
class ShmProgressFaultTest {

    static ShmDevice shm(RdmaDevice dev) throws ReflectiveOperationException {
        Method m = RdmaDevice.class.getDeclaredMethod("provider");
        m.setAccessible(true);
        return (ShmDevice) m.invoke(dev);
    }

    /** A connection between {@code client} and the listener's device, in this JVM: the requester's ID, then the listener's. */
    private static CmId[] connect(RdmaDevice client, ProtectionDomain pdA, CompletionQueue cqA, CmId listener,
                                  ProtectionDomain pdB, CompletionQueue cqB, String address) {
        CmId a = client.createCmId();
        a.createQp(pdA, new QpInitAttributes().sendCq(cqA).recvCq(cqA).maxSendWr(4).maxRecvWr(1));
        a.connect(address);
        CmId b = listener.getRequest();
        b.createQp(pdB, new QpInitAttributes().sendCq(cqB).recvCq(cqB).maxSendWr(4).maxRecvWr(1));
        b.accept();
        return new CmId[] {a, b};
    }

    static Thread progressThread(ShmDevice d) throws ReflectiveOperationException {
        Field f = ShmDevice.class.getDeclaredField("progressThread");
        f.setAccessible(true);
        return (Thread) f.get(d);
    }

    /**
     * The race of the issue, made deterministic: the progress thread read a QP's lane, then another
     * thread destroyed the QP (unmapping the lane), then the progress thread looks at the lane's rings.
     */
    @Test
    void aLaneUnmappedAfterTheProgressThreadReadItIsSkippedNotRead() throws Exception {
        QpInitAttributes attrs = new QpInitAttributes().maxSendWr(16).maxRecvWr(16);
        try (Loopback lb = new Loopback("shm", Map.of(), 64, attrs, new QpInitAttributes().maxSendWr(16).maxRecvWr(16))) {
            ShmQp b = shm(lb.devB).qps()[0];
            Lane seen = b.lane(); // what the progress thread read before the destroy
            assertThat(seen).isNotNull();
            assertThat(b.idleLane(seen)).isTrue();
            lb.idB.destroyQp(); // the lane is unmapped
            assertThatThrownBy(() -> seen.peerRequests.pending()).as("the lane's memory is gone")
                    .isInstanceOf(IllegalStateException.class);
            assertThat(b.idleLane(seen)).as("not idle: the caller takes the lock and finds the QP destroyed").isFalse();
            assertThat(b.progress()).isZero();
            assertThat(b.idleLane(b.lane())).as("no lane: idle").isTrue();
        }
    }

    /** Connections made and destroyed while the listener's progress thread runs: it never stops. */
    @Test
    void connectionsDestroyedUnderTheProgressThreadNeverStopIt() throws Exception {
        AtomicReference<Throwable> uncaught = new AtomicReference<>();
        Thread.UncaughtExceptionHandler before = Thread.getDefaultUncaughtExceptionHandler();
        Thread.setDefaultUncaughtExceptionHandler((t, e) -> uncaught.compareAndSet(null, e));
        long survived = ProgressFaults.survivedCount();
        try (RdmaDevice client = RdmaDevice.open("shm");
             RdmaDevice server = RdmaDevice.open("shm", Map.of("progressThread", "true", "idleStrategy", "busy"))) {
            ProtectionDomain pdA = client.allocPd();
            ProtectionDomain pdB = server.allocPd();
            CompletionQueue cqA = client.createCq(64);
            CompletionQueue cqB = server.createCq(64);
            CmId listener = server.createCmId();
            String address = Providers.address("shm", "x");
            listener.listen(address);
            for (int i = 0; i < 400; i++) {
                CmId[] pair = connect(client, pdA, cqA, listener, pdB, cqB, address);
                CmId a = pair[0];
                CmId b = pair[1];
                if (i % 2 == 0) { // the listener's side goes first, or the requester's
                    b.destroyQp();
                    a.destroyQp();
                } else {
                    a.destroyQp();
                    b.destroyQp();
                }
                a.close();
                b.close();
            }
            assertThat(progressThread(shm(server)).isAlive()).isTrue();
            listener.close();
            cqA.close();
            cqB.close();
            pdA.close();
            pdB.close();
        } finally {
            Thread.setDefaultUncaughtExceptionHandler(before);
        }
        assertThat(uncaught.get()).as("no thread ended by an exception").isNull();
        assertThat(ProgressFaults.survivedCount()).isEqualTo(survived);
    }

    /**
     * One QP whose progress fails in a way no rule of the lane foresees (here: what ends its connection
     * throws): that QP moves to the error state, the failure is logged once, and the progress thread
     * goes on serving another connection's WRITEs and READs.
     */
    @Test
    void aQpWhoseProgressFailsErrsAloneAndTheThreadServesTheOthers() throws Exception {
        LogCapture log = new LogCapture("io.regmem.registration.shm");
        long survived = ProgressFaults.survivedCount();
        try (Arena arena = Arena.ofShared();
             RdmaDevice client = RdmaDevice.open("shm");
             RdmaDevice server = RdmaDevice.open("shm", Map.of("progressThread", "true", "idleStrategy", "busy"))) {
            ProtectionDomain pdA = client.allocPd();
            ProtectionDomain pdB = server.allocPd();
            CompletionQueue cqA = client.createCq(64);
            CompletionQueue cqB = server.createCq(64);
            MemorySegment local = arena.allocate(8192, 4096);
            MemorySegment remote = arena.allocate(8192, 4096);
            MemoryRegion mrA = pdA.register(local, Access.LOCAL_WRITE);
            MemoryRegion mrB = pdB.register(remote, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            CmId listener = server.createCmId();
            String address = Providers.address("shm", "x");
            listener.listen(address);
            List<CmId> ids = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                ids.addAll(List.of(connect(client, pdA, cqA, listener, pdB, cqB, address)));
            }
            ShmDevice s = shm(server);
            ShmQp broken = s.qps()[0];
            broken.onBroken = () -> {
                throw new IllegalStateException("injected: ending the connection failed");
            };
            // The peer's request ring holds a record longer than the ring: a violation, whose handling
            // then throws.
            Lane l = broken.lane();
            l.memory.set(JAVA_LONG, Lane.RINGS + Ring.HEADER, 1L << 32 | 1L << 30);
            QueuePair brokenQp = ids.get(1).qp();
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (brokenQp.state() != QueuePair.State.ERROR) {
                assertThat(System.nanoTime()).as("the broken QP errs").isLessThan(deadline);
                Thread.sleep(1);
            }
            assertThat(progressThread(s).isAlive()).as("the progress thread goes on").isTrue();
            // The other connection: its WRITE and READ are served.
            QueuePair other = ids.get(2).qp();
            int rkey = other.importRemoteKey(mrB.exportRemoteKey());
            for (int i = 0; i < 4096; i++) {
                local.set(JAVA_BYTE, i, (byte) (i * 7 + 1));
            }
            WorkRequest w = new WorkRequest(1);
            other.postSend(w.reset().wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true).addSge(local.address(), 4096, mrA.lkey())
                    .remote(remote.address(), rkey));
            other.postSend(w.reset().wrId(2).opcode(Opcode.RDMA_READ).signaled(true)
                    .addSge(local.address() + 4096, 4096, mrA.lkey()).remote(remote.address(), rkey));
            WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion()};
            int got = 0;
            deadline = System.nanoTime() + 10_000_000_000L;
            while (got < 2) {
                int n = cqA.poll(wcs);
                for (int i = 0; i < n; i++) {
                    assertThat(wcs[i].status()).isEqualTo(WcStatus.SUCCESS);
                }
                got += n;
                assertThat(System.nanoTime()).as("the other connection is served").isLessThan(deadline);
            }
            assertThat(local.asSlice(4096, 4096).mismatch(local.asSlice(0, 4096))).isEqualTo(-1);
            assertThat(log.text()).contains("its progress failed");
            assertThat(ProgressFaults.survivedCount()).as("the QP's own guard took it").isEqualTo(survived);
            for (CmId id : ids) {
                if (id.connState() == CmId.ConnState.CONNECTED) {
                    id.disconnect();
                }
            }
            while (cqA.poll(wcs) > 0 || cqB.poll(wcs) > 0) {
                Thread.onSpinWait();
            }
            for (CmId id : ids) {
                id.destroyQp();
                id.close();
            }
            listener.close();
            mrA.close();
            mrB.close();
            cqA.close();
            cqB.close();
            pdA.close();
            pdB.close();
        } finally {
            log.close();
        }
    }
}
