package io.regmem.registration.rpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.core.ScatterList;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The peer of an RPC transport dies at a random point of its calls, many rounds: before a Send,
 * while it RDMA-READs a call's chunk, while the client's LOCAL_INVs of a reply's MRs are under way.
 * Each call registers its chunk for that call only (FRWR: REG_MR chained before the Send, LOCAL_INV
 * before the call completes), as the kernel's client does. Whatever the point, every call ends
 * exactly once (completed, or aborted by the flush), every request, reply and MR comes back, the
 * failure is reported as an error (never an exception out of the transport), and the devices close
 * clean.
 */
@ExtendWith(NoLeaks.class)
class RpcPeerDeathTest {
    private static final int MAX = 8;
    private static final int CHUNK = 4096;
    private static final long INV_TAG = 1L << 40;
    private static int names;

    @Test
    void aPeerDyingAnywhereInACallGivesEverythingBackExactlyOnce() {
        SplittableRandom random = new SplittableRandom(42);
        int rounds = Providers.NAME.equals("ucx") ? 12 : 40;
        int roundsWithAborts = 0;
        int roundsWithFlushedInvalidations = 0;
        for (int round = 0; round < rounds; round++) {
            try (Fixture f = new Fixture()) {
                f.run(random.nextInt(4, 400), random.nextInt(3));
                roundsWithAborts += f.aborted.get() > 0 ? 1 : 0;
                roundsWithFlushedInvalidations += f.flushedInvalidations.get() > 0 ? 1 : 0;
            }
        }
        assertThat(roundsWithAborts).as("rounds where calls waited for replies that never came").isPositive();
        assertThat(roundsWithFlushedInvalidations).as("rounds where the peer died during a LOCAL_INV").isPositive();
    }

    /** A client and a server transport; the server reads each call's chunk by RDMA READ, then replies. */
    private static final class Fixture implements AutoCloseable {
        final RdmaDevice devC = Providers.open();
        final RdmaDevice devS = Providers.open();
        final Arena arena = Arena.ofShared();
        final ProtectionDomain pdC = devC.allocPd();
        final ProtectionDomain pdS = devS.allocPd();
        final CompletionQueue cqC = devC.createCq(1024);
        final CompletionQueue cqS = devS.createCq(1024);
        final BufferPool pool = BufferPool.builder().name("rpc-peer-death").build();
        final CmId listener = devS.createCmId();
        final CmId idC = devC.createCmId();
        final CmId idS;
        final QueuePair qpC;
        final QueuePair qpS;
        final RpcBuffer bufC = RpcBuffer.builder(pdC, pool).maxRequests(MAX).inline(256, 256).build();
        final RpcBuffer bufS = RpcBuffer.builder(pdS, pool).maxRequests(MAX).inline(256, 256).build();
        final SendLock lockC = new SendLock();
        final SendLock lockS = new SendLock();
        final MemorySegment chunks = arena.allocate((long) MAX * CHUNK, 4096);
        final DmaMapping chunksMap;
        final MemorySegment sink = arena.allocate((long) MAX * CHUNK, 4096);
        final MemoryRegion sinkMr;
        final MemoryRegion[] mrOf = new MemoryRegion[MAX];
        final WorkRequest[] reg = new WorkRequest[MAX];
        final WorkRequest[] inv = new WorkRequest[MAX];
        final ScatterList sg = new ScatterList(1, false, 1);
        final AtomicInteger completed = new AtomicInteger();
        final AtomicInteger aborted = new AtomicInteger();
        final AtomicInteger failures = new AtomicInteger();
        final AtomicInteger flushedInvalidations = new AtomicInteger();
        final RpcTransport client;
        final RpcTransport server;
        boolean serverDead;

