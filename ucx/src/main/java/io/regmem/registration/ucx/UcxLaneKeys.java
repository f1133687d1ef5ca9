package io.regmem.registration.ucx;

import io.regmem.registration.shm.RemoteKeys;
import io.regmem.registration.spi.PostedWr;

/**
 * A ucx QP's remote keys on the same-host lane: a handle this QP gave out at import names the
 * exporter's own key; a raw key goes as it is; a handle this QP never gave out fails
 * {@code REM_ACCESS_ERR} at once. The target checks every request against its own tables (range,
 * rights, liveness), and a request it refuses breaks the connection at both ends, as a NAK does.
 */
final class UcxLaneKeys implements RemoteKeys {
    private final UcxKeyTable keys;

    UcxLaneKeys(UcxKeyTable keys) {
        this.keys = keys;
    }

    @Override
    public long targetKey(PostedWr w) {
        if (w.totalLength() == 0) {
            return Integer.toUnsignedLong(w.rkey()); // nothing to check, at either end (the target moves nothing)
        }
        RemoteKeyEnvelope.Decoded k = keys.get(w.rkey());
        if (k != null) {
            return Integer.toUnsignedLong(k.rkey());
        }
        return UcxKeyTable.isRaw(w.rkey()) ? Integer.toUnsignedLong(w.rkey()) : -1;
    }

    @Override
    public int invalidateKey(int key) {
        return keys.invalidateKey(key);
    }
}
