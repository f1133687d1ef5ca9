package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmEvent;
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
import io.regmem.registration.link.Listener;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Clients that are not regmem peers with the secret, on plain sockets ({@link HostileClient}):
 * garbage of every size, well-formed handshakes with random or damaged worker addresses, truncation
 * at every byte, every bit of the header flipped, replayed handshakes, absurd lengths, slow-loris and
 * a flood. Against a listener of this JVM (each attack is one log line, no request, nothing leaked)
 * and against a listener in another process over both UCX transports (it lives, then serves a real
 * client byte-exact and ends clean). Also the other way round: a listener that is not a regmem peer
 * with the secret cannot make a requester hand its bytes to UCX.
 */
@ExtendWith(NoLeaks.class)
class UcxHostileClientTest {
    private static final AtomicInteger PORTS = new AtomicInteger(29_500 + (int) (ProcessHandle.current().pid() % 2000)); // (listen ports stay below the kernel's ephemeral range, 32768-60999, which outgoing sockets take)
    private static final String SECRET = "the hostile-client suite's secret";
    private static final Map<String, String> OPTIONS = Map.of("secret", SECRET, "handshakeTimeoutMillis", "500");

    private final Arena arena = Arena.ofShared();
    private final List<LogRecord> logged = java.util.Collections.synchronizedList(new ArrayList<>());
    private final Handler capture = new Handler() {
        @Override
        public void publish(LogRecord r) {
            logged.add(r);
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };
    private final Logger ucxLog = Logger.getLogger("io.regmem.registration.ucx");
    private final List<RdmaDevice> devices = new ArrayList<>();
    private final List<UcxChild> children = new ArrayList<>();

    @BeforeEach
    void setUp() {
        UcxAvailable.require();
        ucxLog.addHandler(capture);
        ucxLog.setUseParentHandlers(false); // hundreds of refusals: asserted here, not printed into the build's log
    }

    @AfterEach
    void tearDown() throws Exception {
        ucxLog.removeHandler(capture);
        ucxLog.setUseParentHandlers(true);
        for (UcxChild c : children) {
            c.process.destroyForcibly();
            c.process.waitFor(30, TimeUnit.SECONDS);
        }
        for (RdmaDevice d : devices) {
            for (CmId id : d.resources().survivors(CmId.class)) {
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
            d.forceClose();
        }
        arena.close();
    }

    private RdmaDevice open(Map<String, String> options) {
        RdmaDevice d = RdmaDevice.open("ucx", options);
        devices.add(d);
        return d;
    }

    /** A real UCX worker address (of a device made for it and closed again). */
    private static byte[] realWorkerAddress() {
        UcxDevice d = new UcxDevice(Ucp.get(), UcxProvider.DEFAULTS, "worker-address-donor", null, 1000);
        try {
            return d.workerAddress();
        } finally {
            d.close();
        }
    }

    private static String refusals(List<LogRecord> records) {
        StringBuilder b = new StringBuilder();
        for (LogRecord r : records) {
            b.append(r.getMessage()).append('\n');
        }
        return b.toString();
    }

    @Test
    void everyAttackOnAListenerOfThisJvmIsOneLogLineAndNoRequest() throws Exception {
        RdmaDevice dev = open(OPTIONS);
        CmId listener = dev.createCmId();
        int port = PORTS.incrementAndGet();
        listener.listen("127.0.0.1:" + port);
        HostileClient client = new HostileClient("127.0.0.1", port);
        byte[] worker = realWorkerAddress();

        int attacks = client.attackAll(SECRET.getBytes(), worker);

        assertThat(listener.getRequest()).as("no attack made a request").isNull();
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (logged.size() < attacks && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        List<LogRecord> lines;
        synchronized (logged) {
            lines = new ArrayList<>(logged);
        }
        assertThat(lines).as("one line per attack:\n%s", refusals(lines)).hasSize(attacks);
        assertThat(lines).allSatisfy(r -> {
            assertThat(r.getLevel()).isEqualTo(java.util.logging.Level.WARNING);
            assertThat(r.getMessage()).startsWith("regmem ucx: listener 127.0.0.1:" + port + " refused a connection from /127.0.0.1:")
                    .doesNotContain("\n");
        });
        String all = refusals(lines);
        assertThat(all).contains("not a regmem ucx peer (bad magic)", "speaks handshake version",
                "HELLO is not authentic", "HELLO ended after", "worker address of -1 bytes (1 to 65536)",
                "worker address of 2147483647 bytes", "private data of 57 bytes (0 to 56)");

        // slow-loris: the handshake's time is over after 500 ms, however slowly the bytes come
        logged.clear();
        long took = client.slowLoris(SECRET.getBytes(), worker, 50);
        assertThat(took).as("closed once the handshake's 500 ms were over").isBetween(400L, 4_000L);
        awaitLogged(1);
        assertThat(logged.get(0).getMessage()).contains("did not arrive whole within 500 ms");

        // and then a real client connects through the socket ("localhost" is not the address this
        // JVM's listener table knows, so the connection takes the handshake as another process's would)
        realClientWritesAndReadsBack(dev, "localhost:" + port, listener);
        listener.close();
    }

    /**
     * A flood of silent connections beyond the limit: each new one is admitted and the oldest
     * unauthenticated handshake is dropped (as sshd's MaxStartups drops early), never the newest; at
     * the end the newest {@code MAX_PENDING_HANDSHAKES} wait for their HELLO and the listener serves.
     */
    @Test
    void aFloodOfSilentConnectionsDropsTheOldestBeyondTheLimitAndTheListenerServesAfterwards() throws Exception {
        RdmaDevice dev = open(Map.of("secret", SECRET, "handshakeTimeoutMillis", "4000"));
        CmId listener = dev.createCmId();
        int port = PORTS.incrementAndGet();
        listener.listen("127.0.0.1:" + port);
        List<Socket> flood = new ArrayList<>();
        int extra = 40;
        try {
            for (int i = 0; i < Listener.MAX_PENDING_HANDSHAKES + extra; i++) {
                Socket s = new Socket("127.0.0.1", port);
                s.setSoTimeout(HostileClient.CLOSED_WITHIN_MILLIS);
                flood.add(s);
            }
            for (int i = 0; i < extra; i++) {
                HostileClient.awaitClosed(flood.get(i)); // the oldest, dropped
            }
            for (int i = extra; i < flood.size(); i++) {
                Socket s = flood.get(i);
                assertThat(HostileClient.readChallengeOrClosed(s)).as("connection %d is challenged", i).isTrue();
                s.setSoTimeout(1);
                try {
                    int b = s.getInputStream().read();
                    throw new AssertionError("connection " + i + " (among the newest) was closed (" + b + ")");
                } catch (java.net.SocketTimeoutException stillWaitingForItsHello) {
                    // open: its handshake is under way
                }
            }
        } finally {
            for (Socket s : flood) {
                s.close();
            }
        }
        awaitLogged(flood.size()); // those dropped, and those that ended when the client closed
        assertThat(refusals(logged)).contains("dropped unauthenticated: " + Listener.MAX_PENDING_HANDSHAKES
                + " handshakes were under way, this one the oldest");
        assertThat(listener.getRequest()).isNull();
        realClientWritesAndReadsBack(dev, "localhost:" + port, listener);
        listener.close();
    }

    private void awaitLogged(int n) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (logged.size() < n && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(logged).as(refusals(logged)).hasSizeGreaterThanOrEqualTo(n);
    }

    /**
     * A client device (the same secret) connects to {@code address}, where {@code listener} of
     * {@code serverDev} listens: accepted with private data both ways, a WRITE and a READ byte-exact.
     */
    private void realClientWritesAndReadsBack(RdmaDevice serverDev, String address, CmId listener) throws Exception {
        RdmaDevice clientDev = open(Map.of("secret", SECRET));
        ProtectionDomain cpd = clientDev.allocPd();
        CompletionQueue ccq = clientDev.createCq(64);
        ProtectionDomain spd = serverDev.allocPd();
        CompletionQueue scq = serverDev.createCq(64);
        MemorySegment local = arena.allocate(65536, 4096);
        MemorySegment target = arena.allocate(65536, 4096);
        MemoryRegion lmr = cpd.register(local, Access.LOCAL_WRITE);
        MemoryRegion tmr = spd.register(target, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        CmId active = clientDev.createCmId();
        QueuePair qp = active.createQp(cpd, QpInitAttributes.of(ccq));
        active.connect(address, "hello from the client".getBytes());
        CmId passive = awaitRequest(listener);
        assertThat(new String(passive.privateData())).isEqualTo("hello from the client");
        assertThat(passive.peerAddress()).startsWith("127.0.0.1:");
        assertThat(active.localAddress()).as("the connection's source, as the listener sees it").isEqualTo(passive.peerAddress());
        QueuePair sqp = passive.createQp(spd, QpInitAttributes.of(scq));
        passive.accept("welcome".getBytes());
        awaitState(active, CmId.ConnState.CONNECTED);
        assertThat(new String(active.privateData())).isEqualTo("welcome");
        int rkey = qp.importRemoteKey(tmr.exportRemoteKey());
        for (int i = 0; i < 65536; i++) {
            local.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + 3));
        }
        WorkCompletion[] wc = {new WorkCompletion()};
        qp.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(local.address(), 65536, lmr.lkey()).remote(target.address(), rkey));
        assertThat(poll(ccq, scq, wc).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(target.mismatch(local)).isEqualTo(-1);
        local.fill((byte) 0);
        qp.postSend(new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(local.address(), 65536, lmr.lkey()).remote(target.address(), rkey));
        assertThat(poll(ccq, scq, wc).status()).isEqualTo(WcStatus.SUCCESS);
        assertThat(local.mismatch(target)).isEqualTo(-1);
        active.disconnect();
        awaitState(passive, CmId.ConnState.DISCONNECTED);
        while (ccq.poll(wc) > 0 || scq.poll(wc) > 0) {
            // flushed
        }
        active.destroyQp();
        passive.destroyQp();
        active.close();
        passive.close();
        lmr.close();
        tmr.close();
        ccq.close();
        scq.close();
        cpd.close();
        spd.close();
        assertThat(sqp.isDestroyed()).isTrue();
    }

    private static CmId awaitRequest(CmId listener) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        CmId r;
        while ((r = listener.getRequest()) == null) {
            assertThat(System.nanoTime()).as("a request within 10 s").isLessThan(deadline);
            Thread.sleep(1);
        }
        return r;
    }

    private static void awaitState(CmId id, CmId.ConnState state) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (id.connState() != state) {
            assertThat(System.nanoTime()).as("%s reaches %s (it is %s)", id, state, id.connState()).isLessThan(deadline);
            Thread.sleep(1);
        }
    }

