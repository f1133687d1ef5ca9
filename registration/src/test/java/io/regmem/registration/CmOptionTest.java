package io.regmem.registration;

import static io.regmem.registration.ObjectModelTest.assertRdma;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import io.regmem.registration.testkit.UdNode;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code rdma_set_option} and {@code rdma_set_service_type} on the provider under test
 * ({@code CmId.setOption}): the defaults, the ranges and states, what is refused rather than
 * ignored, each failed call changing nothing; {@code REUSEADDR} 0 refusing a port that a closed
 * connection still holds (TIME_WAIT) where 1 takes it; {@code TOS} in a datagram's GRH on soft.
 */
@ExtendWith(NoLeaks.class)
class CmOptionTest {
    private RdmaDevice dev;

    @BeforeEach
    void setUp() {
        dev = Providers.open();
    }

    @AfterEach
    void tearDown() {
        for (CmId id : dev.resources().survivors(CmId.class)) {
            id.close();
        }
        dev.close();
    }

    @Test
    void defaultsRangesAndRefusalsEachChangingNothing() {
        CmId id = dev.createCmId();
        assertThat(id.option(CmOption.REUSEADDR)).isEqualTo(1);
        assertThat(id.option(CmOption.AFONLY)).isZero();
        assertThat(id.option(CmOption.TOS)).isZero();
        assertThat(id.option(CmOption.ACK_TIMEOUT)).isEqualTo(-1);
        assertRdma(() -> id.setOption(CmOption.REUSEADDR, 2), Errno.EINVAL, "0 or 1");
        assertRdma(() -> id.setOption(CmOption.TOS, 256), Errno.EINVAL, "0 to 255");
        assertRdma(() -> id.setOption(CmOption.TOS, -1), Errno.EINVAL);
        assertRdma(() -> id.setOption(CmOption.AFONLY, 1), Errno.EOPNOTSUPP, "dual-stack");
        assertRdma(() -> id.setOption(CmOption.ACK_TIMEOUT, 14), Errno.EOPNOTSUPP, "no transport ACK timer");
        assertRdma(() -> id.setOption(null, 0), Errno.EINVAL);
        assertRdma(() -> id.option(null), Errno.EINVAL);
        assertThat(id.option(CmOption.REUSEADDR)).isEqualTo(1);
        assertThat(id.option(CmOption.TOS)).isZero();
        id.setOption(CmOption.AFONLY, 0);
        id.setOption(CmOption.TOS, 0xB8);
        id.setOption(CmOption.REUSEADDR, 0);
        assertThat(id.option(CmOption.TOS)).isEqualTo(0xB8);
        assertThat(id.option(CmOption.REUSEADDR)).isZero();
        id.bindAddr(Providers.NAME.equals("shm") || Providers.NAME.equals("ucx") ? "127.0.0.1:0" : "opt-" + System.nanoTime());
        assertRdma(() -> id.setOption(CmOption.REUSEADDR, 1), Errno.EINVAL, "before the ID binds");
        assertThat(id.option(CmOption.REUSEADDR)).isZero();
        id.setOption(CmOption.TOS, 0x10); // the service type may change at any time
        assertThat(id.option(CmOption.TOS)).isEqualTo(0x10);
    }

    @Test
    void reuseAddressZeroRefusesAPortAClosedConnectionStillHolds() throws IOException {
        Assumptions.assumeTrue(Providers.NAME.equals("shm") || Providers.NAME.equals("ucx"), "soft binds names, not ports");
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
            try (Socket client = new Socket(InetAddress.getLoopbackAddress(), port); Socket accepted = s.accept()) {
                accepted.close(); // the port's side closes first: its connection waits in TIME_WAIT
                assertThat(client.getInputStream().read()).isEqualTo(-1);
            }
        }
        String address = "127.0.0.1:" + port;
        CmId strict = dev.createCmId();
        strict.setOption(CmOption.REUSEADDR, 0);
        assertRdma(() -> strict.bindAddr(address), Errno.EADDRINUSE);
        assertThat(strict.connState()).isEqualTo(CmId.ConnState.IDLE);
        CmId reusing = dev.createCmId();
        reusing.bindAddr(address);
        assertThat(reusing.localAddress()).isEqualTo(address);
    }

    @Test
    void theTypeOfServiceIsTheTrafficClassOfTheIdsDatagrams() {
        Assumptions.assumeTrue(dev.supportsDatagrams(), Providers.NAME + " carries no datagrams");
        try (UdNode a = new UdNode(); UdNode b = new UdNode()) {
            QueuePair server = b.qp();
            QueuePair client = a.qp();
            b.postRecv(server, 0, 4096);
            b.postRecv(server, 1, 4096);
            AddressHandle ah = a.ah(b.device.datagramAddress());
            WorkRequest wr = new WorkRequest(1);
            client.postSend(a.send(wr, 2, 8).ud(ah, server.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
            assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(b.await(a).status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(b.slot(0).get(ValueLayout.JAVA_BYTE, 21)).as("TOS 0 by default").isZero();
            client.cmId().setOption(CmOption.TOS, 0xB8);
            client.postSend(a.send(wr, 2, 8).ud(ah, server.qpNum(), QpInitAttributes.RDMA_UDP_QKEY));
            assertThat(a.await(b).status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(b.await(a).status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(b.slot(1).get(ValueLayout.JAVA_BYTE, 21)).as("the IPv4 header's TOS byte").isEqualTo((byte) 0xB8);
        }
    }
}
