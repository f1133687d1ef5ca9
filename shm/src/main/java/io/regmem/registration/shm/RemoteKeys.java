package io.regmem.registration.shm;

import io.regmem.registration.spi.PostedWr;

/**
 * How a lane QP's work requests name the target's memory: the key a request carries to its target,
 * which checks it against its own tables. On shm a remote key is the target's key itself; a provider
 * that carries its connection over the lane ({@link SameHostLane}) may name keys by handles of its
 * own and translate them here, and rule a request out early from what it knows of the key.
 */
public interface RemoteKeys {
    /** Keys are the target's own: sent as they are. */
    RemoteKeys TARGETS_OWN = new RemoteKeys() {
        @Override
        public long targetKey(PostedWr w) {
            return Integer.toUnsignedLong(w.rkey());
        }

        @Override
        public int invalidateKey(int key) {
            return key;
        }
    };

    /**
     * The target's own key for RDMA request {@code w} (its remote key, its range and its rights known
     * to the caller), as an unsigned 32-bit value; or -1 if what this side knows of the key rules the
     * request out: it then completes {@code REM_ACCESS_ERR} and nothing is sent. Called under the QP's
     * execution lock, after the local entries were checked.
     */
    long targetKey(PostedWr w);

    /** The target's own key a SEND_WITH_INV names by {@code key}. */
    int invalidateKey(int key);
}