        Fixture() {
            String name = Providers.address("rpc-death-" + (++names));
            listener.listen(name);
            qpC = idC.createQp(pdC, QpInitAttributes.of(cqC).maxSendWr(8 * MAX).maxRecvWr(MAX + 8).signalAll(false));
            idC.connect(name);
            idS = Providers.awaitRequest(listener);
            qpS = idS.createQp(pdS, QpInitAttributes.of(cqS).maxSendWr(8 * MAX).maxRecvWr(MAX + 8).signalAll(false));
            idS.accept();
            Providers.awaitState(idC, CmId.ConnState.CONNECTED);
            chunksMap = devC.dmaMap(chunks);
            sinkMr = pdS.register(sink, Access.LOCAL_WRITE);
            for (int i = 0; i < MAX; i++) {
                reg[i] = new WorkRequest(1);
                inv[i] = new WorkRequest(1);
            }
            client = new RpcTransport(qpC, cqC, bufC, lockC, new RpcTransport.Handler() {
                @Override
                public void received(Rep rep, long bytes) {
                    int id = rep.buffer().segment().get(ValueLayout.JAVA_INT, 0);
                    Req req = findOwned(id);
                    if (req == null) {
                        bufC.repPut(rep);
                        return;
                    }
                    req.attachReply(rep);
                    // close the call's chunk before it completes
                    inv[id].reset().opcode(Opcode.LOCAL_INV).invalidateRkey(mrOf[id].rkey()).signaled(true)
                            .wrId(RpcTransport.USER_TAG | INV_TAG | id);
                    qpC.postSend(inv[id]);
                }

                @Override
                public void rwCompleted(long id, WcStatus status) {
                    int i = (int) (id & ~INV_TAG);
                    if (status == WcStatus.SUCCESS) {
                        client.mrPut(findOwned(i), mrOf[i]);
                    } else {
                        flushedInvalidations.incrementAndGet();
                    }
                    mrOf[i] = null;
                    client.replyDone(findOwned(i));
                }

                @Override
                public void completed(Req req) {
                    completed.incrementAndGet();
                    bufC.put(req);
                }

                @Override
                public void aborted(Req req) {
                    aborted.incrementAndGet();
                    mrOf[req.id()] = null;
                    bufC.put(req);
                }

                @Override
                public void disconnected(WcStatus cause) {
                    failures.incrementAndGet();
                }
            }, 1, 2);
            server = new RpcTransport(qpS, cqS, bufS, lockS, new RpcTransport.Handler() {
                @Override
                public void received(Rep rep, long bytes) {
                    MemorySegment h = rep.buffer().segment();
                    int id = h.get(ValueLayout.JAVA_INT, 0);
                    long addr = h.get(ValueLayout.JAVA_LONG, 8);
                    int rkey = qpS.importRemoteKey(h.asSlice(24, h.get(ValueLayout.JAVA_INT, 4)));
                    bufS.repPut(rep);
                    // read the call's chunk; reply once the READ completed
                    qpS.postSend(new WorkRequest(1).wrId(RpcTransport.USER_TAG | id).opcode(Opcode.RDMA_READ).signaled(true)
                            .addSge(sink.address() + (long) id * CHUNK, CHUNK, sinkMr.lkey()).remote(addr, rkey));
                    server.postRecvs(MAX);
                }

                @Override
                public void rwCompleted(long id, WcStatus status) {
                    if (status != WcStatus.SUCCESS) {
                        return;
                    }
                    Req reply = bufS.get();
                    reply.header().segment().set(ValueLayout.JAVA_INT, 0, (int) id);
                    lockS.lock();
                    try {
                        if (!server.send(reply, 8, 0, false)) {
                            bufS.put(reply);
                        }
                    } finally {
                        lockS.unlock();
                    }
                }

                @Override
                public void completed(Req req) {
                    bufS.put(req);
                }
            }, 1, 2);
            server.postRecvs(MAX);
        }

        /** The owned client request with this id, or null. */
        Req findOwned(int id) {
            Req[] found = new Req[1];
            bufC.forEachReq(r -> {
                if (r.id() == id && r.isOwned()) {
                    found[0] = r;
                }
            });
            return found[0];
        }

