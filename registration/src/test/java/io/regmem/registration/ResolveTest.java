package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.TwoDevices;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * rdma_cm's three steps to a connection on the provider under test ({@code rdma_resolve_addr},
 * {@code rdma_resolve_route}, {@code rdma_connect}) with their events and statuses, and the
 * reasons a request is rejected ({@code event->status}, {@code rdma_reject_msg},
 * {@code rdma_consumer_reject_data}), and {@code rdma_notify}: each failed call changing nothing.
 */
@ExtendWith(NoLeaks.class)
class ResolveTest extends TwoDevices {
    private static final AtomicInteger NAMES = new AtomicInteger();
    private final List<CmEvent> events = new CopyOnWriteArrayList<>();

    private static boolean sockets() {
        return Providers.NAME.equals("shm") || Providers.NAME.equals("ucx");
    }

    private CmId recorded(CmId id) {
        id.onEvent(e -> {
            events.add(e);
            return false;
        });
        return id;
    }

    private CmEvent awaitEvent(CmId id, CmEvent.Type type) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            for (CmEvent e : events) {
                if (e.id() == id && e.type() == type) {
                    return e;
                }
            }
            assertThat(System.nanoTime()).as("%s for %s within 10 s (got %s)", type, id, events).isLessThan(deadline);
            Thread.onSpinWait();
        }
    }

    private CmId listener() {
        CmId listener = devB.createCmId();
        listener.bindAddr(sockets() ? "127.0.0.1:0" : "resolve-" + NAMES.incrementAndGet());
        listener.listen();
        return listener;
    }

    @Test
    void resolveTheAddressThenTheRouteThenConnect() {
        CmId listener = listener();
        CmId active = recorded(devA.createCmId());
        assertThat(active.readGids().destination()).as("nothing to go to yet").isNull();
        assertThat(active.readGids().source()).isNotNull();
        active.resolveAddr(null, listener.localAddress(), 2000);
        GidPair gids = active.readGids();
        assertThat(gids.destination()).as("rdma_read_gids after resolution").isEqualTo(InetAddress.getLoopbackAddress());
        assertThat(AhAttributes.of(gids.destination()).gid()).startsWith(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF);
        assertThat(awaitEvent(active, CmEvent.Type.ADDR_RESOLVED).status()).isZero();
        assertThat(active.connState()).isEqualTo(CmId.ConnState.ADDR_RESOLVED);
        assertThat(active.resolvedAddress()).isEqualTo(listener.localAddress());
        assertRdma(active::connect, Errno.EINVAL, "needs a resolved route");
        active.resolveRoute(2000);
        assertThat(awaitEvent(active, CmEvent.Type.ROUTE_RESOLVED).status()).isZero();
        assertThat(active.connState()).isEqualTo(CmId.ConnState.ROUTE_RESOLVED);
        assertRdma(active::connect, Errno.EINVAL, "needs a QP");
        assertThat(active.connState()).isEqualTo(CmId.ConnState.ROUTE_RESOLVED);
        active.createQp(pdA, QpInitAttributes.of(cqA));
        assertRdma(() -> active.connect("elsewhere:1"), Errno.EINVAL, "ROUTE_RESOLVED");
        active.connect();
        CmId request = Providers.awaitRequest(listener);
        request.createQp(pdB, QpInitAttributes.of(cqB));
        request.accept();
        active.awaitConnected(10, TimeUnit.SECONDS);
        assertThat(active.peerAddress()).isEqualTo(listener.localAddress());
        // rdma_notify(COMM_EST) on an established connection
        assertRdma(() -> active.notify(AsyncEvent.Type.COMM_EST), Errno.EISCONN);
        assertRdma(() -> active.notify(AsyncEvent.Type.QP_FATAL), Errno.EINVAL, "only COMM_EST");
        assertRdma(() -> listener.notify(AsyncEvent.Type.COMM_EST), Errno.EINVAL, "LISTENING");
    }

    @Test
    void theStepsRulesEachFailedCallChangingNothing() {
        CmId id = devA.createCmId();
        assertRdma(() -> id.resolveRoute(2000), Errno.EINVAL, "resolveAddr first");
        assertRdma(() -> id.resolveAddr(null, null, 2000), Errno.EINVAL);
        assertRdma(() -> id.resolveAddr(null, "x:1", 0), Errno.EINVAL, "positive timeout");
        assertRdma(() -> id.resolveAddr("127.0.0.1:0", "x:1", 2000), Errno.EINVAL, "TCP port space");
        if (sockets()) {
            assertRdma(() -> id.resolveAddr(null, "no port", 2000), Errno.EINVAL, "host:port");
        }
        assertThat(id.connState()).isEqualTo(CmId.ConnState.IDLE);
        assertThat(id.resolvedAddress()).isNull();
        id.resolveAddr(null, sockets() ? "127.0.0.1:9" : "somewhere", 2000);
        assertRdma(() -> id.resolveAddr(null, "other:1", 2000), Errno.EINVAL, "ADDR_RESOLVED");
        assertRdma(() -> id.resolveRoute(-1), Errno.EINVAL);
        assertThat(id.connState()).isEqualTo(CmId.ConnState.ADDR_RESOLVED);
        assertRdma(() -> id.awaitConnected(1, TimeUnit.MILLISECONDS), Errno.EINVAL, "ADDR_RESOLVED");
    }

    @Test
    void anAddressThatDoesNotResolveIsAnAddrErrorEvent() {
        Assumptions.assumeTrue(sockets(), "soft's addresses are names: every one resolves");
        CmId id = recorded(devA.createCmId());
        id.resolveAddr(null, "no-such-host.invalid:18515", 2000);
        CmEvent e = awaitEvent(id, CmEvent.Type.ADDR_ERROR);
        assertThat(e.status()).isEqualTo(-Errno.EHOSTUNREACH.value());
        assertThat(id.connState()).as("unchanged").isEqualTo(CmId.ConnState.IDLE);
        assertThat(id.resolvedAddress()).isNull();
    }

    @Test
    void shmRoutesToThisHostOnly() {
        Assumptions.assumeTrue(Providers.NAME.equals("shm"), "a same-host provider's rule");
        CmId id = recorded(devA.createCmId());
        id.resolveAddr(null, "192.0.2.1:18515", 2000); // TEST-NET-1: an address no host here has
        awaitEvent(id, CmEvent.Type.ADDR_RESOLVED);
        id.resolveRoute(2000);
        assertThat(awaitEvent(id, CmEvent.Type.ROUTE_ERROR).status()).isEqualTo(-Errno.EHOSTUNREACH.value());
        assertThat(id.connState()).isEqualTo(CmId.ConnState.ADDR_RESOLVED);
    }

    @Test
    void noAnswerInTimeIsUnreachableAndABrokenExchangeAConnectError() throws Exception {
        Assumptions.assumeTrue(sockets(), "soft answers within the call");
        try (RdmaDevice quick = Providers.open(java.util.Map.of("handshakeTimeoutMillis", "300"));
             ProtectionDomain pd = quick.allocPd(); CompletionQueue cq = quick.createCq(16)) {
            for (boolean silent : new boolean[] {true, false}) {
                try (ServerSocket fake = new ServerSocket(0, 4, InetAddress.getLoopbackAddress())) {
                    Thread server = Thread.ofPlatform().start(() -> {
                        try (Socket s = fake.accept()) {
                            if (silent) {
                                s.getInputStream().read(); // says nothing, until the requester gives up
                            }
                        } catch (java.io.IOException gone) {
                            // the requester closed
                        }
                    });
                    CmId id = recorded(quick.createCmId());
                    id.createQp(pd, QpInitAttributes.of(cq));
                    id.connect("127.0.0.1:" + fake.getLocalPort());
                    CmEvent e = awaitEvent(id, silent ? CmEvent.Type.UNREACHABLE : CmEvent.Type.CONNECT_ERROR);
                    assertThat(e.status()).isEqualTo(silent ? -Errno.ETIMEDOUT.value() : -Errno.ECONNRESET.value());
                    Providers.awaitState(id, CmId.ConnState.DISCONNECTED);
                    assertThat(id.failureReason()).isNotNull();
                    assertRdma(() -> id.awaitConnected(1, TimeUnit.SECONDS), Errno.ECONNREFUSED);
                    id.destroyQp();
                    id.close();
                    server.join(10_000);
                }
            }
        }
    }

    @Test
    void aRejectionSaysWhyAndCarriesTheConsumersDataOnlyForItsOwnReject() {
        CmId listener = listener();
        CmId active = recorded(devA.createCmId());
        active.createQp(pdA, QpInitAttributes.of(cqA));
        active.connect(listener.localAddress());
        Providers.awaitRequest(listener).reject(new byte[] {4, 2});
        CmEvent rejected = awaitEvent(active, CmEvent.Type.REJECTED);
        assertThat(rejected.status()).isEqualTo(CmEvent.REJECT_CONSUMER_DEFINED);
        assertThat(rejected.rejectMessage()).isEqualTo("consumer defined");
        assertThat(rejected.consumerRejectData()).containsExactly(4, 2);
        assertThat(active.failureReason()).isNull();
        // a listener destroyed before it answered: not the consumer's reject, no consumer data
        CmId second = recorded(devA.createCmId());
        second.createQp(pdA, QpInitAttributes.of(cqA));
        second.connect(listener.localAddress());
        Providers.awaitRequest(listener).close();
        CmEvent failed = awaitEvent(second, CmEvent.Type.REJECTED);
        assertThat(failed.status()).isEqualTo(CmEvent.REJECT_INVALID_SERVICE_ID);
        assertThat(failed.rejectMessage()).isEqualTo("invalid service ID");
        assertThat(failed.consumerRejectData()).isNull();
        assertThat(second.failureReason()).isNotNull();
        CmEvent notRejected = new CmEvent(CmEvent.Type.ESTABLISHED, active, null);
        assertThat(notRejected.rejectMessage()).isNull();
        assertThat(notRejected.consumerRejectData()).isNull();
    }
}
