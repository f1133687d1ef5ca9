package io.regmem.registration.uring;

/**
 * Completions an {@link IoRing} reaped while it waited for itself (a chunk retiring inside one of its
 * calls), kept for the next poll, which delivers them first: a FIFO of (user data, result) pairs of at
 * most the ring's capacity. Owner thread only, like the ring.
 */
final class CompletionStash {
    private final long[] userData;
    private final int[] results;
    private int head;
    private int count;

    CompletionStash(int capacity) {
        this.userData = new long[capacity];
        this.results = new int[capacity];
    }

    /** Completions kept. */
    int size() {
        return count;
    }

    /** Keeps a completion (the ring never has more in flight than its capacity). */
    void add(long data, int result) {
        int at = (head + count) % userData.length;
        userData[at] = data;
        results[at] = result;
        count++;
    }

    /** The oldest kept completion's user data ({@link #size()} {@code > 0}). */
    long headUserData() {
        return userData[head];
    }

    /** The oldest kept completion's result. */
    int headResult() {
        return results[head];
    }

    /** Drops the oldest kept completion. */
    void pop() {
        head = (head + 1) % userData.length;
        count--;
    }

    /** Drops every kept completion (the ring closed: completions nobody reaped are dropped). */
    void clear() {
        count = 0;
    }
}
