package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.spi.ProviderQp;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.agrona.collections.ArrayUtil;

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
    private static final int TAG = ProviderQp.HANDLE_TAG_BYTE << 24;
    /** A 4-byte exported key: big-endian (network order), on every provider. */
    static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
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
            int rkey = exported.get(BE_INT, 0);
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
            keys = ArrayUtil.add(ks, new Entry(bytes, d));
            return TAG | (ks.length + 1);
        }
    }

    /** {@code unpacked} of a key UCX could not unpack (its memory is gone): it goes as messages from then on. */
    private static final long UNPACK_FAILED = -1;

    /**
     * The UCX remote key of a {@link RemoteKeyEnvelope#ONE_SIDED} handle for endpoint {@code ep},
     * unpacked at its first use (worker lock held); 0 if the handle names no such key, or if UCX
     * cannot (or must not) unpack it, and the request goes as a message the target checks.
     *
     * <p>UCX 1.13 crashes the process in {@code ucp_ep_rkey_unpack} (its error path, in
     * {@code uct_rkey_release}) for a key of memory that another worker of the same process has
     * already given back. So for a peer in this JVM ({@code exporter}) the key is unpacked only while
     * that device's worker lock is held and its chunk source still holds the key's range (its
     * memory cannot go meanwhile; the lock only tried: if it is busy, this request goes as a
     * message); for a peer in another process UCX reports the failure (a shared-memory error) and the
     * key is marked: its requests go as messages. {@code anyRegistered}: the key of any registration
     * the exporter still has will do (a connection on NIC transports, UCX 1.19 or later, whose
     * unpack survives a stale key).
     */
    long remoteKey(int handle, UcxDevice device, long ep, UcxDevice exporter, boolean anyRegistered) {
        Entry[] ks = keys;
        int i = (handle ^ TAG) - 1;
        if ((handle & 0xFF00_0000) != TAG || i < 0 || i >= ks.length) {
            return 0;
        }
        Entry e = ks[i];
        long u = e.unpacked()[0];
        if (u == UNPACK_FAILED) {
            return 0;
        }
        if (u == 0) {
            RemoteKeyEnvelope.Decoded k = e.key();
            if (exporter != null) {
                if (!exporter.workerLock.tryLock()) {
                    return 0;
                }
                try {
                    if (exporter.isClosed() || (!anyRegistered && !exporter.ownsAllocation(k.address(), k.length()))) {
                        e.unpacked()[0] = UNPACK_FAILED;
                        return 0;
                    }
                    u = unpack(device, ep, k);
                } finally {
                    exporter.workerLock.unlock();
                }
            } else {
                u = unpack(device, ep, k);
            }
            e.unpacked()[0] = u;
        }
        return u == UNPACK_FAILED ? 0 : u;
    }

    private static long unpack(UcxDevice device, long ep, RemoteKeyEnvelope.Decoded k) {
        try {
            return device.worker.unpack(MemorySegment.ofAddress(ep), k.packed()).address();
        } catch (RdmaException gone) {
            return UNPACK_FAILED; // the peer gave the memory back (a shared-memory error): messages from now on
        }
    }

    /** Destroys the UCX remote keys unpacked for this table (worker lock held): the QP ends. */
    void destroyRemoteKeys(Ucp ucp) {
        for (Entry e : keys) {
            if (e.unpacked()[0] != 0 && e.unpacked()[0] != UNPACK_FAILED) {
                ucp.rkeyDestroy(MemorySegment.ofAddress(e.unpacked()[0]));
                e.unpacked()[0] = 0;
            }
        }
    }

    /** The exporter's own key a SEND_WITH_INV names by {@code key}: an imported key's, else {@code key} as it is. */
    int invalidateKey(int key) {
        RemoteKeyEnvelope.Decoded k = get(key);
        return k != null ? k.rkey() : key;
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
        long a = absolute(k, addr);
        return Access.has(k.access(), right) && a >= k.address() && len <= k.length() && a - k.address() <= k.length() - len;
    }

    /**
     * The exporter's address a request's remote address names: itself, or for a ZERO_BASED region
     * (addressed by offset, as verbs has it) the region's start plus the offset.
     */
    static long absolute(RemoteKeyEnvelope.Decoded k, long addr) {
        return Access.has(k.access(), Access.ZERO_BASED) ? k.address() + addr : addr;
    }
}
