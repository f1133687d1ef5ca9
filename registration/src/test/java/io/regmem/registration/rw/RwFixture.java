package io.regmem.registration.rw;

import io.regmem.registration.testkit.Providers;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.ScatterList;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.testkit.Loopback;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;

/**
 * Two connected soft QPs for rw tests, on a {@link Loopback}. A is the initiator: its 4 MiB of local memory is DMA-mapped
 * (so rw contexts may use it). B is the target: its 4 MiB are registered for remote read and write
 * ({@link #rkey}, {@link #remote}). Both devices are opened with the example's options; A's QP with
 * the given send SGE limit and rw context count. {@link #close()} tears down in the mandatory order
 * and asserts that nothing survives.
 */
final class RwFixture implements AutoCloseable {
    static final int PAGE = 4096;

    final Arena arena = Arena.ofShared();
    final Loopback loopback;
    final RdmaDevice devA;
    final RdmaDevice devB;
    final ProtectionDomain pdA;
    final ProtectionDomain pdB;
    final CompletionQueue cqA;
    final CompletionQueue cqB;
    final CmId idA;
    final QueuePair qp;
    final QueuePair qpB;
    final MemorySegment local = arena.allocate(4L << 20, PAGE);
    final MemorySegment remote = arena.allocate(4L << 20, PAGE);
    final DmaMapping localMapping;
    final MemoryRegion remoteMr;
    final WorkCompletion[] wcs;

    RwFixture(Map<String, String> options, int maxSendSge, int maxRdmaCtxs) {
        this(options, maxSendSge, maxRdmaCtxs, false);
    }

    RwFixture(Map<String, String> options, int maxSendSge, int maxRdmaCtxs, boolean integrity) {
        if (integrity) {
            try (RdmaDevice probe = Providers.open(options)) {
                Assumptions.assumeTrue(probe.attributes().integrityHandover(),
                        () -> Providers.NAME + " has no signature offload (integrityHandover is false)");
            }
        }
        loopback = new Loopback(options, 1024, new QpInitAttributes().maxSendWr(64).maxSendSge(maxSendSge)
                .signalAll(false).maxRdmaCtxs(maxRdmaCtxs).integrity(integrity), new QpInitAttributes());
        devA = loopback.devA;
        devB = loopback.devB;
        pdA = loopback.pdA;
        pdB = loopback.pdB;
        cqA = loopback.cqA;
        cqB = loopback.cqB;
        idA = loopback.idA;
        qp = loopback.qpA;
        qpB = loopback.qpB;
        wcs = loopback.wcs;
        localMapping = devA.dmaMap(local);
        remoteMr = pdB.register(remote, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        remoteKey = Providers.key(qp, remoteMr); // exchanged once, as the registration persists
    }

    /** The remote region's key as the requester's QP uses it (exported by B, imported on A's QP). */
    int rkey() {
        return remoteKey;
    }

    private final int remoteKey;

    long remoteAddr() {
        return remote.address();
    }

    /**
     * A list of {@code n} entries of {@code len} bytes each, entry i at local page {@code 2 * i}
     * (page-aligned, with a one-page gap between entries so nothing is contiguous).
     */
    ScatterList pages(int n, long len) {
        ScatterList sg = new ScatterList(n, false, Integer.MAX_VALUE);
        for (int i = 0; i < n; i++) {
            sg.add(local.address() + 2L * i * PAGE, len);
        }
        return sg;
    }

    /** Fills every entry of {@code sg} with a pattern derived from {@code seed} and the byte's position in the list. */
    void fillLocal(ScatterList sg, int seed) {
        long pos = 0;
        for (int i = 0; i < sg.count(); i++) {
            MemorySegment s = local.asSlice(sg.address(i) - local.address(), sg.length(i));
            for (long b = 0; b < sg.length(i); b++, pos++) {
                s.set(ValueLayout.JAVA_BYTE, b, pattern(seed, pos));
            }
        }
    }

    static byte pattern(int seed, long pos) {
        return (byte) (seed * 31 + pos * 7 + (pos >>> 8));
    }

    /** Polls A's CQ until the one expected completion arrives; asserts its id and success. */
    void expectCompletion(long wrId) {
        // Asynchronous providers (ucx) deliver later; a chain's one completion arrives within 10 s.
        int n = 0;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (n == 0 && System.nanoTime() < deadline) {
            n = cqA.poll(wcs);
        }
        assertThat(n).as("one completion for the whole chain").isEqualTo(1);
        assertThat(cqA.poll(wcs)).as("nothing after the chain's one completion").isZero();
        assertThat(wcs[0].status()).as(wcs[0].toString()).isEqualTo(WcStatus.SUCCESS);
        assertThat(wcs[0].wrId()).isEqualTo(wrId);
    }

    /** Asserts B's memory at [remoteOffset, +len) holds the list's bytes from list position {@code from}. */
    void assertRemoteHolds(int seed, long from, long remoteOffset, long len) {
        for (long b = 0; b < len; b++) {
            byte expected = pattern(seed, from + b);
            byte actual = remote.get(ValueLayout.JAVA_BYTE, remoteOffset + b);
            if (expected != actual) {
                throw new AssertionError("remote byte " + (remoteOffset + b) + ": expected " + expected + ", got " + actual);
            }
        }
    }

    /** Writes the pattern into B's memory at [remoteOffset, +len) for READ tests. */
    void fillRemote(int seed, long remoteOffset, long len) {
        for (long b = 0; b < len; b++) {
            remote.set(ValueLayout.JAVA_BYTE, remoteOffset + b, pattern(seed, b));
        }
    }

    /** Reads back the list's bytes from position {@code from} on and compares with the remote pattern. */
    void assertLocalHolds(ScatterList sg, long offset, int seed) {
        long pos = 0;
        long want = 0;
        for (int i = 0; i < sg.count(); i++) {
            for (long b = 0; b < sg.length(i); b++, pos++) {
                if (pos < offset) {
                    continue;
                }
                byte actual = local.get(ValueLayout.JAVA_BYTE, sg.address(i) - local.address() + b);
                byte expected = pattern(seed, want++);
                if (actual != expected) {
                    throw new AssertionError("local list byte " + pos + ": expected " + expected + ", got " + actual);
                }
            }
        }
    }

    /** Posts {@code ctx} with wrId 77, waits for its one completion, and destroys it. */
    void postAndDestroy(RwContext ctx, ScatterList sg, DmaDirection dir) {
        ctx.post(qp, 1, 77);
        expectCompletion(77);
        ctx.destroy(qp, 1, sg, sg.count(), dir);
    }

    @Override
    public void close() {
        assertThat(qp.rdmaMrs().used()).as("pool MRs still held by contexts").isZero();
        localMapping.close();
        remoteMr.close();
        // Nothing else may be left: the loopback would close leftover MRs and mappings quietly.
        for (RdmaDevice d : new RdmaDevice[] {devA, devB}) {
            assertThat(d.resources().survivors(DmaMapping.class)).as(d.resources().report()).isEmpty();
        }
        assertThat(devA.resources().survivors(MemoryRegion.class)).as("only the QP's pool MRs")
                .hasSize(qp.rdmaMrs().size() + qp.sigMrs().size());
        assertThat(devB.resources().survivors(MemoryRegion.class)).isEmpty();
        loopback.close(); // destroys the QPs (and their pool MRs) and asserts that nothing survives
        arena.close();
    }
}
