package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/**
 * The remote keys imported on one UCX QP: each peer envelope, checked once, under the 32-bit handle
 * a work request names it by (this tag in the top byte, the index + 1 below it). Importing the same
 * bytes again gives the same handle. Keys live as long as the QP; nothing of UCX is held for them
 * (the target checks every access against its own tables), so they may be imported in any state.
 *
 * <p>A 4-byte key (a fast-reg MR's or window's, which only the target checks) imports as itself: no
 * entry, so an RPC that puts a fresh key in every call grows nothing. Only such a key whose top byte
 * is the tag gets an entry, so that handles stay unambiguous.
 */
final class UcxKeyTable {
    private static final int TAG = 0x5C00_0000;
    private static final int MAX = 0xFF_FFFE;

    /** One imported key: the envelope's bytes and what they say. */
    private record Entry(byte[] envelope, RemoteKeyEnvelope.Decoded key, long[] unpacked) {
        Entry(byte[] envelope, RemoteKeyEnvelope.Decoded key) {
            this(envelope, key, new long[1]);
        }
    }

    /** Copy-on-write under {@code this}: the data path reads it without a lock. */
    private volatile Entry[] keys = new Entry[0];

    /**
     * Imports an exported key.
     *
     * @throws RdmaException {@link Errno#EINVAL} for bytes that are not a whole, undamaged envelope;
     *                       {@link Errno#ENOMEM} past 16 million keys
     */
    int importKey(MemorySegment exported, String who) {
        RemoteKeyEnvelope.Decoded d;
        if (exported.byteSize() == Integer.BYTES) {
            int rkey = exported.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
            if (isRaw(rkey)) {
                return rkey;
            }
            d = new RemoteKeyEnvelope.Decoded(rkey, 0, 0, 0, RemoteKeyEnvelope.TARGET_CHECKS, new byte[0]);
        } else {
            d = RemoteKeyEnvelope.decode(exported, who);
        }
        byte[] bytes = exported.toArray(ValueLayout.JAVA_BYTE);
        synchronized (this) {
            Entry[] ks = keys;
            for (int i = 0; i < ks.length; i++) {
                if (Arrays.equals(ks[i].envelope(), bytes)) {
                    return TAG | (i + 1);
                }
            }
            if (ks.length >= MAX) {
                throw new RdmaException(Errno.ENOMEM, who + ": importRemoteKey: " + ks.length + " keys imported");
            }
            Entry[] next = Arrays.copyOf(ks, ks.length + 1);
            next[ks.length] = new Entry(bytes, d);
            keys = next;
            return TAG | (ks.length + 1);
        }
    }

    /**
     * The UCX remote key of a {@link RemoteKeyEnvelope#ONE_SIDED} handle for endpoint {@code ep},
     * unpacked at its first use (worker lock held); 0 if the handle names no such key.
     */
    long remoteKey(int handle, UcxDevice device, long ep) {
        Entry[] ks = keys;
        int i = (handle ^ TAG) - 1;
        if ((handle & 0xFF00_0000) != TAG || i < 0 || i >= ks.length) {
            return 0;
        }
        Entry e = ks[i];
        if (e.unpacked()[0] == 0) {
            e.unpacked()[0] = device.worker.unpack(java.lang.foreign.MemorySegment.ofAddress(ep), e.key().packed()).address();
        }
        return e.unpacked()[0];
    }

    /** Destroys the UCX remote keys unpacked for this table (worker lock held): the QP ends. */
    void destroyRemoteKeys(Ucp ucp) {
        for (Entry e : keys) {
            if (e.unpacked()[0] != 0) {
                ucp.rkeyDestroy(java.lang.foreign.MemorySegment.ofAddress(e.unpacked()[0]));
                e.unpacked()[0] = 0;
            }
        }
    }

    /** True if a work request's {@code key} is a target's own key, sent as it is (no handle of a table). */
    static boolean isRaw(int key) {
        return (key & 0xFF00_0000) != TAG;
    }

    /** The key a work request names by {@code handle}, or null if this QP imported none under it. */
    RemoteKeyEnvelope.Decoded get(int handle) {
        Entry[] ks = keys;
        int i = (handle ^ TAG) - 1;
        return (handle & 0xFF00_0000) == TAG && i >= 0 && i < ks.length ? ks[i].key() : null;
    }

    /**
     * False if the envelope rules the access out ({@code [addr, addr + len)} outside the region, or
     * {@code right} not granted); true if it allows it or cannot tell (a fast-reg MR's or window's
     * envelope: the target decides).
     */
    static boolean mayAccess(RemoteKeyEnvelope.Decoded k, long addr, long len, Access right) {
        if (!k.rangeKnown()) {
            return true;
        }
        return Access.has(k.access(), right) && addr >= k.address() && len <= k.length() && addr - k.address() <= k.length() - len;
    }
}
