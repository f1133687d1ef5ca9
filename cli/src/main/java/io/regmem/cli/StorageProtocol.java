package io.regmem.cli;

/**
 * The storage demo's messages, all SENDs of native byte order. A call (32 bytes, client to server):
 * {@code int kind} ({@link #OP_READ} or {@link #OP_WRITE}) at 0, {@code int slot} at 4, {@code long}
 * file offset at 8, {@code int} length at 16, {@code int} index of the client's remote key at 20,
 * {@code long} address of the client's block at 24. A key (up to {@link #KEY_MSG} bytes, sent once
 * per client chunk before the first call): {@link #OP_KEY} at 0, its index at 4, its length at 8,
 * the exported key from 16. A reply (8 bytes, server to client): {@code int slot} at 0, {@code int}
 * result (bytes moved, or a negative errno) at 4.
 */
final class StorageProtocol {
    static final int OP_READ = 1;
    static final int OP_WRITE = 2;
    static final int OP_KEY = 3;
    /** The size of a reply buffer. */
    static final int MSG = 64;
    /** The size of a call buffer (a key is the largest call). */
    static final int KEY_MSG = 1024;
    private static final long WRITE_SEED = 0x5DEECE66DL;

    private StorageProtocol() {
    }

    /** The long the generated file holds at 8-byte-aligned offset {@code p}. */
    static long pattern(long p) {
        return (p + 0x1234_5678L) * 0x9E3779B97F4A7C15L;
    }

    /** What the client writes at offset {@code p}. */
    static long written(long p) {
        return pattern(p) ^ WRITE_SEED;
    }
}
