package io.regmem.core.internal;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.Locale;

/**
 * regmem's one binding of libc, in the style of jextract's output: this class holds what every call
 * shares (the linker, errno capture, whether the calls bound, the page size), and one class per
 * header holds that header's constants and calls ({@link Mman}, {@link Unistd}, {@link Fcntl},
 * {@link Sockets}, {@link Uio}, {@link Poll}, {@link Prctl}, {@link Stat}, {@link Resource},
 * {@link Stdlib}, {@link Futex}). They are the only code in regmem that names a libc symbol; libucp's own symbols
 * stay in the ucx module.
 *
 * <p>The rules every call follows: pointers cross as {@code long}, so that a call allocates nothing;
 * a call returns its result, or {@code -errno} when it failed, the errno read from the caller's
 * capture segment ({@link #CAPTURE}, one per thread or per object, allocated once); a call that could
 * not run at all (unbound) throws {@link RdmaException} {@link Errno#EIO}. The JDK slices the capture
 * segment on every call made with {@code captureCallState}, which escape analysis removes in some
 * compilations only (40 bytes a call otherwise): a call on a data path that may simply be made again
 * goes first without the capture and only when it failed again with it, for its errno
 * ({@link Uio#processVmReadv}); a call whose errno does not matter has a plain form
 * ({@link Unistd#syscallPlain}). Internal: exported only to regmem's own modules.
 */
public final class Libc {
    /** The layout of the call-state segment every capturing call fills (errno). */
    public static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");
    private static final int SC_PAGESIZE = 30;
    static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;
    static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;

    /** {@code <errno.h>}: the errno values the callers test for. */
    public static final int ESRCH = 3;
    public static final int EINTR = 4;
    public static final int EFAULT = 14;

    /** The system's page size (4096 where it could not be asked). */
    public static final long PAGE_SIZE;
    /** Why the calls did not bind (not Linux, or native access refused), or null when they did. */
    public static final String UNAVAILABLE;

    static {
        long page = 4096;
        String why = null;
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            why = "needs Linux (this is " + System.getProperty("os.name") + ")";
        } else {
            try {
                Linker linker = Linker.nativeLinker();
                MethodHandle sysconf = linker.downcallHandle(linker.defaultLookup().find("sysconf").orElseThrow(),
                        FunctionDescriptor.of(L, I));
                long p = (long) sysconf.invokeExact(SC_PAGESIZE);
                if (p > 0) {
                    page = p;
                }
            } catch (Throwable t) {
                why = "the libc calls did not bind (" + t + "); run with --enable-native-access=io.regmem.core (or "
                        + "ALL-UNNAMED on the class path)";
            }
        }
        PAGE_SIZE = page;
        UNAVAILABLE = why;
    }

    private Libc() {
    }

    /**
     * @param who what needs the calls, as the message begins ("shm", "io_uring")
     * @throws RdmaException {@link Errno#ENOSYS} if the calls did not bind (not Linux, native access refused)
     */
    public static void requireBound(String who) {
        if (UNAVAILABLE != null) {
            throw new RdmaException(Errno.ENOSYS, who + ": " + UNAVAILABLE);
        }
    }

    /** The errno a failed call left in {@code capture}. */
    public static int errno(MemorySegment capture) {
        return (int) ERRNO.get(capture, 0L);
    }

    /** A handle of libc's {@code name} that captures errno (null where the calls did not bind). */
    static MethodHandle capturing(String name, FunctionDescriptor fd, Linker.Option... options) {
        Linker.Option[] all = Arrays.copyOf(options, options.length + 1);
        all[options.length] = CAPTURE_ERRNO;
        return plain(name, fd, all);
    }

    /** A handle of libc's {@code name} without errno capture (null where the calls did not bind). */
    static MethodHandle plain(String name, FunctionDescriptor fd, Linker.Option... options) {
        if (UNAVAILABLE != null) {
            return null;
        }
        Linker linker = Linker.nativeLinker();
        return linker.defaultLookup().find(name).map(s -> linker.downcallHandle(s, fd, options)).orElse(null);
    }

    /** {@code rc}, or {@code -errno} when it says the call failed. */
    static int ret(MemorySegment capture, long rc) {
        return rc < 0 ? -errno(capture) : (int) rc;
    }

    /** {@code rc}, or {@code -errno} when it says the call failed. */
    static long retLong(MemorySegment capture, long rc) {
        return rc < 0 ? -errno(capture) : rc;
    }

    static RdmaException failedToRun(String call, Throwable t) {
        return new RdmaException(Errno.EIO, "libc: " + call + " failed to run" + (UNAVAILABLE != null ? ": " + UNAVAILABLE : ""),
                t);
    }
}
