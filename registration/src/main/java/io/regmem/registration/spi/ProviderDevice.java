package io.regmem.registration.spi;

import io.regmem.core.ChunkSource;
import io.regmem.registration.DeviceAttributes;
import java.net.InetSocketAddress;

/**
 * What a provider implements for one device. The verbs classes ({@code RdmaDevice},
 * {@code ProtectionDomain}, {@code MemoryRegion}, {@code QueuePair}, {@code CompletionQueue},
 * {@code CmId}) keep everything that is the same for every provider: ownership and counts,
 * {@code EBUSY} rules, the resource tracker, argument checks, memory keys (generations, lookup),
 * all-or-nothing posting into the queues, the error state and its flush. They call the provider
 * for the rest, through this interface and the objects it creates.
 *
 * <p><b>Threads.</b> The verbs layer serializes creation and destruction per device; data-path
 * calls ({@link ProviderQp}, {@link ProviderCq}) come from any thread. A provider may run threads
 * of its own (progress, callbacks) and call the contexts from them.
 */
public interface ProviderDevice {

    /** The device's limits. */
    DeviceAttributes attributes();

    /**
     * Registers memory the verbs layer accepted: a region over a segment ({@code ib_reg_mr}), a
     * fast-registration MR ({@code ib_alloc_mr}, which maps nothing yet) or a memory window's view.
     *
     * @return the provider's handle, kept by the region until it is deregistered
     * @throws io.regmem.core.RdmaException {@link io.regmem.core.Errno#EOPNOTSUPP} for a kind the
     *                                      transport cannot carry; nothing is registered then
     */
    ProviderMr registerMemory(MrContext mr);

    /** Creates the provider's half of a new queue pair (INIT state, not connected). */
    ProviderQp createQp(QpContext qp);

    /** Creates the provider's half of a new completion queue. */
    ProviderCq createCq(CqContext cq);

    /** Creates the provider's half of a new connection-manager ID (also for incoming requests). */
    ProviderCm createCmId(CmContext id);

    /**
     * True if this provider carries datagrams: unreliable-datagram QPs ({@link QpContext#qpType()}
     * {@code UD}) and their sends to address handles. Default false: the verbs layer then refuses
     * {@code PortSpace.UDP} IDs with {@code EOPNOTSUPP} and never asks this provider for a UD QP.
     */
    default boolean datagrams() {
        return false;
    }

    /**
     * Where peers address this device's UD QPs (its GID as an IP address, and a port where the
     * provider needs one; soft: 127.0.0.1, port 0). Asked only when {@link #datagrams()} is true.
     */
    default InetSocketAddress datagramEndpoint() {
        throw new UnsupportedOperationException("no datagrams");
    }

    /**
     * The verbs layer: where this device counts the datagrams it drops before they reach a QP
     * ({@link DatagramDrops}); called once, after the device opened. Default: ignored (a provider
     * whose datagrams never arrive from outside has no such drops).
     */
    default void countDropsIn(DatagramDrops sink) {
    }

    /**
     * Waits until no access to memory that began before this call is still in progress. The verbs
     * layer calls it after it made keys or mappings invalid (revoke, local invalidation, window
     * unbind, DMA unmap) so that, when its call returns, the memory is no longer touched.
     */
    void quiesce();

    /**
     * One round of what the device's progress thread does ({@code progressThread=true}): execute,
     * deliver and reap what its queue pairs have pending, without waiting; the work done (0: nothing
     * was pending). Any thread; it must not block on a QP another thread holds (skip it). The verbs
     * layer's {@code DeviceAgent} calls it under the application's duty cycle. Default: nothing.
     */
    default int progressRound() {
        return 0;
    }

    /** Releases the provider's resources; called once, after every verbs object of the device is gone. */
    void close();

    /**
     * Memory the transport allocates itself, registered with it from birth (UCX:
     * {@code UCP_MEM_MAP_ALLOCATE}), or null if the provider has none: the source behind
     * {@code RdmaDevice.chunkSource()}. A region registered over such memory
     * reuses the transport's registration instead of making one.
     */
    default ChunkSource chunkSource() {
        return null;
    }
}
