package io.regmem.registration.rpc;

import io.regmem.registration.testkit.Providers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Invariant 12: regbufs map lazily, NONE never maps, realloc keeps everything on failure and unmaps on success. */
@ExtendWith(NoLeaks.class)
class RegBufTest {
    private final RdmaDevice device = Providers.open();
    private final RdmaDevice other = Providers.open();
    private final ProtectionDomain pd = device.allocPd();
    private final ProtectionDomain otherPd = other.allocPd();
    private final BufferPool pool = BufferPool.builder().name("regbuf-test").maxBytes(8L << 20).build();

    @AfterEach
    void nothingLeaked() {
        pd.close();
        otherPd.close();
        assertThat(device.resources().survivors()).as(device.resources().report()).isEmpty();
        device.close();
        other.close();
        assertThat(pool.closeAndReport().clean()).isTrue();
    }

    @Test
    void mapsLazilyOnceAndMappedMeansADevice() {
        RegBuf rb = RegBuf.alloc(pool, 2048, DmaDirection.TO_DEVICE);
        assertThat(rb.isMapped()).isFalse();
        assertThat(rb.device()).isNull();
        assertThat(device.resources().survivors(DmaMapping.class)).as("alloc maps nothing").isEmpty();
        assertThat(rb.dmaMap(pd)).isTrue();
        assertThat(rb.isMapped()).isTrue();
        assertThat(rb.device()).isSameAs(device);
        assertThat(rb.lkey()).isEqualTo(pd.localDmaLkey());
        assertThat(device.isDmaMapped(rb.address(), 2048)).isTrue();
        assertThat(rb.dmaMap(pd)).as("already mapped").isTrue();
        assertThat(device.resources().survivors(DmaMapping.class)).hasSize(1);
        assertThatThrownBy(() -> rb.dmaMap(otherPd)).isInstanceOfSatisfying(RdmaException.class,
                e -> assertThat(e.errno()).isEqualTo(Errno.EINVAL));
        rb.unmap();
        assertThat(rb.isMapped()).isFalse();
        assertThat(rb.device()).isNull();
        rb.unmap();
        assertThat(rb.dmaMap(otherPd)).as("after unmap, another device may map it").isTrue();
        rb.free();
        rb.free();
        RegBuf.free(null);
        assertThat(other.resources().survivors(DmaMapping.class)).as("free unmaps").isEmpty();
        assertThatThrownBy(() -> rb.dmaMap(pd)).isInstanceOfSatisfying(RdmaException.class,
                e -> assertThat(e.errno()).isEqualTo(Errno.EBADF));
    }

    @Test
    void aNoneBufferNeverMapsAndAFailedMappingLeavesItUnmapped() {
        RegBuf none = RegBuf.alloc(pool, 512, DmaDirection.NONE);
        assertThat(none.dmaMap(pd)).isFalse();
        assertThat(none.isMapped()).isFalse();
        RegBuf rb = RegBuf.alloc(pool, 4096, DmaDirection.FROM_DEVICE);
        DmaMapping squatter = device.dmaMap(rb.segment()); // someone else mapped the same memory
        assertThat(rb.dmaMap(pd)).as("the device refuses an overlapping mapping").isFalse();
        assertThat(rb.isMapped()).isFalse();
        assertThat(rb.device()).isNull();
        squatter.close();
        assertThat(rb.dmaMap(pd)).isTrue();
        none.free();
        rb.free();
    }

    @Test
    void aFailedReallocChangesNothingAndASuccessfulOneLeavesItUnmapped() {
        RegBuf rb = RegBuf.alloc(pool, 2048, DmaDirection.TO_DEVICE);
        rb.segment().set(ValueLayout.JAVA_LONG, 0, 0x1234_5678L);
        rb.dmaMap(pd);
        long address = rb.address();
        assertThat(rb.realloc(64L << 20, false)).as("over the pool's 8 MiB").isFalse();
        assertThat(rb.length()).isEqualTo(2048);
        assertThat(rb.address()).isEqualTo(address);
        assertThat(rb.isMapped()).isTrue();
        assertThat(rb.segment().get(ValueLayout.JAVA_LONG, 0)).isEqualTo(0x1234_5678L);
        assertThat(device.isDmaMapped(address, 2048)).isTrue();

        assertThat(rb.realloc(16384, true)).isTrue();
        assertThat(rb.length()).isEqualTo(16384);
        assertThat(rb.isMapped()).as("unmapped until next use").isFalse();
        assertThat(device.isDmaMapped(address, 2048)).as("the old mapping went").isFalse();
        assertThat(rb.segment().get(ValueLayout.JAVA_LONG, 0)).as("copied when asked").isEqualTo(0x1234_5678L);
        assertThat(rb.dmaMap(pd)).isTrue();
        rb.syncForDevice(16384);
        assertThatThrownBy(() -> rb.syncForCpu(16385)).isInstanceOf(RdmaException.class);
        rb.free();
    }
}
