/**
 * Netty over regmem's memory: {@link io.regmem.netty.RegmemByteBufAllocator}, a {@code ByteBufAllocator}
 * whose direct buffers are pooled, registered buffers of a {@link io.regmem.core.BufferPool}.
 * See docs/netty.md.
 */
package io.regmem.netty;
