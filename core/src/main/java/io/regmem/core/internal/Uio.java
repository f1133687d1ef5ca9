package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * {@code <sys/uio.h>}: {@code process_vm_readv} and {@code process_vm_writev}, the same-host lane's
 * copies between processes. Each call returns the bytes copied, or {@code -errno} ({@link Libc}).
 */
public final class Uio {
    private static final FunctionDescriptor PVM = FunctionDescriptor.of(L, I, L, L, L, L, L);
    private static final MethodHandle READV = Libc.capturing("process_vm_readv", PVM);
    private static final MethodHandle READV_PLAIN = Libc.plain("process_vm_readv", PVM);
    private static final MethodHandle WRITEV = Libc.capturing("process_vm_writev", PVM);

    private Uio() {
    }

    /**
     * {@code process_vm_readv}: bytes copied from {@code pid}'s memory, or -errno. Made without the
     * capture first (a data-path call: see {@link Libc}), and again with it only when it failed (a copy
     * into the caller's own buffers, which it may repeat).
     */
    public static long processVmReadv(MemorySegment capture, int pid, long localIov, long localCount, long remoteIov,
            long remoteCount) {
        try {
            long n = (long) READV_PLAIN.invokeExact(pid, localIov, localCount, remoteIov, remoteCount, 0L);
            if (n >= 0) {
                return n;
            }
            return Libc.retLong(capture, (long) READV.invokeExact(capture, pid, localIov, localCount, remoteIov, remoteCount, 0L));
        } catch (Throwable t) {
            throw Libc.failedToRun("process_vm_readv", t);
        }
    }

    /** {@code process_vm_writev}: bytes copied into {@code pid}'s memory, or -errno. */
    public static long processVmWritev(MemorySegment capture, int pid, long localIov, long localCount, long remoteIov,
            long remoteCount) {
        try {
            return Libc.retLong(capture, (long) WRITEV.invokeExact(capture, pid, localIov, localCount, remoteIov, remoteCount,
                    0L));
        } catch (Throwable t) {
            throw Libc.failedToRun("process_vm_writev", t);
        }
    }
}
