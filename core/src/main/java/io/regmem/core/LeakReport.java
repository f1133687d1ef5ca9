package io.regmem.core;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;

/**
 * What {@link BufferPool#closeAndReport()} found still allocated when the pool closed.
 *
 * @param pool    the pool's name
 * @param buffers how many buffers were still out
 * @param bytes   their capacity in bytes
 * @param leaks   one entry per leaked buffer (at most {@link #MAX_LISTED}); each has its allocation
 *                site in {@link SafetyMode#PARANOID}, else a null site
 */
public record LeakReport(String pool, long buffers, long bytes, List<Leak> leaks) {
    /** Leaked buffers listed one by one at most; the counts cover all of them. */
    public static final int MAX_LISTED = 64;

    /** True when nothing was leaked. */
    public boolean clean() {
        return buffers == 0;
    }

    /** A human-readable report: counts, then each listed buffer with its allocation site if known. */
    public String describe() {
        if (clean()) {
            return pool + ": no buffers leaked";
        }
        StringWriter out = new StringWriter();
        PrintWriter w = new PrintWriter(out);
        w.printf("%s: %d buffer(s), %d bytes still allocated at close%n", pool, buffers, bytes);
        for (Leak leak : leaks) {
            w.printf("  %s%n", leak.buffer());
            if (leak.site() != null) {
                for (StackTraceElement e : leak.site().getStackTrace()) {
                    w.printf("      at %s%n", e);
                }
            }
        }
        if (buffers > leaks.size()) {
            w.printf("  ... and %d more%n", buffers - leaks.size());
        }
        w.flush();
        return out.toString();
    }

    /**
     * One leaked buffer.
     *
     * @param buffer its description: address, length, capacity and generation in PARANOID and for large
     *               buffers; address and capacity otherwise (the slot is found by its bits, not its handle)
     * @param site   where it was allocated ({@link SafetyMode#PARANOID} only), else null
     */
    public record Leak(String buffer, Throwable site) {
    }
}
