/**
 * Storage I/O with io_uring registered ("fixed") buffers, bound to the kernel through FFM.
 *
 * <p>{@link io.regmem.registration.uring.IoRing} is one ring owned by one thread;
 * {@link io.regmem.registration.uring.IoRing#register(io.regmem.core.BufferPool)} puts every chunk
 * of a pool in the ring's fixed-buffer table at birth, so {@code READ_FIXED}/{@code WRITE_FIXED}
 * on any buffer of the pool skips the kernel's per-I/O page pinning; the same pool can be
 * registered with an RDMA protection domain too, so a block read from a file leaves by RDMA from
 * the same memory. A chunk leaving its pool goes back to the operating system only after the
 * kernel's tag completion says it no longer uses it.
 */
package io.regmem.registration.uring;
