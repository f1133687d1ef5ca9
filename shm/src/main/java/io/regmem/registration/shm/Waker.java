package io.regmem.registration.shm;

import io.regmem.core.internal.FutexWaiter;

/**
 * How a thread sleeps on a device's lanes when it has had nothing to do for a while (the progress
 * thread, or a completion channel's waiter on a device without one), and how a peer wakes it: each
 * lane has a sleeping word per side in its shared memory; the sleeper sets its words, looks for work
 * a last time, and waits on all of them at once ({@link FutexWaiter}: {@code futex_waitv}, at most
 * {@value #MAX} lanes, the rest by the timeout); a peer that published work into a lane whose sleeping
 * word is set clears it and wakes it ({@code FUTEX_WAKE} on the shared word). No descriptor is
 * exchanged, so a peer cannot make a wake block; a peer that scribbles on the words can only wake this
 * side early or keep it from sleeping, which its requests could do anyway. Allocates nothing.
 */
final class Waker {
    /** The most lanes one wait watches (the kernel's limit for {@code futex_waitv}). */
    static final int MAX = FutexWaiter.MAX;
    private final FutexWaiter waiter = new FutexWaiter();

    /**
     * Waits until a peer wakes one of {@code words} (addresses of 32-bit sleeping words, each now 1)
     * or {@code nanos} pass. The progress thread only.
     *
     * @return true if a peer woke it
     */
    boolean sleep(long[] words, int count, long nanos) {
        return waiter.await(words, count, nanos);
    }

    /** Sleeps a peer's wake ended (rather than the timeout). */
    long woken() {
        return waiter.woken();
    }

    /**
     * Wakes the waiters on the shared 32-bit word at {@code address}, then, if there was one, yields
     * this thread's CPU once ({@code sched_yield}). Any thread; never blocks. The yield is for a
     * scheduler that puts the woken thread on the waker's CPU (as Linux does in VMs, whose halted
     * vCPUs count as busy): the waker usually spins next, polling for the answer, and the woken thread
     * would wait out the spinner's time slice (milliseconds) before it runs; with the yield it runs at
     * once. When it went to another CPU, the yield returns at once.
     */
    static void wake(long address) {
        if (FutexWaiter.wake(address) > 0) {
            Thread.yield();
        }
    }
}