    /** Polls the client's CQ (and the server's, which executes the requests) until one completion. */
    private static WorkCompletion poll(CompletionQueue client, CompletionQueue server, WorkCompletion[] wc) {
        WorkCompletion[] other = {new WorkCompletion()};
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (client.poll(wc) == 0) {
            server.poll(other);
            assertThat(System.nanoTime()).as("a completion within 10 s").isLessThan(deadline);
        }
        return wc[0];
    }

    @ParameterizedTest(name = "UCX_TLS={0}")
    @ValueSource(strings = {"tcp", "sysv,posix,cma"})
    void aListenerInAnotherProcessSurvivesEveryAttackThenServesARealClient(String tls) throws Exception {
        UcxChild child = new UcxChild(tls, PORTS.incrementAndGet(), "arena",
                Map.of("REGMEM_SECRET", SECRET, "OPTIONS", "handshakeTimeoutMillis=500"));
        children.add(child);
        child.expect("LISTENING");
        String host = "127.0.0.1";
        int port = Integer.parseInt(child.address.substring(child.address.indexOf(':') + 1));
        int attacks = new HostileClient(host, port).attackAll(SECRET.getBytes(), realWorkerAddress());
        assertThat(child.process.isAlive()).as("the listener lives (its output:\n%s)", child.output()).isTrue();
        long refused = 0;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() < deadline && (refused = child.output().lines()
                .filter(l -> l.contains("refused a connection from")).count()) < attacks) {
            Thread.sleep(10); // the last refusals' lines may follow their sockets' close by a moment
        }
        assertThat(refused).as("one line per attack").isEqualTo(attacks);

