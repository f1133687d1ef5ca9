package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/** {@code <poll.h>}: {@code poll}. Returns its result, or {@code -errno} ({@link Libc}). */
public final class Poll {
    public static final int POLLIN = 1;
    public static final short POLLHUP = 0x10;

    private static final MethodHandle POLL = Libc.capturing("poll", FunctionDescriptor.of(I, L, L, I));

    private Poll() {
    }

    /** {@code poll(fds, count, timeout)}: the descriptors ready, 0 on timeout, or -errno. */
    public static int poll(MemorySegment capture, MemorySegment fds, long count, int timeoutMillis) {
        try {
            return Libc.ret(capture, (int) POLL.invokeExact(capture, fds.address(), count, timeoutMillis));
        } catch (Throwable t) {
            throw Libc.failedToRun("poll", t);
        }
    }
}
