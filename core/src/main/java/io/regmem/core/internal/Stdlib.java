package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * {@code <stdlib.h>} and {@code <stdio.h>}: {@code setenv} (a native library's settings, before it
 * loads), and {@code open_memstream}, {@code fclose}, {@code free} (text a native library prints to a
 * {@code FILE *}).
 */
public final class Stdlib {
    private static final ValueLayout P = ValueLayout.ADDRESS;
    private static final MethodHandle SETENV = Libc.plain("setenv", FunctionDescriptor.of(I, P, P, I));
    private static final MethodHandle OPEN_MEMSTREAM = Libc.plain("open_memstream", FunctionDescriptor.of(L, L, L));
    private static final MethodHandle FCLOSE = Libc.plain("fclose", FunctionDescriptor.of(I, L));
    private static final MethodHandle FREE = Libc.plain("free", FunctionDescriptor.ofVoid(L));

    private Stdlib() {
    }

    /** {@code setenv(name, value, 1)}: true if set. */
    public static boolean setenv(String name, String value) {
        try (Arena a = Arena.ofConfined()) {
            return (int) SETENV.invokeExact(a.allocateFrom(name), a.allocateFrom(value), 1) == 0;
        } catch (Throwable t) {
            throw Libc.failedToRun("setenv", t);
        }
    }

    /** {@code open_memstream(bufp, sizep)}: the stream, or 0 (NULL). */
    public static long openMemstream(long bufp, long sizep) {
        try {
            return (long) OPEN_MEMSTREAM.invokeExact(bufp, sizep);
        } catch (Throwable t) {
            throw Libc.failedToRun("open_memstream", t);
        }
    }

    /** {@code fclose(stream)}: 0, or EOF. */
    public static int fclose(long stream) {
        try {
            return (int) FCLOSE.invokeExact(stream);
        } catch (Throwable t) {
            throw Libc.failedToRun("fclose", t);
        }
    }

    /** {@code free(p)}. */
    public static void free(long p) {
        try {
            FREE.invokeExact(p);
        } catch (Throwable t) {
            throw Libc.failedToRun("free", t);
        }
    }
}
