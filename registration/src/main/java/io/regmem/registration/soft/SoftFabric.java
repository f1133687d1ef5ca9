package io.regmem.registration.soft;

import io.regmem.registration.AhAttributes;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.ConcurrentHashMap;
import org.agrona.collections.ArrayUtil;
import org.agrona.collections.Int2ObjectHashMap;

/**
 * The in-process datagram fabric every soft device of this JVM shares: its UD QPs by number and its
 * multicast groups' members. One port, 127.0.0.1 (port 0), for every soft device: a soft UD QP is
 * reached by its QP number, which is unique in the JVM. Membership changes copy the member arrays;
 * a send reads them without a lock.
 */
final class SoftFabric {
    /** The address every soft device's datagram port has. */
    static final InetSocketAddress ENDPOINT = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
    /** A datagram's source, as a receiver sees it ({@code WorkCompletion.source()}). */
    static final AhAttributes SOURCE = AhAttributes.of(ENDPOINT);
    /** UD QPs by number: replaced, never mutated, under {@link #LOCK}; read without a lock or a box. */
    private static volatile Int2ObjectHashMap<SoftQueuePair> udQps = new Int2ObjectHashMap<>();
    private static final SoftQueuePair[] NONE = new SoftQueuePair[0];
    /** Orders the changes of membership and of the QP table (readers take no lock). */
    private static final Object LOCK = new Object();
    /** Members of each group with members: arrays replaced, never mutated, under {@link #LOCK}. */
    private static final ConcurrentHashMap<InetAddress, SoftQueuePair[]> GROUPS = new ConcurrentHashMap<>();

    private SoftFabric() {
    }

    static void add(SoftQueuePair qp) {
        synchronized (LOCK) {
            Int2ObjectHashMap<SoftQueuePair> next = new Int2ObjectHashMap<>(udQps);
            next.put(qp.ctx.qpNum(), qp);
            udQps = next;
        }
    }

    static void remove(SoftQueuePair qp) {
        synchronized (LOCK) {
            Int2ObjectHashMap<SoftQueuePair> next = new Int2ObjectHashMap<>(udQps);
            if (next.get(qp.ctx.qpNum()) == qp) {
                next.remove(qp.ctx.qpNum());
            }
            udQps = next;
        }
    }

    /** The UD QP numbered {@code qpn}, or null (no lock, no allocation). */
    static SoftQueuePair qp(int qpn) {
        return udQps.get(qpn);
    }

    /** True if a unicast datagram to {@code dgid} reaches this fabric (a loopback address). */
    static boolean reaches(AhAttributes to) {
        return to.dgid().isLoopbackAddress() && to.port() == 0;
    }

    static void join(InetAddress group, SoftQueuePair qp) {
        synchronized (LOCK) {
            GROUPS.put(group, ArrayUtil.add(GROUPS.getOrDefault(group, NONE), qp));
        }
    }

    static void leave(InetAddress group, SoftQueuePair qp) {
        synchronized (LOCK) {
            SoftQueuePair[] now = ArrayUtil.remove(GROUPS.getOrDefault(group, NONE), qp);
            if (now.length == 0) {
                GROUPS.remove(group);
            } else {
                GROUPS.put(group, now);
            }
        }
    }

    /** The QPs attached to {@code group} now (a snapshot; never null). */
    static SoftQueuePair[] members(InetAddress group) {
        return GROUPS.getOrDefault(group, NONE);
    }
}
