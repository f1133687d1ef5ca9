package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.link.Link;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.TwoDevices;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code CmId.bindAddr} then {@code listen()} ({@code rdma_bind_addr}, {@code rdma_listen}) on the
 * provider under test: a bound ID reports its address (on shm and ucx a port the system picked for
 * port 0, taken at once), listens there and is connected to like any listener; the rules of a bind
 * (idle IDs only, once, {@code EADDRINUSE} for a taken port, a bound ID does not connect), each
 * failed call changing nothing; closing a bound or listening ID gives its port back.
 */
@ExtendWith(NoLeaks.class)
class BindAddrTest extends TwoDevices {
    private static final AtomicInteger NAMES = new AtomicInteger();

    private static boolean sockets() {
        return Providers.NAME.equals("shm") || Providers.NAME.equals("ucx");
    }

    /** An address to bind: a fresh name on soft, {@code 127.0.0.1:0} (the system picks) on shm and ucx. */
    private static String anyAddress() {
        return sockets() ? "127.0.0.1:0" : "bind-" + NAMES.incrementAndGet();
    }

    @Test
    void aBoundIdListensAtTheAddressItReportsAndIsConnectedTo() throws Exception {
        CmId listener = devB.createCmId();
        assertThat(listener.localAddress()).isNull();
        listener.bindAddr(anyAddress());
        assertThat(listener.connState()).isEqualTo(CmId.ConnState.BOUND);
        String bound = listener.localAddress();
        if (sockets()) {
            assertThat(bound).startsWith("127.0.0.1:").isNotEqualTo("127.0.0.1:0");
        }
        listener.listen();
        assertThat(listener.connState()).isEqualTo(CmId.ConnState.LISTENING);
        assertThat(listener.localAddress()).isEqualTo(bound);

        CmId active = devA.createCmId();
        active.createQp(pdA, QpInitAttributes.of(cqA));
        active.connect(bound, new byte[] {7});
        CmId request = Providers.awaitRequest(listener);
        assertThat(request.privateData()).containsExactly(7);
        request.createQp(pdB, QpInitAttributes.of(cqB));
        request.accept();
        active.awaitConnected(10, TimeUnit.SECONDS);
        assertThat(active.connState()).isEqualTo(CmId.ConnState.CONNECTED);
    }

    @Test
    void theRulesOfABindAndEveryFailedCallChangesNothing() {
        CmId id = devB.createCmId();
        assertRefused(() -> id.bindAddr(null), Errno.EINVAL, "bindAddr(null)");
        assertRefused(id::listen, Errno.EINVAL, "listen() in state IDLE");
        assertThat(id.connState()).isEqualTo(CmId.ConnState.IDLE);
        assertThat(id.localAddress()).isNull();
        if (sockets()) {
            assertRefused(() -> id.bindAddr("no port"), Errno.EINVAL, "is not host:port");
            assertRefused(() -> id.bindAddr("127.0.0.1:65536"), Errno.EINVAL, "is not host:port");
            assertThat(id.connState()).isEqualTo(CmId.ConnState.IDLE);
        }
        id.bindAddr(anyAddress());
        String bound = id.localAddress();
        assertRefused(() -> id.bindAddr(anyAddress()), Errno.EINVAL, "bindAddr");
        assertRefused(() -> id.listen("elsewhere"), Errno.EINVAL, "needs an idle ID");
        id.createQp(pdB, QpInitAttributes.of(cqB));
        assertRefused(() -> id.connect(bound), Errno.EINVAL, "BOUND");
        assertRefused(() -> id.awaitConnected(1, TimeUnit.MILLISECONDS), Errno.EINVAL, "BOUND");
        assertThat(id.connState()).isEqualTo(CmId.ConnState.BOUND);
        assertThat(id.localAddress()).isEqualTo(bound);
        id.listen();
        assertRefused(id::listen, Errno.EINVAL, "listen() in state LISTENING");
        assertThat(id.connState()).isEqualTo(CmId.ConnState.LISTENING);
    }

