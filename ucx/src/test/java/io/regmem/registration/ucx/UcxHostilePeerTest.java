package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

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
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A peer that holds the secret (it passed the handshake) and then speaks the wire protocol as it
 * likes cannot exhaust the process it is connected to: a connection's window bounds what a target
 * holds for it (waiting messages, their bytes, READ answers under way); a peer that sends beyond it
 * breaks the protocol and its connection ends, while the target's other connections go on. Absurd
 * sizes are refused by the checks before anything is allocated, and a message with another
 * connection's token is dropped. The hostile side is a real, authenticated connection of this JVM
 * (reached through its socket) whose QP writes raw active messages.
 */
@ExtendWith(NoLeaks.class)
class UcxHostilePeerTest {
    private static final AtomicInteger PORTS = new AtomicInteger(21_000 + (int) (ProcessHandle.current().pid() % 2000));
    private static final String SECRET = "the hostile peer test's secret";
    private static final long REGION = 128L << 20;

    private final Logger ucxLog = Logger.getLogger("io.regmem.registration.ucx");
    private final Arena arena = Arena.ofShared();
    private RdmaDevice server;
    private RdmaDevice client;
    private ProtectionDomain spd;
    private ProtectionDomain cpd;
    private CompletionQueue scq;
    private CompletionQueue ccq;
    private MemorySegment target;
    private MemoryRegion targetMr;
    private CmId listener;
    private String address;
    private final List<CmId[]> pairs = new ArrayList<>();
    private final WorkCompletion[] none = new WorkCompletion[0];

