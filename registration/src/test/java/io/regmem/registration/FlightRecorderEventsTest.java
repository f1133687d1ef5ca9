package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.BufferPool;
import io.regmem.core.PoolExhaustedException;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * regmem's JFR events: off by default, recorded when a recording enables {@code io.regmem.*}, read
 * back from the file with {@link RecordingFile}, each with the fields its documentation names.
 */
@ExtendWith(NoLeaks.class)
class FlightRecorderEventsTest {

    static final List<String> NAMES = List.of("io.regmem.ChunkMap", "io.regmem.ChunkUnmap", "io.regmem.ChunkTrim",
            "io.regmem.PoolExhausted",
            "io.regmem.LeakReport", "io.regmem.Registration", "io.regmem.Deregistration", "io.regmem.CacheMiss",
            "io.regmem.CacheEviction", "io.regmem.CacheInvalidation", "io.regmem.QpError", "io.regmem.QpFlush",
            "io.regmem.Connection", "io.regmem.DatagramDrop");

    @TempDir
    Path dir;

    @Test
    void everyEventIsRegisteredAndOffByDefault() {
        // Make every event class load (a type is known to JFR once its class is initialized).
        try (BufferPool pool = BufferPool.builder().name("types").maxBytes(4L << 20).build(); Loopback lb = new Loopback()) {
            pool.allocate(64).close();
        }
        Map<String, EventType> types = FlightRecorder.getFlightRecorder().getEventTypes().stream()
                .filter(t -> t.getName().startsWith("io.regmem."))
                .collect(Collectors.toMap(EventType::getName, t -> t));
        assertThat(types.keySet()).containsAll(List.of("io.regmem.ChunkMap", "io.regmem.Registration",
                "io.regmem.Connection", "io.regmem.Deregistration"));
        assertThat(types.values()).allSatisfy(t -> assertThat(t.isEnabled()).as(t.getName()).isFalse());
    }

    @Test
    void aRecordingThatEnablesThemSeesEachWithItsFields() throws Exception {
        Path file = dir.resolve("regmem.jfr");
        try (Recording recording = new Recording()) {
            for (String name : NAMES) {
                recording.enable(name).withThreshold(java.time.Duration.ZERO);
            }
            recording.start();
            poolEvents();
            verbsEvents();
            recording.stop();
            recording.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file);
        Map<String, List<RecordedEvent>> byName = events.stream()
                .collect(Collectors.groupingBy(e -> e.getEventType().getName()));
        assertThat(byName.keySet()).containsAll(NAMES.stream().filter(n -> datagrams() || !n.equals("io.regmem.DatagramDrop"))
                .toList());
        if (datagrams()) {
            RecordedEvent drop = first(byName, "io.regmem.DatagramDrop", e -> true);
            assertThat(drop.getString("reason")).isEqualTo("NO_RECEIVE");
            assertThat(drop.getString("qp")).contains("QueuePair#");
        }

        RecordedEvent map = first(byName, "io.regmem.ChunkMap", e -> "jfr-pool".equals(e.getString("pool")));
        assertThat(map.getLong("size")).isEqualTo(1L << 20);
        assertThat(map.getLong("address")).isNotZero();
        assertThat(first(byName, "io.regmem.ChunkUnmap", e -> "jfr-pool".equals(e.getString("pool"))).getLong("size"))
                .isEqualTo(1L << 20);
        RecordedEvent trim = first(byName, "io.regmem.ChunkTrim", e -> "jfr-pool".equals(e.getString("pool")));
        assertThat(trim.getLong("size")).isEqualTo(1L << 20);
        assertThat(trim.getBoolean("decommitted")).isTrue();
        assertThat(first(byName, "io.regmem.ChunkMap", e -> "jfr-pool".equals(e.getString("pool")) && e.getBoolean("reused"))
                .getLong("address")).isEqualTo(trim.getLong("address"));
        RecordedEvent exhausted = first(byName, "io.regmem.PoolExhausted", e -> true);
        assertThat(exhausted.getString("pool")).isEqualTo("jfr-pool");
        assertThat(exhausted.getLong("limit")).isEqualTo(2L << 20);
        assertThat(exhausted.getLong("requested")).isEqualTo(4L << 20);
        RecordedEvent leak = first(byName, "io.regmem.LeakReport", e -> true);
        assertThat(leak.getString("pool")).isEqualTo("jfr-pool");
        assertThat(leak.getLong("buffers")).isEqualTo(1);
        assertThat(leak.getLong("bytes")).isEqualTo(128);

        RecordedEvent reg = first(byName, "io.regmem.Registration", e -> e.getLong("length") == 8192);
        assertThat(reg.getString("region")).contains("MemoryRegion#");
        assertThat(reg.getString("access")).contains("REMOTE_WRITE");
        assertThat(reg.getDuration()).isPositive();
        assertThat(first(byName, "io.regmem.Deregistration", e -> e.getLong("length") == 8192).getString("region"))
                .isEqualTo(reg.getString("region"));
        RecordedEvent miss = first(byName, "io.regmem.CacheMiss", e -> true);
        assertThat(miss.getLong("length")).isEqualTo(4096);
        assertThat(miss.getString("cache")).contains("RegistrationCache");
        assertThat(byName.get("io.regmem.CacheMiss")).hasSize(3); // the second get of the first segment hit
        assertThat(first(byName, "io.regmem.CacheEviction", e -> true).getLong("length")).isEqualTo(4096);
        assertThat(first(byName, "io.regmem.CacheInvalidation", e -> true).getInt("regions")).isEqualTo(1);
        RecordedEvent error = first(byName, "io.regmem.QpError", e -> true);
        assertThat(error.getString("from")).isEqualTo("RTS");
        assertThat(error.getString("qp")).contains("QueuePair#");
        assertThat(byName.get("io.regmem.QpError")).extracting(e -> e.getString("cause")).contains("a send request failed");
        RecordedEvent flush = first(byName, "io.regmem.QpFlush", e -> true);
        assertThat(flush.getInt("sends")).isEqualTo(1);
        assertThat(byName.get("io.regmem.Connection")).extracting(e -> e.getString("type"))
                .contains("ESTABLISHED", "DISCONNECTED");
    }

