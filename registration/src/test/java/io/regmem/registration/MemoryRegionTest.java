package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.PooledBuffer;
import io.regmem.core.ScatterList;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Registration rules, keys and their generations, and ib_map_mr_sg's prefix rules. */
@ExtendWith(NoLeaks.class)
class MemoryRegionTest {
    private static final long PAGE = 4096;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment memory = arena.allocate(1 << 20, PAGE);
    private final RdmaDevice device = Providers.open();
    private final ProtectionDomain pd = device.allocPd();

    @AfterEach
    void nothingLeaked() {
        pd.close();
        assertThat(device.resources().survivors()).as(device.resources().report()).isEmpty();
        device.close();
        arena.close();
    }

    @Test
    void registrationCoversTheRangeWithTheRightsAsked() {
        MemoryRegion mr = pd.register(memory, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        assertThat(mr.address()).isEqualTo(memory.address());
        assertThat(mr.length()).isEqualTo(memory.byteSize());
        assertThat(mr.access()).isEqualTo(1 | 2 | 4);
        assertThat(Access.describe(mr.access())).isEqualTo("LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ");
        assertThat(mr.isValid()).isTrue();
        assertThat(mr.isFastReg()).isFalse();
        assertThat(mr.owner()).isEqualTo(pd.owner());
        assertThat(device.keys.lookup(mr.rkey(), true)).isSameAs(mr);
        assertThat(device.keys.lookup(mr.lkey(), false)).isSameAs(mr);
        mr.close();
        assertThat(device.keys.lookup(mr.rkey(), true)).as("a deregistered key fails at once").isNull();
        assertRdma(mr::close, Errno.EBADF);
    }

    @Test
    void badRegistrationsAreEinvalAndChangeNothing() {
        assertRdma(() -> pd.register(memory, Access.REMOTE_WRITE), Errno.EINVAL, "need LOCAL_WRITE");
        assertRdma(() -> pd.register(memory, Access.REMOTE_ATOMIC, Access.REMOTE_READ), Errno.EINVAL, "need LOCAL_WRITE");
        assertRdma(() -> pd.register(memory, Access.LOCAL_WRITE, Access.ON_DEMAND), Errno.EOPNOTSUPP, "ON_DEMAND");
        assertRdma(() -> pd.register(MemorySegment.ofArray(new byte[64]), Access.LOCAL_WRITE), Errno.EINVAL, "native");
        assertRdma(() -> pd.register(memory.asSlice(0, 0), Access.LOCAL_WRITE), Errno.EINVAL, "non-empty");
        assertRdma(() -> pd.register(memory, 1 << 9), Errno.EINVAL, "unknown access bits");
        assertRdma(() -> pd.allocMr(0), Errno.EINVAL, "allocMr(0)");
        assertRdma(() -> pd.allocMr(513), Errno.EINVAL, "maxFastRegPageListLen=512");
        assertThat(pd.useCount()).isZero();
        assertThat(device.resources().count()).isEqualTo(1); // just the PD
        try (RdmaDevice tiny = Providers.open(java.util.Map.of("maxMrSize", "4096"))) {
            ProtectionDomain p = tiny.allocPd();
            assertRdma(() -> p.register(memory.asSlice(0, 8192), Access.LOCAL_WRITE), Errno.EINVAL, "maxMrSize 4096");
            p.close();
        }
    }

    @Test
    void pooledBuffersRegisterTheirCapacity() {
        try (BufferPool pool = BufferPool.builder().build()) {
            PooledBuffer b = pool.allocate(1000);
            MemoryRegion mr = pd.register(b, Access.LOCAL_WRITE);
            assertThat(mr.address()).isEqualTo(b.address());
            assertThat(mr.length()).isEqualTo(b.capacity());
            mr.close();
            b.close();
        }
    }

    @Test
    void keysAreDistinctAndNotReusedSoon() {
        Set<Integer> keys = new HashSet<>();
        for (int i = 0; i < 5000; i++) {
            MemoryRegion mr = pd.register(memory, Access.LOCAL_WRITE);
            assertThat(keys.add(mr.rkey())).as("key %08x came back after %d registrations", mr.rkey(), i).isTrue();
            mr.close();
        }
        assertThat(device.keys.lookup(device.keys.dmaKey(), true)).as("the DMA key is never a region's").isNull();
        assertThat(pd.localDmaLkey()).isEqualTo(device.keys.dmaKey());
    }

    @Test
    void consecutiveKeysLookUnrelated() {
        List<MemoryRegion> regions = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            regions.add(pd.register(memory, Access.LOCAL_WRITE));
        }
        int close = 0;
        for (int i = 1; i < regions.size(); i++) {
            int a = regions.get(i - 1).rkey() >>> 8;
            int b = regions.get(i).rkey() >>> 8;
            if (Math.abs(a - b) < 4096 || Integer.bitCount(a ^ b) < 3) {
                close++;
            }
        }
        // Sequential or merely salted indices would make nearly every pair close.
        assertThat(close).as("consecutive keys close in value or bits").isLessThan(20);
        for (MemoryRegion mr : regions) {
            assertThat(device.keys.lookup(mr.rkey(), true)).isSameAs(mr);
            assertThat(device.keys.slotOf(mr.rkey())).isBetween(1, 1 << 24);
            mr.close();
        }
    }

