package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link CompletionAgent}: a CQ's polling under Agrona's duty cycle. Driven by an {@code AgentInvoker}
 * in the test's own loop and by an {@code AgentRunner} on a thread of its own, it hands every
 * completion to the handler once, in order, and its work count is what it handled; a handler that
 * throws reaches the runner's error handler; an idle {@code doWork()} allocates nothing.
 */
@ExtendWith(NoLeaks.class)
class CompletionAgentTest {
    private final Loopback lb = new Loopback(Map.of(), new Loopback.QpInitAttributesSpec(64, 64, 4, true, 256));
    private final MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
    private final MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);

    @AfterEach
    void tearDown() {
        lb.close();
    }

    private void postWrites(int from, int count) {
        for (int i = from; i < from + count; i++) {
            lb.qpA.postSend(new WorkRequest(1).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address() + 8L * i, 8, local.lkey()).remote(lb.memB.address() + 8L * i, lb.key(remote)));
        }
    }

    @Test
    void anInvokerInTheCallersLoopHandsEveryCompletionOnceInOrder() {
        List<Long> seen = new ArrayList<>();
        CompletionAgent agent = new CompletionAgent(lb.cqA, 4, wc -> {
            assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
            seen.add(wc.wrId());
        });
        AgentInvoker invoker = new AgentInvoker(Throwable::printStackTrace, null, agent);
        invoker.start();
        postWrites(0, 10);
        long deadline = System.nanoTime() + 10_000_000_000L;
        int work = 0;
        while (seen.size() < 10) {
            work += invoker.invoke();
            assertThat(System.nanoTime()).as("10 completions within 10 s").isLessThan(deadline);
        }
        assertThat(seen).containsExactly(0L, 1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L);
        assertThat(work).as("the work count is what was handled").isEqualTo(10);
        assertThat(invoker.invoke()).isZero();
        invoker.close();
        assertThat(agent.roleName()).startsWith("regmem-cq:");
    }

    @Test
    void aRunnerOnItsOwnThreadHandlesThemAndAThrowingHandlerReachesTheErrorHandler() throws Exception {
        AtomicInteger handled = new AtomicInteger();
        AtomicInteger errors = new AtomicInteger();
        CompletionAgent agent = new CompletionAgent(lb.cqA, 8, wc -> {
            if (handled.incrementAndGet() == 3) {
                throw new IllegalStateException("the third one");
            }
        });
        AgentRunner runner = new AgentRunner(new BusySpinIdleStrategy(), e -> errors.incrementAndGet(), null, agent);
        Thread t = AgentRunner.startOnThread(runner);
        try {
            postWrites(0, 1);
            postWrites(1, 1);
            postWrites(2, 1);
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (errors.get() == 0) {
                assertThat(System.nanoTime()).as("the handler's failure reported within 10 s").isLessThan(deadline);
                Thread.onSpinWait();
            }
        } finally {
            runner.close();
            t.join(10_000);
        }
        assertThat(errors.get()).isEqualTo(1);
        assertThat(handled.get()).isGreaterThanOrEqualTo(3);
    }

    @Test
    void badArgumentsAreRefused() {
        assertThatThrownBy(() -> new CompletionAgent(lb.cqA, 0, wc -> { })).isInstanceOf(RdmaException.class)
                .matches(e -> ((RdmaException) e).errno() == Errno.EINVAL);
        assertThatThrownBy(() -> new CompletionAgent(null, 4, wc -> { })).isInstanceOf(RdmaException.class);
        assertThatThrownBy(() -> new CompletionAgent(lb.cqA, 4, null)).isInstanceOf(RdmaException.class);
    }

    @Test
    void anIdleDoWorkAllocatesNothing() {
        CompletionAgent agent = new CompletionAgent(lb.cqA, 16, wc -> { });
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        for (int i = 0; i < 20_000; i++) {
            agent.doWork();
        }
        long least = Long.MAX_VALUE;
        for (int batch = 0; batch < 30 && least >= 1000; batch++) { // (until one batch is clean: see RwEdgeCasesTest)
            long before = mx.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < 1000; i++) {
                agent.doWork();
            }
            least = Math.min(least, mx.getCurrentThreadAllocatedBytes() - before);
        }
        assertThat(least).as("bytes allocated by 1000 idle doWork calls").isLessThan(1000);
    }
}
