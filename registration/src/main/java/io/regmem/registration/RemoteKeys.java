package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.ProviderMr;
import java.lang.foreign.MemorySegment;

/** The exported form of a region's remote keys ({@link MemoryRegion#exportRemoteKey()} and its variants). */
final class RemoteKeys {
    private RemoteKeys() {
    }

    /** The exported form of {@code key}, in a new array. */
    static byte[] export(ProviderMr provider, int key) {
        byte[] out = new byte[provider.exportedKeySize(key)];
        provider.exportRemoteKey(key, MemorySegment.ofArray(out));
        return out;
    }

    /**
     * Writes the exported form of {@code rkey}, the region's current key {@code key} or (fast-reg) one
     * differing from it in the low byte only, into the start of {@code to}; the bytes written.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a key of another region or a target too small
     *                       (nothing is written)
     */
    static int export(MemoryRegion mr, ProviderMr provider, int key, boolean fastReg, int rkey, MemorySegment to) {
        if ((rkey >>> 8) != (key >>> 8) || (!fastReg && rkey != key)) {
            throw new RdmaException(Errno.EINVAL, mr + ": 0x" + Integer.toHexString(rkey) + " is not a key of this region "
                    + "(its key is 0x" + Integer.toHexString(key) + "; only a fast-reg MR's low byte may differ)");
        }
        int n = provider.exportedKeySize(rkey);
        if (to.byteSize() < n) {
            throw new RdmaException(Errno.EINVAL, mr + ": exportRemoteKey needs " + n + " bytes, the target has "
                    + to.byteSize());
        }
        provider.exportRemoteKey(rkey, to.asSlice(0, n));
        return n;
    }
}