    @Test
    void keysDoNotRevealCreationOrder() {
        MemoryRegion a = pd.register(memory, Access.LOCAL_WRITE);
        try (RdmaDevice other = Providers.open()) {
            ProtectionDomain p2 = other.allocPd();
            MemoryRegion b = p2.register(memory, Access.LOCAL_WRITE);
            // Two devices' first regions share a slot number but not, except by a 1-in-2^24 chance, a key.
            assertThat(b.rkey()).isNotEqualTo(a.rkey());
            b.close();
            p2.close();
        }
        a.close();
    }

    @Test
    void fastRegKeyGenerationsRetireOldKeys() {
        MemoryRegion mr = pd.allocMr(8);
        assertThat(mr.isFastReg()).isTrue();
        assertThat(mr.isValid()).as("nothing mapped before REG_MR").isFalse();
        int first = mr.rkey();
        mr.activate(Access.mask(Access.LOCAL_WRITE, Access.REMOTE_READ));
        assertThat(device.keys.lookup(first, true)).isSameAs(mr);

        int next = MemoryRegion.incRkey(first);
        assertThat(next >>> 8).isEqualTo(first >>> 8);
        assertThat(next & 0xFF).isEqualTo(((first & 0xFF) + 1) & 0xFF);
        mr.updateFastRegKey(next & 0xFF);
        assertThat(mr.rkey()).isEqualTo(next).isEqualTo(mr.lkey());
        assertThat(device.keys.lookup(first, true)).as("the old generation stops working").isNull();
        assertThat(device.keys.lookup(next, true)).isSameAs(mr);

        mr.invalidate();
        assertThat(device.keys.lookup(next, true)).as("LOCAL_INV retires it").isNull();
        assertRdma(() -> mr.updateFastRegKey(256), Errno.EINVAL, "[0, 255]");
        MemoryRegion plain = pd.register(memory, Access.LOCAL_WRITE);
        assertRdma(() -> plain.updateFastRegKey(1), Errno.EINVAL, "fast-reg");
        plain.close();
        mr.close();
    }

    @Test
    void incRkeyWrapsTheLowByteOnly() {
        assertThat(MemoryRegion.incRkey(0x123456FF)).isEqualTo(0x12345600);
        assertThat(MemoryRegion.incRkey(0xFFFFFF7F)).isEqualTo(0xFFFFFF80);
        int k = 0xABCDEF00;
        for (int i = 0; i < 256; i++) {
            k = MemoryRegion.incRkey(k);
        }
        assertThat(k).as("only 256 generations exist").isEqualTo(0xABCDEF00);
    }

    // ---- ib_map_mr_sg --------------------------------------------------------------------------

    private long page(int i) {
        return memory.address() + i * PAGE;
    }

    @Test
    void mapsAlignedPagesAndAShortLastElement() {
        MemoryRegion mr = pd.allocMr(8);
        ScatterList sg = new ScatterList().add(page(0), PAGE).add(page(1), PAGE).add(page(2), PAGE).add(page(3), 100);
        assertThat(mr.mapSg(sg, 4, 0, PAGE)).isEqualTo(4);
        assertThat(mr.address()).isEqualTo(page(0));
        assertThat(mr.length()).isEqualTo(3 * PAGE + 100);
        assertThat(mr.pageCount()).isEqualTo(4);
        assertThat(mr.page(3)).isEqualTo(page(3));
        assertThat(mr.resumeOffset()).isZero();
        mr.close();
    }

