package io.regmem.registration.rpc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * An RPC server whose connections share one receive pool ({@link SharedReceives}): calls on every
 * connection are answered from receives posted once, no connection posts its own, a connection's
 * flush ends none of the others' receives, and the teardown gives every reply back.
 */
@ExtendWith(NoLeaks.class)
class SharedReceivesTest {
    private static final int MAX = 16;
    private static final int DEPTH = 24;
    private static final int CONNECTIONS = 3;
    private static int names;

    private final RdmaDevice devC = Providers.open();
    private final RdmaDevice devS = Providers.open();
    private final ProtectionDomain pdC = devC.allocPd();
    private final ProtectionDomain pdS = devS.allocPd();
    private final BufferPool pool = BufferPool.builder().name("rpc-srq").build();
    private final RpcBuffer serverReplies = RpcBuffer.builder(pdS, pool).maxRequests(MAX).inline(256, 256).build();
    private final SharedReceives shared = new SharedReceives(serverReplies, DEPTH);
    private final CmId listener = devS.createCmId();
    private final String address = Providers.address("rpc-srq-" + (++names));
    private final List<Conn> conns = new ArrayList<>();

    /** One connection: a client transport with receives of its own, a server transport on the shared ones. */
    private final class Conn {
        final CompletionQueue cqC = devC.createCq(512);
        final CompletionQueue cqS = devS.createCq(512);
        final CmId idC = devC.createCmId();
        final CmId idS;
        final RpcBuffer bufC = RpcBuffer.builder(pdC, pool).maxRequests(MAX).inline(256, 256).build();
        final RpcBuffer bufS = RpcBuffer.builder(pdS, pool).maxRequests(MAX).inline(256, 256).build();
        final SendLock lockC = new SendLock();
        final SendLock lockS = new SendLock();
        final Req[] inflight = new Req[1 << 12];
        int answered;
        int wrong;
        final RpcTransport client;
        final RpcTransport server;

        Conn(int n) {
            idC.createQp(pdC, QpInitAttributes.of(cqC).maxSendWr(4 * MAX).maxRecvWr(MAX + 8).signalAll(false));
            idC.connect(address);
            idS = Providers.awaitRequest(listener);
            QueuePair qpS = idS.createQp(pdS, QpInitAttributes.of(cqS).maxSendWr(4 * MAX).srq(shared.srq())
                    .signalAll(false));
            idS.accept();
            client = new RpcTransport(idC.qp(), cqC, bufC, lockC, new RpcTransport.Handler() {
                @Override
                public void received(Rep rep, long bytes) {
                    int xid = rep.buffer().segment().get(ValueLayout.JAVA_INT, 0);
                    if (rep.buffer().segment().get(ValueLayout.JAVA_INT, 4) != xid * 3 + n) {
                        wrong++;
                    }
                    Req req = inflight[xid];
                    req.attachReply(rep);
                    client().replyDone(req);
                    client().postRecvs(MAX);
                }

                @Override
                public void completed(Req req) {
                    answered++;
                    bufC.put(req);
                }
            }, 8, 4);
            server = new RpcTransport(qpS, cqS, bufS, shared, lockS, new RpcTransport.Handler() {
                @Override
                public void received(Rep rep, long bytes) {
                    int xid = rep.buffer().segment().get(ValueLayout.JAVA_INT, 0);
                    shared.buffer().repPut(rep); // a shared reply goes back to the shared buffer
                    Req reply = bufS.get();
                    reply.header().segment().set(ValueLayout.JAVA_INT, 0, xid);
                    reply.header().segment().set(ValueLayout.JAVA_INT, 4, xid * 3 + n);
                    lockS.lock();
                    try {
                        server().send(reply, 8, 0, false);
                    } finally {
                        lockS.unlock();
                    }
                    server().postRecvs(MAX);
                }

                @Override
                public void completed(Req req) {
                    bufS.put(req);
                }
            }, 8, 4);
        }

        RpcTransport client() {
            return client;
        }

        RpcTransport server() {
            return server;
        }

        boolean call(int xid) {
            Req req = bufC.get();
            if (req == null) {
                return false;
            }
            req.header().segment().set(ValueLayout.JAVA_INT, 0, xid);
            inflight[xid] = req;
            client.postRecvs(MAX);
            lockC.lock();
            try {
                if (!client.send(req, 8, 0, true)) {
                    bufC.put(req);
                    return false;
                }
                return true;
            } finally {
                lockC.unlock();
            }
        }

        void poll() {
            server.poll();
            client.poll();
        }

        void close() {
            if (server.isConnected()) {
                idC.disconnect();
                server.flushDisconnect();
                client.flushDisconnect();
            }
            assertThat(bufC.destroy()).isEmpty();
            assertThat(bufS.destroy()).isEmpty();
            idC.destroyQp();
            idS.destroyQp();
            idC.close();
            idS.close();
            cqC.close();
            cqS.close();
        }
    }

