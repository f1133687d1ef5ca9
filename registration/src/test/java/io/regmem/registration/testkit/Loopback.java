package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.CmId;
import io.regmem.registration.CompletionChannel;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;

/**
 * Two connected QPs on two soft devices of this JVM (A the requester, B the responder), with a PD,
 * a CQ and 1 MiB of memory each. {@link #close()} tears everything down in the mandatory order and
 * asserts that neither device has a survivor.
 */
public final class Loopback implements AutoCloseable {
    /** The provider the contract tests run against ({@link Providers#NAME}). */
    public static final String PROVIDER = Providers.NAME;
    private static int names;

    public final Arena arena = Arena.ofShared();
    public final RdmaDevice devA;
    public final RdmaDevice devB;
    public final ProtectionDomain pdA;
    public final ProtectionDomain pdB;
    public final CompletionQueue cqA;
    public final CompletionQueue cqB;
    /** The completion channels of {@link #cqA} and {@link #cqB} ({@link #withChannels}), or null. */
    public final CompletionChannel chA;
    public final CompletionChannel chB;
    public final CmId listener;
    public final CmId idA;
    public final CmId idB;
    public final QueuePair qpA;
    public final QueuePair qpB;
    public final MemorySegment memA = arena.allocate(1 << 20, 4096);
    public final MemorySegment memB = arena.allocate(1 << 20, 4096);
    public final WorkCompletion[] wcs = new WorkCompletion[64];

    public Loopback() {
        this(Map.of(), QpInitAttributesSpec.DEFAULT);
    }

    /** How the two QPs are made. */
    public record QpInitAttributesSpec(int maxSendWr, int maxRecvWr, int maxSge, boolean signalAll, int cqDepth) {
        public static final QpInitAttributesSpec DEFAULT = new QpInitAttributesSpec(64, 64, 4, true, 256);
    }

    public Loopback(Map<String, String> options, QpInitAttributesSpec spec) {
        this(options, spec.cqDepth(), attrs(spec), attrs(spec));
    }

    /**
     * Two connected QPs made with the given attributes (their CQs are filled in), on devices opened
     * with {@code options}, for tests in other packages (rw, rpc) that need their own QP settings.
     */
    public Loopback(Map<String, String> options, int cqDepth, QpInitAttributes attrsA, QpInitAttributes attrsB) {
        this(Providers.NAME, options, cqDepth, attrsA, attrsB);
    }

    /** As above, on the named provider's devices (a provider's own tests, whatever {@code -Dregmem.provider} says). */
    public Loopback(String provider, Map<String, String> options, int cqDepth, QpInitAttributes attrsA, QpInitAttributes attrsB) {
        this(provider, options, cqDepth, attrsA, attrsB, false);
    }

    /** A loopback pair whose CQs are created on completion channels ({@link #chA}, {@link #chB}). */
    public static Loopback withChannels(Map<String, String> options) {
        return withChannels(Providers.NAME, options);
    }

    /** As {@link #withChannels(Map)}, on the named provider's devices. */
    public static Loopback withChannels(String provider, Map<String, String> options) {
        return new Loopback(provider, options, 256, new QpInitAttributes().maxSendSge(4).maxRecvSge(4),
                new QpInitAttributes().maxSendSge(4).maxRecvSge(4), true);
    }

    private Loopback(String provider, Map<String, String> options, int cqDepth, QpInitAttributes attrsA, QpInitAttributes attrsB,
            boolean channels) {
        devA = Providers.open(provider, options);
        RdmaDevice b;
        try {
            b = Providers.open(provider, options);
        } catch (RuntimeException | Error e) {
            devA.close();
            throw e;
        }
        devB = b;
        pdA = devA.allocPd();
        pdB = devB.allocPd();
        chA = channels ? devA.createCompletionChannel() : null;
        chB = channels ? devB.createCompletionChannel() : null;
        cqA = devA.createCq(cqDepth, chA);
        cqB = devB.createCq(cqDepth, chB);
        listener = devB.createCmId();
        String name = Providers.address(provider, "loopback-" + (++names));
        listener.listen(name);
        idA = devA.createCmId();
        qpA = idA.createQp(pdA, attrsA.sendCq(cqA).recvCq(cqA));
        idA.connect(name);
        idB = listener.getRequest();
        assertThat(idB).isNotNull();
        qpB = idB.createQp(pdB, attrsB.sendCq(cqB).recvCq(cqB));
        idB.accept();
        assertThat(qpA.state()).isEqualTo(QueuePair.State.RTS);
        assertThat(qpB.state()).isEqualTo(QueuePair.State.RTS);
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
    }

    private static QpInitAttributes attrs(QpInitAttributesSpec spec) {
        return new QpInitAttributes().maxSendWr(spec.maxSendWr()).maxRecvWr(spec.maxRecvWr())
                .maxSendSge(spec.maxSge()).maxRecvSge(spec.maxSge()).signalAll(spec.signalAll());
    }

    /** {@code mr}'s remote key imported on A's QP: what A puts into its work requests to reach B's region. */
    public int key(MemoryRegion mr) {
        return Providers.key(qpA, mr);
    }

    /** {@code mr}'s remote key imported on B's QP. */
    public int keyAtB(MemoryRegion mr) {
        return Providers.key(qpB, mr);
    }

    /** Polls a CQ until it yields at least {@code n} completions in total (they all are synchronous here). */
    public int poll(CompletionQueue cq) {
        return cq.poll(wcs);
    }

    /** Polls exactly one completion from {@code cq} and returns it. */
    public WorkCompletion one(CompletionQueue cq) {
        int n = cq.poll(wcs);
        assertThat(n).as("completions on %s", cq).isEqualTo(1);
        return wcs[0];
    }

    /** Tears down in the mandatory order, closing leftover MRs and DMA mappings, and asserts nothing survives. */
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
        if (chA != null) {
            chA.close();
            chB.close();
        }
        pdA.close();
        pdB.close();
        assertThat(devA.resources().survivors()).as(devA.resources().report()).isEmpty();
        assertThat(devB.resources().survivors()).as(devB.resources().report()).isEmpty();
        devA.close();
        devB.close();
        arena.close();
    }
}
