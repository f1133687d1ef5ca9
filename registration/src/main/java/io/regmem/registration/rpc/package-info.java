/**
 * RPC over RDMA, after the kernel's xprtrdma ({@code net/sunrpc/xprtrdma}):
 * {@link io.regmem.registration.rpc.RpcTransport} is one end of a connection (credits, receive
 * posting, the Send path, completion handling, FRWR MRs, the flush at disconnect) and
 * {@link io.regmem.registration.rpc.RpcBuffer} its pools of requests, replies and send contexts;
 * {@link io.regmem.registration.rpc.SharedReceives} lets a server's connections share one receive
 * pool on a shared receive queue.
 * Every buffer, send context and MR the device may still touch goes back to its pool only after its
 * completion or flush; work-request ids carry generations, so a stale completion is counted and
 * dropped, never applied. Provider-neutral: it uses the public verbs API only. The lock-free pieces
 * are JCTools queues where one fits, and {@code SendCtxRing} (proved with Lincheck and stress tests)
 * where none does. Memory accesses and padding use the vocabulary and the one padding width (128
 * bytes) written down in {@link io.regmem.registration}'s package documentation.
 */
package io.regmem.registration.rpc;
