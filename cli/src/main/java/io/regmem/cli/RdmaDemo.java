package io.regmem.cli;

import io.regmem.core.BufferPool;
import io.regmem.core.LeakReport;
import io.regmem.core.PooledBuffer;
import io.regmem.registration.Access;
import io.regmem.registration.CacheStats;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.cache.CachedRegion;
import io.regmem.registration.cache.RegistrationCache;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.IdentityHashMap;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * The RDMA half of {@code regmem demo}: two devices of the chosen provider (soft by default) connected in this JVM, each with a
 * registered {@link BufferPool}. Each request allocates a pooled buffer at each end, fills the
 * local one, RDMA WRITEs it into the remote one by the remote pool's rkey, READs it back into a
 * third buffer, checks every byte, and announces itself with a SEND the peer receives. Then
 * everything is torn down in the mandatory order and both devices must report no survivor.
 */
final class RdmaDemo {
    private final PrintStream out;
    private final int requests;
    private final int size;
    private final String provider;
    /** Options for every device this part opens ({@code --device-option}). */
    private Map<String, String> deviceOptions = Map.of();

    /** Opens this part's devices with {@code options} (the provider's device options). */
    RdmaDemo withDeviceOptions(Map<String, String> options) {
        this.deviceOptions = Map.copyOf(options);
        return this;
    }

    RdmaDemo(PrintStream out, int requests, int size) {
        this(out, requests, size, "soft");
    }

    RdmaDemo(PrintStream out, int requests, int size, String provider) {
        this.provider = provider;
        this.out = out;
        this.requests = requests;
        this.size = size;
    }

