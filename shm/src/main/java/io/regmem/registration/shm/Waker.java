package io.regmem.registration.shm;

import io.regmem.core.internal.Futex;
import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Unistd;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.LockSupport;

/**
 * How a device's progress thread sleeps when it has had nothing to do for a while, and how a peer
 * wakes it: each lane has a sleeping word per side in its shared memory; the sleeper sets its words,
 * looks for work a last time, and waits on all of them at once ({@code futex_waitv}, Linux 5.16 and
 * later; at most {@value #MAX} lanes, the rest by the timeout); a peer that published work into a
 * lane whose sleeping word is set clears it and wakes it ({@code FUTEX_WAKE} on the shared word). No
 * descriptor is exchanged, so a peer cannot make a wake block; a peer that scribbles on the words can
 * only wake this side early or keep it from sleeping, which its requests could do anyway. The waits
 * and wakes allocate nothing: they go without errno capture ({@code futex_waitv}'s presence is asked
 * once).
 */
final class Waker implements AutoCloseable {
    /** The most lanes one wait watches (the kernel's limit for {@code futex_waitv}). */
    static final int MAX = 128;
    /** {@code struct futex_waitv}: val u64, uaddr u64, flags u32, reserved u32. */
    private static final long ENTRY = 24;
    /**
     * Whether this kernel has {@code futex_waitv}: asked once, with errno captured (a call with no
     * waiters is {@code EINVAL} where it exists), so that the waits themselves go without the capture.
     */
    private static final boolean HAS_WAITV = probe();
    private final Arena arena = Arena.ofShared();
    private final MemorySegment waiters = arena.allocate(ENTRY * MAX, 8);
    private final MemorySegment timeout = arena.allocate(16, 8);
    /** Sleeps a peer's wake ended (rather than the timeout). */
    volatile long woken;

    /**
     * Waits until a peer wakes one of {@code words} (addresses of 32-bit sleeping words, each now 1)
     * or {@code nanos} pass. The progress thread only.
     *
     * @return true if a peer woke it
     */
    boolean sleep(long[] words, int count, long nanos) {
        int n = Math.min(count, MAX);
        if (n == 0 || !HAS_WAITV) {
            LockSupport.parkNanos(nanos);
            return false;
        }
        for (int i = 0; i < n; i++) {
            waiters.set(JAVA_LONG, ENTRY * i, 1L);
            waiters.set(JAVA_LONG, ENTRY * i + 8, words[i]);
            waiters.set(JAVA_INT, ENTRY * i + 16, Futex.FUTEX2_SIZE_U32); // shared (not private): the peer wakes it
            waiters.set(JAVA_INT, ENTRY * i + 20, 0);
        }
        long deadline = System.nanoTime() + nanos; // HotSpot's nanoTime is CLOCK_MONOTONIC on Linux
        timeout.set(JAVA_LONG, 0, deadline / 1_000_000_000L);
        timeout.set(JAVA_LONG, 8, deadline % 1_000_000_000L);
        // Without errno capture (the JDK slices its segment per call): only success matters here.
        long r = Unistd.syscallPlain(Unistd.SYS_FUTEX_WAITV, waiters.address(), n, 0, timeout.address(),
                Futex.CLOCK_MONOTONIC, 0);
        if (r >= 0) {
            woken++;
            return true;
        }
        return false; // ETIMEDOUT, or EAGAIN (a word changed before the wait: work came), or EINTR
    }

    /** True if {@code futex_waitv} is there (not {@code ENOSYS}, nor refused by a seccomp filter). */
    private static boolean probe() {
        if (Libc.UNAVAILABLE != null) {
            return false;
        }
        try (Arena a = Arena.ofConfined()) {
            long r = Unistd.syscall(a.allocate(Libc.CAPTURE), Unistd.SYS_FUTEX_WAITV, 0, 0, 0, 0, 0, 0);
            return r == -22; // EINVAL: it exists and refused no waiters; ENOSYS (old kernel) or EPERM (seccomp): not here
        }
    }

    /**
     * Wakes the waiter on the shared 32-bit word at {@code address}, then, if there was one, yields
     * this thread's CPU once ({@code sched_yield}). Any thread; never blocks. The yield is for a
     * scheduler that puts the woken thread on the waker's CPU (as Linux does in VMs, whose halted
     * vCPUs count as busy): the waker usually spins next, polling for the answer, and the woken thread
     * would wait out the spinner's time slice (milliseconds) before it runs; with the yield it runs at
     * once. When it went to another CPU, the yield returns at once.
     */
    static void wake(long address) {
        if (Unistd.syscallPlain(Unistd.SYS_FUTEX, address, Futex.FUTEX_WAKE, 1, 0, 0, 0) > 0) { // (no errno: nothing sliced per wake)
            Thread.yield();
        }
    }

    @Override
    public void close() {
        arena.close();
    }
}
