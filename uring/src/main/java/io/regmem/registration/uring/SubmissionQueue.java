package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Unistd;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * A ring's submission queue, as the kernel shares it: the entries (SQEs), the tail this side
 * advances and publishes, the head the kernel advances, the flags it raises; and
 * {@code io_uring_enter}. Owner thread only, as the ring; allocates nothing (the enter goes without
 * errno capture, whose segment the JDK slices per call, and is made again with it only when it
 * failed: a failed enter consumed nothing, so the second is simply the retry it would get anyway).
 */
final class SubmissionQueue {
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    private final IoRing ring;
    private final int fd;
    private final MemorySegment capture;
    private final boolean taskrunFlag;
    private final boolean deferTaskrun;
    private final MemorySegment sq;
    private final MemorySegment sqes;
    private final long headOff;
    private final long tailOff;
    private final long flagsOff;
    private final int mask;
    final int entries;
    private int tail;
    /** Entries written and not yet consumed by the kernel. */
    int prepared;
    /** Entries the kernel consumed since the ring was built. */
    long submitted;

    SubmissionQueue(IoRing ring, RingMemory mem, MemorySegment capture) {
        this.ring = ring;
        this.fd = mem.fd;
        this.capture = capture;
        this.taskrunFlag = (mem.setupFlags & SETUP_TASKRUN_FLAG) != 0;
        this.deferTaskrun = (mem.setupFlags & SETUP_DEFER_TASKRUN) != 0;
        this.sq = mem.sq;
        this.sqes = mem.sqes;
        this.headOff = mem.sqHeadOff;
        this.tailOff = mem.sqTailOff;
        this.flagsOff = mem.sqFlagsOff;
        this.mask = mem.sqMask;
        this.entries = mem.sqEntries;
        this.tail = (int) INT.getAcquire(sq, tailOff);
    }

    /** True if every entry is written and not yet taken by the kernel. */
    boolean full() {
        int head = (int) INT.getAcquire(sq, headOff);
        return tail - head >= entries;
    }

    /** The offset of the next entry (the caller checked {@link #full()}). */
    long next() {
        return (long) (tail & mask) * SQE_SIZE;
    }

    /** Writes the entry at {@code o}; {@link #commit()} then makes it prepared. */
    void write(long o, byte op, byte flags, int fileRef, long off, long addr, int len, int rwFlags, long userData, int bufIndex) {
        MemorySegment q = sqes;
        q.set(ValueLayout.JAVA_LONG, o, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 40, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 48, 0L);
        q.set(ValueLayout.JAVA_LONG, o + 56, 0L);
        q.set(ValueLayout.JAVA_BYTE, o + SQE_OPCODE, op);
        q.set(ValueLayout.JAVA_BYTE, o + SQE_FLAGS, flags);
        q.set(ValueLayout.JAVA_INT, o + SQE_FD, fileRef);
        q.set(ValueLayout.JAVA_LONG, o + SQE_OFF, off);
        q.set(ValueLayout.JAVA_LONG, o + SQE_ADDR, addr);
        q.set(ValueLayout.JAVA_INT, o + SQE_LEN, len);
        q.set(ValueLayout.JAVA_INT, o + SQE_RW_FLAGS, rwFlags);
        q.set(ValueLayout.JAVA_LONG, o + SQE_USER_DATA, userData);
        q.set(ValueLayout.JAVA_SHORT, o + SQE_BUF_INDEX, (short) bufIndex);
    }

    /** The entry just written is prepared. */
    void commit() {
        prepared++;
        tail++;
    }

    /** Makes every prepared entry visible to the kernel (before {@code io_uring_enter}). */
    void publish() {
        INT.setRelease(sq, tailOff, tail);
    }

    /** The kernel's flags ({@code IORING_SQ_TASKRUN}, {@code IORING_SQ_CQ_OVERFLOW}). */
    int kernelFlags() {
        return (int) INT.getAcquire(sq, flagsOff);
    }

    /** Takes back the last prepared entry (never submitted: still this side's); returns its user data. */
    long unprepare() {
        tail--;
        prepared--;
        return sqes.get(ValueLayout.JAVA_LONG, (long) (tail & mask) * SQE_SIZE + SQE_USER_DATA);
    }

    /** True if the kernel has completion work for the ring to run (or cannot say). */
    boolean kernelHasWork() {
        return !taskrunFlag || (kernelFlags() & (SQ_TASKRUN | SQ_CQ_OVERFLOW)) != 0;
    }

    /** Publishes the prepared entries and enters the kernel; returns the entries it consumed. */
    int enter(int minComplete, int flags) {
        int toSubmit = prepared;
        if (toSubmit > 0) {
            publish();
        } else if (minComplete == 0 && flags == 0) {
            return 0;
        }
        // On a DEFER_TASKRUN ring completion work runs only inside GETEVENTS: a submit asks for it
        // too (waiting for nothing), so finished I/Os are posted in the same system call.
        int f = deferTaskrun ? flags | ENTER_GETEVENTS : flags;
        while (true) {
            long rc = Unistd.syscallPlain(SYS_IO_URING_ENTER, fd, toSubmit, minComplete, f, 0, 0);
            if (rc < 0) {
                rc = Unistd.syscall(capture, SYS_IO_URING_ENTER, fd, toSubmit, minComplete, f, 0, 0);
            }
            if (rc >= 0) {
                int n = (int) rc;
                prepared -= n;
                submitted += n;
                return n;
            }
            int errno = (int) -rc;
            if (errno == Libc.EINTR) {
                continue;
            }
            if (errno == Errno.EAGAIN.value() || errno == Errno.EBUSY.value()) {
                if (minComplete > 0 || flags != 0) {
                    return 0; // completions pending: reap and come back
                }
                throw new RdmaException(Errno.EAGAIN, ring + ".submit: the kernel cannot take " + toSubmit
                        + " entries now (errno " + errno + "); they stay prepared, reap and retry");
            }
            throw new RdmaException(Errno.of(errno), ring + ": io_uring_enter failed with errno " + errno);
        }
    }
}