        /** Sends one call whose chunk is registered for it alone; false if nothing was free. */
        boolean call() {
            Req req = bufC.get();
            if (req == null) {
                return false;
            }
            MemoryRegion mr = client.mrGet(req);
            if (mr == null) {
                bufC.put(req);
                return false;
            }
            int id = req.id();
            sg.clear().add(chunks.address() + (long) id * CHUNK, CHUNK);
            mr.mapSg(sg, 1, 0, 4096);
            int key = MemoryRegion.incRkey(mr.rkey());
            reg[id].reset().regMr(mr, key, Access.mask(Access.REMOTE_READ));
            MemorySegment h = req.header().segment();
            h.set(ValueLayout.JAVA_INT, 0, id);
            h.set(ValueLayout.JAVA_LONG, 8, mr.address());
            h.set(ValueLayout.JAVA_INT, 4, mr.exportRemoteKey(key, h.asSlice(24, mr.exportedKeySize())));
            mrOf[id] = mr;
            client.postRecvs(MAX);
            boolean sent = false;
            lockC.lock();
            try {
                sent = client.send(req, 24 + mr.exportedKeySize(), 0, true, reg[id]);
            } catch (io.regmem.core.RdmaException refused) {
                // the QP is in the error state: nothing was posted
            } finally {
                lockC.unlock();
                if (!sent) {
                    client.mrPut(req, mr);
                    mrOf[id] = null;
                    bufC.put(req);
                }
            }
            return sent;
        }

        /**
         * Calls until {@code killAfter} completions were handled, then the server dies at {@code phase}
         * of a round (0: right after the client's Sends, 1: after the server's poll, 2: after the
         * client's); then the flush.
         */
        void run(int killAfter, int phase) {
            int sent = 0;
            int handled = 0;
            int idle = 0;
            while (client.isConnected() && idle < 100_000) {
                while (!serverDead && call()) {
                    sent++;
                }
                maybeKill(handled, killAfter, phase, 0);
                int n = serverDead ? 0 : server.poll();
                maybeKill(handled + n, killAfter, phase, 1);
                n += client.poll();
                handled += n;
                maybeKill(handled, killAfter, phase, 2);
                idle = n == 0 ? idle + 1 : 0;
            }
            assertThat(client.isConnected()).as("the client saw its peer die (sent %d, handled %d)", sent, handled).isFalse();
            client.flushDisconnect();
            assertThat(completed.get() + aborted.get()).as("every call ended exactly once").isEqualTo(sent);
            assertThat(bufC.freeRequests()).isEqualTo(MAX);
            assertThat(bufS.freeRequests()).isEqualTo(MAX);
            assertThat(bufC.freeReplies()).isEqualTo(bufC.replies());
            assertThat(bufS.freeReplies()).isEqualTo(bufS.replies());
            assertThat(client.mrs()).as("every MR destroyed by the flush").isZero();
            assertThat(failures.get()).as("the failure is reported at most once").isLessThanOrEqualTo(1);
            for (MemoryRegion mr : mrOf) {
                assertThat(mr).isNull();
            }
        }

        private void maybeKill(int handled, int killAfter, int phase, int now) {
            if (!serverDead && handled >= killAfter && phase == now) {
                serverDead = true; // gone: its connection drops, it answers nothing more
                idS.disconnect();
                server.flushDisconnect();
            }
        }

        @Override
        public void close() {
            assertThat(bufC.destroy()).isEmpty();
            assertThat(bufS.destroy()).isEmpty();
            idC.disconnect();
            idC.destroyQp();
            idS.destroyQp();
            idC.close();
            idS.close();
            listener.close();
            sinkMr.close();
            chunksMap.close();
            cqC.close();
            cqS.close();
            pdC.close();
            pdS.close();
            assertThat(devC.resources().survivors()).as(devC.resources().report()).isEmpty();
            assertThat(devS.resources().survivors()).as(devS.resources().report()).isEmpty();
            devC.close();
            devS.close();
            assertThat(pool.closeAndReport().clean()).isTrue();
            arena.close();
        }
    }
}
