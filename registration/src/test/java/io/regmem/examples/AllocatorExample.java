package io.regmem.examples;

// example: allocator
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.core.SafetyMode;
import io.regmem.core.ScatterList;
import java.lang.foreign.ValueLayout;
import org.agrona.concurrent.UnsafeBuffer;

public final class AllocatorExample {
    public static void main(String[] args) {
        try (BufferPool pool = BufferPool.builder()
                .name("orders")
                .maxBytes(64L << 20)              // at most 64 MiB of chunk memory
                .safetyMode(SafetyMode.CHECKED)   // the default: double free, stale handles, use after free
                .build()) {
            PooledBuffer header = pool.allocate(64);          // from this thread's cache: no lock, no garbage
            PooledBuffer page = pool.allocate(4096);
            header.segment().set(ValueLayout.JAVA_LONG, 0, 42L);   // a bounds-checked MemorySegment
            UnsafeBuffer agrona = page.asDirectBuffer();           // a zero-copy Agrona view of the same memory
            agrona.putLong(0, 7L);

            ScatterList sg = new ScatterList();                    // reusable (address, length) entries
            sg.add(header, 0, 64).add(page, 0, 4096);
            System.out.println("described " + sg.totalLength() + " bytes in " + sg.count() + " entries");
            System.out.println("page starts with " + page.segment().get(ValueLayout.JAVA_LONG, 0));

            header.close();                                        // back to the pool; any thread may free
            page.close();
            System.out.println("live buffers: " + pool.stats().liveBuffers());
        }   // unmaps every chunk; a buffer still out would be reported (and logged) here
    }
}
// end example
