package io.regmem.core.internal;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;
import java.util.concurrent.locks.LockSupport;

/**
 * One thread's wait on several 32-bit futex words at once ({@code futex_waitv}, Linux 5.16 and later;
 * at most {@value #MAX} words): the words a sleeper set to 1 before its last look for work, which a
 * waker clears and wakes ({@link #wake}). Shared words (not {@code FUTEX_PRIVATE}): a word may sit in
 * memory another process maps. The waits and wakes allocate nothing and go without errno capture
 * ({@code futex_waitv}'s presence is asked once, {@link #AVAILABLE}). One instance per waiting thread
 * (it holds the native argument arrays); its memory is freed with it.
 */
public final class FutexWaiter {
    /** The most words one wait watches (the kernel's limit for {@code futex_waitv}). */
    public static final int MAX = 128;
    /**
     * Whether this kernel has {@code futex_waitv}: asked once, with errno captured (a call with no
     * waiters is {@code EINVAL} where it exists); without it, {@link #await} only parks.
     */
    public static final boolean AVAILABLE = probe();
    /** {@code struct futex_waitv}: val u64, uaddr u64, flags u32, reserved u32. */
    private static final long ENTRY = 24;
    private final MemorySegment waiters = Arena.ofAuto().allocate(ENTRY * MAX + 16, 8);
    /** Waits a {@link #wake} ended (rather than the timeout). */
    private volatile long woken;

    /** A waiter with its argument arrays (native memory, freed when the waiter is unreachable). */
    public FutexWaiter() {
    }

    /**
     * Waits until a waker wakes one of {@code words} (addresses of 32-bit words the caller set to 1;
     * the wait returns at once if one of them is not 1 any more) or {@code nanos} pass. Without
     * {@code futex_waitv}, or with no word, parks for {@code nanos} (a {@code LockSupport.unpark}
     * ends that).
     *
     * @return true if a waker woke it
     */
    public boolean await(long[] words, int count, long nanos) {
        int n = Math.min(count, MAX);
        if (n == 0 || !AVAILABLE) {
            LockSupport.parkNanos(nanos);
            return false;
        }
        MemorySegment w = waiters;
        for (int i = 0; i < n; i++) {
            w.set(JAVA_LONG, ENTRY * i, 1L);
            w.set(JAVA_LONG, ENTRY * i + 8, words[i]);
            w.set(JAVA_INT, ENTRY * i + 16, Futex.FUTEX2_SIZE_U32); // shared (not private): another process may wake it
            w.set(JAVA_INT, ENTRY * i + 20, 0);
        }
        long timeout = ENTRY * MAX;
        long deadline = System.nanoTime() + nanos; // HotSpot's nanoTime is CLOCK_MONOTONIC on Linux
        w.set(JAVA_LONG, timeout, deadline / 1_000_000_000L);
        w.set(JAVA_LONG, timeout + 8, deadline % 1_000_000_000L);
        // Without errno capture (the JDK slices its segment per call): only success matters here.
        long r = Unistd.syscallPlain(Unistd.SYS_FUTEX_WAITV, w.address(), n, 0, w.address() + timeout,
                Futex.CLOCK_MONOTONIC, 0);
        Reference.reachabilityFence(w);
        if (r >= 0) {
            woken++;
            return true;
        }
        return false; // ETIMEDOUT, or EAGAIN (a word changed before the wait: work came), or EINTR
    }

    /** How many waits a waker ended. */
    public long woken() {
        return woken;
    }

    /**
     * Wakes every thread waiting on the 32-bit word at {@code address} (a word the caller has just
     * cleared). Any thread; never blocks.
     *
     * @return how many it woke (0 also where the call failed)
     */
    public static int wake(long address) {
        long r = Unistd.syscallPlain(Unistd.SYS_FUTEX, address, Futex.FUTEX_WAKE, Integer.MAX_VALUE, 0, 0, 0);
        return r > 0 ? (int) r : 0; // (no errno: nothing sliced per wake)
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
}
