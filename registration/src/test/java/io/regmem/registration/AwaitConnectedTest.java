package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.TwoDevices;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code CmId.awaitConnected}: returns once the peer accepted (also when the accept comes later, on
 * another thread), and fails naming why otherwise: ETIMEDOUT (the request goes on), ECONNREFUSED for a
 * rejection, ECONNRESET for a connection that was up and ended, EINVAL with nothing under way, EINTR
 * for an interrupted thread (its flag kept).
 */
@ExtendWith(NoLeaks.class)
class AwaitConnectedTest extends TwoDevices {
    private static final AtomicInteger NAMES = new AtomicInteger();
    private CmId listener;
    private String address;

    @BeforeEach
    void setUp() {
        listener = devB.createCmId();
        address = Providers.address(Providers.NAME, "await-" + NAMES.incrementAndGet());
        listener.listen(address);
    }

    private CmId requester() {
        CmId id = devA.createCmId();
        id.createQp(pdA, new QpInitAttributes().sendCq(cqA).recvCq(cqA).maxSendWr(4).maxRecvWr(4));
        return id;
    }

    private CmId request() {
        CmId r = Providers.awaitRequest(listener);
        r.createQp(pdB, new QpInitAttributes().sendCq(cqB).recvCq(cqB).maxSendWr(4).maxRecvWr(4));
        return r;
    }

    private static Errno errno(Throwable e) {
        return ((RdmaException) e).errno();
    }

    @Test
    void returnsOnceTheAcceptCameOnAnotherThread() throws Exception {
        CmId a = requester();
        a.connect(address, new byte[] {7});
        Thread acceptor = Thread.ofPlatform().start(() -> {
            CmId r = request();
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            r.accept(new byte[] {9});
        });
        a.awaitConnected(10, TimeUnit.SECONDS);
        assertThat(a.connState()).isEqualTo(CmId.ConnState.CONNECTED);
        assertThat(a.privateData()).containsExactly(9);
        assertThat(a.qp().tryPostRecv(new WorkRequest(1).wrId(1))).isEqualTo(1);
        acceptor.join();
        a.awaitConnected(0, TimeUnit.SECONDS); // connected: returns at once
        a.disconnect();
        assertThatThrownBy(() -> a.awaitConnected(1, TimeUnit.SECONDS)).isInstanceOf(RdmaException.class)
                .matches(e -> errno(e) == Errno.ECONNRESET).hasMessageContaining("the connection ended");
        while (cqA.poll(new WorkCompletion[] {new WorkCompletion()}) > 0) {
            // the flushed receive
        }
    }

    @Test
    void aRejectionIsConnectionRefusedWithTheRejectersData() {
        CmId a = requester();
        a.connect(address);
        request().reject(new byte[] {1, 2, 3});
        assertThatThrownBy(() -> a.awaitConnected(10, TimeUnit.SECONDS)).isInstanceOf(RdmaException.class)
                .matches(e -> errno(e) == Errno.ECONNREFUSED).hasMessageContaining("3 bytes of the peer's private data");
        assertThat(a.privateData()).containsExactly(1, 2, 3);
    }

    /**
     * A device of this JVM with another secret is refused as one in another process is (on the
     * providers that take a secret: shm, ucx): ECONNREFUSED naming the reason, a REJECTED event, and
     * no request at the listener; its connect does not wait for an application that never hears of it.
     */
    @Test
    void aDeviceOfThisJvmWithAnotherSecretIsRefusedAndTheListenerHearsNothing() {
        Assumptions.assumeTrue(Providers.NAME.equals("shm") || Providers.NAME.equals("ucx"), "a provider with a secret");
        try (RdmaDevice stranger = Providers.open(Map.of("secret", "await-connected-test-another-secret-0123"))) {
            ProtectionDomain pd = stranger.allocPd();
            CompletionQueue cq = stranger.createCq(4);
            CmId a = stranger.createCmId();
            a.createQp(pd, QpInitAttributes.of(cq));
            a.connect(address);
            assertThatThrownBy(() -> a.awaitConnected(10, TimeUnit.SECONDS)).isInstanceOf(RdmaException.class)
                    .matches(e -> errno(e) == Errno.ECONNREFUSED).hasMessageContaining("secrets differ");
            assertThat(a.connState()).isEqualTo(CmId.ConnState.DISCONNECTED);
            assertThat(a.failureReason()).contains("secrets differ");
            assertThat(listener.getRequest()).as("the listener's application heard of no request").isNull();
            a.destroyQp();
            a.close();
            cq.close();
            pd.close();
        }
    }

    @Test
    void nobodyAcceptingIsATimeoutAndTheRequestGoesOn() {
        CmId a = requester();
        a.connect(address);
        CmId r = request(); // taken, not answered
        long start = System.nanoTime();
        assertThatThrownBy(() -> a.awaitConnected(50, TimeUnit.MILLISECONDS)).isInstanceOf(RdmaException.class)
                .matches(e -> errno(e) == Errno.ETIMEDOUT).hasMessageContaining("still CONNECTING");
        assertThat(System.nanoTime() - start).as("waited about the timeout").isGreaterThanOrEqualTo(50_000_000L);
        assertThat(a.connState()).isEqualTo(CmId.ConnState.CONNECTING);
        r.accept();
        a.awaitConnected(10, TimeUnit.SECONDS);
        a.disconnect();
    }

    @Test
    void nothingUnderWayIsInvalidAndAnInterruptIsEintr() {
        CmId idle = devA.createCmId();
        assertThatThrownBy(() -> idle.awaitConnected(1, TimeUnit.SECONDS)).isInstanceOf(RdmaException.class)
                .matches(e -> errno(e) == Errno.EINVAL).hasMessageContaining("state IDLE");
        assertThatThrownBy(() -> listener.awaitConnected(1, TimeUnit.SECONDS)).isInstanceOf(RdmaException.class)
                .matches(e -> errno(e) == Errno.EINVAL).hasMessageContaining("state LISTENING");
        CmId a = requester();
        a.connect(address);
        Thread.currentThread().interrupt();
        try {
            assertThatThrownBy(() -> a.awaitConnected(10, TimeUnit.SECONDS)).isInstanceOf(RdmaException.class)
                    .matches(e -> errno(e) == Errno.EINTR);
            assertThat(Thread.currentThread().isInterrupted()).as("the flag stays set").isTrue();
        } finally {
            Thread.interrupted();
        }
        request().reject();
        idle.close();
    }
}
