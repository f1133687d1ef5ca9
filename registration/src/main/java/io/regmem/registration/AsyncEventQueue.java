package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.ArrayDeque;

/**
 * A device's asynchronous events not yet taken, oldest first, under their own monitor: at most
 * {@link #KEPT}, older ones dropped (and counted) beyond it.
 */
final class AsyncEventQueue {
    /** How many events are kept for the reader. */
    static final int KEPT = 1024;
    private final ArrayDeque<AsyncEvent> events = new ArrayDeque<>();
    /** Events dropped because {@link #KEPT} were waiting (under the queue's monitor). */
    private long dropped;

    synchronized void add(AsyncEvent e) {
        if (events.size() == KEPT) {
            events.pollFirst();
            dropped++;
        }
        events.addLast(e);
        notifyAll();
    }

    synchronized AsyncEvent poll() {
        return events.pollFirst();
    }

    /**
     * Waits until {@code deadline} (a {@code System.nanoTime()}) for an event and takes it; null if none
     * came. {@code stillOpen} runs before each wait and throws when the device closed.
     */
    synchronized AsyncEvent await(long deadline, Runnable stillOpen, String who) {
        while (true) {
            AsyncEvent e = events.pollFirst();
            if (e != null) {
                return e;
            }
            stillOpen.run();
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            try {
                wait(Math.max(1, left / 1_000_000L));
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new RdmaException(Errno.EINTR, who + ": getAsyncEvent was interrupted");
            }
        }
    }

    synchronized long dropped() {
        return dropped;
    }

    synchronized void wakeAll() {
        notifyAll();
    }
}
