package io.regmem.registration.rw;

import static io.regmem.registration.rw.RwFixture.PAGE;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;

/**
 * For random scatter lists, offsets, SGE limits and page-list lengths: the WRs a context builds
 * cover exactly {@code [offset, total)} of the list, in order, each within the limits, and a posted
 * WRITE followed by a READ back round-trips the bytes.
 */
@AddLifecycleHook(NoLeaks.class)
class RwPropertiesTest {
    private static final int SLOT = 4 * PAGE; // each entry lives in its own 16 KiB slot of local memory

    /** A generated case: entry shapes, offset, SGE limit, and (MR cases) the page-list length. */
    record Case(List<long[]> entries, long offset, int maxSge, int pageListLen, boolean mr) {
        long total() {
            return entries.stream().mapToLong(e -> e[1]).sum();
        }
    }

    @Provide
    Arbitrary<Case> sgeCases() {
        Arbitrary<long[]> entry = Combinators.combine(Arbitraries.longs().between(0, PAGE - 1),
                Arbitraries.longs().between(1, 3L * PAGE)).as((start, len) -> new long[] {start, len});
        return Combinators.combine(entry.list().ofMinSize(1).ofMaxSize(40), Arbitraries.doubles().between(0, 0.999).ofScale(3),
                Arbitraries.integers().between(1, 8)).as((entries, frac, sge) -> {
                    long total = entries.stream().mapToLong(e -> e[1]).sum();
                    return new Case(entries, (long) (frac * total), sge, 0, false);
                });
    }

    @Provide
    Arbitrary<Case> mrCases() {
        // The MR path's shape: the first entry may start inside its page, interior entries are whole
        // pages, the last may end short; every entry lies in one page.
        return Combinators.combine(Arbitraries.integers().between(1, 40), Arbitraries.longs().between(0, PAGE - 1),
                Arbitraries.longs().between(1, PAGE), Arbitraries.doubles().between(0, 0.999).ofScale(3),
                Arbitraries.of(1, 2, 3, 8, 256)).as((n, firstStart, lastLen, frac, pages) -> {
                    List<long[]> entries = new ArrayList<>();
                    for (int i = 0; i < n; i++) {
                        long start = i == 0 ? firstStart : 0;
                        long len = PAGE - start;
                        if (i == n - 1) {
                            len = Math.min(len, lastLen);
                        }
                        entries.add(new long[] {start, len});
                    }
                    long total = entries.stream().mapToLong(e -> e[1]).sum();
                    return new Case(entries, (long) (frac * total), 4, pages, true);
                });
    }

    @Property(tries = 60)
    void multiSgeWrsCoverTheListAndRoundTrip(@ForAll("sgeCases") Case c) {
        run(c, Map.of());
    }

    @Property(tries = 60)
    void mrWrsCoverTheListAndRoundTrip(@ForAll("mrCases") Case c) {
        run(c, Map.of(RdmaDevice.RW_FORCE_MR, "true", "maxFastRegPageListLen", Integer.toString(c.pageListLen())));
    }

