package io.regmem.registration.cache;

import io.regmem.registration.testkit.Providers;

import io.regmem.registration.LincheckBudget;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lincheck model checking of the cache's concurrent get/put/invalidate: every interleaving it
 * explores must be linearizable against the cache run sequentially, and must not throw (a double
 * deregistration or a revived region would). Bounded for CI; a soak run explores more
 * ({@link LincheckBudget}).
 */
@ExtendWith(NoLeaks.class)
@Param(name = "page", gen = IntGen.class, conf = "0:2")
public class RegistrationCacheLincheckTest {
    /** Opened by the test method around the check and closed by it (Lincheck makes many instances). */
    private static Arena ARENA;
    private static MemorySegment MEMORY;
    private static RdmaDevice DEVICE;
    private static ProtectionDomain PD;
    private static final List<RegistrationCache> CACHES = new ArrayList<>();

    /*
     * Room for every page: eviction picks its victim among idle regions, so which region goes
     * depends on who holds what at that instant, which no sequential get-then-put history shows.
     * (An earlier run with room for two found a real bug that way: the index was published over its
     * limit before eviction ran, and size() saw it.) Eviction is covered by the unit and model tests.
     */
    private final RegistrationCache cache = PD == null ? null : RegistrationCache.builder(PD).maxRegions(8).build();

    /**
     * Lincheck makes one instance per invocation, one after another: closing the previous
     * invocations' caches here keeps the shared device's state small (else its registry grows
     * with every invocation and Lincheck reads the long walks as livelocks).
     */
    public RegistrationCacheLincheckTest() {
        if (cache == null) {
            return; // JUnit's instance, for running the test method: no device yet
        }
        synchronized (CACHES) {
            CACHES.forEach(RegistrationCache::close);
            CACHES.clear();
            CACHES.add(cache);
        }
    }

    private static MemorySegment page(int page) {
        return MEMORY.asSlice(page * 4096L, 4096);
    }

    /** Get a page's region and give it back; answers whether it covered the page. */
    @Operation
    public boolean getAndPut(@Param(name = "page") int page) {
        CachedRegion r = cache.get(page(page), Access.REMOTE_READ);
        boolean covers = r.address() <= page(page).address() && r.length() >= 4096;
        r.close();
        return covers;
    }

    /**
     * Get a page's region, give it back, and give it back again: the second release is always
     * refused, also while the other thread gets and puts the same region.
     */
    @Operation
    public boolean getPutAndPutAgain(@Param(name = "page") int page) {
        CachedRegion r = cache.get(page(page), Access.REMOTE_READ);
        r.close();
        try {
            r.close();
            return false;
        } catch (io.regmem.core.RdmaException e) {
            return e.errno() == io.regmem.core.Errno.EINVAL;
        }
    }

    /** Invalidate one page; answers how many regions went. */
    @Operation
    public int invalidate(@Param(name = "page") int page) {
        return cache.invalidate(page(page).address(), 4096);
    }

    /** How many regions are indexed. */
    @Operation
    public int size() {
        return cache.size();
    }

    @Test
    void isLinearizable() {
        ARENA = Arena.ofShared();
        MEMORY = ARENA.allocate(4 * 4096, 4096);
        DEVICE = Providers.open();
        PD = DEVICE.allocPd();
        try {
            new ModelCheckingOptions()
                    .iterations(LincheckBudget.iterations(4))
                    .invocationsPerIteration(LincheckBudget.invocations(150))
                    .threads(2)
                    .actorsPerThread(3)
                    .check(RegistrationCacheLincheckTest.class);
        } finally {
            synchronized (CACHES) {
                CACHES.forEach(RegistrationCache::close);
                CACHES.clear();
            }
            assertThat(PD.useCount()).isZero();
            PD.close();
            DEVICE.close();
            ARENA.close();
        }
    }
}
