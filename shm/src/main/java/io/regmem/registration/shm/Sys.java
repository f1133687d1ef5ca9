package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * The libc calls of the same-host lane, through FFM: {@code memfd_create}, {@code ftruncate},
 * {@code fcntl} (seals), {@code lseek}, {@code close}, Unix domain sockets ({@code socket},
 * {@code bind}, {@code listen}, {@code accept4}, {@code connect}, {@code sendmsg}, {@code recvmsg},
 * {@code getsockopt}), {@code poll}, {@code process_vm_readv}/{@code writev}, {@code prctl} and
 * {@code syscall} (pidfd_open, futex). Calls take an errno-capture segment ({@link #CAPTURE});
 * pointers cross as {@code long}. Each wrapper returns the call's result, or {@code -errno}. The
 * data path's calls go without the capture (the JDK slices the capture segment on every call, which
 * escape analysis removes in some compilations only: 40 bytes a call otherwise): {@code process_vm_readv}
 * is made again with it only when it failed, for its errno; a futex wake needs no errno at all
 * ({@link #syscallPlain}).
 */
final class Sys {
    static final int MFD_CLOEXEC = 1;
    static final int MFD_ALLOW_SEALING = 2;
    static final int F_ADD_SEALS = 1033;
    static final int F_GET_SEALS = 1034;
    static final int F_SEAL_SEAL = 1;
    static final int F_SEAL_SHRINK = 2;
    static final int F_SEAL_GROW = 4;
    static final int SEEK_END = 2;
    static final int PROT_READ = 1;
    static final int PROT_WRITE = 2;
    static final int MAP_SHARED = 1;
    static final int AF_UNIX = 1;
    static final int SOCK_STREAM = 1;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int SOL_SOCKET = 1;
    static final int SCM_RIGHTS = 1;
    static final int SO_PEERCRED = 17;
    static final int SO_PEERPIDFD = 77;
    static final int MSG_CTRUNC = 0x8;
    static final int MSG_NOSIGNAL = 0x4000;
    static final int MSG_CMSG_CLOEXEC = 0x40000000;
    static final int POLLIN = 1;
    static final short POLLHUP = 0x10;
    static final int PR_SET_PTRACER = 0x59616d61;
    static final long SYS_PIDFD_OPEN = 434;
    static final long SYS_FUTEX = 202;
    static final int FUTEX_WAIT = 0;
    static final int FUTEX_WAKE = 1;
    static final int EAGAIN = 11;
    static final int EINTR = 4;
    static final int EPERM = 1;
    static final int EFAULT = 14;
    static final int ESRCH = 3;
    static final int ENOPROTOOPT = 92;
    static final long SYS_FUTEX_WAITV = 449;
    static final int FUTEX2_SIZE_U32 = 0x02;
    static final int CLOCK_MONOTONIC = 1;
    static final int ETIMEDOUT = 110;

    /** The call-state (errno) layout: core's. */
    static final StructLayout CAPTURE = Libc.CAPTURE;

    private static final MethodHandle MEMFD_CREATE;
    private static final MethodHandle FTRUNCATE;
    private static final MethodHandle FCNTL;
    private static final MethodHandle LSEEK;
    private static final MethodHandle CLOSE;
    private static final MethodHandle SOCKET;
    private static final MethodHandle BIND;
    private static final MethodHandle LISTEN;
    private static final MethodHandle ACCEPT4;
    private static final MethodHandle CONNECT;
    private static final MethodHandle SENDMSG;
    private static final MethodHandle RECVMSG;
    private static final MethodHandle GETSOCKOPT;
    private static final MethodHandle POLL;
    private static final MethodHandle PVM_READV;
    private static final MethodHandle PVM_READV_PLAIN;
    private static final MethodHandle SYSCALL_PLAIN;
    private static final MethodHandle PVM_WRITEV;
    private static final MethodHandle PRCTL;
    private static final MethodHandle SYSCALL;
    /** Why binding failed, or null. */
    static final String UNAVAILABLE;

    static {
        MethodHandle[] h = new MethodHandle[20];
        String why = null;
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            why = "shm needs Linux (this is " + System.getProperty("os.name") + ")";
        } else {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                Linker.Option errno = Linker.Option.captureCallState("errno");
                FunctionDescriptor iLI = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT);
                h[0] = linker.downcallHandle(libc.find("memfd_create").orElseThrow(), iLI, errno);
                h[1] = linker.downcallHandle(libc.find("ftruncate").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG), errno);
                h[2] = linker.downcallHandle(libc.find("fcntl").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), errno,
                        Linker.Option.firstVariadicArg(2));
                h[3] = linker.downcallHandle(libc.find("lseek").orElseThrow(),
                        FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT), errno);
                h[4] = linker.downcallHandle(libc.find("close").orElseThrow(), FunctionDescriptor.of(JAVA_INT, JAVA_INT), errno);
                h[5] = linker.downcallHandle(libc.find("socket").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), errno);
                FunctionDescriptor iILI = FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_INT);
                h[6] = linker.downcallHandle(libc.find("bind").orElseThrow(), iILI, errno);
                h[7] = linker.downcallHandle(libc.find("listen").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT), errno);
                h[8] = linker.downcallHandle(libc.find("accept4").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT), errno);
                h[9] = linker.downcallHandle(libc.find("connect").orElseThrow(), iILI, errno);
                FunctionDescriptor msg = FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_INT);
                h[10] = linker.downcallHandle(libc.find("sendmsg").orElseThrow(), msg, errno);
                h[11] = linker.downcallHandle(libc.find("recvmsg").orElseThrow(), msg, errno);
                h[12] = linker.downcallHandle(libc.find("getsockopt").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG), errno);
                h[13] = linker.downcallHandle(libc.find("poll").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT), errno);
                FunctionDescriptor pvm = FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG,
                        JAVA_LONG, JAVA_LONG);
                h[14] = linker.downcallHandle(libc.find("process_vm_readv").orElseThrow(), pvm, errno);
                h[15] = linker.downcallHandle(libc.find("process_vm_writev").orElseThrow(), pvm, errno);
                h[18] = linker.downcallHandle(libc.find("process_vm_readv").orElseThrow(), pvm);
                h[19] = linker.downcallHandle(libc.find("syscall").orElseThrow(),
                        FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG,
                                JAVA_LONG), Linker.Option.firstVariadicArg(1));
                h[16] = linker.downcallHandle(libc.find("prctl").orElseThrow(),
                        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG), errno, Linker.Option.firstVariadicArg(1));
                h[17] = linker.downcallHandle(libc.find("syscall").orElseThrow(),
                        FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG,
                                JAVA_LONG), errno, Linker.Option.firstVariadicArg(1));
            } catch (Throwable t) {
                why = "shm: the system calls did not bind (" + t + "); run with --enable-native-access=io.regmem.shm "
                        + "(or ALL-UNNAMED on the class path)";
            }
        }
        MEMFD_CREATE = h[0];
        FTRUNCATE = h[1];
        FCNTL = h[2];
        LSEEK = h[3];
        CLOSE = h[4];
        SOCKET = h[5];
        BIND = h[6];
        LISTEN = h[7];
        ACCEPT4 = h[8];
        CONNECT = h[9];
        SENDMSG = h[10];
        RECVMSG = h[11];
        GETSOCKOPT = h[12];
        POLL = h[13];
        PVM_READV = h[14];
        PVM_READV_PLAIN = h[18];
        SYSCALL_PLAIN = h[19];
        PVM_WRITEV = h[15];
        PRCTL = h[16];
        SYSCALL = h[17];

        if (why == null && Libc.UNAVAILABLE != null) {
            why = "shm: core's libc binding (mmap) " + Libc.UNAVAILABLE;
        }
        UNAVAILABLE = why;
    }

    private Sys() {
    }

    /** @throws RdmaException {@link Errno#ENOSYS} if the calls did not bind (not Linux, native access refused) */
    static void requireBound() {
        if (UNAVAILABLE != null) {
            throw new RdmaException(Errno.ENOSYS, UNAVAILABLE);
        }
    }

    private static int ret(MemorySegment capture, long rc) {
        return rc < 0 ? -Libc.errno(capture) : (int) rc;
    }

    private static long retLong(MemorySegment capture, long rc) {
        return rc < 0 ? -Libc.errno(capture) : rc;
    }

    private static RdmaException failedToRun(String call, Throwable t) {
        return new RdmaException(Errno.EIO, "shm: " + call + " failed to run", t);
    }

    static int memfdCreate(MemorySegment capture, MemorySegment name, int flags) {
        try {
            return ret(capture, (int) MEMFD_CREATE.invokeExact(capture, name.address(), flags));
        } catch (Throwable t) {
            throw failedToRun("memfd_create", t);
        }
    }

    static int ftruncate(MemorySegment capture, int fd, long length) {
        try {
            return ret(capture, (int) FTRUNCATE.invokeExact(capture, fd, length));
        } catch (Throwable t) {
            throw failedToRun("ftruncate", t);
        }
    }

    static int fcntl(MemorySegment capture, int fd, int cmd, int arg) {
        try {
            return ret(capture, (int) FCNTL.invokeExact(capture, fd, cmd, arg));
        } catch (Throwable t) {
            throw failedToRun("fcntl", t);
        }
    }

    static long lseek(MemorySegment capture, int fd, long offset, int whence) {
        try {
            return retLong(capture, (long) LSEEK.invokeExact(capture, fd, offset, whence));
        } catch (Throwable t) {
            throw failedToRun("lseek", t);
        }
    }

    static int close(MemorySegment capture, int fd) {
        try {
            return ret(capture, (int) CLOSE.invokeExact(capture, fd));
        } catch (Throwable t) {
            throw failedToRun("close", t);
        }
    }

    static long mmap(MemorySegment capture, long length, int prot, int flags, int fd) {
        try {
            long a = Libc.mmap(capture, 0L, length, prot, flags, fd, 0L);
            return a == -1L ? -Libc.errno(capture) : a;
        } catch (Throwable t) {
            throw failedToRun("mmap", t);
        }
    }

    static int munmap(MemorySegment capture, long address, long length) {
        try {
            return ret(capture, Libc.munmap(capture, address, length));
        } catch (Throwable t) {
            throw failedToRun("munmap", t);
        }
    }

    static int socket(MemorySegment capture, int domain, int type, int protocol) {
        try {
            return ret(capture, (int) SOCKET.invokeExact(capture, domain, type, protocol));
        } catch (Throwable t) {
            throw failedToRun("socket", t);
        }
    }

    static int bind(MemorySegment capture, int fd, MemorySegment addr, int len) {
        try {
            return ret(capture, (int) BIND.invokeExact(capture, fd, addr.address(), len));
        } catch (Throwable t) {
            throw failedToRun("bind", t);
        }
    }

    static int listen(MemorySegment capture, int fd, int backlog) {
        try {
            return ret(capture, (int) LISTEN.invokeExact(capture, fd, backlog));
        } catch (Throwable t) {
            throw failedToRun("listen", t);
        }
    }

    static int accept4(MemorySegment capture, int fd, int flags) {
        try {
            return ret(capture, (int) ACCEPT4.invokeExact(capture, fd, 0L, 0L, flags));
        } catch (Throwable t) {
            throw failedToRun("accept4", t);
        }
    }

    static int connect(MemorySegment capture, int fd, MemorySegment addr, int len) {
        try {
            return ret(capture, (int) CONNECT.invokeExact(capture, fd, addr.address(), len));
        } catch (Throwable t) {
            throw failedToRun("connect", t);
        }
    }

    static long sendmsg(MemorySegment capture, int fd, MemorySegment msghdr, int flags) {
        try {
            return retLong(capture, (long) SENDMSG.invokeExact(capture, fd, msghdr.address(), flags));
        } catch (Throwable t) {
            throw failedToRun("sendmsg", t);
        }
    }

    static long recvmsg(MemorySegment capture, int fd, MemorySegment msghdr, int flags) {
        try {
            return retLong(capture, (long) RECVMSG.invokeExact(capture, fd, msghdr.address(), flags));
        } catch (Throwable t) {
            throw failedToRun("recvmsg", t);
        }
    }

    static int getsockopt(MemorySegment capture, int fd, int level, int name, MemorySegment value, MemorySegment length) {
        try {
            return ret(capture, (int) GETSOCKOPT.invokeExact(capture, fd, level, name, value.address(), length.address()));
        } catch (Throwable t) {
            throw failedToRun("getsockopt", t);
        }
    }

    static int poll(MemorySegment capture, MemorySegment fds, long count, int timeoutMillis) {
        try {
            return ret(capture, (int) POLL.invokeExact(capture, fds.address(), count, timeoutMillis));
        } catch (Throwable t) {
            throw failedToRun("poll", t);
        }
    }

    /** {@code process_vm_readv}: bytes copied from {@code pid}'s memory, or -errno. */
    static long processVmReadv(MemorySegment capture, int pid, long localIov, long localCount, long remoteIov,
            long remoteCount) {
        try {
            long n = (long) PVM_READV_PLAIN.invokeExact(pid, localIov, localCount, remoteIov, remoteCount, 0L);
            if (n >= 0) {
                return n;
            }
            // Again, capturing errno: a copy into this side's own buffers, in the caller's section still.
            return retLong(capture, (long) PVM_READV.invokeExact(capture, pid, localIov, localCount, remoteIov, remoteCount, 0L));
        } catch (Throwable t) {
            throw failedToRun("process_vm_readv", t);
        }
    }

    /** {@code process_vm_writev}: bytes copied into {@code pid}'s memory, or -errno. */
    static long processVmWritev(MemorySegment capture, int pid, long localIov, long localCount, long remoteIov,
            long remoteCount) {
        try {
            return retLong(capture, (long) PVM_WRITEV.invokeExact(capture, pid, localIov, localCount, remoteIov, remoteCount, 0L));
        } catch (Throwable t) {
            throw failedToRun("process_vm_writev", t);
        }
    }

    static int prctl(MemorySegment capture, int option, long arg) {
        try {
            return ret(capture, (int) PRCTL.invokeExact(capture, option, arg));
        } catch (Throwable t) {
            throw failedToRun("prctl", t);
        }
    }

    /**
     * {@code syscall(nr, a, b, c, d, e, f)} where only success matters (a futex wake): the result, or -1
     * on any failure (errno not captured, so nothing is sliced per call).
     */
    static long syscallPlain(long nr, long a, long b, long c, long d, long e, long f) {
        try {
            return (long) SYSCALL_PLAIN.invokeExact(nr, a, b, c, d, e, f);
        } catch (Throwable t) {
            throw failedToRun("syscall " + nr, t);
        }
    }

    /** {@code syscall(nr, a, b, c, d, e, f)}: the result, or -errno. */
    static long syscall(MemorySegment capture, long nr, long a, long b, long c, long d, long e, long f) {
        try {
            return retLong(capture, (long) SYSCALL.invokeExact(capture, nr, a, b, c, d, e, f));
        } catch (Throwable t) {
            throw failedToRun("syscall " + nr, t);
        }
    }
}
