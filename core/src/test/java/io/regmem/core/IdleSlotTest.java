package io.regmem.core;

import static io.regmem.core.NoLeaks.closeClean;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Free slots beyond the thread caches and the stash keep no object: their handles are dropped and
 * a later allocation binds the slot to a new handle. The slot's memory and address come back (no
 * new memory is carved), every live buffer has an address of its own, and a dropped handle stays
 * free for ever, so a stale reference to it fails every check (use, free, generation).
 */
@ExtendWith(NoLeaks.class)
class IdleSlotTest {
    private static final int N = 20_000;

    @Test
    void slotsGoIdleAndComeBackAsNewHandlesOverTheSameMemory() {
        BufferPool pool = BufferPool.builder().name("idle").safetyMode(SafetyMode.CHECKED).build();
        List<PooledBuffer> first = new ArrayList<>();
        Set<Long> addresses = new HashSet<>();
        for (int i = 0; i < N; i++) {
            PooledBuffer b = pool.allocate(4096);
            b.segment().set(ValueLayout.JAVA_LONG, 0, i);
            assertThat(addresses.add(b.address())).isTrue();
            first.add(b);
        }
        long reserved = pool.stats().reservedBytes();
        long slots = pool.stats().classes().getFirst().slots();
        int[] generations = new int[N];
        for (int i = 0; i < N; i++) {
            generations[i] = first.get(i).generation();
            first.get(i).close();
        }
        Set<PooledBuffer> firstHandles = Collections.newSetFromMap(new IdentityHashMap<>());
        firstHandles.addAll(first);
        List<PooledBuffer> second = new ArrayList<>();
        int rebound = 0;
        for (int i = 0; i < N; i++) {
            PooledBuffer b = pool.allocate(4096);
            if (!firstHandles.contains(b)) {
                rebound++;
            }
            second.add(b);
        }
        assertThat(second.stream().map(PooledBuffer::address).distinct().count()).as("every live buffer its own slot")
                .isEqualTo(N);
        assertThat(pool.stats().reservedBytes()).as("no memory carved the second time").isEqualTo(reserved);
        assertThat(pool.stats().classes().getFirst().slots()).isEqualTo(slots);
        assertThat(rebound).as("most slots came back with a new handle (beyond the caches and the stash)")
                .isGreaterThan(N / 2);
        // a dropped handle: free for ever, every check fails
        int k = 0;
        while (k < N && second.contains(first.get(k))) {
            k++;
        }
        PooledBuffer dropped = first.get(k);
        int generation = generations[k];
        assertThat(dropped.isLive()).isFalse();
        assertThatThrownBy(dropped::segment).isInstanceOfSatisfying(RdmaException.class,
                e -> assertThat(e.errno()).isEqualTo(Errno.EBADF));
        assertThatThrownBy(() -> dropped.checkGeneration(generation)).isInstanceOfSatisfying(RdmaException.class,
                e -> assertThat(e.errno()).isEqualTo(Errno.EBADF));
        assertThatThrownBy(dropped::close).isInstanceOfSatisfying(RdmaException.class,
                e -> assertThat(e.errno()).isEqualTo(Errno.EINVAL));
        long at = ownerAddress(dropped);
        PooledBuffer owner = second.stream().filter(b -> b.address() == at).findFirst().orElseThrow();
        assertThat(owner.isLive()).as("the stale free changed nothing of the slot's new owner").isTrue();
        for (PooledBuffer b : second) {
            b.close();
        }
        closeClean(pool);
    }

    /** The address the dropped handle had: the one live buffer of the second round at it. */
    private static long ownerAddress(PooledBuffer dropped) {
        String s = dropped.toString(); // "PooledBuffer[0x<address>, ..."
        return Long.parseLong(s.substring(s.indexOf("0x") + 2, s.indexOf(',')), 16);
    }

    @Test
    void aLeakFoundAtCloseIsCountedWhetherItsHandleWasCachedOrNot() {
        BufferPool pool = BufferPool.builder().name("idle-leak").safetyMode(SafetyMode.CHECKED).build();
        List<PooledBuffer> held = new ArrayList<>();
        for (int i = 0; i < 5000; i++) {
            held.add(pool.allocate(4096));
        }
        for (int i = 0; i < 5000; i += 2) {
            held.get(i).close(); // half go to the cache, the stash and idle
        }
        LeakReport report = pool.closeAndReport();
        assertThat(report.buffers()).isEqualTo(2500);
        assertThat(report.bytes()).isEqualTo(2500L * 4096);
        assertThat(report.leaks()).hasSize(LeakReport.MAX_LISTED);
        assertThat(report.leaks().getFirst().buffer()).startsWith("PooledBuffer[0x").contains("capacity 4096");
    }
}
