package io.regmem.registration.shm;

import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Poll;
import io.regmem.core.internal.Prctl;
import io.regmem.core.internal.Sysctl;
import io.regmem.core.internal.Uio;
import io.regmem.core.internal.Unistd;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The peer process of a same-host connection, as the kernel knows it: the pid the lane's socket
 * reports in this process's pid namespace, and a pidfd taken from the socket ({@code SO_PEERPIDFD},
 * race-free) or, on kernels before 6.5, from {@code pidfd_open} of that pid, checked against the
 * start time the peer claimed in its authenticated handshake (so that a pid reused by another process
 * is refused); and what this host allows between the two (Yama's {@code ptrace_scope}, a probe copy),
 * and which network namespace this process is in (an abstract socket is reachable only inside it).
 */
final class PeerProcess implements AutoCloseable {
    /**
     * How long a check that found the process running answers for it on the copy paths
     * ({@link #recentlyAlive}): its pid cannot name another process sooner unless the process exited, was
     * reaped and its pid was handed out again within this time.
     */
    static final long RECHECK_NANOS = 1_000_000;
    final int pid;
    private final int pidfd;
    private volatile boolean closed;
    /** When the last check that found the process running began ({@link System#nanoTime}). */
    private volatile long seenAliveAt;
    private final MemorySegment capture;
    private final MemorySegment pfd;

    private PeerProcess(int pid, int pidfd) {
        this.pid = pid;
        this.pidfd = pidfd;
        Arena a = Arena.ofAuto();
        this.capture = a.allocate(Libc.CAPTURE);
        this.pfd = a.allocate(8, 4);
        this.seenAliveAt = System.nanoTime() - 2 * RECHECK_NANOS;
    }

    /**
     * The peer of the connected socket {@code sock}, as the kernel says: its pid in this process's pid
     * namespace ({@code SO_PEERCRED}) and a pidfd of it ({@code SO_PEERPIDFD}; before Linux 6.5,
     * {@code pidfd_open} of that pid, which must then have started at {@code claimedStart}, the
     * start time the peer gave in its authenticated handshake, so that a reused pid is refused). A
     * pid number the peer sent is never taken: in another pid namespace it names another process.
     *
     * @throws IOException if the peer is not visible from this process's pid namespace, or is gone
     */
    static PeerProcess of(int sock, long claimedStart) throws IOException {
        int pid = UnixSocket.peerPid(sock);
        if (pid <= 0) {
            throw new IOException("the peer process is not visible from this process's pid namespace (another container?)");
        }
        int fd = UnixSocket.peerPidfd(sock);
        if (fd < 0) {
            return open(pid, claimedStart);
        }
        PeerProcess p = new PeerProcess(pid, fd);
        if (!p.alive()) {
            p.close();
            throw new IOException("process " + pid + " exited");
        }
        return p;
    }

    /**
     * The process {@code pid} through {@code pidfd_open}, which must have started at {@code claimedStart}
     * (else the pid was reused by another process).
     *
     * @throws IOException if it is gone or is another process
     */
    static PeerProcess open(int pid, long claimedStart) throws IOException {
        int fd;
        try (Arena a = Arena.ofConfined()) {
            fd = (int) Unistd.syscall(a.allocate(Libc.CAPTURE), Unistd.SYS_PIDFD_OPEN, pid, 0, 0, 0, 0, 0);
        }
        if (fd < 0) {
            throw new IOException("pidfd_open(" + pid + ") failed with errno " + -fd);
        }
        return checked(new PeerProcess(pid, fd), claimedStart);
    }

    private static PeerProcess checked(PeerProcess p, long claimedStart) throws IOException {
        // Taken after the pidfd: if the start time still matches, the pidfd is the claimed process's.
        long start = startTime(p.pid);
        if (start != claimedStart || !p.alive()) {
            p.close();
            throw new IOException("process " + p.pid + " is not the one that connected (started at " + start + ", the "
                    + "handshake named " + claimedStart + ")");
        }
        return p;
    }

    /**
     * True while the process runs (or is stopped): its pidfd is not yet readable. A signal that ends
     * the check early (poll(2) gives EINTR whatever SA_RESTART says: a profiler's, the JVM's own) is
     * no exit: the check is made again; if it cannot be made, the process counts as running.
     */
    synchronized boolean alive() {
        if (closed) {
            return false;
        }
        long began = System.nanoTime();
        for (int tries = 0; tries < 100; tries++) {
            pfd.set(JAVA_INT, 0, pidfd);
            pfd.set(JAVA_SHORT, 4, (short) Poll.POLLIN);
            pfd.set(JAVA_SHORT, 6, (short) 0);
            int n = Poll.poll(capture, pfd, 1, 0);
            if (n != -Libc.EINTR) {
                if (n > 0) {
                    return false; // (readable: exited; another failure tells nothing of the process)
                }
                seenAliveAt = began;
                return true;
            }
        }
        return true;
    }

    /**
     * {@link #alive()}, answered without a system call while a check that found the process running
     * began less than {@link #RECHECK_NANOS} ago: what the copy paths ask before each copy out of the
     * process by its pid (a check each time cost a system call per message, as much as the copy of a
     * few KiB). Allocates nothing.
     */
    boolean recentlyAlive() {
        if (!closed && System.nanoTime() - seenAliveAt < RECHECK_NANOS) {
            return true;
        }
        return alive();
    }

    /**
     * Waits up to {@code millis} for the process to exit (signals that interrupt the wait do not end it).
     *
     * @return true if it has exited
     */
    boolean awaitExit(int millis) {
        if (closed) {
            return true;
        }
        long deadline = System.nanoTime() + millis * 1_000_000L;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            MemorySegment pfd = a.allocate(8, 4);
            while (true) {
                pfd.set(JAVA_INT, 0, pidfd);
                pfd.set(JAVA_SHORT, 4, (short) Poll.POLLIN);
                pfd.set(JAVA_SHORT, 6, (short) 0);
                long left = Math.max(0, (deadline - System.nanoTime() + 999_999L) / 1_000_000L);
                int n = Poll.poll(capture, pfd, 1, (int) left);
                if (n != -Libc.EINTR || left == 0) {
                    return n > 0;
                }
            }
        }
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            SharedFile.close(pidfd);
        }
    }

    // ---- this host ----

    /** This process's id. */
    static int self() {
        return (int) ProcessHandle.current().pid();
    }

    /**
     * A process's start time in clock ticks since boot ({@code /proc/PID/stat} field 22), or -1 if it
     * is gone.
     */
    static long startTime(int pid) {
        try {
            String stat = Files.readString(Path.of("/proc/" + pid + "/stat"), StandardCharsets.US_ASCII);
            // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(f[19]); // field 22 is the 20th after the name
        } catch (IOException | RuntimeException gone) {
            return -1;
        }
    }

    /**
     * This process's network namespace ({@code /proc/self/ns/net}'s inode), or 0 if it cannot be read:
     * two processes with the same one reach each other's abstract sockets.
     */
    static long netns() {
        try {
            String link = Files.readSymbolicLink(Path.of("/proc/self/ns/net")).toString(); // net:[4026531840]
            return Long.parseLong(link.substring(link.indexOf('[') + 1, link.indexOf(']')));
        } catch (IOException | RuntimeException e) {
            return 0;
        }
    }

    /** This boot's id ({@code /proc/sys/kernel/random/boot_id}): two processes with the same one share a host. */
    static String bootId() {
        try {
            return Sysctl.read("kernel/random/boot_id");
        } catch (IOException e) {
            return "";
        }
    }

    /** Yama's {@code ptrace_scope} (0 to 3), or -1 where Yama is not in the kernel. */
    static int ptraceScope() {
        try {
            return Sysctl.readInt("kernel/yama/ptrace_scope");
        } catch (IOException e) { // (NoSuchFileException: no Yama in this kernel)
            return -1;
        }
    }

    /**
     * Lets {@code pid}, and no other process, copy from this one under Yama's scope 1
     * ({@code PR_SET_PTRACER}; one tracer at a time, the last one named).
     *
     * @return 0, or -errno (-EINVAL where Yama is absent)
     */
    static int allowTracer(int pid) {
        try (Arena a = Arena.ofConfined()) {
            return Prctl.prctl(a.allocate(Libc.CAPTURE), Prctl.PR_SET_PTRACER, pid);
        }
    }

    /**
     * Copies 8 bytes at {@code address} in {@code pid}'s memory with {@code process_vm_readv}: whether
     * this host lets this process copy out of that one.
     *
     * @return the 8 bytes as a long in {@code out[0]}; 0, or -errno (-EPERM: not allowed)
     */
    static int probe(int pid, long address, long[] out) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment local = a.allocate(8, 8);
            MemorySegment iov = a.allocate(32, 8);
            iov.set(JAVA_LONG, 0, local.address());
            iov.set(JAVA_LONG, 8, 8);
            iov.set(JAVA_LONG, 16, address);
            iov.set(JAVA_LONG, 24, 8);
            long n = Uio.processVmReadv(a.allocate(Libc.CAPTURE), pid, iov.address(), 1, iov.address() + 16, 1);
            if (n != 8) {
                return n < 0 ? (int) n : -Libc.EFAULT;
            }
            out[0] = local.get(JAVA_LONG, 0);
            return 0;
        }
    }
}
