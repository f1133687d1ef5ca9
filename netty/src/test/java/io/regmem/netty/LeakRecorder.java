package io.regmem.netty;

import io.netty.buffer.AbstractByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.util.ResourceLeakDetector;
import java.lang.reflect.Field;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Collects what Netty's ByteBuf leak detector reports, through its {@code LeakListener} (the
 * detector is AbstractByteBuf's own, reached by reflection: tests run on the class path).
 */
final class LeakRecorder implements ResourceLeakDetector.LeakListener {
    private final List<String> reports = new CopyOnWriteArrayList<>();
    private final ResourceLeakDetector<?> detector;

    private LeakRecorder(ResourceLeakDetector<?> detector) {
        this.detector = detector;
    }

    static LeakRecorder install() {
        try {
            Field f = AbstractByteBuf.class.getDeclaredField("leakDetector");
            f.setAccessible(true);
            LeakRecorder r = new LeakRecorder((ResourceLeakDetector<?>) f.get(null));
            r.detector.setLeakListener(r);
            return r;
        } catch (ReflectiveOperationException e) {
            throw new AssertionError("Netty's ByteBuf leak detector", e);
        }
    }

    void uninstall() {
        detector.setLeakListener(null);
    }

    @Override
    public void onLeak(String resourceType, String records) {
        reports.add("LEAK: " + resourceType + " " + records);
    }

    List<String> reports() {
        return reports;
    }

    /**
     * Makes the detector look: collects garbage (unreleased buffers' trackers become unreachable)
     * and allocates, since the detector reports on the next tracked allocation.
     */
    void drive(ByteBufAllocator alloc) throws InterruptedException {
        for (int i = 0; i < 10; i++) {
            System.gc();
            Thread.sleep(20);
            alloc.directBuffer(8).release();
        }
    }
}
