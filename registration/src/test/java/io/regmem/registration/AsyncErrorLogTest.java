package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.LogCapture;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A CQ that overran and a QP that failed are never silent: with no error handler set, each is logged
 * once (WARNING) when its asynchronous event is raised; with a handler, the handler gets them and the
 * log says nothing. A provider's fault in a QP's progress ({@code QpContext.fatal}) raises QP_FATAL
 * once.
 */
@Tag("soft-only") // (the other providers' completions come on their own time; the logging is the verbs layer's)
@ExtendWith(NoLeaks.class)
class AsyncErrorLogTest {
    private LogCapture log;
    private Loopback lb;

    @BeforeEach
    void open() {
        log = new LogCapture(RdmaDevice.class.getName());
        QpInitAttributes attrs = new QpInitAttributes().maxSendWr(16).maxRecvWr(8).signalAll(true);
        lb = new Loopback("soft", Map.of(), 4, attrs, new QpInitAttributes().maxSendWr(16).maxRecvWr(8).signalAll(true));
    }

    @AfterEach
    void close() {
        lb.close();
        log.close();
    }

    private void overrun() {
        MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
        MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        int rkey = lb.key(remote);
        WorkRequest wr = new WorkRequest(1);
        for (int i = 0; i < 16; i++) {
            lb.qpA.postSend(wr.reset().wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address(), rkey));
        }
        for (int i = 0; i < 8; i++) {
            lb.poll(lb.cqA);
        }
    }

    private List<String> warnings() {
        return log.messages(Level.WARNING);
    }

    @Test
    void withNoHandlerAnOverrunAndTheQpItBrokeAreEachLoggedOnce() {
        overrun();
        List<String> w = warnings();
        assertThat(w).filteredOn(m -> m.contains("CQ_ERR")).hasSize(1).first().asString()
                .contains("overran", "depth 4", "poll faster or make it deeper");
        assertThat(w).filteredOn(m -> m.contains("QP_FATAL")).hasSize(1).first().asString().contains(lb.qpA.toString());
        overrun(); // the same CQ and QP again: nothing new
        assertThat(warnings()).hasSize(w.size());
    }

    @Test
    void withAHandlerTheHandlerGetsThemAndTheLogStaysQuiet() {
        List<Throwable> got = new ArrayList<>();
        lb.devA.errorHandler(got::add);
        overrun();
        assertThat(got).hasSize(2);
        assertThat(warnings()).isEmpty();
    }

    @Test
    void aProvidersFaultRaisesQpFatalOnceAndErrsTheQp() {
        lb.qpA.context.fatal("its progress failed: injected");
        assertThat(lb.qpA.state()).isEqualTo(QueuePair.State.ERROR);
        lb.qpA.context.fatal("its progress failed: again");
        AsyncEvent e = lb.devA.pollAsyncEvent();
        assertThat(e.type()).isEqualTo(AsyncEvent.Type.QP_FATAL);
        assertThat(e.resource()).isSameAs(lb.qpA);
        assertThat(e.description()).contains("its progress failed: injected");
        assertThat(lb.devA.pollAsyncEvent()).as("once").isNull();
        assertThat(warnings()).filteredOn(m -> m.contains("QP_FATAL")).hasSize(1);
        lb.poll(lb.cqA); // (the flush, if anything was queued)
    }
}
