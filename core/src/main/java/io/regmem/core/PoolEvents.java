package io.regmem.core;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Enabled;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.MemoryAddress;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * The pool's JDK Flight Recorder events. All are off unless a recording enables them (by name,
 * {@code io.regmem.*}); when off, creating and committing one costs nothing measurable. None is on
 * the allocate or free path: only chunk map/unmap, exhaustion and close.
 */
final class PoolEvents {
    private PoolEvents() {
    }

    @Name("io.regmem.ChunkMap")
    @Label("Pool Chunk Map")
    @Category({"regmem", "Pool"})
    @Description("A pool took a chunk of memory from its chunk source (mmap, huge pages, UCX, an arena)")
    @Enabled(false)
    @StackTrace(false)
    static final class ChunkMap extends Event {
        @Label("Pool")
        String pool;
        @Label("Address")
        @MemoryAddress
        long address;
        @Label("Size")
        @DataAmount
        long size;
        @Label("Dedicated")
        @Description("A large buffer's own chunk rather than one shared by size classes")
        boolean dedicated;
        @Label("Reused")
        @Description("The range of a chunk given back earlier, kept mapped and taken again (no mmap)")
        boolean reused;
    }

    @Name("io.regmem.ChunkTrim")
    @Label("Pool Chunk Given Back")
    @Category({"regmem", "Pool"})
    @Description("A pool gave an idle size-class chunk's memory back while running (trim or decay), after its "
            + "listeners let go of it; its range stays mapped for reuse")
    @Enabled(false)
    @StackTrace(false)
    static final class ChunkTrim extends Event {
        @Label("Pool")
        String pool;
        @Label("Address")
        @MemoryAddress
        long address;
        @Label("Size")
        @DataAmount
        long size;
        @Label("Decommitted")
        @Description("False if a listener failed to let go of the chunk: its pages were kept")
        boolean decommitted;
    }

    @Name("io.regmem.ChunkUnmap")
    @Label("Pool Chunk Unmap")
    @Category({"regmem", "Pool"})
    @Description("A pool gave a chunk back to its source (retired: its pages dropped, the range kept readable)")
    @Enabled(false)
    @StackTrace(false)
    static final class ChunkUnmap extends Event {
        @Label("Pool")
        String pool;
        @Label("Address")
        @MemoryAddress
        long address;
        @Label("Size")
        @DataAmount
        long size;
        @Label("Retired")
        boolean retired;
    }

    @Name("io.regmem.PoolExhausted")
    @Label("Pool Exhausted")
    @Category({"regmem", "Pool"})
    @Description("An allocation failed because the pool's maxBytes limit was reached")
    @Enabled(false)
    static final class Exhausted extends Event {
        @Label("Pool")
        String pool;
        @Label("Limit")
        @DataAmount
        long limit;
        @Label("Reserved")
        @DataAmount
        long reserved;
        @Label("In Use")
        @DataAmount
        long inUse;
        @Label("Requested")
        @DataAmount
        long requested;
    }

    @Name("io.regmem.LeakReport")
    @Label("Pool Leak Report")
    @Category({"regmem", "Pool"})
    @Description("A pool closed with buffers still allocated")
    @Enabled(false)
    static final class Leak extends Event {
        @Label("Pool")
        String pool;
        @Label("Buffers")
        long buffers;
        @Label("Bytes")
        @DataAmount
        long bytes;
    }

    /** Records a close that found buffers still out (if the event is enabled). */
    static void leak(String pool, LeakReport report) {
        if (report.clean()) {
            return;
        }
        Leak event = new Leak();
        if (event.shouldCommit()) {
            event.pool = pool;
            event.buffers = report.buffers();
            event.bytes = report.bytes();
            event.commit();
        }
    }
}
