package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Mman;
import io.regmem.core.internal.Resource;
import io.regmem.core.internal.Unistd;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * One io_uring instance's kernel side as the ring sees it: the file descriptor from
 * {@code io_uring_setup} (with the setup flags probed from the best down), the submission and
 * completion rings and the SQE array mapped with {@code mmap}, and the offsets the kernel reported.
 * {@link #unmap} undoes all of it.
 */
final class RingMemory {
    final int fd;
    final int setupFlags;
    final int features;
    final int sqEntries;
    final int cqEntries;
    final MemorySegment sq;
    final MemorySegment cq;
    final MemorySegment sqes;
    final long sqHeadOff;
    final long sqTailOff;
    final long sqFlagsOff;
    final int sqMask;
    final long cqHeadOff;
    final long cqTailOff;
    final long cqesOff;
    final int cqMask;
    private final long sqMapAddr;
    private final long sqMapLen;
    private final long cqMapAddr;
    private final long cqMapLen;
    private final long sqesMapAddr;
    private final long sqesMapLen;

    /**
     * Sets up a ring of {@code entries} (the completion queue twice as large), asking for
     * {@code SINGLE_ISSUER | DEFER_TASKRUN} first when {@code singleIssuer}, then
     * {@code COOP_TASKRUN}, then no extra flag, as far as the kernel refuses with {@code EINVAL}.
     *
     * @throws RdmaException as {@link IoRing.Builder#build()} documents; nothing is left open
     */
    RingMemory(Arena arena, MemorySegment capture, int entries, boolean singleIssuer) {
        MemorySegment params = arena.allocate(PARAMS_SIZE, 8);
        int[] attempts = singleIssuer
                ? new int[] {SETUP_SINGLE_ISSUER | SETUP_DEFER_TASKRUN | SETUP_TASKRUN_FLAG | SETUP_SUBMIT_ALL,
                        SETUP_COOP_TASKRUN | SETUP_TASKRUN_FLAG | SETUP_SUBMIT_ALL, 0}
                : new int[] {SETUP_COOP_TASKRUN | SETUP_TASKRUN_FLAG | SETUP_SUBMIT_ALL, 0};
        long rc = -1;
        int errno = 0;
        int flags = 0;
        for (int extra : attempts) {
            params.fill((byte) 0);
            flags = extra | SETUP_CQSIZE | SETUP_CLAMP;
            params.set(ValueLayout.JAVA_INT, PARAMS_FLAGS, flags);
            params.set(ValueLayout.JAVA_INT, PARAMS_CQ_ENTRIES, entries * 2);
            rc = Unistd.syscall(capture, SYS_IO_URING_SETUP, entries, params.address(), 0, 0, 0, 0);
            if (rc >= 0) {
                break;
            }
            errno = (int) -rc;
            if (errno != Errno.EINVAL.value()) {
                break;
            }
        }
        if (rc < 0) {
            throw setupFailure(errno, entries);
        }
        this.fd = (int) rc;
        this.setupFlags = flags;
        this.features = params.get(ValueLayout.JAVA_INT, PARAMS_FEATURES);
        this.sqEntries = params.get(ValueLayout.JAVA_INT, PARAMS_SQ_ENTRIES);
        this.cqEntries = params.get(ValueLayout.JAVA_INT, PARAMS_CQ_ENTRIES);
        long sqOff = PARAMS_SQ_OFF;
        long cqOff = PARAMS_CQ_OFF;
        long sqRingBytes = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_ARRAY) + 4L * sqEntries;
        long cqRingBytes = params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_CQES) + CQE_SIZE * cqEntries;
        boolean single = (features & FEAT_SINGLE_MMAP) != 0;
        long sqLen = single ? Math.max(sqRingBytes, cqRingBytes) : sqRingBytes;
        long sqAddr = map(capture, sqLen, OFF_SQ_RING, 0, 0, 0, 0);
        long cqAddr = sqAddr;
        long cqLen = 0;
        if (!single) {
            cqLen = cqRingBytes;
            cqAddr = map(capture, cqLen, OFF_CQ_RING, sqAddr, sqLen, 0, 0);
        }
        long sqesLen = SQE_SIZE * sqEntries;
        long sqesAddr = map(capture, sqesLen, OFF_SQES, sqAddr, sqLen, single ? 0 : cqAddr, cqLen);
        this.sqMapAddr = sqAddr;
        this.sqMapLen = sqLen;
        this.cqMapAddr = single ? 0 : cqAddr;
        this.cqMapLen = cqLen;
        this.sqesMapAddr = sqesAddr;
        this.sqesMapLen = sqesLen;
        this.sq = MemorySegment.ofAddress(sqAddr).reinterpret(sqLen);
        this.cq = MemorySegment.ofAddress(cqAddr).reinterpret(single ? sqLen : cqLen);
        this.sqes = MemorySegment.ofAddress(sqesAddr).reinterpret(sqesLen);
        this.sqHeadOff = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_HEAD);
        this.sqTailOff = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_TAIL);
        this.sqFlagsOff = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_FLAGS);
        this.sqMask = sq.get(ValueLayout.JAVA_INT, params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_RING_MASK));
        this.cqHeadOff = params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_HEAD);
        this.cqTailOff = params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_TAIL);
        this.cqesOff = params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_CQES);
        this.cqMask = cq.get(ValueLayout.JAVA_INT, params.get(ValueLayout.JAVA_INT, cqOff + CQ_OFF_RING_MASK));
        // the SQ array maps ring positions to SQE indexes: identity, written once
        long array = params.get(ValueLayout.JAVA_INT, sqOff + SQ_OFF_ARRAY);
        for (int i = 0; i < sqEntries; i++) {
            sq.set(ValueLayout.JAVA_INT, array + 4L * i, i);
        }
    }

    /** Maps one region of the ring; on failure unmaps what was mapped, closes the fd and throws. */
    private long map(MemorySegment capture, long length, long offset, long undo1, long undo1Len, long undo2, long undo2Len) {
        long a = Mman.mmap(capture, 0L, length, Mman.PROT_READ | Mman.PROT_WRITE, Mman.MAP_SHARED | Mman.MAP_POPULATE, fd, offset);
        if (a < 0) {
            int errno = (int) -a;
            if (undo1 != 0) {
                Mman.munmap(capture, undo1, undo1Len);
            }
            if (undo2 != 0) {
                Mman.munmap(capture, undo2, undo2Len);
            }
            Unistd.close(capture, fd);
            throw new RdmaException(Errno.of(errno), "IoRing: mmap of the ring (" + length + " bytes at offset 0x"
                    + Long.toHexString(offset) + ") failed with errno " + errno);
        }
        return a;
    }

    /** Unmaps the rings and closes the ring's file descriptor. */
    void unmap(MemorySegment capture) {
        Mman.munmap(capture, sqesMapAddr, sqesMapLen);
        if (cqMapAddr != 0) {
            Mman.munmap(capture, cqMapAddr, cqMapLen);
        }
        Mman.munmap(capture, sqMapAddr, sqMapLen);
        Unistd.close(capture, fd);
    }

    /** The setup flags by name ({@code "SINGLE_ISSUER|DEFER_TASKRUN|..."}). */
    String flagNames() {
        StringBuilder s = new StringBuilder();
        String[] names = {"SINGLE_ISSUER", "DEFER_TASKRUN", "COOP_TASKRUN", "TASKRUN_FLAG", "SUBMIT_ALL", "CQSIZE"};
        int[] bits = {SETUP_SINGLE_ISSUER, SETUP_DEFER_TASKRUN, SETUP_COOP_TASKRUN, SETUP_TASKRUN_FLAG, SETUP_SUBMIT_ALL,
                SETUP_CQSIZE};
        for (int i = 0; i < bits.length; i++) {
            if ((setupFlags & bits[i]) != 0) {
                s.append(s.isEmpty() ? "" : "|").append(names[i]);
            }
        }
        return s.toString();
    }

    static RdmaException setupFailure(int errno, int entries) {
        if (errno == Errno.ENOSYS.value()) {
            return new RdmaException(Errno.ENOSYS, "io_uring is not available: io_uring_setup failed with ENOSYS"
                    + " (kernel without io_uring, kernel.io_uring_disabled=2, or a seccomp filter such as Docker's default)");
        }
        if (errno == Errno.EPERM.value()) {
            return new RdmaException(Errno.EPERM, "io_uring is not permitted here: io_uring_setup failed with EPERM"
                    + " (kernel.io_uring_disabled=1 without the io_uring group, or a seccomp filter)");
        }
        if (errno == Errno.ENOMEM.value()) {
            return memlock("io_uring_setup of " + entries + " entries", -1);
        }
        return new RdmaException(Errno.of(errno), "IoRing: io_uring_setup(" + entries + ") failed with errno " + errno);
    }

    static RdmaException memlock(String what, long bytes) {
        long limit = Resource.softLimit(Resource.RLIMIT_MEMLOCK);
        return new RdmaException(Errno.ENOMEM, "IoRing: " + what + " failed with ENOMEM: the locked-memory limit "
                + "RLIMIT_MEMLOCK is " + describeLimit(limit)
                + (bytes >= 0 ? " and this asked to pin " + bytes + " bytes more" : "")
                + " (pinned pages are charged per ring, and released asynchronously after a ring closes);"
                + " raise it (ulimit -l, LimitMEMLOCK=, docker --ulimit memlock=) or grant CAP_IPC_LOCK");
    }

    /** A memlock limit for messages: "64 KiB", "unlimited" or "unknown". */
    static String describeLimit(long limit) {
        if (limit == Resource.RLIM_INFINITY) {
            return "unlimited";
        }
        if (limit < 0) {
            return "unknown";
        }
        return limit % 1024 == 0 ? (limit / 1024) + " KiB" : limit + " bytes";
    }

    /** Registers an empty (sparse) table of {@code n} slots: fixed buffers or files. */
    void registerSparse(MemorySegment capture, MemorySegment scratch, int opcode, int n, String what, Object ring) {
        MemorySegment r = scratch;
        r.fill((byte) 0);
        r.set(ValueLayout.JAVA_INT, RSRC_REGISTER_NR, n);
        r.set(ValueLayout.JAVA_INT, RSRC_REGISTER_FLAGS, RSRC_REGISTER_SPARSE);
        long rc = Unistd.syscall(capture, SYS_IO_URING_REGISTER, fd, opcode, r.address(), RSRC_REGISTER_SIZE, 0, 0);
        if (rc < 0) {
            int errno = (int) -rc;
            if (errno == Errno.ENOMEM.value()) {
                throw RingMemory.memlock("registering a sparse " + what + " of " + n + " slots", -1);
            }
            throw new RdmaException(Errno.of(errno), ring + ": registering a sparse " + what + " of " + n
                    + " slots failed with errno " + errno);
        }
    }
}