    private static void run(Case c, Map<String, String> options) {
        try (RwFixture f = new RwFixture(options, c.maxSge(), 40)) {
            ScatterList sg = new ScatterList();
            for (int i = 0; i < c.entries().size(); i++) {
                long[] e = c.entries().get(i);
                sg.add(f.local.address() + (long) i * SLOT + e[0], e[1]);
            }
            int n = sg.count();
            long bytes = c.total() - c.offset();
            f.fillLocal(sg, 5);
            byte[] original = listBytes(f, sg, c.offset());
            RwContext ctx = new RwContext();

            int wrs = ctx.init(f.qp, 1, sg, n, c.offset(), f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            assertThat(wrs).isEqualTo(ctx.wrCount());
            checkCoverage(f, ctx, sg, c, bytes);
            f.postAndDestroy(ctx, sg, DmaDirection.TO_DEVICE);
            for (int b = 0; b < bytes; b++) {
                assertThat(f.remote.get(ValueLayout.JAVA_BYTE, b)).as("remote byte %d", b).isEqualTo(original[b]);
            }

            for (int i = 0; i < n; i++) { // wipe the list, then READ it back from the peer
                f.local.asSlice(sg.address(i) - f.local.address(), sg.length(i)).fill((byte) 0);
            }
            ctx.init(f.qp, 1, sg, n, c.offset(), f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE);
            f.postAndDestroy(ctx, sg, DmaDirection.FROM_DEVICE);
            assertThat(listBytes(f, sg, c.offset())).isEqualTo(original);
        }
    }

    /** The WRs, read in order, name exactly the list's bytes from the offset on, within the limits. */
    private static void checkCoverage(RwFixture f, RwContext ctx, ScatterList sg, Case c, long bytes) {
        List<long[]> expected = pieces(sg, c.offset());
        List<long[]> actual = new ArrayList<>();
        long remote = f.remoteAddr();
        for (int i = 0; i < ctx.wrCount(); i++) {
            WorkRequest wr = ctx.wr(i);
            if (wr.opcode() == Opcode.REG_MR || wr.opcode() == Opcode.LOCAL_INV) {
                continue;
            }
            assertThat(wr.remoteAddress()).as("WR %d continues where the previous ended", i).isEqualTo(remote);
            remote += wr.totalLength();
            if (ctx.variant() == RwContext.Variant.MR) {
                MemoryRegion mr = wr.regMr() != null ? wr.regMr() : ctx.wr(i - 1).regMr();
                assertThat(mr.pageCount()).isLessThanOrEqualTo(c.pageListLen());
                long left = mr.length();
                for (int p = 0; p < mr.pageCount() && left > 0; p++) {
                    // the MR's bytes are its pages' bytes in order, the first from the iova on
                    long from = p == 0 ? mr.address() : mr.page(p);
                    long len = Math.min(mr.page(p) + PAGE - from, left);
                    actual.add(new long[] {from, len});
                    left -= len;
                }
                assertThat(left).as("the MR's pages hold its length").isZero();
            } else {
                assertThat(wr.numSge()).isLessThanOrEqualTo(c.maxSge());
                for (int s = 0; s < wr.numSge(); s++) {
                    assertThat(wr.sgeLkey(s)).isEqualTo(f.pdA.localDmaLkey());
                    actual.add(new long[] {wr.sgeAddress(s), wr.sgeLength(s)});
                }
            }
        }
        assertThat(remote - f.remoteAddr()).isEqualTo(bytes);
        assertThat(merge(actual)).as("covered ranges").containsExactlyElementsOf(merge(expected));
    }

    private static List<long[]> pieces(ScatterList sg, long offset) {
        List<long[]> out = new ArrayList<>();
        long skip = offset;
        for (int i = 0; i < sg.count(); i++) {
            if (skip >= sg.length(i)) {
                skip -= sg.length(i);
                continue;
            }
            out.add(new long[] {sg.address(i) + skip, sg.length(i) - skip});
            skip = 0;
        }
        return out;
    }

    /** Joins adjacent ranges, so that different cuts of the same bytes compare equal; as strings for AssertJ. */
    private static List<String> merge(List<long[]> ranges) {
        List<long[]> out = new ArrayList<>();
        for (long[] r : ranges) {
            long[] last = out.isEmpty() ? null : out.get(out.size() - 1);
            if (last != null && last[0] + last[1] == r[0]) {
                last[1] += r[1];
            } else {
                out.add(new long[] {r[0], r[1]});
            }
        }
        return out.stream().map(r -> Long.toHexString(r[0]) + "+" + r[1]).toList();
    }

    private static byte[] listBytes(RwFixture f, ScatterList sg, long offset) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        for (long[] p : pieces(sg, offset)) {
            MemorySegment s = f.local.asSlice(p[0] - f.local.address(), p[1]);
            out.writeBytes(s.toArray(ValueLayout.JAVA_BYTE));
        }
        return out.toByteArray();
    }
}
