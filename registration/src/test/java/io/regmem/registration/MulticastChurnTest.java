package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Membership churn under a running multicast stream: while a publisher sends sequenced datagrams to
 * a group, a third party keeps making QPs, attaching them (directly or through
 * {@code rdma_join_multicast}), receiving a little, and detaching, leaving or destroying them.
 * Every thread ends without an error; each churned QP sees what it got in order; the two steady
 * members each receive or count every datagram once, in order; nothing is left at the end.
 */
@ExtendWith(NoLeaks.class)
class MulticastChurnTest {

    @Test
    void membersComingAndGoingCostTheSteadyOnesNothing() throws Exception {
        try (RdmaDevice probe = Providers.open()) {
            Assumptions.assumeTrue(probe.supportsDatagrams() && probe.attributes().maxMcastGroups() > 0,
                    Providers.NAME + " has no multicast");
        }
        int count = 20_000;
        InetAddress group = InetAddress.getByName("239.80.0.1");
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean done = new AtomicBoolean();
        AtomicLong churned = new AtomicLong();
        try (UdNode pub = new UdNode(); UdNode s1 = new UdNode(); UdNode s2 = new UdNode(); UdNode churn = new UdNode()) {
            QueuePair sender = pub.qp(new QpInitAttributes().maxSendWr(32));
            List<QueuePair> steady = List.of(s1.qp(), s2.qp());
            long[] received = new long[2];
            List<Thread> threads = new ArrayList<>();
            for (int m = 0; m < 2; m++) {
                UdNode n = m == 0 ? s1 : s2;
                QueuePair q = steady.get(m);
                q.attachMulticast(group);
                for (int i = 0; i < 32; i++) {
                    n.postRecv(q, i, 64);
                }
                int index = m;
                threads.add(Thread.ofPlatform().start(() -> guarded(failure, () -> {
                    WorkRequest r = new WorkRequest(1);
                    WorkCompletion[] wcs = {new WorkCompletion()};
                    long last = -1;
                    for (;;) {
                        boolean finished = done.get(); // (read before the poll, which takes what the group holds for it)
                        if (n.cq.poll(wcs) == 0) {
                            if (finished) {
                                break;
                            }
                            Thread.onSpinWait();
                            continue;
                        }
                        int slot = (int) wcs[0].wrId();
                        long seq = n.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
                        assertThat(seq).isGreaterThan(last);
                        last = seq;
                        received[index]++;
                        q.postRecv(r.reset().wrId(slot).addSge(n.slot(slot).address(), 64, n.mr.lkey()));
                    }
                })));
            }
            threads.add(Thread.ofPlatform().start(() -> guarded(failure, () -> {
                WorkCompletion[] wcs = {new WorkCompletion()};
                for (int round = 0; !done.get(); round++) {
                    CmId id = churn.device.createCmId(PortSpace.UDP);
                    QueuePair q = id.createQp(churn.pd, QpInitAttributes.of(churn.cq));
                    for (int i = 0; i < 8; i++) {
                        churn.postRecv(q, i, 64);
                    }
                    boolean viaCm = round % 2 == 0;
                    if (viaCm) {
                        id.bindAddr(Providers.bindAddress("127.0.0.1"));
                        id.joinMulticast(group, JoinFlag.FULLMEMBER);
                    } else {
                        q.attachMulticast(group);
                    }
                    long last = -1;
                    for (int polls = 0; polls < 200; polls++) {
                        if (churn.cq.poll(wcs) > 0 && wcs[0].qp() == q && wcs[0].status() == WcStatus.SUCCESS) {
                            long seq = churn.slot((int) wcs[0].wrId()).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
                            assertThat(seq).isGreaterThan(last);
                            last = seq;
                        }
                    }
                    switch (round % 3) {
                        case 0 -> {
                            if (viaCm) {
                                id.leaveMulticast(group);
                            } else {
                                q.detachMulticast(group);
                            }
                        }
                        case 1 -> { } // destroyed while attached: destroying detaches
                        default -> Thread.onSpinWait();
                    }
                    id.destroyQp();
                    id.close();
                    while (churn.cq.poll(wcs) > 0) {
                        // what the churned QP had completed before it went
                    }
                    churned.incrementAndGet();
                }
            })));
            AddressHandle ah = pub.ah(AhAttributes.of(group));
            WorkRequest wr = new WorkRequest(1);
            WorkCompletion[] wcs = {new WorkCompletion()};
            long deadline = System.nanoTime() + 120_000_000_000L;
            int completed = 0;
            for (int s = 0; s < count; s++) {
                pub.slot(s & 63).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, s);
                pub.send(wr, s & 63, 8).ud(ah, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY);
                while (sender.tryPostSend(wr) == QueuePair.BACK_PRESSURED) {
                    completed += drain(pub, wcs);
                    assertThat(System.nanoTime()).isLessThan(deadline);
                }
                completed += drain(pub, wcs);
            }
            while (completed < count) {
                completed += drain(pub, wcs);
                assertThat(System.nanoTime()).isLessThan(deadline);
            }
            done.set(true);
            for (Thread t : threads) {
                t.join(60_000);
                assertThat(t.isAlive()).isFalse();
            }
            assertThat(failure.get()).isNull();
            assertThat(churned.get()).as("members came and went").isPositive();
            for (int m = 0; m < 2; m++) {
                UdNode n = m == 0 ? s1 : s2;
                n.assertAccounted(received[m], count, "steady member " + m);
                assertThat(received[m]).as("steady member %d received", m).isPositive();
            }
            assertThat(sender.state()).isEqualTo(QueuePair.State.RTS);
        }
    }

    private static int drain(UdNode pub, WorkCompletion[] wcs) {
        int n = 0;
        while (pub.cq.poll(wcs) > 0) {
            assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            n++;
        }
        return n;
    }

    private interface Body {
        void run() throws Exception;
    }

    private static void guarded(AtomicReference<Throwable> failure, Body body) {
        try {
            body.run();
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
        }
    }
}
