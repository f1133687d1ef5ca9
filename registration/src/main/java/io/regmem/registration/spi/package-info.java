/**
 * The provider interface: what a transport implements so that the verbs classes of
 * {@code io.regmem.registration} run on it. A provider ({@link io.regmem.registration.spi.RdmaProvider},
 * found through {@link java.util.ServiceLoader}) opens a
 * {@link io.regmem.registration.spi.ProviderDevice}, which registers memory and creates the provider's
 * halves of queue pairs, completion queues and connection-manager IDs. The verbs layer keeps
 * ownership, counts, argument checks, keys, posting into the queues, the error state and its flush;
 * it hands the provider contexts ({@link io.regmem.registration.spi.QpContext},
 * {@link io.regmem.registration.spi.CqContext}, {@link io.regmem.registration.spi.CmContext}) through
 * which it executes requests, completes them and reports connection events. The soft provider
 * ({@code io.regmem.registration.soft}) is written against this package alone, as the test tree's
 * {@code DelegatingProvider} is.
 *
 * <p>A provider reads what it needs of a verbs object from its context as values (a QP's
 * {@link io.regmem.registration.spi.QpContext#name() name},
 * {@link io.regmem.registration.spi.QpContext#isDestroyed() destroyed} flag and
 * {@link io.regmem.registration.spi.QpContext#maxSendWr() depth}; a region's
 * {@link io.regmem.registration.spi.MrContext#access() rights} and
 * {@link io.regmem.registration.spi.MrContext#isIntegrity() kind}; an ID's name and device; whether a
 * QP {@link io.regmem.registration.spi.QpContext#isReady() is ready} or
 * {@link io.regmem.registration.spi.QpContext#isError() in error}, whether an ID
 * {@link io.regmem.registration.spi.CmContext#isConnecting() is connecting}; the fast-reg MR a
 * request invalidates as the {@link io.regmem.registration.spi.MrContext} it was registered with), never
 * through the public objects the contexts' {@code queuePair()}, {@code region()} and {@code cmId()}
 * return, which serve the verbs layer's own helpers (a build test, {@code ProviderLayeringTest},
 * holds soft and ucx to this, and to naming none of the verbs objects' types).
 *
 * <p>This package is the provider ABI of this release, as rdma-core's {@code IBVERBS_PRIVATE}
 * symbols are: it is public so that providers in other modules can implement it, and it carries no
 * compatibility promise to applications, which use the verbs classes only.
 */
package io.regmem.registration.spi;
