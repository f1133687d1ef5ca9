/**
 * The registration cache: {@link io.regmem.registration.cache.RegistrationCache} keeps memory
 * registrations for reuse, so registering (the slow part of RDMA) happens once per range.
 *
 * <p>Memory ordering, in the vocabulary of {@link io.regmem.registration}'s package documentation
 * (which also gives the one padding width, 128 bytes, that {@code RegionRefs} uses): the index ({@code RegionIndex}) is immutable and published
 * through a volatile field (release on write, acquire on read), so a reader sees a whole, consistent
 * index. A region's reference count is changed only by compare-and-set (acquire refuses to move
 * up from zero) and get-and-add (release); its {@code indexed} flag is volatile and is cleared
 * before the index that drops the region is published, so a reader that acquired a region from an
 * older index sees the flag and gives the region back. Its CLOCK bit uses opaque accesses: it is a
 * hint, and a lost update only makes eviction a little less exact. Writers (misses, evictions,
 * invalidations) are serialized by the cache's monitor; deregistration happens outside it.
 *
 * <p>Progress: hits are lock-free (a retry-free read plus one CAS that may fail, turning into a
 * miss); misses and invalidations take the monitor.
 */
package io.regmem.registration.cache;