    @Test
    void aTakenPortIsEaddrinuseAndAClosedIdGivesItsPortBack() throws IOException {
        Assumptions.assumeTrue(sockets(), "soft's addresses are names, not ports");
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CmId id = devB.createCmId();
            assertRefused(() -> id.bindAddr("127.0.0.1:" + taken.getLocalPort()), Errno.EADDRINUSE, "cannot bind");
            assertThat(id.connState()).isEqualTo(CmId.ConnState.IDLE);
            assertThat(id.localAddress()).isNull();
            id.close();
        }
        // A bound ID holds its port; closed, bound or listening, it gives it back when close returns
        // (many rounds: a listener's port is free only once its accepting thread has left accept).
        for (int round = 0; round < 100; round++) {
            boolean listen = round % 2 == 1;
            CmId first = devB.createCmId();
            first.bindAddr("127.0.0.1:" + portBelowEphemeral());
            String address = first.localAddress();
            if (listen) {
                first.listen();
                try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port(address))) {
                    assertThat(s.isConnected()).as("something listens at %s", address).isTrue();
                    s.getOutputStream().write(1); // a handshake under way at the listener when it closes
                }
            }
            CmId second = devB.createCmId();
            assertRefused(() -> second.bindAddr(address), Errno.EADDRINUSE, "cannot bind");
            first.close();
            try {
                second.bindAddr(address);
            } catch (RdmaException e) { // (what still holds the port, for whoever reads the failure)
                second.close();
                throw new AssertionError("round " + round + (listen ? " (listening)" : "") + ": the port of the closed ID is "
                        + "still taken; the kernel's sockets on it: " + socketsOn(port(address)), e);
            }
            assertThat(second.localAddress()).isEqualTo(address);
            second.close();
        }
    }

    /** The kernel's TCP sockets whose local port is {@code port}, with their states ({@code /proc/net/tcp}, {@code tcp6}). */
    private static String socketsOn(int port) {
        String[] states = {"?", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT", "CLOSE",
            "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING", "NEW_SYN_RECV"};
        StringBuilder b = new StringBuilder();
        for (String table : new String[] {"/proc/net/tcp", "/proc/net/tcp6"}) {
            try {
                for (String line : Files.readAllLines(Path.of(table))) {
                    String[] f = line.strip().split("\\s+");
                    if (f.length > 3 && f[1].contains(":") && f[1].endsWith(String.format(Locale.ROOT, ":%04X", port))) {
                        int st = Integer.parseInt(f[3], 16);
                        b.append(' ').append(f[1]).append("->").append(f[2]).append(' ')
                                .append(st < states.length ? states[st] : f[3]).append(';');
                    }
                }
            } catch (IOException | RuntimeException e) {
                b.append(' ').append(table).append(" unreadable: ").append(e.getMessage()).append(';');
            }
        }
        return b.length() == 0 ? "none" : b.toString();
    }

    /**
     * A listener closed while a handshake is under way (a connection that said one byte and waits):
     * the handshake is reset, and the port is free for a bind without {@code REUSEADDR} when close returns.
     */
    @Test
    void aListenerClosedDuringAHandshakeEndsItAndGivesItsPortBack() throws IOException {
        Assumptions.assumeTrue(sockets(), "soft's addresses are names");
        CmId listener = devB.createCmId();
        listener.bindAddr("127.0.0.1:0");
        String address = listener.localAddress();
        listener.listen();
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port(address))) {
            s.getOutputStream().write(1); // a handshake under way: the listener waits for the rest of its HELLO
            s.setSoTimeout(5_000); // (half the listener's handshake deadline, which would end it otherwise)
            assertThat(s.getInputStream().read()).as("the listener's challenge").isNotNegative();
            listener.close();
            CmId again = devB.createCmId();
            again.bindAddr(address);
            assertThat(again.localAddress()).isEqualTo(address);
            again.close();
            try {
                while (s.getInputStream().read() >= 0) {
                    Thread.onSpinWait(); // (the rest of the challenge, then its end)
                }
            } catch (SocketTimeoutException e) {
                throw new AssertionError("the handshake was left open after its listener closed", e);
            } catch (IOException reset) {
                // the handshake's socket was reset: what the listener's close does
            }
        }
    }

    /**
     * A listener that refused a requester (another secret: told why) gives its port back when it closes,
     * as one that refused nobody: the refused handshake's connection holds nothing on the port (no
     * TIME_WAIT, no LAST_ACK), so a bind without {@code REUSEADDR} takes it at once.
     */
    @Test
    void aListenerThatRefusedARequesterGivesItsPortBackWhenItCloses() throws Exception {
        Assumptions.assumeTrue(sockets(), "soft's addresses are names");
        CmId listener = devB.createCmId();
        listener.bindAddr("127.0.0.1:" + portBelowEphemeral());
        String address = listener.localAddress();
        listener.listen();
        // (a requester with another secret, as ShmRefusalTest's: the listener tells it why, then it closes)
        Link l = Link.connect("test", new Link.Kind(Providers.NAME, "test address"), "127.0.0.1", port(address),
                "another secret, long enough for a key".getBytes(java.nio.charset.StandardCharsets.UTF_8), 5000);
        try {
            l.readChallenge(l.deadline());
            l.sendHello(0, Link.token(), new byte[16], new byte[0]);
            assertThatThrownBy(() -> l.readAnswer(l.deadline(), () -> { })).isInstanceOf(IOException.class)
                    .hasMessageContaining("refused the connection");
        } finally {
            l.close();
        }
        listener.close();
        CmId again = devB.createCmId();
        again.bindAddr(address);
        assertThat(again.localAddress()).isEqualTo(address);
        again.close();
    }

    /**
     * A port free now below the kernel's ephemeral range: no connect() on the host picks it, so none of
     * the thousands of TIME_WAIT connections the suite leaves behind can sit on it when the test binds
     * it again (a port of bind(0) can share its number with TIME_WAIT connections that refuse a second,
     * explicit bind without REUSEADDR, whatever regmem did).
     */
    private static int portBelowEphemeral() throws IOException {
        int low = 32768;
        try {
            // (a buffered read: Files.readString of a sysctl file reads its first byte only, "3" of "32768")
            low = Integer.parseInt(Files.readAllLines(Path.of("/proc/sys/net/ipv4/ip_local_port_range"))
                    .get(0).strip().split("\\s+")[0]);
        } catch (IOException | RuntimeException e) {
            // (not Linux, or unreadable: the default range)
        }
        if (low <= 10_001) {
            throw new IOException("the ephemeral port range starts at " + low + ": no room below it");
        }
        java.util.SplittableRandom rnd = new java.util.SplittableRandom();
        for (int tries = 0; tries < 1000; tries++) {
            int port = 10_000 + rnd.nextInt(Math.max(1, low - 10_000));
            try (ServerSocket probe = new ServerSocket()) {
                probe.setReuseAddress(false);
                probe.bind(new java.net.InetSocketAddress("127.0.0.1", port));
                return port;
            } catch (IOException taken) {
                // another one
            }
        }
        throw new IOException("no free port below " + low);
    }

    private static int port(String address) {
        return Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
    }

    private static void assertRefused(Runnable call, Errno errno, String text) {
        assertThatThrownBy(call::run).isInstanceOfSatisfying(RdmaException.class, e -> {
            assertThat(e.errno()).isEqualTo(errno);
            assertThat(e.getMessage()).contains(text);
        });
    }
}
