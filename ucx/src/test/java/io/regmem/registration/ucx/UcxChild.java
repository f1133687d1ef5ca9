package io.regmem.registration.ucx;

import io.regmem.registration.testkit.ChildJvm;
import java.io.IOException;
import java.util.Map;

/** A child JVM ({@link ChildJvm}) running {@link UcxPeerMain}: a UCX listener on the loopback. */
final class UcxChild extends ChildJvm {
    final String address;

    /** A child listening at 127.0.0.1:{@code port}, UCX restricted to {@code tls}, memory from an arena. */
    UcxChild(String tls, int port) throws IOException {
        this(tls, port, "arena", Map.of());
    }

    /**
     * @param memory "arena" or "chunk" (the region in memory from the device's chunk source)
     * @param env    more environment variables for the child (its device's secret, say); an
     *               entry {@code OPTIONS} is passed as the child's device options ({@code k=v,k=v})
     */
    UcxChild(String tls, int port, String memory, Map<String, String> env) throws IOException {
        super(spec(tls, "127.0.0.1:" + port, memory, env));
        this.address = "127.0.0.1:" + port;
    }

    private static Spec spec(String tls, String address, String memory, Map<String, String> env) {
        Spec s = ChildJvm.of(UcxPeerMain.class).args(address, memory, env.getOrDefault("OPTIONS", "")).env("UCX_TLS", tls);
        env.forEach((k, v) -> {
            if (!k.equals("OPTIONS")) {
                s.env(k, v);
            }
        });
        return s;
    }
}
