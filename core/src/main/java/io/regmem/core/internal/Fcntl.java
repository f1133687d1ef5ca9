package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/** {@code <fcntl.h>}: {@code open} and {@code fcntl} (seals). Each call returns its result, or {@code -errno} ({@link Libc}). */
public final class Fcntl {
    public static final int O_RDONLY = 0;
    public static final int O_WRONLY = 1;
    public static final int O_RDWR = 2;
    public static final int O_CREAT = 0100;
    public static final int O_TRUNC = 01000;
    public static final int O_DSYNC = 010000;
    public static final int O_DIRECT = 040000;
    public static final int O_CLOEXEC = 02000000;
    public static final int AT_FDCWD = -100;
    public static final int F_DUPFD_CLOEXEC = 1030;
    public static final int F_ADD_SEALS = 1033;
    public static final int F_GET_SEALS = 1034;
    public static final int F_SEAL_SEAL = 1;
    public static final int F_SEAL_SHRINK = 2;
    public static final int F_SEAL_GROW = 4;
    public static final int F_SEAL_WRITE = 8;
    public static final int F_SEAL_FUTURE_WRITE = 16;

    private static final MethodHandle OPEN = Libc.capturing("open", FunctionDescriptor.of(I, L, I, I),
            Linker.Option.firstVariadicArg(2));
    private static final MethodHandle FCNTL = Libc.capturing("fcntl", FunctionDescriptor.of(I, I, I, I),
            Linker.Option.firstVariadicArg(2));

    private Fcntl() {
    }

    /** {@code open(path, flags, 0644)}: the fd, or -errno. */
    public static int open(MemorySegment capture, String path, int flags) {
        try (Arena a = Arena.ofConfined()) {
            return Libc.ret(capture, (int) OPEN.invokeExact(capture, a.allocateFrom(path).address(), flags, 0644));
        } catch (Throwable t) {
            throw Libc.failedToRun("open", t);
        }
    }

    /** {@code fcntl(fd, cmd, arg)} (seals): its result, or -errno. */
    public static int fcntl(MemorySegment capture, int fd, int cmd, int arg) {
        try {
            return Libc.ret(capture, (int) FCNTL.invokeExact(capture, fd, cmd, arg));
        } catch (Throwable t) {
            throw Libc.failedToRun("fcntl", t);
        }
    }
}
