/**
 * Off-heap memory with no notion of a transport: the zero-copy allocator ({@link io.regmem.core.BufferPool},
 * {@link io.regmem.core.PooledBuffer}), where its memory comes from ({@link io.regmem.core.ChunkSource},
 * {@link io.regmem.core.Chunk}), and scatter/gather lists over it ({@link io.regmem.core.ScatterList}).
 *
 * <p>Errors are {@link io.regmem.core.RdmaException}s carrying an {@link io.regmem.core.Errno}; they live
 * here, in core, because core reports them too and must not depend on the registration module.
 *
 * <p>Memory ordering: a buffer handle's fields are written only by its current owner; handles move
 * between threads through JCTools' MPMC queue (release on offer, acquire on poll), which publishes them.
 * A handle's live/free state is written with opaque stores and, in checked modes, freed with a
 * compare-and-set, so two racing frees of one buffer cannot both succeed.
 */
package io.regmem.core;
