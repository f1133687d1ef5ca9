package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** {@code ucp_dt_iov_t} arrays, in jextract's style: the binding's view of the entry layout. */
final class UcpDtIov {
    private UcpDtIov() {
    }

    /** Bytes of {@code n} entries. */
    static long bytes(int n) {
        return n * UcpLayout.DT_IOV_SIZE;
    }

    /** An array of {@code n} entries. */
    static MemorySegment allocate(Arena arena, int n) {
        return arena.allocate(bytes(n), 8);
    }

    /** Sets entry {@code i}: {@code length} bytes at {@code address}. */
    static void set(MemorySegment iov, int i, long address, long length) {
        iov.set(JAVA_LONG, i * UcpLayout.DT_IOV_SIZE + UcpLayout.DT_IOV_BUFFER, address);
        iov.set(JAVA_LONG, i * UcpLayout.DT_IOV_SIZE + UcpLayout.DT_IOV_LENGTH, length);
    }
}
