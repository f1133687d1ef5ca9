package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/** {@code <sys/stat.h>}: {@code statx}. Returns 0, or {@code -errno} ({@link Libc}). */
public final class Stat {
    private static final MethodHandle STATX = Libc.capturing("statx", FunctionDescriptor.of(I, I, L, I, I, L));

    private Stat() {
    }

    /** {@code statx(AT_FDCWD, path, 0, mask, buf)}: 0, or -errno. */
    public static int statx(MemorySegment capture, String path, int mask, MemorySegment buf) {
        try (Arena a = Arena.ofConfined()) {
            return Libc.ret(capture, (int) STATX.invokeExact(capture, Fcntl.AT_FDCWD, a.allocateFrom(path).address(), 0, mask,
                    buf.address()));
        } catch (Throwable t) {
            throw Libc.failedToRun("statx", t);
        }
    }
}
