/**
 * Registration of regmem memory with a transport: devices, protection domains, memory regions with
 * keys and rights, completion queues, queue pairs and CM IDs ({@code io.regmem.registration}); the
 * registration cache, RDMA read/write contexts, the RPC-over-RDMA buffer machinery, and the provider
 * interface ({@code spi}, the provider ABI). The in-process provider {@code soft} is built in; other
 * providers (the {@code io.regmem.ucx} module's {@code ucx}) are found through
 * {@link java.util.ServiceLoader}.
 *
 * <p>Grant native access to this module and to {@code io.regmem.core}:
 * {@code --enable-native-access=io.regmem.core,io.regmem.registration}.
 */
@SuppressWarnings("module") // io.regmem.shm is built after this module
module io.regmem.registration {
    requires transitive io.regmem.core;
    requires transitive org.agrona; // (CompletionAgent is an Agrona Agent)
    requires jdk.jfr;
    requires jdk.net;
    requires transitive java.management; // (the JMX beans of .metrics: their API names its types)
    requires static micrometer.core; // (optional: .metrics' RegmemMeterBinder)

    exports io.regmem.registration;
    exports io.regmem.registration.cache;
    exports io.regmem.registration.faults;
    exports io.regmem.registration.metrics;
    exports io.regmem.registration.rpc;
    exports io.regmem.registration.rw;
    exports io.regmem.registration.spi;
    // The handshake between processes, shared by the providers that connect processes; not API.
    exports io.regmem.registration.link to io.regmem.ucx, io.regmem.shm;
    // Datagrams over UDP, shared by the providers that carry them between processes; not API.
    exports io.regmem.registration.udp to io.regmem.ucx, io.regmem.shm;

    uses io.regmem.registration.spi.RdmaProvider;

    provides io.regmem.registration.spi.RdmaProvider with io.regmem.registration.soft.SoftProvider;
}
