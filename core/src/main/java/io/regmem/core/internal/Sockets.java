package io.regmem.core.internal;

import static io.regmem.core.internal.Libc.I;
import static io.regmem.core.internal.Libc.L;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * {@code <sys/socket.h>}: the Unix domain socket calls (a lane's memfd passed by {@code SCM_RIGHTS},
 * the peer's credentials). Each call returns its result, or {@code -errno} ({@link Libc}).
 */
public final class Sockets {
    public static final int AF_UNIX = 1;
    public static final int SOCK_STREAM = 1;
    public static final int SOCK_CLOEXEC = 0x80000;
    public static final int SOCK_NONBLOCK = 0x800;
    public static final int SOL_SOCKET = 1;
    public static final int SCM_RIGHTS = 1;
    public static final int SO_PEERCRED = 17;
    public static final int SO_PEERPIDFD = 77;
    public static final int MSG_CTRUNC = 0x8;
    public static final int MSG_NOSIGNAL = 0x4000;
    public static final int MSG_CMSG_CLOEXEC = 0x40000000;

    private static final FunctionDescriptor ADDR = FunctionDescriptor.of(I, I, L, I);
    private static final FunctionDescriptor MSG = FunctionDescriptor.of(L, I, L, I);
    private static final MethodHandle SOCKET = Libc.capturing("socket", FunctionDescriptor.of(I, I, I, I));
    private static final MethodHandle BIND = Libc.capturing("bind", ADDR);
    private static final MethodHandle LISTEN = Libc.capturing("listen", FunctionDescriptor.of(I, I, I));
    private static final MethodHandle ACCEPT4 = Libc.capturing("accept4", FunctionDescriptor.of(I, I, L, L, I));
    private static final MethodHandle CONNECT = Libc.capturing("connect", ADDR);
    private static final MethodHandle SENDMSG = Libc.capturing("sendmsg", MSG);
    private static final MethodHandle RECVMSG = Libc.capturing("recvmsg", MSG);
    private static final MethodHandle GETSOCKOPT = Libc.capturing("getsockopt", FunctionDescriptor.of(I, I, I, I, L, L));

    private Sockets() {
    }

    /** {@code socket(domain, type, protocol)}: the fd, or -errno. */
    public static int socket(MemorySegment capture, int domain, int type, int protocol) {
        try {
            return Libc.ret(capture, (int) SOCKET.invokeExact(capture, domain, type, protocol));
        } catch (Throwable t) {
            throw Libc.failedToRun("socket", t);
        }
    }

    /** {@code bind(fd, addr, len)}: 0, or -errno. */
    public static int bind(MemorySegment capture, int fd, MemorySegment addr, int len) {
        try {
            return Libc.ret(capture, (int) BIND.invokeExact(capture, fd, addr.address(), len));
        } catch (Throwable t) {
            throw Libc.failedToRun("bind", t);
        }
    }

    /** {@code listen(fd, backlog)}: 0, or -errno. */
    public static int listen(MemorySegment capture, int fd, int backlog) {
        try {
            return Libc.ret(capture, (int) LISTEN.invokeExact(capture, fd, backlog));
        } catch (Throwable t) {
            throw Libc.failedToRun("listen", t);
        }
    }

    /** {@code accept4(fd, NULL, NULL, flags)}: the accepted fd, or -errno. */
    public static int accept4(MemorySegment capture, int fd, int flags) {
        try {
            return Libc.ret(capture, (int) ACCEPT4.invokeExact(capture, fd, 0L, 0L, flags));
        } catch (Throwable t) {
            throw Libc.failedToRun("accept4", t);
        }
    }

    /** {@code connect(fd, addr, len)}: 0, or -errno. */
    public static int connect(MemorySegment capture, int fd, MemorySegment addr, int len) {
        try {
            return Libc.ret(capture, (int) CONNECT.invokeExact(capture, fd, addr.address(), len));
        } catch (Throwable t) {
            throw Libc.failedToRun("connect", t);
        }
    }

    /** {@code sendmsg(fd, msghdr, flags)}: the bytes sent, or -errno. */
    public static long sendmsg(MemorySegment capture, int fd, MemorySegment msghdr, int flags) {
        try {
            return Libc.retLong(capture, (long) SENDMSG.invokeExact(capture, fd, msghdr.address(), flags));
        } catch (Throwable t) {
            throw Libc.failedToRun("sendmsg", t);
        }
    }

    /** {@code recvmsg(fd, msghdr, flags)}: the bytes received (0 at the peer's end), or -errno. */
    public static long recvmsg(MemorySegment capture, int fd, MemorySegment msghdr, int flags) {
        try {
            return Libc.retLong(capture, (long) RECVMSG.invokeExact(capture, fd, msghdr.address(), flags));
        } catch (Throwable t) {
            throw Libc.failedToRun("recvmsg", t);
        }
    }

    /** {@code getsockopt(fd, level, name, value, length)}: 0, or -errno. */
    public static int getsockopt(MemorySegment capture, int fd, int level, int name, MemorySegment value, MemorySegment length) {
        try {
            return Libc.ret(capture, (int) GETSOCKOPT.invokeExact(capture, fd, level, name, value.address(), length.address()));
        } catch (Throwable t) {
            throw Libc.failedToRun("getsockopt", t);
        }
    }
}
