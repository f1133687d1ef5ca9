package io.regmem.registration;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The QP numbers of this JVM's live queue pairs: 24 bits, unique among live QPs of every device and
 * provider, handed out in increasing order and wrapping, so a number comes back only after the other
 * 16 million were used (as a NIC's QPN counter does). 0, 1 (the special QPs) and
 * {@link AhAttributes#MULTICAST_QPN} are never given.
 */
final class QpNumbers {
    private static final int FIRST = 0x100;
    private static final int LAST = AhAttributes.MULTICAST_QPN - 1;
    private static final AtomicInteger NEXT = new AtomicInteger(FIRST);
    private static final ConcurrentHashMap.KeySetView<Integer, Boolean> LIVE = ConcurrentHashMap.newKeySet();

    private QpNumbers() {
    }

    /** A number no live QP has. */
    static int allocate() {
        while (true) {
            int n = NEXT.getAndUpdate(v -> v >= LAST ? FIRST : v + 1);
            if (LIVE.add(n)) {
                return n;
            }
        }
    }

    /** The QP numbered {@code n} is gone. */
    static void release(int n) {
        LIVE.remove(n);
    }
}