        // a real client with the secret: byte-exact both ways
        RdmaDevice dev = open(Map.of("secret", SECRET));
        ProtectionDomain pd = dev.allocPd();
        CompletionQueue cq = dev.createCq(64);
        MemorySegment mem = arena.allocate(65536, 4096);
        MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE);
        CmId id = dev.createCmId();
        QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq));
        id.connect(child.address);
        String[] key = child.expect("KEY ").split(" ");
        awaitState(id, CmId.ConnState.CONNECTED);
        int rkey = qp.importRemoteKey(MemorySegment.ofArray(HexFormat.of().parseHex(key[1])));
        long remote = Long.parseLong(key[2]);
        WorkCompletion[] wc = {new WorkCompletion()};
        qp.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mem.address(), 65536, mr.lkey()).remote(remote + 100, rkey));
        assertThat(awaitOne(cq, wc).status()).isEqualTo(WcStatus.SUCCESS);
        for (int i = 0; i < 65536; i++) {
            assertThat(mem.get(ValueLayout.JAVA_BYTE, i)).isEqualTo(UcxPeerMain.pattern(100 + i));
        }
        for (int i = 0; i < 65536; i++) {
            mem.set(ValueLayout.JAVA_BYTE, i, (byte) (i ^ 0x5A));
        }
        qp.postSend(new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                .addSge(mem.address(), 65536, mr.lkey()).remote(remote + 200_000, rkey));
        assertThat(awaitOne(cq, wc).status()).isEqualTo(WcStatus.SUCCESS);
        mem.fill((byte) 0);
        qp.postSend(new WorkRequest(1).wrId(3).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mem.address(), 65536, mr.lkey()).remote(remote + 200_000, rkey));
        assertThat(awaitOne(cq, wc).status()).isEqualTo(WcStatus.SUCCESS);
        for (int i = 0; i < 65536; i++) {
            assertThat(mem.get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) (i ^ 0x5A));
        }
        id.disconnect();
        while (cq.poll(wc) > 0) {
            // flushed
        }
        id.destroyQp();
        id.close();
        mr.close();
        cq.close();
        pd.close();
        child.expect("GONE");
        child.finish(); // ends CLEAN: nothing of the attacks or the connection was left
    }

    private static WorkCompletion awaitOne(CompletionQueue cq, WorkCompletion[] wc) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cq.poll(wc) == 0) {
            assertThat(System.nanoTime()).as("a completion within 10 s").isLessThan(deadline);
        }
        return wc[0];
    }

    @Test
    void aClientWithAnotherSecretIsRefusedAndSeesARejection() throws Exception {
        RdmaDevice server = open(OPTIONS);
        CmId listener = server.createCmId();
        int port = PORTS.incrementAndGet();
        listener.listen("127.0.0.1:" + port);
        RdmaDevice client = open(Map.of("secret", "a different secret, long enough"));
        ProtectionDomain pd = client.allocPd();
        CompletionQueue cq = client.createCq(16);
        CmId id = client.createCmId();
        id.createQp(pd, QpInitAttributes.of(cq));
        id.connect("localhost:" + port);
        awaitState(id, CmId.ConnState.DISCONNECTED);
        assertThat(listener.getRequest()).isNull();
        awaitLogged(2); // the listener's refusal, and the requester's failure
        assertThat(refusals(logged)).contains("HELLO is not authentic");
        id.destroyQp();
        id.close();
        cq.close();
        pd.close();
        listener.close();
    }

    /**
     * Listeners that are not regmem peers with the secret: one that sends garbage instead of a
     * challenge, one that answers an ACCEPT with a random worker address and a forged HMAC, one that
     * says nothing. The requester ends REJECTED each time (within the handshake's time) and no
     * worker address reached UCX: the JVM lives and the device closes clean.
     */
    @Test
    void aListenerThatIsNotARegmemPeerCannotMakeARequesterUseItsBytes() throws Exception {
        RdmaDevice client = open(OPTIONS);
        ProtectionDomain pd = client.allocPd();
        CompletionQueue cq = client.createCq(16);
        for (String kind : List.of("garbage", "forged-accept", "silent", "forged-reject")) {
            try (ServerSocket fake = new ServerSocket(0, 8, java.net.InetAddress.getLoopbackAddress())) {
                Thread server = Thread.ofPlatform().start(() -> fakeListener(fake, kind));
                CmId id = client.createCmId();
                AtomicReference<CmEvent> seen = new AtomicReference<>();
                id.onEvent(e -> {
                    seen.set(e);
                    return false;
                });
                id.createQp(pd, QpInitAttributes.of(cq));
                id.connect("127.0.0.1:" + fake.getLocalPort());
                awaitState(id, CmId.ConnState.DISCONNECTED);
                assertThat(id.privateData()).as(kind).isEmpty();
                // no answer in time: UNREACHABLE; an answer that is not a regmem listener's: CONNECT_ERROR
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (seen.get() == null && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                assertThat(seen.get()).as(kind).isNotNull();
                assertThat(seen.get().type()).as(kind).isEqualTo(kind.equals("silent")
                        ? CmEvent.Type.UNREACHABLE : CmEvent.Type.CONNECT_ERROR);
                assertThat(seen.get().status()).as(kind).isEqualTo(kind.equals("silent") ? -Errno.ETIMEDOUT.value()
                        : -Errno.ECONNRESET.value());
                id.destroyQp();
                id.close();
                server.join(10_000);
            }
        }
        cq.close();
        pd.close();
    }

    private static void fakeListener(ServerSocket fake, String kind) {
        try (Socket s = fake.accept()) {
            s.setSoTimeout(5_000);
            switch (kind) {
                case "garbage" -> s.getOutputStream().write(HostileClient.random(4096, 9));
                case "silent" -> s.getInputStream().read(); // until the requester gives up and closes
                default -> {
                    ByteBuffer c = ByteBuffer.allocate(22).putInt(Link.MAGIC).putShort(Link.VERSION)
                            .put(HostileClient.random(16, 1));
                    s.getOutputStream().write(c.array());
                    byte[] fixed = s.getInputStream().readNBytes(HostileClient.HELLO_FIXED);
                    ByteBuffer f = ByteBuffer.wrap(fixed, HostileClient.HELLO_FIXED - 6, 6);
                    int w = f.getInt();
                    int p = Short.toUnsignedInt(f.getShort());
                    s.getInputStream().readNBytes(w + p + 32);
                    if (kind.equals("forged-accept")) {
                        byte[] worker = HostileClient.random(300, 2);
                        ByteBuffer a = ByteBuffer.allocate(1 + 4 + 8 + 4 + 2 + worker.length + 32).put(Link.ACCEPT)
                                .putInt(0).putLong(1).putInt(worker.length).putShort((short) 0).put(worker)
                                .put(HostileClient.random(32, 3));
                        s.getOutputStream().write(a.array());
                    } else {
                        ByteBuffer r = ByteBuffer.allocate(1 + 2 + 5 + 32).put(Link.REJECT).putShort((short) 5)
                                .put("nope!".getBytes()).put(HostileClient.random(32, 4));
                        s.getOutputStream().write(r.array());
                    }
                }
            }
            s.getOutputStream().flush();
            s.getInputStream().read(); // until the requester closes
        } catch (java.io.IOException gone) {
            // the requester closed
        }
    }

    @Test
    void secretsShorterThanSixteenBytesOrGivenTwiceAreRefused() {
        assertThatThrownBy(() -> RdmaDevice.open("ucx", Map.of("secret", "short")))
                .isInstanceOf(RdmaException.class).hasMessageContaining("at least 16")
                .matches(e -> ((RdmaException) e).errno() == Errno.EINVAL);
        assertThatThrownBy(() -> RdmaDevice.open("ucx", Map.of("secret", SECRET, "secretFile", "/nonexistent")))
                .isInstanceOf(RdmaException.class).matches(e -> ((RdmaException) e).errno() == Errno.EINVAL);
        assertThatThrownBy(() -> RdmaDevice.open("ucx", Map.of("secretFile", "/nonexistent/secret")))
                .isInstanceOf(RdmaException.class).matches(e -> ((RdmaException) e).errno() == Errno.ENOENT);
        assertThatThrownBy(() -> RdmaDevice.open("ucx", Map.of("handshakeTimeoutMillis", "0")))
                .isInstanceOf(RdmaException.class).matches(e -> ((RdmaException) e).errno() == Errno.EINVAL);
    }
}
