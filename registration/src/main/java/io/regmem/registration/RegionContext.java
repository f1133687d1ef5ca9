package io.regmem.registration;

import io.regmem.registration.spi.MrContext;
import java.lang.foreign.MemorySegment;

/** What the provider is told about a {@link MemoryRegion} (one per region: providers compare it by identity). */
final class RegionContext implements MrContext {
    final MemoryRegion region;

    RegionContext(MemoryRegion region) {
        this.region = region;
    }

    @Override
    public boolean isValid() {
        return region.isValid();
    }

    @Override
    public String name() {
        return region.toString();
    }

    @Override
    public int access() {
        return region.access();
    }

    @Override
    public boolean isIntegrity() {
        return region.isIntegrity();
    }

    @Override
    public MemorySegment segment() {
        return region.segment();
    }

    @Override
    public boolean isWindow() {
        return region.isWindow();
    }

    @Override
    public boolean isDeregistering() {
        return region.deregistering;
    }
}