    @Test
    void onlyTheFirstElementMayStartAtAnOffset() {
        MemoryRegion mr = pd.allocMr(8);
        ScatterList sg = new ScatterList().add(page(0), PAGE).add(page(1), PAGE);
        assertThat(mr.mapSg(sg, 2, 904, PAGE)).isEqualTo(2);
        assertThat(mr.address()).isEqualTo(page(0) + 904);
        assertThat(mr.length()).isEqualTo(2 * PAGE - 904);
        assertThat(mr.page(0)).isEqualTo(page(0));

        // an interior element that starts off a page boundary, not contiguous: a gap stops mapping
        ScatterList gap = new ScatterList().add(page(0), PAGE).add(page(2) + 512, 1024).add(page(4), PAGE);
        assertThat(mr.mapSg(gap, 3, 0, PAGE)).isEqualTo(1);
        assertThat(mr.length()).isEqualTo(PAGE);

        // a predecessor that ends off a boundary: the next must continue it exactly
        ScatterList shortThenNext = new ScatterList().add(page(0), 1000).add(page(1), PAGE);
        assertThat(mr.mapSg(shortThenNext, 2, 0, PAGE)).isEqualTo(1);
        mr.close();
    }

    @Test
    void contiguousUnalignedElementsMerge() {
        MemoryRegion mr = pd.allocMr(8);
        // element 1 continues element 0 mid-page; element 2 starts at page(1) + 1904, right after element 1
        ScatterList sg = new ScatterList().add(page(0), 1000).add(page(0) + 1000, 5000).add(page(0) + 6000, 2192);
        assertThat(mr.mapSg(sg, 3, 0, PAGE)).isEqualTo(3);
        assertThat(mr.length()).isEqualTo(8192);
        assertThat(mr.pageCount()).as("pages 0 and 1, each once").isEqualTo(2);
        assertThat(mr.page(1)).isEqualTo(page(1));
        mr.close();
    }

    @Test
    void stopsWhenThePageListIsFullAndSaysWhereToResume() {
        MemoryRegion mr = pd.allocMr(2);
        ScatterList sg = new ScatterList().add(page(0), PAGE).add(page(1), PAGE).add(page(2), PAGE);
        assertThat(mr.mapSg(sg, 3, 0, PAGE)).isEqualTo(2);
        assertThat(mr.length()).isEqualTo(2 * PAGE);
        assertThat(mr.resumeOffset()).isZero();

        ScatterList big = new ScatterList().add(page(0), 3 * PAGE);
        assertThat(mr.mapSg(big, 1, 0, PAGE)).isZero();
        assertThat(mr.length()).isEqualTo(2 * PAGE);
        assertThat(mr.resumeOffset()).as("the first byte not covered").isEqualTo(2 * PAGE);

        ScatterList offsetBig = new ScatterList().add(page(0), 3 * PAGE);
        assertThat(mr.mapSg(offsetBig, 1, 100, PAGE)).isZero();
        assertThat(mr.address()).isEqualTo(page(0) + 100);
        assertThat(mr.length()).isEqualTo(2 * PAGE - 100);
        assertThat(mr.resumeOffset()).isEqualTo(2 * PAGE);
        mr.close();
    }

    @Test
    void mapSgRejectsBadArguments() {
        MemoryRegion mr = pd.allocMr(4);
        ScatterList sg = new ScatterList().add(page(0), PAGE);
        assertRdma(() -> mr.mapSg(sg, 0, 0, PAGE), Errno.EINVAL, "count 0");
        assertRdma(() -> mr.mapSg(sg, 2, 0, PAGE), Errno.EINVAL, "count 2 of 1");
        assertRdma(() -> mr.mapSg(sg, 1, PAGE + 1, PAGE), Errno.EINVAL, "offset 4097");
        assertRdma(() -> mr.mapSg(sg, 1, 0, 3000), Errno.EINVAL, "page size 3000");
        assertRdma(() -> mr.page(0), Errno.EINVAL, "page 0");
        MemoryRegion plain = pd.register(memory, Access.LOCAL_WRITE);
        assertRdma(() -> plain.mapSg(sg, 1, 0, PAGE), Errno.EINVAL, "fast-reg");
        plain.close();
        mr.close();
    }
}
