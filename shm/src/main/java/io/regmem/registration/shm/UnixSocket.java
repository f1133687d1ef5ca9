package io.regmem.registration.shm;

import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Poll;
import io.regmem.core.internal.Sockets;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.function.BooleanSupplier;

/**
 * Unix domain stream sockets in the abstract namespace (no file left behind), used only to hand a
 * connection's memfd to its peer ({@code SCM_RIGHTS}) and to learn who the peer is from the kernel
 * ({@code SO_PEERCRED}, {@code SO_PEERPIDFD}), never on the data path. Every wait has a deadline;
 * calls block the calling thread (they are made by connection setup, never by a poll).
 */
final class UnixSocket {
    /** {@code struct sockaddr_un}: family u16, then the path (abstract: a 0 byte, then the name). */
    private static final int SUN_PATH = 108;
    /** {@code struct msghdr} on x86-64 and aarch64: 56 bytes. */
    private static final int MSGHDR = 56;
    /** {@code CMSG_SPACE(sizeof(int))}. */
    private static final int CMSG_SPACE_INT = 24;
    /** {@code CMSG_LEN(sizeof(int))}. */
    private static final int CMSG_LEN_INT = 20;

    private UnixSocket() {
    }

    /** The address of the abstract name {@code name}, and its length, in {@code a}. */
    private static MemorySegment address(Arena a, String name) {
        byte[] n = name.getBytes(StandardCharsets.US_ASCII);
        if (n.length + 1 > SUN_PATH) {
            throw new IllegalArgumentException("abstract socket name too long: " + name);
        }
        MemorySegment s = a.allocate(2 + 1 + n.length, 8);
        s.set(JAVA_SHORT, 0, (short) Sockets.AF_UNIX);
        s.set(JAVA_BYTE, 2, (byte) 0);
        MemorySegment.copy(n, 0, s, JAVA_BYTE, 3, n.length);
        return s;
    }

    /** A new Unix stream socket (close-on-exec). */
    private static int newSocket(MemorySegment capture) throws IOException {
        int fd = Sockets.socket(capture, Sockets.AF_UNIX, Sockets.SOCK_STREAM | Sockets.SOCK_CLOEXEC, 0);
        if (fd < 0) {
            throw new IOException("socket(AF_UNIX) failed with errno " + -fd);
        }
        return fd;
    }

    /**
     * A listening socket under the abstract name {@code name}.
     *
     * @return its descriptor
     * @throws IOException if the name is taken or the socket cannot be made
     */
    static int listen(String name) throws IOException {
        return listen(name, 4);
    }

