package io.regmem.core;

/**
 * The only class that names Chronicle Bytes, so that the rest of core loads without it (it is an
 * optional dependency).
 */
final class ChronicleViews {
    private static final boolean PRESENT = present();

    private ChronicleViews() {
    }

    private static boolean present() {
        try {
            Class.forName("net.openhft.chronicle.bytes.BytesStore", false, ChronicleViews.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    static void requirePresent(String pool) {
        if (!PRESENT) {
            throw new RdmaException(Errno.EOPNOTSUPP, pool + ": asBytesStore needs net.openhft:chronicle-bytes on the "
                    + "class path (an optional dependency of regmem-core)");
        }
    }

    /** A pointer bytes store over {@code [address, address + capacity)}; Chronicle does not own the memory. */
    static net.openhft.chronicle.bytes.BytesStore<?, ?> wrap(long address, long capacity) {
        return net.openhft.chronicle.bytes.BytesStore.wrap(address, capacity);
    }
}
