package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/** {@code <sys/prctl.h>}: {@code prctl}. Returns its result, or {@code -errno} ({@link Libc}). */
public final class Prctl {
    /** Yama: lets the given process (or any, -1) attach to this one (and copy from it). */
    public static final int PR_SET_PTRACER = 0x59616d61;
    /** The calling thread's timer slack in nanoseconds (0: back to the one it inherited). */
    public static final int PR_SET_TIMERSLACK = 29;
    /** The calling thread's timer slack, as the result. */
    public static final int PR_GET_TIMERSLACK = 30;

    private static final MethodHandle PRCTL = Libc.capturing("prctl", FunctionDescriptor.of(I, I, L),
            Linker.Option.firstVariadicArg(1));

    private Prctl() {
    }

    /** {@code prctl(option, arg)}: 0, or -errno. */
    public static int prctl(MemorySegment capture, int option, long arg) {
        try {
            return Libc.ret(capture, (int) PRCTL.invokeExact(capture, option, arg));
        } catch (Throwable t) {
            throw Libc.failedToRun("prctl", t);
        }
    }
}