    /** As {@link #listen(String)}, with a backlog of {@code backlog} connections. */
    static int listen(String name, int backlog) throws IOException {
        Libc.requireBound("shm");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            int fd = newSocket(capture);
            MemorySegment addr = address(a, name);
            int rc = Sockets.bind(capture, fd, addr, (int) addr.byteSize());
            if (rc == 0) {
                rc = Sockets.listen(capture, fd, backlog);
            }
            if (rc < 0) {
                SharedFile.close(fd);
                throw new IOException("binding the abstract socket @" + name + " failed with errno " + -rc);
            }
            return fd;
        }
    }

    /**
     * Waits until {@code fd} is readable (a connection to accept, bytes to read, or its end) or the
     * deadline passes.
     *
     * @return true if readable, false at the deadline
     */
    static boolean awaitReadable(int fd, long deadlineNanos) throws IOException {
        return awaitReadable(fd, deadlineNanos, () -> false);
    }

    /** True if {@code fd} is readable now (bytes, or its end: the peer closed it); never waits. */
    static boolean readableNow(int fd) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment pfd = a.allocate(8, 4);
            pfd.set(JAVA_INT, 0, fd);
            pfd.set(JAVA_SHORT, 4, (short) Poll.POLLIN);
            int n = Poll.poll(a.allocate(Libc.CAPTURE), pfd, 1, 0);
            if (n < 0 && n != -Libc.EINTR) {
                throw new IOException("poll failed with errno " + -n);
            }
            return n > 0;
        }
    }

    /**
     * As {@link #awaitReadable(int, long)}, giving up as soon as {@code gone} says the peer is gone
     * (asked every 20 ms).
     *
     * @return true if readable, false at the deadline or once the peer is gone
     */
    static boolean awaitReadable(int fd, long deadlineNanos, BooleanSupplier gone) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            MemorySegment pfd = a.allocate(8, 4);
            while (true) {
                long left = (deadlineNanos - System.nanoTime()) / 1_000_000L;
                if (left <= 0) {
                    return false;
                }
                pfd.set(JAVA_INT, 0, fd);
                pfd.set(JAVA_SHORT, 4, (short) Poll.POLLIN);
                pfd.set(JAVA_SHORT, 6, (short) 0);
                int n = Poll.poll(capture, pfd, 1, (int) Math.min(left, 20));
                if (n > 0) {
                    return true;
                }
                if (n == 0 && gone.getAsBoolean()) {
                    return false;
                }
                if (n < 0 && n != -Libc.EINTR) {
                    throw new IOException("poll failed with errno " + -n);
                }
            }
        }
    }

    /**
     * Accepts one connection on the listening socket {@code fd} by {@code deadlineNanos}, unless
     * {@code gone} says first that the peer is gone.
     *
     * @return the connected socket's descriptor
     * @throws IOException if none came in time, or the peer is gone
     */
    static int accept(int fd, long deadlineNanos, BooleanSupplier gone) throws IOException {
        if (!awaitReadable(fd, deadlineNanos, gone)) {
            throw new IOException(gone.getAsBoolean() ? "the peer closed its connection before it took the lane"
                    : "the peer did not connect to the lane's socket in time");
        }
        try (Arena a = Arena.ofConfined()) {
            int c = Sockets.accept4(a.allocate(Libc.CAPTURE), fd, Sockets.SOCK_CLOEXEC);
            if (c < 0) {
                throw new IOException("accept4 failed with errno " + -c);
            }
            return c;
        }
    }

    /**
     * Connects to the abstract name {@code name}.
     *
     * @return the connected socket's descriptor
     * @throws IOException if nobody listens there
     */
    static int connect(String name) throws IOException {
        return connect(name, 0);
    }

    /**
     * Connects to the abstract name {@code name} without waiting: a listener whose backlog is full (a
     * process that stopped taking connections) is an {@link IOException}, not a wait. The socket stays
     * non-blocking (its reads wait in {@link #receive}).
     */
    static int connectNow(String name) throws IOException {
        return connect(name, Sockets.SOCK_NONBLOCK);
    }

    private static int connect(String name, int flags) throws IOException {
        Libc.requireBound("shm");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            int fd = Sockets.socket(capture, Sockets.AF_UNIX, Sockets.SOCK_STREAM | Sockets.SOCK_CLOEXEC | flags, 0);
            if (fd < 0) {
                throw new IOException("socket(AF_UNIX) failed with errno " + -fd);
            }
            MemorySegment addr = address(a, name);
            int rc = Sockets.connect(capture, fd, addr, (int) addr.byteSize());
            if (rc < 0) {
                SharedFile.close(fd);
                throw new IOException("connecting to the abstract socket @" + name + " failed with errno " + -rc);
            }
            return fd;
        }
    }

    /**
     * Sends {@code data} and, if {@code passFd} is not negative, that descriptor with it
     * ({@code SCM_RIGHTS}), in one message.
     */
    static void send(int sock, byte[] data, int passFd) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            MemorySegment buf = a.allocate(Math.max(1, data.length));
            MemorySegment.copy(data, 0, buf, JAVA_BYTE, 0, data.length);
            MemorySegment iov = a.allocate(16, 8);
            iov.set(JAVA_LONG, 0, buf.address());
            iov.set(JAVA_LONG, 8, data.length);
            MemorySegment msg = a.allocate(MSGHDR, 8);
            msg.set(JAVA_LONG, 16, iov.address());
            msg.set(JAVA_LONG, 24, 1);
            if (passFd >= 0) {
                MemorySegment cmsg = a.allocate(CMSG_SPACE_INT, 8);
                cmsg.set(JAVA_LONG, 0, CMSG_LEN_INT);
                cmsg.set(JAVA_INT, 8, Sockets.SOL_SOCKET);
                cmsg.set(JAVA_INT, 12, Sockets.SCM_RIGHTS);
                cmsg.set(JAVA_INT, 16, passFd);
                msg.set(JAVA_LONG, 32, cmsg.address());
                msg.set(JAVA_LONG, 40, CMSG_SPACE_INT);
            }
            long n = Sockets.sendmsg(capture, sock, msg, Sockets.MSG_NOSIGNAL);
            if (n != data.length) {
                throw new IOException(n < 0 ? "sendmsg failed with errno " + -n : "sendmsg sent " + n + " of " + data.length
                        + " bytes");
            }
        }
    }

    /** What {@link #receive} read: the bytes, and the descriptor that came with them or -1. */
    record Received(byte[] data, int fd) {
    }

    /**
     * Reads one message of exactly {@code length} bytes, and the descriptor that came with it, by the
     * deadline. A descriptor that came with a message that is refused is closed.
     *
     * @throws IOException if it did not come whole in time, or its control data was cut
     */
    static Received receive(int sock, int length, long deadlineNanos) throws IOException {
        if (!awaitReadable(sock, deadlineNanos)) {
            throw new IOException("the peer sent nothing on the lane's socket in time");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            MemorySegment buf = a.allocate(Math.max(1, length));
            MemorySegment iov = a.allocate(16, 8);
            iov.set(JAVA_LONG, 0, buf.address());
            iov.set(JAVA_LONG, 8, length);
            MemorySegment cmsg = a.allocate(CMSG_SPACE_INT * 4L, 8); // room for more than one: extras are closed
            MemorySegment msg = a.allocate(MSGHDR, 8);
            msg.set(JAVA_LONG, 16, iov.address());
            msg.set(JAVA_LONG, 24, 1);
            msg.set(JAVA_LONG, 32, cmsg.address());
            msg.set(JAVA_LONG, 40, cmsg.byteSize());
            long n = Sockets.recvmsg(capture, sock, msg, Sockets.MSG_CMSG_CLOEXEC);
            int fd = -1;
            long controlLength = msg.get(JAVA_LONG, 40);
            // Every descriptor that came is taken (then closed unless it is the one): a peer cannot leak ours.
            for (long off = 0; off + 16 <= controlLength; ) {
                long len = cmsg.get(JAVA_LONG, off);
                if (len < 16 || off + len > controlLength) {
                    break;
                }
                if (cmsg.get(JAVA_INT, off + 8) == Sockets.SOL_SOCKET && cmsg.get(JAVA_INT, off + 12) == Sockets.SCM_RIGHTS) {
                    for (long p = off + 16; p + 4 <= off + len; p += 4) {
                        int got = cmsg.get(JAVA_INT, p);
                        if (fd < 0) {
                            fd = got;
                        } else {
                            SharedFile.close(got);
                        }
                    }
                }
                off += (len + 7) & ~7L;
            }
            if (n == 0) {
                SharedFile.close(fd);
                throw new EOFException("the peer closed the socket before it sent a message");
            }
            if (n != length || (msg.get(JAVA_INT, 48) & Sockets.MSG_CTRUNC) != 0) {
                SharedFile.close(fd);
                throw new IOException(n < 0 ? "recvmsg failed with errno " + -n
                        : (msg.get(JAVA_INT, 48) & Sockets.MSG_CTRUNC) != 0 ? "the lane message's control data was cut"
                        : "the lane message had " + n + " bytes, not " + length);
            }
            return new Received(buf.toArray(JAVA_BYTE), fd);
        }
    }

    /** The process id of the peer of a connected socket ({@code SO_PEERCRED}: who connected, or listened). */
    static int peerPid(int sock) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cred = a.allocate(12, 4);
            MemorySegment len = a.allocate(JAVA_INT);
            len.set(JAVA_INT, 0, 12);
            int rc = Sockets.getsockopt(a.allocate(Libc.CAPTURE), sock, Sockets.SOL_SOCKET, Sockets.SO_PEERCRED, cred, len);
            if (rc < 0) {
                throw new IOException("SO_PEERCRED failed with errno " + -rc);
            }
            return cred.get(JAVA_INT, 0);
        }
    }

    /**
     * A pidfd of the peer of a connected socket from the kernel ({@code SO_PEERPIDFD}, Linux 6.5 and
     * later): race-free against pid reuse.
     *
     * @return the pidfd, or -errno ({@code -ENOPROTOOPT} on older kernels)
     */
    static int peerPidfd(int sock) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            MemorySegment len = a.allocate(JAVA_INT);
            len.set(JAVA_INT, 0, 4);
            int rc = Sockets.getsockopt(a.allocate(Libc.CAPTURE), sock, Sockets.SOL_SOCKET, Sockets.SO_PEERPIDFD, v, len);
            return rc < 0 ? rc : v.get(JAVA_INT, 0);
        }
    }
}
