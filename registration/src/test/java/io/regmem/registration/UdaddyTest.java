package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * librdmacm's {@code examples/udaddy.c} ported: a UDP port space listener accepts each client's
 * request with a UD QP of its own (rdma_cm's UD address exchange, SIDR on InfiniBand); each client's
 * {@code ESTABLISHED} event carries the server QP's {@code UdParam}, from which it makes an address
 * handle and sends {@code message_count} messages; the server answers each client through an address
 * handle made from a received completion ({@code ibv_create_ah_from_wc}) and the completion's source
 * QP. Nothing links the QPs: a client's disconnect leaves every UD QP ready, and the server's side
 * reports no event of its own.
 */
@ExtendWith(NoLeaks.class)
class UdaddyTest {
    private static final AtomicInteger NAMES = new AtomicInteger();
    private final List<CmId> ids = new ArrayList<>();
    private UdNode server;
    private final List<UdNode> clients = new ArrayList<>();
    private final List<CmEvent> events = new ArrayList<>();
    private final AtomicInteger requests = new AtomicInteger();

    @BeforeEach
    void setUp() {
        try (RdmaDevice probe = Providers.open()) {
            Assumptions.assumeTrue(probe.supportsDatagrams(), Providers.NAME + " carries no datagrams");
        }
        server = new UdNode();
    }

    @AfterEach
    void tearDown() {
        for (CmId id : ids) {
            if (!id.isDestroyed()) {
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
        }
        for (UdNode c : clients) {
            c.close();
        }
        if (server != null) {
            server.close();
        }
    }

    private CmId track(CmId id) {
        ids.add(id);
        id.onEvent(e -> {
            events.add(e);
            return false;
        });
        return id;
    }

    private CmId listener(boolean accept) {
        CmId listen = track(server.device.createCmId(PortSpace.UDP));
        listen.onEvent(e -> {
            events.add(e);
            if (e.type() == CmEvent.Type.CONNECT_REQUEST) {
                CmId request = e.id();
                ids.add(request);
                if (!accept) {
                    request.reject("full".getBytes());
                    return false;
                }
                QueuePair qp = request.createQp(server.pd, QpInitAttributes.of(server.cq).maxRecvWr(64));
                int base = 20 * requests.getAndIncrement(); // each request's QP receives into slots of its own
                for (int i = 0; i < 20; i++) {
                    server.postRecv(qp, base + i, 40 + 100);
                }
                request.accept();
            }
            return false;
        });
        listen.bindAddr(Providers.bindAddress("udaddy-" + NAMES.incrementAndGet()));
        listen.listen();
        return listen;
    }

    @Test
    void udaddy() {
        int messageCount = 10;
        CmId listen = listener(true);
        Map<Integer, UdNode> byQpn = new HashMap<>();
        List<CmId> clientIds = new ArrayList<>();
        for (int c = 0; c < 2; c++) {
            UdNode node = new UdNode();
            clients.add(node);
            CmId id = track(node.device.createCmId(PortSpace.UDP));
            QueuePair qp = id.createQp(node.pd, QpInitAttributes.of(node.cq).maxRecvWr(64));
            for (int i = 0; i < messageCount; i++) {
                node.postRecv(qp, i, 40 + 100);
            }
            id.connect(listen.localAddress(), new byte[] {(byte) c});
            assertThat(id.connState()).isEqualTo(CmId.ConnState.CONNECTED);
            byQpn.put(qp.qpNum(), node);
            clientIds.add(id);
        }
        List<CmEvent> established = events.stream().filter(e -> e.type() == CmEvent.Type.ESTABLISHED).toList();
        assertThat(established).as("one ESTABLISHED per client, none at the server").hasSize(2)
                .allSatisfy(e -> assertThat(clientIds).contains(e.id()));
        for (int c = 0; c < 2; c++) {
            CmId id = clientIds.get(c);
            UdNode node = clients.get(c);
            UdParam ud = established.stream().filter(e -> e.id() == id).findFirst().orElseThrow().ud();
            assertThat(ud.ah()).isEqualTo(server.device.datagramAddress());
            assertThat(ud.qkey()).isEqualTo(QpInitAttributes.RDMA_UDP_QKEY);
            AddressHandle ah = node.ah(ud.ah());
            WorkRequest wr = new WorkRequest(1);
            for (int m = 0; m < messageCount; m++) {
                node.slot(30 + m).asSlice(0, 100).fill((byte) (16 * c + m));
                id.qp().postSend(node.send(wr, 30 + m, 100).ud(ah, ud.qpNum(), ud.qkey()));
                assertThat(node.await().status()).isEqualTo(WcStatus.SUCCESS);
            }
        }
        // the server: every message, then an answer to each through an AH made from its completion
        WorkRequest reply = new WorkRequest(1);
        Map<Integer, Integer> perClient = new HashMap<>();
        List<WorkCompletion> received = new ArrayList<>();
        received.addAll(UdNode.collect(2 * messageCount, server));
        assertThat(received).hasSize(2 * messageCount);
        for (WorkCompletion wc : received) {
            assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(wc.byteLen()).isEqualTo(140);
            UdNode from = byQpn.get(wc.srcQp());
            assertThat(from).as("a client's QP number").isNotNull();
            int c = clients.indexOf(from);
            int nth = perClient.merge(c, 1, Integer::sum) - 1;
            assertThat(server.slot((int) wc.wrId()).get(ValueLayout.JAVA_BYTE, 40 + 99)).isEqualTo((byte) (16 * c + nth));
            AddressHandle back = server.ahFromWc(wc);
            server.slot(60).set(ValueLayout.JAVA_INT_UNALIGNED, 0, 1000 + nth);
            wc.qp().postSend(server.send(reply, 60, 4).ud(back, wc.srcQp(), QpInitAttributes.RDMA_UDP_QKEY));
            WorkCompletion sent = server.take();
            assertThat(sent.opcode()).isEqualTo(Opcode.SEND);
            assertThat(sent.status()).isEqualTo(WcStatus.SUCCESS);
        }
        for (UdNode node : clients) {
            for (int m = 0; m < messageCount; m++) {
                WorkCompletion wc = node.await();
                assertThat(wc.status()).isEqualTo(WcStatus.SUCCESS);
                assertThat(wc.byteLen()).isEqualTo(44);
            }
        }
        // nothing links the QPs: a client's disconnect leaves every UD QP ready
        clientIds.get(0).disconnect();
        assertThat(clientIds.get(0).connState()).isEqualTo(CmId.ConnState.DISCONNECTED);
        assertThat(clientIds.get(0).qp().state()).isEqualTo(QueuePair.State.RTS);
        for (CmId id : ids) {
            if (id.qp() != null) {
                assertThat(id.qp().state()).isEqualTo(QueuePair.State.RTS);
            }
        }
        assertThat(events).noneMatch(e -> e.type() == CmEvent.Type.DISCONNECTED);
    }

    @Test
    void aRejectedUdRequestIsRejectedWithTheReason() {
        CmId listen = listener(false);
        UdNode node = new UdNode();
        clients.add(node);
        CmId id = track(node.device.createCmId(PortSpace.UDP));
        id.createQp(node.pd, QpInitAttributes.of(node.cq));
        id.connect(listen.localAddress());
        assertThat(id.connState()).isEqualTo(CmId.ConnState.DISCONNECTED);
        assertThat(events).anyMatch(e -> e.type() == CmEvent.Type.REJECTED && e.id() == id);
        assertThat(new String(id.privateData())).isEqualTo("full");
        assertThat(id.qp().state()).isEqualTo(QueuePair.State.RTS);
        CmId noQp = track(node.device.createCmId(PortSpace.UDP));
        assertRdma(() -> noQp.connect(listen.localAddress()), Errno.EINVAL, "needs a QP");
    }
}
