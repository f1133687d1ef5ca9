package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The trackSites device option: which objects record where they were made, for leak reports. */
@ExtendWith(NoLeaks.class)
class CreationSiteTest {
    private static final int MRS = 2000;

    /** Registers {@link #MRS} regions on a device opened with {@code options}; returns how many recorded a site. */
    private static int sitesRecorded(Map<String, String> options, List<String> pdSites) {
        try (Arena arena = Arena.ofShared(); RdmaDevice device = Providers.open(options)) {
            MemorySegment memory = arena.allocate(4096, 4096);
            ProtectionDomain pd = device.allocPd();
            pdSites.add(pd.creationSite());
            List<MemoryRegion> mrs = new ArrayList<>();
            int recorded = 0;
            for (int i = 0; i < MRS; i++) {
                MemoryRegion mr = pd.register(memory, Access.REMOTE_READ);
                mrs.add(mr);
                if (mr.hasCreationSite()) {
                    recorded++;
                    assertThat(mr.creationSite()).contains("CreationSiteTest.sitesRecorded");
                } else {
                    assertThat(mr.creationSite()).contains("trackSites=all");
                }
                assertThat(mr.owner()).as("an MR's owner is its PD's, recorded or not").isEqualTo(pd.owner());
            }
            assertThat(device.resources().report()).contains("MemoryRegion").contains("created at");
            mrs.forEach(MemoryRegion::close);
            pd.close();
            assertThat(device.resources().survivors()).isEmpty();
            return recorded;
        }
    }

    @Test
    void allRecordsEverySiteOffNoneAndTheDefaultSamplesRegionsButNotPds() {
        List<String> pdSites = new ArrayList<>();
        assertThat(sitesRecorded(Map.of(RdmaDevice.TRACK_SITES, "all"), pdSites)).isEqualTo(MRS);
        assertThat(sitesRecorded(Map.of(RdmaDevice.TRACK_SITES, "off"), pdSites)).isZero();
        // One in 64 on average: none of 2000 has odds of 1e-14, all of them far less.
        assertThat(sitesRecorded(Map.of(), pdSites)).isBetween(1, MRS / 8);
        assertThat(pdSites.get(0)).contains("CreationSiteTest.sitesRecorded");
        assertThat(pdSites.get(1)).contains("trackSites=all");
        assertThat(pdSites.get(2)).as("PDs are made rarely: always recorded when sampling").contains("CreationSiteTest.sitesRecorded");
    }

    @Test
    void aBadValueIsRefused() {
        assertRdma(() -> RdmaDevice.open(Providers.NAME, Map.of(RdmaDevice.TRACK_SITES, "sometimes")), Errno.EINVAL);
    }
}
