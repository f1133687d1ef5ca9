package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;

/**
 * Two connected QPs on two soft devices of this JVM (A the requester, B the responder), with a PD,
 * a CQ and 1 MiB of memory each. {@link #close()} tears everything down in the mandatory order and
 * asserts that neither device has a survivor.
 */
final class Loopback implements AutoCloseable {
    /**
     * The provider the contract tests run against: {@code -Dregmem.provider=NAME} (default soft).
     * Every provider must pass the same loopback, security and error-path suites.
     */
    static final String PROVIDER = System.getProperty("regmem.provider", "soft");
    private static int names;

    final Arena arena = Arena.ofShared();
    final RdmaDevice devA;
    final RdmaDevice devB;
    final ProtectionDomain pdA;
    final ProtectionDomain pdB;
    final CompletionQueue cqA;
    final CompletionQueue cqB;
    final CmId listener;
    final CmId idA;
    final CmId idB;
    final QueuePair qpA;
    final QueuePair qpB;
    final MemorySegment memA = arena.allocate(1 << 20, 4096);
    final MemorySegment memB = arena.allocate(1 << 20, 4096);
    final WorkCompletion[] wcs = new WorkCompletion[64];

    Loopback() {
        this(Map.of(), QpInitAttributesSpec.DEFAULT);
    }

    /** How the two QPs are made. */
    record QpInitAttributesSpec(int maxSendWr, int maxRecvWr, int maxSge, boolean signalAll, int cqDepth) {
        static final QpInitAttributesSpec DEFAULT = new QpInitAttributesSpec(64, 64, 4, true, 256);
    }

    Loopback(Map<String, String> options, QpInitAttributesSpec spec) {
        devA = RdmaDevice.open(PROVIDER, options);
        devB = RdmaDevice.open(PROVIDER, options);
        pdA = devA.allocPd();
        pdB = devB.allocPd();
        cqA = devA.createCq(spec.cqDepth());
        cqB = devB.createCq(spec.cqDepth());
        listener = devB.createCmId();
        String name = "loopback-" + (++names);
        listener.listen(name);
        idA = devA.createCmId();
        qpA = idA.createQp(pdA, attrs(cqA, spec));
        idA.connect(name);
        idB = listener.getRequest();
        assertThat(idB).isNotNull();
        qpB = idB.createQp(pdB, attrs(cqB, spec));
        idB.accept();
        assertThat(qpA.state()).isEqualTo(QueuePair.State.RTS);
        assertThat(qpB.state()).isEqualTo(QueuePair.State.RTS);
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
    }

    private static QpInitAttributes attrs(CompletionQueue cq, QpInitAttributesSpec spec) {
        return QpInitAttributes.of(cq).maxSendWr(spec.maxSendWr()).maxRecvWr(spec.maxRecvWr())
                .maxSendSge(spec.maxSge()).maxRecvSge(spec.maxSge()).signalAll(spec.signalAll());
    }

    /** Polls a CQ until it yields at least {@code n} completions in total (they all are synchronous here). */
    int poll(CompletionQueue cq) {
        return cq.poll(wcs);
    }

    /** Polls exactly one completion from {@code cq} and returns it. */
    WorkCompletion one(CompletionQueue cq) {
        int n = cq.poll(wcs);
        assertThat(n).as("completions on %s", cq).isEqualTo(1);
        return wcs[0];
    }

    @Override
    public void close() {
        idA.disconnect();
        if (idA.qp() != null) {
            idA.destroyQp();
        }
        if (idB.qp() != null) {
            idB.destroyQp();
        }
        idA.close();
        idB.close();
        listener.close();
        for (RdmaDevice d : new RdmaDevice[] {devA, devB}) {
            for (MemoryRegion mr : d.resources().survivors(MemoryRegion.class)) {
                mr.close();
            }
            for (DmaMapping m : d.resources().survivors(DmaMapping.class)) {
                m.close();
            }
        }
        cqA.close();
        cqB.close();
        pdA.close();
        pdB.close();
        assertThat(devA.resources().survivors()).as(devA.resources().report()).isEmpty();
        assertThat(devB.resources().survivors()).as(devB.resources().report()).isEmpty();
        devA.close();
        devB.close();
        arena.close();
    }
}
