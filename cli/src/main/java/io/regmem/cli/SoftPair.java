package io.regmem.cli;

import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Two soft devices of this JVM with a PD and a CQ each and one connected QP pair (A connects, B
 * accepts): what the benchmarks and the demo stand on. {@link #disconnect()} and then
 * {@link #close()} (after the caller released its own MRs and mappings) tear down in the mandatory order.
 */
public final class SoftPair implements AutoCloseable {
    private static final AtomicInteger NAMES = new AtomicInteger();

    public final RdmaDevice devA;
    public final RdmaDevice devB;
    public final ProtectionDomain pdA;
    public final ProtectionDomain pdB;
    public final CompletionQueue cqA;
    public final CompletionQueue cqB;
    private final CmId listener;
    private final CmId idA;
    private final CmId idB;
    public final QueuePair qpA;
    public final QueuePair qpB;

    /**
     * @param options device options for both devices
     * @param cqDepth entries of each CQ
     * @param attrsA  A's QP attributes (its CQ is filled in); B's QP gets the defaults
     */
    public SoftPair(Map<String, String> options, int cqDepth, QpInitAttributes attrsA) {
        this(options, cqDepth, attrsA, new QpInitAttributes());
    }

    /** As above, with B's QP attributes too (its CQ is filled in). */
    public SoftPair(Map<String, String> options, int cqDepth, QpInitAttributes attrsA, QpInitAttributes attrsB) {
        this("soft", options, cqDepth, attrsA, attrsB);
    }

    /**
     * As above, on two devices of the named provider: soft connects by a name, ucx by a free
     * loopback port (its bootstrap socket).
     */
    public SoftPair(String provider, Map<String, String> options, int cqDepth, QpInitAttributes attrsA, QpInitAttributes attrsB) {
        devA = RdmaDevice.open(provider, options);
        RdmaDevice b;
        try {
            b = RdmaDevice.open(provider, options);
        } catch (RuntimeException e) {
            devA.close();
            throw e;
        }
        devB = b;
        pdA = devA.allocPd();
        pdB = devB.allocPd();
        cqA = devA.createCq(cqDepth);
        cqB = devB.createCq(cqDepth);
        String name = connectsProcesses(provider) ? "127.0.0.1:" + freePort() : "regmem-pair-" + NAMES.incrementAndGet();
        listener = devB.createCmId();
        listener.listen(name);
        idA = devA.createCmId();
        qpA = idA.createQp(pdA, attrsA.sendCq(cqA).recvCq(cqA));
        idA.connect(name);
        idB = listener.getRequest();
        qpB = idB.createQp(pdB, attrsB.sendCq(cqB).recvCq(cqB));
        idB.accept();
    }

    /** A TCP port of the loopback that nobody listens on now. */
    private static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Disconnects and destroys both QPs and the CM IDs (contexts and posted work must be done). */
    public void disconnect() {
        idA.disconnect();
        idA.destroyQp();
        idB.destroyQp();
        idA.close();
        idB.close();
        listener.close();
    }

    /** Closes CQs, PDs and devices: call after {@link #disconnect()} and after closing MRs and mappings. */
    @Override
    public void close() {
        cqA.close();
        cqB.close();
        pdA.close();
        pdB.close();
        devA.close();
        devB.close();
    }

    /** Tears both devices down whatever is still alive (after a failure). */
    public void forceClose() {
        devA.forceClose();
        devB.forceClose();
    }

    /** True for the providers that connect processes by {@code host:port} (ucx, shm); soft reaches only this JVM. */
    public static boolean connectsProcesses(String provider) {
        return provider.equals("ucx") || provider.equals("shm");
    }
}
