package io.regmem.registration.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.regmem.core.BufferPool;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.Access;
import io.regmem.registration.AddressHandle;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.cache.RegistrationCache;
import io.regmem.registration.testkit.Loopback;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.openmbean.CompositeData;
import javax.management.openmbean.TabularData;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The JMX beans and the Micrometer binder, read while traffic runs and checked against what the test
 * did: allocations and refusals of a pool, completions and failures by status of a device, hits and
 * misses of a registration cache; beans and meters appear when their object opens and go when it
 * closes.
 */
@ExtendWith(NoLeaks.class)
class MetricsTest {
    private final MBeanServer server = ManagementFactory.getPlatformMBeanServer();

    @AfterEach
    void off() {
        RegmemMBeans.unregister();
    }

    private static Set<ObjectName> regmemBeans(MBeanServer s) throws Exception {
        return s.queryNames(new ObjectName(RegmemMBeans.DOMAIN + ":*"), null);
    }

    @Test
    void poolBeansCountWhatThePoolDidAndGoAtClose() throws Exception {
        BufferPool before = BufferPool.builder().name("metrics-before").build();
        RegmemMBeans.register(server);
        RegmemMBeans.register(server); // a second call does nothing
        ObjectName beforeName = RegmemMBeans.nameOf(before);
        assertThat(server.isRegistered(beforeName)).as("a pool open at register() gets its bean").isTrue();
        BufferPool pool = BufferPool.builder().name("metrics \"pool\", odd=name").maxBytes(4L << 20).chunkSize(4L << 20).build();
        ObjectName name = RegmemMBeans.nameOf(pool);
        assertThat(server.isRegistered(name)).as("a pool built later gets its bean at birth").isTrue();
        List<PooledBuffer> held = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            held.add(pool.allocate(4096));
        }
        int refused = 0;
        for (int i = 0; i < 3; i++) {
            try {
                pool.allocate(8L << 20);
            } catch (io.regmem.core.PoolExhaustedException e) {
                refused++;
            }
        }
        assertThat(server.getAttribute(name, "LiveBuffers")).isEqualTo(100L);
        assertThat(server.getAttribute(name, "Allocations")).isEqualTo(100L);
        assertThat(server.getAttribute(name, "InUseBytes")).isEqualTo(100L * 4096);
        assertThat(server.getAttribute(name, "Exhausted")).isEqualTo((long) refused);
        assertThat(refused).isEqualTo(3);
        assertThat((long) server.getAttribute(name, "ReservedBytes")).isEqualTo(4L << 20);
        for (PooledBuffer b : held) {
            b.close();
        }
        assertThat(server.getAttribute(name, "LiveBuffers")).isEqualTo(0L);
        assertThat(server.getAttribute(name, "Frees")).isEqualTo(100L);
        assertThat((long) server.getAttribute(name, "CachedBytes")).as("freed buffers wait in caches").isPositive();
        assertThat(server.getAttribute(name, "SafetyMode")).isEqualTo("CHECKED");
        BufferPool twin = BufferPool.builder().name("metrics-before").build();
        assertThat(RegmemMBeans.nameOf(twin)).as("a second pool of one name gets its own bean").isNotEqualTo(beforeName);
        assertThat(server.isRegistered(RegmemMBeans.nameOf(twin))).isTrue();
        twin.close();
        assertThat(server.isRegistered(beforeName)).as("the first one's bean stays").isTrue();
        pool.close();
        assertThat(server.isRegistered(name)).as("gone at close").isFalse();
        before.close();
        assertThat(regmemBeans(server)).isEmpty();
    }

    @Test
    void deviceAndCacheBeansFollowTrafficReadWhileItRuns() throws Exception {
        RegmemMBeans.register(server);
        try (Loopback lb = new Loopback()) {
            ObjectName devA = RegmemMBeans.nameOf(lb.devA);
            assertThat(server.isRegistered(devA)).isTrue();
            assertThat(server.getAttribute(devA, "Connections")).isEqualTo(1);
            assertThat((int) server.getAttribute(devA, "Objects")).isGreaterThanOrEqualTo(4); // PD, CQ, CM IDs, QP
            MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
            MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);

            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> readerFailure = new AtomicReference<>();
            Thread reader = new Thread(() -> {
                long last = 0;
                try {
                    while (!stop.get()) {
                        long c = (long) server.getAttribute(devA, "Completions");
                        if (c < last) {
                            throw new AssertionError("completions went back: " + last + " -> " + c);
                        }
                        last = c;
                        server.getAttribute(devA, "ErrorsByStatus");
                    }
                } catch (Throwable t) {
                    readerFailure.set(t);
                }
            }, "jmx-reader");
            reader.start();
            int done = 0;
            for (int round = 0; round < 200; round++) {
                for (int i = 0; i < 16; i++) {
                    lb.qpA.postSend(new WorkRequest(1).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                            .addSge(lb.memA.address() + 64L * i, 64, local.lkey()).remote(lb.memB.address() + 64L * i, lb.key(remote)));
                }
                for (int got = 0; got < 16; ) {
                    int n = lb.poll(lb.cqA);
                    for (int k = 0; k < n; k++) {
                        assertThat(lb.wcs[k].status()).isEqualTo(WcStatus.SUCCESS);
                    }
                    got += n;
                }
                done += 16;
            }
            // one WRITE through a key the peer never gave: REM_ACCESS_ERR, the QP errs
            lb.qpA.postSend(new WorkRequest(1).wrId(99).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address(), 0x7777));
            WorkCompletion bad = lb.one(lb.cqA);
            assertThat(bad.status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
            stop.set(true);
            reader.join(10_000);
            assertThat(readerFailure.get()).isNull();

            assertThat(server.getAttribute(devA, "Completions")).isEqualTo((long) done + 1);
            assertThat(server.getAttribute(devA, "Errors")).isEqualTo(1L);
            TabularData byStatus = (TabularData) server.getAttribute(devA, "ErrorsByStatus");
            assertThat(byStatus.size()).isEqualTo(1);
            CompositeData row = (CompositeData) byStatus.values().iterator().next();
            assertThat(row.get("key")).isEqualTo("REM_ACCESS_ERR");
            assertThat(row.get("value")).isEqualTo(1L);
            assertThat(lb.devA.counters().completions(WcStatus.SUCCESS)).isEqualTo(done);
            assertThat(server.getAttribute(devA, "Connections")).as("the QP is in the error state").isEqualTo(0);

            try (RegistrationCache cache = RegistrationCache.builder(lb.pdA).build()) {
                Set<ObjectName> caches = server.queryNames(new ObjectName("io.regmem:type=RegistrationCache,*"), null);
                assertThat(caches).hasSize(1);
                ObjectName c = caches.iterator().next();
                MemorySegment seg = lb.memA.asSlice(0, 4096);
                cache.get(seg, Access.LOCAL_WRITE).close(); // miss
                cache.get(seg, Access.LOCAL_WRITE).close(); // hit
                cache.get(seg, Access.LOCAL_WRITE).close(); // hit
                assertThat(server.getAttribute(c, "Gets")).isEqualTo(3L);
                assertThat(server.getAttribute(c, "Hits")).isEqualTo(2L);
                assertThat(server.getAttribute(c, "Misses")).isEqualTo(1L);
                assertThat(server.getAttribute(c, "Regions")).isEqualTo(1);
                cache.close();
                assertThat(server.isRegistered(c)).isFalse();
            }
            local.close();
            remote.close();
        }
        assertThat(regmemBeans(server)).as("devices closed: no beans left").isEmpty();
    }

    @Test
    void datagramDropsAreInTheDeviceBeanAndTheBinderByReason() throws Exception {
        try (RdmaDevice probe = Providers.open()) {
            Assumptions.assumeTrue(probe.supportsDatagrams(), Providers.NAME + " carries no datagrams");
        }
        RegmemMBeans.register(server);
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (RegmemMeterBinder binder = new RegmemMeterBinder(); UdNode a = new UdNode(); UdNode b = new UdNode()) {
            binder.bindTo(registry);
            QueuePair server2 = b.qp();
            QueuePair client = a.qp();
            AddressHandle ah = a.ah(b.device.datagramAddress());
            WorkRequest wr = new WorkRequest(1);
            for (int i = 0; i < 3; i++) { // no receive posted: dropped at b
                client.postSend(a.send(wr, 1, 8).ud(ah, server2.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
                assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
            }
            client.postSend(a.send(wr, 1, 8).ud(ah, server2.qpNum(), 0x42)); // another Q_Key
            assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
            b.awaitDropped(DatagramDrop.NO_RECEIVE, 3);
            b.awaitDropped(DatagramDrop.QKEY, 1);
            TabularData dropped = (TabularData) server.getAttribute(RegmemMBeans.nameOf(b.device), "DatagramsDropped");
            java.util.Map<Object, Object> byReason = new java.util.HashMap<>();
            for (Object row : dropped.values()) {
                byReason.put(((CompositeData) row).get("key"), ((CompositeData) row).get("value"));
            }
            assertThat(byReason).containsOnly(java.util.Map.entry("NO_RECEIVE", 3L), java.util.Map.entry("QKEY", 1L));
            assertThat(((TabularData) server.getAttribute(RegmemMBeans.nameOf(a.device), "DatagramsDropped")).isEmpty())
                    .isTrue();
            assertThat(registry.get("regmem.device.datagrams.dropped").tags("device", b.device.name(), "reason", "no_receive")
                    .functionCounter().count()).isEqualTo(3.0);
            assertThat(registry.get("regmem.device.datagrams.dropped").tags("device", b.device.name(), "reason", "qkey")
                    .functionCounter().count()).isEqualTo(1.0);
        }
    }

    @Test
    void theMeterBinderHasTheSameFiguresInMicrometersConventions() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (RegmemMeterBinder binder = new RegmemMeterBinder()) {
            binder.bindTo(registry);
            BufferPool pool = BufferPool.builder().name("metrics-micrometer").build();
            PooledBuffer a = pool.allocate(100);
            PooledBuffer b = pool.allocate(100);
            Gauge live = registry.get("regmem.pool.buffers.live").tag("pool", "metrics-micrometer").gauge();
            assertThat(live.value()).isEqualTo(2.0);
            FunctionCounter allocations = registry.get("regmem.pool.allocations").tag("pool", "metrics-micrometer")
                    .functionCounter();
            assertThat(allocations.count()).isEqualTo(2.0);
            assertThat(registry.get("regmem.pool.memory.used").tag("pool", "metrics-micrometer").gauge().getId()
                    .getBaseUnit()).isEqualTo("bytes");
            a.close();
            b.close();
            assertThat(live.value()).isZero();

            try (Loopback lb = new Loopback()) {
                MemoryRegion local = lb.pdA.register(lb.memA, Access.LOCAL_WRITE);
                MemoryRegion remote = lb.pdB.register(lb.memB, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
                for (int i = 0; i < 5; i++) {
                    lb.qpA.postSend(new WorkRequest(1).wrId(i).opcode(Opcode.RDMA_WRITE).signaled(true)
                            .addSge(lb.memA.address(), 8, local.lkey()).remote(lb.memB.address(), lb.key(remote)));
                    assertThat(lb.one(lb.cqA).status()).isEqualTo(WcStatus.SUCCESS);
                }
                FunctionCounter ok = registry.get("regmem.device.completions")
                        .tags("device", lb.devA.name(), "status", "success").functionCounter();
                assertThat(ok.count()).isEqualTo(5.0);
                assertThat(registry.get("regmem.device.connections").tag("device", lb.devA.name()).gauge().value())
                        .isEqualTo(1.0);
                local.close();
                remote.close();
            }
            assertThat(registry.find("regmem.device.completions").meters()).as("removed at the device's close").isEmpty();
            pool.close();
            assertThat(registry.find("regmem.pool.buffers.live").meters()).isEmpty();
        }
        assertThat(registry.getMeters()).isEmpty();
    }
}
