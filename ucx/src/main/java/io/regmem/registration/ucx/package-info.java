/**
 * The {@code ucx} provider: the verbs of {@code io.regmem.registration} over UCX's {@code libucp},
 * called through FFM. Its classes form four layers, each using only the ones below it:
 *
 * <ol>
 * <li><b>Binding</b>: {@code Ucp} (the downcalls, critical ones for the data path),
 * {@code UcpContext}, {@code UcpWorker}, and the struct classes in jextract's style
 * ({@code UcpRequestParam}, {@code UcpDtIov}, {@code UcpAmHandlerParam}) over {@code UcpLayout}.
 * Only these classes touch a struct offset of {@code UcpLayout}; the layers above use its status
 * codes and flag values ({@code UCS_*}, {@code AM_SEND_FLAG_*}, {@code AM_RECV_ATTR_FLAG_*},
 * {@code MEM_MAP_PROT_*}) and nothing else of it ({@code ProviderLayeringTest} checks).</li>
 * <li><b>Wire</b>: {@code UcxAm} (the active-message header), {@code RemoteKeyEnvelope} (an
 * exported key); the authenticated TCP handshake that exchanges worker addresses is
 * {@code io.regmem.registration.link}'s, shared with the other providers that connect processes.</li>
 * <li><b>Transport</b>: {@code UcxChannel} (a worker: the device's main one, or one per peer
 * process), {@code UcxEndpoint(s)} and {@code UcxTransports} (one endpoint per peer worker, what
 * its lanes are, whether its keys are NIC-enforced), {@code UcxSender} and
 * {@code UcxReceiver} (a QP's requests as messages, executed and checked at the target),
 * {@code UcxStaging} (bounce buffers of rendezvous transfers), {@code UcxKeyTable},
 * {@code UcxInbox}, {@code UcxOp}, {@code UcxWriteFlush}.</li>
 * <li><b>Verbs adapter</b>: {@code UcxProvider}, {@code UcxDevice}, {@code UcxQp}, {@code UcxCq},
 * {@code UcxCm}, {@code UcxMr}, {@code UcxChunkSource}: the spi's interfaces, reaching the verbs
 * layer through its contexts only ({@code UcxContexts} downcasts their attachments).</li>
 * </ol>
 *
 * <p>What is checked where, what runs where and what happens when a peer dies:
 * {@code docs/providers.md}. Locks: a QP's execution lock (the spi's) is taken before the device's
 * worker lock; code that holds the worker lock (the AM callback) only tries an execution lock.
 */
package io.regmem.registration.ucx;