    /** Runs the workload and prints its report; returns true when every check held and nothing leaked. */
    boolean run() {
        Histogram writeNs = new Histogram(3);
        Histogram readNs = new Histogram(3);
        WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion()};
        long start;
        long elapsed;
        String reportA;
        String reportB;
        LeakReport leaksA;
        LeakReport leaksB;
        CacheStats cacheStats;
        int keysImported;
        SoftPair pair = new SoftPair(provider, deviceOptions, 1024, new QpInitAttributes().maxSendSge(2), new QpInitAttributes());
        boolean tornDown = false;
        try {
            ProtectionDomain pdA = pair.pdA;
            ProtectionDomain pdB = pair.pdB;
            CompletionQueue cqA = pair.cqA;
            CompletionQueue cqB = pair.cqB;
            BufferPool poolA = BufferPool.builder().name("rdma-a").build();
            BufferPool poolB = BufferPool.builder().name("rdma-b").build();
            PoolRegistration regA = pdA.register(poolA, Access.LOCAL_WRITE);
            // B's pool goes through a registration cache: each chunk registered once at birth,
            // invalidated before it is unmapped; B's own lookups of pooled memory then hit it.
            RegistrationCache cacheB = RegistrationCache.of(pdB);
            PoolRegistration regB = cacheB.register(poolB, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);

            QueuePair qpA = pair.qpA;
            QueuePair qpB = pair.qpB;

            // B's pool chunks stay registered for their whole life: A imports each chunk's exported
            // key once, the first time it writes there, and uses the imported handle from then on.
            Map<MemoryRegion, Integer> importedB = new IdentityHashMap<>();
            WorkRequest wr = new WorkRequest(2);
            WorkRequest recv = new WorkRequest(1);
            PooledBuffer inbox = poolB.allocate(64);
            start = System.nanoTime();
            for (int r = 0; r < requests; r++) {
                PooledBuffer src = poolA.allocate(size);
                PooledBuffer back = poolA.allocate(size);
                PooledBuffer dst = poolB.allocate(size);
                MemorySegment s = src.segment();
                for (long o = 0; o + 8 <= size; o += 8) {
                    s.set(ValueLayout.JAVA_LONG, o, r * 31L + o);
                }
                recv.reset().wrId(r).addSge(inbox.address(), 64, regB.lkey(inbox));
                qpB.postRecv(recv);

                int dstKey = importedB.computeIfAbsent(regB.region(dst), mr -> qpA.importRemoteKey(mr.exportRemoteKey()));
                long t0 = System.nanoTime();
                wr.reset().wrId(r).opcode(Opcode.RDMA_WRITE).addSge(src.address(), size, regA.lkey(src))
                        .remote(dst.address(), dstKey);
                qpA.postSend(wr);
                expect(cqA, wcs, 1);
                long t1 = System.nanoTime();
                wr.reset().wrId(r).opcode(Opcode.RDMA_READ).addSge(back.address(), size, regA.lkey(back))
                        .remote(dst.address(), dstKey);
                qpA.postSend(wr);
                expect(cqA, wcs, 1);
                long t2 = System.nanoTime();
                writeNs.recordValue(t1 - t0);
                readNs.recordValue(t2 - t1);
                if (back.segment().mismatch(s) != -1 || dst.segment().asSlice(0, size).mismatch(s.asSlice(0, size)) != -1) {
                    throw new IllegalStateException("request " + r + ": bytes differ after WRITE and READ");
                }
                src.segment().set(ValueLayout.JAVA_LONG, 0, r);
                wr.reset().wrId(r).opcode(Opcode.SEND).addSge(src.address(), 8, regA.lkey(src));
                qpA.postSend(wr);
                expect(cqA, wcs, 1);
                expect(cqB, wcs, 1);
                if (wcs[0].opcode() != Opcode.RECV || inbox.segment().get(ValueLayout.JAVA_LONG, 0) != r) {
                    throw new IllegalStateException("request " + r + ": the SEND did not arrive");
                }
                try (CachedRegion check = cacheB.get(dst.segment(), Access.REMOTE_READ)) {
                    if (check.rkey() != regB.rkey(dst)) {
                        throw new IllegalStateException("request " + r + ": the cache and the pool disagree on a key");
                    }
                }
                src.close();
                back.close();
                dst.close();
            }
            elapsed = System.nanoTime() - start;
            keysImported = importedB.size();
            inbox.close();

            pair.disconnect();
            regA.close();
            leaksA = poolA.closeAndReport();
            leaksB = poolB.closeAndReport();
            regB.close();
            cacheB.close();
            cacheStats = pdB.cacheStats(); // the PD's view: its caches' counters, closed ones included
            pair.close();
            tornDown = true;
        } finally {
            if (!tornDown) {
                pair.forceClose(); // a failure half-way: do not hide it behind EBUSY from an orderly close
            }
        }
        reportA = pair.devA.resources().report();
        reportB = pair.devB.resources().report();
        String nameA = pair.devA.name();
        String nameB = pair.devB.name();
        out.printf(Locale.ROOT, "%nRDMA loopback on the %s provider: %,d requests of %d B (WRITE, READ back, check, SEND) "
                + "in %.2f s%n", provider, requests, size, elapsed / 1e9);
        out.printf(Locale.ROOT, "Latency (us)       p50      p90      p99    p99.9      max%n");
        print("WRITE", writeNs);
        print("READ", readNs);
        out.printf(Locale.ROOT, "Remote keys: B's %d chunk key(s) exported and imported on A's QP once each, not per request%n",
                keysImported);
        out.printf(Locale.ROOT, "Registration cache of B: %,d gets, %.2f%% hits, %d misses (one per chunk), %d invalidations "
                + "(chunks unmapped at pool close)%n", cacheStats.gets(), 100 * cacheStats.hitRate(), cacheStats.misses(),
                cacheStats.invalidations());
        out.printf(Locale.ROOT, "Devices: %s (A): %s; %s (B): %s%n", nameA, reportA, nameB, reportB);
        out.printf(Locale.ROOT, "Pools: %s; %s%n", leaksA.describe().strip(), leaksB.describe().strip());
        return leaksA.clean() && leaksB.clean() && reportA.equals("no live objects") && reportB.equals("no live objects");
    }

    private static void expect(CompletionQueue cq, WorkCompletion[] wcs, int n) {
        int got = 0;
        while (got < n) {
            got += cq.poll(wcs);
        }
        if (wcs[0].status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("completion failed: " + wcs[0]);
        }
    }

    private void print(String what, Histogram h) {
        out.printf(Locale.ROOT, "  %-10s %8.1f %8.1f %8.1f %8.1f %8.1f%n", what, h.getValueAtPercentile(50) / 1e3,
                h.getValueAtPercentile(90) / 1e3, h.getValueAtPercentile(99) / 1e3, h.getValueAtPercentile(99.9) / 1e3,
                h.getMaxValue() / 1e3);
    }
}
