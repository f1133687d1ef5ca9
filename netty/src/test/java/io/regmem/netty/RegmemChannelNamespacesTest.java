package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.ChildJvm;
import io.regmem.registration.testkit.NamespacedPair;
import io.regmem.registration.testkit.NoLeaks;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The regmem transport across two network namespaces joined by a veth pair (as across hosts: ucx over
 * TCP, which stands in for a NIC here): a Netty echo server and a gRPC server in one namespace, their
 * clients in the other, each in a process of its own, a byte-checked stream and gRPC's unary and
 * streaming calls between them.
 */
@ExtendWith(NoLeaks.class)
class RegmemChannelNamespacesTest {
    private static final String SECRET = "netty-namespaces-test-secret-0123456789abcdef";

    private static void across(Class<?> server, String mode) throws Exception {
        try (NamespacedPair.NetworkNamespaces ns = NamespacedPair.networkNamespaces();
             ChildJvm s = ChildJvm.of(server).under(List.of("ip", "netns", "exec", ns.a)).env("REGMEM_SECRET", SECRET)
                     .args("ucx", NamespacedPair.NetworkNamespaces.A_ADDRESS).start()) {
            String port = s.expect("PORT ").substring("PORT ".length());
            try (ChildJvm c = ChildJvm.of(NamespaceClientMain.class).under(List.of("ip", "netns", "exec", ns.b))
                    .env("REGMEM_SECRET", SECRET).args(mode, "ucx", NamespacedPair.NetworkNamespaces.A_ADDRESS, port).start()) {
                assertThat(c.find("")).as(c.output()).isEqualTo("OK");
                c.expect("CLEAN");
            }
            s.finish();
        }
    }

    @Test
    void aNettyEchoRunsAcrossTwoNetworkNamespacesOverUcx() throws Exception {
        across(NettyEchoServerMain.class, "netty");
    }

    @Test
    void grpcCallsRunAcrossTwoNetworkNamespacesOverUcx() throws Exception {
        across(GrpcServerMain.class, "grpc");
    }
}
