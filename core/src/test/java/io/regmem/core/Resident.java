package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/** Counts a range's resident pages with {@code mincore}, for tests of what a pool holds. */
final class Resident {
    private static final MethodHandle MINCORE = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("mincore").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS));

    private Resident() {
    }

    /** Pages of [address, address + length) resident now. */
    static long pages(long address, long length) throws Throwable {
        long pages = length / Native.PAGE_SIZE;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment vec = arena.allocate(pages);
            int rc = (int) MINCORE.invokeExact(address, length, vec);
            assertThat(rc).as("mincore").isZero();
            long n = 0;
            for (long i = 0; i < pages; i++) {
                n += vec.get(ValueLayout.JAVA_BYTE, i) & 1;
            }
            return n;
        }
    }
}
