/**
 * Netty over regmem: {@link io.regmem.netty.RegmemByteBufAllocator}, a {@code ByteBufAllocator} whose
 * direct buffers are pooled, registered buffers of a {@link io.regmem.core.BufferPool}; and a Netty 4.2
 * transport whose channels are regmem RC connections ({@link io.regmem.netty.RegmemIoHandler},
 * {@link io.regmem.netty.RegmemSocketChannel}, {@link io.regmem.netty.RegmemServerSocketChannel}, over a
 * {@link io.regmem.netty.RegmemTransport}). See docs/netty.md.
 */
package io.regmem.netty;
