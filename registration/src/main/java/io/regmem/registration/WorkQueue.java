package io.regmem.registration;

/** A QP's send or receive queue: a ring of preallocated {@link Wqe}s, guarded by the fabric lock. */
final class WorkQueue {
    private final Wqe[] ring;
    private long head;
    private long tail;

    WorkQueue(int depth, int maxSge) {
        ring = new Wqe[depth];
        for (int i = 0; i < depth; i++) {
            ring[i] = new Wqe(maxSge);
        }
    }

    int size() {
        return (int) (tail - head);
    }

    int room() {
        return ring.length - size();
    }

    /** The slot the next push fills; {@link #commitPush()} makes it visible. */
    Wqe pushSlot(int ahead) {
        return ring[(int) ((tail + ahead) % ring.length)];
    }

    void commitPush(int n) {
        tail += n;
    }

    Wqe peek() {
        return head == tail ? null : ring[(int) (head % ring.length)];
    }

    void pop() {
        head++;
    }
}
