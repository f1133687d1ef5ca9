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
import io.regmem.registration.link.Link;
import io.regmem.registration.testkit.ConnectionCrowd;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Unauthenticated connections cannot lock real clients out of a listener: with {@value #IDLE} idle
 * connections open and {@value #TRICKLING} sending a HELLO one byte at a time (and connecting again
 * when dropped), a real client with the secret is accepted within {@value #SERVED_WITHIN_MILLIS} ms and
 * its WRITE and READ cross byte-exact; on a listener of this JVM (reached through its socket) and on
 * one in another process over TCP and over shared memory. (Before, the listener ran 128 handshakes and
 * closed every connection beyond them: the real client was rejected.)
 */
@ExtendWith(NoLeaks.class)
class UcxListenerLockoutTest {
    private static final AtomicInteger PORTS = new AtomicInteger(23_000 + (int) (ProcessHandle.current().pid() % 2000));
    private static final String SECRET = "the lockout test's secret, long enough";
    static final int IDLE = 1000;
    static final int TRICKLING = 100;
    /** How soon the real client's connection is accepted (its handshake is a round trip or two). */
    static final long SERVED_WITHIN_MILLIS = 2000;

    private final Logger ucxLog = Logger.getLogger("io.regmem.registration.ucx");

    @BeforeEach
    void quiet() {
        ucxLog.setUseParentHandlers(false); // a thousand dropped handshakes: one line each, not for the build's log
    }

    @AfterEach
    void restore() {
        ucxLog.setUseParentHandlers(true);
    }

    /**
     * The first bytes of a HELLO that would pass every check so far (magic, version, a 100-byte worker
     * address), sent one at a time: the listener waits for the rest until its deadline.
     */
    static byte[] slowHello() {
        return ByteBuffer.allocate(4 + 2 + 16 + 4 + 8 + 4 + 2 + 100).putInt(Link.MAGIC).putShort(Link.VERSION)
                .put(new byte[16]).putInt(1).putLong(7).putInt(100).putShort((short) 0).array();
    }

    @Test
    void aListenerOfThisJvmServesARealClientThroughACrowd() throws Exception {
        UcxAvailable.require();
        int port = PORTS.incrementAndGet();
        try (Arena arena = Arena.ofShared();
             RdmaDevice server = RdmaDevice.open("ucx", Map.of("secret", SECRET));
             RdmaDevice client = RdmaDevice.open("ucx", Map.of("secret", SECRET))) {
            CmId listener = server.createCmId();
            listener.listen("127.0.0.1:" + port);
            ProtectionDomain spd = server.allocPd();
            CompletionQueue scq = server.createCq(64);
            MemorySegment target = arena.allocate(65536, 4096);
            MemoryRegion tmr = spd.register(target, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            try (ConnectionCrowd crowd = new ConnectionCrowd("127.0.0.1", port, IDLE, TRICKLING, slowHello())) {
                Thread.sleep(300); // the crowd is in: the listener took (and dropped) what it could
                ProtectionDomain cpd = client.allocPd();
                CompletionQueue ccq = client.createCq(64);
                CmId active = client.createCmId();
                QueuePair qp = active.createQp(cpd, QpInitAttributes.of(ccq));
                long start = System.nanoTime();
                active.connect("localhost:" + port, "real".getBytes()); // through the socket, not in place
                CmId passive = awaitRequest(listener, start);
                QueuePair sqp = passive.createQp(spd, QpInitAttributes.of(scq));
                passive.accept(new byte[0]);
                awaitConnected(active, start);
                writeAndReadBack(arena, cpd, ccq, scq, qp, qp.importRemoteKey(tmr.exportRemoteKey()), target.address(),
                        target);
                active.disconnect();
                awaitState(passive, CmId.ConnState.DISCONNECTED);
                drain(ccq, scq);
                active.destroyQp();
                passive.destroyQp();
                active.close();
                passive.close();
                assertThat(sqp.isDestroyed()).isTrue();
                ccq.close();
                cpd.close();
            }
            tmr.close();
            scq.close();
            spd.close();
            listener.close();
        }
    }

    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void aListenerInAnotherProcessServesARealClientThroughACrowd(String tls) throws Exception {
        UcxAvailable.require();
        UcxChild child = new UcxChild(tls, PORTS.incrementAndGet(), "arena", Map.of("REGMEM_SECRET", SECRET));
        try (Arena arena = Arena.ofShared();
             RdmaDevice dev = RdmaDevice.open("ucx", Map.of("secret", SECRET))) {
            child.expect("LISTENING");
            int port = Integer.parseInt(child.address.substring(child.address.indexOf(':') + 1));
            try (ConnectionCrowd crowd = new ConnectionCrowd("127.0.0.1", port, IDLE, TRICKLING, slowHello())) {
                Thread.sleep(300);
                ProtectionDomain pd = dev.allocPd();
                CompletionQueue cq = dev.createCq(64);
                CmId id = dev.createCmId();
                QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq));
                long start = System.nanoTime();
                id.connect(child.address);
                String[] key = child.expect("KEY ").split(" ");
                awaitConnected(id, start);
                int rkey = qp.importRemoteKey(MemorySegment.ofArray(HexFormat.of().parseHex(key[1])));
                writeAndReadBack(arena, pd, cq, null, qp, rkey, Long.parseLong(key[2]) + 8192, null);
                assertThat(child.process.isAlive()).isTrue();
                id.disconnect();
                drain(cq, null);
                id.destroyQp();
                id.close();
                child.expect("GONE");
                cq.close();
                pd.close();
            }
            child.finish();
        } finally {
            child.process.destroyForcibly();
            child.process.waitFor(30, TimeUnit.SECONDS);
        }
    }

    /** WRITEs 64 KiB of a pattern to {@code remote}, READs it back into other memory, checks every byte. */
    private static void writeAndReadBack(Arena arena, ProtectionDomain pd, CompletionQueue cq, CompletionQueue peerCq,
                                         QueuePair qp, int rkey, long remote, MemorySegment target) {
        MemorySegment local = arena.allocate(2 * 65536, 4096);
        MemoryRegion mr = pd.register(local, Access.LOCAL_WRITE);
        for (int i = 0; i < 65536; i++) {
            local.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 13 + 5));
        }
        WorkCompletion[] wc = {new WorkCompletion()};
        qp.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(local.address(), 65536, mr.lkey()).remote(remote, rkey));
        assertThat(await(cq, peerCq, wc).status()).isEqualTo(WcStatus.SUCCESS);
        if (target != null) {
            assertThat(target.mismatch(local.asSlice(0, 65536))).isEqualTo(-1);
        }
        qp.postSend(new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(local.address() + 65536, 65536, mr.lkey()).remote(remote, rkey));
        assertThat(await(cq, peerCq, wc).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(local.asSlice(65536, 65536).mismatch(local.asSlice(0, 65536))).as("read back").isEqualTo(-1);
        mr.close();
    }

    private static WorkCompletion await(CompletionQueue cq, CompletionQueue peerCq, WorkCompletion[] wc) {
        WorkCompletion[] other = {new WorkCompletion()};
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cq.poll(wc) == 0) {
            if (peerCq != null) {
                peerCq.poll(other);
            }
            assertThat(System.nanoTime()).as("a completion within 10 s").isLessThan(deadline);
        }
        return wc[0];
    }

    private static void drain(CompletionQueue cq, CompletionQueue peerCq) {
        WorkCompletion[] wc = {new WorkCompletion()};
        while (cq.poll(wc) > 0 || (peerCq != null && peerCq.poll(wc) > 0)) {
            // flushed
        }
    }

    private static CmId awaitRequest(CmId listener, long start) throws InterruptedException {
        CmId r;
        while ((r = listener.getRequest()) == null) {
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).as("the real client's request within %d ms",
                    SERVED_WITHIN_MILLIS).isLessThan(SERVED_WITHIN_MILLIS);
            Thread.sleep(1);
        }
        return r;
    }

    private static void awaitConnected(CmId id, long start) throws InterruptedException {
        while (id.connState() != CmId.ConnState.CONNECTED) {
            assertThat(id.connState()).as("the real client is not refused").isNotEqualTo(CmId.ConnState.DISCONNECTED);
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).as("the real client connected within %d ms",
                    SERVED_WITHIN_MILLIS).isLessThan(SERVED_WITHIN_MILLIS);
            Thread.sleep(1);
        }
    }

    private static void awaitState(CmId id, CmId.ConnState state) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (id.connState() != state) {
            assertThat(System.nanoTime()).as("%s reaches %s", id, state).isLessThan(deadline);
            Thread.sleep(1);
        }
    }
}
