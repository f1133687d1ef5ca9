package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.CompositeAgent;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A device's progress as an Agrona agent ({@link DeviceAgent}), and a device's {@code ErrorHandler}
 * for asynchronous failures: a peer that disconnects, a connection event handler that throws.
 */
@ExtendWith(NoLeaks.class)
class DutyCycleTest {

    @Test
    void aDeviceAgentExecutesPostedWorkWithNobodyPolling() {
        try (Loopback lb = new Loopback()) {
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            lb.memA.set(ValueLayout.JAVA_LONG, 0, 0xC0FFEEL);
            lb.qpA.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address(), lb.key(remote)));
            AgentInvoker invoker = new AgentInvoker(Throwable::printStackTrace, null,
                    new CompositeAgent(new DeviceAgent(lb.devA), new DeviceAgent(lb.devB)));
            invoker.start();
            long deadline = System.nanoTime() + 10_000_000_000L;
            int work = 0;
            while (lb.cqA.pending() == 0) {
                work += invoker.invoke();
                assertThat(System.nanoTime()).as("the WRITE completes within 10 s").isLessThan(deadline);
            }
            assertThat(work).as("the rounds report their work").isPositive();
            assertThat(lb.memB.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(0xC0FFEEL);
            assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
            for (int i = 0; i < 100 && invoker.invoke() > 0; i++) {
                // drain whatever the round left (acknowledgements, reaping)
            }
            assertThat(invoker.invoke()).as("idle: no work").isZero();
            invoker.close();
            local.close();
            remote.close();
        }
    }

    @Test
    void aDeviceAgentIsCheckedAndEndsWithItsDevice() {
        assertThatThrownBy(() -> new DeviceAgent(null)).isInstanceOf(RdmaException.class)
                .extracting(e -> ((RdmaException) e).errno()).isEqualTo(Errno.EINVAL);
        Loopback lb = new Loopback();
        DeviceAgent agent = new DeviceAgent(lb.devA);
        assertThat(agent.roleName()).isEqualTo("regmem-device:" + lb.devA.name());
        lb.close();
        assertThatThrownBy(() -> new DeviceAgent(lb.devA)).isInstanceOf(RdmaException.class)
                .extracting(e -> ((RdmaException) e).errno()).isEqualTo(Errno.EBADF);
    }

    @Test
    void aPeersDisconnectReachesTheErrorHandler() throws Exception {
        try (Loopback lb = new Loopback()) {
            List<Throwable> seen = new CopyOnWriteArrayList<>();
            lb.devB.errorHandler(seen::add);
            assertThat(lb.devB.errorHandler()).isNotNull();
            lb.idA.disconnect();
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (seen.isEmpty() && System.nanoTime() < deadline) {
                lb.poll(lb.cqB); // progress B, whose provider sees the peer go
                Thread.sleep(1);
            }
            assertThat(seen).hasSize(1);
            assertThat(seen.getFirst()).isInstanceOf(RdmaException.class).hasMessageContaining("the peer disconnected");
            assertThat(((RdmaException) seen.getFirst()).errno()).isEqualTo(Errno.ECONNRESET);
            lb.devB.errorHandler(null);
        }
    }

    @Test
    void aConnectionEventHandlerThatThrowsReachesTheErrorHandlerInsteadOfTheCaller() {
        try (Loopback lb = new Loopback()) {
            List<Throwable> seen = new CopyOnWriteArrayList<>();
            lb.devA.errorHandler(seen::add);
            IllegalStateException boom = new IllegalStateException("handler bug");
            lb.idA.onEvent(e -> {
                throw boom;
            });
            lb.idA.disconnect(); // delivers DISCONNECTED to idA's handler on this thread
            assertThat(seen).contains(boom);
            lb.devA.errorHandler(null);
            lb.idA.onEvent(null);
        }
    }
}