    SharedReceivesTest() {
        listener.listen(address);
        for (int i = 0; i < CONNECTIONS; i++) {
            conns.add(new Conn(i));
        }
        assertThat(conns.getFirst().server.postRecvs(MAX)).as("the first top-up fills the shared queue").isEqualTo(DEPTH);
        assertThat(conns.get(1).server.postRecvs(MAX)).as("a full queue takes nothing more").isZero();
    }

    @AfterEach
    void tearDown() {
        for (Conn c : conns) {
            c.close();
        }
        listener.close();
        shared.close();
        shared.close();
        assertThat(serverReplies.freeReplies()).as("every shared reply is back").isEqualTo(serverReplies.replies());
        assertThat(serverReplies.destroy()).isEmpty();
        pdC.close();
        pdS.close();
        devC.close();
        devS.close();
        assertThat(pool.closeAndReport().clean()).isTrue();
    }

    /** Runs {@code calls} calls on each of {@code which}, up to 4 in flight each. */
    private void run(List<Conn> which, int calls) {
        int[] sent = new int[which.size()];
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (which.stream().anyMatch(c -> c.answered < calls)) {
            for (int i = 0; i < which.size(); i++) {
                Conn c = which.get(i);
                if (sent[i] < calls && sent[i] - c.answered < 4 && c.call(sent[i])) {
                    sent[i]++;
                }
                c.poll();
            }
            assertThat(System.nanoTime()).as("calls answered within 30 s").isLessThan(deadline);
        }
    }

    private static void assertRdma(org.assertj.core.api.ThrowableAssert.ThrowingCallable call, Errno errno, String... parts) {
        assertThatThrownBy(call).isInstanceOfSatisfying(RdmaException.class, e -> {
            assertThat(e.errno()).isEqualTo(errno);
            assertThat(e.getMessage()).contains(parts);
        });
    }

    @Test
    void callsOnEveryConnectionAreAnsweredFromReceivesPostedOnce() {
        long before = shared.srq().taken();
        run(conns, 300);
        for (Conn c : conns) {
            assertThat(c.wrong).isZero();
            assertThat(c.server.qp().outstandingRecvs()).as("no connection posts receives of its own").isZero();
        }
        assertThat(shared.srq().taken() - before).as("every call took a shared receive").isEqualTo(3L * 300);
        assertThat(shared.posted()).isBetween(1, DEPTH);
        assertThat(conns.getFirst().server.receiveCount()).isEqualTo(shared.posted());
        assertThat(serverReplies.replies()).as("replies made for the shared queue only").isLessThanOrEqualTo(DEPTH + 8);
    }

    @Test
    void aConnectionsFlushEndsNoneOfTheSharedReceivesTheOthersUse() {
        run(conns, 50);
        Conn gone = conns.get(1);
        int posted = shared.posted();
        gone.idC.disconnect();
        gone.server.flushDisconnect();
        gone.client.flushDisconnect();
        assertThat(shared.posted()).as("at most the one receive the QP had taken is flushed").isBetween(posted - 1, posted);
        assertThat(shared.srq().queued()).isEqualTo(shared.posted());
        assertThat(gone.server.postRecvs(MAX)).as("a flushed transport posts nothing").isZero();
        conns.get(0).answered = 0;
        conns.get(2).answered = 0;
        run(List.of(conns.get(0), conns.get(2)), 100);
        assertThat(conns.get(0).wrong + conns.get(2).wrong).isZero();
    }

    @Test
    void misuseIsRefusedAndChangesNothing() {
        assertRdma(() -> new SharedReceives(serverReplies, 0), Errno.EINVAL, "depth 0");
        assertRdma(() -> new SharedReceives(serverReplies, MAX + RpcBuffer.EXTRA_REPS + 1), Errno.EINVAL, "is outside [1, 56]");
        Conn c = conns.getFirst();
        assertRdma(() -> new RpcTransport(c.idC.qp(), c.cqC, c.bufC, shared, c.lockC, new RpcTransport.Handler() {
            @Override
            public void received(Rep rep, long bytes) {
            }
        }, 8, 4), Errno.EINVAL, "takes its receives from its own queue");
        assertRdma(() -> new RpcTransport(c.idS.qp(), c.cqS, serverReplies, shared, c.lockS, new RpcTransport.Handler() {
            @Override
            public void received(Rep rep, long bytes) {
            }
        }, 8, 4), Errno.EINVAL, "a buffer of its own");
        assertRdma(shared::close, Errno.EBUSY, "queue pair(s) using it");
        assertThat(shared.posted()).isEqualTo(DEPTH);
        run(conns, 20);
    }
}