    private static void poolEvents() {
        BufferPool pool = BufferPool.builder().name("jfr-pool").chunkSize(1L << 20).maxBytes(2L << 20).build();
        pool.allocate(64L << 10).close();
        pool.trim(); // gives that chunk back (ChunkTrim); the next takes its range again (ChunkMap, reused)
        pool.allocate(128); // left out on purpose: the close reports it
        assertThatThrownBy(() -> pool.allocate(4L << 20)).isInstanceOf(PoolExhaustedException.class);
        assertThat(pool.closeAndReport().buffers()).isEqualTo(1);
    }

    private static boolean datagrams() {
        try (RdmaDevice probe = Providers.open()) {
            return probe.supportsDatagrams();
        }
    }

    private static void verbsEvents() {
        if (datagrams()) { // a datagram with no receive posted at its destination: dropped
            try (UdNode a = new UdNode(); UdNode b = new UdNode()) {
                QueuePair to = b.qp();
                AddressHandle ah = a.ah(b.device.datagramAddress());
                a.qp().postSend(a.send(new WorkRequest(1), 1, 8).ud(ah, to.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
                a.await(b);
                b.awaitDropped(DatagramDrop.NO_RECEIVE, 1);
            }
        }
        try (Loopback lb = new Loopback()) {
            MemoryRegion mr = lb.pdA.register(lb.memA.asSlice(0, 8192), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            mr.close();
            try (RegistrationCache cache = RegistrationCache.builder(lb.pdA).maxRegions(1).merge(false).build()) {
                MemorySegment a = lb.memA.asSlice(0, 4096);
                MemorySegment b = lb.memA.asSlice(64 << 10, 4096);
                MemorySegment c = lb.memA.asSlice(128 << 10, 4096);
                cache.get(a, Access.LOCAL_WRITE).close();  // miss
                cache.get(a, Access.LOCAL_WRITE).close();  // hit: no event
                cache.get(b, Access.LOCAL_WRITE).close();  // miss: evicts a
                CachedRegion held = cache.get(c, Access.LOCAL_WRITE); // miss: evicts b
                cache.invalidate(c.address(), c.byteSize());
                held.close();
            }
            // A WRITE through a key the peer never gave: REM_ACCESS_ERR, the QP to the error state,
            // and a request behind it flushed.
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            WorkRequest bad = new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(local.address(), 64, local.lkey()).remote(lb.memB.address(), 0x7777);
            WorkRequest next = new WorkRequest(1).wrId(2).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(local.address(), 64, local.lkey()).remote(lb.memB.address(), 0x7777);
            lb.qpA.postSend(bad);
            lb.qpA.postSend(next);
            int got = 0;
            while (got < 2) {
                got += lb.cqA.poll(lb.wcs);
            }
            local.close();
        }
    }

    private static RecordedEvent first(Map<String, List<RecordedEvent>> byName, String name,
                                       java.util.function.Predicate<RecordedEvent> which) {
        return byName.getOrDefault(name, List.of()).stream().filter(which).findFirst()
                .orElseThrow(() -> new AssertionError("no matching " + name + " event in " + byName.get(name)));
    }
}
