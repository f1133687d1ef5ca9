package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/** {@code <sys/resource.h>}: {@code getrlimit}. */
public final class Resource {
    public static final int RLIMIT_MEMLOCK = 8;
    public static final long RLIM_INFINITY = -1L;

    private static final MethodHandle GETRLIMIT = Libc.capturing("getrlimit", FunctionDescriptor.of(I, I, L));

    private Resource() {
    }

    /** The soft limit of {@code resource} in bytes, {@link #RLIM_INFINITY} for unlimited, or -2 when unknown. */
    public static long softLimit(int resource) {
        if (GETRLIMIT == null) {
            return -2;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            MemorySegment rl = a.allocate(16, 8);
            int rc = (int) GETRLIMIT.invokeExact(capture, resource, rl.address());
            return rc == 0 ? rl.get(ValueLayout.JAVA_LONG, 0) : -2;
        } catch (Throwable t) {
            return -2;
        }
    }
}
