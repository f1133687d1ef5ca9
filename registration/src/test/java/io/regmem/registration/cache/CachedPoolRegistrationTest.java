package io.regmem.registration.cache;

import io.regmem.registration.testkit.Providers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** A pool registered through the cache: each chunk got once at birth, invalidated before it is unmapped. */
@ExtendWith(NoLeaks.class)
class CachedPoolRegistrationTest {
    private final RdmaDevice device = Providers.open();
    private final ProtectionDomain pd = device.allocPd();

    @AfterEach
    void nothingLeaked() {
        assertThat(BufferPool.openPools()).isEmpty();
        pd.close();
        assertThat(device.resources().survivors()).as(device.resources().report()).isEmpty();
        device.close();
    }

    @Test
    void chunksGoThroughTheCacheAndUnmappingInvalidates() {
        RegistrationCache cache = RegistrationCache.of(pd);
        BufferPool pool = BufferPool.builder().chunkSize(1 << 20).largestClass(64 << 10).build();
        PoolRegistration reg = cache.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        PooledBuffer small = pool.allocate(4096);
        PooledBuffer large = pool.allocate(2L << 20);
        assertThat(cache.stats().misses()).as("one registration per chunk").isEqualTo(2);
        assertThat(cache.size()).isEqualTo(2);
        int largeKey = reg.rkey(large);
        assertThat(reg.region(small).address()).isLessThanOrEqualTo(small.address());
        // a user's get over pooled memory hits the chunk's registration
        CachedRegion hit = cache.get(small.segment(), Access.REMOTE_WRITE);
        assertThat(hit.region()).isSameAs(reg.region(small));
        hit.close();
        assertThat(cache.stats().hits()).isEqualTo(1);

        large.close(); // the chunk is unmapped: its region is invalidated first
        assertThat(cache.size()).isEqualTo(1);
        assertThat(cache.stats().invalidations()).isEqualTo(1);
        assertThat(device.resources().survivors(io.regmem.registration.MemoryRegion.class))
                .noneMatch(mr -> mr.rkey() == largeKey && mr.isValid());

        small.close();
        pool.close();
        assertThat(cache.size()).as("closing the pool invalidates its chunks").isZero();
        reg.close();
        cache.close();
        assertThat(pd.useCount()).isZero();
    }

    /**
     * A trim gives an idle chunk back: its region (and a user's cached get over it) is invalidated
     * and its rkey dies before the memory goes; the range's next chunk is registered anew.
     */
    @Test
    void aTrimInvalidatesTheChunksRegionBeforeItsMemoryGoes() {
        RegistrationCache cache = RegistrationCache.of(pd);
        BufferPool pool = BufferPool.builder().name("cached-trim").chunkSize(1 << 20).noDecay().build();
        PoolRegistration reg = cache.register(pool, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        PooledBuffer b = pool.allocate(4096);
        int key = reg.rkey(b);
        long address = b.chunk().address();
        CachedRegion hit = cache.get(b.segment(), Access.REMOTE_WRITE);
        assertThat(hit.region()).isSameAs(reg.region(b));
        hit.close();
        b.close();

        assertThat(pool.trim()).isEqualTo(1 << 20);
        assertThat(cache.size()).isZero();
        assertThat(cache.stats().invalidations()).isEqualTo(1);
        assertThat(device.resources().survivors(io.regmem.registration.MemoryRegion.class))
                .noneMatch(mr -> mr.rkey() == key && mr.isValid());

        PooledBuffer again = pool.allocate(4096); // the same range, a new chunk, registered through the cache again
        assertThat(again.chunk().address()).isEqualTo(address);
        assertThat(reg.region(again).isValid()).isTrue();
        assertThat(cache.stats().misses()).isEqualTo(2);
        again.close();
        pool.close();
        reg.close();
        cache.close();
        assertThat(pd.useCount()).isZero();
    }

    @Test
    void badRightsFailAtOnceEvenWithoutChunks() {
        RegistrationCache cache = RegistrationCache.of(pd);
        try (BufferPool pool = BufferPool.builder().build()) {
            assertThatThrownBy(() -> cache.register(pool, Access.REMOTE_WRITE)).isInstanceOf(RdmaException.class)
                    .hasMessageContaining("need LOCAL_WRITE");
        }
        cache.close();
    }
}
