package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.AddressHandle;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.PortSpace;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One side of a datagram test: a device of the provider under test (its own, so that its
 * {@code DeviceCounters} count only its drops), a PD, a CQ, registered memory cut into slots, and
 * UD QPs on UDP port space IDs. {@link #close()} takes everything down in order.
 */
public final class UdNode implements AutoCloseable {
    /** Bytes of each receive slot. */
    public static final int SLOT = 8192;
    public final RdmaDevice device;
    public final ProtectionDomain pd;
    public final CompletionQueue cq;
    public final MemorySegment memory;
    public final MemoryRegion mr;
    private final Arena arena = Arena.ofShared();
    private final List<CmId> ids = new ArrayList<>();
    private final List<AddressHandle> ahs = new ArrayList<>();
    private final WorkRequest recv = new WorkRequest(1);
    private final WorkCompletion[] wcs = {new WorkCompletion()};

    public UdNode(Map<String, String> options, int slots) {
        this(Providers.open(options), slots);
    }

    /** A node on {@code device} (closed with it). */
    public UdNode(RdmaDevice device, int slots) {
        this.device = device;
        pd = device.allocPd();
        cq = device.createCq(4096);
        memory = arena.allocate((long) SLOT * slots, 64);
        mr = pd.register(memory, Access.LOCAL_WRITE);
    }

    public UdNode() {
        this(Map.of(), 64);
    }

    /** A UD QP with {@code attrs} (its CQs set to this node's). */
    public QueuePair qp(QpInitAttributes attrs) {
        CmId id = device.createCmId(PortSpace.UDP);
        ids.add(id);
        return id.createQp(pd, attrs.sendCq(cq).recvCq(cq));
    }

    public QueuePair qp() {
        return qp(new QpInitAttributes().maxSendWr(256).maxRecvWr(256));
    }

    /** An address handle of this node's PD. */
    public AddressHandle ah(AhAttributes to) {
        AddressHandle ah = pd.createAh(to);
        ahs.add(ah);
        return ah;
    }

    /** An address handle answering a received datagram ({@code ibv_create_ah_from_wc}), closed with the node. */
    public AddressHandle ahFromWc(WorkCompletion wc) {
        AddressHandle ah = pd.createAhFromWc(wc);
        ahs.add(ah);
        return ah;
    }

    /** Slot {@code i}'s memory. */
    public MemorySegment slot(int i) {
        return memory.asSlice((long) SLOT * i, SLOT);
    }

    /** Posts a receive of {@code bytes} into slot {@code i} (wrId i). */
    public void postRecv(QueuePair qp, int i, long bytes) {
        qp.postRecv(recv.reset().wrId(i).addSge(slot(i).address(), bytes, mr.lkey()));
    }

    /** A send of slot {@code i}'s first {@code bytes} bytes (wrId i), for the caller to aim with {@code ud}. */
    public WorkRequest send(WorkRequest wr, int i, long bytes) {
        wr.reset().wrId(i).signaled(true);
        if (bytes > 0) {
            wr.addSge(slot(i).address(), bytes, mr.lkey());
        }
        return wr;
    }

    /** The next completion of this node's CQ, waiting up to 10 s (progressing {@code others} too). */
    public WorkCompletion await(UdNode... others) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cq.poll(wcs) == 0) {
            for (UdNode o : others) {
                o.cq.poll(new WorkCompletion[0]);
            }
            Thread.onSpinWait();
            assertThat(System.nanoTime()).as("a completion within 10 s").isLessThan(deadline);
        }
        return wcs[0];
    }

    /**
     * Waits up to 10 s, polling this node's CQ (which progresses its device: a provider that carries
     * datagrams over a network takes what arrived then), until its device counted {@code expected}
     * drops for {@code reason}; fails if it counts more, or not that many in time. The completions
     * polled meanwhile are kept for {@link #take()} no more: call it with no completion expected.
     */
    public void awaitDropped(DatagramDrop reason, long expected) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (device.counters().datagramsDropped(reason) < expected) {
            assertThat(cq.pending()).as("no completion while waiting for a drop").isZero();
            cq.poll(new WorkCompletion[0]);
            Thread.onSpinWait();
            assertThat(System.nanoTime()).as("%s drops reach %d within 10 s", reason, expected).isLessThan(deadline);
        }
        assertThat(device.counters().datagramsDropped(reason)).as("%s drops", reason).isEqualTo(expected);
    }

    /**
     * The completions of {@code nodes}' CQs (each in an object of its own), polled round the nodes until
     * {@code expected} came (10 s at most; fails otherwise), then, where datagrams cross a network, for
     * 50 ms more so that one too many would be seen too.
     */
    public static List<WorkCompletion> collect(int expected, UdNode... nodes) {
        List<WorkCompletion> got = new ArrayList<>();
        long deadline = System.nanoTime() + 10_000_000_000L;
        long settle = -1;
        while (true) {
            for (UdNode n : nodes) {
                for (WorkCompletion wc; (wc = n.take()) != null; ) {
                    got.add(wc);
                }
            }
            if (got.size() >= expected && settle < 0) {
                if (!Providers.datagramsCrossANetwork()) {
                    return got;
                }
                settle = System.nanoTime() + 50_000_000L;
            }
            if (settle >= 0 && System.nanoTime() > settle) {
                return got;
            }
            assertThat(System.nanoTime()).as("%d completions within 10 s (got %s)", expected, got).isLessThan(deadline);
            Thread.onSpinWait();
        }
    }

    /**
     * Asserts that of {@code sent} datagrams to this node's QP, {@code received} arrived and the rest
     * were counted as dropped (no receive, or lost on the way): exactly, where datagrams do not cross a
     * network; at most, where they do (the kernel may lose the last of a stream, which no later
     * datagram reveals, and a member that stopped reading leaves some unread).
     */
    public void assertAccounted(long received, long sent, String what) {
        long accounted = received + droppedOrLost();
        if (Providers.datagramsCrossANetwork()) {
            assertThat(accounted).as("%s: nothing received or counted that was not sent", what).isLessThanOrEqualTo(sent);
        } else {
            assertThat(accounted).as("%s: each datagram received or counted", what).isEqualTo(sent);
        }
    }

    /** The datagrams this node's device counted as dropped for want of a receive or lost on the way. */
    public long droppedOrLost() {
        return device.counters().datagramsDropped(DatagramDrop.NO_RECEIVE) + device.counters().datagramsDropped(DatagramDrop.LOST);
    }

    /** The node of {@code nodes} whose device {@code wc}'s QP is on. */
    public static UdNode of(WorkCompletion wc, UdNode... nodes) {
        for (UdNode n : nodes) {
            if (wc.qp().device() == n.device) {
                return n;
            }
        }
        throw new AssertionError("a completion of none of the nodes: " + wc);
    }

    /** The next completion if one is there now (after progressing {@code others}), else null. */
    public WorkCompletion poll(UdNode... others) {
        for (UdNode o : others) {
            o.cq.poll(new WorkCompletion[0]);
        }
        return cq.poll(wcs) == 0 ? null : wcs[0];
    }

    /** The next completion if one is there now, in an object of its own (a test keeps it), else null. */
    public WorkCompletion take() {
        WorkCompletion[] one = {new WorkCompletion()};
        return cq.poll(one) == 0 ? null : one[0];
    }

    /** Polls until the CQ stays empty: every completion taken. */
    public int drain() {
        int n = 0;
        while (cq.poll(wcs) > 0) {
            n++;
        }
        return n;
    }

    @Override
    public void close() {
        for (AddressHandle ah : ahs) {
            if (!ah.isDestroyed()) {
                ah.close();
            }
        }
        for (CmId id : ids) {
            if (!id.isDestroyed()) {
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
        }
        drain();
        mr.close();
        cq.close();
        pd.close();
        device.close();
        arena.close();
    }
}