    @BeforeEach
    void setUp() {
        UcxAvailable.require();
        ucxLog.setUseParentHandlers(false);
        server = RdmaDevice.open("ucx", Map.of("secret", SECRET));
        client = RdmaDevice.open("ucx", Map.of("secret", SECRET));
        spd = server.allocPd();
        cpd = client.allocPd();
        scq = server.createCq(1024);
        ccq = client.createCq(1024);
        target = arena.allocate(REGION, 4096);
        targetMr = spd.register(target, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        listener = server.createCmId();
        int port = PORTS.incrementAndGet();
        listener.listen("127.0.0.1:" + port);
        address = "localhost:" + port; // through the socket: a connection as another process's
    }

    @AfterEach
    void tearDown() {
        ucxLog.setUseParentHandlers(true);
        for (CmId[] p : pairs) {
            p[0].disconnect();
        }
        WorkCompletion[] wc = {new WorkCompletion()};
        while (ccq.poll(wc) > 0 || scq.poll(wc) > 0) {
            // flushed
        }
        for (CmId[] p : pairs) {
            for (CmId id : p) {
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
        }
        listener.close();
        targetMr.close();
        scq.close();
        ccq.close();
        spd.close();
        cpd.close();
        server.close();
        client.close();
        arena.close();
    }

    /** A connection: the client's ID, the server's ID. */
    private CmId[] connect() throws InterruptedException {
        return connect(client, cpd, ccq);
    }

    /** A connection from {@code dev}: the client's ID, the server's ID. */
    private CmId[] connect(RdmaDevice dev, ProtectionDomain pd, CompletionQueue cq) throws InterruptedException {
        CmId active = dev.createCmId();
        active.createQp(pd, QpInitAttributes.of(cq).maxSendWr(64));
        active.connect(address);
        CmId passive;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while ((passive = listener.getRequest()) == null) {
            assertThat(System.nanoTime()).as("a request within 10 s").isLessThan(deadline);
            Thread.sleep(1);
        }
        passive.createQp(spd, new QpInitAttributes().sendCq(scq).recvCq(scq).maxSendWr(64).maxRecvWr(64));
        passive.accept(new byte[0]);
        while (active.connState() != CmId.ConnState.CONNECTED) {
            assertThat(System.nanoTime()).as("connected within 10 s").isLessThan(deadline);
            Thread.sleep(1);
        }
        CmId[] p = {active, passive};
        pairs.add(p);
        return p;
    }

    /**
     * Writes one raw active message on the client's QP {@code from}, to the server's QP it is connected
     * to, with {@code token}; {@code data} (or none) as its payload, eagerly. The header and data live in
     * this test's arena, so UCX may take its time.
     */
    private void raw(QueuePair from, int opcode, long seq, long raddr, int rkey, int flags, long length, MemorySegment data,
                     long token) {
        UcxQp qp = from.unwrap(UcxQp.class);
        MemorySegment h = arena.allocate(UcxAm.HEADER, 8);
        h.set(ValueLayout.JAVA_INT, UcxAm.H_TYPE, UcxAm.TYPE_MSG);
        h.set(ValueLayout.JAVA_INT, UcxAm.H_DST, qp.peerNumber());
        h.set(ValueLayout.JAVA_INT, UcxAm.H_SRC, qp.number);
        h.set(ValueLayout.JAVA_INT, UcxAm.H_OPCODE, opcode);
        h.set(ValueLayout.JAVA_LONG, UcxAm.H_SEQ, seq);
        h.set(ValueLayout.JAVA_LONG, UcxAm.H_RADDR, raddr);
        h.set(ValueLayout.JAVA_INT, UcxAm.H_RKEY, rkey);
        h.set(ValueLayout.JAVA_INT, UcxAm.H_STATUS, flags);
        h.set(ValueLayout.JAVA_LONG, UcxAm.H_LENGTH, length);
        h.set(ValueLayout.JAVA_LONG, UcxAm.H_TOKEN, token);
        qp.device.lockWorker();
        try {
            long r = qp.device.ucp.amSend(qp.endpoint(), UcxAm.ID, h.address(), UcxAm.HEADER,
                    data == null ? 0 : data.address(), data == null ? 0 : data.byteSize(), qp.amParams.address(), qp.toSelf());
            assertThat(Ucp.isError(r)).as("UCX took the message").isFalse();
        } finally {
            qp.device.workerLock.unlock();
        }
    }

    /** The device's count of dropped messages, read under its worker lock (the AM callback writes it). */
    private static long dropped(UcxDevice device) {
        device.lockWorker();
        try {
            return device.messages.dropped;
        } finally {
            device.workerLock.unlock();
        }
    }

    private static long token(QueuePair client) {
        return client.unwrap(UcxQp.class).peerToken();
    }

    /** Polls both sides until {@code qp} is in the error state (its connection ended). */
    private void awaitError(QueuePair qp) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (qp.state() != QueuePair.State.ERROR) {
            scq.poll(none);
            ccq.poll(none);
            assertThat(System.nanoTime()).as("%s ends within 20 s", qp).isLessThan(deadline);
        }
    }

    /** A second, honest connection of the same server still works: a WRITE and READ byte-exact. */
    private void anotherConnectionWorks() throws InterruptedException {
        CmId[] p = connect();
        QueuePair qp = p[0].qp();
        MemorySegment local = arena.allocate(2 * 65536, 4096);
        MemoryRegion mr = cpd.register(local, Access.LOCAL_WRITE);
        for (int i = 0; i < 65536; i++) {
            local.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 11 + 1));
        }
        int rkey = qp.importRemoteKey(targetMr.exportRemoteKey());
        WorkCompletion[] wc = {new WorkCompletion()};
        qp.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(local.address(), 65536, mr.lkey()).remote(target.address() + (64L << 20), rkey));
        assertThat(await(wc).status()).isEqualTo(WcStatus.SUCCESS);
        qp.postSend(new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(local.address() + 65536, 65536, mr.lkey()).remote(target.address() + (64L << 20), rkey));
        assertThat(await(wc).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(local.asSlice(65536, 65536).mismatch(local.asSlice(0, 65536))).isEqualTo(-1);
        assertThat(p[1].qp().state()).isEqualTo(QueuePair.State.RTS);
        mr.close();
    }

    private WorkCompletion await(WorkCompletion[] wc) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (ccq.poll(wc) == 0) {
            scq.poll(none);
            assertThat(System.nanoTime()).as("a completion within 10 s").isLessThan(deadline);
        }
        return wc[0];
    }

    @Test
    void aFloodOfMessagesBeyondTheWindowEndsThatConnectionOnly() throws Exception {
        CmId[] p = connect();
        QueuePair c = p[0].qp();
        long token = token(c);
        // SENDs that wait for a receive for ever (RNR retry 7): none is posted, so each waits at the target
        for (int i = 0; i <= UcxAm.WINDOW_MESSAGES; i++) {
            raw(c, Opcode.SEND.ordinal(), i, 0, 0, 7, 0, null, token);
            if ((i & 1023) == 0) {
                scq.poll(none);
                ccq.poll(none);
            }
        }
        awaitError(p[1].qp());
        assertThat(p[1].qp().unwrap(UcxQp.class).violated).contains("beyond its window");
        assertThat(p[1].qp().unwrap(UcxQp.class).inbox().size()).as("what it kept is gone").isZero();
        anotherConnectionWorks();
    }

    @Test
    void aFloodOfBytesBeyondTheWindowEndsThatConnectionOnly() throws Exception {
        CmId[] p = connect();
        QueuePair c = p[0].qp();
        MemorySegment mib = arena.allocate(1 << 20, 4096);
        for (int i = 0; i < 80; i++) { // 80 MiB of SENDs waiting for receives: beyond the 64 MiB window
            raw(c, Opcode.SEND.ordinal(), i, 0, 0, 7, 1 << 20, mib, token(c));
            scq.poll(none);
            ccq.poll(none);
        }
        awaitError(p[1].qp());
        assertThat(p[1].qp().unwrap(UcxQp.class).violated).contains("beyond its window");
        anotherConnectionWorks();
    }

    @Test
    void readsAskingForMoreThanTheWindowEndThatConnectionOnly() throws Exception {
        CmId[] p = connect();
        QueuePair c = p[0].qp();
        long half = 48L << 20;
        // two READs of 48 MiB each, and the client never takes the first answer (it does not progress)
        raw(c, Opcode.RDMA_READ.ordinal(), 0, target.address(), targetMr.rkey(), 0, half, null, token(c));
        raw(c, Opcode.RDMA_READ.ordinal(), 1, target.address() + half, targetMr.rkey(), 0, half, null, token(c));
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (p[1].qp().state() != QueuePair.State.ERROR) {
            scq.poll(none); // the server's side only
            assertThat(System.nanoTime()).as("the connection ends within 20 s").isLessThan(deadline);
        }
        assertThat(p[1].qp().unwrap(UcxQp.class).violated).contains("a READ of " + half + " bytes");
        anotherConnectionWorks();
    }

    @Test
    void anAbsurdReadLengthIsRefusedBeforeAnythingIsAllocated() throws Exception {
        CmId[] p = connect();
        QueuePair c = p[0].qp();
        raw(c, Opcode.RDMA_READ.ordinal(), 0, target.address(), targetMr.rkey(), 0, 1L << 62, null, token(c));
        awaitError(p[1].qp());
        assertThat(p[1].qp().unwrap(UcxQp.class).violated).as("a checked refusal, not a violation").isNull();
        anotherConnectionWorks();
    }

    /**
     * Another peer process (here: another device, so another worker at the listener) that learned a
     * connection's QP number and token cannot speak for it: its messages arrive on another worker and
     * are dropped; nor can a connection's own peer with a wrong token.
     */
    @Test
    void aMessageWithAnotherPeersTokenIsDropped() throws Exception {
        RdmaDevice other = RdmaDevice.open("ucx", Map.of("secret", SECRET));
        ProtectionDomain opd = other.allocPd();
        CompletionQueue ocq = other.createCq(64);
        CmId[] two = connect(other, opd, ocq);
        CmId[] one = connect();
        try {
            tokensFromAnotherPeer(one, two);
        } finally {
            two[0].disconnect();
            pairs.remove(two);
            WorkCompletion[] wc = {new WorkCompletion()};
            while (ocq.poll(wc) > 0 || scq.poll(wc) > 0) {
                // flushed
            }
            for (CmId id : two) {
                id.destroyQp();
                id.close();
            }
            ocq.close();
            opd.close();
            other.close();
        }
    }

    private void tokensFromAnotherPeer(CmId[] one, CmId[] two) throws Exception {
        QueuePair c1 = one[0].qp();
        QueuePair c2 = two[0].qp();
        UcxQp s2 = two[1].qp().unwrap(UcxQp.class);
        MemorySegment data = arena.allocate(4096, 4096);
        data.fill((byte) 0x77);
        long droppedBefore = dropped(s2.device);
        // on connection 1's endpoint (another peer's worker), to connection 2's server QP, with its token
        UcxQp q1 = c1.unwrap(UcxQp.class);
        MemorySegment h = arena.allocate(UcxAm.HEADER, 8);
        h.set(ValueLayout.JAVA_INT, UcxAm.H_TYPE, UcxAm.TYPE_MSG);
        h.set(ValueLayout.JAVA_INT, UcxAm.H_DST, c2.unwrap(UcxQp.class).peerNumber());
        h.set(ValueLayout.JAVA_INT, UcxAm.H_OPCODE, Opcode.RDMA_WRITE.ordinal());
        h.set(ValueLayout.JAVA_LONG, UcxAm.H_RADDR, target.address());
        h.set(ValueLayout.JAVA_INT, UcxAm.H_RKEY, targetMr.rkey());
        h.set(ValueLayout.JAVA_LONG, UcxAm.H_LENGTH, 4096);
        h.set(ValueLayout.JAVA_LONG, UcxAm.H_TOKEN, token(c2));
        q1.device.lockWorker();
        try {
            q1.device.ucp.amSend(q1.endpoint(), UcxAm.ID, h.address(), UcxAm.HEADER, data.address(), 4096,
                    q1.amParams.address(), q1.toSelf());
        } finally {
            q1.device.workerLock.unlock();
        }
        // and a stale token on connection 1 itself
        raw(c1, Opcode.RDMA_WRITE.ordinal(), 0, target.address() + 8192, targetMr.rkey(), 0, 4096, data, token(c1) ^ 1);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (dropped(s2.device) < droppedBefore + 2) { // progress at both ends until both arrived
            scq.poll(none);
            ccq.poll(none);
            assertThat(System.nanoTime()).as("both dropped at the target within 10 s").isLessThan(deadline);
        }
        assertThat(target.asSlice(0, 16384).mismatch(arena.allocate(16384))).as("nothing written").isEqualTo(-1);
        assertThat(one[1].qp().state()).isEqualTo(QueuePair.State.RTS);
        assertThat(two[1].qp().state()).isEqualTo(QueuePair.State.RTS);
        anotherConnectionWorks();
    }
}
