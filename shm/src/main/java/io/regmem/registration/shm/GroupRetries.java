package io.regmem.registration.shm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Supplier;

/**
 * The fetches and pushes of a device's groups that another device did not answer in time (a process
 * that is stopped, or busy, or a listener flooded with connections that never speak): tried again at
 * a sweep (every 100 ms) after a delay that doubles from 100 ms to {@link #MAX_DELAY_NANOS}, for as
 * long as the listener exists and the attempt matters, on a virtual thread of their own (never on the thread that serves the
 * device's own listener, which the other device may be waiting for meanwhile). A fetch tried again
 * maps the publication from its tail then (what it missed while the other device did not answer is not
 * counted); a push tried again is read from the publication's start, as the first one would have been.
 */
final class GroupRetries {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.shm");
    /** The longest wait between two attempts. */
    static final long MAX_DELAY_NANOS = 5_000_000_000L;
    /** After this many attempts, a warning says so (once). */
    private static final int WARN_AFTER = 10;

    /** An attempt: true once it succeeded or no longer matters. */
    interface Attempt {
        boolean run(String listener);

        /** True while it is worth trying (the group still joined, the publication still there). */
        boolean matters();
    }

    private record Retry(String listener, Attempt attempt, int tries, long due) {
    }

    private final String owner;
    private final ConcurrentLinkedQueue<Retry> queue = new ConcurrentLinkedQueue<>();
    private volatile Thread running;

    GroupRetries(String owner) {
        this.owner = owner;
    }

    /** Tries {@code attempt} with {@code listener} again at the next sweeps. */
    void add(String listener, Attempt attempt) {
        queue.add(new Retry(listener, attempt, 0, System.nanoTime()));
    }

    /**
     * Starts the attempts due, unless the last ones still run; {@code listeners} gives the listeners
     * that are still there (read once for all of them).
     */
    void sweep(Supplier<List<String>> listeners) {
        if (queue.isEmpty() || running != null && running.isAlive()) {
            return;
        }
        List<Retry> due = new ArrayList<>();
        List<Retry> later = new ArrayList<>();
        long now = System.nanoTime();
        for (Retry r; (r = queue.poll()) != null; ) {
            (now - r.due >= 0 ? due : later).add(r);
        }
        queue.addAll(later);
        if (due.isEmpty()) {
            return;
        }
        running = Thread.ofVirtual().name("regmem-shm-groups-retry").start(() -> {
            List<String> there = listeners.get();
            for (Retry r : due) {
                try {
                    if (!r.attempt.matters() || !there.contains(r.listener) || r.attempt.run(r.listener)) {
                        continue;
                    }
                    long delay = Math.min(MAX_DELAY_NANOS, 100_000_000L << Math.min(r.tries, 6));
                    queue.add(new Retry(r.listener, r.attempt, r.tries + 1, System.nanoTime() + delay));
                    if (r.tries + 1 == WARN_AFTER) {
                        LOG.log(System.Logger.Level.WARNING, () -> owner + ": @" + r.listener + " did not answer " + WARN_AFTER
                                + " times: a group's publications are not shared with it until it does");
                    }
                } catch (RuntimeException | Error e) { // (a thread of regmem's: nothing escapes it)
                    LOG.log(System.Logger.Level.WARNING, owner + ": trying a group request again failed", e);
                }
            }
        });
    }

    /**
     * Drops what is pending (the device closes) and waits for an attempt that runs (it finds the
     * device closed, or ends at its deadline), so that nothing of the device's stays open after it.
     */
    void clear() {
        queue.clear();
        Thread t = running;
        if (t != null) {
            try {
                t.join(2_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
