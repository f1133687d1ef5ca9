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
 */
package io.regmem.registration.spi;
